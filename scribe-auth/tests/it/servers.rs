//! The storage-server verbs against `scribe-auth serve` as a real process
//! over real TLS: `server-register` (administrators only, audited,
//! replayable, one name once), `resolve` (what a server learns about a
//! client certificate, in its own namespace only) and `revision`.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rcgen::{KeyPair, PKCS_ECDSA_P256_SHA256};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use scribe_auth::rows::{
    AuditRow, CaFamily, GrantRow, Key, NamespaceMemberRow, Role, Row, UserKind, VisibilityRow,
};
use scribe_auth::service::certificate_serial;
use scribe_auth::{AdminRequest, AuthDir, Id, InitOptions, Password};
use scribe_client::auth::{AuthService, Credential};
use scribe_format::sau2::{Sau2Request, Sau2Result};
use scribe_format::ErrorCode;

use super::support::Fixture;

const PASSWORD: &str = "ann's long password";

struct Served {
    fx: Fixture,
    child: Child,
    service: AuthService,
    admin: Credential,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn request(actor: Id, command: &'static str) -> AdminRequest<'static> {
    AdminRequest {
        actor,
        operation: Id::random(),
        intent: [7; 32],
        command,
        arguments: &[],
        now_ms: scribe_auth::now_ms(),
    }
}

fn wait_for(path: &Path) -> String {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if text.ends_with('\n') {
                return text.trim().to_owned();
            }
        }
        assert!(start.elapsed() < Duration::from_secs(60), "not started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// ann: writer of `studio/game`, reader of namespace `studio`; `studio/pub`
/// is public; `film/game` grants ann admin.
fn serve() -> Served {
    let fx = Fixture::new();
    let (mut dir, report) = AuthDir::init(InitOptions {
        data: fx.data.clone(),
        pepper_file: fx.pepper.clone(),
        witness_file: fx.witness.clone(),
        trust_domain: "studio.example".into(),
        admin_username: "admin".into(),
        admin_password: Some(Password::new(PASSWORD.into()).unwrap()),
        now_ms: scribe_auth::now_ms(),
    })
    .unwrap();
    let admin = report.admin_id;
    let pw = Password::new(PASSWORD.into()).unwrap();
    let r = dir
        .add_user(
            &request(admin, "user-add"),
            "ann",
            false,
            UserKind::Person,
            Some(&pw),
        )
        .unwrap();
    let Sau2Result::Rows(rows) = r else {
        panic!("{r:?}")
    };
    let ann = Id::parse(&rows[0][0]).unwrap();
    dir.administer(&request(admin, "grant"), |tx| {
        for (ns, repo, role) in [
            ("studio", "game", Role::Writer),
            ("film", "game", Role::Admin),
        ] {
            tx.put(
                &Key::Grant {
                    namespace: ns.into(),
                    repository: repo.into(),
                    user: ann,
                },
                &GrantRow { role },
            )?;
        }
        tx.put(
            &Key::NamespaceReader {
                namespace: "studio".into(),
                user: ann,
            },
            &NamespaceMemberRow {
                username: "ann".into(),
            },
        )?;
        tx.put(
            &Key::Visibility {
                namespace: "studio".into(),
                repository: "pub".into(),
            },
            &VisibilityRow {
                public: true,
                revision: 1,
            },
        )?;
        Ok(vec![])
    })
    .unwrap();
    let access_ca = dir.trust_anchor_pem(CaFamily::Access).unwrap();
    drop(dir);
    let runtime = fx.path("run");
    let child = Command::new(env!("CARGO_BIN_EXE_scribe-auth"))
        .arg("serve")
        .arg("--data")
        .arg(&fx.data)
        .arg("--pepper-file")
        .arg(&fx.pepper)
        .arg("--witness-file")
        .arg(&fx.witness)
        .args(["--listen", "127.0.0.1:0", "--runtime-dir"])
        .arg(&runtime)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let listen = wait_for(&runtime.join("listen"));
    let service = AuthService::new(
        &format!("sau2://localhost:{}", listen.rsplit_once(':').unwrap().1),
        access_ca,
    )
    .unwrap();
    Served {
        fx,
        child,
        service,
        admin: Credential {
            certificate_pem: report.admin_certificate_pem,
            private_key_pem: report.admin_private_key_pem,
        },
    }
}

fn call(s: &Served, who: &Credential, op: [u8; 16], verb: &str, args: &[&str]) -> Sau2Result {
    s.service
        .call(
            Some(who),
            &Sau2Request {
                operation: op,
                verb: verb.into(),
                arguments: args.iter().map(|a| a.to_string()).collect(),
            },
        )
        .unwrap()
}

fn rows(r: Sau2Result) -> Vec<Vec<String>> {
    match r {
        Sau2Result::Rows(rows) => rows,
        other => panic!("{other:?}"),
    }
}

fn refusal(r: Sau2Result) -> ErrorCode {
    r.error_code().unwrap_or_else(|| panic!("a refusal: {r:?}"))
}

/// Register `name` in `namespace` with a fresh key: the server's credential.
fn register(s: &Served, name: &str, namespace: &str) -> (Vec<String>, Credential) {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
    let spki = hex::encode(key.public_key_der());
    let r = call(
        s,
        &s.admin,
        [name.len() as u8; 16],
        "server-register",
        &[name, namespace, &spki, "depot.example", "10.0.0.7"],
    );
    let row = rows(r).pop().unwrap();
    let cred = Credential {
        certificate_pem: row[2].clone(),
        private_key_pem: key.serialize_pem(),
    };
    (row, cred)
}

fn der(pem: &str) -> Vec<u8> {
    CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .as_ref()
        .to_vec()
}

#[test]
fn server_register_issues_an_audited_server_credential_once() {
    let s = serve();
    let (row, _) = register(&s, "depot", "studio");
    assert_eq!(row.len(), 8);
    let [server_id, credential, cert, credential_ca, access_ca, domain, _inc, revision] =
        <[String; 8]>::try_from(row.clone()).unwrap();
    assert_eq!(server_id.len(), 32);
    assert_eq!(
        certificate_serial(&der(&cert)).unwrap().hex(),
        credential,
        "the serial is the credential id"
    );
    assert!(credential_ca.contains("BEGIN CERTIFICATE"));
    assert!(access_ca.contains("BEGIN CERTIFICATE"));
    assert_eq!(domain, "studio.example");
    // An administrator's credential is not a server's.
    let r = call(&s, &s.admin, [5; 16], "revision", &[]);
    assert_eq!(refusal(r), ErrorCode::Forbidden);
    // Another registration of the name is refused; the same request again
    // (same operation id) gets the recorded outcome, not a second change.
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
    let spki = hex::encode(key.public_key_der());
    let r = call(
        &s,
        &s.admin,
        [96; 16],
        "server-register",
        &["depot3", "studio", &spki],
    );
    let first = rows(r);
    let r = call(
        &s,
        &s.admin,
        [96; 16],
        "server-register",
        &["depot3", "studio", &spki],
    );
    assert_eq!(rows(r), first, "a replay returns the recorded outcome");
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
    let r = call(
        &s,
        &s.admin,
        [99; 16],
        "server-register",
        &["depot", "studio", &hex::encode(key.public_key_der())],
    );
    assert_eq!(refusal(r), ErrorCode::AlreadyExists);
    // A host that is neither a name nor an address is refused.
    let r = call(
        &s,
        &s.admin,
        [98; 16],
        "server-register",
        &[
            "depot2",
            "studio",
            &hex::encode(key.public_key_der()),
            "a b",
        ],
    );
    assert_eq!(refusal(r), ErrorCode::Usage);
    // A non-administrator may not register servers.
    let ann = s.service.login("ann", PASSWORD).unwrap();
    let r = call(
        &s,
        &ann.credential,
        [97; 16],
        "server-register",
        &["mine", "studio", &hex::encode(key.public_key_der())],
    );
    assert_eq!(refusal(r), ErrorCode::Forbidden);
    // The audit trail names the command and the key id.
    let mut s = s;
    let _ = s.child.kill();
    let _ = s.child.wait();
    let dir = s.fx.open().unwrap();
    let audits: Vec<AuditRow> = dir
        .scan_prefix("audit/")
        .unwrap()
        .into_iter()
        .map(|(_, b)| AuditRow::decode(&b).unwrap())
        .filter(|a| a.command == "server-register")
        .collect();
    assert!(
        audits.iter().any(|a| a.ok
            && a.arguments.starts_with("depot studio key:")
            && a.arguments.ends_with("depot.example 10.0.0.7")),
        "{audits:?}"
    );
    assert!(audits.iter().any(|a| !a.ok), "{audits:?}");
    assert!(dir.revision() >= revision.parse::<u64>().unwrap());
}

/// Registering a storage server is a global administrative power, like
/// `user-add`: an administrator's everyday session (`scribe login`) is
/// refused with `forbidden`, saying to sign in with `scribe login --admin`,
/// and the refusal is audited; the same administrator's admin-login
/// registers the server.
#[test]
fn server_register_needs_an_admin_login_not_a_session() {
    let s = serve();
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
    let spki = hex::encode(key.public_key_der());
    let session = s.service.login("admin", PASSWORD).unwrap();
    let r = call(
        &s,
        &session.credential,
        [41; 16],
        "server-register",
        &["depot", "studio", &spki],
    );
    let Sau2Result::Error { code, message } = &r else {
        panic!("a refusal: {r:?}")
    };
    assert_eq!(ErrorCode::from_number(*code), Some(ErrorCode::Forbidden));
    assert!(
        message.contains("server-register") && message.contains("scribe login --admin"),
        "{message}"
    );
    let admin_login = s.service.admin_login("admin", PASSWORD).unwrap();
    let r = call(
        &s,
        &admin_login.credential,
        [42; 16],
        "server-register",
        &["depot", "studio", &spki],
    );
    let row = rows(r).pop().unwrap();
    assert_eq!(row.len(), 8);
    assert!(row[2].contains("BEGIN CERTIFICATE"), "{row:?}");
    // The refused session's attempt is in the audit trail, by the admin.
    let mut s = s;
    let _ = s.child.kill();
    let _ = s.child.wait();
    let dir = s.fx.open().unwrap();
    let audits: Vec<AuditRow> = dir
        .scan_prefix("audit/")
        .unwrap()
        .into_iter()
        .map(|(_, b)| AuditRow::decode(&b).unwrap())
        .filter(|a| a.command == "server-register")
        .collect();
    assert_eq!(audits.len(), 2, "{audits:?}");
    assert!(!audits[0].ok && audits[1].ok, "{audits:?}");
}

#[test]
fn resolve_tells_a_server_about_a_client_in_its_namespace_only() {
    let s = serve();
    let (_, depot) = register(&s, "depot", "studio");
    let (_, film) = register(&s, "film-depot", "film");
    let ann = s.service.login("ann", PASSWORD).unwrap();
    let cert = hex::encode(der(&ann.credential.certificate_pem));
    let answer = rows(call(&s, &depot, [1; 16], "resolve", &[&cert]));
    assert_eq!(answer[0][0], "revision");
    let has = |row: &[&str]| answer.iter().any(|r| r == row);
    assert!(
        has(&[
            "credential",
            &ann.credential_id,
            "session",
            "true",
            &ann.expires_ms.to_string()
        ]),
        "{answer:?}"
    );
    assert!(
        has(&["user", &ann.user_id, "ann", "true", "false"]),
        "{answer:?}"
    );
    assert!(has(&["grant", "game", "writer"]), "{answer:?}");
    assert!(has(&["namespace-reader"]), "{answer:?}");
    assert!(has(&["visibility", "pub", "public"]), "{answer:?}");
    assert!(!answer.iter().any(|r| r[..] == ["grant", "game", "admin"]));
    // The film server sees the film grant only.
    let answer = rows(call(&s, &film, [2; 16], "resolve", &[&cert]));
    assert!(answer.iter().any(|r| r[..] == ["grant", "game", "admin"]));
    assert!(!answer.iter().any(|r| r[0] == "namespace-reader"));
    // A certificate that is not a stored credential's: only the revision.
    let mut tampered = der(&ann.credential.certificate_pem);
    let last = tampered.len() - 1;
    tampered[last] ^= 1;
    let answer = rows(call(
        &s,
        &depot,
        [3; 16],
        "resolve",
        &[&hex::encode(tampered)],
    ));
    assert_eq!(answer.len(), 1, "{answer:?}");
    assert_eq!(answer[0][0], "revision");
    // revision: the same incarnation and revision as resolve's row.
    let rev = rows(call(&s, &depot, [4; 16], "revision", &[]));
    let resolved = rows(call(&s, &depot, [5; 16], "resolve", &[&cert]));
    assert_eq!(rev[0][..], resolved[0][1..]);
    // After a change (ann signs out) the revision has moved on, and the
    // credential reads as disabled.
    s.service.logout(&ann.credential).unwrap();
    let after = rows(call(&s, &depot, [6; 16], "revision", &[]));
    assert_eq!(after[0][0], rev[0][0]);
    assert!(after[0][1].parse::<u64>().unwrap() > rev[0][1].parse::<u64>().unwrap());
    let answer = rows(call(&s, &depot, [7; 16], "resolve", &[&cert]));
    assert!(answer
        .iter()
        .any(|r| r[0] == "credential" && r[3] == "false"));
    // Only servers ask: a user's credential is refused.
    let ann2 = s.service.login("ann", PASSWORD).unwrap();
    let r = call(&s, &ann2.credential, [8; 16], "resolve", &[&cert]);
    assert_eq!(refusal(r), ErrorCode::Forbidden);
    let r = call(&s, &ann2.credential, [9; 16], "revision", &[]);
    assert_eq!(refusal(r), ErrorCode::Forbidden);
}

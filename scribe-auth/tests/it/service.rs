//! `scribe-auth serve` as a real process over real TLS: login, whoami,
//! logout, refusals, replays, throttling, audit.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, PKCS_ECDSA_P256_SHA256};
use scribe_auth::audit::AuditArg;
use scribe_auth::rows::{AuditRow, CaFamily, Key, Row, UserKind};
use scribe_auth::{Id, Password};
use scribe_client::auth::{AuthClientError, AuthService, Credential};
use scribe_format::sau2::Sau2Request;
use scribe_format::ErrorCode;

use super::support::{request, Fixture};

const ANN_PASSWORD: &str = "ann's long password";
const DAN_PASSWORD: &str = "dan's long password";

struct Served {
    fx: Fixture,
    child: Child,
    service: AuthService,
    credential_ca: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    fn stop(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

/// An auth directory with users ann (enabled) and dan (disabled), served by
/// the real binary on 127.0.0.1.
fn serve() -> Served {
    let fx = Fixture::new();
    let (mut dir, report) = fx.init();
    let admin = report.admin_id;
    for (name, pw) in [("ann", ANN_PASSWORD), ("dan", DAN_PASSWORD)] {
        let p = Password::new(pw.into()).unwrap();
        dir.add_user(
            &request(admin, "user-add", &[AuditArg::word(name)]),
            name,
            false,
            UserKind::Person,
            Some(&p),
        )
        .unwrap();
    }
    dir.set_user_enabled(
        &request(admin, "user-disable", &[AuditArg::word("dan")]),
        "dan",
        false,
    )
    .unwrap();
    let access_ca = dir.trust_anchor_pem(CaFamily::Access).unwrap();
    let credential_ca = dir.trust_anchor_pem(CaFamily::Credential).unwrap();
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
        credential_ca,
    }
}

fn wait_for(path: &PathBuf) -> String {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if text.ends_with('\n') {
                return text.trim().to_owned();
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the service did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn refused_code(e: AuthClientError) -> ErrorCode {
    match e {
        AuthClientError::Refused { .. } | AuthClientError::TlsRefused(_) => e.code(),
        other => panic!("expected a refusal, got {other}"),
    }
}

#[test]
fn login_then_whoami_names_the_user_and_logout_ends_the_session() {
    let s = serve();
    let login = s.service.login("ann", ANN_PASSWORD).unwrap();
    assert_eq!(login.username, "ann");
    let who = s.service.whoami(&login.credential).unwrap();
    assert_eq!(who.username, "ann");
    assert_eq!(who.user_id, login.user_id);
    assert_eq!(who.credential_id, login.credential_id);
    assert_eq!(who.kind, "session");
    assert_eq!(who.expires_ms, login.expires_ms);
    // The certificate layout the storage servers will check.
    assert!(login
        .credential
        .certificate_pem
        .starts_with("-----BEGIN CERTIFICATE-----"));
    s.service.logout(&login.credential).unwrap();
    let e = s.service.whoami(&login.credential).unwrap_err();
    assert_eq!(refused_code(e), ErrorCode::Unauthenticated);
    // Without a credential, whoami is refused by name.
    let e = s
        .service
        .call(
            None,
            &Sau2Request {
                operation: [1; 16],
                verb: "whoami".into(),
                arguments: vec![],
            },
        )
        .unwrap();
    assert_eq!(e.error_code(), Some(ErrorCode::Unauthenticated));
}

#[test]
fn wrong_password_unknown_and_disabled_users_are_refused_alike() {
    let s = serve();
    for (user, pw) in [
        ("ann", "not the password"),
        ("nobody", ANN_PASSWORD),
        ("dan", "wrong for dan!"),
    ] {
        let e = s.service.login(user, pw).unwrap_err();
        let AuthClientError::Refused { code, message } = &e else {
            panic!("{e}")
        };
        assert_eq!(
            ErrorCode::from_number(*code),
            Some(ErrorCode::Unauthenticated),
            "{user}"
        );
        assert_eq!(message, "invalid username or password", "{user}");
    }
    // A disabled user with the right password learns that it is disabled.
    let e = s.service.login("dan", DAN_PASSWORD).unwrap_err();
    let AuthClientError::Refused { code, message } = &e else {
        panic!("{e}")
    };
    assert_eq!(
        ErrorCode::from_number(*code),
        Some(ErrorCode::Unauthenticated)
    );
    assert!(message.contains("disabled"), "{message}");
}

#[test]
fn failed_logins_are_slowed_per_user() {
    let s = serve();
    for _ in 0..scribe_auth::service::FREE_FAILURES_PER_USER {
        let e = s.service.login("ann", "not the password").unwrap_err();
        assert_eq!(refused_code(e), ErrorCode::Unauthenticated);
    }
    // The next attempt, even with the right password, must wait.
    let e = s.service.login("ann", ANN_PASSWORD).unwrap_err();
    assert_eq!(refused_code(e), ErrorCode::LoginThrottled);
    // Another user from the same address is not slowed yet.
    let e = s.service.login("dan", DAN_PASSWORD).unwrap_err();
    assert_eq!(refused_code(e), ErrorCode::Unauthenticated);
}

fn forged(key: &KeyPair, cert_pem: String) -> Credential {
    Credential {
        certificate_pem: cert_pem,
        private_key_pem: key.serialize_pem(),
    }
}

#[test]
fn forged_and_foreign_certificates_are_refused() {
    let s = serve();
    let login = s.service.login("ann", ANN_PASSWORD).unwrap();
    // A self-signed p256 certificate naming the same credential.
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, login.credential_id.as_str());
    params.distinguished_name = dn;
    params.serial_number = Some(Id::parse(&login.credential_id).unwrap().0.to_vec().into());
    let self_signed = params.clone().self_signed(&key).unwrap();
    let e = s
        .service
        .whoami(&forged(&key, self_signed.pem()))
        .unwrap_err();
    assert_eq!(refused_code(e), ErrorCode::Unauthenticated);
    // A certificate from another CA, same layout.
    let other_ca_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
    let mut ca_params = CertificateParams::default();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let other_ca = ca_params.self_signed(&other_ca_key).unwrap();
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let foreign = params.signed_by(&key, &other_ca, &other_ca_key).unwrap();
    let e = s.service.whoami(&forged(&key, foreign.pem())).unwrap_err();
    assert_eq!(refused_code(e), ErrorCode::Unauthenticated);
    // The real one still works.
    assert_eq!(s.service.whoami(&login.credential).unwrap().username, "ann");
    // The credential CA the server trusts signed it.
    assert!(!s.credential_ca.is_empty());
}

#[test]
fn a_replayed_login_returns_the_same_outcome() {
    let s = serve();
    let key = scribe_client::auth::generate_key().unwrap();
    let op = [9; 16];
    let first = s
        .service
        .login_with_key(op, "ann", ANN_PASSWORD, &key)
        .unwrap();
    let again = s
        .service
        .login_with_key(op, "ann", ANN_PASSWORD, &key)
        .unwrap();
    assert_eq!(again.credential_id, first.credential_id);
    assert_eq!(
        again.credential.certificate_pem,
        first.credential.certificate_pem
    );
    // The same id with another intent (another password) is refused.
    let e = s
        .service
        .login_with_key(op, "ann", "another password", &key)
        .unwrap_err();
    assert_eq!(refused_code(e), ErrorCode::OperationIntentMismatch);
    // A refused login replays as refused, even with the same arguments later.
    let bad = [8; 16];
    let e = s
        .service
        .login_with_key(bad, "nobody", ANN_PASSWORD, &key)
        .unwrap_err();
    assert_eq!(refused_code(e), ErrorCode::Unauthenticated);
    let e = s
        .service
        .login_with_key(bad, "nobody", ANN_PASSWORD, &key)
        .unwrap_err();
    assert_eq!(refused_code(e), ErrorCode::Unauthenticated);
}

#[test]
fn logout_is_audited_without_the_password_and_advances_the_revision() {
    let mut s = serve();
    let login = s.service.login("ann", ANN_PASSWORD).unwrap();
    s.service.logout(&login.credential).unwrap();
    s.stop();
    let dir = s.fx.open().unwrap();
    let rows: Vec<AuditRow> = dir
        .scan_prefix("audit/")
        .unwrap()
        .iter()
        .map(|(_, v)| AuditRow::decode(v).unwrap())
        .collect();
    let logout = rows
        .iter()
        .find(|r| r.command == "logout")
        .expect("a logout audit row");
    assert!(logout.ok);
    assert_eq!(logout.arguments, login.credential_id);
    assert!(rows.iter().any(|r| r.command == "login" && r.ok));
    for (k, v) in dir.scan_prefix("").unwrap() {
        let text = String::from_utf8_lossy(&v);
        assert!(!text.contains(ANN_PASSWORD), "{k} holds the password");
    }
    // init 1, user-add ×2, user-disable, logout: revision 5.
    assert_eq!(dir.revision(), 5);
    let cred = dir
        .get::<scribe_auth::rows::CredentialRow>(&Key::Credential(
            Id::parse(&login.credential_id).unwrap(),
        ))
        .unwrap()
        .unwrap();
    assert!(!cred.enabled);
}

/// SIGTERM removes the runtime files (their presence says the service
/// runs) and ends the service with success.
#[cfg(unix)]
#[test]
fn sigterm_removes_the_runtime_files() {
    let mut s = serve();
    let runtime = s.fx.path("run");
    assert!(runtime.join("listen").exists() && runtime.join("scribe-auth.pid").exists());
    // SAFETY: kill(2) with a pid we spawned and have not waited for.
    let rc = unsafe { libc::kill(s.child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(rc, 0);
    let status = s.child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(!runtime.join("listen").exists());
    assert!(!runtime.join("scribe-auth.pid").exists());
}

/// `scribe-auth serve` on `s`'s directory with runtime directory `run`,
/// listening on `listen`, its stderr kept.
#[cfg(unix)]
fn serve_again(s: &Served, listen: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_scribe-auth"))
        .arg("serve")
        .arg("--data")
        .arg(&s.fx.data)
        .arg("--pepper-file")
        .arg(&s.fx.pepper)
        .arg("--witness-file")
        .arg(&s.fx.witness)
        .args(["--listen", listen, "--runtime-dir"])
        .arg(s.fx.path("run"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// After SIGKILL the runtime files stay; the next `serve` removes them
/// before it opens anything (a start that then fails, here on a taken
/// address, leaves no dead address behind) and says what it found: a dead
/// pid, a pid file holding no pid, a pid reused by another program. A
/// running `scribe-auth` that holds the directory keeps its files when a
/// second start is refused. It used to overwrite them only once listening.
#[cfg(unix)]
#[test]
fn a_start_after_sigkill_removes_the_stale_runtime_files_and_says_so() {
    use scribe_format::runtime::{leftover, live_listen, Holder};
    let mut s = serve();
    let run = s.fx.path("run");
    let old_pid = s.child.id();
    let old_addr = std::fs::read_to_string(run.join("listen")).unwrap();
    let old_addr = old_addr.trim();
    assert_eq!(live_listen(&run, "scribe-auth").as_deref(), Some(old_addr));
    s.child.kill().unwrap(); // SIGKILL
    s.child.wait().unwrap();
    assert_eq!(
        leftover(&run, "scribe-auth").unwrap().holder,
        Holder::Gone(old_pid)
    );
    assert_eq!(
        live_listen(&run, "scribe-auth"),
        None,
        "a dead service's address"
    );

    // A start that fails after opening (its address is taken) removed them.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let out = serve_again(&s, &taken.local_addr().unwrap().to_string())
        .wait_with_output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(&format!(
            "removed stale runtime files in {} (pid {old_pid} (gone), listen {old_addr})",
            run.display()
        )),
        "{said}"
    );
    assert_eq!(leftover(&run, "scribe-auth"), None, "{said}");

    // Garbage in the pid file, and a pid that another program runs as.
    for (pid_text, named) in [
        (
            "not a pid\n".to_owned(),
            "pid file holds no pid: \"not a pid\"".to_owned(),
        ),
        (String::new(), "pid file holds no pid: \"\"".to_owned()),
        (
            "99999999999999\n".to_owned(),
            "pid file holds no pid: \"99999999999999\"".to_owned(),
        ),
        (
            format!("{}\n", std::process::id()),
            format!("pid {} (running as ", std::process::id()),
        ),
    ] {
        std::fs::write(run.join("scribe-auth.pid"), &pid_text).unwrap();
        std::fs::write(run.join("listen"), "127.0.0.1:1\n").unwrap();
        assert_eq!(live_listen(&run, "scribe-auth"), None, "{pid_text:?}");
        let out = serve_again(&s, &taken.local_addr().unwrap().to_string())
            .wait_with_output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.contains("removed stale runtime files"), "{said}");
        assert!(said.contains(&named), "{named}: {said}");
        assert_eq!(leftover(&run, "scribe-auth"), None, "{said}");
    }

    // A running scribe-auth: a second start is refused and keeps its files.
    let mut first = serve_again(&s, "127.0.0.1:0");
    let addr = wait_for(&run.join("listen"));
    assert_eq!(
        live_listen(&run, "scribe-auth").as_deref(),
        Some(addr.as_str())
    );
    let out = serve_again(&s, "127.0.0.1:0").wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        live_listen(&run, "scribe-auth").as_deref(),
        Some(addr.as_str())
    );
    assert_eq!(
        leftover(&run, "scribe-auth").unwrap().holder,
        Holder::Running(first.id())
    );
    first.kill().unwrap();
    first.wait().unwrap();
}

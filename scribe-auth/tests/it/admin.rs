//! The administrative verbs through `scribe-auth serve` (the real binary,
//! real TLS on 127.0.0.1): every verb, every refusal, the audit trail, the
//! expiry sweep at start, and SIGKILL during a loop of administration.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use scribe_auth::audit::AuditArg;
use scribe_auth::rows::{CaFamily, CredentialKind, CredentialRow, UserKind};
use scribe_auth::{Id, Password};
use scribe_client::auth::{AuthClientError, AuthService, Credential};
use scribe_format::ErrorCode;

use super::support::{request, Fixture, ADMIN_PASSWORD};

const ANN_PASSWORD: &str = "ann's long password";
const BOB_PASSWORD: &str = "bob's first password";
const BOB_NEW_PASSWORD: &str = "bob's second password";
const DAY_MS: u64 = 86_400_000;

struct Served {
    fx: Fixture,
    child: Option<Child>,
    service: AuthService,
    admin: Credential,
    runtime: PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The first line of `path` once the service `child` wrote it; a child
/// that exits first, or takes over 60 s, fails the test with its stderr
/// (`stderr`), so a start that fails says why.
fn wait_for(path: &PathBuf, child: &mut Child, stderr: &PathBuf) -> String {
    let start = Instant::now();
    let told = || std::fs::read_to_string(stderr).unwrap_or_default();
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if text.ends_with('\n') {
                return text.trim().to_owned();
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the service exited ({status}) before listening: {}", told());
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the service did not start in 60 s: {}",
            told()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Served {
    /// An auth directory with the bootstrap administrator `admin` and the
    /// person `ann` (no administrator), served by the real binary.
    fn new() -> Served {
        Served::with(|_| {})
    }

    fn with(prepare: impl FnOnce(&mut scribe_auth::AuthDir)) -> Served {
        let fx = Fixture::new();
        // The bootstrap credential must be valid now (the fixture's clock is
        // in the future).
        let (mut dir, report) = scribe_auth::AuthDir::init(scribe_auth::InitOptions {
            data: fx.data.clone(),
            pepper_file: fx.pepper.clone(),
            witness_file: fx.witness.clone(),
            trust_domain: "studio.example".into(),
            admin_username: "admin".into(),
            admin_password: Some(Password::new(ADMIN_PASSWORD.into()).unwrap()),
            now_ms: scribe_auth::now_ms() - 60_000,
        })
        .unwrap();
        let p = Password::new(ANN_PASSWORD.into()).unwrap();
        dir.add_user(
            &request(report.admin_id, "user-add", &[AuditArg::word("ann")]),
            "ann",
            false,
            UserKind::Person,
            Some(&p),
        )
        .unwrap();
        prepare(&mut dir);
        let access_ca = dir.trust_anchor_pem(CaFamily::Access).unwrap();
        drop(dir);
        let admin = Credential {
            certificate_pem: report.admin_certificate_pem.clone(),
            private_key_pem: report.admin_private_key_pem.clone(),
        };
        let runtime = fx.path("run");
        let mut s = Served {
            fx,
            child: None,
            service: AuthService::new("sau2://localhost:1", access_ca).unwrap(),
            admin,
            runtime,
        };
        s.start();
        s
    }

    fn start(&mut self) {
        let _ = std::fs::remove_file(self.runtime.join("listen"));
        let stderr = self.fx.path("serve.stderr");
        let mut child = Command::new(env!("CARGO_BIN_EXE_scribe-auth"))
            .arg("serve")
            .arg("--data")
            .arg(&self.fx.data)
            .arg("--pepper-file")
            .arg(&self.fx.pepper)
            .arg("--witness-file")
            .arg(&self.fx.witness)
            .args(["--listen", "127.0.0.1:0", "--runtime-dir"])
            .arg(&self.runtime)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let listen = wait_for(&self.runtime.join("listen"), &mut child, &stderr);
        self.child = Some(child);
        self.service = AuthService::new(
            &format!("sau2://localhost:{}", listen.rsplit_once(':').unwrap().1),
            self.service.ca_pem.clone(),
        )
        .unwrap();
    }

    /// SIGKILL (std's kill) and wait.
    fn kill(&mut self) {
        let mut c = self.child.take().unwrap();
        c.kill().unwrap();
        c.wait().unwrap();
    }

    fn admin(&self, verb: &str, args: &[&str]) -> Vec<Vec<String>> {
        self.service
            .admin(&self.admin, verb, args)
            .unwrap_or_else(|e| panic!("{verb} {args:?}: {e}"))
    }

    fn login(&self, user: &str, password: &str) -> Credential {
        self.service.login(user, password).unwrap().credential
    }

    /// The audit rows, newest first, as the service answers them.
    fn audit(&self, filters: &[&str]) -> Vec<Vec<String>> {
        self.admin("audit", filters)
    }

    /// Every stored row (after stopping the service).
    fn all_rows(&mut self) -> Vec<(String, Vec<u8>)> {
        self.kill();
        let dir = self.fx.open().unwrap();
        dir.scan_prefix("").unwrap()
    }
}

fn code(r: Result<impl std::fmt::Debug, AuthClientError>) -> ErrorCode {
    match r {
        Ok(v) => panic!("expected a refusal, got {v:?}"),
        Err(e @ (AuthClientError::Refused { .. } | AuthClientError::TlsRefused(_))) => e.code(),
        Err(other) => panic!("expected a refusal, got {other}"),
    }
}

fn in_a_day() -> String {
    (scribe_auth::now_ms() + DAY_MS).to_string()
}

#[test]
fn an_administrator_adds_a_user_who_signs_in_and_every_user_verb_works() {
    let mut s = Served::new();
    let id = s.admin("user-add", &["bob", BOB_PASSWORD, "false", "person"]);
    assert_eq!(id[0].len(), 1);
    let bob = s.login("bob", BOB_PASSWORD);
    assert_eq!(s.service.whoami(&bob).unwrap().username, "bob");
    // A second add of the same name is refused.
    assert_eq!(
        code(s.service.admin(
            &s.admin,
            "user-add",
            &["bob", BOB_PASSWORD, "false", "person"]
        )),
        ErrorCode::AlreadyExists
    );
    // A service user without a password cannot sign in.
    s.admin("user-add", &["ci", "", "false", "service"]);
    let users = s.admin("user-list", &[]);
    let row = |name: &str| users.iter().find(|r| r[0] == name).unwrap().clone();
    assert_eq!(row("bob")[1], id[0][0]);
    assert_eq!(row("bob")[2..], ["true", "false", "person", "1"]);
    assert_eq!(row("admin")[2..5], ["true", "true", "person"]);
    assert_eq!(row("ci")[4..], ["service", ""]);
    // Disable: no sign-in, and the session stops working.
    s.admin("user-disable", &["bob"]);
    assert_eq!(
        code(s.service.login("bob", BOB_PASSWORD)),
        ErrorCode::Unauthenticated
    );
    assert_eq!(code(s.service.whoami(&bob)), ErrorCode::Unauthenticated);
    s.admin("user-enable", &["bob"]);
    assert_eq!(s.service.whoami(&bob).unwrap().username, "bob");
    // A new password ends the sessions of the old one.
    let r = s.admin("user-set-password", &["bob", BOB_NEW_PASSWORD]);
    assert_eq!(r, [["2", "1"]]);
    assert_eq!(code(s.service.whoami(&bob)), ErrorCode::Unauthenticated);
    assert_eq!(
        code(s.service.login("bob", BOB_PASSWORD)),
        ErrorCode::Unauthenticated
    );
    s.login("bob", BOB_NEW_PASSWORD);
    // A password the policy refuses: usage, audited as rejected.
    assert_eq!(
        code(
            s.service
                .admin(&s.admin, "user-add", &["hal", "short", "false", "person"])
        ),
        ErrorCode::Usage
    );
    // The administrator cannot disable itself.
    assert_eq!(
        code(s.service.admin(&s.admin, "user-disable", &["admin"])),
        ErrorCode::Usage
    );
    // Every change is audited, newest first, and no password is in any row.
    let audit = s.audit(&["limit=4"]);
    assert_eq!(audit.len(), 4);
    assert_eq!(
        (
            audit[1][4].as_str(),
            audit[1][6].as_str(),
            audit[1][7].as_str()
        ),
        ("user-add", "rejected", "hal")
    );
    assert_eq!(
        (
            audit[0][4].as_str(),
            audit[0][6].as_str(),
            audit[0][7].as_str()
        ),
        ("user-disable", "rejected", "admin")
    );
    assert_eq!(audit[2][4], "login");
    let sequences: Vec<u64> = audit.iter().map(|r| r[0].parse().unwrap()).collect();
    assert!(sequences.windows(2).all(|w| w[0] > w[1]));
    // Paging: the rows before a sequence, newest first.
    let before = format!("before={}", audit[1][0]);
    let page = s.audit(&["limit=2", &before]);
    assert_eq!(page, audit[2..4]);
    assert!(s.audit(&["before=0"]).is_empty());
    let adds = s.audit(&["command=user-add", "outcome=ok"]);
    assert!(adds
        .iter()
        .any(|r| r[3] == "admin" && r[7] == "ci --service --no-password"));
    assert!(adds.iter().any(|r| r[7] == "bob"));
    let set = s.audit(&["command=user-set-password"]);
    assert_eq!(set[0][7], "bob");
    for (k, v) in s.all_rows() {
        let text = String::from_utf8_lossy(&v);
        for pw in [BOB_PASSWORD, BOB_NEW_PASSWORD, ANN_PASSWORD, ADMIN_PASSWORD] {
            assert!(!text.contains(pw), "{k} holds a password");
        }
    }
}

#[test]
fn a_non_administrator_is_refused_with_forbidden_and_a_rejected_audit_row() {
    let s = Served::new();
    let ann = s.login("ann", ANN_PASSWORD);
    let svc = &s.service;
    for (verb, args) in [
        // Authorization comes before the password policy.
        ("user-add", vec!["eve", "short", "false", "person"]),
        (
            "user-add",
            vec!["eve", "eve's long password", "true", "person"],
        ),
        ("user-disable", vec!["admin"]),
        ("user-set-password", vec!["admin", "a new long password"]),
        ("user-list", vec![]),
        ("grant-set", vec!["art", "game", "ann", "admin"]),
        ("namespace-add", vec!["art", "admin", "ann"]),
        ("namespace-list", vec![]),
        ("visibility-set", vec!["art", "game", "public"]),
        ("audit", vec![]),
        ("credential-list", vec!["admin"]),
    ] {
        assert_eq!(
            code(svc.admin(&ann, verb, &args)),
            ErrorCode::Forbidden,
            "{verb}"
        );
    }
    // No credential at all: unauthenticated.
    let anonymous = svc.call(
        None,
        &scribe_format::sau2::Sau2Request {
            operation: [9; 16],
            verb: "user-list".into(),
            arguments: vec![],
        },
    );
    assert_eq!(
        anonymous.unwrap().error_code(),
        Some(ErrorCode::Unauthenticated)
    );
    let rejected = s.audit(&["outcome=rejected", "user=ann"]);
    for verb in [
        "user-add",
        "user-disable",
        "user-set-password",
        "user-list",
        "grant-set",
        "namespace-add",
        "namespace-list",
        "visibility-set",
        "audit",
        "credential-list",
    ] {
        assert!(
            rejected.iter().any(|r| r[4] == verb && r[6] == "rejected"),
            "no rejected audit row for {verb}"
        );
    }
    // The refused user-add is audited without its password.
    let add = rejected.iter().find(|r| r[4] == "user-add").unwrap();
    assert_eq!(add[7], "eve --admin");
    // Nothing was applied.
    assert!(!s.admin("user-list", &[]).iter().any(|r| r[0] == "eve"));
    assert!(s.admin("grant-list", &["art"]).is_empty());
}

#[test]
fn only_an_administrator_sign_in_carries_global_powers() {
    let s = Served::new();
    // The administrator's everyday session is refused user management.
    let session = s.login("admin", ADMIN_PASSWORD);
    assert_eq!(
        code(s.service.admin(&session, "user-list", &[])),
        ErrorCode::Forbidden
    );
    // admin-login: a `user` credential with the password generation, short-lived.
    let before = scribe_auth::now_ms();
    let signed = s.service.admin_login("admin", ADMIN_PASSWORD).unwrap();
    assert!(signed.expires_ms <= before + 3_600_000 + 60_000);
    let who = s.service.whoami(&signed.credential).unwrap();
    assert_eq!(who.kind, "user");
    s.service
        .admin(&signed.credential, "user-list", &[])
        .unwrap();
    let listed = s.admin("credential-list", &["admin"]);
    let row = listed
        .iter()
        .find(|r| r[0] == signed.credential_id)
        .unwrap();
    assert_eq!(
        (row[1].as_str(), row[5].as_str(), row[8].as_str()),
        ("user", "admin-login", "1")
    );
    // Not for a non-administrator, even with the right password.
    assert_eq!(
        code(s.service.admin_login("ann", ANN_PASSWORD)),
        ErrorCode::Unauthenticated
    );
    let refused = s.audit(&["command=admin-login", "outcome=rejected"]);
    assert!(
        refused[0][7].starts_with("ann not an administrator"),
        "{refused:?}"
    );
    // A new password ends the admin-login credential too.
    s.admin("user-set-password", &["admin", "another long password"]);
    assert_eq!(
        code(s.service.whoami(&signed.credential)),
        ErrorCode::Unauthenticated
    );
}

#[test]
fn a_namespace_admin_administers_its_namespace_only() {
    let s = Served::new();
    for u in ["carl", "dora"] {
        s.admin(
            "user-add",
            &[u, "a long enough password", "false", "person"],
        );
    }
    s.admin("namespace-add", &["art", "admin", "ann"]);
    let ann = s.login("ann", ANN_PASSWORD);
    let svc = &s.service;
    let ok = |verb: &str, args: &[&str]| {
        svc.admin(&ann, verb, args)
            .unwrap_or_else(|e| panic!("{verb} {args:?}: {e}"))
    };
    let refused = |verb: &str, args: &[&str]| code(svc.admin(&ann, verb, args));
    assert_eq!(
        ok("grant-set", &["art", "game", "carl", "writer"]),
        [["art", "game", "carl", "writer"]]
    );
    assert_eq!(
        refused("grant-set", &["code", "engine", "carl", "writer"]),
        ErrorCode::Forbidden
    );
    assert_eq!(
        refused("grant-set", &["art", "game", "carl", "owner"]),
        ErrorCode::Usage
    );
    assert_eq!(
        refused("grant-set", &["art", "game", "nobody", "reader"]),
        ErrorCode::NotFound
    );
    assert_eq!(
        ok("visibility-set", &["art", "game", "public"]),
        [["public", "1"]]
    );
    assert_eq!(
        ok("visibility-set", &["art", "game", "public"]),
        [["public", "1"]]
    );
    assert_eq!(
        ok("visibility-set", &["art", "game", "private"]),
        [["private", "2"]]
    );
    assert_eq!(ok("visibility-get", &["art", "game"]), [["private", "2"]]);
    assert_eq!(
        ok("visibility-get", &["code", "engine"]),
        [["private", "0"]]
    );
    assert_eq!(
        refused("visibility-set", &["code", "engine", "public"]),
        ErrorCode::Forbidden
    );
    // Readers and delegates of its namespace, not admins, not elsewhere.
    ok("namespace-add", &["art", "reader", "dora"]);
    ok("namespace-add", &["art", "delegate", "carl"]);
    assert_eq!(
        refused("namespace-add", &["art", "admin", "carl"]),
        ErrorCode::Forbidden
    );
    assert_eq!(
        refused("namespace-add", &["code", "reader", "carl"]),
        ErrorCode::Forbidden
    );
    let members = ok("namespace-list", &["art"]);
    assert_eq!(members.len(), 3);
    assert!(members.iter().any(|r| r[1] == "reader" && r[2] == "dora"));
    assert_eq!(refused("namespace-list", &["code"]), ErrorCode::Forbidden);
    ok("namespace-remove", &["art", "reader", "dora"]);
    assert_eq!(
        refused("namespace-remove", &["art", "reader", "dora"]),
        ErrorCode::NotFound
    );
    assert_eq!(ok("grant-list", &["art"]).len(), 1);
    assert_eq!(refused("grant-list", &["code"]), ErrorCode::Forbidden);
    // A repository admin administers that repository only.
    s.admin("grant-set", &["code", "engine", "carl", "admin"]);
    let carl = s.login("carl", "a long enough password");
    svc.admin(&carl, "grant-set", &["code", "engine", "dora", "reader"])
        .unwrap();
    svc.admin(&carl, "visibility-set", &["code", "engine", "public"])
        .unwrap();
    assert_eq!(
        code(svc.admin(&carl, "grant-set", &["code", "tools", "dora", "reader"])),
        ErrorCode::Forbidden
    );
    let grants = svc.admin(&carl, "grant-list", &["code", "engine"]).unwrap();
    assert_eq!(grants.len(), 2);
    assert_eq!(
        code(svc.admin(&carl, "grant-list", &["code"])),
        ErrorCode::Forbidden
    );
    assert_eq!(
        svc.admin(&carl, "grant-revoke", &["code", "engine", "dora"])
            .unwrap(),
        [["code", "engine", "dora", "reader"]]
    );
    assert_eq!(
        code(svc.admin(&carl, "grant-revoke", &["code", "engine", "dora"])),
        ErrorCode::NotFound
    );
}

#[test]
fn automation_credentials_are_created_derived_narrower_and_revoked() {
    let s = Served::new();
    s.admin(
        "user-add",
        &["carl", "a long enough password", "false", "person"],
    );
    let ann = s.login("ann", ANN_PASSWORD);
    let svc = &s.service;
    let day = scribe_auth::now_ms() + DAY_MS;
    let ci = svc
        .automation_create(&ann, "ann", "automation-write", day, "ci")
        .unwrap();
    assert_eq!(ci.kind, "automation-write");
    let who = svc.whoami(&ci.credential).unwrap();
    assert_eq!(
        (who.username.as_str(), who.kind.as_str()),
        ("ann", "automation-write")
    );
    assert_eq!(who.credential_id, ci.credential_id);
    // Bounds of create: an automation kind, an expiry within 366 days,
    // only for oneself unless administrator.
    for (kind, expires) in [
        ("session", day),
        ("user", day),
        ("automation", 0),
        ("automation", scribe_auth::now_ms() + 400 * DAY_MS),
        ("automation", u64::MAX),
    ] {
        assert_eq!(
            code(svc.automation_create(&ann, "ann", kind, expires, "x")),
            ErrorCode::Usage,
            "{kind} {expires}"
        );
    }
    assert_eq!(
        code(svc.automation_create(&ann, "carl", "automation", day, "x")),
        ErrorCode::Forbidden
    );
    svc.automation_create(&s.admin, "carl", "automation", day, "for carl")
        .unwrap();
    // Derive with the automation credential itself: narrower or equal kind,
    // no later expiry.
    let child = svc
        .automation_derive(
            &ci.credential,
            &ci.credential_id,
            "automation",
            day - 1000,
            "job",
        )
        .unwrap();
    assert_eq!(svc.whoami(&child.credential).unwrap().kind, "automation");
    assert_eq!(
        code(svc.automation_derive(
            &ci.credential,
            &ci.credential_id,
            "automation-admin",
            day - 1000,
            "wider"
        )),
        ErrorCode::Forbidden
    );
    assert_eq!(
        code(svc.automation_derive(
            &ci.credential,
            &ci.credential_id,
            "automation",
            day + 1000,
            "longer"
        )),
        ErrorCode::Forbidden
    );
    // A child cannot derive from its parent; carl cannot derive from ann's.
    let carl = s.login("carl", "a long enough password");
    assert_eq!(
        code(svc.automation_derive(&carl, &ci.credential_id, "automation", day - 1, "x")),
        ErrorCode::Forbidden
    );
    assert_eq!(
        code(svc.automation_derive(
            &child.credential,
            &ci.credential_id,
            "automation",
            day - 1,
            "x"
        )),
        ErrorCode::Forbidden
    );
    // An automation credential does no user administration.
    assert_eq!(
        code(svc.admin(
            &ci.credential,
            "automation-create",
            &["ann", "automation", &in_a_day(), "x", "00"]
        )),
        ErrorCode::Forbidden
    );
    // Listings: ann sees her session and both automation credentials; the
    // automation credential sees itself and its child.
    let mine = svc.admin(&ann, "credential-list", &[]).unwrap();
    assert_eq!(mine.len(), 3);
    let derived = mine.iter().find(|r| r[0] == child.credential_id).unwrap();
    assert_eq!(derived[7], ci.credential_id, "parent");
    assert_eq!(derived[1], "automation");
    assert_eq!(
        svc.admin(&ci.credential, "credential-list", &[])
            .unwrap()
            .len(),
        2
    );
    // Revoking the parent revokes the child: neither authenticates.
    let revoked = svc
        .admin(&ann, "credential-revoke", &[&ci.credential_id])
        .unwrap();
    assert_eq!(revoked.len(), 2);
    assert_eq!(code(svc.whoami(&ci.credential)), ErrorCode::Unauthenticated);
    assert_eq!(
        code(svc.whoami(&child.credential)),
        ErrorCode::Unauthenticated
    );
    // carl cannot revoke ann's session; the administrator can.
    let ann_session = svc.whoami(&ann).unwrap().credential_id;
    assert_eq!(
        code(svc.admin(&carl, "credential-revoke", &[&ann_session])),
        ErrorCode::Forbidden
    );
    s.admin("credential-revoke", &[&ann_session]);
    assert_eq!(code(svc.whoami(&ann)), ErrorCode::Unauthenticated);
    // The outcome rows of section 7.3 exist.
    let audit = s.audit(&["command=automation-create", "outcome=ok"]);
    assert_eq!(audit.len(), 2);
    assert!(audit[1][7].starts_with("ann automation-write "));
    assert!(audit[1][7].contains(" ci key:"));
}

#[test]
fn a_delegate_creates_automation_credentials_for_service_users_of_its_namespace() {
    let s = Served::new();
    s.admin("user-add", &["ci", "", "false", "service"]);
    s.admin(
        "user-add",
        &["carl", "a long enough password", "false", "person"],
    );
    s.admin("grant-set", &["art", "game", "ci", "writer"]);
    s.admin("namespace-add", &["art", "delegate", "ann"]);
    let ann = s.login("ann", ANN_PASSWORD);
    let svc = &s.service;
    let day = scribe_auth::now_ms() + DAY_MS;
    let made = svc
        .automation_create(&ann, "ci", "automation-write", day, "build")
        .unwrap();
    assert_eq!(made.username, "ci");
    assert_eq!(svc.whoami(&made.credential).unwrap().username, "ci");
    assert_eq!(
        svc.admin(&ann, "credential-list", &["ci"]).unwrap().len(),
        1
    );
    // Not for a person, and not once the service user reaches outside.
    assert_eq!(
        code(svc.automation_create(&ann, "carl", "automation", day, "x")),
        ErrorCode::Forbidden
    );
    s.admin("grant-set", &["code", "engine", "ci", "reader"]);
    assert_eq!(
        code(svc.automation_create(&ann, "ci", "automation", day, "x")),
        ErrorCode::Forbidden
    );
    assert_eq!(
        code(svc.admin(&ann, "credential-revoke", &[&made.credential_id])),
        ErrorCode::Forbidden
    );
}

#[test]
fn a_replayed_operation_id_returns_the_outcome_or_refuses_another_intent() {
    let s = Served::new();
    let op = [0x42; 16];
    let args = |name: &str| {
        vec![
            name.to_owned(),
            "a long enough password".to_owned(),
            "false".to_owned(),
            "person".to_owned(),
        ]
    };
    let first = s
        .service
        .admin_with_operation(&s.admin, op, "user-add", args("fay"))
        .unwrap();
    let again = s
        .service
        .admin_with_operation(&s.admin, op, "user-add", args("fay"))
        .unwrap();
    assert_eq!(first, again, "the recorded outcome, not a second user");
    assert_eq!(
        code(
            s.service
                .admin_with_operation(&s.admin, op, "user-add", args("gus"))
        ),
        ErrorCode::OperationIntentMismatch
    );
    // Another user replaying the id is refused too.
    let ann = s.login("ann", ANN_PASSWORD);
    assert_eq!(
        code(
            s.service
                .admin_with_operation(&ann, op, "user-add", args("fay"))
        ),
        ErrorCode::Forbidden
    );
    let users = s.admin("user-list", &[]);
    assert!(!users.iter().any(|r| r[0] == "gus"));
    assert_eq!(users.iter().filter(|r| r[0] == "fay").count(), 1);
    assert_eq!(s.audit(&["command=user-add", "user=admin"]).len(), 2);
}

#[test]
fn serve_sweeps_credentials_expired_more_than_a_day_at_start() {
    let old = Id::random();
    let mut s = Served::with(|dir| {
        let (key, key_id) = scribe_auth::ca::generate_key().unwrap();
        let _ = key;
        let row = CredentialRow {
            kind: CredentialKind::Automation,
            subject: "ann".into(),
            expires_ms: 1_000,
            enabled: true,
            label: "old".into(),
            key_id,
            created_ms: 500,
            parent: None,
            generation: Some(1),
        };
        dir.transact(|tx| tx.insert_credential(old, &row, "PEM"))
            .unwrap()
            .unwrap();
    });
    let listed = s.admin("credential-list", &["ann"]);
    assert!(listed.is_empty(), "{listed:?}");
    let rows = s.all_rows();
    assert!(!rows.iter().any(|(k, _)| k.contains(&old.hex())));
}

#[test]
fn sigkill_of_the_served_process_during_administration_loses_nothing_acknowledged() {
    let mut s = Served::new();
    let (tx, rx) = std::sync::mpsc::channel();
    let service = s.service.clone();
    let admin = s.admin.clone();
    let worker = std::thread::spawn(move || {
        for i in 0u32.. {
            let name = format!("user{i}");
            let r = service.admin(&admin, "user-add", &[&name, "", "false", "service"]);
            match r {
                Ok(rows) => {
                    if tx.send((name.clone(), rows[0][0].clone())).is_err() {
                        return;
                    }
                }
                Err(_) => return,
            }
            let g = service.admin(&admin, "grant-set", &["art", "game", &name, "reader"]);
            if g.is_err() || tx.send((format!("grant {name}"), String::new())).is_err() {
                return;
            }
        }
    });
    let mut acked = Vec::new();
    while acked.len() < 30 {
        acked.push(rx.recv().unwrap());
    }
    s.kill();
    worker.join().unwrap();
    acked.extend(rx.try_iter());
    s.start();
    let users = s.admin("user-list", &[]);
    let grants = s.admin("grant-list", &["art", "game"]);
    for (what, id) in &acked {
        if let Some(name) = what.strip_prefix("grant ") {
            assert!(
                grants.iter().any(|r| r[2] == name && r[4] == "reader"),
                "acknowledged grant of {name} lost"
            );
        } else {
            assert!(
                users.iter().any(|r| &r[0] == what && &r[1] == id),
                "acknowledged user {what} lost"
            );
        }
    }
    let adds = s.audit(&["command=user-add", "outcome=ok", "limit=10000"]);
    for (what, _) in acked.iter().filter(|(w, _)| !w.starts_with("grant ")) {
        assert!(adds
            .iter()
            .any(|r| r[7] == format!("{what} --service --no-password")));
    }
    // The directory is whole: every row checks.
    s.kill();
    let dir = s.fx.open().unwrap();
    dir.verify().unwrap();
}

/// `repository-rename` moves a repository's grants and visibility to its
/// new name in one change; `repository-forget` removes them, so a later
/// repository of that name starts with none. Namespace admins only.
#[test]
fn a_repository_rename_moves_its_grants_and_visibility_and_forget_removes_them() {
    let s = Served::new();
    s.admin(
        "user-add",
        &["carl", "a long enough password", "false", "person"],
    );
    s.admin("grant-set", &["art", "game", "ann", "admin"]);
    s.admin("grant-set", &["art", "game", "carl", "writer"]);
    s.admin("visibility-set", &["art", "game", "public"]);
    s.admin("grant-set", &["art", "other", "carl", "reader"]);
    // A repository admin administers the repository, not its name.
    let ann = s.login("ann", ANN_PASSWORD);
    assert_eq!(
        code(
            s.service
                .admin(&ann, "repository-rename", &["art", "game", "game2"])
        ),
        ErrorCode::Forbidden
    );
    // A target holding rows already is refused, and nothing moves.
    assert_eq!(
        code(
            s.service
                .admin(&s.admin, "repository-rename", &["art", "game", "other"])
        ),
        ErrorCode::AlreadyExists
    );
    assert_eq!(
        s.admin("repository-rename", &["art", "game", "game2"]),
        [["art", "game", "game2", "2", "true"]]
    );
    let grants = s.admin("grant-list", &["art"]);
    let on = |repo: &str| {
        let mut v: Vec<(String, String)> = grants
            .iter()
            .filter(|r| r[1] == repo)
            .map(|r| (r[2].clone(), r[4].clone()))
            .collect();
        v.sort();
        v
    };
    assert_eq!(on("game"), []);
    assert_eq!(
        on("game2"),
        [
            ("ann".to_owned(), "admin".to_owned()),
            ("carl".to_owned(), "writer".to_owned())
        ]
    );
    assert_eq!(on("other"), [("carl".to_owned(), "reader".to_owned())]);
    assert_eq!(
        s.admin("visibility-get", &["art", "game2"]),
        [["public", "1"]]
    );
    assert_eq!(
        s.admin("visibility-get", &["art", "game"]),
        [["private", "0"]]
    );
    // Again (an interrupted rename run again): nothing left to move.
    assert_eq!(
        s.admin("repository-rename", &["art", "game", "game2"]),
        [["art", "game", "game2", "0", "false"]]
    );
    assert_eq!(
        s.admin("repository-forget", &["art", "game2"]),
        [["art", "game2", "2", "true"]]
    );
    assert!(s
        .admin("grant-list", &["art"])
        .iter()
        .all(|r| r[1] != "game2"));
    assert_eq!(
        s.admin("visibility-get", &["art", "game2"]),
        [["private", "0"]]
    );
    assert_eq!(
        s.admin("audit", &["command=repository-rename"]).len(),
        4,
        "two refused and two applied renames are audited"
    );
}

/// `credential-list` says how each credential stands if presented now, as
/// the service decides it: a disabled user's sessions are
/// `user-disabled` (its stored flag still true: enabling the user brings
/// them back), a revoked one `revoked`, an expired one `expired`.
#[test]
fn credential_list_shows_a_disabled_users_sessions_as_refused() {
    let expired = Id::random();
    let s = Served::with(|dir| {
        let (_key, key_id) = scribe_auth::ca::generate_key().unwrap();
        let row = CredentialRow {
            kind: CredentialKind::Automation,
            subject: "ann".into(),
            expires_ms: scribe_auth::now_ms() - 60_000,
            enabled: true,
            label: "lapsed".into(),
            key_id,
            created_ms: 500,
            parent: None,
            generation: Some(1),
        };
        dir.transact(|tx| tx.insert_credential(expired, &row, "PEM"))
            .unwrap()
            .unwrap();
    });
    let first = s.login("ann", ANN_PASSWORD);
    let second = s.login("ann", ANN_PASSWORD);
    let first_id = s.service.whoami(&first).unwrap().credential_id;
    let second_id = s.service.whoami(&second).unwrap().credential_id;
    s.admin("credential-revoke", &[&second_id]);
    let state = |rows: &[Vec<String>], id: &str| -> (String, String) {
        let r = rows.iter().find(|r| r[0] == id).unwrap();
        assert_eq!(r.len(), 11, "{r:?}");
        (r[4].clone(), r[10].clone())
    };
    let listed = s.admin("credential-list", &["ann"]);
    assert_eq!(state(&listed, &first_id), ("true".into(), "enabled".into()));
    assert_eq!(
        state(&listed, &second_id),
        ("false".into(), "revoked".into())
    );
    assert_eq!(
        state(&listed, &expired.hex()),
        ("true".into(), "expired".into())
    );
    s.admin("user-disable", &["ann"]);
    assert_eq!(code(s.service.whoami(&first)), ErrorCode::Unauthenticated);
    let listed = s.admin("credential-list", &["ann"]);
    assert_eq!(
        state(&listed, &first_id),
        ("true".into(), "user-disabled".into()),
        "refused while its user is disabled"
    );
    assert_eq!(
        state(&listed, &second_id),
        ("false".into(), "revoked".into())
    );
    s.admin("user-enable", &["ann"]);
    assert_eq!(s.service.whoami(&first).unwrap().username, "ann");
    let listed = s.admin("credential-list", &["ann"]);
    assert_eq!(state(&listed, &first_id), ("true".into(), "enabled".into()));
}

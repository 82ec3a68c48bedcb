//! The `nokv` binary against a team server (a real auth service, a data
//! root bound to it, TLS): it reaches the server as `scribe` does, with
//! the user's stored login (its credential and the auth service's CA) or
//! `SCRIBE_CREDENTIAL`, and the server's grants apply to it.

use std::path::Path;
use std::process::Command;

use scribe_client::auth::{store_login, AuthService};
use scribe_testkit::team::{team_with, Team, PASSWORD};
use serde_json::Value;

/// `nokv --server URL --repo demo ARGS` with the configuration directory
/// `config` (and `env`); `(exit code, its JSON answer)`.
fn nokv(t: &Team, config: &Path, env: &[(&str, &Path)], args: &[&str]) -> (i32, Value) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nokv"));
    cmd.args(["--server", &t.url, "--repo", "demo"])
        .args(args)
        .env("HOME", t.tmp.path())
        .env("SCRIBE_CONFIG_DIR", config)
        .env_remove("SCRIBE_CREDENTIAL")
        .env_remove("SCRIBE_CA_FILE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run nokv");
    let text = String::from_utf8_lossy(&out.stdout);
    let v = serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("{e}: {text:?} {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap_or(-1), v)
}

/// `user` signs in (as `scribe login` does: the credential and the auth
/// service's CA stored in `config`).
fn login(t: &Team, user: &str, config: &Path) {
    let ca = std::fs::read_to_string(&t.ca_file).unwrap();
    let service = AuthService::new(&t.auth_url, ca).unwrap();
    let outcome = service.login(user, PASSWORD).unwrap();
    std::fs::create_dir_all(config).unwrap();
    store_login(config, &service, &outcome).unwrap();
}

#[test]
fn nokv_reaches_a_team_server_with_the_stored_login_and_its_grants() {
    use scribe_auth::rows::Role;
    let t = team_with(&[("alice", Some(Role::Writer)), ("bob", Some(Role::Reader))]);
    let home = t.tmp.path();
    let create = ["workbench", "workbench_create", r#"{"id":"agents"}"#];

    // Nobody signed in: the CA alone is not enough, the server asks for a
    // credential.
    let nobody = home.join("config-nobody");
    let (code, v) = nokv(&t, &nobody, &[("SCRIBE_CA_FILE", &t.ca_file)], &create);
    assert_eq!(code, 1, "{v}");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("CertificateRequired"), "{v}");

    // alice's stored login: no other setting (the CA comes with it).
    let alice = home.join("config-alice");
    login(&t, "alice", &alice);
    let (code, v) = nokv(&t, &alice, &[], &create);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["created"], true, "{v}");

    // SCRIBE_CREDENTIAL names another credential file: bob's, a reader
    // (under his own agent root: alice's bridge workspace is hers), whom
    // the server refuses a write.
    let bob = home.join("config-bob");
    login(&t, "bob", &bob);
    let (code, v) = nokv(
        &t,
        &alice,
        &[("SCRIBE_CREDENTIAL", &bob.join("credential.pem"))],
        &[
            "--agent-root",
            "bob",
            "workbench",
            "workbench_create",
            r#"{"id":"bobs"}"#,
        ],
    );
    assert_eq!(code, 1, "{v}");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("bob is reader"), "{v}");
    // ... and lets him read: the refused workbench is not there.
    let list = ["--agent-root", "bob", "workbench", "workbench_list"];
    let (code, v) = nokv(&t, &bob, &[], &[&list[..], &[r#"{"id":"bobs"}"#]].concat());
    assert_eq!(
        (code, &v["error"]["code"]),
        (1, &serde_json::json!("workbench_not_found")),
        "{v}"
    );
}

/// The error code, retryable flag and message of a failed `nokv` call.
fn refusal(v: &Value) -> (&str, bool, &str) {
    let e = &v["error"];
    (
        e["code"].as_str().unwrap_or_default(),
        e["retryable"].as_bool().unwrap_or(true),
        e["message"].as_str().unwrap_or_default(),
    )
}

#[test]
fn permission_and_setup_failures_have_their_own_codes() {
    use scribe_auth::rows::Role;
    let t = team_with(&[("alice", Some(Role::Writer)), ("bob", Some(Role::Reader))]);
    let home = t.tmp.path();
    let create = ["workbench", "workbench_create", r#"{"id":"w"}"#];
    // No credential: unauthenticated.
    let nobody = home.join("config-nobody");
    let (code, v) = nokv(&t, &nobody, &[("SCRIBE_CA_FILE", &t.ca_file)], &create);
    let (c, retry, message) = refusal(&v);
    assert_eq!((code, c, retry), (1, "unauthenticated", false), "{v}");
    assert!(message.contains("requires a credential"), "{v}");
    // No CA to trust the server by: not_configured.
    let (code, v) = nokv(&t, &nobody, &[], &create);
    let (c, retry, _) = refusal(&v);
    assert_eq!((code, c, retry), (1, "not_configured", false), "{v}");
    // A reader's write: forbidden.
    let bob = home.join("config-bob");
    login(&t, "bob", &bob);
    let (code, v) = nokv(
        &t,
        &bob,
        &[],
        &[&["--agent-root", "bob"][..], &create].concat(),
    );
    let (c, retry, message) = refusal(&v);
    assert_eq!((code, c, retry), (1, "forbidden", false), "{v}");
    assert!(message.contains("bob is reader"), "{v}");
    assert!(!message.contains(&*home.to_string_lossy()), "{v}");
}

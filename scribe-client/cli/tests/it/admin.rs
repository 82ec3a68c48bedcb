//! `scribe admin ...` against a real auth service (the `scribe-auth`
//! library's `serve` on 127.0.0.1 over TLS) with the real `scribe` binary:
//! an administrator adds a user who signs in, a non-administrator is
//! refused, an automation credential works through `SCRIBE_CREDENTIAL`,
//! and the audit trail comes out as JSON.

use std::path::Path;
use std::process::{Command, Stdio};

use super::auth::{auth, Auth, PASSWORD};

/// `scribe ARGS` with its own config directory `config` (one per person),
/// `stdin` as standard input, and `SCRIBE_CREDENTIAL` when given.
fn scribe(
    config: &Path,
    credential: Option<&Path>,
    args: &[&str],
    stdin: &str,
) -> (Option<i32>, String, String) {
    use std::io::Write;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_scribe"));
    cmd.args(args)
        .env("SCRIBE_CONFIG_DIR", config)
        .env_remove("SCRIBE_CREDENTIAL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(c) = credential {
        cmd.env("SCRIBE_CREDENTIAL", c);
    }
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn login(a: &Auth, config: &Path, user: &str, password: &str, admin: bool) {
    let ca = a.ca_file.to_str().unwrap();
    let mut args = vec!["login", "--auth", &a.url, "--user", user, "--ca-file", ca];
    if admin {
        args.push("--admin");
    }
    let (code, _, err) = scribe(config, None, &args, &format!("{password}\n"));
    assert_eq!(code, Some(0), "login {user}: {err}");
}

#[test]
fn administration_from_the_command_line() {
    let a = auth();
    let admin = a.tmp.path().join("admin-config");
    let bob = a.tmp.path().join("bob-config");
    // An administrator's everyday session does not manage users; the
    // administrator sign-in (admin-login) does.
    login(&a, &admin, "admin", PASSWORD, false);
    let (code, _, err) = scribe(&admin, None, &["admin", "user", "list"], "");
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("Error[forbidden]"), "{err}");
    assert!(err.contains("scribe login --admin"), "{err}");
    login(&a, &admin, "admin", PASSWORD, true);
    let (code, out, err) = scribe(&admin, None, &["whoami", "--json"], "");
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("\"kind\":\"user\""), "{out}");

    // The administrator adds bob; the generated password is shown once.
    let (code, out, err) = scribe(&admin, None, &["admin", "user", "add", "bob"], "");
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("added user bob ("), "{out}");
    let password = out
        .lines()
        .find_map(|l| l.split_once("password (shown once").map(|(_, r)| r))
        .and_then(|r| r.rsplit_once(": "))
        .map(|(_, pw)| pw.trim().to_owned())
        .unwrap_or_else(|| panic!("no password shown: {out}"));
    assert_eq!(password.len(), 24);

    // bob signs in with it and is not an administrator.
    login(&a, &bob, "bob", &password, false);
    let (code, out, err) = scribe(&bob, None, &["whoami", "--json"], "");
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("\"user\":\"bob\""), "{out}");
    let (code, _, err) = scribe(&bob, None, &["admin", "user", "add", "eve"], "");
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("Error[forbidden]"), "{err}");

    // A grant, listed as JSON.
    let (code, _, err) = scribe(
        &admin,
        None,
        &["admin", "grant", "set", "art", "game", "bob", "writer"],
        "",
    );
    assert_eq!(code, Some(0), "{err}");
    let (code, out, err) = scribe(
        &admin,
        None,
        &["admin", "grant", "list", "art", "--json"],
        "",
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("\"user\":\"bob\""), "{out}");
    assert!(out.contains("\"role\":\"writer\""), "{out}");

    // bob makes an automation credential for CI; CI signs in with it.
    let ci = a.tmp.path().join("ci.pem");
    let (code, out, err) = scribe(
        &bob,
        None,
        &[
            "admin",
            "automation",
            "create",
            "--kind",
            "automation-write",
            "--expires-in",
            "7d",
            "--label",
            "nightly build",
            "--out",
            ci.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("automation-write credential "), "{out}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&ci).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    let text = std::fs::read_to_string(&ci).unwrap();
    assert!(text.starts_with("-----BEGIN CERTIFICATE-----"));
    assert!(text.contains("-----BEGIN PRIVATE KEY-----"));
    let (code, out, err) = scribe(&bob, Some(&ci), &["whoami", "--json"], "");
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("\"user\":\"bob\""), "{out}");
    assert!(out.contains("\"kind\":\"automation-write\""), "{out}");
    // A narrower one derived by CI itself; a wider one is refused.
    let id = out
        .split("\"credential\":\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap()
        .to_owned();
    let job = a.tmp.path().join("job.pem");
    let (code, _, err) = scribe(
        &bob,
        Some(&ci),
        &[
            "admin",
            "automation",
            "derive",
            "--parent",
            &id,
            "--kind",
            "automation",
            "--expires-in",
            "1h",
            "--out",
            job.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = scribe(
        &bob,
        Some(&ci),
        &[
            "admin",
            "automation",
            "derive",
            "--parent",
            &id,
            "--kind",
            "automation-admin",
            "--expires-in",
            "1h",
            "--out",
            job.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("Error[forbidden]"), "{err}");
    // bob revokes it: CI no longer signs in.
    let (code, out, err) = scribe(&bob, None, &["admin", "credential", "revoke", &id], "");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out.lines().count(),
        2,
        "the credential and the derived one: {out}"
    );
    let (code, _, err) = scribe(&bob, Some(&ci), &["whoami"], "");
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("Error[unauthenticated]"), "{err}");

    // The audit trail as JSON, newest first; bob's refusal is in it.
    let (code, out, err) = scribe(
        &admin,
        None,
        &["admin", "audit", "--json", "--outcome", "rejected"],
        "",
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.trim_start().starts_with('['), "{out}");
    assert!(
        out.contains("\"actor\":\"bob\",\"command\":\"user-add\""),
        "{out}"
    );
    assert!(
        out.contains("\"outcome\":\"rejected\",\"arguments\":\"eve\""),
        "{out}"
    );
    let (code, out, err) = scribe(
        &admin,
        None,
        &["admin", "audit", "--json", "--limit", "200"],
        "",
    );
    assert_eq!(code, Some(0), "{err}");
    let first = out.find("\"command\":\"credential-revoke\"").unwrap();
    let later = out.find("\"command\":\"grant-set\"").unwrap();
    assert!(first < later, "newest first: {out}");
    assert!(!out.contains(&password), "no password in the audit trail");
    // A non-administrator cannot read it.
    let (code, _, err) = scribe(&bob, None, &["admin", "audit"], "");
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("Error[forbidden]"), "{err}");
}

/// A disabled user's sessions are refused by the auth service, and
/// `admin credential list --user` says so (text and JSON) instead of
/// showing them enabled; enabling the user brings them back.
#[test]
fn credential_list_shows_a_disabled_users_sessions_as_disabled() {
    let a = auth();
    let admin = a.tmp.path().join("admin-config");
    let bob = a.tmp.path().join("bob-config");
    login(&a, &admin, "admin", PASSWORD, true);
    let (code, out, err) = scribe(&admin, None, &["admin", "user", "add", "bob"], "");
    assert_eq!(code, Some(0), "{err}");
    let password = out
        .lines()
        .find_map(|l| l.split_once("password (shown once").map(|(_, r)| r))
        .and_then(|r| r.rsplit_once(": "))
        .map(|(_, pw)| pw.trim().to_owned())
        .unwrap();
    login(&a, &bob, "bob", &password, false);
    let list = |json: bool| {
        let mut args = vec!["admin", "credential", "list", "--user", "bob"];
        if json {
            args.push("--json");
        }
        let (code, out, err) = scribe(&admin, None, &args, "");
        assert_eq!(code, Some(0), "{err}");
        out
    };
    let out = list(false);
    assert!(out.contains("  session  bob  enabled  "), "{out}");
    let (code, _, err) = scribe(&admin, None, &["admin", "user", "disable", "bob"], "");
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = scribe(&bob, None, &["whoami"], "");
    assert_eq!(code, Some(1), "refused: {err}");
    let out = list(false);
    assert!(
        out.contains("  session  bob  disabled (user disabled)  "),
        "{out}"
    );
    assert!(!out.contains("  enabled  "), "{out}");
    let out = list(true);
    assert!(
        out.contains("\"enabled\":\"true\"") && out.contains("\"state\":\"user-disabled\""),
        "{out}"
    );
    let (code, _, err) = scribe(&admin, None, &["admin", "user", "enable", "bob"], "");
    assert_eq!(code, Some(0), "{err}");
    assert!(list(false).contains("  session  bob  enabled  "));
}

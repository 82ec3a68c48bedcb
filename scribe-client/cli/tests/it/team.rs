//! The real `scribe` binary against a team server: a data root bound to a
//! real auth service (the `scribe-auth` library's `serve` over TLS on
//! 127.0.0.1) with `auth-init`, served over TLS with the team authorizer.
//! `scribe login` stores the credential and the auth CA; `scribes://`
//! then presents the credential and trusts the CA without other settings.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use scribe_auth::rows::Role;
use scribe_testkit::team::{team, team_with, Team, PASSWORD};

/// `scribe ARGS` in `dir` as `user` (their own configuration directory),
/// with `stdin`; `(exit code, stdout, stderr)`.
fn scribe(t: &Team, user: &str, dir: &Path, args: &[&str], stdin: &str) -> (i32, String, String) {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_scribe"))
        .args(args)
        .current_dir(dir)
        .env("HOME", t.tmp.path())
        .env(
            "SCRIBE_CONFIG_DIR",
            t.tmp.path().join(format!("config-{user}")),
        )
        .env("SCRIBE_AUTHOR", "not-the-signed-in-user")
        .env_remove("SCRIBE_CREDENTIAL")
        .env_remove("SCRIBE_CA_FILE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn login(t: &Team, user: &str) {
    login_as(t, user, false)
}

fn login_as(t: &Team, user: &str, admin: bool) {
    let ca = t.ca_file.to_str().unwrap();
    let mut args = vec![
        "login",
        "--auth",
        &t.auth_url,
        "--user",
        user,
        "--ca-file",
        ca,
    ];
    if admin {
        args.push("--admin");
    }
    let (code, _, err) = scribe(t, user, t.tmp.path(), &args, &format!("{PASSWORD}\n"));
    assert_eq!(code, 0, "{err}");
}

#[test]
fn signed_in_users_work_on_a_team_server_by_their_grants() {
    let t = team();
    let home = t.tmp.path();
    let create = |user: &str| {
        scribe(
            &t,
            user,
            home,
            &[
                "workspace",
                "create",
                &format!("ws-{user}"),
                "--server",
                &t.url,
                "--repo",
                "demo",
            ],
            "",
        )
    };
    // Not signed in (the CA given, no credential): the server refuses.
    let (code, _, err) = {
        let mut c = Command::new(env!("CARGO_BIN_EXE_scribe"));
        let out = c
            .args(["workspace", "create", "ws-nobody", "--server", &t.url])
            .args(["--repo", "demo"])
            .current_dir(home)
            .env("HOME", home)
            .env("SCRIBE_CONFIG_DIR", home.join("config-nobody"))
            .env("SCRIBE_CA_FILE", &t.ca_file)
            .env_remove("SCRIBE_CREDENTIAL")
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert_ne!(code, 0);
    assert!(err.contains("Error[unauthenticated]"), "{err}");
    assert!(err.contains("CertificateRequired"), "{err}");
    assert!(err.contains("scribe login"), "{err}");

    // alice signs in: her stored login is her TLS identity and its CA
    // the server's trust anchor; she works as usual.
    login(&t, "alice");
    let (code, _, err) = create("alice");
    assert_eq!(code, 0, "{err}");
    let ws = home.join("ws-alice");
    std::fs::write(ws.join("hero.psd"), b"hero v1").unwrap();
    let (code, _, err) = scribe(&t, "alice", &ws, &["add", "."], "");
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = scribe(&t, "alice", &ws, &["submit", "-m", "first"], "");
    assert_eq!(code, 0, "{err}");
    // The change is attributed to the signed-in user, not $SCRIBE_AUTHOR.
    let (code, out, err) = scribe(&t, "alice", &ws, &["log", "--json"], "");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"alice\""), "{out}");
    assert!(!out.contains("not-the-signed-in-user"), "{out}");

    // bob is signed in but has no grant on the repository: the server
    // does not even list it to him.
    login(&t, "bob");
    let (code, _, err) = create("bob");
    assert_ne!(code, 0);
    assert!(err.contains("no repository named \"demo\""), "{err}");
    let (code, out, err) = scribe(&t, "bob", home, &["repo", "list", "--server", &t.url], "");
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("demo"), "{out}");
    let (code, out, err) = scribe(&t, "alice", home, &["repo", "list", "--server", &t.url], "");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("demo"), "{out}");
}

/// `user` signs in and creates the workspace `ws-USER` of `demo` in the
/// team's directory.
fn signed_in_workspace(t: &Team, user: &str) -> PathBuf {
    let home = t.tmp.path();
    login(t, user);
    let (code, _, err) = scribe(
        t,
        user,
        home,
        &[
            "workspace",
            "create",
            &format!("ws-{user}"),
            "--server",
            &t.url,
            "--repo",
            "demo",
        ],
        "",
    );
    assert_eq!(code, 0, "{err}");
    home.join(format!("ws-{user}"))
}

/// #18 item 1 on a team server: `scribe unlock --force` breaks another
/// user's lock for a maintainer only, and the auth service's audit trail
/// records who broke which lock.
#[test]
fn a_maintainer_breaks_another_users_lock_and_the_audit_trail_says_so() {
    let t = team_with(&[
        ("alice", Some(Role::Writer)),
        ("carol", Some(Role::Writer)),
        ("bob", Some(Role::Maintainer)),
    ]);
    let home = t.tmp.path();
    let create = |user: &str| signed_in_workspace(&t, user);
    let a = create("alice");
    std::fs::write(a.join("hero.psd"), b"v1").unwrap();
    for args in [
        &["add", "hero.psd"][..],
        &["submit", "-m", "v1"],
        &["lock", "hero.psd"],
    ] {
        let (code, _, err) = scribe(&t, "alice", &a, args, "");
        assert_eq!(code, 0, "{err}");
    }
    // A writer may not break it.
    let c = create("carol");
    let (code, _, err) = scribe(&t, "carol", &c, &["unlock", "--force", "hero.psd"], "");
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("Error[forbidden]"), "{err}");
    assert!(err.contains("maintainer"), "{err}");
    // A maintainer may, and it is audited.
    let b = create("bob");
    let (code, out, err) = scribe(&t, "bob", &b, &["unlock", "--force", "hero.psd"], "");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("unlocked hero.psd (held by alice"), "{out}");
    let (code, out, _) = scribe(&t, "bob", &b, &["locks", "--json"], "");
    assert_eq!((code, out.trim()), (0, "[]"));
    login_as(&t, "admin", true);
    let (code, out, err) = scribe(
        &t,
        "admin",
        home,
        &["admin", "audit", "--command", "lock-force-release"],
        "",
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("lock-force-release"), "{out}");
    assert!(out.contains("depot demo workspace:"), "{out}");
    assert!(out.contains("hero.psd"), "{out}");
    assert_eq!(out.matches("lock-force-release").count(), 1, "{out}");
}

/// #18 item 1, offline, on a team data root: `scribe-server lock release`
/// records each release in the auth service's audit trail first, as
/// `unlock --force` does (no row, no release); with the service out of
/// reach it releases nothing unless `--unaudited`, and says so.
#[test]
fn an_offline_lock_release_on_a_team_data_root_is_audited_or_refused() {
    let mut t = team_with(&[("alice", Some(Role::Writer))]);
    let home = t.tmp.path().to_owned();
    let a = signed_in_workspace(&t, "alice");
    std::fs::write(a.join("a.psd"), b"a").unwrap();
    std::fs::write(a.join("b.psd"), b"b").unwrap();
    for args in [
        &["add", "a.psd", "b.psd"][..],
        &["submit", "-m", "v1"],
        &["lock", "a.psd", "b.psd"],
    ] {
        let (code, _, err) = scribe(&t, "alice", &a, args, "");
        assert_eq!(code, 0, "{err}");
    }
    // Offline: the server stops.
    drop(t.server.take());
    let data = home.join("data");
    let release = |path: &str, unaudited: bool| {
        scribe_server::admin::lock_release(&data, "demo", &[path.to_owned()], unaudited).unwrap()
    };

    // The auth service out of reach (the binding points at a closed port).
    let service = data
        .join(scribe_server::team::AUTH_DIR)
        .join(scribe_server::team::SERVICE_FILE);
    let bound = std::fs::read_to_string(&service).unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let moved: String = bound
        .lines()
        .map(|l| {
            if l.starts_with("auth=") {
                format!("auth=localhost:{port}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    assert_ne!(moved, bound);
    std::fs::write(&service, moved).unwrap();
    let r = release("a.psd", false);
    assert_eq!(r.problems.len(), 1, "{r:?}");
    assert!(r.problems[0].contains("NOT released"), "{r:?}");
    assert!(r.problems[0].contains("--unaudited"), "{r:?}");
    assert!(r.notes.is_empty(), "{r:?}");
    // Still held: the forced one releases it, and says it is unaudited.
    let r = release("a.psd", true);
    assert!(r.is_clean(), "{r:?}");
    assert!(r.notes[0].contains("WITHOUT an audit row"), "{r:?}");

    // The service back: recorded, then released.
    std::fs::write(&service, &bound).unwrap();
    let r = release("b.psd", false);
    assert!(r.is_clean(), "{r:?}");
    assert!(r.notes[0].contains("held by alice"), "{r:?}");
    assert!(
        r.notes[0].contains("recorded in the auth service's audit trail"),
        "{r:?}"
    );
    let r = release("b.psd", false);
    assert!(r.problems[0].contains("not locked"), "{r:?}");

    login_as(&t, "admin", true);
    let (code, out, err) = scribe(
        &t,
        "admin",
        &home,
        &["admin", "audit", "--command", "lock-force-release"],
        "",
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.matches("lock-force-release").count(), 1, "{out}");
    assert!(out.contains("depot demo offline workspace:"), "{out}");
    assert!(out.contains("b.psd"), "{out}");
    assert!(!out.contains("a.psd"), "{out}");
}

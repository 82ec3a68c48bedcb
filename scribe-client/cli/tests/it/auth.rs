//! `scribe login|whoami|logout` against a real auth service: the
//! `scribe-auth` library's `serve` on 127.0.0.1 over TLS in this test
//! process, and the real `scribe` binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use scribe_auth::rows::CaFamily;
use scribe_auth::service::{serve, ServeOptions};
use scribe_auth::{AuthDir, InitOptions, Password};

pub(super) const PASSWORD: &str = "correct horse battery staple";

pub(super) struct Auth {
    pub(super) tmp: tempfile::TempDir,
    pub(super) url: String,
    pub(super) ca_file: PathBuf,
}

/// An auth directory with the administrator `admin`, served in a thread.
pub(super) fn auth() -> Auth {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let (dir, _) = AuthDir::init(InitOptions {
        data: root.join("auth"),
        pepper_file: root.join("pepper"),
        witness_file: root.join("witness"),
        trust_domain: "studio.example".into(),
        admin_username: "admin".into(),
        admin_password: Some(Password::new(PASSWORD.into()).unwrap()),
        now_ms: scribe_auth::now_ms(),
    })
    .unwrap();
    let ca_file = root.join("access-ca.pem");
    std::fs::write(&ca_file, dir.trust_anchor_pem(CaFamily::Access).unwrap()).unwrap();
    let runtime = root.join("run");
    let opts = ServeOptions {
        listen: "127.0.0.1:0".into(),
        runtime_dir: Some(runtime.clone()),
        hosts: Vec::new(),
        max_connections: 16,
        session_ms: 3_600_000,
    };
    std::thread::spawn(move || serve(dir, opts));
    let listen = wait_for(&runtime.join("listen"));
    let port = listen.rsplit_once(':').unwrap().1.to_string();
    Auth {
        url: format!("sau2://localhost:{port}"),
        ca_file,
        tmp,
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
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the auth service did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `scribe ARGS` with the config directory in the test's temp dir and
/// `stdin` as standard input.
fn scribe(a: &Auth, args: &[&str], stdin: &str) -> (Option<i32>, String, String) {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_scribe"))
        .args(args)
        .env("SCRIBE_CONFIG_DIR", a.tmp.path().join("config"))
        .env_remove("SCRIBE_CREDENTIAL")
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
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn login_whoami_logout_from_the_command_line() {
    let a = auth();
    let ca = a.ca_file.to_str().unwrap().to_string();
    // Before any login: whoami says there is no credential.
    let (code, _, err) = scribe(&a, &["whoami"], "");
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("Error[unauthenticated]: not signed in"),
        "{err}"
    );
    assert!(err.contains("scribe login"), "{err}");

    // A wrong password is refused and stores nothing.
    let (code, _, err) = scribe(
        &a,
        &[
            "login",
            "--auth",
            &a.url,
            "--user",
            "admin",
            "--ca-file",
            &ca,
        ],
        "not the password\n",
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("Error[unauthenticated]"), "{err}");
    assert!(!a.tmp.path().join("config/credential.pem").exists());

    // The password on standard input.
    let (code, out, err) = scribe(
        &a,
        &[
            "login",
            "--auth",
            &a.url,
            "--user",
            "admin",
            "--ca-file",
            &ca,
        ],
        &format!("{PASSWORD}\n"),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("signed in as admin until "), "{out}");
    let cred = a.tmp.path().join("config/credential.pem");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&cred).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the credential is readable only by the user");
    }

    let (code, out, err) = scribe(&a, &["whoami", "--json"], "");
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("\"user\":\"admin\""), "{out}");
    assert!(out.contains("\"kind\":\"session\""), "{out}");

    // A second login reuses the stored service and CA; the password from a file.
    let pw_file = a.tmp.path().join("pw");
    std::fs::write(&pw_file, format!("{PASSWORD}\n")).unwrap();
    let (code, _, err) = scribe(
        &a,
        &[
            "login",
            "--user",
            "admin",
            "--password-file",
            pw_file.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(code, Some(0), "{err}");

    // Logout disables the session: a copy of the credential no longer works.
    let kept = a.tmp.path().join("kept.pem");
    std::fs::copy(&cred, &kept).unwrap();
    let (code, out, err) = scribe(&a, &["logout"], "");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.trim(), "signed out");
    assert!(!cred.exists());
    let out = Command::new(env!("CARGO_BIN_EXE_scribe"))
        .arg("whoami")
        .env("SCRIBE_CONFIG_DIR", a.tmp.path().join("config"))
        .env("SCRIBE_CREDENTIAL", &kept)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("Error[unauthenticated]"), "{err}");
}

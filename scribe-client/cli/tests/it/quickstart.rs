//! `scribe quickstart` works end to end on a fresh directory and refuses
//! to run over a non-empty one.

use std::process::Command;

#[test]
fn quickstart_runs_end_to_end() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_scribe"))
        .args(["quickstart", "qs"])
        .current_dir(tmp.path())
        .env("HOME", tmp.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("Error[locked_by_other]"),
        "the lock demo ran: {stderr}"
    );
    assert!(stdout.contains("Continue by hand"), "{stdout}");
    let bob = tmp.path().join("qs/bob");
    assert!(bob.join("art/Ünïcødé-名前.txt").is_file());
    assert_eq!(
        std::fs::metadata(bob.join("art/characters/hero.psd"))
            .unwrap()
            .len(),
        32 << 20
    );
    // The 1 MiB edit sent the chunks around it, not the 32 MiB file (the
    // last submit's "uploaded N object(s) (X MiB)").
    let last = stdout
        .lines()
        .chain(stderr.lines())
        .rfind(|l| l.contains("submitted change"))
        .expect("a submit line");
    let sent = last
        .split_once("object(s) (")
        .and_then(|(_, r)| r.split_once(')'))
        .map(|(s, _)| s)
        .unwrap_or_else(|| panic!("no size in {last:?}"));
    let (v, unit) = sent.split_once(' ').unwrap();
    let v: f64 = v.parse().unwrap();
    let mib = match unit {
        "B" => v / 1048576.0,
        "KiB" => v / 1024.0,
        "MiB" => v,
        other => panic!("{other} in {last:?}"),
    };
    assert!(mib > 0.9 && mib <= 16.5, "the edit sent {sent}: {last}");
    assert_eq!(
        std::fs::read(bob.join("art/characters/hero.psd")).unwrap(),
        std::fs::read(tmp.path().join("qs/alice/art/characters/hero.psd")).unwrap(),
        "Bob synced Alice's edit"
    );
    let again = Command::new(env!("CARGO_BIN_EXE_scribe"))
        .args(["quickstart", "qs"])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("Error[already_exists]"));
}

/// `scribe quickstart --team` with the real `scribe-auth` and
/// `scribe-server` binaries beside `scribe` (cargo builds every binary of
/// the workspace's packages before their tests run).
#[test]
fn team_quickstart_signs_in_grants_and_refuses() {
    let scribe = std::path::PathBuf::from(env!("CARGO_BIN_EXE_scribe"));
    let dir = scribe.parent().unwrap();
    for b in ["scribe-auth", "scribe-server"] {
        assert!(
            dir.join(b).exists(),
            "{b} is not beside scribe in {}: run `cargo test --workspace` (or build it first)",
            dir.display()
        );
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(&scribe)
        .args(["quickstart", "--team", "team"])
        .current_dir(tmp.path())
        .env("HOME", tmp.path())
        .env_remove("SCRIBE_CONFIG_DIR")
        .env_remove("SCRIBE_CREDENTIAL")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("Bob's workspace has art/hero.psd: true"),
        "{stdout}"
    );
    // Bob's refusals were the server's: no grant, then a reader's submit.
    assert!(
        stdout.contains("forbidden") || stdout.contains("no repository"),
        "{stdout}"
    );
    assert!(
        stdout.contains("grant-set"),
        "the audit trail is shown: {stdout}"
    );
    // Commands are shown as they can be pasted.
    assert!(stdout.contains("submit -m 'Hero: first pass'"), "{stdout}");
    let alice = tmp.path().join("team/alice/art/hero.psd");
    let bob = tmp.path().join("team/bob/art/hero.psd");
    assert_eq!(std::fs::read(&alice).unwrap(), std::fs::read(&bob).unwrap());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let pw = tmp.path().join("team/secrets/alice-password");
        let mode = std::fs::metadata(&pw).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "{} is mode {mode:o}", pw.display());
    }
    assert!(
        !tmp.path().join("team/run/server/listen").exists() || {
            // The services were stopped: nothing answers on the recorded address.
            let addr = std::fs::read_to_string(tmp.path().join("team/run/server/listen")).unwrap();
            std::net::TcpStream::connect(addr.trim()).is_err()
        }
    );
    // The printed way to start them again works: both services come back,
    // and Alice's stored login reaches the server.
    let again: Vec<&str> = stdout
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("scribe-auth serve ") || l.starts_with("scribe-server serve "))
        .collect();
    assert_eq!(again.len(), 2, "{stdout}");
    let run = tmp.path().join("team/run");
    for f in ["auth/listen", "server/listen"] {
        let _ = std::fs::remove_file(run.join(f));
    }
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut services = Vec::new();
    for line in &again {
        let cmd = line.trim_end_matches('&').trim();
        services.push(
            Command::new("sh")
                .args(["-c", &format!("exec {cmd}")])
                .env("PATH", &path)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        );
    }
    let listen = run.join("server/listen");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !std::fs::read_to_string(&listen).is_ok_and(|t| t.ends_with('\n')) {
        assert!(std::time::Instant::now() < deadline, "not started again");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let status = Command::new(&scribe)
        .args(["sync"])
        .current_dir(tmp.path().join("team/alice"))
        .env("HOME", tmp.path())
        .env("SCRIBE_CONFIG_DIR", tmp.path().join("team/config/alice"))
        .env_remove("SCRIBE_CREDENTIAL")
        .output()
        .unwrap();
    for mut c in services {
        let _ = c.kill();
        let _ = c.wait();
    }
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
}

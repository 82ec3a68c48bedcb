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
    let alice = tmp.path().join("team/alice/art/hero.psd");
    let bob = tmp.path().join("team/bob/art/hero.psd");
    assert_eq!(std::fs::read(&alice).unwrap(), std::fs::read(&bob).unwrap());
    assert!(
        !tmp.path().join("team/run/server/listen").exists() || {
            // The services were stopped: nothing answers on the recorded address.
            let addr = std::fs::read_to_string(tmp.path().join("team/run/server/listen")).unwrap();
            std::net::TcpStream::connect(addr.trim()).is_err()
        }
    );
}

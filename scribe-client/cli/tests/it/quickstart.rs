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
        4 << 20
    );
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

//! Every command answers `--help` (exit 0) with its one-line summary, and
//! the top-level help lists the stable command names.

use std::process::Command;

const COMMANDS: &[&[&str]] = &[
    &["quickstart"],
    &["workspace", "create"],
    &["workspace", "list"],
    &["workspace", "retire"],
    &["repo", "create"],
    &["repo", "list"],
    &["add"],
    &["edit"],
    &["delete"],
    &["move"],
    &["reconcile"],
    &["revert"],
    &["status"],
    &["submit"],
    &["sync"],
    &["resolve"],
    &["lock"],
    &["unlock"],
    &["locks"],
    &["log"],
    &["history"],
    &["describe"],
    &["recovery", "list"],
    &["recovery", "prune"],
    &["recovery", "restore"],
    &["view", "set"],
    &["view", "show"],
    &["debug", "path"],
    &["completions"],
    &["man"],
];

#[test]
fn every_command_has_help() {
    let top = Command::new(env!("CARGO_BIN_EXE_scribe"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(top.status.success());
    let top = String::from_utf8(top.stdout).unwrap();
    for cmd in COMMANDS {
        assert!(
            top.contains(&format!("  {}", cmd[0])),
            "{} missing from:\n{top}",
            cmd[0]
        );
        let out = Command::new(env!("CARGO_BIN_EXE_scribe"))
            .args(*cmd)
            .arg("--help")
            .output()
            .unwrap();
        assert!(out.status.success(), "{cmd:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("Usage: scribe"), "{cmd:?}: {text}");
    }
}

//! Issue #18 item 14: a workspace that cannot be written (a read-only
//! mount, or permissions) still answers the reading commands: `status`,
//! `log`, `history`, `describe`, `locks`, `info`. Writing commands fail
//! with the file system's reason and change nothing.

use std::path::{Path, PathBuf};

use super::support::{write, Env, Run, Transport};

/// A workspace with history, a lock, an opened edit, a modified file not
/// opened and a new file; its status cache removed, so a status would
/// rebuild and record it if it could.
fn setup(env: &Env) -> PathBuf {
    let a = env.workspace("alice", &[]);
    write(&a, "f.txt", b"one");
    write(&a, "g.txt", b"gee");
    env.scribe(&a, &["add", "."]).ok();
    env.scribe(&a, &["submit", "-m", "first"]).ok();
    env.scribe(&a, &["lock", "f.txt"]).ok();
    env.scribe(&a, &["edit", "f.txt"]).ok();
    write(&a, "f.txt", b"one, edited");
    write(&a, "g.txt", b"gee, changed without edit");
    write(&a, "new.txt", b"new");
    let _ = std::fs::remove_file(a.join(".scribe/_state/status-cache"));
    a
}

/// Every reading command answers; a writing one is refused with the file
/// system's reason. `run` runs scribe where the workspace cannot be
/// written.
fn reading_commands_answer(run: &dyn Fn(&[&str]) -> Run, what: &str) {
    let r = run(&["status"]);
    assert_eq!(r.code, Some(0), "{what}: {r:?}");
    assert!(r.stdout.contains("edit    f.txt"), "{what}: {}", r.stdout);
    assert!(r.stdout.contains("modified g.txt"), "{what}: {}", r.stdout);
    assert!(
        r.stdout.contains("new      new.txt"),
        "{what}: {}",
        r.stdout
    );
    let r = run(&["status", "--json"]);
    assert_eq!(r.code, Some(0), "{what}: {r:?}");
    let r = run(&["log"]);
    assert_eq!(r.code, Some(0), "{what}: {r:?}");
    assert!(r.stdout.contains("first"), "{what}: {}", r.stdout);
    let r = run(&["locks"]);
    assert_eq!(r.code, Some(0), "{what}: {r:?}");
    assert!(r.stdout.contains("f.txt"), "{what}: {}", r.stdout);
    for args in [&["history", "f.txt"][..], &["describe", "1"], &["info"]] {
        let r = run(args);
        assert_eq!(r.code, Some(0), "{what} {args:?}: {r:?}");
    }
    let r = run(&["edit", "g.txt"]);
    assert_eq!(r.code, Some(1), "{what}: {r:?}");
    assert!(
        r.stderr.contains("Read-only file system") || r.stderr.contains("Permission denied"),
        "{what}: {}",
        r.stderr
    );
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
}

fn chmod(path: &Path, spec: &str) {
    let ok = std::process::Command::new("chmod")
        .args(["-R", spec])
        .arg(path)
        .status()
        .expect("chmod runs")
        .success();
    assert!(ok, "chmod -R {spec} {}", path.display());
}

/// The workspace's directories and metadata files made unwritable with
/// chmod. Root ignores permissions, so as root scribe runs as `nobody`
/// (`setpriv`) over a tree it may read but not write.
#[test]
fn reading_commands_work_in_a_workspace_made_unwritable_by_chmod() {
    let env = Env::new(Transport::Tcp);
    let a = setup(&env);
    chmod(&a, "a+rX,a-w");
    let wrapper: Vec<&str> = if is_root() {
        // `nobody` must reach the workspace through the test's directory.
        chmod(env.dir(), "a+rX");
        vec![
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ]
    } else {
        vec!["env"]
    };
    reading_commands_answer(&|args| env.scribe_via(&wrapper, &a, args), "chmod");
    chmod(&a, "u+w");
    // Nothing was written: the status cache is still missing.
    assert!(!a.join(".scribe/_state/status-cache").exists());
    env.scribe(&a, &["status"]).ok();
}

/// The workspace on a read-only bind mount of itself, in a private mount
/// namespace of the scribe process (`unshare -Urm`: root or an
/// unprivileged user namespace), so it vanishes with the process.
#[test]
fn reading_commands_work_on_a_read_only_mount() {
    let env = Env::new(Transport::Tcp);
    let a = setup(&env);
    let root = a.to_str().unwrap().to_string();
    let script = "mount --bind \"$0\" \"$0\" && mount -o remount,bind,ro \"$0\" \"$0\" \
                  && cd \"$0\" && exec \"$@\"";
    let wrapper = ["unshare", "-Urm", "sh", "-c", script, root.as_str()];
    // The mount itself works here (else this machine cannot run the test).
    let probe = env.scribe_via(&wrapper, &a, &["--version"]);
    assert_eq!(
        probe.code,
        Some(0),
        "unshare -Urm with a bind mount: {probe:?}"
    );
    reading_commands_answer(&|args| env.scribe_via(&wrapper, &a, args), "ro mount");
    assert!(!a.join(".scribe/_state/status-cache").exists());
    env.scribe(&a, &["status"]).ok();
}

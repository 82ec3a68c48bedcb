//! Every "not found" says what was not found, and its hint points at what
//! lists that kind of thing (#23): a change above the head at `scribe log`
//! with the head, a repository at `scribe repo list`, a branch at
//! `--branch`, a path this workspace does not have at `status`/`add`, a
//! path that is not opened or not locked at the command that lists those.
//! Before, every `not_found` hinted at `scribe repo list` and every
//! `not_present` at `scribe sync`.

use super::support::*;

/// `r` failed with `code`, its hint contains every one of `want` and
/// none of `never`.
fn refused(r: &Run, code: &str, want: &[&str], never: &[&str]) {
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(
        r.stderr.contains(&format!("Error[{code}]")),
        "{code}: {}",
        r.stderr
    );
    let hint = r
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("Hint: "))
        .unwrap_or_else(|| panic!("no hint: {}", r.stderr));
    for w in want {
        assert!(hint.contains(w), "the hint names {w:?}: {}", r.stderr);
    }
    for n in never {
        assert!(
            !hint.contains(n),
            "the hint is not about {n:?}: {}",
            r.stderr
        );
    }
}

#[test]
fn a_missing_change_points_at_the_log_and_names_the_head() {
    let env = Env::new(Transport::Path);
    let a = env.workspace("alice", &[]);
    write(&a, "a.txt", b"one");
    env.scribe(&a, &["add", "a.txt"]).ok();
    env.scribe(&a, &["submit", "-m", "one"]).ok();
    for args in [
        &["sync", "99"][..],
        &["describe", "7"],
        &["print", "a.txt@99"],
    ] {
        let r = env.scribe(&a, args);
        refused(
            &r,
            "not_found",
            &["`scribe log`", "change 1"],
            &["repo list"],
        );
        assert!(r.stderr.contains("head"), "{args:?}: {}", r.stderr);
    }
    // Nothing was changed by the refused sync.
    let st = env.scribe(&a, &["status"]);
    st.ok();
    assert!(st.stdout.starts_with("On change 1"), "{}", st.stdout);
}

#[test]
fn a_path_the_workspace_does_not_have_points_at_status_and_add() {
    let env = Env::new(Transport::Path);
    let a = env.workspace("alice", &[]);
    write(&a, "a.txt", b"one");
    env.scribe(&a, &["add", "a.txt"]).ok();
    env.scribe(&a, &["submit", "-m", "one"]).ok();
    // Not tracked: move, edit.
    for args in [
        &["move", "nothere.txt", "other.txt"][..],
        &["edit", "nothere.txt"],
    ] {
        refused(
            &env.scribe(&a, args),
            "not_present",
            &["`scribe status`", "`scribe add`"],
            &["scribe sync", "repo list"],
        );
    }
    // Tracked but not opened: revert says so (it is tracked).
    refused(
        &env.scribe(&a, &["revert", "a.txt"]),
        "not_present",
        &["not opened", "`scribe status`"],
        &["not tracked", "scribe sync"],
    );
    // Nothing to resolve, no pending move.
    refused(
        &env.scribe(&a, &["resolve", "a.txt", "--ours"]),
        "not_present",
        &["`scribe status`", "resolve"],
        &["scribe sync"],
    );
    refused(
        &env.scribe(&a, &["move", "--abort", "nothere.txt"]),
        "not_found",
        &["pending moves"],
        &["repo list"],
    );
    // A path that holds no lock is said, not reported as unlocked.
    let r = env.scribe(&a, &["unlock", "a.txt"]);
    refused(&r, "not_found", &["`scribe locks`"], &["repo list"]);
    assert!(!r.stdout.contains("unlocked"), "{}", r.stdout);
    assert!(r.stderr.contains("a.txt"), "{}", r.stderr);
    env.scribe(&a, &["lock", "a.txt"]).ok();
    let r = env.scribe(&a, &["unlock", "a.txt"]);
    r.ok();
    assert!(r.stdout.contains("unlocked a.txt"), "{}", r.stdout);
}

#[test]
fn a_missing_repository_branch_or_data_root_points_at_what_lists_them() {
    let env = Env::new(Transport::Path);
    let r = env.scribe(
        env.dir(),
        &[
            "workspace",
            "create",
            "w",
            "--server",
            &env.url,
            "--repo",
            "nothere",
        ],
    );
    refused(&r, "not_found", &["`scribe repo list"], &[]);
    let r = env.scribe(
        env.dir(),
        &[
            "workspace",
            "create",
            "w",
            "--server",
            &env.url,
            "--repo",
            REPO,
            "--branch",
            "dev",
        ],
    );
    refused(&r, "not_found", &["--branch"], &["repo list"]);
    let empty = env.path("empty");
    std::fs::create_dir(&empty).unwrap();
    let r = env.scribe(
        env.dir(),
        &["repo", "list", "--server", &empty.to_string_lossy()],
    );
    refused(&r, "not_found", &["`scribe repo create"], &[]);
    // Re-creating outside a workspace: the retired workspace's directory.
    refused(
        &env.scribe(env.dir(), &["workspace", "recreate"]),
        "not_a_workspace",
        &["retired workspace's directory"],
        &[],
    );
}

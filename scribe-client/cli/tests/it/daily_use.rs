//! Issue #18: the daily use a Perforce or Git LFS user expects (dead ends,
//! looking at content, knowing where you are), each with the real `scribe`
//! binary against a real server.

use super::support::{noise, read, write, Env, Transport};

/// The workspace id of the workspace at `dir` (from `scribe info --json`).
fn workspace_id(env: &Env, dir: &std::path::Path) -> String {
    let r = env.scribe(dir, &["info", "--json"]);
    r.ok();
    let at = r.stdout.find("\"workspace\":\"").expect("a workspace id") + 13;
    r.stdout[at..at + 32].to_string()
}

/// #18 item 1: a lock left by a deleted workspace is broken with
/// `unlock --force`, and retiring that workspace says it holds locks
/// (not that another process is busy); after the release it retires.
#[test]
fn a_deleted_workspaces_lock_is_broken_by_force_and_retire_says_why() {
    let env = Env::new(Transport::Tcp);
    let a = env.workspace("alice", &[]);
    write(&a, "hero.psd", b"v1");
    env.scribe(&a, &["add", "hero.psd"]).ok();
    env.scribe(&a, &["submit", "-m", "v1"]).ok();
    env.scribe(&a, &["lock", "hero.psd"]).ok();
    let alice = workspace_id(&env, &a);
    std::fs::remove_dir_all(&a).unwrap();

    let b = env.workspace("bob", &[]);
    let r = env.scribe(&b, &["unlock", "hero.psd"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("Error[locked_by_other]"), "{}", r.stderr);
    assert!(r.stderr.contains("scribe unlock --force"), "{}", r.stderr);
    let r = env.scribe(&b, &["workspace", "retire", &alice]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("holds locks"), "{}", r.stderr);
    assert!(
        !r.stderr.contains("another scribe process"),
        "the reason is the locks: {}",
        r.stderr
    );
    assert!(r.stderr.contains("unlock --force"), "{}", r.stderr);

    let r = env.scribe(&b, &["unlock", "--force", "hero.psd"]);
    r.ok();
    assert!(
        r.stdout.contains("unlocked hero.psd (held by alice"),
        "{}",
        r.stdout
    );
    assert_eq!(env.scribe(&b, &["locks", "--json"]).stdout.trim(), "[]");
    let r = env.scribe(&b, &["unlock", "--force", "hero.psd"]);
    assert_eq!(r.code, Some(1), "nothing left to break: {r:?}");
    assert!(r.stderr.contains("Error[not_found]"), "{}", r.stderr);
    env.scribe(&b, &["lock", "hero.psd"]).ok();
    // The retirement refused before is not replayed.
    env.scribe(&b, &["workspace", "retire", &alice]).ok();
}

/// #18 item 2: `scribe info` says where you are; a workspace follows its
/// server to a new address with `workspace set-server`.
#[test]
fn info_shows_where_you_are_and_set_server_follows_a_moved_server() {
    let mut env = Env::new(Transport::Process);
    let a = env.workspace("alice", &["--view", "art"]);
    write(&a, "art/a.txt", b"a");
    env.scribe(&a, &["add", "art"]).ok();
    env.scribe(&a, &["submit", "-m", "one"]).ok();
    let r = env.scribe(&a, &["info"]);
    r.ok();
    for want in [
        "User:",
        "alice",
        "Workspace:",
        "Root:",
        a.to_str().unwrap(),
        "View:",
        "art",
        "Branch:",
        "main",
        "Change:",
        "Server URL:",
        env.url.as_str(),
        "Server version:",
        env!("CARGO_PKG_VERSION"),
    ] {
        assert!(r.stdout.contains(want), "{want:?} in:\n{}", r.stdout);
    }
    let j = env.scribe(&a, &["info", "--json"]);
    assert!(j.stdout.contains("\"submitted\":1"), "{}", j.stdout);
    assert!(j.stdout.contains("\"registered\":true"), "{}", j.stdout);

    // The server moves to another port.
    env.server_process().kill();
    let moved = scribe_testkit::process::ServerProcess::start(&env.data(), &env.path("run2"));
    let new_url = moved.url();
    assert_ne!(new_url, env.url);
    let r = env.scribe(&a, &["sync"]);
    assert_eq!(r.code, Some(1), "the old address is gone: {r:?}");
    // A URL without a scheme is refused with the one meant.
    let bare = new_url.trim_start_matches("scribe://").to_string();
    let r = env.scribe(&a, &["workspace", "set-server", &bare]);
    assert_eq!(r.code, Some(2), "{r:?}");
    assert!(
        r.stderr.contains(&format!("scribe://{bare}")),
        "{}",
        r.stderr
    );
    env.scribe(&a, &["workspace", "set-server", &new_url]).ok();
    env.scribe(&a, &["sync"]).ok();
    let r = env.scribe(&a, &["info"]);
    assert!(r.stdout.contains(&new_url), "{}", r.stdout);
    // A server holding another repository of that name is refused.
    let other = env.path("other");
    let r = env.scribe(
        env.dir(),
        &[
            "repo",
            "create",
            "demo",
            "--server",
            other.to_str().unwrap(),
        ],
    );
    r.ok();
    let r = env.scribe(&a, &["workspace", "set-server", other.to_str().unwrap()]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("another repository"), "{}", r.stderr);
    let r = env.scribe(&a, &["info", "--json"]);
    assert!(r.stdout.contains(&new_url), "unchanged: {}", r.stdout);
}

/// A repository its operator renamed (`scribe-server repo rename`, server
/// stopped): the workspace's next command names the new name and the one
/// command that follows it; after `workspace set-server` it works on, with
/// its opened files.
#[test]
fn a_workspace_follows_its_repository_renamed_on_the_server() {
    let mut env = Env::new(Transport::Process);
    let a = env.workspace("alice", &[]);
    write(&a, "a.txt", b"a");
    env.scribe(&a, &["add", "a.txt"]).ok();
    env.scribe(&a, &["submit", "-m", "one"]).ok();
    write(&a, "b.txt", b"b");
    env.scribe(&a, &["add", "b.txt"]).ok();
    env.server_process().kill();
    let (_, report) =
        scribe_server::repos::rename(&env.data(), "demo", "demo-2026", false, None).unwrap();
    assert!(!report.notes.is_empty());
    env.restart_server_process();
    for args in [&["sync"][..], &["log"]] {
        let r = env.scribe(&a, args);
        assert_eq!(r.code, Some(1), "{args:?}: {r:?}");
        assert!(
            r.stderr.contains("is named \"demo-2026\" there now")
                || r.stderr.contains("is named demo-2026 there now"),
            "{args:?}: {}",
            r.stderr
        );
        assert!(
            r.stderr.contains(&format!(
                "Hint: run `scribe workspace set-server {}`",
                env.url
            )),
            "{args:?}: {}",
            r.stderr
        );
    }
    let r = env.scribe(&a, &["workspace", "set-server", &env.url.clone()]);
    r.ok();
    assert!(
        r.stderr
            .contains("repository of this workspace: \"demo\" -> \"demo-2026\""),
        "{}",
        r.stderr
    );
    env.scribe(&a, &["sync"]).ok();
    env.scribe(&a, &["submit", "-m", "two"]).ok();
    let r = env.scribe(&a, &["info", "--json"]);
    assert!(r.stdout.contains("demo-2026"), "{}", r.stdout);
    let r = env.scribe(&a, &["log"]);
    r.ok();
    assert!(
        r.stdout.contains("one") && r.stdout.contains("two"),
        "{}",
        r.stdout
    );
}

/// A renamed repository's old name given to a new repository: the server
/// refuses it unless `--reuse-name`, and then a workspace made before the
/// rename is told that the name is another repository's now (by the ids)
/// before anything is read from or sent to it, with the command that
/// follows its own; nothing of its work is touched. Its requests by name
/// went to the new repository (a sync there would have applied another
/// history).
#[test]
fn a_workspace_is_not_bound_to_a_new_repository_given_its_old_name() {
    let mut env = Env::new(Transport::Process);
    let a = env.workspace("alice", &[]);
    write(&a, "a.txt", b"a");
    env.scribe(&a, &["add", "a.txt"]).ok();
    env.scribe(&a, &["submit", "-m", "one"]).ok();
    write(&a, "b.txt", b"b");
    env.scribe(&a, &["add", "b.txt"]).ok();
    env.server_process().kill();
    scribe_server::repos::rename(&env.data(), "demo", "demo-2026", false, None).unwrap();
    {
        let svc = scribe_server::Service::open(env.data()).unwrap();
        let e = scribe_server::service::dispatch::repo_create(&svc, "demo").unwrap_err();
        assert_eq!(
            e.code,
            scribe_format::ErrorCode::AlreadyExists,
            "{}",
            e.message
        );
        assert!(
            e.message.contains("was repository") && e.message.contains("--reuse-name"),
            "{}",
            e.message
        );
        scribe_server::service::dispatch::repo_create_with(&svc, "demo", true).unwrap();
    }
    env.restart_server_process();
    for args in [
        &["sync"][..],
        &["log"],
        &["lock", "a.txt"],
        &["submit", "-m", "x"],
    ] {
        let r = env.scribe(&a, args);
        assert_eq!(r.code, Some(1), "{args:?}: {r:?}");
        assert!(
            r.stderr.contains("is another repository now")
                && r.stderr.contains("is named \"demo-2026\" there"),
            "{args:?}: {}",
            r.stderr
        );
        assert!(
            r.stderr.contains(&format!(
                "Hint: run `scribe workspace set-server {}`",
                env.url
            )),
            "{args:?}: {}",
            r.stderr
        );
    }
    assert_eq!(std::fs::read(a.join("a.txt")).unwrap(), b"a");
    assert_eq!(std::fs::read(a.join("b.txt")).unwrap(), b"b");
    let r = env.scribe(&a, &["workspace", "set-server", &env.url.clone()]);
    r.ok();
    env.scribe(&a, &["sync"]).ok();
    env.scribe(&a, &["submit", "-m", "two"]).ok();
    let r = env.scribe(&a, &["log"]);
    assert!(
        r.stdout.contains("one") && r.stdout.contains("two"),
        "{}",
        r.stdout
    );
    // The new repository of that name was never reached.
    let r = env.scribe(
        &a,
        &["repo", "list", "--server", &env.url.clone(), "--json"],
    );
    r.ok();
    assert!(
        r.stdout.contains("\"name\":\"demo\",")
            && r.stdout
                .split("\"name\":\"demo\",")
                .nth(1)
                .is_some_and(|rest| {
                    rest.split('}').next().unwrap_or("").contains("\"head\":0")
                }),
        "{}",
        r.stdout
    );
}

/// A retired repository (`scribe-server repo retire`, server stopped) is
/// kept read-only: a real client's sync, log and print work; lock and
/// submit are refused with `repository_retired` naming whom to ask, and
/// the opened work stays; after `repo unretire` the same submit lands.
#[test]
fn a_retired_repository_serves_reads_and_refuses_writes_naming_whom_to_ask() {
    let mut env = Env::new(Transport::Process);
    let a = env.workspace("alice", &[]);
    write(&a, "a.txt", b"a");
    env.scribe(&a, &["add", "a.txt"]).ok();
    env.scribe(&a, &["submit", "-m", "one"]).ok();
    let b = env.workspace("bob", &[]);
    write(&a, "b.txt", b"b");
    env.scribe(&a, &["add", "b.txt"]).ok();
    env.server_process().kill();
    let report =
        scribe_server::repos::set_retired(&env.data(), "demo", true, "Dana (pipeline team)")
            .unwrap();
    assert!(report.notes[0].contains("retired repository"), "{report:?}");
    env.restart_server_process();
    // Reads.
    env.scribe(&b, &["sync"]).ok();
    assert_eq!(std::fs::read(b.join("a.txt")).unwrap(), b"a");
    let r = env.scribe(&a, &["log"]);
    r.ok();
    assert!(r.stdout.contains("one"), "{}", r.stdout);
    env.scribe(&a, &["print", "a.txt"]).ok();
    // Writes.
    for args in [&["lock", "a.txt"][..], &["submit", "-m", "two"]] {
        let r = env.scribe(&a, args);
        assert_eq!(r.code, Some(1), "{args:?}: {r:?}");
        assert!(
            r.stderr.contains("Error[repository_retired]")
                && r.stderr.contains("is retired (kept read-only)")
                && r.stderr.contains("ask Dana (pipeline team)"),
            "{args:?}: {}",
            r.stderr
        );
        assert!(
            r.stderr.contains("Hint: this repository is kept read-only"),
            "{}",
            r.stderr
        );
    }
    let r = env.scribe(&a, &["status"]);
    assert!(r.stdout.contains("b.txt"), "still opened: {}", r.stdout);
    assert_eq!(std::fs::read(a.join("b.txt")).unwrap(), b"b");
    // Back.
    env.server_process().kill();
    scribe_server::repos::set_retired(&env.data(), "demo", false, "").unwrap();
    env.restart_server_process();
    env.scribe(&a, &["submit", "-m", "two"]).ok();
    env.scribe(&b, &["sync"]).ok();
    assert_eq!(std::fs::read(b.join("b.txt")).unwrap(), b"b");
}

/// #18 item 3: a retired workspace refuses `edit` and `add`, its hints
/// lead out, and `workspace recreate` makes a new workspace in place
/// keeping local edits, opened files and the recovery area.
#[test]
fn a_retired_workspace_is_recreated_in_place_keeping_local_work() {
    let env = Env::new(Transport::Tcp);
    let a = env.workspace("alice", &[]);
    write(&a, "keep.txt", b"keep");
    write(&a, "edit.txt", b"v1");
    write(&a, "gone.txt", b"gone");
    env.scribe(&a, &["add", "."]).ok();
    env.scribe(&a, &["submit", "-m", "base"]).ok();
    env.scribe(&a, &["edit", "edit.txt"]).ok();
    write(&a, "edit.txt", b"my unsubmitted edit");
    // Something in the recovery area.
    env.scribe(&a, &["delete", "gone.txt"]).ok();
    write(&a, "new.txt", b"new file");
    env.scribe(&a, &["add", "new.txt"]).ok();
    let before = env.scribe(&a, &["recovery", "list", "--json"]).stdout;
    assert!(before.contains("gone.txt"), "{before}");
    let old = workspace_id(&env, &a);
    // Retired (by an administrator, from elsewhere).
    let b = env.workspace("bob", &[]);
    env.scribe(&b, &["workspace", "retire", &old]).ok();

    // The first server request learns it; the hint leads to recreate.
    let r = env.scribe(&a, &["lock", "keep.txt"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(
        r.stderr.contains("Error[workspace_retired]"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("scribe workspace recreate"),
        "{}",
        r.stderr
    );
    let r = env.scribe(&a, &["edit", "keep.txt"]);
    assert_eq!(r.code, Some(1), "edit in a retired workspace: {r:?}");
    assert!(
        r.stderr.contains("Error[workspace_retired]"),
        "{}",
        r.stderr
    );
    let r = env.scribe(&a, &["info"]);
    assert!(r.stdout.contains("retired"), "{}", r.stdout);
    // `workspace create` over it points to recreate too.
    let r = env.scribe(
        &a,
        &[
            "workspace",
            "create",
            ".",
            "--server",
            &env.url,
            "--repo",
            "demo",
        ],
    );
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(
        r.stderr.contains("scribe workspace recreate"),
        "{}",
        r.stderr
    );

    let r = env.scribe(&a, &["workspace", "recreate"]);
    r.ok();
    let new = workspace_id(&env, &a);
    assert_ne!(new, old);
    assert_eq!(read(&a, "edit.txt"), b"my unsubmitted edit");
    assert_eq!(read(&a, "new.txt"), b"new file");
    assert!(!a.join("gone.txt").exists());
    assert!(a.join(format!(".scribe/retired-{old}")).is_dir());
    let st = env.scribe(&a, &["status", "--json"]);
    for (p, action) in [
        ("edit.txt", "edit"),
        ("new.txt", "add"),
        ("gone.txt", "delete"),
    ] {
        assert!(
            st.stdout
                .contains(&format!("{{\"path\":\"{p}\",\"action\":\"{action}\"")),
            "{p} {action}: {}",
            st.stdout
        );
    }
    let after = env.scribe(&a, &["recovery", "list", "--json"]).stdout;
    assert!(
        after.contains("gone.txt"),
        "the recovery area is kept: {after}"
    );
    // A recreate of an active workspace is refused.
    let r = env.scribe(&a, &["workspace", "recreate"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    env.scribe(&a, &["submit", "-m", "after recreate"]).ok();
    env.scribe(&b, &["sync"]).ok();
    assert_eq!(read(&b, "edit.txt"), b"my unsubmitted edit");
    assert_eq!(read(&b, "new.txt"), b"new file");
    assert!(!b.join("gone.txt").exists());
}

/// #18 item 6: `status` after a submit names the change the workspace has.
#[test]
fn status_after_a_submit_shows_the_change_the_workspace_has() {
    let env = Env::new(Transport::Tcp);
    let a = env.workspace("alice", &[]);
    write(&a, "a.txt", b"a");
    env.scribe(&a, &["add", "a.txt"]).ok();
    env.scribe(&a, &["submit", "-m", "one"]).ok();
    let st = env.scribe(&a, &["status"]);
    assert!(
        st.stdout.starts_with("On change 1 of demo"),
        "{}",
        st.stdout
    );
    let j = env.scribe(&a, &["status", "--json"]);
    assert!(
        j.stdout.contains("\"have\":1,\"submitted\":1"),
        "{}",
        j.stdout
    );
    // Someone else submits; Alice's next submit is not the whole workspace.
    let b = env.workspace("bob", &[]);
    write(&b, "b.txt", b"b");
    env.scribe(&b, &["add", "b.txt"]).ok();
    env.scribe(&b, &["submit", "-m", "two"]).ok();
    env.scribe(&a, &["edit", "a.txt"]).ok();
    write(&a, "a.txt", b"a3");
    env.scribe(&a, &["submit", "-m", "three"]).ok();
    let st = env.scribe(&a, &["status"]);
    assert!(
        st.stdout
            .starts_with("On change 0 of demo, with your change 3"),
        "{}",
        st.stdout
    );
    env.scribe(&a, &["sync"]).ok();
    let st = env.scribe(&a, &["status"]);
    assert!(
        st.stdout.starts_with("On change 3 of demo\n"),
        "{}",
        st.stdout
    );
}

/// #18 item 9: an empty log, an unknown path's history or lock, and
/// `describe 0` say so.
#[test]
fn empty_and_unknown_things_say_so() {
    let env = Env::new(Transport::Tcp);
    let a = env.workspace("alice", &[]);
    let r = env.scribe(&a, &["log"]);
    r.ok();
    assert!(r.stdout.contains("No changes yet in demo"), "{}", r.stdout);
    // Nothing opened: said so, with or without a message (not "a submit
    // needs a message").
    for args in [&["submit"][..], &["submit", "-m", "x"]] {
        let r = env.scribe(&a, args);
        assert_eq!(r.code, Some(1), "{r:?}");
        assert!(
            r.stderr
                .contains("Error[empty_submission]: nothing is opened"),
            "{}",
            r.stderr
        );
    }
    assert_eq!(env.scribe(&a, &["log", "--json"]).stdout.trim(), "[]");
    // Found by use (session 26): files changed without `add`/`edit` (an
    // artist saving over a synced file, a new export) met only "open
    // files with add, edit or delete first"; the hint now counts them and
    // names `scribe reconcile`, which opens them all.
    write(&a, "new.png", b"an export");
    let r = env.scribe(&a, &["submit", "-m", "x"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(
        r.stderr.contains(
            "Hint: 1 file(s) changed here but not opened (new.png): `scribe reconcile` opens them"
        ),
        "{}",
        r.stderr
    );
    std::fs::remove_file(a.join("new.png")).unwrap();
    write(&a, "a.txt", b"a");
    env.scribe(&a, &["add", "a.txt"]).ok();
    env.scribe(&a, &["submit", "-m", "one"]).ok();
    let r = env.scribe(&a, &["history", "nope.txt"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("Error[not_found]"), "{}", r.stderr);
    assert!(r.stderr.contains("no history"), "{}", r.stderr);
    let r = env.scribe(&a, &["lock", "nope.txt"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(
        r.stderr.contains("not files of this workspace"),
        "{}",
        r.stderr
    );
    assert_eq!(env.scribe(&a, &["locks", "--json"]).stdout.trim(), "[]");
    let r = env.scribe(&a, &["describe", "0"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("numbered from 1"), "{}", r.stderr);
    assert!(r.stdout.is_empty(), "not the head: {}", r.stdout);
}

/// #18 item 11: a FIFO or a socket is refused at `add`, named, and the
/// rest of the tree is added.
#[cfg(unix)]
#[test]
fn a_fifo_or_socket_is_refused_at_add() {
    let env = Env::new(Transport::Tcp);
    let a = env.workspace("alice", &[]);
    write(&a, "dir/real.txt", b"real");
    let made = std::process::Command::new("mkfifo")
        .arg(a.join("dir/pipe"))
        .status()
        .unwrap();
    assert!(made.success());
    let _sock = std::os::unix::net::UnixListener::bind(a.join("dir/sock")).unwrap();
    let r = env.scribe(&a, &["add", "dir/pipe"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(
        r.stderr
            .contains("a FIFO (named pipe) is not a regular file"),
        "{}",
        r.stderr
    );
    // Found by walking `.`: said, not opened, not a failure (#18 item 16).
    let r = env.scribe(&a, &["add", "."]);
    assert_eq!(r.code, Some(0), "{r:?}");
    assert!(r.stderr.contains("dir/pipe"), "{}", r.stderr);
    assert!(r.stderr.contains("dir/sock"), "{}", r.stderr);
    assert!(r.stderr.contains("special_file"), "{}", r.stderr);
    let st = env.scribe(&a, &["status", "--json"]);
    assert!(
        st.stdout
            .contains("{\"path\":\"dir/real.txt\",\"action\":\"add\""),
        "{}",
        st.stdout
    );
    assert!(
        st.stdout
            .contains("{\"path\":\"dir/pipe\",\"code\":\"special_file\"}"),
        "{}",
        st.stdout
    );
    env.scribe(&a, &["submit", "-m", "real only"]).ok();
}

/// #18 item 12: a server address without a scheme suggests `scribe://`;
/// `scribes://` without a CA names the setting that provides it.
#[test]
fn a_bare_address_and_a_missing_ca_are_explained() {
    let env = Env::new(Transport::Tcp);
    let bare = env.url.trim_start_matches("scribe://").to_string();
    for args in [
        vec!["repo", "list", "--server", bare.as_str()],
        vec![
            "workspace",
            "create",
            "w",
            "--server",
            bare.as_str(),
            "--repo",
            "demo",
        ],
    ] {
        let r = env.scribe(env.dir(), &args);
        assert_eq!(r.code, Some(2), "{r:?}");
        assert!(
            r.stderr.contains(&format!("scribe://{bare}")),
            "{}",
            r.stderr
        );
    }
    assert!(!env.path("w").exists());
    assert!(!env.dir().join(&bare).exists(), "no data root was made");
    let tls = format!("scribes://{bare}");
    let r = env
        .command(env.dir(), &["repo", "list", "--server", &tls])
        .env_remove("SCRIBE_CA_FILE")
        .env("SCRIBE_CONFIG_DIR", env.path("no-login"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("SCRIBE_CA_FILE"), "{stderr}");
}

/// Raw stdout of `scribe ARGS` (bytes, not text) and the exit code.
fn raw(env: &Env, dir: &std::path::Path, args: &[&str]) -> (Option<i32>, Vec<u8>, String) {
    let out = env.command(dir, args).output().unwrap();
    (
        out.status.code(),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Two changes of a text file and a multi-chunk binary, in `alice`.
fn two_changes(env: &Env) -> std::path::PathBuf {
    let a = env.workspace("alice", &[]);
    write(&a, "notes.txt", b"first line\nold line\nlast line\n");
    write(&a, "art/hero.psd", &noise(3 << 20, 7));
    write(&a, "gone.txt", b"to be deleted\n");
    env.scribe(&a, &["add", "."]).ok();
    env.scribe(&a, &["submit", "-m", "one"]).ok();
    env.scribe(&a, &["edit", "notes.txt", "art/hero.psd"]).ok();
    write(&a, "notes.txt", b"first line\nnew line\nlast line\n");
    let mut hero = noise(3 << 20, 7);
    hero[1000..2000].copy_from_slice(&[9; 1000]);
    write(&a, "art/hero.psd", &hero);
    env.scribe(&a, &["delete", "gone.txt"]).ok();
    write(&a, "added.txt", b"brand new\n");
    env.scribe(&a, &["add", "added.txt"]).ok();
    env.scribe(&a, &["submit", "-m", "two"]).ok();
    a
}

/// #18 content: `print PATH[@CHANGE]` writes the exact bytes of a
/// revision (the workspace's, a change's, the head's) to stdout.
#[test]
fn print_writes_a_files_bytes_at_a_change() {
    let env = Env::new(Transport::Tcp);
    let a = two_changes(&env);
    let mut hero2 = noise(3 << 20, 7);
    hero2[1000..2000].copy_from_slice(&[9; 1000]);
    let (code, out, err) = raw(&env, &a, &["print", "art/hero.psd"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out == hero2,
        "the workspace's revision ({} bytes)",
        out.len()
    );
    let (code, out, err) = raw(&env, &a, &["print", "art/hero.psd@1"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out == noise(3 << 20, 7), "change 1 ({} bytes)", out.len());
    let (code, out, _) = raw(&env, &a, &["print", "notes.txt@head"]);
    assert_eq!(
        (code, out.as_slice()),
        (Some(0), &b"first line\nnew line\nlast line\n"[..])
    );
    // From a subdirectory, relative to it.
    let (code, out, _) = raw(&env, &a.join("art"), &["print", "hero.psd@1"]);
    assert_eq!(code, Some(0));
    assert_eq!(out.len(), 3 << 20);
    let (code, out, err) = raw(&env, &a, &["print", "gone.txt@1"]);
    assert_eq!(
        (code, out.as_slice()),
        (Some(0), &b"to be deleted\n"[..]),
        "{err}"
    );
    let (code, _, err) = raw(&env, &a, &["print", "gone.txt@2"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("Error[not_found]") && err.contains("change 2"),
        "{err}"
    );
    let (code, _, err) = raw(&env, &a, &["print", "gone.txt"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("gone.txt@head"), "the hint names @head: {err}");
}

/// #18 content: `diff` shows a unified diff for text, sizes and content
/// ids for binaries, and `--tool` hands the two files to a program.
#[test]
fn diff_shows_text_changes_binary_summaries_and_runs_a_tool() {
    let env = Env::new(Transport::Tcp);
    let a = two_changes(&env);
    let r = env.scribe(&a, &["diff"]);
    r.ok();
    assert!(r.stderr.contains("No differences"), "{r:?}");
    env.scribe(&a, &["edit", "notes.txt", "art/hero.psd"]).ok();
    write(&a, "notes.txt", b"first line\nnewer line\nlast line\n");
    write(&a, "art/hero.psd", &noise(1 << 20, 8));
    env.scribe(&a, &["delete", "added.txt"]).ok();
    write(&a, "fresh.txt", b"hello\n");
    env.scribe(&a, &["add", "fresh.txt"]).ok();
    let r = env.scribe(&a, &["diff"]);
    r.ok();
    let out = &r.stdout;
    for want in [
        "--- a/notes.txt@2",
        "+++ b/notes.txt",
        "-new line",
        "+newer line",
        " first line",
        "binary art/hero.psd (edit): 3.0 MiB (content ",
        "-> 1.0 MiB (content ",
        "--- a/added.txt@2",
        "+++ /dev/null",
        "-brand new",
        "--- /dev/null",
        "+++ b/fresh.txt",
        "+hello",
    ] {
        assert!(out.contains(want), "{want:?} in:\n{out}");
    }
    // Only under a path.
    let r = env.scribe(&a, &["diff", "art"]);
    assert!(!r.stdout.contains("notes.txt"), "{}", r.stdout);
    let j = env.scribe(&a, &["diff", "--json", "art"]);
    assert!(j.stdout.contains("\"binary\":true"), "{}", j.stdout);
    // An external tool gets OLD and NEW.
    let script = env.path("tool.sh");
    let log = env.path("tool.log");
    std::fs::write(
        &script,
        format!(
            "cat \"$1\" > {0}.old; cat \"$2\" > {0}.new; exit 1\n",
            log.display()
        ),
    )
    .unwrap();
    let tool = format!("sh {}", script.display());
    env.scribe(&a, &["diff", "notes.txt", "--tool", &tool]).ok();
    assert_eq!(
        std::fs::read(format!("{}.old", log.display())).unwrap(),
        b"first line\nnew line\nlast line\n"
    );
    assert_eq!(
        std::fs::read(format!("{}.new", log.display())).unwrap(),
        b"first line\nnewer line\nlast line\n"
    );
    let tmp: Vec<_> = std::fs::read_dir(a.join(".scribe/_state/tmp"))
        .unwrap()
        .collect();
    assert!(tmp.is_empty(), "temporary files removed: {tmp:?}");
}

/// #18 content: `describe` lists each file's size, and `--diff` what each
/// file changed from the revision before.
#[test]
fn describe_shows_sizes_and_diffs_on_request() {
    let env = Env::new(Transport::Tcp);
    let a = two_changes(&env);
    let r = env.scribe(&a, &["describe", "2"]);
    r.ok();
    for want in [
        "edit    art/hero.psd  3.0 MiB",
        "delete  gone.txt  -",
        "add     added.txt  10 B",
    ] {
        assert!(r.stdout.contains(want), "{want:?} in:\n{}", r.stdout);
    }
    assert!(!r.stdout.contains("+new line"), "no diff unless asked");
    let r = env.scribe(&a, &["describe", "2", "--diff"]);
    r.ok();
    for want in [
        "--- a/notes.txt@1",
        "+++ b/notes.txt@2",
        "-old line",
        "+new line",
        "binary art/hero.psd (edit): 3.0 MiB (content ",
        "+brand new",
        "--- a/gone.txt@1",
        "-to be deleted",
    ] {
        assert!(r.stdout.contains(want), "{want:?} in:\n{}", r.stdout);
    }
    let j = env.scribe(&a, &["describe", "2", "--diff", "--json"]);
    assert!(j.stdout.contains("\"diffs\":["), "{}", j.stdout);
}

/// #18 content: during resolve, `--show base|theirs` prints either side,
/// so a hand merge can be made and given with `--merged`.
#[test]
fn resolve_shows_base_and_theirs_for_a_merge() {
    let env = Env::new(Transport::Tcp);
    let a = env.workspace("alice", &[]);
    write(&a, "notes.txt", b"base\n");
    env.scribe(&a, &["add", "notes.txt"]).ok();
    env.scribe(&a, &["submit", "-m", "base"]).ok();
    let b = env.workspace("bob", &[]);
    env.scribe(&b, &["edit", "notes.txt"]).ok();
    write(&b, "notes.txt", b"base\nbob\n");
    env.scribe(&b, &["submit", "-m", "bob"]).ok();
    env.scribe(&a, &["edit", "notes.txt"]).ok();
    write(&a, "notes.txt", b"alice\nbase\n");
    env.scribe(&a, &["sync"]).ok();
    let (code, out, err) = raw(&env, &a, &["resolve", "notes.txt", "--show", "base"]);
    assert_eq!((code, out.as_slice()), (Some(0), &b"base\n"[..]), "{err}");
    assert!(err.contains("base of notes.txt: change 1"), "{err}");
    let (code, out, err) = raw(&env, &a, &["resolve", "notes.txt", "--show", "theirs"]);
    assert_eq!(
        (code, out.as_slice()),
        (Some(0), &b"base\nbob\n"[..]),
        "{err}"
    );
    // Still deferred: --show settles nothing.
    let st = env.scribe(&a, &["status", "--json"]);
    assert!(
        st.stdout.contains("\"needs_resolve\":[\"notes.txt\"]"),
        "{}",
        st.stdout
    );
    write(&a, "../merged.txt", b"alice\nbase\nbob\n");
    // Found by use (session 26): `--merged` said "kept yours", though the
    // merge replaced yours (kept in the recovery area).
    let r = env.scribe(&a, &["resolve", "notes.txt", "--merged", "../merged.txt"]);
    r.ok();
    assert!(
        r.stdout.contains(
            "resolved notes.txt: took your merged file (yours went to the recovery area), opened for edit"
        ) && !r.stdout.contains("kept yours"),
        "{}",
        r.stdout
    );
    env.scribe(&a, &["submit", "-m", "merged"]).ok();
    env.scribe(&b, &["sync"]).ok();
    assert_eq!(read(&b, "notes.txt"), b"alice\nbase\nbob\n");
    let r = env.scribe(&a, &["resolve", "notes.txt", "--show", "theirs"]);
    assert_eq!(r.code, Some(1), "nothing to resolve now: {r:?}");
    let r = env.scribe(&a, &["resolve", "notes.txt", "--show", "theirs", "--ours"]);
    assert_eq!(r.code, Some(2), "{r:?}");
}

/// #18 item 7: `history` shows author, time and message, follows the file
/// back through a move, and `--json` carries them.
#[test]
fn history_follows_moves_with_author_time_and_message() {
    let env = Env::new(Transport::Tcp);
    let a = env.workspace("alice", &[]);
    write(&a, "old/a.txt", b"1");
    env.scribe(&a, &["add", "old"]).ok();
    env.scribe(&a, &["submit", "-m", "first version"]).ok();
    let b = env.workspace("bob", &[]);
    env.scribe(&b, &["edit", "old/a.txt"]).ok();
    write(&b, "old/a.txt", b"22");
    env.scribe(&b, &["submit", "-m", "bob's edit\nwith details"])
        .ok();
    env.scribe(&a, &["sync"]).ok();
    env.scribe(&a, &["move", "old", "new"]).ok();
    env.scribe(&a, &["submit", "-m", "moved"]).ok();
    let r = env.scribe(&a, &["history", "new/a.txt"]);
    r.ok();
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", r.stdout);
    assert!(
        lines[0].contains("change 3") && lines[0].contains("alice") && lines[0].contains("moved"),
        "{}",
        r.stdout
    );
    assert!(
        lines[0].contains("(moved from old/a.txt@2)"),
        "{}",
        r.stdout
    );
    assert!(
        lines[1].contains("change 2")
            && lines[1].contains("bob")
            && lines[1].contains("bob's edit"),
        "{}",
        r.stdout
    );
    assert!(lines[1].contains("as old/a.txt"), "{}", r.stdout);
    assert!(
        !lines[1].contains("with details"),
        "first line only: {}",
        r.stdout
    );
    assert!(
        lines[2].contains("change 1") && lines[2].contains("first version"),
        "{}",
        r.stdout
    );
    assert!(
        lines[2].contains(" UTC") || lines[2].contains('Z'),
        "a time: {}",
        r.stdout
    );
    let j = env.scribe(&a, &["history", "new/a.txt", "--json"]);
    for want in [
        "\"author\":\"bob\"",
        "\"message\":\"bob's edit\\nwith details\"",
        "\"path\":\"old/a.txt\"",
        "\"timestamp_ms\":",
    ] {
        assert!(j.stdout.contains(want), "{want} in {}", j.stdout);
    }
}

/// #18 item 8: `workspace list` shows owner, host, root directory, view
/// and last use (the last submit).
#[test]
fn workspace_list_shows_owner_host_root_view_and_last_use() {
    let env = Env::new(Transport::Tcp);
    let a = env.workspace("alice", &["--view", "art"]);
    write(&a, "art/a.txt", b"a");
    env.scribe(&a, &["add", "art"]).ok();
    env.scribe(&a, &["submit", "-m", "one"]).ok();
    let b = env.workspace("bob", &[]);
    let r = env.scribe(&b, &["workspace", "list"]);
    r.ok();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap_or_default()
        .trim()
        .to_string();
    for want in [
        format!("alice@{host}  {}", a.display()),
        format!("bob@{host}  {}", b.display()),
        "view art".to_string(),
        "last submit change 1".to_string(),
        "no recent submit".to_string(),
    ] {
        assert!(r.stdout.contains(&want), "{want:?} in:\n{}", r.stdout);
    }
    let j = env.scribe(&b, &["workspace", "list", "--json"]);
    assert!(j.stdout.contains("\"owner\":\"alice\""), "{}", j.stdout);
    assert!(
        j.stdout.contains(&format!("\"root\":\"{}\"", a.display())),
        "{}",
        j.stdout
    );
    assert!(j.stdout.contains("\"last_submit\":1"), "{}", j.stdout);
}

/// #18 item 10: a sparse workspace refuses to add files outside its view.
#[test]
fn files_outside_a_sparse_view_are_refused_at_add() {
    let env = Env::new(Transport::Tcp);
    let a = env.workspace("alice", &["--view", "art"]);
    write(&a, "art/in.txt", b"in");
    write(&a, "code/out.rs", b"out");
    let r = env.scribe(&a, &["add", "code/out.rs"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("Error[not_in_view]"), "{}", r.stderr);
    assert!(
        r.stderr.contains("not in the workspace view"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("scribe view"), "{}", r.stderr);
    let r = env.scribe(&a, &["add", "."]);
    assert_eq!(r.code, Some(0), "{r:?}");
    assert!(r.stdout.contains("art/in.txt"), "{}", r.stdout);
    assert!(
        r.stderr.contains("not opened: code/out.rs: ") && r.stderr.contains("(not_in_view)"),
        "{}",
        r.stderr
    );
    // status says why, and reconcile does not open it either.
    let st = env.scribe(&a, &["status"]);
    assert!(
        st.stdout.contains("code/out.rs  (not_in_view"),
        "{}",
        st.stdout
    );
    env.scribe(&a, &["reconcile"]).ok();
    let st = env.scribe(&a, &["status", "--json"]);
    assert!(
        !st.stdout.contains("\"path\":\"code/out.rs\",\"action\""),
        "{}",
        st.stdout
    );
    env.scribe(&a, &["submit", "-m", "in view"]).ok();
    let d = env.scribe(&a, &["describe", "1"]);
    assert!(!d.stdout.contains("code/out.rs"), "{}", d.stdout);
}

/// #18 item 5: syncing back to an older change does not copy every
/// replaced unmodified file into the recovery area (its content is on the
/// server); a locally modified file is still never overwritten, and what
/// only the workspace holds is still kept.
#[test]
fn syncing_back_keeps_only_content_that_exists_nowhere_else() {
    let env = Env::new(Transport::Tcp);
    let a = env.workspace("alice", &[]);
    write(&a, "big.bin", &noise(2 << 20, 1));
    write(&a, "mine.txt", b"v1");
    env.scribe(&a, &["add", "."]).ok();
    env.scribe(&a, &["submit", "-m", "one"]).ok();
    env.scribe(&a, &["edit", "big.bin", "mine.txt"]).ok();
    write(&a, "big.bin", &noise(2 << 20, 2));
    write(&a, "mine.txt", b"v2");
    env.scribe(&a, &["submit", "-m", "two"]).ok();
    env.scribe(&a, &["sync"]).ok();
    // A local change nobody else has (not opened).
    write(&a, "mine.txt", b"only here");
    let r = env.scribe(&a, &["sync", "1"]);
    r.ok();
    assert_eq!(read(&a, "big.bin"), noise(2 << 20, 1));
    assert_eq!(read(&a, "mine.txt"), b"only here", "never overwritten");
    let rec = env.scribe(&a, &["recovery", "list", "--json"]);
    assert_eq!(rec.stdout.trim(), "[]", "nothing copied: {}", rec.stdout);
    let area: u64 = std::fs::read_dir(a.join(".scribe/_state/recovery"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0);
    assert_eq!(area, 0);
    env.scribe(&a, &["sync"]).ok();
    assert_eq!(read(&a, "big.bin"), noise(2 << 20, 2));
    // Taking theirs over local work keeps the local bytes.
    env.scribe(&a, &["resolve", "mine.txt", "--theirs"]).ok();
    assert_eq!(read(&a, "mine.txt"), b"v2");
    let rec = env.scribe(&a, &["recovery", "list", "--json"]);
    assert!(
        rec.stdout.contains("\"path\":\"mine.txt\""),
        "{}",
        rec.stdout
    );
}

/// `scribe sync 0` goes to change 0, the empty tree before any change (it
/// went to the head): every tracked file is removed, local work is kept
/// and deferred as any sync defers it, untracked files stay, and a later
/// `scribe sync` returns to the head.
#[test]
fn sync_to_change_0_empties_the_workspace_and_keeps_local_work() {
    let env = Env::new(Transport::Tcp);
    let a = env.workspace("alice", &[]);
    write(&a, "f.txt", b"v1");
    write(&a, "sub/g.txt", b"g");
    write(&a, "mine.txt", b"m1");
    env.scribe(&a, &["add", "."]).ok();
    env.scribe(&a, &["submit", "-m", "one"]).ok();
    let b = env.workspace("bob", &[]);
    assert_eq!(read(&b, "f.txt"), b"v1");
    write(&b, "mine.txt", b"local work");
    write(&b, "untracked.txt", b"u");
    let r = env.scribe(&b, &["sync", "0", "--json"]);
    r.ok();
    assert!(r.stdout.contains("\"change\":0"), "{}", r.stdout);
    assert!(!b.join("f.txt").exists(), "{}", r.stdout);
    assert!(!b.join("sub/g.txt").exists());
    assert_eq!(read(&b, "mine.txt"), b"local work", "never overwritten");
    assert_eq!(read(&b, "untracked.txt"), b"u");
    let st = env.scribe(&b, &["status", "--json"]);
    st.ok();
    assert!(
        st.stdout.contains("\"needs_resolve\":[\"mine.txt\"]"),
        "{}",
        st.stdout
    );
    let info = env.scribe(&b, &["info", "--json"]);
    assert!(info.stdout.contains("\"synced\":0"), "{}", info.stdout);
    // Back to the head.
    env.scribe(&b, &["resolve", "mine.txt", "--theirs"]).ok();
    env.scribe(&b, &["sync"]).ok();
    assert_eq!(read(&b, "f.txt"), b"v1");
    assert_eq!(read(&b, "sub/g.txt"), b"g");
    assert_eq!(read(&b, "mine.txt"), b"m1");
}

/// #18 item 10: `sync` and `status` warn when a synced path differs only
/// in case from a file opened for add here (submit would refuse it).
#[test]
fn sync_and_status_warn_of_a_case_collision_with_an_opened_add() {
    let env = Env::new(Transport::Tcp);
    let a = env.workspace("alice", &[]);
    let b = env.workspace("bob", &[]);
    write(&a, "Readme.txt", b"mine");
    env.scribe(&a, &["add", "Readme.txt"]).ok();
    write(&b, "README.txt", b"theirs");
    env.scribe(&b, &["add", "README.txt"]).ok();
    env.scribe(&b, &["submit", "-m", "readme"]).ok();
    let warning = "your opened Readme.txt and the synced README.txt differ only in case";
    let r = env.scribe(&a, &["sync"]);
    r.ok();
    assert!(r.stderr.contains(warning), "{}", r.stderr);
    assert!(r.stderr.contains("scribe move Readme.txt"), "{}", r.stderr);
    let r = env.scribe(&a, &["status"]);
    r.ok();
    assert!(r.stderr.contains(warning), "{}", r.stderr);
    let r = env.scribe(&a, &["status", "--json"]);
    assert!(
        r.stdout.contains(
            "\"case_collisions\":[{\"opened\":\"Readme.txt\",\"tracked\":\"README.txt\"}]"
        ),
        "{}",
        r.stdout
    );
    // Renamed out of the way, the warning is gone and the submit goes in.
    env.scribe(&a, &["move", "Readme.txt", "Readme-alice.txt"])
        .ok();
    let r = env.scribe(&a, &["status"]);
    assert!(!r.stderr.contains("differ only in case"), "{}", r.stderr);
    env.scribe(&a, &["submit", "-m", "mine"]).ok();
}

/// #18 item 8: `workspace list` shows each workspace's last use: the
/// newest of its last sync (recorded on the server as the `used=` tag, at
/// most hourly) and its last submit; recording it keeps the workspace's
/// view, label and other tags.
#[test]
fn workspace_list_shows_last_use_from_syncs() {
    let env = Env::new(Transport::Tcp);
    let a = env.workspace("alice", &["--view", "art", "--label", "artist"]);
    let b = env.workspace("bob", &[]);
    let r = env.scribe(&b, &["workspace", "list", "--json"]);
    assert_eq!(
        r.stdout.matches("\"last_use_ms\":null").count(),
        2,
        "nothing used yet: {}",
        r.stdout
    );
    let r = env.scribe(&b, &["workspace", "list"]);
    assert!(r.stdout.contains("no use recorded"), "{}", r.stdout);
    let before = scribe_workspace::scan::now_ms();
    env.scribe(&a, &["sync"]).ok();
    let r = env.scribe(&b, &["workspace", "list", "--json"]);
    r.ok();
    let alice = r
        .stdout
        .split("},{")
        .find(|w| w.contains("\"owner\":\"alice\""))
        .expect("alice listed")
        .to_string();
    let at = alice.find("\"last_use_ms\":").expect("last use") + 14;
    let used: u64 = alice[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .expect("a time, not null");
    assert!(used >= before, "{alice}");
    assert!(alice.contains("\"last_sync_ms\":"), "{alice}");
    assert!(alice.contains("\"label\":\"artist\""), "{alice}");
    assert!(alice.contains("\"view\":[\"art\"]"), "{alice}");
    assert!(
        alice.contains(&format!("\"root\":\"{}\"", a.display())),
        "{alice}"
    );
    let r = env.scribe(&b, &["workspace", "list"]);
    assert!(r.stdout.contains("last use 20"), "{}", r.stdout);
    assert_eq!(
        r.stdout.matches("no use recorded").count(),
        1,
        "{}",
        r.stdout
    );
    // A view change re-registers the workspace with its new view and
    // keeps its label and last use (it used to send an empty label).
    env.scribe(&a, &["view", "set", "art", "audio"]).ok();
    let r = env.scribe(&b, &["workspace", "list", "--json"]);
    let alice = r
        .stdout
        .split("},{")
        .find(|w| w.contains("\"owner\":\"alice\""))
        .expect("alice listed")
        .to_string();
    assert!(alice.contains("\"label\":\"artist\""), "{alice}");
    assert!(alice.contains("\"view\":[\"art\",\"audio\"]"), "{alice}");
    assert!(!alice.contains("\"last_use_ms\":null"), "{alice}");
}

/// #18 item 15: wording ("moved a -> b", "added" for new files a sync
/// brings, "entries", the workspace root named in a refusal) and `delete`
/// removing the directories it emptied (`revert` brings them back).
#[test]
fn wording_fixes_and_delete_removes_emptied_directories() {
    let env = Env::new(Transport::Tcp);
    let a = env.workspace("alice", &[]);
    let b = env.workspace("bob", &[]);
    let r = env.scribe(&a, &["revert", "."]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(
        r.stderr.contains(". (the workspace root): not opened"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("\n  : "), "{}", r.stderr);
    write(&a, "d/e/f.txt", b"f");
    write(&a, "d/g.txt", b"g");
    write(&a, "top.txt", b"t");
    env.scribe(&a, &["add", "."]).ok();
    env.scribe(&a, &["submit", "-m", "one"]).ok();
    let r = env.scribe(&b, &["sync"]);
    r.ok();
    assert!(r.stdout.contains("added d/e/f.txt"), "{}", r.stdout);
    assert!(!r.stdout.contains("updated"), "{}", r.stdout);
    env.scribe(&a, &["edit", "top.txt"]).ok();
    write(&a, "top.txt", b"t2");
    env.scribe(&a, &["submit", "-m", "two"]).ok();
    let r = env.scribe(&b, &["sync"]);
    assert!(r.stdout.contains("updated top.txt"), "{}", r.stdout);

    let r = env.scribe(&a, &["move", "top.txt", "top2.txt"]);
    r.ok();
    assert!(
        r.stderr.contains("moved top.txt -> top2.txt ("),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("moved move"), "{}", r.stderr);
    let r = env.scribe(&a, &["move", "--abort"]);
    assert!(
        r.stderr.contains("aborted the move top.txt -> top2.txt"),
        "{}",
        r.stderr
    );

    env.scribe(&a, &["delete", "d"]).ok();
    assert!(!a.join("d").exists(), "emptied directories are removed");
    env.scribe(&a, &["revert", "d"]).ok();
    assert_eq!(read(&a, "d/e/f.txt"), b"f");
    // A directory holding something else stays.
    write(&a, "d/e/local.txt", b"untracked");
    env.scribe(&a, &["delete", "d"]).ok();
    assert!(a.join("d/e/local.txt").exists());
    assert!(!a.join("d/g.txt").exists());
    let r = env.scribe(&a, &["recovery", "prune", "--older-than", "0"]);
    r.ok();
    assert!(
        r.stderr.contains("entries") || r.stderr.contains("1 entry"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("entr(ies)"), "{}", r.stderr);
}

/// #18 item 16: migrating a tree with names that differ only in case (and
/// other names that cannot be versioned): `add .` opens the rest, says
/// each refusal once with its rule's code, and exits 0 so `add . &&
/// submit` submits; `status` lists the refused under "Cannot be
/// versioned", `reconcile` does not open them, and the submit goes in.
/// Naming a refused file explicitly still fails.
#[test]
fn refused_paths_stay_refused_everywhere() {
    let env = Env::new(Transport::Tcp);
    let a = env.workspace("alice", &[]);
    write(&a, "tool/Makefile", b"upper");
    write(&a, "tool/makefile", b"lower");
    write(&a, "tool/include/Config.h", b"c1");
    write(&a, "tool/include/config.h", b"c2");
    write(&a, "tool/ok.txt", b"ok");
    write(&a, "tool/trail.", b"dot");
    let r = env.scribe(&a, &["add", "."]);
    assert_eq!(r.code, Some(0), "{r:?}");
    assert!(r.stdout.contains("add     tool/Makefile"), "{}", r.stdout);
    assert!(r.stdout.contains("add     tool/ok.txt"), "{}", r.stdout);
    for (path, code) in [
        ("tool/makefile", "path_collision"),
        ("tool/include/config.h", "path_collision"),
        ("tool/trail.", "trailing_dot"),
    ] {
        let line = format!("not opened: {path}: ");
        assert_eq!(
            r.stderr.matches(&line).count(),
            1,
            "{path} said once: {}",
            r.stderr
        );
        let said = r.stderr.lines().find(|l| l.starts_with(&line)).unwrap();
        assert!(said.ends_with(&format!("({code})")), "{said}");
    }
    assert!(
        r.stderr.contains("3 path(s) found cannot be versioned"),
        "{}",
        r.stderr
    );
    let st = env.scribe(&a, &["status"]);
    st.ok();
    let cannot = st.stdout.split("Cannot be versioned:").nth(1).unwrap_or("");
    assert!(
        cannot.contains("tool/makefile  (path_collision: differs only in case or normalization from tool/Makefile)"),
        "{}",
        st.stdout
    );
    assert!(cannot.contains("tool/include/config.h"), "{}", st.stdout);
    assert!(
        !st.stdout.contains("new      tool/makefile"),
        "{}",
        st.stdout
    );
    let j = env.scribe(&a, &["status", "--json"]);
    assert!(
        j.stdout
            .contains("{\"path\":\"tool/makefile\",\"code\":\"path_collision\"}"),
        "{}",
        j.stdout
    );
    let r = env.scribe(&a, &["reconcile"]);
    assert_eq!(r.code, Some(0), "{r:?}");
    assert!(!r.stdout.contains("makefile"), "{}", r.stdout);
    env.scribe(&a, &["submit", "-m", "tool"]).ok();
    // Named explicitly, a refused file is an error (exit 1).
    let r = env.scribe(&a, &["add", "tool/makefile"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("Error[path_collision]"), "{}", r.stderr);
    assert_eq!(
        r.stderr.matches("tool/makefile:").count(),
        1,
        "{}",
        r.stderr
    );
}

/// `workspace create` over a path that cannot be a directory (a file is
/// there) is refused by name before the server registers anything.
#[test]
fn workspace_create_over_a_file_names_it_and_registers_nothing() {
    let env = Env::new(Transport::Tcp);
    let a = env.workspace("alice", &[]);
    let before = env.scribe(&a, &["workspace", "list", "--json"]);
    before.ok();
    write(&env.path("."), "afile", b"not a directory");
    let r = env.scribe(
        env.dir(),
        &[
            "workspace",
            "create",
            "afile",
            "--server",
            &env.url,
            "--repo",
            super::support::REPO,
        ],
    );
    assert_ne!(r.code, Some(0), "{r:?}");
    assert!(r.stderr.contains("afile"), "{}", r.stderr);
    assert_eq!(read(&env.path("."), "afile"), b"not a directory");
    let after = env.scribe(&a, &["workspace", "list", "--json"]);
    after.ok();
    assert_eq!(before.stdout, after.stdout, "nothing was registered");
}

/// A program that rewrites a file with as many bytes and puts its mtime
/// back (`touch -r`, a tagger keeping the file time) leaves size and
/// mtime as recorded: the specification's fingerprint alone trusts the
/// file as unchanged. Its ctime moved, so the file is hashed: `status`
/// shows it changed and a sync of a newer version does not destroy it.
#[cfg(unix)]
#[test]
fn a_same_size_edit_with_its_mtime_put_back_is_found_and_kept() {
    let env = Env::new(Transport::Tcp);
    let a = env.workspace("alice", &[]);
    write(&a, "f.bin", &noise(4096, 1));
    env.scribe(&a, &["add", "f.bin"]).ok();
    env.scribe(&a, &["submit", "-m", "first"]).ok();
    let b = env.workspace("bob", &[]);
    let path = b.join("f.bin");
    let before = std::fs::metadata(&path).unwrap().modified().unwrap();
    // Right after the sync that placed it, a status trusts the recorded
    // observation without reading the file (the placing rename's ctime
    // is older than the observation as recorded).
    let r = env.scribe(&b, &["status", "--json"]);
    r.ok();
    assert!(r.stdout.contains("\"hashed\":0"), "{}", r.stdout);
    assert!(!r.stdout.contains("f.bin"), "{}", r.stdout);
    // Bob's edit: the same size, the mtime put back.
    let mine = noise(4096, 2);
    std::fs::write(&path, &mine).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(before)
        .unwrap();
    assert_eq!(
        std::fs::metadata(&path).unwrap().modified().unwrap(),
        before
    );
    let r = env.scribe(&b, &["status"]);
    r.ok();
    assert!(r.stdout.contains("f.bin"), "the edit is seen: {}", r.stdout);
    // Alice submits a newer version; Bob syncs.
    write(&a, "f.bin", &noise(4096, 3));
    env.scribe(&a, &["edit", "f.bin"]).ok();
    write(&a, "f.bin", &noise(4096, 3));
    env.scribe(&a, &["submit", "-m", "second"]).ok();
    let r = env.scribe(&b, &["sync"]);
    let at_path = std::fs::read(&path).unwrap();
    let listed = env.scribe(&b, &["recovery", "list"]);
    assert!(
        at_path == mine || listed.stdout.contains("f.bin"),
        "bob's edit is neither at its path nor in the recovery area: sync {r:?}, recovery {listed:?}"
    );
}

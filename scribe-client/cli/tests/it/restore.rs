//! A server restore (new incarnation) with a submission pending: the
//! accepted-but-unfinalized candidate is not replayed into the restored
//! history; its exact payload is archived in the recovery area, opened
//! work stays, sync after the restore is a full sync that defers the
//! opened path, and resolving it lets the work be submitted again.

use scribe_testkit::files::copy_tree;

use super::support::{read, write, Env, Transport};

#[test]
fn restore_retires_the_pending_submission_and_keeps_opened_work() {
    // Path transport: each scribe process opens the data root itself, so
    // between commands the "server" is stopped and can be copied.
    let env = Env::new(Transport::Path);
    let a = env.workspace("alice", &[]);
    write(&a, "x.txt", b"x1");
    write(&a, "y.txt", b"y1");
    env.scribe(&a, &["add", "."]).ok();
    env.scribe(&a, &["submit", "-m", "one"]).ok();
    let root = env.data();
    let backup = env.path("backup");
    copy_tree(&root, &backup, &["LOCK"]);
    // change 2 is accepted, but the client dies before finalizing it
    env.scribe(&a, &["edit", "x.txt"]).ok();
    write(&a, "x.txt", b"x2 made before the restore");
    let r = env.crash(&a, "submit-after-reply", &["submit", "-m", "two"]);
    assert!(r.killed, "{r:?}");
    // restore the copy taken at change 1 (what `scribe-server restore`
    // runs; the binary itself is tested in scribe-server's tests)
    std::fs::rename(&root, env.path("data.lost")).unwrap();
    scribe_metadata::restore::restore(&backup, &root).unwrap();
    // the rerun does not replay: the candidate is archived
    let r = env.scribe(&a, &["submit"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("Error[submit_retired]"), "{}", r.stderr);
    assert!(r.stderr.contains("Hint: "), "{}", r.stderr);
    let archives: Vec<String> = std::fs::read_dir(a.join(".scribe/_state/recovery"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("submit-") && n.ends_with(".pending"))
        .collect();
    assert_eq!(archives.len(), 1, "{archives:?}");
    assert!(r.stderr.contains(&archives[0]), "{}", r.stderr);
    let list = env.scribe(&a, &["recovery", "list"]);
    assert!(
        list.stdout
            .contains(&format!("{}  intent archive", archives[0])),
        "{}",
        list.stdout
    );
    let st = env.scribe(&a, &["status", "--json"]);
    assert!(st.stdout.contains("\"submit_pending\":0"), "{}", st.stdout);
    assert!(
        st.stdout.contains("\"path\":\"x.txt\",\"action\":\"edit\""),
        "{}",
        st.stdout
    );
    assert_eq!(read(&a, "x.txt"), b"x2 made before the restore");
    let log = env.scribe(&a, &["log", "--json"]);
    assert!(
        !log.stdout.contains("\"message\":\"two\""),
        "{}",
        log.stdout
    );
    // a new submit is refused until the workspace synced with the restore
    let r = env.scribe(&a, &["submit", "-m", "again"]);
    assert_eq!(r.code, Some(1));
    assert!(
        r.stderr.contains("Error[incarnation_changed]"),
        "{}",
        r.stderr
    );
    // full sync: the opened path is deferred, its work kept
    env.scribe(&a, &["sync"]).ok();
    assert_eq!(read(&a, "x.txt"), b"x2 made before the restore");
    assert_eq!(read(&a, "y.txt"), b"y1");
    let st = env.scribe(&a, &["status", "--json"]);
    assert!(
        st.stdout.contains("\"needs_resolve\":[\"x.txt\"]"),
        "{}",
        st.stdout
    );
    let r = env.scribe(&a, &["submit", "-m", "again"]);
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("Error[needs_resolve]"), "{}", r.stderr);
    env.scribe(&a, &["resolve", "x.txt", "--ours"]).ok();
    let r = env.scribe(&a, &["submit", "-m", "again"]);
    r.ok();
    assert_eq!(r.stdout.trim(), "change 2");
    // the archive stays (never pruned)
    env.scribe(&a, &["recovery", "prune", "--older-than", "0"])
        .ok();
    assert!(a
        .join(".scribe/_state/recovery")
        .join(&archives[0])
        .exists());
    let b = env.workspace("bob", &[]);
    assert_eq!(read(&b, "x.txt"), b"x2 made before the restore");
}

//! #14 item 2, end to end: a tracked directory replaced by a symbolic link
//! to a directory outside the workspace. `sync`, `resolve --theirs`,
//! `add`, `delete` and `submit` never read, write or delete through it, and
//! `status` says which paths lie beyond it.
#![cfg(unix)]

use super::support::{read, write, Env, Transport};

#[test]
fn nothing_crosses_a_linked_directory() {
    let env = Env::new(Transport::Tcp);
    let a = env.workspace("alice", &[]);
    write(&a, "art/a.psd", b"alpha");
    write(&a, "art/b.psd", b"bravo");
    env.scribe(&a, &["add", "."]).ok();
    env.scribe(&a, &["submit", "-m", "first"]).ok();

    let b = env.workspace("bob", &[]);
    assert_eq!(read(&b, "art/a.psd"), b"alpha");
    // Bob's art/ becomes a link to a directory outside the workspace that
    // holds files with the tracked bytes (as a followed link would see).
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("a.psd"), b"alpha").unwrap();
    std::fs::write(outside.path().join("b.psd"), b"bravo").unwrap();
    std::fs::write(outside.path().join("secret.txt"), b"not yours").unwrap();
    std::fs::remove_dir_all(b.join("art")).unwrap();
    std::os::unix::fs::symlink(outside.path(), b.join("art")).unwrap();
    let untouched = || {
        let mut names: Vec<String> = std::fs::read_dir(outside.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["a.psd", "b.psd", "secret.txt"]);
        assert_eq!(
            std::fs::read(outside.path().join("a.psd")).unwrap(),
            b"alpha"
        );
        assert_eq!(
            std::fs::read(outside.path().join("b.psd")).unwrap(),
            b"bravo"
        );
    };

    // Alice edits one file and deletes the other.
    env.scribe(&a, &["edit", "art/a.psd"]).ok();
    write(&a, "art/a.psd", b"alpha v2");
    env.scribe(&a, &["delete", "art/b.psd"]).ok();
    env.scribe(&a, &["submit", "-m", "second"]).ok();

    // Bob's sync writes and deletes nothing beyond the link.
    let s = env.scribe(&b, &["sync"]);
    s.ok();
    untouched();
    assert!(
        s.stdout
            .contains("resolve art/a.psd  (beyond a symbolic link"),
        "{}",
        s.stdout
    );
    assert!(s.stdout.contains("resolve art/b.psd"), "{}", s.stdout);

    let st = env.scribe(&b, &["status"]);
    assert!(
        st.stdout.contains("Beyond a symbolic link")
            && st.stdout.contains("art/a.psd  (beyond_symlink:"),
        "{}",
        st.stdout
    );

    let r = env.scribe(&b, &["resolve", "art/a.psd", "--theirs"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("Error[beyond_symlink]"), "{}", r.stderr);
    assert!(r.stderr.contains("Hint:"), "{}", r.stderr);
    untouched();

    let r = env.scribe(&b, &["add", "art/secret.txt"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("Error[beyond_symlink]"), "{}", r.stderr);
    assert!(r.stderr.contains("art/secret.txt"), "{}", r.stderr);

    let r = env.scribe(&b, &["delete", "art/a.psd"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("Error[beyond_symlink]"), "{}", r.stderr);
    untouched();
    let rec = env.scribe(&b, &["recovery", "list", "--json"]);
    assert!(!rec.stdout.contains("art/"), "{}", rec.stdout);

    // With a real directory in place of the link, theirs is taken.
    std::fs::remove_file(b.join("art")).unwrap();
    std::fs::create_dir(b.join("art")).unwrap();
    env.scribe(&b, &["resolve", "art", "--theirs"]).ok();
    assert_eq!(read(&b, "art/a.psd"), b"alpha v2");
    assert!(!b.join("art/b.psd").exists());
    untouched();

    // A file opened for add before its directory became a link is not
    // uploaded from beyond it.
    write(&b, "art/new.psd", b"bob's");
    env.scribe(&b, &["add", "art/new.psd"]).ok();
    std::fs::write(outside.path().join("new.psd"), b"outside bytes").unwrap();
    std::fs::remove_dir_all(b.join("art")).unwrap();
    std::os::unix::fs::symlink(outside.path(), b.join("art")).unwrap();
    let r = env.scribe(&b, &["submit", "-m", "through the link"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("Error[beyond_symlink]"), "{}", r.stderr);
    assert!(r.stderr.contains("art/new.psd"), "{}", r.stderr);
    let log = env.scribe(&a, &["log", "--json"]);
    assert!(!log.stdout.contains("through the link"), "{}", log.stdout);
}

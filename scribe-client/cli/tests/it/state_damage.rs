//! #14 item 13, end to end: a damaged `state.redb` is named, with what to
//! do, and the working copy is left alone.

use super::support::{read, write, Env, Transport};

#[test]
fn a_damaged_state_database_is_named_with_a_hint() {
    let env = Env::new(Transport::Tcp);
    let a = env.workspace("alice", &[]);
    write(&a, "art/a.psd", b"alpha");
    env.scribe(&a, &["add", "."]).ok();
    env.scribe(&a, &["submit", "-m", "first"]).ok();
    env.scribe(&a, &["edit", "art/a.psd"]).ok();
    write(&a, "art/a.psd", b"my unsubmitted edit");
    let db = a.join(".scribe/_state/state.redb");
    let bytes = std::fs::read(&db).unwrap();
    std::fs::write(&db, &bytes[..bytes.len() / 2]).unwrap();
    for args in [&["status"][..], &["sync"], &["submit", "-m", "x"]] {
        let r = env.scribe(&a, args);
        assert_eq!(r.code, Some(1), "{args:?}: {r:?}");
        assert!(
            r.stderr.contains("Error[workspace_state_damaged]"),
            "{args:?}: {}",
            r.stderr
        );
        assert!(
            r.stderr.contains(&db.display().to_string()),
            "{args:?}: {}",
            r.stderr
        );
        assert!(
            r.stderr
                .contains("Hint: your working files were not changed"),
            "{args:?}: {}",
            r.stderr
        );
        assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
        assert_eq!(read(&a, "art/a.psd"), b"my unsubmitted edit");
    }
}

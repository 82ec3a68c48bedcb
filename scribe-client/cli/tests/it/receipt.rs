//! The last-submit receipt: a submit does not advance the watermark, an
//! explicit `scribe sync N` to the watermark reconciles against the
//! receipt (the submitted paths go back to N), and an ordinary sync
//! returns to the head.

use super::support::{read, write, Env, Transport};

#[test]
fn sync_back_to_the_watermark_after_a_submit() {
    let env = Env::new(Transport::Tcp);
    let a = env.workspace("alice", &[]);
    write(&a, "a.txt", b"a1");
    write(&a, "b.txt", b"b1");
    env.scribe(&a, &["add", "."]).ok();
    env.scribe(&a, &["submit", "-m", "one"]).ok();
    env.scribe(&a, &["edit", "a.txt"]).ok();
    write(&a, "a.txt", b"a2");
    env.scribe(&a, &["submit", "-m", "two"]).ok();
    let b = env.workspace("bob", &[]);
    env.scribe(&b, &["sync", "2"]).ok();
    // Bob submits change 3: edit a, add c
    env.scribe(&b, &["edit", "a.txt"]).ok();
    write(&b, "a.txt", b"bob's a");
    write(&b, "c.txt", b"bob's c");
    env.scribe(&b, &["add", "c.txt"]).ok();
    let r = env.scribe(&b, &["submit", "-m", "three"]);
    r.ok();
    assert_eq!(r.stdout.trim(), "change 3");
    let st = env.scribe(&b, &["status", "--json"]);
    assert!(
        st.stdout.contains("\"change\":2"),
        "synced stays: {}",
        st.stdout
    );
    // unsubmitted work elsewhere
    env.scribe(&b, &["edit", "b.txt"]).ok();
    write(&b, "b.txt", b"bob's unsubmitted b");
    write(&b, "notes.txt", b"untracked notes");
    // sync to the watermark itself brings change 2's content back
    let s = env.scribe(&b, &["sync", "2", "--json"]);
    s.ok();
    assert_eq!(read(&b, "a.txt"), b"a2", "{}", s.stdout);
    assert!(!b.join("c.txt").exists(), "{}", s.stdout);
    assert_eq!(read(&b, "b.txt"), b"bob's unsubmitted b");
    assert_eq!(read(&b, "notes.txt"), b"untracked notes");
    // Bob's submitted a.txt and c.txt were unmodified (change 3 holds
    // them on the server): replaced without a copy (#18 item 5).
    let rec = env.scribe(&b, &["recovery", "list", "--json"]);
    assert!(!rec.stdout.contains("\"path\":\"a.txt\""), "{}", rec.stdout);
    assert!(!rec.stdout.contains("\"path\":\"c.txt\""), "{}", rec.stdout);
    let st = env.scribe(&b, &["status", "--json"]);
    assert!(st.stdout.contains("\"change\":2"), "{}", st.stdout);
    assert!(
        st.stdout
            .contains("\"opened\":[{\"path\":\"b.txt\",\"action\":\"edit\""),
        "{}",
        st.stdout
    );
    // the receipt went with that sync: a second one is a no-op
    let s = env.scribe(&b, &["sync", "2", "--json"]);
    assert!(s.stdout.contains("\"written\":[]"), "{}", s.stdout);
    assert!(s.stdout.contains("\"removed\":[]"), "{}", s.stdout);
    // the head brings change 3 back
    env.scribe(&b, &["sync"]).ok();
    assert_eq!(read(&b, "a.txt"), b"bob's a");
    assert_eq!(read(&b, "c.txt"), b"bob's c");
    assert_eq!(read(&b, "b.txt"), b"bob's unsubmitted b");
    let st = env.scribe(&b, &["status", "--json"]);
    assert!(st.stdout.contains("\"change\":3"), "{}", st.stdout);
    // after sync to the head, submit again and return to the head: nothing moves
    env.scribe(&b, &["submit", "-m", "four"]).ok();
    let s = env.scribe(&b, &["sync", "--json"]);
    s.ok();
    assert!(s.stdout.contains("\"change\":4"), "{}", s.stdout);
    assert_eq!(read(&b, "b.txt"), b"bob's unsubmitted b");
}

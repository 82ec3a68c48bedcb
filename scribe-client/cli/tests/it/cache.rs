//! #18 item 17: the workspace cache is bounded. `scribe workspace
//! prune-cache` drops what the server holds and keeps a pending
//! submission's cached objects; a submit past `SCRIBE_CACHE_BYTES` prunes
//! on its own. Since issue 19 a submit streams every file's bytes to the
//! server and caches only the manifests, so what these prunes drop is
//! manifests, and a pending submission's bytes are on the server (pinned),
//! not in the cache.

use super::support::{noise, read, to_run_with, write, Env, Transport};

/// A number after `"key":` in one line of JSON.
fn num(json: &str, key: &str) -> u64 {
    let at = json
        .find(&format!("\"{key}\":"))
        .unwrap_or_else(|| panic!("{key} in {json}"))
        + key.len()
        + 3;
    json[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect::<String>()
        .parse()
        .unwrap()
}

#[test]
fn prune_cache_drops_what_the_server_holds_and_keeps_a_pending_submission() {
    let env = Env::new(Transport::Tcp);
    let a = env.workspace("alice", &[]);
    for i in 0..20 {
        write(&a, &format!("art/f{i}.bin"), &noise(64 << 10, i));
    }
    env.scribe(&a, &["add", "art"]).ok();
    env.scribe(&a, &["submit", "-m", "first"]).ok();
    // A submission frozen and recorded, its `Submit` never sent; then the
    // file is rewritten, so its frozen bytes exist only on the server
    // (streamed and pinned by the freeze), its manifest in the cache.
    let frozen = noise(50 << 10, 99);
    write(&a, "p.bin", &frozen);
    env.scribe(&a, &["add", "p.bin"]).ok();
    let r = env.crash(&a, "submit-after-pending", &["submit", "-m", "pending"]);
    assert_ne!(r.code, Some(0), "{r:?}");
    write(&a, "p.bin", b"rewritten after the freeze");

    let r = env.scribe(&a, &["workspace", "prune-cache", "--json"]);
    r.ok();
    let (dropped, kept) = (num(&r.stdout, "dropped"), num(&r.stdout, "retained"));
    let (before, after) = (
        num(&r.stdout, "bytes_before"),
        num(&r.stdout, "bytes_after"),
    );
    assert!(dropped >= 20, "the first submit's manifests: {}", r.stdout);
    assert!(kept >= 1, "the pending file's manifest: {}", r.stdout);
    assert!(after < before, "{}", r.stdout);
    // Nothing more to drop the second time.
    let r = env.scribe(&a, &["workspace", "prune-cache", "--json"]);
    assert_eq!(num(&r.stdout, "dropped"), 0, "{}", r.stdout);

    // The pending submission completes with its frozen bytes, and every
    // file is still there for others.
    env.scribe(&a, &["submit"]).ok();
    let b = env.workspace("bob", &[]);
    assert_eq!(read(&b, "p.bin"), frozen);
    assert_eq!(read(&b, "art/f7.bin"), noise(64 << 10, 7));
    // Alice's own workspace still reverts and prints from the server.
    env.scribe(&a, &["edit", "art/f3.bin"]).ok();
    write(&a, "art/f3.bin", b"scratch");
    env.scribe(&a, &["revert", "art/f3.bin"]).ok();
    assert_eq!(read(&a, "art/f3.bin"), noise(64 << 10, 3));
}

#[test]
fn a_submit_past_the_cache_bound_prunes_the_cache() {
    let env = Env::new(Transport::Tcp);
    let a = env.workspace("alice", &[]);
    for i in 0..8 {
        write(&a, &format!("f{i}.bin"), &noise(100 << 10, i));
    }
    env.scribe(&a, &["add", "."]).ok();
    // Under the default bound: nothing is pruned.
    let r = env.scribe(&a, &["submit", "-m", "first"]);
    r.ok();
    assert!(!r.stderr.contains("workspace cache:"), "{}", r.stderr);
    let cache = a.join(".scribe/_state/cache");
    let du = |d: &std::path::Path| -> u64 {
        fn walk(d: &std::path::Path) -> u64 {
            std::fs::read_dir(d)
                .unwrap()
                .map(|e| {
                    let e = e.unwrap();
                    let m = e.metadata().unwrap();
                    if m.is_dir() {
                        walk(&e.path())
                    } else {
                        m.len()
                    }
                })
                .sum()
        }
        walk(d)
    };
    let full = du(&cache);
    // The files' bytes went to the server, only their manifests here.
    assert!(full < 8 * (100 << 10), "the cache holds manifests: {full}");
    write(&a, "g.bin", &noise(10 << 10, 50));
    env.scribe(&a, &["add", "g.bin"]).ok();
    let r = to_run_with(
        env.command(&a, &["submit", "-m", "second"])
            .env("SCRIBE_CACHE_BYTES", "1000"),
    );
    r.ok();
    assert!(r.stderr.contains("workspace cache:"), "{}", r.stderr);
    // Every manifest the server holds was dropped (the first submit's
    // eight and the second's one): nothing is left to prune.
    assert!(
        r.stderr.contains("(9 object(s) the server holds dropped"),
        "{}",
        r.stderr
    );
    let r = env.scribe(&a, &["workspace", "prune-cache", "--json"]);
    assert_eq!(num(&r.stdout, "dropped"), 0, "{}", r.stdout);
}

/// The workspace cache is a disposable copy: a cached object it cannot
/// read or verify is a miss, read from the server with a warning, and
/// the sync completes (it failed on every run, after removing the file).
#[test]
fn a_damaged_cache_copy_is_read_from_the_server() {
    let env = Env::new(Transport::Tcp);
    let a = env.workspace("alice", &[]);
    write(&a, "a.txt", b"first");
    env.scribe(&a, &["add", "a.txt"]).ok();
    env.scribe(&a, &["submit", "-m", "one"]).ok();
    env.scribe(&a, &["edit", "a.txt"]).ok();
    write(&a, "a.txt", b"second, longer");
    env.scribe(&a, &["submit", "-m", "two"]).ok();
    // Every cached object's bytes damaged (the cache's packs hold the
    // manifests the submits froze): flip the second half of each pack.
    let packs = a.join(".scribe/_state/cache/packs");
    let mut flipped = 0;
    for p in std::fs::read_dir(&packs).unwrap() {
        let p = p.unwrap().path();
        let mut b = std::fs::read(&p).unwrap();
        let half = b.len() / 2;
        for x in &mut b[half..] {
            *x ^= 0x5a;
        }
        std::fs::write(&p, b).unwrap();
        flipped += 1;
    }
    assert!(flipped > 0, "no cache pack in {}", packs.display());
    env.scribe(&a, &["sync", "1"]).ok();
    assert_eq!(read(&a, "a.txt"), b"first");
    let r = env.scribe(&a, &["sync"]);
    r.ok();
    assert_eq!(read(&a, "a.txt"), b"second, longer");
    let r = env.scribe(&a, &["print", "a.txt"]);
    r.ok();
    assert_eq!(r.stdout.as_bytes(), b"second, longer");
}

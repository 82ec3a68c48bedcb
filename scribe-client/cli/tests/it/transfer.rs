//! The daily loop's transfers: every submitted file, large or small, is
//! streamed to the server without a copy in the workspace cache; a 1 MiB edit of a big file that
//! was only synced (not submitted) from this workspace stores and sends
//! megabytes, survives a kill -9 between freeze and upload and inside the
//! stream, and every later reader of the frozen manifest (re-edit, revert,
//! other workspaces) gets the right bytes; a fresh sync of many small files
//! runs in batches that resume after a kill at any point inside a batch.

use std::path::{Path, PathBuf};

use super::support::{both, noise, read, to_run_with, write, Env, Transport};

const MIB: usize = 1 << 20;

fn du(p: &Path) -> u64 {
    let mut total = 0;
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let Ok(m) = e.metadata() else { continue };
            total += if m.is_dir() { du(&e.path()) } else { m.len() };
        }
    }
    total
}

fn uploaded_bytes(json: &str) -> u64 {
    json_u64(json, "uploaded_bytes")
}

fn json_u64(json: &str, key: &str) -> u64 {
    json.split(&format!("\"{key}\":"))
        .nth(1)
        .and_then(|r| {
            r.chars()
                .take_while(|c| c.is_ascii_digit())
                .collect::<String>()
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("{key} in {json}"))
}

/// Overwrite 1 MiB at `at` with fresh bytes.
fn edit_mib(bytes: &mut [u8], at: usize, seed: u64) {
    bytes[at..at + MIB].copy_from_slice(&noise(MIB, seed));
}

/// Alice submits a 48 MiB file; Bob's workspace only synced it.
fn big_file_synced_by_bob(env: &Env) -> (std::path::PathBuf, Vec<u8>) {
    let a = env.workspace("alice", &[]);
    let bytes = noise(48 * MIB, 3);
    write(&a, "art/big.bin", &bytes);
    env.scribe(&a, &["add", "."]).ok();
    env.scribe(&a, &["submit", "-m", "big"]).ok();
    let b = env.workspace("bob", &[]);
    assert!(read(&b, "art/big.bin") == bytes, "bob synced the file");
    (b, bytes)
}

fn edit_of_a_synced_big_file_stores_and_sends_little(t: Transport) {
    let env = Env::new(t);
    let (b, mut bytes) = big_file_synced_by_bob(&env);
    let cache = b.join(".scribe/_state/cache");
    let server = env.data();
    let cache_before = du(&cache);
    let server_before = du(&server);
    env.scribe(&b, &["edit", "art/big.bin"]).ok();
    edit_mib(&mut bytes, 20 * MIB, 4);
    write(&b, "art/big.bin", &bytes);
    let r = env.scribe(&b, &["submit", "-m", "1 MiB edit", "--json"]);
    r.ok();
    let sent = uploaded_bytes(&r.stdout);
    let cache_growth = du(&cache).saturating_sub(cache_before);
    let server_growth = du(&server).saturating_sub(server_before);
    // The new chunks around the edit (FastCDC: 1–16 MiB each) and the
    // manifest; the chunks are streamed, so the cache holds the manifest.
    assert!(
        sent > MIB as u64 && sent < 20 * MIB as u64,
        "uploaded {sent}"
    );
    assert!(cache_growth < 2 * MIB as u64, "cache grew {cache_growth}");
    assert!(
        server_growth < 20 * MIB as u64,
        "server grew {server_growth}"
    );
    // Another workspace gets the edited bytes.
    let c = env.workspace("carol", &[]);
    assert!(read(&c, "art/big.bin") == bytes, "carol has the edit");
    // Bob edits again (his base is now his own partially cached manifest),
    // then edits a third time and reverts: the revert rebuilds the second
    // version from the cache's manifest, fetching what the cache lacks.
    env.scribe(&b, &["edit", "art/big.bin"]).ok();
    edit_mib(&mut bytes, 5 * MIB, 5);
    write(&b, "art/big.bin", &bytes);
    env.scribe(&b, &["submit", "-m", "second edit"]).ok();
    env.scribe(&b, &["edit", "art/big.bin"]).ok();
    let mut scratch = bytes.clone();
    edit_mib(&mut scratch, 40 * MIB, 6);
    write(&b, "art/big.bin", &scratch);
    env.scribe(&b, &["revert", "art/big.bin"]).ok();
    assert!(
        read(&b, "art/big.bin") == bytes,
        "revert restores the submitted version"
    );
    env.scribe(&c, &["sync"]).ok();
    assert!(
        read(&c, "art/big.bin") == bytes,
        "carol has the second edit"
    );
    assert!(
        du(&cache).saturating_sub(cache_before) < 4 * MIB as u64,
        "two edits and a revert kept the cache small"
    );
}
both!(edit_of_a_synced_big_file_stores_and_sends_little);

/// Write `n` files `art/f<i>.bin` of about `mib` MiB of noise into `ws`
/// (sizes differ by a few bytes); returns their paths and bytes.
fn large_files(ws: &Path, n: usize, mib: usize, seed: u64) -> Vec<(String, Vec<u8>)> {
    (0..n)
        .map(|i| {
            let (p, b) = (
                format!("art/f{i}.bin"),
                noise(mib * MIB + i * 4099, seed + i as u64),
            );
            write(ws, &p, &b);
            (p, b)
        })
        .collect()
}

/// Large files written in parallel by a sync each download over a free
/// connection (TCP: extra connections beside the main one): every byte
/// arrives in the right file, including chunks fetched in several ranges.
fn large_files_download_in_parallel(t: Transport) {
    let env = Env::new(t);
    let a = env.workspace("alice", &[]);
    let files = large_files(&a, 4, 20, 20);
    env.scribe(&a, &["add", "."]).ok();
    env.scribe(&a, &["submit", "-m", "four large files"]).ok();
    let b = env.workspace("bob", &[]);
    for (p, bytes) in &files {
        assert!(read(&b, p) == *bytes, "{p} arrived whole");
    }
    // An edit of two of them reaches Bob by a plain sync.
    let mut edited = files.clone();
    for (i, (p, bytes)) in edited.iter_mut().enumerate().take(2) {
        env.scribe(&a, &["edit", p.as_str()]).ok();
        edit_mib(bytes, 3 * MIB, 40 + i as u64);
        write(&a, p, bytes);
    }
    env.scribe(&a, &["submit", "-m", "two edits"]).ok();
    env.scribe(&b, &["sync"]).ok();
    for (p, bytes) in &edited {
        assert!(read(&b, p) == *bytes, "{p} after the sync");
    }
}
both!(large_files_download_in_parallel);

/// A server at its connection limit refuses the extra connections a
/// large submit and a parallel sync would open (`busy`): both carry on
/// over their one connection instead of failing.
#[test]
fn refused_extra_connections_fall_back_to_one() {
    let (env, svc) = Env::tcp_limited(1);
    // Each command's connection is closed when it exits; wait until the
    // server has seen it, so the next command's own connection fits.
    let settle = || {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while svc.connections() > 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "a connection stayed open"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    };
    settle();
    let a = env.workspace("alice", &[]);
    let files = large_files(&a, 3, 18, 60);
    settle();
    env.scribe(&a, &["add", "."]).ok();
    settle();
    env.scribe(&a, &["submit", "-m", "at the limit"]).ok();
    settle();
    let b = env.workspace("bob", &[]);
    for (p, bytes) in &files {
        assert!(read(&b, p) == *bytes, "{p} arrived whole");
    }
}

fn kill_between_freeze_and_upload_then_replay(t: Transport) {
    let env = Env::new(t);
    let (b, mut bytes) = big_file_synced_by_bob(&env);
    let cache = b.join(".scribe/_state/cache");
    let cache_before = du(&cache);
    for (i, point) in ["submit-after-freeze", "submit-after-pending"]
        .iter()
        .enumerate()
    {
        env.scribe(&b, &["edit", "art/big.bin"]).ok();
        edit_mib(&mut bytes, (10 + 15 * i) * MIB, 20 + i as u64);
        write(&b, "art/big.bin", &bytes);
        let r = env.crash(&b, point, &["submit", "-m", point]);
        assert!(r.killed, "{point}: {r:?}");
        // Frozen but not sent: the working file is untouched.
        assert!(read(&b, "art/big.bin") == bytes, "{point}");
        // After the freeze alone there is no candidate yet (a new submit
        // freezes again); after the pending row the rerun replays it.
        let rerun: &[&str] = if *point == "submit-after-freeze" {
            &["submit", "-m", point]
        } else {
            &["submit"]
        };
        let r = env.scribe(&b, rerun);
        r.ok();
        assert_eq!(r.stdout.trim(), format!("change {}", i + 2), "{point}");
        let st = env.scribe(&b, &["status", "--json"]);
        assert!(
            st.stdout.contains("\"opened\":[]"),
            "{point}: {}",
            st.stdout
        );
    }
    assert!(
        du(&cache).saturating_sub(cache_before) < 4 * MIB as u64,
        "two frozen edits kept the cache small"
    );
    let c = env.workspace("carol", &[]);
    assert!(read(&c, "art/big.bin") == bytes, "carol has both edits");
    let log = env.scribe(&b, &["log", "--json"]);
    for p in ["submit-after-freeze", "submit-after-pending"] {
        assert_eq!(
            log.stdout.matches(&format!("\"message\":\"{p}\"")).count(),
            1,
            "{}",
            log.stdout
        );
    }
}
both!(kill_between_freeze_and_upload_then_replay);

/// A new 40 MiB file and a 600 KiB one: both are streamed (the cache
/// holds their manifests, not their bytes); a kill inside the stream
/// leaves nothing recorded, the rerun submits once; a rerun of the same
/// bytes from another workspace sends no chunk again.
fn a_large_add_streams_without_a_cache_copy(t: Transport) {
    let env = Env::new(t);
    let a = env.workspace("alice", &[]);
    let cache = a.join(".scribe/_state/cache");
    let big = noise(40 * MIB, 31);
    let small = noise(600 << 10, 32);
    write(&a, "art/big.bin", &big);
    write(&a, "art/small.bin", &small);
    env.scribe(&a, &["add", "."]).ok();
    let cache_before = du(&cache);
    let r = env.crash(&a, "submit-stream-group-1", &["submit", "-m", "big"]);
    assert!(r.killed, "{r:?}");
    // Nothing recorded: the opened files stay, no change exists.
    let st = env.scribe(&a, &["status", "--json"]);
    assert!(st.stdout.contains("art/big.bin"), "{}", st.stdout);
    let r = env.scribe(&a, &["submit", "-m", "big", "--json"]);
    r.ok();
    assert!(r.stdout.contains("\"change\":1"), "{}", r.stdout);
    // At most everything once more: chunks the server already kept from the
    // killed run (how many depends on where the kill met the other upload
    // lane) are not sent again.
    let sent = uploaded_bytes(&r.stdout);
    assert!(sent > 0 && sent < 42 * MIB as u64, "uploaded {sent}");
    let growth = du(&cache).saturating_sub(cache_before);
    assert!(growth < 512 << 10, "cache grew {growth}");
    let log = env.scribe(&a, &["log", "--json"]);
    assert_eq!(log.stdout.matches("\"message\":\"big\"").count(), 1);
    // Bob adds the same bytes under another name: no chunk travels again.
    let b = env.workspace("bob", &[]);
    assert!(read(&b, "art/big.bin") == big, "bob synced the file");
    write(&b, "copy/big.bin", &big);
    env.scribe(&b, &["add", "copy/big.bin"]).ok();
    let r = env.scribe(&b, &["submit", "-m", "copy", "--json"]);
    r.ok();
    assert!(uploaded_bytes(&r.stdout) < MIB as u64, "{}", r.stdout);
    let c = env.workspace("carol", &[]);
    assert!(read(&c, "copy/big.bin") == big, "carol has the copy");
    assert!(
        read(&c, "art/small.bin") == small,
        "carol has the small file"
    );
}
both!(a_large_add_streams_without_a_cache_copy);

/// 4,300 small files (one chunk each; the stream's groups hold up to 2,048)
/// are streamed to the server many to a request, never copied into the
/// cache. A kill after the second group
/// leaves nothing recorded; what the server stored before the kill stays
/// (the rerun sends less than everything), the rerun submits exactly one
/// change, and the submitted bytes are what another workspace syncs and
/// what `revert` of a later edit restores (from the server: the cache
/// never held them).
fn small_files_stream_and_resume_after_a_kill_inside_the_send(t: Transport) {
    let env = Env::new(t);
    let a = env.workspace("alice", &[]);
    let cache = a.join(".scribe/_state/cache");
    let set: Vec<(String, Vec<u8>)> = (0..4300)
        .map(|i| {
            (
                format!("src/m{}/f{i}.rs", i % 11),
                noise(200 + (i * 53) % 4000, 900 + i as u64),
            )
        })
        .collect();
    let total: u64 = set.iter().map(|(_, b)| b.len() as u64).sum();
    for (p, bytes) in &set {
        write(&a, p, bytes);
    }
    env.scribe(&a, &["add", "."]).ok();
    let cache_before = du(&cache);
    let r = env.crash(&a, "submit-stream-group-2", &["submit", "-m", "many"]);
    assert!(r.killed, "{r:?}");
    // Nothing recorded: every file is still opened, no change exists.
    let st = env.scribe(&a, &["status", "--json"]);
    assert!(st.stdout.contains("src/m0/f0.rs"), "{}", st.stdout);
    let log = env.scribe(&a, &["log", "--json"]);
    assert!(
        !log.stdout.contains("\"message\":\"many\""),
        "{}",
        log.stdout
    );
    let r = env.scribe(&a, &["submit", "-m", "many", "--json"]);
    r.ok();
    assert!(r.stdout.contains("\"change\":1"), "{}", r.stdout);
    // The groups stored before the kill are not sent again (the rerun's
    // upload intent pinned them; manifests and the change set are small).
    let sent = uploaded_bytes(&r.stdout);
    assert!(sent > 0 && sent < total, "uploaded {sent} of {total}");
    // The cache holds the manifests only, not the files' bytes.
    let growth = du(&cache).saturating_sub(cache_before);
    assert!(growth < total / 2, "cache grew {growth} for {total}");
    let log = env.scribe(&a, &["log", "--json"]);
    assert_eq!(log.stdout.matches("\"message\":\"many\"").count(), 1);
    let st = env.scribe(&a, &["status", "--json"]);
    assert!(st.stdout.contains("\"opened\":[]"), "{}", st.stdout);
    let b = env.workspace("bob", &[]);
    for (p, bytes) in &set {
        assert_eq!(&read(&b, p), bytes, "{p}");
    }
    // Edit, then revert: the submitted bytes come back from the server.
    let (p, bytes) = &set[700];
    env.scribe(&a, &["edit", p]).ok();
    write(&a, p, b"scratch");
    env.scribe(&a, &["revert", p]).ok();
    assert_eq!(&read(&a, p), bytes, "revert restores the submitted bytes");
    // A re-edit submits on top of the streamed baseline.
    env.scribe(&a, &["edit", p]).ok();
    write(&a, p, b"second version");
    env.scribe(&a, &["submit", "-m", "again"]).ok();
    env.scribe(&b, &["sync"]).ok();
    assert_eq!(read(&b, p), b"second version".to_vec());
}
both!(small_files_stream_and_resume_after_a_kill_inside_the_send);

/// 700 small files: three sync batches (256 rows each), killed inside the
/// second batch at each point, then resumed.
fn many_small_files_resume_after_a_kill_inside_a_batch(t: Transport) {
    let env = Env::new(t);
    let a = env.workspace("alice", &[]);
    let points = [
        "sync-batch-flushed-2",
        "sync-batch-placed-2",
        "sync-after-300",
    ];
    let bobs: Vec<_> = points
        .iter()
        .map(|p| (p, env.workspace(&format!("bob-{p}"), &[])))
        .collect();
    let set: Vec<(String, Vec<u8>)> = (0..700)
        .map(|i| {
            (
                format!("d{}/e{}/f{i}.txt", i % 7, i % 3),
                noise(10 + (i * 37) % 3000, 500 + i as u64),
            )
        })
        .collect();
    for (p, bytes) in &set {
        write(&a, p, bytes);
    }
    env.scribe(&a, &["add", "."]).ok();
    env.scribe(&a, &["submit", "-m", "many"]).ok();
    for (point, b) in &bobs {
        let r = env.crash(b, point, &["sync"]);
        assert!(r.killed, "{point}: {r:?}");
        let st = env.scribe(b, &["status", "--json"]);
        assert!(
            st.stdout.contains("\"sync_unfinished\":1"),
            "{point}: {}",
            st.stdout
        );
        env.scribe(b, &["sync"]).ok();
        for (p, bytes) in &set {
            assert_eq!(&read(b, p), bytes, "{point}: {p}");
        }
        let st = env.scribe(b, &["status"]);
        assert!(
            st.stdout.contains("Nothing opened, no local changes"),
            "{point}: {}",
            st.stdout
        );
        let tmp = std::fs::read_dir(b.join(".scribe/_state/tmp"))
            .unwrap()
            .count();
        assert_eq!(tmp, 0, "{point}: temporaries are cleaned");
    }
    // A fresh create gets every file too.
    let c = env.workspace("carol", &[]);
    for (p, bytes) in &set {
        assert_eq!(&read(&c, p), bytes, "{p}");
    }
}
both!(many_small_files_resume_after_a_kill_inside_a_batch);

/// A sync killed inside a 40 MiB file (after its fifth chunk) keeps what it
/// had written in `.scribe/_state/partial/`; the re-run verifies that part
/// chunk by chunk, fetches only the rest, places the right bytes and
/// leaves no partial file behind (#18 item 4).
/// Alice submits a 40 MiB file; Bob's sync of it is killed after its
/// fifth chunk. Returns Bob's root, the bytes and his `partial/` folder.
fn killed_inside_a_large_file(env: &Env, seed: u64) -> (PathBuf, Vec<u8>, PathBuf) {
    let a = env.workspace("alice", &[]);
    let b = env.workspace("bob", &[]);
    let big = noise(40 * MIB, seed);
    write(&a, "art/big.bin", &big);
    env.scribe(&a, &["add", "."]).ok();
    env.scribe(&a, &["submit", "-m", "big"]).ok();
    let r = env.crash(&b, "sync-chunk-5", &["sync"]);
    assert!(r.killed, "{r:?}");
    let partial = b.join(".scribe/_state/partial");
    (b, big, partial)
}

fn a_sync_killed_inside_a_large_file_resumes_it(t: Transport) {
    let env = Env::new(t);
    let (b, big, partial) = killed_inside_a_large_file(&env, 41);
    let left: u64 = std::fs::read_dir(&partial)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(left > 0, "the killed run left its partial download");
    let r = env.scribe(&b, &["sync", "--json"]);
    r.ok();
    let resumed = json_u64(&r.stdout, "bytes_resumed");
    assert!(
        resumed > 0 && resumed <= left && resumed < big.len() as u64,
        "resumed {resumed} of {left} left, {}",
        r.stdout
    );
    assert!(read(&b, "art/big.bin") == big, "bob has the right bytes");
    assert_eq!(std::fs::read_dir(&partial).unwrap().count(), 0);
    let st = env.scribe(&b, &["status"]);
    assert!(
        st.stdout.contains("Nothing opened, no local changes"),
        "{}",
        st.stdout
    );
}
both!(a_sync_killed_inside_a_large_file_resumes_it);

/// A submit of a 100 MiB file over a slow link (a pause after each group
/// of chunks, longer than the server's stage age limit) killed after its
/// third group: the re-run sends only what the server had not made
/// durable, at least one whole group less than the file (#18 item 4, the
/// submit half: "stopped after 3 s, re-sent all 400 MiB").
fn a_killed_slow_submit_resends_only_what_the_server_did_not_keep(t: Transport) {
    let env = Env::new(t);
    let a = env.workspace("alice", &[]);
    let big = noise(100 * MIB, 43);
    write(&a, "art/big.bin", &big);
    env.scribe(&a, &["add", "."]).ok();
    let r = to_run_with(
        env.command(&a, &["submit", "-m", "big"])
            .env("SCRIBE_TEST_CRASH_AT", "submit-stream-group-3")
            .env("SCRIBE_TEST_SLOW_MS", "1300"),
    );
    assert!(r.killed, "{r:?}");
    let r = env.scribe(&a, &["submit", "-m", "big", "--json"]);
    r.ok();
    let sent = uploaded_bytes(&r.stdout);
    // At least the first group was published before the kill; its chunks
    // (at least one, of at least 1 MiB: FastCDC's minimum) are not sent
    // again. (Everything again is more than the file: 104,858,547 bytes.)
    assert!(
        sent > 0 && sent + MIB as u64 <= big.len() as u64,
        "the re-run sent {sent} of {}",
        big.len()
    );
    let b = env.workspace("bob", &[]);
    assert!(read(&b, "art/big.bin") == big, "bob has the right bytes");
}
both!(a_killed_slow_submit_resends_only_what_the_server_did_not_keep);

/// A partial download damaged on disk after the kill (its first byte
/// flipped) is not trusted: the re-run's chunk check keeps nothing of it,
/// fetches the whole file and places the right bytes. Without the check
/// the kept bytes would fail the whole-file hash and the sync would fail.
fn a_damaged_partial_download_is_fetched_again(t: Transport) {
    let env = Env::new(t);
    let (b, big, partial) = killed_inside_a_large_file(&env, 47);
    let file = std::fs::read_dir(&partial)
        .unwrap()
        .next()
        .expect("the killed run left its partial download")
        .unwrap()
        .path();
    let mut bytes = std::fs::read(&file).unwrap();
    assert!(!bytes.is_empty());
    bytes[0] ^= 0xff;
    std::fs::write(&file, &bytes).unwrap();
    let r = env.scribe(&b, &["sync", "--json"]);
    r.ok();
    assert_eq!(json_u64(&r.stdout, "bytes_resumed"), 0, "{}", r.stdout);
    assert!(read(&b, "art/big.bin") == big, "bob has the right bytes");
    assert_eq!(std::fs::read_dir(&partial).unwrap().count(), 0);
}
both!(a_damaged_partial_download_is_fetched_again);

/// A chunk damaged on the server is named with the file that holds it: the
/// batch that prefetches small files' objects is only a speed-up, and a
/// failure in it no longer fails the sync in the name of the batch's first
/// file (it named `a.txt` for a chunk of `sub/small.txt`).
#[test]
fn a_damaged_chunk_is_named_with_the_file_that_holds_it() {
    let env = Env::new(Transport::Tcp);
    let a = env.workspace("alice", &[]);
    write(&a, "a.txt", b"the first file, intact");
    let marker = b"qzjxkvwy damaged here qzjxkvwy";
    write(&a, "sub/small.txt", marker);
    env.scribe(&a, &["add", "."]).ok();
    env.scribe(&a, &["submit", "-m", "two files"]).ok();
    let mut flipped = false;
    for repo in std::fs::read_dir(env.data().join("repos")).unwrap() {
        let packs = repo.unwrap().path().join("objects/packs");
        for p in std::fs::read_dir(&packs).into_iter().flatten() {
            let p = p.unwrap().path();
            let mut b = std::fs::read(&p).unwrap();
            if let Some(at) = b.windows(marker.len()).position(|w| w == marker) {
                b[at + 10] ^= 0x20;
                std::fs::write(&p, b).unwrap();
                flipped = true;
            }
        }
    }
    assert!(flipped, "the chunk's bytes are in a pack");
    let r = env.scribe(
        env.dir(),
        &[
            "workspace",
            "create",
            "bob",
            "--server",
            &env.url,
            "--repo",
            super::support::REPO,
        ],
    );
    assert_ne!(r.code, Some(0), "{r:?}");
    assert!(r.stderr.contains("sub/small.txt"), "{}", r.stderr);
    assert!(!r.stderr.contains("could not write a.txt"), "{}", r.stderr);
}

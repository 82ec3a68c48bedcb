//! kill -9 of `scribe sync` and `scribe submit` at named points (the
//! process SIGKILLs itself through `SCRIBE_TEST_CRASH_AT`) and of a slowed
//! run from outside, followed by a rerun that completes with nothing lost.

use super::support::{both, noise, read, write, Env, Transport};

fn files(n: usize) -> Vec<(String, Vec<u8>)> {
    (0..n)
        .map(|i| {
            (
                format!("dir{}/f{i}.bin", i % 3),
                noise(20_000 + i * 1000, i as u64),
            )
        })
        .collect()
}

fn sync_killed_at_each_point(t: Transport) {
    let env = Env::new(t);
    let a = env.workspace("alice", &[]);
    write(&a, "local.txt", b"v1");
    env.scribe(&a, &["add", "."]).ok();
    env.scribe(&a, &["submit", "-m", "base"]).ok();
    let mut bobs = Vec::new();
    for p in [
        "sync-after-plan",
        "sync-after-1",
        "sync-after-4",
        "sync-batch-flushed",
        "sync-batch-placed",
    ] {
        let b = env.workspace(&format!("bob-{p}"), &[]);
        // Offline work the sync must not destroy.
        write(&b, "local.txt", b"bob's unsubmitted");
        bobs.push((p, b));
    }
    let set = files(6);
    for (p, bytes) in &set {
        write(&a, p, bytes);
    }
    env.scribe(&a, &["edit", "local.txt"]).ok();
    write(&a, "local.txt", b"v2");
    env.scribe(&a, &["add", "."]).ok();
    env.scribe(&a, &["submit", "-m", "six files"]).ok();
    for (point, b) in &bobs {
        let r = env.crash(b, point, &["sync"]);
        assert!(r.killed, "{point}: the failpoint kills the process: {r:?}");
        let st = env.scribe(b, &["status", "--json"]);
        assert!(
            st.stdout.contains("\"sync_unfinished\":2"),
            "{point}: {}",
            st.stdout
        );
        env.scribe(b, &["sync"]).ok();
        for (p, bytes) in &set {
            assert_eq!(&read(b, p), bytes, "{point}: {p}");
        }
        assert_eq!(read(b, "local.txt"), b"bob's unsubmitted", "{point}");
        let st = env.scribe(b, &["status", "--json"]);
        assert!(
            st.stdout.contains("\"needs_resolve\":[\"local.txt\"]"),
            "{point}: {}",
            st.stdout
        );
        assert!(
            st.stdout.contains("\"sync_unfinished\":null"),
            "{point}: {}",
            st.stdout
        );
        assert!(st.stdout.contains("\"change\":2"), "{point}: {}", st.stdout);
        let tmp = std::fs::read_dir(b.join(".scribe/_state/tmp"))
            .unwrap()
            .count();
        assert_eq!(tmp, 0, "{point}: temporaries are cleaned");
    }
}
both!(sync_killed_at_each_point);

/// Issue 19: a fresh sync of many files in many directories (two batches,
/// each made durable by group flushes: one file-system flush for the
/// batch's files and one for its renames, modes set at creation) killed at
/// each point of a batch, then run again: every file is placed with its
/// bytes and mode, nothing is left in `tmp`, status is clean.
fn fresh_sync_of_many_files_killed_then_rerun_places_everything(t: Transport) {
    let env = Env::new(t);
    let a = env.workspace("alice", &[]);
    let points = [
        "sync-batch-flushed",
        "sync-batch-placed",
        "sync-batch-flushed-2",
        "sync-batch-placed-2",
        "sync-after-100",
        "sync-after-257",
    ];
    let bobs: Vec<_> = points
        .iter()
        .map(|p| (*p, env.workspace(&format!("bob-{p}"), &[])))
        .collect();
    let set: Vec<(String, Vec<u8>)> = (0..300)
        .map(|i| {
            (
                format!("d{}/s{}/f{i}.bin", i % 7, i % 23),
                noise(100 + i * 37, i as u64),
            )
        })
        .collect();
    for (p, bytes) in &set {
        write(&a, p, bytes);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            a.join("d0/s0/f0.bin"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
    }
    env.scribe(&a, &["add", "."]).ok();
    env.scribe(&a, &["submit", "-m", "three hundred"]).ok();
    for (point, b) in &bobs {
        let r = env.crash(b, point, &["sync"]);
        assert!(r.killed, "{point}: the failpoint kills the process: {r:?}");
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
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &str| std::fs::metadata(b.join(p)).unwrap().permissions().mode() & 0o777;
            assert_ne!(mode("d0/s0/f0.bin") & 0o111, 0, "{point}: executable kept");
            assert_eq!(mode("d1/s1/f1.bin") & 0o111, 0, "{point}");
            assert_ne!(mode("d1/s1/f1.bin") & 0o200, 0, "{point}: writable");
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
}
both!(fresh_sync_of_many_files_killed_then_rerun_places_everything);

/// A real kill -9 from outside, in the middle of a slowed sync.
fn sync_killed_from_outside(t: Transport) {
    let env = Env::new(t);
    let a = env.workspace("alice", &[]);
    let b = env.workspace("bob", &[]);
    let set = files(8);
    for (p, bytes) in &set {
        write(&a, p, bytes);
    }
    env.scribe(&a, &["add", "."]).ok();
    env.scribe(&a, &["submit", "-m", "eight"]).ok();
    let mut child = env
        .command(&b, &["sync"])
        .env("SCRIBE_TEST_SLOW_MS", "150")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the sync has placed at least one file, then kill it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !set.iter().any(|(p, _)| b.join(p).exists()) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    env.scribe(&b, &["sync"]).ok();
    for (p, bytes) in &set {
        assert_eq!(&read(&b, p), bytes, "{p}");
    }
    let st = env.scribe(&b, &["status"]);
    assert!(
        st.stdout.contains("Nothing opened, no local changes"),
        "{}",
        st.stdout
    );
}
both!(sync_killed_from_outside);

fn submit_killed_at_each_point(t: Transport) {
    let env = Env::new(t);
    let a = env.workspace("alice", &[]);
    let points = [
        "submit-after-pending",
        "submit-after-upload",
        "submit-after-reply",
    ];
    for (i, point) in points.iter().enumerate() {
        let name = format!("p{i}/big.bin");
        let bytes = noise(2 << 20, 10 + i as u64);
        write(&a, &name, &bytes);
        env.scribe(&a, &["add", &name]).ok();
        let r = env.crash(&a, point, &["submit", "-m", point]);
        assert!(r.killed, "{point}: {r:?}");
        let st = env.scribe(&a, &["status", "--json"]);
        assert!(
            st.stdout.contains("\"submit_pending\":1"),
            "{point}: {}",
            st.stdout
        );
        // The rerun replays the same operation: exactly one change.
        let r = env.scribe(&a, &["submit"]);
        r.ok();
        assert_eq!(r.stdout.trim(), format!("change {}", i + 1), "{point}");
        let st = env.scribe(&a, &["status", "--json"]);
        assert!(
            st.stdout.contains("\"opened\":[]"),
            "{point}: {}",
            st.stdout
        );
        assert!(
            st.stdout.contains("\"submit_pending\":0"),
            "{point}: {}",
            st.stdout
        );
        assert_eq!(read(&a, &name), bytes);
    }
    let log = env.scribe(&a, &["log", "--json"]);
    for p in points {
        assert_eq!(
            log.stdout.matches(&format!("\"message\":\"{p}\"")).count(),
            1,
            "{}",
            log.stdout
        );
    }
    let b = env.workspace("bob", &[]);
    for i in 0..points.len() {
        assert_eq!(
            read(&b, &format!("p{i}/big.bin")),
            noise(2 << 20, 10 + i as u64)
        );
    }
}
both!(submit_killed_at_each_point);

//! The server's volume fills up (a real ENOSPC on a small tmpfs) at
//! several points of a submit (issue 14, item 9): the client is told the
//! server's storage is full, in words that name no server path; once
//! space is back the same command goes on, without restarting the
//! server, and everything is intact.

use std::io::Write;
use std::path::Path;

use super::support::*;

/// Fill the volume holding `filler` until a write fails, then give back
/// `leave` bytes.
fn fill(filler: &Path, leave: u64) {
    let mut f = std::fs::File::create(filler).unwrap();
    let block = vec![0xA5u8; 256 << 10];
    let mut len = 0u64;
    loop {
        match f.write(&block) {
            Ok(0) => break,
            Ok(n) => len += n as u64,
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(28), "filling stopped by {e}");
                break;
            }
        }
    }
    f.set_len(len.saturating_sub(leave)).unwrap();
    f.sync_all().unwrap();
}

/// Run `args` until it is not `server_busy` (the server answers so while a
/// request that started before the failure still holds the old handles).
fn until_not_busy(env: &Env, dir: &Path, args: &[&str]) -> Run {
    for _ in 0..50 {
        let r = env.scribe(dir, args);
        if !r.stderr.contains("Error[server_busy]") {
            return r;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("still busy after 50 tries");
}

#[test]
fn a_full_server_volume_is_named_and_the_server_recovers_once_space_is_back() {
    if !scribe_testkit::env::Volume::available() {
        eprintln!("SKIPPED: SCRIBE_TEST_NO_MOUNT is set, this machine cannot mount a volume");
        return;
    }
    let env = Env::on_volume(Transport::Process, 40 << 20);
    let vol = env.volume();
    let a = env.workspace("alice", &[]);
    write(&a, "base.bin", &noise(1 << 20, 1));
    env.scribe(&a, &["add", "base.bin"]).ok();
    env.scribe(&a, &["submit", "-m", "base"]).ok();

    let filler = vol.join("filler");
    // Nothing left, a little (the metadata commit may be what fails), and
    // less than the file.
    for (round, leave) in [0u64, 48 << 10, 256 << 10, 2 << 20].into_iter().enumerate() {
        fill(&filler, leave);
        let name = format!("art/round{round}.bin");
        write(&a, &name, &noise(4 << 20, 10 + round as u64));
        env.scribe(&a, &["add", &name]).ok();
        let r = env.scribe(&a, &["submit", "-m", &name]);
        assert_eq!(r.code, Some(1), "round {round}: {r:?}");
        assert!(
            r.stderr.contains("Error[storage_full]"),
            "round {round}: a full disk is said to be one: {}",
            r.stderr
        );
        assert!(
            !r.stderr.contains(&*vol.to_string_lossy()) && !r.stderr.contains("/repos/"),
            "round {round}: the reply names no server path: {}",
            r.stderr
        );
        // The workspace is fine and the file still opened.
        let st = env.scribe(&a, &["status"]);
        st.ok();
        assert!(st.stdout.contains(&name), "{}", st.stdout);

        std::fs::remove_file(&filler).unwrap();
        // The same command, same server process: it goes on.
        let r = until_not_busy(&env, &a, &["submit", "-m", &name]);
        r.ok();
    }
    // Everything submitted is whole for a new workspace.
    let b = env.workspace("bob", &[]);
    assert_eq!(read(&b, "base.bin"), noise(1 << 20, 1));
    for round in 0..4u64 {
        assert_eq!(
            read(&b, &format!("art/round{round}.bin")),
            noise(4 << 20, 10 + round),
            "round {round}"
        );
    }
    let log = env.scribe(&a, &["log"]);
    log.ok();
    assert_eq!(log.stdout.lines().count(), 5, "{}", log.stdout);

    // Creating a repository on a full volume, then with room again.
    fill(&filler, 0);
    let r = env.scribe(
        env.dir(),
        &["repo", "create", "second", "--server", &env.url],
    );
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("Error[storage_full]"), "{}", r.stderr);
    std::fs::remove_file(&filler).unwrap();
    until_not_busy(
        &env,
        env.dir(),
        &["repo", "create", "second", "--server", &env.url],
    )
    .ok();
    let list = env.scribe(env.dir(), &["repo", "list", "--server", &env.url]);
    list.ok();
    assert!(list.stdout.contains("second"), "{}", list.stdout);
}

/// The workspace's own volume fills up during a sync: the error names the
/// file and says why (the disk is full), not only "could not write"; its
/// code is this machine's I/O (`io`, not `refused`), the hint says the
/// workspace's disk is full and what to run once there is room (#23), and
/// running it then continues where the sync stopped.
#[test]
fn a_full_workspace_volume_is_named_with_its_cause() {
    if !scribe_testkit::env::Volume::available() {
        eprintln!("SKIPPED: SCRIBE_TEST_NO_MOUNT is set, this machine cannot mount a volume");
        return;
    }
    let env = Env::new(Transport::Tcp);
    let a = env.workspace("alice", &[]);
    let big = noise(12 << 20, 7);
    write(&a, "big.bin", &big);
    env.scribe(&a, &["add", "big.bin"]).ok();
    env.scribe(&a, &["submit", "-m", "big"]).ok();
    let vol = scribe_testkit::env::Volume::mount(&env.path("small"), 40 << 20);
    // Room for the workspace's state, not for the file.
    let filler = vol.path().join("filler");
    fill(&filler, 8 << 20);
    let r = env.scribe(
        vol.path(),
        &[
            "workspace",
            "create",
            "w",
            "--server",
            &env.url,
            "--repo",
            REPO,
        ],
    );
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("big.bin"), "{}", r.stderr);
    assert!(r.stderr.contains("No space left"), "{}", r.stderr);
    assert!(
        r.stderr.contains("Error[io]"),
        "a full local disk is local I/O: {}",
        r.stderr
    );
    assert!(
        r.stderr.contains("the workspace's disk is full")
            && r.stderr.contains("run `scribe sync` inside the workspace"),
        "{}",
        r.stderr
    );
    // `scribe sync` on the still full disk: the same code, its own hint.
    let w = vol.path().join("w");
    let r = env.scribe(&w, &["sync"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("Error[io]"), "{}", r.stderr);
    assert!(
        r.stderr.contains("the workspace's disk is full")
            && r.stderr
                .contains("run `scribe sync` again: it continues where it stopped"),
        "{}",
        r.stderr
    );
    // Room again: the sync the hint names continues and completes.
    std::fs::remove_file(&filler).unwrap();
    let r = env.scribe(&w, &["sync"]);
    r.ok();
    assert!(
        r.stderr.contains("resuming the interrupted sync"),
        "{}",
        r.stderr
    );
    assert_eq!(read(&w, "big.bin"), big);
}

/// The workspace's own state (`.scribe/_state/state.redb`) cannot grow
/// on a full disk: `add`, `edit` and `submit` say so as this machine's
/// I/O with the free-space hint, the state is not reported damaged, the
/// opened work is kept, and once there is room the same commands work.
#[test]
fn a_full_disk_under_the_workspace_state_loses_nothing() {
    if !scribe_testkit::env::Volume::available() {
        eprintln!("SKIPPED: SCRIBE_TEST_NO_MOUNT is set, this machine cannot mount a volume");
        return;
    }
    let env = Env::new(Transport::Tcp);
    let vol = scribe_testkit::env::Volume::mount(&env.path("small"), 40 << 20);
    let r = env.scribe(
        vol.path(),
        &[
            "workspace",
            "create",
            "w",
            "--server",
            &env.url,
            "--repo",
            REPO,
        ],
    );
    r.ok();
    let w = vol.path().join("w");
    // Work in progress: an opened edit and many new files.
    write(&w, "kept.txt", b"first");
    env.scribe(&w, &["add", "kept.txt"]).ok();
    env.scribe(&w, &["submit", "-m", "first"]).ok();
    env.scribe(&w, &["edit", "kept.txt"]).ok();
    write(&w, "kept.txt", b"my unsubmitted edit");
    let names: Vec<String> = (0..400)
        .map(|i| format!("new/{i:04}-{}.txt", "n".repeat(150)))
        .collect();
    for n in &names {
        write(&w, n, n.as_bytes());
    }
    let filler = vol.path().join("filler");
    fill(&filler, 0);
    for args in [vec!["add", "new"], vec!["submit", "-m", "second"]] {
        let r = env.scribe(&w, &args);
        assert_eq!(r.code, Some(1), "{r:?}");
        assert!(r.stderr.contains("Error[io]"), "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains("state.redb") && r.stderr.contains("No space left"),
            "{args:?}: {}",
            r.stderr
        );
        assert!(
            r.stderr.contains("disk is full: free space on it"),
            "{args:?}: {}",
            r.stderr
        );
        assert!(!r.stderr.contains("damaged"), "{args:?}: {}", r.stderr);
    }
    // The opened edit is untouched, and status still reads the state.
    assert_eq!(read(&w, "kept.txt"), b"my unsubmitted edit");
    let r = env.scribe(&w, &["status"]);
    r.ok();
    assert!(r.stdout.contains("edit    kept.txt"), "{}", r.stdout);
    // Room again: the same commands go on, and everything lands.
    std::fs::remove_file(&filler).unwrap();
    env.scribe(&w, &["add", "new"]).ok();
    env.scribe(&w, &["submit", "-m", "second"]).ok();
    let b = env.workspace("bob", &[]);
    assert_eq!(read(&b, "kept.txt"), b"my unsubmitted edit");
    for n in &names {
        assert_eq!(read(&b, n), n.as_bytes());
    }
}

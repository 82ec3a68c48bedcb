//! The daily loop between two workspaces, over both transports.

use super::support::{both, noise, read, write, Env, Transport};

fn exchange(t: Transport) {
    let env = Env::new(t);
    let a = env.workspace("alice", &[]);
    write(&a, "art/hero.psd", &noise(3 << 20, 1));
    write(&a, "art/deep/er/and/deeper/still/level.dat", b"deep");
    write(&a, "art/Ünïcødé-名前.txt", "non-ascii".as_bytes());
    write(&a, "empty.cfg", b"");
    write(&a, "tools/build.sh", b"#!/bin/sh\n");
    write(&a, "old/name.txt", b"moving");
    write(&a, "ignored.tmp", b"x");
    write(&a, ".scribeignore", b"*.tmp\n");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            a.join("tools/build.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
    }
    env.scribe(&a, &["add", "."]).ok();
    let st = env.scribe(&a, &["status", "--json"]);
    assert!(st.stdout.contains("\"action\":\"add\""), "{}", st.stdout);
    assert!(
        !st.stdout.contains("ignored.tmp"),
        "ignore rules apply: {}",
        st.stdout
    );
    let s = env.scribe(&a, &["submit", "-m", "first"]);
    s.ok();
    assert_eq!(s.stdout.trim(), "change 1");

    let b = env.workspace("bob", &[]);
    assert_eq!(read(&b, "art/hero.psd"), noise(3 << 20, 1));
    assert_eq!(read(&b, "art/deep/er/and/deeper/still/level.dat"), b"deep");
    assert_eq!(read(&b, "art/Ünïcødé-名前.txt"), "non-ascii".as_bytes());
    assert_eq!(read(&b, "empty.cfg"), b"");
    assert!(!b.join("ignored.tmp").exists());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(b.join("tools/build.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_ne!(mode & 0o111, 0, "the executable bit round-trips");
        let mode = std::fs::metadata(b.join("empty.cfg"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0);
    }
    let st = env.scribe(&b, &["status"]);
    assert!(
        st.stdout.contains("Nothing opened, no local changes"),
        "{}",
        st.stdout
    );

    // Bob edits, deletes and moves.
    env.scribe(&b, &["edit", "art/hero.psd"]).ok();
    let mut hero = noise(3 << 20, 1);
    hero[100..200].copy_from_slice(&[7; 100]);
    write(&b, "art/hero.psd", &hero);
    env.scribe(&b, &["delete", "empty.cfg"]).ok();
    assert!(!b.join("empty.cfg").exists());
    env.scribe(&b, &["move", "old", "new/place"]).ok();
    assert_eq!(read(&b, "new/place/name.txt"), b"moving");
    let st = env.scribe(&b, &["status", "--json"]);
    assert!(
        st.stdout.contains("\"moved_from\":\"old/name.txt\""),
        "{}",
        st.stdout
    );
    env.scribe(&b, &["submit", "-m", "bob's changes"]).ok();

    env.scribe(&a, &["sync"]).ok();
    assert_eq!(read(&a, "art/hero.psd"), hero);
    assert!(!a.join("empty.cfg").exists());
    assert!(!a.join("old/name.txt").exists());
    assert_eq!(read(&a, "new/place/name.txt"), b"moving");
    // Alice's replaced and removed files were unmodified (their content
    // is on the server): none is kept (#18 item 5).
    let rec = env.scribe(&a, &["recovery", "list", "--json"]);
    assert_eq!(rec.stdout.trim(), "[]");

    let log = env.scribe(&a, &["log", "--json"]);
    assert!(
        log.stdout.contains("\"message\":\"bob's changes\""),
        "{}",
        log.stdout
    );
    assert!(log.stdout.contains("\"author\":\"bob\""), "{}", log.stdout);
    let d = env.scribe(&a, &["describe", "2"]);
    assert!(
        d.stdout.contains("(moved from old/name.txt)"),
        "{}",
        d.stdout
    );
    let h = env.scribe(&a, &["history", "art/hero.psd"]);
    assert_eq!(h.stdout.lines().count(), 2, "{}", h.stdout);
    let st = env.scribe(&a, &["status"]);
    assert!(st.stdout.contains("Nothing opened"), "{}", st.stdout);

    // Back to change 1 and forward again.
    env.scribe(&a, &["sync", "1"]).ok();
    assert_eq!(read(&a, "art/hero.psd"), noise(3 << 20, 1));
    assert_eq!(read(&a, "empty.cfg"), b"");
    assert_eq!(read(&a, "old/name.txt"), b"moving");
    assert!(!a.join("new/place/name.txt").exists());
    let st = env.scribe(&a, &["status", "--json"]);
    assert!(st.stdout.starts_with("{\"change\":1,"), "{}", st.stdout);
    assert!(st.stdout.contains("\"unopened\":[]"), "{}", st.stdout);
    env.scribe(&a, &["sync"]).ok();
    assert_eq!(read(&a, "art/hero.psd"), hero);
    assert!(!a.join("old/name.txt").exists());
}
both!(exchange);

/// The same loop over TLS (`scribes://`).
#[test]
fn exchange_over_tls() {
    exchange(Transport::Tls);
    stale_base_refused_then_resolved(Transport::Tls);
}

/// The same loop against a server in a separate process.
#[test]
fn exchange_with_a_separate_server_process() {
    exchange(Transport::Process);
    lock_blocks_submit(Transport::Process);
}

/// A server killed with SIGKILL loses nothing it acknowledged: the next
/// command reports it unreachable and changes nothing; a new server
/// process on the same address serves the change, and work goes on.
#[test]
fn a_killed_server_loses_nothing_it_acknowledged() {
    let mut env = Env::new(Transport::Process);
    let a = env.workspace("alice", &[]);
    write(&a, "art/hero.psd", &noise(1 << 20, 5));
    env.scribe(&a, &["add", "."]).ok();
    env.scribe(&a, &["submit", "-m", "first"]).ok();
    let status = env.server_process().kill();
    assert!(!status.success(), "{status}");
    write(&a, "notes.txt", b"written while the server is down");
    env.scribe(&a, &["add", "notes.txt"]).ok();
    let r = env.scribe(&a, &["submit", "-m", "second"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("Error[unreachable]"), "{}", r.stderr);
    env.restart_server_process();
    let b = env.workspace("bob", &[]);
    assert_eq!(read(&b, "art/hero.psd"), noise(1 << 20, 5));
    assert!(!b.join("notes.txt").exists());
    let r = env.scribe(&a, &["submit", "-m", "second"]);
    r.ok();
    assert_eq!(r.stdout.trim(), "change 2");
    env.scribe(&b, &["sync"]).ok();
    assert_eq!(read(&b, "notes.txt"), b"written while the server is down");
}

fn stale_base_refused_then_resolved(t: Transport) {
    let env = Env::new(t);
    let a = env.workspace("alice", &[]);
    write(&a, "doc.txt", b"v1");
    env.scribe(&a, &["add", "doc.txt"]).ok();
    env.scribe(&a, &["submit", "-m", "v1"]).ok();
    let b = env.workspace("bob", &[]);
    env.scribe(&a, &["edit", "doc.txt"]).ok();
    write(&a, "doc.txt", b"alice v2");
    env.scribe(&a, &["submit", "-m", "alice"]).ok();

    env.scribe(&b, &["edit", "doc.txt"]).ok();
    write(&b, "doc.txt", b"bob v2");
    let r = env.scribe(&b, &["submit", "-m", "bob"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("Error[base_mismatch]"), "{}", r.stderr);
    assert!(
        r.stderr.contains("doc.txt"),
        "the refusal names the path: {}",
        r.stderr
    );
    assert!(r.stderr.contains("Hint:"), "{}", r.stderr);
    // Nothing local changed.
    assert_eq!(read(&b, "doc.txt"), b"bob v2");
    let st = env.scribe(&b, &["status", "--json"]);
    assert!(
        st.stdout
            .contains("\"path\":\"doc.txt\",\"action\":\"edit\""),
        "{}",
        st.stdout
    );

    // Sync keeps Bob's work and asks for resolution.
    let s = env.scribe(&b, &["sync"]);
    s.ok();
    assert_eq!(read(&b, "doc.txt"), b"bob v2");
    let st = env.scribe(&b, &["status", "--json"]);
    assert!(
        st.stdout.contains("\"needs_resolve\":[\"doc.txt\"]"),
        "{}",
        st.stdout
    );
    let r = env.scribe(&b, &["submit", "-m", "bob"]);
    assert!(r.stderr.contains("Error[needs_resolve]"), "{}", r.stderr);
    env.scribe(&b, &["resolve", "doc.txt", "--ours"]).ok();
    env.scribe(&b, &["submit", "-m", "bob over alice"]).ok();
    env.scribe(&a, &["sync"]).ok();
    assert_eq!(read(&a, "doc.txt"), b"bob v2");

    // --theirs takes the server's bytes and keeps ours in recovery.
    env.scribe(&a, &["edit", "doc.txt"]).ok();
    write(&a, "doc.txt", b"alice v3");
    env.scribe(&a, &["submit", "-m", "a3"]).ok();
    env.scribe(&b, &["edit", "doc.txt"]).ok();
    write(&b, "doc.txt", b"bob v3");
    env.scribe(&b, &["sync"]).ok();
    env.scribe(&b, &["resolve", "doc.txt", "--theirs"]).ok();
    assert_eq!(read(&b, "doc.txt"), b"alice v3");
    let rec = env.scribe(&b, &["recovery", "list", "--json"]);
    assert!(
        rec.stdout.contains("\"reason\":\"resolve\""),
        "{}",
        rec.stdout
    );
    let st = env.scribe(&b, &["status"]);
    assert!(st.stdout.contains("Nothing opened"), "{}", st.stdout);
}
both!(stale_base_refused_then_resolved);

fn lock_blocks_submit(t: Transport) {
    let env = Env::new(t);
    let a = env.workspace("alice", &[]);
    write(&a, "hero.psd", b"v1");
    env.scribe(&a, &["add", "hero.psd"]).ok();
    env.scribe(&a, &["submit", "-m", "v1"]).ok();
    let b = env.workspace("bob", &[]);
    env.scribe(&a, &["lock", "hero.psd"]).ok();
    let l = env.scribe(&b, &["locks", "--json"]);
    assert!(l.stdout.contains("\"owner\":\"alice\""), "{}", l.stdout);
    assert!(l.stdout.contains("\"mine\":false"), "{}", l.stdout);
    let e = env.scribe(&b, &["edit", "hero.psd"]);
    e.ok();
    assert!(e.stderr.contains("locked by alice"), "{}", e.stderr);
    write(&b, "hero.psd", b"bob's");
    let r = env.scribe(&b, &["submit", "-m", "bob"]);
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("Error[locked_by_other]"), "{}", r.stderr);
    assert!(r.stderr.contains("hero.psd"), "{}", r.stderr);
    assert_eq!(read(&b, "hero.psd"), b"bob's");
    // Alice submits; her lock is released.
    env.scribe(&a, &["edit", "hero.psd"]).ok();
    write(&a, "hero.psd", b"v2");
    env.scribe(&a, &["submit", "-m", "v2"]).ok();
    let l = env.scribe(&a, &["locks", "--json"]);
    assert_eq!(l.stdout.trim(), "[]");
    // --keep-locks keeps it.
    env.scribe(&a, &["lock", "hero.psd"]).ok();
    env.scribe(&a, &["edit", "hero.psd"]).ok();
    write(&a, "hero.psd", b"v3");
    env.scribe(&a, &["submit", "-m", "v3", "--keep-locks"]).ok();
    let l = env.scribe(&a, &["locks"]);
    assert!(l.stdout.contains("hero.psd"), "{}", l.stdout);
    env.scribe(&a, &["unlock", "hero.psd"]).ok();
    let l = env.scribe(&a, &["locks", "--json"]);
    assert_eq!(l.stdout.trim(), "[]");
}
both!(lock_blocks_submit);

fn offline_work_reconciled(t: Transport) {
    let env = Env::new(t);
    let a = env.workspace("alice", &[]);
    write(&a, "keep.txt", b"keep");
    write(&a, "edit.txt", b"before");
    write(&a, "gone.txt", b"gone");
    env.scribe(&a, &["add", "."]).ok();
    env.scribe(&a, &["submit", "-m", "base"]).ok();
    // Offline: no edit/add/delete.
    write(&a, "edit.txt", b"after, offline");
    std::fs::remove_file(a.join("gone.txt")).unwrap();
    write(&a, "new/file.bin", &noise(10_000, 3));
    let st = env.scribe(&a, &["status", "--json"]);
    for (p, k) in [
        ("edit.txt", "modified"),
        ("gone.txt", "missing"),
        ("new/file.bin", "new"),
    ] {
        assert!(
            st.stdout
                .contains(&format!("{{\"path\":\"{p}\",\"kind\":\"{k}\"}}")),
            "{p} {k}: {}",
            st.stdout
        );
    }
    env.scribe(&a, &["reconcile"]).ok();
    env.scribe(&a, &["submit", "-m", "offline work"]).ok();
    let b = env.workspace("bob", &[]);
    assert_eq!(read(&b, "edit.txt"), b"after, offline");
    assert!(!b.join("gone.txt").exists());
    assert_eq!(read(&b, "new/file.bin"), noise(10_000, 3));
    assert_eq!(read(&b, "keep.txt"), b"keep");
}
both!(offline_work_reconciled);

fn refusals_and_usage(t: Transport) {
    let env = Env::new(t);
    let a = env.workspace("alice", &[]);
    write(&a, "Art/Hero.psd", b"1");
    write(&a, "art/hero.PSD", b"2");
    // Found by walking `.`, the colliding name is said (once, with its
    // rule's code) and not opened; the rest is opened and add exits 0
    // (#18 item 16).
    let r = env.scribe(&a, &["add", "."]);
    assert_eq!(r.code, Some(0), "{r:?}");
    assert!(
        r.stderr.contains("not opened: art/hero.PSD: ") && r.stderr.contains("(path_collision)"),
        "{}",
        r.stderr
    );
    // Nothing was uploaded: the server has no change.
    let log = env.scribe(&a, &["log", "--json"]);
    assert_eq!(log.stdout.trim(), "[]");
    let r = env.scribe(&a, &["submit"]);
    assert_eq!(r.code, Some(2), "{r:?}");
    let r = env.scribe(&a, &["frobnicate"]);
    assert_eq!(r.code, Some(2));
    let r = env.scribe(&env.path(""), &["status"]);
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("Error[not_a_workspace]"), "{}", r.stderr);
    assert!(r.stderr.contains("Hint:"), "{}", r.stderr);
    // A collision stays refused everywhere: reconcile does not open it,
    // status says why, and naming it is an error.
    std::fs::remove_file(a.join("art/hero.PSD")).unwrap();
    env.scribe(&a, &["submit", "-m", "hero"]).ok();
    write(&a, "ART/HERO.psd", b"3");
    let r = env.scribe(&a, &["reconcile"]);
    r.ok();
    assert!(
        r.stderr.contains("not opened: ART/HERO.psd: "),
        "{}",
        r.stderr
    );
    let st = env.scribe(&a, &["status"]);
    assert!(
        st.stdout.contains("ART/HERO.psd  (path_collision"),
        "{}",
        st.stdout
    );
    let r = env.scribe(&a, &["add", "ART/HERO.psd"]);
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("Error[path_collision]"), "{}", r.stderr);
    assert!(r.stderr.contains("ART/HERO.psd"), "{}", r.stderr);
    let log = env.scribe(&a, &["log", "--json"]);
    assert_eq!(
        log.stdout.matches("\"change\":").count(),
        1,
        "{}",
        log.stdout
    );
    let r = env.scribe(&a, &["edit", "nope.txt"]);
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("Error[not_present]"), "{}", r.stderr);
}
both!(refusals_and_usage);

/// A file where someone else already has a folder of files (or the
/// other way round) is refused by the server with `path_conflict`, names
/// the path and says how to get out; nothing is recorded and the file
/// stays opened (issue 14, item 5).
#[test]
fn a_file_under_another_users_file_is_path_conflict_with_a_way_out() {
    let env = Env::new(Transport::Tcp);
    let a = env.workspace("alice", &[]);
    let b = env.workspace("bob", &[]);
    write(&a, "docs", b"a file named docs");
    env.scribe(&a, &["add", "docs"]).ok();
    env.scribe(&a, &["submit", "-m", "docs file"]).ok();
    write(&b, "docs/readme.txt", b"a file under docs/");
    env.scribe(&b, &["add", "docs/readme.txt"]).ok();
    let r = env.scribe(&b, &["submit", "-m", "readme"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("Error[path_conflict]"), "{}", r.stderr);
    assert!(r.stderr.contains("docs/readme.txt"), "{}", r.stderr);
    assert!(r.stderr.contains("scribe move"), "{}", r.stderr);
    let st = env.scribe(&b, &["status"]);
    assert!(st.stdout.contains("docs/readme.txt"), "{}", st.stdout);
    // A new workspace still syncs the repository.
    let c = env.workspace("carol", &[]);
    assert_eq!(read(&c, "docs"), b"a file named docs");
}

/// Found by use (session 24): `resolve --theirs` of a file deleted here
/// without `scribe delete` said "yours is in the recovery area" while
/// nothing had been put there (there was nothing of yours to keep).
#[test]
fn theirs_over_a_file_removed_here_does_not_claim_a_recovery_copy() {
    let env = Env::new(Transport::Tcp);
    let (a, b) = env.two_sharing("art/hero.psd");
    std::fs::remove_file(b.join("art/hero.psd")).unwrap();
    env.scribe(&a, &["edit", "art/hero.psd"]).ok();
    write(&a, "art/hero.psd", b"v2");
    env.scribe(&a, &["submit", "-m", "v2"]).ok();
    env.scribe(&b, &["sync"]).ok();
    let r = env.scribe(&b, &["resolve", "art/hero.psd", "--theirs"]);
    r.ok();
    assert_eq!(read(&b, "art/hero.psd"), b"v2");
    let listed = env.scribe(&b, &["recovery", "list", "--json"]);
    listed.ok();
    assert_eq!(listed.stdout.trim(), "[]", "nothing of bob's was kept");
    assert!(
        !r.stdout.contains("recovery area"),
        "no copy was made: {}",
        r.stdout
    );
    assert!(r.stdout.contains("took theirs"), "{}", r.stdout);

    // With a file of yours there, the message still says where it went.
    env.scribe(&a, &["edit", "art/hero.psd"]).ok();
    write(&a, "art/hero.psd", b"v3");
    env.scribe(&a, &["submit", "-m", "v3"]).ok();
    write(&b, "art/hero.psd", b"bob's own");
    env.scribe(&b, &["sync"]).ok();
    let r = env.scribe(&b, &["resolve", "art/hero.psd", "--theirs"]);
    r.ok();
    assert!(r.stdout.contains("recovery area"), "{}", r.stdout);
}

/// Found by use (session 25): a lock broken by another workspace
/// (`scribe unlock --force`) was invisible to its holder in `status` and
/// `locks` until a submit failed, whose refusal read as if the lock had
/// never been taken. `status` (one request, only when this workspace took
/// locks) and `locks` name it, the submit refusal says so, and offline
/// `status` says the lock state is unknown instead of failing.
#[test]
fn a_lock_broken_by_another_workspace_is_shown_to_its_holder() {
    let mut env = Env::new(Transport::Process);
    let a = env.workspace("alice", &[]);
    write(&a, "hero.psd", b"v1");
    write(&a, "other.psd", b"o1");
    env.scribe(&a, &["add", "."]).ok();
    env.scribe(&a, &["submit", "-m", "v1"]).ok();
    let b = env.workspace("bob", &[]);
    env.scribe(&a, &["lock", "hero.psd", "other.psd"]).ok();
    env.scribe(&a, &["edit", "hero.psd"]).ok();
    write(&a, "hero.psd", b"alice's v2");
    let st = env.scribe(&a, &["status"]);
    assert!(!st.stdout.contains("broken"), "{}", st.stdout);
    env.scribe(&b, &["unlock", "--force", "hero.psd"]).ok();

    let st = env.scribe(&a, &["status"]);
    st.ok();
    assert!(
        st.stdout.contains("Your locks broken by another workspace")
            && st
                .stdout
                .contains("hero.psd  (released, now unlocked, opened for edit)"),
        "{}",
        st.stdout
    );
    assert!(!st.stdout.contains("other.psd  ("), "{}", st.stdout);
    let l = env.scribe(&a, &["locks"]);
    assert!(
        l.stdout.contains("Your lock on hero.psd was broken"),
        "{}",
        l.stdout
    );
    env.scribe(&b, &["lock", "hero.psd"]).ok();
    let st = env.scribe(&a, &["status", "--json"]);
    assert!(
        st.stdout
            .contains("\"broken_locks\":[{\"path\":\"hero.psd\",\"held_by\":\"bob\"}]"),
        "{}",
        st.stdout
    );
    let r = env.scribe(&a, &["submit", "-m", "v2"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("Error[locked_by_other]"), "{}", r.stderr);
    assert!(
        r.stderr.contains("your lock on hero.psd was broken"),
        "{}",
        r.stderr
    );
    assert_eq!(read(&a, "hero.psd"), b"alice's v2");
    // Once Bob releases it, `unlock` forgets the broken lock.
    env.scribe(&b, &["unlock", "hero.psd"]).ok();
    let r = env.scribe(&a, &["unlock", "hero.psd"]);
    r.ok();
    assert!(
        r.stdout
            .contains("forgot your broken lock on hero.psd (released, now unlocked)"),
        "{r:?}"
    );
    let st = env.scribe(&a, &["status", "--json"]);
    assert!(
        st.stdout
            .contains("\"broken_locks\":[],\"locks_unchecked\":0"),
        "{}",
        st.stdout
    );

    // Offline: status works and says the lock state is unknown.
    env.server_process().kill();
    let st = env.scribe(&a, &["status"]);
    st.ok();
    assert!(
        st.stdout
            .contains("Lock state unknown (offline): 1 lock(s) taken here were not checked"),
        "{}",
        st.stdout
    );
    assert!(st.stdout.contains("hero.psd"), "{}", st.stdout);
    let st = env.scribe(&a, &["status", "--json"]);
    st.ok();
    assert!(
        st.stdout
            .contains("\"broken_locks\":null,\"locks_unchecked\":1"),
        "{}",
        st.stdout
    );
    // A workspace that took no lock asks nothing: no lock line offline.
    let st = env.scribe(&b, &["status"]);
    st.ok();
    assert!(!st.stdout.contains("Lock state"), "{}", st.stdout);
}

/// Session 25 left it open: `scribe unlock PATH` of a lock another
/// workspace broke and now holds was refused (`locked_by_other`), so the
/// broken lock stayed listed ("now locked by bob") in `status` and
/// `locks` until Bob released his. The holder acknowledges it: `unlock`
/// forgets this workspace's record, says who holds the lock now and that
/// it was not touched, and never releases Bob's lock; a lock of its own
/// named with it is released as before. `locks --json` keeps its array of
/// the server's locks (`state: "held"`) and adds the broken ones as
/// entries of their own (`state: "broken"`, `held_by`).
#[test]
fn unlock_of_a_broken_lock_another_workspace_holds_forgets_it() {
    let env = Env::new(Transport::Tcp);
    let a = env.workspace("alice", &[]);
    write(&a, "hero.psd", b"v1");
    write(&a, "other.psd", b"o1");
    env.scribe(&a, &["add", "."]).ok();
    env.scribe(&a, &["submit", "-m", "v1"]).ok();
    let b = env.workspace("bob", &[]);
    env.scribe(&a, &["lock", "hero.psd", "other.psd"]).ok();
    env.scribe(&b, &["unlock", "--force", "hero.psd"]).ok();
    env.scribe(&b, &["lock", "hero.psd"]).ok();

    let l = env.scribe(&a, &["locks", "--json"]);
    l.ok();
    assert!(
        l.stdout
            .contains("{\"path\":\"hero.psd\",\"owner\":\"alice\",")
            && l.stdout.contains(
                "\"mine\":false,\"acquired_ms\":null,\"generation\":1,\"state\":\"broken\",\
                 \"held_by\":\"bob\"}"
            )
            && l.stdout
                .contains("{\"path\":\"hero.psd\",\"owner\":\"bob\",")
            && l.stdout.contains("\"state\":\"held\",\"held_by\":null}"),
        "{}",
        l.stdout
    );

    let r = env.scribe(&a, &["unlock", "hero.psd", "other.psd"]);
    r.ok();
    assert!(
        r.stdout.contains(
            "forgot your broken lock on hero.psd (now locked by bob; that lock was not touched)"
        ) && r.stdout.contains("unlocked other.psd"),
        "{r:?}"
    );
    let st = env.scribe(&a, &["status", "--json"]);
    assert!(
        st.stdout
            .contains("\"broken_locks\":[],\"locks_unchecked\":0"),
        "{}",
        st.stdout
    );
    let l = env.scribe(&b, &["locks"]);
    assert!(
        l.stdout.contains("hero.psd  bob") && l.stdout.contains("(this one)"),
        "Bob's lock stands: {}",
        l.stdout
    );
    assert!(!l.stdout.contains("other.psd"), "{}", l.stdout);
    // Nothing more to forget: a second unlock is refused for Bob's lock,
    // with the hint naming `scribe locks`.
    let r = env.scribe(&a, &["unlock", "hero.psd"]);
    assert!(r.stderr.contains("Error[locked_by_other]"), "{r:?}");
}

/// Found by use (session 26): Bob edits a file Alice then moves (her
/// directory move submitted first). Bob's sync defers the old path, and
/// `resolve --ours` kept his edit *at the old path* as a new file: his
/// submit brought the file back where nobody looks, beside the moved one,
/// which never got his edit. `--ours` now follows the server's move: his
/// bytes go to the file's new path, opened for edit over her revision,
/// and the old path is gone; the submit lands his edit on the moved file.
#[test]
fn ours_on_a_file_another_moved_carries_the_edit_to_where_it_went() {
    let env = Env::new(Transport::Tcp);
    let (a, b) = env.two_sharing("env/tree.fbx");
    env.scribe(&b, &["edit", "env/tree.fbx"]).ok();
    write(&b, "env/tree.fbx", b"bob's edit");
    env.scribe(&a, &["move", "env", "world"]).ok();
    env.scribe(&a, &["submit", "-m", "env is world now"]).ok();
    env.scribe(&b, &["sync"]).ok();
    assert_eq!(read(&b, "world/tree.fbx"), b"v1");
    let r = env.scribe(&b, &["resolve", "env/tree.fbx", "--ours"]);
    r.ok();
    assert!(
        r.stdout.contains(
            "resolved env/tree.fbx: moved to world/tree.fbx in change 2; your file follows it there, opened for edit"
        ),
        "{}",
        r.stdout
    );
    assert!(!b.join("env").exists());
    assert_eq!(read(&b, "world/tree.fbx"), b"bob's edit");
    let st = env.scribe(&b, &["status", "--json"]);
    assert!(
        st.stdout.contains(
            "\"opened\":[{\"path\":\"world/tree.fbx\",\"action\":\"edit\",\"needs_reconcile\":true,\"moved_from\":null}]"
        ),
        "{}",
        st.stdout
    );
    env.scribe(&b, &["submit", "-m", "bob's edit, where it lives now"])
        .ok();
    env.scribe(&a, &["sync"]).ok();
    assert_eq!(read(&a, "world/tree.fbx"), b"bob's edit");
    assert!(!a.join("env").exists());
    let h = env.scribe(&a, &["history", "world/tree.fbx"]);
    assert!(
        h.stdout.contains("bob's edit, where it lives now") && h.stdout.contains("as env/tree.fbx"),
        "{}",
        h.stdout
    );
}

/// Found by use (session 26, fixed in 27): a sync that left an artist's
/// work at a path the server had *moved* said only "resolve PATH (opened
/// locally ...)", as for any removal; only `resolve --ours` found the
/// move. The sync now says where the file went (old -> new, the change)
/// and what `--ours` and `--theirs` do, in its lines, a note and `--json`
/// (`moved_to`); a plain removal says nothing of a move.
#[test]
fn sync_says_where_the_server_moved_a_file_whose_work_it_left_behind() {
    let env = Env::new(Transport::Tcp);
    let (a, b) = env.two_sharing("env/tree.fbx");
    write(&a, "env/rock.txt", b"rock");
    write(&a, "env/bush.txt", b"bush");
    env.scribe(&a, &["add", "env"]).ok();
    env.scribe(&a, &["submit", "-m", "more"]).ok();
    env.scribe(&b, &["sync"]).ok();
    env.scribe(&b, &["edit", "env/tree.fbx"]).ok();
    write(&b, "env/tree.fbx", b"bob's edit");
    // Changed without `edit`: deferred all the same.
    write(&b, "env/rock.txt", b"bob's rock");
    write(&b, "env/bush.txt", b"bob's bush");

    env.scribe(&a, &["move", "env/tree.fbx", "world/tree.fbx"])
        .ok();
    env.scribe(&a, &["delete", "env/bush.txt"]).ok();
    env.scribe(&a, &["submit", "-m", "tree to world"]).ok();
    let r = env.scribe(&b, &["sync"]);
    r.ok();
    assert!(
        r.stdout.contains(
            "resolve env/tree.fbx  (opened locally; resolve to combine; the server moved it to \
             world/tree.fbx in change 3)"
        ),
        "{}",
        r.stdout
    );
    assert!(
        r.stderr.contains(
            "Note: the server moved env/tree.fbx -> world/tree.fbx (change 3); your work stays \
             at env/tree.fbx. `scribe resolve --ours env/tree.fbx` carries your work to \
             world/tree.fbx (opened for edit there); `scribe resolve --theirs env/tree.fbx` \
             takes their move"
        ),
        "{}",
        r.stderr
    );
    // Removed, not moved: no word of a move.
    assert!(
        r.stdout.contains(
            "resolve env/bush.txt  (modified locally without edit; reconcile or resolve)\n"
        ),
        "{}",
        r.stdout
    );
    assert!(!r.stderr.contains("moved env/bush.txt"), "{}", r.stderr);

    env.scribe(&a, &["move", "env/rock.txt", "props/rock.txt"])
        .ok();
    env.scribe(&a, &["submit", "-m", "rock to props"]).ok();
    let r = env.scribe(&b, &["sync", "--json"]);
    r.ok();
    assert!(
        r.stdout.contains(
            "\"needs_resolve\":[{\"path\":\"env/rock.txt\",\"reason\":\"modified locally without \
             edit; reconcile or resolve\",\"moved_to\":{\"path\":\"props/rock.txt\",\"change\":4,\
             \"ours_follows\":true}}]"
        ),
        "{}",
        r.stdout
    );
    // What the sync said is what `--ours` does.
    let r = env.scribe(&b, &["resolve", "env/rock.txt", "--ours"]);
    r.ok();
    assert!(
        r.stdout
            .contains("resolved env/rock.txt: moved to props/rock.txt in change 4"),
        "{}",
        r.stdout
    );
    assert_eq!(read(&b, "props/rock.txt"), b"bob's rock");
}

/// Session 26 left it open: `resolve --ours` on a path the server removed
/// asked the server (its history, then the removing change) whether the
/// removal was a move, so it failed offline. The sync that deferred the
/// path records how the server removed it (`meta["their-move:PATH"]`, the
/// change the sync applied, which never changes), and `--ours` follows a
/// recorded move, or keeps the work as a new file after a recorded plain
/// removal, with the server stopped.
#[test]
fn resolve_ours_after_a_sync_needs_no_server() {
    let mut env = Env::new(Transport::Process);
    let (a, b) = env.two_sharing("env/tree.fbx");
    write(&a, "env/bush.txt", b"bush");
    env.scribe(&a, &["add", "env/bush.txt"]).ok();
    env.scribe(&a, &["submit", "-m", "bush"]).ok();
    env.scribe(&b, &["sync"]).ok();
    env.scribe(&b, &["edit", "env/tree.fbx", "env/bush.txt"])
        .ok();
    write(&b, "env/tree.fbx", b"bob's edit");
    write(&b, "env/bush.txt", b"bob's bush");
    env.scribe(&a, &["move", "env/tree.fbx", "world/tree.fbx"])
        .ok();
    env.scribe(&a, &["delete", "env/bush.txt"]).ok();
    env.scribe(&a, &["submit", "-m", "tree to world, no bush"])
        .ok();
    env.scribe(&b, &["sync"]).ok();

    env.server_process().kill();
    let r = env.scribe(&b, &["resolve", "env/tree.fbx", "--ours"]);
    r.ok();
    assert!(
        r.stdout.contains(
            "resolved env/tree.fbx: moved to world/tree.fbx in change 3; your file follows it \
             there, opened for edit"
        ),
        "{r:?}"
    );
    assert_eq!(read(&b, "world/tree.fbx"), b"bob's edit");
    let r = env.scribe(&b, &["resolve", "env/bush.txt", "--ours"]);
    r.ok();
    assert!(
        r.stdout
            .contains("resolved env/bush.txt: kept yours, opened for add"),
        "{r:?}"
    );
    let st = env.scribe(&b, &["status", "--json"]);
    assert!(
        st.stdout.contains("\"needs_resolve\":[]")
            && st
                .stdout
                .contains("\"path\":\"world/tree.fbx\",\"action\":\"edit\"")
            && st
                .stdout
                .contains("\"path\":\"env/bush.txt\",\"action\":\"add\""),
        "{}",
        st.stdout
    );

    // Back online, the submit lands both where they live now.
    env.restart_server_process();
    env.scribe(&b, &["submit", "-m", "bob's work"]).ok();
    env.scribe(&a, &["sync"]).ok();
    assert_eq!(read(&a, "world/tree.fbx"), b"bob's edit");
    assert_eq!(read(&a, "env/bush.txt"), b"bob's bush");
}

/// Found by use (session 26): `scribe edit` of a file another workspace
/// has locked warns that the submit will be refused, but `delete` and
/// `move` of it (a directory move included) said nothing, and the artist
/// learned it only when the submit of the whole move was refused. They
/// warn the same way, naming the file and its holder; their work is
/// opened as usual.
#[test]
fn deleting_or_moving_a_file_another_locked_warns() {
    let env = Env::new(Transport::Tcp);
    let (a, b) = env.two_sharing("world/tree.fbx");
    write(&a, "world/rock.txt", b"rock");
    write(&a, "other.txt", b"other");
    env.scribe(&a, &["add", "."]).ok();
    env.scribe(&a, &["submit", "-m", "more"]).ok();
    env.scribe(&b, &["sync"]).ok();
    env.scribe(&a, &["lock", "world/tree.fbx", "other.txt"])
        .ok();
    let r = env.scribe(&b, &["move", "world", "level1"]);
    r.ok();
    assert!(
        r.stderr
            .contains("warning: world/tree.fbx is locked by alice")
            && !r.stderr.contains("rock.txt is locked"),
        "{}",
        r.stderr
    );
    let r = env.scribe(&b, &["delete", "other.txt"]);
    r.ok();
    assert!(
        r.stderr.contains("warning: other.txt is locked by alice"),
        "{}",
        r.stderr
    );
    let st = env.scribe(&b, &["status", "--json"]);
    assert!(
        st.stdout
            .contains("\"path\":\"other.txt\",\"action\":\"delete\""),
        "{}",
        st.stdout
    );
}

/// Found by use (session 26): `resolve --theirs` of a file the server
/// removed (another artist deleted or moved its directory) left its
/// emptied directory behind, which no command lists (a sync removing the
/// same file prunes it). It is removed like a sync's.
#[test]
fn theirs_over_a_removed_file_leaves_no_empty_directory() {
    let env = Env::new(Transport::Tcp);
    let (a, b) = env.two_sharing("env/deep/tree.fbx");
    env.scribe(&b, &["edit", "env/deep/tree.fbx"]).ok();
    write(&b, "env/deep/tree.fbx", b"bob's edit");
    env.scribe(&a, &["delete", "env/deep/tree.fbx"]).ok();
    env.scribe(&a, &["submit", "-m", "gone"]).ok();
    env.scribe(&b, &["sync"]).ok();
    let r = env.scribe(&b, &["resolve", "env/deep/tree.fbx", "--theirs"]);
    r.ok();
    // And it names the way back to the kept file.
    assert!(
        r.stdout.contains("yours is in the recovery area: `scribe recovery list`, `scribe recovery restore NAME --to PATH`"),
        "{}",
        r.stdout
    );
    assert!(
        !b.join("env").exists(),
        "the emptied directories are removed"
    );
    let rec = env.scribe(&b, &["recovery", "list", "--json"]);
    assert!(rec.stdout.contains("env/deep/tree.fbx"), "{}", rec.stdout);
}

/// Found by use (session 26): a submit of a file another workspace has
/// locked froze and uploaded every opened file (a whole PSD, say) before
/// the server refused it at acceptance. The submit asks the server for
/// the locks on what it submits first and refuses before uploading
/// anything, naming each file and its holder; the work stays opened, and
/// once the lock is released the same submit goes through.
#[test]
fn a_submit_of_a_file_another_locked_is_refused_before_uploading() {
    let env = Env::new(Transport::Tcp);
    let (a, b) = env.two_sharing("hero.psd");
    env.scribe(&a, &["lock", "hero.psd"]).ok();
    env.scribe(&b, &["edit", "hero.psd"]).ok();
    let v2 = noise(3 << 20, 7);
    write(&b, "hero.psd", &v2);
    let r = env.scribe(&b, &["submit", "-m", "bob's v2"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(
        r.stderr.contains("Error[locked_by_other]")
            && r.stderr.contains("nothing was uploaded")
            && r.stderr.contains("hero.psd (locked by alice")
            && !r.stderr.contains("froze"),
        "{}",
        r.stderr
    );
    assert_eq!(read(&b, "hero.psd"), v2);
    env.scribe(&a, &["unlock", "hero.psd"]).ok();
    env.scribe(&b, &["submit", "-m", "bob's v2"]).ok();
    env.scribe(&a, &["sync"]).ok();
    assert_eq!(read(&a, "hero.psd"), v2);
}

/// Session 26 left it open: the early lock checks of `edit` (and
/// `delete`/`move`, the same check) and of `submit` read one page of the
/// server's locks (4,096), so a lock beyond it went unseen: no warning,
/// and a submit that uploaded everything before the server refused it.
/// With more locks than a page holds, ahead of Bob's file in path order,
/// `edit` warns and `submit` refuses before uploading, naming the file.
#[test]
fn lock_checks_see_locks_beyond_the_first_page() {
    let env = Env::new(Transport::Tcp);
    let (a, b) = env.two_sharing("z/hero.psd");
    let page = 4096;
    let many: Vec<String> = (0..page + 4).map(|i| format!("a/{i:05}.txt")).collect();
    for p in &many {
        write(&a, p, b"x");
    }
    env.scribe(&a, &["add", "a"]).ok();
    for half in many.chunks(many.len() / 2 + 1) {
        let mut args = vec!["lock"];
        args.extend(half.iter().map(|p| p.as_str()));
        env.scribe(&a, &args).ok();
    }
    env.scribe(&a, &["lock", "z/hero.psd"]).ok();
    let l = env.scribe(&b, &["locks", "--json"]);
    assert_eq!(l.stdout.matches("\"state\":\"held\"").count(), page + 5);

    let r = env.scribe(&b, &["edit", "z/hero.psd"]);
    r.ok();
    assert!(
        r.stderr.contains("warning: z/hero.psd is locked by alice"),
        "{}",
        r.stderr
    );
    write(&b, "z/hero.psd", b"bob's v2");
    // More opened files than are looked up one by one: the listing under
    // their common prefix (here the whole repository) is read to its end.
    for i in 0..20 {
        write(&b, &format!("m/{i:02}.txt"), b"m");
    }
    env.scribe(&b, &["add", "m"]).ok();
    let r = env.scribe(&b, &["submit", "-m", "bob's v2"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(
        r.stderr.contains("Error[locked_by_other]")
            && r.stderr.contains("nothing was uploaded")
            && r.stderr.contains("z/hero.psd (locked by alice"),
        "{}",
        r.stderr
    );
}

/// Found by use (session 25): after this workspace's own submit (its
/// watermark stays where it synced), files opened since were deferred as
/// "opened locally; resolve to combine" by a sync over someone else's
/// unrelated change: the plan names every path changed since the
/// watermark, this workspace's own submitted ones too, though their
/// baselines already are those revisions. Nothing to combine: they stay
/// opened, nothing needs resolve, and they submit.
#[test]
fn files_opened_after_your_own_submit_are_not_deferred_by_an_unrelated_change() {
    let env = Env::new(Transport::Tcp);
    let a = env.workspace("alice", &[]);
    write(&a, "a.txt", b"alpha");
    write(&a, "d.txt", b"to delete");
    env.scribe(&a, &["add", "."]).ok();
    env.scribe(&a, &["submit", "-m", "base"]).ok();
    let b = env.workspace("bob", &[]);
    env.scribe(&a, &["edit", "a.txt"]).ok();
    write(&a, "a.txt", b"alpha, edited");
    env.scribe(&a, &["delete", "d.txt"]).ok();
    write(&b, "unrelated.txt", b"bob's");
    env.scribe(&b, &["add", "unrelated.txt"]).ok();
    env.scribe(&b, &["submit", "-m", "unrelated"]).ok();
    let s = env.scribe(&a, &["sync"]);
    s.ok();
    assert!(!s.stdout.contains("resolve"), "{}", s.stdout);
    assert!(s.stderr.contains("0 need resolve"), "{}", s.stderr);
    assert_eq!(read(&a, "unrelated.txt"), b"bob's");
    assert_eq!(read(&a, "a.txt"), b"alpha, edited");
    let st = env.scribe(&a, &["status", "--json"]);
    assert!(st.stdout.contains("\"needs_resolve\":[]"), "{}", st.stdout);
    assert!(
        st.stdout.contains("\"path\":\"a.txt\",\"action\":\"edit\"")
            && st
                .stdout
                .contains("\"path\":\"d.txt\",\"action\":\"delete\""),
        "{}",
        st.stdout
    );
    env.scribe(&a, &["submit", "-m", "edit and delete"]).ok();
    env.scribe(&b, &["sync"]).ok();
    assert_eq!(read(&b, "a.txt"), b"alpha, edited");
    assert!(!b.join("d.txt").exists());
}

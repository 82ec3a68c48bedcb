//! `scribe move`: pending moves in `status`, dependencies refusing abort,
//! abort keeping edits made after the move, chains, exit codes, and a
//! kill -9 at each durable step followed by a rerun or an abort.

use super::support::{read, write, Env, Theirs, Transport};

fn setup(env: &Env) -> std::path::PathBuf {
    let a = env.workspace("alice", &[]);
    write(&a, "old/a.txt", b"alpha");
    write(&a, "old/deep/b.txt", b"beta");
    write(&a, "keep.txt", b"keep");
    env.scribe(&a, &["add", "."]).ok();
    env.scribe(&a, &["submit", "-m", "base"]).ok();
    a
}

#[test]
fn move_abort_dependencies_and_submit() {
    let env = Env::new(Transport::Tcp);
    let a = setup(&env);
    env.scribe(&a, &["move", "old", "new"]).ok();
    env.scribe(&a, &["move", "new/deep", "deeper"]).ok();
    let st = env.scribe(&a, &["status", "--json"]);
    assert_eq!(
        st.stdout.matches("\"state\":\"pending\"").count(),
        2,
        "{}",
        st.stdout
    );
    assert!(
        st.stdout.contains("\"destination\":\"deeper\""),
        "{}",
        st.stdout
    );
    let text = env.scribe(&a, &["status"]);
    assert!(text.stdout.contains("Pending moves"), "{}", text.stdout);
    assert!(text.stdout.contains("old -> new"), "{}", text.stdout);
    // the first move has a dependent: refused, exit 1, named code, hint
    let r = env.scribe(&a, &["move", "--abort", "new"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("Error[move_dependent]"), "{}", r.stderr);
    assert!(r.stderr.contains("Hint: "), "{}", r.stderr);
    // a vacated source is reserved, for moves and adds
    write(&a, "old/again.txt", b"new file in the vacated source");
    let r = env.scribe(&a, &["add", "old/again.txt"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("Error[move_reserved]"), "{}", r.stderr);
    std::fs::remove_dir_all(a.join("old")).unwrap();
    write(&a, "other.txt", b"o");
    env.scribe(&a, &["add", "other.txt"]).ok();
    let r = env.scribe(&a, &["move", "other.txt", "old"]);
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("Error[move_reserved]"), "{}", r.stderr);
    // the newest move aborts by default; edits made after the move stay
    write(&a, "deeper/b.txt", b"beta edited after the move");
    env.scribe(&a, &["move", "--abort"]).ok();
    assert_eq!(read(&a, "new/deep/b.txt"), b"beta edited after the move");
    assert!(!a.join("deeper").exists());
    // now the first aborts too, from a subdirectory, by its destination
    let sub = a.join("new");
    env.scribe(&sub, &["move", "--abort", "."]).ok();
    assert_eq!(read(&a, "old/a.txt"), b"alpha");
    assert_eq!(read(&a, "old/deep/b.txt"), b"beta edited after the move");
    let st = env.scribe(&a, &["status", "--json"]);
    assert!(st.stdout.contains("\"moves\":[]"), "{}", st.stdout);
    assert!(
        st.stdout.contains("\"opened\":[{\"path\":\"other.txt\""),
        "only the unrelated add stays opened: {}",
        st.stdout
    );
    // usage errors exit 2; --help exits 0
    assert_eq!(env.scribe(&a, &["move", "old"]).code, Some(2));
    assert_eq!(
        env.scribe(&a, &["move", "--abort", "x", "--resume"]).code,
        Some(2)
    );
    let h = env.scribe(&a, &["move", "--help"]);
    h.ok();
    assert!(h.stdout.contains("--abort"), "{}", h.stdout);
    // aborting nothing is a named refusal
    let r = env.scribe(&a, &["move", "--abort"]);
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("Error[not_found]"), "{}", r.stderr);
    // a chain a -> b -> c submits as one move from the original source
    env.scribe(&a, &["move", "old", "mid"]).ok();
    env.scribe(&a, &["move", "mid", "final"]).ok();
    env.scribe(&a, &["revert", "other.txt"]).ok();
    let r = env.scribe(&a, &["submit", "-m", "moved"]);
    r.ok();
    let d = env.scribe(&a, &["describe", "2"]);
    assert!(d.stdout.contains("(moved from old/a.txt)"), "{}", d.stdout);
    let st = env.scribe(&a, &["status", "--json"]);
    assert!(
        st.stdout.contains("\"moves\":[]"),
        "submit clears moves: {}",
        st.stdout
    );
    let b = env.workspace("bob", &[]);
    assert_eq!(read(&b, "final/a.txt"), b"alpha");
    assert_eq!(read(&b, "final/deep/b.txt"), b"beta edited after the move");
    assert!(!b.join("old").exists());
}

#[test]
fn move_killed_at_each_step_then_rerun_or_abort() {
    let env = Env::new(Transport::Path);
    let a = setup(&env);
    for point in ["move-after-intent", "move-after-stage", "move-after-place"] {
        for by_abort in [false, true] {
            let r = env.crash(&a, point, &["move", "old", "new/place"]);
            assert!(r.killed, "{point}: {r:?}");
            let st = env.scribe(&a, &["status", "--json"]);
            assert!(
                st.stdout.contains("\"state\":\"interrupted\""),
                "{point}: {}",
                st.stdout
            );
            // it blocks competing workflows
            let r = env.scribe(&a, &["edit", "keep.txt"]);
            assert_eq!(r.code, Some(1), "{point}");
            assert!(r.stderr.contains("Error[move_unfinished]"), "{}", r.stderr);
            let r = env.scribe(&a, &["move", "keep.txt", "k2.txt"]);
            assert!(r.stderr.contains("Error[move_unfinished]"), "{}", r.stderr);
            if by_abort {
                env.scribe(&a, &["move", "--abort"]).ok();
                assert_eq!(read(&a, "old/a.txt"), b"alpha", "{point}");
                assert_eq!(read(&a, "old/deep/b.txt"), b"beta", "{point}");
                assert!(!a.join("new/place").exists(), "{point}");
            } else {
                // the same command finishes it
                env.scribe(&a, &["move", "old", "new/place"]).ok();
                assert_eq!(read(&a, "new/place/a.txt"), b"alpha", "{point}");
                assert_eq!(read(&a, "new/place/deep/b.txt"), b"beta", "{point}");
                let st = env.scribe(&a, &["status", "--json"]);
                assert!(
                    st.stdout.contains("\"moved_from\":\"old/a.txt\""),
                    "{point}: {}",
                    st.stdout
                );
                env.scribe(&a, &["move", "--abort", "new/place"]).ok();
                assert_eq!(read(&a, "old/a.txt"), b"alpha", "{point}");
            }
            let st = env.scribe(&a, &["status", "--json"]);
            assert!(st.stdout.contains("\"moves\":[]"), "{point}: {}", st.stdout);
            assert!(
                st.stdout.contains("\"opened\":[]"),
                "{point}: {}",
                st.stdout
            );
            assert!(
                st.stdout.contains("\"unopened\":[]"),
                "{point}: {}",
                st.stdout
            );
            assert_eq!(
                std::fs::read_dir(a.join(".scribe/_state/staging"))
                    .unwrap()
                    .count(),
                0,
                "{point}"
            );
        }
    }
    // an abort killed part way is finished by --resume
    for point in ["move-abort-after-mark", "move-abort-after-stage"] {
        env.scribe(&a, &["move", "old", "new"]).ok();
        write(&a, "new/a.txt", b"edited");
        let r = env.crash(&a, point, &["move", "--abort"]);
        assert!(r.killed, "{point}: {r:?}");
        let st = env.scribe(&a, &["status", "--json"]);
        assert!(
            st.stdout.contains("\"state\":\"aborting\""),
            "{}",
            st.stdout
        );
        env.scribe(&a, &["move", "--resume"]).ok();
        assert_eq!(read(&a, "old/a.txt"), b"edited", "{point}");
        write(&a, "old/a.txt", b"alpha");
        let st = env.scribe(&a, &["status", "--json"]);
        assert!(st.stdout.contains("\"moves\":[]"), "{point}: {}", st.stdout);
        assert!(
            st.stdout.contains("\"opened\":[]"),
            "{point}: {}",
            st.stdout
        );
    }
}

/// #18 item 13: a file opened for edit moves with its edit (as Perforce
/// allows); the move submits as a move carrying the edited bytes, and an
/// abort gives the edit record back.
#[test]
fn a_file_opened_for_edit_moves_with_its_edit() {
    let env = Env::new(Transport::Tcp);
    let a = setup(&env);
    env.scribe(&a, &["edit", "keep.txt", "old/a.txt"]).ok();
    write(&a, "keep.txt", b"keep, edited");
    write(&a, "old/a.txt", b"alpha, edited");
    // A single edited file, and a directory holding one.
    env.scribe(&a, &["move", "keep.txt", "kept.txt"]).ok();
    env.scribe(&a, &["move", "old", "new"]).ok();
    let st = env.scribe(&a, &["status", "--json"]);
    assert!(
        st.stdout
            .contains("\"path\":\"kept.txt\",\"action\":\"add\""),
        "{}",
        st.stdout
    );
    assert!(
        st.stdout
            .contains("\"path\":\"keep.txt\",\"action\":\"delete\""),
        "{}",
        st.stdout
    );
    // Abort gives the edit back, with the edited bytes in place.
    env.scribe(&a, &["move", "--abort", "kept.txt"]).ok();
    assert_eq!(read(&a, "keep.txt"), b"keep, edited");
    let st = env.scribe(&a, &["status", "--json"]);
    assert!(
        st.stdout
            .contains("\"path\":\"keep.txt\",\"action\":\"edit\""),
        "{}",
        st.stdout
    );
    env.scribe(&a, &["move", "keep.txt", "kept.txt"]).ok();
    env.scribe(&a, &["submit", "-m", "edited and moved"]).ok();
    let d = env.scribe(&a, &["describe", "2"]);
    assert!(d.stdout.contains("(moved from keep.txt)"), "{}", d.stdout);
    assert!(d.stdout.contains("(moved from old/a.txt)"), "{}", d.stdout);
    let b = env.workspace("bob", &[]);
    assert_eq!(read(&b, "kept.txt"), b"keep, edited");
    assert_eq!(read(&b, "new/a.txt"), b"alpha, edited");
    assert_eq!(read(&b, "new/deep/b.txt"), b"beta");
    assert!(!b.join("keep.txt").exists());
    assert!(!b.join("old").exists());
}

/// #18 item 13: reverting either half of a move reverts the pair (the
/// move is aborted and the source reverted); reverting one file of a
/// directory move, or a move a later one depends on, says why not and
/// changes nothing.
#[test]
fn reverting_one_half_of_a_move_reverts_the_pair_or_says_why_not() {
    let env = Env::new(Transport::Tcp);
    let a = setup(&env);
    let clean = |what: &str| {
        let st = env.scribe(&a, &["status", "--json"]);
        assert!(st.stdout.contains("\"moves\":[]"), "{what}: {}", st.stdout);
        assert!(st.stdout.contains("\"opened\":[]"), "{what}: {}", st.stdout);
        assert!(
            st.stdout.contains("\"unopened\":[]"),
            "{what}: {}",
            st.stdout
        );
    };
    // The source half.
    env.scribe(&a, &["move", "keep.txt", "k2.txt"]).ok();
    let r = env.scribe(&a, &["revert", "keep.txt"]);
    r.ok();
    assert!(
        r.stdout.contains("reverted k2.txt (was add)"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("reverted keep.txt (was delete)"),
        "{}",
        r.stdout
    );
    assert_eq!(read(&a, "keep.txt"), b"keep");
    assert!(!a.join("k2.txt").exists());
    clean("source half");
    // The destination half of an edited, moved, edited-again file: the
    // bytes return to the baseline (the edit is kept in the recovery area).
    env.scribe(&a, &["edit", "keep.txt"]).ok();
    write(&a, "keep.txt", b"edited");
    env.scribe(&a, &["move", "keep.txt", "k2.txt"]).ok();
    write(&a, "k2.txt", b"edited again");
    env.scribe(&a, &["revert", "k2.txt"]).ok();
    assert_eq!(read(&a, "keep.txt"), b"keep");
    assert!(!a.join("k2.txt").exists());
    clean("destination half");
    let rec = env.scribe(&a, &["recovery", "list", "--json"]);
    assert!(rec.stdout.contains("keep.txt"), "{}", rec.stdout);
    // One file of a directory move: refused, nothing changes.
    env.scribe(&a, &["move", "old", "new"]).ok();
    let r = env.scribe(&a, &["revert", "new/a.txt"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("Error[move_refused]"), "{}", r.stderr);
    assert!(
        r.stderr.contains("new/deep/b.txt is not named"),
        "{}",
        r.stderr
    );
    assert_eq!(read(&a, "new/a.txt"), b"alpha");
    let st = env.scribe(&a, &["status", "--json"]);
    assert!(st.stdout.contains("\"state\":\"pending\""), "{}", st.stdout);
    assert!(
        st.stdout
            .contains("\"path\":\"new/a.txt\",\"action\":\"add\""),
        "{}",
        st.stdout
    );
    // A move a later one depends on: refused; naming both reverts both.
    env.scribe(&a, &["move", "new", "newer"]).ok();
    let r = env.scribe(&a, &["revert", "old"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("Error[move_dependent]"), "{}", r.stderr);
    assert!(read(&a, "newer/a.txt") == b"alpha");
    env.scribe(&a, &["revert", "newer"]).ok();
    assert_eq!(read(&a, "old/a.txt"), b"alpha");
    assert_eq!(read(&a, "old/deep/b.txt"), b"beta");
    assert!(!a.join("new").exists() && !a.join("newer").exists());
    clean("chain");
}

/// Session 23: files renamed outside Scribe (a case-only rename, and a
/// directory renamed as a file manager does it) reconciled to deletes and
/// adds, cutting their history. `reconcile` now opens them as moves:
/// submit sends the moves, `describe` and `history` show them, and
/// another workspace's sync moves the files.
#[test]
fn files_renamed_outside_scribe_reconcile_to_moves_that_submit_and_sync() {
    let env = Env::new(Transport::Tcp);
    let a = setup(&env);
    let b = env.workspace("bob", &[]);
    std::fs::rename(a.join("keep.txt"), a.join("KEEP.txt")).unwrap();
    let r = env.scribe(&a, &["reconcile", "--json"]);
    r.ok();
    assert!(
        r.stdout
            .contains("\"moved\":[{\"source\":\"keep.txt\",\"destination\":\"KEEP.txt\",\"id\":"),
        "{}",
        r.stdout
    );
    std::fs::rename(a.join("old"), a.join("new")).unwrap();
    let r = env.scribe(&a, &["reconcile"]);
    r.ok();
    assert!(
        r.stdout.contains("move    old/a.txt -> new/a.txt")
            && r.stdout
                .contains("move    old/deep/b.txt -> new/deep/b.txt"),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("delete"), "{}", r.stdout);
    let st = env.scribe(&a, &["status", "--json"]);
    assert!(
        st.stdout
            .contains("\"source\":\"old\",\"destination\":\"new\",\"state\":\"pending\""),
        "one move of the directory: {}",
        st.stdout
    );
    env.scribe(&a, &["submit", "-m", "renamed by hand"]).ok();
    let d = env.scribe(&a, &["describe", "2"]);
    for moved in [
        "(moved from keep.txt)",
        "(moved from old/a.txt)",
        "(moved from old/deep/b.txt)",
    ] {
        assert!(d.stdout.contains(moved), "{moved}: {}", d.stdout);
    }
    let h = env.scribe(&a, &["history", "new/deep/b.txt"]);
    assert!(h.stdout.contains("as old/deep/b.txt"), "{}", h.stdout);
    env.scribe(&b, &["sync"]).ok();
    assert_eq!(read(&b, "KEEP.txt"), b"keep");
    assert_eq!(read(&b, "new/a.txt"), b"alpha");
    assert_eq!(read(&b, "new/deep/b.txt"), b"beta");
    assert!(!b.join("keep.txt").exists());
    assert!(!b.join("old").exists());
}

/// Found by use (session 24): a file another user changed while it sat
/// in a pending move of this workspace comes back from sync as needing
/// resolve at its old path. `--theirs` and `--merged` there used to put
/// a file back at the source the move vacated: neither `move --abort`
/// nor `revert` nor submit worked again. They refuse by name with the
/// way out (abort the move, resolve, move again), which works and
/// submits.
#[test]
fn a_conflict_on_a_moved_files_source_is_settled_by_aborting_the_move_first() {
    let env = Env::new(Transport::Tcp);
    let (a, b) = env.theirs_while_moved(
        "art/hero.psd",
        "chars/hero.psd",
        Theirs::Edit(b"v2 by alice"),
    );

    for how in [&["--theirs"][..], &["--merged", "chars/hero.psd"]] {
        let mut args = vec!["resolve", "art/hero.psd"];
        args.extend_from_slice(how);
        let r = env.scribe(&b, &args);
        assert_eq!(r.code, Some(1), "{how:?} must be refused: {r:?}");
        assert!(r.stderr.contains("Error[move_refused]"), "{}", r.stderr);
        assert!(
            r.stderr.contains("scribe move --abort"),
            "the way out: {}",
            r.stderr
        );
    }
    // Nothing was settled or moved: the move still aborts, then the
    // path resolves and the move is made again and submitted.
    assert!(!b.join("art/hero.psd").exists());
    env.scribe(&b, &["move", "--abort", "chars/hero.psd"]).ok();
    env.scribe(&b, &["resolve", "art/hero.psd", "--theirs"])
        .ok();
    assert_eq!(read(&b, "art/hero.psd"), b"v2 by alice");
    env.scribe(&b, &["move", "art/hero.psd", "chars/hero.psd"])
        .ok();
    env.scribe(&b, &["submit", "-m", "move"]).ok();
    env.scribe(&a, &["sync"]).ok();
    assert_eq!(read(&a, "chars/hero.psd"), b"v2 by alice");
    assert!(!a.join("art/hero.psd").exists());
}

/// Found by use (session 24): `resolve --ours` of a pending move's source
/// the server changed rebased the delete but not the move, so every
/// submit was refused as `malformed` ("moves from X at change 1, but its
/// delete expects base 2", with a hint blaming the network). The move is
/// rebased with it: the submit carries the move over their change.
#[test]
fn ours_on_a_moved_files_source_rebases_the_move_and_submits() {
    let env = Env::new(Transport::Tcp);
    let (a, b) = env.theirs_while_moved(
        "art/hero.psd",
        "chars/hero.psd",
        Theirs::Edit(b"v2 by alice"),
    );
    env.scribe(&b, &["resolve", "art/hero.psd", "--ours"]).ok();
    let r = env.scribe(&b, &["submit", "-m", "move over v2"]);
    r.ok();
    env.scribe(&a, &["sync"]).ok();
    assert_eq!(read(&a, "chars/hero.psd"), b"v1");
    assert!(!a.join("art/hero.psd").exists());
    let h = env.scribe(&a, &["history", "chars/hero.psd"]);
    h.ok();
    assert!(h.stdout.contains("as art/hero.psd"), "{}", h.stdout);
}

/// The server deleted a file this workspace moved away; `resolve --ours`
/// said "removed on both sides; nothing to submit", which left the move
/// nothing to carry and the submit refused (session 25 named the abort
/// as the way out). Session 26: `--ours` keeps the move, the file as a
/// new file at its destination (the server has no source to move it
/// from), and the submit carries it.
#[test]
fn a_move_whose_source_the_server_deleted_is_kept_as_a_new_file_by_ours() {
    let env = Env::new(Transport::Tcp);
    let (a, b) = env.theirs_while_moved("z/y.psd", "w/y.psd", Theirs::Delete);
    let r = env.scribe(&b, &["resolve", "z/y.psd", "--ours"]);
    r.ok();
    assert!(
        r.stdout
            .contains("your move keeps it as a new file at w/y.psd"),
        "{}",
        r.stdout
    );
    env.scribe(&b, &["submit", "-m", "the move"]).ok();
    env.scribe(&a, &["sync"]).ok();
    assert_eq!(read(&a, "w/y.psd"), b"v1");
    assert!(!a.join("z/y.psd").exists());
}

/// Found by use (session 25): artist A moved a directory (pending), B
/// added a file under the old directory and submitted, A synced. `move
/// --abort` was refused ("something new stands at the vacated source")
/// with no way out but deleting B's file by hand. The abort now puts A's
/// files back beside B's; only a real collision (a name equal up to case,
/// or a file where a directory goes back) is refused, naming the path and
/// the way out, with nothing changed. Neither side's bytes are lost.
#[test]
fn aborting_a_directory_move_puts_files_back_beside_a_synced_newcomer() {
    let env = Env::new(Transport::Tcp);
    let a = setup(&env);
    let b = env.workspace("bob", &[]);
    env.scribe(&a, &["move", "old", "new"]).ok();
    write(&a, "new/deep/b.txt", b"beta, edited after the move");
    write(&b, "old/newcomer.txt", b"bob's new file");
    env.scribe(&b, &["add", "old/newcomer.txt"]).ok();
    env.scribe(&b, &["submit", "-m", "newcomer"]).ok();
    let s = env.scribe(&a, &["sync"]);
    s.ok();
    assert_eq!(read(&a, "old/newcomer.txt"), b"bob's new file");
    assert!(
        s.stderr.contains("old/newcomer.txt") && s.stderr.contains("move --abort new"),
        "sync says what arrived in the vacated directory and what to do: {}",
        s.stderr
    );
    env.scribe(&a, &["move", "--abort", "new"]).ok();
    assert_eq!(read(&a, "old/a.txt"), b"alpha");
    assert_eq!(read(&a, "old/deep/b.txt"), b"beta, edited after the move");
    assert_eq!(read(&a, "old/newcomer.txt"), b"bob's new file");
    assert!(!a.join("new").exists());
    let st = env.scribe(&a, &["status", "--json"]);
    assert!(st.stdout.contains("\"moves\":[]"), "{}", st.stdout);
    assert!(
        st.stdout.contains(
            "\"opened\":[],\"unopened\":[{\"path\":\"old/deep/b.txt\",\"kind\":\"modified\"}]"
        ),
        "{}",
        st.stdout
    );
}

/// Session 25 tested an abort's merge-back (files going back beside a
/// synced newcomer, one entry at a time) interrupted only by moving one
/// entry back by hand. A real kill: `scribe move --abort` SIGKILLed after
/// the first and after the second entry went back
/// (`move-abort-merge-entry-N`), then finished by `move --resume` or by
/// `move --abort` again. Everything comes back with its edits, the
/// newcomer stays, the opened add made after the move travels back, and
/// nothing is left under the destination or in the staging area.
#[test]
fn an_abort_killed_between_merged_back_entries_finishes_and_loses_nothing() {
    for (n, finish) in [(1, "--resume"), (2, "--abort")] {
        let env = Env::new(Transport::Path);
        let a = setup(&env);
        let b = env.workspace("bob", &[]);
        env.scribe(&a, &["move", "old", "new"]).ok();
        write(&a, "new/a.txt", b"alpha, edited after the move");
        write(&a, "new/c.txt", b"added after the move");
        env.scribe(&a, &["add", "new/c.txt"]).ok();
        write(&b, "old/newcomer.txt", b"bob's");
        env.scribe(&b, &["add", "old/newcomer.txt"]).ok();
        env.scribe(&b, &["submit", "-m", "newcomer"]).ok();
        env.scribe(&a, &["sync"]).ok();
        let point = format!("move-abort-merge-entry-{n}");
        let r = env.crash(&a, &point, &["move", "--abort", "new"]);
        assert!(r.killed, "{point}: {r:?}");
        // Killed part way: some entries back, the rest still under new.
        let back = ["old/a.txt", "old/c.txt", "old/deep"]
            .iter()
            .filter(|p| a.join(p).exists())
            .count();
        assert_eq!(back, n, "{point}");
        let st = env.scribe(&a, &["status", "--json"]);
        assert!(
            st.stdout.contains("\"state\":\"aborting\""),
            "{point}: {}",
            st.stdout
        );
        env.scribe(&a, &["move", finish]).ok();
        assert_eq!(read(&a, "old/a.txt"), b"alpha, edited after the move");
        assert_eq!(read(&a, "old/deep/b.txt"), b"beta");
        assert_eq!(read(&a, "old/c.txt"), b"added after the move");
        assert_eq!(read(&a, "old/newcomer.txt"), b"bob's");
        assert!(!a.join("new").exists(), "{point}");
        assert_eq!(
            std::fs::read_dir(a.join(".scribe/_state/staging"))
                .unwrap()
                .count(),
            0,
            "{point}"
        );
        let st = env.scribe(&a, &["status", "--json"]);
        assert!(
            st.stdout.contains("\"moves\":[]")
                && st.stdout.contains(
                    "\"opened\":[{\"path\":\"old/c.txt\",\"action\":\"add\",\"needs_reconcile\":false,\"moved_from\":null}]"
                ),
            "{point}: {}",
            st.stdout
        );
        // And it submits: the added file, from its old place.
        env.scribe(&a, &["submit", "-m", "c"]).ok();
        env.scribe(&b, &["sync"]).ok();
        assert_eq!(read(&b, "old/c.txt"), b"added after the move");
    }
}

/// The collision half: a file A added under the destination after the
/// move (it goes back with the abort) and B's new file under the old
/// directory differ only in case. Abort refuses by name with the way out
/// and changes nothing; that way out (submitting the move) keeps both
/// files and says where B's stays.
#[test]
fn aborting_a_directory_move_onto_a_colliding_newcomer_names_it() {
    let env = Env::new(Transport::Tcp);
    let a = setup(&env);
    let b = env.workspace("bob", &[]);
    env.scribe(&a, &["move", "old", "new"]).ok();
    write(&a, "new/c.txt", b"alice's, added after the move");
    env.scribe(&a, &["add", "new/c.txt"]).ok();
    write(&b, "old/C.txt", b"bob's, differs in case");
    env.scribe(&b, &["add", "old/C.txt"]).ok();
    env.scribe(&b, &["submit", "-m", "case"]).ok();
    env.scribe(&a, &["sync"]).ok();
    let r = env.scribe(&a, &["move", "--abort", "new"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("Error[move_refused]"), "{}", r.stderr);
    assert!(
        r.stderr.contains("old/c.txt") && r.stderr.contains("old/C.txt"),
        "names both paths: {}",
        r.stderr
    );
    assert!(
        r.stderr.contains("submit the move instead"),
        "the way out: {}",
        r.stderr
    );
    // Nothing changed.
    assert_eq!(read(&a, "new/a.txt"), b"alpha");
    assert_eq!(read(&a, "new/c.txt"), b"alice's, added after the move");
    assert_eq!(read(&a, "old/C.txt"), b"bob's, differs in case");
    assert!(!a.join("old/a.txt").exists());
    let st = env.scribe(&a, &["status", "--json"]);
    assert!(st.stdout.contains("\"state\":\"pending\""), "{}", st.stdout);
    // The way out: submitting the move says B's file stays.
    let r = env.scribe(&a, &["submit", "-m", "the move"]);
    r.ok();
    assert!(
        r.stderr.contains("old/C.txt") && r.stderr.contains("stay there"),
        "submit says the newcomer stays where it is: {}",
        r.stderr
    );
    env.scribe(&b, &["sync"]).ok();
    assert_eq!(read(&b, "new/a.txt"), b"alpha");
    assert_eq!(read(&b, "new/c.txt"), b"alice's, added after the move");
    assert_eq!(read(&b, "old/C.txt"), b"bob's, differs in case");
    assert!(!b.join("old/a.txt").exists());
}

/// Found by use (session 25): the same with a directory move, aborted
/// after `resolve --ours`: the file whose source the server deleted comes
/// back at its old path as a new file (nothing stands there), beside the
/// move's other file.
#[test]
fn a_directory_move_whose_file_the_server_deleted_can_still_be_aborted() {
    let env = Env::new(Transport::Tcp);
    let (a, b) = env.two_sharing("z/y.psd");
    write(&a, "z/x.psd", b"x");
    env.scribe(&a, &["add", "z/x.psd"]).ok();
    env.scribe(&a, &["submit", "-m", "x"]).ok();
    env.scribe(&b, &["sync"]).ok();
    env.scribe(&b, &["edit", "z/y.psd"]).ok();
    env.scribe(&b, &["move", "z", "w"]).ok();
    env.scribe(&a, &["delete", "z/y.psd"]).ok();
    env.scribe(&a, &["submit", "-m", "gone"]).ok();
    env.scribe(&b, &["sync"]).ok();
    let r = env.scribe(&b, &["resolve", "z/y.psd", "--ours"]);
    r.ok();
    assert!(r.stdout.contains("new file at w/y.psd"), "{}", r.stdout);
    env.scribe(&b, &["move", "--abort", "w"]).ok();
    assert_eq!(read(&b, "z/y.psd"), b"v1");
    assert_eq!(read(&b, "z/x.psd"), b"x");
    assert!(!b.join("w").exists());
    // Back new (its edit record, of a file the server no longer has, is
    // not given back), the other file as it was.
    let st = env.scribe(&b, &["status", "--json"]);
    assert!(
        st.stdout.contains("\"opened\":[]")
            && st
                .stdout
                .contains("{\"path\":\"z/y.psd\",\"kind\":\"new\"}"),
        "{}",
        st.stdout
    );
}

/// B renames one of the files A's pending directory move carries,
/// changing only its case, and submits; A syncs (the moved file's source
/// needs resolve). Session 25 left one way out: `scribe delete` of B's
/// file (`resolve --ours` said "removed on both sides", the submit was
/// refused for a move with nothing to carry, and the abort collided).
/// Session 26: an abort before resolving names `resolve --ours`, which
/// keeps A's move of the file as a new file at its destination; the
/// submit then carries it, leaving B's renamed file where it is.
#[test]
fn a_case_only_rename_by_another_of_a_moved_file_resolves_ours_and_submits() {
    let env = Env::new(Transport::Tcp);
    let a = setup(&env);
    let b = env.workspace("bob", &[]);
    env.scribe(&a, &["move", "old", "new"]).ok();
    env.scribe(&b, &["move", "old/a.txt", "old/A.txt"]).ok();
    env.scribe(&b, &["submit", "-m", "case"]).ok();
    env.scribe(&a, &["sync"]).ok();
    assert_eq!(read(&a, "old/A.txt"), b"alpha");
    let r = env.scribe(&a, &["move", "--abort", "new"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(
        r.stderr.contains("old/a.txt: cannot go back: old/A.txt")
            && r.stderr.contains("`scribe resolve old/a.txt --ours`"),
        "the way out names resolve: {}",
        r.stderr
    );
    let r = env.scribe(&a, &["resolve", "old/a.txt", "--ours"]);
    r.ok();
    assert!(
        r.stdout
            .contains("resolved old/a.txt: the server no longer has it; your move keeps it as a new file at new/a.txt"),
        "{}",
        r.stdout
    );
    let st = env.scribe(&a, &["status", "--json"]);
    assert!(
        st.stdout
            .contains("{\"path\":\"new/a.txt\",\"action\":\"add\",\"needs_reconcile\":true,\"moved_from\":null}"),
        "a new file, no longer moved from the gone source: {}",
        st.stdout
    );
    let r = env.scribe(&a, &["submit", "-m", "the move"]);
    r.ok();
    assert!(
        r.stderr.contains("old/A.txt") && r.stderr.contains("stay there"),
        "{}",
        r.stderr
    );
    env.scribe(&b, &["sync"]).ok();
    assert_eq!(read(&b, "new/a.txt"), b"alpha");
    assert_eq!(read(&b, "new/deep/b.txt"), b"beta");
    assert_eq!(read(&b, "old/A.txt"), b"alpha");
    assert!(!b.join("old/deep").exists());
    let h = env.scribe(&b, &["history", "new/deep/b.txt"]);
    assert!(h.stdout.contains("as old/deep/b.txt"), "{}", h.stdout);
}

/// The same, aborted after `resolve --ours`: A's files go back beside
/// B's renamed one, and A's own copy of the renamed file (edited after the
/// move), which cannot go back beside B's without a case collision, stays
/// at its destination, untracked and named, with its bytes. Nobody's file
/// is deleted; session 25's only way out was `scribe delete` of B's.
#[test]
fn a_case_only_rename_by_another_of_a_moved_file_resolves_ours_and_aborts() {
    let env = Env::new(Transport::Tcp);
    let a = setup(&env);
    let b = env.workspace("bob", &[]);
    env.scribe(&a, &["move", "old", "new"]).ok();
    write(&a, "new/a.txt", b"alpha, edited after the move");
    env.scribe(&b, &["move", "old/a.txt", "old/A.txt"]).ok();
    env.scribe(&b, &["submit", "-m", "case"]).ok();
    env.scribe(&a, &["sync"]).ok();
    env.scribe(&a, &["resolve", "old/a.txt", "--ours"]).ok();
    let r = env.scribe(&a, &["move", "--abort", "new"]);
    r.ok();
    assert!(
        r.stderr.contains("new/a.txt stays where it is") && r.stderr.contains("old/A.txt"),
        "names the file that stayed and why: {}",
        r.stderr
    );
    assert_eq!(read(&a, "old/A.txt"), b"alpha");
    assert_eq!(read(&a, "old/deep/b.txt"), b"beta");
    assert_eq!(read(&a, "new/a.txt"), b"alpha, edited after the move");
    assert!(!a.join("old/a.txt").exists());
    assert!(!a.join("new/deep").exists());
    let st = env.scribe(&a, &["status", "--json"]);
    assert!(st.stdout.contains("\"moves\":[]"), "{}", st.stdout);
    assert!(st.stdout.contains("\"opened\":[]"), "{}", st.stdout);
    assert!(
        st.stdout
            .contains("{\"path\":\"new/a.txt\",\"kind\":\"new\"}"),
        "{}",
        st.stdout
    );
    let rec = env.scribe(&a, &["recovery", "list", "--json"]);
    assert!(!rec.stdout.contains("old/A.txt"), "{}", rec.stdout);
    // Nothing to submit but what A chooses; B's file is untouched.
    env.scribe(&b, &["sync"]).ok();
    assert_eq!(read(&b, "old/A.txt"), b"alpha");
}

/// Session 26 left it open: a chained move (z -> w, then w -> v, both
/// pending) whose original source the server then removed. `resolve
/// --ours` keeps the move as a new file at the chain's end (as for a
/// single move); aborting the chain's end then brought the file back to
/// w opened as an add *moved from z*, which nobody has any more: the
/// submit refused it, and the only way out was aborting back to the old
/// source. The abort now leaves it at w as a new file, as the resolve
/// left the chain's end, and the submit adds it there.
#[test]
fn a_chained_move_whose_source_the_server_deleted_keeps_the_move_when_its_end_is_aborted() {
    let env = Env::new(Transport::Tcp);
    let (a, b) = env.two_sharing("z/y.psd");
    env.scribe(&b, &["move", "z/y.psd", "w/y.psd"]).ok();
    env.scribe(&b, &["move", "w/y.psd", "v/y.psd"]).ok();
    env.scribe(&a, &["delete", "z/y.psd"]).ok();
    env.scribe(&a, &["submit", "-m", "gone"]).ok();
    env.scribe(&b, &["sync"]).ok();
    let r = env.scribe(&b, &["resolve", "z/y.psd", "--ours"]);
    r.ok();
    assert!(
        r.stdout
            .contains("your move keeps it as a new file at v/y.psd"),
        "{r:?}"
    );
    env.scribe(&b, &["move", "--abort", "v/y.psd"]).ok();
    let st = env.scribe(&b, &["status", "--json"]);
    assert!(
        st.stdout.contains(
            "\"opened\":[{\"path\":\"w/y.psd\",\"action\":\"add\",\"needs_reconcile\":true,\
             \"moved_from\":null}]"
        ),
        "{}",
        st.stdout
    );
    let r = env.scribe(&b, &["submit", "-m", "the first move only"]);
    r.ok();
    env.scribe(&a, &["sync"]).ok();
    assert_eq!(read(&a, "w/y.psd"), b"v1");
    assert!(!a.join("z").exists() && !a.join("v").exists());
}

/// Session 26 left it open: a lock did not follow a moved file (a lock on
/// X, a move X -> Y, a submit: the lock stayed on X, where nothing is,
/// with `--keep-locks`, and Y was never locked). As Perforce locks both
/// halves of a moved file: while the move is pending the destination is
/// locked too; an abort gives the destination's lock back; the middle of
/// a chain gives its lock to the chain's end; a submit releases both, or
/// with `--keep-locks` keeps the lock where the file is now, only.
#[test]
fn a_lock_follows_its_moved_file() {
    let env = Env::new(Transport::Tcp);
    let (a, b) = env.two_sharing("hero.psd");
    let holders = |who: &std::path::Path| {
        let l = env.scribe(who, &["locks", "--json"]);
        l.ok();
        let mut held: Vec<String> = l
            .stdout
            .split("{\"path\":\"")
            .skip(1)
            .filter_map(|s| s.split('"').next())
            .map(str::to_string)
            .collect();
        held.sort();
        held
    };
    env.scribe(&a, &["lock", "hero.psd"]).ok();
    let r = env.scribe(&a, &["move", "hero.psd", "art/hero.psd"]);
    r.ok();
    assert!(
        r.stderr
            .contains("locked art/hero.psd: your lock on hero.psd follows the move"),
        "{}",
        r.stderr
    );
    assert_eq!(holders(&b), ["art/hero.psd", "hero.psd"]);
    env.scribe(&a, &["move", "--abort", "art/hero.psd"]).ok();
    assert_eq!(holders(&b), ["hero.psd"]);

    env.scribe(&a, &["move", "hero.psd", "art/hero.psd"]).ok();
    env.scribe(&a, &["move", "art/hero.psd", "art/chars/hero.psd"])
        .ok();
    assert_eq!(holders(&b), ["art/chars/hero.psd", "hero.psd"]);
    env.scribe(&a, &["submit", "--keep-locks", "-m", "hero moves"])
        .ok();
    assert_eq!(holders(&b), ["art/chars/hero.psd"]);
    let st = env.scribe(&a, &["status"]);
    assert!(!st.stdout.contains("broken"), "{}", st.stdout);
    env.scribe(&b, &["sync"]).ok();
    let r = env.scribe(&b, &["edit", "art/chars/hero.psd"]);
    r.ok();
    assert!(
        r.stderr
            .contains("warning: art/chars/hero.psd is locked by alice"),
        "{}",
        r.stderr
    );
    env.scribe(&b, &["revert", "art/chars/hero.psd"]).ok();

    // Without --keep-locks the submit releases both halves.
    env.scribe(&a, &["move", "art/chars/hero.psd", "hero.psd"])
        .ok();
    assert_eq!(holders(&b), ["art/chars/hero.psd", "hero.psd"]);
    env.scribe(&a, &["submit", "-m", "hero back"]).ok();
    assert!(holders(&b).is_empty());
    let l = env.scribe(&a, &["locks", "--json"]);
    assert_eq!(l.stdout.trim(), "[]");
}

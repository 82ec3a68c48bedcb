//! Tests of moves found by `reconcile`: the records are exactly those of
//! `scribe move`, pairing only where unambiguous, never across a refused,
//! ignored or opened path, and within the journal's bounds.

use super::*;
use crate::open;
use crate::records::{Fingerprint, OpenedAction};
use crate::sync::Materializer;
use scribe_format::ErrorCode;
use scribe_format::{FileContentId, ManifestId};
use std::fs;

fn ws_with_view(view: &[&str]) -> (tempfile::TempDir, Workspace) {
    let dir = tempfile::tempdir().unwrap();
    let mut meta = crate::state::tests_meta();
    meta.readonly = false;
    meta.view = view.iter().map(|v| v.to_string()).collect();
    let ws = Workspace::create(dir.path(), &meta).unwrap();
    (dir, ws)
}

fn ws() -> (tempfile::TempDir, Workspace) {
    ws_with_view(&[])
}

/// Tracked files on disk with baselines at change 3.
fn track(ws: &Workspace, files: &[(&str, &[u8])]) {
    let tx = ws.write().unwrap();
    for (p, bytes) in files {
        let full = ws.root().join(p);
        fs::create_dir_all(full.parent().unwrap()).unwrap();
        fs::write(&full, bytes).unwrap();
        tx.put_baseline(
            p,
            &BaselineRecord {
                incarnation: [4; 16],
                manifest: ManifestId::of_payload(bytes),
                content: FileContentId::of(bytes),
                size: bytes.len() as u64,
                mode: 0,
                change: 3,
                fingerprint: Fingerprint::default(),
            },
        )
        .unwrap();
    }
    tx.commit().unwrap();
}

/// `mv FROM TO` as a file manager does it (new parents made).
fn rename(ws: &Workspace, from: &str, to: &str) {
    let to = ws.root().join(to);
    fs::create_dir_all(to.parent().unwrap()).unwrap();
    fs::rename(ws.root().join(from), to).unwrap();
}

fn write(ws: &Workspace, path: &str, bytes: &[u8]) {
    let full = ws.root().join(path);
    fs::create_dir_all(full.parent().unwrap()).unwrap();
    fs::write(full, bytes).unwrap();
}

/// An opened record without its time: path, action, needs reconcile,
/// move source.
type Opened = (String, OpenedAction, bool, Option<(String, u64)>);

fn opened(ws: &Workspace) -> Vec<Opened> {
    ws.read()
        .unwrap()
        .opened_all()
        .unwrap()
        .into_iter()
        .map(|(p, r)| (p, r.action, r.needs_reconcile, r.moved_from))
        .collect()
}

/// Pending moves without their random ids (dependencies as sequences).
fn intents(ws: &Workspace) -> Vec<MoveIntent> {
    let all = moves::pending(ws).unwrap();
    let seq: HashMap<[u8; 16], u64> = all.iter().map(|i| (i.operation.0, i.sequence)).collect();
    all.iter()
        .map(|i| MoveIntent {
            operation: OperationId([0; 16]),
            dependencies: i
                .dependencies
                .iter()
                .map(|d| {
                    let mut b = [0; 16];
                    b[..8].copy_from_slice(&seq[&d.0].to_le_bytes());
                    OperationId(b)
                })
                .collect(),
            ..i.clone()
        })
        .collect()
}

fn pairs(r: &open::OpenReport) -> Vec<(&str, &str)> {
    r.moved
        .iter()
        .map(|m| (m.source.as_str(), m.destination.as_str()))
        .collect()
}

fn actions(r: &open::OpenReport) -> Vec<(&str, OpenedAction)> {
    r.opened.iter().map(|(p, a)| (p.as_str(), *a)).collect()
}

/// Reverts here never need the server's bytes.
struct NoBytes;
impl Materializer for NoBytes {
    fn write_to(
        &self,
        p: &str,
        _t: &BaselineRecord,
        _out: &mut std::fs::File,
    ) -> std::result::Result<(), crate::sync::WriteError> {
        Err(crate::sync::WriteError::new(
            scribe_format::ErrorCode::Internal,
            format!("{p}: no server in this test"),
        ))
    }
}

/// The session-23 finding: a file renamed in a file manager reconciled to
/// a delete and an add, cutting its history. It is now the move `scribe
/// move` records: the same intent and the same opened records, and a
/// revert undoes it like any move (the file back at its old name).
#[test]
fn a_file_renamed_outside_scribe_reconciles_to_the_move_scribe_move_records() {
    let files: &[(&str, &[u8])] = &[
        ("art/hero.psd", b"hero pixels"),
        ("art/other.psd", b"other pixels"),
    ];
    let (_a, by_move) = ws();
    track(&by_move, files);
    moves::move_path(&by_move, "art/hero.psd", "props/hero.psd").unwrap();
    let (_b, by_hand) = ws();
    track(&by_hand, files);
    rename(&by_hand, "art/hero.psd", "props/hero.psd");
    let r = open::reconcile(&by_hand, &[]).unwrap();
    assert_eq!(pairs(&r), vec![("art/hero.psd", "props/hero.psd")]);
    assert!(r.unpaired.is_empty() && r.refused.is_empty(), "{r:?}");
    assert_eq!(
        actions(&r),
        vec![
            ("art/hero.psd", OpenedAction::Delete),
            ("props/hero.psd", OpenedAction::Add)
        ]
    );
    assert_eq!(opened(&by_hand), opened(&by_move));
    assert_eq!(
        opened(&by_hand)[1].3,
        Some(("art/hero.psd".to_string(), 3)),
        "the add carries its move source"
    );
    assert_eq!(intents(&by_hand), intents(&by_move));
    assert_eq!(
        r.moved[0].operation,
        moves::pending(&by_hand).unwrap()[0].operation
    );
    // The files stayed where the user put them.
    assert_eq!(
        fs::read(by_hand.root().join("props/hero.psd")).unwrap(),
        b"hero pixels"
    );
    // A second reconcile finds nothing more.
    let again = open::reconcile(&by_hand, &[]).unwrap();
    assert!(
        again.opened.is_empty() && again.moved.is_empty(),
        "{again:?}"
    );
    // Revert of the destination reverts the pair.
    open::revert(&by_hand, &["props/hero.psd".into()], &NoBytes).unwrap();
    assert_eq!(
        fs::read(by_hand.root().join("art/hero.psd")).unwrap(),
        b"hero pixels"
    );
    assert!(!by_hand.root().join("props").exists());
    assert!(opened(&by_hand).is_empty());
    assert!(moves::pending(&by_hand).unwrap().is_empty());
}

/// A directory renamed or moved by hand is one move of the directory, as
/// `scribe move DIR NEW` records it (the journal holds 1,024 moves, not
/// one per file of a large directory).
#[test]
fn a_directory_moved_outside_scribe_is_one_move_of_the_directory() {
    let files: &[(&str, &[u8])] = &[
        ("levels/one/a.bin", b"level one a"),
        ("levels/one/sub/b.bin", b"level one b"),
        ("levels/two.bin", b"level two"),
    ];
    let (_a, by_move) = ws();
    track(&by_move, files);
    moves::move_path(&by_move, "levels/one", "maps/first").unwrap();
    let (_b, by_hand) = ws();
    track(&by_hand, files);
    rename(&by_hand, "levels/one", "maps/first");
    let r = open::reconcile(&by_hand, &[]).unwrap();
    assert_eq!(
        pairs(&r),
        vec![
            ("levels/one/a.bin", "maps/first/a.bin"),
            ("levels/one/sub/b.bin", "maps/first/sub/b.bin")
        ]
    );
    let found = intents(&by_hand);
    assert_eq!(found.len(), 1);
    assert_eq!(
        (found[0].source.as_str(), found[0].destination.as_str()),
        ("levels/one", "maps/first")
    );
    assert_eq!(found, intents(&by_move));
    assert_eq!(opened(&by_hand), opened(&by_move));
    // The vacated directory is reserved, as after `scribe move`.
    write(&by_hand, "levels/one/new.bin", b"new");
    let r = open::reconcile(&by_hand, &[]).unwrap();
    assert_eq!(r.skipped[0].code, ErrorCode::MoveReserved, "{r:?}");
}

/// A case-only rename is a move too (on a case-sensitive file system; see
/// `something_still_at_the_old_path_never_pairs` for the other kind).
#[test]
fn a_case_only_rename_is_a_move() {
    let (_d, ws) = ws();
    track(
        &ws,
        &[("Art/Hero.PSD", b"hero"), ("Art/Other.psd", b"other")],
    );
    rename(&ws, "Art", "art");
    rename(&ws, "art/Hero.PSD", "art/hero.psd");
    let r = open::reconcile(&ws, &[]).unwrap();
    assert!(r.refused.is_empty() && r.skipped.is_empty(), "{r:?}");
    assert_eq!(
        pairs(&r),
        vec![
            ("Art/Hero.PSD", "art/hero.psd"),
            ("Art/Other.psd", "art/Other.psd")
        ]
    );
    let o = opened(&ws);
    assert!(o.contains(&(
        "art/hero.psd".into(),
        OpenedAction::Add,
        true,
        Some(("Art/Hero.PSD".into(), 3))
    )));
    assert!(o.contains(&("Art/Hero.PSD".into(), OpenedAction::Delete, true, None)));
    // `Art` is not one move of the directory: not every file kept its name.
    assert_eq!(intents(&ws).len(), 2);
}

/// Several missing files with one content pair only by a key naming one
/// file on each side (the path up to case, then the file name); the rest
/// stay a delete and an add, each said with the new candidates.
#[test]
fn files_of_one_content_pair_only_where_unambiguous() {
    let (_d, ws) = ws();
    track(
        &ws,
        &[
            ("a/x.bin", b"same one"),
            ("b/y.bin", b"same one"),
            ("p/one.bin", b"same two"),
            ("q/two.bin", b"same two"),
            ("m/k.bin", b"same three"),
            ("n/l.bin", b"same three"),
        ],
    );
    // by file name into other directories: both pair
    rename(&ws, "a/x.bin", "c/x.bin");
    rename(&ws, "b/y.bin", "d/y.bin");
    // new names for both: nothing tells which went where
    rename(&ws, "p/one.bin", "r/three.bin");
    rename(&ws, "q/two.bin", "s/four.bin");
    // two gone, one new of that content, named as one of them
    rename(&ws, "m/k.bin", "o/k.bin");
    fs::remove_file(ws.root().join("n/l.bin")).unwrap();
    let r = open::reconcile(&ws, &[]).unwrap();
    assert_eq!(
        pairs(&r),
        vec![
            ("a/x.bin", "c/x.bin"),
            ("b/y.bin", "d/y.bin"),
            ("m/k.bin", "o/k.bin")
        ]
    );
    let unpaired: Vec<&str> = r.unpaired.iter().map(|u| u.path.as_str()).collect();
    assert_eq!(unpaired, vec!["n/l.bin", "p/one.bin", "q/two.bin"]);
    assert!(
        r.unpaired[1].detail.contains("r/three.bin, s/four.bin"),
        "{}",
        r.unpaired[1].detail
    );
    let o = opened(&ws);
    for p in ["p/one.bin", "q/two.bin", "n/l.bin"] {
        assert!(
            o.contains(&(p.into(), OpenedAction::Delete, true, None)),
            "{p}"
        );
    }
    for p in ["r/three.bin", "s/four.bin"] {
        assert!(
            o.contains(&(p.into(), OpenedAction::Add, true, None)),
            "{p}"
        );
    }
}

/// A file moved and then edited, one of the same size with other bytes,
/// and an empty file stay a delete and an add (content similarity is out
/// of scope; every empty file has one content).
#[test]
fn a_moved_and_edited_file_stays_a_delete_and_an_add() {
    let (_d, ws) = ws();
    track(
        &ws,
        &[
            ("edited.bin", b"version 1"),
            ("samesize.bin", b"AAAA"),
            ("empty.txt", b""),
        ],
    );
    rename(&ws, "edited.bin", "moved/edited.bin");
    write(&ws, "moved/edited.bin", b"version 1, then edited");
    rename(&ws, "samesize.bin", "moved/samesize.bin");
    write(&ws, "moved/samesize.bin", b"BBBB");
    rename(&ws, "empty.txt", "moved/empty.txt");
    let r = open::reconcile(&ws, &[]).unwrap();
    assert!(r.moved.is_empty() && r.unpaired.is_empty(), "{r:?}");
    assert_eq!(r.opened.len(), 6);
    assert!(moves::pending(&ws).unwrap().is_empty());
    assert!(opened(&ws).iter().all(|o| o.3.is_none()));
}

/// Never across a refused path (outside the view, reserved by a pending
/// move, a case collision), an ignored one (ignore rules apply to
/// untracked files only: the new name is not seen), or an opened one.
#[test]
fn refused_ignored_and_opened_paths_never_pair() {
    let (_d, ws) = ws_with_view(&["in"]);
    track(
        &ws,
        &[
            ("in/view.bin", b"leaves the view"),
            ("in/ignored.bin", b"becomes ignored"),
            ("in/edited.bin", b"opened before"),
            ("in/Top.bin", b"top"),
            ("in/low/t.bin", b"collides"),
            ("in/old/a.bin", b"moved by scribe"),
            ("in/x.bin", b"into a reserved root"),
        ],
    );
    fs::write(ws.root().join(".scribe/_state/ignore"), b"*.tmp\n").unwrap();
    moves::move_path(&ws, "in/old", "in/new").unwrap();
    open::edit(&ws, &["in/edited.bin".into()]).unwrap();
    rename(&ws, "in/view.bin", "out/view.bin");
    rename(&ws, "in/ignored.bin", "in/ignored.tmp");
    rename(&ws, "in/edited.bin", "in/edited2.bin");
    rename(&ws, "in/low/t.bin", "in/top.BIN");
    rename(&ws, "in/x.bin", "in/old/x.bin");
    let r = open::reconcile(&ws, &[]).unwrap();
    assert!(r.moved.is_empty() && r.unpaired.is_empty(), "{r:?}");
    let mut skipped: Vec<(&str, ErrorCode)> = r
        .skipped
        .iter()
        .map(|s| (s.path.as_str(), s.code))
        .collect();
    skipped.sort();
    assert_eq!(
        skipped,
        vec![
            ("in/old/x.bin", ErrorCode::MoveReserved),
            ("in/top.BIN", ErrorCode::PathCollision),
            ("out/view.bin", ErrorCode::NotInView),
        ]
    );
    assert_eq!(
        actions(&r),
        vec![
            ("in/edited2.bin", OpenedAction::Add),
            ("in/ignored.bin", OpenedAction::Delete),
            ("in/low/t.bin", OpenedAction::Delete),
            ("in/view.bin", OpenedAction::Delete),
            ("in/x.bin", OpenedAction::Delete),
        ]
    );
    // The opened ones: the edited file (now missing) and the halves of
    // scribe's own move.
    assert_eq!(
        r.unchanged,
        vec!["in/edited.bin", "in/new/a.bin", "in/old/a.bin"]
    );
    assert_eq!(
        moves::pending(&ws).unwrap().len(),
        1,
        "only scribe's own move"
    );
}

/// A move found beside pending ones takes the next sequence and depends
/// on the older moves it overlaps, so `move --abort` of the older one is
/// refused while it is pending, as after two `scribe move`s.
#[test]
fn a_found_move_depends_on_the_pending_moves_it_overlaps() {
    let (_d, ws) = ws();
    track(
        &ws,
        &[("d/a.bin", b"a"), ("d/b.bin", b"b"), ("e.bin", b"e")],
    );
    let first = moves::move_path(&ws, "d", "z").unwrap();
    rename(&ws, "e.bin", "z/e.bin");
    let r = open::reconcile(&ws, &[]).unwrap();
    assert_eq!(pairs(&r), vec![("e.bin", "z/e.bin")]);
    let all = moves::pending(&ws).unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(all[1].sequence, 2);
    assert_eq!(all[1].dependencies, vec![first.operation]);
    let e = moves::abort(&ws, &first.operation).unwrap_err();
    assert!(
        matches!(
            &e,
            crate::WorkspaceError::Refused {
                code: ErrorCode::MoveDependent,
                ..
            }
        ),
        "{e:?}"
    );
}

/// Something still at the old path (what a case-insensitive file system
/// shows for a case-only rename: the old name reaches the renamed file)
/// never pairs: the move's undo would find both sides present.
#[test]
fn something_still_at_the_old_path_never_pairs() {
    let (_d, ws) = ws();
    track(&ws, &[("a.bin", b"content")]);
    write(&ws, "b.bin", b"content");
    let meta = fs::metadata(ws.root().join("b.bin")).unwrap();
    let b = ScannedFile {
        path: "b.bin".into(),
        fingerprint: crate::records::fingerprint_of(&meta, 0),
        executable: false,
    };
    let found = find(&ws, &["a.bin".into()], &[&b]).unwrap();
    assert!(found.intents.is_empty());
    assert_eq!(found.unpaired.len(), 1);
    assert!(
        found.unpaired[0].detail.contains("still at the old path"),
        "{:?}",
        found.unpaired
    );
    // With the old path gone, the same call pairs them.
    fs::remove_file(ws.root().join("a.bin")).unwrap();
    let found = find(&ws, &["a.bin".into()], &[&b]).unwrap();
    assert_eq!(found.intents.len(), 1);
}

/// The journal holds 1,024 moves: a found move beyond that stays a delete
/// and an add, said so, and the journal stays readable.
#[test]
fn moves_beyond_the_journal_bound_stay_a_delete_and_an_add() {
    let (_d, ws) = ws();
    track(&ws, &[("one.bin", b"first"), ("two.bin", b"second")]);
    let tx = ws.write().unwrap();
    for n in 1..moves::MAX_OPERATIONS as u64 {
        let mut id = [0u8; 16];
        id[..8].copy_from_slice(&n.to_le_bytes());
        let i = MoveIntent {
            operation: OperationId(id),
            sequence: n,
            source: format!("s{n}"),
            destination: format!("d{n}"),
            staged: true,
            complete: true,
            aborting: false,
            dependencies: vec![],
            files: vec![],
        };
        tx.put_workflow(&i.key(), &i.encode()).unwrap();
    }
    tx.commit().unwrap();
    rename(&ws, "one.bin", "moved/one.bin");
    rename(&ws, "two.bin", "moved/two.bin");
    let r = open::reconcile(&ws, &[]).unwrap();
    assert_eq!(pairs(&r), vec![("one.bin", "moved/one.bin")]);
    assert_eq!(r.unpaired.len(), 1, "{r:?}");
    assert_eq!(r.unpaired[0].path, "two.bin");
    assert!(r.unpaired[0].detail.contains("1024 moves are pending"));
    assert_eq!(moves::pending(&ws).unwrap().len(), moves::MAX_OPERATIONS);
    assert!(opened(&ws).contains(&("moved/two.bin".into(), OpenedAction::Add, true, None)));
}

//! Tests of move intents: encoding and its rules, journal rules, bounds,
//! dependencies, reservation, abort restoring exact prior state, chains,
//! and interruption at every durable step.

use super::*;
use crate::records::{BaselineRecord, Fingerprint};
use scribe_format::{FileContentId, ManifestId};

fn ws() -> (tempfile::TempDir, Workspace) {
    let dir = tempfile::tempdir().unwrap();
    let mut meta = crate::state::tests_meta();
    meta.readonly = false;
    let ws = Workspace::create(dir.path(), &meta).unwrap();
    (dir, ws)
}

fn base(bytes: &[u8], change: u64) -> BaselineRecord {
    BaselineRecord {
        incarnation: [4; 16],
        manifest: ManifestId::of_payload(bytes),
        content: FileContentId::of(bytes),
        size: bytes.len() as u64,
        mode: 0,
        change,
        fingerprint: Fingerprint::default(),
    }
}

/// Tracked files on disk with baselines at `change`.
fn track(ws: &Workspace, files: &[(&str, &[u8])], change: u64) {
    let tx = ws.write().unwrap();
    for (p, b) in files {
        let full = ws.root().join(p);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(&full, b).unwrap();
        tx.put_baseline(p, &base(b, change)).unwrap();
    }
    tx.commit().unwrap();
}

fn add(ws: &Workspace, path: &str, bytes: &[u8]) {
    let full = ws.root().join(path);
    std::fs::create_dir_all(full.parent().unwrap()).unwrap();
    std::fs::write(&full, bytes).unwrap();
    let tx = ws.write().unwrap();
    tx.put_opened(
        path,
        &OpenedRecord {
            action: OpenedAction::Add,
            opened_ms: 11,
            needs_reconcile: false,
            moved_from: None,
        },
    )
    .unwrap();
    tx.commit().unwrap();
}

fn opened(ws: &Workspace) -> Vec<(String, OpenedRecord)> {
    ws.read().unwrap().opened_all().unwrap()
}

fn code(e: WorkspaceError) -> &'static str {
    match e {
        WorkspaceError::Refused { code, .. } => code.name(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn sample() -> MoveIntent {
    MoveIntent {
        operation: OperationId([1; 16]),
        sequence: 2,
        source: "a".into(),
        destination: "b".into(),
        staged: true,
        complete: false,
        aborting: false,
        dependencies: vec![OperationId([3; 16])],
        files: vec![
            MovedFile {
                physical_source: "a/x".into(),
                destination: "b/x".into(),
                original_source: "old/x".into(),
                original_change: 4,
                prior: Some(OpenedRecord {
                    action: OpenedAction::Add,
                    opened_ms: 5,
                    needs_reconcile: true,
                    moved_from: Some(("old/x".into(), 4)),
                }),
            },
            MovedFile {
                physical_source: "a/y".into(),
                destination: "b/y".into(),
                original_source: "a/y".into(),
                original_change: 7,
                prior: None,
            },
        ],
    }
}

#[test]
fn intent_round_trips_and_refuses_truncation_and_broken_rules() {
    let i = sample();
    let b = i.encode();
    assert_eq!(MoveIntent::decode(&b).unwrap(), i);
    for cut in 0..b.len() {
        assert!(MoveIntent::decode(&b[..cut]).is_err(), "cut {cut}");
    }
    let mut long = b.clone();
    long.push(0);
    assert!(MoveIntent::decode(&long).is_err(), "trailing byte");
    // flags are strictly 0/1: staged is right after the two paths
    let flag_at = 1 + 16 + 8 + 2 + 1 + 2 + 1;
    assert_eq!(b[flag_at], 1);
    let mut bad = b.clone();
    bad[flag_at] = 2;
    assert!(MoveIntent::decode(&bad).is_err());
    // each broken rule is refused
    let mut broken: Vec<(&str, MoveIntent)> = Vec::new();
    let mut x = sample();
    x.files[1].destination = "b/other".into();
    broken.push(("substitution", x));
    let mut x = sample();
    x.files[0].prior.as_mut().unwrap().action = OpenedAction::Edit;
    broken.push(("prior edit", x));
    let mut x = sample();
    x.files[0].original_change = 5;
    broken.push(("prior carries another revision", x));
    let mut x = sample();
    x.files[1].original_source = "elsewhere".into();
    broken.push(("original without prior", x));
    let mut x = sample();
    x.dependencies.push(OperationId([3; 16]));
    broken.push(("duplicate dependency", x));
    let mut x = sample();
    x.dependencies.push(x.operation);
    broken.push(("self dependency", x));
    let mut x = sample();
    x.destination = "a/inner".into();
    broken.push(("overlap", x));
    let mut x = sample();
    x.sequence = 0;
    broken.push(("sequence 0", x));
    for (what, x) in broken {
        assert!(MoveIntent::decode(&x.encode()).is_err(), "{what}");
    }
    // unsorted files: encode sorts, so write them out of order by hand
    let mut x = sample();
    x.files.swap(0, 1);
    let enc = x.encode();
    let mut swapped = MoveIntent::decode(&enc).unwrap();
    assert_eq!(swapped.files[0].destination, "b/x", "encode sorts");
    swapped.files.swap(0, 1);
    assert!(swapped.check().is_err(), "unsorted files are refused");
}

#[test]
fn journal_rules() {
    let one = |op: u8, seq: u64, deps: Vec<u8>, complete: bool| {
        let mut i = sample();
        i.operation = OperationId([op; 16]);
        i.sequence = seq;
        i.complete = complete;
        i.source = format!("s{op}");
        i.destination = format!("d{op}");
        i.files = vec![MovedFile {
            physical_source: format!("s{op}/f"),
            destination: format!("d{op}/f"),
            original_source: format!("s{op}/f"),
            original_change: 1,
            prior: None,
        }];
        i.dependencies = deps.into_iter().map(|d| OperationId([d; 16])).collect();
        (i.key(), i.encode())
    };
    let ok = vec![one(1, 1, vec![], true), one(2, 2, vec![1], false)];
    let loaded = check_journal(&ok).unwrap();
    assert_eq!(loaded.len(), 2);
    assert_eq!(loaded[1].dependencies, vec![OperationId([1; 16])]);
    type Records = Vec<(String, Vec<u8>)>;
    let cases: Vec<(&str, Records)> = vec![
        (
            "key mismatch",
            vec![("move/00".into(), one(1, 1, vec![], true).1)],
        ),
        (
            "dependency forward",
            vec![one(1, 1, vec![2], true), one(2, 2, vec![], true)],
        ),
        ("dependency missing", vec![one(1, 1, vec![9], true)]),
        (
            "duplicate sequence",
            vec![one(1, 1, vec![], true), one(2, 1, vec![], true)],
        ),
        (
            "two interrupted",
            vec![one(1, 1, vec![], false), one(2, 2, vec![], false)],
        ),
        (
            "over 32 MiB",
            vec![
                ("move/a".into(), vec![0; 17 << 20]),
                ("move/b".into(), vec![0; 17 << 20]),
            ],
        ),
    ];
    for (what, records) in cases {
        assert!(
            matches!(check_journal(&records), Err(WorkspaceError::Corrupt { .. })),
            "{what}"
        );
    }
}

#[test]
fn move_directory_opens_pairs_and_renames() {
    let (_d, ws) = ws();
    track(&ws, &[("old/sub/f", b"x")], 3);
    let i = move_path(&ws, "old", "new/place").unwrap();
    assert!(i.complete && i.staged && !i.aborting);
    assert_eq!(i.sequence, 1);
    assert_eq!(
        std::fs::read(ws.root().join("new/place/sub/f")).unwrap(),
        b"x"
    );
    assert!(!ws.root().join("old").exists());
    let r = ws.read().unwrap();
    assert_eq!(
        r.opened("old/sub/f").unwrap().unwrap().action,
        OpenedAction::Delete
    );
    let dst = r.opened("new/place/sub/f").unwrap().unwrap();
    assert_eq!(dst.action, OpenedAction::Add);
    assert_eq!(dst.moved_from, Some(("old/sub/f".into(), 3)));
    drop(r);
    assert_eq!(
        code(move_path(&ws, "new", "new/inner").unwrap_err()),
        "refused"
    );
    assert!(!ws
        .state_dir()
        .join("staging")
        .join(format!("move-{}", i.operation.to_hex()))
        .exists());
}

#[test]
fn sequences_dependencies_and_reserved_sources() {
    let (_d, ws) = ws();
    track(
        &ws,
        &[
            ("a/x", b"ax"),
            ("a/y", b"ay"),
            ("c/z", b"cz"),
            ("q/w", b"qw"),
        ],
        2,
    );
    let m1 = move_path(&ws, "a", "b").unwrap();
    let m2 = move_path(&ws, "c", "d").unwrap();
    let m3 = move_path(&ws, "b/x", "e/x").unwrap();
    let m4 = move_path(&ws, "e", "f").unwrap();
    assert_eq!(
        [m1.sequence, m2.sequence, m3.sequence, m4.sequence],
        [1, 2, 3, 4]
    );
    assert!(m1.dependencies.is_empty() && m2.dependencies.is_empty());
    assert_eq!(
        m3.dependencies,
        vec![m1.operation],
        "b/x is inside m1's destination"
    );
    assert_eq!(
        m4.dependencies,
        vec![m3.operation],
        "e holds m3's destination"
    );
    // m3's file keeps its original accepted source through the chain
    let f = ws.read().unwrap().opened("f/x").unwrap().unwrap();
    assert_eq!(f.moved_from, Some(("a/x".into(), 2)));
    // vacated sources are reserved
    for dst in ["a", "a/new", "c", "b/x"] {
        assert_eq!(
            code(move_path(&ws, "q", dst).unwrap_err()),
            "move_reserved",
            "{dst}"
        );
    }
    // abort is refused while a later move depends on the intent
    for m in [&m1, &m3] {
        assert_eq!(
            code(abort(&ws, &m.operation).unwrap_err()),
            "move_dependent"
        );
    }
    assert_eq!(pending(&ws).unwrap().len(), 4);
    // an independent move aborts on its own; the greatest sequence goes on
    abort(&ws, &m2.operation).unwrap();
    assert_eq!(std::fs::read(ws.root().join("c/z")).unwrap(), b"cz");
    let m5 = move_path(&ws, "q", "r").unwrap();
    assert_eq!(m5.sequence, 5);
    // unwinding newest first restores everything
    for m in [&m5, &m4, &m3, &m1] {
        abort(&ws, &m.operation).unwrap();
    }
    assert!(pending(&ws).unwrap().is_empty());
    assert!(opened(&ws).is_empty(), "{:?}", opened(&ws));
    for (p, b) in [
        ("a/x", b"ax"),
        ("a/y", b"ay"),
        ("c/z", b"cz"),
        ("q/w", b"qw"),
    ] {
        assert_eq!(std::fs::read(ws.root().join(p)).unwrap(), b, "{p}");
    }
    for gone in ["b", "d", "e", "f", "r"] {
        assert!(!ws.root().join(gone).exists(), "{gone}");
    }
}

#[test]
fn abort_restores_exact_prior_state_and_keeps_edits() {
    let (_d, ws) = ws();
    track(&ws, &[("a/x", b"x"), ("a/y", b"y"), ("keep/k", b"k")], 3);
    add(&ws, "a/new", b"brand new");
    // an opened record elsewhere with the reconcile flag set
    let tx = ws.write().unwrap();
    tx.put_opened(
        "keep/k",
        &OpenedRecord {
            action: OpenedAction::Delete,
            opened_ms: 9,
            needs_reconcile: true,
            moved_from: None,
        },
    )
    .unwrap();
    tx.commit().unwrap();
    let before = opened(&ws);
    let m = move_path(&ws, "a", "b").unwrap();
    assert_eq!(m.files.len(), 3);
    assert_ne!(opened(&ws), before);
    // work after the move: edits and a new file under the destination
    std::fs::write(ws.root().join("b/x"), b"edited after the move").unwrap();
    add(&ws, "b/later", b"added after the move");
    let m = select(&ws, Some("b")).unwrap();
    abort(&ws, &m.operation).unwrap();
    assert_eq!(
        std::fs::read(ws.root().join("a/x")).unwrap(),
        b"edited after the move",
        "current contents are retained"
    );
    assert_eq!(std::fs::read(ws.root().join("a/y")).unwrap(), b"y");
    assert_eq!(
        std::fs::read(ws.root().join("a/new")).unwrap(),
        b"brand new"
    );
    assert!(!ws.root().join("b").exists());
    let mut expected = before.clone();
    let later = opened(&ws)
        .into_iter()
        .find(|(p, _)| p == "a/later")
        .expect("the later add travels back with its file");
    expected.push(later);
    expected.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        opened(&ws),
        expected,
        "prior opened records are restored exactly"
    );
    assert!(pending(&ws).unwrap().is_empty());
    assert!(crate::recovery::list(ws.root()).unwrap().is_empty());
    assert_eq!(code(select(&ws, None).unwrap_err()), "not_found");
}

#[test]
fn chain_composes_and_unwinds() {
    let (_d, ws) = ws();
    track(&ws, &[("a/x", b"x")], 3);
    let m1 = move_path(&ws, "a", "b").unwrap();
    let m2 = move_path(&ws, "b", "c").unwrap();
    assert_eq!(m2.dependencies, vec![m1.operation]);
    assert_eq!(m2.files[0].original_source, "a/x");
    assert!(m2.files[0].prior.is_some(), "b/x's add is the prior record");
    let o = opened(&ws);
    let names: Vec<&str> = o.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        names,
        vec!["a/x", "c/x"],
        "the intermediate path is not opened"
    );
    assert_eq!(o[0].1.action, OpenedAction::Delete);
    assert_eq!(o[1].1.moved_from, Some(("a/x".into(), 3)));
    abort(&ws, &m2.operation).unwrap();
    let b = ws.read().unwrap().opened("b/x").unwrap().unwrap();
    assert_eq!(b.moved_from, Some(("a/x".into(), 3)));
    assert_eq!(std::fs::read(ws.root().join("b/x")).unwrap(), b"x");
    abort(&ws, &m1.operation).unwrap();
    assert!(opened(&ws).is_empty());
    assert_eq!(std::fs::read(ws.root().join("a/x")).unwrap(), b"x");
}

#[test]
fn refusals_change_nothing() {
    let (_d, ws) = ws();
    track(&ws, &[("a/x", b"x"), ("t/y", b"y")], 1);
    let tx = ws.write().unwrap();
    tx.put_opened(
        "t/y",
        &OpenedRecord {
            action: OpenedAction::Keep,
            opened_ms: 1,
            needs_reconcile: false,
            moved_from: None,
        },
    )
    .unwrap();
    tx.commit().unwrap();
    std::fs::create_dir_all(ws.root().join("taken")).unwrap();
    let before = opened(&ws);
    assert_eq!(code(move_path(&ws, "t", "u").unwrap_err()), "move_refused");
    assert_eq!(
        code(move_path(&ws, "a", "taken").unwrap_err()),
        "already_exists"
    );
    assert_eq!(
        code(move_path(&ws, "nothing", "n").unwrap_err()),
        "not_present"
    );
    assert_eq!(
        code(move_path(&ws, "a/x", "T/y").unwrap_err()),
        "path_collision"
    );
    std::fs::remove_file(ws.root().join("a/x")).unwrap();
    assert_eq!(code(move_path(&ws, "a", "b").unwrap_err()), "not_found");
    assert_eq!(opened(&ws), before);
    assert!(pending(&ws).unwrap().is_empty());
}

#[test]
fn bounds_on_tracked_files_entries_and_operations() {
    let (_d, ws) = ws();
    // 50,001 tracked files under one root (baselines only: the count is
    // checked before the disk is touched).
    {
        let tx = ws.write().unwrap();
        for i in 0..=MAX_TRACKED {
            tx.put_baseline(&format!("big/f{i:06}"), &base(b"b", 1))
                .unwrap();
        }
        tx.commit().unwrap();
    }
    assert_eq!(
        code(move_path(&ws, "big", "huge").unwrap_err()),
        "limit_exceeded"
    );
    // the entry count stops early once the bound is passed
    let dir = ws.root().join("many");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    for i in 0..10 {
        std::fs::write(dir.join(format!("sub/{i}")), b"").unwrap();
    }
    assert_eq!(count_entries(&dir, 100).unwrap(), 12);
    assert_eq!(count_entries(&dir, 5).unwrap(), 6);
    // 1,024 pending operations refuse the next one
    track(&ws, &[("one/f", b"1")], 1);
    {
        let tx = ws.write().unwrap();
        for n in 0..MAX_OPERATIONS as u64 {
            let mut op = [0u8; 16];
            op[..8].copy_from_slice(&n.to_le_bytes());
            op[15] = 0xee;
            let i = MoveIntent {
                operation: OperationId(op),
                sequence: n + 1,
                source: format!("gone{n}"),
                destination: format!("went{n}"),
                staged: true,
                complete: true,
                aborting: false,
                dependencies: vec![],
                files: vec![],
            };
            tx.put_workflow(&i.key(), &i.encode()).unwrap();
        }
        tx.commit().unwrap();
    }
    assert_eq!(pending(&ws).unwrap().len(), MAX_OPERATIONS);
    assert_eq!(
        code(move_path(&ws, "one", "two").unwrap_err()),
        "limit_exceeded"
    );
}

/// A hook that "kills" the move at one named point (by unwinding).
struct KillAt(&'static str);
impl MoveHooks for KillAt {
    fn point(&self, name: &str) {
        if name == self.0 {
            panic!("killed at {name}");
        }
    }
}

fn killed(f: impl FnOnce()) {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(hook);
    assert!(r.is_err(), "the hook fired");
}

#[test]
fn interrupted_moves_resume_or_abort_without_loss() {
    for point in ["move-after-intent", "move-after-stage", "move-after-place"] {
        for finish_by_abort in [false, true] {
            let (_d, ws) = ws();
            track(&ws, &[("a/x", b"x"), ("a/deep/y", b"y"), ("q/z", b"z")], 2);
            add(&ws, "a/new", b"n");
            let before = opened(&ws);
            killed(|| {
                move_path_with(&ws, "a", "b/c", &KillAt(point)).unwrap();
            });
            let i = interrupted(&ws).unwrap().expect("one interrupted move");
            assert_eq!(i.state_name(), "interrupted", "{point}");
            assert_eq!(opened(&ws), before, "{point}: opened state changes last");
            // it blocks competing moves
            assert_eq!(
                code(move_path(&ws, "q", "r").unwrap_err()),
                "move_unfinished",
                "{point}"
            );
            assert!(refuse_if_interrupted(&ws).is_err());
            if finish_by_abort {
                abort(&ws, &i.operation).unwrap();
                assert_eq!(opened(&ws), before, "{point}");
                assert_eq!(std::fs::read(ws.root().join("a/deep/y")).unwrap(), b"y");
                assert_eq!(std::fs::read(ws.root().join("a/new")).unwrap(), b"n");
                assert!(!ws.root().join("b/c").exists(), "{point}");
                assert!(pending(&ws).unwrap().is_empty());
            } else {
                let done = resume(&ws).unwrap().unwrap();
                assert!(done.complete, "{point}");
                assert_eq!(std::fs::read(ws.root().join("b/c/deep/y")).unwrap(), b"y");
                assert_eq!(std::fs::read(ws.root().join("b/c/new")).unwrap(), b"n");
                assert!(!ws.root().join("a").exists());
                let o = ws.read().unwrap().opened("b/c/x").unwrap().unwrap();
                assert_eq!(o.moved_from, Some(("a/x".into(), 2)));
                assert!(ws.read().unwrap().opened("a/new").unwrap().is_none());
            }
            let staging = std::fs::read_dir(ws.state_dir().join("staging"))
                .unwrap()
                .count();
            assert_eq!(staging, 0, "{point}: staging is empty");
            assert!(interrupted(&ws).unwrap().is_none());
        }
    }
}

#[test]
fn interrupted_abort_resumes() {
    for point in ["move-abort-after-mark", "move-abort-after-stage"] {
        let (_d, ws) = ws();
        track(&ws, &[("a/x", b"x")], 2);
        let before = opened(&ws);
        let m = move_path(&ws, "a", "b").unwrap();
        std::fs::write(ws.root().join("b/x"), b"edited").unwrap();
        killed(|| {
            abort_with(&ws, &m.operation, &KillAt(point)).unwrap();
        });
        let i = interrupted(&ws).unwrap().unwrap();
        assert_eq!(i.state_name(), "aborting", "{point}");
        assert_eq!(
            code(move_path(&ws, "a", "z").unwrap_err()),
            "move_unfinished"
        );
        resume(&ws).unwrap();
        assert_eq!(opened(&ws), before, "{point}");
        assert_eq!(std::fs::read(ws.root().join("a/x")).unwrap(), b"edited");
        assert!(pending(&ws).unwrap().is_empty());
    }
}

#[test]
fn adding_a_directory_skips_new_files_under_a_vacated_source() {
    // No view: `add` refuses paths outside one (#18 item 10).
    let dir = tempfile::tempdir().unwrap();
    let mut meta = crate::state::tests_meta();
    meta.readonly = false;
    meta.view = Vec::new();
    let (_d, ws) = (&dir, Workspace::create(dir.path(), &meta).unwrap());
    track(&ws, &[("a/x", b"x")], 1);
    move_path(&ws, "a", "b").unwrap();
    // new files appear at the vacated source and elsewhere
    std::fs::create_dir_all(ws.root().join("a")).unwrap();
    std::fs::write(ws.root().join("a/new"), b"n").unwrap();
    std::fs::write(ws.root().join("c"), b"c").unwrap();
    let r = crate::open::reconcile(&ws, &[String::new()]).unwrap();
    let refused: Vec<(&str, &str)> = r
        .skipped
        .iter()
        .map(|f| (f.path.as_str(), f.code.name()))
        .collect();
    assert_eq!(refused, vec![("a/new", "move_reserved")], "reconcile");
    assert!(ws.read().unwrap().opened("a/new").unwrap().is_none());
    let r = crate::open::add(&ws, &[String::new()]).unwrap();
    let refused: Vec<(&str, &str)> = r
        .skipped
        .iter()
        .map(|f| (f.path.as_str(), f.code.name()))
        .collect();
    assert_eq!(refused, vec![("a/new", "move_reserved")]);
    let o = ws.read().unwrap();
    assert!(o.opened("a/new").unwrap().is_none(), "not opened");
    assert_eq!(
        o.opened("c").unwrap().map(|r| r.action),
        Some(OpenedAction::Add)
    );
    drop(o);
    // with the vacated source cleared the abort renames the directory back
    // whole; afterwards the path is free
    std::fs::remove_file(ws.root().join("a/new")).unwrap();
    std::fs::remove_dir(ws.root().join("a")).unwrap();
    let m = pending(&ws).unwrap().pop().unwrap();
    abort(&ws, &m.operation).unwrap();
    std::fs::write(ws.root().join("a/new"), b"n").unwrap();
    let r = crate::open::add(&ws, &[String::new()]).unwrap();
    assert!(r.refused.is_empty(), "nothing reserved after the abort");
    assert!(ws.read().unwrap().opened("a/new").unwrap().is_some());
}

/// Session 25: what a sync brought to a vacated source stays; the abort
/// puts the moved files back beside it one entry at a time, refuses a
/// collision (on disk or by name) with nothing changed, and an abort
/// killed part way through is finished by `resume` from wherever each
/// file is.
#[test]
fn abort_merges_back_beside_newcomers_and_resumes_part_way() {
    let (_d, ws) = ws();
    track(&ws, &[("a/x", b"x"), ("a/deep/y", b"y")], 2);
    let before = opened(&ws);
    let m = move_path(&ws, "a", "b").unwrap();
    std::fs::write(ws.root().join("b/deep/y"), b"y edited").unwrap();
    // A sync brings another user's a/deep/n and a/N.
    track(&ws, &[("a/deep/n", b"theirs"), ("a/X", b"case")], 3);
    // By name: a/X differs only in case from a/x going back.
    let e = abort(&ws, &m.operation).unwrap_err();
    assert!(e.to_string().contains("a/X"), "{e}");
    assert_eq!(code(e), "move_refused");
    // On disk: something untracked where b/deep/y goes back.
    {
        let tx = ws.write().unwrap();
        tx.remove_baseline("a/X").unwrap();
        tx.commit().unwrap();
    }
    std::fs::remove_file(ws.root().join("a/X")).unwrap();
    std::fs::write(ws.root().join("a/deep/y"), b"stray").unwrap();
    let e = abort(&ws, &m.operation).unwrap_err();
    assert!(e.to_string().starts_with("a/deep/y: "), "{e}");
    assert_eq!(code(e), "move_refused");
    assert_eq!(
        std::fs::read(ws.root().join("b/deep/y")).unwrap(),
        b"y edited"
    );
    assert_eq!(pending(&ws).unwrap()[0].state_name(), "pending");
    std::fs::remove_file(ws.root().join("a/deep/y")).unwrap();
    // Killed part way: the intent is aborting and b/x already went back.
    let mut i = pending(&ws).unwrap().remove(0);
    i.aborting = true;
    record(&ws, &i).unwrap();
    std::fs::rename(ws.root().join("b/x"), ws.root().join("a/x")).unwrap();
    let done = resume(&ws).unwrap().unwrap();
    assert!(done.aborting);
    assert_eq!(std::fs::read(ws.root().join("a/x")).unwrap(), b"x");
    assert_eq!(
        std::fs::read(ws.root().join("a/deep/y")).unwrap(),
        b"y edited"
    );
    assert_eq!(
        std::fs::read(ws.root().join("a/deep/n")).unwrap(),
        b"theirs"
    );
    assert!(!ws.root().join("b").exists());
    assert_eq!(opened(&ws), before);
    assert!(pending(&ws).unwrap().is_empty());
}

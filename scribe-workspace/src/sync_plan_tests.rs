//! Planning against the `last-submit` receipt: which deltas a sync uses,
//! when the receipt is a local pin, and a backward sync to the watermark
//! that really reverts the paths submitted after it.

use std::collections::HashMap;

use super::*;
use crate::records::{Fingerprint, OpenedAction, OpenedRecord, PendingSubmit};
use crate::submit::{finalize, last_submit, LastSubmit};
use scribe_format::changeset::{ChangeSet, Entry, FileState, Mode};
use scribe_format::{BranchId, FileContentId, ManifestId, OperationId};

struct Memory(HashMap<FileContentId, Vec<u8>>);

impl Materializer for Memory {
    fn write_to(
        &self,
        _path: &str,
        t: &BaselineRecord,
        out: &mut std::fs::File,
    ) -> std::result::Result<(), crate::sync::WriteError> {
        let bytes = self.0.get(&t.content).ok_or_else(|| {
            crate::sync::WriteError::new(scribe_format::ErrorCode::NotFound, "unknown content")
        })?;
        std::io::Write::write_all(out, bytes)
            .map_err(|e| crate::sync::WriteError::io("writing", &e))
    }
}

fn state(b: &[u8]) -> FileState {
    FileState {
        manifest: ManifestId::of_payload(b),
        content: FileContentId::of(b),
        size: b.len() as u64,
        mode: Mode::Regular,
    }
}

fn target(b: &[u8], change: u64) -> BaselineRecord {
    BaselineRecord {
        incarnation: [4; 16],
        manifest: ManifestId::of_payload(b),
        content: FileContentId::of(b),
        size: b.len() as u64,
        mode: 0,
        change,
        fingerprint: Fingerprint::default(),
    }
}

#[test]
fn ranges() {
    let r = |synced, pin, t| plan_ranges(synced, pin, t);
    let fwd = |a, b| PlanRanges {
        forward: Some((a, b)),
        restat: None,
    };
    let back = |a, b| PlanRanges {
        forward: None,
        restat: Some((a, b)),
    };
    // head: always the forward delta (the head is never behind a receipt)
    assert_eq!(r(5, Some(6), None), fwd(5, 0));
    assert_eq!(r(5, None, None), fwd(5, 0));
    // the target equals the watermark: nothing without a pin, the receipt's
    // paths with one
    assert_eq!(r(5, None, Some(5)), PlanRanges::default());
    assert_eq!(r(5, Some(6), Some(5)), back(5, 6));
    // older than the watermark
    assert_eq!(r(5, None, Some(3)), back(3, 5));
    assert_eq!(r(5, Some(8), Some(3)), back(3, 8));
    // between the watermark and the receipt: forward to the target, and
    // the receipt's newer paths back to it
    assert_eq!(
        r(5, Some(8), Some(6)),
        PlanRanges {
            forward: Some((5, 6)),
            restat: Some((6, 8)),
        }
    );
    // at or beyond the receipt: an ordinary forward sync
    assert_eq!(r(5, Some(8), Some(8)), fwd(5, 8));
    assert_eq!(r(5, Some(8), Some(9)), fwd(5, 9));
    // a stale pin (not newer than the watermark) changes nothing
    assert_eq!(r(5, Some(4), Some(5)), PlanRanges::default());
}

/// Sync to 5, submit 6, sync 5 again: the paths of 6 go back to their
/// state in 5 (the replaced bytes kept in the recovery area), local work
/// elsewhere is untouched, and the receipt goes with the watermark.
#[test]
fn backward_sync_to_the_watermark_reverts_the_receipts_paths() {
    let dir = tempfile::tempdir().unwrap();
    let mut meta = crate::state::tests_meta();
    meta.readonly = false;
    let ws = Workspace::create(dir.path(), &meta).unwrap();
    let contents: Vec<&[u8]> = vec![b"a5", b"b5", b"a6", b"c6", b"x5"];
    let mem = Memory(
        contents
            .iter()
            .map(|b| (FileContentId::of(b), b.to_vec()))
            .collect(),
    );
    // the server's history, as the deltas and stats would report it
    let tree5: Vec<(&str, Option<BaselineRecord>)> = vec![
        ("a", Some(target(b"a5", 5))),
        ("b", Some(target(b"b5", 4))),
        ("x", Some(target(b"x5", 2))),
    ];
    begin(
        &ws,
        5,
        &tree5
            .iter()
            .map(|(p, t)| (p.to_string(), *t))
            .collect::<Vec<_>>(),
    )
    .unwrap();
    apply(&ws, &mem).unwrap();
    finish(&ws).unwrap();
    // local work the sync back must not touch
    std::fs::write(ws.root().join("x"), b"my offline edit").unwrap();
    std::fs::write(ws.root().join("untracked"), b"mine").unwrap();
    // submit change 6: edit a, add c, delete b
    std::fs::write(ws.root().join("a"), b"a6").unwrap();
    std::fs::write(ws.root().join("c"), b"c6").unwrap();
    std::fs::remove_file(ws.root().join("b")).unwrap();
    let set = ChangeSet::new(vec![
        Entry::edit("a", 5, state(b"a6")),
        Entry::delete("b", 4),
        Entry::add("c", state(b"c6")),
    ]);
    let pending = PendingSubmit {
        incarnation: meta.incarnation,
        branch: meta.branch_id,
        integration: None,
        change_set_id: set.id().unwrap(),
        change_set: set.encode().unwrap(),
        author: "ada".into(),
        message: "six".into(),
        keep_locks: false,
        locks: vec![],
        created_ms: 1,
        fingerprints: vec![],
    };
    let op = OperationId([7; 16]);
    {
        let tx = ws.write().unwrap();
        for (p, a) in [
            ("a", OpenedAction::Edit),
            ("b", OpenedAction::Delete),
            ("c", OpenedAction::Add),
        ] {
            tx.put_opened(
                p,
                &OpenedRecord {
                    action: a,
                    opened_ms: 1,
                    needs_reconcile: false,
                    moved_from: None,
                },
            )
            .unwrap();
        }
        tx.put_pending(&op, &pending).unwrap();
        tx.commit().unwrap();
    }
    finalize(&ws, &op, &pending, 6).unwrap();
    assert_eq!(
        ws.meta().unwrap().synced,
        5,
        "submit does not advance synced"
    );
    assert_eq!(local_pin(&ws).unwrap(), Some(6));
    let ranges = plan_ranges(5, local_pin(&ws).unwrap(), Some(5));
    assert_eq!(ranges.restat, Some((5, 6)));
    // paths changed in (5, 6], at their state in 5
    let at5: HashMap<&str, Option<BaselineRecord>> = tree5.iter().cloned().collect();
    let plan: Vec<(String, Option<BaselineRecord>)> = ["a", "b", "c"]
        .iter()
        .map(|p| (p.to_string(), at5.get(p).copied().flatten()))
        .collect();
    begin(&ws, 5, &plan).unwrap();
    let report = apply(&ws, &mem).unwrap();
    assert_eq!(finish(&ws).unwrap(), 5);
    assert!(report.deferred.is_empty(), "{:?}", report.deferred);
    assert_eq!(std::fs::read(ws.root().join("a")).unwrap(), b"a5");
    assert_eq!(std::fs::read(ws.root().join("b")).unwrap(), b"b5");
    assert!(!ws.root().join("c").exists());
    assert_eq!(
        std::fs::read(ws.root().join("x")).unwrap(),
        b"my offline edit"
    );
    assert_eq!(std::fs::read(ws.root().join("untracked")).unwrap(), b"mine");
    let r = ws.read().unwrap();
    assert_eq!(r.baseline("a").unwrap().unwrap().change, 5);
    assert!(r.baseline("c").unwrap().is_none());
    drop(r);
    // the submitted bytes are the server's (an accepted change holds them): replaced
    // without a copy (#18 item 5)
    let kept = crate::recovery::list(ws.root()).unwrap();
    assert_eq!(kept.len(), 0, "{kept:?}");
    // the receipt went with the watermark
    assert_eq!(last_submit(&ws).unwrap(), None);
    assert_eq!(local_pin(&ws).unwrap(), None);
    assert_eq!(ws.meta().unwrap().synced, 5);
}

#[test]
fn a_receipt_of_another_branch_or_incarnation_is_not_a_pin() {
    let dir = tempfile::tempdir().unwrap();
    let meta = crate::state::tests_meta();
    let ws = Workspace::create(dir.path(), &meta).unwrap();
    let put = |r: LastSubmit| {
        let tx = ws.write().unwrap();
        tx.put_meta_bytes("last-submit", &r.encode()).unwrap();
        tx.commit().unwrap();
    };
    let ours = LastSubmit {
        incarnation: meta.incarnation,
        branch: meta.branch_id,
        change: 3,
    };
    put(ours);
    assert_eq!(local_pin(&ws).unwrap(), Some(3));
    put(LastSubmit {
        branch: BranchId([9; 16]),
        ..ours
    });
    assert_eq!(local_pin(&ws).unwrap(), None);
    put(LastSubmit {
        incarnation: [9; 16],
        ..ours
    });
    assert_eq!(local_pin(&ws).unwrap(), None);
    // not newer than the watermark: nothing to reconcile
    put(LastSubmit { change: 0, ..ours });
    assert_eq!(local_pin(&ws).unwrap(), None);
    // an ordinary completed sync removes it with the watermark
    put(ours);
    begin(&ws, 4, &[]).unwrap();
    finish(&ws).unwrap();
    assert_eq!(last_submit(&ws).unwrap(), None);
    assert_eq!(ws.meta().unwrap().synced, 4);
}

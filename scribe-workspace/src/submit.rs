//! The local half of a submission: the frozen candidate and its
//! finalization after the server accepted it.
//!
//! The client builds the change set, records it as a [`PendingSubmit`]
//! (table `pending`) before the first request carrying its operation id,
//! and after acceptance calls [`finalize`]: baselines, opened records, the
//! pending row, local locks, move intents and the `last-submit` receipt
//! change in one immediate transaction, so a crash leaves either the
//! pending candidate (replayed with the same id) or the finished state.

use scribe_format::bytes::Reader;
use scribe_format::changeset::{Action, ChangeSetRef};
use scribe_format::ErrorCode;
use scribe_format::{BranchId, OperationId};

use crate::error::{Result, WorkspaceError};
use std::collections::HashMap;

use crate::records::{BaselineRecord, Fingerprint, OpenedRecord, PendingSubmit};
use crate::state::{StateRead, Workspace};

/// `meta["last-submit"]`: `incarnation[16] ‖ branch-id[16] ‖ change u64`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LastSubmit {
    pub incarnation: [u8; 16],
    pub branch: BranchId,
    pub change: u64,
}

impl LastSubmit {
    pub const LEN: usize = 40;

    pub fn encode(&self) -> [u8; 40] {
        let mut out = [0u8; 40];
        out[..16].copy_from_slice(&self.incarnation);
        out[16..32].copy_from_slice(&self.branch.0);
        out[32..].copy_from_slice(&self.change.to_le_bytes());
        out
    }

    pub fn decode(bytes: &[u8]) -> std::result::Result<Self, scribe_format::FormatError> {
        let mut r = Reader::new(bytes);
        let v = LastSubmit {
            incarnation: r.array("last-submit incarnation")?,
            branch: BranchId(r.array("last-submit branch")?),
            change: r.u64("last-submit change")?,
        };
        r.finish("last-submit")?;
        Ok(v)
    }
}

/// The `last-submit` receipt, if any.
pub fn last_submit(ws: &Workspace) -> Result<Option<LastSubmit>> {
    let read = ws.read()?;
    match read.meta_bytes("last-submit")? {
        None => Ok(None),
        Some(b) => LastSubmit::decode(&b)
            .map(Some)
            .map_err(|source| WorkspaceError::Corrupt {
                table: "meta",
                key: "last-submit".into(),
                source,
            }),
    }
}

/// What [`finalize`] recorded.
#[derive(Clone, Debug, Default)]
pub struct Finalized {
    pub change: u64,
    pub updated: Vec<String>,
    pub removed: Vec<String>,
}

/// Record an accepted submission locally, in one transaction.
pub fn finalize(
    ws: &Workspace,
    op: &OperationId,
    pending: &PendingSubmit,
    change: u64,
) -> Result<Finalized> {
    finalize_planned(ws, op, plan_finalize(op, pending)?, change)
}

/// What [`finalize`] writes that follows from the candidate alone: the
/// change set decoded (verified) and every baseline row but its change
/// number. A client works it out while the server prepares the change
/// (for a 52,000-file import tens of milliseconds, otherwise spent after
/// the answer) and hands it to [`finalize_planned`].
pub struct FinalizePlan<'p> {
    pending: &'p PendingSubmit,
    put: Vec<(&'p str, BaselineRecord)>,
    removed: Vec<&'p str>,
    touched: Vec<&'p str>,
    /// The report, but for the change number.
    report: Finalized,
}

/// Plan the finalization of `pending` (operation `op`, named in errors).
pub fn plan_finalize<'p>(op: &OperationId, pending: &'p PendingSubmit) -> Result<FinalizePlan<'p>> {
    // Borrowed: the paths are read, not kept (but for the report).
    let set =
        ChangeSetRef::decode(&pending.change_set).map_err(|source| WorkspaceError::Corrupt {
            table: "pending",
            key: op.to_hex(),
            source,
        })?;
    let fps: HashMap<&str, Fingerprint> = pending
        .fingerprints
        .iter()
        .map(|(p, f)| (p.as_str(), *f))
        .collect();
    let mut put = Vec::new();
    let mut removed = Vec::new();
    for e in set.entries() {
        match (e.action, e.state) {
            (Action::Add | Action::Edit, Some(s)) => {
                put.push((
                    e.path,
                    BaselineRecord {
                        incarnation: pending.incarnation,
                        manifest: s.manifest,
                        content: s.content,
                        size: s.size,
                        mode: s.mode.byte(),
                        // The server's answer gives it (`finalize_planned`).
                        change: 0,
                        fingerprint: fps.get(e.path).copied().unwrap_or_default(),
                    },
                ));
            }
            (Action::Delete, _) => removed.push(e.path),
            _ => {}
        }
    }
    let touched = set.entries().iter().map(|e| e.path).collect();
    let report = Finalized {
        change: 0,
        updated: put.iter().map(|(p, _)| p.to_string()).collect(),
        removed: removed.iter().map(|p| p.to_string()).collect(),
    };
    Ok(FinalizePlan {
        pending,
        put,
        removed,
        touched,
        report,
    })
}

/// Record an accepted submission as `plan` (of `op`'s candidate) says,
/// accepted as `change`, in one transaction.
pub fn finalize_planned(
    ws: &Workspace,
    op: &OperationId,
    mut plan: FinalizePlan<'_>,
    change: u64,
) -> Result<Finalized> {
    let pending = plan.pending;
    let moves: Vec<String> = ws
        .read()?
        .workflows_with_prefix("move/")?
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    for (_, rec) in &mut plan.put {
        rec.change = change;
    }
    let out = Finalized {
        change,
        ..plan.report
    };
    let tx = ws.write()?;
    tx.settle_submitted(&plan.put, &plan.removed, &plan.touched, !pending.keep_locks)?;
    for k in &moves {
        tx.remove_workflow(k)?;
    }
    tx.remove_pending(op)?;
    tx.remove_meta(&intent_key(op))?;
    let receipt = LastSubmit {
        incarnation: pending.incarnation,
        branch: pending.branch,
        change,
    };
    let keep_old = match tx.meta_bytes("last-submit")? {
        Some(b) => matches!(LastSubmit::decode(&b), Ok(old)
            if old.incarnation == receipt.incarnation && old.branch == receipt.branch && old.change > change),
        None => false,
    };
    if !keep_old {
        tx.put_meta_bytes("last-submit", &receipt.encode())?;
    }
    tx.commit()?;
    Ok(out)
}

/// Prefix of `meta["upload-intent:<operation hex>"]`.
const INTENT_PREFIX: &str = "upload-intent:";

/// `meta["upload-intent:<operation>"]`: byte 1, persisted before the first
/// upload pin of that operation (specification, upload lifecycle) and
/// removed with its pending submit (finalize, abandon, archive).
pub fn intent_key(op: &OperationId) -> String {
    format!("{INTENT_PREFIX}{}", op.to_hex())
}

/// Record that `op` is about to pin uploads (durably, before any pin).
pub fn begin_intent(ws: &Workspace, op: &OperationId) -> Result<()> {
    let tx = ws.write()?;
    tx.put_meta_bytes(&intent_key(op), &[1])?;
    tx.commit()
}

/// An upload intent a stopped submit left without a pending submit. No
/// `Submit` ever carried it (the pending row is committed first), so the
/// next submission reuses it and its pins instead of leaving them held
/// forever. Malformed keys are ignored.
pub fn leftover_intent(ws: &Workspace) -> Result<Option<OperationId>> {
    let read = ws.read()?;
    let pending: std::collections::HashSet<OperationId> =
        read.pending_all()?.into_iter().map(|(op, _)| op).collect();
    Ok(read
        .meta_keys_with_prefix(INTENT_PREFIX)?
        .iter()
        .filter_map(|k| OperationId::from_hex(&k[INTENT_PREFIX.len()..]).ok())
        .find(|op| !pending.contains(op)))
}

/// `.scribe/_state/recovery/submit-<operation>.pending`.
pub fn archive_path(ws: &Workspace, op: &OperationId) -> std::path::PathBuf {
    crate::recovery::recovery_dir(ws.root()).join(format!("submit-{}.pending", op.to_hex()))
}

/// Retire a candidate whose outcome is absent after a restore changed the
/// repository incarnation: its exact pending bytes are saved as
/// `recovery/submit-<operation>.pending` (file and directory flushed)
/// before the pending row is removed; opened records and baselines stay.
/// An existing archive must hold exactly these bytes (a rerun after a
/// crash between the two steps finds it so); anything else is refused and
/// nothing changes.
pub fn archive_pending(ws: &Workspace, op: &OperationId) -> Result<std::path::PathBuf> {
    let Some(bytes) = ws.read()?.pending_bytes(op)? else {
        return Err(WorkspaceError::refused(
            ErrorCode::NotFound,
            op.to_hex(),
            "no pending submission has this id",
        ));
    };
    let path = archive_path(ws, op);
    match std::fs::read(&path) {
        Ok(existing) if existing == bytes => {}
        Ok(_) => {
            return Err(WorkspaceError::refused(
                ErrorCode::Corrupt,
                path.display().to_string(),
                "an archive of this submission exists with other bytes",
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let dir = crate::recovery::recovery_dir(ws.root());
            std::fs::create_dir_all(&dir).map_err(WorkspaceError::io(&dir))?;
            // Written whole in tmp/ (cleaned at open), flushed, then renamed
            // into the recovery area, whose directory is flushed.
            let tmp = ws
                .state_dir()
                .join("tmp")
                .join(format!("submit-{}.pending", op.to_hex()));
            {
                use std::io::Write;
                let mut f = std::fs::File::create(&tmp).map_err(WorkspaceError::io(&tmp))?;
                f.write_all(&bytes).map_err(WorkspaceError::io(&tmp))?;
                f.sync_all().map_err(WorkspaceError::io(&tmp))?;
            }
            std::fs::rename(&tmp, &path).map_err(WorkspaceError::io(&path))?;
            crate::state::sync_dir(&dir)?;
        }
        Err(e) => return Err(WorkspaceError::io(&path)(e)),
    }
    let tx = ws.write()?;
    tx.remove_pending(op)?;
    tx.remove_meta(&intent_key(op))?;
    tx.commit()?;
    Ok(path)
}

/// Every opened path with its baseline row, read once: what a submit
/// checks for stale bases and then submits from.
pub struct OpenedBases {
    pub opened: Vec<(String, OpenedRecord)>,
    /// The baseline row of each opened path that has one.
    pub baselines: HashMap<String, BaselineRecord>,
    /// Opened paths whose baseline is of another incarnation than the
    /// current one (created before a restore): submit refuses them until
    /// resolution or revert replaces the baseline.
    pub stale: Vec<String>,
}

/// [`OpenedBases`] of `read` against the server's `incarnation`.
pub fn opened_with_bases(read: &StateRead, incarnation: [u8; 16]) -> Result<OpenedBases> {
    let opened = read.opened_all()?;
    let mut baselines = HashMap::new();
    let mut stale = Vec::new();
    for (p, _) in &opened {
        if let Some(b) = read.baseline(p)? {
            if b.incarnation != incarnation {
                stale.push(p.clone());
            }
            baselines.insert(p.clone(), b);
        }
    }
    Ok(OpenedBases {
        opened,
        baselines,
        stale,
    })
}

/// Forget a candidate the server refused (its outcome is recorded there);
/// opened records and files are untouched.
pub fn abandon(ws: &Workspace, op: &OperationId) -> Result<()> {
    let tx = ws.write()?;
    tx.remove_pending(op)?;
    tx.remove_meta(&intent_key(op))?;
    tx.commit()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{OpenedAction, OpenedRecord};
    use scribe_format::changeset::{ChangeSet, Entry, FileState, Mode};
    use scribe_format::{FileContentId, ManifestId};

    fn state(b: &[u8]) -> FileState {
        FileState {
            manifest: ManifestId::of_payload(b),
            content: FileContentId::of(b),
            size: b.len() as u64,
            mode: Mode::Regular,
        }
    }

    /// A pending submission of `set` (incarnation [4; 16], branch [3; 16]).
    fn pending_of(set: &ChangeSet, message: &str, keep_locks: bool) -> PendingSubmit {
        PendingSubmit {
            incarnation: [4; 16],
            branch: BranchId([3; 16]),
            integration: None,
            change_set_id: set.id().unwrap(),
            change_set: set.encode().unwrap(),
            author: "ada".into(),
            message: message.into(),
            keep_locks,
            locks: vec![],
            created_ms: 1,
            fingerprints: vec![],
        }
    }

    #[test]
    fn upload_intents_are_reused_until_their_pending_submit_settles() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::create(dir.path(), &crate::state::tests_meta()).unwrap();
        assert_eq!(leftover_intent(&ws).unwrap(), None);
        let op = OperationId([7; 16]);
        begin_intent(&ws, &op).unwrap();
        // A stopped freeze: the intent is offered for reuse.
        assert_eq!(leftover_intent(&ws).unwrap(), Some(op));
        let set = ChangeSet::new(vec![Entry::add("a.bin", state(b"a"))]);
        let pending = pending_of(&set, "m", false);
        let tx = ws.write().unwrap();
        tx.put_pending(&op, &pending).unwrap();
        tx.commit().unwrap();
        // With its pending submit it is no longer a leftover.
        assert_eq!(leftover_intent(&ws).unwrap(), None);
        finalize(&ws, &op, &pending, 3).unwrap();
        let r = ws.read().unwrap();
        assert_eq!(r.meta_bytes(&intent_key(&op)).unwrap(), None);
        drop(r);
        // Abandon removes it too.
        let other = OperationId([8; 16]);
        begin_intent(&ws, &other).unwrap();
        let tx = ws.write().unwrap();
        tx.put_pending(&other, &pending).unwrap();
        tx.commit().unwrap();
        abandon(&ws, &other).unwrap();
        assert_eq!(leftover_intent(&ws).unwrap(), None);
        assert!(ws
            .read()
            .unwrap()
            .meta_keys_with_prefix("upload-intent:")
            .unwrap()
            .is_empty());
    }

    #[test]
    fn archive_keeps_exact_bytes_and_opened_work() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::create(dir.path(), &crate::state::tests_meta()).unwrap();
        let set = ChangeSet::new(vec![Entry::edit("a.bin", 1, state(b"mine"))]);
        let pending = pending_of(&set, "before the restore", true);
        let op = OperationId([5; 16]);
        let opened = OpenedRecord {
            action: OpenedAction::Edit,
            opened_ms: 1,
            needs_reconcile: false,
            moved_from: None,
        };
        let base = BaselineRecord {
            incarnation: [4; 16],
            manifest: ManifestId::of_payload(b"base"),
            content: FileContentId::of(b"base"),
            size: 4,
            mode: 0,
            change: 1,
            fingerprint: Fingerprint::default(),
        };
        let put = || {
            let tx = ws.write().unwrap();
            tx.put_opened("a.bin", &opened).unwrap();
            tx.put_baseline("a.bin", &base).unwrap();
            tx.put_pending(&op, &pending).unwrap();
            tx.commit().unwrap();
        };
        put();
        let exact = ws.read().unwrap().pending_bytes(&op).unwrap().unwrap();
        let path = archive_pending(&ws, &op).unwrap();
        assert_eq!(path, archive_path(&ws, &op));
        assert_eq!(std::fs::read(&path).unwrap(), exact);
        let r = ws.read().unwrap();
        assert!(r.pending_all().unwrap().is_empty());
        assert_eq!(r.opened("a.bin").unwrap(), Some(opened.clone()));
        assert_eq!(r.baseline("a.bin").unwrap(), Some(base));
        drop(r);
        assert!(crate::recovery::list(ws.root())
            .unwrap()
            .iter()
            .any(|e| matches!(
            e, crate::recovery::RecoveryEntry::Archive { name, .. }
                if *name == format!("submit-{}.pending", op.to_hex()))));
        // archives are never pruned
        crate::recovery::prune(ws.root(), u64::MAX).unwrap();
        assert!(path.exists());
        // a rerun after a crash between the two steps: same bytes, accepted
        put();
        archive_pending(&ws, &op).unwrap();
        assert!(ws.read().unwrap().pending_all().unwrap().is_empty());
        // other bytes under the same name: refused, the pending row stays
        put();
        std::fs::write(&path, b"something else").unwrap();
        assert!(matches!(
            archive_pending(&ws, &op),
            Err(WorkspaceError::Refused {
                code: ErrorCode::Corrupt,
                ..
            })
        ));
        assert_eq!(ws.read().unwrap().pending_all().unwrap().len(), 1);
        assert_eq!(std::fs::read(&path).unwrap(), b"something else");
        // stale bases: the baseline's incarnation against the current one
        let stale = |inc| opened_with_bases(&ws.read().unwrap(), inc).unwrap().stale;
        assert!(stale([4; 16]).is_empty());
        assert_eq!(stale([8; 16]), vec!["a.bin"]);
    }

    #[test]
    fn receipt_layout() {
        let r = LastSubmit {
            incarnation: [1; 16],
            branch: BranchId([2; 16]),
            change: 3,
        };
        let b = r.encode();
        assert_eq!(&b[32..], &3u64.to_le_bytes());
        assert_eq!(LastSubmit::decode(&b).unwrap(), r);
        assert!(LastSubmit::decode(&b[..39]).is_err());
    }

    /// Finalization is the one transaction that turns opened work into
    /// baselines; it must clear opened, pending and local locks together.
    #[test]
    fn finalize_records_baselines_and_clears_opened_pending_locks() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::create(dir.path(), &crate::state::tests_meta()).unwrap();
        let set = ChangeSet::new(vec![
            Entry::add("a.bin", state(b"a")),
            Entry::delete("gone.bin", 1),
        ]);
        let pending = pending_of(&set, "m", false);
        let op = OperationId([9; 16]);
        {
            let tx = ws.write().unwrap();
            for (p, a) in [
                ("a.bin", OpenedAction::Add),
                ("gone.bin", OpenedAction::Delete),
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
            tx.put_local_lock("a.bin", 7).unwrap();
            tx.put_pending(&op, &pending).unwrap();
            tx.commit().unwrap();
        }
        assert!(ws.read().unwrap().any_opened().unwrap());
        let f = finalize(&ws, &op, &pending, 5).unwrap();
        assert_eq!(f.updated, vec!["a.bin"]);
        assert_eq!(f.removed, vec!["gone.bin"]);
        let r = ws.read().unwrap();
        assert_eq!(r.baseline("a.bin").unwrap().unwrap().change, 5);
        assert!(r.opened_all().unwrap().is_empty());
        assert!(!r.any_opened().unwrap());
        assert!(r.pending_all().unwrap().is_empty());
        assert!(r.local_locks().unwrap().is_empty());
        drop(r);
        assert_eq!(last_submit(&ws).unwrap().unwrap().change, 5);
        // An older receipt never replaces a newer one.
        let tx = ws.write().unwrap();
        tx.put_pending(&op, &pending).unwrap();
        tx.commit().unwrap();
        finalize(&ws, &op, &pending, 4).unwrap();
        assert_eq!(last_submit(&ws).unwrap().unwrap().change, 5);
    }

    /// The plan a client works out while the server prepares: the change
    /// set verified and the baseline rows with each file's fingerprint; the
    /// answer's change number is written into every row. A candidate whose
    /// change set does not decode is named as the pending row it is.
    #[test]
    fn a_plan_made_before_the_answer_finalizes_with_the_answers_change() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::create(dir.path(), &crate::state::tests_meta()).unwrap();
        let set = ChangeSet::new(vec![
            Entry::add("a.bin", state(b"a")),
            Entry::add("b.bin", state(b"b")),
        ]);
        let mut pending = pending_of(&set, "m", false);
        let fp = Fingerprint {
            size: 1,
            mtime_s: 77,
            mtime_ns: 5,
            recorded_ms: 9,
            changed: None,
        };
        pending.fingerprints = vec![("b.bin".into(), fp)];
        let op = OperationId([5; 16]);
        let plan = plan_finalize(&op, &pending).unwrap();
        {
            let tx = ws.write().unwrap();
            tx.put_pending(&op, &pending).unwrap();
            tx.commit().unwrap();
        }
        let f = finalize_planned(&ws, &op, plan, 12).unwrap();
        assert_eq!((f.change, f.updated.len()), (12, 2));
        let r = ws.read().unwrap();
        let (a, b) = (
            r.baseline("a.bin").unwrap().unwrap(),
            r.baseline("b.bin").unwrap().unwrap(),
        );
        assert_eq!((a.change, b.change), (12, 12));
        assert_eq!(b.fingerprint, fp);
        assert_eq!(a.fingerprint, Fingerprint::default());
        assert!(r.pending_all().unwrap().is_empty());
        drop(r);
        let mut bad = pending_of(&set, "m", false);
        bad.change_set.truncate(5);
        assert!(matches!(
            plan_finalize(&op, &bad),
            Err(WorkspaceError::Corrupt {
                table: "pending",
                ..
            })
        ));
    }
}

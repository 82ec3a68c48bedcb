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
use scribe_format::changeset::{Action, ChangeSet};
use scribe_format::{BranchId, OperationId};

use crate::error::{Result, WorkspaceError};
use crate::records::{BaselineRecord, Fingerprint, PendingSubmit};
use crate::state::Workspace;

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
    let set = ChangeSet::decode(&pending.change_set).map_err(|source| WorkspaceError::Corrupt {
        table: "pending",
        key: op.to_hex(),
        source,
    })?;
    let fps: std::collections::HashMap<&str, Fingerprint> = pending
        .fingerprints
        .iter()
        .map(|(p, f)| (p.as_str(), *f))
        .collect();
    let moves: Vec<String> = ws
        .read()?
        .workflows_with_prefix("move/")?
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    let mut out = Finalized {
        change,
        ..Default::default()
    };
    let tx = ws.write()?;
    for e in &set.entries {
        match (e.action, e.state) {
            (Action::Add | Action::Edit, Some(s)) => {
                tx.put_baseline(
                    &e.path,
                    &BaselineRecord {
                        incarnation: pending.incarnation,
                        manifest: s.manifest,
                        content: s.content,
                        size: s.size,
                        mode: s.mode.byte(),
                        change,
                        fingerprint: fps.get(e.path.as_str()).copied().unwrap_or_default(),
                    },
                )?;
                out.updated.push(e.path.clone());
            }
            (Action::Delete, _) => {
                tx.remove_baseline(&e.path)?;
                out.removed.push(e.path.clone());
            }
            _ => {}
        }
        tx.remove_opened(&e.path)?;
        if !pending.keep_locks {
            tx.remove_local_lock(&e.path)?;
        }
    }
    for k in &moves {
        tx.remove_workflow(k)?;
    }
    tx.remove_pending(op)?;
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

/// Forget a candidate the server refused (its outcome is recorded there);
/// opened records and files are untouched.
pub fn abandon(ws: &Workspace, op: &OperationId) -> Result<()> {
    let tx = ws.write()?;
    tx.remove_pending(op)?;
    tx.commit()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{OpenedAction, OpenedRecord};
    use scribe_format::changeset::{Entry, FileState, Mode};
    use scribe_format::{FileContentId, ManifestId};

    fn state(b: &[u8]) -> FileState {
        FileState {
            manifest: ManifestId::of_payload(b),
            content: FileContentId::of(b),
            size: b.len() as u64,
            mode: Mode::Regular,
        }
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
        let pending = PendingSubmit {
            incarnation: [4; 16],
            branch: BranchId([3; 16]),
            integration: None,
            change_set_id: set.id().unwrap(),
            change_set: set.encode().unwrap(),
            author: "ada".into(),
            message: "m".into(),
            keep_locks: false,
            locks: vec![],
            created_ms: 1,
            fingerprints: vec![],
        };
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
        let f = finalize(&ws, &op, &pending, 5).unwrap();
        assert_eq!(f.updated, vec!["a.bin"]);
        assert_eq!(f.removed, vec!["gone.bin"]);
        let r = ws.read().unwrap();
        assert_eq!(r.baseline("a.bin").unwrap().unwrap().change, 5);
        assert!(r.opened_all().unwrap().is_empty());
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
}

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

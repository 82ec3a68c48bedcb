//! The workspace registry (`workspaces`, version 2) and the lifecycle index
//! (`workspace_state`: owner index and counts, retirement fences and
//! outcomes).

use redb::{ReadableDatabase, ReadableTable};
use scribe_format::echo::echo;
use scribe_format::{path, BranchId, ErrorCode, OperationId, WorkspaceId};

use crate::clock::now_ms;
use crate::error::{MetadataError, Result};
use crate::records::{
    decode_u64, keys, OperationRecord, WorkspaceRecord, MAX_LABEL_BYTES, MAX_TAGS, MAX_TAG_BYTES,
};
use crate::repo::Repository;
use crate::tables;

/// A registration request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    pub workspace: WorkspaceId,
    pub owner: Option<[u8; 16]>,
    pub branch: BranchId,
    pub view: Vec<String>,
    pub label: String,
    pub tags: Vec<String>,
}

/// The outcome of a retirement, recorded under its operation id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RetireOutcome {
    Retired { retired_ms: u64 },
    Refused { code: ErrorCode, detail: String },
}

impl Repository {
    /// Register (or re-register, replacing view, label and tags) a workspace.
    pub fn register_workspace(&self, r: &Registration) -> Result<WorkspaceRecord> {
        if r.view.len() > scribe_format::limits::MAX_VIEW_PREFIXES {
            return Err(MetadataError::refused(
                ErrorCode::LimitExceeded,
                "more than 256 view prefixes",
            ));
        }
        for p in &r.view {
            path::validate(p).map_err(|e| {
                MetadataError::refused(ErrorCode::InvalidPath, format!("view {}: {e}", echo(p)))
            })?;
        }
        if r.label.len() > MAX_LABEL_BYTES
            || r.tags.len() > MAX_TAGS
            || r.tags
                .iter()
                .any(|t| t.len() > MAX_TAG_BYTES || t.is_empty())
        {
            return Err(MetadataError::refused(
                ErrorCode::LimitExceeded,
                "label ≤ 256 bytes, at most 16 tags of 1..=64 bytes",
            ));
        }
        let _gate = self
            .gate
            .lock()
            .map_err(|_| MetadataError::Gate("publication gate poisoned".into()))?;
        let wtx = self.write()?;
        let rec = {
            let mut ws = wtx.open_table(tables::WORKSPACES)?;
            let mut st = wtx.open_table(tables::WORKSPACE_STATE)?;
            let heads = wtx.open_table(tables::BRANCH_HEADS)?;
            if st
                .get(keys::ws_retired(&r.workspace.0).as_slice())?
                .is_some()
            {
                return Err(MetadataError::refused(
                    ErrorCode::WorkspaceRetired,
                    format!("workspace {} is retired", r.workspace),
                ));
            }
            if heads.get(r.branch.0)?.is_none() {
                return Err(MetadataError::refused(
                    ErrorCode::NotFound,
                    format!("no branch {}", r.branch),
                ));
            }
            let existing = match ws.get(r.workspace.0)? {
                Some(row) => Some(WorkspaceRecord::decode(row.value())?),
                None => None,
            };
            let created_ms = match &existing {
                Some(old) if old.owner != r.owner => {
                    return Err(MetadataError::refused(
                        ErrorCode::Forbidden,
                        format!("workspace {} has another owner", r.workspace),
                    ))
                }
                Some(old) => old.created_ms,
                None => now_ms(),
            };
            let rec = WorkspaceRecord {
                owner: r.owner,
                branch: r.branch,
                view: r.view.clone(),
                created_ms,
                label: r.label.clone(),
                tags: r.tags.clone(),
            };
            ws.insert(r.workspace.0, rec.encode().as_slice())?;
            if existing.is_none() {
                if let Some(owner) = &r.owner {
                    st.insert(
                        keys::ws_owner_index(owner, &r.workspace.0).as_slice(),
                        [].as_slice(),
                    )?;
                    let ck = keys::ws_owner_count(owner);
                    let n = match st.get(ck.as_slice())? {
                        Some(v) => decode_u64(v.value(), "owner count")?,
                        None => 0,
                    };
                    st.insert(ck.as_slice(), (n + 1).to_le_bytes().as_slice())?;
                }
            }
            rec
        };
        wtx.commit()?;
        Ok(rec)
    }

    /// The registration of `workspace`, if active.
    pub fn workspace(&self, workspace: WorkspaceId) -> Result<Option<WorkspaceRecord>> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(tables::WORKSPACES)?;
        match t.get(workspace.0)? {
            Some(row) => Ok(Some(WorkspaceRecord::decode(row.value())?)),
            None => Ok(None),
        }
    }

    /// Whether `workspace` is retired.
    pub fn is_retired(&self, workspace: WorkspaceId) -> Result<bool> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(tables::WORKSPACE_STATE)?;
        Ok(t.get(keys::ws_retired(&workspace.0).as_slice())?.is_some())
    }

    /// Active registrations of `owner`.
    pub fn active_workspace_count(&self, owner: &[u8; 16]) -> Result<u64> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(tables::WORKSPACE_STATE)?;
        match t.get(keys::ws_owner_count(owner).as_slice())? {
            Some(v) => Ok(decode_u64(v.value(), "owner count")?),
            None => Ok(0),
        }
    }

    /// Retire `workspace` under `operation` (idempotent). A workspace that
    /// still holds locks is refused (`busy`, "holds locks"), found by one
    /// index seek; that refusal is not recorded, so a retry after the locks
    /// are released retires it.
    pub fn retire_workspace(
        &self,
        workspace: WorkspaceId,
        operation: OperationId,
    ) -> Result<RetireOutcome> {
        let _turn = self
            .turn
            .lock()
            .map_err(|_| MetadataError::Gate("submit turn poisoned".into()))?;
        let _gate = self
            .gate
            .lock()
            .map_err(|_| MetadataError::Gate("publication gate poisoned".into()))?;
        // The fingerprint of a retirement is the workspace it names.
        let fingerprint = *blake3::hash(&workspace.0).as_bytes();
        let wtx = self.write()?;
        let out = {
            let mut ws = wtx.open_table(tables::WORKSPACES)?;
            let mut st = wtx.open_table(tables::WORKSPACE_STATE)?;
            let ok = keys::ws_retire_outcome(&operation.0);
            if let Some(row) = st.get(ok.as_slice())? {
                let rec = OperationRecord::decode(row.value())?;
                if rec.fingerprint != fingerprint {
                    return Ok(RetireOutcome::Refused {
                        code: ErrorCode::OperationIntentMismatch,
                        detail: format!(
                            "operation {operation} was used before with another intent"
                        ),
                    });
                }
                return Ok(if rec.error_code == 0 {
                    RetireOutcome::Retired {
                        retired_ms: rec.recorded_ms,
                    }
                } else {
                    RetireOutcome::Refused {
                        code: ErrorCode::from_number(rec.error_code).unwrap_or(ErrorCode::Internal),
                        detail: rec.detail,
                    }
                });
            }
            let now = now_ms();
            let lock_prefix = keys::ws_lock_index(&workspace.0, "");
            let holds = match st.range(lock_prefix.as_slice()..)?.next() {
                Some(row) => row?.0.value().starts_with(&lock_prefix),
                None => false,
            };
            let refusal = if st.get(keys::ws_retired(&workspace.0).as_slice())?.is_some() {
                Some((
                    ErrorCode::WorkspaceRetired,
                    format!("workspace {workspace} is retired"),
                ))
            } else if holds {
                Some((
                    ErrorCode::Busy,
                    format!("workspace {workspace} holds locks; release them first"),
                ))
            } else {
                None
            };
            let rec = match &refusal {
                Some((code, detail)) => OperationRecord {
                    fingerprint,
                    accepted_change: 0,
                    error_code: code.number(),
                    detail: detail.clone(),
                    recorded_ms: now,
                },
                None => OperationRecord {
                    fingerprint,
                    accepted_change: 0,
                    error_code: 0,
                    detail: String::new(),
                    recorded_ms: now,
                },
            };
            if refusal.is_none() {
                let old = match ws.remove(workspace.0)? {
                    Some(row) => Some(WorkspaceRecord::decode(row.value())?),
                    None => None,
                };
                if let Some(owner) = old.and_then(|o| o.owner) {
                    st.remove(keys::ws_owner_index(&owner, &workspace.0).as_slice())?;
                    let ck = keys::ws_owner_count(&owner);
                    let n = match st.get(ck.as_slice())? {
                        Some(v) => decode_u64(v.value(), "owner count")?,
                        None => 0,
                    };
                    if n <= 1 {
                        st.remove(ck.as_slice())?;
                    } else {
                        st.insert(ck.as_slice(), (n - 1).to_le_bytes().as_slice())?;
                    }
                }
                st.insert(
                    keys::ws_retired(&workspace.0).as_slice(),
                    now.to_le_bytes().as_slice(),
                )?;
            }
            // A refusal because the workspace holds locks is not recorded
            // as the outcome (#18 item 1): it is a state that ends (the
            // locks are released, `scribe unlock --force` or `scribe-server
            // lock release` break them), and a recorded one would refuse
            // every later retirement of the workspace.
            if !matches!(&refusal, Some((ErrorCode::Busy, _))) {
                st.insert(ok.as_slice(), rec.encode().as_slice())?;
            }
            match refusal {
                Some((code, detail)) => RetireOutcome::Refused { code, detail },
                None => RetireOutcome::Retired { retired_ms: now },
            }
        };
        wtx.commit()?;
        Ok(out)
    }
}

impl Repository {
    /// Every active registration, by workspace id.
    pub fn workspaces(&self) -> Result<Vec<(WorkspaceId, WorkspaceRecord)>> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(tables::WORKSPACES)?;
        let mut out = Vec::new();
        for row in t.range::<[u8; 16]>(..)? {
            let (k, v) = row?;
            out.push((WorkspaceId(k.value()), WorkspaceRecord::decode(v.value())?));
        }
        Ok(out)
    }
}

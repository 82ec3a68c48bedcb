//! Repository-wide path locks (section 8 `locks`, the lock ownership index
//! of `workspace_state`, `meta/lock-epoch`).
//!
//! Acquisition is all-or-nothing: a path held by another workspace refuses
//! the whole request with `locked_by_other`. Each acquisition takes the
//! next lock generation from `repo-meta`; every ownership change advances
//! `lock-epoch`. Lock mutations join the submit turn, then the publication
//! gate, so they never interleave with a preparation.

use redb::{ReadableDatabase, ReadableTable};
use scribe_format::echo::echo;
use scribe_format::{path, BranchId, ErrorCode, WorkspaceId};

use crate::accept::Tx;
use crate::clock::now_ms;
use crate::error::{MetadataError, Result};
use crate::records::{keys, LockRecord};
use crate::repo::Repository;
use crate::tables::{self, meta};

/// One held lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockInfo {
    pub path: String,
    pub record: LockRecord,
}

impl Repository {
    /// Run `f` in a lock-mutation transaction, together with concurrent
    /// lock mutations of this repository (one transaction, one archive
    /// publication; `combine.rs`), under the submit turn and the gate.
    fn mutate_locks<T: Send + 'static>(
        &self,
        mut f: impl FnMut(&mut Tx<'_>) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        self.lock_writes.run(self, move |_, wtx| {
            let mut tx = Tx::open(wtx)?;
            f(&mut tx)
        })
    }

    /// Acquire locks on `paths` for `workspace`. Paths already held by the
    /// same workspace keep their generation.
    pub fn lock(
        &self,
        paths: &[String],
        workspace: WorkspaceId,
        branch: BranchId,
        author: &str,
    ) -> Result<Vec<LockInfo>> {
        for p in paths {
            path::validate(p).map_err(|e| {
                MetadataError::refused(ErrorCode::InvalidPath, format!("{}: {e}", echo(p)))
            })?;
        }
        if author.len() > scribe_format::limits::MAX_AUTHOR_BYTES {
            return Err(MetadataError::refused(
                ErrorCode::LimitExceeded,
                "author is longer than 256 bytes",
            ));
        }
        let paths = paths.to_vec();
        let author = author.to_owned();
        self.mutate_locks(move |tx| {
            if tx
                .ws_state
                .get(keys::ws_retired(&workspace.0).as_slice())?
                .is_some()
            {
                return Err(MetadataError::refused(
                    ErrorCode::WorkspaceRetired,
                    format!("workspace {workspace} is retired"),
                ));
            }
            if tx.heads.get(branch.0)?.is_none() {
                return Err(MetadataError::refused(
                    ErrorCode::NotFound,
                    format!("no branch {branch}"),
                ));
            }
            let mut others = Vec::new();
            let mut out = Vec::new();
            let mut todo = Vec::new();
            for p in &paths {
                match tx.locks.get(p.as_str())? {
                    Some(row) => {
                        let rec = LockRecord::decode(row.value())?;
                        if rec.workspace == workspace {
                            out.push(LockInfo {
                                path: p.clone(),
                                record: rec,
                            });
                        } else {
                            others.push(p.clone());
                        }
                    }
                    None => todo.push(p.clone()),
                }
            }
            if !others.is_empty() {
                return Err(MetadataError::refused(
                    ErrorCode::LockedByOther,
                    format!("locked by another workspace: {}", others.join(", ")),
                ));
            }
            if todo.is_empty() {
                return Ok(out);
            }
            let mut rm = tx.repo_meta()?;
            let now = now_ms();
            todo.sort();
            todo.dedup();
            for p in todo {
                rm.lock_generation += 1;
                let rec = LockRecord {
                    generation: rm.lock_generation,
                    workspace,
                    branch,
                    author: author.clone(),
                    acquired_ms: now,
                };
                tx.locks.insert(p.as_str(), rec.encode().as_slice())?;
                tx.ws_state.insert(
                    keys::ws_lock_index(&workspace.0, &p).as_slice(),
                    [].as_slice(),
                )?;
                out.push(LockInfo {
                    path: p,
                    record: rec,
                });
            }
            tx.meta.insert(meta::REPO_META, rm.encode().as_slice())?;
            let epoch = tx.meta_u64(meta::LOCK_EPOCH)? + 1;
            tx.meta
                .insert(meta::LOCK_EPOCH, epoch.to_le_bytes().as_slice())?;
            out.sort_by(|a, b| a.path.cmp(&b.path));
            Ok(out)
        })
    }

    /// Release `workspace`'s locks on `paths`; returns how many were
    /// released. A path locked by another workspace refuses the request.
    pub fn unlock(&self, paths: &[String], workspace: WorkspaceId) -> Result<usize> {
        let paths = paths.to_vec();
        self.mutate_locks(move |tx| {
            let mut mine = Vec::new();
            let mut others = Vec::new();
            for p in &paths {
                if let Some(row) = tx.locks.get(p.as_str())? {
                    let rec = LockRecord::decode(row.value())?;
                    if rec.workspace == workspace {
                        mine.push(p.clone());
                    } else {
                        others.push(p.clone());
                    }
                }
            }
            if !others.is_empty() {
                return Err(MetadataError::refused(
                    ErrorCode::LockedByOther,
                    format!("locked by another workspace: {}", others.join(", ")),
                ));
            }
            for p in &mine {
                tx.locks.remove(p.as_str())?;
                tx.ws_state
                    .remove(keys::ws_lock_index(&workspace.0, p).as_slice())?;
            }
            if !mine.is_empty() {
                let epoch = tx.meta_u64(meta::LOCK_EPOCH)? + 1;
                tx.meta
                    .insert(meta::LOCK_EPOCH, epoch.to_le_bytes().as_slice())?;
            }
            Ok(mine.len())
        })
    }

    /// Locks on paths starting with `prefix` (a byte prefix; `""` for all).
    pub fn locks(&self, prefix: &str) -> Result<Vec<LockInfo>> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(tables::LOCKS)?;
        let mut out = Vec::new();
        for row in t.range(prefix..)? {
            let (k, v) = row?;
            if !k.value().starts_with(prefix) {
                break;
            }
            out.push(LockInfo {
                path: k.value().to_owned(),
                record: LockRecord::decode(v.value())?,
            });
        }
        Ok(out)
    }

    /// Paths `workspace` holds locks on, by the ownership index.
    pub fn workspace_locks(&self, workspace: WorkspaceId) -> Result<Vec<String>> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(tables::WORKSPACE_STATE)?;
        let prefix = keys::ws_lock_index(&workspace.0, "");
        let mut out = Vec::new();
        for row in t.range(prefix.as_slice()..)? {
            let (k, _) = row?;
            let k = k.value();
            if !k.starts_with(&prefix) {
                break;
            }
            out.push(String::from_utf8_lossy(&k[prefix.len()..]).into_owned());
        }
        Ok(out)
    }

    /// The current lock epoch.
    pub fn lock_epoch(&self) -> Result<u64> {
        let tx = self.db.begin_read()?;
        let m = tx.open_table(tables::META)?;
        let b = m
            .get(meta::LOCK_EPOCH)?
            .ok_or_else(|| MetadataError::corrupt("no lock-epoch"))?;
        Ok(crate::records::decode_u64(b.value(), "lock-epoch")?)
    }
}

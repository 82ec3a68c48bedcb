//! Upload pins (atomic publication and upload lifecycle profile 1).
//!
//! | key | value |
//! |---|---|
//! | `upload_pins`: `workspace[16] ‖ intent[16] ‖ kind u8 ‖ digest[32]` | empty |
//! | `meta["upload-owner:<intent hex>"]` | workspace `[16]`, fixed before transfer |
//! | `meta["upload-finished:<intent hex>"]` | workspace `[16]`, written with the final outcome |
//!
//! Pins are persisted before clients transmit or reuse identities and may
//! name absent objects; pinning is idempotent. A final submission outcome
//! (accepted or rejected) for an operation that pinned writes its
//! `upload-finished` marker in the same transaction; cleanup then deletes
//! at most 512 pins per transaction, the last one removing the owner and
//! the marker. Startup resumes unfinished cleanups. Retired workspaces may
//! not pin, and neither may workspaces that were never registered
//! (`workspace_unregistered`): every pin names a registered workspace.
//!
//! Each workspace holds at most a bounded number of pin rows
//! ([`DEFAULT_MAX_PINS_PER_WORKSPACE`], or the limit passed to
//! [`Repository::pin_uploads_limited`]); a pin beyond it is refused
//! `limit_exceeded` and pins nothing. The count is read from the table
//! once per workspace and then kept in memory by every pin and cleanup,
//! under one mutex held across their write transactions.
//!
//! Operator abandonment ([`Repository::abandon_pins`], offline) deletes a
//! workspace's unfinished pins and their intents' owners, as the
//! specification allows; [`Repository::pin_summary`] lists what is held.

use redb::{ReadableDatabase, ReadableTable};
use scribe_format::{ErrorCode, ObjectId, OperationId, WorkspaceId};

use crate::error::{MetadataError, Result};
use crate::records::keys;
use crate::repo::Repository;
use crate::tables;

/// Most pins deleted per cleanup transaction.
pub const PIN_BATCH: usize = 512;

/// Default bound on the pin rows one workspace holds in a repository:
/// room for a change set of 4,000,000 entries (the format's limit) with a
/// manifest and a chunk each; about 0.8 GiB of `metadata.redb` at most.
pub const DEFAULT_MAX_PINS_PER_WORKSPACE: u64 = 1 << 23;

/// What one workspace holds in `upload_pins` (see [`Repository::pin_summary`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkspacePins {
    pub workspace: WorkspaceId,
    pub state: PinOwnerState,
    /// Intents with pins, each with its pin count and whether its final
    /// outcome is recorded (cleanup pending).
    pub intents: Vec<(OperationId, u64, bool)>,
    /// Pin rows in all.
    pub pins: u64,
}

/// The registration state of a workspace that holds pins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PinOwnerState {
    /// Registered; `created_ms` is its registration time.
    Registered { created_ms: u64 },
    /// Retired at `retired_ms`: its pins are inactive.
    Retired { retired_ms: u64 },
    /// Never registered (pins written before registration was required).
    Unregistered,
}

/// `meta` key fixing an intent's owner.
pub fn owner_key(intent: &OperationId) -> String {
    format!("upload-owner:{}", intent.to_hex())
}

/// `meta` key queueing an intent's cleanup.
pub fn finished_key(intent: &OperationId) -> String {
    format!("upload-finished:{}", intent.to_hex())
}

fn pin_key(ws: &WorkspaceId, intent: &OperationId, id: &ObjectId) -> Vec<u8> {
    let mut k = Vec::with_capacity(65);
    k.extend_from_slice(&ws.0);
    k.extend_from_slice(&intent.0);
    k.extend_from_slice(&id.to_bytes());
    k
}

impl Repository {
    /// Pin `ids` for the upload of `intent` by `workspace`, within
    /// [`DEFAULT_MAX_PINS_PER_WORKSPACE`].
    pub fn pin_uploads(
        &self,
        workspace: WorkspaceId,
        intent: OperationId,
        ids: &[ObjectId],
    ) -> Result<()> {
        self.pin_uploads_limited(workspace, intent, ids, DEFAULT_MAX_PINS_PER_WORKSPACE)
    }

    /// Pin `ids` for the upload of `intent` by `workspace`, which must be
    /// registered and hold at most `max_pins` pin rows afterwards.
    pub fn pin_uploads_limited(
        &self,
        workspace: WorkspaceId,
        intent: OperationId,
        ids: &[ObjectId],
        max_pins: u64,
    ) -> Result<()> {
        // Concurrent pins share one transaction and one archive
        // publication (`combine.rs`); published before this returns.
        let ids = ids.to_vec();
        self.pin_writes.run(self, move |counts, wtx| {
            let mut meta = wtx.open_table(tables::META)?;
            let st = wtx.open_table(tables::WORKSPACE_STATE)?;
            let ops = wtx.open_table(tables::OPERATIONS)?;
            let registered = wtx.open_table(tables::WORKSPACES)?;
            let mut pins = wtx.open_table(tables::UPLOAD_PINS)?;
            // Every refusal comes before the first write: a refused pin
            // leaves nothing in a transaction it shares with others.
            if st.get(keys::ws_retired(&workspace.0).as_slice())?.is_some() {
                return Err(MetadataError::refused(
                    ErrorCode::WorkspaceRetired,
                    format!("workspace {workspace} is retired"),
                ));
            }
            if registered.get(workspace.0)?.is_none() {
                return Err(MetadataError::refused(
                    ErrorCode::WorkspaceUnregistered,
                    format!(
                        "workspace {workspace} is not registered; register it before uploading"
                    ),
                ));
            }
            let finished = meta.get(finished_key(&intent).as_str())?.is_some();
            if finished || ops.get(intent.0)?.is_some() {
                return Err(MetadataError::refused(
                    ErrorCode::AlreadyExists,
                    format!("operation {intent} already has its outcome; it cannot pin"),
                ));
            }
            let ok = owner_key(&intent);
            let owner = meta.get(ok.as_str())?.map(|g| g.value().to_vec());
            if owner
                .as_ref()
                .is_some_and(|o| o.as_slice() != workspace.0.as_slice())
            {
                return Err(MetadataError::refused(
                    ErrorCode::Forbidden,
                    format!("operation {intent} belongs to another workspace"),
                ));
            }
            let held = match counts.get(&workspace.0) {
                Some(n) => *n,
                None => count_prefix(&pins, &workspace.0)?,
            };
            let mut new_keys = std::collections::BTreeSet::new();
            for id in &ids {
                let k = pin_key(&workspace, &intent, id);
                if pins.get(k.as_slice())?.is_none() {
                    new_keys.insert(k);
                }
            }
            let count = held + new_keys.len() as u64;
            if count > max_pins {
                return Err(MetadataError::refused(
                    ErrorCode::LimitExceeded,
                    format!(
                        "workspace {workspace} would hold {count} upload pins; at most {max_pins} \
                         are kept per workspace (finish or abandon its unfinished submissions)"
                    ),
                ));
            }
            if owner.is_none() {
                meta.insert(ok.as_str(), workspace.0.as_slice())?;
            }
            for k in &new_keys {
                pins.insert(k.as_slice(), [].as_slice())?;
            }
            // Forgotten by the combiner if this transaction is dropped.
            counts.insert(workspace.0, count);
            Ok(())
        })
    }

    /// Every workspace holding pin rows, with its registration state and
    /// its intents (administration: `scribe-server pins list`).
    pub fn pin_summary(&self) -> Result<Vec<WorkspacePins>> {
        let tx = self.db.begin_read()?;
        let st = tx.open_table(tables::WORKSPACE_STATE)?;
        let meta = tx.open_table(tables::META)?;
        let ws_table = tx.open_table(tables::WORKSPACES)?;
        let pins = tx.open_table(tables::UPLOAD_PINS)?;
        let mut out: Vec<WorkspacePins> = Vec::new();
        for row in pins.range::<&[u8]>(..)? {
            let (k, _) = row?;
            let k = k.value();
            if k.len() != 65 {
                return Err(MetadataError::corrupt("an upload pin key is not 65 bytes"));
            }
            let mut ws = [0u8; 16];
            ws.copy_from_slice(&k[..16]);
            let mut op = [0u8; 16];
            op.copy_from_slice(&k[16..32]);
            let op = OperationId(op);
            if out.last().is_none_or(|w| w.workspace.0 != ws) {
                let state = if let Some(v) = st.get(keys::ws_retired(&ws).as_slice())? {
                    PinOwnerState::Retired {
                        retired_ms: crate::records::decode_u64(v.value(), "retirement")?,
                    }
                } else if let Some(row) = ws_table.get(ws)? {
                    PinOwnerState::Registered {
                        created_ms: crate::records::WorkspaceRecord::decode(row.value())?
                            .created_ms,
                    }
                } else {
                    PinOwnerState::Unregistered
                };
                out.push(WorkspacePins {
                    workspace: WorkspaceId(ws),
                    state,
                    intents: Vec::new(),
                    pins: 0,
                });
            }
            let w = out.last_mut().expect("pushed above");
            w.pins += 1;
            match w.intents.last_mut() {
                Some((o, n, _)) if *o == op => *n += 1,
                _ => {
                    let finished = meta.get(finished_key(&op).as_str())?.is_some();
                    w.intents.push((op, 1, finished));
                }
            }
        }
        Ok(out)
    }

    /// Operator abandonment (offline): delete every pin of `workspace`
    /// whose intent has no recorded final outcome, and those intents'
    /// owner markers, in transactions of at most [`PIN_BATCH`] pins.
    /// Accepted history is untouched; intents whose outcome is recorded
    /// are left to their queued cleanup. Returns the pins deleted.
    pub fn abandon_pins(&self, workspace: WorkspaceId) -> Result<u64> {
        let intents: Vec<OperationId> = self
            .pin_summary()?
            .into_iter()
            .filter(|w| w.workspace == workspace)
            .flat_map(|w| w.intents)
            .filter(|(_, _, finished)| !finished)
            .map(|(op, _, _)| op)
            .collect();
        let before: u64 = {
            let tx = self.db.begin_read()?;
            count_prefix(&tx.open_table(tables::UPLOAD_PINS)?, &workspace.0)?
        };
        for op in &intents {
            self.cleanup_pins(&workspace, op)?;
        }
        let after: u64 = {
            let tx = self.db.begin_read()?;
            count_prefix(&tx.open_table(tables::UPLOAD_PINS)?, &workspace.0)?
        };
        Ok(before - after)
    }

    /// Active pins of `workspace` (all intents), as object ids.
    pub fn upload_pins(&self, workspace: WorkspaceId) -> Result<Vec<(OperationId, ObjectId)>> {
        let tx = self.db.begin_read()?;
        let st = tx.open_table(tables::WORKSPACE_STATE)?;
        if st.get(keys::ws_retired(&workspace.0).as_slice())?.is_some() {
            return Ok(Vec::new());
        }
        let meta = tx.open_table(tables::META)?;
        let pins = tx.open_table(tables::UPLOAD_PINS)?;
        let mut out = Vec::new();
        for row in pins.range(workspace.0.as_slice()..)? {
            let (k, _) = row?;
            let k = k.value();
            if !k.starts_with(&workspace.0) {
                break;
            }
            let mut op = [0u8; 16];
            op.copy_from_slice(&k[16..32]);
            let op = OperationId(op);
            if meta.get(finished_key(&op).as_str())?.is_some() {
                continue; // deactivated by its final outcome
            }
            out.push((op, ObjectId::from_bytes(&k[32..])?));
        }
        Ok(out)
    }

    /// Every active pin of every workspace that is not retired, skipping
    /// intents whose final outcome is recorded.
    pub fn active_pins(&self) -> Result<Vec<ObjectId>> {
        let tx = self.db.begin_read()?;
        let st = tx.open_table(tables::WORKSPACE_STATE)?;
        let meta = tx.open_table(tables::META)?;
        let pins = tx.open_table(tables::UPLOAD_PINS)?;
        let mut out = Vec::new();
        for row in pins.range::<&[u8]>(..)? {
            let (k, _) = row?;
            let k = k.value();
            if k.len() != 65 {
                return Err(MetadataError::corrupt("an upload pin key is not 65 bytes"));
            }
            let mut ws = [0u8; 16];
            ws.copy_from_slice(&k[..16]);
            let mut op = [0u8; 16];
            op.copy_from_slice(&k[16..32]);
            if st.get(keys::ws_retired(&ws).as_slice())?.is_some()
                || meta.get(finished_key(&OperationId(op)).as_str())?.is_some()
            {
                continue;
            }
            out.push(ObjectId::from_bytes(&k[32..])?);
        }
        Ok(out)
    }

    /// Roots offline collection must retain: every accepted commit envelope
    /// and change set, every accepted manifest, and every active pin.
    pub fn retained_roots(&self) -> Result<Vec<ObjectId>> {
        let mut out = Vec::new();
        {
            let tx = self.db.begin_read()?;
            let commits = tx.open_table(tables::COMMITS)?;
            for row in commits.range::<u64>(..)? {
                let (_, v) = row?;
                let c = crate::records::CommitRecord::decode(v.value())?;
                out.push(ObjectId::commit(c.commit_id));
                out.push(ObjectId::change_set(c.change_set));
            }
            let manifests = tx.open_table(tables::ACCEPTED_MANIFESTS)?;
            for row in manifests.range::<&[u8]>(..)? {
                let (k, _) = row?;
                let d: [u8; 32] = k
                    .value()
                    .try_into()
                    .map_err(|_| MetadataError::corrupt("accepted manifest key is not 32 bytes"))?;
                out.push(ObjectId::manifest(scribe_format::ManifestId(d)));
            }
        }
        out.extend(self.active_pins()?);
        Ok(out)
    }

    /// Clean up every intent whose final outcome is recorded (startup, and
    /// after each outcome).
    pub fn cleanup_finished_pins(&self) -> Result<()> {
        self.cleanup_finished(None)
    }

    /// Like [`Repository::cleanup_finished_pins`] for a caller nobody waits
    /// for (a server's cleanup after the answers): each final batch waits
    /// up to `patience` for a concurrent upload's pin transaction to share
    /// before it commits alone.
    pub fn cleanup_finished_pins_patiently(&self, patience: std::time::Duration) -> Result<()> {
        self.cleanup_finished(Some(patience))
    }

    /// End the patience of a [`Repository::cleanup_finished_pins_patiently`]
    /// in progress, and of every later one (a server shutting down: the
    /// cleanup commits at once instead of waiting for uploads).
    pub fn hurry_pin_cleanup(&self) {
        self.pin_writes.hurry();
    }

    fn cleanup_finished(&self, patience: Option<std::time::Duration>) -> Result<()> {
        let finished: Vec<(OperationId, WorkspaceId)> = {
            let tx = self.db.begin_read()?;
            let meta = tx.open_table(tables::META)?;
            let mut out = Vec::new();
            for row in meta.range("upload-finished:".."upload-finished;")? {
                let (k, v) = row?;
                let hex = k.value().trim_start_matches("upload-finished:");
                let op = OperationId::from_hex(hex)?;
                let ws: [u8; 16] = v
                    .value()
                    .try_into()
                    .map_err(|_| MetadataError::corrupt("upload-finished is not 16 bytes"))?;
                out.push((op, WorkspaceId(ws)));
            }
            out
        };
        // Intents whose remaining pins fit together in one cleanup
        // transaction (at most PIN_BATCH pins in all) share it: each is
        // final in it (its pins, owner and marker removed together), so a
        // group of accepted submissions costs one cleanup commit, not one
        // per member. An intent with more pins is cleaned alone, in
        // batches of PIN_BATCH.
        let mut shared: Vec<(OperationId, WorkspaceId, Vec<Vec<u8>>)> = Vec::new();
        let mut shared_pins = 0usize;
        for (op, ws) in finished {
            // A bounded read of at most PIN_BATCH + 1 keys outside the write.
            let keys = self.pin_keys_bounded(&ws, &op)?;
            if keys.len() > PIN_BATCH {
                self.cleanup_pins(&ws, &op)?;
                continue;
            }
            if shared_pins + keys.len() > PIN_BATCH {
                self.cleanup_final_batches(std::mem::take(&mut shared), patience)?;
                shared_pins = 0;
            }
            shared_pins += keys.len();
            shared.push((op, ws, keys));
        }
        self.cleanup_final_batches(shared, patience)
    }

    /// At most `PIN_BATCH + 1` pin keys of `ws`'s intent `op`.
    fn pin_keys_bounded(&self, ws: &WorkspaceId, op: &OperationId) -> Result<Vec<Vec<u8>>> {
        let mut prefix = ws.0.to_vec();
        prefix.extend_from_slice(&op.0);
        let tx = self.db.begin_read()?;
        let pins = tx.open_table(tables::UPLOAD_PINS)?;
        let mut out = Vec::new();
        for row in pins.range(prefix.as_slice()..)? {
            let k = row?.0.value().to_vec();
            if !k.starts_with(&prefix) || out.len() > PIN_BATCH {
                break;
            }
            out.push(k);
        }
        Ok(out)
    }

    /// One cleanup transaction that is the final one of every intent in
    /// `intents` (together at most PIN_BATCH pins): their pins, owners and
    /// cleanup markers. With `patience` (nobody waits for it) it goes
    /// through the pin combiner (`combine.rs`): when uploads are pinning it
    /// shares their transaction and archive publication instead of adding
    /// a commit of its own (issue #19: under the 32-client load a separate
    /// cleanup commit per acceptance group was a fifth of the metadata
    /// writer's transactions).
    fn cleanup_final_batches(
        &self,
        intents: Vec<(OperationId, WorkspaceId, Vec<Vec<u8>>)>,
        patience: Option<std::time::Duration>,
    ) -> Result<()> {
        if intents.is_empty() {
            return Ok(());
        }
        let job = move |counts: &mut crate::combine::PinCounts, wtx: &crate::journal::WriteTx| {
            let mut pins = wtx.open_table(tables::UPLOAD_PINS)?;
            let mut meta = wtx.open_table(tables::META)?;
            for (op, ws, keys) in &intents {
                counts.remove(&ws.0);
                // The intent is finalized: it acquires no new pin, so the
                // keys read before this transaction are all it holds.
                for k in keys {
                    pins.remove(k.as_slice())?;
                }
                meta.remove(owner_key(op).as_str())?;
                meta.remove(finished_key(op).as_str())?;
            }
            Ok(())
        };
        match patience {
            Some(p) => self.pin_writes.run_patiently(self, p, job),
            // A caller that waits for it: its own transaction, whose archive
            // publication an enclosing `coalesce_publication` shares with
            // the acceptance before it (the combiner publishes for its
            // members itself).
            None => {
                let mut counts = self
                    .pin_counts
                    .lock()
                    .map_err(|_| MetadataError::Gate("pin counts poisoned".into()))?;
                let wtx = self.write()?;
                job(&mut counts, &wtx)?;
                wtx.commit()
            }
        }
    }

    /// Clean one intent with more than [`PIN_BATCH`] pins, in transactions
    /// of at most that many. Their archive publication is shared: once
    /// after the last (or at an enclosing `coalesce_publication`), not per
    /// transaction (issue #19: an import of 52,073 files left 102,517
    /// pins, 201 transactions, each flushing the archive's segment and
    /// HEAD as well as its own commit). Nothing these transactions remove
    /// is read as live meanwhile: the intent's final outcome deactivated
    /// its pins, and a crash before the publication leaves the archive with
    /// the marker and some pins, whose cleanup resumes after a restore as
    /// at startup.
    fn cleanup_pins(&self, ws: &WorkspaceId, op: &OperationId) -> Result<()> {
        crate::journal::coalesce_publication(&self.archive, || {
            self.cleanup_pins_unpublished(ws, op)
        })
    }

    fn cleanup_pins_unpublished(&self, ws: &WorkspaceId, op: &OperationId) -> Result<()> {
        // Held across the writes so a pin never counts from a stale view;
        // the workspace's count is read again at its next pin.
        let mut counts = self
            .pin_counts
            .lock()
            .map_err(|_| MetadataError::Gate("pin counts poisoned".into()))?;
        counts.remove(&ws.0);
        loop {
            // A bounded read of at most PIN_BATCH + 1 keys outside the write.
            let batch = self.pin_keys_bounded(ws, op)?;
            let last = batch.len() <= PIN_BATCH;
            let mut wtx = self.write()?;
            if !last {
                // Only the last transaction (which also removes the
                // cleanup queue's marker) is flushed, carrying the others;
                // a crash that takes some back leaves the marker, and
                // startup resumes the cleanup (docs/metadata.md, "Staging
                // flushes").
                wtx.set_durability(redb::Durability::None)?;
            }
            {
                let mut pins = wtx.open_table(tables::UPLOAD_PINS)?;
                for k in batch.iter().take(PIN_BATCH) {
                    pins.remove(k.as_slice())?;
                }
                if last {
                    let mut meta = wtx.open_table(tables::META)?;
                    meta.remove(owner_key(op).as_str())?;
                    meta.remove(finished_key(op).as_str())?;
                }
            }
            wtx.commit()?;
            if last {
                return Ok(());
            }
        }
    }
}

/// Rows of `table` whose key starts with `prefix`.
fn count_prefix(
    table: &impl ReadableTable<&'static [u8], &'static [u8]>,
    prefix: &[u8],
) -> Result<u64> {
    let mut n = 0;
    for row in table.range(prefix..)? {
        if !row?.0.value().starts_with(prefix) {
            break;
        }
        n += 1;
    }
    Ok(n)
}

/// In an outcome's transaction: queue cleanup when the operation pinned.
pub(crate) fn finish_intent(
    meta: &mut crate::journal::JTable<'_, &'static str, &'static [u8]>,
    op: &OperationId,
) -> Result<bool> {
    let owner = meta
        .get(owner_key(op).as_str())?
        .map(|g| g.value().to_vec());
    match owner {
        Some(ws) => {
            meta.insert(finished_key(op).as_str(), ws.as_slice())?;
            Ok(true)
        }
        None => Ok(false),
    }
}

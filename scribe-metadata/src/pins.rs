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
//! not pin.

use redb::{Durability, ReadableDatabase, ReadableTable};
use scribe_format::{ErrorCode, ObjectId, OperationId, WorkspaceId};

use crate::error::{MetadataError, Result};
use crate::records::keys;
use crate::repo::Repository;
use crate::tables;

/// Most pins deleted per cleanup transaction.
pub const PIN_BATCH: usize = 512;

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
    /// Pin `ids` for the upload of `intent` by `workspace`.
    pub fn pin_uploads(
        &self,
        workspace: WorkspaceId,
        intent: OperationId,
        ids: &[ObjectId],
    ) -> Result<()> {
        let _gate = self
            .gate
            .lock()
            .map_err(|_| MetadataError::Gate("publication gate poisoned".into()))?;
        let mut wtx = self.db.begin_write()?;
        wtx.set_durability(Durability::Immediate)?;
        {
            let mut meta = wtx.open_table(tables::META)?;
            let st = wtx.open_table(tables::WORKSPACE_STATE)?;
            let ops = wtx.open_table(tables::OPERATIONS)?;
            let mut pins = wtx.open_table(tables::UPLOAD_PINS)?;
            if st.get(keys::ws_retired(&workspace.0).as_slice())?.is_some() {
                return Err(MetadataError::refused(
                    ErrorCode::WorkspaceRetired,
                    format!("workspace {workspace} is retired"),
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
            match owner {
                Some(o) if o.as_slice() != workspace.0.as_slice() => {
                    return Err(MetadataError::refused(
                        ErrorCode::Forbidden,
                        format!("operation {intent} belongs to another workspace"),
                    ))
                }
                Some(_) => {}
                None => {
                    meta.insert(ok.as_str(), workspace.0.as_slice())?;
                }
            }
            for id in ids {
                pins.insert(pin_key(&workspace, &intent, id).as_slice(), [].as_slice())?;
            }
        }
        wtx.commit()?;
        Ok(())
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
    pub(crate) fn cleanup_finished_pins(&self) -> Result<()> {
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
        for (op, ws) in finished {
            self.cleanup_pins(&ws, &op)?;
        }
        Ok(())
    }

    fn cleanup_pins(&self, ws: &WorkspaceId, op: &OperationId) -> Result<()> {
        let mut prefix = ws.0.to_vec();
        prefix.extend_from_slice(&op.0);
        loop {
            // A bounded read of at most PIN_BATCH + 1 keys outside the write.
            let batch: Vec<Vec<u8>> = {
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
                out
            };
            let last = batch.len() <= PIN_BATCH;
            let mut wtx = self.db.begin_write()?;
            wtx.set_durability(Durability::Immediate)?;
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

/// In an outcome's transaction: queue cleanup when the operation pinned.
pub(crate) fn finish_intent(
    meta: &mut redb::Table<'_, &'static str, &'static [u8]>,
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

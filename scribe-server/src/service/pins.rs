//! Upload pins (specification, "Atomic publication and upload lifecycle
//! profile 1").
//!
//! ```text
//! upload_pins                      workspace [16] ‖ intent [16] ‖ kind u8 ‖ digest [32] → empty
//! meta/upload-owner:<intent hex>   workspace [16]: fixes ownership before transfer
//! meta/upload-finished:<intent>    workspace [16]: durable cleanup queue
//! ```
//!
//! The intent is the submission's operation id. A pin is written (one
//! Immediate transaction) before the server accepts the first byte of an
//! object, so the object is protected from offline collection from then
//! until the operation's final outcome. Pinning is idempotent and may name
//! absent objects. A retired workspace cannot pin; a finished intent cannot
//! pin again. A final outcome writes `upload-finished`, then deletes the
//! intent's pins at most 512 per transaction; the last transaction removes
//! the owner and the marker. [`resume_cleanup`] finishes queued cleanups on
//! startup and in `recover-submissions`.
//!
//! INTERIM: `scribe-metadata` has the `upload_pins` table but no API for
//! it yet, so this module writes the rows through `Repository::database()`.

use redb::{Durability, ReadableDatabase, ReadableTable};
use scribe_format::{ErrorCode, ObjectId, ObjectKind, OperationId, WorkspaceId};
use scribe_metadata::records::keys;
use scribe_metadata::tables::{META, UPLOAD_PINS, WORKSPACE_STATE};
use scribe_metadata::{MetadataError, Repository};

use super::Failure;

/// Most pins deleted by one cleanup transaction.
pub const CLEANUP_BATCH: usize = 512;

const OWNER: &str = "upload-owner:";
const FINISHED: &str = "upload-finished:";

fn db_err(e: impl Into<redb::Error>) -> Failure {
    Failure::from(MetadataError::Db(e.into()))
}

fn owner_key(intent: &OperationId) -> String {
    format!("{OWNER}{}", intent.to_hex())
}

fn finished_key(intent: &OperationId) -> String {
    format!("{FINISHED}{}", intent.to_hex())
}

fn pin_key(ws: &WorkspaceId, intent: &OperationId, id: &ObjectId) -> [u8; 65] {
    let mut k = [0u8; 65];
    k[..16].copy_from_slice(&ws.0);
    k[16..32].copy_from_slice(&intent.0);
    k[32] = id.kind.byte();
    k[33..].copy_from_slice(&id.digest);
    k
}

/// Pin `id` for `workspace`'s upload intent `intent`, durably.
pub fn pin(
    repo: &Repository,
    workspace: WorkspaceId,
    intent: OperationId,
    id: &ObjectId,
) -> Result<(), Failure> {
    let db = repo.database();
    let key = pin_key(&workspace, &intent, id);
    // Already pinned: nothing to write.
    {
        let tx = db.begin_read().map_err(db_err)?;
        let pins = tx.open_table(UPLOAD_PINS).map_err(db_err)?;
        if pins.get(key.as_slice()).map_err(db_err)?.is_some() {
            return Ok(());
        }
    }
    let mut tx = db.begin_write().map_err(db_err)?;
    tx.set_durability(Durability::Immediate).map_err(db_err)?;
    {
        let st = tx.open_table(WORKSPACE_STATE).map_err(db_err)?;
        if st
            .get(keys::ws_retired(&workspace.0).as_slice())
            .map_err(db_err)?
            .is_some()
        {
            return Err(Failure::new(
                ErrorCode::WorkspaceRetired,
                format!("workspace {workspace} is retired"),
            ));
        }
        let mut meta = tx.open_table(META).map_err(db_err)?;
        if meta
            .get(finished_key(&intent).as_str())
            .map_err(db_err)?
            .is_some()
        {
            return Err(Failure::new(
                ErrorCode::OperationIntentMismatch,
                format!("operation {intent} has a final outcome; upload under a new operation"),
            ));
        }
        let ok = owner_key(&intent);
        let owner = meta
            .get(ok.as_str())
            .map_err(db_err)?
            .map(|v| v.value().to_vec());
        match owner {
            Some(o) if o != workspace.0 => {
                return Err(Failure::new(
                    ErrorCode::Forbidden,
                    format!("operation {intent} belongs to another workspace"),
                ))
            }
            Some(_) => {}
            None => {
                meta.insert(ok.as_str(), workspace.0.as_slice())
                    .map_err(db_err)?;
            }
        }
        let mut pins = tx.open_table(UPLOAD_PINS).map_err(db_err)?;
        pins.insert(key.as_slice(), [].as_slice()).map_err(db_err)?;
    }
    tx.commit().map_err(db_err)?;
    Ok(())
}

/// Deactivate `intent` after its final outcome and delete its pins.
pub fn finish(repo: &Repository, intent: OperationId) -> Result<(), Failure> {
    let db = repo.database();
    let owner = {
        let tx = db.begin_read().map_err(db_err)?;
        let meta = tx.open_table(META).map_err(db_err)?;
        let v = meta
            .get(owner_key(&intent).as_str())
            .map_err(db_err)?
            .map(|v| v.value().to_vec());
        v
    };
    let Some(owner) = owner else {
        return Ok(()); // nothing was pinned under this intent
    };
    let mut tx = db.begin_write().map_err(db_err)?;
    tx.set_durability(Durability::Immediate).map_err(db_err)?;
    {
        let mut meta = tx.open_table(META).map_err(db_err)?;
        meta.insert(finished_key(&intent).as_str(), owner.as_slice())
            .map_err(db_err)?;
    }
    tx.commit().map_err(db_err)?;
    cleanup(repo, intent, &owner)
}

fn cleanup(repo: &Repository, intent: OperationId, owner: &[u8]) -> Result<(), Failure> {
    let db = repo.database();
    let mut prefix = owner.to_vec();
    prefix.extend_from_slice(&intent.0);
    loop {
        // A bounded read (at most 513 keys) finds the batch outside the write.
        let batch: Vec<Vec<u8>> = {
            let tx = db.begin_read().map_err(db_err)?;
            let pins = tx.open_table(UPLOAD_PINS).map_err(db_err)?;
            let mut out = Vec::new();
            for row in pins.range(prefix.as_slice()..).map_err(db_err)? {
                let (k, _) = row.map_err(db_err)?;
                if !k.value().starts_with(&prefix) || out.len() > CLEANUP_BATCH {
                    break;
                }
                out.push(k.value().to_vec());
            }
            out
        };
        let last = batch.len() <= CLEANUP_BATCH;
        let mut tx = db.begin_write().map_err(db_err)?;
        tx.set_durability(Durability::Immediate).map_err(db_err)?;
        {
            let mut pins = tx.open_table(UPLOAD_PINS).map_err(db_err)?;
            for k in batch.iter().take(CLEANUP_BATCH) {
                pins.remove(k.as_slice()).map_err(db_err)?;
            }
            if last {
                let mut meta = tx.open_table(META).map_err(db_err)?;
                meta.remove(owner_key(&intent).as_str()).map_err(db_err)?;
                meta.remove(finished_key(&intent).as_str())
                    .map_err(db_err)?;
            }
        }
        tx.commit().map_err(db_err)?;
        if last {
            return Ok(());
        }
    }
}

/// Finish every cleanup queued by a final outcome before a stop.
pub fn resume_cleanup(repo: &Repository) -> Result<(), MetadataError> {
    let queued: Vec<(OperationId, Vec<u8>)> = {
        let tx = repo.database().begin_read()?;
        let meta = tx.open_table(META)?;
        let mut out = Vec::new();
        for row in meta.range(FINISHED..)? {
            let (k, v) = row?;
            let Some(hex) = k.value().strip_prefix(FINISHED) else {
                break;
            };
            if let Ok(op) = OperationId::from_hex(hex) {
                out.push((op, v.value().to_vec()));
            }
        }
        out
    };
    for (op, owner) in queued {
        cleanup(repo, op, &owner).map_err(|f| MetadataError::Objects(f.message))?;
    }
    Ok(())
}

/// Make a retired workspace's pins inactive (deleted, bounded batches).
pub fn retire(repo: &Repository, workspace: WorkspaceId) -> Result<(), Failure> {
    let db = repo.database();
    loop {
        let batch: Vec<Vec<u8>> = {
            let tx = db.begin_read().map_err(db_err)?;
            let pins = tx.open_table(UPLOAD_PINS).map_err(db_err)?;
            let mut out = Vec::new();
            for row in pins.range(workspace.0.as_slice()..).map_err(db_err)? {
                let (k, _) = row.map_err(db_err)?;
                if !k.value().starts_with(&workspace.0) || out.len() == CLEANUP_BATCH {
                    break;
                }
                out.push(k.value().to_vec());
            }
            out
        };
        if batch.is_empty() {
            return Ok(());
        }
        let mut tx = db.begin_write().map_err(db_err)?;
        tx.set_durability(Durability::Immediate).map_err(db_err)?;
        {
            let mut pins = tx.open_table(UPLOAD_PINS).map_err(db_err)?;
            for k in &batch {
                pins.remove(k.as_slice()).map_err(db_err)?;
            }
        }
        tx.commit().map_err(db_err)?;
    }
}

/// Every actively pinned object (roots of offline collection).
pub fn active(repo: &Repository) -> Result<Vec<ObjectId>, MetadataError> {
    let tx = repo.database().begin_read()?;
    let pins = tx.open_table(UPLOAD_PINS)?;
    let mut out = Vec::new();
    for row in pins.range::<&[u8]>(..)? {
        let (k, _) = row?;
        let k = k.value();
        if k.len() != 65 {
            return Err(MetadataError::Corrupt(format!(
                "upload pin key of {} bytes",
                k.len()
            )));
        }
        let kind = ObjectKind::from_byte(k[32])?;
        let mut digest = [0u8; 32];
        digest.copy_from_slice(&k[33..]);
        out.push(ObjectId::new(kind, digest));
    }
    Ok(out)
}

/// Number of pins held under `intent` by `workspace` (tests, status).
pub fn count(
    repo: &Repository,
    workspace: WorkspaceId,
    intent: OperationId,
) -> Result<usize, MetadataError> {
    let tx = repo.database().begin_read()?;
    let pins = tx.open_table(UPLOAD_PINS)?;
    let mut prefix = workspace.0.to_vec();
    prefix.extend_from_slice(&intent.0);
    let mut n = 0;
    for row in pins.range(prefix.as_slice()..)? {
        let (k, _) = row?;
        if !k.value().starts_with(&prefix) {
            break;
        }
        n += 1;
    }
    Ok(n)
}

//! Upload pins (specification, "Atomic publication and upload lifecycle
//! profile 1"), through `scribe-metadata`'s pin API.
//!
//! The intent is the submission's operation id; `ObjectPut` names the
//! workspace that owns it. The first piece of each object pins it
//! ([`pin`], one Immediate transaction) before any byte is accepted.
//! Metadata refuses pins of retired workspaces, of another workspace's
//! intent, and of intents with a recorded outcome; it queues cleanup in the
//! outcome's transaction, deletes pins in batches of 512 and resumes
//! cleanup at open.

use redb::ReadableDatabase;
use scribe_format::{ObjectId, OperationId, WorkspaceId};
use scribe_metadata::pins::finished_key;
use scribe_metadata::records::keys;
use scribe_metadata::tables::{META, UPLOAD_PINS, WORKSPACE_STATE};
use scribe_metadata::{MetadataError, Repository};

use super::Failure;

/// Pin `id` for `workspace`'s upload intent `intent`, durably.
pub fn pin(
    repo: &Repository,
    workspace: WorkspaceId,
    intent: OperationId,
    id: &ObjectId,
) -> Result<(), Failure> {
    repo.pin_uploads(workspace, intent, std::slice::from_ref(id))?;
    Ok(())
}

/// Every actively pinned object (roots of offline collection): pins of
/// workspaces that are not retired, under intents without a final outcome.
///
/// INTERIM: metadata offers active pins per workspace only, and retired
/// workspaces cannot be listed, so this reads the `upload_pins` table.
pub fn active(repo: &Repository) -> Result<Vec<ObjectId>, MetadataError> {
    let tx = repo.database().begin_read()?;
    let pins = tx.open_table(UPLOAD_PINS)?;
    let meta = tx.open_table(META)?;
    let st = tx.open_table(WORKSPACE_STATE)?;
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

/// Number of active pins `workspace` holds under `intent`.
pub fn count(
    repo: &Repository,
    workspace: WorkspaceId,
    intent: OperationId,
) -> Result<usize, MetadataError> {
    Ok(repo
        .upload_pins(workspace)?
        .into_iter()
        .filter(|(op, _)| *op == intent)
        .count())
}

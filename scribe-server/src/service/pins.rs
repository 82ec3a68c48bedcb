//! Upload pins (specification, "Atomic publication and upload lifecycle
//! profile 1"), through `scribe-metadata`'s pin API.
//!
//! The intent is the submission's operation id; `ObjectPut` names the
//! workspace that owns it. The first piece of each object pins it
//! ([`pin`], one Immediate transaction) before any byte is accepted.
//! Metadata refuses pins of retired and of unregistered workspaces, of
//! another workspace's intent, of intents with a recorded outcome, and
//! beyond the service's bound on pins per workspace; it queues cleanup in the
//! outcome's transaction, deletes pins in batches of 512 and resumes
//! cleanup at open. The service runs that cleanup after answering
//! (`cleanup.rs`); a pin refused at the bound cleans up first and is tried
//! once more.

use scribe_format::{ErrorCode, ObjectId, OperationId, WorkspaceId};
use scribe_metadata::{MetadataError, Repository};

use super::Failure;

/// Pin `ids` for `workspace`'s upload intent `intent`, durably, within
/// `max_pins` per workspace.
pub fn pin(
    repo: &Repository,
    workspace: WorkspaceId,
    intent: OperationId,
    ids: &[ObjectId],
    max_pins: u64,
) -> Result<(), Failure> {
    match repo.pin_uploads_limited(workspace, intent, ids, max_pins) {
        // Finished intents' pins are cleaned up after their answer
        // (`cleanup.rs`): at the bound, clean up now and count again, so
        // an upload right after a submission finds the room it freed.
        Err(e) if e.code() == ErrorCode::LimitExceeded => {
            repo.cleanup_finished_pins()?;
            repo.pin_uploads_limited(workspace, intent, ids, max_pins)?;
        }
        r => r?,
    }
    Ok(())
}

/// Every actively pinned object (roots of offline collection): pins of
/// workspaces that are not retired, under intents without a final outcome.
pub fn active(repo: &Repository) -> Result<Vec<ObjectId>, MetadataError> {
    repo.active_pins()
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

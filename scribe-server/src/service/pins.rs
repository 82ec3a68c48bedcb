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

use scribe_format::{ObjectId, OperationId, WorkspaceId};
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

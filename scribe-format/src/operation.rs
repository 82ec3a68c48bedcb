//! The operation fingerprint (specification section 8).
//!
//! ```text
//! blake3("scribe:operation-fingerprint:v3\0" ‖ [16] repository ‖ [16] incarnation
//!        ‖ [16] branch ‖ [16] workspace ‖ [32] change set id
//!        ‖ u64 message length ‖ message ‖ u8 keep locks)
//! ```
//!
//! It records a submission's intent so a retry with the same operation id
//! is recognised. The author is attribution, not intent, and is not part of
//! it: an authenticated server replaces the submitted author, so covering
//! it would refuse a legitimate retry.

use crate::bytes::Put;
use crate::id::{
    hash_with_domain, BranchId, ChangeSetId, RepositoryId, WorkspaceId,
    OPERATION_FINGERPRINT_DOMAIN,
};

/// The fingerprint of a submit's intent.
pub fn operation_fingerprint(
    repository: RepositoryId,
    incarnation: [u8; 16],
    branch: BranchId,
    workspace: WorkspaceId,
    change_set: ChangeSetId,
    message: &str,
    keep_locks: bool,
) -> [u8; 32] {
    let mut bytes = Vec::with_capacity(16 * 4 + 32 + 8 + message.len() + 1);
    bytes.put_bytes(repository.as_bytes());
    bytes.put_bytes(&incarnation);
    bytes.put_bytes(branch.as_bytes());
    bytes.put_bytes(workspace.as_bytes());
    bytes.put_bytes(change_set.as_bytes());
    bytes.put_u64(message.len() as u64);
    bytes.put_bytes(message.as_bytes());
    bytes.put_u8(u8::from(keep_locks));
    hash_with_domain(OPERATION_FINGERPRINT_DOMAIN, &bytes)
}

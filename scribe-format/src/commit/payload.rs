//! Commit payload v1 (specification section 4.3.1).
//!
//! ```text
//! u16 version = 1
//! [16] repository id
//! [16] branch id
//! u64 change number            (≥ 1)
//! u64 parent change            (0 = none; must be < change)
//! u8  branched-from present    (0 or 1)
//!   if 1: [16] source branch id, u64 source change
//! [32] change set id
//! [16] operation id
//! [16] workspace id
//! u64 timestamp, Unix milliseconds UTC
//! str16 author                 (≤ 256 bytes)
//! str32 message                (≤ 65,536 bytes)
//! ```

use crate::bytes::{Put, Reader};
use crate::error::FormatError;
use crate::id::{BranchId, ChangeSetId, OperationId, RepositoryId, WorkspaceId};
use crate::limits::{MAX_AUTHOR_BYTES, MAX_MESSAGE_BYTES};

use super::rule;

/// The payload version written and read.
pub const PAYLOAD_VERSION: u16 = 1;
/// The shortest payload: no branch point, empty author and message.
pub const MIN_PAYLOAD_LEN: usize = 2 + 16 + 16 + 8 + 8 + 1 + 32 + 16 + 16 + 8 + 2 + 4;
/// The longest payload: a branch point, the longest author and message.
pub const MAX_PAYLOAD_LEN: usize = MIN_PAYLOAD_LEN + 16 + 8 + MAX_AUTHOR_BYTES + MAX_MESSAGE_BYTES;

/// Where a branch was created from: its first commit records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BranchPoint {
    pub branch: BranchId,
    pub change: u64,
}

/// A v1 commit payload: what was accepted, where, by whom, when.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CommitPayload {
    pub repository: RepositoryId,
    pub branch: BranchId,
    /// The repository-wide change number, at least 1.
    pub change: u64,
    /// The previous change on the branch; 0 for none. Below `change`.
    pub parent_change: u64,
    pub branched_from: Option<BranchPoint>,
    pub change_set: ChangeSetId,
    pub operation: OperationId,
    pub workspace: WorkspaceId,
    /// Unix milliseconds, UTC.
    pub timestamp_ms: u64,
    /// At most 256 bytes.
    pub author: String,
    /// At most 65,536 bytes.
    pub message: String,
}

impl CommitPayload {
    /// Check the payload's own rules.
    pub fn validate(&self) -> Result<(), FormatError> {
        if self.change == 0 {
            return Err(FormatError::invalid(
                rule::CHANGE,
                "the change number must be at least 1",
            ));
        }
        if self.parent_change >= self.change {
            return Err(FormatError::invalid(
                rule::PARENT_CHANGE,
                format!(
                    "parent change {} is not below change {}",
                    self.parent_change, self.change
                ),
            ));
        }
        if self.author.len() > MAX_AUTHOR_BYTES {
            return Err(FormatError::LimitExceeded {
                what: rule::AUTHOR,
                limit: MAX_AUTHOR_BYTES as u64,
                actual: self.author.len() as u64,
            });
        }
        if self.message.len() > MAX_MESSAGE_BYTES {
            return Err(FormatError::LimitExceeded {
                what: rule::MESSAGE,
                limit: MAX_MESSAGE_BYTES as u64,
                actual: self.message.len() as u64,
            });
        }
        Ok(())
    }

    /// The encoded length.
    pub fn encoded_len(&self) -> usize {
        MIN_PAYLOAD_LEN
            + self.branched_from.map_or(0, |_| 16 + 8)
            + self.author.len()
            + self.message.len()
    }

    /// Append the canonical bytes; refuses a payload that breaks a rule.
    pub fn encode_into(&self, out: &mut Vec<u8>) -> Result<(), FormatError> {
        self.validate()?;
        out.reserve(self.encoded_len());
        out.put_u16(PAYLOAD_VERSION);
        out.put_bytes(self.repository.as_bytes());
        out.put_bytes(self.branch.as_bytes());
        out.put_u64(self.change);
        out.put_u64(self.parent_change);
        match &self.branched_from {
            None => out.put_u8(0),
            Some(point) => {
                out.put_u8(1);
                out.put_bytes(point.branch.as_bytes());
                out.put_u64(point.change);
            }
        }
        out.put_bytes(self.change_set.as_bytes());
        out.put_bytes(self.operation.as_bytes());
        out.put_bytes(self.workspace.as_bytes());
        out.put_u64(self.timestamp_ms);
        out.put_bytes16(self.author.as_bytes());
        out.put_bytes32(self.message.as_bytes());
        Ok(())
    }

    /// The canonical bytes; refuses a payload that breaks a rule.
    pub fn encode(&self) -> Result<Vec<u8>, FormatError> {
        let mut out = Vec::new();
        self.encode_into(&mut out)?;
        Ok(out)
    }

    /// Decode exactly one payload: trailing bytes are refused.
    pub fn decode(bytes: &[u8]) -> Result<CommitPayload, FormatError> {
        let mut r = Reader::new(bytes);
        let version = r.u16(rule::PAYLOAD_VERSION)?;
        if version != PAYLOAD_VERSION {
            return Err(FormatError::UnsupportedVersion {
                what: rule::PAYLOAD_VERSION,
                version: version.into(),
            });
        }
        let repository = RepositoryId(r.array("commit repository id")?);
        let branch = BranchId(r.array("commit branch id")?);
        let change = r.u64(rule::CHANGE)?;
        let parent_change = r.u64(rule::PARENT_CHANGE)?;
        let branched_from = if r.flag("commit branched-from present")? {
            Some(BranchPoint {
                branch: BranchId(r.array("commit branched-from branch")?),
                change: r.u64("commit branched-from change")?,
            })
        } else {
            None
        };
        let change_set = ChangeSetId(r.array("commit change set id")?);
        let operation = OperationId(r.array("commit operation id")?);
        let workspace = WorkspaceId(r.array("commit workspace id")?);
        let timestamp_ms = r.u64("commit timestamp")?;
        let author = r.str16(rule::AUTHOR, MAX_AUTHOR_BYTES)?.to_owned();
        let message = r.str32(rule::MESSAGE, MAX_MESSAGE_BYTES)?.to_owned();
        r.finish("commit payload")?;
        let payload = CommitPayload {
            repository,
            branch,
            change,
            parent_change,
            branched_from,
            change_set,
            operation,
            workspace,
            timestamp_ms,
            author,
            message,
        };
        payload.validate()?;
        Ok(payload)
    }
}

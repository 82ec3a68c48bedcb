//! Commits (specification sections 4.3, 4.3.1, 12 and "Cherry-pick
//! provenance").
//!
//! Every accepted change is written as a v5 envelope, [`CommitEnvelopeV5`],
//! wrapping a v1 [`CommitPayload`]. Stored commits of versions 1 (bare
//! payload), 2 (merge) and 3 (cherry-pick) remain readable through
//! [`StoredCommit`] and keep the identities they were accepted with; they
//! are never written again. Version 4 and unknown versions are refused as
//! [`FormatError::UnsupportedVersion`].
//!
//! A [`CommitId`] is `blake3("scribe:commit:vN\0" ‖ bytes)` where `N` is the
//! leading version word ([`crate::id::commit_domain`]).
//!
//! Commits are small (at most about 66 KB), so only owned values are
//! offered.

mod envelope;
pub mod legacy;
mod payload;

pub use envelope::{
    CommitEnvelopeV5, Origin, ORIGIN_CHERRY_PICK, ORIGIN_MERGE, ORIGIN_NONE, VERSION_V5,
};
pub use payload::{BranchPoint, CommitPayload, MAX_PAYLOAD_LEN, MIN_PAYLOAD_LEN, PAYLOAD_VERSION};

use crate::bytes::Reader;
use crate::error::FormatError;
use crate::id::{commit_domain, hash_with_domain, BranchId, CommitId};

/// Names of the commit rules, used as the `what` of the errors that
/// enforce them.
pub mod rule {
    pub const VERSION: &str = "commit version";
    pub const PAYLOAD_VERSION: &str = "commit payload version";
    pub const CHANGE: &str = "commit change number";
    pub const PARENT_CHANGE: &str = "commit parent change below change";
    pub const AUTHOR: &str = "commit author";
    pub const MESSAGE: &str = "commit message";
    pub const PAYLOAD_LENGTH: &str = "commit payload length";
    pub const PARENT_COMMIT: &str = "commit parent commit present exactly with a parent change";
    pub const ORIGIN: &str = "commit origin";
    pub const ORIGIN_BRANCH: &str = "commit origin on a different branch";
    pub const ORIGIN_CHANGE: &str = "commit origin at an earlier nonzero change";
    pub const LEGACY_MARKER: &str = "commit legacy source marker";
}

/// A commit as stored, in any version this build reads.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum StoredCommit {
    /// Version 1: the bare payload. Legacy, never written.
    V1(CommitPayload),
    /// Version 2: a merge before envelopes were chained. Legacy, never written.
    V2 {
        payload: CommitPayload,
        merged_branch: BranchId,
        merged_change: u64,
    },
    /// Version 3: a cherry-pick before envelopes were chained. Legacy,
    /// never written.
    V3 {
        payload: CommitPayload,
        source_branch: BranchId,
        source_change: u64,
    },
    /// Version 5: the chained envelope every new commit uses.
    V5(CommitEnvelopeV5),
}

impl StoredCommit {
    /// Decode by the leading version word. Versions 4 and unknown words
    /// are refused as [`FormatError::UnsupportedVersion`].
    pub fn decode(bytes: &[u8]) -> Result<StoredCommit, FormatError> {
        let version = Reader::new(bytes).u16(rule::VERSION)?;
        match version {
            PAYLOAD_VERSION => CommitPayload::decode(bytes).map(StoredCommit::V1),
            2 => legacy::decode_v2_v3(2, bytes).map(|(payload, branch, change)| StoredCommit::V2 {
                payload,
                merged_branch: branch,
                merged_change: change,
            }),
            3 => legacy::decode_v2_v3(3, bytes).map(|(payload, branch, change)| StoredCommit::V3 {
                payload,
                source_branch: branch,
                source_change: change,
            }),
            VERSION_V5 => CommitEnvelopeV5::decode(bytes).map(StoredCommit::V5),
            v => Err(FormatError::UnsupportedVersion {
                what: rule::VERSION,
                version: v.into(),
            }),
        }
    }

    /// Re-encode the bytes this value was decoded from. New commits are
    /// written only through [`CommitEnvelopeV5::encode`]; the legacy arms
    /// exist so stored commits round-trip and fixtures can be generated.
    pub fn encode(&self) -> Result<Vec<u8>, FormatError> {
        match self {
            StoredCommit::V1(payload) => payload.encode(),
            StoredCommit::V2 {
                payload,
                merged_branch,
                merged_change,
            } => legacy::encode_v2_v3(2, payload, *merged_branch, *merged_change),
            StoredCommit::V3 {
                payload,
                source_branch,
                source_change,
            } => legacy::encode_v2_v3(3, payload, *source_branch, *source_change),
            StoredCommit::V5(envelope) => envelope.encode(),
        }
    }

    /// The version word.
    pub fn version(&self) -> u16 {
        match self {
            StoredCommit::V1(_) => 1,
            StoredCommit::V2 { .. } => 2,
            StoredCommit::V3 { .. } => 3,
            StoredCommit::V5(_) => VERSION_V5,
        }
    }

    /// The identity, hashed under the domain of this value's version.
    pub fn id(&self) -> Result<CommitId, FormatError> {
        commit_id(&self.encode()?)
    }

    /// The v1 payload every version carries.
    pub fn payload(&self) -> &CommitPayload {
        match self {
            StoredCommit::V1(payload)
            | StoredCommit::V2 { payload, .. }
            | StoredCommit::V3 { payload, .. } => payload,
            StoredCommit::V5(envelope) => &envelope.payload,
        }
    }

    /// The merged branch head, for v2 and v5 merges.
    pub fn merge_parent(&self) -> Option<(BranchId, u64)> {
        match self {
            StoredCommit::V2 {
                merged_branch,
                merged_change,
                ..
            } => Some((*merged_branch, *merged_change)),
            StoredCommit::V5(CommitEnvelopeV5 {
                origin: Origin::Merge { branch, change, .. },
                ..
            }) => Some((*branch, *change)),
            _ => None,
        }
    }

    /// The cherry-pick source, for v3 and v5 cherry-picks.
    pub fn cherry_pick_source(&self) -> Option<(BranchId, u64)> {
        match self {
            StoredCommit::V3 {
                source_branch,
                source_change,
                ..
            } => Some((*source_branch, *source_change)),
            StoredCommit::V5(CommitEnvelopeV5 {
                origin: Origin::CherryPick { branch, change },
                ..
            }) => Some((*branch, *change)),
            _ => None,
        }
    }

    /// Whether this commit carries identity links (only v5 does; `doctor`
    /// warns about the others).
    pub fn is_chained(&self) -> bool {
        matches!(self, StoredCommit::V5(_))
    }
}

/// The identity of stored commit bytes: `blake3("scribe:commit:vN\0" ‖
/// bytes)` for the leading version word `N`. Hashes version 4 under its own
/// domain (it has one, though no reader decodes it); refuses unknown words
/// and input shorter than the version word.
pub fn commit_id(bytes: &[u8]) -> Result<CommitId, FormatError> {
    let version = Reader::new(bytes).u16(rule::VERSION)?;
    let domain = commit_domain(version).ok_or(FormatError::UnsupportedVersion {
        what: rule::VERSION,
        version: version.into(),
    })?;
    Ok(CommitId(hash_with_domain(domain, bytes)))
}

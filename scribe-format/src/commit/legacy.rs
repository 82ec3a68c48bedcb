//! Commit envelopes v2 (merge) and v3 (cherry-pick), accepted before
//! envelopes were chained (specification sections 4.3, 12 and "Cherry-pick
//! provenance"). Version 1 is the bare payload.
//!
//! ```text
//! v2: u16 2 ‖ u32 payload length ‖ payload ‖ u8 1 ‖ [16] merged branch ‖ u64 merged change
//! v3: u16 3 ‖ u32 payload length ‖ payload ‖ u8 1 ‖ [16] source branch ‖ u64 source change
//! ```
//!
//! They stay readable with the identities they were accepted with. The
//! encoders here exist for golden fixtures and round trips only: they are
//! never used to write a new commit, because Scribe writes only v5
//! ([`super::CommitEnvelopeV5`]).

use crate::bytes::{Put, Reader};
use crate::error::FormatError;
use crate::id::BranchId;

use super::envelope::{check_origin, put_wrapped, read_wrapped};
use super::payload::CommitPayload;
use super::rule;

/// Encode a legacy v2 or v3 envelope (`version` 2 or 3). Never used to
/// write new commits.
#[doc(hidden)]
pub fn encode_v2_v3(
    version: u16,
    payload: &CommitPayload,
    branch: BranchId,
    change: u64,
) -> Result<Vec<u8>, FormatError> {
    debug_assert!(version == 2 || version == 3);
    check_origin(payload, branch, change)?;
    let mut out = Vec::with_capacity(2 + 4 + payload.encoded_len() + 1 + 16 + 8);
    out.put_u16(version);
    put_wrapped(&mut out, payload)?;
    out.put_u8(1);
    out.put_bytes(branch.as_bytes());
    out.put_u64(change);
    Ok(out)
}

/// Decode a legacy v2 or v3 envelope whose version word is `version`.
pub(crate) fn decode_v2_v3(
    version: u16,
    bytes: &[u8],
) -> Result<(CommitPayload, BranchId, u64), FormatError> {
    let mut r = Reader::new(bytes);
    let word = r.u16(rule::VERSION)?;
    if word != version {
        return Err(FormatError::UnsupportedVersion {
            what: rule::VERSION,
            version: word.into(),
        });
    }
    let payload = read_wrapped(&mut r)?;
    let marker = r.u8(rule::LEGACY_MARKER)?;
    if marker != 1 {
        return Err(FormatError::InvalidValue {
            what: rule::LEGACY_MARKER,
            value: marker.into(),
            reason: "a v2 or v3 envelope always carries its source (u8 1)",
        });
    }
    let branch = BranchId(r.array("commit source branch")?);
    let change = r.u64("commit source change")?;
    r.finish("commit envelope")?;
    check_origin(&payload, branch, change)?;
    Ok((payload, branch, change))
}

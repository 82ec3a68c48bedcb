//! Commit envelope v5 (specification section 4.3): the only commit written.
//!
//! ```text
//! u16 version = 5
//! u32 payload length, then a complete v1 commit payload
//! u8  authenticated actor present (0 unauthenticated, 1 authenticated)
//!   if 1: [16] immutable principal id, asserted by the server
//! u8  parent commit present    (1 exactly when the payload's parent change is nonzero)
//!   if 1: [32] parent commit id
//! u8  origin                   (0 none, 1 merge parent, 2 cherry-pick source)
//!   if 1: [16] source branch id, u64 source change, [32] source commit id
//!   if 2: [16] source branch id, u64 source change
//! [32] portable content root
//! [32] portable revision root
//! ```

use crate::bytes::{Put, Reader};
use crate::error::FormatError;
use crate::id::{BranchId, CommitId};

use super::payload::{CommitPayload, MAX_PAYLOAD_LEN};
use super::rule;

/// The envelope version written.
pub const VERSION_V5: u16 = 5;
/// Origin byte: none.
pub const ORIGIN_NONE: u8 = 0;
/// Origin byte: a merge parent.
pub const ORIGIN_MERGE: u8 = 1;
/// Origin byte: a cherry-pick source.
pub const ORIGIN_CHERRY_PICK: u8 = 2;

/// Where an integrated change came from. A merge parent and a cherry-pick
/// source never appear together; the enum makes that unrepresentable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Origin {
    #[default]
    None,
    /// A merge of another branch's head: a second parent, linked by identity.
    Merge {
        branch: BranchId,
        change: u64,
        commit: CommitId,
    },
    /// A selected change of another branch: provenance only, never a parent.
    CherryPick { branch: BranchId, change: u64 },
}

impl Origin {
    /// The origin byte.
    pub const fn byte(&self) -> u8 {
        match self {
            Origin::None => ORIGIN_NONE,
            Origin::Merge { .. } => ORIGIN_MERGE,
            Origin::CherryPick { .. } => ORIGIN_CHERRY_PICK,
        }
    }

    /// The source branch and change, if any.
    pub const fn source(&self) -> Option<(BranchId, u64)> {
        match *self {
            Origin::None => None,
            Origin::Merge { branch, change, .. } | Origin::CherryPick { branch, change } => {
                Some((branch, change))
            }
        }
    }
}

/// A v5 commit envelope: a payload bound to its ancestry by identity.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CommitEnvelopeV5 {
    pub payload: CommitPayload,
    /// The authenticated principal, asserted by the server; `None` when
    /// the submission was unauthenticated.
    pub actor: Option<[u8; 16]>,
    /// The commit accepted at `payload.parent_change`; present exactly when
    /// that change is nonzero.
    pub parent_commit: Option<CommitId>,
    pub origin: Origin,
    pub content_root: [u8; 32],
    pub revision_root: [u8; 32],
}

impl CommitEnvelopeV5 {
    /// Check the payload's rules and the envelope's links.
    pub fn validate(&self) -> Result<(), FormatError> {
        self.payload.validate()?;
        match (self.payload.parent_change, self.parent_commit) {
            (0, Some(_)) => {
                return Err(FormatError::invalid(
                    rule::PARENT_COMMIT,
                    "a parent commit id without a parent change",
                ))
            }
            (parent, None) if parent != 0 => {
                return Err(FormatError::invalid(
                    rule::PARENT_COMMIT,
                    format!("parent change {parent} has no parent commit id"),
                ))
            }
            _ => {}
        }
        if let Some((branch, change)) = self.origin.source() {
            check_origin(&self.payload, branch, change)?;
        }
        Ok(())
    }

    /// The canonical bytes; refuses an envelope that breaks a rule.
    pub fn encode(&self) -> Result<Vec<u8>, FormatError> {
        self.validate()?;
        // version, payload length, payload, actor, parent, origin, two roots
        let mut out = Vec::with_capacity(2 + 4 + self.payload.encoded_len() + 17 + 33 + 57 + 64);
        out.put_u16(VERSION_V5);
        put_wrapped(&mut out, &self.payload)?;
        match &self.actor {
            None => out.put_u8(0),
            Some(actor) => {
                out.put_u8(1);
                out.put_bytes(actor);
            }
        }
        match &self.parent_commit {
            None => out.put_u8(0),
            Some(parent) => {
                out.put_u8(1);
                out.put_bytes(parent.as_bytes());
            }
        }
        out.put_u8(self.origin.byte());
        match &self.origin {
            Origin::None => {}
            Origin::Merge {
                branch,
                change,
                commit,
            } => {
                out.put_bytes(branch.as_bytes());
                out.put_u64(*change);
                out.put_bytes(commit.as_bytes());
            }
            Origin::CherryPick { branch, change } => {
                out.put_bytes(branch.as_bytes());
                out.put_u64(*change);
            }
        }
        out.put_bytes(&self.content_root);
        out.put_bytes(&self.revision_root);
        Ok(out)
    }

    /// Decode and validate exactly one v5 envelope.
    pub fn decode(bytes: &[u8]) -> Result<CommitEnvelopeV5, FormatError> {
        let mut r = Reader::new(bytes);
        let version = r.u16(rule::VERSION)?;
        if version != VERSION_V5 {
            return Err(FormatError::UnsupportedVersion {
                what: rule::VERSION,
                version: version.into(),
            });
        }
        let payload = read_wrapped(&mut r)?;
        let actor = if r.flag("commit actor present")? {
            Some(r.array("commit actor")?)
        } else {
            None
        };
        let parent_commit = if r.flag("commit parent present")? {
            Some(CommitId(r.array("commit parent id")?))
        } else {
            None
        };
        let origin = match r.u8(rule::ORIGIN)? {
            ORIGIN_NONE => Origin::None,
            ORIGIN_MERGE => Origin::Merge {
                branch: BranchId(r.array("commit merge branch")?),
                change: r.u64("commit merge change")?,
                commit: CommitId(r.array("commit merge commit id")?),
            },
            ORIGIN_CHERRY_PICK => Origin::CherryPick {
                branch: BranchId(r.array("commit cherry-pick branch")?),
                change: r.u64("commit cherry-pick change")?,
            },
            v => {
                return Err(FormatError::InvalidValue {
                    what: rule::ORIGIN,
                    value: v.into(),
                    reason: "origins are 0 none, 1 merge parent, 2 cherry-pick source",
                })
            }
        };
        let content_root = r.array("commit portable content root")?;
        let revision_root = r.array("commit portable revision root")?;
        r.finish("commit envelope")?;
        let envelope = CommitEnvelopeV5 {
            payload,
            actor,
            parent_commit,
            origin,
            content_root,
            revision_root,
        };
        envelope.validate()?;
        Ok(envelope)
    }

    /// `blake3("scribe:commit:v5\0" ‖ envelope)`; refuses an invalid envelope.
    pub fn id(&self) -> Result<CommitId, FormatError> {
        super::commit_id(&self.encode()?)
    }
}

/// An origin (merge parent or cherry-pick source, in any envelope version)
/// is legal only on a different branch at an earlier nonzero change.
pub(crate) fn check_origin(
    payload: &CommitPayload,
    branch: BranchId,
    change: u64,
) -> Result<(), FormatError> {
    if branch == payload.branch {
        return Err(FormatError::invalid(
            rule::ORIGIN_BRANCH,
            format!("the source branch {branch} is the commit's own branch"),
        ));
    }
    if change == 0 || change >= payload.change {
        return Err(FormatError::invalid(
            rule::ORIGIN_CHANGE,
            format!(
                "source change {change} is not a nonzero change before {}",
                payload.change
            ),
        ));
    }
    Ok(())
}

/// `u32 payload length ‖ payload`.
pub(crate) fn put_wrapped(out: &mut Vec<u8>, payload: &CommitPayload) -> Result<(), FormatError> {
    let at = out.len();
    out.put_u32(0);
    payload.encode_into(out)?;
    let len = (out.len() - at - 4) as u32;
    out[at..at + 4].copy_from_slice(&len.to_le_bytes());
    Ok(())
}

/// Read `u32 payload length ‖ payload`; the length must match the
/// payload's own length exactly.
pub(crate) fn read_wrapped(r: &mut Reader<'_>) -> Result<CommitPayload, FormatError> {
    let len = r.u32(rule::PAYLOAD_LENGTH)? as usize;
    if len > MAX_PAYLOAD_LEN {
        return Err(FormatError::LimitExceeded {
            what: rule::PAYLOAD_LENGTH,
            limit: MAX_PAYLOAD_LEN as u64,
            actual: len as u64,
        });
    }
    let bytes = r.take(len, rule::PAYLOAD_LENGTH)?;
    CommitPayload::decode(bytes).map_err(|e| match e {
        FormatError::Truncated { .. } => FormatError::invalid(
            rule::PAYLOAD_LENGTH,
            format!("the declared length {len} ends inside the payload"),
        ),
        FormatError::TrailingBytes { count, .. } => FormatError::invalid(
            rule::PAYLOAD_LENGTH,
            format!("the declared length {len} runs {count} bytes past the payload"),
        ),
        other => other,
    })
}

//! Portable tree commitments, portable version 1 (specification "Portable
//! tree commitments").
//!
//! Two full BLAKE3-256 commitments over one compressed radix tree, neither
//! touched by page ids, allocation order, compression or database identity:
//!
//! - the **revision** digest binds every value (live or tombstone), its last
//!   change and state, and every child's summaries ([`revision`]);
//! - the **content** digest binds only the live projection: live values'
//!   content, size and mode, and live children; nodes without a live value
//!   and with fewer than two live children collapse ([`content`]).
//!
//! ```text
//! revision node:  u8 1 | bytes16 prefix | u8 value present | value?
//!                 | u16 child count | (u8 edge | u64 live | u64 newest
//!                 | content[32] | revision[32])*
//!   value = str16 path | u64 last change | u8 state present | FileRecord v1?
//!   digest = blake3("scribe:revision-tree:node:v1\0" | bytes)
//!
//! content node:   u8 1 | bytes16 prefix | u8 live value present
//!                 | (content id[32] | u64 size | u8 mode)?
//!                 | u16 live child count | (u8 edge | u64 live | content[32])*
//!   digest = blake3("scribe:content-tree:node:v1\0" | bytes)
//!   no live value, one live child   -> that child's content digest
//!   no live value, no live children -> EMPTY_CONTENT_ROOT
//! ```
//!
//! [`reference`] builds the canonical tree of a sorted key set in memory: the
//! oracle paged implementations are tested against.

pub mod content;
pub mod reference;
pub mod revision;

pub use content::{
    content_digest, content_projection, ContentChild, ContentNode, ContentProjection, LiveValue,
};
pub use reference::{build, build_map, ReferenceTree};
pub use revision::{revision_bytes, revision_digest, RevisionNode};

use crate::error::FormatError;
use crate::id::hash_with_domain;
use crate::snapshot::{Link, Node};

/// Version byte of both portable node encodings.
pub const PORTABLE_VERSION: u8 = 1;
/// Domain of a revision node digest.
pub const REVISION_NODE_DOMAIN: &[u8] = b"scribe:revision-tree:node:v1\0";
/// Domain of a content node digest.
pub const CONTENT_NODE_DOMAIN: &[u8] = b"scribe:content-tree:node:v1\0";
/// Domain hashed (alone) for the empty revision root.
pub const REVISION_EMPTY_DOMAIN: &[u8] = b"scribe:revision-tree:empty:v1\0";
/// Domain hashed (alone) for the empty content root.
pub const CONTENT_EMPTY_DOMAIN: &[u8] = b"scribe:content-tree:empty:v1\0";

/// `blake3("scribe:content-tree:empty:v1\0")`: the ContentRoot of a tree
/// without live values.
pub const EMPTY_CONTENT_ROOT: [u8; 32] = [
    0x79, 0xa1, 0x3e, 0xfe, 0xdf, 0xf2, 0x30, 0xd3, 0x3c, 0xd9, 0x0d, 0x2b, 0x40, 0xd9, 0xa8, 0xee,
    0x86, 0xa3, 0x84, 0x63, 0x03, 0xfb, 0x8c, 0x15, 0xef, 0x88, 0xaf, 0xd2, 0x11, 0x39, 0xcb, 0x7e,
];

/// `blake3("scribe:revision-tree:empty:v1\0")`: the RevisionRoot of the
/// empty tree.
pub const EMPTY_REVISION_ROOT: [u8; 32] = [
    0x63, 0x0b, 0xdd, 0x85, 0xb0, 0x2b, 0xd4, 0x00, 0x40, 0x7c, 0x26, 0x25, 0x90, 0xf0, 0x9e, 0x82,
    0xf1, 0x6b, 0x0b, 0x7f, 0xaf, 0xbb, 0x5e, 0xa9, 0x7c, 0x92, 0x6c, 0xa1, 0x9c, 0x81, 0xf9, 0xf2,
];

/// A subtree's authenticated summaries: a [`Link`] without its page id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Summary {
    /// Live values in the subtree.
    pub live: u64,
    /// Largest last change in the subtree, tombstones included.
    pub newest: u64,
    /// Content digest (ContentRoot of the subtree).
    pub content: [u8; 32],
    /// Revision digest (RevisionRoot of the subtree).
    pub revision: [u8; 32],
}

impl Summary {
    /// The summaries of the empty tree.
    pub const EMPTY: Summary = Summary {
        live: 0,
        newest: 0,
        content: EMPTY_CONTENT_ROOT,
        revision: EMPTY_REVISION_ROOT,
    };

    /// What one nonempty subtree's summaries can show: a nonzero newest
    /// change, a revision digest that is not the empty root, and the empty
    /// content digest exactly when no value is live.
    pub fn validate_nonempty(&self, what: &'static str) -> Result<(), FormatError> {
        if self.newest == 0 {
            return Err(FormatError::invalid(
                what,
                "a nonempty subtree has a nonzero newest change",
            ));
        }
        if self.revision == EMPTY_REVISION_ROOT {
            return Err(FormatError::invalid(
                what,
                "a nonempty subtree does not have the empty revision digest",
            ));
        }
        if (self.live == 0) != (self.content == EMPTY_CONTENT_ROOT) {
            return Err(FormatError::invalid(
                what,
                "the content digest is empty exactly when no value is live",
            ));
        }
        Ok(())
    }
}

/// `(live values, newest change)` of a node from its value and its
/// children's links, refusing overflow.
pub(crate) fn counts(
    value: Option<&crate::snapshot::NodeValue>,
    children: impl Iterator<Item = Summary>,
) -> Result<(u64, u64), FormatError> {
    let mut live = u64::from(value.is_some_and(|v| v.is_live()));
    let mut newest = value.map_or(0, |v| v.last_change);
    for child in children {
        live = live
            .checked_add(child.live)
            .ok_or(FormatError::InvalidValue {
                what: "node live count",
                value: live,
                reason: "the sum of live counts overflows u64",
            })?;
        newest = newest.max(child.newest);
    }
    Ok((live, newest))
}

/// `(live values, newest change)` of a stored node.
pub(crate) fn node_counts(node: &Node) -> Result<(u64, u64), FormatError> {
    counts(
        node.value.as_ref(),
        node.children.iter().map(|(_, link)| link.summary()),
    )
}

/// The summaries a parent's link to `node` carries: live count, newest
/// change, content digest and revision digest. Validates the node.
pub fn node_summary(node: &Node) -> Result<Summary, FormatError> {
    let revision = revision_digest(node)?;
    let (live, newest) = node_counts(node)?;
    Ok(Summary {
        live,
        newest,
        content: content_digest(node),
        revision,
    })
}

/// The link to `node` stored as page `node_id`.
pub fn node_link(node: &Node, node_id: u64) -> Result<Link, FormatError> {
    Ok(Link::new(node_id, node_summary(node)?))
}

/// BLAKE3 of a domain alone (how the empty roots are defined).
pub fn empty_root(domain: &[u8]) -> [u8; 32] {
    hash_with_domain(domain, &[])
}

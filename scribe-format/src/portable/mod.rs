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

pub use crate::snapshot::{Summary, EMPTY_CONTENT_ROOT, EMPTY_REVISION_ROOT};

use crate::error::FormatError;
use crate::id::hash_with_domain;
use crate::snapshot::{node_counts, Link, Node};

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

// `Node::check_child` lives here, beside the digests it recomputes, so that
// `snapshot` (the stored layouts) never needs the portable digests.
impl Node {
    /// Check `child`, fetched through the link at `edge`: its prefix extends
    /// this prefix by `edge`, and its computed summaries equal the link's.
    pub fn check_child(&self, edge: u8, child: &Node) -> Result<(), FormatError> {
        let link = self
            .children
            .iter()
            .find(|(e, _)| *e == edge)
            .map(|(_, link)| link)
            .ok_or_else(|| FormatError::invalid("child", format!("no child at edge {edge}")))?;
        let extends = child.prefix.len() > self.prefix.len()
            && child.prefix.starts_with(&self.prefix)
            && child.prefix[self.prefix.len()] == edge;
        if !extends {
            return Err(FormatError::invalid(
                "child prefix",
                "a child's prefix extends its parent's prefix by the edge byte",
            ));
        }
        let summary = node_summary(child)?;
        if summary != link.summary() {
            return Err(FormatError::invalid(
                "child link",
                "the link's summaries differ from the child's",
            ));
        }
        Ok(())
    }
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

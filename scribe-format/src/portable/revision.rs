//! The portable revision node and its digest.
//!
//! ```text
//! u8 1 | bytes16 full prefix | u8 value present
//! [value] str16 path | u64 last change | u8 state present | [FileRecord v1]
//! u16 child count
//! child*  u8 edge | u64 live count | u64 newest change | content[32] | revision[32]
//! digest = blake3("scribe:revision-tree:node:v1\0" | bytes)
//! ```
//!
//! These are the stored page's body fields with each child's page id left
//! out, behind a version byte. The same rules as a stored page apply.

use super::{Summary, PORTABLE_VERSION, REVISION_NODE_DOMAIN};
use crate::bytes::{Put, Reader};
use crate::error::FormatError;
use crate::id::hash_with_domain;
use crate::snapshot::{
    check_shape, counts, read_child_count, read_head, write_head, Node, NodeValue,
};

/// A node in portable revision form: children carry summaries, not page ids.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RevisionNode {
    pub prefix: Vec<u8>,
    pub value: Option<NodeValue>,
    pub children: Vec<(u8, Summary)>,
}

impl From<&Node> for RevisionNode {
    fn from(node: &Node) -> Self {
        RevisionNode {
            prefix: node.prefix.clone(),
            value: node.value.clone(),
            children: node
                .children
                .iter()
                .map(|(edge, link)| (*edge, link.summary()))
                .collect(),
        }
    }
}

impl RevisionNode {
    /// The stored-page rules, with summaries in place of links.
    pub fn validate(&self) -> Result<(), FormatError> {
        validate_parts(&self.prefix, self.value.as_ref(), &self.children)
    }

    /// The portable bytes of a valid node.
    pub fn encode(&self) -> Result<Vec<u8>, FormatError> {
        self.validate()?;
        Ok(write(&self.prefix, self.value.as_ref(), &self.children))
    }

    /// Decode and validate portable bytes.
    pub fn decode(bytes: &[u8]) -> Result<RevisionNode, FormatError> {
        let mut r = Reader::new(bytes);
        let version = r.u8("revision node version")?;
        if version != PORTABLE_VERSION {
            return Err(FormatError::UnsupportedVersion {
                what: "revision node",
                version: version.into(),
            });
        }
        let (prefix, value) = read_head(&mut r)?;
        let count = read_child_count(&mut r)?;
        let mut children = Vec::with_capacity(count);
        for _ in 0..count {
            let edge = r.u8("revision child edge")?;
            let summary = Summary {
                live: r.u64("revision child live count")?,
                newest: r.u64("revision child newest change")?,
                content: r.array("revision child content digest")?,
                revision: r.array("revision child revision digest")?,
            };
            children.push((edge, summary));
        }
        r.finish("revision node")?;
        let node = RevisionNode {
            prefix,
            value,
            children,
        };
        node.validate()?;
        Ok(node)
    }

    /// `blake3("scribe:revision-tree:node:v1\0" ‖ portable bytes)`.
    pub fn digest(&self) -> Result<[u8; 32], FormatError> {
        Ok(hash_with_domain(REVISION_NODE_DOMAIN, &self.encode()?))
    }

    /// `(live values, newest change)` of the subtree.
    pub fn counts(&self) -> Result<(u64, u64), FormatError> {
        counts(
            self.value.as_ref(),
            self.children.iter().map(|(_, summary)| *summary),
        )
    }
}

fn validate_parts(
    prefix: &[u8],
    value: Option<&NodeValue>,
    children: &[(u8, Summary)],
) -> Result<(), FormatError> {
    check_shape(prefix, value, children.iter().map(|(edge, _)| *edge))?;
    for (_, summary) in children {
        summary.validate_nonempty("revision child")?;
    }
    counts(value, children.iter().map(|(_, summary)| *summary))?;
    Ok(())
}

fn write(prefix: &[u8], value: Option<&NodeValue>, children: &[(u8, Summary)]) -> Vec<u8> {
    let mut out = Vec::new();
    out.put_u8(PORTABLE_VERSION);
    write_head(prefix, value, &mut out);
    out.put_u16(children.len() as u16);
    for (edge, summary) in children {
        out.put_u8(*edge);
        out.put_u64(summary.live);
        out.put_u64(summary.newest);
        out.put_bytes(&summary.content);
        out.put_bytes(&summary.revision);
    }
    out
}

/// The portable revision bytes of a stored node (validated first).
pub fn revision_bytes(node: &Node) -> Result<Vec<u8>, FormatError> {
    node.validate()?;
    let children: Vec<(u8, Summary)> = node
        .children
        .iter()
        .map(|(edge, link)| (*edge, link.summary()))
        .collect();
    Ok(write(&node.prefix, node.value.as_ref(), &children))
}

/// The revision digest of a stored node (validated first).
pub fn revision_digest(node: &Node) -> Result<[u8; 32], FormatError> {
    Ok(hash_with_domain(
        REVISION_NODE_DOMAIN,
        &revision_bytes(node)?,
    ))
}

//! The portable content node: the live projection of a radix node.
//!
//! ```text
//! u8 1 | bytes16 full prefix | u8 live value present
//! [live value] FileContentId[32] | u64 size | u8 mode
//! u16 live child count
//! live child*  u8 edge | u64 live count | content[32]
//! digest = blake3("scribe:content-tree:node:v1\0" | bytes)
//! ```
//!
//! Tombstones and children without live values do not participate. A node
//! with no live value and one live child collapses to that child's content
//! digest; with neither, to [`EMPTY_CONTENT_ROOT`]. Only the remaining
//! nodes (a live value, or at least two live children) have bytes, and
//! [`ContentNode::decode`] refuses bytes for a node that would collapse.
//!
//! Why this is canonical: a non-collapsing node's prefix is the longest
//! common prefix of the live keys below it (its live value's key, or the
//! point where two live children diverge), so tombstones never change which
//! prefixes, edges and live counts are hashed.

use super::{CONTENT_NODE_DOMAIN, EMPTY_CONTENT_ROOT, PORTABLE_VERSION};
use crate::bytes::{Put, Reader};
use crate::error::FormatError;
use crate::id::{hash_with_domain, FileContentId};
use crate::limits::{MAX_FILE_SIZE, MAX_NODE_CHILDREN, MAX_NODE_PREFIX_BYTES};
use crate::snapshot::{read_child_count, Node, MODE_EXECUTABLE};

/// The part of a live state the content tree binds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LiveValue {
    pub content: FileContentId,
    pub size: u64,
    pub mode: u8,
}

/// One live child of a content node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ContentChild {
    pub edge: u8,
    /// Live values below the edge; nonzero.
    pub live: u64,
    /// The child's content digest.
    pub content: [u8; 32],
}

/// A content node that does not collapse.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ContentNode {
    pub prefix: Vec<u8>,
    pub value: Option<LiveValue>,
    pub children: Vec<ContentChild>,
}

/// What a node contributes to the content tree.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ContentProjection {
    /// No live value and no live child: [`EMPTY_CONTENT_ROOT`].
    Empty,
    /// No live value and exactly one live child: that child's digest.
    Collapsed([u8; 32]),
    /// A node with its own bytes.
    Node(ContentNode),
}

impl ContentProjection {
    /// The content digest this projection stands for.
    pub fn digest(&self) -> [u8; 32] {
        match self {
            ContentProjection::Empty => EMPTY_CONTENT_ROOT,
            ContentProjection::Collapsed(digest) => *digest,
            ContentProjection::Node(node) => node.digest_unchecked(),
        }
    }
}

impl ContentNode {
    /// Prefix within 24,576 bytes; live value mode 0/1 and size within
    /// 1 PiB; at most 256 children, strictly ascending edges, nonzero live
    /// counts that sum without overflow, nonempty digests; and either a live
    /// value or at least two live children (anything else collapses).
    pub fn validate(&self) -> Result<(), FormatError> {
        if self.prefix.len() > MAX_NODE_PREFIX_BYTES {
            return Err(FormatError::LimitExceeded {
                what: "content node prefix",
                limit: MAX_NODE_PREFIX_BYTES as u64,
                actual: self.prefix.len() as u64,
            });
        }
        if let Some(value) = &self.value {
            if value.mode > MODE_EXECUTABLE {
                return Err(FormatError::InvalidValue {
                    what: "content node.mode",
                    value: value.mode.into(),
                    reason: "modes are 0 regular and 1 executable",
                });
            }
            if value.size > MAX_FILE_SIZE {
                return Err(FormatError::LimitExceeded {
                    what: "content node.size",
                    limit: MAX_FILE_SIZE,
                    actual: value.size,
                });
            }
        }
        if self.children.len() > MAX_NODE_CHILDREN {
            return Err(FormatError::LimitExceeded {
                what: "content node child count",
                limit: MAX_NODE_CHILDREN as u64,
                actual: self.children.len() as u64,
            });
        }
        let mut live = u64::from(self.value.is_some());
        let mut previous: Option<u8> = None;
        for child in &self.children {
            if previous.is_some_and(|p| p >= child.edge) {
                return Err(FormatError::InvalidValue {
                    what: "content child edge",
                    value: child.edge.into(),
                    reason: "edges are unique and strictly ascending",
                });
            }
            previous = Some(child.edge);
            if child.live == 0 {
                return Err(FormatError::InvalidValue {
                    what: "content child live count",
                    value: 0,
                    reason: "only live children participate",
                });
            }
            if child.content == EMPTY_CONTENT_ROOT {
                return Err(FormatError::invalid(
                    "content child digest",
                    "a live child does not have the empty content digest",
                ));
            }
            live = live
                .checked_add(child.live)
                .ok_or(FormatError::InvalidValue {
                    what: "content node live count",
                    value: live,
                    reason: "the sum of live counts overflows u64",
                })?;
        }
        if self.value.is_none() && self.children.len() < 2 {
            return Err(FormatError::InvalidValue {
                what: "content node live child count",
                value: self.children.len() as u64,
                reason:
                    "a node without a live value and with fewer than two live children collapses",
            });
        }
        Ok(())
    }

    fn write(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.put_u8(PORTABLE_VERSION);
        out.put_bytes16(&self.prefix);
        match &self.value {
            Some(value) => {
                out.put_u8(1);
                out.put_bytes(value.content.as_bytes());
                out.put_u64(value.size);
                out.put_u8(value.mode);
            }
            None => out.put_u8(0),
        }
        out.put_u16(self.children.len() as u16);
        for child in &self.children {
            out.put_u8(child.edge);
            out.put_u64(child.live);
            out.put_bytes(&child.content);
        }
        out
    }

    /// The portable bytes of a valid node.
    pub fn encode(&self) -> Result<Vec<u8>, FormatError> {
        self.validate()?;
        Ok(self.write())
    }

    /// Decode and validate portable bytes.
    pub fn decode(bytes: &[u8]) -> Result<ContentNode, FormatError> {
        let mut r = Reader::new(bytes);
        let version = r.u8("content node version")?;
        if version != PORTABLE_VERSION {
            return Err(FormatError::UnsupportedVersion {
                what: "content node",
                version: version.into(),
            });
        }
        let prefix = r
            .bytes16("content node prefix", MAX_NODE_PREFIX_BYTES)?
            .to_vec();
        let value = if r.flag("content node live value present")? {
            Some(LiveValue {
                content: FileContentId(r.array("content node.content id")?),
                size: r.u64("content node.size")?,
                mode: r.u8("content node.mode")?,
            })
        } else {
            None
        };
        let count = read_child_count(&mut r)?;
        let mut children = Vec::with_capacity(count);
        for _ in 0..count {
            children.push(ContentChild {
                edge: r.u8("content child edge")?,
                live: r.u64("content child live count")?,
                content: r.array("content child digest")?,
            });
        }
        r.finish("content node")?;
        let node = ContentNode {
            prefix,
            value,
            children,
        };
        node.validate()?;
        Ok(node)
    }

    /// `blake3("scribe:content-tree:node:v1\0" ‖ portable bytes)`.
    pub fn digest(&self) -> Result<[u8; 32], FormatError> {
        Ok(hash_with_domain(CONTENT_NODE_DOMAIN, &self.encode()?))
    }

    fn digest_unchecked(&self) -> [u8; 32] {
        hash_with_domain(CONTENT_NODE_DOMAIN, &self.write())
    }
}

/// The live projection of a stored node, from its value and its children's
/// links. The node is assumed valid ([`Node::validate`]); a projection of
/// an invalid node is computed but means nothing.
pub fn content_projection(node: &Node) -> ContentProjection {
    let value = node
        .value
        .as_ref()
        .and_then(|v| v.state.as_ref())
        .map(|state| LiveValue {
            content: state.content,
            size: state.size,
            mode: state.mode,
        });
    let children: Vec<ContentChild> = node
        .children
        .iter()
        .filter(|(_, link)| link.live > 0)
        .map(|(edge, link)| ContentChild {
            edge: *edge,
            live: link.live,
            content: link.content,
        })
        .collect();
    match (value, children.len()) {
        (None, 0) => ContentProjection::Empty,
        (None, 1) => ContentProjection::Collapsed(children[0].content),
        (value, _) => ContentProjection::Node(ContentNode {
            prefix: node.prefix.clone(),
            value,
            children,
        }),
    }
}

/// The content digest of a stored node (see [`content_projection`]).
pub fn content_digest(node: &Node) -> [u8; 32] {
    content_projection(node).digest()
}

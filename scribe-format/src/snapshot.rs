//! Shared metadata snapshots, physical profile 3 (specification section 12,
//! "Repository schema 3: shared metadata snapshots").
//!
//! Immutable compressed radix trees over exact canonical path bytes and
//! collision-key bytes. This module holds the byte layouts a metadata store
//! persists: links, snapshot pages (`snapshot_nodes` values), root rows and
//! keys (`snapshot_roots`), and the version-1 [`FileRecord`] that pages and
//! `history` rows share. The portable digests that links carry are computed
//! by [`crate::portable`].
//!
//! ```text
//! Link (88 bytes)
//!  0  8  u64 node id            (0 only in the empty link)
//!  8  8  u64 live values        (sum of live values in the subtree)
//! 16  8  u64 newest change      (max revision in the subtree, deletes included)
//! 24 32  content digest         (portable content tree)
//! 56 32  revision digest        (portable revision tree)
//!
//! Root row value (177 bytes): u8 2 | exact-path link | collision-key link
//! Root row key   (24 bytes):  BranchId[16] | ordered (big-endian) u64 change
//!
//! FileRecord v1 (82 bytes)
//!  0  1  u8 version = 1
//!  1 32  manifest id
//! 33 32  file content id
//! 65  8  u64 size
//! 73  1  u8 mode (0 regular, 1 executable)
//! 74  8  u64 change
//!
//! Page: u8 3 | one independent block (codec u8 | raw_len u32 | stored_len u32 | bytes)
//! Body (raw_len <= 55,650):
//!   bytes16 full prefix (<= 24,576, may end inside UTF-8)
//!   u8 value present (0/1)
//!   [value]  str16 canonical path | u64 last change | u8 state present (0/1)
//!            [state] FileRecord v1 (82 bytes, version byte included)
//!   u16 child count (<= 256)
//!   child*   u8 edge (strictly ascending) | Link (88 bytes)
//! ```
//!
//! [`decode_page`] and [`decode_body`] check every rule one page can show
//! on its own ([`Node::validate`]). Rules that need the surrounding tree are
//! [`Node::check_in_tree`] (which key the prefix is, child ids smaller than
//! the page's own) and [`Node::check_child`] (a child's prefix extends the
//! parent's by its edge and matches its link's summaries); the metadata
//! crate runs them while traversing.

use crate::block::{decode_single_block, encode_single_block};
use crate::bytes::{ordered_u64, Put, Reader};
use crate::error::FormatError;
use crate::id::{BranchId, FileContentId, ManifestId};
use crate::limits::{
    MAX_FILE_SIZE, MAX_NODE_CHILDREN, MAX_NODE_PREFIX_BYTES, MAX_PATH_BYTES, MAX_SNAPSHOT_NODE_BODY,
};
use crate::path;

/// Length of an encoded [`Link`].
pub const LINK_LEN: usize = 88;
/// Length of an encoded [`RootRow`].
pub const ROOT_ROW_LEN: usize = 1 + 2 * LINK_LEN;
/// Version byte of a [`RootRow`] (root-link version 2).
pub const ROOT_ROW_VERSION: u8 = 2;
/// Length of a [`RootKey`].
pub const ROOT_KEY_LEN: usize = 24;
/// Physical page version of `snapshot_nodes` values (profile 3).
pub const PAGE_VERSION: u8 = 3;
/// Version byte of a [`FileRecord`].
pub const FILE_RECORD_VERSION: u8 = 1;
/// Length of an encoded [`FileRecord`], version byte included.
pub const FILE_RECORD_LEN: usize = 82;
/// Length of a [`FileRecord`] body without its version byte (as `history`
/// rows embed it).
pub const FILE_RECORD_BODY_LEN: usize = FILE_RECORD_LEN - 1;
/// File mode: regular file.
pub const MODE_REGULAR: u8 = 0;
/// File mode: executable file.
pub const MODE_EXECUTABLE: u8 = 1;

/// `blake3("scribe:content-tree:empty:v1\0")`: the ContentRoot of a tree
/// without live values (the portable content digest of the empty tree,
/// [`crate::portable::CONTENT_EMPTY_DOMAIN`]).
pub const EMPTY_CONTENT_ROOT: [u8; 32] = [
    0x79, 0xa1, 0x3e, 0xfe, 0xdf, 0xf2, 0x30, 0xd3, 0x3c, 0xd9, 0x0d, 0x2b, 0x40, 0xd9, 0xa8, 0xee,
    0x86, 0xa3, 0x84, 0x63, 0x03, 0xfb, 0x8c, 0x15, 0xef, 0x88, 0xaf, 0xd2, 0x11, 0x39, 0xcb, 0x7e,
];

/// `blake3("scribe:revision-tree:empty:v1\0")`: the RevisionRoot of the
/// empty tree ([`crate::portable::REVISION_EMPTY_DOMAIN`]).
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
    value: Option<&NodeValue>,
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

/// A reference from a parent (or a root row) to a node, with the subtree's
/// summaries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Link {
    /// Local page id in `snapshot_nodes`; 0 only in [`Link::EMPTY`].
    pub node: u64,
    /// Number of live values (present states) in the subtree.
    pub live: u64,
    /// Largest last change in the subtree, tombstones included.
    pub newest: u64,
    /// Portable content digest of the subtree.
    pub content: [u8; 32],
    /// Portable revision digest of the subtree.
    pub revision: [u8; 32],
}

impl Link {
    /// The link to the empty tree.
    pub const EMPTY: Link = Link {
        node: 0,
        live: 0,
        newest: 0,
        content: EMPTY_CONTENT_ROOT,
        revision: EMPTY_REVISION_ROOT,
    };

    /// A link to page `node` with these summaries.
    pub const fn new(node: u64, summary: Summary) -> Link {
        Link {
            node,
            live: summary.live,
            newest: summary.newest,
            content: summary.content,
            revision: summary.revision,
        }
    }

    /// The summaries without the page id (what portable bytes carry).
    pub const fn summary(&self) -> Summary {
        Summary {
            live: self.live,
            newest: self.newest,
            content: self.content,
            revision: self.revision,
        }
    }

    /// Whether this is the empty link.
    pub fn is_empty(&self) -> bool {
        *self == Link::EMPTY
    }

    /// Check what one link can show: the empty link is exactly
    /// [`Link::EMPTY`]; any other has a nonzero page id and newest change, a
    /// nonempty revision digest, and an empty content digest exactly when it
    /// has no live values.
    pub fn validate(&self) -> Result<(), FormatError> {
        if self.newest == 0 {
            if self.is_empty() {
                return Ok(());
            }
            return Err(FormatError::invalid(
                "link",
                "a link with newest change 0 must be the empty link",
            ));
        }
        if self.node == 0 {
            return Err(FormatError::invalid(
                "link.node id",
                "a nonempty link has a nonzero node id",
            ));
        }
        self.summary().validate_nonempty("link")
    }

    /// Like [`Link::validate`], refusing the empty link too (children are
    /// never empty).
    pub fn validate_nonempty(&self) -> Result<(), FormatError> {
        if self.is_empty() {
            return Err(FormatError::invalid(
                "child link",
                "a child link is never the empty link",
            ));
        }
        self.validate()
    }

    /// Append the 88 bytes.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        out.put_u64(self.node);
        out.put_u64(self.live);
        out.put_u64(self.newest);
        out.put_bytes(&self.content);
        out.put_bytes(&self.revision);
    }

    /// The 88 bytes.
    pub fn encode(&self) -> [u8; LINK_LEN] {
        let mut out = Vec::with_capacity(LINK_LEN);
        self.write_to(&mut out);
        let mut array = [0u8; LINK_LEN];
        array.copy_from_slice(&out);
        array
    }

    /// Read 88 bytes without checking them (see [`Link::validate`]).
    pub fn read(r: &mut Reader<'_>) -> Result<Link, FormatError> {
        Ok(Link {
            node: r.u64("link.node id")?,
            live: r.u64("link.live values")?,
            newest: r.u64("link.newest change")?,
            content: r.array("link.content digest")?,
            revision: r.array("link.revision digest")?,
        })
    }

    /// Decode exactly 88 bytes and [validate](Link::validate) them.
    pub fn decode(bytes: &[u8]) -> Result<Link, FormatError> {
        let mut r = Reader::new(bytes);
        let link = Link::read(&mut r)?;
        r.finish("link")?;
        link.validate()?;
        Ok(link)
    }
}

/// A `snapshot_roots` value: the exact-path and collision-key roots of one
/// branch at one change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RootRow {
    pub exact: Link,
    pub collision: Link,
}

impl RootRow {
    /// Two empty roots (main at change 0).
    pub const EMPTY: RootRow = RootRow {
        exact: Link::EMPTY,
        collision: Link::EMPTY,
    };

    /// Both links valid and their live counts equal.
    pub fn validate(&self) -> Result<(), FormatError> {
        self.exact.validate()?;
        self.collision.validate()?;
        if self.exact.live != self.collision.live {
            return Err(FormatError::invalid(
                "root row",
                format!(
                    "exact-path live count {} differs from collision-key live count {}",
                    self.exact.live, self.collision.live
                ),
            ));
        }
        Ok(())
    }

    /// The 177 bytes; refuses a row that does not [validate](RootRow::validate).
    pub fn encode(&self) -> Result<[u8; ROOT_ROW_LEN], FormatError> {
        self.validate()?;
        let mut out = Vec::with_capacity(ROOT_ROW_LEN);
        out.put_u8(ROOT_ROW_VERSION);
        self.exact.write_to(&mut out);
        self.collision.write_to(&mut out);
        let mut array = [0u8; ROOT_ROW_LEN];
        array.copy_from_slice(&out);
        Ok(array)
    }

    /// Decode exactly 177 bytes.
    pub fn decode(bytes: &[u8]) -> Result<RootRow, FormatError> {
        let mut r = Reader::new(bytes);
        let version = r.u8("root row version")?;
        if version != ROOT_ROW_VERSION {
            return Err(FormatError::UnsupportedVersion {
                what: "root row",
                version: version.into(),
            });
        }
        let exact = Link::read(&mut r)?;
        let collision = Link::read(&mut r)?;
        r.finish("root row")?;
        let row = RootRow { exact, collision };
        row.validate()?;
        Ok(row)
    }
}

/// A `snapshot_roots` key: `BranchId(16) ‖ ordered u64 change`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RootKey {
    pub branch: BranchId,
    pub change: u64,
}

impl RootKey {
    /// The 24 key bytes; they sort by branch, then by change.
    pub fn encode(&self) -> [u8; ROOT_KEY_LEN] {
        let mut out = Vec::with_capacity(ROOT_KEY_LEN);
        out.put_bytes(self.branch.as_bytes());
        out.put_ordered_u64(self.change);
        let mut array = [0u8; ROOT_KEY_LEN];
        array.copy_from_slice(&out);
        array
    }

    /// Decode exactly 24 key bytes.
    pub fn decode(bytes: &[u8]) -> Result<RootKey, FormatError> {
        let mut r = Reader::new(bytes);
        let branch = BranchId(r.array("root key.branch")?);
        let change = ordered_u64(r.array("root key.change")?);
        r.finish("root key")?;
        Ok(RootKey { branch, change })
    }
}

/// The state of a live file revision (version-1 FileRecord).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileRecord {
    pub manifest: ManifestId,
    pub content: FileContentId,
    /// File size in bytes, at most 1 PiB.
    pub size: u64,
    /// [`MODE_REGULAR`] or [`MODE_EXECUTABLE`].
    pub mode: u8,
    /// The change that produced this revision.
    pub change: u64,
}

impl FileRecord {
    /// Mode 0 or 1 and size within the section 11 limit.
    pub fn validate(&self) -> Result<(), FormatError> {
        if self.mode > MODE_EXECUTABLE {
            return Err(FormatError::InvalidValue {
                what: "file record.mode",
                value: self.mode.into(),
                reason: "modes are 0 regular and 1 executable",
            });
        }
        if self.size > MAX_FILE_SIZE {
            return Err(FormatError::LimitExceeded {
                what: "file record.size",
                limit: MAX_FILE_SIZE,
                actual: self.size,
            });
        }
        Ok(())
    }

    /// Append the body without its version byte (the `history` layout).
    pub fn write_body_to(&self, out: &mut Vec<u8>) {
        out.put_bytes(self.manifest.as_bytes());
        out.put_bytes(self.content.as_bytes());
        out.put_u64(self.size);
        out.put_u8(self.mode);
        out.put_u64(self.change);
    }

    /// Append the complete record, version byte first.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        out.put_u8(FILE_RECORD_VERSION);
        self.write_body_to(out);
    }

    /// The 82 bytes; refuses a record that does not validate.
    pub fn encode(&self) -> Result<[u8; FILE_RECORD_LEN], FormatError> {
        self.validate()?;
        let mut out = Vec::with_capacity(FILE_RECORD_LEN);
        self.write_to(&mut out);
        let mut array = [0u8; FILE_RECORD_LEN];
        array.copy_from_slice(&out);
        Ok(array)
    }

    /// Read and validate a body without its version byte.
    pub fn read_body(r: &mut Reader<'_>) -> Result<FileRecord, FormatError> {
        let record = FileRecord {
            manifest: ManifestId(r.array("file record.manifest")?),
            content: FileContentId(r.array("file record.content")?),
            size: r.u64("file record.size")?,
            mode: r.u8("file record.mode")?,
            change: r.u64("file record.change")?,
        };
        record.validate()?;
        Ok(record)
    }

    /// Read and validate a complete record, version byte first.
    pub fn read(r: &mut Reader<'_>) -> Result<FileRecord, FormatError> {
        let version = r.u8("file record version")?;
        if version != FILE_RECORD_VERSION {
            return Err(FormatError::UnsupportedVersion {
                what: "file record",
                version: version.into(),
            });
        }
        FileRecord::read_body(r)
    }

    /// Decode exactly one complete record.
    pub fn decode(bytes: &[u8]) -> Result<FileRecord, FormatError> {
        let mut r = Reader::new(bytes);
        let record = FileRecord::read(&mut r)?;
        r.finish("file record")?;
        Ok(record)
    }

    /// Decode exactly one body without its version byte.
    pub fn decode_body(bytes: &[u8]) -> Result<FileRecord, FormatError> {
        let mut r = Reader::new(bytes);
        let record = FileRecord::read_body(&mut r)?;
        r.finish("file record")?;
        Ok(record)
    }
}

/// The value stored at a node: the last revision of one path, live or a
/// tombstone.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NodeValue {
    /// The exact canonical path (also in the collision tree).
    pub path: String,
    /// The path's last change; nonzero.
    pub last_change: u64,
    /// The live state, or `None` for a tombstone.
    pub state: Option<FileRecord>,
}

impl NodeValue {
    /// Whether the value is live (has a state).
    pub fn is_live(&self) -> bool {
        self.state.is_some()
    }

    /// Canonical path, nonzero change, valid state whose change agrees.
    pub fn validate(&self) -> Result<(), FormatError> {
        if self.path.len() > MAX_PATH_BYTES {
            return Err(FormatError::LimitExceeded {
                what: "node value.path",
                limit: MAX_PATH_BYTES as u64,
                actual: self.path.len() as u64,
            });
        }
        path::validate(&self.path)?;
        if self.last_change == 0 {
            return Err(FormatError::InvalidValue {
                what: "node value.last change",
                value: 0,
                reason: "values have nonzero changes",
            });
        }
        if let Some(state) = &self.state {
            state.validate()?;
            if state.change != self.last_change {
                return Err(FormatError::invalid(
                    "node value.state",
                    format!(
                        "live state change {} differs from the value's last change {}",
                        state.change, self.last_change
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Append `str16 path ‖ u64 last change ‖ u8 state present ‖ state?`.
    pub(crate) fn write_to(&self, out: &mut Vec<u8>) {
        out.put_bytes16(self.path.as_bytes());
        out.put_u64(self.last_change);
        match &self.state {
            Some(state) => {
                out.put_u8(1);
                state.write_to(out);
            }
            None => out.put_u8(0),
        }
    }

    /// Read and validate the fields written by `write_to`.
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<NodeValue, FormatError> {
        let path = r.str16("node value.path", MAX_PATH_BYTES)?.to_owned();
        let last_change = r.u64("node value.last change")?;
        let state = if r.flag("node value.state present")? {
            Some(FileRecord::read(r)?)
        } else {
            None
        };
        let value = NodeValue {
            path,
            last_change,
            state,
        };
        value.validate()?;
        Ok(value)
    }
}

/// Which tree a page belongs to: it decides which key the prefix of a
/// valued node must equal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tree {
    /// Keys are exact canonical path bytes.
    Exact,
    /// Keys are collision-key bytes ([`crate::path::collision_key`]).
    Collision,
}

/// One radix node as a page stores it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    /// The full common key prefix of the subtree.
    pub prefix: Vec<u8>,
    /// The value whose key equals `prefix`, if any.
    pub value: Option<NodeValue>,
    /// Children by strictly ascending edge byte (the key byte after
    /// `prefix`).
    pub children: Vec<(u8, Link)>,
}

/// Read `bytes16 prefix ‖ u8 value present ‖ value?` (shared with the
/// portable revision node).
pub(crate) fn read_head(r: &mut Reader<'_>) -> Result<(Vec<u8>, Option<NodeValue>), FormatError> {
    let prefix = r.bytes16("node prefix", MAX_NODE_PREFIX_BYTES)?.to_vec();
    let value = if r.flag("node value present")? {
        Some(NodeValue::read(r)?)
    } else {
        None
    };
    Ok((prefix, value))
}

/// Write `bytes16 prefix ‖ u8 value present ‖ value?`.
pub(crate) fn write_head(prefix: &[u8], value: Option<&NodeValue>, out: &mut Vec<u8>) {
    out.put_bytes16(prefix);
    match value {
        Some(value) => {
            out.put_u8(1);
            value.write_to(out);
        }
        None => out.put_u8(0),
    }
}

/// Read a `u16` child count and check it against [`MAX_NODE_CHILDREN`].
pub(crate) fn read_child_count(r: &mut Reader<'_>) -> Result<usize, FormatError> {
    let count = usize::from(r.u16("node child count")?);
    if count > MAX_NODE_CHILDREN {
        return Err(FormatError::LimitExceeded {
            what: "node child count",
            limit: MAX_NODE_CHILDREN as u64,
            actual: count as u64,
        });
    }
    Ok(count)
}

/// Check the single-node rules shared by stored pages and portable revision
/// nodes: prefix length, value, key relation, edge order, and shape.
pub(crate) fn check_shape(
    prefix: &[u8],
    value: Option<&NodeValue>,
    edges: impl Iterator<Item = u8>,
) -> Result<(), FormatError> {
    if prefix.len() > MAX_NODE_PREFIX_BYTES {
        return Err(FormatError::LimitExceeded {
            what: "node prefix",
            limit: MAX_NODE_PREFIX_BYTES as u64,
            actual: prefix.len() as u64,
        });
    }
    if let Some(value) = value {
        value.validate()?;
        if prefix != value.path.as_bytes() && prefix != path::collision_key(&value.path) {
            return Err(FormatError::invalid(
                "node prefix",
                "a valued node's prefix is its value's exact path or collision key",
            ));
        }
    }
    let mut count = 0usize;
    let mut previous: Option<u8> = None;
    for edge in edges {
        if previous.is_some_and(|p| p >= edge) {
            return Err(FormatError::InvalidValue {
                what: "node child edge",
                value: edge.into(),
                reason: "edges are unique and strictly ascending",
            });
        }
        previous = Some(edge);
        count += 1;
    }
    if count > MAX_NODE_CHILDREN {
        return Err(FormatError::LimitExceeded {
            what: "node child count",
            limit: MAX_NODE_CHILDREN as u64,
            actual: count as u64,
        });
    }
    if value.is_none() && count < 2 {
        return Err(FormatError::InvalidValue {
            what: "node child count",
            value: count as u64,
            reason: "a valueless node has at least two children",
        });
    }
    Ok(())
}

impl Node {
    /// A leaf holding `value` under `key`.
    pub fn leaf(key: Vec<u8>, value: NodeValue) -> Node {
        Node {
            prefix: key,
            value: Some(value),
            children: Vec::new(),
        }
    }

    /// Check every rule one page shows on its own: prefix within 24,576
    /// bytes; a valid value (canonical path, nonzero change, live state's
    /// change equal to it) whose exact path or collision key is the prefix;
    /// at most 256 children with strictly ascending edges and valid nonempty
    /// links; at least two children without a value; summaries that do not
    /// overflow.
    pub fn validate(&self) -> Result<(), FormatError> {
        check_shape(
            &self.prefix,
            self.value.as_ref(),
            self.children.iter().map(|(edge, _)| *edge),
        )?;
        for (_, link) in &self.children {
            link.validate_nonempty()?;
        }
        node_counts(self)?;
        Ok(())
    }

    /// The tree-context rules for a page stored under id `own_id` of `tree`:
    /// a valued node's prefix is specifically the key of that tree, and every
    /// child has a smaller node id.
    pub fn check_in_tree(&self, tree: Tree, own_id: u64) -> Result<(), FormatError> {
        if let Some(value) = &self.value {
            let matches = match tree {
                Tree::Exact => self.prefix == value.path.as_bytes(),
                Tree::Collision => self.prefix == path::collision_key(&value.path),
            };
            if !matches {
                return Err(FormatError::invalid(
                    "node prefix",
                    format!("prefix is not the value's {tree:?} key"),
                ));
            }
        }
        for (_, link) in &self.children {
            if link.node >= own_id {
                return Err(FormatError::invalid(
                    "child link.node id",
                    format!(
                        "child id {} is not below its parent's id {own_id}",
                        link.node
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The decompressed page body of a valid node.
pub fn encode_body(node: &Node) -> Result<Vec<u8>, FormatError> {
    node.validate()?;
    let mut out = Vec::new();
    write_head(&node.prefix, node.value.as_ref(), &mut out);
    out.put_u16(node.children.len() as u16);
    for (edge, link) in &node.children {
        out.put_u8(*edge);
        link.write_to(&mut out);
    }
    debug_assert!(out.len() <= MAX_SNAPSHOT_NODE_BODY as usize);
    Ok(out)
}

/// Decode and [validate](Node::validate) a decompressed page body.
pub fn decode_body(bytes: &[u8]) -> Result<Node, FormatError> {
    if bytes.len() > MAX_SNAPSHOT_NODE_BODY as usize {
        return Err(FormatError::LimitExceeded {
            what: "snapshot node body",
            limit: MAX_SNAPSHOT_NODE_BODY.into(),
            actual: bytes.len() as u64,
        });
    }
    let mut r = Reader::new(bytes);
    let (prefix, value) = read_head(&mut r)?;
    let count = read_child_count(&mut r)?;
    let mut children = Vec::with_capacity(count);
    for _ in 0..count {
        let edge = r.u8("node child edge")?;
        let link = Link::read(&mut r)?;
        children.push((edge, link));
    }
    r.finish("snapshot node body")?;
    let node = Node {
        prefix,
        value,
        children,
    };
    node.validate()?;
    Ok(node)
}

/// A `snapshot_nodes` value: `u8 3` then one independent block holding the
/// body, LZ4 only when smaller.
pub fn encode_page(node: &Node) -> Result<Vec<u8>, FormatError> {
    let body = encode_body(node)?;
    let block = encode_single_block(&body);
    let mut out = Vec::with_capacity(1 + block.len());
    out.put_u8(PAGE_VERSION);
    out.put_bytes(&block);
    Ok(out)
}

/// Decode a `snapshot_nodes` value. The block's declared raw length is
/// checked against 55,650 bytes before anything is allocated.
pub fn decode_page(bytes: &[u8]) -> Result<Node, FormatError> {
    let mut r = Reader::new(bytes);
    let version = r.u8("snapshot page version")?;
    if version != PAGE_VERSION {
        return Err(FormatError::UnsupportedVersion {
            what: "snapshot page",
            version: version.into(),
        });
    }
    let body = decode_single_block(r.rest(), MAX_SNAPSHOT_NODE_BODY)?;
    decode_body(&body)
}

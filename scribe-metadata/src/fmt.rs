//! Snapshot and portable-tree encodings this crate consumes (section 12:
//! "Repository schema 3: shared metadata snapshots" and "Portable tree
//! commitments").
//!
//! INTERIM: `scribe_format::snapshot` and `scribe_format::portable` are
//! owned by the format crate and had not landed on `main` when this crate
//! needed them. Everything here follows the specification to the byte and
//! sits behind this one module so that it becomes a set of re-exports when
//! they land; nothing else in the crate encodes pages, links or digests.

use scribe_format::block::{decode_single_block, encode_single_block};
use scribe_format::bytes::{Put, Reader};
use scribe_format::limits::{
    MAX_NODE_CHILDREN, MAX_NODE_PREFIX_BYTES, MAX_PATH_BYTES, MAX_SNAPSHOT_NODE_BODY,
};
use scribe_format::{FileContentId, FormatError, ManifestId};

type R<T> = Result<T, FormatError>;

/// Domain of a portable revision node.
pub const REVISION_NODE_DOMAIN: &[u8] = b"scribe:revision-tree:node:v1\0";
/// Domain of a portable content node.
pub const CONTENT_NODE_DOMAIN: &[u8] = b"scribe:content-tree:node:v1\0";
/// Domain of the empty content root.
pub const CONTENT_EMPTY_DOMAIN: &[u8] = b"scribe:content-tree:empty:v1\0";
/// Domain of the empty revision root.
pub const REVISION_EMPTY_DOMAIN: &[u8] = b"scribe:revision-tree:empty:v1\0";

/// `blake3("scribe:content-tree:empty:v1\0")`.
pub fn empty_content_root() -> [u8; 32] {
    *blake3::hash(CONTENT_EMPTY_DOMAIN).as_bytes()
}

/// `blake3("scribe:revision-tree:empty:v1\0")`.
pub fn empty_revision_root() -> [u8; 32] {
    *blake3::hash(REVISION_EMPTY_DOMAIN).as_bytes()
}

/// Physical page version.
pub const PAGE_VERSION: u8 = 3;
/// Root-link record version.
pub const ROOT_VERSION: u8 = 2;
/// Length of a link.
pub const LINK_LEN: usize = 88;
/// Length of a root row.
pub const ROOT_ROW_LEN: usize = 177;

/// Complete version-1 FileRecord: `u8 1 ‖ manifest[32] ‖ content[32] ‖ u64
/// size ‖ u8 mode ‖ u64 change`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileRecord {
    pub manifest: ManifestId,
    pub content: FileContentId,
    pub size: u64,
    pub mode: u8,
    pub change: u64,
}

impl FileRecord {
    /// Body without the version byte (81 bytes), as `history` stores it.
    pub fn put_body(&self, out: &mut Vec<u8>) {
        out.put_bytes(&self.manifest.0);
        out.put_bytes(&self.content.0);
        out.put_u64(self.size);
        out.put_u8(self.mode);
        out.put_u64(self.change);
    }

    /// Complete record with its version byte.
    pub fn put(&self, out: &mut Vec<u8>) {
        out.put_u8(1);
        self.put_body(out);
    }

    pub fn read_body(r: &mut Reader<'_>) -> R<Self> {
        let manifest = ManifestId(r.array("file record.manifest")?);
        let content = FileContentId(r.array("file record.content")?);
        let size = r.u64("file record.size")?;
        let mode = r.u8("file record.mode")?;
        if mode > 1 {
            return Err(FormatError::InvalidValue {
                what: "file record.mode",
                value: mode.into(),
                reason: "modes are 0 regular and 1 executable",
            });
        }
        let change = r.u64("file record.change")?;
        Ok(FileRecord {
            manifest,
            content,
            size,
            mode,
            change,
        })
    }

    pub fn read(r: &mut Reader<'_>) -> R<Self> {
        let v = r.u8("file record version")?;
        if v != 1 {
            return Err(FormatError::UnsupportedVersion {
                what: "file record",
                version: v.into(),
            });
        }
        Self::read_body(r)
    }
}

/// An 88-byte link: `u64 node id ‖ u64 live values ‖ u64 newest change ‖
/// content digest[32] ‖ revision digest[32]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Link {
    pub node: u64,
    pub live: u64,
    pub newest: u64,
    pub content: [u8; 32],
    pub revision: [u8; 32],
}

impl Link {
    /// The link of the empty tree.
    pub fn empty() -> Link {
        Link {
            node: 0,
            live: 0,
            newest: 0,
            content: empty_content_root(),
            revision: empty_revision_root(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.node == 0
    }

    pub fn put(&self, out: &mut Vec<u8>) {
        out.put_u64(self.node);
        out.put_u64(self.live);
        out.put_u64(self.newest);
        out.put_bytes(&self.content);
        out.put_bytes(&self.revision);
    }

    pub fn read(r: &mut Reader<'_>) -> R<Self> {
        Ok(Link {
            node: r.u64("link.node")?,
            live: r.u64("link.live")?,
            newest: r.u64("link.newest")?,
            content: r.array("link.content")?,
            revision: r.array("link.revision")?,
        })
    }

    /// Structural rules of a link: the empty link is exactly
    /// [`Link::empty`]; a nonempty one has a nonzero newest change.
    pub fn check(&self) -> R<()> {
        if self.node == 0 {
            if *self != Link::empty() {
                return Err(FormatError::invalid("link", "an empty link has zero fields and empty digests"));
            }
        } else if self.newest == 0 {
            return Err(FormatError::invalid("link", "a nonempty link has a nonzero newest change"));
        }
        Ok(())
    }
}

/// A `snapshot_roots` value: `u8 2 ‖ exact-path link ‖ collision-key link`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RootRow {
    pub exact: Link,
    pub collision: Link,
}

impl RootRow {
    pub fn empty() -> RootRow {
        RootRow {
            exact: Link::empty(),
            collision: Link::empty(),
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(ROOT_ROW_LEN);
        out.put_u8(ROOT_VERSION);
        self.exact.put(&mut out);
        self.collision.put(&mut out);
        out
    }

    pub fn decode(b: &[u8]) -> R<Self> {
        let mut r = Reader::new(b);
        let v = r.u8("root row version")?;
        if v != ROOT_VERSION {
            return Err(FormatError::UnsupportedVersion {
                what: "root row",
                version: v.into(),
            });
        }
        let exact = Link::read(&mut r)?;
        let collision = Link::read(&mut r)?;
        r.finish("root row")?;
        exact.check()?;
        collision.check()?;
        if exact.live != collision.live {
            return Err(FormatError::invalid("root row", "live counts of the two trees differ"));
        }
        Ok(RootRow { exact, collision })
    }
}

/// A node's value: `str16 canonical path ‖ u64 last change ‖ u8 state
/// present (‖ FileRecord)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeValue {
    pub path: String,
    pub last_change: u64,
    pub state: Option<FileRecord>,
}

/// A decoded radix node.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Node {
    pub prefix: Vec<u8>,
    pub value: Option<NodeValue>,
    pub children: Vec<(u8, Link)>,
}

impl Node {
    /// The decompressed body.
    pub fn encode_body(&self, out: &mut Vec<u8>) {
        out.put_bytes16(&self.prefix);
        match &self.value {
            None => out.put_u8(0),
            Some(v) => {
                out.put_u8(1);
                put_value(v, out);
            }
        }
        out.put_u16(self.children.len() as u16);
        for (edge, link) in &self.children {
            out.put_u8(*edge);
            link.put(out);
        }
    }

    /// Physical page version 3: `u8 3 ‖ one independent block`.
    pub fn encode_page(&self) -> Vec<u8> {
        let mut body = Vec::with_capacity(64 + self.prefix.len() + self.children.len() * 89);
        self.encode_body(&mut body);
        let mut out = Vec::with_capacity(body.len() + 10);
        out.push(PAGE_VERSION);
        out.extend_from_slice(&encode_single_block(&body));
        out
    }

    /// Decode a page, refusing every malformed field.
    pub fn decode_page(page: &[u8]) -> R<Node> {
        let Some((&v, rest)) = page.split_first() else {
            return Err(FormatError::Truncated {
                what: "snapshot page",
                needed: 1,
                available: 0,
            });
        };
        if v != PAGE_VERSION {
            return Err(FormatError::UnsupportedVersion {
                what: "snapshot page",
                version: v.into(),
            });
        }
        let body = decode_single_block(rest, MAX_SNAPSHOT_NODE_BODY)?;
        Self::decode_body(&body)
    }

    pub fn decode_body(body: &[u8]) -> R<Node> {
        let mut r = Reader::new(body);
        let prefix = r.bytes16("node.prefix", MAX_NODE_PREFIX_BYTES)?.to_vec();
        let value = if r.flag("node.value present")? {
            let path = r.str16("node.value path", MAX_PATH_BYTES)?.to_owned();
            let last_change = r.u64("node.value last change")?;
            let state = if r.flag("node.state present")? {
                Some(FileRecord::read(&mut r)?)
            } else {
                None
            };
            Some(NodeValue {
                path,
                last_change,
                state,
            })
        } else {
            None
        };
        let n = usize::from(r.u16("node.child count")?);
        if n > MAX_NODE_CHILDREN {
            return Err(FormatError::LimitExceeded {
                what: "node.child count",
                limit: MAX_NODE_CHILDREN as u64,
                actual: n as u64,
            });
        }
        let mut children: Vec<(u8, Link)> = Vec::with_capacity(n);
        for _ in 0..n {
            let edge = r.u8("node.edge")?;
            if let Some((last, _)) = children.last() {
                if edge <= *last {
                    return Err(FormatError::invalid("node.edge", "edges are ascending and unique"));
                }
            }
            let link = Link::read(&mut r)?;
            children.push((edge, link));
        }
        r.finish("node")?;
        Ok(Node {
            prefix,
            value,
            children,
        })
    }

    /// Live values in this node and below, from the value and child links.
    pub fn live(&self) -> u64 {
        let own = u64::from(self.value.as_ref().is_some_and(|v| v.state.is_some()));
        own + self.children.iter().map(|(_, l)| l.live).sum::<u64>()
    }

    /// Newest change in this node and below.
    pub fn newest(&self) -> u64 {
        let own = self.value.as_ref().map_or(0, |v| v.last_change);
        self.children
            .iter()
            .map(|(_, l)| l.newest)
            .fold(own, u64::max)
    }

    /// Portable revision digest.
    pub fn revision_digest(&self) -> [u8; 32] {
        let mut h = blake3::Hasher::new();
        h.update(REVISION_NODE_DOMAIN);
        let mut buf = Vec::with_capacity(64 + self.prefix.len());
        buf.put_u8(1);
        buf.put_bytes16(&self.prefix);
        match &self.value {
            None => buf.put_u8(0),
            Some(v) => {
                buf.put_u8(1);
                put_value(v, &mut buf);
            }
        }
        buf.put_u16(self.children.len() as u16);
        h.update(&buf);
        for (edge, l) in &self.children {
            let mut c = [0u8; 81];
            c[0] = *edge;
            c[1..9].copy_from_slice(&l.live.to_le_bytes());
            c[9..17].copy_from_slice(&l.newest.to_le_bytes());
            c[17..49].copy_from_slice(&l.content);
            c[49..81].copy_from_slice(&l.revision);
            h.update(&c);
        }
        *h.finalize().as_bytes()
    }

    /// Portable content digest, with the collapse rules of the live projection.
    pub fn content_digest(&self) -> [u8; 32] {
        let live_value = self.value.as_ref().and_then(|v| v.state.as_ref());
        let live_children: Vec<&(u8, Link)> =
            self.children.iter().filter(|(_, l)| l.live > 0).collect();
        if live_value.is_none() {
            match live_children.len() {
                0 => return empty_content_root(),
                1 => return live_children[0].1.content,
                _ => {}
            }
        }
        let mut buf = Vec::with_capacity(64 + self.prefix.len() + live_children.len() * 41);
        buf.put_u8(1);
        buf.put_bytes16(&self.prefix);
        match live_value {
            None => buf.put_u8(0),
            Some(s) => {
                buf.put_u8(1);
                buf.put_bytes(&s.content.0);
                buf.put_u64(s.size);
                buf.put_u8(s.mode);
            }
        }
        buf.put_u16(live_children.len() as u16);
        for (edge, l) in live_children {
            buf.put_u8(*edge);
            buf.put_u64(l.live);
            buf.put_bytes(&l.content);
        }
        scribe_format::id::hash_with_domain(CONTENT_NODE_DOMAIN, &buf)
    }

    /// The link naming this node at `id`.
    pub fn link(&self, id: u64) -> Link {
        Link {
            node: id,
            live: self.live(),
            newest: self.newest(),
            content: self.content_digest(),
            revision: self.revision_digest(),
        }
    }
}

fn put_value(v: &NodeValue, out: &mut Vec<u8>) {
    out.put_bytes16(v.path.as_bytes());
    out.put_u64(v.last_change);
    match &v.state {
        None => out.put_u8(0),
        Some(s) => {
            out.put_u8(1);
            s.put(out);
        }
    }
}

/// Reference builder: the roots of the canonical exact-path tree holding
/// `entries` (sorted, unique keys). Used as the oracle in tests and by
/// `doctor`'s independent recomputation.
pub fn reference_root(entries: &[(Vec<u8>, NodeValue)]) -> Link {
    fn build(entries: &[(Vec<u8>, NodeValue)], next: &mut u64) -> Link {
        let first = &entries[0].0;
        let last = &entries[entries.len() - 1].0;
        let lcp = first.iter().zip(last).take_while(|(a, b)| a == b).count();
        let prefix = first[..lcp].to_vec();
        let mut i = 0;
        let mut value = None;
        if entries[0].0.len() == lcp {
            value = Some(entries[0].1.clone());
            i = 1;
        }
        let mut children = Vec::new();
        while i < entries.len() {
            let edge = entries[i].0[lcp];
            let mut j = i;
            while j < entries.len() && entries[j].0[lcp] == edge {
                j += 1;
            }
            children.push((edge, build(&entries[i..j], next)));
            i = j;
        }
        *next += 1;
        Node {
            prefix,
            value,
            children,
        }
        .link(*next)
    }
    if entries.is_empty() {
        return Link::empty();
    }
    let mut next = 0;
    build(entries, &mut next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_roots_match_the_specification() {
        assert_eq!(
            hex::encode(empty_content_root()),
            "79a13efedff230d33cd90d2b40d9a8ee86a3846303fb8c15ef88afd21139cb7e"
        );
        assert_eq!(
            hex::encode(empty_revision_root()),
            "630bdd85b02bd400407c262590f09e82f16b0b7fafbb5ea97c926ca19c81f9f2"
        );
    }

    #[test]
    fn link_and_root_sizes() {
        let mut b = Vec::new();
        Link::empty().put(&mut b);
        assert_eq!(b.len(), LINK_LEN);
        assert_eq!(RootRow::empty().encode().len(), ROOT_ROW_LEN);
        assert_eq!(RootRow::decode(&RootRow::empty().encode()).unwrap(), RootRow::empty());
    }

    #[test]
    fn page_round_trip_and_refusals() {
        let n = Node {
            prefix: b"art/a".to_vec(),
            value: Some(NodeValue {
                path: "art/a".into(),
                last_change: 3,
                state: None,
            }),
            children: vec![(b'/', Link { node: 1, live: 1, newest: 2, content: [1; 32], revision: [2; 32] })],
        };
        let page = n.encode_page();
        assert_eq!(Node::decode_page(&page).unwrap(), n);
        let mut bad = page.clone();
        bad[0] = 2;
        assert!(Node::decode_page(&bad).is_err());
        let mut trailing = page.clone();
        trailing.push(0);
        assert!(Node::decode_page(&trailing).is_err());
    }
}

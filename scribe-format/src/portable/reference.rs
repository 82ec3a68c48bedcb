//! The reference in-memory builder: the canonical compressed radix tree of a
//! sorted key set, and its root link.
//!
//! This is the oracle the metadata crate's paged trees are tested against,
//! written for clarity rather than speed. The canonical tree of a set of
//! `(key, value)` entries is unique:
//!
//! - a node's prefix is the longest common prefix of every key below it;
//! - the entry whose key equals the prefix (at most one) is the node's value;
//! - the other entries are grouped by their byte after the prefix, one child
//!   per group, in ascending byte order;
//! - so a node without a value has at least two children.
//!
//! Tombstones (values without a state) are entries like any other: they
//! shape the revision tree, while the content tree ignores them.
//!
//! Pages are numbered in post-order from 1, so every child has a smaller
//! id than its parent, as stored pages require. The recursion depth is the
//! number of distinct node prefixes on one root-to-leaf path (at most one
//! per key byte).

use std::collections::BTreeMap;

use super::node_summary;
use crate::error::FormatError;
use crate::snapshot::{Link, Node, NodeValue};

/// A built tree: its pages (page `i + 1` at index `i`) and the root link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReferenceTree {
    /// Post-order pages; the root, if any, is last.
    pub pages: Vec<Node>,
    /// The root link; [`Link::EMPTY`] for no entries.
    pub root: Link,
}

impl ReferenceTree {
    /// The page with id `id`.
    pub fn page(&self, id: u64) -> Option<&Node> {
        let index = usize::try_from(id.checked_sub(1)?).ok()?;
        self.pages.get(index)
    }
}

/// Build the canonical tree of `entries`, which must be sorted strictly
/// ascending by key. Every node is validated as a stored page would be
/// (so each key must be its value's exact path or collision key).
pub fn build(entries: &[(Vec<u8>, NodeValue)]) -> Result<ReferenceTree, FormatError> {
    for pair in entries.windows(2) {
        if pair[0].0 >= pair[1].0 {
            return Err(FormatError::invalid(
                "reference tree entries",
                "keys must be unique and sorted ascending",
            ));
        }
    }
    let mut pages = Vec::new();
    let root = if entries.is_empty() {
        Link::EMPTY
    } else {
        build_subtree(entries, &mut pages)?
    };
    Ok(ReferenceTree { pages, root })
}

/// [`build`] from a map (already sorted and unique).
pub fn build_map(entries: &BTreeMap<Vec<u8>, NodeValue>) -> Result<ReferenceTree, FormatError> {
    let sorted: Vec<(Vec<u8>, NodeValue)> = entries
        .iter()
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    build(&sorted)
}

/// Build the subtree of a nonempty sorted slice sharing some prefix; push
/// its pages (children first) and return the link to its root.
fn build_subtree(
    entries: &[(Vec<u8>, NodeValue)],
    pages: &mut Vec<Node>,
) -> Result<Link, FormatError> {
    let first = &entries[0].0;
    let last = &entries[entries.len() - 1].0;
    // In sorted order, the common prefix of all keys is that of the first
    // and the last.
    let depth = first
        .iter()
        .zip(last.iter())
        .take_while(|(a, b)| a == b)
        .count();
    let prefix = first[..depth].to_vec();

    // Only the first key can equal the prefix: every other key is longer.
    let (value, mut rest) = if first.len() == depth {
        (Some(entries[0].1.clone()), &entries[1..])
    } else {
        (None, entries)
    };

    let mut children = Vec::new();
    while let Some((key, _)) = rest.first() {
        let edge = key[depth];
        let group = rest
            .iter()
            .take_while(|(key, _)| key[depth] == edge)
            .count();
        let link = build_subtree(&rest[..group], pages)?;
        children.push((edge, link));
        rest = &rest[group..];
    }

    let node = Node {
        prefix,
        value,
        children,
    };
    let summary = node_summary(&node)?;
    pages.push(node);
    Ok(Link::new(pages.len() as u64, summary))
}

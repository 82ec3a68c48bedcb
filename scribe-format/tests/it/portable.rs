//! Tests for `scribe_format::portable`: the empty roots, portable revision
//! and content nodes, collapse rules, and the reference builder.

use std::collections::BTreeMap;

use super::support::{assert_refuses_truncation_and_trailing, check_area, Golden};
use proptest::prelude::*;
use scribe_format::error::FormatError;
use scribe_format::id::{FileContentId, ManifestId};
use scribe_format::portable::{
    build, build_map, content_digest, content_projection, node_link, node_summary, revision_bytes,
    revision_digest, ContentChild, ContentNode, ContentProjection, LiveValue, ReferenceTree,
    RevisionNode, Summary, CONTENT_EMPTY_DOMAIN, CONTENT_NODE_DOMAIN, EMPTY_CONTENT_ROOT,
    EMPTY_REVISION_ROOT, REVISION_EMPTY_DOMAIN, REVISION_NODE_DOMAIN,
};
use scribe_format::snapshot::{decode_page, encode_page, FileRecord, Link, Node, NodeValue, Tree};

fn digest(seed: &str) -> [u8; 32] {
    *blake3::hash(seed.as_bytes()).as_bytes()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn record_with(change: u64, content: &str) -> FileRecord {
    FileRecord {
        manifest: ManifestId(digest(&format!("manifest {content}"))),
        content: FileContentId(digest(&format!("content {content}"))),
        size: content.len() as u64,
        mode: 0,
        change,
    }
}

fn live_with(path: &str, change: u64, content: &str) -> NodeValue {
    NodeValue {
        path: path.to_owned(),
        last_change: change,
        state: Some(record_with(change, content)),
    }
}

fn live(path: &str, change: u64) -> NodeValue {
    live_with(path, change, path)
}

fn tomb(path: &str, change: u64) -> NodeValue {
    NodeValue {
        path: path.to_owned(),
        last_change: change,
        state: None,
    }
}

/// An exact-path map: key = path bytes.
fn map(values: Vec<NodeValue>) -> BTreeMap<Vec<u8>, NodeValue> {
    values
        .into_iter()
        .map(|v| (v.path.as_bytes().to_vec(), v))
        .collect()
}

fn tree(values: Vec<NodeValue>) -> ReferenceTree {
    build_map(&map(values)).unwrap()
}

fn page<'a>(tree: &'a ReferenceTree, prefix: &[u8]) -> &'a Node {
    tree.pages
        .iter()
        .find(|p| p.prefix == prefix)
        .unwrap_or_else(|| panic!("no page {:?}", String::from_utf8_lossy(prefix)))
}

#[test]
fn empty_roots_are_the_domain_hashes_with_their_nul() {
    // The specification's hex values are BLAKE3 of the domain strings
    // including the trailing NUL byte.
    assert_eq!(
        hex(&EMPTY_CONTENT_ROOT),
        "79a13efedff230d33cd90d2b40d9a8ee86a3846303fb8c15ef88afd21139cb7e"
    );
    assert_eq!(
        hex(&EMPTY_REVISION_ROOT),
        "630bdd85b02bd400407c262590f09e82f16b0b7fafbb5ea97c926ca19c81f9f2"
    );
    assert_eq!(
        *blake3::hash(b"scribe:content-tree:empty:v1\0").as_bytes(),
        EMPTY_CONTENT_ROOT
    );
    assert_eq!(
        *blake3::hash(b"scribe:revision-tree:empty:v1\0").as_bytes(),
        EMPTY_REVISION_ROOT
    );
    assert_eq!(CONTENT_EMPTY_DOMAIN, b"scribe:content-tree:empty:v1\0");
    assert_eq!(REVISION_EMPTY_DOMAIN, b"scribe:revision-tree:empty:v1\0");
    assert_eq!(
        scribe_format::portable::empty_root(CONTENT_EMPTY_DOMAIN),
        EMPTY_CONTENT_ROOT
    );
    assert_eq!(Summary::EMPTY.content, EMPTY_CONTENT_ROOT);
    assert_eq!(Link::EMPTY.revision, EMPTY_REVISION_ROOT);
}

/// The fixture tree: a valueless root over `a`, `d`, `g`; `a/` branches
/// over two live files; `docs` is a live value with a live child; `gone/`
/// has one live and one deleted child (content collapses); `gz/` is all
/// deleted (content empty).
fn fixture_tree() -> ReferenceTree {
    tree(vec![
        live("a/x", 2),
        live("a/y", 3),
        live("docs", 4),
        live("docs/z", 5),
        live("gone/k", 6),
        tomb("gone/t", 7),
        tomb("gz/p", 8),
        tomb("gz/q", 9),
    ])
}

fn revision_golden(name: &str, node: &Node) -> Golden {
    Golden {
        name: format!("revision-{name}"),
        bytes: revision_bytes(node).unwrap(),
        identity: Some(hex(&revision_digest(node).unwrap())),
    }
}

fn content_golden(name: &str, node: &Node) -> Golden {
    let ContentProjection::Node(content) = content_projection(node) else {
        panic!("{name} collapses");
    };
    Golden {
        name: format!("content-{name}"),
        bytes: content.encode().unwrap(),
        identity: Some(hex(&content.digest().unwrap())),
    }
}

fn goldens() -> Vec<Golden> {
    let t = fixture_tree();
    vec![
        revision_golden("leaf", page(&t, b"a/x")),
        revision_golden("tombstone", page(&t, b"gone/t")),
        revision_golden("branch", page(&t, b"a/")),
        revision_golden("value-children", page(&t, b"docs")),
        revision_golden("collapsed-one-live", page(&t, b"gone/")),
        revision_golden("collapsed-empty", page(&t, b"gz/")),
        revision_golden("root", page(&t, b"")),
        content_golden("leaf", page(&t, b"a/x")),
        content_golden("branch", page(&t, b"a/")),
        content_golden("value-children", page(&t, b"docs")),
        content_golden("root", page(&t, b"")),
    ]
}

#[test]
fn golden_fixtures() {
    let committed = check_area("portable", &goldens());
    for (name, bytes) in &committed {
        if name.starts_with("revision-") {
            let node = RevisionNode::decode(bytes).unwrap();
            assert_eq!(&node.encode().unwrap(), bytes, "{name}");
            let expected = blake3::Hasher::new()
                .update(REVISION_NODE_DOMAIN)
                .update(bytes)
                .finalize();
            assert_eq!(node.digest().unwrap(), *expected.as_bytes(), "{name}");
            assert_refuses_truncation_and_trailing(name, bytes, RevisionNode::decode);
        } else {
            let node = ContentNode::decode(bytes).unwrap();
            assert_eq!(&node.encode().unwrap(), bytes, "{name}");
            let expected = blake3::Hasher::new()
                .update(CONTENT_NODE_DOMAIN)
                .update(bytes)
                .finalize();
            assert_eq!(node.digest().unwrap(), *expected.as_bytes(), "{name}");
            assert_refuses_truncation_and_trailing(name, bytes, ContentNode::decode);
        }
    }
}

#[test]
fn collapse_rules() {
    let t = fixture_tree();
    // One live child and no live value: the child's content digest.
    let gone = page(&t, b"gone/");
    let live_child = page(&t, b"gone/k");
    assert_eq!(
        content_projection(gone),
        ContentProjection::Collapsed(content_digest(live_child))
    );
    assert_eq!(content_digest(gone), content_digest(live_child));
    // Nothing live: the empty content digest.
    let gz = page(&t, b"gz/");
    assert_eq!(content_projection(gz), ContentProjection::Empty);
    assert_eq!(content_digest(gz), EMPTY_CONTENT_ROOT);
    assert_eq!(content_digest(page(&t, b"gz/p")), EMPTY_CONTENT_ROOT);
    // The revision digests of both are ordinary node digests.
    assert_ne!(revision_digest(gz).unwrap(), EMPTY_REVISION_ROOT);
    // Deleted children do not participate in the root's content node.
    let ContentProjection::Node(root) = content_projection(page(&t, b"")) else {
        panic!("root collapses");
    };
    let edges: Vec<u8> = root.children.iter().map(|c| c.edge).collect();
    assert_eq!(edges, b"adg");
    assert_eq!(root.children[2].content, content_digest(live_child));
    // Summaries: live count and newest change include tombstones' changes.
    assert_eq!(t.root.live, 5);
    assert_eq!(t.root.newest, 9);
}

#[test]
fn revision_leaf_from_spec_bytes() {
    let value = live_with("a.bin", 9, "bytes");
    let state = value.state.unwrap();
    let mut bytes = vec![1u8]; // portable version
    bytes.extend_from_slice(&5u16.to_le_bytes());
    bytes.extend_from_slice(b"a.bin");
    bytes.push(1); // value present
    bytes.extend_from_slice(&5u16.to_le_bytes());
    bytes.extend_from_slice(b"a.bin");
    bytes.extend_from_slice(&9u64.to_le_bytes());
    bytes.push(1); // state present
    bytes.push(1); // FileRecord version
    bytes.extend_from_slice(state.manifest.as_bytes());
    bytes.extend_from_slice(state.content.as_bytes());
    bytes.extend_from_slice(&5u64.to_le_bytes());
    bytes.push(0);
    bytes.extend_from_slice(&9u64.to_le_bytes());
    bytes.extend_from_slice(&0u16.to_le_bytes()); // no children
    let node = Node::leaf(b"a.bin".to_vec(), value);
    assert_eq!(revision_bytes(&node).unwrap(), bytes);
    let mut domain_and_bytes = b"scribe:revision-tree:node:v1\0".to_vec();
    domain_and_bytes.extend_from_slice(&bytes);
    assert_eq!(
        revision_digest(&node).unwrap(),
        *blake3::hash(&domain_and_bytes).as_bytes()
    );
    assert_eq!(
        RevisionNode::decode(&bytes).unwrap(),
        RevisionNode::from(&node)
    );
}

#[test]
fn revision_branch_from_spec_bytes() {
    let t = fixture_tree();
    let node = page(&t, b"a/");
    let mut bytes = vec![1u8, 2, 0, b'a', b'/', 0];
    bytes.extend_from_slice(&2u16.to_le_bytes());
    for (edge, link) in &node.children {
        bytes.push(*edge);
        bytes.extend_from_slice(&link.live.to_le_bytes());
        bytes.extend_from_slice(&link.newest.to_le_bytes());
        bytes.extend_from_slice(&link.content);
        bytes.extend_from_slice(&link.revision);
    }
    assert_eq!(revision_bytes(node).unwrap(), bytes);
}

#[test]
fn content_leaf_and_branch_from_spec_bytes() {
    let value = live_with("a.bin", 9, "bytes");
    let state = value.state.unwrap();
    let node = Node::leaf(b"a.bin".to_vec(), value);
    let mut bytes = vec![1u8];
    bytes.extend_from_slice(&5u16.to_le_bytes());
    bytes.extend_from_slice(b"a.bin");
    bytes.push(1); // live value present
    bytes.extend_from_slice(state.content.as_bytes());
    bytes.extend_from_slice(&5u64.to_le_bytes());
    bytes.push(0);
    bytes.extend_from_slice(&0u16.to_le_bytes());
    let mut domain_and_bytes = b"scribe:content-tree:node:v1\0".to_vec();
    domain_and_bytes.extend_from_slice(&bytes);
    assert_eq!(
        content_digest(&node),
        *blake3::hash(&domain_and_bytes).as_bytes()
    );
    let ContentProjection::Node(content) = content_projection(&node) else {
        panic!("a live leaf does not collapse");
    };
    assert_eq!(content.encode().unwrap(), bytes);

    // The root of the fixture tree lists only its live children.
    let t = fixture_tree();
    let root = page(&t, b"");
    let mut bytes = vec![1u8, 0, 0, 0];
    let live_children: Vec<&(u8, Link)> =
        root.children.iter().filter(|(_, l)| l.live > 0).collect();
    bytes.extend_from_slice(&(live_children.len() as u16).to_le_bytes());
    for (edge, link) in live_children {
        bytes.push(*edge);
        bytes.extend_from_slice(&link.live.to_le_bytes());
        bytes.extend_from_slice(&link.content);
    }
    let mut domain_and_bytes = b"scribe:content-tree:node:v1\0".to_vec();
    domain_and_bytes.extend_from_slice(&bytes);
    assert_eq!(
        content_digest(root),
        *blake3::hash(&domain_and_bytes).as_bytes()
    );
}

fn content_child(edge: u8, live: u64) -> ContentChild {
    ContentChild {
        edge,
        live,
        content: digest(&format!("child {edge}")),
    }
}

fn content_bytes(node: &ContentNode) -> Vec<u8> {
    // Encode a possibly invalid node by hand.
    let mut bytes = vec![1u8];
    bytes.extend_from_slice(&(node.prefix.len() as u16).to_le_bytes());
    bytes.extend_from_slice(&node.prefix);
    match &node.value {
        Some(v) => {
            bytes.push(1);
            bytes.extend_from_slice(v.content.as_bytes());
            bytes.extend_from_slice(&v.size.to_le_bytes());
            bytes.push(v.mode);
        }
        None => bytes.push(0),
    }
    bytes.extend_from_slice(&(node.children.len() as u16).to_le_bytes());
    for c in &node.children {
        bytes.push(c.edge);
        bytes.extend_from_slice(&c.live.to_le_bytes());
        bytes.extend_from_slice(&c.content);
    }
    bytes
}

#[test]
fn content_node_rules() {
    let good = ContentNode {
        prefix: b"p/".to_vec(),
        value: None,
        children: vec![content_child(b'a', 1), content_child(b'b', 2)],
    };
    assert_eq!(ContentNode::decode(&content_bytes(&good)).unwrap(), good);
    let refused = |node: &ContentNode, why: &str| {
        assert!(ContentNode::decode(&content_bytes(node)).is_err(), "{why}");
        assert!(node.encode().is_err(), "{why}");
    };
    // Nodes that would collapse have no bytes.
    refused(
        &ContentNode {
            children: vec![content_child(b'a', 1)],
            ..good.clone()
        },
        "one live child",
    );
    refused(
        &ContentNode {
            children: vec![],
            ..good.clone()
        },
        "no live child",
    );
    // Children are live, ascending, unique, and not empty digests.
    refused(
        &ContentNode {
            children: vec![content_child(b'a', 0), content_child(b'b', 1)],
            ..good.clone()
        },
        "dead child",
    );
    refused(
        &ContentNode {
            children: vec![content_child(b'b', 1), content_child(b'a', 1)],
            ..good.clone()
        },
        "descending",
    );
    refused(
        &ContentNode {
            children: vec![content_child(b'a', 1), content_child(b'a', 1)],
            ..good.clone()
        },
        "duplicate",
    );
    let mut empty_digest = good.clone();
    empty_digest.children[0].content = EMPTY_CONTENT_ROOT;
    refused(&empty_digest, "empty digest");
    refused(
        &ContentNode {
            children: vec![content_child(b'a', u64::MAX), content_child(b'b', 1)],
            ..good.clone()
        },
        "live overflow",
    );
    let value = LiveValue {
        content: FileContentId([3; 32]),
        size: 1,
        mode: 0,
    };
    let leaf = ContentNode {
        prefix: b"f".to_vec(),
        value: Some(value),
        children: vec![],
    };
    assert!(ContentNode::decode(&content_bytes(&leaf)).is_ok());
    refused(
        &ContentNode {
            value: Some(LiveValue { mode: 2, ..value }),
            ..leaf.clone()
        },
        "mode 2",
    );
    refused(
        &ContentNode {
            value: Some(LiveValue {
                size: (1 << 50) + 1,
                ..value
            }),
            ..leaf.clone()
        },
        "size",
    );
    let mut bytes = content_bytes(&leaf);
    bytes[0] = 2;
    assert!(matches!(
        ContentNode::decode(&bytes),
        Err(FormatError::UnsupportedVersion { .. })
    ));
    let mut bytes = content_bytes(&leaf);
    bytes[1 + 2 + 1] = 2; // live value flag
    assert!(ContentNode::decode(&bytes).is_err());
}

#[test]
fn revision_node_rules() {
    let t = fixture_tree();
    let node = RevisionNode::from(page(&t, b"a/"));
    let bytes = node.encode().unwrap();
    let mut v2 = bytes.clone();
    v2[0] = 2;
    assert!(matches!(
        RevisionNode::decode(&v2),
        Err(FormatError::UnsupportedVersion { .. })
    ));
    let refused = |n: &RevisionNode, why: &str| assert!(n.encode().is_err(), "{why}");
    let mut one = node.clone();
    one.children.truncate(1);
    refused(&one, "valueless with one child");
    let mut stale = node.clone();
    stale.children[0].1.newest = 0;
    refused(&stale, "child newest 0");
    let mut empty_rev = node.clone();
    empty_rev.children[0].1.revision = EMPTY_REVISION_ROOT;
    refused(&empty_rev, "child with the empty revision digest");
    let mut dead = node.clone();
    dead.children[0].1.live = 0;
    refused(&dead, "dead child with a live content digest");
    let mut swapped = node.clone();
    swapped.children.swap(0, 1);
    refused(&swapped, "descending edges");
    let mut bad_value = RevisionNode::from(page(&t, b"a/x"));
    bad_value.value.as_mut().unwrap().last_change = 0;
    refused(&bad_value, "zero change");
    let mut bad_prefix = RevisionNode::from(page(&t, b"a/x"));
    bad_prefix.prefix = b"a/".to_vec();
    refused(&bad_prefix, "prefix is not the key");
}

#[test]
fn reference_shape() {
    let t = fixture_tree();
    // Post-order ids: children before parents, the root last.
    assert_eq!(t.root.node, t.pages.len() as u64);
    for (index, node) in t.pages.iter().enumerate() {
        let id = index as u64 + 1;
        node.validate().unwrap();
        node.check_in_tree(Tree::Exact, id).unwrap();
        for (edge, link) in &node.children {
            let child = t.page(link.node).unwrap();
            node.check_child(*edge, child).unwrap();
        }
        // Every page survives the physical encoding.
        assert_eq!(&decode_page(&encode_page(node).unwrap()).unwrap(), node);
    }
    let root = t.page(t.root.node).unwrap();
    assert_eq!(node_link(root, t.root.node).unwrap(), t.root);
    assert!(root.prefix.is_empty() && root.value.is_none());
    let docs = page(&t, b"docs");
    assert_eq!(docs.children.len(), 1);
    assert_eq!(docs.children[0].0, b'/');
    assert_eq!(t.page(docs.children[0].1.node).unwrap().prefix, b"docs/z");

    // A single entry is one leaf whose prefix is the whole key.
    let one = tree(vec![live("only/file.bin", 1)]);
    assert_eq!(one.pages.len(), 1);
    assert_eq!(one.pages[0].prefix, b"only/file.bin");

    // Unsorted or duplicate entries are refused.
    let entries = vec![(b"b".to_vec(), live("b", 1)), (b"a".to_vec(), live("a", 1))];
    assert!(build(&entries).is_err());
    let entries = vec![(b"a".to_vec(), live("a", 1)), (b"a".to_vec(), live("a", 2))];
    assert!(build(&entries).is_err());
    // A key that is not the value's key is refused.
    assert!(build(&[(b"x".to_vec(), live("y", 1))]).is_err());
}

#[test]
fn empty_and_all_deleted_trees() {
    let empty = tree(vec![]);
    assert_eq!(empty.root, Link::EMPTY);
    assert!(empty.pages.is_empty());

    let deleted = tree(vec![tomb("a", 1), tomb("b/c", 2), tomb("b/d", 3)]);
    assert_eq!(deleted.root.live, 0);
    assert_eq!(deleted.root.newest, 3);
    assert_eq!(deleted.root.content, EMPTY_CONTENT_ROOT);
    assert_ne!(deleted.root.revision, EMPTY_REVISION_ROOT);
    deleted.root.validate().unwrap();
}

#[test]
fn edit_then_revert_restores_the_content_root() {
    let before = tree(vec![live_with("a.psd", 1, "v1"), live("b.png", 2)]);
    let edited = tree(vec![live_with("a.psd", 3, "v2"), live("b.png", 2)]);
    let reverted = tree(vec![live_with("a.psd", 4, "v1"), live("b.png", 2)]);
    assert_ne!(before.root.content, edited.root.content);
    assert_eq!(before.root.content, reverted.root.content);
    assert_ne!(before.root.revision, reverted.root.revision);
    assert_eq!(reverted.root.newest, 4);
}

#[test]
fn add_then_delete_restores_the_content_root() {
    let before = tree(vec![live("art/a.png", 1), live("art/b.png", 2)]);
    let added = tree(vec![
        live("art/a.png", 1),
        live("art/b.png", 2),
        live("art/c/d.png", 3),
    ]);
    let deleted = tree(vec![
        live("art/a.png", 1),
        live("art/b.png", 2),
        tomb("art/c/d.png", 4),
    ]);
    assert_ne!(before.root.content, added.root.content);
    assert_eq!(before.root.content, deleted.root.content);
    assert_ne!(before.root.revision, deleted.root.revision);
    // The tombstone changes topology: `art/` keeps a third child.
    assert_eq!(page(&deleted, b"art/").children.len(), 3);
    assert_eq!(page(&before, b"art/").children.len(), 2);

    // A tombstone that splits a formerly compressed path changes nothing
    // in the content tree either.
    let single = tree(vec![live("x/long/path.bin", 1)]);
    let split = tree(vec![live("x/long/path.bin", 1), tomb("x/lost.bin", 2)]);
    assert_eq!(single.root.content, split.root.content);
    assert_ne!(single.root.revision, split.root.revision);
}

fn arb_live_and_dead() -> impl Strategy<Value = (BTreeMap<String, u64>, BTreeMap<String, u64>)> {
    let path = "[ab]{1,3}(/[ab]{1,3}){0,2}";
    (
        proptest::collection::btree_map(path, 1u64..100, 0..20),
        proptest::collection::btree_map(path, 1u64..100, 0..20),
    )
}

proptest! {
    #[test]
    fn content_root_ignores_tombstones_and_order((lives, dead) in arb_live_and_dead(), seed in any::<u64>()) {
        let live_values: Vec<NodeValue> = lives.iter().map(|(p, c)| live(p, *c)).collect();
        let only_live = tree(live_values.clone());
        // The same live set plus tombstones for paths that are not live.
        let mut with_dead = live_values.clone();
        with_dead.extend(dead.iter().filter(|(p, _)| !lives.contains_key(*p)).map(|(p, c)| tomb(p, *c)));
        let mixed = tree(with_dead.clone());
        prop_assert_eq!(only_live.root.content, mixed.root.content);
        prop_assert_eq!(only_live.root.live, mixed.root.live);
        prop_assert_eq!(only_live.root.live, lives.len() as u64);
        // Insertion order into the map does not matter.
        let mut shuffled = with_dead.clone();
        let n = shuffled.len();
        if n > 1 {
            for i in 0..n {
                let j = (seed.wrapping_mul(i as u64 + 1).rotate_left(17) % n as u64) as usize;
                shuffled.swap(i, j);
            }
        }
        let again = tree(shuffled);
        prop_assert_eq!(again.root, mixed.root);
        prop_assert_eq!(&again.pages, &mixed.pages);
        // Every page is consistent with its children.
        for (index, node) in mixed.pages.iter().enumerate() {
            node.check_in_tree(Tree::Exact, index as u64 + 1).unwrap();
            for (edge, link) in &node.children {
                node.check_child(*edge, mixed.page(link.node).unwrap()).unwrap();
            }
            let revision = RevisionNode::from(node);
            prop_assert_eq!(RevisionNode::decode(&revision.encode().unwrap()).unwrap(), revision);
            prop_assert_eq!(node_summary(node).unwrap().revision, revision_digest(node).unwrap());
            if let ContentProjection::Node(content) = content_projection(node) {
                prop_assert_eq!(ContentNode::decode(&content.encode().unwrap()).unwrap(), content);
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = RevisionNode::decode(&bytes);
        let _ = ContentNode::decode(&bytes);
        let mut versioned = vec![1u8];
        versioned.extend_from_slice(&bytes);
        let _ = RevisionNode::decode(&versioned);
        let _ = ContentNode::decode(&versioned);
    }
}

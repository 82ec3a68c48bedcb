//! Tests for `scribe_format::snapshot`: links, root rows and keys, file
//! records, and snapshot pages (profile 3).

use super::support::{assert_refuses_truncation_and_trailing, check_area, Golden};
use proptest::prelude::*;
use scribe_format::error::FormatError;
use scribe_format::id::{BranchId, FileContentId, ManifestId};
use scribe_format::portable::{self, build, EMPTY_CONTENT_ROOT, EMPTY_REVISION_ROOT};
use scribe_format::snapshot::{
    decode_body, decode_page, encode_body, encode_page, FileRecord, Link, Node, NodeValue, RootKey,
    RootRow, Tree, FILE_RECORD_LEN, LINK_LEN, ROOT_KEY_LEN, ROOT_ROW_LEN,
};

fn digest(seed: &str) -> [u8; 32] {
    *blake3::hash(seed.as_bytes()).as_bytes()
}

fn record(change: u64, seed: &str) -> FileRecord {
    FileRecord {
        manifest: ManifestId(digest(&format!("manifest {seed}"))),
        content: FileContentId(digest(&format!("content {seed}"))),
        size: 1000 + change,
        mode: 0,
        change,
    }
}

fn live(path: &str, change: u64) -> NodeValue {
    NodeValue {
        path: path.to_owned(),
        last_change: change,
        state: Some(record(change, path)),
    }
}

fn tomb(path: &str, change: u64) -> NodeValue {
    NodeValue {
        path: path.to_owned(),
        last_change: change,
        state: None,
    }
}

fn entries(values: Vec<NodeValue>) -> Vec<(Vec<u8>, NodeValue)> {
    let mut out: Vec<_> = values
        .into_iter()
        .map(|v| (v.path.as_bytes().to_vec(), v))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// A small tree with a valueless branching root, a tombstone and a valued
/// node with a child.
fn sample_tree() -> portable::ReferenceTree {
    build(&entries(vec![
        live("assets/a.png", 3),
        tomb("assets/b.png", 5),
        tomb("docs", 4),
        live("docs/x.md", 6),
        live("readme", 1),
    ]))
    .unwrap()
}

fn find_page<'a>(tree: &'a portable::ReferenceTree, prefix: &[u8]) -> &'a Node {
    tree.pages
        .iter()
        .find(|p| p.prefix == prefix)
        .unwrap_or_else(|| panic!("no page with prefix {:?}", String::from_utf8_lossy(prefix)))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn page_golden(name: &str, node: &Node) -> Golden {
    Golden {
        name: name.to_owned(),
        bytes: encode_page(node).unwrap(),
        identity: Some(hex(&portable::revision_digest(node).unwrap())),
    }
}

fn long_leaf() -> Node {
    let path = format!("textures/{}tile.png", "stone-wall/".repeat(60));
    Node::leaf(path.as_bytes().to_vec(), live(&path, 9))
}

fn word(seed: &str) -> u64 {
    let d = digest(seed);
    u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
}

/// A valueless node whose high-entropy links leave LZ4 nothing to gain, so
/// its page stores the raw body. The links are valid on their own; no
/// children exist behind them (a single page cannot tell).
fn incompressible_branch() -> Node {
    let link = |seed: &str| Link {
        node: word(&format!("{seed} node")) | 1,
        live: word(&format!("{seed} live")) >> 2,
        newest: word(&format!("{seed} newest")) | 1,
        content: digest(&format!("{seed} content")),
        revision: digest(&format!("{seed} revision")),
    };
    Node {
        prefix: Vec::new(),
        value: None,
        children: vec![(b'a', link("a")), (b'b', link("b"))],
    }
}

fn goldens() -> Vec<Golden> {
    let tree = sample_tree();
    let no_id = |name: &str, bytes: Vec<u8>| Golden {
        name: name.to_owned(),
        bytes,
        identity: None,
    };
    let root = tree.root;
    let row = RootRow {
        exact: root,
        collision: Link { node: 77, ..root },
    };
    vec![
        no_id("link-empty", Link::EMPTY.encode().to_vec()),
        no_id("link", root.encode().to_vec()),
        no_id("root-row-empty", RootRow::EMPTY.encode().unwrap().to_vec()),
        no_id("root-row", row.encode().unwrap().to_vec()),
        no_id(
            "root-key",
            RootKey {
                branch: BranchId([0xb7; 16]),
                change: 0x0102_0304_0506_0708,
            }
            .encode()
            .to_vec(),
        ),
        no_id("file-record", record(42, "file").encode().unwrap().to_vec()),
        page_golden("page-leaf", find_page(&tree, b"readme")),
        page_golden("page-branch-raw", &incompressible_branch()),
        page_golden("page-tombstone", find_page(&tree, b"assets/b.png")),
        page_golden("page-branch", find_page(&tree, b"")),
        page_golden("page-value-children", find_page(&tree, b"docs")),
        page_golden("page-leaf-lz4", &long_leaf()),
    ]
}

#[test]
fn golden_fixtures() {
    let committed = check_area("snapshot", &goldens());
    for name in ["link-empty", "link"] {
        let bytes = &committed[name];
        assert_eq!(bytes.len(), LINK_LEN);
        assert_eq!(
            Link::decode(bytes).unwrap().encode().as_slice(),
            bytes.as_slice()
        );
        assert_refuses_truncation_and_trailing(name, bytes, Link::decode);
    }
    for name in ["root-row-empty", "root-row"] {
        let bytes = &committed[name];
        assert_eq!(bytes.len(), ROOT_ROW_LEN);
        let row = RootRow::decode(bytes).unwrap();
        assert_eq!(row.encode().unwrap().as_slice(), bytes.as_slice());
        assert_refuses_truncation_and_trailing(name, bytes, RootRow::decode);
    }
    let key = &committed["root-key"];
    assert_eq!(key.len(), ROOT_KEY_LEN);
    assert_eq!(
        RootKey::decode(key).unwrap().encode().as_slice(),
        key.as_slice()
    );
    assert_refuses_truncation_and_trailing("root-key", key, RootKey::decode);
    let file = &committed["file-record"];
    assert_eq!(file.len(), FILE_RECORD_LEN);
    assert_eq!(
        FileRecord::decode(file)
            .unwrap()
            .encode()
            .unwrap()
            .as_slice(),
        file.as_slice()
    );
    assert_refuses_truncation_and_trailing("file-record", file, FileRecord::decode);
    assert_refuses_truncation_and_trailing("file-record body", &file[1..], FileRecord::decode_body);

    let listed =
        std::fs::read_to_string(super::support::fixture_dir("snapshot").join("IDENTITIES"))
            .unwrap();
    for name in [
        "page-leaf",
        "page-branch-raw",
        "page-tombstone",
        "page-branch",
        "page-value-children",
        "page-leaf-lz4",
    ] {
        let bytes = &committed[name];
        let node = decode_page(bytes).unwrap();
        assert_eq!(&encode_page(&node).unwrap(), bytes, "{name}: re-encode");
        let identity = hex(&portable::revision_digest(&node).unwrap());
        assert!(
            listed.contains(&format!("{name}.bin {identity}")),
            "{name}: identity"
        );
        assert_refuses_truncation_and_trailing(name, bytes, decode_page);
        let body = encode_body(&node).unwrap();
        assert_refuses_truncation_and_trailing(name, &body, decode_body);
    }
    // Codec 0 for the short leaf, codec 1 where LZ4 is smaller.
    assert_eq!(committed["page-branch-raw"][1], 0);
    assert_eq!(committed["page-leaf-lz4"][1], 1);
}

fn le(v: u64) -> [u8; 8] {
    v.to_le_bytes()
}

#[test]
fn link_from_spec_bytes() {
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&le(7)); // node id
    bytes.extend_from_slice(&le(0)); // live values: all tombstones
    bytes.extend_from_slice(&le(12)); // newest change
    bytes.extend_from_slice(&EMPTY_CONTENT_ROOT);
    bytes.extend_from_slice(&[0x5a; 32]);
    let link = Link::decode(&bytes).unwrap();
    assert_eq!(
        link,
        Link {
            node: 7,
            live: 0,
            newest: 12,
            content: EMPTY_CONTENT_ROOT,
            revision: [0x5a; 32],
        }
    );
    assert_eq!(link.encode().as_slice(), bytes.as_slice());

    let mut empty = vec![0u8; 24];
    empty.extend_from_slice(&EMPTY_CONTENT_ROOT);
    empty.extend_from_slice(&EMPTY_REVISION_ROOT);
    assert_eq!(Link::EMPTY.encode().as_slice(), empty.as_slice());
    assert!(Link::decode(&empty).unwrap().is_empty());
}

fn link_bytes(link: &Link) -> Vec<u8> {
    link.encode().to_vec()
}

#[test]
fn link_rules() {
    let good = Link {
        node: 3,
        live: 1,
        newest: 2,
        content: [1; 32],
        revision: [2; 32],
    };
    assert!(Link::decode(&link_bytes(&good)).is_ok());
    // Newest change 0 is only the empty link.
    assert!(Link::decode(&link_bytes(&Link { newest: 0, ..good })).is_err());
    assert!(Link::decode(&link_bytes(&Link {
        node: 5,
        ..Link::EMPTY
    }))
    .is_err());
    // A nonempty link has a page.
    assert!(Link::decode(&link_bytes(&Link { node: 0, ..good })).is_err());
    // Empty content digest exactly when nothing is live.
    assert!(Link::decode(&link_bytes(&Link {
        content: EMPTY_CONTENT_ROOT,
        ..good
    }))
    .is_err());
    assert!(Link::decode(&link_bytes(&Link { live: 0, ..good })).is_err());
    // A nonempty subtree never has the empty revision digest.
    assert!(Link::decode(&link_bytes(&Link {
        revision: EMPTY_REVISION_ROOT,
        ..good
    }))
    .is_err());
}

#[test]
fn root_row_from_spec_bytes_and_rules() {
    let link = sample_tree().root;
    let mut bytes = vec![2u8];
    bytes.extend_from_slice(&link.encode());
    bytes.extend_from_slice(&link.encode());
    let row = RootRow::decode(&bytes).unwrap();
    assert_eq!(row.exact, link);
    assert_eq!(row.encode().unwrap().as_slice(), bytes.as_slice());

    let mut v1 = bytes.clone();
    v1[0] = 1;
    assert!(matches!(
        RootRow::decode(&v1),
        Err(FormatError::UnsupportedVersion { version: 1, .. })
    ));
    // Live counts must agree.
    let mut other = RootRow::EMPTY.encode().unwrap().to_vec();
    other[1 + LINK_LEN..].copy_from_slice(&link.encode());
    assert!(RootRow::decode(&other).is_err());
    assert!(RootRow {
        exact: Link::EMPTY,
        collision: link
    }
    .encode()
    .is_err());
}

#[test]
fn root_key_from_spec_bytes() {
    let mut bytes = vec![0xab; 16];
    bytes.extend_from_slice(&[0, 0, 0, 0, 0, 0, 1, 2]);
    let key = RootKey::decode(&bytes).unwrap();
    assert_eq!(key.branch, BranchId([0xab; 16]));
    assert_eq!(key.change, 0x0102);
    assert_eq!(key.encode().as_slice(), bytes.as_slice());
    // Ordered keys sort by change within a branch.
    let a = RootKey {
        branch: BranchId([1; 16]),
        change: 255,
    }
    .encode();
    let b = RootKey {
        branch: BranchId([1; 16]),
        change: 256,
    }
    .encode();
    assert!(a < b);
}

fn file_record_bytes(version: u8, size: u64, mode: u8, change: u64) -> Vec<u8> {
    let mut bytes = vec![version];
    bytes.extend_from_slice(&[0x11; 32]);
    bytes.extend_from_slice(&[0x22; 32]);
    bytes.extend_from_slice(&le(size));
    bytes.push(mode);
    bytes.extend_from_slice(&le(change));
    bytes
}

#[test]
fn file_record_from_spec_bytes_and_rules() {
    let bytes = file_record_bytes(1, 5, 1, 9);
    let record = FileRecord::decode(&bytes).unwrap();
    assert_eq!(
        record,
        FileRecord {
            manifest: ManifestId([0x11; 32]),
            content: FileContentId([0x22; 32]),
            size: 5,
            mode: 1,
            change: 9,
        }
    );
    assert_eq!(record.encode().unwrap().as_slice(), bytes.as_slice());
    assert_eq!(FileRecord::decode_body(&bytes[1..]).unwrap(), record);
    let mut body = Vec::new();
    record.write_body_to(&mut body);
    assert_eq!(body, bytes[1..]);

    assert!(matches!(
        FileRecord::decode(&file_record_bytes(2, 5, 1, 9)),
        Err(FormatError::UnsupportedVersion { .. })
    ));
    assert!(FileRecord::decode(&file_record_bytes(1, 5, 2, 9)).is_err());
    assert!(matches!(
        FileRecord::decode(&file_record_bytes(1, (1 << 50) + 1, 0, 9)),
        Err(FormatError::LimitExceeded { .. })
    ));
    assert!(FileRecord::decode(&file_record_bytes(1, 1 << 50, 0, 9)).is_ok());
}

/// The body of a leaf built field by field from the specification table.
fn leaf_body_bytes(prefix: &[u8], path: &[u8], change: u64, state: Option<&[u8]>) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&(prefix.len() as u16).to_le_bytes());
    body.extend_from_slice(prefix);
    body.push(1); // value present
    body.extend_from_slice(&(path.len() as u16).to_le_bytes());
    body.extend_from_slice(path);
    body.extend_from_slice(&le(change));
    match state {
        Some(state) => {
            body.push(1);
            body.extend_from_slice(state);
        }
        None => body.push(0),
    }
    body.extend_from_slice(&0u16.to_le_bytes()); // no children
    body
}

fn raw_page(body: &[u8]) -> Vec<u8> {
    let mut page = vec![3u8, 0];
    page.extend_from_slice(&(body.len() as u32).to_le_bytes());
    page.extend_from_slice(&(body.len() as u32).to_le_bytes());
    page.extend_from_slice(body);
    page
}

#[test]
fn leaf_page_from_spec_bytes() {
    let state = file_record_bytes(1, 5, 0, 9);
    let body = leaf_body_bytes(b"a.bin", b"a.bin", 9, Some(&state));
    let page = raw_page(&body);
    let node = decode_page(&page).unwrap();
    assert_eq!(node.prefix, b"a.bin");
    let value = node.value.as_ref().unwrap();
    assert_eq!(value.path, "a.bin");
    assert_eq!(value.last_change, 9);
    assert_eq!(value.state.unwrap().size, 5);
    assert!(node.children.is_empty());
    assert_eq!(encode_body(&node).unwrap(), body);
    // The fill patterns compress, so the encoder may pick LZ4 here; either
    // way the page decodes to the same node.
    assert_eq!(decode_page(&encode_page(&node).unwrap()).unwrap(), node);

    // A tombstone leaf.
    let body = leaf_body_bytes(b"gone", b"gone", 4, None);
    let node = decode_page(&raw_page(&body)).unwrap();
    assert_eq!(node.value.unwrap().state, None);
}

#[test]
fn branch_page_from_spec_bytes() {
    let tree = sample_tree();
    let root = find_page(&tree, b"");
    let mut body = vec![0, 0, 0]; // empty prefix, no value
    body.extend_from_slice(&3u16.to_le_bytes());
    for (edge, link) in &root.children {
        body.push(*edge);
        body.extend_from_slice(&link.encode());
    }
    assert_eq!(encode_body(root).unwrap(), body);
    assert_eq!(&decode_body(&body).unwrap(), root);
    let edges: Vec<u8> = root.children.iter().map(|(edge, _)| *edge).collect();
    assert_eq!(edges, b"adr");
}

fn expect_refused(body: &[u8], why: &str) {
    assert!(decode_body(body).is_err(), "accepted: {why}");
    assert!(
        decode_page(&raw_page(body)).is_err(),
        "page accepted: {why}"
    );
}

#[test]
fn page_rules() {
    let state = file_record_bytes(1, 5, 0, 9);
    let ok = leaf_body_bytes(b"a.bin", b"a.bin", 9, Some(&state));
    assert!(decode_body(&ok).is_ok());

    // Value changes are nonzero; a live state's change agrees.
    expect_refused(&leaf_body_bytes(b"a.bin", b"a.bin", 0, None), "zero change");
    expect_refused(
        &leaf_body_bytes(b"a.bin", b"a.bin", 8, Some(&state)),
        "state change differs",
    );
    // The prefix is the value's key.
    expect_refused(
        &leaf_body_bytes(b"a.bi", b"a.bin", 9, Some(&state)),
        "prefix is not the path",
    );
    // The path is canonical UTF-8.
    expect_refused(
        &leaf_body_bytes(b"a//b", b"a//b", 9, None),
        "non-canonical path",
    );
    expect_refused(&leaf_body_bytes(b"", b"", 9, None), "empty path");
    expect_refused(
        &leaf_body_bytes(b"\xff", b"\xff", 9, None),
        "path not UTF-8",
    );
    // Flags are strictly 0 or 1.
    let mut bad = ok.clone();
    bad[2 + 5] = 2; // value present
    expect_refused(&bad, "value flag 2");
    let mut bad = ok.clone();
    bad[2 + 5 + 1 + 2 + 5 + 8] = 2; // state present
    expect_refused(&bad, "state flag 2");
    // The state is a version-1 FileRecord.
    expect_refused(
        &leaf_body_bytes(b"a.bin", b"a.bin", 9, Some(&file_record_bytes(2, 5, 0, 9))),
        "file record version 2",
    );
    expect_refused(
        &leaf_body_bytes(b"a.bin", b"a.bin", 9, Some(&file_record_bytes(1, 5, 3, 9))),
        "mode 3",
    );
    // Trailing bytes inside the body.
    let mut bad = ok.clone();
    bad.push(0);
    expect_refused(&bad, "trailing body byte");

    // Oversized prefix: 24,577 bytes (refused before it is copied).
    let mut bad = vec![0x01, 0x60];
    bad.extend_from_slice(&vec![b'a'; 24_577]);
    bad.extend_from_slice(&[0, 0, 0]);
    assert!(matches!(
        decode_body(&bad),
        Err(FormatError::LimitExceeded { .. })
    ));

    // A valueless node has at least two children.
    let tree = sample_tree();
    let link = tree.root;
    let mut one_child = vec![0, 0, 0, 1, 0, b'a'];
    one_child.extend_from_slice(&link.encode());
    expect_refused(&one_child, "valueless with one child");
    expect_refused(&[0, 0, 0, 0, 0], "valueless leaf");

    // Edges ascend strictly.
    let child = |edge: u8| {
        let mut c = vec![edge];
        c.extend_from_slice(&link.encode());
        c
    };
    let mut two = vec![0, 0, 0, 2, 0];
    two.extend(child(b'a'));
    two.extend(child(b'b'));
    assert!(decode_body(&two).is_ok());
    let mut dup = vec![0, 0, 0, 2, 0];
    dup.extend(child(b'a'));
    dup.extend(child(b'a'));
    expect_refused(&dup, "duplicate edge");
    let mut desc = vec![0, 0, 0, 2, 0];
    desc.extend(child(b'b'));
    desc.extend(child(b'a'));
    expect_refused(&desc, "descending edges");

    // Child count at most 256.
    let mut many = vec![0, 0, 0];
    many.extend_from_slice(&257u16.to_le_bytes());
    assert!(matches!(
        decode_body(&many),
        Err(FormatError::LimitExceeded { .. })
    ));

    // Children are valid nonempty links.
    let mut empty_child = vec![0, 0, 0, 2, 0, b'a'];
    empty_child.extend_from_slice(&Link::EMPTY.encode());
    empty_child.extend(child(b'b'));
    expect_refused(&empty_child, "empty child link");

    // Summaries that overflow u64.
    let huge = Link {
        live: u64::MAX,
        ..link
    };
    let mut overflow = vec![0, 0, 0, 2, 0, b'a'];
    overflow.extend_from_slice(&huge.encode());
    overflow.push(b'b');
    overflow.extend_from_slice(&huge.encode());
    expect_refused(&overflow, "live count overflow");
}

#[test]
fn page_framing_rules() {
    let page = encode_page(&incompressible_branch()).unwrap();
    let mut bad = page.clone();
    bad[0] = 2;
    assert!(matches!(
        decode_page(&bad),
        Err(FormatError::UnsupportedVersion { version: 2, .. })
    ));
    let mut bad = page.clone();
    bad[1] = 2; // codec
    assert!(decode_page(&bad).is_err());
    // A declared raw length above 55,650 is refused before allocation.
    let mut huge = vec![3u8, 0];
    huge.extend_from_slice(&55_651u32.to_le_bytes());
    huge.extend_from_slice(&55_651u32.to_le_bytes());
    assert!(decode_page(&huge).is_err());
    let mut huge_lz4 = vec![3u8, 1];
    huge_lz4.extend_from_slice(&u32::MAX.to_le_bytes());
    huge_lz4.extend_from_slice(&10u32.to_le_bytes());
    huge_lz4.extend_from_slice(&[0; 10]);
    assert!(decode_page(&huge_lz4).is_err());
    // A raw block whose body is bigger than the maximum node body.
    let big = vec![0u8; 55_651];
    assert!(decode_body(&big).is_err());
    assert!(decode_page(&[]).is_err());
    assert!(decode_page(&[3]).is_err());
}

#[test]
fn encoders_refuse_invalid_nodes() {
    let mut node = find_page(&sample_tree(), b"").clone();
    node.children.truncate(1);
    assert!(encode_page(&node).is_err());
    assert!(encode_body(&node).is_err());
    let bad = Node::leaf(b"x".to_vec(), tomb("y", 1));
    assert!(encode_page(&bad).is_err());
    assert!(RootRow {
        exact: Link {
            newest: 0,
            ..sample_tree().root
        },
        collision: Link::EMPTY
    }
    .encode()
    .is_err());
}

#[test]
fn tree_context_checks() {
    let tree = sample_tree();
    for (index, page) in tree.pages.iter().enumerate() {
        let id = index as u64 + 1;
        page.check_in_tree(Tree::Exact, id).unwrap();
        page.check_in_tree(Tree::Collision, id).unwrap();
        for (edge, link) in &page.children {
            page.check_child(*edge, tree.page(link.node).unwrap())
                .unwrap();
        }
    }
    let root = tree.page(tree.root.node).unwrap();
    // Children must have smaller ids than their parent.
    assert!(root.check_in_tree(Tree::Exact, 1).is_err());
    // A child fetched through the wrong edge or with other summaries.
    let (edge, link) = root.children[0];
    let child = tree.page(link.node).unwrap();
    assert!(root.check_child(root.children[1].0, child).is_err());
    assert!(root.check_child(b'z', child).is_err());
    let mut changed = child.clone();
    if let Some((_, l)) = changed.children.first_mut() {
        *l = Link {
            newest: l.newest + 100,
            ..*l
        };
    }
    assert!(root.check_child(edge, &changed).is_err());
}

/// Sorted unique entries of canonical paths over a small alphabet, so that
/// prefixes are shared often.
fn arb_entries() -> impl Strategy<Value = Vec<(Vec<u8>, NodeValue)>> {
    let path = "[ab]{1,3}(/[ab]{1,3}){0,2}";
    proptest::collection::btree_map(path, (1u64..50, any::<bool>(), 0u8..2), 0..24).prop_map(
        |map| {
            map.into_iter()
                .map(|(path, (change, is_live, mode))| {
                    let mut value = if is_live {
                        live(&path, change)
                    } else {
                        tomb(&path, change)
                    };
                    if let Some(state) = value.state.as_mut() {
                        state.mode = mode;
                    }
                    (path.into_bytes(), value)
                })
                .collect()
        },
    )
}

proptest! {
    #[test]
    fn pages_round_trip(entries in arb_entries()) {
        let tree = build(&entries).unwrap();
        for page in &tree.pages {
            let bytes = encode_page(page).unwrap();
            prop_assert_eq!(&decode_page(&bytes).unwrap(), page);
            let body = encode_body(page).unwrap();
            prop_assert_eq!(&decode_body(&body).unwrap(), page);
        }
        let row = RootRow { exact: tree.root, collision: tree.root };
        prop_assert_eq!(RootRow::decode(&row.encode().unwrap()).unwrap(), row);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = decode_page(&bytes);
        let _ = decode_body(&bytes);
        let _ = Link::decode(&bytes);
        let _ = RootRow::decode(&bytes);
        let _ = RootKey::decode(&bytes);
        let _ = FileRecord::decode(&bytes);
    }

    #[test]
    fn mutated_pages_never_panic(entries in arb_entries(), at in any::<usize>(), byte in any::<u8>()) {
        let tree = build(&entries).unwrap();
        for page in &tree.pages {
            let mut body = encode_body(page).unwrap();
            let i = at % body.len();
            body[i] = byte;
            let _ = decode_body(&body);
            let _ = decode_page(&raw_page(&body));
            let mut bytes = encode_page(page).unwrap();
            let i = at % bytes.len();
            bytes[i] = byte;
            let _ = decode_page(&bytes);
        }
    }
}

/// The 55,650-byte body bound is the sum of every field at its maximum.
#[test]
fn body_bound_is_the_sum_of_field_maxima() {
    let prefix = 2 + 24_576;
    let value = 1 + (2 + 8_192) + 8 + 1 + FILE_RECORD_LEN;
    let children = 2 + 256 * (1 + LINK_LEN);
    assert_eq!(
        (prefix + value + children) as u32,
        scribe_format::limits::MAX_SNAPSHOT_NODE_BODY
    );
}

#[test]
fn largest_valueless_page_round_trips() {
    let link = incompressible_branch().children[0].1;
    let node = Node {
        prefix: vec![b'p'; 24_576],
        value: None,
        children: (0..=255u8)
            .map(|edge| (edge, Link { live: 1, ..link }))
            .collect(),
    };
    let page = encode_page(&node).unwrap();
    assert_eq!(decode_page(&page).unwrap(), node);
    let mut longer = node.clone();
    longer.prefix.push(b'p');
    assert!(encode_page(&longer).is_err());
}

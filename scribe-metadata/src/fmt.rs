//! The snapshot and portable-tree encodings this crate consumes, from
//! `scribe_format::snapshot` and `scribe_format::portable`, with the
//! infallible helpers the builders use.

pub use scribe_format::portable::{EMPTY_CONTENT_ROOT, EMPTY_REVISION_ROOT};
pub use scribe_format::snapshot::{FileRecord, Link, Node, NodeValue, RootRow};

use scribe_format::FormatError;

/// Encode a page (physical version 3).
pub fn encode_page(node: &Node) -> Result<Vec<u8>, FormatError> {
    scribe_format::snapshot::encode_page(node)
}

/// Decode a page, refusing every malformed field.
pub fn decode_page(bytes: &[u8]) -> Result<Node, FormatError> {
    scribe_format::snapshot::decode_page(bytes)
}

/// The link naming `node` at page `id` (summaries and both digests).
pub fn node_link(node: &Node, id: u64) -> Result<Link, FormatError> {
    scribe_format::portable::node_link(node, id)
}

/// The 177-byte root row.
pub fn encode_root(row: &RootRow) -> Result<Vec<u8>, FormatError> {
    Ok(row.encode()?.to_vec())
}

/// Reference roots of the canonical tree holding `entries` (sorted, unique).
pub fn reference_root(entries: &[(Vec<u8>, NodeValue)]) -> Result<Link, FormatError> {
    Ok(scribe_format::portable::reference::build(entries)?.root)
}

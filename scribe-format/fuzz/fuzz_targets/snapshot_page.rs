//! Fuzz snapshot page decoding (profile 3) and the fixed-size snapshot
//! records: no input panics or allocates beyond the declared limits, and a
//! decoded node encodes to a page that decodes to the same node. (Page
//! bytes need not match: either block codec is accepted, and compressor
//! output is not an identity.)

#![no_main]

use libfuzzer_sys::fuzz_target;
use scribe_format::portable::{self, RevisionNode};
use scribe_format::snapshot::{decode_body, decode_page, encode_body, encode_page, Link, RootRow};

fuzz_target!(|data: &[u8]| {
    if let Ok(node) = decode_page(data) {
        let page = encode_page(&node).expect("a decoded node is valid");
        assert_eq!(decode_page(&page).expect("re-encoded page decodes"), node);
        let summary = portable::node_summary(&node).expect("a decoded node has summaries");
        assert_eq!(
            summary.revision,
            RevisionNode::from(&node).digest().expect("a decoded node is valid")
        );
    }
    if let Ok(node) = decode_body(data) {
        assert_eq!(encode_body(&node).expect("a decoded node is valid"), data);
    }
    let _ = Link::decode(data);
    let _ = RootRow::decode(data);
    let _ = RevisionNode::decode(data);
    let _ = portable::ContentNode::decode(data);
});

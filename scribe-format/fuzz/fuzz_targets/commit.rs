//! Stored commit decoder (v1, v2, v3, v5): never panics; whatever decodes
//! re-encodes to the same bytes under the same identity.
#![no_main]

use libfuzzer_sys::fuzz_target;
use scribe_format::commit::{commit_id, StoredCommit};

fuzz_target!(|data: &[u8]| {
    if let Ok(commit) = StoredCommit::decode(data) {
        let bytes = commit.encode().expect("a decoded commit re-encodes");
        assert_eq!(bytes, data);
        assert_eq!(
            commit.id().expect("valid"),
            commit_id(data).expect("a decoded commit has a known version")
        );
    }
});

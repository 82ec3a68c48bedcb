//! Change set v1 decoder: never panics; whatever decodes re-encodes to the
//! same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use scribe_format::changeset::ChangeSet;

fuzz_target!(|data: &[u8]| {
    if let Ok(set) = ChangeSet::decode(data) {
        let bytes = set.encode().expect("a decoded change set re-encodes");
        assert_eq!(bytes, data);
    }
});

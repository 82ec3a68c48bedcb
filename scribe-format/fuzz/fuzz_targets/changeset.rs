//! Change set v1 decoder: never panics; whatever decodes re-encodes to the
//! same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use scribe_format::changeset::{ChangeSet, ChangeSetRef};

fuzz_target!(|data: &[u8]| {
    let owned = ChangeSet::decode(data);
    let view = ChangeSetRef::decode(data);
    assert_eq!(owned.is_ok(), view.is_ok());
    if let (Ok(set), Ok(view)) = (owned, view) {
        let bytes = set.encode().expect("a decoded change set re-encodes");
        assert_eq!(bytes, data);
        assert_eq!(view.to_change_set(), set);
    }
});

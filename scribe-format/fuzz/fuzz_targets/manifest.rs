//! Manifest v1 decoder: never panics; whatever decodes re-encodes to the
//! same bytes, and the borrowed view agrees with the owned value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use scribe_format::manifest::{Manifest, ManifestRef};

fuzz_target!(|data: &[u8]| {
    let owned = Manifest::decode(data);
    let view = ManifestRef::decode(data);
    assert_eq!(owned.is_ok(), view.is_ok());
    if let (Ok(owned), Ok(view)) = (owned, view) {
        let bytes = owned.encode().expect("a decoded manifest re-encodes");
        assert_eq!(bytes, data);
        assert_eq!(view.to_manifest(), owned);
        assert_eq!(owned.id().expect("valid"), view.id());
    }
});

//! Fuzz `SCRIBE_FORMAT` parsing: no input panics, and accepted input
//! re-encodes to exactly the same bytes (the reading is strict enough that
//! every accepted file has one spelling).

#![no_main]

use libfuzzer_sys::fuzz_target;
use scribe_format::descriptor::Descriptor;

fuzz_target!(|data: &[u8]| {
    if let Ok(descriptor) = Descriptor::parse(data) {
        assert_eq!(descriptor.encode(), data, "accepted bytes re-encode identically");
        let _ = descriptor.check_mutation(&[]);
        let _ = descriptor.data_root();
        let _ = descriptor.repository();
        let _ = descriptor.object_store();
        let _ = descriptor.workspace();
    }
});

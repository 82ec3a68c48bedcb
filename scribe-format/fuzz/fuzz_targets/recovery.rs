//! Recovery journal decoders (records, `.scrj` segments, archive `HEAD`
//! and frames): never panic; whatever decodes re-encodes to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    scribe_format::recovery::fuzz_decoders(data);
});

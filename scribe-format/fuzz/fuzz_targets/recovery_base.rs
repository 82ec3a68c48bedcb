//! Logical recovery bases (`.scrb`) and the archive `BASE` pointer: never
//! panic; whatever decodes re-encodes to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    scribe_format::recovery_base::fuzz_decoders(data);
});

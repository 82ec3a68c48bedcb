//! The `.scmx` metadata export decoder: never panics; whatever decodes
//! re-encodes to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    scribe_format::scmx::fuzz_decoder(data);
});

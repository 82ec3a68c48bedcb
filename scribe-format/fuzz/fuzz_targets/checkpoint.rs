//! Checkpoint manifests version 2 (`.ckpt`): never panic; whatever decodes
//! re-encodes to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    scribe_format::checkpoint::fuzz_decoders(data);
});

//! Every `state.redb` row decoder, the recovery index and the status cache
//! (`scribe_workspace::records::check_row_decoders`): never panics; whatever
//! decodes survives its own encoding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    scribe_workspace::records::check_row_decoders(data);
});

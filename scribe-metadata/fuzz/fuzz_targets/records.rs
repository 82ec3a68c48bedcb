//! Metadata row decoders (records, counters, moves, witnesses, pending
//! rows, change notes, root rows, key splitters): never panic; whatever
//! decodes re-encodes to the same bytes. The first byte splits the input
//! into a key and a value. `cargo fuzz run records` from
//! `scribe-metadata/`; CI runs the same decoders as a property test
//! (`records::tests::every_row_decoder_takes_arbitrary_bytes`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let split = data.first().map_or(0, |&b| usize::from(b)).min(data.len());
    let (key, value) = data.split_at(split);
    scribe_metadata::fuzz_row_decoders(key, value);
});

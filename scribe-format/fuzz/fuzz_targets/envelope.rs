//! Envelope decoding never panics; a decoded envelope re-encodes to an
//! envelope that decodes to the same payload, and streaming agrees with the
//! slice decoder.
#![no_main]

use libfuzzer_sys::fuzz_target;
use scribe_format::envelope::{self, Compression, EnvelopeHeader, HEADER_LEN};
use scribe_format::id::object_identity;

fuzz_target!(|data: &[u8]| {
    let limit = 1 << 22;
    let sliced = envelope::decode(data, limit);
    if let Ok(d) = &sliced {
        for compression in [Compression::None, Compression::Lz4] {
            let again = envelope::encode(d.kind, &d.payload, compression);
            let back = envelope::decode(&again, limit).expect("re-encoded envelope decodes");
            assert_eq!(back.payload, d.payload);
        }
    }
    if data.len() >= HEADER_LEN {
        if let Ok(header) = EnvelopeHeader::parse(data[..HEADER_LEN].try_into().unwrap()) {
            let body = &data[HEADER_LEN..];
            if header.stored_len == body.len() as u64 {
                let mut out = Vec::new();
                let streamed = envelope::decode_stream(&header, &mut &body[..], &mut out, limit);
                // Streaming also computes the identity, which a commit
                // payload without a known version word does not have.
                let identity = sliced
                    .as_ref()
                    .ok()
                    .and_then(|d| object_identity(d.kind, &d.payload).ok());
                assert_eq!(streamed.is_ok(), identity.is_some());
                if let (Ok((id, _)), Some(expected)) = (streamed, identity) {
                    assert_eq!(id, expected);
                    assert_eq!(out, &*sliced.unwrap().payload);
                }
            }
        }
    }
});

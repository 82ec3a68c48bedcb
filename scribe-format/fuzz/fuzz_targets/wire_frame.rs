//! Frame and message decoding never panic; a decoded request or reply
//! re-encodes to the same payload, and so does a decoded credential frame;
//! the credential reply decoder never panics either.
#![no_main]

use libfuzzer_sys::fuzz_target;
use scribe_format::wire::handshake as hs;
use scribe_format::wire::{self, Request, Response};

fuzz_target!(|data: &[u8]| {
    for lz4 in [false, true] {
        if let Ok((opcode, payload)) = wire::frame::decode_frame_body(data, lz4) {
            if let Ok(req) = Request::decode(opcode, &payload) {
                assert_eq!(req.encode_payload(), &*payload);
            }
            if let Ok(rep) = Response::decode(opcode, &payload) {
                assert_eq!(rep.encode_payload(), &*payload);
            }
        }
    }
    if let Ok(credential) = hs::decode_credential_frame(data) {
        let frame = hs::credential_frame(&credential).expect("a decoded credential encodes");
        assert_eq!(&frame[4..], data);
    }
    for lz4 in [false, true] {
        let _ = hs::decode_credential_reply(data, lz4);
    }
    if data.len() >= 32 {
        let hello: [u8; 32] = data[..32].try_into().unwrap();
        if let Ok(h) = wire::Hello::decode(&hello) {
            assert_eq!(h.encode(), hello);
        }
    }
});

//! The client-server protocol (`docs/wire-format.md` is the byte-level
//! reference).
//!
//! A connection opens with the fixed 32-byte [`handshake`], then carries
//! length-prefixed [`frame`]s: one request, one reply, in order. Messages are
//! in [`message`]; their field codec is [`codec`]. Client and server share
//! this one implementation; the transports (TCP, TLS, in-process) live in
//! `scribe-server`.

pub mod codec;
pub mod frame;
pub mod handshake;
pub mod message;

pub use codec::{Bytes, Text, Wire};
pub use frame::{decode_frame, encode_frame, MAX_FRAME_BYTES};
pub use handshake::{Answer, HandshakeStatus, Hello};
pub use message::{ErrorReply, Request, Response};

use crate::error::FormatError;

/// Encode a request as a complete frame.
pub fn request_frame(request: &Request, lz4: bool) -> Vec<u8> {
    encode_frame(request.opcode(), &request.encode_payload(), lz4)
}

/// Encode a reply as a complete frame.
pub fn response_frame(response: &Response, lz4: bool) -> Vec<u8> {
    encode_frame(response.opcode(), &response.encode_payload(), lz4)
}

/// Decode a request from a frame body (after the length word).
pub fn decode_request(body: &[u8], lz4: bool) -> Result<Request, FormatError> {
    let (opcode, payload) = frame::decode_frame_body(body, lz4)?;
    Request::decode(opcode, &payload)
}

/// Decode a reply from a frame body (after the length word).
pub fn decode_response(body: &[u8], lz4: bool) -> Result<Response, FormatError> {
    let (opcode, payload) = frame::decode_frame_body(body, lz4)?;
    Response::decode(opcode, &payload)
}

//! Length-prefixed frames.
//!
//! ```text
//! u32 length of what follows (≤ MAX_FRAME_BYTES; refused before buffering)
//! u16 opcode (requests 0x0001..0x7fff; a reply is its request | 0x8000;
//!     0xffff is the error reply)
//! u8  flags: bit 0 = the payload is LZ4-compressed (u64 original length then
//!     blocks, exactly as envelope codec 1); other bits are refused
//! ... payload
//! ```

use std::borrow::Cow;

use crate::bytes::{Put, Reader};
use crate::envelope::{decode_codec1, encode_codec1};
use crate::error::FormatError;

/// Largest frame body (after the length word), compressed or not.
pub const MAX_FRAME_BYTES: u32 = 8 << 20;
/// Largest decompressed payload of one frame.
pub const MAX_PAYLOAD_BYTES: u64 = 8 << 20;
/// Frame header after the length word.
pub const FRAME_HEADER_LEN: usize = 3;
/// Payloads below this are never compressed.
pub const COMPRESS_MIN_BYTES: usize = 512;
/// Flag: payload is compressed.
pub const FLAG_COMPRESSED: u8 = 1;
/// The error reply opcode.
pub const ERROR_OPCODE: u16 = 0xffff;
/// Bit that marks a reply opcode.
pub const REPLY_BIT: u16 = 0x8000;

/// Encode a whole frame (length word included). Compresses when `lz4` is
/// negotiated and it makes the payload smaller.
pub fn encode_frame(opcode: u16, payload: &[u8], lz4: bool) -> Vec<u8> {
    let compressed = if lz4 && payload.len() >= COMPRESS_MIN_BYTES {
        encode_codec1(payload)
    } else {
        None
    };
    let (flags, body) = match &compressed {
        Some(c) => (FLAG_COMPRESSED, c.as_slice()),
        None => (0, payload),
    };
    let mut out = Vec::with_capacity(4 + FRAME_HEADER_LEN + body.len());
    out.put_u32((FRAME_HEADER_LEN + body.len()) as u32);
    out.put_u16(opcode);
    out.put_u8(flags);
    out.put_bytes(body);
    out
}

/// Check a frame's length word before reading the body.
pub fn check_frame_len(len_word: [u8; 4]) -> Result<usize, FormatError> {
    let len = u32::from_le_bytes(len_word);
    if len > MAX_FRAME_BYTES {
        return Err(FormatError::LimitExceeded {
            what: "frame length",
            limit: MAX_FRAME_BYTES.into(),
            actual: len.into(),
        });
    }
    if (len as usize) < FRAME_HEADER_LEN {
        return Err(FormatError::Truncated {
            what: "frame header",
            needed: FRAME_HEADER_LEN as u64,
            available: len.into(),
        });
    }
    Ok(len as usize)
}

/// Split a frame body (after the length word) into opcode and payload,
/// decompressing when flagged. `lz4_allowed` is what the handshake granted.
pub fn decode_frame_body(
    body: &[u8],
    lz4_allowed: bool,
) -> Result<(u16, Cow<'_, [u8]>), FormatError> {
    let mut r = Reader::new(body);
    let opcode = r.u16("frame opcode")?;
    let flags = r.u8("frame flags")?;
    let rest = r.rest();
    match flags {
        0 => Ok((opcode, Cow::Borrowed(rest))),
        FLAG_COMPRESSED if lz4_allowed => {
            Ok((opcode, Cow::Owned(decode_codec1(rest, MAX_PAYLOAD_BYTES)?)))
        }
        FLAG_COMPRESSED => Err(FormatError::invalid(
            "frame flags",
            "compression was not negotiated",
        )),
        other => Err(FormatError::InvalidValue {
            what: "frame flags",
            value: other.into(),
            reason: "unknown flag bits",
        }),
    }
}

/// Decode one complete frame from a byte slice (length word included),
/// refusing trailing bytes. For tests and fuzzing; transports read the
/// length word, check it, then read exactly that many bytes.
pub fn decode_frame(bytes: &[u8], lz4_allowed: bool) -> Result<(u16, Cow<'_, [u8]>), FormatError> {
    let mut r = Reader::new(bytes);
    let len = check_frame_len(r.array("frame length")?)?;
    let body = r.take(len, "frame body")?;
    r.finish("frame")?;
    decode_frame_body(body, lz4_allowed)
}

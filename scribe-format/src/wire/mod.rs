//! The client-server protocol (`docs/wire-format.md` is the byte-level
//! reference).
//!
//! A connection opens with the fixed 32-byte [`handshake`], then carries
//! length-prefixed [`frame`]s: one request, one reply, in order. Messages are
//! in [`message`]; their field codec is [`codec`]. Client and server share
//! this one implementation. [`connection`] is the seam every transport
//! implements: TCP/TLS in `scribe-client`, in-process in `scribe-server`.

pub mod codec;
pub mod connection;
pub mod frame;
pub mod handshake;
pub mod message;

pub use codec::{Bytes, Text, Wire};
pub use connection::{Connection, ConnectionKind, TransportError};
pub use frame::{decode_frame, encode_frame, MAX_FRAME_BYTES};
pub use handshake::{Answer, HandshakeStatus, Hello};
pub use message::{ErrorReply, Request, Response};

use crate::error::FormatError;
use crate::ObjectId;

/// Encode a request as a complete frame.
pub fn request_frame(request: &Request, lz4: bool) -> Vec<u8> {
    encode_frame(request.opcode(), &request.encode_payload(), lz4)
}

/// Encode a reply as a complete frame.
pub fn response_frame(response: &Response, lz4: bool) -> Vec<u8> {
    encode_frame(response.opcode(), &response.encode_payload(), lz4)
}

/// The frame of an `ObjectPut` request (`ObjectPutStaged` when `staged`)
/// carrying `data_len` bytes of data, up to the data: `head ‖ data` is
/// byte for byte `request_frame(&request, false)` (the data is the last
/// field). Lets a sender write an object's bytes from its own buffer
/// rather than copy them into a frame. `put.data` is not used. Only for
/// connections without LZ4 frames.
pub fn object_put_frame_head(put: &message::ObjectPut, staged: bool, data_len: usize) -> Vec<u8> {
    let empty = message::ObjectPut {
        repo: put.repo.clone(),
        operation: put.operation,
        workspace: put.workspace,
        id: put.id,
        total_len: put.total_len,
        offset: put.offset,
        data: Bytes(Vec::new()),
    };
    let request = if staged {
        Request::ObjectPutStaged(empty)
    } else {
        Request::ObjectPut(empty)
    };
    let mut payload = request.encode_payload();
    // The empty data field is its u32 length, last.
    let n = payload.len();
    payload[n - 4..].copy_from_slice(&(data_len as u32).to_le_bytes());
    let mut out = Vec::with_capacity(4 + frame::FRAME_HEADER_LEN + n);
    out.extend_from_slice(&((frame::FRAME_HEADER_LEN + n + data_len) as u32).to_le_bytes());
    out.extend_from_slice(&request.opcode().to_le_bytes());
    out.push(0);
    out.extend_from_slice(&payload);
    out
}

/// The frame of an uncompressed `ObjectPutMany` request as parts to write
/// one after the other, like [`object_get_many_frame_parts`] (`Data(n)` is
/// `put.objects[n]`'s data, written from its own buffer): byte for byte
/// `request_frame(&Request::ObjectPutMany(put.clone()), false)`. Lets a
/// sender write thousands of small files without copying their bytes into
/// a payload and again into a frame. The caller keeps the request within
/// [`MAX_FRAME_BYTES`]. Only for connections without LZ4 frames.
pub fn object_put_many_frame_parts(
    put: &message::ObjectPutMany,
    inline_below: usize,
) -> Vec<FramePart> {
    let empty = message::ObjectPutMany {
        repo: put.repo.clone(),
        operation: put.operation,
        workspace: put.workspace,
        objects: Vec::new(),
    };
    let fields = Request::ObjectPutMany(empty).encode_payload();
    // The empty list is its u32 count, last: the pieces follow the rest.
    let fields = &fields[..fields.len() - 4];
    let pieces: Vec<(ObjectId, &[u8])> = put
        .objects
        .iter()
        .map(|o| (o.id, o.data.0.as_slice()))
        .collect();
    pieces_frame_parts(OP_OBJECT_PUT_MANY, fields, &pieces, inline_below)
}

/// Opcode of `ObjectPut`.
pub const OP_OBJECT_PUT: u16 = 0x0031;
/// Opcode of `ObjectPutMany`.
pub const OP_OBJECT_PUT_MANY: u16 = 0x0033;
/// Opcode of `ObjectPutStaged`.
pub const OP_OBJECT_PUT_STAGED: u16 = 0x0036;

/// The head of an uncompressed `ObjectPut` / `ObjectPutStaged` frame,
/// for a receiver that reads the data into its own buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectPutHead {
    pub staged: bool,
    /// Every field but the data (empty here).
    pub put: message::ObjectPut,
    /// Where the data starts in the frame body; it runs to the body's end.
    pub data_offset: usize,
}

/// Parse the head of an object put from `prefix`, the first bytes of a
/// frame body (after the length word) that is `body_len` bytes long. `None`
/// for any other request, a compressed frame, a head longer than `prefix`,
/// or anything [`decode_request`] would refuse (a malformed head, or data
/// that does not end exactly at the body's end): the caller then reads
/// the whole body and decodes it, which gives the named error. When this
/// returns a head, `decode_request` of the whole body would return the
/// same request with the data that follows the head.
pub fn object_put_head(prefix: &[u8], body_len: usize) -> Option<ObjectPutHead> {
    use crate::bytes::Reader;
    let mut r = Reader::new(prefix);
    let staged = match r.u16("frame opcode").ok()? {
        OP_OBJECT_PUT => false,
        OP_OBJECT_PUT_STAGED => true,
        _ => return None,
    };
    if r.u8("frame flags").ok()? != 0 {
        return None;
    }
    let repo = String::get(&mut r).ok()?;
    let operation = Wire::get(&mut r).ok()?;
    let workspace = Wire::get(&mut r).ok()?;
    let id = Wire::get(&mut r).ok()?;
    let total_len = u64::get(&mut r).ok()?;
    let offset = u64::get(&mut r).ok()?;
    let data_len = r.u32("bytes32").ok()? as usize;
    let data_offset = r.position();
    if data_offset.checked_add(data_len)? != body_len {
        return None;
    }
    Some(ObjectPutHead {
        staged,
        put: message::ObjectPut {
            repo,
            operation,
            workspace,
            id,
            total_len,
            offset,
            data: Bytes(Vec::new()),
        },
        data_offset,
    })
}

impl ObjectPutHead {
    /// The request, with `data` as its data.
    pub fn into_request(self, data: Vec<u8>) -> Request {
        let put = message::ObjectPut {
            data: Bytes(data),
            ..self.put
        };
        if self.staged {
            Request::ObjectPutStaged(put)
        } else {
            Request::ObjectPut(put)
        }
    }
}

/// An uncompressed `ObjectPutMany` request decoded in place
/// ([`object_put_many_view`]): `put` holds every field but the objects
/// (its `objects` is empty), and each piece's data is a range of the frame
/// body it was decoded from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectPutManyView<'a> {
    pub put: message::ObjectPutMany,
    pub pieces: Vec<(ObjectId, &'a [u8])>,
}

impl ObjectPutManyView<'_> {
    /// The request itself, every object's data copied: what
    /// [`decode_request`] gives for the same body.
    pub fn to_request(&self) -> Request {
        Request::ObjectPutMany(message::ObjectPutMany {
            objects: self
                .pieces
                .iter()
                .map(|(id, data)| message::ObjectPiece {
                    id: *id,
                    data: Bytes(data.to_vec()),
                })
                .collect(),
            ..self.put.clone()
        })
    }
}

/// Decode an `ObjectPutMany` request from `body`, a frame body (after the
/// length word), without copying any object's data out of it: a receiver
/// that reads frames into one reused buffer then stores thousands of small
/// files without a copy and a fresh allocation each. `None` for any other
/// request or a compressed frame (decode those with [`decode_request`]).
/// Otherwise exactly what `decode_request(body, _)` gives: the same
/// request ([`ObjectPutManyView::to_request`]), or the same refusal.
pub fn object_put_many_view(body: &[u8]) -> Option<Result<ObjectPutManyView<'_>, FormatError>> {
    use crate::bytes::Reader;
    if body.len() < frame::FRAME_HEADER_LEN
        || u16::from_le_bytes([body[0], body[1]]) != OP_OBJECT_PUT_MANY
        || body[2] != 0
    {
        return None;
    }
    Some((|| {
        let mut r = Reader::new(&body[frame::FRAME_HEADER_LEN..]);
        let repo = String::get(&mut r)?;
        let operation = Wire::get(&mut r)?;
        let workspace = Wire::get(&mut r)?;
        // As `Vec<ObjectPiece>::get`: the count bounded by the bytes left.
        let count = r.u32("list count")? as usize;
        let least = count.saturating_mul(<message::ObjectPiece as Wire>::MIN_LEN.max(1));
        if least > r.remaining() {
            return Err(FormatError::Truncated {
                what: "list",
                needed: least as u64,
                available: r.remaining() as u64,
            });
        }
        let mut pieces = Vec::with_capacity(count);
        for _ in 0..count {
            let id = ObjectId::get(&mut r)?;
            let len = r.u32("bytes32")? as usize;
            pieces.push((id, r.take(len, "bytes32")?));
        }
        r.finish("request")?;
        Ok(ObjectPutManyView {
            put: message::ObjectPutMany {
                repo,
                operation,
                workspace,
                objects: Vec::new(),
            },
            pieces,
        })
    })())
}

/// Opcode of the `ObjectData` reply (to `ObjectGet`).
const OP_OBJECT_DATA: u16 = 0x0032 | frame::REPLY_BIT;

/// The frame of an `ObjectData` reply carrying `data_len` bytes of data,
/// up to the data: `head ‖ data` is byte for byte
/// `response_frame(&Response::ObjectData(reply), false)`. `reply.data` is
/// not used. Only for connections without LZ4 frames.
pub fn object_data_frame_head(reply: &message::ObjectData, data_len: usize) -> Vec<u8> {
    let payload_len = 8 + 8 + 4;
    let mut out = Vec::with_capacity(4 + frame::FRAME_HEADER_LEN + payload_len);
    out.extend_from_slice(
        &((frame::FRAME_HEADER_LEN + payload_len + data_len) as u32).to_le_bytes(),
    );
    out.extend_from_slice(&OP_OBJECT_DATA.to_le_bytes());
    out.push(0);
    out.extend_from_slice(&reply.total_len.to_le_bytes());
    out.extend_from_slice(&reply.offset.to_le_bytes());
    out.extend_from_slice(&(data_len as u32).to_le_bytes());
    out
}

/// Opcode of the `ObjectGetMany` reply.
const OP_OBJECT_GET_MANY: u16 = 0x0034 | frame::REPLY_BIT;

/// One part of a frame written from parts ([`object_get_many_frame_parts`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FramePart {
    /// Bytes of the frame itself (length word, header, fields, and the
    /// data of pieces too small to be worth a write of their own).
    Head(Vec<u8>),
    /// The data of piece `n`, written from the sender's own buffer.
    Data(usize),
}

/// The frame of an uncompressed `ObjectGetMany` reply holding `pieces`
/// (id, data) in order, as parts to write one after the other: `Head`s as
/// they are, each `Data(n)` as piece `n`'s data. Written out, they are
/// byte for byte `response_frame(&Response::ObjectGetMany(reply), false)`.
/// Data shorter than `inline_below` bytes is copied into the heads (one
/// write of many tiny objects instead of a write each). The caller keeps
/// the reply within [`MAX_FRAME_BYTES`]. Only for connections without
/// LZ4 frames.
pub fn object_get_many_frame_parts(
    pieces: &[(ObjectId, &[u8])],
    inline_below: usize,
) -> Vec<FramePart> {
    pieces_frame_parts(OP_OBJECT_GET_MANY, &[], pieces, inline_below)
}

/// A frame of `opcode` whose payload is `fields` then a list of pieces
/// (id, data), as parts (see [`object_get_many_frame_parts`]).
fn pieces_frame_parts(
    opcode: u16,
    fields: &[u8],
    pieces: &[(ObjectId, &[u8])],
    inline_below: usize,
) -> Vec<FramePart> {
    let body_len = frame::FRAME_HEADER_LEN
        + fields.len()
        + 4
        + pieces
            .iter()
            .map(|(_, d)| ObjectId::LEN + 4 + d.len())
            .sum::<usize>();
    let mut parts = Vec::new();
    let mut head = Vec::with_capacity(64 + fields.len());
    head.extend_from_slice(&(body_len as u32).to_le_bytes());
    head.extend_from_slice(&opcode.to_le_bytes());
    head.push(0);
    head.extend_from_slice(fields);
    head.extend_from_slice(&(pieces.len() as u32).to_le_bytes());
    for (n, (id, data)) in pieces.iter().enumerate() {
        head.extend_from_slice(&id.to_bytes());
        head.extend_from_slice(&(data.len() as u32).to_le_bytes());
        if data.len() < inline_below {
            head.extend_from_slice(data);
        } else {
            parts.push(FramePart::Head(std::mem::take(&mut head)));
            parts.push(FramePart::Data(n));
        }
    }
    if !head.is_empty() {
        parts.push(FramePart::Head(head));
    }
    parts
}

/// Why [`read_object_get_many`] failed: the stream, or the bytes.
#[derive(Debug)]
pub enum StreamedReplyError {
    Io(std::io::Error),
    Format(FormatError),
}

/// Bytes of one [`message::ObjectPiece`] before its data: the id and the
/// data's length.
const PIECE_HEAD_LEN: usize = ObjectId::LEN + 4;

/// When `prefix`, the first bytes of a frame body (after the length word)
/// of `body_len` bytes, opens an uncompressed `ObjectGetMany` reply: the
/// reply, its other `body_len - prefix.len()` bytes read from `rest`, each
/// object's data straight into a buffer of its own (not into a frame
/// buffer first, then copied out). `None` for any other reply, a
/// compressed frame, or a `prefix` shorter than the frame header or
/// longer than the body: decode the whole body instead. Gives exactly
/// what [`decode_response`] of the whole body would, and refuses what it
/// refuses (a list longer than the body, an object running past it, a
/// bad id, trailing bytes).
pub fn read_object_get_many(
    prefix: &[u8],
    body_len: usize,
    rest: &mut dyn std::io::Read,
) -> Option<Result<message::ObjectGetManyReply, StreamedReplyError>> {
    use std::io::Read;
    if prefix.len() < frame::FRAME_HEADER_LEN || prefix.len() > body_len {
        return None;
    }
    if u16::from_le_bytes([prefix[0], prefix[1]]) != OP_OBJECT_GET_MANY || prefix[2] != 0 {
        return None;
    }
    let mut src =
        (&prefix[frame::FRAME_HEADER_LEN..]).chain(rest.take((body_len - prefix.len()) as u64));
    let mut left = body_len - frame::FRAME_HEADER_LEN;
    let io = StreamedReplyError::Io;
    let format = StreamedReplyError::Format;
    // The next `n` bytes (at most a piece's head), counted off `left`.
    fn fixed(
        src: &mut dyn std::io::Read,
        n: usize,
        what: &'static str,
        left: &mut usize,
    ) -> Result<[u8; PIECE_HEAD_LEN], StreamedReplyError> {
        if *left < n {
            return Err(StreamedReplyError::Format(FormatError::Truncated {
                what,
                needed: n as u64,
                available: *left as u64,
            }));
        }
        let mut b = [0u8; PIECE_HEAD_LEN];
        src.read_exact(&mut b[..n])
            .map_err(StreamedReplyError::Io)?;
        *left -= n;
        Ok(b)
    }
    Some((|| {
        let c = fixed(&mut src, 4, "list count", &mut left)?;
        let count = u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as usize;
        if count.saturating_mul(PIECE_HEAD_LEN) > left {
            return Err(format(FormatError::Truncated {
                what: "list",
                needed: count.saturating_mul(PIECE_HEAD_LEN) as u64,
                available: left as u64,
            }));
        }
        let mut objects = Vec::with_capacity(count);
        for _ in 0..count {
            let h = fixed(&mut src, PIECE_HEAD_LEN, "object id", &mut left)?;
            let id = ObjectId::from_bytes(&h[..ObjectId::LEN]).map_err(format)?;
            let l = &h[ObjectId::LEN..];
            let len = u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize;
            if len > left {
                return Err(format(FormatError::Truncated {
                    what: "bytes32",
                    needed: len as u64,
                    available: left as u64,
                }));
            }
            let mut data = Vec::new();
            data.try_reserve_exact(len).map_err(|_| {
                io(std::io::Error::other(format!(
                    "cannot buffer an object of {len} bytes"
                )))
            })?;
            (&mut src)
                .take(len as u64)
                .read_to_end(&mut data)
                .map_err(io)?;
            if data.len() != len {
                return Err(io(std::io::ErrorKind::UnexpectedEof.into()));
            }
            left -= len;
            objects.push(message::ObjectPiece {
                id,
                data: Bytes(data),
            });
        }
        if left > 0 {
            return Err(format(FormatError::TrailingBytes {
                what: "reply",
                count: left as u64,
            }));
        }
        Ok(message::ObjectGetManyReply { objects })
    })())
}

/// Bytes of an uncompressed `ObjectData` reply's frame body before its
/// data.
pub const OBJECT_DATA_HEAD_LEN: usize = frame::FRAME_HEADER_LEN + 8 + 8 + 4;

/// Parse the head of an `ObjectData` reply from `prefix`, the first bytes
/// (at least [`OBJECT_DATA_HEAD_LEN`]) of a frame body of `body_len` bytes:
/// the reply with empty data, its data running from
/// [`OBJECT_DATA_HEAD_LEN`] to the body's end. `None` for any other reply,
/// a compressed frame, or data that would not end exactly at the body's
/// end (decode the whole body instead, which names the error).
pub fn object_data_head(prefix: &[u8], body_len: usize) -> Option<message::ObjectData> {
    use crate::bytes::Reader;
    let mut r = Reader::new(prefix);
    if r.u16("frame opcode").ok()? != OP_OBJECT_DATA || r.u8("frame flags").ok()? != 0 {
        return None;
    }
    let total_len = r.u64("total_len").ok()?;
    let offset = r.u64("offset").ok()?;
    let data_len = r.u32("bytes32").ok()? as usize;
    if OBJECT_DATA_HEAD_LEN.checked_add(data_len)? != body_len {
        return None;
    }
    Some(message::ObjectData {
        total_len,
        offset,
        data: Bytes(Vec::new()),
    })
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

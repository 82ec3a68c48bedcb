//! The fixed-width, schema-neutral handshake that opens every connection,
//! and the optional credential frame that follows it.
//!
//! ```text
//! client hello, 32 bytes               server answer, 32 bytes
//! 0  8  magic "SCRBWIRE"               0  8  magic "SCRBWIRE"
//! 8  2  handshake version = 1          8  2  handshake version = 1
//! 10 2  flags (bit 0: LZ4 frames,      10 2  status (0 accepted, 1 handshake
//!       bit 1: a credential frame            version, 2 schema, 3 malformed)
//!       follows the answer)            12 2  flags granted (bit 0: LZ4 frames,
//! 12 4  reserved = 0                         bit 1: send the credential frame)
//! 16 16 operation schema, ASCII,       14 2  reserved = 0
//!       NUL padded ("scribe.rpc.v1")   16 16 the schema the server speaks
//! ```
//!
//! The handshake layout never changes when the operation schema does: a
//! server that does not speak the client's schema still answers with its own
//! and a status the client can print, then closes.
//!
//! # The credential slot
//!
//! A client that has a credential sets [`FLAG_CREDENTIAL`] in its hello. A
//! server that grants the bit in its (accepted) answer reads exactly one
//! credential frame before any request, and answers it with one frame:
//!
//! ```text
//! credential frame (client → server)     acknowledgement (server → client)
//! u32 L = 3 + 4 + n  (8 ≤ L ≤ 65,543)    u32 L
//! u16 0x0002 OP_CREDENTIAL               u16 0x8002 OP_AUTHENTICATED
//! u8  0  (never compressed)              u8  frame flags (as any reply)
//! u32 n  (1 ≤ n ≤ 65,536)                u8  principal kind (PrincipalKind)
//! n   credential bytes, opaque here      Option<[16]> principal id
//!                                        str16 principal display name
//! ```
//!
//! or an error frame (`0xffff`, [`crate::wire::ErrorReply`]: `forbidden`,
//! `auth_unavailable`, `malformed`, `limit_exceeded`, `busy`) after which
//! the server closes. The credential bytes are the authorizer's business
//! (the auth service defines them); this layer bounds and frames them. A
//! client that does not set the flag sends and receives exactly the bytes
//! it did before the slot existed. `0x0002` is never a request opcode: the
//! same frame sent after the handshake is an unknown request (`malformed`).

use super::codec::{from_bytes, wire_struct, Wire};
use super::frame::{self, ERROR_OPCODE, FRAME_HEADER_LEN, REPLY_BIT};
use super::message::ErrorReply;
use crate::bytes::{Put, Reader};
use crate::error::FormatError;

/// Handshake magic.
pub const MAGIC: [u8; 8] = *b"SCRBWIRE";
/// The handshake layout version.
pub const HANDSHAKE_VERSION: u16 = 1;
/// The operation schema of this build.
pub const SCHEMA: &str = "scribe.rpc.v1";
/// Length of the hello and of the answer.
pub const HANDSHAKE_LEN: usize = 32;
/// Flag: the peer wants (hello) or grants (answer) LZ4-compressed frames.
pub const FLAG_LZ4: u16 = 1;
/// Flag: the client will send one credential frame right after the answer
/// (hello); the server will read it and acknowledge it (answer).
pub const FLAG_CREDENTIAL: u16 = 2;
/// Every flag bit this build knows; any other bit is refused.
pub const KNOWN_FLAGS: u16 = FLAG_LZ4 | FLAG_CREDENTIAL;
/// Opcode of the credential frame. Never a request opcode.
pub const OP_CREDENTIAL: u16 = 0x0002;
/// Opcode of the server's acknowledgement of a credential frame.
pub const OP_AUTHENTICATED: u16 = OP_CREDENTIAL | REPLY_BIT;
/// Largest credential a credential frame carries.
pub const MAX_CREDENTIAL_BYTES: usize = 64 << 10;
/// Largest credential frame body (after the length word).
pub const MAX_CREDENTIAL_FRAME_BYTES: u32 = (FRAME_HEADER_LEN + 4 + MAX_CREDENTIAL_BYTES) as u32;
/// Smallest credential frame body: header, length, one byte.
const MIN_CREDENTIAL_FRAME_BYTES: u32 = (FRAME_HEADER_LEN + 4 + 1) as u32;

/// The client's opening 32 bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    pub version: u16,
    pub flags: u16,
    pub schema: String,
}

/// Why a server refused a hello.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandshakeStatus {
    Accepted = 0,
    UnsupportedHandshake = 1,
    UnsupportedSchema = 2,
    Malformed = 3,
}

impl HandshakeStatus {
    pub fn from_u16(v: u16) -> Option<Self> {
        Some(match v {
            0 => HandshakeStatus::Accepted,
            1 => HandshakeStatus::UnsupportedHandshake,
            2 => HandshakeStatus::UnsupportedSchema,
            3 => HandshakeStatus::Malformed,
            _ => return None,
        })
    }

    pub fn describe(self) -> &'static str {
        match self {
            HandshakeStatus::Accepted => "accepted",
            HandshakeStatus::UnsupportedHandshake => {
                "the server does not speak this handshake version"
            }
            HandshakeStatus::UnsupportedSchema => "the server speaks another operation schema",
            HandshakeStatus::Malformed => "the server could not read the hello",
        }
    }
}

/// The server's 32-byte answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub version: u16,
    pub status: HandshakeStatus,
    pub flags: u16,
    pub schema: String,
}

fn put_schema(out: &mut Vec<u8>, schema: &str) {
    let mut field = [0u8; 16];
    let n = schema.len().min(16);
    field[..n].copy_from_slice(&schema.as_bytes()[..n]);
    out.put_bytes(&field);
}

fn get_schema(r: &mut Reader<'_>) -> Result<String, FormatError> {
    let field: [u8; 16] = r.array("handshake schema")?;
    let end = field.iter().position(|&b| b == 0).unwrap_or(16);
    if field[end..].iter().any(|&b| b != 0) {
        return Err(FormatError::invalid(
            "handshake schema",
            "bytes after the NUL padding",
        ));
    }
    let text = &field[..end];
    if text.is_empty() || !text.iter().all(|b| b.is_ascii_graphic()) {
        return Err(FormatError::invalid(
            "handshake schema",
            "must be printable ASCII",
        ));
    }
    Ok(String::from_utf8_lossy(text).into_owned())
}

impl Hello {
    /// This build's hello.
    pub fn new(lz4: bool) -> Self {
        Hello {
            version: HANDSHAKE_VERSION,
            flags: if lz4 { FLAG_LZ4 } else { 0 },
            schema: SCHEMA.to_string(),
        }
    }

    /// The same hello announcing a credential frame ([`FLAG_CREDENTIAL`]).
    pub fn with_credential(mut self) -> Self {
        self.flags |= FLAG_CREDENTIAL;
        self
    }

    pub fn encode(&self) -> [u8; HANDSHAKE_LEN] {
        let mut out = Vec::with_capacity(HANDSHAKE_LEN);
        out.put_bytes(&MAGIC);
        out.put_u16(self.version);
        out.put_u16(self.flags);
        out.put_u32(0);
        put_schema(&mut out, &self.schema);
        out.try_into()
            .expect("the hello is 32 bytes by construction")
    }

    /// Parse a hello. A wrong magic or reserved bits is `Malformed`; the
    /// version and schema are returned for the server to judge.
    pub fn decode(bytes: &[u8; HANDSHAKE_LEN]) -> Result<Self, FormatError> {
        let mut r = Reader::new(bytes);
        if r.array::<8>("handshake magic")? != MAGIC {
            return Err(FormatError::BadMagic { what: "handshake" });
        }
        let version = r.u16("handshake version")?;
        let flags = r.u16("handshake flags")?;
        let reserved = r.u32("handshake reserved")?;
        if reserved != 0 || flags & !KNOWN_FLAGS != 0 {
            return Err(FormatError::invalid("handshake", "reserved bits are set"));
        }
        let schema = get_schema(&mut r)?;
        Ok(Hello {
            version,
            flags,
            schema,
        })
    }

    /// The server's judgement of this hello.
    pub fn answer(&self) -> Answer {
        let status = if self.version != HANDSHAKE_VERSION {
            HandshakeStatus::UnsupportedHandshake
        } else if self.schema != SCHEMA {
            HandshakeStatus::UnsupportedSchema
        } else {
            HandshakeStatus::Accepted
        };
        Answer {
            version: HANDSHAKE_VERSION,
            status,
            flags: if status == HandshakeStatus::Accepted {
                self.flags & KNOWN_FLAGS
            } else {
                0
            },
            schema: SCHEMA.to_string(),
        }
    }
}

impl Answer {
    /// The answer to bytes that are not a hello at all.
    pub fn malformed() -> Self {
        Answer {
            version: HANDSHAKE_VERSION,
            status: HandshakeStatus::Malformed,
            flags: 0,
            schema: SCHEMA.to_string(),
        }
    }

    pub fn encode(&self) -> [u8; HANDSHAKE_LEN] {
        let mut out = Vec::with_capacity(HANDSHAKE_LEN);
        out.put_bytes(&MAGIC);
        out.put_u16(self.version);
        out.put_u16(self.status as u16);
        out.put_u16(self.flags);
        out.put_u16(0);
        put_schema(&mut out, &self.schema);
        out.try_into()
            .expect("the answer is 32 bytes by construction")
    }

    pub fn decode(bytes: &[u8; HANDSHAKE_LEN]) -> Result<Self, FormatError> {
        let mut r = Reader::new(bytes);
        if r.array::<8>("handshake magic")? != MAGIC {
            return Err(FormatError::BadMagic {
                what: "handshake answer",
            });
        }
        let version = r.u16("handshake version")?;
        let status_raw = r.u16("handshake status")?;
        let status = HandshakeStatus::from_u16(status_raw).ok_or(FormatError::InvalidValue {
            what: "handshake status",
            value: status_raw.into(),
            reason: "unknown status",
        })?;
        let flags = r.u16("handshake flags")?;
        let reserved = r.u16("handshake reserved")?;
        if reserved != 0 || flags & !KNOWN_FLAGS != 0 {
            return Err(FormatError::invalid(
                "handshake answer",
                "reserved bits are set",
            ));
        }
        let schema = get_schema(&mut r)?;
        Ok(Answer {
            version,
            status,
            flags,
            schema,
        })
    }
}

/// Who the server authenticated a connection as (the kinds of the auth
/// service's principals, plus the two a server names without one). The
/// numbers travel in [`Authenticated`]. Deliberately exhaustive: an
/// authorizer that matches on it must decide about every kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PrincipalKind {
    /// Nobody in particular: no credential, or a server that checks none.
    Anonymous = 0,
    /// The operating-system user of an in-process (path URL) connection.
    Local = 1,
    /// A person or service account of the auth service.
    User = 2,
    /// Another Scribe server.
    Server = 3,
    /// An automation credential acting for a user.
    Automation = 4,
}

impl PrincipalKind {
    /// Every kind, in number order.
    pub const ALL: [PrincipalKind; 5] = [
        PrincipalKind::Anonymous,
        PrincipalKind::Local,
        PrincipalKind::User,
        PrincipalKind::Server,
        PrincipalKind::Automation,
    ];

    pub fn number(self) -> u8 {
        self as u8
    }

    pub fn from_number(n: u8) -> Option<Self> {
        PrincipalKind::ALL.get(usize::from(n)).copied()
    }

    /// The lowercase name (`anonymous`, `local`, `user`, `server`, `automation`).
    pub fn name(self) -> &'static str {
        match self {
            PrincipalKind::Anonymous => "anonymous",
            PrincipalKind::Local => "local",
            PrincipalKind::User => "user",
            PrincipalKind::Server => "server",
            PrincipalKind::Automation => "automation",
        }
    }
}

impl Wire for PrincipalKind {
    const MIN_LEN: usize = 1;
    fn put(&self, out: &mut Vec<u8>) {
        out.put_u8(self.number())
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, FormatError> {
        let n = r.u8("principal kind")?;
        PrincipalKind::from_number(n).ok_or(FormatError::InvalidValue {
            what: "principal kind",
            value: n.into(),
            reason: "unknown principal kind",
        })
    }
}

wire_struct! {
    /// The server's acknowledgement of a credential frame: who the
    /// connection is served as from now on.
    pub struct Authenticated {
        pub kind: PrincipalKind,
        /// The auth service's 128-bit id of the principal, when it has one.
        pub id: Option<[u8; 16]>,
        pub name: String,
    }
}

/// The complete credential frame (length word included) carrying
/// `credential`: 1 to [`MAX_CREDENTIAL_BYTES`] bytes.
pub fn credential_frame(credential: &[u8]) -> Result<Vec<u8>, FormatError> {
    check_credential_len(credential.len())?;
    let mut payload = Vec::with_capacity(4 + credential.len());
    payload.put_bytes32(credential);
    Ok(frame::encode_frame(OP_CREDENTIAL, &payload, false))
}

fn check_credential_len(n: usize) -> Result<(), FormatError> {
    if n == 0 {
        return Err(FormatError::invalid(
            "credential",
            "empty (a client without a credential does not set the flag)",
        ));
    }
    if n > MAX_CREDENTIAL_BYTES {
        return Err(FormatError::LimitExceeded {
            what: "credential",
            limit: MAX_CREDENTIAL_BYTES as u64,
            actual: n as u64,
        });
    }
    Ok(())
}

/// Check a credential frame's length word before reading its body:
/// above [`MAX_CREDENTIAL_FRAME_BYTES`] is `LimitExceeded`, too short to
/// hold one byte of credential is `Truncated`.
pub fn check_credential_frame_len(len_word: [u8; 4]) -> Result<usize, FormatError> {
    let len = u32::from_le_bytes(len_word);
    if len > MAX_CREDENTIAL_FRAME_BYTES {
        return Err(FormatError::LimitExceeded {
            what: "credential frame length",
            limit: MAX_CREDENTIAL_FRAME_BYTES.into(),
            actual: len.into(),
        });
    }
    if len < MIN_CREDENTIAL_FRAME_BYTES {
        return Err(FormatError::Truncated {
            what: "credential frame",
            needed: MIN_CREDENTIAL_FRAME_BYTES.into(),
            available: len.into(),
        });
    }
    Ok(len as usize)
}

/// The credential of a credential frame body (after the length word):
/// opcode [`OP_CREDENTIAL`], flags 0, one `bytes32` of 1 to
/// [`MAX_CREDENTIAL_BYTES`] bytes filling the rest exactly.
pub fn decode_credential_frame(body: &[u8]) -> Result<Vec<u8>, FormatError> {
    let mut r = Reader::new(body);
    let opcode = r.u16("credential frame opcode")?;
    if opcode != OP_CREDENTIAL {
        return Err(FormatError::InvalidValue {
            what: "credential frame opcode",
            value: opcode.into(),
            reason: "the frame after a granted credential flag must be the credential",
        });
    }
    let flags = r.u8("credential frame flags")?;
    if flags != 0 {
        return Err(FormatError::InvalidValue {
            what: "credential frame flags",
            value: flags.into(),
            reason: "the credential frame is never compressed",
        });
    }
    let credential = r.bytes32("credential", MAX_CREDENTIAL_BYTES)?;
    check_credential_len(credential.len())?;
    let credential = credential.to_vec();
    r.finish("credential frame")?;
    Ok(credential)
}

/// The complete acknowledgement frame (length word included).
pub fn authenticated_frame(ack: &Authenticated, lz4: bool) -> Vec<u8> {
    let mut payload = Vec::new();
    ack.put(&mut payload);
    frame::encode_frame(OP_AUTHENTICATED, &payload, lz4)
}

/// Decode the server's answer to a credential frame from a frame body
/// (after the length word): the acknowledgement, or the error reply that
/// precedes the close. `lz4` is what the handshake granted.
pub fn decode_credential_reply(
    body: &[u8],
    lz4: bool,
) -> Result<Result<Authenticated, ErrorReply>, FormatError> {
    let (opcode, payload) = frame::decode_frame_body(body, lz4)?;
    match opcode {
        OP_AUTHENTICATED => Ok(Ok(from_bytes(&payload, "credential acknowledgement")?)),
        ERROR_OPCODE => Ok(Err(from_bytes(&payload, "error reply")?)),
        other => Err(FormatError::InvalidValue {
            what: "credential reply opcode",
            value: other.into(),
            reason: "neither the acknowledgement nor an error",
        }),
    }
}

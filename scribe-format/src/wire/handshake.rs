//! The fixed-width, schema-neutral handshake that opens every connection.
//!
//! ```text
//! client hello, 32 bytes               server answer, 32 bytes
//! 0  8  magic "SCRBWIRE"               0  8  magic "SCRBWIRE"
//! 8  2  handshake version = 1          8  2  handshake version = 1
//! 10 2  flags (bit 0: LZ4 frames)      10 2  status (0 accepted, 1 handshake
//! 12 4  reserved = 0                         version, 2 schema, 3 malformed)
//! 16 16 operation schema, ASCII,       12 2  flags granted (bit 0: LZ4 frames)
//!       NUL padded ("scribe.rpc.v1")   14 2  reserved = 0
//!                                      16 16 the schema the server speaks
//! ```
//!
//! The handshake layout never changes when the operation schema does: a
//! server that does not speak the client's schema still answers with its own
//! and a status the client can print, then closes.

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
        if reserved != 0 || flags & !FLAG_LZ4 != 0 {
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
                self.flags & FLAG_LZ4
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
        if reserved != 0 || flags & !FLAG_LZ4 != 0 {
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

//! SAU2: the result encoding of the auth protocol (`docs/wire-format.md`,
//! "Auth protocol (SAU2)"), also the row encoding of `auth.redb`
//! (specification section 7.3).
//!
//! ```text
//! result   = u16 0 ‖ u16 rows ‖ rows × row          success
//!          | u16 code (≠ 0) ‖ str16 message          refusal
//! row      = u16 n ‖ n × str16                       one row of n strings
//! ```
//!
//! All integers are little-endian. A stored row of `auth.redb` is a success
//! result with exactly one row. `code` is an [`ErrorCode`] number; a decoder
//! keeps any non-zero number (a newer peer may send a code this build does
//! not know) and [`Sau2Result::error_code`] names it when it is registered.
//!
//! Bounds (checked by the decoder before allocating, refused by the
//! encoder): at most [`MAX_FIELDS`] strings per row, each at most
//! [`MAX_FIELD_BYTES`] bytes (the `str16` bound), at most [`MAX_ROWS`] rows,
//! a message of at most [`MAX_MESSAGE_BYTES`] bytes, and at most
//! [`MAX_RESULT_BYTES`] bytes in all.

use crate::bytes::{Put, Reader};
use crate::error::{ErrorCode, FormatError};

/// Most strings in one row.
pub const MAX_FIELDS: usize = 64;
/// Longest string (the `str16` bound).
pub const MAX_FIELD_BYTES: usize = u16::MAX as usize;
/// Most rows in one result.
pub const MAX_ROWS: usize = u16::MAX as usize;
/// Longest refusal message.
pub const MAX_MESSAGE_BYTES: usize = 4096;
/// Largest encoded result: 4 MiB.
pub const MAX_RESULT_BYTES: usize = 4 * 1024 * 1024;

/// One decoded SAU2 result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sau2Result {
    /// `u16 0 ‖ u16 rows ‖ rows × row`.
    Rows(Vec<Vec<String>>),
    /// `u16 code ‖ str16 message`; `code` is never 0.
    Error { code: u16, message: String },
}

impl Sau2Result {
    /// A refusal with a registered code.
    pub fn error(code: ErrorCode, message: impl Into<String>) -> Sau2Result {
        Sau2Result::Error {
            code: code.number(),
            message: message.into(),
        }
    }

    /// The registered code of a refusal (None for success or an unknown number).
    pub fn error_code(&self) -> Option<ErrorCode> {
        match self {
            Sau2Result::Rows(_) => None,
            Sau2Result::Error { code, .. } => ErrorCode::from_number(*code),
        }
    }

    /// Encode, refusing values beyond the bounds.
    pub fn encode(&self) -> Result<Vec<u8>, FormatError> {
        let mut out = Vec::new();
        match self {
            Sau2Result::Rows(rows) => {
                if rows.len() > MAX_ROWS {
                    return Err(FormatError::LimitExceeded {
                        what: "sau2.rows",
                        limit: MAX_ROWS as u64,
                        actual: rows.len() as u64,
                    });
                }
                out.put_u16(0);
                out.put_u16(rows.len() as u16);
                for row in rows {
                    put_row(&mut out, row.iter().map(String::as_str))?;
                    check_total(out.len())?;
                }
            }
            Sau2Result::Error { code, message } => {
                if *code == 0 {
                    return Err(FormatError::InvalidValue {
                        what: "sau2.code",
                        value: 0,
                        reason: "a refusal code is never 0",
                    });
                }
                check_len("sau2.message", message.len(), MAX_MESSAGE_BYTES)?;
                out.put_u16(*code);
                out.put_bytes16(message.as_bytes());
            }
        }
        Ok(out)
    }

    /// Decode exactly one result (no trailing bytes).
    pub fn decode(bytes: &[u8]) -> Result<Sau2Result, FormatError> {
        check_total(bytes.len())?;
        let mut r = Reader::new(bytes);
        let code = r.u16("sau2.code")?;
        let out = if code == 0 {
            let count = usize::from(r.u16("sau2.rows")?);
            // Each row takes at least two bytes: never reserve more than the
            // input could hold.
            let mut rows = Vec::with_capacity(count.min(r.remaining() / 2));
            for _ in 0..count {
                rows.push(read_row(&mut r)?);
            }
            Sau2Result::Rows(rows)
        } else {
            let message = r.str16("sau2.message", MAX_MESSAGE_BYTES)?;
            Sau2Result::Error {
                code,
                message: message.to_owned(),
            }
        };
        r.finish("sau2.result")?;
        Ok(out)
    }
}

fn check_len(what: &'static str, len: usize, limit: usize) -> Result<(), FormatError> {
    if len > limit {
        return Err(FormatError::LimitExceeded {
            what,
            limit: limit as u64,
            actual: len as u64,
        });
    }
    Ok(())
}

fn check_total(len: usize) -> Result<(), FormatError> {
    check_len("sau2.result", len, MAX_RESULT_BYTES)
}

fn put_row<'a>(
    out: &mut Vec<u8>,
    fields: impl ExactSizeIterator<Item = &'a str>,
) -> Result<(), FormatError> {
    check_len("sau2.row fields", fields.len(), MAX_FIELDS)?;
    out.put_u16(fields.len() as u16);
    for field in fields {
        check_len("sau2.field", field.len(), MAX_FIELD_BYTES)?;
        out.put_bytes16(field.as_bytes());
    }
    Ok(())
}

fn read_row(r: &mut Reader<'_>) -> Result<Vec<String>, FormatError> {
    let n = usize::from(r.u16("sau2.row fields")?);
    check_len("sau2.row fields", n, MAX_FIELDS)?;
    let mut fields = Vec::with_capacity(n);
    for _ in 0..n {
        fields.push(r.str16("sau2.field", MAX_FIELD_BYTES)?.to_owned());
    }
    Ok(fields)
}

/// Encode one stored row: a success result with exactly one row.
pub fn encode_row<S: AsRef<str>>(fields: &[S]) -> Result<Vec<u8>, FormatError> {
    let mut out = Vec::new();
    out.put_u16(0);
    out.put_u16(1);
    put_row(&mut out, fields.iter().map(AsRef::as_ref))?;
    check_total(out.len())?;
    Ok(out)
}

/// Decode one stored row: a success result with exactly one row.
pub fn decode_row(bytes: &[u8]) -> Result<Vec<String>, FormatError> {
    match Sau2Result::decode(bytes)? {
        Sau2Result::Rows(mut rows) if rows.len() == 1 => Ok(rows.pop().unwrap_or_default()),
        Sau2Result::Rows(rows) => Err(FormatError::InvalidValue {
            what: "sau2.row count",
            value: rows.len() as u64,
            reason: "a stored row is a result of exactly one row",
        }),
        Sau2Result::Error { code, .. } => Err(FormatError::InvalidValue {
            what: "sau2.code",
            value: code.into(),
            reason: "a stored row is a success result",
        }),
    }
}

/// Decode one stored row of exactly `N` strings.
pub fn decode_row_exact<const N: usize>(
    bytes: &[u8],
    what: &'static str,
) -> Result<[String; N], FormatError> {
    let fields = decode_row(bytes)?;
    let count = fields.len();
    <[String; N]>::try_from(fields).map_err(|_| FormatError::Invalid {
        what,
        reason: format!("a row of {N} fields expected, found {count}"),
    })
}

/// Longest verb of a request.
pub const MAX_VERB_BYTES: usize = 64;
/// Most arguments of a request.
pub const MAX_ARGUMENTS: usize = 16;
/// Longest argument of a request.
pub const MAX_ARGUMENT_BYTES: usize = 16 * 1024;
/// Largest encoded request: 64 KiB.
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;

/// One SAU2 request: `[16] operation ‖ str16 verb ‖ u16 n ‖ n × str16 argument`.
///
/// The verb is 1 to [`MAX_VERB_BYTES`] bytes of `a-z`, `0-9` and `-`; at
/// most [`MAX_ARGUMENTS`] arguments of at most [`MAX_ARGUMENT_BYTES`] bytes
/// each; at most [`MAX_REQUEST_BYTES`] in all. Binary arguments (a public
/// key) travel as lowercase hex.
#[derive(Clone, PartialEq, Eq)]
pub struct Sau2Request {
    /// The operation id (replays of it return the recorded outcome).
    pub operation: [u8; 16],
    pub verb: String,
    pub arguments: Vec<String>,
}

impl std::fmt::Debug for Sau2Request {
    // Arguments may hold a password: never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sau2Request")
            .field("operation", &self.operation)
            .field("verb", &self.verb)
            .field("arguments", &self.arguments.len())
            .finish()
    }
}

fn check_verb(verb: &str) -> Result<(), FormatError> {
    if verb.is_empty()
        || verb.len() > MAX_VERB_BYTES
        || !verb
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(FormatError::invalid(
            "sau2.verb",
            "1 to 64 bytes of a-z, 0-9 and -",
        ));
    }
    Ok(())
}

impl Sau2Request {
    /// Encode, refusing values beyond the bounds.
    pub fn encode(&self) -> Result<Vec<u8>, FormatError> {
        check_verb(&self.verb)?;
        check_len("sau2.arguments", self.arguments.len(), MAX_ARGUMENTS)?;
        let mut out = Vec::new();
        out.extend_from_slice(&self.operation);
        out.put_bytes16(self.verb.as_bytes());
        out.put_u16(self.arguments.len() as u16);
        for a in &self.arguments {
            check_len("sau2.argument", a.len(), MAX_ARGUMENT_BYTES)?;
            out.put_bytes16(a.as_bytes());
        }
        check_len("sau2.request", out.len(), MAX_REQUEST_BYTES)?;
        Ok(out)
    }

    /// Decode exactly one request (no trailing bytes).
    pub fn decode(bytes: &[u8]) -> Result<Sau2Request, FormatError> {
        check_len("sau2.request", bytes.len(), MAX_REQUEST_BYTES)?;
        let mut r = Reader::new(bytes);
        let operation = r.array::<16>("sau2.operation")?;
        let verb = r.str16("sau2.verb", MAX_VERB_BYTES)?.to_owned();
        check_verb(&verb)?;
        let n = usize::from(r.u16("sau2.arguments")?);
        check_len("sau2.arguments", n, MAX_ARGUMENTS)?;
        let mut arguments = Vec::with_capacity(n);
        for _ in 0..n {
            arguments.push(r.str16("sau2.argument", MAX_ARGUMENT_BYTES)?.to_owned());
        }
        r.finish("sau2.request")?;
        Ok(Sau2Request {
            operation,
            verb,
            arguments,
        })
    }

    /// The bytes after the operation id: what the intent digest covers.
    pub fn body(encoded: &[u8]) -> &[u8] {
        encoded.get(16..).unwrap_or_default()
    }
}

/// The stream framing of SAU2 over TLS: `u32 LE length ‖ message`; a request
/// frame is at most [`MAX_REQUEST_BYTES`], a result frame at most
/// [`MAX_RESULT_BYTES`]. Returns the announced length if acceptable.
pub fn frame_length(header: [u8; 4], limit: usize) -> Result<usize, FormatError> {
    let len = u32::from_le_bytes(header) as usize;
    check_len("sau2.frame", len, limit)?;
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_row_bytes() {
        let bytes = encode_row(&["ab", ""]).unwrap();
        assert_eq!(bytes, [0, 0, 1, 0, 2, 0, 2, 0, b'a', b'b', 0, 0]);
        assert_eq!(decode_row(&bytes).unwrap(), vec!["ab", ""]);
    }

    #[test]
    fn error_bytes() {
        let e = Sau2Result::error(ErrorCode::Forbidden, "no");
        let bytes = e.encode().unwrap();
        assert_eq!(bytes, [0x2c, 0x01, 2, 0, b'n', b'o']);
        assert_eq!(Sau2Result::decode(&bytes).unwrap(), e);
        assert_eq!(e.error_code(), Some(ErrorCode::Forbidden));
    }
}

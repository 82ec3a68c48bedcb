//! Little-endian reading and writing helpers shared by every decoder.
//!
//! [`Reader`] never panics: every read checks the remaining length first and
//! returns [`FormatError::Truncated`] naming the field. Length-prefixed reads
//! check the declared length against the remaining input (and a caller's
//! limit) before slicing, so hostile lengths allocate nothing.

use crate::error::FormatError;

/// A cursor over borrowed bytes.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// The unread bytes.
    pub fn rest(&self) -> &'a [u8] {
        &self.bytes[self.pos..]
    }

    /// Take `n` raw bytes.
    pub fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], FormatError> {
        if n > self.remaining() {
            return Err(FormatError::Truncated {
                what,
                needed: n as u64,
                available: self.remaining() as u64,
            });
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// Take a fixed-size array.
    pub fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], FormatError> {
        let slice = self.take(N, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(slice);
        Ok(out)
    }

    pub fn u8(&mut self, what: &'static str) -> Result<u8, FormatError> {
        Ok(self.array::<1>(what)?[0])
    }

    pub fn u16(&mut self, what: &'static str) -> Result<u16, FormatError> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    pub fn u32(&mut self, what: &'static str) -> Result<u32, FormatError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    pub fn u64(&mut self, what: &'static str) -> Result<u64, FormatError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A `u8` that must be 0 or 1.
    pub fn flag(&mut self, what: &'static str) -> Result<bool, FormatError> {
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(FormatError::InvalidValue {
                what,
                value: v.into(),
                reason: "must be 0 or 1",
            }),
        }
    }

    /// `bytes16`: a `u16` length then that many bytes, at most `limit`.
    pub fn bytes16(&mut self, what: &'static str, limit: usize) -> Result<&'a [u8], FormatError> {
        let len = usize::from(self.u16(what)?);
        check_limit(what, len, limit)?;
        self.take(len, what)
    }

    /// `bytes32`: a `u32` length then that many bytes, at most `limit`.
    pub fn bytes32(&mut self, what: &'static str, limit: usize) -> Result<&'a [u8], FormatError> {
        let len = self.u32(what)? as usize;
        check_limit(what, len, limit)?;
        self.take(len, what)
    }

    /// `str16`: a `u16` length then UTF-8, at most `limit` bytes.
    pub fn str16(&mut self, what: &'static str, limit: usize) -> Result<&'a str, FormatError> {
        utf8(self.bytes16(what, limit)?, what)
    }

    /// `str32`: a `u32` length then UTF-8, at most `limit` bytes.
    pub fn str32(&mut self, what: &'static str, limit: usize) -> Result<&'a str, FormatError> {
        utf8(self.bytes32(what, limit)?, what)
    }

    /// Refuse any bytes left over.
    pub fn finish(self, what: &'static str) -> Result<(), FormatError> {
        match self.remaining() {
            0 => Ok(()),
            count => Err(FormatError::TrailingBytes {
                what,
                count: count as u64,
            }),
        }
    }
}

fn check_limit(what: &'static str, len: usize, limit: usize) -> Result<(), FormatError> {
    if len > limit {
        return Err(FormatError::LimitExceeded {
            what,
            limit: limit as u64,
            actual: len as u64,
        });
    }
    Ok(())
}

fn utf8<'a>(bytes: &'a [u8], what: &'static str) -> Result<&'a str, FormatError> {
    std::str::from_utf8(bytes).map_err(|_| FormatError::NotUtf8 { what })
}

/// Little-endian writing onto a byte vector.
pub trait Put {
    fn put_u8(&mut self, v: u8);
    fn put_u16(&mut self, v: u16);
    fn put_u32(&mut self, v: u32);
    fn put_u64(&mut self, v: u64);
    fn put_bytes(&mut self, v: &[u8]);
    /// `bytes16`; the caller has checked `v.len() <= u16::MAX`.
    fn put_bytes16(&mut self, v: &[u8]);
    /// `bytes32`; the caller has checked `v.len() <= u32::MAX`.
    fn put_bytes32(&mut self, v: &[u8]);
    /// Big-endian `u64` for lexicographically ordered index keys.
    fn put_ordered_u64(&mut self, v: u64);
    /// Big-endian `u32` for lexicographically ordered index keys.
    fn put_ordered_u32(&mut self, v: u32);
}

impl Put for Vec<u8> {
    fn put_u8(&mut self, v: u8) {
        self.push(v);
    }
    fn put_u16(&mut self, v: u16) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_bytes(&mut self, v: &[u8]) {
        self.extend_from_slice(v);
    }
    fn put_bytes16(&mut self, v: &[u8]) {
        debug_assert!(v.len() <= usize::from(u16::MAX));
        self.put_u16(v.len() as u16);
        self.extend_from_slice(v);
    }
    fn put_bytes32(&mut self, v: &[u8]) {
        debug_assert!(v.len() <= u32::MAX as usize);
        self.put_u32(v.len() as u32);
        self.extend_from_slice(v);
    }
    fn put_ordered_u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    fn put_ordered_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_be_bytes());
    }
}

/// Read a big-endian ordered `u64` key segment.
pub fn ordered_u64(bytes: [u8; 8]) -> u64 {
    u64::from_be_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncated_reads_name_the_field() {
        let mut r = Reader::new(&[1, 2, 3]);
        assert_eq!(r.u16("a").unwrap(), 0x0201);
        let err = r.u32("b").unwrap_err();
        assert_eq!(
            err,
            FormatError::Truncated {
                what: "b",
                needed: 4,
                available: 1
            }
        );
    }

    #[test]
    fn hostile_length_is_refused_before_slicing() {
        let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xff, 1]);
        assert!(matches!(
            r.bytes32("x", 10),
            Err(FormatError::LimitExceeded { .. })
        ));
    }

    #[test]
    fn flag_rejects_two() {
        assert!(Reader::new(&[2]).flag("f").is_err());
        assert!(Reader::new(&[1]).flag("f").unwrap());
    }

    #[test]
    fn finish_reports_trailing() {
        let mut r = Reader::new(&[0, 0, 9]);
        r.u16("x").unwrap();
        assert_eq!(
            r.finish("s"),
            Err(FormatError::TrailingBytes {
                what: "s",
                count: 1
            })
        );
    }
}

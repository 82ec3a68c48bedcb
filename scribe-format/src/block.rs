//! Independent compression blocks (specification section 3, reused by
//! snapshot pages in section 12).
//!
//! ```text
//! u8 codec | u32 original length | u32 stored length | stored bytes
//! codec 0: raw, stored length == original length
//! codec 1: one standard LZ4 block, stored length < original length
//! ```

use crate::bytes::{Put, Reader};
use crate::error::FormatError;

/// Block header size.
pub const BLOCK_HEADER_LEN: usize = 9;
/// Block codec: raw bytes.
pub const BLOCK_RAW: u8 = 0;
/// Block codec: one LZ4 block.
pub const BLOCK_LZ4: u8 = 1;

/// Header of one block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockHeader {
    pub codec: u8,
    pub original_len: u32,
    pub stored_len: u32,
}

impl BlockHeader {
    /// Parse and check a header: known codec, original length within
    /// `1..=max_original`, and the codec's length rule.
    pub fn parse(bytes: [u8; BLOCK_HEADER_LEN], max_original: u32) -> Result<Self, FormatError> {
        let mut r = Reader::new(&bytes);
        let codec = r.u8("block codec")?;
        let original_len = r.u32("block original length")?;
        let stored_len = r.u32("block stored length")?;
        let header = BlockHeader {
            codec,
            original_len,
            stored_len,
        };
        header.check(max_original)?;
        Ok(header)
    }

    fn check(&self, max_original: u32) -> Result<(), FormatError> {
        if self.original_len == 0 || self.original_len > max_original {
            return Err(FormatError::InvalidValue {
                what: "block original length",
                value: self.original_len.into(),
                reason: "outside the allowed block size",
            });
        }
        match self.codec {
            BLOCK_RAW if self.stored_len != self.original_len => Err(FormatError::InvalidValue {
                what: "raw block stored length",
                value: self.stored_len.into(),
                reason: "a raw block stores exactly its original length",
            }),
            BLOCK_LZ4 if self.stored_len >= self.original_len || self.stored_len == 0 => {
                Err(FormatError::InvalidValue {
                    what: "lz4 block stored length",
                    value: self.stored_len.into(),
                    reason: "an lz4 block must be strictly smaller than its original",
                })
            }
            BLOCK_RAW | BLOCK_LZ4 => Ok(()),
            other => Err(FormatError::InvalidValue {
                what: "block codec",
                value: other.into(),
                reason: "block codecs are 0 raw and 1 lz4",
            }),
        }
    }
}

/// Append one block holding `original` (1..=u32::MAX bytes), choosing LZ4
/// only when it is strictly smaller.
pub fn encode_block(original: &[u8], out: &mut Vec<u8>) {
    debug_assert!(!original.is_empty());
    // Compressed straight into `out` after room for the header, which is
    // written once the stored length is known (no second copy of the
    // compressed bytes).
    let start = out.len();
    let body = start + BLOCK_HEADER_LEN;
    out.resize(
        body + lz4_flex::block::get_maximum_output_size(original.len()),
        0,
    );
    match lz4_flex::block::compress_into(original, &mut out[body..]) {
        Ok(n) if n < original.len() => {
            out.truncate(body + n);
            out[start..body].copy_from_slice(&header_bytes(BLOCK_LZ4, original.len(), n));
        }
        _ => {
            out.truncate(start);
            out.put_bytes(&header_bytes(BLOCK_RAW, original.len(), original.len()));
            out.put_bytes(original);
        }
    }
}

/// A block header's bytes (lengths of at most `u32::MAX`, as checked by
/// the callers' block size).
fn header_bytes(codec: u8, original: usize, stored: usize) -> [u8; BLOCK_HEADER_LEN] {
    let mut h = [0u8; BLOCK_HEADER_LEN];
    h[0] = codec;
    h[1..5].copy_from_slice(&(original as u32).to_le_bytes());
    h[5..9].copy_from_slice(&(stored as u32).to_le_bytes());
    h
}

/// Decode one block's stored bytes into `out`, which must be exactly the
/// header's original length.
pub fn decode_block_into(
    header: &BlockHeader,
    stored: &[u8],
    out: &mut [u8],
) -> Result<(), FormatError> {
    debug_assert_eq!(stored.len(), header.stored_len as usize);
    debug_assert_eq!(out.len(), header.original_len as usize);
    match header.codec {
        BLOCK_RAW => {
            out.copy_from_slice(stored);
            Ok(())
        }
        _ => match lz4_flex::block::decompress_into(stored, out) {
            Ok(n) if n == out.len() => Ok(()),
            Ok(n) => Err(FormatError::InvalidValue {
                what: "lz4 block",
                value: n as u64,
                reason: "decompressed to fewer bytes than its original length",
            }),
            Err(_) => Err(FormatError::invalid("lz4 block", "not a valid LZ4 block")),
        },
    }
}

/// Read one block from `r` and append its original bytes to `out`.
pub fn read_block(
    r: &mut Reader<'_>,
    max_original: u32,
    out: &mut Vec<u8>,
) -> Result<(), FormatError> {
    let header = BlockHeader::parse(r.array("block header")?, max_original)?;
    let stored = r.take(header.stored_len as usize, "block bytes")?;
    let start = out.len();
    out.resize(start + header.original_len as usize, 0);
    decode_block_into(&header, stored, &mut out[start..])
}

/// Encode a single independent block (as a snapshot page does).
pub fn encode_single_block(original: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(BLOCK_HEADER_LEN + original.len());
    encode_block(original, &mut out);
    out
}

/// Decode bytes that are exactly one block of at most `max_original` bytes.
pub fn decode_single_block(bytes: &[u8], max_original: u32) -> Result<Vec<u8>, FormatError> {
    let mut r = Reader::new(bytes);
    let mut out = Vec::new();
    read_block(&mut r, max_original, &mut out)?;
    r.finish("block")?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compressible_block_uses_lz4_and_round_trips() {
        let data = vec![7u8; 10_000];
        let enc = encode_single_block(&data);
        assert_eq!(enc[0], BLOCK_LZ4);
        assert!(enc.len() < data.len());
        assert_eq!(decode_single_block(&enc, 262_144).unwrap(), data);
    }

    #[test]
    fn incompressible_block_is_raw() {
        let data: Vec<u8> = (0..64u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        let enc = encode_single_block(&data);
        assert_eq!(enc[0], BLOCK_RAW);
        assert_eq!(decode_single_block(&enc, 262_144).unwrap(), data);
    }

    #[test]
    fn rejects_bad_headers() {
        // zero length
        assert!(BlockHeader::parse([0, 0, 0, 0, 0, 0, 0, 0, 0], 10).is_err());
        // raw with unequal lengths
        assert!(BlockHeader::parse([0, 5, 0, 0, 0, 4, 0, 0, 0], 10).is_err());
        // lz4 not smaller
        assert!(BlockHeader::parse([1, 5, 0, 0, 0, 5, 0, 0, 0], 10).is_err());
        // unknown codec
        assert!(BlockHeader::parse([2, 5, 0, 0, 0, 4, 0, 0, 0], 10).is_err());
        // above the maximum
        assert!(BlockHeader::parse([0, 11, 0, 0, 0, 11, 0, 0, 0], 10).is_err());
    }

    #[test]
    fn rejects_lz4_that_decodes_short() {
        let data = vec![1u8; 1000];
        let mut enc = encode_single_block(&data);
        // Claim one more original byte than the LZ4 block produces.
        let claimed = 1001u32.to_le_bytes();
        enc[1..5].copy_from_slice(&claimed);
        assert!(decode_single_block(&enc, 262_144).is_err());
    }
}

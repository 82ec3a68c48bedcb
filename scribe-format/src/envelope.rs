//! Object envelope v1 (specification section 3).
//!
//! ```text
//! offset size field
//!  0      4   magic "SCOB"
//!  4      2   envelope version = 1
//!  6      1   kind (1..4)
//!  7      1   hash algorithm = 1 (BLAKE3-256)
//!  8      1   payload codec: 0 identity, 1 bounded LZ4 blocks
//!  9      1   flags = 0
//! 10      2   reserved = 0
//! 12      8   stored payload length
//! 20      n   payload
//! ```
//!
//! Codec 1 stores `u64 original length` then independent blocks of 1 to
//! 262,144 original bytes ([`crate::block`]). Under the `lz4` policy an
//! object keeps codec 0 when the whole codec-1 representation is not smaller.

use std::borrow::Cow;
use std::io::{Read, Write};

use crate::block::{self, BlockHeader, BLOCK_HEADER_LEN};
use crate::bytes::{Put, Reader};
use crate::error::FormatError;
use crate::id::{object_identity, IdentityHasher, ObjectId, ObjectKind};
use crate::limits::MAX_BLOCK_BYTES;

/// The envelope magic.
pub const MAGIC: [u8; 4] = *b"SCOB";
/// Envelope version written and read.
pub const VERSION: u16 = 1;
/// Hash algorithm identifier 1 = BLAKE3-256.
pub const HASH_BLAKE3: u8 = 1;
/// Envelope header length.
pub const HEADER_LEN: usize = 20;
/// Payload codec: stored bytes are the payload.
pub const CODEC_IDENTITY: u8 = 0;
/// Payload codec: original length then bounded LZ4 blocks.
pub const CODEC_LZ4_BLOCKS: u8 = 1;

/// A store's compression policy, fixed at creation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Lz4,
}

impl Compression {
    /// The descriptor spelling (`none` or `lz4`).
    pub fn as_str(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
        }
    }

    pub fn parse(s: &str) -> Result<Self, FormatError> {
        match s {
            "none" => Ok(Compression::None),
            "lz4" => Ok(Compression::Lz4),
            _ => Err(FormatError::invalid(
                "compression",
                format!("unknown policy {s:?}"),
            )),
        }
    }
}

/// The fixed 20-byte envelope header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EnvelopeHeader {
    pub kind: ObjectKind,
    pub codec: u8,
    pub stored_len: u64,
}

impl EnvelopeHeader {
    /// Parse and check a header: magic, version, kind, algorithm, codec,
    /// flags and reserved bytes.
    pub fn parse(bytes: &[u8; HEADER_LEN]) -> Result<Self, FormatError> {
        let mut r = Reader::new(bytes);
        if r.array::<4>("envelope magic")? != MAGIC {
            return Err(FormatError::BadMagic { what: "envelope" });
        }
        let version = r.u16("envelope version")?;
        if version != VERSION {
            return Err(FormatError::UnsupportedVersion {
                what: "envelope",
                version: version.into(),
            });
        }
        let kind = ObjectKind::from_byte(r.u8("envelope kind")?)?;
        let algorithm = r.u8("envelope hash algorithm")?;
        if algorithm != HASH_BLAKE3 {
            return Err(FormatError::InvalidValue {
                what: "envelope hash algorithm",
                value: algorithm.into(),
                reason: "only 1 (BLAKE3-256) is defined",
            });
        }
        let codec = r.u8("envelope codec")?;
        if codec > CODEC_LZ4_BLOCKS {
            return Err(FormatError::InvalidValue {
                what: "envelope codec",
                value: codec.into(),
                reason: "codecs are 0 identity and 1 lz4 blocks",
            });
        }
        let flags = r.u8("envelope flags")?;
        if flags != 0 {
            return Err(FormatError::InvalidValue {
                what: "envelope flags",
                value: flags.into(),
                reason: "a set flag is an unknown required feature",
            });
        }
        let reserved = r.u16("envelope reserved")?;
        if reserved != 0 {
            return Err(FormatError::InvalidValue {
                what: "envelope reserved",
                value: reserved.into(),
                reason: "must be zero",
            });
        }
        let stored_len = r.u64("envelope stored length")?;
        Ok(EnvelopeHeader {
            kind,
            codec,
            stored_len,
        })
    }

    /// Total envelope length (header + stored payload).
    pub fn envelope_len(&self) -> u64 {
        HEADER_LEN as u64 + self.stored_len
    }

    /// Append the 20 header bytes to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.put_bytes(&MAGIC);
        out.put_u16(VERSION);
        out.put_u8(self.kind.byte());
        out.put_u8(HASH_BLAKE3);
        out.put_u8(self.codec);
        out.put_u8(0);
        out.put_u16(0);
        out.put_u64(self.stored_len);
    }
}

/// The codec-1 representation of `payload` (`u64 original length` then
/// blocks of 262,144 bytes), or `None` when it would not be smaller than the
/// payload itself.
pub fn encode_codec1(payload: &[u8]) -> Option<Vec<u8>> {
    let mut body = Vec::with_capacity(payload.len() / 2 + 64);
    encode_codec1_into(payload, &mut body).then_some(body)
}

/// Append the codec-1 representation of `payload` to `out`; `false` (and
/// `out` as it was) when it would not be smaller than the payload.
fn encode_codec1_into(payload: &[u8], out: &mut Vec<u8>) -> bool {
    if payload.is_empty() {
        return false;
    }
    let start = out.len();
    out.put_u64(payload.len() as u64);
    for chunk in payload.chunks(MAX_BLOCK_BYTES as usize) {
        block::encode_block(chunk, out);
        if out.len() - start >= payload.len() {
            out.truncate(start);
            return false; // cannot end up smaller any more
        }
    }
    true
}

/// Encode an object payload into an envelope under `compression`. The
/// blocks are compressed straight into the envelope behind room for its
/// header (no copy of the stored bytes).
pub fn encode(kind: ObjectKind, payload: &[u8], compression: Compression) -> Vec<u8> {
    let header = |codec: u8, stored_len: usize, out: &mut Vec<u8>| {
        EnvelopeHeader {
            kind,
            codec,
            stored_len: stored_len as u64,
        }
        .write(out)
    };
    if compression == Compression::Lz4 {
        let mut out = Vec::with_capacity(HEADER_LEN + payload.len() / 2 + 64);
        out.resize(HEADER_LEN, 0);
        if encode_codec1_into(payload, &mut out) {
            let mut h = Vec::with_capacity(HEADER_LEN);
            header(CODEC_LZ4_BLOCKS, out.len() - HEADER_LEN, &mut h);
            out[..HEADER_LEN].copy_from_slice(&h);
            return out;
        }
    }
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    header(CODEC_IDENTITY, payload.len(), &mut out);
    out.extend_from_slice(payload);
    out
}

/// A decoded envelope: its kind and original payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded<'a> {
    pub kind: ObjectKind,
    pub codec: u8,
    pub payload: Cow<'a, [u8]>,
}

/// Decode a complete envelope whose original payload is at most
/// `max_payload` bytes. Refuses truncation and trailing bytes.
pub fn decode(bytes: &[u8], max_payload: u64) -> Result<Decoded<'_>, FormatError> {
    let mut r = Reader::new(bytes);
    let header = EnvelopeHeader::parse(&r.array::<HEADER_LEN>("envelope header")?)?;
    if header.stored_len > r.remaining() as u64 {
        return Err(FormatError::Truncated {
            what: "envelope payload",
            needed: header.stored_len,
            available: r.remaining() as u64,
        });
    }
    let stored = r.take(header.stored_len as usize, "envelope payload")?;
    r.finish("envelope")?;
    let payload = match header.codec {
        CODEC_IDENTITY => {
            check_payload_limit(stored.len() as u64, max_payload)?;
            Cow::Borrowed(stored)
        }
        _ => Cow::Owned(decode_codec1(stored, max_payload)?),
    };
    Ok(Decoded {
        kind: header.kind,
        codec: header.codec,
        payload,
    })
}

/// Decode an envelope and check that its payload has identity `expected`.
pub fn decode_verified<'a>(
    bytes: &'a [u8],
    expected: &ObjectId,
    max_payload: u64,
) -> Result<Cow<'a, [u8]>, FormatError> {
    let decoded = decode(bytes, max_payload)?;
    if decoded.kind != expected.kind {
        return Err(FormatError::InvalidValue {
            what: "envelope kind",
            value: decoded.kind.byte().into(),
            reason: "differs from the kind of the requested object",
        });
    }
    let actual = object_identity(decoded.kind, &decoded.payload)?;
    if actual != *expected {
        return Err(FormatError::IdentityMismatch {
            what: "object",
            expected: expected.to_string(),
            actual: actual.to_string(),
        });
    }
    Ok(decoded.payload)
}

fn check_payload_limit(len: u64, max_payload: u64) -> Result<(), FormatError> {
    if len > max_payload {
        return Err(FormatError::LimitExceeded {
            what: "object payload",
            limit: max_payload,
            actual: len,
        });
    }
    Ok(())
}

/// Decode a codec-1 body (`u64 original length` then blocks) of at most
/// `max_payload` original bytes. The block structure is checked first
/// without allocating, so a hostile original length costs nothing. Wire
/// frames reuse this representation for transfer compression.
pub fn decode_codec1(stored: &[u8], max_payload: u64) -> Result<Vec<u8>, FormatError> {
    let mut r = Reader::new(stored);
    let original_len = r.u64("codec-1 original length")?;
    check_payload_limit(original_len, max_payload)?;
    // Pass 1: structure only.
    let mut scan = r.clone();
    let mut total: u64 = 0;
    while total < original_len {
        let header = BlockHeader::parse(scan.array("block header")?, MAX_BLOCK_BYTES)?;
        scan.take(header.stored_len as usize, "block bytes")?;
        total += u64::from(header.original_len);
    }
    if total != original_len {
        return Err(FormatError::InvalidValue {
            what: "codec-1 blocks",
            value: total,
            reason: "block lengths overrun the original length",
        });
    }
    scan.finish("codec-1 payload")?;
    // Pass 2: decode.
    let mut out = Vec::with_capacity(original_len as usize);
    while (out.len() as u64) < original_len {
        block::read_block(&mut r, MAX_BLOCK_BYTES, &mut out)?;
    }
    Ok(out)
}

/// Streams an envelope's original payload from a reader to a writer in
/// bounded memory, verifying its identity. Returns the identity and the
/// number of original bytes written. The caller has already read and parsed
/// the header; `input` yields exactly `header.stored_len` bytes.
pub fn decode_stream(
    header: &EnvelopeHeader,
    input: &mut impl Read,
    output: &mut impl Write,
    max_payload: u64,
) -> Result<(ObjectId, u64), StreamError> {
    let mut hasher = IdentityHasher::new(header.kind);
    let mut buf = vec![0u8; MAX_BLOCK_BYTES as usize];
    match header.codec {
        CODEC_IDENTITY => {
            check_payload_limit(header.stored_len, max_payload)?;
            let mut left = header.stored_len;
            while left > 0 {
                let n = left.min(buf.len() as u64) as usize;
                input.read_exact(&mut buf[..n])?;
                hasher.update(&buf[..n])?;
                output.write_all(&buf[..n])?;
                left -= n as u64;
            }
            Ok((hasher.finish()?, header.stored_len))
        }
        _ => {
            if header.stored_len < 8 {
                return Err(FormatError::Truncated {
                    what: "codec-1 original length",
                    needed: 8,
                    available: header.stored_len,
                }
                .into());
            }
            let mut len8 = [0u8; 8];
            input.read_exact(&mut len8)?;
            let original_len = u64::from_le_bytes(len8);
            check_payload_limit(original_len, max_payload)?;
            let mut stored_left = header.stored_len - 8;
            let mut written = 0u64;
            let mut stored_buf = vec![0u8; MAX_BLOCK_BYTES as usize];
            while written < original_len {
                if stored_left < BLOCK_HEADER_LEN as u64 {
                    return Err(FormatError::Truncated {
                        what: "block header",
                        needed: BLOCK_HEADER_LEN as u64,
                        available: stored_left,
                    }
                    .into());
                }
                let mut hb = [0u8; BLOCK_HEADER_LEN];
                input.read_exact(&mut hb)?;
                stored_left -= BLOCK_HEADER_LEN as u64;
                let bh = BlockHeader::parse(hb, MAX_BLOCK_BYTES)?;
                if u64::from(bh.stored_len) > stored_left {
                    return Err(FormatError::Truncated {
                        what: "block bytes",
                        needed: bh.stored_len.into(),
                        available: stored_left,
                    }
                    .into());
                }
                if written + u64::from(bh.original_len) > original_len {
                    return Err(FormatError::InvalidValue {
                        what: "codec-1 blocks",
                        value: written + u64::from(bh.original_len),
                        reason: "block lengths overrun the original length",
                    }
                    .into());
                }
                let stored = &mut stored_buf[..bh.stored_len as usize];
                input.read_exact(stored)?;
                stored_left -= u64::from(bh.stored_len);
                let out = &mut buf[..bh.original_len as usize];
                block::decode_block_into(&bh, stored, out)?;
                hasher.update(out)?;
                output.write_all(out)?;
                written += u64::from(bh.original_len);
            }
            if stored_left != 0 {
                return Err(FormatError::TrailingBytes {
                    what: "codec-1 payload",
                    count: stored_left,
                }
                .into());
            }
            Ok((hasher.finish()?, written))
        }
    }
}

/// An error of [`decode_stream`]: the bytes, or the reader/writer.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error(transparent)]
    Format(#[from] FormatError),
    #[error("I/O while streaming an object: {0}")]
    Io(#[from] std::io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_codec_round_trip() {
        let env = encode(ObjectKind::Chunk, b"hello", Compression::None);
        assert_eq!(&env[..4], b"SCOB");
        assert_eq!(env.len(), 25);
        let d = decode(&env, u64::MAX).unwrap();
        assert_eq!(d.codec, CODEC_IDENTITY);
        assert_eq!(&*d.payload, b"hello");
    }

    #[test]
    fn lz4_used_only_when_smaller() {
        let compressible = vec![3u8; 600_000];
        let env = encode(ObjectKind::Chunk, &compressible, Compression::Lz4);
        assert_eq!(env[8], CODEC_LZ4_BLOCKS);
        assert_eq!(&*decode(&env, u64::MAX).unwrap().payload, &compressible[..]);

        let random = scribe_testkit::noise(300_000, 0);
        let env = encode(ObjectKind::Chunk, &random, Compression::Lz4);
        assert_eq!(env[8], CODEC_IDENTITY);

        let empty = encode(ObjectKind::Chunk, b"", Compression::Lz4);
        assert_eq!(empty[8], CODEC_IDENTITY);
    }

    /// The envelope is byte for byte the format's definition, built here
    /// from the LZ4 library block by block (section 3): blocks of 262,144
    /// bytes, each LZ4 when strictly smaller, else raw; identity when the
    /// blocks would not be smaller than the payload.
    #[test]
    fn lz4_envelopes_are_the_specified_bytes() {
        let reference = |kind: ObjectKind, payload: &[u8]| {
            let mut body = Vec::new();
            body.extend_from_slice(&(payload.len() as u64).to_le_bytes());
            for b in payload.chunks(MAX_BLOCK_BYTES as usize) {
                let c = lz4_flex::block::compress(b);
                let (codec, stored) = if c.len() < b.len() {
                    (1u8, &c[..])
                } else {
                    (0u8, b)
                };
                body.push(codec);
                body.extend_from_slice(&(b.len() as u32).to_le_bytes());
                body.extend_from_slice(&(stored.len() as u32).to_le_bytes());
                body.extend_from_slice(stored);
            }
            let (codec, stored) = if !payload.is_empty() && body.len() < payload.len() {
                (CODEC_LZ4_BLOCKS, &body[..])
            } else {
                (CODEC_IDENTITY, payload)
            };
            let mut out = Vec::new();
            EnvelopeHeader {
                kind,
                codec,
                stored_len: stored.len() as u64,
            }
            .write(&mut out);
            out.extend_from_slice(stored);
            out
        };
        let noise = |n, seed| scribe_testkit::noise(n, seed);
        let mut mixed = vec![7u8; 300_000];
        mixed.extend(noise(262_144, 1));
        mixed.extend(b"text ".repeat(40_000));
        mixed.extend(noise(1000, 2));
        let mut mostly_noise = noise(700_000, 3);
        mostly_noise.extend(vec![0u8; 100]);
        for payload in [
            mixed,
            mostly_noise,
            vec![1u8; 262_144],
            vec![2u8; 262_145],
            noise(10, 4),
            b"a".to_vec(),
            Vec::new(),
        ] {
            for kind in [ObjectKind::Chunk, ObjectKind::Manifest] {
                assert_eq!(
                    encode(kind, &payload, Compression::Lz4),
                    reference(kind, &payload),
                    "{} bytes",
                    payload.len()
                );
            }
        }
    }

    #[test]
    fn stream_decode_matches_slice_decode() {
        let mut data = vec![1u8; 400_000];
        data.extend(scribe_testkit::noise(300_000, 0));
        for compression in [Compression::None, Compression::Lz4] {
            let env = encode(ObjectKind::Chunk, &data, compression);
            let header = EnvelopeHeader::parse(env[..HEADER_LEN].try_into().unwrap()).unwrap();
            let mut out = Vec::new();
            let (id, n) =
                decode_stream(&header, &mut &env[HEADER_LEN..], &mut out, u64::MAX).unwrap();
            assert_eq!(n, data.len() as u64);
            assert_eq!(out, data);
            assert_eq!(id, object_identity(ObjectKind::Chunk, &data).unwrap());
        }
    }

    #[test]
    fn rejections() {
        let env = encode(ObjectKind::Manifest, &[5u8; 1000], Compression::Lz4);
        assert_eq!(env[8], CODEC_LZ4_BLOCKS);
        let mut bad = env.clone();
        bad[0] = b'X';
        assert!(matches!(
            decode(&bad, u64::MAX),
            Err(FormatError::BadMagic { .. })
        ));
        let mut bad = env.clone();
        bad[4] = 2;
        assert!(matches!(
            decode(&bad, u64::MAX),
            Err(FormatError::UnsupportedVersion { .. })
        ));
        for (offset, value) in [(6, 5u8), (7, 2), (8, 2), (9, 1), (10, 1), (11, 1)] {
            let mut bad = env.clone();
            bad[offset] = value;
            assert!(decode(&bad, u64::MAX).is_err(), "offset {offset}");
        }
        let mut trailing = env.clone();
        trailing.push(0);
        assert!(matches!(
            decode(&trailing, u64::MAX),
            Err(FormatError::TrailingBytes { .. })
        ));
        for cut in 0..env.len() {
            assert!(decode(&env[..cut], u64::MAX).is_err(), "cut at {cut}");
        }
        assert!(matches!(
            decode(&env, 999),
            Err(FormatError::LimitExceeded { .. })
        ));
    }

    #[test]
    fn hostile_original_length_does_not_allocate() {
        let mut env = Vec::new();
        EnvelopeHeader {
            kind: ObjectKind::Chunk,
            codec: CODEC_LZ4_BLOCKS,
            stored_len: 8,
        }
        .write(&mut env);
        env.put_u64(u64::MAX / 2);
        assert!(decode(&env, u64::MAX).is_err());
    }

    #[test]
    fn verified_decode_names_mismatch() {
        let env = encode(ObjectKind::Chunk, b"abc", Compression::None);
        let right = ObjectId::chunk(crate::ChunkId::of(b"abc"));
        assert!(decode_verified(&env, &right, 100).is_ok());
        let wrong = ObjectId::chunk(crate::ChunkId::of(b"abd"));
        assert!(matches!(
            decode_verified(&env, &wrong, 100),
            Err(FormatError::IdentityMismatch { .. })
        ));
    }
}

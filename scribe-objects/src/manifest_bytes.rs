//! A minimal private manifest v1 encoder/decoder (specification section 4.1).
//!
//! Temporary: `scribe_format::manifest` is being written in parallel. The
//! rest of the crate uses only [`ManifestChunk`], [`encode`], [`decode`] and
//! [`ManifestRef`], so swapping in the format crate's codec is local.
//!
//! ```text
//! u16 version = 1 | u32 flags = 0 | u8 content codec = 0 | u16 chunking profile = 1
//! u64 total size | [32] file content id | u32 chunk count
//! repeat: [32] chunk id | u32 chunk length
//! ```

use scribe_format::bytes::{Put, Reader};
use scribe_format::limits::{CHUNK_MIN_BYTES, MAX_CHUNK_BYTES, MAX_FILE_SIZE, MAX_MANIFEST_CHUNKS};
use scribe_format::{ChunkId, FileContentId, FormatError};

/// Manifest version written and read.
pub const VERSION: u16 = 1;
/// Chunking profile 1: FastCDC-2020, level 1, seed 0, 1/4/16 MiB.
pub const PROFILE_FASTCDC_2020: u16 = 1;
/// Fixed header length before the chunk list.
pub const HEADER_LEN: usize = 2 + 4 + 1 + 2 + 8 + 32 + 4;
/// Length of one chunk record.
pub const CHUNK_RECORD_LEN: usize = 36;

/// One chunk of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ManifestChunk {
    pub id: ChunkId,
    pub len: u32,
}

/// A decoded manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestRef {
    pub total_size: u64,
    pub content_id: FileContentId,
    pub chunks: Vec<ManifestChunk>,
}

/// Encode a manifest payload. The caller supplies chunks produced by
/// profile 1 (so the rules hold by construction); they are checked anyway.
pub fn encode(
    total_size: u64,
    content_id: &FileContentId,
    chunks: &[ManifestChunk],
) -> Result<Vec<u8>, FormatError> {
    check(total_size, chunks)?;
    let mut out = Vec::with_capacity(HEADER_LEN + chunks.len() * CHUNK_RECORD_LEN);
    out.put_u16(VERSION);
    out.put_u32(0);
    out.put_u8(0);
    out.put_u16(PROFILE_FASTCDC_2020);
    out.put_u64(total_size);
    out.put_bytes(&content_id.0);
    out.put_u32(chunks.len() as u32);
    for c in chunks {
        out.put_bytes(&c.id.0);
        out.put_u32(c.len);
    }
    Ok(out)
}

fn check(total_size: u64, chunks: &[ManifestChunk]) -> Result<(), FormatError> {
    if total_size > MAX_FILE_SIZE {
        return Err(FormatError::LimitExceeded {
            what: "manifest.total size",
            limit: MAX_FILE_SIZE,
            actual: total_size,
        });
    }
    if chunks.len() as u64 > u64::from(MAX_MANIFEST_CHUNKS) {
        return Err(FormatError::LimitExceeded {
            what: "manifest.chunk count",
            limit: MAX_MANIFEST_CHUNKS.into(),
            actual: chunks.len() as u64,
        });
    }
    let mut sum = 0u64;
    for c in chunks {
        if c.len == 0 || c.len > MAX_CHUNK_BYTES {
            return Err(FormatError::InvalidValue {
                what: "manifest.chunk length",
                value: c.len.into(),
                reason: "chunk lengths are 1 to 16 MiB",
            });
        }
        sum += u64::from(c.len);
    }
    if sum != total_size {
        return Err(FormatError::InvalidValue {
            what: "manifest.total size",
            value: total_size,
            reason: "differs from the sum of chunk lengths",
        });
    }
    if total_size <= u64::from(CHUNK_MIN_BYTES) && chunks.len() > 1 {
        return Err(FormatError::InvalidValue {
            what: "manifest.chunk count",
            value: chunks.len() as u64,
            reason: "files no larger than 1 MiB are exactly one chunk",
        });
    }
    Ok(())
}

/// Decode a manifest payload.
pub fn decode(payload: &[u8]) -> Result<ManifestRef, FormatError> {
    let mut r = Reader::new(payload);
    let version = r.u16("manifest.version")?;
    if version != VERSION {
        return Err(FormatError::UnsupportedVersion {
            what: "manifest",
            version: version.into(),
        });
    }
    let flags = r.u32("manifest.flags")?;
    if flags != 0 {
        return Err(FormatError::InvalidValue {
            what: "manifest.flags",
            value: flags.into(),
            reason: "unknown flag bits",
        });
    }
    let codec = r.u8("manifest.content codec")?;
    if codec != 0 {
        return Err(FormatError::InvalidValue {
            what: "manifest.content codec",
            value: codec.into(),
            reason: "only 0 (original bytes) is defined",
        });
    }
    let profile = r.u16("manifest.chunking profile")?;
    if profile != PROFILE_FASTCDC_2020 {
        return Err(FormatError::InvalidValue {
            what: "manifest.chunking profile",
            value: profile.into(),
            reason: "only profile 1 is defined",
        });
    }
    let total_size = r.u64("manifest.total size")?;
    let content_id = FileContentId(r.array("manifest.file content id")?);
    let count = r.u32("manifest.chunk count")?;
    if count > MAX_MANIFEST_CHUNKS {
        return Err(FormatError::LimitExceeded {
            what: "manifest.chunk count",
            limit: MAX_MANIFEST_CHUNKS.into(),
            actual: count.into(),
        });
    }
    if (r.remaining() as u64) < u64::from(count) * CHUNK_RECORD_LEN as u64 {
        return Err(FormatError::Truncated {
            what: "manifest.chunks",
            needed: u64::from(count) * CHUNK_RECORD_LEN as u64,
            available: r.remaining() as u64,
        });
    }
    let mut chunks = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let id = ChunkId(r.array("manifest.chunk id")?);
        let len = r.u32("manifest.chunk length")?;
        chunks.push(ManifestChunk { id, len });
    }
    r.finish("manifest")?;
    check(total_size, &chunks)?;
    if (count == 0) != (total_size == 0) {
        return Err(FormatError::invalid(
            "manifest",
            "chunk count is zero exactly when the size is",
        ));
    }
    if total_size == 0 && content_id != FileContentId::EMPTY {
        return Err(FormatError::invalid(
            "manifest.file content id",
            "an empty file has id blake3(\"\")",
        ));
    }
    Ok(ManifestRef {
        total_size,
        content_id,
        chunks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use scribe_format::ManifestId;

    #[test]
    fn byte_layout_and_round_trip() {
        let chunks = [ManifestChunk {
            id: ChunkId::of(b"abc"),
            len: 3,
        }];
        let fid = FileContentId::of(b"abc");
        let bytes = encode(3, &fid, &chunks).unwrap();
        assert_eq!(bytes.len(), HEADER_LEN + 36);
        assert_eq!(&bytes[..9], &[1, 0, 0, 0, 0, 0, 0, 1, 0]);
        assert_eq!(&bytes[9..17], &3u64.to_le_bytes());
        assert_eq!(&bytes[17..49], &fid.0);
        assert_eq!(&bytes[49..53], &1u32.to_le_bytes());
        let m = decode(&bytes).unwrap();
        assert_eq!(m.chunks, chunks);
        // ManifestId = blake3(domain ‖ payload).
        let mut h = blake3::Hasher::new();
        h.update(b"scribe:manifest:v1\0");
        h.update(&bytes);
        assert_eq!(ManifestId::of_payload(&bytes).0, *h.finalize().as_bytes());
    }

    #[test]
    fn empty_and_refusals() {
        let empty = encode(0, &FileContentId::EMPTY, &[]).unwrap();
        assert_eq!(decode(&empty).unwrap().total_size, 0);
        let c = ManifestChunk {
            id: ChunkId([1; 32]),
            len: 2,
        };
        assert!(encode(3, &FileContentId::EMPTY, &[c]).is_err());
        let mut b = encode(2, &FileContentId::EMPTY, &[c]).unwrap();
        b.push(0);
        assert!(decode(&b).is_err());
        b.pop();
        b[2] = 1;
        assert!(decode(&b).is_err());
    }
}

//! The store's view of manifest v1 (specification section 4.1), encoded
//! and decoded by `scribe_format::manifest` (the one codec of the format).
//! The store keeps these small owned types for its import and
//! reconstruction paths.

use scribe_format::manifest::{ChunkRef, Manifest, PROFILE_FASTCDC_2020};
use scribe_format::{ChunkId, FileContentId, FormatError};

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

/// Encode a manifest payload of chunking profile 1; every rule of section
/// 4.1 is checked by the format crate.
pub fn encode(
    total_size: u64,
    content_id: &FileContentId,
    chunks: &[ManifestChunk],
) -> Result<Vec<u8>, FormatError> {
    Manifest {
        chunking_profile: PROFILE_FASTCDC_2020,
        total_size,
        file_content_id: *content_id,
        chunks: chunks
            .iter()
            .map(|c| ChunkRef {
                id: c.id,
                length: c.len,
            })
            .collect(),
    }
    .encode()
}

/// Decode and check a manifest payload.
pub fn decode(payload: &[u8]) -> Result<ManifestRef, FormatError> {
    let m = Manifest::decode(payload)?;
    Ok(ManifestRef {
        total_size: m.total_size,
        content_id: m.file_content_id,
        chunks: m
            .chunks
            .into_iter()
            .map(|c| ManifestChunk {
                id: c.id,
                len: c.length,
            })
            .collect(),
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
        assert_eq!(bytes.len(), 53 + 36);
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
        let fid = FileContentId([9; 32]);
        assert!(
            encode(3, &fid, &[c]).is_err(),
            "lengths must sum to the size"
        );
        assert!(
            encode(2, &FileContentId::EMPTY, &[c]).is_err(),
            "a nonempty file cannot have the empty identity"
        );
        let mut b = encode(2, &fid, &[c]).unwrap();
        b.push(0);
        assert!(decode(&b).is_err());
        b.pop();
        b[2] = 1;
        assert!(decode(&b).is_err());
    }
}

//! Manifest v1 payloads (specification section 4.1) as the store writes
//! them: chunking profile 1 (FastCDC-2020). The codec, the owned
//! [`Manifest`] and the borrowed `ManifestRef<'a>` are
//! `scribe_format::manifest`'s (the one codec of the format); every rule is
//! checked there.

use scribe_format::manifest::{ChunkRef, Manifest, PROFILE_FASTCDC_2020};
use scribe_format::{FileContentId, FormatError};

/// Encode a manifest payload of chunking profile 1.
pub fn encode(
    total_size: u64,
    content_id: &FileContentId,
    chunks: &[ChunkRef],
) -> Result<Vec<u8>, FormatError> {
    Manifest {
        chunking_profile: PROFILE_FASTCDC_2020,
        total_size,
        file_content_id: *content_id,
        chunks: chunks.to_vec(),
    }
    .encode()
}

#[cfg(test)]
mod tests {
    use super::*;
    use scribe_format::{ChunkId, ManifestId};

    #[test]
    fn byte_layout_and_round_trip() {
        let chunks = [ChunkRef {
            id: ChunkId::of(b"abc"),
            length: 3,
        }];
        let fid = FileContentId::of(b"abc");
        let bytes = encode(3, &fid, &chunks).unwrap();
        assert_eq!(bytes.len(), 53 + 36);
        assert_eq!(&bytes[..9], &[1, 0, 0, 0, 0, 0, 0, 1, 0]);
        assert_eq!(&bytes[9..17], &3u64.to_le_bytes());
        assert_eq!(&bytes[17..49], &fid.0);
        assert_eq!(&bytes[49..53], &1u32.to_le_bytes());
        let m = Manifest::decode(&bytes).unwrap();
        assert_eq!(m.chunks, chunks);
        assert_eq!(m.chunking_profile, PROFILE_FASTCDC_2020);
        // ManifestId = blake3(domain ‖ payload).
        let mut h = blake3::Hasher::new();
        h.update(b"scribe:manifest:v1\0");
        h.update(&bytes);
        assert_eq!(ManifestId::of_payload(&bytes).0, *h.finalize().as_bytes());
    }

    #[test]
    fn empty_and_refusals() {
        let empty = encode(0, &FileContentId::EMPTY, &[]).unwrap();
        assert_eq!(Manifest::decode(&empty).unwrap().total_size, 0);
        let c = ChunkRef {
            id: ChunkId([1; 32]),
            length: 2,
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
        assert!(Manifest::decode(&b).is_err());
        b.pop();
        b[2] = 1;
        assert!(Manifest::decode(&b).is_err());
    }
}

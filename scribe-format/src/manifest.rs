//! Manifest v1 (specification section 4.1): how a file's bytes are cut into
//! chunks.
//!
//! ```text
//! offset size field
//!  0      2   version = 1
//!  2      4   flags = 0                 (unknown bits reject)
//!  6      1   content codec = 0         (chunk contents are original bytes)
//!  7      2   chunking profile          (1 = FastCDC-2020, level 1, seed 0, 1/4/16 MiB)
//!  9      8   total size
//! 17     32   file content id
//! 49      4   chunk count
//! 53   36*n   chunk count times: [32] chunk id, u32 chunk length
//! ```
//!
//! Rules: `sum(length) == total size`; `chunk count == 0 ⇔ total size == 0`;
//! `1 ≤ length ≤ 16 MiB`; an empty file's content id is `blake3("")`;
//! repeated chunk ids are allowed; total size ≤ 1 PiB; chunk count ≤ 2^30;
//! files no larger than the profile minimum (1 MiB) are exactly one chunk.
//!
//! Decisions where the specification leaves a choice
//! (`docs/format-notes-payloads.md`): an unknown chunking profile is refused
//! (the one-chunk rule depends on the profile's minimum), and a nonempty file
//! whose content id is `blake3("")` is refused.
//!
//! [`Manifest`] is the owned value; [`ManifestRef`] is a validated borrowed
//! view that iterates chunk references straight from the payload bytes; and
//! [`ManifestBuilder`] writes a payload one chunk at a time, so an import of
//! a 1 PiB file holds only the payload itself.

use crate::bytes::{Put, Reader};
use crate::error::FormatError;
use crate::id::{ChunkId, FileContentId, ManifestId};
use crate::limits::{CHUNK_MIN_BYTES, MAX_CHUNK_BYTES, MAX_FILE_SIZE, MAX_MANIFEST_CHUNKS};

/// The manifest version written and read.
pub const VERSION: u16 = 1;
/// Content codec 0: chunk contents are the original bytes.
pub const CONTENT_CODEC_ORIGINAL: u8 = 0;
/// Chunking profile 1: FastCDC-2020, level 1, seed 0, 1/4/16 MiB.
pub const PROFILE_FASTCDC_2020: u16 = 1;
/// Offset of the flags word.
pub const FLAGS_OFFSET: usize = 2;
/// Offset of the content codec byte.
pub const CODEC_OFFSET: usize = FLAGS_OFFSET + 4;
/// Offset of the chunking profile.
pub const PROFILE_OFFSET: usize = CODEC_OFFSET + 1;
/// Offset of the total size.
pub const TOTAL_SIZE_OFFSET: usize = PROFILE_OFFSET + 2;
/// Offset of the file content id.
pub const CONTENT_ID_OFFSET: usize = TOTAL_SIZE_OFFSET + 8;
/// Offset of the chunk count.
pub const CHUNK_COUNT_OFFSET: usize = CONTENT_ID_OFFSET + 32;
/// Length of everything before the chunk references (53).
pub const HEADER_LEN: usize = CHUNK_COUNT_OFFSET + 4;
/// Length of one chunk reference: `[32] id ‖ u32 length` (36).
pub const CHUNK_REF_LEN: usize = 32 + 4;

/// Names of the manifest rules, used as the `what` of the errors that
/// enforce them so callers and tests can tell which rule was broken.
pub mod rule {
    pub const VERSION: &str = "manifest version";
    pub const FLAGS: &str = "manifest flags";
    pub const CODEC: &str = "manifest content codec";
    pub const PROFILE: &str = "manifest chunking profile";
    pub const TOTAL_SIZE: &str = "manifest total size";
    pub const CHUNK_COUNT: &str = "manifest chunk count";
    pub const CHUNK_LENGTH: &str = "manifest chunk length";
    pub const SUM: &str = "manifest sum of chunk lengths";
    pub const EMPTY_IFF_NO_CHUNKS: &str = "manifest empty file has no chunks";
    pub const EMPTY_CONTENT_ID: &str = "manifest empty file content id";
    pub const SMALL_FILE_ONE_CHUNK: &str = "manifest small file is one chunk";
    pub const CHUNKS: &str = "manifest chunk references";
}

/// One chunk of a file, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ChunkRef {
    pub id: ChunkId,
    pub length: u32,
}

/// An owned manifest v1.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Manifest {
    pub chunking_profile: u16,
    pub total_size: u64,
    pub file_content_id: FileContentId,
    pub chunks: Vec<ChunkRef>,
}

/// The encoded length of a manifest with `chunk_count` chunks.
pub const fn encoded_len(chunk_count: usize) -> usize {
    HEADER_LEN + chunk_count * CHUNK_REF_LEN
}

impl Manifest {
    /// The manifest of the empty file under `chunking_profile`.
    pub fn empty(chunking_profile: u16) -> Manifest {
        Manifest {
            chunking_profile,
            total_size: 0,
            file_content_id: FileContentId::EMPTY,
            chunks: Vec::new(),
        }
    }

    /// Check every rule of section 4.1.
    pub fn validate(&self) -> Result<(), FormatError> {
        check_header(self.chunking_profile, self.total_size)?;
        let count = u32::try_from(self.chunks.len())
            .ok()
            .filter(|&c| c <= MAX_MANIFEST_CHUNKS)
            .ok_or(FormatError::LimitExceeded {
                what: rule::CHUNK_COUNT,
                limit: MAX_MANIFEST_CHUNKS.into(),
                actual: self.chunks.len() as u64,
            })?;
        let mut sum = 0u64;
        for (index, chunk) in self.chunks.iter().enumerate() {
            check_chunk_length(index, chunk.length)?;
            sum += u64::from(chunk.length);
        }
        check_totals(self.total_size, &self.file_content_id, count, sum)
    }

    /// The canonical payload; refuses a manifest that breaks a rule.
    pub fn encode(&self) -> Result<Vec<u8>, FormatError> {
        self.validate()?;
        let mut out = Vec::with_capacity(encoded_len(self.chunks.len()));
        put_header(
            &mut out,
            self.chunking_profile,
            self.total_size,
            &self.file_content_id,
            self.chunks.len() as u32,
        );
        for chunk in &self.chunks {
            out.put_bytes(chunk.id.as_bytes());
            out.put_u32(chunk.length);
        }
        Ok(out)
    }

    /// Decode and validate a payload.
    pub fn decode(bytes: &[u8]) -> Result<Manifest, FormatError> {
        ManifestRef::decode(bytes).map(|m| m.to_manifest())
    }

    /// `blake3("scribe:manifest:v1\0" ‖ payload)`; refuses an invalid manifest.
    pub fn id(&self) -> Result<ManifestId, FormatError> {
        Ok(ManifestId::of_payload(&self.encode()?))
    }
}

/// A validated manifest borrowed from its payload bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ManifestRef<'a> {
    bytes: &'a [u8],
    chunking_profile: u16,
    total_size: u64,
    file_content_id: FileContentId,
    chunk_count: u32,
}

impl<'a> ManifestRef<'a> {
    /// Decode and validate a payload without copying its chunk references.
    ///
    /// The declared chunk count is checked against the remaining bytes
    /// (`count * 36` must equal them exactly) before anything is read.
    pub fn decode(bytes: &'a [u8]) -> Result<ManifestRef<'a>, FormatError> {
        let mut r = Reader::new(bytes);
        let version = r.u16(rule::VERSION)?;
        if version != VERSION {
            return Err(FormatError::UnsupportedVersion {
                what: rule::VERSION,
                version: version.into(),
            });
        }
        let flags = r.u32(rule::FLAGS)?;
        if flags != 0 {
            return Err(FormatError::InvalidValue {
                what: rule::FLAGS,
                value: flags.into(),
                reason: "unknown flag bits are set",
            });
        }
        let codec = r.u8(rule::CODEC)?;
        if codec != CONTENT_CODEC_ORIGINAL {
            return Err(FormatError::InvalidValue {
                what: rule::CODEC,
                value: codec.into(),
                reason: "the only content codec is 0 (original bytes)",
            });
        }
        let chunking_profile = r.u16(rule::PROFILE)?;
        let total_size = r.u64(rule::TOTAL_SIZE)?;
        check_header(chunking_profile, total_size)?;
        let file_content_id = FileContentId(r.array("manifest file content id")?);
        let chunk_count = r.u32(rule::CHUNK_COUNT)?;
        if chunk_count > MAX_MANIFEST_CHUNKS {
            return Err(FormatError::LimitExceeded {
                what: rule::CHUNK_COUNT,
                limit: MAX_MANIFEST_CHUNKS.into(),
                actual: chunk_count.into(),
            });
        }
        let needed = u64::from(chunk_count) * CHUNK_REF_LEN as u64;
        let available = r.remaining() as u64;
        if needed > available {
            return Err(FormatError::Truncated {
                what: rule::CHUNKS,
                needed,
                available,
            });
        }
        if needed < available {
            return Err(FormatError::TrailingBytes {
                what: rule::CHUNKS,
                count: available - needed,
            });
        }
        let view = ManifestRef {
            bytes,
            chunking_profile,
            total_size,
            file_content_id,
            chunk_count,
        };
        let mut sum = 0u64;
        for (index, chunk) in view.chunks().enumerate() {
            check_chunk_length(index, chunk.length)?;
            sum += u64::from(chunk.length);
        }
        check_totals(total_size, &file_content_id, chunk_count, sum)?;
        Ok(view)
    }

    pub fn chunking_profile(&self) -> u16 {
        self.chunking_profile
    }

    pub fn total_size(&self) -> u64 {
        self.total_size
    }

    pub fn file_content_id(&self) -> FileContentId {
        self.file_content_id
    }

    pub fn chunk_count(&self) -> u32 {
        self.chunk_count
    }

    /// The payload bytes this view was decoded from.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The chunk references in order, read from the payload.
    pub fn chunks(&self) -> impl ExactSizeIterator<Item = ChunkRef> + 'a {
        self.bytes[HEADER_LEN..]
            .chunks_exact(CHUNK_REF_LEN)
            .map(|raw| {
                let (id, length) = raw.split_at(32);
                let mut id_bytes = [0u8; 32];
                id_bytes.copy_from_slice(id);
                let mut len_bytes = [0u8; 4];
                len_bytes.copy_from_slice(length);
                ChunkRef {
                    id: ChunkId(id_bytes),
                    length: u32::from_le_bytes(len_bytes),
                }
            })
    }

    /// The identity of the payload.
    pub fn id(&self) -> ManifestId {
        ManifestId::of_payload(self.bytes)
    }

    /// Copy into an owned [`Manifest`].
    pub fn to_manifest(&self) -> Manifest {
        Manifest {
            chunking_profile: self.chunking_profile,
            total_size: self.total_size,
            file_content_id: self.file_content_id,
            chunks: self.chunks().collect(),
        }
    }
}

/// Writes a manifest payload one chunk at a time.
///
/// The header is reserved up front and filled in by [`finish`], once the
/// file content id (known only after streaming the whole file) is given,
/// so a large import holds the payload bytes once and no `Vec<ChunkRef>`.
///
/// [`finish`]: ManifestBuilder::finish
#[derive(Clone, Debug)]
pub struct ManifestBuilder {
    out: Vec<u8>,
    chunking_profile: u16,
    count: u32,
    total: u64,
}

impl ManifestBuilder {
    /// A builder under a known chunking profile.
    pub fn new(chunking_profile: u16) -> Result<ManifestBuilder, FormatError> {
        check_header(chunking_profile, 0)?;
        Ok(ManifestBuilder {
            out: vec![0; HEADER_LEN],
            chunking_profile,
            count: 0,
            total: 0,
        })
    }

    /// Reserve room for `additional` more chunk references.
    pub fn reserve(&mut self, additional: usize) {
        self.out.reserve(additional.saturating_mul(CHUNK_REF_LEN));
    }

    /// Append the next chunk; refuses a bad length, more than 2^30 chunks,
    /// or a total beyond 1 PiB.
    pub fn push(&mut self, chunk: ChunkRef) -> Result<(), FormatError> {
        check_chunk_length(self.count as usize, chunk.length)?;
        if self.count >= MAX_MANIFEST_CHUNKS {
            return Err(FormatError::LimitExceeded {
                what: rule::CHUNK_COUNT,
                limit: MAX_MANIFEST_CHUNKS.into(),
                actual: u64::from(self.count) + 1,
            });
        }
        let total = self.total + u64::from(chunk.length);
        if total > MAX_FILE_SIZE {
            return Err(FormatError::LimitExceeded {
                what: rule::TOTAL_SIZE,
                limit: MAX_FILE_SIZE,
                actual: total,
            });
        }
        self.out.put_bytes(chunk.id.as_bytes());
        self.out.put_u32(chunk.length);
        self.count += 1;
        self.total = total;
        Ok(())
    }

    /// Chunks pushed so far.
    pub fn chunk_count(&self) -> u32 {
        self.count
    }

    /// Sum of the lengths pushed so far.
    pub fn total_size(&self) -> u64 {
        self.total
    }

    /// Fill in the header and return the payload, checking the whole-file
    /// rules (empty file, small file one chunk).
    pub fn finish(mut self, file_content_id: FileContentId) -> Result<Vec<u8>, FormatError> {
        check_totals(self.total, &file_content_id, self.count, self.total)?;
        let mut header = Vec::with_capacity(HEADER_LEN);
        put_header(
            &mut header,
            self.chunking_profile,
            self.total,
            &file_content_id,
            self.count,
        );
        self.out[..HEADER_LEN].copy_from_slice(&header);
        Ok(self.out)
    }
}

fn put_header(out: &mut Vec<u8>, profile: u16, total: u64, content: &FileContentId, count: u32) {
    out.put_u16(VERSION);
    out.put_u32(0);
    out.put_u8(CONTENT_CODEC_ORIGINAL);
    out.put_u16(profile);
    out.put_u64(total);
    out.put_bytes(content.as_bytes());
    out.put_u32(count);
}

fn check_header(profile: u16, total_size: u64) -> Result<(), FormatError> {
    if profile != PROFILE_FASTCDC_2020 {
        return Err(FormatError::InvalidValue {
            what: rule::PROFILE,
            value: profile.into(),
            reason: "unknown chunking profile; the only profile is 1 (FastCDC-2020)",
        });
    }
    if total_size > MAX_FILE_SIZE {
        return Err(FormatError::LimitExceeded {
            what: rule::TOTAL_SIZE,
            limit: MAX_FILE_SIZE,
            actual: total_size,
        });
    }
    Ok(())
}

fn check_chunk_length(index: usize, length: u32) -> Result<(), FormatError> {
    if length == 0 || length > MAX_CHUNK_BYTES {
        return Err(FormatError::invalid(
            rule::CHUNK_LENGTH,
            format!("chunk {index} has length {length}; lengths are 1 to {MAX_CHUNK_BYTES}"),
        ));
    }
    Ok(())
}

fn check_totals(
    total: u64,
    content: &FileContentId,
    count: u32,
    sum: u64,
) -> Result<(), FormatError> {
    if (count == 0) != (total == 0) {
        return Err(FormatError::invalid(
            rule::EMPTY_IFF_NO_CHUNKS,
            format!(
                "{count} chunks for a total size of {total}; exactly the empty file has no chunks"
            ),
        ));
    }
    if sum != total {
        return Err(FormatError::invalid(
            rule::SUM,
            format!("chunk lengths sum to {sum}, the total size is {total}"),
        ));
    }
    if (total == 0) != (*content == FileContentId::EMPTY) {
        return Err(FormatError::invalid(
            rule::EMPTY_CONTENT_ID,
            if total == 0 {
                "the empty file's content id must be blake3(\"\")"
            } else {
                "a nonempty file cannot have the empty file's content id blake3(\"\")"
            },
        ));
    }
    if total > 0 && total <= u64::from(CHUNK_MIN_BYTES) && count != 1 {
        return Err(FormatError::invalid(
            rule::SMALL_FILE_ONE_CHUNK,
            format!(
                "a file of {total} bytes (at most the profile minimum {CHUNK_MIN_BYTES}) has {count} chunks, not one"
            ),
        ));
    }
    Ok(())
}

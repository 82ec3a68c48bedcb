//! Online checkpoint manifests (seed 004, "Independent archive and
//! consolidated recovery bases": "Online checkpoints use manifest version 2
//! with a `full` flag"). The seed gives no bytes for this manifest; these
//! are Scribe's (docs/format-notes.md, "Checkpoint manifest v2").
//!
//! | item | layout |
//! |---|---|
//! | manifest `<key>.ckpt` ([`CheckpointManifest`]) | `SCRCKPT\0 ‖ u16 2 ‖ u8 flags ‖ u64 sequence ‖ identity[16] ‖ start cursor[112] ‖ end cursor[112] ‖ previous manifest digest[32] ‖ u16 file count ‖ (u16 name len ‖ name ‖ u64 size ‖ blake3[32])* ‖ blake3[32]` |
//!
//! `flags` bit 0 is `full`; the other bits are zero. A full manifest's
//! start cursor is the zero position (segment 0, offset 0, end 0, zero
//! chain) and it names exactly one logical base (`.scrb`, the seed's
//! `SCRB`) ending at the end cursor; an incremental manifest's start cursor
//! is its predecessor's end cursor and it names one frames file (`.scrf`:
//! the archive's complete frames from start to end, byte for byte) or,
//! when nothing changed (start = end), no file. Both cursors are canonical
//! 112-byte archive cursors of the manifest's identity. The previous
//! manifest digest is the BLAKE3 of the predecessor manifest's bytes (zero
//! for the first manifest of a database); a full manifest keeps the link,
//! restore stops there. File names are 1..=255 bytes of
//! `[A-Za-z0-9._-]`, not starting with `.`, in strictly ascending byte
//! order; at most [`MAX_FILES`]. The trailing checksum covers every
//! preceding byte. Integers are little endian.
//!
//! Decoders never panic and refuse with a named [`RecoveryError`].

use crate::bytes::{Put, Reader};
use crate::error::FormatError;
use crate::recovery::{ArchiveHead, RecoveryError, HEAD_LEN};

type Result<T> = std::result::Result<T, RecoveryError>;

/// Magic of a checkpoint manifest.
pub const MANIFEST_MAGIC: &[u8; 8] = b"SCRCKPT\0";
/// The manifest version the seed names.
pub const MANIFEST_VERSION: u16 = 2;
/// Most files one manifest names.
pub const MAX_FILES: usize = 16;
/// Longest file name.
pub const MAX_FILE_NAME: usize = 255;
/// Bytes before the file list.
pub const FIXED_LEN: usize = 8 + 2 + 1 + 8 + 16 + HEAD_LEN + HEAD_LEN + 32 + 2;
/// Offset of the previous manifest digest.
pub const PREVIOUS_OFFSET: usize = 8 + 2 + 1 + 8 + 16 + HEAD_LEN + HEAD_LEN;
/// Offset of the start cursor.
pub const START_OFFSET: usize = 8 + 2 + 1 + 8 + 16;
/// Flag bit: the manifest holds a full logical base.
pub const FLAG_FULL: u8 = 1;

/// One file a manifest names, in the manifest's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointFile {
    pub name: String,
    pub size: u64,
    pub digest: [u8; 32],
}

/// A checkpoint manifest (version 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointManifest {
    pub full: bool,
    /// The checkpoint's number (its directory name), from 1.
    pub sequence: u64,
    pub identity: [u8; 16],
    pub start: ArchiveHead,
    pub end: ArchiveHead,
    /// BLAKE3 of the predecessor manifest (zero: none).
    pub previous: [u8; 32],
    pub files: Vec<CheckpointFile>,
}

fn invalid(what: &'static str, reason: &str) -> RecoveryError {
    RecoveryError::Format(FormatError::Invalid {
        what,
        reason: reason.to_owned(),
    })
}

/// A file name a manifest may hold.
pub fn valid_file_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_FILE_NAME
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl CheckpointManifest {
    fn check(&self) -> Result<()> {
        let what = "checkpoint manifest";
        if self.sequence == 0 {
            return Err(invalid(what, "the sequence starts at 1"));
        }
        if self.start.identity != self.identity || self.end.identity != self.identity {
            return Err(RecoveryError::IdentityMismatch {
                expected: hex::encode(self.identity),
                found: hex::encode(if self.start.identity != self.identity {
                    self.start.identity
                } else {
                    self.end.identity
                }),
            });
        }
        if self.start.end > self.end.end {
            return Err(RecoveryError::CursorOrder {
                after: self.start.end,
                end: self.end.end,
            });
        }
        if self.files.len() > MAX_FILES {
            return Err(RecoveryError::Format(FormatError::LimitExceeded {
                what: "checkpoint manifest.file count",
                limit: MAX_FILES as u64,
                actual: self.files.len() as u64,
            }));
        }
        for (i, f) in self.files.iter().enumerate() {
            if !valid_file_name(&f.name) {
                return Err(invalid(
                    "checkpoint manifest.file name",
                    "1 to 255 bytes of [A-Za-z0-9._-], not starting with '.'",
                ));
            }
            if i > 0 && self.files[i - 1].name.as_bytes() >= f.name.as_bytes() {
                return Err(invalid(
                    "checkpoint manifest.file name",
                    "names are in strictly ascending byte order",
                ));
            }
        }
        if self.full {
            if self.start != ArchiveHead::zero(self.identity, 0) {
                return Err(invalid(
                    "checkpoint manifest.start cursor",
                    "a full manifest starts at the zero position",
                ));
            }
            if self.files.len() != 1 || !self.files[0].name.ends_with(".scrb") {
                return Err(invalid(
                    "checkpoint manifest.files",
                    "a full manifest names exactly one .scrb logical base",
                ));
            }
        } else {
            let frames = self
                .files
                .iter()
                .filter(|f| f.name.ends_with(".scrf"))
                .count();
            let want = usize::from(self.start.end != self.end.end);
            if frames != want || self.files.len() != want {
                return Err(invalid(
                    "checkpoint manifest.files",
                    "an incremental manifest names one .scrf frames file, none when start = end",
                ));
            }
            if self.start.end == self.end.end && self.start != self.end {
                return Err(invalid(
                    "checkpoint manifest.end cursor",
                    "an empty incremental ends at its start cursor",
                ));
            }
        }
        Ok(())
    }

    /// The canonical bytes.
    pub fn encode(&self) -> Result<Vec<u8>> {
        self.check()?;
        let mut out = Vec::with_capacity(FIXED_LEN + 64 * self.files.len() + 32);
        out.put_bytes(MANIFEST_MAGIC);
        out.put_u16(MANIFEST_VERSION);
        out.put_u8(if self.full { FLAG_FULL } else { 0 });
        out.put_u64(self.sequence);
        out.put_bytes(&self.identity);
        out.put_bytes(&self.start.encode());
        out.put_bytes(&self.end.encode());
        out.put_bytes(&self.previous);
        out.put_u16(self.files.len() as u16);
        for f in &self.files {
            out.put_bytes16(f.name.as_bytes());
            out.put_u64(f.size);
            out.put_bytes(&f.digest);
        }
        let sum = blake3::hash(&out);
        out.put_bytes(sum.as_bytes());
        Ok(out)
    }

    /// Decode a whole manifest file.
    pub fn decode(bytes: &[u8]) -> Result<CheckpointManifest> {
        // The checksum first: a damaged manifest is refused as such
        // whichever field the damage falls in.
        if bytes.len() < FIXED_LEN + 32 {
            return Err(FormatError::Truncated {
                what: "checkpoint manifest",
                needed: (FIXED_LEN + 32 - bytes.len()) as u64,
                available: bytes.len() as u64,
            }
            .into());
        }
        let (body, sum) = bytes.split_at(bytes.len() - 32);
        if blake3::hash(body).as_bytes() != sum {
            return Err(RecoveryError::Checksum {
                what: "checkpoint manifest",
            });
        }
        let mut r = Reader::new(bytes);
        if &r.array::<8>("checkpoint manifest.magic")? != MANIFEST_MAGIC {
            return Err(FormatError::BadMagic {
                what: "checkpoint manifest",
            }
            .into());
        }
        let version = r.u16("checkpoint manifest.version")?;
        if version != MANIFEST_VERSION {
            return Err(FormatError::UnsupportedVersion {
                what: "checkpoint manifest",
                version: version.into(),
            }
            .into());
        }
        let flags = r.u8("checkpoint manifest.flags")?;
        if flags & !FLAG_FULL != 0 {
            return Err(FormatError::InvalidValue {
                what: "checkpoint manifest.flags",
                value: flags.into(),
                reason: "only bit 0 (full) is defined",
            }
            .into());
        }
        let sequence = r.u64("checkpoint manifest.sequence")?;
        let identity: [u8; 16] = r.array("checkpoint manifest.identity")?;
        let start = ArchiveHead::decode(r.take(HEAD_LEN, "checkpoint manifest.start cursor")?)?;
        let end = ArchiveHead::decode(r.take(HEAD_LEN, "checkpoint manifest.end cursor")?)?;
        let previous: [u8; 32] = r.array("checkpoint manifest.previous digest")?;
        let count = r.u16("checkpoint manifest.file count")? as usize;
        if count > MAX_FILES {
            return Err(FormatError::LimitExceeded {
                what: "checkpoint manifest.file count",
                limit: MAX_FILES as u64,
                actual: count as u64,
            }
            .into());
        }
        let mut files = Vec::with_capacity(count);
        for _ in 0..count {
            let name = r.str16("checkpoint manifest.file name", MAX_FILE_NAME)?;
            let size = r.u64("checkpoint manifest.file size")?;
            let digest: [u8; 32] = r.array("checkpoint manifest.file digest")?;
            files.push(CheckpointFile {
                name: name.to_owned(),
                size,
                digest,
            });
        }
        let _sum: [u8; 32] = r.array("checkpoint manifest.checksum")?;
        r.finish("checkpoint manifest")?;
        let m = CheckpointManifest {
            full: flags & FLAG_FULL != 0,
            sequence,
            identity,
            start,
            end,
            previous,
            files,
        };
        m.check()?;
        Ok(m)
    }
}

/// `<20-digit sequence>`: a checkpoint's directory name.
pub fn checkpoint_dir_name(sequence: u64) -> String {
    format!("{sequence:020}")
}

/// The sequence of a checkpoint directory name (`None` for other names).
pub fn parse_checkpoint_dir_name(name: &str) -> Option<u64> {
    if name.len() != 20 || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    name.parse().ok().filter(|&n| n > 0)
}

/// Feed arbitrary bytes to every decoder of this module; panics only if a
/// decoder panics or a decoded value does not re-encode to its bytes (the
/// entry point of the `checkpoint` fuzz target).
#[doc(hidden)]
pub fn fuzz_decoders(data: &[u8]) {
    if let Ok(m) = CheckpointManifest::decode(data) {
        assert_eq!(m.encode().expect("a decoded manifest re-encodes"), data);
    }
    if let Ok(s) = std::str::from_utf8(data) {
        if let Some(n) = parse_checkpoint_dir_name(s) {
            assert_eq!(checkpoint_dir_name(n), s);
        }
    }
}

//! Identifiers and hashing (specification section 1).
//!
//! Random identifiers are 16 OS-random bytes, never derived from names.
//! Content identities are full BLAKE3-256 digests, some under a domain
//! prefix. Hex renderings are lowercase; parsing accepts lowercase only, so
//! every identity has exactly one spelling.

use std::fmt;
use std::str::FromStr;

use crate::error::FormatError;

/// Domain prefix of [`ManifestId`].
pub const MANIFEST_DOMAIN: &[u8] = b"scribe:manifest:v1\0";
/// Domain prefix of [`ChangeSetId`].
pub const CHANGE_SET_DOMAIN: &[u8] = b"scribe:changeset:v1\0";
/// Domain prefix of the operation fingerprint (section 8).
pub const OPERATION_FINGERPRINT_DOMAIN: &[u8] = b"scribe:operation-fingerprint:v3\0";

/// BLAKE3 of `domain ‖ bytes`.
pub fn hash_with_domain(domain: &[u8], bytes: &[u8]) -> [u8; 32] {
    let mut hasher = blake3::Hasher::new();
    hasher.update(domain);
    hasher.update(bytes);
    *hasher.finalize().as_bytes()
}

fn parse_hex<const N: usize>(s: &str, what: &'static str) -> Result<[u8; N], FormatError> {
    if s.len() != N * 2 {
        return Err(FormatError::InvalidValue {
            what,
            value: s.len() as u64,
            reason: "wrong number of hex digits",
        });
    }
    if s.bytes().any(|b| b.is_ascii_uppercase()) {
        return Err(FormatError::invalid(what, "hex must be lowercase"));
    }
    let mut out = [0u8; N];
    hex::decode_to_slice(s, &mut out).map_err(|_| FormatError::invalid(what, "not hex"))?;
    Ok(out)
}

macro_rules! byte_id {
    ($(#[$doc:meta])* $name:ident, $len:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $name(pub [u8; $len]);

        impl $name {
            /// Length in bytes.
            pub const LEN: usize = $len;

            /// The raw bytes.
            pub const fn as_bytes(&self) -> &[u8; $len] {
                &self.0
            }

            /// Lowercase hex.
            pub fn to_hex(&self) -> String {
                hex::encode(self.0)
            }

            /// Parse exactly the lowercase hex rendering.
            pub fn from_hex(s: &str) -> Result<Self, FormatError> {
                parse_hex::<$len>(s, stringify!($name)).map($name)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.to_hex())
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.to_hex())
            }
        }

        impl FromStr for $name {
            type Err = FormatError;
            fn from_str(s: &str) -> Result<Self, FormatError> {
                Self::from_hex(s)
            }
        }

        impl From<[u8; $len]> for $name {
            fn from(bytes: [u8; $len]) -> Self {
                $name(bytes)
            }
        }
    };
}

macro_rules! random_id {
    ($(#[$doc:meta])* $name:ident) => {
        byte_id!($(#[$doc])* $name, 16);

        impl $name {
            /// A fresh identifier from the operating system's random source.
            pub fn random() -> Self {
                let mut bytes = [0u8; 16];
                getrandom::fill(&mut bytes).expect("the OS random source is available because every supported platform has one");
                $name(bytes)
            }
        }
    };
}

random_id!(
    /// A repository, fixed at creation.
    RepositoryId
);
random_id!(
    /// A branch of a repository.
    BranchId
);
random_id!(
    /// A registered workspace; chosen by the client.
    WorkspaceId
);
random_id!(
    /// One client operation, retried with the same id.
    OperationId
);

byte_id!(
    /// `blake3(chunk bytes)`.
    ChunkId, 32
);
byte_id!(
    /// `blake3(complete file bytes)`, computed while streaming.
    FileContentId, 32
);
byte_id!(
    /// `blake3("scribe:manifest:v1\0" ‖ manifest payload)`.
    ManifestId, 32
);
byte_id!(
    /// `blake3("scribe:changeset:v1\0" ‖ change set payload)`.
    ChangeSetId, 32
);
byte_id!(
    /// `blake3(prefix of the envelope's version ‖ commit envelope)`.
    CommitId, 32
);

impl ChunkId {
    /// The identity of chunk bytes.
    pub fn of(bytes: &[u8]) -> Self {
        ChunkId(*blake3::hash(bytes).as_bytes())
    }
}

impl FileContentId {
    /// The identity of the empty file, `blake3("")`.
    pub const EMPTY: FileContentId = FileContentId([
        0xaf, 0x13, 0x49, 0xb9, 0xf5, 0xf9, 0xa1, 0xa6, 0xa0, 0x40, 0x4d, 0xea, 0x36, 0xdc, 0xc9,
        0x49, 0x9b, 0xcb, 0x25, 0xc9, 0xad, 0xc1, 0x12, 0xb7, 0xcc, 0x9a, 0x93, 0xca, 0xe4, 0x1f,
        0x32, 0x62,
    ]);

    /// The identity of complete file bytes held in memory.
    pub fn of(bytes: &[u8]) -> Self {
        FileContentId(*blake3::hash(bytes).as_bytes())
    }
}

impl ManifestId {
    /// The identity of a manifest payload.
    pub fn of_payload(payload: &[u8]) -> Self {
        ManifestId(hash_with_domain(MANIFEST_DOMAIN, payload))
    }
}

impl ChangeSetId {
    /// The identity of a change set payload.
    pub fn of_payload(payload: &[u8]) -> Self {
        ChangeSetId(hash_with_domain(CHANGE_SET_DOMAIN, payload))
    }
}

/// The kind byte of an [`ObjectId`] and of an envelope.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ObjectKind {
    Chunk = 1,
    Manifest = 2,
    ChangeSet = 3,
    Commit = 4,
}

impl ObjectKind {
    /// Every kind, in numeric order.
    pub const ALL: [ObjectKind; 4] = [
        ObjectKind::Chunk,
        ObjectKind::Manifest,
        ObjectKind::ChangeSet,
        ObjectKind::Commit,
    ];

    /// The kind byte.
    pub const fn byte(self) -> u8 {
        self as u8
    }

    /// The kind with this byte.
    pub fn from_byte(byte: u8) -> Result<Self, FormatError> {
        match byte {
            1 => Ok(ObjectKind::Chunk),
            2 => Ok(ObjectKind::Manifest),
            3 => Ok(ObjectKind::ChangeSet),
            4 => Ok(ObjectKind::Commit),
            v => Err(FormatError::InvalidValue {
                what: "object kind",
                value: v.into(),
                reason: "kinds are 1 chunk, 2 manifest, 3 change set, 4 commit",
            }),
        }
    }

    /// Lowercase name used in messages.
    pub const fn name(self) -> &'static str {
        match self {
            ObjectKind::Chunk => "chunk",
            ObjectKind::Manifest => "manifest",
            ObjectKind::ChangeSet => "change-set",
            ObjectKind::Commit => "commit",
        }
    }
}

/// The physical key of a stored object: `kind u8 ‖ digest[32]`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId {
    pub kind: ObjectKind,
    pub digest: [u8; 32],
}

impl ObjectId {
    /// Length of the key in bytes.
    pub const LEN: usize = 33;

    pub const fn new(kind: ObjectKind, digest: [u8; 32]) -> Self {
        ObjectId { kind, digest }
    }

    pub const fn chunk(id: ChunkId) -> Self {
        ObjectId::new(ObjectKind::Chunk, id.0)
    }

    pub const fn manifest(id: ManifestId) -> Self {
        ObjectId::new(ObjectKind::Manifest, id.0)
    }

    pub const fn change_set(id: ChangeSetId) -> Self {
        ObjectId::new(ObjectKind::ChangeSet, id.0)
    }

    pub const fn commit(id: CommitId) -> Self {
        ObjectId::new(ObjectKind::Commit, id.0)
    }

    /// The 33-byte key.
    pub fn to_bytes(&self) -> [u8; 33] {
        let mut out = [0u8; 33];
        out[0] = self.kind.byte();
        out[1..].copy_from_slice(&self.digest);
        out
    }

    /// Parse a 33-byte key.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, FormatError> {
        if bytes.len() != 33 {
            return Err(FormatError::InvalidValue {
                what: "object id",
                value: bytes.len() as u64,
                reason: "an object id is 33 bytes",
            });
        }
        let kind = ObjectKind::from_byte(bytes[0])?;
        let mut digest = [0u8; 32];
        digest.copy_from_slice(&bytes[1..]);
        Ok(ObjectId { kind, digest })
    }

    /// Lowercase hex of all 33 bytes (kind first).
    pub fn to_hex(&self) -> String {
        hex::encode(self.to_bytes())
    }

    /// Parse the 66-digit lowercase hex rendering.
    pub fn from_hex(s: &str) -> Result<Self, FormatError> {
        let bytes = parse_hex::<33>(s, "object id")?;
        ObjectId::from_bytes(&bytes)
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind.name(), hex::encode(self.digest))
    }
}

impl fmt::Debug for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectId({self})")
    }
}

impl FromStr for ObjectId {
    type Err = FormatError;
    fn from_str(s: &str) -> Result<Self, FormatError> {
        ObjectId::from_hex(s)
    }
}

/// The identity domain of a commit envelope with this version word
/// (`scribe:commit:v<N>\0`, section 4.3). Version 4 has a domain but no
/// reader; unknown versions have none.
pub fn commit_domain(version: u16) -> Option<&'static [u8]> {
    match version {
        1 => Some(b"scribe:commit:v1\0"),
        2 => Some(b"scribe:commit:v2\0"),
        3 => Some(b"scribe:commit:v3\0"),
        4 => Some(b"scribe:commit:v4\0"),
        5 => Some(b"scribe:commit:v5\0"),
        _ => None,
    }
}

/// Streams an object's original payload into the digest its kind defines.
///
/// Chunks hash bare bytes; manifests and change sets hash under their
/// domain; commits hash under the domain of their leading version word,
/// which is why the first two bytes are held back until known.
pub struct IdentityHasher {
    kind: ObjectKind,
    hasher: Option<blake3::Hasher>,
    head: Vec<u8>,
}

impl IdentityHasher {
    pub fn new(kind: ObjectKind) -> Self {
        let hasher = match kind {
            ObjectKind::Chunk => Some(blake3::Hasher::new()),
            ObjectKind::Manifest => {
                let mut h = blake3::Hasher::new();
                h.update(MANIFEST_DOMAIN);
                Some(h)
            }
            ObjectKind::ChangeSet => {
                let mut h = blake3::Hasher::new();
                h.update(CHANGE_SET_DOMAIN);
                Some(h)
            }
            ObjectKind::Commit => None,
        };
        IdentityHasher {
            kind,
            hasher,
            head: Vec::new(),
        }
    }

    pub fn update(&mut self, mut bytes: &[u8]) -> Result<(), FormatError> {
        if self.hasher.is_none() {
            let need = 2 - self.head.len();
            let take = need.min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.head.len() < 2 {
                return Ok(());
            }
            let version = u16::from_le_bytes([self.head[0], self.head[1]]);
            let domain = commit_domain(version).ok_or(FormatError::UnsupportedVersion {
                what: "commit envelope",
                version: version.into(),
            })?;
            let mut h = blake3::Hasher::new();
            h.update(domain);
            h.update(&self.head);
            self.hasher = Some(h);
        }
        if let Some(h) = self.hasher.as_mut() {
            h.update(bytes);
        }
        Ok(())
    }

    pub fn finish(self) -> Result<ObjectId, FormatError> {
        match self.hasher {
            Some(h) => Ok(ObjectId::new(self.kind, *h.finalize().as_bytes())),
            None => Err(FormatError::Truncated {
                what: "commit envelope version",
                needed: 2,
                available: self.head.len() as u64,
            }),
        }
    }
}

/// The identity of a complete original payload of `kind`.
pub fn object_identity(kind: ObjectKind, payload: &[u8]) -> Result<ObjectId, FormatError> {
    if kind == ObjectKind::Chunk && payload.len() >= 1 << 17 {
        // Large chunks: BLAKE3's multithreaded tree hashing.
        let mut h = blake3::Hasher::new();
        h.update_rayon(payload);
        return Ok(ObjectId::new(kind, *h.finalize().as_bytes()));
    }
    let mut h = IdentityHasher::new(kind);
    h.update(payload)?;
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_id_is_blake3_of_nothing() {
        assert_eq!(FileContentId::of(b""), FileContentId::EMPTY);
        assert!(FileContentId::EMPTY.to_hex().starts_with("af1349b9"));
        assert!(FileContentId::EMPTY.to_hex().ends_with("f3262"));
    }

    #[test]
    fn domains_separate_identities() {
        let payload = b"same bytes";
        assert_ne!(
            ManifestId::of_payload(payload).0,
            ChangeSetId::of_payload(payload).0
        );
        assert_ne!(
            ManifestId::of_payload(payload).0,
            *blake3::hash(payload).as_bytes()
        );
    }

    #[test]
    fn hex_round_trips_and_refuses_uppercase() {
        let id = RepositoryId::random();
        assert_eq!(RepositoryId::from_hex(&id.to_hex()).unwrap(), id);
        assert!(
            RepositoryId::from_hex(&id.to_hex().to_uppercase()).is_err()
                || id.to_hex().bytes().all(|b| b.is_ascii_digit())
        );
        assert!(RepositoryId::from_hex("abc").is_err());
        assert!(RepositoryId::from_hex(&"g".repeat(32)).is_err());
        assert!(ChunkId::from_hex(&"A".repeat(64)).is_err());
    }

    #[test]
    fn random_ids_differ() {
        assert_ne!(WorkspaceId::random(), WorkspaceId::random());
    }

    #[test]
    fn object_id_bytes_and_hex() {
        let id = ObjectId::manifest(ManifestId([7; 32]));
        let bytes = id.to_bytes();
        assert_eq!(bytes[0], 2);
        assert_eq!(ObjectId::from_bytes(&bytes).unwrap(), id);
        assert_eq!(ObjectId::from_hex(&id.to_hex()).unwrap(), id);
        assert!(ObjectId::from_bytes(&[5; 33]).is_err());
        assert!(ObjectId::from_bytes(&[1; 32]).is_err());
    }
}

//! The storage trait the Workbench facade runs over: a versioned tree of
//! paths with atomic, numbered, idempotent publications. [`crate::scribe`]
//! implements it over Scribe's client library; every version number is a
//! Scribe change number.

use crate::error::WbError;

/// An immutable body already stored (reused by restore without copying).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BodyRef {
    /// The store's own identity of the body (Scribe: the manifest id).
    pub handle: Vec<u8>,
    /// The store's content hash of the whole body (Scribe: BLAKE3).
    pub content: [u8; 32],
    pub size: u64,
}

/// One live path at a version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// The full path in the store (`<id>/<section>/<path>`).
    pub path: String,
    /// The version that last published this path's body: its generation.
    pub generation: u64,
    pub body: BodyRef,
}

/// One page of a directory's direct children.
#[derive(Clone, Debug, Default)]
pub struct DirPage {
    /// The version read.
    pub at: u64,
    pub files: Vec<Row>,
    /// Child directories (full paths).
    pub dirs: Vec<String>,
    /// The continuation token, when more children follow.
    pub next: Option<String>,
}

/// A body to publish.
#[derive(Clone, Debug)]
pub enum NewBody {
    Bytes(Vec<u8>),
    /// Bytes with their BLAKE3 already computed by the caller (collect
    /// hashes every file to compare it; the store does not hash it again).
    Hashed {
        bytes: Vec<u8>,
        content: [u8; 32],
    },
    Existing(BodyRef),
    /// A body the store assembled itself: [`Store::upload_files`] (its
    /// pieces already uploaded for this publication's operation) or
    /// [`Store::appended`] (most pieces already stored). `extra` is the
    /// store's own description of it still to send with the publication
    /// (Scribe: the manifest); `pieces` are the new pieces it still has to
    /// send (Scribe: chunks; none after `upload_files`).
    Uploaded {
        body: BodyRef,
        extra: Vec<u8>,
        pieces: Vec<Vec<u8>>,
    },
}

/// A local file's body as [`Store::upload_files`] left it.
#[derive(Clone, Debug)]
pub struct UploadedFile {
    /// BLAKE3 of the file's bytes.
    pub content: [u8; 32],
    pub size: u64,
    /// What to publish ([`NewBody::Uploaded`], or the bytes for a store
    /// that does not upload ahead).
    pub body: NewBody,
}

/// One path's change in a publication.
#[derive(Clone, Debug)]
pub enum Edit {
    /// Create (`base` 0) or replace the body whose generation is `base`.
    Put {
        path: String,
        base: u64,
        body: NewBody,
    },
    Delete {
        path: String,
        base: u64,
    },
}

/// An atomic publication: every edit or none.
#[derive(Clone, Debug)]
pub struct Publish {
    /// The operation id; a retry with the same id returns the stored
    /// outcome and publishes nothing.
    pub operation: [u8; 16],
    pub message: String,
    pub edits: Vec<Edit>,
    pub timestamp_ms: u64,
}

/// Why a publication was refused (nothing was published).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A base did not match the path's current generation.
    Stale(Vec<String>),
    /// A create found the path present.
    Exists(Vec<String>),
    /// Another workspace (a person) holds a lock on a path.
    Locked(Vec<String>),
    /// A path collides with another (case folding, file/directory).
    Collision(Vec<String>),
    /// Anything else, with the store's code name and detail.
    Other { code: String, detail: String },
}

/// The result of [`Store::publish`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Published {
    Accepted { version: u64 },
    Refused(Refusal),
}

/// What a version records about the publication that made it.
#[derive(Clone, Debug)]
pub struct VersionInfo {
    pub version: u64,
    pub operation: [u8; 16],
    pub message: String,
    pub timestamp_ms: u64,
    pub author: String,
}

/// The storage a [`crate::Workbench`] runs over.
pub trait Store {
    /// A stable name of the agent root (request identities include it).
    fn root_name(&self) -> String;
    /// The newest version.
    fn head(&mut self) -> Result<u64, WbError>;
    /// The live path `path` at version `at` (0: the newest).
    fn stat(&mut self, at: u64, path: &str) -> Result<Option<Row>, WbError>;
    /// Direct children of directory `dir` at `at`, after `token`.
    fn list_dir(&mut self, at: u64, dir: &str, token: &str, limit: u32)
        -> Result<DirPage, WbError>;
    /// Every live file below directory `dir` at `at` (recursive), after
    /// `token`; the version read and the next token.
    fn list_files(
        &mut self,
        at: u64,
        dir: &str,
        token: &str,
        limit: u32,
    ) -> Result<DirPage, WbError>;
    /// Bytes `[offset, offset + len)` of a body (fewer at its end).
    fn read(&mut self, body: &BodyRef, offset: u64, len: u64) -> Result<Vec<u8>, WbError>;
    /// The body of `base` followed by `delta`, to publish. The default
    /// reads `base` whole; a store that keeps bodies in pieces reuses the
    /// unchanged ones and holds only a piece at a time.
    fn appended(&mut self, base: &BodyRef, delta: &[u8]) -> Result<NewBody, WbError> {
        let mut bytes = self.read(base, 0, base.size)?;
        bytes.extend_from_slice(delta);
        Ok(NewBody::Bytes(bytes))
    }
    /// Publish atomically.
    fn publish(&mut self, p: Publish) -> Result<Published, WbError>;
    /// The publication that made `version`.
    fn version_info(&mut self, version: u64) -> Result<VersionInfo, WbError>;
    /// [`Store::version_info`] of each of `versions`, in order (a store may
    /// ask for them on several connections at once).
    fn version_infos(&mut self, versions: &[u64]) -> Result<Vec<VersionInfo>, WbError> {
        versions.iter().map(|v| self.version_info(*v)).collect()
    }
    /// Whether a path under `dir` changed in `(from, to]`.
    fn changed_under(&mut self, dir: &str, from: u64, to: u64) -> Result<bool, WbError>;
    /// Upload the bodies of local files (what the store lacks) for the
    /// publication whose operation is `operation`, reading each file
    /// once; results in the order of `files`. The default reads each file
    /// into memory and uploads nothing ahead.
    fn upload_files(
        &mut self,
        operation: [u8; 16],
        files: &[std::path::PathBuf],
    ) -> Result<Vec<UploadedFile>, WbError> {
        let _ = operation;
        files
            .iter()
            .map(|p| {
                let bytes = std::fs::read(p)
                    .map_err(|e| WbError::new("storage", format!("{}: {e}", p.display())))?;
                let content = *blake3::hash(&bytes).as_bytes();
                Ok(UploadedFile {
                    content,
                    size: bytes.len() as u64,
                    body: NewBody::Hashed { bytes, content },
                })
            })
            .collect()
    }
}

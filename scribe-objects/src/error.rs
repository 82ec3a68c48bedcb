//! The one error type of the object store.

use std::path::PathBuf;

use scribe_format::{FormatError, ObjectId};

/// Why an object-store operation failed. Every variant names the object,
/// path or offset that explains it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// An operating-system I/O error on a path.
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The locator database failed.
    #[error("locator database {path}: {source}")]
    Locator {
        path: PathBuf,
        #[source]
        source: Box<redb::Error>,
    },
    /// The `SCRIBE_FORMAT` descriptor is missing, malformed or not an object store.
    #[error("object-store descriptor {path}: {reason}")]
    Descriptor { path: PathBuf, reason: String },
    /// The descriptor names a version this build does not know.
    #[error("{path}: {what} {found} is not supported (this build reads {supported}); run `scribe-server migrate`")]
    UnexpectedVersion {
        path: PathBuf,
        what: &'static str,
        found: String,
        supported: String,
    },
    /// The descriptor requires a feature this build does not know.
    #[error("{path}: required feature {feature:?} is not supported by this build")]
    UnsupportedFeature { path: PathBuf, feature: String },
    /// A store already exists where one was to be created.
    #[error("an object store already exists at {path}")]
    AlreadyExists { path: PathBuf },
    /// The requested object is not in the store.
    #[error("object {id} is not in the store")]
    NotFound { id: ObjectId },
    /// Stored bytes of an object are damaged: bad framing, a decode error or
    /// an identity mismatch. The data was not returned.
    #[error("object {id} is corrupt ({location}): {reason}")]
    CorruptObject {
        id: ObjectId,
        location: String,
        reason: String,
    },
    /// A locator row cannot be decoded.
    #[error("locator row for {key} is malformed: {reason}")]
    CorruptLocatorRow { key: String, reason: String },
    /// A pack file is damaged or inconsistent with the locator.
    #[error("pack {path} at offset {offset}: {reason}")]
    CorruptPack {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
    /// A loose file is damaged.
    #[error("loose object file {path}: {reason}")]
    CorruptLoose { path: PathBuf, reason: String },
    /// An object's bytes were refused by the format layer.
    #[error("object {id}: {source}")]
    Format {
        id: ObjectId,
        #[source]
        source: FormatError,
    },
    /// Bytes offered to the store are not a valid envelope or do not match their id.
    #[error("refused to store {id}: {reason}")]
    InvalidInput { id: ObjectId, reason: String },
    /// A manifest is malformed.
    #[error("manifest {id}: {reason}")]
    CorruptManifest { id: ObjectId, reason: String },
    /// A reconstructed file does not have the content its manifest names.
    #[error("reconstructing {path} from manifest {manifest}: {reason}")]
    Reconstruct {
        manifest: ObjectId,
        path: PathBuf,
        reason: String,
    },
    /// A ranged read outside the object.
    #[error("range {offset}+{len} is outside object {id} of {size} bytes")]
    RangeOutOfBounds {
        id: ObjectId,
        offset: u64,
        len: u64,
        size: u64,
    },
    /// A file is too large for the format.
    #[error("{path}: {size} bytes exceeds the file limit of {limit}")]
    FileTooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
    },
    /// A compaction marker is pending: open, rebuild and a new compaction refuse.
    #[error("object compaction marker {path} is pending; rerun `scribe-server compact-objects` to complete the swap")]
    CompactionPending { path: PathBuf },
    /// Compaction refused (malformed marker, changed boundary, missing live object, ...).
    #[error("compaction refused: {reason}")]
    CompactionRefused { reason: String },
    /// An internal invariant failed (a bug: a worker thread panicked, ...).
    #[error("internal error: {0}")]
    Internal(&'static str),
    /// A [`crate::ChunkSink`] refused a chunk (it carries its own reason).
    #[error("the import's chunk consumer stopped: {reason}")]
    SinkStopped { reason: String },
    /// A failure injected by a test failpoint.
    #[error("injected failure at {0}")]
    Injected(&'static str),
}

/// Result alias of this crate.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

pub(crate) fn io_err(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> StoreError {
    let path = path.into();
    move |source| StoreError::Io { path, source }
}

pub(crate) fn db_err<E: Into<redb::Error>>(
    path: &std::path::Path,
) -> impl FnOnce(E) -> StoreError + '_ {
    move |e| StoreError::Locator {
        path: path.to_path_buf(),
        source: Box::new(e.into()),
    }
}

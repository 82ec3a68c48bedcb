//! The one error type of this crate.
//!
//! Refusals a client can act on carry a registry [`ErrorCode`]
//! ([`MetadataError::code`]); everything else maps to `internal`,
//! `corrupt` or `unsupported_version`.

use std::path::PathBuf;

use scribe_format::{ErrorCode, FormatError};

/// Why a metadata operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MetadataError {
    /// Another process owns the data root's `LOCK`.
    #[error("data root {} is in use by another process{}", path.display(), pid_suffix(*pid))]
    DataRootLocked { path: PathBuf, pid: Option<u32> },
    /// A descriptor or database marker names a version this build does not serve.
    #[error("{}: {what} is {found}, this build serves {expected}; run `scribe-server migrate`", path.display())]
    VersionMismatch {
        path: PathBuf,
        what: &'static str,
        found: String,
        expected: String,
    },
    /// A descriptor requires a feature this build does not know.
    #[error("{}: required feature {feature:?} is not supported by this build", path.display())]
    UnsupportedFeature { path: PathBuf, feature: String },
    /// A request refused by repository state or by its own shape.
    #[error("{code}: {detail}")]
    Refused { code: ErrorCode, detail: String },
    /// Stored metadata that does not decode or contradicts itself.
    #[error("corrupt metadata: {0}")]
    Corrupt(String),
    /// A file-system failure.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A database failure.
    #[error("database: {0}")]
    Db(#[from] redb::Error),
    /// Bytes refused by a format decoder.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// The object store hook failed.
    #[error("object store: {0}")]
    Objects(String),
    /// A publication-gate invariant was violated; nothing was written.
    #[error("publication gate: {0}")]
    Gate(String),
    /// A store without metadata recovery journal profile 2 (created by an
    /// earlier build); there is no converter.
    #[error("{}: {what}: the store predates metadata recovery journal profile 2 (`recovery-journal-v2`); there is no converter: recreate it or restore a backup made by this build", path.display())]
    RecoveryProfileMissing { path: PathBuf, what: String },
    /// Recovery journal bytes refused (a record, a segment, a cursor); names
    /// the file and the byte offset where the refusal applies.
    #[error("{}: at byte {offset}: {source}", path.display())]
    Recovery {
        path: PathBuf,
        offset: u64,
        #[source]
        source: scribe_format::recovery::RecoveryError,
    },
}

fn pid_suffix(pid: Option<u32>) -> String {
    match pid {
        Some(pid) => format!(" (held by pid {pid})"),
        None => String::new(),
    }
}

impl MetadataError {
    /// The registry code peers and users see.
    pub fn code(&self) -> ErrorCode {
        match self {
            MetadataError::DataRootLocked { .. } => ErrorCode::Busy,
            MetadataError::VersionMismatch { .. } => ErrorCode::UnsupportedVersion,
            MetadataError::RecoveryProfileMissing { .. } => ErrorCode::UnsupportedVersion,
            MetadataError::Recovery { source, .. } => source.code(),
            MetadataError::UnsupportedFeature { .. } => ErrorCode::UnsupportedFeature,
            MetadataError::Refused { code, .. } => *code,
            MetadataError::Corrupt(_) => ErrorCode::Corrupt,
            MetadataError::Format(e) => e.code(),
            _ => ErrorCode::Internal,
        }
    }

    pub(crate) fn refused(code: ErrorCode, detail: impl Into<String>) -> Self {
        MetadataError::Refused {
            code,
            detail: detail.into(),
        }
    }

    pub(crate) fn corrupt(detail: impl Into<String>) -> Self {
        MetadataError::Corrupt(detail.into())
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        MetadataError::Io {
            path: path.into(),
            source,
        }
    }
}

macro_rules! from_redb {
    ($($t:ty),*) => {$(
        impl From<$t> for MetadataError {
            fn from(e: $t) -> Self {
                MetadataError::Db(redb::Error::from(e))
            }
        }
    )*};
}
from_redb!(
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError,
    redb::SetDurabilityError
);

/// Result with [`MetadataError`].
pub type Result<T, E = MetadataError> = std::result::Result<T, E>;

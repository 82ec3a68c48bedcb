//! Errors of the workspace state layer.

use std::path::PathBuf;

use scribe_format::{Concern, ErrorCode, FormatError};

use crate::sync::WriteError;

/// Why a workspace operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkspaceError {
    #[error("no Scribe workspace at or above {start}")]
    NotAWorkspace { start: PathBuf },
    #[error("{path} is already a Scribe workspace")]
    AlreadyAWorkspace { path: PathBuf },
    #[error("the workspace at {root} is in use by another scribe process{}", pid.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    Busy { root: PathBuf, pid: Option<u32> },
    #[error("workspace descriptor {path}: {source}")]
    Descriptor { path: PathBuf, source: FormatError },
    /// The workspace state was written by another scribe: a newer one
    /// (`found` above `supported`) or an older one.
    #[error("workspace schema {found} is not supported by this build (it reads {supported}): {}", schema_advice(*found, *supported))]
    UnsupportedSchema { found: u32, supported: u32 },
    #[error("workspace state row {table}/{key}: {source}")]
    Corrupt {
        table: &'static str,
        key: String,
        source: FormatError,
    },
    /// `state.redb` is damaged: it cannot be opened, redb finds it
    /// corrupt, or a row does not decode. Nothing in the working copy was
    /// changed; the CLI says what to do (`workspace_state_damaged`).
    #[error("workspace state {} is damaged: {detail}", path.display())]
    StateDamaged { path: PathBuf, detail: String },
    #[error("workspace state is missing {key}")]
    MissingMeta { key: &'static str },
    #[error("a sync to change {target} is unfinished")]
    JournalInProgress { target: u64 },
    #[error("no sync is in progress")]
    NoJournal,
    #[error("the sync journal still has work for {path}")]
    JournalUnfinished { path: String },
    /// The bytes of `path` could not be written; `cause` keeps the code of
    /// what failed (this machine's disk, the server's connection, ...).
    #[error("could not write {path}: {cause}")]
    Materialize { path: String, cause: WriteError },
    /// A workflow refused by workspace state, with its registered code and,
    /// where known, what it concerns (what to do next is the command
    /// line's business).
    #[error("{path}: {detail}")]
    Refused {
        code: ErrorCode,
        path: String,
        detail: String,
        concern: Option<Concern>,
    },
    #[error("workspace database: {0}")]
    Database(#[from] redb::Error),
    /// The workspace cache (`.scribe/_state/cache/`) could not be opened or
    /// created.
    #[error("workspace cache: {0}")]
    Cache(#[source] scribe_objects::StoreError),
    /// The workspace cache was written by another scribe (its store
    /// descriptor records a version this build does not read).
    #[error("workspace cache {}: {what} {found} is not supported by this build (it reads {supported}): another scribe wrote this cache; use that scribe here, or create a new workspace with this one", path.display())]
    UnsupportedCache {
        path: PathBuf,
        what: &'static str,
        found: String,
        supported: String,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What to do about a workspace of another schema.
fn schema_advice(found: u32, supported: u32) -> &'static str {
    if found > supported {
        "a newer scribe wrote this workspace; use that scribe (or a newer one) here, or create a new workspace with this one"
    } else {
        "an older scribe wrote this workspace; use that scribe here, or create a new workspace with this one"
    }
}

impl WorkspaceError {
    pub(crate) fn refused(
        code: ErrorCode,
        path: impl Into<String>,
        detail: impl Into<String>,
    ) -> WorkspaceError {
        WorkspaceError::Refused {
            code,
            path: path.into(),
            detail: detail.into(),
            concern: None,
        }
    }

    /// [`WorkspaceError::refused`] about `concern`.
    pub(crate) fn refused_about(
        code: ErrorCode,
        concern: Concern,
        path: impl Into<String>,
        detail: impl Into<String>,
    ) -> WorkspaceError {
        WorkspaceError::Refused {
            code,
            path: path.into(),
            detail: detail.into(),
            concern: Some(concern),
        }
    }

    /// `path` could not be written for a reason other than its bytes (a
    /// file in the way, a name this system cannot hold): refused.
    pub(crate) fn unwritable(path: impl Into<String>, detail: impl Into<String>) -> WorkspaceError {
        WorkspaceError::Materialize {
            path: path.into(),
            cause: WriteError::new(ErrorCode::Refused, detail),
        }
    }

    /// What this error concerns, where the code that raised it knows.
    pub fn concern(&self) -> Option<Concern> {
        match self {
            WorkspaceError::Refused { concern, .. } => concern.clone(),
            WorkspaceError::Materialize { cause, .. } if cause.disk_full => Some(Concern::DiskFull),
            WorkspaceError::Io { source, .. } if scribe_format::concern::is_disk_full(source) => {
                Some(Concern::DiskFull)
            }
            // redb's own I/O variant does not give its cause as a source.
            WorkspaceError::Database(redb::Error::Io(e))
                if scribe_format::concern::is_disk_full(e) =>
            {
                Some(Concern::DiskFull)
            }
            WorkspaceError::Database(d) if scribe_format::concern::caused_by_full_disk(d) => {
                Some(Concern::DiskFull)
            }
            _ => None,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> WorkspaceError {
        let path = path.into();
        move |source| WorkspaceError::Io { path, source }
    }
}

macro_rules! from_redb {
    ($($t:ty),*) => {$(
        impl From<$t> for WorkspaceError {
            fn from(e: $t) -> Self {
                WorkspaceError::Database(e.into())
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

pub type Result<T, E = WorkspaceError> = std::result::Result<T, E>;

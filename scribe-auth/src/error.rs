//! Errors of the auth data directory, each with a registry code.

use std::path::PathBuf;

use scribe_format::{ErrorCode, FormatError};

/// Why an auth directory operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// A file or directory could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Another process holds the directory's `LOCK`.
    #[error("{} is in use by another process{}: stop it first", path.display(), pid.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    Locked { path: PathBuf, pid: Option<u32> },
    /// No `SCRIBE_AUTH` marker: not an auth directory, or an interrupted init/restore.
    #[error("{} is not a scribe-auth directory (no SCRIBE_AUTH marker; an interrupted init or restore leaves none: remove the directory and run it again)", path.display())]
    NotAnAuthDirectory { path: PathBuf },
    /// The marker names schema 3: `scribe-auth migrate` must run first.
    #[error("{} is an auth directory at schema 3; run `scribe-auth migrate --data {}` first", path.display(), path.display())]
    NeedsMigration { path: PathBuf },
    /// A marker this build does not read.
    #[error("{}: unsupported SCRIBE_AUTH marker {found:?}", path.display())]
    UnsupportedMarker { path: PathBuf, found: String },
    /// `init` or `restore` into a directory that holds an auth directory.
    #[error("{} already holds an auth directory", path.display())]
    AlreadyInitialized { path: PathBuf },
    /// `init` found a revision witness (it belongs to another directory).
    #[error("the revision witness {} exists already; init never replaces one", path.display())]
    WitnessExists { path: PathBuf },
    /// The revision witness is missing at startup.
    #[error("the revision witness {} is missing; restore from a backup to start a new incarnation", path.display())]
    WitnessMissing { path: PathBuf },
    /// The revision witness is not `<32 hex> <decimal>\n`.
    #[error("the revision witness {} is malformed: {reason}", path.display())]
    WitnessMalformed { path: PathBuf, reason: String },
    /// The witness names another incarnation than the database.
    #[error("the revision witness {} belongs to incarnation {witness}, the database is incarnation {database}", path.display())]
    WitnessIncarnation {
        path: PathBuf,
        witness: String,
        database: String,
    },
    /// The database is behind the witness: an older `auth.redb` was put back.
    #[error("auth.redb is at revision {database} but the revision witness {} has seen {witness}: an older copy was put back (restore a backup with `scribe-auth restore` instead)", path.display())]
    RolledBack {
        path: PathBuf,
        database: u64,
        witness: u64,
    },
    /// The pepper file is not the one the directory was created with.
    #[error("the pepper {} is not the one this directory was created with", path.display())]
    PepperMismatch { path: PathBuf },
    /// The pepper file is unusable (size).
    #[error("the pepper {} is invalid: {reason}", path.display())]
    PepperInvalid { path: PathBuf, reason: String },
    /// The pepper file can be read (or written) by users other than its
    /// owner and group (Unix): a secret every local account could copy.
    #[error(
        "the pepper {} is readable by other users (mode {mode:04o}): run `chmod 600 {}` \
         (640 for a group the service runs in), then start again",
        path.display(),
        path.display()
    )]
    PepperExposed { path: PathBuf, mode: u32 },
    /// A password that the policy refuses.
    #[error("invalid password: {0}")]
    InvalidPassword(String),
    /// A value (name, trust domain, argument) that is not acceptable.
    #[error("invalid {what}: {reason}")]
    Invalid { what: &'static str, reason: String },
    /// A schema-3 directory cannot be converted by this build.
    #[error("{0}")]
    MigrationUnavailable(String),
    /// Stored bytes that do not decode.
    #[error("auth.redb row {key:?} is corrupt: {source}")]
    Corrupt { key: String, source: FormatError },
    /// A required row is missing.
    #[error("auth.redb has no row {key:?}")]
    MissingRow { key: String },
    /// The database engine failed.
    #[error("auth.redb: {0}")]
    Database(String),
    /// Certificate generation failed.
    #[error("certificate authority: {0}")]
    Certificate(String),
    /// Password hashing failed.
    #[error("password hashing: {0}")]
    Hashing(String),
}

impl AuthError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> AuthError {
        AuthError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn db(e: impl Into<redb::Error>) -> AuthError {
        AuthError::Database(e.into().to_string())
    }

    pub(crate) fn corrupt(key: &str, source: FormatError) -> AuthError {
        AuthError::Corrupt {
            key: key.to_owned(),
            source,
        }
    }

    /// The registry code users and peers see.
    pub fn code(&self) -> ErrorCode {
        match self {
            AuthError::Io { source, .. } if source.kind() == std::io::ErrorKind::StorageFull => {
                ErrorCode::StorageFull
            }
            AuthError::Io { .. } => ErrorCode::Io,
            AuthError::Locked { .. } => ErrorCode::Busy,
            AuthError::NotAnAuthDirectory { .. } => ErrorCode::NotFound,
            AuthError::NeedsMigration { .. }
            | AuthError::UnsupportedMarker { .. }
            | AuthError::MigrationUnavailable(_) => ErrorCode::UnsupportedVersion,
            AuthError::AlreadyInitialized { .. } | AuthError::WitnessExists { .. } => {
                ErrorCode::AlreadyExists
            }
            AuthError::WitnessMissing { .. }
            | AuthError::WitnessIncarnation { .. }
            | AuthError::RolledBack { .. }
            | AuthError::PepperMismatch { .. } => ErrorCode::AuthUnavailable,
            AuthError::PepperInvalid { .. } | AuthError::WitnessMalformed { .. } => {
                ErrorCode::Malformed
            }
            AuthError::PepperExposed { .. } => ErrorCode::Refused,
            AuthError::InvalidPassword(_) | AuthError::Invalid { .. } => ErrorCode::Usage,
            AuthError::Corrupt { .. } | AuthError::MissingRow { .. } => ErrorCode::Corrupt,
            AuthError::Database(_) | AuthError::Certificate(_) | AuthError::Hashing(_) => {
                ErrorCode::Internal
            }
        }
    }
}

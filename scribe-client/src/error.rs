//! The error of every workflow: a registered code, one line of what
//! happened, the paths it concerns, and the cause it came from.
//!
//! Codes come from the one registry (`scribe_format::ErrorCode`); their
//! [`ErrorKind`] decides how a command ends. What to do next (hints) is
//! the binary's business, chosen from what the error concerns
//! ([`Concern`], set where the error is raised) or else from its code.

use std::fmt;

use scribe_format::{Concern, ErrorCode, ErrorKind, FormatError};
use scribe_workspace::WorkspaceError;

use crate::client::ClientError;

type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A refused or failed workflow.
#[derive(Debug)]
pub struct Error {
    code: ErrorCode,
    message: String,
    paths: Vec<String>,
    concern: Option<Concern>,
    source: Option<Cause>,
}

/// The result of a workflow.
pub type Result<T = (), E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Error {
        Error {
            code,
            message: message.into(),
            paths: Vec::new(),
            concern: None,
            source: None,
        }
    }

    /// The same error about `concern` (a missing change, a path this
    /// workspace does not have, ...): the command line's hint follows it.
    pub fn concerning(mut self, concern: Concern) -> Error {
        self.concern = Some(concern);
        self
    }

    /// What this error concerns, where the code that raised it knew.
    pub fn concern(&self) -> Option<&Concern> {
        self.concern.as_ref()
    }

    /// The same error naming `paths`.
    pub fn with_paths(mut self, paths: Vec<String>) -> Error {
        self.paths = paths;
        self
    }

    /// The same error caused by `cause`.
    pub fn caused_by(mut self, cause: impl Into<Cause>) -> Error {
        self.source = Some(cause.into());
        self
    }

    pub fn code(&self) -> ErrorCode {
        self.code
    }

    pub fn kind(&self) -> ErrorKind {
        self.code.kind()
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn paths(&self) -> &[String] {
        &self.paths
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<ClientError> for Error {
    fn from(e: ClientError) -> Error {
        match e {
            ClientError::Io { context, source } => {
                Error::new(ErrorCode::Unreachable, context).caused_by(source)
            }
            ClientError::Local { context, source } => {
                let full = scribe_format::concern::is_disk_full(&source);
                let e = Error::new(ErrorCode::Io, context).caused_by(source);
                if full {
                    e.concerning(Concern::DiskFull)
                } else {
                    e
                }
            }
            ClientError::Server {
                code,
                message,
                paths,
            } => {
                let e = Error::new(code, message).with_paths(paths);
                if code == ErrorCode::Malformed {
                    // The server could not read what this client sent.
                    e.concerning(Concern::RequestRefused)
                } else {
                    e
                }
            }
            ClientError::Tls(t) => {
                Error::new(ErrorCode::Unreachable, "TLS is not configured").caused_by(t)
            }
            other => Error::new(other.code(), other.to_string()),
        }
    }
}

impl From<WorkspaceError> for Error {
    fn from(e: WorkspaceError) -> Error {
        let code =
            match &e {
                WorkspaceError::Refused { code, .. } => *code,
                WorkspaceError::NotAWorkspace { .. } => ErrorCode::NotAWorkspace,
                WorkspaceError::AlreadyAWorkspace { .. } => ErrorCode::AlreadyExists,
                WorkspaceError::Busy { .. } => ErrorCode::Busy,
                WorkspaceError::JournalInProgress { .. }
                | WorkspaceError::JournalUnfinished { .. } => ErrorCode::SyncUnfinished,
                WorkspaceError::UnsupportedSchema { .. }
                | WorkspaceError::UnsupportedCache { .. } => ErrorCode::UnsupportedVersion,
                WorkspaceError::Corrupt { .. } | WorkspaceError::Descriptor { .. } => {
                    ErrorCode::Corrupt
                }
                // The code of what failed: this machine's disk (`io`), the
                // server's connection (`unreachable`), bytes that do not
                // verify (`corrupt`), or a refusal.
                WorkspaceError::Materialize { cause, .. } => cause.code,
                WorkspaceError::StateDamaged { .. } => ErrorCode::WorkspaceStateDamaged,
                WorkspaceError::Io { .. } => ErrorCode::Io,
                _ => ErrorCode::Internal,
            };
        let concern = e.concern();
        // A full disk is this machine's I/O, whatever layer met it.
        let code = if concern == Some(Concern::DiskFull) {
            ErrorCode::Io
        } else {
            code
        };
        let err = match e {
            WorkspaceError::Io { path, source } => {
                Error::new(code, format!("{}", path.display())).caused_by(source)
            }
            WorkspaceError::Database(d) => Error::new(
                code,
                "the workspace's state (.scribe/_state/state.redb) could not be read or written",
            )
            .caused_by(d),
            other => Error::new(code, other.to_string()),
        };
        Error { concern, ..err }
    }
}

impl From<scribe_objects::StoreError> for Error {
    fn from(e: scribe_objects::StoreError) -> Error {
        Error::new(ErrorCode::Internal, "workspace cache").caused_by(e)
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        let err = Error::new(ErrorCode::Io, e.to_string());
        if scribe_format::concern::is_disk_full(&e) {
            err.concerning(Concern::DiskFull)
        } else {
            err
        }
    }
}

impl From<FormatError> for Error {
    fn from(e: FormatError) -> Error {
        Error::new(e.code(), e.to_string())
    }
}

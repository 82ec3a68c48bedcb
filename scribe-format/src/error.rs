//! The one registry of Scribe error codes, and the decoding error type.
//!
//! Server, client and documentation all take codes from [`ErrorCode`]: its
//! numeric value travels on the wire, its name is what users see
//! (`error[base_mismatch]`). Numbers are stable once assigned; a retired code
//! keeps its number. `docs/format-notes.md` lists the registry.

use std::fmt;

macro_rules! error_codes {
    ($( $(#[$doc:meta])* $variant:ident = $num:literal, $name:literal; )*) => {
        /// A stable, named error code.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        #[repr(u16)]
        pub enum ErrorCode {
            $( $(#[$doc])* $variant = $num, )*
        }

        impl ErrorCode {
            /// Every registered code, in numeric order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The numeric value carried on the wire and in `operations` rows.
            pub const fn number(self) -> u16 {
                self as u16
            }

            /// The stable snake_case name.
            pub const fn name(self) -> &'static str {
                match self { $(ErrorCode::$variant => $name,)* }
            }

            /// The code with this number, if registered.
            pub fn from_number(number: u16) -> Option<ErrorCode> {
                match number { $($num => Some(ErrorCode::$variant),)* _ => None }
            }

            /// The code with this name, if registered.
            pub fn from_name(name: &str) -> Option<ErrorCode> {
                match name { $($name => Some(ErrorCode::$variant),)* _ => None }
            }
        }
    };
}

error_codes! {
    /// Bytes or a request that do not follow the format.
    Malformed = 100, "malformed";
    /// A version word this build does not read.
    UnsupportedVersion = 101, "unsupported_version";
    /// A value beyond a limit of section 11.
    LimitExceeded = 102, "limit_exceeded";
    /// A path that is not canonical (section 5).
    InvalidPath = 103, "invalid_path";
    /// A descriptor lists a required feature this build does not know.
    UnsupportedFeature = 104, "unsupported_feature";
    /// Stored bytes do not match their identity.
    Corrupt = 105, "corrupt";
    /// The expected base change of an entry is not the change at the head.
    BaseMismatch = 200, "base_mismatch";
    /// The path is absent at the head.
    NotPresent = 201, "not_present";
    /// A change set with no entries and no merge parent or cherry-pick source.
    EmptySubmission = 202, "empty_submission";
    /// Two live paths would share one collision key.
    PathCollision = 203, "path_collision";
    /// The path is locked by another workspace.
    LockedByOther = 204, "locked_by_other";
    /// A submission names objects the server does not hold.
    MissingObjects = 205, "missing_objects";
    /// The operation id was used before with another intent.
    OperationIntentMismatch = 206, "operation_intent_mismatch";
    /// No such repository, branch, workspace or change.
    NotFound = 207, "not_found";
    /// The thing to create exists already.
    AlreadyExists = 208, "already_exists";
    /// A path needs a lock that the submitter does not hold.
    LockRequired = 209, "lock_required";
    /// The repository configuration is missing a required part or invalid.
    InvalidRepositoryConfig = 210, "invalid_repository_config";
    /// A merge does not cover every source change.
    MergeIncomplete = 211, "merge_incomplete";
    /// The workspace is retired.
    WorkspaceRetired = 212, "workspace_retired";
    /// The workspace is not registered with the repository.
    WorkspaceUnregistered = 213, "workspace_unregistered";
    /// A manifest a submission names is not a manifest, breaks a rule of
    /// its chunking profile, or disagrees with the entry that names it.
    InvalidManifest = 214, "invalid_manifest";
    /// A file path would sit under a live file, or over live files.
    PathConflict = 215, "path_conflict";
    /// The repository is retired: kept, read-only (reads, syncs and
    /// history work; every write is refused). The message says whom to ask.
    RepositoryRetired = 216, "repository_retired";
    /// The principal may not do this.
    Forbidden = 300, "forbidden";
    /// The auth service could not be consulted or answered from the past.
    AuthUnavailable = 301, "auth_unavailable";
    /// No valid credential, or a login with a wrong username or password.
    Unauthenticated = 302, "unauthenticated";
    /// Too many failed logins for this user or address; retry later.
    LoginThrottled = 303, "login_throttled";
    /// The server or data root is busy or in use by another process.
    Busy = 400, "busy";
    /// The server is at one of its own limits (connections, upload
    /// memory); retry shortly.
    ServerBusy = 401, "server_busy";
    /// A change was accepted, but the durable tier has not confirmed it
    /// within the acknowledgement timeout (`--ack durable`); asking again
    /// with the same operation answers its outcome once it has.
    TierUnavailable = 402, "tier_unavailable";
    /// An internal failure (I/O, database); the detail says which.
    Internal = 500, "internal";
    /// The server's storage is full (or over quota); nothing was recorded.
    StorageFull = 501, "storage_full";
    /// The metadata recovery archive could not be written: writes are
    /// fenced until restart, reads keep working.
    ArchiveUnavailable = 502, "archive_unavailable";
    /// A backup directory without its `BACKUP_MANIFEST` (an interrupted
    /// backup, or not a backup): restore refuses it and changes nothing.
    BackupIncomplete = 503, "backup_incomplete";
    // 6xx: client-side codes. Never sent by a server; a client reports
    // them for refusals of its own workflows (`docs/cli.md`).
    /// The command line is not one the command accepts.
    Usage = 600, "usage";
    /// The directory is not inside a Scribe workspace.
    NotAWorkspace = 601, "not_a_workspace";
    /// A local file or directory could not be read or written.
    Io = 602, "io";
    /// The server could not be reached or the connection failed.
    Unreachable = 603, "unreachable";
    /// A workflow refused the request (the message says why).
    Refused = 604, "refused";
    /// A sync is unfinished; `scribe sync` completes it.
    SyncUnfinished = 605, "sync_unfinished";
    /// An interrupted submission must finish first.
    SubmitPending = 606, "submit_pending";
    /// Paths need resolving before this can run.
    NeedsResolve = 607, "needs_resolve";
    /// The server was restored since the workspace last synced.
    IncarnationChanged = 608, "incarnation_changed";
    /// Opened paths are based on the server's state before a restore.
    StaleBase = 609, "stale_base";
    /// Files changed while a submission read them.
    ChangedWhileSubmitting = 610, "changed_while_submitting";
    /// A prepared submission can never complete and was set aside.
    SubmitWithdrawn = 611, "submit_withdrawn";
    /// A prepared submission was not replayed after a server restore.
    SubmitRetired = 612, "submit_retired";
    /// Local work stands in the way of a view change.
    ViewChangeBlocked = 613, "view_change_blocked";
    /// A move was refused by the move rules.
    MoveRefused = 614, "move_refused";
    /// The path was vacated by a pending move and is reserved.
    MoveReserved = 615, "move_reserved";
    /// An interrupted move must be resumed or aborted first.
    MoveUnfinished = 616, "move_unfinished";
    /// A later pending move depends on the one to undo.
    MoveDependent = 617, "move_dependent";
    /// A workspace path lies beneath a component that is a symbolic link
    /// (or a junction): Scribe never reads, writes or deletes through one.
    BeyondSymlink = 618, "beyond_symlink";
    /// The workspace state database (`.scribe/_state/state.redb`) is
    /// damaged or holds rows this build cannot decode.
    WorkspaceStateDamaged = 619, "workspace_state_damaged";
    // #18 (daily use): codes added for issue 18, kept in one block.
    /// The path is outside this workspace's view (sparse workspace).
    NotInView = 620, "not_in_view";
}

/// How a failure ends a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The command line was wrong (exit status 2).
    Usage,
    /// The request was understood and refused, or failed (exit status 1).
    Refused,
    /// Something broke: I/O, a corrupt store, a protocol error (exit status 1).
    Failed,
}

impl ErrorCode {
    /// Whether only clients use this code (never on the wire).
    pub const fn is_client_side(self) -> bool {
        self.number() >= 600
    }

    /// How a failure with this code ends a command.
    pub const fn kind(self) -> ErrorKind {
        match self {
            ErrorCode::Usage => ErrorKind::Usage,
            ErrorCode::Internal
            | ErrorCode::StorageFull
            | ErrorCode::ArchiveUnavailable
            | ErrorCode::Io
            | ErrorCode::Unreachable
            | ErrorCode::Corrupt
            | ErrorCode::WorkspaceStateDamaged
            | ErrorCode::Malformed => ErrorKind::Failed,
            _ => ErrorKind::Refused,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why bytes were refused by a decoder, or a value by an encoder.
///
/// `what` names the structure and field (for example `"manifest.chunk count"`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The input ends before the field.
    #[error("{what}: truncated: needs {needed} more bytes, {available} available")]
    Truncated {
        what: &'static str,
        needed: u64,
        available: u64,
    },
    /// Bytes follow the end of the structure.
    #[error("{what}: {count} trailing bytes after the end")]
    TrailingBytes { what: &'static str, count: u64 },
    /// A magic number that is not the expected one.
    #[error("{what}: bad magic")]
    BadMagic { what: &'static str },
    /// A version word this build does not read.
    #[error("{what}: unsupported version {version}")]
    UnsupportedVersion { what: &'static str, version: u64 },
    /// A field with a value outside what the format allows.
    #[error("{what}: invalid value {value}: {reason}")]
    InvalidValue {
        what: &'static str,
        value: u64,
        reason: &'static str,
    },
    /// A structural rule of the format is broken.
    #[error("{what}: {reason}")]
    Invalid { what: &'static str, reason: String },
    /// A value beyond a limit of section 11.
    #[error("{what}: {actual} exceeds the limit of {limit}")]
    LimitExceeded {
        what: &'static str,
        limit: u64,
        actual: u64,
    },
    /// Bytes that do not match the identity they claim.
    #[error("{what}: identity mismatch: expected {expected}, found {actual}")]
    IdentityMismatch {
        what: &'static str,
        expected: String,
        actual: String,
    },
    /// A path that is not canonical; `rule` is the path error code
    /// (`scribe_format::path::PathError::code`).
    #[error("{what}: invalid path ({rule}): {reason}")]
    InvalidPath {
        what: &'static str,
        rule: &'static str,
        reason: String,
    },
    /// A text field that is not UTF-8.
    #[error("{what}: not UTF-8")]
    NotUtf8 { what: &'static str },
    /// A required feature this build does not know.
    #[error("required feature {feature:?} is not supported by this build")]
    UnsupportedFeature { feature: String },
}

impl FormatError {
    /// The registry code users and peers see for this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            FormatError::UnsupportedVersion { .. } => ErrorCode::UnsupportedVersion,
            FormatError::LimitExceeded { .. } => ErrorCode::LimitExceeded,
            FormatError::IdentityMismatch { .. } => ErrorCode::Corrupt,
            FormatError::UnsupportedFeature { .. } => ErrorCode::UnsupportedFeature,
            FormatError::InvalidPath { .. } => ErrorCode::InvalidPath,
            _ => ErrorCode::Malformed,
        }
    }

    /// Shorthand for [`FormatError::Invalid`].
    pub fn invalid(what: &'static str, reason: impl Into<String>) -> FormatError {
        FormatError::Invalid {
            what,
            reason: reason.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_names_are_unique_and_round_trip() {
        let mut numbers = std::collections::BTreeSet::new();
        let mut names = std::collections::BTreeSet::new();
        for &code in ErrorCode::ALL {
            assert!(numbers.insert(code.number()), "duplicate number {code}");
            assert!(names.insert(code.name()), "duplicate name {code}");
            assert_eq!(ErrorCode::from_number(code.number()), Some(code));
            assert_eq!(ErrorCode::from_name(code.name()), Some(code));
        }
    }

    #[test]
    fn spec_numbers_are_kept() {
        assert_eq!(ErrorCode::LockRequired.number(), 209);
        assert_eq!(ErrorCode::InvalidRepositoryConfig.number(), 210);
        assert_eq!(ErrorCode::MergeIncomplete.number(), 211);
        assert_eq!(ErrorCode::from_number(0), None);
    }
}

//! What a refusal concerns, where the code that raised it knows.
//!
//! A code says what kind of refusal it is (`not_found`); a concern says
//! what it is about (a change, a repository, a path this workspace does not
//! have). Clients choose what to suggest from it: a change that does not
//! exist points at the log, a repository at the repository list, a path
//! that is not in the workspace at `status` and `add`. It is client-side
//! only: never on the wire, not part of the format. Whatever raises a
//! refusal sets it; a refusal without one gets the code's general advice.

/// What a refusal is about.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Concern {
    /// A change the branch does not have; `head` is the branch's newest
    /// change when it is known (0: nothing submitted yet).
    Change { change: u64, head: Option<u64> },
    /// A repository the server does not have.
    Repository,
    /// A workspace's repository the server holds under another name now
    /// (`scribe-server repo rename`): `name` is the new one, `url` the
    /// workspace's server.
    RepositoryRenamed { name: String, url: String },
    /// The server's repository of the workspace's name is another
    /// repository (another id) and the server holds the workspace's own
    /// under no name: deleted, or the workspace belongs to another server.
    RepositoryReplaced,
    /// A directory named as an embedded server that holds no data root.
    DataRoot,
    /// A branch the repository does not have (or does not serve).
    Branch,
    /// Paths this workspace neither tracks nor has opened for add.
    NotInWorkspace,
    /// Tracked paths that are not on disk.
    MissingFromDisk,
    /// Paths that are not opened.
    NotOpened,
    /// Paths that need no resolving.
    NothingToResolve,
    /// Paths that hold no lock.
    NotLocked,
    /// No pending move matches what was named.
    NoPendingMove,
    /// The local file system (the workspace's disk) is full.
    DiskFull,
    /// The server refused this client's request as malformed (not
    /// something the server sent: that is a `malformed` without it).
    RequestRefused,
}

/// Whether the local file system refused `e` because it is full (no space
/// left, or a quota reached).
pub fn is_disk_full(e: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(e.kind(), ErrorKind::StorageFull | ErrorKind::QuotaExceeded)
        // ENOSPC, EDQUOT on Linux; ERROR_DISK_FULL, ERROR_HANDLE_DISK_FULL on Windows.
        || matches!(e.raw_os_error(), Some(28 | 122) if cfg!(unix))
        || matches!(e.raw_os_error(), Some(112 | 39) if cfg!(windows))
}

/// Whether `e`, or any error beneath it, is a full local file system
/// ([`is_disk_full`]): a database's write error carries the I/O error
/// that stopped it.
pub fn caused_by_full_disk(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(e) = next {
        if e.downcast_ref::<std::io::Error>().is_some_and(is_disk_full) {
            return true;
        }
        next = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_recognised_by_kind_or_number() {
        assert!(is_disk_full(&std::io::Error::from(
            std::io::ErrorKind::StorageFull
        )));
        #[cfg(unix)]
        assert!(is_disk_full(&std::io::Error::from_raw_os_error(28)));
        assert!(!is_disk_full(&std::io::Error::from(
            std::io::ErrorKind::PermissionDenied
        )));
    }
}

//! How workflows report while they run: a [`Progress`] receives typed
//! [`Note`]s and the start, advance and end of each [`Task`]. The library
//! never prints; the `scribe` binary turns these into status lines and
//! progress bars, and a test or an agent may record them.

use scribe_format::OperationId;

/// Something a workflow tells the user while it runs.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Note {
    /// An interrupted sync to `target` is being completed first.
    ResumingSync { target: u64 },
    /// The interrupted sync to `target` cannot be completed (`why`); it is
    /// set aside for a sync to the newer change `newer`.
    SkippingSync {
        target: u64,
        newer: u64,
        why: String,
    },
    /// The server was restored: every path is planned again.
    FullSync { target: u64 },
    /// An interrupted submission is being completed with its own id.
    CompletingSubmit {
        operation: OperationId,
        message: String,
    },
    /// The opened files were frozen (read, chunked, hashed).
    Froze {
        files: usize,
        secs: f64,
        streamed_bytes: u64,
    },
    /// An interrupted view change is being finished.
    FinishingViewChange,
    /// An interrupted move is being finished.
    ResumingMove,
    /// The workspace was registered and created.
    WorkspaceCreated {
        workspace: scribe_format::WorkspaceId,
        repository: String,
        root: std::path::PathBuf,
    },
    /// The workspace cache's copy of `id` could not be read or verified
    /// (`why`); the server answered instead.
    CacheCopyUnreadable {
        id: scribe_format::ObjectId,
        why: String,
    },
    /// A file about to be opened is locked by another workspace.
    LockedByOther {
        path: String,
        owner: String,
        workspace: scribe_format::WorkspaceId,
    },
    /// This workspace's locks followed its moved files: each (source,
    /// destination) pair is locked at the destination too.
    LocksMoved { pairs: Vec<(String, String)> },
    /// This workspace's locks could not follow a move: each (locked
    /// source, destination left unlocked), and why (offline, or another
    /// workspace holds a destination's lock).
    LocksNotMoved {
        pairs: Vec<(String, String)>,
        why: String,
    },
    /// Locks of this workspace on paths a move left (an aborted move's
    /// destinations, a submitted move's sources) could not be released
    /// (`why`): `scribe unlock` releases them.
    LocksLeftBehind { paths: Vec<String>, why: String },
}

/// A measured piece of work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Task {
    /// Bytes of large files streamed to the server while they are frozen.
    Stream,
    /// Objects uploaded for a submission (counted in objects).
    Upload,
    /// Bytes written into the working copy by a sync.
    Sync,
    /// Bytes actually sent to the server for a submission: the objects it
    /// lacked, from the streamed large files and the upload alike (a file
    /// frozen again after a small edit sends only its changed chunks).
    /// Advanced only: it has no start, total or finish, and is shown
    /// beside the `Stream` and `Upload` bars.
    Sent,
}

/// Receives what a workflow reports. Every method defaults to nothing.
pub trait Progress: Send + Sync {
    /// A note for the user.
    fn note(&self, _note: Note) {}
    /// `task` starts with `total` units to do.
    fn start(&self, _task: Task, _total: u64) {}
    /// `n` more units of `task` are done.
    fn advance(&self, _task: Task, _n: u64) {}
    /// `task` ended (successfully or not).
    fn finish(&self, _task: Task) {}
}

/// Reports nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Silent;

impl Progress for Silent {}

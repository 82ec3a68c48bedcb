//! What the service remembers about one connection: who it acts as (its
//! [`Principal`], fixed when the connection is authenticated) and its
//! transfer state (see [`super::upload`]).

use std::collections::HashSet;

use scribe_format::{ObjectId, OperationId, RepositoryId, WorkspaceId};

use super::auth::Principal;
use super::upload::{Download, Partial, Publishing, StagedObject};

/// One connection's state, handed to [`Service::handle`](super::Service::handle)
/// with each of its requests.
pub struct Session {
    principal: Principal,
    pub(crate) upload: Option<Partial>,
    pub(crate) download: Option<Download>,
    pub(crate) staged: Vec<StagedObject>,
    pub(crate) staged_bytes: u64,
    /// When the oldest object of the stage was staged (`None`: empty).
    pub(crate) staged_since: Option<std::time::Instant>,
    /// The previous full stage, being published in the background.
    pub(crate) publishing: Option<Publishing>,
    /// Pins this connection made with `ObjectsPinMissing` (so a staged put
    /// of a pinned id does not pin again); bounded, cleared when full.
    pub(crate) pinned: HashSet<(WorkspaceId, OperationId, ObjectId)>,
    /// The transport sends an `ObjectData` reply's bytes from
    /// [`Session::outgoing`] when the reply's own data is empty (set by
    /// the TCP transport for uncompressed connections).
    pub(crate) zero_copy: bool,
    /// The data of the `ObjectData` reply just built, by reference
    /// (verified bytes from the tier, shared, not copied).
    pub(crate) outgoing: Option<bytes::Bytes>,
    /// The objects of the `ObjectGetMany` reply just built, by reference
    /// (when [`Session::zero_copy`]; the reply's own list is then empty):
    /// neither copied out of the tier's memory or the store's read
    /// buffer, nor into a frame.
    pub(crate) outgoing_pieces: Vec<(scribe_format::ObjectId, bytes::Bytes)>,
}

impl Session {
    /// The session of an in-process connection (path URL):
    /// [`Principal::local`], the operating-system user who owns the data
    /// root. Network transports use [`Session::for_principal`] with what
    /// the authorizer answered. (No `Default`: a session's principal is
    /// always chosen on purpose.)
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        Session::for_principal(Principal::local())
    }

    /// A session acting as `principal` for its whole life.
    pub fn for_principal(principal: Principal) -> Self {
        Session {
            principal,
            upload: None,
            download: None,
            staged: Vec::new(),
            staged_bytes: 0,
            staged_since: None,
            publishing: None,
            pinned: HashSet::new(),
            zero_copy: false,
            outgoing: None,
            outgoing_pieces: Vec::new(),
        }
    }

    /// Who this connection acts as.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// Bytes buffered for this connection (one object under upload, the
    /// stage, and a download's reader buffers).
    pub fn buffered_bytes(&self) -> usize {
        self.upload.as_ref().map_or(0, |p| p.data.capacity())
            + self
                .download
                .as_ref()
                .map_or(0, |d| d.reader.buffered_bytes())
            + self.staged_bytes as usize
            + self.publishing.as_ref().map_or(0, |p| {
                if p.handle.is_finished() {
                    0
                } else {
                    p.bytes as usize
                }
            })
    }

    /// Whether this connection holds upload memory that only its client
    /// can release: an unfinished object or staged objects not yet
    /// published. A stage being published in the background is not such
    /// memory (its publication ends, and frees it, by itself): the
    /// connection is then under the ordinary idle timeout, as it was when
    /// that publication ran before the put's reply.
    pub fn holds_upload(&self) -> bool {
        self.upload.is_some() || !self.staged.is_empty()
    }

    /// Whether `id` is staged by this connection for `repo` (or in its
    /// stage being published).
    pub(crate) fn has_staged(&self, repo: RepositoryId, id: &ObjectId) -> bool {
        self.staged.iter().any(|o| o.repo == repo && o.id == *id)
            || self
                .publishing
                .as_ref()
                .is_some_and(|p| p.ids.contains(&(repo, *id)))
    }

    /// Wait for the stage being published in the background, if any; its
    /// failure is this call's.
    pub(crate) fn finish_publishing(&mut self) -> Result<(), super::Failure> {
        let Some(p) = self.publishing.take() else {
            return Ok(());
        };
        match p.handle.join() {
            Ok(r) => r.map(drop),
            Err(_) => Err(super::Failure::new(
                scribe_format::ErrorCode::Internal,
                "publishing the staged objects failed: a panic",
            )),
        }
    }
}

impl Drop for Session {
    /// A connection that ends with a stage being published waits for it:
    /// its objects' stores are let go (a repository closed or a service
    /// dropped after its connections finds them unheld), and nothing
    /// writes after the connection is gone. Its outcome is nobody's to
    /// report (the objects were never acknowledged as published).
    fn drop(&mut self) {
        let _ = self.finish_publishing();
    }
}

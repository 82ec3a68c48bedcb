//! Per-connection transfer state.
//!
//! A connection uploads one object at a time: pieces arrive in order into a
//! buffer bounded by the object's declared length (itself bounded by
//! [`max_object_bytes`]); a piece for another object at offset 0 replaces
//! an unfinished one. The buffer grows with what arrives, and the
//! service-wide upload budget is charged for the bytes the buffer holds
//! (what was received, rounded up by the buffer's growth), never for the
//! declared length: a connection that declares 64 MiB and sends one byte
//! holds one byte of the budget. Downloads keep a streaming reader (see
//! [`Download`]), not the object.
//!
//! Objects sent with `ObjectPutStaged` are verified when complete and kept
//! in the [`Session`](super::Session)'s stage (bounded by [`STAGE_PUBLISH_BYTES`],
//! [`STAGE_PUBLISH_OBJECTS`] and [`STAGE_PUBLISH_AGE`], and by the
//! service-wide upload budget) until
//! the connection's next publication: `ObjectsPublish`, a full stage, or
//! any request other than a staged put or `ObjectsPinMissing`. One
//! publication is one durable batch (one locator commit for the lot).
//! A full stage is published in the background ([`Publishing`]) while the
//! connection goes on receiving: at most one such publication per
//! connection, finished (and its failure reported) before the next one,
//! by `ObjectsPublish` and any other request, and when the connection
//! ends. So nothing is acknowledged as published before it is durable.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use scribe_format::limits::MAX_CHUNK_BYTES;
use scribe_format::{ObjectId, ObjectKind, OperationId, RepositoryId};
use scribe_objects::{ObjectReader, ObjectStore};

/// Largest non-chunk object (manifest, change set) accepted by upload.
pub const MAX_STRUCTURED_OBJECT_BYTES: u64 = 64 << 20;

/// The largest payload an upload of `kind` may declare.
pub fn max_object_bytes(kind: ObjectKind) -> u64 {
    match kind {
        ObjectKind::Chunk => u64::from(MAX_CHUNK_BYTES),
        _ => MAX_STRUCTURED_OBJECT_BYTES,
    }
}

/// Default bound on the bytes all connections together may buffer for
/// uploads in progress.
pub const DEFAULT_UPLOAD_BUDGET: u64 = 1 << 30;

/// Bytes reserved from the service-wide upload budget; returned on drop.
pub(crate) struct Reservation {
    pool: Arc<AtomicU64>,
    bytes: u64,
}

impl Reservation {
    /// Take `bytes` from `pool` (the bytes still available), if there are enough.
    pub fn take(pool: &Arc<AtomicU64>, bytes: u64) -> Option<Reservation> {
        let mut r = Reservation {
            pool: pool.clone(),
            bytes: 0,
        };
        r.grow(bytes).then_some(r)
    }

    /// Take `more` bytes from the pool into this reservation, if there
    /// are enough; otherwise nothing changes.
    pub fn grow(&mut self, more: u64) -> bool {
        let ok = self
            .pool
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |free| {
                free.checked_sub(more)
            })
            .is_ok();
        if ok {
            self.bytes += more;
        }
        ok
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.pool.fetch_add(self.bytes, Ordering::AcqRel);
    }
}

/// An object being received.
pub(crate) struct Partial {
    pub reservation: Reservation,
    pub repo: RepositoryId,
    pub operation: OperationId,
    pub id: ObjectId,
    pub total_len: u64,
    pub data: Vec<u8>,
}

/// A download in progress on a connection: a streaming reader of the
/// object (bounded buffers, never the object) positioned at `next`. Its
/// identity is verified as it is read; the range that reaches the end
/// fails `corrupt` when the bytes do not match.
pub(crate) struct Download {
    pub repo: RepositoryId,
    pub id: ObjectId,
    pub total: u64,
    pub next: u64,
    pub reader: DownloadReader,
    pub held: Held,
}

/// Where a download's bytes come from: the local store (a streaming
/// reader checking the identity as it goes), or verified bytes already
/// in memory (an object the S3 tier served: checked against its id when
/// fetched, written back to the local store in the background).
pub(crate) enum DownloadReader {
    Store(Box<ObjectReader>),
    Memory { bytes: bytes::Bytes, pos: usize },
}

impl DownloadReader {
    pub fn len(&self) -> u64 {
        match self {
            DownloadReader::Store(r) => r.len(),
            DownloadReader::Memory { bytes, .. } => bytes.len() as u64,
        }
    }

    /// Bytes held for this download beyond the shared copy.
    pub fn buffered_bytes(&self) -> usize {
        match self {
            DownloadReader::Store(r) => r.buffered_bytes(),
            DownloadReader::Memory { .. } => 0,
        }
    }
}

impl std::io::Read for DownloadReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            DownloadReader::Store(r) => r.read(buf),
            DownloadReader::Memory { bytes, pos } => {
                let n = buf.len().min(bytes.len() - *pos);
                buf[..n].copy_from_slice(&bytes[*pos..*pos + n]);
                *pos += n;
                Ok(n)
            }
        }
    }
}

/// Bytes a connection holds for a download, counted in the service's
/// gauge ([`Service::download_buffered_bytes`](super::Service::download_buffered_bytes))
/// while this lives.
pub(crate) struct Held {
    gauge: Arc<AtomicU64>,
    bytes: u64,
}

impl Held {
    pub fn new(gauge: &Arc<AtomicU64>) -> Held {
        Held {
            gauge: gauge.clone(),
            bytes: 0,
        }
    }

    /// Count `bytes` from now on.
    pub fn set(&mut self, bytes: u64) {
        if bytes >= self.bytes {
            self.gauge.fetch_add(bytes - self.bytes, Ordering::AcqRel);
        } else {
            self.gauge.fetch_sub(self.bytes - bytes, Ordering::AcqRel);
        }
        self.bytes = bytes;
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.set(0);
    }
}

/// Staged bytes at which a staged put publishes the stage.
pub const STAGE_PUBLISH_BYTES: u64 = 64 << 20;
/// Staged objects at which a staged put publishes the stage.
pub const STAGE_PUBLISH_OBJECTS: usize = 64;
/// Age of a stage's oldest object at which a staged put publishes the
/// stage: a slow upload becomes durable (and a re-run of a killed one
/// resumes) at least this often, not only every 64 MiB.
pub const STAGE_PUBLISH_AGE: std::time::Duration = std::time::Duration::from_secs(1);
/// Most (intent, object) pins a connection remembers having made.
pub(crate) const MAX_REMEMBERED_PINS: usize = 1 << 20;

/// A full stage being published on its own thread (issue #19: a staged
/// put that filled the stage used to write and flush 64 MiB before its
/// reply, so each upload lane stood still about a third of a large
/// upload). Its objects count as staged (`Session::has_staged`) and its
/// bytes stay charged to the upload budget until it is finished.
pub(crate) struct Publishing {
    pub handle: std::thread::JoinHandle<Result<u32, super::Failure>>,
    /// The objects it publishes, per repository.
    pub ids: std::collections::HashSet<(RepositoryId, ObjectId)>,
    pub bytes: u64,
}

/// A verified object waiting for its connection's next publication.
pub(crate) struct StagedObject {
    pub _reservation: Reservation,
    pub repo: RepositoryId,
    pub operation: OperationId,
    pub store: Arc<ObjectStore>,
    pub id: ObjectId,
    pub data: Vec<u8>,
}

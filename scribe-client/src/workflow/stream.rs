//! Streaming freeze: each chunk goes from the working file straight to the
//! server, never into the workspace cache (large files and, since issue
//! 19, small ones: a small file's one chunk used to be frozen into the
//! cache, read back for the upload and compressed again by the server).
//!
//! The files are chunked by `scribe-objects` exactly as an import would
//! (same cut points, chunk ids and manifests); its worker threads hand each
//! hashed chunk to a queue bounded by bytes and count. Uploader threads
//! ([`LANES`] over TCP, each with its own connection, so one sends while
//! the server publishes the other's stage; one on the in-process transport
//! or for a freeze under [`LANE_BYTES`]) take the queue in groups (at most
//! [`GROUP_CHUNKS`] chunks / [`GROUP_BYTES`]: thousands of small files, or a
//! handful of a large file's chunks), pin the group's ids for the
//! submission's upload intent and learn which the server lacks
//! (`ObjectsPinMissing`, one transaction per group), and send only those:
//! small chunks many to an `ObjectPutMany` (one durable publication each),
//! large ones as staged puts, which the server publishes in durable
//! batches of 64 MiB; a final `ObjectsPublish` on each connection
//! publishes the rest. Reading, chunking and hashing overlap the transfer
//! and the server's writes; each file is read once; only the manifests are
//! written to the cache.
//!
//! What makes this safe without a local copy: every chunk id is computed
//! from the very bytes sent, the manifest from those ids, and the pending
//! submission is written only after every chunk is published, so the
//! server holds all of a candidate's chunks before it is recorded. A file
//! rewritten while it is read is detected by the caller (its fingerprint
//! before and after differ) and the submit stops before recording anything.
//!
//! [`chunk_and_upload`] runs the same pipeline for a caller without a
//! workspace (the NoKV Workbench's `nokv collect`): its own object store
//! for the manifests, its own connections.

use std::collections::{HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use scribe_format::wire::message::{self as m, MAX_OBJECT_DATA_PER_FRAME};
use scribe_format::{
    ChunkId, ErrorCode, ManifestId, ObjectId, ObjectKind, OperationId, WorkspaceId,
};
use scribe_objects::{ChunkBytes, ChunkSink, ImportedFile, ObjectStore, StoreError};

use crate::client::{Client, ClientError};
use crate::error::{Error, Result};
use crate::link::ServerLink;
use crate::progress::Task;
use crate::Context;

/// Most chunks per pin-and-check round trip (one pin transaction on the
/// server): small files are one chunk each, so a group of small files is
/// thousands of them, not the handful of chunks a large file's group holds
/// (the bytes bound below ends those). Each group costs the server a pin
/// transaction and a durable publication: 2,048 instead of 512 made a
/// 52,073-file import 0.3–0.5 s faster in six of seven pairs
/// (docs/performance.md); its `ObjectPutMany` requests stay within
/// `transfer::MAX_GROUP_OBJECTS` and the frame bound.
const GROUP_CHUNKS: usize = 2048;
/// Most chunk bytes per group.
const GROUP_BYTES: usize = 32 << 20;
/// Chunk bytes waiting for the uploaders (bounds memory with the groups
/// being sent); one chunk is always admitted to an empty queue.
const QUEUE_BYTES: usize = 64 << 20;
/// Chunks waiting for the uploaders.
const QUEUE_CHUNKS: usize = 4096;
/// How long the uploader waits to fill a group before sending what it has.
const GROUP_WAIT: Duration = Duration::from_millis(20);
/// Upload connections over TCP.
const LANES: usize = 2;
/// Bytes to freeze from which a submit opens its extra lanes.
const LANE_BYTES: u64 = 8 << 20;

/// What the streaming freeze did.
pub struct Streamed {
    pub files: Vec<ImportedFile>,
    /// Objects sent (chunks and manifests the server lacked).
    pub objects: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Every object pinned under the upload intent by this stream, each
    /// stored on the server once it returned (sent and published, or
    /// already there): every chunk of `files` and the manifests of the
    /// large ones. The submission's own upload need not pin or check them
    /// again.
    pub pinned: HashSet<ObjectId>,
}

/// The chunks between the import's workers and the uploaders, bounded by
/// count and by bytes (a large file's chunks are up to 16 MiB, a small
/// file's a few bytes: a count alone would either starve the small ones
/// or hold gigabytes of the large ones).
struct Queue {
    state: Mutex<QueueState>,
    /// Signalled when a chunk arrives or the queue closes.
    filled: Condvar,
    /// Signalled when chunks leave.
    drained: Condvar,
}

#[derive(Default)]
struct QueueState {
    items: VecDeque<(ObjectId, ChunkBytes)>,
    bytes: usize,
    closed: bool,
    /// Uploaders waiting for a chunk, and import workers waiting for room:
    /// a condition variable is signalled only when someone waits on it
    /// (a signal is a system call even when nobody does: two per chunk,
    /// 46,000 for a 12,000-file import, before this count).
    takers: usize,
    givers: usize,
}

/// Why a wait for the next chunk ended without one.
#[derive(Debug)]
enum Empty {
    /// Nothing arrived in time; more may come.
    Timeout,
    /// Closed and empty.
    Closed,
}

impl Queue {
    fn new() -> Self {
        Queue {
            state: Mutex::new(QueueState::default()),
            filled: Condvar::new(),
            drained: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Add a chunk, waiting while the queue is full; `false` once closed.
    fn push(&self, id: ObjectId, bytes: ChunkBytes) -> bool {
        let mut st = self.lock();
        while !st.closed
            && !st.items.is_empty()
            && (st.items.len() >= QUEUE_CHUNKS || st.bytes + bytes.len() > QUEUE_BYTES)
        {
            st.givers += 1;
            st = self.drained.wait(st).unwrap_or_else(|p| p.into_inner());
            st.givers -= 1;
        }
        if st.closed {
            return false;
        }
        st.bytes += bytes.len();
        st.items.push_back((id, bytes));
        if st.takers > 0 {
            self.filled.notify_one();
        }
        true
    }

    /// Move queued chunks into `group` (whose chunks' bytes are `group_bytes`)
    /// while it holds fewer than [`GROUP_CHUNKS`] and [`GROUP_BYTES`], all
    /// under one lock; waits until `deadline` (`None`: for as long as the
    /// queue is open) when nothing is queued. `Ok` once at least one moved.
    fn take(
        &self,
        group: &mut Vec<(ObjectId, ChunkBytes)>,
        group_bytes: &mut usize,
        deadline: Option<Instant>,
    ) -> Result<(), Empty> {
        let mut st = self.lock();
        loop {
            if !st.items.is_empty() {
                while group.len() < GROUP_CHUNKS && *group_bytes < GROUP_BYTES {
                    let Some(item) = st.items.pop_front() else {
                        break;
                    };
                    st.bytes -= item.1.len();
                    *group_bytes += item.1.len();
                    group.push(item);
                }
                if st.givers > 0 {
                    self.drained.notify_all();
                }
                return Ok(());
            }
            if st.closed {
                return Err(Empty::Closed);
            }
            st.takers += 1;
            st = match deadline {
                None => self.filled.wait(st).unwrap_or_else(|p| p.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        st.takers -= 1;
                        return Err(Empty::Timeout);
                    }
                    self.filled
                        .wait_timeout(st, d - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
            };
            st.takers -= 1;
        }
    }

    /// No more chunks will come: waiting uploaders take what is left.
    fn close(&self) {
        self.lock().closed = true;
        self.filled.notify_all();
        self.drained.notify_all();
    }

    /// Close and drop everything queued (an uploader failed).
    fn abandon(&self) {
        let mut st = self.lock();
        st.closed = true;
        st.items.clear();
        st.bytes = 0;
        drop(st);
        self.filled.notify_all();
        self.drained.notify_all();
    }
}

/// Hands each chunk to the uploaders' queue.
struct QueueSink<'a> {
    queue: &'a Queue,
    /// Set by an uploader that failed: the import stops.
    failed: &'a AtomicBool,
}

impl QueueSink<'_> {
    fn push(&self, id: ObjectId, bytes: ChunkBytes) -> scribe_objects::Result<()> {
        if self.failed.load(Ordering::SeqCst) {
            return Err(StoreError::SinkStopped {
                reason: "the upload failed".into(),
            });
        }
        if self.queue.push(id, bytes) {
            Ok(())
        } else {
            Err(StoreError::SinkStopped {
                reason: "the upload stopped".into(),
            })
        }
    }
}

impl ChunkSink for QueueSink<'_> {
    fn chunk(&self, id: ChunkId, bytes: ChunkBytes) -> scribe_objects::Result<()> {
        self.push(ObjectId::chunk(id), bytes)
    }

    /// A large file's manifest follows its chunks to the server, which
    /// checks it while the later files stream (issue #19), so the submit
    /// at the end does not wait for the whole upload to be read back.
    /// Sent under the same pins as the chunks; the submission's own
    /// upload skips what the stream pinned ([`Streamed::pinned`]).
    fn manifest(&self, id: ManifestId, payload: Vec<u8>) -> scribe_objects::Result<()> {
        self.push(ObjectId::manifest(id), ChunkBytes::from_vec(payload))
    }
}

/// One upload connection: the remote's own, a caller's, or another one.
enum Lane<'r> {
    Shared(&'r ServerLink),
    Borrowed(&'r mut Client),
    Own(Box<Client>),
}

impl Lane<'_> {
    fn with<T>(&mut self, f: impl FnOnce(&mut Client) -> Result<T, ClientError>) -> Result<T> {
        match self {
            Lane::Shared(r) => r.with(f),
            Lane::Borrowed(c) => Ok(f(c)?),
            Lane::Own(c) => Ok(f(c)?),
        }
    }
}

/// What the uploaders share.
struct Shared<'a> {
    queue: Queue,
    /// Serializes group taking: one uploader fills its group at a time.
    taking: Mutex<()>,
    seen: Mutex<HashSet<ObjectId>>,
    groups: AtomicUsize,
    failed: &'a AtomicBool,
    repo: String,
    workspace: WorkspaceId,
    op: OperationId,
    ctx: &'a Context,
}

/// Chunk `paths` (`bytes` in all) into the cache's manifests while their
/// chunks stream to the server under the upload intent `op` of
/// `workspace`. Returns the imported files in order once every chunk the
/// server lacked is published. A second connection is opened only for
/// at least [`LANE_BYTES`] (a few edited files go on the one the
/// workspace has: a connection costs a handshake).
pub fn freeze_and_upload(
    remote: &ServerLink,
    workspace: WorkspaceId,
    op: &OperationId,
    paths: &[PathBuf],
    sizes: &[u64],
) -> Result<Streamed> {
    let bytes: u64 = sizes.iter().sum();
    let mut lanes = vec![Lane::Shared(remote)];
    let wanted = if bytes >= LANE_BYTES { LANES } else { 1 };
    for _ in 1..wanted {
        // Fewer lanes when the server refuses another connection.
        match remote.usable_extra_connection() {
            Some(c) => lanes.push(Lane::Own(Box::new(c))),
            None => break,
        }
    }
    stream_lanes(
        remote.cache(),
        lanes,
        remote.context(),
        remote.repo(),
        workspace,
        op,
        paths,
        Some(sizes),
    )
}

/// Where [`chunk_and_upload`] uploads: the repository and the upload
/// intent (`op` of `workspace`, registered in the repository), and what
/// it reports through.
pub struct StreamTarget<'a> {
    pub repo: &'a str,
    pub workspace: WorkspaceId,
    pub op: OperationId,
    pub ctx: &'a Context,
}

/// The streaming freeze of [`freeze_and_upload`] for a caller without a
/// workspace (the NoKV Workbench's `nokv collect`): the same chunking
/// (into `store`'s manifests; its chunks are never stored there), the
/// same pins, staged uploads and publications, on `main` and, over TCP,
/// `extra` connections to the same server (one upload lane each; [`LANES`]
/// in all is what `scribe submit` opens). Returns the files in order once
/// every chunk the server lacked is published.
pub fn chunk_and_upload(
    store: &ObjectStore,
    main: &mut Client,
    extra: Vec<Client>,
    target: &StreamTarget<'_>,
    paths: &[PathBuf],
) -> Result<Streamed> {
    let mut lanes = vec![Lane::Borrowed(main)];
    lanes.extend(extra.into_iter().map(|c| Lane::Own(Box::new(c))));
    stream_lanes(
        store,
        lanes,
        target.ctx,
        target.repo,
        target.workspace,
        &target.op,
        paths,
        None,
    )
}

/// `sizes` (one per path, taken just before) spare the freeze a lookup of
/// every path ([`ObjectStore::chunk_files_into`]).
#[allow(clippy::too_many_arguments)]
fn stream_lanes(
    store: &ObjectStore,
    lanes: Vec<Lane<'_>>,
    ctx: &Context,
    repo: &str,
    workspace: WorkspaceId,
    op: &OperationId,
    paths: &[PathBuf],
    sizes: Option<&[u64]>,
) -> Result<Streamed> {
    // The chunkers get a pool of their own. They block on the upload
    // queue when it is full; on the process's shared pool, which an
    // in-process server (a path URL: the embedded default) also needs to
    // store each group (`ObjectPutMany`'s hashing, a staged batch's
    // publication), every worker waited for the queue to drain and the
    // uploader for a worker: every embedded import of the 12,980-file
    // registry tree hung (issue 19, found 2026-12-07). A pool of the
    // shared pool's size: over TCP the freeze runs as before.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(rayon::current_num_threads())
        .thread_name(|i| format!("scribe-freeze-{i}"))
        .build()
        .map_err(|e| {
            Error::new(
                ErrorCode::Internal,
                format!("cannot start the freeze's threads: {e}"),
            )
        })?;
    let failed = AtomicBool::new(false);
    let shared = Shared {
        queue: Queue::new(),
        taking: Mutex::new(()),
        seen: Mutex::new(HashSet::new()),
        groups: AtomicUsize::new(0),
        failed: &failed,
        repo: repo.to_string(),
        workspace,
        op: *op,
        ctx,
    };
    std::thread::scope(|s| {
        let handles: Vec<_> = lanes
            .into_iter()
            .map(|mut lane| {
                let shared = &shared;
                s.spawn(move || {
                    let r = upload_queue(&mut lane, shared);
                    if r.is_err() {
                        shared.failed.store(true, Ordering::SeqCst);
                        // A chunker blocked on a full queue must not wait
                        // for uploaders that are gone (it would hold the
                        // workspace forever): the queue refuses from now on.
                        shared.queue.abandon();
                    }
                    r
                })
            })
            .collect();
        let sink = QueueSink {
            queue: &shared.queue,
            failed: &failed,
        };
        let imported = pool.install(|| store.chunk_files_into(paths, sizes, &sink));
        // The uploaders finish what the queue holds.
        shared.queue.close();
        let mut objects = 0;
        let mut bytes = 0;
        let mut first_err = None;
        for h in handles {
            match h.join() {
                Ok(Ok((o, b))) => {
                    objects += o;
                    bytes += b;
                }
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert(Error::new(
                        ErrorCode::Internal,
                        "an upload thread panicked",
                    ));
                }
            }
        }
        // The uploaders' own error explains a stopped import best.
        if let Some(e) = first_err {
            return Err(e);
        }
        let pinned = std::mem::take(
            &mut *shared
                .seen
                .lock()
                .map_err(|_| Error::new(ErrorCode::Internal, "upload set lock poisoned"))?,
        );
        Ok(Streamed {
            files: imported?,
            objects,
            bytes,
            pinned,
        })
    })
}

/// Take the next group from the queue: `None` when it is closed and empty.
/// A group ends at [`GROUP_CHUNKS`], at [`GROUP_BYTES`], or when no chunk
/// arrived for [`GROUP_WAIT`].
fn next_group(sh: &Shared<'_>) -> Option<Vec<(ObjectId, ChunkBytes)>> {
    let _turn = sh.taking.lock().unwrap_or_else(|p| p.into_inner());
    let mut group = Vec::new();
    let mut group_bytes = 0;
    sh.queue.take(&mut group, &mut group_bytes, None).ok()?;
    while group.len() < GROUP_CHUNKS && group_bytes < GROUP_BYTES {
        let wait = Some(Instant::now() + GROUP_WAIT);
        if sh.queue.take(&mut group, &mut group_bytes, wait).is_err() {
            break;
        }
    }
    Some(group)
}

/// One uploader: groups, pins and checks, sends what is missing, then
/// publishes its connection's stage.
fn upload_queue(lane: &mut Lane<'_>, sh: &Shared<'_>) -> Result<(usize, u64)> {
    let mut objects = 0usize;
    let mut bytes = 0u64;
    let (repo, workspace, op) = (sh.repo.as_str(), sh.workspace, sh.op);
    while let Some(mut group) = next_group(sh) {
        if sh.failed.load(Ordering::SeqCst) {
            break;
        }
        // A chunk repeated within the submission is sent once.
        {
            let mut seen = sh
                .seen
                .lock()
                .map_err(|_| Error::new(ErrorCode::Internal, "upload set lock poisoned"))?;
            group.retain(|(id, bytes)| {
                let new = seen.insert(*id);
                if !new {
                    sh.ctx.progress.advance(Task::Stream, bytes.len() as u64);
                }
                new
            });
        }
        if group.is_empty() {
            continue;
        }
        let ids: Vec<ObjectId> = group.iter().map(|(id, _)| *id).collect();
        let missing: HashSet<ObjectId> = lane
            .with(|c| c.objects_pin_missing(repo, workspace, op, &ids))?
            .into_iter()
            .collect();
        // Small chunks (a small file is one) travel many to a request
        // (`ObjectPutMany`: one durable publication each); large ones as
        // staged pieces, published in the server's batches.
        let mut many: Vec<m::ObjectPiece> = Vec::new();
        let mut many_bytes = 0usize;
        for (oid, data) in group {
            // A manifest is sent like a small chunk but is no file's bytes.
            let chunk = oid.kind == ObjectKind::Chunk;
            let len = data.len();
            if missing.contains(&oid) {
                if len > crate::transfer::SMALL_OBJECT_BYTES {
                    lane.with(|c| c.put_object_staged(repo, workspace, op, oid, &data))?;
                    sh.ctx.progress.advance(Task::Sent, len as u64);
                } else {
                    if many_bytes + len > MAX_OBJECT_DATA_PER_FRAME as usize
                        || many.len() >= crate::transfer::MAX_GROUP_OBJECTS
                    {
                        put_many(lane, sh, &mut many)?;
                        many_bytes = 0;
                    }
                    many_bytes += len;
                    // A small file's buffer moves into the request: its
                    // bytes are not copied on their way to the socket.
                    many.push(m::ObjectPiece {
                        id: oid,
                        data: scribe_format::wire::Bytes(data.into_vec()),
                    });
                }
                objects += 1;
                bytes += len as u64;
            }
            if chunk {
                sh.ctx.progress.advance(Task::Stream, len as u64);
            }
        }
        put_many(lane, sh, &mut many)?;
        let n = sh.groups.fetch_add(1, Ordering::SeqCst) + 1;
        sh.ctx.failpoints.nth("submit-stream-group", n);
        // A slow link, for crash tests (`SCRIBE_TEST_SLOW_MS`).
        sh.ctx.failpoints.pause();
    }
    lane.with(|c| c.objects_publish(repo))?;
    Ok((objects, bytes))
}

/// Send `objects` (small, missing on the server) in one `ObjectPutMany`.
fn put_many(lane: &mut Lane<'_>, sh: &Shared<'_>, objects: &mut Vec<m::ObjectPiece>) -> Result<()> {
    if objects.is_empty() {
        return Ok(());
    }
    let objects = std::mem::take(objects);
    let sent: u64 = objects
        .iter()
        .filter(|o| o.id.kind == ObjectKind::Chunk)
        .map(|o| o.data.0.len() as u64)
        .sum();
    lane.with(|c| {
        c.object_put_many(m::ObjectPutMany {
            repo: sh.repo.clone(),
            operation: sh.op,
            workspace: sh.workspace,
            objects,
        })
    })?;
    sh.ctx.progress.advance(Task::Sent, sent);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use scribe_format::ChunkId;

    fn item(i: u32) -> (ObjectId, ChunkBytes) {
        let mut id = [0u8; 32];
        id[..4].copy_from_slice(&i.to_le_bytes());
        (
            ObjectId::chunk(ChunkId(id)),
            ChunkBytes::from_vec(i.to_le_bytes().to_vec()),
        )
    }

    fn number(c: &(ObjectId, ChunkBytes)) -> u32 {
        u32::from_le_bytes(c.1[..4].try_into().unwrap())
    }

    /// Chunks pushed by workers that wait for room (the queue full at
    /// [`QUEUE_CHUNKS`]) all reach the taker, each once, in groups of at
    /// most [`GROUP_CHUNKS`]; an empty open queue times out, a closed one
    /// says so. Signals are sent only to waiters: a lost one would leave a
    /// worker or the taker asleep and this test hung.
    #[test]
    fn takers_get_every_chunk_once_while_givers_wait_for_room() {
        let q = Queue::new();
        let total = (QUEUE_CHUNKS * 3) as u32;
        let mut got = Vec::new();
        std::thread::scope(|s| {
            for w in 0..2u32 {
                let q = &q;
                s.spawn(move || {
                    for i in (w..total).step_by(2) {
                        let (id, b) = item(i);
                        assert!(q.push(id, b));
                    }
                });
            }
            while got.len() < total as usize {
                let mut group = Vec::new();
                let mut bytes = 0;
                q.take(&mut group, &mut bytes, None).unwrap();
                assert!(!group.is_empty() && group.len() <= GROUP_CHUNKS);
                assert_eq!(bytes, group.len() * 4);
                got.extend(group.iter().map(number));
                // Let the workers fill the queue and wait for room.
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        got.sort_unstable();
        assert_eq!(got, (0..total).collect::<Vec<_>>());
        let (mut group, mut bytes) = (Vec::new(), 0);
        let soon = Some(Instant::now() + Duration::from_millis(5));
        assert!(matches!(
            q.take(&mut group, &mut bytes, soon),
            Err(Empty::Timeout)
        ));
        let (id, b) = item(7);
        assert!(q.push(id, b));
        q.close();
        assert!(!q.push(item(8).0, item(8).1), "closed: refused");
        q.take(&mut group, &mut bytes, None).unwrap();
        assert_eq!(group.iter().map(number).collect::<Vec<_>>(), [7]);
        assert!(matches!(
            q.take(&mut group, &mut bytes, None),
            Err(Empty::Closed)
        ));
        let st = q.lock();
        assert_eq!((st.takers, st.givers, st.bytes), (0, 0, 0));
    }
}

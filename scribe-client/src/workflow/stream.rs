//! Streaming freeze of large files: each chunk goes from the working file
//! straight to the server, never into the workspace cache.
//!
//! The files are chunked by `scribe-objects` exactly as an import would
//! (same cut points, chunk ids and manifests); its worker threads hand each
//! hashed chunk to a bounded queue. Uploader threads ([`LANES`] over TCP,
//! each with its own connection, so one sends while the server publishes
//! the other's stage; one on the in-process transport) take the queue in
//! groups (at most [`GROUP_CHUNKS`] chunks / [`GROUP_BYTES`]), pin the
//! group's ids for the submission's upload intent and learn which the
//! server lacks (`ObjectsPinMissing`, one transaction per group), and send
//! only those as staged puts, which the server publishes in durable
//! batches of 64 MiB; a final `ObjectsPublish` on each connection
//! publishes the rest. Reading, chunking and hashing overlap the transfer
//! and the server's writes; the file is read once; only the manifests are
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

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::Mutex;
use std::time::Duration;

use scribe_format::{ChunkId, ErrorCode, ObjectId, OperationId, WorkspaceId};
use scribe_objects::{ChunkBytes, ChunkSink, ImportedFile, ObjectStore, StoreError};

use crate::client::{Client, ClientError};
use crate::error::{Error, Result};
use crate::link::ServerLink;
use crate::progress::Task;
use crate::Context;

/// Most chunks per pin-and-check round trip.
const GROUP_CHUNKS: usize = 8;
/// Most chunk bytes per group.
const GROUP_BYTES: usize = 32 << 20;
/// Chunks waiting for the uploader (bounds memory with the group).
const QUEUE_CHUNKS: usize = 8;
/// How long the uploader waits to fill a group before sending what it has.
const GROUP_WAIT: Duration = Duration::from_millis(20);
/// Upload connections over TCP.
const LANES: usize = 2;

/// What the streaming freeze did.
pub struct Streamed {
    pub files: Vec<ImportedFile>,
    /// Chunks sent (the server lacked them).
    pub objects: usize,
    /// Chunk bytes sent.
    pub bytes: u64,
}

/// Hands each chunk to the uploaders' queue; dropping it closes the queue.
struct QueueSink<'a> {
    tx: SyncSender<(ChunkId, ChunkBytes)>,
    /// Set by an uploader that failed: the import stops.
    failed: &'a AtomicBool,
}

impl ChunkSink for QueueSink<'_> {
    fn chunk(&self, id: ChunkId, bytes: ChunkBytes) -> scribe_objects::Result<()> {
        if self.failed.load(Ordering::SeqCst) {
            return Err(StoreError::SinkStopped {
                reason: "the upload failed".into(),
            });
        }
        self.tx
            .send((id, bytes))
            .map_err(|_| StoreError::SinkStopped {
                reason: "the upload stopped".into(),
            })
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
    rx: Mutex<Receiver<(ChunkId, ChunkBytes)>>,
    seen: Mutex<HashSet<ChunkId>>,
    groups: AtomicUsize,
    failed: &'a AtomicBool,
    repo: String,
    workspace: WorkspaceId,
    op: OperationId,
    ctx: &'a Context,
}

/// Chunk `paths` into the cache's manifests while their chunks stream to
/// the server under the upload intent `op` of `workspace`. Returns the
/// imported files in order once every chunk the server lacked is
/// published.
pub fn freeze_and_upload(
    remote: &ServerLink,
    workspace: WorkspaceId,
    op: &OperationId,
    paths: &[PathBuf],
) -> Result<Streamed> {
    let mut lanes = vec![Lane::Shared(remote)];
    for _ in 1..LANES {
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
    )
}

fn stream_lanes(
    store: &ObjectStore,
    lanes: Vec<Lane<'_>>,
    ctx: &Context,
    repo: &str,
    workspace: WorkspaceId,
    op: &OperationId,
    paths: &[PathBuf],
) -> Result<Streamed> {
    let (tx, rx) = sync_channel::<(ChunkId, ChunkBytes)>(QUEUE_CHUNKS);
    let failed = AtomicBool::new(false);
    let shared = Shared {
        rx: Mutex::new(rx),
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
                        // Keep taking chunks until the import sees the
                        // failure and closes the queue: a chunker blocked
                        // on a full queue must not wait for uploaders that
                        // are gone (it would hold the workspace forever).
                        drain(shared);
                    }
                    r
                })
            })
            .collect();
        let sink = QueueSink {
            tx,
            failed: &failed,
        };
        let imported = store.chunk_files_into(paths, &sink);
        // Closes the queue: the uploaders finish what it holds.
        drop(sink);
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
        Ok(Streamed {
            files: imported?,
            objects,
            bytes,
        })
    })
}

/// Discard what the queue holds until the import closes it.
fn drain(sh: &Shared<'_>) {
    if let Ok(rx) = sh.rx.lock() {
        while rx.recv().is_ok() {}
    }
}

/// Take the next group from the queue: `None` when it is closed and empty.
fn next_group(sh: &Shared<'_>) -> Option<Vec<(ChunkId, ChunkBytes)>> {
    let rx = sh.rx.lock().ok()?;
    let first = rx.recv().ok()?;
    let mut group = vec![first];
    let mut group_bytes = group[0].1.len();
    while group.len() < GROUP_CHUNKS && group_bytes < GROUP_BYTES {
        match rx.recv_timeout(GROUP_WAIT) {
            Ok(c) => {
                group_bytes += c.1.len();
                group.push(c);
            }
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
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
        let ids: Vec<ObjectId> = group.iter().map(|(id, _)| ObjectId::chunk(*id)).collect();
        let missing: HashSet<ObjectId> = lane
            .with(|c| c.objects_pin_missing(repo, workspace, op, &ids))?
            .into_iter()
            .collect();
        for (id, data) in &group {
            let oid = ObjectId::chunk(*id);
            if missing.contains(&oid) {
                lane.with(|c| c.put_object_staged(repo, workspace, op, oid, data))?;
                objects += 1;
                bytes += data.len() as u64;
                sh.ctx.progress.advance(Task::Sent, data.len() as u64);
            }
            sh.ctx.progress.advance(Task::Stream, data.len() as u64);
        }
        let n = sh.groups.fetch_add(1, Ordering::SeqCst) + 1;
        sh.ctx.failpoints.nth("submit-stream-group", n);
        // A slow link, for crash tests (`SCRIBE_TEST_SLOW_MS`).
        sh.ctx.failpoints.pause();
    }
    lane.with(|c| c.objects_publish(repo))?;
    Ok((objects, bytes))
}

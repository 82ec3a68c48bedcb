//! Streaming freeze of large files: each chunk goes from the working file
//! straight to the server, never into the workspace cache.
//!
//! The files are chunked by `scribe-objects` exactly as an import would
//! (same cut points, chunk ids and manifests); its worker threads hand each
//! hashed chunk to a bounded queue. One uploader thread takes the queue in
//! groups (at most [`GROUP_CHUNKS`] chunks / [`GROUP_BYTES`]), pins the
//! group's ids for the submission's upload intent and learns which the
//! server lacks (`ObjectsPinMissing`, one transaction per group), and sends
//! only those as staged puts, which the server publishes in durable
//! batches of 64 MiB; a final `ObjectsPublish` publishes the rest. Reading,
//! chunking and hashing overlap the transfer and the server's writes; the
//! file is read once; only the manifests are written to the cache.
//!
//! What makes this safe without a local copy: every chunk id is computed
//! from the very bytes sent, the manifest from those ids, and the pending
//! submission is written only after every chunk is published, so the
//! server holds all of a candidate's chunks before it is recorded. A file
//! rewritten while it is read is detected by the caller (its fingerprint
//! before and after differ) and the submit stops before recording anything.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::Mutex;
use std::time::Duration;

use indicatif::ProgressBar;
use scribe_format::{ChunkId, ObjectId, OperationId, WorkspaceId};
use scribe_objects::{ChunkBytes, ChunkSink, ImportedFile, StoreError};

use crate::error::{CliError, CliResult};
use crate::remote::{crash_count, Remote};

/// Most chunks per pin-and-check round trip.
const GROUP_CHUNKS: usize = 8;
/// Most chunk bytes per group.
const GROUP_BYTES: usize = 32 << 20;
/// Chunks waiting for the uploader (bounds memory with the group).
const QUEUE_CHUNKS: usize = 8;
/// How long the uploader waits to fill a group before sending what it has.
const GROUP_WAIT: Duration = Duration::from_millis(20);

/// What the streaming freeze did.
pub struct Streamed {
    pub files: Vec<ImportedFile>,
    /// Chunks sent (the server lacked them).
    pub objects: usize,
    /// Chunk bytes sent.
    pub bytes: u64,
}

/// Hands each chunk to the uploader's queue.
struct QueueSink {
    tx: Mutex<Option<SyncSender<(ChunkId, ChunkBytes)>>>,
}

impl QueueSink {
    fn close(&self) {
        if let Ok(mut tx) = self.tx.lock() {
            tx.take();
        }
    }
}

impl ChunkSink for QueueSink {
    fn chunk(&self, id: ChunkId, bytes: ChunkBytes) -> scribe_objects::Result<()> {
        let tx = self
            .tx
            .lock()
            .map_err(|_| StoreError::Internal("upload queue lock poisoned"))?
            .clone();
        match tx {
            Some(tx) => tx.send((id, bytes)).map_err(|_| StoreError::SinkStopped {
                reason: "the upload stopped".into(),
            }),
            None => Err(StoreError::SinkStopped {
                reason: "the upload was closed".into(),
            }),
        }
    }
}

/// Chunk `paths` into the cache's manifests while their chunks stream to
/// the server under the upload intent `op` of `workspace`. Returns the
/// imported files in order once every chunk the server lacked is
/// published.
pub fn freeze_and_upload(
    remote: &Remote,
    workspace: WorkspaceId,
    op: &OperationId,
    paths: &[PathBuf],
    bar: &ProgressBar,
) -> CliResult<Streamed> {
    let (tx, rx) = sync_channel::<(ChunkId, ChunkBytes)>(QUEUE_CHUNKS);
    let sink = QueueSink {
        tx: Mutex::new(Some(tx)),
    };
    let repo = remote.repo.clone();
    std::thread::scope(|s| {
        let uploader = s.spawn(|| upload_queue(remote, &repo, workspace, op, rx, bar));
        let imported = remote.cache().chunk_files_into(paths, &sink);
        sink.close();
        let uploaded = uploader
            .join()
            .map_err(|_| CliError::new("internal", "the upload thread panicked"))?;
        // The uploader's own error explains a stopped import best.
        let (objects, bytes) = uploaded?;
        Ok(Streamed {
            files: imported?,
            objects,
            bytes,
        })
    })
}

/// The uploader: groups, pins and checks, sends what is missing, then
/// publishes. Dropping `rx` on an error stops the import.
fn upload_queue(
    remote: &Remote,
    repo: &str,
    workspace: WorkspaceId,
    op: &OperationId,
    rx: Receiver<(ChunkId, ChunkBytes)>,
    bar: &ProgressBar,
) -> CliResult<(usize, u64)> {
    let mut seen: HashSet<ChunkId> = HashSet::new();
    let mut objects = 0usize;
    let mut bytes = 0u64;
    let mut groups = 0usize;
    while let Ok(first) = rx.recv() {
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
        // A chunk repeated within the submission is sent once.
        group.retain(|(id, bytes)| {
            let new = seen.insert(*id);
            if !new {
                bar.inc(bytes.len() as u64);
            }
            new
        });
        if group.is_empty() {
            continue;
        }
        let ids: Vec<ObjectId> = group.iter().map(|(id, _)| ObjectId::chunk(*id)).collect();
        let missing: HashSet<ObjectId> = remote
            .with(|c| c.objects_pin_missing(repo, workspace, *op, &ids))?
            .into_iter()
            .collect();
        for (id, data) in &group {
            let oid = ObjectId::chunk(*id);
            if missing.contains(&oid) {
                remote.with(|c| c.put_object_staged(repo, workspace, *op, oid, data))?;
                objects += 1;
                bytes += data.len() as u64;
            }
            bar.inc(data.len() as u64);
        }
        groups += 1;
        crash_count("submit-stream-group", groups);
    }
    remote.with(|c| c.objects_publish(repo))?;
    Ok((objects, bytes))
}

//! Streaming chunked import (FastCDC-2020, chunking profile 1) and file
//! reconstruction.
//!
//! One large file is a pipeline: the calling thread reads and cuts chunks;
//! a hasher thread computes the `FileContentId` over the stream; worker
//! threads hash each chunk, compress it under the store's policy and append
//! it through the one pack writer. Channels are bounded, so memory is a few
//! chunk sizes whatever the file size. Many small files are spread over the
//! rayon pool; each is one chunk, whose `ChunkId` equals its `FileContentId`
//! (both are `blake3` of the same bytes), so it is hashed once.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex};

use rayon::prelude::*;
use scribe_format::limits::{CHUNK_AVG_BYTES, CHUNK_MAX_BYTES, CHUNK_MIN_BYTES, MAX_FILE_SIZE};
use scribe_format::manifest::{ChunkRef, Manifest, PROFILE_FASTCDC_2020};
use scribe_format::{ChunkId, FileContentId, ManifestId, ObjectId, ObjectKind};

use crate::batch::{Batch, PutOutcome};
use crate::error::{io_err, Result, StoreError};
use crate::gear::Gear;
use crate::layout::sync_dir;
use crate::locator::content_row;
use crate::manifest_bytes;
use crate::store::ObjectStore;

const MIN: usize = CHUNK_MIN_BYTES as usize;
const AVG: usize = CHUNK_AVG_BYTES as usize;
const MAX: usize = CHUNK_MAX_BYTES as usize;

/// The result of importing one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportedFile {
    pub manifest_id: ManifestId,
    pub content_id: FileContentId,
    pub size: u64,
    pub chunks: Vec<ChunkRef>,
    /// Envelope bytes newly written for this file (0 when fully deduplicated).
    pub new_bytes_stored: u64,
    /// True when the content index found a verified manifest for this
    /// content, so the file was hashed but not chunked.
    pub via_content_index: bool,
    /// The file as its open handle saw it after its last byte was read
    /// (`None`: bytes imported from memory, not from a file). A caller that fingerprinted the
    /// file before compares the two to tell whether it changed while it
    /// was read, without looking the path up again.
    pub read_stamp: Option<ReadStamp>,
}

/// A file's size and modification time, taken on its open handle (`fstat`)
/// after its bytes were read. On the handle, not the path: a file renamed
/// over the path after it was opened (an editor's atomic save) leaves the
/// bytes read whole and consistent; a write into the file while it is read
/// changes the modification time seen here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadStamp {
    pub size: u64,
    pub modified: Option<std::time::SystemTime>,
}

impl ReadStamp {
    fn of(f: &File, path: &Path) -> Result<ReadStamp> {
        let m = f.metadata().map_err(io_err(path))?;
        Ok(ReadStamp {
            size: m.len(),
            modified: m.modified().ok(),
        })
    }
}

/// FastCDC-2020 cut-point search with profile 1 parameters.
fn profile_one() -> Gear {
    Gear::new(MIN, AVG, MAX)
}

/// Chunk lengths of `data` under profile 1 (equal to fastcdc's `StreamCDC`
/// with min 1 MiB, average 4 MiB, max 16 MiB, level 1, seed 0).
pub fn chunk_boundaries(data: &[u8]) -> Vec<usize> {
    let c = profile_one();
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        let end = (pos + MAX).min(data.len());
        let n = c.cut(&data[pos..end]);
        out.push(n);
        pos += n;
    }
    out
}

/// Whether profile 1 cuts exactly `chunk` at its position in a file whose
/// bytes after it begin with `next` (empty for the file's last chunk; at
/// most two bytes of it are read). The cut search examines candidate ends
/// in pairs and decides a cut at length `n` from the byte at `n`, so the
/// chunk plus two following bytes decide it exactly as the whole stream
/// would: a chunk whose search stops earlier, later, or never is refused.
/// Acceptance checks every chunk of a new manifest with it (issue #14). The
/// chunk and `next` are judged where they lie (no copy of the chunk).
pub fn is_profile_cut(chunk: &[u8], next: &[u8]) -> bool {
    let n = chunk.len();
    n != 0 && n <= MAX && profile_one().cuts_exactly(chunk, next)
}

/// Read windows recycled across the files of one import. Without it each
/// file's chunker allocates its own windows and the allocator returns them
/// to the system between files, so every byte imported also cost a page
/// fault and the zeroing of a fresh page (measured: 2 GiB of `clear_page`
/// per 2 GiB streamed). The pool holds no more windows than were alive at
/// once, and at most [`POOL_MAX`].
#[derive(Default)]
pub(crate) struct WindowPool {
    free: Mutex<Vec<Vec<u8>>>,
}

/// Most idle windows a pool keeps (8 x 32 MiB).
const POOL_MAX: usize = 8;

impl WindowPool {
    /// A window of [`WINDOW`] bytes: a recycled one, or a new one.
    fn take(self: &Arc<Self>) -> Window {
        let buf = self
            .free
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop()
            .unwrap_or_else(|| vec![0u8; WINDOW]);
        Window {
            buf,
            pool: Some(self.clone()),
            used: 0,
        }
    }
}

/// A read window; its buffer goes back to its pool when the last chunk
/// cut from it is dropped.
pub(crate) struct Window {
    buf: Vec<u8>,
    pool: Option<Arc<WindowPool>>,
    /// Bytes of `buf` holding the stream (the rest is unused).
    used: usize,
}

impl Drop for Window {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            let mut free = pool.free.lock().unwrap_or_else(|p| p.into_inner());
            if free.len() < POOL_MAX && self.buf.len() == WINDOW {
                free.push(std::mem::take(&mut self.buf));
            }
        }
    }
}

/// One chunk: a range of a shared read window (no copy per chunk).
#[derive(Clone)]
pub(crate) struct ChunkSlice {
    window: Arc<Window>,
    start: usize,
    len: usize,
}

impl std::ops::Deref for ChunkSlice {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.window.buf[self.start..self.start + self.len]
    }
}

/// A chunk's bytes as cut from the stream, handed to a [`ChunkSink`]. It
/// shares the read window it was cut from: cloning is cheap, and holding it
/// keeps that window (at most 32 MiB) alive, so a sink should pass chunks on
/// through a bounded queue rather than collect them.
#[derive(Clone)]
pub struct ChunkBytes(ChunkSlice);

impl ChunkBytes {
    /// A chunk handed to a sink, which may queue it: a chunk of a window
    /// the stream filled less than half (a file's last window) is copied
    /// out, so the pooled 32 MiB window (whose pages an earlier large file
    /// may have touched) is not held by a few queued megabytes. Without
    /// it a streamed toolchain import held 55 windows (1.8 GB) at once.
    fn for_sink(slice: ChunkSlice) -> Self {
        if slice.window.pool.is_some() && slice.window.used < WINDOW / 2 {
            return ChunkBytes::copy_of(&slice);
        }
        ChunkBytes(slice)
    }

    /// Bytes that are not a chunk of a read window (a manifest a sink
    /// queues with the chunks).
    pub fn from_vec(buf: Vec<u8>) -> Self {
        let len = buf.len();
        ChunkBytes(ChunkSlice {
            window: Arc::new(Window {
                buf,
                pool: None,
                used: len,
            }),
            start: 0,
            len,
        })
    }

    /// The chunk's bytes as a vector of their own: moved out, not copied,
    /// when nothing else holds a buffer that is exactly this chunk (a small
    /// file read whole, a manifest); copied otherwise.
    pub fn into_vec(self) -> Vec<u8> {
        let ChunkSlice { window, start, len } = self.0;
        match Arc::try_unwrap(window) {
            Ok(mut w) if w.pool.is_none() && start == 0 && len == w.buf.len() => {
                std::mem::take(&mut w.buf)
            }
            Ok(w) => w.buf[start..start + len].to_vec(),
            Err(w) => w.buf[start..start + len].to_vec(),
        }
    }

    fn copy_of(data: &[u8]) -> Self {
        ChunkBytes(ChunkSlice {
            window: Arc::new(Window {
                buf: data.to_vec(),
                pool: None,
                used: data.len(),
            }),
            start: 0,
            len: data.len(),
        })
    }
}

impl std::ops::Deref for ChunkBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

/// Where [`ObjectStore::chunk_files_into`] sends chunks instead of storing
/// them (e.g. straight to a server, so a large file is never copied into
/// the local store).
pub trait ChunkSink: Sync {
    /// One chunk and its id (BLAKE3 of these bytes, computed by the
    /// import), called from the import's worker threads in no particular
    /// order; every chunk of every file is passed, repeats included. An
    /// error stops the import, which returns it.
    fn chunk(&self, id: ChunkId, bytes: ChunkBytes) -> Result<()>;

    /// The manifest of a file larger than the profile minimum, once every
    /// chunk of the file was passed to [`ChunkSink::chunk`] (a server may
    /// check it while later files stream: issue #19). The file is also in
    /// the import's result. Default: nothing. (Small files' manifests are
    /// not passed: streamed among their chunks they doubled the stream's
    /// groups, each a pin transaction and a durable publication, and made a
    /// 52,000-file submit 1 s slower than sending them after it.)
    fn manifest(&self, id: ManifestId, payload: Vec<u8>) -> Result<()> {
        let _ = (id, payload);
        Ok(())
    }
}

/// Where an import's chunks go: the batch's store, or a sink.
type Dest<'a> = Option<&'a dyn ChunkSink>;

/// Window size: two maximum chunks, so a window yields at least one
/// maximum chunk's worth of cuts before the remainder (usually less than
/// an average chunk) moves.
const WINDOW: usize = 2 * MAX;

/// Reads a stream and yields profile-1 chunks as ranges of shared read
/// windows. Only the bytes after the last cut of a window are copied (into
/// the next window); windows return to the [`WindowPool`] once no chunk
/// refers to them. Memory is bounded by the chunks in flight (bounded
/// channels) plus the pool, never by the file size.
struct StreamChunker<R> {
    reader: R,
    path: PathBuf,
    window: Arc<Window>,
    start: usize,
    filled: usize,
    eof: bool,
    cutter: Gear,
    total: u64,
    pool: Arc<WindowPool>,
    /// The stream's expected length when it fits half a window: the first
    /// window is then a buffer of just that size (and one byte to see the
    /// end), not a pooled one.
    expected: Option<usize>,
}

impl<R: Read> StreamChunker<R> {
    /// A chunker for a stream expected to be `len` bytes long (a file's
    /// length when it was opened). Below half a window its first window is
    /// its own buffer of that size: its chunks share it with nothing else,
    /// so a sink takes them without a copy ([`ChunkBytes::for_sink`]) and
    /// no pooled 32 MiB window is held. A stream that turns out longer
    /// goes on in pooled windows (the cuts are the same).
    fn with_expected_len(reader: R, path: PathBuf, pool: Arc<WindowPool>, len: u64) -> Self {
        let mut ch = Self::new(reader, path, pool);
        ch.expected = usize::try_from(len).ok().filter(|&n| n < WINDOW / 2);
        ch
    }

    fn new(reader: R, path: PathBuf, pool: Arc<WindowPool>) -> Self {
        StreamChunker {
            reader,
            path,
            window: Arc::new(Window {
                buf: Vec::new(),
                pool: None,
                used: 0,
            }),
            start: 0,
            filled: 0,
            eof: false,
            cutter: profile_one(),
            total: 0,
            pool,
            expected: None,
        }
    }

    /// Move the remainder into a fresh window and fill it.
    fn refill(&mut self) -> Result<()> {
        let mut next = match self.expected.take() {
            Some(n) if self.filled == 0 => Window {
                buf: vec![0u8; n + 1],
                pool: None,
                used: 0,
            },
            _ => self.pool.take(),
        };
        let rem = self.filled - self.start;
        {
            let buf = &mut next.buf;
            buf[..rem].copy_from_slice(&self.window.buf[self.start..self.filled]);
            let mut filled = rem;
            while !self.eof && filled < buf.len() {
                match self.reader.read(&mut buf[filled..]) {
                    Ok(0) => self.eof = true,
                    Ok(n) => filled += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        return Err(StoreError::Io {
                            path: self.path.clone(),
                            source: e,
                        })
                    }
                }
            }
            self.filled = filled;
        }
        next.used = self.filled;
        self.window = Arc::new(next);
        self.start = 0;
        Ok(())
    }

    fn next_chunk(&mut self) -> Result<Option<ChunkSlice>> {
        // A window is refilled until it holds a maximum chunk or the end
        // (once for a pooled window; a first window sized to the expected
        // length may need another when the stream is longer).
        while self.filled - self.start < MAX && !self.eof {
            let avail = self.filled - self.start;
            // A cut found among the bytes at hand is the one the whole
            // stream gives: the search decides each candidate from the
            // bytes up to it, and below the average it tests them with the
            // same strict mask however many bytes follow. Only without one
            // (or with at most the minimum at hand) must the remainder move
            // to a new window; cutting here first moves far fewer bytes
            // (the copy was 2 % of all samples of a 2 GiB import).
            let n = self.cutter.cut(&self.window.buf[self.start..self.filled]);
            if n < avail {
                return self.take(n);
            }
            self.refill()?;
        }
        let avail = self.filled - self.start;
        if avail == 0 {
            return Ok(None);
        }
        let window = &self.window.buf[self.start..self.start + avail.min(MAX)];
        let n = self.cutter.cut(window);
        self.take(n)
    }

    /// The next `n` bytes of the window as a chunk.
    fn take(&mut self, n: usize) -> Result<Option<ChunkSlice>> {
        let chunk = ChunkSlice {
            window: self.window.clone(),
            start: self.start,
            len: n,
        };
        self.start += n;
        self.total += n as u64;
        if self.total > MAX_FILE_SIZE {
            return Err(StoreError::FileTooLarge {
                path: self.path.clone(),
                size: self.total,
                limit: MAX_FILE_SIZE,
            });
        }
        Ok(Some(chunk))
    }

    /// Whether the stream is fully consumed.
    fn finished(&self) -> bool {
        self.eof && self.start == self.filled
    }
}

/// Read size of the whole-file hash; large enough for `update_rayon` to
/// spread each block over every core.
const HASH_BLOCK: usize = 16 << 20;

/// `FileContentId` and length of a whole file, hashed with BLAKE3 on all
/// cores (`update_rayon`), one block at a time. Plain reads rather than a
/// memory map, so a file truncated meanwhile is an error, not a SIGBUS.
fn hash_file(f: &mut File, path: &Path) -> Result<(u64, FileContentId)> {
    let mut h = blake3::Hasher::new();
    let mut buf = vec![0u8; HASH_BLOCK];
    let mut total = 0u64;
    loop {
        let mut filled = 0;
        while filled < buf.len() {
            match f.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err(path)(e)),
            }
        }
        if filled == 0 {
            break;
        }
        h.update_rayon(&buf[..filled]);
        total += filled as u64;
        if total > MAX_FILE_SIZE {
            return Err(StoreError::FileTooLarge {
                path: path.to_path_buf(),
                size: total,
                limit: MAX_FILE_SIZE,
            });
        }
    }
    Ok((total, FileContentId(*h.finalize().as_bytes())))
}

/// One chunk to hash and store: its index in the file and its bytes.
type Job = (usize, ChunkSlice);
type SharedJobs = Arc<Mutex<Receiver<Job>>>;

fn worker_count() -> usize {
    std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 8)
}

/// Store a file's manifest in `batch` and, with a sink, pass a large
/// file's on (after the file's chunks).
fn put_manifest(
    batch: &Batch<'_>,
    size: u64,
    content_id: FileContentId,
    chunks: Vec<ChunkRef>,
    mut new_bytes: u64,
    sink: Dest<'_>,
) -> Result<ImportedFile> {
    let payload = manifest_bytes::encode(size, &content_id, &chunks).map_err(|e| {
        StoreError::InvalidInput {
            id: ObjectId::new(ObjectKind::Manifest, [0; 32]),
            reason: e.to_string(),
        }
    })?;
    let id = ObjectId::manifest(ManifestId::of_payload(&payload));
    if let PutOutcome::Written { envelope_len } = batch.put_with_id(id, &payload)? {
        new_bytes += envelope_len;
    }
    let manifest_id = ManifestId(id.digest);
    if size > MIN as u64 {
        // Also when the manifest was already stored: a missing or stale
        // row heals here.
        batch.record_content(content_row(size, &content_id, &manifest_id));
    }
    if let Some(sink) = sink.filter(|_| size > MIN as u64) {
        sink.manifest(manifest_id, payload)?;
    }
    Ok(ImportedFile {
        manifest_id,
        content_id,
        size,
        chunks,
        new_bytes_stored: new_bytes,
        via_content_index: false,
        read_stamp: None,
    })
}

/// The result for a file whose manifest the store (or batch) already has.
fn already_imported(
    batch: &Batch<'_>,
    size: u64,
    content_id: FileContentId,
    chunks: &[ChunkRef],
) -> Result<Option<ImportedFile>> {
    let payload = manifest_bytes::encode(size, &content_id, chunks).map_err(|e| {
        StoreError::InvalidInput {
            id: ObjectId::new(ObjectKind::Manifest, [0; 32]),
            reason: e.to_string(),
        }
    })?;
    let id = ManifestId::of_payload(&payload);
    if batch.has(&ObjectId::manifest(id))? {
        return Ok(Some(ImportedFile {
            manifest_id: id,
            content_id,
            size,
            chunks: chunks.to_vec(),
            new_bytes_stored: 0,
            via_content_index: false,
            read_stamp: None,
        }));
    }
    Ok(None)
}

/// The first `len` bytes of `f` (fewer if it ends sooner), read straight
/// into a buffer of that size: one `read` when the file still has them,
/// and nothing asked of the file past `len`.
fn read_prefix(f: &File, len: u64) -> std::io::Result<Vec<u8>> {
    let len = usize::try_from(len).map_err(|_| std::io::ErrorKind::OutOfMemory)?;
    let mut data = Vec::with_capacity(len);
    while data.len() < len {
        match crate::platform::read_spare(f, &mut data) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(data)
}

/// Import bytes that are already in memory and at most one chunk long.
fn import_small(
    batch: &Batch<'_>,
    data: std::borrow::Cow<'_, [u8]>,
    sink: Dest<'_>,
) -> Result<ImportedFile> {
    debug_assert!(data.len() <= MIN);
    let content_id = FileContentId::of(&data);
    if data.is_empty() {
        return put_manifest(batch, 0, content_id, Vec::new(), 0, None);
    }
    // One chunk: ChunkId and FileContentId are blake3 of the same bytes.
    let chunk = ChunkId(content_id.0);
    let chunks = vec![ChunkRef {
        id: chunk,
        length: data.len() as u32,
    }];
    if let Some(sink) = sink {
        let len = data.len() as u64;
        // A file read whole hands its buffer over; a window's chunk is
        // copied out (see `ChunkBytes::for_sink`).
        sink.chunk(chunk, ChunkBytes::from_vec(data.into_owned()))?;
        return put_manifest(batch, len, content_id, chunks, 0, None);
    }
    // A stored manifest was published with its chunks: nothing to write.
    if let Some(done) = already_imported(batch, data.len() as u64, content_id, &chunks)? {
        return Ok(done);
    }
    let mut new_bytes = 0;
    if let PutOutcome::Written { envelope_len } =
        batch.put_with_id(ObjectId::chunk(chunk), &data)?
    {
        new_bytes = envelope_len;
    }
    put_manifest(
        batch,
        data.len() as u64,
        content_id,
        chunks,
        new_bytes,
        None,
    )
}

/// The pipelined import of one stream into `batch`.
fn import_stream(
    batch: &Batch<'_>,
    reader: impl Read,
    path: &Path,
    sink: Dest<'_>,
    pool: &Arc<WindowPool>,
    expected_len: Option<u64>,
) -> Result<ImportedFile> {
    let mut chunker = match expected_len {
        Some(len) => {
            StreamChunker::with_expected_len(reader, path.to_path_buf(), pool.clone(), len)
        }
        None => StreamChunker::new(reader, path.to_path_buf(), pool.clone()),
    };
    let first = match chunker.next_chunk()? {
        None => return import_small(batch, std::borrow::Cow::Borrowed(&[]), sink),
        Some(c) => c,
    };
    if chunker.finished() {
        // A single chunk (every file of at most 1 MiB, and some larger).
        if first.len() <= MIN {
            return import_small(batch, std::borrow::Cow::Borrowed(&first), sink);
        }
    }
    let workers = worker_count();
    let failed = AtomicBool::new(false);
    let results: Mutex<Vec<(usize, ChunkId, u32, u64)>> = Mutex::new(Vec::new());
    let first_error: Mutex<Option<StoreError>> = Mutex::new(None);
    let record_error = |e: StoreError| {
        failed.store(true, Ordering::SeqCst);
        let mut slot = first_error.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(e);
        }
    };
    let (size, file_hash) = std::thread::scope(|s| -> Result<(u64, blake3::Hash)> {
        let (hash_tx, hash_rx) = sync_channel::<ChunkSlice>(2);
        let hasher = s.spawn(move || {
            let mut h = blake3::Hasher::new();
            for c in hash_rx {
                h.update(&c);
            }
            h.finalize()
        });
        let (work_tx, work_rx) = sync_channel::<Job>(workers);
        let work_rx: SharedJobs = Arc::new(Mutex::new(work_rx));
        let mut handles = Vec::new();
        for _ in 0..workers {
            let rx = work_rx.clone();
            let results = &results;
            let failed = &failed;
            let record_error = &record_error;
            handles.push(s.spawn(move || loop {
                let job = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                let Ok((idx, data)) = job else { break };
                if failed.load(Ordering::SeqCst) {
                    continue;
                }
                let id = ChunkId(*blake3::hash(&data).as_bytes());
                let len = data.len() as u32;
                let put = match sink {
                    Some(sink) => sink.chunk(id, ChunkBytes::for_sink(data)).map(|()| 0),
                    None => batch
                        .put_with_id(ObjectId::chunk(id), &data)
                        .map(|outcome| match outcome {
                            PutOutcome::Written { envelope_len } => envelope_len,
                            PutOutcome::AlreadyPresent => 0,
                        }),
                };
                match put {
                    Ok(new) => {
                        results
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push((idx, id, len, new));
                    }
                    Err(e) => record_error(e),
                }
            }));
        }
        let mut idx = 0usize;
        let mut next = Some(first);
        let mut size = 0u64;
        let mut read_error = None;
        while let Some(chunk) = next {
            size += chunk.len() as u64;
            if hash_tx.send(chunk.clone()).is_err() || work_tx.send((idx, chunk)).is_err() {
                break;
            }
            idx += 1;
            if failed.load(Ordering::SeqCst) {
                break;
            }
            next = match chunker.next_chunk() {
                Ok(n) => n,
                Err(e) => {
                    read_error = Some(e);
                    None
                }
            };
        }
        drop(hash_tx);
        drop(work_tx);
        for h in handles {
            if h.join().is_err() {
                record_error(StoreError::Internal("import worker panicked"));
            }
        }
        let hash = hasher
            .join()
            .map_err(|_| StoreError::Internal("import hasher panicked"))?;
        if let Some(e) = read_error {
            return Err(e);
        }
        Ok((size, hash))
    })?;
    if let Some(e) = first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let mut results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    results.sort_unstable_by_key(|r| r.0);
    let new_bytes = results.iter().map(|r| r.3).sum();
    let chunks = results
        .into_iter()
        .map(|(_, id, length, _)| ChunkRef { id, length })
        .collect();
    put_manifest(
        batch,
        size,
        FileContentId(*file_hash.as_bytes()),
        chunks,
        new_bytes,
        sink,
    )
}

impl ObjectStore {
    /// Import one stream into an open batch (chunks and manifest); the
    /// caller commits. `name` is used in error messages.
    pub fn import_reader(
        &self,
        batch: &Batch<'_>,
        reader: impl Read,
        name: &Path,
    ) -> Result<ImportedFile> {
        import_stream(batch, reader, name, None, &Arc::default(), None)
    }

    /// Import one file: read once, chunk, store chunks and manifest in one
    /// publication.
    pub fn import_file(&self, path: impl AsRef<Path>) -> Result<ImportedFile> {
        let path = path.as_ref();
        let batch = self.batch();
        let imported = self.import_path_into(&batch, path, None, &Arc::default())?;
        batch.commit()?;
        Ok(imported)
    }

    fn import_path_into(
        &self,
        batch: &Batch<'_>,
        path: &Path,
        sink: Dest<'_>,
        pool: &Arc<WindowPool>,
    ) -> Result<ImportedFile> {
        let mut f = File::open(path).map_err(io_err(path))?;
        let mut imported = self.import_open_file(batch, &mut f, path, sink, pool)?;
        imported.read_stamp = Some(ReadStamp::of(&f, path)?);
        Ok(imported)
    }

    fn import_open_file(
        &self,
        batch: &Batch<'_>,
        f: &mut File,
        path: &Path,
        sink: Dest<'_>,
        pool: &Arc<WindowPool>,
    ) -> Result<ImportedFile> {
        let len = f.metadata().map_err(io_err(path))?.len();
        if len > MAX_FILE_SIZE {
            return Err(StoreError::FileTooLarge {
                path: path.to_path_buf(),
                size: len,
                limit: MAX_FILE_SIZE,
            });
        }
        if len <= MIN as u64 {
            // The `len` bytes the handle reported, and no more: one `read`
            // for an unchanged file. `File::read_to_end` would first look
            // the size up again (`fstat`, `lseek`) and read once more to
            // find the end: three system calls of eight per small file. A
            // file that grew since it was opened is read up to its size at
            // the open, a consistent prefix whose change shows in the
            // after-read stamp ([`ReadStamp`]) its caller compares.
            let data = read_prefix(f, len).map_err(io_err(path))?;
            return import_small(batch, std::borrow::Cow::Owned(data), sink);
        }
        // Content index: only when some indexed content has this size is
        // the whole file hashed first (all cores) in search of a hit.
        // (A sink needs every chunk, so it never takes the shortcut.)
        if sink.is_none() && self.content_index_lookups() && self.content_size_indexed(len)? {
            let (size, content_id) = hash_file(f, path)?;
            if let Some(hit) = self.content_index_hit(batch, size, &content_id) {
                return Ok(hit);
            }
            f.seek(SeekFrom::Start(0)).map_err(io_err(path))?;
        }
        // The pipeline hashes the bytes it chunks: a file changed since the
        // hash above still gets a manifest consistent with its chunks.
        import_stream(batch, f, path, sink, pool, Some(len))
    }

    /// A verified content index hit: the recorded manifest is present and
    /// intact (identity verified on read), is chunking profile 1 with this
    /// size and `FileContentId`, and every chunk it names is stored. Any
    /// failure is a miss (the index is only a cache).
    fn content_index_hit(
        &self,
        batch: &Batch<'_>,
        size: u64,
        content_id: &FileContentId,
    ) -> Option<ImportedFile> {
        let manifest_id = self.content_manifest(size, content_id).ok()??;
        let payload = self.get(&ObjectId::manifest(manifest_id)).ok()?;
        let m = Manifest::decode(&payload).ok()?;
        if m.chunking_profile != PROFILE_FASTCDC_2020
            || m.total_size != size
            || m.file_content_id != *content_id
        {
            return None;
        }
        for c in &m.chunks {
            if !batch.has(&ObjectId::chunk(c.id)).ok()? {
                return None;
            }
        }
        Some(ImportedFile {
            manifest_id,
            content_id: *content_id,
            size,
            chunks: m.chunks,
            new_bytes_stored: 0,
            via_content_index: true,
            read_stamp: None,
        })
    }

    /// Import many files in one publication. Small files are processed in
    /// parallel on the rayon pool; large files run as pipelined imports,
    /// one per core at a time. Results are in input order.
    pub fn import_files<P: AsRef<Path> + Sync>(&self, paths: &[P]) -> Result<Vec<ImportedFile>> {
        self.import_files_with(paths, None, None)
    }

    /// Chunk many files exactly as [`ObjectStore::import_files`] does (same
    /// cut points, chunk ids and manifests) but hand every chunk to `sink`
    /// instead of storing it; only the manifests are stored, in one
    /// publication at the end. `ImportedFile::new_bytes_stored` counts the
    /// manifests' bytes only. A file changed while it is read gets the
    /// manifest of the bytes read (each chunk's id is of the bytes passed).
    ///
    /// `sizes`, when the caller has just taken them (one per path), spare
    /// a pass that looks every path up before the first byte is read (for
    /// a 52,000-file import a tenth of a second on one core); they only
    /// sort the files into small and large, so a stale one costs speed,
    /// never correctness (each file's size is taken again when it is
    /// opened).
    pub fn chunk_files_into<P: AsRef<Path> + Sync>(
        &self,
        paths: &[P],
        sizes: Option<&[u64]>,
        sink: &dyn ChunkSink,
    ) -> Result<Vec<ImportedFile>> {
        if sizes.is_some_and(|s| s.len() != paths.len()) {
            return Err(StoreError::Internal(
                "chunk_files_into: not one size per path",
            ));
        }
        self.import_files_with(paths, sizes, Some(sink))
    }

    fn import_files_with<P: AsRef<Path> + Sync>(
        &self,
        paths: &[P],
        sizes: Option<&[u64]>,
        sink: Dest<'_>,
    ) -> Result<Vec<ImportedFile>> {
        let batch = self.batch();
        // One pool for every file of the call: windows retired by one file
        // are reused by the next (see [`WindowPool`]).
        let pool: Arc<WindowPool> = Arc::default();
        let looked_up: Vec<u64>;
        let sizes: &[u64] = match sizes {
            Some(s) => s,
            None => {
                looked_up = paths
                    .iter()
                    .map(|p| {
                        std::fs::metadata(p.as_ref())
                            .map(|m| m.len())
                            .map_err(io_err(p.as_ref()))
                    })
                    .collect::<Result<_>>()?;
                &looked_up
            }
        };
        let mut out: Vec<Option<ImportedFile>> = vec![None; paths.len()];
        let small: Vec<(usize, Result<ImportedFile>)> = paths
            .par_iter()
            .enumerate()
            .filter(|(i, _)| sizes[*i] <= MIN as u64)
            .map(|(i, p)| (i, self.import_path_into(&batch, p.as_ref(), sink, &pool)))
            .collect();
        for (i, r) in small {
            out[i] = Some(r?);
        }
        // Large files: one pipeline per core at a time. Cutting chunks is
        // sequential within a file, so concurrent files are what lets every
        // core cut (each pipeline's hashing overlaps its own cutting).
        let large: Vec<usize> = (0..paths.len())
            .filter(|&i| sizes[i] > MIN as u64)
            .collect();
        let next = std::sync::atomic::AtomicUsize::new(0);
        let done: Mutex<Vec<(usize, Result<ImportedFile>)>> = Mutex::new(Vec::new());
        let lanes = worker_count().min(large.len());
        std::thread::scope(|s| {
            for _ in 0..lanes {
                s.spawn(|| loop {
                    let k = next.fetch_add(1, Ordering::SeqCst);
                    let Some(&i) = large.get(k) else { break };
                    let r = self.import_path_into(&batch, paths[i].as_ref(), sink, &pool);
                    let failed = r.is_err();
                    done.lock().unwrap_or_else(|p| p.into_inner()).push((i, r));
                    if failed {
                        next.store(large.len(), Ordering::SeqCst);
                    }
                });
            }
        });
        for (i, r) in done.into_inner().unwrap_or_else(|p| p.into_inner()) {
            out[i] = Some(r?);
        }
        batch.commit()?;
        Ok(out.into_iter().flatten().collect())
    }

    /// Read and decode a manifest (verified).
    pub fn manifest(&self, id: &ManifestId) -> Result<Manifest> {
        let oid = ObjectId::manifest(*id);
        let payload = self.get(&oid)?;
        Manifest::decode(&payload).map_err(|e| StoreError::CorruptManifest {
            id: oid,
            reason: e.to_string(),
        })
    }

    /// Reconstruct the file a manifest describes at `dest`, through a
    /// temporary file in the same directory renamed into place after its
    /// `FileContentId` and size are verified and it is flushed. A chunk
    /// fetch thread reads and verifies the next chunks while this one is
    /// written. Returns the file size.
    pub fn reconstruct(&self, manifest: &ManifestId, dest: impl AsRef<Path>) -> Result<u64> {
        let dest = dest.as_ref();
        let moid = ObjectId::manifest(*manifest);
        let m = self.manifest(manifest)?;
        let parent = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mut tmp = tempfile::Builder::new()
            .prefix(".scribe-reconstruct-")
            .tempfile_in(&parent)
            .map_err(io_err(&parent))?;
        let fail = |reason: String| StoreError::Reconstruct {
            manifest: moid,
            path: dest.to_path_buf(),
            reason,
        };
        let mut hasher = blake3::Hasher::new();
        let mut written = 0u64;
        std::thread::scope(|s| -> Result<()> {
            let (tx, rx) = sync_channel::<Result<(ChunkRef, Vec<u8>)>>(2);
            let chunks = &m.chunks;
            s.spawn(move || {
                for c in chunks {
                    let r = self.get(&ObjectId::chunk(c.id)).map(|d| (*c, d));
                    let stop = r.is_err();
                    if tx.send(r).is_err() || stop {
                        break;
                    }
                }
            });
            for r in rx {
                let (c, data) = r?;
                if data.len() != c.length as usize {
                    return Err(fail(format!(
                        "chunk {} has {} bytes, the manifest says {}",
                        c.id,
                        data.len(),
                        c.length
                    )));
                }
                hasher.update(&data);
                tmp.write_all(&data).map_err(io_err(tmp.path()))?;
                written += data.len() as u64;
            }
            Ok(())
        })?;
        if written != m.total_size {
            return Err(fail(format!(
                "wrote {written} bytes, the manifest says {}",
                m.total_size
            )));
        }
        let actual = FileContentId(*hasher.finalize().as_bytes());
        if actual != m.file_content_id {
            return Err(fail(format!(
                "content hashes to {}, the manifest says {}",
                actual.to_hex(),
                m.file_content_id.to_hex()
            )));
        }
        tmp.as_file().sync_all().map_err(io_err(tmp.path()))?;
        tmp.persist(dest).map_err(|e| StoreError::Io {
            path: dest.to_path_buf(),
            source: e.error,
        })?;
        sync_dir(&parent)?;
        Ok(written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use fastcdc::v2020::Normalization;
    use scribe_testkit::noise;

    /// Chunk lengths by fastcdc's own streaming chunker (profile 1).
    fn crate_cuts(data: &[u8]) -> Vec<usize> {
        fastcdc::v2020::StreamCDC::with_level_and_seed(
            data,
            MIN,
            AVG,
            MAX,
            Normalization::Level1,
            0,
        )
        .map(|c| c.map(|c| c.length))
        .collect::<std::result::Result<_, _>>()
        .unwrap()
    }

    /// A small file is read in one call that asks for exactly its size:
    /// no second look for the end (which `read_to_end` makes, after an
    /// `fstat` and an `lseek` for its size), and bytes past the size taken
    /// at the open are not read. Counted by this thread's read calls.
    #[test]
    fn a_known_length_is_read_in_one_call_and_nothing_past_it() {
        use std::io::Seek;
        #[cfg(target_os = "linux")]
        fn reads() -> u64 {
            let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
            io.lines()
                .find_map(|l| l.strip_prefix("syscr: "))
                .unwrap()
                .parse()
                .unwrap()
        }
        let dir = tempfile::tempdir().unwrap();
        for len in [0usize, 1, 31, 5_000, 70_000, MIN] {
            let bytes = noise(len + 100, len as u64 + 1);
            let p = dir.path().join(format!("f{len}"));
            std::fs::write(&p, &bytes).unwrap();
            let mut f = File::open(&p).unwrap();
            // (Reading the counter costs reads of its own: taken twice
            // with nothing between, that cost is subtracted.)
            #[cfg(target_os = "linux")]
            let (idle, before) = {
                let a = reads();
                let b = reads();
                (b - a, reads())
            };
            let got = read_prefix(&f, len as u64).unwrap();
            #[cfg(target_os = "linux")]
            assert_eq!(reads() - before - idle, u64::from(len > 0), "len {len}");
            assert_eq!(got, bytes[..len], "len {len}");
            assert_eq!(f.stream_position().unwrap(), len as u64, "nothing past len");
            // A file shorter than the size taken: what it has, no error.
            std::fs::write(&p, &bytes[..len / 2]).unwrap();
            let f = File::open(&p).unwrap();
            assert_eq!(read_prefix(&f, len as u64).unwrap(), bytes[..len / 2]);
        }
    }

    /// A buffer handed over whole leaves `into_vec` without a copy; a chunk
    /// of a shared window, or of a buffer someone else still holds, is
    /// copied out with exactly its bytes.
    #[test]
    fn into_vec_moves_a_whole_unshared_buffer_and_copies_anything_else() {
        let whole: Vec<u8> = (0..5_000u32).map(|i| (i * 7) as u8).collect();
        let at = whole.as_ptr();
        let moved = ChunkBytes::from_vec(whole.clone()).into_vec();
        assert_eq!(moved, whole);
        let moved = ChunkBytes::from_vec(whole).into_vec();
        assert_eq!(moved.as_ptr(), at, "a whole unshared buffer is moved");
        // Shared: the other holder keeps its bytes, this one gets a copy.
        let shared = ChunkBytes::from_vec(moved.clone());
        let other = ChunkBytes(shared.0.clone());
        let copy = shared.into_vec();
        assert_eq!(copy, moved);
        assert_ne!(copy.as_ptr(), other.0.window.buf.as_ptr());
        assert_eq!(&*other.0, &moved[..]);
        // A range of a pooled window: its own bytes, the window recycled.
        let pool: Arc<WindowPool> = Arc::default();
        let mut w = pool.take();
        w.buf[10..20].copy_from_slice(&moved[..10]);
        w.used = 20;
        let slice = ChunkSlice {
            window: Arc::new(w),
            start: 10,
            len: 10,
        };
        assert_eq!(ChunkBytes(slice).into_vec(), &moved[..10]);
        assert_eq!(pool.free.lock().unwrap().len(), 1, "the window went back");
    }

    /// Chunk lengths by [`StreamChunker`] (read windows, remainders).
    fn streamed_cuts(data: &[u8]) -> Vec<usize> {
        let mut ch = StreamChunker::new(data, PathBuf::from("x"), Arc::default());
        let mut out = Vec::new();
        while let Some(c) = ch.next_chunk().unwrap() {
            out.push(c.len());
        }
        out
    }

    #[test]
    fn cuts_match_fastcdc_stream() {
        let data = noise(40 * 1024 * 1024 + 17, 7);
        let ours = chunk_boundaries(&data);
        let theirs = crate_cuts(&data);
        assert_eq!(ours, theirs);
        let streamed = streamed_cuts(&data);
        assert_eq!(streamed, theirs);
        assert!(theirs.len() > 3);
    }

    /// The streaming chunker cuts where the crate does across its windows
    /// when chunks are long (zeroes: maximum chunks, no candidate among
    /// the bytes left in a window) and short, mixed: the cuts it takes
    /// from a window's remainder before reading on must be the same.
    #[test]
    fn streamed_cuts_match_across_windows_with_long_and_short_chunks() {
        let mut data = Vec::new();
        for (i, (mib, zero)) in [(20, false), (21, true), (13, false), (7, true), (45, false)]
            .into_iter()
            .enumerate()
        {
            if zero {
                data.resize(data.len() + (mib << 20) + i, 0);
            } else {
                data.extend(noise((mib << 20) + i, 40 + i as u64));
            }
        }
        let theirs = crate_cuts(&data);
        let streamed = streamed_cuts(&data);
        assert_eq!(streamed, theirs);
        assert!(theirs.contains(&MAX), "{theirs:?}");
        assert!(theirs.iter().filter(|&&n| n > 2 * AVG).count() >= 3);
    }

    /// Every cut the chunker makes passes `is_profile_cut`; any other
    /// split of the same bytes (earlier, later, a small file in two) fails.
    #[test]
    fn profile_cut_check_accepts_exactly_the_chunkers_cuts() {
        for (len, seed) in [
            (40 * 1024 * 1024 + 17, 7u64),
            (9 * 1024 * 1024 + 1, 8),
            (MIN, 9),
        ] {
            let data = noise(len, seed);
            let cuts = chunk_boundaries(&data);
            let mut pos = 0;
            for n in &cuts {
                let end = pos + n;
                assert!(
                    is_profile_cut(&data[pos..end], &data[end..]),
                    "cut at {end}"
                );
                for shifted in [end - 1, end + 1] {
                    if shifted > pos && shifted < data.len() && shifted != end {
                        assert!(
                            !is_profile_cut(&data[pos..shifted], &data[shifted..]),
                            "shifted cut at {shifted} passes"
                        );
                    }
                }
                pos = end;
            }
        }
        let small = noise(1000, 3);
        assert!(is_profile_cut(&small, &[]));
        assert!(!is_profile_cut(&small[..400], &small[400..]));
        assert!(!is_profile_cut(&[], &[]));
    }

    #[test]
    fn small_inputs_are_one_chunk() {
        assert_eq!(chunk_boundaries(&noise(MIN, 3)), vec![MIN]);
        assert_eq!(chunk_boundaries(&[]), Vec::<usize>::new());
        assert_eq!(chunk_boundaries(&[1]), vec![1]);
    }

    /// A stream expected to fit half a window is read into a buffer of its
    /// own size: its chunks share that buffer (a sink takes them without a
    /// copy), no pooled window is taken, and the cuts are the crate's,
    /// whether the stream is as long as expected, shorter, or longer.
    #[test]
    fn an_expected_length_sizes_the_first_window_and_keeps_the_cuts() {
        let pool: Arc<WindowPool> = Arc::default();
        let data = noise(9 << 20, 3);
        let mut ch = StreamChunker::with_expected_len(
            &data[..],
            PathBuf::from("e"),
            pool.clone(),
            data.len() as u64,
        );
        let mut queued = Vec::new();
        while let Some(c) = ch.next_chunk().unwrap() {
            queued.push(ChunkBytes::for_sink(c));
        }
        drop(ch);
        assert!(queued.len() > 1);
        let first = &queued[0].0.window;
        assert!(first.pool.is_none());
        assert_eq!(first.buf.len(), data.len() + 1);
        for c in &queued {
            assert!(Arc::ptr_eq(&c.0.window, first), "a chunk was copied out");
        }
        assert_eq!(pool.free.lock().unwrap().len(), 0, "no pooled window taken");
        let joined: Vec<u8> = queued.iter().flat_map(|c| c.iter().copied()).collect();
        assert_eq!(joined, data);
        let cuts = crate_cuts(&data);
        assert_eq!(queued.iter().map(|c| c.len()).collect::<Vec<_>>(), cuts);
        // Expected longer or shorter than it turns out: the same cuts.
        for (len, expected) in [(9 << 20, 12 << 20), (40 << 20, 2 << 20), (40 << 20, 0)] {
            let data = noise(len, 4);
            let mut ch = StreamChunker::with_expected_len(
                &data[..],
                PathBuf::from("e"),
                pool.clone(),
                expected,
            );
            let mut got = Vec::new();
            while let Some(c) = ch.next_chunk().unwrap() {
                got.push(c.len());
            }
            assert_eq!(got, crate_cuts(&data), "{len} bytes, {expected} expected");
        }
    }

    /// A chunk handed to a sink from a window the stream filled less than
    /// half (a file's last window) is a copy: the window goes back to the
    /// pool as soon as the chunker lets go of it, however long the chunk is
    /// queued. A well-filled window's chunks share it (no copy).
    #[test]
    fn queued_chunks_do_not_hold_a_sparsely_filled_window() {
        let pool: Arc<WindowPool> = Arc::default();
        let idle = |pool: &Arc<WindowPool>| pool.free.lock().unwrap().len();
        // A 3 MiB file: one window, filled to 3 MiB of 32.
        let small = noise(3 << 20, 1);
        let mut ch = StreamChunker::new(&small[..], PathBuf::from("s"), pool.clone());
        let mut queued = Vec::new();
        while let Some(c) = ch.next_chunk().unwrap() {
            queued.push(ChunkBytes::for_sink(c));
        }
        drop(ch);
        assert_eq!(
            idle(&pool),
            1,
            "the window is back while its chunks are queued"
        );
        let joined: Vec<u8> = queued.iter().flat_map(|c| c.iter().copied()).collect();
        assert_eq!(joined, small);
        // A 40 MiB file: its first window is full; its chunks share it.
        let large = noise(40 << 20, 2);
        let mut ch = StreamChunker::new(&large[..], PathBuf::from("l"), pool.clone());
        let first = ChunkBytes::for_sink(ch.next_chunk().unwrap().unwrap());
        assert!(
            first.0.window.pool.is_some(),
            "a full window's chunk is not copied"
        );
        assert!(first.0.window.used >= WINDOW / 2);
        let mut rest = Vec::new();
        while let Some(c) = ch.next_chunk().unwrap() {
            rest.push(ChunkBytes::for_sink(c));
        }
        drop(ch);
        let mut joined: Vec<u8> = first.to_vec();
        joined.extend(rest.iter().flat_map(|c| c.iter().copied()));
        assert_eq!(joined, large);
        drop((first, rest, queued));
        assert!(
            idle(&pool) >= 2,
            "every window is back once no chunk holds it"
        );
    }
}

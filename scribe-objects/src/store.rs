//! [`ObjectStore`]: creation, open-time recovery, the pack writer and reads.

use std::collections::{BTreeSet, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use redb::{Database, Durability, ReadableDatabase, ReadableTable, ReadableTableMetadata};
use scribe_format::envelope::{self, Compression, HEADER_LEN};
use scribe_format::limits::MAX_CHUNK_BYTES;
use scribe_format::{ObjectId, ObjectKind};

use crate::error::{db_err, io_err, Result, StoreError};
use crate::layout::{self, sync_dir};
use crate::locator::{Location, LOCATOR_TABLE, META_OPEN_PACK, META_OPEN_PACK_LEN, META_TABLE};
use crate::pack::{self, ENTRY_HEADER_LEN, PACK_HEADER_LEN};
use crate::store_descriptor::{self, StoreDescriptor};

/// Default `small-object-threshold`: a 16 MiB chunk envelope (16 MiB + 20) is packed.
pub const DEFAULT_SMALL_OBJECT_THRESHOLD: u64 = 16_777_236;
/// Default `pack-seal-bytes`: 256 MiB.
pub const DEFAULT_PACK_SEAL_BYTES: u64 = 256 * 1024 * 1024;
/// The first pack id of a new store.
pub const FIRST_PACK_ID: u32 = 1;
/// Appends smaller than this are gathered in the writer's buffer.
const WRITE_BUFFER: usize = 1 << 20;

/// Storage policy fixed when a store is created (recorded in `SCRIBE_FORMAT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreOptions {
    /// Envelopes up to this length are packed; larger ones are loose files.
    pub small_object_threshold: u64,
    /// The open pack rolls over when an append would exceed this length.
    pub pack_seal_bytes: u64,
    /// `none` or `lz4`; immutable.
    pub compression: Compression,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            small_object_threshold: DEFAULT_SMALL_OBJECT_THRESHOLD,
            pack_seal_bytes: DEFAULT_PACK_SEAL_BYTES,
            compression: Compression::Lz4,
        }
    }
}

/// What open-time recovery did (also reported by [`crate::verify_dir`] without doing it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Bytes past the committed length of the open pack that were truncated.
    pub truncated_bytes: u64,
    /// Packs above the checkpoint pack that were removed.
    pub removed_packs: Vec<u32>,
    /// Quarantine temporaries removed from `staging/`.
    pub removed_staging_files: usize,
}

/// The publisher turn held by a test (see [`ObjectStore::hold_publications`]).
#[doc(hidden)]
pub struct PublicationHold<'a>(#[allow(dead_code)] MutexGuard<'a, ()>);

pub(crate) struct PackWriter {
    pub id: u32,
    file: File,
    /// Length including bytes still in `buf`.
    pub len: u64,
    /// Length known flushed to stable storage.
    synced_len: u64,
    buf: Vec<u8>,
    /// Set when a write or flush failed: the file position may no longer
    /// match `len`, so every later append or commit refuses until the store
    /// is reopened (open-time recovery truncates to the committed length).
    poisoned: Option<String>,
    /// Bytes appended since writeback was last started early.
    since_kick: u64,
    /// Starts writeback of the open pack in the background (see [`Flusher`]).
    kicker: Option<SyncSender<File>>,
}

/// Appended bytes between early writeback starts.
const KICK_BYTES: u64 = 32 << 20;

/// A background thread that flushes a duplicate handle of the open pack
/// every [`KICK_BYTES`] appended, so the disk writes while the import
/// computes and the publication's own flush (and a roll-over's) finds little
/// left to do. It only makes bytes durable earlier; it never stands in for
/// a flush of section 6.3.
struct Flusher {
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Flusher {
    fn start() -> (Flusher, Option<SyncSender<File>>) {
        let (tx, rx) = sync_channel::<File>(1);
        let handle = std::thread::Builder::new()
            .name("scribe-pack-flusher".into())
            .spawn(move || {
                for f in rx {
                    // Best effort: errors surface at the publication's flush.
                    let _ = f.sync_data();
                }
            })
            .ok();
        match handle {
            Some(h) => (Flusher { handle: Some(h) }, Some(tx)),
            None => (Flusher { handle: None }, None),
        }
    }
}

impl PackWriter {
    /// Write out what is buffered and return a handle of the open pack to
    /// flush through `len` (outside the writer), or `None` when every
    /// appended byte is already durable.
    pub(crate) fn prepare_sync(&mut self, path: &Path) -> Result<Option<File>> {
        self.flush_buf(path)?;
        if self.synced_len == self.len {
            return Ok(None);
        }
        Ok(Some(self.file.try_clone().map_err(io_err(path))?))
    }

    /// Record that the open pack `pack` is durable through `len`.
    pub(crate) fn synced_through(&mut self, pack: u32, len: u64) {
        if self.id == pack && self.synced_len < len {
            self.synced_len = len;
        }
    }

    fn flush_buf(&mut self, path: &Path) -> Result<()> {
        if !self.buf.is_empty() {
            self.file.write_all(&self.buf).map_err(io_err(path))?;
            self.buf.clear();
        }
        Ok(())
    }
}

/// The pack/locator object store. Share it as `Arc<ObjectStore>`: every
/// method takes `&self`; appends go through one writer mutex and readers
/// run concurrently with it.
pub struct ObjectStore {
    pub(crate) dir: PathBuf,
    pub(crate) options: StoreOptions,
    pub(crate) db: Database,
    pub(crate) db_path: PathBuf,
    pub(crate) writer: Mutex<PackWriter>,
    /// Batches waiting to be published by whichever committer next holds
    /// the writer (group commit, see `Batch::commit`).
    pub(crate) commits: Mutex<crate::batch::Commits>,
    /// Held by the committer publishing the queued batches (steps 2 to 5
    /// of section 6.3); appends continue meanwhile, under the writer.
    pub(crate) publisher: Mutex<()>,
    /// Locator transactions committed by batches (observability).
    pub(crate) publications: std::sync::atomic::AtomicU64,
    read_handles: RwLock<HashMap<u32, Arc<File>>>,
    recovery: RecoveryReport,
    flusher: Mutex<Flusher>,
    /// Whether imports consult the content index (benchmarks turn it off
    /// to measure the full pipeline).
    pub(crate) content_index: std::sync::atomic::AtomicBool,
}

impl Drop for ObjectStore {
    fn drop(&mut self) {
        // Close the kick channel, then wait for an in-progress flush.
        self.lock_writer().kicker = None;
        let mut f = self.flusher.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(h) = f.handle.take() {
            let _ = h.join();
        }
    }
}

impl std::fmt::Debug for ObjectStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectStore")
            .field("dir", &self.dir)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// The largest original payload a read accepts for a kind.
pub(crate) fn max_payload(kind: ObjectKind) -> u64 {
    match kind {
        ObjectKind::Chunk => u64::from(MAX_CHUNK_BYTES),
        _ => 1 << 40,
    }
}

pub(crate) fn compaction_marker_for(dir: &Path) -> Option<PathBuf> {
    let name = dir.file_name()?.to_str()?;
    Some(dir.with_file_name(format!("{name}.compaction-ready")))
}

pub(crate) fn refuse_pending_marker(dir: &Path) -> Result<()> {
    if let Some(marker) = compaction_marker_for(dir) {
        if marker.exists() {
            return Err(StoreError::CompactionPending { path: marker });
        }
    }
    Ok(())
}

/// Read `(open-pack, open-pack-committed-len)` from a read transaction.
pub(crate) fn read_meta(db_path: &Path, txn: &redb::ReadTransaction) -> Result<(u32, u64)> {
    let meta = txn.open_table(META_TABLE).map_err(db_err(db_path))?;
    let get = |key: &str| -> Result<Vec<u8>> {
        meta.get(key)
            .map_err(db_err(db_path))?
            .map(|v| v.value().to_vec())
            .ok_or_else(|| StoreError::CorruptLocatorRow {
                key: format!("meta/{key}"),
                reason: "missing".into(),
            })
    };
    let pack = get(META_OPEN_PACK)?;
    let len = get(META_OPEN_PACK_LEN)?;
    let pack: [u8; 4] = pack
        .as_slice()
        .try_into()
        .map_err(|_| StoreError::CorruptLocatorRow {
            key: format!("meta/{META_OPEN_PACK}"),
            reason: format!("{} bytes, expected 4", pack.len()),
        })?;
    let len: [u8; 8] = len
        .as_slice()
        .try_into()
        .map_err(|_| StoreError::CorruptLocatorRow {
            key: format!("meta/{META_OPEN_PACK_LEN}"),
            reason: format!("{} bytes, expected 8", len.len()),
        })?;
    Ok((u32::from_le_bytes(pack), u64::from_le_bytes(len)))
}

pub(crate) fn write_meta(
    db_path: &Path,
    txn: &redb::WriteTransaction,
    pack: u32,
    len: u64,
) -> Result<()> {
    let mut meta = txn.open_table(META_TABLE).map_err(db_err(db_path))?;
    meta.insert(META_OPEN_PACK, pack.to_le_bytes().as_slice())
        .map_err(db_err(db_path))?;
    meta.insert(META_OPEN_PACK_LEN, len.to_le_bytes().as_slice())
        .map_err(db_err(db_path))?;
    Ok(())
}

/// Create a pack file with its header, flushed, and flush `packs/`.
pub(crate) fn create_pack(dir: &Path, id: u32) -> Result<File> {
    let path = layout::pack_path(dir, id);
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(io_err(&path))?;
    f.write_all(&pack::pack_header(id)).map_err(io_err(&path))?;
    f.sync_all().map_err(io_err(&path))?;
    sync_dir(&dir.join(layout::PACKS))?;
    Ok(f)
}

/// Write `SCRIBE_FORMAT` through a temporary and a rename.
pub(crate) fn write_descriptor(dir: &Path, d: &StoreDescriptor) -> Result<()> {
    let tmp = dir.join(format!("{}.tmp", layout::DESCRIPTOR));
    let path = dir.join(layout::DESCRIPTOR);
    let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
    f.write_all(d.to_text().as_bytes()).map_err(io_err(&tmp))?;
    f.sync_all().map_err(io_err(&tmp))?;
    std::fs::rename(&tmp, &path).map_err(io_err(&path))?;
    sync_dir(dir)
}

impl ObjectStore {
    /// Create a new, empty store at `dir` (which must not exist or be empty).
    pub fn create(dir: impl AsRef<Path>, options: StoreOptions) -> Result<ObjectStore> {
        Self::create_with_first_pack(dir.as_ref(), options, FIRST_PACK_ID)?;
        Self::open(dir)
    }

    pub(crate) fn create_with_first_pack(
        dir: &Path,
        options: StoreOptions,
        first_pack: u32,
    ) -> Result<()> {
        if options.pack_seal_bytes < PACK_HEADER_LEN + ENTRY_HEADER_LEN as u64 + HEADER_LEN as u64 {
            return Err(StoreError::Descriptor {
                path: dir.join(layout::DESCRIPTOR),
                reason: format!("pack-seal-bytes {} is too small", options.pack_seal_bytes),
            });
        }
        if dir.join(layout::DESCRIPTOR).exists() || dir.join(layout::LOCATOR).exists() {
            return Err(StoreError::AlreadyExists {
                path: dir.to_path_buf(),
            });
        }
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        for sub in [layout::LOOSE, layout::PACKS, layout::STAGING] {
            let p = dir.join(sub);
            std::fs::create_dir_all(&p).map_err(io_err(&p))?;
        }
        create_pack(dir, first_pack)?;
        let db_path = dir.join(layout::LOCATOR);
        let db = Database::create(&db_path).map_err(db_err(&db_path))?;
        let mut txn = db.begin_write().map_err(db_err(&db_path))?;
        txn.set_durability(Durability::Immediate)
            .map_err(db_err(&db_path))?;
        txn.open_table(LOCATOR_TABLE).map_err(db_err(&db_path))?;
        write_meta(&db_path, &txn, first_pack, PACK_HEADER_LEN)?;
        txn.commit().map_err(db_err(&db_path))?;
        drop(db);
        sync_dir(dir)?;
        write_descriptor(
            dir,
            &StoreDescriptor {
                small_object_threshold: options.small_object_threshold,
                pack_seal_bytes: options.pack_seal_bytes,
                compression: options.compression,
                extra: Vec::new(),
            },
        )?;
        if let Some(parent) = dir.parent() {
            if !parent.as_os_str().is_empty() {
                sync_dir(parent)?;
            }
        }
        Ok(())
    }

    /// Open an existing store, performing open-time recovery (section 6.1):
    /// bytes past the committed length of the open pack are truncated, packs
    /// above the checkpoint pack are removed, and a pack shorter than its
    /// committed length refuses to open.
    pub fn open(dir: impl AsRef<Path>) -> Result<ObjectStore> {
        let dir = dir.as_ref().to_path_buf();
        refuse_pending_marker(&dir)?;
        let d = store_descriptor::read(&dir.join(layout::DESCRIPTOR))?;
        let options = StoreOptions {
            small_object_threshold: d.small_object_threshold,
            pack_seal_bytes: d.pack_seal_bytes,
            compression: d.compression,
        };
        let db_path = dir.join(layout::LOCATOR);
        if !db_path.exists() {
            return Err(StoreError::Io {
                path: db_path,
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "locator database is missing",
                ),
            });
        }
        let db = Database::open(&db_path).map_err(db_err(&db_path))?;
        let (open_pack, committed) = {
            let txn = db.begin_read().map_err(db_err(&db_path))?;
            read_meta(&db_path, &txn)?
        };
        let mut recovery = RecoveryReport::default();
        // Packs above the checkpoint were created by an interrupted publication.
        let mut removed_any = false;
        for (id, path) in layout::list_packs(&dir)? {
            if id > open_pack {
                std::fs::remove_file(&path).map_err(io_err(&path))?;
                recovery.removed_packs.push(id);
                removed_any = true;
            }
        }
        if removed_any {
            sync_dir(&dir.join(layout::PACKS))?;
        }
        let path = layout::pack_path(&dir, open_pack);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| StoreError::CorruptPack {
                path: path.clone(),
                offset: 0,
                reason: format!("the open pack named by the locator cannot be opened: {e}"),
            })?;
        let actual = file.metadata().map_err(io_err(&path))?.len();
        if actual < committed {
            return Err(StoreError::CorruptPack {
                path,
                offset: actual,
                reason: format!("pack is shorter than its committed length {committed}"),
            });
        }
        let mut header = [0u8; PACK_HEADER_LEN as usize];
        crate::platform::read_exact_at(&file, &mut header, 0).map_err(io_err(&path))?;
        pack::check_pack_header(&header, open_pack).map_err(|reason| StoreError::CorruptPack {
            path: path.clone(),
            offset: 0,
            reason,
        })?;
        if actual > committed {
            file.set_len(committed).map_err(io_err(&path))?;
            file.sync_all().map_err(io_err(&path))?;
            recovery.truncated_bytes = actual - committed;
        }
        file.seek(SeekFrom::Start(committed))
            .map_err(io_err(&path))?;
        // Quarantine temporaries are never referenced.
        let staging = dir.join(layout::STAGING);
        std::fs::create_dir_all(&staging).map_err(io_err(&staging))?;
        for entry in std::fs::read_dir(&staging).map_err(io_err(&staging))? {
            let entry = entry.map_err(io_err(&staging))?;
            let p = entry.path();
            if p.is_file() {
                std::fs::remove_file(&p).map_err(io_err(&p))?;
                recovery.removed_staging_files += 1;
            }
        }
        let (flusher, kicker) = Flusher::start();
        Ok(ObjectStore {
            dir,
            options,
            db,
            db_path,
            writer: Mutex::new(PackWriter {
                id: open_pack,
                file,
                len: committed,
                synced_len: committed,
                buf: Vec::with_capacity(WRITE_BUFFER),
                poisoned: None,
                since_kick: 0,
                kicker,
            }),
            commits: Mutex::new(crate::batch::Commits::default()),
            publisher: Mutex::new(()),
            publications: std::sync::atomic::AtomicU64::new(0),
            read_handles: RwLock::new(HashMap::new()),
            recovery,
            flusher: Mutex::new(flusher),
            content_index: std::sync::atomic::AtomicBool::new(true),
        })
    }

    /// The store directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The storage policy recorded at creation.
    pub fn options(&self) -> StoreOptions {
        self.options
    }

    /// What recovery did when this handle was opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// Locator transactions batches have committed through this handle
    /// (one per group of concurrently committed batches).
    pub fn batch_publications(&self) -> u64 {
        self.publications.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Batches queued for publication, waiting for the writer (tests).
    #[doc(hidden)]
    pub fn queued_batches(&self) -> usize {
        self.commits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pending
            .len()
    }

    /// Hold the publisher turn until the guard drops: commits queue
    /// behind it (tests of group commit).
    #[doc(hidden)]
    pub fn hold_publications(&self) -> PublicationHold<'_> {
        PublicationHold(self.publisher.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub(crate) fn lock_writer(&self) -> MutexGuard<'_, PackWriter> {
        // A panic while holding the writer leaves at worst unreferenced bytes
        // past the committed length, which the next commit or open handles.
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Append one pack entry; returns its location. Caller holds the writer.
    pub(crate) fn append_entry(
        &self,
        w: &mut PackWriter,
        id: &ObjectId,
        envelope: [&[u8]; 2],
        touched: &mut BTreeSet<u32>,
    ) -> Result<Location> {
        self.check_poison(w)?;
        let r = self.append_entry_inner(w, id, envelope, touched);
        Self::poison_on_error(w, r)
    }

    pub(crate) fn check_poison(&self, w: &PackWriter) -> Result<()> {
        match &w.poisoned {
            None => Ok(()),
            Some(reason) => Err(StoreError::CorruptPack {
                path: layout::pack_path(&self.dir, w.id),
                offset: w.len,
                reason: format!("an earlier write failed ({reason}); reopen the store"),
            }),
        }
    }

    pub(crate) fn poison_on_error<T>(w: &mut PackWriter, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            if !matches!(e, StoreError::Injected(_)) {
                w.poisoned = Some(e.to_string());
            }
        }
        r
    }

    fn append_entry_inner(
        &self,
        w: &mut PackWriter,
        id: &ObjectId,
        envelope: [&[u8]; 2],
        touched: &mut BTreeSet<u32>,
    ) -> Result<Location> {
        let envelope_len = envelope[0].len() + envelope[1].len();
        let entry_len = ENTRY_HEADER_LEN as u64 + envelope_len as u64;
        if w.len > PACK_HEADER_LEN && w.len + entry_len > self.options.pack_seal_bytes {
            self.roll_over(w)?;
        }
        let path = layout::pack_path(&self.dir, w.id);
        w.buf
            .extend_from_slice(&pack::entry_header(id, envelope_len as u64));
        // Small parts join the buffered bytes; a large one is written
        // straight from the caller's buffer, after what is buffered.
        for part in envelope {
            if part.len() >= WRITE_BUFFER / 4 {
                w.flush_buf(&path)?;
                w.file.write_all(part).map_err(io_err(&path))?;
            } else {
                w.buf.extend_from_slice(part);
            }
        }
        if w.buf.len() >= WRITE_BUFFER {
            w.flush_buf(&path)?;
        }
        let offset = w.len;
        w.len += entry_len;
        w.since_kick += entry_len;
        if w.since_kick >= KICK_BYTES {
            w.since_kick = 0;
            w.flush_buf(&path)?;
            if let (Some(tx), Ok(dup)) = (w.kicker.as_ref(), w.file.try_clone()) {
                // Skipped if the previous early flush is still running.
                let _ = tx.try_send(dup);
            }
        }
        touched.insert(w.id);
        Ok(Location::Packed {
            pack: w.id,
            offset,
            entry_len,
        })
    }

    /// Seal the open pack (flushed) and start the next one.
    fn roll_over(&self, w: &mut PackWriter) -> Result<()> {
        let path = layout::pack_path(&self.dir, w.id);
        w.flush_buf(&path)?;
        w.file.sync_all().map_err(io_err(&path))?;
        let next = w.id.checked_add(1).ok_or_else(|| StoreError::CorruptPack {
            path: path.clone(),
            offset: w.len,
            reason: "pack ids are exhausted".into(),
        })?;
        let file = create_pack(&self.dir, next)?;
        w.id = next;
        w.file = file;
        w.len = PACK_HEADER_LEN;
        w.synced_len = PACK_HEADER_LEN;
        Ok(())
    }

    /// Commit locator rows and the open-pack checkpoint in one Immediate
    /// transaction. Caller holds the writer and has made every referenced
    /// byte durable.
    pub(crate) fn commit_rows(
        &self,
        w: &PackWriter,
        rows: &[(ObjectId, Location)],
        content: &[crate::locator::ContentRow],
        fail_before_commit: bool,
    ) -> Result<()> {
        self.commit_rows_at(w.id, w.len, rows, content, fail_before_commit)
    }

    /// [`ObjectStore::commit_rows`] with the checkpoint `(pack, len)` the
    /// caller made durable (a group publication, which flushed the pack
    /// without holding the writer). The checkpoint never moves backward: a
    /// commit that saw the writer earlier than the one committed before it
    /// leaves the later checkpoint in place.
    pub(crate) fn commit_rows_at(
        &self,
        pack: u32,
        len: u64,
        rows: &[(ObjectId, Location)],
        content: &[crate::locator::ContentRow],
        fail_before_commit: bool,
    ) -> Result<()> {
        let p = &self.db_path;
        let mut txn = self.db.begin_write().map_err(db_err(p))?;
        txn.set_durability(Durability::Immediate)
            .map_err(db_err(p))?;
        {
            let mut table = txn.open_table(LOCATOR_TABLE).map_err(db_err(p))?;
            for (id, loc) in rows {
                table
                    .insert(&id.to_bytes(), loc.encode().as_slice())
                    .map_err(db_err(p))?;
            }
        }
        if !content.is_empty() {
            let mut table = txn
                .open_table(crate::locator::CONTENT_TABLE)
                .map_err(db_err(p))?;
            for (k, v) in content {
                table.insert(k, v).map_err(db_err(p))?;
            }
        }
        let current = {
            let meta = txn.open_table(META_TABLE).map_err(db_err(p))?;
            let read = |key: &str| -> Result<u64> {
                let v = meta.get(key).map_err(db_err(p))?;
                Ok(v.map(|v| {
                    let b = v.value();
                    let mut a = [0u8; 8];
                    let n = b.len().min(8);
                    a[..n].copy_from_slice(&b[..n]);
                    u64::from_le_bytes(a)
                })
                .unwrap_or(0))
            };
            (read(META_OPEN_PACK)?, read(META_OPEN_PACK_LEN)?)
        };
        if (u64::from(pack), len) >= current {
            write_meta(p, &txn, pack, len)?;
        }
        if fail_before_commit {
            return Err(StoreError::Injected("before locator commit"));
        }
        txn.commit().map_err(db_err(p))?;
        Ok(())
    }

    /// At least how many payload bytes `id` has, from its locator row
    /// alone (no file is read): its envelope's length less the header.
    /// Codec 1 is stored only when its whole envelope is smaller than
    /// codec 0's (header plus payload), so the payload is never shorter.
    /// `None` when the locator does not have it. For a reply with room
    /// for some objects only: one that cannot fit is not read.
    pub fn payload_len_at_least(&self, id: &ObjectId) -> Result<Option<u64>> {
        Ok(self
            .locate(id)?
            .map(|loc| loc.envelope_len().saturating_sub(HEADER_LEN as u64)))
    }

    /// The location of an object, if the locator has it.
    pub fn locate(&self, id: &ObjectId) -> Result<Option<Location>> {
        let p = &self.db_path;
        let txn = self.db.begin_read().map_err(db_err(p))?;
        let table = txn.open_table(LOCATOR_TABLE).map_err(db_err(p))?;
        let key = id.to_bytes();
        match table.get(&key).map_err(db_err(p))? {
            None => Ok(None),
            Some(v) => Location::decode(v.value()).map(Some).map_err(|reason| {
                StoreError::CorruptLocatorRow {
                    key: id.to_string(),
                    reason,
                }
            }),
        }
    }

    /// Whether the locator has the object and its stored copy verifies
    /// (reads and hashes it). False for an absent or damaged object.
    pub fn holds_sound(&self, id: &ObjectId) -> Result<bool> {
        match self.get(id) {
            Ok(_) => Ok(true),
            Err(StoreError::NotFound { .. } | StoreError::CorruptObject { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Whether the locator has the object (its bytes are not read).
    pub fn contains(&self, id: &ObjectId) -> Result<bool> {
        Ok(self.locate(id)?.is_some())
    }

    /// The ids among `ids` that the store lacks, in their given order.
    pub fn missing(&self, ids: &[ObjectId]) -> Result<Vec<ObjectId>> {
        let p = &self.db_path;
        let txn = self.db.begin_read().map_err(db_err(p))?;
        let table = txn.open_table(LOCATOR_TABLE).map_err(db_err(p))?;
        let mut out = Vec::new();
        for id in ids {
            if table.get(&id.to_bytes()).map_err(db_err(p))?.is_none() {
                out.push(*id);
            }
        }
        Ok(out)
    }

    /// Number of objects in the locator.
    pub fn len(&self) -> Result<u64> {
        let p = &self.db_path;
        let txn = self.db.begin_read().map_err(db_err(p))?;
        let table = txn.open_table(LOCATOR_TABLE).map_err(db_err(p))?;
        table.len().map_err(db_err(p))
    }

    /// Whether the store holds no objects.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Every object id with its location, in key order.
    pub fn list(&self) -> Result<Vec<(ObjectId, Location)>> {
        let p = &self.db_path;
        let txn = self.db.begin_read().map_err(db_err(p))?;
        let table = txn.open_table(LOCATOR_TABLE).map_err(db_err(p))?;
        let mut out = Vec::new();
        for row in table.iter().map_err(db_err(p))? {
            let (k, v) = row.map_err(db_err(p))?;
            let key = k.value();
            let id = ObjectId::from_bytes(key).map_err(|e| StoreError::CorruptLocatorRow {
                key: hex::encode(key),
                reason: e.to_string(),
            })?;
            let loc =
                Location::decode(v.value()).map_err(|reason| StoreError::CorruptLocatorRow {
                    key: id.to_string(),
                    reason,
                })?;
            out.push((id, loc));
        }
        Ok(out)
    }

    pub(crate) fn pack_handle(&self, pack: u32) -> Result<Arc<File>> {
        if let Some(f) = self
            .read_handles
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&pack)
        {
            return Ok(f.clone());
        }
        let path = layout::pack_path(&self.dir, pack);
        let f = Arc::new(File::open(&path).map_err(io_err(&path))?);
        self.read_handles
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(pack, f.clone());
        Ok(f)
    }

    pub(crate) fn describe(&self, loc: &Location, id: &ObjectId) -> String {
        match loc {
            Location::Loose { .. } => layout::loose_path(&self.dir, id).display().to_string(),
            Location::Packed { pack, offset, .. } => format!(
                "{} offset {offset}",
                layout::pack_path(&self.dir, *pack).display()
            ),
        }
    }

    pub(crate) fn corrupt(
        &self,
        id: &ObjectId,
        loc: &Location,
        reason: impl Into<String>,
    ) -> StoreError {
        StoreError::CorruptObject {
            id: *id,
            location: self.describe(loc, id),
            reason: reason.into(),
        }
    }

    /// Read an object's raw envelope bytes, checking pack framing (not identity).
    pub fn read_envelope(&self, id: &ObjectId) -> Result<Vec<u8>> {
        let loc = self.locate(id)?.ok_or(StoreError::NotFound { id: *id })?;
        self.read_envelope_at(id, &loc)
    }

    pub(crate) fn read_envelope_at(&self, id: &ObjectId, loc: &Location) -> Result<Vec<u8>> {
        match *loc {
            Location::Loose { envelope_len } => {
                let path = layout::loose_path(&self.dir, id);
                let bytes = std::fs::read(&path)
                    .map_err(|e| self.corrupt(id, loc, format!("cannot read loose file: {e}")))?;
                if bytes.len() as u64 != envelope_len {
                    return Err(self.corrupt(
                        id,
                        loc,
                        format!(
                            "loose file has {} bytes, locator says {envelope_len}",
                            bytes.len()
                        ),
                    ));
                }
                Ok(bytes)
            }
            Location::Packed {
                pack,
                offset,
                entry_len,
            } => {
                let file = self
                    .pack_handle(pack)
                    .map_err(|e| self.corrupt(id, loc, format!("cannot open pack: {e}")))?;
                let len = usize::try_from(entry_len)
                    .map_err(|_| self.corrupt(id, loc, "entry length does not fit in memory"))?;
                let mut buf = vec![0u8; len];
                crate::platform::read_exact_at(&file, &mut buf, offset)
                    .map_err(|e| self.corrupt(id, loc, format!("cannot read pack entry: {e}")))?;
                self.check_entry_header(id, loc, &buf, entry_len)?;
                buf.drain(..ENTRY_HEADER_LEN);
                Ok(buf)
            }
        }
    }

    /// Check the pack entry header at the start of `entry` (at least
    /// [`ENTRY_HEADER_LEN`] bytes read at the locator's offset) against the
    /// object it should hold and the locator's entry length.
    fn check_entry_header(
        &self,
        id: &ObjectId,
        loc: &Location,
        entry: &[u8],
        entry_len: u64,
    ) -> Result<()> {
        let mut head = [0u8; ENTRY_HEADER_LEN];
        head.copy_from_slice(&entry[..ENTRY_HEADER_LEN]);
        let (key, env_len) =
            pack::parse_entry_header(&head).map_err(|r| self.corrupt(id, loc, r))?;
        if key != id.to_bytes() {
            return Err(self.corrupt(id, loc, "pack entry names a different object"));
        }
        if env_len != entry_len - ENTRY_HEADER_LEN as u64 {
            return Err(self.corrupt(id, loc, "pack entry length disagrees with the locator"));
        }
        Ok(())
    }

    /// An object's original payload length, from its envelope header alone
    /// (at most 28 bytes read; pack framing, kind and the header's lengths
    /// are checked, the payload is neither read nor hashed). For
    /// acceptance's manifest check of a file that is one chunk: the chunk's
    /// bytes were verified against its id when they were uploaded, and only
    /// its length is left to compare.
    pub fn payload_len(&self, id: &ObjectId) -> Result<u64> {
        let loc = self.locate(id)?.ok_or(StoreError::NotFound { id: *id })?;
        // The envelope header and, for codec 1, the original length.
        const WANT: u64 = HEADER_LEN as u64 + 8;
        let (head, env_len) = match loc {
            Location::Loose { envelope_len } => {
                let path = layout::loose_path(&self.dir, id);
                let file = File::open(&path)
                    .map_err(|e| self.corrupt(id, &loc, format!("cannot open loose file: {e}")))?;
                let n = WANT.min(envelope_len) as usize;
                let mut head = vec![0u8; n];
                crate::platform::read_exact_at(&file, &mut head, 0)
                    .map_err(|e| self.corrupt(id, &loc, format!("cannot read loose file: {e}")))?;
                (head, envelope_len)
            }
            Location::Packed {
                pack,
                offset,
                entry_len,
            } => {
                let file = self
                    .pack_handle(pack)
                    .map_err(|e| self.corrupt(id, &loc, format!("cannot open pack: {e}")))?;
                // The locator row's decoder holds entry_len to at least
                // both headers.
                let env_len = loc.envelope_len();
                let n = ENTRY_HEADER_LEN + WANT.min(env_len) as usize;
                let mut buf = vec![0u8; n];
                crate::platform::read_exact_at(&file, &mut buf, offset)
                    .map_err(|e| self.corrupt(id, &loc, format!("cannot read pack entry: {e}")))?;
                self.check_entry_header(id, &loc, &buf, entry_len)?;
                buf.drain(..ENTRY_HEADER_LEN);
                (buf, env_len)
            }
        };
        let Some(fixed) = head.get(..HEADER_LEN) else {
            return Err(self.corrupt(id, &loc, "envelope shorter than its header"));
        };
        let mut h = [0u8; HEADER_LEN];
        h.copy_from_slice(fixed);
        let header = envelope::EnvelopeHeader::parse(&h)
            .map_err(|e| self.corrupt(id, &loc, e.to_string()))?;
        if header.kind != id.kind {
            return Err(self.corrupt(id, &loc, "the envelope holds another kind"));
        }
        if header.envelope_len() != env_len {
            return Err(self.corrupt(id, &loc, "envelope length disagrees with the locator"));
        }
        let original = if header.codec == envelope::CODEC_IDENTITY {
            header.stored_len
        } else {
            let Some(b) = head.get(HEADER_LEN..HEADER_LEN + 8) else {
                return Err(self.corrupt(id, &loc, "codec-1 payload without its length"));
            };
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            u64::from_le_bytes(a)
        };
        if original > max_payload(id.kind) {
            return Err(self.corrupt(id, &loc, "original length above the kind's limit"));
        }
        Ok(original)
    }

    /// Read an object's original payload, verifying its identity. A damaged
    /// byte is [`StoreError::CorruptObject`] naming the object; wrong data is
    /// never returned.
    pub fn get(&self, id: &ObjectId) -> Result<Vec<u8>> {
        let loc = self.locate(id)?.ok_or(StoreError::NotFound { id: *id })?;
        self.get_at(id, &loc)
    }

    /// Read an object's original payload *without* checking it against its
    /// identity (the envelope is still decoded and bounded). Only for a
    /// caller that verifies the bytes by other means: acceptance's deep
    /// manifest check hashes every chunk into the file content id, which a
    /// damaged byte cannot survive, so hashing each chunk first would be a
    /// second pass for nothing.
    pub fn get_unverified(&self, id: &ObjectId) -> Result<Vec<u8>> {
        let loc = self.locate(id)?.ok_or(StoreError::NotFound { id: *id })?;
        if let Some(payload) = self.read_packed_identity(id, &loc)? {
            return Ok(payload);
        }
        let mut env = self.read_envelope_at(id, &loc)?;
        let decoded = envelope::decode(&env, max_payload(id.kind))
            .map_err(|e| self.corrupt(id, &loc, e.to_string()))?;
        if decoded.kind != id.kind {
            return Err(self.corrupt(id, &loc, "the envelope holds another kind"));
        }
        match decoded.payload {
            std::borrow::Cow::Borrowed(_) => {
                env.drain(..HEADER_LEN);
                Ok(env)
            }
            std::borrow::Cow::Owned(v) => Ok(v),
        }
    }

    /// A packed object stored as is (codec identity: every random chunk),
    /// read straight into a buffer of its own: both headers first (the
    /// same checks as [`ObjectStore::read_envelope_at`] and
    /// `envelope::decode` make), then the payload at its offset. Reading
    /// the whole entry and shifting the headers off cost two copies of
    /// every byte the deep manifest check reads (issue #19: 8 % of the
    /// check's samples in a 2 GiB upload). `None`: not packed or
    /// not codec identity, or a header the general path must judge (it
    /// names the fault).
    fn read_packed_identity(&self, id: &ObjectId, loc: &Location) -> Result<Option<Vec<u8>>> {
        const HEADS: usize = ENTRY_HEADER_LEN + HEADER_LEN;
        let Location::Packed {
            pack,
            offset,
            entry_len,
        } = *loc
        else {
            return Ok(None);
        };
        if entry_len < HEADS as u64 {
            return Ok(None);
        }
        let file = self
            .pack_handle(pack)
            .map_err(|e| self.corrupt(id, loc, format!("cannot open pack: {e}")))?;
        let mut head = [0u8; HEADS];
        crate::platform::read_exact_at(&file, &mut head, offset)
            .map_err(|e| self.corrupt(id, loc, format!("cannot read pack entry: {e}")))?;
        self.check_entry_header(id, loc, &head, entry_len)?;
        let mut h = [0u8; HEADER_LEN];
        h.copy_from_slice(&head[ENTRY_HEADER_LEN..]);
        let Ok(header) = envelope::EnvelopeHeader::parse(&h) else {
            return Ok(None);
        };
        if header.kind != id.kind
            || header.codec != envelope::CODEC_IDENTITY
            || header.envelope_len() != entry_len - ENTRY_HEADER_LEN as u64
            || header.stored_len > max_payload(id.kind)
        {
            return Ok(None);
        }
        let n = usize::try_from(header.stored_len)
            .map_err(|_| self.corrupt(id, loc, "payload length does not fit in memory"))?;
        let mut buf = vec![0u8; n];
        crate::platform::read_exact_at(&file, &mut buf, offset + HEADS as u64)
            .map_err(|e| self.corrupt(id, loc, format!("cannot read pack entry: {e}")))?;
        Ok(Some(buf))
    }

    pub(crate) fn get_at(&self, id: &ObjectId, loc: &Location) -> Result<Vec<u8>> {
        let mut env = self.read_envelope_at(id, loc)?;
        let payload = envelope::decode_verified(&env, id, max_payload(id.kind))
            .map_err(|e| self.corrupt(id, loc, e.to_string()))?;
        match payload {
            std::borrow::Cow::Borrowed(_) => {
                env.drain(..HEADER_LEN);
                Ok(env)
            }
            std::borrow::Cow::Owned(v) => Ok(v),
        }
    }

    /// Read `len` bytes at `offset` of a chunk object's original bytes. The
    /// whole chunk (at most 16 MiB) is verified before any byte is returned.
    pub fn read_chunk_range(&self, id: &ObjectId, offset: u64, len: u64) -> Result<Vec<u8>> {
        let bytes = self.get(id)?;
        let size = bytes.len() as u64;
        match offset.checked_add(len) {
            Some(end) if end <= size => Ok(bytes[offset as usize..end as usize].to_vec()),
            _ => Err(StoreError::RangeOutOfBounds {
                id: *id,
                offset,
                len,
                size,
            }),
        }
    }

    /// Stream an object's original payload into `out` in bounded memory,
    /// verifying identity at the end. On a mismatch the error names the
    /// object; bytes already written must then be discarded by the caller
    /// (use [`ObjectStore::reconstruct`] for files, which never exposes them).
    pub fn read_to(&self, id: &ObjectId, out: &mut impl Write) -> Result<u64> {
        let mut r = self.open_reader(id)?;
        std::io::copy(&mut r, out).map_err(|e| match e.downcast::<StoreError>() {
            Ok(se) => se,
            Err(e) => StoreError::Io {
                path: self.dir.clone(),
                source: e,
            },
        })
    }
}

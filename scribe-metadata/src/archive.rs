//! The independent recovery archive of a metadata database (seed 004,
//! "Independent archive and consolidated recovery bases"): a `.recovery`
//! directory beside the database (or where `.recovery-location` says),
//! holding `HEAD` (the 112-byte cursor) and 20-digit `.journal` segments of
//! chained frames, each frame one `.scrj` payload of committed records.
//!
//! After a journaled transaction commits, [`Archive::publish`] appends the
//! outbox records beyond `HEAD` as one frame, flushes the segment, then
//! writes `HEAD.tmp`, flushes it, renames it over `HEAD` and flushes the
//! directory; only then is the write acknowledged. A failure fences
//! further writes (`archive_unavailable`) until restart; reads keep
//! working. Bytes beyond `HEAD` are an unpublished tail and are replaced.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use redb::{Database, ReadableDatabase};
use scribe_format::recovery::{
    self as rj, ArchiveHead, Frame, Record, SegmentHeader, SegmentWriter, TypeCheck, HEAD_LEN,
};
use scribe_format::recovery_base::{self as rb, BasePointer, BaseReader};
use scribe_format::ErrorCode;

use crate::database_descriptor::sync_dir;
use crate::error::{MetadataError, Result};
use crate::journal::{self, Replayed, RECORDS};

/// File name of the cursor.
pub const HEAD_FILE: &str = "HEAD";
/// Longest `.recovery-location` selection, in bytes.
pub const MAX_LOCATION: usize = 32_768;

/// Fault injection for tests: called with the step just completed
/// (`"flush"` before an empty flushed transaction makes unflushed records
/// durable, `"committed"` once the metadata transaction committed and before any
/// archive write, `"frame"` after the frame flush, `"head"` after the HEAD
/// rename);
/// returning an error fails the publication there.
pub type ArchiveHook = dyn Fn(&'static str) -> std::io::Result<()> + Send + Sync;

/// `metadata.redb` -> `metadata.recovery` (the default archive directory).
pub fn default_dir(db_path: &Path) -> PathBuf {
    db_path.with_extension("recovery")
}

/// `metadata.redb` -> `metadata.recovery-location`.
pub fn location_file(db_path: &Path) -> PathBuf {
    db_path.with_extension("recovery-location")
}

/// The archive directory of `db_path`: the `.recovery-location` selection
/// when that file exists (an absolute UTF-8 directory of 1..=32,768 bytes),
/// otherwise the sibling `.recovery` directory.
pub fn archive_dir(db_path: &Path) -> Result<PathBuf> {
    let loc = location_file(db_path);
    match std::fs::read(&loc) {
        Ok(bytes) => {
            let bad = |why: &str| MetadataError::corrupt(format!("{}: {why}", loc.display()));
            let text = std::str::from_utf8(&bytes).map_err(|_| bad("not UTF-8"))?;
            if text.is_empty() || text.len() > MAX_LOCATION {
                return Err(bad("a directory of 1 to 32,768 bytes is required"));
            }
            let p = PathBuf::from(text);
            if !p.is_absolute() {
                return Err(bad("the selected directory is not absolute"));
            }
            Ok(p)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(default_dir(db_path)),
        Err(e) => Err(MetadataError::io(&loc, e)),
    }
}

fn fenced(detail: impl Into<String>) -> MetadataError {
    MetadataError::refused(ErrorCode::ArchiveUnavailable, detail)
}

/// Read and decode `dir/HEAD`.
///
/// On Linux the inode a reader opened as `HEAD` becomes `HEAD.tmp` at the
/// next publication and is overwritten at the one after (`write_head`):
/// a reader of a live archive that loses that race reads a cursor whose
/// checksum fails, and reads again. A `HEAD` that fails three times is
/// reported.
pub fn read_head(dir: &Path) -> Result<ArchiveHead> {
    let path = dir.join(HEAD_FILE);
    let mut tries = 0;
    loop {
        let bytes = std::fs::read(&path).map_err(|e| MetadataError::io(&path, e))?;
        match ArchiveHead::decode(&bytes) {
            Ok(h) => return Ok(h),
            Err(_) if tries < 2 => tries += 1,
            Err(e) => {
                return Err(MetadataError::Recovery {
                    path,
                    offset: 0,
                    source: e,
                })
            }
        }
    }
}

pub(crate) fn write_head(dir: &Path, head: &ArchiveHead) -> std::io::Result<()> {
    let tmp = dir.join("HEAD.tmp");
    #[cfg(target_os = "linux")]
    if exchange::write_head(&tmp, &dir.join(HEAD_FILE), &head.encode())? {
        return sync_dir_io(dir);
    }
    let mut f = File::create(&tmp)?;
    f.write_all(&head.encode())?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, dir.join(HEAD_FILE))?;
    sync_dir_io(dir)
}

/// Linux: `HEAD.tmp` is kept and reused. The new cursor is written over
/// it in place (it is not `HEAD`: a torn write there is never read),
/// flushed, and atomically exchanged with `HEAD` (`renameat2`
/// `RENAME_EXCHANGE`); `HEAD.tmp` then holds the previous cursor, to be
/// overwritten by the next publication. This is the spec's
/// written/flushed/renamed order without creating and freeing an inode
/// per publication (0.75 -> 0.45 ms per cursor on the reference machine,
/// `docs/performance.md`). Safe because the caller flushes the directory
/// before the next publication overwrites the old cursor's inode.
#[cfg(target_os = "linux")]
mod exchange {
    use std::fs::OpenOptions;
    use std::os::unix::fs::FileExt;
    use std::path::Path;

    use rustix::fs::{renameat_with, RenameFlags, CWD};
    use rustix::io::Errno;

    /// `Ok(false)`: exchange is not possible here (no `HEAD` yet, or a
    /// file system without it); the caller creates and renames instead.
    pub(super) fn write_head(tmp: &Path, head: &Path, bytes: &[u8]) -> std::io::Result<bool> {
        let f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(tmp)?;
        f.write_all_at(bytes, 0)?;
        if f.metadata()?.len() != bytes.len() as u64 {
            // A leftover of another length (a crash while it was
            // created): cut to the cursor, flushed with its metadata.
            f.set_len(bytes.len() as u64)?;
            f.sync_all()?;
        } else {
            f.sync_data()?;
        }
        drop(f);
        match renameat_with(CWD, tmp, CWD, head, RenameFlags::EXCHANGE) {
            Ok(()) => Ok(true),
            Err(Errno::NOENT | Errno::INVAL | Errno::NOSYS | Errno::NOTSUP) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}

pub(crate) fn sync_dir_io(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

pub(crate) struct State {
    pub(crate) head: ArchiveHead,
    pub(crate) fence: Option<String>,
}

/// The archive of one open, writable database.
pub struct Archive {
    pub(crate) dir: PathBuf,
    pub(crate) db: Arc<Database>,
    pub(crate) state: Mutex<State>,
    hook: Mutex<Option<Box<ArchiveHook>>>,
    /// The last outbox sequence known to be on disk: the end of the last
    /// flushed (`Durability::Immediate`) journaled commit. A streamed
    /// preparation commits most of its staging transactions without a
    /// flush (docs/metadata.md, "Staging flushes"); their records are never
    /// archived before a later flushed commit covers them, so `HEAD` never
    /// names a record a power loss could take back.
    durable: AtomicU64,
    /// Flushed journaled commits (and forced flushes) since opening.
    flushes: AtomicU64,
    /// `HEAD.end` and whether writes are fenced, readable without the
    /// state lock, which a publication holds across its segment and `HEAD`
    /// flushes: a writer beginning its transaction (`journal::begin_archived`)
    /// reads them instead of waiting for a publication (issue 19: the
    /// staging writer of an import waited 12 ms of every 50 for the
    /// publisher beside it).
    published: AtomicU64,
    fenced: AtomicBool,
}

impl Archive {
    /// Create the archive of a new database: the directory (which must not
    /// hold a `HEAD`) and the zero position at the database's end.
    pub fn create(db_path: &Path, db: Arc<Database>) -> Result<Archive> {
        let dir = archive_dir(db_path)?;
        let profile = {
            let tx = db.begin_read()?;
            journal::check_profile(&tx, db_path)?
        };
        if dir.join(HEAD_FILE).exists() {
            return Err(MetadataError::refused(
                ErrorCode::AlreadyExists,
                format!("{} already holds an archive", dir.display()),
            ));
        }
        std::fs::create_dir_all(&dir).map_err(|e| MetadataError::io(&dir, e))?;
        let head = ArchiveHead::zero(profile.identity, profile.floor);
        write_head(&dir, &head).map_err(|e| MetadataError::io(&dir, e))?;
        if let Some(parent) = dir.parent() {
            sync_dir(parent)?;
        }
        Ok(Archive::at(dir, db, head, profile.end))
    }

    /// An archive published up to `head` of a database whose file ends at
    /// `end` (what an opened file holds survived: durable).
    fn at(dir: PathBuf, db: Arc<Database>, head: ArchiveHead, end: u64) -> Archive {
        Archive {
            dir,
            db,
            state: Mutex::new(State { head, fence: None }),
            hook: Mutex::new(None),
            durable: AtomicU64::new(end),
            flushes: AtomicU64::new(0),
            published: AtomicU64::new(head.end),
            fenced: AtomicBool::new(false),
        }
    }

    /// Open the existing archive of `db_path` (never initialising one),
    /// check its identity against the database and that it is not ahead of
    /// it, then drain the database outbox beyond `HEAD` into it.
    pub fn open(db_path: &Path, db: Arc<Database>) -> Result<Archive> {
        let dir = archive_dir(db_path)?;
        let profile = {
            let tx = db.begin_read()?;
            journal::check_profile(&tx, db_path)?
        };
        if !dir.join(HEAD_FILE).exists() {
            return Err(MetadataError::RecoveryProfileMissing {
                path: dir.clone(),
                what: "the recovery archive (HEAD) is missing".into(),
            });
        }
        let head = read_head(&dir)?;
        if head.identity != profile.identity {
            return Err(MetadataError::corrupt(format!(
                "{}: archive of database {} where {} is {}",
                dir.join(HEAD_FILE).display(),
                hex::encode(head.identity),
                db_path.display(),
                hex::encode(profile.identity)
            )));
        }
        if head.end > profile.end {
            return Err(MetadataError::corrupt(format!(
                "{}: the archive reaches {} but {} ends at {}; restore from the archive",
                dir.join(HEAD_FILE).display(),
                head.end,
                db_path.display(),
                profile.end
            )));
        }
        if head.end < profile.floor {
            return Err(MetadataError::corrupt(format!(
                "{}: the archive ends at {} below the retained floor {}",
                dir.join(HEAD_FILE).display(),
                head.end,
                profile.floor
            )));
        }
        let a = Archive::at(dir, db, head, profile.end);
        a.publish()?;
        Ok(a)
    }

    /// The archive directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The published cursor.
    pub fn head(&self) -> ArchiveHead {
        self.state
            .lock()
            .map(|s| s.head)
            .unwrap_or_else(|p| p.into_inner().head)
    }

    /// Tests: fail publication at a step.
    pub fn set_hook(&self, hook: Option<Box<ArchiveHook>>) {
        if let Ok(mut h) = self.hook.lock() {
            *h = hook;
        }
    }

    /// The last outbox sequence known to be flushed to disk.
    pub fn durable_end(&self) -> u64 {
        self.durable.load(Ordering::Acquire)
    }

    /// Flushed journaled commits of this database since it was opened
    /// (tests and diagnostics: how many flushes a bulk operation cost).
    pub fn flushes(&self) -> u64 {
        self.flushes.load(Ordering::Relaxed)
    }

    /// A flushed commit ending at `end` made every earlier commit durable.
    pub(crate) fn note_durable(&self, end: u64) {
        self.flushes.fetch_add(1, Ordering::Relaxed);
        self.durable.fetch_max(end, Ordering::AcqRel);
    }

    /// Make the outbox durable through `end` (or through its current end,
    /// whichever is lower) when unflushed commits lie below it: one empty
    /// flushed transaction, whose flush carries every earlier commit. The
    /// caller holds no write transaction of this database and not the
    /// archive's state (a writer takes that lock inside its transaction).
    pub(crate) fn ensure_durable(&self, end: u64) -> Result<()> {
        if self.durable_end() >= end {
            return Ok(());
        }
        let current = {
            let tx = self.db.begin_read()?;
            journal::check_profile(&tx, &self.dir)?.end
        };
        if self.durable_end() >= end.min(current) {
            return Ok(());
        }
        // Records that cannot be made durable cannot be archived: fence
        // writes as a failed publication does.
        let flushed = self
            .step("flush")
            .map_err(|e| MetadataError::io(&self.dir, e))
            .and_then(|()| journal::flush(&self.db));
        match flushed {
            Ok(end) => {
                self.note_durable(end);
                Ok(())
            }
            Err(e) => Err(self.fence(e)),
        }
    }

    /// Fence writes after `e` (a failed flush or publication) and return
    /// the refusal to give the caller.
    fn fence(&self, e: MetadataError) -> MetadataError {
        let why = format!("{}: {e}", self.dir.display());
        if let Ok(mut s) = self.state.lock() {
            s.fence.get_or_insert_with(|| why.clone());
        }
        self.fenced.store(true, Ordering::Release);
        fenced(format!(
            "the recovery archive could not be written ({why}); writes are fenced until restart"
        ))
    }

    /// `HEAD.end`, read without waiting for a publication in progress (it
    /// may be a publication behind).
    pub fn published_end(&self) -> u64 {
        self.published.load(Ordering::Acquire)
    }

    /// Refuse when an earlier archive failure fenced writes (without the
    /// state lock unless fenced).
    pub fn check_writable(&self) -> Result<()> {
        if !self.fenced.load(Ordering::Acquire) {
            return Ok(());
        }
        let s = self
            .state
            .lock()
            .map_err(|_| MetadataError::Gate("archive state poisoned".into()))?;
        match &s.fence {
            Some(why) => Err(fenced(format!("writes are fenced until restart: {why}"))),
            None => Ok(()),
        }
    }

    /// Append every committed outbox record beyond `HEAD` as one frame and
    /// publish the new cursor. Any failure fences writes.
    pub fn publish(&self) -> Result<()> {
        self.publish_through(u64::MAX)
    }

    /// Publish what flushed commits hold beyond `HEAD`, never forcing a
    /// flush (a streamed preparation's publisher, beside its staging
    /// writer's unflushed transactions).
    pub fn publish_flushed(&self) -> Result<()> {
        self.publish_locked_unless(|_| false)
    }

    /// Return once `HEAD` covers sequence `end` (a commit's last record):
    /// at once when a publication that ran while this caller waited for
    /// the state lock already carried it; otherwise publish every committed
    /// record beyond `HEAD` (this caller's and all committed meanwhile) as
    /// one frame. No writer waits for a frame of records committed after
    /// its own. Any failure fences writes.
    pub fn publish_through(&self, end: u64) -> Result<()> {
        self.ensure_durable(end)?;
        self.publish_locked_unless(|head| head.end >= end)
    }

    /// Under the state lock: refuse when fenced, return when `covered`,
    /// else publish (a failure fences writes).
    fn publish_locked_unless(&self, covered: impl Fn(&ArchiveHead) -> bool) -> Result<()> {
        let mut s = self
            .state
            .lock()
            .map_err(|_| MetadataError::Gate("archive state poisoned".into()))?;
        if let Some(why) = &s.fence {
            return Err(fenced(format!("writes are fenced until restart: {why}")));
        }
        if covered(&s.head) {
            return Ok(());
        }
        match self.publish_locked(&mut s) {
            Ok(()) => Ok(()),
            Err(e) => {
                drop(s);
                Err(self.fence(e))
            }
        }
    }

    /// Publish every committed record beyond `HEAD` up to the durable end
    /// (records of unflushed commits wait for [`Archive::ensure_durable`]).
    pub(crate) fn publish_locked(&self, s: &mut State) -> Result<()> {
        let tx = self.db.begin_read()?;
        let mut profile = journal::check_profile(&tx, &self.dir)?;
        profile.end = profile.end.min(self.durable_end());
        let head = s.head;
        if profile.end <= head.end {
            return Ok(());
        }
        self.step("committed")
            .map_err(|e| MetadataError::io(&self.dir, e))?;
        // The SCRJ payload of head.end + 1 ..= end, streamed from the outbox.
        let header = SegmentHeader {
            identity: profile.identity,
            after: head.end,
            end: profile.end,
        };
        let mut w = SegmentWriter::new(Vec::new(), header).map_err(MetadataError::journal)?;
        let records = tx.open_table(RECORDS)?;
        // A missing last row is refused by `finish` (the count is short).
        for (expected, row) in (head.end + 1..).zip(records.range(head.end + 1..=profile.end)?) {
            let (k, v) = row?;
            if k.value() != expected {
                return Err(MetadataError::corrupt(format!(
                    "recovery outbox: sequence {expected} is missing"
                )));
            }
            rj::Record::validate(v.value()).map_err(|e| MetadataError::Recovery {
                path: PathBuf::from(rj::TABLE_RECORDS),
                offset: k.value(),
                source: e,
            })?;
            w.record(k.value(), v.value())
                .map_err(MetadataError::journal)?;
        }
        let (payload, _, _) = w.finish().map_err(MetadataError::journal)?;
        drop(records);
        drop(tx);
        // The frame is written in three parts; the payload is not copied.
        let sum: [u8; 32] = payload[payload.len() - 32..]
            .try_into()
            .map_err(|_| MetadataError::corrupt("recovery payload without its digest"))?;
        let chain = rj::chain_digest(&head.chain, payload.len() as u64, &sum);
        let frame_head = rj::frame_header(&head.chain, payload.len() as u64);
        let frame_len = frame_head.len() + payload.len() + chain.len();
        let (segment, offset) = if head.segment == 0 {
            (1, 0)
        } else if head.offset >= rj::SEGMENT_ROLL_BYTES {
            // A segment left behind ends exactly at its last published
            // frame: readers take every byte of a segment that is not
            // HEAD's, so an unpublished tail (a frame flushed before a
            // crash, never named by HEAD) is cut off before the next
            // segment exists.
            self.trim_tail(head.segment, head.offset)?;
            (head.segment + 1, 0)
        } else {
            (head.segment, head.offset)
        };
        let path = self.dir.join(rj::segment_file_name(segment));
        let io = |e: std::io::Error| MetadataError::io(&path, e);
        let created = !path.exists();
        let mut f = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        // Replace any unpublished tail beyond HEAD (a truncation to the
        // same length would still dirty the inode).
        if f.metadata().map_err(io)?.len() != offset {
            f.set_len(offset).map_err(io)?;
        }
        f.seek(SeekFrom::Start(offset)).map_err(io)?;
        {
            let mut w = std::io::BufWriter::with_capacity(1 << 20, &mut f);
            w.write_all(&frame_head)
                .and_then(|_| w.write_all(&payload))
                .and_then(|_| w.write_all(&chain))
                .and_then(|_| w.flush())
                .map_err(io)?;
        }
        f.sync_data().map_err(io)?;
        drop(f);
        if created {
            sync_dir(&self.dir)?;
        }
        self.step("frame").map_err(io)?;
        let next = ArchiveHead {
            identity: profile.identity,
            segment,
            offset: offset + frame_len as u64,
            end: profile.end,
            chain,
        };
        write_head(&self.dir, &next).map_err(|e| MetadataError::io(self.dir.join(HEAD_FILE), e))?;
        s.head = next;
        self.published.store(next.end, Ordering::Release);
        self.step("head")
            .map_err(|e| MetadataError::io(self.dir.join(HEAD_FILE), e))?;
        Ok(())
    }

    fn trim_tail(&self, segment: u64, published: u64) -> Result<()> {
        let path = self.dir.join(rj::segment_file_name(segment));
        let io = |e: std::io::Error| MetadataError::io(&path, e);
        let f = OpenOptions::new().write(true).open(&path).map_err(io)?;
        if f.metadata().map_err(io)?.len() > published {
            f.set_len(published).map_err(io)?;
            f.sync_all().map_err(io)?;
        }
        Ok(())
    }

    pub(crate) fn step(&self, what: &'static str) -> std::io::Result<()> {
        match self.hook.lock() {
            Ok(h) => match h.as_ref() {
                Some(f) => f(what),
                None => Ok(()),
            },
            Err(_) => Ok(()),
        }
    }
}

/// What [`verify`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub head: ArchiveHead,
    /// Segment files read (from the base's segment, or 1, to HEAD's).
    pub segments: u64,
    /// Frames read, including those a base covers.
    pub frames: u64,
    /// The journal end of the selected logical base, if any.
    pub base: Option<u64>,
}

/// Read `dir/BASE` (`None` when the archive has never been consolidated).
pub fn read_pointer(dir: &Path) -> Result<Option<BasePointer>> {
    let path = dir.join(rb::POINTER_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(MetadataError::io(&path, e)),
    };
    BasePointer::decode(&bytes)
        .map(Some)
        .map_err(|e| MetadataError::Recovery {
            path,
            offset: 0,
            source: e,
        })
}

/// Walk every published frame of the archive at `dir`, calling `each` with
/// the segment file, the payload's offset in it and the payload. Reads
/// only.
///
/// Without a `BASE` the walk starts at segment 1 from the zero chain. With
/// one it starts at the base cursor's segment (older segments may be
/// pruned): the first frame's own previous digest is taken as given, and
/// the chain must then equal the cursor's at the cursor's offset, so a
/// damaged frame before the cursor is still detected. Frames continue to
/// HEAD's offset and must reach HEAD's chain.
pub fn walk(dir: &Path, each: impl FnMut(&Path, u64, &[u8]) -> Result<()>) -> Result<Verified> {
    let pointer = read_pointer(dir)?;
    walk_from(dir, pointer.as_ref(), each)
}

fn walk_from(
    dir: &Path,
    pointer: Option<&BasePointer>,
    mut each: impl FnMut(&Path, u64, &[u8]) -> Result<()>,
) -> Result<Verified> {
    let head = read_head(dir)?;
    let cursor = pointer.map(|p| p.cursor);
    if let Some(c) = cursor {
        if c.identity != head.identity || c.end > head.end || c.segment > head.segment {
            return Err(MetadataError::corrupt(format!(
                "{}: the base cursor (segment {}, end {}) is not behind HEAD (segment {}, end {})",
                dir.join(rb::POINTER_FILE).display(),
                c.segment,
                c.end,
                head.segment,
                head.end
            )));
        }
    }
    let first = match cursor {
        Some(c) if c.segment > 0 => c.segment,
        _ => 1,
    };
    let mut prev = [0u8; 32];
    let mut frames = 0;
    // With a base, the first frame's previous digest is read from it.
    let mut take_prev = cursor.is_some_and(|c| c.segment > 0);
    let mut passed_cursor = cursor.is_none_or(|c| c.segment == 0);
    for n in first..=head.segment {
        let path = dir.join(rj::segment_file_name(n));
        let mut bytes = Vec::new();
        File::open(&path)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .map_err(|e| MetadataError::io(&path, e))?;
        let limit = if n == head.segment {
            if (bytes.len() as u64) < head.offset {
                return Err(MetadataError::Recovery {
                    path: path.clone(),
                    offset: bytes.len() as u64,
                    source: scribe_format::FormatError::Truncated {
                        what: "archive segment",
                        needed: head.offset - bytes.len() as u64,
                        available: 0,
                    }
                    .into(),
                });
            }
            head.offset as usize
        } else {
            bytes.len()
        };
        let mut at = 0usize;
        while at < limit {
            if take_prev {
                if let Some(p) = bytes.get(at + 8..at + 40) {
                    prev.copy_from_slice(p);
                }
                take_prev = false;
            }
            let (frame, used) =
                Frame::decode(&bytes[at..limit], &prev).map_err(|e| MetadataError::Recovery {
                    path: path.clone(),
                    offset: at as u64,
                    source: e,
                })?;
            each(&path, at as u64 + 40, frame.payload)?;
            prev = frame.chain;
            at += used;
            frames += 1;
            if let Some(c) = cursor.filter(|c| c.segment == n && c.offset == at as u64) {
                if prev != c.chain {
                    return Err(MetadataError::Recovery {
                        path: dir.join(rb::POINTER_FILE),
                        offset: 48,
                        source: rj::RecoveryError::ChainMismatch,
                    });
                }
                passed_cursor = true;
            }
        }
    }
    if !passed_cursor {
        return Err(MetadataError::corrupt(format!(
            "{}: no frame ends at the base cursor (segment {}, offset {})",
            dir.join(rb::POINTER_FILE).display(),
            cursor.map(|c| c.segment).unwrap_or_default(),
            cursor.map(|c| c.offset).unwrap_or_default()
        )));
    }
    if prev != head.chain {
        return Err(MetadataError::Recovery {
            path: dir.join(HEAD_FILE),
            offset: 48,
            source: rj::RecoveryError::ChainMismatch,
        });
    }
    Ok(Verified {
        head,
        segments: (head.segment + 1).saturating_sub(first),
        frames,
        base: cursor.map(|c| c.end),
    })
}

/// Stream the base `pointer` selects in `dir`, checking its identity and
/// end against the cursor and its digest against the pointer, and hand
/// each entry to `each`. Returns the base's declared types.
pub(crate) fn read_base(
    dir: &Path,
    pointer: &BasePointer,
    mut each: impl FnMut(Record) -> Result<()>,
) -> Result<TypeCheck> {
    let path = dir.join(rb::base_file_name(pointer.cursor.end));
    let f = File::open(&path).map_err(|e| MetadataError::io(&path, e))?;
    let err = |offset: u64, source| MetadataError::Recovery {
        path: path.clone(),
        offset,
        source,
    };
    let mut r =
        BaseReader::new(std::io::BufReader::with_capacity(1 << 20, f)).map_err(|e| err(0, e))?;
    let h = r.header();
    if h.identity != pointer.cursor.identity {
        return Err(err(
            6,
            rj::RecoveryError::IdentityMismatch {
                expected: hex::encode(pointer.cursor.identity),
                found: hex::encode(h.identity),
            },
        ));
    }
    if h.end != pointer.cursor.end {
        return Err(err(
            22,
            rj::RecoveryError::SegmentGap {
                expected: pointer.cursor.end,
                found: h.end,
            },
        ));
    }
    let mut check = TypeCheck::default();
    loop {
        let at = r.offset();
        let Some(rec) = r.next_record().map_err(|e| err(r.offset(), e))? else {
            break;
        };
        check.apply(&rec).map_err(|e| err(at, e))?;
        each(rec)?;
    }
    if r.file_digest() != pointer.file_digest {
        return Err(MetadataError::Recovery {
            path: dir.join(rb::POINTER_FILE),
            offset: HEAD_LEN as u64,
            source: rj::RecoveryError::Checksum {
                what: "logical base (the digest BASE records)",
            },
        });
    }
    check
        .apply(&Record::Commit)
        .map_err(|e| err(r.offset(), e))?;
    Ok(check)
}

/// Verify the archive at `dir`: the selected base (when consolidated),
/// every frame and payload decodes, chains, and continues the previous
/// one; the last reaches HEAD's end. Reads only.
pub fn verify(dir: &Path) -> Result<Verified> {
    let pointer = read_pointer(dir)?;
    let (mut check, base_end) = match &pointer {
        Some(p) => (read_base(dir, p, |_| Ok(()))?, Some(p.cursor.end)),
        None => (TypeCheck::default(), None),
    };
    let mut expected_after = base_end;
    let mut identity = pointer.map(|p| p.cursor.identity);
    let v = walk_from(dir, pointer.as_ref(), |path, offset, payload| {
        let seg_err = |e| MetadataError::Recovery {
            path: path.to_owned(),
            offset,
            source: e,
        };
        let mut r = rj::SegmentReader::new(payload).map_err(seg_err)?;
        let h = r.header();
        let want = *identity.get_or_insert(h.identity);
        if h.identity != want {
            return Err(seg_err(rj::RecoveryError::IdentityMismatch {
                expected: hex::encode(want),
                found: hex::encode(h.identity),
            }));
        }
        // Frames the base covers are decoded but not followed.
        let covered = base_end.is_some_and(|b| h.end <= b);
        if let (Some(after), false) = (expected_after, covered) {
            if h.after != after {
                return Err(seg_err(rj::RecoveryError::SegmentGap {
                    expected: after,
                    found: h.after,
                }));
            }
        }
        let checking = !covered && (expected_after.is_some() || h.after == 0);
        while let Some((_, rec)) = r.next_record().map_err(|e| MetadataError::Recovery {
            path: path.to_owned(),
            offset: offset + r.offset(),
            source: e,
        })? {
            if checking {
                check.apply(&rec).map_err(|e| MetadataError::Recovery {
                    path: path.to_owned(),
                    offset: offset + r.offset(),
                    source: e,
                })?;
            }
        }
        if !covered {
            expected_after = Some(h.end);
        }
        Ok(())
    })?;
    if let Some(end) = expected_after {
        if end != v.head.end {
            return Err(MetadataError::corrupt(format!(
                "{}: HEAD names end {} but the frames end at {end}",
                dir.join(HEAD_FILE).display(),
                v.head.end
            )));
        }
    }
    Ok(v)
}

/// Rebuild the database `target` (which must not exist) from the archive
/// at `dir` alone: the selected base (if any) then every later frame are
/// replayed into `<target>.replay`, renamed to `target` only when
/// everything verified and applied.
pub fn recover(dir: &Path, target: &Path) -> Result<Replayed> {
    recover_at(dir, target).map(|(done, _)| done)
}

/// [`recover`], also returning the archive cursor the replay reached (a
/// served archive may have advanced past the HEAD read first).
pub fn recover_at(dir: &Path, target: &Path) -> Result<(Replayed, ArchiveHead)> {
    if target.exists() {
        return Err(MetadataError::refused(
            ErrorCode::AlreadyExists,
            format!(
                "{} exists; recovery publishes only a new file",
                target.display()
            ),
        ));
    }
    let head = read_head(dir)?;
    let pointer = read_pointer(dir)?;
    let quarantine = journal::quarantine_path(target);
    if quarantine.exists() {
        std::fs::remove_file(&quarantine).map_err(|e| MetadataError::io(&quarantine, e))?;
    }
    let result = (|| -> Result<(Replayed, ArchiveHead)> {
        let mut r = journal::Replayer::new(&quarantine, Some(head.identity))?;
        r.skip_dropped(last_drops(dir, pointer.as_ref())?);
        let base_end = match &pointer {
            Some(p) => {
                let mut entries = Vec::new();
                let types = read_base(dir, p, |rec| {
                    entries.push(rec);
                    if entries.len() >= journal::REPLAY_BATCH_RECORDS * 8 {
                        r.load(std::mem::take(&mut entries))?;
                    }
                    Ok(())
                })?;
                r.load(entries)?;
                r.loaded_base(p.cursor.end, types);
                Some(p.cursor.end)
            }
            None => None,
        };
        // `walk_from` reads HEAD once more and stops at that cursor: compare
        // with the one it followed (a served archive advances meanwhile).
        let walked = walk_from(dir, pointer.as_ref(), |path, offset, payload| {
            if let Some(b) = base_end {
                let h = rj::SegmentReader::new(payload)
                    .map_err(|e| MetadataError::Recovery {
                        path: path.to_owned(),
                        offset,
                        source: e,
                    })?
                    .header();
                if h.end <= b {
                    return Ok(());
                }
            }
            r.feed(path, offset, payload)
        })?;
        if walked.head.identity != head.identity || r.end() != walked.head.end {
            return Err(MetadataError::corrupt(format!(
                "{}: HEAD names end {} but the frames end at {}",
                dir.join(HEAD_FILE).display(),
                walked.head.end,
                r.end()
            )));
        }
        Ok((r.finish()?, walked.head))
    })();
    match result {
        Ok(done) => {
            std::fs::rename(&quarantine, target).map_err(|e| MetadataError::io(target, e))?;
            if let Some(parent) = target.parent().filter(|d| !d.as_os_str().is_empty()) {
                sync_dir(parent)?;
            }
            Ok(done)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&quarantine);
            Err(e)
        }
    }
}

/// A first pass over the frames recovery will feed (those beyond the base
/// `pointer` names): per table, the index of its last `Drop` among their
/// records (see [`journal::Replayer::skip_dropped`]). Frames published
/// after this pass are fed without it (their rows are simply applied).
fn last_drops(
    dir: &Path,
    pointer: Option<&BasePointer>,
) -> Result<std::collections::HashMap<String, u64>> {
    let base_end = pointer.map(|p| p.cursor.end);
    let mut drops = std::collections::HashMap::new();
    let mut index = 0u64;
    walk_from(dir, pointer, |path, offset, payload| {
        let err = |at: u64, e| MetadataError::Recovery {
            path: path.to_owned(),
            offset: offset + at,
            source: e,
        };
        let mut reader = rj::SegmentReader::new(payload).map_err(|e| err(0, e))?;
        if base_end.is_some_and(|b| reader.header().end <= b) {
            return Ok(());
        }
        while let Some((_, rec)) = reader.next_record().map_err(|e| err(0, e))? {
            if let Record::Drop { name } = rec {
                drops.insert(name, index);
            }
            index += 1;
        }
        Ok(())
    })?;
    Ok(drops)
}

#[allow(dead_code)]
const _HEAD_IS_112: () = assert!(HEAD_LEN == 112);

/// Give the (closed, exclusively owned) database at `db_path` a new
/// journal identity and a fresh archive in its default `.recovery`
/// directory: any `.recovery-location` selection and any archive there
/// are removed first (they belong to the database this one was copied
/// from), then [`journal::rewrite_from_state`] records the present state
/// and each of its transactions is published to the new archive, so the
/// archive alone rebuilds the database (`recover --from-archive`).
pub fn start_fresh(db_path: &Path) -> Result<ArchiveHead> {
    let loc = location_file(db_path);
    if loc.exists() {
        std::fs::remove_file(&loc).map_err(|e| MetadataError::io(&loc, e))?;
    }
    let dir = default_dir(db_path);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| MetadataError::io(&dir, e))?;
    }
    let db = Arc::new(Database::open(db_path)?);
    let mut archive: Option<Archive> = None;
    let profile = journal::rewrite_from_state(&db, || {
        if archive.is_none() {
            archive = Some(Archive::create(db_path, db.clone())?);
        }
        archive.as_ref().map(|a| a.publish()).unwrap_or(Ok(()))
    })?;
    let archive = match archive {
        Some(a) => a,
        None => Archive::create(db_path, db.clone())?,
    };
    let head = archive.head();
    if head.end != profile.end || head.identity != profile.identity {
        return Err(MetadataError::corrupt(format!(
            "{}: the fresh archive ends at {} where the journal ends at {}",
            dir.display(),
            head.end,
            profile.end
        )));
    }
    Ok(head)
}

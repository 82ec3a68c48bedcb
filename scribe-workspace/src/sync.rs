//! Applying a sync plan: a durable journal, path by path, resumable after a
//! kill at any point, never destroying unsubmitted work.
//!
//! [`begin`] records the whole plan (every path with its target state, or
//! none for a removal) in one durable transaction before any file changes.
//! [`apply`] then works through the undone rows in batches:
//!
//! 1. classify each path against its baseline, its opened record and the
//!    file on disk; a path with local work (opened, modified without `edit`,
//!    deleted offline, or an untracked file in the way) is *deferred*: its
//!    target is kept in the `deferred` table for `resolve`, and the file is
//!    not touched;
//! 2. every file sync replaces or removes is displaced into the recovery
//!    area (index first, recorded in the journal row, then the rename), even
//!    when it equals its baseline (section 9a: an editor may still hold it);
//! 3. targets are materialized on all cores into `.scribe/_state/tmp/`
//!    (the materializer may first fetch the whole batch's bytes together),
//!    given their mode and flushed — small files together, many flushes in
//!    flight — then renamed into place, and the directories that changed
//!    are flushed;
//! 4. one transaction per batch marks the rows done and records baselines
//!    with fresh fingerprints.
//!
//! A rerun after a crash finds each row in one of these states and finishes
//! it: a file already equal to its target is only recorded; a file already
//! displaced (recovery name recorded, file gone) is written. [`finish`]
//! moves the watermark and clears the journal in one transaction.

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::detect::hash_file;
use scribe_format::ErrorCode;

use crate::error::{Result, WorkspaceError};
use crate::records::fingerprint_of;
use crate::records::{BaselineRecord, JournalEntry, RecoveryReason};
use crate::recovery;
use crate::scan::now_ms;
use crate::state::Workspace;

/// The executable bit a write step's target carries.
fn batch_mode(step: &Step) -> bool {
    matches!(step, Step::Write(t) if t.mode == 1)
}

/// Rows handled per batch (bounds memory and the size of each transaction).
pub const BATCH: usize = 256;

/// Why the bytes of a target could not be written, with the registered
/// code of what failed: `io` when this machine's file system refused (a
/// full disk among them: `disk_full`), `unreachable` when the server's
/// connection was lost, `corrupt` when fetched bytes do not verify. A
/// sync's error keeps that code instead of a general refusal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteError {
    pub code: ErrorCode,
    pub detail: String,
    /// The local file system is full (no space left, or a quota).
    pub disk_full: bool,
}

impl WriteError {
    /// A failure with `code` that is not a full disk.
    pub fn new(code: ErrorCode, detail: impl Into<String>) -> WriteError {
        WriteError {
            code,
            detail: detail.into(),
            disk_full: false,
        }
    }

    /// A local I/O failure: `what` was being done when `e` happened.
    pub fn io(what: impl std::fmt::Display, e: &std::io::Error) -> WriteError {
        WriteError {
            code: ErrorCode::Io,
            detail: format!("{what}: {e}"),
            disk_full: scribe_format::concern::is_disk_full(e),
        }
    }
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.detail)
    }
}

/// Writes the bytes of a target state.
pub trait Materializer: Sync {
    /// Write the complete content of `target` into `out`, a new empty
    /// file (created by the caller with its final mode), verifying that it
    /// hashes to `target.content`. Nothing is flushed: [`apply`] flushes a
    /// whole batch together.
    fn write_to(
        &self,
        path: &str,
        target: &BaselineRecord,
        out: &mut std::fs::File,
    ) -> std::result::Result<(), WriteError>;

    /// Complete `out`, which may already hold bytes of `target` written by
    /// an earlier run that was interrupted (#18 item 4): keep the part that
    /// verifies, write the rest, and leave `out` holding exactly the
    /// content, verified. Returns the bytes kept. Default: start over.
    fn resume_to(
        &self,
        path: &str,
        target: &BaselineRecord,
        out: &mut std::fs::File,
    ) -> std::result::Result<u64, WriteError> {
        use std::io::Seek;
        out.set_len(0)
            .and_then(|()| out.seek(std::io::SeekFrom::Start(0)))
            .map_err(|e| {
                WriteError::io(format_args!("emptying the partial download of {path}"), &e)
            })?;
        self.write_to(path, target, out).map(|()| 0)
    }

    /// Write the complete content of `target` to the new file `dest` and
    /// flush it (one file, outside a sync batch: revert, resolve).
    fn materialize(
        &self,
        path: &str,
        target: &BaselineRecord,
        dest: &Path,
    ) -> std::result::Result<(), WriteError> {
        let mut out = std::fs::File::create(dest)
            .map_err(|e| WriteError::io(format_args!("creating {}", dest.display()), &e))?;
        self.write_to(path, target, &mut out)?;
        out.sync_all()
            .map_err(|e| WriteError::io(format_args!("flushing {}", dest.display()), &e))
    }

    /// Called once per batch, before any of its files is written, with
    /// every target the batch writes: a materializer may fetch their bytes
    /// together (one round trip for many small files). Default: nothing.
    fn prefetch(&self, _targets: &[BaselineRecord]) -> std::result::Result<(), WriteError> {
        Ok(())
    }

    /// Called after `path` was renamed into place (before its batch is
    /// recorded); a hook for progress and crash tests.
    fn placed(&self, _path: &str) {}

    /// A named point inside a batch (`sync-batch-flushed`: temporaries
    /// written and flushed, nothing renamed; `sync-batch-placed`: renamed
    /// and directories flushed, the batch not yet recorded); a hook for
    /// crash tests.
    fn checkpoint(&self, _name: &str) {}
}

/// Files at least this large are flushed by the worker that wrote them
/// (their write-back overlaps the next file); smaller ones are flushed
/// together once the batch is written.
pub const FLUSH_INLINE_BYTES: u64 = 8 << 20;
/// Flushes in flight at once for a batch of small files.
const FLUSH_THREADS: usize = 16;

/// Run `f` over `items` on up to [`FLUSH_THREADS`] threads (flushes wait
/// on the device, not the CPU, so more threads than cores pay off).
fn in_flight<T: Sync>(
    items: &[T],
    f: impl Fn(&T) -> std::io::Result<()> + Sync,
) -> std::result::Result<(), (usize, std::io::Error)> {
    if items.is_empty() {
        return Ok(());
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failed: std::sync::Mutex<Option<(usize, std::io::Error)>> = std::sync::Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..FLUSH_THREADS.min(items.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(item) = items.get(i) else { break };
                if let Err(e) = f(item) {
                    let mut slot = failed.lock().unwrap_or_else(|p| p.into_inner());
                    slot.get_or_insert((i, e));
                    next.store(items.len(), std::sync::atomic::Ordering::SeqCst);
                    break;
                }
            });
        }
    });
    match failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// How [`apply`] makes a batch durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushPolicy {
    /// Each small file flushed by its handle ([`FLUSH_THREADS`] in flight),
    /// then each directory that changed.
    PerFile,
    /// Linux: one `syncfs(2)` of the workspace's file system for the
    /// batch's files, and one for its renames, instead of a flush per file
    /// and per directory (issue 19). Falls back to [`FlushPolicy::PerFile`]
    /// where there is no such call, and for batches of fewer than
    /// [`GROUP_FLUSH_MIN`] files or directories.
    FileSystem,
}

/// Below this many files (or directories) in a batch, flushing each one
/// is cheaper than flushing the whole file system.
pub const GROUP_FLUSH_MIN: usize = 8;

impl FlushPolicy {
    /// `SCRIBE_SYNC_FLUSH=per-file` chooses [`FlushPolicy::PerFile`] (a
    /// machine where other programs keep much unflushed data on the
    /// workspace's file system); otherwise [`FlushPolicy::FileSystem`].
    pub fn from_env() -> FlushPolicy {
        match std::env::var("SCRIBE_SYNC_FLUSH").as_deref() {
            Ok("per-file") => FlushPolicy::PerFile,
            _ => FlushPolicy::FileSystem,
        }
    }
}

/// Flush a group: the whole file system holding `any` in one call when the
/// policy allows and the group is large enough, else each item by `one`.
fn flush_group<T: Sync>(
    policy: FlushPolicy,
    any: Option<&std::fs::File>,
    items: &[T],
    one: impl Fn(&T) -> std::io::Result<()> + Sync,
) -> std::result::Result<(), (Option<usize>, std::io::Error)> {
    if policy == FlushPolicy::FileSystem && items.len() >= GROUP_FLUSH_MIN {
        if let Some(fd) = any {
            if let Some(result) = crate::platform::sync_file_system(fd) {
                return result.map_err(|e| (None, e));
            }
        }
    }
    in_flight(items, one).map_err(|(k, e)| (Some(k), e))
}

/// A target written to its temporary: the handle while its flush is
/// pending, and its metadata (the fingerprint it gets once placed).
struct Written {
    tmp: PathBuf,
    file: Option<std::fs::File>,
    meta: std::fs::Metadata,
    /// A partial download (kept when its batch fails): the bytes kept
    /// from an interrupted earlier run. `None`: a temporary in `tmp/`.
    resumed: Option<u64>,
}

/// Where a large target is downloaded: `.scribe/_state/partial/`, which
/// (unlike `tmp/`) is not cleaned at open, so a sync killed or cut off in
/// the middle of a large file resumes it (#18 item 4). The name binds the
/// content and the path (two paths of one content in a batch are written
/// by two workers); [`finish_in`] empties the directory once the journal
/// is done.
fn partial_path(ws: &Workspace, path: &str, target: &BaselineRecord) -> PathBuf {
    let at = blake3::hash(path.as_bytes());
    ws.state_dir().join(PARTIAL_DIR).join(format!(
        "{}-{}.part",
        target.content.to_hex(),
        &at.to_hex()[..16]
    ))
}

/// The directory of kept partial downloads, under `.scribe/_state`.
pub const PARTIAL_DIR: &str = "partial";

/// Write a large target through its kept partial download: reopen what an
/// earlier run left (never truncated here), let the materializer keep the
/// verified part and write the rest, give the file its mode, flush it. A
/// failure leaves the partial file for the next run (the materializer
/// verifies it again then).
fn write_partial(
    materializer: &dyn Materializer,
    path: &str,
    target: &BaselineRecord,
    partial: &Path,
    readonly: bool,
) -> std::result::Result<Written, WriteError> {
    let exec = target.mode == 1;
    let io = |what: &str, e: std::io::Error| {
        WriteError::io(format_args!("{what} {}", partial.display()), &e)
    };
    let mut file =
        crate::platform::open_partial_target(partial, exec).map_err(|e| io("opening", e))?;
    let resumed = materializer.resume_to(path, target, &mut file)?;
    let meta = crate::platform::set_partial_mode(&file, exec, readonly)
        .map_err(|e| io("setting the mode of", e))?;
    file.sync_all().map_err(|e| io("flushing", e))?;
    drop(file);
    crate::platform::finish_target_mode(partial, exec, readonly)
        .map_err(|e| io("setting the mode of", e))?;
    Ok(Written {
        tmp: partial.to_path_buf(),
        file: None,
        meta,
        resumed: Some(resumed),
    })
}

/// Create `tmp` with its final mode and write `target` (smaller than
/// [`FLUSH_INLINE_BYTES`]; larger ones go through [`write_partial`]) into
/// it, keeping it open for the batch's flush.
fn write_target(
    materializer: &dyn Materializer,
    path: &str,
    target: &BaselineRecord,
    tmp: &Path,
    readonly: bool,
) -> std::result::Result<Written, WriteError> {
    let exec = target.mode == 1;
    let io = |what: &str, e: std::io::Error| {
        WriteError::io(format_args!("{what} {}", tmp.display()), &e)
    };
    // A temporary of the same name is a leftover of this process (the
    // name holds the pid): an earlier failed batch. It is never placed.
    let created = match crate::platform::create_target_file(tmp, exec, readonly) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let _ = std::fs::remove_file(tmp);
            crate::platform::create_target_file(tmp, exec, readonly)
        }
        other => other,
    };
    let mut file = created.map_err(|e| io("creating", e))?;
    materializer.write_to(path, target, &mut file)?;
    let meta = crate::platform::settle_target_mode(&file, exec, readonly)
        .map_err(|e| io("reading the mode of", e))?;
    Ok(Written {
        tmp: tmp.to_path_buf(),
        file: Some(file),
        meta,
        resumed: None,
    })
}

/// Why a path was deferred instead of updated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeferReason {
    /// The path is opened for the next submission.
    Opened,
    /// The file differs from its baseline but is not opened.
    ModifiedLocally,
    /// The file was deleted without `delete`.
    DeletedLocally,
    /// An untracked file stands where the target would be written.
    Untracked,
    /// A directory on the way to the path is a symbolic link (or a
    /// junction): sync never writes or deletes through one
    /// ([`crate::guard`]).
    BeyondSymlink,
    /// This platform cannot hold the name (a `\\` on Windows).
    Unrepresentable,
    /// A local file the sync does not remove (modified, opened or
    /// untracked) stands where a directory on the way to the path goes.
    FileInTheWay,
}

impl DeferReason {
    pub fn describe(self) -> &'static str {
        match self {
            DeferReason::Opened => "opened locally; resolve to combine",
            DeferReason::ModifiedLocally => "modified locally without edit; reconcile or resolve",
            DeferReason::DeletedLocally => "deleted locally without delete; reconcile or resolve",
            DeferReason::Untracked => "an untracked local file is in the way; add it or move it",
            DeferReason::BeyondSymlink => {
                "beyond a symbolic link; replace the link with a directory, then resolve --theirs"
            }
            DeferReason::Unrepresentable => {
                "this platform cannot hold the name; rename it from another platform"
            }
            DeferReason::FileInTheWay => {
                "a local file stands where its directory goes; resolve or move that file, then resolve --theirs"
            }
        }
    }
}

/// What an [`apply`] run did.
#[derive(Clone, Debug, Default)]
pub struct SyncReport {
    pub written: Vec<String>,
    /// The written paths this workspace did not track before (new here):
    /// `sync` says "added" for them, "updated" for the rest.
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub deferred: Vec<(String, DeferReason)>,
    pub displaced: Vec<String>,
    /// Files replaced or removed that were exactly their baseline (content
    /// the server holds): removed, not kept in the recovery area.
    pub replaced_unmodified: Vec<String>,
    /// Bytes written into the working copy.
    pub bytes_written: u64,
    /// Bytes of large files kept from an interrupted earlier run's partial
    /// downloads (verified, not fetched again).
    pub bytes_resumed: u64,
}

/// Record a plan durably. Refuses when another journal is unfinished.
pub fn begin(
    ws: &Workspace,
    target_change: u64,
    plan: &[(String, Option<BaselineRecord>)],
) -> Result<()> {
    let tx = ws.write()?;
    if let Some(existing) = tx.meta_u64("journal-target")? {
        return Err(WorkspaceError::JournalInProgress { target: existing });
    }
    tx.put_meta_u64("journal-target", target_change)?;
    for (path, target) in plan {
        tx.put_journal(
            path,
            &JournalEntry {
                target: *target,
                done: false,
                recovery: None,
            },
        )?;
    }
    tx.commit()
}

/// Which server deltas a sync plan is built from.
///
/// `forward = (from, to)`: every path changed in `(from, to]`, each at the
/// state the delta reports (its state in `to`, the target). `restat =
/// (from, to)`: every path changed in `(from, to]` not already planned,
/// each at its state in the target (one `Stat` per path).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlanRanges {
    pub forward: Option<(u64, u64)>,
    pub restat: Option<(u64, u64)>,
}

/// The local publication pin: the `last-submit` receipt's change when it
/// is of this workspace's branch and incarnation and newer than `synced`
/// (the paths submitted since the sync are at that change locally). A
/// receipt from another branch or incarnation is not a local pin.
pub fn local_pin(ws: &Workspace) -> Result<Option<u64>> {
    let meta = ws.meta()?;
    Ok(crate::submit::last_submit(ws)?
        .filter(|r| {
            r.branch == meta.branch_id
                && r.incarnation == meta.incarnation
                && r.change > meta.synced
        })
        .map(|r| r.change))
}

/// The deltas that bring a working copy synced to `synced`, with paths
/// submitted up to `pin` since, to `target` (`None`: the head, which is
/// never older than an accepted local submission).
///
/// An explicit target older than the newest local state reconciles
/// against the pin even when it equals the watermark: the paths changed
/// in `(min(target, synced), max(synced, pin)]` are planned at their state
/// in the target.
pub fn plan_ranges(synced: u64, pin: Option<u64>, target: Option<u64>) -> PlanRanges {
    let newest = pin.map_or(synced, |p| p.max(synced));
    match target {
        None => PlanRanges {
            forward: Some((synced, 0)),
            restat: None,
        },
        Some(t) if t >= newest => PlanRanges {
            forward: (t > synced).then_some((synced, t)),
            restat: None,
        },
        Some(t) if t > synced => PlanRanges {
            forward: Some((synced, t)),
            restat: Some((t, newest)),
        },
        Some(t) => PlanRanges {
            forward: None,
            restat: Some((t, newest)),
        },
    }
}

/// Drop an unfinished journal without moving the watermark, so a sync can
/// plan afresh toward a newer change (issue #14 item 5: a journal whose
/// target cannot be applied must not strand the workspace). Rows already
/// done keep the baselines they wrote; the next plan, from the unchanged
/// watermark, names those paths again at their newer state. A row whose
/// unmodified file was already displaced into the recovery area (and is
/// gone from the working copy) loses its baseline, so the next plan writes
/// the path instead of deferring it as deleted locally; the displaced copy
/// stays in the recovery area.
pub fn abandon(ws: &Workspace) -> Result<()> {
    let tx = ws.write()?;
    if tx.meta_u64("journal-target")?.is_none() {
        return Err(WorkspaceError::NoJournal);
    }
    for (path, row) in tx.journal_all()? {
        let gone = std::fs::symlink_metadata(ws.root().join(&path)).is_err();
        if !row.done && row.recovery.is_some() && gone {
            tx.remove_baseline(&path)?;
        }
    }
    tx.remove_meta("journal-target")?;
    tx.clear_journal()?;
    tx.commit()
}

/// The unfinished journal's target change, if any.
pub fn in_progress(ws: &Workspace) -> Result<Option<u64>> {
    ws.read()?.meta_u64("journal-target")
}

enum Step {
    /// Nothing left to do but record it.
    Record(Option<BaselineRecord>),
    /// Write this target (after any displacement).
    Write(BaselineRecord),
    /// Remove the file (already displaced) and the baseline.
    Remove,
    Defer(DeferReason),
    /// An opened path whose baseline already is the target revision:
    /// nothing to write, record or resolve.
    AlreadyThere,
}

/// The baseline a file that a step replaces or removes matched, when it is
/// of the current incarnation: its content is on the server, so once
/// displaced (and checked again there) it is not kept in the recovery area
/// (#18 item 5).
type Unmodified = Option<BaselineRecord>;

/// The Unix millisecond now, once it is later than `ms` (waiting for the
/// next one when it is not yet; usually the directory flushes since took
/// longer): later than the ctime of every file renamed before `ms` was
/// read (a file time is never ahead of the clock), as
/// `Fingerprint::proves_unchanged` needs. `None` when the clock does not
/// get there within 20 ms (it was set back).
fn after(ms: u64) -> Option<u64> {
    for _ in 0..100 {
        let t = now_ms();
        if t > ms {
            return Some(t);
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    None
}

/// The clock once it reaches `settle_at` (the time a batch's observation
/// must not precede for its mtimes to be settled), waiting only when that
/// is at most [`SETTLE_WAIT_MS`] away; otherwise now (a file system with
/// coarse timestamps: those files are hashed by the next status rather
/// than waited for).
fn settled_after(settle_at: u64) -> u64 {
    let now = now_ms();
    if now >= settle_at || settle_at - now > SETTLE_WAIT_MS {
        return now;
    }
    after(settle_at - 1).unwrap_or(now)
}

/// The longest [`settled_after`] waits for a batch's mtimes to settle.
const SETTLE_WAIT_MS: u64 = 5;

/// Whether the file at `full` is exactly `base` (by settled fingerprint or hash).
fn matches_state(full: &Path, meta: &std::fs::Metadata, base: &BaselineRecord) -> Result<bool> {
    let exec = u8::from(crate::platform::is_executable(meta));
    if crate::platform::HAS_EXECUTABLE_BIT && exec != base.mode {
        return Ok(false);
    }
    if meta.len() != base.size {
        return Ok(false);
    }
    let now = fingerprint_of(meta, 0);
    if base.fingerprint.proves_unchanged(&now) {
        return Ok(true);
    }
    let (content, _) = hash_file(full).map_err(WorkspaceError::io(full))?;
    Ok(content == base.content)
}

/// Whether baseline `b` already is the revision `t` (same incarnation,
/// change, manifest, content and mode).
fn same_revision(b: &BaselineRecord, t: &BaselineRecord) -> bool {
    b.incarnation == t.incarnation
        && b.change == t.change
        && b.manifest == t.manifest
        && b.content == t.content
        && b.size == t.size
        && b.mode == t.mode
}

fn classify(
    ws: &Workspace,
    links: &mut crate::guard::LinkCheck<'_>,
    path: &str,
    row: &JournalEntry,
    incarnation: &[u8; 16],
) -> Result<(Step, Unmodified)> {
    let mut unmodified = None;
    let step = classify_step(ws, links, path, row, incarnation, &mut unmodified)?;
    Ok((step, unmodified))
}

fn classify_step(
    ws: &Workspace,
    links: &mut crate::guard::LinkCheck<'_>,
    path: &str,
    row: &JournalEntry,
    incarnation: &[u8; 16],
    unmodified: &mut Unmodified,
) -> Result<Step> {
    // Nothing is read, written or removed beneath a linked directory; the
    // path waits in `deferred` with its target, like local work.
    if links.link_above(path)?.is_some() {
        return Ok(Step::Defer(DeferReason::BeyondSymlink));
    }
    if row.target.is_some() && crate::platform::check_materializable(path).is_err() {
        return Ok(Step::Defer(DeferReason::Unrepresentable));
    }
    let read = ws.read()?;
    let baseline = read.baseline(path)?;
    if read.opened(path)?.is_some() {
        // The plan names every path changed since the watermark, this
        // workspace's own submitted ones too (the watermark stays where it
        // synced): a baseline that already is the target revision leaves
        // nothing to combine, and the opened work stays as it is.
        if let (Some(b), Some(t)) = (&baseline, &row.target) {
            if same_revision(b, t) {
                return Ok(Step::AlreadyThere);
            }
        }
        return Ok(Step::Defer(DeferReason::Opened));
    }
    drop(read);
    let full = ws.root().join(path);
    let meta = match std::fs::symlink_metadata(&full) {
        Ok(m) => Some(m),
        // A file stands where a directory on the way goes: nothing is at
        // the path itself. Whether that file leaves first (a removal of
        // this journal) is known once the batch's files are displaced
        // ([`clear_the_way`]).
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            None
        }
        Err(e) => return Err(WorkspaceError::io(&full)(e)),
    };
    Ok(match (meta, baseline, row.target) {
        // Rerun: the target is already in place.
        (Some(m), _, Some(t)) if !m.is_dir() && matches_state(&full, &m, &t)? => {
            Step::Record(Some(t))
        }
        (None, _, None) => Step::Record(None),
        // Displaced by an earlier run of this journal.
        (None, _, Some(t)) if row.recovery.is_some() => Step::Write(t),
        (None, None, Some(t)) => Step::Write(t),
        (None, Some(_), Some(_)) => Step::Defer(DeferReason::DeletedLocally),
        (Some(m), Some(b), target) if !m.is_dir() && matches_state(&full, &m, &b)? => {
            if b.incarnation == *incarnation {
                *unmodified = Some(b);
            }
            match target {
                Some(t) => Step::Write(t),
                None => Step::Remove,
            }
        }
        (Some(_), Some(_), _) => Step::Defer(DeferReason::ModifiedLocally),
        // A directory where a file goes (a directory turned into a file):
        // the tracked files inside leave through this journal's removals
        // first, and [`clear_the_way`] removes what is then an empty tree
        // (or defers the path if anything else is left in it).
        (Some(m), None, Some(t)) if m.is_dir() => Step::Write(t),
        (Some(_), None, _) => Step::Defer(DeferReason::Untracked),
    })
}

/// Whether the tree at `dir` holds nothing but directories.
fn only_directories(dir: &Path) -> Result<bool> {
    for entry in std::fs::read_dir(dir).map_err(WorkspaceError::io(dir))? {
        let entry = entry.map_err(WorkspaceError::io(dir))?;
        let kind = entry
            .file_type()
            .map_err(WorkspaceError::io(entry.path()))?;
        if !kind.is_dir() || !only_directories(&entry.path())? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Remove the tree at `dir`, which holds only directories, bottom-up.
fn remove_empty_tree(dir: &Path) -> Result<()> {
    for entry in std::fs::read_dir(dir).map_err(WorkspaceError::io(dir))? {
        let entry = entry.map_err(WorkspaceError::io(dir))?;
        remove_empty_tree(&entry.path())?;
    }
    std::fs::remove_dir(dir).map_err(WorkspaceError::io(dir))
}

/// The outermost ancestor directory of `path` that is a file (or anything
/// else but a directory) on disk: what stands where a directory on the
/// way to `path` goes. `None` when every existing ancestor is a directory.
pub(crate) fn file_in_the_way<'p>(root: &Path, path: &'p str) -> Result<Option<&'p str>> {
    let mut ancestors = Vec::new();
    let mut current = scribe_format::path::parent(path);
    while let Some(dir) = current {
        ancestors.push(dir);
        current = scribe_format::path::parent(dir);
    }
    for dir in ancestors.into_iter().rev() {
        let full = root.join(dir);
        match std::fs::symlink_metadata(&full) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Ok(Some(dir)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(WorkspaceError::io(&full)(e)),
        }
    }
    Ok(None)
}

/// After a batch's displacements, make room for a target at `path` or say
/// why it must wait: an empty directory tree at the path itself (a
/// directory turned into a file whose files this journal removed) is
/// removed; a directory with anything else left in it is untracked work in
/// the way, and a file left where a directory on the way goes (a file
/// turned into a directory, the file modified, opened or untracked here) is
/// [`DeferReason::FileInTheWay`]. Nothing is displaced or overwritten.
fn clear_the_way(root: &Path, path: &str) -> Result<Option<DeferReason>> {
    if file_in_the_way(root, path)?.is_some() {
        return Ok(Some(DeferReason::FileInTheWay));
    }
    let full = root.join(path);
    match std::fs::symlink_metadata(&full) {
        Ok(m) if m.is_dir() => {
            if !only_directories(&full)? {
                return Ok(Some(DeferReason::Untracked));
            }
            remove_empty_tree(&full)?;
            Ok(None)
        }
        _ => Ok(None),
    }
}

fn tmp_path(ws: &Workspace, target: &BaselineRecord, index: usize) -> PathBuf {
    ws.state_dir().join("tmp").join(format!(
        "{}-{}-{}.part",
        target.content.to_hex(),
        index,
        std::process::id()
    ))
}

/// Remove now-empty parent directories of `path` (never the root or `.scribe`).
fn prune_parents(root: &Path, path: &str) {
    let mut current = scribe_format::path::parent(path);
    while let Some(dir) = current {
        if dir == ".scribe" || std::fs::remove_dir(root.join(dir)).is_err() {
            break;
        }
        current = scribe_format::path::parent(dir);
    }
}

/// What [`apply`] of `plan` would defer, found without changing anything
/// (each path classified as `apply` classifies it, and a target's way
/// checked as [`clear_the_way`] would find it once the plan's removals
/// are done): a caller that must not change anything when something
/// would be deferred (a view change) asks first. Files changed between
/// this and `apply` are still deferred there.
pub fn would_defer(
    ws: &Workspace,
    plan: &[(String, Option<BaselineRecord>)],
) -> Result<Vec<(String, DeferReason)>> {
    let incarnation = ws.meta()?.incarnation;
    let mut links = crate::guard::LinkCheck::new(ws.root());
    let mut out = Vec::new();
    let mut removed = std::collections::HashSet::new();
    let mut writes = Vec::new();
    for (path, target) in plan {
        let row = JournalEntry {
            target: *target,
            done: false,
            recovery: None,
        };
        match classify(ws, &mut links, path, &row, &incarnation)?.0 {
            Step::Defer(reason) => out.push((path.clone(), reason)),
            Step::Remove => {
                removed.insert(path.as_str());
            }
            Step::Write(_) => writes.push(path.as_str()),
            Step::AlreadyThere | Step::Record(_) => {}
        }
    }
    for path in writes {
        if let Some(dir) = file_in_the_way(ws.root(), path)? {
            if !removed.contains(dir) {
                out.push((path.to_string(), DeferReason::FileInTheWay));
            }
            continue;
        }
        let full = ws.root().join(path);
        if std::fs::symlink_metadata(&full).is_ok_and(|m| m.is_dir())
            && !only_removed_files(&full, path, &removed)?
        {
            out.push((path.to_string(), DeferReason::Untracked));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Whether every file in the tree at `dir` (workspace path `at`) is one
/// of `removed` (directories aside).
fn only_removed_files(
    dir: &Path,
    at: &str,
    removed: &std::collections::HashSet<&str>,
) -> Result<bool> {
    for entry in std::fs::read_dir(dir).map_err(WorkspaceError::io(dir))? {
        let entry = entry.map_err(WorkspaceError::io(dir))?;
        let kind = entry
            .file_type()
            .map_err(WorkspaceError::io(entry.path()))?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            return Ok(false);
        };
        let child = format!("{at}/{name}");
        let ok = if kind.is_dir() {
            only_removed_files(&entry.path(), &child, removed)?
        } else {
            removed.contains(child.as_str())
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Apply every undone journal row.
pub fn apply(ws: &Workspace, materializer: &dyn Materializer) -> Result<SyncReport> {
    let meta = ws.meta()?;
    let readonly = meta.readonly;
    let incarnation = meta.incarnation;
    let policy = FlushPolicy::from_env();
    let mut report = SyncReport::default();
    let mut rows: Vec<(String, JournalEntry)> = ws
        .read()?
        .journal_all()?
        .into_iter()
        .filter(|(_, e)| !e.done)
        .collect();
    // Removals first (stable: path order within each): a file turned into
    // a directory leaves before anything is written beneath it, and the
    // files of a directory turned into a file leave before the file is
    // written, even when the two rows fall in different batches.
    rows.sort_by_key(|(_, e)| e.target.is_some());
    for batch in rows.chunks(BATCH) {
        // Phase 1: classify; record displacement intents durably.
        let mut steps = Vec::with_capacity(batch.len());
        let mut intents = Vec::new();
        let mut links = crate::guard::LinkCheck::new(ws.root());
        for (path, row) in batch {
            let (step, unmodified) = classify(ws, &mut links, path, row, &incarnation)?;
            // Anything standing where a target goes, or a file being
            // removed, leaves through the recovery area, never by overwrite.
            // A directory in the way is never displaced ([`clear_the_way`]).
            let displaces = matches!(step, Step::Write(_) | Step::Remove)
                && std::fs::symlink_metadata(ws.root().join(path)).is_ok_and(|m| !m.is_dir());
            if displaces {
                let reason = if matches!(step, Step::Remove) {
                    RecoveryReason::SyncRemove
                } else {
                    RecoveryReason::SyncUpdate
                };
                let index = recovery::new_index(path, reason);
                recovery::write_index(ws.root(), &index)?;
                intents.push((path.clone(), row.clone(), index, unmodified));
            }
            steps.push(step);
        }
        if !intents.is_empty() {
            let tx = ws.write()?;
            for (path, row, index, _) in &intents {
                tx.put_journal(
                    path,
                    &JournalEntry {
                        recovery: Some(index.entry_name()),
                        ..row.clone()
                    },
                )?;
            }
            tx.commit()?;
            for (path, _, index, unmodified) in &intents {
                // Every file leaves by an atomic rename into the area; one
                // that matched its baseline is checked again there (an edit
                // made since the check above lands in the moved file) and
                // only then deleted: its content is on the server.
                recovery::move_in(ws.root(), index)?;
                if unmodified
                    .as_ref()
                    .map(|b| recovery::discard_if(ws.root(), index, |f, m| matches_state(f, m, b)))
                    .transpose()?
                    == Some(true)
                {
                    report.replaced_unmodified.push(path.clone());
                } else {
                    report.displaced.push(path.clone());
                }
            }
        }
        // Room for each target now that this batch's files have left: an
        // emptied directory goes, anything else in the way defers the path.
        for (i, step) in steps.iter_mut().enumerate() {
            if matches!(step, Step::Write(_)) {
                if let Some(reason) = clear_the_way(ws.root(), &batch[i].0)? {
                    *step = Step::Defer(reason);
                }
            }
        }
        // Phase 2: materialize targets in parallel, unflushed; large files
        // are flushed by their worker, small ones together below.
        let writes: Vec<(usize, &str, BaselineRecord)> = steps
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                Step::Write(t) => Some((i, batch[i].0.as_str(), *t)),
                _ => None,
            })
            .collect();
        if !writes.is_empty() {
            let targets: Vec<BaselineRecord> = writes.iter().map(|w| w.2).collect();
            if let Err(cause) = materializer.prefetch(&targets) {
                return Err(WorkspaceError::Materialize {
                    path: writes[0].1.to_string(),
                    cause,
                });
            }
        }
        let written: Vec<(usize, std::result::Result<Written, WriteError>)> = writes
            .par_iter()
            .map(|&(i, path, target)| {
                if target.size >= FLUSH_INLINE_BYTES {
                    let partial = partial_path(ws, path, &target);
                    return (
                        i,
                        write_partial(materializer, path, &target, &partial, readonly),
                    );
                }
                let tmp = tmp_path(ws, &target, i);
                let result = write_target(materializer, path, &target, &tmp, readonly);
                if result.is_err() {
                    let _ = std::fs::remove_file(&tmp);
                }
                (i, result)
            })
            .collect();
        let mut ready: std::collections::HashMap<usize, Written> = std::collections::HashMap::new();
        let mut failed = None;
        for (i, result) in written {
            match result {
                Ok(w) => {
                    ready.insert(i, w);
                }
                Err(cause) => {
                    failed.get_or_insert((i, cause));
                }
            }
        }
        if let Some((i, cause)) = failed {
            // Every temporary of the batch goes, not only those written
            // before the one that failed; complete partial downloads stay
            // for the next run.
            for w in ready.values().filter(|w| w.resumed.is_none()) {
                let _ = std::fs::remove_file(&w.tmp);
            }
            return Err(WorkspaceError::Materialize {
                path: batch[i].0.clone(),
                cause,
            });
        }
        // Every small file's data (its mode came with its creation) reaches
        // the disk before any of them is renamed into place: one flush of
        // the file system, or many file flushes in flight at once.
        let fs_handle = if cfg!(target_os = "linux") {
            std::fs::File::open(ws.state_dir().join("tmp")).ok()
        } else {
            None
        };
        report.bytes_resumed += ready.values().filter_map(|w| w.resumed).sum::<u64>();
        let pending: Vec<(usize, &Written)> = ready
            .iter()
            .filter(|(_, w)| w.file.is_some())
            .map(|(i, w)| (*i, w))
            .collect();
        let flushed = flush_group(policy, fs_handle.as_ref(), &pending, |(_, w)| {
            w.file.as_ref().map_or(Ok(()), |f| f.sync_all())
        })
        .map_err(|(k, e)| {
            let at = k.map_or_else(|| ws.state_dir().join("tmp"), |k| pending[k].1.tmp.clone());
            WorkspaceError::io(&at)(e)
        })
        .and_then(|()| {
            for (i, w) in &pending {
                crate::platform::finish_target_mode(&w.tmp, batch_mode(&steps[*i]), readonly)
                    .map_err(WorkspaceError::io(&w.tmp))?;
            }
            Ok(())
        });
        drop(pending);
        // Handles are closed before the renames (Windows cannot rename an
        // open file).
        for w in ready.values_mut() {
            w.file = None;
        }
        if let Err(e) = flushed {
            for w in ready.values().filter(|w| w.resumed.is_none()) {
                let _ = std::fs::remove_file(&w.tmp);
            }
            return Err(e);
        }
        materializer.checkpoint("sync-batch-flushed");
        // Phase 3: put files in place, flush the directories that changed,
        // then record the batch in one transaction. The observation is
        // taken once every written file's mtime has settled (a file system
        // with fine timestamps needs at most a millisecond): a file written
        // in the same millisecond would otherwise be hashed by the next
        // status, however long after.
        let recorded_ms = settled_after(
            ready
                .values()
                .map(|w| fingerprint_of(&w.meta, 0))
                .map(|f| f.mtime_ms().saturating_add(f.required_separation_ms()))
                .max()
                .unwrap_or(0),
        );
        let mut dirs: std::collections::BTreeSet<PathBuf> = std::collections::BTreeSet::new();
        let mut known_dirs: std::collections::HashSet<PathBuf> = std::collections::HashSet::new();
        let before = ws.read()?;
        for (i, step) in steps.iter().enumerate() {
            let Step::Write(target) = step else { continue };
            let path = &batch[i].0;
            if before.baseline(path)?.is_none() {
                report.added.push(path.clone());
            }
            let full = ws.root().join(path);
            let tmp = &ready[&i].tmp;
            if let Some(parent) = full.parent() {
                if !known_dirs.contains(parent) && !parent.is_dir() {
                    // New directories: each one's entry lives in its parent.
                    let mut d = parent;
                    while !d.is_dir() {
                        dirs.insert(d.to_path_buf());
                        match d.parent() {
                            Some(up) => d = up,
                            None => break,
                        }
                    }
                    dirs.insert(d.to_path_buf());
                    std::fs::create_dir_all(parent).map_err(WorkspaceError::io(parent))?;
                }
                known_dirs.insert(parent.to_path_buf());
                dirs.insert(parent.to_path_buf());
            }
            std::fs::rename(tmp, &full).map_err(WorkspaceError::io(&full))?;
            materializer.placed(path);
            report.written.push(path.clone());
            report.bytes_written += target.size;
        }
        drop(before);
        let renamed_ms = now_ms();
        let dirs: Vec<PathBuf> = dirs.into_iter().collect();
        if let Err((k, e)) = flush_group(policy, fs_handle.as_ref(), &dirs, |d| {
            crate::platform::flush_dir(d)
        }) {
            let at = k
                .map(|k| dirs[k].clone())
                .unwrap_or_else(|| ws.root().to_path_buf());
            return Err(WorkspaceError::io(&at)(e));
        }
        drop(fs_handle);
        materializer.checkpoint("sync-batch-placed");
        let placed_ms = after(renamed_ms);
        let tx = ws.write()?;
        for (i, step) in steps.iter().enumerate() {
            let (path, row) = &batch[i];
            let full = ws.root().join(path);
            let done = JournalEntry {
                done: true,
                ..row.clone()
            };
            match step {
                Step::Defer(reason) => {
                    tx.put_deferred(path, row)?;
                    report.deferred.push((path.clone(), *reason));
                }
                Step::AlreadyThere => {}
                Step::Record(None) | Step::Remove => {
                    tx.remove_baseline(path)?;
                    if matches!(step, Step::Remove) {
                        prune_parents(ws.root(), path);
                        report.removed.push(path.clone());
                    }
                }
                Step::Write(target) => {
                    // The handle's own metadata, taken after the last write
                    // (a rename changes neither size nor mtime).
                    let mut fingerprint = fingerprint_of(&ready[&i].meta, recorded_ms);
                    // The rename moved the file's ctime past `recorded_ms`.
                    // An observation settled then stays settled at any
                    // later time (no later write can reproduce its mtime),
                    // so it is recorded as of after the renames: the
                    // ctime then proves the file unchanged too.
                    if let Some(placed_ms) = placed_ms.filter(|_| fingerprint.is_settled()) {
                        fingerprint.recorded_ms = placed_ms;
                    }
                    tx.put_baseline(
                        path,
                        &BaselineRecord {
                            fingerprint,
                            ..*target
                        },
                    )?;
                }
                Step::Record(Some(target)) => {
                    let meta =
                        std::fs::symlink_metadata(&full).map_err(WorkspaceError::io(&full))?;
                    tx.put_baseline(
                        path,
                        &BaselineRecord {
                            fingerprint: fingerprint_of(&meta, recorded_ms),
                            ..*target
                        },
                    )?;
                }
            }
            tx.put_journal(path, &done)?;
        }
        tx.commit()?;
    }
    // Reported in path order, whatever order the rows were applied in.
    report.written.sort();
    report.added.sort();
    report.removed.sort();
    report.deferred.sort_by(|a, b| a.0.cmp(&b.0));
    report.displaced.sort();
    report.replaced_unmodified.sort();
    Ok(report)
}

/// Move the watermark to the journal's target and clear the journal, once
/// every row is done. Returns the new watermark.
pub fn finish(ws: &Workspace) -> Result<u64> {
    finish_in(ws, None)
}

/// [`finish`], also publishing a new repository incarnation in the same
/// transaction as the watermark (the full sync after a restore).
pub fn finish_in(ws: &Workspace, incarnation: Option<[u8; 16]>) -> Result<u64> {
    let tx = ws.write()?;
    let Some(target) = tx.meta_u64("journal-target")? else {
        return Err(WorkspaceError::NoJournal);
    };
    if let Some((path, _)) = tx.journal_all()?.into_iter().find(|(_, e)| !e.done) {
        return Err(WorkspaceError::JournalUnfinished { path });
    }
    tx.put_meta_u64("synced", target)?;
    tx.remove_meta("journal-target")?;
    // A completed sync supersedes the local publication receipt.
    tx.remove_meta("last-submit")?;
    if let Some(inc) = incarnation {
        tx.put_meta_bytes("incarnation", &inc)?;
    }
    tx.clear_journal()?;
    tx.commit()?;
    // Partial downloads were for this journal's targets: every one is
    // placed now, so what is left is a leftover (a target that changed).
    let partial = ws.state_dir().join(PARTIAL_DIR);
    if let Ok(entries) = std::fs::read_dir(&partial) {
        for e in entries.flatten() {
            let _ = std::fs::remove_file(e.path());
        }
    }
    Ok(target)
}

#[cfg(test)]
#[path = "sync_plan_tests.rs"]
mod plan_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{Fingerprint, OpenedAction, OpenedRecord};
    use scribe_format::{FileContentId, ManifestId};
    use std::collections::HashMap;

    /// Materializes from an in-memory map of content id → bytes.
    struct Memory(HashMap<FileContentId, Vec<u8>>);

    impl Materializer for Memory {
        fn write_to(
            &self,
            _path: &str,
            t: &BaselineRecord,
            out: &mut std::fs::File,
        ) -> std::result::Result<(), crate::sync::WriteError> {
            let bytes = self.0.get(&t.content).ok_or_else(|| {
                crate::sync::WriteError::new(scribe_format::ErrorCode::NotFound, "unknown content")
            })?;
            std::io::Write::write_all(out, bytes)
                .map_err(|e| crate::sync::WriteError::io("writing", &e))
        }
    }

    fn target(bytes: &[u8], change: u64) -> BaselineRecord {
        BaselineRecord {
            incarnation: [4; 16],
            manifest: ManifestId::of_payload(bytes),
            content: FileContentId::of(bytes),
            size: bytes.len() as u64,
            mode: 0,
            change,
            fingerprint: Fingerprint::default(),
        }
    }

    #[test]
    fn a_displaced_unmodified_file_changed_after_its_check_is_kept() {
        let (_d, ws) = ws();
        let root = ws.root().to_owned();
        std::fs::create_dir_all(root.join("art")).unwrap();
        let base = target(b"server bytes", 1);
        for (edit, kept) in [(false, false), (true, true)] {
            std::fs::write(root.join("art/a.psd"), b"server bytes").unwrap();
            let index = recovery::new_index("art/a.psd", RecoveryReason::SyncUpdate);
            recovery::write_index(&root, &index).unwrap();
            recovery::move_in(&root, &index).unwrap();
            let moved = recovery::recovery_dir(&root).join(index.entry_name());
            if edit {
                // An edit that reached the file after sync's first check
                // (same size, so only the content tells).
                std::fs::write(&moved, b"artist edit!").unwrap();
            }
            let gone =
                recovery::discard_if(&root, &index, |f, m| matches_state(f, m, &base)).unwrap();
            assert_eq!(gone, !kept);
            assert_eq!(moved.exists(), kept);
            let listed = recovery::list(&root).unwrap().len();
            assert_eq!(listed, usize::from(kept), "edit {edit}");
        }
    }

    /// Writes whole contents, and large ones through `resume_to` like a
    /// server link: keeps the prefix of `out` that matches, and, while
    /// `cut` is set, stops half-way with an error (a dropped connection).
    struct Cut {
        bytes: Memory,
        cut: std::sync::atomic::AtomicBool,
        found: std::sync::Mutex<Vec<u64>>,
    }

    impl Materializer for Cut {
        fn write_to(
            &self,
            path: &str,
            t: &BaselineRecord,
            out: &mut std::fs::File,
        ) -> std::result::Result<(), crate::sync::WriteError> {
            self.bytes.write_to(path, t, out)
        }

        fn resume_to(
            &self,
            _path: &str,
            t: &BaselineRecord,
            out: &mut std::fs::File,
        ) -> std::result::Result<u64, crate::sync::WriteError> {
            use std::io::{Read, Seek, Write};
            let bytes = self.bytes.0.get(&t.content).ok_or_else(|| {
                crate::sync::WriteError::new(scribe_format::ErrorCode::NotFound, "unknown content")
            })?;
            let mut have = Vec::new();
            out.read_to_end(&mut have)
                .map_err(|e| crate::sync::WriteError::io("writing", &e))?;
            self.found.lock().unwrap().push(have.len() as u64);
            let kept = have.iter().zip(bytes).take_while(|(a, b)| a == b).count();
            out.set_len(kept as u64)
                .map_err(|e| crate::sync::WriteError::io("writing", &e))?;
            out.seek(std::io::SeekFrom::Start(kept as u64))
                .map_err(|e| crate::sync::WriteError::io("writing", &e))?;
            if self.cut.load(std::sync::atomic::Ordering::SeqCst) {
                let half = bytes.len() / 2;
                out.write_all(&bytes[kept.min(half)..half])
                    .map_err(|e| crate::sync::WriteError::io("writing", &e))?;
                return Err(crate::sync::WriteError::new(
                    scribe_format::ErrorCode::Unreachable,
                    "connection reset by peer",
                ));
            }
            out.write_all(&bytes[kept..])
                .map_err(|e| crate::sync::WriteError::io("writing", &e))?;
            Ok(kept as u64)
        }
    }

    #[test]
    fn a_large_file_cut_off_mid_download_resumes_from_its_partial_file() {
        for readonly in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let mut meta = crate::state::tests_meta();
            meta.readonly = readonly;
            let ws = Workspace::create(dir.path(), &meta).unwrap();
            let big: Vec<u8> = (0..(9u32 << 20)).map(|i| (i % 251) as u8).collect();
            let small = b"small".to_vec();
            let m = Cut {
                bytes: Memory(
                    [&big, &small]
                        .iter()
                        .map(|b| (FileContentId::of(b), b.to_vec()))
                        .collect(),
                ),
                cut: true.into(),
                found: Default::default(),
            };
            let plan = vec![
                ("art/big.bin".to_string(), Some(target(&big, 1))),
                ("art/small.txt".to_string(), Some(target(&small, 1))),
            ];
            begin(&ws, 1, &plan).unwrap();
            let err = apply(&ws, &m).unwrap_err();
            assert!(err.to_string().contains("connection reset"), "{err}");
            assert!(!ws.root().join("art/big.bin").exists());
            let partial = ws.state_dir().join(PARTIAL_DIR);
            let kept: Vec<_> = std::fs::read_dir(&partial).unwrap().collect();
            assert_eq!(kept.len(), 1, "the partial download is kept");
            // A new process opens the workspace: `tmp/` is cleaned, the
            // partial download is not.
            drop(ws);
            let ws = Workspace::open(dir.path()).unwrap();
            assert_eq!(std::fs::read_dir(&partial).unwrap().count(), 1);
            assert_eq!(
                std::fs::read_dir(ws.state_dir().join("tmp"))
                    .unwrap()
                    .count(),
                0
            );
            m.cut.store(false, std::sync::atomic::Ordering::SeqCst);
            let r = apply(&ws, &m).unwrap();
            assert_eq!(r.bytes_resumed, big.len() as u64 / 2, "readonly {readonly}");
            assert_eq!(*m.found.lock().unwrap(), vec![0, big.len() as u64 / 2]);
            assert!(std::fs::read(ws.root().join("art/big.bin")).unwrap() == big);
            assert_eq!(
                std::fs::read(ws.root().join("art/small.txt")).unwrap(),
                small
            );
            let perms = std::fs::metadata(ws.root().join("art/big.bin"))
                .unwrap()
                .permissions();
            assert_eq!(perms.readonly(), readonly);
            finish(&ws).unwrap();
            assert_eq!(std::fs::read_dir(&partial).unwrap().count(), 0);
            // The placed file is its baseline: nothing to submit.
            let base = ws.read().unwrap().baseline("art/big.bin").unwrap().unwrap();
            assert_eq!(base.content, FileContentId::of(&big));
        }
    }

    #[test]
    fn a_damaged_partial_download_is_cut_where_it_stops_matching() {
        let (_d, ws) = ws();
        let big: Vec<u8> = (0..(9u32 << 20)).map(|i| (i % 253) as u8).collect();
        let t = target(&big, 1);
        let m = Cut {
            bytes: Memory(
                [(FileContentId::of(&big), big.clone())]
                    .into_iter()
                    .collect(),
            ),
            cut: false.into(),
            found: Default::default(),
        };
        // An earlier run's leftover: 6 MiB, with a wrong byte at 2 MiB.
        let mut left = big[..6 << 20].to_vec();
        left[2 << 20] ^= 0xff;
        std::fs::write(partial_path(&ws, "big.bin", &t), &left).unwrap();
        begin(&ws, 1, &[("big.bin".to_string(), Some(t))]).unwrap();
        let r = apply(&ws, &m).unwrap();
        assert_eq!(r.bytes_resumed, 2 << 20);
        assert!(std::fs::read(ws.root().join("big.bin")).unwrap() == big);
    }

    fn ws() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        let mut meta = crate::state::tests_meta();
        meta.readonly = false;
        let ws = Workspace::create(dir.path(), &meta).unwrap();
        (dir, ws)
    }

    fn sync(
        ws: &Workspace,
        change: u64,
        plan: &[(String, Option<BaselineRecord>)],
        mem: &impl Materializer,
    ) -> SyncReport {
        begin(ws, change, plan).unwrap();
        let r = apply(ws, mem).unwrap();
        finish(ws).unwrap();
        r
    }

    #[test]
    fn writes_updates_and_removes_displacing_old_files() {
        let (_d, ws) = ws();
        let a1 = b"alpha v1".to_vec();
        let a2 = b"alpha v2".to_vec();
        let b1 = b"beta".to_vec();
        let mem = Memory(
            [&a1, &a2, &b1]
                .iter()
                .map(|b| (FileContentId::of(b), b.to_vec()))
                .collect(),
        );
        let r = sync(
            &ws,
            1,
            &[
                ("art/a.psd".into(), Some(target(&a1, 1))),
                ("art/deep/b.bin".into(), Some(target(&b1, 1))),
            ],
            &mem,
        );
        assert_eq!(r.written.len(), 2);
        assert_eq!(std::fs::read(ws.root().join("art/a.psd")).unwrap(), a1);
        assert_eq!(ws.meta().unwrap().synced, 1);
        let r = sync(
            &ws,
            2,
            &[
                ("art/a.psd".into(), Some(target(&a2, 2))),
                ("art/deep/b.bin".into(), None),
            ],
            &mem,
        );
        assert_eq!(r.removed, vec!["art/deep/b.bin"]);
        // Both were exactly their baselines (content the server holds):
        // removed, not kept (#18 item 5).
        assert!(r.displaced.is_empty(), "{:?}", r.displaced);
        assert_eq!(r.replaced_unmodified.len(), 2);
        assert_eq!(std::fs::read(ws.root().join("art/a.psd")).unwrap(), a2);
        assert!(!ws.root().join("art/deep").exists(), "empty parent pruned");
        assert!(ws
            .read()
            .unwrap()
            .baseline("art/deep/b.bin")
            .unwrap()
            .is_none());
        assert_eq!(
            ws.read()
                .unwrap()
                .baseline("art/a.psd")
                .unwrap()
                .unwrap()
                .change,
            2
        );
        // nothing that exists only here was replaced: nothing is kept
        let kept = recovery::list(ws.root()).unwrap();
        assert_eq!(kept.len(), 0);
        assert!(ws.read().unwrap().journal_all().unwrap().is_empty());
    }

    /// Materializes like [`Memory`], then gives the file an mtime just
    /// ahead of the clock: as if it were written, flushed and renamed
    /// within the millisecond the batch is recorded in.
    struct JustWritten(Memory);

    impl Materializer for JustWritten {
        fn write_to(
            &self,
            path: &str,
            t: &BaselineRecord,
            out: &mut std::fs::File,
        ) -> std::result::Result<(), crate::sync::WriteError> {
            self.0.write_to(path, t, out)?;
            let soon = std::time::SystemTime::now() + std::time::Duration::from_millis(2);
            out.set_modified(soon)
                .map_err(|e| crate::sync::WriteError::io("setting mtime", &e))
        }
    }

    /// Files placed by a sync are recorded settled, ctime included, even
    /// when written, flushed and renamed within one millisecond: a status
    /// right after the sync hashes none of them.
    #[test]
    fn placed_files_are_recorded_as_settled_observations() {
        let (_d, ws) = ws();
        let files: Vec<Vec<u8>> = (0..40).map(|i| format!("small {i}").into_bytes()).collect();
        let mem = JustWritten(Memory(
            files
                .iter()
                .map(|b| (FileContentId::of(b), b.clone()))
                .collect(),
        ));
        let rows: Vec<(String, Option<BaselineRecord>)> = files
            .iter()
            .enumerate()
            .map(|(i, b)| (format!("s/{i}.txt"), Some(target(b, 1))))
            .collect();
        let r = sync(&ws, 1, &rows, &mem);
        assert_eq!(r.written.len(), files.len());
        let read = ws.read().unwrap();
        for (path, _) in &rows {
            let base = read.baseline(path).unwrap().unwrap();
            let meta = std::fs::symlink_metadata(ws.root().join(path)).unwrap();
            assert!(
                base.fingerprint.proves_unchanged(&fingerprint_of(&meta, 0)),
                "{path}: {:?}",
                base.fingerprint
            );
        }
    }

    #[test]
    fn local_work_is_deferred_never_overwritten() {
        let (_d, ws) = ws();
        let v1 = b"v1".to_vec();
        let v2 = b"v2".to_vec();
        let mem = Memory(
            [&v1, &v2]
                .iter()
                .map(|b| (FileContentId::of(b), b.to_vec()))
                .collect(),
        );
        let names = ["opened", "modified", "deleted", "untracked"];
        let plan1: Vec<_> = names[..3]
            .iter()
            .map(|n| (n.to_string(), Some(target(&v1, 1))))
            .collect();
        sync(&ws, 1, &plan1, &mem);
        // local work of four kinds
        let tx = ws.write().unwrap();
        tx.put_opened(
            "opened",
            &OpenedRecord {
                action: OpenedAction::Edit,
                opened_ms: 1,
                needs_reconcile: false,
                moved_from: None,
            },
        )
        .unwrap();
        tx.commit().unwrap();
        std::fs::write(ws.root().join("opened"), b"my edit").unwrap();
        std::fs::write(ws.root().join("modified"), b"offline edit").unwrap();
        std::fs::remove_file(ws.root().join("deleted")).unwrap();
        std::fs::write(ws.root().join("untracked"), b"mine").unwrap();
        let plan2: Vec<_> = names
            .iter()
            .map(|n| (n.to_string(), Some(target(&v2, 2))))
            .collect();
        let r = sync(&ws, 2, &plan2, &mem);
        let reasons: Vec<DeferReason> = r.deferred.iter().map(|(_, why)| *why).collect();
        assert_eq!(
            reasons,
            vec![
                DeferReason::DeletedLocally,
                DeferReason::ModifiedLocally,
                DeferReason::Opened,
                DeferReason::Untracked
            ]
        );
        assert_eq!(std::fs::read(ws.root().join("opened")).unwrap(), b"my edit");
        assert_eq!(
            std::fs::read(ws.root().join("modified")).unwrap(),
            b"offline edit"
        );
        assert_eq!(std::fs::read(ws.root().join("untracked")).unwrap(), b"mine");
        assert!(!ws.root().join("deleted").exists());
        assert_eq!(ws.read().unwrap().deferred_all().unwrap().len(), 4);
        assert!(r.written.is_empty());
    }

    #[test]
    fn rerun_after_interruption_completes_without_loss() {
        let (_d, ws) = ws();
        let files: Vec<Vec<u8>> = (0..10).map(|i| format!("file {i}").into_bytes()).collect();
        let mem = Memory(
            files
                .iter()
                .map(|b| (FileContentId::of(b), b.clone()))
                .collect(),
        );
        let plan: Vec<_> = files
            .iter()
            .enumerate()
            .map(|(i, b)| (format!("f{i}"), Some(target(b, 1))))
            .collect();
        sync(&ws, 1, &plan, &mem);
        let v2: Vec<Vec<u8>> = (0..10)
            .map(|i| format!("file {i} v2").into_bytes())
            .collect();
        let mem2 = Memory(
            v2.iter()
                .map(|b| (FileContentId::of(b), b.clone()))
                .collect(),
        );
        let plan2: Vec<_> = v2
            .iter()
            .enumerate()
            .map(|(i, b)| (format!("f{i}"), Some(target(b, 2))))
            .collect();
        begin(&ws, 2, &plan2).unwrap();
        // Simulate a crash part way: some files displaced and rewritten by
        // hand, one displaced but not rewritten.
        for i in 0..3 {
            let p = format!("f{i}");
            let ix = recovery::displace(ws.root(), &p, RecoveryReason::SyncUpdate).unwrap();
            let tx = ws.write().unwrap();
            tx.put_journal(
                &p,
                &JournalEntry {
                    target: plan2[i].1,
                    done: false,
                    recovery: Some(ix.entry_name()),
                },
            )
            .unwrap();
            tx.commit().unwrap();
            if i < 2 {
                std::fs::write(ws.root().join(&p), &v2[i]).unwrap();
            }
        }
        assert!(matches!(
            begin(&ws, 3, &plan2),
            Err(WorkspaceError::JournalInProgress { target: 2 })
        ));
        assert!(matches!(
            finish(&ws),
            Err(WorkspaceError::JournalUnfinished { .. })
        ));
        let r = apply(&ws, &mem2).unwrap();
        assert_eq!(finish(&ws).unwrap(), 2);
        assert!(r.deferred.is_empty(), "{:?}", r.deferred);
        for (i, b) in v2.iter().enumerate() {
            assert_eq!(&std::fs::read(ws.root().join(format!("f{i}"))).unwrap(), b);
        }
        // f0..f2 were displaced once each (by the "crashed" run); f3..f9
        // were unmodified, so apply removed them without keeping a copy
        assert_eq!(recovery::list(ws.root()).unwrap().len(), 3);
    }

    #[test]
    fn a_failed_materialization_leaves_the_row_undone() {
        let (_d, ws) = ws();
        let mem = Memory(HashMap::new());
        begin(&ws, 1, &[("x".into(), Some(target(b"x", 1)))]).unwrap();
        assert!(matches!(
            apply(&ws, &mem),
            Err(WorkspaceError::Materialize { .. })
        ));
        assert!(!ws.root().join("x").exists());
        assert_eq!(in_progress(&ws).unwrap(), Some(1));
        let mem = Memory(
            [(FileContentId::of(b"x"), b"x".to_vec())]
                .into_iter()
                .collect(),
        );
        apply(&ws, &mem).unwrap();
        assert_eq!(finish(&ws).unwrap(), 1);
    }

    #[test]
    fn a_large_group_is_flushed_once_for_its_file_system_and_a_small_one_item_by_item() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let dir = tempfile::tempdir().unwrap();
        let fd = std::fs::File::open(dir.path()).unwrap();
        let count = |policy, n: usize| {
            let calls = AtomicUsize::new(0);
            let items: Vec<usize> = (0..n).collect();
            flush_group(policy, Some(&fd), &items, |_| {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
            .unwrap();
            calls.into_inner()
        };
        let group = if cfg!(target_os = "linux") { 0 } else { 256 };
        assert_eq!(count(FlushPolicy::FileSystem, 256), group);
        assert_eq!(
            count(FlushPolicy::FileSystem, GROUP_FLUSH_MIN),
            if cfg!(target_os = "linux") {
                0
            } else {
                GROUP_FLUSH_MIN
            }
        );
        assert_eq!(
            count(FlushPolicy::FileSystem, GROUP_FLUSH_MIN - 1),
            GROUP_FLUSH_MIN - 1
        );
        assert_eq!(count(FlushPolicy::PerFile, 256), 256);
        // Without a handle on the file system, item by item.
        let calls = AtomicUsize::new(0);
        flush_group(FlushPolicy::FileSystem, None, &[0; 20], |_| {
            calls.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
        assert_eq!(calls.into_inner(), 20);
    }

    /// Targets are created with their final mode: no `chmod` after the
    /// write (issue 19), in writable and read-only workspaces alike.
    #[cfg(unix)]
    #[test]
    fn targets_are_created_with_their_modes() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        for (i, (exec, readonly)) in [(false, false), (true, false), (false, true), (true, true)]
            .into_iter()
            .enumerate()
        {
            let p = dir.path().join(format!("f{i}"));
            let f = crate::platform::create_target_file(&p, exec, readonly).unwrap();
            let m = crate::platform::settle_target_mode(&f, exec, readonly).unwrap();
            let mode = m.permissions().mode();
            assert_eq!(mode & 0o111 != 0, exec, "{i}");
            assert_eq!(mode & 0o222 == 0, readonly, "{i}");
            assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode(), mode);
        }
    }

    #[cfg(unix)]
    #[test]
    fn readonly_workspaces_get_readonly_files_and_modes_round_trip() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::create(dir.path(), &crate::state::tests_meta()).unwrap();
        let mut t = target(b"#!/bin/sh\n", 1);
        t.mode = 1;
        let mem = Memory([(t.content, b"#!/bin/sh\n".to_vec())].into_iter().collect());
        sync(&ws, 1, &[("tool.sh".into(), Some(t))], &mem);
        let mode = std::fs::metadata(ws.root().join("tool.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0o111);
        assert_eq!(mode & 0o222, 0);
    }

    fn memory(contents: &[&[u8]]) -> Memory {
        Memory(
            contents
                .iter()
                .map(|b| (FileContentId::of(b), b.to_vec()))
                .collect(),
        )
    }

    /// A file turned into a directory (file `f` removed, `f/inner` added):
    /// the unmodified file leaves first and the directory is written, in
    /// one batch or (a removal after many rows) in two.
    #[test]
    fn a_file_turned_into_a_directory_is_removed_before_its_directory_is_written() {
        let (_d, ws) = ws();
        let mem = memory(&[b"f1", b"k1", b"inner"]);
        sync(
            &ws,
            1,
            &[
                ("f".into(), Some(target(b"f1", 1))),
                ("g".into(), Some(target(b"f1", 1))),
                ("k".into(), Some(target(b"k1", 1))),
            ],
            &mem,
        );
        let mut plan: Vec<(String, Option<BaselineRecord>)> = vec![
            ("f".into(), None),
            ("f/inner".into(), Some(target(b"inner", 2))),
            ("g".into(), None),
            ("g/inner".into(), Some(target(b"inner", 2))),
        ];
        // `g` and `g/inner` fall in different batches.
        plan.extend((0..BATCH + 10).map(|i| (format!("g-{i:04}"), Some(target(b"k1", 2)))));
        begin(&ws, 2, &plan).unwrap();
        let r = apply(&ws, &mem).unwrap();
        assert!(r.deferred.is_empty(), "{:?}", r.deferred);
        finish(&ws).unwrap();
        for d in ["f", "g"] {
            assert_eq!(
                std::fs::read(ws.root().join(d).join("inner")).unwrap(),
                b"inner"
            );
            let read = ws.read().unwrap();
            assert!(read.baseline(d).unwrap().is_none());
            assert!(read.baseline(&format!("{d}/inner")).unwrap().is_some());
        }
        assert_eq!(std::fs::read(ws.root().join("k")).unwrap(), b"k1");
        assert_eq!(ws.meta().unwrap().synced, 2);
    }

    /// A modified tracked file, or an untracked one, where a directory
    /// goes: that file is kept, the paths beneath it wait for resolve, and
    /// the rest of the sync completes (never stranded).
    #[test]
    fn a_kept_file_where_a_directory_goes_defers_only_its_paths() {
        let (_d, ws) = ws();
        let mem = memory(&[b"f1", b"k1", b"k2", b"inner"]);
        sync(
            &ws,
            1,
            &[
                ("f".into(), Some(target(b"f1", 1))),
                ("k".into(), Some(target(b"k1", 1))),
            ],
            &mem,
        );
        std::fs::write(ws.root().join("f"), b"my edit").unwrap();
        std::fs::write(ws.root().join("u"), b"my notes").unwrap();
        let r = sync(
            &ws,
            2,
            &[
                ("f".into(), None),
                ("f/inner".into(), Some(target(b"inner", 2))),
                ("k".into(), Some(target(b"k2", 2))),
                ("u/inner".into(), Some(target(b"inner", 2))),
            ],
            &mem,
        );
        assert_eq!(
            r.deferred,
            vec![
                ("f".to_string(), DeferReason::ModifiedLocally),
                ("f/inner".to_string(), DeferReason::FileInTheWay),
                ("u/inner".to_string(), DeferReason::FileInTheWay),
            ]
        );
        assert_eq!(std::fs::read(ws.root().join("f")).unwrap(), b"my edit");
        assert_eq!(std::fs::read(ws.root().join("u")).unwrap(), b"my notes");
        assert_eq!(std::fs::read(ws.root().join("k")).unwrap(), b"k2");
        assert_eq!(ws.meta().unwrap().synced, 2);
        assert_eq!(ws.read().unwrap().deferred_all().unwrap().len(), 3);
    }

    /// A directory turned into a file (`d/x` removed, `d` added): the
    /// removed files leave and the emptied directory makes room for the
    /// file, even when the file's row comes a batch earlier; a directory
    /// still holding untracked work is not replaced.
    #[test]
    fn a_directory_turned_into_a_file_replaces_the_emptied_directory() {
        let (_d, ws) = ws();
        let mem = memory(&[b"x1", b"dfile", b"k1"]);
        sync(
            &ws,
            1,
            &[
                ("d/sub/x".into(), Some(target(b"x1", 1))),
                ("d/x".into(), Some(target(b"x1", 1))),
                ("e/x".into(), Some(target(b"x1", 1))),
            ],
            &mem,
        );
        std::fs::write(ws.root().join("e/untracked"), b"mine").unwrap();
        let mut plan: Vec<(String, Option<BaselineRecord>)> = vec![
            ("d".into(), Some(target(b"dfile", 2))),
            ("d/sub/x".into(), None),
            ("d/x".into(), None),
            ("e".into(), Some(target(b"dfile", 2))),
            ("e/x".into(), None),
        ];
        // `d` and `d/x` fall in different batches.
        plan.extend((0..BATCH + 10).map(|i| (format!("d-{i:04}"), Some(target(b"k1", 2)))));
        let r = sync(&ws, 2, &plan, &mem);
        assert_eq!(r.deferred, vec![("e".to_string(), DeferReason::Untracked)]);
        assert_eq!(std::fs::read(ws.root().join("d")).unwrap(), b"dfile");
        assert_eq!(
            std::fs::read(ws.root().join("e/untracked")).unwrap(),
            b"mine"
        );
        assert!(!ws.root().join("e/x").exists());
        let read = ws.read().unwrap();
        assert!(read.baseline("d").unwrap().is_some());
        assert!(read.baseline("d/x").unwrap().is_none());
        assert!(read.baseline("e/x").unwrap().is_none());
    }
}

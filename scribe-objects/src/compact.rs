//! Offline object compaction, full and `--incremental` (specification
//! sections "Offline object collection and compaction" and "Incremental
//! object compaction").
//!
//! The reachability roots come from the metadata layer; this module is the
//! mechanism given the set of live `ObjectId`s. Beside the store directory
//! `<repo>/<name>` it uses:
//!
//! ```text
//! <repo>/<name>.compacting               the replacement store
//! <repo>/<name>.compaction-index.redb    temporary index (incremental)
//! <repo>/<name>.compaction-ready.tmp     marker being published
//! <repo>/<name>.compaction-ready         durable marker: "SCRGC1\0\0" | repository [16] | journal-end u64 LE
//! <repo>/<name>.previous                 the old store during the swap
//! ```
//!
//! Swap after the durable marker: rename `<name>` to `<name>.previous`;
//! flush; rename `<name>.compacting` to `<name>`; flush; remove the previous
//! store and temporary index; flush; remove the marker; flush. Each step is
//! recognised from the directory state, so rerunning completes it.

use std::io::Write;
use std::path::{Path, PathBuf};

use redb::{
    Database, Durability, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition,
};
use scribe_format::ObjectId;

use crate::error::{db_err, io_err, Result, StoreError};
use crate::layout::{self, sync_dir};
use crate::locator::Location;
use crate::store::ObjectStore;

/// Marker magic.
pub const MARKER_MAGIC: [u8; 8] = *b"SCRGC1\0\0";
/// Marker length: magic, repository id, journal end.
pub const MARKER_LEN: usize = 8 + 16 + 8;
/// Identities per copy batch.
pub const COPY_BATCH: usize = 512;
/// A pack is rewritten only when less than this share of it is live.
pub const LIVE_THRESHOLD_PERCENT: u64 = 80;
/// Incremental compaction: the most durable pack links the link cache of
/// one source holds across copy batches (specification, "Incremental
/// object compaction").
pub const LINK_CACHE_LIMIT: usize = 1_048_576;

const STATE_TABLE: TableDefinition<&str, &[u8]> = TableDefinition::new("incremental_state");
const PACK_LIVE_TABLE: TableDefinition<u32, u64> = TableDefinition::new("pack_live_bytes");
const REWRITE_TABLE: TableDefinition<u32, u8> = TableDefinition::new("rewrite_packs");
const LIVE_TABLE: TableDefinition<&[u8; 33], ()> = TableDefinition::new("live");
const STATE_BOUNDARY: &str = "boundary";
const STATE_SEED: &str = "seed";
const STATE_SELECTED: &str = "selected-bytes";
const STATE_CURSOR: &str = "cursor";

/// The metadata boundary a compaction is bound to (recorded in the marker).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactContext {
    pub repository: [u8; 16],
    pub journal_end: u64,
}

impl CompactContext {
    fn boundary(&self) -> [u8; 24] {
        let mut b = [0u8; 24];
        b[..16].copy_from_slice(&self.repository);
        b[16..].copy_from_slice(&self.journal_end.to_le_bytes());
        b
    }

    fn marker(&self) -> [u8; MARKER_LEN] {
        let mut m = [0u8; MARKER_LEN];
        m[..8].copy_from_slice(&MARKER_MAGIC);
        m[8..].copy_from_slice(&self.boundary());
        m
    }
}

/// Where an injected failure stops a compaction (tests).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompactFailpoint {
    /// After the first copy batch is durable.
    AfterFirstCopyBatch,
    /// After the first seed batch (links and their rows) is durable (incremental).
    AfterFirstSeedBatch,
    /// After the index is published (incremental).
    AfterIndexPublished,
    /// Everything copied, before the temporary marker.
    BeforeMarker,
    /// Temporary marker written and flushed, not renamed.
    AfterTemporaryMarker,
    /// Marker durable, swap not started.
    AfterMarker,
    /// `<name>` renamed to `<name>.previous`.
    AfterRenameToPrevious,
    /// `<name>.compacting` renamed to `<name>`.
    AfterRenameIntoPlace,
    /// Previous store removed, marker still present.
    AfterRemovePrevious,
}

/// Options of [`compact`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactOptions {
    /// `--incremental`: rewrite only packs below 80% live within `budget`,
    /// hard-link the rest.
    pub incremental: bool,
    /// Incremental: the most source pack bytes to select for rewriting.
    pub budget: u64,
    #[doc(hidden)]
    pub failpoint: Option<CompactFailpoint>,
    /// Incremental: the bound of the durable pack-link cache
    /// ([`LINK_CACHE_LIMIT`]; smaller in tests).
    #[doc(hidden)]
    pub link_cache_limit: usize,
}

impl Default for CompactOptions {
    fn default() -> Self {
        CompactOptions {
            incremental: false,
            budget: u64::MAX,
            failpoint: None,
            link_cache_limit: LINK_CACHE_LIMIT,
        }
    }
}

/// What a compaction did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompactReport {
    /// Distinct live objects in the replacement store.
    pub retained_objects: u64,
    /// Objects whose bytes were copied (verified) into new packs.
    pub copied_objects: u64,
    /// Packs hard-linked unchanged (incremental).
    pub linked_packs: u64,
    /// Packs selected for rewriting or dropped (incremental).
    pub rewritten_packs: u64,
    /// Source pack bytes selected (incremental).
    pub selected_bytes: u64,
    /// True when this run only completed a swap recorded by a marker.
    pub completed_pending_swap: bool,
    /// Incremental seeding: pack links made durable (a link is established
    /// again after the cache forgot it, or by a rerun).
    pub links_established: u64,
    /// Incremental seeding: the most links the durable link cache held.
    pub link_cache_peak: u64,
    /// Incremental seeding: times the full cache was emptied to stay within
    /// its bound.
    pub link_cache_resets: u64,
}

impl std::fmt::Display for CompactReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.completed_pending_swap {
            return write!(f, "completed an interrupted compaction's swap");
        }
        write!(
            f,
            "{} objects kept, {} copied into new packs",
            self.retained_objects, self.copied_objects
        )?;
        if self.linked_packs + self.rewritten_packs > 0 {
            write!(
                f,
                ", {} packs kept as they were, {} rewritten ({} bytes selected)",
                self.linked_packs, self.rewritten_packs, self.selected_bytes
            )?;
        }
        Ok(())
    }
}

struct Paths {
    store: PathBuf,
    parent: PathBuf,
    compacting: PathBuf,
    previous: PathBuf,
    marker: PathBuf,
    marker_tmp: PathBuf,
    index: PathBuf,
    index_tmp: PathBuf,
}

fn paths(store: &Path) -> Result<Paths> {
    let name = store
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| StoreError::CompactionRefused {
            reason: format!("{} has no usable directory name", store.display()),
        })?
        .to_string();
    let parent = match store.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let sib = |suffix: &str| parent.join(format!("{name}{suffix}"));
    Ok(Paths {
        store: store.to_path_buf(),
        compacting: sib(".compacting"),
        previous: sib(".previous"),
        marker: sib(".compaction-ready"),
        marker_tmp: sib(".compaction-ready.tmp"),
        index: sib(".compaction-index.redb"),
        index_tmp: sib(".compaction-index.redb.tmp"),
        parent,
    })
}

fn fail(opts: &CompactOptions, at: CompactFailpoint, name: &'static str) -> Result<()> {
    if opts.failpoint == Some(at) {
        return Err(StoreError::Injected(name));
    }
    Ok(())
}

fn refused(reason: impl Into<String>) -> StoreError {
    StoreError::CompactionRefused {
        reason: reason.into(),
    }
}

fn remove_dir_if_exists(p: &Path) -> Result<()> {
    match std::fs::remove_dir_all(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::Io {
            path: p.to_path_buf(),
            source: e,
        }),
    }
}

fn remove_file_if_exists(p: &Path) -> Result<()> {
    match std::fs::remove_file(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::Io {
            path: p.to_path_buf(),
            source: e,
        }),
    }
}

/// Compact the store at `store_dir`, retaining exactly `live` (which must
/// all be present and intact). Rerunning after an interruption resumes:
/// a durable marker completes its swap (the `live` set is then not used);
/// before the marker, full compaction recreates its scratch state and
/// incremental compaction continues from its durable cursor.
pub fn compact(
    store_dir: impl AsRef<Path>,
    live: impl IntoIterator<Item = ObjectId>,
    ctx: CompactContext,
    opts: &CompactOptions,
) -> Result<CompactReport> {
    let p = paths(store_dir.as_ref())?;
    if p.marker.exists() {
        let bytes = std::fs::read(&p.marker).map_err(io_err(&p.marker))?;
        if bytes.len() != MARKER_LEN || bytes[..8] != MARKER_MAGIC {
            return Err(refused(format!("malformed marker {}", p.marker.display())));
        }
        if bytes[8..] != ctx.boundary() {
            return Err(refused(format!(
                "marker {} was written for a different repository or metadata journal end",
                p.marker.display()
            )));
        }
        complete_swap(&p, opts)?;
        return Ok(CompactReport {
            completed_pending_swap: true,
            ..CompactReport::default()
        });
    }
    if p.previous.exists() {
        return Err(refused(format!(
            "{} exists without a marker; inspect it before compacting",
            p.previous.display()
        )));
    }
    remove_file_if_exists(&p.marker_tmp)?;
    let mut report = if opts.incremental {
        incremental(&p, live, ctx, opts)?
    } else {
        full(&p, live, opts)?
    };
    publish_marker(&p, ctx, opts)?;
    complete_swap(&p, opts)?;
    report.completed_pending_swap = false;
    Ok(report)
}

fn publish_marker(p: &Paths, ctx: CompactContext, opts: &CompactOptions) -> Result<()> {
    fail(opts, CompactFailpoint::BeforeMarker, "before marker")?;
    let mut f = std::fs::File::create(&p.marker_tmp).map_err(io_err(&p.marker_tmp))?;
    f.write_all(&ctx.marker()).map_err(io_err(&p.marker_tmp))?;
    f.sync_all().map_err(io_err(&p.marker_tmp))?;
    drop(f);
    fail(
        opts,
        CompactFailpoint::AfterTemporaryMarker,
        "after temporary marker",
    )?;
    std::fs::rename(&p.marker_tmp, &p.marker).map_err(io_err(&p.marker))?;
    sync_dir(&p.parent)?;
    fail(opts, CompactFailpoint::AfterMarker, "after marker")
}

fn complete_swap(p: &Paths, opts: &CompactOptions) -> Result<()> {
    let (store, compacting, previous) =
        (p.store.exists(), p.compacting.exists(), p.previous.exists());
    match (store, compacting, previous) {
        (true, true, false) => {
            std::fs::rename(&p.store, &p.previous).map_err(io_err(&p.previous))?;
            sync_dir(&p.parent)?;
            fail(opts, CompactFailpoint::AfterRenameToPrevious, "after rename to previous")?;
            std::fs::rename(&p.compacting, &p.store).map_err(io_err(&p.store))?;
            sync_dir(&p.parent)?;
        }
        (false, true, true) => {
            std::fs::rename(&p.compacting, &p.store).map_err(io_err(&p.store))?;
            sync_dir(&p.parent)?;
        }
        (true, false, _) => {}
        _ => {
            return Err(refused(format!(
                "unexpected state beside {}: store {store}, compacting {compacting}, previous {previous}",
                p.store.display()
            )))
        }
    }
    fail(
        opts,
        CompactFailpoint::AfterRenameIntoPlace,
        "after rename into place",
    )?;
    remove_dir_if_exists(&p.previous)?;
    remove_file_if_exists(&p.index)?;
    remove_file_if_exists(&p.index_tmp)?;
    sync_dir(&p.parent)?;
    fail(
        opts,
        CompactFailpoint::AfterRemovePrevious,
        "after removing previous",
    )?;
    remove_file_if_exists(&p.marker)?;
    sync_dir(&p.parent)
}

/// Copy one object through digest verification.
fn copy_object(source: &ObjectStore, batch: &crate::Batch<'_>, id: &ObjectId) -> Result<bool> {
    let payload = match source.get(id) {
        Err(StoreError::NotFound { id }) => {
            return Err(refused(format!(
                "live object {id} is missing from the store"
            )))
        }
        other => other?,
    };
    Ok(matches!(
        batch.put_with_id(*id, &payload)?,
        crate::PutOutcome::Written { .. }
    ))
}

fn full(
    p: &Paths,
    live: impl IntoIterator<Item = ObjectId>,
    opts: &CompactOptions,
) -> Result<CompactReport> {
    // A crash before the marker leaves the original authoritative; scratch
    // state is recreated.
    remove_dir_if_exists(&p.compacting)?;
    remove_file_if_exists(&p.index)?;
    let source = ObjectStore::open(&p.store)?;
    let target = ObjectStore::create(&p.compacting, source.options())?;
    keep_descriptor_keys(&source, &p.compacting)?;
    let mut report = CompactReport::default();
    let mut pending: Vec<ObjectId> = Vec::with_capacity(COPY_BATCH);
    let mut batches = 0u64;
    let mut flush = |pending: &mut Vec<ObjectId>, report: &mut CompactReport| -> Result<()> {
        let batch = target.batch();
        for id in pending.drain(..) {
            if batch.has(&id)? {
                continue;
            }
            copy_object(&source, &batch, &id)?;
            report.copied_objects += 1;
        }
        batch.commit()?;
        batches += 1;
        if batches == 1 {
            fail(
                opts,
                CompactFailpoint::AfterFirstCopyBatch,
                "after first copy batch",
            )?;
        }
        Ok(())
    };
    for id in live {
        pending.push(id);
        if pending.len() == COPY_BATCH {
            flush(&mut pending, &mut report)?;
        }
    }
    flush(&mut pending, &mut report)?;
    report.retained_objects = target.len()?;
    if report.retained_objects != report.copied_objects {
        return Err(refused(format!(
            "replacement holds {} objects, the live inventory {}",
            report.retained_objects, report.copied_objects
        )));
    }
    Ok(report)
}

/// Read and check the incremental state; `None` if absent.
struct IncState {
    boundary: Vec<u8>,
    seeded: bool,
    selected: u64,
    cursor: Option<[u8; 33]>,
}

fn read_state(index: &Path, db: &Database) -> Result<IncState> {
    let txn = db.begin_read().map_err(db_err(index))?;
    let t = txn.open_table(STATE_TABLE).map_err(db_err(index))?;
    let get = |k: &str| -> Result<Option<Vec<u8>>> {
        Ok(t.get(k).map_err(db_err(index))?.map(|v| v.value().to_vec()))
    };
    let malformed = |what: &str| {
        refused(format!(
            "malformed incremental state {what} in {}",
            index.display()
        ))
    };
    let boundary = get(STATE_BOUNDARY)?
        .filter(|b| b.len() == 24)
        .ok_or_else(|| malformed("boundary"))?;
    let seeded = match get(STATE_SEED)?.as_deref() {
        Some([0]) => false,
        Some([1]) => true,
        _ => return Err(malformed("seed marker")),
    };
    let selected = get(STATE_SELECTED)?
        .and_then(|b| <[u8; 8]>::try_from(b.as_slice()).ok())
        .map(u64::from_le_bytes)
        .ok_or_else(|| malformed("selected bytes"))?;
    let cursor = match get(STATE_CURSOR)? {
        None => None,
        Some(b) => Some(<[u8; 33]>::try_from(b.as_slice()).map_err(|_| malformed("cursor"))?),
    };
    Ok(IncState {
        boundary,
        seeded,
        selected,
        cursor,
    })
}

fn set_state(index: &Path, db: &Database, key: &str, value: &[u8]) -> Result<()> {
    let mut txn = db.begin_write().map_err(db_err(index))?;
    txn.set_durability(Durability::Immediate)
        .map_err(db_err(index))?;
    {
        let mut t = txn.open_table(STATE_TABLE).map_err(db_err(index))?;
        t.insert(key, value).map_err(db_err(index))?;
    }
    txn.commit().map_err(db_err(index))
}

/// Build the complete index at `index.tmp` and publish it by rename.
fn init_index(
    p: &Paths,
    source: &ObjectStore,
    live: impl IntoIterator<Item = ObjectId>,
    ctx: CompactContext,
    budget: u64,
) -> Result<()> {
    remove_file_if_exists(&p.index_tmp)?;
    let tmp = &p.index_tmp;
    let db = Database::create(tmp).map_err(db_err(tmp))?;
    let mut txn = db.begin_write().map_err(db_err(tmp))?;
    txn.set_durability(Durability::Immediate)
        .map_err(db_err(tmp))?;
    {
        let mut live_t = txn.open_table(LIVE_TABLE).map_err(db_err(tmp))?;
        let mut pack_live = std::collections::BTreeMap::<u32, u64>::new();
        for id in live {
            let key = id.to_bytes();
            if live_t.get(&key).map_err(db_err(tmp))?.is_some() {
                continue;
            }
            match source.locate(&id)? {
                None => {
                    return Err(refused(format!(
                        "live object {id} is missing from the store"
                    )))
                }
                Some(Location::Packed {
                    pack, entry_len, ..
                }) => {
                    *pack_live.entry(pack).or_default() += entry_len;
                }
                Some(Location::Loose { .. }) => {}
            }
            live_t.insert(&key, ()).map_err(db_err(tmp))?;
        }
        let mut live_bytes = txn.open_table(PACK_LIVE_TABLE).map_err(db_err(tmp))?;
        let mut rewrite = txn.open_table(REWRITE_TABLE).map_err(db_err(tmp))?;
        let mut selected = 0u64;
        let mut budget_open = true;
        for (id, path) in layout::list_packs(&source.dir)? {
            let size = std::fs::metadata(&path).map_err(io_err(&path))?.len();
            let live = pack_live.get(&id).copied().unwrap_or(0);
            live_bytes.insert(id, live).map_err(db_err(tmp))?;
            let body = size.saturating_sub(crate::pack::PACK_HEADER_LEN).max(1);
            if live == 0 {
                // Whole-dead: dropped, no payload rewrite.
                rewrite.insert(id, 0u8).map_err(db_err(tmp))?;
            } else if budget_open && live * 100 < body * LIVE_THRESHOLD_PERCENT {
                // Selection stops at the first sparse pack that does not fit.
                if selected.saturating_add(size) <= budget {
                    rewrite.insert(id, 1u8).map_err(db_err(tmp))?;
                    selected += size;
                } else {
                    budget_open = false;
                }
            }
        }
        let mut state = txn.open_table(STATE_TABLE).map_err(db_err(tmp))?;
        state
            .insert(STATE_BOUNDARY, ctx.boundary().as_slice())
            .map_err(db_err(tmp))?;
        state
            .insert(STATE_SEED, [0u8].as_slice())
            .map_err(db_err(tmp))?;
        state
            .insert(STATE_SELECTED, selected.to_le_bytes().as_slice())
            .map_err(db_err(tmp))?;
    }
    txn.commit().map_err(db_err(tmp))?;
    drop(db);
    std::fs::File::open(tmp)
        .and_then(|f| f.sync_all())
        .map_err(io_err(tmp))?;
    std::fs::rename(tmp, &p.index).map_err(io_err(&p.index))?;
    sync_dir(&p.parent)
}

fn hard_link_if_absent(from: &Path, to: &Path) -> Result<bool> {
    match std::fs::hard_link(from, to) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(StoreError::Io {
            path: to.to_path_buf(),
            source: e,
        }),
    }
}

/// The durable pack-link cache of one incremental pass: pack ids of the
/// source whose hard links in the replacement are known durable (linked and
/// `packs/` flushed). Bound to its source and replacement, it lives for one
/// run: a rerun starts empty, so every link an interrupted run made is
/// re-established (linked if absent, directory flushed) before it is cached
/// again. It never holds more than `limit` links; when full it is emptied
/// (the links stay durable on disk; a forgotten one is merely established
/// again, which costs a directory flush).
struct LinkCache {
    source_packs: PathBuf,
    target_packs: PathBuf,
    limit: usize,
    durable: std::collections::HashSet<u32>,
    /// Linked in this batch, not yet flushed.
    pending: std::collections::BTreeSet<u32>,
    established: u64,
    peak: usize,
    resets: u64,
}

impl LinkCache {
    fn new(source: &Path, target: &Path, limit: usize) -> LinkCache {
        LinkCache {
            source_packs: source.join(layout::PACKS),
            target_packs: target.join(layout::PACKS),
            limit: limit.max(1),
            durable: std::collections::HashSet::new(),
            pending: std::collections::BTreeSet::new(),
            established: 0,
            peak: 0,
            resets: 0,
        }
    }

    /// Link `pack` (at `from`, in the source's `packs/`) into the
    /// replacement unless the cache knows the link is durable.
    fn link(&mut self, pack: u32, from: &Path) -> Result<()> {
        if self.durable.contains(&pack) || self.pending.contains(&pack) {
            return Ok(());
        }
        debug_assert!(from.starts_with(&self.source_packs));
        let to = self.target_packs.join(
            from.file_name()
                .ok_or_else(|| refused(format!("pack path {} has no name", from.display())))?,
        );
        hard_link_if_absent(from, &to)?;
        self.pending.insert(pack);
        Ok(())
    }

    /// Flush the replacement's `packs/` once for this batch's new links,
    /// then cache them within the bound.
    fn make_durable(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        sync_dir(&self.target_packs)?;
        for pack in std::mem::take(&mut self.pending) {
            if self.durable.len() >= self.limit {
                self.durable.clear();
                self.resets += 1;
            }
            self.durable.insert(pack);
            self.established += 1;
            self.peak = self.peak.max(self.durable.len());
        }
        Ok(())
    }
}

fn incremental(
    p: &Paths,
    live: impl IntoIterator<Item = ObjectId>,
    ctx: CompactContext,
    opts: &CompactOptions,
) -> Result<CompactReport> {
    let source = ObjectStore::open(&p.store)?;
    // Resume, discard a pass for another boundary, or initialise.
    let mut index = None;
    if p.index.exists() {
        let db = Database::open(&p.index).map_err(db_err(&p.index))?;
        let st = read_state(&p.index, &db)?;
        if st.boundary == ctx.boundary() {
            index = Some(db);
        } else {
            drop(db);
            remove_file_if_exists(&p.index)?;
            remove_dir_if_exists(&p.compacting)?;
            sync_dir(&p.parent)?;
        }
    } else {
        // No published index: any replacement is scratch from before it.
        remove_dir_if_exists(&p.compacting)?;
    }
    let db = match index {
        Some(db) => db,
        None => {
            init_index(p, &source, live, ctx, opts.budget)?;
            fail(
                opts,
                CompactFailpoint::AfterIndexPublished,
                "after index published",
            )?;
            Database::open(&p.index).map_err(db_err(&p.index))?
        }
    };
    let idx = &p.index;
    let st = read_state(idx, &db)?;
    let rewrite: std::collections::BTreeMap<u32, u8> = {
        let txn = db.begin_read().map_err(db_err(idx))?;
        let t = txn.open_table(REWRITE_TABLE).map_err(db_err(idx))?;
        let mut m = std::collections::BTreeMap::new();
        for row in t.iter().map_err(db_err(idx))? {
            let (k, v) = row.map_err(db_err(idx))?;
            if v.value() > 1 {
                return Err(refused("malformed rewrite_packs value"));
            }
            m.insert(k.value(), v.value());
        }
        m
    };
    let packs = layout::list_packs(&source.dir)?;
    let last_pack = packs
        .last()
        .map_or(crate::store::FIRST_PACK_ID, |(id, _)| *id);
    let mut report = CompactReport {
        selected_bytes: st.selected,
        rewritten_packs: rewrite.len() as u64,
        ..CompactReport::default()
    };
    if p.compacting.exists() && !p.compacting.join(layout::DESCRIPTOR).exists() {
        // Creation was interrupted (the descriptor is written last).
        if st.seeded {
            return Err(refused(format!(
                "{} lost its descriptor",
                p.compacting.display()
            )));
        }
        remove_dir_if_exists(&p.compacting)?;
    }
    if !p.compacting.exists() {
        ObjectStore::create_with_first_pack(&p.compacting, source.options(), last_pack + 1)?;
        keep_descriptor_keys(&source, &p.compacting)?;
    }
    let target = ObjectStore::open(&p.compacting)?;
    // Seed: hard-link unselected packs and live loose files, index the
    // objects they hold, in batches of COPY_BATCH live ids. Each batch makes
    // its new links durable before committing its rows; the bounded link
    // cache remembers links already durable so later batches skip them.
    // Idempotent, so an interrupted seed is redone (re-establishing the
    // durability of links an earlier run made before caching them again).
    report.linked_packs = packs
        .iter()
        .filter(|(id, _)| !rewrite.contains_key(id))
        .count() as u64;
    if !st.seeded {
        let pack_paths: std::collections::BTreeMap<u32, &PathBuf> =
            packs.iter().map(|(id, path)| (*id, path)).collect();
        let mut links = LinkCache::new(&source.dir, &p.compacting, opts.link_cache_limit);
        let txn = db.begin_read().map_err(db_err(idx))?;
        let live_t = txn.open_table(LIVE_TABLE).map_err(db_err(idx))?;
        let mut rows = Vec::with_capacity(COPY_BATCH);
        let mut shards = std::collections::BTreeSet::new();
        let mut created_shard = false;
        let mut seed_batches = 0u64;
        let mut iter = live_t.iter().map_err(db_err(idx))?.peekable();
        while iter.peek().is_some() {
            for row in iter.by_ref().take(COPY_BATCH) {
                let (k, _) = row.map_err(db_err(idx))?;
                let id = ObjectId::from_bytes(k.value())
                    .map_err(|e| refused(format!("live table: {e}")))?;
                let loc = source
                    .locate(&id)?
                    .ok_or_else(|| refused(format!("live object {id} is missing")))?;
                match loc {
                    Location::Packed { pack, .. } if rewrite.contains_key(&pack) => continue,
                    Location::Packed { pack, .. } => {
                        let from = pack_paths.get(&pack).ok_or_else(|| {
                            refused(format!("live object {id} names absent pack {pack}"))
                        })?;
                        links.link(pack, from)?;
                        rows.push((id, loc));
                    }
                    Location::Loose { .. } => {
                        let shard = layout::loose_shard(&p.compacting, &id);
                        if !shard.exists() {
                            std::fs::create_dir_all(&shard).map_err(io_err(&shard))?;
                            created_shard = true;
                        }
                        hard_link_if_absent(
                            &layout::loose_path(&source.dir, &id),
                            &layout::loose_path(&p.compacting, &id),
                        )?;
                        shards.insert(shard);
                        rows.push((id, loc));
                    }
                }
            }
            // The batch's links are durable before its rows commit.
            links.make_durable()?;
            for s in std::mem::take(&mut shards) {
                sync_dir(&s)?;
            }
            if std::mem::take(&mut created_shard) {
                sync_dir(&p.compacting.join(layout::LOOSE))?;
            }
            target.insert_rows(&rows)?;
            rows.clear();
            seed_batches += 1;
            if seed_batches == 1 {
                fail(
                    opts,
                    CompactFailpoint::AfterFirstSeedBatch,
                    "after first seed batch",
                )?;
            }
        }
        drop(iter);
        drop(live_t);
        drop(txn);
        set_state(idx, &db, STATE_SEED, &[1])?;
        report.links_established = links.established;
        report.link_cache_peak = links.peak as u64;
        report.link_cache_resets = links.resets;
    }
    // Copy live objects of rewritten packs, in key order from the cursor.
    let mut cursor = st.cursor;
    let mut batches = 0u64;
    loop {
        let txn = db.begin_read().map_err(db_err(idx))?;
        let live_t = txn.open_table(LIVE_TABLE).map_err(db_err(idx))?;
        let range = match &cursor {
            Some(c) => live_t
                .range::<&[u8; 33]>((std::ops::Bound::Excluded(c), std::ops::Bound::Unbounded)),
            None => live_t.range::<&[u8; 33]>(..),
        }
        .map_err(db_err(idx))?;
        let mut ids = Vec::with_capacity(COPY_BATCH);
        for row in range.take(COPY_BATCH) {
            let (k, _) = row.map_err(db_err(idx))?;
            ids.push(*k.value());
        }
        drop(live_t);
        drop(txn);
        let Some(last) = ids.last().copied() else {
            break;
        };
        let batch = target.batch();
        for key in &ids {
            let id = ObjectId::from_bytes(key).map_err(|e| refused(format!("live table: {e}")))?;
            if let Some(Location::Packed { pack, .. }) = source.locate(&id)? {
                if rewrite.contains_key(&pack)
                    && !batch.has(&id)?
                    && copy_object(&source, &batch, &id)?
                {
                    report.copied_objects += 1;
                }
            }
        }
        // Target locators first, then the durable cursor.
        batch.commit()?;
        set_state(idx, &db, STATE_CURSOR, &last)?;
        cursor = Some(last);
        batches += 1;
        if batches == 1 {
            fail(
                opts,
                CompactFailpoint::AfterFirstCopyBatch,
                "after first copy batch",
            )?;
        }
    }
    let live_count = {
        let txn = db.begin_read().map_err(db_err(idx))?;
        let t = txn.open_table(LIVE_TABLE).map_err(db_err(idx))?;
        t.len().map_err(db_err(idx))?
    };
    report.retained_objects = target.len()?;
    if report.retained_objects != live_count {
        return Err(refused(format!(
            "replacement holds {} objects, the live inventory {live_count}",
            report.retained_objects
        )));
    }
    Ok(report)
}

/// Carry unknown descriptor keys of the source over to the replacement.
fn keep_descriptor_keys(source: &ObjectStore, target: &Path) -> Result<()> {
    let d = crate::store_descriptor::read(&source.dir.join(layout::DESCRIPTOR))?;
    if d.extra.is_empty() {
        return Ok(());
    }
    crate::store::write_descriptor(target, &d)
}

impl ObjectStore {
    /// Insert locator rows for bytes already durable in this store (links).
    ///
    /// The checkpoint committed with them is the pack writer's length,
    /// which is durable here: the only caller is compaction's seed, on its
    /// private replacement store, where nothing is appended to the open
    /// pack but by batches whose commit flushed it before returning (and
    /// `create` flushed the first pack's header). A caller that could hold
    /// appended, unflushed bytes must use [`ObjectStore::commit_rows_at`]
    /// with the length it flushed.
    pub(crate) fn insert_rows(&self, rows: &[(ObjectId, Location)]) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let w = self.lock_writer();
        self.commit_rows(&w, rows, &[], false)
    }
}

//! A repository's `metadata.redb` at schema 3 / snapshot profile 3: creation,
//! the refusals of opening, and the shared handle the other modules extend.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use redb::{Database, ReadTransaction, ReadableDatabase, ReadableTable, TableHandle};
use scribe_format::snapshot::RootRow;
use scribe_format::{BranchId, ErrorCode, RepositoryId};

use crate::database_descriptor;
use crate::error::{MetadataError, Result};
use crate::objects::Objects;
use crate::records::{decode_u32, decode_u64, keys, BranchRecord, CommitRecord, RepoMeta};
use crate::tables::{self, meta};
use scribe_format::descriptor::{Descriptor, Kind};

/// File name of the repository database.
pub const METADATA_FILE: &str = "metadata.redb";

/// redb page cache of one repository database. redb's default (1 GiB)
/// would let a large streamed acceptance hold most of the file in memory.
pub const METADATA_CACHE_BYTES: usize = 64 * 1024 * 1024;

fn builder() -> redb::Builder {
    let mut b = Database::builder();
    b.set_cache_size(METADATA_CACHE_BYTES);
    b
}

/// Beside `metadata.redb`: written (empty, not flushed: a hint whose
/// loss only skips a compaction) after a streamed acceptance dropped its
/// undo inventory; the next opening checks the free space and removes it.
/// Without it no opening pays for redb's free-space count (a walk of every
/// table: 0.15-0.25 s on a 70 MB file).
pub const COMPACT_MARKER: &str = "metadata.compact-wanted";

/// Leave the [`COMPACT_MARKER`] hint in the repository directory `dir`.
pub(crate) fn mark_compaction_wanted(dir: &Path) {
    let _ = std::fs::write(dir.join(COMPACT_MARKER), b"");
}

/// A database file at least this large is compacted when opened if...
pub const COMPACT_MIN_FILE_BYTES: u64 = 1 << 20;
/// ... at least this fraction (1/n) of it is free pages.
pub const COMPACT_FREE_FRACTION: u64 = 4;

/// Compact `db` (redb `Database::compact`: pages moved down, the file
/// truncated; crash-safe, no logical change) when its file is at least
/// [`COMPACT_MIN_FILE_BYTES`] and at least 1/[`COMPACT_FREE_FRACTION`] of
/// it is free. A streamed import stages an undo inventory (`submit_stage`)
/// it drops at acceptance, and the outbox holds up to
/// `journal::PRUNE_ARCHIVED_RECORDS` archived records before they are
/// pruned: redb reuses those pages but never returns them to the file
/// system, so without this `metadata.redb` kept about twice its tables
/// (issue 19). Returns whether it compacted.
pub fn compact_if_sparse(db: &mut Database, path: &Path) -> Result<bool> {
    let (allocated, page) = {
        let w = db.begin_write()?;
        let s = w.stats()?;
        let r = (s.allocated_pages(), s.page_size() as u64);
        w.abort()?;
        r
    };
    let file = std::fs::metadata(path)
        .map_err(|e| MetadataError::io(path, e))?
        .len();
    let used = allocated * page;
    if file < COMPACT_MIN_FILE_BYTES || file.saturating_sub(used) < file / COMPACT_FREE_FRACTION {
        return Ok(false);
    }
    while db
        .compact()
        .map_err(|e| MetadataError::Db(redb::Error::from(e)))?
    {}
    Ok(true)
}

/// Called after each committed staging transaction with their count so
/// far (fault-injection tests stop a process there).
pub type StageHook = dyn Fn(u64) + Send + Sync;

/// One open repository. Readers use MVCC snapshots and never wait for
/// acceptance; acceptance is serialised by the publication gate.
pub struct Repository {
    pub(crate) id: RepositoryId,
    pub(crate) name: String,
    pub(crate) dir: PathBuf,
    pub(crate) db: std::sync::Arc<Database>,
    /// The independent recovery archive every write publishes to.
    pub(crate) archive: std::sync::Arc<crate::archive::Archive>,
    pub(crate) incarnation: [u8; 16],
    pub(crate) main_branch: BranchId,
    /// The publication gate: one acceptance transaction at a time.
    pub(crate) gate: Mutex<()>,
    /// The submit turn: one streamed preparation (or lock mutation) at a time.
    pub(crate) turn: Mutex<()>,
    pub(crate) objects: Objects,
    /// Fault-injection hook of streamed preparation.
    pub(crate) stage_hook: Mutex<Option<Box<StageHook>>>,
    /// Benchmarks only: see [`Repository::set_benchmark_skip_fsync`].
    pub(crate) skip_fsync: std::sync::atomic::AtomicBool,
    /// Upload pin rows per workspace, counted once from the table and kept
    /// by every pin and cleanup (see `pins.rs`); held across their writes.
    pub(crate) pin_counts: Mutex<std::collections::HashMap<[u8; 16], u64>>,
    /// Concurrent upload pins share transactions (see `combine.rs`).
    pub(crate) pin_writes: crate::combine::Combiner,
    /// Concurrent lock acquisitions and releases share transactions.
    pub(crate) lock_writes: crate::combine::Combiner,
    /// Manifests verified at acceptance, for the check of their next
    /// versions (`manifest_check::Verified`).
    pub(crate) verified: crate::manifest_check::Verified,
}

/// The `SCRIBE_FORMAT` values a repository must record for this build to
/// open it (its id, then the versions it reads).
pub fn expected_repo_values(id: &RepositoryId) -> [(&'static str, String); 4] {
    [
        ("repository-id", id.to_hex()),
        ("schema", "3".into()),
        ("engine", "redb-4".into()),
        ("object-store", "1".into()),
    ]
}

impl Repository {
    /// Write the descriptor and an initialised `metadata.redb` into `dir`.
    pub(crate) fn create(
        dir: &Path,
        id: RepositoryId,
        name: &str,
        main: BranchId,
        created_ms: u64,
    ) -> Result<()> {
        let db = builder().create(dir.join(METADATA_FILE))?;
        crate::journal::initialize(&db)?;
        let incarnation = RepositoryId::random().0;
        let tx = crate::journal::begin(&db)?;
        {
            let mut m = tx.open_table(tables::META)?;
            m.insert(
                meta::SCHEMA,
                tables::REPOSITORY_SCHEMA.to_le_bytes().as_slice(),
            )?;
            m.insert(meta::REPOSITORY_ID, id.0.as_slice())?;
            m.insert(meta::INCARNATION, incarnation.as_slice())?;
            m.insert(meta::REPO_META, RepoMeta::default().encode().as_slice())?;
            m.insert(
                meta::SNAPSHOT_PROFILE,
                tables::SNAPSHOT_PROFILE.to_le_bytes().as_slice(),
            )?;
            m.insert(meta::SNAPSHOT_LIVE, 0u64.to_le_bytes().as_slice())?;
            m.insert(
                meta::PATH_FOLD_PROFILE,
                tables::PATH_FOLD_PROFILE.to_le_bytes().as_slice(),
            )?;
            m.insert(
                meta::MIGRATION_VERSION,
                tables::MIGRATION_VERSION.to_le_bytes().as_slice(),
            )?;
            for k in [
                meta::LOCK_EPOCH,
                meta::LOCK_UPDATE_COUNT,
                meta::LOCK_RELEASE_COUNT,
            ] {
                m.insert(k, 0u64.to_le_bytes().as_slice())?;
            }
            let branch = BranchRecord {
                name: "main".into(),
                created_change: 0,
                branched_from: None,
                state: 1,
            };
            tx.open_table(tables::BRANCHES)?
                .insert(main.0, branch.encode().as_slice())?;
            tx.open_table(tables::BRANCH_HEADS)?.insert(main.0, 0)?;
            tx.open_table(tables::SNAPSHOT_ROOTS)?.insert(
                keys::root(&main, 0).as_slice(),
                RootRow::EMPTY.encode()?.as_slice(),
            )?;
            tx.open_table(tables::COMMITS)?;
            tx.open_table(tables::SNAPSHOT_NODES)?;
            tx.open_table(tables::MERGE_PARENTS)?;
            for t in [
                tables::HISTORY,
                tables::MOVES,
                tables::FILE_LINEAGE,
                tables::CHANGE_PATHS,
                tables::CHANGE_NOTES,
                tables::ACCEPTED_MANIFESTS,
                tables::WORKSPACE_STATE,
                tables::SUBMIT_STAGE,
                tables::SUBMIT_LOCK_UPDATES,
                tables::UPLOAD_PINS,
            ] {
                tx.open_table(t)?;
            }
            for t in [
                tables::WORKSPACES,
                tables::OPERATIONS,
                tables::BRANCH_OPERATIONS,
                tables::BRANCH_PENDING,
            ] {
                tx.open_table(t)?;
            }
            tx.open_table(tables::LOCKS)?;
        }
        tx.commit()?;
        // The archive starts at the journal's beginning and receives the
        // creation transaction before the repository exists for anyone.
        let db = std::sync::Arc::new(db);
        let archive = crate::archive::Archive::create(&dir.join(METADATA_FILE), db.clone())?;
        archive.publish()?;
        drop(archive);
        drop(db);
        let fields = scribe_format::descriptor::Repository {
            repository_id: id,
            name: name.to_owned(),
            schema: tables::REPOSITORY_SCHEMA,
            engine: "redb-4".into(),
            object_store: 1,
            created_ms,
            migrated: None,
        };
        let mut d = Descriptor::new_repository(&fields)?;
        database_descriptor::add_required_features(&mut d)?;
        database_descriptor::write(&d, dir)?;
        Ok(())
    }

    /// Open `dir` for serving: the descriptor, then every marker and table
    /// of schema 3 is checked before any write.
    pub(crate) fn open(dir: &Path, id: RepositoryId, name: &str, objects: Objects) -> Result<Self> {
        let d = database_descriptor::read(dir)?;
        let expect = expected_repo_values(&id);
        let expect: Vec<(&'static str, &str)> =
            expect.iter().map(|(k, v)| (*k, v.as_str())).collect();
        database_descriptor::check(&d, dir, Kind::Repository, &expect)?;
        let path = dir.join(METADATA_FILE);
        if !path.exists() {
            return Err(MetadataError::corrupt(format!(
                "{} is missing",
                path.display()
            )));
        }
        let mut db = builder().open(&path)?;
        let (incarnation, main_branch) = {
            let tx = db.begin_read()?;
            let markers = check_markers(&tx, &path, &id)?;
            crate::journal::check_profile(&tx, &path)?;
            markers
        };
        // Only after every check passed (nothing is written to a refused
        // store): give back the free pages a large import left.
        let marker = dir.join(COMPACT_MARKER);
        if marker.exists() {
            // The outbox rows the archive holds go first, so that their
            // pages are among those the compaction gives back. Its HEAD
            // bounds them only once `Archive::open` has checked that the
            // archive is this database's and not ahead of it (a HEAD read
            // unchecked could name another database's records).
            let shared = std::sync::Arc::new(db);
            let archived = crate::archive::Archive::open(&path, shared.clone())?
                .head()
                .end;
            crate::journal::prune_archived_now(&shared, archived)?;
            db = std::sync::Arc::try_unwrap(shared)
                .map_err(|_| MetadataError::Gate("metadata.redb is still shared".into()))?;
            compact_if_sparse(&mut db, &path)?;
            let _ = std::fs::remove_file(&marker);
        }
        let db = std::sync::Arc::new(db);
        // Requires the existing archive; drains the outbox beyond its HEAD.
        let archive = std::sync::Arc::new(crate::archive::Archive::open(&path, db.clone())?);
        let repo = Repository {
            id,
            name: name.to_owned(),
            dir: dir.to_owned(),
            db,
            archive,
            incarnation,
            main_branch,
            gate: Mutex::new(()),
            turn: Mutex::new(()),
            objects,
            stage_hook: Mutex::new(None),
            verified: Default::default(),
            skip_fsync: std::sync::atomic::AtomicBool::new(false),
            pin_counts: Mutex::default(),
            pin_writes: crate::combine::Combiner::new(crate::combine::Guard::GateAndPinCounts),
            lock_writes: crate::combine::Combiner::new(crate::combine::Guard::TurnAndGate),
        };
        repo.recover_submissions()?;
        repo.cleanup_finished_pins()?;
        Ok(repo)
    }

    /// Open `dir` read-only for inspection (no startup cleanup). Used by
    /// tools and tests; the same refusals as [`Repository::open`] apply.
    pub fn open_dir(dir: &Path, objects: Objects) -> Result<Self> {
        let d = database_descriptor::read(dir)?;
        let id = RepositoryId::from_hex(d.get("repository-id").unwrap_or(""))?;
        let name = d.get("name").unwrap_or("").to_owned();
        Repository::open(dir, id, &name, objects)
    }

    pub fn id(&self) -> RepositoryId {
        self.id
    }

    /// Whether a streamed acceptance left the hint that the next opening
    /// compacts `metadata.redb` ([`COMPACT_MARKER`]).
    pub fn compaction_wanted(&self) -> bool {
        self.dir.join(COMPACT_MARKER).exists()
    }

    /// Whether dropping this handle closes the database (no clone of the
    /// database or archive handle lives elsewhere).
    pub(crate) fn held_only_by_itself(&self) -> bool {
        std::sync::Arc::strong_count(&self.archive) == 1
            && std::sync::Arc::strong_count(&self.db) == 2
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The repository incarnation (16 bytes).
    pub fn incarnation(&self) -> [u8; 16] {
        self.incarnation
    }

    /// The main branch, created with the repository.
    pub fn main_branch(&self) -> BranchId {
        self.main_branch
    }

    /// The object hooks acceptance and `doctor` use.
    pub fn objects(&self) -> &Objects {
        &self.objects
    }

    /// A journaled write transaction published to the archive on commit.
    pub(crate) fn write(&self) -> Result<crate::journal::WriteTx> {
        crate::journal::begin_archived(&self.db, &self.archive)
    }

    /// What write combining did since this repository was opened: upload
    /// pins and lock mutations, each as (mutations, transactions).
    pub fn write_combining(&self) -> (crate::combine::Combined, crate::combine::Combined) {
        (self.pin_writes.stats(), self.lock_writes.stats())
    }

    /// The recovery archive.
    pub fn archive(&self) -> &crate::archive::Archive {
        &self.archive
    }

    /// The raw database (tests and maintenance tools).
    pub fn database(&self) -> &Database {
        &self.db
    }

    /// The repository head (highest accepted change, all branches).
    pub fn head(&self) -> Result<u64> {
        let tx = self.db.begin_read()?;
        read_repo_meta(&tx).map(|m| m.head)
    }

    /// The head change of `branch`.
    pub fn branch_head(&self, branch: BranchId) -> Result<u64> {
        let tx = self.db.begin_read()?;
        branch_head(&tx, &branch)
    }
}

/// Check every marker and table of schema 3, returning the incarnation and
/// the main branch.
fn check_markers(
    tx: &ReadTransaction,
    path: &Path,
    id: &RepositoryId,
) -> Result<([u8; 16], BranchId)> {
    let present: std::collections::BTreeSet<String> =
        tx.list_tables()?.map(|t| t.name().to_owned()).collect();
    if !present.contains("meta") {
        return Err(MetadataError::corrupt(format!(
            "{}: no meta table",
            path.display()
        )));
    }
    let m = tx.open_table(tables::META)?;
    let get = |k: &str| -> Result<Option<Vec<u8>>> { Ok(m.get(k)?.map(|g| g.value().to_vec())) };
    let mismatch =
        |what: &'static str, found: String, expected: String| MetadataError::VersionMismatch {
            path: path.to_owned(),
            what,
            found,
            expected,
        };
    let schema = match get(meta::SCHEMA)? {
        Some(b) => decode_u32(&b, "meta.schema")?,
        None => return Err(mismatch("repository schema", "absent".into(), "3".into())),
    };
    if schema != tables::REPOSITORY_SCHEMA {
        return Err(mismatch(
            "repository schema",
            schema.to_string(),
            "3".into(),
        ));
    }
    match get(meta::SNAPSHOT_PROFILE)? {
        Some(b) if decode_u32(&b, "meta.snapshot-profile")? == tables::SNAPSHOT_PROFILE => {}
        Some(b) => {
            return Err(mismatch(
                "snapshot profile",
                decode_u32(&b, "meta.snapshot-profile")?.to_string(),
                "3".into(),
            ))
        }
        None => return Err(mismatch("snapshot profile", "absent".into(), "3".into())),
    }
    match get(meta::MIGRATION_VERSION)? {
        Some(b) if b == tables::MIGRATION_VERSION.to_le_bytes() => {}
        Some(b) => {
            let v = decode_u32(&b, "meta.migration-version")
                .map(|v| v.to_string())
                .unwrap_or_else(|_| hex::encode(&b));
            return Err(mismatch("migration revision", v, "3".into()));
        }
        None => {
            return Err(mismatch(
                "migration revision",
                "absent (0)".into(),
                "3".into(),
            ))
        }
    }
    if get(meta::MIGRATION_ACTIVE)?.is_some() || get(meta::MIGRATION_CURSOR)?.is_some() {
        return Err(mismatch("migration step", "active".into(), "none".into()));
    }
    match get(meta::PATH_FOLD_PROFILE)? {
        Some(b) if b == tables::PATH_FOLD_PROFILE.to_le_bytes() => {}
        Some(b) => {
            return Err(mismatch(
                "path fold profile",
                hex::encode(&b),
                "01000000".into(),
            ))
        }
        None => {
            return Err(mismatch(
                "path fold profile",
                "absent".into(),
                "01000000".into(),
            ))
        }
    }
    for t in tables::REQUIRED_TABLES {
        if !present.contains(*t) {
            return Err(MetadataError::corrupt(format!(
                "{}: required table {t} is missing",
                path.display()
            )));
        }
    }
    let rid =
        get(meta::REPOSITORY_ID)?.ok_or_else(|| MetadataError::corrupt("no repository-id"))?;
    if rid.as_slice() != id.0.as_slice() {
        return Err(MetadataError::corrupt(format!(
            "{}: repository-id {} is not {id}",
            path.display(),
            hex::encode(&rid)
        )));
    }
    let inc = get(meta::INCARNATION)?.ok_or_else(|| MetadataError::corrupt("no incarnation"))?;
    let incarnation: [u8; 16] = inc
        .as_slice()
        .try_into()
        .map_err(|_| MetadataError::corrupt("incarnation is not 16 bytes"))?;
    let rm = get(meta::REPO_META)?.ok_or_else(|| MetadataError::corrupt("no repo-meta"))?;
    RepoMeta::decode(&rm)?;
    for k in [
        meta::SNAPSHOT_LIVE,
        meta::LOCK_EPOCH,
        meta::LOCK_UPDATE_COUNT,
        meta::LOCK_RELEASE_COUNT,
    ] {
        let b = get(k)?.ok_or_else(|| MetadataError::corrupt(format!("meta.{k} is missing")))?;
        decode_u64(&b, "meta counter")?;
    }
    // The main branch is the branch created at change 0 without a source.
    let branches = tx.open_table(tables::BRANCHES)?;
    let mut main = None;
    for row in branches.range::<[u8; 16]>(..)? {
        let (k, v) = row?;
        let rec = BranchRecord::decode(v.value())?;
        if rec.created_change == 0 && rec.branched_from.is_none() {
            main = Some(BranchId(k.value()));
            break;
        }
    }
    let main = main.ok_or_else(|| MetadataError::corrupt("no main branch"))?;
    Ok((incarnation, main))
}

pub(crate) fn read_repo_meta(tx: &ReadTransaction) -> Result<RepoMeta> {
    let m = tx.open_table(tables::META)?;
    let b = m
        .get(meta::REPO_META)?
        .ok_or_else(|| MetadataError::corrupt("no repo-meta"))?;
    Ok(RepoMeta::decode(b.value())?)
}

pub(crate) fn branch_head(tx: &ReadTransaction, branch: &BranchId) -> Result<u64> {
    let t = tx.open_table(tables::BRANCH_HEADS)?;
    let head = t.get(branch.0)?.map(|g| g.value()).ok_or_else(|| {
        MetadataError::refused(ErrorCode::NotFound, format!("no branch {branch}"))
    })?;
    Ok(head)
}

/// The root row of `branch` pinned at `change` (reverse seek: the newest
/// root at or below `change`).
pub(crate) fn root_at(tx: &ReadTransaction, branch: &BranchId, change: u64) -> Result<RootRow> {
    root_in(
        &tx.open_table(tables::SNAPSHOT_ROOTS)?,
        &tx.open_table(tables::COMMITS)?,
        branch,
        change,
    )
}

/// The root row of `branch` pinned at `change` in `roots`: the newest root
/// at or below `change`, which must be the root of the branch's newest
/// accepted change at or below it (every accepted change stores its roots,
/// section 12). A row that is missing, whether at the head or below it, is
/// corruption: falling back to an older root would serve an older tree as
/// this one, and a submit on it would drop every later file from the head.
pub(crate) fn root_in<R, C>(
    roots: &R,
    commits: &C,
    branch: &BranchId,
    change: u64,
) -> Result<RootRow>
where
    R: ReadableTable<&'static [u8], &'static [u8]>,
    C: ReadableTable<u64, &'static [u8]>,
{
    let lo = keys::root(branch, 0);
    let hi = keys::root(branch, change);
    let mut it = roots.range(lo.as_slice()..=hi.as_slice())?;
    let Some(row) = it.next_back() else {
        return Err(MetadataError::corrupt(format!(
            "no snapshot root of branch {branch} at or below change {change}"
        )));
    };
    let (k, v) = row?;
    let key = k.value();
    let found = key
        .get(16..24)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| MetadataError::corrupt("snapshot root key is not 24 bytes"))?;
    if found < change {
        // An accepted change of this branch in (found, change] would have
        // stored its own root.
        for row in commits.range(found + 1..=change)? {
            let (c, rec) = row?;
            if CommitRecord::decode(rec.value())?.branch == *branch {
                return Err(MetadataError::corrupt(format!(
                    "the snapshot root of branch {branch} at accepted change {} is missing \
                     (the newest at or below it is change {found}): run `scribe-server doctor`",
                    c.value()
                )));
            }
        }
    }
    Ok(RootRow::decode(v.value())?)
}

impl std::fmt::Debug for Repository {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Repository")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

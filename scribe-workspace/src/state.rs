//! The `.scribe/_state/` store: descriptor, `state.redb`, local LOCK and
//! the directories beside them (specification section 9).
//!
//! ```text
//! .scribe/_state/SCRIBE_FORMAT   kind = workspace, schema 2
//! .scribe/_state/state.redb      meta, baseline, opened, pending, journal,
//!                                local_locks, deferred, workflows_v2
//! .scribe/_state/LOCK            held (OS lock) while a scribe process works here
//! .scribe/_state/cache/          object store of small objects and manifests
//! .scribe/_state/tmp/            reconstruction temporaries, cleaned at open
//! .scribe/_state/recovery/       displaced local contents (section 9a)
//! .scribe/_state/staging/        moves in transit
//! .scribe/_state/ignore          optional local ignore rules
//! ```
//!
//! Every write transaction commits with `Durability::Immediate`: the
//! workspace records what the user's files mean, and losing a commit could
//! make Scribe forget unsubmitted work.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use redb::{
    Database, Durability, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition,
};
use scribe_format::bytes::Reader;
use scribe_format::descriptor::{self, Descriptor};
use scribe_format::{BranchId, FormatError, OperationId, RepositoryId, WorkspaceId};
use scribe_objects::{ObjectStore, StoreOptions};

use crate::error::{Result, WorkspaceError};
use crate::records::{
    decode_str16_list, encode_str16_list, BaselineRecord, JournalEntry, OpenedRecord, PendingSubmit,
};

/// Workspace schema written and read (schema 2 adds `workflows_v2`).
pub const SCHEMA: u32 = 2;
/// The state directory relative to the workspace root.
pub const STATE_DIR: &str = ".scribe/_state";
/// The cache's directory inside the state directory.
const CACHE_DIR: &str = "cache";

/// The boundary a cache prune's compaction marker records: a workspace
/// cache has no metadata journal of its own, so it is fixed.
const CACHE_PRUNE_CONTEXT: scribe_objects::CompactContext = scribe_objects::CompactContext {
    repository: *b"scribe-ws-cache\0",
    journal_end: 0,
};

/// What [`Workspace::prune_cache`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachePruned {
    /// Objects kept (the server lacks them, or a pending submission needs them).
    pub retained: u64,
    /// Objects removed (the server holds them).
    pub dropped: u64,
    pub bytes_before: u64,
    pub bytes_after: u64,
}

const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
/// Every write to `BASELINE` goes through `StateWrite::baseline_table`, which
/// stamps a fresh [`BASELINE_GENERATION`]: the status cache
/// (`crate::baseline_index`) is valid only for the stamp it was built from.
const BASELINE: TableDefinition<&str, &[u8]> = TableDefinition::new("baseline");
const OPENED: TableDefinition<&str, &[u8]> = TableDefinition::new("opened");
const PENDING: TableDefinition<&[u8; 16], &[u8]> = TableDefinition::new("pending");
const JOURNAL: TableDefinition<&str, &[u8]> = TableDefinition::new("journal");
const LOCAL_LOCKS: TableDefinition<&str, u64> = TableDefinition::new("local_locks");
const DEFERRED: TableDefinition<&str, &[u8]> = TableDefinition::new("deferred");
const WORKFLOWS: TableDefinition<&str, &[u8]> = TableDefinition::new("workflows_v2");

/// `meta` key: 16 random bytes replaced by every transaction that writes a
/// baseline (an extension of section 9's `meta` keys; absent until the first
/// such write by a client that knows it).
pub const BASELINE_GENERATION: &str = "baseline-generation";

/// What a workspace is bound to, kept in the `meta` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkspaceMeta {
    pub workspace_id: WorkspaceId,
    pub repository_id: RepositoryId,
    pub branch_id: BranchId,
    pub incarnation: [u8; 16],
    pub repository_name: String,
    pub server: String,
    pub author: String,
    pub view: Vec<String>,
    pub tags: Vec<String>,
    pub readonly: bool,
    pub transfer_compression: bool,
    /// The change the working copy was last synced to.
    pub synced: u64,
}

/// An open workspace: its root, its database, and its held LOCK.
pub struct Workspace {
    root: PathBuf,
    /// `.scribe/_state/state.redb`.
    db_path: Arc<Path>,
    db: std::sync::RwLock<Option<Db>>,
    /// The LOCK held: exclusive, or shared on a read-only file system
    /// (none when the file cannot even be read there).
    _lock: Option<File>,
    /// Opened for reading where `.scribe/_state` cannot be written (a
    /// read-only file system, or permissions): [`Workspace::write`] is
    /// refused and the optional writes of reading commands are skipped.
    read_only_fs: bool,
}

/// `state.redb`, writable, or read-only until the first write
/// ([`Workspace::open_for_reading`]).
enum Db {
    Write(Database),
    Read(redb::ReadOnlyDatabase),
}

impl std::fmt::Debug for Workspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workspace")
            .field("root", &self.root)
            .finish()
    }
}

fn state_dir(root: &Path) -> PathBuf {
    root.join(STATE_DIR)
}

/// Take the local operation LOCK, writing our pid into it for diagnostics.
fn take_lock(root: &Path) -> Result<File> {
    let path = state_dir(root).join("LOCK");
    let mut file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(WorkspaceError::io(&path))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let pid = std::fs::read_to_string(&path)
                .ok()
                .and_then(|s| s.trim().parse().ok());
            return Err(WorkspaceError::Busy {
                root: root.to_path_buf(),
                pid,
            });
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(WorkspaceError::io(&path)(e)),
    }
    file.set_len(0).map_err(WorkspaceError::io(&path))?;
    write!(file, "{}", std::process::id()).map_err(WorkspaceError::io(&path))?;
    Ok(file)
}

/// Whether `e` says the file system (or its permissions) refuses writes.
pub fn is_write_refused(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ReadOnlyFilesystem | std::io::ErrorKind::PermissionDenied
    )
}

/// The LOCK of a workspace that cannot be written (#18 item 14): opened
/// read-only and locked shared, so a writer elsewhere (another mount of
/// the same directory) is still noticed; none when it cannot be read.
fn take_lock_shared(root: &Path) -> Result<Option<File>> {
    let path = state_dir(root).join("LOCK");
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(_) => return Ok(None),
    };
    match file.try_lock_shared() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => {
            let pid = std::fs::read_to_string(&path)
                .ok()
                .and_then(|s| s.trim().parse().ok());
            Err(WorkspaceError::Busy {
                root: root.to_path_buf(),
                pid,
            })
        }
        // Locking itself refused (some network file systems): read anyway.
        Err(std::fs::TryLockError::Error(_)) => Ok(None),
    }
}

fn create_dirs(root: &Path) -> Result<()> {
    for sub in [
        CACHE_DIR,
        "tmp",
        crate::sync::PARTIAL_DIR,
        "recovery",
        "staging",
    ] {
        let dir = state_dir(root).join(sub);
        std::fs::create_dir_all(&dir).map_err(WorkspaceError::io(&dir))?;
    }
    Ok(())
}

impl Workspace {
    /// Find the workspace root at or above `start` (the nearest directory
    /// holding `.scribe/_state/SCRIBE_FORMAT`).
    pub fn find(start: &Path) -> Result<PathBuf> {
        let start = std::path::absolute(start).map_err(WorkspaceError::io(start))?;
        let mut dir: Option<&Path> = Some(&start);
        while let Some(d) = dir {
            if state_dir(d).join("SCRIBE_FORMAT").is_file() {
                return Ok(d.to_path_buf());
            }
            dir = d.parent();
        }
        Err(WorkspaceError::NotAWorkspace { start })
    }

    /// Create a workspace at `root` (which may already hold files).
    pub fn create(root: &Path, meta: &WorkspaceMeta) -> Result<Workspace> {
        let state = state_dir(root);
        if state.join("SCRIBE_FORMAT").exists() {
            return Err(WorkspaceError::AlreadyAWorkspace {
                path: root.to_path_buf(),
            });
        }
        std::fs::create_dir_all(&state).map_err(WorkspaceError::io(&state))?;
        let lock = take_lock(root)?;
        create_dirs(root)?;
        let db_path: Arc<Path> = state.join("state.redb").into();
        let db = guarded(&db_path, || Ok(Database::create(&db_path)?))?;
        let ws = Workspace {
            root: root.to_path_buf(),
            db_path,
            db: std::sync::RwLock::new(Some(Db::Write(db))),
            _lock: Some(lock),
            read_only_fs: false,
        };
        {
            let mut tx = ws.write()?;
            tx.tables_init()?;
            tx.stamp_baseline_generation()?;
            tx.put_meta_u32("schema", SCHEMA)?;
            tx.set_meta(meta)?;
            tx.commit()?;
        }
        // The descriptor is written last: a crash before this leaves no
        // workspace, only a directory that `create` can be rerun over.
        let desc = Descriptor::new_workspace(&descriptor::Workspace {
            schema: SCHEMA,
            engine: descriptor::ENGINE_REDB_4.to_string(),
            workspace_id: meta.workspace_id,
        })
        .map_err(|source| WorkspaceError::Descriptor {
            path: state.join("SCRIBE_FORMAT"),
            source,
        })?;
        write_durably(&state.join("SCRIBE_FORMAT"), &desc.encode())?;
        Ok(ws)
    }

    /// Open the workspace whose root is `root`, taking its LOCK.
    pub fn open(root: &Path) -> Result<Workspace> {
        Self::open_with(root, false)
    }

    /// [`open`](Workspace::open) for a command that mostly reads (`status`):
    /// `state.redb` is opened read-only, which neither writes nor flushes
    /// it (a writable redb open and close costs five `fdatasync`s). The
    /// first [`write`](Workspace::write) reopens it writable; no
    /// [`StateRead`] may be alive then. A database that was not closed
    /// cleanly is opened writable at once (redb repairs it).
    pub fn open_for_reading(root: &Path) -> Result<Workspace> {
        Self::open_with(root, true)
    }

    fn open_with(root: &Path, read_only: bool) -> Result<Workspace> {
        let state = state_dir(root);
        let desc_path = state.join("SCRIBE_FORMAT");
        let bytes = std::fs::read(&desc_path).map_err(WorkspaceError::io(&desc_path))?;
        let desc = Descriptor::parse(&bytes).map_err(|source| WorkspaceError::Descriptor {
            path: desc_path.clone(),
            source,
        })?;
        let fields = desc
            .workspace()
            .map_err(|source| WorkspaceError::Descriptor {
                path: desc_path.clone(),
                source,
            })?;
        desc.check_mutation(&[])
            .map_err(|source| WorkspaceError::Descriptor {
                path: desc_path.clone(),
                source,
            })?;
        if fields.schema != SCHEMA {
            return Err(WorkspaceError::UnsupportedSchema {
                found: fields.schema,
                supported: SCHEMA,
            });
        }
        // Reading commands still work where nothing can be written (#18
        // item 14): the LOCK is then taken shared on a read-only handle,
        // and the directories and `tmp` are left as they are.
        let (lock, read_only_fs) = match take_lock(root) {
            Ok(lock) => (Some(lock), false),
            Err(WorkspaceError::Io { source, .. }) if read_only && is_write_refused(&source) => {
                (take_lock_shared(root)?, true)
            }
            Err(e) => return Err(e),
        };
        if !read_only_fs {
            create_dirs(root)?;
            clean_tmp(&state.join("tmp"))?;
        }
        let db_path: Arc<Path> = state.join("state.redb").into();
        // A missing state.redb is damage too: `Database::create` would make
        // an empty one, and the workspace would forget its baselines.
        if !db_path.is_file() {
            return Err(WorkspaceError::StateDamaged {
                path: db_path.to_path_buf(),
                detail: "the file is missing".into(),
            });
        }
        let db = guarded(&db_path, || {
            Ok(match read_only {
                true => match redb::ReadOnlyDatabase::open(&db_path) {
                    Ok(db) => Db::Read(db),
                    // redb repairs a database not closed cleanly only
                    // when it may write: say so rather than fail on EROFS.
                    Err(e) if read_only_fs => {
                        return Err(WorkspaceError::StateDamaged {
                            path: db_path.to_path_buf(),
                            detail: format!(
                                "it cannot be opened read-only ({e}) and this file system \
                                 refuses writes; a database left open by a killed scribe \
                                 needs one writable open to be repaired"
                            ),
                        })
                    }
                    Err(_) => Db::Write(Database::create(&db_path)?),
                },
                false => Db::Write(Database::create(&db_path)?),
            })
        })?;
        let ws = Workspace {
            root: root.to_path_buf(),
            db_path,
            db: std::sync::RwLock::new(Some(db)),
            _lock: lock,
            read_only_fs,
        };
        let schema = ws.read()?.meta_u32("schema")?;
        if schema != Some(SCHEMA) {
            return Err(WorkspaceError::UnsupportedSchema {
                found: schema.unwrap_or(0),
                supported: SCHEMA,
            });
        }
        Ok(ws)
    }

    /// Opened for reading where the state cannot be written (a read-only
    /// file system or permissions): writes are refused.
    pub fn read_only_fs(&self) -> bool {
        self.read_only_fs
    }

    /// The workspace root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `.scribe/_state`.
    pub fn state_dir(&self) -> PathBuf {
        state_dir(&self.root)
    }

    /// The workspace cache (`.scribe/_state/cache/`): an object store of the
    /// objects this workspace has fetched or imported, opened (with its
    /// open-time recovery), or created with the default options on first
    /// use.
    pub fn cache(&self) -> Result<ObjectStore> {
        let dir = self.state_dir().join(CACHE_DIR);
        // A prune killed after its durable marker is completed first (its
        // swap is recognised from the directory state).
        if self
            .state_dir()
            .join(format!("{CACHE_DIR}.compaction-ready"))
            .exists()
        {
            scribe_objects::compact(
                &dir,
                std::iter::empty(),
                CACHE_PRUNE_CONTEXT,
                &scribe_objects::CompactOptions::default(),
            )
            .map_err(WorkspaceError::Cache)?;
        }
        let opened = if dir.join("SCRIBE_FORMAT").exists() {
            ObjectStore::open(&dir)
        } else {
            ObjectStore::create(&dir, StoreOptions::default())
        };
        opened.map_err(|e| match e {
            // The store's own message names the server's `migrate`; a
            // workspace's cache is not the server's to convert.
            scribe_objects::StoreError::UnexpectedVersion {
                path,
                what,
                found,
                supported,
            } => WorkspaceError::UnsupportedCache {
                path,
                what,
                found,
                supported,
            },
            other => WorkspaceError::Cache(other),
        })
    }

    /// Bytes the workspace cache holds on disk (packs and loose objects).
    pub fn cache_bytes(&self) -> Result<u64> {
        let dir = self.state_dir().join(CACHE_DIR);
        if !dir.exists() {
            return Ok(0);
        }
        fn walk(dir: &Path) -> Result<u64> {
            let mut n = 0;
            for e in std::fs::read_dir(dir).map_err(WorkspaceError::io(dir))? {
                let e = e.map_err(WorkspaceError::io(dir))?;
                let md = e.metadata().map_err(WorkspaceError::io(e.path()))?;
                n += if md.is_dir() {
                    walk(&e.path())?
                } else {
                    md.len()
                };
            }
            Ok(n)
        }
        let n = walk(&dir)?;
        Ok(n)
    }

    /// Rewrite the workspace cache keeping only what is still needed: the
    /// objects `keep` chooses among every cached id (the caller keeps what
    /// the server lacks) and, always, every cached object of a pending
    /// submission (its change set, manifests and chunks: a frozen
    /// submission's bytes may exist nowhere else). Crash safe: the
    /// replacement is built beside the cache and swapped in after a
    /// durable marker; a killed prune is completed by the next
    /// [`Workspace::cache`]. The caller holds the workspace exclusively
    /// and no other handle on the cache.
    pub fn prune_cache(
        &self,
        keep: impl FnOnce(&[scribe_format::ObjectId]) -> Result<Vec<scribe_format::ObjectId>>,
    ) -> Result<CachePruned> {
        use scribe_format::ObjectId;
        let before = self.cache_bytes()?;
        let cache = self.cache()?;
        let all: Vec<ObjectId> = cache
            .list()
            .map_err(WorkspaceError::Cache)?
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        let present: std::collections::HashSet<ObjectId> = all.iter().copied().collect();
        let mut live: std::collections::HashSet<ObjectId> = keep(&all)?
            .into_iter()
            .filter(|id| present.contains(id))
            .collect();
        for (_, pending) in self.read()?.pending_all()? {
            // (Its change set travels from the pending row itself.)
            let cs = ObjectId::change_set(pending.change_set_id);
            if present.contains(&cs) {
                live.insert(cs);
            }
            let set = scribe_format::changeset::ChangeSet::decode(&pending.change_set)
                .map_err(corrupt("pending", pending.change_set_id.to_string()))?;
            for e in &set.entries {
                let Some(st) = &e.state else { continue };
                let mid = ObjectId::manifest(st.manifest);
                if !present.contains(&mid) {
                    continue;
                }
                live.insert(mid);
                let bytes = cache.get(&mid).map_err(WorkspaceError::Cache)?;
                let m = scribe_format::manifest::Manifest::decode(&bytes)
                    .map_err(corrupt("cache", mid.to_string()))?;
                for c in &m.chunks {
                    let cid = ObjectId::chunk(c.id);
                    if present.contains(&cid) {
                        live.insert(cid);
                    }
                }
            }
        }
        let retained = live.len() as u64;
        let dropped = all.len() as u64 - retained;
        drop(cache);
        if dropped > 0 {
            scribe_objects::compact(
                self.state_dir().join(CACHE_DIR),
                live,
                CACHE_PRUNE_CONTEXT,
                &scribe_objects::CompactOptions::default(),
            )
            .map_err(WorkspaceError::Cache)?;
        }
        Ok(CachePruned {
            retained,
            dropped,
            bytes_before: before,
            bytes_after: self.cache_bytes()?,
        })
    }

    /// A read view of the state.
    pub fn read(&self) -> Result<StateRead> {
        let db = self.db.read().unwrap_or_else(|e| e.into_inner());
        let tx = guarded(&self.db_path, || {
            Ok(match &*db {
                Some(Db::Write(d)) => d.begin_read()?,
                Some(Db::Read(d)) => d.begin_read()?,
                None => return Err(redb::StorageError::DatabaseClosed.into()),
            })
        })?;
        Ok(StateRead {
            tx,
            path: self.db_path.clone(),
        })
    }

    /// A write transaction, committed with immediate durability.
    pub fn write(&self) -> Result<StateWrite> {
        if self.read_only_fs {
            return Err(WorkspaceError::Io {
                path: self.db_path.to_path_buf(),
                source: std::io::Error::new(
                    std::io::ErrorKind::ReadOnlyFilesystem,
                    "the workspace state cannot be written here (read-only file system or \
                     permissions); only reading commands work",
                ),
            });
        }
        let writable = |db: &Option<Db>| match db {
            Some(Db::Write(d)) => Some(d.begin_write()),
            _ => None,
        };
        let begun = writable(&self.db.read().unwrap_or_else(|e| e.into_inner()));
        let begun = match begun {
            Some(tx) => tx,
            None => {
                // Reopen writable: the read-only handle (and its shared
                // file lock) goes first.
                let mut db = self.db.write().unwrap_or_else(|e| e.into_inner());
                if !matches!(&*db, Some(Db::Write(_))) {
                    let path = self.db_path.clone();
                    drop(db.take());
                    match guarded(&path, || Ok(Database::create(&path)?)) {
                        Ok(d) => *db = Some(Db::Write(d)),
                        Err(e) => {
                            *db = redb::ReadOnlyDatabase::open(&path).ok().map(Db::Read);
                            return Err(e);
                        }
                    }
                }
                writable(&db).ok_or(redb::StorageError::DatabaseClosed)?
            }
        };
        let mut tx = guarded(&self.db_path, || Ok(begun?))?;
        tx.set_durability(Durability::Immediate)?;
        Ok(StateWrite {
            tx,
            path: self.db_path.clone(),
            baselines_stamped: std::cell::Cell::new(false),
        })
    }

    /// The workspace's binding.
    pub fn meta(&self) -> Result<WorkspaceMeta> {
        self.read()?.meta()
    }
}

/// Remove reconstruction temporaries left by a killed process.
fn clean_tmp(dir: &Path) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(WorkspaceError::io(dir))?;
    for entry in entries {
        let entry = entry.map_err(WorkspaceError::io(dir))?;
        let path = entry.path();
        let result = if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        result.map_err(WorkspaceError::io(&path))?;
    }
    Ok(())
}

/// Write `bytes` to `path` through a flushed temporary and a rename, then
/// flush the directory.
pub fn write_durably(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("next");
    {
        let mut f = File::create(&tmp).map_err(WorkspaceError::io(&tmp))?;
        f.write_all(bytes).map_err(WorkspaceError::io(&tmp))?;
        f.sync_all().map_err(WorkspaceError::io(&tmp))?;
    }
    std::fs::rename(&tmp, path).map_err(WorkspaceError::io(path))?;
    if let Some(dir) = path.parent() {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Flush a directory's entries (no-op where the platform cannot).
pub fn sync_dir(dir: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(WorkspaceError::io(dir))?;
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Run `f`, which reads or writes `state.redb` at `path`, and report
/// damage as [`WorkspaceError::StateDamaged`] naming the file: a row that
/// does not decode, a missing binding, redb finding the file corrupt or
/// not a database, a table of the wrong type, and a panic inside redb
/// (it indexes pages it trusts; a damaged page can make it panic).
fn guarded<T>(path: &Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(damage(path, e)),
        Err(panic) => {
            let why = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown".into());
            Err(WorkspaceError::StateDamaged {
                path: path.to_path_buf(),
                detail: format!("the database failed reading it ({why})"),
            })
        }
    }
}

/// `e` as [`WorkspaceError::StateDamaged`] when it reports damage.
fn damage(path: &Path, e: WorkspaceError) -> WorkspaceError {
    let detail = match &e {
        WorkspaceError::Corrupt { table, key, source } => {
            format!("row {table}/{key} does not decode: {source}")
        }
        WorkspaceError::MissingMeta { key } => format!("the meta row {key:?} is missing"),
        WorkspaceError::Database(d) if is_damage(d) => d.to_string(),
        _ => return e,
    };
    WorkspaceError::StateDamaged {
        path: path.to_path_buf(),
        detail,
    }
}

/// Whether a redb error means the file is damaged (not busy, not a
/// failing disk or a full one).
fn is_damage(e: &redb::Error) -> bool {
    match e {
        redb::Error::Corrupted(_)
        | redb::Error::TableTypeMismatch { .. }
        | redb::Error::TableIsMultimap(_)
        | redb::Error::TableIsNotMultimap(_)
        | redb::Error::TypeDefinitionChanged { .. }
        | redb::Error::TableDoesNotExist(_)
        | redb::Error::UpgradeRequired(_) => true,
        redb::Error::Io(io) => matches!(
            io.kind(),
            std::io::ErrorKind::InvalidData | std::io::ErrorKind::UnexpectedEof
        ),
        _ => false,
    }
}

/// Refuse a path-keyed row whose key is not a canonical path: a damaged
/// file must not make sync or status act on `../x` or an absolute path.
fn check_key(table: &'static str, key: &str) -> Result<()> {
    scribe_format::path::validate(key).map_err(|e| WorkspaceError::Corrupt {
        table,
        key: key.escape_debug().to_string(),
        source: e.into(),
    })
}

fn corrupt(
    table: &'static str,
    key: impl Into<String>,
) -> impl FnOnce(FormatError) -> WorkspaceError {
    let key = key.into();
    move |source| WorkspaceError::Corrupt { table, key, source }
}

fn id16<T: From<[u8; 16]>>(bytes: &[u8], key: &'static str) -> Result<T> {
    let arr: [u8; 16] = bytes.try_into().map_err(|_| WorkspaceError::Corrupt {
        table: "meta",
        key: key.into(),
        source: FormatError::InvalidValue {
            what: "meta id",
            value: bytes.len() as u64,
            reason: "ids are 16 bytes",
        },
    })?;
    Ok(T::from(arr))
}

/// Read access shared by [`StateRead`] and [`StateWrite`].
macro_rules! reads {
    ($open:ident) => {
        fn meta_raw(&self, key: &str) -> Result<Option<Vec<u8>>> {
            self.guarded(|| {
                let t = self.$open(META)?;
                let v = t.get(key)?.map(|v| v.value().to_vec());
                Ok(v)
            })
        }

        /// A raw meta value.
        pub fn meta_bytes(&self, key: &str) -> Result<Option<Vec<u8>>> {
            self.guarded(|| self.meta_raw(key))
        }

        /// Meta keys that start with `prefix`, in order.
        pub fn meta_keys_with_prefix(&self, prefix: &str) -> Result<Vec<String>> {
            self.guarded(|| {
                let t = self.$open(META)?;
                let mut out = Vec::new();
                for row in t.range(prefix..)? {
                    let (k, _) = row?;
                    if !k.value().starts_with(prefix) {
                        break;
                    }
                    out.push(k.value().to_string());
                }
                Ok(out)
            })
        }

        /// A `u32` meta value.
        pub fn meta_u32(&self, key: &'static str) -> Result<Option<u32>> {
            self.guarded(|| match self.meta_raw(key)? {
                None => Ok(None),
                Some(v) => Ok(Some(
                    Reader::new(&v).u32(key).map_err(corrupt("meta", key))?,
                )),
            })
        }

        /// A `u64` meta value.
        pub fn meta_u64(&self, key: &'static str) -> Result<Option<u64>> {
            self.guarded(|| match self.meta_raw(key)? {
                None => Ok(None),
                Some(v) => {
                    let mut r = Reader::new(&v);
                    let n = r.u64(key).map_err(corrupt("meta", key))?;
                    r.finish(key).map_err(corrupt("meta", key))?;
                    Ok(Some(n))
                }
            })
        }

        /// The workspace's binding.
        pub fn meta(&self) -> Result<WorkspaceMeta> {
            self.guarded(|| {
                let need = |key: &'static str| -> Result<Vec<u8>> {
                    self.meta_raw(key)?
                        .ok_or(WorkspaceError::MissingMeta { key })
                };
                let text = |key: &'static str| -> Result<String> {
                    String::from_utf8(need(key)?).map_err(|_| WorkspaceError::Corrupt {
                        table: "meta",
                        key: key.into(),
                        source: FormatError::NotUtf8 { what: "meta text" },
                    })
                };
                let flag = |key: &'static str| -> Result<bool> {
                    match self.meta_raw(key)?.as_deref() {
                        None | Some([0]) => Ok(false),
                        Some([1]) => Ok(true),
                        Some(_) => Err(WorkspaceError::Corrupt {
                            table: "meta",
                            key: key.into(),
                            source: FormatError::invalid("meta flag", "must be 0 or 1"),
                        }),
                    }
                };
                let list = |key: &'static str, max_items, max_len| -> Result<Vec<String>> {
                    match self.meta_raw(key)? {
                        None => Ok(Vec::new()),
                        Some(v) => {
                            decode_str16_list(&v, max_items, max_len).map_err(corrupt("meta", key))
                        }
                    }
                };
                Ok(WorkspaceMeta {
                    workspace_id: id16(&need("workspace-id")?, "workspace-id")?,
                    repository_id: id16(&need("repository-id")?, "repository-id")?,
                    branch_id: id16(&need("branch-id")?, "branch-id")?,
                    incarnation: id16::<[u8; 16]>(&need("incarnation")?, "incarnation")?,
                    repository_name: text("repository-name")?,
                    server: text("server")?,
                    author: text("author")?,
                    view: list(
                        "view",
                        scribe_format::limits::MAX_VIEW_PREFIXES,
                        scribe_format::limits::MAX_PATH_BYTES,
                    )?,
                    tags: list("tags", 16, 64)?,
                    readonly: flag("readonly-mode")?,
                    transfer_compression: flag("transfer-compression")?,
                    synced: self.meta_u64("synced")?.unwrap_or(0),
                })
            })
        }

        /// The baseline of `path`.
        pub fn baseline(&self, path: &str) -> Result<Option<BaselineRecord>> {
            self.guarded(|| {
                let t = self.$open(BASELINE)?;
                let row = t.get(path)?;
                let out = match row {
                    None => None,
                    Some(v) => {
                        Some(BaselineRecord::decode(v.value()).map_err(corrupt("baseline", path))?)
                    }
                };
                Ok(out)
            })
        }

        /// The stamp of the last transaction that wrote a baseline.
        pub fn baseline_generation(&self) -> Result<Option<[u8; 16]>> {
            self.guarded(|| match self.meta_raw(BASELINE_GENERATION)? {
                None => Ok(None),
                Some(v) => Ok(Some(id16::<[u8; 16]>(&v, BASELINE_GENERATION)?)),
            })
        }

        /// How many baselines there are.
        pub fn baseline_count(&self) -> Result<u64> {
            self.guarded(|| Ok(self.$open(BASELINE)?.len()?))
        }

        /// Visit every baseline in path order without copying its key.
        pub fn visit_baselines(&self, mut f: impl FnMut(&str, &BaselineRecord)) -> Result<()> {
            self.guarded(|| {
                let t = self.$open(BASELINE)?;
                for row in t.iter()? {
                    let (k, v) = row?;
                    check_key("baseline", k.value())?;
                    let rec = BaselineRecord::decode(v.value())
                        .map_err(corrupt("baseline", k.value()))?;
                    f(k.value(), &rec);
                }
                Ok(())
            })
        }

        /// The baselines at or under `prefix` (every one for `""`), in
        /// path order: a range read from `prefix`, not the whole table
        /// (`edit`, `delete`, `revert` of a few paths in a large tree).
        pub fn baseline_paths_under(&self, prefix: &str) -> Result<Vec<String>> {
            self.guarded(|| {
                let t = self.$open(BASELINE)?;
                let mut out = Vec::new();
                for row in t.range::<&str>(prefix..)? {
                    let (k, _) = row?;
                    let p = k.value();
                    // Keys such as `a-b` and `a.b` sort between `a` and
                    // `a/`: skip them, stop past the prefix.
                    if !p.starts_with(prefix) {
                        break;
                    }
                    check_key("baseline", p)?;
                    if scribe_format::path::is_under_prefix(p, prefix) {
                        out.push(p.to_string());
                    }
                }
                Ok(out)
            })
        }

        /// Every baseline, in path order.
        pub fn baselines(&self) -> Result<Vec<(String, BaselineRecord)>> {
            self.guarded(|| {
                let t = self.$open(BASELINE)?;
                let mut out = Vec::new();
                for row in t.iter()? {
                    let (k, v) = row?;
                    check_key("baseline", k.value())?;
                    let rec = BaselineRecord::decode(v.value())
                        .map_err(corrupt("baseline", k.value()))?;
                    out.push((k.value().to_string(), rec));
                }
                Ok(out)
            })
        }

        /// The opened record of `path`.
        pub fn opened(&self, path: &str) -> Result<Option<OpenedRecord>> {
            self.guarded(|| {
                let t = self.$open(OPENED)?;
                let row = t.get(path)?;
                let out = match row {
                    None => None,
                    Some(v) => {
                        Some(OpenedRecord::decode(v.value()).map_err(corrupt("opened", path))?)
                    }
                };
                Ok(out)
            })
        }

        /// Whether any path is opened (nothing decoded: `submit` asks
        /// before it reads them all).
        pub fn any_opened(&self) -> Result<bool> {
            self.guarded(|| Ok(!self.$open(OPENED)?.is_empty()?))
        }

        /// Every opened record, in path order.
        pub fn opened_all(&self) -> Result<Vec<(String, OpenedRecord)>> {
            self.guarded(|| {
                let t = self.$open(OPENED)?;
                let mut out = Vec::new();
                for row in t.iter()? {
                    let (k, v) = row?;
                    check_key("opened", k.value())?;
                    let rec =
                        OpenedRecord::decode(v.value()).map_err(corrupt("opened", k.value()))?;
                    out.push((k.value().to_string(), rec));
                }
                Ok(out)
            })
        }

        /// Every pending submission.
        pub fn pending_all(&self) -> Result<Vec<(OperationId, PendingSubmit)>> {
            self.guarded(|| {
                let t = self.$open(PENDING)?;
                let mut out = Vec::new();
                for row in t.iter()? {
                    let (k, v) = row?;
                    let op = OperationId(*k.value());
                    let rec = PendingSubmit::decode(v.value())
                        .map_err(corrupt("pending", op.to_hex()))?;
                    out.push((op, rec));
                }
                Ok(out)
            })
        }

        /// The stored bytes of one pending submission.
        pub fn pending_bytes(&self, op: &OperationId) -> Result<Option<Vec<u8>>> {
            self.guarded(|| {
                let t = self.$open(PENDING)?;
                let v = t.get(&op.0)?.map(|v| v.value().to_vec());
                Ok(v)
            })
        }

        /// Every journal entry, in path order.
        pub fn journal_all(&self) -> Result<Vec<(String, JournalEntry)>> {
            self.guarded(|| self.journal_like(JOURNAL, "journal"))
        }

        /// Every deferred entry, in path order.
        pub fn deferred_all(&self) -> Result<Vec<(String, JournalEntry)>> {
            self.guarded(|| self.journal_like(DEFERRED, "deferred"))
        }

        fn journal_like(
            &self,
            def: TableDefinition<&str, &[u8]>,
            name: &'static str,
        ) -> Result<Vec<(String, JournalEntry)>> {
            self.guarded(|| {
                let t = self.$open(def)?;
                let mut out = Vec::new();
                for row in t.iter()? {
                    let (k, v) = row?;
                    check_key(name, k.value())?;
                    let rec = JournalEntry::decode(v.value()).map_err(corrupt(name, k.value()))?;
                    out.push((k.value().to_string(), rec));
                }
                Ok(out)
            })
        }

        /// The local lock generation of `path`.
        pub fn local_lock(&self, path: &str) -> Result<Option<u64>> {
            self.guarded(|| {
                let t = self.$open(LOCAL_LOCKS)?;
                let v = t.get(path)?.map(|v| v.value());
                Ok(v)
            })
        }

        /// Every local lock.
        pub fn local_locks(&self) -> Result<Vec<(String, u64)>> {
            self.guarded(|| {
                let t = self.$open(LOCAL_LOCKS)?;
                let mut out = Vec::new();
                for row in t.iter()? {
                    let (k, v) = row?;
                    check_key("local_locks", k.value())?;
                    out.push((k.value().to_string(), v.value()));
                }
                Ok(out)
            })
        }

        /// A workflow record.
        pub fn workflow(&self, key: &str) -> Result<Option<Vec<u8>>> {
            self.guarded(|| {
                let t = self.$open(WORKFLOWS)?;
                let v = t.get(key)?.map(|v| v.value().to_vec());
                Ok(v)
            })
        }

        /// Workflow records whose key starts with `prefix`.
        pub fn workflows_with_prefix(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>> {
            self.guarded(|| {
                let t = self.$open(WORKFLOWS)?;
                let mut out = Vec::new();
                for row in t.range(prefix..)? {
                    let (k, v) = row?;
                    if !k.value().starts_with(prefix) {
                        break;
                    }
                    out.push((k.value().to_string(), v.value().to_vec()));
                }
                Ok(out)
            })
        }
    };
}

/// A consistent read view.
pub struct StateRead {
    tx: redb::ReadTransaction,
    /// `state.redb`, named by every damage report.
    path: Arc<Path>,
}

impl StateRead {
    fn table<K: redb::Key + 'static, V: redb::Value + 'static>(
        &self,
        def: TableDefinition<K, V>,
    ) -> Result<redb::ReadOnlyTable<K, V>> {
        Ok(self.tx.open_table(def)?)
    }

    fn guarded<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        guarded(&self.path, f)
    }

    reads!(table);
}

/// One durable write transaction.
pub struct StateWrite {
    tx: redb::WriteTransaction,
    /// `state.redb`, named by every damage report.
    path: Arc<Path>,
    /// Whether this transaction already stamped a new baseline generation.
    baselines_stamped: std::cell::Cell<bool>,
}

impl StateWrite {
    fn table<K: redb::Key + 'static, V: redb::Value + 'static>(
        &self,
        def: TableDefinition<K, V>,
    ) -> Result<redb::Table<'_, K, V>> {
        Ok(self.tx.open_table(def)?)
    }

    fn guarded<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        guarded(&self.path, f)
    }

    reads!(table);

    fn tables_init(&mut self) -> Result<()> {
        self.guarded(|| {
            self.table(META)?;
            self.table(BASELINE)?;
            self.table(OPENED)?;
            self.table(PENDING)?;
            self.table(JOURNAL)?;
            self.table(LOCAL_LOCKS)?;
            self.table(DEFERRED)?;
            self.table(WORKFLOWS)?;
            Ok(())
        })
    }

    fn put_meta(&self, key: &str, value: &[u8]) -> Result<()> {
        self.guarded(|| {
            self.table(META)?.insert(key, value)?;
            Ok(())
        })
    }

    pub fn put_meta_bytes(&self, key: &str, value: &[u8]) -> Result<()> {
        self.guarded(|| self.put_meta(key, value))
    }

    pub fn put_meta_u32(&self, key: &str, v: u32) -> Result<()> {
        self.guarded(|| self.put_meta(key, &v.to_le_bytes()))
    }

    pub fn put_meta_u64(&self, key: &str, v: u64) -> Result<()> {
        self.guarded(|| self.put_meta(key, &v.to_le_bytes()))
    }

    pub fn remove_meta(&self, key: &str) -> Result<()> {
        self.guarded(|| {
            self.table(META)?.remove(key)?;
            Ok(())
        })
    }

    /// Record the workspace's binding.
    pub fn set_meta(&self, m: &WorkspaceMeta) -> Result<()> {
        self.guarded(|| {
            self.put_meta("workspace-id", &m.workspace_id.0)?;
            self.put_meta("repository-id", &m.repository_id.0)?;
            self.put_meta("branch-id", &m.branch_id.0)?;
            self.put_meta("incarnation", &m.incarnation)?;
            self.put_meta("repository-name", m.repository_name.as_bytes())?;
            self.put_meta("server", m.server.as_bytes())?;
            self.put_meta("author", m.author.as_bytes())?;
            self.put_meta("view", &encode_str16_list(&m.view))?;
            self.put_meta("tags", &encode_str16_list(&m.tags))?;
            self.put_meta("readonly-mode", &[u8::from(m.readonly)])?;
            self.put_meta("transfer-compression", &[u8::from(m.transfer_compression)])?;
            self.put_meta_u64("synced", m.synced)
        })
    }

    /// The baseline table for writing; stamps a fresh generation once per
    /// transaction so a status cache built before it is never trusted.
    fn baseline_table(&self) -> Result<redb::Table<'_, &'static str, &'static [u8]>> {
        self.guarded(|| {
            if !self.baselines_stamped.get() {
                self.put_meta(BASELINE_GENERATION, &scribe_format::OperationId::random().0)?;
                self.baselines_stamped.set(true);
            }
            self.table(BASELINE)
        })
    }

    /// The generation this transaction stamped (after a baseline write).
    pub fn stamped_baseline_generation(&self) -> Result<Option<[u8; 16]>> {
        self.guarded(|| {
            if self.baselines_stamped.get() {
                self.baseline_generation()
            } else {
                Ok(None)
            }
        })
    }

    /// Stamp a fresh baseline generation without changing a baseline
    /// (workspaces whose state predates the stamp).
    pub fn stamp_baseline_generation(&self) -> Result<[u8; 16]> {
        self.guarded(|| {
            self.baselines_stamped.set(false);
            drop(self.baseline_table()?);
            self.baseline_generation()?
                .ok_or(WorkspaceError::MissingMeta {
                    key: BASELINE_GENERATION,
                })
        })
    }

    pub fn put_baseline(&self, path: &str, rec: &BaselineRecord) -> Result<()> {
        self.guarded(|| {
            self.baseline_table()?
                .insert(path, rec.encode().as_slice())?;
            Ok(())
        })
    }

    /// Replace the fingerprints of existing baselines (a status settling
    /// what it proved unchanged), opening the table once; returns which
    /// paths had a baseline.
    pub fn refresh_fingerprints(
        &self,
        rows: &[(&str, crate::records::Fingerprint)],
    ) -> Result<Vec<bool>> {
        self.guarded(|| {
            let mut t = self.baseline_table()?;
            let mut out = Vec::with_capacity(rows.len());
            for &(path, fp) in rows {
                let old = match t.get(path)? {
                    None => None,
                    Some(v) => {
                        Some(BaselineRecord::decode(v.value()).map_err(corrupt("baseline", path))?)
                    }
                };
                if let Some(mut rec) = old {
                    rec.fingerprint = fp;
                    t.insert(path, rec.encode().as_slice())?;
                }
                out.push(old.is_some());
            }
            Ok(out)
        })
    }

    /// An accepted submission's bookkeeping with each table opened once
    /// (per row it cost three table openings, a third of a 52,000-file
    /// import's finalization): baselines written and removed, and every
    /// touched path's opened row and, with `locks`, its local lock.
    pub fn settle_submitted(
        &self,
        put: &[(&str, BaselineRecord)],
        removed: &[&str],
        touched: &[&str],
        locks: bool,
    ) -> Result<()> {
        self.guarded(|| {
            if !put.is_empty() || !removed.is_empty() {
                let mut t = self.baseline_table()?;
                for (path, rec) in put {
                    t.insert(*path, rec.encode().as_slice())?;
                }
                for path in removed {
                    t.remove(*path)?;
                }
            }
            let mut opened = self.table(OPENED)?;
            for path in touched {
                opened.remove(*path)?;
            }
            drop(opened);
            if locks {
                let mut t = self.table(LOCAL_LOCKS)?;
                for path in touched {
                    t.remove(*path)?;
                }
            }
            Ok(())
        })
    }

    pub fn remove_baseline(&self, path: &str) -> Result<()> {
        self.guarded(|| {
            self.baseline_table()?.remove(path)?;
            Ok(())
        })
    }

    pub fn put_opened(&self, path: &str, rec: &OpenedRecord) -> Result<()> {
        self.put_opened_many([(path, rec.clone())])
    }

    /// Many opened records with the table opened once (an `add` of a
    /// 13,000-file tree).
    pub fn put_opened_many<'p>(
        &self,
        records: impl IntoIterator<Item = (&'p str, OpenedRecord)>,
    ) -> Result<()> {
        self.guarded(|| {
            let mut t = self.table(OPENED)?;
            for (path, rec) in records {
                t.insert(path, rec.encode().as_slice())?;
            }
            Ok(())
        })
    }

    pub fn remove_opened(&self, path: &str) -> Result<()> {
        self.guarded(|| {
            self.table(OPENED)?.remove(path)?;
            Ok(())
        })
    }

    pub fn put_pending(&self, op: &OperationId, rec: &PendingSubmit) -> Result<()> {
        self.guarded(|| {
            self.table(PENDING)?
                .insert(&op.0, rec.encode().as_slice())?;
            Ok(())
        })
    }

    pub fn remove_pending(&self, op: &OperationId) -> Result<()> {
        self.guarded(|| {
            self.table(PENDING)?.remove(&op.0)?;
            Ok(())
        })
    }

    pub fn put_journal(&self, path: &str, e: &JournalEntry) -> Result<()> {
        self.guarded(|| {
            self.table(JOURNAL)?.insert(path, e.encode().as_slice())?;
            Ok(())
        })
    }

    pub fn remove_journal(&self, path: &str) -> Result<()> {
        self.guarded(|| {
            self.table(JOURNAL)?.remove(path)?;
            Ok(())
        })
    }

    /// Remove every journal row (after the watermark moved).
    pub fn clear_journal(&self) -> Result<()> {
        self.guarded(|| {
            let mut t = self.table(JOURNAL)?;
            t.retain(|_, _| false)?;
            Ok(())
        })
    }

    /// A deferred row with a target drops the path's record of how the
    /// server removed it (`crate::their_moves`): it no longer describes it.
    pub fn put_deferred(&self, path: &str, e: &JournalEntry) -> Result<()> {
        self.guarded(|| {
            self.table(DEFERRED)?.insert(path, e.encode().as_slice())?;
            if e.target.is_some() {
                self.table(META)?
                    .remove(crate::their_moves::key(path).as_str())?;
            }
            Ok(())
        })
    }

    /// The path's record of how the server removed it goes with the row.
    pub fn remove_deferred(&self, path: &str) -> Result<()> {
        self.guarded(|| {
            self.table(DEFERRED)?.remove(path)?;
            self.table(META)?
                .remove(crate::their_moves::key(path).as_str())?;
            Ok(())
        })
    }

    pub fn put_local_lock(&self, path: &str, generation: u64) -> Result<()> {
        self.guarded(|| {
            self.table(LOCAL_LOCKS)?.insert(path, generation)?;
            Ok(())
        })
    }

    pub fn remove_local_lock(&self, path: &str) -> Result<()> {
        self.guarded(|| {
            self.table(LOCAL_LOCKS)?.remove(path)?;
            Ok(())
        })
    }

    pub fn put_workflow(&self, key: &str, value: &[u8]) -> Result<()> {
        self.guarded(|| {
            self.table(WORKFLOWS)?.insert(key, value)?;
            Ok(())
        })
    }

    pub fn remove_workflow(&self, key: &str) -> Result<()> {
        self.guarded(|| {
            self.table(WORKFLOWS)?.remove(key)?;
            Ok(())
        })
    }

    /// Publish every change of this transaction durably.
    pub fn commit(self) -> Result<()> {
        let path = self.path.clone();
        let tx = self.tx;
        guarded(&path, || Ok(tx.commit()?))
    }
}

/// A sample binding for tests of this crate.
#[cfg(test)]
pub(crate) fn tests_meta() -> WorkspaceMeta {
    tests::meta()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{Fingerprint, OpenedAction};

    pub(crate) fn meta() -> WorkspaceMeta {
        WorkspaceMeta {
            workspace_id: WorkspaceId([1; 16]),
            repository_id: RepositoryId([2; 16]),
            branch_id: BranchId([3; 16]),
            incarnation: [4; 16],
            repository_name: "game".into(),
            server: "scribe://127.0.0.1:7777".into(),
            author: "ada".into(),
            view: vec![],
            tags: vec![],
            readonly: true,
            transfer_compression: true,
            synced: 0,
        }
    }

    fn base() -> BaselineRecord {
        BaselineRecord {
            incarnation: [4; 16],
            manifest: scribe_format::ManifestId([5; 32]),
            content: scribe_format::FileContentId([6; 32]),
            size: 7,
            mode: 0,
            change: 8,
            fingerprint: Fingerprint::default(),
        }
    }

    #[test]
    fn baseline_paths_under_a_prefix_skip_neighbours_that_sort_between() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::create(dir.path(), &meta()).unwrap();
        let base = base();
        let all = ["a", "a-b", "a.c", "a/x", "a/y/z", "ab", "b/a"];
        let tx = ws.write().unwrap();
        for p in all {
            tx.put_baseline(p, &base).unwrap();
        }
        tx.commit().unwrap();
        let read = ws.read().unwrap();
        let under = |p: &str| read.baseline_paths_under(p).unwrap();
        assert_eq!(under("a"), ["a", "a/x", "a/y/z"]);
        assert_eq!(under("a/y"), ["a/y/z"]);
        assert_eq!(under("a-b"), ["a-b"]);
        assert_eq!(under("b"), ["b/a"]);
        assert_eq!(under(""), all);
        assert!(under("c").is_empty());
        assert!(under("a/x/deeper").is_empty());
    }

    #[test]
    fn create_open_and_round_trip_rows() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        {
            let ws = Workspace::create(root, &meta()).unwrap();
            assert_eq!(ws.meta().unwrap(), meta());
            let tx = ws.write().unwrap();
            let base = base();
            tx.put_baseline("art/b", &base).unwrap();
            tx.put_baseline("art/a", &base).unwrap();
            tx.put_opened(
                "art/a",
                &OpenedRecord {
                    action: OpenedAction::Edit,
                    opened_ms: 1,
                    needs_reconcile: false,
                    moved_from: None,
                },
            )
            .unwrap();
            tx.put_local_lock("art/a", 3).unwrap();
            tx.put_workflow("move/01", b"x").unwrap();
            tx.put_workflow("move/02", b"y").unwrap();
            tx.put_workflow("sync-frontier", b"z").unwrap();
            tx.commit().unwrap();
        }
        assert!(
            std::fs::read_to_string(root.join(".scribe/_state/SCRIBE_FORMAT"))
                .unwrap()
                .contains("kind = workspace")
        );
        let ws = Workspace::open(root).unwrap();
        let r = ws.read().unwrap();
        let paths: Vec<String> = r.baselines().unwrap().into_iter().map(|(p, _)| p).collect();
        assert_eq!(paths, vec!["art/a", "art/b"]);
        assert_eq!(r.opened_all().unwrap().len(), 1);
        assert_eq!(r.local_lock("art/a").unwrap(), Some(3));
        assert_eq!(r.workflows_with_prefix("move/").unwrap().len(), 2);
        assert_eq!(Workspace::find(&root.join("art")).unwrap(), root);
    }

    #[test]
    fn second_opener_is_refused_while_the_lock_is_held() {
        let dir = tempfile::tempdir().unwrap();
        let _ws = Workspace::create(dir.path(), &meta()).unwrap();
        match Workspace::open(dir.path()) {
            Err(WorkspaceError::Busy { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("expected Busy, got {other:?}"),
        }
    }

    #[test]
    fn refuses_unknown_schema_and_required_features() {
        let dir = tempfile::tempdir().unwrap();
        drop(Workspace::create(dir.path(), &meta()).unwrap());
        let desc = dir.path().join(".scribe/_state/SCRIBE_FORMAT");
        let text = std::fs::read_to_string(&desc).unwrap();
        std::fs::write(&desc, text.replace("schema = 2", "schema = 3")).unwrap();
        let err = Workspace::open(dir.path()).err();
        assert!(
            matches!(
                err,
                Some(WorkspaceError::UnsupportedSchema { found: 3, .. })
            ),
            "{err:?}"
        );
        // The message says who wrote it and what to do, and names no
        // server command.
        let message = err.unwrap().to_string();
        assert!(
            message.contains("a newer scribe wrote this workspace"),
            "{message}"
        );
        assert!(message.contains("create a new workspace"), "{message}");
        assert!(!message.contains("scribe-server"), "{message}");
        std::fs::write(&desc, text.replace("schema = 2", "schema = 1")).unwrap();
        let message = Workspace::open(dir.path()).err().unwrap().to_string();
        assert!(
            message.contains("an older scribe wrote this workspace"),
            "{message}"
        );
        std::fs::write(&desc, format!("{text}required-features = teleport\n")).unwrap();
        assert!(matches!(
            Workspace::open(dir.path()),
            Err(WorkspaceError::Descriptor { .. })
        ));
    }

    /// A cache prune killed in the middle of its swap (the old cache
    /// renamed away, the replacement not yet in place) is completed by the
    /// next `cache()`: only the kept objects, nothing lost of them.
    #[test]
    fn a_cache_prune_killed_mid_swap_is_completed_by_the_next_open() {
        use scribe_objects::{CompactFailpoint, CompactOptions};
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::create(dir.path(), &meta()).unwrap();
        let (keep, drop_) = (b"keep me".as_slice(), b"the server has me".as_slice());
        let (kid, did) = {
            let cache = ws.cache().unwrap();
            let b = cache.batch();
            let kid = b.put(scribe_format::ObjectKind::Chunk, keep).unwrap();
            let did = b.put(scribe_format::ObjectKind::Chunk, drop_).unwrap();
            b.commit().unwrap();
            (kid, did)
        };
        let err = scribe_objects::compact(
            ws.state_dir().join(CACHE_DIR),
            [kid],
            CACHE_PRUNE_CONTEXT,
            &CompactOptions {
                failpoint: Some(CompactFailpoint::AfterRenameToPrevious),
                ..CompactOptions::default()
            },
        );
        assert!(err.is_err(), "the failpoint stops the swap");
        // The cache directory itself is gone until the swap completes.
        assert!(!ws.state_dir().join(CACHE_DIR).exists());
        let cache = ws.cache().unwrap();
        assert_eq!(cache.get(&kid).unwrap(), keep);
        assert!(!cache.contains(&did).unwrap());
        assert!(!ws
            .state_dir()
            .join(format!("{CACHE_DIR}.compaction-ready"))
            .exists());
        assert!(ws.cache_bytes().unwrap() > 0);
    }

    #[test]
    fn not_a_workspace_and_already_one() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            Workspace::find(dir.path()),
            Err(WorkspaceError::NotAWorkspace { .. })
        ));
        drop(Workspace::create(dir.path(), &meta()).unwrap());
        assert!(matches!(
            Workspace::create(dir.path(), &meta()),
            Err(WorkspaceError::AlreadyAWorkspace { .. })
        ));
    }

    #[test]
    fn cache_is_created_on_first_use_then_reopened() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::create(dir.path(), &meta()).unwrap();
        let cache_dir = dir.path().join(".scribe/_state/cache");
        assert!(!cache_dir.join("SCRIBE_FORMAT").exists());
        let id = {
            let cache = ws.cache().unwrap();
            let batch = cache.batch();
            let id = batch
                .put(scribe_format::ObjectKind::Chunk, b"cached")
                .unwrap();
            batch.commit().unwrap();
            id
        };
        assert!(cache_dir.join("SCRIBE_FORMAT").exists());
        // The second call opens the same store instead of creating one.
        assert_eq!(ws.cache().unwrap().get(&id).unwrap(), b"cached");
    }

    #[test]
    fn cache_refusals_are_workspace_errors() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::create(dir.path(), &meta()).unwrap();
        drop(ws.cache().unwrap());
        let desc = dir.path().join(".scribe/_state/cache/SCRIBE_FORMAT");
        let text = std::fs::read_to_string(&desc).unwrap();
        // Another scribe's cache: what to do, and no server command.
        std::fs::write(&desc, text.replace("layout = 1", "layout = 9")).unwrap();
        let err = ws.cache().unwrap_err();
        assert!(
            matches!(&err, WorkspaceError::UnsupportedCache { found, .. } if found == "9"),
            "{err:?}"
        );
        let message = err.to_string();
        assert!(message.contains("create a new workspace"), "{message}");
        assert!(!message.contains("scribe-server"), "{message}");
        // Anything else keeps the store's error as its cause.
        std::fs::write(&desc, "not a descriptor").unwrap();
        let err = ws.cache().unwrap_err();
        assert!(
            matches!(
                &err,
                WorkspaceError::Cache(scribe_objects::StoreError::Descriptor { .. })
            ),
            "{err:?}"
        );
        assert!(err.to_string().starts_with("workspace cache: "), "{err}");
    }

    #[test]
    fn tmp_is_cleaned_at_open() {
        let dir = tempfile::tempdir().unwrap();
        drop(Workspace::create(dir.path(), &meta()).unwrap());
        let part = dir.path().join(".scribe/_state/tmp/abc-0-1.part");
        std::fs::write(&part, b"partial").unwrap();
        drop(Workspace::open(dir.path()).unwrap());
        assert!(!part.exists());
    }
}

#[cfg(test)]
#[path = "state_damage_tests.rs"]
mod damage_tests;

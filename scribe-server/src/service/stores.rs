//! Every repository's `scribe_objects::ObjectStore` at
//! `repos/<id>/objects/`, shared by metadata (through
//! `scribe_metadata::StoreObjects`, the one adapter) and object transfer.
//!
//! `DataRoot::create_repository` prepares `objects/` but does not create a
//! store there yet; the factory creates one on first open when the
//! directory holds no store descriptor, clearing what an interrupted
//! creation left (see `docs/server.md`).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use scribe_format::{ErrorCode, ObjectId, RepositoryId};
use scribe_metadata::objects::{CommitSink, ObjectPresence};
use scribe_metadata::root::ObjectsFactory;
use scribe_metadata::{MetadataError, Objects, StoreObjects};
use scribe_objects::{ObjectStore, StoreError, StoreOptions};

/// The registry code of an object-store failure.
pub fn store_code(e: &StoreError) -> ErrorCode {
    match e {
        StoreError::NotFound { .. } => ErrorCode::NotFound,
        StoreError::InvalidInput { .. } => ErrorCode::Malformed,
        StoreError::UnexpectedVersion { .. } => ErrorCode::UnsupportedVersion,
        StoreError::UnsupportedFeature { .. } => ErrorCode::UnsupportedFeature,
        StoreError::AlreadyExists { .. } => ErrorCode::AlreadyExists,
        StoreError::CorruptObject { .. }
        | StoreError::CorruptLocatorRow { .. }
        | StoreError::CorruptPack { .. }
        | StoreError::CorruptLoose { .. }
        | StoreError::CorruptManifest { .. } => ErrorCode::Corrupt,
        _ => ErrorCode::Internal,
    }
}

fn objects_err(e: StoreError) -> MetadataError {
    MetadataError::Objects(e.to_string())
}

/// Open (creating when absent) the store at `dir`.
pub fn open_or_create(dir: &Path) -> Result<ObjectStore, StoreError> {
    if dir.join("SCRIBE_FORMAT").exists() {
        return ObjectStore::open(dir);
    }
    // `ObjectStore::create` writes its descriptor last: without one, an
    // interrupted creation left files that never held an object.
    let io = |path: std::path::PathBuf| move |source| StoreError::Io { path, source };
    for sub in ["locator.redb", "packs", "loose", "staging"] {
        let p = dir.join(sub);
        if p.is_dir() {
            std::fs::remove_dir_all(&p).map_err(io(p.clone()))?;
        } else if p.exists() {
            std::fs::remove_file(&p).map_err(io(p.clone()))?;
        }
    }
    ObjectStore::create(dir, StoreOptions::default())
}

/// Where objects the local store lacks may still be (the S3 tier, when
/// the local store is a cache: `crate::tier`).
pub trait Fallback: Send + Sync {
    /// Whether `id` of `repo` can be fetched.
    fn has(&self, repo: RepositoryId, id: &ObjectId) -> bool;
    /// `id`'s bytes, checked against `id`; `None` when it is not there.
    fn fetch(&self, repo: RepositoryId, id: &ObjectId) -> Result<Option<Vec<u8>>, String>;
}

/// Put `ids` the local `store` lacks back into it from `fallback`. Ids
/// nobody has are left out (the caller reports them missing).
pub fn fault_in(
    fallback: &dyn Fallback,
    repo: RepositoryId,
    store: &ObjectStore,
    ids: &[ObjectId],
) -> Result<(), StoreError> {
    let missing = store.missing(ids)?;
    if missing.is_empty() {
        return Ok(());
    }
    let batch = store.batch();
    for id in &missing {
        match fallback.fetch(repo, id) {
            Ok(Some(bytes)) => {
                batch.put_healing(*id, &bytes)?;
            }
            Ok(None) => {}
            Err(detail) => {
                return Err(StoreError::Io {
                    path: std::path::PathBuf::from(format!("tier:{id}")),
                    source: std::io::Error::other(detail),
                })
            }
        }
    }
    batch.commit()?;
    Ok(())
}

/// Metadata's hooks over a local store backed by a [`Fallback`]: an object
/// the local store lacks is present if the fallback has it, and reading
/// it puts it back into the local store first.
struct Tiered {
    local: StoreObjects,
    repo: RepositoryId,
    fallback: Arc<dyn Fallback>,
}

impl Tiered {
    fn fault(&self, id: &ObjectId) -> scribe_metadata::Result<()> {
        fault_in(
            &*self.fallback,
            self.repo,
            &self.local.0,
            std::slice::from_ref(id),
        )
        .map_err(objects_err)
    }
}

impl ObjectPresence for Tiered {
    fn contains(&self, id: &ObjectId) -> scribe_metadata::Result<bool> {
        Ok(self.local.contains(id)? || self.fallback.has(self.repo, id))
    }

    fn missing(&self, ids: &[ObjectId]) -> scribe_metadata::Result<Vec<ObjectId>> {
        let mut out = self.local.missing(ids)?;
        out.retain(|id| !self.fallback.has(self.repo, id));
        Ok(out)
    }

    fn read(&self, id: &ObjectId) -> scribe_metadata::Result<Option<Vec<u8>>> {
        self.fault(id)?;
        self.local.read(id)
    }

    fn read_for_check(&self, id: &ObjectId) -> scribe_metadata::Result<Option<Vec<u8>>> {
        self.fault(id)?;
        self.local.read_for_check(id)
    }
}

impl CommitSink for Tiered {
    fn publish_commit(&self, id: &ObjectId, envelope: &[u8]) -> scribe_metadata::Result<()> {
        self.local.publish_commit(id, envelope)
    }

    fn read_commit(&self, id: &ObjectId) -> scribe_metadata::Result<Option<Vec<u8>>> {
        self.fault(id)?;
        self.local.read_commit(id)
    }
}

/// Every opened repository's store, shared by metadata's hooks and the
/// object-transfer operations.
#[derive(Clone, Default)]
pub struct StoreRegistry {
    map: Arc<Mutex<HashMap<RepositoryId, Arc<ObjectStore>>>>,
    fallback: Arc<std::sync::RwLock<Option<Arc<dyn Fallback>>>>,
}

impl StoreRegistry {
    /// The factory handed to `DataRoot::set_objects_factory`.
    pub fn factory(&self) -> Box<ObjectsFactory> {
        let map = self.map.clone();
        let fallback = self.fallback.clone();
        Box::new(
            move |dir: &Path, id: RepositoryId| -> scribe_metadata::Result<Objects> {
                let mut m = map
                    .lock()
                    .map_err(|_| MetadataError::Objects("store registry poisoned".into()))?;
                let store = match m.get(&id) {
                    Some(s) => s.clone(),
                    None => {
                        let s = Arc::new(open_or_create(dir).map_err(objects_err)?);
                        m.insert(id, s.clone());
                        s
                    }
                };
                let fb = fallback.read().ok().and_then(|f| f.clone());
                let hooks: Objects = match fb {
                    Some(fallback) => Arc::new(Tiered {
                        local: StoreObjects(store),
                        repo: id,
                        fallback,
                    }),
                    None => Arc::new(StoreObjects(store)),
                };
                Ok(hooks)
            },
        )
    }

    /// Back the stores with `fallback` (repositories opened from now on).
    pub fn set_fallback(&self, fallback: Arc<dyn Fallback>) {
        if let Ok(mut f) = self.fallback.write() {
            *f = Some(fallback);
        }
    }

    /// The fallback, if any.
    pub fn fallback(&self) -> Option<Arc<dyn Fallback>> {
        self.fallback.read().ok().and_then(|f| f.clone())
    }

    /// Forget every open store (after a storage failure): the next open
    /// of a repository opens its store again.
    pub fn clear(&self) {
        if let Ok(mut m) = self.map.lock() {
            m.clear();
        }
    }

    /// The store of an opened repository.
    pub fn get(&self, id: &RepositoryId) -> Option<Arc<ObjectStore>> {
        self.map.lock().ok()?.get(id).cloned()
    }
}

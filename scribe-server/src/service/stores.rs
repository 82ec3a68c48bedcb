//! Every repository's `scribe_objects::ObjectStore` at
//! `repos/<id>/objects/`, shared by metadata (through
//! `scribe_metadata::StoreObjects`, the one adapter) and object transfer.
//!
//! `DataRoot::create_repository` prepares `objects/` but does not create a
//! store there yet; the factory creates one on first open when the
//! directory holds no store descriptor, clearing what an interrupted
//! creation left (see `docs/server.md`).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

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
    // A compaction's swap in progress (its marker beside the store) may
    // have renamed the store away: never create an empty one in its place;
    // open refuses, naming the marker.
    let mut marker = dir.as_os_str().to_owned();
    marker.push(".compaction-ready");
    if dir.join("SCRIBE_FORMAT").exists() || Path::new(&marker).exists() {
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
    /// `id`'s payload length when it is known without reading the object
    /// (a reply with room for some objects only does not read one that
    /// cannot fit); `None` when not known.
    fn len(&self, _repo: RepositoryId, _id: &ObjectId) -> Option<u64> {
        None
    }
    /// A reader asked for `ids` and will read them next, in this order
    /// (the rest of a request whose answer could not hold them): a tier
    /// may start fetching them. The default does nothing.
    fn hint(&self, _repo: RepositoryId, _ids: &[ObjectId], _store: &Arc<ObjectStore>) {}
    /// `id`'s bytes, checked against `id`; `None` when it is not there.
    fn fetch(&self, repo: RepositoryId, id: &ObjectId) -> Result<Option<Vec<u8>>, String>;
    /// For a read the local `store` cannot answer: `id`'s bytes, checked
    /// against `id`, to answer from; `None` when it is not there. The
    /// default writes them back into `store` before answering.
    fn read(
        &self,
        repo: RepositoryId,
        id: &ObjectId,
        store: &Arc<ObjectStore>,
    ) -> Result<Option<bytes::Bytes>, String> {
        let Some(bytes) = self.fetch(repo, id)? else {
            return Ok(None);
        };
        let batch = store.batch();
        batch.put_healing(*id, &bytes).map_err(|e| e.to_string())?;
        batch.commit().map_err(|e| e.to_string())?;
        Ok(Some(bytes::Bytes::from(bytes)))
    }
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
/// it puts it back into the local store first. The local store is looked
/// up in the registry at every call (never held), so the tier can close
/// it while it trims the cache ([`StoreRegistry::exclusive`]).
struct Tiered {
    registry: StoreRegistry,
    repo: RepositoryId,
    fallback: Arc<dyn Fallback>,
}

impl Tiered {
    fn local(&self) -> scribe_metadata::Result<StoreObjects> {
        self.registry
            .get(&self.repo)
            .map(StoreObjects)
            .ok_or_else(|| {
                MetadataError::Objects(format!("repository {} has no object store", self.repo))
            })
    }

    fn fault(&self, local: &StoreObjects, id: &ObjectId) -> scribe_metadata::Result<()> {
        self.registry.touch(self.repo, std::slice::from_ref(id));
        fault_in(
            &*self.fallback,
            self.repo,
            &local.0,
            std::slice::from_ref(id),
        )
        .map_err(objects_err)
    }
}

impl ObjectPresence for Tiered {
    fn contains(&self, id: &ObjectId) -> scribe_metadata::Result<bool> {
        Ok(self.local()?.contains(id)? || self.fallback.has(self.repo, id))
    }

    fn missing(&self, ids: &[ObjectId]) -> scribe_metadata::Result<Vec<ObjectId>> {
        let mut out = self.local()?.missing(ids)?;
        out.retain(|id| !self.fallback.has(self.repo, id));
        Ok(out)
    }

    fn read(&self, id: &ObjectId) -> scribe_metadata::Result<Option<Vec<u8>>> {
        let local = self.local()?;
        self.fault(&local, id)?;
        local.read(id)
    }

    fn read_for_check(&self, id: &ObjectId) -> scribe_metadata::Result<Option<Vec<u8>>> {
        let local = self.local()?;
        self.fault(&local, id)?;
        local.read_for_check(id)
    }

    fn payload_len(&self, id: &ObjectId) -> scribe_metadata::Result<Option<u64>> {
        let local = self.local()?;
        self.fault(&local, id)?;
        local.payload_len(id)
    }
}

impl CommitSink for Tiered {
    fn publish_commit(&self, id: &ObjectId, envelope: &[u8]) -> scribe_metadata::Result<()> {
        self.local()?.publish_commit(id, envelope)
    }

    fn publish_with(
        &self,
        objects: &[(ObjectId, &[u8])],
        envelopes: &[(ObjectId, &[u8])],
    ) -> scribe_metadata::Result<()> {
        self.local()?.publish_with(objects, envelopes)
    }

    fn read_commit(&self, id: &ObjectId) -> scribe_metadata::Result<Option<Vec<u8>>> {
        let local = self.local()?;
        self.fault(&local, id)?;
        local.read_commit(id)
    }
}

#[derive(Default)]
struct Open {
    stores: HashMap<RepositoryId, Arc<ObjectStore>>,
    /// Where each repository's store is (recorded by the factory), so a
    /// store closed by [`StoreRegistry::exclusive`] opens again on demand.
    dirs: HashMap<RepositoryId, PathBuf>,
    /// Stores closed for a cache trim: lookups wait.
    paused: HashSet<RepositoryId>,
}

/// Every opened repository's store, shared by metadata's hooks and the
/// object-transfer operations.
#[derive(Clone, Default)]
pub struct StoreRegistry {
    map: Arc<(Mutex<Open>, Condvar)>,
    fallback: Arc<std::sync::RwLock<Option<Arc<dyn Fallback>>>>,
    /// Last use of each object read through the service (a logical clock),
    /// for the tier's least-recently-used cache trim.
    touched: Arc<Mutex<Touched>>,
}

/// A logical clock and the last tick each object was used at.
type Touched = (u64, HashMap<(RepositoryId, ObjectId), u64>);

impl StoreRegistry {
    fn lock(&self) -> Result<MutexGuard<'_, Open>, MetadataError> {
        self.map
            .0
            .lock()
            .map_err(|_| MetadataError::Objects("store registry poisoned".into()))
    }

    /// Wait while `id`'s store is closed for a trim.
    fn unpaused<'a>(
        &'a self,
        mut m: MutexGuard<'a, Open>,
        id: &RepositoryId,
    ) -> MutexGuard<'a, Open> {
        while m.paused.contains(id) {
            m = match self.map.1.wait(m) {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
        }
        m
    }

    /// The factory handed to `DataRoot::set_objects_factory`.
    pub fn factory(&self) -> Box<ObjectsFactory> {
        let reg = self.clone();
        Box::new(
            move |dir: &Path, id: RepositoryId| -> scribe_metadata::Result<Objects> {
                let m = reg.lock()?;
                let mut m = reg.unpaused(m, &id);
                m.dirs.insert(id, dir.to_path_buf());
                let store = match m.stores.get(&id) {
                    Some(s) => s.clone(),
                    None => {
                        let s = Arc::new(open_or_create(dir).map_err(objects_err)?);
                        m.stores.insert(id, s.clone());
                        s
                    }
                };
                drop(m);
                let fb = reg.fallback.read().ok().and_then(|f| f.clone());
                let hooks: Objects = match fb {
                    Some(fallback) => Arc::new(Tiered {
                        registry: reg.clone(),
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
        if let Ok(mut m) = self.map.0.lock() {
            m.stores.clear();
        }
    }

    /// The store of an opened repository (opened again if a trim closed
    /// it; waits while a trim runs).
    pub fn get(&self, id: &RepositoryId) -> Option<Arc<ObjectStore>> {
        let m = self.map.0.lock().ok()?;
        let mut m = self.unpaused(m, id);
        if let Some(s) = m.stores.get(id) {
            return Some(s.clone());
        }
        let dir = m.dirs.get(id)?.clone();
        match open_or_create(&dir) {
            Ok(s) => {
                let s = Arc::new(s);
                m.stores.insert(*id, s.clone());
                Some(s)
            }
            Err(e) => {
                eprintln!(
                    "scribe-server: cannot open the store {}: {e}",
                    dir.display()
                );
                None
            }
        }
    }

    /// Record that `ids` of `repo` were just used.
    pub fn touch(&self, repo: RepositoryId, ids: &[ObjectId]) {
        if let Ok(mut t) = self.touched.lock() {
            t.0 += 1;
            let now = t.0;
            for id in ids {
                t.1.insert((repo, *id), now);
            }
        }
    }

    /// When each of `repo`'s used objects was last used (larger is later);
    /// entries of ids not in `keep` are forgotten.
    pub fn last_used(
        &self,
        repo: RepositoryId,
        keep: &dyn Fn(&ObjectId) -> bool,
    ) -> HashMap<ObjectId, u64> {
        let Ok(mut t) = self.touched.lock() else {
            return HashMap::new();
        };
        t.1.retain(|(r, id), _| *r != repo || keep(id));
        t.1.iter()
            .filter(|((r, _), _)| *r == repo)
            .map(|((_, id), at)| (*id, *at))
            .collect()
    }

    /// Close `repo`'s store and run `f` on its directory while nothing
    /// uses it: lookups of it wait meanwhile. Waits up to `patience` for
    /// the requests (and staged uploads) holding the store to let it go;
    /// `None` (nothing run) if they do not.
    pub fn exclusive<R>(
        &self,
        repo: RepositoryId,
        patience: std::time::Duration,
        f: impl FnOnce(&Path) -> R,
    ) -> Option<R> {
        let deadline = std::time::Instant::now() + patience;
        let mut m = self.lock().ok()?;
        m = self.unpaused(m, &repo);
        let dir = m.dirs.get(&repo)?.clone();
        m.paused.insert(repo);
        loop {
            let held = m.stores.get(&repo).map_or(1, Arc::strong_count);
            if held <= 1 {
                break;
            }
            if std::time::Instant::now() >= deadline {
                m.paused.remove(&repo);
                self.map.1.notify_all();
                return None;
            }
            m = match self
                .map
                .1
                .wait_timeout(m, std::time::Duration::from_millis(20))
            {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
        let store = m.stores.remove(&repo);
        drop(m);
        drop(store);
        let out = f(&dir);
        if let Ok(mut m) = self.map.0.lock() {
            m.paused.remove(&repo);
        }
        self.map.1.notify_all();
        Some(out)
    }
}

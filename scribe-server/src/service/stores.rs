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

use scribe_format::{ErrorCode, RepositoryId};
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

/// Every opened repository's store, shared by metadata's hooks and the
/// object-transfer operations.
#[derive(Clone, Default)]
pub struct StoreRegistry {
    map: Arc<Mutex<HashMap<RepositoryId, Arc<ObjectStore>>>>,
}

impl StoreRegistry {
    /// The factory handed to `DataRoot::set_objects_factory`.
    pub fn factory(&self) -> Box<ObjectsFactory> {
        let map = self.map.clone();
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
                let hooks: Objects = Arc::new(StoreObjects(store));
                Ok(hooks)
            },
        )
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

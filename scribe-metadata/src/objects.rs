//! The object-store boundary of acceptance and `doctor`.
//!
//! Acceptance checks that every manifest (and the change set) a submission
//! names is present, publishes the commit envelope durably *before* its
//! metadata transaction, and `doctor` reads every envelope back to re-hash
//! it. All three go through [`ObjectHooks`], so the server plugs in
//! `scribe_objects::ObjectStore` (see `docs/metadata.md`, "Object hooks").
//!
//! [`StoreObjects`] adapts `scribe_objects::ObjectStore` (the default of
//! [`crate::DataRoot`], and what the server's store registry hands out);
//! [`DirObjects`] (one flushed file per object) and [`MemoryObjects`] serve
//! tests and benchmarks.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use scribe_format::{ObjectId, ObjectKind};

use crate::error::{MetadataError, Result};

/// Presence of objects in the repository's store.
pub trait ObjectPresence: Send + Sync {
    /// Whether the store holds `id` durably.
    fn contains(&self, id: &ObjectId) -> Result<bool>;

    /// The subset of `ids` the store lacks, in input order.
    fn missing(&self, ids: &[ObjectId]) -> Result<Vec<ObjectId>> {
        let mut out = Vec::new();
        for id in ids {
            if !self.contains(id)? {
                out.push(*id);
            }
        }
        Ok(out)
    }

    /// The original payload of a stored object; `None` when it is absent.
    /// A verifying store refuses damaged bytes with an error; callers that
    /// check manifests also re-check the identity themselves.
    fn read(&self, id: &ObjectId) -> Result<Option<Vec<u8>>>;

    /// Whether acceptance and `doctor` read and check the manifests (and
    /// chunks) a change names. Only a benchmark store that answers
    /// "present" for everything without holding bytes says no.
    fn checks_manifests(&self) -> bool {
        true
    }

    /// `id`'s bytes for a check that hashes them itself (the deep
    /// manifest check): a store may skip its own identity check here.
    fn read_for_check(&self, id: &ObjectId) -> Result<Option<Vec<u8>>> {
        self.read(id)
    }

    /// `id`'s original payload length; `None` when it is absent. A store
    /// may answer from its own records without reading the bytes (the
    /// manifest check of a one-chunk file, whose chunk was verified when
    /// it was uploaded, needs nothing more).
    fn payload_len(&self, id: &ObjectId) -> Result<Option<u64>> {
        Ok(self.read_for_check(id)?.map(|b| b.len() as u64))
    }
}

/// Durable publication and read-back of commit envelopes (kind 4).
pub trait CommitSink: Send + Sync {
    /// Store `envelope` (the original v5 envelope bytes; the store wraps
    /// them in an object envelope) under `id` and return only once durable.
    /// Publishing an identity that is already present is a no-op.
    fn publish_commit(&self, id: &ObjectId, envelope: &[u8]) -> Result<()>;

    /// The original bytes of a stored commit object, if present.
    fn read_commit(&self, id: &ObjectId) -> Result<Option<Vec<u8>>>;

    /// Make `objects` (original payloads a submission carried inline,
    /// identities already verified) and the commit `envelopes` durable,
    /// in one batch where the store can (one pack flush, one locator
    /// commit); return only once all are durable. A store that cannot take
    /// objects this way refuses any (the service never sends it some).
    fn publish_with(
        &self,
        objects: &[(ObjectId, &[u8])],
        envelopes: &[(ObjectId, &[u8])],
    ) -> Result<()> {
        if !objects.is_empty() {
            return Err(MetadataError::Objects(
                "this object store does not take objects carried by a submission".into(),
            ));
        }
        for (id, bytes) in envelopes {
            self.publish_commit(id, bytes)?;
        }
        Ok(())
    }
}

/// Everything metadata needs from the object store.
pub trait ObjectHooks: ObjectPresence + CommitSink {}
impl<T: ObjectPresence + CommitSink> ObjectHooks for T {}

/// Shared handle.
pub type Objects = Arc<dyn ObjectHooks>;

/// Objects in memory (tests).
#[derive(Default)]
pub struct MemoryObjects {
    map: Mutex<HashMap<ObjectId, Vec<u8>>>,
    all_present: std::sync::atomic::AtomicBool,
}

impl MemoryObjects {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Record an object as present (tests stand in for uploads).
    pub fn insert(&self, id: ObjectId, bytes: Vec<u8>) {
        if let Ok(mut m) = self.map.lock() {
            m.insert(id, bytes);
        }
    }

    /// Replace stored bytes without checking identity (corruption tests).
    pub fn overwrite(&self, id: ObjectId, bytes: Vec<u8>) {
        self.insert(id, bytes);
    }

    /// Forget every object and answer "present" for any id from now on
    /// (benchmarks that measure metadata memory alone).
    pub fn clear(&self) {
        if let Ok(mut m) = self.map.lock() {
            *m = HashMap::new();
        }
        self.all_present
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

impl ObjectPresence for MemoryObjects {
    fn contains(&self, id: &ObjectId) -> Result<bool> {
        let m = self
            .map
            .lock()
            .map_err(|_| MetadataError::Objects("poisoned".into()))?;
        Ok(m.contains_key(id) || self.all_present.load(std::sync::atomic::Ordering::Relaxed))
    }

    fn read(&self, id: &ObjectId) -> Result<Option<Vec<u8>>> {
        let m = self
            .map
            .lock()
            .map_err(|_| MetadataError::Objects("poisoned".into()))?;
        Ok(m.get(id).cloned())
    }

    fn checks_manifests(&self) -> bool {
        !self.all_present.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl CommitSink for MemoryObjects {
    fn publish_commit(&self, id: &ObjectId, envelope: &[u8]) -> Result<()> {
        let mut m = self
            .map
            .lock()
            .map_err(|_| MetadataError::Objects("poisoned".into()))?;
        m.entry(*id).or_insert_with(|| envelope.to_vec());
        Ok(())
    }

    fn publish_with(
        &self,
        objects: &[(ObjectId, &[u8])],
        envelopes: &[(ObjectId, &[u8])],
    ) -> Result<()> {
        let mut m = self
            .map
            .lock()
            .map_err(|_| MetadataError::Objects("poisoned".into()))?;
        for (id, bytes) in objects.iter().chain(envelopes) {
            m.entry(*id).or_insert_with(|| bytes.to_vec());
        }
        Ok(())
    }

    fn read_commit(&self, id: &ObjectId) -> Result<Option<Vec<u8>>> {
        let m = self
            .map
            .lock()
            .map_err(|_| MetadataError::Objects("poisoned".into()))?;
        Ok(m.get(id).cloned())
    }
}

/// One flushed file per object, `<dir>/<kind 2 hex><digest hex>` (tests).
pub struct DirObjects {
    dir: PathBuf,
}

impl DirObjects {
    pub fn open(dir: &Path) -> Result<Arc<Self>> {
        std::fs::create_dir_all(dir).map_err(|e| MetadataError::io(dir, e))?;
        Ok(Arc::new(DirObjects {
            dir: dir.to_owned(),
        }))
    }

    fn path(&self, id: &ObjectId) -> PathBuf {
        self.dir
            .join(format!("{:02x}{}", id.kind.byte(), hex::encode(id.digest)))
    }

    /// Store any object (tests stand in for uploads); flushed.
    pub fn put(&self, id: &ObjectId, bytes: &[u8]) -> Result<()> {
        let path = self.path(id);
        if path.exists() {
            return Ok(());
        }
        let tmp = self.dir.join(format!(
            "tmp-{}-{}",
            std::process::id(),
            hex::encode(&id.digest[..8])
        ));
        let mut f = std::fs::File::create(&tmp).map_err(|e| MetadataError::io(&tmp, e))?;
        f.write_all(bytes)
            .and_then(|_| f.sync_all())
            .map_err(|e| MetadataError::io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| MetadataError::io(&path, e))?;
        crate::database_descriptor::sync_dir(&self.dir)
    }

    /// Replace stored bytes without checking identity (corruption tests).
    pub fn overwrite(&self, id: &ObjectId, bytes: &[u8]) -> Result<()> {
        let path = self.path(id);
        std::fs::write(&path, bytes).map_err(|e| MetadataError::io(&path, e))
    }
}

impl ObjectPresence for DirObjects {
    fn contains(&self, id: &ObjectId) -> Result<bool> {
        Ok(self.path(id).exists())
    }

    fn read(&self, id: &ObjectId) -> Result<Option<Vec<u8>>> {
        let path = self.path(id);
        match std::fs::read(&path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(MetadataError::io(&path, e)),
        }
    }
}

impl CommitSink for DirObjects {
    fn publish_commit(&self, id: &ObjectId, envelope: &[u8]) -> Result<()> {
        debug_assert_eq!(id.kind, ObjectKind::Commit);
        self.put(id, envelope)
    }

    fn publish_with(
        &self,
        objects: &[(ObjectId, &[u8])],
        envelopes: &[(ObjectId, &[u8])],
    ) -> Result<()> {
        for (id, bytes) in objects.iter().chain(envelopes) {
            self.put(id, bytes)?;
        }
        Ok(())
    }

    fn read_commit(&self, id: &ObjectId) -> Result<Option<Vec<u8>>> {
        let path = self.path(id);
        match std::fs::read(&path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(MetadataError::io(&path, e)),
        }
    }
}

/// The hooks over a repository's `scribe_objects::ObjectStore`: the one
/// adapter, used by the default factory of [`crate::DataRoot`] and by the
/// server's store registry alike.
pub struct StoreObjects(pub Arc<scribe_objects::ObjectStore>);

fn store_err(e: scribe_objects::StoreError) -> MetadataError {
    MetadataError::Objects(e.to_string())
}

impl ObjectPresence for StoreObjects {
    fn contains(&self, id: &ObjectId) -> Result<bool> {
        self.0.contains(id).map_err(store_err)
    }

    fn missing(&self, ids: &[ObjectId]) -> Result<Vec<ObjectId>> {
        self.0.missing(ids).map_err(store_err)
    }

    fn read_for_check(&self, id: &ObjectId) -> Result<Option<Vec<u8>>> {
        match self.0.get_unverified(id) {
            Ok(b) => Ok(Some(b)),
            Err(scribe_objects::StoreError::NotFound { .. }) => Ok(None),
            Err(e) => Err(store_err(e)),
        }
    }

    fn payload_len(&self, id: &ObjectId) -> Result<Option<u64>> {
        match self.0.payload_len(id) {
            Ok(n) => Ok(Some(n)),
            Err(scribe_objects::StoreError::NotFound { .. }) => Ok(None),
            Err(e) => Err(store_err(e)),
        }
    }

    fn read(&self, id: &ObjectId) -> Result<Option<Vec<u8>>> {
        match self.0.get(id) {
            Ok(b) => Ok(Some(b)),
            Err(scribe_objects::StoreError::NotFound { .. }) => Ok(None),
            Err(e) => Err(store_err(e)),
        }
    }
}

impl CommitSink for StoreObjects {
    fn publish_commit(&self, id: &ObjectId, envelope: &[u8]) -> Result<()> {
        let computed = scribe_format::id::object_identity(id.kind, envelope)
            .map_err(|e| MetadataError::Objects(format!("commit {id}: {e}")))?;
        if &computed != id {
            return Err(MetadataError::Objects(format!(
                "commit envelope hashes to {computed}, not {id}"
            )));
        }
        // One batch: the publication order of section 6.3, durable on return.
        let batch = self.0.batch();
        batch.put_with_id(*id, envelope).map_err(store_err)?;
        batch.commit().map_err(store_err)?;
        Ok(())
    }

    fn publish_with(
        &self,
        objects: &[(ObjectId, &[u8])],
        envelopes: &[(ObjectId, &[u8])],
    ) -> Result<()> {
        for (id, bytes) in envelopes {
            let computed = scribe_format::id::object_identity(id.kind, bytes)
                .map_err(|e| MetadataError::Objects(format!("commit {id}: {e}")))?;
            if &computed != id {
                return Err(MetadataError::Objects(format!(
                    "commit envelope hashes to {computed}, not {id}"
                )));
            }
        }
        // One batch for the lot: one pack flush and one locator commit
        // (section 6.3), durable on return. Inline objects were verified
        // by the service; `put_healing` replaces a damaged stored copy.
        let batch = self.0.batch();
        for (id, bytes) in objects {
            batch.put_healing(*id, bytes).map_err(store_err)?;
        }
        for (id, bytes) in envelopes {
            batch.put_with_id(*id, bytes).map_err(store_err)?;
        }
        batch.commit().map_err(store_err)?;
        Ok(())
    }

    fn read_commit(&self, id: &ObjectId) -> Result<Option<Vec<u8>>> {
        match self.0.get(id) {
            Ok(b) => Ok(Some(b)),
            Err(scribe_objects::StoreError::NotFound { .. }) => Ok(None),
            Err(e) => Err(store_err(e)),
        }
    }
}

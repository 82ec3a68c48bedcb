use std::path::{Path, PathBuf};

use scribe_format::envelope::Compression;
use scribe_objects::{ObjectStore, StoreOptions};

pub use scribe_testkit::noise;

#[allow(dead_code)]
pub struct TestStore {
    pub tmp: tempfile::TempDir,
    pub dir: PathBuf,
}

#[allow(dead_code)]
impl TestStore {
    pub fn new(options: StoreOptions) -> (TestStore, ObjectStore) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("objects");
        let store = ObjectStore::create(&dir, options).unwrap();
        (TestStore { tmp, dir }, store)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }
}

pub fn small_packs() -> StoreOptions {
    StoreOptions {
        small_object_threshold: 4096,
        pack_seal_bytes: 64 * 1024,
        compression: Compression::Lz4,
    }
}

pub fn pack_file(dir: &Path, id: u32) -> PathBuf {
    dir.join("packs").join(format!("{id:08x}.pack"))
}

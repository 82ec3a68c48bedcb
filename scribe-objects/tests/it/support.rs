use std::path::{Path, PathBuf};

use scribe_format::envelope::Compression;
use scribe_objects::{ObjectStore, StoreOptions};

pub fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e3779b97f4a7c15) | 1;
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(n);
    out
}

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

//! The content index (a cache `(size, FileContentId) -> ManifestId` in
//! `locator.redb`): hits return what a full import returns, and every stale
//! or wrong row falls back to a full import with a correct result.

use std::path::Path;

use redb::{Database, ReadableDatabase, TableDefinition};
use scribe_format::{FileContentId, ObjectId};
use scribe_objects::{
    compact, rebuild_locator, CompactContext, CompactOptions, ImportedFile, ObjectStore,
    StoreOptions,
};

use super::support::{noise, TestStore};

const MIB: usize = 1024 * 1024;
const CONTENT: TableDefinition<&[u8; 40], &[u8; 32]> = TableDefinition::new("content_manifests");
const LOCATOR: TableDefinition<&[u8; 33], &[u8]> = TableDefinition::new("locator");

fn key(size: u64, content: &FileContentId) -> [u8; 40] {
    let mut k = [0u8; 40];
    k[..8].copy_from_slice(&size.to_be_bytes());
    k[8..].copy_from_slice(&content.0);
    k
}

/// Edit the closed store's locator database directly (simulated damage).
fn with_locator(dir: &Path, f: impl FnOnce(&redb::WriteTransaction)) {
    let db = Database::open(dir.join("locator.redb")).unwrap();
    let txn = db.begin_write().unwrap();
    f(&txn);
    txn.commit().unwrap();
}

fn content_row(dir: &Path, size: u64, content: &FileContentId) -> Option<[u8; 32]> {
    let db = Database::open(dir.join("locator.redb")).unwrap();
    let txn = db.begin_read().unwrap();
    let t = txn.open_table(CONTENT).unwrap();
    let row = t.get(&key(size, content)).unwrap().map(|v| *v.value());
    row
}

fn check_reconstructs(store: &ObjectStore, t: &TestStore, f: &ImportedFile, data: &[u8]) {
    let out = t.path("reconstructed");
    store.reconstruct(&f.manifest_id, &out).unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), data);
}

fn reopen(t: &TestStore, store: ObjectStore) -> ObjectStore {
    drop(store);
    ObjectStore::open(&t.dir).unwrap()
}

#[test]
fn hit_returns_the_full_import_result_across_reopen() {
    let (t, store) = TestStore::new(StoreOptions::default());
    let data = noise(9 * MIB + 3, 41);
    let src = t.path("a");
    std::fs::write(&src, &data).unwrap();
    let first = store.import_file(&src).unwrap();
    assert!(!first.via_content_index);
    assert!(first.chunks.len() >= 2);
    assert_eq!(store.content_index_len().unwrap(), 1);
    // A freshly opened store (a new process) still has the index.
    let store = reopen(&t, store);
    let again = store.import_file(&src).unwrap();
    assert!(again.via_content_index, "identical content hits the index");
    assert_eq!(again.manifest_id, first.manifest_id);
    assert_eq!(again.chunks, first.chunks);
    assert_eq!(again.content_id, first.content_id);
    assert_eq!(again.new_bytes_stored, 0);
    // import_files takes the same path; a second store without the index
    // produces the same manifest by a full import.
    let many = store.import_files(&[&src]).unwrap();
    assert!(many[0].via_content_index);
    assert_eq!(many[0].manifest_id, first.manifest_id);
    let (t2, other) = TestStore::new(StoreOptions::default());
    let full = other.import_file(&src).unwrap();
    assert!(!full.via_content_index);
    assert_eq!(full.manifest_id, again.manifest_id);
    drop(t2);
    // Files of at most 1 MiB are one chunk and are never indexed.
    let small = t.path("small");
    std::fs::write(&small, noise(MIB, 42)).unwrap();
    store.import_file(&small).unwrap();
    assert!(!store.import_file(&small).unwrap().via_content_index);
    assert_eq!(store.content_index_len().unwrap(), 1);
    check_reconstructs(&store, &t, &again, &data);
    assert!(store.verify().unwrap().is_clean());
}

#[test]
fn modified_content_of_the_same_size_misses() {
    let (t, store) = TestStore::new(StoreOptions::default());
    let mut data = noise(6 * MIB, 43);
    let src = t.path("a");
    std::fs::write(&src, &data).unwrap();
    let first = store.import_file(&src).unwrap();
    data[3 * MIB] ^= 0x55;
    std::fs::write(&src, &data).unwrap();
    let edited = store.import_file(&src).unwrap();
    assert!(!edited.via_content_index);
    assert_ne!(edited.manifest_id, first.manifest_id);
    assert_eq!(edited.content_id, FileContentId::of(&data));
    assert!(edited.new_bytes_stored > 0);
    assert_eq!(store.content_index_len().unwrap(), 2);
    check_reconstructs(&store, &t, &edited, &data);
}

#[test]
fn a_row_naming_a_missing_chunk_falls_back_and_restores_it() {
    let (t, store) = TestStore::new(StoreOptions::default());
    let data = noise(9 * MIB, 44);
    let src = t.path("a");
    std::fs::write(&src, &data).unwrap();
    let first = store.import_file(&src).unwrap();
    drop(store);
    // The chunk's locator row is lost (damage or a collection that kept
    // the row of the index): the row must not be trusted.
    let lost = first.chunks[1].id;
    with_locator(&t.dir, |txn| {
        let mut l = txn.open_table(LOCATOR).unwrap();
        assert!(l
            .remove(&ObjectId::chunk(lost).to_bytes())
            .unwrap()
            .is_some());
    });
    let store = ObjectStore::open(&t.dir).unwrap();
    let again = store.import_file(&src).unwrap();
    assert!(!again.via_content_index);
    assert_eq!(again.manifest_id, first.manifest_id);
    assert!(
        again.new_bytes_stored > 0,
        "the lost chunk is written again"
    );
    assert!(store.contains(&ObjectId::chunk(lost)).unwrap());
    check_reconstructs(&store, &t, &again, &data);
    assert!(store.import_file(&src).unwrap().via_content_index);
}

#[test]
fn rows_naming_absent_or_other_manifests_fall_back_and_heal() {
    let (t, store) = TestStore::new(StoreOptions::default());
    let a = noise(5 * MIB, 45);
    let b = noise(5 * MIB, 46);
    std::fs::write(t.path("a"), &a).unwrap();
    std::fs::write(t.path("b"), &b).unwrap();
    let ia = store.import_file(t.path("a")).unwrap();
    let ib = store.import_file(t.path("b")).unwrap();
    drop(store);
    let size = a.len() as u64;
    // a -> a manifest that does not exist; b -> a's manifest (wrong content).
    with_locator(&t.dir, |txn| {
        let mut c = txn.open_table(CONTENT).unwrap();
        c.insert(&key(size, &ia.content_id), &[7u8; 32]).unwrap();
        c.insert(&key(size, &ib.content_id), &ia.manifest_id.0)
            .unwrap();
    });
    let store = ObjectStore::open(&t.dir).unwrap();
    let ra = store.import_file(t.path("a")).unwrap();
    let rb = store.import_file(t.path("b")).unwrap();
    assert!(!ra.via_content_index && !rb.via_content_index);
    assert_eq!(ra.manifest_id, ia.manifest_id);
    assert_eq!(rb.manifest_id, ib.manifest_id);
    assert_eq!(ra.new_bytes_stored + rb.new_bytes_stored, 0);
    drop(store);
    // The full imports rewrote both rows.
    assert_eq!(
        content_row(&t.dir, size, &ia.content_id),
        Some(ia.manifest_id.0)
    );
    assert_eq!(
        content_row(&t.dir, size, &ib.content_id),
        Some(ib.manifest_id.0)
    );
    let store = ObjectStore::open(&t.dir).unwrap();
    assert!(store.import_file(t.path("b")).unwrap().via_content_index);
    check_reconstructs(&store, &t, &rb, &b);
}

#[test]
fn a_corrupt_manifest_is_not_used_as_a_hit() {
    let (t, store) = TestStore::new(StoreOptions::default());
    let data = noise(4 * MIB, 47);
    let src = t.path("a");
    std::fs::write(&src, &data).unwrap();
    let first = store.import_file(&src).unwrap();
    let moid = ObjectId::manifest(first.manifest_id);
    let Some(scribe_objects::Location::Packed {
        pack,
        offset,
        entry_len,
    }) = store.locate(&moid).unwrap()
    else {
        panic!("manifest is packed")
    };
    drop(store);
    // Flip the last byte of the manifest's envelope in its pack entry.
    let path = super::support::pack_file(&t.dir, pack);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[(offset + entry_len - 1) as usize] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let store = ObjectStore::open(&t.dir).unwrap();
    assert!(store.get(&moid).is_err(), "the manifest is damaged");
    let again = store.import_file(&src).unwrap();
    assert!(
        !again.via_content_index,
        "an unverifiable manifest is a miss"
    );
    assert_eq!(again.manifest_id, first.manifest_id);
}

#[test]
fn compaction_that_drops_a_manifest_leaves_no_usable_row() {
    let (t, store) = TestStore::new(StoreOptions::default());
    let keep = noise(3 * MIB, 48);
    let gone = noise(3 * MIB, 49);
    std::fs::write(t.path("keep"), &keep).unwrap();
    std::fs::write(t.path("gone"), &gone).unwrap();
    let k = store.import_file(t.path("keep")).unwrap();
    let g = store.import_file(t.path("gone")).unwrap();
    let mut live = vec![ObjectId::manifest(k.manifest_id)];
    live.extend(k.chunks.iter().map(|c| ObjectId::chunk(c.id)));
    drop(store);
    for incremental in [false, true] {
        let opts = CompactOptions {
            incremental,
            ..CompactOptions::default()
        };
        compact(&t.dir, live.clone(), CompactContext::default(), &opts).unwrap();
        let store = ObjectStore::open(&t.dir).unwrap();
        assert!(!store.contains(&ObjectId::manifest(g.manifest_id)).unwrap());
        let again = store.import_file(t.path("gone")).unwrap();
        assert!(!again.via_content_index);
        assert_eq!(again.manifest_id, g.manifest_id);
        assert!(again.new_bytes_stored > 0);
        check_reconstructs(&store, &t, &again, &gone);
        // The retained file is imported correctly too (hit or refill).
        assert_eq!(
            store.import_file(t.path("keep")).unwrap().manifest_id,
            k.manifest_id
        );
        assert!(store.import_file(t.path("keep")).unwrap().via_content_index);
    }
}

#[test]
fn rebuild_locator_regenerates_the_index() {
    let (t, store) = TestStore::new(StoreOptions::default());
    let data = noise(7 * MIB, 50);
    let src = t.path("a");
    std::fs::write(&src, &data).unwrap();
    let first = store.import_file(&src).unwrap();
    drop(store);
    rebuild_locator(&t.dir).unwrap();
    assert_eq!(
        content_row(&t.dir, data.len() as u64, &first.content_id),
        Some(first.manifest_id.0)
    );
    let store = ObjectStore::open(&t.dir).unwrap();
    let again = store.import_file(&src).unwrap();
    assert!(again.via_content_index);
    assert_eq!(again.manifest_id, first.manifest_id);
    assert!(store.verify().unwrap().is_clean());
}

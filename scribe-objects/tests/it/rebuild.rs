use scribe_format::ObjectKind;
use scribe_objects::{rebuild_locator, verify_dir, Location, ObjectStore, StoreError};

use super::support::{noise, pack_file, small_packs, TestStore};

#[test]
fn rebuild_recreates_the_locator_from_packs_and_loose_files() {
    let (t, store) = TestStore::new(small_packs());
    let batch = store.batch();
    let mut ids = Vec::new();
    for i in 0..30u64 {
        ids.push((
            batch.put(ObjectKind::Chunk, &noise(3000, i)).unwrap(),
            noise(3000, i),
        ));
    }
    let loose_payload = noise(20_000, 77);
    let loose = batch.put(ObjectKind::Manifest, &loose_payload).unwrap();
    batch.commit().unwrap();
    let before: Vec<_> = store.list().unwrap();
    drop(store);
    std::fs::remove_file(t.dir.join("locator.redb")).unwrap();
    let report = rebuild_locator(&t.dir).unwrap();
    assert_eq!(report.packed_indexed, 30);
    assert_eq!(report.loose_indexed, 1);
    assert!(report.rejected.is_empty(), "{:?}", report.rejected);
    assert!(!t.dir.join("locator.redb.rebuild").exists());
    let store = ObjectStore::open(&t.dir).unwrap();
    assert_eq!(store.list().unwrap(), before, "same rows as the original");
    for (id, p) in &ids {
        assert_eq!(&store.get(id).unwrap(), p);
    }
    assert_eq!(store.get(&loose).unwrap(), loose_payload);
    // The rebuilt store accepts new writes.
    let n = store.put(ObjectKind::Chunk, b"after rebuild").unwrap();
    drop(store);
    let store = ObjectStore::open(&t.dir).unwrap();
    assert_eq!(store.get(&n).unwrap(), b"after rebuild");
}

#[test]
fn rebuild_indexes_only_bytes_matching_their_identity() {
    let (t, store) = TestStore::new(small_packs());
    let batch = store.batch();
    let a = batch.put(ObjectKind::Chunk, &noise(1000, 1)).unwrap();
    let b = batch.put(ObjectKind::Chunk, &noise(1000, 2)).unwrap();
    let c = batch.put(ObjectKind::Chunk, &noise(1000, 3)).unwrap();
    batch.commit().unwrap();
    let Some(Location::Packed {
        offset, entry_len, ..
    }) = store.locate(&b).unwrap()
    else {
        panic!()
    };
    drop(store);
    let p = pack_file(&t.dir, 1);
    let mut bytes = std::fs::read(&p).unwrap();
    bytes[(offset + entry_len - 10) as usize] ^= 0xff;
    // And a torn tail, as after kill -9.
    bytes.extend_from_slice(b"SCPE\x01");
    std::fs::write(&p, &bytes).unwrap();
    let report = rebuild_locator(&t.dir).unwrap();
    assert_eq!(report.packed_indexed, 2);
    assert_eq!(report.rejected.len(), 2, "{:?}", report.rejected);
    let store = ObjectStore::open(&t.dir).unwrap();
    assert!(store.contains(&a).unwrap() && store.contains(&c).unwrap());
    assert!(!store.contains(&b).unwrap());
    assert_eq!(store.recovery_report().truncated_bytes, 5);
    drop(store);
    assert!(verify_dir(&t.dir).unwrap().is_clean());
}

#[test]
fn rebuild_refuses_an_open_store_and_a_pending_marker() {
    let (t, store) = TestStore::new(small_packs());
    assert!(rebuild_locator(&t.dir).is_err(), "store is open");
    drop(store);
    std::fs::write(t.path("objects.compaction-ready"), b"SCRGC1\0\0").unwrap();
    assert!(matches!(
        rebuild_locator(&t.dir),
        Err(StoreError::CompactionPending { .. })
    ));
    assert!(matches!(
        ObjectStore::open(&t.dir),
        Err(StoreError::CompactionPending { .. })
    ));
}

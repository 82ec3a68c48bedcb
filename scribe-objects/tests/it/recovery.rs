use std::io::Write;

use scribe_format::ObjectKind;
use scribe_objects::{verify_dir, ObjectStore, Problem, PublishFailpoint, StoreError};

use super::support::{noise, pack_file, small_packs, TestStore};

#[test]
fn torn_tail_is_truncated_on_open_and_reported_by_verify() {
    let (t, store) = TestStore::new(small_packs());
    let id = store.put(ObjectKind::Chunk, b"kept").unwrap();
    drop(store);
    let p = pack_file(&t.dir, 1);
    let committed = std::fs::metadata(&p).unwrap().len();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&p)
        .unwrap()
        .write_all(b"SCPE garbage from a killed writer")
        .unwrap();
    let report = verify_dir(&t.dir).unwrap();
    assert!(matches!(
        report.problems.as_slice(),
        [Problem::UncommittedTail { pack: 1, committed_len, .. }] if *committed_len == committed
    ));
    // verify changed nothing.
    assert!(std::fs::metadata(&p).unwrap().len() > committed);
    let store = ObjectStore::open(&t.dir).unwrap();
    assert_eq!(store.recovery_report().truncated_bytes, 33);
    assert_eq!(std::fs::metadata(&p).unwrap().len(), committed);
    assert_eq!(store.get(&id).unwrap(), b"kept");
    drop(store);
    assert!(verify_dir(&t.dir).unwrap().is_clean());
}

#[test]
fn packs_above_the_checkpoint_are_removed() {
    let (t, store) = TestStore::new(small_packs());
    store.put(ObjectKind::Chunk, b"x").unwrap();
    drop(store);
    let stray = pack_file(&t.dir, 2);
    std::fs::write(
        &stray,
        b"SCPK\x01\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00",
    )
    .unwrap();
    let report = verify_dir(&t.dir).unwrap();
    assert!(matches!(
        report.problems.as_slice(),
        [Problem::UncommittedPack { pack: 2, .. }]
    ));
    assert!(stray.exists(), "verify does not remove");
    let store = ObjectStore::open(&t.dir).unwrap();
    assert_eq!(store.recovery_report().removed_packs, vec![2]);
    assert!(!stray.exists());
}

#[test]
fn pack_shorter_than_committed_refuses_to_open() {
    let (t, store) = TestStore::new(small_packs());
    store.put(ObjectKind::Chunk, &noise(1000, 1)).unwrap();
    drop(store);
    let p = pack_file(&t.dir, 1);
    let len = std::fs::metadata(&p).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(len - 1)
        .unwrap();
    let report = verify_dir(&t.dir).unwrap();
    assert!(report
        .problems
        .iter()
        .any(|p| matches!(p, Problem::PackShorterThanCommitted { pack: 1, .. })));
    let err = ObjectStore::open(&t.dir).unwrap_err();
    assert!(matches!(err, StoreError::CorruptPack { .. }), "{err}");
    assert_eq!(
        std::fs::metadata(&p).unwrap().len(),
        len - 1,
        "nothing repaired"
    );
}

#[test]
fn failed_publication_is_invisible_and_recovers() {
    for fp in [
        PublishFailpoint::BeforePackFlush,
        PublishFailpoint::BeforeLocatorCommit,
    ] {
        let (t, store) = TestStore::new(small_packs());
        let kept = store.put(ObjectKind::Chunk, b"kept").unwrap();
        let batch = store.batch();
        batch.set_failpoint(Some(fp));
        let lost = batch.put(ObjectKind::Chunk, &noise(100, 3)).unwrap();
        let lost_loose = batch.put(ObjectKind::Manifest, &noise(9000, 4)).unwrap();
        assert!(matches!(batch.commit(), Err(StoreError::Injected(_))));
        assert!(!store.contains(&lost).unwrap());
        assert!(!store.contains(&lost_loose).unwrap());
        drop(store);
        let store = ObjectStore::open(&t.dir).unwrap();
        if fp == PublishFailpoint::BeforeLocatorCommit {
            assert!(store.recovery_report().truncated_bytes > 0);
        }
        assert!(!store.contains(&lost).unwrap());
        assert_eq!(store.get(&kept).unwrap(), b"kept");
        assert!(store.verify().unwrap().is_clean());
    }
}

#[test]
fn dropped_batch_leaves_no_staging_files() {
    let (t, store) = TestStore::new(small_packs());
    let batch = store.batch();
    batch.put(ObjectKind::Manifest, &noise(9000, 4)).unwrap();
    assert_eq!(std::fs::read_dir(t.dir.join("staging")).unwrap().count(), 1);
    drop(batch);
    assert_eq!(std::fs::read_dir(t.dir.join("staging")).unwrap().count(), 0);
}

#[test]
fn staging_leftovers_are_removed_on_open() {
    // A process killed after staging a loose candidate leaves a temporary.
    let (t, store) = TestStore::new(small_packs());
    drop(store);
    std::fs::write(t.dir.join("staging").join("loose-crashed.tmp"), b"partial").unwrap();
    let store = ObjectStore::open(&t.dir).unwrap();
    assert_eq!(store.recovery_report().removed_staging_files, 1);
    assert_eq!(std::fs::read_dir(t.dir.join("staging")).unwrap().count(), 0);
}

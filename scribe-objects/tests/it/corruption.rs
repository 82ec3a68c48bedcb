use scribe_format::envelope::Compression;
use scribe_format::{ObjectId, ObjectKind};
use scribe_objects::{verify_dir, Location, ObjectStore, Problem, StoreError, StoreOptions};

use super::support::{noise, pack_file, small_packs, TestStore};

fn flip(path: &std::path::Path, offset: u64) {
    let mut b = std::fs::read(path).unwrap();
    b[offset as usize] ^= 0x40;
    std::fs::write(path, b).unwrap();
}

#[test]
fn corrupt_packed_byte_is_an_error_naming_the_object() {
    for compression in [Compression::None, Compression::Lz4] {
        let (t, store) = TestStore::new(StoreOptions {
            compression,
            ..small_packs()
        });
        let batch = store.batch();
        let good = batch.put(ObjectKind::Chunk, &noise(1000, 1)).unwrap();
        let bad = batch.put(ObjectKind::Chunk, &vec![5u8; 3000]).unwrap();
        batch.commit().unwrap();
        let Some(Location::Packed {
            offset, entry_len, ..
        }) = store.locate(&bad).unwrap()
        else {
            panic!("packed")
        };
        drop(store);
        flip(&pack_file(&t.dir, 1), offset + entry_len - 3);
        let report = verify_dir(&t.dir).unwrap();
        assert!(
            matches!(report.problems.as_slice(), [Problem::CorruptObject { id, .. }] if *id == bad)
        );
        let store = ObjectStore::open(&t.dir).unwrap();
        let err = store.get(&bad).unwrap_err();
        assert!(
            matches!(&err, StoreError::CorruptObject { id, .. } if *id == bad),
            "{err}"
        );
        assert!(err.to_string().contains(&hex::encode(bad.digest)));
        let mut out = Vec::new();
        assert!(store.read_to(&bad, &mut out).is_err());
        assert!(store.read_chunk_range(&bad, 0, 10).is_err());
        assert_eq!(store.get(&good).unwrap(), noise(1000, 1));
        assert_eq!(store.verify().unwrap().problems.len(), 1);
    }
}

#[test]
fn corrupt_entry_framing_is_refused() {
    let (t, store) = TestStore::new(small_packs());
    let id = store.put(ObjectKind::Chunk, b"framed").unwrap();
    drop(store);
    // Damage the entry's object key.
    flip(&pack_file(&t.dir, 1), 16 + 10);
    let store = ObjectStore::open(&t.dir).unwrap();
    let err = store.get(&id).unwrap_err();
    assert!(err.to_string().contains("different object"), "{err}");
}

#[test]
fn truncated_and_corrupt_loose_files() {
    let (t, store) = TestStore::new(small_packs());
    let a = store.put(ObjectKind::Manifest, &noise(9000, 1)).unwrap();
    let b = store.put(ObjectKind::Manifest, &noise(9000, 2)).unwrap();
    let path = |id: &ObjectId| {
        t.dir
            .join("loose")
            .join(format!("{:02x}", id.digest[0]))
            .join(format!("02{}", hex::encode(id.digest)))
    };
    let pa = path(&a);
    let len = std::fs::metadata(&pa).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&pa)
        .unwrap()
        .set_len(len - 5)
        .unwrap();
    flip(&path(&b), 100);
    assert!(matches!(store.get(&a), Err(StoreError::CorruptObject { id, .. }) if id == a));
    assert!(matches!(store.get(&b), Err(StoreError::CorruptObject { id, .. }) if id == b));
    assert!(store.open_reader(&a).is_err());
    let mut r = store.open_reader(&b).unwrap();
    let mut out = Vec::new();
    let err = std::io::Read::read_to_end(&mut r, &mut out).unwrap_err();
    assert!(err.to_string().contains("identity mismatch"), "{err}");
    assert_eq!(store.verify().unwrap().problems.len(), 2);
}

#[test]
fn malformed_locator_rows_are_errors() {
    let (t, store) = TestStore::new(small_packs());
    let id = store.put(ObjectKind::Chunk, b"row").unwrap();
    drop(store);
    {
        let db = redb::Database::open(t.dir.join("locator.redb")).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let def: redb::TableDefinition<&[u8; 33], &[u8]> =
                redb::TableDefinition::new("locator");
            let mut table = txn.open_table(def).unwrap();
            table
                .insert(&id.to_bytes(), [1u8, 9, 0].as_slice())
                .unwrap();
        }
        txn.commit().unwrap();
    }
    let report = verify_dir(&t.dir).unwrap();
    assert!(matches!(
        report.problems.as_slice(),
        [Problem::BadLocatorRow { .. }]
    ));
    let store = ObjectStore::open(&t.dir).unwrap();
    assert!(matches!(
        store.get(&id),
        Err(StoreError::CorruptLocatorRow { .. })
    ));
}

#[test]
fn locator_row_pointing_elsewhere_never_returns_wrong_data() {
    let (t, store) = TestStore::new(small_packs());
    let a = store.put(ObjectKind::Chunk, b"aaaa").unwrap();
    let b = store.put(ObjectKind::Chunk, b"bbbb").unwrap();
    let loc_b = store.locate(&b).unwrap().unwrap();
    drop(store);
    {
        let db = redb::Database::open(t.dir.join("locator.redb")).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let def: redb::TableDefinition<&[u8; 33], &[u8]> =
                redb::TableDefinition::new("locator");
            let mut table = txn.open_table(def).unwrap();
            let Location::Packed {
                pack,
                offset,
                entry_len,
            } = loc_b
            else {
                panic!()
            };
            let mut v = vec![1u8, 2];
            v.extend_from_slice(&pack.to_le_bytes());
            v.extend_from_slice(&offset.to_le_bytes());
            v.extend_from_slice(&entry_len.to_le_bytes());
            table.insert(&a.to_bytes(), v.as_slice()).unwrap();
        }
        txn.commit().unwrap();
    }
    let store = ObjectStore::open(&t.dir).unwrap();
    assert!(matches!(store.get(&a), Err(StoreError::CorruptObject { id, .. }) if id == a));
    assert_eq!(store.get(&b).unwrap(), b"bbbb");
}

#[test]
fn descriptor_refusals() {
    let (t, store) = TestStore::new(small_packs());
    drop(store);
    let d = t.dir.join("SCRIBE_FORMAT");
    let text = std::fs::read_to_string(&d).unwrap();
    std::fs::write(
        &d,
        format!("{text}required-features = lz4,warp\n").replace("required-features = lz4\n", ""),
    )
    .unwrap();
    assert!(matches!(
        ObjectStore::open(&t.dir),
        Err(StoreError::UnsupportedFeature { .. })
    ));
    std::fs::write(&d, text.replace("layout = 1", "layout = 7")).unwrap();
    let err = ObjectStore::open(&t.dir).unwrap_err();
    assert!(err.to_string().contains("migrate"), "{err}");
    std::fs::write(&d, text.replace("kind = object-store", "kind = workspace")).unwrap();
    assert!(matches!(
        ObjectStore::open(&t.dir),
        Err(StoreError::Descriptor { .. })
    ));
    std::fs::write(&d, format!("{text}future-key = kept\n")).unwrap();
    assert!(ObjectStore::open(&t.dir).is_ok());
}

#[test]
fn truncated_sealed_pack_is_reported_per_object() {
    let (t, store) = TestStore::new(small_packs());
    let batch = store.batch();
    let ids: Vec<_> = (0..40u64)
        .map(|i| batch.put(ObjectKind::Chunk, &noise(3500, i)).unwrap())
        .collect();
    batch.commit().unwrap();
    let last_in_pack1 = ids
        .iter()
        .copied()
        .filter(|id| {
            matches!(
                store.locate(id).unwrap(),
                Some(Location::Packed { pack: 1, .. })
            )
        })
        .last()
        .unwrap();
    drop(store);
    let p = pack_file(&t.dir, 1);
    let len = std::fs::metadata(&p).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(len - 100)
        .unwrap();
    let report = verify_dir(&t.dir).unwrap();
    assert!(
        matches!(report.problems.as_slice(), [Problem::CorruptObject { id, .. }] if *id == last_in_pack1)
    );
    // The open pack is intact, so the store opens; the damaged object errors.
    let store = ObjectStore::open(&t.dir).unwrap();
    let err = store.get(&last_in_pack1).unwrap_err();
    assert!(matches!(err, StoreError::CorruptObject { .. }), "{err}");
    assert_eq!(store.get(&ids[0]).unwrap(), noise(3500, 0));
}

/// `payload_len` answers from the envelope header alone (acceptance's
/// check of one-chunk files), for packed and loose objects, stored raw or
/// compressed, and names a damaged header instead of believing it;
/// `payload_len_at_least` (ObjectGetMany's room check) from the locator
/// row alone.
#[test]
fn payload_len_reads_the_header_and_refuses_a_damaged_one() {
    for compression in [Compression::None, Compression::Lz4] {
        let (t, store) = TestStore::new(StoreOptions {
            compression,
            ..small_packs()
        });
        let batch = store.batch();
        let noisy = batch.put(ObjectKind::Chunk, &noise(1000, 1)).unwrap();
        let runs = batch.put(ObjectKind::Chunk, &vec![5u8; 3000]).unwrap();
        batch.commit().unwrap();
        let loose = store.put(ObjectKind::Manifest, &noise(9000, 2)).unwrap();
        assert!(matches!(
            store.locate(&loose).unwrap(),
            Some(Location::Loose { .. })
        ));
        assert_eq!(store.payload_len(&noisy).unwrap(), 1000);
        assert_eq!(store.payload_len(&runs).unwrap(), 3000);
        assert_eq!(store.payload_len(&loose).unwrap(), 9000);
        // From the locator row alone: never more than the payload (a
        // compressed envelope is smaller), exactly it when stored raw.
        assert_eq!(store.payload_len_at_least(&noisy).unwrap(), Some(1000));
        assert_eq!(store.payload_len_at_least(&loose).unwrap(), Some(9000));
        let least = store.payload_len_at_least(&runs).unwrap().unwrap();
        match compression {
            Compression::None => assert_eq!(least, 3000),
            Compression::Lz4 => assert!(least < 3000, "compressed: {least}"),
        }
        let absent = ObjectId {
            kind: ObjectKind::Chunk,
            digest: [7; 32],
        };
        assert_eq!(store.payload_len_at_least(&absent).unwrap(), None);
        assert!(matches!(
            store.payload_len(&absent),
            Err(StoreError::NotFound { .. })
        ));
        let Some(Location::Packed { offset, .. }) = store.locate(&runs).unwrap() else {
            panic!("packed")
        };
        drop(store);
        // The envelope's magic, just past the entry header (entry magic,
        // 33-byte key, u64 length: section 6.1).
        flip(&pack_file(&t.dir, 1), offset + 4 + 33 + 8);
        let store = ObjectStore::open(&t.dir).unwrap();
        let err = store.payload_len(&runs).unwrap_err();
        assert!(
            matches!(&err, StoreError::CorruptObject { id, .. } if *id == runs),
            "{err}"
        );
        assert_eq!(store.payload_len(&noisy).unwrap(), 1000);
    }
}

/// `get_unverified` (acceptance's deep manifest check) returns the same
/// payload as `get` for packed objects stored raw (read straight past both
/// headers), compressed and loose; a damaged entry header, envelope header
/// or envelope kind is refused naming the object; a damaged payload byte of
/// a raw object is returned as read (the caller hashes it), while `get`
/// refuses it.
#[test]
fn get_unverified_reads_past_checked_headers() {
    for compression in [Compression::None, Compression::Lz4] {
        let (t, store) = TestStore::new(StoreOptions {
            compression,
            ..small_packs()
        });
        let batch = store.batch();
        let raw = batch.put(ObjectKind::Chunk, &noise(3000, 3)).unwrap();
        let runs = batch.put(ObjectKind::Chunk, &vec![9u8; 4000]).unwrap();
        let other = batch.put(ObjectKind::Chunk, &noise(700, 4)).unwrap();
        batch.commit().unwrap();
        let loose = store.put(ObjectKind::Manifest, &noise(9000, 5)).unwrap();
        for id in [raw, runs, other, loose] {
            let got = store.get_unverified(&id).unwrap();
            assert_eq!(got, store.get(&id).unwrap(), "{id}");
        }
        let packed = |id: &ObjectId| match store.locate(id).unwrap() {
            Some(Location::Packed {
                offset, entry_len, ..
            }) => (offset, entry_len),
            other => panic!("{other:?}"),
        };
        let (raw_at, raw_len) = packed(&raw);
        let (other_at, _) = packed(&other);
        let (runs_at, _) = packed(&runs);
        drop(store);
        let pack = pack_file(&t.dir, 1);
        // A payload byte of the raw object, the entry key of another, the
        // envelope magic of the third (entry header: magic 4, key 33, u64).
        flip(&pack, raw_at + raw_len - 10);
        flip(&pack, other_at + 4 + 5);
        flip(&pack, runs_at + 4 + 33 + 8);
        let store = ObjectStore::open(&t.dir).unwrap();
        let read = store.get_unverified(&raw).unwrap();
        assert_eq!(read.len(), 3000);
        assert_ne!(read, noise(3000, 3));
        assert!(matches!(
            store.get(&raw),
            Err(StoreError::CorruptObject { id, .. }) if id == raw
        ));
        for id in [other, runs] {
            let err = store.get_unverified(&id).unwrap_err();
            assert!(
                matches!(&err, StoreError::CorruptObject { id: named, .. } if *named == id),
                "{err}"
            );
        }
        assert_eq!(store.get_unverified(&loose).unwrap(), noise(9000, 5));
    }
}

use scribe_format::envelope::{self, Compression};
use scribe_format::id::object_identity;
use scribe_format::{ObjectId, ObjectKind};
use scribe_objects::{Location, ObjectStore, PutOutcome, StoreError, StoreOptions};

use super::support::{noise, pack_file, small_packs, TestStore};

#[test]
fn layout_and_descriptor_exactly_as_section_6() {
    let (t, store) = TestStore::new(StoreOptions::default());
    for sub in ["loose", "packs", "staging", "locator.redb", "SCRIBE_FORMAT"] {
        assert!(t.dir.join(sub).exists(), "{sub}");
    }
    let text = std::fs::read_to_string(t.dir.join("SCRIBE_FORMAT")).unwrap();
    assert_eq!(
        text,
        "scribe-descriptor = 1\nkind = object-store\nlayout = 1\nenvelope = 1\n\
         small-object-threshold = 16777236\npack-seal-bytes = 268435456\n\
         compression = lz4\nrequired-features = lz4\n"
    );
    let pack = std::fs::read(pack_file(&t.dir, 1)).unwrap();
    assert_eq!(
        pack,
        b"SCPK\x01\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00"
    );
    assert!(store.is_empty().unwrap());
    assert!(matches!(
        ObjectStore::create(&t.dir, StoreOptions::default()),
        Err(StoreError::AlreadyExists { .. })
    ));
}

#[test]
fn put_get_round_trip_and_pack_entry_bytes() {
    let (t, store) = TestStore::new(StoreOptions {
        compression: Compression::None,
        ..StoreOptions::default()
    });
    let id = store.put(ObjectKind::Chunk, b"hello").unwrap();
    assert_eq!(id, object_identity(ObjectKind::Chunk, b"hello").unwrap());
    assert_eq!(store.get(&id).unwrap(), b"hello");
    let loc = store.locate(&id).unwrap().unwrap();
    assert_eq!(
        loc,
        Location::Packed {
            pack: 1,
            offset: 16,
            entry_len: 45 + 25
        }
    );
    let pack = std::fs::read(pack_file(&t.dir, 1)).unwrap();
    assert_eq!(&pack[16..20], b"SCPE");
    assert_eq!(&pack[20..53], &id.to_bytes());
    assert_eq!(&pack[53..61], &25u64.to_le_bytes());
    assert_eq!(
        &pack[61..],
        &envelope::encode(ObjectKind::Chunk, b"hello", Compression::None)[..]
    );
    drop(store);
    let store = ObjectStore::open(&t.dir).unwrap();
    assert_eq!(store.get(&id).unwrap(), b"hello");
    let missing = ObjectId::new(ObjectKind::Chunk, [1; 32]);
    assert!(matches!(store.get(&missing), Err(StoreError::NotFound { id }) if id == missing));
    assert_eq!(store.missing(&[id, missing]).unwrap(), vec![missing]);
}

#[test]
fn batch_is_one_publication_and_dedups() {
    let (t, store) = TestStore::new(small_packs());
    let batch = store.batch();
    let a = batch.put(ObjectKind::Chunk, b"a").unwrap();
    let a2 = batch.put(ObjectKind::Chunk, b"a").unwrap();
    assert_eq!(a, a2);
    let b = batch.put(ObjectKind::Chunk, &noise(3000, 1)).unwrap();
    // Not visible before commit.
    assert!(!store.contains(&a).unwrap());
    let receipt = batch.commit().unwrap();
    assert_eq!(receipt.objects_written, 2);
    assert_eq!(receipt.objects_deduplicated, 1);
    assert!(store.contains(&a).unwrap() && store.contains(&b).unwrap());
    // Already-present objects are not written again.
    let len_before = std::fs::metadata(pack_file(&t.dir, 1)).unwrap().len();
    let batch = store.batch();
    assert_eq!(
        batch.put_with_id(a, b"a").unwrap(),
        PutOutcome::AlreadyPresent
    );
    assert_eq!(batch.commit().unwrap().objects_written, 0);
    assert_eq!(
        std::fs::metadata(pack_file(&t.dir, 1)).unwrap().len(),
        len_before
    );
}

#[test]
fn large_objects_are_loose_files_with_one_envelope() {
    let (t, store) = TestStore::new(small_packs());
    let payload = noise(10_000, 2);
    let id = store.put(ObjectKind::Manifest, &payload).unwrap();
    let loc = store.locate(&id).unwrap().unwrap();
    assert!(matches!(loc, Location::Loose { .. }));
    let path = t
        .dir
        .join("loose")
        .join(format!("{:02x}", id.digest[0]))
        .join(format!("02{}", hex::encode(id.digest)));
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(&bytes[..4], b"SCOB");
    assert_eq!(
        Location::Loose {
            envelope_len: bytes.len() as u64
        },
        loc
    );
    assert_eq!(store.get(&id).unwrap(), payload);
    let mut streamed = Vec::new();
    store.read_to(&id, &mut streamed).unwrap();
    assert_eq!(streamed, payload);
    assert_eq!(std::fs::read_dir(t.dir.join("staging")).unwrap().count(), 0);
}

#[test]
fn packs_roll_over_at_seal_bytes() {
    let (t, store) = TestStore::new(small_packs());
    let batch = store.batch();
    let ids: Vec<_> = (0..40)
        .map(|i| batch.put(ObjectKind::Chunk, &noise(3500, i)).unwrap())
        .collect();
    batch.commit().unwrap();
    let packs: Vec<_> = std::fs::read_dir(t.dir.join("packs")).unwrap().collect();
    assert!(packs.len() >= 2, "expected roll-over");
    for p in 1..=packs.len() as u32 {
        let len = std::fs::metadata(pack_file(&t.dir, p)).unwrap().len();
        assert!(len <= 64 * 1024);
    }
    drop(store);
    let store = ObjectStore::open(&t.dir).unwrap();
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(store.get(id).unwrap(), noise(3500, i as u64));
    }
    assert!(store.verify().unwrap().is_clean());
}

#[test]
fn lz4_store_compresses_and_keeps_identity() {
    let (_t, store) = TestStore::new(StoreOptions::default());
    let payload = vec![7u8; 500_000];
    let id = store.put(ObjectKind::Chunk, &payload).unwrap();
    let env = store.read_envelope(&id).unwrap();
    assert_eq!(env[8], 1, "codec 1");
    assert!(env.len() < 10_000);
    assert_eq!(store.get(&id).unwrap(), payload);
    let mut r = store.open_reader(&id).unwrap();
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut r, &mut out).unwrap();
    assert_eq!(out, payload);
    assert_eq!(store.read_chunk_range(&id, 10, 20).unwrap(), vec![7u8; 20]);
    assert!(matches!(
        store.read_chunk_range(&id, 499_990, 20),
        Err(StoreError::RangeOutOfBounds { .. })
    ));
}

#[test]
fn put_encoded_verifies_identity() {
    let (_t, store) = TestStore::new(StoreOptions::default());
    let env = envelope::encode(ObjectKind::Chunk, b"x", Compression::None);
    let id = object_identity(ObjectKind::Chunk, b"x").unwrap();
    let wrong = ObjectId::new(ObjectKind::Chunk, [9; 32]);
    let batch = store.batch();
    assert!(matches!(
        batch.put_encoded(wrong, &env),
        Err(StoreError::InvalidInput { .. })
    ));
    assert!(batch.put_encoded(id, &env[..env.len() - 1]).is_err());
    batch.put_encoded(id, &env).unwrap();
    batch.commit().unwrap();
    assert_eq!(store.get(&id).unwrap(), b"x");
    assert!(!store.contains(&wrong).unwrap());
}

#[test]
fn concurrent_readers_while_writing() {
    let (_t, store) = TestStore::new(small_packs());
    let store = std::sync::Arc::new(store);
    let first = store.put(ObjectKind::Chunk, b"first").unwrap();
    std::thread::scope(|s| {
        let st = store.clone();
        let w = s.spawn(move || {
            for i in 0..20u64 {
                let b = st.batch();
                b.put(ObjectKind::Chunk, &noise(2000, i + 100)).unwrap();
                b.commit().unwrap();
            }
        });
        for _ in 0..4 {
            let st = store.clone();
            s.spawn(move || {
                for _ in 0..200 {
                    assert_eq!(st.get(&first).unwrap(), b"first");
                }
            });
        }
        w.join().unwrap();
    });
    assert_eq!(store.len().unwrap(), 21);
}

mod model {
    use std::collections::BTreeMap;

    use proptest::prelude::*;
    use scribe_format::{ObjectId, ObjectKind};
    use scribe_objects::{ObjectStore, PublishFailpoint};

    use crate::it::support::{noise, small_packs, TestStore};

    #[derive(Clone, Debug)]
    enum Op {
        /// Put objects (seeds, sizes) in one batch; maybe fail the publication.
        Batch(Vec<(u64, usize)>, Option<bool>),
        Reopen,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (
                prop::collection::vec((0u64..40, 1usize..6000), 1..6),
                prop::option::of(any::<bool>())
            )
                .prop_map(|(v, f)| Op::Batch(v, f)),
            1 => Just(Op::Reopen),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]
        /// The store behaves like a map from id to payload: committed
        /// batches are visible (also after reopen), failed ones never.
        #[test]
        fn store_matches_a_btreemap(ops in prop::collection::vec(op(), 1..12)) {
            let (t, store) = TestStore::new(small_packs());
            let mut store = Some(store);
            let mut model: BTreeMap<ObjectId, Vec<u8>> = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Reopen => {
                        drop(store.take());
                        store = Some(ObjectStore::open(&t.dir).unwrap());
                    }
                    Op::Batch(items, fail) => {
                        let s = store.as_ref().unwrap();
                        let batch = s.batch();
                        batch.set_failpoint(fail.map(|f| if f {
                            PublishFailpoint::BeforeLocatorCommit
                        } else {
                            PublishFailpoint::BeforePackFlush
                        }));
                        let mut put = Vec::new();
                        for (seed, len) in items {
                            let kind = if len > 5000 { ObjectKind::Manifest } else { ObjectKind::Chunk };
                            let payload = noise(len, seed);
                            put.push((batch.put(kind, &payload).unwrap(), payload));
                        }
                        let ok = batch.commit().is_ok();
                        prop_assert_eq!(ok, fail.is_none());
                        if ok {
                            model.extend(put);
                        }
                    }
                }
                let s = store.as_ref().unwrap();
                prop_assert_eq!(s.len().unwrap(), model.len() as u64);
                for (id, p) in &model {
                    prop_assert_eq!(&s.get(id).unwrap(), p);
                }
            }
            drop(store);
            let s = ObjectStore::open(&t.dir).unwrap();
            prop_assert!(s.verify().unwrap().is_clean());
        }
    }
}

#[test]
fn streaming_reader_over_a_large_compressed_loose_object() {
    let (_t, store) = TestStore::new(small_packs());
    // Compressible, several 256 KiB blocks, above the loose threshold.
    let payload: Vec<u8> = (0..1_500_000u32).map(|i| (i / 1000) as u8).collect();
    let id = store.put(ObjectKind::Manifest, &payload).unwrap();
    assert!(matches!(
        store.locate(&id).unwrap(),
        Some(Location::Loose { .. })
    ));
    assert_eq!(store.read_envelope(&id).unwrap()[8], 1, "codec 1");
    let mut r = store.open_reader(&id).unwrap();
    assert_eq!(r.id(), &id);
    let mut out = Vec::new();
    let mut buf = [0u8; 7777];
    loop {
        let n = std::io::Read::read(&mut r, &mut buf).unwrap();
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    assert_eq!(out, payload);
}

/// Group commit: batches committed while another publishes queue up, and
/// the next publisher publishes all of them with one pack flush and one
/// locator transaction (section 6.3's order, once for the group); every
/// object, packed and loose, is durable and readable after reopen.
#[test]
fn concurrent_commits_share_one_publication_and_all_survive_reopen() {
    let (t, store) = TestStore::new(StoreOptions {
        small_object_threshold: 1024,
        ..StoreOptions::default()
    });
    let store = std::sync::Arc::new(store);
    let before = store.batch_publications();
    let hold = store.hold_publications();
    let threads: Vec<_> = (0..6u8)
        .map(|i| {
            let store = store.clone();
            std::thread::spawn(move || {
                let b = store.batch();
                let small = b.put(ObjectKind::Chunk, &[i; 100]).unwrap();
                // Larger than the threshold: a loose object.
                let large = b
                    .put(ObjectKind::Chunk, &noise(4096, u64::from(i)))
                    .unwrap();
                let receipt = b.commit().unwrap();
                assert_eq!(receipt.objects_written, 2);
                (small, large)
            })
        })
        .collect();
    while store.queued_batches() < 6 {
        std::thread::yield_now();
    }
    drop(hold);
    let ids: Vec<(ObjectId, ObjectId)> = threads.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(
        store.batch_publications() - before,
        1,
        "six queued batches, one publication"
    );
    for (i, (small, large)) in ids.iter().enumerate() {
        assert_eq!(store.get(small).unwrap(), vec![i as u8; 100]);
        assert!(matches!(
            store.locate(large).unwrap(),
            Some(Location::Loose { .. })
        ));
    }
    drop(store);
    let store = ObjectStore::open(&t.dir).unwrap();
    for (i, (small, large)) in ids.iter().enumerate() {
        assert_eq!(store.get(small).unwrap(), vec![i as u8; 100]);
        assert_eq!(store.get(large).unwrap(), noise(4096, i as u64));
    }
    assert!(store.verify().unwrap().is_clean());
}

//! Publishing changes as revisions, reading back, verifying: against the
//! real radosgw, with a real `tier.redb`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use nokv_bridge::tier::{
    BlockKey, Deleted, FileVersion, Head, Lifecycle, Provider, ProviderError, Put, S3Provider,
    Tier, TierError, TierOptions,
};
use scribe_format::{ChunkId, ObjectId};

use super::rgw::config;

/// The real provider, remembering every key it was asked to create; its
/// next `ambiguous` deletes answer ambiguously without being sent.
struct Recording {
    inner: S3Provider,
    puts: Mutex<Vec<String>>,
    heads: Mutex<u64>,
    ambiguous: Mutex<u32>,
    /// The length of each `delete_many` sent to the store as one batch.
    batches: Mutex<Vec<usize>>,
}

fn recording(ambiguous: u32) -> Arc<Recording> {
    Arc::new(Recording {
        inner: S3Provider::new(&config()).unwrap(),
        puts: Mutex::default(),
        heads: Mutex::default(),
        ambiguous: Mutex::new(ambiguous),
        batches: Mutex::default(),
    })
}

impl Provider for Recording {
    fn put_if_absent(&self, key: &str, bytes: Bytes) -> Result<Put, ProviderError> {
        self.puts.lock().unwrap().push(key.to_string());
        self.inner.put_if_absent(key, bytes)
    }
    fn get_range(&self, key: &str, r: std::ops::Range<u64>) -> Result<Bytes, ProviderError> {
        self.inner.get_range(key, r)
    }
    fn get(&self, key: &str) -> Result<Bytes, ProviderError> {
        self.inner.get(key)
    }
    fn head(&self, key: &str) -> Result<Option<Head>, ProviderError> {
        *self.heads.lock().unwrap() += 1;
        self.inner.head(key)
    }
    fn list_keys(&self, prefix: &str) -> Result<Vec<String>, ProviderError> {
        self.inner.list_keys(prefix)
    }
    fn delete(&self, key: &str) -> Deleted {
        let mut n = self.ambiguous.lock().unwrap();
        if *n > 0 {
            *n -= 1;
            return Deleted::Ambiguous(ProviderError::Unavailable {
                op: "delete",
                key: key.into(),
                detail: "connection reset".into(),
            });
        }
        self.inner.delete(key)
    }
    fn delete_many(&self, keys: &[String]) -> Vec<Deleted> {
        if *self.ambiguous.lock().unwrap() > 0 {
            return keys.iter().map(|k| self.delete(k)).collect();
        }
        self.batches.lock().unwrap().push(keys.len());
        self.inner.delete_many(keys)
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    tier: Tier,
    provider: Arc<Recording>,
    local: HashMap<ObjectId, Vec<u8>>,
}

const ROOT: [u8; 16] = [0x5c; 16];

fn chunk(len: usize, seed: u32) -> (ObjectId, Vec<u8>) {
    let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    let data: Vec<u8> = (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state as u8
        })
        .collect();
    (ObjectId::chunk(ChunkId::of(&data)), data)
}

fn fixture(options: TierOptions) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let provider = recording(0);
    let tier = Tier::open(
        &dir.path().join("tier.redb"),
        0x0102_0304,
        provider.clone(),
        options,
    )
    .unwrap();
    Fixture {
        _dir: dir,
        tier,
        provider,
        local: HashMap::new(),
    }
}

impl Fixture {
    fn add(&mut self, len: usize, seed: u32) -> ObjectId {
        let (id, data) = chunk(len, seed);
        self.local.insert(id, data);
        id
    }

    fn publish(
        &self,
        change: u64,
        ids: &[ObjectId],
    ) -> Result<nokv_bridge::tier::Published, TierError> {
        let local = &self.local;
        self.tier.publish_change(&ROOT, change, ids, &|id| {
            local
                .get(id)
                .cloned()
                .ok_or_else(|| format!("{id} is not local"))
        })
    }
}

impl Fixture {
    fn publish_files(
        &self,
        change: u64,
        commit: &[ObjectId],
        files: &[(&str, &[ObjectId])],
    ) -> nokv_bridge::tier::Published {
        let local = &self.local;
        let files: Vec<FileVersion> = files
            .iter()
            .map(|(p, c)| FileVersion {
                path: p.to_string(),
                chunks: c.to_vec(),
            })
            .collect();
        self.tier
            .publish_commit(&ROOT, change, commit, &files, &|id| {
                local
                    .get(id)
                    .cloned()
                    .ok_or_else(|| format!("{id} is not local"))
            })
            .unwrap()
    }
}

fn small() -> TierOptions {
    TierOptions {
        own_block_bytes: 256 << 10,
        block_bytes: 512 << 10,
        in_flight: 4,
    }
}

#[test]
fn a_change_becomes_one_revision_of_bundled_and_own_blocks_read_back_exactly() {
    let mut f = fixture(small());
    let ids: Vec<ObjectId> = vec![
        f.add(100_000, 1),
        f.add(300_000, 2), // its own block
        f.add(200_000, 3),
        f.add(250_000, 4), // does not fit beside the others: a new block
        f.add(10, 5),
    ];
    let p = f.publish(1, &ids).unwrap();
    let rev = p.revision.expect("new objects make a revision");
    assert_eq!(p.blocks, 3, "{p:?}");
    assert_eq!(p.bytes, 850_010);
    assert_eq!(f.tier.uploaded_through(&ROOT).unwrap(), 1);
    for id in &ids {
        let loc = f.tier.locate(&ROOT, id).unwrap().expect("located");
        assert_eq!(loc.key.revision, rev);
        assert_eq!(loc.key.shard, 0x0102_0304);
        assert_eq!(
            &f.tier.read_object(&ROOT, id).unwrap().unwrap(),
            &f.local[id]
        );
    }
    // The big one is alone at offset 0 of its block.
    let big = f.tier.locate(&ROOT, &ids[1]).unwrap().unwrap();
    assert_eq!((big.offset, big.len), (0, 300_000));
    let row = &f.tier.revisions().unwrap()[&rev];
    assert_eq!(
        (row.state, row.strong, row.blocks),
        (Lifecycle::Available, 1, 3)
    );
    assert_eq!(f.tier.verify().unwrap(), Vec::<String>::new());
}

#[test]
fn reused_objects_are_sealed_dependencies_not_copies_and_republishing_is_a_no_op() {
    let mut f = fixture(small());
    let a = f.add(50_000, 10);
    let b = f.add(60_000, 11);
    let first = f.publish(1, &[a, b]).unwrap().revision.unwrap();
    let c = f.add(70_000, 12);
    let blocks_put = |f: &Fixture| {
        f.provider
            .puts
            .lock()
            .unwrap()
            .iter()
            .filter(|k| k.starts_with("nokv/artifacts/"))
            .count()
    };
    let puts_before = blocks_put(&f);
    let p = f.publish(2, &[a, c, a]).unwrap();
    let second = p.revision.unwrap();
    assert_eq!((p.reused, p.dependencies, p.bytes), (1, 1, 70_000));
    assert_eq!(blocks_put(&f), puts_before + 1);
    let revs = f.tier.revisions().unwrap();
    assert_eq!(
        revs[&first].strong, 2,
        "its change and the dependency of the second"
    );
    assert_eq!(revs[&second].strong, 1);
    assert!(revs[&first].epoch >= 2);
    // A change naming only old objects publishes no revision.
    let p3 = f.publish(3, &[b, c]).unwrap();
    assert_eq!((p3.revision, p3.dependencies), (None, 2));
    // Again, and out of order.
    assert_eq!(f.publish(2, &[a, c]).unwrap().revision, None);
    assert!(matches!(
        f.publish(5, &[a]),
        Err(TierError::OutOfOrder { change: 5, next: 4 })
    ));
    assert_eq!(f.tier.verify().unwrap(), Vec::<String>::new());
}

#[test]
fn a_publication_stopped_midway_is_retried_under_the_same_revision_and_keys() {
    let mut f = fixture(TierOptions {
        own_block_bytes: 1 << 10,
        block_bytes: 1 << 20,
        in_flight: 1,
    });
    let ids: Vec<ObjectId> = (0..5).map(|i| f.add(20_000, 100 + i)).collect();
    // The fourth object cannot be read: the publication stops after some
    // blocks are in the bucket.
    let local = f.local.clone();
    let broken = ids[3];
    let e = f
        .tier
        .publish_change(&ROOT, 1, &ids, &|id| {
            if *id == broken {
                Err("disk read error".into())
            } else {
                Ok(local[id].clone())
            }
        })
        .unwrap_err();
    assert!(matches!(e, TierError::Local { .. }), "{e}");
    assert_eq!(f.tier.uploaded_through(&ROOT).unwrap(), 0);
    let first_try: Vec<String> = f.provider.puts.lock().unwrap().clone();
    assert!(!first_try.is_empty());
    let p = f.publish(1, &ids).unwrap();
    let rev = p.revision.unwrap();
    for k in &first_try {
        let key = BlockKey::parse(k.as_str()).expect("block key");
        assert_eq!(key.revision, rev, "the retry reused the recorded revision");
    }
    assert_eq!(p.blocks, 5);
    assert_eq!(f.tier.verify().unwrap(), Vec::<String>::new());
}

#[test]
fn verify_names_a_missing_block_and_a_read_names_damaged_bytes() {
    let mut f = fixture(small());
    let a = f.add(40_000, 20);
    let b = f.add(400_000, 21);
    f.publish(1, &[a, b]).unwrap();
    let la = f.tier.locate(&ROOT, &a).unwrap().unwrap();
    let lb = f.tier.locate(&ROOT, &b).unwrap().unwrap();
    // Someone deletes a's block and writes other bytes under b's key.
    assert!(matches!(f.provider.delete(&la.key.to_key()), Deleted::Gone));
    assert!(matches!(f.provider.delete(&lb.key.to_key()), Deleted::Gone));
    f.provider
        .put_if_absent(&lb.key.to_key(), Bytes::from(vec![0u8; 400_000]))
        .unwrap();
    let problems = f.tier.verify().unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains(&la.key.to_key()) && problems[0].contains("missing"));
    match f.tier.read_object(&ROOT, &b) {
        Err(TierError::Damaged { key, offset, .. }) => {
            assert_eq!((key, offset), (lb.key.to_key(), 0));
        }
        r => panic!("damaged bytes were not named: {r:?}"),
    }
    assert!(matches!(
        f.tier.read_object(&ROOT, &a),
        Err(TierError::Provider(ProviderError::NotFound { .. }))
    ));
    let (unknown, _) = chunk(5, 99);
    assert_eq!(f.tier.read_object(&ROOT, &unknown).unwrap(), None);
}

fn block_exists(f: &Fixture, id: &ObjectId) -> Option<bool> {
    let loc = f.tier.locate(&ROOT, id).unwrap()?;
    Some(f.provider.head(&loc.key.to_key()).unwrap().is_some())
}

#[test]
fn a_released_change_is_collected_and_its_blocks_deleted() {
    let mut f = fixture(small());
    let a = f.add(30_000, 30);
    let b = f.add(300_000, 31);
    let rev = f.publish(1, &[a, b]).unwrap().revision.unwrap();
    let keys: Vec<String> = [a, b]
        .iter()
        .map(|id| f.tier.locate(&ROOT, id).unwrap().unwrap().key.to_key())
        .collect();
    assert_eq!(
        f.tier.collect().unwrap().claimed,
        0,
        "referenced: nothing to claim"
    );
    assert_eq!(f.tier.release_change(&ROOT, 1).unwrap(), 1);
    let c = f.tier.collect().unwrap();
    assert_eq!((c.claimed, c.deleted, c.blocks_deleted), (1, 1, 2), "{c:?}");
    for k in &keys {
        assert!(f.provider.head(k).unwrap().is_none(), "{k} is gone");
    }
    assert_eq!(f.tier.revisions().unwrap()[&rev].state, Lifecycle::Deleted);
    assert_eq!(f.tier.read_object(&ROOT, &a).unwrap(), None);
    assert_eq!(f.tier.verify().unwrap(), Vec::<String>::new());
}

#[test]
fn a_reference_added_after_the_candidate_makes_it_stale() {
    let mut f = fixture(small());
    let a = f.add(30_000, 40);
    let rev = f.publish(1, &[a]).unwrap().revision.unwrap();
    f.tier.release_change(&ROOT, 1).unwrap();
    // Change 2 names a again before any collection.
    assert_eq!(f.publish(2, &[a]).unwrap().revision, None);
    let c = f.tier.collect().unwrap();
    assert_eq!((c.claimed, c.stale), (0, 1), "{c:?}");
    assert_eq!(
        f.tier.revisions().unwrap()[&rev].state,
        Lifecycle::Available
    );
    assert_eq!(block_exists(&f, &a), Some(true));
    assert_eq!(f.tier.read_object(&ROOT, &a).unwrap().unwrap(), f.local[&a]);
}

#[test]
fn a_dependency_keeps_its_owner_until_the_child_goes() {
    let mut f = fixture(small());
    let a = f.add(30_000, 50);
    let c = f.add(30_000, 51);
    let r1 = f.publish(1, &[a]).unwrap().revision.unwrap();
    let r2 = f.publish(2, &[a, c]).unwrap().revision.unwrap();
    f.tier.release_change(&ROOT, 1).unwrap();
    let g = f.tier.collect().unwrap();
    assert_eq!(g.claimed, 0, "r2 still depends on r1: {g:?}");
    assert_eq!(block_exists(&f, &a), Some(true));
    f.tier.release_change(&ROOT, 2).unwrap();
    let g = f.tier.collect().unwrap();
    assert_eq!((g.claimed, g.deleted), (1, 1), "r2 goes first: {g:?}");
    assert_eq!(f.tier.revisions().unwrap()[&r1].strong, 0);
    let g = f.tier.collect().unwrap();
    assert_eq!((g.claimed, g.deleted), (1, 1), "then r1: {g:?}");
    let revs = f.tier.revisions().unwrap();
    assert_eq!(
        (revs[&r1].state, revs[&r2].state),
        (Lifecycle::Deleted, Lifecycle::Deleted)
    );
    assert_eq!(f.tier.verify().unwrap(), Vec::<String>::new());
}

#[test]
fn an_ambiguous_delete_is_quarantined_takes_no_reference_and_is_finished_later() {
    let dir = tempfile::tempdir().unwrap();
    let flaky = recording(1);
    let tier = Tier::open(&dir.path().join("tier.redb"), 1, flaky.clone(), small()).unwrap();
    let (a, bytes) = chunk(30_000, 60);
    let read = |_: &ObjectId| Ok(bytes.clone());
    let r1 = tier
        .publish_change(&ROOT, 1, &[a], &read)
        .unwrap()
        .revision
        .unwrap();
    tier.release_change(&ROOT, 1).unwrap();
    let g = tier.collect().unwrap();
    assert_eq!(g.quarantined, vec![hex::encode(r1)], "{g:?}");
    assert_eq!(tier.revisions().unwrap()[&r1].state, Lifecycle::Deleting);
    assert!(tier.quarantined().unwrap()[0]
        .1
        .contains("connection reset"));
    // A new change naming a's bytes does not reference the revision being
    // deleted: a is uploaded again under the new revision.
    let p = tier.publish_change(&ROOT, 2, &[a], &read).unwrap();
    let r2 = p.revision.expect("re-uploaded");
    assert_eq!((p.reused, p.dependencies), (0, 0));
    // The next collection finishes r1; a stays readable through r2.
    let g = tier.collect().unwrap();
    assert_eq!(g.deleted, 1, "{g:?}");
    assert!(tier.quarantined().unwrap().is_empty());
    let loc = tier.locate(&ROOT, &a).unwrap().unwrap();
    assert_eq!(loc.key.revision, r2);
    assert_eq!(tier.read_object(&ROOT, &a).unwrap().unwrap(), bytes);
    assert_eq!(tier.verify().unwrap(), Vec::<String>::new());
}

#[test]
fn a_file_revision_given_up_releases_its_content_revision_and_keeps_the_commit() {
    let mut f = fixture(small());
    // Change 1: a.bin (a1 and a shared chunk s); change 2: a.bin again
    // (a2 and s); change 3: b.bin (b3); change 4: b.bin (b4).
    let (m1, m2, m3, m4) = (f.add(100, 1), f.add(100, 2), f.add(100, 3), f.add(100, 4));
    let (a1, a2, s) = (f.add(300_000, 5), f.add(300_000, 6), f.add(20_000, 7));
    let (b3, b4) = (f.add(300_000, 8), f.add(20_000, 9));
    let p1 = f.publish_files(1, &[m1], &[("a.bin", &[a1, s])]);
    let p2 = f.publish_files(2, &[m2], &[("a.bin", &[a2, s])]);
    let p3 = f.publish_files(3, &[m3], &[("b.bin", &[b3])]);
    let p4 = f.publish_files(4, &[m4], &[("b.bin", &[b4])]);
    for p in [&p1, &p2, &p3, &p4] {
        assert!(
            p.revision.is_some() && p.content_revision.is_some(),
            "{p:?}"
        );
    }
    assert_eq!(p2.reused, 1, "s is not uploaded again");
    let r1c = p1.content_revision.unwrap();
    let r3c = p3.content_revision.unwrap();
    let revs = f.tier.revisions().unwrap();
    assert_eq!(revs[&r1c].strong, 2, "a.bin@1 and a.bin@2 (through s)");

    // Giving up a.bin@1 leaves r1c referenced by a.bin@2 (s): kept.
    assert_eq!(
        f.tier
            .release_files(&ROOT, &[(1, "a.bin".to_string())])
            .unwrap(),
        1
    );
    let g = f.tier.collect().unwrap();
    assert_eq!(g.claimed, 0, "{g:?}");
    assert_eq!(
        f.tier.read_object(&ROOT, &a1).unwrap().unwrap(),
        f.local[&a1]
    );

    // Giving up b.bin@3 frees r3c: its blocks go, the commit stays.
    let b3_key = f.tier.locate(&ROOT, &b3).unwrap().unwrap().key.to_key();
    f.tier
        .release_files(&ROOT, &[(3, "b.bin".to_string())])
        .unwrap();
    let g = f.tier.collect().unwrap();
    assert_eq!((g.claimed, g.deleted), (1, 1), "{g:?}");
    assert!(
        f.provider.head(&b3_key).unwrap().is_none(),
        "{b3_key} is gone"
    );
    let revs = f.tier.revisions().unwrap();
    assert_eq!(revs[&r3c].state, Lifecycle::Deleted);
    assert_eq!(revs[&p3.revision.unwrap()].state, Lifecycle::Available);
    assert_eq!(f.tier.read_object(&ROOT, &b3).unwrap(), None);
    for id in [m1, m2, m3, m4, a1, a2, s, b4] {
        assert_eq!(
            f.tier.read_object(&ROOT, &id).unwrap().unwrap(),
            f.local[&id]
        );
    }
    assert_eq!(
        f.tier.purged(&ROOT).unwrap(),
        vec![(1, "a.bin".to_string()), (3, "b.bin".to_string())]
    );
    // Again: nothing more to release.
    assert_eq!(
        f.tier
            .release_files(&ROOT, &[(3, "b.bin".to_string())])
            .unwrap(),
        0
    );
    assert_eq!(f.tier.verify().unwrap(), Vec::<String>::new());
}

#[test]
fn a_chunk_named_again_before_collection_keeps_its_revision() {
    let mut f = fixture(small());
    let (m1, m2) = (f.add(100, 11), f.add(100, 12));
    let a = f.add(300_000, 13);
    let p1 = f.publish_files(1, &[m1], &[("a.bin", &[a])]);
    let r1c = p1.content_revision.unwrap();
    f.tier
        .release_files(&ROOT, &[(1, "a.bin".to_string())])
        .unwrap();
    assert_eq!(f.tier.revisions().unwrap()[&r1c].strong, 0);
    // A new change names a's bytes (a copy submitted meanwhile): the new
    // reference needs an Available revision, which r1c still is; it moves
    // the epoch, so the candidate is stale.
    let p2 = f.publish_files(2, &[m2], &[("copy.bin", &[a])]);
    assert_eq!((p2.content_revision, p2.reused), (None, 1));
    let g = f.tier.collect().unwrap();
    assert_eq!((g.claimed, g.stale), (0, 1), "{g:?}");
    assert_eq!(
        f.tier.revisions().unwrap()[&r1c].state,
        Lifecycle::Available
    );
    assert_eq!(f.tier.read_object(&ROOT, &a).unwrap().unwrap(), f.local[&a]);
    assert_eq!(f.tier.verify().unwrap(), Vec::<String>::new());
}

fn write_head(dir: &std::path::Path, segment: u64, offset: u64) {
    let h = scribe_format::recovery::ArchiveHead {
        identity: [7; 16],
        segment,
        offset,
        end: segment * 1000 + offset,
        chain: [segment as u8; 32],
    };
    std::fs::write(dir.join("HEAD"), h.encode()).unwrap();
}

#[test]
fn an_archive_ships_in_immutable_steps_survives_a_lost_cursor_and_fetches_back_exactly() {
    use scribe_format::recovery::segment_file_name;
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("a.recovery");
    std::fs::create_dir_all(&archive).unwrap();
    let seg1: Vec<u8> = (0..100u8).collect();
    let seg2: Vec<u8> = (100..150u8).collect();
    let provider = Arc::new(S3Provider::new(&config()).unwrap());
    let tier = Tier::open(&dir.path().join("t.redb"), 9, provider.clone(), small()).unwrap();
    // Step 1: 60 published bytes of segment 1 (the tail beyond HEAD is not
    // published and not shipped).
    std::fs::write(archive.join(segment_file_name(1)), &seg1[..80]).unwrap();
    write_head(&archive, 1, 60);
    let s = tier.ship_archive("r", &archive).unwrap();
    assert_eq!((s.step, s.bytes), (1, 60));
    assert_eq!(
        tier.ship_archive("r", &archive).unwrap().step,
        0,
        "nothing new"
    );
    // Step 2: the rest of segment 1 and 50 bytes of segment 2.
    std::fs::write(archive.join(segment_file_name(1)), &seg1).unwrap();
    std::fs::write(archive.join(segment_file_name(2)), &seg2).unwrap();
    write_head(&archive, 2, 50);
    let s = tier.ship_archive("r", &archive).unwrap();
    assert_eq!((s.step, s.bytes), (2, 90));
    let fetched = dir.path().join("fetched");
    assert_eq!(tier.fetch_archive("r", &fetched).unwrap(), 2);
    assert_eq!(
        std::fs::read(fetched.join(segment_file_name(1))).unwrap(),
        seg1
    );
    assert_eq!(
        std::fs::read(fetched.join(segment_file_name(2))).unwrap(),
        seg2
    );
    assert_eq!(
        std::fs::read(fetched.join("HEAD")).unwrap(),
        std::fs::read(archive.join("HEAD")).unwrap()
    );
    // A record that lost its cursor (a crash after a step's upload) meets
    // the steps already in the bucket: it takes each as shipped (the keys
    // are never overwritten) and continues after them.
    let lost = Tier::open(&dir.path().join("t2.redb"), 9, provider, small()).unwrap();
    let mut seg2b = seg2.clone();
    seg2b.extend(150..170u8);
    std::fs::write(archive.join(segment_file_name(2)), &seg2b).unwrap();
    write_head(&archive, 2, 70);
    let mut rounds = 0;
    let s = loop {
        let s = lost.ship_archive("r", &archive).unwrap();
        rounds += 1;
        if s.step > 0 {
            break s;
        }
        assert!(rounds < 5, "never continued");
    };
    assert_eq!((s.step, s.segment, s.offset), (3, 2, 70));
    let again = dir.path().join("again");
    assert_eq!(lost.fetch_archive("r", &again).unwrap(), 3);
    assert_eq!(
        std::fs::read(again.join(segment_file_name(2))).unwrap(),
        seg2b
    );
}

#[test]
fn a_record_rebuilt_from_the_bucket_alone_is_the_record() {
    let mut f = fixture(small());
    let (m1, m2, m3) = (f.add(100, 31), f.add(100, 32), f.add(100, 33));
    let (a1, s, b2) = (f.add(300_000, 34), f.add(20_000, 35), f.add(300_000, 36));
    f.publish_files(1, &[m1], &[("a.bin", &[a1, s])]);
    f.publish_files(2, &[m2, m1], &[("b.bin", &[b2, s])]);
    // Change 3 brings nothing new: references only.
    f.publish_files(3, &[m3], &[("c.bin", &[s])]);
    f.tier
        .release_files(&ROOT, &[(2, "b.bin".to_string())])
        .unwrap();
    f.tier.collect().unwrap();
    let commits: [&[ObjectId]; 3] = [&[m1], &[m2, m1], &[m3]];

    // tier.redb is lost: rebuild it from the bucket.
    let dir = tempfile::tempdir().unwrap();
    let rebuilt = Tier::create_restored(
        &dir.path().join("tier.redb"),
        f.tier.shard(),
        0xabcd_0001,
        f.provider.clone(),
        small(),
    )
    .unwrap();
    assert_eq!(rebuilt.journal_shard(), 0xabcd_0001);
    // Out of order, and with another commit list (another change under
    // the same number): refused.
    assert!(matches!(
        rebuilt.restore_change(&ROOT, 2, commits[1]),
        Err(TierError::OutOfOrder { .. })
    ));
    let e = rebuilt.restore_change(&ROOT, 1, &[m2]).unwrap_err();
    assert!(matches!(e, TierError::Damaged { .. }), "{e}");
    for (i, c) in commits.iter().enumerate() {
        rebuilt.restore_change(&ROOT, i as u64 + 1, c).unwrap();
    }
    assert_eq!(rebuilt.restore_releases(&ROOT).unwrap(), 1);
    assert_eq!(rebuilt.revisions().unwrap(), f.tier.revisions().unwrap());
    assert_eq!(
        rebuilt.purged(&ROOT).unwrap(),
        f.tier.purged(&ROOT).unwrap()
    );
    assert_eq!(rebuilt.uploaded_through(&ROOT).unwrap(), 3);
    for id in [m1, m2, m3, a1, s, b2] {
        assert_eq!(
            rebuilt.locate(&ROOT, &id).unwrap(),
            f.tier.locate(&ROOT, &id).unwrap(),
            "{id}"
        );
    }
    assert_eq!(rebuilt.verify().unwrap(), Vec::<String>::new());
    // Publication continues on the rebuilt record.
    let m4 = f.add(100, 37);
    let local = f.local.clone();
    rebuilt
        .publish_change(&ROOT, 4, &[m4], &|id| Ok(local[id].clone()))
        .unwrap();
    assert_eq!(rebuilt.verify().unwrap(), Vec::<String>::new());
}

#[test]
fn a_created_block_is_not_headed_again() {
    // The PUT's `Created` answer is the verification: publication costs one
    // request per block (and one for its index record), no `head`.
    let mut f = fixture(small());
    let ids: Vec<ObjectId> = (0..3).map(|i| f.add(300_000, 200 + i)).collect();
    let p = f.publish(1, &ids).unwrap();
    assert_eq!(p.blocks, 3);
    assert_eq!(*f.provider.heads.lock().unwrap(), 0);
    assert_eq!(
        f.provider.puts.lock().unwrap().len(),
        4,
        "3 blocks and the index record"
    );
    assert_eq!(f.tier.verify().unwrap(), Vec::<String>::new());
}

#[test]
fn chunks_uploaded_before_their_submit_are_adopted_not_uploaded_again() {
    let mut f = fixture(small());
    let m = f.add(100, 300);
    let (a, b, c, d) = (
        f.add(300_000, 301), // its own block
        f.add(20_000, 302),
        f.add(30_000, 303),
        f.add(20_000, 304), // not staged: uploaded by the publication
    );
    let x = f.add(40_000, 305); // staged by an operation never submitted
    let local = f.local.clone();
    let read = |id: &ObjectId| Ok::<_, String>(local[id].clone());
    let (op1, op2) = ([1u8; 16], [2u8; 16]);
    let s1 = f.tier.prestage(&ROOT, &op1, &[a, b], &read).unwrap();
    let s1b = f.tier.prestage(&ROOT, &op1, &[c, a], &read).unwrap();
    assert_eq!(
        (s1.objects, s1.blocks, s1b.objects),
        (2, 2, 1),
        "{s1:?} {s1b:?}"
    );
    assert_eq!(
        s1.revision, s1b.revision,
        "one staged revision per operation"
    );
    let staged_rev = s1.revision.unwrap();
    let s2 = f.tier.prestage(&ROOT, &op2, &[x], &read).unwrap();
    let abandoned = s2.revision.unwrap();
    assert_eq!(f.tier.staging().unwrap().len(), 2);
    let before: Vec<String> = f.provider.puts.lock().unwrap().clone();

    let p = f.publish_files(1, &[m], &[("f.bin", &[a, b, c, d])]);
    assert_eq!(p.content_revision, Some(staged_rev), "{p:?}");
    assert_eq!(p.prestaged, 3);
    let after: Vec<String> = f.provider.puts.lock().unwrap()[before.len()..].to_vec();
    let blocks_after: Vec<&String> = after
        .iter()
        .filter(|k| k.starts_with("nokv/artifacts/"))
        .collect();
    // d's block (after the three staged ones) and the commit revision's.
    assert_eq!(blocks_after.len(), 2, "{after:?}");
    for k in &blocks_after {
        assert!(!before.contains(k), "{k} written twice");
    }
    let row = &f.tier.revisions().unwrap()[&staged_rev];
    assert_eq!((row.blocks, row.strong), (4, 1), "{row:?}");
    for id in [m, a, b, c, d] {
        assert_eq!(
            &f.tier.read_object(&ROOT, &id).unwrap().unwrap(),
            &f.local[&id]
        );
    }
    assert_eq!(f.tier.locate(&ROOT, &d).unwrap().unwrap().key.index, 3);
    assert_eq!(f.tier.verify().unwrap(), Vec::<String>::new());
    // Staging again for a published chunk uploads nothing.
    assert_eq!(
        f.tier.prestage(&ROOT, &op1, &[a], &read).unwrap().objects,
        0
    );

    // The never-submitted operation: not given up while young, then its
    // revision is deleted with every block it reserved.
    assert_eq!(f.tier.abandon_staged(3600).unwrap(), 0);
    assert_eq!(f.tier.abandon_staged(0).unwrap(), 1);
    assert!(f.tier.staging().unwrap().is_empty());
    let key = BlockKey::new(f.tier.shard(), ROOT, abandoned, 0).to_key();
    assert_eq!(f.provider.head(&key).unwrap(), None, "{key}");
    assert_eq!(
        f.tier.revisions().unwrap()[&abandoned].state,
        Lifecycle::Deleted
    );
    assert_eq!(f.tier.read_object(&ROOT, &x).unwrap(), None);
    assert_eq!(f.tier.verify().unwrap(), Vec::<String>::new());
}

#[test]
fn a_staging_made_after_its_publication_is_given_up_at_once_and_others_kept() {
    let mut f = fixture(small());
    let m = f.add(100, 320);
    let (a, late, other) = (f.add(30_000, 321), f.add(30_000, 322), f.add(30_000, 323));
    let local = f.local.clone();
    let read = |id: &ObjectId| Ok::<_, String>(local[id].clone());
    let (op, op2) = ([5u8; 16], [6u8; 16]);
    let p = f.publish_files(1, &[m], &[("f.bin", &[a])]);
    assert_eq!(p.prestaged, 0);
    // An early upload of the same operation that outlived the
    // publication's wait: its entry is young, so the age sweep keeps it.
    let s = f.tier.prestage(&ROOT, &op, &[late], &read).unwrap();
    let rev = s.revision.unwrap();
    f.tier.prestage(&ROOT, &op2, &[other], &read).unwrap();
    assert_eq!(f.tier.abandon_staged(3600).unwrap(), 0);
    assert_eq!(f.tier.staging().unwrap().len(), 2);

    assert!(f.tier.give_up_staging(&ROOT, &op).unwrap());
    assert!(!f.tier.give_up_staging(&ROOT, &op).unwrap(), "only once");
    let left = f.tier.staging().unwrap();
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].1, op2, "another operation's entry is kept");
    let key = BlockKey::new(f.tier.shard(), ROOT, rev, 0).to_key();
    assert_eq!(f.provider.head(&key).unwrap(), None, "{key}");
    assert_eq!(f.tier.revisions().unwrap()[&rev].state, Lifecycle::Deleted);
    assert_eq!(f.tier.read_object(&ROOT, &late).unwrap(), None);
    assert_eq!(
        &f.tier.read_object(&ROOT, &a).unwrap().unwrap(),
        &f.local[&a]
    );
    assert_eq!(f.tier.verify().unwrap(), Vec::<String>::new());
}

#[test]
fn a_publication_adopting_staged_blocks_retried_after_a_failure_keeps_its_keys() {
    let mut f = fixture(small());
    let m = f.add(100, 310);
    let (a, b) = (f.add(300_000, 311), f.add(300_000, 312));
    let local = f.local.clone();
    let op = [3u8; 16];
    f.tier
        .prestage(&ROOT, &op, &[a], &|id| Ok(local[id].clone()))
        .unwrap();
    // b cannot be read: the publication stops after adopting.
    let files = [FileVersion {
        path: "f.bin".into(),
        chunks: vec![a, b],
    }];
    let e = f
        .tier
        .publish_commit(&ROOT, 1, &[m], &files, &|id| {
            if *id == b {
                Err("disk read error".into())
            } else {
                Ok(local[id].clone())
            }
        })
        .unwrap_err();
    assert!(matches!(e, TierError::Local { .. }), "{e}");
    assert!(f.tier.staging().unwrap().is_empty(), "adopted");
    let p = f.publish_files(1, &[m], &[("f.bin", &[a, b])]);
    assert_eq!(p.prestaged, 1);
    assert_eq!(f.tier.locate(&ROOT, &b).unwrap().unwrap().key.index, 1);
    assert_eq!(f.tier.verify().unwrap(), Vec::<String>::new());
}

#[test]
fn a_released_change_is_recorded_in_the_bucket_and_stays_released_in_a_rebuilt_record() {
    let mut f = fixture(small());
    let (a, b) = (f.add(30_000, 320), f.add(30_000, 321));
    let first = f.publish(1, &[a]).unwrap().revision.unwrap();
    let second = f.publish(2, &[b]).unwrap().revision.unwrap();
    assert_eq!(f.tier.release_change(&ROOT, 1).unwrap(), 1);
    f.tier.collect().unwrap();
    assert_eq!(
        f.tier.revisions().unwrap()[&first].state,
        Lifecycle::Deleted
    );

    let dir = tempfile::tempdir().unwrap();
    let rebuilt = Tier::create_restored(
        &dir.path().join("tier.redb"),
        f.tier.shard(),
        0xabcd_0002,
        f.provider.clone(),
        small(),
    )
    .unwrap();
    rebuilt.restore_change(&ROOT, 1, &[a]).unwrap();
    rebuilt.restore_change(&ROOT, 2, &[b]).unwrap();
    assert_eq!(rebuilt.restore_releases(&ROOT).unwrap(), 1);
    let revs = rebuilt.revisions().unwrap();
    assert_eq!(revs[&first].state, Lifecycle::Deleted, "given up again");
    assert_eq!(revs[&second].state, Lifecycle::Available);
    assert_eq!(revs, f.tier.revisions().unwrap());
    assert!(
        rebuilt.purged(&ROOT).unwrap().is_empty(),
        "no file revision named"
    );
    assert_eq!(rebuilt.verify().unwrap(), Vec::<String>::new());
}

#[test]
fn a_root_file_changed_after_it_shipped_ships_again_under_a_new_key() {
    let f = fixture(small());
    let shard = f.tier.journal_shard();
    let fetch = || {
        nokv_bridge::tier::fetch_root_file(&*f.provider, shard, "r/SCRIBE_FORMAT")
            .unwrap()
            .unwrap()
            .to_vec()
    };
    assert_eq!(
        f.tier
            .ship_root_file_version("r/SCRIBE_FORMAT", b"one")
            .unwrap(),
        0
    );
    assert_eq!(
        f.tier
            .ship_root_file_version("r/SCRIBE_FORMAT", b"one")
            .unwrap(),
        0
    );
    assert_eq!(fetch(), b"one");
    assert_eq!(
        f.tier
            .ship_root_file_version("r/SCRIBE_FORMAT", b"two")
            .unwrap(),
        1
    );
    assert_eq!(fetch(), b"two");
    let puts = f.provider.puts.lock().unwrap().len();
    assert_eq!(
        f.tier
            .ship_root_file_version("r/SCRIBE_FORMAT", b"two")
            .unwrap(),
        1
    );
    assert_eq!(
        f.tier
            .ship_root_file_version("r/SCRIBE_FORMAT", b"three")
            .unwrap(),
        2
    );
    assert_eq!(fetch(), b"three");
    // The same bytes again wrote nothing but the first try at the first key.
    assert_eq!(f.provider.puts.lock().unwrap().len(), puts + 3);
    // The versions before are kept, never overwritten.
    let prefix = format!("nokv/recovery/{shard:08x}/r/SCRIBE_FORMAT");
    assert_eq!(f.provider.get(&prefix).unwrap().as_ref(), b"one");
}

/// Every key the bucket holds below `prefix` (the tier's own names).
fn keys_below(f: &Fixture, prefix: &str) -> Vec<String> {
    let mut k = f.provider.list_keys(prefix).unwrap();
    k.sort();
    k
}

/// A repository deleted on a tiered data root gives its whole history up
/// through the GC (references, counts, candidates, claims), its index
/// and release records and recovery journal go, a deletion record stays
/// for restores; another root holding the same content keeps its blocks
/// (manifest rows are per root: nothing crosses roots). An uncertain
/// delete leaves the deletion unfinished and named by `verify`; the next
/// run finishes it.
#[test]
fn a_root_deleted_whole_leaves_no_block_index_or_journal_and_another_root_keeps_its_copy() {
    const OTHER: [u8; 16] = [0x77; 16];
    let mut f = fixture(small());
    let (m1, m2, m3) = (f.add(100, 501), f.add(100, 502), f.add(100, 503));
    let (a, s, c) = (f.add(300_000, 504), f.add(20_000, 505), f.add(30_000, 506));
    let x = f.add(40_000, 507); // staged by an operation never submitted
                                // ROOT: change 1 (a, s), change 2 (s again, c: a dependency on 1's
                                // content revision), file revision c.bin@2 given up (a release
                                // record); a staging entry; a shipped descriptor.
    f.publish_files(1, &[m1], &[("a.bin", &[a, s])]);
    f.publish_files(2, &[m2], &[("s.bin", &[s]), ("c.bin", &[c])]);
    f.tier
        .release_files(&ROOT, &[(2, "c.bin".to_string())])
        .unwrap();
    let local = f.local.clone();
    let read = |id: &ObjectId| Ok::<_, String>(local[id].clone());
    f.tier.prestage(&ROOT, &[9; 16], &[x], &read).unwrap();
    f.tier
        .ship_root_file_version(&format!("{}/SCRIBE_FORMAT", hex::encode(ROOT)), b"desc")
        .unwrap();
    // OTHER: the same content, its own copy.
    let files = vec![FileVersion {
        path: "a.bin".into(),
        chunks: vec![a, s],
    }];
    f.tier
        .publish_commit(&OTHER, 1, &[m3], &files, &read)
        .unwrap();
    let shard = f.tier.shard();
    let artifacts = format!("nokv/artifacts/{shard:08x}/{}", hex::encode(ROOT));
    let index = format!("nokv/index/{shard:08x}/{}", hex::encode(ROOT));
    let journal = format!(
        "nokv/recovery/{:08x}/{}",
        f.tier.journal_shard(),
        hex::encode(ROOT)
    );
    assert!(!keys_below(&f, &artifacts).is_empty());
    assert_eq!(
        keys_below(&f, &index).len(),
        3,
        "two index records, one release record"
    );
    assert_eq!(keys_below(&f, &journal).len(), 1);

    // The first run meets only uncertain deletes: unfinished, named.
    *f.provider.ambiguous.lock().unwrap() = 1000;
    f.tier.mark_root_deleted(&ROOT, "game").unwrap();
    let d = f.tier.finish_root_deletion(&ROOT, &[]).unwrap();
    assert!(!d.unfinished.is_empty(), "{d:?}");
    assert!(
        nokv_bridge::tier::root_deleted_in_bucket(&*f.provider, shard, &ROOT).unwrap(),
        "the deletion record goes first"
    );
    let problems = f.tier.verify().unwrap();
    assert!(
        problems.iter().any(|p| p.contains("repository game")),
        "{problems:?}"
    );
    assert!(
        !keys_below(&f, &artifacts).is_empty() && keys_below(&f, &index).len() == 4,
        "nothing deleted for certain: the blocks and records stay"
    );
    // The next run finishes it.
    *f.provider.ambiguous.lock().unwrap() = 0;
    let d = f.tier.finish_root_deletion(&ROOT, &[]).unwrap();
    assert!(d.unfinished.is_empty(), "{d:?}");
    assert_eq!(
        keys_below(&f, &artifacts),
        Vec::<String>::new(),
        "no block left"
    );
    assert_eq!(
        keys_below(&f, &index),
        vec![nokv_bridge::tier::deletion_key(shard, &ROOT)]
    );
    assert_eq!(keys_below(&f, &journal), Vec::<String>::new());
    let revs = f.tier.revisions().unwrap();
    assert!(revs
        .values()
        .filter(|r| r.root == ROOT)
        .all(|r| r.state == Lifecycle::Deleted));
    assert_eq!(
        revs.values().filter(|r| r.root == ROOT).count(),
        5,
        "two commit revisions, two content revisions, the staged one"
    );
    assert!(f.tier.staging().unwrap().is_empty());
    assert_eq!(f.tier.uploaded_through(&ROOT).unwrap(), 0);
    assert!(f.tier.purged(&ROOT).unwrap().is_empty());
    assert!(f.tier.roots_being_deleted().unwrap().is_empty());
    for id in [a, s, m1, c] {
        assert_eq!(f.tier.read_object(&ROOT, &id).unwrap(), None);
    }
    // The other root's copy stays.
    for id in [a, s, m3] {
        assert_eq!(
            f.tier.read_object(&OTHER, &id).unwrap().unwrap(),
            f.local[&id]
        );
    }
    assert!(!nokv_bridge::tier::root_deleted_in_bucket(&*f.provider, shard, &OTHER).unwrap());
    assert_eq!(f.tier.verify().unwrap(), Vec::<String>::new());
}

/// A root restored from other data roots shipped journals under their
/// journal shards before the restore: its deletion gives those up too
/// (they were left behind), not a sibling restore's or another root's,
/// and deletes the root's metadata objects in one batched request (they
/// went one request each).
#[test]
fn a_root_deleted_whole_gives_up_its_journals_under_the_shards_it_was_restored_from_in_one_batch() {
    const OTHER: [u8; 16] = [0x77; 16];
    let mut f = fixture(small());
    let (m1, a) = (f.add(100, 601), f.add(30_000, 602));
    f.publish_files(1, &[m1], &[("a.bin", &[a])]);
    let rh = hex::encode(ROOT);
    let (earlier, oldest, sibling) = (0x0a0a_0a0a_u32, 0x0b0b_0b0b_u32, 0x0c0c_0c0c_u32);
    // Journal objects shipped by the roots this one was restored from,
    // by a sibling restore (not an ancestor), and another root's.
    let put = |k: String| {
        f.provider
            .put_if_absent(&k, bytes::Bytes::from_static(b"journal"))
            .unwrap();
        k
    };
    let mut doomed = Vec::new();
    for s in [earlier, oldest] {
        doomed.push(put(format!("nokv/recovery/{s:08x}/{rh}/SCRIBE_FORMAT")));
        doomed.push(put(format!(
            "nokv/recovery/{s:08x}/{rh}/{:020}/{:016x}-{:016x}",
            1, 0, 7
        )));
        doomed.push(put(format!("nokv/recovery/{s:08x}/{rh}/head/{:016x}", 1)));
    }
    let kept = [
        put(format!("nokv/recovery/{sibling:08x}/{rh}/head/{:016x}", 1)),
        put(format!(
            "nokv/recovery/{earlier:08x}/{}/head/{:016x}",
            hex::encode(OTHER),
            1
        )),
    ];
    let own = put(format!(
        "nokv/recovery/{:08x}/{rh}/head/{:016x}",
        f.tier.journal_shard(),
        1
    ));

    f.tier.mark_root_deleted(&ROOT, "game").unwrap();
    let d = f
        .tier
        .finish_root_deletion(&ROOT, &[earlier, oldest])
        .unwrap();
    assert!(d.unfinished.is_empty(), "{d:?}");
    for k in doomed.iter().chain([&own]) {
        assert!(f.provider.head(k).unwrap().is_none(), "{k} is left");
    }
    for k in &kept {
        assert!(f.provider.head(k).unwrap().is_some(), "{k} was deleted");
    }
    // Its blocks in one request (the collection), then its index record
    // and the seven journal objects in one more.
    assert_eq!(d.metadata_deleted, 8, "{d:?}");
    assert_eq!(*f.provider.batches.lock().unwrap(), vec![2, 8]);
    assert_eq!(f.tier.verify().unwrap(), Vec::<String>::new());
}

/// A data root's notes (`former-names`, `retired-repositories`) ship as
/// sealed versions: the newest comes back as its bytes; the same bytes
/// again write nothing; a version whose bytes do not match its seal, or
/// that is another file's, is refused by key, never returned.
#[test]
fn a_sealed_root_file_comes_back_as_shipped_and_a_damaged_version_is_refused() {
    use nokv_bridge::tier::fetch_sealed_root_file;
    let f = fixture(small());
    let shard = f.tier.journal_shard();
    assert_eq!(
        fetch_sealed_root_file(&*f.provider, shard, "former-names").unwrap(),
        None
    );
    let first = b"scribe-former-names 1\n".to_vec();
    let second = b"scribe-former-names 1\n00 1 old\n".to_vec();
    assert_eq!(
        f.tier
            .ship_sealed_root_file("former-names", &first)
            .unwrap(),
        0
    );
    assert_eq!(
        f.tier
            .ship_sealed_root_file("former-names", &second)
            .unwrap(),
        1
    );
    assert_eq!(
        f.tier
            .ship_sealed_root_file("former-names", &second)
            .unwrap(),
        1
    );
    assert_eq!(
        fetch_sealed_root_file(&*f.provider, shard, "former-names").unwrap(),
        Some(second.clone())
    );
    // Another file's sealed bytes under this name: refused.
    f.tier
        .ship_sealed_root_file("retired-repositories", &second)
        .unwrap();
    let key = |name: &str, v: u64| format!("nokv/recovery/{shard:08x}/{name}.v/{v:016x}");
    let foreign = f
        .provider
        .get(&format!("nokv/recovery/{shard:08x}/retired-repositories"))
        .unwrap();
    f.provider
        .put_if_absent(&key("former-names", 2), foreign)
        .unwrap();
    match fetch_sealed_root_file(&*f.provider, shard, "former-names") {
        Err(TierError::Damaged { key, .. }) => assert!(key.contains("former-names"), "{key}"),
        other => panic!("another file's version was not refused: {other:?}"),
    }
    // A version with one byte changed: refused.
    let mut bad = second.clone();
    bad[0] ^= 1;
    bad.extend_from_slice(&[0; 32]);
    f.provider
        .put_if_absent(&key("former-names", 3), bytes::Bytes::from(bad))
        .unwrap();
    assert!(matches!(
        fetch_sealed_root_file(&*f.provider, shard, "former-names"),
        Err(TierError::Damaged { .. })
    ));
}

#[test]
fn a_collection_deletes_the_blocks_of_its_revisions_in_batched_requests() {
    let mut f = fixture(small());
    // Three changes of three blocks each (two objects too big to share a
    // block, one small).
    let mut revs = Vec::new();
    for change in 1..=3u32 {
        let ids = [
            f.add(300_000, 40 + change * 3),
            f.add(300_000, 41 + change * 3),
            f.add(10_000, 42 + change * 3),
        ];
        let p = f.publish(u64::from(change), &ids).unwrap();
        assert_eq!(p.blocks, 3, "{p:?}");
        revs.push(p.revision.unwrap());
    }
    for change in 1..=3 {
        f.tier.release_change(&ROOT, change).unwrap();
    }
    let g = f.tier.collect().unwrap();
    assert_eq!((g.deleted, g.blocks_deleted), (3, 9), "{g:?}");
    assert!(g.quarantined.is_empty(), "{g:?}");
    // One batch for all nine blocks, not a request per block.
    assert_eq!(*f.provider.batches.lock().unwrap(), vec![9]);
    let rows = f.tier.revisions().unwrap();
    for rev in &revs {
        assert_eq!(rows[rev].state, Lifecycle::Deleted);
        for b in 0..3 {
            let key = BlockKey::new(0x0102_0304, ROOT, *rev, b).to_key();
            assert!(f.provider.inner.head(&key).unwrap().is_none(), "{key}");
        }
    }
    assert_eq!(f.tier.verify().unwrap(), Vec::<String>::new());
}

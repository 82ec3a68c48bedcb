use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;

use scribe_format::{ObjectId, ObjectKind};
use scribe_objects::{
    compact, verify_dir, CompactContext, CompactFailpoint, CompactOptions, Location, ObjectStore,
    StoreError, StoreOptions,
};

use super::support::{noise, pack_file, small_packs, TestStore};

const CTX: CompactContext = CompactContext {
    repository: [7; 16],
    journal_end: 42,
};

type Live = (ObjectId, Vec<u8>);

/// A store with live and dead objects, packed and loose, over several packs.
fn populated(opts: StoreOptions, count: u64) -> (TestStore, Vec<Live>, Vec<ObjectId>) {
    let (t, store) = TestStore::new(opts);
    let mut live = Vec::new();
    let mut dead = Vec::new();
    let batch = store.batch();
    for i in 0..count {
        let payload = noise(200 + (i as usize % 7) * 300, i);
        let id = batch.put(ObjectKind::Chunk, &payload).unwrap();
        // Dead objects cluster in the early packs.
        if (i < count / 2 && i % 4 != 0) || i % 10 == 3 {
            dead.push(id);
        } else {
            live.push((id, payload));
        }
    }
    let lp = noise(9000, 1_000_000);
    live.push((batch.put(ObjectKind::Manifest, &lp).unwrap(), lp));
    dead.push(
        batch
            .put(ObjectKind::Manifest, &noise(9000, 2_000_000))
            .unwrap(),
    );
    batch.commit().unwrap();
    (t, live, dead)
}

fn check_result(t: &TestStore, live: &[(ObjectId, Vec<u8>)], dead: &[ObjectId]) {
    let store = ObjectStore::open(&t.dir).unwrap();
    assert_eq!(store.len().unwrap(), live.len() as u64);
    for (id, p) in live {
        assert_eq!(&store.get(id).unwrap(), p);
    }
    for id in dead {
        assert!(!store.contains(id).unwrap());
    }
    assert!(store.verify().unwrap().is_clean());
    drop(store);
    assert!(verify_dir(&t.dir).unwrap().is_clean());
    let names: BTreeSet<String> = std::fs::read_dir(t.tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("objects"))
        .collect();
    assert_eq!(
        names,
        BTreeSet::from(["objects".to_string()]),
        "scratch state removed"
    );
}

#[test]
fn full_compaction_retains_exactly_the_live_set() {
    let (t, live, dead) = populated(small_packs(), 300);
    let d = t.dir.join("SCRIBE_FORMAT");
    let text = std::fs::read_to_string(&d).unwrap();
    std::fs::write(&d, format!("{text}future-key = kept\n")).unwrap();
    let before = std::fs::read_dir(t.dir.join("packs")).unwrap().count();
    let report = compact(
        &t.dir,
        live.iter().map(|l| l.0),
        CTX,
        &CompactOptions::default(),
    )
    .unwrap();
    assert_eq!(report.retained_objects, live.len() as u64);
    assert!(std::fs::read_dir(t.dir.join("packs")).unwrap().count() < before);
    check_result(&t, &live, &dead);
    assert!(std::fs::read_to_string(&d)
        .unwrap()
        .ends_with("future-key = kept\n"));
}

#[test]
fn full_compaction_interrupted_at_each_step_resumes() {
    use CompactFailpoint::*;
    for fp in [
        AfterFirstCopyBatch,
        BeforeMarker,
        AfterTemporaryMarker,
        AfterMarker,
        AfterRenameToPrevious,
        AfterRenameIntoPlace,
        AfterRemovePrevious,
    ] {
        let (t, live, dead) = populated(small_packs(), 700);
        let opts = CompactOptions {
            failpoint: Some(fp),
            ..CompactOptions::default()
        };
        let err = compact(&t.dir, live.iter().map(|l| l.0), CTX, &opts).unwrap_err();
        assert!(matches!(err, StoreError::Injected(_)), "{fp:?}: {err}");
        let marker = t.path("objects.compaction-ready");
        if matches!(
            fp,
            AfterFirstCopyBatch | BeforeMarker | AfterTemporaryMarker
        ) {
            // The original store stays authoritative and complete.
            assert!(!marker.exists());
            let store = ObjectStore::open(&t.dir).unwrap();
            assert!(store.contains(&dead[0]).unwrap(), "{fp:?}");
        } else {
            assert!(marker.exists());
            assert!(
                ObjectStore::open(&t.dir).is_err(),
                "{fp:?}: open refuses while the marker is pending"
            );
        }
        // A changed journal refuses to complete a recorded swap.
        if marker.exists() {
            let other = CompactContext {
                journal_end: 43,
                ..CTX
            };
            assert!(matches!(
                compact(
                    &t.dir,
                    std::iter::empty(),
                    other,
                    &CompactOptions::default()
                ),
                Err(StoreError::CompactionRefused { .. })
            ));
        }
        let report = compact(
            &t.dir,
            live.iter().map(|l| l.0),
            CTX,
            &CompactOptions::default(),
        )
        .unwrap();
        assert_eq!(
            report.completed_pending_swap,
            marker_was_pending(fp),
            "{fp:?}"
        );
        check_result(&t, &live, &dead);
    }
}

fn marker_was_pending(fp: CompactFailpoint) -> bool {
    !matches!(
        fp,
        CompactFailpoint::AfterFirstCopyBatch
            | CompactFailpoint::BeforeMarker
            | CompactFailpoint::AfterTemporaryMarker
    )
}

#[test]
fn compaction_refusals() {
    let (t, live, _dead) = populated(small_packs(), 20);
    // A missing live object stops collection; the store is untouched.
    let mut ids: Vec<_> = live.iter().map(|l| l.0).collect();
    ids.push(ObjectId::new(ObjectKind::Chunk, [1; 32]));
    for incremental in [false, true] {
        let opts = CompactOptions {
            incremental,
            ..CompactOptions::default()
        };
        let err = compact(&t.dir, ids.clone(), CTX, &opts).unwrap_err();
        assert!(err.to_string().contains("missing"), "{err}");
        assert_eq!(ObjectStore::open(&t.dir).unwrap().len().unwrap(), 22);
    }
    // A malformed marker refuses.
    std::fs::write(t.path("objects.compaction-ready"), b"SCRGC1\0\0short").unwrap();
    assert!(matches!(
        compact(&t.dir, ids, CTX, &CompactOptions::default()),
        Err(StoreError::CompactionRefused { .. })
    ));
    assert!(matches!(
        ObjectStore::open(&t.dir),
        Err(StoreError::CompactionPending { .. })
    ));
}

#[test]
fn marker_bytes() {
    let (t, live, _) = populated(small_packs(), 10);
    let opts = CompactOptions {
        failpoint: Some(CompactFailpoint::AfterMarker),
        ..CompactOptions::default()
    };
    compact(&t.dir, live.iter().map(|l| l.0), CTX, &opts).unwrap_err();
    let m = std::fs::read(t.path("objects.compaction-ready")).unwrap();
    let mut expected = b"SCRGC1\0\0".to_vec();
    expected.extend_from_slice(&[7; 16]);
    expected.extend_from_slice(&42u64.to_le_bytes());
    assert_eq!(m, expected);
}

fn incremental_opts(budget: u64, failpoint: Option<CompactFailpoint>) -> CompactOptions {
    CompactOptions {
        incremental: true,
        budget,
        failpoint,
        ..CompactOptions::default()
    }
}

#[test]
fn incremental_rewrites_sparse_packs_and_links_the_rest() {
    let (t, live, dead) = populated(small_packs(), 1200);
    let packs_before: Vec<(u32, u64, u64)> = {
        let store = ObjectStore::open(&t.dir).unwrap();
        let mut v = Vec::new();
        for e in std::fs::read_dir(t.dir.join("packs")).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            let id = u32::from_str_radix(&name[..8], 16).unwrap();
            let m = e.metadata().unwrap();
            v.push((id, m.ino(), m.len()));
        }
        drop(store);
        v.sort();
        v
    };
    let last = packs_before.last().unwrap().0;
    let budget = 4 * 64 * 1024;
    let report = compact(
        &t.dir,
        live.iter().map(|l| l.0),
        CTX,
        &incremental_opts(budget, None),
    )
    .unwrap();
    assert!(report.selected_bytes <= budget);
    assert!(
        report.rewritten_packs > 0 && report.linked_packs > 0,
        "{report:?}"
    );
    assert!(report.copied_objects > 0);
    check_result(&t, &live, &dead[dead.len() / 2..]);
    let store = ObjectStore::open(&t.dir).unwrap();
    let mut linked = 0;
    for (id, ino, _) in &packs_before {
        if let Ok(m) = std::fs::metadata(pack_file(&t.dir, *id)) {
            assert_eq!(m.ino(), *ino, "unselected pack {id} is the same file");
            linked += 1;
        }
    }
    assert_eq!(linked, report.linked_packs);
    // Copied objects live in new packs above the source's last pack id.
    let copied = store
        .list()
        .unwrap()
        .into_iter()
        .filter(|(_, l)| matches!(l, Location::Packed { pack, .. } if *pack > last))
        .count();
    assert_eq!(copied as u64, report.copied_objects);
}

#[test]
fn incremental_interrupted_at_each_step_resumes() {
    use CompactFailpoint::*;
    for fp in [
        AfterIndexPublished,
        AfterFirstSeedBatch,
        AfterFirstCopyBatch,
        BeforeMarker,
        AfterMarker,
        AfterRenameToPrevious,
        AfterRemovePrevious,
    ] {
        let (t, live, _dead) = populated(small_packs(), 1500);
        let ids = || live.iter().map(|l| l.0);
        let err = compact(&t.dir, ids(), CTX, &incremental_opts(u64::MAX, Some(fp))).unwrap_err();
        assert!(matches!(err, StoreError::Injected(_)), "{fp:?}: {err}");
        compact(&t.dir, ids(), CTX, &incremental_opts(u64::MAX, None)).unwrap();
        let store = ObjectStore::open(&t.dir).unwrap();
        assert_eq!(store.len().unwrap(), live.len() as u64, "{fp:?}");
        for (id, p) in &live {
            assert_eq!(&store.get(id).unwrap(), p);
        }
        assert!(store.verify().unwrap().is_clean());
    }
}

#[test]
fn incremental_changed_boundary_discards_and_malformed_state_refuses() {
    let (t, live, _dead) = populated(small_packs(), 800);
    let ids = || live.iter().map(|l| l.0);
    let fp = Some(CompactFailpoint::AfterFirstCopyBatch);
    compact(&t.dir, ids(), CTX, &incremental_opts(u64::MAX, fp)).unwrap_err();
    // A new, well-formed boundary discards the old scratch pass.
    let newer = CompactContext {
        journal_end: 99,
        ..CTX
    };
    compact(&t.dir, ids(), newer, &incremental_opts(u64::MAX, fp)).unwrap_err();
    // Corrupt the durable state: refused, not guessed.
    {
        let db = redb::Database::open(t.path("objects.compaction-index.redb")).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let def: redb::TableDefinition<&str, &[u8]> =
                redb::TableDefinition::new("incremental_state");
            let mut tb = txn.open_table(def).unwrap();
            tb.insert("seed", [7u8].as_slice()).unwrap();
        }
        txn.commit().unwrap();
    }
    let err = compact(&t.dir, ids(), newer, &incremental_opts(u64::MAX, None)).unwrap_err();
    assert!(matches!(err, StoreError::CompactionRefused { .. }), "{err}");
    assert!(ObjectStore::open(&t.dir).unwrap().len().unwrap() > live.len() as u64);
}

fn link_opts(limit: usize, failpoint: Option<CompactFailpoint>) -> CompactOptions {
    CompactOptions {
        incremental: true,
        // Nothing fits: every pack with a live object is linked.
        budget: 0,
        failpoint,
        link_cache_limit: limit,
    }
}

#[test]
fn link_cache_is_bounded_and_reused_across_batches() {
    assert_eq!(scribe_objects::LINK_CACHE_LIMIT, 1_048_576);
    let run = |limit: usize| {
        let (t, live, dead) = populated(small_packs(), 1500);
        assert!(live.len() > 512, "more than one seed batch");
        let r = compact(
            &t.dir,
            live.iter().map(|l| l.0),
            CTX,
            &link_opts(limit, None),
        )
        .unwrap();
        check_result(&t, &live, &dead);
        assert_eq!(r.copied_objects, 0, "{r:?}");
        assert!(r.linked_packs > 4, "{r:?}");
        r
    };
    // Far below the bound: each link is made durable once and remembered by
    // every later batch.
    let free = run(scribe_objects::LINK_CACHE_LIMIT);
    assert_eq!(free.links_established, free.linked_packs, "{free:?}");
    assert_eq!(free.link_cache_peak, free.linked_packs);
    assert_eq!(free.link_cache_resets, 0);
    let n = free.linked_packs as usize;
    // Exactly at the bound: the cache holds every link, never more.
    let exact = run(n);
    assert_eq!(exact.link_cache_peak, n as u64);
    assert_eq!(exact.link_cache_resets, 0);
    assert_eq!(exact.links_established, exact.linked_packs);
    // One below, and far below: the cache never exceeds its bound; links it
    // had to forget are established again (linked if absent, flushed).
    for limit in [n - 1, 2] {
        let r = run(limit);
        assert_eq!(r.link_cache_peak, limit as u64, "{r:?}");
        assert!(r.link_cache_resets >= 1, "{r:?}");
        assert!(r.links_established > r.linked_packs, "{r:?}");
    }
}

#[test]
fn interrupted_seed_reestablishes_links_before_caching_them() {
    let (t, live, dead) = populated(small_packs(), 1500);
    let ids = || live.iter().map(|l| l.0);
    let fp = Some(CompactFailpoint::AfterFirstSeedBatch);
    let err = compact(&t.dir, ids(), CTX, &link_opts(3, fp)).unwrap_err();
    assert!(matches!(err, StoreError::Injected(_)), "{err}");
    // The first batch's links exist in the replacement.
    let linked_before = std::fs::read_dir(t.path("objects.compacting").join("packs"))
        .unwrap()
        .count();
    assert!(linked_before > 1);
    let r = compact(&t.dir, ids(), CTX, &link_opts(3, None)).unwrap();
    assert!(r.link_cache_peak <= 3, "{r:?}");
    // Every link of the earlier run was established again by this run.
    assert!(r.links_established >= r.linked_packs, "{r:?}");
    check_result(&t, &live, &dead);
}

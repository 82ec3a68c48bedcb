//! Model test: the paged radix trees against the portable reference builder
//! and a `BTreeMap`, over random edit sequences.

use std::collections::BTreeMap;

use proptest::prelude::*;
use scribe_format::changeset::Entry;
use scribe_format::path::collision_key;
use scribe_format::portable::build as reference_tree;
use scribe_format::snapshot::{FileRecord, NodeValue};
use scribe_metadata::read::ListEntry;

use super::support::*;

const UNIVERSE: &[&str] = &[
    "a", "a/B", "a/B/c", "a/c", "ab", "B", "B/a", "c", "c/a/B", "ca", "é", "é/x",
];

#[derive(Clone, Debug)]
struct Step {
    picks: Vec<(usize, bool)>,
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        prop::collection::vec((0..UNIVERSE.len(), any::<bool>()), 1..7)
            .prop_map(|picks| Step { picks }),
        1..7,
    )
}

fn record(v: &NodeValue) -> Option<FileRecord> {
    v.state
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    #[test]
    fn trees_match_the_reference_and_reads_match_the_model(steps in steps()) {
        let e = env();
        // path -> last value (tombstones included), per accepted change.
        let mut model: BTreeMap<String, NodeValue> = BTreeMap::new();
        let mut snapshots: Vec<(u64, BTreeMap<String, NodeValue>)> = vec![(0, BTreeMap::new())];
        let mut n = 0u64;
        for step in steps {
            let mut chosen: BTreeMap<&str, bool> = BTreeMap::new();
            for (i, flag) in step.picks {
                chosen.insert(UNIVERSE[i], flag);
            }
            // Live after this step's deletions, then the adds one by one:
            // an add that would put a file under a file (or over files)
            // is left out, as acceptance refuses it (`path_conflict`).
            let mut after: Vec<Vec<u8>> = model
                .iter()
                .filter(|(p, v)| v.state.is_some() && chosen.get(p.as_str()) != Some(&true))
                .map(|(p, _)| collision_key(p))
                .collect();
            let conflicts = |after: &[Vec<u8>], p: &str| {
                let k = collision_key(p);
                after.iter().any(|q| {
                    (q.len() > k.len() && q.starts_with(&k) && q[k.len()] == b'/')
                        || (k.len() > q.len() && k.starts_with(q) && k[q.len()] == b'/')
                })
            };
            let mut entries = Vec::new();
            for (p, delete) in &chosen {
                n += 1;
                let live = model.get(*p).filter(|v| v.state.is_some());
                entries.push(match live {
                    None if conflicts(&after, p) => continue,
                    None => {
                        after.push(collision_key(p));
                        add(&e, p, n)
                    }
                    Some(v) if *delete => Entry::delete(*p, v.last_change),
                    Some(v) => Entry::edit(*p, v.last_change, state(&e, n)),
                });
            }
            if entries.is_empty() {
                continue;
            }
            let change = commit(&e, entries.clone());
            for en in &entries {
                let st = en.state.map(|s| FileRecord {
                    manifest: s.manifest,
                    content: s.content,
                    size: s.size,
                    mode: s.mode as u8,
                    change,
                });
                model.insert(en.path.clone(), NodeValue { path: en.path.clone(), last_change: change, state: st });
            }
            snapshots.push((change, model.clone()));
        }
        let head = e.repo.head().unwrap();
        let view_roots = {
            let db = e.repo.database();
            use redb::ReadableDatabase;
            let tx = db.begin_read().unwrap();
            let t = tx.open_table(scribe_metadata::tables::SNAPSHOT_ROOTS).unwrap();
            let mut out = Vec::new();
            for (c, _) in &snapshots {
                let k = scribe_metadata::records::keys::root(&e.main, *c);
                let v = t.get(k.as_slice()).unwrap().expect("root row");
                out.push(scribe_format::snapshot::RootRow::decode(v.value()).unwrap());
            }
            out
        };
        for ((c, snap), root) in snapshots.iter().zip(&view_roots) {
            let exact: Vec<(Vec<u8>, NodeValue)> = snap.iter().map(|(k, v)| (k.as_bytes().to_vec(), v.clone())).collect();
            let want = reference_tree(&exact).unwrap().root;
            prop_assert_eq!(root.exact.summary(), want.summary(), "exact root at {}", c);
            let folded: BTreeMap<Vec<u8>, NodeValue> = snap.iter().map(|(k, v)| (collision_key(k), v.clone())).collect();
            let folded: Vec<(Vec<u8>, NodeValue)> = folded.into_iter().collect();
            let want = reference_tree(&folded).unwrap().root;
            prop_assert_eq!(root.collision.summary(), want.summary(), "collision root at {}", c);
            // stat at every snapshot
            for p in UNIVERSE {
                let got = e.repo.stat(e.main, *c, p).unwrap().map(|s| s.record);
                let want = snap.get(*p).and_then(record);
                prop_assert_eq!(got, want, "stat {} at {}", p, c);
            }
        }
        // Recursive listing, paged by two.
        let mut token: Option<Vec<u8>> = None;
        let mut listed = Vec::new();
        loop {
            let page = e.repo.list(e.main, head, "", true, token.as_deref(), 2).unwrap();
            for en in page.entries {
                if let ListEntry::File(s) = en { listed.push(s.path) }
            }
            match page.next { Some(t) => token = Some(t), None => break }
        }
        let live: Vec<String> = model.iter().filter(|(_, v)| v.state.is_some()).map(|(k, _)| k.clone()).collect();
        prop_assert_eq!(listed, live.clone());
        // Direct children of the root and of `a`.
        for dir in ["", "a"] {
            let page = e.repo.list(e.main, head, dir, false, None, 1000).unwrap();
            let got: Vec<String> = page.entries.iter().map(|en| match en {
                ListEntry::File(s) => s.path.clone(),
                ListEntry::Dir(d) => format!("{d}/"),
            }).collect();
            let base = if dir.is_empty() { String::new() } else { format!("{dir}/") };
            let mut want: Vec<String> = Vec::new();
            for p in &live {
                let Some(rest) = p.strip_prefix(&base) else { continue };
                let item = match rest.find('/') {
                    Some(i) => format!("{base}{}/", &rest[..i]),
                    None => p.clone(),
                };
                if want.last() != Some(&item) && !want.contains(&item) { want.push(item) }
            }
            prop_assert_eq!(got, want, "children of {:?}", dir);
        }
        // Delta from every snapshot to the head: each changed path once.
        for (c, _) in &snapshots {
            let mut got = Vec::new();
            let mut token: Option<Vec<u8>> = None;
            loop {
                let page = e.repo.delta(e.main, *c, head, token.as_deref(), 3).unwrap();
                got.extend(page.entries.into_iter().map(|d| (d.path, d.change, d.state)));
                match page.next { Some(t) => token = Some(t), None => break }
            }
            let want: Vec<_> = model.iter().filter(|(_, v)| v.last_change > *c)
                .map(|(k, v)| (k.clone(), v.last_change, v.state)).collect();
            prop_assert_eq!(got, want, "delta from {}", c);
        }
        assert_doctor_clean(&e.repo);
    }
}

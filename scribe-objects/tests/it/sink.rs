//! `chunk_files_into`: the same chunking and manifests as a plain import,
//! chunks handed to a sink instead of the store.

use std::collections::HashMap;
use std::sync::Mutex;

use scribe_format::{ChunkId, ManifestId, ObjectId};
use scribe_objects::{ChunkBytes, ChunkSink, StoreError, StoreOptions};

use super::support::{noise, TestStore};

const MIB: usize = 1024 * 1024;

/// Collects every chunk it is given (and how often), and the order in
/// which chunks and manifests arrived.
#[derive(Default)]
struct Collect {
    got: Mutex<HashMap<ChunkId, (Vec<u8>, usize)>>,
    order: Mutex<Vec<(ObjectId, Vec<u8>)>>,
}

impl ChunkSink for Collect {
    fn chunk(&self, id: ChunkId, bytes: ChunkBytes) -> scribe_objects::Result<()> {
        let mut got = self.got.lock().unwrap();
        got.entry(id).or_insert_with(|| (bytes.to_vec(), 0)).1 += 1;
        self.order
            .lock()
            .unwrap()
            .push((ObjectId::chunk(id), Vec::new()));
        Ok(())
    }

    fn manifest(&self, id: ManifestId, payload: Vec<u8>) -> scribe_objects::Result<()> {
        self.order
            .lock()
            .unwrap()
            .push((ObjectId::manifest(id), payload));
        Ok(())
    }
}

/// Write each `(name, bytes)` into the test store's directory.
fn write_all(t: &TestStore, files: &[(&str, Vec<u8>)]) -> Vec<std::path::PathBuf> {
    files
        .iter()
        .map(|(n, d)| {
            let p = t.path(n);
            std::fs::write(&p, d).unwrap();
            p
        })
        .collect()
}

#[test]
fn same_manifests_as_import_chunks_to_the_sink_not_the_store() {
    let (t, plain) = TestStore::new(StoreOptions::default());
    let sinked =
        scribe_objects::ObjectStore::create(t.tmp.path().join("sinked"), StoreOptions::default())
            .unwrap();
    let big = noise(21 * MIB + 5, 1);
    let small = noise(70_000, 2);
    let files = [
        ("big.bin", big.clone()),
        ("small.bin", small.clone()),
        ("empty.bin", Vec::new()),
        // The same bytes twice: the sink sees them twice.
        ("small-again.bin", small.clone()),
    ];
    let paths = write_all(&t, &files);
    let want = plain.import_files(&paths).unwrap();
    let sink = Collect::default();
    let got = sinked.chunk_files_into(&paths, None, &sink).unwrap();
    assert_eq!(
        got.iter().map(|f| f.manifest_id).collect::<Vec<_>>(),
        want.iter().map(|f| f.manifest_id).collect::<Vec<_>>()
    );
    assert_eq!(got[0].chunks, want[0].chunks);
    assert!(got[0].chunks.len() >= 3, "{} chunks", got[0].chunks.len());
    // A large file's manifest, its own bytes, after every chunk of its
    // file; no small file's (those are sent after the stream).
    let order = sink.order.into_inner().unwrap();
    for f in got.iter().filter(|f| f.size > MIB as u64) {
        let at = order
            .iter()
            .position(|(id, _)| *id == ObjectId::manifest(f.manifest_id))
            .unwrap_or_else(|| panic!("no manifest passed for a {}-byte file", f.size));
        assert_eq!(ManifestId::of_payload(&order[at].1), f.manifest_id);
        for c in &f.chunks {
            assert!(
                order[..at]
                    .iter()
                    .any(|(id, _)| *id == ObjectId::chunk(c.id)),
                "a manifest passed before its chunk"
            );
        }
    }
    let manifests = order
        .iter()
        .filter(|(id, _)| id.kind == scribe_format::ObjectKind::Manifest)
        .count();
    assert_eq!(manifests, 1, "the large file's manifest alone");
    let seen = sink.got.into_inner().unwrap();
    // Every chunk of every file, with its own bytes; nothing else.
    let mut expected = 0;
    for f in &got {
        for c in &f.chunks {
            let (bytes, _) = &seen[&c.id];
            assert_eq!(ChunkId::of(bytes), c.id);
            assert_eq!(bytes.len(), c.length as usize);
            expected += 1;
        }
    }
    let passed: usize = seen.values().map(|(_, n)| n).sum();
    assert_eq!(passed, expected);
    assert_eq!(seen[&got[1].chunks[0].id].1, 2);
    // The store holds the manifests, not the chunks.
    for f in &got {
        assert!(sinked.contains(&ObjectId::manifest(f.manifest_id)).unwrap());
        for c in &f.chunks {
            assert!(!sinked.contains(&ObjectId::chunk(c.id)).unwrap());
        }
    }
}

/// Refuses the n-th chunk.
struct FailAt {
    n: usize,
    seen: Mutex<usize>,
}

impl ChunkSink for FailAt {
    fn chunk(&self, _: ChunkId, _: ChunkBytes) -> scribe_objects::Result<()> {
        let mut seen = self.seen.lock().unwrap();
        *seen += 1;
        if *seen == self.n {
            return Err(StoreError::SinkStopped {
                reason: "the server went away".into(),
            });
        }
        Ok(())
    }
}

#[test]
fn a_sink_error_stops_the_import_and_publishes_nothing() {
    let (t, store) = TestStore::new(StoreOptions::default());
    let p = t.path("big.bin");
    std::fs::write(&p, noise(40 * MIB, 3)).unwrap();
    let sink = FailAt {
        n: 2,
        seen: Mutex::new(0),
    };
    let err = store.chunk_files_into(&[&p], None, &sink).unwrap_err();
    assert!(
        matches!(&err, StoreError::SinkStopped { reason } if reason.contains("went away")),
        "{err}"
    );
    // Stopped early: far fewer chunks than the file has (~10).
    assert!(*sink.seen.lock().unwrap() < 8);
    let imported = store.import_file(&p).unwrap();
    // Nothing of the stopped import was published: the plain import
    // writes the manifest fresh.
    assert!(imported.new_bytes_stored > 40 * MIB as u64);
}

/// Sizes the caller took before only sort the files into small and large:
/// stale ones (a large file said to be small, a small one said to be
/// large) give the same manifests; a count that is not one per path is
/// refused. Every file read carries the stamp of its open handle after
/// the read, equal to the file's own size and modification time.
#[test]
fn given_sizes_change_nothing_but_the_lookup_and_every_file_read_is_stamped() {
    let (t, plain) = TestStore::new(StoreOptions::default());
    let files = [
        ("big.bin", noise(3 * MIB + 17, 5)),
        ("small.bin", noise(9_000, 6)),
        ("empty.bin", Vec::new()),
    ];
    let paths = write_all(&t, &files);
    let want = plain.import_files(&paths).unwrap();
    let true_sizes: Vec<u64> = files.iter().map(|(_, d)| d.len() as u64).collect();
    for sizes in [true_sizes.clone(), vec![1, 40 * MIB as u64, 0]] {
        let sinked = scribe_objects::ObjectStore::create(
            t.tmp.path().join(format!("sinked-{}", sizes[0])),
            StoreOptions::default(),
        )
        .unwrap();
        let got = sinked
            .chunk_files_into(&paths, Some(&sizes), &Collect::default())
            .unwrap();
        assert_eq!(
            got.iter()
                .map(|f| (f.manifest_id, f.size))
                .collect::<Vec<_>>(),
            want.iter()
                .map(|f| (f.manifest_id, f.size))
                .collect::<Vec<_>>(),
            "sizes {sizes:?}"
        );
        for (f, p) in got.iter().zip(&paths) {
            let m = std::fs::metadata(p).unwrap();
            let stamp = f.read_stamp.expect("a file read has a stamp");
            assert_eq!(stamp.size, m.len(), "{}", p.display());
            assert_eq!(stamp.modified, Some(m.modified().unwrap()));
        }
    }
    let err = plain
        .chunk_files_into(&paths, Some(&true_sizes[..2]), &Collect::default())
        .unwrap_err();
    assert!(matches!(err, StoreError::Internal(_)), "{err}");
}

use scribe_format::envelope::Compression;
use scribe_format::{ChunkId, FileContentId, ManifestId, ObjectId, ObjectKind};
use scribe_objects::{
    chunk_boundaries, decode_manifest, Location, ObjectStore, StoreError, StoreOptions,
};

use super::support::{noise, small_packs, TestStore};

const MIB: usize = 1024 * 1024;

fn round_trip(
    store: &ObjectStore,
    t: &TestStore,
    data: &[u8],
    name: &str,
) -> scribe_objects::ImportedFile {
    let src = t.path(name);
    std::fs::write(&src, data).unwrap();
    let imported = store.import_file(&src).unwrap();
    assert_eq!(imported.size, data.len() as u64);
    assert_eq!(imported.content_id, FileContentId::of(data));
    let lens: Vec<usize> = imported.chunks.iter().map(|c| c.length as usize).collect();
    assert_eq!(lens, chunk_boundaries(data));
    let mut pos = 0;
    for c in &imported.chunks {
        assert_eq!(c.id, ChunkId::of(&data[pos..pos + c.length as usize]));
        pos += c.length as usize;
    }
    let payload = store
        .get(&ObjectId::manifest(imported.manifest_id))
        .unwrap();
    assert_eq!(ManifestId::of_payload(&payload), imported.manifest_id);
    let m = decode_manifest(&payload).unwrap();
    assert_eq!(m.chunks, imported.chunks);
    let dest = t.path(&format!("{name}.out"));
    assert_eq!(
        store.reconstruct(&imported.manifest_id, &dest).unwrap(),
        data.len() as u64
    );
    assert_eq!(std::fs::read(&dest).unwrap(), data);
    imported
}

#[test]
fn import_round_trip_of_edge_sizes() {
    let (t, store) = TestStore::new(StoreOptions::default());
    let empty = round_trip(&store, &t, b"", "empty");
    assert!(empty.chunks.is_empty());
    assert_eq!(empty.content_id, FileContentId::EMPTY);
    let one = round_trip(&store, &t, b"x", "one");
    assert_eq!(one.chunks.len(), 1);
    let m = round_trip(&store, &t, &noise(MIB, 1), "mib");
    assert_eq!(m.chunks.len(), 1, "files of at most 1 MiB are one chunk");
    let m1 = round_trip(&store, &t, &noise(MIB + 1, 2), "mib1");
    assert_eq!(
        m1.chunks.iter().map(|c| c.length as u64).sum::<u64>(),
        MIB as u64 + 1
    );
    let big = round_trip(&store, &t, &noise(11 * MIB + 5, 3), "big");
    assert!(big.chunks.len() >= 2, "{:?}", big.chunks.len());
    assert!(store.verify().unwrap().is_clean());
}

#[test]
fn manifest_bytes_follow_section_4_1() {
    let (t, store) = TestStore::new(StoreOptions::default());
    let imported = round_trip(&store, &t, b"abc", "abc");
    let payload = store
        .get(&ObjectId::manifest(imported.manifest_id))
        .unwrap();
    let mut expected = vec![1, 0, 0, 0, 0, 0, 0, 1, 0];
    expected.extend_from_slice(&3u64.to_le_bytes());
    expected.extend_from_slice(blake3::hash(b"abc").as_bytes());
    expected.extend_from_slice(&1u32.to_le_bytes());
    expected.extend_from_slice(blake3::hash(b"abc").as_bytes());
    expected.extend_from_slice(&3u32.to_le_bytes());
    assert_eq!(payload, expected);
}

#[test]
fn reimport_and_edits_deduplicate_chunks() {
    let (t, store) = TestStore::new(StoreOptions::default());
    let data = noise(9 * MIB, 4);
    let first = round_trip(&store, &t, &data, "a");
    assert!(first.new_bytes_stored > data.len() as u64);
    let again = store.import_file(t.path("a")).unwrap();
    assert_eq!(again.manifest_id, first.manifest_id);
    assert_eq!(again.new_bytes_stored, 0);
    // Prepend a few bytes: content-defined chunking re-synchronises.
    let mut edited = b"header!".to_vec();
    edited.extend_from_slice(&data);
    let e = round_trip(&store, &t, &edited, "b");
    assert!(e.new_bytes_stored < data.len() as u64 / 2 + 16 * MIB as u64);
    let shared = e.chunks.iter().filter(|c| first.chunks.contains(c)).count();
    assert!(shared >= 1, "edited file shares chunks");
}

#[test]
fn import_files_parallel_one_publication() {
    let (t, store) = TestStore::new(StoreOptions {
        compression: Compression::Lz4,
        ..StoreOptions::default()
    });
    let mut paths = Vec::new();
    let mut datas = Vec::new();
    for i in 0..60u64 {
        let d = if i % 3 == 0 {
            vec![i as u8; 5000]
        } else {
            noise(4096 + i as usize * 37, i)
        };
        let p = t.path(&format!("f{i}"));
        std::fs::write(&p, &d).unwrap();
        paths.push(p);
        datas.push(d);
    }
    let big = noise(3 * MIB, 99);
    let bp = t.path("big");
    std::fs::write(&bp, &big).unwrap();
    paths.push(bp);
    datas.push(big);
    // Duplicate file content deduplicates inside one batch.
    paths.push(t.path("f1"));
    datas.push(datas[1].clone());
    let out = store.import_files(&paths).unwrap();
    assert_eq!(out.len(), paths.len());
    for (imp, d) in out.iter().zip(&datas) {
        assert_eq!(imp.content_id, FileContentId::of(d));
        let dest = t.path("dest");
        store.reconstruct(&imp.manifest_id, &dest).unwrap();
        assert_eq!(&std::fs::read(&dest).unwrap(), d);
    }
    assert_eq!(out.last().unwrap().manifest_id, out[1].manifest_id);
}

#[test]
fn ranged_reads_reconstruct_part_of_a_file() {
    let (t, store) = TestStore::new(StoreOptions::default());
    let data = noise(6 * MIB, 5);
    let imp = round_trip(&store, &t, &data, "r");
    // Read bytes [start, start+len) spanning a chunk boundary.
    let start = imp.chunks[0].length as u64 - 100;
    let len = 300u64;
    let mut got = Vec::new();
    let mut chunk_start = 0u64;
    for c in &imp.chunks {
        let chunk_end = chunk_start + u64::from(c.length);
        let lo = start.max(chunk_start);
        let hi = (start + len).min(chunk_end);
        if lo < hi {
            got.extend(
                store
                    .read_chunk_range(&ObjectId::chunk(c.id), lo - chunk_start, hi - lo)
                    .unwrap(),
            );
        }
        chunk_start = chunk_end;
    }
    assert_eq!(got, &data[start as usize..(start + len) as usize]);
}

#[test]
fn reconstruct_never_exposes_corrupt_content() {
    let (t, store) = TestStore::new(small_packs());
    let data = noise(3000, 6);
    let src = t.path("c");
    std::fs::write(&src, &data).unwrap();
    let imp = store.import_file(&src).unwrap();
    let chunk = ObjectId::chunk(imp.chunks[0].id);
    let Some(Location::Packed {
        pack,
        offset,
        entry_len,
    }) = store.locate(&chunk).unwrap()
    else {
        panic!()
    };
    drop(store);
    let p = t.dir.join("packs").join(format!("{pack:08x}.pack"));
    let mut b = std::fs::read(&p).unwrap();
    b[(offset + entry_len - 1) as usize] ^= 1;
    std::fs::write(&p, b).unwrap();
    let store = ObjectStore::open(&t.dir).unwrap();
    let dest = t.path("dest");
    std::fs::write(&dest, b"previous").unwrap();
    let err = store.reconstruct(&imp.manifest_id, &dest).unwrap_err();
    assert!(
        matches!(err, StoreError::CorruptObject { id, .. } if id == chunk),
        "{err}"
    );
    assert_eq!(std::fs::read(&dest).unwrap(), b"previous");
    let leftovers = std::fs::read_dir(t.tmp.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(".scribe")
        })
        .count();
    assert_eq!(leftovers, 0);
    let missing = ManifestId([3; 32]);
    assert!(matches!(
        store.reconstruct(&missing, &dest),
        Err(StoreError::NotFound { .. })
    ));
    let _ = ObjectKind::Chunk;
}

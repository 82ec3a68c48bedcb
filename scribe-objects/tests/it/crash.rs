//! SIGKILL crash test: a helper process publishes batches and is killed at
//! random moments; after each kill the store is reopened (recovery) and
//! every acknowledged batch must read back intact, the batch in flight must
//! be all-or-nothing, and nothing later may be visible.

use std::process::Command;
use std::time::Duration;

use scribe_format::envelope::Compression;
use scribe_format::id::object_identity;
use scribe_format::manifest::ChunkRef;
use scribe_format::{ChunkId, FileContentId, ManifestId, ObjectId};
use scribe_objects::{chunk_boundaries, encode_manifest, verify_dir, Problem};
use scribe_objects::{ObjectStore, StoreOptions};
use scribe_testkit::XorShift64;

#[path = "../../src/bin/objects-crash-helper/payloads.rs"]
mod payloads;

const ITERATIONS: u64 = 30;

fn pack_sizes(dir: &std::path::Path) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = std::fs::read_dir(dir.join("packs"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().len(),
            )
        })
        .collect();
    v.sort();
    v
}

/// The manifest id an import of `content` produces (profile 1).
fn manifest_of(content: &[u8]) -> ManifestId {
    let mut chunks = Vec::new();
    let mut pos = 0;
    for len in chunk_boundaries(content) {
        chunks.push(ChunkRef {
            id: ChunkId::of(&content[pos..pos + len]),
            length: len as u32,
        });
        pos += len;
    }
    let payload =
        encode_manifest(content.len() as u64, &FileContentId::of(content), &chunks).unwrap();
    ManifestId::of_payload(&payload)
}

/// Every object batch `b` publishes, with its payload.
fn expected(b: u64) -> Vec<(ObjectId, Option<Vec<u8>>)> {
    if payloads::is_import_batch(b) {
        let mut out = Vec::new();
        for content in payloads::import_files(b) {
            let mut pos = 0;
            for len in chunk_boundaries(&content) {
                let c = content[pos..pos + len].to_vec();
                out.push((ObjectId::chunk(ChunkId::of(&c)), Some(c)));
                pos += len;
            }
            // The manifest's bytes are checked by reconstruction.
            out.push((ObjectId::manifest(manifest_of(&content)), None));
        }
        return out;
    }
    payloads::batch_payloads(b)
        .into_iter()
        .map(|(k, p)| (object_identity(k, &p).unwrap(), Some(p)))
        .collect()
}

#[test]
fn sigkill_during_batched_publication_loses_nothing_acknowledged() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("objects");
    let ack = tmp.path().join("acks");
    // Small seal size so roll-overs (new packs) happen under the kills too.
    ObjectStore::create(
        &dir,
        StoreOptions {
            small_object_threshold: 4096,
            pack_seal_bytes: 96 * 1024,
            compression: Compression::Lz4,
        },
    )
    .unwrap();
    drop(ObjectStore::open(&dir).unwrap());
    let mut rng = XorShift64::from_state(0x2545f4914f6cdd1d);
    let mut next_batch = 0u64;
    let mut truncations = 0;
    let mut unreadable = 0;
    for _ in 0..ITERATIONS {
        let r = rng.next_u64();
        let mut child = Command::new(env!("CARGO_BIN_EXE_objects-crash-helper"))
            .arg(&dir)
            .arg(&ack)
            .arg(next_batch.to_string())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(30 + r % 250));
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        assert!(!status.success(), "helper exited by itself: {status}");

        let acked: Vec<u64> = std::fs::read_to_string(&ack)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.parse().ok())
            .collect();
        // Read-only verification first: it must change nothing and report
        // exactly what open-time recovery then repairs.
        let sizes = pack_sizes(&dir);
        let before = verify_dir(&dir).unwrap();
        assert_eq!(pack_sizes(&dir), sizes, "verify changed the packs");
        let store = ObjectStore::open(&dir).unwrap();
        let rec = store.recovery_report().clone();
        if before.locator_needed_repair {
            unreadable += 1;
        }
        let tail = before
            .problems
            .iter()
            .any(|p| matches!(p, Problem::UncommittedTail { .. }));
        assert_eq!(
            tail,
            rec.truncated_bytes > 0,
            "{:?} vs {rec:?}",
            before.problems
        );
        let uncommitted: Vec<u32> = before
            .problems
            .iter()
            .filter_map(|p| match p {
                Problem::UncommittedPack { pack, .. } => Some(*pack),
                _ => None,
            })
            .collect();
        assert_eq!(uncommitted, rec.removed_packs);
        assert!(
            before.problems.iter().all(|p| matches!(
                p,
                Problem::UncommittedTail { .. } | Problem::UncommittedPack { .. }
            )),
            "{:?}",
            before.problems
        );
        if rec.truncated_bytes > 0 || !rec.removed_packs.is_empty() {
            truncations += 1;
        }
        let last_acked = acked.last().copied();
        // Every acknowledged batch is present; those acknowledged since the
        // last kill are read back byte for byte (earlier ones were already).
        for &b in &acked {
            let ids: Vec<ObjectId> = expected(b).into_iter().map(|(id, _)| id).collect();
            assert_eq!(
                store.missing(&ids).unwrap(),
                vec![],
                "acknowledged batch {b} lost objects"
            );
        }
        for &b in acked.iter().filter(|&&b| b >= next_batch) {
            for (id, payload) in expected(b) {
                let got = store
                    .get(&id)
                    .unwrap_or_else(|e| panic!("acknowledged batch {b} lost {id}: {e}"));
                if let Some(p) = payload {
                    assert_eq!(got, p, "acknowledged batch {b}: {id}");
                }
            }
            if payloads::is_import_batch(b) {
                for content in payloads::import_files(b) {
                    let m = manifest_of(&content);
                    let out = tmp.path().join("reconstructed");
                    store.reconstruct(&m, &out).unwrap();
                    assert_eq!(
                        std::fs::read(&out).unwrap(),
                        content,
                        "imported file of batch {b}"
                    );
                }
            }
        }
        // The batch in flight is all-or-nothing; later ones never existed.
        let in_flight = last_acked.map_or(next_batch, |l| l + 1).max(next_batch);
        let present: Vec<bool> = expected(in_flight)
            .into_iter()
            .map(|(id, _)| store.contains(&id).unwrap())
            .collect();
        // Payloads embed the batch number, so no earlier batch stored them.
        assert!(
            present.iter().all(|&p| p) || present.iter().all(|&p| !p),
            "batch {in_flight} partially visible: {present:?}"
        );
        for later in in_flight + 1..in_flight + 4 {
            for (id, _) in expected(later) {
                assert!(!store.contains(&id).unwrap());
            }
        }
        next_batch = in_flight + 1;
        drop(store);
    }
    // After the last recovery, read-only verification finds nothing.
    let report = verify_dir(&dir).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    assert!(next_batch > ITERATIONS, "the helper made progress");
    // Not a pass condition, but shows the recovery paths ran.
    eprintln!(
        "crash test: {next_batch} batches, {truncations} recoveries with repairs, \
         {unreadable} locators needing redb repair before open"
    );
}

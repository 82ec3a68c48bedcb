//! SIGKILL crash test: a helper process publishes batches and is killed at
//! random moments; after each kill the store is reopened (recovery) and
//! every acknowledged batch must read back intact, the batch in flight must
//! be all-or-nothing, and nothing later may be visible.

use std::process::Command;
use std::time::Duration;

use scribe_format::envelope::Compression;
use scribe_format::id::object_identity;
use scribe_objects::{ObjectStore, StoreOptions};

#[path = "../../src/bin/objects-crash-helper/payloads.rs"]
mod payloads;

const ITERATIONS: u64 = 30;

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
    let mut rng = 0x2545f4914f6cdd1du64;
    let mut next_batch = 0u64;
    let mut truncations = 0;
    for _ in 0..ITERATIONS {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let mut child = Command::new(env!("CARGO_BIN_EXE_objects-crash-helper"))
            .arg(&dir)
            .arg(&ack)
            .arg(next_batch.to_string())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(30 + rng % 250));
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        assert!(!status.success(), "helper exited by itself: {status}");

        let acked: Vec<u64> = std::fs::read_to_string(&ack)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.parse().ok())
            .collect();
        let store = ObjectStore::open(&dir).unwrap();
        if store.recovery_report().truncated_bytes > 0
            || !store.recovery_report().removed_packs.is_empty()
        {
            truncations += 1;
        }
        let last_acked = acked.last().copied();
        for &b in &acked {
            for (kind, payload) in payloads::batch_payloads(b) {
                let id = object_identity(kind, &payload).unwrap();
                assert_eq!(
                    store.get(&id).unwrap(),
                    payload,
                    "acknowledged batch {b} lost {id}"
                );
            }
        }
        // The batch in flight is all-or-nothing; later ones never existed.
        let in_flight = last_acked.map_or(next_batch, |l| l + 1).max(next_batch);
        let present: Vec<bool> = payloads::batch_payloads(in_flight)
            .into_iter()
            .map(|(k, p)| store.contains(&object_identity(k, &p).unwrap()).unwrap())
            .collect();
        // Payloads embed the batch number, so no earlier batch stored them.
        assert!(
            present.iter().all(|&p| p) || present.iter().all(|&p| !p),
            "batch {in_flight} partially visible: {present:?}"
        );
        for later in in_flight + 1..in_flight + 4 {
            for (k, p) in payloads::batch_payloads(later) {
                assert!(!store.contains(&object_identity(k, &p).unwrap()).unwrap());
            }
        }
        let report = store.verify().unwrap();
        assert!(report.is_clean(), "{:?}", report.problems);
        next_batch = in_flight + 1;
        drop(store);
    }
    assert!(next_batch > ITERATIONS, "the helper made progress");
    // Not a pass condition, but shows the recovery paths ran.
    eprintln!("crash test: {next_batch} batches, {truncations} recoveries with repairs");
}

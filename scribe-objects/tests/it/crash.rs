//! SIGKILL crash test: a child process (this test binary run again, see
//! [`crash_child`]) publishes batches and is killed at random moments;
//! after each kill the store is reopened (recovery) and every acknowledged
//! batch must read back intact, the batch in flight must be all-or-nothing,
//! and nothing later may be visible.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use scribe_format::envelope::Compression;
use scribe_format::id::object_identity;
use scribe_format::manifest::ChunkRef;
use scribe_format::{ChunkId, FileContentId, ManifestId, ObjectId};
use scribe_objects::{chunk_boundaries, encode_manifest, verify_dir, Problem};
use scribe_objects::{ObjectStore, StoreOptions};
use scribe_testkit::XorShift64;

use super::crash_payloads as payloads;
use payloads::{batch_payloads, import_files, is_import_batch};

/// Set (to `STORE_DIR\nACK_FILE\nFIRST_BATCH`) in the child process only.
const CHILD_ENV: &str = "SCRIBE_OBJECTS_CRASH_CHILD";

/// Runs only inside the child process the crash test spawns (it returns
/// at once otherwise): publishes deterministic batches into the store and
/// appends each acknowledged batch number to the ack file after its commit
/// returns, until it is killed. Every third batch is a file import: the
/// files of `import_files(b)` are written to a scratch directory beside
/// the ack file and imported in one publication.
#[test]
fn crash_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut parts = spec.split('\n');
    let (Some(dir), Some(ack_path), Some(first)) = (parts.next(), parts.next(), parts.next())
    else {
        panic!("{CHILD_ENV} must be STORE_DIR\\nACK_FILE\\nFIRST_BATCH");
    };
    let first: u64 = first.parse().expect("first batch");
    let store = ObjectStore::open(dir).expect("open the store");
    let mut ack = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(ack_path)
        .expect("open the ack file");
    let scratch = std::path::Path::new(ack_path).with_extension("files");
    std::fs::create_dir_all(&scratch).expect("scratch dir");
    for b in first.. {
        if is_import_batch(b) {
            let mut paths = Vec::new();
            for (i, content) in import_files(b).into_iter().enumerate() {
                let p = scratch.join(format!("f{i}"));
                std::fs::write(&p, &content).expect("write an import file");
                paths.push(p);
            }
            store.import_files(&paths).expect("import");
        } else {
            let batch = store.batch();
            for (kind, payload) in batch_payloads(b) {
                batch.put(kind, &payload).expect("put");
            }
            batch.commit().expect("commit");
        }
        // One write of the whole line: `writeln!` on a file writes the
        // number and the newline separately, and a kill between them let
        // the next child's number run on into it (a "batch 473475").
        ack.write_all(format!("{b}\n").as_bytes()).expect("ack");
    }
}

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
        // The test's full name: this module's path without the crate's name.
        let (_, module) = module_path!().split_once("::").unwrap();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                &format!("{module}::crash_child"),
                "--nocapture",
                "--test-threads=1",
            ])
            .env(
                CHILD_ENV,
                format!("{}\n{}\n{next_batch}", dir.display(), ack.display()),
            )
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(30 + r % 250));
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        assert!(!status.success(), "the child exited by itself: {status}");

        // Whole lines only (each is one write, so a line is there whole
        // or not at all; an unterminated one would be a harness fault).
        let text = std::fs::read_to_string(&ack).unwrap_or_default();
        assert!(
            text.is_empty() || text.ends_with('\n'),
            "torn ack line: {text:?}"
        );
        let acked: Vec<u64> = text.lines().map(|l| l.parse().unwrap()).collect();
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

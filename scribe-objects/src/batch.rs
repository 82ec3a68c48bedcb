//! [`Batch`]: many puts, one durable publication (specification section 6.3).

use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use redb::ReadableDatabase;

use scribe_format::envelope::{self, Compression, HEADER_LEN};
use scribe_format::id::object_identity;
use scribe_format::{ObjectId, ObjectKind};

use crate::error::{db_err, io_err, Result, StoreError};
use crate::layout::{self, sync_dir};
use crate::locator::{Location, LOCATOR_TABLE};
use crate::store::{max_payload, ObjectStore};

/// Failpoints of a publication, for crash tests.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PublishFailpoint {
    /// After pack appends and loose renames, before the pack flush.
    BeforePackFlush,
    /// After all flushes, before the locator commit.
    BeforeLocatorCommit,
}

/// The outcome of a committed batch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BatchReceipt {
    /// Objects whose bytes this batch wrote.
    pub objects_written: u64,
    /// Envelope bytes this batch wrote (excluding pack entry framing).
    pub bytes_written: u64,
    /// Puts skipped because the store or the batch already had the object.
    pub objects_deduplicated: u64,
}

struct Staged {
    id: ObjectId,
    tmp: PathBuf,
    envelope_len: u64,
}

#[derive(Default)]
struct State {
    rows: HashMap<ObjectId, Location>,
    staged: Vec<Staged>,
    touched_packs: BTreeSet<u32>,
    /// Content index rows (non-normative cache) committed with the rows.
    content: Vec<crate::locator::ContentRow>,
    receipt: BatchReceipt,
    failpoint: Option<PublishFailpoint>,
}

/// A set of objects published together: their bytes are appended (or
/// staged) as they are put, and [`Batch::commit`] makes them visible in one
/// `Durability::Immediate` locator transaction after the flushes of
/// section 6.3. `Batch` is `Sync`: many threads may put into one batch.
/// Dropping a batch without committing leaves only unreferenced bytes.
pub struct Batch<'s> {
    store: &'s ObjectStore,
    state: Mutex<State>,
    /// A locator snapshot taken at the first lookup, so deduplication
    /// checks do not open a read transaction per put. Objects committed by
    /// other batches after it was taken are not seen (at worst written twice).
    snapshot: Mutex<Option<Arc<LocatorSnapshot>>>,
}

type LocatorSnapshot = redb::ReadOnlyTable<&'static [u8; 33], &'static [u8]>;

/// Whether a put stored new bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PutOutcome {
    Written { envelope_len: u64 },
    AlreadyPresent,
}

impl ObjectStore {
    /// Start a batch.
    pub fn batch(&self) -> Batch<'_> {
        Batch {
            store: self,
            state: Mutex::new(State::default()),
            snapshot: Mutex::new(None),
        }
    }

    /// Put one object and publish it durably.
    pub fn put(&self, kind: ObjectKind, payload: &[u8]) -> Result<ObjectId> {
        let b = self.batch();
        let id = b.put(kind, payload)?;
        b.commit()?;
        Ok(id)
    }
}

impl<'s> Batch<'s> {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The store this batch writes to.
    pub fn store(&self) -> &'s ObjectStore {
        self.store
    }

    #[doc(hidden)]
    pub fn set_failpoint(&self, fp: Option<PublishFailpoint>) {
        self.state().failpoint = fp;
    }

    /// Whether the object is already stored or put in this batch.
    pub fn has(&self, id: &ObjectId) -> Result<bool> {
        if self.state().rows.contains_key(id) {
            return Ok(true);
        }
        self.stored(id)
    }

    /// Whether the locator snapshot of this batch has the object.
    fn stored(&self, id: &ObjectId) -> Result<bool> {
        let p = &self.store.db_path;
        let snap = {
            let mut slot = self.snapshot.lock().unwrap_or_else(|p| p.into_inner());
            match slot.as_ref() {
                Some(s) => s.clone(),
                None => {
                    let txn = self.store.db.begin_read().map_err(db_err(p))?;
                    let table = Arc::new(txn.open_table(LOCATOR_TABLE).map_err(db_err(p))?);
                    *slot = Some(table.clone());
                    table
                }
            }
        };
        Ok(snap.get(&id.to_bytes()).map_err(db_err(p))?.is_some())
    }

    /// Reserve `id` in this batch; false if the batch or the store has it.
    fn reserve(&self, id: &ObjectId) -> Result<bool> {
        {
            let st = self.state();
            if st.rows.contains_key(id) {
                drop(st);
                self.state().receipt.objects_deduplicated += 1;
                return Ok(false);
            }
        }
        if self.stored(id)? {
            self.state().receipt.objects_deduplicated += 1;
            return Ok(false);
        }
        Ok(true)
    }

    /// Put an object from its original payload: compute the identity,
    /// skip it if present, otherwise encode under the store's compression.
    pub fn put(&self, kind: ObjectKind, payload: &[u8]) -> Result<ObjectId> {
        let id = object_identity(kind, payload).map_err(|e| StoreError::InvalidInput {
            id: ObjectId::new(kind, [0; 32]),
            reason: e.to_string(),
        })?;
        self.put_with_id(id, payload)?;
        Ok(id)
    }

    /// Put a payload whose identity the caller has just computed from these
    /// same bytes (the import path). Not for untrusted ids: use
    /// [`Batch::put_encoded`] for bytes from elsewhere.
    pub fn put_with_id(&self, id: ObjectId, payload: &[u8]) -> Result<PutOutcome> {
        if !self.reserve(&id)? {
            return Ok(PutOutcome::AlreadyPresent);
        }
        let env = encode_for_store(id.kind, payload, self.store.options.compression);
        self.store_envelope(id, env.parts())
    }

    /// [`Batch::put_with_id`] for bytes received from a peer and verified
    /// against `id`, that may heal a damaged copy (issue #14 item 12): when
    /// the store has `id` but its stored copy fails verification, these
    /// bytes are written anew and the commit repoints the locator to them
    /// (the damaged bytes stay unreferenced until compaction). A sound
    /// stored copy is kept, as `put_with_id` keeps it; the check reads the
    /// stored copy only when the id is already present, which an honest
    /// client's upload (it asks what is missing first) rarely is.
    pub fn put_healing(&self, id: ObjectId, payload: &[u8]) -> Result<PutOutcome> {
        if self.state().rows.contains_key(&id) || !self.stored(&id)? {
            return self.put_with_id(id, payload);
        }
        match self.store.get(&id) {
            Ok(_) => {
                self.state().receipt.objects_deduplicated += 1;
                Ok(PutOutcome::AlreadyPresent)
            }
            Err(StoreError::CorruptObject { .. }) => {
                let env = encode_for_store(id.kind, payload, self.store.options.compression);
                self.store_envelope(id, env.parts())
            }
            Err(e) => Err(e),
        }
    }

    /// [`Batch::put_healing`] for many payloads, in parallel as
    /// [`Batch::put_all_with_ids`].
    pub fn put_all_healing(&self, objects: &[(ObjectId, &[u8])]) -> Result<()> {
        use rayon::prelude::*;
        if !worth_a_pool(objects) {
            return objects
                .iter()
                .try_for_each(|(id, data)| self.put_healing(*id, data).map(|_| ()));
        }
        objects
            .par_iter()
            .try_for_each(|(id, data)| self.put_healing(*id, data).map(|_| ()))
    }

    /// Put many payloads whose identities the caller has verified against
    /// these same bytes, in parallel on the rayon pool (each loose object's
    /// staging write and flush overlaps the others').
    pub fn put_all_with_ids(&self, objects: &[(ObjectId, &[u8])]) -> Result<()> {
        use rayon::prelude::*;
        if !worth_a_pool(objects) {
            return objects
                .iter()
                .try_for_each(|(id, data)| self.put_with_id(*id, data).map(|_| ()));
        }
        objects
            .par_iter()
            .try_for_each(|(id, data)| self.put_with_id(*id, data).map(|_| ()))
    }

    /// Put an already-encoded envelope (as received from a peer). Its
    /// framing and identity are verified before anything is written.
    pub fn put_encoded(&self, id: ObjectId, envelope_bytes: &[u8]) -> Result<PutOutcome> {
        envelope::decode_verified(envelope_bytes, &id, max_payload(id.kind)).map_err(|e| {
            StoreError::InvalidInput {
                id,
                reason: e.to_string(),
            }
        })?;
        if !self.reserve(&id)? {
            return Ok(PutOutcome::AlreadyPresent);
        }
        self.store_envelope(id, [envelope_bytes, &[]])
    }

    /// Write a verified envelope, given as two consecutive parts (the
    /// header and the payload of a codec-0 envelope, so its bytes are not
    /// copied once more; or the whole envelope and nothing): pack append
    /// or loose staging.
    pub(crate) fn store_envelope(&self, id: ObjectId, env: [&[u8]; 2]) -> Result<PutOutcome> {
        let envelope_len = (env[0].len() + env[1].len()) as u64;
        debug_assert!(envelope_len as usize >= HEADER_LEN);
        if envelope_len > self.store.options.small_object_threshold {
            // Step 1: staged file data flushed at staging time.
            let staging = self.store.dir.join(layout::STAGING);
            let mut tmp = tempfile::Builder::new()
                .prefix("loose-")
                .suffix(".tmp")
                .tempfile_in(&staging)
                .map_err(io_err(&staging))?;
            for part in env {
                tmp.write_all(part).map_err(io_err(tmp.path()))?;
            }
            tmp.as_file().sync_data().map_err(io_err(tmp.path()))?;
            let path = tmp.into_temp_path().keep().map_err(|e| StoreError::Io {
                path: staging.clone(),
                source: e.error,
            })?;
            let mut st = self.state();
            if st.rows.contains_key(&id) {
                let _ = std::fs::remove_file(&path);
                st.receipt.objects_deduplicated += 1;
                return Ok(PutOutcome::AlreadyPresent);
            }
            st.rows.insert(id, Location::Loose { envelope_len });
            st.staged.push(Staged {
                id,
                tmp: path,
                envelope_len,
            });
            st.receipt.objects_written += 1;
            st.receipt.bytes_written += envelope_len;
            return Ok(PutOutcome::Written { envelope_len });
        }
        let mut w = self.store.lock_writer();
        let mut st = self.state();
        if st.rows.contains_key(&id) {
            st.receipt.objects_deduplicated += 1;
            return Ok(PutOutcome::AlreadyPresent);
        }
        let loc = self
            .store
            .append_entry(&mut w, &id, env, &mut st.touched_packs)?;
        st.rows.insert(id, loc);
        st.receipt.objects_written += 1;
        st.receipt.bytes_written += envelope_len;
        Ok(PutOutcome::Written { envelope_len })
    }

    /// Record a content index row for a manifest put (or found) in this
    /// batch; committed in the same transaction as the locator rows.
    pub(crate) fn record_content(&self, row: crate::locator::ContentRow) {
        self.state().content.push(row);
    }

    /// Number of objects written by this batch so far.
    pub fn len(&self) -> usize {
        self.state().rows.len()
    }

    /// Whether nothing was written yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Publish: loose renames into shard directories, pack flush, shard and
    /// `loose/` directory flushes, then one Immediate locator commit. When
    /// this returns `Ok`, every object of the batch is durable and visible.
    ///
    /// Group commit: concurrent commits of one store share the flushes and
    /// the locator transaction. Each committer queues its batch, then takes
    /// the store's publisher turn; the one that gets it publishes every
    /// queued batch at once (section 6.3's steps 2 to 5 once for all of
    /// them, in that order) and posts the outcome to the others before
    /// handing the turn on, so a committer that then finds its outcome
    /// posted returns it without flushing anything. The pack flush and the
    /// locator commit run without holding the writer: other batches keep
    /// appending (and queue up for the next publication) meanwhile. A
    /// failure is every queued batch's failure.
    pub fn commit(self) -> Result<BatchReceipt> {
        let store = self.store;
        let mut st = std::mem::take(&mut *self.state());
        let receipt = std::mem::take(&mut st.receipt);
        let ticket = {
            let mut q = store.lock_commits();
            let ticket = q.next_ticket;
            q.next_ticket += 1;
            q.pending.push(Member {
                ticket,
                staged: std::mem::take(&mut st.staged),
                rows: st.rows.drain().collect(),
                content: std::mem::take(&mut st.content),
                failpoint: st.failpoint,
            });
            ticket
        };
        let turn = store.publisher.lock().unwrap_or_else(|p| p.into_inner());
        let mut members = {
            let mut q = store.lock_commits();
            if let Some(r) = q.done.remove(&ticket) {
                return r.map(|()| receipt);
            }
            // Ours is queued: it was queued before we took the turn and
            // only a holder of the turn takes the queue, posting every
            // outcome before handing the turn on (unless it panicked).
            let members = std::mem::take(&mut q.pending);
            if !members.iter().any(|m| m.ticket == ticket) {
                return Err(StoreError::Io {
                    path: store.dir.clone(),
                    source: std::io::Error::other("a batch group's publication was interrupted"),
                });
            }
            members
        };
        let r = publish(store, &mut members);
        {
            let mut q = store.lock_commits();
            for m in members.iter().filter(|m| m.ticket != ticket) {
                q.done.insert(m.ticket, shared_failure(&r, &store.dir));
            }
        }
        drop(turn);
        r.map(|()| receipt)
    }
}

/// A batch queued for publication.
pub(crate) struct Member {
    ticket: u64,
    staged: Vec<Staged>,
    rows: Vec<(ObjectId, Location)>,
    content: Vec<crate::locator::ContentRow>,
    failpoint: Option<PublishFailpoint>,
}

/// The store's queue of batches to publish and the outcomes of those
/// published by another committer.
#[derive(Default)]
pub(crate) struct Commits {
    next_ticket: u64,
    pub(crate) pending: Vec<Member>,
    done: HashMap<u64, Result<()>>,
}

impl ObjectStore {
    fn lock_commits(&self) -> std::sync::MutexGuard<'_, Commits> {
        self.commits.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Fewest payload bytes a batch of several objects must hold before its
/// puts go to the rayon pool. Below it they run on the calling thread: a
/// handful of small objects (one small submission's chunk, manifest and
/// change set) compress in microseconds, while handing them to the pool
/// costs a wake-up and then the workers' spinning before they sleep, which
/// on a 2-core server under many small submissions took CPU from every
/// other request (issue 19, 32-client load).
pub const POOL_MIN_BYTES: usize = 256 << 10;

/// Whether `objects` are worth the rayon pool ([`POOL_MIN_BYTES`]).
pub fn worth_a_pool(objects: &[(ObjectId, &[u8])]) -> bool {
    objects.len() > 1 && objects.iter().map(|(_, d)| d.len()).sum::<usize>() >= POOL_MIN_BYTES
}

/// A queued batch's copy of the publication's outcome.
fn shared_failure(r: &Result<()>, dir: &std::path::Path) -> Result<()> {
    match r {
        Ok(()) => Ok(()),
        Err(StoreError::Injected(what)) => Err(StoreError::Injected(what)),
        Err(e) => Err(StoreError::Io {
            path: dir.to_path_buf(),
            source: std::io::Error::other(format!("publication of a batch group failed: {e}")),
        }),
    }
}

/// Section 6.3 for every member at once; the caller holds the
/// publisher turn. Every member's pack appends precede its queueing, so the
/// pack length read here covers them all.
fn publish(store: &ObjectStore, members: &mut [Member]) -> Result<()> {
    let failpoint = members.iter().find_map(|m| m.failpoint);
    let mut shards = BTreeSet::new();
    let mut created_shard = false;
    let (pack, len, file) = {
        // Under the writer: a shard created by another writer of the
        // store is flushed (with `loose/`) before that writer lets go.
        let mut w = store.lock_writer();
        store.check_poison(&w)?;
        // Step 2: loose renames into shard directories (pack appends are done).
        for s in members.iter().flat_map(|m| &m.staged) {
            let shard = layout::loose_shard(&store.dir, &s.id);
            if !shard.exists() {
                std::fs::create_dir_all(&shard).map_err(io_err(&shard))?;
                created_shard = true;
            }
            let dest = layout::loose_path(&store.dir, &s.id);
            std::fs::rename(&s.tmp, &dest).map_err(io_err(&dest))?;
            debug_assert!(s.envelope_len > 0);
            shards.insert(shard);
        }
        if failpoint == Some(PublishFailpoint::BeforePackFlush) {
            return Err(StoreError::Injected("before pack flush"));
        }
        let path = layout::pack_path(&store.dir, w.id);
        let r = w.prepare_sync(&path);
        let file = ObjectStore::poison_on_error(&mut w, r)?;
        (w.id, w.len, file)
    };
    // Step 3: pack flushed through `len` (earlier packs were flushed when
    // sealed), without the writer.
    if let Some(file) = file {
        let path = layout::pack_path(&store.dir, pack);
        let r = file.sync_data().map_err(io_err(&path));
        let mut w = store.lock_writer();
        if w.id == pack {
            ObjectStore::poison_on_error(&mut w, r)?;
        } else {
            r?;
        }
        w.synced_through(pack, len);
    }
    // Step 4: shard directories, then `loose/` if a shard was created.
    for shard in &shards {
        sync_dir(shard)?;
    }
    if created_shard {
        sync_dir(&store.dir.join(layout::LOOSE))?;
    }
    // Step 5: the locator transaction.
    let mut rows = Vec::new();
    let mut content = Vec::new();
    for m in members.iter_mut() {
        if rows.is_empty() {
            rows = std::mem::take(&mut m.rows);
        } else {
            rows.append(&mut m.rows);
        }
        content.append(&mut m.content);
    }
    store.commit_rows_at(
        pack,
        len,
        &rows,
        &content,
        failpoint == Some(PublishFailpoint::BeforeLocatorCommit),
    )?;
    store
        .publications
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        // Uncommitted loose candidates are quarantine temporaries.
        let st = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        for s in st.staged.drain(..) {
            let _ = std::fs::remove_file(&s.tmp);
        }
    }
}

/// Objects at least this large are probed before LZ4 is tried on all of them.
const PROBE_MIN_LEN: usize = 1 << 20;
/// Size of each probe sample.
const PROBE_SAMPLE: usize = 64 * 1024;

/// Encode under the store's policy. Under `lz4`, a large payload is first
/// probed: three 64 KiB samples (start, middle, end) are LZ4-compressed and
/// if together they shrink by less than 3% the payload is stored with codec
/// 0 without compressing the rest (incompressible media would otherwise
/// cost a full LZ4 pass per byte for nothing). Codec 0 is always a valid
/// representation and identity never depends on the codec; every other
/// payload gets the format crate's exact rule (codec 1 only if smaller).
pub(crate) fn encode_for_store(
    kind: ObjectKind,
    payload: &[u8],
    compression: Compression,
) -> Encoded<'_> {
    if compression == Compression::None
        || (payload.len() >= PROBE_MIN_LEN && looks_incompressible(payload))
    {
        return Encoded::identity(kind, payload);
    }
    Encoded::Owned(envelope::encode(kind, payload, compression))
}

/// An envelope ready to store.
pub(crate) enum Encoded<'a> {
    /// Codec 0: the 20-byte header, then the original payload itself (not
    /// copied: a large chunk goes from the caller's buffer to the file).
    Identity {
        header: [u8; HEADER_LEN],
        payload: &'a [u8],
    },
    /// Any envelope, whole.
    Owned(Vec<u8>),
}

impl<'a> Encoded<'a> {
    fn identity(kind: ObjectKind, payload: &'a [u8]) -> Self {
        let mut h = Vec::with_capacity(HEADER_LEN);
        envelope::EnvelopeHeader {
            kind,
            codec: envelope::CODEC_IDENTITY,
            stored_len: payload.len() as u64,
        }
        .write(&mut h);
        let mut header = [0u8; HEADER_LEN];
        header.copy_from_slice(&h);
        Encoded::Identity { header, payload }
    }

    /// The envelope's bytes, in order.
    pub(crate) fn parts(&self) -> [&[u8]; 2] {
        match self {
            Encoded::Identity { header, payload } => [header, payload],
            Encoded::Owned(v) => [v, &[]],
        }
    }

    /// The envelope's bytes in one buffer.
    #[cfg(test)]
    pub(crate) fn to_vec(&self) -> Vec<u8> {
        self.parts().concat()
    }
}

fn looks_incompressible(payload: &[u8]) -> bool {
    let n = payload.len();
    let starts = [0, n / 2 - PROBE_SAMPLE / 2, n - PROBE_SAMPLE];
    let mut original = 0usize;
    let mut compressed = 0usize;
    for s in starts {
        let sample = &payload[s..s + PROBE_SAMPLE];
        original += sample.len();
        compressed += lz4_flex::block::compress(sample).len().min(sample.len());
    }
    compressed * 100 >= original * 97
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_keeps_compressible_payloads_compressed() {
        let random = scribe_testkit::noise(2 << 20, 1);
        assert!(looks_incompressible(&random));
        let env = encode_for_store(ObjectKind::Chunk, &random, Compression::Lz4).to_vec();
        assert_eq!(env[8], envelope::CODEC_IDENTITY);
        let text = b"the quick brown fox ".repeat(100_000);
        assert!(!looks_incompressible(&text));
        let env = encode_for_store(ObjectKind::Chunk, &text, Compression::Lz4).to_vec();
        assert_eq!(env[8], envelope::CODEC_LZ4_BLOCKS);
    }

    #[test]
    fn small_batches_stay_off_the_pool_and_both_paths_store_everything() {
        let id = |d: &[u8]| object_identity(ObjectKind::Chunk, d).unwrap();
        // One object, or a few small ones: the calling thread.
        let one = vec![1u8; POOL_MIN_BYTES * 2];
        assert!(!worth_a_pool(&[(id(&one), &one)]));
        let small: Vec<Vec<u8>> = (0..8u8).map(|i| vec![i; 4096]).collect();
        let small: Vec<(ObjectId, &[u8])> = small.iter().map(|d| (id(d), d.as_slice())).collect();
        assert!(!worth_a_pool(&small));
        // Several that reach the threshold together: the pool.
        let large: Vec<Vec<u8>> = (0..4u8)
            .map(|i| vec![i.wrapping_add(100); POOL_MIN_BYTES / 4])
            .collect();
        let large: Vec<(ObjectId, &[u8])> = large.iter().map(|d| (id(d), d.as_slice())).collect();
        assert!(worth_a_pool(&large));
        assert!(!worth_a_pool(&large[..3]));

        let dir = tempfile::tempdir().unwrap();
        let store = ObjectStore::create(dir.path().join("s"), Default::default()).unwrap();
        let b = store.batch();
        b.put_all_healing(&small).unwrap();
        b.put_all_with_ids(&large).unwrap();
        b.commit().unwrap();
        for (oid, data) in small.iter().chain(&large) {
            assert_eq!(store.get(oid).unwrap(), *data, "{oid}");
        }
    }

    #[test]
    fn identity_parts_are_the_codec_0_envelope() {
        for (payload, compression) in [
            (vec![7u8; 3], Compression::None),
            (Vec::new(), Compression::None),
            (
                (0..(2u32 << 20))
                    .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
                    .collect(),
                Compression::None,
            ),
        ] {
            let enc = encode_for_store(ObjectKind::Manifest, &payload, compression);
            assert!(matches!(enc, Encoded::Identity { .. }));
            assert_eq!(
                enc.to_vec(),
                envelope::encode(ObjectKind::Manifest, &payload, Compression::None)
            );
        }
    }
}

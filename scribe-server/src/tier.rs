//! The S3 durable tier behind a served data root (issue #20,
//! `docs/nokv-bridge.md`): a background uploader that publishes every
//! accepted change of every repository as a NoKV artifact revision, and
//! the acknowledgement profiles.
//!
//! * **local**: a submit is acknowledged after the local durable commit.
//!   The metadata's history is the durable outbox: the tier's per-root
//!   cursor says what is in the bucket, everything accepted above it is
//!   the backlog, so a SIGKILL loses nothing (the next start resumes at
//!   the cursor, reusing a recorded revision id).
//! * **durable**: the accepted outcome of a submit (and of an
//!   OperationOutcome query) is answered only once the change is in the
//!   bucket (its blocks, its index record, and the catalog's and the
//!   repository's recovery journals shipped up to it); if that does not happen within the ack timeout the answer is
//!   `tier_unavailable` (retryable: the client asks again with the same
//!   operation id and gets the accepted outcome once the upload is done).
//!
//! With a tier, the local object store is a cache: `scribe-server tier
//! evict` drops the chunks the bucket holds, and any read that misses
//! locally (transfers, acceptance's checks) fetches the object from the
//! bucket, checks it and puts it back (`stores::Fallback`).
//!
//! The record lives at `<data>/tier/tier.redb`; the uploader writes
//! `<data>/tier/status` (backlog per repository) after every pass so
//! `scribe-server tier status` can read it while the server runs.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use nokv_bridge::tier::{FileVersion, Provider, Tier, TierError, TierOptions};
use scribe_format::{ErrorCode, ObjectId, RepositoryId};

use crate::service::stores::Fallback;
use crate::service::{AcceptedHook, Failure, Service};

/// When a submit is acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ack {
    Local,
    Durable,
}

impl std::str::FromStr for Ack {
    type Err = String;
    fn from_str(s: &str) -> Result<Ack, String> {
        match s {
            "local" => Ok(Ack::Local),
            "durable" => Ok(Ack::Durable),
            other => Err(format!("{other:?}: the profiles are `local` and `durable`")),
        }
    }
}

/// The tier's directory inside a data root.
pub fn dir(data: &Path) -> PathBuf {
    data.join("tier")
}

/// The logical shard of a data root: the low 32 bits of its incarnation
/// (fixed in `tier.redb` when it is created, so a restored root keeps its
/// keys).
pub fn shard_of(incarnation_hex: &str) -> u32 {
    let tail = &incarnation_hex[incarnation_hex.len().saturating_sub(8)..];
    u32::from_str_radix(tail, 16).unwrap_or(0)
}

/// Open the tier record of the data root at `data`.
pub fn open_record(
    data: &Path,
    incarnation_hex: &str,
    provider: Arc<dyn Provider>,
) -> Result<Tier, TierError> {
    let d = dir(data);
    std::fs::create_dir_all(&d).map_err(|e| TierError::State {
        path: d.display().to_string(),
        detail: e.to_string(),
    })?;
    Tier::open(
        &d.join("tier.redb"),
        shard_of(incarnation_hex),
        provider,
        TierOptions::default(),
    )
}

/// What change `change` names: the objects its commit holds (its commit
/// envelope and change set, the manifests of the files it touched) and
/// each file revision with its chunks. Objects older changes brought are
/// named too; the tier skips what it owns.
pub fn change_objects(
    repo: &scribe_metadata::Repository,
    store: &scribe_objects::ObjectStore,
    change: u64,
) -> Result<(Vec<ObjectId>, Vec<FileVersion>), String> {
    let (d, commit) = described(repo, change)?;
    let mut files = Vec::new();
    for (path, h) in &d.paths {
        let Some(st) = &h.state else { continue };
        let mid = ObjectId::manifest(st.manifest);
        files.push(FileVersion {
            path: path.clone(),
            chunks: manifest_chunks(store, &mid).map_err(|e| format!("{path}@{change}: {e}"))?,
        });
    }
    Ok((commit, files))
}

/// Change `change` described, with the ids of its commit objects: the
/// envelope, the change set, then each touched file's manifest in path
/// order (the index record's key depends on this order).
fn described(
    repo: &scribe_metadata::Repository,
    change: u64,
) -> Result<(scribe_metadata::read::Described, Vec<ObjectId>), String> {
    let d = repo
        .view()
        .and_then(|mut v| v.describe(change))
        .map_err(|e| format!("change {change}: {e}"))?;
    let mut commit = vec![
        ObjectId::commit(d.record.commit_id),
        ObjectId::change_set(d.record.change_set),
    ];
    commit.extend(
        d.paths
            .iter()
            .filter_map(|(_, h)| h.state.as_ref().map(|st| ObjectId::manifest(st.manifest))),
    );
    Ok((d, commit))
}

fn manifest_chunks(
    store: &scribe_objects::ObjectStore,
    mid: &ObjectId,
) -> Result<Vec<ObjectId>, String> {
    let payload = store.get(mid).map_err(|e| format!("manifest {mid}: {e}"))?;
    let m =
        scribe_objects::decode_manifest(&payload).map_err(|e| format!("manifest {mid}: {e}"))?;
    Ok(m.chunks.iter().map(|c| ObjectId::chunk(c.id)).collect())
}

/// The uploader and the acknowledgement profile of a serving data root.
pub struct TierService {
    tier: Tier,
    service: Weak<Service>,
    ack: Ack,
    ack_timeout: Duration,
    /// Bumped by every accepted submit and every finished pass.
    wake: (Mutex<Wake>, Condvar),
    status_path: PathBuf,
    /// `--cache-bytes`: the most bytes each repository's local store may
    /// hold after a trim.
    cache_bytes: Option<u64>,
    /// Per repository: trims done, and what the last one kept that the
    /// bucket does not hold (bytes).
    trims: Mutex<std::collections::HashMap<RepositoryId, (u64, u64)>>,
    /// The data root's descriptor and block shard are in the bucket.
    root_shipped: std::sync::atomic::AtomicBool,
    /// The descriptors (by name in the bucket) as last shipped.
    descriptors: Mutex<std::collections::HashMap<String, Vec<u8>>>,
    /// Chunks stored for operations not yet submitted, waiting to be
    /// uploaded early (`Tier::prestage`).
    early: (Mutex<Early>, Condvar),
    /// Verified bytes read from the bucket (and read ahead), and the
    /// objects being fetched.
    reads: (Mutex<Reads>, Condvar),
    /// Wakes one read-ahead thread (with `reads.0`): work or room came.
    /// The thread that takes an item wakes the next while items and room
    /// remain. Every read used to wake all twelve (`notify_all` on
    /// `reads.1`, which demand reads wait on for their block): 29 k of a
    /// 2 GiB cold read's 45-47 k context switches.
    ahead_wake: Condvar,
    /// Objects read from the bucket waiting to be put back into the local
    /// store.
    writes: (Mutex<WriteBack>, Condvar),
    /// Objects fetched from the bucket, reads answered from memory
    /// (read ahead or fetched for another request), objects written back,
    /// objects whose write-back was deferred (queue full while reads ran).
    read_counts: [std::sync::atomic::AtomicU64; 4],
    /// When the last read through the tier was answered (milliseconds
    /// since `started`): the write-back waits until reads go quiet.
    last_read_ms: std::sync::atomic::AtomicU64,
    /// Reads through the tier under way: reads are not quiet while one
    /// waits for its block (a 16 MiB GET on a busy machine takes longer
    /// than [`READS_QUIET`]).
    active_reads: std::sync::atomic::AtomicUsize,
    /// Reads waiting for their object's block to come from the bucket:
    /// read-ahead starts no GET meanwhile (see `run_read_ahead`).
    reads_waiting: std::sync::atomic::AtomicUsize,
    /// Reads that waited for a bucket GET, and the milliseconds waited in
    /// all (`tier status`).
    read_waits: [std::sync::atomic::AtomicU64; 2],
    /// `SCRIBE_TIER_AHEAD_YIELDS=0` turns the yielding off (benches).
    ahead_yields: bool,
    started: Instant,
    /// [`WRITE_BACK_BYTES`], or `SCRIBE_TIER_WRITE_BACK_BYTES` (tests).
    write_back_bytes: u64,
    /// [`EARLY_GATHER`], or `SCRIBE_TIER_EARLY_GATHER_MS` (tests).
    early_gather: Duration,
    /// [`READS_QUIET`], or `SCRIBE_TIER_READS_QUIET_MS` (tests that count
    /// GETs: a pause of a loaded test machine must not start the
    /// write-back between two reads).
    reads_quiet: Duration,
    /// [`READ_CACHE_BLOCKS`] blocks, or `SCRIBE_TIER_READ_CACHE_BYTES`
    /// (tests, benches).
    read_cache_bytes: u64,
    /// What read-ahead may fill while reads pause.
    read_cache_far_bytes: u64,
    /// [`READ_CACHE_IDLE`], or `SCRIBE_TIER_READ_CACHE_IDLE_MS` (tests).
    read_cache_idle: Duration,
    /// [`READ_AHEAD_OBJECTS`], or `SCRIBE_TIER_READ_AHEAD_OBJECTS`.
    read_ahead_objects: usize,
    /// Whether the write-back of held objects runs while reads go on:
    /// on machines of [`WRITE_BACK_DURING_READS_CORES`] cores or more
    /// (`SCRIBE_TIER_WRITE_BACK_DURING_READS=1|0` decides instead).
    write_back_during_reads: bool,
}

/// Most ids queued from readers' hints ([`TierService::hint`]).
const HINTED_OBJECTS: usize = 4096;

/// Threads reading ahead: at most this many block GETs in flight for
/// read-ahead. 12, not the 8 the issue measures radosgw's own GET rate
/// with: with 8 a cold read left a tenth of this 2-core machine idle
/// between GETs (12: 717 and 736 MiB/s against 591 and 663, alternated),
/// while radosgw's own rate is the same at 8, 12 and 16 in flight
/// (docs/performance.md, 2026-12-05).
const READ_AHEAD: usize = 12;
/// Reads count as paused (for read-ahead's far room) after this long
/// without one.
const AHEAD_PAUSE: Duration = Duration::from_millis(20);
/// Objects after each one read from the bucket that are read ahead (with
/// 3 MiB chunks bundled into 16 MiB blocks: about 30 blocks, the room of
/// a pause, [`READ_CACHE_FAR_BLOCKS`]; while reads go on, the near room,
/// [`READ_CACHE_BLOCKS`], bounds it).
const READ_AHEAD_OBJECTS: usize = 160;
/// Most bytes of verified objects kept in memory for reads: this many
/// blocks of the tier's largest bundle (16 MiB: 192 MiB), room for every
/// block the read-ahead may have in flight. Objects a read was answered
/// with are evicted first, so little more is needed: with that rule, 128
/// MiB against 256 faulted in 146-166 k pages instead of 175-215 k per
/// 2 GiB cold read and ran 8-10 % faster with the same GETs, 160 MiB ran
/// 797 MiB/s; below the read-ahead's blocks (64 MiB) one read of three
/// fetched every block twice (docs/performance.md, 2026-12-05).
const READ_CACHE_BLOCKS: u64 = READ_AHEAD as u64;
/// Most bytes of verified objects no read has had yet, while reads pause:
/// this many blocks (16 MiB: 512 MiB). The `scribe` client stops reading
/// while it flushes each batch of files (0.25-0.5 s, both cores idle
/// here); read-ahead fills that pause instead of waiting for the next
/// read. A 2 GiB cold workspace: 4.31-4.53 s against 4.62-4.64 with the
/// near room alone, the pauses filled with GETs (docs/performance.md,
/// "Reading ahead while the reader pauses").
const READ_CACHE_FAR_BLOCKS: u64 = 32;
/// Once no read came for this long, the read cache goes back to its near
/// room ([`READ_CACHE_BLOCKS`]): what was read ahead for a reader that
/// went away does not hold the far room's memory in an idle server.
const READ_CACHE_IDLE: Duration = Duration::from_secs(10);
/// Most bytes of verified objects waiting in memory for their
/// write-back; a read beyond it defers its object's write-back (the id
/// only, fetched again once reads are quiet). 128 MiB rather than 512:
/// every byte held keeps its block's body alive, so each new GET lands in
/// freshly faulted (kernel-zeroed) pages; with 512 MiB a 2 GiB cold read
/// faulted in 1 GiB and ran 12-16 % slower (docs/performance.md,
/// 2026-12-05). The price: after a 2 GiB cold read about 1.9 GiB are
/// fetched again for the write-back instead of 1.5 GiB.
/// `SCRIBE_TIER_WRITE_BACK_BYTES` overrides it (tests, benches).
const WRITE_BACK_BYTES: u64 = 128 << 20;
/// Most object ids whose write-back is deferred; beyond it a read leaves
/// its object to the next miss.
const DEFERRED_IDS: usize = 1 << 20;
/// The write-back waits until no read went through the tier for this
/// long: on a machine whose cores the reads fill, writing 2 GiB into the
/// local store (and flushing it) during the read slowed the read by a
/// third (docs/performance.md, the cold-read profile). A second, not less:
/// the `scribe` client pauses its reads while it flushes each batch of
/// files (0.25-0.5 s for 700 MiB here), and with 300 ms the write-back
/// started in those pauses and gave the client's flush its own bytes to
/// write as well (docs/performance.md, "Body buffers").
const READS_QUIET: Duration = Duration::from_millis(1000);
/// ... but not longer than this: under reads that never pause, the
/// write-back runs anyway (at its low priority).
const WRITE_BACK_MAX_WAIT: Duration = Duration::from_secs(10);
/// On a machine of at least this many cores the write-back of the held
/// objects does not wait for quiet reads: it runs beside them at its low
/// priority on cores the reads leave, and fewer objects are deferred
/// (each deferred one costs a second GET from the bucket: billed egress
/// on many providers). On 2 cores the reads fill the machine and a
/// write-back beside them slowed them by a third.
const WRITE_BACK_DURING_READS_CORES: usize = 4;

/// The number in environment variable `name` (a test or bench override),
/// else `default`.
fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

type ObjKey = (RepositoryId, ObjectId);
/// Objects of one repository waiting for their write-back.
type WriteBatch = Vec<(ObjectId, bytes::Bytes)>;

#[derive(Default)]
struct Reads {
    cache: std::collections::HashMap<ObjKey, bytes::Bytes>,
    /// Keys in the order their objects came in (evicted oldest first).
    order: std::collections::VecDeque<ObjKey>,
    /// Keys of cached objects a read has been answered with: evicted
    /// before any object no read has had yet (see [`Reads::evict`]).
    served: std::collections::VecDeque<ObjKey>,
    /// The cached objects a read has been answered with.
    served_set: std::collections::HashSet<ObjKey>,
    bytes: u64,
    /// Bytes of cached objects no read has had yet: read-ahead fetches
    /// only while a block more fits beside them (see `run_read_ahead`).
    unserved_bytes: u64,
    /// Read-ahead fetches under way.
    ahead_fetching: u64,
    /// Block keys being fetched.
    inflight: std::collections::HashSet<String>,
    ahead: std::collections::VecDeque<ObjKey>,
    /// What readers asked for and have not had yet (the rest of their
    /// `ObjectGetMany` requests, in their order): fetched before
    /// anything in `ahead`, up to the far room (see [`TierService::hint`]).
    hinted: std::collections::VecDeque<ObjKey>,
    /// A read-ahead thread looks every [`AHEAD_PAUSE`] / 2 whether reads
    /// paused (the far room opens); the others sleep until woken.
    ahead_watcher: bool,
    stop: bool,
}

impl Reads {
    /// Cache a verified object fetched from the bucket (not yet read);
    /// one already cached stays as it is.
    fn insert(&mut self, key: ObjKey, bytes: bytes::Bytes) {
        if self.cache.contains_key(&key) {
            return;
        }
        self.bytes += bytes.len() as u64;
        self.unserved_bytes += bytes.len() as u64;
        self.cache.insert(key, bytes);
        self.order.push_back(key);
    }

    /// Drop objects until at most `limit` bytes are cached: first those a
    /// read was answered with (a fresh workspace reads each object once;
    /// they are in the write-back's hold, or deferred), then the oldest.
    /// Evicting by age alone dropped objects read ahead before their read
    /// came: a 2 GiB cold read fetched 11-20 of its 136 blocks twice
    /// (docs/performance.md, 2026-12-05).
    ///
    /// Objects no read has had yet stay up to `far` bytes: what read-ahead
    /// fetched while the reader paused (see `run_read_ahead`).
    fn evict(&mut self, limit: u64, far: u64) {
        loop {
            let next = if self.bytes > far.max(limit) {
                self.served.pop_front().or_else(|| self.order.pop_front())
            } else if self.bytes > limit {
                self.served.pop_front()
            } else {
                None
            };
            let Some(old) = next else {
                break;
            };
            if let Some(b) = self.cache.remove(&old) {
                self.bytes -= b.len() as u64;
                if !self.served_set.remove(&old) {
                    self.unserved_bytes -= b.len() as u64;
                }
            }
        }
        // Keys evicted from one queue stay in the other: keep both near
        // the cache's size.
        let bound = 2 * self.cache.len() + 1024;
        if self.order.len() > bound {
            let cache = &self.cache;
            self.order.retain(|k| cache.contains_key(k));
        }
        if self.served.len() > bound {
            let cache = &self.cache;
            self.served.retain(|k| cache.contains_key(k));
        }
    }

    /// A read was answered with the cached object `key`.
    fn served(&mut self, key: ObjKey) {
        if let Some(b) = self.cache.get(&key) {
            if self.served_set.insert(key) {
                self.unserved_bytes -= b.len() as u64;
                self.served.push_back(key);
            }
        }
    }

    /// Whether read-ahead may fetch one more block of at most `block`
    /// bytes: the objects no read has had yet, plus the blocks being read
    /// ahead, plus this one, fit in the cache's `limit`. Otherwise a block
    /// read ahead would push out objects read ahead before, not yet read:
    /// a single-connection reader slower than the bucket (the `scribe`
    /// client's batches) had every block fetched 2-4 times.
    fn room_ahead(&self, block: u64, limit: u64) -> bool {
        self.unserved_bytes + (self.ahead_fetching + 1) * block <= limit
    }
}

impl WriteBack {
    /// Whether `key` waits here (held, or deferred): a read was answered
    /// with it (see `TierService::delivered`).
    fn delivered(&self, key: &ObjKey) -> bool {
        self.held.contains_key(key) || self.deferred_set.contains(key)
    }
}

#[derive(Default)]
struct WriteBack {
    /// Stores are looked up when written (a queued entry must not hold
    /// one open: a cache trim waits for every holder). Reads find queued
    /// objects here too (`held`).
    queue: std::collections::VecDeque<ObjKey>,
    held: std::collections::HashMap<ObjKey, bytes::Bytes>,
    bytes: u64,
    /// Objects read while the queue was full, in read order: fetched
    /// again (and checked again) from the bucket once reads are quiet,
    /// then written back.
    deferred: std::collections::VecDeque<ObjKey>,
    deferred_set: std::collections::HashSet<ObjKey>,
    stop: bool,
}

/// Staging entries older than this are given up (`Tier::abandon_staged`):
/// an operation not submitted within a day is abandoned (the client
/// submits again with a new upload). `SCRIBE_TIER_STAGE_TTL_SECS`
/// overrides it (tests).
const STAGE_TTL_SECS: u64 = 24 * 3600;

/// Threads uploading chunks before their operation is submitted.
const EARLY_THREADS: usize = 2;

/// How long an early uploader waits for the next batch of chunks of the
/// same operation while it gathers a block's worth
/// (`TierOptions::block_bytes`) before it uploads what it has; never more
/// than [`EARLY_GATHER_MAX_WAITS`] waits in all. A client sends a small-file import as
/// `ObjectPutMany` frames of at most 4 MiB, one batch each: uploaded one
/// by one, every frame became a block of its own, and a cold read later
/// paid a bucket GET per frame (a 2 GiB read: ~700 GETs of ~3 MiB instead
/// of ~130 of 16 MiB, docs/performance.md). A publication waiting for the
/// early uploads ends every wait at once (`Early::waiting`).
/// `SCRIBE_TIER_EARLY_GATHER_MS` overrides it (tests; 0: no gathering).
const EARLY_GATHER: Duration = Duration::from_millis(100);
/// The longest an early uploader gathers (ten waits).
const EARLY_GATHER_MAX_WAITS: u32 = 10;

/// One batch of chunks stored for an operation.
struct EarlyJob {
    seq: u64,
    repo: RepositoryId,
    operation: scribe_format::OperationId,
    ids: Vec<ObjectId>,
    /// The stored bytes the batch came with (about its chunks' bytes).
    bytes: u64,
}

#[derive(Default)]
struct Early {
    jobs: std::collections::VecDeque<EarlyJob>,
    next_seq: u64,
    /// Jobs being uploaded (or gathered): seq -> (repository, operation).
    running: std::collections::BTreeMap<u64, (RepositoryId, scribe_format::OperationId)>,
    /// Operations an uploader is gathering jobs of: other uploaders leave
    /// their jobs queued for it.
    gathering: std::collections::HashSet<(RepositoryId, scribe_format::OperationId)>,
    /// Publications waiting for the early uploads: nobody gathers then.
    waiting: usize,
    stop: bool,
}

#[derive(Default)]
struct Wake {
    requested: u64,
    passes: u64,
    stop: bool,
    last_error: Option<String>,
}

impl TierService {
    /// Start the uploader for `service` (one thread) and install the
    /// acknowledgement hook.
    pub fn start(
        service: &Arc<Service>,
        tier: Tier,
        ack: Ack,
        ack_timeout: Duration,
        cache_bytes: Option<u64>,
    ) -> Arc<TierService> {
        // Early uploads cut by the last stop (no upload runs yet): given
        // up now, their blocks deleted by the first pass.
        if let Err(e) = tier.mark_staged_abandoned(0) {
            eprintln!("scribe-server: tier: giving up the last run's early uploads: {e}");
        }
        // A `repo delete` stopped before it finished in the bucket.
        for (root, name) in tier.roots_being_deleted().unwrap_or_default() {
            let id = hex::encode(root);
            eprintln!(
                "scribe-server: tier: the deletion of repository {name} (id {id}) has not \
                 finished in the bucket; stop the server and run `scribe-server repo delete \
                 --data DIR {id} --yes --confirm {id} --tier ...` to finish it"
            );
        }
        let status_path = dir(service.root().dir()).join("status");
        let read_cache_bytes = env_or(
            "SCRIBE_TIER_READ_CACHE_BYTES",
            READ_CACHE_BLOCKS * tier.options().block_bytes,
        );
        let read_cache_far_bytes = env_or(
            "SCRIBE_TIER_READ_CACHE_FAR_BYTES",
            READ_CACHE_FAR_BLOCKS * tier.options().block_bytes,
        )
        .max(read_cache_bytes);
        let t = Arc::new(TierService {
            tier,
            service: Arc::downgrade(service),
            ack,
            ack_timeout,
            wake: (Mutex::default(), Condvar::new()),
            status_path,
            cache_bytes,
            trims: Mutex::default(),
            root_shipped: Default::default(),
            descriptors: Mutex::default(),
            early: (Mutex::default(), Condvar::new()),
            reads: (Mutex::default(), Condvar::new()),
            ahead_wake: Condvar::new(),
            writes: (Mutex::default(), Condvar::new()),
            read_counts: Default::default(),
            last_read_ms: Default::default(),
            active_reads: Default::default(),
            reads_waiting: Default::default(),
            read_waits: Default::default(),
            ahead_yields: std::env::var("SCRIBE_TIER_AHEAD_YIELDS").map_or(true, |v| v != "0"),
            started: Instant::now(),
            write_back_bytes: env_or("SCRIBE_TIER_WRITE_BACK_BYTES", WRITE_BACK_BYTES),
            early_gather: Duration::from_millis(env_or(
                "SCRIBE_TIER_EARLY_GATHER_MS",
                EARLY_GATHER.as_millis() as u64,
            )),
            reads_quiet: Duration::from_millis(env_or(
                "SCRIBE_TIER_READS_QUIET_MS",
                READS_QUIET.as_millis() as u64,
            )),
            read_cache_bytes,
            read_cache_far_bytes,
            read_cache_idle: Duration::from_millis(env_or(
                "SCRIBE_TIER_READ_CACHE_IDLE_MS",
                READ_CACHE_IDLE.as_millis() as u64,
            )),
            read_ahead_objects: env_or("SCRIBE_TIER_READ_AHEAD_OBJECTS", READ_AHEAD_OBJECTS),
            write_back_during_reads: match std::env::var("SCRIBE_TIER_WRITE_BACK_DURING_READS") {
                Ok(v) => v == "1",
                Err(_) => std::thread::available_parallelism()
                    .is_ok_and(|n| n.get() >= WRITE_BACK_DURING_READS_CORES),
            },
        });
        for i in 0..READ_AHEAD {
            let w = t.clone();
            std::thread::Builder::new()
                .name(format!("scribe-tier-ahead-{i}"))
                .spawn(move || w.run_read_ahead())
                .expect("spawn a read-ahead thread");
        }
        let w = t.clone();
        std::thread::Builder::new()
            .name("scribe-tier-write-back".into())
            .spawn(move || w.run_write_back())
            .expect("spawn the write-back thread");
        for i in 0..EARLY_THREADS {
            let w = t.clone();
            std::thread::Builder::new()
                .name(format!("scribe-tier-early-{i}"))
                .spawn(move || w.run_early())
                .expect("spawn an early uploader");
        }
        let worker = t.clone();
        std::thread::Builder::new()
            .name("scribe-tier".into())
            .spawn(move || worker.run())
            .expect("spawn the tier uploader");
        service.set_accepted_hook(t.clone());
        service.stores().set_fallback(t.clone());
        // Repositories opened before now get the fallback at their next open.
        service.forget_open_repositories();
        t
    }

    /// Stop the uploader after its current pass.
    pub fn stop(&self) {
        let (m, cv) = &self.wake;
        m.lock().unwrap_or_else(|e| e.into_inner()).stop = true;
        cv.notify_all();
        let (m, cv) = &self.early;
        m.lock().unwrap_or_else(|e| e.into_inner()).stop = true;
        cv.notify_all();
        let (m, cv) = &self.reads;
        m.lock().unwrap_or_else(|e| e.into_inner()).stop = true;
        cv.notify_all();
        self.ahead_wake.notify_all();
        let (m, cv) = &self.writes;
        m.lock().unwrap_or_else(|e| e.into_inner()).stop = true;
        cv.notify_all();
    }

    /// `id`'s verified bytes: from memory (read ahead, or being fetched
    /// by another request: waited for), else fetched now.
    fn cached_or_fetch(&self, repo: RepositoryId, id: &ObjectId) -> Result<bytes::Bytes, String> {
        let key = (repo, *id);
        if let Some(b) = self.in_memory(&key) {
            return Ok(b);
        }
        let (m, cv) = &self.reads;
        // The block holding `id`: one GET brings every object bundled in it.
        let block = match self.tier.locate(&repo.0, id) {
            Ok(Some(loc)) => loc.key.to_key(),
            Ok(None) => return Err(format!("{id} is not in the tier")),
            Err(e) => return Err(format!("reading {id} from the tier: {e}")),
        };
        {
            let mut r = m.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if let Some(b) = r.cache.get(&key) {
                    self.read_counts[1].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    return Ok(b.clone());
                }
                if !r.inflight.contains(&block) {
                    r.inflight.insert(block.clone());
                    break;
                }
                r = cv.wait(r).unwrap_or_else(|e| e.into_inner());
            }
        }
        self.read_counts[0].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let got = self
            .tier
            .read_block_of(&repo.0, id)
            .map_err(|e| format!("reading {id} from the tier: {e}"));
        let mut r = m.lock().unwrap_or_else(|e| e.into_inner());
        r.inflight.remove(&block);
        cv.notify_all();
        let objects = match got {
            Ok(Some((_, objects))) => objects,
            Ok(None) => return Err(format!("{id} is not in the tier")),
            Err(e) => return Err(e),
        };
        let mut mine = None;
        for (oid, bytes) in objects {
            if oid == *id {
                mine = Some(bytes.clone());
            }
            r.insert((repo, oid), bytes);
        }
        r.evict(self.read_cache_bytes, self.read_cache_far_bytes);
        mine.ok_or_else(|| format!("{id} is not in its block {block}"))
    }

    /// `key`'s verified bytes if memory has them (waiting for their
    /// write-back, or in the read cache), counted as read from memory.
    fn in_memory(&self, key: &ObjKey) -> Option<bytes::Bytes> {
        let held = {
            let w = self.writes.0.lock().unwrap_or_else(|e| e.into_inner());
            w.held.get(key).cloned()
        };
        let b = held.or_else(|| {
            let r = self.reads.0.lock().unwrap_or_else(|e| e.into_inner());
            r.cache.get(key).cloned()
        })?;
        self.read_counts[1].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(b)
    }

    /// `id`'s bytes for a read: from memory, else fetched while
    /// read-ahead holds back its next GETs, so the block this read waits
    /// for shares the bucket's bandwidth with fewer others.
    fn fetch_for_read(&self, repo: RepositoryId, id: &ObjectId) -> Result<bytes::Bytes, String> {
        use std::sync::atomic::Ordering;
        if let Some(b) = self.in_memory(&(repo, *id)) {
            return Ok(b);
        }
        let started = Instant::now();
        self.reads_waiting.fetch_add(1, Ordering::SeqCst);
        let got = self.cached_or_fetch(repo, id);
        self.reads_waiting.fetch_sub(1, Ordering::SeqCst);
        // Under the lock: a read-ahead thread that saw this read waiting
        // is asleep by then and wakes.
        drop(self.reads.0.lock().unwrap_or_else(|e| e.into_inner()));
        self.ahead_wake.notify_one();
        self.read_waits[0].fetch_add(1, Ordering::Relaxed);
        self.read_waits[1].fetch_add(started.elapsed().as_millis() as u64, Ordering::Relaxed);
        got
    }

    /// Queue the objects after `id` in its revision that neither `store`
    /// nor memory holds, for the read-ahead threads.
    fn read_ahead(&self, repo: RepositoryId, id: &ObjectId, store: &scribe_objects::ObjectStore) {
        let Ok(next) = self.tier.following(&repo.0, id, self.read_ahead_objects) else {
            return;
        };
        // Only the newest reads' followers matter.
        self.enqueue(
            repo,
            next,
            store,
            |r| &mut r.ahead,
            2 * self.read_ahead_objects,
        );
    }

    /// Queue those of `ids` that neither `store` nor memory holds and no
    /// read has had since reads went quiet at the back of the read-ahead
    /// queue `queue` picks (once each), keep its newest `bound`, and wake a
    /// read-ahead thread.
    fn enqueue(
        &self,
        repo: RepositoryId,
        ids: impl IntoIterator<Item = ObjectId>,
        store: &scribe_objects::ObjectStore,
        queue: fn(&mut Reads) -> &mut std::collections::VecDeque<ObjKey>,
        bound: usize,
    ) {
        let want: Vec<ObjectId> = ids
            .into_iter()
            .filter(|n| !store.contains(n).unwrap_or(true))
            .collect();
        let want: Vec<ObjectId> = {
            let w = self.writes.0.lock().unwrap_or_else(|e| e.into_inner());
            want.into_iter()
                .filter(|n| !w.delivered(&(repo, *n)))
                .collect()
        };
        let mut r = self.reads.0.lock().unwrap_or_else(|e| e.into_inner());
        for n in want {
            let k = (repo, n);
            if !r.cache.contains_key(&k) && !queue(&mut r).contains(&k) {
                queue(&mut r).push_back(k);
            }
        }
        let q = queue(&mut r);
        while q.len() > bound {
            q.pop_front();
        }
        self.ahead_wake.notify_one();
    }

    /// Ids a reader will ask for next, in its order: the rest of an
    /// `ObjectGetMany` beyond the first id, and the chunks of the
    /// manifests it was answered with (a fresh workspace writes the files
    /// of a batch in the order it asked for their manifests, most of them
    /// by `ObjectGet`). The read-ahead threads fetch their blocks before
    /// the objects that follow a read in upload order, which the `scribe`
    /// client's order (by path) only roughly keeps. A 2 GiB cold
    /// workspace of 3 MiB files waited for the bucket 25-48 times
    /// (0.66-1.62 s in all) with upload order alone, 7-20 times
    /// (0.27-0.71 s) with hints (docs/performance.md, twentieth session).
    fn hint(&self, repo: RepositoryId, ids: &[ObjectId], store: &scribe_objects::ObjectStore) {
        if self.read_ahead_objects == 0 {
            // Read-ahead is off: nothing is fetched before it is asked for.
            return;
        }
        let ids = &ids[..ids.len().min(HINTED_OBJECTS)];
        self.enqueue(
            repo,
            ids.iter().copied(),
            store,
            |r| &mut r.hinted,
            HINTED_OBJECTS,
        );
    }

    /// A read-ahead thread. It sleeps until woken ([`Self::ahead_wake`]);
    /// one of them (the watcher) looks every half [`AHEAD_PAUSE`] whether
    /// reads paused while items wait for the far room.
    fn run_read_ahead(self: Arc<Self>) {
        let m = &self.reads.0;
        let cv = &self.ahead_wake;
        let block = self.tier.options().block_bytes;
        loop {
            let (repo, id) = {
                let mut r = m.lock().unwrap_or_else(|e| e.into_inner());
                let mut watching = false;
                let (key, limit) = loop {
                    if r.stop {
                        if watching {
                            r.ahead_watcher = false;
                        }
                        return;
                    }
                    let paused = self.reads_paused();
                    let limit = if paused {
                        self.read_cache_far_bytes
                    } else {
                        self.read_cache_bytes
                    };
                    let yielding = self.ahead_yields
                        && self.reads_waiting.load(std::sync::atomic::Ordering::SeqCst) > 0;
                    // What a reader asked for comes first, up to the far
                    // room: it will be read.
                    if !yielding && r.room_ahead(block, self.read_cache_far_bytes) {
                        if let Some(k) = r.hinted.pop_front() {
                            if !r.cache.contains_key(&k) {
                                r.ahead_fetching += 1;
                                break (k, self.read_cache_far_bytes);
                            }
                            continue;
                        }
                    }
                    if !yielding && r.room_ahead(block, limit) {
                        if let Some(k) = r.ahead.pop_front() {
                            if !r.cache.contains_key(&k) {
                                r.ahead_fetching += 1;
                                break (k, limit);
                            }
                            continue;
                        }
                    }
                    let more_once_paused = !paused
                        && !r.ahead.is_empty()
                        && r.room_ahead(block, self.read_cache_far_bytes);
                    if more_once_paused && (watching || !r.ahead_watcher) {
                        // More room once reads pause: look again soon.
                        r.ahead_watcher = true;
                        watching = true;
                        r = cv
                            .wait_timeout(r, AHEAD_PAUSE / 2)
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                        continue;
                    }
                    if watching {
                        r.ahead_watcher = false;
                        watching = false;
                    }
                    r = cv.wait(r).unwrap_or_else(|e| e.into_inner());
                };
                if watching {
                    r.ahead_watcher = false;
                }
                // The next item, if it fits too, goes to another thread.
                if (!r.hinted.is_empty() && r.room_ahead(block, self.read_cache_far_bytes))
                    || (!r.ahead.is_empty() && r.room_ahead(block, limit))
                {
                    cv.notify_one();
                }
                key
            };
            // Answered since it was queued (by a read of another connection).
            if !self.delivered((repo, id)) {
                // A failure here is the answer of nobody: the read asks again.
                let _ = self.cached_or_fetch(repo, &id);
            }
            // This thread looks for the next item itself.
            m.lock().unwrap_or_else(|e| e.into_inner()).ahead_fetching -= 1;
        }
    }

    /// Whether a read has been answered with `key` since reads last went
    /// quiet: its object waits for the write-back (held, or deferred).
    /// Read-ahead skips it: the readers of a fresh workspace, eight
    /// connections taking the objects in turn, each ask for the 48
    /// objects after theirs, which other connections may have had
    /// already; fetching those again cost a 2 GiB cold read up to 73
    /// extra block GETs (docs/performance.md, 2026-12-05).
    fn delivered(&self, key: ObjKey) -> bool {
        let w = self.writes.0.lock().unwrap_or_else(|e| e.into_inner());
        w.delivered(&key)
    }

    /// After [`READ_CACHE_IDLE`] without reads: the queued read-ahead is
    /// dropped and the cache shrinks to its near room.
    fn settle_read_cache(&self) {
        if self
            .reads_idle_for()
            .is_none_or(|d| d < self.read_cache_idle)
        {
            return;
        }
        let mut r = self.reads.0.lock().unwrap_or_else(|e| e.into_inner());
        r.ahead.clear();
        r.hinted.clear();
        r.evict(self.read_cache_bytes, self.read_cache_bytes);
    }

    /// Whether no read is under way and none ended within [`AHEAD_PAUSE`]:
    /// the reader is busy elsewhere (the `scribe` client flushing a batch
    /// of files), and the machine's cores with it.
    fn reads_paused(&self) -> bool {
        self.reads_idle_for().is_some_and(|d| d >= AHEAD_PAUSE)
    }

    /// How long since the last read through the tier ended; `None` while
    /// one is under way.
    fn reads_idle_for(&self) -> Option<Duration> {
        if self.active_reads.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            return None;
        }
        let last = self.last_read_ms.load(std::sync::atomic::Ordering::Relaxed);
        let now = self.started.elapsed().as_millis() as u64;
        Some(Duration::from_millis(now.saturating_sub(last)))
    }

    /// A read went through the tier now.
    fn mark_read(&self) {
        let ms = self.started.elapsed().as_millis() as u64;
        self.last_read_ms
            .store(ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// How long until reads count as quiet (zero: quiet now).
    fn reads_quiet_in(&self) -> Duration {
        self.reads_idle_for()
            .map_or(self.reads_quiet, |d| self.reads_quiet.saturating_sub(d))
    }

    /// Put `bytes` (verified) back into `store` in the background, once
    /// reads are quiet. When the queue holds its most bytes already, only
    /// the id is kept: the object is fetched and checked again then. The
    /// reader itself never writes.
    fn write_back(&self, repo: RepositoryId, id: ObjectId, bytes: bytes::Bytes) {
        let (m, cv) = &self.writes;
        let mut w = m.lock().unwrap_or_else(|e| e.into_inner());
        let key = (repo, id);
        if w.held.contains_key(&key) || w.deferred_set.contains(&key) {
            return;
        }
        if w.bytes + bytes.len() as u64 > self.write_back_bytes {
            if w.deferred.len() < DEFERRED_IDS {
                w.deferred.push_back(key);
                w.deferred_set.insert(key);
                self.read_counts[3].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            cv.notify_all();
            return;
        }
        w.bytes += bytes.len() as u64;
        w.queue.push_back(key);
        w.held.insert(key, bytes);
        cv.notify_all();
    }

    /// The write-back thread: once reads are quiet, what waits (per store
    /// one batch and one durable commit), then the deferred objects
    /// (fetched and checked again). A failed write-back only costs a later
    /// read. It runs at the lowest CPU priority: it uses what the reads
    /// and transfers leave.
    fn run_write_back(self: Arc<Self>) {
        // SAFETY: setpriority on this thread only (a Linux thread id);
        // failure leaves the default priority.
        #[cfg(target_os = "linux")]
        unsafe {
            let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
            libc::setpriority(libc::PRIO_PROCESS, tid, 19);
        }
        let (m, cv) = &self.writes;
        let mut waiting_since: Option<Instant> = None;
        loop {
            let items: Vec<_> = {
                let mut w = m.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    if !w.queue.is_empty() || !w.deferred.is_empty() {
                        if w.stop {
                            // Stopping: what is queued is written now;
                            // deferred ones are left to later reads.
                            if w.queue.is_empty() {
                                return;
                            }
                            break;
                        }
                        let since = *waiting_since.get_or_insert_with(Instant::now);
                        // Held objects go at once where cores are to spare
                        // (no second GET for them); deferred ones always
                        // wait (their GETs would compete with the reads).
                        let wait = if self.write_back_during_reads && !w.queue.is_empty() {
                            Duration::ZERO
                        } else {
                            self.reads_quiet_in()
                        };
                        if wait.is_zero() || since.elapsed() >= WRITE_BACK_MAX_WAIT {
                            break;
                        }
                        w = cv
                            .wait_timeout(w, wait)
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                        continue;
                    }
                    if w.stop {
                        return;
                    }
                    waiting_since = None;
                    w = cv.wait(w).unwrap_or_else(|e| e.into_inner());
                }
                if w.queue.is_empty() {
                    // Deferred ones: fetched again (a block's worth comes
                    // from memory after its first), queued, written next.
                    let keys: Vec<ObjKey> = {
                        let n = w.deferred.len().min(16);
                        w.deferred.drain(..n).collect()
                    };
                    for k in &keys {
                        w.deferred_set.remove(k);
                    }
                    drop(w);
                    self.refetch(&keys);
                    continue;
                }
                let n = w.queue.len().min(64);
                let keys: Vec<ObjKey> = w.queue.drain(..n).collect();
                let mut items = Vec::with_capacity(keys.len());
                for k in keys {
                    if let Some(b) = w.held.get(&k) {
                        items.push((k.0, k.1, b.clone()));
                    }
                }
                items
            };
            let done: Vec<(ObjKey, u64)> = items
                .iter()
                .map(|(r, id, b)| ((*r, *id), b.len() as u64))
                .collect();
            let mut by_repo: Vec<(RepositoryId, WriteBatch)> = Vec::new();
            for (repo, id, bytes) in items {
                match by_repo.iter_mut().find(|(r, _)| *r == repo) {
                    Some((_, v)) => v.push((id, bytes)),
                    None => by_repo.push((repo, vec![(id, bytes)])),
                }
            }
            let Some(service) = self.service.upgrade() else {
                return;
            };
            for (repo, objs) in by_repo {
                let Some(store) = service.stores().get(&repo) else {
                    continue;
                };
                let batch = store.batch();
                let mut ok = true;
                for (id, bytes) in &objs {
                    if !store.contains(id).unwrap_or(false) {
                        ok &= batch.put_healing(*id, bytes).is_ok();
                    }
                }
                if ok {
                    match batch.commit() {
                        Ok(_) => {
                            self.read_counts[2]
                                .fetch_add(objs.len() as u64, std::sync::atomic::Ordering::Relaxed);
                        }
                        Err(e) => {
                            eprintln!("scribe-server: tier: writing back into the local store: {e}")
                        }
                    }
                }
            }
            drop(service);
            // Written (or given up): reads find them in the store, or fetch
            // them again.
            let mut w = m.lock().unwrap_or_else(|e| e.into_inner());
            for (k, len) in done {
                if w.held.remove(&k).is_some() {
                    w.bytes -= len;
                }
            }
        }
    }

    /// Fetch the deferred `keys` again (checked against their ids) and
    /// queue their write-back; those the local store holds by now are
    /// skipped. A failure leaves the object to the next read.
    fn refetch(&self, keys: &[ObjKey]) {
        let Some(service) = self.service.upgrade() else {
            return;
        };
        for &(repo, id) in keys {
            let Some(store) = service.stores().get(&repo) else {
                continue;
            };
            if store.contains(&id).unwrap_or(true) {
                continue;
            }
            drop(store);
            if let Ok(bytes) = self.cached_or_fetch(repo, &id) {
                let (m, _) = &self.writes;
                let mut w = m.lock().unwrap_or_else(|e| e.into_inner());
                let key = (repo, id);
                if !w.held.contains_key(&key) {
                    w.bytes += bytes.len() as u64;
                    w.queue.push_back(key);
                    w.held.insert(key, bytes);
                }
            }
        }
    }

    /// An early uploader: uploads each batch of chunks stored for an
    /// operation into the operation's staged revision. A failure is
    /// logged; publication uploads what is not staged.
    fn run_early(self: Arc<Self>) {
        let (m, cv) = &self.early;
        loop {
            let job = {
                let mut e = m.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    if e.stop {
                        return;
                    }
                    let free = e
                        .jobs
                        .iter()
                        .position(|j| !e.gathering.contains(&(j.repo, j.operation)));
                    if let Some(j) = free.and_then(|i| e.jobs.remove(i)) {
                        e.running.insert(j.seq, (j.repo, j.operation));
                        // Claimed under this lock: no other uploader
                        // starts a block of the same operation meanwhile.
                        if self.gathers(&j) {
                            e.gathering.insert((j.repo, j.operation));
                        }
                        break j;
                    }
                    e = cv.wait(e).unwrap_or_else(|e| e.into_inner());
                }
            };
            let (job, seqs) = self.gather(job);
            // An operation whose outcome is recorded is not staged: its
            // publication may already have looked for a staged revision
            // (or have given up waiting for this job), and nothing would
            // adopt one made now. Publication uploads what is not staged.
            let service = self.service.upgrade();
            let finished = service.as_ref().is_some_and(|s| {
                s.root()
                    .open_repository(job.repo)
                    .and_then(|r| r.recorded_outcome(&job.operation))
                    .is_ok_and(|o| o.is_some())
            });
            // The store is looked up now, not held while queued (a cache
            // trim waits for every holder).
            let store = match (&service, finished) {
                (Some(s), false) => s.stores().get(&job.repo),
                _ => None,
            };
            drop(service);
            let r = match &store {
                Some(store) => {
                    let read = |oid: &ObjectId| store.get(oid).map_err(|e| e.to_string());
                    self.tier
                        .prestage(&job.repo.0, &job.operation.0, &job.ids, &read)
                }
                None => Ok(Default::default()),
            };
            drop(store);
            if let Err(e) = r {
                eprintln!(
                    "scribe-server: tier: uploading {} chunks of operation {} early: {e}",
                    job.ids.len(),
                    job.operation.to_hex()
                );
            }
            let mut e = m.lock().unwrap_or_else(|e| e.into_inner());
            for seq in seqs {
                e.running.remove(&seq);
            }
            cv.notify_all();
        }
    }

    /// Whether an uploader taking `job` gathers more jobs of its
    /// operation into its block (the operation is claimed when taken).
    fn gathers(&self, job: &EarlyJob) -> bool {
        job.bytes < self.tier.options().block_bytes && !self.early_gather.is_zero()
    }

    /// `first` and the jobs of its operation queued (or arriving, each
    /// within [`EARLY_GATHER`] of the last) that fit with it into one
    /// block, as one job; the sequence numbers it holds. Stops early when
    /// a job of the operation does not fit, when a job of another
    /// operation waits for an uploader, when a publication waits for the
    /// early uploads, or at the stop.
    fn gather(&self, first: EarlyJob) -> (EarlyJob, Vec<u64>) {
        let target = self.tier.options().block_bytes;
        let mut seqs = vec![first.seq];
        let mut job = first;
        if !self.gathers(&job) {
            return (job, seqs);
        }
        let key = (job.repo, job.operation);
        let end = Instant::now() + self.early_gather * EARLY_GATHER_MAX_WAITS;
        let mut deadline = Instant::now() + self.early_gather;
        let (m, cv) = &self.early;
        let mut e = m.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let mut full = false;
            let mut i = 0;
            while i < e.jobs.len() {
                let j = &e.jobs[i];
                if (j.repo, j.operation) != key {
                    i += 1;
                } else if job.bytes + j.bytes > target {
                    full = true;
                    i += 1;
                } else if let Some(j) = e.jobs.remove(i) {
                    e.running.insert(j.seq, key);
                    seqs.push(j.seq);
                    job.ids.extend(j.ids);
                    job.bytes += j.bytes;
                    deadline = (Instant::now() + self.early_gather).min(end);
                }
            }
            // Another operation's batch waiting (every uploader busy):
            // this block goes as it is, the uploader to that work.
            let others = e
                .jobs
                .iter()
                .any(|j| !e.gathering.contains(&(j.repo, j.operation)));
            let now = Instant::now();
            if full || others || job.bytes >= target || e.stop || e.waiting > 0 || now >= deadline {
                break;
            }
            e = cv
                .wait_timeout(e, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        e.gathering.remove(&key);
        // Jobs of the operation left queued are free for any uploader.
        cv.notify_all();
        (job, seqs)
    }

    /// Wait (at most `limit`) until every early upload queued before now
    /// is done, so publication finds what they staged.
    fn wait_early(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        let (m, cv) = &self.early;
        let mut e = m.lock().unwrap_or_else(|e| e.into_inner());
        let before = e.next_seq;
        // Nobody gathers more while a publication waits.
        e.waiting += 1;
        cv.notify_all();
        loop {
            let pending = e.jobs.front().is_some_and(|j| j.seq < before)
                || e.running
                    .first_key_value()
                    .is_some_and(|(s, _)| *s < before);
            let now = Instant::now();
            if !pending || e.stop || now >= deadline {
                break;
            }
            e = cv
                .wait_timeout(e, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        e.waiting -= 1;
    }

    /// Give up staging entries older than the limit (never submitted).
    fn sweep_staged(&self) {
        let ttl = env_or("SCRIBE_TIER_STAGE_TTL_SECS", STAGE_TTL_SECS);
        if let Err(e) = self.tier.abandon_staged(ttl) {
            eprintln!("scribe-server: tier: giving up abandoned early uploads: {e}");
        }
    }

    pub fn tier(&self) -> &Tier {
        &self.tier
    }

    fn request_pass(&self) {
        let (m, cv) = &self.wake;
        m.lock().unwrap_or_else(|e| e.into_inner()).requested += 1;
        cv.notify_all();
    }

    fn run(self: Arc<Self>) {
        let mut done_for = 0u64;
        loop {
            {
                let (m, cv) = &self.wake;
                let mut w = m.lock().unwrap_or_else(|e| e.into_inner());
                // Sleep until asked (or a second passes: a failed pass is
                // retried, and changes accepted offline are found).
                if !w.stop && w.requested == done_for {
                    w = cv
                        .wait_timeout(w, Duration::from_secs(1))
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                if w.stop {
                    return;
                }
                done_for = w.requested;
            }
            let Some(service) = self.service.upgrade() else {
                return;
            };
            self.settle_read_cache();
            let mut status = String::new();
            let mut result = self.pass(&service, &mut status);
            self.sweep_staged();
            if let Some(limit) = self.cache_bytes {
                if let Err(e) = self.trim_all(&service, limit, &mut status) {
                    result = result.and(Err(e));
                }
            }
            self.ship_journals(&service, &mut status);
            drop(service);
            let tmp = self.status_path.with_extension("tmp");
            if std::fs::write(&tmp, status).is_ok() {
                let _ = std::fs::rename(&tmp, &self.status_path);
            }
            let (m, cv) = &self.wake;
            let mut w = m.lock().unwrap_or_else(|e| e.into_inner());
            w.passes += 1;
            w.last_error = result.err();
            if let Some(e) = &w.last_error {
                eprintln!("scribe-server: tier: {e}");
            }
            cv.notify_all();
        }
    }

    /// Publish everything accepted above each root's cursor, in order.
    fn pass(&self, service: &Service, status: &mut String) -> Result<(), String> {
        let root = service.root();
        let repos = root.list_repositories().map_err(|e| e.to_string())?;
        let mut first_err = None;
        for info in repos {
            let r = self.publish_repository(service, info.id);
            let (through, head) = match &r {
                Ok(v) => *v,
                Err((v, e)) => {
                    if first_err.is_none() {
                        first_err = Some(format!("{}: {e}", info.name));
                    }
                    *v
                }
            };
            status.push_str(&format!(
                "{} {} uploaded-through {through} head {head} backlog {}\n",
                info.name,
                info.id.to_hex(),
                head.saturating_sub(through)
            ));
        }
        // Which keys this root writes (`restore --from-tier --shard`).
        status.push_str(&format!(
            "shards journal {:08x} block {:08x}\n",
            self.tier.journal_shard(),
            self.tier.shard()
        ));
        let c = |i: usize| self.read_counts[i].load(std::sync::atomic::Ordering::Relaxed);
        let pending = {
            let w = self.writes.0.lock().unwrap_or_else(|e| e.into_inner());
            w.held.len() + w.deferred.len()
        };
        status.push_str(&format!(
            "reads bucket-gets {} from-memory {} written-back {} write-back-pending {pending} write-back-deferred {} waited {} waited-ms {} cached-bytes {}\n",
            c(0),
            c(1),
            c(2),
            c(3),
            self.read_waits[0].load(std::sync::atomic::Ordering::Relaxed),
            self.read_waits[1].load(std::sync::atomic::Ordering::Relaxed),
            self.reads.0.lock().unwrap_or_else(|e| e.into_inner()).bytes,
        ));
        self.give_up_finished_staging(service);
        // Chunks uploaded for operations not submitted yet.
        if let Ok(entries) = self.tier.staging() {
            for (root, op, rev, blocks, _) in entries {
                status.push_str(&format!(
                    "early {} operation {} revision {} blocks {blocks}\n",
                    hex::encode(root),
                    hex::encode(op),
                    hex::encode(rev)
                ));
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Give up the staging entries of operations that are finished: a
    /// recorded refusal, or an accepted change already published (which
    /// adopted what it found). Such an entry was made by an early upload
    /// that outlived its publication's wait (`wait_early` has a limit);
    /// nothing will adopt it, and it would otherwise wait for the age
    /// limit (a day) with its blocks in the bucket. Entries with an early
    /// upload queued or running are left to the next pass.
    fn give_up_finished_staging(&self, service: &Service) {
        let Ok(entries) = self.tier.staging() else {
            return;
        };
        for (root, op, _, _, _) in entries {
            let (repo, op) = (RepositoryId(root), scribe_format::OperationId(op));
            let Ok(r) = service.root().open_repository(repo) else {
                continue;
            };
            let finished = match r.recorded_outcome(&op) {
                Ok(Some(scribe_metadata::accept::Outcome::Accepted { change, .. })) => {
                    self.tier.uploaded_through(&root).is_ok_and(|t| t >= change)
                }
                Ok(Some(scribe_metadata::accept::Outcome::Rejected { .. })) => true,
                _ => false,
            };
            if !finished {
                continue;
            }
            // The outcome was recorded before this look: a job popped
            // after it sees the outcome and stages nothing.
            {
                let e = self.early.0.lock().unwrap_or_else(|e| e.into_inner());
                let busy = e.jobs.iter().any(|j| j.repo == repo && j.operation == op)
                    || e.running.values().any(|&(r, o)| r == repo && o == op);
                if busy {
                    continue;
                }
            }
            if let Err(e) = self.tier.give_up_staging(&root, &op.0) {
                eprintln!(
                    "scribe-server: tier: giving up the early upload of finished operation {}: {e}",
                    op.to_hex()
                );
            }
        }
    }

    #[allow(clippy::type_complexity)]
    fn publish_repository(
        &self,
        service: &Service,
        id: RepositoryId,
    ) -> Result<(u64, u64), ((u64, u64), String)> {
        let fail = |v: (u64, u64), e: String| Err((v, e));
        let repo = match service.root().open_repository(id) {
            Ok(r) => r,
            Err(e) => return fail((0, 0), e.to_string()),
        };
        let head = repo.head().unwrap_or(0);
        let mut through = match self.tier.uploaded_through(&id.0) {
            Ok(t) => t,
            Err(e) => return fail((0, head), e.to_string()),
        };
        if through >= head {
            return Ok((through, head));
        }
        let store = match service.stores().get(&id) {
            Some(s) => s,
            None => match crate::service::stores::open_or_create(&repo.dir().join("objects")) {
                Ok(s) => Arc::new(s),
                Err(e) => return fail((through, head), e.to_string()),
            },
        };
        // Chunks of these changes may still be on their way into the
        // bucket through the early uploaders: let them land first.
        self.wait_early(self.ack_timeout);
        while through < head {
            let change = through + 1;
            let (commit, files) = match change_objects(&repo, &store, change) {
                Ok(o) => o,
                Err(e) => return fail((through, head), e),
            };
            let read = |oid: &ObjectId| store.get(oid).map_err(|e| e.to_string());
            if let Err(e) = self
                .tier
                .publish_commit(&id.0, change, &commit, &files, &read)
            {
                return fail((through, head), format!("change {change}: {e}"));
            }
            through = change;
            // Wake durable submits waiting for this change.
            self.wake.1.notify_all();
        }
        Ok((through, head))
    }
}

impl Fallback for TierService {
    fn has(&self, repo: RepositoryId, id: &ObjectId) -> bool {
        self.tier.holds(&repo.0, id).unwrap_or(false)
    }

    fn hint(&self, repo: RepositoryId, ids: &[ObjectId], store: &Arc<scribe_objects::ObjectStore>) {
        TierService::hint(self, repo, ids, store)
    }

    fn len(&self, repo: RepositoryId, id: &ObjectId) -> Option<u64> {
        // The manifest row's length (the bytes are checked when read).
        self.tier.locate(&repo.0, id).ok().flatten().map(|l| l.len)
    }

    fn fetch(&self, repo: RepositoryId, id: &ObjectId) -> Result<Option<Vec<u8>>, String> {
        if !self.has(repo, id) {
            return Ok(None);
        }
        self.cached_or_fetch(repo, id).map(|b| Some(b.to_vec()))
    }

    fn read(
        &self,
        repo: RepositoryId,
        id: &ObjectId,
        store: &Arc<scribe_objects::ObjectStore>,
    ) -> Result<Option<bytes::Bytes>, String> {
        if !self.has(repo, id) {
            return Ok(None);
        }
        /// Counts a read as under way until it is answered.
        struct Active<'a>(&'a TierService);
        impl Drop for Active<'_> {
            fn drop(&mut self) {
                self.0.mark_read();
                self.0
                    .active_reads
                    .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
        self.active_reads
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let _active = Active(self);
        self.mark_read();
        let bytes = self.fetch_for_read(repo, id)?;
        self.reads
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .served((repo, *id));
        // Room for read-ahead, perhaps.
        self.ahead_wake.notify_one();
        self.read_ahead(repo, id, store);
        self.write_back(repo, *id, bytes.clone());
        Ok(Some(bytes))
    }
}

/// Before a data root served with `--tier` is opened: complete the store
/// swap of a cache trim killed midway (recorded by its durable marker;
/// `scribe_objects::compact` finishes it without a live set, as
/// `compact-objects` would).
/// Returns whether one was found. Call it only where the data root cannot
/// be served (its open refused the pending marker, after taking the lock).
pub fn finish_pending_trims(data: &Path) -> bool {
    let mut found = false;
    for (objects, id) in repository_stores(data) {
        found |= finish_pending_swap(&objects, id);
    }
    found
}

/// Whether a cache trim's store swap waits to be finished
/// ([`finish_pending_trims`]); reads only.
pub fn trims_pending(data: &Path) -> bool {
    repository_stores(data)
        .iter()
        .any(|(objects, _)| objects.with_file_name("objects.compaction-ready").exists())
}

/// Each repository directory's object store under `data`.
fn repository_stores(data: &Path) -> Vec<(PathBuf, RepositoryId)> {
    let Ok(rd) = std::fs::read_dir(data.join("repos")) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let id = name.to_str().and_then(|n| RepositoryId::from_hex(n).ok())?;
            Some((e.path().join("objects"), id))
        })
        .collect()
}

fn finish_pending_swap(objects: &Path, repo: RepositoryId) -> bool {
    let marker = objects.with_file_name("objects.compaction-ready");
    let found = marker.exists();
    if found {
        let ctx = scribe_objects::CompactContext {
            repository: repo.0,
            journal_end: 0,
        };
        if let Err(e) = scribe_objects::compact(
            objects,
            Vec::new(),
            ctx,
            &scribe_objects::CompactOptions::default(),
        ) {
            eprintln!(
                "scribe-server: tier: finishing the swap of {}: {e}",
                objects.display()
            );
        }
    }
    found
}

impl TierService {
    /// Ship what each metadata recovery archive (the catalog's and every
    /// repository's) published since the last pass to the bucket
    /// (`Tier::ship_archive`). A failure is logged and retried at the next
    /// pass; it does not hold acknowledgements back.
    fn ship_journals(&self, service: &Service, status: &mut String) {
        let root = service.root();
        // The descriptor and the block shard go first: a restore needs
        // them before any journal. A descriptor changed since it shipped
        // ships again as the next version (keys are never reused).
        let first = !self.root_shipped.load(std::sync::atomic::Ordering::Acquire);
        let shipped = self
            .ship_if_changed(DESCRIPTOR, &root.dir().join(DESCRIPTOR))
            .and_then(|()| {
                if first {
                    ship_logged(
                        &self.tier,
                        BLOCK_SHARD,
                        format!("{:08x}\n", self.tier.shard()).as_bytes(),
                    )
                } else {
                    Ok(())
                }
            });
        match shipped {
            Ok(()) => self
                .root_shipped
                .store(true, std::sync::atomic::Ordering::Release),
            Err(e) => {
                eprintln!("scribe-server: tier: shipping the data root's descriptor: {e}");
                if first {
                    return;
                }
            }
        }
        // The data root's notes outside the catalog's bytes, which no
        // journal frames (the names renamed repositories had, the retired
        // ones), go before the catalog's journal step that may hold the
        // rename they belong to: a restore never rebuilds a catalog newer
        // than them. A bucket failure holds the journals back to the next
        // pass (so `durable` waits for the notes too); a local file that
        // does not read is logged and the bucket keeps its last version.
        for (name, bytes) in root_notes(root.dir()) {
            let bytes = match bytes {
                Ok(b) => b,
                Err(e) => {
                    eprintln!(
                        "scribe-server: tier: {name} is not shipped: {e} (the bucket keeps the \
                         version it has)"
                    );
                    continue;
                }
            };
            if let Err(e) = self.ship_bytes_if_changed(name, &bytes, true) {
                eprintln!(
                    "scribe-server: tier: shipping the data root's {name}: {e} (the journals \
                     wait for it)"
                );
                return;
            }
        }
        for (name, db) in archives(root) {
            // A repository's descriptor goes before its first journal step.
            let desc = db.with_file_name(DESCRIPTOR);
            let descriptor = match RepositoryId::from_hex(&name) {
                Ok(_) => self.ship_if_changed(&format!("{name}/{DESCRIPTOR}"), &desc),
                Err(_) => Ok(()),
            };
            let shipped = descriptor
                .and_then(|()| {
                    scribe_metadata::archive::archive_dir(&db).map_err(|e| e.to_string())
                })
                .and_then(|dir| {
                    self.tier
                        .ship_archive(&name, &dir)
                        .map_err(|e| e.to_string())
                });
            if let Err(e) = shipped {
                eprintln!("scribe-server: tier: shipping the recovery journal {name}: {e}");
            }
            if let Ok((step, seg, off)) = self.tier.recovery_cursor(&name) {
                status.push_str(&format!(
                    "journal {name} step {step} segment {seg} offset {off}\n"
                ));
            }
        }
    }

    /// Ship the data root file at `path` as `name` unless the bytes
    /// shipped last (by this process) are the same.
    fn ship_if_changed(&self, name: &str, path: &Path) -> Result<(), String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        self.ship_bytes_if_changed(name, &bytes, false)
    }

    /// Ship `bytes` as the data root file `name` (`sealed`: with
    /// `Tier::ship_sealed_root_file`) unless they are what this process
    /// shipped last under that name.
    fn ship_bytes_if_changed(&self, name: &str, bytes: &[u8], sealed: bool) -> Result<(), String> {
        let mut shipped = self.descriptors.lock().unwrap_or_else(|e| e.into_inner());
        if shipped.get(name).map(Vec::as_slice) == Some(bytes) {
            return Ok(());
        }
        if sealed {
            self.tier
                .ship_sealed_root_file(name, bytes)
                .map_err(|e| e.to_string())?;
        } else {
            ship_logged(&self.tier, name, bytes)?;
        }
        shipped.insert(name.to_string(), bytes.to_vec());
        Ok(())
    }

    /// Whether the journals named in `want` are shipped at least to the
    /// (segment, offset) each names.
    fn journals_cover(&self, want: &[(String, (u64, u64))]) -> Result<bool, TierError> {
        for (name, at) in want {
            let (step, seg, off) = self.tier.recovery_cursor(name)?;
            if step == 0 || (seg, off) < *at {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Bytes of every file below `dir`.
pub fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    for e in rd.flatten() {
        match e.file_type() {
            Ok(t) if t.is_dir() => total += dir_bytes(&e.path()),
            Ok(_) => total += e.metadata().map(|m| m.len()).unwrap_or(0),
            Err(_) => {}
        }
    }
    total
}

impl TierService {
    /// `--cache-bytes`: trim every repository's local store above `limit`.
    fn trim_all(&self, service: &Service, limit: u64, status: &mut String) -> Result<(), String> {
        let repos = service
            .root()
            .list_repositories()
            .map_err(|e| e.to_string())?;
        for info in repos {
            let objects = service
                .root()
                .dir()
                .join("repos")
                .join(info.id.to_hex())
                .join("objects");
            let before = dir_bytes(&objects);
            let mut busy = false;
            if before > limit {
                let stores = service.stores().clone();
                // Opens (and registers) a store nobody has opened yet.
                if stores.get(&info.id).is_some() {
                    match stores.exclusive(info.id, Duration::from_secs(2), |dir| {
                        self.trim(&stores, info.id, dir, limit)
                    }) {
                        Some(Ok(not_durable)) => {
                            let mut t = self.trims.lock().unwrap_or_else(|e| e.into_inner());
                            let e = t.entry(info.id).or_default();
                            *e = (e.0 + 1, not_durable);
                        }
                        Some(Err(e)) => {
                            return Err(format!("{}: trimming the cache: {e}", info.name))
                        }
                        // Busy: the next pass tries again.
                        None => busy = true,
                    }
                }
            }
            let (trims, kept) = self
                .trims
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&info.id)
                .copied()
                .unwrap_or_default();
            status.push_str(&format!(
                "{} cache {} limit {limit} trims {trims} kept-not-in-bucket {kept}{}\n",
                info.name,
                dir_bytes(&objects),
                if busy { " busy" } else { "" }
            ));
        }
        Ok(())
    }

    /// Compact the closed store at `objects` keeping everything the bucket
    /// does not hold and, most recently used first, the chunks it holds
    /// while the store stays within `limit`. Returns the bytes kept
    /// because the bucket does not hold them (chunks not uploaded yet,
    /// manifests, change sets, commits).
    fn trim(
        &self,
        stores: &crate::service::stores::StoreRegistry,
        repo: RepositoryId,
        objects: &Path,
        limit: u64,
    ) -> Result<u64, String> {
        let store = scribe_objects::ObjectStore::open(objects).map_err(|e| e.to_string())?;
        let listed = store.list().map_err(|e| e.to_string())?;
        drop(store);
        let mut keep = Vec::new();
        let mut evictable = Vec::new();
        let mut must_bytes = 0u64;
        for (id, loc) in &listed {
            let held = id.kind == scribe_format::ObjectKind::Chunk
                && self.tier.holds(&repo.0, id).unwrap_or(false);
            if held {
                evictable.push((*id, loc.envelope_len()));
            } else {
                must_bytes += loc.envelope_len();
                keep.push(*id);
            }
        }
        let present: std::collections::HashSet<ObjectId> =
            listed.iter().map(|(id, _)| *id).collect();
        let used = stores.last_used(repo, &|id| present.contains(id));
        // Most recently used first; never used last.
        evictable.sort_by_key(|(id, _)| std::cmp::Reverse(used.get(id).copied().unwrap_or(0)));
        // What the store costs beyond its objects (locator, descriptor).
        let overhead = dir_bytes(objects)
            .saturating_sub(listed.iter().map(|(_, l)| l.envelope_len()).sum::<u64>());
        let mut budget = limit.saturating_sub(must_bytes + overhead);
        for (id, len) in evictable {
            if len <= budget {
                budget -= len;
                keep.push(id);
            }
        }
        let ctx = scribe_objects::CompactContext {
            repository: repo.0,
            journal_end: 0,
        };
        scribe_objects::compact(
            objects,
            keep,
            ctx,
            &scribe_objects::CompactOptions::default(),
        )
        .map_err(|e| e.to_string())?;
        Ok(must_bytes)
    }
}

/// `scribe-server tier evict`: compact each repository's store without the
/// chunks the tier holds in an `Available` revision. Manifests, change
/// sets and commits stay local (small, and read by every acceptance).
/// Chunks already absent because the tier holds them, or because every
/// file revision naming them was given up (`obliterate`), are not
/// problems.
pub fn evict(
    data: &Path,
    tier: &Tier,
    repo: Option<&str>,
) -> Result<crate::admin::Report, crate::admin::AdminError> {
    let given_up = given_up_chunks(data, tier, repo)?;
    let keep = |r: RepositoryId, id: &ObjectId| {
        id.kind != scribe_format::ObjectKind::Chunk || !tier.holds(&r.0, id).unwrap_or(false)
    };
    let absent_ok = |r: RepositoryId, id: &ObjectId| {
        tier.holds(&r.0, id).unwrap_or(false) || given_up.get(&r).is_some_and(|g| g.contains(id))
    };
    crate::admin::compact_objects_keeping_absent(
        data,
        repo,
        &scribe_objects::CompactOptions::default(),
        &keep,
        &absent_ok,
    )
}

type GivenUp = std::collections::HashMap<RepositoryId, std::collections::HashSet<ObjectId>>;

/// Per repository with given-up file revisions: the chunks only given-up
/// revisions name.
fn given_up_chunks(
    data: &Path,
    tier: &Tier,
    repo: Option<&str>,
) -> Result<GivenUp, crate::admin::AdminError> {
    let root = crate::admin::open_without_stores(data)?;
    let mut out = GivenUp::new();
    for info in crate::admin::select(&root, repo)? {
        let purged = tier
            .purged(&info.id.0)
            .map_err(|e| tier_admin_err(data, e))?;
        if purged.is_empty() {
            continue;
        }
        let r =
            root.open_repository(info.id)
                .map_err(|source| crate::admin::AdminError::Metadata {
                    repo: info.name.clone(),
                    source,
                })?;
        let plan = scan_versions(&r, &info.name, &purged.into_iter().collect(), &[])?;
        out.insert(info.id, plan.drop_local);
    }
    Ok(out)
}

/// Finish the publication of `repo` that has started and not finished
/// (a `tier_pending` row: its blocks may be in the bucket under a
/// revision the record does not hold yet), so that deleting the
/// repository collects them (`repo delete`; nokv-bridge
/// `root_delete.rs`). Returns the change published, if any. Changes
/// above it were never uploaded: they are dropped with the repository.
pub(crate) fn finish_started_publication(
    data: &Path,
    tier: &Tier,
    root: &scribe_metadata::DataRoot,
    repo: RepositoryId,
    name: &str,
) -> Result<Option<u64>, crate::admin::AdminError> {
    use crate::admin::AdminError;
    let Some(change) = tier
        .publication_started(&repo.0)
        .map_err(|e| tier_admin_err(data, e))?
    else {
        return Ok(None);
    };
    let r = root
        .open_repository(repo)
        .map_err(|source| AdminError::Metadata {
            repo: name.to_string(),
            source,
        })?;
    let store = crate::service::stores::open_or_create(&r.dir().join("objects")).map_err(|e| {
        AdminError::Store {
            repo: name.to_string(),
            source: Box::new(e),
        }
    })?;
    let (commit, files) =
        change_objects(&r, &store, change).map_err(|reason| AdminError::Descriptor {
            path: r.dir().join("objects"),
            reason,
        })?;
    let read = |oid: &ObjectId| store.get(oid).map_err(|e| e.to_string());
    tier.publish_commit(&repo.0, change, &commit, &files, &read)
        .map_err(|e| tier_admin_err(data, e))?;
    Ok(Some(change))
}

/// `scribe-server backup` of a data root with tier state (offline, the
/// bucket named): the chunks the bucket holds that a repository's local
/// store gave back (`tier evict`, `--cache-bytes`) are read back through
/// the tier's read path (each checked against its id) and written into
/// the backup's copy of the store, so the backup holds every object its
/// metadata names without the bucket. The fill of
/// `scribe_metadata::backup::backup_filled`.
pub fn backup_fill(
    tier: &Tier,
) -> impl Fn(RepositoryId, &Path, &Path) -> Result<u64, scribe_metadata::MetadataError> + '_ {
    use scribe_metadata::MetadataError;
    move |repo, src, dst| {
        let objects = |e: &dyn std::fmt::Display| MetadataError::Objects(e.to_string());
        let missing = {
            let local = crate::service::stores::open_or_create(src)
                .map_err(|e| objects(&format!("{}: {e}", src.display())))?;
            let held = tier.objects_of(&repo.0).map_err(|e| objects(&e))?;
            local
                .missing(&held)
                .map_err(|e| objects(&format!("{}: {e}", src.display())))?
        };
        if missing.is_empty() {
            return Ok(0);
        }
        // The copy has no locator (an index restore rebuilds) and none of
        // the store's empty directories (only files are copied): made here
        // to write through; the locator and staging go again after.
        for d in ["packs", "loose"] {
            std::fs::create_dir_all(dst.join(d))
                .map_err(|e| objects(&format!("{}: {e}", dst.join(d).display())))?;
        }
        scribe_objects::rebuild_locator(dst)
            .map_err(|e| objects(&format!("{}: {e}", dst.display())))?;
        let store = scribe_objects::ObjectStore::open(dst)
            .map_err(|e| objects(&format!("{}: {e}", dst.display())))?;
        let batch = store.batch();
        for id in &missing {
            let bytes = tier
                .read_object(&repo.0, id)
                .map_err(|e| objects(&format!("repository {repo}: {id} from the bucket: {e}")))?
                .ok_or_else(|| {
                    objects(&format!(
                        "repository {repo}: {id} is neither in the local store nor in the bucket"
                    ))
                })?;
            batch
                .put_with_id(*id, &bytes)
                .map_err(|e| objects(&format!("{}: {id}: {e}", dst.display())))?;
        }
        batch
            .commit()
            .map_err(|e| objects(&format!("{}: {e}", dst.display())))?;
        drop(store);
        // The object store's locator and its staging directory (its layout).
        for name in ["locator.redb", "staging"] {
            let p = dst.join(name);
            let r = if p.is_dir() {
                std::fs::remove_dir_all(&p)
            } else {
                std::fs::remove_file(&p)
            };
            match r {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(objects(&format!("{}: {e}", p.display()))),
            }
        }
        Ok(missing.len() as u64)
    }
}

pub(crate) fn tier_admin_err(data: &Path, e: TierError) -> crate::admin::AdminError {
    crate::admin::AdminError::Descriptor {
        path: dir(data).join("tier.redb"),
        reason: e.to_string(),
    }
}

impl TierService {
    /// Where the catalog's and `repo`'s recovery archives are now
    /// (HEAD's segment and offset).
    fn journal_positions(&self, repo: RepositoryId) -> Vec<(String, (u64, u64))> {
        let Some(service) = self.service.upgrade() else {
            return Vec::new();
        };
        let dir = service.root().dir();
        let mut out = Vec::new();
        for (name, db) in [
            ("catalog".to_string(), dir.join("catalog.redb")),
            (
                repo.to_hex(),
                dir.join("repos")
                    .join(repo.to_hex())
                    .join(scribe_metadata::repo::METADATA_FILE),
            ),
        ] {
            if let Ok(h) = scribe_metadata::archive::archive_dir(&db)
                .and_then(|d| scribe_metadata::archive::read_head(&d))
            {
                out.push((name, (h.segment, h.offset)));
            }
        }
        out
    }
}

impl AcceptedHook for TierService {
    fn stored(
        &self,
        repo: RepositoryId,
        operation: scribe_format::OperationId,
        _store: &Arc<scribe_objects::ObjectStore>,
        ids: &[ObjectId],
        bytes: u64,
    ) {
        let ids: Vec<ObjectId> = ids
            .iter()
            .filter(|id| id.kind == scribe_format::ObjectKind::Chunk)
            .copied()
            .collect();
        if ids.is_empty() {
            return;
        }
        let (m, cv) = &self.early;
        let mut e = m.lock().unwrap_or_else(|e| e.into_inner());
        let seq = e.next_seq;
        e.next_seq += 1;
        e.jobs.push_back(EarlyJob {
            seq,
            repo,
            operation,
            ids,
            bytes,
        });
        cv.notify_all();
    }

    fn accepted(&self, repo: RepositoryId, change: u64) -> Result<(), Failure> {
        self.request_pass();
        if self.ack == Ack::Local {
            return Ok(());
        }
        // The metadata too: the recovery journals of the catalog and of
        // the repository, shipped at least to where they are now (the
        // change's frames are published before it is acknowledged).
        let want = self.journal_positions(repo);
        let deadline = Instant::now() + self.ack_timeout;
        let (m, cv) = &self.wake;
        let mut w = m.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let done = self
                .tier
                .uploaded_through(&repo.0)
                .and_then(|t| Ok(t >= change && self.journals_cover(&want)?));
            match done {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(e) => {
                    return Err(Failure::new(
                        ErrorCode::TierUnavailable,
                        format!(
                            "change {change} was accepted, but the tier record cannot be read: {e}"
                        ),
                    ))
                }
            }
            let now = Instant::now();
            if now >= deadline {
                let why = w.last_error.clone().unwrap_or_else(|| {
                    "the upload of the change or of its recovery journal has not finished".into()
                });
                return Err(Failure::new(
                    ErrorCode::TierUnavailable,
                    format!(
                        "change {change} was accepted and is kept, but it is not yet in the \
                         durable tier ({why}); ask again with the same operation to get its \
                         outcome once it is"
                    ),
                ));
            }
            w = cv
                .wait_timeout(w, (deadline - now).min(Duration::from_millis(200)))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// Which file revisions `obliterate` gives up: `PATH` (every revision of
/// the path), `DIR/...` (every path below DIR), each optionally limited
/// to the revisions of changes `@N` or `@FIRST,LAST` (Perforce's
/// revision-range syntax; an `@` not followed by such a range is part of
/// the path).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileSpec {
    pub path: String,
    /// Everything below this directory (`DIR/...`).
    pub below: bool,
    pub changes: Option<(u64, u64)>,
}

impl std::str::FromStr for FileSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<FileSpec, String> {
        let (path, changes) = match s.rsplit_once('@') {
            Some((p, r)) => {
                let range = match r.split_once(',') {
                    Some((a, b)) => a.parse::<u64>().ok().zip(b.parse::<u64>().ok()),
                    None => r.parse::<u64>().ok().map(|n| (n, n)),
                };
                match range {
                    Some((a, b)) if a <= b => (p, Some((a, b))),
                    Some(_) => {
                        return Err(format!("{s}: the range's first change is above its last"))
                    }
                    None => (s, None),
                }
            }
            None => (s, None),
        };
        let (path, below) = match path.strip_suffix("/...") {
            Some(dir) => (dir, true),
            None if path == "..." => ("", true),
            None => (path, false),
        };
        if path.is_empty() && !below {
            return Err(format!("{s}: no path"));
        }
        Ok(FileSpec {
            path: path.to_string(),
            below,
            changes,
        })
    }
}

impl FileSpec {
    fn matches(&self, change: u64, path: &str) -> bool {
        let p = if self.below {
            self.path.is_empty()
                || path
                    .strip_prefix(self.path.as_str())
                    .is_some_and(|rest| rest.starts_with('/'))
        } else {
            path == self.path
        };
        p && self.changes.is_none_or(|(a, b)| (a..=b).contains(&change))
    }
}

/// `scribe-server obliterate` (offline; `docs/server.md`): give up the
/// content of the file revisions `specs` select in repository `repo`.
///
/// The history itself stays (changes, paths, manifests, the commits in the
/// bucket); what goes is the content of the selected revisions: their
/// references in the tier are released (recorded in `tier_purged`), the
/// revisions nothing references any more are collected (their blocks
/// deleted from the bucket; an uncertain delete is quarantined and the
/// next run finishes it), and chunks no kept revision names leave the
/// local store. A revision that is the current state of its path at the
/// head of any branch is never given up (delete the file and submit
/// first). Without `execute` nothing changes: the report says what would
/// be given up. Every run, even one that selects nothing new, finishes
/// revisions an interrupted run left `Deleting`.
pub fn obliterate(
    data: &Path,
    tier: &Tier,
    repo: &str,
    specs: &[FileSpec],
    execute: bool,
) -> Result<crate::admin::Report, crate::admin::AdminError> {
    use crate::admin::{AdminError, Report};
    let mut report = Report::default();
    let root = crate::admin::open_without_stores(data)?;
    let info = crate::admin::select(&root, Some(repo))?
        .into_iter()
        .next()
        .ok_or_else(|| AdminError::NoRepository(repo.to_string()))?;
    let r = root
        .open_repository(info.id)
        .map_err(|source| AdminError::Metadata {
            repo: info.name.clone(),
            source,
        })?;
    let head = r.head().map_err(|source| AdminError::Metadata {
        repo: info.name.clone(),
        source,
    })?;
    let through = tier
        .uploaded_through(&info.id.0)
        .map_err(|e| tier_admin_err(data, e))?;
    if through < head {
        report.problems.push(format!(
            "{}: changes {}..={head} are not in the bucket yet; serve with --tier until \
             `scribe-server tier status` shows backlog 0, then obliterate",
            info.name,
            through + 1
        ));
        return Ok(report);
    }
    let already: std::collections::BTreeSet<(u64, String)> = tier
        .purged(&info.id.0)
        .map_err(|e| tier_admin_err(data, e))?
        .into_iter()
        .collect();
    let plan = scan_versions(&r, &info.name, &already, specs)?;
    drop(r);
    drop(root);
    for (c, p) in &plan.current {
        report.notes.push(format!(
            "{}: {p}@{c} kept: it is the current revision at a branch head",
            info.name
        ));
    }
    let verb = if execute {
        "given up"
    } else {
        "would be given up"
    };
    for (c, p) in &plan.give_up {
        report.notes.push(format!("{}: {p}@{c} {verb}", info.name));
    }
    if !execute {
        report.notes.push(format!(
            "{}: preview: nothing changed ({} file revisions selected, {} chunks would leave \
             the local store); run again with -y to obliterate",
            info.name,
            plan.give_up.len(),
            plan.drop_local.len()
        ));
        return Ok(report);
    }
    let released = tier
        .release_files(&info.id.0, &plan.give_up)
        .map_err(|e| tier_admin_err(data, e))?;
    let g = tier.collect().map_err(|e| tier_admin_err(data, e))?;
    report.notes.push(format!(
        "{}: {} file revisions given up, {released} references released; gc: {} revisions \
         claimed, {} deleted ({} blocks), {} stale candidates",
        info.name,
        plan.give_up.len(),
        g.claimed,
        g.deleted,
        g.blocks_deleted,
        g.stale
    ));
    for (rev, why) in tier.quarantined().map_err(|e| tier_admin_err(data, e))? {
        report.problems.push(format!(
            "{}: revision {rev} is quarantined (Deleting): {why}; run obliterate again to \
             finish it",
            info.name
        ));
    }
    let drop_local = &plan.drop_local;
    let keep = |_: RepositoryId, id: &ObjectId| !drop_local.contains(id);
    let absent_ok = |r: RepositoryId, id: &ObjectId| {
        drop_local.contains(id) || tier.holds(&r.0, id).unwrap_or(false)
    };
    let c = crate::admin::compact_objects_keeping_absent(
        data,
        Some(repo),
        &scribe_objects::CompactOptions::default(),
        &keep,
        &absent_ok,
    )?;
    report.problems.extend(c.problems);
    report.notes.extend(c.notes);
    Ok(report)
}

/// What `obliterate` would do in one repository.
struct Plan {
    /// File revisions `specs` select, not given up yet, not current.
    give_up: Vec<(u64, String)>,
    /// Selected, but current at a branch head: kept.
    current: Vec<(u64, String)>,
    /// Chunks only given-up revisions (earlier and now) name and no upload
    /// pin holds.
    drop_local: std::collections::HashSet<ObjectId>,
}

/// Walk every file revision of `r` (its manifests come from the local
/// store, where they always stay) and plan giving up what `specs` select.
fn scan_versions(
    r: &scribe_metadata::Repository,
    name: &str,
    already: &std::collections::BTreeSet<(u64, String)>,
    specs: &[FileSpec],
) -> Result<Plan, crate::admin::AdminError> {
    use crate::admin::AdminError;
    use std::collections::{BTreeMap, BTreeSet, HashSet};
    let me = |source: scribe_metadata::MetadataError| AdminError::Metadata {
        repo: name.to_string(),
        source,
    };
    let store = crate::service::stores::open_or_create(&r.dir().join("objects")).map_err(|e| {
        AdminError::Store {
            repo: name.to_string(),
            source: Box::new(e),
        }
    })?;
    let head = r.head().map_err(me)?;
    let mut view = r.view().map_err(me)?;
    let mut versions: BTreeMap<(u64, String), Vec<ObjectId>> = BTreeMap::new();
    for change in 1..=head {
        for (path, h) in view.describe(change).map_err(me)?.paths {
            let Some(st) = h.state else { continue };
            let chunks =
                manifest_chunks(&store, &ObjectId::manifest(st.manifest)).map_err(|e| {
                    AdminError::Descriptor {
                        path: r.dir().join("objects"),
                        reason: format!("{path}@{change}: {e}"),
                    }
                })?;
            versions.insert((change, path), chunks);
        }
    }
    let selected: Vec<(u64, String)> = versions
        .keys()
        .filter(|(c, p)| !already.contains(&(*c, p.clone())))
        .filter(|(c, p)| specs.iter().any(|s| s.matches(*c, p)))
        .cloned()
        .collect();
    // The current revision of each selected path at every branch head.
    let branches: Vec<scribe_format::BranchId> = {
        use redb::{ReadableDatabase, ReadableTable};
        let tx = r.database().begin_read().map_err(|e| me(e.into()))?;
        let t = tx
            .open_table(scribe_metadata::tables::BRANCHES)
            .map_err(|e| me(e.into()))?;
        let mut out = Vec::new();
        for row in t.iter().map_err(|e| me(e.into()))? {
            out.push(scribe_format::BranchId(
                row.map_err(|e| me(e.into()))?.0.value(),
            ));
        }
        out
    };
    let mut current_set: HashSet<(u64, String)> = HashSet::new();
    let paths: BTreeSet<&String> = selected.iter().map(|(_, p)| p).collect();
    for b in &branches {
        let bh = r.branch_head(*b).map_err(me)?;
        for p in &paths {
            if let Some(st) = view.stat(*b, bh, p).map_err(me)? {
                current_set.insert((st.change, (*p).clone()));
            }
        }
    }
    let (current, give_up): (Vec<_>, Vec<_>) =
        selected.into_iter().partition(|v| current_set.contains(v));
    let gone: BTreeSet<&(u64, String)> = already.iter().chain(give_up.iter()).collect();
    let mut needed: HashSet<ObjectId> = r.active_pins().map_err(me)?.into_iter().collect();
    for (v, chunks) in &versions {
        if !gone.contains(v) {
            needed.extend(chunks.iter().copied());
        }
    }
    let mut drop_local = HashSet::new();
    for v in &gone {
        if let Some(chunks) = versions.get(*v) {
            drop_local.extend(chunks.iter().filter(|c| !needed.contains(c)).copied());
        }
    }
    Ok(Plan {
        give_up,
        current,
        drop_local,
    })
}

/// The recovery archives a data root ships (`name`, database path): the
/// catalog's, each repository's, and the storage ownership file's when
/// the root has one.
fn archives(root: &scribe_metadata::DataRoot) -> Vec<(String, PathBuf)> {
    let dir = root.dir();
    let mut out = vec![("catalog".to_string(), dir.join("catalog.redb"))];
    let auth = dir.join(scribe_metadata::auth_state::AUTH_STATE_FILE);
    if auth.is_file() {
        out.push((AUTH_STATE_ARCHIVE.to_string(), auth));
    }
    if let Ok(repos) = root.list_repositories() {
        for info in repos {
            out.push((
                info.id.to_hex(),
                dir.join("repos")
                    .join(info.id.to_hex())
                    .join(scribe_metadata::repo::METADATA_FILE),
            ));
        }
    }
    out
}

/// The journal shards of the data roots the root at `data` was restored
/// from, nearest first: its descriptor's `restored-from-incarnation`, then
/// what each of those roots' descriptors shipped to the bucket names,
/// until one was not restored (or shipped no descriptor). A repository
/// that lived before a restore shipped journals under each of them too;
/// `repo delete --tier` gives those up with the rest.
pub(crate) fn restored_from_shards(
    data: &Path,
    provider: &dyn Provider,
) -> Result<Vec<u32>, String> {
    let from = |bytes: &[u8], what: &str| -> Result<Option<[u8; 16]>, String> {
        scribe_format::descriptor::Descriptor::parse(bytes)
            .and_then(|d| d.data_root())
            .map(|d| d.restored.map(|r| r.from_incarnation))
            .map_err(|e| format!("{what}: {e}"))
    };
    let path = data.join(DESCRIPTOR);
    let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut next = from(&bytes, &path.display().to_string())?;
    let mut out = Vec::new();
    while let Some(incarnation) = next {
        let shard = shard_of(&hex::encode(incarnation));
        if out.contains(&shard) {
            break;
        }
        out.push(shard);
        next = match nokv_bridge::tier::fetch_root_file(provider, shard, DESCRIPTOR)
            .map_err(|e| e.to_string())?
        {
            Some(b) => from(&b, &format!("nokv/recovery/{shard:08x}/{DESCRIPTOR}"))?,
            None => None,
        };
    }
    Ok(out)
}

/// The data root's notes outside the catalog that a restore from the
/// bucket needs (`former-names`, `retired-repositories`), each as the
/// bytes of its file (the header alone when the file is absent: nothing
/// recorded), or why the file does not read.
fn root_notes(dir: &Path) -> [(&'static str, Result<Vec<u8>, String>); 2] {
    use scribe_metadata::{former_names, retired};
    [
        (
            former_names::FILE,
            former_names::read(dir)
                .map(|n| former_names::encode(&n))
                .map_err(|e| e.to_string()),
        ),
        (
            retired::FILE,
            retired::read(dir)
                .map(|r| retired::encode(&r))
                .map_err(|e| e.to_string()),
        ),
    ]
}

/// Ship a data root file; one the bucket holds in another version is
/// logged and left (the first version stays).
fn ship_logged(tier: &Tier, name: &str, bytes: &[u8]) -> Result<(), String> {
    tier.ship_root_file_version(name, bytes)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The archive name of `auth-state.redb` in the bucket.
const AUTH_STATE_ARCHIVE: &str = "auth-state";
/// The data root's descriptor, shipped beside its journals.
const DESCRIPTOR: &str = "SCRIBE_FORMAT";
/// `{block shard:08x}\n`: the shard of the block and index keys, shipped
/// beside the journals (after a restore it differs from the journal shard).
const BLOCK_SHARD: &str = "tier";

/// The ids of change `change`'s commit objects, in the order
/// [`change_objects`] gives them (the index record's key depends on it).
pub fn commit_objects(
    repo: &scribe_metadata::Repository,
    change: u64,
) -> Result<Vec<ObjectId>, String> {
    described(repo, change).map(|(_, commit)| commit)
}

/// What `restore --from-tier` did.
#[derive(Debug, Default)]
pub struct TierRestore {
    pub journal_shard: u32,
    pub block_shard: u32,
    pub from_incarnation: String,
    pub incarnation: String,
    /// Per repository: name and the changes rebuilt.
    pub repositories: Vec<(String, u64)>,
    /// Commits, change sets and manifests put back into the local stores.
    pub kept_objects: u64,
    /// What `tier verify` found right after (empty: clean).
    pub problems: Vec<String>,
    /// Journal shards not considered when choosing the root: they shipped
    /// a descriptor but no catalog journal step (killed at once).
    pub passed_over: Vec<u32>,
    /// Repositories the shipped catalog names that were deleted (`repo
    /// delete`): name and the key of their deletion record. Not restored.
    pub deleted: Vec<(String, String)>,
    /// Former names of renamed repositories brought back
    /// (`former-names`).
    pub former_names: u64,
    /// Repositories restored retired (`retired-repositories`), by name.
    pub retired: Vec<String>,
}

fn hex_list(shards: &[u32]) -> String {
    shards
        .iter()
        .map(|s| format!("{s:08x}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `scribe-server restore --from-tier`: rebuild a data root at `to`
/// (absent or empty) from the bucket alone (`docs/nokv-bridge.md`,
/// "Disaster recovery"):
///
/// 1. find the data root that shipped to the bucket: `journal_shard`, or
///    the one journal shard whose descriptor no other one names as
///    `restored-from` (a bucket used by a root and its restores);
/// 2. in a staging directory beside `to`: its descriptor; the catalog's,
///    the storage ownership file's and each repository's recovery archive
///    fetched and verified frame by frame, each database rebuilt by
///    `archive::recover`; empty object stores;
/// 3. `scribe_metadata::restore::restore` into `to`: new incarnations and
///    fresh archives, as `scribe-server restore` does, so old workspaces
///    tell and go on;
/// 4. `tier.redb` rebuilt from each change's index record (verified: its
///    digest, root, change and the commit objects the metadata names),
///    blocks keeping their keys, journals shipping under the new root's
///    own shard from then on;
/// 5. `tier verify` (every reference count, every block's presence and
///    extent).
///
/// Objects are read back from the bucket on demand when served with
/// `--tier`. A damaged or foreign object is refused with its key.
pub fn restore_from_tier(
    provider: Arc<dyn Provider>,
    to: &Path,
    journal_shard: Option<u32>,
) -> Result<TierRestore, String> {
    use nokv_bridge::tier::{
        archive_shipped, deletion_key, fetch_archive, fetch_root_file, fetch_sealed_root_file,
        journal_shards,
    };
    if let Ok(mut it) = std::fs::read_dir(to) {
        if it.next().is_some() {
            return Err(format!("{} is not empty", to.display()));
        }
    }
    let te = |e: TierError| e.to_string();
    let descriptor_of =
        |shard: u32| -> Result<Option<(Vec<u8>, scribe_format::descriptor::DataRoot)>, String> {
            let Some(b) = fetch_root_file(&*provider, shard, DESCRIPTOR).map_err(te)? else {
                return Ok(None);
            };
            let d = scribe_format::descriptor::Descriptor::parse(&b)
                .and_then(|d| d.data_root())
                .map_err(|e| format!("nokv/recovery/{shard:08x}/{DESCRIPTOR}: {e}"))?;
            Ok(Some((b.to_vec(), d)))
        };
    // The other data roots that shipped to this bucket, when the root was
    // chosen among them (see the check after the metadata is rebuilt).
    let mut others: Vec<u32> = Vec::new();
    // Shipped data roots without a catalog journal step (see below).
    let mut passed_over: Vec<u32> = Vec::new();
    let shard = match journal_shard {
        Some(s) => s,
        None => {
            let mut found = Vec::new();
            for s in journal_shards(&*provider).map_err(te)? {
                let Some((_, d)) = descriptor_of(s)? else {
                    continue;
                };
                // A root killed before its catalog's first journal step
                // shipped (a drill stopped at once) holds nothing to
                // rebuild: passed over, so it neither hides the root it
                // was restored from nor stands beside it as a choice.
                if archive_shipped(&*provider, s, "catalog").map_err(te)? {
                    found.push((s, d));
                } else {
                    passed_over.push(s);
                }
            }
            let restored_from: std::collections::HashSet<[u8; 16]> = found
                .iter()
                .filter_map(|(_, d)| d.restored.map(|r| r.from_incarnation))
                .collect();
            let leaves: Vec<u32> = found
                .iter()
                .filter(|(_, d)| !restored_from.contains(&d.incarnation))
                .map(|(s, _)| *s)
                .collect();
            others = found
                .iter()
                .map(|(s, _)| *s)
                .filter(|s| !leaves.contains(s))
                .collect();
            match leaves.as_slice() {
                [one] => *one,
                [] if passed_over.is_empty() => {
                    return Err(
                        "the bucket holds no shipped data root (nokv/recovery/*/SCRIBE_FORMAT)"
                            .into(),
                    )
                }
                [] => {
                    return Err(format!(
                        "the bucket holds no data root with a shipped catalog journal \
                         (journal shards {} shipped their descriptors and stopped before \
                         nokv/recovery/<shard>/catalog/head/0000000000000001)",
                        hex_list(&passed_over)
                    ))
                }
                many => {
                    return Err(format!(
                    "the bucket holds {} data roots (journal shards {}); choose one with --shard",
                    many.len(),
                    hex_list(many)
                ))
                }
            }
        }
    };
    let (descriptor, fields) = descriptor_of(shard)?
        .ok_or_else(|| format!("nokv/recovery/{shard:08x}/{DESCRIPTOR} is not in the bucket"))?;
    let block_shard = {
        let key = format!("nokv/recovery/{shard:08x}/{BLOCK_SHARD}");
        let b = fetch_root_file(&*provider, shard, BLOCK_SHARD)
            .map_err(te)?
            .ok_or_else(|| format!("{key} is not in the bucket"))?;
        std::str::from_utf8(&b)
            .ok()
            .and_then(|t| t.strip_suffix('\n'))
            .filter(|t| t.len() == 8)
            .and_then(|t| u32::from_str_radix(t, 16).ok())
            .ok_or_else(|| format!("{key}: not 8 hex digits and a newline"))?
    };
    let name = to
        .file_name()
        .ok_or_else(|| format!("{}: no directory name", to.display()))?;
    let mut staging_name = name.to_os_string();
    staging_name.push(".from-tier");
    let stage = to.with_file_name(staging_name);
    if stage.exists() {
        // An interrupted restore's leftover: never published, ours by name.
        std::fs::remove_dir_all(&stage).map_err(|e| format!("{}: {e}", stage.display()))?;
    }
    let io = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    let result = (|| -> Result<TierRestore, String> {
        std::fs::create_dir_all(&stage).map_err(|e| io(&stage, e))?;
        std::fs::write(stage.join(DESCRIPTOR), &descriptor)
            .map_err(|e| io(&stage.join(DESCRIPTOR), e))?;
        // Fetch an archive into `db`'s default directory, verify it, and
        // rebuild `db` from it.
        let rebuild = |name: &str, db: &Path, required: bool| -> Result<bool, String> {
            let dir = scribe_metadata::archive::default_dir(db);
            let prefix = format!("nokv/recovery/{shard:08x}/{name}");
            let last = fetch_archive(&*provider, shard, name, &dir).map_err(te)?;
            if last == 0 {
                return if required {
                    Err(format!("{prefix}: no shipped journal step"))
                } else {
                    Ok(false)
                };
            }
            scribe_metadata::archive::verify(&dir)
                .map_err(|e| format!("{prefix} (fetched into {}): {e}", dir.display()))?;
            scribe_metadata::archive::recover(&dir, db)
                .map_err(|e| format!("{prefix} (fetched into {}): {e}", dir.display()))?;
            Ok(true)
        };
        rebuild("catalog", &stage.join("catalog.redb"), true)?;
        rebuild(
            AUTH_STATE_ARCHIVE,
            &stage.join(scribe_metadata::auth_state::AUTH_STATE_FILE),
            false,
        )?;
        let mut repos = {
            let root = scribe_metadata::DataRoot::open(&stage)
                .map_err(|e| format!("the rebuilt catalog: {e}"))?;
            root.list_repositories()
                .map_err(|e| format!("the rebuilt catalog: {e}"))?
        };
        // A repository deleted on the tiered root (`repo delete`) left its
        // deletion record in the bucket before anything of it was
        // deleted: it stays deleted here, whatever the shipped catalog
        // says (the catalog's journal may have shipped before the
        // deletion), and its journal and index records are not read.
        let mut deleted_repos = Vec::new();
        for info in &repos {
            if nokv_bridge::tier::root_deleted_in_bucket(&*provider, block_shard, &info.id.0)
                .map_err(te)?
            {
                deleted_repos.push(info.clone());
            }
        }
        if !deleted_repos.is_empty() {
            let root = scribe_metadata::DataRoot::open(&stage)
                .map_err(|e| format!("the rebuilt catalog: {e}"))?;
            for info in &deleted_repos {
                let dir = stage.join("repos").join(info.id.to_hex());
                std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
                root.delete_repository(&info.name)
                    .map_err(|e| format!("the rebuilt catalog: {}: {e}", info.name))?;
            }
            drop(root);
            let aside = stage.join(scribe_metadata::root::DELETED_DIR);
            std::fs::remove_dir_all(&aside).map_err(|e| io(&aside, e))?;
            repos.retain(|i| !deleted_repos.iter().any(|d| d.id == i.id));
        }
        // The data root's notes outside the catalog (shipped sealed by
        // every pass before the catalog's journal): each checked, its seal
        // then its lines as the file is read; a retirement is kept only
        // for a repository restored (a deleted one's goes with it).
        let (former, retired) = {
            use scribe_metadata::{former_names, retired};
            let key = |n: &str| format!("nokv/recovery/{shard:08x}/{n}");
            let mut former = 0;
            if let Some(b) =
                fetch_sealed_root_file(&*provider, shard, former_names::FILE).map_err(te)?
            {
                let names = former_names::decode(&b, &key(former_names::FILE))
                    .map_err(|e| e.to_string())?;
                former_names::write(&stage, &names).map_err(|e| e.to_string())?;
                former = names.len() as u64;
            }
            let mut kept = Vec::new();
            if let Some(b) = fetch_sealed_root_file(&*provider, shard, retired::FILE).map_err(te)? {
                let mut all =
                    retired::decode(&b, &key(retired::FILE)).map_err(|e| e.to_string())?;
                all.retain(|r| repos.iter().any(|i| i.id == r.id));
                retired::write(&stage, &all).map_err(|e| e.to_string())?;
                kept = all
                    .iter()
                    .filter_map(|r| repos.iter().find(|i| i.id == r.id))
                    .map(|i| i.name.clone())
                    .collect();
            }
            (former, kept)
        };
        for info in &repos {
            let dir = stage.join("repos").join(info.id.to_hex());
            std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
            let key = format!("{}/{DESCRIPTOR}", info.id.to_hex());
            let desc = fetch_root_file(&*provider, shard, &key)
                .map_err(te)?
                .ok_or_else(|| format!("nokv/recovery/{shard:08x}/{key} is not in the bucket"))?;
            scribe_format::descriptor::Descriptor::parse(&desc)
                .map_err(|e| format!("nokv/recovery/{shard:08x}/{key}: {e}"))?;
            std::fs::write(dir.join(DESCRIPTOR), &desc).map_err(|e| io(&dir, e))?;
            rebuild(
                &info.id.to_hex(),
                &dir.join(scribe_metadata::repo::METADATA_FILE),
                true,
            )
            .map_err(|e| {
                if others.is_empty() {
                    return e;
                }
                // Chosen as the newest restore, but it cannot be rebuilt
                // (a drill stopped before its repositories shipped): the
                // root it was restored from may well be whole.
                format!(
                    "{e}: journal shard {shard:08x} was chosen as the newest restore \
                     but cannot be rebuilt; the bucket also holds journal shards {}: \
                     choose one with --shard",
                    hex_list(&others)
                )
            })?;
            crate::service::stores::open_or_create(&dir.join("objects"))
                .map_err(|e| format!("{}: {e}", dir.join("objects").display()))?;
        }
        if !others.is_empty() {
            // The chosen root is the newest restore of the others. If one
            // of them went on after it was restored from (a restore drill
            // served beside production, production then took more
            // changes), the bucket holds changes the chosen root does not:
            // taking it would drop them. Refused; `--shard` chooses.
            let root = crate::admin::open_without_stores(&stage)
                .map_err(|e| format!("the rebuilt metadata: {e}"))?;
            for info in &repos {
                let head = root
                    .open_repository(info.id)
                    .and_then(|r| r.head())
                    .map_err(|e| format!("the rebuilt {}: {e}", info.name))?;
                let prefix = format!("nokv/index/{block_shard:08x}/{}", info.id.to_hex());
                let beyond = provider
                    .list_names(&prefix)
                    .map_err(|e| e.to_string())?
                    .iter()
                    .filter_map(|n| n.split_once('-'))
                    .filter_map(|(c, _)| u64::from_str_radix(c, 16).ok())
                    .filter(|c| *c > head)
                    .max();
                if let Some(newest) = beyond {
                    return Err(format!(
                        "journal shard {shard:08x} (chosen as the newest restore) holds \
                         {} up to change {head}, but the bucket holds changes up to {newest} \
                         ({prefix}/): another data root went on after it was restored from \
                         (journal shards {}); choose one with --shard",
                        info.name,
                        hex_list(&others)
                    ));
                }
            }
        }
        let r = scribe_metadata::restore::restore(&stage, to).map_err(|e| e.to_string())?;
        let incarnation = hex::encode(r.incarnation);
        let d = dir(to);
        std::fs::create_dir_all(&d).map_err(|e| io(&d, e))?;
        let tier = Tier::create_restored(
            &d.join("tier.redb"),
            block_shard,
            shard_of(&incarnation),
            provider.clone(),
            TierOptions::default(),
        )
        .map_err(te)?;
        let root = crate::admin::open_without_stores(to).map_err(|e| e.to_string())?;
        let mut out = TierRestore {
            journal_shard: shard,
            block_shard,
            from_incarnation: hex::encode(fields.incarnation),
            incarnation,
            passed_over,
            former_names: former,
            retired,
            deleted: deleted_repos
                .iter()
                .map(|i| (i.name.clone(), deletion_key(block_shard, &i.id.0)))
                .collect(),
            ..TierRestore::default()
        };
        for info in &repos {
            let repo = root
                .open_repository(info.id)
                .map_err(|e| format!("{}: {e}", info.name))?;
            let head = repo.head().map_err(|e| format!("{}: {e}", info.name))?;
            for change in 1..=head {
                let commit =
                    commit_objects(&repo, change).map_err(|e| format!("{}: {e}", info.name))?;
                tier.restore_change(&info.id.0, change, &commit)
                    .map_err(|e| format!("{}: change {change}: {e}", info.name))?;
            }
            // What `obliterate` gave up stays given up.
            tier.restore_releases(&info.id.0)
                .map_err(|e| format!("{}: {e}", info.name))?;
            out.repositories.push((info.name.clone(), head));
        }
        drop(root);
        // Every block's bytes, object by object against its digest: a
        // block replaced in the bucket is refused here, by key and offset.
        // The commits, change sets and manifests among them go back into
        // the local stores, where they always stay (obliterate, evict and
        // doctor read them there); chunks fault in when read.
        type Kept = Vec<([u8; 16], ObjectId, Vec<u8>)>;
        let kept: std::sync::Mutex<Kept> = Default::default();
        let damaged = tier
            .verify_contents_with(&|root, id, bytes| {
                if id.kind != scribe_format::ObjectKind::Chunk {
                    if let Ok(mut k) = kept.lock() {
                        k.push((root, id, bytes.to_vec()));
                    }
                }
            })
            .map_err(te)?;
        if !damaged.is_empty() {
            return Err(format!(
                "the bucket's blocks do not hold what the index records say:\n  {}",
                damaged.join("\n  ")
            ));
        }
        let mut kept = kept.into_inner().unwrap_or_else(|e| e.into_inner());
        kept.sort_by_key(|a| (a.0, a.1));
        for info in &repos {
            let objects = to.join("repos").join(info.id.to_hex()).join("objects");
            let store = crate::service::stores::open_or_create(&objects)
                .map_err(|e| format!("{}: {e}", objects.display()))?;
            let batch = store.batch();
            for (_, id, bytes) in kept.iter().filter(|(r, _, _)| *r == info.id.0) {
                batch
                    .put_with_id(*id, bytes)
                    .map_err(|e| format!("{}: {id}: {e}", objects.display()))?;
                out.kept_objects += 1;
            }
            batch
                .commit()
                .map_err(|e| format!("{}: {e}", objects.display()))?;
        }
        out.problems = tier.verify().map_err(te)?;
        Ok(out)
    })();
    let _ = std::fs::remove_dir_all(&stage);
    if result.is_err() && to.exists() {
        // Nothing was acknowledged from it: leave no half-restored root.
        let _ = std::fs::remove_dir_all(to);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> ObjKey {
        (
            RepositoryId([1; 16]),
            ObjectId::chunk(scribe_format::ChunkId([n; 32])),
        )
    }

    fn fill(r: &mut Reads, n: u8) {
        r.insert(key(n), bytes::Bytes::from(vec![n; 10]));
    }

    /// `unserved_bytes` is the bytes of cached objects not served.
    fn check_unserved(r: &Reads) {
        let sum: u64 = r
            .cache
            .iter()
            .filter(|(k, _)| !r.served_set.contains(*k))
            .map(|(_, b)| b.len() as u64)
            .sum();
        assert_eq!(r.unserved_bytes, sum);
        assert!(r.served_set.iter().all(|k| r.cache.contains_key(k)));
    }

    #[test]
    fn read_ahead_waits_while_objects_not_yet_read_fill_the_cache() {
        let mut r = Reads::default();
        for n in 0..3 {
            fill(&mut r, n);
        }
        // 30 bytes not yet read: one block of 10 more fits in 40.
        assert!(r.room_ahead(10, 40));
        r.ahead_fetching = 1;
        assert!(!r.room_ahead(10, 40), "one block already coming");
        // A read of one of them makes room again.
        r.served(key(1));
        r.served(key(1));
        check_unserved(&r);
        assert_eq!(r.unserved_bytes, 20);
        assert!(r.room_ahead(10, 40));
        // Past the limit: the served object goes, then the oldest.
        fill(&mut r, 3);
        fill(&mut r, 4);
        r.evict(30, 30);
        check_unserved(&r);
        let mut kept: Vec<u8> = (0..5).filter(|n| r.cache.contains_key(&key(*n))).collect();
        kept.sort();
        assert_eq!(kept, [2, 3, 4]);
        assert_eq!(r.unserved_bytes, 30);
        assert!(!r.room_ahead(10, 30));
    }

    #[test]
    fn objects_a_read_was_answered_with_are_evicted_before_those_read_ahead() {
        let mut r = Reads::default();
        for n in 0..4 {
            fill(&mut r, n);
        }
        // 0 and 1 came first; 2 and 3 were read, 0 and 1 not yet.
        r.served(key(2));
        r.served(key(3));
        fill(&mut r, 4);
        fill(&mut r, 5);
        r.evict(40, 40);
        let mut kept: Vec<u8> = (0..6).filter(|n| r.cache.contains_key(&key(*n))).collect();
        kept.sort();
        assert_eq!(kept, [0, 1, 4, 5]);
        assert_eq!(r.bytes, 40);
        // Nothing served left: by age, oldest first.
        fill(&mut r, 6);
        r.evict(40, 40);
        assert!(!r.cache.contains_key(&key(0)));
        assert!(r.cache.contains_key(&key(1)));
        // Serving what is not cached queues nothing.
        r.served(key(9));
        assert!(r.served.is_empty());
    }

    #[test]
    fn eviction_queues_stay_near_the_cache_size() {
        let mut r = Reads::default();
        for round in 0..20u32 {
            for n in 0..200u8 {
                fill(&mut r, n);
                r.served(key(n));
                r.served(key(n));
            }
            r.evict(10 * 100, 10 * 100);
            check_unserved(&r);
            assert!(r.cache.len() <= 100, "round {round}");
            assert!(r.order.len() <= 2 * r.cache.len() + 1024);
            assert!(r.served.len() <= 2 * r.cache.len() + 1024);
        }
    }

    #[test]
    fn objects_read_ahead_in_a_pause_stay_up_to_the_far_room_while_served_ones_go() {
        let mut r = Reads::default();
        for n in 0..8 {
            fill(&mut r, n);
        }
        r.served(key(0));
        r.served(key(1));
        // 80 bytes cached, 60 not yet read: near room 30, far room 70.
        r.evict(30, 70);
        check_unserved(&r);
        let kept: Vec<u8> = (0..8).filter(|n| r.cache.contains_key(&key(*n))).collect();
        // Both served objects went; of those not yet read, none had to.
        assert_eq!(kept, [2, 3, 4, 5, 6, 7]);
        // Past the far room, the oldest not yet read goes too.
        fill(&mut r, 8);
        fill(&mut r, 9);
        r.evict(30, 70);
        check_unserved(&r);
        let kept: Vec<u8> = (0..10).filter(|n| r.cache.contains_key(&key(*n))).collect();
        assert_eq!(kept, [3, 4, 5, 6, 7, 8, 9]);
        // Read ahead within the far room only.
        assert!(!r.room_ahead(10, 30));
        assert!(!r.room_ahead(10, 70));
        r.served(key(3));
        assert!(r.room_ahead(10, 70));
    }
}

//! Talking to the service: connecting by URL (creating an embedded data
//! root on request), the workspace cache, the materializer that downloads
//! what sync writes, and test failpoints.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use indicatif::ProgressBar;
use scribe_format::manifest::ManifestRef;
use scribe_format::{FileContentId, ObjectId};
use scribe_objects::{ObjectStore, StoreOptions};
use scribe_server::client::{parse_url, Target};
use scribe_server::{Client, ClientOptions, Service};
use scribe_workspace::records::BaselineRecord;
use scribe_workspace::sync::Materializer;
use scribe_workspace::Workspace;

use crate::error::{CliError, CliResult};

/// Connect to `url`. With `create`, a path URL whose directory does not
/// hold a data root yet gets a new one (embedded use).
pub fn connect(url: &str, create: bool) -> CliResult<Client> {
    if let Target::Path(p) = parse_url(url)? {
        let fresh = !p.join("SCRIBE_FORMAT").exists()
            && std::fs::read_dir(&p).map_or(true, |mut d| d.next().is_none());
        if fresh {
            if !create {
                return Err(CliError::new(
                    "not_found",
                    format!("{} is not a Scribe data root", p.display()),
                )
                .hint("create it with `scribe repo create NAME --server PATH`"));
            }
            let svc = Service::create(&p).map_err(scribe_server::ClientError::from)?;
            return Ok(Client::in_process(svc));
        }
    }
    let opts = ClientOptions {
        // The CA trusted for `scribes://` (the binary may read the environment).
        ca_file: std::env::var_os("SCRIBE_CA_FILE").map(std::path::PathBuf::from),
        ..ClientOptions::default()
    };
    Ok(scribe_server::connect(url, &opts)?)
}

/// Make a path URL absolute so a workspace can use it from any directory.
pub fn absolute_url(url: &str) -> CliResult<String> {
    match parse_url(url)? {
        Target::Path(p) => Ok(std::path::absolute(&p)?.display().to_string()),
        Target::Tcp { .. } => Ok(url.to_string()),
    }
}

/// The workspace cache (`.scribe/_state/cache/`), created on first use.
pub fn open_cache(ws: &Workspace) -> CliResult<ObjectStore> {
    let dir = ws.state_dir().join("cache");
    if dir.join("SCRIBE_FORMAT").exists() {
        Ok(ObjectStore::open(&dir)?)
    } else {
        Ok(ObjectStore::create(&dir, StoreOptions::default())?)
    }
}

/// A named point where a test build kills itself (`SCRIBE_TEST_CRASH_AT`).
///
/// `NAME` fires the first time [`crash_point`] is called with it;
/// `NAME-N` (for `sync-after`) fires when a counter reaches N.
pub fn crash_point(name: &str) {
    if std::env::var("SCRIBE_TEST_CRASH_AT").ok().as_deref() == Some(name) {
        die();
    }
}

/// A counted point: fires when `SCRIBE_TEST_CRASH_AT` is `{prefix}-{n}`.
pub fn crash_count(prefix: &str, n: usize) {
    if let Ok(v) = std::env::var("SCRIBE_TEST_CRASH_AT") {
        if v.strip_prefix(prefix)
            .and_then(|r| r.strip_prefix('-'))
            .and_then(|r| r.parse::<usize>().ok())
            == Some(n)
        {
            die();
        }
    }
}

/// A pause after each written file (`SCRIBE_TEST_SLOW_MS`), so a test can
/// kill a run in the middle for real.
fn slow() {
    if let Some(ms) = std::env::var("SCRIBE_TEST_SLOW_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

fn die() -> ! {
    let _ = std::io::stderr().flush();
    #[cfg(unix)]
    {
        let _ = std::process::Command::new("kill")
            .args(["-9", &std::process::id().to_string()])
            .status();
        std::thread::sleep(std::time::Duration::from_secs(5));
    }
    std::process::abort()
}

/// The remote end of a workspace, connected on first use.
pub struct Remote {
    url: String,
    pub repo: String,
    client: Mutex<Option<Client>>,
    cache: ObjectStore,
    placed: AtomicUsize,
    /// Calls of each [`Materializer::checkpoint`] name so far.
    checkpoints: Mutex<HashMap<String, usize>>,
    /// Objects fetched together for the current sync batch.
    prefetched: Mutex<HashMap<ObjectId, Arc<Vec<u8>>>>,
    pub bar: Mutex<ProgressBar>,
    /// Idle extra connections for parallel downloads (TCP only).
    spare: Mutex<Vec<Client>>,
    /// Extra connections opened so far (at most [`EXTRA_CONNECTIONS`]).
    extra: AtomicUsize,
}

/// Most extra connections a sync opens, so files written in parallel
/// download in parallel (the server reads and verifies one object while
/// the client hashes and writes another).
const EXTRA_CONNECTIONS: usize = 3;

/// Files up to this size have their chunks fetched with the batch.
const PREFETCH_FILE_BYTES: u64 = 4 << 20;
/// Most chunk bytes held in memory for one batch.
const PREFETCH_BUDGET: u64 = 64 << 20;

impl Remote {
    pub fn new(ws: &Workspace, url: &str, repo: &str) -> CliResult<Remote> {
        Ok(Remote {
            url: url.to_string(),
            repo: repo.to_string(),
            client: Mutex::new(None),
            cache: open_cache(ws)?,
            placed: AtomicUsize::new(0),
            checkpoints: Mutex::new(HashMap::new()),
            prefetched: Mutex::new(HashMap::new()),
            bar: Mutex::new(ProgressBar::hidden()),
            spare: Mutex::new(Vec::new()),
            extra: AtomicUsize::new(0),
        })
    }

    pub fn cache(&self) -> &ObjectStore {
        &self.cache
    }

    /// Run `f` with the connected client.
    pub fn with<T>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<T, scribe_server::ClientError>,
    ) -> CliResult<T> {
        let mut guard = self
            .client
            .lock()
            .map_err(|_| CliError::new("internal", "client lock poisoned"))?;
        if guard.is_none() {
            *guard = Some(connect(&self.url, false)?);
        }
        let c = guard.as_mut().expect("connected just above");
        Ok(f(c)?)
    }

    /// Run `f` on a connection no other thread is using: the main one if
    /// it is free, else an idle extra one, else a new one (up to
    /// [`EXTRA_CONNECTIONS`]; past that, wait for the main one). A
    /// connection that failed is dropped, not reused. In-process, always
    /// the main one.
    pub fn with_free<T>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<T, scribe_server::ClientError>,
    ) -> CliResult<T> {
        if let Ok(mut guard) = self.client.try_lock() {
            if guard.is_none() {
                *guard = Some(connect(&self.url, false)?);
            }
            let c = guard.as_mut().expect("connected just above");
            return Ok(f(c)?);
        }
        let idle = self.spare.lock().ok().and_then(|mut v| v.pop());
        let client = match idle {
            Some(c) => Some(c),
            None => {
                let slot = self
                    .extra
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                        (n < EXTRA_CONNECTIONS).then_some(n + 1)
                    })
                    .is_ok();
                // Refused (the server is at its connection limit) or
                // in-process: the slot stays taken and this thread waits
                // for the main connection.
                if slot {
                    self.usable_extra_connection()
                } else {
                    None
                }
            }
        };
        let Some(mut c) = client else {
            return self.with(f);
        };
        match f(&mut c) {
            Ok(v) => {
                if let Ok(mut spare) = self.spare.lock() {
                    spare.push(c);
                }
                Ok(v)
            }
            Err(e) => {
                self.extra.fetch_sub(1, Ordering::SeqCst);
                Err(e.into())
            }
        }
    }

    /// An extra connection that answered a `Status` request, or `None`
    /// (in-process, cannot connect, or refused: a server at its
    /// connection limit accepts the handshake and answers `busy`). A
    /// transfer then uses fewer connections; it never fails for want of
    /// an extra one.
    pub fn usable_extra_connection(&self) -> Option<Client> {
        let mut c = self.extra_connection()?.ok()?;
        c.status().ok()?;
        Some(c)
    }

    /// Another connection to the same server, for parallel transfers;
    /// `None` on the in-process transport (one service per data root).
    pub fn extra_connection(&self) -> Option<CliResult<Client>> {
        match parse_url(&self.url) {
            Ok(Target::Tcp { .. }) => Some(connect(&self.url, false)),
            _ => None,
        }
    }

    /// A manifest's payload, from the cache or downloaded (verified).
    ///
    /// Downloaded manifests are not added to the cache: a durable cache
    /// publication per synced file cost two flushes each, and the server
    /// can always answer again (submit only needs the manifests it froze).
    pub fn manifest(&self, id: ObjectId) -> CliResult<Vec<u8>> {
        if let Some(b) = self.prefetched(&id) {
            return Ok(b.to_vec());
        }
        if self.cache.contains(&id)? {
            return Ok(self.cache.get(&id)?);
        }
        let repo = self.repo.clone();
        self.with(|c| c.download(&repo, id))
    }

    fn prefetched(&self, id: &ObjectId) -> Option<Arc<Vec<u8>>> {
        self.prefetched.lock().ok()?.get(id).cloned()
    }

    /// Fetch the manifests of `targets` and the chunks of their small
    /// files (at most [`PREFETCH_BUDGET`] bytes) that the cache lacks, in
    /// `ObjectGetMany` round trips; replaces the previous batch's objects.
    fn prefetch_batch(&self, targets: &[BaselineRecord]) -> CliResult<()> {
        let mut held = self
            .prefetched
            .lock()
            .map_err(|_| CliError::new("internal", "prefetch lock poisoned"))?;
        held.clear();
        drop(held);
        let mut seen = std::collections::HashSet::new();
        let mut want = Vec::new();
        for t in targets {
            let id = ObjectId::manifest(t.manifest);
            if seen.insert(id) && !self.cache.contains(&id)? {
                want.push(id);
            }
        }
        let repo = self.repo.clone();
        let mut got = if want.is_empty() {
            Vec::new()
        } else {
            self.with(|c| c.download_many(&repo, &want))?
        };
        let mut chunks = Vec::new();
        let mut budget = PREFETCH_BUDGET;
        for t in targets.iter().filter(|t| t.size <= PREFETCH_FILE_BYTES) {
            if t.size > budget {
                continue;
            }
            let mid = ObjectId::manifest(t.manifest);
            let bytes = match got.iter().find(|(id, _)| *id == mid) {
                Some((_, b)) => b.clone(),
                None => self.cache.get(&mid)?,
            };
            let m = ManifestRef::decode(&bytes)?;
            for c in m.chunks() {
                let oid = ObjectId::chunk(c.id);
                if seen.insert(oid) && !self.cache.contains(&oid)? {
                    chunks.push(oid);
                    budget = budget.saturating_sub(u64::from(c.length));
                }
            }
        }
        if !chunks.is_empty() {
            got.extend(self.with(|c| c.download_many(&repo, &chunks))?);
        }
        let mut held = self
            .prefetched
            .lock()
            .map_err(|_| CliError::new("internal", "prefetch lock poisoned"))?;
        for (id, b) in got {
            held.insert(id, Arc::new(b));
        }
        Ok(())
    }

    /// Write the bytes of `target` to `dest`, verified, not flushed.
    fn write_file(&self, target: &BaselineRecord, dest: &Path) -> CliResult<()> {
        let bytes = self.manifest(ObjectId::manifest(target.manifest))?;
        let m = ManifestRef::decode(&bytes)?;
        let file = std::fs::File::create(dest)?;
        let mut w = HashingWriter {
            out: std::io::BufWriter::with_capacity(1 << 20, file),
            hasher: blake3::Hasher::new(),
            written: 0,
        };
        for c in m.chunks() {
            let oid = ObjectId::chunk(c.id);
            if let Some(data) = self.prefetched(&oid) {
                w.write_all(&data)?;
            } else if self.cache.contains(&oid)? {
                let data = self.cache.get(&oid)?;
                w.write_all(&data)?;
            } else {
                let repo = self.repo.clone();
                self.with_free(|cl| cl.download_to(&repo, oid, &mut w))?;
            }
            if let Ok(bar) = self.bar.lock() {
                bar.inc(u64::from(c.length));
            }
        }
        let content = FileContentId(*w.hasher.finalize().as_bytes());
        if content != target.content || w.written != target.size {
            return Err(CliError::new(
                "corrupt",
                format!(
                    "reconstructed bytes hash to {} ({} bytes), expected {} ({} bytes)",
                    content.to_hex(),
                    w.written,
                    target.content.to_hex(),
                    target.size
                ),
            ));
        }
        w.out
            .into_inner()
            .map_err(|e| CliError::new("io", e.to_string()))?;
        Ok(())
    }
}

struct HashingWriter<W: Write> {
    out: W,
    hasher: blake3::Hasher,
    written: u64,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        if n >= 128 * 1024 {
            self.hasher.update_rayon(&buf[..n]);
        } else {
            self.hasher.update(&buf[..n]);
        }
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

impl Materializer for Remote {
    fn materialize(&self, _path: &str, target: &BaselineRecord, dest: &Path) -> Result<(), String> {
        self.write_file(target, dest).map_err(|e| e.message)?;
        scribe_workspace::platform::flush_file(dest)
            .map_err(|e| format!("flushing {}: {e}", dest.display()))
    }

    fn write_unflushed(
        &self,
        _path: &str,
        target: &BaselineRecord,
        dest: &Path,
    ) -> Result<(), String> {
        self.write_file(target, dest).map_err(|e| e.message)
    }

    fn prefetch(&self, targets: &[BaselineRecord]) -> Result<(), String> {
        self.prefetch_batch(targets).map_err(|e| e.message)
    }

    fn checkpoint(&self, name: &str) {
        let n = match self.checkpoints.lock() {
            Ok(mut m) => {
                let n = m.entry(name.to_string()).or_insert(0);
                *n += 1;
                *n
            }
            Err(_) => return,
        };
        if n == 1 {
            crash_point(name);
        }
        crash_count(name, n);
    }

    fn placed(&self, _path: &str) {
        let n = self.placed.fetch_add(1, Ordering::SeqCst) + 1;
        crash_count("sync-after", n);
        slow();
    }
}

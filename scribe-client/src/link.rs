//! The link from a workspace to its server: connections (one main, up to
//! [`EXTRA_CONNECTIONS`] more for parallel downloads), the workspace cache,
//! batch prefetching, and the [`Materializer`] that writes what a sync
//! places, verified.

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use scribe_format::echo::echo;
use scribe_format::manifest::ManifestRef;
use scribe_format::{Concern, ErrorCode, FileContentId, ObjectId, RepositoryId};
use scribe_objects::ObjectStore;
use scribe_server::Service;
use scribe_workspace::records::BaselineRecord;
use scribe_workspace::sync::{Materializer, WriteError};
use scribe_workspace::Workspace;

use crate::client::{Client, ClientError};
use crate::error::{Error, Result};
use crate::progress::Task;
use crate::url::ServerUrl;
use crate::Context;

/// Connect to `url`. With `create`, a path URL whose directory does not
/// hold a data root yet gets a new one (embedded use).
pub fn connect(url: &str, create: bool, ctx: &Context) -> Result<Client> {
    if let ServerUrl::Path(p) = ServerUrl::parse(url)? {
        let fresh = !p.join("SCRIBE_FORMAT").exists()
            && std::fs::read_dir(&p).map_or(true, |mut d| d.next().is_none());
        if fresh {
            if !create {
                return Err(Error::new(
                    ErrorCode::NotFound,
                    format!("{} is not a Scribe data root", p.display()),
                )
                .concerning(scribe_format::Concern::DataRoot));
            }
            let svc = Service::create(&p).map_err(ClientError::from)?;
            return Ok(Client::in_process(svc));
        }
    }
    Ok(crate::client::connect(url, &ctx.options)?)
}

/// Refuse when the server's repository named `name` is another
/// repository than a workspace's, `id` (the name was given to a new
/// repository after a rename or a deletion), before anything is read from
/// or sent to it: a workspace asks by name, and would otherwise sync
/// another history or submit into it. When the server holds `id` under
/// another name, the error names it and `scribe workspace set-server`
/// ([`Concern::RepositoryRenamed`]). A server that cannot list its
/// repositories, or has none of that name, is left to the request that
/// follows (a `not_found` is explained by [`ServerLink::renamed`]).
pub fn check_repository(c: &mut Client, name: &str, id: RepositoryId, url: &str) -> Result<()> {
    let Ok(list) = c.repo_list() else {
        return Ok(());
    };
    let Some(there) = list.iter().find(|r| r.name == name) else {
        return Ok(());
    };
    if there.id == id {
        return Ok(());
    }
    Err(match list.iter().find(|r| r.id == id) {
        Some(now) => Error::new(
            ErrorCode::NotFound,
            format!(
                "the server's repository {} is another repository now (id {}): this workspace's \
                 repository (id {id}) is named {} there; nothing was asked of the other one",
                echo(name),
                there.id,
                echo(&now.name)
            ),
        )
        .concerning(Concern::RepositoryRenamed {
            name: now.name.clone(),
            url: url.to_owned(),
        }),
        None => Error::new(
            ErrorCode::NotFound,
            format!(
                "the server's repository {} is another repository (id {}) than this workspace's \
                 (id {id}), which the server holds under no name",
                echo(name),
                there.id
            ),
        )
        .concerning(Concern::RepositoryReplaced),
    })
}

/// The server end of a workspace, connected on first use.
pub struct ServerLink {
    url: String,
    repo: String,
    /// The workspace's repository id: a `not_found` is checked against it
    /// (a repository renamed on the server, [`ServerLink::explain`]).
    repository_id: Option<RepositoryId>,
    ctx: Context,
    client: Mutex<Option<Client>>,
    /// Whether the server's repository of this name was found to be the
    /// workspace's (same id) on this link ([`ServerLink::check_identity`]).
    identity_checked: std::sync::atomic::AtomicBool,
    cache: ObjectStore,
    placed: AtomicUsize,
    /// Objects fetched together for the current sync batch.
    prefetched: Mutex<HashMap<ObjectId, Arc<Vec<u8>>>>,
    /// Idle extra connections for parallel downloads (TCP only).
    spare: Mutex<Vec<Client>>,
    /// Extra connections opened so far (at most [`EXTRA_CONNECTIONS`]).
    extra: AtomicUsize,
    /// Chunks after the first of a file fetched so far (crash tests).
    chunks_fetched: AtomicUsize,
}

/// Most extra connections a sync opens, so files written in parallel
/// download in parallel (the server reads and verifies one object while
/// the client hashes and writes another).
const EXTRA_CONNECTIONS: usize = 3;

/// Files up to this size have their chunks fetched with the batch.
const PREFETCH_FILE_BYTES: u64 = 4 << 20;
/// Most chunk bytes held in memory for one batch.
const PREFETCH_BUDGET: u64 = 64 << 20;

impl ServerLink {
    /// The link of `ws` to the server at `url`, repository `repo`.
    pub fn new(ws: &Workspace, url: &str, repo: &str, ctx: &Context) -> Result<ServerLink> {
        Ok(ServerLink {
            url: url.to_string(),
            repo: repo.to_string(),
            repository_id: None,
            ctx: ctx.clone(),
            client: Mutex::new(None),
            identity_checked: std::sync::atomic::AtomicBool::new(false),
            cache: ws.cache()?,
            placed: AtomicUsize::new(0),
            prefetched: Mutex::new(HashMap::new()),
            spare: Mutex::new(Vec::new()),
            extra: AtomicUsize::new(0),
            chunks_fetched: AtomicUsize::new(0),
        })
    }

    /// The same link, knowing the workspace's repository id.
    pub fn with_repository_id(mut self, id: RepositoryId) -> ServerLink {
        self.repository_id = Some(id);
        self
    }

    /// The repository's name on the server.
    pub fn repo(&self) -> &str {
        &self.repo
    }

    /// The error for a repository this link names that the server lacks:
    /// when the server holds the workspace's repository (same id) under
    /// another name, a `not_found` that says so and names the command that
    /// follows the rename ([`Concern::RepositoryRenamed`]); else `None`.
    pub fn renamed(&self, c: &mut Client) -> Option<Error> {
        let id = self.repository_id?;
        let list = c.repo_list().ok()?;
        if list.iter().any(|r| r.name == self.repo) {
            return None;
        }
        let now = list.iter().find(|r| r.id == id)?;
        Some(
            Error::new(
                ErrorCode::NotFound,
                format!(
                    "the server has no repository {}: this workspace's repository (id {id}) is \
                     named {} there now",
                    echo(&self.repo),
                    echo(&now.name)
                ),
            )
            .concerning(Concern::RepositoryRenamed {
                name: now.name.clone(),
                url: self.url.clone(),
            }),
        )
    }

    /// Before the first request of a workspace's link: refuse when the
    /// server's repository of the workspace's name is another repository
    /// ([`check_repository`]). Asked once per link.
    fn check_identity(&self, c: &mut Client) -> Result<()> {
        let Some(id) = self.repository_id else {
            return Ok(());
        };
        if self.identity_checked.load(Ordering::SeqCst) {
            return Ok(());
        }
        check_repository(c, &self.repo, id, &self.url)?;
        self.identity_checked.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// `e`, or the rename it comes from ([`ServerLink::renamed`]).
    fn explain(&self, c: &mut Client, e: ClientError) -> Error {
        if e.code() == ErrorCode::NotFound {
            if let Some(renamed) = self.renamed(c) {
                return renamed;
            }
        }
        e.into()
    }

    /// The server URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// What the workflows of this link run with.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    pub fn cache(&self) -> &ObjectStore {
        &self.cache
    }

    /// Run `f` with the connected client.
    pub fn with<T>(&self, f: impl FnOnce(&mut Client) -> Result<T, ClientError>) -> Result<T> {
        let mut guard = self
            .client
            .lock()
            .map_err(|_| Error::new(ErrorCode::Internal, "client lock poisoned"))?;
        self.on_main(&mut guard, f)
    }

    /// Run `f` on the main connection held by `slot`, connecting first
    /// when there is none. A connection an exchange broke is dropped: the
    /// next call connects again (an error a caller set aside, such as a
    /// failed prefetch, must not leave every later call "failed earlier").
    fn on_main<T>(
        &self,
        slot: &mut Option<Client>,
        f: impl FnOnce(&mut Client) -> Result<T, ClientError>,
    ) -> Result<T> {
        if slot.is_none() {
            let mut c = connect(&self.url, false, &self.ctx)?;
            self.check_identity(&mut c)?;
            *slot = Some(c);
        }
        let c = slot.as_mut().expect("connected just above");
        let r = f(c).map_err(|e| self.explain(c, e));
        if c.is_broken() {
            *slot = None;
        }
        r
    }

    /// Run `f` on a connection no other thread is using: the main one if
    /// it is free, else an idle extra one, else a new one (up to
    /// [`EXTRA_CONNECTIONS`]; past that, wait for the main one). A
    /// connection that failed is dropped, not reused. In-process, always
    /// the main one.
    pub fn with_free<T>(&self, f: impl FnOnce(&mut Client) -> Result<T, ClientError>) -> Result<T> {
        if let Ok(mut guard) = self.client.try_lock() {
            return self.on_main(&mut guard, f);
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
                Err(self.explain(&mut c, e))
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
    pub fn extra_connection(&self) -> Option<Result<Client>> {
        match ServerUrl::parse(&self.url) {
            Ok(ServerUrl::Tcp { .. }) => Some(connect(&self.url, false, &self.ctx)),
            _ => None,
        }
    }

    /// A manifest's payload, from the cache or downloaded (verified).
    ///
    /// Downloaded manifests are not added to the cache: a durable cache
    /// publication per synced file cost two flushes each, and the server
    /// can always answer again (submit only needs the manifests it froze).
    pub fn manifest(&self, id: ObjectId) -> Result<Vec<u8>> {
        if let Some(b) = self.prefetched(&id) {
            return Ok(b.to_vec());
        }
        if let Some(b) = self.cached(&id) {
            return Ok(b);
        }
        let repo = self.repo.clone();
        self.with(|c| c.download(&repo, id))
    }

    /// Whether the workspace cache holds `id` (a cache it cannot read
    /// holds nothing: the server answers instead).
    fn in_cache(&self, id: &ObjectId) -> bool {
        self.cache.contains(id).unwrap_or(false)
    }

    /// `id` from the workspace cache, verified as the store reads it; a
    /// copy the cache cannot read or verify (a damaged pack, locator or
    /// entry) is a miss, so the server, which holds every accepted object,
    /// answers instead of the command failing on a disposable copy.
    fn cached(&self, id: &ObjectId) -> Option<Vec<u8>> {
        if !self.in_cache(id) {
            return None;
        }
        match self.cache.get(id) {
            Ok(b) => Some(b),
            Err(e) => {
                self.ctx
                    .progress
                    .note(crate::progress::Note::CacheCopyUnreadable {
                        id: *id,
                        why: e.to_string(),
                    });
                None
            }
        }
    }

    fn prefetched(&self, id: &ObjectId) -> Option<Arc<Vec<u8>>> {
        self.prefetched.lock().ok()?.get(id).cloned()
    }

    /// Fetch the manifests of `targets` and the chunks of their small
    /// files (at most [`PREFETCH_BUDGET`] bytes) that the cache lacks, in
    /// `ObjectGetMany` round trips; replaces the previous batch's objects.
    fn prefetch_batch(&self, targets: &[BaselineRecord]) -> Result<()> {
        let mut held = self
            .prefetched
            .lock()
            .map_err(|_| Error::new(ErrorCode::Internal, "prefetch lock poisoned"))?;
        held.clear();
        drop(held);
        let mut seen = std::collections::HashSet::new();
        let mut want = Vec::new();
        for t in targets {
            let id = ObjectId::manifest(t.manifest);
            if seen.insert(id) && self.cached(&id).is_none() {
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
                None => match self.cached(&mid) {
                    Some(b) => b,
                    None => self.with(|c| c.download(&repo, mid))?,
                },
            };
            let m = ManifestRef::decode(&bytes)?;
            for c in m.chunks() {
                let oid = ObjectId::chunk(c.id);
                if seen.insert(oid) && !self.in_cache(&oid) {
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
            .map_err(|_| Error::new(ErrorCode::Internal, "prefetch lock poisoned"))?;
        for (id, b) in got {
            held.insert(id, Arc::new(b));
        }
        Ok(())
    }

    /// Write the bytes of `target` into `file`, verified, not flushed.
    /// With `resume`, `file` may already hold bytes an interrupted earlier
    /// run wrote (#18 item 4): the leading whole chunks that still hash to
    /// their ids are kept, the file is cut after them, and only the rest
    /// is fetched. Returns the bytes kept.
    fn write_file(
        &self,
        target: &BaselineRecord,
        file: &mut std::fs::File,
        resume: bool,
    ) -> Result<u64> {
        use std::io::Seek;
        let bytes = self.manifest(ObjectId::manifest(target.manifest))?;
        let m = ManifestRef::decode(&bytes)?;
        let mut hasher = blake3::Hasher::new();
        let (kept, kept_chunks) = if resume {
            verified_prefix(&m, file, &mut hasher)?
        } else {
            (0, 0)
        };
        file.set_len(kept)?;
        file.seek(std::io::SeekFrom::Start(kept))?;
        if kept > 0 {
            self.ctx.progress.advance(Task::Sync, kept);
        }
        // A file that is one chunk whose id is the file's content id (both
        // are BLAKE3 of the same bytes, format section 1) is checked by
        // the chunk's own check, which every source below makes (a
        // prefetched reply, the cache's reader, a streamed download):
        // hashing the file too would hash the same bytes twice (a fresh
        // workspace of files up to a few MiB is mostly such files).
        let chunk_is_file = !resume
            && m.chunk_count() == 1
            && m.chunks()
                .next()
                .is_some_and(|c| c.id.0 == target.content.0 && u64::from(c.length) == target.size);
        let mut w = HashingWriter {
            out: std::io::BufWriter::with_capacity(1 << 20, file),
            hasher: (!chunk_is_file).then_some(hasher),
            written: kept,
        };
        for (n, c) in m.chunks().skip(kept_chunks).enumerate() {
            if n > 0 {
                // A crash test's kill inside one large file (the n-th
                // chunk fetched by this process, counted over the run).
                w.flush()?;
                let k = self.chunks_fetched.fetch_add(1, Ordering::SeqCst) + 1;
                self.ctx.failpoints.nth("sync-chunk", k);
            }
            let oid = ObjectId::chunk(c.id);
            if let Some(data) = self.prefetched(&oid) {
                w.write_all(&data)?;
            } else if let Some(data) = self.cached(&oid) {
                w.write_all(&data)?;
            } else {
                let repo = self.repo.clone();
                self.with_free(|cl| cl.download_to(&repo, oid, &mut w))?;
            }
            self.ctx.progress.advance(Task::Sync, u64::from(c.length));
        }
        let content = w.content().unwrap_or(target.content);
        if content != target.content || w.written != target.size {
            return Err(Error::new(
                ErrorCode::Corrupt,
                format!(
                    "reconstructed bytes hash to {} ({} bytes), expected {} ({} bytes)",
                    content.to_hex(),
                    w.written,
                    target.content.to_hex(),
                    target.size
                ),
            ));
        }
        w.out.into_inner().map_err(|e| e.into_error())?;
        Ok(kept)
    }
}

/// How much of `file` is a verified prefix of the content `m` describes:
/// whole chunks read from the start that hash to their ids, fed to
/// `hasher`. Returns (bytes, chunks). A short or differing chunk ends the
/// prefix; nothing after it is trusted.
fn verified_prefix(
    m: &ManifestRef<'_>,
    file: &mut std::fs::File,
    hasher: &mut blake3::Hasher,
) -> Result<(u64, usize)> {
    use std::io::{Read, Seek};
    let have = file.metadata()?.len();
    file.seek(std::io::SeekFrom::Start(0))?;
    let mut reader = std::io::BufReader::with_capacity(1 << 20, &*file);
    let mut buf = Vec::new();
    let (mut kept, mut chunks) = (0u64, 0usize);
    for c in m.chunks() {
        let len = u64::from(c.length);
        if kept + len > have {
            break;
        }
        buf.resize(c.length as usize, 0);
        reader.read_exact(&mut buf)?;
        if scribe_format::ChunkId::of(&buf) != c.id {
            break;
        }
        if buf.len() >= 128 * 1024 {
            hasher.update_rayon(&buf);
        } else {
            hasher.update(&buf);
        }
        kept += len;
        chunks += 1;
    }
    Ok((kept, chunks))
}

impl ServerLink {
    /// Stream the bytes of the file whose manifest is `manifest` into
    /// `out` chunk by chunk (cache first, then the server), then check
    /// that they hash to `content` and number `size` (`corrupt` if not:
    /// the bytes were written by then). For `print`, `diff`, `resolve
    /// --show` (#18).
    pub fn write_content(
        &self,
        manifest: scribe_format::ManifestId,
        content: FileContentId,
        size: u64,
        out: &mut dyn Write,
    ) -> Result<()> {
        let bytes = self.manifest(ObjectId::manifest(manifest))?;
        let m = ManifestRef::decode(&bytes)?;
        let mut w = HashingWriter {
            out,
            hasher: Some(blake3::Hasher::new()),
            written: 0,
        };
        for c in m.chunks() {
            let oid = ObjectId::chunk(c.id);
            if let Some(data) = self.cached(&oid) {
                w.write_all(&data)?;
            } else {
                let repo = self.repo.clone();
                self.with(|cl| cl.download_to(&repo, oid, &mut w))?;
            }
        }
        w.flush()?;
        // Always hashed here (`hasher` is set above).
        let got = w.content().unwrap_or(FileContentId([0; 32]));
        if got != content || w.written != size {
            return Err(Error::new(
                ErrorCode::Corrupt,
                format!(
                    "the bytes hash to {} ({} bytes), expected {} ({} bytes)",
                    got.to_hex(),
                    w.written,
                    content.to_hex(),
                    size
                ),
            ));
        }
        Ok(())
    }
}

struct HashingWriter<W: Write> {
    out: W,
    /// `None`: the bytes are checked otherwise (counted only).
    hasher: Option<blake3::Hasher>,
    written: u64,
}

impl<W: Write> HashingWriter<W> {
    /// The content id of what was written, when it was hashed.
    fn content(&self) -> Option<FileContentId> {
        self.hasher
            .as_ref()
            .map(|h| FileContentId(*h.finalize().as_bytes()))
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        match &mut self.hasher {
            Some(h) if n >= 128 * 1024 => {
                h.update_rayon(&buf[..n]);
            }
            Some(h) => {
                h.update(&buf[..n]);
            }
            None => {}
        }
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

impl Materializer for ServerLink {
    fn write_to(
        &self,
        _path: &str,
        target: &BaselineRecord,
        out: &mut std::fs::File,
    ) -> Result<(), WriteError> {
        self.write_file(target, out, false)
            .map(|_| ())
            .map_err(|e| write_error(&e))
    }

    fn resume_to(
        &self,
        _path: &str,
        target: &BaselineRecord,
        out: &mut std::fs::File,
    ) -> Result<u64, WriteError> {
        self.write_file(target, out, true)
            .map_err(|e| write_error(&e))
    }

    fn prefetch(&self, targets: &[BaselineRecord]) -> Result<(), WriteError> {
        // The batch is only a speed-up: an object it cannot fetch (damaged
        // on the server, gone) is fetched again by the file that needs it,
        // whose error then names that file, not the batch's first one.
        if self.prefetch_batch(targets).is_err() {
            if let Ok(mut held) = self.prefetched.lock() {
                held.clear();
            }
        }
        Ok(())
    }

    fn checkpoint(&self, name: &str) {
        self.ctx.failpoints.pass(name);
    }

    fn placed(&self, _path: &str) {
        let n = self.placed.fetch_add(1, Ordering::SeqCst) + 1;
        self.ctx.failpoints.nth("sync-after", n);
        self.ctx.failpoints.pause();
    }
}

/// `e` as a sync's write failure: its code (`io` for this machine's disk,
/// `unreachable` for a lost server, ...), whether the disk is full, and
/// its words with their causes.
fn write_error(e: &Error) -> WriteError {
    WriteError {
        code: e.code(),
        detail: with_causes(e),
        disk_full: e.concern() == Some(&scribe_format::Concern::DiskFull),
    }
}

/// `e` and every cause below it, one after another: a sync's "could not
/// write PATH" then says why (a full disk's "No space left on device").
fn with_causes(e: &Error) -> String {
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let line = c.to_string();
        if !text.ends_with(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        cause = c.source();
    }
    text
}

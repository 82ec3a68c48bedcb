//! [`ScribeStore`]: the [`Store`] over Scribe's client library. An agent
//! root is one repository's main branch; versions are change numbers; a
//! publication is one submit whose operation id the facade derives from
//! the request, uploaded by a workspace registered for the bridge.

use scribe_client::failpoints::Failpoints;
use scribe_client::{Client, ClientOptions};
use scribe_format::changeset::{ChangeSet, Entry, FileState, Mode};
use scribe_format::manifest::{ChunkRef, Manifest};
use scribe_format::wire::message as m;
use scribe_format::wire::{Bytes, Text};
use scribe_format::{
    BranchId, ChangeSetId, ChunkId, ErrorCode, FileContentId, ManifestId, ObjectId, OperationId,
    WorkspaceId,
};

use crate::error::WbError;
use crate::store::{
    BodyRef, DirPage, Edit, NewBody, Publish, Published, Refusal, Row, Store, UploadedFile,
    VersionInfo,
};

/// A small publication's objects are all carried in its `SubmitInline`,
/// without asking the server which it lacks, up to this many bytes.
const CARRY_ALL_BYTES: usize = 64 << 10;
/// An append to a body up to this size reads it whole and chunks it
/// again; a larger one reuses its chunks ([`Store::appended`]).
const APPEND_REREAD_BYTES: u64 = 8 << 20;
/// The most object bytes sent in one `ObjectPutMany` (below the 8 MiB frame).
const PUT_MANY_BYTES: usize = 4 << 20;
/// Upload connections of a streamed collect over the network (what
/// `scribe submit` opens; three and four measured no faster).
const UPLOAD_LANES: usize = 2;
/// Connections [`ScribeStore::version_infos`] uses over the network, from
/// this many versions on.
const DESCRIBE_LANES: usize = 4;
const DESCRIBE_LANES_FROM: usize = 64;
/// The most bytes asked for in one `ObjectGet`.
const GET_BYTES: u32 = 4 << 20;

/// A Scribe repository as a Workbench agent root.
pub struct ScribeStore {
    conn: Redial,
    repo: String,
    branch: BranchId,
    workspace: WorkspaceId,
    author: String,
    /// Test builds only: named points where the process kills itself
    /// (`nokv-after-stage`, `nokv-after-submit`; see the crash tests).
    failpoints: Failpoints,
}

fn client_error(e: scribe_client::ClientError) -> WbError {
    use scribe_client::ClientError as E;
    let code = e.code();
    match (&e, code) {
        // The server's certificate cannot be checked (no CA, the wrong
        // one, an unreadable file): a setup failure, not a transient one.
        (E::Tls(_), _) => WbError::new(
            "not_configured",
            format!(
                "cannot trust the server: {e} (set SCRIBE_CA_FILE or sign in with `scribe login`)"
            ),
        ),
        (E::Url { .. }, _) => WbError::new("not_configured", e.to_string()),
        (E::Open(o), _) => open_error(o),
        (_, ErrorCode::Unreachable | ErrorCode::Busy | ErrorCode::ServerBusy)
        | (_, ErrorCode::TierUnavailable | ErrorCode::AuthUnavailable) => {
            WbError::new("unavailable", e.to_string())
        }
        (_, ErrorCode::Forbidden) => WbError::new("forbidden", e.to_string()),
        (_, ErrorCode::Unauthenticated) => WbError::new("unauthenticated", e.to_string()),
        _ => WbError::new("storage", format!("{} ({})", e, code.name())),
    }
}

/// A data root (a path `--server`) that cannot be opened, without its
/// files' paths.
fn open_error(e: &scribe_server::OpenError) -> WbError {
    match e {
        scribe_server::OpenError::InUse { pid, .. } => WbError::new(
            "unavailable",
            match pid {
                Some(p) => format!("the data root is in use by another process (PID {p})"),
                None => "the data root is in use by another process".to_string(),
            },
        ),
        other => WbError::new(
            "storage",
            format!("the data root cannot be opened ({})", other.code().name()),
        ),
    }
}

/// The store's connection. One that failed in transport (the server went
/// away, the stream was cut) is never used again: the next request
/// connects again, once (over the network; a data-root path has no
/// connection to lose). The failed request itself is not repeated here:
/// its outcome is unknown, and only the facade knows whether it is safe
/// to ask again (a retried publication is exact by its request identity).
struct Redial {
    client: Client,
    /// The last request failed in transport.
    broken: bool,
    /// The server's URL and options when it is reached over the network
    /// (a streaming upload opens a second connection as `scribe submit`
    /// does); `None` for a data-root path or a client handed in.
    network: Option<(String, ClientOptions)>,
}

impl Redial {
    /// The client, connected again first when the last request broke the
    /// connection.
    fn client(&mut self) -> Result<&mut Client, WbError> {
        if self.broken {
            if let Some((url, opts)) = &self.network {
                self.client = scribe_client::connect(url, opts).map_err(client_error)?;
                self.broken = false;
            }
        }
        Ok(&mut self.client)
    }

    /// `e` as the facade's error; a transport failure marks the
    /// connection broken.
    fn lost(&mut self, e: scribe_client::ClientError) -> WbError {
        use scribe_client::ClientError as E;
        if matches!(e, E::Io { .. } | E::Protocol(_) | E::Tls(_)) {
            self.broken = true;
        }
        client_error(e)
    }
}

impl ScribeStore {
    /// Connect to `url` and open repository `repo` as the agent root; the
    /// bridge's workspace (id derived from the repository id and `agent`)
    /// is registered once (idempotently) and submits as `agent`.
    pub fn open(
        url: &str,
        repo: &str,
        agent: &str,
        opts: &ClientOptions,
    ) -> Result<ScribeStore, WbError> {
        if let Ok(scribe_client::ServerUrl::Path(p)) = scribe_client::ServerUrl::parse(url) {
            // Not a data root (absent, empty, something else): said so,
            // rather than as a file missing inside it.
            if !p.join("SCRIBE_FORMAT").is_file() {
                return Err(WbError::new(
                    "agent_root_not_found",
                    "the --server path is not a Scribe data root",
                ));
            }
        }
        let client = scribe_client::connect(url, opts).map_err(client_error)?;
        let mut store = ScribeStore::over(client, repo, agent)?;
        if matches!(
            scribe_client::ServerUrl::parse(url),
            Ok(scribe_client::ServerUrl::Tcp { .. })
        ) {
            store.conn.network = Some((url.to_string(), opts.clone()));
        }
        Ok(store)
    }

    /// The same over an open client.
    pub fn over(mut client: Client, repo: &str, agent: &str) -> Result<ScribeStore, WbError> {
        let info = client
            .repo_list()
            .map_err(client_error)?
            .into_iter()
            .find(|r| r.name == repo)
            .ok_or_else(|| {
                WbError::new(
                    "agent_root_not_found",
                    format!("the server has no repository named {repo:?}"),
                )
            })?;
        let mut h = blake3::Hasher::new_derive_key("nokv-workbench bridge workspace v1");
        h.update(&info.id.0);
        h.update(agent.as_bytes());
        let mut ws = [0u8; 16];
        ws.copy_from_slice(&h.finalize().as_bytes()[..16]);
        let workspace = WorkspaceId(ws);
        client
            .workspace_register(m::WorkspaceRegister {
                repo: repo.into(),
                workspace,
                branch: String::new(),
                view: vec![],
                label: format!("nokv:{agent}"),
                tags: vec!["nokv-bridge".into()],
            })
            .map_err(client_error)?;
        Ok(ScribeStore {
            conn: Redial {
                client,
                broken: false,
                network: None,
            },
            repo: repo.into(),
            branch: info.main_branch,
            workspace,
            author: agent.into(),
            failpoints: Failpoints::default(),
        })
    }

    /// Kill the process at the configured failpoint (a test build's
    /// crash tests; a build without the feature has none).
    pub fn with_failpoints(mut self, failpoints: Failpoints) -> ScribeStore {
        self.failpoints = failpoints;
        self
    }

    fn row(e: m::TreeEntry) -> Option<Row> {
        let s = e.state?;
        Some(Row {
            path: e.path,
            generation: e.change,
            body: BodyRef {
                handle: s.manifest.0.to_vec(),
                content: s.content.0,
                size: s.size,
            },
        })
    }

    fn get_object(&mut self, id: ObjectId, offset: u64, len: u64) -> Result<Vec<u8>, WbError> {
        let mut out = Vec::with_capacity(len.min(u64::from(GET_BYTES)) as usize);
        while (out.len() as u64) < len {
            let want = (len - out.len() as u64).min(u64::from(GET_BYTES)) as u32;
            let d = self
                .conn
                .client()?
                .object_get(m::ObjectGet {
                    repo: self.repo.clone(),
                    id,
                    offset: offset + out.len() as u64,
                    max_len: want,
                })
                .map_err(|e| self.conn.lost(e))?;
            if d.data.0.is_empty() {
                break;
            }
            out.extend_from_slice(&d.data.0);
            if offset + out.len() as u64 >= d.total_len {
                break;
            }
        }
        Ok(out)
    }

    fn manifest(&mut self, body: &BodyRef) -> Result<Manifest, WbError> {
        let id = manifest_id(body)?;
        let bytes = self.get_object(ObjectId::manifest(id), 0, u64::MAX)?;
        Manifest::decode(&bytes).map_err(|e| WbError::new("storage", format!("manifest: {e}")))
    }
}

/// The publication that made `version` (one `Describe`).
fn describe(
    client: &mut Client,
    repo: &str,
    version: u64,
) -> Result<VersionInfo, scribe_client::ClientError> {
    let d = client.describe(m::Describe {
        repo: repo.to_string(),
        change: version,
        after: String::new(),
        limit: 1,
    })?;
    Ok(VersionInfo {
        version: d.commit.change,
        operation: d.commit.operation.0,
        message: d.commit.message.0,
        timestamp_ms: d.commit.timestamp_ms,
        author: d.commit.author,
    })
}

fn manifest_id(body: &BodyRef) -> Result<ManifestId, WbError> {
    let arr: [u8; 32] = body
        .handle
        .as_slice()
        .try_into()
        .map_err(|_| WbError::new("storage", "a body handle is not a manifest id"))?;
    Ok(ManifestId(arr))
}

/// BLAKE3 of `b`, on every core when it is large.
fn hash(b: &[u8]) -> [u8; 32] {
    if b.len() >= 1 << 20 {
        *blake3::Hasher::new().update_rayon(b).finalize().as_bytes()
    } else {
        *blake3::hash(b).as_bytes()
    }
}

/// A new body's objects: chunks of profile 1 (as ranges of the body) and
/// its manifest, and its file state.
struct FileObjects {
    state: FileState,
    chunks: Vec<(ObjectId, std::ops::Range<usize>)>,
    manifest: (ObjectId, Vec<u8>),
}

fn file_objects(bytes: &[u8], known: Option<[u8; 32]>) -> Result<FileObjects, WbError> {
    let mut refs = Vec::new();
    let mut chunks = Vec::new();
    let mut pos = 0;
    for len in scribe_objects::chunk_boundaries(bytes) {
        let id = ChunkId(hash(&bytes[pos..pos + len]));
        refs.push(ChunkRef {
            id,
            length: len as u32,
        });
        chunks.push((ObjectId::chunk(id), pos..pos + len));
        pos += len;
    }
    // A body of one chunk: its content id is the chunk's (both BLAKE3 of
    // the same bytes), hashed once.
    let content = match (known, refs.as_slice()) {
        (Some(c), _) => FileContentId(c),
        (None, [one]) => FileContentId(one.id.0),
        (None, _) => FileContentId(hash(bytes)),
    };
    let manifest = scribe_objects::encode_manifest(bytes.len() as u64, &content, &refs)
        .map_err(|e| WbError::new("storage", format!("manifest: {e}")))?;
    let mid = ManifestId::of_payload(&manifest);
    Ok(FileObjects {
        state: FileState {
            manifest: mid,
            content,
            size: bytes.len() as u64,
            mode: Mode::Regular,
        },
        chunks,
        manifest: (ObjectId::manifest(mid), manifest),
    })
}

/// A new body and its BLAKE3 when the caller knows it.
type Body<'a> = (&'a [u8], Option<[u8; 32]>);

/// [`file_objects`] of every body, on two threads when there is much to
/// chunk and hash (results in the order of `bodies`).
fn all_file_objects(bodies: &[Body]) -> Result<Vec<FileObjects>, WbError> {
    let total: usize = bodies.iter().map(|b| b.0.len()).sum();
    if bodies.len() < 2 || total < 8 << 20 {
        return bodies.iter().map(|b| file_objects(b.0, b.1)).collect();
    }
    // Split where half of the bytes are.
    let mut acc = 0;
    let mid = bodies
        .iter()
        .position(|b| {
            acc += b.0.len();
            acc >= total / 2
        })
        .map_or(bodies.len() / 2, |i| (i + 1).min(bodies.len() - 1));
    let (left, right) = bodies.split_at(mid);
    std::thread::scope(|s| {
        let other = s.spawn(|| {
            right
                .iter()
                .map(|b| file_objects(b.0, b.1))
                .collect::<Vec<_>>()
        });
        let mut out: Vec<FileObjects> = left
            .iter()
            .map(|b| file_objects(b.0, b.1))
            .collect::<Result<_, _>>()?;
        for r in other.join().expect("hashing thread") {
            out.push(r?);
        }
        Ok(out)
    })
}

impl Store for ScribeStore {
    fn root_name(&self) -> String {
        self.repo.clone()
    }

    fn head(&mut self) -> Result<u64, WbError> {
        Ok(self.stat_reply(0, "")?.change)
    }

    fn stat(&mut self, at: u64, path: &str) -> Result<Option<Row>, WbError> {
        Ok(self.stat_reply(at, path)?.entry.and_then(ScribeStore::row))
    }

    fn list_dir(
        &mut self,
        at: u64,
        dir: &str,
        token: &str,
        limit: u32,
    ) -> Result<DirPage, WbError> {
        self.list_page(at, dir, token, limit, false)
    }

    fn list_files(
        &mut self,
        at: u64,
        dir: &str,
        token: &str,
        limit: u32,
    ) -> Result<DirPage, WbError> {
        self.list_page(at, dir, token, limit, true)
    }

    fn read(&mut self, body: &BodyRef, offset: u64, len: u64) -> Result<Vec<u8>, WbError> {
        self.read_range(body, offset, len)
    }

    fn publish(&mut self, p: Publish) -> Result<Published, WbError> {
        let operation = OperationId(p.operation);
        let mut t = std::time::Instant::now();
        let (cs, objects) = self.prepare(&p)?;
        // A small publication carries its objects in the submission (no
        // upload pin, one store batch with the commit envelope); a large
        // one uploads them first.
        let total: usize = objects.iter().map(|(_, d)| d.len()).sum();
        let carried = if total > PUT_MANY_BYTES {
            let ids: Vec<ObjectId> = objects.iter().map(|(id, _)| *id).collect();
            self.stage_large(operation, &ids, objects)?;
            None
        } else {
            Some(self.carried(objects, total)?)
        };
        crate::phase("publish: stage", &mut t);
        // Staged, not submitted: nothing, or only unreferenced objects.
        self.failpoints.pass("nokv-after-stage");
        let submit = m::Submit {
            repo: self.repo.clone(),
            operation,
            workspace: self.workspace,
            branch: self.branch,
            change_set: cs,
            author: self.author.clone(),
            message: Text(p.message),
            keep_locks: false,
            timestamp_ms: p.timestamp_ms,
        };
        let outcome = match carried {
            Some(objects) => self.conn.client()?.submit_inline(m::SubmitInline {
                repo: submit.repo,
                operation: submit.operation,
                workspace: submit.workspace,
                branch: submit.branch,
                change_set: submit.change_set,
                author: submit.author,
                message: submit.message,
                keep_locks: submit.keep_locks,
                timestamp_ms: submit.timestamp_ms,
                objects,
            }),
            None => self.conn.client()?.submit(submit),
        }
        .map_err(|e| self.conn.lost(e))?;
        crate::phase("publish: submit", &mut t);
        // Accepted (or refused) by the server, not yet answered.
        self.failpoints.pass("nokv-after-submit");
        if outcome.code == 0 {
            return Ok(Published::Accepted {
                version: outcome.change,
            });
        }
        let code = ErrorCode::from_number(outcome.code).unwrap_or(ErrorCode::Internal);
        let paths = outcome.paths;
        Ok(Published::Refused(match code {
            ErrorCode::BaseMismatch | ErrorCode::NotPresent => Refusal::Stale(paths),
            ErrorCode::AlreadyExists => Refusal::Exists(paths),
            ErrorCode::LockedByOther | ErrorCode::LockRequired => Refusal::Locked(paths),
            ErrorCode::PathCollision | ErrorCode::PathConflict => Refusal::Collision(paths),
            other => Refusal::Other {
                code: other.name().into(),
                detail: outcome.detail,
            },
        }))
    }

    /// Above [`APPEND_REREAD_BYTES`]: the chunks of `base` before its last
    /// one are kept (profile 1 decides a cut from the chunk and the two
    /// bytes after it, which an append does not change; the one before a
    /// last chunk of under two bytes is chunked again too), the rest and
    /// `delta` are chunked again, and the whole-body BLAKE3 is computed
    /// reading the chunks one at a time (each checked against its id, the
    /// old body against its content id). So the manifest is the one a put
    /// of the whole bytes makes, and memory holds a chunk and the tail,
    /// not the file; the file is still read once, over the connection.
    fn appended(&mut self, base: &BodyRef, delta: &[u8]) -> Result<NewBody, WbError> {
        if base.size <= APPEND_REREAD_BYTES {
            let mut bytes = self.read_range(base, 0, base.size)?;
            bytes.extend_from_slice(delta);
            return Ok(NewBody::Bytes(bytes));
        }
        let damaged = |what: String| WbError::new("storage", format!("append: {what}"));
        let manifest = self.manifest(base)?;
        if manifest.chunking_profile != scribe_format::manifest::PROFILE_FASTCDC_2020 {
            return Err(damaged(format!(
                "the body's chunking profile {} is not one this bridge chunks",
                manifest.chunking_profile
            )));
        }
        let n = manifest.chunks.len();
        let mut keep = n.saturating_sub(1);
        if keep > 0 && manifest.chunks[n - 1].length < 2 {
            keep -= 1;
        }
        let mut hasher = blake3::Hasher::new();
        let mut tail = Vec::new();
        let mut size = 0u64;
        for (i, c) in manifest.chunks.iter().enumerate() {
            let bytes = self.get_object(ObjectId::chunk(c.id), 0, u64::from(c.length))?;
            if bytes.len() != c.length as usize || hash(&bytes) != c.id.0 {
                return Err(damaged(format!(
                    "chunk {i} of the body does not match its id"
                )));
            }
            hasher.update_rayon(&bytes);
            size += bytes.len() as u64;
            if i >= keep {
                tail.extend_from_slice(&bytes);
            }
        }
        if size != base.size || *hasher.finalize().as_bytes() != base.content {
            return Err(damaged(
                "the body read does not match its content id".into(),
            ));
        }
        hasher.update(delta);
        tail.extend_from_slice(delta);
        let content = *hasher.finalize().as_bytes();
        let mut refs = manifest.chunks[..keep].to_vec();
        let mut pieces = Vec::new();
        let mut pos = 0;
        for len in scribe_objects::chunk_boundaries(&tail) {
            let piece = tail[pos..pos + len].to_vec();
            refs.push(ChunkRef {
                id: ChunkId(hash(&piece)),
                length: len as u32,
            });
            pieces.push(piece);
            pos += len;
        }
        drop(tail);
        let size = base.size + delta.len() as u64;
        let extra = scribe_objects::encode_manifest(size, &FileContentId(content), &refs)
            .map_err(|e| WbError::new("storage", format!("manifest: {e}")))?;
        let mid = ManifestId::of_payload(&extra);
        Ok(NewBody::Uploaded {
            body: BodyRef {
                handle: mid.0.to_vec(),
                content,
                size,
            },
            extra,
            pieces,
        })
    }

    fn version_info(&mut self, version: u64) -> Result<VersionInfo, WbError> {
        let repo = self.repo.clone();
        let r = describe(self.conn.client()?, &repo, version);
        r.map_err(|e| self.conn.lost(e))
    }

    /// Over the network, many versions are described on [`DESCRIBE_LANES`]
    /// connections at once (a restore or materialize of files written by
    /// thousands of changes asks one `Describe` per change; one connection
    /// would pay every round trip in turn).
    fn version_infos(&mut self, versions: &[u64]) -> Result<Vec<VersionInfo>, WbError> {
        let extra: Vec<Client> = if versions.len() >= DESCRIBE_LANES_FROM {
            (1..DESCRIBE_LANES)
                .filter_map(|_| {
                    let (url, opts) = self.conn.network.as_ref()?;
                    scribe_client::connect(url, opts).ok()
                })
                .collect()
        } else {
            Vec::new()
        };
        let share = versions.len().div_ceil(extra.len() + 1).max(1);
        let mut parts = versions.chunks(share);
        let mine = parts.next().unwrap_or_default();
        let repo = self.repo.clone();
        let repo = repo.as_str();
        let client = self.conn.client()?;
        let (mine, others) = std::thread::scope(|s| {
            let others: Vec<_> = parts
                .zip(extra)
                .map(|(part, mut c)| {
                    s.spawn(move || {
                        part.iter()
                            .map(|v| describe(&mut c, repo, *v))
                            .collect::<Result<Vec<_>, _>>()
                            .map_err(client_error)
                    })
                })
                .collect();
            let mine = mine
                .iter()
                .map(|v| describe(client, repo, *v))
                .collect::<Result<Vec<_>, _>>();
            let others: Vec<_> = others
                .into_iter()
                .map(|h| h.join().expect("describe lane"))
                .collect();
            (mine, others)
        });
        let mut out = mine.map_err(|e| self.conn.lost(e))?;
        for o in others {
            out.extend(o?);
        }
        Ok(out)
    }

    fn changed_under(&mut self, dir: &str, from: u64, to: u64) -> Result<bool, WbError> {
        if from >= to {
            return Ok(false);
        }
        let page = self
            .conn
            .client()?
            .delta(m::Delta {
                repo: self.repo.clone(),
                branch: self.branch,
                from,
                to,
                after: format!("{dir}/"),
                limit: 1,
            })
            .map_err(|e| self.conn.lost(e))?;
        Ok(page
            .entries
            .first()
            .is_some_and(|e| e.path.starts_with(&format!("{dir}/"))))
    }
    /// `scribe submit`'s streaming freeze (`scribe_client::workflow::stream`):
    /// each file read once, chunked and hashed on every core while the
    /// chunks the server lacks are pinned for `operation` and staged on
    /// this connection and, over the network, a second one; every chunk is
    /// published before this returns. The manifests (built in a scratch
    /// object store that holds nothing else) are sent with the publication.
    fn upload_files(
        &mut self,
        operation: [u8; 16],
        files: &[std::path::PathBuf],
    ) -> Result<Vec<UploadedFile>, WbError> {
        if files.is_empty() {
            return Ok(Vec::new());
        }
        let mut t = std::time::Instant::now();
        let scratch = tempfile::Builder::new()
            .prefix("nokv-collect-")
            .tempdir()
            .map_err(|e| WbError::new("storage", format!("scratch directory: {e}")))?;
        let manifests = scribe_objects::ObjectStore::create(
            scratch.path().join("manifests"),
            scribe_objects::StoreOptions::default(),
        )
        .map_err(|e| WbError::new("storage", format!("scratch store: {e}")))?;
        // A second upload lane over the network, as `scribe submit` opens
        // (none when the server refuses another connection).
        let extra: Vec<Client> = (1..UPLOAD_LANES)
            .filter_map(|_| {
                let (url, opts) = self.conn.network.as_ref()?;
                let mut c = scribe_client::connect(url, opts).ok()?;
                c.status().ok()?;
                Some(c)
            })
            .collect();
        crate::phase("upload: scratch + lane", &mut t);
        let ctx = scribe_client::Context::default();
        let target = scribe_client::workflow::stream::StreamTarget {
            repo: &self.repo,
            workspace: self.workspace,
            op: OperationId(operation),
            ctx: &ctx,
        };
        let streamed = scribe_client::workflow::stream::chunk_and_upload(
            &manifests,
            self.conn.client()?,
            extra,
            &target,
            files,
        )
        .map_err(|e| {
            let code = e.code();
            if matches!(code, ErrorCode::Unreachable | ErrorCode::Malformed) {
                self.conn.broken = true;
            }
            match code {
                ErrorCode::Unreachable | ErrorCode::Busy | ErrorCode::ServerBusy => {
                    WbError::new("unavailable", e.to_string())
                }
                _ => WbError::new("storage", format!("{e} ({})", code.name())),
            }
        })?;
        crate::phase("upload: stream", &mut t);
        streamed
            .files
            .into_iter()
            .map(|f| {
                let manifest = scribe_objects::encode_manifest(f.size, &f.content_id, &f.chunks)
                    .map_err(|e| WbError::new("storage", format!("manifest: {e}")))?;
                debug_assert_eq!(ManifestId::of_payload(&manifest), f.manifest_id);
                Ok(UploadedFile {
                    content: f.content_id.0,
                    size: f.size,
                    body: NewBody::Uploaded {
                        body: BodyRef {
                            handle: f.manifest_id.0.to_vec(),
                            content: f.content_id.0,
                            size: f.size,
                        },
                        extra: manifest,
                        pieces: Vec::new(),
                    },
                })
            })
            .collect()
    }
}

impl ScribeStore {
    /// Upload everything publication `p` needs (only what the server
    /// lacks) and return its change set id, without submitting: what a
    /// crash between upload and submit leaves behind (invisible; the
    /// objects are unreferenced until a submit names them).
    pub fn stage(&mut self, p: &Publish) -> Result<ChangeSetId, WbError> {
        let (cs, objects) = self.prepare(p)?;
        self.upload(OperationId(p.operation), objects)?;
        Ok(cs)
    }

    /// The change set of `p` and every object it needs, with its bytes
    /// (chunks borrowed from the bodies), the change set object last.
    #[allow(clippy::type_complexity)]
    fn prepare<'p>(
        &self,
        p: &'p Publish,
    ) -> Result<(ChangeSetId, Vec<(ObjectId, std::borrow::Cow<'p, [u8]>)>), WbError> {
        let mut t = std::time::Instant::now();
        let bodies: Vec<Body> = p
            .edits
            .iter()
            .filter_map(|e| match e {
                Edit::Put {
                    body: NewBody::Bytes(b),
                    ..
                } => Some((b.as_slice(), None)),
                Edit::Put {
                    body: NewBody::Hashed { bytes, content },
                    ..
                } => Some((bytes.as_slice(), Some(*content))),
                _ => None,
            })
            .collect();
        let mut files = all_file_objects(&bodies)?.into_iter();
        crate::phase("stage: chunk+hash", &mut t);
        // Every object with its bytes (chunks borrowed from the bodies).
        let mut objects: Vec<(ObjectId, std::borrow::Cow<[u8]>)> = Vec::new();
        let mut entries = Vec::new();
        let mut next_body = bodies.iter();
        for e in &p.edits {
            entries.push(match e {
                Edit::Put { path, base, body } => {
                    let state = match body {
                        NewBody::Bytes(_) | NewBody::Hashed { .. } => {
                            let f = files.next().expect("one per body");
                            let b = next_body.next().expect("one per body").0;
                            for (id, r) in f.chunks {
                                objects.push((id, b[r].into()));
                            }
                            objects.push((f.manifest.0, f.manifest.1.into()));
                            f.state
                        }
                        NewBody::Uploaded {
                            body,
                            extra,
                            pieces,
                        } => {
                            // Its other chunks are stored; the new ones
                            // and the manifest travel with the change set.
                            for piece in pieces {
                                let id = ObjectId::chunk(ChunkId(hash(piece)));
                                objects.push((id, piece.as_slice().into()));
                            }
                            let mid = manifest_id(body)?;
                            objects.push((ObjectId::manifest(mid), extra.as_slice().into()));
                            FileState {
                                manifest: mid,
                                content: FileContentId(body.content),
                                size: body.size,
                                mode: Mode::Regular,
                            }
                        }
                        NewBody::Existing(r) => FileState {
                            manifest: manifest_id(r)?,
                            content: FileContentId(r.content),
                            size: r.size,
                            mode: Mode::Regular,
                        },
                    };
                    if *base == 0 {
                        Entry::add(path.clone(), state)
                    } else {
                        Entry::edit(path.clone(), *base, state)
                    }
                }
                Edit::Delete { path, base } => Entry::delete(path.clone(), *base),
            });
        }
        entries.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
        let set = ChangeSet::new(entries);
        let payload = set
            .encode()
            .map_err(|e| WbError::new("path_not_representable", e.to_string()))?;
        let cs = ChangeSetId::of_payload(&payload);
        objects.push((ObjectId::change_set(cs), payload.into()));
        crate::phase("stage: change set", &mut t);
        Ok((cs, objects))
    }

    /// Upload what the server lacks of `objects` for `operation` (pinned,
    /// published), without submitting.
    fn upload(
        &mut self,
        operation: OperationId,
        objects: Vec<(ObjectId, std::borrow::Cow<'_, [u8]>)>,
    ) -> Result<(), WbError> {
        let mut t = std::time::Instant::now();
        let ids: Vec<ObjectId> = objects.iter().map(|(id, _)| *id).collect();
        let total: usize = objects.iter().map(|(_, d)| d.len()).sum();
        if total > PUT_MANY_BYTES {
            return self.stage_large(operation, &ids, objects);
        }
        // Small: send only what the server lacks, in one `ObjectPutMany`
        // (one pin transaction, one durable publication).
        let missing = self
            .conn
            .client()?
            .objects_missing(&self.repo, &ids)
            .map_err(|e| self.conn.lost(e))?;
        crate::phase("stage: objects missing", &mut t);
        let mut sent = std::collections::HashSet::new();
        let batch: Vec<m::ObjectPiece> = objects
            .into_iter()
            .filter(|(id, _)| missing.contains(id) && sent.insert(*id))
            .map(|(id, data)| m::ObjectPiece {
                id,
                data: Bytes(data.into_owned()),
            })
            .collect();
        if !batch.is_empty() {
            self.put_many(operation, batch)?;
        }
        crate::phase("stage: put many", &mut t);
        Ok(())
    }

    /// The objects of a small publication (`total` bytes, at most one
    /// request's worth) to carry in its `SubmitInline`: all of them when
    /// they are tiny (asking would cost more than sending), otherwise what
    /// the server lacks.
    fn carried(
        &mut self,
        objects: Vec<(ObjectId, std::borrow::Cow<'_, [u8]>)>,
        total: usize,
    ) -> Result<Vec<m::ObjectPiece>, WbError> {
        let missing: Option<std::collections::HashSet<ObjectId>> = if total <= CARRY_ALL_BYTES {
            None
        } else {
            let ids: Vec<ObjectId> = objects.iter().map(|(id, _)| *id).collect();
            Some(
                self.conn
                    .client()?
                    .objects_missing(&self.repo, &ids)
                    .map_err(|e| self.conn.lost(e))?
                    .into_iter()
                    .collect(),
            )
        };
        let mut sent = std::collections::HashSet::new();
        Ok(objects
            .into_iter()
            .filter(|(id, _)| missing.as_ref().is_none_or(|m| m.contains(id)) && sent.insert(*id))
            .map(|(id, data)| m::ObjectPiece {
                id,
                data: Bytes(data.into_owned()),
            })
            .collect())
    }

    /// A large upload as `scribe submit` does it: every id pinned for the
    /// operation in one transaction, the missing objects staged on the
    /// connection in pieces of at most 4 MiB, and one durable publication
    /// of the stage (instead of a pin and a publication per object).
    fn stage_large(
        &mut self,
        operation: OperationId,
        ids: &[ObjectId],
        objects: Vec<(ObjectId, std::borrow::Cow<[u8]>)>,
    ) -> Result<(), WbError> {
        let mut t = std::time::Instant::now();
        let missing: std::collections::HashSet<ObjectId> = match self
            .conn
            .client()?
            .objects_pin_missing(&self.repo, self.workspace, operation, ids)
        {
            Ok(m) => m.into_iter().collect(),
            // The operation has its outcome (a retry after a lost answer):
            // nothing to upload, the submit replays it.
            Err(e) if e.code() == ErrorCode::AlreadyExists => return Ok(()),
            Err(e) => return Err(self.conn.lost(e)),
        };
        crate::phase("stage: pin missing", &mut t);
        let mut sent = std::collections::HashSet::new();
        for (id, data) in objects {
            if !missing.contains(&id) || !sent.insert(id) {
                continue;
            }
            self.conn
                .client()?
                .put_object_staged(&self.repo, self.workspace, operation, id, &data)
                .map_err(|e| self.conn.lost(e))?;
        }
        crate::phase("stage: staged puts", &mut t);
        self.conn
            .client()?
            .objects_publish(&self.repo)
            .map_err(|e| self.conn.lost(e))?;
        crate::phase("stage: objects publish", &mut t);
        Ok(())
    }

    fn list_page(
        &mut self,
        at: u64,
        dir: &str,
        token: &str,
        limit: u32,
        recursive: bool,
    ) -> Result<DirPage, WbError> {
        let page = self
            .conn
            .client()?
            .list(m::List {
                repo: self.repo.clone(),
                branch: self.branch,
                change: at,
                prefix: dir.into(),
                recursive,
                after: token.into(),
                limit,
            })
            .map_err(|e| self.conn.lost(e))?;
        Ok(DirPage {
            at: page.change,
            files: page
                .entries
                .into_iter()
                .filter_map(ScribeStore::row)
                .collect(),
            dirs: page.directories,
            next: page.next,
        })
    }

    fn read_range(&mut self, body: &BodyRef, offset: u64, len: u64) -> Result<Vec<u8>, WbError> {
        let end = offset.saturating_add(len).min(body.size);
        if offset >= end {
            return Ok(Vec::new());
        }
        let manifest = self.manifest(body)?;
        let mut out = Vec::with_capacity((end - offset) as usize);
        let mut pos = 0u64;
        for c in manifest.chunks {
            let (start, stop) = (pos, pos + u64::from(c.length));
            pos = stop;
            if stop <= offset || start >= end {
                continue;
            }
            let from = offset.max(start) - start;
            let to = end.min(stop) - start;
            out.extend(self.get_object(ObjectId::chunk(c.id), from, to - from)?);
        }
        Ok(out)
    }

    fn stat_reply(&mut self, at: u64, path: &str) -> Result<m::StatReply, WbError> {
        if path.is_empty() {
            // The head: a stat of a path that cannot exist reports the version.
            return self
                .conn
                .client()?
                .stat(m::Stat {
                    repo: self.repo.clone(),
                    branch: self.branch,
                    change: at,
                    path: ".nokv/head".into(),
                })
                .map_err(|e| self.conn.lost(e));
        }
        self.conn
            .client()?
            .stat(m::Stat {
                repo: self.repo.clone(),
                branch: self.branch,
                change: at,
                path: path.into(),
            })
            .map_err(|e| self.conn.lost(e))
    }

    fn put_many(
        &mut self,
        operation: OperationId,
        objects: Vec<m::ObjectPiece>,
    ) -> Result<(), WbError> {
        self.conn
            .client()?
            .object_put_many(m::ObjectPutMany {
                repo: self.repo.clone(),
                operation,
                workspace: self.workspace,
                objects,
            })
            .map_err(|e| self.conn.lost(e))?;
        Ok(())
    }
}

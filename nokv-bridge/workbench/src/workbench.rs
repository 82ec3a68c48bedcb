//! [`Workbench`]: the transport-free facade. One method, [`Workbench::call`],
//! takes a tool name and its JSON input and returns the JSON result or a
//! typed [`WbError`]. docs/workbench.md is the design this follows.

use base64::Engine as _;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::error::WbError;
use crate::identity::request_identity;
use crate::path::{self, check_id, repo_path, Section, ToolPath};
use crate::store::{Edit, NewBody, Publish, Published, Refusal, Row, Store};
use crate::tools::{self, Call, ReadFormat};

/// Where the bridge keeps a workbench's record (its incarnation is the
/// change that published the record).
pub const RECORD_DIR: &str = ".nokv/workbenches";

/// Generic put/append/edit cannot write these (commit and restore own them).
pub const RESERVED: [&str; 2] = ["run_manifest.json", "restore_manifest.json"];

/// Whether `path` of `section` is a reserved file or a name Scribe would
/// take for one (the same collision key: case and normalization folded),
/// which would make every later commit or restore collide with it.
pub fn is_reserved(section: Section, path: &str) -> bool {
    use scribe_format::path::collision_key;
    section == Section::Metadata
        && RESERVED
            .iter()
            .any(|r| collision_key(r) == collision_key(path))
}

fn reserved_error(path: &str) -> WbError {
    let what = if RESERVED.contains(&path) {
        String::new()
    } else {
        " (Scribe takes it for a reserved name: case and normalization are folded)".to_string()
    };
    WbError::new(
        "reserved_path",
        format!("metadata/{path} is written only by commit or restore{what}"),
    )
}

/// The bytes a structured read returns as parsed JSON at most.
const STRUCTURED_JSON_MAX: u64 = 1 << 20;

/// The Workbench facade over a [`Store`].
pub struct Workbench<S: Store> {
    store: S,
    agent: String,
    clock: Box<dyn Fn() -> u64 + Send>,
    /// Incarnations seen (a record is never replaced or removed by the
    /// bridge, so a seen incarnation stays valid for this facade's life).
    incarnations: std::collections::HashMap<String, u64>,
    /// Appends and edits whose answers were not delivered yet (a repeat
    /// of one is a retry; docs/workbench.md, "A repeated append or edit").
    pending: crate::journal::Pending,
    /// An answer returned by [`Workbench::call`] counts as delivered (a
    /// library caller); a surface that writes answers out sets this off
    /// and calls [`Workbench::delivered`] after writing.
    auto_deliver: bool,
}

fn now_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The record path of workbench `id`.
pub fn record_path(id: &str) -> String {
    format!("{RECORD_DIR}/{id}")
}

/// The content type of a path from its extension.
pub fn content_type_of(path: &str) -> &'static str {
    let name = path.rsplit('/').next().unwrap_or(path);
    let ext = name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    // The types agents most often write. A path whose explicit type is
    // the one its extension gives costs no line in a change message
    // (which holds 64 KiB), so a common type missing here is what limits
    // a collect or restore of thousands of typed files.
    match ext.as_str() {
        "json" => "application/json",
        "yaml" | "yml" => "application/yaml",
        "txt" | "log" => "text/plain",
        "md" => "text/markdown",
        "csv" => "text/csv",
        "tsv" => "text/tab-separated-values",
        "py" => "text/x-python",
        "sh" => "text/x-shellscript",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "js" | "mjs" => "text/javascript",
        "xml" => "application/xml",
        "toml" => "application/toml",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        "tar" => "application/x-tar",
        "wasm" => "application/wasm",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "wav" => "audio/wav",
        "mp3" => "audio/mpeg",
        "mp4" => "video/mp4",
        _ => "application/octet-stream",
    }
}

/// The request identity a bridge change message carries.
fn message_request(message: &str) -> Option<&str> {
    message
        .lines()
        .find_map(|l| l.strip_prefix("nokv-request: "))
}

/// The content type a change message records for `path`: a
/// `nokv-path-content-type: <type> <path>` line for it, else the change's
/// `nokv-content-type: <type>` line.
fn message_content_type<'a>(message: &'a str, path: &str) -> Option<&'a str> {
    let per_path = message.lines().find_map(|l| {
        let (ct, p) = l
            .strip_prefix("nokv-path-content-type: ")?
            .split_once(' ')?;
        (p == path).then_some(ct)
    });
    per_path.or_else(|| {
        message
            .lines()
            .find_map(|l| l.strip_prefix("nokv-content-type: "))
    })
}

/// Check a caller's content type: `type/subtype` of printable ASCII
/// without spaces, at most 255 bytes (it is recorded in a change message).
pub fn check_content_type(ct: &str) -> Result<(), WbError> {
    let ok = ct.len() <= 255
        && ct
            .split_once('/')
            .is_some_and(|(a, b)| !a.is_empty() && !b.is_empty())
        && ct.bytes().all(|b| b.is_ascii_graphic());
    if ok {
        Ok(())
    } else {
        Err(WbError::invalid_input(format!(
            "content_type {ct:?} must be type/subtype in printable ASCII without spaces, at most 255 bytes"
        )))
    }
}

/// The Scribe operation id of one publication attempt: derived from the
/// request identity, the generations it observed and a fresh per-attempt
/// nonce. Scribe records every outcome, refusals included, under its
/// operation id forever, so a purely deterministic id would turn a
/// retryable refusal (a person's lock) into a permanent one. Exactly-once
/// rests on the request identity the change message carries: checked
/// before publishing, and again after a refusal (a racing earlier attempt
/// of the same request may have won the generation CAS).
fn operation_id(request: &[u8; 32], bases: &[u64]) -> [u8; 16] {
    let mut nonce = [0u8; 16];
    // Without an OS random source, fall back to the clock (still unique
    // per attempt in practice; the CAS on bases keeps it safe).
    if getrandom::fill(&mut nonce).is_err() {
        nonce[..16].copy_from_slice(&now_nanos().to_be_bytes());
    }
    let mut h = blake3::Hasher::new_derive_key("nokv-workbench operation id v2");
    h.update(request);
    h.update(&nonce);
    for b in bases {
        h.update(&b.to_be_bytes());
    }
    let mut out = [0u8; 16];
    out.copy_from_slice(&h.finalize().as_bytes()[..16]);
    out
}

fn refusal_error(r: Refusal) -> WbError {
    match r {
        Refusal::Stale(p) => WbError::new(
            "generation_conflict",
            format!("the generation of {p:?} moved; read it again and retry"),
        ),
        Refusal::Exists(p) => WbError::new("already_exists", format!("{p:?} already exists")),
        Refusal::Locked(p) => WbError::new(
            "locked",
            format!("{p:?} is locked by someone else; the write is refused"),
        ),
        Refusal::Collision(p) => WbError::new(
            "path_not_representable",
            format!("{p:?} collides with another path of the repository (case folding or a file/directory clash)"),
        ),
        Refusal::Other { code, detail } => {
            WbError::new("storage", format!("the store refused the change: {code}: {detail}"))
        }
    }
}

/// Which winner of a refused publication (a moved generation, an existing
/// path) is this call's result.
enum Adopt<'a> {
    /// None: the caller reads again (append).
    Never,
    /// One carrying the request (put: a repeat writes the same bytes).
    Request,
    /// One carrying the request and an earlier attempt of this call still
    /// pending (edit: a deliberate repeat is a new edit).
    Retry(&'a crate::journal::Attempt),
}

/// What a writer learns from the message of the generation it observed.
struct Observed {
    /// This request published it (an exact retry: answer, publish nothing).
    mine: bool,
    /// The content type a new body keeps when the call names none.
    kept: Option<String>,
    message: String,
}

/// A resolved target path.
struct Target {
    id: String,
    incarnation: u64,
    section: Section,
    path: ToolPath,
    full: String,
}

impl<S: Store> Workbench<S> {
    /// The change messages of the generations `gens` (each asked once,
    /// together): what content types are read from.
    fn generation_messages(
        &mut self,
        gens: impl IntoIterator<Item = u64>,
    ) -> Result<std::collections::HashMap<u64, String>, WbError> {
        Ok(self
            .generation_infos(gens)?
            .into_iter()
            .map(|(g, (message, _))| (g, message))
            .collect())
    }

    /// The change message and time of each generation of `gens` (each
    /// asked once, together). A store answering for other generations than
    /// asked is refused, not indexed.
    fn generation_infos(
        &mut self,
        gens: impl IntoIterator<Item = u64>,
    ) -> Result<std::collections::HashMap<u64, (String, u64)>, WbError> {
        let mut gens: Vec<u64> = gens.into_iter().collect();
        gens.sort_unstable();
        gens.dedup();
        let infos = self.store.version_infos(&gens)?;
        if infos.len() != gens.len() {
            return Err(WbError::new(
                "storage",
                format!(
                    "asked for the messages of {} changes, the store answered {}",
                    gens.len(),
                    infos.len()
                ),
            ));
        }
        Ok(gens
            .into_iter()
            .zip(infos.into_iter().map(|i| (i.message, i.timestamp_ms)))
            .collect())
    }

    /// A facade over `store`; `agent` is the agent id of presentation
    /// paths (`/agents/{agent}/wb/...`).
    pub fn new(store: S, agent: &str) -> Workbench<S> {
        Workbench {
            store,
            agent: agent.into(),
            clock: Box::new(now_ms),
            incarnations: std::collections::HashMap::new(),
            pending: crate::journal::Pending::memory(),
            auto_deliver: true,
        }
    }

    /// Keep pending appends and edits in `pending` and count an answer delivered
    /// only when [`Workbench::delivered`] says so (the `nokv` binary: after
    /// printing it, or writing its MCP line).
    pub fn with_pending(mut self, pending: crate::journal::Pending) -> Workbench<S> {
        self.pending = pending;
        self.auto_deliver = false;
        self
    }

    /// The answers returned since the last call of this were delivered to
    /// the caller: a repeat of one of those appends or edits is a new one.
    pub fn delivered(&mut self) {
        self.pending.delivered();
    }

    /// Replace the clock (milliseconds since the epoch) for tests.
    pub fn with_clock(mut self, clock: impl Fn() -> u64 + Send + 'static) -> Workbench<S> {
        self.clock = Box::new(clock);
        self
    }

    /// The facade's clock (milliseconds since the epoch; injected in tests).
    pub fn now(&self) -> u64 {
        (self.clock)()
    }

    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    /// Run tool `tool` with `input`.
    pub fn call(&mut self, tool: &str, input: &Value) -> Result<Value, WbError> {
        let mark = self.pending.mark();
        let r = self.call_tool(tool, input);
        match &r {
            Ok(_) if self.auto_deliver => self.pending.delivered(),
            Ok(_) => {}
            // The outcome may be unknown (a lost connection after the
            // submit): the attempt stays pending, so a repeat is a retry.
            Err(_) => self.pending.abandon_since(mark),
        }
        r
    }

    fn call_tool(&mut self, tool: &str, input: &Value) -> Result<Value, WbError> {
        match tools::parse(tool, input)? {
            Call::Create(c) => self.create(input, &c.id),
            Call::PutFile(c) => {
                let body = body_of(c.text, c.base64)?;
                c.content_type
                    .as_deref()
                    .map(check_content_type)
                    .transpose()?;
                self.put(
                    input,
                    &c.id,
                    c.section,
                    &c.path,
                    body,
                    c.content_type,
                    c.replace.unwrap_or(false),
                )
            }
            Call::Append(c) => {
                let body = body_of(c.text, c.base64)?;
                c.content_type
                    .as_deref()
                    .map(check_content_type)
                    .transpose()?;
                self.append(input, &c.id, c.section, &c.path, body, c.content_type)
            }
            Call::Edit(c) => self.edit(input, c),
            Call::Stat(c) => {
                let at = self.view_at(&c.id, c.at_snapshot.as_ref())?;
                self.stat(&c.id, c.section, c.path.as_deref().unwrap_or(""), at)
            }
            Call::Read(c) => {
                let at = self.view_at(&c.id, c.at_snapshot.as_ref())?;
                self.read(c, at)
            }
            Call::List(c) => {
                let at = self.view_at(&c.id, c.at_snapshot.as_ref())?;
                self.list(c, at)
            }
            Call::Commit(c) => self.commit(input, c),
            Call::Snapshot(c) => self.snapshot(input, c),
            Call::SnapshotRenew(c) => self.snapshot_renew(c),
            Call::SnapshotRetire(c) => self.snapshot_retire(c),
            Call::SnapshotList(c) => self.snapshot_list(&c.id),
            Call::Restore(c) => self.restore(input, c),
            Call::Grep(c) => self.grep(input, c),
            Call::Search(c) => self.search(input, c),
            Call::Aggregate(c) => self.aggregate(c),
            Call::Catalog(c) => self.catalog(c),
            Call::Find(c) => self.find(input, c),
        }
    }

    fn presentation(&self, id: &str, section: Section, path: &ToolPath) -> String {
        let base = format!("/agents/{}/wb/{id}/{section}", self.agent);
        if path.is_root() {
            base
        } else {
            format!("{base}/{}", path.as_str())
        }
    }

    /// The incarnation of workbench `id` (the change of its record).
    fn incarnation(&mut self, id: &str) -> Result<u64, WbError> {
        check_id(id)?;
        if let Some(inc) = self.incarnations.get(id) {
            return Ok(*inc);
        }
        match self.store.stat(0, &record_path(id))? {
            Some(r) => {
                self.incarnations.insert(id.to_string(), r.generation);
                Ok(r.generation)
            }
            None => Err(WbError::new(
                "workbench_not_found",
                format!("no workbench {id:?}; create it first"),
            )),
        }
    }

    fn target(
        &mut self,
        id: &str,
        section: Section,
        p: &str,
        allow_empty: bool,
        writing: bool,
    ) -> Result<Target, WbError> {
        check_id(id)?;
        let path = ToolPath::parse(section, p, allow_empty)?;
        if writing && is_reserved(section, path.as_str()) {
            return Err(reserved_error(path.as_str()));
        }
        let full = repo_path(id, section, &path);
        if let Err(e) = scribe_format::path::validate(&full) {
            let mut err = WbError::new(
                "path_not_representable",
                format!("{p:?} cannot be stored in a Scribe repository: {e}"),
            );
            err.rule = Some(e.code());
            return Err(err);
        }
        let incarnation = self.incarnation(id)?;
        Ok(Target {
            id: id.into(),
            incarnation,
            section,
            path,
            full,
        })
    }

    /// The live row of a target, hiding a row older than the incarnation.
    fn live(&mut self, t: &Target) -> Result<Option<Row>, WbError> {
        self.row_at(t, 0)
    }

    /// The row of a target at version `at` (0: live), hiding a row older
    /// than the incarnation.
    fn row_at(&mut self, t: &Target, at: u64) -> Result<Option<Row>, WbError> {
        Ok(self
            .store
            .stat(at, &t.full)?
            .filter(|r| r.generation >= t.incarnation))
    }

    /// Whether `row`'s generation was published by request `req`.
    fn published_by(&mut self, row: &Row, req: &[u8; 32]) -> Result<bool, WbError> {
        let info = self.store.version_info(row.generation)?;
        Ok(message_request(&info.message) == Some(hex::encode(req).as_str()))
    }

    /// What the change that made `row`'s generation says, from one
    /// message (one round trip): whether request `req` published it, and
    /// the content type a new body of the path keeps when the call names
    /// none (the one recorded for `row` where it differs from what the
    /// extension gives: an edit or append never drops it).
    fn observed(&mut self, row: &Row, req: &[u8; 32]) -> Result<Observed, WbError> {
        let info = self.store.version_info(row.generation)?;
        let mine = message_request(&info.message) == Some(hex::encode(req).as_str());
        let kept = message_content_type(&info.message, &row.path)
            .filter(|ct| *ct != content_type_of(&row.path))
            .map(str::to_string);
        Ok(Observed {
            mine,
            kept,
            message: info.message,
        })
    }

    fn content_type(&mut self, row: &Row) -> Result<(String, u64), WbError> {
        let info = self.store.version_info(row.generation)?;
        let ct = message_content_type(&info.message, &row.path)
            .map(str::to_string)
            .unwrap_or_else(|| content_type_of(&row.path).to_string());
        Ok((ct, info.timestamp_ms))
    }

    fn message(tool: &str, t: &str, req: &[u8; 32], ct: Option<&str>) -> String {
        let mut m = format!("nokv {tool} {t}\nnokv-request: {}\n", hex::encode(req));
        if let Some(ct) = ct {
            m.push_str(&format!("nokv-content-type: {ct}\n"));
        }
        m
    }

    #[allow(clippy::too_many_arguments)]
    fn publish_one(
        &mut self,
        tool: &str,
        t: &Target,
        req: &[u8; 32],
        base: u64,
        body: NewBody,
        ct: Option<&str>,
        note: Option<String>,
        adopt: Adopt<'_>,
    ) -> Result<(u64, Option<u64>), WbError> {
        let timestamp_ms = (self.clock)();
        let mut message = Self::message(tool, &t.full, req, ct);
        if let Some(n) = note {
            message.push_str(&n);
        }
        let p = Publish {
            operation: operation_id(req, &[base]),
            message,
            edits: vec![Edit::Put {
                path: t.full.clone(),
                base,
                body,
            }],
            timestamp_ms,
        };
        match self.store.publish(p)? {
            Published::Accepted { version } => Ok((version, Some(timestamp_ms))),
            Published::Refused(r @ (Refusal::Stale(_) | Refusal::Exists(_)))
                if !matches!(adopt, Adopt::Never) =>
            {
                // An earlier attempt of this same request may have won.
                let Some(row) = self.live(t)? else {
                    return Err(refusal_error(r));
                };
                let seen = self.observed(&row, req)?;
                let ours = seen.mine
                    && match adopt {
                        Adopt::Retry(attempt) => attempt.retries(&seen.message),
                        _ => true,
                    };
                if ours {
                    Ok((row.generation, None))
                } else {
                    Err(refusal_error(r))
                }
            }
            Published::Refused(r) => Err(refusal_error(r)),
        }
    }

    fn card_of(&self, t: &Target, size: u64, generation: u64, ct: &str, modified: u64) -> Value {
        json!({
            "id": t.id,
            "section": t.section,
            "path": t.path.as_str(),
            "presentation_path": self.presentation(&t.id, t.section, &t.path),
            "kind": "file",
            "size": size,
            "generation": generation,
            "change": generation,
            "content_type": ct,
            "modified_ms": modified,
        })
    }

    fn card(&mut self, t: &Target, row: &Row) -> Result<Value, WbError> {
        let (ct, modified) = self.content_type(row)?;
        Ok(self.card_of(t, row.body.size, row.generation, &ct, modified))
    }

    // ---- tools ----

    /// An existing workbench whose id differs from `id` only in case or
    /// normalization: the same path to Scribe's collision rules, so
    /// creating `id` beside it cannot be represented.
    fn case_twin(&mut self, id: &str) -> Result<Option<String>, WbError> {
        let head = self.store.head()?;
        let key = scribe_format::path::collision_key(id);
        Ok(self
            .workbenches(head)?
            .into_iter()
            .map(|(w, _)| w)
            .find(|w| w != id && scribe_format::path::collision_key(w) == key))
    }

    fn create(&mut self, input: &Value, id: &str) -> Result<Value, WbError> {
        check_id(id)?;
        let record = record_path(id);
        if let Some(r) = self.store.stat(0, &record)? {
            return Ok(
                json!({"id": id, "incarnation": r.generation, "created": false, "idempotent_replay": true}),
            );
        }
        if let Some(twin) = self.case_twin(id)? {
            return Err(WbError::new(
                "already_exists",
                format!("workbench {twin:?} exists, and {id:?} differs from it only in case or normalization: the same name to Scribe"),
            ));
        }
        // A fresh incarnation starts empty: rows a person left under the
        // directory would otherwise join it.
        let dir = self.store.list_dir(0, id, "", 1)?;
        if !dir.files.is_empty() || !dir.dirs.is_empty() {
            return Err(WbError::new(
                "workbench_dir_not_empty",
                format!("the repository already has paths under {id}/ that no workbench owns"),
            ));
        }
        let req = request_identity(&self.store.root_name(), 0, "workbench_create", input);
        let body = serde_json::to_vec(&json!({"schema": "nokv.scribe.workbench.v1", "id": id}))
            .expect("json");
        let p = Publish {
            operation: operation_id(&req, &[0]),
            message: format!(
                "nokv workbench_create {id}\nnokv-request: {}\n",
                hex::encode(req)
            ),
            edits: vec![Edit::Put {
                path: record.clone(),
                base: 0,
                body: NewBody::Bytes(body),
            }],
            timestamp_ms: (self.clock)(),
        };
        match self.store.publish(p)? {
            Published::Accepted { version } => Ok(
                json!({"id": id, "incarnation": version, "created": true, "idempotent_replay": false}),
            ),
            // A concurrent create won: converge on it.
            Published::Refused(Refusal::Exists(_)) => match self.store.stat(0, &record)? {
                Some(r) => Ok(
                    json!({"id": id, "incarnation": r.generation, "created": false, "idempotent_replay": true}),
                ),
                None => Err(WbError::new(
                    "generation_conflict",
                    "the workbench record moved; retry",
                )),
            },
            Published::Refused(r) => Err(refusal_error(r)),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn put(
        &mut self,
        input: &Value,
        id: &str,
        section: Section,
        p: &str,
        body: Vec<u8>,
        ct: Option<String>,
        replace: bool,
    ) -> Result<Value, WbError> {
        let t = self.target(id, section, p, false, true)?;
        let req = request_identity(
            &self.store.root_name(),
            t.incarnation,
            "workbench_put_file",
            input,
        );
        let current = self.live(&t)?;
        if let Some(row) = &current {
            if self.published_by(row, &req)? {
                let mut card = self.card(&t, row)?;
                card["idempotent_replay"] = json!(true);
                return Ok(card);
            }
        }
        let base = match (&current, replace) {
            (Some(_), false) => {
                return Err(WbError::new(
                    "already_exists",
                    format!(
                        "{}/{} exists; put_file with replace=false only creates",
                        section, p
                    ),
                ))
            }
            (None, true) => {
                return Err(WbError::new(
                    "not_found",
                    format!(
                        "{}/{} does not exist; put_file with replace=true only replaces",
                        section, p
                    ),
                ))
            }
            (Some(r), true) => r.generation,
            (None, false) => 0,
        };
        let size = body.len() as u64;
        let (generation, published_ms) = self.publish_one(
            "workbench_put_file",
            &t,
            &req,
            base,
            NewBody::Bytes(body),
            ct.as_deref(),
            None,
            Adopt::Request,
        )?;
        let mut card = match published_ms {
            // Everything the card says is known: no read back.
            Some(ms) => {
                let ct = ct.unwrap_or_else(|| content_type_of(&t.full).to_string());
                self.card_of(&t, size, generation, &ct, ms)
            }
            None => {
                let row = self
                    .store
                    .stat(generation, &t.full)?
                    .ok_or_else(|| WbError::new("storage", "the published path is missing"))?;
                self.card(&t, &row)?
            }
        };
        card["idempotent_replay"] = json!(false);
        Ok(card)
    }

    fn append(
        &mut self,
        input: &Value,
        id: &str,
        section: Section,
        p: &str,
        delta: Vec<u8>,
        ct: Option<String>,
    ) -> Result<Value, WbError> {
        let t = self.target(id, section, p, false, true)?;
        let req = request_identity(
            &self.store.root_name(),
            t.incarnation,
            "workbench_append",
            input,
        );
        // A repeat of an append whose answer was delivered is a new
        // append; only a publication by an earlier attempt of this request
        // whose answer was never delivered is this call's result (a retry).
        let this = self.pending.begin(&req)?;
        let digest = hex::encode(Sha256::digest(&delta));
        let result = |row: &Row, replay: bool| {
            json!({"id": t.id, "section": t.section, "path": t.path.as_str(), "size": row.body.size,
                   "generation": row.generation, "digest": format!("sha256:{digest}"),
                   "idempotent_replay": replay})
        };
        // The contract's "append after generation CAS (retry conflicts)":
        // another writer's publication between the read and the publish
        // is answered by reading again and appending to its result.
        let mut attempt = 0;
        loop {
            attempt += 1;
            let current = self.live(&t)?;
            let kept = match &current {
                Some(row) => {
                    let seen = self.observed(row, &req)?;
                    if seen.mine && this.retries(&seen.message) {
                        return Ok(result(row, true));
                    }
                    seen.kept
                }
                None => None,
            };
            let ct = ct.clone().or(kept);
            let (base, body) = match &current {
                // The store reuses what it can of the old body (Scribe:
                // every chunk but the last), holding a piece at a time.
                Some(row) => (row.generation, self.store.appended(&row.body, &delta)?),
                None => (0, NewBody::Bytes(delta.clone())),
            };
            let generation = match self.publish_one(
                "workbench_append",
                &t,
                &req,
                base,
                body,
                ct.as_deref(),
                Some(this.note()),
                // A winner is this call's only when it carries an earlier
                // attempt's id (checked by reading again, below).
                Adopt::Never,
            ) {
                Ok((generation, _)) => generation,
                Err(e)
                    if attempt < APPEND_ATTEMPTS
                        && matches!(e.code, "generation_conflict" | "already_exists") =>
                {
                    // A short, jittered pause so two busy writers do not
                    // keep colliding in step.
                    let jitter = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.subsec_nanos() % 4_000_000);
                    std::thread::sleep(std::time::Duration::from_nanos(
                        u64::from(attempt.min(10)) * 1_000_000 + u64::from(jitter),
                    ));
                    continue;
                }
                Err(e) => return Err(e),
            };
            let row = self
                .store
                .stat(generation, &t.full)?
                .ok_or_else(|| WbError::new("storage", "the published path is missing"))?;
            return Ok(result(&row, false));
        }
    }

    fn edit(&mut self, input: &Value, c: tools::Edit) -> Result<Value, WbError> {
        if c.old_string.is_empty() {
            return Err(WbError::invalid_input(
                "workbench_edit: old_string must not be empty",
            ));
        }
        let t = self.target(&c.id, c.section, &c.path, false, true)?;
        let req = request_identity(
            &self.store.root_name(),
            t.incarnation,
            "workbench_edit",
            input,
        );
        // As for append (docs/workbench.md, "A repeated append or edit"):
        // a repeat of an edit whose answer was delivered is a new edit
        // (`x` -> `xx` with replace_all still matches); only a publication
        // by an earlier attempt of this request whose answer was never
        // delivered is this call's result (a retry).
        let this = self.pending.begin(&req)?;
        let row = self.live(&t)?.ok_or_else(|| {
            WbError::new(
                "not_found",
                format!("{}/{} does not exist", c.section, c.path),
            )
        })?;
        let seen = self.observed(&row, &req)?;
        if seen.mine && this.retries(&seen.message) {
            // The count the publication recorded (the old body is gone).
            let replacements = seen
                .message
                .lines()
                .find_map(|l| l.strip_prefix("nokv-replacements: "))
                .and_then(|n| n.parse::<u64>().ok());
            let mut v = json!({"id": t.id, "section": t.section, "path": t.path.as_str(), "generation": row.generation,
                               "size": row.body.size, "changed": true, "idempotent_replay": true});
            if let Some(n) = replacements {
                v["replacements"] = json!(n);
            }
            return Ok(v);
        }
        if row.body.size > EDIT_MAX_BYTES {
            return Err(WbError::invalid_input(format!(
                "workbench_edit: {}/{} is {} bytes, above the {} MiB an edit holds in memory \
                 (it replaces in the whole text); rewrite it with put_file or collect",
                c.section,
                c.path,
                row.body.size,
                EDIT_MAX_BYTES >> 20
            )));
        }
        let bytes = self.store.read(&row.body, 0, row.body.size)?;
        let text = String::from_utf8(bytes)
            .map_err(|_| WbError::invalid_input("workbench_edit: the file is not UTF-8 text"))?;
        let matches = text.matches(&c.old_string).count();
        if matches == 0 {
            return Err(WbError::new(
                "edit_no_match",
                "old_string does not occur in the file",
            ));
        }
        let replace_all = c.replace_all.unwrap_or(false);
        if matches > 1 && !replace_all {
            return Err(WbError::new(
                "edit_ambiguous",
                format!("old_string occurs {matches} times; give more context or replace_all=true"),
            ));
        }
        let new = if replace_all {
            text.replace(&c.old_string, &c.new_string)
        } else {
            text.replacen(&c.old_string, &c.new_string, 1)
        };
        if new == text {
            return Ok(
                json!({"id": t.id, "section": t.section, "path": t.path.as_str(), "generation": row.generation,
                             "size": row.body.size, "changed": false, "replacements": matches, "idempotent_replay": false}),
            );
        }
        let replacements = if replace_all { matches } else { 1 };
        let (generation, _) = self.publish_one(
            "workbench_edit",
            &t,
            &req,
            row.generation,
            NewBody::Bytes(new.into_bytes()),
            seen.kept.as_deref(),
            Some(format!(
                "nokv-replacements: {replacements}\n{}",
                this.note()
            )),
            Adopt::Retry(&this),
        )?;
        let row = self
            .store
            .stat(generation, &t.full)?
            .ok_or_else(|| WbError::new("storage", "the published path is missing"))?;
        Ok(
            json!({"id": t.id, "section": t.section, "path": t.path.as_str(), "generation": row.generation,
                  "size": row.body.size, "changed": true, "replacements": replacements,
                  "idempotent_replay": false}),
        )
    }

    fn stat(
        &mut self,
        id: &str,
        section: Option<Section>,
        p: &str,
        at: u64,
    ) -> Result<Value, WbError> {
        let Some(section) = section else {
            if !p.is_empty() {
                return Err(WbError::invalid_input(
                    "workbench_stat: a path needs a section",
                ));
            }
            let incarnation = self.incarnation(id)?;
            return Ok(
                json!({"id": id, "kind": "workbench", "incarnation": incarnation,
                             "presentation_path": format!("/agents/{}/wb/{id}", self.agent),
                             "sections": Section::ALL}),
            );
        };
        let t = self.target(id, section, p, true, false)?;
        if t.path.is_root() {
            return Ok(
                json!({"id": id, "section": section, "path": "", "kind": "section",
                             "presentation_path": self.presentation(id, section, &t.path)}),
            );
        }
        if let Some(row) = self.row_at(&t, at)? {
            return self.card(&t, &row);
        }
        let page = self.store.list_dir(at, &t.full, "", 1)?;
        if page.files.iter().any(|r| r.generation >= t.incarnation) || !page.dirs.is_empty() {
            return Ok(
                json!({"id": id, "section": section, "path": t.path.as_str(), "kind": "directory",
                             "presentation_path": self.presentation(id, section, &t.path)}),
            );
        }
        Err(WbError::new(
            "not_found",
            format!("{section}/{p} does not exist"),
        ))
    }

    fn read(&mut self, c: tools::Read, at: u64) -> Result<Value, WbError> {
        let t = self.target(&c.id, c.section, &c.path, false, false)?;
        let row = self.row_at(&t, at)?.ok_or_else(|| {
            WbError::new(
                "not_found",
                format!("{}/{} does not exist", c.section, c.path),
            )
        })?;
        let base = json!({"id": t.id, "section": t.section, "path": t.path.as_str(), "generation": row.generation, "size": row.body.size});
        if c.if_none_match == Some(row.generation) {
            let mut v = base;
            v["not_modified"] = json!(true);
            return Ok(v);
        }
        let (ct, _) = self.content_type(&row)?;
        let mut offset = c.offset.unwrap_or(0);
        let format = c.format.unwrap_or(ReadFormat::Structured);
        let scope = read_scope(&t.full, matches!(format, ReadFormat::Bytes));
        if let Some(cursor) = &c.cursor {
            let (generation, off) = decode_read_cursor(cursor, &scope)?;
            if generation != row.generation {
                return Err(WbError::new(
                    "cursor_stale",
                    "the file changed since this cursor was issued; read again from the start",
                ));
            }
            offset = off;
        }
        let mut v = base;
        v["content_type"] = json!(ct);
        match format {
            ReadFormat::Bytes => {
                let limit = u64::from(c.limit.unwrap_or(64)) * 1024;
                let data = self.store.read(&row.body, offset, limit)?;
                let end = offset + data.len() as u64;
                v["format"] = json!("bytes");
                v["offset"] = json!(offset);
                v["base64"] = json!(base64::engine::general_purpose::STANDARD.encode(&data));
                v["next_cursor"] = if end < row.body.size {
                    json!(read_cursor(row.generation, end, &scope))
                } else {
                    Value::Null
                };
            }
            ReadFormat::Structured => {
                if ct == "application/json"
                    && offset == 0
                    && c.cursor.is_none()
                    && row.body.size <= STRUCTURED_JSON_MAX
                {
                    let data = self.store.read(&row.body, 0, row.body.size)?;
                    if let Ok(parsed) = serde_json::from_slice::<Value>(&data) {
                        v["format"] = json!("json");
                        v["json"] = parsed;
                        return Ok(v);
                    }
                }
                // Text lines [offset, offset + limit), streamed: memory is
                // bounded by the lines returned and one read step, not the
                // file (a multi-GiB log reads a page of lines in MiBs).
                let limit = c.limit.unwrap_or(300) as usize;
                let mut lines = TextLines::new(offset as usize, limit);
                let mut pos = 0u64;
                while pos < row.body.size {
                    let data = self.store.read(&row.body, pos, TEXT_READ_STEP)?;
                    if data.is_empty() {
                        return Err(WbError::new(
                            "storage",
                            "the store answered fewer bytes than the file's size",
                        ));
                    }
                    pos += data.len() as u64;
                    lines.feed(&data)?;
                }
                let (total, page) = lines.finish()?;
                let from = (offset as usize).min(total);
                let to = from + page.len();
                v["format"] = json!("text");
                v["offset"] = json!(from);
                v["total_lines"] = json!(total);
                v["lines"] = json!(page);
                v["next_cursor"] = if to < total {
                    json!(read_cursor(row.generation, to as u64, &scope))
                } else {
                    Value::Null
                };
            }
        }
        Ok(v)
    }

    fn list(&mut self, c: tools::List, snapshot_at: u64) -> Result<Value, WbError> {
        let incarnation = self.incarnation(&c.id)?;
        let (section, t) = match c.section {
            Some(section) => {
                let t =
                    self.target(&c.id, section, c.path.as_deref().unwrap_or(""), true, false)?;
                (Some(section), Some(t))
            }
            None if c.path.as_deref().is_some_and(|p| !p.is_empty()) => {
                return Err(WbError::invalid_input(
                    "workbench_list: a path needs a section",
                ));
            }
            None => (None, None),
        };
        // The directory listed: the workbench root is `<id>` itself.
        let full = t.as_ref().map_or_else(|| c.id.clone(), |t| t.full.clone());
        let limit = c.limit.unwrap_or(100);
        let wb_dir = c.id.clone();
        let (at, token, after) = match &c.cursor {
            None if snapshot_at != 0 => (snapshot_at, String::new(), None),
            None => (self.store.head()?, String::new(), None),
            Some(cur) => {
                let k = ListCursor::decode(cur)?;
                if k.id != c.id
                    || k.incarnation != incarnation
                    || k.dir_key != hex::encode(path::prefix_key(full.split('/')))
                    || k.snapshot != (snapshot_at != 0)
                    || (snapshot_at != 0 && k.at != snapshot_at)
                {
                    return Err(WbError::new(
                        "invalid_cursor",
                        "the cursor belongs to another listing",
                    ));
                }
                let head = self.store.head()?;
                if !k.snapshot && self.store.changed_under(&wb_dir, k.at, head)? {
                    return Err(WbError::new(
                        "cursor_stale",
                        "the workbench changed since this cursor was issued; list again",
                    ));
                }
                (k.at, k.token, k.after)
            }
        };
        let (Some(section), Some(t)) = (section, t) else {
            return self.list_root(&c, incarnation, at, token, after, snapshot_at != 0);
        };
        let page = self.store.list_dir(at, &t.full, &token, limit)?;
        let prefix_len = t.full.len() + 1;
        let mut items: Vec<(Vec<u8>, Value)> = Vec::new();
        for r in page.files.iter().filter(|r| r.generation >= incarnation) {
            let name = &r.path[prefix_len..];
            let rel = if t.path.is_root() {
                name.to_string()
            } else {
                format!("{}/{name}", t.path.as_str())
            };
            items.push((
                name.as_bytes().to_vec(),
                json!({"name": name, "kind": "file", "section": section, "path": rel,
                "size": r.body.size, "generation": r.generation}),
            ));
        }
        for d in &page.dirs {
            let name = &d[prefix_len..];
            let rel = if t.path.is_root() {
                name.to_string()
            } else {
                format!("{}/{name}", t.path.as_str())
            };
            items.push((
                format!("{name}/").into_bytes(),
                json!({"name": name, "kind": "directory", "section": section, "path": rel}),
            ));
        }
        // An empty first page below the section root: the path is a file or
        // nothing, as `workbench_stat` would say, not an empty directory
        // (a directory exists only while something lives under it).
        if items.is_empty() && c.cursor.is_none() && !t.path.is_root() {
            let what = match self.row_at(&t, at)? {
                Some(_) => "is a file, not a directory (workbench_read reads it)",
                None => "does not exist",
            };
            return Err(WbError::new(
                "not_found",
                format!("{section}/{} {what}", t.path.as_str()),
            ));
        }
        // The store's paging order (the tree's: a directory sorts as its
        // name followed by `/`), so a page of any size continues where the
        // last one stopped (`a b`, `a.txt` come before the directory `a`).
        items.sort_by(|a, b| a.0.cmp(&b.0));
        let next = page.next.map(|token| {
            ListCursor {
                id: c.id.clone(),
                incarnation,
                dir_key: hex::encode(path::prefix_key(t.full.split('/'))),
                at: page.at,
                snapshot: snapshot_at != 0,
                token,
                after: None,
            }
            .encode()
        });
        Ok(
            json!({"id": c.id, "section": section, "path": t.path.as_str(), "read_version": page.at,
                  "items": items.into_iter().map(|(_, v)| v).collect::<Vec<_>>(), "next_cursor": next}),
        )
    }
}

impl<S: Store> Workbench<S> {
    /// `workbench_list` at the workbench root: the five sections (virtual:
    /// listed whether or not anything lives in them) and a person's files
    /// and directories directly under `<id>/` outside them (`section:
    /// null`, `path` relative to the workbench root), merged in the tree's
    /// order (a directory or section as its name followed by `/`), paged
    /// by `limit` like any other directory. The cursor keeps the store's
    /// continuation of the page it stopped in and the last child returned
    /// (`after`), so a page cut to make room for a section continues
    /// exactly after its last child.
    fn list_root(
        &mut self,
        c: &tools::List,
        incarnation: u64,
        at: u64,
        mut token: String,
        mut after: Option<String>,
        snapshot: bool,
    ) -> Result<Value, WbError> {
        let limit = c.limit.unwrap_or(100) as usize;
        let prefix_len = c.id.len() + 1;
        let section_item =
            |s: Section| json!({"name": s, "kind": "section", "section": s, "path": ""});
        let mut out: Vec<(String, Value)> = Vec::new();
        let mut read_at: u64;
        let next = loop {
            let page = self.store.list_dir(at, &c.id, &token, limit as u32)?;
            read_at = page.at;
            let mut keys: Vec<String> = Vec::new();
            let mut items: Vec<(String, Value)> = Vec::new();
            for r in &page.files {
                let name = &r.path[prefix_len..];
                keys.push(name.to_string());
                if r.generation >= incarnation {
                    items.push((
                        name.to_string(),
                        json!({"name": name, "kind": "file", "section": null, "path": name,
                               "size": r.body.size, "generation": r.generation}),
                    ));
                }
            }
            for d in &page.dirs {
                let name = &d[prefix_len..];
                keys.push(format!("{name}/"));
                items.push((
                    format!("{name}/"),
                    match Section::from_name(name) {
                        Some(s) => section_item(s),
                        None => {
                            json!({"name": name, "kind": "directory", "section": null, "path": name})
                        }
                    },
                ));
            }
            // The keys this store page covers: up to its last child, or
            // all that remain when it is the last page.
            let upper = match page.next {
                Some(_) => keys.iter().max().cloned(),
                None => None,
            };
            for s in Section::ALL {
                let key = format!("{}/", s.name());
                let in_range = after.as_ref().is_none_or(|a| key > *a)
                    && upper.as_ref().is_none_or(|u| key <= *u);
                if in_range && !items.iter().any(|i| i.0 == key) {
                    items.push((key, section_item(s)));
                }
            }
            items.retain(|i| after.as_ref().is_none_or(|a| i.0 > *a));
            items.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            let room = limit - out.len();
            let cut = items.len() > room;
            out.extend(items.into_iter().take(room));
            if out.len() == limit {
                let last = out.last().map(|i| i.0.clone());
                break if cut {
                    Some((token, last))
                } else {
                    page.next.map(|t| (t, last))
                };
            }
            match page.next {
                Some(t) => {
                    token = t;
                    after = upper.max(after);
                }
                None => break None,
            }
        };
        let next = next.map(|(token, after)| {
            ListCursor {
                id: c.id.clone(),
                incarnation,
                dir_key: hex::encode(path::prefix_key(c.id.split('/'))),
                at: read_at,
                snapshot,
                token,
                after,
            }
            .encode()
        });
        Ok(
            json!({"id": c.id, "section": null, "path": "", "read_version": read_at,
                  "items": out.into_iter().map(|(_, v)| v).collect::<Vec<_>>(), "next_cursor": next}),
        )
    }
}

mod lifecycle;
pub use lifecycle::RUN_MANIFEST_MAX_BYTES;
mod query;
pub mod sandbox;

/// The body of a put or append: exactly one of `text` or `base64`.
fn body_of(text: Option<String>, b64: Option<String>) -> Result<Vec<u8>, WbError> {
    match (text, b64) {
        (Some(t), None) => Ok(t.into_bytes()),
        (None, Some(b)) => base64::engine::general_purpose::STANDARD
            .decode(b.as_bytes())
            .map_err(|e| WbError::invalid_input(format!("base64: {e}"))),
        _ => Err(WbError::invalid_input("give exactly one of text or base64")),
    }
}

/// The largest file an edit reads (it needs the whole text for the
/// replacement; old and new text are both held): a larger one is refused.
pub const EDIT_MAX_BYTES: u64 = 64 << 20;

/// How often an append reads again and retries when another writer
/// published the path between its read and its publish.
const APPEND_ATTEMPTS: u32 = 64;

/// How much of a file a structured text read asks the store for at once.
const TEXT_READ_STEP: u64 = 16 << 20;
/// The longest line a structured text read holds (a longer one is read
/// with `format=bytes`).
const MAX_TEXT_LINE: usize = 8 << 20;

/// The lines of a UTF-8 text fed in pieces, as `str::lines` splits them
/// (`\n` or `\r\n`; a last line without an ending counts), keeping only
/// those in `[from, from + limit)` and counting the rest.
struct TextLines {
    from: usize,
    limit: usize,
    seen: usize,
    carry: Vec<u8>,
    page: Vec<String>,
}

impl TextLines {
    fn new(from: usize, limit: usize) -> TextLines {
        TextLines {
            from,
            limit,
            seen: 0,
            carry: Vec::new(),
            page: Vec::new(),
        }
    }

    fn not_text() -> WbError {
        WbError::invalid_input(
            "workbench_read: the file is not UTF-8 text; read it with format=bytes",
        )
    }

    fn line(&mut self, line: &[u8]) -> Result<(), WbError> {
        let s = std::str::from_utf8(line).map_err(|_| Self::not_text())?;
        if self.seen >= self.from && self.seen - self.from < self.limit {
            self.page.push(s.to_string());
        }
        self.seen += 1;
        Ok(())
    }

    fn ended(&mut self, piece: &[u8]) -> Result<(), WbError> {
        let mut whole = std::mem::take(&mut self.carry);
        whole.extend_from_slice(piece);
        let line = whole.strip_suffix(b"\r").unwrap_or(&whole);
        self.line(line)
    }

    fn feed(&mut self, data: &[u8]) -> Result<(), WbError> {
        let mut start = 0;
        for (i, _) in data.iter().enumerate().filter(|(_, b)| **b == b'\n') {
            if self.carry.is_empty() {
                let line = &data[start..i];
                self.line(line.strip_suffix(b"\r").unwrap_or(line))?;
            } else {
                self.ended(&data[start..i])?;
            }
            start = i + 1;
        }
        self.carry.extend_from_slice(&data[start..]);
        if self.carry.len() > MAX_TEXT_LINE {
            return Err(WbError::invalid_input(format!(
                "workbench_read: a line longer than {} MiB; read it with format=bytes",
                MAX_TEXT_LINE >> 20
            )));
        }
        Ok(())
    }

    /// The number of lines and the page.
    fn finish(mut self) -> Result<(usize, Vec<String>), WbError> {
        if !self.carry.is_empty() {
            let last = std::mem::take(&mut self.carry);
            self.line(&last)?;
        }
        Ok((self.seen, self.page))
    }
}

/// What a read cursor continues: the file (its physical path) and the
/// format (a byte offset and a line number are not interchangeable).
fn read_scope(full: &str, bytes: bool) -> String {
    let mut h = blake3::Hasher::new();
    h.update(b"nokv read cursor\0");
    h.update(full.as_bytes());
    h.update(if bytes { b"\0bytes" } else { b"\0lines" });
    hex::encode(&h.finalize().as_bytes()[..8])
}

fn read_cursor(generation: u64, offset: u64, scope: &str) -> String {
    format!("r2.{generation}.{offset}.{scope}")
}

/// The generation and offset of a cursor issued for `scope`.
fn decode_read_cursor(s: &str, scope: &str) -> Result<(u64, u64), WbError> {
    let bad = || WbError::new("invalid_cursor", "not a read cursor of this bridge");
    let mut parts = s.split('.');
    if parts.next() != Some("r2") {
        return Err(bad());
    }
    let g = parts.next().and_then(|x| x.parse().ok()).ok_or_else(bad)?;
    let o = parts.next().and_then(|x| x.parse().ok()).ok_or_else(bad)?;
    let sc = parts.next().ok_or_else(bad)?;
    if parts.next().is_some() {
        return Err(bad());
    }
    if sc != scope {
        return Err(WbError::new(
            "invalid_cursor",
            "the cursor belongs to another read (another file, or the other format)",
        ));
    }
    Ok((g, o))
}

/// A list cursor: bound to the workbench and its incarnation, the
/// directory's physical key, the read version and the store's
/// continuation token (after the last returned child).
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ListCursor {
    id: String,
    incarnation: u64,
    dir_key: String,
    at: u64,
    snapshot: bool,
    token: String,
    /// The workbench root only: the last child returned (a page may stop
    /// inside the store's page to make room for the virtual sections).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    after: Option<String>,
}

impl ListCursor {
    fn encode(&self) -> String {
        format!(
            "l1.{}",
            hex::encode(serde_json::to_vec(self).expect("json"))
        )
    }

    fn decode(s: &str) -> Result<ListCursor, WbError> {
        let bad = || WbError::new("invalid_cursor", "not a list cursor of this bridge");
        let h = s.strip_prefix("l1.").ok_or_else(bad)?;
        let bytes = hex::decode(h).map_err(|_| bad())?;
        serde_json::from_slice(&bytes).map_err(|_| bad())
    }
}

#[cfg(test)]
mod text_lines_tests {
    use super::TextLines;
    use proptest::prelude::*;

    fn pieces(data: &[u8], step: usize, from: usize, limit: usize) -> (usize, Vec<String>) {
        let mut t = TextLines::new(from, limit);
        for piece in data.chunks(step.max(1)) {
            t.feed(piece).unwrap();
        }
        t.finish().unwrap()
    }

    proptest! {
        /// Fed in pieces of any size, the page and the count are what
        /// `str::lines` gives for the whole text.
        #[test]
        fn fed_in_pieces_it_splits_as_str_lines(
            text in "[a\\r\\né ]{0,64}",
            step in 1usize..9,
            from in 0usize..12,
            limit in 1usize..6,
        ) {
            let all: Vec<&str> = text.lines().collect();
            let want: Vec<String> = all.iter().skip(from).take(limit).map(|s| s.to_string()).collect();
            prop_assert_eq!(pieces(text.as_bytes(), step, from, limit), (all.len(), want));
        }
    }

    #[test]
    fn bytes_that_are_not_utf8_are_refused_anywhere_in_the_file() {
        let mut t = TextLines::new(0, 1);
        t.feed(b"fine\nalso fine\n").unwrap();
        t.feed(b"bad \xff here\n").unwrap_err();
    }
}

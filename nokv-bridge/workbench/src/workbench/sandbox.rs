//! The local sandbox adapters' facade side: `materialize` lists a
//! workbench's files (the binary writes them), `collect` publishes a
//! local directory's files in one change.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::{check_content_type, content_type_of, message_content_type, Workbench};
use crate::error::WbError;
use crate::identity::canonical_json;
use crate::path::Section;
use crate::store::{BodyRef, Edit, NewBody, Publish, Published, Refusal, Row, Store};

/// One file of a workbench, for materialize.
#[derive(Clone, Debug)]
pub struct FileEntry {
    /// The file's section; `None` for a file outside the five section
    /// directories (a person's submit to `<id>/<path>`).
    pub section: Option<Section>,
    /// Relative to the section (to the workbench root without one).
    pub path: String,
    pub body: BodyRef,
    pub generation: u64,
    pub content_type: String,
}

/// One local file, for collect.
#[derive(Clone, Debug)]
pub struct LocalFile {
    pub section: Section,
    pub path: String,
    pub source: LocalSource,
    /// An explicit content type (else derived from the extension).
    pub content_type: Option<String>,
}

/// Where a collected file's bytes are.
#[derive(Clone, Debug)]
pub enum LocalSource {
    /// In memory.
    Bytes(Vec<u8>),
    /// A local file of `size` bytes (its size when the directory was
    /// walked); files above [`STREAM_ABOVE`] bytes are streamed to the
    /// store ([`Store::upload_files`]), never held in memory.
    File { path: PathBuf, size: u64 },
}

/// What `nokv materialize` wrote into a directory
/// (`DIR/.nokv/materialized.json`, which collect reads and never collects):
/// the workbench, its incarnation and, per `section/path`, the generation
/// and body written. Collect of a directory with this record publishes
/// only what changed there since, and refuses a path that changed both
/// there and in the workbench ([`Workbench::collect_since`]).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Materialized {
    pub schema: String,
    pub id: String,
    pub incarnation: u64,
    pub files: BTreeMap<String, MaterializedFile>,
}

/// One file as materialize wrote it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MaterializedFile {
    pub generation: u64,
    pub size: u64,
    /// Hex BLAKE3 of the body.
    pub blake3: String,
}

/// The schema name of [`Materialized`].
pub const MATERIALIZED_SCHEMA: &str = "nokv.workbench.materialized.v1";

impl FileEntry {
    /// The path relative to the workbench root (`section/path`, or the
    /// path of a file outside the sections): the key of the materialize
    /// record and of `content-types.json`, and where materialize writes it
    /// under its directory.
    pub fn key(&self) -> String {
        match self.section {
            Some(s) => format!("{s}/{}", self.path),
            None => self.path.clone(),
        }
    }
}

/// A path relative to a workbench root split into its section and the
/// rest; `None` when its first component is not one of the five sections
/// (a file outside them, or a path directly under the root).
pub fn split_section(rel: &str) -> Option<(Section, &str)> {
    let (sec, rest) = rel.split_once('/')?;
    Some((Section::from_name(sec)?, rest))
}

impl MaterializedFile {
    /// The record of a body written at `generation`.
    pub fn of(generation: u64, content: &[u8; 32], size: u64) -> MaterializedFile {
        MaterializedFile {
            generation,
            size,
            blake3: hex::encode(content),
        }
    }

    /// Whether the body written was `content` (BLAKE3) of `size` bytes.
    pub fn is(&self, content: &[u8; 32], size: u64) -> bool {
        self.size == size && self.blake3 == hex::encode(content)
    }
}

/// Files larger than this (one chunk of Scribe's profile 1) are streamed
/// by collect; smaller ones are read into memory and uploaded together.
pub const STREAM_ABOVE: u64 = 1 << 20;

/// BLAKE3 of a local file and its size, read in 4 MiB pieces (each
/// hashed on every core).
pub fn hash_file(path: &Path) -> Result<([u8; 32], u64), WbError> {
    use std::io::Read;
    let io = |e: std::io::Error| WbError::new("storage", format!("{}: {e}", path.display()));
    let mut f = std::fs::File::open(path).map_err(io)?;
    let mut h = blake3::Hasher::new();
    let mut buf = vec![0u8; 4 << 20];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        h.update_rayon(&buf[..n]);
        size += n as u64;
    }
    Ok((*h.finalize().as_bytes(), size))
}

fn hash_bytes(b: &[u8]) -> [u8; 32] {
    if b.len() >= 1 << 20 {
        *blake3::Hasher::new().update_rayon(b).finalize().as_bytes()
    } else {
        *blake3::hash(b).as_bytes()
    }
}

/// One file collect publishes.
struct Pending {
    full: String,
    /// `section/path` (the key of a [`Materialized`] record).
    key: String,
    base: u64,
    content_type: Option<String>,
}

impl<S: Store> Workbench<S> {
    /// Every live file of workbench `id`: those of the five sections and
    /// those a person submitted outside them (the change messages of their
    /// generations, for content types, asked for together).
    pub fn files(&mut self, id: &str) -> Result<Vec<FileEntry>, WbError> {
        let inc = self.incarnation(id)?;
        let mut rows: Vec<(Option<Section>, String, Row)> = Vec::new();
        let mut token = String::new();
        loop {
            let page = self.store.list_files(0, id, &token, 1000)?;
            for row in page.files.into_iter().filter(|r| r.generation >= inc) {
                let Some(rest) = row.path.strip_prefix(id).and_then(|r| r.strip_prefix('/')) else {
                    continue;
                };
                // A file outside the five sections (a person's submit) is
                // one of the workbench's files too, at its path.
                let (section, rel) = match split_section(rest) {
                    Some((s, rel)) => (Some(s), rel.to_string()),
                    None => (None, rest.to_string()),
                };
                rows.push((section, rel, row));
            }
            match page.next {
                Some(t) => token = t,
                None => break,
            }
        }
        let messages = self.generation_messages(rows.iter().map(|(_, _, r)| r.generation))?;
        Ok(rows
            .into_iter()
            .map(|(section, rel, row)| {
                let ct = message_content_type(&messages[&row.generation], &row.path)
                    .unwrap_or_else(|| content_type_of(&rel))
                    .to_string();
                FileEntry {
                    section,
                    path: rel,
                    generation: row.generation,
                    body: row.body,
                    content_type: ct,
                }
            })
            .collect())
    }

    /// Bytes of a body.
    pub fn read_body(&mut self, body: &BodyRef, offset: u64, len: u64) -> Result<Vec<u8>, WbError> {
        self.store.read(body, offset, len)
    }

    /// Publish `files` into workbench `id` in one change: new paths are
    /// created, changed ones replaced (base = the generation seen), and
    /// byte-identical ones left alone. Nothing is deleted.
    ///
    /// Large local files ([`LocalSource::File`] above [`STREAM_ABOVE`])
    /// are streamed: one whose size equals its live row's is hashed first
    /// (identical: left alone, nothing uploaded); the others are read once
    /// by [`Store::upload_files`], uploaded under the publication's
    /// operation before the change is submitted.
    /// The live rows (of this incarnation) of the repository paths
    /// `targets` of workbench `id`, at one version: a stat each for a few,
    /// otherwise one listing of their deepest common directory (not of the
    /// whole workbench).
    fn live_rows(&mut self, id: &str, targets: &[String]) -> Result<HashMap<String, Row>, WbError> {
        let inc = self.incarnation(id)?;
        let mut live: HashMap<String, Row> = HashMap::new();
        if targets.is_empty() {
            return Ok(live);
        }
        if targets.len() <= STAT_UP_TO {
            let at = self.store.head()?;
            for full in targets {
                if let Some(r) = self.store.stat(at, full)? {
                    if r.generation >= inc {
                        live.insert(full.clone(), r);
                    }
                }
            }
            return Ok(live);
        }
        let dir = common_dir(targets);
        let (mut at, mut token) = (0, String::new());
        loop {
            let page = self.store.list_files(at, &dir, &token, 1000)?;
            // Every later page at the version the first one read.
            at = page.at;
            for r in page.files.into_iter().filter(|r| r.generation >= inc) {
                live.insert(r.path.clone(), r);
            }
            match page.next {
                Some(t) => token = t,
                None => break,
            }
        }
        Ok(live)
    }

    pub fn collect(&mut self, id: &str, files: Vec<LocalFile>) -> Result<Value, WbError> {
        self.collect_since(id, files, Vec::new(), None)
    }

    /// The record materialize leaves with `files` of workbench `id`.
    pub fn materialized(&mut self, id: &str, files: &[FileEntry]) -> Result<Materialized, WbError> {
        let incarnation = self.incarnation(id)?;
        Ok(Materialized {
            schema: MATERIALIZED_SCHEMA.into(),
            id: id.into(),
            incarnation,
            files: files
                .iter()
                .map(|f| {
                    (
                        f.key(),
                        MaterializedFile::of(f.generation, &f.body.content, f.body.size),
                    )
                })
                .collect(),
        })
    }

    /// As [`Workbench::collect`]; with `since` (what materialize wrote into
    /// the directory) a path is published only when it changed here since,
    /// on the generation materialize wrote (0: it wrote none):
    /// - a file unchanged since materialize is left alone, even when the
    ///   workbench's copy moved (another agent's newer version stays);
    /// - a file changed here, or removed here (a deletion), whose live
    ///   generation also moved is refused: `collect_conflict` naming every
    ///   such path, nothing published;
    /// - a removed file whose live generation did not move is deleted
    ///   (reserved files are never deleted: commit and restore own them).
    ///
    /// On success `since` is brought up to date with what the workbench now
    /// holds for the paths published or found identical.
    ///
    /// `outside` are the local files outside the five section directories
    /// (their path relative to the workbench root, and where they are):
    /// collect never publishes one. Each must be unchanged since
    /// materialize (a person's file materialize wrote) or identical to the
    /// live file at that path; any other is refused by name
    /// (`invalid_input`), nothing published. A person's file removed here
    /// is never deleted there.
    pub fn collect_since(
        &mut self,
        id: &str,
        files: Vec<LocalFile>,
        outside: Vec<(String, PathBuf)>,
        mut since: Option<&mut Materialized>,
    ) -> Result<Value, WbError> {
        let mut t = std::time::Instant::now();
        let inc = self.incarnation(id)?;
        if let Some(m) = since.as_deref() {
            if m.schema != MATERIALIZED_SCHEMA || m.id != id || m.incarnation != inc {
                return Err(WbError::invalid_input(format!(
                    "the directory was materialized from workbench {:?} (incarnation {}), not {id:?} (incarnation {inc}); collect it into that workbench, or remove .nokv/materialized.json to collect without it",
                    m.id, m.incarnation
                )));
            }
        }
        // Every target checked before anything is read.
        let mut targets = Vec::with_capacity(files.len());
        let mut keys = Vec::with_capacity(files.len());
        let mut reserved = Vec::with_capacity(files.len());
        let mut seen = std::collections::HashSet::new();
        for f in &files {
            if let Some(ct) = &f.content_type {
                check_content_type(ct)?;
            }
            // A reserved file (a run or restore manifest materialized
            // here) is refused only when collect would publish it.
            let is_reserved = super::is_reserved(f.section, &f.path);
            let t = self.target(id, f.section, &f.path, false, !is_reserved)?;
            reserved.push(is_reserved);
            if !seen.insert(t.full.clone()) {
                return Err(WbError::invalid_input(format!(
                    "{} is collected twice",
                    t.full
                )));
            }
            targets.push(t.full);
            keys.push(format!("{}/{}", f.section, f.path));
        }
        // Files materialized here and since removed (key, full path, the
        // generation written).
        let mut removed: Vec<(String, String, u64)> = Vec::new();
        if let Some(m) = since.as_deref() {
            let here: std::collections::HashSet<&str> = keys.iter().map(String::as_str).collect();
            for (key, rec) in &m.files {
                if here.contains(key.as_str()) {
                    continue;
                }
                let bad = || {
                    WbError::invalid_input(format!(
                        "the materialize record names {key:?}, not a section/path"
                    ))
                };
                // A file outside the sections (a person's) is never deleted.
                let Some((section, path)) = split_section(key) else {
                    scribe_format::path::validate(key).map_err(|_| bad())?;
                    continue;
                };
                if super::is_reserved(section, path) {
                    continue;
                }
                let t = self.target(id, section, path, false, false)?;
                removed.push((key.clone(), t.full, rec.generation));
            }
        }
        // Files outside the sections: each must name a path a person's
        // file can have (else it is refused at once, as a changed one).
        let mut refused_outside: Vec<String> = Vec::new();
        let mut outside_targets: Vec<(String, String, PathBuf)> = Vec::new();
        for (rel, path) in outside {
            let full = format!("{id}/{rel}");
            if scribe_format::path::validate(&full).is_err() {
                refused_outside.push(rel);
            } else {
                outside_targets.push((rel, full, path));
            }
        }
        let mut all = targets.clone();
        all.extend(removed.iter().map(|r| r.1.clone()));
        all.extend(outside_targets.iter().map(|o| o.1.clone()));
        let live = self.live_rows(id, &all)?;
        crate::phase("collect: list", &mut t);
        // Paths identical here and there: their record becomes the live row.
        let mut settled: Vec<(String, Option<MaterializedFile>)> = Vec::new();
        let mut unchanged = 0u64;
        for (rel, full, path) in outside_targets {
            let recorded = since.as_deref().and_then(|m| m.files.get(&rel));
            let current = live.get(&full);
            let size = std::fs::metadata(&path)
                .map_err(|e| WbError::new("storage", format!("{}: {e}", path.display())))?
                .len();
            let same = if recorded.is_some_and(|r| r.size == size)
                || current.is_some_and(|r| r.body.size == size)
            {
                let (content, n) = hash_file(&path)?;
                if recorded.is_some_and(|r| r.is(&content, n)) {
                    Some(None)
                } else if current.is_some_and(|r| r.body.content == content && r.body.size == n) {
                    Some(current.map(row_record))
                } else {
                    None
                }
            } else {
                None
            };
            match same {
                Some(settle) => {
                    unchanged += 1;
                    if let Some(r) = settle {
                        settled.push((rel, Some(r)));
                    }
                }
                None => refused_outside.push(rel),
            }
        }
        if !refused_outside.is_empty() {
            refused_outside.sort();
            return Err(WbError::invalid_input(format!(
                "outside the five section directories, and not as materialize wrote them nor as the workbench holds them: {}; collect publishes only input/, scripts/, outputs/, logs/ and metadata/ (a file outside them is a person's: restore it or remove it here), nothing was published",
                refused_outside.join(", ")
            )));
        }
        let (mut created, mut replaced) = (0u64, 0u64);
        // Bodies known now (in memory), and files to stream.
        let mut ready: Vec<(Pending, NewBody, [u8; 32])> = Vec::new();
        let mut streamed: Vec<(Pending, PathBuf, u64)> = Vec::new();
        // Paths changed here and in the workbench since materialize.
        let mut conflicts: Vec<String> = Vec::new();
        for (((f, full), key), is_reserved) in
            files.into_iter().zip(targets).zip(keys).zip(reserved)
        {
            let refuse = |changed: bool| {
                if is_reserved && changed {
                    Err(super::reserved_error(&f.path))
                } else {
                    Ok(())
                }
            };
            let current = live.get(&full);
            let live_generation = current.map_or(0, |r| r.generation);
            let recorded = since.as_deref().map(|m| m.files.get(&key));
            let (base, moved) = match recorded {
                Some(r) => {
                    let base = r.map_or(0, |r| r.generation);
                    (base, live_generation != base)
                }
                None => (live_generation, false),
            };
            // Unchanged here since materialize, or identical to the live body.
            let same_here = |content: &[u8; 32], size: u64| {
                recorded.flatten().is_some_and(|r| r.is(content, size))
            };
            let same_live = |content: &[u8; 32], size: u64| {
                current.is_some_and(|r| r.body.content == *content && r.body.size == size)
            };
            let pending = Pending {
                base,
                full: full.clone(),
                key: key.clone(),
                content_type: f.content_type,
            };
            let known = match f.source {
                LocalSource::Bytes(bytes) => (hash_bytes(&bytes), bytes),
                LocalSource::File { path, size } if size <= STREAM_ABOVE => {
                    let bytes = std::fs::read(&path)
                        .map_err(|e| WbError::new("storage", format!("{}: {e}", path.display())))?;
                    (hash_bytes(&bytes), bytes)
                }
                LocalSource::File { path, size } => {
                    // The size written or live: maybe identical.
                    let maybe = recorded.flatten().is_some_and(|r| r.size == size)
                        || current.is_some_and(|r| r.body.size == size);
                    if maybe {
                        let (content, n) = hash_file(&path)?;
                        if same_here(&content, n) {
                            unchanged += 1;
                            continue;
                        }
                        if same_live(&content, n) {
                            unchanged += 1;
                            settled.push((key, current.map(row_record)));
                            continue;
                        }
                    }
                    refuse(true)?;
                    if moved {
                        conflicts.push(key);
                    } else {
                        streamed.push((pending, path, size));
                    }
                    continue;
                }
            };
            let (content, bytes) = known;
            let size = bytes.len() as u64;
            if same_here(&content, size) {
                unchanged += 1;
            } else if same_live(&content, size) {
                unchanged += 1;
                settled.push((key, current.map(row_record)));
            } else if moved {
                refuse(true)?;
                conflicts.push(key);
            } else {
                refuse(true)?;
                ready.push((pending, NewBody::Hashed { bytes, content }, content));
            }
        }
        // Removed here: deleted there unless the workbench's copy moved.
        let mut deletes: Vec<(String, String, u64)> = Vec::new();
        for (key, full, generation) in removed {
            match live.get(&full) {
                None => settled.push((key, None)),
                Some(r) if r.generation == generation => deletes.push((key, full, generation)),
                Some(_) => conflicts.push(key),
            }
        }
        if !conflicts.is_empty() {
            conflicts.sort();
            return Err(WbError::new(
                "collect_conflict",
                format!(
                    "changed (or removed) here and changed in workbench {id:?} since it was materialized, nothing was published: {}; materialize into another directory, merge, and collect again",
                    conflicts.join(", ")
                ),
            ));
        }
        crate::phase("collect: hash+compare", &mut t);
        let settle = |since: Option<&mut Materialized>,
                      settled: Vec<(String, Option<MaterializedFile>)>,
                      published: Vec<(String, Option<MaterializedFile>)>| {
            if let Some(m) = since {
                for (key, rec) in settled.into_iter().chain(published) {
                    match rec {
                        Some(r) => m.files.insert(key, r),
                        None => m.files.remove(&key),
                    };
                }
            }
        };
        if ready.is_empty() && streamed.is_empty() && deletes.is_empty() {
            settle(since.as_deref_mut(), settled, Vec::new());
            return Ok(
                json!({"id": id, "change": null, "created": 0, "replaced": 0, "deleted": 0, "unchanged": unchanged}),
            );
        }
        // The operation is chosen before the streamed bodies are read (their
        // chunks are uploaded under it): from the request as known now
        // (paths, bases, the in-memory bodies' hashes, the streamed files'
        // sizes, the deletions) and a per-attempt nonce, like every
        // publication's.
        let mut pre: Vec<Value> = ready
            .iter()
            .map(|(p, _, c)| json!([p.full, hex::encode(c), p.base]))
            .chain(
                streamed
                    .iter()
                    .map(|(p, _, size)| json!([p.full, size, p.base])),
            )
            .chain(
                deletes
                    .iter()
                    .map(|(_, full, base)| json!([full, null, base])),
            )
            .collect();
        pre.sort_by_key(|v| v[0].as_str().unwrap_or_default().to_string());
        let pre_req: [u8; 32] =
            *blake3::hash(canonical_json(&json!(["nokv collect upload", id, inc, pre])).as_bytes())
                .as_bytes();
        let mut bases: Vec<u64> = ready.iter().map(|(p, _, _)| p.base).collect();
        bases.extend(streamed.iter().map(|(p, _, _)| p.base));
        bases.extend(deletes.iter().map(|d| d.2));
        let operation = super::operation_id(&pre_req, &bases);
        let paths: Vec<PathBuf> = streamed.iter().map(|(_, p, _)| p.clone()).collect();
        let uploaded = self.store.upload_files(operation, &paths)?;
        crate::phase("collect: upload", &mut t);
        for ((p, path, size), u) in streamed.into_iter().zip(uploaded) {
            if u.size != size {
                return Err(WbError::new(
                    "storage",
                    format!(
                        "{} changed while collect read it ({size} bytes, then {}); nothing was published",
                        path.display(),
                        u.size
                    ),
                ));
            }
            if let Some(r) = live
                .get(&p.full)
                .filter(|r| r.body.content == u.content && r.body.size == u.size)
            {
                unchanged += 1;
                settled.push((p.key, Some(row_record(r))));
                continue;
            }
            ready.push((p, u.body, u.content));
        }
        // The request identity (in the change message): every published
        // path with its content (null: deleted) and base, in path order.
        ready.sort_by(|a, b| a.0.full.cmp(&b.0.full));
        let mut identity = Vec::new();
        let mut ct_lines = String::new();
        let mut edits = Vec::new();
        // What each published path's record becomes (its generation: the change).
        let mut written: Vec<(String, Option<Written>)> = Vec::new();
        for (p, body, content) in ready {
            if p.base == 0 {
                created += 1;
            } else {
                replaced += 1;
            }
            // Only a type the path's extension does not already give is
            // recorded (materialize lists every file's type, and the message
            // holds at most 64 KiB).
            if let Some(ct) = p
                .content_type
                .as_deref()
                .filter(|ct| *ct != content_type_of(&p.full))
            {
                ct_lines.push_str(&format!("nokv-path-content-type: {ct} {}\n", p.full));
            }
            identity.push(json!([p.full, hex::encode(content), p.base]));
            written.push((p.key, Some((content, body_size(&body)))));
            edits.push(Edit::Put {
                path: p.full,
                base: p.base,
                body,
            });
        }
        let deleted = deletes.len() as u64;
        for (key, full, base) in deletes {
            identity.push(json!([full, null, base]));
            written.push((key, None));
            edits.push(Edit::Delete { path: full, base });
        }
        identity.sort_by_key(|v| v[0].as_str().unwrap_or_default().to_string());
        if edits.is_empty() {
            settle(since.as_deref_mut(), settled, Vec::new());
            return Ok(
                json!({"id": id, "change": null, "created": 0, "replaced": 0, "deleted": 0, "unchanged": unchanged}),
            );
        }
        let req: [u8; 32] =
            *blake3::hash(canonical_json(&json!([id, inc, identity])).as_bytes()).as_bytes();
        let message = format!(
            "nokv collect {id}\nnokv-request: {}\n{ct_lines}",
            hex::encode(req)
        );
        // A path the publication puts (to recognise an earlier attempt's change).
        let first = edits.iter().find_map(|e| match e {
            Edit::Put { path, .. } => Some(path.clone()),
            Edit::Delete { .. } => None,
        });
        let published = self.store.publish(Publish {
            operation,
            message,
            edits,
            timestamp_ms: (self.clock)(),
        })?;
        let change = match published {
            Published::Accepted { version } => (version, false),
            Published::Refused(r @ (Refusal::Stale(_) | Refusal::Exists(_))) => {
                // An earlier attempt of this same request (same bases,
                // same bytes) may have won: its change is the result.
                let row = match &first {
                    Some(first) => self.store.stat(0, first)?,
                    None => None,
                };
                match row {
                    Some(row) if self.published_by(&row, &req)? => (row.generation, true),
                    _ => return Err(super::refusal_error(r)),
                }
            }
            Published::Refused(r) => return Err(super::refusal_error(r)),
        };
        let (version, replay) = change;
        let published: Vec<(String, Option<MaterializedFile>)> = written
            .into_iter()
            .map(|(key, w)| {
                (
                    key,
                    w.map(|(c, size)| MaterializedFile::of(version, &c, size)),
                )
            })
            .collect();
        settle(since, settled, published);
        Ok(
            json!({"id": id, "change": version, "created": created, "replaced": replaced,
                   "deleted": deleted, "unchanged": unchanged, "idempotent_replay": replay}),
        )
    }
}

/// A published body: its BLAKE3 and size.
type Written = ([u8; 32], u64);

/// The record of a live row.
fn row_record(r: &Row) -> MaterializedFile {
    MaterializedFile::of(r.generation, &r.body.content, r.body.size)
}

/// The size of a body to publish.
fn body_size(b: &NewBody) -> u64 {
    match b {
        NewBody::Bytes(bytes) | NewBody::Hashed { bytes, .. } => bytes.len() as u64,
        NewBody::Existing(body) | NewBody::Uploaded { body, .. } => body.size,
    }
}

/// A collect of at most this many files stats each instead of listing.
const STAT_UP_TO: usize = 32;

/// The deepest directory holding every path of `paths` (non-empty, each
/// `id/section/...`, so at least the workbench's own directory).
fn common_dir(paths: &[String]) -> String {
    let first: Vec<&str> = paths[0].split('/').collect();
    // Directories only: never the file name itself.
    let mut n = first.len() - 1;
    for p in &paths[1..] {
        let parts: Vec<&str> = p.split('/').collect();
        let same = first
            .iter()
            .zip(&parts[..parts.len() - 1])
            .take_while(|(a, b)| a == b)
            .count();
        n = n.min(same);
    }
    first[..n.max(1)].join("/")
}

#[cfg(test)]
mod tests {
    use super::common_dir;

    #[test]
    fn the_common_directory_is_the_deepest_that_holds_every_path() {
        let v = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            common_dir(&v(&["w/outputs/a/b.txt", "w/outputs/a/c.txt"])),
            "w/outputs/a"
        );
        assert_eq!(
            common_dir(&v(&["w/outputs/a/b.txt", "w/outputs/c.txt"])),
            "w/outputs"
        );
        assert_eq!(common_dir(&v(&["w/outputs/a.txt", "w/input/a.txt"])), "w");
        // A file named like a directory of another path is not a directory.
        assert_eq!(
            common_dir(&v(&["w/outputs/a", "w/outputs/a/b"])),
            "w/outputs"
        );
        assert_eq!(common_dir(&v(&["w/outputs/x.txt"])), "w/outputs");
    }
}

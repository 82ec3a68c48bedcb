//! The local sandbox adapters' facade side: `materialize` lists a
//! workbench's files (the binary writes them), `collect` publishes a
//! local directory's files in one change.

use std::collections::HashMap;
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
    pub section: Section,
    /// Relative to the section.
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

/// Files larger than this (one chunk of Scribe's profile 1) are streamed
/// by collect; smaller ones are read into memory and uploaded together.
pub const STREAM_ABOVE: u64 = 1 << 20;

/// BLAKE3 of a local file, read in 4 MiB pieces (each hashed on every core).
fn hash_file(path: &Path) -> Result<([u8; 32], u64), WbError> {
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
    base: u64,
    content_type: Option<String>,
}

impl<S: Store> Workbench<S> {
    /// Every live file of workbench `id` (the change messages of their
    /// generations, for content types, asked for together).
    pub fn files(&mut self, id: &str) -> Result<Vec<FileEntry>, WbError> {
        let inc = self.incarnation(id)?;
        let mut rows: Vec<(Section, String, Row)> = Vec::new();
        let mut token = String::new();
        loop {
            let page = self.store.list_files(0, id, &token, 1000)?;
            for row in page.files.into_iter().filter(|r| r.generation >= inc) {
                let rest = &row.path[id.len() + 1..];
                let Some((sec, rel)) = rest.split_once('/') else {
                    continue;
                };
                let Some(section) = Section::from_name(sec) else {
                    continue;
                };
                rows.push((section, rel.to_string(), row));
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
        let mut t = std::time::Instant::now();
        // Every target checked before anything is read.
        let mut targets = Vec::with_capacity(files.len());
        let mut seen = std::collections::HashSet::new();
        for f in &files {
            if let Some(ct) = &f.content_type {
                check_content_type(ct)?;
            }
            let t = self.target(id, f.section, &f.path, false, true)?;
            if !seen.insert(t.full.clone()) {
                return Err(WbError::invalid_input(format!(
                    "{} is collected twice",
                    t.full
                )));
            }
            targets.push(t.full);
        }
        let inc = self.incarnation(id)?;
        let live = self.live_rows(id, &targets)?;
        crate::phase("collect: list", &mut t);
        let (mut created, mut replaced, mut unchanged) = (0u64, 0u64, 0u64);
        // Bodies known now (in memory), and files to stream.
        let mut ready: Vec<(Pending, NewBody, [u8; 32])> = Vec::new();
        let mut streamed: Vec<(Pending, PathBuf, u64)> = Vec::new();
        for (f, full) in files.into_iter().zip(targets) {
            let current = live.get(&full);
            let same = |content: &[u8; 32], size: u64| {
                current.is_some_and(|r| r.body.content == *content && r.body.size == size)
            };
            let pending = Pending {
                base: current.map_or(0, |r| r.generation),
                full: full.clone(),
                content_type: f.content_type,
            };
            match f.source {
                LocalSource::Bytes(bytes) => {
                    let content = hash_bytes(&bytes);
                    if same(&content, bytes.len() as u64) {
                        unchanged += 1;
                        continue;
                    }
                    ready.push((pending, NewBody::Hashed { bytes, content }, content));
                }
                LocalSource::File { path, size } if size <= STREAM_ABOVE => {
                    let bytes = std::fs::read(&path)
                        .map_err(|e| WbError::new("storage", format!("{}: {e}", path.display())))?;
                    let content = hash_bytes(&bytes);
                    if same(&content, bytes.len() as u64) {
                        unchanged += 1;
                        continue;
                    }
                    ready.push((pending, NewBody::Hashed { bytes, content }, content));
                }
                LocalSource::File { path, size } => {
                    // The same size as the live body: maybe identical.
                    if current.is_some_and(|r| r.body.size == size) {
                        let (content, n) = hash_file(&path)?;
                        if same(&content, n) {
                            unchanged += 1;
                            continue;
                        }
                    }
                    streamed.push((pending, path, size));
                }
            }
        }
        crate::phase("collect: hash+compare", &mut t);
        if ready.is_empty() && streamed.is_empty() {
            return Ok(
                json!({"id": id, "change": null, "created": 0, "replaced": 0, "unchanged": unchanged}),
            );
        }
        // The operation is chosen before the streamed bodies are read (their
        // chunks are uploaded under it): from the request as known now
        // (paths, bases, the in-memory bodies' hashes, the streamed files'
        // sizes) and a per-attempt nonce, like every publication's.
        let mut pre: Vec<Value> = ready
            .iter()
            .map(|(p, _, c)| json!([p.full, hex::encode(c), p.base]))
            .chain(
                streamed
                    .iter()
                    .map(|(p, _, size)| json!([p.full, size, p.base])),
            )
            .collect();
        pre.sort_by_key(|v| v[0].as_str().unwrap_or_default().to_string());
        let pre_req: [u8; 32] =
            *blake3::hash(canonical_json(&json!(["nokv collect upload", id, inc, pre])).as_bytes())
                .as_bytes();
        let mut bases: Vec<u64> = ready.iter().map(|(p, _, _)| p.base).collect();
        bases.extend(streamed.iter().map(|(p, _, _)| p.base));
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
            if live
                .get(&p.full)
                .is_some_and(|r| r.body.content == u.content && r.body.size == u.size)
            {
                unchanged += 1;
                continue;
            }
            ready.push((p, u.body, u.content));
        }
        // The request identity (in the change message): every published
        // path with its content and base, in path order.
        ready.sort_by(|a, b| a.0.full.cmp(&b.0.full));
        let mut identity = Vec::new();
        let mut ct_lines = String::new();
        let mut edits = Vec::new();
        let mut bases = Vec::new();
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
            bases.push(p.base);
            edits.push(Edit::Put {
                path: p.full,
                base: p.base,
                body,
            });
        }
        if edits.is_empty() {
            return Ok(
                json!({"id": id, "change": null, "created": 0, "replaced": 0, "unchanged": unchanged}),
            );
        }
        let req: [u8; 32] =
            *blake3::hash(canonical_json(&json!([id, inc, identity])).as_bytes()).as_bytes();
        let message = format!(
            "nokv collect {id}\nnokv-request: {}\n{ct_lines}",
            hex::encode(req)
        );
        let first = match &edits[0] {
            Edit::Put { path, .. } | Edit::Delete { path, .. } => path.clone(),
        };
        let published = self.store.publish(Publish {
            operation,
            message,
            edits,
            timestamp_ms: (self.clock)(),
        })?;
        let result = |change: u64, replay: bool| {
            json!({"id": id, "change": change, "created": created, "replaced": replaced,
                   "unchanged": unchanged, "idempotent_replay": replay})
        };
        match published {
            Published::Accepted { version } => Ok(result(version, false)),
            Published::Refused(r @ (Refusal::Stale(_) | Refusal::Exists(_))) => {
                // An earlier attempt of this same request (same bases,
                // same bytes) may have won: its change is the result.
                match self.store.stat(0, &first)? {
                    Some(row) if self.published_by(&row, &req)? => Ok(result(row.generation, true)),
                    _ => Err(super::refusal_error(r)),
                }
            }
            Published::Refused(r) => Err(super::refusal_error(r)),
        }
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

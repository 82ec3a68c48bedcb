//! The local sandbox adapters' facade side: `materialize` lists a
//! workbench's files (the binary writes them), `collect` publishes a
//! local directory's files in one change.

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Value};

use super::{check_content_type, content_type_of, message_content_type, Workbench};
use crate::error::WbError;
use crate::identity::canonical_json;
use crate::path::Section;
use crate::store::{BodyRef, Edit, NewBody, Row, Store};

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
    pub bytes: Vec<u8>,
    /// An explicit content type (else derived from the extension).
    pub content_type: Option<String>,
}

impl<S: Store> Workbench<S> {
    /// Every live file of workbench `id`.
    pub fn files(&mut self, id: &str) -> Result<Vec<FileEntry>, WbError> {
        let inc = self.incarnation(id)?;
        let mut out = Vec::new();
        let mut messages: BTreeMap<u64, String> = BTreeMap::new();
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
                if let std::collections::btree_map::Entry::Vacant(slot) =
                    messages.entry(row.generation)
                {
                    let info = self.store.version_info(row.generation)?;
                    slot.insert(info.message);
                }
                let ct = message_content_type(&messages[&row.generation], &row.path)
                    .unwrap_or_else(|| content_type_of(rel))
                    .to_string();
                out.push(FileEntry {
                    section,
                    path: rel.to_string(),
                    body: row.body.clone(),
                    generation: row.generation,
                    content_type: ct,
                });
            }
            match page.next {
                Some(t) => token = t,
                None => break,
            }
        }
        Ok(out)
    }

    /// Bytes of a body.
    pub fn read_body(&mut self, body: &BodyRef, offset: u64, len: u64) -> Result<Vec<u8>, WbError> {
        self.store.read(body, offset, len)
    }

    /// Publish `files` into workbench `id` in one change: new paths are
    /// created, changed ones replaced (base = the generation seen), and
    /// byte-identical ones left alone. Nothing is deleted.
    pub fn collect(&mut self, id: &str, files: Vec<LocalFile>) -> Result<Value, WbError> {
        let mut edits = Vec::new();
        let mut bases = Vec::new();
        let mut identity = Vec::new();
        let mut ct_lines = String::new();
        let (mut created, mut replaced, mut unchanged) = (0u64, 0u64, 0u64);
        // The workbench's live files, in one listing (not a stat per file).
        let inc = self.incarnation(id)?;
        let mut live: HashMap<String, Row> = HashMap::new();
        let mut token = String::new();
        loop {
            let page = self.store.list_files(0, id, &token, 1000)?;
            for r in page.files.into_iter().filter(|r| r.generation >= inc) {
                live.insert(r.path.clone(), r);
            }
            match page.next {
                Some(t) => token = t,
                None => break,
            }
        }
        for f in files {
            if let Some(ct) = &f.content_type {
                check_content_type(ct)?;
            }
            let t = self.target(id, f.section, &f.path, false, true)?;
            let current: Option<Row> = live.get(&t.full).cloned();
            let content = if f.bytes.len() >= 1 << 20 {
                *blake3::Hasher::new()
                    .update_rayon(&f.bytes)
                    .finalize()
                    .as_bytes()
            } else {
                *blake3::hash(&f.bytes).as_bytes()
            };
            let base = match &current {
                Some(r) if r.body.content == content && r.body.size == f.bytes.len() as u64 => {
                    unchanged += 1;
                    continue;
                }
                Some(r) => {
                    replaced += 1;
                    r.generation
                }
                None => {
                    created += 1;
                    0
                }
            };
            if let Some(ct) = &f.content_type {
                ct_lines.push_str(&format!("nokv-path-content-type: {ct} {}\n", t.full));
            }
            identity.push(json!([t.full, hex::encode(content), base]));
            bases.push(base);
            edits.push(Edit::Put {
                path: t.full,
                base,
                body: NewBody::Hashed {
                    bytes: f.bytes,
                    content,
                },
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
        match self.publish_edits(&req, &bases, message, edits)? {
            Ok(version) => Ok(
                json!({"id": id, "change": version, "created": created, "replaced": replaced, "unchanged": unchanged}),
            ),
            Err(r) => Err(super::refusal_error(r)),
        }
    }
}

//! `scribe move`: explicit local move intent (workflow `move/<operation>`).
//!
//! The intent is durable before any opened record changes or any rename:
//!
//! 1. record `move/<op>` (staged 0, complete 0) with every tracked file and
//!    its prior opened record;
//! 2. rename the source root to `.scribe/_state/staging/move-<op>`, then to
//!    the destination (new parents created and flushed first);
//! 3. in one transaction: open sources for delete and destinations for add
//!    with their move source, and mark the intent complete.
//!
//! [`resume`] finishes an interrupted intent from whichever side of the two
//! renames the files are on. Accepted submit clears every record.

use std::path::Path;

use scribe_format::bytes::{Put, Reader};
use scribe_format::{FormatError, OperationId};

use crate::error::{Result, WorkspaceError};
use crate::records::{OpenedAction, OpenedRecord};
use crate::scan::now_ms;
use crate::state::{sync_dir, Workspace};

/// Bound on tracked files per move.
pub const MAX_TRACKED: usize = 50_000;

/// One tracked file of a move.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MovedFile {
    pub physical_source: String,
    pub destination: String,
    pub original_source: String,
    pub original_change: u64,
    pub prior: Option<OpenedRecord>,
}

/// A `move/<op>` record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MoveIntent {
    pub operation: OperationId,
    pub sequence: u64,
    pub source: String,
    pub destination: String,
    pub staged: bool,
    pub complete: bool,
    pub aborting: bool,
    pub dependencies: Vec<OperationId>,
    pub files: Vec<MovedFile>,
}

impl MoveIntent {
    pub fn key(&self) -> String {
        format!("move/{}", self.operation.to_hex())
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.put_u8(1);
        out.put_bytes(&self.operation.0);
        out.put_u64(self.sequence);
        out.put_bytes16(self.source.as_bytes());
        out.put_bytes16(self.destination.as_bytes());
        out.put_u8(u8::from(self.staged));
        out.put_u8(u8::from(self.complete));
        out.put_u8(u8::from(self.aborting));
        out.put_u32(self.dependencies.len() as u32);
        for d in &self.dependencies {
            out.put_bytes(&d.0);
        }
        let mut files = self.files.clone();
        files.sort_by(|a, b| a.destination.cmp(&b.destination));
        out.put_u32(files.len() as u32);
        for f in &files {
            out.put_bytes16(f.physical_source.as_bytes());
            out.put_bytes16(f.destination.as_bytes());
            out.put_bytes16(f.original_source.as_bytes());
            out.put_u64(f.original_change);
            match &f.prior {
                None => out.put_u8(0),
                Some(rec) => {
                    out.put_u8(1);
                    out.put_bytes16(&rec.encode());
                }
            }
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> std::result::Result<Self, FormatError> {
        let mut r = Reader::new(bytes);
        let v = r.u8("move version")?;
        if v != 1 {
            return Err(FormatError::UnsupportedVersion {
                what: "move intent",
                version: v.into(),
            });
        }
        let flag = |r: &mut Reader<'_>, what: &'static str| r.flag(what);
        let operation = OperationId(r.array("move operation")?);
        let sequence = r.u64("move sequence")?;
        let source = r
            .str16("move source", scribe_format::limits::MAX_PATH_BYTES)?
            .to_string();
        let destination = r
            .str16("move destination", scribe_format::limits::MAX_PATH_BYTES)?
            .to_string();
        let staged = flag(&mut r, "move staged")?;
        let complete = flag(&mut r, "move complete")?;
        let aborting = flag(&mut r, "move aborting")?;
        let n = r.u32("move dependency count")?;
        crate::records::check_count("move dependencies", n.into(), r.remaining(), 16)?;
        let mut dependencies = Vec::new();
        for _ in 0..n {
            dependencies.push(OperationId(r.array("move dependency")?));
        }
        let n = r.u32("move file count")?;
        crate::records::check_count("move files", n.into(), r.remaining(), 15)?;
        let mut files = Vec::new();
        for _ in 0..n {
            let physical_source = r
                .str16(
                    "move physical source",
                    scribe_format::limits::MAX_PATH_BYTES,
                )?
                .to_string();
            let destination = r
                .str16(
                    "move file destination",
                    scribe_format::limits::MAX_PATH_BYTES,
                )?
                .to_string();
            let original_source = r
                .str16(
                    "move original source",
                    scribe_format::limits::MAX_PATH_BYTES,
                )?
                .to_string();
            let original_change = r.u64("move original change")?;
            let prior = if flag(&mut r, "move prior present")? {
                Some(OpenedRecord::decode(r.bytes16("move prior", 65_535)?)?)
            } else {
                None
            };
            files.push(MovedFile {
                physical_source,
                destination,
                original_source,
                original_change,
                prior,
            });
        }
        r.finish("move intent")?;
        Ok(MoveIntent {
            operation,
            sequence,
            source,
            destination,
            staged,
            complete,
            aborting,
            dependencies,
            files,
        })
    }
}

fn bad(path: &str, detail: impl Into<String>) -> WorkspaceError {
    WorkspaceError::Materialize {
        path: path.into(),
        detail: detail.into(),
    }
}

/// Substitute the root `src` of `path` with `dst`.
fn substitute(path: &str, src: &str, dst: &str) -> String {
    if path == src {
        dst.to_string()
    } else {
        format!("{dst}{}", &path[src.len()..])
    }
}

/// Move `src` (a tracked file or a directory of tracked files) to `dst`.
pub fn move_path(ws: &Workspace, src: &str, dst: &str) -> Result<MoveIntent> {
    resume(ws)?;
    if src.is_empty() || dst.is_empty() {
        return Err(bad(src, "cannot move the workspace root"));
    }
    if scribe_format::path::is_under_prefix(dst, src) {
        return Err(bad(dst, "cannot move a directory into itself"));
    }
    scribe_format::path::validate(dst).map_err(|e| bad(dst, e.to_string()))?;
    let read = ws.read()?;
    let baselines = read.baselines()?;
    let opened = read.opened_all()?;
    let opened_map: std::collections::HashMap<&str, &OpenedRecord> =
        opened.iter().map(|(p, r)| (p.as_str(), r)).collect();
    let mut files = Vec::new();
    for (p, b) in &baselines {
        if scribe_format::path::is_under_prefix(p, src) {
            let prior = opened_map.get(p.as_str()).map(|r| (*r).clone());
            if matches!(prior.as_ref().map(|r| r.action), Some(OpenedAction::Delete)) {
                continue;
            }
            files.push(MovedFile {
                physical_source: p.clone(),
                destination: substitute(p, src, dst),
                original_source: p.clone(),
                original_change: b.change,
                prior,
            });
        }
    }
    for (p, r) in &opened {
        if r.action == OpenedAction::Add && scribe_format::path::is_under_prefix(p, src) {
            let (orig, change) = r.moved_from.clone().unwrap_or((p.clone(), 0));
            files.push(MovedFile {
                physical_source: p.clone(),
                destination: substitute(p, src, dst),
                original_source: orig,
                original_change: change,
                prior: Some(r.clone()),
            });
        }
    }
    if files.is_empty() {
        return Err(bad(src, "nothing tracked or opened for add there"));
    }
    if files.len() > MAX_TRACKED {
        return Err(bad(
            src,
            format!("a move is bounded to {MAX_TRACKED} files"),
        ));
    }
    if std::fs::symlink_metadata(ws.root().join(dst)).is_ok() {
        return Err(bad(dst, "the destination exists"));
    }
    for f in &files {
        let key = scribe_format::path::collision_key(&f.destination);
        if baselines.iter().any(|(p, _)| {
            !scribe_format::path::is_under_prefix(p, src)
                && scribe_format::path::collision_key(p) == key
        }) {
            return Err(bad(&f.destination, "collides with a tracked path"));
        }
    }
    let sequence = read
        .workflows_with_prefix("move/")?
        .iter()
        .filter_map(|(_, v)| MoveIntent::decode(v).ok())
        .map(|m| m.sequence)
        .max()
        .unwrap_or(0)
        + 1;
    drop(read);
    let intent = MoveIntent {
        operation: OperationId::random(),
        sequence,
        source: src.into(),
        destination: dst.into(),
        staged: false,
        complete: false,
        aborting: false,
        dependencies: Vec::new(),
        files,
    };
    let tx = ws.write()?;
    tx.put_workflow(&intent.key(), &intent.encode())?;
    tx.commit()?;
    apply(ws, intent)
}

fn staging(ws: &Workspace, op: &OperationId) -> std::path::PathBuf {
    ws.state_dir()
        .join("staging")
        .join(format!("move-{}", op.to_hex()))
}

fn rename(from: &Path, to: &Path) -> Result<()> {
    std::fs::rename(from, to).map_err(WorkspaceError::io(from))
}

/// Finish the renames and opened-state changes of an intent.
fn apply(ws: &Workspace, mut intent: MoveIntent) -> Result<MoveIntent> {
    let src = ws.root().join(&intent.source);
    let dst = ws.root().join(&intent.destination);
    let stage = staging(ws, &intent.operation);
    if src.exists() && !stage.exists() && !dst.exists() {
        rename(&src, &stage)?;
        sync_dir(&ws.state_dir().join("staging"))?;
    }
    if stage.exists() {
        if let Some(parent) = dst.parent() {
            std::fs::create_dir_all(parent).map_err(WorkspaceError::io(parent))?;
            sync_dir(parent)?;
        }
        rename(&stage, &dst)?;
        if let Some(parent) = dst.parent() {
            sync_dir(parent)?;
        }
    }
    intent.staged = true;
    intent.complete = true;
    let tx = ws.write()?;
    for f in &intent.files {
        let was_add = matches!(f.prior.as_ref().map(|r| r.action), Some(OpenedAction::Add));
        if was_add {
            tx.remove_opened(&f.physical_source)?;
        } else {
            tx.put_opened(
                &f.physical_source,
                &OpenedRecord {
                    action: OpenedAction::Delete,
                    opened_ms: now_ms(),
                    needs_reconcile: true,
                    moved_from: None,
                },
            )?;
        }
        let moved_from = if f.original_change == 0 {
            None
        } else {
            Some((f.original_source.clone(), f.original_change))
        };
        tx.put_opened(
            &f.destination,
            &OpenedRecord {
                action: OpenedAction::Add,
                opened_ms: now_ms(),
                needs_reconcile: true,
                moved_from,
            },
        )?;
    }
    tx.put_workflow(&intent.key(), &intent.encode())?;
    tx.commit()?;
    Ok(intent)
}

/// Complete every interrupted move intent.
pub fn resume(ws: &Workspace) -> Result<usize> {
    let pending: Vec<MoveIntent> = ws
        .read()?
        .workflows_with_prefix("move/")?
        .into_iter()
        .map(|(k, v)| {
            MoveIntent::decode(&v).map_err(|source| WorkspaceError::Corrupt {
                table: "workflows_v2",
                key: k,
                source,
            })
        })
        .collect::<Result<_>>()?;
    let mut n = 0;
    for intent in pending.into_iter().filter(|i| !i.complete) {
        apply(ws, intent)?;
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{BaselineRecord, Fingerprint};
    use scribe_format::{FileContentId, ManifestId};

    #[test]
    fn intent_round_trips_and_refuses_truncation() {
        let i = MoveIntent {
            operation: OperationId([1; 16]),
            sequence: 2,
            source: "a".into(),
            destination: "b".into(),
            staged: true,
            complete: false,
            aborting: false,
            dependencies: vec![OperationId([3; 16])],
            files: vec![MovedFile {
                physical_source: "a/x".into(),
                destination: "b/x".into(),
                original_source: "a/x".into(),
                original_change: 4,
                prior: Some(OpenedRecord {
                    action: OpenedAction::Edit,
                    opened_ms: 5,
                    needs_reconcile: true,
                    moved_from: None,
                }),
            }],
        };
        let b = i.encode();
        assert_eq!(MoveIntent::decode(&b).unwrap(), i);
        for cut in 0..b.len() {
            assert!(MoveIntent::decode(&b[..cut]).is_err(), "cut {cut}");
        }
    }

    #[test]
    fn move_directory_opens_pairs_and_renames() {
        let dir = tempfile::tempdir().unwrap();
        let mut meta = crate::state::tests_meta();
        meta.readonly = false;
        let ws = Workspace::create(dir.path(), &meta).unwrap();
        std::fs::create_dir_all(dir.path().join("old/sub")).unwrap();
        std::fs::write(dir.path().join("old/sub/f"), b"x").unwrap();
        let tx = ws.write().unwrap();
        tx.put_baseline(
            "old/sub/f",
            &BaselineRecord {
                incarnation: [0; 16],
                manifest: ManifestId([0; 32]),
                content: FileContentId::of(b"x"),
                size: 1,
                mode: 0,
                change: 3,
                fingerprint: Fingerprint::default(),
            },
        )
        .unwrap();
        tx.commit().unwrap();
        let i = move_path(&ws, "old", "new/place").unwrap();
        assert!(i.complete);
        assert_eq!(
            std::fs::read(dir.path().join("new/place/sub/f")).unwrap(),
            b"x"
        );
        assert!(!dir.path().join("old").exists());
        let r = ws.read().unwrap();
        assert_eq!(
            r.opened("old/sub/f").unwrap().unwrap().action,
            OpenedAction::Delete
        );
        let dst = r.opened("new/place/sub/f").unwrap().unwrap();
        assert_eq!(dst.action, OpenedAction::Add);
        assert_eq!(dst.moved_from, Some(("old/sub/f".into(), 3)));
        drop(r);
        assert!(move_path(&ws, "new", "new/inner").is_err());
    }
}

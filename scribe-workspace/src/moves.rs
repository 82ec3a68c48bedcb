//! `scribe move`: explicit local move intent (workflow `move/<operation>`,
//! specification "Explicit local move intent").
//!
//! Forward application; the intent is durable before any opened record
//! changes or any rename:
//!
//! 1. record `move/<op>` (staged 0, complete 0) with every tracked file and
//!    its prior opened record, its sequence (greatest active + 1) and its
//!    dependencies (older moves whose source or destination root overlaps);
//! 2. rename the source root to `.scribe/_state/staging/move-<op>` and
//!    record `staged`; create and flush the destination's new parents, then
//!    rename the staging entry to the destination and flush both sides;
//! 3. in one transaction: open sources for delete and destinations for add
//!    with their move source, and mark the intent complete.
//!
//! Abort (allowed only when no pending move depends on the intent) records
//! `aborting` first, performs the inverse renames through the same staging
//! name (the files keep their current contents), then in one transaction
//! restores the prior opened records and removes only its own record.
//!
//! At most one intent is interrupted (incomplete or aborting) at a time; it
//! blocks other moves until [`resume`] finishes it or [`abort`] undoes it.
//! Both work from whichever side of the two renames the files are on.
//! Accepted submit clears every record (`submit::finalize`).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use scribe_format::bytes::{Put, Reader};
use scribe_format::path::is_under_prefix;
use scribe_format::{Concern, ErrorCode, FormatError, OperationId};

use crate::error::{Result, WorkspaceError};
use crate::records::{BaselineRecord, OpenedAction, OpenedRecord};
use crate::scan::now_ms;
use crate::state::{sync_dir, StateRead, Workspace};

/// Bound on tracked files per move.
pub const MAX_TRACKED: usize = 50_000;
/// Bound on entries (files, directories, links) found under a move's source.
pub const MAX_DISCOVERED: usize = 100_000;
/// Bound on pending move records.
pub const MAX_OPERATIONS: usize = 1_024;
/// Bound on the encoded size of all pending move records together.
pub const MAX_JOURNAL_BYTES: usize = 32 << 20;

/// Where a move reports its progress: named points between its durable
/// steps (the client's crash tests kill the process at them).
pub trait MoveHooks {
    fn point(&self, _name: &str) {}
}

/// No hooks.
pub struct NoHooks;
impl MoveHooks for NoHooks {}

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

fn invalid(reason: &'static str) -> FormatError {
    FormatError::invalid("move intent", reason)
}

/// Substitute the root `src` of `path` with `dst`.
pub(crate) fn substitute(path: &str, src: &str, dst: &str) -> String {
    if path == src {
        dst.to_string()
    } else {
        format!("{dst}{}", &path[src.len()..])
    }
}

/// Whether two roots overlap (one is the other or inside it).
pub(crate) fn overlaps(a: &str, b: &str) -> bool {
    is_under_prefix(a, b) || is_under_prefix(b, a)
}

impl MoveIntent {
    pub fn key(&self) -> String {
        format!("move/{}", self.operation.to_hex())
    }

    /// Interrupted: not yet complete, or being aborted.
    pub fn interrupted(&self) -> bool {
        !self.complete || self.aborting
    }

    /// `pending`, `interrupted` or `aborting`.
    pub fn state_name(&self) -> &'static str {
        if self.aborting {
            "aborting"
        } else if !self.complete {
            "interrupted"
        } else {
            "pending"
        }
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

    /// Decode and check one record on its own (see [`MoveIntent::check`]).
    pub fn decode(bytes: &[u8]) -> std::result::Result<Self, FormatError> {
        let mut r = Reader::new(bytes);
        let v = r.u8("move version")?;
        if v != 1 {
            return Err(FormatError::UnsupportedVersion {
                what: "move intent",
                version: v.into(),
            });
        }
        let max = scribe_format::limits::MAX_PATH_BYTES;
        let operation = OperationId(r.array("move operation")?);
        let sequence = r.u64("move sequence")?;
        let source = r.str16("move source", max)?.to_string();
        let destination = r.str16("move destination", max)?.to_string();
        let staged = r.flag("move staged")?;
        let complete = r.flag("move complete")?;
        let aborting = r.flag("move aborting")?;
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
            let physical_source = r.str16("move physical source", max)?.to_string();
            let destination = r.str16("move file destination", max)?.to_string();
            let original_source = r.str16("move original source", max)?.to_string();
            let original_change = r.u64("move original change")?;
            let prior = if r.flag("move prior present")? {
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
        let intent = MoveIntent {
            operation,
            sequence,
            source,
            destination,
            staged,
            complete,
            aborting,
            dependencies,
            files,
        };
        intent.check()?;
        Ok(intent)
    }

    /// The rules one record must satisfy on its own: files sorted by
    /// destination and unique; each destination the exact root substitution
    /// of its physical source; a prior opened record is an Add carrying the
    /// same original accepted source and revision; without one the original
    /// source is the physical source; dependencies unique.
    pub fn check(&self) -> std::result::Result<(), FormatError> {
        if self.sequence == 0 {
            return Err(invalid("sequence numbers start at 1"));
        }
        if self.source.is_empty() || self.destination.is_empty() {
            return Err(invalid("the workspace root cannot be moved"));
        }
        if overlaps(&self.source, &self.destination) {
            return Err(invalid("source and destination roots overlap"));
        }
        if self.files.len() > MAX_TRACKED {
            return Err(invalid("more than 50,000 tracked files"));
        }
        let mut deps = HashSet::new();
        for d in &self.dependencies {
            if !deps.insert(d.0) || *d == self.operation {
                return Err(invalid("dependencies must be unique and name other moves"));
            }
        }
        for w in self.files.windows(2) {
            if w[0].destination >= w[1].destination {
                return Err(invalid("files must be sorted by destination, once each"));
            }
        }
        for f in &self.files {
            if !is_under_prefix(&f.physical_source, &self.source)
                || substitute(&f.physical_source, &self.source, &self.destination) != f.destination
            {
                return Err(invalid(
                    "a destination must be the root substitution of its physical source",
                ));
            }
            match &f.prior {
                None if f.original_source != f.physical_source => {
                    return Err(invalid(
                        "without a prior opened record the original source is the physical source",
                    ))
                }
                None => {}
                // Beyond the specification: a tracked file opened for edit
                // (never itself moved) carries its edit record, restored by
                // an abort (docs/workspace.md, "Moving an edited file").
                Some(p) if p.action == OpenedAction::Edit => {
                    let own = p.moved_from.is_none()
                        && f.original_source == f.physical_source
                        && f.original_change != 0;
                    if !own {
                        return Err(invalid(
                            "a prior edit record is a tracked file's own, at its original source",
                        ));
                    }
                }
                Some(p) => {
                    let carries = match &p.moved_from {
                        Some((s, c)) => *s == f.original_source && *c == f.original_change,
                        None => f.original_source == f.physical_source && f.original_change == 0,
                    };
                    if p.action != OpenedAction::Add || !carries {
                        return Err(invalid(
                            "a prior opened record is an add carrying the original source and revision",
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

fn corrupt(key: &str, source: FormatError) -> WorkspaceError {
    WorkspaceError::Corrupt {
        table: "workflows_v2",
        key: key.to_string(),
        source,
    }
}

/// Check the whole journal: ids match their keys, sequences are unique,
/// dependencies refer backward to existing records, at most one intent is
/// interrupted, and the journal bounds hold.
pub fn check_journal(records: &[(String, Vec<u8>)]) -> Result<Vec<MoveIntent>> {
    if records.len() > MAX_OPERATIONS {
        return Err(corrupt(
            "move/",
            invalid("more than 1,024 pending move operations"),
        ));
    }
    let bytes: usize = records.iter().map(|(k, v)| k.len() + v.len()).sum();
    if bytes > MAX_JOURNAL_BYTES {
        return Err(corrupt("move/", invalid("the move journal exceeds 32 MiB")));
    }
    let mut out = Vec::new();
    for (k, v) in records {
        let intent = MoveIntent::decode(v).map_err(|e| corrupt(k, e))?;
        if intent.key() != *k {
            return Err(corrupt(
                k,
                invalid("the operation id does not match its key"),
            ));
        }
        out.push(intent);
    }
    let seq: HashMap<[u8; 16], u64> = out.iter().map(|i| (i.operation.0, i.sequence)).collect();
    let mut seen = HashSet::new();
    for i in &out {
        if !seen.insert(i.sequence) {
            return Err(corrupt(
                &i.key(),
                invalid("sequence numbers must be unique"),
            ));
        }
        for d in &i.dependencies {
            match seq.get(&d.0) {
                Some(s) if *s < i.sequence => {}
                _ => {
                    return Err(corrupt(
                        &i.key(),
                        invalid("a dependency must name an older pending move"),
                    ))
                }
            }
        }
    }
    if out.iter().filter(|i| i.interrupted()).count() > 1 {
        return Err(corrupt("move/", invalid("more than one interrupted move")));
    }
    out.sort_by_key(|i| i.sequence);
    Ok(out)
}

pub(crate) fn load(read: &StateRead) -> Result<Vec<MoveIntent>> {
    check_journal(&read.workflows_with_prefix("move/")?)
}

/// Every pending move, oldest first (the journal is checked as a whole).
pub fn pending(ws: &Workspace) -> Result<Vec<MoveIntent>> {
    load(&ws.read()?)
}

/// The interrupted move, if any.
pub fn interrupted(ws: &Workspace) -> Result<Option<MoveIntent>> {
    Ok(pending(ws)?.into_iter().find(|i| i.interrupted()))
}

/// Refuse while a move is interrupted (it blocks competing workflows).
pub fn refuse_if_interrupted(ws: &Workspace) -> Result<()> {
    match interrupted(ws)? {
        None => Ok(()),
        Some(i) => Err(WorkspaceError::refused(
            ErrorCode::MoveUnfinished,
            format!("{} -> {}", i.source, i.destination),
            format!("move {} is {}", i.operation.to_hex(), i.state_name()),
        )),
    }
}

/// Source roots vacated by pending moves (reserved until submit or abort).
pub fn reserved_roots(ws: &Workspace) -> Result<Vec<String>> {
    Ok(pending(ws)?.into_iter().map(|i| i.source).collect())
}

/// The pending move named by `selector`: its operation id (or a unique
/// hex prefix of at least 4 digits), or its destination root. `None`
/// selects the interrupted move, else the newest.
pub fn select(ws: &Workspace, selector: Option<&str>) -> Result<MoveIntent> {
    let all = pending(ws)?;
    let found = match selector {
        None => all
            .iter()
            .find(|i| i.interrupted())
            .or_else(|| all.last())
            .cloned(),
        Some(s) => {
            let by_dst: Vec<&MoveIntent> = all.iter().filter(|i| i.destination == s).collect();
            let lower = s.to_ascii_lowercase();
            let by_id: Vec<&MoveIntent> = if lower.len() >= 4
                && lower.len() <= 32
                && lower.bytes().all(|b| b.is_ascii_hexdigit())
            {
                all.iter()
                    .filter(|i| i.operation.to_hex().starts_with(&lower))
                    .collect()
            } else {
                Vec::new()
            };
            match (by_dst.as_slice(), by_id.as_slice()) {
                ([one], _) | ([], [one]) => Some((*one).clone()),
                ([], []) => None,
                _ => {
                    return Err(WorkspaceError::refused(
                        ErrorCode::Usage,
                        s,
                        "names more than one pending move",
                    ))
                }
            }
        }
    };
    found.ok_or_else(|| {
        WorkspaceError::refused_about(
            ErrorCode::NotFound,
            Concern::NoPendingMove,
            selector.unwrap_or("."),
            "no pending move there",
        )
    })
}

fn refuse(code: ErrorCode, path: &str, detail: impl Into<String>) -> WorkspaceError {
    WorkspaceError::refused(code, path, detail)
}

/// Count entries under `root` on disk (not following links), stopping
/// once `limit` is exceeded.
pub(crate) fn count_entries(root: &Path, limit: usize) -> Result<usize> {
    let mut n = 0usize;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let meta = std::fs::symlink_metadata(&dir).map_err(WorkspaceError::io(&dir))?;
        n += 1;
        if n > limit {
            return Ok(n);
        }
        if meta.is_dir() {
            for e in std::fs::read_dir(&dir).map_err(WorkspaceError::io(&dir))? {
                stack.push(e.map_err(WorkspaceError::io(&dir))?.path());
            }
        }
    }
    Ok(n)
}

/// Build the intent of moving `src` to `dst` without changing anything.
pub fn plan(ws: &Workspace, src: &str, dst: &str) -> Result<MoveIntent> {
    if src.is_empty() || dst.is_empty() {
        return Err(refuse(
            ErrorCode::Refused,
            src,
            "cannot move the workspace root",
        ));
    }
    if overlaps(src, dst) {
        return Err(refuse(
            ErrorCode::Refused,
            dst,
            "source and destination overlap",
        ));
    }
    scribe_format::path::validate(dst)
        .map_err(|e| refuse(ErrorCode::InvalidPath, dst, e.to_string()))?;
    let read = ws.read()?;
    let existing = load(&read)?;
    if let Some(i) = existing.iter().find(|i| i.interrupted()) {
        return Err(refuse(
            ErrorCode::MoveUnfinished,
            &i.destination,
            format!("move {} is {}", i.operation.to_hex(), i.state_name()),
        ));
    }
    for i in &existing {
        if overlaps(dst, &i.source) {
            return Err(refuse(
                ErrorCode::MoveReserved,
                dst,
                format!("{} was vacated by a pending move and is reserved", i.source),
            ));
        }
    }
    if existing.len() >= MAX_OPERATIONS {
        return Err(refuse(
            ErrorCode::LimitExceeded,
            src,
            "1,024 moves are already pending",
        ));
    }
    let baselines = read.baselines()?;
    let opened = read.opened_all()?;
    let opened_map: HashMap<&str, &OpenedRecord> =
        opened.iter().map(|(p, r)| (p.as_str(), r)).collect();
    let mut files = Vec::new();
    let mut busy = Vec::new();
    for (p, b) in &baselines {
        if !is_under_prefix(p, src) {
            continue;
        }
        match opened_map.get(p.as_str()).map(|r| r.action) {
            // A deleted file stays deleted where it is.
            Some(OpenedAction::Delete) => continue,
            // A file opened for edit moves with its edit (as Perforce
            // allows): the destination is added with the current bytes and
            // an abort restores the edit record.
            Some(OpenedAction::Edit) => files.push(MovedFile {
                physical_source: p.clone(),
                destination: substitute(p, src, dst),
                original_source: p.clone(),
                original_change: b.change,
                prior: opened_map.get(p.as_str()).map(|r| (*r).clone()),
            }),
            Some(OpenedAction::Keep) => busy.push(p.clone()),
            // A tracked path opened for add is a destination of an earlier
            // move replacing it; handled with the opened adds below.
            Some(OpenedAction::Add) => {}
            None => files.push(MovedFile {
                physical_source: p.clone(),
                destination: substitute(p, src, dst),
                original_source: p.clone(),
                original_change: b.change,
                prior: None,
            }),
        }
    }
    if !busy.is_empty() {
        return Err(refuse(
            ErrorCode::MoveRefused,
            &busy[0],
            format!(
                "{} file(s) there are kept after a conflict; submit or revert them first",
                busy.len()
            ),
        ));
    }
    for (p, r) in &opened {
        if r.action == OpenedAction::Add && is_under_prefix(p, src) {
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
        return Err(WorkspaceError::refused_about(
            ErrorCode::NotPresent,
            Concern::NotInWorkspace,
            src,
            "nothing tracked or opened for add there",
        ));
    }
    if files.len() > MAX_TRACKED {
        return Err(refuse(
            ErrorCode::LimitExceeded,
            src,
            format!(
                "{} tracked files; a move is bounded to {MAX_TRACKED}",
                files.len()
            ),
        ));
    }
    // Neither side may lie beneath a linked directory, and the source may
    // not be one: its tracked files would be beyond it (`crate::guard`).
    let src_full = crate::guard::checked(ws.root(), src)?;
    crate::guard::checked(ws.root(), dst)?;
    match std::fs::symlink_metadata(&src_full) {
        Err(_) => {
            return Err(WorkspaceError::refused_about(
                ErrorCode::NotFound,
                Concern::MissingFromDisk,
                src,
                "not on disk",
            ))
        }
        Ok(meta)
            if crate::platform::is_link(&meta)
                && files.iter().any(|f| f.physical_source != src) =>
        {
            return Err(crate::guard::refusal(&files[0].physical_source, src));
        }
        Ok(_) => {}
    }
    if let Some(f) = files
        .iter()
        .find(|f| !exists(&ws.root().join(&f.physical_source)))
    {
        return Err(WorkspaceError::refused_about(
            ErrorCode::NotFound,
            Concern::MissingFromDisk,
            &f.physical_source,
            "a tracked file to move is missing from disk",
        ));
    }
    if count_entries(&src_full, MAX_DISCOVERED)? > MAX_DISCOVERED {
        return Err(refuse(
            ErrorCode::LimitExceeded,
            src,
            format!("more than {MAX_DISCOVERED} entries on disk"),
        ));
    }
    if std::fs::symlink_metadata(ws.root().join(dst)).is_ok() {
        return Err(refuse(
            ErrorCode::AlreadyExists,
            dst,
            "the destination exists",
        ));
    }
    let live: HashMap<Vec<u8>, &str> = baselines
        .iter()
        .filter(|(p, _)| !is_under_prefix(p, src))
        .map(|(p, _)| (scribe_format::path::collision_key(p), p.as_str()))
        .chain(
            opened
                .iter()
                .filter(|(p, r)| r.action == OpenedAction::Add && !is_under_prefix(p, src))
                .map(|(p, _)| (scribe_format::path::collision_key(p), p.as_str())),
        )
        .collect();
    for f in &files {
        if let Some(other) = live.get(&scribe_format::path::collision_key(&f.destination)) {
            return Err(refuse(
                ErrorCode::PathCollision,
                &f.destination,
                format!("collides with {other}"),
            ));
        }
    }
    files.sort_by(|a, b| a.destination.cmp(&b.destination));
    let operation = OperationId::random();
    let intent = MoveIntent {
        operation,
        sequence: existing.iter().map(|i| i.sequence).max().unwrap_or(0) + 1,
        source: src.into(),
        destination: dst.into(),
        staged: false,
        complete: false,
        aborting: false,
        dependencies: existing
            .iter()
            .filter(|i| {
                overlaps(&i.source, src)
                    || overlaps(&i.source, dst)
                    || overlaps(&i.destination, src)
                    || overlaps(&i.destination, dst)
            })
            .map(|i| i.operation)
            .collect(),
        files,
    };
    let total: usize = read
        .workflows_with_prefix("move/")?
        .iter()
        .map(|(k, v)| k.len() + v.len())
        .sum::<usize>()
        + intent.key().len()
        + intent.encode().len();
    if total > MAX_JOURNAL_BYTES {
        return Err(refuse(
            ErrorCode::LimitExceeded,
            src,
            "the move journal would exceed 32 MiB",
        ));
    }
    Ok(intent)
}

/// Move `src` (a tracked file or a directory of tracked files) to `dst`.
pub fn move_path(ws: &Workspace, src: &str, dst: &str) -> Result<MoveIntent> {
    move_path_with(ws, src, dst, &NoHooks)
}

/// [`move_path`] with progress hooks.
pub fn move_path_with(
    ws: &Workspace,
    src: &str,
    dst: &str,
    hooks: &dyn MoveHooks,
) -> Result<MoveIntent> {
    let intent = plan(ws, src, dst)?;
    let tx = ws.write()?;
    tx.put_workflow(&intent.key(), &intent.encode())?;
    tx.commit()?;
    hooks.point("move-after-intent");
    apply(ws, intent, hooks)
}

fn staging(ws: &Workspace, op: &OperationId) -> PathBuf {
    ws.state_dir()
        .join("staging")
        .join(format!("move-{}", op.to_hex()))
}

fn exists(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok()
}

/// Rename that never replaces an existing entry.
fn rename_exclusive(from: &Path, to: &Path) -> Result<()> {
    if exists(to) {
        return Err(WorkspaceError::Io {
            path: to.to_path_buf(),
            source: std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "a move never replaces an existing entry",
            ),
        });
    }
    std::fs::rename(from, to).map_err(WorkspaceError::io(from))
}

/// Create the missing parents of `path`, flushing each new directory's
/// parent so the new entries are durable.
fn create_parents(root: &Path, path: &Path) -> Result<()> {
    let Some(parent) = path.parent() else {
        return Ok(());
    };
    let mut missing = Vec::new();
    let mut p = parent;
    while !exists(p) && p != root {
        missing.push(p.to_path_buf());
        match p.parent() {
            Some(up) => p = up,
            None => break,
        }
    }
    for dir in missing.iter().rev() {
        std::fs::create_dir(dir).map_err(WorkspaceError::io(dir))?;
        if let Some(up) = dir.parent() {
            sync_dir(up)?;
        }
    }
    Ok(())
}

fn record(ws: &Workspace, intent: &MoveIntent) -> Result<()> {
    let tx = ws.write()?;
    tx.put_workflow(&intent.key(), &intent.encode())?;
    tx.commit()
}

/// Bring the files from `from` (through staging) to `to`, from whichever
/// side of the two renames they are on. `staged` is recorded after the
/// first rename when `mark` is set.
fn carry(
    ws: &Workspace,
    intent: &mut MoveIntent,
    from: &str,
    to: &str,
    hooks: &dyn MoveHooks,
    point: &str,
) -> Result<()> {
    let from_full = crate::guard::checked(ws.root(), from)?;
    let to_full = crate::guard::checked(ws.root(), to)?;
    let stage = staging(ws, &intent.operation);
    let staging_dir = ws.state_dir().join("staging");
    let (f, s, t) = (exists(&from_full), exists(&stage), exists(&to_full));
    match (f, s, t) {
        (true, false, false) => {
            rename_exclusive(&from_full, &stage)?;
            sync_dir(&staging_dir)?;
            if let Some(p) = from_full.parent() {
                sync_dir(p)?;
            }
            if !intent.aborting && !intent.staged {
                intent.staged = true;
                record(ws, intent)?;
            }
            hooks.point(point);
        }
        (false, true, false) | (false, false, true) => {}
        _ => {
            return Err(refuse(
                ErrorCode::MoveRefused,
                to,
                format!(
                    "cannot tell where the moved files are (source {}, staging {}, destination {})",
                    if f { "present" } else { "absent" },
                    if s { "present" } else { "absent" },
                    if t { "present" } else { "absent" }
                ),
            ))
        }
    }
    if exists(&stage) {
        create_parents(ws.root(), &to_full)?;
        rename_exclusive(&stage, &to_full)?;
        if let Some(p) = to_full.parent() {
            sync_dir(p)?;
        }
        sync_dir(&staging_dir)?;
    }
    Ok(())
}

/// Finish the renames and opened-state changes of an intent.
fn apply(ws: &Workspace, mut intent: MoveIntent, hooks: &dyn MoveHooks) -> Result<MoveIntent> {
    let (src, dst) = (intent.source.clone(), intent.destination.clone());
    carry(ws, &mut intent, &src, &dst, hooks, "move-after-stage")?;
    hooks.point("move-after-place");
    intent.staged = true;
    intent.complete = true;
    let tx = ws.write()?;
    open_moved(&tx, &intent, now_ms())?;
    tx.commit()?;
    prune_empty_parents(ws.root(), &src);
    Ok(intent)
}

/// The opened-state half of completing `intent` (its record, marked
/// complete by the caller, goes in the same transaction): each source
/// opened for delete (or its prior add removed) and each destination
/// opened for add with its move source. `open::reconcile` records the
/// moves it finds through this too, so they are exactly what `scribe move`
/// records.
pub(crate) fn open_moved(
    tx: &crate::state::StateWrite,
    intent: &MoveIntent,
    opened_ms: u64,
) -> Result<()> {
    for f in &intent.files {
        if f.prior
            .as_ref()
            .is_some_and(|p| p.action == OpenedAction::Add)
        {
            tx.remove_opened(&f.physical_source)?;
        } else {
            tx.put_opened(
                &f.physical_source,
                &OpenedRecord {
                    action: OpenedAction::Delete,
                    opened_ms,
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
                opened_ms,
                needs_reconcile: true,
                moved_from,
            },
        )?;
    }
    tx.put_workflow(&intent.key(), &intent.encode())
}

/// Remove the directories above `rel` that the move (or a delete) left
/// empty, up to the workspace root.
pub(crate) fn prune_empty_parents(root: &Path, rel: &str) {
    let mut p = root.join(rel);
    while let Some(parent) = p.parent() {
        if parent == root
            || parent == root.join(".scribe")
            || !parent.starts_with(root)
            || std::fs::remove_dir(parent).is_err()
        {
            break;
        }
        p = parent.to_path_buf();
    }
}

/// Finish the interrupted move, if any (a forward one is completed, an
/// aborting one is undone).
pub fn resume(ws: &Workspace) -> Result<Option<MoveIntent>> {
    resume_with(ws, &NoHooks)
}

/// [`resume`] with progress hooks.
pub fn resume_with(ws: &Workspace, hooks: &dyn MoveHooks) -> Result<Option<MoveIntent>> {
    match interrupted(ws)? {
        None => Ok(None),
        Some(i) if i.aborting => finish_abort(ws, i, hooks).map(Some),
        Some(i) => apply(ws, i, hooks).map(Some),
    }
}

/// Undo the pending move `operation`: refused while a pending move depends
/// on it. The files go back with their current contents; the prior opened
/// records come back; only this move's record is removed.
pub fn abort(ws: &Workspace, operation: &OperationId) -> Result<MoveIntent> {
    abort_with(ws, operation, &NoHooks)
}

/// [`abort`] with progress hooks.
pub fn abort_with(
    ws: &Workspace,
    operation: &OperationId,
    hooks: &dyn MoveHooks,
) -> Result<MoveIntent> {
    let read = ws.read()?;
    let all = load(&read)?;
    let Some(intent) = all.iter().find(|i| i.operation == *operation).cloned() else {
        return Err(WorkspaceError::refused_about(
            ErrorCode::NotFound,
            Concern::NoPendingMove,
            operation.to_hex(),
            "no pending move has this id",
        ));
    };
    if let Some(other) = all
        .iter()
        .find(|i| i.interrupted() && i.operation != *operation)
    {
        return Err(refuse(
            ErrorCode::MoveUnfinished,
            &other.destination,
            format!(
                "move {} is {}",
                other.operation.to_hex(),
                other.state_name()
            ),
        ));
    }
    let dependents: Vec<&MoveIntent> = all
        .iter()
        .filter(|i| i.dependencies.contains(operation))
        .collect();
    if let Some(d) = dependents.first() {
        return Err(refuse(
            ErrorCode::MoveDependent,
            &intent.destination,
            format!(
                "{} later move(s) depend on it, first {} -> {} ({})",
                dependents.len(),
                d.source,
                d.destination,
                d.operation.to_hex()
            ),
        ));
    }
    if !intent.aborting && intent.complete && exists(&ws.root().join(&intent.source)) {
        // Something new stands at the vacated source (a sync wrote other
        // people's files there): the files go back beside it, one entry at
        // a time, unless a name collides. Checked before anything changes.
        let stays = relative(&intent, &check_names(&read, &intent)?);
        let src_full = crate::guard::checked(ws.root(), &intent.source)?;
        let dst_full = crate::guard::checked(ws.root(), &intent.destination)?;
        merge_back(&intent, &dst_full, &src_full, "", &stays, None)?;
    }
    if !intent.aborting {
        // Tracked content that arrived under the destination after the
        // move (a sync) would be carried away by the inverse rename.
        if let Some((p, _)) = read
            .baselines()?
            .into_iter()
            .find(|(p, _)| is_under_prefix(p, &intent.destination))
        {
            return Err(refuse(
                ErrorCode::MoveRefused,
                &p,
                "a tracked file now lives under the destination",
            ));
        }
    }
    drop(read);
    let mut intent = intent;
    if !intent.aborting {
        intent.aborting = true;
        record(ws, &intent)?;
    }
    hooks.point("move-abort-after-mark");
    finish_abort(ws, intent, hooks)
}

fn finish_abort(
    ws: &Workspace,
    mut intent: MoveIntent,
    hooks: &dyn MoveHooks,
) -> Result<MoveIntent> {
    let (src, dst) = (intent.source.clone(), intent.destination.clone());
    let src_full = crate::guard::checked(ws.root(), &src)?;
    let dst_full = crate::guard::checked(ws.root(), &dst)?;
    let stage = staging(ws, &intent.operation);
    let from = if exists(&stage) { &stage } else { &dst_full };
    let (orphans, stays) = if intent.complete {
        let read = ws.read()?;
        (orphans(&read, &intent)?, check_names(&read, &intent)?)
    } else {
        (HashSet::new(), HashMap::new())
    };
    if intent.complete
        && exists(&src_full)
        && exists(from)
        && !(exists(&stage) && exists(&dst_full))
    {
        // Back beside what arrived at the source after the move (see
        // `abort_with`); a rerun goes on with whatever is still to go.
        // Files that stay (see `check_names`) are left at the
        // destination, never in the staging area.
        let stays = if exists(&stage) {
            HashSet::new()
        } else {
            relative(&intent, &stays)
        };
        merge_back(&intent, from, &src_full, "", &stays, Some(hooks))?;
        sync_dir(&ws.state_dir().join("staging"))?;
        hooks.point("move-abort-after-stage");
    } else {
        carry(ws, &mut intent, &dst, &src, hooks, "move-abort-after-stage")?;
    }
    let tx = ws.write()?;
    if intent.complete {
        let ours: HashSet<&str> = intent
            .files
            .iter()
            .map(|f| f.destination.as_str())
            .collect();
        // Opened adds made under the destination after the move travel back
        // with their files.
        let extra: Vec<(String, OpenedRecord)> = tx
            .opened_all()?
            .into_iter()
            .filter(|(p, _)| is_under_prefix(p, &dst) && !ours.contains(p.as_str()))
            .collect();
        for (p, r) in extra {
            tx.remove_opened(&p)?;
            tx.put_opened(&substitute(&p, &dst, &src), &r)?;
        }
        let deferred: HashSet<String> = tx.deferred_all()?.into_iter().map(|(p, _)| p).collect();
        for f in &intent.files {
            tx.remove_opened(&f.destination)?;
            // A file whose source the server no longer has comes back
            // (or stays) new: no prior record describes it any more.
            match &f.prior {
                Some(rec) if !orphans.contains(&f.physical_source) => {
                    let mut rec = rec.clone();
                    // The end of a chain of moves going back to its middle
                    // (a -> b -> c, c aborted): an add moved from an
                    // original source the server no longer has (`resolve
                    // --ours` settled its removal: no baseline, nothing
                    // deferred there) comes back as a new file, as that
                    // resolve left the chain's end; its move source would
                    // make the submit refuse it, leaving only an abort to
                    // the old source.
                    if let Some((src, _)) = &rec.moved_from {
                        if !deferred.contains(src) && tx.baseline(src)?.is_none() {
                            rec.moved_from = None;
                        }
                    }
                    tx.put_opened(&f.physical_source, &rec)?
                }
                _ => tx.remove_opened(&f.physical_source)?,
            }
        }
    }
    tx.remove_workflow(&intent.key())?;
    tx.commit()?;
    prune_empty_parents(ws.root(), &dst);
    Ok(intent)
}

/// Tracked paths under the vacated source of `intent` that it does not
/// carry: files a sync brought there after the move (other people's adds),
/// less those opened for delete. A submit of the move leaves them where
/// they are; an abort puts the moved files back beside them.
fn standing(
    baselines: &[(String, BaselineRecord)],
    opened: &HashMap<String, OpenedRecord>,
    intent: &MoveIntent,
) -> Vec<String> {
    let carried: HashSet<&str> = intent
        .files
        .iter()
        .map(|f| f.physical_source.as_str())
        .collect();
    let mut out: Vec<String> = baselines
        .iter()
        .map(|(p, _)| p)
        .filter(|p| {
            is_under_prefix(p, &intent.source)
                && !carried.contains(p.as_str())
                && opened.get(*p).map(|r| r.action) != Some(OpenedAction::Delete)
        })
        .cloned()
        .collect();
    out.extend(
        opened
            .iter()
            .filter(|(p, r)| {
                r.action == OpenedAction::Add
                    && is_under_prefix(p, &intent.source)
                    && !carried.contains(p.as_str())
            })
            .map(|(p, _)| p.clone()),
    );
    out.sort();
    out.dedup();
    out
}

/// For each pending move, the tracked files that arrived under its vacated
/// source after it was made (see [`standing`]); moves without any are left
/// out. `sync` and `submit` name them.
pub fn newcomers(ws: &Workspace) -> Result<Vec<(MoveIntent, Vec<String>)>> {
    let read = ws.read()?;
    let moves = load(&read)?;
    if moves.is_empty() {
        return Ok(Vec::new());
    }
    let baselines = read.baselines()?;
    let opened: HashMap<String, OpenedRecord> = read.opened_all()?.into_iter().collect();
    let mut out = Vec::new();
    for i in moves {
        let found = standing(&baselines, &opened, &i);
        if !found.is_empty() {
            out.push((i, found));
        }
    }
    Ok(out)
}

/// The proper ancestors of `path` (`a/b/c`: `a`, `a/b`).
fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/').map(move |(i, _)| &path[..i])
}

/// Refuse an abort whose files would go back onto tracked paths that
/// arrived at the source after the move: a name equal up to case or
/// normalization, or a file where one of them needs a directory (or the
/// other way round).
fn check_names(read: &StateRead, intent: &MoveIntent) -> Result<HashMap<String, String>> {
    use scribe_format::path::collision_key;
    let opened_all = read.opened_all()?;
    let opened: HashMap<String, OpenedRecord> = opened_all.iter().cloned().collect();
    let standing = standing(&read.baselines()?, &opened, intent);
    let mut stays = HashMap::new();
    if standing.is_empty() {
        return Ok(stays);
    }
    let orphans = orphans(read, intent)?;
    let deferred: HashSet<String> = read.deferred_all()?.into_iter().map(|(p, _)| p).collect();
    let ours: HashSet<&str> = intent
        .files
        .iter()
        .map(|f| f.destination.as_str())
        .collect();
    let mut back: Vec<String> = intent
        .files
        .iter()
        .map(|f| f.physical_source.clone())
        .collect();
    back.extend(
        opened_all
            .into_iter()
            .filter(|(p, _)| is_under_prefix(p, &intent.destination) && !ours.contains(p.as_str()))
            .map(|(p, _)| substitute(&p, &intent.destination, &intent.source)),
    );
    let keys: HashMap<Vec<u8>, &str> = standing
        .iter()
        .map(|p| (collision_key(p), p.as_str()))
        .collect();
    let back_keys: HashMap<Vec<u8>, &str> = back
        .iter()
        .map(|p| (collision_key(p), p.as_str()))
        .collect();
    let refusal = |ours: &str, theirs: &str, how: &str| {
        if deferred.contains(ours) {
            // The moved file's source needs resolve (the server changed
            // or removed it: a rename, a case-only one included, reads
            // as a removal here): `--ours` settles it first.
            return refuse(
                ErrorCode::MoveRefused,
                ours,
                format!(
                    "cannot go back: {theirs}, which a sync brought after the move, {how}, and \
                     {ours} needs resolve: `scribe resolve {ours} --ours` keeps your move of it \
                     (as a new file at its destination if the server no longer has {ours}); \
                     then submit the move, or run `scribe move --abort {}` again",
                    intent.destination
                ),
            );
        }
        refuse(
            ErrorCode::MoveRefused,
            ours,
            format!(
                "cannot go back: {theirs}, which a sync brought after the move, {how}; submit \
                 the move instead ({theirs} stays where it is and your files go to {}), or take \
                 {theirs} out of the way (`scribe delete {theirs}` keeps a copy in the recovery \
                 area and the server keeps its history) and run `scribe move --abort {}` again",
                intent.destination, intent.destination
            ),
        )
    };
    // A moved file whose source the server no longer has (see
    // `orphans`) and that cannot go back beside what stands there now
    // stays at its destination, untracked: the server's file (often the
    // same one renamed, by case only, say) and ours both live.
    let mut collided = |p: &str, s: &str, how: &str| {
        if orphans.contains(p) {
            stays.insert(p.to_string(), s.to_string());
            Ok(())
        } else {
            Err(refusal(p, s, how))
        }
    };
    for p in &back {
        if let Some(s) = keys.get(&collision_key(p)) {
            let how = if s == p {
                "stands at this path"
            } else {
                "differs from it only in case or normalization"
            };
            collided(p, s, how)?;
        } else if let Some(s) = ancestors(p).find_map(|a| keys.get(&collision_key(a))) {
            collided(p, s, "is a file where this needs a directory")?;
        }
    }
    for s in &standing {
        if let Some(p) = ancestors(s).find_map(|a| back_keys.get(&collision_key(a))) {
            collided(p, s, "lies under this path, which is a file")?;
        }
    }
    Ok(stays)
}

/// The files of `intent` whose source the server no longer has: tracked
/// when moved (no prior add), the source's baseline now gone and nothing
/// deferred there (`resolve --ours` settled the server's removal, or
/// rename, of the source). Their physical sources.
fn orphans(read: &StateRead, intent: &MoveIntent) -> Result<HashSet<String>> {
    let deferred: HashSet<String> = read.deferred_all()?.into_iter().map(|(p, _)| p).collect();
    let mut out = HashSet::new();
    for f in &intent.files {
        let tracked = f
            .prior
            .as_ref()
            .is_none_or(|p| p.action != OpenedAction::Add);
        if tracked
            && !deferred.contains(&f.physical_source)
            && read.baseline(&f.physical_source)?.is_none()
        {
            out.insert(f.physical_source.clone());
        }
    }
    Ok(out)
}

/// Physical sources of `intent` as paths relative to its roots.
fn relative(intent: &MoveIntent, sources: &HashMap<String, String>) -> HashSet<String> {
    sources
        .keys()
        .map(|p| p[intent.source.len()..].trim_start_matches('/').to_string())
        .collect()
}

/// The destinations of `intent`'s files that an abort now would leave
/// where they are (untracked), each with the path that stands in its way:
/// their source is gone from the server and what stands there now
/// collides with them (see `check_names`).
pub fn abort_stays(ws: &Workspace, intent: &MoveIntent) -> Result<Vec<(String, String)>> {
    if !intent.complete {
        return Ok(Vec::new());
    }
    let stays = match check_names(&ws.read()?, intent) {
        Ok(s) => s,
        Err(_) => return Ok(Vec::new()),
    };
    let mut out: Vec<(String, String)> = intent
        .files
        .iter()
        .filter_map(|f| {
            stays
                .get(&f.physical_source)
                .map(|s| (f.destination.clone(), s.clone()))
        })
        .collect();
    out.sort();
    Ok(out)
}

/// Put everything under `from` back under `to` (which exists) one entry at
/// a time: an entry with nothing in its place is renamed (never replacing
/// anything), a directory standing on both sides is entered, anything else
/// refuses the abort naming the path. With `apply` unset nothing changes
/// (the check before an abort); set, it is told each entry put back. Directories emptied on the way, and
/// `from` itself, are removed.
fn merge_back(
    intent: &MoveIntent,
    from: &Path,
    to: &Path,
    rel: &str,
    stays: &HashSet<String>,
    apply: Option<&dyn MoveHooks>,
) -> Result<()> {
    if stays.contains(rel) {
        return Ok(());
    }
    let meta_from = std::fs::symlink_metadata(from).map_err(WorkspaceError::io(from))?;
    let meta_to = match std::fs::symlink_metadata(to) {
        Err(_) => {
            if let Some(hooks) = apply {
                rename_exclusive(from, to)?;
                if let Some(p) = to.parent() {
                    sync_dir(p)?;
                }
                if let Some(p) = from.parent() {
                    sync_dir(p)?;
                }
                // Counted: the crash tests stop the abort after the N-th
                // entry went back (`move-abort-merge-entry-N`).
                hooks.point("move-abort-merge-entry");
            }
            return Ok(());
        }
        Ok(m) => m,
    };
    let join = |base: &str| {
        if rel.is_empty() {
            base.to_string()
        } else {
            format!("{base}/{rel}")
        }
    };
    let both_dirs = meta_from.is_dir()
        && meta_to.is_dir()
        && !crate::platform::is_link(&meta_from)
        && !crate::platform::is_link(&meta_to);
    if !both_dirs {
        let (src, dst) = (join(&intent.source), join(&intent.destination));
        return Err(refuse(
            ErrorCode::MoveRefused,
            &src,
            format!(
                "something that arrived after the move stands where the abort would put {dst} \
                 back: move it out of the way and run `scribe move --abort {}` again, or submit \
                 the move instead",
                intent.destination
            ),
        ));
    }
    let mut names: Vec<std::ffi::OsString> = Vec::new();
    for e in std::fs::read_dir(from).map_err(WorkspaceError::io(from))? {
        names.push(e.map_err(WorkspaceError::io(from))?.file_name());
    }
    names.sort();
    for name in names {
        let shown = name.to_string_lossy();
        let sub = if rel.is_empty() {
            shown.into_owned()
        } else {
            format!("{rel}/{shown}")
        };
        merge_back(
            intent,
            &from.join(&name),
            &to.join(&name),
            &sub,
            stays,
            apply,
        )?;
    }
    let keeps_some = stays
        .iter()
        .any(|s| rel.is_empty() || s.starts_with(&format!("{rel}/")));
    if apply.is_some() && !keeps_some {
        std::fs::remove_dir(from).map_err(WorkspaceError::io(from))?;
        if let Some(p) = from.parent() {
            sync_dir(p)?;
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "moves_tests.rs"]
mod tests;

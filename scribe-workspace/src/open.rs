//! Opening files for the next submission: add, edit, delete, revert,
//! reconcile, and the status that shows them.
//!
//! These change only local state (opened records, baselines' files, the
//! recovery area); the server is not consulted. Lock acquisition, uploads
//! and submission are the client's.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use scribe_format::{Concern, ErrorCode};

use crate::detect::{detect, detect_indexed, Detection, LocalChange};
use crate::error::{Result, WorkspaceError};
use crate::records::{OpenedAction, OpenedRecord, RecoveryReason};
use crate::recovery;
use crate::scan::{now_ms, Scan, ScanOptions, ScanProblem};
use crate::state::Workspace;
use crate::sync::Materializer;

/// A path argument refused by an open operation, with the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub path: String,
    pub code: ErrorCode,
    pub detail: String,
    /// What the refusal is about, where it is known (the command line
    /// chooses its hint from it).
    pub concern: Option<Concern>,
}

/// What an open operation did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpenReport {
    pub opened: Vec<(String, OpenedAction)>,
    pub unchanged: Vec<String>,
    /// Paths named on the command line that were refused: the command
    /// fails (after doing the rest).
    pub refused: Vec<Refusal>,
    /// Paths found by walking a directory argument that cannot be
    /// versioned (#18 item 16): reported once each, not opened, and not a
    /// failure of what was opened.
    pub skipped: Vec<Refusal>,
    /// Files `reconcile` found moved or renamed outside Scribe and opened
    /// as moves (their halves are in `opened` too), by source.
    pub moved: Vec<FoundMove>,
    /// Missing files `reconcile` found a file of the same content for but
    /// left a delete and an add, with the reason (ambiguous, or the move
    /// could not be recorded).
    pub unpaired: Vec<crate::found_moves::Unpaired>,
}

/// A file `reconcile` opened as moved ([`crate::found_moves`]): the source
/// opened for delete, the destination for add with its move source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundMove {
    pub source: String,
    pub destination: String,
    /// The pending move it belongs to (`scribe move --abort ID`).
    pub operation: scribe_format::OperationId,
}

impl OpenReport {
    /// Move the refusals of paths that no argument names exactly (found
    /// by walking a directory argument) to `skipped`, each path once.
    fn split_walked(&mut self, args: &[String]) {
        let mut seen = HashSet::new();
        let (named, walked): (Vec<Refusal>, Vec<Refusal>) = std::mem::take(&mut self.refused)
            .into_iter()
            .filter(|r| seen.insert(r.path.clone()))
            .partition(|r| args.contains(&r.path));
        self.refused = named;
        self.skipped = walked;
    }
}

/// The rule code a refusal's detail ends with: `DETAIL (code)`.
fn with_code(detail: impl std::fmt::Display, code: &str) -> String {
    format!("{detail} ({code})")
}

/// Collision keys of every live or about-to-be-live path: tracked paths
/// not opened for delete, and opened adds.
fn live_keys(
    baselines: &[(String, crate::records::BaselineRecord)],
    opened: &[(String, OpenedRecord)],
) -> HashMap<Vec<u8>, String> {
    let deleted: HashSet<&str> = opened
        .iter()
        .filter(|(_, r)| r.action == OpenedAction::Delete)
        .map(|(p, _)| p.as_str())
        .collect();
    let mut keys = HashMap::new();
    for (p, _) in baselines {
        if !deleted.contains(p.as_str()) {
            keys.insert(scribe_format::path::collision_key(p), p.clone());
        }
    }
    for (p, r) in opened {
        if r.action == OpenedAction::Add {
            keys.insert(scribe_format::path::collision_key(p), p.clone());
        }
    }
    keys
}

/// The rule code of a name that differs only in case or normalization
/// from a live path (the same at `add`, `status`, `reconcile`, `submit`).
pub const COLLISION_CODE: &str = "path_collision";
/// The rule code of a new file outside a sparse view.
pub const NOT_IN_VIEW_CODE: &str = "not_in_view";

/// New files that cannot be versioned by the workspace's own rules move
/// from the changes to the problems, so `status` lists them under
/// "cannot be versioned" and `reconcile` does not open them (#18 item
/// 16): a name differing only in case or normalization from a tracked
/// path, an opened add, or a new file earlier in path order
/// (`path_collision`, what `add` refuses), and a file outside a sparse
/// view (`not_in_view`).
fn set_apart_unversionable(
    ws: &Workspace,
    detection: &mut Detection,
    problems: &mut Vec<ScanProblem>,
) -> Result<()> {
    if !detection
        .changes
        .iter()
        .any(|c| matches!(c, LocalChange::New(_)))
    {
        return Ok(());
    }
    let read = ws.read()?;
    let opened = read.opened_all()?;
    let mut keys = live_keys(&read.baselines()?, &opened);
    drop(read);
    let opened: HashSet<&str> = opened.iter().map(|(p, _)| p.as_str()).collect();
    // A tracked file that is gone and not opened is what `reconcile` opens
    // for delete in the same run: not a live key (the rule is "tracked
    // paths not opened for delete"), so a case-only rename done outside
    // scribe (`Art/Hero.PSD` -> `art/hero.psd`) is a delete and an add
    // (which `reconcile` pairs as a move, `crate::found_moves`), not a
    // delete whose replacement is refused.
    for change in &detection.changes {
        if let LocalChange::Missing { path } = change {
            if !opened.contains(path.as_str()) {
                let key = scribe_format::path::collision_key(path);
                if keys.get(&key) == Some(path) {
                    keys.remove(&key);
                }
            }
        }
    }
    let view = ws.meta()?.view;
    let mut changes = std::mem::take(&mut detection.changes);
    changes.sort_by(|a, b| a.path().cmp(b.path()));
    let mut kept = Vec::with_capacity(changes.len());
    for change in changes {
        if let LocalChange::New(file) = &change {
            let path = &file.path;
            if !opened.contains(path.as_str()) {
                if !view.is_empty()
                    && !view
                        .iter()
                        .any(|v| scribe_format::path::is_under_prefix(path, v))
                {
                    problems.push(ScanProblem {
                        path: path.clone(),
                        code: NOT_IN_VIEW_CODE.into(),
                        detail: format!("not in the workspace view ({})", view.join(", ")),
                    });
                    continue;
                }
                let key = scribe_format::path::collision_key(path);
                match keys.get(&key) {
                    Some(other) if other != path => {
                        problems.push(ScanProblem {
                            path: path.clone(),
                            code: COLLISION_CODE.into(),
                            detail: format!("differs only in case or normalization from {other}"),
                        });
                        continue;
                    }
                    _ => {
                        keys.insert(key, path.clone());
                    }
                }
            }
        }
        kept.push(change);
    }
    detection.changes = kept;
    problems.sort_by(|a, b| a.path.cmp(&b.path));
    problems.dedup();
    Ok(())
}

fn refuse(path: &str, code: ErrorCode, detail: impl Into<String>) -> Refusal {
    Refusal {
        path: path.to_string(),
        code,
        detail: detail.into(),
        concern: None,
    }
}

/// [`refuse`] about `concern`.
fn refuse_about(path: &str, code: ErrorCode, concern: Concern, detail: &str) -> Refusal {
    Refusal {
        concern: Some(concern),
        ..refuse(path, code, detail)
    }
}

/// Turn a user's path argument (relative to `cwd`, or absolute) into a
/// canonical workspace path; `""` is the workspace root.
pub fn workspace_path(root: &Path, cwd: &Path, arg: &str) -> std::result::Result<String, String> {
    let joined = std::path::absolute(cwd.join(arg)).map_err(|e| e.to_string())?;
    let mut parts: Vec<String> = Vec::new();
    let root = std::path::absolute(root).map_err(|e| e.to_string())?;
    let rel = joined
        .strip_prefix(&root)
        .map_err(|_| format!("{arg} is outside the workspace {}", root.display()))?;
    for c in rel.components() {
        match c {
            std::path::Component::Normal(n) => {
                parts.push(n.to_str().ok_or("the name is not UTF-8")?.to_string())
            }
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                if parts.pop().is_none() {
                    return Err(format!("{arg} is outside the workspace"));
                }
            }
            _ => return Err(format!("{arg} is not inside the workspace")),
        }
    }
    Ok(parts.join("/"))
}

fn opened_record(action: OpenedAction, needs_reconcile: bool) -> OpenedRecord {
    OpenedRecord {
        action,
        opened_ms: now_ms(),
        needs_reconcile,
        moved_from: None,
    }
}

fn scan_prefixes(ws: &Workspace, prefixes: &[String]) -> Scan {
    scan_prefixes_tracking(ws, prefixes, None)
}

/// The walk under `prefixes`; the files in `tracked` are found whatever
/// the ignore rules say.
fn scan_prefixes_tracking(
    ws: &Workspace,
    prefixes: &[String],
    tracked: Option<&std::collections::BTreeSet<String>>,
) -> Scan {
    let prefixes = if prefixes.iter().any(|p| p.is_empty()) {
        Vec::new()
    } else {
        prefixes.to_vec()
    };
    crate::scan::scan_tracking(
        ws.root(),
        &ScanOptions {
            prefixes,
            threads: 0,
        },
        tracked,
    )
}

/// `scribe add`: open new files (directories recurse; ignore rules apply).
///
/// Two paths whose collision keys are equal (they differ only in case or
/// Unicode normalization) are refused with `path_collision`, both against
/// each other and against tracked files, before anything is uploaded.
pub fn add(ws: &Workspace, paths: &[String]) -> Result<OpenReport> {
    let mut report = OpenReport::default();
    let found = scan_prefixes(ws, paths);
    for p in &found.problems {
        let code = if p.code == crate::guard::PROBLEM_CODE {
            ErrorCode::BeyondSymlink
        } else {
            ErrorCode::InvalidPath
        };
        report
            .refused
            .push(refuse(&p.path, code, with_code(&p.detail, &p.code)));
    }
    let read = ws.read()?;
    let baselines = read.baselines()?;
    let opened = read.opened_all()?;
    drop(read);
    // collision keys of every live or about-to-be-live path
    let mut keys = live_keys(&baselines, &opened);
    let opened_map: BTreeMap<&str, &OpenedRecord> =
        opened.iter().map(|(p, r)| (p.as_str(), r)).collect();
    let base_set: std::collections::HashSet<&str> =
        baselines.iter().map(|(p, _)| p.as_str()).collect();
    // Source roots vacated by pending moves are reserved until submit or
    // abort: a new file found there (e.g. by `add .`) is refused, not added.
    let reserved = crate::moves::reserved_roots(ws)?;
    // #18 item 10: a sparse workspace adds only inside its view (as
    // Perforce refuses files not in the client view).
    let view = ws.meta()?.view;
    let tx = ws.write()?;
    // In path order, as `status` decides which of two colliding new names
    // is the one that can be added.
    let mut files: Vec<&crate::scan::ScannedFile> = found.files.iter().collect();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    // Written together after the checks (the table opened once).
    let mut added: Vec<&str> = Vec::new();
    for file in files {
        let path = file.path.as_str();
        if base_set.contains(path) || opened_map.contains_key(path) {
            report.unchanged.push(file.path.clone());
            continue;
        }
        if let Some(root) = reserved
            .iter()
            .find(|r| scribe_format::path::is_under_prefix(path, r))
        {
            report.refused.push(refuse(
                path,
                ErrorCode::MoveReserved,
                with_code(
                    format!(
                        "{root} was vacated by a pending move and is reserved until submit or abort"
                    ),
                    "move_reserved",
                ),
            ));
            continue;
        }
        if !view.is_empty()
            && !view
                .iter()
                .any(|v| scribe_format::path::is_under_prefix(path, v))
        {
            report.refused.push(refuse(
                path,
                ErrorCode::NotInView,
                with_code(
                    format!("not in the workspace view ({})", view.join(", ")),
                    NOT_IN_VIEW_CODE,
                ),
            ));
            continue;
        }
        let key = scribe_format::path::collision_key(path);
        if let Some(other) = keys.get(&key) {
            report.refused.push(refuse(
                path,
                ErrorCode::PathCollision,
                with_code(
                    format!("differs only in case or normalization from {other}"),
                    COLLISION_CODE,
                ),
            ));
            continue;
        }
        keys.insert(key, file.path.clone());
        added.push(path);
        report.opened.push((file.path.clone(), OpenedAction::Add));
    }
    tx.put_opened_many(
        added
            .into_iter()
            .map(|p| (p, opened_record(OpenedAction::Add, false))),
    )?;
    // explicit file arguments that matched nothing (missing or ignored)
    for p in paths {
        if !p.is_empty()
            && !found
                .files
                .iter()
                .any(|f| scribe_format::path::is_under_prefix(&f.path, p))
            && !found.problems.iter().any(|x| &x.path == p)
            && !ws.root().join(p).is_dir()
        {
            report.refused.push(refuse(
                p,
                ErrorCode::NotFound,
                "no such file, or it is ignored",
            ));
        }
    }
    tx.commit()?;
    report.split_walked(paths);
    Ok(report)
}

/// Split `paths` into those no symbolic link lies above and refusals
/// (`beyond_symlink`) for the rest ([`crate::guard`]).
fn not_beyond_links(ws: &Workspace, paths: Vec<String>) -> Result<(Vec<String>, Vec<Refusal>)> {
    let mut ok = Vec::with_capacity(paths.len());
    let mut refused = Vec::new();
    let mut links = crate::guard::LinkCheck::new(ws.root());
    for path in paths {
        match links.link_above(&path)? {
            Some(link) => refused.push(refuse(
                &path,
                ErrorCode::BeyondSymlink,
                crate::guard::describe(&link),
            )),
            None => ok.push(path),
        }
    }
    Ok((ok, refused))
}

/// Tracked paths at or under each argument, with refusals for arguments
/// matching none and for paths beneath a symbolic link.
fn tracked_under(ws: &Workspace, paths: &[String]) -> Result<(Vec<String>, Vec<Refusal>)> {
    let (out, mut refused) = tracked_under_any(ws, paths)?;
    let (out, beyond) = not_beyond_links(ws, out)?;
    refused.extend(beyond);
    Ok((out, refused))
}

/// Tracked paths at or under each argument.
fn tracked_under_any(ws: &Workspace, paths: &[String]) -> Result<(Vec<String>, Vec<Refusal>)> {
    let read = ws.read()?;
    let mut out = Vec::new();
    let mut refused = Vec::new();
    for arg in paths {
        let before = out.len();
        out.extend(read.baseline_paths_under(arg)?);
        if out.len() == before {
            refused.push(refuse_about(
                arg,
                ErrorCode::NotPresent,
                Concern::NotInWorkspace,
                "not a tracked file",
            ));
        }
    }
    out.sort();
    out.dedup();
    Ok((out, refused))
}

/// `scribe edit`: open tracked files for edit (and make them writable).
pub fn edit(ws: &Workspace, paths: &[String]) -> Result<OpenReport> {
    let (targets, refused) = tracked_under(ws, paths)?;
    let mut report = OpenReport {
        refused,
        ..Default::default()
    };
    let tx = ws.write()?;
    for path in targets {
        match tx.opened(&path)? {
            Some(_) => report.unchanged.push(path.clone()),
            None => {
                tx.put_opened(&path, &opened_record(OpenedAction::Edit, false))?;
                report.opened.push((path.clone(), OpenedAction::Edit));
            }
        }
    }
    tx.commit()?;
    for (path, _) in &report.opened {
        let full = ws.root().join(path);
        if full.exists() {
            crate::platform::make_writable(&full).map_err(WorkspaceError::io(&full))?;
        }
    }
    Ok(report)
}

/// `scribe delete`: open tracked files for delete; the working file moves
/// to the recovery area.
pub fn delete(ws: &Workspace, paths: &[String]) -> Result<OpenReport> {
    let (targets, refused) = tracked_under(ws, paths)?;
    let mut report = OpenReport {
        refused,
        ..Default::default()
    };
    for path in targets {
        let existing = ws.read()?.opened(&path)?;
        if existing.as_ref().map(|r| r.action) == Some(OpenedAction::Delete) {
            report.unchanged.push(path);
            continue;
        }
        // Durable intent first, then the displacement: a crash leaves an
        // opened delete whose file may still be present, which is safe.
        let tx = ws.write()?;
        tx.put_opened(&path, &opened_record(OpenedAction::Delete, false))?;
        tx.commit()?;
        if std::fs::symlink_metadata(ws.root().join(&path)).is_ok() {
            recovery::displace(ws.root(), &path, RecoveryReason::Delete)?;
        }
        // Directories the delete emptied go too (#18 item 15); `revert`
        // creates them again.
        crate::moves::prune_empty_parents(ws.root(), &path);
        report.opened.push((path, OpenedAction::Delete));
    }
    Ok(report)
}

/// `scribe revert`: discard opened state. An edited file goes back to its
/// baseline (the local version is kept in the recovery area); a deleted file
/// is restored; an added file stays on disk, untracked.
pub fn revert(
    ws: &Workspace,
    paths: &[String],
    materializer: &dyn Materializer,
) -> Result<OpenReport> {
    let mut report = OpenReport::default();
    let moved = revert_moves(ws, paths, &mut report)?;
    let opened = ws.read()?.opened_all()?;
    let mut targets: Vec<(String, OpenedRecord)> = Vec::new();
    for arg in paths.iter().chain(&moved.restored) {
        let before = targets.len();
        targets.extend(
            opened
                .iter()
                .filter(|(p, _)| {
                    scribe_format::path::is_under_prefix(p, arg) && !moved.held.contains(p)
                })
                .cloned(),
        );
        if targets.len() == before && paths.contains(arg) && !moved.named.iter().any(|a| a == arg) {
            report.refused.push(refuse_about(
                arg,
                ErrorCode::NotPresent,
                Concern::NotOpened,
                "not opened",
            ));
        }
    }
    // A file moved without an opened record of its own is back at its
    // source: reverting it restores its baseline bytes like an edit.
    for p in &moved.restored {
        if !targets.iter().any(|(t, _)| t == p) && ws.read()?.baseline(p)?.is_some() {
            targets.push((
                p.clone(),
                OpenedRecord {
                    action: OpenedAction::Delete,
                    opened_ms: 0,
                    needs_reconcile: false,
                    moved_from: None,
                },
            ));
        }
    }
    targets.sort_by(|a, b| a.0.cmp(&b.0));
    targets.dedup_by(|a, b| a.0 == b.0);
    let readonly = ws.meta()?.readonly;
    for (path, rec) in targets {
        let baseline = ws.read()?.baseline(&path)?;
        if let (OpenedAction::Edit | OpenedAction::Delete, Some(base)) = (rec.action, baseline) {
            // Restoring the baseline reads, displaces and writes the file:
            // never through a linked directory.
            if let Some(link) = crate::guard::link_above(ws.root(), &path)? {
                report.refused.push(refuse(
                    &path,
                    ErrorCode::BeyondSymlink,
                    crate::guard::describe(&link),
                ));
                continue;
            }
            if crate::platform::check_materializable(&path).is_err() {
                report.refused.push(refuse(
                    &path,
                    ErrorCode::InvalidPath,
                    "this platform cannot hold the name",
                ));
                continue;
            }
            let full = ws.root().join(&path);
            let unchanged = match std::fs::symlink_metadata(&full) {
                Ok(meta) => {
                    meta.len() == base.size
                        && crate::detect::hash_file(&full)
                            .map_err(WorkspaceError::io(&full))?
                            .0
                            == base.content
                }
                Err(_) => false,
            };
            if !unchanged {
                if std::fs::symlink_metadata(&full).is_ok() {
                    recovery::displace(ws.root(), &path, RecoveryReason::Revert)?;
                }
                let tmp = ws
                    .state_dir()
                    .join("tmp")
                    .join(format!("revert-{}.part", base.content.to_hex()));
                materializer
                    .materialize(&path, &base, &tmp)
                    .map_err(|cause| WorkspaceError::Materialize {
                        path: path.clone(),
                        cause,
                    })?;
                if let Some(parent) = full.parent() {
                    std::fs::create_dir_all(parent).map_err(WorkspaceError::io(parent))?;
                }
                std::fs::rename(&tmp, &full).map_err(WorkspaceError::io(&full))?;
            }
            crate::platform::set_file_mode(&full, base.mode == 1, readonly)
                .map_err(WorkspaceError::io(&full))?;
            let meta = std::fs::symlink_metadata(&full).map_err(WorkspaceError::io(&full))?;
            let tx = ws.write()?;
            tx.put_baseline(
                &path,
                &crate::records::BaselineRecord {
                    fingerprint: crate::records::fingerprint_of(&meta, now_ms()),
                    ..base
                },
            )?;
            tx.remove_opened(&path)?;
            tx.commit()?;
        } else {
            let tx = ws.write()?;
            tx.remove_opened(&path)?;
            tx.commit()?;
        }
        report.opened.push((path, rec.action));
    }
    Ok(report)
}

/// What [`revert_moves`] did.
#[derive(Default)]
struct RevertedMoves {
    /// Sources of the aborted moves' files, back in place: reverted next.
    restored: Vec<String>,
    /// Paths of moves that could not be reverted: left alone.
    held: HashSet<String>,
    /// The arguments that named a file of a pending move.
    named: Vec<String>,
}

/// Reverting either half of a pending move (its source, opened for
/// delete, or its destination, opened for add) reverts the pair: the move
/// is aborted ([`crate::moves::abort`]: the files go back with their
/// current contents and prior opened records), newest first, and the
/// restored sources are then reverted like any other path. A move is
/// refused (its paths left untouched, the reason reported) when the
/// arguments name only some of its files, when a later move that is not
/// reverted depends on it, or when its abort is refused.
fn revert_moves(
    ws: &Workspace,
    paths: &[String],
    report: &mut OpenReport,
) -> Result<RevertedMoves> {
    use scribe_format::path::is_under_prefix;
    let mut out = RevertedMoves::default();
    let mut names: Vec<String> = paths.to_vec();
    let mut skipped: HashSet<[u8; 16]> = HashSet::new();
    loop {
        let pending = crate::moves::pending(ws)?;
        let named = |f: &crate::moves::MovedFile, names: &[String]| {
            names.iter().any(|a| {
                is_under_prefix(&f.physical_source, a) || is_under_prefix(&f.destination, a)
            })
        };
        let Some(m) = pending
            .iter()
            .rev()
            .find(|m| !skipped.contains(&m.operation.0) && m.files.iter().any(|f| named(f, &names)))
            .cloned()
        else {
            break;
        };
        for a in paths {
            if m.files.iter().any(|f| {
                is_under_prefix(&f.physical_source, a) || is_under_prefix(&f.destination, a)
            }) {
                out.named.push(a.clone());
            }
        }
        let how = format!(
            "move {} ({} -> {}, {} file(s))",
            m.operation.to_hex(),
            m.source,
            m.destination,
            m.files.len()
        );
        let refusal = if let Some(f) = m.files.iter().find(|f| !named(f, &names)) {
            Some(refuse(
                &m.destination,
                ErrorCode::MoveRefused,
                format!(
                    "{how} is reverted whole and {} is not named; revert {} or `scribe move --abort {}`",
                    f.destination,
                    m.destination,
                    m.operation.to_hex()
                ),
            ))
        } else if let Some(d) = pending
            .iter()
            .find(|d| d.dependencies.contains(&m.operation))
        {
            Some(refuse(
                &m.destination,
                ErrorCode::MoveDependent,
                format!(
                    "{how}: the later move {} -> {} depends on it; revert that one too",
                    d.source, d.destination
                ),
            ))
        } else {
            match crate::moves::abort(ws, &m.operation) {
                Ok(_) => None,
                Err(WorkspaceError::Refused {
                    code,
                    path,
                    detail,
                    concern,
                }) => Some(Refusal {
                    concern,
                    ..refuse(&path, code, format!("{how} cannot be reverted: {detail}"))
                }),
                Err(e) => return Err(e),
            }
        };
        match refusal {
            Some(r) => {
                report.refused.push(r);
                skipped.insert(m.operation.0);
                for f in &m.files {
                    out.held.insert(f.physical_source.clone());
                    out.held.insert(f.destination.clone());
                }
            }
            None => {
                for f in &m.files {
                    report
                        .opened
                        .push((f.destination.clone(), OpenedAction::Add));
                    out.restored.push(f.physical_source.clone());
                    names.push(f.physical_source.clone());
                }
            }
        }
    }
    Ok(out)
}

/// The full picture `scribe status` prints.
#[derive(Clone, Debug, Default)]
pub struct Status {
    /// Opened files with their records.
    pub opened: Vec<(String, OpenedRecord)>,
    /// Local changes not opened (new, modified, missing).
    pub unopened: Vec<LocalChange>,
    /// Paths whose sync was deferred: they need `resolve`.
    pub needs_resolve: Vec<String>,
    /// Names the walk found but cannot version.
    pub problems: Vec<crate::scan::ScanProblem>,
    /// How many files were hashed to decide.
    pub hashed: usize,
    /// Opened adds that differ only in case or normalization from a
    /// tracked (synced) path: see [`case_collisions`].
    pub case_collisions: Vec<CaseCollision>,
}

/// An opened add whose name differs only in case or Unicode normalization
/// from a tracked path (one a sync brought, typically): a case-insensitive
/// file system holds only one of them, and submit refuses the add
/// (`path_collision`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaseCollision {
    /// The local opened add.
    pub opened: String,
    /// The tracked path it collides with.
    pub tracked: String,
}

/// Every [`CaseCollision`]: the same rule submit applies (tracked paths
/// not opened for delete against opened adds).
pub fn case_collisions(read: &crate::state::StateRead) -> Result<Vec<CaseCollision>> {
    let opened = read.opened_all()?;
    let deleted: HashSet<&str> = opened
        .iter()
        .filter(|(_, r)| r.action == OpenedAction::Delete)
        .map(|(p, _)| p.as_str())
        .collect();
    let adds: HashMap<Vec<u8>, &str> = opened
        .iter()
        .filter(|(_, r)| r.action == OpenedAction::Add)
        .map(|(p, _)| (scribe_format::path::collision_key(p), p.as_str()))
        .collect();
    if adds.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for (p, _) in read.baselines()? {
        if deleted.contains(p.as_str()) {
            continue;
        }
        if let Some(add) = adds.get(&scribe_format::path::collision_key(&p)) {
            if *add != p {
                out.push(CaseCollision {
                    opened: add.to_string(),
                    tracked: p,
                });
            }
        }
    }
    Ok(out)
}

/// Detect local changes under `prefixes` (all when empty) and record
/// refreshed fingerprints so the next walk is stat-only.
///
/// Baselines come from the status cache ([`crate::baseline_index`]) when it
/// is valid, else from `state.redb` (and the cache is rebuilt); each file is
/// compared as the walk stats it.
pub fn detect_changes(
    ws: &Workspace,
    prefixes: &[String],
) -> Result<(Detection, Vec<ScanProblem>)> {
    let (mut index, _) = crate::baseline_index::load(ws)?;
    let read = ws.read()?;
    let options = ScanOptions {
        prefixes: if prefixes.iter().any(|p| p.is_empty()) {
            Vec::new()
        } else {
            prefixes.to_vec()
        },
        threads: 0,
    };
    let (mut detection, mut problems) =
        detect_indexed(ws.root(), &options, &index, |p| read.baseline(p))?;
    drop(read);
    set_apart_beyond_links(ws, &mut detection, &mut problems)?;
    record_refreshed(ws, &detection, Some(&mut index))?;
    set_apart_unversionable(ws, &mut detection, &mut problems)?;
    Ok((detection, problems))
}

/// A tracked file beneath a symbolic link is not missing: the walk never
/// follows the link, so it could not see the file. Such paths move from
/// the changes to the problems (`beyond_symlink`), so `status` says why and
/// `reconcile` does not open them for delete.
fn set_apart_beyond_links(
    ws: &Workspace,
    detection: &mut Detection,
    problems: &mut Vec<ScanProblem>,
) -> Result<()> {
    if !detection
        .changes
        .iter()
        .any(|c| matches!(c, LocalChange::Missing { .. }))
    {
        return Ok(());
    }
    let mut links = crate::guard::LinkCheck::new(ws.root());
    let mut kept = Vec::with_capacity(detection.changes.len());
    for change in std::mem::take(&mut detection.changes) {
        if let LocalChange::Missing { path } = &change {
            if let Some(link) = links.link_above(path)? {
                problems.push(ScanProblem {
                    path: path.clone(),
                    code: crate::guard::PROBLEM_CODE.into(),
                    detail: crate::guard::describe(&link),
                });
                continue;
            }
        }
        kept.push(change);
    }
    detection.changes = kept;
    problems.sort_by(|a, b| a.path.cmp(&b.path));
    problems.dedup();
    Ok(())
}

/// Write back the refreshed fingerprints that are settled (one
/// transaction), keeping `index` and its cache file in step.
fn record_refreshed(
    ws: &Workspace,
    detection: &Detection,
    index: Option<&mut crate::baseline_index::BaselineIndex>,
) -> Result<()> {
    let settled: Vec<_> = detection
        .refreshed
        .iter()
        .filter(|(_, fp)| fp.is_settled())
        .collect();
    // Nothing is recorded where nothing can be written: the next walk
    // hashes again (#18 item 14).
    if settled.is_empty() || ws.read_only_fs() {
        return Ok(());
    }
    let tx = ws.write()?;
    let rows: Vec<(&str, crate::records::Fingerprint)> =
        settled.iter().map(|(p, fp)| (p.as_str(), *fp)).collect();
    let present = tx.refresh_fingerprints(&rows)?;
    let written: Vec<_> = rows
        .iter()
        .zip(present)
        .filter_map(|(row, there)| there.then_some(*row))
        .collect();
    let generation = tx.stamped_baseline_generation()?;
    tx.commit()?;
    if let (Some(index), Some(generation)) = (index, generation) {
        // The transaction changed exactly these fingerprints.
        for (path, fp) in written {
            if let Some(i) = index.position(path) {
                index.refresh(i, fp);
            }
        }
        index.set_generation(generation);
        let _ = index.save(ws);
    }
    Ok(())
}

/// `scribe status`.
pub fn status(ws: &Workspace) -> Result<Status> {
    let (detection, problems) = detect_changes(ws, &[])?;
    let read = ws.read()?;
    let opened = read.opened_all()?;
    let needs_resolve = read.deferred_all()?.into_iter().map(|(p, _)| p).collect();
    let opened_paths: std::collections::HashSet<&str> =
        opened.iter().map(|(p, _)| p.as_str()).collect();
    let unopened = detection
        .changes
        .into_iter()
        .filter(|c| !opened_paths.contains(c.path()))
        .collect();
    let case_collisions = case_collisions(&read)?;
    Ok(Status {
        opened,
        unopened,
        needs_resolve,
        problems,
        hashed: detection.hashed,
        case_collisions,
    })
}

/// [`detect_changes`] without the status cache: the walk collected, then
/// merge-joined with every `state.redb` baseline. Kept as the reference the
/// cached path is tested against.
pub fn detect_changes_uncached(
    ws: &Workspace,
    prefixes: &[String],
) -> Result<(Detection, Vec<ScanProblem>)> {
    let read = ws.read()?;
    let baselines = read.baselines()?;
    drop(read);
    // Ignore rules apply to untracked files only.
    let tracked: std::collections::BTreeSet<String> =
        baselines.iter().map(|(p, _)| p.clone()).collect();
    let found = scan_prefixes_tracking(ws, prefixes, Some(&tracked));
    let baselines: Vec<_> = baselines
        .into_iter()
        .filter(|(p, _)| {
            prefixes.is_empty()
                || prefixes.iter().any(|x| x.is_empty())
                || prefixes
                    .iter()
                    .any(|x| scribe_format::path::is_under_prefix(p, x))
        })
        .collect();
    let mut detection = detect(ws.root(), &found, &baselines);
    let mut problems = found.problems;
    set_apart_beyond_links(ws, &mut detection, &mut problems)?;
    record_refreshed(ws, &detection, None)?;
    set_apart_unversionable(ws, &mut detection, &mut problems)?;
    Ok((detection, problems))
}

/// `scribe reconcile`: open every detected local change (new files as
/// adds, modified as edits, missing as deletes), flagged as offline intent.
/// A missing file and a new file with exactly its content are opened as
/// the move `scribe move` would have recorded ([`crate::found_moves`]).
pub fn reconcile(ws: &Workspace, prefixes: &[String]) -> Result<OpenReport> {
    let (detection, problems) = detect_changes(ws, prefixes)?;
    let mut report = OpenReport::default();
    // What cannot be versioned is never opened, and is said once each
    // (#18 item 16): the same rules and codes as `add` and `status`.
    for p in &problems {
        let code = match p.code.as_str() {
            crate::guard::PROBLEM_CODE => ErrorCode::BeyondSymlink,
            COLLISION_CODE => ErrorCode::PathCollision,
            NOT_IN_VIEW_CODE => ErrorCode::NotInView,
            _ => ErrorCode::InvalidPath,
        };
        report
            .refused
            .push(refuse(&p.path, code, with_code(&p.detail, &p.code)));
    }
    let reserved = crate::moves::reserved_roots(ws)?;
    // A missing file is not opened for delete when a new file differing
    // from it only in case or normalization (its replacement) was refused
    // and none of that name is opened: the delete alone would drop the
    // asset from the repository at the next submit.
    let refused_keys: HashMap<Vec<u8>, &str> = problems
        .iter()
        .filter(|p| p.code == COLLISION_CODE)
        .map(|p| (scribe_format::path::collision_key(&p.path), p.path.as_str()))
        .collect();
    let added_keys: HashSet<Vec<u8>> = detection
        .changes
        .iter()
        .filter(|c| matches!(c, LocalChange::New(_)))
        .map(|c| scribe_format::path::collision_key(c.path()))
        .collect();
    let already: HashSet<String> = ws
        .read()?
        .opened_all()?
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    // What each change opens as, in path order; the moves among the
    // deletes and adds are found before anything is written.
    let mut plan: Vec<(String, OpenedAction)> = Vec::new();
    let mut new_files: Vec<crate::scan::ScannedFile> = Vec::new();
    for change in detection.changes {
        let path = change.path().to_string();
        if already.contains(&path) {
            report.unchanged.push(path);
            continue;
        }
        if matches!(change, LocalChange::Missing { .. }) {
            let key = scribe_format::path::collision_key(&path);
            if let (Some(other), false) = (refused_keys.get(&key), added_keys.contains(&key)) {
                let detail = format!(
                    "not opened for delete: {other}, which differs from it only in case or \
                     normalization, could not be opened"
                );
                report.refused.push(refuse(
                    &path,
                    ErrorCode::PathCollision,
                    with_code(detail, COLLISION_CODE),
                ));
                continue;
            }
        }
        if matches!(change, LocalChange::New(_)) {
            if let Some(root) = reserved
                .iter()
                .find(|r| scribe_format::path::is_under_prefix(&path, r))
            {
                let detail = format!(
                    "{root} was vacated by a pending move and is reserved until submit or abort"
                );
                report
                    .refused
                    .push(refuse(&path, ErrorCode::MoveReserved, detail));
                continue;
            }
        }
        let action = match change {
            LocalChange::New(file) => {
                new_files.push(file);
                OpenedAction::Add
            }
            LocalChange::Modified { .. } => OpenedAction::Edit,
            LocalChange::Missing { .. } => OpenedAction::Delete,
        };
        plan.push((path, action));
    }
    // Files moved or renamed outside Scribe: only what is opened anyway
    // (nothing refused, nothing already opened) pairs.
    let gone: Vec<String> = plan
        .iter()
        .filter(|(_, a)| *a == OpenedAction::Delete)
        .map(|(p, _)| p.clone())
        .collect();
    let new_refs: Vec<&crate::scan::ScannedFile> = new_files.iter().collect();
    let found = crate::found_moves::find(ws, &gone, &new_refs)?;
    let mut moved: HashSet<&str> = HashSet::new();
    for intent in &found.intents {
        for f in &intent.files {
            moved.insert(&f.physical_source);
            moved.insert(&f.destination);
            report.moved.push(FoundMove {
                source: f.physical_source.clone(),
                destination: f.destination.clone(),
                operation: intent.operation,
            });
        }
    }
    report.moved.sort_by(|a, b| a.source.cmp(&b.source));
    report.unpaired = found.unpaired.clone();
    let opened_ms = now_ms();
    let tx = ws.write()?;
    // The same records `scribe move` makes (`moves::open_moved`).
    for intent in &found.intents {
        crate::moves::open_moved(&tx, intent, opened_ms)?;
    }
    for (path, action) in plan {
        if !moved.contains(path.as_str()) {
            tx.put_opened(&path, &opened_record(action, true))?;
        }
        report.opened.push((path, action));
    }
    tx.commit()?;
    report.split_walked(prefixes);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{BaselineRecord, Fingerprint};
    use scribe_format::{FileContentId, ManifestId};
    use std::fs;

    struct Memory(HashMap<FileContentId, Vec<u8>>);
    impl Materializer for Memory {
        fn write_to(
            &self,
            _p: &str,
            t: &BaselineRecord,
            out: &mut std::fs::File,
        ) -> std::result::Result<(), crate::sync::WriteError> {
            std::io::Write::write_all(
                out,
                self.0.get(&t.content).ok_or_else(|| {
                    crate::sync::WriteError::new(scribe_format::ErrorCode::NotFound, "unknown")
                })?,
            )
            .map_err(|e| crate::sync::WriteError::io("writing", &e))
        }
    }

    fn tracked(ws: &Workspace, path: &str, bytes: &[u8]) {
        let full = ws.root().join(path);
        fs::create_dir_all(full.parent().unwrap()).unwrap();
        fs::write(&full, bytes).unwrap();
        let meta = fs::metadata(&full).unwrap();
        let tx = ws.write().unwrap();
        tx.put_baseline(
            path,
            &BaselineRecord {
                incarnation: [0; 16],
                manifest: ManifestId::of_payload(bytes),
                content: FileContentId::of(bytes),
                size: bytes.len() as u64,
                mode: u8::from(crate::platform::is_executable(&meta)),
                change: 1,
                fingerprint: Fingerprint {
                    recorded_ms: 0,
                    ..crate::records::fingerprint_of(&meta, 0)
                },
            },
        )
        .unwrap();
        tx.commit().unwrap();
    }

    fn ws() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        let mut meta = crate::state::tests_meta();
        meta.readonly = false;
        let ws = Workspace::create(dir.path(), &meta).unwrap();
        (dir, ws)
    }

    #[test]
    fn add_recurses_and_refuses_case_collisions() {
        let (_d, ws) = ws();
        tracked(&ws, "art/Hero.psd", b"tracked");
        fs::write(ws.root().join("art/hero.PSD"), b"x").unwrap();
        fs::create_dir_all(ws.root().join("art/new")).unwrap();
        fs::write(ws.root().join("art/new/a.bin"), b"a").unwrap();
        fs::write(ws.root().join("art/new/A.bin"), b"A").unwrap();
        let r = add(&ws, &["art".into()]).unwrap();
        let opened: Vec<&str> = r.opened.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(opened, vec!["art/new/A.bin"]);
        // Found by walking `art`: reported, not failing (#18 item 16).
        assert!(r.refused.is_empty());
        let codes: Vec<(&str, &str)> = r
            .skipped
            .iter()
            .map(|x| (x.path.as_str(), x.code.name()))
            .collect();
        assert_eq!(
            codes,
            vec![
                ("art/hero.PSD", "path_collision"),
                ("art/new/a.bin", "path_collision")
            ]
        );
        assert_eq!(r.unchanged, vec!["art/Hero.psd"]);
        let r = add(&ws, &["missing.txt".into()]).unwrap();
        assert_eq!(r.refused[0].code, ErrorCode::NotFound);
    }

    #[test]
    fn edit_delete_revert_round_trip() {
        let (_d, ws) = ws();
        tracked(&ws, "a.txt", b"original");
        tracked(&ws, "b.txt", b"keep me");
        let mem = Memory(
            [
                (FileContentId::of(b"original"), b"original".to_vec()),
                (FileContentId::of(b"keep me"), b"keep me".to_vec()),
            ]
            .into_iter()
            .collect(),
        );
        assert_eq!(edit(&ws, &["a.txt".into()]).unwrap().opened.len(), 1);
        fs::write(ws.root().join("a.txt"), b"my change").unwrap();
        assert_eq!(delete(&ws, &["b.txt".into()]).unwrap().opened.len(), 1);
        assert!(!ws.root().join("b.txt").exists());
        assert_eq!(
            edit(&ws, &["nope".into()]).unwrap().refused[0].code,
            ErrorCode::NotPresent
        );
        let r = revert(&ws, &["".into()], &mem).unwrap();
        assert_eq!(r.opened.len(), 2);
        assert_eq!(fs::read(ws.root().join("a.txt")).unwrap(), b"original");
        assert_eq!(fs::read(ws.root().join("b.txt")).unwrap(), b"keep me");
        assert!(ws.read().unwrap().opened_all().unwrap().is_empty());
        // the local edit and the deleted file are both in the recovery area
        let kept = recovery::list(ws.root()).unwrap();
        assert_eq!(kept.len(), 2, "{kept:?}");
    }

    #[test]
    fn status_and_reconcile_find_offline_work() {
        let (_d, ws) = ws();
        tracked(&ws, "edited", b"v1");
        tracked(&ws, "gone", b"v1");
        tracked(&ws, "same", b"v1");
        fs::write(ws.root().join("edited"), b"v2 offline").unwrap();
        fs::remove_file(ws.root().join("gone")).unwrap();
        fs::write(ws.root().join("new"), b"n").unwrap();
        let s = status(&ws).unwrap();
        let paths: Vec<&str> = s.unopened.iter().map(|c| c.path()).collect();
        assert_eq!(paths, vec!["edited", "gone", "new"]);
        assert!(s.opened.is_empty());
        let r = reconcile(&ws, &[]).unwrap();
        let actions: Vec<(&str, OpenedAction)> =
            r.opened.iter().map(|(p, a)| (p.as_str(), *a)).collect();
        assert_eq!(
            actions,
            vec![
                ("edited", OpenedAction::Edit),
                ("gone", OpenedAction::Delete),
                ("new", OpenedAction::Add)
            ]
        );
        let opened = ws.read().unwrap().opened_all().unwrap();
        assert!(opened.iter().all(|(_, r)| r.needs_reconcile));
        let s = status(&ws).unwrap();
        assert!(s.unopened.is_empty());
        assert_eq!(s.opened.len(), 3);
    }

    /// A case-only rename done outside scribe (`Art/Hero.PSD` ->
    /// `art/hero.psd`): the tracked path is gone, so it is opened for
    /// delete and is not a live key; the new name is opened for add, not
    /// refused as a collision (which left a lone delete for submit). The
    /// two halves are one move (`found_moves`, session 23).
    #[test]
    fn reconcile_opens_both_halves_of_a_case_only_rename() {
        let (_d, ws) = ws();
        tracked(&ws, "Art/Hero.PSD", b"hero");
        tracked(&ws, "Art/Other.psd", b"other");
        fs::rename(ws.root().join("Art"), ws.root().join("art")).unwrap();
        fs::rename(
            ws.root().join("art/Hero.PSD"),
            ws.root().join("art/hero.psd"),
        )
        .unwrap();
        let s = status(&ws).unwrap();
        assert!(s.problems.is_empty(), "{:?}", s.problems);
        let r = reconcile(&ws, &[]).unwrap();
        assert!(r.refused.is_empty() && r.skipped.is_empty(), "{r:?}");
        let actions: Vec<(&str, OpenedAction)> =
            r.opened.iter().map(|(p, a)| (p.as_str(), *a)).collect();
        assert_eq!(
            actions,
            vec![
                ("Art/Hero.PSD", OpenedAction::Delete),
                ("Art/Other.psd", OpenedAction::Delete),
                ("art/Other.psd", OpenedAction::Add),
                ("art/hero.psd", OpenedAction::Add),
            ]
        );
        assert!(case_collisions(&ws.read().unwrap()).unwrap().is_empty());
        assert_eq!(r.moved.len(), 2, "{r:?}");
    }

    /// A delete is opened only with a replacement: of two new names for
    /// one missing file the first replaces it (the second is refused);
    /// when the only new name is refused (it collides with an opened add
    /// whose file is gone), the missing file is not opened for delete
    /// and both are reported.
    #[test]
    fn reconcile_never_opens_a_delete_whose_only_replacement_is_refused() {
        let (_d, ws) = ws();
        tracked(&ws, "Hero.psd", b"hero");
        fs::rename(ws.root().join("Hero.psd"), ws.root().join("HERO.psd")).unwrap();
        fs::write(ws.root().join("hero.PSD"), b"second").unwrap();
        let r = reconcile(&ws, &[]).unwrap();
        let actions: Vec<(&str, OpenedAction)> =
            r.opened.iter().map(|(p, a)| (p.as_str(), *a)).collect();
        assert_eq!(
            actions,
            vec![
                ("HERO.psd", OpenedAction::Add),
                ("Hero.psd", OpenedAction::Delete)
            ]
        );
        assert_eq!(r.skipped.len(), 1, "{r:?}");
        assert_eq!(r.skipped[0].path, "hero.PSD");

        let (_d2, ws) = super::tests::ws();
        tracked(&ws, "a/Keep.psd", b"keep");
        let tx = ws.write().unwrap();
        tx.put_opened("A/keep.psd", &opened_record(OpenedAction::Add, false))
            .unwrap();
        tx.commit().unwrap();
        fs::remove_file(ws.root().join("a/Keep.psd")).unwrap();
        fs::write(ws.root().join("a/KEEP.psd"), b"third").unwrap();
        let r = reconcile(&ws, &[]).unwrap();
        assert!(r.opened.is_empty(), "{:?}", r.opened);
        // Found by the walk: reported (`not opened: ...`), each path once.
        let skipped: Vec<(&str, ErrorCode)> = r
            .skipped
            .iter()
            .map(|x| (x.path.as_str(), x.code))
            .collect();
        assert_eq!(
            skipped,
            vec![
                ("a/KEEP.psd", ErrorCode::PathCollision),
                ("a/Keep.psd", ErrorCode::PathCollision)
            ]
        );
        assert!(
            r.skipped[1]
                .detail
                .contains("not opened for delete: a/KEEP.psd"),
            "{}",
            r.skipped[1].detail
        );
        assert!(ws.read().unwrap().opened("a/Keep.psd").unwrap().is_none());
    }

    /// Ignore rules apply to untracked files only (as git's do): a tracked
    /// file a new rule matches is never missing while it is on disk, so
    /// `reconcile` never opens it for delete; a changed one is modified.
    #[test]
    fn an_ignore_rule_never_makes_a_tracked_file_missing() {
        let (_d, ws) = ws();
        tracked(&ws, "textures/hero.bin", b"precious");
        tracked(&ws, "build/out.o", b"v1");
        tracked(&ws, "build/sub/deep.o", b"deep");
        tracked(&ws, "readme.txt", b"x");
        fs::write(ws.root().join(".scribeignore"), b"*.bin\nbuild/\n").unwrap();
        fs::write(ws.root().join("build/out.o"), b"v2 offline").unwrap();
        // Untracked files the rules match stay ignored.
        fs::write(ws.root().join("textures/new.bin"), b"n").unwrap();
        fs::write(ws.root().join("build/new.o"), b"n").unwrap();
        fs::write(ws.root().join("build/sub/new.o"), b"n").unwrap();
        let s = status(&ws).unwrap();
        let paths: Vec<String> = s
            .unopened
            .iter()
            .map(|c| match c {
                LocalChange::New(f) => format!("new {}", f.path),
                LocalChange::Modified { file, .. } => format!("modified {}", file.path),
                LocalChange::Missing { path } => format!("missing {path}"),
            })
            .collect();
        assert_eq!(paths, vec!["new .scribeignore", "modified build/out.o"]);
        for prefixes in [
            &["textures/hero.bin"][..],
            &["textures"][..],
            &["build"][..],
            &["build/sub"][..],
            &["build/sub/deep.o"][..],
        ] {
            let prefixes: Vec<String> = prefixes.iter().map(|p| p.to_string()).collect();
            for (d, _) in [
                detect_changes(&ws, &prefixes).unwrap(),
                detect_changes_uncached(&ws, &prefixes).unwrap(),
            ] {
                assert!(
                    d.changes
                        .iter()
                        .all(|c| !matches!(c, LocalChange::Missing { .. } | LocalChange::New(_))),
                    "{prefixes:?}: {:?}",
                    d.changes
                );
            }
        }
        let (plain, _) = detect_changes_uncached(&ws, &[]).unwrap();
        let plain: Vec<&str> = plain.changes.iter().map(|c| c.path()).collect();
        assert_eq!(plain, vec![".scribeignore", "build/out.o"]);
        let r = reconcile(&ws, &[]).unwrap();
        let actions: Vec<(&str, OpenedAction)> =
            r.opened.iter().map(|(p, a)| (p.as_str(), *a)).collect();
        assert_eq!(
            actions,
            vec![
                (".scribeignore", OpenedAction::Add),
                ("build/out.o", OpenedAction::Edit)
            ]
        );
        // Deleted, a tracked ignored file is missing as any other.
        fs::remove_file(ws.root().join("textures/hero.bin")).unwrap();
        let s = status(&ws).unwrap();
        let paths: Vec<&str> = s.unopened.iter().map(|c| c.path()).collect();
        assert_eq!(paths, vec!["textures/hero.bin"]);
    }

    #[test]
    fn workspace_paths_from_arguments() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("art/sub")).unwrap();
        assert_eq!(
            workspace_path(root, &root.join("art/sub"), "../x.psd").unwrap(),
            "art/x.psd"
        );
        assert_eq!(workspace_path(root, root, ".").unwrap(), "");
        assert!(workspace_path(root, root, "../outside").is_err());
    }
}

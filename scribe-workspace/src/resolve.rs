//! `scribe resolve`: settle a path whose sync was deferred because it had
//! local work.
//!
//! The deferred row holds *theirs* (the server's target, or none for a
//! removal); the baseline is the *base*; the working file is *ours*.
//!
//! - `Ours` keeps the working file and rebases it: the baseline becomes
//!   theirs, and the path is opened (edit, add when theirs removed it,
//!   delete when ours is gone) so the next submit carries our bytes over
//!   their change.
//! - `Theirs` displaces the working file into the recovery area (reason
//!   `resolve`), writes theirs, and drops the opened record.
//! - `Merged(file)` copies `file` aside first (a merged file that cannot
//!   be read refuses with nothing touched), then displaces the working file,
//!   puts the copy in its place and proceeds as `Ours`. When `file` is the
//!   working file itself (merged in place) nothing is copied or displaced:
//!   its bytes are the merge.
//!
//! Nothing is lost: every displaced working file keeps a recovery entry.

use std::path::{Path, PathBuf};

use scribe_format::{Concern, ErrorCode};

use crate::error::{Result, WorkspaceError};
use crate::records::fingerprint_of;
use crate::records::{BaselineRecord, OpenedAction, OpenedRecord, RecoveryReason};
use crate::recovery;
use crate::scan::now_ms;
use crate::state::Workspace;
use crate::sync::Materializer;

/// How to settle a deferred path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolution {
    Ours,
    Theirs,
    Merged(PathBuf),
}

/// The outcome for one path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolved {
    /// Opened with this action over the new base.
    Opened(OpenedAction),
    /// `--merged`: the merged file is the working file now, opened with
    /// this action over the new base; `kept_yours`: the working file it
    /// replaced went to the recovery area (false when merged in place).
    Merged {
        action: OpenedAction,
        kept_yours: bool,
    },
    /// The working copy now holds theirs (or nothing, if theirs removed it);
    /// `kept_yours`: a working file was there and went to the recovery area.
    TookTheirs { kept_yours: bool },
    /// Both sides removed the path: nothing remains to submit or recover.
    BothRemoved,
    /// The server removed (or renamed) a file this workspace moved away in
    /// a pending move: the move keeps it, as a new file at each of these
    /// destinations (opened for add with no move source, since the server
    /// has no source left to move). The move still lists it, so an abort
    /// brings it back.
    MovedAsNew { destinations: Vec<String> },
    /// The server moved the file (this workspace had it opened or
    /// changed): the working file followed the move to `to`, opened for
    /// edit over the server's revision there (see [`follow_move`]).
    FollowedMove { to: String, change: u64 },
}

/// Whether `--ours` on `path` could follow a move on the server: the
/// server removed it (the deferred row has no target), this workspace
/// still has a working file there and a baseline of it, and no pending
/// move carries it. The base change, so the caller can look for the move
/// in the server's history after it.
pub fn may_follow_move(ws: &Workspace, path: &str) -> Result<Option<u64>> {
    let read = ws.read()?;
    let row = read.deferred_all()?.into_iter().find(|(p, _)| p == path);
    let Some((_, row)) = row else {
        return Ok(None);
    };
    let Some(base) = read.baseline(path)? else {
        return Ok(None);
    };
    if row.target.is_some() {
        return Ok(None);
    }
    drop(read);
    let full = crate::guard::checked(ws.root(), path)?;
    if !std::fs::symlink_metadata(&full).is_ok_and(|m| m.is_file()) {
        return Ok(None);
    }
    let moved_away = crate::moves::pending(ws)?
        .iter()
        .any(|m| m.files.iter().any(|f| f.physical_source == path));
    Ok((!moved_away).then_some(base.change))
}

/// `--ours` on `path`, which the server moved to `to` in `change` (a sync
/// wrote `to` and deferred `path`, where this workspace had local work):
/// the working file follows the move, replacing the server's copy at `to`
/// (which must be exactly its baseline: tracked, unopened, not deferred,
/// its bytes the baseline's, so nothing but server bytes is replaced), and
/// `to` is opened for edit over the server's revision; `path` is settled
/// (its baseline, opened record and deferred row go). `None`, with
/// nothing changed, when `to` is not such a file here (the caller settles
/// `path` as before: kept where it is).
pub fn follow_move(ws: &Workspace, path: &str, to: &str, change: u64) -> Result<Option<Resolved>> {
    if may_follow_move(ws, path)?.is_none() || to == path {
        return Ok(None);
    }
    let read = ws.read()?;
    let Some(theirs) = read.baseline(to)? else {
        return Ok(None);
    };
    if read.opened(to)?.is_some() || read.deferred_all()?.iter().any(|(p, _)| p == to) {
        return Ok(None);
    }
    let opened = read.opened(path)?;
    drop(read);
    let from = crate::guard::checked(ws.root(), path)?;
    let dest = crate::guard::checked(ws.root(), to)?;
    match crate::detect::hash_file(&dest) {
        Ok((content, size)) if content == theirs.content && size == theirs.size => {}
        _ => return Ok(None),
    }
    crate::platform::make_writable(&from).map_err(WorkspaceError::io(&from))?;
    // The server's copy at `to` is exactly its baseline (checked just
    // above): the server holds it, so it is replaced, as sync replaces an
    // unmodified file, without a recovery copy.
    std::fs::rename(&from, &dest).map_err(WorkspaceError::io(&dest))?;
    if let Some(parent) = dest.parent() {
        crate::state::sync_dir(parent)?;
    }
    let tx = ws.write()?;
    tx.remove_baseline(path)?;
    tx.remove_opened(path)?;
    tx.remove_deferred(path)?;
    tx.put_opened(
        to,
        &OpenedRecord {
            action: OpenedAction::Edit,
            opened_ms: opened.as_ref().map_or_else(now_ms, |o| o.opened_ms),
            needs_reconcile: true,
            moved_from: None,
        },
    )?;
    tx.commit()?;
    crate::moves::prune_empty_parents(ws.root(), path);
    Ok(Some(Resolved::FollowedMove {
        to: to.to_string(),
        change,
    }))
}

/// Settle `path`. Refuses (`not_present`, about nothing to resolve) when the
/// path is not waiting for resolution.
pub fn resolve(
    ws: &Workspace,
    path: &str,
    how: &Resolution,
    materializer: &dyn Materializer,
) -> Result<Resolved> {
    let read = ws.read()?;
    let deferred = read
        .deferred_all()?
        .into_iter()
        .find(|(p, _)| p == path)
        .map(|(_, e)| e);
    let Some(row) = deferred else {
        return Err(WorkspaceError::refused_about(
            ErrorCode::NotPresent,
            Concern::NothingToResolve,
            path,
            "nothing to resolve: the path is not waiting for resolution",
        ));
    };
    let opened = read.opened(path)?;
    drop(read);
    // The server changed a file this workspace has moved away (a pending
    // move): theirs, or a merge, written at the source the move vacated
    // would stand there beside the move's add, and neither the move's
    // abort, nor revert, nor submit could settle it. The move is undone
    // first (it puts our file back at its source, still to resolve).
    let moved_away = match how {
        Resolution::Ours => None,
        _ => crate::moves::pending(ws)?
            .into_iter()
            .find(|m| m.files.iter().any(|f| f.physical_source == path)),
    };
    if let Some(m) = moved_away {
        let op = m.operation.to_hex();
        return Err(WorkspaceError::refused(
            ErrorCode::MoveRefused,
            path,
            format!(
                "the server changed it after the pending move {op} ({} -> {}) moved it away; \
                 `--ours` keeps the move over their change; to take theirs or a merge, undo the \
                 move with `scribe move --abort {op}`, resolve {path}, then move it again",
                m.source, m.destination
            ),
        ));
    }
    // Every resolution reads, displaces or writes the working file: never
    // beneath a linked directory (the path stays deferred).
    let full = crate::guard::checked(ws.root(), path)?;
    let readonly = ws.meta()?.readonly;
    let present = std::fs::symlink_metadata(&full).is_ok();
    match how {
        Resolution::Theirs => {
            let kept_in_the_way = row.target.is_some() && clear_ancestors(ws, path)?;
            if present {
                recovery::displace(ws.root(), path, RecoveryReason::Resolve)?;
            }
            let tx_base = match row.target {
                Some(t) => {
                    place(ws, path, &t, materializer, readonly)?;
                    let meta =
                        std::fs::symlink_metadata(&full).map_err(WorkspaceError::io(&full))?;
                    Some(BaselineRecord {
                        fingerprint: fingerprint_of(&meta, now_ms()),
                        ..t
                    })
                }
                None => None,
            };
            let tx = ws.write()?;
            match tx_base {
                Some(b) => tx.put_baseline(path, &b)?,
                None => tx.remove_baseline(path)?,
            }
            tx.remove_opened(path)?;
            tx.remove_deferred(path)?;
            tx.commit()?;
            if !full.exists() {
                // Theirs removed it: the directories it leaves empty go,
                // as a sync's removal prunes them.
                crate::moves::prune_empty_parents(ws.root(), path);
            }
            Ok(Resolved::TookTheirs {
                kept_yours: present || kept_in_the_way,
            })
        }
        Resolution::Ours | Resolution::Merged(_) => {
            let mut displaced = false;
            if let Resolution::Merged(src) = how {
                // The working file merged in place is its own result: its
                // bytes are the merge and nothing is moved away. Any other
                // merged file is copied in full before the working file is
                // displaced, so a merged file that cannot be read refuses
                // with the working file untouched.
                if !(present && same_file(src, &full)) {
                    let staged = stage_merged(ws, src)?;
                    if present {
                        if let Err(e) = recovery::displace(ws.root(), path, RecoveryReason::Resolve)
                        {
                            let _ = std::fs::remove_file(&staged);
                            return Err(e);
                        }
                        displaced = true;
                    }
                    put_in_place(&staged, &full)?;
                }
            }
            let ours_present = std::fs::symlink_metadata(&full).is_ok();
            let action = match (row.target.is_some(), ours_present) {
                (true, true) => OpenedAction::Edit,
                (false, true) => OpenedAction::Add,
                (true, false) => OpenedAction::Delete,
                (false, false) => {
                    if let Some(kept) = keep_moved_as_new(ws, path)? {
                        return Ok(kept);
                    }
                    // Both sides removed it: nothing remains to submit.
                    let tx = ws.write()?;
                    tx.remove_baseline(path)?;
                    tx.remove_opened(path)?;
                    tx.remove_deferred(path)?;
                    tx.commit()?;
                    return Ok(Resolved::BothRemoved);
                }
            };
            if ours_present {
                crate::platform::make_writable(&full).map_err(WorkspaceError::io(&full))?;
            }
            // A source this workspace moved away: the move's add names
            // the revision it was moved from, and the delete is rebased
            // onto theirs here, so the move is rebased with it.
            let read = ws.read()?;
            let old_change = read.baseline(path)?.map(|b| b.change);
            let mut rebased_moves = Vec::new();
            let mut rebased_adds = Vec::new();
            if let (Some(t), Some(old), false) = (&row.target, old_change, ours_present) {
                let new = t.change;
                for mut m in crate::moves::pending(ws)? {
                    let mut changed = false;
                    for f in &mut m.files {
                        if f.original_source == path && f.original_change == old {
                            f.original_change = new;
                            changed = true;
                        }
                    }
                    if changed {
                        rebased_moves.push(m);
                    }
                }
                for (p, mut o) in read.opened_all()? {
                    if o.moved_from.as_ref() == Some(&(path.to_string(), old)) {
                        o.moved_from = Some((path.to_string(), new));
                        rebased_adds.push((p, o));
                    }
                }
            }
            drop(read);
            let tx = ws.write()?;
            for m in &rebased_moves {
                tx.put_workflow(&m.key(), &m.encode())?;
            }
            for (p, o) in &rebased_adds {
                tx.put_opened(p, o)?;
            }
            match row.target {
                // The base is theirs; the fingerprint is left unsettled
                // so the next status hashes the working file.
                Some(t) => tx.put_baseline(path, &t)?,
                None => tx.remove_baseline(path)?,
            }
            tx.put_opened(
                path,
                &OpenedRecord {
                    action,
                    opened_ms: opened.as_ref().map_or_else(now_ms, |o| o.opened_ms),
                    needs_reconcile: true,
                    moved_from: opened.and_then(|o| o.moved_from),
                },
            )?;
            tx.remove_deferred(path)?;
            tx.commit()?;
            Ok(match how {
                Resolution::Merged(_) => Resolved::Merged {
                    action,
                    kept_yours: displaced,
                },
                _ => Resolved::Opened(action),
            })
        }
    }
}

/// `--ours` on the source of a pending move that the server removed (a
/// delete, or a rename such as a case-only one, which the workspace sees as
/// a removal here and an add elsewhere). Our side did not remove the file,
/// it moved it: the move keeps it, as a new file at its destination, since
/// the server has no source left to carry the move from. The source's
/// baseline, its delete and its deferred row go; each opened add moved
/// from it drops its move source. The move record is left as it is, so an
/// abort still brings the file back (`moves::abort`). `None` when no
/// pending move carries `path` (both sides removed it).
fn keep_moved_as_new(ws: &Workspace, path: &str) -> Result<Option<Resolved>> {
    let carried = crate::moves::pending(ws)?.into_iter().any(|m| {
        m.files.iter().any(|f| {
            f.physical_source == path
                && f.prior
                    .as_ref()
                    .is_none_or(|p| p.action != OpenedAction::Add)
        })
    });
    if !carried {
        return Ok(None);
    }
    let read = ws.read()?;
    let mut destinations = Vec::new();
    let mut adds = Vec::new();
    for (p, mut o) in read.opened_all()? {
        if o.moved_from.as_ref().is_some_and(|(s, _)| s == path) {
            o.moved_from = None;
            destinations.push(p.clone());
            adds.push((p, o));
        }
    }
    drop(read);
    if adds.is_empty() {
        return Ok(None);
    }
    let tx = ws.write()?;
    for (p, o) in &adds {
        tx.put_opened(p, o)?;
    }
    tx.remove_baseline(path)?;
    tx.remove_opened(path)?;
    tx.remove_deferred(path)?;
    tx.commit()?;
    Ok(Some(Resolved::MovedAsNew { destinations }))
}

/// Make room for theirs beneath a file standing where a directory on the
/// way goes (a file turned into a directory; sync deferred the path with
/// [`crate::sync::DeferReason::FileInTheWay`]). An untracked file there is
/// displaced into the recovery area like any working file theirs replaces;
/// a tracked, opened or deferred one is local work of its own path and is
/// refused, naming it, until that path is settled. Returns whether a file
/// was displaced.
fn clear_ancestors(ws: &Workspace, path: &str) -> Result<bool> {
    let Some(dir) = crate::sync::file_in_the_way(ws.root(), path)? else {
        return Ok(false);
    };
    let read = ws.read()?;
    let tracked = read.baseline(dir)?.is_some()
        || read.opened(dir)?.is_some()
        || read.deferred_all()?.iter().any(|(p, _)| p == dir);
    drop(read);
    if tracked {
        return Err(WorkspaceError::unwritable(
            path,
            format!(
                "the file {dir} stands where its directory goes; settle {dir} first \
                 (resolve, revert or delete it)"
            ),
        ));
    }
    recovery::displace(ws.root(), dir, RecoveryReason::Resolve)?;
    Ok(true)
}

fn place(
    ws: &Workspace,
    path: &str,
    target: &BaselineRecord,
    materializer: &dyn Materializer,
    readonly: bool,
) -> Result<()> {
    let full = crate::guard::checked(ws.root(), path)?;
    if let Err(e) = crate::platform::check_materializable(path) {
        return Err(WorkspaceError::unwritable(path, e.to_string()));
    }
    let tmp = ws
        .state_dir()
        .join("tmp")
        .join(format!("resolve-{}.part", target.content.to_hex()));
    materializer
        .materialize(path, target, &tmp)
        .map_err(|cause| WorkspaceError::Materialize {
            path: path.into(),
            cause,
        })?;
    crate::platform::set_file_mode(&tmp, target.mode == 1, readonly)
        .map_err(WorkspaceError::io(&tmp))?;
    if let Some(parent) = full.parent() {
        std::fs::create_dir_all(parent).map_err(WorkspaceError::io(parent))?;
    }
    std::fs::rename(&tmp, &full).map_err(WorkspaceError::io(&full))
}

/// Whether `src` (followed through links) is the very file at `working`
/// (not followed): the working file given as its own merge result, by any
/// name (a link to it, a hard link, a path through `..`).
fn same_file(src: &Path, working: &Path) -> bool {
    let (Ok(a), Ok(b)) = (std::fs::metadata(src), std::fs::symlink_metadata(working)) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        a.dev() == b.dev() && a.ino() == b.ino()
    }
    #[cfg(not(unix))]
    {
        let _ = (a, b);
        match (std::fs::canonicalize(src), std::fs::canonicalize(working)) {
            (Ok(x), Ok(y)) => x == y,
            _ => false,
        }
    }
}

/// Copy the merged file `src` into the workspace's temporary area (same
/// file system as the working copy) and return the copy. Nothing in the
/// working copy is touched: a merged file that is missing, a directory or
/// unreadable is refused here.
fn stage_merged(ws: &Workspace, src: &Path) -> Result<PathBuf> {
    let dir = ws.state_dir().join("tmp");
    std::fs::create_dir_all(&dir).map_err(WorkspaceError::io(&dir))?;
    let tmp = dir.join(format!(
        "resolve-merged-{}.part",
        scribe_format::OperationId::random().to_hex()
    ));
    if let Err(e) = std::fs::copy(src, &tmp) {
        let _ = std::fs::remove_file(&tmp);
        return Err(WorkspaceError::io(src)(e));
    }
    Ok(tmp)
}

fn put_in_place(staged: &Path, dest: &Path) -> Result<()> {
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent).map_err(WorkspaceError::io(parent))?;
    }
    std::fs::rename(staged, dest).map_err(WorkspaceError::io(dest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{Fingerprint, JournalEntry};
    use scribe_format::{FileContentId, ManifestId};
    use std::collections::HashMap;

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

    fn rec(b: &[u8], change: u64) -> BaselineRecord {
        BaselineRecord {
            incarnation: [4; 16],
            manifest: ManifestId::of_payload(b),
            content: FileContentId::of(b),
            size: b.len() as u64,
            mode: 0,
            change,
            fingerprint: Fingerprint::default(),
        }
    }

    fn setup() -> (tempfile::TempDir, Workspace, Memory) {
        let dir = tempfile::tempdir().unwrap();
        let mut meta = crate::state::tests_meta();
        meta.readonly = false;
        let ws = Workspace::create(dir.path(), &meta).unwrap();
        std::fs::write(dir.path().join("f"), b"ours").unwrap();
        let tx = ws.write().unwrap();
        tx.put_baseline("f", &rec(b"base", 1)).unwrap();
        tx.put_deferred(
            "f",
            &JournalEntry {
                target: Some(rec(b"theirs", 2)),
                done: false,
                recovery: None,
            },
        )
        .unwrap();
        tx.commit().unwrap();
        let mem = Memory(
            [(FileContentId::of(b"theirs"), b"theirs".to_vec())]
                .into_iter()
                .collect(),
        );
        (dir, ws, mem)
    }

    #[test]
    fn ours_rebases_and_opens_for_edit() {
        let (dir, ws, mem) = setup();
        assert_eq!(
            resolve(&ws, "f", &Resolution::Ours, &mem).unwrap(),
            Resolved::Opened(OpenedAction::Edit)
        );
        assert_eq!(std::fs::read(dir.path().join("f")).unwrap(), b"ours");
        let r = ws.read().unwrap();
        assert_eq!(r.baseline("f").unwrap().unwrap().change, 2);
        assert!(r.deferred_all().unwrap().is_empty());
        drop(r);
        assert!(
            resolve(&ws, "f", &Resolution::Ours, &mem).is_err(),
            "nothing left to resolve"
        );
    }

    /// Both sides removed the path: `--ours` says so (not "took theirs",
    /// with nothing in the recovery area) and leaves nothing to submit.
    #[test]
    fn ours_when_both_removed_it_is_both_removed() {
        let (dir, ws, mem) = setup();
        std::fs::remove_file(dir.path().join("f")).unwrap();
        let tx = ws.write().unwrap();
        tx.put_deferred(
            "f",
            &JournalEntry {
                target: None,
                done: false,
                recovery: None,
            },
        )
        .unwrap();
        tx.commit().unwrap();
        assert_eq!(
            resolve(&ws, "f", &Resolution::Ours, &mem).unwrap(),
            Resolved::BothRemoved
        );
        let r = ws.read().unwrap();
        assert!(r.opened("f").unwrap().is_none());
        assert!(r.baseline("f").unwrap().is_none());
        assert!(crate::recovery::list(dir.path()).unwrap().is_empty());
    }

    /// Taking theirs must never lose ours: it goes to the recovery area.
    #[test]
    fn theirs_keeps_ours_in_recovery() {
        let (dir, ws, mem) = setup();
        assert_eq!(
            resolve(&ws, "f", &Resolution::Theirs, &mem).unwrap(),
            Resolved::TookTheirs { kept_yours: true }
        );
        assert_eq!(std::fs::read(dir.path().join("f")).unwrap(), b"theirs");
        let kept = crate::recovery::list(dir.path()).unwrap();
        assert_eq!(kept.len(), 1);
        let r = ws.read().unwrap();
        assert!(r.opened("f").unwrap().is_none());
        assert_eq!(r.baseline("f").unwrap().unwrap().change, 2);
    }

    /// A file turned into a directory: theirs beneath an untracked file
    /// moves that file into the recovery area; beneath a deferred
    /// (tracked) one it is refused, naming the file, until that is settled.
    #[test]
    fn theirs_beneath_a_file_in_the_way_keeps_that_file() {
        let (dir, ws, mem) = setup();
        let inner = rec(b"theirs", 2);
        std::fs::write(dir.path().join("u"), b"my notes").unwrap();
        let tx = ws.write().unwrap();
        for p in ["f/inner", "u/inner"] {
            tx.put_deferred(
                p,
                &JournalEntry {
                    target: Some(inner),
                    done: false,
                    recovery: None,
                },
            )
            .unwrap();
        }
        tx.commit().unwrap();
        let err = resolve(&ws, "f/inner", &Resolution::Theirs, &mem).unwrap_err();
        assert!(err.to_string().contains("settle f first"), "{err}");
        assert_eq!(std::fs::read(dir.path().join("f")).unwrap(), b"ours");
        assert_eq!(
            resolve(&ws, "u/inner", &Resolution::Theirs, &mem).unwrap(),
            Resolved::TookTheirs { kept_yours: true }
        );
        assert_eq!(
            std::fs::read(dir.path().join("u/inner")).unwrap(),
            b"theirs"
        );
        let kept = crate::recovery::list(dir.path()).unwrap();
        assert_eq!(kept.len(), 1, "{kept:?}");
        // Once f is settled (theirs removes it), its directory is written.
        let tx = ws.write().unwrap();
        tx.put_deferred(
            "f",
            &JournalEntry {
                target: None,
                done: false,
                recovery: None,
            },
        )
        .unwrap();
        tx.commit().unwrap();
        resolve(&ws, "f", &Resolution::Theirs, &mem).unwrap();
        resolve(&ws, "f/inner", &Resolution::Theirs, &mem).unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("f/inner")).unwrap(),
            b"theirs"
        );
        assert_eq!(crate::recovery::list(dir.path()).unwrap().len(), 2);
    }

    #[test]
    fn merged_copies_the_file_in() {
        let (dir, ws, mem) = setup();
        let m = dir.path().join("merged.out");
        std::fs::write(&m, b"merged").unwrap();
        resolve(&ws, "f", &Resolution::Merged(m), &mem).unwrap();
        assert_eq!(std::fs::read(dir.path().join("f")).unwrap(), b"merged");
        assert_eq!(crate::recovery::list(dir.path()).unwrap().len(), 1);
    }

    /// The artist merged in place: the working file is its own merge
    /// result. It stays where it is with its bytes; nothing is displaced.
    #[test]
    fn merged_with_the_working_file_itself_keeps_it_in_place() {
        let (dir, ws, mem) = setup();
        let f = dir.path().join("f");
        std::fs::write(&f, b"merged by hand").unwrap();
        assert_eq!(
            resolve(&ws, "f", &Resolution::Merged(f.clone()), &mem).unwrap(),
            Resolved::Merged {
                action: OpenedAction::Edit,
                kept_yours: false
            }
        );
        assert_eq!(std::fs::read(&f).unwrap(), b"merged by hand");
        assert!(crate::recovery::list(dir.path()).unwrap().is_empty());
        let r = ws.read().unwrap();
        assert_eq!(r.opened("f").unwrap().unwrap().action, OpenedAction::Edit);
        assert!(r.deferred_all().unwrap().is_empty());
    }

    /// A merged file that cannot be read is refused before the working
    /// file is touched: it stays on disk, and the path stays deferred.
    #[test]
    fn an_unreadable_merged_file_leaves_the_working_file_in_place() {
        let (dir, ws, mem) = setup();
        let missing = dir.path().join("no-such-merge");
        assert!(resolve(&ws, "f", &Resolution::Merged(missing), &mem).is_err());
        let a_dir = dir.path().join("a-dir");
        std::fs::create_dir(&a_dir).unwrap();
        assert!(resolve(&ws, "f", &Resolution::Merged(a_dir), &mem).is_err());
        assert_eq!(std::fs::read(dir.path().join("f")).unwrap(), b"ours");
        assert!(crate::recovery::list(dir.path()).unwrap().is_empty());
        assert_eq!(ws.read().unwrap().deferred_all().unwrap().len(), 1);
    }
}

//! Opening files (add, edit, delete, reconcile, revert), moves, resolve,
//! and the status of a workspace. Paths are canonical workspace paths.

use scribe_format::ErrorCode;
use scribe_workspace::moves::{self, MoveHooks, MoveIntent};
use scribe_workspace::open::{self, OpenReport};
use scribe_workspace::resolve::{resolve as resolve_path, Resolution, Resolved};

use crate::error::{Error, Result};
use crate::link::ServerLink;
use crate::progress::Note;
use crate::workflow::Opened;
use crate::Context;

/// Open new files for add. Paths vacated by a pending move are reserved
/// until that move is submitted or aborted.
pub fn add(o: &Opened, paths: &[String]) -> Result<OpenReport> {
    moves::refuse_if_interrupted(&o.ws)?;
    super::workspace::refuse_if_retired(o)?;
    let reserved = moves::reserved_roots(&o.ws)?;
    let blocked: Vec<String> = paths
        .iter()
        .filter(|p| {
            !p.is_empty()
                && reserved
                    .iter()
                    .any(|r| scribe_format::path::is_under_prefix(p, r))
        })
        .cloned()
        .collect();
    if !blocked.is_empty() {
        return Err(Error::new(
            ErrorCode::MoveReserved,
            "these paths were vacated by a pending move and are reserved",
        )
        .with_paths(blocked));
    }
    Ok(open::add(&o.ws, paths)?)
}

/// Open tracked files for edit (and make them writable). Files another
/// workspace has locked are reported as [`Note::LockedByOther`] (best
/// effort: works offline).
pub fn edit(ctx: &Context, o: &Opened, paths: &[String]) -> Result<OpenReport> {
    moves::refuse_if_interrupted(&o.ws)?;
    super::workspace::refuse_if_retired(o)?;
    let r = open::edit(&o.ws, paths)?;
    let opened: Vec<&str> = r.opened.iter().map(|(p, _)| p.as_str()).collect();
    warn_locked(ctx, o, &opened);
    Ok(r)
}

fn warn_locked(ctx: &Context, o: &Opened, paths: &[&str]) {
    if paths.is_empty() {
        return;
    }
    let Ok(mut client) = o.connect(ctx) else {
        return;
    };
    let Ok(locks) = super::locks::locks_on(&mut client, &o.meta.repository_name, paths) else {
        return;
    };
    for l in locks {
        if l.workspace != o.meta.workspace_id {
            ctx.progress.note(Note::LockedByOther {
                path: l.path,
                owner: l.author,
                workspace: l.workspace,
            });
        }
    }
}

/// Open tracked files for delete (the file moves to the recovery area).
/// Files another workspace has locked are reported as
/// [`Note::LockedByOther`], as for [`edit`].
pub fn delete(ctx: &Context, o: &Opened, paths: &[String]) -> Result<OpenReport> {
    moves::refuse_if_interrupted(&o.ws)?;
    super::workspace::refuse_if_retired(o)?;
    let r = open::delete(&o.ws, paths)?;
    let opened: Vec<&str> = r.opened.iter().map(|(p, _)| p.as_str()).collect();
    warn_locked(ctx, o, &opened);
    Ok(r)
}

/// Open every local change made without add/edit/delete under `paths`.
pub fn reconcile(o: &Opened, paths: &[String]) -> Result<OpenReport> {
    moves::refuse_if_interrupted(&o.ws)?;
    Ok(open::reconcile(&o.ws, paths)?)
}

/// Discard opened state (displaced contents go to the recovery area).
pub fn revert(o: &Opened, link: &ServerLink, paths: &[String]) -> Result<OpenReport> {
    moves::refuse_if_interrupted(&o.ws)?;
    Ok(open::revert(&o.ws, paths, link)?)
}

/// Kills the process at a named move step in a failpoints build.
struct Points<'a>(&'a Context);

impl MoveHooks for Points<'_> {
    /// Counted: `NAME` fires on the first pass, `NAME-N` on the N-th (a
    /// point passed once per entry, as an abort's merge-back does).
    fn point(&self, name: &str) {
        self.0.failpoints.pass(name);
    }
}

/// What a move command did.
#[derive(Debug)]
pub enum Moved {
    /// The move was made (or an interrupted one finished).
    Moved(MoveIntent),
    /// The move was undone; the destinations of files that stayed where
    /// they are, untracked (their source is gone from the server and what
    /// stands there now, also named, collides with them: `moves::abort_stays`).
    Aborted(MoveIntent, Vec<(String, String)>),
    /// `--resume` found nothing interrupted.
    NothingInterrupted,
}

/// Move `src` to `dst`; a rerun of an interrupted move's own command
/// finishes it.
pub fn move_path(ctx: &Context, o: &Opened, src: &str, dst: &str) -> Result<Moved> {
    if let Some(i) = moves::interrupted(&o.ws)? {
        if !i.aborting && i.source == src && i.destination == dst {
            ctx.progress.note(Note::ResumingMove);
            return Ok(match moves::resume_with(&o.ws, &Points(ctx))? {
                Some(i) => {
                    super::locks::follow_move(ctx, o, &i)?;
                    Moved::Moved(i)
                }
                None => Moved::NothingInterrupted,
            });
        }
    }
    let intent = moves::move_path_with(&o.ws, src, dst, &Points(ctx))?;
    // The move's delete of a file another workspace locked refuses its
    // submit: said now, as `edit` says it.
    let sources: Vec<&str> = intent
        .files
        .iter()
        .map(|f| f.physical_source.as_str())
        .collect();
    warn_locked(ctx, o, &sources);
    super::locks::follow_move(ctx, o, &intent)?;
    Ok(Moved::Moved(intent))
}

/// Undo the pending move named by `selector` (a destination or an
/// operation id; none: the interrupted one, else the newest).
pub fn move_abort(ctx: &Context, o: &Opened, selector: Option<&str>) -> Result<Moved> {
    let intent = moves::select(&o.ws, selector)?;
    let stays = moves::abort_stays(&o.ws, &intent)?;
    let aborted = moves::abort_with(&o.ws, &intent.operation, &Points(ctx))?;
    super::locks::follow_abort(ctx, o, &aborted)?;
    Ok(Moved::Aborted(aborted, stays))
}

/// Finish an interrupted move (or its abort).
pub fn move_resume(ctx: &Context, o: &Opened) -> Result<Moved> {
    let stays = match moves::interrupted(&o.ws)? {
        Some(i) if i.aborting => moves::abort_stays(&o.ws, &i)?,
        _ => Vec::new(),
    };
    Ok(match moves::resume_with(&o.ws, &Points(ctx))? {
        Some(i) if i.aborting => {
            super::locks::follow_abort(ctx, o, &i)?;
            Moved::Aborted(i, stays)
        }
        Some(i) => {
            super::locks::follow_move(ctx, o, &i)?;
            Moved::Moved(i)
        }
        None => Moved::NothingInterrupted,
    })
}

/// How one path was resolved.
#[derive(Debug)]
pub struct ResolvedPath {
    pub path: String,
    pub outcome: Resolved,
}

/// Settle every deferred path under `paths` the way `how` says.
pub fn resolve(
    o: &Opened,
    link: &ServerLink,
    paths: &[String],
    how: &Resolution,
) -> Result<Vec<ResolvedPath>> {
    moves::refuse_if_interrupted(&o.ws)?;
    let deferred: Vec<String> =
        o.ws.read()?
            .deferred_all()?
            .into_iter()
            .map(|(p, _)| p)
            .collect();
    let targets: Vec<String> = deferred
        .into_iter()
        .filter(|d| {
            paths
                .iter()
                .any(|p| scribe_format::path::is_under_prefix(d, p))
        })
        .collect();
    if targets.is_empty() {
        return Err(
            Error::new(ErrorCode::NotPresent, "nothing there needs resolving")
                .with_paths(paths.to_vec())
                .concerning(scribe_format::Concern::NothingToResolve),
        );
    }
    let mut out = Vec::new();
    for p in targets {
        if *how == Resolution::Ours {
            if let Some(followed) = follow_their_move(o, link, &p)? {
                out.push(ResolvedPath {
                    path: p,
                    outcome: followed,
                });
                continue;
            }
        }
        let outcome = resolve_path(&o.ws, &p, how, link)?;
        out.push(ResolvedPath { path: p, outcome });
    }
    Ok(out)
}

/// `--ours` on a path the server removed while this workspace had work
/// there: when the server *moved* it (its newest change after the base is
/// a delete whose change moves the file elsewhere), the work follows the
/// move (`resolve::follow_move`); otherwise `None` and the path is settled
/// as before. The sync that deferred the path recorded how the server
/// removed it (`scribe_workspace::their_moves`): with that record nothing
/// is asked (offline too); without one (a sync by an older client, or
/// whose search was cut short), two requests, only for such paths.
fn follow_their_move(o: &Opened, link: &ServerLink, path: &str) -> Result<Option<Resolved>> {
    let Some(base) = scribe_workspace::resolve::may_follow_move(&o.ws, path)? else {
        return Ok(None);
    };
    if let Some(how) = scribe_workspace::their_moves::recorded(&o.ws, path)? {
        return match how.moved_to {
            Some(to) => Ok(scribe_workspace::resolve::follow_move(
                &o.ws, path, &to, how.change,
            )?),
            None => Ok(None),
        };
    }
    let ctx = link.context();
    let newest = super::history::history(ctx, o, path)?.into_iter().next();
    let Some(gone) = newest.filter(|e| e.action == 3 && e.change > base) else {
        return Ok(None);
    };
    let (_, entries) = super::history::describe(ctx, o, gone.change)?;
    let to = entries
        .into_iter()
        .find(|e| e.moved_from.as_ref().is_some_and(|m| m.path == path))
        .map(|e| e.path);
    match to {
        Some(to) => Ok(scribe_workspace::resolve::follow_move(
            &o.ws,
            path,
            &to,
            gone.change,
        )?),
        None => Ok(None),
    }
}

/// Everything `scribe status` shows.
#[derive(Debug)]
pub struct StatusReport {
    pub files: open::Status,
    /// The target of an unfinished sync.
    pub sync_unfinished: Option<u64>,
    /// Submissions waiting to be completed.
    pub submit_pending: usize,
    pub moves: Vec<MoveIntent>,
    /// The prefixes of a view change under way (`scribe view set` that
    /// local work blocked; the next `sync` retries it), if any.
    pub view_change: Option<Vec<String>>,
}

/// The prefixes of the view change under way in `o`, if any.
pub fn view_change(o: &Opened) -> Result<Option<Vec<String>>> {
    match o.ws.read()?.meta_bytes("view-change")? {
        Some(bytes) => Ok(Some(
            scribe_workspace::records::ViewChange::decode(&bytes)?.prefixes,
        )),
        None => Ok(None),
    }
}

/// The status of `o` (read-only unless fingerprints settle).
pub fn status(o: &Opened) -> Result<StatusReport> {
    Ok(StatusReport {
        files: open::status(&o.ws)?,
        sync_unfinished: scribe_workspace::sync::in_progress(&o.ws)?,
        submit_pending: o.ws.read()?.pending_all()?.len(),
        moves: moves::pending(&o.ws)?,
        view_change: view_change(o)?,
    })
}

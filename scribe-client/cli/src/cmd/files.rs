//! Opening files: add, edit, delete, move, reconcile, revert, resolve,
//! and `status`. The workflows are `scribe_client::workflow::files`.

use scribe_client::workflow::files::{self, Moved};
use scribe_client::workflow::locks::{self, HeldLocks};
use scribe_client::workflow::Opened;
use scribe_format::ErrorCode;
use scribe_workspace::detect::LocalChange;
use scribe_workspace::moves;
use scribe_workspace::open;
use scribe_workspace::resolve::{Resolution, Resolved};

use crate::ctx::{self, report, Ctx};
use crate::error::{CliError, CliResult};
use crate::ui::Json;

pub fn add(ctx: &Ctx, args: Vec<String>) -> CliResult {
    let o = ctx::open(ctx)?;
    let paths = ctx::paths(ctx, &o.ws, &args)?;
    let r = files::add(&o, &paths)?;
    report(ctx, "add", &r)
}

pub fn edit(ctx: &Ctx, args: Vec<String>) -> CliResult {
    let o = ctx::open(ctx)?;
    let paths = ctx::paths(ctx, &o.ws, &args)?;
    let r = files::edit(&ctx.lib, &o, &paths)?;
    report(ctx, "edit", &r)
}

pub fn delete(ctx: &Ctx, args: Vec<String>) -> CliResult {
    let o = ctx::open(ctx)?;
    let paths = ctx::paths(ctx, &o.ws, &args)?;
    let r = files::delete(&ctx.lib, &o, &paths)?;
    report(ctx, "delete", &r)
}

pub fn reconcile(ctx: &Ctx, args: Vec<String>) -> CliResult {
    let o = ctx::open(ctx)?;
    let paths = ctx::paths(ctx, &o.ws, &args)?;
    let r = files::reconcile(&o, &paths)?;
    report(ctx, "reconcile", &r)
}

pub fn revert(ctx: &Ctx, args: Vec<String>) -> CliResult {
    let o = ctx::open(ctx)?;
    let paths = ctx::paths(ctx, &o.ws, &args)?;
    let link = o.link(&ctx.lib)?;
    let r = files::revert(&o, &link, &paths)?;
    for (p, a) in &r.opened {
        ctx.out
            .line(format_args!("reverted {p} (was {})", a.name()))?;
    }
    report(
        ctx,
        "revert",
        &open::OpenReport {
            refused: r.refused,
            ..Default::default()
        },
    )
}

fn print_moved(ctx: &Ctx, m: Moved) -> CliResult {
    match m {
        Moved::Moved(i) => print_move(ctx, "moved", &i),
        Moved::Aborted(i, stays) => {
            print_move(ctx, "aborted", &i)?;
            for (d, theirs) in stays {
                let Some(f) = i.files.iter().find(|f| f.destination == d) else {
                    continue;
                };
                ctx.out.status(format!(
                    "Note: {d} stays where it is, untracked, with its bytes: the server no \
                     longer has {src}, and {theirs}, which a sync brought, would collide with \
                     it there. Keep it with `scribe add {d}` (or compare it with {theirs}), or \
                     remove it",
                    src = f.physical_source
                ));
            }
            Ok(())
        }
        Moved::NothingInterrupted => {
            ctx.out.status("no move is interrupted");
            Ok(())
        }
    }
}

fn print_move(ctx: &Ctx, verb: &str, intent: &moves::MoveIntent) -> CliResult {
    if ctx.out.json {
        return ctx.out.json(&move_json(intent));
    }
    for f in &intent.files {
        if verb == "aborted" {
            ctx.out.line(format_args!(
                "restored {} <- {}",
                f.physical_source, f.destination
            ))?;
        } else {
            ctx.out.line(format_args!(
                "moved {} -> {}",
                f.physical_source, f.destination
            ))?;
        }
    }
    // "moved a -> b", "aborted the move a -> b" (never "moved move").
    let what = if verb == "moved" { "" } else { " the move" };
    ctx.out.status(format!(
        "{verb}{what} {} -> {} ({}, {} file(s))",
        intent.source,
        intent.destination,
        intent.operation.to_hex(),
        intent.files.len()
    ));
    Ok(())
}

fn move_json(i: &moves::MoveIntent) -> Json {
    Json::obj(vec![
        ("id", Json::str(i.operation.to_hex())),
        ("sequence", Json::Num(i.sequence)),
        ("source", Json::str(&i.source)),
        ("destination", Json::str(&i.destination)),
        ("state", Json::str(i.state_name())),
        ("files", Json::Num(i.files.len() as u64)),
        (
            "depends_on",
            Json::Arr(
                i.dependencies
                    .iter()
                    .map(|d| Json::str(d.to_hex()))
                    .collect(),
            ),
        ),
    ])
}

pub fn move_cmd(ctx: &Ctx, src: String, dst: String) -> CliResult {
    let o = ctx::open(ctx)?;
    let p = ctx::paths(ctx, &o.ws, &[src, dst])?;
    print_moved(ctx, files::move_path(&ctx.lib, &o, &p[0], &p[1])?)
}

/// `scribe move --abort [DST|ID]`.
pub fn move_abort(ctx: &Ctx, selector: Option<String>) -> CliResult {
    let o = ctx::open(ctx)?;
    let selector = match selector {
        // An id, or a destination as the user typed it.
        Some(s) => Some(match ctx::paths(ctx, &o.ws, std::slice::from_ref(&s)) {
            Ok(p) if moves::select(&o.ws, Some(&p[0])).is_ok() => p[0].clone(),
            _ => s,
        }),
        None => None,
    };
    print_moved(ctx, files::move_abort(&ctx.lib, &o, selector.as_deref())?)
}

/// `scribe move --resume`.
pub fn move_resume(ctx: &Ctx) -> CliResult {
    let o = ctx::open(ctx)?;
    print_moved(ctx, files::move_resume(&ctx.lib, &o)?)
}

pub fn resolve(
    ctx: &Ctx,
    args: Vec<String>,
    ours: bool,
    theirs: bool,
    merged: Option<std::path::PathBuf>,
) -> CliResult {
    let how = match (ours, theirs, merged) {
        (true, false, None) => Resolution::Ours,
        (false, true, None) => Resolution::Theirs,
        (false, false, Some(f)) => Resolution::Merged(std::path::absolute(ctx.cwd.join(f))?),
        _ => {
            return Err(CliError::new(
                ErrorCode::Usage,
                "choose one of --ours, --theirs, --merged FILE",
            ))
        }
    };
    let o = ctx::open(ctx)?;
    let paths = ctx::paths(ctx, &o.ws, &args)?;
    let link = o.link(&ctx.lib)?;
    let done = files::resolve(&o, &link, &paths, &how)?;
    for r in done {
        let p = &r.path;
        match r.outcome {
            Resolved::Opened(a) => ctx.out.line(format_args!(
                "resolved {p}: kept yours, opened for {}",
                a.name()
            ))?,
            Resolved::TookTheirs { kept_yours: true } => ctx.out.line(format_args!(
                "resolved {p}: took theirs (yours is in the recovery area: `scribe recovery \
                 list`, `scribe recovery restore NAME --to PATH`)"
            ))?,
            Resolved::TookTheirs { kept_yours: false } => ctx.out.line(format_args!(
                "resolved {p}: took theirs (there was no file of yours to keep)"
            ))?,
            Resolved::BothRemoved => ctx.out.line(format_args!(
                "resolved {p}: removed on both sides; nothing to submit"
            ))?,
            Resolved::Merged { action, kept_yours } => ctx.out.line(format_args!(
                "resolved {p}: took your merged file ({}), opened for {}",
                if kept_yours {
                    "yours went to the recovery area"
                } else {
                    "merged in place"
                },
                action.name()
            ))?,
            Resolved::FollowedMove { to, change } => ctx.out.line(format_args!(
                "resolved {p}: moved to {to} in change {change}; your file follows it there, \
                 opened for edit"
            ))?,
            Resolved::MovedAsNew { destinations } => ctx.out.line(format_args!(
                "resolved {p}: the server no longer has it; your move keeps it as a new file \
                 at {} (`scribe move --abort` brings it back instead)",
                destinations.join(", ")
            ))?,
        }
    }
    Ok(())
}

pub fn status(ctx: &Ctx) -> CliResult {
    // Read-only until status has something to record (settled
    // fingerprints): a clean status neither writes nor flushes state.redb.
    let o = Opened::find_for_reading(&ctx.cwd)?;
    let report = files::status(&o)?;
    // Locks this workspace took that someone broke (at most one request,
    // none when it holds no lock; never failing status offline).
    let held = scribe_client::workflow::locks::check_held(&ctx.lib, &o)?;
    let s = &report.files;
    let kind = |c: &LocalChange| match c {
        LocalChange::New(_) => "new",
        LocalChange::Modified { .. } => "modified",
        LocalChange::Missing { .. } => "missing",
    };
    let journal = report.sync_unfinished;
    let pending = report.submit_pending;
    let moves = &report.moves;
    // What the workspace has (#18 item 6): the watermark, and the change of
    // this workspace's own last submit when newer. A submit right after the
    // watermark (nobody else submitted between) leaves the whole workspace
    // at that change.
    let submitted = scribe_workspace::sync::local_pin(&o.ws)?;
    let synced = o.meta.synced;
    let have = match submitted {
        Some(p) if p == synced + 1 => p,
        _ => synced,
    };
    if ctx.out.json {
        return ctx.out.json(&Json::obj(vec![
            ("change", Json::Num(synced)),
            ("have", Json::Num(have)),
            ("submitted", submitted.map_or(Json::Null, Json::Num)),
            ("sync_unfinished", journal.map_or(Json::Null, Json::Num)),
            ("submit_pending", Json::Num(pending as u64)),
            ("moves", Json::Arr(moves.iter().map(move_json).collect())),
            ("broken_locks", broken_locks_json(&held)),
            ("locks_unchecked", Json::Num(locks_unchecked(&held) as u64)),
            (
                "opened",
                Json::Arr(
                    s.opened
                        .iter()
                        .map(|(p, r)| {
                            Json::obj(vec![
                                ("path", Json::str(p)),
                                ("action", Json::str(r.action.name())),
                                ("needs_reconcile", Json::Bool(r.needs_reconcile)),
                                (
                                    "moved_from",
                                    r.moved_from
                                        .as_ref()
                                        .map_or(Json::Null, |(s, _)| Json::str(s)),
                                ),
                            ])
                        })
                        .collect(),
                ),
            ),
            (
                "unopened",
                Json::Arr(
                    s.unopened
                        .iter()
                        .map(|c| {
                            Json::obj(vec![
                                ("path", Json::str(c.path())),
                                ("kind", Json::str(kind(c))),
                            ])
                        })
                        .collect(),
                ),
            ),
            (
                "needs_resolve",
                Json::Arr(s.needs_resolve.iter().map(Json::str).collect()),
            ),
            (
                "problems",
                Json::Arr(
                    s.problems
                        .iter()
                        .map(|p| {
                            Json::obj(vec![
                                ("path", Json::str(&p.path)),
                                ("code", Json::str(&p.code)),
                            ])
                        })
                        .collect(),
                ),
            ),
            ("hashed", Json::Num(s.hashed as u64)),
            (
                "case_collisions",
                Json::Arr(
                    s.case_collisions
                        .iter()
                        .map(|c| {
                            Json::obj(vec![
                                ("opened", Json::str(&c.opened)),
                                ("tracked", Json::str(&c.tracked)),
                            ])
                        })
                        .collect(),
                ),
            ),
            (
                "view_change",
                report
                    .view_change
                    .as_ref()
                    .map_or(Json::Null, |v| Json::Arr(v.iter().map(Json::str).collect())),
            ),
        ]));
    }
    warn_case_collisions(ctx, &s.case_collisions);
    let repo = &o.meta.repository_name;
    match submitted {
        Some(p) if p == have => ctx.out.line(format_args!(
            "On change {p} of {repo} (your submit; synced to {synced} before it)"
        ))?,
        Some(p) => ctx.out.line(format_args!(
            "On change {synced} of {repo}, with your change {p} (the files you submitted are \
             at {p}; `scribe sync` brings the rest)"
        ))?,
        None => ctx.out.line(format_args!("On change {synced} of {repo}"))?,
    }
    if let Some(t) = journal {
        ctx.out.line(format_args!(
            "A sync to change {t} is unfinished: run `scribe sync`"
        ))?;
    }
    if let Some(v) = &report.view_change {
        ctx.out.line(format_args!(
            "A view change to {} is unfinished (local work blocked it; files leaving the view \
             may already be gone): `scribe sync` finishes it once that work is submitted or \
             reverted; `scribe view set PREFIX...` replaces it",
            view_name(v)
        ))?;
    }
    if pending > 0 {
        ctx.out.line(format_args!(
            "A submission is unfinished: run `scribe submit` to complete it"
        ))?;
    }
    if !moves.is_empty() {
        ctx.out.line(format_args!(
            "Pending moves (undo one with `scribe move --abort DST|ID`):"
        ))?;
        for i in moves {
            let deps = if i.dependencies.is_empty() {
                String::new()
            } else {
                format!(
                    "  (after {})",
                    i.dependencies
                        .iter()
                        .map(|d| d.to_hex()[..8].to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            let state = if i.interrupted() {
                format!(
                    "  [{}: run `scribe move --resume` or `scribe move --abort`]",
                    i.state_name()
                )
            } else {
                String::new()
            };
            ctx.out.line(format_args!(
                "  {}  {} -> {}  {} file(s){deps}{state}",
                i.operation.to_hex(),
                i.source,
                i.destination,
                i.files.len()
            ))?;
        }
    }
    print_held_locks(ctx, &held, &s.opened)?;
    if !s.opened.is_empty() {
        ctx.out.line(format_args!("Opened:"))?;
        for (p, r) in &s.opened {
            let mv = r
                .moved_from
                .as_ref()
                .map(|(src, _)| format!("  (moved from {src})"))
                .unwrap_or_default();
            ctx.out
                .line(format_args!("  {:<8}{p}{mv}", r.action.name()))?;
        }
    }
    if !s.unopened.is_empty() {
        ctx.out.line(format_args!(
            "Changed but not opened (`scribe reconcile` opens them):"
        ))?;
        for c in &s.unopened {
            ctx.out
                .line(format_args!("  {:<8} {}", kind(c), c.path()))?;
        }
    }
    if !s.needs_resolve.is_empty() {
        ctx.out.line(format_args!(
            "Needs resolve (`scribe resolve PATH --ours|--theirs|--merged FILE`):"
        ))?;
        for p in &s.needs_resolve {
            ctx.out.line(format_args!("  {p}"))?;
        }
    }
    let (beyond, problems): (Vec<_>, Vec<_>) = s
        .problems
        .iter()
        .partition(|p| p.code == scribe_workspace::guard::PROBLEM_CODE);
    if !problems.is_empty() {
        ctx.out.line(format_args!("Cannot be versioned:"))?;
        for p in problems {
            ctx.out
                .line(format_args!("  {}  ({}: {})", p.path, p.code, p.detail))?;
        }
    }
    if !beyond.is_empty() {
        ctx.out.line(format_args!(
            "Beyond a symbolic link (never read, written or deleted through it; replace the link with a directory):"
        ))?;
        for p in beyond {
            ctx.out
                .line(format_args!("  {}  ({}: {})", p.path, p.code, p.detail))?;
        }
    }
    if s.opened.is_empty() && s.unopened.is_empty() && s.needs_resolve.is_empty() {
        ctx.out
            .line(format_args!("Nothing opened, no local changes"))?;
    }
    Ok(())
}

/// `status --json`'s `broken_locks`: null when the server could not be
/// asked.
fn broken_locks_json(held: &HeldLocks) -> Json {
    match held {
        HeldLocks::NoneRecorded => Json::Arr(Vec::new()),
        HeldLocks::Checked { broken, .. } => Json::Arr(
            broken
                .iter()
                .map(|b| {
                    Json::obj(vec![
                        ("path", Json::str(&b.path)),
                        ("held_by", b.held_by.as_ref().map_or(Json::Null, Json::str)),
                    ])
                })
                .collect(),
        ),
        HeldLocks::Unknown { .. } => Json::Null,
    }
}

/// Recorded locks `status` could not check.
fn locks_unchecked(held: &HeldLocks) -> usize {
    match held {
        HeldLocks::Checked { unchecked, .. } => *unchecked,
        HeldLocks::Unknown { recorded, .. } => *recorded,
        _ => 0,
    }
}

/// The text of a broken lock's present state.
/// A view's prefixes as one line ("the whole repository" for none).
pub fn view_name(v: &[String]) -> String {
    if v.is_empty() {
        "the whole repository".to_string()
    } else {
        v.join(", ")
    }
}

pub fn broken_now(b: &locks::BrokenLock) -> String {
    match &b.held_by {
        Some(who) => format!("now locked by {who}"),
        None => "released, now unlocked".to_string(),
    }
}

fn print_held_locks(
    ctx: &Ctx,
    held: &HeldLocks,
    opened: &[(String, scribe_workspace::records::OpenedRecord)],
) -> CliResult {
    match held {
        HeldLocks::Checked { broken, unchecked } => {
            if !broken.is_empty() {
                ctx.out.line(format_args!(
                    "Your locks broken by another workspace (`scribe lock PATH` takes a released \
                     one again; `scribe unlock PATH` forgets it):"
                ))?;
                for b in broken {
                    let what = opened
                        .iter()
                        .find(|(p, _)| *p == b.path)
                        .map(|(_, r)| format!(", opened for {}", r.action.name()))
                        .unwrap_or_default();
                    ctx.out
                        .line(format_args!("  {}  ({}{what})", b.path, broken_now(b)))?;
                }
            }
            if *unchecked > 0 {
                ctx.out.line(format_args!(
                    "{unchecked} of your locks were not checked (`scribe locks` checks them all)"
                ))?;
            }
        }
        HeldLocks::Unknown { recorded, why } => {
            let state = if why.code() == ErrorCode::Unreachable {
                "offline".to_string()
            } else {
                why.code().name().to_string()
            };
            ctx.out.line(format_args!(
                "Lock state unknown ({state}): {recorded} lock(s) taken here were not checked"
            ))?;
        }
        _ => {}
    }
    Ok(())
}

/// Warn (on stderr) about opened adds that differ only in case from a
/// tracked path (#18 item 10): `status` and `sync` print it.
pub fn warn_case_collisions(ctx: &Ctx, found: &[open::CaseCollision]) {
    for c in found {
        ctx.out.status(format!(
            "Warning: your opened {} and the synced {} differ only in case or normalization: \
             a case-insensitive file system holds one of them and submit refuses the add \
             (path_collision); rename yours with `scribe move {} NEW` or `scribe revert` it",
            c.opened, c.tracked, c.opened
        ));
    }
}

//! Opening files: add, edit, delete, move, reconcile, revert, resolve,
//! and `status`.

use scribe_format::wire::message as m;
use scribe_workspace::detect::LocalChange;
use scribe_workspace::resolve::{resolve as resolve_path, Resolution, Resolved};
use scribe_workspace::{moves, open};

use crate::ctx::{self, report, Ctx};
use crate::error::{CliError, CliResult};
use crate::out::Json;

pub fn add(ctx: &Ctx, args: Vec<String>) -> CliResult {
    let o = ctx::open(ctx)?;
    no_interrupted_move(&o)?;
    let paths = ctx::paths(ctx, &o.ws, &args)?;
    // A source vacated by a pending move is reserved until submit or abort.
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
        return Err(CliError::new(
            "move_reserved",
            "these paths were vacated by a pending move and are reserved",
        )
        .paths(blocked)
        .hint("abort that move (`scribe move --abort`) or submit it first"));
    }
    let r = open::add(&o.ws, &paths)?;
    report(ctx, "add", &r)
}

pub fn edit(ctx: &Ctx, args: Vec<String>) -> CliResult {
    let o = ctx::open(ctx)?;
    no_interrupted_move(&o)?;
    let paths = ctx::paths(ctx, &o.ws, &args)?;
    let r = open::edit(&o.ws, &paths)?;
    warn_locked(
        ctx,
        &o,
        &r.opened.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>(),
    );
    report(ctx, "edit", &r)
}

/// Tell the user (best effort, works offline) when a file they open is
/// locked by another workspace: their submit would be refused.
fn warn_locked(ctx: &Ctx, o: &ctx::Open, paths: &[String]) {
    if paths.is_empty() || paths.len() > 1000 {
        return;
    }
    let Ok(mut client) = crate::remote::connect(&o.meta.server, false) else {
        return;
    };
    let Ok(page) = client.lock_list(m::LockList {
        repo: o.meta.repository_name.clone(),
        prefix: String::new(),
        after: String::new(),
        limit: m::MAX_PAGE_ITEMS,
    }) else {
        return;
    };
    let set: std::collections::HashSet<&str> = paths.iter().map(String::as_str).collect();
    for l in page.locks {
        if set.contains(l.path.as_str()) && l.workspace != o.meta.workspace_id {
            ctx.out.status(format!(
                "warning: {} is locked by {} (workspace {}); your submit of it will be refused until they unlock",
                l.path,
                l.author,
                &l.workspace.to_hex()[..8]
            ));
        }
    }
}

pub fn delete(ctx: &Ctx, args: Vec<String>) -> CliResult {
    let o = ctx::open(ctx)?;
    no_interrupted_move(&o)?;
    let paths = ctx::paths(ctx, &o.ws, &args)?;
    let r = open::delete(&o.ws, &paths)?;
    report(ctx, "delete", &r)
}

pub fn reconcile(ctx: &Ctx, args: Vec<String>) -> CliResult {
    let o = ctx::open(ctx)?;
    no_interrupted_move(&o)?;
    let paths = ctx::paths(ctx, &o.ws, &args)?;
    let r = open::reconcile(&o.ws, &paths)?;
    report(ctx, "reconcile", &r)
}

pub fn revert(ctx: &Ctx, args: Vec<String>) -> CliResult {
    let o = ctx::open(ctx)?;
    no_interrupted_move(&o)?;
    let paths = ctx::paths(ctx, &o.ws, &args)?;
    let remote = o.remote()?;
    let r = open::revert(&o.ws, &paths, &remote)?;
    for (p, a) in &r.opened {
        println!("reverted {p} (was {})", a.name());
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

/// Kills the process at a named move step when `SCRIBE_TEST_CRASH_AT`
/// names it (crash tests).
struct CrashHooks;
impl scribe_workspace::moves::MoveHooks for CrashHooks {
    fn point(&self, name: &str) {
        crate::remote::crash_point(name);
    }
}

fn print_move(ctx: &Ctx, verb: &str, intent: &moves::MoveIntent) {
    if ctx.out.json {
        println!("{}", move_json(intent));
        return;
    }
    for f in &intent.files {
        if verb == "aborted" {
            println!("restored {} <- {}", f.physical_source, f.destination);
        } else {
            println!("moved {} -> {}", f.physical_source, f.destination);
        }
    }
    ctx.out.status(format!(
        "{verb} move {} -> {} ({}, {} file(s))",
        intent.source,
        intent.destination,
        intent.operation.to_hex(),
        intent.files.len()
    ));
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
    // A rerun of the interrupted move's own command finishes it.
    if let Some(i) = moves::interrupted(&o.ws)? {
        if !i.aborting && i.source == p[0] && i.destination == p[1] {
            ctx.out.status("resuming the interrupted move");
            let intent = moves::resume_with(&o.ws, &CrashHooks)?;
            if let Some(intent) = intent {
                print_move(ctx, "moved", &intent);
            }
            return Ok(());
        }
    }
    let intent = moves::move_path_with(&o.ws, &p[0], &p[1], &CrashHooks)?;
    print_move(ctx, "moved", &intent);
    Ok(())
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
    let intent = moves::select(&o.ws, selector.as_deref())?;
    let done = moves::abort_with(&o.ws, &intent.operation, &CrashHooks)?;
    print_move(ctx, "aborted", &done);
    Ok(())
}

/// `scribe move --resume`.
pub fn move_resume(ctx: &Ctx) -> CliResult {
    let o = ctx::open(ctx)?;
    match moves::resume_with(&o.ws, &CrashHooks)? {
        Some(i) if i.aborting => print_move(ctx, "aborted", &i),
        Some(i) => print_move(ctx, "moved", &i),
        None => ctx.out.status("no move is interrupted"),
    }
    Ok(())
}

/// An interrupted move blocks the other workflows.
fn no_interrupted_move(o: &ctx::Open) -> CliResult {
    Ok(moves::refuse_if_interrupted(&o.ws)?)
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
                "usage",
                "choose one of --ours, --theirs, --merged FILE",
            ))
        }
    };
    let o = ctx::open(ctx)?;
    no_interrupted_move(&o)?;
    let paths = ctx::paths(ctx, &o.ws, &args)?;
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
            CliError::new("not_present", "nothing there needs resolving")
                .paths(paths)
                .hint("`scribe status` lists files needing resolution"),
        );
    }
    let remote = o.remote()?;
    for p in targets {
        match resolve_path(&o.ws, &p, &how, &remote)? {
            Resolved::Opened(a) => println!("resolved {p}: kept yours, opened for {}", a.name()),
            Resolved::TookTheirs => {
                println!("resolved {p}: took theirs (yours is in the recovery area)")
            }
        }
    }
    Ok(())
}

pub fn status(ctx: &Ctx) -> CliResult {
    // Read-only until status has something to record (settled
    // fingerprints): a clean status neither writes nor flushes state.redb.
    let root = scribe_workspace::Workspace::find(&ctx.cwd)?;
    let ws = scribe_workspace::Workspace::open_for_reading(&root)?;
    let meta = ws.meta()?;
    let o = ctx::Open { ws, meta };
    let s = open::status(&o.ws)?;
    let kind = |c: &LocalChange| match c {
        LocalChange::New(_) => "new",
        LocalChange::Modified { .. } => "modified",
        LocalChange::Missing { .. } => "missing",
    };
    let journal = scribe_workspace::sync::in_progress(&o.ws)?;
    let pending = o.ws.read()?.pending_all()?.len();
    let moves = moves::pending(&o.ws)?;
    if ctx.out.json {
        println!(
            "{}",
            Json::obj(vec![
                ("change", Json::Num(o.meta.synced)),
                ("sync_unfinished", journal.map_or(Json::Null, Json::Num)),
                ("submit_pending", Json::Num(pending as u64)),
                ("moves", Json::Arr(moves.iter().map(move_json).collect())),
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
                            .collect()
                    )
                ),
                (
                    "unopened",
                    Json::Arr(
                        s.unopened
                            .iter()
                            .map(|c| Json::obj(vec![
                                ("path", Json::str(c.path())),
                                ("kind", Json::str(kind(c)))
                            ]))
                            .collect()
                    )
                ),
                (
                    "needs_resolve",
                    Json::Arr(s.needs_resolve.iter().map(Json::str).collect())
                ),
                (
                    "problems",
                    Json::Arr(
                        s.problems
                            .iter()
                            .map(|p| Json::obj(vec![
                                ("path", Json::str(&p.path)),
                                ("code", Json::str(&p.code))
                            ]))
                            .collect()
                    )
                ),
                ("hashed", Json::Num(s.hashed as u64)),
            ])
        );
        return Ok(());
    }
    println!("On change {} of {}", o.meta.synced, o.meta.repository_name);
    if let Some(t) = journal {
        println!("A sync to change {t} is unfinished: run `scribe sync`");
    }
    if pending > 0 {
        println!("A submission is unfinished: run `scribe submit` to complete it");
    }
    if !moves.is_empty() {
        println!("Pending moves (undo one with `scribe move --abort DST|ID`):");
        for i in &moves {
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
            println!(
                "  {}  {} -> {}  {} file(s){deps}{state}",
                i.operation.to_hex(),
                i.source,
                i.destination,
                i.files.len()
            );
        }
    }
    if !s.opened.is_empty() {
        println!("Opened:");
        for (p, r) in &s.opened {
            let mv = r
                .moved_from
                .as_ref()
                .map(|(src, _)| format!("  (moved from {src})"))
                .unwrap_or_default();
            println!("  {:<8}{p}{mv}", r.action.name());
        }
    }
    if !s.unopened.is_empty() {
        println!("Changed but not opened (`scribe reconcile` opens them):");
        for c in &s.unopened {
            println!("  {:<8} {}", kind(c), c.path());
        }
    }
    if !s.needs_resolve.is_empty() {
        println!("Needs resolve (`scribe resolve PATH --ours|--theirs|--merged FILE`):");
        for p in &s.needs_resolve {
            println!("  {p}");
        }
    }
    if !s.problems.is_empty() {
        println!("Cannot be versioned:");
        for p in &s.problems {
            println!("  {}  ({}: {})", p.path, p.code, p.detail);
        }
    }
    if s.opened.is_empty() && s.unopened.is_empty() && s.needs_resolve.is_empty() {
        println!("Nothing opened, no local changes");
    }
    Ok(())
}

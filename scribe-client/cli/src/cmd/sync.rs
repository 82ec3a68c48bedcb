//! `scribe sync` and `scribe view`: the workflows are
//! `scribe_client::workflow::{sync, view}`.

use scribe_client::workflow::sync::{self, Synced};
use scribe_client::workflow::view;

use crate::ctx::{self, Ctx};
use crate::error::CliResult;
use crate::ui::{size, Json};

pub fn run(ctx: &Ctx, change: Option<u64>) -> CliResult {
    let o = ctx::open(ctx)?;
    let link = o.link(&ctx.lib)?;
    let s = sync::sync(&o, &link, change)?;
    print_synced(ctx, &s)?;
    warn_newcomers(ctx, &o.ws, &s)?;
    // Last use for `workspace list` (best effort: a sync that worked is
    // not failed by it).
    let _ = scribe_client::workflow::workspace::record_use(&o, &link);
    let found = scribe_workspace::open::case_collisions(&o.ws.read()?)?;
    super::files::warn_case_collisions(ctx, &found);
    Ok(())
}

/// Say which files this sync wrote under a directory a pending move
/// vacated, and what submitting or aborting the move does with them.
fn warn_newcomers(ctx: &Ctx, ws: &scribe_workspace::Workspace, s: &Synced) -> CliResult {
    let added: std::collections::HashSet<&str> =
        s.report.added.iter().map(|p| p.as_str()).collect();
    for (i, found) in scribe_workspace::moves::newcomers(ws)? {
        let arrived: Vec<&str> = found
            .iter()
            .map(|p| p.as_str())
            .filter(|p| added.contains(p))
            .collect();
        if arrived.is_empty() {
            continue;
        }
        ctx.out.status(format!(
            "Note: {} file(s) arrived under {}, which your pending move {} -> {} vacated: {}{}. \
             Submitting the move leaves them there; `scribe move --abort {}` puts your files \
             back beside them (refusing, by name, where a name collides)",
            arrived.len(),
            i.source,
            i.source,
            i.destination,
            arrived
                .iter()
                .take(5)
                .copied()
                .collect::<Vec<_>>()
                .join(", "),
            if arrived.len() > 5 { ", ..." } else { "" },
            i.destination
        ));
    }
    Ok(())
}

pub fn print_synced(ctx: &Ctx, s: &Synced) -> CliResult {
    let moved: std::collections::HashMap<&str, &sync::TheirMove> =
        s.their_moves.iter().map(|m| (m.path.as_str(), m)).collect();
    if ctx.out.json {
        return ctx.out.json(&Json::obj(vec![
            ("change", Json::Num(s.change)),
            (
                "written",
                Json::Arr(s.report.written.iter().map(Json::str).collect()),
            ),
            (
                "added",
                Json::Arr(s.report.added.iter().map(Json::str).collect()),
            ),
            (
                "removed",
                Json::Arr(s.report.removed.iter().map(Json::str).collect()),
            ),
            (
                "needs_resolve",
                Json::Arr(
                    s.report
                        .deferred
                        .iter()
                        .map(|(p, r)| {
                            Json::obj(vec![
                                ("path", Json::str(p)),
                                ("reason", Json::str(r.describe())),
                                (
                                    "moved_to",
                                    moved.get(p.as_str()).map_or(Json::Null, |m| {
                                        Json::obj(vec![
                                            ("path", Json::str(&m.to)),
                                            ("change", Json::Num(m.change)),
                                            ("ours_follows", Json::Bool(m.followable)),
                                        ])
                                    }),
                                ),
                            ])
                        })
                        .collect(),
                ),
            ),
            ("bytes_written", Json::Num(s.report.bytes_written)),
            ("bytes_resumed", Json::Num(s.report.bytes_resumed)),
        ]));
    }
    let added: std::collections::HashSet<&str> =
        s.report.added.iter().map(|p| p.as_str()).collect();
    for p in &s.report.written {
        let verb = if added.contains(p.as_str()) {
            "added"
        } else {
            "updated"
        };
        ctx.out.line(format_args!("{verb} {p}"))?;
    }
    for p in &s.report.removed {
        ctx.out.line(format_args!("removed {p}"))?;
    }
    for (p, r) in &s.report.deferred {
        match moved.get(p.as_str()) {
            Some(m) => ctx.out.line(format_args!(
                "resolve {p}  ({}; the server moved it to {} in change {})",
                r.describe(),
                m.to,
                m.change
            ))?,
            None => ctx
                .out
                .line(format_args!("resolve {p}  ({})", r.describe()))?,
        }
    }
    print_summary(ctx, s);
    for m in &s.their_moves {
        warn_their_move(ctx, m);
    }
    Ok(())
}

/// Say that the server moved a file whose local work this sync left at
/// its old path, and how to settle it.
fn warn_their_move(ctx: &Ctx, m: &sync::TheirMove) {
    let (p, to) = (&m.path, &m.to);
    let ours = if m.followable {
        format!("`scribe resolve --ours {p}` carries your work to {to} (opened for edit there)")
    } else {
        format!(
            "{to} is not a file you can take it to here (outside your view, changed, or your \
             own pending move carries {p}): `scribe resolve --ours {p}` keeps your work \
             without following the move"
        )
    };
    ctx.out.status(format!(
        "Note: the server moved {p} -> {to} (change {}); your work stays at {p}. {ours}; \
         `scribe resolve --theirs {p}` takes their move and keeps yours in the recovery area",
        m.change
    ));
}

/// The status lines after a sync.
pub fn print_summary(ctx: &Ctx, s: &Synced) {
    let mbps = s.report.bytes_written as f64 / 1_048_576.0 / s.secs.max(1e-6);
    ctx.out.status(format!(
        "synced to change {}: {} written ({}, {:.0} MiB/s), {} removed, {} need resolve, in {:.2} s",
        s.change,
        s.report.written.len(),
        size(s.report.bytes_written),
        mbps,
        s.report.removed.len(),
        s.report.deferred.len(),
        s.secs
    ));
    if s.report.bytes_resumed > 0 {
        ctx.out.status(format!(
            "{} of interrupted downloads were kept and not fetched again",
            size(s.report.bytes_resumed)
        ));
    }
    if !s.report.deferred.is_empty() {
        ctx.out.status(
            "Hint: local work was kept; settle it with `scribe resolve PATH --ours|--theirs|--merged FILE`",
        );
    }
    if !s.report.displaced.is_empty() {
        ctx.out.status(format!(
            "{} replaced file(s) were kept in the recovery area (`scribe recovery list`)",
            s.report.displaced.len()
        ));
    }
}

/// `scribe view show`.
pub fn view_show(ctx: &Ctx) -> CliResult {
    let o = ctx::open(ctx)?;
    if ctx.out.json {
        return ctx
            .out
            .json(&Json::Arr(o.meta.view.iter().map(Json::str).collect()));
    }
    if o.meta.view.is_empty() {
        ctx.out.line("(the whole repository)")?;
    }
    for p in &o.meta.view {
        ctx.out.line(p)?;
    }
    if let Some(v) = scribe_client::workflow::files::view_change(&o)? {
        ctx.out.status(format!(
            "(an unfinished change to: {}; `scribe status` says more)",
            super::files::view_name(&v)
        ));
    }
    Ok(())
}

/// `scribe view set PREFIX...`.
pub fn view_set(ctx: &Ctx, prefixes: Vec<String>) -> CliResult {
    let o = ctx::open(ctx)?;
    let link = o.link(&ctx.lib)?;
    let v = view::view_set(&o, &link, prefixes)?;
    ctx.out.status(format!(
        "view is now {}: {} written, {} removed",
        if v.prefixes.is_empty() {
            "the whole repository".to_string()
        } else {
            v.prefixes.join(", ")
        },
        v.written.len(),
        v.removed.len()
    ));
    Ok(())
}

//! `scribe log|history|describe`: reading the repository's past.

use scribe_format::wire::message as m;

use scribe_client::workflow::content::{self, Rev, Revision};
use scribe_client::workflow::history;

use crate::ctx::{self, Ctx};
use crate::error::{CliError, CliResult};
use crate::ui::{size, utc, Json};
use scribe_format::ErrorCode;

fn action(a: u8) -> &'static str {
    match a {
        1 => "add",
        2 => "edit",
        3 => "delete",
        _ => "?",
    }
}

fn summary_json(c: &m::CommitSummary) -> Json {
    Json::obj(vec![
        ("change", Json::Num(c.change)),
        ("commit", Json::str(c.commit.to_hex())),
        ("parent", Json::Num(c.parent)),
        ("author", Json::str(&c.author)),
        ("message", Json::str(&c.message.0)),
        ("timestamp_ms", Json::Num(c.timestamp_ms)),
        ("workspace", Json::str(c.workspace.to_hex())),
        ("entries", Json::Num(c.entry_count.into())),
    ])
}

pub fn log(ctx: &Ctx, n: u32) -> CliResult {
    let o = ctx::open_for_reading(ctx)?;
    let out = history::log(&ctx.lib, &o, n)?;
    if ctx.out.json {
        return ctx
            .out
            .json(&Json::Arr(out.iter().map(summary_json).collect()));
    }
    if out.is_empty() {
        ctx.out.line(format_args!(
            "No changes yet in {} (the first submit makes change 1)",
            o.meta.repository_name
        ))?;
    }
    for s in &out {
        let first = s.message.0.lines().next().unwrap_or("");
        ctx.out.line(format_args!(
            "change {:<6} {}  {:<12} {:>4} file(s)  {first}",
            s.change,
            utc(s.timestamp_ms),
            s.author,
            s.entry_count
        ))?;
    }
    Ok(())
}

pub fn history(ctx: &Ctx, path: String) -> CliResult {
    let o = ctx::open_for_reading(ctx)?;
    let p = ctx::paths(ctx, &o.ws, &[path])?.remove(0);
    let all = history::history_following(&ctx.lib, &o, &p)?;
    if all.is_empty() {
        return Err(CliError::new(
            ErrorCode::NotFound,
            format!("{p:?} has no history on this branch"),
        )
        .paths(vec![p])
        .hint(
            "check the path (repository paths, `/` separators); `scribe log` lists the changes",
        ));
    }
    if ctx.out.json {
        return ctx.out.json(&Json::Arr(
            all.iter()
                .map(|i| {
                    let h = &i.entry;
                    Json::obj(vec![
                        ("change", Json::Num(h.change)),
                        ("path", Json::str(&i.path)),
                        ("action", Json::str(action(h.action))),
                        (
                            "size",
                            h.state.as_ref().map_or(Json::Null, |s| Json::Num(s.size)),
                        ),
                        (
                            "content",
                            h.state
                                .as_ref()
                                .map_or(Json::Null, |s| Json::str(s.content.to_hex())),
                        ),
                        (
                            "moved_from",
                            h.moved_from
                                .as_ref()
                                .map_or(Json::Null, |m| Json::str(&m.path)),
                        ),
                        ("author", Json::str(&i.commit.author)),
                        ("timestamp_ms", Json::Num(i.commit.timestamp_ms)),
                        ("message", Json::str(&i.commit.message.0)),
                    ])
                })
                .collect(),
        ));
    }
    for i in &all {
        let h = &i.entry;
        let mv = h
            .moved_from
            .as_ref()
            .map(|m| format!("  (moved from {}@{})", m.path, m.change))
            .unwrap_or_default();
        let name = if i.path != p {
            format!("  as {}", i.path)
        } else {
            String::new()
        };
        ctx.out.line(format_args!(
            "change {:<6} {:<7} {:>9}  {}  {:<12} {}{name}{mv}",
            h.change,
            action(h.action),
            h.state.as_ref().map(|s| size(s.size)).unwrap_or_default(),
            utc(i.commit.timestamp_ms),
            i.commit.author,
            i.commit.message.0.lines().next().unwrap_or("")
        ))?;
    }
    Ok(())
}

pub fn describe(ctx: &Ctx, change: u64, diff: bool) -> CliResult {
    if change == 0 {
        return Err(CliError::new(
            ErrorCode::NotFound,
            "change 0 is the empty repository before the first change; changes are numbered from 1",
        )
        .hint("`scribe log` lists the changes"));
    }
    let o = if diff {
        ctx::open(ctx)?
    } else {
        ctx::open_for_reading(ctx)?
    };
    let (commit, entries) = history::describe(&ctx.lib, &o, change)?;
    if ctx.out.json {
        let mut j = summary_json(&commit);
        if let Json::Obj(f) = &mut j {
            f.push((
                "files",
                Json::Arr(
                    entries
                        .iter()
                        .map(|e| {
                            Json::obj(vec![
                                ("path", Json::str(&e.path)),
                                ("action", Json::str(action(e.action))),
                                (
                                    "size",
                                    e.state.as_ref().map_or(Json::Null, |s| Json::Num(s.size)),
                                ),
                                (
                                    "moved_from",
                                    e.moved_from
                                        .as_ref()
                                        .map_or(Json::Null, |m| Json::str(&m.path)),
                                ),
                            ])
                        })
                        .collect(),
                ),
            ));
            if diff {
                let link = o.link(&ctx.lib)?;
                let mut diffs = Vec::new();
                for e in &entries {
                    let (old, new) = diff_sides(&o, &link, change, e)?;
                    let d = super::content::compare_revisions(&link, &e.path, old, new)?;
                    diffs.push(d.json(&e.path, action(e.action)));
                }
                f.push(("diffs", Json::Arr(diffs)));
            }
        }
        return ctx.out.json(&j);
    }
    ctx.out.line(format_args!(
        "change {} by {} at {}\n\n    {}\n",
        commit.change,
        commit.author,
        utc(commit.timestamp_ms),
        commit.message.0.replace('\n', "\n    ")
    ))?;
    let mut total = 0u64;
    for e in &entries {
        let mv = e
            .moved_from
            .as_ref()
            .map(|m| format!("  (moved from {})", m.path))
            .unwrap_or_default();
        let sz = e.state.as_ref().map(|s| s.size);
        total += sz.unwrap_or(0);
        ctx.out.line(format_args!(
            "  {:<7} {}  {}{mv}",
            action(e.action),
            e.path,
            sz.map_or("-".to_string(), size)
        ))?;
    }
    ctx.out.line(format_args!(
        "\n{} file(s), {} in the files it adds or changes",
        entries.len(),
        size(total)
    ))?;
    if diff {
        let link = o.link(&ctx.lib)?;
        for e in &entries {
            let (old, new) = diff_sides(&o, &link, change, e)?;
            let d = super::content::compare_revisions(&link, &e.path, old, new)?;
            ctx.out.line("")?;
            ctx.out.line(d.text(&e.path, action(e.action)).trim_end())?;
        }
    }
    Ok(())
}

/// The revision before `change` and the one it made, for `describe --diff`.
fn diff_sides(
    o: &scribe_client::workflow::Opened,
    link: &scribe_client::ServerLink,
    change: u64,
    e: &m::DescribedEntry,
) -> CliResult<(Option<Revision>, Option<Revision>)> {
    let new = e.state.as_ref().map(|s| Revision {
        change,
        manifest: s.manifest,
        content: s.content,
        size: s.size,
        mode: s.mode,
    });
    let (from, at) = match (&e.moved_from, e.action) {
        (Some(mv), _) => (mv.path.as_str(), mv.change),
        (None, 1) => return Ok((None, new)),
        (None, _) => (e.path.as_str(), change - 1),
    };
    let old = if at == 0 {
        None
    } else {
        match content::revision(o, link, from, Rev::Change(at)) {
            Ok(r) => Some(r),
            Err(err) if err.code() == ErrorCode::NotFound => None,
            Err(err) => return Err(err.into()),
        }
    };
    Ok((old, new))
}

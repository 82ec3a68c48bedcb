//! `scribe log|history|describe`: reading the repository's past.

use scribe_format::wire::message as m;

use crate::ctx::{self, Ctx};
use crate::error::CliResult;
use crate::out::{size, utc, Json};
use crate::remote::connect;

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
    let o = ctx::open(ctx)?;
    let mut c = connect(&o.meta.server, false)?;
    let mut out = Vec::new();
    let mut before = 0;
    while out.len() < n as usize {
        let page = c.log(m::Log {
            repo: o.meta.repository_name.clone(),
            branch: o.meta.branch_id,
            before,
            limit: (n as usize - out.len()).min(m::MAX_PAGE_ITEMS as usize) as u32,
        })?;
        let empty = page.commits.is_empty();
        out.extend(page.commits);
        if page.next == 0 || empty {
            break;
        }
        before = page.next;
    }
    out.truncate(n as usize);
    if ctx.out.json {
        println!("{}", Json::Arr(out.iter().map(summary_json).collect()));
        return Ok(());
    }
    for s in &out {
        let first = s.message.0.lines().next().unwrap_or("");
        println!(
            "change {:<6} {}  {:<12} {:>4} file(s)  {first}",
            s.change,
            utc(s.timestamp_ms),
            s.author,
            s.entry_count
        );
    }
    Ok(())
}

pub fn history(ctx: &Ctx, path: String, json: bool) -> CliResult {
    let o = ctx::open(ctx)?;
    let p = ctx::paths(ctx, &o.ws, &[path])?.remove(0);
    let mut c = connect(&o.meta.server, false)?;
    let mut all = Vec::new();
    let mut before = 0;
    loop {
        let page = c.history(m::History {
            repo: o.meta.repository_name.clone(),
            branch: o.meta.branch_id,
            path: p.clone(),
            before,
            limit: m::MAX_PAGE_ITEMS,
        })?;
        let empty = page.entries.is_empty();
        all.extend(page.entries);
        if page.next == 0 || empty {
            break;
        }
        before = page.next;
    }
    if json {
        println!(
            "{}",
            Json::Arr(
                all.iter()
                    .map(|h| Json::obj(vec![
                        ("change", Json::Num(h.change)),
                        ("action", Json::str(action(h.action))),
                        (
                            "size",
                            h.state.as_ref().map_or(Json::Null, |s| Json::Num(s.size))
                        ),
                        (
                            "content",
                            h.state
                                .as_ref()
                                .map_or(Json::Null, |s| Json::str(s.content.to_hex()))
                        ),
                        (
                            "moved_from",
                            h.moved_from
                                .as_ref()
                                .map_or(Json::Null, |m| Json::str(&m.path))
                        ),
                    ]))
                    .collect()
            )
        );
        return Ok(());
    }
    for h in &all {
        let mv = h
            .moved_from
            .as_ref()
            .map(|m| format!("  (moved from {}@{})", m.path, m.change))
            .unwrap_or_default();
        println!(
            "change {:<6} {:<7} {}{mv}",
            h.change,
            action(h.action),
            h.state.as_ref().map(|s| size(s.size)).unwrap_or_default()
        );
    }
    Ok(())
}

pub fn describe(ctx: &Ctx, change: u64, json: bool) -> CliResult {
    let o = ctx::open(ctx)?;
    let mut c = connect(&o.meta.server, false)?;
    let mut after = String::new();
    let mut entries = Vec::new();
    let commit = loop {
        let page = c.describe(m::Describe {
            repo: o.meta.repository_name.clone(),
            change,
            after: after.clone(),
            limit: m::MAX_PAGE_ITEMS,
        })?;
        entries.extend(page.entries);
        match page.next {
            Some(n) => after = n,
            None => break page.commit,
        }
    };
    if json {
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
        }
        println!("{j}");
        return Ok(());
    }
    println!(
        "change {} by {} at {}\n\n    {}\n",
        commit.change,
        commit.author,
        utc(commit.timestamp_ms),
        commit.message.0.replace('\n', "\n    ")
    );
    for e in &entries {
        let mv = e
            .moved_from
            .as_ref()
            .map(|m| format!("  (moved from {})", m.path))
            .unwrap_or_default();
        println!("  {:<7} {}{mv}", action(e.action), e.path);
    }
    Ok(())
}

//! `scribe sync [CHANGE]` and `scribe view`: plan from server deltas, then
//! apply the durable journal (scribe_workspace::sync), resumable after a
//! kill at any point.

use scribe_format::wire::message as m;
use scribe_format::BranchId;
use scribe_workspace::records::{normalize_view, BaselineRecord, Fingerprint, ViewChange};
use scribe_workspace::sync;

use crate::ctx::{self, Ctx, Open};
use crate::error::{CliError, CliResult};
use crate::out::{size, Json, Timer};
use crate::remote::{crash_point, Remote};

fn target_of(o: &Open, e: &m::TreeEntry) -> Option<BaselineRecord> {
    target_in(o.meta.incarnation, e)
}

fn target_in(incarnation: [u8; 16], e: &m::TreeEntry) -> Option<BaselineRecord> {
    e.state.as_ref().map(|s| BaselineRecord {
        incarnation,
        manifest: s.manifest,
        content: s.content,
        size: s.size,
        mode: s.mode,
        change: e.change,
        fingerprint: Fingerprint::default(),
    })
}

fn in_view(view: &[String], path: &str) -> bool {
    view.is_empty()
        || view
            .iter()
            .any(|p| scribe_format::path::is_under_prefix(path, p))
}

/// Every delta entry from `from` to `to` (0 = head); returns the resolved target.
pub fn delta_all(
    remote: &Remote,
    branch: BranchId,
    from: u64,
    to: u64,
) -> CliResult<(u64, Vec<m::TreeEntry>)> {
    let mut after = String::new();
    let mut out = Vec::new();
    let mut target = to;
    loop {
        let repo = remote.repo.clone();
        let page = remote.with(|c| {
            c.delta(m::Delta {
                repo,
                branch,
                from,
                to: target,
                after: after.clone(),
                limit: m::MAX_PAGE_ITEMS,
            })
        })?;
        target = page.to;
        out.extend(page.entries);
        match page.next {
            Some(n) => after = n,
            None => break,
        }
    }
    Ok((target, out))
}

/// Every file of the tree at `change` under `prefix`.
pub fn list_all(
    remote: &Remote,
    branch: BranchId,
    change: u64,
    prefix: &str,
) -> CliResult<Vec<m::TreeEntry>> {
    let mut after = String::new();
    let mut out = Vec::new();
    loop {
        let repo = remote.repo.clone();
        let page = remote.with(|c| {
            c.list(m::List {
                repo,
                branch,
                change,
                prefix: prefix.to_string(),
                recursive: true,
                after: after.clone(),
                limit: m::MAX_PAGE_ITEMS,
            })
        })?;
        out.extend(page.entries.into_iter().filter(|e| e.state.is_some()));
        match page.next {
            Some(n) => after = n,
            None => break,
        }
    }
    Ok(out)
}

/// The repository as the server describes it now (incarnation, head).
pub fn repo_info(remote: &Remote) -> CliResult<m::RepoInfo> {
    let repos = remote.with(|c| c.repo_list())?;
    repos
        .into_iter()
        .find(|r| r.name == remote.repo)
        .ok_or_else(|| {
            CliError::new(
                "not_found",
                format!("the server has no repository {:?}", remote.repo),
            )
        })
}

/// After a restore changed the repository incarnation the watermark and
/// the receipt mean nothing: plan every path of the target's tree (in the
/// view) in the new incarnation, and remove baselines it lacks. Opened
/// paths are deferred as always and keep their old-incarnation baselines.
fn full_plan(
    o: &Open,
    remote: &Remote,
    incarnation: [u8; 16],
    target: u64,
) -> CliResult<Vec<(String, Option<BaselineRecord>)>> {
    let meta = o.ws.meta()?;
    let roots: Vec<String> = if meta.view.is_empty() {
        vec![String::new()]
    } else {
        meta.view.clone()
    };
    let mut plan = std::collections::BTreeMap::new();
    for root in roots {
        for e in list_all(remote, meta.branch_id, target, &root)? {
            let t = target_in(incarnation, &e);
            plan.insert(e.path.clone(), t);
        }
    }
    for (p, _) in o.ws.read()?.baselines()? {
        plan.entry(p).or_insert(None);
    }
    Ok(plan.into_iter().collect())
}

/// What a sync did, for printing.
pub struct Synced {
    pub change: u64,
    pub report: sync::SyncReport,
    pub secs: f64,
}

/// Sync `o` to `change` (0 = head), resuming an unfinished journal first.
pub fn run_sync(ctx: &Ctx, o: &Open, remote: &Remote, change: u64) -> CliResult<Synced> {
    let t = Timer::start();
    if !o.ws.read()?.pending_all()?.is_empty() {
        return Err(CliError::new(
            "submit_pending",
            "an interrupted submission must finish before syncing",
        )
        .hint("run `scribe submit` to complete it (it replays the same operation)"));
    }
    let mut total = Synced {
        change: o.meta.synced,
        report: sync::SyncReport::default(),
        secs: 0.0,
    };
    if let Some(target) = sync::in_progress(&o.ws)? {
        ctx.out
            .status(format!("resuming the interrupted sync to change {target}"));
        let r = apply(ctx, o, remote)?;
        merge(&mut total.report, r);
        total.change = sync::finish(&o.ws)?;
        if change == 0 || change == target {
            // a resumed sync to the head continues to the newest head below
        }
    }
    let meta = o.ws.meta()?;
    let info = repo_info(remote)?;
    if info.incarnation != meta.incarnation {
        let target = if change == 0 { info.head } else { change };
        ctx.out.status(format!(
            "the server was restored (new incarnation): full sync to change {target}"
        ));
        let plan = full_plan(o, remote, info.incarnation, target)?;
        sync::begin(&o.ws, target, &plan)?;
        crash_point("sync-after-plan");
        let r = apply(ctx, o, remote)?;
        merge(&mut total.report, r);
        total.change = sync::finish_in(&o.ws, Some(info.incarnation))?;
        total.secs = t.secs();
        return Ok(total);
    }
    let pin = sync::local_pin(&o.ws)?;
    let ranges = sync::plan_ranges(meta.synced, pin, (change != 0).then_some(change));
    let mut target = change;
    let mut plan: Vec<(String, Option<BaselineRecord>)> = Vec::new();
    let mut planned = std::collections::HashSet::new();
    if let Some((from, to)) = ranges.forward {
        let (resolved, entries) = delta_all(remote, meta.branch_id, from, to)?;
        target = resolved;
        for e in entries.iter().filter(|e| in_view(&meta.view, &e.path)) {
            if planned.insert(e.path.clone()) {
                plan.push((e.path.clone(), target_of(o, e)));
            }
        }
    }
    if let Some((from, to)) = ranges.restat {
        // Backward, or behind the local receipt: the paths changed in
        // (from, to], each at its state in the target.
        let (_, entries) = delta_all(remote, meta.branch_id, from, to)?;
        for e in entries.iter().filter(|e| in_view(&meta.view, &e.path)) {
            if !planned.insert(e.path.clone()) {
                continue;
            }
            let repo = remote.repo.clone();
            let path = e.path.clone();
            let st = remote.with(|c| {
                c.stat(m::Stat {
                    repo,
                    branch: meta.branch_id,
                    change,
                    path,
                })
            })?;
            let t = st.entry.as_ref().and_then(|old| target_of(o, old));
            plan.push((e.path.clone(), t));
        }
    }
    if ranges.forward.is_none() && ranges.restat.is_none() {
        target = meta.synced;
    }
    plan.sort_by(|a, b| a.0.cmp(&b.0));
    sync::begin(&o.ws, target, &plan)?;
    crash_point("sync-after-plan");
    let r = apply(ctx, o, remote)?;
    merge(&mut total.report, r);
    total.change = sync::finish(&o.ws)?;
    total.secs = t.secs();
    Ok(total)
}

fn merge(into: &mut sync::SyncReport, r: sync::SyncReport) {
    into.written.extend(r.written);
    into.removed.extend(r.removed);
    into.deferred.extend(r.deferred);
    into.displaced.extend(r.displaced);
    into.bytes_written += r.bytes_written;
}

fn apply(ctx: &Ctx, o: &Open, remote: &Remote) -> CliResult<sync::SyncReport> {
    let todo: u64 =
        o.ws.read()?
            .journal_all()?
            .iter()
            .filter(|(_, e)| !e.done)
            .filter_map(|(_, e)| e.target.map(|t| t.size))
            .sum();
    let bar = ctx.out.bytes_bar(todo, "sync");
    if let Ok(mut b) = remote.bar.lock() {
        *b = bar.clone();
    }
    let r = sync::apply(&o.ws, remote)?;
    bar.finish_and_clear();
    Ok(r)
}

pub fn print_synced(ctx: &Ctx, s: &Synced) {
    if ctx.out.json {
        println!(
            "{}",
            Json::obj(vec![
                ("change", Json::Num(s.change)),
                (
                    "written",
                    Json::Arr(s.report.written.iter().map(Json::str).collect())
                ),
                (
                    "removed",
                    Json::Arr(s.report.removed.iter().map(Json::str).collect())
                ),
                (
                    "needs_resolve",
                    Json::Arr(
                        s.report
                            .deferred
                            .iter()
                            .map(|(p, r)| Json::obj(vec![
                                ("path", Json::str(p)),
                                ("reason", Json::str(r.describe()))
                            ]))
                            .collect()
                    )
                ),
                ("bytes_written", Json::Num(s.report.bytes_written)),
            ])
        );
        return;
    }
    for p in &s.report.written {
        println!("updated {p}");
    }
    for p in &s.report.removed {
        println!("removed {p}");
    }
    for (p, r) in &s.report.deferred {
        println!("resolve {p}  ({})", r.describe());
    }
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

pub fn sync_cmd(ctx: &Ctx, change: Option<u64>) -> CliResult {
    let o = ctx::open(ctx)?;
    scribe_workspace::moves::refuse_if_interrupted(&o.ws)?;
    let remote = o.remote()?;
    if let Some(bytes) = o.ws.read()?.meta_bytes("view-change")? {
        let vc = ViewChange::decode(&bytes)?;
        ctx.out.status("finishing the interrupted view change");
        finish_view(ctx, &o, &remote, vc)?;
    }
    let s = run_sync(ctx, &o, &remote, change.unwrap_or(0))?;
    print_synced(ctx, &s);
    Ok(())
}

/// `scribe view show`.
pub fn view_show(ctx: &Ctx) -> CliResult {
    let o = ctx::open(ctx)?;
    if ctx.out.json {
        println!("{}", Json::Arr(o.meta.view.iter().map(Json::str).collect()));
    } else if o.meta.view.is_empty() {
        println!("(the whole repository)");
    } else {
        for p in &o.meta.view {
            println!("{p}");
        }
    }
    Ok(())
}

/// `scribe view set PREFIX...`: files entering the view are written and
/// files leaving it removed, through the same journal; `view-change` is
/// durable first and the new view is published once the journal is done.
pub fn view_set(ctx: &Ctx, prefixes: Vec<String>) -> CliResult {
    let o = ctx::open(ctx)?;
    scribe_workspace::moves::refuse_if_interrupted(&o.ws)?;
    let prefixes: Vec<String> = prefixes
        .into_iter()
        .map(|p| p.trim_end_matches('/').to_string())
        .filter(|p| !p.is_empty() && p != ".")
        .collect();
    let view = normalize_view(&prefixes)?;
    if sync::in_progress(&o.ws)?.is_some() {
        return Err(CliError::new("sync_unfinished", "a sync is unfinished")
            .hint("run `scribe sync` first"));
    }
    let vc = ViewChange {
        target_change: o.meta.synced,
        incarnation: o.meta.incarnation,
        profile: String::new(),
        prefixes: view,
    };
    {
        let tx = o.ws.write()?;
        tx.put_meta_bytes("view-change", &vc.encode())?;
        tx.commit()?;
    }
    let remote = o.remote()?;
    finish_view(ctx, &o, &remote, vc)
}

fn finish_view(ctx: &Ctx, o: &Open, remote: &Remote, vc: ViewChange) -> CliResult {
    let meta = o.ws.meta()?;
    if sync::in_progress(&o.ws)?.is_none() {
        let baselines = o.ws.read()?.baselines()?;
        let mut plan: Vec<(String, Option<BaselineRecord>)> = Vec::new();
        for (p, _) in &baselines {
            if !in_view(&vc.prefixes, p) {
                plan.push((p.clone(), None));
            }
        }
        let have: std::collections::HashSet<&str> =
            baselines.iter().map(|(p, _)| p.as_str()).collect();
        let roots: Vec<String> = if vc.prefixes.is_empty() {
            vec![String::new()]
        } else {
            vc.prefixes.clone()
        };
        for root in roots {
            for e in list_all(remote, meta.branch_id, vc.target_change, &root)? {
                if !have.contains(e.path.as_str()) {
                    let t = target_of(o, &e);
                    plan.push((e.path.clone(), t));
                }
            }
        }
        plan.sort_by(|a, b| a.0.cmp(&b.0));
        plan.dedup_by(|a, b| a.0 == b.0);
        sync::begin(&o.ws, vc.target_change, &plan)?;
    }
    let r = apply(ctx, o, remote)?;
    if !r.deferred.is_empty() {
        let paths = r
            .deferred
            .iter()
            .map(|(p, x)| format!("{p}: {}", x.describe()))
            .collect();
        sync::finish(&o.ws)?;
        return Err(CliError::new(
            "view_change_blocked",
            "local work stands in the way of the view change",
        )
        .paths(paths)
        .hint("submit or revert those paths, then run `scribe sync` to finish the view change"));
    }
    let repo = meta.repository_name.clone();
    let ws_id = meta.workspace_id;
    let view = vc.prefixes.clone();
    remote.with(|c| {
        c.workspace_register(m::WorkspaceRegister {
            repo,
            workspace: ws_id,
            branch: String::new(),
            view,
            label: String::new(),
            tags: meta.tags.clone(),
        })
    })?;
    sync::finish(&o.ws)?;
    let tx = o.ws.write()?;
    let mut new_meta = tx.meta()?;
    new_meta.view = vc.prefixes.clone();
    tx.set_meta(&new_meta)?;
    tx.remove_meta("view-change")?;
    tx.commit()?;
    ctx.out.status(format!(
        "view is now {}: {} written, {} removed",
        if vc.prefixes.is_empty() {
            "the whole repository".to_string()
        } else {
            vc.prefixes.join(", ")
        },
        r.written.len(),
        r.removed.len()
    ));
    Ok(())
}

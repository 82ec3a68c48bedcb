//! Sync: plan from server deltas, then apply the durable journal
//! (`scribe_workspace::sync`), resumable after a kill at any point.

use scribe_format::wire::message as m;
use scribe_format::BranchId;
use scribe_format::{Concern, ErrorCode};
use scribe_workspace::records::{BaselineRecord, Fingerprint, ViewChange};
use scribe_workspace::sync as journal;

use crate::error::{Error, Result};
use crate::link::ServerLink;
use crate::progress::{Note, Task};
use crate::workflow::Opened;

pub(crate) fn target_of(o: &Opened, e: &m::TreeEntry) -> Option<BaselineRecord> {
    target_in(o.meta.incarnation, e)
}

pub(crate) fn target_in(incarnation: [u8; 16], e: &m::TreeEntry) -> Option<BaselineRecord> {
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

pub(crate) fn in_view(view: &[String], path: &str) -> bool {
    view.is_empty()
        || view
            .iter()
            .any(|p| scribe_format::path::is_under_prefix(path, p))
}

/// Every delta entry from `from` to `to` (0 = head); returns the resolved target.
pub fn delta_all(
    remote: &ServerLink,
    branch: BranchId,
    from: u64,
    to: u64,
) -> Result<(u64, Vec<m::TreeEntry>)> {
    let mut after = String::new();
    let mut out = Vec::new();
    let mut target = to;
    loop {
        let repo = remote.repo().to_string();
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
        check_paths(remote, "Delta", &page.entries, "")?;
        out.extend(page.entries);
        match page.next {
            Some(n) => after = n,
            None => break,
        }
    }
    Ok((target, out))
}

/// Refuse a reply naming a path that is not canonical (`..`, absolute,
/// reserved, ...), a file path a file may not have, or a path outside
/// `under`: a server, or anyone between it and us on a plaintext
/// connection, must not make a sync write or delete outside the
/// workspace. Checked before anything is planned, so nothing changes.
fn check_paths(
    remote: &ServerLink,
    reply: &str,
    entries: &[m::TreeEntry],
    under: &str,
) -> Result<()> {
    for e in entries {
        let valid = if e.state.is_some() {
            scribe_format::path::validate_file_path(&e.path)
        } else {
            scribe_format::path::validate(&e.path)
        };
        if let Err(why) = valid {
            return Err(untrusted(remote, reply, &e.path, &why.to_string()));
        }
        if !under.is_empty() && !scribe_format::path::is_under_prefix(&e.path, under) {
            return Err(untrusted(
                remote,
                reply,
                &e.path,
                "outside the prefix asked for",
            ));
        }
    }
    Ok(())
}

fn untrusted(remote: &ServerLink, reply: &str, path: &str, why: &str) -> Error {
    Error::new(
        ErrorCode::Malformed,
        format!(
            "the server at {} answered {reply} with the path {} ({why}); nothing was changed",
            remote.url(),
            scribe_format::echo::echo(path)
        ),
    )
    .with_paths(vec![path.to_string()])
}

/// Every file of the tree at `change` under `prefix`.
pub fn list_all(
    remote: &ServerLink,
    branch: BranchId,
    change: u64,
    prefix: &str,
) -> Result<Vec<m::TreeEntry>> {
    let mut after = String::new();
    let mut out = Vec::new();
    loop {
        let repo = remote.repo().to_string();
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
        check_paths(remote, "List", &page.entries, prefix)?;
        out.extend(page.entries.into_iter().filter(|e| e.state.is_some()));
        match page.next {
            Some(n) => after = n,
            None => break,
        }
    }
    Ok(out)
}

/// The repository as the server describes it now (incarnation, head).
pub fn repo_info(remote: &ServerLink) -> Result<m::RepoInfo> {
    let repos = remote.with(|c| c.repo_list())?;
    if !repos.iter().any(|r| r.name == remote.repo()) {
        if let Some(e) = remote.with(|c| Ok(remote.renamed(c)))? {
            return Err(e);
        }
    }
    repos
        .into_iter()
        .find(|r| r.name == remote.repo())
        .ok_or_else(|| {
            Error::new(
                ErrorCode::NotFound,
                format!(
                    "the server has no repository {}",
                    scribe_format::echo::echo(remote.repo())
                ),
            )
            .concerning(Concern::Repository)
        })
}

/// After a restore changed the repository incarnation the watermark and
/// the receipt mean nothing: plan every path of the target's tree (in the
/// view) in the new incarnation, and remove baselines it lacks. Opened
/// paths are deferred as always and keep their old-incarnation baselines.
fn full_plan(
    o: &Opened,
    remote: &ServerLink,
    incarnation: [u8; 16],
    target: u64,
) -> Result<Vec<(String, Option<BaselineRecord>)>> {
    let meta = o.ws.meta()?;
    let roots: Vec<String> = if meta.view.is_empty() {
        vec![String::new()]
    } else {
        meta.view.clone()
    };
    let mut plan = std::collections::BTreeMap::new();
    // Change 0 is the empty tree: nothing to list (a listing at 0 would
    // be read as the head).
    for root in roots.iter().filter(|_| target != 0) {
        for e in list_all(remote, meta.branch_id, target, root)? {
            let t = target_in(incarnation, &e);
            plan.insert(e.path.clone(), t);
        }
    }
    for (p, _) in o.ws.read()?.baselines()? {
        plan.entry(p).or_insert(None);
    }
    Ok(plan.into_iter().collect())
}

/// What a sync did.
#[derive(Debug)]
pub struct Synced {
    pub change: u64,
    pub report: journal::SyncReport,
    pub secs: f64,
    /// Deferred paths the server *moved* (their removing change moved
    /// the file elsewhere), in path order: where local work stays behind.
    pub their_moves: Vec<TheirMove>,
}

/// A path this sync deferred (local work there) that the server moved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TheirMove {
    pub path: String,
    pub to: String,
    /// The change that moved it.
    pub change: u64,
    /// `resolve --ours` carries the local work to `to` (it is a tracked,
    /// unmodified file here, and no pending move of this workspace
    /// carries `path`); otherwise it keeps the work at `path` (or, for a
    /// pending move's source, as a new file at its destination).
    pub followable: bool,
}

/// At most this many `Describe` pages are read per removing change to
/// find where it moved deferred paths (4,096 entries a page): a larger
/// change is not searched, and `resolve --ours` asks the server itself.
const MOVE_SEARCH_PAGES: usize = 64;

/// How the server removed each deferred path of `deferred` whose removal
/// this sync planned (`tombstones`: path -> removing change): moved
/// (where to) or removed, recorded for `resolve --ours`
/// (`scribe_workspace::their_moves`) and returned for the moves. Best
/// effort: the sync is complete; a failed `Describe` leaves those paths
/// unrecorded (`resolve --ours` asks the server itself).
fn their_moves(
    o: &Opened,
    remote: &ServerLink,
    deferred: &[(String, journal::DeferReason)],
    tombstones: &std::collections::HashMap<String, u64>,
) -> Result<Vec<TheirMove>> {
    use scribe_workspace::their_moves::{self as tm, TheirRemoval};
    let mut by_change: std::collections::BTreeMap<u64, Vec<&str>> = Default::default();
    for (p, _) in deferred {
        if let Some(c) = tombstones.get(p) {
            by_change.entry(*c).or_default().push(p);
        }
    }
    let mut rows = Vec::new();
    for (change, paths) in by_change {
        let Some(found) = moved_in(remote, change, &paths) else {
            continue;
        };
        for p in paths {
            rows.push((
                p.to_string(),
                TheirRemoval {
                    change,
                    moved_to: found.get(p).cloned(),
                },
            ));
        }
    }
    tm::record(&o.ws, &rows)?;
    let mut out = Vec::new();
    let still_deferred: std::collections::HashSet<String> =
        o.ws.read()?
            .deferred_all()?
            .into_iter()
            .map(|(p, _)| p)
            .collect();
    for (path, how) in rows {
        let Some(to) = how.moved_to else { continue };
        let read = o.ws.read()?;
        let theirs_here = read.baseline(&to)?.is_some()
            && read.opened(&to)?.is_none()
            && !still_deferred.contains(&to);
        drop(read);
        let followable =
            theirs_here && scribe_workspace::resolve::may_follow_move(&o.ws, &path)?.is_some();
        out.push(TheirMove {
            path,
            to,
            change: how.change,
            followable,
        });
    }
    Ok(out)
}

/// Where `change` moved each of `paths` (absent: removed, not moved);
/// `None` when the change could not be read whole (an error, or more than
/// [`MOVE_SEARCH_PAGES`] pages).
fn moved_in(
    remote: &ServerLink,
    change: u64,
    paths: &[&str],
) -> Option<std::collections::HashMap<String, String>> {
    let wanted: std::collections::HashSet<&str> = paths.iter().copied().collect();
    let mut found = std::collections::HashMap::new();
    let mut after = String::new();
    for _ in 0..MOVE_SEARCH_PAGES {
        let repo = remote.repo().to_string();
        let page = remote
            .with(|c| {
                c.describe(m::Describe {
                    repo,
                    change,
                    after: after.clone(),
                    limit: m::MAX_PAGE_ITEMS,
                })
            })
            .ok()?;
        for e in page.entries {
            let Some(from) = e.moved_from.as_ref() else {
                continue;
            };
            if wanted.contains(from.path.as_str())
                && scribe_format::path::validate_file_path(&e.path).is_ok()
            {
                found.insert(from.path.clone(), e.path);
            }
        }
        match page.next {
            Some(n) => after = n,
            None => return Some(found),
        }
    }
    None
}

/// Sync `o` to `change` (`None` = the head; `Some(0)` = change 0, the empty
/// tree before any change), resuming an unfinished journal first.
pub fn run_sync(o: &Opened, remote: &ServerLink, change: Option<u64>) -> Result<Synced> {
    let t = std::time::Instant::now();
    if !o.ws.read()?.pending_all()?.is_empty() {
        return Err(Error::new(
            ErrorCode::SubmitPending,
            "an interrupted submission must finish before syncing",
        ));
    }
    let mut total = Synced {
        change: o.meta.synced,
        report: journal::SyncReport::default(),
        secs: 0.0,
        their_moves: Vec::new(),
    };
    if let Some(target) = journal::in_progress(&o.ws)? {
        remote
            .context()
            .progress
            .note(Note::ResumingSync { target });
        match apply(o, remote) {
            Ok(r) => {
                merge(&mut total.report, r);
                // A resumed sync then continues to the requested change below.
                total.change = journal::finish(&o.ws)?;
            }
            Err(e) => {
                // A journal whose target cannot be applied (a change the
                // server should never have accepted) must not strand the
                // workspace: with a newer change to go to, set it aside and
                // plan afresh from the unchanged watermark (issue #14).
                let meta = o.ws.meta()?;
                let Ok(info) = repo_info(remote) else {
                    return Err(e);
                };
                let newer = change.unwrap_or(info.head);
                if newer <= target || info.incarnation != meta.incarnation {
                    return Err(e);
                }
                remote.context().progress.note(Note::SkippingSync {
                    target,
                    newer,
                    why: e.to_string(),
                });
                journal::abandon(&o.ws)?;
            }
        }
    }
    let meta = o.ws.meta()?;
    let info = repo_info(remote)?;
    if let Some(c) = change.filter(|c| *c > info.head) {
        // Refused before anything is planned: the server would refuse the
        // delta, in words about a branch id; this names the head.
        return Err(super::history::missing_change(
            remote.repo(),
            c,
            Some(info.head),
        ));
    }
    if info.incarnation != meta.incarnation {
        let target = change.unwrap_or(info.head);
        remote.context().progress.note(Note::FullSync { target });
        let plan = full_plan(o, remote, info.incarnation, target)?;
        journal::begin(&o.ws, target, &plan)?;
        remote.context().failpoints.point("sync-after-plan");
        let r = apply(o, remote)?;
        merge(&mut total.report, r);
        total.change = journal::finish_in(&o.ws, Some(info.incarnation))?;
        total.secs = t.elapsed().as_secs_f64();
        return Ok(total);
    }
    if change == Some(0) {
        // Change 0 is the empty tree: every tracked path is removed (local
        // work is deferred by the journal as always). Nothing to ask the
        // server: a delta or stat at 0 would be read as the head.
        let plan: Vec<(String, Option<BaselineRecord>)> =
            o.ws.read()?
                .baselines()?
                .into_iter()
                .map(|(p, _)| (p, None))
                .collect();
        journal::begin(&o.ws, 0, &plan)?;
        remote.context().failpoints.point("sync-after-plan");
        let r = apply(o, remote)?;
        merge(&mut total.report, r);
        total.change = journal::finish(&o.ws)?;
        total.secs = t.elapsed().as_secs_f64();
        return Ok(total);
    }
    let pin = journal::local_pin(&o.ws)?;
    let ranges = journal::plan_ranges(meta.synced, pin, change);
    let mut target = change.unwrap_or(0);
    let mut plan: Vec<(String, Option<BaselineRecord>)> = Vec::new();
    let mut planned = std::collections::HashSet::new();
    // Removals this sync plans, with their removing change (a deferred
    // one may be a move: [`their_moves`]).
    let mut tombstones = std::collections::HashMap::new();
    if let Some((from, to)) = ranges.forward {
        let (resolved, entries) = delta_all(remote, meta.branch_id, from, to)?;
        target = resolved;
        for e in entries.iter().filter(|e| in_view(&meta.view, &e.path)) {
            if planned.insert(e.path.clone()) {
                plan.push((e.path.clone(), target_of(o, e)));
                if e.state.is_none() {
                    tombstones.insert(e.path.clone(), e.change);
                }
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
            let repo = remote.repo().to_string();
            let path = e.path.clone();
            let st = remote.with(|c| {
                c.stat(m::Stat {
                    repo,
                    branch: meta.branch_id,
                    change: change.unwrap_or(target),
                    path,
                })
            })?;
            if let Some(entry) = &st.entry {
                check_paths(remote, "Stat", std::slice::from_ref(entry), &e.path)?;
                if entry.path != e.path {
                    return Err(untrusted(remote, "Stat", &entry.path, "not the path asked"));
                }
            }
            let t = st.entry.as_ref().and_then(|old| target_of(o, old));
            plan.push((e.path.clone(), t));
        }
    }
    if ranges.forward.is_none() && ranges.restat.is_none() {
        target = meta.synced;
    }
    plan.sort_by(|a, b| a.0.cmp(&b.0));
    journal::begin(&o.ws, target, &plan)?;
    remote.context().failpoints.point("sync-after-plan");
    let r = apply(o, remote)?;
    merge(&mut total.report, r);
    total.change = journal::finish(&o.ws)?;
    total.their_moves = their_moves(o, remote, &total.report.deferred, &tombstones)?;
    total.secs = t.elapsed().as_secs_f64();
    Ok(total)
}

fn merge(into: &mut journal::SyncReport, r: journal::SyncReport) {
    into.written.extend(r.written);
    into.added.extend(r.added);
    into.removed.extend(r.removed);
    into.deferred.extend(r.deferred);
    into.displaced.extend(r.displaced);
    into.replaced_unmodified.extend(r.replaced_unmodified);
    into.bytes_written += r.bytes_written;
    into.bytes_resumed += r.bytes_resumed;
}

pub(crate) fn apply(o: &Opened, remote: &ServerLink) -> Result<journal::SyncReport> {
    let todo: u64 =
        o.ws.read()?
            .journal_all()?
            .iter()
            .filter(|(_, e)| !e.done)
            .filter_map(|(_, e)| e.target.map(|t| t.size))
            .sum();
    let progress = &remote.context().progress;
    progress.start(Task::Sync, todo);
    let r = journal::apply(&o.ws, remote);
    progress.finish(Task::Sync);
    Ok(r?)
}

/// Sync `o` to `change` (`None` = the branch head; `Some(0)` = change 0,
/// which removes every tracked file), as `scribe sync` does:
/// refused while a move is interrupted; an interrupted view change is
/// finished first; an unfinished sync is completed first.
pub fn sync(o: &Opened, remote: &ServerLink, change: Option<u64>) -> Result<Synced> {
    scribe_workspace::moves::refuse_if_interrupted(&o.ws)?;
    if let Some(bytes) = o.ws.read()?.meta_bytes("view-change")? {
        let vc = ViewChange::decode(&bytes)?;
        remote.context().progress.note(Note::FinishingViewChange);
        super::view::finish_view(o, remote, vc)?;
    }
    run_sync(o, remote, change)
}

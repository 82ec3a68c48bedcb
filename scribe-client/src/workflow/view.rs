//! `scribe view set|show`: change which path prefixes a workspace holds.
//! Files entering the view are written and files leaving it removed,
//! through the sync journal; the new view is published once it is done.

use scribe_format::wire::message as m;
use scribe_format::ErrorCode;
use scribe_workspace::records::{normalize_view, BaselineRecord, ViewChange};
use scribe_workspace::sync as journal;

use super::sync::{apply, in_view, list_all, target_of};
use crate::error::{Error, Result};
use crate::link::ServerLink;
use crate::workflow::Opened;

/// What a view change did.
#[derive(Debug)]
pub struct ViewChanged {
    /// The new view (empty: the whole repository).
    pub prefixes: Vec<String>,
    pub written: Vec<String>,
    pub removed: Vec<String>,
}

/// Hold only `prefixes` (none: the whole repository): `view-change` is
/// made durable first, so a kill at any point is finished by the next
/// `scribe sync` or `scribe view set`.
pub fn view_set(o: &Opened, remote: &ServerLink, prefixes: Vec<String>) -> Result<ViewChanged> {
    scribe_workspace::moves::refuse_if_interrupted(&o.ws)?;
    let prefixes: Vec<String> = prefixes
        .into_iter()
        .map(|p| p.trim_end_matches('/').to_string())
        .filter(|p| !p.is_empty() && p != ".")
        .collect();
    let view = normalize_view(&prefixes)?;
    if journal::in_progress(&o.ws)?.is_some() {
        return Err(Error::new(
            ErrorCode::SyncUnfinished,
            "a sync is unfinished",
        ));
    }
    // Local work the change would have to remove (opened files, or files
    // waiting for resolve, leaving the view) refuses it before anything is
    // written: `apply` would first remove every other file leaving the
    // view and then stop, with the old view still in effect.
    let blocked = {
        let read = o.ws.read()?;
        let opened: std::collections::HashMap<String, _> = read.opened_all()?.into_iter().collect();
        let deferred: std::collections::HashSet<String> =
            read.deferred_all()?.into_iter().map(|(p, _)| p).collect();
        let mut out = Vec::new();
        for (p, _) in read.baselines()? {
            if in_view(&view, &p) {
                continue;
            }
            if let Some(r) = opened.get(&p) {
                out.push(format!("{p}: opened for {}", r.action.name()));
            } else if deferred.contains(&p) {
                out.push(format!("{p}: waiting for `scribe resolve`"));
            }
        }
        out
    };
    if !blocked.is_empty() {
        return Err(Error::new(
            ErrorCode::ViewChangeBlocked,
            format!(
                "{} file(s) leaving the view hold local work; nothing was changed",
                blocked.len()
            ),
        )
        .with_paths(blocked));
    }
    let vc = ViewChange {
        target_change: o.meta.synced,
        incarnation: o.meta.incarnation,
        profile: String::new(),
        prefixes: view,
    };
    // Everything is checked before anything is recorded or changed: a
    // change that local work would block (a changed, unopened file
    // leaving the view, an untracked file where one enters) is refused
    // with the workspace as it was, not half applied.
    let plan = plan_view(o, remote, &vc)?;
    {
        let tx = o.ws.write()?;
        tx.put_meta_bytes("view-change", &vc.encode())?;
        tx.commit()?;
    }
    journal::begin(&o.ws, vc.target_change, &plan)?;
    finish_view(o, remote, vc)
}

/// The journal plan of the view change `vc`: every tracked file outside
/// the new view leaves, every file of the new view not held here enters.
/// Refused ([`ErrorCode::ViewChangeBlocked`], naming each path and why)
/// when applying it would defer anything (`journal::would_defer`).
fn plan_view(
    o: &Opened,
    remote: &ServerLink,
    vc: &ViewChange,
) -> Result<Vec<(String, Option<BaselineRecord>)>> {
    let meta = o.ws.meta()?;
    let baselines = o.ws.read()?.baselines()?;
    let mut plan: Vec<(String, Option<BaselineRecord>)> = Vec::new();
    for (p, _) in &baselines {
        if !in_view(&vc.prefixes, p) {
            plan.push((p.clone(), None));
        }
    }
    let have: std::collections::HashSet<&str> = baselines.iter().map(|(p, _)| p.as_str()).collect();
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
    let blocked = journal::would_defer(&o.ws, &plan)?;
    if !blocked.is_empty() {
        return Err(Error::new(
            ErrorCode::ViewChangeBlocked,
            format!(
                "{} file(s) hold local work the view change would have to touch; nothing was \
                 changed",
                blocked.len()
            ),
        )
        .with_paths(
            blocked
                .iter()
                .map(|(p, why)| format!("{p}: {}", why.describe()))
                .collect(),
        ));
    }
    Ok(plan)
}

/// Apply the view change `vc` (planned now unless its journal exists),
/// register the new view with the server and publish it locally.
pub fn finish_view(o: &Opened, remote: &ServerLink, vc: ViewChange) -> Result<ViewChanged> {
    let meta = o.ws.meta()?;
    // Paths already waiting for resolve before this view change (a sync's
    // conflicts): a blocked view change leaves them as they were.
    let waiting_before: std::collections::HashSet<String> =
        o.ws.read()?
            .deferred_all()?
            .into_iter()
            .map(|(p, _)| p)
            .collect();
    if journal::in_progress(&o.ws)?.is_none() {
        // An interrupted view change (stopped before its journal): checked
        // and planned afresh, changing nothing when it is blocked.
        let plan = plan_view(o, remote, &vc)?;
        journal::begin(&o.ws, vc.target_change, &plan)?;
    }
    let r = apply(o, remote)?;
    if !r.deferred.is_empty() {
        let paths = r
            .deferred
            .iter()
            .map(|(p, x)| format!("{p}: {}", x.describe()))
            .collect();
        journal::finish(&o.ws)?;
        // The view did not change: the paths in the way are not conflicts
        // with the server (a file leaving the view is not deleted by
        // anyone), so they do not wait for resolve, where `--theirs` would
        // have removed or replaced them for a view never taken. They stay
        // as they are; the error names them.
        {
            let tx = o.ws.write()?;
            for (p, _) in &r.deferred {
                if !waiting_before.contains(p) {
                    tx.remove_deferred(p)?;
                }
            }
            tx.commit()?;
        }
        return Err(Error::new(
            ErrorCode::ViewChangeBlocked,
            "local work stands in the way of the view change",
        )
        .with_paths(paths));
    }
    let repo = meta.repository_name.clone();
    let ws_id = meta.workspace_id;
    let view = vc.prefixes.clone();
    // The registration as the server holds it, with the new view: its
    // branch, label and tags (last use included) are kept.
    let tags = meta.tags.clone();
    remote.with(|c| {
        let current = c
            .workspace_list(&repo)?
            .into_iter()
            .find(|w| w.workspace == ws_id && !w.retired);
        let (branch, label, tags) = match current {
            Some(info) => (
                if info.branch == scribe_format::BranchId([0; 16]) {
                    String::new()
                } else {
                    info.branch_name
                },
                info.label,
                info.tags,
            ),
            None => (String::new(), String::new(), tags),
        };
        c.workspace_register(m::WorkspaceRegister {
            repo,
            workspace: ws_id,
            branch,
            view,
            label,
            tags,
        })
    })?;
    journal::finish(&o.ws)?;
    let tx = o.ws.write()?;
    let mut new_meta = tx.meta()?;
    new_meta.view = vc.prefixes.clone();
    tx.set_meta(&new_meta)?;
    tx.remove_meta("view-change")?;
    tx.commit()?;
    Ok(ViewChanged {
        prefixes: vc.prefixes,
        written: r.written,
        removed: r.removed,
    })
}

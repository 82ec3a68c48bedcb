//! Server-enforced file locks: take, release, list.

use scribe_format::wire::message as m;

use crate::error::{Error, Result};
use crate::link::connect;
use crate::workflow::Opened;
use crate::Context;
use scribe_format::{Concern, ErrorCode};

/// Lock `paths` for `o` and remember their generations locally.
pub fn lock(ctx: &Context, o: &Opened, paths: Vec<String>) -> Result<Vec<m::LockInfo>> {
    let mut c = connect(&o.meta.server, false, ctx)?;
    let locks = c.lock_acquire(m::LockAcquire {
        repo: o.meta.repository_name.clone(),
        workspace: o.meta.workspace_id,
        branch: o.meta.branch_id,
        author: o.meta.author.clone(),
        paths,
    })?;
    let tx = o.ws.write()?;
    for l in &locks {
        tx.put_local_lock(&l.path, l.generation)?;
    }
    tx.commit()?;
    Ok(locks)
}

/// Release the locks `o` holds on `paths`; returns the released ones.
/// Paths on which this workspace held no lock are listed in a `not_found`
/// refusal ([`Concern::NotLocked`]) after the others were released:
/// nothing is said to be unlocked that was not locked.
pub fn unlock(ctx: &Context, o: &Opened, paths: Vec<String>) -> Result<Vec<m::LockInfo>> {
    let mut c = connect(&o.meta.server, false, ctx)?;
    let released = c.lock_release(m::LockRelease {
        repo: o.meta.repository_name.clone(),
        workspace: o.meta.workspace_id,
        paths: paths.clone(),
    })?;
    let tx = o.ws.write()?;
    for p in &paths {
        tx.remove_local_lock(p)?;
    }
    tx.commit()?;
    Ok(released)
}

/// The paths of `asked` that none of `released` is at or under (a folder
/// releases the locks beneath it).
pub fn not_released(asked: &[String], released: &[m::LockInfo]) -> Vec<String> {
    asked
        .iter()
        .filter(|p| {
            !released
                .iter()
                .any(|l| p.is_empty() || scribe_format::path::is_under_prefix(&l.path, p))
        })
        .cloned()
        .collect()
}

/// `not_found` for `paths` that hold no lock to release.
pub fn not_locked(paths: Vec<String>) -> Error {
    Error::new(
        ErrorCode::NotFound,
        format!("{} path(s) hold no lock to release", paths.len()),
    )
    .with_paths(paths)
    .concerning(Concern::NotLocked)
}

/// Every lock of `o`'s repository.
pub fn list(ctx: &Context, o: &Opened) -> Result<Vec<m::LockInfo>> {
    let mut c = connect(&o.meta.server, false, ctx)?;
    let mut all = Vec::new();
    let mut after = String::new();
    loop {
        let page = c.lock_list(m::LockList {
            repo: o.meta.repository_name.clone(),
            prefix: String::new(),
            after: after.clone(),
            limit: m::MAX_PAGE_ITEMS,
        })?;
        all.extend(page.locks);
        match page.next {
            Some(n) => after = n,
            None => break,
        }
    }
    Ok(all)
}

/// Break the locks on `paths` (files, or every lock under a folder)
/// whoever holds them (#18 item 1): one `LockRelease` per holding
/// workspace, in that workspace's name. A team server allows it to a
/// maintainer or administrator of the repository only, and records it in
/// the auth service's audit trail; an open server (no auth) allows anyone.
/// Returns the released locks; a path without a lock is `not_found`.
pub fn unlock_force(ctx: &Context, o: &Opened, paths: Vec<String>) -> Result<Vec<m::LockInfo>> {
    let mut c = connect(&o.meta.server, false, ctx)?;
    let mut held: Vec<m::LockInfo> = Vec::new();
    let mut none = Vec::new();
    for p in &paths {
        let mut found = false;
        let mut after = String::new();
        loop {
            let page = c.lock_list(m::LockList {
                repo: o.meta.repository_name.clone(),
                prefix: p.clone(),
                after: after.clone(),
                limit: m::MAX_PAGE_ITEMS,
            })?;
            for l in page.locks {
                if p.is_empty() || scribe_format::path::is_under_prefix(&l.path, p) {
                    found = true;
                    if !held.iter().any(|h| h.path == l.path) {
                        held.push(l);
                    }
                }
            }
            match page.next {
                Some(n) => after = n,
                None => break,
            }
        }
        if !found {
            none.push(p.clone());
        }
    }
    if !none.is_empty() {
        return Err(not_locked(none));
    }
    let mut by_ws: std::collections::BTreeMap<[u8; 16], Vec<String>> = Default::default();
    for l in &held {
        by_ws.entry(l.workspace.0).or_default().push(l.path.clone());
    }
    let mut released = Vec::new();
    for (ws, paths) in by_ws {
        for chunk in paths.chunks(m::MAX_PAGE_ITEMS as usize) {
            let got = c.lock_release(m::LockRelease {
                repo: o.meta.repository_name.clone(),
                workspace: scribe_format::WorkspaceId(ws),
                paths: chunk.to_vec(),
            })?;
            released.extend(got);
        }
    }
    let tx = o.ws.write()?;
    for l in &released {
        if l.workspace == o.meta.workspace_id {
            tx.remove_local_lock(&l.path)?;
        }
    }
    tx.commit()?;
    Ok(released)
}

//! Server-enforced file locks: take, release, list.

use scribe_format::wire::message as m;

use crate::error::Result;
use crate::link::connect;
use crate::workflow::Opened;
use crate::Context;

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

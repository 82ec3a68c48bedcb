//! `scribe lock|unlock|locks`: server-enforced file locks.

use scribe_format::wire::message as m;

use crate::ctx::{self, Ctx};
use crate::error::{CliError, CliResult};
use crate::out::{utc, Json};
use crate::remote::connect;

pub fn lock(ctx: &Ctx, args: Vec<String>) -> CliResult {
    let o = ctx::open(ctx)?;
    let paths = ctx::paths(ctx, &o.ws, &args)?;
    if paths.iter().any(|p| p.is_empty()) {
        return Err(CliError::new(
            "usage",
            "name files to lock, not the workspace root",
        ));
    }
    let mut c = connect(&o.meta.server, false)?;
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
    for l in &locks {
        println!("locked {}", l.path);
    }
    Ok(())
}

pub fn unlock(ctx: &Ctx, args: Vec<String>) -> CliResult {
    let o = ctx::open(ctx)?;
    let paths = ctx::paths(ctx, &o.ws, &args)?;
    let mut c = connect(&o.meta.server, false)?;
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
    for l in &released {
        println!("unlocked {}", l.path);
    }
    Ok(())
}

pub fn locks(ctx: &Ctx) -> CliResult {
    let o = ctx::open(ctx)?;
    let mut c = connect(&o.meta.server, false)?;
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
    if ctx.out.json {
        println!(
            "{}",
            Json::Arr(
                all.iter()
                    .map(|l| Json::obj(vec![
                        ("path", Json::str(&l.path)),
                        ("owner", Json::str(&l.author)),
                        ("workspace", Json::str(l.workspace.to_hex())),
                        ("mine", Json::Bool(l.workspace == o.meta.workspace_id)),
                        ("acquired_ms", Json::Num(l.acquired_ms)),
                        ("generation", Json::Num(l.generation)),
                    ]))
                    .collect()
            )
        );
        return Ok(());
    }
    if all.is_empty() {
        println!("No locks");
    }
    for l in &all {
        println!(
            "{}  {}  workspace {}{}  {}",
            l.path,
            l.author,
            &l.workspace.to_hex()[..12],
            if l.workspace == o.meta.workspace_id {
                " (this one)"
            } else {
                ""
            },
            utc(l.acquired_ms)
        );
    }
    Ok(())
}

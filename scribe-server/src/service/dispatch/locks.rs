//! LockAcquire, LockRelease, LockList.

use scribe_format::echo::echo;
use scribe_format::wire::message::{self as m, MAX_PAGE_ITEMS};
use scribe_format::ErrorCode;
use scribe_metadata::records::LockRecord;

use super::{branch_of, open, page_limit, page_next, DispatchResult, Failure, Service};

fn check_paths(paths: &[String]) -> DispatchResult<()> {
    if paths.len() > MAX_PAGE_ITEMS as usize {
        return Err(Failure::new(
            ErrorCode::LimitExceeded,
            format!("{} paths exceed {MAX_PAGE_ITEMS} per request", paths.len()),
        ));
    }
    Ok(())
}

pub(super) fn acquire(svc: &Service, r: m::LockAcquire) -> DispatchResult<m::LocksReply> {
    let (repo, _) = open(svc, &r.repo)?;
    let branch = branch_of(&repo, r.branch);
    check_paths(&r.paths)?;
    // As for pins and submits: only a registered workspace holds locks
    // (a lock names its workspace to everyone who lists it).
    // (A retired one is refused as retired by `lock`, with its way out.)
    if repo.workspace(r.workspace)?.is_none() && !repo.is_retired(r.workspace)? {
        return Err(Failure::new(
            ErrorCode::WorkspaceUnregistered,
            format!(
                "workspace {} is not registered in {}; register it before locking",
                r.workspace,
                echo(&r.repo)
            ),
        ));
    }
    let locks = repo.lock(&r.paths, r.workspace, branch, &r.author)?;
    Ok(m::LocksReply {
        locks: locks
            .into_iter()
            .map(|l| lock_info(l.path, &l.record))
            .collect(),
    })
}

/// Release the paths `r.workspace` holds; the reply names the locks released.
pub(super) fn release(svc: &Service, r: m::LockRelease) -> DispatchResult<m::LocksReply> {
    let (repo, _) = open(svc, &r.repo)?;
    check_paths(&r.paths)?;
    let mut held = Vec::new();
    for p in &r.paths {
        if let Some(l) = repo.locks(p)?.into_iter().find(|l| &l.path == p) {
            if l.record.workspace == r.workspace {
                held.push(lock_info(l.path, &l.record));
            }
        }
    }
    repo.unlock(&r.paths, r.workspace)?;
    Ok(m::LocksReply { locks: held })
}

pub(super) fn list(svc: &Service, r: m::LockList) -> DispatchResult<m::LockListPage> {
    let (repo, _) = open(svc, &r.repo)?;
    let limit = page_limit(r.limit);
    let mut locks: Vec<m::LockInfo> = repo
        .locks(&r.prefix)?
        .into_iter()
        .filter(|l| r.after.is_empty() || l.path > r.after)
        .take(limit + 1)
        .map(|l| lock_info(l.path, &l.record))
        .collect();
    let next = page_next(&mut locks, limit, |l| l.path.clone());
    Ok(m::LockListPage { locks, next })
}

fn lock_info(path: String, r: &LockRecord) -> m::LockInfo {
    m::LockInfo {
        path,
        generation: r.generation,
        workspace: r.workspace,
        branch: r.branch,
        author: r.author.clone(),
        acquired_ms: r.acquired_ms,
    }
}

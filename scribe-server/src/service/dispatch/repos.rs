//! Status, RepoCreate, RepoList.

use scribe_format::wire::message as m;
use scribe_format::{ErrorCode, RepositoryId};

use super::{DispatchResult, Failure, Service};

pub(super) fn status(svc: &Service) -> DispatchResult<m::StatusReply> {
    Ok(m::StatusReply {
        server_version: env!("CARGO_PKG_VERSION").to_string(),
        schema: scribe_format::wire::handshake::SCHEMA.to_string(),
        uptime_ms: svc.uptime_ms(),
        repositories: svc.root().list_repositories()?.len() as u32,
        connections: svc.connections(),
    })
}

fn repo_info(svc: &Service, id: RepositoryId) -> DispatchResult<m::RepoInfo> {
    let info = svc
        .root()
        .list_repositories()?
        .into_iter()
        .find(|i| i.id == id)
        .ok_or_else(|| Failure::new(ErrorCode::NotFound, format!("no repository {id}")))?;
    let repo = svc.root().open_repository(id)?;
    Ok(m::RepoInfo {
        id,
        name: info.name,
        main_branch: info.main_branch,
        incarnation: repo.incarnation(),
        head: repo.head()?,
        created_ms: info.created_ms,
    })
}

/// Create a repository and its object store. Not authorized: callers are
/// [`dispatch`](super::dispatch) (after [`Service::handle`] authorized the
/// request) and local administration (`scribe-server repo create`).
pub fn repo_create(svc: &Service, name: &str) -> DispatchResult<m::RepoInfo> {
    repo_create_with(svc, name, false)
}

/// [`repo_create`], giving back a name another repository had before a
/// rename when `reuse_name` (`scribe-server repo create --reuse-name`).
pub fn repo_create_with(
    svc: &Service,
    name: &str,
    reuse_name: bool,
) -> DispatchResult<m::RepoInfo> {
    let id = svc.root().create_repository_with(name, reuse_name)?;
    // Opening creates the object store (see `stores`).
    svc.root().open_repository(id)?;
    repo_info(svc, id)
}

pub(super) fn repo_list(svc: &Service) -> DispatchResult<m::RepoList> {
    let mut repositories = Vec::new();
    for info in svc.root().list_repositories()? {
        let repo = svc.root().open_repository(info.id)?;
        repositories.push(m::RepoInfo {
            id: info.id,
            name: info.name,
            main_branch: info.main_branch,
            incarnation: repo.incarnation(),
            head: repo.head()?,
            created_ms: info.created_ms,
        });
    }
    Ok(m::RepoList { repositories })
}

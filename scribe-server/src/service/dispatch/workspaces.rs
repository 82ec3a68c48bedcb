//! WorkspaceRegister, WorkspaceRetire, WorkspaceList.

use scribe_format::echo::echo;
use scribe_format::wire::message as m;
use scribe_format::{ErrorCode, OperationId, WorkspaceId};
use scribe_metadata::records::WorkspaceRecord;
use scribe_metadata::workspaces::{Registration, RetireOutcome};
use scribe_metadata::Repository;

use super::{open, DispatchResult, Failure, Service};

fn workspace_info(
    repo: &Repository,
    workspace: WorkspaceId,
    rec: &WorkspaceRecord,
) -> DispatchResult<m::WorkspaceInfo> {
    Ok(m::WorkspaceInfo {
        workspace,
        branch: rec.branch,
        branch_name: if rec.branch == repo.main_branch() {
            "main".to_string()
        } else {
            String::new()
        },
        view: rec.view.clone(),
        label: rec.label.clone(),
        tags: rec.tags.clone(),
        created_ms: rec.created_ms,
        retired: false,
        repository: repo.id(),
        incarnation: repo.incarnation(),
        head: repo.branch_head(rec.branch)?,
    })
}

/// Register a workspace owned by `owner` (the session principal's id).
pub(super) fn register(
    svc: &Service,
    r: m::WorkspaceRegister,
    owner: Option<[u8; 16]>,
) -> DispatchResult<m::WorkspaceInfo> {
    let (repo, _) = open(svc, &r.repo)?;
    // INTERIM: scribe-metadata has no branch-by-name lookup yet; only the
    // main branch is addressable by name.
    let branch = match r.branch.as_str() {
        "" | "main" => repo.main_branch(),
        other => {
            return Err(Failure::new(
                ErrorCode::NotFound,
                format!("no branch {} (only the main branch is served)", echo(other)),
            ))
        }
    };
    let rec = repo.register_workspace(&Registration {
        workspace: r.workspace,
        owner,
        branch,
        view: r.view,
        label: r.label,
        tags: r.tags,
    })?;
    workspace_info(&repo, r.workspace, &rec)
}

/// The operation id of a retirement: the wire message carries none, and a
/// retirement's fingerprint is its workspace, so one id per workspace makes
/// a retry return the recorded outcome.
fn retire_operation(workspace: WorkspaceId) -> OperationId {
    let h = blake3::derive_key("scribe-server workspace retirement v1", &workspace.0);
    let mut op = [0u8; 16];
    op.copy_from_slice(&h[..16]);
    OperationId(op)
}

pub(super) fn retire(svc: &Service, r: m::WorkspaceRetire) -> DispatchResult<m::Ack> {
    let (repo, _) = open(svc, &r.repo)?;
    match repo.retire_workspace(r.workspace, retire_operation(r.workspace))? {
        RetireOutcome::Retired { .. } => Ok(m::Ack {}),
        RetireOutcome::Refused { code, detail } => Err(Failure::new(code, detail)),
    }
}

pub(super) fn list(svc: &Service, name: &str) -> DispatchResult<m::WorkspaceList> {
    let (repo, _) = open(svc, name)?;
    let mut workspaces = Vec::new();
    for (id, rec) in repo.workspaces()? {
        workspaces.push(workspace_info(&repo, id, &rec)?);
    }
    Ok(m::WorkspaceList { workspaces })
}

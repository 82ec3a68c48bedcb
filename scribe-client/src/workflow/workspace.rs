//! Workspaces: create (register with the server, then sync the branch head
//! into a new directory), list and retire.

use std::path::{Path, PathBuf};

use scribe_format::wire::message as m;
use scribe_format::{ErrorCode, WorkspaceId};
use scribe_workspace::records::normalize_view;
use scribe_workspace::{Workspace, WorkspaceMeta};

use super::sync::{run_sync, Synced};
use crate::error::{Error, Result};
use crate::link::{connect, ServerLink};
use crate::progress::Note;
use crate::url::ServerUrl;
use crate::workflow::Opened;
use crate::Context;

/// What a new workspace is.
#[derive(Clone, Debug, Default)]
pub struct CreateArgs {
    /// The directory (absolute, or relative to the process's directory).
    pub dir: PathBuf,
    pub server: String,
    pub repo: String,
    pub branch: Option<String>,
    /// Hold only these path prefixes.
    pub view: Vec<String>,
    pub label: Option<String>,
    /// Synced files are read-only until opened.
    pub readonly: bool,
    /// The author recorded on submissions and locks.
    pub author: String,
}

/// What creating a workspace did.
#[derive(Debug)]
pub struct Created {
    pub root: PathBuf,
    pub workspace: WorkspaceId,
    pub synced: Synced,
}

/// Register a workspace and sync the branch head into `a.dir`.
pub fn create(ctx: &Context, a: CreateArgs) -> Result<Created> {
    let dir = std::path::absolute(&a.dir)?;
    if exists(&dir) {
        return Err(Error::new(
            ErrorCode::AlreadyExists,
            format!("{} is already a Scribe workspace", dir.display()),
        ));
    }
    let url = ServerUrl::absolute(&a.server)?;
    let view = normalize_view(
        &a.view
            .iter()
            .map(|v| v.trim_end_matches('/').to_string())
            .collect::<Vec<_>>(),
    )?;
    let workspace_id = WorkspaceId::random();
    let info = {
        let mut client = connect(&url, false, ctx)?;
        let repos = client.repo_list()?;
        let repo = repos.iter().find(|r| r.name == a.repo).ok_or_else(|| {
            Error::new(
                ErrorCode::NotFound,
                format!("no repository named {:?}", a.repo),
            )
        })?;
        let ws = client.workspace_register(m::WorkspaceRegister {
            repo: a.repo.clone(),
            workspace: workspace_id,
            branch: a.branch.clone().unwrap_or_default(),
            view: view.clone(),
            label: a.label.clone().unwrap_or_default(),
            tags: Vec::new(),
        })?;
        (repo.id, ws)
    };
    std::fs::create_dir_all(&dir)?;
    let meta = WorkspaceMeta {
        workspace_id,
        repository_id: info.0,
        branch_id: info.1.branch,
        incarnation: info.1.incarnation,
        repository_name: a.repo.clone(),
        server: url,
        author: a.author.clone(),
        view,
        tags: Vec::new(),
        readonly: a.readonly,
        transfer_compression: false,
        synced: 0,
    };
    let ws = Workspace::create(&dir, &meta)?;
    let o = Opened { ws, meta };
    ctx.progress.note(Note::WorkspaceCreated {
        workspace: workspace_id,
        repository: a.repo.clone(),
        root: dir.clone(),
    });
    let link = ServerLink::new(&o.ws, &o.meta.server, &o.meta.repository_name, ctx)?;
    let synced = run_sync(&o, &link, 0)?;
    Ok(Created {
        root: dir,
        workspace: workspace_id,
        synced,
    })
}

/// The workspaces of `repo` on the server at `server`.
pub fn list(ctx: &Context, server: &str, repo: &str) -> Result<Vec<m::WorkspaceInfo>> {
    let mut client = connect(server, false, ctx)?;
    Ok(client.workspace_list(repo)?)
}

/// Retire workspace `id` (default: `o` itself) on the server. Refused for
/// `o` itself while it has opened files.
pub fn retire(ctx: &Context, o: &Opened, id: Option<WorkspaceId>) -> Result<WorkspaceId> {
    let id = id.unwrap_or(o.meta.workspace_id);
    if id == o.meta.workspace_id && !o.ws.read()?.opened_all()?.is_empty() {
        return Err(Error::new(
            ErrorCode::Refused,
            "this workspace has opened files; retiring it would strand them",
        ));
    }
    let mut client = connect(&o.meta.server, false, ctx)?;
    client.workspace_retire(&o.meta.repository_name, id)?;
    Ok(id)
}

/// Whether `dir` is a workspace root.
pub fn exists(dir: &Path) -> bool {
    dir.join(".scribe/_state/SCRIBE_FORMAT").exists()
}

//! `scribe workspace create|list|retire`.

use std::path::Path;

use scribe_format::wire::message as m;
use scribe_format::WorkspaceId;
use scribe_workspace::records::normalize_view;
use scribe_workspace::{Workspace, WorkspaceMeta};

use crate::cmd::sync::{print_synced, run_sync};
use crate::ctx::{self, author, Ctx, Open};
use crate::error::{CliError, CliResult};
use crate::out::{utc, Json};
use crate::remote::{absolute_url, connect, Remote};

pub struct CreateArgs {
    pub dir: std::path::PathBuf,
    pub server: String,
    pub repo: String,
    pub branch: Option<String>,
    pub view: Vec<String>,
    pub label: Option<String>,
    pub readonly: bool,
    /// The author recorded on submissions and locks (default: $SCRIBE_AUTHOR, $USER).
    pub author: Option<String>,
}

/// Register a workspace and sync the branch head into `dir`.
pub fn create(ctx: &Ctx, a: CreateArgs) -> CliResult<std::path::PathBuf> {
    let dir = std::path::absolute(ctx.cwd.join(&a.dir))?;
    if dir.join(".scribe/_state/SCRIBE_FORMAT").exists() {
        return Err(CliError::new(
            "already_exists",
            format!("{} is already a Scribe workspace", dir.display()),
        )
        .hint("run `scribe sync` inside it, or choose another directory"));
    }
    let url = absolute_url(&a.server)?;
    let view = normalize_view(
        &a.view
            .iter()
            .map(|v| v.trim_end_matches('/').to_string())
            .collect::<Vec<_>>(),
    )?;
    let workspace_id = WorkspaceId::random();
    let info = {
        let mut client = connect(&url, false)?;
        let repos = client.repo_list()?;
        let repo = repos.iter().find(|r| r.name == a.repo).ok_or_else(|| {
            CliError::new("not_found", format!("no repository named {:?}", a.repo))
                .hint("`scribe repo list --server URL` lists them; `scribe repo create` makes one")
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
        author: a.author.clone().unwrap_or_else(author),
        view,
        tags: Vec::new(),
        readonly: a.readonly,
        transfer_compression: false,
        synced: 0,
    };
    let ws = Workspace::create(&dir, &meta)?;
    let o = Open { ws, meta };
    ctx.out.status(format!(
        "created workspace {} for {} at {}",
        workspace_id.to_hex(),
        a.repo,
        dir.display()
    ));
    let remote = Remote::new(&o.ws, &o.meta.server, &o.meta.repository_name)?;
    let s = run_sync(ctx, &o, &remote, 0)?;
    let quiet_ctx = Ctx {
        out: crate::out::Out {
            quiet: ctx.out.quiet,
            json: false,
        },
        cwd: ctx.cwd.clone(),
    };
    if s.report.written.len() <= 20 {
        print_synced(&quiet_ctx, &s);
    } else {
        quiet_ctx.out.status(format!(
            "synced to change {}: {} files ({}) in {:.2} s, {:.0} MiB/s",
            s.change,
            s.report.written.len(),
            crate::out::size(s.report.bytes_written),
            s.secs,
            s.report.bytes_written as f64 / 1_048_576.0 / s.secs.max(1e-6)
        ));
    }
    Ok(dir)
}

fn server_and_repo(
    ctx: &Ctx,
    server: Option<String>,
    repo: Option<String>,
) -> CliResult<(String, String, Option<WorkspaceId>)> {
    match (server, repo) {
        (Some(s), Some(r)) => Ok((s, r, None)),
        (s, r) => {
            let o = ctx::open(ctx).map_err(|e| {
                if e.code == "not_a_workspace" {
                    CliError::new(
                        "usage",
                        "outside a workspace, --server and --repo are needed",
                    )
                    .hint("scribe workspace list --server URL --repo NAME")
                } else {
                    e
                }
            })?;
            Ok((
                s.unwrap_or(o.meta.server.clone()),
                r.unwrap_or(o.meta.repository_name.clone()),
                Some(o.meta.workspace_id),
            ))
        }
    }
}

pub fn list(ctx: &Ctx, server: Option<String>, repo: Option<String>) -> CliResult {
    let (server, repo, current) = server_and_repo(ctx, server, repo)?;
    let mut client = connect(&server, false)?;
    let list = client.workspace_list(&repo)?;
    if ctx.out.json {
        println!(
            "{}",
            Json::Arr(
                list.iter()
                    .map(|w| Json::obj(vec![
                        ("workspace", Json::str(w.workspace.to_hex())),
                        ("label", Json::str(&w.label)),
                        ("branch", Json::str(&w.branch_name)),
                        ("view", Json::Arr(w.view.iter().map(Json::str).collect())),
                        ("created_ms", Json::Num(w.created_ms)),
                        ("retired", Json::Bool(w.retired)),
                        ("current", Json::Bool(Some(w.workspace) == current)),
                    ]))
                    .collect()
            )
        );
        return Ok(());
    }
    for w in &list {
        println!(
            "{} {}  {:<12} {}  {}{}",
            if Some(w.workspace) == current {
                "*"
            } else {
                " "
            },
            w.workspace.to_hex(),
            if w.label.is_empty() { "-" } else { &w.label },
            utc(w.created_ms),
            if w.view.is_empty() {
                "(all)".to_string()
            } else {
                w.view.join(",")
            },
            if w.retired { "  retired" } else { "" }
        );
    }
    Ok(())
}

pub fn retire(ctx: &Ctx, workspace: Option<String>) -> CliResult {
    let o = ctx::open(ctx)?;
    let id = match workspace {
        Some(h) => WorkspaceId::from_hex(&h)?,
        None => o.meta.workspace_id,
    };
    if id == o.meta.workspace_id && !o.ws.read()?.opened_all()?.is_empty() {
        return Err(CliError::new(
            "refused",
            "this workspace has opened files; retiring it would strand them",
        )
        .hint("submit or revert them first"));
    }
    let mut client = connect(&o.meta.server, false)?;
    client.workspace_retire(&o.meta.repository_name, id)?;
    ctx.out.status(format!(
        "retired workspace {} (its files stay on disk)",
        id.to_hex()
    ));
    Ok(())
}

#[allow(dead_code)]
pub fn exists(dir: &Path) -> bool {
    dir.join(".scribe/_state/SCRIBE_FORMAT").exists()
}

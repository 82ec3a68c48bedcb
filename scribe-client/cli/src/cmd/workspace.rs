//! `scribe workspace create|list|retire`.

use scribe_client::workflow::workspace::{self, CreateArgs, Created};
use scribe_format::{ErrorCode, WorkspaceId};

use crate::ctx::{self, Ctx};
use crate::error::{CliError, CliResult};
use crate::ui::{size, utc, Json, Out};

/// Register a workspace and sync the branch head into `a.dir` (relative
/// to the command's directory).
pub fn create(ctx: &Ctx, mut a: CreateArgs) -> CliResult<Created> {
    a.dir = ctx.cwd.join(&a.dir);
    if a.author.is_empty() {
        a.author = ctx::author();
    }
    let c = workspace::create(&ctx.lib, a).map_err(|e| {
        let code = e.code();
        let err = CliError::from(e);
        match code {
            ErrorCode::AlreadyExists => {
                err.hint("run `scribe sync` inside it, or choose another directory")
            }
            ErrorCode::NotFound => err
                .hint("`scribe repo list --server URL` lists them; `scribe repo create` makes one"),
            _ => err,
        }
    })?;
    let text = ctx.with_out(Out {
        json: false,
        ..ctx.out
    });
    let s = &c.synced;
    if s.report.written.len() <= 20 {
        super::sync::print_synced(&text, s)?;
    } else {
        text.out.status(format!(
            "synced to change {}: {} files ({}) in {:.2} s, {:.0} MiB/s",
            s.change,
            s.report.written.len(),
            size(s.report.bytes_written),
            s.secs,
            s.report.bytes_written as f64 / 1_048_576.0 / s.secs.max(1e-6)
        ));
    }
    Ok(c)
}

pub fn list(ctx: &Ctx, server: Option<String>, repo: Option<String>) -> CliResult {
    let (server, repo, current) = match (server, repo) {
        (Some(s), Some(r)) => (s, r, None),
        (s, r) => {
            let o = ctx::open(ctx).map_err(|e| {
                if e.code == ErrorCode::NotAWorkspace {
                    CliError::new(
                        ErrorCode::Usage,
                        "outside a workspace, --server and --repo are needed",
                    )
                    .hint("scribe workspace list --server URL --repo NAME")
                } else {
                    e
                }
            })?;
            (
                s.unwrap_or(o.meta.server.clone()),
                r.unwrap_or(o.meta.repository_name.clone()),
                Some(o.meta.workspace_id),
            )
        }
    };
    let list = workspace::list(&ctx.lib, &server, &repo)?;
    if ctx.out.json {
        return ctx.out.json(&Json::Arr(
            list.iter()
                .map(|w| {
                    Json::obj(vec![
                        ("workspace", Json::str(w.workspace.to_hex())),
                        ("label", Json::str(&w.label)),
                        ("branch", Json::str(&w.branch_name)),
                        ("view", Json::Arr(w.view.iter().map(Json::str).collect())),
                        ("created_ms", Json::Num(w.created_ms)),
                        ("retired", Json::Bool(w.retired)),
                        ("current", Json::Bool(Some(w.workspace) == current)),
                    ])
                })
                .collect(),
        ));
    }
    for w in &list {
        ctx.out.line(format_args!(
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
        ))?;
    }
    Ok(())
}

pub fn retire(ctx: &Ctx, workspace: Option<String>) -> CliResult {
    let o = ctx::open(ctx)?;
    let id = workspace.map(|h| WorkspaceId::from_hex(&h)).transpose()?;
    let id = workspace::retire(&ctx.lib, &o, id).map_err(|e| {
        let refused = e.code() == ErrorCode::Refused;
        let err = CliError::from(e);
        if refused {
            err.hint("submit or revert them first")
        } else {
            err
        }
    })?;
    ctx.out.status(format!(
        "retired workspace {} (its files stay on disk)",
        id.to_hex()
    ));
    Ok(())
}

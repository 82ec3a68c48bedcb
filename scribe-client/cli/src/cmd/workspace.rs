//! `scribe workspace create|list|retire`.

use scribe_client::workflow::workspace::{self, CreateArgs, Created};
use scribe_format::{ErrorCode, WorkspaceId};

use crate::ctx::{self, Ctx};
use crate::error::{CliError, CliResult};
use crate::ui::{size, utc, Json, Out};

/// Register a workspace and sync the branch head into `a.dir` (relative
/// to the command's directory).
pub fn create(ctx: &Ctx, mut a: CreateArgs) -> CliResult<Created> {
    check_url(&a.server)?;
    a.dir = ctx.cwd.join(&a.dir);
    if a.author.is_empty() {
        a.author = ctx::author();
    }
    let c = workspace::create(&ctx.lib, a).map_err(|e| {
        let code = e.code();
        let err = CliError::from(e);
        match code {
            ErrorCode::AlreadyExists => err.hint(
                "run `scribe sync` inside it, or choose another directory (a retired \
                 workspace: `scribe workspace recreate` inside it makes a new one in place)",
            ),
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
    check_url(&server)?;
    let list = workspace::list(&ctx.lib, &server, &repo)?;
    let last = workspace::last_submits(&ctx.lib, &server, &repo)?;
    // Last use: the newest of its last sync (`used=` tag, refreshed at
    // most hourly) and its last submit among the newest changes.
    let last_use = |w: &scribe_format::wire::message::WorkspaceInfo| {
        let submit = last.get(&w.workspace).map(|(_, t)| *t);
        workspace::used_of(&w.tags).max(submit)
    };
    if ctx.out.json {
        return ctx.out.json(&Json::Arr(
            list.iter()
                .map(|w| {
                    let (owner, host, root) = workspace::identity_of(&w.tags);
                    let opt = |v: Option<String>| v.map_or(Json::Null, Json::str);
                    let l = last.get(&w.workspace);
                    Json::obj(vec![
                        ("workspace", Json::str(w.workspace.to_hex())),
                        ("label", Json::str(&w.label)),
                        ("owner", opt(owner)),
                        ("host", opt(host)),
                        ("root", opt(root)),
                        ("branch", Json::str(&w.branch_name)),
                        ("view", Json::Arr(w.view.iter().map(Json::str).collect())),
                        ("created_ms", Json::Num(w.created_ms)),
                        ("last_submit", l.map_or(Json::Null, |(c, _)| Json::Num(*c))),
                        (
                            "last_submit_ms",
                            l.map_or(Json::Null, |(_, t)| Json::Num(*t)),
                        ),
                        (
                            "last_sync_ms",
                            workspace::used_of(&w.tags).map_or(Json::Null, Json::Num),
                        ),
                        ("last_use_ms", last_use(w).map_or(Json::Null, Json::Num)),
                        ("retired", Json::Bool(w.retired)),
                        ("current", Json::Bool(Some(w.workspace) == current)),
                    ])
                })
                .collect(),
        ));
    }
    for w in &list {
        let (owner, host, root) = workspace::identity_of(&w.tags);
        let submit = match last.get(&w.workspace) {
            Some((c, t)) => format!("last submit change {c} at {}", utc(*t)),
            None => "no recent submit".to_string(),
        };
        let last = match last_use(w) {
            Some(t) => format!("last use {}  ({submit})", utc(t)),
            None => format!("no use recorded  ({submit})"),
        };
        ctx.out.line(format_args!(
            "{} {}  {}  {}@{}  {}\n      view {}  created {}  {last}{}",
            if Some(w.workspace) == current {
                "*"
            } else {
                " "
            },
            w.workspace.to_hex(),
            if w.label.is_empty() { "-" } else { &w.label },
            owner.as_deref().unwrap_or("?"),
            host.as_deref().unwrap_or("?"),
            root.as_deref().unwrap_or("?"),
            if w.view.is_empty() {
                "(all)".to_string()
            } else {
                w.view.join(",")
            },
            utc(w.created_ms),
            if w.retired { "  retired" } else { "" }
        ))?;
    }
    Ok(())
}

pub fn retire(ctx: &Ctx, workspace: Option<String>) -> CliResult {
    let o = ctx::open(ctx)?;
    let id = workspace.map(|h| WorkspaceId::from_hex(&h)).transpose()?;
    let id = workspace::retire(&ctx.lib, &o, id).map_err(|e| {
        let code = e.code();
        let err = CliError::from(e);
        match code {
            ErrorCode::Refused => err.hint("submit or revert them first"),
            // The server's `busy` here means the workspace holds locks.
            ErrorCode::Busy => err.hint(
                "`scribe locks` lists them: release them with `scribe unlock PATH` in that \
                 workspace, or break them with `scribe unlock --force PATH` (maintainers and \
                 administrators), then retire again",
            ),
            _ => err,
        }
    })?;
    ctx.out.status(format!(
        "retired workspace {} (its files stay on disk)",
        id.to_hex()
    ));
    Ok(())
}

/// After a `workspace_retired` answer: remember it in the workspace of the
/// current directory (best effort), so `edit` and `add` refuse at once and
/// `info` says so.
pub fn note_retired() {
    let Ok(cwd) = std::env::current_dir() else {
        return;
    };
    if let Ok(o) = scribe_client::workflow::Opened::find(&cwd) {
        let _ = workspace::mark_retired(&o);
    }
}

pub fn prune_cache(ctx: &Ctx) -> CliResult {
    let o = ctx::open(ctx)?;
    let p = workspace::prune_cache(&ctx.lib, &o)?;
    print_pruned(ctx, &p)
}

/// One line (or JSON) for a cache prune.
pub fn print_pruned(ctx: &Ctx, p: &scribe_workspace::state::CachePruned) -> CliResult {
    if ctx.out.json {
        return ctx.out.json(&crate::ui::Json::obj(vec![
            ("retained", crate::ui::Json::Num(p.retained)),
            ("dropped", crate::ui::Json::Num(p.dropped)),
            ("bytes_before", crate::ui::Json::Num(p.bytes_before)),
            ("bytes_after", crate::ui::Json::Num(p.bytes_after)),
        ]));
    }
    ctx.out.status(pruned_line(p));
    Ok(())
}

/// The status line of a cache prune.
pub fn pruned_line(p: &scribe_workspace::state::CachePruned) -> String {
    format!(
        "workspace cache: {} -> {} ({} object(s) the server holds dropped, {} kept)",
        crate::ui::size(p.bytes_before),
        crate::ui::size(p.bytes_after),
        p.dropped,
        p.retained
    )
}

pub fn set_server(ctx: &Ctx, url: String) -> CliResult {
    check_url(&url)?;
    let o = ctx::open(ctx)?;
    let old = o.meta.server.clone();
    let old_name = o.meta.repository_name.clone();
    let (new, name) = workspace::set_server(&ctx.lib, &o, &url)?;
    ctx.out
        .status(format!("server of this workspace: {old} -> {new}"));
    if name != old_name {
        ctx.out.status(format!(
            "repository of this workspace: {} -> {} (renamed on the server; same repository)",
            scribe_format::echo::echo(&old_name),
            scribe_format::echo::echo(&name)
        ));
    }
    Ok(())
}

/// A `--server` that looks like HOST:PORT without a scheme (#18 item 12):
/// without this it would be taken as a data-root path.
pub fn check_url(url: &str) -> CliResult {
    if let Some(host_port) = bare_host_port(url) {
        return Err(CliError::new(
            ErrorCode::Usage,
            format!("{} has no scheme", scribe_format::echo::echo(url)),
        )
        .hint(format!(
            "a server on the network is scribe://{host_port} (TLS: scribes://{host_port}); a \
             data root in a directory of that name is ./{url}"
        )));
    }
    Ok(())
}

fn bare_host_port(url: &str) -> Option<&str> {
    if url.contains("://")
        || url.contains('/')
        || url.contains('\\')
        || std::path::Path::new(url).exists()
    {
        return None;
    }
    let (host, port) = url.rsplit_once(':')?;
    (!host.is_empty() && !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()))
        .then_some(url)
}

pub fn recreate(ctx: &Ctx, branch: Option<String>) -> CliResult {
    let o = ctx::open(ctx).map_err(|e| {
        if e.code == ErrorCode::NotAWorkspace {
            // Re-creating needs the retired workspace: creating a new one
            // elsewhere is another command.
            e.hint(
                "run it in the retired workspace's directory (its root or below); a new \
                 workspace elsewhere is `scribe workspace create DIR --server URL --repo NAME`",
            )
        } else {
            e
        }
    })?;
    let r = workspace::recreate(&ctx.lib, o, branch)?;
    let text = ctx.with_out(Out {
        json: false,
        ..ctx.out
    });
    if ctx.out.json {
        return ctx.out.json(&Json::obj(vec![
            ("old", Json::str(r.old.to_hex())),
            ("workspace", Json::str(r.created.workspace.to_hex())),
            (
                "archived_state",
                Json::str(r.archived_state.display().to_string()),
            ),
            ("recovery_kept", Json::Num(r.recovery_kept as u64)),
            (
                "reopened",
                Json::Arr(
                    r.reopened
                        .iter()
                        .map(|(p, a)| {
                            Json::obj(vec![("path", Json::str(p)), ("action", Json::str(*a))])
                        })
                        .collect(),
                ),
            ),
            (
                "needs_resolve",
                Json::Arr(r.deferred.iter().map(Json::str).collect()),
            ),
        ]));
    }
    for (p, a) in &r.reopened {
        text.out.line(format_args!("{a:<7} {p}"))?;
    }
    text.out.status(format!(
        "re-created: workspace {} replaces retired {} (its state is kept in {}; {} recovery \
         file(s) carried over; {} file(s) opened again)",
        r.created.workspace.to_hex(),
        r.old.to_hex(),
        r.archived_state.display(),
        r.recovery_kept,
        r.reopened.len()
    ));
    if !r.deferred.is_empty() {
        text.out.status(format!(
            "{} file(s) differ from the server and were kept: `scribe status` lists them, \
             `scribe resolve PATH --ours` opens them for edit",
            r.deferred.len()
        ));
    }
    Ok(())
}

pub fn info(ctx: &Ctx) -> CliResult {
    let o = scribe_client::workflow::Opened::find_for_reading(&ctx.cwd)?;
    let a = workspace::about(&ctx.lib, &o)?;
    let m = &a.meta;
    let have = a.submitted.unwrap_or(m.synced).max(m.synced);
    if ctx.out.json {
        let (version, head, branch, registered, error) = match &a.server {
            Ok(s) => (
                Json::str(&s.version),
                Json::Num(s.head),
                Json::str(&s.branch),
                Json::Bool(s.registered),
                Json::Null,
            ),
            Err(e) => (Json::Null, Json::Null, Json::Null, Json::Null, Json::str(e)),
        };
        return ctx.out.json(&Json::obj(vec![
            ("user", Json::str(&m.author)),
            ("workspace", Json::str(m.workspace_id.to_hex())),
            ("root", Json::str(a.root.display().to_string())),
            ("repository", Json::str(&m.repository_name)),
            ("view", Json::Arr(m.view.iter().map(Json::str).collect())),
            ("branch", branch),
            ("synced", Json::Num(m.synced)),
            ("submitted", a.submitted.map_or(Json::Null, Json::Num)),
            ("change", Json::Num(have)),
            ("server", Json::str(&m.server)),
            ("server_version", version),
            ("head", head),
            ("registered", registered),
            ("retired", Json::Bool(a.retired_ms.is_some())),
            ("readonly", Json::Bool(m.readonly)),
            ("server_error", error),
        ]));
    }
    let line = |k: &str, v: String| ctx.out.line(format_args!("{k:<15} {v}"));
    line("User:", m.author.clone())?;
    line("Workspace:", m.workspace_id.to_hex())?;
    line("Root:", a.root.display().to_string())?;
    line("Repository:", m.repository_name.clone())?;
    line(
        "View:",
        if m.view.is_empty() {
            "(everything)".into()
        } else {
            m.view.join(", ")
        },
    )?;
    match &a.server {
        Ok(s) => line(
            "Branch:",
            if s.branch.is_empty() {
                "main".into()
            } else {
                s.branch.clone()
            },
        )?,
        Err(_) => line("Branch:", "(server unreachable)".into())?,
    }
    line(
        "Change:",
        match a.submitted {
            Some(p) => format!(
                "synced to {}; your submitted files are at change {p}",
                m.synced
            ),
            None => format!("{}", m.synced),
        },
    )?;
    line("Server URL:", m.server.clone())?;
    match &a.server {
        Ok(s) => {
            line("Server version:", s.version.clone())?;
            line("Head:", format!("change {}", s.head))?;
        }
        Err(e) => line("Server version:", format!("unknown: {e}"))?,
    }
    if m.readonly {
        line("Mode:", "read-only".into())?;
    }
    let gone = a.retired_ms.is_some() || matches!(&a.server, Ok(s) if !s.registered);
    if gone {
        line(
            "State:",
            "retired: `scribe workspace recreate` makes a new workspace here, keeping your edits"
                .into(),
        )?;
    }
    Ok(())
}

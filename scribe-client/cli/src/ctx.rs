//! What every command gets: output settings, the working directory, the
//! library's context (connection options, progress, failpoints), and the
//! helpers that turn arguments into workspace paths.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use scribe_client::workflow::Opened;
use scribe_client::{ClientOptions, Context, Failpoints};
use scribe_format::ErrorCode;
use scribe_workspace::open::{workspace_path, OpenReport};
use scribe_workspace::Workspace;

use crate::error::{CliError, CliResult};
use crate::ui::{Json, Out, TermProgress};

pub struct Ctx {
    pub out: Out,
    pub cwd: PathBuf,
    pub lib: Context,
}

impl Ctx {
    /// The context of this process: its environment is read here, once.
    pub fn from_env(out: Out) -> CliResult<Ctx> {
        // The stored login or SCRIBE_CREDENTIAL, the CA, the timeouts.
        let options = ClientOptions::from_env().map_err(|m| CliError::new(ErrorCode::Usage, m))?;
        let failpoints = if Failpoints::ENABLED {
            Failpoints::new(
                std::env::var("SCRIBE_TEST_CRASH_AT").ok(),
                std::env::var("SCRIBE_TEST_SLOW_MS")
                    .ok()
                    .and_then(|v| v.parse().ok()),
            )
        } else {
            Failpoints::default()
        };
        Ok(Ctx {
            out,
            cwd: std::env::current_dir()?,
            lib: Context {
                options,
                progress: Arc::new(TermProgress::new(out)),
                failpoints: Arc::new(failpoints),
            },
        })
    }

    /// The same context in another directory.
    pub fn in_dir(&self, dir: &Path) -> Ctx {
        Ctx {
            out: self.out,
            cwd: dir.to_path_buf(),
            lib: self.lib.clone(),
        }
    }

    /// The same context with other output settings.
    pub fn with_out(&self, out: Out) -> Ctx {
        Ctx {
            out,
            cwd: self.cwd.clone(),
            lib: self.lib.clone(),
        }
    }
}

/// A duration in seconds from the environment variable `name` (a positive
/// number, fractions allowed).
/// The workspace the command runs in.
pub fn open(ctx: &Ctx) -> CliResult<Opened> {
    Ok(Opened::find(&ctx.cwd)?)
}

/// [`open`] for a command that only reads the workspace (`status`, `log`,
/// `history`, `describe`, `locks`, `info`): `state.redb` opened read-only,
/// and a workspace on a read-only file system still opens (#18 item 14).
pub fn open_for_reading(ctx: &Ctx) -> CliResult<Opened> {
    Ok(Opened::find_for_reading(&ctx.cwd)?)
}

/// Canonical workspace paths of the user's arguments.
pub fn paths(ctx: &Ctx, ws: &Workspace, args: &[String]) -> CliResult<Vec<String>> {
    args.iter()
        .map(|a| {
            workspace_path(ws.root(), &ctx.cwd, a).map_err(|m| {
                CliError::new(ErrorCode::InvalidPath, m).hint("paths must be inside the workspace")
            })
        })
        .collect()
}

/// This machine's name (shown by `workspace list`; empty if unknown).
pub fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// The author recorded on submissions and locks.
pub fn author() -> String {
    std::env::var("SCRIBE_AUTHOR")
        .or_else(|_| std::env::var("USER"))
        .or_else(|_| std::env::var("USERNAME"))
        .unwrap_or_else(|_| "unknown".into())
}

/// What an open operation did, for `--json`: `opened` (path, action),
/// `moved` (source, destination, move id: files `reconcile` found moved
/// outside Scribe, whose halves are also in `opened`), `unpaired` (path,
/// detail), `unchanged` and `skipped` (path, code, detail).
fn report_json(r: &OpenReport) -> Json {
    Json::obj(vec![
        (
            "opened",
            Json::Arr(
                r.opened
                    .iter()
                    .map(|(p, a)| {
                        Json::obj(vec![
                            ("path", Json::str(p)),
                            ("action", Json::str(a.name())),
                        ])
                    })
                    .collect(),
            ),
        ),
        (
            "moved",
            Json::Arr(
                r.moved
                    .iter()
                    .map(|m| {
                        Json::obj(vec![
                            ("source", Json::str(&m.source)),
                            ("destination", Json::str(&m.destination)),
                            ("id", Json::str(m.operation.to_hex())),
                        ])
                    })
                    .collect(),
            ),
        ),
        (
            "unpaired",
            Json::Arr(
                r.unpaired
                    .iter()
                    .map(|u| {
                        Json::obj(vec![
                            ("path", Json::str(&u.path)),
                            ("detail", Json::str(&u.detail)),
                        ])
                    })
                    .collect(),
            ),
        ),
        (
            "unchanged",
            Json::Arr(r.unchanged.iter().map(Json::str).collect()),
        ),
        (
            "skipped",
            Json::Arr(
                r.skipped
                    .iter()
                    .map(|x| {
                        Json::obj(vec![
                            ("path", Json::str(&x.path)),
                            ("code", Json::str(x.code.name())),
                            ("detail", Json::str(&x.detail)),
                        ])
                    })
                    .collect(),
            ),
        ),
    ])
}

/// Print what an open operation did; refusals become the error. A file
/// `reconcile` found moved is one `move    OLD -> NEW` line (its two
/// halves are not listed apart); `--json` prints [`report_json`] (a
/// failure is the error object alone).
pub fn report(ctx: &Ctx, verb: &str, r: &OpenReport) -> CliResult {
    let json = ctx.out.json && verb != "revert";
    if json && r.refused.is_empty() {
        ctx.out.json(&report_json(r))?;
    }
    let halves: std::collections::HashSet<&str> = r
        .moved
        .iter()
        .flat_map(|m| [m.source.as_str(), m.destination.as_str()])
        .collect();
    if !json {
        let opened = r
            .opened
            .iter()
            .filter(|(p, _)| !halves.contains(p.as_str()))
            .map(|(p, a)| format!("{:<7} {p}", a.name()));
        let moved = r
            .moved
            .iter()
            .map(|m| format!("{:<7} {} -> {}", "move", m.source, m.destination));
        ctx.out.lines(opened.chain(moved))?;
    }
    for u in &r.unpaired {
        ctx.out.status(format!("{}: {}", u.path, u.detail));
    }
    if !r.unchanged.is_empty() {
        ctx.out.status(format!(
            "{} path(s) already open or tracked, unchanged",
            r.unchanged.len()
        ));
    }
    // Found by walking a directory and not versionable: each said once,
    // with its rule's code; not a failure of what was opened (#18 item 16).
    for x in &r.skipped {
        ctx.out
            .status(format!("not opened: {}: {}", x.path, x.detail));
    }
    if verb != "revert" {
        let skipped = if r.skipped.is_empty() {
            String::new()
        } else {
            format!(
                "; {} path(s) found cannot be versioned and were not opened \
                 (`scribe status` lists them under \"Cannot be versioned\")",
                r.skipped.len()
            )
        };
        let moved = if r.moved.is_empty() {
            String::new()
        } else {
            format!(
                ", including {} moved file(s) (a delete and an add each; `scribe status` \
                 lists the pending moves)",
                r.moved.len()
            )
        };
        ctx.out.status(format!(
            "{verb}: {} file(s) opened{moved}{skipped}",
            r.opened.len()
        ));
    }
    if let Some(first) = r.refused.first() {
        let mut paths: Vec<String> = r
            .refused
            .iter()
            // The workspace root is the empty path: name it.
            .map(|x| {
                let path = if x.path.is_empty() {
                    ". (the workspace root)"
                } else {
                    &x.path
                };
                format!("{path}: {}", x.detail)
            })
            .collect();
        paths.dedup();
        let mut err =
            CliError::new(first.code, format!("{} path(s) refused", r.refused.len())).paths(paths);
        if let Some(c) = &first.concern {
            return Err(err.concerning(c.clone()));
        }
        match first.code {
            ErrorCode::NotFound => {
                err =
                    err.hint("check the path, and `.scribeignore` / `.scribe/_state/ignore` rules")
            }
            ErrorCode::PathCollision => {
                err = err.hint("two paths may not differ only in case or normalization; rename one")
            }
            _ => {}
        }
        return Err(err);
    }
    Ok(())
}

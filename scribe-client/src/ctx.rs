//! What every command gets: output settings, the working directory, and
//! helpers to open the workspace it runs in.

use std::path::{Path, PathBuf};

use scribe_workspace::open::{workspace_path, OpenReport};
use scribe_workspace::{Workspace, WorkspaceMeta};

use crate::error::{CliError, CliResult};
use crate::out::Out;
use crate::remote::Remote;

pub struct Ctx {
    pub out: Out,
    pub cwd: PathBuf,
}

impl Ctx {
    pub fn with_json(&self, json: bool) -> Ctx {
        Ctx {
            out: Out {
                quiet: self.out.quiet,
                json,
            },
            cwd: self.cwd.clone(),
        }
    }

    pub fn in_dir(&self, dir: &Path) -> Ctx {
        Ctx {
            out: self.out.clone(),
            cwd: dir.to_path_buf(),
        }
    }
}

/// An open workspace with its binding.
pub struct Open {
    pub ws: Workspace,
    pub meta: WorkspaceMeta,
}

impl Open {
    pub fn remote(&self) -> CliResult<Remote> {
        Remote::new(&self.ws, &self.meta.server, &self.meta.repository_name)
    }
}

pub fn open(ctx: &Ctx) -> CliResult<Open> {
    let root = Workspace::find(&ctx.cwd)?;
    let ws = Workspace::open(&root)?;
    let meta = ws.meta()?;
    Ok(Open { ws, meta })
}

/// Canonical workspace paths of the user's arguments.
pub fn paths(ctx: &Ctx, ws: &Workspace, args: &[String]) -> CliResult<Vec<String>> {
    args.iter()
        .map(|a| {
            workspace_path(ws.root(), &ctx.cwd, a).map_err(|m| {
                CliError::new("invalid_path", m).hint("paths must be inside the workspace")
            })
        })
        .collect()
}

/// The author recorded on submissions and locks.
pub fn author() -> String {
    std::env::var("SCRIBE_AUTHOR")
        .or_else(|_| std::env::var("USER"))
        .or_else(|_| std::env::var("USERNAME"))
        .unwrap_or_else(|_| "unknown".into())
}

/// Print what an open operation did; refusals become the error.
pub fn report(ctx: &Ctx, verb: &str, r: &OpenReport) -> CliResult {
    for (p, a) in &r.opened {
        println!("{:<7} {p}", a.name());
    }
    if !r.unchanged.is_empty() {
        ctx.out.status(format!(
            "{} path(s) already open or tracked, unchanged",
            r.unchanged.len()
        ));
    }
    if verb != "revert" {
        ctx.out
            .status(format!("{verb}: {} file(s) opened", r.opened.len()));
    }
    if let Some(first) = r.refused.first() {
        let mut paths: Vec<String> = r
            .refused
            .iter()
            .map(|x| format!("{}: {}", x.path, x.detail))
            .collect();
        paths.dedup();
        let hint = match first.code {
            "path_collision" => {
                "two paths may not differ only in case or normalization; rename one"
            }
            "not_found" => "check the path, and `.scribeignore` / `.scribe/_state/ignore` rules",
            "not_present" => "the path is not tracked here; `scribe status` lists what is",
            _ => "`scribe debug path PATH` explains which rule a name breaks",
        };
        return Err(
            CliError::new(first.code, format!("{} path(s) refused", r.refused.len()))
                .paths(paths)
                .hint(hint),
        );
    }
    Ok(())
}

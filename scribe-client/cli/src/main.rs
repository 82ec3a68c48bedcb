//! The `scribe` binary: arguments ([`args`]), output ([`ui`]), errors and
//! exit statuses ([`error`]) over the `scribe-client` library.

use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use scribe_client::workflow::workspace::CreateArgs;
use scribe_format::ErrorCode;

/// mimalloc: large transfer buffers (4-32 MiB) are reused instead of being
/// mapped, faulted in and unmapped on every allocation (the system
/// allocators of Linux and Windows map such sizes directly).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod args;
mod cmd;
mod ctx;
mod error;
mod reference;
mod ui;

use args::{Cli, Command, RecoveryCmd, RepoCmd, ViewCmd, WorkspaceCmd};
use cmd::{auth, content, files, info, locks, quickstart, recovery, repo, submit, sync, workspace};
use error::{CliError, CliResult};

fn run(cli: Cli) -> CliResult {
    let out = ui::Out {
        quiet: cli.global.quiet,
        json: cli.global.json,
    };
    let c = &ctx::Ctx::from_env(out)?;
    match cli.command {
        Command::Quickstart { dir, team } => quickstart::run(c, dir, team),
        Command::Workspace(w) => match w {
            WorkspaceCmd::Create {
                dir,
                server,
                repo,
                branch,
                view,
                label,
                readonly,
            } => workspace::create(
                c,
                CreateArgs {
                    dir,
                    server,
                    repo,
                    branch,
                    view,
                    label,
                    readonly,
                    author: String::new(),
                    host: ctx::host(),
                },
            )
            .map(|_| ()),
            WorkspaceCmd::List { server, repo } => workspace::list(c, server, repo),
            WorkspaceCmd::Retire { workspace: w } => workspace::retire(c, w),
            WorkspaceCmd::SetServer { url } => workspace::set_server(c, url),
            WorkspaceCmd::Recreate { branch } => workspace::recreate(c, branch),
            WorkspaceCmd::PruneCache => workspace::prune_cache(c),
        },
        Command::Repo(r) => match r {
            RepoCmd::Create { name, server } => repo::create(c, &name, &server),
            RepoCmd::List { server } => repo::list(c, &server),
        },
        Command::Add { paths } => files::add(c, paths),
        Command::Edit { paths } => files::edit(c, paths),
        Command::Delete { paths } => files::delete(c, paths),
        Command::Move {
            src,
            dst,
            abort,
            resume,
        } => match (abort, resume, src, dst) {
            (Some(sel), _, _, _) => files::move_abort(c, sel),
            (None, true, _, _) => files::move_resume(c),
            (None, false, Some(src), Some(dst)) => files::move_cmd(c, src, dst),
            _ => Err(CliError::new(ErrorCode::Usage, "scribe move SRC DST")),
        },
        Command::Reconcile { paths } => files::reconcile(
            c,
            if paths.is_empty() {
                vec![".".into()]
            } else {
                paths
            },
        ),
        Command::Revert { paths } => files::revert(c, paths),
        Command::Status => files::status(c),
        Command::Submit {
            message,
            keep_locks,
            paths,
        } => submit::run(c, message, keep_locks, paths),
        Command::Sync { change } => sync::run(c, change),
        Command::Resolve {
            show: Some(side),
            paths,
            ..
        } => content::resolve_show(c, paths, side == args::ShowSide::Theirs),
        Command::Resolve {
            paths,
            ours,
            theirs,
            merged,
            show: None,
        } => files::resolve(c, paths, ours, theirs, merged),
        Command::Print { path } => content::print(c, path),
        Command::Diff { paths, tool } => content::diff(c, paths, tool),
        Command::Lock { paths } => locks::lock(c, paths),
        Command::Unlock { paths, force } => locks::unlock(c, paths, force),
        Command::Locks => locks::locks(c),
        Command::Login {
            auth: url,
            user,
            password_file,
            ca_file,
            admin,
        } => auth::login(c, url, user, password_file, ca_file, admin),
        Command::Logout => auth::logout(c),
        Command::Whoami => auth::whoami(c),
        Command::Admin(a) => cmd::admin::run(c, a),
        Command::Log { n } => info::log(c, n),
        Command::History { path } => info::history(c, path),
        Command::Describe { change, diff } => info::describe(c, change, diff),
        Command::Recovery(r) => match r {
            RecoveryCmd::List => recovery::list(c),
            RecoveryCmd::Prune { older_than } => recovery::prune(c, older_than),
            RecoveryCmd::Restore { name, to } => recovery::restore(c, name, to),
        },
        Command::View(v) => match v {
            ViewCmd::Set { prefixes } => sync::view_set(c, prefixes),
            ViewCmd::Show => sync::view_show(c),
        },
        Command::Info => workspace::info(c),
        Command::Debug(d) => cmd::debug::run(c, d),
        Command::Completions { shell } => reference::completions(c, shell),
        Command::Man => reference::man(c),
    }
}

fn main() -> ExitCode {
    // Linux: no transparent huge pages. mimalloc advises them, and the
    // kernel zeroes a whole 2 MiB page on the first touch of each: a third
    // of a small-file freeze's CPU went to that (docs/performance.md
    // "Huge pages").
    #[cfg(target_os = "linux")]
    let _ = rustix::thread::disable_transparent_huge_pages(true);
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version are not errors; a closed pipe is not
            // one either.
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let json = cli.global.json;
    let out = ui::Out {
        quiet: cli.global.quiet,
        json,
    };
    let again = retry_hint(&cli.command);
    let room = disk_full_hint(&cli.command);
    match run(cli).map_err(|e| explain_rename(e, out)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(mut e) => {
            if e.code == ErrorCode::Unreachable {
                e.hint = Some(again.to_string());
            }
            if e.concern.as_deref() == Some(&scribe_format::Concern::DiskFull) {
                if let Some(h) = room {
                    e.hint = Some(h.to_string());
                }
            }
            if e.code == ErrorCode::WorkspaceRetired {
                workspace::note_retired();
            }
            e.print(json);
            ExitCode::from(e.exit_status())
        }
    }
}

/// A `not_found` met in a workspace whose repository the server holds
/// under another name now (`scribe-server repo rename`): that error,
/// naming the new name and `scribe workspace set-server` (one more
/// question to the server, asked only on this error path). Any other
/// error is returned as it is.
fn explain_rename(e: CliError, out: ui::Out) -> CliError {
    if e.code != ErrorCode::NotFound
        || matches!(
            e.concern.as_deref(),
            Some(scribe_format::Concern::RepositoryRenamed { .. })
        )
    {
        return e;
    }
    let Ok(c) = ctx::Ctx::from_env(out) else {
        return e;
    };
    let Ok(o) = ctx::open_for_reading(&c) else {
        return e;
    };
    match scribe_client::workflow::workspace::renamed(&c.lib, &o) {
        Some(renamed) => renamed.into(),
        None => e,
    }
}

/// What to run once the server answers again, after `command` lost it.
fn retry_hint(command: &Command) -> &'static str {
    match command {
        Command::Submit { .. } => {
            "check that the server runs at that address; then run `scribe submit` again: it \
             resumes this submission with the same id (your files stay opened, nothing is lost)"
        }
        Command::Sync { .. } | Command::View(_) => {
            "check that the server runs at that address; then run `scribe sync` again: it \
             continues where it stopped (files already placed stay)"
        }
        Command::Login { .. } | Command::Logout | Command::Whoami | Command::Admin(_) => {
            "check the auth service address and that it runs there; then run the command again"
        }
        Command::Workspace(WorkspaceCmd::Create { .. }) | Command::Quickstart { .. } => {
            "check the server URL and that the server runs there; then run the command again \
             (if the workspace directory was created, run `scribe sync` inside it instead)"
        }
        _ => "check that the server runs at that address; then run the command again",
    }
}

/// What to run once there is room again, after `command` filled this
/// machine's disk, where it is more than running it again.
fn disk_full_hint(command: &Command) -> Option<&'static str> {
    Some(match command {
        Command::Sync { .. } | Command::View(_) => {
            "the workspace's disk is full: free space on it, then run `scribe sync` again: it \
             continues where it stopped (files already placed, and the verified part of a large \
             download, stay)"
        }
        Command::Workspace(WorkspaceCmd::Create { .. } | WorkspaceCmd::Recreate { .. }) => {
            "the workspace's disk is full: free space on it, then run `scribe sync` inside the \
             workspace: it continues where it stopped (if no workspace was made there yet, run \
             this command again)"
        }
        _ => return None,
    })
}

/// The whole command tree (for the reference, completions and man page).
pub fn command() -> clap::Command {
    Cli::command()
}

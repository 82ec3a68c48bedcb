//! The `scribe` binary.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc: large transfer buffers (4-32 MiB) are reused instead of being
/// mapped, faulted in and unmapped on every allocation (the system
/// allocators of Linux and Windows map such sizes directly).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod cmd;
mod ctx;
mod error;
mod out;
mod remote;

use cmd::{files, info, locks, quickstart, recovery, repo, submit, sync, workspace};
use error::CliResult;

/// Scribe: version control for large binary assets
#[derive(Parser)]
#[command(name = "scribe", version, about, long_about = None)]
struct Cli {
    /// Silence status lines (data on stdout is still printed)
    #[arg(short, long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a guided demo on an embedded server
    ///
    /// Creates DIR (default ./scribe-quickstart) with a data root, a
    /// repository, two workspaces and a generated asset set, then adds,
    /// submits, syncs and shows a lock stopping a conflicting submit.
    Quickstart { dir: Option<PathBuf> },
    /// Create, list or retire workspaces
    #[command(subcommand)]
    Workspace(WorkspaceCmd),
    /// Create or list repositories
    #[command(subcommand)]
    Repo(RepoCmd),
    /// Open new files for add (directories recurse; ignore rules apply)
    Add {
        #[arg(required = true)]
        paths: Vec<String>,
    },
    /// Open tracked files for edit (and make them writable)
    Edit {
        #[arg(required = true)]
        paths: Vec<String>,
    },
    /// Open tracked files for delete (the file moves to the recovery area)
    Delete {
        #[arg(required = true)]
        paths: Vec<String>,
    },
    /// Move a tracked file or directory (submitted as add + paired delete)
    ///
    /// `scribe move SRC DST` moves; `scribe move --abort [DST|ID]` undoes a
    /// pending move (default: the interrupted one, else the newest), refused
    /// while a later move depends on it; `scribe move --resume` finishes an
    /// interrupted move. `scribe status` lists pending moves and their ids.
    Move {
        #[arg(required_unless_present_any = ["abort", "resume"])]
        src: Option<String>,
        #[arg(required_unless_present_any = ["abort", "resume"])]
        dst: Option<String>,
        /// Undo a pending move, named by its destination or operation id
        #[arg(long, value_name = "DST|ID", num_args = 0..=1, conflicts_with_all = ["src", "dst", "resume"])]
        abort: Option<Option<String>>,
        /// Finish an interrupted move
        #[arg(long, conflicts_with_all = ["src", "dst"])]
        resume: bool,
    },
    /// Open every local change made without add/edit/delete
    Reconcile { paths: Vec<String> },
    /// Discard opened state (displaced contents go to the recovery area)
    Revert {
        #[arg(required = true)]
        paths: Vec<String>,
    },
    /// Show opened files, unopened local changes, and paths needing resolve
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Submit opened files as one numbered change
    Submit {
        /// The change description
        #[arg(short, long)]
        message: Option<String>,
        /// Keep the locks of submitted files
        #[arg(long)]
        keep_locks: bool,
        /// Submit only opened files under these paths
        paths: Vec<String>,
        #[arg(long)]
        json: bool,
    },
    /// Bring the working copy to CHANGE (default: the branch head)
    Sync {
        change: Option<u64>,
        #[arg(long)]
        json: bool,
    },
    /// Settle paths whose sync was deferred because of local work
    Resolve {
        #[arg(required = true)]
        paths: Vec<String>,
        /// Keep the working file, rebased onto the server's revision
        #[arg(long)]
        ours: bool,
        /// Take the server's revision (yours goes to the recovery area)
        #[arg(long)]
        theirs: bool,
        /// Use FILE as the merged result
        #[arg(long, value_name = "FILE")]
        merged: Option<PathBuf>,
    },
    /// Lock files on the server so only this workspace can submit them
    Lock {
        #[arg(required = true)]
        paths: Vec<String>,
    },
    /// Release locks held by this workspace
    Unlock {
        #[arg(required = true)]
        paths: Vec<String>,
    },
    /// List locks with owner, workspace and time
    Locks {
        #[arg(long)]
        json: bool,
    },
    /// Show recent changes of the branch
    Log {
        #[arg(short = 'n', default_value_t = 20)]
        n: u32,
        #[arg(long)]
        json: bool,
    },
    /// Show the changes of one path
    History {
        path: String,
        #[arg(long)]
        json: bool,
    },
    /// Show one change and its files
    Describe {
        change: u64,
        #[arg(long)]
        json: bool,
    },
    /// List or prune displaced local contents
    #[command(subcommand)]
    Recovery(RecoveryCmd),
    /// Show or change which path prefixes this workspace holds
    #[command(subcommand)]
    View(ViewCmd),
    /// Inspect how Scribe sees its inputs
    #[command(subcommand)]
    Debug(cmd::debug::Debug),
}

#[derive(Subcommand)]
enum WorkspaceCmd {
    /// Register a workspace and sync the branch head into DIR
    Create {
        dir: PathBuf,
        /// scribe://HOST:PORT, scribes://HOST:PORT, or a data root path
        #[arg(long)]
        server: String,
        #[arg(long)]
        repo: String,
        #[arg(long)]
        branch: Option<String>,
        /// Hold only these path prefixes (repeatable)
        #[arg(long = "view")]
        view: Vec<String>,
        #[arg(long)]
        label: Option<String>,
        /// Synced files are read-only until `edit` opens them
        #[arg(long)]
        readonly: bool,
    },
    /// List the repository's workspaces
    List {
        #[arg(long)]
        server: Option<String>,
        #[arg(long)]
        repo: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Retire this workspace (or the one named by id) on the server
    Retire { workspace: Option<String> },
}

#[derive(Subcommand)]
enum RepoCmd {
    /// Create a repository (a path --server gets a new data root if needed)
    Create {
        name: String,
        #[arg(long)]
        server: String,
    },
    /// List repositories
    List {
        #[arg(long)]
        server: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum RecoveryCmd {
    /// List displaced contents and intent archives
    List {
        #[arg(long)]
        json: bool,
    },
    /// Remove displaced contents older than DAYS (default 14)
    Prune {
        #[arg(long, value_name = "DAYS", default_value_t = 14)]
        older_than: u64,
    },
}

#[derive(Subcommand)]
enum ViewCmd {
    /// Select these prefixes (none: the whole repository)
    Set { prefixes: Vec<String> },
    /// Print the selected prefixes
    Show {
        #[arg(long)]
        json: bool,
    },
}

fn run(cli: Cli) -> CliResult {
    let base = ctx::Ctx {
        out: out::Out {
            quiet: cli.quiet,
            json: false,
        },
        cwd: std::env::current_dir()?,
    };
    let c = &base;
    match cli.command {
        Command::Quickstart { dir } => quickstart::run(c, dir),
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
                workspace::CreateArgs {
                    dir,
                    server,
                    repo,
                    branch,
                    view,
                    label,
                    readonly,
                    author: None,
                },
            )
            .map(|_| ()),
            WorkspaceCmd::List { server, repo, json } => {
                workspace::list(&c.with_json(json), server, repo)
            }
            WorkspaceCmd::Retire { workspace: w } => workspace::retire(c, w),
        },
        Command::Repo(r) => match r {
            RepoCmd::Create { name, server } => repo::create(c, &name, &server),
            RepoCmd::List { server, json } => repo::list(&c.with_json(json), &server),
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
            _ => Err(error::CliError::new("usage", "scribe move SRC DST")),
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
        Command::Status { json } => files::status(&c.with_json(json)),
        Command::Submit {
            message,
            keep_locks,
            paths,
            json,
        } => submit::submit_cmd(
            &c.with_json(json),
            submit::SubmitArgs {
                message: message.unwrap_or_default(),
                keep_locks,
                paths,
            },
        ),
        Command::Sync { change, json } => sync::sync_cmd(&c.with_json(json), change),
        Command::Resolve {
            paths,
            ours,
            theirs,
            merged,
        } => files::resolve(c, paths, ours, theirs, merged),
        Command::Lock { paths } => locks::lock(c, paths),
        Command::Unlock { paths } => locks::unlock(c, paths),
        Command::Locks { json } => locks::locks(&c.with_json(json)),
        Command::Log { n, json } => info::log(&c.with_json(json), n),
        Command::History { path, json } => info::history(c, path, json),
        Command::Describe { change, json } => info::describe(c, change, json),
        Command::Recovery(r) => match r {
            RecoveryCmd::List { json } => recovery::list(&c.with_json(json)),
            RecoveryCmd::Prune { older_than } => recovery::prune(c, older_than),
        },
        Command::View(v) => match v {
            ViewCmd::Set { prefixes } => sync::view_set(c, prefixes),
            ViewCmd::Show { json } => sync::view_show(&c.with_json(json)),
        },
        Command::Debug(d) => match cmd::debug::run(d) {
            Ok(_) => Ok(()),
            Err(e) if is_broken_pipe(&e) => Ok(()),
            Err(e) => Err(error::CliError::new("internal", e.to_string())),
        },
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.code == "usage" => {
            e.print();
            ExitCode::from(2)
        }
        Err(e) => {
            e.print();
            ExitCode::from(1)
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

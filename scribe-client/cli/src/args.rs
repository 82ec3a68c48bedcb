//! Every argument of `scribe`, declared once, each with its help text.
//! `docs/cli.md`'s reference section, the shell completions and the man
//! page are generated from these declarations.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Scribe: version control for large binary assets
#[derive(Parser, Debug)]
#[command(name = "scribe", version, about = "Scribe: version control for large binary assets", long_about = None)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes.
#[derive(Args, Debug, Clone, Copy)]
pub struct Global {
    /// Silence status lines (data on stdout is still printed)
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// Print data, and errors, as JSON on stdout
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a guided demo on an embedded server
    ///
    /// Creates DIR (default ./scribe-quickstart) with a data root, a
    /// repository, two workspaces and a generated asset set, then adds,
    /// submits, syncs and shows a lock stopping a conflicting submit.
    Quickstart {
        /// A new or empty directory for the demo
        dir: Option<PathBuf>,
        /// A team on loopback instead: scribe-auth and a TLS scribe-server
        /// (taken from beside this scribe), an administrator, Alice and
        /// Bob; shows sign-in, a grant, a refusal and the audit trail
        #[arg(long)]
        team: bool,
    },
    /// Create, list or retire workspaces
    #[command(subcommand)]
    Workspace(WorkspaceCmd),
    /// Create or list repositories
    #[command(subcommand)]
    Repo(RepoCmd),
    /// Open new files for add (directories recurse; ignore rules apply)
    Add {
        /// Files or directories to add
        #[arg(required = true)]
        paths: Vec<String>,
    },
    /// Open tracked files for edit (and make them writable)
    Edit {
        /// Tracked files or directories to edit
        #[arg(required = true)]
        paths: Vec<String>,
    },
    /// Open tracked files for delete (the file moves to the recovery area)
    Delete {
        /// Tracked files or directories to delete
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
        /// The tracked file or directory to move
        #[arg(required_unless_present_any = ["abort", "resume"])]
        src: Option<String>,
        /// Where it goes (must not exist)
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
    ///
    /// New files are opened for add, modified ones for edit, missing ones
    /// for delete. A missing file and a new file with exactly its content
    /// (moved or renamed outside Scribe, case-only renames included) are
    /// opened as the move `scribe move` would have recorded, printed as
    /// `move OLD -> NEW`: submit sends a move and the file's history
    /// follows it. Pairing is only where unambiguous; a file moved and then
    /// edited stays a delete and an add.
    Reconcile {
        /// Limit to these paths (default: the whole workspace)
        paths: Vec<String>,
    },
    /// Discard opened state (displaced contents go to the recovery area)
    Revert {
        /// Opened files or directories to revert
        #[arg(required = true)]
        paths: Vec<String>,
    },
    /// Show opened files, unopened local changes, and paths needing resolve
    Status,
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
    },
    /// Bring the working copy to CHANGE (default: the branch head)
    Sync {
        /// The change to sync to (default: the head). 0 is change 0, the
        /// empty tree before any change: every tracked file is removed
        /// (local work is kept and listed as needing resolve)
        change: Option<u64>,
    },
    /// Settle paths whose sync was deferred because of local work
    Resolve {
        /// Deferred files or directories to settle
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
        /// Print one side to stdout instead of settling: `base` (the
        /// revision your work started from) or `theirs` (the server's)
        #[arg(long, value_name = "SIDE", conflicts_with_all = ["ours", "theirs", "merged"])]
        show: Option<ShowSide>,
    },
    /// Print a file's bytes to stdout (streamed)
    ///
    /// PATH is the revision this workspace has; PATH@CHANGE the file as of
    /// that change of the branch, PATH@head the newest. Bytes are verified
    /// against their content id as they end.
    Print {
        /// PATH or PATH@CHANGE (PATH@head: the newest)
        path: String,
    },
    /// Show what changed in opened (and modified) files
    ///
    /// Text files (UTF-8, up to 8 MiB) as a unified diff against the
    /// revision this workspace has; other files as sizes and content ids.
    /// `--tool` hands each pair of files to an external program instead.
    Diff {
        /// Only files under these paths (default: the whole workspace)
        paths: Vec<String>,
        /// Run this program (with any fixed arguments) on OLD NEW for each file
        #[arg(long, value_name = "PROGRAM")]
        tool: Option<String>,
    },
    /// Lock files on the server so only this workspace can submit them
    Lock {
        /// Files to lock
        #[arg(required = true)]
        paths: Vec<String>,
    },
    /// Release locks held by this workspace (`--force`: anyone's)
    ///
    /// `--force` breaks the locks on PATHs whoever holds them (a lock left
    /// by a deleted or abandoned workspace): a team server allows it to
    /// maintainers and administrators of the repository and records it in
    /// the audit trail; a server without auth allows anyone.
    Unlock {
        /// Files (or folders: every lock under them with --force) to unlock
        #[arg(required = true)]
        paths: Vec<String>,
        /// Break the locks whoever holds them
        #[arg(long)]
        force: bool,
    },
    /// List locks with owner, workspace and time
    Locks,
    /// Sign in to a team's auth service and keep the credential
    ///
    /// Makes a P-256 key on this machine (it never leaves it), sends the
    /// password and the public key to the auth service over TLS, and
    /// stores the session certificate, the key and the service's CA in the
    /// user's config directory (`$SCRIBE_CONFIG_DIR`, else
    /// `$XDG_CONFIG_HOME/scribe`, else `~/.config/scribe`), readable only
    /// by the user. The password is read from the terminal without echo,
    /// from `--password-file`, or from standard input when it is not a
    /// terminal.
    Login {
        /// The auth service, sau2://HOST:PORT (default: the one of the last login)
        #[arg(long)]
        auth: Option<String>,
        /// The user name (default: $SCRIBE_AUTHOR, else $USER)
        #[arg(long)]
        user: Option<String>,
        /// Read the password from this file (its first line)
        #[arg(long)]
        password_file: Option<PathBuf>,
        /// The auth service's CA certificate, PEM (`scribe-auth ca-cert --access`;
        /// default: the one stored by the last login)
        #[arg(long)]
        ca_file: Option<PathBuf>,
        /// Sign in as administrator (admin-login): a one-hour `user` credential
        /// that `scribe admin` needs for user management and the audit trail
        #[arg(long)]
        admin: bool,
    },
    /// End the stored session (the auth service disables its credential)
    Logout,
    /// Show who the stored credential (or $SCRIBE_CREDENTIAL) signs in as
    Whoami,
    /// Administer the team's auth service: users, grants, namespaces,
    /// visibility, credentials, automation credentials, the audit trail
    ///
    /// Uses the stored login (`scribe login`) or the credential file named
    /// by `$SCRIBE_CREDENTIAL`. Who may do what is in docs/auth.md: user
    /// management and the audit trail need an administrator; grants and
    /// visibility also a namespace admin or a repository admin.
    #[command(subcommand)]
    Admin(AdminCmd),
    /// Show recent changes of the branch
    Log {
        /// How many changes to show
        #[arg(short = 'n', default_value_t = 20)]
        n: u32,
    },
    /// Show the changes of one path
    History {
        /// The file to show the history of
        path: String,
    },
    /// Show one change and its files (with sizes; --diff: what changed)
    Describe {
        /// The change number
        change: u64,
        /// Also show each file's difference from the revision before it
        #[arg(long)]
        diff: bool,
    },
    /// List or prune displaced local contents
    #[command(subcommand)]
    Recovery(RecoveryCmd),
    /// Show or change which path prefixes this workspace holds
    #[command(subcommand)]
    View(ViewCmd),
    /// Where you are: user, workspace, root, view, branch, change, server
    ///
    /// Reads the workspace's binding; asks the server (best effort) for its
    /// version, the head and whether this workspace is still registered.
    Info,
    /// Inspect how Scribe sees its inputs
    #[command(subcommand)]
    Debug(DebugCmd),
    /// Print a shell completion script
    Completions {
        /// The shell to complete for
        shell: Shell,
    },
    /// Print the man page (roff)
    Man,
}

/// Which side `resolve --show` prints.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShowSide {
    /// The revision your work started from
    Base,
    /// The server's revision
    Theirs,
}

/// Shells `scribe completions` writes scripts for.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
    Elvish,
    Powershell,
}

#[derive(Subcommand, Debug)]
pub enum WorkspaceCmd {
    /// Register a workspace and sync the branch head into DIR
    Create {
        /// The new workspace's directory
        dir: PathBuf,
        /// scribe://HOST:PORT, scribes://HOST:PORT, or a data root path
        #[arg(long)]
        server: String,
        /// The repository's name
        #[arg(long)]
        repo: String,
        /// The branch to follow (default: main)
        #[arg(long)]
        branch: Option<String>,
        /// Hold only these path prefixes (repeatable)
        #[arg(long = "view")]
        view: Vec<String>,
        /// A label shown in `scribe workspace list`
        #[arg(long)]
        label: Option<String>,
        /// Synced files are read-only until `edit` opens them
        #[arg(long)]
        readonly: bool,
    },
    /// List the repository's workspaces
    List {
        /// The server (default: this workspace's)
        #[arg(long)]
        server: Option<String>,
        /// The repository (default: this workspace's)
        #[arg(long)]
        repo: Option<String>,
    },
    /// Retire this workspace (or the one named by id) on the server
    Retire {
        /// The workspace id (32 hex digits; default: this one)
        workspace: Option<String>,
    },
    /// Point this workspace at the server's new address (host or port moved),
    /// or follow its repository's rename
    ///
    /// The server at URL must hold the same repository (same id, whatever
    /// its name now) and this workspace's registration; the stored URL and
    /// repository name change (after `scribe-server repo rename`, give the
    /// same URL).
    SetServer {
        /// scribe://HOST:PORT, scribes://HOST:PORT, or a data root path
        url: String,
    },
    /// Drop from the workspace cache what the server already holds
    ///
    /// The cache (`.scribe/_state/cache/`) keeps the small files and
    /// manifests this workspace submitted. Objects the server lacks and
    /// every object of an unfinished submission are kept; the rest is
    /// removed (sync and revert fetch it from the server when needed). A
    /// submit prunes on its own when the cache passes 256 MiB
    /// (`SCRIBE_CACHE_BYTES` sets the bound; 0 turns that off).
    PruneCache,
    /// Re-create a retired workspace in place, keeping local edits
    ///
    /// Registers a new workspace with the same server, repository, view
    /// and settings; keeps the old state as `.scribe/retired-<ID>`, moves
    /// its recovery area over, syncs (files that differ from the server
    /// are kept and deferred, never overwritten) and opens again what was
    /// opened for add, edit or delete.
    Recreate {
        /// The branch to follow (default: main)
        #[arg(long)]
        branch: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
pub enum RepoCmd {
    /// Create a repository (a path --server gets a new data root if needed)
    Create {
        /// The repository's name
        name: String,
        /// scribe://HOST:PORT, scribes://HOST:PORT, or a data root path
        #[arg(long)]
        server: String,
    },
    /// List repositories
    List {
        /// scribe://HOST:PORT, scribes://HOST:PORT, or a data root path
        #[arg(long)]
        server: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum RecoveryCmd {
    /// List displaced contents and intent archives
    List,
    /// Remove displaced contents older than DAYS (default 14)
    Prune {
        /// Age in days of the contents to remove
        #[arg(long, value_name = "DAYS", default_value_t = 14)]
        older_than: u64,
    },
    /// Copy displaced contents back into the workspace, replacing nothing
    ///
    /// NAME is an entry of `scribe recovery list`. The copy goes to the
    /// path the contents were displaced from, or to `--to PATH`; anything
    /// already there refuses (`already_exists`). The entry is kept. The
    /// restored file is not opened: `scribe status` shows it.
    Restore {
        /// The entry, as `scribe recovery list` names it
        name: String,
        /// Where to put the copy (default: its old path)
        #[arg(long, value_name = "PATH")]
        to: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
pub enum ViewCmd {
    /// Select these prefixes (none: the whole repository)
    Set {
        /// Path prefixes to hold
        prefixes: Vec<String>,
    },
    /// Print the selected prefixes
    Show,
}

#[derive(Subcommand, Debug)]
pub enum DebugCmd {
    /// Check canonical paths and print their collision keys
    ///
    /// Prints one line per argument, the argument first: `PATH: ok
    /// <collision-key-hex>` for a valid canonical path (section 5 of the
    /// format specification), or `PATH: invalid <error-code> (<rule>)`
    /// naming the rule it breaks (components counted from 1); an empty
    /// argument is `(empty)`. Then one `collision: A and B ...` line for
    /// each two different arguments with the same key (they differ only in
    /// case or normalization: one workspace cannot hold both). Exits 0
    /// either way.
    Path {
        /// Repository-relative paths with `/` separators
        #[arg(required = true)]
        paths: Vec<String>,
    },
}

#[derive(Subcommand, Debug)]
pub enum AdminCmd {
    /// Add, disable or enable users, set passwords, list users
    #[command(subcommand, visible_alias = "users")]
    User(AdminUserCmd),
    /// Set, revoke or list repository grants (roles: reader, writer, maintainer, admin)
    #[command(subcommand)]
    Grant(AdminGrantCmd),
    /// Add, remove or list namespace admins, readers and delegates
    #[command(subcommand)]
    Namespace(AdminNamespaceCmd),
    /// Set or show a repository's visibility (public or private)
    #[command(subcommand)]
    Visibility(AdminVisibilityCmd),
    /// List or revoke credentials
    #[command(subcommand)]
    Credential(AdminCredentialCmd),
    /// Create or derive automation credentials for CI and agents
    #[command(subcommand)]
    Automation(AdminAutomationCmd),
    /// Show the audit trail, newest first (`--json` for machines)
    Audit {
        /// How many rows to show (1 to 10000)
        #[arg(long, default_value_t = 100)]
        limit: u32,
        /// Only rows older than this sequence number (for paging)
        #[arg(long)]
        before: Option<u64>,
        /// Only this command (for example user-add, login, grant-set)
        #[arg(long)]
        command: Option<String>,
        /// Only rows of this acting user
        #[arg(long)]
        user: Option<String>,
        /// Only accepted (ok) or refused (rejected) requests
        #[arg(long)]
        outcome: Option<AuditOutcome>,
    },
}

/// An audit row's outcome.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum AuditOutcome {
    Ok,
    Rejected,
}

/// A repository role.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum GrantRole {
    /// Read, sync and list
    Reader,
    /// Reader, and submit, lock own files, register and retire own workspaces
    Writer,
    /// Writer, and break others' locks, retire others' workspaces
    Maintainer,
    /// Maintainer, and the grants and visibility of the repository
    Admin,
}

/// A namespace role.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum NamespaceRole {
    /// Administers the grants and visibility of every repository of the namespace
    Admin,
    /// Reads every repository of the namespace
    Reader,
    /// Creates and revokes automation credentials of the namespace's service users
    Delegate,
}

/// A repository visibility.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum Visibility {
    Public,
    Private,
}

/// An automation credential kind.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum AutomationKind {
    /// Read as the user (at most reader)
    Automation,
    /// At most writer
    AutomationWrite,
    /// At most maintainer
    AutomationMaintain,
    /// At most admin (also grants and visibility the user may administer)
    AutomationAdmin,
}

#[derive(Subcommand, Debug)]
pub enum AdminUserCmd {
    /// Add a user (a person gets a generated password, shown once, unless --password-file)
    Add {
        /// The new user's name
        name: String,
        /// Make the user an administrator
        #[arg(long)]
        admin: bool,
        /// A service user (CI, agents): no password unless --password-file
        #[arg(long)]
        service: bool,
        /// Read the password from this file (its first line)
        #[arg(long)]
        password_file: Option<PathBuf>,
    },
    /// Disable a user: no sign-in, and its credentials stop working
    Disable {
        /// The user
        name: String,
    },
    /// Enable a disabled user again
    Enable {
        /// The user
        name: String,
    },
    /// Set a user's password (generated and shown once unless --password-file); ends its sessions
    SetPassword {
        /// The user
        name: String,
        /// Read the password from this file (its first line)
        #[arg(long)]
        password_file: Option<PathBuf>,
    },
    /// List users
    List,
}

#[derive(Subcommand, Debug)]
pub enum AdminGrantCmd {
    /// Give USER the ROLE on NAMESPACE/REPOSITORY (replaces its role there)
    Set {
        /// The namespace
        namespace: String,
        /// The repository
        repository: String,
        /// The user
        user: String,
        /// The role
        role: GrantRole,
    },
    /// Remove USER's grant on NAMESPACE/REPOSITORY
    Revoke {
        /// The namespace
        namespace: String,
        /// The repository
        repository: String,
        /// The user
        user: String,
    },
    /// List the grants of a namespace or of one repository
    List {
        /// The namespace
        namespace: String,
        /// Only this repository
        repository: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
pub enum AdminNamespaceCmd {
    /// Make USER an admin, reader or delegate of NAMESPACE
    Add {
        /// The namespace
        namespace: String,
        /// The role in the namespace
        role: NamespaceRole,
        /// The user
        user: String,
    },
    /// Remove USER's role in NAMESPACE
    Remove {
        /// The namespace
        namespace: String,
        /// The role in the namespace
        role: NamespaceRole,
        /// The user
        user: String,
    },
    /// List the admins, readers and delegates (of one namespace, or all)
    List {
        /// Only this namespace
        namespace: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
pub enum AdminVisibilityCmd {
    /// Make NAMESPACE/REPOSITORY public or private
    Set {
        /// The namespace
        namespace: String,
        /// The repository
        repository: String,
        /// public or private
        visibility: Visibility,
    },
    /// Show a repository's visibility and its visibility revision
    Show {
        /// The namespace
        namespace: String,
        /// The repository
        repository: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum AdminCredentialCmd {
    /// List your credentials (administrators: any user's)
    List {
        /// Whose credentials (default: yours)
        #[arg(long)]
        user: Option<String>,
    },
    /// Revoke a credential (and every credential derived from it)
    Revoke {
        /// The credential id (32 hex digits)
        credential: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum AdminAutomationCmd {
    /// Create an automation credential; its key is made here and written with the certificate to --out (0600)
    Create {
        /// The user it acts as (default: you)
        #[arg(long)]
        user: Option<String>,
        /// The kind: the most it may do
        #[arg(long, value_enum, default_value_t = AutomationKind::Automation)]
        kind: AutomationKind,
        /// Lifetime: N followed by s, m, h or d (at most 366d)
        #[arg(long)]
        expires_in: String,
        /// A label shown in listings
        #[arg(long, default_value = "automation")]
        label: String,
        /// The credential file to write (point SCRIBE_CREDENTIAL at it)
        #[arg(long)]
        out: PathBuf,
    },
    /// Derive a narrower, shorter-lived credential from an automation credential
    Derive {
        /// The automation credential to derive from (id)
        #[arg(long)]
        parent: String,
        /// The kind: at most the parent's
        #[arg(long, value_enum, default_value_t = AutomationKind::Automation)]
        kind: AutomationKind,
        /// Lifetime: N followed by s, m, h or d (ending no later than the parent)
        #[arg(long)]
        expires_in: String,
        /// A label shown in listings
        #[arg(long, default_value = "derived")]
        label: String,
        /// The credential file to write (point SCRIBE_CREDENTIAL at it)
        #[arg(long)]
        out: PathBuf,
    },
}

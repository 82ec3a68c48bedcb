//! The `scribe-server` binary: create and serve a data root, and
//! administer it offline.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use scribe_server::admin::{self, Report};
use scribe_server::{ListenOptions, Listener, OpenError, Service, Timeouts};

/// mimalloc: large transfer buffers (4-32 MiB) are reused instead of being
/// mapped, faulted in and unmapped on every allocation (the system
/// allocators of Linux and Windows map such sizes directly).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

extern "C" {
    /// mimalloc's own option setter (the library linked above).
    fn mi_option_set(option: std::os::raw::c_int, value: std::os::raw::c_long);
}

/// `mi_option_purge_delay` (15 in the enum of both vendored mimalloc
/// versions, v2 and v3).
const MI_OPTION_PURGE_DELAY: std::os::raw::c_int = 15;

/// Freed memory stays mapped this long before mimalloc gives it back (its
/// default: 10 ms). The tier's cold reads allocate a new 1-16 MiB body per
/// bucket GET; with the default, each landed in freshly faulted pages the
/// kernel had to zero first (a fifth of the server's CPU during a 2 GiB
/// cold read, docs/performance.md "The cold read, profiled").
const PURGE_DELAY_MS: std::os::raw::c_long = 1000;

/// Linux: no transparent huge pages for this process. mimalloc advises
/// them, and the kernel zeroes a whole 2 MiB page on the first touch of
/// each; the short-lived row and journal buffers of a large submit paid
/// that for a quarter of the server's CPU (registry import 2.6 s -> 2.0 s,
/// docs/performance-server.md "Huge pages").
fn no_huge_pages() {
    #[cfg(target_os = "linux")]
    let _ = rustix::thread::disable_transparent_huge_pages(true);
}

/// Serve Scribe repositories to a team, or administer a data root offline
#[derive(Parser)]
#[command(name = "scribe-server", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Args)]
struct DataArg {
    /// The data root directory
    #[arg(long, value_name = "DIR")]
    data: PathBuf,
}

#[derive(Args)]
struct AdminArgs {
    /// The data root directory
    #[arg(long, value_name = "DIR")]
    data: PathBuf,
    /// Only this repository
    #[arg(long, value_name = "NAME")]
    repo: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Create a new, empty data root
    Init(DataArg),
    /// Bind a (stopped) data root to scribe-auth: from then on it serves
    /// signed-in users only, over TLS (run as a signed-in auth administrator)
    AuthInit {
        #[command(flatten)]
        data: DataArg,
        /// The auth service, sau2://HOST:PORT (default: the one `scribe login` stored)
        #[arg(long, value_name = "URL")]
        auth: Option<String>,
        /// The auth namespace whose grants this server enforces
        #[arg(long, value_name = "NS")]
        namespace: String,
        /// The server's name in the auth service
        #[arg(long, value_name = "SERVER")]
        name: String,
        /// A host name or address clients reach this server by (repeatable;
        /// localhost, 127.0.0.1 and ::1 are always included)
        #[arg(long = "host", value_name = "H")]
        hosts: Vec<String>,
        /// The administrator's credential file (default: $SCRIBE_CREDENTIAL,
        /// else the stored login's credential.pem)
        #[arg(long, value_name = "FILE")]
        credential: Option<PathBuf>,
        /// The auth service's CA (default: the stored login's auth-ca.pem)
        #[arg(long, value_name = "FILE")]
        auth_ca: Option<PathBuf>,
    },
    /// Manage repositories offline
    Repo {
        #[command(subcommand)]
        command: RepoCommand,
    },
    /// Serve the data root over TCP (or TLS)
    Serve {
        #[command(flatten)]
        data: DataArg,
        /// HOST:PORT to listen on; port 0 picks a free port
        #[arg(long, value_name = "HOST:PORT")]
        listen: String,
        /// Where to write `listen` and `scribe-server.pid` once listening
        #[arg(long, value_name = "DIR")]
        runtime_dir: Option<PathBuf>,
        /// TLS certificate chain (PEM); requires --tls-key
        #[arg(long, value_name = "FILE", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// TLS private key (PEM); requires --tls-cert
        #[arg(long, value_name = "FILE", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// Most connections served at once; one more is answered `busy`
        /// (clients use up to 4 each while syncing or submitting large
        /// files, and fall back to one when refused)
        #[arg(long, value_name = "N", default_value_t = scribe_server::listener::DEFAULT_MAX_CONNECTIONS, value_parser = parse_connections)]
        max_connections: usize,
        /// Most connections served at once from one address (an IPv4
        /// address or an IPv6 /64); one more is answered `server_busy`
        #[arg(long, value_name = "N", default_value_t = scribe_server::listener::DEFAULT_MAX_CONNECTIONS_PER_ADDRESS, value_parser = parse_connections)]
        max_connections_per_address: usize,
        /// Close a connection that sends no request this long after its
        /// handshake (e.g. 10s, 500ms)
        #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
        first_request_timeout: Duration,
        /// Close a connection holding an unfinished upload that sends
        /// nothing for this long, releasing its upload memory
        #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
        upload_idle_timeout: Duration,
        /// Most upload pins one workspace may hold in a repository; a pin
        /// beyond it is refused `limit_exceeded`
        #[arg(long, value_name = "N", default_value_t = scribe_metadata::pins::DEFAULT_MAX_PINS_PER_WORKSPACE)]
        max_pins_per_workspace: u64,
        /// After auth-init: the longest a cached auth answer is used before
        /// the auth revision is asked again (0s: before every request)
        #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
        auth_recheck: Duration,
        #[command(flatten)]
        tier: TierArgs,
        /// When a submit is acknowledged with --tier: `local` (after the
        /// local durable commit; the bucket follows in the background) or
        /// `durable` (only once the change is in the bucket)
        #[arg(long, value_name = "PROFILE", default_value = "local")]
        ack: scribe_server::tier::Ack,
        /// With --ack durable: how long a submit waits for the bucket
        /// before it is answered `tier_unavailable` (the change stays
        /// accepted; the same submit asked again gets its outcome)
        #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = parse_duration)]
        tier_ack_timeout: Duration,
        /// With --tier: keep each repository's local object store under
        /// this many bytes by dropping the least recently used chunks the
        /// bucket holds (never what is not in the bucket yet)
        #[arg(long, value_name = "BYTES")]
        cache_bytes: Option<u64>,
    },
    /// The S3 durable tier: backlog and consistency
    Tier {
        #[command(subcommand)]
        command: TierCommand,
    },
    /// Give up the content of file revisions (offline; needs --tier)
    ///
    /// Perforce's `p4 obliterate`, for content: the history stays (changes,
    /// paths, manifests), the content of the selected file revisions goes
    /// from the bucket (their revisions are collected once nothing else
    /// references them) and from the local store. A revision that is
    /// current at a branch head is kept. Without -y, only says what would
    /// be given up. Running it again finishes an interrupted collection.
    Obliterate {
        /// The data root directory
        #[arg(long, value_name = "DIR")]
        data: PathBuf,
        /// The repository
        #[arg(long, value_name = "NAME")]
        repo: String,
        #[command(flatten)]
        tier: BucketArgs,
        /// Do it (without -y: a preview that changes nothing)
        #[arg(short = 'y', long = "yes")]
        yes: bool,
        /// PATH, DIR/... or ..., each optionally @CHANGE or @FIRST,LAST
        #[arg(value_name = "FILE[@RANGE]", required = true)]
        files: Vec<scribe_server::tier::FileSpec>,
    },
    /// Check metadata and objects of every repository
    Doctor(AdminArgs),
    /// Verify every stored object against its identity (read-only)
    ///
    /// Then checks every manifest an accepted file names; each damaged or
    /// missing one is named as path@change. Exit 1 when anything is found.
    Verify {
        #[command(flatten)]
        args: AdminArgs,
        /// Drop the locator rows of damaged chunks and manifests, so the
        /// next client that submits their bytes uploads them again, and
        /// list the accepted files (path@change) that lack them until then
        #[arg(long)]
        repair: bool,
    },
    /// Rebuild the object locator from packs and loose files
    RebuildLocator(AdminArgs),
    /// Reclaim unreferenced objects by rewriting the object store
    CompactObjects {
        #[command(flatten)]
        args: AdminArgs,
        /// Rewrite only packs below 80% live, within --budget
        #[arg(long)]
        incremental: bool,
        /// Most source pack bytes an incremental run rewrites
        #[arg(long, value_name = "BYTES", requires = "incremental")]
        budget: Option<u64>,
    },
    /// Finish or remove interrupted submissions and upload-pin cleanups
    RecoverSubmissions(AdminArgs),
    /// List or abandon upload pins offline
    Pins {
        #[command(subcommand)]
        command: PinsCommand,
    },
    /// Break file locks offline (a lock left by a deleted workspace)
    Lock {
        #[command(subcommand)]
        command: LockCommand,
    },
    /// Compare the data root's versions with this build's and convert them
    ///
    /// Reports the schema and required features of the data root, of each
    /// repository and of each object store against what this build reads,
    /// opening them without serving. Repositories at an older migration
    /// revision (the repository migration journal: workspace-state-v1,
    /// path-fold-v1, change-notes-v1) are converted batch by batch; an
    /// interrupted run resumes from its cursor. With everything current
    /// there is nothing to migrate (exit 0). A version this build cannot
    /// convert is refused (exit 1) and nothing is changed.
    Migrate {
        #[command(flatten)]
        data: DataArg,
        /// Only report what would be converted; change nothing
        #[arg(long)]
        inspect: bool,
    },
    /// Back up a data root, served or not, into a new directory
    ///
    /// Rebuilds catalog.redb and every repository's metadata.redb from
    /// their recovery archives (every acknowledged change; the serving
    /// process is not disturbed), copies every object file with its
    /// digest verified, and writes BACKUP_MANIFEST last: a directory
    /// without it is an interrupted backup, and restore refuses it.
    ///
    /// A data root with S3 tier state is backed up with the server
    /// stopped and the bucket named (--tier): chunks its local stores gave
    /// back to the bucket are fetched, checked against their ids, and
    /// written into the backup.
    Backup {
        #[command(flatten)]
        data: DataArg,
        /// The backup directory (absent or empty)
        #[arg(long, value_name = "DIR")]
        to: PathBuf,
        #[command(flatten)]
        tier: TierArgs,
    },
    /// Write an online checkpoint of every metadata archive into DIR
    ///
    /// Runs while the data root is served (or not). For the catalog, each
    /// repository and auth-state.redb, writes into the next numbered
    /// checkpoint DIR/<n>/ either a full logical base (the first time, for
    /// a new journal identity, or when consolidation pruned the frames
    /// after the previous checkpoint) or the archive frames since the
    /// previous checkpoint, and a checksummed manifest (version 2) linking
    /// the previous one. The checkpoint is published by one rename, last;
    /// a killed run leaves the earlier checkpoints intact. Restore with
    /// `recover --from-checkpoint DIR`.
    Checkpoint {
        #[command(flatten)]
        data: DataArg,
        /// The checkpoint directory (created; earlier checkpoints in it are continued)
        #[arg(long, value_name = "DIR")]
        to: PathBuf,
        /// Only verify the newest checkpoint of DIR (every chain, file and frame)
        #[arg(long)]
        verify: bool,
    },
    /// Restore a data root from a backup directory
    ///
    /// Verifies every file BACKUP_MANIFEST lists (size and BLAKE3) while
    /// copying it into a staging directory beside --data, gives the data
    /// root and every repository a new incarnation (clients retire pending
    /// submissions whose outcome the backup does not hold instead of
    /// replaying them), every database a new recovery archive, rebuilds the
    /// object locators and publishes --data (absent or empty) by one rename.
    ///
    /// With --from-tier instead: rebuild the data root from the S3 tier
    /// alone (a lost disk): the descriptor and every recovery journal
    /// shipped to the bucket, fetched and verified, the databases rebuilt,
    /// new incarnations, the tier record rebuilt from the bucket's index
    /// records, then `tier verify`. Object stores start empty; serve with
    /// the same --tier and every object is read back from the bucket.
    Restore {
        #[command(flatten)]
        data: DataArg,
        /// The backup directory (made by `scribe-server backup`)
        #[arg(long, value_name = "DIR", required_unless_present = "from_tier")]
        from: Option<PathBuf>,
        /// Place the fresh recovery archives in DIR (absolute, absent or
        /// empty; another volume) instead of beside each database
        #[arg(long, value_name = "DIR", conflicts_with = "from_tier")]
        archive: Option<PathBuf>,
        /// Restore from the S3 tier instead (with --tier-endpoint; keys
        /// from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)
        #[arg(long, value_name = "s3://BUCKET[/PREFIX]", conflicts_with = "from")]
        from_tier: Option<String>,
        /// The S3 endpoint of --from-tier (default: AWS_ENDPOINT_URL)
        #[arg(long, value_name = "URL", requires = "from_tier")]
        tier_endpoint: Option<String>,
        /// Which shipped data root to restore when the bucket holds several
        /// (8 hex digits, as the error lists them)
        #[arg(long, value_name = "HEX", requires = "from_tier")]
        shard: Option<String>,
    },
    /// Export one repository's metadata to a .scmx file (served or not)
    Export {
        /// The repository name
        repo: String,
        #[command(flatten)]
        data: DataArg,
        /// The .scmx file to write (must not exist)
        #[arg(long, value_name = "FILE")]
        to: PathBuf,
    },
    /// Import a .scmx metadata export as a new repository (offline)
    ///
    /// The repository keeps the exported id and gets a new incarnation.
    /// An export holds metadata only: give the objects with --objects (an
    /// object store directory, e.g. repos/<id>/objects of the source or of
    /// a backup). The import is checked by doctor before it is published;
    /// objects the metadata names but the store lacks refuse it.
    Import {
        #[command(flatten)]
        data: DataArg,
        /// The .scmx file
        file: PathBuf,
        /// The repository name (default: the repository id in hex)
        #[arg(long = "as", value_name = "NAME")]
        name: Option<String>,
        /// An object store directory to copy the repository's objects from
        #[arg(long, value_name = "DIR")]
        objects: Option<PathBuf>,
    },
    /// Inspect the metadata recovery archives offline
    Archive {
        #[command(subcommand)]
        command: ArchiveCommand,
    },
    /// Fold each archive's journal into a logical base and prune what it covers
    ///
    /// For the catalog (unless --repo) and each repository: writes
    /// `base-<end>.scrb` of the database into its archive, reads it back,
    /// selects it with `BASE`, advances the journal floor, releases the
    /// outbox rows below it and deletes segments and older bases the base
    /// covers (the active segment stays until it rolls). Recovery then
    /// starts from the base. Run while the server is stopped; a run killed
    /// anywhere is finished by the next.
    Consolidate(AdminArgs),
    /// Remove snapshot pages no accepted snapshot reaches (offline)
    ///
    /// Marks every page reachable from both roots of every snapshot in a
    /// temporary mark set, then deletes the unreachable ones (pages an
    /// interrupted or superseded preparation left) through the recovery
    /// journal, in batches. A missing root of an accepted commit or of an
    /// active branch's origin, or an unrecovered streamed preparation, is
    /// refused before anything is deleted. The file does not shrink; freed
    /// pages are reused. Run while the server is stopped.
    Reclaim(AdminArgs),
    /// Rebuild a lost metadata.redb (or catalog.redb) from its recovery archive
    ///
    /// Replays every frame of the repository's `metadata.recovery` archive
    /// (without --repo: the data root's `catalog.recovery`) into a
    /// quarantined `.replay` file, verified as it is read, and renames it
    /// into place only when complete; a repository is then opened and
    /// checked by doctor. Refuses while the database file exists (move a
    /// damaged one aside first).
    Recover {
        #[command(flatten)]
        data: DataArg,
        /// The repository name (without it: the catalog)
        #[arg(long, value_name = "NAME")]
        repo: Option<String>,
        /// Rebuild from the independent archive
        #[arg(
            long,
            required_unless_present = "from_checkpoint",
            conflicts_with = "from_checkpoint"
        )]
        from_archive: bool,
        /// Rebuild every lost database from a checkpoint directory instead
        /// (changes after the checkpoint are not in it: repositories get a
        /// new incarnation, every rebuilt database a fresh archive)
        #[arg(long, value_name = "DIR", conflicts_with = "repo")]
        from_checkpoint: Option<PathBuf>,
        /// With --from-checkpoint: the checkpoint number (default: the newest)
        #[arg(long, value_name = "N", requires = "from_checkpoint")]
        checkpoint: Option<u64>,
    },
    /// Inspection for developers (read-only, offline)
    Debug {
        #[command(subcommand)]
        command: DebugCommand,
    },
}

#[derive(Subcommand)]
enum DebugCommand {
    /// Disk use of the data root: bytes per directory, and for every redb
    /// file the rows, stored, metadata and fragmented bytes of each table
    ///
    /// Opens the databases read-only; run while the server is stopped.
    TableSizes(DataArg),
}

#[derive(Subcommand)]
enum ArchiveCommand {
    /// Verify every repository's archive: HEAD, every frame and its chain
    ///
    /// Reads only. A refusal names the file and the byte offset.
    Verify(AdminArgs),
    /// Move the archives to another directory (a second volume)
    ///
    /// Copies the catalog's archive to DIR/catalog.recovery and each
    /// repository's to DIR/repos/<id>/metadata.recovery (only the named
    /// repository's with --repo), flushes and verifies each copy, then
    /// selects it in the database's `.recovery-location`. The previous
    /// directories are kept. Run while the server is stopped.
    Relocate {
        #[command(flatten)]
        args: AdminArgs,
        /// The new archive directory
        #[arg(long, value_name = "DIR")]
        to: PathBuf,
    },
}

#[derive(Subcommand)]
enum LockCommand {
    /// Release the locks on PATHs (files, or every lock under a folder),
    /// whoever holds them
    ///
    /// For a lock whose workspace is gone. While the server runs, a
    /// maintainer or administrator uses `scribe unlock --force` instead
    /// (audited on team servers). Each released lock is printed with its
    /// holder; a PATH without a lock exits 1 (the others are released).
    Release {
        /// The data root directory
        #[arg(long, value_name = "DIR")]
        data: PathBuf,
        /// The repository
        #[arg(long, value_name = "NAME")]
        repo: String,
        /// Repository paths (`/` separators)
        #[arg(required = true)]
        paths: Vec<String>,
        /// On a data root bound to an auth service: release even when the
        /// service cannot record the release in its audit trail
        #[arg(long)]
        unaudited: bool,
    },
}

#[derive(Subcommand)]
enum PinsCommand {
    /// List the workspaces holding upload pins, with their state and intents
    List(AdminArgs),
    /// Release the unfinished upload pins of workspaces
    ///
    /// Deletes the pins (and intent owners) of unfinished submissions of
    /// the chosen workspaces; accepted history is untouched, and a client
    /// whose submission was still pending pins again before it submits.
    /// The objects those pins kept become collectable by compact-objects.
    Abandon {
        #[command(flatten)]
        args: AdminArgs,
        /// The workspace (32 hex digits)
        #[arg(
            long,
            value_name = "ID",
            required_unless_present = "older_than",
            conflicts_with = "older_than"
        )]
        workspace: Option<String>,
        /// Every workspace registered longer ago than this (e.g. 30d), and
        /// every one holding pins without an active registration
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        older_than: Option<Duration>,
    },
}

/// The bucket of an offline tier command: the `--tier` the data root is
/// served with.
#[derive(Args, Clone)]
struct BucketArgs {
    /// The bucket this data root's tier uses (its `serve --tier`); region
    /// and keys come from AWS_REGION, AWS_ACCESS_KEY_ID and
    /// AWS_SECRET_ACCESS_KEY
    #[arg(long, value_name = "s3://BUCKET[/PREFIX]", required = true)]
    tier: String,
    /// The S3 endpoint, e.g. http://127.0.0.1:7480 (default:
    /// AWS_ENDPOINT_URL, else AWS itself)
    #[arg(long, value_name = "URL")]
    tier_endpoint: Option<String>,
}

impl From<BucketArgs> for TierArgs {
    fn from(b: BucketArgs) -> TierArgs {
        TierArgs {
            tier: Some(b.tier),
            tier_endpoint: b.tier_endpoint,
        }
    }
}

#[derive(Args)]
struct TierArgs {
    /// Keep every accepted change in an S3-compatible bucket as well
    /// (`docs/nokv-bridge.md`); region and keys come from AWS_REGION,
    /// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY
    #[arg(long, value_name = "s3://BUCKET[/PREFIX]")]
    tier: Option<String>,
    /// The S3 endpoint, e.g. http://127.0.0.1:7480 (default:
    /// AWS_ENDPOINT_URL, else AWS itself)
    #[arg(long, value_name = "URL")]
    tier_endpoint: Option<String>,
}

#[derive(Subcommand)]
enum TierCommand {
    /// What each repository has in the bucket and what is still to upload
    ///
    /// Reads the status the serving process writes after every upload
    /// pass, or, when the data root is not served, the tier record itself.
    Status(DataArg),
    /// Drop the chunks the bucket holds from the local stores (offline)
    ///
    /// Compacts each repository's object store keeping everything except
    /// the chunks of changes already in the bucket. Served with --tier,
    /// a read that misses locally fetches the object from the bucket.
    Evict {
        #[command(flatten)]
        args: AdminArgs,
        #[command(flatten)]
        tier: BucketArgs,
    },
    /// Check the bucket against the tier record (offline)
    ///
    /// Recomputes every revision's reference count, checks every object's
    /// manifest row against its revision and heads every block. Names
    /// each inconsistency; repairs nothing. Exit 1 when anything is found.
    Verify {
        #[command(flatten)]
        data: DataArg,
        #[command(flatten)]
        tier: BucketArgs,
    },
}

#[derive(Subcommand)]
enum RepoCommand {
    /// Create a repository
    Create {
        #[command(flatten)]
        data: DataArg,
        /// The repository name
        name: String,
        /// Give a new repository a name another one had before a rename
        /// (refused without it: that one's old workspaces may still ask
        /// for it by that name)
        #[arg(long)]
        reuse_name: bool,
    },
    /// Rename a repository (offline)
    ///
    /// The id, history, object store and workspace registrations stay; the
    /// catalog and the repository's descriptor take the new name. On a data
    /// root bound to an auth service its grants and visibility move to the
    /// new name first (an administrator's credential is needed). Workspaces
    /// follow with `scribe workspace set-server URL`.
    Rename {
        #[command(flatten)]
        data: DataArg,
        /// The repository's current name
        old: String,
        /// Its new name
        new: String,
        /// Take a name another repository had before a rename (refused
        /// without it: that one's old workspaces may still ask for it)
        #[arg(long)]
        reuse_name: bool,
        /// With auth: the administrator's credential file (default:
        /// $SCRIBE_CREDENTIAL, else the stored login's credential.pem)
        #[arg(long, value_name = "FILE")]
        credential: Option<PathBuf>,
    },
    /// Retire a repository (offline): keep it, read-only
    ///
    /// Syncs, reads and history keep working; submits, locks and every
    /// other write are refused with repository_retired, naming --contact
    /// (whom to ask). `repo unretire` brings it back.
    Retire {
        #[command(flatten)]
        data: DataArg,
        /// The repository name
        name: String,
        /// Whom users should ask to write to it again (one line)
        #[arg(long, default_value = "")]
        contact: String,
    },
    /// Make a retired repository writable again (offline)
    Unretire {
        #[command(flatten)]
        data: DataArg,
        /// The repository name
        name: String,
    },
    /// Delete a repository (offline), keeping its data aside
    ///
    /// Without --yes, only says what would happen. With --yes and --confirm
    /// (the name or id typed again): its grants and visibility go from the
    /// auth service (when bound), its directory moves to
    /// <data>/deleted/<id>-<unix ms>/ (remove it yourself when sure), and
    /// its catalog entry goes. On a data root with S3 tier state, name the
    /// bucket (--tier, as `serve` does): the repository's history there
    /// goes too (its revisions collected, its index records and journal
    /// deleted). Run again, it finishes a deletion that was interrupted.
    Delete {
        #[command(flatten)]
        data: DataArg,
        /// The repository name (or, to finish an interrupted deletion, its id)
        name: String,
        #[command(flatten)]
        tier: TierArgs,
        /// Delete (without it, only say what would happen)
        #[arg(long)]
        yes: bool,
        /// The repository's name or id, typed again
        #[arg(long, value_name = "NAME_OR_ID")]
        confirm: Option<String>,
        /// With auth: the administrator's credential file (default:
        /// $SCRIBE_CREDENTIAL, else the stored login's credential.pem)
        #[arg(long, value_name = "FILE")]
        credential: Option<PathBuf>,
    },
}

fn hint(e: &anyhow::Error) -> Option<&'static str> {
    for cause in e.chain() {
        if let Some(OpenError::InUse { .. }) = cause.downcast_ref::<OpenError>() {
            return Some(
                "stop the process that serves this data root, or connect to it with scribe://",
            );
        }
        if let Some(admin::AdminError::Open(OpenError::InUse { .. })) =
            cause.downcast_ref::<admin::AdminError>()
        {
            return Some(
                "stop the server first; offline commands need the data root to themselves",
            );
        }
        // The store's error reaches here as text through the repository's.
        if matches!(
            cause.downcast_ref::<scribe_objects::StoreError>(),
            Some(scribe_objects::StoreError::CorruptPack { .. })
        ) {
            return Some(admin::DAMAGED_PACK_WAY_OUT);
        }
        let text = cause.to_string();
        if let Some(h) = admin::open_way_out(&text) {
            return Some(h);
        }
        // A directory holding no data root (a mistyped --data, or one
        // never initialised): its descriptor or its lock file is missing.
        if ["/SCRIBE_FORMAT: ", "/LOCK: "]
            .iter()
            .any(|f| text.contains(f))
            && e.chain()
                .filter_map(|c| c.downcast_ref::<std::io::Error>())
                .any(|io| io.kind() == std::io::ErrorKind::NotFound)
        {
            return Some(
                "there is no data root at --data: check the path, or make one with \
                 `scribe-server init --data DIR`",
            );
        }
    }
    None
}

fn main() -> ExitCode {
    // An operator's `MIMALLOC_PURGE_DELAY` wins.
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: a plain option store of the allocator in use, before
        // any other thread starts.
        unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) };
    }
    no_huge_pages();
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("Error: {e}");
            for cause in e.chain().skip(1) {
                eprintln!("Caused by: {cause}");
            }
            if let Some(h) = hint(&e) {
                eprintln!("Hint: {h}");
            }
            ExitCode::from(1)
        }
    }
}

fn print_report(what: &str, r: &Report) -> ExitCode {
    for n in &r.notes {
        println!("{n}");
    }
    for p in &r.problems {
        println!("problem: {p}");
    }
    if r.is_clean() {
        eprintln!("{what}: clean");
        ExitCode::SUCCESS
    } else {
        eprintln!("{what}: {} problems", r.problems.len());
        ExitCode::from(1)
    }
}

/// Before a `repo` command: open the data root once so that what its
/// opening puts right (a descriptor an interrupted rename left with the
/// old name) is said even when the command is then refused. A data root
/// that does not open is left to the command, which names why.
fn say_healed(data: &Path) {
    if let Ok(root) = scribe_metadata::DataRoot::open(data) {
        for h in root.healed() {
            eprintln!("scribe-server: {h}");
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    if let Command::Repo { command } = &cli.command {
        let (RepoCommand::Create { data, .. }
        | RepoCommand::Rename { data, .. }
        | RepoCommand::Retire { data, .. }
        | RepoCommand::Unretire { data, .. }
        | RepoCommand::Delete { data, .. }) = command;
        say_healed(&data.data);
    }
    match cli.command {
        Command::Init(d) => {
            Service::create(&d.data)
                .with_context(|| format!("cannot create a data root at {}", d.data.display()))?;
            eprintln!("created data root {}", d.data.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::AuthInit {
            data,
            auth,
            namespace,
            name,
            hosts,
            credential,
            auth_ca,
        } => auth_init(data.data, auth, namespace, name, hosts, credential, auth_ca),
        Command::Repo {
            command:
                RepoCommand::Create {
                    data,
                    name,
                    reuse_name,
                },
        } => {
            let svc = Service::open(&data.data)
                .with_context(|| format!("cannot open data root {}", data.data.display()))?;
            let info = scribe_server::service::dispatch::repo_create_with(&svc, &name, reuse_name)
                .map_err(|f| anyhow!("{}: {}", f.code, f.message))
                .with_context(|| {
                    format!(
                        "cannot create repository {}",
                        scribe_format::echo::echo(&name)
                    )
                })?;
            println!("{}", info.id.to_hex());
            eprintln!("created repository {name}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Repo {
            command:
                RepoCommand::Rename {
                    data,
                    old,
                    new,
                    reuse_name,
                    credential,
                },
        } => {
            let admin = admin_credential_if_bound(&data.data, credential)?;
            let (id, report) =
                scribe_server::repos::rename(&data.data, &old, &new, reuse_name, admin.as_ref())?;
            println!("{}", id.to_hex());
            Ok(print_report("repo rename", &report))
        }
        Command::Repo {
            command:
                RepoCommand::Retire {
                    data,
                    name,
                    contact,
                },
        } => {
            let report = scribe_server::repos::set_retired(&data.data, &name, true, &contact)?;
            Ok(print_report("repo retire", &report))
        }
        Command::Repo {
            command: RepoCommand::Unretire { data, name },
        } => {
            let report = scribe_server::repos::set_retired(&data.data, &name, false, "")?;
            Ok(print_report("repo unretire", &report))
        }
        Command::Repo {
            command:
                RepoCommand::Delete {
                    data,
                    name,
                    tier,
                    yes,
                    confirm,
                    credential,
                },
        } => {
            let admin = if yes {
                admin_credential_if_bound(&data.data, credential)?
            } else {
                None
            };
            let provider = match tier.tier {
                Some(_) => Some(provider(&tier)?),
                None => None,
            };
            let d = scribe_server::repos::delete(
                &data.data,
                &name,
                &scribe_server::repos::DeleteOptions { yes, confirm },
                admin.as_ref(),
                provider,
                &pause_at,
            )?;
            Ok(print_report(
                if d.deleted {
                    "repo delete"
                } else {
                    "repo delete (nothing deleted)"
                },
                &d.report,
            ))
        }
        Command::Serve {
            data,
            listen,
            runtime_dir,
            tls_cert,
            tls_key,
            max_connections,
            max_connections_per_address,
            first_request_timeout,
            upload_idle_timeout,
            max_pins_per_workspace,
            tier,
            ack,
            tier_ack_timeout,
            cache_bytes,
            auth_recheck,
        } => serve(
            &data.data,
            &listen,
            runtime_dir.as_deref(),
            (tls_cert, tls_key, auth_recheck),
            ListenOptions {
                max_connections,
                max_connections_per_address,
                timeouts: Timeouts {
                    first_request: first_request_timeout,
                    upload_idle: upload_idle_timeout,
                    ..Timeouts::default()
                },
                ..ListenOptions::default()
            },
            max_pins_per_workspace,
            (tier, ack, tier_ack_timeout, cache_bytes),
        ),
        Command::Tier {
            command: TierCommand::Status(d),
        } => tier_status(&d.data),
        Command::Tier {
            command: TierCommand::Verify { data, tier },
        } => tier_verify(&data.data, &tier.into()),
        Command::Tier {
            command: TierCommand::Evict { args, tier },
        } => {
            let incarnation = {
                let service = Service::open(&args.data)
                    .with_context(|| format!("cannot open data root {}", args.data.display()))?;
                service.root().incarnation().to_string()
            };
            let record = open_tier(&args.data, &incarnation, &tier.into())?;
            Ok(print_report(
                "tier evict",
                &scribe_server::tier::evict(&args.data, &record, args.repo.as_deref())?,
            ))
        }
        Command::Obliterate {
            data,
            repo,
            tier,
            yes,
            files,
        } => {
            let incarnation = {
                let service = Service::open(&data)
                    .with_context(|| format!("cannot open data root {}", data.display()))?;
                service.root().incarnation().to_string()
            };
            let record = open_tier(&data, &incarnation, &tier.into())?;
            Ok(print_report(
                "obliterate",
                &scribe_server::tier::obliterate(&data, &record, &repo, &files, yes)?,
            ))
        }
        Command::Doctor(a) => Ok(print_report(
            "doctor",
            &admin::doctor(&a.data, a.repo.as_deref())?,
        )),
        Command::Verify { args: a, repair } => Ok(if repair {
            print_report(
                "verify --repair",
                &admin::repair(&a.data, a.repo.as_deref())?,
            )
        } else {
            print_report("verify", &admin::verify(&a.data, a.repo.as_deref())?)
        }),
        Command::RebuildLocator(a) => Ok(print_report(
            "rebuild-locator",
            &admin::rebuild_locator(&a.data, a.repo.as_deref())?,
        )),
        Command::CompactObjects {
            args,
            incremental,
            budget,
        } => {
            let opts = scribe_objects::CompactOptions {
                incremental,
                budget: budget.unwrap_or(u64::MAX),
                ..Default::default()
            };
            Ok(print_report(
                "compact-objects",
                &admin::compact_objects(&args.data, args.repo.as_deref(), &opts)?,
            ))
        }
        Command::RecoverSubmissions(a) => Ok(print_report(
            "recover-submissions",
            &admin::recover_submissions(&a.data, a.repo.as_deref())?,
        )),
        Command::Pins {
            command: PinsCommand::List(a),
        } => Ok(print_report(
            "pins list",
            &admin::pins_list(&a.data, a.repo.as_deref())?,
        )),
        Command::Pins {
            command:
                PinsCommand::Abandon {
                    args,
                    workspace,
                    older_than,
                },
        } => {
            let which = match (workspace, older_than) {
                (Some(hex), _) => admin::AbandonPins::Workspace(
                    scribe_format::WorkspaceId::from_hex(&hex)
                        .map_err(|e| anyhow!("--workspace {hex:?}: {e}"))?,
                ),
                (None, Some(d)) => admin::AbandonPins::OlderThan(d),
                (None, None) => return Err(anyhow!("give --workspace or --older-than")),
            };
            Ok(print_report(
                "pins abandon",
                &admin::pins_abandon(&args.data, args.repo.as_deref(), which)?,
            ))
        }
        Command::Lock {
            command:
                LockCommand::Release {
                    data,
                    repo,
                    paths,
                    unaudited,
                },
        } => Ok(print_report(
            "lock release",
            &admin::lock_release(&data, &repo, &paths, unaudited)?,
        )),
        Command::Migrate { data, inspect } => migrate(&data.data, inspect),
        Command::Archive {
            command: ArchiveCommand::Verify(a),
        } => Ok(print_report(
            "archive verify",
            &admin::archive_verify(&a.data, a.repo.as_deref())?,
        )),
        Command::Archive {
            command: ArchiveCommand::Relocate { args, to },
        } => Ok(print_report(
            "archive relocate",
            &admin::archive_relocate(&args.data, args.repo.as_deref(), &std::path::absolute(&to)?)?,
        )),
        Command::Reclaim(a) => Ok(print_report(
            "reclaim",
            &admin::reclaim(&a.data, a.repo.as_deref(), &pause_at)?,
        )),
        Command::Debug {
            command: DebugCommand::TableSizes(d),
        } => {
            print!("{}", scribe_metadata::footprint::report(&d.data)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Consolidate(a) => Ok(print_report(
            "consolidate",
            &admin::consolidate(&a.data, a.repo.as_deref())?,
        )),
        Command::Recover {
            data,
            from_checkpoint: Some(from),
            checkpoint,
            ..
        } => {
            let r = scribe_metadata::checkpoint::recover_data_root(&data.data, &from, checkpoint)
                .with_context(|| {
                format!(
                    "cannot recover {} from checkpoint {}",
                    data.data.display(),
                    from.display()
                )
            })?;
            for (path, d) in &r.rebuilt {
                println!(
                    "{}: rebuilt {} from {} manifest(s): journal end {}, {} record(s)",
                    d.key,
                    path.display(),
                    d.manifests,
                    d.replayed.end,
                    d.replayed.records
                );
            }
            for p in &r.present {
                println!("{}: present, left alone", p.display());
            }
            eprintln!(
                "recovered {} database(s) of {} from checkpoint {}",
                r.rebuilt.len(),
                data.data.display(),
                r.sequence
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Checkpoint { data, to, verify } => {
            if verify {
                let done = scribe_metadata::checkpoint::verify(&to, None)
                    .with_context(|| format!("checkpoint {} does not verify", to.display()))?;
                for d in &done {
                    println!(
                        "{}: {} manifest(s), journal end {}",
                        d.key, d.manifests, d.replayed.end
                    );
                }
                eprintln!("checkpoint verify: {} database(s) clean", done.len());
                return Ok(ExitCode::SUCCESS);
            }
            let r = scribe_metadata::checkpoint::checkpoint(&data.data, &to, &pause_at)
                .with_context(|| {
                    format!(
                        "cannot checkpoint {} into {}",
                        data.data.display(),
                        to.display()
                    )
                })?;
            for d in &r.databases {
                println!(
                    "{} {} {}..{} {} byte(s)",
                    d.key,
                    if d.full { "full" } else { "incremental" },
                    d.from,
                    d.end,
                    d.bytes
                );
            }
            eprintln!(
                "checkpoint {} of {} ({}) published at {}",
                r.sequence,
                data.data.display(),
                if r.online { "served" } else { "stopped" },
                r.dir.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Recover {
            data,
            repo,
            from_archive: _,
            ..
        } => Ok(print_report(
            "recover --from-archive",
            &admin::recover_from_archive(&data.data, repo.as_deref())?,
        )),
        Command::Backup { data, to, tier } => {
            // A tiered data root's stores are a cache: what they gave back
            // to the bucket is only there, and the tier record that finds
            // it is the server's.
            let record = if scribe_server::tier::dir(&data.data)
                .join("tier.redb")
                .exists()
            {
                if tier.tier.is_none() {
                    bail!(
                        "{} has S3 tier state: its local object stores are a cache, and chunks \
                         they gave back to the bucket (`tier evict`, --cache-bytes) are only \
                         there; a backup fetches them back: stop the server and name the \
                         bucket as `serve` does (--tier s3://BUCKET[/PREFIX] --tier-endpoint \
                         URL); nothing written",
                        data.data.display()
                    );
                }
                let incarnation = Service::open(&data.data)
                    .with_context(|| {
                        format!(
                            "a backup of a data root with S3 tier state runs with the server \
                             stopped (the tier record is the server's): cannot open {}",
                            data.data.display()
                        )
                    })?
                    .root()
                    .incarnation()
                    .to_string();
                Some(open_tier(&data.data, &incarnation, &tier)?)
            } else {
                None
            };
            let fill = record.as_ref().map(scribe_server::tier::backup_fill);
            let bar = progress_bar("backup");
            let report = scribe_metadata::backup::backup_filled(
                &data.data,
                &to,
                &|done, total| bar.update(done, total),
                &pause_at,
                fill.as_ref()
                    .map(|f| f as scribe_metadata::backup::FillFn<'_>),
            )
            .with_context(|| {
                format!(
                    "cannot back up {} into {}",
                    data.data.display(),
                    to.display()
                )
            })?;
            bar.finish();
            for r in &report.manifest.repositories {
                println!("{} {} head={}", r.id.to_hex(), r.name, r.head);
            }
            if report.filled > 0 {
                eprintln!(
                    "backup: {} chunk(s) the local stores had given back to the bucket fetched \
                     from it (each checked against its id) into the backup",
                    report.filled
                );
            }
            eprintln!(
                "backed up {} ({}) into {}: {} file(s), {} byte(s), {} repositor(ies)",
                data.data.display(),
                if report.online { "served" } else { "stopped" },
                to.display(),
                report.manifest.files.len(),
                report.bytes,
                report.manifest.repositories.len()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Restore {
            data,
            from_tier: Some(url),
            tier_endpoint,
            shard,
            ..
        } => restore_from_tier(&data.data, url, tier_endpoint, shard),
        Command::Restore {
            data,
            from,
            archive,
            ..
        } => {
            let from = from.ok_or_else(|| anyhow!("--from DIR or --from-tier URL is required"))?;
            let bar = progress_bar("restore");
            let archive = archive.map(std::path::absolute).transpose()?;
            let r = scribe_metadata::backup::restore_backup_with_archive(
                &from,
                &data.data,
                archive.as_deref(),
                &|done, total| bar.update(done, total),
                &pause_at,
            )
            .with_context(|| {
                format!(
                    "cannot restore {} into {}",
                    from.display(),
                    data.data.display()
                )
            })?;
            bar.finish();
            println!("{}", hex::encode(r.incarnation));
            eprintln!(
                "restored {} file(s) into {}: incarnation {} (was {}), {} repositor(ies) re-incarnated",
                r.files,
                data.data.display(),
                hex::encode(r.incarnation),
                hex::encode(r.from_incarnation),
                r.repositories.len()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Export { repo, data, to } => {
            let bar = progress_bar("export");
            let r = scribe_metadata::export::export(&data.data, &repo, &to, &|done, total| {
                bar.update(done, total)
            })
            .with_context(|| {
                format!(
                    "cannot export {} to {}",
                    scribe_format::echo::echo(&repo),
                    to.display()
                )
            })?;
            bar.finish();
            println!("{}", hex::encode(r.digest));
            eprintln!(
                "exported {repo} ({}) to {}: {} table(s), {} row(s), {} byte(s)",
                r.repository,
                to.display(),
                r.tables,
                r.rows,
                r.bytes
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Import {
            data,
            file,
            name,
            objects,
        } => {
            let bar = progress_bar("import");
            let r = admin::import(
                &data.data,
                &file,
                name.as_deref(),
                objects.as_deref(),
                &|done, total| bar.update(done, total),
                &pause_at,
            )
            .with_context(|| format!("cannot import {}", file.display()))?;
            bar.finish();
            println!("{}", r.repository.to_hex());
            eprintln!(
                "imported {} as repository {} ({}): {} table(s), {} row(s), {} object file(s) copied, incarnation {}",
                file.display(),
                r.name,
                r.repository,
                r.tables,
                r.rows,
                r.objects_copied,
                hex::encode(r.incarnation)
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Progress of a long command on stderr (drawn only on a terminal).
struct Bar(indicatif::ProgressBar);

fn progress_bar(what: &str) -> Bar {
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(0),
        indicatif::ProgressDrawTarget::stderr_with_hz(4),
    );
    if let Ok(style) = indicatif::ProgressStyle::with_template(&format!(
        "{what} {{bar:30}} {{bytes}}/{{total_bytes}} {{bytes_per_sec}} {{eta}}"
    )) {
        bar.set_style(style);
    }
    Bar(bar)
}

impl Bar {
    fn update(&self, done: u64, total: u64) {
        if total > 0 && self.0.length() != Some(total) {
            self.0.set_length(total);
        }
        self.0.set_position(done);
    }

    fn finish(&self) {
        self.0.finish_and_clear();
    }
}

/// Fault-injection tests (real processes): with
/// `SCRIBE_SERVER_PAUSE_AT=STEP[:N]`, backup, restore, import and `repo
/// delete` stop at the Nth time (default 1) they reach STEP (`file`,
/// `metadata`, `manifest`, `rows`, `verified`, `reincarnated`,
/// `repo-delete-moved`), say so on stderr and
/// wait to be killed. Unset, this does nothing.
fn pause_at(step: &str) {
    static SEEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let Some(want) = std::env::var_os("SCRIBE_SERVER_PAUSE_AT") else {
        return;
    };
    let want = want.to_string_lossy().into_owned();
    let (name, n) = match want.split_once(':') {
        Some((s, n)) => (s.to_owned(), n.parse().unwrap_or(1)),
        None => (want.clone(), 1),
    };
    if name != step {
        return;
    }
    let seen = SEEN.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
    if seen == n {
        eprintln!("scribe-server: paused at {step}");
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
}

fn migrate(data: &Path, inspect: bool) -> Result<ExitCode> {
    let r = admin::migrate(data, inspect)?;
    for n in &r.notes {
        println!("{n}");
    }
    let Some(first) = r.problems.first() else {
        if r.notes
            .iter()
            .any(|n| n.contains("migrated from revision") || n.contains("-> v2"))
        {
            eprintln!("migrate: done");
        } else if !inspect {
            eprintln!("migrate: nothing to migrate");
        }
        return Ok(ExitCode::SUCCESS);
    };
    for p in &r.problems {
        println!("problem: {p}");
    }
    let more = match r.problems.len() {
        1 => String::new(),
        n => format!(" (and {} more listed above)", n - 1),
    };
    eprintln!("Error: cannot migrate {}: {first}{more}", data.display());
    eprintln!(
        "Hint: nothing was changed; serve this data root with the scribe-server build that wrote it"
    );
    Ok(ExitCode::from(1))
}

/// A duration: a whole number with a unit, `ms`, `s`, `m`, `h`, `d` or
/// `w` (a bare number is seconds): `500ms`, `10s`, `30d`.
/// The stored login's directory (as `scribe login` picks it):
/// `SCRIBE_CONFIG_DIR`, else `$XDG_CONFIG_HOME/scribe`, else `~/.config/scribe`.
fn login_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("SCRIBE_CONFIG_DIR") {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d).join("scribe"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config").join("scribe"))
}

/// An administrator's credential (certificate, key PEM) for `what`: the
/// file given, else $SCRIBE_CREDENTIAL, else the stored login's.
fn admin_credential(credential: Option<PathBuf>, what: &str) -> Result<(String, String)> {
    let credential = credential
        .or_else(|| std::env::var_os("SCRIBE_CREDENTIAL").map(PathBuf::from))
        .or_else(|| login_dir().map(|d| d.join("credential.pem")))
        .ok_or_else(|| anyhow!("give --credential (no stored login found)"))?;
    let text = std::fs::read_to_string(&credential)
        .with_context(|| format!("cannot read {}", credential.display()))
        .with_context(|| {
            format!(
                "{what} needs an administrator's credential: sign in with `scribe login --admin` \
                 (or set SCRIBE_CREDENTIAL)"
            )
        })?;
    let at = text
        .find("-----BEGIN PRIVATE KEY-----")
        .ok_or_else(|| anyhow!("{} holds no private key", credential.display()))?;
    let (cert, key) = text.split_at(at);
    Ok((cert.to_owned(), key.to_owned()))
}

/// The administrator's credential when the data root at `data` is bound
/// to an auth service (`repo rename` / `repo delete` change its grants);
/// `None` otherwise.
fn admin_credential_if_bound(
    data: &Path,
    credential: Option<PathBuf>,
) -> Result<Option<(String, String)>> {
    let bound = scribe_server::team::requires_auth(data).unwrap_or(false);
    if !bound {
        return Ok(None);
    }
    Ok(Some(admin_credential(
        credential,
        "changing a repository's name",
    )?))
}

fn auth_init(
    data: PathBuf,
    auth: Option<String>,
    namespace: String,
    name: String,
    hosts: Vec<String>,
    credential: Option<PathBuf>,
    auth_ca: Option<PathBuf>,
) -> Result<ExitCode> {
    let stored = |file: &str| login_dir().map(|d| d.join(file));
    let read = |p: &Path| {
        std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))
    };
    let auth = match auth {
        Some(a) => a,
        None => {
            let p = stored("auth-service")
                .ok_or_else(|| anyhow!("give --auth (no stored login found)"))?;
            read(&p)
                .context("give --auth, or sign in with `scribe login` first")?
                .trim()
                .to_owned()
        }
    };
    let (cert, key) = admin_credential(credential, "auth-init")?;
    let ca = auth_ca
        .or_else(|| stored("auth-ca.pem"))
        .ok_or_else(|| anyhow!("give --auth-ca (no stored login found)"))?;
    let access_ca_pem = read(&ca)?;
    let files = scribe_server::team::auth_init(&scribe_server::team::AuthInitOptions {
        data: data.clone(),
        auth,
        namespace,
        name,
        hosts,
        access_ca_pem,
        credential: (cert, key),
    })
    .map_err(|e| {
        let code = e.code();
        // A registered name stays registered (its key was this server's,
        // or a lost one's): the way on is another name.
        let hint = if code == scribe_format::ErrorCode::AlreadyExists {
            "\n(a server name stays registered: run auth-init again with another --name, as \
             after `restore --from-tier`, whose bucket never holds the server's private key; \
             an administrator revokes the old server's credential with \
             `scribe admin credential revoke`)"
        } else {
            ""
        };
        anyhow!("error[{code}]: {e}{hint}")
    })
    .with_context(|| format!("cannot bind {} to the auth service", data.display()))?;
    println!("{}", files.settings.server_id);
    eprintln!(
        "bound {} to {} as server {} (namespace {}): serve it with `scribe-server serve`; it \
         serves TLS to signed-in users only",
        data.display(),
        files.settings.auth,
        files.settings.name,
        files.settings.namespace
    );
    Ok(ExitCode::SUCCESS)
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (e.g. 500ms, 10s, 30d)"))?;
    let ms: u64 = match unit {
        "ms" => 1,
        "" | "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "w" => 604_800_000,
        _ => {
            return Err(format!(
                "{text:?}: unknown unit {unit:?} (ms, s, m, h, d, w)"
            ))
        }
    };
    n.checked_mul(ms)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("{text:?} is too long"))
}

/// Most connections a limit may name: far above what one process's file
/// descriptors allow, far below what the listener's counter can hold.
const MAX_CONNECTIONS_LIMIT: usize = 1 << 20;

/// A connection limit: 1 to [`MAX_CONNECTIONS_LIMIT`].
fn parse_connections(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_CONNECTIONS_LIMIT).contains(&n) => Ok(n),
        _ => Err(format!(
            "{text:?} is not a number of connections from 1 to {MAX_CONNECTIONS_LIMIT}"
        )),
    }
}

/// Write `contents` to `dir/name` atomically.
fn write_runtime(dir: &Path, name: &str, contents: &str) -> Result<()> {
    scribe_format::runtime::write(dir, name, contents)
        .with_context(|| format!("cannot write {}", dir.join(name).display()))
}

fn serve(
    data: &Path,
    listen: &str,
    runtime_dir: Option<&Path>,
    (tls_cert, tls_key, auth_recheck): (Option<PathBuf>, Option<PathBuf>, Duration),
    options: ListenOptions,
    max_pins_per_workspace: u64,
    (tier, ack, ack_timeout, cache_bytes): (
        TierArgs,
        scribe_server::tier::Ack,
        Duration,
        Option<u64>,
    ),
) -> Result<ExitCode> {
    use scribe_server::team;
    let team_files = if team::requires_auth(data)
        .with_context(|| format!("cannot serve data root {}", data.display()))?
    {
        if tls_cert.is_some() {
            return Err(anyhow!(
                "{} serves signed-in users (auth-init): it serves TLS with the certificate \
                 scribe-auth issued; do not give --tls-cert/--tls-key",
                data.display()
            ));
        }
        let files = team::AuthFiles::load(data).with_context(|| {
            format!(
                "{} requires auth (auth-ownership-v1) but its auth files are missing or \
                 unreadable: finish `scribe-server auth-init` (on a data root rebuilt by \
                 `restore --from-tier`, whose bucket never holds the server's private key, \
                 run it with a new --name)",
                data.display()
            )
        })?;
        Some(files)
    } else {
        None
    };
    let tls = match (&team_files, tls_cert, tls_key) {
        (Some(f), _, _) => Some(f.server_tls()?),
        (None, Some(c), Some(k)) => Some(scribe_server::tls::server_config(&c, &k)?),
        _ => None,
    };
    let scheme = if tls.is_some() { "scribes" } else { "scribe" };
    // Runtime files a killed server left: gone now if its process is, so
    // nothing reads a dead address while this one opens; a running pid is
    // left until the data root's LOCK is ours (it may be the server that
    // holds it, which Service::open then names).
    let mut found = runtime_dir.and_then(scribe_server::runtime::leftover);
    if let (Some(dir), Some(l)) = (runtime_dir, &found) {
        if !l.alive() {
            scribe_server::runtime::clear(dir)
                .with_context(|| format!("cannot clear runtime directory {}", dir.display()))?;
            eprintln!(
                "scribe-server: removed stale runtime files in {} ({l}): the server that wrote \
                 them did not stop cleanly",
                dir.display()
            );
            found = None;
        }
    }
    let mut service = Service::open(data);
    // A cache trim (--cache-bytes) killed during its store swap stops its
    // repository's opening: finish the recorded swap, then open again.
    let stopped = match &service {
        Err(_) => true,
        Ok(s) => !s.root().set_aside().is_empty(),
    };
    if stopped && tier.tier.is_some() && scribe_server::tier::trims_pending(data) {
        drop(service);
        scribe_server::tier::finish_pending_trims(data);
        service = Service::open(data);
    }
    let service = service.with_context(|| format!("cannot serve data root {}", data.display()))?;
    for h in service.root().healed() {
        eprintln!("scribe-server: {h}");
    }
    for a in service.root().set_aside() {
        let way = match admin::open_way_out(&a.cause) {
            Some(w) => format!("stop the server: {w}"),
            None => format!(
                "stop the server and run `scribe-server doctor --data {} --repo {}`",
                data.display(),
                a.name
            ),
        };
        eprintln!(
            "scribe-server: warning: repository {:?} is set aside (refused by name while the \
             others serve): {}; {way}",
            a.name, a.cause
        );
    }
    // metadata.redb's free pages after a streamed import go back once the
    // repository has been unused for a few seconds (docs/metadata.md).
    service.start_idle_compaction(
        std::time::Duration::from_secs(2),
        std::time::Duration::from_secs(5),
    );
    if let Some(files) = &team_files {
        let authorizer = team::TeamAuthorizer::new(data, files, auth_recheck)
            .with_context(|| format!("cannot serve data root {}", data.display()))?;
        if let Err(f) = authorizer.check_revision() {
            eprintln!(
                "scribe-server: warning: auth service {}: {}: {} (requests are refused with \
                 auth_unavailable until it answers)",
                files.settings.auth, f.code, f.message
            );
        }
        service.set_authorizer(std::sync::Arc::new(authorizer));
        eprintln!(
            "scribe-server: signed-in users only: auth service {}, namespace {}, server {}",
            files.settings.auth, files.settings.namespace, files.settings.name
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    service.set_max_pins_per_workspace(max_pins_per_workspace);
    if cache_bytes.is_some() && tier.tier.is_none() {
        return Err(anyhow!(
            "--cache-bytes needs --tier: only chunks the bucket holds may leave the local store"
        ));
    }
    let tier = match tier.tier {
        Some(_) => {
            let record = open_tier(data, service.root().incarnation(), &tier)?;
            let t = scribe_server::tier::TierService::start(
                &service,
                record,
                ack,
                ack_timeout,
                cache_bytes,
            );
            eprintln!(
                "scribe-server: tier {} (ack {ack:?})",
                tier.tier.as_deref().unwrap_or_default()
            );
            Some(t)
        }
        None => None,
    };
    let options = ListenOptions {
        tls,
        log: true,
        ..options
    };
    let listener = rt
        .block_on(Listener::bind(listen, service.clone(), options))
        .with_context(|| format!("cannot listen on {listen}"))?;
    let addr = listener.local_addr().context("no local address")?;
    if let (Some(dir), Some(l)) = (runtime_dir, &found) {
        // The data root is ours: that process does not serve it.
        eprintln!(
            "scribe-server: replacing runtime files in {} ({l}): that process does not serve \
             this data root",
            dir.display()
        );
        scribe_server::runtime::clear(dir)
            .with_context(|| format!("cannot clear runtime directory {}", dir.display()))?;
    }
    if let Some(dir) = runtime_dir {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create runtime directory {}", dir.display()))?;
        write_runtime(
            dir,
            scribe_server::runtime::PID_FILE,
            &format!("{}\n", std::process::id()),
        )?;
        write_runtime(
            dir,
            scribe_server::runtime::LISTEN_FILE,
            &format!("{addr}\n"),
        )?;
    }
    eprintln!(
        "scribe-server: serving {} on {scheme}://{addr} (pid {})",
        data.display(),
        std::process::id()
    );
    let result = rt.block_on(async {
        let stop = shutdown_signal()?;
        listener.run(stop).await;
        anyhow::Ok(())
    });
    drop(rt);
    if let Some(t) = &tier {
        t.stop();
    }
    drop(tier);
    // Every connection has finished: release the data root, then the files.
    drop(service);
    if let Some(dir) = runtime_dir {
        let _ = scribe_server::runtime::clear(dir);
    }
    result?;
    eprintln!("scribe-server: stopped");
    Ok(ExitCode::SUCCESS)
}

fn provider(args: &TierArgs) -> Result<std::sync::Arc<dyn nokv_bridge::tier::Provider>> {
    let url = args
        .tier
        .as_deref()
        .ok_or_else(|| anyhow!("--tier s3://BUCKET[/PREFIX] is required"))?;
    let mut cfg = nokv_bridge::tier::S3Config::from_url(url, |k| std::env::var(k).ok())
        .map_err(|e| anyhow!("--tier: {e}"))?;
    if let Some(e) = &args.tier_endpoint {
        cfg.endpoint = Some(e.clone());
    }
    Ok(std::sync::Arc::new(
        nokv_bridge::tier::S3Provider::new(&cfg).context("cannot configure the S3 tier")?,
    ))
}

fn open_tier(data: &Path, incarnation: &str, args: &TierArgs) -> Result<nokv_bridge::tier::Tier> {
    scribe_server::tier::open_record(data, incarnation, provider(args)?)
        .context("cannot open the tier record")
}

fn restore_from_tier(
    data: &Path,
    url: String,
    tier_endpoint: Option<String>,
    shard: Option<String>,
) -> Result<ExitCode> {
    let shard = match shard {
        Some(s) => Some(
            u32::from_str_radix(&s, 16)
                .ok()
                .filter(|_| s.len() == 8)
                .ok_or_else(|| anyhow!("--shard {s}: 8 hex digits"))?,
        ),
        None => None,
    };
    let p = provider(&TierArgs {
        tier: Some(url.clone()),
        tier_endpoint,
    })?;
    let r = scribe_server::tier::restore_from_tier(p, data, shard)
        .map_err(|e| anyhow!("cannot restore {} from the tier {url}: {e}", data.display()))?;
    println!("{}", r.incarnation);
    for s in &r.passed_over {
        eprintln!(
            "restore --from-tier: passed over journal shard {s:08x}: it shipped its descriptor \
             but no catalog journal step (stopped before it shipped anything to rebuild)"
        );
    }
    for (name, key) in &r.deleted {
        eprintln!("restore --from-tier: {name}: deleted ({key}): not restored");
    }
    for (name, head) in &r.repositories {
        eprintln!("restore --from-tier: {name}: changes 1..={head} rebuilt");
    }
    for name in &r.retired {
        eprintln!("restore --from-tier: {name}: retired (read-only, as it was)");
    }
    if r.former_names > 0 {
        eprintln!(
            "restore --from-tier: {} former name(s) of renamed repositories kept from reuse",
            r.former_names
        );
    }
    eprintln!(
        "restore --from-tier: {} commits, change sets and manifests put back into the local stores \
         (chunks are read from the bucket when asked for)",
        r.kept_objects
    );
    eprintln!(
        "restored {} from {url} (journal shard {:08x}, block shard {:08x}): incarnation {} (was {})",
        data.display(),
        r.journal_shard,
        r.block_shard,
        r.incarnation,
        r.from_incarnation
    );
    if r.problems.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    for p in &r.problems {
        eprintln!("restore --from-tier: tier verify: {p}");
    }
    Ok(ExitCode::from(1))
}

fn tier_status(data: &Path) -> Result<ExitCode> {
    let status = scribe_server::tier::dir(data).join("status");
    match std::fs::read_to_string(&status) {
        Ok(s) => {
            print!("{s}");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(anyhow!(
            "{} has no tier status: it has not been served with --tier",
            data.display()
        )),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", status.display())),
    }
}

fn tier_verify(data: &Path, args: &TierArgs) -> Result<ExitCode> {
    let service =
        Service::open(data).with_context(|| format!("cannot open data root {}", data.display()))?;
    let tier = open_tier(data, service.root().incarnation(), args)?;
    let problems = tier.verify().context("cannot verify the tier")?;
    let report = Report {
        problems,
        ..Report::default()
    };
    Ok(print_report("tier verify", &report))
}

/// Resolves when the operator asks the server to stop: SIGTERM or SIGINT on
/// Unix, Ctrl-C (or Ctrl-Break / service stop delivered as Ctrl-C) on Windows.
#[cfg(unix)]
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => eprintln!("scribe-server: SIGTERM, shutting down"),
            _ = int.recv() => eprintln!("scribe-server: SIGINT, shutting down"),
        }
    })
}

/// Resolves when the operator asks the server to stop: SIGTERM or SIGINT on
/// Unix, Ctrl-C (or Ctrl-Break / service stop delivered as Ctrl-C) on Windows.
#[cfg(not(unix))]
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    Ok(async {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("scribe-server: Ctrl-C, shutting down");
        }
    })
}

/// Every `scribe-server` command line README.md and docs/deploy.md show is one
/// this build's argument parser accepts.
#[cfg(test)]
mod deploy_doc {
    use clap::Parser;

    #[test]
    fn every_documented_command_line_parses() {
        let seen = scribe_testkit::docs::parse_documented_commands("scribe-server", |argv| {
            super::Cli::try_parse_from(argv).map(drop)
        });
        assert!(seen >= 15, "only {seen} command lines found");
    }
}

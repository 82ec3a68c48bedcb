//! Workspaces: create (register with the server, then sync the branch head
//! into a new directory), list and retire.

use scribe_format::echo::echo;
use scribe_format::Concern;
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

/// Registration tag prefix of the last use: `used=<unix ms>`, refreshed
/// by [`record_use`] after a sync (#18 item 8).
pub const USED_TAG: &str = "used=";
/// A sync refreshes the `used=` tag at most this often (one hour): a
/// re-registration is a durable write on the server, not one per sync.
pub const USE_REFRESH_MS: u64 = 3_600_000;
/// Local `meta` key (u64 unix ms): when this workspace last refreshed its
/// `used=` tag.
pub const USE_RECORDED_KEY: &str = "use-recorded-ms";

/// The time a `used=` tag records, if any.
pub fn used_of(tags: &[String]) -> Option<u64> {
    tags.iter()
        .find_map(|t| t.strip_prefix(USED_TAG)?.parse().ok())
}

/// Record on the server that `o` was used now (the `used=` registration
/// tag), unless this workspace did so less than [`USE_REFRESH_MS`] ago.
/// The workspace's record is read back (`workspace list`) and registered
/// again unchanged but for that tag, so branch, view, label and the other
/// tags stay as they are. Returns whether it wrote.
pub fn record_use(o: &Opened, remote: &ServerLink) -> Result<bool> {
    let now = scribe_workspace::scan::now_ms();
    if let Some(t) = o.ws.read()?.meta_u64(USE_RECORDED_KEY)? {
        if now.saturating_sub(t) < USE_REFRESH_MS {
            return Ok(false);
        }
    }
    let repo = o.meta.repository_name.clone();
    let id = o.meta.workspace_id;
    let wrote = remote.with(|c| {
        let Some(info) = c
            .workspace_list(&repo)?
            .into_iter()
            .find(|w| w.workspace == id && !w.retired)
        else {
            return Ok(false);
        };
        let mut tags: Vec<String> = info
            .tags
            .into_iter()
            .filter(|t| !t.starts_with(USED_TAG))
            .collect();
        if tags.len() >= 16 {
            return Ok(false);
        }
        tags.push(format!("{USED_TAG}{now}"));
        c.workspace_register(m::WorkspaceRegister {
            repo: repo.clone(),
            workspace: id,
            branch: if info.branch == scribe_format::BranchId([0; 16]) {
                String::new()
            } else {
                info.branch_name
            },
            view: info.view,
            label: info.label,
            tags,
        })?;
        Ok(true)
    })?;
    let tx = o.ws.write()?;
    tx.put_meta_u64(USE_RECORDED_KEY, now)?;
    tx.commit()?;
    Ok(wrote)
}

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
    /// This machine's name, shown by `workspace list` (empty: not shown).
    pub host: String,
}

/// Registration tags that say who and where a workspace is (#18 item 8):
/// `owner=AUTHOR`, `host=HOST`, and the root directory as `root=...`
/// continued in `root+...` tags (a tag holds at most 64 bytes, cut at
/// character boundaries). The server stores tags as given.
pub fn identity_tags(author: &str, host: &str, root: &Path) -> Vec<String> {
    fn cut(s: &str, max: usize) -> (&str, &str) {
        let mut n = s.len().min(max);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        s.split_at(n)
    }
    let mut tags = Vec::new();
    if !author.is_empty() {
        tags.push(format!("owner={}", cut(author, 58).0));
    }
    if !host.is_empty() {
        tags.push(format!("host={}", cut(host, 59).0));
    }
    let mut rest = root.to_str().unwrap_or("");
    let mut first = true;
    // One tag stays free for `used=` ([`record_use`]).
    while !rest.is_empty() && tags.len() < 15 {
        let prefix = if first { "root=" } else { "root+" };
        let (head, tail) = cut(rest, 64 - prefix.len());
        if head.is_empty() {
            break;
        }
        tags.push(format!("{prefix}{head}"));
        rest = tail;
        first = false;
    }
    tags
}

/// What [`identity_tags`] recorded: (owner, host, root).
pub fn identity_of(tags: &[String]) -> (Option<String>, Option<String>, Option<String>) {
    let mut owner = None;
    let mut host = None;
    let mut root: Option<String> = None;
    for t in tags {
        if let Some(v) = t.strip_prefix("owner=") {
            owner = Some(v.to_string());
        } else if let Some(v) = t.strip_prefix("host=") {
            host = Some(v.to_string());
        } else if let Some(v) = t.strip_prefix("root=") {
            root = Some(v.to_string());
        } else if let Some(v) = t.strip_prefix("root+") {
            if let Some(r) = root.as_mut() {
                r.push_str(v);
            }
        }
    }
    (owner, host, root)
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
    let tags = identity_tags(&a.author, &a.host, &dir);
    // The directory first: a path that cannot be one (a file is there, no
    // permission) is refused by name before the server registers anything.
    let made_dir = !dir.exists();
    std::fs::create_dir_all(&dir).map_err(|e| {
        Error::new(
            ErrorCode::Io,
            format!("cannot make the workspace directory {}", dir.display()),
        )
        .caused_by(e)
    })?;
    let info = (|| -> Result<_> {
        let mut client = connect(&url, false, ctx)?;
        let repos = client.repo_list()?;
        let repo = repos.iter().find(|r| r.name == a.repo).ok_or_else(|| {
            Error::new(
                ErrorCode::NotFound,
                format!("no repository named {}", echo(&a.repo)),
            )
            .concerning(Concern::Repository)
        })?;
        let ws = client
            .workspace_register(m::WorkspaceRegister {
                repo: a.repo.clone(),
                workspace: workspace_id,
                branch: a.branch.clone().unwrap_or_default(),
                view: view.clone(),
                label: a.label.clone().unwrap_or_default(),
                tags: tags.clone(),
            })
            .map_err(|e| {
                // The repository was just listed: what is not found is
                // the branch asked for.
                let missing = e.code() == ErrorCode::NotFound;
                let e = Error::from(e);
                if missing {
                    e.concerning(Concern::Branch)
                } else {
                    e
                }
            })?;
        Ok((repo.id, ws))
    })()
    .inspect_err(|_| {
        if made_dir {
            let _ = std::fs::remove_dir(&dir);
        }
    })?;
    let meta = WorkspaceMeta {
        workspace_id,
        repository_id: info.0,
        branch_id: info.1.branch,
        incarnation: info.1.incarnation,
        repository_name: a.repo.clone(),
        server: url,
        author: a.author.clone(),
        view,
        tags,
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
    let synced = run_sync(&o, &link, None)?;
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

/// How many of the newest changes [`last_submits`] reads.
pub const LAST_SUBMIT_WINDOW: u32 = 1000;

/// The newest change (and its time) each workspace submitted among the
/// repository's newest [`LAST_SUBMIT_WINDOW`] changes of the main branch:
/// the "last use" `workspace list` shows (the server records no other).
pub fn last_submits(
    ctx: &Context,
    server: &str,
    repo: &str,
) -> Result<std::collections::HashMap<WorkspaceId, (u64, u64)>> {
    let mut client = connect(server, false, ctx)?;
    let mut out = std::collections::HashMap::new();
    let mut before = 0;
    let mut seen = 0u32;
    while seen < LAST_SUBMIT_WINDOW {
        let page = client.log(m::Log {
            repo: repo.to_string(),
            branch: scribe_format::BranchId([0; 16]),
            before,
            limit: m::MAX_PAGE_ITEMS.min(LAST_SUBMIT_WINDOW - seen),
        })?;
        seen += page.commits.len() as u32;
        for c in &page.commits {
            out.entry(c.workspace).or_insert((c.change, c.timestamp_ms));
        }
        if page.next == 0 || page.commits.is_empty() {
            break;
        }
        before = page.next;
    }
    Ok(out)
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
    let mut client = o.connect(ctx)?;
    client.workspace_retire(&o.meta.repository_name, id)?;
    if id == o.meta.workspace_id {
        mark_retired(o)?;
    }
    Ok(id)
}

/// Whether `dir` is a workspace root.
pub fn exists(dir: &Path) -> bool {
    dir.join(".scribe/_state/SCRIBE_FORMAT").exists()
}

/// `meta["retired"]` (unix ms, u64): this workspace learned it was retired
/// (`scribe workspace retire`, or a server answering `workspace_retired`).
/// Opening files is refused from then on; `recreate` is the way out.
pub const RETIRED_KEY: &str = "retired";

/// Record that `o` is retired (idempotent).
pub fn mark_retired(o: &Opened) -> Result<()> {
    let read = o.ws.read()?;
    let already = read.meta_u64(RETIRED_KEY)?.is_some();
    drop(read);
    if !already {
        let tx = o.ws.write()?;
        tx.put_meta_u64(RETIRED_KEY, scribe_workspace::scan::now_ms())?;
        tx.commit()?;
    }
    Ok(())
}

/// When `o` learned it was retired (unix ms), if it did.
pub fn retired_at(o: &Opened) -> Result<Option<u64>> {
    Ok(o.ws.read()?.meta_u64(RETIRED_KEY)?)
}

/// Refuse to open files in a workspace known to be retired.
pub fn refuse_if_retired(o: &Opened) -> Result<()> {
    if retired_at(o)?.is_some() {
        return Err(Error::new(
            ErrorCode::WorkspaceRetired,
            format!(
                "workspace {} is retired: files cannot be opened here",
                o.meta.workspace_id
            ),
        ));
    }
    Ok(())
}

/// Point `o` at the server now at `url` (#18 item 2): a server that moved
/// to another host or port, or a repository its operator renamed
/// (`scribe-server repo rename`). The server at `url` must hold the same
/// repository (same id, found by id whatever its name) and know this
/// workspace; the URL and the repository's name are what change.
/// Returns the URL and the repository's name as stored now.
pub fn set_server(ctx: &Context, o: &Opened, url: &str) -> Result<(String, String)> {
    let url = ServerUrl::absolute(url)?;
    let mut client = connect(&url, false, ctx)?;
    let repos = client.repo_list()?;
    let repo = match repos.iter().find(|r| r.id == o.meta.repository_id) {
        Some(r) => r,
        None => {
            return Err(
                match repos.iter().find(|r| r.name == o.meta.repository_name) {
                    Some(other) => Error::new(
                        ErrorCode::Refused,
                        format!(
                            "the repository {} at {url} is another repository (id {}, this \
                         workspace's is {})",
                            echo(&o.meta.repository_name),
                            other.id,
                            o.meta.repository_id
                        ),
                    ),
                    None => Error::new(
                        ErrorCode::NotFound,
                        format!(
                            "the server at {url} has no repository named {} nor any with this \
                         workspace's repository id {}",
                            echo(&o.meta.repository_name),
                            o.meta.repository_id
                        ),
                    )
                    .concerning(Concern::Repository),
                },
            );
        }
    };
    let name = repo.name.clone();
    let known = client
        .workspace_list(&name)?
        .iter()
        .any(|w| w.workspace == o.meta.workspace_id);
    if !known {
        return Err(Error::new(
            ErrorCode::WorkspaceUnregistered,
            format!(
                "the server at {url} holds no active registration for workspace {}",
                o.meta.workspace_id
            ),
        ));
    }
    let mut meta = o.meta.clone();
    meta.server = url.clone();
    meta.repository_name = name.clone();
    let tx = o.ws.write()?;
    tx.set_meta(&meta)?;
    tx.commit()?;
    Ok((url, name))
}

/// When the server holds `o`'s repository (same id) under another name
/// than the workspace records: the `not_found` that says so and names
/// the command that follows the rename ([`ServerLink::renamed`]). `None`
/// when it does not, or the server cannot be asked.
pub fn renamed(ctx: &Context, o: &Opened) -> Option<Error> {
    let link = o.link(ctx).ok()?;
    link.with(|c| Ok(link.renamed(c))).ok().flatten()
}

/// What `scribe info` shows: the local binding, and what the server says
/// (when it answers).
#[derive(Debug)]
pub struct About {
    pub meta: WorkspaceMeta,
    pub root: PathBuf,
    /// The change the user's own last submit left its files at, when
    /// newer than `meta.synced`.
    pub submitted: Option<u64>,
    pub retired_ms: Option<u64>,
    /// The server's answer, or why there is none.
    pub server: std::result::Result<ServerSide, String>,
}

#[derive(Debug)]
pub struct ServerSide {
    pub version: String,
    pub head: u64,
    pub branch: String,
    /// Whether the server holds an active registration of this workspace.
    pub registered: bool,
    pub label: String,
}

/// Everything `scribe info` prints (the server part is best effort).
pub fn about(ctx: &Context, o: &Opened) -> Result<About> {
    let server = (|| -> Result<ServerSide> {
        let mut c = o.connect(ctx)?;
        let version = c.status()?.server_version;
        let list = c.workspace_list(&o.meta.repository_name)?;
        let me = list.iter().find(|w| w.workspace == o.meta.workspace_id);
        let head = c
            .repo_list()?
            .into_iter()
            .find(|r| r.name == o.meta.repository_name)
            .map_or(0, |r| r.head);
        Ok(ServerSide {
            version,
            head,
            branch: me.map(|w| w.branch_name.clone()).unwrap_or_default(),
            registered: me.is_some(),
            label: me.map(|w| w.label.clone()).unwrap_or_default(),
        })
    })()
    .map_err(|e| e.to_string());
    Ok(About {
        meta: o.meta.clone(),
        root: o.ws.root().to_path_buf(),
        submitted: scribe_workspace::sync::local_pin(&o.ws)?,
        retired_ms: retired_at(o)?,
        server,
    })
}

/// What [`recreate`] did.
#[derive(Debug)]
pub struct Recreated {
    pub old: WorkspaceId,
    pub created: Created,
    /// Where the retired workspace's state was kept.
    pub archived_state: PathBuf,
    /// Files of the recovery area carried over.
    pub recovery_kept: usize,
    /// Opened files reopened in the new workspace, with their action.
    pub reopened: Vec<(String, &'static str)>,
    /// Files that differ from the server and were not open: deferred
    /// (`scribe resolve`), never overwritten.
    pub deferred: Vec<String>,
}

/// Re-create a retired (or unregistered) workspace in place (#18 item 3):
/// a new registration with the same server, repository, branch, view,
/// author and read-only flag; the old `.scribe/_state` is kept beside as
/// `.scribe/retired-<id>`, its recovery area moves into the new one, the
/// files on disk stay (sync from 0 adopts equal files and defers the
/// others), and files opened for add, edit or delete are opened again.
/// Refused while the server still holds the workspace's registration.
pub fn recreate(ctx: &Context, o: Opened, branch: Option<String>) -> Result<Recreated> {
    let active = {
        let mut c = o.connect(ctx)?;
        c.workspace_list(&o.meta.repository_name)?
            .iter()
            .any(|w| w.workspace == o.meta.workspace_id)
    };
    if active {
        return Err(Error::new(
            ErrorCode::Refused,
            format!(
                "workspace {} is active on the server; there is nothing to re-create",
                o.meta.workspace_id
            ),
        ));
    }
    if scribe_workspace::moves::interrupted(&o.ws)?.is_some() {
        return Err(Error::new(
            ErrorCode::MoveUnfinished,
            "a move is interrupted: finish or abort it first",
        ));
    }
    let opened = o.ws.read()?.opened_all()?;
    let root = o.ws.root().to_path_buf();
    let old = o.meta.clone();
    drop(o);
    let state = root.join(scribe_workspace::state::STATE_DIR);
    let archived = root
        .join(".scribe")
        .join(format!("retired-{}", old.workspace_id.to_hex()));
    if archived.exists() {
        return Err(Error::new(
            ErrorCode::AlreadyExists,
            format!("{} exists already", archived.display()),
        ));
    }
    std::fs::rename(&state, &archived)?;
    scribe_workspace::state::sync_dir(&root.join(".scribe"))?;
    let created = create(
        ctx,
        CreateArgs {
            dir: root.clone(),
            server: old.server.clone(),
            repo: old.repository_name.clone(),
            branch,
            view: old.view.clone(),
            label: None,
            readonly: old.readonly,
            author: old.author.clone(),
            host: identity_of(&old.tags).1.unwrap_or_default(),
        },
    )?;
    // The recovery area: every file moves over (names are unique).
    let from = archived.join("recovery");
    let to = scribe_workspace::recovery::recovery_dir(&root);
    let mut recovery_kept = 0;
    if let Ok(entries) = std::fs::read_dir(&from) {
        std::fs::create_dir_all(&to)?;
        for e in entries {
            let e = e?;
            let dst = to.join(e.file_name());
            if !dst.exists() {
                std::fs::rename(e.path(), dst)?;
                recovery_kept += 1;
            }
        }
        scribe_workspace::state::sync_dir(&to)?;
    }
    // Reopen what was opened.
    let o = Opened::find(&root)?;
    let link = o.link(ctx)?;
    let deferred: std::collections::BTreeSet<String> =
        o.ws.read()?
            .deferred_all()?
            .into_iter()
            .map(|(p, _)| p)
            .collect();
    let mut reopened = Vec::new();
    use scribe_workspace::records::OpenedAction as A;
    for (p, rec) in &opened {
        let done = match rec.action {
            A::Add if root.join(p).exists() && !deferred.contains(p) => {
                !scribe_workspace::open::add(&o.ws, std::slice::from_ref(p))?
                    .opened
                    .is_empty()
            }
            A::Edit | A::Add if deferred.contains(p) => {
                scribe_workspace::resolve::resolve(
                    &o.ws,
                    p,
                    &scribe_workspace::resolve::Resolution::Ours,
                    &link,
                )?;
                true
            }
            A::Edit => !scribe_workspace::open::edit(&o.ws, std::slice::from_ref(p))?
                .opened
                .is_empty(),
            A::Delete => !scribe_workspace::open::delete(&o.ws, std::slice::from_ref(p))?
                .opened
                .is_empty(),
            _ => false,
        };
        if done {
            reopened.push((p.clone(), rec.action.name()));
        }
    }
    let deferred =
        o.ws.read()?
            .deferred_all()?
            .into_iter()
            .map(|(p, _)| p)
            .collect();
    Ok(Recreated {
        old: old.workspace_id,
        created,
        archived_state: archived,
        recovery_kept,
        reopened,
        deferred,
    })
}

/// The workspace cache's bound: a submit that leaves the cache larger
/// prunes it (`SCRIBE_CACHE_BYTES` overrides; 0 never prunes on its own).
pub const DEFAULT_CACHE_BYTES: u64 = 256 << 20;

/// The bound in force: `SCRIBE_CACHE_BYTES`, else [`DEFAULT_CACHE_BYTES`].
pub fn cache_bound() -> u64 {
    std::env::var("SCRIBE_CACHE_BYTES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(DEFAULT_CACHE_BYTES)
}

/// Drop from the workspace cache every object the server holds, keeping
/// what it lacks and every object of a pending submission
/// ([`scribe_workspace::Workspace::prune_cache`]). Asks the server which
/// objects it lacks, at most [`m::MAX_IDS_PER_REQUEST`] at a time; nothing
/// is dropped when the server cannot be asked.
pub fn prune_cache(ctx: &Context, o: &Opened) -> Result<scribe_workspace::state::CachePruned> {
    let mut client = o.connect(ctx)?;
    let repo = o.meta.repository_name.clone();
    let mut failure = None;
    let pruned = o.ws.prune_cache(|ids| {
        let mut keep = Vec::new();
        for part in ids.chunks(m::MAX_IDS_PER_REQUEST) {
            match client.objects_missing(&repo, part) {
                Ok(missing) => keep.extend(missing),
                Err(e) => {
                    failure = Some(e);
                    return Ok(ids.to_vec());
                }
            }
        }
        Ok(keep)
    })?;
    match failure {
        Some(e) => Err(e.into()),
        None => Ok(pruned),
    }
}

/// [`prune_cache`] when the cache is above [`cache_bound`]; `None` when it
/// is not (or the bound is 0).
pub fn prune_cache_if_over(
    ctx: &Context,
    o: &Opened,
) -> Result<Option<scribe_workspace::state::CachePruned>> {
    let bound = cache_bound();
    if bound == 0 || o.ws.cache_bytes()? <= bound {
        return Ok(None);
    }
    prune_cache(ctx, o).map(Some)
}

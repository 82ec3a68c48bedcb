//! Offline administration of a data root: `doctor`, `verify`,
//! `rebuild-locator`, `compact-objects`, `recover-submissions`, `migrate`,
//! `pins list`, `pins abandon`, `lock release`.
//!
//! Each takes the data root's `LOCK` for its duration (so it refuses to run
//! beside a server) and reports per repository; a report is clean when no
//! problem was found. `migrate` reads the data root's descriptor before it
//! takes the `LOCK`, and stops there when that descriptor is not current.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use scribe_format::descriptor::{Descriptor, Kind};
use scribe_format::{ErrorCode, ObjectId, ObjectKind, RepositoryId};
use scribe_metadata::database_descriptor;
use scribe_metadata::pins::PinOwnerState;
use scribe_metadata::{DataRoot, MemoryObjects, MetadataError, Objects, RepositoryInfo};
use scribe_objects::{CompactContext, CompactOptions, ObjectStore};

use crate::service::{stores, OpenError, StoreRegistry};

/// Why an administrative command could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error("no repository {}", scribe_format::echo::echo(.0))]
    NoRepository(String),
    #[error("repository {repo}: {source}")]
    Metadata {
        repo: String,
        #[source]
        source: MetadataError,
    },
    #[error("repository {repo}: {source}")]
    Store {
        repo: String,
        #[source]
        source: Box<scribe_objects::StoreError>,
    },
    /// A `SCRIBE_FORMAT` file that cannot be read or parsed.
    #[error("{}: {reason}", path.display())]
    Descriptor { path: PathBuf, reason: String },
    /// The data root is bound to an auth service (`auth-init`) whose files
    /// cannot be used.
    #[error("the data root's auth binding: {0}")]
    Team(String),
    /// A request refused as asked (a name taken, a confirmation missing).
    #[error("error[{code}]: {message}")]
    Refused { code: ErrorCode, message: String },
}

/// What a command found, per repository.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// One line per problem, prefixed with the repository name.
    pub problems: Vec<String>,
    /// One line per repository describing what was done.
    pub notes: Vec<String>,
}

impl Report {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

pub(crate) fn select(
    root: &DataRoot,
    repo: Option<&str>,
) -> Result<Vec<RepositoryInfo>, AdminError> {
    let all = root
        .list_repositories()
        .map_err(|e| AdminError::Open(e.into()))?;
    match repo {
        None => Ok(all),
        Some(name) => {
            let found: Vec<_> = all.into_iter().filter(|r| r.name == name).collect();
            if found.is_empty() {
                Err(AdminError::NoRepository(name.to_string()))
            } else {
                Ok(found)
            }
        }
    }
}

fn repo_dir(root: &DataRoot, info: &RepositoryInfo) -> PathBuf {
    root.dir().join("repos").join(info.id.to_hex())
}

fn meta_err(info: &RepositoryInfo) -> impl Fn(MetadataError) -> AdminError + '_ {
    move |source| AdminError::Metadata {
        repo: info.name.clone(),
        source,
    }
}

fn store_err(info: &RepositoryInfo) -> impl Fn(scribe_objects::StoreError) -> AdminError + '_ {
    move |source| AdminError::Store {
        repo: info.name.clone(),
        source: Box::new(source),
    }
}

/// Open a data root whose repositories reach their stores (recovering them).
fn open_with_stores(dir: &Path) -> Result<(DataRoot, StoreRegistry), AdminError> {
    let mut root = DataRoot::open(dir).map_err(OpenError::from)?;
    let reg = StoreRegistry::default();
    root.set_objects_factory(reg.factory());
    Ok((root, reg))
}

/// Open a data root without opening any object store.
pub(crate) fn open_without_stores(dir: &Path) -> Result<DataRoot, AdminError> {
    let mut root = DataRoot::open(dir).map_err(OpenError::from)?;
    root.set_objects_factory(Box::new(|_: &Path, _| {
        let o: Objects = MemoryObjects::new();
        Ok(o)
    }));
    Ok(root)
}

/// The way on from a repository store whose pack is cut short.
pub const DAMAGED_PACK_WAY_OUT: &str = "a repository's pack is damaged and its store cannot be \
     opened: `scribe-server verify --data DIR` names what is damaged (it reads without opening), \
     and `scribe-server rebuild-locator --data DIR --repo NAME` indexes what the packs still \
     hold; then `scribe-server doctor` names what is lost";

/// The way on from a repository that cannot be opened, told by its error's
/// text (the store's error reaches the server as text through the
/// repository's).
pub fn open_way_out(error: &str) -> Option<&'static str> {
    error
        .contains("shorter than its committed length")
        .then_some(DAMAGED_PACK_WAY_OUT)
}

/// Metadata doctor and object-store verification of each repository. A
/// repository that cannot be opened is a problem, with the way on where
/// one is known; the others are still checked.
pub fn doctor(dir: &Path, repo: Option<&str>) -> Result<Report, AdminError> {
    let (root, reg) = open_with_stores(dir)?;
    let mut report = Report::default();
    for info in select(&root, repo)? {
        let r = match root.open_repository(info.id) {
            Ok(r) => r,
            Err(e) => {
                let e = e.to_string();
                let way = open_way_out(&e)
                    .map(|w| format!(" ({w})"))
                    .unwrap_or_default();
                report
                    .problems
                    .push(format!("{}: cannot be opened: {e}{way}", info.name));
                continue;
            }
        };
        let d = r.doctor().map_err(meta_err(&info))?;
        for p in &d.problems {
            report
                .problems
                .push(format!("{}: {}: {}", info.name, p.name, p.detail));
        }
        let store = reg.get(&info.id).ok_or_else(|| AdminError::Store {
            repo: info.name.clone(),
            source: Box::new(scribe_objects::StoreError::NotFound {
                id: ObjectId::new(ObjectKind::Chunk, [0; 32]),
            }),
        })?;
        let v = store.verify().map_err(store_err(&info))?;
        for p in &v.problems {
            report.problems.push(format!("{}: objects: {p}", info.name));
        }
        report.notes.push(format!(
            "{}: {} commits and {} pages checked, objects verified",
            info.name, d.commits_checked, d.pages_checked
        ));
    }
    Ok(report)
}

/// Verify every object of each repository's store (read-only), then every
/// manifest an accepted file names (`manifests.*`, see
/// `Repository::check_accepted_manifests`). The second pass opens the
/// store as serving does; it is skipped, with a note, for a store whose
/// first pass found something open-time recovery would change.
pub fn verify(dir: &Path, repo: Option<&str>) -> Result<Report, AdminError> {
    let root = open_without_stores(dir)?;
    let mut report = Report::default();
    let mut openable = Vec::new();
    for info in select(&root, repo)? {
        let objects = repo_dir(&root, &info).join("objects");
        let v = scribe_objects::verify_dir(&objects).map_err(store_err(&info))?;
        for p in &v.problems {
            report.problems.push(format!("{}: {p}", info.name));
        }
        let needs_recovery = v.locator_needed_repair
            || v.problems.iter().any(|p| {
                !matches!(
                    p,
                    scribe_objects::Problem::CorruptObject { .. }
                        | scribe_objects::Problem::BadLocatorRow { .. }
                )
            });
        let damaged_pack = v
            .problems
            .iter()
            .any(|p| matches!(p, scribe_objects::Problem::PackShorterThanCommitted { .. }));
        if damaged_pack {
            report.notes.push(format!(
                "{}: objects verified; accepted manifests not checked (a pack is damaged and the \
                 store cannot be opened: `scribe-server rebuild-locator --repo {}` indexes what \
                 the packs still hold, then `scribe-server doctor` names what is lost)",
                info.name, info.name
            ));
        } else if needs_recovery {
            report.notes.push(format!(
                "{}: objects verified; accepted manifests not checked (the store needs open-time recovery: run doctor)",
                info.name
            ));
        } else {
            openable.push(info);
        }
    }
    drop(root);
    if openable.is_empty() {
        return Ok(report);
    }
    let (root, _reg) = open_with_stores(dir)?;
    for info in openable {
        let r = root.open_repository(info.id).map_err(meta_err(&info))?;
        let problems = r.check_accepted_manifests().map_err(meta_err(&info))?;
        for p in &problems {
            report
                .problems
                .push(format!("{}: {}: {}", info.name, p.name, p.detail));
        }
        report.notes.push(format!(
            "{}: objects verified, accepted manifests checked",
            info.name
        ));
    }
    Ok(report)
}

/// `verify --repair` (issue #14 item 12): open each store as serving does
/// (open-time recovery), verify every object, and drop the locator rows of
/// the chunks and manifests whose stored copy fails verification
/// ([`ObjectStore::forget_damaged`]). The store then says they are missing
/// (`ObjectsMissing`, `ObjectsPinMissing`), so the next client that
/// uploads their bytes (any submit of a file that holds them) stores them
/// again; the damaged bytes stay unreferenced until compaction. Other
/// damaged kinds (commits, change sets: no client uploads them again) keep
/// their rows and stay problems. Then every accepted manifest is checked:
/// each file revision that lost bytes is a `manifests.objects-missing`
/// problem naming `path@change`, until someone uploads them again.
pub fn repair(dir: &Path, repo: Option<&str>) -> Result<Report, AdminError> {
    let (root, reg) = open_with_stores(dir)?;
    let mut report = Report::default();
    for info in select(&root, repo)? {
        let r = root.open_repository(info.id).map_err(meta_err(&info))?;
        let store = reg.get(&info.id).ok_or_else(|| AdminError::Store {
            repo: info.name.clone(),
            source: Box::new(scribe_objects::StoreError::NotFound {
                id: ObjectId::new(ObjectKind::Chunk, [0; 32]),
            }),
        })?;
        let v = store.verify().map_err(store_err(&info))?;
        let mut damaged = Vec::new();
        for p in &v.problems {
            match p {
                scribe_objects::Problem::CorruptObject { id, location, .. }
                    if matches!(id.kind, ObjectKind::Chunk | ObjectKind::Manifest) =>
                {
                    damaged.push((*id, location.clone()));
                }
                other => report
                    .problems
                    .push(format!("{}: objects: {other} (not repaired)", info.name)),
            }
        }
        let ids: Vec<ObjectId> = damaged.iter().map(|(id, _)| *id).collect();
        let gone = store.forget_damaged(&ids).map_err(store_err(&info))?;
        for (id, location) in &damaged {
            if gone.contains(id) {
                report.notes.push(format!(
                    "{}: repaired: dropped damaged {id} (bytes at {location} left unreferenced); the store now asks uploads for it",
                    info.name
                ));
            }
        }
        let problems = r.check_accepted_manifests().map_err(meta_err(&info))?;
        let mut lost = 0usize;
        for p in &problems {
            if p.name == "manifests.objects-missing" {
                lost += 1;
            }
            report
                .problems
                .push(format!("{}: {}: {}", info.name, p.name, p.detail));
        }
        report.notes.push(format!(
            "{}: {} damaged objects dropped; {lost} accepted file revisions lack objects until a client that holds them submits them again",
            info.name,
            gone.len()
        ));
    }
    Ok(report)
}

/// Rebuild each repository's `locator.redb` from its packs and loose files.
pub fn rebuild_locator(dir: &Path, repo: Option<&str>) -> Result<Report, AdminError> {
    let root = open_without_stores(dir)?;
    let mut report = Report::default();
    for info in select(&root, repo)? {
        let objects = repo_dir(&root, &info).join("objects");
        let r = scribe_objects::rebuild_locator(&objects).map_err(store_err(&info))?;
        report.notes.push(format!("{}: {r}", info.name));
    }
    Ok(report)
}

/// Finish unaccepted streamed preparations and queued pin cleanups.
pub fn recover_submissions(dir: &Path, repo: Option<&str>) -> Result<Report, AdminError> {
    let (root, _reg) = open_with_stores(dir)?;
    let mut report = Report::default();
    for info in select(&root, repo)? {
        let r = root.open_repository(info.id).map_err(meta_err(&info))?;
        r.recover_submissions().map_err(meta_err(&info))?;
        report
            .notes
            .push(format!("{}: submissions recovered", info.name));
    }
    Ok(report)
}

/// `import`: a `.scmx` metadata export as a new repository of the stopped
/// data root `dir` (`scribe_metadata::export::import`), its objects from
/// the object store directory `objects` when given, checked by doctor
/// against the repository's store before it is published.
pub fn import(
    dir: &Path,
    file: &Path,
    name: Option<&str>,
    objects: Option<&Path>,
    progress: scribe_metadata::backup::ProgressFn<'_>,
    step: scribe_metadata::backup::StepHook<'_>,
) -> Result<scribe_metadata::export::ImportReport, AdminError> {
    let (root, _reg) = open_with_stores(dir)?;
    scribe_metadata::export::import(&root, file, name, objects, progress, step).map_err(|source| {
        AdminError::Metadata {
            repo: name
                .map(str::to_owned)
                .unwrap_or_else(|| file.display().to_string()),
            source,
        }
    })
}

/// `archive verify`: read every repository's recovery archive (HEAD,
/// every frame's chain and `.scrj` payload, continuity to HEAD's end) and
/// compare its end with the database's. Reads only.
pub fn archive_verify(dir: &Path, repo: Option<&str>) -> Result<Report, AdminError> {
    let root = open_without_stores(dir)?;
    let mut report = Report::default();
    if repo.is_none() {
        let catalog = dir.join("catalog.redb");
        match scribe_metadata::archive::archive_dir(&catalog)
            .and_then(|d| scribe_metadata::archive::verify(&d).map(|v| (d, v)))
        {
            Ok((d, v)) => report.notes.push(format!(
                "catalog ({}): {} frame(s) in {} segment(s){}, journal end {}",
                d.display(),
                v.frames,
                v.segments,
                base_note(&v),
                v.head.end
            )),
            Err(e) => report.problems.push(format!("catalog: {e}")),
        }
        if scribe_metadata::auth_state::has_archive(dir) {
            let db = dir.join(scribe_metadata::auth_state::AUTH_STATE_FILE);
            match scribe_metadata::archive::archive_dir(&db)
                .and_then(|d| scribe_metadata::archive::verify(&d).map(|v| (d, v)))
            {
                Ok((d, v)) => report.notes.push(format!(
                    "auth-state ({}): {} frame(s) in {} segment(s){}, journal end {}",
                    d.display(),
                    v.frames,
                    v.segments,
                    base_note(&v),
                    v.head.end
                )),
                Err(e) => report.problems.push(format!("auth-state: {e}")),
            }
        }
    }
    for info in select(&root, repo)? {
        let db_path = repo_dir(&root, &info).join(scribe_metadata::repo::METADATA_FILE);
        let archive_dir = match scribe_metadata::archive::archive_dir(&db_path) {
            Ok(d) => d,
            Err(e) => {
                report.problems.push(format!("{}: {e}", info.name));
                continue;
            }
        };
        match scribe_metadata::archive::verify(&archive_dir) {
            Ok(v) => report.notes.push(format!(
                "{} ({}): {} frame(s) in {} segment(s){}, journal end {}",
                info.name,
                archive_dir.display(),
                v.frames,
                v.segments,
                base_note(&v),
                v.head.end
            )),
            Err(e) => report.problems.push(format!("{}: {e}", info.name)),
        }
    }
    Ok(report)
}

/// Rebuild a lost `auth-state.redb` from `auth-state.recovery` (the data
/// root's lock is held by the caller).
fn recover_auth_state(dir: &Path, mut report: Report) -> Result<Report, AdminError> {
    let done =
        scribe_metadata::auth_state::recover(dir).map_err(|source| AdminError::Metadata {
            repo: "auth-state".into(),
            source,
        })?;
    report.notes.push(format!(
        "auth-state: rebuilt {} from its archive: {} record(s), {} transaction(s), journal end {}",
        dir.join(scribe_metadata::auth_state::AUTH_STATE_FILE)
            .display(),
        done.records,
        done.transactions,
        done.end
    ));
    Ok(report)
}

fn base_note(v: &scribe_metadata::archive::Verified) -> String {
    match v.base {
        Some(end) => format!(" after the base at journal end {end}"),
        None => String::new(),
    }
}

/// `recover --from-archive`: rebuild a repository's destroyed
/// `metadata.redb` from its archive alone, through a quarantined file
/// published only when every frame verified and applied, then open it as
/// serving does and run doctor.
pub fn recover_from_archive(dir: &Path, repo: Option<&str>) -> Result<Report, AdminError> {
    let Some(repo) = repo else {
        let auth_state = dir.join(scribe_metadata::auth_state::AUTH_STATE_FILE);
        let auth_lost = !auth_state.exists() && scribe_metadata::auth_state::has_archive(dir);
        if auth_lost && dir.join("catalog.redb").exists() {
            // Only the storage ownership file is lost.
            let _root = open_without_stores(dir)?;
            return recover_auth_state(dir, Report::default());
        }
        // The catalog: rebuilt before the data root can be opened.
        let done =
            scribe_metadata::root::recover_catalog(dir).map_err(|source| AdminError::Metadata {
                repo: "catalog".into(),
                source,
            })?;
        let root = open_without_stores(dir)?;
        let repos = root
            .list_repositories()
            .map_err(|e| AdminError::Open(e.into()))?;
        let mut report = Report::default();
        report.notes.push(format!(
            "catalog: rebuilt {} from {}: {} record(s), {} transaction(s), journal end {}; {} repositor(ies)",
            dir.join("catalog.redb").display(),
            dir.join("catalog.recovery").display(),
            done.records,
            done.transactions,
            done.end,
            repos.len()
        ));
        if auth_lost {
            return recover_auth_state(dir, report);
        }
        return Ok(report);
    };
    let root = open_without_stores(dir)?;
    let info = select(&root, Some(repo))?.remove(0);
    let db_path = repo_dir(&root, &info).join(scribe_metadata::repo::METADATA_FILE);
    let archive_dir = scribe_metadata::archive::archive_dir(&db_path).map_err(meta_err(&info))?;
    let done =
        scribe_metadata::archive::recover(&archive_dir, &db_path).map_err(meta_err(&info))?;
    let mut report = Report::default();
    report.notes.push(format!(
        "{}: rebuilt {} from {}: {} record(s), {} transaction(s), journal end {}",
        info.name,
        db_path.display(),
        archive_dir.display(),
        done.records,
        done.transactions,
        done.end
    ));
    drop(root);
    let (root, _reg) = open_with_stores(dir)?;
    let r = root.open_repository(info.id).map_err(meta_err(&info))?;
    let d = r.doctor().map_err(meta_err(&info))?;
    for p in d.problems {
        report
            .problems
            .push(format!("{}: {}: {}", info.name, p.name, p.detail));
    }
    Ok(report)
}

/// The live object set of a repository and what could not be kept.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveSet {
    /// Every object to keep, in key order.
    pub ids: Vec<ObjectId>,
    /// One line per retained root that cannot be kept or followed: absent,
    /// failing verification, or a manifest that does not decode (its
    /// chunks cannot be listed). `doctor` / `verify` name the accepted
    /// files they belong to as `path@change`.
    pub skipped: Vec<String>,
    /// The chunks of retained manifests absent from the store (each also
    /// has a `skipped` line).
    pub missing_chunks: Vec<ObjectId>,
}

/// The live object set of a repository: metadata's retained roots (every
/// accepted commit, its change set, every accepted manifest, every active
/// pin) and the chunks of every retained manifest. Absent objects cannot
/// be kept and are left out (a pinned one may simply not be uploaded yet);
/// so is a manifest whose stored copy fails verification (it is read to
/// list its chunks). Chunks are not read here: a damaged chunk stops a
/// full compaction (which copies through `get`) with an error naming it,
/// and `verify --repair` drops it first. A manifest that does not decode is kept, but its
/// chunks cannot be listed. Each required root left out or not followed
/// is a line of [`LiveSet::skipped`]: compaction goes on without it
/// (issue #14 item 12) instead of refusing for ever.
pub fn live_set(
    repo: &scribe_metadata::Repository,
    store: &ObjectStore,
) -> Result<LiveSet, AdminError> {
    let name = repo.name().to_string();
    let me = |source: MetadataError| AdminError::Metadata {
        repo: name.clone(),
        source,
    };
    let se = |source: scribe_objects::StoreError| AdminError::Store {
        repo: name.clone(),
        source: Box::new(source),
    };
    let pinned: HashSet<ObjectId> = repo.active_pins().map_err(&me)?.into_iter().collect();
    let mut required: HashSet<ObjectId> = HashSet::new();
    for id in repo.retained_roots().map_err(&me)? {
        if !pinned.contains(&id) {
            required.insert(id);
        }
    }
    let mut skipped = Vec::new();
    let mut live = HashSet::new();
    let mut roots: Vec<ObjectId> = required.iter().chain(pinned.iter()).copied().collect();
    roots.sort_by_key(|id| id.to_bytes());
    let mut missing_chunks: Vec<ObjectId> = Vec::new();
    for id in roots {
        let must = required.contains(&id);
        if !store.contains(&id).map_err(se)? {
            if must {
                skipped.push(format!("{id}: missing"));
            }
            continue;
        }
        if live.contains(&id) {
            continue;
        }
        if id.kind != ObjectKind::Manifest {
            live.insert(id);
            continue;
        }
        let payload = match store.get(&id) {
            Ok(p) => p,
            Err(scribe_objects::StoreError::CorruptObject {
                location, reason, ..
            }) => {
                skipped.push(format!("{id}: damaged at {location}: {reason}"));
                continue;
            }
            Err(e) => return Err(se(e)),
        };
        live.insert(id);
        let m = match scribe_objects::decode_manifest(&payload) {
            Ok(m) => m,
            Err(e) => {
                skipped.push(format!(
                    "{id}: kept, but its chunks cannot be listed: it does not decode: {e}"
                ));
                continue;
            }
        };
        for c in m.chunks {
            let cid = ObjectId::chunk(c.id);
            if store.contains(&cid).map_err(se)? {
                live.insert(cid);
            } else if must {
                missing_chunks.push(cid);
            }
        }
    }
    missing_chunks.sort_by_key(|id| id.to_bytes());
    missing_chunks.dedup();
    for cid in &missing_chunks {
        skipped.push(missing_line(cid));
    }
    let mut ids: Vec<ObjectId> = live.into_iter().collect();
    ids.sort_by_key(|id| id.to_bytes());
    Ok(LiveSet {
        ids,
        skipped,
        missing_chunks,
    })
}

fn missing_line(cid: &ObjectId) -> String {
    format!("{cid}: missing (listed by a retained manifest)")
}

/// The ids of [`live_set`].
pub fn live_objects(
    repo: &scribe_metadata::Repository,
    store: &ObjectStore,
) -> Result<Vec<ObjectId>, AdminError> {
    Ok(live_set(repo, store)?.ids)
}

/// Compact each repository's store, retaining its live objects.
pub fn compact_objects(
    dir: &Path,
    repo: Option<&str>,
    options: &CompactOptions,
) -> Result<Report, AdminError> {
    compact_objects_keeping(dir, repo, options, &|_, _| true)
}

/// [`compact_objects`], retaining only the live objects `keep` accepts
/// (`tier evict` drops the chunks the S3 tier holds).
pub fn compact_objects_keeping(
    dir: &Path,
    repo: Option<&str>,
    options: &CompactOptions,
    keep: &dyn Fn(RepositoryId, &ObjectId) -> bool,
) -> Result<Report, AdminError> {
    compact_objects_keeping_absent(dir, repo, options, keep, &|_, _| false)
}

/// [`compact_objects_keeping`], where a chunk of a retained manifest that
/// `absent_ok` accepts may be absent without a problem (the S3 tier holds
/// it, or its file revisions were given up).
pub fn compact_objects_keeping_absent(
    dir: &Path,
    repo: Option<&str>,
    options: &CompactOptions,
    keep: &dyn Fn(RepositoryId, &ObjectId) -> bool,
    absent_ok: &dyn Fn(RepositoryId, &ObjectId) -> bool,
) -> Result<Report, AdminError> {
    let root = open_without_stores(dir)?;
    let mut report = Report::default();
    for info in select(&root, repo)? {
        let r = root.open_repository(info.id).map_err(meta_err(&info))?;
        let objects = repo_dir(&root, &info).join("objects");
        let marker = repo_dir(&root, &info).join("objects.compaction-ready");
        let live = if marker.exists() {
            // A recorded swap completes without a live set.
            Vec::new()
        } else {
            let store = Arc::new(stores::open_or_create(&objects).map_err(store_err(&info))?);
            let live = live_set(&r, &store)?;
            drop(store);
            let excused: HashSet<String> = live
                .missing_chunks
                .iter()
                .filter(|c| absent_ok(info.id, c))
                .map(missing_line)
                .collect();
            for line in live.skipped.iter().filter(|l| !excused.contains(*l)) {
                report
                    .problems
                    .push(format!("{}: not kept: {line}", info.name));
            }
            live.ids
                .into_iter()
                .filter(|id| keep(info.id, id))
                .collect()
        };
        let ctx = CompactContext {
            repository: info.id.0,
            journal_end: 0,
        };
        let c = scribe_objects::compact(&objects, live, ctx, options).map_err(store_err(&info))?;
        report.notes.push(format!("{}: {c}", info.name));
    }
    Ok(report)
}

/// Compare the data root at `dir` with what this build reads: the
/// `SCRIBE_FORMAT` of the data root, of each repository and of each
/// repository's object store (versions and required features), then the
/// markers inside the databases. Serves nothing.
///
/// In order, stopping at the first step that finds a difference:
/// 1. the data root's descriptor, read without the `LOCK` and without
///    opening anything;
/// 2. the data root opened (its `LOCK`, the catalog's schema), and each
///    repository's descriptor and its store's, read without opening them;
/// 3. every repository opened as serving opens it (the markers of
///    `metadata.redb`; its store, with open-time recovery).
///
/// A clean report has nothing to migrate. Each problem names the file, the
/// version found and the one this build reads. This build knows no
/// conversion, so it changes nothing where it finds a difference; a
/// conversion (the first will be atomic publication v1 -> v2) runs where a
/// step finds the difference it converts.
pub fn migrate(dir: &Path, inspect: bool) -> Result<Report, AdminError> {
    let mut report = Report::default();
    let root_err = |source| AdminError::Metadata {
        repo: "data root".into(),
        source,
    };
    // atomic-publication-v1 -> v2: the data root's descriptor only names
    // the profile (the catalog holds no lock transfers).
    if dir.join(database_descriptor::FILE).exists()
        && scribe_metadata::migration::requires_atomic_publication_v1(dir).map_err(root_err)?
    {
        if inspect {
            report.notes.push(
                "data root: requires atomic-publication-v1; to apply: atomic-publication-v1 -> v2"
                    .into(),
            );
            return Ok(report);
        }
        scribe_metadata::migration::upgrade_descriptor_feature(dir).map_err(root_err)?;
        report
            .notes
            .push("data root: atomic-publication-v1 -> v2 (descriptor)".into());
    }
    let expect: Vec<(&str, String)> = scribe_metadata::root::expected_root_values()
        .iter()
        .map(|(k, v)| (*k, v.to_string()))
        .collect();
    compare_descriptor(
        &mut report,
        "data root",
        &dir.join(database_descriptor::FILE),
        Kind::DataRoot,
        &expect,
        database_descriptor::KNOWN_FEATURES,
    )?;
    if !report.is_clean() {
        return Ok(report);
    }
    let (root, _stores) = match open_with_stores(dir) {
        Ok(opened) => opened,
        Err(AdminError::Open(OpenError::Metadata(e))) => match version_problem(&e) {
            Some(problem) => {
                report.problems.push(problem);
                return Ok(report);
            }
            None => return Err(AdminError::Open(OpenError::Metadata(e))),
        },
        Err(e) => return Err(e),
    };
    let repos = select(&root, None)?;
    for info in &repos {
        let dir = repo_dir(&root, info);
        match atomic_publication_v2(info, &dir, inspect) {
            Ok(Some(note)) => report.notes.push(note),
            Ok(None) => {}
            Err(e) => {
                report.problems.push(format!("{}: {e}", info.name));
                continue;
            }
        }
        // The id is the repository's identity, not a version: step 3
        // refuses a descriptor that names another one.
        let expect: Vec<(&str, String)> = scribe_metadata::repo::expected_repo_values(&info.id)
            .into_iter()
            .filter(|(key, _)| *key != "repository-id")
            .collect();
        compare_descriptor(
            &mut report,
            &format!("repository {}", info.name),
            &dir.join(database_descriptor::FILE),
            Kind::Repository,
            &expect,
            database_descriptor::KNOWN_FEATURES,
        )?;
        let store = dir.join("objects").join(database_descriptor::FILE);
        let label = format!("objects of {}", info.name);
        if store.exists() {
            let expect: Vec<(&str, String)> = scribe_objects::STORE_VERSIONS
                .iter()
                .map(|(k, v)| (*k, v.to_string()))
                .collect();
            compare_descriptor(
                &mut report,
                &label,
                &store,
                Kind::ObjectStore,
                &expect,
                scribe_objects::KNOWN_STORE_FEATURES,
            )?;
        } else {
            report.notes.push(format!(
                "{label}: no store yet (created with this build's versions when first opened)"
            ));
        }
    }
    if !report.is_clean() {
        return Ok(report);
    }
    let claims = if dir
        .join(scribe_metadata::auth_state::AUTH_STATE_FILE)
        .exists()
    {
        Some(
            scribe_metadata::auth_state::AuthState::open_existing(dir).map_err(|source| {
                AdminError::Metadata {
                    repo: "auth-state".into(),
                    source,
                }
            })?,
        )
    } else {
        None
    };
    for info in &repos {
        let db_path = repo_dir(&root, info).join(scribe_metadata::repo::METADATA_FILE);
        match migrate_revisions(info, &db_path, claims.as_ref(), inspect) {
            Ok(Some(note)) => report.notes.push(note),
            Ok(None) => {}
            Err(e) => {
                report.problems.push(format!("{}: {e}", info.name));
                continue;
            }
        }
        if inspect {
            continue;
        }
        if let Err(e) = root.open_repository(info.id) {
            match version_problem(&e) {
                Some(problem) => report.problems.push(problem),
                None => return Err(meta_err(info)(e)),
            }
        }
    }
    Ok(report)
}

/// `atomic-publication-v1 -> v2` of one repository: the staged lock
/// transfers and their counters in one archived transaction, then the
/// descriptor's feature. `None` when the repository is v2 already.
fn atomic_publication_v2(
    info: &RepositoryInfo,
    dir: &Path,
    inspect: bool,
) -> Result<Option<String>, MetadataError> {
    use scribe_metadata::migration;
    if !migration::requires_atomic_publication_v1(dir)? {
        return Ok(None);
    }
    if inspect {
        return Ok(Some(format!(
            "{}: requires atomic-publication-v1; to apply: atomic-publication-v1 -> v2",
            info.name
        )));
    }
    let db_path = dir.join(scribe_metadata::repo::METADATA_FILE);
    let db = migration::open(&db_path)?;
    let archive = std::sync::Arc::new(scribe_metadata::archive::Archive::open(
        &db_path,
        db.clone(),
    )?);
    let n = migration::convert_atomic_publication(&db, &archive, &db_path)?;
    migration::upgrade_descriptor_feature(dir)?;
    Ok(Some(format!(
        "{}: atomic-publication-v1 -> v2: {n} staged lock transfer(s) converted",
        info.name
    )))
}

/// The repository migration journal of one repository: its state with
/// `inspect`, otherwise every pending step applied (resuming an
/// interrupted one). `None` when the repository is current.
fn migrate_revisions(
    info: &RepositoryInfo,
    db_path: &Path,
    claims: Option<&scribe_metadata::auth_state::AuthState>,
    inspect: bool,
) -> Result<Option<String>, MetadataError> {
    use scribe_metadata::migration;
    let db = migration::open(db_path)?;
    let state = migration::inspect(&db, db_path)?;
    if state.is_current() {
        return Ok(None);
    }
    let pending: Vec<String> = state
        .pending()
        .iter()
        .map(|(r, n)| format!("{r} {n}"))
        .collect();
    let active = match &state.active {
        Some((r, c)) => format!(" (revision {r} in progress at cursor {})", hex::encode(c)),
        None => String::new(),
    };
    if inspect {
        return Ok(Some(format!(
            "{}: migration revision {}{active}; to apply: {}",
            info.name,
            state.revision,
            pending.join(", ")
        )));
    }
    let archive = std::sync::Arc::new(scribe_metadata::archive::Archive::open(
        db_path,
        db.clone(),
    )?);
    let repo_id = info.id.0;
    let owner_of = |ws: &[u8; 16]| match claims {
        Some(c) => c.workspace_owner(&repo_id, ws),
        None => Ok(None),
    };
    let done = migration::apply(&db, &archive, db_path, &owner_of, None)?;
    Ok(Some(format!(
        "{}: migrated from revision {} to {}{active}: {} workspace record(s) converted, \
         {} lock index row(s), {} change note(s) adopted{}, {} transaction(s)",
        info.name,
        done.from,
        done.to,
        done.workspaces_converted,
        done.locks_indexed,
        done.notes_adopted,
        if done.adopted_workspace_state {
            ", workspace_state adopted"
        } else {
            ""
        },
        done.batches
    )))
}

/// The problem line of a version or feature refusal of the metadata layer.
fn version_problem(e: &MetadataError) -> Option<String> {
    match e {
        MetadataError::VersionMismatch {
            path,
            what,
            found,
            expected,
        } => Some(format!(
            "{}: {what} is {found}, this build reads {expected} and has no conversion from {found}",
            path.display()
        )),
        MetadataError::UnsupportedFeature { path, feature } => Some(format!(
            "{}: requires feature {feature:?}, which this build does not know",
            path.display()
        )),
        _ => None,
    }
}

/// Read the descriptor at `file` and compare it with the `expect`ed values
/// and `known` features: a note with what it records, a problem per
/// difference.
fn compare_descriptor(
    report: &mut Report,
    label: &str,
    file: &Path,
    kind: Kind,
    expect: &[(&str, String)],
    known: &[&str],
) -> Result<(), AdminError> {
    let unreadable = |reason: String| AdminError::Descriptor {
        path: file.to_owned(),
        reason,
    };
    let bytes = std::fs::read(file).map_err(|e| unreadable(e.to_string()))?;
    let d = Descriptor::parse(&bytes).map_err(|e| unreadable(e.to_string()))?;
    if d.kind() != kind {
        return Err(unreadable(format!(
            "a {} descriptor where a {} one belongs",
            d.kind().as_str(),
            kind.as_str()
        )));
    }
    let before = report.problems.len();
    let mut recorded = Vec::new();
    for (key, reads) in expect {
        let found = d.get(key).unwrap_or("absent");
        recorded.push(format!("{key} {found}"));
        if found != reads {
            report.problems.push(format!(
                "{}: {key} is {found}, this build reads {reads} and has no conversion from {found}",
                file.display()
            ));
        }
    }
    let features = d.required_features();
    if matches!(kind, Kind::DataRoot | Kind::Repository)
        && !features.contains(&database_descriptor::FEATURE_RECOVERY_JOURNAL)
    {
        report.problems.push(format!(
            "{}: predates metadata recovery journal profile 2 (required feature {} is absent) and has no conversion",
            file.display(),
            database_descriptor::FEATURE_RECOVERY_JOURNAL
        ));
    }
    for feature in &features {
        if !known.contains(feature) {
            report.problems.push(format!(
                "{}: requires feature {feature:?}, which this build does not know",
                file.display()
            ));
        }
    }
    let features = if features.is_empty() {
        "none".to_string()
    } else {
        features.join(",")
    };
    let state = if report.problems.len() == before {
        "current"
    } else {
        "not readable by this build"
    };
    report.notes.push(format!(
        "{label} ({}): {}; required features {features}: {state}",
        file.display(),
        recorded.join(", ")
    ));
    Ok(())
}

/// Which workspaces' pins `pins abandon` releases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AbandonPins {
    /// This workspace's.
    Workspace(scribe_format::WorkspaceId),
    /// Every workspace registered more than this long ago, and every
    /// workspace holding pins without an active registration (retired, or
    /// never registered): their pins protect nothing a client can submit.
    OlderThan(std::time::Duration),
}

/// `pins list`: one note per workspace holding upload pins, per
/// repository: its state, its pin count and its intents.
pub fn pins_list(dir: &Path, repo: Option<&str>) -> Result<Report, AdminError> {
    let (root, _reg) = open_with_stores(dir)?;
    let mut report = Report::default();
    let now = scribe_metadata::clock::now_ms();
    for info in select(&root, repo)? {
        let r = root.open_repository(info.id).map_err(meta_err(&info))?;
        for w in r.pin_summary().map_err(meta_err(&info))? {
            let state = match w.state {
                PinOwnerState::Registered { created_ms } => {
                    format!("registered {} ago", age(now, created_ms))
                }
                PinOwnerState::Retired { retired_ms } => {
                    format!("retired {} ago", age(now, retired_ms))
                }
                PinOwnerState::Unregistered => "unregistered".to_string(),
            };
            let intents: Vec<String> = w
                .intents
                .iter()
                .map(|(op, n, finished)| {
                    let done = if *finished { ", finished" } else { "" };
                    format!("{} ({n}{done})", op.to_hex())
                })
                .collect();
            report.notes.push(format!(
                "{}: workspace {} {state}: {} pins, intents {}",
                info.name,
                w.workspace.to_hex(),
                w.pins,
                intents.join(" ")
            ));
        }
    }
    Ok(report)
}

/// `pins abandon`: operator abandonment (specification, "Atomic
/// publication and upload lifecycle profile 1"): release the selected
/// workspaces' unfinished pins and their intents' owners. Accepted history
/// is untouched; a client whose submission was still pending pins again
/// before it submits.
pub fn pins_abandon(
    dir: &Path,
    repo: Option<&str>,
    which: AbandonPins,
) -> Result<Report, AdminError> {
    let (root, _reg) = open_with_stores(dir)?;
    let mut report = Report::default();
    let now = scribe_metadata::clock::now_ms();
    for info in select(&root, repo)? {
        let r = root.open_repository(info.id).map_err(meta_err(&info))?;
        for w in r.pin_summary().map_err(meta_err(&info))? {
            let chosen = match which {
                AbandonPins::Workspace(ws) => w.workspace == ws,
                AbandonPins::OlderThan(d) => match w.state {
                    PinOwnerState::Registered { created_ms } => {
                        u128::from(now.saturating_sub(created_ms)) > d.as_millis()
                    }
                    PinOwnerState::Retired { .. } | PinOwnerState::Unregistered => true,
                },
            };
            if !chosen {
                continue;
            }
            let n = r.abandon_pins(w.workspace).map_err(meta_err(&info))?;
            report.notes.push(format!(
                "{}: workspace {}: abandoned {n} pins",
                info.name,
                w.workspace.to_hex()
            ));
        }
    }
    Ok(report)
}

/// `lock release` (offline, #18 item 1): remove the locks on `paths` (a
/// file, or every lock under a folder) whoever holds them, in the one
/// repository named. A lock left by a deleted or abandoned workspace is
/// otherwise unbreakable. One note per released lock names its holder; a
/// path without a lock is a problem (exit 1), the others are released.
///
/// On a data root bound to an auth service (`auth-init`), each release is
/// first recorded in the service's audit trail as `lock-force-release`
/// (the server's own credential, user id all zeros: the host's
/// administrator, with the word `offline`), as `scribe unlock --force`
/// is: no row, no release. `unaudited` releases without the row when the
/// service cannot be reached (each such release says so).
pub fn lock_release(
    dir: &Path,
    repo: &str,
    paths: &[String],
    unaudited: bool,
) -> Result<Report, AdminError> {
    let audit = if crate::team::requires_auth(dir).map_err(|e| AdminError::Team(e.to_string()))? {
        let files =
            crate::team::AuthFiles::load(dir).map_err(|e| AdminError::Team(e.to_string()))?;
        Some(files.client())
    } else {
        None
    };
    let (root, _reg) = open_with_stores(dir)?;
    let mut report = Report::default();
    for info in select(&root, Some(repo))? {
        let r = root.open_repository(info.id).map_err(meta_err(&info))?;
        for p in paths {
            let p = p.trim_end_matches('/');
            let held: Vec<_> = r
                .locks(p)
                .map_err(meta_err(&info))?
                .into_iter()
                .filter(|l| {
                    p.is_empty()
                        || l.path == p
                        || (l.path.starts_with(p) && l.path.as_bytes().get(p.len()) == Some(&b'/'))
                })
                .collect();
            if held.is_empty() {
                report.problems.push(format!(
                    "{}: {} is not locked",
                    info.name,
                    scribe_format::echo::echo(p)
                ));
                continue;
            }
            for l in held {
                let mut unrecorded = None;
                if let Some(client) = &audit {
                    let recorded = client.as_ref().map_err(|e| e.to_string()).and_then(|c| {
                        c.rows(
                            "server-audit",
                            vec![
                                "0".repeat(32),
                                "lock-force-release".into(),
                                info.name.clone(),
                                "offline".into(),
                                format!("workspace:{}", l.record.workspace.to_hex()),
                                l.path.clone(),
                            ],
                        )
                        .map_err(|f| format!("{} ({})", f.message, f.code))
                    });
                    if let Err(e) = recorded {
                        if !unaudited {
                            report.problems.push(format!(
                                "{}: the lock on {} was NOT released: the auth service did not record it ({e}); \
                                 `--unaudited` releases it without an audit row",
                                info.name, l.path
                            ));
                            continue;
                        }
                        unrecorded = Some(e);
                    }
                }
                r.unlock(std::slice::from_ref(&l.path), l.record.workspace)
                    .map_err(meta_err(&info))?;
                report.notes.push(format!(
                    "{}: released the lock on {} held by {} (workspace {}){}",
                    info.name,
                    l.path,
                    l.record.author,
                    l.record.workspace.to_hex(),
                    match (&audit, unrecorded) {
                        (None, _) => String::new(),
                        (Some(_), None) => ", recorded in the auth service's audit trail".into(),
                        (Some(_), Some(e)) => format!(", WITHOUT an audit row (--unaudited; {e})"),
                    }
                ));
            }
        }
    }
    Ok(report)
}

fn age(now: u64, then: u64) -> String {
    let s = now.saturating_sub(then) / 1000;
    match s {
        0..120 => format!("{s}s"),
        120..7200 => format!("{}m", s / 60),
        7200..172_800 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// `consolidate`: for the catalog (without `repo`) and each selected
/// repository, write a logical base of the database into its archive,
/// select it with `BASE`, advance the floor, release the covered outbox
/// rows and prune covered segments and older bases. Offline (the data
/// root's lock is held).
pub fn consolidate(dir: &Path, repo: Option<&str>) -> Result<Report, AdminError> {
    let root = open_without_stores(dir)?;
    let mut report = Report::default();
    let line = |name: &str, c: &scribe_metadata::consolidate::Consolidated| {
        let base = if c.wrote_base {
            format!(
                "base at journal end {} ({} table(s), {} row(s), {} bytes)",
                c.end, c.tables, c.rows, c.base_bytes
            )
        } else {
            format!("the base at journal end {} is current", c.end)
        };
        format!(
            "{name}: {base}; {} outbox row(s) released, {} segment(s) and {} older base(s) pruned",
            c.outbox_removed, c.segments_pruned, c.bases_pruned
        )
    };
    if repo.is_none() {
        let c = root
            .catalog_archive()
            .and_then(|a| scribe_metadata::consolidate::consolidate(&a))
            .map_err(|source| AdminError::Metadata {
                repo: "catalog".into(),
                source,
            })?;
        report.notes.push(line("catalog", &c));
        match scribe_metadata::auth_state::consolidate(dir) {
            Ok(Some(c)) => report.notes.push(line("auth-state", &c)),
            Ok(None) => {}
            Err(e) => report.problems.push(format!("auth-state: {e}")),
        }
    }
    for info in select(&root, repo)? {
        let r = root.open_repository(info.id).map_err(meta_err(&info))?;
        match scribe_metadata::consolidate::consolidate(r.archive()) {
            Ok(c) => report.notes.push(line(&info.name, &c)),
            Err(e) => report.problems.push(format!("{}: {e}", info.name)),
        }
    }
    Ok(report)
}

/// `archive relocate --to DIR`: copy the catalog's archive to
/// `DIR/catalog.recovery` and each repository's to
/// `DIR/repos/<id>/metadata.recovery` (only the named repository's with
/// `repo`), flush and verify each copy, then select it in the database's
/// `.recovery-location`. The previous directories are kept. Offline. `to`
/// must be absolute (the CLI resolves a relative one first).
pub fn archive_relocate(dir: &Path, repo: Option<&str>, to: &Path) -> Result<Report, AdminError> {
    let root = open_without_stores(dir)?;
    let mut targets = Vec::new();
    if repo.is_none() {
        targets.push((
            "catalog".to_owned(),
            dir.join("catalog.redb"),
            to.join("catalog.recovery"),
        ));
        if dir
            .join(scribe_metadata::auth_state::AUTH_STATE_FILE)
            .exists()
        {
            targets.push((
                "auth-state".to_owned(),
                dir.join(scribe_metadata::auth_state::AUTH_STATE_FILE),
                to.join("auth-state.recovery"),
            ));
        }
    }
    for info in select(&root, repo)? {
        targets.push((
            info.name.clone(),
            repo_dir(&root, &info).join(scribe_metadata::repo::METADATA_FILE),
            to.join("repos")
                .join(info.id.to_hex())
                .join("metadata.recovery"),
        ));
    }
    let mut report = Report::default();
    for (name, db_path, dest) in targets {
        match scribe_metadata::consolidate::relocate(&db_path, &dest) {
            Ok(r) => report.notes.push(format!(
                "{name}: {} -> {}: {} file(s), {} bytes, journal end {} (the previous directory is kept)",
                r.from.display(),
                r.to.display(),
                r.files,
                r.bytes,
                r.head.end
            )),
            Err(e) => report.problems.push(format!("{name}: {e}")),
        }
    }
    Ok(report)
}

/// `reclaim`: offline snapshot-page reclamation of each repository (or the
/// named one): unreachable preparation pages are deleted through the
/// journal; a missing accepted-commit or active-branch origin root, or an
/// unrecovered streamed preparation, is refused before anything is swept.
pub fn reclaim(dir: &Path, repo: Option<&str>, step: &dyn Fn(&str)) -> Result<Report, AdminError> {
    let root = open_without_stores(dir)?;
    let mut report = Report::default();
    for info in select(&root, repo)? {
        let r = root.open_repository(info.id).map_err(meta_err(&info))?;
        match scribe_metadata::reclaim::reclaim_snapshot_pages(&r, step) {
            Ok(c) => report.notes.push(format!(
                "{}: {} root row(s), {} page(s): {} reachable, {} unreachable removed",
                info.name, c.roots, c.pages, c.reachable, c.removed
            )),
            Err(e) => report.problems.push(format!("{}: {e}", info.name)),
        }
    }
    Ok(report)
}

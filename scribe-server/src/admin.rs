//! Offline administration of a data root: `doctor`, `verify`,
//! `rebuild-locator`, `compact-objects`, `recover-submissions`.
//!
//! Each takes the data root's `LOCK` for its duration (so it refuses to run
//! beside a server) and reports per repository; a report is clean when no
//! problem was found.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use scribe_format::{ObjectId, ObjectKind};
use scribe_metadata::{DataRoot, MemoryObjects, MetadataError, Objects, RepositoryInfo};
use scribe_objects::{CompactContext, CompactOptions, ObjectStore};

use crate::service::{stores, OpenError, StoreRegistry};

/// Why an administrative command could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error("no repository {0:?}")]
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

fn select(root: &DataRoot, repo: Option<&str>) -> Result<Vec<RepositoryInfo>, AdminError> {
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
fn open_without_stores(dir: &Path) -> Result<DataRoot, AdminError> {
    let mut root = DataRoot::open(dir).map_err(OpenError::from)?;
    root.set_objects_factory(Box::new(|_: &Path, _| {
        let o: Objects = MemoryObjects::new();
        Ok(o)
    }));
    Ok(root)
}

/// Metadata doctor and object-store verification of each repository.
pub fn doctor(dir: &Path, repo: Option<&str>) -> Result<Report, AdminError> {
    let (root, reg) = open_with_stores(dir)?;
    let mut report = Report::default();
    for info in select(&root, repo)? {
        let r = root.open_repository(info.id).map_err(meta_err(&info))?;
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
            report
                .problems
                .push(format!("{}: objects: {p:?}", info.name));
        }
        report.notes.push(format!(
            "{}: {} commits and {} pages checked, objects verified",
            info.name, d.commits_checked, d.pages_checked
        ));
    }
    Ok(report)
}

/// Verify every object of each repository's store (read-only).
pub fn verify(dir: &Path, repo: Option<&str>) -> Result<Report, AdminError> {
    let root = open_without_stores(dir)?;
    let mut report = Report::default();
    for info in select(&root, repo)? {
        let objects = repo_dir(&root, &info).join("objects");
        let v = scribe_objects::verify_dir(&objects).map_err(store_err(&info))?;
        for p in &v.problems {
            report.problems.push(format!("{}: {p:?}", info.name));
        }
        report
            .notes
            .push(format!("{}: objects verified", info.name));
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
        report.notes.push(format!("{}: {r:?}", info.name));
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

/// The live object set of a repository: metadata's retained roots (every
/// accepted commit, its change set, every accepted manifest, every active
/// pin) and the chunks of every retained manifest. Pinned objects may be
/// absent (an upload may not have started) and are then skipped; anything
/// else that is absent stops collection.
pub fn live_objects(
    repo: &scribe_metadata::Repository,
    store: &ObjectStore,
) -> Result<Vec<ObjectId>, AdminError> {
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
    let mut live = HashSet::new();
    let roots: Vec<ObjectId> = required.iter().chain(pinned.iter()).copied().collect();
    for id in roots {
        let must = required.contains(&id);
        if !must && !store.contains(&id).map_err(se)? {
            continue;
        }
        if !live.insert(id) || id.kind != ObjectKind::Manifest {
            continue;
        }
        let payload = store.get(&id).map_err(se)?;
        let m =
            scribe_objects::decode_manifest(&payload).map_err(|e| me(MetadataError::Format(e)))?;
        for c in m.chunks {
            let cid = ObjectId::chunk(c.id);
            if must || store.contains(&cid).map_err(se)? {
                live.insert(cid);
            }
        }
    }
    let mut out: Vec<ObjectId> = live.into_iter().collect();
    out.sort_by_key(|id| id.to_bytes());
    Ok(out)
}

/// Compact each repository's store, retaining its live objects.
pub fn compact_objects(
    dir: &Path,
    repo: Option<&str>,
    options: &CompactOptions,
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
            let live = live_objects(&r, &store)?;
            drop(store);
            live
        };
        let ctx = CompactContext {
            repository: info.id.0,
            journal_end: 0,
        };
        let c = scribe_objects::compact(&objects, live, ctx, options).map_err(store_err(&info))?;
        report.notes.push(format!("{}: {c:?}", info.name));
    }
    Ok(report)
}

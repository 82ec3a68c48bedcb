//! The data root (section 7): `SCRIBE_FORMAT`, the exclusive `LOCK`,
//! `catalog.redb` (section 7.1) and `repos/<id>/`.
//!
//! ```text
//! <data>/SCRIBE_FORMAT          kind = data-root
//! <data>/LOCK                   flock held for the life of a DataRoot; holds the owner's pid
//! <data>/catalog.redb           meta, repos, repo_names
//! <data>/repos/<id hex>/        SCRIBE_FORMAT, metadata.redb, objects/
//! ```

use scribe_format::echo::echo;
use std::collections::HashMap;
use std::fs::File;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use redb::{Database, ReadableDatabase, ReadableTable};
use scribe_format::{BranchId, ErrorCode, RepositoryId};

use crate::archive::Archive;
use crate::clock::now_ms;
use crate::database_descriptor::{self, sync_dir};
use crate::error::{MetadataError, Result};
use crate::objects::{Objects, StoreObjects};
use crate::records::{decode_u32, CatalogRecord, RepoState};
use crate::repo::Repository;
use crate::tables::{CATALOG_META, CATALOG_REPOS, CATALOG_REPO_NAMES, CATALOG_SCHEMA};
use scribe_format::descriptor::{Descriptor, Kind};

/// Where [`DataRoot::delete_repository`] moves a deleted repository's
/// directory: `<data>/deleted/<id hex>-<unix ms>/`.
pub const DELETED_DIR: &str = "deleted";

/// Builds the object hooks of an opened repository from its `objects/` directory.
pub type ObjectsFactory = dyn Fn(&Path, RepositoryId) -> Result<Objects> + Send + Sync;

/// One repository in the catalog.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepositoryInfo {
    pub id: RepositoryId,
    pub name: String,
    pub created_ms: u64,
    pub main_branch: BranchId,
}

/// An owned data root. Holding it holds `LOCK`.
pub struct DataRoot {
    dir: PathBuf,
    _lock: File,
    /// `catalog.redb`; `None` after a storage failure until the next use
    /// opens it again ([`DataRoot::forget_open_repositories`]).
    catalog: Mutex<Option<(Arc<Database>, Arc<Archive>)>>,
    incarnation: String,
    open: Mutex<HashMap<RepositoryId, Arc<Repository>>>,
    /// Since when each open repository with the compaction hint has been
    /// seen unheld by [`DataRoot::compact_idle_repositories`]; handing it
    /// out or finding it held starts the count again.
    idle_since: Mutex<HashMap<RepositoryId, std::time::Instant>>,
    objects: Box<ObjectsFactory>,
    create_gate: Mutex<()>,
    /// Repositories [`DataRoot::open_every_repository`] could not open:
    /// refused by name until the data root is opened again, while the
    /// others serve.
    set_aside: Mutex<HashMap<RepositoryId, SetAside>>,
    /// What [`DataRoot::open`] put right (a repository descriptor naming
    /// it by a name the catalog no longer holds), one line each.
    healed: Vec<String>,
    /// The retired repositories ([`crate::retired`]), read at opening:
    /// retiring takes the data root offline, so this never goes stale.
    retired: HashMap<RepositoryId, crate::retired::Retired>,
}

/// A repository that could not be opened with its data root
/// ([`DataRoot::open_every_repository`]): the others serve, and every use
/// of this one is refused with its cause.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetAside {
    pub id: RepositoryId,
    pub name: String,
    /// The code of the error that stopped the opening.
    pub code: ErrorCode,
    /// That error's message.
    pub cause: String,
}

impl SetAside {
    /// The refusal every use of the repository gets.
    pub fn refusal(&self) -> MetadataError {
        MetadataError::refused(
            self.code,
            format!(
                "repository {:?} is unavailable: it could not be opened when the server started \
                 ({}); the other repositories serve. Its administrator stops the server and runs \
                 `scribe-server doctor --repo {}`",
                self.name, self.cause, self.name
            ),
        )
    }
}

/// The `SCRIBE_FORMAT` values a data root must record for this build to
/// serve it.
pub fn expected_root_values() -> [(&'static str, &'static str); 5] {
    [
        ("catalog-schema", "1"),
        ("repository-schema", "3"),
        ("object-store", "1"),
        ("envelope", "1"),
        ("engine", "redb-4"),
    ]
}

/// Take the exclusive OS lock on `<dir>/LOCK`, recording our pid in it.
pub(crate) fn take_lock(dir: &Path) -> Result<File> {
    let path = dir.join("LOCK");
    scribe_format::lock::take(&path).map_err(|e| match e {
        scribe_format::lock::LockError::Held { pid } => MetadataError::DataRootLocked {
            path: dir.to_owned(),
            pid,
        },
        scribe_format::lock::LockError::Io(e) => MetadataError::io(&path, e),
    })
}

/// Create a repository's object store (section 6) at `dir`.
pub fn create_object_store(dir: &Path) -> Result<()> {
    let store = scribe_objects::ObjectStore::create(dir, scribe_objects::StoreOptions::default())
        .map_err(|e| MetadataError::Objects(format!("{}: {e}", dir.display())))?;
    drop(store);
    Ok(())
}

/// The default hooks: the repository's `scribe_objects::ObjectStore`.
fn default_objects(dir: &Path, _id: RepositoryId) -> Result<Objects> {
    let store = scribe_objects::ObjectStore::open(dir)
        .map_err(|e| MetadataError::Objects(format!("{}: {e}", dir.display())))?;
    let o: Objects = Arc::new(StoreObjects(Arc::new(store)));
    Ok(o)
}

impl DataRoot {
    /// Create a new data root in `dir` (absent or empty) and own it.
    pub fn create(dir: impl AsRef<Path>) -> Result<DataRoot> {
        let dir = dir.as_ref().to_owned();
        if dir.exists() {
            let mut it = std::fs::read_dir(&dir).map_err(|e| MetadataError::io(&dir, e))?;
            if it.next().is_some() {
                return Err(MetadataError::refused(
                    ErrorCode::AlreadyExists,
                    format!("{} is not empty", dir.display()),
                ));
            }
        }
        std::fs::create_dir_all(dir.join("repos")).map_err(|e| MetadataError::io(&dir, e))?;
        let lock = take_lock(&dir)?;
        let catalog_path = dir.join("catalog.redb");
        let catalog = Arc::new(Database::create(&catalog_path)?);
        crate::journal::initialize(&catalog)?;
        let archive = Arc::new(Archive::create(&catalog_path, catalog.clone())?);
        {
            let tx = crate::journal::begin_archived(&catalog, &archive)?;
            {
                let mut meta = tx.open_table(CATALOG_META)?;
                meta.insert("schema", CATALOG_SCHEMA.to_le_bytes().as_slice())?;
                tx.open_table(CATALOG_REPOS)?;
                tx.open_table(CATALOG_REPO_NAMES)?;
            }
            tx.commit()?;
        }
        let mut inc = [0u8; 16];
        inc.copy_from_slice(&RepositoryId::random().0);
        let incarnation = hex::encode(inc);
        let fields = scribe_format::descriptor::DataRoot {
            catalog_schema: CATALOG_SCHEMA,
            repository_schema: crate::tables::REPOSITORY_SCHEMA,
            object_store: 1,
            envelope: 1,
            engine: "redb-4".into(),
            incarnation: inc,
            created_ms: now_ms(),
            restored: None,
        };
        let mut d = Descriptor::new_data_root(&fields)?;
        database_descriptor::add_required_features(&mut d)?;
        database_descriptor::write(&d, &dir)?;
        Ok(DataRoot {
            dir,
            _lock: lock,
            catalog: Mutex::new(Some((catalog, archive))),
            incarnation,
            open: Mutex::new(HashMap::new()),
            idle_since: Mutex::new(HashMap::new()),
            objects: Box::new(default_objects),
            create_gate: Mutex::new(()),
            set_aside: Mutex::new(HashMap::new()),
            healed: Vec::new(),
            retired: HashMap::new(),
        })
    }

    /// Open and own an existing data root; removes `creating` leftovers.
    pub fn open(dir: impl AsRef<Path>) -> Result<DataRoot> {
        let dir = dir.as_ref().to_owned();
        let lock = take_lock(&dir)?;
        let d = database_descriptor::read(&dir)?;
        database_descriptor::check(&d, &dir, Kind::DataRoot, &expected_root_values())?;
        let incarnation = d.get("incarnation").unwrap_or_default().to_owned();
        let catalog_path = dir.join("catalog.redb");
        if !catalog_path.exists() {
            return Err(MetadataError::corrupt(format!(
                "{} is missing",
                catalog_path.display()
            )));
        }
        let catalog = Arc::new(Database::open(&catalog_path)?);
        {
            let tx = catalog.begin_read()?;
            crate::journal::check_profile(&tx, &catalog_path)?;
            let meta = tx.open_table(CATALOG_META)?;
            let schema = meta
                .get("schema")?
                .ok_or_else(|| MetadataError::corrupt("catalog has no schema"))?;
            let schema = decode_u32(schema.value(), "catalog schema")?;
            if schema != CATALOG_SCHEMA {
                return Err(MetadataError::VersionMismatch {
                    path: catalog_path,
                    what: "catalog schema",
                    found: schema.to_string(),
                    expected: CATALOG_SCHEMA.to_string(),
                });
            }
            tx.open_table(CATALOG_REPOS)?;
            tx.open_table(CATALOG_REPO_NAMES)?;
        }
        let mut root = DataRoot {
            dir,
            _lock: lock,
            catalog: Mutex::new(Some((
                catalog.clone(),
                Arc::new(Archive::open(&catalog_path, catalog)?),
            ))),
            incarnation,
            open: Mutex::new(HashMap::new()),
            idle_since: Mutex::new(HashMap::new()),
            objects: Box::new(default_objects),
            create_gate: Mutex::new(()),
            set_aside: Mutex::new(HashMap::new()),
            healed: Vec::new(),
            retired: HashMap::new(),
        };
        root.remove_creating_leftovers()?;
        root.healed = root.heal_renamed_descriptors()?;
        root.retired = crate::retired::read(&root.dir)?
            .into_iter()
            .map(|r| (r.id, r))
            .collect();
        Ok(root)
    }

    /// Whether any repository is retired (nothing to look up otherwise).
    pub fn has_retired(&self) -> bool {
        !self.retired.is_empty()
    }

    /// Whether repository `id` is retired (read-only), and whom to ask.
    pub fn retired(&self, id: RepositoryId) -> Option<&crate::retired::Retired> {
        self.retired.get(&id)
    }

    /// Retire repository `name` (kept, read-only), recording whom to ask;
    /// or, with `retire` false, bring it back. Returns its id and whether
    /// anything changed.
    pub fn set_retired(
        &self,
        name: &str,
        retire: bool,
        contact: &str,
    ) -> Result<(RepositoryId, bool)> {
        let id = self.repository_id(name)?;
        if !crate::retired::valid_contact(contact) {
            return Err(MetadataError::refused(
                ErrorCode::Malformed,
                format!(
                    "--contact must be one line of at most {} bytes without control characters",
                    crate::retired::MAX_CONTACT_BYTES
                ),
            ));
        }
        let mut all = crate::retired::read(&self.dir)?;
        let was = all.iter().any(|r| r.id == id);
        all.retain(|r| r.id != id);
        if retire {
            all.push(crate::retired::Retired {
                id,
                retired_ms: now_ms(),
                contact: contact.to_owned(),
            });
        }
        crate::retired::write(&self.dir, &all)?;
        Ok((id, was != retire || retire))
    }

    /// What opening this data root put right, one line each (empty
    /// nearly always): shown by `serve` and the `repo` commands.
    pub fn healed(&self) -> &[String] {
        &self.healed
    }

    /// A rename ([`DataRoot::rename_repository`]) commits the catalog,
    /// then rewrites the repository's `SCRIBE_FORMAT`; a crash between the
    /// two leaves the old name there. The catalog is the truth: each ready
    /// repository whose descriptor names it otherwise is rewritten here
    /// (the rename finished), and the line saying so returned. A
    /// descriptor that cannot be read is left to the repository's own
    /// opening, which names it.
    fn heal_renamed_descriptors(&self) -> Result<Vec<String>> {
        let mut ready = Vec::new();
        {
            let tx = self.catalog()?.begin_read()?;
            let repos = tx.open_table(CATALOG_REPOS)?;
            for row in repos.range::<[u8; 16]>(..)? {
                let (k, v) = row?;
                let rec = CatalogRecord::decode(v.value())?;
                if rec.state == RepoState::Ready {
                    ready.push((RepositoryId(k.value()), rec.name));
                }
            }
        }
        let mut healed = Vec::new();
        for (id, name) in ready {
            let dir = self.repo_dir(&id);
            let Ok(mut d) = database_descriptor::read(&dir) else {
                continue;
            };
            let Some(said) = d.get("name").map(str::to_owned) else {
                continue;
            };
            if said == name {
                continue;
            }
            d.set("name", &name)
                .map_err(|e| MetadataError::corrupt(format!("{}: {e}", dir.display())))?;
            database_descriptor::write(&d, &dir)?;
            healed.push(format!(
                "repository {} (id {id}): its {} still named it {} (a rename stopped before \
                 rewriting it); rewritten to the catalog's name",
                echo(&name),
                dir.join(database_descriptor::FILE).display(),
                echo(&said)
            ));
        }
        Ok(healed)
    }

    /// Replace how opened repositories reach their object store (the server
    /// passes one backed by `scribe_objects::ObjectStore`).
    pub fn set_objects_factory(&mut self, f: Box<ObjectsFactory>) {
        self.objects = f;
    }

    /// The data root directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The data root's incarnation (32 hex).
    pub fn incarnation(&self) -> &str {
        &self.incarnation
    }

    fn repo_dir(&self, id: &RepositoryId) -> PathBuf {
        self.dir.join("repos").join(id.to_hex())
    }

    fn remove_creating_leftovers(&self) -> Result<()> {
        let mut leftovers = Vec::new();
        {
            let tx = self.catalog()?.begin_read()?;
            let repos = tx.open_table(CATALOG_REPOS)?;
            for row in repos.range::<[u8; 16]>(..)? {
                let (k, v) = row?;
                let rec = CatalogRecord::decode(v.value())?;
                if rec.state == RepoState::Creating {
                    leftovers.push((RepositoryId(k.value()), rec.name));
                }
            }
        }
        for (id, name) in leftovers {
            let dir = self.repo_dir(&id);
            if dir.exists() {
                std::fs::remove_dir_all(&dir).map_err(|e| MetadataError::io(&dir, e))?;
            }
            let tx = self.catalog_write()?;
            {
                tx.open_table(CATALOG_REPOS)?.remove(id.0)?;
                let mut names = tx.open_table(CATALOG_REPO_NAMES)?;
                let same = names.get(name.as_str())?.map(|g| g.value()) == Some(id.0);
                if same {
                    names.remove(name.as_str())?;
                }
            }
            tx.commit()?;
        }
        Ok(())
    }

    /// Create a repository named `name` with its main branch.
    pub fn create_repository(&self, name: &str) -> Result<RepositoryId> {
        self.create_repository_with(name, false)
    }

    /// [`create_repository`](Self::create_repository), refusing a name
    /// another repository had before a rename ([`crate::former_names`])
    /// unless `reuse_name` (which gives the name back once the repository
    /// is made).
    pub fn create_repository_with(&self, name: &str, reuse_name: bool) -> Result<RepositoryId> {
        validate_name(name)?;
        let _gate = self
            .create_gate
            .lock()
            .map_err(|_| MetadataError::Gate("poisoned".into()))?;
        let former = self.former_holders(name, None)?;
        if !former.is_empty() && !reuse_name {
            return Err(self.former_name_refusal(name, &former, "repo create"));
        }
        let id = RepositoryId::random();
        let main = BranchId::random();
        let created_ms = now_ms();
        let rec = CatalogRecord {
            name: name.to_owned(),
            state: RepoState::Creating,
            created_ms,
            main_branch: main,
        };
        {
            let tx = self.catalog_write()?;
            add_to_catalog(&tx, id, &rec)?;
            tx.commit()?;
        }
        let dir = self.repo_dir(&id);
        std::fs::create_dir_all(&dir).map_err(|e| MetadataError::io(&dir, e))?;
        create_object_store(&dir.join("objects"))?;
        Repository::create(&dir, id, name, main, created_ms)?;
        sync_dir(&dir)?;
        sync_dir(&self.dir.join("repos"))?;
        let tx = self.catalog_write()?;
        {
            let ready = CatalogRecord {
                state: RepoState::Ready,
                ..rec
            };
            tx.open_table(CATALOG_REPOS)?
                .insert(id.0, ready.encode().as_slice())?;
        }
        tx.commit()?;
        if !former.is_empty() {
            self.forget_former_name(name)?;
        }
        Ok(id)
    }

    /// The repositories other than `except` that had `name` before a
    /// rename.
    fn former_holders(
        &self,
        name: &str,
        except: Option<RepositoryId>,
    ) -> Result<Vec<crate::former_names::FormerName>> {
        Ok(crate::former_names::read(&self.dir)?
            .into_iter()
            .filter(|f| f.name == name && Some(f.id) != except)
            .collect())
    }

    /// Refuse `name` when a repository other than `except` had it before a
    /// rename (the refusal [`rename_repository`](Self::rename_repository)
    /// and [`create_repository`](Self::create_repository) give), for a
    /// caller that must know before it changes anything elsewhere.
    pub fn check_name_reusable(
        &self,
        name: &str,
        except: Option<RepositoryId>,
        what: &str,
    ) -> Result<()> {
        let former = self.former_holders(name, except)?;
        if former.is_empty() {
            Ok(())
        } else {
            Err(self.former_name_refusal(name, &former, what))
        }
    }

    /// Give `name` back: forget every record of it.
    fn forget_former_name(&self, name: &str) -> Result<()> {
        let mut all = crate::former_names::read(&self.dir)?;
        all.retain(|f| f.name != name);
        crate::former_names::write(&self.dir, &all)
    }

    /// The refusal of `name` for `what`: which repository had it, what it
    /// is called now, and the way out.
    fn former_name_refusal(
        &self,
        name: &str,
        former: &[crate::former_names::FormerName],
        what: &str,
    ) -> MetadataError {
        let f = &former[former.len() - 1];
        let now = self
            .catalog()
            .and_then(|c| {
                let tx = c.begin_read()?;
                let repos = tx.open_table(CATALOG_REPOS)?;
                let row = repos.get(f.id.0)?;
                Ok(match row {
                    Some(r) => Some(CatalogRecord::decode(r.value())?.name),
                    None => None,
                })
            })
            .ok()
            .flatten();
        let now = match now {
            Some(n) => format!("now named {}", echo(&n)),
            None => "since deleted".to_owned(),
        };
        MetadataError::refused(
            ErrorCode::AlreadyExists,
            format!(
                "repository name {} was repository {}'s until a rename ({now}): workspaces made \
                 before it still ask for it by that name and would reach the new repository; \
                 once they have run `scribe workspace set-server URL`, give the name back with \
                 `scribe-server {what} --reuse-name` (offline)",
                echo(name),
                f.id
            ),
        )
    }

    /// Publish a repository built outside the serving path (`import`):
    /// the catalog row is reserved as `creating` under `id` and `name`,
    /// `build` fills `repos/<id>/` (object store, `metadata.redb`,
    /// descriptor), the repository is opened as serving opens it and
    /// `check`ed, and only then is the row `ready`. Any refusal removes the
    /// directory and the row; a process killed meanwhile leaves a
    /// `creating` row whose directory the next open removes.
    pub fn publish_repository(
        &self,
        id: RepositoryId,
        name: &str,
        build: impl FnOnce(&Path) -> Result<()>,
        check: impl FnOnce(&Repository) -> Result<()>,
    ) -> Result<()> {
        validate_name(name)?;
        let _gate = self
            .create_gate
            .lock()
            .map_err(|_| MetadataError::Gate("poisoned".into()))?;
        let created_ms = now_ms();
        let rec = CatalogRecord {
            name: name.to_owned(),
            state: RepoState::Creating,
            created_ms,
            main_branch: BranchId([0; 16]),
        };
        {
            let tx = self.catalog_write()?;
            {
                if tx.open_table(CATALOG_REPOS)?.get(id.0)?.is_some() {
                    return Err(MetadataError::refused(
                        ErrorCode::AlreadyExists,
                        format!("repository {id} exists in {}", self.dir.display()),
                    ));
                }
                add_to_catalog(&tx, id, &rec)?;
            }
            tx.commit()?;
        }
        let dir = self.repo_dir(&id);
        let built = (|| -> Result<BranchId> {
            if dir.exists() {
                std::fs::remove_dir_all(&dir).map_err(|e| MetadataError::io(&dir, e))?;
            }
            std::fs::create_dir_all(&dir).map_err(|e| MetadataError::io(&dir, e))?;
            build(&dir)?;
            sync_dir(&dir)?;
            sync_dir(&self.dir.join("repos"))?;
            let objects = (self.objects)(&dir.join("objects"), id)?;
            let repo = Repository::open(&dir, id, name, objects)?;
            check(&repo)?;
            Ok(repo.main_branch())
        })();
        match built {
            Ok(main_branch) => {
                let tx = self.catalog_write()?;
                {
                    let ready = CatalogRecord {
                        state: RepoState::Ready,
                        main_branch,
                        ..rec
                    };
                    tx.open_table(CATALOG_REPOS)?
                        .insert(id.0, ready.encode().as_slice())?;
                }
                tx.commit()?;
                Ok(())
            }
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                let tx = self.catalog_write()?;
                {
                    tx.open_table(CATALOG_REPOS)?.remove(id.0)?;
                    tx.open_table(CATALOG_REPO_NAMES)?.remove(name)?;
                }
                tx.commit()?;
                Err(e)
            }
        }
    }

    /// Every ready repository, by id.
    pub fn list_repositories(&self) -> Result<Vec<RepositoryInfo>> {
        let tx = self.catalog()?.begin_read()?;
        let repos = tx.open_table(CATALOG_REPOS)?;
        let mut out = Vec::new();
        for row in repos.range::<[u8; 16]>(..)? {
            let (k, v) = row?;
            let rec = CatalogRecord::decode(v.value())?;
            if rec.state == RepoState::Ready {
                out.push(RepositoryInfo {
                    id: RepositoryId(k.value()),
                    name: rec.name,
                    created_ms: rec.created_ms,
                    main_branch: rec.main_branch,
                });
            }
        }
        Ok(out)
    }

    /// The id of the repository named `name`.
    pub fn repository_id(&self, name: &str) -> Result<RepositoryId> {
        let tx = self.catalog()?.begin_read()?;
        let names = tx.open_table(CATALOG_REPO_NAMES)?;
        let id = names
            .get(name)?
            .map(|g| RepositoryId(g.value()))
            .ok_or_else(|| {
                MetadataError::refused(ErrorCode::NotFound, format!("no repository {}", echo(name)))
            })?;
        Ok(id)
    }

    /// Open every ready repository now (open-time recovery of its store and
    /// metadata runs before serving). One that cannot be opened is set
    /// aside: it is returned here, and every later
    /// [`open_repository`](Self::open_repository) of it is refused with
    /// its cause ([`SetAside::refusal`]) while the others serve. When
    /// none opens, the first failure is the error (a data root that can
    /// serve nothing is not served).
    pub fn open_every_repository(&self) -> Result<Vec<SetAside>> {
        let repos = self.list_repositories()?;
        let mut first = None;
        let mut aside = Vec::new();
        for info in &repos {
            if let Err(e) = self.open_repository(info.id) {
                aside.push(SetAside {
                    id: info.id,
                    name: info.name.clone(),
                    code: e.code(),
                    cause: e.to_string(),
                });
                first.get_or_insert(e);
            }
        }
        if let Some(e) = first {
            if aside.len() == repos.len() {
                return Err(e);
            }
        }
        let mut map = self
            .set_aside
            .lock()
            .map_err(|_| MetadataError::Gate("poisoned".into()))?;
        for a in &aside {
            map.insert(a.id, a.clone());
        }
        Ok(aside)
    }

    /// The repositories set aside by [`open_every_repository`](Self::open_every_repository).
    pub fn set_aside(&self) -> Vec<SetAside> {
        let map = self.set_aside.lock().unwrap_or_else(|p| p.into_inner());
        let mut v: Vec<SetAside> = map.values().cloned().collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// Open (or return the already open) repository `id`.
    pub fn open_repository(&self, id: RepositoryId) -> Result<Arc<Repository>> {
        if let Some(a) = self
            .set_aside
            .lock()
            .map_err(|_| MetadataError::Gate("poisoned".into()))?
            .get(&id)
        {
            return Err(a.refusal());
        }
        let mut open = self
            .open
            .lock()
            .map_err(|_| MetadataError::Gate("poisoned".into()))?;
        if let Ok(mut idle) = self.idle_since.lock() {
            idle.remove(&id);
        }
        if let Some(r) = open.get(&id) {
            return Ok(r.clone());
        }
        let repo = self.open_new(id)?;
        open.insert(id, repo.clone());
        Ok(repo)
    }

    /// Give back, while serving, the free pages a streamed import left in
    /// `metadata.redb`: each open repository with the compaction hint
    /// (`repo::COMPACT_MARKER`) that calls have found unheld for `quiet`
    /// (nothing but this root holding it, and not handed out since) is
    /// closed and opened again, which prunes
    /// the archived outbox rows and compacts the file (`Repository::open`).
    /// A repository in use is left for a later call. Openings of every
    /// repository wait meanwhile, as at a first opening (about 1.7 s for a
    /// 160 MB file after a 52,000-file import). Returns the ids reopened.
    /// Without it the pages came back only at the server's next start
    /// (issue 19: 100 MB of 160 after the toolchain tree's import).
    pub fn compact_idle_repositories(
        &self,
        quiet: std::time::Duration,
    ) -> Result<Vec<RepositoryId>> {
        let mut open = self
            .open
            .lock()
            .map_err(|_| MetadataError::Gate("poisoned".into()))?;
        let quiet_ids: Vec<RepositoryId> = {
            let mut idle = self
                .idle_since
                .lock()
                .map_err(|_| MetadataError::Gate("poisoned".into()))?;
            let now = std::time::Instant::now();
            let mut ids = Vec::new();
            for (id, r) in open.iter() {
                if Arc::strong_count(r) > 1 || !r.compaction_wanted() {
                    idle.remove(id);
                } else if now.duration_since(*idle.entry(*id).or_insert(now)) >= quiet {
                    ids.push(*id);
                }
            }
            ids
        };
        let mut done = Vec::new();
        for id in quiet_ids {
            let Some(repo) = open.remove(&id) else {
                continue;
            };
            // Under the lock nothing can take a new handle; a database or
            // archive handle held elsewhere would keep redb's file lock.
            let repo = match Arc::try_unwrap(repo) {
                Ok(r) if r.held_only_by_itself() => r,
                Ok(r) => {
                    open.insert(id, Arc::new(r));
                    continue;
                }
                Err(r) => {
                    open.insert(id, r);
                    continue;
                }
            };
            drop(repo);
            if let Ok(mut idle) = self.idle_since.lock() {
                idle.remove(&id);
            }
            let repo = self.open_new(id)?;
            open.insert(id, repo);
            done.push(id);
        }
        Ok(done)
    }

    /// Open repository `id` (not yet open; the caller holds `open`).
    fn open_new(&self, id: RepositoryId) -> Result<Arc<Repository>> {
        let rec = {
            let tx = self.catalog()?.begin_read()?;
            let repos = tx.open_table(CATALOG_REPOS)?;
            let row = repos.get(id.0)?.ok_or_else(|| {
                MetadataError::refused(ErrorCode::NotFound, format!("no repository {id}"))
            })?;
            CatalogRecord::decode(row.value())?
        };
        if rec.state != RepoState::Ready {
            return Err(MetadataError::refused(
                ErrorCode::NotFound,
                format!("repository {id} is being created"),
            ));
        }
        let dir = self.repo_dir(&id);
        let objects = (self.objects)(&dir.join("objects"), id)?;
        Ok(Arc::new(Repository::open(&dir, id, &rec.name, objects)?))
    }

    /// Forget every open repository handle: the next
    /// [`open_repository`](Self::open_repository) opens it again (with
    /// open-time recovery). Handles still held elsewhere stay usable until
    /// dropped; a reopen before that fails with redb's file lock.
    /// `also` runs under the same lock as the opens (which call the objects
    /// factory), so a cache the factory fills is forgotten with them.
    pub fn forget_open_repositories(&self, also: impl FnOnce()) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.clear();
        also();
        *self.catalog.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// The catalog database, opened again if a storage failure made the
    /// service forget it.
    fn catalog(&self) -> Result<Arc<Database>> {
        Ok(self.catalog_parts()?.0)
    }

    fn catalog_parts(&self) -> Result<(Arc<Database>, Arc<Archive>)> {
        let mut c = self.catalog.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(parts) = &*c {
            return Ok(parts.clone());
        }
        let path = self.dir.join("catalog.redb");
        let db = Arc::new(Database::open(&path)?);
        let archive = Arc::new(Archive::open(&path, db.clone())?);
        *c = Some((db.clone(), archive.clone()));
        Ok((db, archive))
    }

    /// The catalog's recovery archive (for offline consolidation).
    pub fn catalog_archive(&self) -> Result<Arc<Archive>> {
        Ok(self.catalog_parts()?.1)
    }

    /// A journaled catalog write, published to `catalog.recovery` on commit.
    fn catalog_write(&self) -> Result<crate::journal::WriteTx> {
        let (db, archive) = self.catalog_parts()?;
        crate::journal::begin_archived(&db, &archive)
    }

    /// Rename the repository `old` to `new` (offline administration:
    /// nothing may hold the repository open). One catalog transaction
    /// rewrites its `repos` row (same id, state, creation time and main
    /// branch; only the name) and moves its `repo_names` row; then the
    /// repository's descriptor records the new name. The catalog is
    /// authoritative: a crash between the two leaves a descriptor with the
    /// old name, which the next opening rewrites ([`DataRoot::healed`]).
    /// `old` is recorded in [`crate::former_names`] first. Refuses an
    /// invalid `new` (`malformed`), a `new` another repository holds or
    /// had before a rename (`already_exists`; the latter allowed with
    /// `reuse_name`, which gives it back) and an unknown `old`
    /// (`not_found`).
    pub fn rename_repository(
        &self,
        old: &str,
        new: &str,
        reuse_name: bool,
    ) -> Result<RepositoryId> {
        validate_name(new)?;
        let _gate = self
            .create_gate
            .lock()
            .map_err(|_| MetadataError::Gate("poisoned".into()))?;
        let id = self.repository_id(old)?;
        if old == new {
            return Err(MetadataError::refused(
                ErrorCode::Usage,
                format!("repository {} is named so already", echo(new)),
            ));
        }
        let former = self.former_holders(new, Some(id))?;
        if !former.is_empty() && !reuse_name {
            return Err(self.former_name_refusal(new, &former, "repo rename"));
        }
        self.forget_one(id)?;
        // The old name is remembered first: a crash before the catalog
        // transaction leaves a record of the repository's own current
        // name, which guards nothing and refuses nothing it may do.
        let mut names = crate::former_names::read(&self.dir)?;
        names.retain(|f| f.name != new && !(f.id == id && f.name == old));
        names.push(crate::former_names::FormerName {
            id,
            renamed_ms: now_ms(),
            name: old.to_owned(),
        });
        crate::former_names::write(&self.dir, &names)?;
        {
            let tx = self.catalog_write()?;
            {
                let mut names = tx.open_table(CATALOG_REPO_NAMES)?;
                if names.get(new)?.is_some() {
                    return Err(MetadataError::refused(
                        ErrorCode::AlreadyExists,
                        format!("repository {} exists", echo(new)),
                    ));
                }
                let mut repos = tx.open_table(CATALOG_REPOS)?;
                let rec = {
                    let row = repos.get(id.0)?.ok_or_else(|| {
                        MetadataError::corrupt(format!(
                            "repo_names names {} as {id}, which has no repos row",
                            echo(old)
                        ))
                    })?;
                    CatalogRecord::decode(row.value())?
                };
                if rec.state != RepoState::Ready {
                    return Err(MetadataError::refused(
                        ErrorCode::NotFound,
                        format!("repository {} is being created", echo(old)),
                    ));
                }
                let renamed = CatalogRecord {
                    name: new.to_owned(),
                    ..rec
                };
                repos.insert(id.0, renamed.encode().as_slice())?;
                names.remove(old)?;
                names.insert(new, id.0)?;
            }
            tx.commit()?;
        }
        let dir = self.repo_dir(&id);
        let mut d = database_descriptor::read(&dir)?;
        d.set("name", new)
            .map_err(|e| MetadataError::corrupt(format!("{}: {e}", dir.display())))?;
        database_descriptor::write(&d, &dir)?;
        Ok(id)
    }

    /// Delete the repository `name` from the catalog, keeping its data:
    /// `repos/<id>/` is moved (one rename, same file system) to
    /// `<data>/deleted/<id hex>-<unix ms>/`, flushed, and only then are its
    /// `repos` and `repo_names` rows removed in one transaction. A crash
    /// between the two leaves a catalog row whose directory is gone (the
    /// repository is set aside when served); running the deletion again
    /// finds the moved directory and removes the rows. Its retirement
    /// ([`crate::retired`]), if any, goes between the move and the rows;
    /// the names it had before renames stay in [`crate::former_names`]
    /// (workspaces made before a rename may still ask for them). Returns
    /// the id and where the data went (`None` when an earlier run had
    /// moved it).
    pub fn delete_repository(&self, name: &str) -> Result<(RepositoryId, Option<PathBuf>)> {
        let _gate = self
            .create_gate
            .lock()
            .map_err(|_| MetadataError::Gate("poisoned".into()))?;
        let id = self.repository_id(name)?;
        self.forget_one(id)?;
        let dir = self.repo_dir(&id);
        let deleted = self.dir.join(DELETED_DIR);
        let moved = if dir.exists() {
            std::fs::create_dir_all(&deleted).map_err(|e| MetadataError::io(&deleted, e))?;
            let to = deleted.join(format!("{}-{}", id.to_hex(), now_ms()));
            std::fs::rename(&dir, &to).map_err(|e| MetadataError::io(&dir, e))?;
            sync_dir(&deleted)?;
            sync_dir(&self.dir.join("repos"))?;
            sync_dir(&self.dir)?;
            Some(to)
        } else {
            let earlier = std::fs::read_dir(&deleted)
                .ok()
                .into_iter()
                .flatten()
                .filter_map(|e| e.ok())
                .any(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with(&format!("{}-", id.to_hex()))
                });
            if !earlier {
                return Err(MetadataError::corrupt(format!(
                    "{} is missing and {} holds no earlier copy of repository {}",
                    dir.display(),
                    deleted.display(),
                    echo(name)
                )));
            }
            None
        };
        // A retirement is the repository's state and goes with it (ids
        // are never reused, so a row left behind would name nothing a
        // server holds, and a restore from the bucket would carry it on).
        // Before the catalog's transaction: killed between the two, the
        // directory has moved already (nothing can write to it), and the
        // run again finishes the deletion.
        let mut retired = crate::retired::read(&self.dir)?;
        if retired.iter().any(|r| r.id == id) {
            retired.retain(|r| r.id != id);
            crate::retired::write(&self.dir, &retired)?;
        }
        let tx = self.catalog_write()?;
        {
            tx.open_table(CATALOG_REPOS)?.remove(id.0)?;
            tx.open_table(CATALOG_REPO_NAMES)?.remove(name)?;
        }
        tx.commit()?;
        Ok((id, moved))
    }

    /// Close this root's handle of repository `id`, refusing when another
    /// holder keeps it open (a rename or deletion needs it to itself).
    fn forget_one(&self, id: RepositoryId) -> Result<()> {
        let mut open = self
            .open
            .lock()
            .map_err(|_| MetadataError::Gate("poisoned".into()))?;
        if let Some(r) = open.remove(&id) {
            if Arc::strong_count(&r) > 1 {
                open.insert(id, r);
                return Err(MetadataError::refused(
                    ErrorCode::Busy,
                    format!("repository {id} is in use"),
                ));
            }
        }
        if let Ok(mut aside) = self.set_aside.lock() {
            aside.remove(&id);
        }
        Ok(())
    }

    /// Open the repository named `name`.
    pub fn open_repository_by_name(&self, name: &str) -> Result<Arc<Repository>> {
        let id = self.repository_id(name)?;
        self.open_repository(id)
    }
}

fn validate_name(name: &str) -> Result<()> {
    if scribe_format::limits::is_repository_name(name) {
        Ok(())
    } else {
        Err(MetadataError::refused(
            ErrorCode::Malformed,
            format!(
                "repository name {} must be 1..=128 bytes without `/`, `\\` or control characters",
                echo(name)
            ),
        ))
    }
}

impl std::fmt::Debug for DataRoot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataRoot")
            .field("dir", &self.dir)
            .field("incarnation", &self.incarnation)
            .finish_non_exhaustive()
    }
}

/// Rebuild a lost `catalog.redb` of the data root at `dir` from its
/// `catalog.recovery` archive alone (holding `LOCK`), through a quarantined
/// file published only when complete and verified.
pub fn recover_catalog(dir: &Path) -> Result<crate::journal::Replayed> {
    let _lock = take_lock(dir)?;
    let path = dir.join("catalog.redb");
    let archive = crate::archive::archive_dir(&path)?;
    crate::archive::recover(&archive, &path)
}

/// Claim the record's name for `id` and store the record, refusing a name
/// another repository holds.
fn add_to_catalog(
    tx: &crate::journal::WriteTx,
    id: RepositoryId,
    rec: &CatalogRecord,
) -> Result<()> {
    let name = rec.name.as_str();
    let mut names = tx.open_table(CATALOG_REPO_NAMES)?;
    if names.get(name)?.is_some() {
        return Err(MetadataError::refused(
            ErrorCode::AlreadyExists,
            format!("repository {} exists", echo(name)),
        ));
    }
    names.insert(name, id.0)?;
    tx.open_table(CATALOG_REPOS)?
        .insert(id.0, rec.encode().as_slice())?;
    Ok(())
}

//! `scribe-server export` / `import`: one repository's metadata as a
//! `.scmx` file (seed 004 section 10; the bytes are `scribe_format::scmx`).
//!
//! Export reads what the server publishes, so it runs while the data root
//! is served: the catalog and the repository's `metadata.redb` are rebuilt
//! from their recovery archives into a temporary directory beside the
//! output, and every journaled table of the repository is streamed, row by
//! row, into `<FILE>.tmp`, flushed and renamed to `FILE`.
//!
//! Import is offline (it takes the data root's `LOCK`). The repository is
//! reserved in the catalog as `creating`; the rows are streamed into the
//! quarantined `repos/<id>/metadata.redb.import` (tables must be ones this
//! schema knows, with its types; every key and value width is checked);
//! the trailing digest is checked; only then is the file renamed into
//! place, given a new incarnation, a new journal identity and a fresh
//! archive, opened as serving opens it and checked by doctor, and the
//! catalog row made `ready`. An export carries metadata only: the
//! repository's objects come from `--objects DIR` (an object store
//! directory, copied and verified), and an import whose doctor finds
//! objects the metadata names missing is refused and publishes nothing.

use scribe_format::echo::echo;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};

use redb::{Database, Durability, ReadableDatabase, TableDefinition};
use scribe_format::recovery::ColumnType;
use scribe_format::scmx::{ScmxError, ScmxReader, ScmxWriter};
use scribe_format::{ErrorCode, RepositoryId};

use crate::backup::{ProgressFn, StepHook};
use crate::database_descriptor::{self, sync_dir};
use crate::error::{MetadataError, Result};
use crate::journal::{self, Column};
use crate::tables::{self, meta};
use crate::DataRoot;

fn ty<K: redb::Key + Column, V: Column>(
    d: TableDefinition<'static, K, V>,
) -> (String, (ColumnType, ColumnType)) {
    use redb::TableHandle;
    (d.name().to_owned(), (K::TYPE, V::TYPE))
}

/// Every table of a schema-3 `metadata.redb` with its key and value types.
pub fn repository_tables() -> Vec<(String, (ColumnType, ColumnType))> {
    use tables::*;
    vec![
        ty(META),
        ty(BRANCHES),
        ty(COMMITS),
        ty(SNAPSHOT_NODES),
        ty(SNAPSHOT_ROOTS),
        ty(HISTORY),
        ty(MOVES),
        ty(FILE_LINEAGE),
        ty(CHANGE_PATHS),
        ty(WORKSPACES),
        ty(LOCKS),
        ty(OPERATIONS),
        ty(CHANGE_NOTES),
        ty(BRANCH_HEADS),
        ty(MERGE_PARENTS),
        ty(BRANCH_OPERATIONS),
        ty(BRANCH_PENDING),
        ty(ACCEPTED_MANIFESTS),
        ty(WORKSPACE_STATE),
        ty(SUBMIT_STAGE),
        ty(SUBMIT_LOCK_UPDATES),
        ty(UPLOAD_PINS),
    ]
}

/// A scratch directory removed when dropped.
struct WorkDir(PathBuf);

impl WorkDir {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scmx_err(path: &Path, e: ScmxError) -> MetadataError {
    MetadataError::refused(e.code(), format!("{}: {e}", path.display()))
}

/// What an export wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportReport {
    pub repository: RepositoryId,
    pub tables: u32,
    pub rows: u64,
    pub bytes: u64,
    pub digest: [u8; 32],
}

/// Export repository `name` of the data root `data` (served or not) to
/// `to` (which must not exist).
pub fn export(
    data: &Path,
    name: &str,
    to: &Path,
    progress: ProgressFn<'_>,
) -> Result<ExportReport> {
    if to.exists() {
        return Err(MetadataError::refused(
            ErrorCode::AlreadyExists,
            format!("{} exists", to.display()),
        ));
    }
    let parent = to
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut w = to.as_os_str().to_owned();
    w.push(".work");
    let work = WorkDir(PathBuf::from(w));
    if work.path().exists() {
        std::fs::remove_dir_all(work.path()).map_err(|e| MetadataError::io(work.path(), e))?;
    }
    std::fs::create_dir_all(work.path()).map_err(|e| MetadataError::io(work.path(), e))?;
    let catalog = work.path().join("catalog.redb");
    crate::archive::recover(
        &crate::archive::archive_dir(&data.join("catalog.redb"))?,
        &catalog,
    )?;
    let id = {
        let db = Database::open(&catalog)?;
        let tx = db.begin_read()?;
        let names = tx.open_table(tables::CATALOG_REPO_NAMES)?;
        let id = redb::ReadableTable::get(&names, name)?
            .map(|g| RepositoryId(g.value()))
            .ok_or_else(|| {
                MetadataError::refused(ErrorCode::NotFound, format!("no repository {}", echo(name)))
            })?;
        id
    };
    let db_path = work.path().join("metadata.redb");
    let src = data
        .join("repos")
        .join(id.to_hex())
        .join(crate::repo::METADATA_FILE);
    crate::archive::recover(&crate::archive::archive_dir(&src)?, &db_path)?;
    let db = Database::open(&db_path)?;
    let tx = db.begin_read()?;
    let types = journal::recorded_types(&tx)?;
    let mut counts = Vec::new();
    let mut total = 0u64;
    for (t, kv) in &types {
        let n = journal::row_count(&tx, t, *kv)?;
        total += n;
        counts.push((t.clone(), *kv, n));
    }
    let mut tmp = to.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let f = std::fs::File::create(&tmp).map_err(|e| MetadataError::io(&tmp, e))?;
    let result = (|| -> Result<ExportReport> {
        let mut w = ScmxWriter::new(
            BufWriter::with_capacity(1 << 20, f),
            id.0,
            counts.len() as u32,
        )
        .map_err(|e| scmx_err(&tmp, e))?;
        let mut rows = 0u64;
        for (t, kv, n) in &counts {
            w.table(t, *n).map_err(|e| scmx_err(&tmp, e))?;
            journal::for_each_row(&tx, t, *kv, |k, v| {
                w.row(k, v).map_err(|e| scmx_err(&tmp, e))?;
                rows += 1;
                if rows.is_multiple_of(4096) {
                    progress(rows, total);
                }
                Ok(())
            })?;
        }
        progress(rows, total);
        let (bw, digest, bytes) = w.finish().map_err(|e| scmx_err(&tmp, e))?;
        let f = bw
            .into_inner()
            .map_err(|e| MetadataError::io(&tmp, e.into_error()))?;
        f.sync_all().map_err(|e| MetadataError::io(&tmp, e))?;
        Ok(ExportReport {
            repository: id,
            tables: counts.len() as u32,
            rows,
            bytes,
            digest,
        })
    })();
    match result {
        Ok(r) => {
            std::fs::rename(&tmp, to).map_err(|e| MetadataError::io(to, e))?;
            sync_dir(parent)?;
            Ok(r)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// What an import published.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportReport {
    pub repository: RepositoryId,
    pub name: String,
    pub incarnation: [u8; 16],
    pub tables: u32,
    pub rows: u64,
    pub objects_copied: u64,
}

/// Import `file` into the open (owned) data root `root` as a new
/// repository named `name` (default: the repository id in hex), its
/// objects copied from the object store directory `objects` when given.
/// See the module documentation.
pub fn import(
    root: &DataRoot,
    file: &Path,
    name: Option<&str>,
    objects: Option<&Path>,
    progress: ProgressFn<'_>,
    step: StepHook<'_>,
) -> Result<ImportReport> {
    let f = std::fs::File::open(file).map_err(|e| MetadataError::io(file, e))?;
    let total = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut reader =
        ScmxReader::new(BufReader::with_capacity(1 << 20, f)).map_err(|e| scmx_err(file, e))?;
    let id = RepositoryId(reader.repository());
    let name = name.map(str::to_owned).unwrap_or_else(|| id.to_hex());
    let known: std::collections::BTreeMap<String, (ColumnType, ColumnType)> =
        repository_tables().into_iter().collect();
    let mut report = ImportReport {
        repository: id,
        name: name.clone(),
        incarnation: RepositoryId::random().0,
        tables: 0,
        rows: 0,
        objects_copied: 0,
    };
    root.publish_repository(
        id,
        &name,
        |dir| {
            // Objects first: the metadata is checked against them below.
            let store = dir.join("objects");
            match objects {
                Some(src) => {
                    report.objects_copied = copy_store(src, &store)?;
                }
                None => crate::root::create_object_store(&store)?,
            }
            let quarantine = dir.join("metadata.redb.import");
            let db = Database::create(&quarantine)?;
            journal::initialize(&db)?;
            let mut seen = std::collections::BTreeSet::new();
            let (mut k, mut v) = (Vec::new(), Vec::new());
            let mut tx = db.begin_write()?;
            tx.set_durability(Durability::None)?;
            let mut batch = 0usize;
            while let Some(t) = reader.next_table().map_err(|e| scmx_err(file, e))? {
                let kv = *known.get(t.name.as_str()).ok_or_else(|| {
                    MetadataError::refused(
                        ErrorCode::Malformed,
                        format!(
                            "{}: at byte {}: table {:?} is not a table of repository schema 3",
                            file.display(),
                            t.offset,
                            t.name
                        ),
                    )
                })?;
                if !seen.insert(t.name.clone()) {
                    return Err(MetadataError::refused(
                        ErrorCode::Malformed,
                        format!("{}: at byte {}: table {:?} appears twice", file.display(), t.offset, t.name),
                    ));
                }
                journal::create_raw(&tx, &t.name, kv)?;
                tx.open_table(journal::TYPES)?
                    .insert(t.name.as_str(), [kv.0.byte(), kv.1.byte()].as_slice())?;
                loop {
                    let at = reader.offset();
                    if !reader.next_row(&mut k, &mut v).map_err(|e| scmx_err(file, e))? {
                        break;
                    }
                    journal::put_raw(&tx, &t.name, kv, &k, &v).map_err(|e| {
                        MetadataError::refused(
                            ErrorCode::Malformed,
                            format!("{}: at byte {at}: {e}", file.display()),
                        )
                    })?;
                    report.rows += 1;
                    batch += k.len() + v.len() + 16;
                    if batch >= journal::REPLAY_BATCH_BYTES {
                        tx.commit()?;
                        tx = db.begin_write()?;
                        tx.set_durability(Durability::None)?;
                        batch = 0;
                        progress(reader.offset(), total);
                        step("rows");
                    }
                }
                report.tables += 1;
            }
            // Nothing above is trusted until the digest matches.
            reader.finish().map_err(|e| scmx_err(file, e))?;
            progress(total, total);
            for (t, kv) in &known {
                if !seen.contains(t) {
                    journal::create_raw(&tx, t, *kv)?;
                    tx.open_table(journal::TYPES)?
                        .insert(t.as_str(), [kv.0.byte(), kv.1.byte()].as_slice())?;
                }
            }
            {
                let mut m = tx.open_table(tables::META)?;
                let recorded = redb::ReadableTable::get(&m, meta::REPOSITORY_ID)?
                    .map(|g| g.value().to_vec());
                if recorded.as_deref() != Some(id.0.as_slice()) {
                    return Err(MetadataError::refused(
                        ErrorCode::Malformed,
                        format!(
                            "{}: its meta table does not name repository {id} of its header",
                            file.display()
                        ),
                    ));
                }
                m.insert(meta::INCARNATION, report.incarnation.as_slice())?;
            }
            tx.set_durability(Durability::Immediate)?;
            tx.commit()?;
            drop(db);
            step("verified");
            let target = dir.join(crate::repo::METADATA_FILE);
            std::fs::File::open(&quarantine)
                .and_then(|f| f.sync_all())
                .map_err(|e| MetadataError::io(&quarantine, e))?;
            std::fs::rename(&quarantine, &target).map_err(|e| MetadataError::io(&target, e))?;
            crate::archive::start_fresh(&target)?;
            let fields = scribe_format::descriptor::Repository {
                repository_id: id,
                name: name.clone(),
                schema: tables::REPOSITORY_SCHEMA,
                engine: "redb-4".into(),
                object_store: 1,
                created_ms: crate::clock::now_ms(),
                migrated: None,
            };
            let mut d = scribe_format::descriptor::Descriptor::new_repository(&fields)?;
            database_descriptor::add_required_features(&mut d)?;
            database_descriptor::write(&d, dir)?;
            Ok(())
        },
        |repo| {
            let d = repo.doctor()?;
            if d.problems.is_empty() {
                return Ok(());
            }
            let shown: Vec<String> = d
                .problems
                .iter()
                .take(5)
                .map(|p| format!("{}: {}", p.name, p.detail))
                .collect();
            Err(MetadataError::refused(
                ErrorCode::MissingObjects,
                format!(
                    "{}: the imported metadata does not check out against its object store ({} problem(s), first: {}); an export carries metadata only: give the repository's object store with --objects; nothing was published",
                    file.display(),
                    d.problems.len(),
                    shown.join("; ")
                ),
            ))
        },
    )?;
    Ok(report)
}

/// Copy an object store's descriptor, packs and loose objects (verified
/// stream copies) into the new store `to`, then build its locator.
fn copy_store(from: &Path, to: &Path) -> Result<u64> {
    if !from.join("SCRIBE_FORMAT").is_file() {
        return Err(MetadataError::refused(
            ErrorCode::NotFound,
            format!(
                "{} is not an object store (no SCRIBE_FORMAT)",
                from.display()
            ),
        ));
    }
    let mut n = 0;
    let mut files = Vec::new();
    crate::backup::object_files_of(from, &mut files)?;
    for (src, len) in files {
        let dst = to.join(src.strip_prefix(from).unwrap_or(&src));
        if let Some(p) = dst.parent() {
            std::fs::create_dir_all(p).map_err(|e| MetadataError::io(p, e))?;
        }
        crate::backup::copy_verified(&src, &dst, Some(len))?;
        n += 1;
    }
    for sub in ["packs", "loose"] {
        let d = to.join(sub);
        std::fs::create_dir_all(&d).map_err(|e| MetadataError::io(&d, e))?;
    }
    scribe_objects::rebuild_locator(to)
        .map_err(|e| MetadataError::Objects(format!("{}: {e}", to.display())))?;
    Ok(n)
}

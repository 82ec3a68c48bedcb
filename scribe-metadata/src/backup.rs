//! `scribe-server backup` and the restore of a backup directory (seed 004
//! section 10, `BACKUP_MANIFEST`).
//!
//! A backup is consistent while the data root is served because it never
//! reads a database another process has open: every `catalog.redb` and
//! `metadata.redb` is rebuilt from its independent recovery archive (read
//! up to the `HEAD` cursor read once, the same replay as `recover
//! --from-archive`), which holds every acknowledged change. The catalog is
//! rebuilt first and names the repositories to back up; each repository's
//! metadata next; its objects last (objects are immutable and published
//! before the metadata that names them, so every object the metadata names
//! is there). Object files are stream-copied (never hard-linked) while
//! hashed, flushed, and read back to verify; an open pack is copied up to
//! the length it had when the copy began (the locator is not copied: it is
//! an index, rebuilt by restore). `BACKUP_MANIFEST` is written last,
//! through a flushed temporary renamed into place, so a backup without it
//! is incomplete and restore refuses it (`backup_incomplete`).
//!
//! Restore verifies every listed file's size and BLAKE3 digest while
//! copying it into a staging directory beside the target, gives the data
//! root and every repository a new incarnation, gives every database a new
//! journal identity and a fresh archive (nothing chains onto the source's
//! archive), rebuilds each object locator, writes the data-root descriptor
//! last, and publishes the staging directory by one rename.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

use redb::{Database, ReadableDatabase};
use scribe_format::descriptor::{DataRoot, Descriptor, Restored};
use scribe_format::{ErrorCode, RepositoryId};

use crate::clock::now_ms;
use crate::database_descriptor::{self, sync_dir};
use crate::error::{MetadataError, Result};
use crate::records::{CatalogRecord, CommitRecord, RepoMeta, RepoState};
use crate::tables::{meta, CATALOG_REPOS, COMMITS, META};

/// The manifest's file name inside a backup directory.
pub const MANIFEST: &str = "BACKUP_MANIFEST";
/// The manifest's first line.
pub const MANIFEST_HEADER: &str = "scribe-backup-manifest = 1";
const CATALOG: &str = "catalog.redb";
const AUTH_STATE: &str = crate::auth_state::AUTH_STATE_FILE;
const BUF: usize = 1 << 20;

/// A step a backup, restore or import reached (fault-injection tests stop
/// the process there: `SCRIBE_SERVER_PAUSE_AT` in the binary).
pub type StepHook<'a> = &'a (dyn Fn(&str) + Sync);

/// Progress of a long command: bytes done of a total (0 when unknown).
pub type ProgressFn<'a> = &'a (dyn Fn(u64, u64) + Sync);

/// One repository line of a manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestRepository {
    pub id: RepositoryId,
    pub name: String,
    pub head: u64,
    pub commit: [u8; 32],
}

/// One file line of a manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestFile {
    pub digest: [u8; 32],
    pub size: u64,
    /// Relative, `/`-separated.
    pub path: String,
}

/// `BACKUP_MANIFEST`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    pub created_ms: u64,
    pub source_incarnation: String,
    pub repositories: Vec<ManifestRepository>,
    pub files: Vec<ManifestFile>,
}

impl Manifest {
    /// The text: the header line, `created-ms`, `source-incarnation`, one
    /// `repository-<id>` line per repository, one `file` line per file.
    pub fn encode(&self) -> String {
        let mut s = format!("{MANIFEST_HEADER}\n");
        s.push_str(&format!("created-ms = {}\n", self.created_ms));
        s.push_str(&format!(
            "source-incarnation = {}\n",
            self.source_incarnation
        ));
        for r in &self.repositories {
            s.push_str(&format!(
                "repository-{} = {} head={} commit={}\n",
                r.id.to_hex(),
                r.name,
                r.head,
                hex::encode(r.commit)
            ));
        }
        for f in &self.files {
            s.push_str(&format!(
                "file = {} {} {}\n",
                hex::encode(f.digest),
                f.size,
                f.path
            ));
        }
        s
    }

    /// Parse a manifest; refusals name the line.
    pub fn parse(text: &str, path: &Path) -> Result<Manifest> {
        let bad = |line: usize, why: &str| {
            MetadataError::refused(
                ErrorCode::Corrupt,
                format!("{}: line {line}: {why}", path.display()),
            )
        };
        let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
        match lines.next() {
            Some((_, l)) if l.trim_end_matches('\r') == MANIFEST_HEADER => {}
            _ => {
                return Err(bad(
                    1,
                    &format!("the first line is not `{MANIFEST_HEADER}`"),
                ))
            }
        }
        let mut m = Manifest::default();
        let (mut created, mut source) = (false, false);
        for (n, line) in lines {
            let line = line.trim_end_matches('\r');
            if line.is_empty() {
                continue;
            }
            let (key, value) = line
                .split_once(" = ")
                .ok_or_else(|| bad(n, "not a `key = value` line"))?;
            match key {
                "created-ms" => {
                    m.created_ms = value.parse().map_err(|_| bad(n, "created-ms"))?;
                    created = true;
                }
                "source-incarnation" => {
                    m.source_incarnation = value.to_owned();
                    source = true;
                }
                "file" => {
                    let mut it = value.splitn(3, ' ');
                    let (Some(d), Some(s), Some(p)) = (it.next(), it.next(), it.next()) else {
                        return Err(bad(n, "a file line is `<blake3 hex> <size> <path>`"));
                    };
                    let digest: [u8; 32] = hex::decode(d)
                        .ok()
                        .and_then(|b| b.try_into().ok())
                        .ok_or_else(|| bad(n, "the digest is not 64 hex digits"))?;
                    let size = s.parse().map_err(|_| bad(n, "the size is not a number"))?;
                    safe_relative(p).map_err(|why| bad(n, &why))?;
                    m.files.push(ManifestFile {
                        digest,
                        size,
                        path: p.to_owned(),
                    });
                }
                k if k.starts_with("repository-") => {
                    let id = RepositoryId::from_hex(&k["repository-".len()..])
                        .map_err(|_| bad(n, "the repository id is not 32 hex digits"))?;
                    let (rest, commit) = value
                        .rsplit_once(" commit=")
                        .ok_or_else(|| bad(n, "commit= is missing"))?;
                    let (name, head) = rest
                        .rsplit_once(" head=")
                        .ok_or_else(|| bad(n, "head= is missing"))?;
                    let commit: [u8; 32] = hex::decode(commit)
                        .ok()
                        .and_then(|b| b.try_into().ok())
                        .ok_or_else(|| bad(n, "commit is not 64 hex digits"))?;
                    m.repositories.push(ManifestRepository {
                        id,
                        name: name.to_owned(),
                        head: head.parse().map_err(|_| bad(n, "head is not a number"))?,
                        commit,
                    });
                }
                // Unknown keys are kept by later versions; this one ignores them.
                _ => {}
            }
        }
        if !created || !source {
            return Err(bad(0, "created-ms or source-incarnation is missing"));
        }
        Ok(m)
    }
}

/// A relative path of normal components only (no `..`, no root).
fn safe_relative(p: &str) -> std::result::Result<(), String> {
    let path = Path::new(p);
    if p.is_empty()
        || p.contains('\\')
        || !path.components().all(|c| matches!(c, Component::Normal(_)))
    {
        return Err(format!("{p:?} is not a relative path inside the backup"));
    }
    Ok(())
}

/// Stream `src` (its first `limit` bytes when given) into the new file
/// `dst`, hashing as it goes; flush `dst`, read it back and compare.
/// Returns the digest and the size.
pub(crate) fn copy_verified(src: &Path, dst: &Path, limit: Option<u64>) -> Result<([u8; 32], u64)> {
    let mut input = File::open(src).map_err(|e| MetadataError::io(src, e))?;
    let mut out = File::create(dst).map_err(|e| MetadataError::io(dst, e))?;
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; BUF];
    let mut size = 0u64;
    loop {
        let want = match limit {
            Some(l) => ((l - size) as usize).min(BUF),
            None => BUF,
        };
        if want == 0 {
            break;
        }
        let n = input
            .read(&mut buf[..want])
            .map_err(|e| MetadataError::io(src, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n])
            .map_err(|e| MetadataError::io(dst, e))?;
        size += n as u64;
    }
    if let Some(l) = limit {
        if size != l {
            return Err(MetadataError::corrupt(format!(
                "{}: ends at byte {size}, {l} were expected",
                src.display()
            )));
        }
    }
    out.sync_all().map_err(|e| MetadataError::io(dst, e))?;
    drop(out);
    let digest = *hasher.finalize().as_bytes();
    let (again, len) = hash_file(dst)?;
    if again != digest || len != size {
        return Err(MetadataError::corrupt(format!(
            "{}: the copy does not read back as written",
            dst.display()
        )));
    }
    Ok((digest, size))
}

/// BLAKE3 and length of a file, streamed.
pub(crate) fn hash_file(path: &Path) -> Result<([u8; 32], u64)> {
    let mut f = File::open(path).map_err(|e| MetadataError::io(path, e))?;
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; BUF];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf).map_err(|e| MetadataError::io(path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    Ok((*hasher.finalize().as_bytes(), size))
}

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root)
        .unwrap_or(p)
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

fn mkdir(p: &Path) -> Result<()> {
    std::fs::create_dir_all(p).map_err(|e| MetadataError::io(p, e))
}

/// The data root's `auth` directory (a team server's TLS key) in a backup
/// or a restore: created, and made 0700 (Unix) as `auth-init` makes it.
fn private_dir(p: &Path) -> Result<()> {
    mkdir(p)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| MetadataError::io(p, e))?;
    }
    Ok(())
}

/// Give `dst` the permission bits of `src` (a private key stays 0600).
fn keep_mode(src: &Path, dst: &Path) -> Result<()> {
    let perms = std::fs::metadata(src)
        .map_err(|e| MetadataError::io(src, e))?
        .permissions();
    std::fs::set_permissions(dst, perms).map_err(|e| MetadataError::io(dst, e))
}

/// Require `dir` absent or empty; create it.
fn fresh_dir(dir: &Path) -> Result<()> {
    if let Ok(mut it) = std::fs::read_dir(dir) {
        if it.next().is_some() {
            return Err(MetadataError::refused(
                ErrorCode::AlreadyExists,
                format!("{} is not empty", dir.display()),
            ));
        }
    }
    mkdir(dir)
}

/// What a backup did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackupReport {
    pub manifest: Manifest,
    pub bytes: u64,
    /// The data root was served (its `LOCK` held by another process).
    pub online: bool,
    /// Objects the fill wrote into the copied stores ([`backup_filled`]).
    pub filled: u64,
}

struct Writer<'a> {
    to: &'a Path,
    files: Vec<ManifestFile>,
    bytes: u64,
    total: u64,
    progress: ProgressFn<'a>,
    step: StepHook<'a>,
}

impl Writer<'_> {
    fn record(&mut self, path: &Path, digest: [u8; 32], size: u64) {
        self.files.push(ManifestFile {
            digest,
            size,
            path: rel(self.to, path),
        });
        self.bytes += size;
        (self.progress)(self.bytes, self.total);
        (self.step)("file");
    }

    fn copy(&mut self, src: &Path, dst: &Path, limit: Option<u64>) -> Result<()> {
        if let Some(parent) = dst.parent() {
            mkdir(parent)?;
        }
        let (digest, size) = copy_verified(src, dst, limit)?;
        self.record(dst, digest, size);
        Ok(())
    }

    /// A file this backup produced itself (a rebuilt database).
    fn produced(&mut self, path: &Path) -> Result<()> {
        let (digest, size) = hash_file(path)?;
        self.record(path, digest, size);
        Ok(())
    }
}

/// The regular files under `dir`, recursively, sorted.
fn files_under(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(MetadataError::io(dir, e)),
    };
    let mut entries: Vec<_> = rd
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()
        .map_err(|e| MetadataError::io(dir, e))?;
    entries.sort();
    for p in entries {
        let ty = std::fs::symlink_metadata(&p)
            .map_err(|e| MetadataError::io(&p, e))?
            .file_type();
        if ty.is_dir() {
            files_under(&p, out)?;
        } else if ty.is_file() {
            out.push(p);
        }
    }
    Ok(())
}

/// The object files of a store worth copying: its descriptor, packs and
/// loose objects (not the locator, an index restore rebuilds, nor
/// `staging/` temporaries), with their lengths now.
fn object_files(store: &Path) -> Result<Vec<(PathBuf, u64)>> {
    let mut files = Vec::new();
    let desc = store.join("SCRIBE_FORMAT");
    if desc.is_file() {
        files.push(desc);
    }
    files_under(&store.join("packs"), &mut files)?;
    files_under(&store.join("loose"), &mut files)?;
    files
        .into_iter()
        .filter(|p| {
            // Temporaries of an in-flight publication are not objects.
            !p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(".tmp"))
        })
        .map(|p| {
            let len = std::fs::metadata(&p)
                .map_err(|e| MetadataError::io(&p, e))?
                .len();
            Ok((p, len))
        })
        .collect()
}

/// [`object_files`] for other modules.
pub(crate) fn object_files_of(store: &Path, out: &mut Vec<(PathBuf, u64)>) -> Result<()> {
    out.extend(object_files(store)?);
    Ok(())
}

/// The ready repositories of a catalog database file.
fn ready_repositories(catalog: &Path) -> Result<Vec<(RepositoryId, String)>> {
    let db = Database::open(catalog)?;
    let tx = db.begin_read()?;
    let repos = tx.open_table(CATALOG_REPOS)?;
    let mut out = Vec::new();
    for row in repos.range::<[u8; 16]>(..)? {
        let (k, v) = row?;
        let rec = CatalogRecord::decode(v.value())?;
        if rec.state == RepoState::Ready {
            out.push((RepositoryId(k.value()), rec.name));
        }
    }
    Ok(out)
}

/// Head change and its commit id of a repository database file.
fn head_of(db_path: &Path) -> Result<(u64, [u8; 32])> {
    let db = Database::open(db_path)?;
    let tx = db.begin_read()?;
    let m = tx.open_table(META)?;
    let head = m
        .get(meta::REPO_META)?
        .map(|g| RepoMeta::decode(g.value()))
        .transpose()?
        .map(|r| r.head)
        .unwrap_or(0);
    let commit = if head == 0 {
        [0; 32]
    } else {
        let c = tx.open_table(COMMITS)?;
        let row = c.get(head)?.ok_or_else(|| {
            MetadataError::corrupt(format!(
                "{}: no commit row for head {head}",
                db_path.display()
            ))
        })?;
        CommitRecord::decode(row.value())?.commit_id.0
    };
    Ok((head, commit))
}

/// Copy a redb file another process may be writing: copy, open the copy
/// (redb repairs an image of an unclosed file to its last commit) and
/// check its integrity; up to five attempts.
fn copy_live_redb(src: &Path, dst: &Path) -> Result<()> {
    let mut last = String::new();
    for _ in 0..5 {
        let _ = std::fs::remove_file(dst);
        copy_verified(src, dst, None)?;
        match Database::open(dst) {
            Ok(mut db) => match db.check_integrity() {
                Ok(true) => return Ok(()),
                Ok(false) => last = "repaired, retrying".into(),
                Err(e) => last = e.to_string(),
            },
            Err(e) => last = e.to_string(),
        }
    }
    Err(MetadataError::corrupt(format!(
        "{}: no consistent copy in five attempts: {last}",
        src.display()
    )))
}

/// Objects a backup writes into its copy of a repository's store that the
/// data root's own store does not hold (a tiered root's chunks given back
/// to the bucket): called with the repository's id, its store in the data
/// root and the backup's copy, once the copy is made; returns how many
/// objects it wrote there. The copy's files are then listed and hashed
/// again for the manifest.
pub type FillFn<'a> = &'a dyn Fn(RepositoryId, &Path, &Path) -> Result<u64>;

/// Back up the data root `data` into `to` (absent or empty), served or
/// not. See the module documentation.
pub fn backup(
    data: &Path,
    to: &Path,
    progress: ProgressFn<'_>,
    step: StepHook<'_>,
) -> Result<BackupReport> {
    backup_filled(data, to, progress, step, None)
}

/// [`backup`], with `fill` completing each repository's copied store.
pub fn backup_filled(
    data: &Path,
    to: &Path,
    progress: ProgressFn<'_>,
    step: StepHook<'_>,
    fill: Option<FillFn<'_>>,
) -> Result<BackupReport> {
    // Offline: hold the LOCK so nothing starts meanwhile. Served: the
    // server holds it; everything below reads only what it publishes.
    let lock = match crate::root::take_lock(data) {
        Ok(l) => Some(l),
        Err(MetadataError::DataRootLocked { .. }) => None,
        Err(e) => return Err(e),
    };
    let online = lock.is_none();
    let desc = database_descriptor::read(data)?;
    let fields = desc
        .data_root()
        .map_err(|e| MetadataError::corrupt(format!("{}: {e}", data.display())))?;
    fresh_dir(to)?;
    // Objects are the bulk: their size now is the progress total.
    let mut w = Writer {
        to,
        files: Vec::new(),
        bytes: 0,
        total: 0,
        progress,
        step,
    };
    w.copy(
        &data.join(database_descriptor::FILE),
        &to.join(database_descriptor::FILE),
        None,
    )?;
    // 1. The catalog, from its archive.
    let catalog = to.join(CATALOG);
    crate::archive::recover(&crate::archive::archive_dir(&data.join(CATALOG))?, &catalog)?;
    // Hashed after every open: redb rewrites its header when it opens.
    let repos = ready_repositories(&catalog)?;
    w.produced(&catalog)?;
    let mut stores = Vec::new();
    for (id, _) in &repos {
        let store = data.join("repos").join(id.to_hex()).join("objects");
        w.total += object_files(&store)?.iter().map(|(_, l)| l).sum::<u64>();
    }
    // 2. Each repository's metadata, from its archive.
    let mut repositories = Vec::new();
    for (id, name) in &repos {
        let src = data.join("repos").join(id.to_hex());
        let dst = to.join("repos").join(id.to_hex());
        mkdir(&dst)?;
        w.copy(
            &src.join(database_descriptor::FILE),
            &dst.join(database_descriptor::FILE),
            None,
        )?;
        let db = dst.join(crate::repo::METADATA_FILE);
        let archive = crate::archive::archive_dir(&src.join(crate::repo::METADATA_FILE))?;
        crate::archive::recover(&archive, &db)?;
        let (head, commit) = head_of(&db)?;
        w.produced(&db)?;
        repositories.push(ManifestRepository {
            id: *id,
            name: name.clone(),
            head,
            commit,
        });
        stores.push((*id, src.join("objects"), dst.join("objects")));
    }
    (step)("metadata");
    // 3. Objects: every file the metadata can name was published before it.
    let mut filled = 0;
    for (id, src, dst) in &stores {
        for (file, len) in object_files(src)? {
            let target = dst.join(file.strip_prefix(src).unwrap_or(&file));
            w.copy(&file, &target, Some(len))?;
        }
        let Some(fill) = fill else { continue };
        let n = fill(*id, src, dst)?;
        if n > 0 {
            // The copy changed (new packs or loose objects, the open pack
            // grown): its files are listed and hashed as they are now.
            let prefix = format!("{}/", rel(to, dst));
            w.files.retain(|f| !f.path.starts_with(&prefix));
            for (file, _) in object_files(dst)? {
                w.produced(&file)?;
            }
            filled += n;
        }
    }
    // The server's own notes on its repositories (outside the specified
    // catalog): the names renamed repositories had, and the retired ones.
    // Changed only offline, so never mid-write while a server runs.
    for f in [crate::former_names::FILE, crate::retired::FILE] {
        let p = data.join(f);
        if p.is_file() {
            w.copy(&p, &to.join(f), None)?;
        }
    }
    // 4. The auth binding, when there is one.
    // It holds the server's TLS private key: the copy is made as private as
    // `auth-init` made the original (the directory 0700, each file with its
    // own mode), never with the umask's 0755/0644.
    let mut auth_files = Vec::new();
    files_under(&data.join("auth"), &mut auth_files)?;
    if !auth_files.is_empty() {
        private_dir(&to.join("auth"))?;
    }
    for f in auth_files {
        let target = to.join(f.strip_prefix(data).unwrap_or(&f));
        w.copy(&f, &target, None)?;
        keep_mode(&f, &target)?;
    }
    // The storage ownership database, from its archive like the others
    // (never the file a server holds); a file without an archive (made
    // before it had one) is copied as before.
    let auth_state = data.join(AUTH_STATE);
    let target = to.join(AUTH_STATE);
    if crate::auth_state::has_archive(data) {
        crate::archive::recover(&crate::archive::archive_dir(&auth_state)?, &target)?;
        w.produced(&target)?;
    } else if auth_state.is_file() {
        if online {
            copy_live_redb(&auth_state, &target)?;
            w.produced(&target)?;
        } else {
            w.copy(&auth_state, &target, None)?;
        }
    }
    // Every directory entry is durable before the manifest names it.
    let mut dirs = vec![to.to_owned()];
    let mut i = 0;
    while i < dirs.len() {
        let d = dirs[i].clone();
        for e in std::fs::read_dir(&d).map_err(|e| MetadataError::io(&d, e))? {
            let e = e.map_err(|e| MetadataError::io(&d, e))?;
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                dirs.push(e.path());
            }
        }
        i += 1;
    }
    for d in dirs.iter().rev() {
        sync_dir(d)?;
    }
    (step)("manifest");
    let manifest = Manifest {
        created_ms: now_ms(),
        source_incarnation: hex::encode(fields.incarnation),
        repositories,
        files: w.files,
    };
    write_atomically(&to.join(MANIFEST), manifest.encode().as_bytes())?;
    drop(lock);
    Ok(BackupReport {
        manifest,
        bytes: w.bytes,
        online,
        filled,
    })
}

/// Write `path` through a flushed `<path>.tmp` renamed into place, then
/// flush the directory.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut f = File::create(&tmp).map_err(|e| MetadataError::io(&tmp, e))?;
    f.write_all(bytes).map_err(|e| MetadataError::io(&tmp, e))?;
    f.sync_all().map_err(|e| MetadataError::io(&tmp, e))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(|e| MetadataError::io(path, e))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        sync_dir(dir)?;
    }
    Ok(())
}

/// What a restore did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestoreReport {
    pub from_incarnation: [u8; 16],
    pub incarnation: [u8; 16],
    /// Each repository directory (as published) with its new incarnation.
    pub repositories: Vec<(PathBuf, [u8; 16])>,
    pub files: u64,
    pub bytes: u64,
}

/// Read and parse `from/BACKUP_MANIFEST`; its absence is
/// `backup_incomplete`.
pub fn read_manifest(from: &Path) -> Result<Manifest> {
    let path = from.join(MANIFEST);
    let text = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(MetadataError::refused(
                ErrorCode::BackupIncomplete,
                format!(
                "{} is missing: {} is an interrupted backup or not a backup; nothing was restored",
                path.display(),
                from.display()
            ),
            ))
        }
        Err(e) => return Err(MetadataError::io(&path, e)),
    };
    let text = String::from_utf8(text).map_err(|_| {
        MetadataError::refused(ErrorCode::Corrupt, format!("{}: not UTF-8", path.display()))
    })?;
    Manifest::parse(&text, &path)
}

/// The staging directory of a restore into `to`: `.<name>.restoring`
/// beside it (same file system, so publication is one rename).
pub fn staging_dir(to: &Path) -> PathBuf {
    let name = to
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "data".into());
    to.with_file_name(format!(".{name}.restoring"))
}

/// Copy `src` to `dst` checking it against its manifest line: a size that
/// differs names the byte offset where the file ends (or where it goes
/// beyond the listed size); a digest that differs names the file.
fn restore_file(src: &Path, dst: &Path, want: &ManifestFile) -> Result<()> {
    let len = std::fs::metadata(src)
        .map_err(|e| MetadataError::io(src, e))?
        .len();
    let bad = |why: String| {
        MetadataError::refused(
            ErrorCode::Corrupt,
            format!("{}: {why}; nothing was restored", src.display()),
        )
    };
    if len != want.size {
        return Err(bad(format!(
            "{} bytes where BACKUP_MANIFEST lists {}: the file {} at byte {}",
            len,
            want.size,
            if len < want.size { "ends" } else { "goes on" },
            len.min(want.size)
        )));
    }
    let (digest, size) = copy_verified(src, dst, Some(want.size))?;
    if size != want.size || digest != want.digest {
        return Err(bad(format!(
            "BLAKE3 {} where BACKUP_MANIFEST lists {}",
            hex::encode(digest),
            hex::encode(want.digest)
        )));
    }
    Ok(())
}

/// Restore the backup directory `from` into `to` (absent or empty): see
/// the module documentation.
pub fn restore_backup(
    from: &Path,
    to: &Path,
    progress: ProgressFn<'_>,
    step: StepHook<'_>,
) -> Result<RestoreReport> {
    restore_backup_with_archive(from, to, None, progress, step)
}

/// [`restore_backup`]; with `archive` (an absolute directory, absent or
/// empty, outside `to`) the fresh archives are placed there instead of in
/// the default `.recovery` directories beside each database, in the layout
/// of `archive relocate` (`catalog.recovery`, `repos/<id>/metadata.recovery`,
/// `auth-state.recovery`), each selected by a `.recovery-location`.
pub fn restore_backup_with_archive(
    from: &Path,
    to: &Path,
    archive: Option<&Path>,
    progress: ProgressFn<'_>,
    step: StepHook<'_>,
) -> Result<RestoreReport> {
    let manifest = read_manifest(from)?;
    if let Ok(mut it) = std::fs::read_dir(to) {
        if it.next().is_some() {
            return Err(MetadataError::refused(
                ErrorCode::AlreadyExists,
                format!("{} is not empty", to.display()),
            ));
        }
    }
    let staging = staging_dir(to);
    if let Some(dir) = archive {
        check_archive_target(dir, to, &staging)?;
    }
    if staging.exists() {
        // An interrupted restore's leftover: never published, ours by name.
        std::fs::remove_dir_all(&staging).map_err(|e| MetadataError::io(&staging, e))?;
    }
    mkdir(&staging)?;
    let result = (|| {
        let total: u64 = manifest.files.iter().map(|f| f.size).sum();
        let mut done = 0u64;
        for f in &manifest.files {
            let dst = staging.join(&f.path);
            let auth = f.path.starts_with("auth/");
            if let Some(parent) = dst.parent() {
                if auth {
                    private_dir(parent)?;
                } else {
                    mkdir(parent)?;
                }
            }
            restore_file(&from.join(&f.path), &dst, f)?;
            if auth {
                keep_mode(&from.join(&f.path), &dst)?;
            }
            done += f.size;
            progress(done, total);
            step("file");
        }
        if !staging.join(database_descriptor::FILE).is_file() || !staging.join(CATALOG).is_file() {
            return Err(MetadataError::refused(
                ErrorCode::Corrupt,
                format!(
                    "{}: lists no data-root SCRIBE_FORMAT or catalog.redb",
                    from.join(MANIFEST).display()
                ),
            ));
        }
        let (report_repos, incarnation, from_incarnation) = reincarnate(&staging)?;
        step("reincarnated");
        if let Some(dir) = archive {
            place_archives(&staging, dir)?;
            step("archives");
        }
        Ok((report_repos, incarnation, from_incarnation, total))
    })();
    let (repos, incarnation, from_incarnation, bytes) = match result {
        Ok(r) => r,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(e);
        }
    };
    // Publish: one rename (over an empty target directory).
    if to.exists() {
        std::fs::remove_dir(to).map_err(|e| MetadataError::io(to, e))?;
    }
    std::fs::rename(&staging, to).map_err(|e| MetadataError::io(to, e))?;
    if let Some(parent) = to.parent().filter(|d| !d.as_os_str().is_empty()) {
        sync_dir(parent)?;
    }
    Ok(RestoreReport {
        from_incarnation,
        incarnation,
        repositories: repos
            .into_iter()
            .map(|(d, inc)| {
                (
                    to.join("repos").join(d.file_name().unwrap_or_default()),
                    inc,
                )
            })
            .collect(),
        files: manifest.files.len() as u64,
        bytes,
    })
}

/// `--archive DIR` of a restore: absolute, absent or empty, not inside
/// the restored root (whose staging directory is renamed).
fn check_archive_target(dir: &Path, to: &Path, staging: &Path) -> Result<()> {
    let usage = |d: String| MetadataError::refused(ErrorCode::Usage, d);
    if !dir.is_absolute() {
        return Err(usage(format!(
            "{} is not an absolute directory",
            dir.display()
        )));
    }
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_owned());
    if abs(dir).starts_with(abs(to)) || abs(dir).starts_with(abs(staging)) {
        return Err(usage(format!(
            "{} is inside the restored data root {}: give a directory on another volume",
            dir.display(),
            to.display()
        )));
    }
    if let Ok(mut it) = std::fs::read_dir(dir) {
        if it.next().is_some() {
            return Err(MetadataError::refused(
                ErrorCode::AlreadyExists,
                format!("{} is not empty", dir.display()),
            ));
        }
    }
    Ok(())
}

/// Move the fresh archives of the restored root `root` (staging) into
/// `dir`: each is copied, verified and selected by `.recovery-location`
/// (`consolidate::relocate`), then its default directory (made by this
/// restore) is removed. A failure removes what was placed in `dir`.
fn place_archives(root: &Path, dir: &Path) -> Result<()> {
    let mut targets = vec![(root.join(CATALOG), dir.join("catalog.recovery"))];
    let repos = root.join("repos");
    if repos.is_dir() {
        let mut ids: Vec<PathBuf> = std::fs::read_dir(&repos)
            .map_err(|e| MetadataError::io(&repos, e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join(crate::repo::METADATA_FILE).is_file())
            .collect();
        ids.sort();
        for d in ids {
            let name = d.file_name().unwrap_or_default().to_owned();
            targets.push((
                d.join(crate::repo::METADATA_FILE),
                dir.join("repos").join(name).join("metadata.recovery"),
            ));
        }
    }
    if root.join(AUTH_STATE).is_file() {
        targets.push((root.join(AUTH_STATE), dir.join("auth-state.recovery")));
    }
    let mut placed = Vec::new();
    let result = (|| {
        for (db, dest) in &targets {
            placed.push(dest.clone());
            crate::consolidate::relocate(db, dest)?;
            let old = crate::archive::default_dir(db);
            std::fs::remove_dir_all(&old).map_err(|e| MetadataError::io(&old, e))?;
        }
        Ok(())
    })();
    if result.is_err() {
        for p in placed {
            let _ = std::fs::remove_dir_all(p);
        }
        let _ = std::fs::remove_dir(dir.join("repos"));
    }
    result
}

type Reincarnated = (Vec<(PathBuf, [u8; 16])>, [u8; 16], [u8; 16]);

/// In a data root directory nobody else uses (a restore's staging or
/// target): every repository gets a new incarnation, every database a new
/// journal identity and a fresh archive, every object store a rebuilt
/// locator, and the data-root descriptor (written last) a new incarnation
/// with `restored-from-incarnation` / `restored-ms`.
pub(crate) fn reincarnate(root: &Path) -> Result<Reincarnated> {
    let desc_path = root.join(database_descriptor::FILE);
    let old = database_descriptor::read(root)?;
    let fields = old
        .data_root()
        .map_err(|e| MetadataError::corrupt(format!("{}: {e}", root.display())))?;
    // The descriptor is published last: remove it until then, so an
    // interrupted step leaves a directory nothing opens.
    std::fs::remove_file(&desc_path).map_err(|e| MetadataError::io(&desc_path, e))?;
    let mut repositories = Vec::new();
    let repos = root.join("repos");
    if repos.is_dir() {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(&repos)
            .map_err(|e| MetadataError::io(&repos, e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join(crate::repo::METADATA_FILE).is_file())
            .collect();
        dirs.sort();
        for dir in dirs {
            let inc = RepositoryId::random().0;
            let db_path = dir.join(crate::repo::METADATA_FILE);
            {
                let db = Database::open(&db_path)?;
                let mut tx = db.begin_write()?;
                tx.set_durability(redb::Durability::Immediate)?;
                tx.open_table(META)?
                    .insert(meta::INCARNATION, inc.as_slice())?;
                tx.commit()?;
            }
            crate::archive::start_fresh(&db_path)?;
            let objects = dir.join("objects");
            if objects.join("SCRIBE_FORMAT").is_file() {
                let _ = std::fs::remove_file(objects.join("locator.redb"));
                for sub in ["packs", "loose"] {
                    mkdir(&objects.join(sub))?;
                }
                scribe_objects::rebuild_locator(&objects)
                    .map_err(|e| MetadataError::Objects(format!("{}: {e}", objects.display())))?;
            }
            repositories.push((dir, inc));
        }
    }
    crate::archive::start_fresh(&root.join(CATALOG))?;
    // The storage ownership file carries the journal too: a new identity
    // and a fresh archive of its own.
    if root.join(AUTH_STATE).is_file() {
        crate::archive::start_fresh(&root.join(AUTH_STATE))?;
    }
    let incarnation = RepositoryId::random().0;
    let mut next = Descriptor::new_data_root(&DataRoot {
        incarnation,
        restored: Some(Restored {
            from_incarnation: fields.incarnation,
            ms: now_ms(),
        }),
        ..fields
    })
    .map_err(|e| MetadataError::corrupt(e.to_string()))?;
    const OWN: &[&str] = &[
        "catalog-schema",
        "repository-schema",
        "object-store",
        "envelope",
        "engine",
        "incarnation",
        "created-ms",
        "restored-from-incarnation",
        "restored-ms",
    ];
    for (k, v) in old.entries() {
        if k == "required-features" {
            for f in old.required_features() {
                next.add_required_feature(f)
                    .map_err(|e| MetadataError::corrupt(e.to_string()))?;
            }
        } else if !OWN.contains(&k) && next.get(k).is_none() {
            next.set(k, v)
                .map_err(|e| MetadataError::corrupt(e.to_string()))?;
        }
    }
    // Every directory entry made above is durable before the descriptor.
    sync_dir(&repos).ok();
    sync_dir(root)?;
    database_descriptor::write(&next, root)?;
    Ok((repositories, incarnation, fields.incarnation))
}

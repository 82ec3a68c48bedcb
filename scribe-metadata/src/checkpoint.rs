//! Online checkpoints of the metadata archives (seed 004, "Independent
//! archive and consolidated recovery bases": "Online checkpoints use
//! manifest version 2 with a `full` flag").
//!
//! [`checkpoint`] runs beside a serving process, like backup: it never
//! opens a database another process writes, only what each archive has
//! published. A checkpoint directory `DIR` holds numbered checkpoints
//! `DIR/<20-digit n>/`, each with one manifest `<key>.ckpt` per database
//! (`catalog`, `repo-<id hex>`, `auth-state`) and the files it names:
//!
//! * a full logical base `<key>.scrb` (the seed's `SCRB`, written by the
//!   consolidation writer from the archive replayed into a scratch file)
//!   when the database has no earlier manifest, its earlier manifest is of
//!   another journal identity, or its earlier end cursor is below the
//!   archive's retained floor (the end of the base `BASE` selects, where
//!   consolidation may have pruned the frames the export would continue
//!   with);
//! * otherwise the archive's frames from the earlier end cursor to the
//!   current `HEAD`, byte for byte (`<key>.scrf`; none when nothing
//!   changed).
//!
//! Every manifest links its predecessor's BLAKE3 (a full one too). The
//! checkpoint is written into `DIR/.<n>.partial`, flushed, and published by
//! one rename only if the newest published checkpoint is still the one the
//! links were made against; a killed run leaves the earlier chain intact
//! and its `.partial` directory is removed by the next run. `DIR/LOCK`
//! excludes concurrent checkpoints into one directory.
//!
//! [`restore_database`] follows a database's predecessors back to its full
//! manifest only, verifies every link (digest, cursor continuity, identity),
//! every file's size and digest and every frame's chain, and replays the
//! base then the frames into a quarantined `.replay` file published only
//! when complete. [`recover_data_root`] does that for each database a
//! checkpoint holds that a data root has lost.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use redb::{Database, ReadableDatabase};
use scribe_format::checkpoint::{
    checkpoint_dir_name, parse_checkpoint_dir_name, CheckpointFile, CheckpointManifest,
    PREVIOUS_OFFSET, START_OFFSET,
};
use scribe_format::recovery::{
    self as rj, ArchiveHead, Frame, Record, RecoveryError, SegmentReader, TypeCheck,
};
use scribe_format::recovery_base::{BaseHeader, BaseReader, BaseWriter};
use scribe_format::{ErrorCode, RepositoryId};

use crate::archive;
use crate::backup::StepHook;
use crate::database_descriptor::{self, sync_dir};
use crate::error::{MetadataError, Result};
use crate::journal::{self, Replayed, Replayer};
use crate::tables::{meta, META};

/// The lock file excluding concurrent checkpoints into one directory.
pub const LOCK_FILE: &str = "LOCK";
/// The catalog's key.
pub const CATALOG_KEY: &str = "catalog";
/// The storage ownership database's key.
pub const AUTH_STATE_KEY: &str = "auth-state";

/// `repo-<id hex>`.
pub fn repo_key(id: RepositoryId) -> String {
    format!("repo-{}", id.to_hex())
}

/// The database file of `key` under the data root `data`.
pub fn db_path(data: &Path, key: &str) -> Result<PathBuf> {
    match key {
        CATALOG_KEY => Ok(data.join("catalog.redb")),
        AUTH_STATE_KEY => Ok(data.join(crate::auth_state::AUTH_STATE_FILE)),
        k => {
            let id = k
                .strip_prefix("repo-")
                .and_then(|h| RepositoryId::from_hex(h).ok())
                .ok_or_else(|| {
                    MetadataError::corrupt(format!("{k:?} is not a checkpoint database key"))
                })?;
            Ok(data
                .join("repos")
                .join(id.to_hex())
                .join(crate::repo::METADATA_FILE))
        }
    }
}

fn has_head(db: &Path) -> bool {
    archive::archive_dir(db).is_ok_and(|d| d.join(archive::HEAD_FILE).is_file())
}

/// The databases of a data root that have an archive, by key.
pub fn databases(data: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    let catalog = db_path(data, CATALOG_KEY)?;
    if !has_head(&catalog) {
        return Err(MetadataError::RecoveryProfileMissing {
            path: archive::archive_dir(&catalog)?,
            what: "the catalog's recovery archive (HEAD) is missing".into(),
        });
    }
    out.push((CATALOG_KEY.to_owned(), catalog));
    let repos = data.join("repos");
    if repos.is_dir() {
        let mut ids: Vec<RepositoryId> = std::fs::read_dir(&repos)
            .map_err(|e| MetadataError::io(&repos, e))?
            .filter_map(|e| e.ok())
            .filter_map(|e| RepositoryId::from_hex(&e.file_name().to_string_lossy()).ok())
            .collect();
        ids.sort_by_key(|i| i.0);
        for id in ids {
            let key = repo_key(id);
            let db = db_path(data, &key)?;
            if has_head(&db) {
                out.push((key, db));
            }
        }
    }
    if crate::auth_state::has_archive(data) {
        out.push((AUTH_STATE_KEY.to_owned(), db_path(data, AUTH_STATE_KEY)?));
    }
    Ok(out)
}

/// The published checkpoints of `dir`, ascending.
pub fn published(dir: &Path) -> Result<Vec<u64>> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(MetadataError::io(dir, e)),
    };
    let mut out = Vec::new();
    for e in rd {
        let e = e.map_err(|e| MetadataError::io(dir, e))?;
        if let Some(n) = parse_checkpoint_dir_name(&e.file_name().to_string_lossy()) {
            if e.path().is_dir() {
                out.push(n);
            }
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// A manifest read from a published checkpoint.
#[derive(Debug, Clone)]
pub struct Link {
    pub path: PathBuf,
    pub digest: [u8; 32],
    pub manifest: CheckpointManifest,
}

fn manifest_name(key: &str) -> String {
    format!("{key}.ckpt")
}

fn read_link(dir: &Path, sequence: u64, key: &str) -> Result<Option<Link>> {
    let path = dir
        .join(checkpoint_dir_name(sequence))
        .join(manifest_name(key));
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(MetadataError::io(&path, e)),
    };
    let manifest = CheckpointManifest::decode(&bytes).map_err(|e| MetadataError::Recovery {
        path: path.clone(),
        offset: match e {
            RecoveryError::Checksum { .. } => bytes.len().saturating_sub(32) as u64,
            _ => 0,
        },
        source: e,
    })?;
    if manifest.sequence != sequence {
        return Err(MetadataError::corrupt(format!(
            "{}: at byte 11: sequence {} in checkpoint {sequence}",
            path.display(),
            manifest.sequence
        )));
    }
    Ok(Some(Link {
        digest: *blake3::hash(&bytes).as_bytes(),
        path,
        manifest,
    }))
}

/// The newest manifest of `key` among `sequences` below `below`.
fn newest_before(dir: &Path, sequences: &[u64], key: &str, below: u64) -> Result<Option<Link>> {
    for &n in sequences.iter().rev().filter(|&&n| n < below) {
        if let Some(l) = read_link(dir, n, key)? {
            return Ok(Some(l));
        }
    }
    Ok(None)
}

/// One database of a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseCheckpoint {
    pub key: String,
    pub full: bool,
    /// The journal end the export continued from (0 for a full base).
    pub from: u64,
    pub end: u64,
    pub bytes: u64,
}

/// What [`checkpoint`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointReport {
    pub sequence: u64,
    pub dir: PathBuf,
    pub databases: Vec<DatabaseCheckpoint>,
    /// The data root was served (its `LOCK` held by another process).
    pub online: bool,
}

fn mkdir(p: &Path) -> Result<()> {
    std::fs::create_dir_all(p).map_err(|e| MetadataError::io(p, e))
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = File::create(path).map_err(|e| MetadataError::io(path, e))?;
    f.write_all(bytes).map_err(|e| MetadataError::io(path, e))?;
    f.sync_all().map_err(|e| MetadataError::io(path, e))
}

/// Take a checkpoint of the data root `data` (served or not) into `to`.
/// See the module documentation.
pub fn checkpoint(data: &Path, to: &Path, step: StepHook<'_>) -> Result<CheckpointReport> {
    let root_lock = match crate::root::take_lock(data) {
        Ok(l) => Some(l),
        Err(MetadataError::DataRootLocked { .. }) => None,
        Err(e) => return Err(e),
    };
    let online = root_lock.is_none();
    database_descriptor::read(data)?;
    mkdir(to)?;
    let lock_path = to.join(LOCK_FILE);
    let _lock = scribe_format::lock::take(&lock_path).map_err(|e| match e {
        scribe_format::lock::LockError::Held { pid } => MetadataError::refused(
            ErrorCode::Busy,
            format!(
                "{}: another checkpoint into {} is running{}",
                lock_path.display(),
                to.display(),
                pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
            ),
        ),
        scribe_format::lock::LockError::Io(e) => MetadataError::io(&lock_path, e),
    })?;
    // Leftovers of interrupted runs: never published, ours by name.
    for e in std::fs::read_dir(to).map_err(|e| MetadataError::io(to, e))? {
        let e = e.map_err(|e| MetadataError::io(to, e))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') && name.ends_with(".partial") {
            std::fs::remove_dir_all(e.path()).map_err(|err| MetadataError::io(e.path(), err))?;
        }
    }
    let sequences = published(to)?;
    let last = sequences.last().copied();
    let sequence = last.map_or(1, |n| n + 1);
    let staging = to.join(format!(".{}.partial", checkpoint_dir_name(sequence)));
    mkdir(&staging)?;
    let mut report = CheckpointReport {
        sequence,
        dir: to.join(checkpoint_dir_name(sequence)),
        databases: Vec::new(),
        online,
    };
    for (key, db) in databases(data)? {
        let dir = archive::archive_dir(&db)?;
        let head = archive::read_head(&dir)?;
        let floor = archive::read_pointer(&dir)?
            .map(|p| p.cursor.end)
            .unwrap_or(0);
        let prior = newest_before(to, &sequences, &key, u64::MAX)?;
        let previous = prior.as_ref().map(|l| l.digest).unwrap_or([0; 32]);
        // A missing cursor, another identity, or one below the retained
        // floor starts a full logical base.
        let from = prior
            .as_ref()
            .map(|l| l.manifest.end)
            .filter(|c| c.identity == head.identity && c.end >= floor);
        let (manifest, bytes) = match from {
            Some(start) => {
                if start.end > head.end {
                    return Err(MetadataError::corrupt(format!(
                        "{}: the archive ends at {} behind the checkpoint {} that reached {}",
                        dir.join(archive::HEAD_FILE).display(),
                        head.end,
                        prior
                            .as_ref()
                            .map(|l| l.path.display().to_string())
                            .unwrap_or_default(),
                        start.end
                    )));
                }
                let (files, bytes) = export_frames(&dir, &staging, &key, start, head)?;
                (
                    CheckpointManifest {
                        full: false,
                        sequence,
                        identity: head.identity,
                        start,
                        end: head,
                        previous,
                        files,
                    },
                    bytes,
                )
            }
            None => {
                let (file, end) = export_base(&dir, &staging, &key)?;
                let bytes = file.size;
                (
                    CheckpointManifest {
                        full: true,
                        sequence,
                        identity: end.identity,
                        start: ArchiveHead::zero(end.identity, 0),
                        end,
                        previous,
                        files: vec![file],
                    },
                    bytes,
                )
            }
        };
        let encoded = manifest.encode().map_err(MetadataError::journal)?;
        write_synced(&staging.join(manifest_name(&key)), &encoded)?;
        report.databases.push(DatabaseCheckpoint {
            key,
            full: manifest.full,
            from: manifest.start.end,
            end: manifest.end.end,
            bytes,
        });
        step("database");
    }
    sync_dir(&staging)?;
    step("publish");
    // The previous-manifest links are a publication check: they name the
    // newest published checkpoint, which must still be the newest.
    if published(to)?.last().copied() != last {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(MetadataError::refused(
            ErrorCode::Busy,
            format!(
                "{}: another checkpoint was published meanwhile; nothing was published",
                to.display()
            ),
        ));
    }
    std::fs::rename(&staging, &report.dir).map_err(|e| MetadataError::io(&report.dir, e))?;
    sync_dir(to)?;
    drop(root_lock);
    Ok(report)
}

/// The frames of the archive at `dir` from `start` to `head`, byte for
/// byte, into `staging/<key>.scrf` (none when nothing changed).
fn export_frames(
    dir: &Path,
    staging: &Path,
    key: &str,
    start: ArchiveHead,
    head: ArchiveHead,
) -> Result<(Vec<CheckpointFile>, u64)> {
    if start.end == head.end {
        if start != head {
            return Err(MetadataError::corrupt(format!(
                "{}: the archive at end {} is not the one the previous checkpoint followed",
                dir.join(archive::HEAD_FILE).display(),
                head.end
            )));
        }
        return Ok((Vec::new(), 0));
    }
    let name = format!("{key}.scrf");
    let out_path = staging.join(&name);
    let out = File::create(&out_path).map_err(|e| MetadataError::io(&out_path, e))?;
    let mut w = BufWriter::with_capacity(1 << 20, out);
    let mut hasher = blake3::Hasher::new();
    let mut size = 0u64;
    let mut prev = start.chain;
    let mut after = start.end;
    let first = start.segment.max(1);
    for n in first..=head.segment {
        let path = dir.join(rj::segment_file_name(n));
        let mut bytes = Vec::new();
        File::open(&path)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .map_err(|e| MetadataError::io(&path, e))?;
        let from = if n == start.segment {
            start.offset as usize
        } else {
            0
        };
        let limit = if n == head.segment {
            head.offset as usize
        } else {
            bytes.len()
        };
        if bytes.len() < limit || from > limit {
            return Err(MetadataError::Recovery {
                path,
                offset: bytes.len() as u64,
                source: scribe_format::FormatError::Truncated {
                    what: "archive segment",
                    needed: limit.saturating_sub(bytes.len()) as u64,
                    available: 0,
                }
                .into(),
            });
        }
        let mut at = from;
        while at < limit {
            let err = |offset: usize, source| MetadataError::Recovery {
                path: path.clone(),
                offset: offset as u64,
                source,
            };
            let (frame, used) = Frame::decode(&bytes[at..limit], &prev).map_err(|e| err(at, e))?;
            let h = SegmentReader::new(frame.payload)
                .map_err(|e| err(at + 40, e))?
                .header();
            if h.identity != head.identity || h.after != after {
                return Err(err(
                    at + 40 + 22,
                    RecoveryError::SegmentGap {
                        expected: after,
                        found: h.after,
                    },
                ));
            }
            let chunk = &bytes[at..at + used];
            w.write_all(chunk)
                .map_err(|e| MetadataError::io(&out_path, e))?;
            hasher.update(chunk);
            size += used as u64;
            prev = frame.chain;
            after = h.end;
            at += used;
        }
    }
    if prev != head.chain || after != head.end {
        return Err(MetadataError::Recovery {
            path: dir.join(archive::HEAD_FILE),
            offset: 48,
            source: RecoveryError::ChainMismatch,
        });
    }
    let f = w
        .into_inner()
        .map_err(|e| MetadataError::io(&out_path, e.into_error()))?;
    f.sync_all().map_err(|e| MetadataError::io(&out_path, e))?;
    Ok((
        vec![CheckpointFile {
            name,
            size,
            digest: *hasher.finalize().as_bytes(),
        }],
        size,
    ))
}

/// A full logical base of the archive at `dir` into `staging/<key>.scrb`:
/// the archive is replayed into a scratch file (removed after), whose
/// state the consolidation writer writes. Returns the file and the cursor
/// the base ends at.
fn export_base(dir: &Path, staging: &Path, key: &str) -> Result<(CheckpointFile, ArchiveHead)> {
    let scratch = staging.join(format!("{key}.scratch.redb"));
    let (_, cursor) = archive::recover_at(dir, &scratch)?;
    let name = format!("{key}.scrb");
    let path = staging.join(&name);
    {
        let db = Database::open(&scratch)?;
        let tx = db.begin_read()?;
        let profile = journal::check_profile(&tx, &scratch)?;
        if profile.end != cursor.end || profile.identity != cursor.identity {
            return Err(MetadataError::corrupt(format!(
                "{}: replayed to {} where the archive cursor names {}",
                scratch.display(),
                profile.end,
                cursor.end
            )));
        }
        let io = |e| MetadataError::io(&path, e);
        let f = File::create(&path).map_err(io)?;
        let mut w = BaseWriter::new(
            BufWriter::with_capacity(1 << 20, f),
            BaseHeader {
                identity: cursor.identity,
                end: cursor.end,
            },
        )
        .map_err(MetadataError::journal)?;
        journal::write_base(&tx, &mut w)?;
        let (bw, digest, size) = w.finish().map_err(MetadataError::journal)?;
        let f = bw.into_inner().map_err(|e| io(e.into_error()))?;
        f.sync_all().map_err(io)?;
        drop(tx);
        drop(db);
        std::fs::remove_file(&scratch).map_err(|e| MetadataError::io(&scratch, e))?;
        Ok((CheckpointFile { name, size, digest }, cursor))
    }
}

fn refused(path: &Path, offset: usize, why: String) -> MetadataError {
    MetadataError::refused(
        ErrorCode::Corrupt,
        format!("{}: at byte {offset}: {why}", path.display()),
    )
}

/// The manifests of `key` from its full manifest to the one in checkpoint
/// `sequence`, oldest first, every link checked.
pub fn chain(dir: &Path, sequence: u64, key: &str) -> Result<Vec<Link>> {
    let sequences = published(dir)?;
    let mut cur = read_link(dir, sequence, key)?.ok_or_else(|| {
        MetadataError::refused(
            ErrorCode::NotFound,
            format!(
                "{}: no manifest of {key}",
                dir.join(checkpoint_dir_name(sequence)).display()
            ),
        )
    })?;
    let mut links = Vec::new();
    while !cur.manifest.full {
        let Some(pred) = newest_before(dir, &sequences, key, cur.manifest.sequence)? else {
            return Err(refused(
                &cur.path,
                PREVIOUS_OFFSET,
                format!(
                    "the predecessor manifest (BLAKE3 {}) is missing from {}",
                    hex::encode(cur.manifest.previous),
                    dir.display()
                ),
            ));
        };
        if pred.digest != cur.manifest.previous {
            return Err(refused(
                &cur.path,
                PREVIOUS_OFFSET,
                format!(
                    "the previous manifest link names BLAKE3 {} but {} is {}",
                    hex::encode(cur.manifest.previous),
                    pred.path.display(),
                    hex::encode(pred.digest)
                ),
            ));
        }
        if pred.manifest.end != cur.manifest.start {
            return Err(refused(
                &cur.path,
                START_OFFSET,
                format!(
                    "the start cursor (end {}) is not the end cursor (end {}) of {}",
                    cur.manifest.start.end,
                    pred.manifest.end.end,
                    pred.path.display()
                ),
            ));
        }
        links.push(cur);
        cur = pred;
    }
    links.push(cur);
    links.reverse();
    Ok(links)
}

/// Check every file of `link` exists with its listed size.
fn check_sizes(link: &Link) -> Result<()> {
    let dir = link.path.parent().unwrap_or(Path::new("."));
    for f in &link.manifest.files {
        let path = dir.join(&f.name);
        let len = match std::fs::metadata(&path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(MetadataError::refused(
                    ErrorCode::Corrupt,
                    format!(
                        "{}: missing (listed by {})",
                        path.display(),
                        link.path.display()
                    ),
                ))
            }
            Err(e) => return Err(MetadataError::io(&path, e)),
        };
        if len != f.size {
            return Err(refused(
                &path,
                len.min(f.size) as usize,
                format!(
                    "{len} bytes where {} lists {}: the file {} here",
                    link.path.display(),
                    f.size,
                    if len < f.size { "ends" } else { "goes on" }
                ),
            ));
        }
    }
    Ok(())
}

/// What [`restore_database`] rebuilt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoredDatabase {
    pub key: String,
    pub replayed: Replayed,
    /// Manifests followed, the full one included.
    pub manifests: u64,
}

/// Rebuild `key`'s database at `target` (which must not exist) from the
/// chain ending in checkpoint `sequence` of `dir`. See the module
/// documentation.
pub fn restore_database(
    dir: &Path,
    sequence: u64,
    key: &str,
    target: &Path,
) -> Result<RestoredDatabase> {
    if target.exists() {
        return Err(MetadataError::refused(
            ErrorCode::AlreadyExists,
            format!(
                "{} exists; recovery publishes only a new file",
                target.display()
            ),
        ));
    }
    let links = chain(dir, sequence, key)?;
    for l in &links {
        check_sizes(l)?;
    }
    let identity = links[0].manifest.identity;
    let quarantine = journal::quarantine_path(target);
    if quarantine.exists() {
        std::fs::remove_file(&quarantine).map_err(|e| MetadataError::io(&quarantine, e))?;
    }
    let result = (|| -> Result<Replayed> {
        let mut r = Replayer::new(&quarantine, Some(identity))?;
        let full = &links[0];
        let base = &full.manifest.files[0];
        let base_path = full.path.with_file_name(&base.name);
        let types = load_base(&mut r, &base_path, base, &full.manifest)?;
        r.loaded_base(full.manifest.end.end, types);
        for l in &links[1..] {
            let Some(f) = l.manifest.files.first() else {
                continue;
            };
            let path = l.path.with_file_name(&f.name);
            replay_frames(&mut r, &path, f, &l.manifest)?;
        }
        let last = &links[links.len() - 1].manifest;
        if r.end() != last.end.end {
            return Err(MetadataError::corrupt(format!(
                "{}: the chain ends at {} where the manifest names {}",
                links[links.len() - 1].path.display(),
                r.end(),
                last.end.end
            )));
        }
        r.finish()
    })();
    match result {
        Ok(replayed) => {
            std::fs::rename(&quarantine, target).map_err(|e| MetadataError::io(target, e))?;
            if let Some(parent) = target.parent().filter(|d| !d.as_os_str().is_empty()) {
                sync_dir(parent)?;
            }
            Ok(RestoredDatabase {
                key: key.to_owned(),
                replayed,
                manifests: links.len() as u64,
            })
        }
        Err(e) => {
            let _ = std::fs::remove_file(&quarantine);
            Err(e)
        }
    }
}

/// Stream a checkpoint's logical base into `r`; its header must match the
/// manifest and its digest the listed one.
fn load_base(
    r: &mut Replayer,
    path: &Path,
    file: &CheckpointFile,
    m: &CheckpointManifest,
) -> Result<TypeCheck> {
    let f = File::open(path).map_err(|e| MetadataError::io(path, e))?;
    let err = |offset: u64, source| MetadataError::Recovery {
        path: path.to_owned(),
        offset,
        source,
    };
    let mut br = BaseReader::new(BufReader::with_capacity(1 << 20, f)).map_err(|e| err(0, e))?;
    let h = br.header();
    if h.identity != m.identity {
        return Err(err(
            6,
            RecoveryError::IdentityMismatch {
                expected: hex::encode(m.identity),
                found: hex::encode(h.identity),
            },
        ));
    }
    if h.end != m.end.end {
        return Err(err(
            22,
            RecoveryError::SegmentGap {
                expected: m.end.end,
                found: h.end,
            },
        ));
    }
    let mut check = TypeCheck::default();
    let mut entries = Vec::new();
    loop {
        let at = br.offset();
        let Some(rec) = br.next_record().map_err(|e| err(br.offset(), e))? else {
            break;
        };
        check.apply(&rec).map_err(|e| err(at, e))?;
        entries.push(rec);
        if entries.len() >= journal::REPLAY_BATCH_RECORDS * 8 {
            r.load(std::mem::take(&mut entries))?;
        }
    }
    r.load(entries)?;
    if br.file_digest() != file.digest {
        return Err(err(
            br.offset(),
            RecoveryError::Checksum {
                what: "checkpoint logical base (the digest its manifest lists)",
            },
        ));
    }
    check
        .apply(&Record::Commit)
        .map_err(|e| err(br.offset(), e))?;
    Ok(check)
}

/// Feed a checkpoint's frames file into `r`: every frame chains from the
/// manifest's start cursor to its end cursor; the digest is the listed one.
fn replay_frames(
    r: &mut Replayer,
    path: &Path,
    file: &CheckpointFile,
    m: &CheckpointManifest,
) -> Result<()> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| MetadataError::io(path, e))?;
    let digest_ok = blake3::hash(&bytes).as_bytes() == &file.digest;
    let err = |offset: usize, source| MetadataError::Recovery {
        path: path.to_owned(),
        offset: offset as u64,
        source,
    };
    // Structure first (it names the offset of a damaged frame), then the
    // digest, before any frame is applied.
    let mut frames = Vec::new();
    let mut prev = m.start.chain;
    let mut at = 0usize;
    while at < bytes.len() {
        let (frame, used) = Frame::decode(&bytes[at..], &prev).map_err(|e| err(at, e))?;
        // The payload's own checksum, before anything is applied.
        let mut sr = SegmentReader::new(frame.payload).map_err(|e| err(at + 40, e))?;
        while sr
            .next_record()
            .map_err(|e| err(at + 40 + sr.offset() as usize, e))?
            .is_some()
        {}
        frames.push((at, used));
        prev = frame.chain;
        at += used;
    }
    if prev != m.end.chain {
        return Err(err(bytes.len(), RecoveryError::ChainMismatch));
    }
    if !digest_ok {
        return Err(err(
            bytes.len(),
            RecoveryError::Checksum {
                what: "checkpoint frames (the digest its manifest lists)",
            },
        ));
    }
    for (at, used) in frames {
        let payload = &bytes[at + 40..at + used - 32];
        r.feed(path, at as u64 + 40, payload)?;
    }
    Ok(())
}

/// Verify every database chain of checkpoint `sequence` (default: the
/// newest) of `dir` without writing anything: each is replayed into a
/// scratch file in a temporary directory beside `dir`, then removed.
pub fn verify(dir: &Path, sequence: Option<u64>) -> Result<Vec<RestoredDatabase>> {
    let sequence = select(dir, sequence)?;
    let scratch = dir.join(format!(".verify-{}.partial", std::process::id()));
    mkdir(&scratch)?;
    let result = (|| {
        let mut out = Vec::new();
        for key in keys(dir, sequence)? {
            let target = scratch.join(format!("{key}.redb"));
            out.push(restore_database(dir, sequence, &key, &target)?);
            std::fs::remove_file(&target).map_err(|e| MetadataError::io(&target, e))?;
        }
        Ok(out)
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

/// `sequence`, or the newest published checkpoint of `dir`.
pub fn select(dir: &Path, sequence: Option<u64>) -> Result<u64> {
    let all = published(dir)?;
    match sequence {
        Some(n) if all.contains(&n) => Ok(n),
        Some(n) => Err(MetadataError::refused(
            ErrorCode::NotFound,
            format!(
                "{} is not a published checkpoint",
                dir.join(checkpoint_dir_name(n)).display()
            ),
        )),
        None => all.last().copied().ok_or_else(|| {
            MetadataError::refused(
                ErrorCode::NotFound,
                format!("{} holds no published checkpoint", dir.display()),
            )
        }),
    }
}

/// The database keys checkpoint `sequence` of `dir` holds, sorted.
pub fn keys(dir: &Path, sequence: u64) -> Result<Vec<String>> {
    let d = dir.join(checkpoint_dir_name(sequence));
    let mut out = Vec::new();
    for e in std::fs::read_dir(&d).map_err(|e| MetadataError::io(&d, e))? {
        let e = e.map_err(|e| MetadataError::io(&d, e))?;
        if let Some(k) = e.file_name().to_string_lossy().strip_suffix(".ckpt") {
            out.push(k.to_owned());
        }
    }
    out.sort();
    Ok(out)
}

/// What [`recover_data_root`] did per database: rebuilt, or left alone
/// because its file exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveredRoot {
    pub sequence: u64,
    pub rebuilt: Vec<(PathBuf, RestoredDatabase)>,
    pub present: Vec<PathBuf>,
}

/// Rebuild every database of the (stopped) data root `data` that checkpoint
/// `sequence` of `ckpt` holds and `data` has lost. Refuses, before
/// anything is written, when a lost database's archive still has a `HEAD`
/// (`recover --from-archive` rebuilds every acknowledged change from it)
/// or a lost repository's directory has no descriptor. Each rebuilt
/// database is published from quarantine, then a repository gets a new
/// incarnation (changes acknowledged after the checkpoint are not in it)
/// and every rebuilt database a new journal identity and a fresh archive.
pub fn recover_data_root(data: &Path, ckpt: &Path, sequence: Option<u64>) -> Result<RecoveredRoot> {
    let _lock = crate::root::take_lock(data)?;
    database_descriptor::read(data)?;
    let sequence = select(ckpt, sequence)?;
    let mut plan = BTreeMap::new();
    let mut present = Vec::new();
    for key in keys(ckpt, sequence)? {
        let path = db_path(data, &key)?;
        if path.exists() {
            present.push(path);
            continue;
        }
        if has_head(&path) {
            return Err(MetadataError::refused(
                ErrorCode::AlreadyExists,
                format!(
                    "{} is missing but its archive {} survives: `recover --from-archive` rebuilds every acknowledged change from it (move it aside to use the checkpoint); nothing was rebuilt",
                    path.display(),
                    archive::archive_dir(&path)?.display()
                ),
            ));
        }
        if key.starts_with("repo-") {
            let desc = path.with_file_name(database_descriptor::FILE);
            if !desc.is_file() {
                return Err(MetadataError::refused(
                    ErrorCode::NotFound,
                    format!(
                        "{} is missing: the repository directory is gone (restore a backup); nothing was rebuilt",
                        desc.display()
                    ),
                ));
            }
        }
        plan.insert(key, path);
    }
    let mut rebuilt = Vec::new();
    for (key, path) in plan {
        let done = restore_database(ckpt, sequence, &key, &path)?;
        if key.starts_with("repo-") {
            let db = Database::open(&path)?;
            let mut tx = db.begin_write()?;
            tx.set_durability(redb::Durability::Immediate)?;
            tx.open_table(META)?
                .insert(meta::INCARNATION, RepositoryId::random().0.as_slice())?;
            tx.commit()?;
        }
        archive::start_fresh(&path)?;
        rebuilt.push((path, done));
    }
    Ok(RecoveredRoot {
        sequence,
        rebuilt,
        present,
    })
}

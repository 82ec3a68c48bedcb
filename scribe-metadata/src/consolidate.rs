//! Offline consolidation and relocation of a recovery archive (seed 004,
//! "Independent archive and consolidated recovery bases").
//!
//! [`consolidate`] writes a logical base of the database at the archive's
//! end (`base-<end>.scrb`), reads it back and checks it, publishes the
//! `BASE` pointer that selects it, advances the persisted floor to that
//! end, deletes the covered outbox rows in batches, and prunes segments
//! and bases the new base makes unnecessary (the active segment's prefix
//! stays until rollover). Each step is idempotent: a consolidation killed
//! anywhere leaves an archive that verifies and recovers, and the next run
//! finishes the work. Pruning is not journaled.
//!
//! [`relocate`] copies an archive to a new directory, flushes and verifies
//! the copy, then publishes the selection in `.recovery-location`; the
//! previous directory is kept.
//!
//! Both run offline: the caller holds the data root's exclusive lock, so no
//! writer or archive consumer runs beside them.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use redb::{Durability, ReadableDatabase, ReadableTable};
use scribe_format::recovery::{self as rj, ArchiveHead};
use scribe_format::recovery_base::{self as rb, BaseHeader, BasePointer, BaseWriter};
use scribe_format::ErrorCode;

use crate::archive::{self, read_base, read_pointer, sync_dir_io, Archive, HEAD_FILE};
use crate::backup::write_atomically;
use crate::database_descriptor::sync_dir;
use crate::error::{MetadataError, Result};
use crate::journal::{self, POSITION, POS_FLOOR, RECORDS};

/// Outbox rows deleted per write transaction.
const OUTBOX_BATCH: usize = 8_192;

/// What [`consolidate`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Consolidated {
    /// The journal end the base holds.
    pub end: u64,
    /// A new base was written (false: `BASE` already selected this end and
    /// only the floor, outbox and pruning steps ran).
    pub wrote_base: bool,
    pub tables: u64,
    pub rows: u64,
    pub base_bytes: u64,
    /// Outbox rows at or below the new floor deleted.
    pub outbox_removed: u64,
    pub segments_pruned: u64,
    pub bases_pruned: u64,
}

/// Consolidate the archive of an open database (offline: the caller holds
/// the data root's exclusive lock). Drains the outbox first, so the base
/// holds every committed transaction.
pub fn consolidate(a: &Archive) -> Result<Consolidated> {
    a.ensure_durable(u64::MAX)?;
    let mut s = a
        .state
        .lock()
        .map_err(|_| MetadataError::Gate("archive state poisoned".into()))?;
    if let Some(why) = &s.fence {
        return Err(MetadataError::refused(
            ErrorCode::ArchiveUnavailable,
            format!("writes are fenced until restart: {why}"),
        ));
    }
    a.publish_locked(&mut s)?;
    let head = s.head;
    let dir = a.dir.clone();
    let tx = a.db.begin_read()?;
    let profile = journal::check_profile(&tx, &dir)?;
    if profile.end != head.end || profile.identity != head.identity {
        return Err(MetadataError::corrupt(format!(
            "{}: HEAD ends at {} but the database at {} after draining",
            dir.join(HEAD_FILE).display(),
            head.end,
            profile.end
        )));
    }
    let mut out = Consolidated {
        end: head.end,
        ..Consolidated::default()
    };
    let current = read_pointer(&dir)?;
    if current.map(|p| p.cursor) != Some(head) {
        // 1. The base, through a flushed temporary file.
        let path = dir.join(rb::base_file_name(head.end));
        let tmp = journal::tmp_path(&path);
        let io = |e| MetadataError::io(&tmp, e);
        let f = File::create(&tmp).map_err(io)?;
        let mut w = BaseWriter::new(
            BufWriter::with_capacity(1 << 20, f),
            BaseHeader {
                identity: head.identity,
                end: head.end,
            },
        )
        .map_err(MetadataError::journal)?;
        let (tables, rows) = journal::write_base(&tx, &mut w)?;
        let (bw, digest, len) = w.finish().map_err(MetadataError::journal)?;
        let f = bw.into_inner().map_err(|e| io(e.into_error()))?;
        f.sync_all().map_err(io)?;
        drop(f);
        std::fs::rename(&tmp, &path).map_err(|e| MetadataError::io(&path, e))?;
        sync_dir_io(&dir).map_err(|e| MetadataError::io(&dir, e))?;
        a.step("base").map_err(|e| MetadataError::io(&path, e))?;
        // 2. Read it back before anything depends on it.
        let pointer = BasePointer {
            cursor: head,
            file_digest: digest,
        };
        read_base(&dir, &pointer, |_| Ok(()))?;
        // 3. Select it.
        write_atomically(&dir.join(rb::POINTER_FILE), &pointer.encode())?;
        a.step("pointer")
            .map_err(|e| MetadataError::io(dir.join(rb::POINTER_FILE), e))?;
        out.wrote_base = true;
        out.tables = tables;
        out.rows = rows;
        out.base_bytes = len;
    }
    drop(tx);
    // 4. The floor, then the covered outbox rows in batches.
    if profile.floor < head.end {
        let mut wtx = a.db.begin_write()?;
        wtx.set_durability(Durability::Immediate)?;
        wtx.open_table(POSITION)?.insert(POS_FLOOR, head.end)?;
        wtx.commit()?;
    }
    a.step("floor").map_err(|e| MetadataError::io(&dir, e))?;
    loop {
        let mut wtx = a.db.begin_write()?;
        wtx.set_durability(Durability::Immediate)?;
        let n = {
            let mut t = wtx.open_table(RECORDS)?;
            let keys: Vec<u64> = t
                .range(..=head.end)?
                .take(OUTBOX_BATCH)
                .map(|r| r.map(|(k, _)| k.value()))
                .collect::<std::result::Result<_, _>>()?;
            for k in &keys {
                t.remove(k)?;
            }
            keys.len()
        };
        wtx.commit()?;
        out.outbox_removed += n as u64;
        if n < OUTBOX_BATCH {
            break;
        }
        a.step("outbox").map_err(|e| MetadataError::io(&dir, e))?;
    }
    // 5. Prune what the base covers: older segments, other bases, and
    //    temporary files of interrupted runs.
    let entries = std::fs::read_dir(&dir).map_err(|e| MetadataError::io(&dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| MetadataError::io(&dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let remove = if let Some(n) = rj::parse_segment_file_name(name) {
            let older = n < head.segment;
            out.segments_pruned += older as u64;
            older
        } else if let Some(end) = rb::parse_base_file_name(name) {
            let other = end != head.end;
            out.bases_pruned += other as u64;
            other
        } else {
            name.strip_suffix(".tmp")
                .is_some_and(|n| rb::parse_base_file_name(n).is_some() || n == rb::POINTER_FILE)
        };
        if remove {
            std::fs::remove_file(entry.path()).map_err(|e| MetadataError::io(entry.path(), e))?;
        }
    }
    sync_dir_io(&dir).map_err(|e| MetadataError::io(&dir, e))?;
    a.step("pruned").map_err(|e| MetadataError::io(&dir, e))?;
    Ok(out)
}

/// What [`relocate`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relocated {
    pub from: PathBuf,
    pub to: PathBuf,
    pub files: u64,
    pub bytes: u64,
    pub head: ArchiveHead,
}

/// Move the archive of the database at `db_path` to `to` (absolute, absent
/// or empty): copy every archive file, flush each and the directory, verify
/// the copy and that it reaches the same HEAD, then publish `to` in
/// `.recovery-location`. The previous directory is kept. Offline.
pub fn relocate(db_path: &Path, to: &Path) -> Result<Relocated> {
    let usage = |d: String| MetadataError::refused(ErrorCode::Usage, d);
    if !to.is_absolute() {
        return Err(usage(format!(
            "{} is not an absolute directory",
            to.display()
        )));
    }
    let text = to
        .to_str()
        .ok_or_else(|| usage(format!("{} is not UTF-8", to.display())))?;
    if text.is_empty() || text.len() > archive::MAX_LOCATION {
        return Err(usage("a directory of 1 to 32,768 bytes is required".into()));
    }
    let from = archive::archive_dir(db_path)?;
    if from == to {
        return Err(usage(format!("the archive is already at {}", to.display())));
    }
    let before = archive::verify(&from)?;
    match std::fs::read_dir(to) {
        Ok(mut d) => {
            if d.next().is_some() {
                return Err(MetadataError::refused(
                    ErrorCode::AlreadyExists,
                    format!("{} is not empty", to.display()),
                ));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(to).map_err(|e| MetadataError::io(to, e))?;
            if let Some(parent) = to.parent() {
                sync_dir(parent)?;
            }
        }
        Err(e) => return Err(MetadataError::io(to, e)),
    }
    let mut files = 0;
    let mut bytes = 0;
    let mut names: Vec<String> = Vec::new();
    for entry in std::fs::read_dir(&from).map_err(|e| MetadataError::io(&from, e))? {
        let entry = entry.map_err(|e| MetadataError::io(&from, e))?;
        if let Some(name) = entry.file_name().to_str() {
            let keep = name == HEAD_FILE
                || name == rb::POINTER_FILE
                || rj::parse_segment_file_name(name).is_some()
                || rb::parse_base_file_name(name).is_some();
            if keep {
                names.push(name.to_owned());
            }
        }
    }
    names.sort();
    for name in &names {
        let src = from.join(name);
        let dst = to.join(name);
        let mut r = File::open(&src).map_err(|e| MetadataError::io(&src, e))?;
        let mut w = File::create(&dst).map_err(|e| MetadataError::io(&dst, e))?;
        bytes += std::io::copy(&mut r, &mut w).map_err(|e| MetadataError::io(&dst, e))?;
        w.sync_all().map_err(|e| MetadataError::io(&dst, e))?;
        files += 1;
    }
    sync_dir(to)?;
    let after = archive::verify(to)?;
    if after.head != before.head {
        return Err(MetadataError::corrupt(format!(
            "{}: the copy reaches end {} where {} reaches {}",
            to.display(),
            after.head.end,
            from.display(),
            before.head.end
        )));
    }
    write_atomically(&archive::location_file(db_path), text.as_bytes())?;
    Ok(Relocated {
        from,
        to: to.to_owned(),
        files,
        bytes,
        head: after.head,
    })
}

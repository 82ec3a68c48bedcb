//! Offline snapshot-page reclamation (seed 004, "Offline snapshot-page
//! reclamation uses a temporary disk mark set, retaining both roots of every
//! historical branch snapshot").
//!
//! [`reclaim_snapshot_pages`] runs offline (the caller holds the data root's
//! exclusive lock and opened the repository with its archive):
//!
//! 1. Refuse, before anything is marked, an unrecovered streamed
//!    preparation (`meta/pending-submit` or `submit_stage` rows: run
//!    `recover-submissions`), an accepted commit `1..=head` without its root
//!    row, and an active branch whose origin root row is missing.
//! 2. Mark: both roots of every `snapshot_roots` row seed a temporary redb
//!    mark set (`<metadata>.reclaim-marks`, recreated each run, removed at
//!    the end). `snapshot_nodes` is read in descending id order; a marked
//!    page marks its children (whose ids are smaller, so one reverse pass
//!    reaches them); an unmarked page is unreachable and listed for the
//!    sweep. A child id not below its parent, or a marked page that does not
//!    exist, is refused before anything is swept.
//! 3. Sweep: the listed pages are deleted in journaled write transactions of
//!    [`SWEEP_BATCH`] pages, each published to the archive before the next,
//!    so the archive (and a rebuild from it) stays consistent. A run killed
//!    mid-sweep leaves only unreachable pages behind; the next run marks
//!    again and finishes.
//!
//! Only `snapshot_nodes` rows are deleted: accepted history, every
//! operation outcome and unresolved upload intents stay. Freed redb pages
//! become reusable; the file does not shrink.

use std::path::{Path, PathBuf};

use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition};
use scribe_format::snapshot::{decode_page, RootRow};
use scribe_format::{BranchId, ErrorCode};

use crate::error::{MetadataError, Result};
use crate::records::{keys, BranchRecord, CommitRecord};
use crate::repo::{read_repo_meta, Repository};
use crate::tables::{self, meta};

/// Pages deleted per journaled write transaction.
pub const SWEEP_BATCH: usize = 512;

const MARKS: TableDefinition<u64, ()> = TableDefinition::new("marks");
const DOOMED: TableDefinition<u64, ()> = TableDefinition::new("doomed");

/// What [`reclaim_snapshot_pages`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reclaimed {
    pub roots: u64,
    pub pages: u64,
    pub reachable: u64,
    pub removed: u64,
}

/// The temporary mark set of a repository database.
pub fn marks_path(db_path: &Path) -> PathBuf {
    db_path.with_extension("reclaim-marks")
}

fn refused(detail: String) -> MetadataError {
    MetadataError::refused(ErrorCode::Corrupt, detail)
}

/// Reclaim the unreachable snapshot pages of `repo` (offline). `step` is
/// called with `"marked"` after marking and `"batch"` after each committed
/// sweep batch (fault-injection tests stop there).
pub fn reclaim_snapshot_pages(repo: &Repository, step: &dyn Fn(&str)) -> Result<Reclaimed> {
    let db_path = repo.dir().join(crate::repo::METADATA_FILE);
    let marks_file = marks_path(&db_path);
    if marks_file.exists() {
        std::fs::remove_file(&marks_file).map_err(|e| MetadataError::io(&marks_file, e))?;
    }
    let result = run(repo, &db_path, &marks_file, step);
    let _ = std::fs::remove_file(&marks_file);
    result
}

fn run(
    repo: &Repository,
    db_path: &Path,
    marks_file: &Path,
    step: &dyn Fn(&str),
) -> Result<Reclaimed> {
    let mut out = Reclaimed::default();
    let marks_db = Database::create(marks_file)?;
    {
        let tx = repo.database().begin_read()?;
        // 1. Refusals before anything is marked.
        let m = tx.open_table(tables::META)?;
        if m.get(meta::PENDING_SUBMIT)?.is_some() || tx.open_table(tables::SUBMIT_STAGE)?.len()? > 0
        {
            return Err(MetadataError::refused(
                ErrorCode::Busy,
                format!(
                    "{}: a streamed preparation is unrecovered: run `scribe-server recover-submissions` first; nothing was swept",
                    db_path.display()
                ),
            ));
        }
        let head = read_repo_meta(&tx)?.head;
        let commits = tx.open_table(tables::COMMITS)?;
        let roots = tx.open_table(tables::SNAPSHOT_ROOTS)?;
        for change in 1..=head {
            let Some(row) = commits.get(change)? else {
                return Err(refused(format!(
                    "{}: accepted change {change} has no commit row; nothing was swept",
                    db_path.display()
                )));
            };
            let rec = CommitRecord::decode(row.value())?;
            if roots
                .get(keys::root(&rec.branch, change).as_slice())?
                .is_none()
            {
                return Err(refused(format!(
                    "{}: the root of accepted change {change} (branch {}) is missing; nothing was swept",
                    db_path.display(),
                    hex::encode(rec.branch.0)
                )));
            }
        }
        let branches = tx.open_table(tables::BRANCHES)?;
        for row in branches.range::<[u8; 16]>(..)? {
            let (k, v) = row?;
            let b = BranchRecord::decode(v.value())?;
            if b.state != 1 {
                continue;
            }
            let origin = match b.branched_from {
                Some(o) => o,
                None => (BranchId(k.value()), b.created_change),
            };
            if roots
                .get(keys::root(&origin.0, origin.1).as_slice())?
                .is_none()
            {
                return Err(refused(format!(
                    "{}: the origin root of active branch {:?} (branch {} at change {}) is missing; nothing was swept",
                    db_path.display(),
                    b.name,
                    hex::encode(origin.0 .0),
                    origin.1
                )));
            }
        }
        // 2. Mark: seed with both roots of every snapshot.
        let mut wtx = marks_db.begin_write()?;
        wtx.set_durability(redb::Durability::None)?;
        {
            let mut marks = wtx.open_table(MARKS)?;
            let mut doomed = wtx.open_table(DOOMED)?;
            for row in roots.range::<&[u8]>(..)? {
                let (k, v) = row?;
                let r = RootRow::decode(v.value()).map_err(|e| {
                    refused(format!(
                        "{}: root row {}: {e}; nothing was swept",
                        db_path.display(),
                        hex::encode(k.value())
                    ))
                })?;
                out.roots += 1;
                for link in [r.exact, r.collision] {
                    if !link.is_empty() {
                        marks.insert(link.node, ())?;
                    }
                }
            }
            // Reverse sweep: children have smaller ids than their parent.
            let nodes = tx.open_table(tables::SNAPSHOT_NODES)?;
            let mut marked_seen = 0u64;
            for row in nodes.range::<u64>(..)?.rev() {
                let (k, v) = row?;
                let id = k.value();
                out.pages += 1;
                if marks.get(id)?.is_none() {
                    doomed.insert(id, ())?;
                    continue;
                }
                marked_seen += 1;
                let node = decode_page(v.value()).map_err(|e| {
                    refused(format!(
                        "{}: reachable page {id}: {e}; nothing was swept",
                        db_path.display()
                    ))
                })?;
                for (_, child) in &node.children {
                    if child.node >= id {
                        return Err(refused(format!(
                            "{}: page {id} names child {} that is not below it; nothing was swept",
                            db_path.display(),
                            child.node
                        )));
                    }
                    marks.insert(child.node, ())?;
                }
            }
            let total = marks.len()?;
            if total != marked_seen {
                // A reachable page that does not exist: name the first.
                for row in marks.range::<u64>(..)? {
                    let id = row?.0.value();
                    if nodes.get(id)?.is_none() {
                        return Err(refused(format!(
                            "{}: reachable page {id} is missing; nothing was swept",
                            db_path.display()
                        )));
                    }
                }
            }
            out.reachable = marked_seen;
        }
        wtx.commit()?;
    }
    step("marked");
    // 3. Sweep, journaled, in batches published before the next.
    let rtx = marks_db.begin_read()?;
    let doomed = rtx.open_table(DOOMED)?;
    let mut batch: Vec<u64> = Vec::with_capacity(SWEEP_BATCH);
    let flush = |batch: &mut Vec<u64>, out: &mut Reclaimed| -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let tx = repo.write()?;
        {
            let mut nodes = tx.open_table(tables::SNAPSHOT_NODES)?;
            for id in batch.iter() {
                nodes.remove(id)?;
            }
        }
        tx.commit()?;
        out.removed += batch.len() as u64;
        batch.clear();
        step("batch");
        Ok(())
    };
    for row in doomed.range::<u64>(..)?.rev() {
        batch.push(row?.0.value());
        if batch.len() >= SWEEP_BATCH {
            flush(&mut batch, &mut out)?;
        }
    }
    flush(&mut batch, &mut out)?;
    Ok(out)
}

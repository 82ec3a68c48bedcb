//! The repository migration journal (seed 004, "Repository migration
//! journal"): revisions 1 (`workspace-state-v1`), 2 (`path-fold-v1`) and 3
//! (`change-notes-v1`) applied offline, batch by batch, each batch's data
//! and its cursor in one Immediate (journaled and archived) transaction,
//! so a migration killed anywhere resumes where its cursor says.
//!
//! `meta/migration-version` is the completed revision (absent: the
//! pre-framework revision 0, accepted only here); during a step
//! `meta/migration-active` is the next revision and `meta/migration-cursor`
//! its progress token (1..=8,218 bytes). Both are present together. Only
//! after the step verifies does another transaction advance the revision
//! and remove both.
//!
//! Cursors:
//!
//! | revision | cursor |
//! |---|---|
//! | 1 | `00` [last workspace id]: convert workspace records; `01` [last lock path]: build the lock index; `02`: verify |
//! | 2 | `04`: verify the path and snapshot profiles |
//! | 3 | `01`: `change_notes` created; verify and complete |

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use redb::{Database, ReadTransaction, ReadableDatabase, ReadableTable, TableError, TableHandle};
use scribe_format::bytes::Reader;

use crate::archive::Archive;
use crate::error::{MetadataError, Result};
use crate::journal;
use crate::records::{decode_u32, decode_u64, keys, LockRecord, WorkspaceRecord};
use crate::tables::{self, meta, ws_kind};

/// The current revision.
pub const CURRENT: u32 = tables::MIGRATION_VERSION;
/// Longest cursor.
pub const MAX_CURSOR: usize = 8_218;
/// Source rows prepared per batch.
pub const BATCH_ROWS: usize = 1_024;
/// The names of revisions 1..=3.
pub const STEPS: [&str; 3] = ["workspace-state-v1", "path-fold-v1", "change-notes-v1"];

/// Where a repository's migration stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspection {
    /// The completed revision (0 when `migration-version` is absent).
    pub revision: u32,
    /// A step in progress: its revision and cursor.
    pub active: Option<(u32, Vec<u8>)>,
}

impl Inspection {
    /// Nothing to do.
    pub fn is_current(&self) -> bool {
        self.revision == CURRENT && self.active.is_none()
    }

    /// The steps still to run, by revision and name.
    pub fn pending(&self) -> Vec<(u32, &'static str)> {
        (self.revision + 1..=CURRENT)
            .map(|r| (r, STEPS[r as usize - 1]))
            .collect()
    }
}

/// What [`apply`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    pub from: u32,
    pub to: u32,
    /// Pre-owner workspace records rewritten.
    pub workspaces_converted: u64,
    /// Lock index rows written.
    pub locks_indexed: u64,
    /// `workspace_state` adopted as it was.
    pub adopted_workspace_state: bool,
    /// Rows of an interrupted run's `change_notes` adopted.
    pub notes_adopted: u64,
    /// Immediate transactions committed.
    pub batches: u64,
}

/// The storage root's permanent auth claim of a workspace, if any.
pub type OwnerOf<'a> = dyn Fn(&[u8; 16]) -> Result<Option<[u8; 16]>> + 'a;

/// Tests: called after each committed batch with the step's name; an
/// error stops the migration there.
pub type MigrationHook = dyn Fn(&'static str) -> std::io::Result<()> + Send + Sync;

fn corrupt(path: &Path, what: impl std::fmt::Display) -> MetadataError {
    MetadataError::corrupt(format!("{}: {what}", path.display()))
}

/// Open a repository database for inspection or migration (offline; the
/// regular open refuses any revision but the current one).
pub fn open(db_path: &Path) -> Result<Arc<Database>> {
    Ok(Arc::new(Database::open(db_path)?))
}

fn table_exists(tx: &ReadTransaction, name: &str) -> Result<bool> {
    Ok(tx.list_tables()?.any(|t| t.name() == name))
}

/// Read the migration keys of `meta`, refusing a future revision, a lone
/// progress key, a malformed cursor or an active revision that is not the
/// next one.
pub fn inspect(db: &Database, path: &Path) -> Result<Inspection> {
    let tx = db.begin_read()?;
    let m = match tx.open_table(tables::META) {
        Ok(m) => m,
        Err(TableError::TableDoesNotExist(_)) => return Err(corrupt(path, "no meta table")),
        Err(e) => return Err(e.into()),
    };
    let get = |k: &str| -> Result<Option<Vec<u8>>> { Ok(m.get(k)?.map(|g| g.value().to_vec())) };
    let revision = match get(meta::MIGRATION_VERSION)? {
        None => 0,
        Some(b) => decode_u32(&b, "meta.migration-version").map_err(|e| corrupt(path, e))?,
    };
    if revision > CURRENT {
        return Err(MetadataError::VersionMismatch {
            path: path.to_owned(),
            what: "migration revision",
            found: revision.to_string(),
            expected: format!("at most {CURRENT}"),
        });
    }
    let active = match (get(meta::MIGRATION_ACTIVE)?, get(meta::MIGRATION_CURSOR)?) {
        (None, None) => None,
        (Some(a), Some(c)) => {
            let a = decode_u32(&a, "meta.migration-active").map_err(|e| corrupt(path, e))?;
            if a != revision + 1 || a > CURRENT {
                return Err(corrupt(
                    path,
                    format!("migration-active {a} after completed revision {revision}"),
                ));
            }
            if c.is_empty() || c.len() > MAX_CURSOR {
                return Err(corrupt(
                    path,
                    format!("migration-cursor of {} bytes (1..=8,218)", c.len()),
                ));
            }
            Some((a, c))
        }
        _ => {
            return Err(corrupt(
                path,
                "migration-active and migration-cursor must be present together",
            ))
        }
    };
    Ok(Inspection { revision, active })
}

/// The pre-owner workspace record: `u8 1 ‖ [16] branch ‖ u16 view count ‖
/// (str16 prefix)* ‖ u64 created ms ‖ str16 label`. Returns the bytes after
/// the version byte, checked.
fn check_pre_owner(b: &[u8]) -> std::result::Result<&[u8], scribe_format::FormatError> {
    let mut r = Reader::new(b);
    if r.u8("pre-owner workspace record.version")? != 1 {
        return Err(scribe_format::FormatError::UnsupportedVersion {
            what: "pre-owner workspace record",
            version: b[0].into(),
        });
    }
    r.take(16, "pre-owner workspace record.branch")?;
    let n = r.u16("pre-owner workspace record.view count")?;
    if usize::from(n) > scribe_format::limits::MAX_VIEW_PREFIXES {
        return Err(scribe_format::FormatError::LimitExceeded {
            what: "pre-owner workspace record.view count",
            limit: scribe_format::limits::MAX_VIEW_PREFIXES as u64,
            actual: n.into(),
        });
    }
    for _ in 0..n {
        r.str16(
            "pre-owner workspace record.view prefix",
            scribe_format::limits::MAX_PATH_BYTES,
        )?;
    }
    r.u64("pre-owner workspace record.created ms")?;
    r.str16(
        "pre-owner workspace record.label",
        crate::records::MAX_LABEL_BYTES,
    )?;
    r.finish("pre-owner workspace record")?;
    Ok(&b[1..])
}

/// Version 1 of the current layout: the owner-present byte (and owner)
/// inserted after the version byte.
fn convert(rest: &[u8], owner: Option<[u8; 16]>) -> Vec<u8> {
    let mut out = Vec::with_capacity(rest.len() + 18);
    out.push(1);
    match owner {
        None => out.push(0),
        Some(o) => {
            out.push(1);
            out.extend_from_slice(&o);
        }
    }
    out.extend_from_slice(rest);
    out
}

/// Apply every pending step of the repository database at `path` (opened
/// offline with its archive). `owner_of` supplies the storage root's
/// permanent auth claim of a workspace, if any. Resumes an interrupted
/// step from its cursor.
pub fn apply(
    db: &Arc<Database>,
    archive: &Arc<Archive>,
    path: &Path,
    owner_of: &OwnerOf<'_>,
    hook: Option<&MigrationHook>,
) -> Result<Applied> {
    let first = inspect(db, path)?;
    let mut out = Applied {
        from: first.revision,
        to: first.revision,
        ..Applied::default()
    };
    let step = |what: &'static str| -> Result<()> {
        match hook {
            Some(h) => h(what).map_err(|e| MetadataError::io(path, e)),
            None => Ok(()),
        }
    };
    loop {
        let ins = inspect(db, path)?;
        if ins.is_current() {
            out.to = ins.revision;
            return Ok(out);
        }
        let (next, cursor) = match ins.active {
            Some(a) => a,
            None => {
                let next = ins.revision + 1;
                let cursor = begin_step(db, archive, next)?;
                out.batches += 1;
                step(STEPS[next as usize - 1])?;
                (next, cursor)
            }
        };
        let done = match (next, cursor.first().copied()) {
            (1, Some(0)) => {
                let n = convert_workspaces(db, archive, path, &cursor[1..], owner_of)?;
                out.workspaces_converted += n;
                false
            }
            (1, Some(1)) => {
                out.locks_indexed += index_locks(db, archive, &cursor[1..])?;
                false
            }
            (1, Some(2)) if cursor.len() == 1 => {
                verify_workspace_state(db, path)?;
                if ins.revision == 0 && out.workspaces_converted == 0 && out.locks_indexed == 0 {
                    out.adopted_workspace_state = true;
                }
                true
            }
            (2, Some(4)) if cursor.len() == 1 => {
                verify_profiles(db, path)?;
                true
            }
            (3, Some(1)) if cursor.len() == 1 => {
                out.notes_adopted += verify_notes(db, path)?;
                true
            }
            _ => {
                return Err(corrupt(
                    path,
                    format!(
                        "migration-cursor {} is not a cursor of revision {next}",
                        hex::encode(&cursor)
                    ),
                ))
            }
        };
        if done {
            complete_step(db, archive, next)?;
        }
        out.batches += 1;
        step(STEPS[next as usize - 1])?;
    }
}

fn set_progress(tx: &journal::WriteTx, active: u32, cursor: &[u8]) -> Result<()> {
    let mut m = tx.open_table(tables::META)?;
    m.insert(meta::MIGRATION_ACTIVE, active.to_le_bytes().as_slice())?;
    m.insert(meta::MIGRATION_CURSOR, cursor)?;
    Ok(())
}

/// Start revision `next`: its first cursor (and, for revision 3, the empty
/// `change_notes` table) in one transaction.
fn begin_step(db: &Arc<Database>, archive: &Arc<Archive>, next: u32) -> Result<Vec<u8>> {
    let cursor = match next {
        1 => {
            // Existing lifecycle state is adopted and verified.
            let rtx = db.begin_read()?;
            if table_exists(&rtx, "workspace_state")? {
                vec![2]
            } else {
                vec![0]
            }
        }
        2 => vec![4],
        _ => vec![1],
    };
    let tx = journal::begin_archived(db, archive)?;
    if next == 1 && cursor == [0] {
        tx.open_table(tables::WORKSPACE_STATE)?;
    }
    if next == 3 {
        tx.open_table(tables::CHANGE_NOTES)?;
    }
    set_progress(&tx, next, &cursor)?;
    tx.commit()?;
    Ok(cursor)
}

fn complete_step(db: &Arc<Database>, archive: &Arc<Archive>, revision: u32) -> Result<()> {
    let tx = journal::begin_archived(db, archive)?;
    {
        let mut m = tx.open_table(tables::META)?;
        m.insert(meta::MIGRATION_VERSION, revision.to_le_bytes().as_slice())?;
        m.remove(meta::MIGRATION_ACTIVE)?;
        m.remove(meta::MIGRATION_CURSOR)?;
    }
    tx.commit()
}

/// One batch of revision 1's conversion: up to 1,024 records after `last`
/// are read and converted outside the write transaction, then written with
/// their owner index rows, owner counts and the new cursor together.
fn convert_workspaces(
    db: &Arc<Database>,
    archive: &Arc<Archive>,
    path: &Path,
    last: &[u8],
    owner_of: &OwnerOf<'_>,
) -> Result<u64> {
    let after: Option<[u8; 16]> = match last.len() {
        0 => None,
        16 => last.try_into().ok(),
        n => return Err(corrupt(path, format!("a workspace cursor of {n} bytes"))),
    };
    // (workspace, converted record, owner)
    type Converted = ([u8; 16], Vec<u8>, Option<[u8; 16]>);
    let mut batch: Vec<Converted> = Vec::new();
    {
        let rtx = db.begin_read()?;
        let ws = rtx.open_table(tables::WORKSPACES)?;
        let range = match after {
            Some(a) => {
                ws.range::<[u8; 16]>((std::ops::Bound::Excluded(a), std::ops::Bound::Unbounded))?
            }
            None => ws.range::<[u8; 16]>(..)?,
        };
        for row in range.take(BATCH_ROWS) {
            let (k, v) = row?;
            let id = k.value();
            let rest = check_pre_owner(v.value()).map_err(|e| {
                corrupt(
                    path,
                    format!("workspace {}: not a pre-owner record: {e}", hex::encode(id)),
                )
            })?;
            let owner = owner_of(&id)?;
            batch.push((id, convert(rest, owner), owner));
        }
    }
    let tx = journal::begin_archived(db, archive)?;
    let n = batch.len() as u64;
    {
        let mut ws = tx.open_table(tables::WORKSPACES)?;
        let mut st = tx.open_table(tables::WORKSPACE_STATE)?;
        let mut counts: BTreeMap<[u8; 16], u64> = BTreeMap::new();
        for (id, rec, owner) in &batch {
            ws.insert(*id, rec.as_slice())?;
            if let Some(o) = owner {
                st.insert(keys::ws_owner_index(o, id).as_slice(), [].as_slice())?;
                *counts.entry(*o).or_default() += 1;
            }
        }
        for (o, add) in counts {
            let key = keys::ws_owner_count(&o);
            let before = match st.get(key.as_slice())? {
                Some(g) => decode_u64(g.value(), "owner count")
                    .map_err(|e| MetadataError::corrupt(e.to_string()))?,
                None => 0,
            };
            st.insert(key.as_slice(), (before + add).to_le_bytes().as_slice())?;
        }
    }
    // A short batch was the last: the lock index comes next.
    let cursor = match batch.last() {
        Some((id, _, _)) if batch.len() == BATCH_ROWS => [&[0u8][..], id].concat(),
        _ => vec![1],
    };
    set_progress(&tx, 1, &cursor)?;
    tx.commit()?;
    Ok(n)
}

/// One batch of revision 1's lock index: up to 1,024 locks after `last`.
fn index_locks(db: &Arc<Database>, archive: &Arc<Archive>, last: &[u8]) -> Result<u64> {
    let after = std::str::from_utf8(last)
        .map_err(|_| MetadataError::corrupt("a lock cursor that is not UTF-8"))?
        .to_owned();
    let mut batch: Vec<(String, [u8; 16])> = Vec::new();
    {
        let rtx = db.begin_read()?;
        let locks = rtx.open_table(tables::LOCKS)?;
        let range = if after.is_empty() {
            locks.range::<&str>(..)?
        } else {
            locks.range::<&str>((
                std::ops::Bound::Excluded(after.as_str()),
                std::ops::Bound::Unbounded,
            ))?
        };
        for row in range.take(BATCH_ROWS) {
            let (k, v) = row?;
            let r = LockRecord::decode(v.value())
                .map_err(|e| MetadataError::corrupt(format!("lock {}: {e}", k.value())))?;
            batch.push((k.value().to_owned(), r.workspace.0));
        }
    }
    let tx = journal::begin_archived(db, archive)?;
    {
        let mut st = tx.open_table(tables::WORKSPACE_STATE)?;
        for (p, ws) in &batch {
            st.insert(keys::ws_lock_index(ws, p).as_slice(), [].as_slice())?;
        }
    }
    let cursor = match batch.last() {
        Some((p, _)) if batch.len() == BATCH_ROWS => [&[1u8][..], p.as_bytes()].concat(),
        _ => vec![2],
    };
    set_progress(&tx, 1, &cursor)?;
    tx.commit()?;
    Ok(batch.len() as u64)
}

/// Revision 1's verification: every workspace record decodes in the
/// current layout; owner index rows, owner counts and the lock index are
/// exactly what the records and locks imply.
fn verify_workspace_state(db: &Database, path: &Path) -> Result<()> {
    let tx = db.begin_read()?;
    let ws = tx.open_table(tables::WORKSPACES)?;
    let st = tx.open_table(tables::WORKSPACE_STATE)?;
    let locks = tx.open_table(tables::LOCKS)?;
    let mut want_index = BTreeSet::new();
    let mut want_counts: BTreeMap<[u8; 16], u64> = BTreeMap::new();
    for row in ws.range::<[u8; 16]>(..)? {
        let (k, v) = row?;
        let r = WorkspaceRecord::decode(v.value())
            .map_err(|e| corrupt(path, format!("workspace {}: {e}", hex::encode(k.value()))))?;
        if let Some(o) = r.owner {
            want_index.insert(keys::ws_owner_index(&o, &k.value()));
            *want_counts.entry(o).or_default() += 1;
        }
    }
    for row in locks.range::<&str>(..)? {
        let (k, v) = row?;
        let r = LockRecord::decode(v.value())
            .map_err(|e| corrupt(path, format!("lock {}: {e}", k.value())))?;
        want_index.insert(keys::ws_lock_index(&r.workspace.0, k.value()));
    }
    let mut have_index = BTreeSet::new();
    let mut have_counts: BTreeMap<[u8; 16], u64> = BTreeMap::new();
    for row in st.range::<&[u8]>(..)? {
        let (k, v) = row?;
        let k = k.value();
        match k.first() {
            Some(&ws_kind::OWNER_INDEX) | Some(&ws_kind::LOCK_INDEX) => {
                have_index.insert(k.to_vec());
            }
            Some(&ws_kind::OWNER_COUNT) if k.len() == 17 => {
                let mut o = [0u8; 16];
                o.copy_from_slice(&k[1..]);
                let n = decode_u64(v.value(), "owner count").map_err(|e| corrupt(path, e))?;
                if n != 0 {
                    have_counts.insert(o, n);
                }
            }
            _ => {}
        }
    }
    if have_index != want_index {
        let missing = want_index.difference(&have_index).count();
        let extra = have_index.difference(&want_index).count();
        return Err(corrupt(
            path,
            format!(
                "workspace_state: {missing} index row(s) missing and {extra} without a workspace or lock"
            ),
        ));
    }
    if have_counts != want_counts {
        return Err(corrupt(
            path,
            "workspace_state: active owner counts differ from the workspace records",
        ));
    }
    Ok(())
}

/// Revision 2: the Unicode path profile and shared snapshots are current;
/// this step never rebuilds them.
fn verify_profiles(db: &Database, path: &Path) -> Result<()> {
    let tx = db.begin_read()?;
    let m = tx.open_table(tables::META)?;
    let check = |key: &str, want: u32, what: &'static str| -> Result<()> {
        let found = m.get(key)?.map(|g| g.value().to_vec());
        match found {
            Some(b) if b == want.to_le_bytes() => Ok(()),
            other => Err(MetadataError::VersionMismatch {
                path: path.to_owned(),
                what,
                found: other.map_or("absent".into(), hex::encode),
                expected: hex::encode(want.to_le_bytes()),
            }),
        }
    };
    check(
        meta::PATH_FOLD_PROFILE,
        tables::PATH_FOLD_PROFILE,
        "path fold profile",
    )?;
    check(
        meta::SNAPSHOT_PROFILE,
        tables::SNAPSHOT_PROFILE,
        "snapshot profile",
    )
}

/// Revision 3: every row of `change_notes` decodes, names an accepted
/// change and continues its change's revisions without a gap (a table left
/// by an interrupted run is adopted; descriptions cannot be rebuilt from
/// anything else, so a bad one refuses). Returns the rows adopted.
fn verify_notes(db: &Database, path: &Path) -> Result<u64> {
    let tx = db.begin_read()?;
    let notes = tx.open_table(tables::CHANGE_NOTES)?;
    let commits = tx.open_table(tables::COMMITS)?;
    let mut expect: Option<(u64, u32)> = None;
    let mut rows = 0;
    for row in notes.range::<&[u8]>(..)? {
        let (k, v) = row?;
        let (change, note) = crate::notes::decode_note(k.value(), v.value())
            .map_err(|e| corrupt(path, format!("change_notes: {e}")))?;
        let next = match expect {
            Some((c, r)) if c == change => r + 1,
            _ => 1,
        };
        if note.revision != next || commits.get(change)?.is_none() {
            return Err(corrupt(
                path,
                format!(
                    "change_notes: change {change} revision {} is not the next revision of an accepted change",
                    note.revision
                ),
            ));
        }
        expect = Some((change, note.revision));
        rows += 1;
    }
    Ok(rows)
}

/// The profile an `atomic-publication-v1` store declares.
pub const ATOMIC_PUBLICATION_V1: &str = "atomic-publication-v1";
/// v1's staged lock acquisitions: canonical path -> plain `LockRecord`.
const SUBMIT_LOCK_TRANSFERS: redb::TableDefinition<&str, &[u8]> =
    redb::TableDefinition::new("submit_lock_transfers");
/// v1's `meta` keys.
const TRANSFER_COUNT: &str = "transfer-count";
const TRANSFER_OWNER: &str = "transfer-owner";

/// Whether the descriptor in `dir` requires `atomic-publication-v1`.
pub fn requires_atomic_publication_v1(dir: &Path) -> Result<bool> {
    let d = crate::database_descriptor::read(dir)?;
    Ok(d.required_features().contains(&ATOMIC_PUBLICATION_V1))
}

/// `required-features` of the descriptor in `dir` with `atomic-publication-v1`
/// replaced by `-v2` (order kept), published atomically.
pub fn upgrade_descriptor_feature(dir: &Path) -> Result<()> {
    let mut d = crate::database_descriptor::read(dir)?;
    let features: Vec<String> = d
        .required_features()
        .iter()
        .map(|f| {
            if *f == ATOMIC_PUBLICATION_V1 {
                crate::database_descriptor::FEATURE_ATOMIC_PUBLICATION.to_owned()
            } else {
                (*f).to_owned()
            }
        })
        .collect();
    let mut seen = BTreeSet::new();
    let features: Vec<String> = features
        .into_iter()
        .filter(|f| seen.insert(f.clone()))
        .collect();
    d.set("required-features", &features.join(","))
        .map_err(MetadataError::Format)?;
    crate::database_descriptor::write(&d, dir)
}

/// Convert an `atomic-publication-v1` repository database to v2 in one
/// archived transaction: each staged acquisition of `submit_lock_transfers`
/// becomes a `submit_lock_updates` acquire record (`u8 1 ‖ u8 0 ‖ bytes16
/// LockRecord`), `transfer-count` / `transfer-owner` become
/// `lock-update-count` / `lock-update-owner` (with `lock-release-count` 0),
/// the v2 tables and `lock-epoch` exist, and the v1 table and keys are
/// gone. Returns the acquisitions converted; a database already converted
/// (a run killed before its descriptor was rewritten) converts nothing.
pub fn convert_atomic_publication(
    db: &Arc<Database>,
    archive: &Arc<Archive>,
    path: &Path,
) -> Result<u64> {
    let rows: Vec<(String, Vec<u8>)> = {
        let rtx = db.begin_read()?;
        if !table_exists(&rtx, "submit_lock_transfers")? {
            return Ok(0);
        }
        let t = rtx.open_table(SUBMIT_LOCK_TRANSFERS)?;
        let mut out = Vec::new();
        for row in t.range::<&str>(..)? {
            let (k, v) = row?;
            LockRecord::decode(v.value())
                .map_err(|e| corrupt(path, format!("submit_lock_transfers {}: {e}", k.value())))?;
            out.push((k.value().to_owned(), v.value().to_vec()));
        }
        out
    };
    let tx = journal::begin_archived(db, archive)?;
    {
        let mut m = tx.open_table(tables::META)?;
        let count = match m.get(TRANSFER_COUNT)? {
            Some(g) => {
                decode_u64(g.value(), "meta.transfer-count").map_err(|e| corrupt(path, e))?
            }
            None => 0,
        };
        if count != rows.len() as u64 {
            return Err(corrupt(
                path,
                format!(
                    "transfer-count {count} but submit_lock_transfers holds {}",
                    rows.len()
                ),
            ));
        }
        let owner = m.get(TRANSFER_OWNER)?.map(|g| g.value().to_vec());
        if count > 0 && owner.as_ref().is_none_or(|o| o.len() != 16) {
            return Err(corrupt(path, "transfer-owner is missing or not 16 bytes"));
        }
        let mut updates = tx.open_table(tables::SUBMIT_LOCK_UPDATES)?;
        for (p, rec) in &rows {
            let mut v = Vec::with_capacity(4 + rec.len());
            v.extend_from_slice(&[1, 0]);
            v.extend_from_slice(&(rec.len() as u16).to_le_bytes());
            v.extend_from_slice(rec);
            updates.insert(p.as_bytes(), v.as_slice())?;
        }
        m.insert(meta::LOCK_UPDATE_COUNT, count.to_le_bytes().as_slice())?;
        m.insert(meta::LOCK_RELEASE_COUNT, 0u64.to_le_bytes().as_slice())?;
        if let Some(o) = owner.filter(|_| count > 0) {
            m.insert(meta::LOCK_UPDATE_OWNER, o.as_slice())?;
        }
        if m.get(meta::LOCK_EPOCH)?.is_none() {
            m.insert(meta::LOCK_EPOCH, 0u64.to_le_bytes().as_slice())?;
        }
        m.remove(TRANSFER_COUNT)?;
        m.remove(TRANSFER_OWNER)?;
    }
    tx.open_table(tables::SUBMIT_STAGE)?;
    tx.open_table(tables::UPLOAD_PINS)?;
    tx.delete_table(SUBMIT_LOCK_TRANSFERS)?;
    tx.commit()?;
    Ok(rows.len() as u64)
}

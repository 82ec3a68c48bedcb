//! `verify`: report damage without changing anything.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use redb::{ReadOnlyDatabase, ReadableDatabase, ReadableTable};
use scribe_format::envelope;
use scribe_format::ObjectId;

use crate::error::{db_err, io_err, Result};
use crate::layout;
use crate::locator::{Location, LOCATOR_TABLE};
use crate::pack::{self, ENTRY_HEADER_LEN, PACK_HEADER_LEN};
use crate::store::{max_payload, read_meta, ObjectStore};
use crate::store_descriptor;

/// One condition found by verification.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Problem {
    /// The open pack has bytes past its committed length (a torn tail;
    /// `open` truncates them).
    UncommittedTail {
        pack: u32,
        committed_len: u64,
        actual_len: u64,
    },
    /// A pack above the checkpoint pack (`open` removes it).
    UncommittedPack { pack: u32, path: PathBuf },
    /// A pack shorter than its committed length: corruption, open refuses.
    PackShorterThanCommitted {
        pack: u32,
        committed_len: u64,
        actual_len: u64,
    },
    /// A pack header is damaged or a pack is missing.
    BadPack { pack: u32, reason: String },
    /// An object's bytes are damaged or do not match its identity.
    CorruptObject {
        id: ObjectId,
        location: String,
        reason: String,
    },
    /// A locator row cannot be decoded.
    BadLocatorRow { key: String, reason: String },
    /// The locator cannot be opened read-only (for example it needs the
    /// repair that opening for mutation performs).
    LocatorUnreadable { reason: String },
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::UncommittedTail {
                pack,
                committed_len,
                actual_len,
            } => write!(
                f,
                "pack {pack}: {} bytes past its committed length {committed_len} (a torn \
                 tail; opening the store truncates it)",
                actual_len.saturating_sub(*committed_len)
            ),
            Problem::UncommittedPack { pack, path } => write!(
                f,
                "pack {pack} ({}) is above the checkpoint (opening the store removes it)",
                path.display()
            ),
            Problem::PackShorterThanCommitted {
                pack,
                committed_len,
                actual_len,
            } => write!(
                f,
                "pack {pack} is {actual_len} bytes, shorter than its committed length \
                 {committed_len}: damaged (`scribe-server rebuild-locator` indexes what it \
                 still holds)"
            ),
            Problem::BadPack { pack, reason } => write!(f, "pack {pack}: {reason}"),
            Problem::CorruptObject {
                id,
                location,
                reason,
            } => write!(f, "{id} at {location}: {reason}"),
            Problem::BadLocatorRow { key, reason } => write!(f, "locator row {key}: {reason}"),
            Problem::LocatorUnreadable { reason } => write!(
                f,
                "the locator cannot be read: {reason} (opening the store repairs it; \
                 `scribe-server rebuild-locator` rebuilds it)"
            ),
        }
    }
}

/// The result of verification.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// The locator was not closed cleanly (for example after kill -9): it
    /// was read through a repaired private copy; opening the store repairs it.
    pub locator_needed_repair: bool,
    pub objects_checked: u64,
    pub envelope_bytes_checked: u64,
    pub problems: Vec<Problem>,
}

impl VerifyReport {
    /// Whether nothing was found.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Read and verify one object directly from the layout.
pub(crate) fn check_object(
    dir: &Path,
    id: &ObjectId,
    loc: &Location,
    packs: &mut HashMap<u32, File>,
) -> std::result::Result<u64, String> {
    let env = match *loc {
        Location::Loose { envelope_len } => {
            let p = layout::loose_path(dir, id);
            let b = std::fs::read(&p).map_err(|e| format!("cannot read: {e}"))?;
            if b.len() as u64 != envelope_len {
                return Err(format!(
                    "loose file has {} bytes, locator says {envelope_len}",
                    b.len()
                ));
            }
            b
        }
        Location::Packed {
            pack: p,
            offset,
            entry_len,
        } => {
            let f = match packs.entry(p) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => {
                    let path = layout::pack_path(dir, p);
                    v.insert(File::open(&path).map_err(|e| format!("cannot open pack: {e}"))?)
                }
            };
            let len = usize::try_from(entry_len).map_err(|_| "entry too large".to_string())?;
            let mut b = vec![0u8; len];
            crate::platform::read_exact_at(f, &mut b, offset)
                .map_err(|e| format!("cannot read entry: {e}"))?;
            let mut head = [0u8; ENTRY_HEADER_LEN];
            head.copy_from_slice(&b[..ENTRY_HEADER_LEN]);
            let (key, env_len) = pack::parse_entry_header(&head)?;
            if key != id.to_bytes() {
                return Err("pack entry names a different object".into());
            }
            if env_len + ENTRY_HEADER_LEN as u64 != entry_len {
                return Err("pack entry length disagrees with the locator".into());
            }
            b.drain(..ENTRY_HEADER_LEN);
            b
        }
    };
    envelope::decode_verified(&env, id, max_payload(id.kind)).map_err(|e| e.to_string())?;
    Ok(env.len() as u64)
}

fn location_text(dir: &Path, id: &ObjectId, loc: &Location) -> String {
    match loc {
        Location::Loose { .. } => layout::loose_path(dir, id).display().to_string(),
        Location::Packed { pack, offset, .. } => {
            format!(
                "{} offset {offset}",
                layout::pack_path(dir, *pack).display()
            )
        }
    }
}

fn verify_txn(
    dir: &Path,
    db_path: &Path,
    txn: &redb::ReadTransaction,
    live_writer_pack: Option<u32>,
) -> Result<VerifyReport> {
    // In an open store, packs up to the writer's current one are in use.
    let check_tail = live_writer_pack.is_none();
    let mut report = VerifyReport::default();
    let (open_pack, committed) = read_meta(db_path, txn)?;
    for (id, path) in layout::list_packs(dir)? {
        if id > open_pack {
            report
                .problems
                .push(Problem::UncommittedPack { pack: id, path });
            continue;
        }
        let mut header = [0u8; PACK_HEADER_LEN as usize];
        let f = match File::open(&path) {
            Ok(f) => f,
            Err(e) => {
                report.problems.push(Problem::BadPack {
                    pack: id,
                    reason: e.to_string(),
                });
                continue;
            }
        };
        if let Err(e) = crate::platform::read_exact_at(&f, &mut header, 0) {
            report.problems.push(Problem::BadPack {
                pack: id,
                reason: format!("header: {e}"),
            });
            continue;
        }
        if let Err(reason) = pack::check_pack_header(&header, id) {
            report.problems.push(Problem::BadPack { pack: id, reason });
        }
        if id == open_pack {
            let actual = f.metadata().map_err(io_err(&path))?.len();
            if actual < committed {
                report.problems.push(Problem::PackShorterThanCommitted {
                    pack: id,
                    committed_len: committed,
                    actual_len: actual,
                });
            } else if actual > committed && check_tail {
                report.problems.push(Problem::UncommittedTail {
                    pack: id,
                    committed_len: committed,
                    actual_len: actual,
                });
            }
        }
    }
    if !layout::pack_path(dir, open_pack).exists() {
        report.problems.push(Problem::BadPack {
            pack: open_pack,
            reason: "the open pack named by the locator is missing".into(),
        });
    }
    let table = txn.open_table(LOCATOR_TABLE).map_err(db_err(db_path))?;
    let mut packs = HashMap::new();
    for row in table.iter().map_err(db_err(db_path))? {
        let (k, v) = row.map_err(db_err(db_path))?;
        let id = match ObjectId::from_bytes(k.value()) {
            Ok(id) => id,
            Err(e) => {
                report.problems.push(Problem::BadLocatorRow {
                    key: hex::encode(k.value()),
                    reason: e.to_string(),
                });
                continue;
            }
        };
        let loc = match Location::decode(v.value()) {
            Ok(l) => l,
            Err(reason) => {
                report.problems.push(Problem::BadLocatorRow {
                    key: id.to_string(),
                    reason,
                });
                continue;
            }
        };
        if let Location::Packed {
            pack,
            offset,
            entry_len,
        } = loc
        {
            if pack > open_pack || (pack == open_pack && offset + entry_len > committed) {
                report.problems.push(Problem::CorruptObject {
                    id,
                    location: location_text(dir, &id, &loc),
                    reason: "located past the committed end of the packs".into(),
                });
                continue;
            }
        }
        report.objects_checked += 1;
        match check_object(dir, &id, &loc, &mut packs) {
            Ok(n) => report.envelope_bytes_checked += n,
            Err(reason) => report.problems.push(Problem::CorruptObject {
                id,
                location: location_text(dir, &id, &loc),
                reason,
            }),
        }
    }
    Ok(report)
}

/// Verify a closed store without changing anything: the pack conditions
/// that open-time recovery would repair or refuse, every locator row, and
/// every object's bytes against its identity.
pub fn verify_dir(dir: impl AsRef<Path>) -> Result<VerifyReport> {
    let dir = dir.as_ref();
    store_descriptor::read(&dir.join(layout::DESCRIPTOR))?;
    let db_path = dir.join(layout::LOCATOR);
    match ReadOnlyDatabase::open(&db_path) {
        Ok(db) => {
            let txn = db.begin_read().map_err(db_err(&db_path))?;
            verify_txn(dir, &db_path, &txn, None)
        }
        Err(redb::DatabaseError::DatabaseAlreadyOpen) => {
            Err(db_err(&db_path)(redb::DatabaseError::DatabaseAlreadyOpen))
        }
        Err(first) => {
            // After an unclean shutdown redb needs the repair that opening
            // for mutation performs. Repair a private copy instead, so the
            // store itself stays untouched.
            let unreadable = |reason: String| VerifyReport {
                problems: vec![Problem::LocatorUnreadable { reason }],
                ..VerifyReport::default()
            };
            let scratch = tempfile::tempdir().map_err(io_err(&db_path))?;
            let copy = scratch.path().join(layout::LOCATOR);
            std::fs::copy(&db_path, &copy).map_err(io_err(&db_path))?;
            let db = match redb::Database::open(&copy) {
                Ok(db) => db,
                Err(e) => return Ok(unreadable(format!("{first}; repairing a copy: {e}"))),
            };
            let txn = db.begin_read().map_err(db_err(&copy))?;
            let mut report = verify_txn(dir, &db_path, &txn, None)?;
            report.locator_needed_repair = true;
            Ok(report)
        }
    }
}

impl ObjectStore {
    /// Verify an open store: every locator row and every object's bytes.
    /// Appends are paused for the duration.
    pub fn verify(&self) -> Result<VerifyReport> {
        let w = self.lock_writer();
        let txn = self.db.begin_read().map_err(db_err(&self.db_path))?;
        verify_txn(&self.dir, &self.db_path, &txn, Some(w.id))
    }
}

impl ObjectStore {
    /// Drop the locator rows of those `ids` whose stored copy fails
    /// verification (`scribe-server verify --repair`, issue #14 item 12),
    /// in one Immediate transaction with appends paused. Each is read
    /// again first: an object that is absent or now verifies (a healing
    /// upload replaced it meanwhile) keeps its row. Afterwards the store
    /// reports the dropped objects missing (`contains`, `missing`), so the
    /// next upload of their bytes is accepted as new; the damaged bytes stay
    /// where they are, unreferenced, until compaction drops them (a rebuilt
    /// locator skips them too: it indexes only bytes that verify). Returns
    /// the dropped ids, in the order given.
    pub fn forget_damaged(&self, ids: &[ObjectId]) -> Result<Vec<ObjectId>> {
        let w = self.lock_writer();
        let p = &self.db_path;
        let mut gone = Vec::new();
        for id in ids {
            let Some(loc) = self.locate(id)? else {
                continue;
            };
            if gone.contains(id) {
                continue;
            }
            match self.get_at(id, &loc) {
                Ok(_) => {}
                Err(crate::StoreError::CorruptObject { .. }) => gone.push(*id),
                Err(e) => return Err(e),
            }
        }
        if gone.is_empty() {
            return Ok(gone);
        }
        let mut txn = self.db.begin_write().map_err(db_err(p))?;
        txn.set_durability(redb::Durability::Immediate)
            .map_err(db_err(p))?;
        {
            let mut table = txn.open_table(LOCATOR_TABLE).map_err(db_err(p))?;
            for id in &gone {
                table.remove(&id.to_bytes()).map_err(db_err(p))?;
            }
        }
        txn.commit().map_err(db_err(p))?;
        drop(w);
        Ok(gone)
    }
}

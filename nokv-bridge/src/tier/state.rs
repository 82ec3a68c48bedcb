//! The tier's local record (`tier.redb`): which revisions exist, where
//! every uploaded object lives, what each repository has uploaded, and the
//! references that keep revisions alive (seed 002 "Revision Ownership",
//! seed 003 "Manifest" and "References And Deletion").
//!
//! | table | key | value |
//! |---|---|---|
//! | `tier_meta` | `shard` | `u32 LE` logical shard of the block keys, fixed at creation |
//! | `tier_meta` | `journal-shard` | `u32 LE` where the recovery journals ship: the shard, or after `restore --from-tier` the restored root's own |
//! | `tier_revisions` | revision `[16]` | [`RevisionRow`] |
//! | `tier_pending` | root `[16]` ‖ change `u64 BE` (‖ `1` for the content revision) | revision `[16]` (content: ‖ `u64 LE` first block publication uploads, after the adopted staged ones): allocated before the first block upload, so a retry after a crash reuses it |
//! | `tier_staging`, `tier_staged` | see `stage.rs` | chunks uploaded before their operation was submitted |
//! | `tier_objects` | root `[16]` ‖ object id (33 bytes) | [`ObjectRow`]: the immutable manifest row |
//! | `tier_refs` | revision `[16]` ‖ referrer (`0 ‖ root ‖ change`: the commit; `1 ‖ child revision`: a sealed dependency; `2 ‖ root ‖ change ‖ path hash [16]`: a file revision) | empty |
//! | `tier_cursor` | root `[16]` | `u64 LE`: every change up to this one is in the bucket |
//! | `tier_candidates` | revision `[16]` | `u64 LE` epoch at which its strong count reached zero |
//! | `tier_purged` | root `[16]` ‖ change `u64 BE` ‖ path hash `[16]` | UTF-8 path: a file revision whose content was given up (`obliterate`) |
//! | `tier_recovery` | archive name (UTF-8) | `u64 LE` last shipped step ‖ `u64 LE` segment ‖ `u64 LE` offset it covered (`recovery.rs`) |
//! | `tier_quarantine` | revision `[16]` | UTF-8: why deleting its blocks was not certain; retried by the next collection |
//! | `tier_deleting_roots` | root `[16]` | UTF-8 repository name: a root whose deletion started and has not finished (`root_delete.rs`) |
//!
//! Every write is one Immediate transaction.

use std::path::Path;

use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use scribe_format::ObjectId;

use super::TierError;

pub(crate) const META: TableDefinition<&str, &[u8]> = TableDefinition::new("tier_meta");
pub(crate) const REVISIONS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("tier_revisions");
pub(crate) const PENDING: TableDefinition<&[u8], &[u8]> = TableDefinition::new("tier_pending");
pub(crate) const OBJECTS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("tier_objects");
pub(crate) const REFS: TableDefinition<&[u8], ()> = TableDefinition::new("tier_refs");
pub(crate) const CURSOR: TableDefinition<&[u8], u64> = TableDefinition::new("tier_cursor");
pub(crate) const CANDIDATES: TableDefinition<&[u8], u64> = TableDefinition::new("tier_candidates");
pub(crate) const QUARANTINE: TableDefinition<&[u8], &str> = TableDefinition::new("tier_quarantine");
pub(crate) const PURGED: TableDefinition<&[u8], &str> = TableDefinition::new("tier_purged");
pub(crate) const RECOVERY: TableDefinition<&str, &[u8]> = TableDefinition::new("tier_recovery");

/// A revision's lifecycle (seed 003): new references need `Available`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifecycle {
    Available,
    Deleting,
    Deleted,
}

/// `u8 1 ‖ [16] root ‖ u64 change ‖ u8 state ‖ u64 blocks ‖ u64 bytes ‖
/// u64 strong count ‖ u64 epoch` (integers little-endian).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RevisionRow {
    pub root: [u8; 16],
    pub change: u64,
    pub state: Lifecycle,
    pub blocks: u64,
    pub bytes: u64,
    pub strong: u64,
    pub epoch: u64,
}

const REVISION_ROW_LEN: usize = 1 + 16 + 8 + 1 + 8 * 4;

impl RevisionRow {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(REVISION_ROW_LEN);
        v.push(1);
        v.extend_from_slice(&self.root);
        v.extend_from_slice(&self.change.to_le_bytes());
        v.push(match self.state {
            Lifecycle::Available => 0,
            Lifecycle::Deleting => 1,
            Lifecycle::Deleted => 2,
        });
        for n in [self.blocks, self.bytes, self.strong, self.epoch] {
            v.extend_from_slice(&n.to_le_bytes());
        }
        v
    }

    pub fn decode(b: &[u8]) -> Option<RevisionRow> {
        if b.len() != REVISION_ROW_LEN || b[0] != 1 {
            return None;
        }
        let u = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        Some(RevisionRow {
            root: b[1..17].try_into().ok()?,
            change: u(17),
            state: match b[25] {
                0 => Lifecycle::Available,
                1 => Lifecycle::Deleting,
                2 => Lifecycle::Deleted,
                _ => return None,
            },
            blocks: u(26),
            bytes: u(34),
            strong: u(42),
            epoch: u(50),
        })
    }
}

/// Where an object's bytes are: `u8 1 ‖ [16] owner revision ‖ u64 block ‖
/// u64 offset ‖ u64 length` (little-endian). The object id is the digest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectRow {
    pub revision: [u8; 16],
    pub block: u64,
    pub offset: u64,
    pub len: u64,
}

const OBJECT_ROW_LEN: usize = 1 + 16 + 24;

impl ObjectRow {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(OBJECT_ROW_LEN);
        v.push(1);
        v.extend_from_slice(&self.revision);
        for n in [self.block, self.offset, self.len] {
            v.extend_from_slice(&n.to_le_bytes());
        }
        v
    }

    pub fn decode(b: &[u8]) -> Option<ObjectRow> {
        if b.len() != OBJECT_ROW_LEN || b[0] != 1 {
            return None;
        }
        let u = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        Some(ObjectRow {
            revision: b[1..17].try_into().ok()?,
            block: u(17),
            offset: u(25),
            len: u(33),
        })
    }
}

pub(crate) fn object_key(root: &[u8; 16], id: &ObjectId) -> Vec<u8> {
    let mut k = Vec::with_capacity(16 + 33);
    k.extend_from_slice(root);
    k.extend_from_slice(&id.to_bytes());
    k
}

pub(crate) fn pending_key(root: &[u8; 16], change: u64) -> Vec<u8> {
    let mut k = root.to_vec();
    k.extend_from_slice(&change.to_be_bytes());
    k
}

pub(crate) fn change_ref(revision: &[u8; 16], root: &[u8; 16], change: u64) -> Vec<u8> {
    let mut k = revision.to_vec();
    k.push(0);
    k.extend_from_slice(root);
    k.extend_from_slice(&change.to_be_bytes());
    k
}

/// The 16-byte hash of a path in reference and purge keys (BLAKE3, cut).
pub(crate) fn path_hash(path: &str) -> [u8; 16] {
    let h = blake3::hash(path.as_bytes());
    h.as_bytes()[..16].try_into().expect("16 bytes")
}

/// `root ‖ change ‖ path hash`: a file revision (the tail of its
/// references after the kind byte, and its `tier_purged` key).
pub(crate) fn file_version(root: &[u8; 16], change: u64, path: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(40);
    k.extend_from_slice(root);
    k.extend_from_slice(&change.to_be_bytes());
    k.extend_from_slice(&path_hash(path));
    k
}

pub(crate) fn path_ref(revision: &[u8; 16], root: &[u8; 16], change: u64, path: &str) -> Vec<u8> {
    let mut k = revision.to_vec();
    k.push(2);
    k.extend_from_slice(&file_version(root, change, path));
    k
}

/// `tier_pending` key of the content revision of `(root, change)`.
pub(crate) fn pending_content_key(root: &[u8; 16], change: u64) -> Vec<u8> {
    let mut k = pending_key(root, change);
    k.push(1);
    k
}

pub(crate) fn dependency_ref(owner: &[u8; 16], child: &[u8; 16]) -> Vec<u8> {
    let mut k = owner.to_vec();
    k.push(1);
    k.extend_from_slice(child);
    k
}

/// Open or create `tier.redb`; a new file gets `shard`, and
/// `journal_shard` (default: `shard`) when it has none yet. Returns the
/// stored (shard, journal shard).
pub(crate) fn open(
    path: &Path,
    shard: u32,
    journal_shard: Option<u32>,
) -> Result<(Database, u32, u32), TierError> {
    let db = Database::create(path).map_err(|e| TierError::state(path, e))?;
    let mut tx = db.begin_write().map_err(|e| TierError::state(path, e))?;
    tx.set_durability(Durability::Immediate)
        .map_err(|e| TierError::state(path, e))?;
    let (stored, journal) = {
        let mut meta = tx.open_table(META).map_err(|e| TierError::state(path, e))?;
        let mut get_or_set = |name: &str, value: u32| -> Result<u32, TierError> {
            let stored = match meta.get(name).map_err(|e| TierError::state(path, e))? {
                Some(v) => Some(
                    <[u8; 4]>::try_from(v.value())
                        .map(u32::from_le_bytes)
                        .map_err(|_| {
                            TierError::corrupt(path, format!("tier_meta/{name} is not 4 bytes"))
                        })?,
                ),
                None => None,
            };
            match stored {
                Some(s) => Ok(s),
                None => {
                    meta.insert(name, value.to_le_bytes().as_slice())
                        .map_err(|e| TierError::state(path, e))?;
                    Ok(value)
                }
            }
        };
        let s = get_or_set("shard", shard)?;
        let j = get_or_set("journal-shard", journal_shard.unwrap_or(s))?;
        (s, j)
    };
    for t in [
        REVISIONS,
        PENDING,
        OBJECTS,
        super::stage::STAGING,
        super::stage::STAGED,
    ] {
        tx.open_table(t).map_err(|e| TierError::state(path, e))?;
    }
    tx.open_table(REFS).map_err(|e| TierError::state(path, e))?;
    tx.open_table(CURSOR)
        .map_err(|e| TierError::state(path, e))?;
    tx.open_table(CANDIDATES)
        .map_err(|e| TierError::state(path, e))?;
    tx.open_table(QUARANTINE)
        .map_err(|e| TierError::state(path, e))?;
    tx.open_table(PURGED)
        .map_err(|e| TierError::state(path, e))?;
    tx.open_table(RECOVERY)
        .map_err(|e| TierError::state(path, e))?;
    tx.commit().map_err(|e| TierError::state(path, e))?;
    Ok((db, stored, journal))
}

/// Read helpers shared by the tier's operations.
pub(crate) fn cursor(db: &Database, path: &Path, root: &[u8; 16]) -> Result<u64, TierError> {
    let tx = db.begin_read().map_err(|e| TierError::state(path, e))?;
    let t = tx
        .open_table(CURSOR)
        .map_err(|e| TierError::state(path, e))?;
    Ok(t.get(root.as_slice())
        .map_err(|e| TierError::state(path, e))?
        .map(|v| v.value())
        .unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_and_refuse_other_lengths_and_versions() {
        let r = RevisionRow {
            root: [1; 16],
            change: 9,
            state: Lifecycle::Deleting,
            blocks: 3,
            bytes: 1 << 40,
            strong: 2,
            epoch: 7,
        };
        let b = r.encode();
        assert_eq!(RevisionRow::decode(&b), Some(r));
        assert_eq!(RevisionRow::decode(&b[..b.len() - 1]), None);
        let mut v2 = b.clone();
        v2[0] = 2;
        assert_eq!(RevisionRow::decode(&v2), None);
        let mut bad_state = b;
        bad_state[25] = 3;
        assert_eq!(RevisionRow::decode(&bad_state), None);

        let o = ObjectRow {
            revision: [4; 16],
            block: 1,
            offset: 2,
            len: 3,
        };
        let b = o.encode();
        assert_eq!(ObjectRow::decode(&b), Some(o));
        assert_eq!(ObjectRow::decode(&[b.as_slice(), &[0]].concat()), None);
    }
}

//! Uploading a change's chunks while its client is still uploading them
//! (issue #20, durable submit speed; `docs/nokv-bridge.md`, "Early
//! upload").
//!
//! The server hands every batch of chunks it stores for an operation to
//! [`Tier::prestage`] before that operation is submitted. They go into
//! blocks of the operation's **staged revision**: a fresh random id per
//! (root, operation), recorded with its next free block number before any
//! upload (so a key is never written twice with other bytes), its blocks
//! create-if-absent like any other. Each object uploaded this way gets a
//! staged row (revision, block, offset, length), written only after its
//! block is in the bucket and only while the staging entry still names
//! that revision.
//!
//! When the change is published, its content revision **adopts** the
//! staged revision holding most of its new chunks (one transaction: the
//! staging entry goes, the pending content row names the revision and its
//! first free block): staged chunks keep their rows, the rest are uploaded
//! as blocks after the staged ones, and publication goes on as before
//! (index record, one commit that removes the staged rows). Blocks staged
//! for objects the change does not name stay inside the revision (its
//! block count covers them) and go with it.
//!
//! A staging entry never adopted (an operation abandoned, or one that
//! staged after its change was published) is given up by
//! [`Tier::abandon_staged`] once older than a limit (at once after one of
//! its uploads failed: blocks of it may be in the bucket without rows): its rows go and the
//! revision becomes `Deleting` with every reserved block, which the same
//! call (and any `collect`) deletes, quarantining an uncertain delete.
//!
//! | table | key | value |
//! |---|---|---|
//! | `tier_staging` | root `[16]` ‖ operation `[16]` | revision `[16]` ‖ `u64 LE` next free block ‖ `u64 LE` unix seconds created |
//! | `tier_staged` | root `[16]` ‖ object id (33) ‖ revision `[16]` | `u64 LE` block ‖ offset ‖ length |

use std::collections::BTreeMap;

use bytes::Bytes;
use redb::{Durability, ReadableDatabase, ReadableTable, TableDefinition};
use scribe_format::ObjectId;

use super::key::BlockKey;
use super::provider::Put;
use super::state::{self, Lifecycle, ObjectRow, RevisionRow};
use super::tier::{ReadLocal, Tier};
use super::TierError;

pub(crate) const STAGING: TableDefinition<&[u8], &[u8]> = TableDefinition::new("tier_staging");
pub(crate) const STAGED: TableDefinition<&[u8], &[u8]> = TableDefinition::new("tier_staged");

/// What one [`Tier::prestage`] call uploaded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Prestaged {
    /// The operation's staged revision (when anything was uploaded).
    pub revision: Option<[u8; 16]>,
    pub objects: u64,
    pub blocks: u64,
    pub bytes: u64,
}

/// A staging entry: (revision, next free block, created).
fn decode_entry(v: &[u8]) -> Option<([u8; 16], u64, u64)> {
    if v.len() != 32 {
        return None;
    }
    Some((
        v[..16].try_into().ok()?,
        u64::from_le_bytes(v[16..24].try_into().ok()?),
        u64::from_le_bytes(v[24..32].try_into().ok()?),
    ))
}

fn encode_entry(rev: &[u8; 16], next: u64, created: u64) -> Vec<u8> {
    let mut v = rev.to_vec();
    v.extend_from_slice(&next.to_le_bytes());
    v.extend_from_slice(&created.to_le_bytes());
    v
}

fn staging_key(root: &[u8; 16], op: &[u8; 16]) -> Vec<u8> {
    let mut k = root.to_vec();
    k.extend_from_slice(op);
    k
}

fn staged_key(root: &[u8; 16], id: &ObjectId, rev: &[u8; 16]) -> Vec<u8> {
    let mut k = state::object_key(root, id);
    k.extend_from_slice(rev);
    k
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Tier {
    /// Upload `ids` of `root` (chunks stored for operation `op`, not yet
    /// submitted) into blocks of the operation's staged revision (module
    /// docs). Objects the tier already holds or has staged are skipped.
    pub fn prestage(
        &self,
        root: &[u8; 16],
        op: &[u8; 16],
        ids: &[ObjectId],
        read: &ReadLocal<'_>,
    ) -> Result<Prestaged, TierError> {
        let mut todo = Vec::new();
        let mut seen = std::collections::HashSet::new();
        {
            let tx = self.db.begin_read().map_err(self.st())?;
            let staged = tx.open_table(STAGED).map_err(self.st())?;
            for id in ids {
                if self.holds(root, id)? {
                    continue;
                }
                let prefix = state::object_key(root, id);
                let mut range = staged.range(prefix.as_slice()..).map_err(self.st())?;
                let already = match range.next() {
                    Some(r) => r.map_err(self.st())?.0.value().starts_with(&prefix),
                    None => false,
                };
                if !already && seen.insert(*id) {
                    todo.push(*id);
                }
            }
        }
        if todo.is_empty() {
            return Ok(Prestaged::default());
        }
        // Cut into blocks (numbered from 0 here; moved past the reserved
        // base below). A stage is bounded (the server's stage), so its
        // blocks are held in memory.
        let (tx, rx) = std::sync::mpsc::channel::<(u64, Bytes)>();
        let (rows, n, bytes) = self.pack_into(&todo, read, 0, &|index, b| {
            tx.send((index, b))
                .map_err(|_| TierError::state(&self.path, "the block queue closed"))
        })?;
        drop(tx);
        let blocks: Vec<(u64, Bytes)> = rx.into_iter().collect();
        // Reserve the block numbers (Immediate, before any upload).
        let (rev, base) = {
            let mut wtx = self.db.begin_write().map_err(self.st())?;
            wtx.set_durability(Durability::Immediate)
                .map_err(self.st())?;
            let r = {
                let mut t = wtx.open_table(STAGING).map_err(self.st())?;
                let k = staging_key(root, op);
                let entry = match t.get(k.as_slice()).map_err(self.st())? {
                    Some(v) => Some(
                        decode_entry(v.value())
                            .ok_or_else(|| TierError::corrupt(&self.path, "staging entry"))?,
                    ),
                    None => None,
                };
                let (rev, next, created) = match entry {
                    Some(e) => e,
                    None => {
                        let mut id = [0u8; 16];
                        getrandom::fill(&mut id).map_err(|e| {
                            TierError::state(&self.path, format!("no random source: {e}"))
                        })?;
                        (id, 0, now_secs())
                    }
                };
                t.insert(
                    k.as_slice(),
                    encode_entry(&rev, next + n, created).as_slice(),
                )
                .map_err(self.st())?;
                (rev, next)
            };
            wtx.commit().map_err(self.st())?;
            r
        };
        // Upload, several blocks at once.
        let queue = std::sync::Mutex::new(blocks.into_iter());
        let shard = self.shard;
        let provider = &self.provider;
        let results: Vec<Result<(), TierError>> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..self.options().in_flight.max(1))
                .map(|_| {
                    s.spawn(|| -> Result<(), TierError> {
                        loop {
                            let next = queue.lock().ok().and_then(|mut q| q.next());
                            let Some((index, block)) = next else {
                                return Ok(());
                            };
                            let key = BlockKey::new(shard, *root, rev, base + index).to_key();
                            match provider.put_if_absent(&key, block)? {
                                Put::Created | Put::AlreadyPresent => {}
                            }
                        }
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| {
                    w.join().unwrap_or_else(|_| {
                        Err(TierError::state(&self.path, "an upload thread panicked"))
                    })
                })
                .collect()
        });
        if let Some(e) = results.into_iter().find_map(|r| r.err()) {
            // Some blocks of this batch may be in the bucket without rows:
            // the entry is given up at the next `abandon_staged` (its
            // creation time set to 0), not left for a day. Publication
            // uploads what is not staged.
            self.expire_staging(root, op, &rev)?;
            return Err(e);
        }
        // The rows, only while the entry still names this revision (an
        // adopted or abandoned revision takes no new rows).
        let mut wtx = self.db.begin_write().map_err(self.st())?;
        wtx.set_durability(Durability::Immediate)
            .map_err(self.st())?;
        let written = {
            let t = wtx.open_table(STAGING).map_err(self.st())?;
            let current = t
                .get(staging_key(root, op).as_slice())
                .map_err(self.st())?
                .and_then(|v| decode_entry(v.value()))
                .map(|e| e.0);
            drop(t);
            if current == Some(rev) {
                let mut staged = wtx.open_table(STAGED).map_err(self.st())?;
                for (id, row) in &rows {
                    let mut v = Vec::with_capacity(24);
                    for x in [base + row.block, row.offset, row.len] {
                        v.extend_from_slice(&x.to_le_bytes());
                    }
                    staged
                        .insert(staged_key(root, id, &rev).as_slice(), v.as_slice())
                        .map_err(self.st())?;
                }
                true
            } else {
                false
            }
        };
        wtx.commit().map_err(self.st())?;
        Ok(Prestaged {
            revision: Some(rev),
            objects: if written { rows.len() as u64 } else { 0 },
            blocks: n,
            bytes,
        })
    }

    /// Mark the staging entry of `(root, op)`, if it still names `rev`, as
    /// due for abandonment.
    fn expire_staging(
        &self,
        root: &[u8; 16],
        op: &[u8; 16],
        rev: &[u8; 16],
    ) -> Result<(), TierError> {
        let mut wtx = self.db.begin_write().map_err(self.st())?;
        wtx.set_durability(Durability::Immediate)
            .map_err(self.st())?;
        {
            let mut t = wtx.open_table(STAGING).map_err(self.st())?;
            let k = staging_key(root, op);
            let entry = t
                .get(k.as_slice())
                .map_err(self.st())?
                .and_then(|v| decode_entry(v.value()));
            if let Some((r, next, _)) = entry {
                if r == *rev {
                    t.insert(k.as_slice(), encode_entry(&r, next, 0).as_slice())
                        .map_err(self.st())?;
                }
            }
        }
        wtx.commit().map_err(self.st())?;
        Ok(())
    }

    /// Staged rows of `root` for `ids`: per object, every (revision, row).
    pub(crate) fn staged_rows(
        &self,
        root: &[u8; 16],
        ids: &[ObjectId],
    ) -> Result<BTreeMap<[u8; 16], Rows>, TierError> {
        let tx = self.db.begin_read().map_err(self.st())?;
        let staged = tx.open_table(STAGED).map_err(self.st())?;
        let mut out: BTreeMap<[u8; 16], Vec<(ObjectId, ObjectRow)>> = BTreeMap::new();
        for id in ids {
            let prefix = state::object_key(root, id);
            for r in staged.range(prefix.as_slice()..).map_err(self.st())? {
                let (k, v) = r.map_err(self.st())?;
                let k = k.value();
                if !k.starts_with(&prefix) {
                    break;
                }
                let (Ok(rev), Some(row)) = (
                    <[u8; 16]>::try_from(&k[prefix.len()..]),
                    decode_row(v.value()),
                ) else {
                    return Err(TierError::corrupt(&self.path, "staged row"));
                };
                out.entry(rev).or_default().push((
                    *id,
                    ObjectRow {
                        revision: rev,
                        ..row
                    },
                ));
            }
        }
        Ok(out)
    }

    /// The content revision of `(root, change)`: the one recorded by an
    /// earlier try, else the staged revision (whose entry still stands)
    /// holding most of `fresh`, adopted, else a fresh id. Returns the
    /// revision, its first block for what is not staged, and the staged
    /// rows of `fresh` it already holds.
    pub(crate) fn adopt_or_allocate(
        &self,
        root: &[u8; 16],
        change: u64,
        fresh: &[ObjectId],
    ) -> Result<([u8; 16], u64, Rows), TierError> {
        let pk = state::pending_content_key(root, change);
        let mut by_rev = self.staged_rows(root, fresh)?;
        let mut wtx = self.db.begin_write().map_err(self.st())?;
        wtx.set_durability(Durability::Immediate)
            .map_err(self.st())?;
        let (rev, base) = {
            let mut pending = wtx.open_table(state::PENDING).map_err(self.st())?;
            let recorded = pending
                .get(pk.as_slice())
                .map_err(self.st())?
                .map(|v| v.value().to_vec());
            match recorded {
                Some(v) => decode_pending(&v)
                    .ok_or_else(|| TierError::corrupt(&self.path, "pending revision"))?,
                None => {
                    let mut staging = wtx.open_table(STAGING).map_err(self.st())?;
                    // Entries still standing, by revision.
                    let mut standing: BTreeMap<[u8; 16], (Vec<u8>, u64)> = BTreeMap::new();
                    for r in staging.iter().map_err(self.st())? {
                        let (k, v) = r.map_err(self.st())?;
                        if let Some((rev, next, _)) = decode_entry(v.value()) {
                            if k.value().starts_with(root) && by_rev.contains_key(&rev) {
                                standing.insert(rev, (k.value().to_vec(), next));
                            }
                        }
                    }
                    let best = standing
                        .iter()
                        .max_by_key(|(rev, _)| by_rev.get(*rev).map_or(0, |v| v.len()))
                        .map(|(rev, (k, next))| (*rev, k.clone(), *next));
                    let (rev, base) = match best {
                        Some((rev, k, next)) => {
                            staging.remove(k.as_slice()).map_err(self.st())?;
                            (rev, next)
                        }
                        None => {
                            let mut id = [0u8; 16];
                            getrandom::fill(&mut id).map_err(|e| {
                                TierError::state(&self.path, format!("no random source: {e}"))
                            })?;
                            (id, 0)
                        }
                    };
                    pending
                        .insert(pk.as_slice(), encode_pending(&rev, base).as_slice())
                        .map_err(self.st())?;
                    (rev, base)
                }
            }
        };
        wtx.commit().map_err(self.st())?;
        let rows = by_rev.remove(&rev).unwrap_or_default();
        Ok((rev, base, rows))
    }

    /// Remove every staged row of `rev` (in the publication's commit).
    pub(crate) fn remove_staged_rows(
        &self,
        staged: &mut redb::Table<&[u8], &[u8]>,
        rev: &[u8; 16],
    ) -> Result<(), TierError> {
        let mine: Vec<Vec<u8>> = staged
            .iter()
            .map_err(self.st())?
            .filter_map(|r| r.ok().map(|(k, _)| k.value().to_vec()))
            .filter(|k| k.len() == 16 + 33 + 16 && k[16 + 33..] == rev[..])
            .collect();
        for k in mine {
            staged.remove(k.as_slice()).map_err(self.st())?;
        }
        Ok(())
    }

    /// Staging entries not adopted: (root, operation, revision, reserved
    /// blocks, unix seconds created).
    #[allow(clippy::type_complexity)]
    pub fn staging(&self) -> Result<Vec<([u8; 16], [u8; 16], [u8; 16], u64, u64)>, TierError> {
        let tx = self.db.begin_read().map_err(self.st())?;
        let t = tx.open_table(STAGING).map_err(self.st())?;
        let mut out = Vec::new();
        for r in t.iter().map_err(self.st())? {
            let (k, v) = r.map_err(self.st())?;
            let k = k.value();
            let (Some((rev, next, created)), Ok(root), Ok(op)) = (
                decode_entry(v.value()),
                <[u8; 16]>::try_from(&k[..16.min(k.len())]),
                <[u8; 16]>::try_from(&k[16.min(k.len())..]),
            ) else {
                return Err(TierError::corrupt(&self.path, "staging entry"));
            };
            out.push((root, op, rev, next, created));
        }
        Ok(out)
    }

    /// Give up every staging entry created at least `older_than` seconds
    /// ago (module docs): its rows go and its revision becomes `Deleting`
    /// with every reserved block, then its blocks are deleted (an
    /// uncertain delete is quarantined and retried by the next call or
    /// collection). Returns how many entries were given up.
    pub fn abandon_staged(&self, older_than: u64) -> Result<u64, TierError> {
        let n = self.mark_staged_abandoned(older_than)?;
        let deleting = self
            .revisions()?
            .values()
            .any(|r| r.state == Lifecycle::Deleting && r.change == 0);
        if deleting {
            self.collect()?;
        }
        Ok(n)
    }

    /// The record-only half of [`Tier::abandon_staged`]: entries at least
    /// `older_than` seconds old lose their rows and their revisions become
    /// `Deleting` (one transaction, no request); the next
    /// `abandon_staged` or `collect` deletes their blocks. The server
    /// calls it with 0 when it starts, before it serves: an early upload
    /// cut by a crash may have left blocks without rows.
    pub fn mark_staged_abandoned(&self, older_than: u64) -> Result<u64, TierError> {
        let now = now_secs();
        self.mark_abandoned_where(|e| now.saturating_sub(e.4) >= older_than)
    }

    /// Give up the staging entry of operation `op` of `root` now, whatever
    /// its age (as [`Tier::abandon_staged`] does with old ones): for an
    /// operation whose outcome is recorded and whose change (if any) is
    /// published, nothing will adopt it. The caller makes sure no early
    /// upload of `op` is running or will start. Returns whether there was
    /// one.
    pub fn give_up_staging(&self, root: &[u8; 16], op: &[u8; 16]) -> Result<bool, TierError> {
        let n = self.mark_abandoned_where(|e| &e.0 == root && &e.1 == op)?;
        if n > 0 {
            self.collect()?;
        }
        Ok(n > 0)
    }

    #[allow(clippy::type_complexity)]
    pub(crate) fn mark_abandoned_where(
        &self,
        pick: impl Fn(&([u8; 16], [u8; 16], [u8; 16], u64, u64)) -> bool,
    ) -> Result<u64, TierError> {
        let old: Vec<_> = self.staging()?.into_iter().filter(|e| pick(e)).collect();
        if old.is_empty() {
            return Ok(0);
        }
        let mut wtx = self.db.begin_write().map_err(self.st())?;
        wtx.set_durability(Durability::Immediate)
            .map_err(self.st())?;
        {
            let mut staging = wtx.open_table(STAGING).map_err(self.st())?;
            let mut staged = wtx.open_table(STAGED).map_err(self.st())?;
            let mut revisions = wtx.open_table(state::REVISIONS).map_err(self.st())?;
            for (root, op, rev, next, _) in &old {
                staging
                    .remove(staging_key(root, op).as_slice())
                    .map_err(self.st())?;
                self.remove_staged_rows(&mut staged, rev)?;
                let row = RevisionRow {
                    root: *root,
                    change: 0,
                    state: Lifecycle::Deleting,
                    blocks: *next,
                    bytes: 0,
                    strong: 0,
                    epoch: 0,
                };
                revisions
                    .insert(rev.as_slice(), row.encode().as_slice())
                    .map_err(self.st())?;
            }
        }
        wtx.commit().map_err(self.st())?;
        Ok(old.len() as u64)
    }
}

/// Manifest rows of some objects.
type Rows = Vec<(ObjectId, ObjectRow)>;

fn decode_row(v: &[u8]) -> Option<ObjectRow> {
    if v.len() != 24 {
        return None;
    }
    let u = |at: usize| u64::from_le_bytes(v[at..at + 8].try_into().expect("8 bytes"));
    Some(ObjectRow {
        revision: [0; 16],
        block: u(0),
        offset: u(8),
        len: u(16),
    })
}

/// `tier_pending` content value: `[16]` revision, optionally `u64 LE` the
/// first block publication uploads (after the adopted staged blocks).
pub(crate) fn decode_pending(v: &[u8]) -> Option<([u8; 16], u64)> {
    match v.len() {
        16 => Some((v.try_into().ok()?, 0)),
        24 => Some((
            v[..16].try_into().ok()?,
            u64::from_le_bytes(v[16..].try_into().ok()?),
        )),
        _ => None,
    }
}

fn encode_pending(rev: &[u8; 16], base: u64) -> Vec<u8> {
    let mut v = rev.to_vec();
    v.extend_from_slice(&base.to_le_bytes());
    v
}

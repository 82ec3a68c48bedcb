//! Giving a whole root up (`scribe-server repo delete` on a tiered data
//! root; `docs/nokv-bridge.md`, "Deleting a repository").
//!
//! Blocks go only through the GC of `gc.rs` (seed 002 "Revision
//! Ownership", seed 003 "References And Deletion"): every reference the
//! root's referrers hold (its changes' commit references and its file
//! revisions' references) is dropped in one transaction, row, strong count
//! and epoch together, a count reaching zero writing a candidate at the
//! current epoch; [`Tier::collect`] then claims only `Available` revisions
//! at a zero count whose candidate epoch is current (`Available` ->
//! `Deleting` -> `Deleted`), quarantining an uncertain delete. Revisions
//! of another root can never depend on this root's: manifest rows and
//! owner lookups are per root (`tier_objects` is keyed by root ‖ object
//! id), so a block two repositories share in content is two blocks, one
//! per root, and the other root's stays.
//!
//! The steps, each idempotent, so a run killed anywhere is finished by
//! the next:
//!
//! 1. [`Tier::mark_root_deleted`] (before the repository's local
//!    directory moves): `tier_deleting_roots` names the root;
//! 2. [`Tier::finish_root_deletion`]: the **deletion record**
//!    `nokv/index/{shard:08x}/{root:032x}/deleted` goes into the bucket
//!    (create-if-absent, before anything is deleted): a restore from the
//!    bucket leaves the repository out whatever its shipped catalog says
//!    ([`root_deleted_in_bucket`]);
//! 3. the root's staging entries (early uploads of operations never
//!    published) are given up (`Deleting` with their reserved blocks);
//! 4. the references go (above), and every `Available` revision of the
//!    root left at a zero count gets a candidate at its current epoch;
//! 5. collection until a pass claims and deletes nothing; a revision of
//!    the root still `Deleting` (quarantined) stops here: the next run
//!    retries it;
//! 6. the root's index and release records (every key below
//!    `nokv/index/{shard}/{root}/` but the deletion record) and its
//!    recovery journal and descriptor (below
//!    `nokv/recovery/{journal shard}/{root}/`, for this data root's
//!    journal shard and those of the data roots it was restored from,
//!    which the caller names), found by listing (their keys are in no
//!    record) and deleted in batches ([`Provider::delete_many`]); an
//!    uncertain delete stops here;
//! 7. one transaction removes the root's cursor, purged rows, recovery
//!    cursor and its `tier_deleting_roots` row.
//!
//! A publication of the root that has started (a `tier_pending` row) must
//! be finished before (the caller publishes it while the repository is
//! still there): its blocks are in the bucket under a revision the record
//! does not hold yet. Changes above the cursor that never started have
//! nothing in the bucket and are simply dropped.

use redb::{Durability, ReadableDatabase, ReadableTable, TableDefinition};

use super::gc::Collected;
use super::provider::{Deleted, Provider};
use super::state::{self, Lifecycle, RevisionRow};
use super::tier::Tier;
use super::TierError;

/// `tier_deleting_roots`: root `[16]` -> the repository's name (UTF-8):
/// a root whose deletion has started and not finished.
pub(crate) const DELETING_ROOTS: TableDefinition<&[u8], &str> =
    TableDefinition::new("tier_deleting_roots");

/// The key of a root's deletion record.
pub fn deletion_key(shard: u32, root: &[u8; 16]) -> String {
    format!("nokv/index/{shard:08x}/{}/deleted", hex::encode(root))
}

/// The bytes of a root's deletion record (fixed per root, so a retry
/// writes the same bytes).
fn deletion_record(root: &[u8; 16]) -> Vec<u8> {
    format!("scribe repository {} deleted\n", hex::encode(root)).into_bytes()
}

/// Whether the bucket holds the deletion record of `root` under block
/// shard `shard`: the repository was deleted (`restore --from-tier`
/// leaves it out).
pub fn root_deleted_in_bucket(
    provider: &dyn Provider,
    shard: u32,
    root: &[u8; 16],
) -> Result<bool, TierError> {
    Ok(provider.head(&deletion_key(shard, root))?.is_some())
}

/// What [`Tier::finish_root_deletion`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RootDeletion {
    /// References the root's referrers held, dropped by this run.
    pub released: u64,
    /// Staging entries of the root given up by this run.
    pub staged: u64,
    /// The collections of this run, summed.
    pub collected: Collected,
    /// Revisions of the root now `Deleted` (all runs).
    pub revisions_deleted: u64,
    /// Index, release and journal objects of the root deleted by this run.
    pub metadata_deleted: u64,
    /// Why the deletion is not finished (quarantined revisions, uncertain
    /// metadata deletes, revisions still referenced): run it again.
    pub unfinished: Vec<String>,
}

impl Tier {
    /// Step 1: record that `root` (repository `name`) is being deleted,
    /// before its local directory goes. Again is a no-op.
    pub fn mark_root_deleted(&self, root: &[u8; 16], name: &str) -> Result<(), TierError> {
        let mut tx = self.db.begin_write().map_err(self.st())?;
        tx.set_durability(Durability::Immediate)
            .map_err(self.st())?;
        tx.open_table(DELETING_ROOTS)
            .map_err(self.st())?
            .insert(root.as_slice(), name)
            .map_err(self.st())?;
        tx.commit().map_err(self.st())?;
        Ok(())
    }

    /// Roots whose deletion started and has not finished: (root, name).
    pub fn roots_being_deleted(&self) -> Result<Vec<([u8; 16], String)>, TierError> {
        let tx = self.db.begin_read().map_err(self.st())?;
        let t = match tx.open_table(DELETING_ROOTS) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(self.st()(e)),
        };
        let mut out = Vec::new();
        for row in t.iter().map_err(self.st())? {
            let (k, v) = row.map_err(self.st())?;
            let root = <[u8; 16]>::try_from(k.value()).map_err(|_| {
                TierError::corrupt(&self.path, "a tier_deleting_roots key is not 16 bytes")
            })?;
            out.push((root, v.value().to_string()));
        }
        Ok(out)
    }

    /// The change of `root` whose publication has started and not
    /// finished (a `tier_pending` row), if any.
    pub fn publication_started(&self, root: &[u8; 16]) -> Result<Option<u64>, TierError> {
        let tx = self.db.begin_read().map_err(self.st())?;
        let t = tx.open_table(state::PENDING).map_err(self.st())?;
        let mut start = root.to_vec();
        start.extend_from_slice(&0u64.to_be_bytes());
        let Some(row) = t.range(start.as_slice()..).map_err(self.st())?.next() else {
            return Ok(None);
        };
        let (k, _) = row.map_err(self.st())?;
        let k = k.value();
        if k.len() < 24 || k[..16] != root[..] {
            return Ok(None);
        }
        Ok(Some(u64::from_be_bytes(
            k[16..24].try_into().expect("8 bytes: checked above"),
        )))
    }

    /// Steps 2-7 (module docs). `root` must have been marked
    /// ([`Tier::mark_root_deleted`]) and have no started publication.
    /// `earlier_journal_shards`: the journal shards of the data roots this
    /// one was restored from (the root's journals shipped there before
    /// the restores go too). When `unfinished` is not empty, the root
    /// stays marked and a later call goes on.
    pub fn finish_root_deletion(
        &self,
        root: &[u8; 16],
        earlier_journal_shards: &[u32],
    ) -> Result<RootDeletion, TierError> {
        let rh = hex::encode(root);
        if !self.roots_being_deleted()?.iter().any(|(r, _)| r == root) {
            return Err(TierError::state(
                &self.path,
                format!("root {rh} is not being deleted (mark_root_deleted first)"),
            ));
        }
        if let Some(change) = self.publication_started(root)? {
            return Err(TierError::state(
                &self.path,
                format!(
                    "the publication of change {change} of root {rh} has started and not \
                     finished: its blocks may be in the bucket under a revision the record does \
                     not hold yet; publish it before the root is deleted"
                ),
            ));
        }
        let mut out = RootDeletion::default();
        // 2. The deletion record, before anything is deleted.
        self.provider.put_if_absent(
            &deletion_key(self.shard, root),
            bytes::Bytes::from(deletion_record(root)),
        )?;
        // 3. Early uploads never adopted.
        out.staged = self.give_up_root_staging(root)?;
        // 4. Every reference the root's referrers hold.
        out.released = self.release_root(root)?;
        // 5. Collection until nothing more is claimed or deleted (a
        // revision deleted releases its dependencies: a next pass claims
        // their owners).
        loop {
            let c = self.collect()?;
            let progress = c.claimed + c.deleted;
            out.collected.claimed += c.claimed;
            out.collected.stale += c.stale;
            out.collected.deleted += c.deleted;
            out.collected.blocks_deleted += c.blocks_deleted;
            out.collected.quarantined = c.quarantined;
            if progress == 0 {
                break;
            }
        }
        let quarantine: std::collections::BTreeMap<String, String> =
            self.quarantined()?.into_iter().collect();
        for (id, r) in self.revisions()? {
            if r.root != *root {
                continue;
            }
            let id = hex::encode(id);
            match r.state {
                Lifecycle::Deleted => out.revisions_deleted += 1,
                Lifecycle::Deleting => out.unfinished.push(format!(
                    "revision {id} is quarantined (Deleting): {}",
                    quarantine
                        .get(&id)
                        .map(String::as_str)
                        .unwrap_or("its blocks are being deleted")
                )),
                Lifecycle::Available => out.unfinished.push(format!(
                    "revision {id} is still referenced ({} references)",
                    r.strong
                )),
            }
        }
        if !out.unfinished.is_empty() {
            return Ok(out);
        }
        // 6. The root's index records and recovery journals (its own
        // shard's and those of the roots this one was restored from), in
        // batched deletes.
        let tombstone = deletion_key(self.shard, root);
        let mut keys = self
            .provider
            .list_keys(&format!("nokv/index/{:08x}/{rh}", self.shard))?;
        keys.retain(|k| *k != tombstone);
        let mut shards = vec![self.journal_shard];
        for s in earlier_journal_shards {
            if !shards.contains(s) {
                shards.push(*s);
            }
        }
        for s in shards {
            keys.extend(
                self.provider
                    .list_keys(&format!("nokv/recovery/{s:08x}/{rh}"))?,
            );
        }
        for (key, d) in keys.iter().zip(self.provider.delete_many(&keys)) {
            match d {
                Deleted::Gone => out.metadata_deleted += 1,
                Deleted::Ambiguous(e) => out.unfinished.push(format!("{key}: {e}")),
            }
        }
        if !out.unfinished.is_empty() {
            return Ok(out);
        }
        // 7. The root's local rows.
        self.forget_root(root)?;
        Ok(out)
    }

    fn give_up_root_staging(&self, root: &[u8; 16]) -> Result<u64, TierError> {
        self.mark_abandoned_where(|e| &e.0 == root)
    }

    /// Drop every reference held by a referrer of `root` (its changes'
    /// commit references, `0 ‖ root ‖ change`, and its file revisions',
    /// `2 ‖ root ‖ …`), and give every `Available` revision of `root` at a
    /// zero count a candidate at its current epoch; one transaction.
    fn release_root(&self, root: &[u8; 16]) -> Result<u64, TierError> {
        self.release_where(
            |k| k.len() >= 17 + 16 && (k[16] == 0 || k[16] == 2) && k[17..33] == root[..],
            |_, revisions, candidates| {
                let zero: Vec<([u8; 16], u64)> = revisions
                    .iter()
                    .map_err(self.st())?
                    .filter_map(|r| r.ok())
                    .filter_map(|(k, v)| {
                        let id = <[u8; 16]>::try_from(k.value()).ok()?;
                        let r = RevisionRow::decode(v.value())?;
                        (r.root == *root && r.state == Lifecycle::Available && r.strong == 0)
                            .then_some((id, r.epoch))
                    })
                    .collect();
                // At its current epoch (an older candidate would be stale).
                for (id, epoch) in zero {
                    candidates.insert(id.as_slice(), epoch).map_err(self.st())?;
                }
                Ok(())
            },
        )
    }

    /// Step 7: the root's cursor, purged rows, recovery cursor and
    /// deletion mark go, in one transaction.
    fn forget_root(&self, root: &[u8; 16]) -> Result<(), TierError> {
        let mut tx = self.db.begin_write().map_err(self.st())?;
        tx.set_durability(Durability::Immediate)
            .map_err(self.st())?;
        {
            tx.open_table(state::CURSOR)
                .map_err(self.st())?
                .remove(root.as_slice())
                .map_err(self.st())?;
            let mut purged = tx.open_table(state::PURGED).map_err(self.st())?;
            let keys: Vec<Vec<u8>> = purged
                .iter()
                .map_err(self.st())?
                .filter_map(|r| r.ok().map(|(k, _)| k.value().to_vec()))
                .filter(|k| k.len() >= 16 && k[..16] == root[..])
                .collect();
            for k in keys {
                purged.remove(k.as_slice()).map_err(self.st())?;
            }
            tx.open_table(state::RECOVERY)
                .map_err(self.st())?
                .remove(hex::encode(root).as_str())
                .map_err(self.st())?;
            tx.open_table(DELETING_ROOTS)
                .map_err(self.st())?
                .remove(root.as_slice())
                .map_err(self.st())?;
        }
        tx.commit().map_err(self.st())?;
        Ok(())
    }
}

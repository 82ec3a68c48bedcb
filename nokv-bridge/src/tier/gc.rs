//! Giving revisions up (seed 002 "Revision Ownership", seed 003
//! "References And Deletion"):
//!
//! * [`Tier::release_change`] removes the references a change holds (when
//!   history is given up). Each removal changes the reference row, the
//!   strong count and the epoch in one transaction; a count that reaches
//!   zero writes a candidate carrying that epoch.
//! * [`Tier::collect`] claims a candidate only if its revision is
//!   `Available`, its count is zero and the candidate's epoch is the
//!   revision's current epoch (a reference added since has moved the
//!   epoch: the candidate is stale and dropped). A claim moves the
//!   revision to `Deleting`; from then on it takes no new reference. Its
//!   blocks are deleted; a delete the store cannot confirm leaves the
//!   revision `Deleting` with a quarantine row naming why, and the next
//!   collection tries again (deletes are idempotent). When every block is
//!   gone, one transaction marks it `Deleted`, removes its manifest rows
//!   and releases the dependency references it held (which may make its
//!   owners candidates in turn); up to [`FINISH_BATCH`] revisions share
//!   that transaction and its one scan of the manifest rows and the
//!   references. Object listing is never consulted.

use redb::{Durability, ReadableDatabase, ReadableTable};

use super::index;
use super::key::BlockKey;
use super::provider::Deleted;
use super::state::{self, Lifecycle, ObjectRow, RevisionRow};
use super::tier::Tier;
use super::TierError;

/// Most revisions finished (`Deleting` -> `Deleted`) in one transaction.
const FINISH_BATCH: usize = 256;

/// What [`Tier::collect`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Collected {
    /// Revisions claimed (moved to `Deleting`) by this run.
    pub claimed: u64,
    /// Candidates dropped because a reference came back.
    pub stale: u64,
    /// Revisions whose blocks are all gone (now `Deleted`).
    pub deleted: u64,
    pub blocks_deleted: u64,
    /// Revisions left `Deleting` because a delete was ambiguous.
    pub quarantined: Vec<String>,
}

impl Tier {
    /// Remove every reference change `change` of `root` holds (its commit's,
    /// and its file revisions'). Returns how many were removed. Like
    /// [`Tier::release_files`], the release is recorded in the bucket
    /// first (a release record naming the change with an empty path), so
    /// a record rebuilt from the bucket gives the change up too. Not used
    /// by the server (Scribe never removes a change from its history);
    /// the GC's own primitive, kept true for a retention command.
    pub fn release_change(&self, root: &[u8; 16], change: u64) -> Result<u64, TierError> {
        self.release_files(root, &[(change, String::new())])
    }

    /// Give up file revisions `(change, path)` of `root` (`obliterate`):
    /// remove the references each holds and record it in `tier_purged`, in
    /// one transaction. The revisions owning their chunks become
    /// candidates when nothing else references them. Returns how many
    /// references were removed; giving a revision up twice removes
    /// nothing the second time.
    ///
    /// The release is recorded in the bucket first (a release record,
    /// `index.rs`), so a record rebuilt from the bucket gives the same
    /// file revisions up ([`Tier::restore_releases`]).
    pub fn release_files(
        &self,
        root: &[u8; 16],
        versions: &[(u64, String)],
    ) -> Result<u64, TierError> {
        if !versions.is_empty() {
            let exists = |n: u64| -> Result<bool, TierError> {
                Ok(self
                    .provider
                    .head(&index::release_key(self.shard, root, n))?
                    .is_some())
            };
            let next = index::last_dense(exists)? + 1;
            self.provider.put_if_absent(
                &index::release_key(self.shard, root, next),
                bytes::Bytes::from(index::encode_release(root, versions)),
            )?;
        }
        self.release_files_here(root, versions)
    }

    /// Apply every release record of `root` in the bucket to a record
    /// being rebuilt (after its changes: [`Tier::restore_change`]), then
    /// collect: the revisions given up end `Deleted` as they did (their
    /// blocks are already gone; deletes are idempotent). Returns how many
    /// records were applied. A damaged record is refused with its key.
    pub fn restore_releases(&self, root: &[u8; 16]) -> Result<u64, TierError> {
        let mut n = 0;
        loop {
            let key = index::release_key(self.shard, root, n + 1);
            let body = match self.provider.get(&key) {
                Ok(b) => b,
                Err(super::ProviderError::NotFound { .. }) => break,
                Err(e) => return Err(e.into()),
            };
            let versions =
                index::decode_release(root, &body).map_err(|detail| TierError::Damaged {
                    key: key.clone(),
                    offset: 0,
                    detail,
                })?;
            self.release_files_here(root, &versions)?;
            n += 1;
        }
        if n > 0 {
            self.collect()?;
        }
        Ok(n)
    }

    fn release_files_here(
        &self,
        root: &[u8; 16],
        versions: &[(u64, String)],
    ) -> Result<u64, TierError> {
        let wanted: std::collections::BTreeMap<Vec<u8>, &str> = versions
            .iter()
            .filter(|(_, p)| !p.is_empty())
            .map(|(c, p)| (state::file_version(root, *c, p), p.as_str()))
            .collect();
        // An empty path gives the whole change up: its commit's references
        // (`0 ‖ root ‖ change`) and every file revision's of that change.
        let whole: std::collections::BTreeSet<Vec<u8>> = versions
            .iter()
            .filter(|(_, p)| p.is_empty())
            .map(|(c, _)| {
                let mut k = root.to_vec();
                k.extend_from_slice(&c.to_be_bytes());
                k
            })
            .collect();
        let n = self.release_where(
            |k| {
                (k.len() == 17 + 40
                    && k[16] == 2
                    && (wanted.contains_key(&k[17..]) || whole.contains(&k[17..41])))
                    || (k.len() == 17 + 24 && k[16] == 0 && whole.contains(&k[17..]))
            },
            |tx, _, _| {
                let mut purged = tx.open_table(state::PURGED).map_err(self.st())?;
                for (k, path) in &wanted {
                    purged.insert(k.as_slice(), *path).map_err(self.st())?;
                }
                Ok(())
            },
        )?;
        Ok(n)
    }

    /// The file revisions of `root` given up so far: `(change, path)`.
    pub fn purged(&self, root: &[u8; 16]) -> Result<Vec<(u64, String)>, TierError> {
        let tx = self.db.begin_read().map_err(self.st())?;
        let t = tx.open_table(state::PURGED).map_err(self.st())?;
        let mut out = Vec::new();
        for row in t.iter().map_err(self.st())? {
            let (k, v) = row.map_err(self.st())?;
            let k = k.value();
            if k.len() != 40 {
                return Err(TierError::corrupt(
                    &self.path,
                    "a tier_purged key is not 40 bytes",
                ));
            }
            if k[..16] == root[..] {
                let change = u64::from_be_bytes(k[16..24].try_into().expect("8 bytes"));
                out.push((change, v.value().to_string()));
            }
        }
        Ok(out)
    }

    /// One Immediate transaction dropping every reference `referrer`
    /// accepts ([`Tier::drop_refs_where`]), with `also` writing what else
    /// the release records in it (given the transaction and the revision
    /// and candidate tables). Returns how many references were dropped.
    /// What `release_files` and a root's deletion go through.
    pub(crate) fn release_where(
        &self,
        referrer: impl Fn(&[u8]) -> bool,
        also: impl FnOnce(
            &redb::WriteTransaction,
            &mut redb::Table<&[u8], &[u8]>,
            &mut redb::Table<&[u8], u64>,
        ) -> Result<(), TierError>,
    ) -> Result<u64, TierError> {
        let mut tx = self.db.begin_write().map_err(self.st())?;
        tx.set_durability(Durability::Immediate)
            .map_err(self.st())?;
        let n = {
            let mut refs = tx.open_table(state::REFS).map_err(self.st())?;
            let mut revisions = tx.open_table(state::REVISIONS).map_err(self.st())?;
            let mut candidates = tx.open_table(state::CANDIDATES).map_err(self.st())?;
            let n = self.drop_refs_where(&mut refs, &mut revisions, &mut candidates, referrer)?;
            also(&tx, &mut revisions, &mut candidates)?;
            n
        };
        tx.commit().map_err(self.st())?;
        Ok(n)
    }

    /// Drop every reference whose key (`owner ‖ kind ‖ referrer`)
    /// `referrer` accepts, each as [`Tier::drop_ref`] does (row, count
    /// and epoch; a candidate at zero), in the caller's transaction, with
    /// one scan of `tier_refs`. Returns how many were dropped. What every
    /// release goes through: file revisions and changes given up, the
    /// dependencies of a revision deleted, a whole root deleted.
    pub(crate) fn drop_refs_where(
        &self,
        refs: &mut redb::Table<&[u8], ()>,
        revisions: &mut redb::Table<&[u8], &[u8]>,
        candidates: &mut redb::Table<&[u8], u64>,
        referrer: impl Fn(&[u8]) -> bool,
    ) -> Result<u64, TierError> {
        let keys: Vec<Vec<u8>> = refs
            .iter()
            .map_err(self.st())?
            .filter_map(|r| r.ok().map(|(k, _)| k.value().to_vec()))
            .filter(|k| k.len() > 17 && referrer(k))
            .collect();
        for k in &keys {
            let owner: [u8; 16] = k[..16].try_into().expect("16 bytes: longer than 17");
            self.drop_ref(refs, revisions, candidates, &owner, k)?;
        }
        Ok(keys.len() as u64)
    }

    pub(crate) fn drop_ref(
        &self,
        refs: &mut redb::Table<&[u8], ()>,
        revisions: &mut redb::Table<&[u8], &[u8]>,
        candidates: &mut redb::Table<&[u8], u64>,
        owner: &[u8; 16],
        key: &[u8],
    ) -> Result<(), TierError> {
        if refs.remove(key).map_err(self.st())?.is_none() {
            return Ok(());
        }
        let mut row = revisions
            .get(owner.as_slice())
            .map_err(self.st())?
            .and_then(|v| RevisionRow::decode(v.value()))
            .ok_or_else(|| {
                TierError::corrupt(&self.path, "a reference names a missing revision")
            })?;
        row.strong = row.strong.checked_sub(1).ok_or_else(|| {
            TierError::corrupt(
                &self.path,
                format!("revision {} counts below zero", hex::encode(owner)),
            )
        })?;
        row.epoch += 1;
        revisions
            .insert(owner.as_slice(), row.encode().as_slice())
            .map_err(self.st())?;
        if row.strong == 0 {
            candidates
                .insert(owner.as_slice(), row.epoch)
                .map_err(self.st())?;
        }
        Ok(())
    }

    /// Claim the current zero-count candidates and delete what is claimed
    /// (see the module docs).
    pub fn collect(&self) -> Result<Collected, TierError> {
        let mut out = Collected::default();
        // 1. Claims, one transaction.
        {
            let mut tx = self.db.begin_write().map_err(self.st())?;
            tx.set_durability(Durability::Immediate)
                .map_err(self.st())?;
            {
                let mut candidates = tx.open_table(state::CANDIDATES).map_err(self.st())?;
                let mut revisions = tx.open_table(state::REVISIONS).map_err(self.st())?;
                let all: Vec<([u8; 16], u64)> = candidates
                    .iter()
                    .map_err(self.st())?
                    .filter_map(|r| r.ok())
                    .filter_map(|(k, v)| Some((<[u8; 16]>::try_from(k.value()).ok()?, v.value())))
                    .collect();
                for (rev, epoch) in all {
                    candidates.remove(rev.as_slice()).map_err(self.st())?;
                    let row = revisions
                        .get(rev.as_slice())
                        .map_err(self.st())?
                        .and_then(|v| RevisionRow::decode(v.value()));
                    match row {
                        Some(mut r)
                            if r.state == Lifecycle::Available
                                && r.strong == 0
                                && r.epoch == epoch =>
                        {
                            r.state = Lifecycle::Deleting;
                            revisions
                                .insert(rev.as_slice(), r.encode().as_slice())
                                .map_err(self.st())?;
                            out.claimed += 1;
                        }
                        _ => out.stale += 1,
                    }
                }
            }
            tx.commit().map_err(self.st())?;
        }
        // 2. Every Deleting revision (new claims and earlier quarantines).
        let deleting: Vec<([u8; 16], RevisionRow)> = self
            .revisions()?
            .into_iter()
            .filter(|(_, r)| r.state == Lifecycle::Deleting)
            .collect();
        // Finished in batches: each finish scans the manifest rows and the
        // references once for the whole batch (one scan per revision made
        // giving up a long history quadratic).
        // The blocks of a whole batch go in as few delete requests as the
        // store allows (`Provider::delete_many`); a revision any of whose
        // deletes is ambiguous is quarantined (its other blocks may be
        // gone already: deletes are idempotent, the next collection
        // finishes it).
        for batch in deleting.chunks(FINISH_BATCH) {
            let mut gone = Vec::with_capacity(batch.len());
            let keys: Vec<String> = batch
                .iter()
                .flat_map(|(rev, row)| {
                    (0..row.blocks)
                        .map(move |b| BlockKey::new(self.shard, row.root, *rev, b).to_key())
                })
                .collect();
            let mut outcomes = self.provider.delete_many(&keys).into_iter();
            let mut keys = keys.iter();
            for (rev, row) in batch {
                let mut uncertain = None;
                for _ in 0..row.blocks {
                    let (Some(key), outcome) = (keys.next(), outcomes.next()) else {
                        break;
                    };
                    match outcome {
                        Some(Deleted::Gone) => out.blocks_deleted += 1,
                        Some(Deleted::Ambiguous(e)) => {
                            uncertain.get_or_insert_with(|| format!("{key}: {e}"));
                        }
                        // A provider that answered fewer outcomes than keys
                        // confirmed nothing for the rest.
                        None => {
                            uncertain.get_or_insert_with(|| {
                                format!("{key}: the store gave no outcome for this delete")
                            });
                        }
                    }
                }
                if let Some(why) = uncertain {
                    self.quarantine(rev, &why)?;
                    out.quarantined.push(hex::encode(rev));
                    continue;
                }
                gone.push(*rev);
            }
            self.finish_deleted(&gone)?;
            out.deleted += gone.len() as u64;
        }
        Ok(out)
    }

    fn quarantine(&self, rev: &[u8; 16], why: &str) -> Result<(), TierError> {
        let mut tx = self.db.begin_write().map_err(self.st())?;
        tx.set_durability(Durability::Immediate)
            .map_err(self.st())?;
        tx.open_table(state::QUARANTINE)
            .map_err(self.st())?
            .insert(rev.as_slice(), why)
            .map_err(self.st())?;
        tx.commit().map_err(self.st())?;
        Ok(())
    }

    /// `Deleting` -> `Deleted`: manifest rows go, held dependencies are
    /// released, the quarantine row (if any) is cleared.
    fn finish_deleted(&self, revs: &[[u8; 16]]) -> Result<(), TierError> {
        if revs.is_empty() {
            return Ok(());
        }
        let set: std::collections::HashSet<[u8; 16]> = revs.iter().copied().collect();
        let mut tx = self.db.begin_write().map_err(self.st())?;
        tx.set_durability(Durability::Immediate)
            .map_err(self.st())?;
        {
            let mut revisions = tx.open_table(state::REVISIONS).map_err(self.st())?;
            let mut objects = tx.open_table(state::OBJECTS).map_err(self.st())?;
            let mut refs = tx.open_table(state::REFS).map_err(self.st())?;
            let mut candidates = tx.open_table(state::CANDIDATES).map_err(self.st())?;
            let mut quarantine = tx.open_table(state::QUARANTINE).map_err(self.st())?;
            for rev in revs {
                let mut row = revisions
                    .get(rev.as_slice())
                    .map_err(self.st())?
                    .and_then(|v| RevisionRow::decode(v.value()))
                    .ok_or_else(|| TierError::corrupt(&self.path, "revision row"))?;
                row.state = Lifecycle::Deleted;
                row.epoch += 1;
                revisions
                    .insert(rev.as_slice(), row.encode().as_slice())
                    .map_err(self.st())?;
                quarantine.remove(rev.as_slice()).map_err(self.st())?;
            }
            let owned: Vec<Vec<u8>> = objects
                .iter()
                .map_err(self.st())?
                .filter_map(|r| r.ok())
                .filter(|(_, v)| {
                    ObjectRow::decode(v.value()).is_some_and(|o| set.contains(&o.revision))
                })
                .map(|(k, _)| k.value().to_vec())
                .collect();
            for k in owned {
                objects.remove(k.as_slice()).map_err(self.st())?;
            }
            // Dependency references these revisions held: owner ‖ 1 ‖ rev.
            self.drop_refs_where(&mut refs, &mut revisions, &mut candidates, |k| {
                k.len() == 33
                    && k[16] == 1
                    && <[u8; 16]>::try_from(&k[17..]).is_ok_and(|h| set.contains(&h))
            })?;
        }
        tx.commit().map_err(self.st())?;
        Ok(())
    }

    /// Revisions left `Deleting` with the reason their deletion was
    /// uncertain.
    pub fn quarantined(&self) -> Result<Vec<(String, String)>, TierError> {
        let tx = self.db.begin_read().map_err(self.st())?;
        let t = tx.open_table(state::QUARANTINE).map_err(self.st())?;
        let mut out = Vec::new();
        for row in t.iter().map_err(self.st())? {
            let (k, v) = row.map_err(self.st())?;
            out.push((hex::encode(k.value()), v.value().to_string()));
        }
        Ok(out)
    }
}

//! [`Tier`]: publishing a change's new objects as one artifact revision,
//! reading objects back from the bucket, and checking the bucket against
//! the record (`tier verify`).
//!
//! Publication of change `N` of root `R` (seed 003, "Publication"):
//!
//! 1. objects with a manifest row already (older revisions own them) are
//!    not uploaded: their owner revisions become sealed dependencies;
//! 2. a revision id is allocated and recorded under `tier_pending/(R, N)`
//!    before the first upload, so a retry after a crash reuses it and its
//!    keys (uploads are create-if-absent, so a block uploaded before the
//!    crash is `AlreadyPresent`);
//! 3. the new objects are packed in the order given (objects above
//!    [`TierOptions::own_block_bytes`] alone, the rest bundled up to
//!    [`TierOptions::block_bytes`]) and uploaded, several blocks in flight;
//!    a `Created` answer confirms the bytes (no `head` after it);
//!    `AlreadyPresent` was read back and compared by the provider;
//! 4. the publication's index record goes into the bucket (`index.rs`);
//! 5. one Immediate transaction writes the revision row (`Available`, its
//!    own reference from change `N`), every object's manifest row, each
//!    dependency reference (count and epoch of the owner advance), removes
//!    the pending row and advances the root's cursor to `N`.
//!
//! A change without new objects publishes no revision; it only adds its
//! references to the owners of what it names and advances the cursor.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use redb::{Database, Durability, ReadableDatabase, ReadableTable};
use scribe_format::ObjectId;

use super::index::{self, Publication};
use super::key::BlockKey;
use super::provider::{Provider, ProviderError, Put};
use super::state::{self, Lifecycle, ObjectRow, RevisionRow};
use super::TierError;

/// What [`Tier::verify_contents_with`] hands each verified object to:
/// its root, its id and its bytes.
pub type Verified<'a> = dyn Fn([u8; 16], ObjectId, &[u8]) + Sync + 'a;

/// How blocks are cut and uploaded.
#[derive(Clone, Debug)]
pub struct TierOptions {
    /// Objects at least this large get a block of their own.
    pub own_block_bytes: u64,
    /// Bundled blocks are at most this large.
    pub block_bytes: u64,
    /// Blocks uploaded at once.
    pub in_flight: usize,
}

impl Default for TierOptions {
    fn default() -> Self {
        TierOptions {
            own_block_bytes: 4 << 20,
            block_bytes: 16 << 20,
            in_flight: 8,
        }
    }
}

/// What [`Tier::publish_change`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Published {
    /// The new commit revision, when the change brought new commit objects.
    pub revision: Option<[u8; 16]>,
    /// The new content revision, when its file revisions brought new chunks.
    pub content_revision: Option<[u8; 16]>,
    pub blocks: u64,
    pub bytes: u64,
    /// New chunks already in the bucket in the adopted staged revision
    /// ([`Tier::prestage`]), not uploaded again.
    pub prestaged: u64,
    /// Objects already owned by older revisions (not uploaded).
    pub reused: u64,
    /// Distinct owner revisions sealed as dependencies.
    pub dependencies: u64,
}

/// One file revision of a change: its path and the chunks it names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileVersion {
    pub path: String,
    pub chunks: Vec<ObjectId>,
}

/// Who owns an object named by a change being published.
enum Owner {
    Existing([u8; 16]),
    Commit,
    Content,
}

/// Where one object is in the bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub key: BlockKey,
    pub offset: u64,
    pub len: u64,
}

/// The tier of one data root: its record and its bucket.
pub struct Tier {
    pub(crate) db: Database,
    pub(crate) path: PathBuf,
    pub(crate) shard: u32,
    /// The namespace the recovery journals ship under
    /// (`nokv/recovery/{journal_shard:08x}`): the block shard for a record
    /// created by `serve`, the restored data root's own after a restore
    /// (its fresh journals must not meet the old ones' steps).
    pub(crate) journal_shard: u32,
    pub(crate) provider: Arc<dyn Provider>,
    options: TierOptions,
    /// Per (root, revision): its objects in block and offset order
    /// ([`Tier::following`]).
    by_revision: std::sync::Mutex<ReadOrder>,
}

type RevisionOrder = Arc<Vec<(u64, u64, ObjectId)>>;
/// A block's key and its objects' bytes ([`Tier::read_block_of`]).
pub type BlockObjects = (String, Vec<(ObjectId, Bytes)>);
type ReadOrder = std::collections::HashMap<([u8; 16], [u8; 16]), RevisionOrder>;

/// Manifest rows (revision not yet filled in), block count, bytes.
type Packed = (Vec<(ObjectId, ObjectRow)>, u64, u64);

/// Reads an object's bytes from the local store (verified there).
pub type ReadLocal<'a> = dyn Fn(&ObjectId) -> Result<Vec<u8>, String> + Sync + 'a;

impl Tier {
    /// Open (or create) the record at `path`. `shard` is used only when the
    /// file is new; an existing file keeps the shard it was created with.
    pub fn open(
        path: &Path,
        shard: u32,
        provider: Arc<dyn Provider>,
        options: TierOptions,
    ) -> Result<Tier, TierError> {
        let (db, shard, journal_shard) = state::open(path, shard, None)?;
        Ok(Tier {
            db,
            path: path.to_owned(),
            shard,
            journal_shard,
            provider,
            options,
            by_revision: Default::default(),
        })
    }

    /// How blocks are cut and uploaded.
    pub fn options(&self) -> &TierOptions {
        &self.options
    }

    pub fn shard(&self) -> u32 {
        self.shard
    }

    /// Where this record's recovery journals ship (see the field).
    pub fn journal_shard(&self) -> u32 {
        self.journal_shard
    }

    /// The bucket this record's blocks and journals are in.
    pub fn provider(&self) -> &dyn Provider {
        &*self.provider
    }

    /// Create a new record at `path` (which must not exist) for a data
    /// root restored from the bucket: blocks keep the keys of `shard`,
    /// journals ship under `journal_shard`. Fill it with
    /// [`Tier::restore_change`].
    pub fn create_restored(
        path: &Path,
        shard: u32,
        journal_shard: u32,
        provider: Arc<dyn Provider>,
        options: TierOptions,
    ) -> Result<Tier, TierError> {
        if path.exists() {
            return Err(TierError::state(
                path,
                "exists; a restore creates a new record",
            ));
        }
        let (db, shard, journal_shard) = state::open(path, shard, Some(journal_shard))?;
        Ok(Tier {
            db,
            path: path.to_owned(),
            shard,
            journal_shard,
            provider,
            options,
            by_revision: Default::default(),
        })
    }

    /// The bucket key of the index record of change `change` of `root`
    /// whose commit holds `commit` (`index.rs`).
    pub fn index_key(&self, root: &[u8; 16], change: u64, commit: &[ObjectId]) -> String {
        index::key(self.shard, root, change, commit)
    }

    /// Rebuild change `change` of `root` into this record from its index
    /// record in the bucket (`index.rs`): `commit` are the ids of its
    /// commit objects, as the restored metadata names them (the same list
    /// publication was given). Changes are restored in order. The record
    /// must be intact (its digest), be the one of this root and change,
    /// and hold a manifest row (in it, or in an earlier change) for each
    /// commit object; otherwise `Damaged` names its key.
    pub fn restore_change(
        &self,
        root: &[u8; 16],
        change: u64,
        commit: &[ObjectId],
    ) -> Result<(), TierError> {
        let through = self.uploaded_through(root)?;
        if change != through + 1 {
            return Err(TierError::OutOfOrder {
                change,
                next: through + 1,
            });
        }
        let key = index::key(self.shard, root, change, commit);
        let damaged = |detail: String| TierError::Damaged {
            key: key.clone(),
            offset: 0,
            detail,
        };
        let body = match self.provider.get(&key) {
            Ok(b) => b,
            Err(ProviderError::NotFound { .. }) => {
                return Err(damaged(format!(
                    "the index record of change {change} is not in the bucket (a change \
                     accepted but never published: not acknowledged under `durable`)"
                )))
            }
            Err(e) => return Err(e.into()),
        };
        let p = Publication::decode(&body).map_err(damaged)?;
        if p.root != *root || p.change != change {
            return Err(damaged(format!(
                "it is the record of change {} of root {}",
                p.change,
                hex::encode(p.root)
            )));
        }
        let mine: BTreeSet<[u8; 33]> = p
            .revision
            .iter()
            .chain(p.content.iter())
            .flat_map(|r| r.1.iter().map(|(id, _)| id.to_bytes()))
            .collect();
        for id in commit {
            if !mine.contains(&id.to_bytes()) && self.locate(root, id)?.is_none() {
                return Err(damaged(format!(
                    "commit object {id} of change {change} has no manifest row"
                )));
            }
        }
        self.commit(&p)
    }

    pub(crate) fn st<E: std::fmt::Display>(&self) -> impl Fn(E) -> TierError + '_ {
        move |e| TierError::state(&self.path, e)
    }

    /// Every change of `root` up to this one is in the bucket.
    pub fn uploaded_through(&self, root: &[u8; 16]) -> Result<u64, TierError> {
        state::cursor(&self.db, &self.path, root)
    }

    /// Where `id` of `root` is in the bucket, if it was uploaded.
    pub fn locate(&self, root: &[u8; 16], id: &ObjectId) -> Result<Option<Location>, TierError> {
        let tx = self.db.begin_read().map_err(self.st())?;
        let objects = tx.open_table(state::OBJECTS).map_err(self.st())?;
        let Some(row) = objects
            .get(state::object_key(root, id).as_slice())
            .map_err(self.st())?
        else {
            return Ok(None);
        };
        let row = ObjectRow::decode(row.value())
            .ok_or_else(|| TierError::corrupt(&self.path, format!("manifest row of {id}")))?;
        Ok(Some(Location {
            key: BlockKey::new(self.shard, *root, row.revision, row.block),
            offset: row.offset,
            len: row.len,
        }))
    }

    /// The objects of revision `rev` of `root` in block and offset order
    /// (built once per revision and kept: its rows never change while it
    /// is Available).
    fn revision_order(&self, root: &[u8; 16], rev: &[u8; 16]) -> Result<RevisionOrder, TierError> {
        let cached = self
            .by_revision
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(*root, *rev))
            .cloned();
        let order = match cached {
            Some(o) => o,
            None => {
                // A revision's rows are written in one transaction and never
                // change while it is Available: built once, kept.
                let tx = self.db.begin_read().map_err(self.st())?;
                let objects = tx.open_table(state::OBJECTS).map_err(self.st())?;
                let mut order = Vec::new();
                for r in objects.range(root.as_slice()..).map_err(self.st())? {
                    let (k, v) = r.map_err(self.st())?;
                    let k = k.value();
                    if !k.starts_with(root) {
                        break;
                    }
                    let Some(row) = ObjectRow::decode(v.value()) else {
                        continue;
                    };
                    if row.revision != *rev {
                        continue;
                    }
                    if let Ok(oid) = ObjectId::from_bytes(&k[16..]) {
                        order.push((row.block, row.offset, oid));
                    }
                }
                order.sort_by_key(|(b, o, _)| (*b, *o));
                let order = Arc::new(order);
                let mut m = self.by_revision.lock().unwrap_or_else(|e| e.into_inner());
                if m.len() > 4096 {
                    m.clear();
                }
                m.insert((*root, *rev), order.clone());
                order
            }
        };
        Ok(order)
    }

    /// The bytes of every object in the block holding `id` (one ranged
    /// GET of the block's used extent), each checked against its id;
    /// `None` when the tier never uploaded `id`. An object of the block
    /// whose bytes do not match is left out; when it is `id`, `Damaged`
    /// names the key and offset.
    pub fn read_block_of(
        &self,
        root: &[u8; 16],
        id: &ObjectId,
    ) -> Result<Option<BlockObjects>, TierError> {
        let Some(loc) = self.locate(root, id)? else {
            return Ok(None);
        };
        let order = self.revision_order(root, &loc.key.revision)?;
        let mut members: Vec<(u64, u64, ObjectId)> = order
            .iter()
            .filter(|(b, _, _)| *b == loc.key.index)
            .map(|(_, off, oid)| (*off, 0, *oid))
            .collect();
        // Lengths: from the manifest rows.
        for m in members.iter_mut() {
            m.1 = match self.locate(root, &m.2)? {
                Some(l) => l.len,
                None => 0,
            };
        }
        members.retain(|m| m.1 > 0 || m.2 == *id);
        if !members.iter().any(|m| m.2 == *id) {
            members.push((loc.offset, loc.len, *id));
        }
        let start = members.iter().map(|m| m.0).min().unwrap_or(loc.offset);
        let end = members
            .iter()
            .map(|m| m.0 + m.1)
            .max()
            .unwrap_or(loc.offset + loc.len);
        let key = loc.key.to_key();
        let body = self.provider.get_range(&key, start..end)?;
        let mut out = Vec::with_capacity(members.len());
        for (off, len, oid) in members {
            let a = (off - start) as usize;
            // Each object is a view of the one GET's body (not copied);
            // its bytes are hashed exactly once, here, on this thread
            // (reads fetch many blocks at once: handing each object to
            // the shared hashing pool only added wake-ups).
            let bytes = body.slice(a..a + len as usize);
            let mut h = scribe_format::id::IdentityHasher::new(oid.kind);
            let got = h.update(&bytes).and_then(|()| h.finish());
            match got {
                Ok(got) if got == oid => out.push((oid, bytes)),
                _ if oid == *id => {
                    return Err(TierError::Damaged {
                        key,
                        offset: off,
                        detail: format!("the {len} bytes there do not hash to {id}"),
                    })
                }
                _ => {}
            }
        }
        Ok(Some((key, out)))
    }

    /// Up to `n` objects stored after `id` in its revision (the next
    /// ones in upload order: a file's following chunks), for read-ahead.
    /// Empty when `id` is not in the bucket.
    pub fn following(
        &self,
        root: &[u8; 16],
        id: &ObjectId,
        n: usize,
    ) -> Result<Vec<ObjectId>, TierError> {
        let Some(loc) = self.locate(root, id)? else {
            return Ok(Vec::new());
        };
        let order = self.revision_order(root, &loc.key.revision)?;
        let at = order.partition_point(|(b, o, _)| (*b, *o) <= (loc.key.index, loc.offset));
        Ok(order[at..].iter().take(n).map(|(_, _, id)| *id).collect())
    }

    /// Every object of `root` the bucket holds in an `Available` revision,
    /// in id order (what `scribe-server backup` fetches back when the
    /// local store gave it up: `tier evict`, `--cache-bytes`).
    pub fn objects_of(&self, root: &[u8; 16]) -> Result<Vec<ObjectId>, TierError> {
        let tx = self.db.begin_read().map_err(self.st())?;
        let objects = tx.open_table(state::OBJECTS).map_err(self.st())?;
        let revisions = tx.open_table(state::REVISIONS).map_err(self.st())?;
        let mut available = std::collections::HashMap::new();
        let mut out = Vec::new();
        for row in objects.range(root.as_slice()..).map_err(self.st())? {
            let (k, v) = row.map_err(self.st())?;
            let k = k.value();
            if k.len() < 16 || k[..16] != root[..] {
                break;
            }
            let bad = || TierError::corrupt(&self.path, "a tier_objects row does not decode");
            let id = ObjectId::from_bytes(&k[16..]).map_err(|_| bad())?;
            let rev = ObjectRow::decode(v.value()).ok_or_else(bad)?.revision;
            let ok = match available.get(&rev) {
                Some(ok) => *ok,
                None => {
                    let ok = revisions
                        .get(rev.as_slice())
                        .map_err(self.st())?
                        .and_then(|r| RevisionRow::decode(r.value()))
                        .is_some_and(|r| r.state == Lifecycle::Available);
                    available.insert(rev, ok);
                    ok
                }
            };
            if ok {
                out.push(id);
            }
        }
        Ok(out)
    }

    /// Whether the bucket holds `id` of `root` in an `Available` revision
    /// (what a local cache may drop and read back).
    pub fn holds(&self, root: &[u8; 16], id: &ObjectId) -> Result<bool, TierError> {
        let Some(loc) = self.locate(root, id)? else {
            return Ok(false);
        };
        let tx = self.db.begin_read().map_err(self.st())?;
        let t = tx.open_table(state::REVISIONS).map_err(self.st())?;
        let row = t.get(loc.key.revision.as_slice()).map_err(self.st())?;
        Ok(row
            .and_then(|v| RevisionRow::decode(v.value()))
            .is_some_and(|r| r.state == Lifecycle::Available))
    }

    /// `id`'s bytes from the bucket, checked against the id; `None` when
    /// the tier never uploaded it.
    pub fn read_object(
        &self,
        root: &[u8; 16],
        id: &ObjectId,
    ) -> Result<Option<Vec<u8>>, TierError> {
        let Some(loc) = self.locate(root, id)? else {
            return Ok(None);
        };
        let key = loc.key.to_key();
        let bytes = self
            .provider
            .get_range(&key, loc.offset..loc.offset + loc.len)?;
        match scribe_format::id::object_identity(id.kind, &bytes) {
            Ok(got) if got == *id => Ok(Some(bytes.to_vec())),
            _ => Err(TierError::Damaged {
                key,
                offset: loc.offset,
                detail: format!("the {} bytes there do not hash to {id}", loc.len),
            }),
        }
    }

    /// Publish change `change` of `root` naming `objects`, all of them
    /// held by the commit (see the module docs). Idempotent: a change at or
    /// below the cursor is already done. Changes are published in order:
    /// `change` must be the cursor + 1.
    pub fn publish_change(
        &self,
        root: &[u8; 16],
        change: u64,
        objects: &[ObjectId],
        read: &ReadLocal<'_>,
    ) -> Result<Published, TierError> {
        self.publish_commit(root, change, objects, &[], read)
    }

    /// Publish change `change` of `root`: `commit` are the objects its
    /// commit holds (envelope, change set, manifests: never given up while
    /// the commit is kept); `files` are its file revisions with the chunks
    /// each names. New commit objects form the commit revision (referenced
    /// by the change, sealing a dependency on the owners of reused commit
    /// objects); new chunks form the content revision; each file revision
    /// references every revision owning one of its chunks, so giving a
    /// file revision up ([`Tier::release_files`]) releases exactly those.
    pub fn publish_commit(
        &self,
        root: &[u8; 16],
        change: u64,
        commit: &[ObjectId],
        files: &[FileVersion],
        read: &ReadLocal<'_>,
    ) -> Result<Published, TierError> {
        let through = self.uploaded_through(root)?;
        if change <= through {
            return Ok(Published {
                revision: None,
                content_revision: None,
                blocks: 0,
                bytes: 0,
                prestaged: 0,
                reused: 0,
                dependencies: 0,
            });
        }
        if change != through + 1 {
            return Err(TierError::OutOfOrder {
                change,
                next: through + 1,
            });
        }
        // Each id once: owned already by an Available revision, or new (in
        // the commit revision, or in the content revision).
        let mut owner_of: BTreeMap<[u8; 33], Owner> = BTreeMap::new();
        let mut fresh_commit = Vec::new();
        let mut fresh_content = Vec::new();
        let mut commit_owners: BTreeSet<[u8; 16]> = BTreeSet::new();
        let mut reused = 0u64;
        {
            let tx = self.db.begin_read().map_err(self.st())?;
            let t = tx.open_table(state::OBJECTS).map_err(self.st())?;
            let revs = tx.open_table(state::REVISIONS).map_err(self.st())?;
            let chunks = files.iter().flat_map(|f| f.chunks.iter());
            for (id, in_commit) in commit
                .iter()
                .map(|id| (id, true))
                .chain(chunks.map(|id| (id, false)))
            {
                if owner_of.contains_key(&id.to_bytes()) {
                    continue;
                }
                let owner = match t
                    .get(state::object_key(root, id).as_slice())
                    .map_err(self.st())?
                {
                    Some(row) => Some(ObjectRow::decode(row.value()).ok_or_else(|| {
                        TierError::corrupt(&self.path, format!("manifest row of {id}"))
                    })?),
                    None => None,
                };
                // An owner being deleted takes no new reference: the object
                // is uploaded again, in the new revision.
                let available = match &owner {
                    Some(o) => revs
                        .get(o.revision.as_slice())
                        .map_err(self.st())?
                        .and_then(|v| RevisionRow::decode(v.value()))
                        .is_some_and(|r| r.state == Lifecycle::Available),
                    None => false,
                };
                let o = match owner {
                    Some(o) if available => {
                        reused += 1;
                        if in_commit {
                            commit_owners.insert(o.revision);
                        }
                        Owner::Existing(o.revision)
                    }
                    _ if in_commit => {
                        fresh_commit.push(*id);
                        Owner::Commit
                    }
                    _ => {
                        fresh_content.push(*id);
                        Owner::Content
                    }
                };
                owner_of.insert(id.to_bytes(), o);
            }
        }
        let revision = if fresh_commit.is_empty() {
            None
        } else {
            Some(self.allocate(&state::pending_key(root, change))?)
        };
        // The content revision adopts the staged revision holding most of
        // the new chunks (`stage.rs`): those are in the bucket already.
        let (content_revision, content_base, staged) = if fresh_content.is_empty() {
            (None, 0, Vec::new())
        } else {
            let (rev, base, staged) = self.adopt_or_allocate(root, change, &fresh_content)?;
            (Some(rev), base, staged)
        };
        let staged_ids: BTreeSet<[u8; 33]> = staged.iter().map(|(id, _)| id.to_bytes()).collect();
        let tail: Vec<ObjectId> = fresh_content
            .iter()
            .filter(|id| !staged_ids.contains(&id.to_bytes()))
            .copied()
            .collect();
        let (commit_packed, content_packed) = std::thread::scope(|s| {
            let c = s.spawn(|| match &content_revision {
                Some(rev) => self.upload(root, rev, &tail, read, content_base),
                None => Ok((Vec::new(), 0, 0)),
            });
            let m = match &revision {
                Some(rev) => self.upload(root, rev, &fresh_commit, read, 0),
                None => Ok((Vec::new(), 0, 0)),
            };
            let c = c
                .join()
                .unwrap_or_else(|_| Err(TierError::state(&self.path, "an upload panicked")));
            (m, c)
        });
        let (commit_rows, commit_blocks, commit_bytes) = commit_packed?;
        let (mut content_rows, content_blocks, mut content_bytes) = content_packed?;
        let prestaged = staged.len() as u64;
        // Blocks of the revision: the staged ones (even those holding
        // objects this change does not name) and the tail's after them.
        let content_blocks = content_base + content_blocks;
        for (id, row) in staged {
            content_bytes += row.len;
            content_rows.push((id, row));
        }
        // Which revisions each file revision references.
        let mut file_refs: Vec<(String, BTreeSet<[u8; 16]>)> = Vec::new();
        for f in files {
            let mut owners = BTreeSet::new();
            for id in &f.chunks {
                match owner_of.get(&id.to_bytes()) {
                    Some(Owner::Existing(r)) => owners.insert(*r),
                    Some(Owner::Commit) => owners.insert(revision.expect("commit revision")),
                    Some(Owner::Content) => {
                        owners.insert(content_revision.expect("content revision"))
                    }
                    None => false,
                };
            }
            file_refs.push((f.path.clone(), owners));
        }
        let fill =
            |rev: [u8; 16], rows: Vec<(ObjectId, ObjectRow)>| -> Vec<(ObjectId, ObjectRow)> {
                rows.into_iter()
                    .map(|(id, r)| (id, ObjectRow { revision: rev, ..r }))
                    .collect()
            };
        let publication = Publication {
            root: *root,
            change,
            revision: revision.map(|r| (r, fill(r, commit_rows), commit_blocks, commit_bytes)),
            content: content_revision
                .map(|r| (r, fill(r, content_rows), content_blocks, content_bytes)),
            commit_owners,
            files: file_refs,
        };
        // The record of this publication goes into the bucket before the
        // cursor advances (`index.rs`): the bucket, not tier.redb, is what
        // a restore rebuilds the record from.
        let dependencies = publication.commit_owners.len() as u64;
        let key = index::key(self.shard, root, change, commit);
        self.provider
            .put_if_absent(&key, Bytes::from(publication.encode()))?;
        self.commit(&publication)?;
        Ok(Published {
            revision,
            content_revision,
            blocks: commit_blocks + content_blocks,
            bytes: commit_bytes + content_bytes,
            prestaged,
            reused,
            dependencies,
        })
    }

    /// The revision id of `(root, change)`: the recorded one after a crash,
    /// else a fresh random one, recorded before any upload.
    fn allocate(&self, key: &[u8]) -> Result<[u8; 16], TierError> {
        let mut tx = self.db.begin_write().map_err(self.st())?;
        tx.set_durability(Durability::Immediate)
            .map_err(self.st())?;
        let id = {
            let mut t = tx.open_table(state::PENDING).map_err(self.st())?;
            let existing = t
                .get(key)
                .map_err(self.st())?
                .map(|v| <[u8; 16]>::try_from(v.value()));
            match existing {
                Some(Ok(id)) => id,
                Some(Err(_)) => {
                    return Err(TierError::corrupt(
                        &self.path,
                        "pending revision is not 16 bytes",
                    ))
                }
                None => {
                    let mut id = [0u8; 16];
                    getrandom::fill(&mut id).map_err(|e| {
                        TierError::state(&self.path, format!("no random source: {e}"))
                    })?;
                    t.insert(key, id.as_slice()).map_err(self.st())?;
                    id
                }
            }
        };
        tx.commit().map_err(self.st())?;
        Ok(id)
    }

    /// Pack `fresh` into blocks of revision `rev` and upload them, at most
    /// `in_flight` at once. Blocks are formed in order as objects are read,
    /// so memory holds at most `in_flight + 1` blocks.
    fn upload(
        &self,
        root: &[u8; 16],
        rev: &[u8; 16],
        fresh: &[ObjectId],
        read: &ReadLocal<'_>,
        first_block: u64,
    ) -> Result<Packed, TierError> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<(u64, Bytes)>(self.options.in_flight);
        let rx = std::sync::Mutex::new(rx);
        let shard = self.shard;
        let provider = &self.provider;
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..self.options.in_flight.max(1))
                .map(|_| {
                    s.spawn(|| -> Result<(), TierError> {
                        loop {
                            let next = rx.lock().map(|r| r.recv());
                            let Ok(Ok((index, block))) = next else {
                                return Ok(());
                            };
                            let key = BlockKey::new(shard, *root, *rev, index).to_key();
                            // A `Created` answer is the store's own
                            // confirmation of these bytes; `AlreadyPresent`
                            // (an ambiguous first try, retried) was read
                            // back and compared. No `head` is needed.
                            match provider.put_if_absent(&key, block)? {
                                Put::Created | Put::AlreadyPresent => {}
                            }
                        }
                    })
                })
                .collect();
            let packed = self.pack_into(fresh, read, first_block, &|index, bytes| {
                tx.send((index, bytes))
                    .map_err(|_| TierError::state(&self.path, "the upload threads stopped"))
            });
            drop(tx);
            let mut first_err = packed.as_ref().err().map(|e| e.to_string());
            for w in workers {
                match w.join() {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        if first_err.is_none() {
                            return Err(e);
                        }
                    }
                    Err(_) => first_err = Some("an upload thread panicked".into()),
                }
            }
            match (packed, first_err) {
                (Ok(p), None) => Ok(p),
                (Err(e), _) => Err(e),
                (Ok(_), Some(msg)) => Err(TierError::state(&self.path, msg)),
            }
        })
    }

    /// Cut `fresh` into blocks numbered from `first_block`, handing each
    /// to `out`. Returns the rows, the number of blocks (counted from
    /// `first_block`: the last number is `first_block + n - 1`) and bytes.
    pub(crate) fn pack_into(
        &self,
        fresh: &[ObjectId],
        read: &ReadLocal<'_>,
        first_block: u64,
        out: &dyn Fn(u64, Bytes) -> Result<(), TierError>,
    ) -> Result<Packed, TierError> {
        let mut rows = Vec::with_capacity(fresh.len());
        // Block numbers in the order blocks are started: a bundle takes its
        // number when its first object arrives, an own block at once.
        let mut next = first_block;
        let mut total = 0u64;
        let mut current: Vec<u8> = Vec::new();
        let mut current_index = first_block;
        let send = |index: u64, bytes: Vec<u8>| out(index, Bytes::from(bytes));
        for id in fresh {
            let data = read(id).map_err(|detail| TierError::Local {
                id: id.to_string(),
                detail,
            })?;
            let len = data.len() as u64;
            total += len;
            if len >= self.options.own_block_bytes {
                rows.push((
                    *id,
                    ObjectRow {
                        revision: [0; 16],
                        block: next,
                        offset: 0,
                        len,
                    },
                ));
                send(next, data)?;
                next += 1;
                continue;
            }
            if !current.is_empty() && current.len() as u64 + len > self.options.block_bytes {
                send(current_index, std::mem::take(&mut current))?;
            }
            if current.is_empty() {
                current_index = next;
                next += 1;
            }
            rows.push((
                *id,
                ObjectRow {
                    revision: [0; 16],
                    block: current_index,
                    offset: current.len() as u64,
                    len,
                },
            ));
            current.extend_from_slice(&data);
        }
        if !current.is_empty() {
            send(current_index, current)?;
        }
        Ok((rows, next - first_block, total))
    }

    fn commit(&self, p: &Publication) -> Result<(), TierError> {
        let (root, change) = (&p.root, p.change);
        let mut tx = self.db.begin_write().map_err(self.st())?;
        tx.set_durability(Durability::Immediate)
            .map_err(self.st())?;
        {
            let mut revisions = tx.open_table(state::REVISIONS).map_err(self.st())?;
            let mut objects = tx.open_table(state::OBJECTS).map_err(self.st())?;
            let mut refs = tx.open_table(state::REFS).map_err(self.st())?;
            let mut put_revision = |rev: &[u8; 16],
                                    rows: &[(ObjectId, ObjectRow)],
                                    blocks: u64,
                                    bytes: u64|
             -> Result<(), TierError> {
                let row = RevisionRow {
                    root: *root,
                    change,
                    state: Lifecycle::Available,
                    blocks,
                    bytes,
                    strong: 0,
                    epoch: 0,
                };
                revisions
                    .insert(rev.as_slice(), row.encode().as_slice())
                    .map_err(self.st())?;
                for (id, r) in rows {
                    let r = ObjectRow {
                        revision: *rev,
                        ..*r
                    };
                    objects
                        .insert(
                            state::object_key(root, id).as_slice(),
                            r.encode().as_slice(),
                        )
                        .map_err(self.st())?;
                }
                Ok(())
            };
            if let Some((rev, rows, blocks, bytes)) = &p.content {
                put_revision(rev, rows, *blocks, *bytes)?;
            }
            // References: from the change to its commit revision and from
            // that revision to each owner of a reused commit object (or,
            // without a commit revision, from the change to each owner);
            // from each file revision to each owner of its chunks.
            if let Some((rev, rows, blocks, bytes)) = &p.revision {
                put_revision(rev, rows, *blocks, *bytes)?;
                self.add_ref(
                    &mut revisions,
                    &mut refs,
                    rev,
                    state::change_ref(rev, root, change),
                )?;
                for o in &p.commit_owners {
                    self.add_ref(&mut revisions, &mut refs, o, state::dependency_ref(o, rev))?;
                }
            } else {
                for o in &p.commit_owners {
                    self.add_ref(
                        &mut revisions,
                        &mut refs,
                        o,
                        state::change_ref(o, root, change),
                    )?;
                }
            }
            for (path, owners) in &p.files {
                for o in owners {
                    self.add_ref(
                        &mut revisions,
                        &mut refs,
                        o,
                        state::path_ref(o, root, change, path),
                    )?;
                }
            }
            if let Some((rev, ..)) = &p.content {
                let mut staged = tx.open_table(super::stage::STAGED).map_err(self.st())?;
                self.remove_staged_rows(&mut staged, rev)?;
            }
            let mut pending = tx.open_table(state::PENDING).map_err(self.st())?;
            pending
                .remove(state::pending_key(root, change).as_slice())
                .map_err(self.st())?;
            pending
                .remove(state::pending_content_key(root, change).as_slice())
                .map_err(self.st())?;
            let mut cursor = tx.open_table(state::CURSOR).map_err(self.st())?;
            cursor.insert(root.as_slice(), change).map_err(self.st())?;
        }
        tx.commit().map_err(self.st())?;
        Ok(())
    }

    /// Add reference `key` to `owner`: the row, the strong count and the
    /// epoch change together; new references need `Available`.
    fn add_ref(
        &self,
        revisions: &mut redb::Table<&[u8], &[u8]>,
        refs: &mut redb::Table<&[u8], ()>,
        owner: &[u8; 16],
        key: Vec<u8>,
    ) -> Result<(), TierError> {
        let mut row = revisions
            .get(owner.as_slice())
            .map_err(self.st())?
            .map(|v| RevisionRow::decode(v.value()))
            .ok_or_else(|| {
                TierError::corrupt(
                    &self.path,
                    format!(
                        "a reference names revision {} that has no row",
                        hex::encode(owner)
                    ),
                )
            })?
            .ok_or_else(|| TierError::corrupt(&self.path, "revision row"))?;
        if row.state != Lifecycle::Available {
            return Err(TierError::NotAvailable {
                revision: hex::encode(owner),
            });
        }
        if refs
            .insert(key.as_slice(), ())
            .map_err(self.st())?
            .is_none()
        {
            row.strong += 1;
            row.epoch += 1;
            revisions
                .insert(owner.as_slice(), row.encode().as_slice())
                .map_err(self.st())?;
        }
        Ok(())
    }

    /// Every revision's row, by id.
    pub fn revisions(&self) -> Result<BTreeMap<[u8; 16], RevisionRow>, TierError> {
        let tx = self.db.begin_read().map_err(self.st())?;
        let t = tx.open_table(state::REVISIONS).map_err(self.st())?;
        let mut out = BTreeMap::new();
        for row in t.iter().map_err(self.st())? {
            let (k, v) = row.map_err(self.st())?;
            let id: [u8; 16] = k
                .value()
                .try_into()
                .map_err(|_| TierError::corrupt(&self.path, "revision key is not 16 bytes"))?;
            let r = RevisionRow::decode(v.value())
                .ok_or_else(|| TierError::corrupt(&self.path, "revision row"))?;
            out.insert(id, r);
        }
        Ok(out)
    }

    /// Read every block of every `Available` revision whole and check
    /// each object in it against its id (its manifest row's digest),
    /// several blocks at once. Names each object whose bytes do not match
    /// (block key and offset), each block missing or too short; repairs
    /// nothing. `restore --from-tier` refuses a bucket where this finds
    /// anything.
    pub fn verify_contents(&self) -> Result<Vec<String>, TierError> {
        self.verify_contents_with(&|_, _, _| {})
    }

    /// [`Tier::verify_contents`], handing each object whose bytes match its
    /// id to `verified` (root, id, bytes), from the reading threads.
    /// `restore --from-tier` keeps the non-chunk objects this way.
    pub fn verify_contents_with(&self, verified: &Verified<'_>) -> Result<Vec<String>, TierError> {
        let revisions = self.revisions()?;
        type Rows = Vec<(ObjectId, u64, u64)>;
        let mut blocks: BTreeMap<([u8; 16], [u8; 16], u64), Rows> = BTreeMap::new();
        {
            let tx = self.db.begin_read().map_err(self.st())?;
            let objects = tx.open_table(state::OBJECTS).map_err(self.st())?;
            for row in objects.iter().map_err(self.st())? {
                let (k, v) = row.map_err(self.st())?;
                let k = k.value();
                let (Some(root), Ok(id), Some(r)) = (
                    k.get(..16).and_then(|r| <[u8; 16]>::try_from(r).ok()),
                    ObjectId::from_bytes(k.get(16..).unwrap_or_default()),
                    ObjectRow::decode(v.value()),
                ) else {
                    return Err(TierError::corrupt(&self.path, "a manifest row"));
                };
                if revisions
                    .get(&r.revision)
                    .is_some_and(|x| x.state == Lifecycle::Available)
                {
                    blocks
                        .entry((root, r.revision, r.block))
                        .or_default()
                        .push((id, r.offset, r.len));
                }
            }
        }
        let queue = std::sync::Mutex::new(blocks.into_iter());
        let problems = std::sync::Mutex::new(Vec::new());
        let failed: std::sync::Mutex<Option<TierError>> = std::sync::Mutex::new(None);
        std::thread::scope(|s| {
            for _ in 0..self.options.in_flight.max(1) {
                s.spawn(|| loop {
                    let next = queue.lock().ok().and_then(|mut q| q.next());
                    let Some(((root, rev, block), rows)) = next else {
                        return;
                    };
                    let key = BlockKey::new(self.shard, root, rev, block).to_key();
                    let body = match self.provider.get(&key) {
                        Ok(b) => b,
                        Err(ProviderError::NotFound { .. }) => {
                            if let Ok(mut p) = problems.lock() {
                                p.push(format!("{key}: missing from the bucket"));
                            }
                            continue;
                        }
                        Err(e) => {
                            if let Ok(mut f) = failed.lock() {
                                f.get_or_insert(e.into());
                            }
                            return;
                        }
                    };
                    for (id, offset, len) in rows {
                        let bytes = usize::try_from(offset)
                            .ok()
                            .zip(usize::try_from(offset + len).ok())
                            .and_then(|(a, b)| body.get(a..b));
                        let detail = match bytes {
                            None => Some(format!(
                                "the block holds {} bytes, {id} needs {len} there",
                                body.len()
                            )),
                            Some(b) => match scribe_format::id::object_identity(id.kind, b) {
                                Ok(got) if got == id => {
                                    verified(root, id, b);
                                    None
                                }
                                _ => Some(format!("the {len} bytes there do not hash to {id}")),
                            },
                        };
                        if let Some(d) = detail {
                            if let Ok(mut p) = problems.lock() {
                                p.push(format!("{key} at byte {offset}: {d}"));
                            }
                        }
                    }
                });
            }
        });
        if let Some(e) = failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
            return Err(e);
        }
        let mut p = problems.into_inner().unwrap_or_else(|e| e.into_inner());
        p.sort();
        Ok(p)
    }

    /// `tier verify`: recompute every revision's strong count from the
    /// reference rows, check every manifest row lies inside a block of an
    /// `Available` revision, and `head` every block (present, and at
    /// least as long as its rows say). Names every inconsistency; repairs
    /// nothing.
    pub fn verify(&self) -> Result<Vec<String>, TierError> {
        let revisions = self.revisions()?;
        let mut problems = Vec::new();
        let tx = self.db.begin_read().map_err(self.st())?;
        let refs = tx.open_table(state::REFS).map_err(self.st())?;
        let mut counted: BTreeMap<[u8; 16], u64> = BTreeMap::new();
        for row in refs.iter().map_err(self.st())? {
            let (k, _) = row.map_err(self.st())?;
            let k = k.value();
            let Some(owner) = k.get(..16).and_then(|o| <[u8; 16]>::try_from(o).ok()) else {
                problems.push("a reference row is shorter than 16 bytes".into());
                continue;
            };
            *counted.entry(owner).or_default() += 1;
            if !revisions.contains_key(&owner) {
                problems.push(format!(
                    "a reference names revision {} that has no row",
                    hex::encode(owner)
                ));
            }
        }
        for (id, r) in &revisions {
            let c = counted.get(id).copied().unwrap_or(0);
            if c != r.strong {
                problems.push(format!(
                    "revision {}: strong count {} but {c} references",
                    hex::encode(id),
                    r.strong
                ));
            }
        }
        // The extent each block must have, from the manifest rows.
        let objects = tx.open_table(state::OBJECTS).map_err(self.st())?;
        let mut extent: BTreeMap<([u8; 16], [u8; 16], u64), u64> = BTreeMap::new();
        for row in objects.iter().map_err(self.st())? {
            let (k, v) = row.map_err(self.st())?;
            let k = k.value();
            let root: [u8; 16] = match k.get(..16).map(<[u8; 16]>::try_from) {
                Some(Ok(r)) => r,
                _ => {
                    problems.push("a manifest row key is shorter than 16 bytes".into());
                    continue;
                }
            };
            let Some(r) = ObjectRow::decode(v.value()) else {
                problems.push(format!("manifest row {} does not decode", hex::encode(k)));
                continue;
            };
            match revisions.get(&r.revision) {
                Some(rev) if rev.state == Lifecycle::Available && r.block < rev.blocks => {}
                Some(rev) => problems.push(format!(
                    "manifest row {} names block {} of revision {} ({:?}, {} blocks)",
                    hex::encode(k),
                    r.block,
                    hex::encode(r.revision),
                    rev.state,
                    rev.blocks
                )),
                None => problems.push(format!(
                    "manifest row {} names unknown revision {}",
                    hex::encode(k),
                    hex::encode(r.revision)
                )),
            }
            let e = extent.entry((root, r.revision, r.block)).or_default();
            *e = (*e).max(r.offset + r.len);
        }
        drop(objects);
        drop(refs);
        drop(tx);
        for (root, name) in self.roots_being_deleted()? {
            problems.push(format!(
                "repository {name} (root {}) is being deleted and its deletion has not \
                 finished: run `scribe-server repo delete {} --yes --confirm {}` again",
                hex::encode(root),
                hex::encode(root),
                hex::encode(root)
            ));
        }
        for ((root, rev, block), need) in extent {
            let key = BlockKey::new(self.shard, root, rev, block).to_key();
            match self.provider.head(&key) {
                Ok(Some(h)) if h.len >= need => {}
                Ok(Some(h)) => problems.push(format!(
                    "{key}: {} bytes in the bucket, its manifest rows need {need}",
                    h.len
                )),
                Ok(None) => problems.push(format!("{key}: missing from the bucket")),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(problems)
    }
}

impl From<ProviderError> for TierError {
    fn from(e: ProviderError) -> Self {
        TierError::Provider(e)
    }
}

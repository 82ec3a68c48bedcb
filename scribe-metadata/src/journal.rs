//! Metadata recovery journal profile 2 (seed 004): the four recovery
//! tables of `catalog.redb` and `metadata.redb`, the write transaction
//! wrapper that records every mutation with a commit boundary in the same
//! Immediate redb transaction, export of the outbox as a `.scrj` segment,
//! and replay of segments into a quarantined database.
//!
//! Byte formats are `scribe_format::recovery`; `docs/metadata.md`
//! ("Recovery journal and archive") records the decisions.

use std::borrow::Borrow;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet};
use std::io::{BufReader, BufWriter, Write};
use std::ops::{Bound, Deref, RangeBounds};
use std::path::{Path, PathBuf};

use redb::{
    AccessGuard, Database, Durability, Key, ReadTransaction, ReadableDatabase, ReadableTable,
    ReadableTableMetadata, Table, TableDefinition, TableError, TableHandle, TableStats, Value,
    WriteTransaction,
};
use scribe_format::recovery::{
    self as rj, ColumnType, Record, RecoveryError, SegmentHeader, SegmentReader, SegmentWriter,
    TypeCheck,
};
use scribe_format::{ErrorCode, RepositoryId};

use crate::database_descriptor::sync_dir;
use crate::error::{MetadataError, Result};

/// `scribe_recovery_identity_v1`: `u8` 0 -> 16-byte database identity.
pub const IDENTITY: TableDefinition<u8, [u8; 16]> = TableDefinition::new(rj::TABLE_IDENTITY);
/// `scribe_recovery_records_v1`: `u64` sequence -> record.
pub const RECORDS: TableDefinition<u64, &[u8]> = TableDefinition::new(rj::TABLE_RECORDS);
/// `scribe_recovery_position`: `u8` 0 end, 1 retained floor -> `u64`.
pub const POSITION: TableDefinition<u8, u64> = TableDefinition::new(rj::TABLE_POSITION);
/// `scribe_recovery_types`: table name -> `[key type, value type]`.
pub const TYPES: TableDefinition<&str, &[u8]> = TableDefinition::new(rj::TABLE_TYPES);

/// `scribe_recovery_position` key of the end.
pub const POS_END: u8 = 0;
/// `scribe_recovery_position` key of the retained floor.
pub const POS_FLOOR: u8 = 1;

/// Buffered records are written to the outbox once they exceed this.
const SPILL_BYTES: usize = 4 << 20;
/// Replay applies at most this many records per write transaction.
pub const REPLAY_BATCH_RECORDS: usize = 512;
/// ... and roughly this many record bytes.
pub const REPLAY_BATCH_BYTES: usize = 4 << 20;

/// A redb key or value type the journal can record (seed 004 types 1-4).
pub trait Column: Value + 'static {
    const TYPE: ColumnType;
}
impl Column for &'static [u8] {
    const TYPE: ColumnType = ColumnType::Bytes;
}
impl Column for &'static str {
    const TYPE: ColumnType = ColumnType::Utf8;
}
impl Column for [u8; 16] {
    const TYPE: ColumnType = ColumnType::Id16;
}
impl Column for u64 {
    const TYPE: ColumnType = ColumnType::U64;
}

/// Create the four recovery tables with a new random identity, end and
/// floor 0, in their own Immediate transaction (creation of a database).
pub fn initialize(db: &Database) -> Result<[u8; 16]> {
    let identity = RepositoryId::random().0;
    let mut tx = db.begin_write()?;
    tx.set_durability(Durability::Immediate)?;
    write_bookkeeping(&tx, identity, 0, &BTreeMap::new())?;
    tx.commit()?;
    Ok(identity)
}

fn write_bookkeeping(
    tx: &WriteTransaction,
    identity: [u8; 16],
    end: u64,
    types: &BTreeMap<String, (ColumnType, ColumnType)>,
) -> Result<()> {
    tx.open_table(IDENTITY)?.insert(0, identity)?;
    tx.open_table(RECORDS)?;
    let mut pos = tx.open_table(POSITION)?;
    pos.insert(POS_END, end)?;
    pos.insert(POS_FLOOR, end)?;
    let mut t = tx.open_table(TYPES)?;
    for (name, (k, v)) in types {
        t.insert(name.as_str(), [k.byte(), v.byte()].as_slice())?;
    }
    Ok(())
}

/// The recovery state an opener checks: identity, end, floor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    pub identity: [u8; 16],
    pub end: u64,
    pub floor: u64,
}

/// Require the profile: the four tables, an identity, an end and a floor
/// with `floor <= end`. A database without the tables predates the profile
/// and is refused ([`MetadataError::RecoveryProfileMissing`]).
pub fn check_profile(tx: &ReadTransaction, path: &Path) -> Result<Profile> {
    let missing = |what: &str| MetadataError::RecoveryProfileMissing {
        path: path.to_owned(),
        what: what.to_owned(),
    };
    fn open<K: Key + 'static, V: Value + 'static>(
        tx: &ReadTransaction,
        def: TableDefinition<K, V>,
    ) -> Result<Option<redb::ReadOnlyTable<K, V>>> {
        match tx.open_table(def) {
            Ok(t) => Ok(Some(t)),
            Err(TableError::TableDoesNotExist(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
    let ids = open(tx, IDENTITY)?.ok_or_else(|| missing(rj::TABLE_IDENTITY))?;
    open(tx, RECORDS)?.ok_or_else(|| missing(rj::TABLE_RECORDS))?;
    let pos = open(tx, POSITION)?.ok_or_else(|| missing(rj::TABLE_POSITION))?;
    open(tx, TYPES)?.ok_or_else(|| missing(rj::TABLE_TYPES))?;
    let corrupt = |what: &str| MetadataError::corrupt(format!("{}: {what}", path.display()));
    let identity = ids
        .get(0)?
        .map(|g| g.value())
        .ok_or_else(|| corrupt("recovery identity is missing"))?;
    let end = pos
        .get(POS_END)?
        .map(|g| g.value())
        .ok_or_else(|| corrupt("recovery end is missing"))?;
    let floor = pos
        .get(POS_FLOOR)?
        .map(|g| g.value())
        .ok_or_else(|| corrupt("recovery floor is missing"))?;
    if floor > end {
        return Err(corrupt(&format!(
            "recovery floor {floor} is beyond end {end}"
        )));
    }
    Ok(Profile {
        identity,
        end,
        floor,
    })
}

#[derive(Default)]
struct Log {
    /// Encoded records not yet in the outbox.
    buf: Vec<Vec<u8>>,
    buf_bytes: usize,
    /// Tables declared (or found declared) in this transaction.
    declared: HashSet<String>,
    /// Next sequence, read from the persisted end at the first spill.
    next: Option<u64>,
    /// Records of this transaction so far.
    count: u64,
}

/// A journaled write transaction: every table it opens is declared, every
/// `insert`/`remove`/`delete_table` recorded, and [`WriteTx::commit`] writes
/// the records and a commit boundary in the same redb transaction.
pub struct WriteTx {
    inner: WriteTransaction,
    log: RefCell<Log>,
    archive: Option<std::sync::Arc<crate::archive::Archive>>,
    /// Committed with a flush (`Durability::Immediate`, the default).
    flushed: bool,
}

/// Begin a journaled write transaction with `Durability::Immediate` on a
/// database without an archive (the catalog, offline tools).
pub fn begin(db: &Database) -> Result<WriteTx> {
    let mut inner = db.begin_write()?;
    inner.set_durability(Durability::Immediate)?;
    Ok(WriteTx {
        inner,
        log: RefCell::new(Log::default()),
        archive: None,
        flushed: true,
    })
}

/// Commit an empty flushed transaction of `db` and return the outbox end
/// it made durable: redb's flush carries every earlier commit, including
/// those made with `Durability::None` (a streamed preparation's staging
/// transactions between two flushed ones).
pub(crate) fn flush(db: &Database) -> Result<u64> {
    let mut tx = db.begin_write()?;
    tx.set_durability(Durability::Immediate)?;
    let end = tx
        .open_table(POSITION)?
        .get(POS_END)?
        .map(|g| g.value())
        .ok_or_else(|| MetadataError::corrupt("recovery end is missing"))?;
    tx.commit()?;
    Ok(end)
}

/// Begin a journaled write transaction whose commit also publishes to
/// `archive` before returning; refused while the archive fences writes.
pub fn begin_archived(
    db: &Database,
    archive: &std::sync::Arc<crate::archive::Archive>,
) -> Result<WriteTx> {
    archive.check_writable()?;
    let mut tx = begin(db)?;
    // Not `head()`: that waits for a publication in progress.
    prune_archived(&tx.inner, archive.published_end())?;
    tx.archive = Some(archive.clone());
    Ok(tx)
}

/// Outbox rows already carried by the archive that the next archived
/// write transaction deletes once there are this many (issue 19).
pub const PRUNE_ARCHIVED_RECORDS: u64 = 4_096;

/// Delete the outbox rows `floor + 1 ..= archived` and advance the floor
/// to `archived` (a published `HEAD.end`, so a committed boundary), in the
/// caller's transaction, once at least [`PRUNE_ARCHIVED_RECORDS`] are
/// covered. Not journaled, like consolidation's deletions: the archive
/// holds every one of these records durably, and the outbox is only the
/// buffer that survives a crash before publication (startup drains what
/// lies beyond `HEAD`, which this never touches). Without it every row an
/// import writes stayed in `metadata.redb` twice until an offline
/// `consolidate` (docs/metadata.md, "Outbox pruning").
fn prune_archived(tx: &WriteTransaction, archived: u64) -> Result<u64> {
    prune_archived_at_least(tx, archived, PRUNE_ARCHIVED_RECORDS)
}

/// Delete every outbox row the archive, published up to `archived` (its
/// `HEAD.end`, as `Archive::open` checked it), already holds, however few, in a
/// transaction of its own: an opening after a streamed import, before the
/// file is compacted (`Repository::open`). The import's last records (the
/// upload pins' removals, about one per uploaded object) were written after
/// its last archived write began, so they stayed in the outbox until the
/// repository's next write: 10.7 MB of a 70 MB `metadata.redb` after the
/// toolchain tree's import (docs/performance.md, "Real trees: server
/// footprint"). Returns the rows deleted.
pub(crate) fn prune_archived_now(db: &Database, archived: u64) -> Result<u64> {
    let tx = db.begin_write()?;
    let removed = prune_archived_at_least(&tx, archived, 1)?;
    tx.commit()?;
    Ok(removed)
}

fn prune_archived_at_least(tx: &WriteTransaction, archived: u64, least: u64) -> Result<u64> {
    let mut pos = tx.open_table(POSITION)?;
    let floor = pos.get(POS_FLOOR)?.map(|g| g.value()).unwrap_or(0);
    let end = pos.get(POS_END)?.map(|g| g.value()).unwrap_or(0);
    // HEAD never passes the end; a HEAD beyond it is left to the opening
    // checks, which refuse it.
    if archived > end || archived < floor + least {
        return Ok(0);
    }
    let mut records = tx.open_table(RECORDS)?;
    let mut removed = 0;
    records.retain_in(floor + 1..=archived, |_, _| {
        removed += 1;
        false
    })?;
    pos.insert(POS_FLOOR, archived)?;
    Ok(removed)
}

impl WriteTx {
    /// Change the durability: `None` for benchmarks and a streamed
    /// preparation's staging transactions between two flushed ones, whose
    /// records the archive publishes only once a flushed commit covers them.
    pub fn set_durability(&mut self, d: Durability) -> Result<()> {
        self.inner.set_durability(d)?;
        self.flushed = matches!(d, Durability::Immediate);
        Ok(())
    }

    /// Open (creating) a table; recorded as a declaration unless
    /// `scribe_recovery_types` already holds the same types.
    pub fn open_table<K: Key + Column, V: Column>(
        &self,
        def: TableDefinition<K, V>,
    ) -> Result<JTable<'_, K, V>> {
        let name = def.name();
        let table = self.inner.open_table(def)?;
        self.declare(name, K::TYPE, V::TYPE)?;
        Ok(JTable {
            table,
            name: name.to_owned(),
            tx: self,
        })
    }

    fn declare(&self, name: &str, key: ColumnType, value: ColumnType) -> Result<()> {
        if self.log.borrow().declared.contains(name) {
            return Ok(());
        }
        let want = [key.byte(), value.byte()];
        let mut types = self.inner.open_table(TYPES)?;
        let known = types.get(name)?.map(|g| g.value() == want.as_slice());
        if known != Some(true) {
            let mut rec = Vec::new();
            rj::encode_declare(&mut rec, name, key, value).map_err(MetadataError::journal)?;
            types.insert(name, want.as_slice())?;
            drop(types);
            self.push(rec)?;
        }
        self.log.borrow_mut().declared.insert(name.to_owned());
        Ok(())
    }

    /// Delete a table; recorded as a drop when it existed.
    pub fn delete_table<K: Key + Column, V: Column>(
        &self,
        def: TableDefinition<K, V>,
    ) -> Result<bool> {
        let name = def.name().to_owned();
        let existed = self.inner.delete_table(def)?;
        if existed {
            let mut rec = Vec::new();
            rj::encode_drop(&mut rec, &name).map_err(MetadataError::journal)?;
            self.inner.open_table(TYPES)?.remove(name.as_str())?;
            self.log.borrow_mut().declared.remove(&name);
            self.push(rec)?;
        }
        Ok(existed)
    }

    fn push(&self, rec: Vec<u8>) -> Result<()> {
        let spill = {
            let mut log = self.log.borrow_mut();
            log.buf_bytes += rec.len();
            log.buf.push(rec);
            log.count += 1;
            log.buf_bytes >= SPILL_BYTES
        };
        if spill {
            self.spill()?;
        }
        Ok(())
    }

    /// Write the buffered records to the outbox at the next sequences.
    fn spill(&self) -> Result<()> {
        let mut log = self.log.borrow_mut();
        if log.buf.is_empty() {
            return Ok(());
        }
        let mut next = match log.next {
            Some(n) => n,
            None => {
                let end = self
                    .inner
                    .open_table(POSITION)?
                    .get(POS_END)?
                    .map(|g| g.value())
                    .ok_or_else(|| MetadataError::corrupt("recovery end is missing"))?;
                end + 1
            }
        };
        let mut records = self.inner.open_table(RECORDS)?;
        for rec in log.buf.drain(..) {
            records.insert(next, rec.as_slice())?;
            next += 1;
        }
        log.buf_bytes = 0;
        log.next = Some(next);
        Ok(())
    }

    /// Records of this transaction so far (0: nothing was journaled).
    pub fn recorded(&self) -> u64 {
        self.log.borrow().count
    }

    /// Append the commit boundary, store the new end and commit. A
    /// transaction that recorded nothing commits without a boundary.
    pub fn commit(self) -> Result<()> {
        let archive = self.archive.clone();
        let end = self.commit_unpublished()?;
        // The barrier: archived before the write is acknowledged (by the
        // enclosing `coalesce_publication` when there is one).
        if let (Some(end), Some(archive)) = (end, &archive) {
            if DEFER.with(|d| d.get()) == 0 {
                archive.publish_through(end)?;
            } else {
                PENDING.with(|p| {
                    let mut p = p.borrow_mut();
                    match p
                        .iter_mut()
                        .find(|(a, _)| std::sync::Arc::ptr_eq(a, archive))
                    {
                        Some((_, e)) => *e = (*e).max(end),
                        None => p.push((archive.clone(), end)),
                    }
                });
            }
        }
        Ok(())
    }

    /// Commit like [`WriteTx::commit`] but leave the archive publication
    /// to the caller: returns the last sequence committed, `None` when
    /// nothing was journaled. The caller publishes through it
    /// ([`crate::archive::Archive::publish_through`]) before acknowledging.
    pub(crate) fn commit_unpublished(self) -> Result<Option<u64>> {
        if self.log.borrow().count > 0 {
            let mut rec = Vec::new();
            rj::encode_commit(&mut rec);
            {
                let mut log = self.log.borrow_mut();
                log.buf.push(rec);
                log.count += 1;
            }
            self.spill()?;
            let end = self.log.borrow().next.unwrap_or(1) - 1;
            self.inner.open_table(POSITION)?.insert(POS_END, end)?;
        }
        let recorded = self.log.borrow().count > 0;
        let end = self.log.borrow().next.unwrap_or(1) - 1;
        let (archive, flushed) = (self.archive.clone(), self.flushed);
        self.inner.commit()?;
        if let (true, true, Some(a)) = (recorded, flushed, &archive) {
            a.note_durable(end);
        }
        Ok(recorded.then_some(end))
    }

    /// Abort: neither rows nor records are exposed.
    pub fn abort(self) -> Result<()> {
        self.inner.abort()?;
        Ok(())
    }
}

type Pending = Vec<(std::sync::Arc<crate::archive::Archive>, u64)>;

thread_local! {
    static DEFER: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    /// Archives (with the last sequence committed to each) whose
    /// publication the outermost `coalesce_publication` of this thread owes.
    static PENDING: RefCell<Pending> = const { RefCell::new(Vec::new()) };
}

/// Run `f`, whose archived commits (on this thread) skip their own
/// publication, then publish once for all of them before returning, even
/// when `f` failed: nothing `f` committed is acknowledged before it is
/// archived, and consecutive transactions of one operation share one
/// archive flush. Nested calls defer to the outermost, so a caller that
/// takes the repository's locks inside `f` publishes after releasing them
/// and the next writer commits while this one's archive flush runs.
pub fn coalesce_publication<T>(
    archive: &crate::archive::Archive,
    f: impl FnOnce() -> Result<T>,
) -> Result<T> {
    DEFER.with(|d| d.set(d.get() + 1));
    let r = f();
    let outermost = DEFER.with(|d| {
        d.set(d.get() - 1);
        d.get() == 0
    });
    if !outermost {
        return r;
    }
    let owed = PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()));
    // Every archive this thread committed to is published through its last
    // commit, even when `f` failed after committing; `archive` as a whole
    // when `f` committed nothing (a replayed outcome still crosses the
    // barrier its original may be publishing).
    let mut published = if owed.is_empty() {
        archive.publish()
    } else {
        Ok(())
    };
    for (a, end) in owed {
        let p = a.publish_through(end);
        if published.is_ok() {
            published = p;
        }
    }
    let v = r?;
    published?;
    Ok(v)
}

/// A put's recovery record, encoded away from the write transaction that
/// writes its row ([`JTable::insert_encoded`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PutRecord(Vec<u8>);

impl PutRecord {
    /// The put record of `key` → `value` in table `name`.
    pub fn encode(name: &str, key: &[u8], value: &[u8]) -> Result<PutRecord> {
        let mut rec = Vec::with_capacity(2 + 2 + name.len() + 4 + key.len() + 4 + value.len());
        rj::encode_put(&mut rec, name, key, value).map_err(MetadataError::journal)?;
        Ok(PutRecord(rec))
    }
}

/// A table of a [`WriteTx`]: reads as the redb table, records mutations.
pub struct JTable<'t, K: Key + Column, V: Column> {
    table: Table<'t, K, V>,
    name: String,
    tx: &'t WriteTx,
}

impl<'t, K: Key + Column, V: Column> Deref for JTable<'t, K, V> {
    type Target = Table<'t, K, V>;
    fn deref(&self) -> &Self::Target {
        &self.table
    }
}

impl<K: Key + Column, V: Column> JTable<'_, K, V> {
    /// Insert a row, recorded as a put.
    pub fn insert<'k, 'v>(
        &mut self,
        key: impl Borrow<K::SelfType<'k>>,
        value: impl Borrow<V::SelfType<'v>>,
    ) -> Result<Option<AccessGuard<'_, V>>> {
        let rec = PutRecord::encode(
            &self.name,
            K::as_bytes(key.borrow()).as_ref(),
            V::as_bytes(value.borrow()).as_ref(),
        )?;
        self.tx.push(rec.0)?;
        Ok(self.table.insert(key, value)?)
    }

    /// Insert a row whose put record was encoded ahead, by the thread that
    /// made the row ([`PutRecord`]: a streamed preparation's producer,
    /// beside the one writer). The record is compared with this table's
    /// name and the row in place; one that is not exactly their put is
    /// refused and nothing is written.
    pub fn insert_encoded<'k, 'v>(
        &mut self,
        key: impl Borrow<K::SelfType<'k>>,
        value: impl Borrow<V::SelfType<'v>>,
        rec: PutRecord,
    ) -> Result<Option<AccessGuard<'_, V>>> {
        if !rj::is_put_record(
            &rec.0,
            &self.name,
            K::as_bytes(key.borrow()).as_ref(),
            V::as_bytes(value.borrow()).as_ref(),
        ) {
            return Err(MetadataError::Gate(format!(
                "a put record encoded ahead is not the row written to {}",
                self.name
            )));
        }
        self.tx.push(rec.0)?;
        Ok(self.table.insert(key, value)?)
    }

    /// Remove a row, recorded as a remove when it existed.
    pub fn remove<'k>(
        &mut self,
        key: impl Borrow<K::SelfType<'k>>,
    ) -> Result<Option<AccessGuard<'_, V>>> {
        let mut rec = Vec::new();
        rj::encode_remove(&mut rec, &self.name, K::as_bytes(key.borrow()).as_ref())
            .map_err(MetadataError::journal)?;
        let old = self.table.remove(key)?;
        if old.is_some() {
            self.tx.push(rec)?;
        }
        Ok(old)
    }
}

impl<K: Key + Column, V: Column> ReadableTableMetadata for JTable<'_, K, V> {
    fn stats(&self) -> redb::Result<TableStats> {
        self.table.stats()
    }
    fn len(&self) -> redb::Result<u64> {
        self.table.len()
    }
}

impl<K: Key + Column, V: Column> ReadableTable<K, V> for JTable<'_, K, V> {
    fn get<'a>(
        &self,
        key: impl Borrow<K::SelfType<'a>>,
    ) -> redb::Result<Option<AccessGuard<'_, V>>> {
        self.table.get(key)
    }

    fn range<'a, KR>(&self, range: impl RangeBounds<KR> + 'a) -> redb::Result<redb::Range<'_, K, V>>
    where
        KR: Borrow<K::SelfType<'a>> + 'a,
    {
        self.table.range(range)
    }

    fn first(&self) -> redb::Result<Option<(AccessGuard<'_, K>, AccessGuard<'_, V>)>> {
        self.table.first()
    }

    fn last(&self) -> redb::Result<Option<(AccessGuard<'_, K>, AccessGuard<'_, V>)>> {
        self.table.last()
    }

    fn lower_bound<'a>(
        &self,
        bound: Bound<impl Borrow<K::SelfType<'a>>>,
    ) -> redb::Result<redb::Cursor<'_, K, V>> {
        self.table.lower_bound(bound)
    }

    fn upper_bound<'a>(
        &self,
        bound: Bound<impl Borrow<K::SelfType<'a>>>,
    ) -> redb::Result<redb::Cursor<'_, K, V>> {
        self.table.upper_bound(bound)
    }
}

impl MetadataError {
    pub(crate) fn journal(e: RecoveryError) -> MetadataError {
        MetadataError::Recovery {
            path: PathBuf::new(),
            offset: 0,
            source: e,
        }
    }
}

/// Call `$f::<K, V>($args)` for the redb types of a pair of column types.
macro_rules! with_types {
    ($kt:expr, $vt:expr, $f:ident ( $($args:expr),* )) => {
        match $kt {
            ColumnType::Bytes => with_types!(@v &'static [u8], $vt, $f($($args),*)),
            ColumnType::Utf8 => with_types!(@v &'static str, $vt, $f($($args),*)),
            ColumnType::Id16 => with_types!(@v [u8; 16], $vt, $f($($args),*)),
            ColumnType::U64 => with_types!(@v u64, $vt, $f($($args),*)),
        }
    };
    (@v $k:ty, $vt:expr, $f:ident ( $($args:expr),* )) => {
        match $vt {
            ColumnType::Bytes => $f::<$k, &'static [u8]>($($args),*),
            ColumnType::Utf8 => $f::<$k, &'static str>($($args),*),
            ColumnType::Id16 => $f::<$k, [u8; 16]>($($args),*),
            ColumnType::U64 => $f::<$k, u64>($($args),*),
        }
    };
}

fn create_typed<K: Key + 'static, V: Value + 'static>(
    tx: &WriteTransaction,
    name: &str,
) -> Result<()> {
    tx.open_table(TableDefinition::<K, V>::new(name))?;
    Ok(())
}

fn drop_typed<K: Key + 'static, V: Value + 'static>(
    tx: &WriteTransaction,
    name: &str,
) -> Result<()> {
    tx.delete_table(TableDefinition::<K, V>::new(name))?;
    Ok(())
}

type Rows = Vec<(Vec<u8>, Vec<u8>)>;

fn dump_typed<K: Key + 'static, V: Value + 'static>(
    tx: &ReadTransaction,
    name: &str,
) -> Result<Rows> {
    let t = tx.open_table(TableDefinition::<K, V>::new(name))?;
    let mut out = Vec::new();
    for row in t.iter()? {
        let (k, v) = row?;
        out.push((
            K::as_bytes(&k.value()).as_ref().to_vec(),
            V::as_bytes(&v.value()).as_ref().to_vec(),
        ));
    }
    Ok(out)
}

/// The writer of a logical base file.
pub(crate) type BaseFileWriter = scribe_format::recovery_base::BaseWriter<BufWriter<std::fs::File>>;

fn base_typed<K: Key + 'static, V: Value + 'static>(
    tx: &ReadTransaction,
    name: &str,
    w: &mut BaseFileWriter,
) -> Result<u64> {
    let t = match tx.open_table(TableDefinition::<K, V>::new(name)) {
        Ok(t) => t,
        Err(TableError::TableDoesNotExist(_)) => return Ok(0),
        Err(e) => return Err(e.into()),
    };
    let mut rows = 0;
    for row in t.iter()? {
        let (k, v) = row?;
        w.put(
            name,
            K::as_bytes(&k.value()).as_ref(),
            V::as_bytes(&v.value()).as_ref(),
        )
        .map_err(MetadataError::journal)?;
        rows += 1;
    }
    Ok(rows)
}

/// Write every journaled table of `tx` (declaration, then its rows in key
/// order) into a logical base; returns (tables, rows).
pub(crate) fn write_base(tx: &ReadTransaction, w: &mut BaseFileWriter) -> Result<(u64, u64)> {
    let mut tables = 0;
    let mut rows = 0;
    for (name, (kt, vt)) in recorded_types(tx)? {
        w.declare(&name, kt, vt).map_err(MetadataError::journal)?;
        tables += 1;
        rows += with_types!(kt, vt, base_typed(tx, &name, w))?;
    }
    Ok((tables, rows))
}

/// The recorded types of every journaled table.
pub fn recorded_types(tx: &ReadTransaction) -> Result<BTreeMap<String, (ColumnType, ColumnType)>> {
    let t = tx.open_table(TYPES)?;
    let mut out = BTreeMap::new();
    for row in t.iter()? {
        let (k, v) = row?;
        let name = k.value().to_owned();
        let types = match v.value() {
            [k, v] => (
                ColumnType::from_byte(*k).map_err(MetadataError::journal)?,
                ColumnType::from_byte(*v).map_err(MetadataError::journal)?,
            ),
            other => {
                return Err(MetadataError::corrupt(format!(
                    "recovery types of {name:?}: {} bytes, not 2",
                    other.len()
                )))
            }
        };
        out.insert(name, types);
    }
    Ok(out)
}

/// Every journaled table's rows as raw key/value bytes, read through its
/// recorded types (for row-by-row comparisons and logical bases).
pub fn dump_rows(db: &Database) -> Result<BTreeMap<String, Rows>> {
    let tx = db.begin_read()?;
    let mut out = BTreeMap::new();
    for (name, (kt, vt)) in recorded_types(&tx)? {
        let rows = with_types!(kt, vt, dump_typed(&tx, &name))?;
        out.insert(name, rows);
    }
    Ok(out)
}

/// Export the outbox rows `after + 1 ..= end` of `db` as one `.scrj`
/// segment at `to` (through a flushed `<to>.tmp` renamed into place).
/// Refuses `after` below the retained floor, beyond the end or not at a
/// commit boundary, a missing sequence and a record that does not decode.
pub fn export_segment(db: &Database, after: u64, to: &Path) -> Result<SegmentHeader> {
    let tx = db.begin_read()?;
    let profile = check_profile(&tx, to)?;
    let refuse = |detail: String| MetadataError::refused(ErrorCode::Usage, detail);
    if after < profile.floor || after > profile.end {
        return Err(refuse(format!(
            "cursor {after} is outside the retained journal {}..={}",
            profile.floor, profile.end
        )));
    }
    let records = tx.open_table(RECORDS)?;
    if after > profile.floor {
        let at = records.get(after)?.map(|g| g.value().to_vec());
        if at.as_deref() != Some([rj::RECORD_VERSION, 5].as_slice()) {
            return Err(refuse(format!("cursor {after} is not a commit boundary")));
        }
    }
    let header = SegmentHeader {
        identity: profile.identity,
        after,
        end: profile.end,
    };
    let tmp = tmp_path(to);
    let result = (|| -> Result<()> {
        let f = std::fs::File::create(&tmp).map_err(|e| MetadataError::io(&tmp, e))?;
        let mut w =
            SegmentWriter::new(BufWriter::new(f), header).map_err(|e| seg_err(&tmp, 0, e))?;
        let mut expected = after + 1;
        let mut offset = rj::SEGMENT_HEADER as u64;
        let mut check = TypeCheck::default();
        for row in records.range(after + 1..=profile.end)? {
            let (k, v) = row?;
            let seq = k.value();
            if seq != expected {
                return Err(MetadataError::corrupt(format!(
                    "recovery outbox: sequence {expected} is missing (next is {seq})"
                )));
            }
            let rec = Record::decode(v.value()).map_err(|e| MetadataError::Recovery {
                path: PathBuf::from(rj::TABLE_RECORDS),
                offset: seq,
                source: e,
            })?;
            // Types are checked when the export starts at the beginning.
            if after == 0 {
                check.apply(&rec).map_err(|e| MetadataError::Recovery {
                    path: PathBuf::from(rj::TABLE_RECORDS),
                    offset: seq,
                    source: e,
                })?;
            }
            w.record(seq, v.value())
                .map_err(|e| seg_err(&tmp, offset, e))?;
            offset += 12 + v.value().len() as u64;
            expected += 1;
        }
        if expected != profile.end + 1 {
            return Err(MetadataError::corrupt(format!(
                "recovery outbox: sequence {expected} is missing (end is {})",
                profile.end
            )));
        }
        let (bw, _, _) = w.finish().map_err(|e| seg_err(&tmp, offset, e))?;
        let f = bw
            .into_inner()
            .map_err(|e| MetadataError::io(&tmp, e.into_error()))?;
        f.sync_all().map_err(|e| MetadataError::io(&tmp, e))?;
        std::fs::rename(&tmp, to).map_err(|e| MetadataError::io(to, e))?;
        if let Some(dir) = to.parent().filter(|d| !d.as_os_str().is_empty()) {
            sync_dir(dir)?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map(|()| header)
}

pub(crate) fn tmp_path(p: &Path) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(".tmp");
    PathBuf::from(s)
}

fn seg_err(path: &Path, offset: u64, source: RecoveryError) -> MetadataError {
    MetadataError::Recovery {
        path: path.to_owned(),
        offset,
        source,
    }
}

/// The quarantine file replay writes before publishing `target`.
pub fn quarantine_path(target: &Path) -> PathBuf {
    let mut s = target.as_os_str().to_owned();
    s.push(".replay");
    PathBuf::from(s)
}

/// What a replay rebuilt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replayed {
    pub identity: [u8; 16],
    pub end: u64,
    pub records: u64,
    pub transactions: u64,
    /// Rows checked but not applied: a later drop of their table discards
    /// them (see [`Replayer::skip_dropped`]).
    pub skipped: u64,
}

/// Rebuild a database at `target` (which must not exist) from `.scrj`
/// segments starting at 0, in order. Each segment is streamed, decoded and
/// hashed; identities (all equal, and `expect` when given), continuity
/// (each `after` is the previous `end`), types and commit boundaries are
/// checked; records are applied in batches of at most 512 records / ~4 MiB
/// to the quarantine file `<target>.replay`, which is renamed to `target`
/// only after every segment verified and the bookkeeping committed. Any
/// refusal removes the quarantine file.
pub fn replay(segments: &[PathBuf], target: &Path, expect: Option<[u8; 16]>) -> Result<Replayed> {
    if target.exists() {
        return Err(MetadataError::refused(
            ErrorCode::AlreadyExists,
            format!(
                "{} exists; replay publishes only a new file",
                target.display()
            ),
        ));
    }
    if segments.is_empty() {
        return Err(MetadataError::refused(
            ErrorCode::Usage,
            "replay needs at least one segment",
        ));
    }
    let quarantine = quarantine_path(target);
    if quarantine.exists() {
        std::fs::remove_file(&quarantine).map_err(|e| MetadataError::io(&quarantine, e))?;
    }
    let result = replay_into(segments, &quarantine, expect);
    match result {
        Ok(done) => {
            std::fs::rename(&quarantine, target).map_err(|e| MetadataError::io(target, e))?;
            if let Some(dir) = target.parent().filter(|d| !d.as_os_str().is_empty()) {
                sync_dir(dir)?;
            }
            Ok(done)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&quarantine);
            Err(e)
        }
    }
}

fn replay_into(
    segments: &[PathBuf],
    quarantine: &Path,
    expect: Option<[u8; 16]>,
) -> Result<Replayed> {
    let mut r = Replayer::new(quarantine, expect)?;
    for path in segments {
        let f = std::fs::File::open(path).map_err(|e| MetadataError::io(path, e))?;
        r.feed(path, 0, BufReader::with_capacity(1 << 20, f))?;
    }
    r.finish()
}

/// Applies `.scrj` segments, in order, to a quarantine database it
/// creates; [`Replayer::finish`] writes the recovery bookkeeping and flushes
/// it. The caller publishes (renames) the file, or deletes it on a refusal.
pub struct Replayer {
    applier: Applier,
    quarantine: PathBuf,
    identity: Option<[u8; 16]>,
    expected_after: u64,
    check: TypeCheck,
    batch: Vec<Record>,
    batch_bytes: usize,
    records: u64,
    transactions: u64,
    last: PathBuf,
    /// Per table, the segment-record index of its last drop: rows written
    /// before it are never applied (see [`Replayer::skip_dropped`]).
    dropped: std::collections::HashMap<String, u64>,
    /// Index of the next segment record fed.
    index: u64,
    skipped: u64,
}

impl Replayer {
    /// Create the quarantine database at `quarantine`.
    pub fn new(quarantine: &Path, expect: Option<[u8; 16]>) -> Result<Replayer> {
        Ok(Replayer {
            applier: Applier::start(Database::create(quarantine)?),
            quarantine: quarantine.to_owned(),
            identity: expect,
            expected_after: 0,
            check: TypeCheck::default(),
            batch: Vec::new(),
            batch_bytes: 0,
            records: 0,
            transactions: 0,
            last: PathBuf::new(),
            dropped: std::collections::HashMap::new(),
            index: 0,
            skipped: 0,
        })
    }

    /// Skip the rows of tables the journal drops later: `dropped` maps a
    /// table to the index (counted over the records of the segments fed,
    /// from 0) of its last `Drop`. Puts and removes before that index, and
    /// every base row of such a table, are checked but not applied: the
    /// drop would discard them (streamed acceptance writes its stage and
    /// undo rows to tables it drops, often half of all records). The
    /// result is the same database, built with fewer writes.
    pub fn skip_dropped(&mut self, dropped: std::collections::HashMap<String, u64>) {
        self.dropped = dropped;
    }

    fn dead(&self, rec: &Record, index: Option<u64>) -> bool {
        match rec {
            Record::Put { name, .. } | Record::Remove { name, .. } => {
                match (self.dropped.get(name), index) {
                    (Some(last_drop), Some(i)) => i < *last_drop,
                    (Some(_), None) => true,
                    (None, _) => false,
                }
            }
            _ => false,
        }
    }

    /// The journal end replayed so far.
    pub fn end(&self) -> u64 {
        self.expected_after
    }

    /// Apply one segment read from `reader`; refusals name `path` and the
    /// byte offset (`base` plus the offset inside the segment).
    pub fn feed(&mut self, path: &Path, base: u64, reader: impl std::io::Read) -> Result<()> {
        self.last = path.to_owned();
        let mut reader = SegmentReader::new(reader).map_err(|e| seg_err(path, base, e))?;
        let header = reader.header();
        let want = *self.identity.get_or_insert(header.identity);
        if header.identity != want {
            return Err(seg_err(
                path,
                base + 6,
                RecoveryError::IdentityMismatch {
                    expected: hex::encode(want),
                    found: hex::encode(header.identity),
                },
            ));
        }
        if header.after != self.expected_after {
            return Err(seg_err(
                path,
                base + 22,
                RecoveryError::SegmentGap {
                    expected: self.expected_after,
                    found: header.after,
                },
            ));
        }
        loop {
            let offset = reader.offset();
            let Some((_, rec)) = reader
                .next_record()
                .map_err(|e| seg_err(path, base + reader.offset(), e))?
            else {
                break;
            };
            self.check
                .apply(&rec)
                .map_err(|e| seg_err(path, base + offset, e))?;
            self.records += 1;
            if rec == Record::Commit {
                self.transactions += 1;
            }
            let index = self.index;
            self.index += 1;
            if self.dead(&rec, Some(index)) {
                self.skipped += 1;
                continue;
            }
            self.batch_bytes += record_size(&rec);
            self.batch.push(rec);
            if self.batch.len() >= REPLAY_BATCH_RECORDS || self.batch_bytes >= REPLAY_BATCH_BYTES {
                self.applier.send(std::mem::take(&mut self.batch))?;
                self.batch_bytes = 0;
            }
        }
        self.expected_after = header.end;
        Ok(())
    }

    /// Apply entries of a logical base (declarations and puts, already
    /// checked by the base reader) before any segment is fed.
    pub fn load(&mut self, entries: Vec<Record>) -> Result<()> {
        if self.expected_after != 0 || self.transactions != 0 {
            return Err(MetadataError::refused(
                ErrorCode::Usage,
                "a logical base is loaded before any segment",
            ));
        }
        for rec in entries {
            self.records += 1;
            if self.dead(&rec, None) {
                self.skipped += 1;
                continue;
            }
            self.batch_bytes += record_size(&rec);
            self.batch.push(rec);
            if self.batch.len() >= REPLAY_BATCH_RECORDS || self.batch_bytes >= REPLAY_BATCH_BYTES {
                self.applier.send(std::mem::take(&mut self.batch))?;
                self.batch_bytes = 0;
            }
        }
        Ok(())
    }

    /// The loaded base ends at journal position `end` with the types its
    /// reader checked (`types`, at a commit boundary): segments continue
    /// after it.
    pub fn loaded_base(&mut self, end: u64, types: TypeCheck) {
        self.check = types;
        self.expected_after = end;
    }

    /// Check the journal ended on a boundary, apply the rest, write the
    /// bookkeeping (identity, end = floor = the replayed end, types) and
    /// flush the quarantine file.
    pub fn finish(mut self) -> Result<Replayed> {
        if self.check.pending() != 0 {
            return Err(seg_err(
                &self.last,
                0,
                RecoveryError::IncompleteTransaction {
                    sequence: self.expected_after,
                },
            ));
        }
        self.applier.send(std::mem::take(&mut self.batch))?;
        let db = self.applier.finish()?;
        let identity = self.identity.unwrap_or_default();
        let mut tx = db.begin_write()?;
        tx.set_durability(Durability::Immediate)?;
        write_bookkeeping(&tx, identity, self.expected_after, self.check.types())?;
        tx.commit()?;
        drop(db);
        let f = std::fs::File::open(&self.quarantine)
            .map_err(|e| MetadataError::io(&self.quarantine, e))?;
        f.sync_all()
            .map_err(|e| MetadataError::io(&self.quarantine, e))?;
        Ok(Replayed {
            identity,
            end: self.expected_after,
            records: self.records,
            transactions: self.transactions,
            skipped: self.skipped,
        })
    }
}

/// Applies batches on its own thread while the caller reads, decodes and
/// hashes the next ones (replay reads "outside write transactions"): at
/// most two batches wait. A failed batch stops the thread; the next send
/// or `finish` returns its error.
struct Applier {
    tx: Option<std::sync::mpsc::SyncSender<Vec<Record>>>,
    handle: Option<std::thread::JoinHandle<Result<Database>>>,
}

impl Applier {
    fn start(db: Database) -> Applier {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Record>>(2);
        let handle = std::thread::spawn(move || -> Result<Database> {
            let mut types = BTreeMap::new();
            for mut batch in rx {
                apply_batch(&db, &mut batch, &mut types)?;
            }
            Ok(db)
        });
        Applier {
            tx: Some(tx),
            handle: Some(handle),
        }
    }

    fn send(&mut self, batch: Vec<Record>) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let failed = match &self.tx {
            Some(tx) => tx.send(batch).is_err(),
            None => true,
        };
        if failed {
            return Err(self
                .join()
                .err()
                .unwrap_or_else(|| MetadataError::Gate("the replay applier stopped".into())));
        }
        Ok(())
    }

    fn join(&mut self) -> Result<Database> {
        self.tx = None;
        match self.handle.take() {
            Some(h) => h
                .join()
                .map_err(|_| MetadataError::Gate("the replay applier panicked".into()))?,
            None => Err(MetadataError::Gate("the replay applier stopped".into())),
        }
    }

    fn finish(&mut self) -> Result<Database> {
        self.join()
    }
}

impl Drop for Applier {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn record_size(r: &Record) -> usize {
    match r {
        Record::Put { key, value, .. } => key.len() + value.len() + 64,
        Record::Remove { key, .. } => key.len() + 64,
        _ => 64,
    }
}

/// Apply checked records with their declared types (`types` follows the
/// declarations and drops as they are applied). Batches commit without
/// fsync: the quarantine file is flushed once at the end and is never
/// published after an interruption.
fn apply_batch(
    db: &Database,
    batch: &mut Vec<Record>,
    types: &mut BTreeMap<String, (ColumnType, ColumnType)>,
) -> Result<()> {
    if batch.is_empty() {
        return Ok(());
    }
    let mut tx = db.begin_write()?;
    tx.set_durability(Durability::None)?;
    let lookup = |types: &BTreeMap<String, (ColumnType, ColumnType)>, name: &str| {
        types
            .get(name)
            .copied()
            .ok_or_else(|| MetadataError::journal(RecoveryError::UndeclaredTable(name.to_owned())))
    };
    let recs: Vec<Record> = std::mem::take(batch);
    let mut i = 0;
    while i < recs.len() {
        match &recs[i] {
            Record::Put { name, .. } | Record::Remove { name, .. } => {
                // A run of rows of one table opens it once.
                let mut j = i + 1;
                while j < recs.len()
                    && matches!(&recs[j], Record::Put { name: n, .. } | Record::Remove { name: n, .. } if n == name)
                {
                    j += 1;
                }
                let (kt, vt) = lookup(types, name)?;
                with_types!(kt, vt, apply_run(&tx, name, &recs[i..j]))?;
                i = j;
                continue;
            }
            Record::Declare { name, key, value } => {
                with_types!(*key, *value, create_typed(&tx, name))?;
                types.insert(name.clone(), (*key, *value));
            }
            Record::Drop { name } => {
                let (kt, vt) = lookup(types, name)?;
                with_types!(kt, vt, drop_typed(&tx, name))?;
                types.remove(name);
            }
            Record::Commit => {}
        }
        i += 1;
    }
    tx.commit()?;
    Ok(())
}

// Widths and UTF-8 were checked by `TypeCheck` before this runs, so
// `from_bytes` (which panics on a wrong width or invalid UTF-8) is safe.
fn apply_run<K: Key + 'static, V: Value + 'static>(
    tx: &WriteTransaction,
    name: &str,
    run: &[Record],
) -> Result<()> {
    let mut t = tx.open_table(TableDefinition::<K, V>::new(name))?;
    for rec in run {
        match rec {
            Record::Put { key, value, .. } => {
                t.insert(K::from_bytes(key), V::from_bytes(value))?;
            }
            Record::Remove { key, .. } => {
                t.remove(K::from_bytes(key))?;
            }
            _ => {}
        }
    }
    Ok(())
}

// Widths and UTF-8 are checked before this runs, so `from_bytes` (which
// panics on a wrong width or invalid UTF-8) is safe.
fn put_typed<K: Key + 'static, V: Value + 'static>(
    tx: &WriteTransaction,
    name: &str,
    key: &[u8],
    value: &[u8],
) -> Result<()> {
    let mut t = tx.open_table(TableDefinition::<K, V>::new(name))?;
    t.insert(K::from_bytes(key), V::from_bytes(value))?;
    Ok(())
}

/// Flush helper for writers of segments outside this module.
pub fn flush_file(f: &mut std::fs::File, path: &Path) -> Result<()> {
    f.flush().map_err(|e| MetadataError::io(path, e))?;
    f.sync_all().map_err(|e| MetadataError::io(path, e))
}

/// Insert one row given as raw bytes into table `name` of the types
/// `(kt, vt)`, creating the table; widths and UTF-8 are checked first, so
/// no bytes can make it panic (import of `.scmx` rows).
pub fn put_raw(
    tx: &WriteTransaction,
    name: &str,
    (kt, vt): (ColumnType, ColumnType),
    key: &[u8],
    value: &[u8],
) -> Result<()> {
    kt.check(name, "key", key).map_err(MetadataError::journal)?;
    vt.check(name, "value", value)
        .map_err(MetadataError::journal)?;
    with_types!(kt, vt, put_typed(tx, name, key, value))
}

/// Create table `name` with types `(kt, vt)` (nothing when it exists).
pub fn create_raw(
    tx: &WriteTransaction,
    name: &str,
    (kt, vt): (ColumnType, ColumnType),
) -> Result<()> {
    with_types!(kt, vt, create_typed(tx, name))
}

type RowFn<'a> = dyn FnMut(&[u8], &[u8]) -> Result<()> + 'a;

fn each_typed<K: Key + 'static, V: Value + 'static>(
    tx: &ReadTransaction,
    name: &str,
    f: &mut RowFn<'_>,
) -> Result<()> {
    let t = tx.open_table(TableDefinition::<K, V>::new(name))?;
    for row in t.iter()? {
        let (k, v) = row?;
        f(
            K::as_bytes(&k.value()).as_ref(),
            V::as_bytes(&v.value()).as_ref(),
        )?;
    }
    Ok(())
}

/// The number of rows of table `name` read through its types.
pub fn row_count(
    tx: &ReadTransaction,
    name: &str,
    (kt, vt): (ColumnType, ColumnType),
) -> Result<u64> {
    fn count<K: Key + 'static, V: Value + 'static>(
        tx: &ReadTransaction,
        name: &str,
    ) -> Result<u64> {
        Ok(tx.open_table(TableDefinition::<K, V>::new(name))?.len()?)
    }
    with_types!(kt, vt, count(tx, name))
}

/// Stream every row of table `name` (in key order) as raw bytes, one at a
/// time, read through its recorded types.
pub fn for_each_row(
    tx: &ReadTransaction,
    name: &str,
    (kt, vt): (ColumnType, ColumnType),
    mut f: impl FnMut(&[u8], &[u8]) -> Result<()>,
) -> Result<()> {
    let f: &mut RowFn<'_> = &mut f;
    with_types!(kt, vt, each_typed(tx, name, f))
}

/// Give the database at `db` a new identity and a journal that starts
/// from its present state: the outbox is emptied, end and floor go to 0,
/// and every journaled table is recorded again as a declaration followed
/// by its rows, in transactions of about 4 MiB each ending on a commit
/// boundary. `each` runs after every committed transaction (the caller
/// publishes it to a fresh archive). Used where a database begins a new
/// life (restore, import): its journal and archive must never chain onto
/// the source's. Returns the new profile.
pub fn rewrite_from_state(db: &Database, mut each: impl FnMut() -> Result<()>) -> Result<Profile> {
    let identity = RepositoryId::random().0;
    {
        let mut tx = db.begin_write()?;
        tx.set_durability(Durability::Immediate)?;
        tx.delete_table(RECORDS)?;
        tx.open_table(RECORDS)?;
        tx.open_table(IDENTITY)?.insert(0, identity)?;
        let mut pos = tx.open_table(POSITION)?;
        pos.insert(POS_END, 0)?;
        pos.insert(POS_FLOOR, 0)?;
        drop(pos);
        tx.commit()?;
    }
    let snapshot = db.begin_read()?;
    let types = recorded_types(&snapshot)?;
    let mut next = 1u64;
    let mut pending: Vec<Vec<u8>> = Vec::new();
    let mut pending_bytes = 0usize;
    let mut flush = |pending: &mut Vec<Vec<u8>>, next: &mut u64| -> Result<()> {
        if pending.is_empty() {
            return Ok(());
        }
        let mut commit = Vec::new();
        rj::encode_commit(&mut commit);
        pending.push(commit);
        let mut tx = db.begin_write()?;
        tx.set_durability(Durability::Immediate)?;
        {
            let mut records = tx.open_table(RECORDS)?;
            for rec in pending.drain(..) {
                records.insert(*next, rec.as_slice())?;
                *next += 1;
            }
            tx.open_table(POSITION)?.insert(POS_END, *next - 1)?;
        }
        tx.commit()?;
        each()
    };
    for (name, (k, v)) in &types {
        let mut rec = Vec::new();
        rj::encode_declare(&mut rec, name, *k, *v).map_err(MetadataError::journal)?;
        pending_bytes += rec.len();
        pending.push(rec);
    }
    for (name, kv) in &types {
        for_each_row(&snapshot, name, *kv, |key, value| {
            let mut rec = Vec::new();
            rj::encode_put(&mut rec, name, key, value).map_err(MetadataError::journal)?;
            pending_bytes += rec.len();
            pending.push(rec);
            if pending_bytes >= REPLAY_BATCH_BYTES {
                flush(&mut pending, &mut next)?;
                pending_bytes = 0;
            }
            Ok(())
        })?;
    }
    flush(&mut pending, &mut next)?;
    Ok(Profile {
        identity,
        end: next - 1,
        floor: 0,
    })
}

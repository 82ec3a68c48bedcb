//! Streamed preparation of large submissions (atomic publication and upload
//! lifecycle profile 1) and its recovery.
//!
//! 1. Under the repository's submit turn, validate against a read snapshot.
//! 2. Reserve the next change: `meta/pending-submit = u64 change ‖ [16]
//!    operation` (Immediate).
//! 3. Stage history, moves, change paths, lineage, new manifest witnesses
//!    and snapshot pages in transactions of at most 512 data rows or 4 MiB,
//!    each data row with its `submit_stage` undo entry (`u8 tag ‖
//!    destination key`) in the same transaction. Nothing staged is visible:
//!    readers exclude revisions above the head, and pages are unreachable
//!    until a root names them. Seed 004 makes each of them Immediate; here
//!    one in [`PUBLISH_EVERY`] is flushed and the flush carries the others
//!    (a deviation in durability only, argued in docs/metadata.md,
//!    "Staging flushes"): a crash can only take back whole staging
//!    transactions, rows and undo entries together, of a preparation that
//!    recovery discards anyway.
//! 4. Under the publication gate, one transaction rechecks the heads, the
//!    lock epoch and the reservation, then writes the commit ledger, roots,
//!    head, live count and the outcome (after the envelope is durable).
//! 5. The undo inventory is discarded in bounded transactions, then the
//!    reservation.
//!
//! Startup and [`Repository::recover_submissions`] finish step 5 for an
//! accepted preparation, or delete every staged row named by the inventory
//! (bounded transactions) for an unaccepted one.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

use redb::{ReadOnlyTable, ReadableDatabase, ReadableTable};
use scribe_format::{ManifestId, ObjectId};

use crate::accept::{
    envelope, produce, record_rejection, validate_state, write_ledger, Ledger, Outcome, Sink,
    Submission, Tx,
};
use crate::error::{MetadataError, Result};
use crate::journal::{JTable, PutRecord};
use crate::records::{
    decode_pending, decode_u64, encode_pending, keys, CommitRecord, OperationRecord,
};
use crate::repo::{branch_head, read_repo_meta, root_at, Repository, StageHook};
use crate::tables::{self, meta, stage_tag};
use crate::tree::{verify_page, Overlay, PageIds};
use scribe_format::snapshot::{Link, Node, RootRow};

/// Most data rows per staging transaction.
pub const STAGE_ROWS: usize = 512;
/// Most key/value bytes per staging transaction.
pub const STAGE_BYTES: usize = 4 * 1024 * 1024;

/// Staging transactions between two flushed ones, and between two archive
/// publications made while the preparation goes on (by a thread beside
/// the writer; the publication before the gate then has only the rest to
/// write).
const PUBLISH_EVERY: u64 = 16;

/// One staging transaction's rows.
#[derive(Default)]
struct StageBatch {
    rows: Vec<(u8, StagedRow)>,
    witnesses: Vec<StagedRow>,
    pages: Vec<(u64, StagedRow)>,
}

/// One staged data row with its undo entry, both put records encoded by
/// the producer that made the row ([`PutRecord`]): the writer, which sets
/// the pace of a large preparation, only checks and writes them.
struct StagedRow {
    key: Vec<u8>,
    value: Vec<u8>,
    rec: PutRecord,
    undo: Undo,
}

/// A staged row's `submit_stage` entry and its put record.
struct Undo {
    key: Vec<u8>,
    rec: PutRecord,
}

impl StagedRow {
    /// Row `key` → `value` of table `name` (undo tag `tag`).
    fn new(tag: u8, name: &str, key: Vec<u8>, value: Vec<u8>) -> Result<StagedRow> {
        let rec = PutRecord::encode(name, &key, &value)?;
        let undo_key = keys::stage(tag, &key);
        let undo = Undo {
            rec: PutRecord::encode(name_of(&tables::SUBMIT_STAGE), &undo_key, &[])?,
            key: undo_key,
        };
        Ok(StagedRow {
            key,
            value,
            rec,
            undo,
        })
    }
}

impl Undo {
    /// Write the undo entry.
    fn write(self, stage: &mut JTable<'_, &'static [u8], &'static [u8]>) -> Result<()> {
        stage.insert_encoded(self.key.as_slice(), [].as_slice(), self.rec)?;
        Ok(())
    }
}

/// A table definition's name, for as long as the definition (a constant).
fn name_of<K: redb::Key + 'static, V: redb::Value + 'static>(
    def: &'static redb::TableDefinition<'static, K, V>,
) -> &'static str {
    redb::TableHandle::name(def)
}

/// The table a data row's undo tag names.
fn table_name(tag: u8) -> Result<&'static str> {
    Ok(match tag {
        stage_tag::HISTORY => name_of(&tables::HISTORY),
        stage_tag::MOVES => name_of(&tables::MOVES),
        stage_tag::CHANGE_PATHS => name_of(&tables::CHANGE_PATHS),
        stage_tag::FILE_LINEAGE => name_of(&tables::FILE_LINEAGE),
        _ => return Err(MetadataError::Gate(format!("row tag {tag}"))),
    })
}

/// Commit one staging transaction: every data row with its undo entry,
/// flushed only when `flush` (every [`PUBLISH_EVERY`]th, docs/metadata.md
/// "Staging flushes").
fn commit_stage(repo: &Repository, b: StageBatch, flush: bool) -> Result<()> {
    let mut wtx = repo.write()?;
    if !flush {
        wtx.set_durability(redb::Durability::None)?;
    }
    {
        let mut stage = wtx.open_table(tables::SUBMIT_STAGE)?;
        let mut history = wtx.open_table(tables::HISTORY)?;
        let mut moves = wtx.open_table(tables::MOVES)?;
        let mut cp = wtx.open_table(tables::CHANGE_PATHS)?;
        let mut lineage = wtx.open_table(tables::FILE_LINEAGE)?;
        let mut manifests = wtx.open_table(tables::ACCEPTED_MANIFESTS)?;
        let mut nodes = wtx.open_table(tables::SNAPSHOT_NODES)?;
        for (tag, r) in b.rows {
            let t = match tag {
                stage_tag::HISTORY => &mut history,
                stage_tag::MOVES => &mut moves,
                stage_tag::CHANGE_PATHS => &mut cp,
                stage_tag::FILE_LINEAGE => &mut lineage,
                _ => return Err(MetadataError::Gate(format!("row tag {tag}"))),
            };
            // The previous value returned by insert detects a collision.
            if t.insert_encoded(r.key.as_slice(), r.value.as_slice(), r.rec)?
                .is_some()
            {
                return Err(MetadataError::Gate(format!(
                    "a staged row (tag {tag}) collides with an existing row"
                )));
            }
            r.undo.write(&mut stage)?;
        }
        for r in b.witnesses {
            if manifests.get(r.key.as_slice())?.is_none() {
                manifests.insert_encoded(r.key.as_slice(), r.value.as_slice(), r.rec)?;
                r.undo.write(&mut stage)?;
            }
        }
        for (id, r) in b.pages {
            if nodes
                .insert_encoded(id, r.value.as_slice(), r.rec)?
                .is_some()
            {
                return Err(MetadataError::Gate(format!("page {id} allocated twice")));
            }
            r.undo.write(&mut stage)?;
        }
    }
    wtx.commit()?;
    Ok(())
}

/// Commits staging batches on its own thread, so preparation of the next
/// batch overlaps the commit of the previous one (at most one waiting).
/// Every [`PUBLISH_EVERY`]th batch is flushed (carrying the unflushed ones
/// before it) and `publish` (the archive publisher beside it) asked to
/// archive what is flushed so far; the last batches are flushed by the
/// publication before the gate ([`crate::archive::Archive::publish_through`]).
fn stage_writer(
    repo: &Repository,
    rx: Receiver<StageBatch>,
    committed: &AtomicU64,
    publish: &SyncSender<()>,
) -> Result<()> {
    for batch in rx {
        // This thread alone counts the commits.
        let n = committed.load(Ordering::Acquire) + 1;
        commit_stage(repo, batch, n.is_multiple_of(PUBLISH_EVERY))?;
        committed.store(n, Ordering::Release);
        if n.is_multiple_of(PUBLISH_EVERY) {
            // Full: a publication is pending and will carry this batch.
            let _ = publish.try_send(());
        }
        if let Ok(h) = repo.stage_hook.lock() {
            if let Some(h) = h.as_ref() {
                h(n);
            }
        }
    }
    Ok(())
}

struct StreamSink<'r> {
    repo: &'r Repository,
    batch: StageBatch,
    /// Pages of the batch being filled.
    pending_nodes: HashMap<u64, Arc<Node>>,
    /// Pages of batches sent but perhaps not yet committed, by batch number.
    inflight: VecDeque<(u64, HashMap<u64, Arc<Node>>)>,
    sent: u64,
    committed: &'r AtomicU64,
    bytes: usize,
    /// A read view and the committed count when it was opened.
    read: Option<(u64, ReadOnlyTable<u64, &'static [u8]>)>,
    tx: Option<SyncSender<StageBatch>>,
}

impl StreamSink<'_> {
    fn count(&self) -> usize {
        self.batch.rows.len() + self.batch.witnesses.len() + self.batch.pages.len()
    }

    fn maybe_flush(&mut self) -> Result<()> {
        if self.count() >= STAGE_ROWS || self.bytes >= STAGE_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    /// Hand the filled batch to the writer.
    fn flush(&mut self) -> Result<()> {
        if self.count() == 0 {
            return Ok(());
        }
        self.sent += 1;
        let nodes = std::mem::take(&mut self.pending_nodes);
        self.inflight.push_back((self.sent, nodes));
        let batch = std::mem::take(&mut self.batch);
        self.bytes = 0;
        let tx = self
            .tx
            .as_ref()
            .ok_or_else(|| MetadataError::Gate("staging writer closed".into()))?;
        tx.send(batch)
            .map_err(|_| MetadataError::Gate("the staging writer stopped".into()))?;
        self.evict();
        Ok(())
    }

    /// Forget in-memory pages whose batch is committed (readable from disk).
    fn evict(&mut self) {
        let done = self.committed.load(Ordering::Acquire);
        while self.inflight.front().is_some_and(|(n, _)| *n <= done) {
            self.inflight.pop_front();
        }
    }
}

impl Sink for StreamSink<'_> {
    fn row(&mut self, tag: u8, key: &[u8], value: &[u8]) -> Result<()> {
        self.bytes += key.len() + value.len();
        let row = StagedRow::new(tag, table_name(tag)?, key.to_vec(), value.to_vec())?;
        self.batch.rows.push((tag, row));
        self.maybe_flush()
    }

    fn witness(&mut self, manifest: &ManifestId, value: &[u8]) -> Result<()> {
        self.bytes += 32 + value.len();
        self.batch.witnesses.push(StagedRow::new(
            stage_tag::ACCEPTED_MANIFESTS,
            name_of(&tables::ACCEPTED_MANIFESTS),
            manifest.0.to_vec(),
            value.to_vec(),
        )?);
        self.maybe_flush()
    }

    fn pages(&mut self, overlay: &mut Overlay) -> Result<()> {
        for (id, (node, page)) in std::mem::take(&mut overlay.pages) {
            self.bytes += 8 + page.len();
            let row = StagedRow::new(
                stage_tag::SNAPSHOT_NODES,
                name_of(&tables::SNAPSHOT_NODES),
                id.to_le_bytes().to_vec(),
                page,
            )?;
            self.batch.pages.push((id, row));
            self.pending_nodes.insert(id, node);
            self.maybe_flush()?;
        }
        Ok(())
    }

    fn load(&mut self, link: &Link) -> Result<Arc<Node>> {
        if let Some(n) = self.pending_nodes.get(&link.node) {
            return Ok(n.clone());
        }
        self.evict();
        for (_, nodes) in &self.inflight {
            if let Some(n) = nodes.get(&link.node) {
                return Ok(n.clone());
            }
        }
        // Not in memory: its batch is committed. A view opened before that
        // commit would not see it.
        let done = self.committed.load(Ordering::Acquire);
        if self.read.as_ref().is_none_or(|(at, _)| *at != done) {
            let tx = self.repo.db.begin_read()?;
            self.read = Some((done, tx.open_table(tables::SNAPSHOT_NODES)?));
        }
        let (_, t) = self
            .read
            .as_ref()
            .ok_or_else(|| MetadataError::Gate("no read view".into()))?;
        let page = t.get(link.node)?.ok_or_else(|| {
            MetadataError::corrupt(format!("snapshot page {} is missing", link.node))
        })?;
        Ok(Arc::new(verify_page(link, page.value())?))
    }
}

impl Repository {
    /// Install a hook called after each staging transaction (tests).
    pub fn set_stage_hook(&self, hook: Option<Box<StageHook>>) {
        if let Ok(mut h) = self.stage_hook.lock() {
            *h = hook;
        }
    }

    /// With `check_manifests` the manifests' deep check
    /// ([`Repository::check_manifests`]) runs on a thread of its own beside
    /// the preparation, and its refusal, if any, wins over every other:
    /// the staged rows are discarded and the refusal recorded, as if it had
    /// been found first.
    pub(crate) fn submit_streamed(
        &self,
        s: Submission,
        fingerprint: [u8; 32],
        check_manifests: bool,
    ) -> Result<Outcome> {
        let _turn = self
            .turn
            .lock()
            .map_err(|_| MetadataError::Gate("submit turn poisoned".into()))?;
        std::thread::scope(|scope| {
            let s = &s;
            let mut verdict = Verdict {
                checking: check_manifests.then(|| scope.spawn(move || self.check_manifests(s))),
                known: None,
            };
            for _attempt in 0..3 {
                if let Some(o) = self.replay(&s.operation, &fingerprint)? {
                    return Ok(o);
                }
                // The finished intent's pins (about one per uploaded
                // object) are the caller's to clean up, after the answer.
                match self.stream_once(s, fingerprint, &mut verdict)? {
                    Some(o) => return Ok(o),
                    None => self.recover_submissions_locked()?,
                }
            }
            Err(MetadataError::refused(
                scribe_format::ErrorCode::Busy,
                "the streamed preparation went stale three times",
            ))
        })
    }

    /// One preparation; `None` when it went stale and must be retried.
    fn stream_once(
        &self,
        s: &Submission,
        fingerprint: [u8; 32],
        verdict: &mut Verdict<'_>,
    ) -> Result<Option<Outcome>> {
        // 1. Validate against a read snapshot.
        let (head, branch_head_at, epoch, base_root, releases, next_page) = {
            let tx = self.db.begin_read()?;
            let head = read_repo_meta(&tx)?.head;
            let bh = match branch_head(&tx, &s.branch) {
                Ok(h) => h,
                Err(MetadataError::Refused { code, detail }) => {
                    if let Some(r) = verdict.refusal()? {
                        return self.record_only(s, fingerprint, r);
                    }
                    return self.record_only(
                        s,
                        fingerprint,
                        crate::accept::Reject {
                            code,
                            detail,
                            paths: Vec::new(),
                        },
                    );
                }
                Err(e) => return Err(e),
            };
            let root = root_at(&tx, &s.branch, bh)?;
            let m = tx.open_table(tables::META)?;
            if m.get(meta::PENDING_SUBMIT)?.is_some() {
                return Ok(None);
            }
            let epoch = decode_u64(
                m.get(meta::LOCK_EPOCH)?
                    .ok_or_else(|| MetadataError::corrupt("no lock-epoch"))?
                    .value(),
                "lock-epoch",
            )?;
            let nodes = tx.open_table(tables::SNAPSHOT_NODES)?;
            let locks = tx.open_table(tables::LOCKS)?;
            let ws = tx.open_table(tables::WORKSPACE_STATE)?;
            let commits = tx.open_table(tables::COMMITS)?;
            let releases = match validate_state(s, &nodes, &locks, &ws, &commits, root)? {
                Ok(r) => r,
                Err(r) => {
                    let r = verdict.refusal()?.unwrap_or(r);
                    return self.record_only(s, fingerprint, r);
                }
            };
            let next_page = nodes.last()?.map(|(k, _)| k.value()).unwrap_or(0);
            (head, bh, epoch, root, releases, next_page)
        };
        let change = head + 1;
        // 2. Reserve.
        {
            let wtx = self.write()?;
            {
                let mut m = wtx.open_table(tables::META)?;
                m.insert(
                    meta::PENDING_SUBMIT,
                    encode_pending(change, &s.operation).as_slice(),
                )?;
            }
            wtx.commit()?;
        }
        // 3. Stage.
        let committed = AtomicU64::new(0);
        let (root, next_id) = std::thread::scope(|scope| -> Result<(RootRow, u64)> {
            let (tx, rx) = sync_channel::<StageBatch>(1);
            // Seed 004: staging transactions append to the outbox without
            // each flushing archive HEAD; preparation publishes it once
            // (when the writer finishes, before the publication gate). The
            // deferral is per thread, so the writer's thread takes it.
            // Meanwhile a publisher archives what is committed every
            // PUBLISH_EVERY staging transactions, on the core the writer
            // leaves idle, so that last publication is short instead of
            // the whole preparation's records (tens of MB for 50,000
            // files) written after the last staging commit.
            let (publish, wanted) = sync_channel::<()>(1);
            let publisher = scope.spawn(move || -> Result<()> {
                for () in wanted {
                    self.archive.publish_flushed()?;
                }
                Ok(())
            });
            let counted = &committed;
            let writer = scope.spawn(move || {
                let r = crate::journal::coalesce_publication(&self.archive, || {
                    stage_writer(self, rx, counted, &publish)
                });
                drop(publish);
                r
            });
            let mut sink = StreamSink {
                repo: self,
                batch: StageBatch::default(),
                pending_nodes: HashMap::new(),
                inflight: VecDeque::new(),
                sent: 0,
                committed: &committed,
                bytes: 0,
                read: None,
                tx: Some(tx),
            };
            let produced = produce(
                s,
                change,
                base_root,
                next_page,
                PageIds::Spread,
                &mut sink,
                STAGE_ROWS,
            )
            .and_then(|r| sink.flush().map(|_| r));
            // Close the channel, then surface the writer's own error first.
            sink.tx = None;
            drop(sink);
            let written = writer
                .join()
                .map_err(|_| MetadataError::Gate("the staging writer panicked".into()))?;
            let published = publisher
                .join()
                .map_err(|_| MetadataError::Gate("the archive publisher panicked".into()))?;
            written?;
            published?;
            produced
        })?;
        let _ = next_id;
        // The manifests' check, if it ran beside: a refusal discards the
        // staged rows and the reservation before it is recorded.
        if let Some(r) = verdict.refusal()? {
            self.recover_submissions_locked()?;
            return self.record_only(s, fingerprint, r);
        }
        // 4. Publish under the gate.
        let accepted = {
            let _gate = self
                .gate
                .lock()
                .map_err(|_| MetadataError::Gate("publication gate poisoned".into()))?;
            let wtx = self.write()?;
            let published = {
                let mut tx = Tx::open(&wtx)?;
                let rm = tx.repo_meta()?;
                let bh = tx.heads.get(s.branch.0)?.map(|g| g.value());
                let pending = tx
                    .meta
                    .get(meta::PENDING_SUBMIT)?
                    .map(|g| g.value().to_vec());
                let fresh = rm.head == head
                    && bh == Some(branch_head_at)
                    && tx.meta_u64(meta::LOCK_EPOCH)? == epoch
                    && pending.as_deref() == Some(encode_pending(change, &s.operation).as_slice());
                if !fresh {
                    None
                } else {
                    let parent_commit = if branch_head_at == 0 {
                        None
                    } else {
                        let row = tx.commits.get(branch_head_at)?.ok_or_else(|| {
                            MetadataError::corrupt(format!("no commit at head {branch_head_at}"))
                        })?;
                        Some(CommitRecord::decode(row.value())?.commit_id)
                    };
                    let (bytes, commit_id) =
                        envelope(self, s, change, branch_head_at, parent_commit, &root)?;
                    write_ledger(
                        &mut tx,
                        &Ledger {
                            s,
                            fingerprint,
                            change,
                            branch_head: branch_head_at,
                            old_root: base_root,
                            root,
                            commit_id,
                            releases: &releases,
                        },
                    )?;
                    Some((bytes, commit_id))
                }
            };
            match published {
                None => None,
                Some((bytes, commit_id)) => {
                    self.objects
                        .publish_commit(&ObjectId::commit(commit_id), &bytes)?;
                    wtx.commit()?;
                    Some(Outcome::Accepted { change, commit_id })
                }
            }
        };
        // 5. Discard the undo inventory (or, if stale, the staged rows).
        self.recover_submissions_locked()?;
        Ok(accepted)
    }

    fn record_only(
        &self,
        s: &Submission,
        fingerprint: [u8; 32],
        r: crate::accept::Reject,
    ) -> Result<Option<Outcome>> {
        let _gate = self
            .gate
            .lock()
            .map_err(|_| MetadataError::Gate("publication gate poisoned".into()))?;
        let wtx = self.write()?;
        {
            let mut tx = Tx::open(&wtx)?;
            if tx.operations.get(s.operation.0)?.is_none() {
                record_rejection(&mut tx, &s.operation, fingerprint, &r)?;
            }
        }
        wtx.commit()?;
        Ok(Some(crate::accept::outcome_of_record(
            &OperationRecord {
                fingerprint,
                accepted_change: 0,
                error_code: r.code.number(),
                detail: r_detail(&r),
                recorded_ms: 0,
            },
            |_| Err(MetadataError::Gate("rejection has no change".into())),
        )?))
    }

    /// Finish or remove an interrupted streamed preparation (startup and
    /// `recover-submissions`): an accepted one loses only its undo
    /// inventory; an unaccepted one loses every staged row. Bounded
    /// transactions of at most [`STAGE_ROWS`] inventory rows.
    pub fn recover_submissions(&self) -> Result<()> {
        let _turn = self
            .turn
            .lock()
            .map_err(|_| MetadataError::Gate("submit turn poisoned".into()))?;
        self.recover_submissions_locked()
    }

    pub(crate) fn recover_submissions_locked(&self) -> Result<()> {
        let pending = {
            let tx = self.db.begin_read()?;
            let m = tx.open_table(tables::META)?;
            match m.get(meta::PENDING_SUBMIT)? {
                Some(v) => decode_pending(v.value())?,
                None => return Ok(()),
            }
        };
        let (change, op) = pending;
        let accepted = {
            let tx = self.db.begin_read()?;
            let c = tx.open_table(tables::COMMITS)?;
            match c.get(change)? {
                Some(row) => CommitRecord::decode(row.value())?.operation == op,
                None => false,
            }
        };
        if accepted {
            // The inventory holds only this preparation's rows: discard it
            // whole in one transaction; the accepted rows stay.
            let wtx = self.write()?;
            wtx.delete_table(tables::SUBMIT_STAGE)?;
            wtx.open_table(tables::SUBMIT_STAGE)?;
            wtx.open_table(tables::META)?.remove(meta::PENDING_SUBMIT)?;
            wtx.commit()?;
            crate::repo::mark_compaction_wanted(&self.dir);
            return Ok(());
        }
        loop {
            let wtx = self.write()?;
            let done = {
                let mut stage = wtx.open_table(tables::SUBMIT_STAGE)?;
                let batch: Vec<Vec<u8>> = {
                    let mut out = Vec::with_capacity(STAGE_ROWS);
                    for row in stage.range::<&[u8]>(..)? {
                        out.push(row?.0.value().to_vec());
                        if out.len() == STAGE_ROWS {
                            break;
                        }
                    }
                    out
                };
                if !accepted {
                    let mut history = wtx.open_table(tables::HISTORY)?;
                    let mut moves = wtx.open_table(tables::MOVES)?;
                    let mut cp = wtx.open_table(tables::CHANGE_PATHS)?;
                    let mut lineage = wtx.open_table(tables::FILE_LINEAGE)?;
                    let mut manifests = wtx.open_table(tables::ACCEPTED_MANIFESTS)?;
                    let mut nodes = wtx.open_table(tables::SNAPSHOT_NODES)?;
                    for k in &batch {
                        let (tag, dest) = k
                            .split_first()
                            .ok_or_else(|| MetadataError::corrupt("empty undo inventory key"))?;
                        let removed = match *tag {
                            stage_tag::HISTORY => history.remove(dest)?.is_some(),
                            stage_tag::MOVES => moves.remove(dest)?.is_some(),
                            stage_tag::CHANGE_PATHS => cp.remove(dest)?.is_some(),
                            stage_tag::FILE_LINEAGE => lineage.remove(dest)?.is_some(),
                            stage_tag::ACCEPTED_MANIFESTS => manifests.remove(dest)?.is_some(),
                            stage_tag::SNAPSHOT_NODES => {
                                let id: [u8; 8] = dest.try_into().map_err(|_| {
                                    MetadataError::corrupt("undo page key is not 8 bytes")
                                })?;
                                nodes.remove(u64::from_le_bytes(id))?.is_some()
                            }
                            t => {
                                return Err(MetadataError::corrupt(format!("unknown undo tag {t}")))
                            }
                        };
                        if !removed {
                            return Err(MetadataError::corrupt(format!(
                                "undo inventory names a missing row (tag {tag})"
                            )));
                        }
                    }
                }
                for k in &batch {
                    stage.remove(k.as_slice())?;
                }
                if batch.len() < STAGE_ROWS {
                    wtx.open_table(tables::META)?.remove(meta::PENDING_SUBMIT)?;
                    true
                } else {
                    false
                }
            };
            wtx.commit()?;
            if done {
                return Ok(());
            }
        }
    }
}

/// The manifests' deep check running beside a streamed preparation
/// ([`Repository::submit_streamed`]), joined once.
pub(crate) struct Verdict<'scope> {
    checking: Option<std::thread::ScopedJoinHandle<'scope, Result<Option<crate::accept::Reject>>>>,
    known: Option<Option<crate::accept::Reject>>,
}

impl Verdict<'_> {
    /// The check's refusal, waiting for it the first time (none when no
    /// check runs).
    fn refusal(&mut self) -> Result<Option<crate::accept::Reject>> {
        if let Some(h) = self.checking.take() {
            let r = h
                .join()
                .map_err(|_| MetadataError::Gate("the manifest check panicked".into()))??;
            self.known = Some(r);
        }
        Ok(self.known.clone().flatten())
    }
}

fn r_detail(r: &crate::accept::Reject) -> String {
    r.recorded_detail()
}

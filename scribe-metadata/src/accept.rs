//! Atomic acceptance of submissions (sections 4.2, 4.2.1, 4.3, 8, 12).
//!
//! A submission is checked in three stages, cheapest first:
//!
//! 1. its shape (no repository state): ordering, canonical paths, action
//!    rules, move pairing, keeps, limits;
//! 2. object presence (the change set and every manifest) through
//!    [`crate::ObjectPresence`];
//! 3. under the publication gate, inside one `Durability::Immediate` write
//!    transaction: the branch head, every base, collision keys, locks.
//!
//! A rejection at any stage records only its operation outcome. An
//! acceptance builds both radix trees, publishes the commit envelope v5
//! through [`crate::CommitSink`] (durable first), then writes the commit
//! ledger, history, moves, lineage, change paths, manifest witnesses,
//! pages, roots, branch head, lock releases and the outcome and commits.
//! Retrying an operation id with the same fingerprint returns the recorded
//! outcome; another fingerprint is `operation_intent_mismatch`.

use std::collections::{HashMap, HashSet};

use redb::{ReadableDatabase, ReadableTable};

use crate::journal::{JTable as Table, WriteTx as WriteTransaction};
use scribe_format::limits::{MAX_AUTHOR_BYTES, MAX_CHANGE_SET_ENTRIES, MAX_MESSAGE_BYTES};
use scribe_format::path;
use scribe_format::snapshot::{FileRecord, Link, Node, NodeValue, RootRow};
use scribe_format::{
    BranchId, ChangeSetId, CommitId, ErrorCode, ManifestId, ObjectId, OperationId, WorkspaceId,
};

use crate::clock::now_ms;
use crate::error::{MetadataError, Result};
use crate::records::{
    decode_u64, encode_accepted_manifest, encode_move, keys, CommitRecord, HistoryRecord,
    LockRecord, OperationRecord, RepoMeta, MAX_DETAIL_BYTES,
};
use crate::repo::Repository;
use crate::tables::{self, meta, stage_tag};
use crate::tree::{lookup, Builder, Overlay, PageIds, TablePages, BATCH};
use scribe_format::changeset::{Action, ChangeSet, Entry};
use scribe_format::commit::{CommitEnvelopeV5, CommitPayload, Origin};
use scribe_format::operation::operation_fingerprint;

/// One submission: a change set plus its commit metadata.
#[derive(Clone, Debug)]
pub struct Submission {
    pub operation: OperationId,
    pub branch: BranchId,
    pub workspace: WorkspaceId,
    pub change_set: ChangeSet,
    /// Identity of the change set object the client uploaded.
    pub change_set_id: ChangeSetId,
    pub author: String,
    pub message: String,
    pub timestamp_ms: u64,
    pub keep_locks: bool,
    /// Paths the repository lock policy requires the submitter to hold
    /// (prepared by the service; `lock_required` when one is not held).
    pub required_locks: Vec<String>,
    /// The authenticated principal, asserted by the server.
    pub actor: Option<[u8; 16]>,
    /// Objects the submission carries with it (wire `SubmitInline`), not
    /// yet in the store: acceptance sees them as present, and only an
    /// accepted change publishes them, in the batch of its envelope.
    pub inline: Inline,
}

/// Objects carried by a submission: original payloads whose identities the
/// caller has verified, by id. Empty for an ordinary submission.
#[derive(Clone, Debug, Default)]
pub struct Inline(pub std::sync::Arc<std::collections::BTreeMap<ObjectId, Vec<u8>>>);

impl Inline {
    /// Objects the caller has verified (each id is its payload's identity).
    pub fn new(objects: std::collections::BTreeMap<ObjectId, Vec<u8>>) -> Self {
        Inline(std::sync::Arc::new(objects))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every carried object, for one publication.
    pub fn pieces(&self) -> Vec<(ObjectId, &[u8])> {
        self.0.iter().map(|(id, b)| (*id, b.as_slice())).collect()
    }
}

/// The store as a submission carrying `inline` objects sees it: those
/// objects are present (and read from memory) before they are published.
struct WithInline<'a> {
    inline: &'a Inline,
    store: &'a dyn crate::ObjectHooks,
}

impl crate::ObjectPresence for WithInline<'_> {
    fn contains(&self, id: &ObjectId) -> Result<bool> {
        Ok(self.inline.0.contains_key(id) || self.store.contains(id)?)
    }

    fn missing(&self, ids: &[ObjectId]) -> Result<Vec<ObjectId>> {
        let rest: Vec<ObjectId> = ids
            .iter()
            .filter(|id| !self.inline.0.contains_key(id))
            .copied()
            .collect();
        self.store.missing(&rest)
    }

    fn read(&self, id: &ObjectId) -> Result<Option<Vec<u8>>> {
        match self.inline.0.get(id) {
            Some(b) => Ok(Some(b.clone())),
            None => self.store.read(id),
        }
    }

    fn checks_manifests(&self) -> bool {
        self.store.checks_manifests()
    }

    fn read_for_check(&self, id: &ObjectId) -> Result<Option<Vec<u8>>> {
        match self.inline.0.get(id) {
            Some(b) => Ok(Some(b.clone())),
            None => self.store.read_for_check(id),
        }
    }

    fn payload_len(&self, id: &ObjectId) -> Result<Option<u64>> {
        match self.inline.0.get(id) {
            Some(b) => Ok(Some(b.len() as u64)),
            None => self.store.payload_len(id),
        }
    }
}

impl crate::CommitSink for WithInline<'_> {
    fn publish_commit(&self, id: &ObjectId, envelope: &[u8]) -> Result<()> {
        self.store.publish_commit(id, envelope)
    }

    fn read_commit(&self, id: &ObjectId) -> Result<Option<Vec<u8>>> {
        self.store.read_commit(id)
    }
}

/// What became of a submission. Recorded forever under its operation id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Accepted {
        change: u64,
        commit_id: CommitId,
    },
    Rejected {
        code: ErrorCode,
        detail: String,
        paths: Vec<String>,
    },
}

/// A submission's checks done before acceptance ([`Repository::prepare`]).
#[derive(Clone, Debug)]
pub struct Prepared {
    fingerprint: [u8; 32],
    /// The recorded outcome of its operation id, if any.
    replay: Option<Outcome>,
    /// A refusal the state-independent checks decided.
    pre: Option<Reject>,
    /// The manifests' deep check was left to run beside the streamed
    /// preparation ([`Repository::defers_manifest_check`]).
    manifests_deferred: bool,
}

impl Prepared {
    /// Whether acceptance takes the streamed preparation (and so will
    /// finish many upload pins: its caller should clean them up after the
    /// answer, `Repository::cleanup_finished_pins`).
    pub fn streams(&self, s: &Submission) -> bool {
        self.replay.is_none() && self.pre.is_none() && estimated_rows(s) > BUFFERED_ROW_LIMIT
    }
}

/// A refusal decided by validation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Reject {
    pub code: ErrorCode,
    pub detail: String,
    pub paths: Vec<String>,
}

/// Most paths named by one rejection.
const MAX_REJECT_PATHS: usize = 64;

impl Reject {
    fn new(code: ErrorCode, detail: impl Into<String>) -> Self {
        Reject {
            code,
            detail: detail.into(),
            paths: Vec::new(),
        }
    }

    fn with_paths(code: ErrorCode, detail: impl Into<String>, paths: Vec<String>) -> Self {
        Reject {
            code,
            detail: detail.into(),
            paths,
        }
    }

    /// The recorded detail: the message, then one named path per line
    /// (paths never contain control characters).
    pub(crate) fn recorded_detail(&self) -> String {
        let mut s: String = self.detail.replace('\n', " ");
        for p in self.paths.iter().take(MAX_REJECT_PATHS) {
            if s.len() + p.len() + 1 > MAX_DETAIL_BYTES {
                break;
            }
            s.push('\n');
            s.push_str(p);
        }
        if s.len() > MAX_DETAIL_BYTES {
            let mut cut = MAX_DETAIL_BYTES;
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            s.truncate(cut);
        }
        s
    }

    fn outcome(&self) -> Outcome {
        outcome_of_detail(self.code, &self.recorded_detail())
    }
}

fn outcome_of_detail(code: ErrorCode, recorded: &str) -> Outcome {
    let mut lines = recorded.split('\n');
    let detail = lines.next().unwrap_or("").to_owned();
    Outcome::Rejected {
        code,
        detail,
        paths: lines.map(str::to_owned).collect(),
    }
}

/// The outcome an operation row records.
pub(crate) fn outcome_of_record(
    rec: &OperationRecord,
    commit_of: impl FnOnce(u64) -> Result<CommitId>,
) -> Result<Outcome> {
    if rec.accepted_change != 0 {
        return Ok(Outcome::Accepted {
            change: rec.accepted_change,
            commit_id: commit_of(rec.accepted_change)?,
        });
    }
    let code = ErrorCode::from_number(rec.error_code).ok_or_else(|| {
        MetadataError::corrupt(format!("operation records unknown code {}", rec.error_code))
    })?;
    Ok(outcome_of_detail(code, &rec.detail))
}

/// Stage 1: rules of the submission's own shape.
pub(crate) fn check_shape(s: &Submission) -> Option<Reject> {
    let entries = &s.change_set.entries;
    if entries.len() > MAX_CHANGE_SET_ENTRIES as usize {
        return Some(Reject::new(
            ErrorCode::LimitExceeded,
            format!("{} entries exceed the limit", entries.len()),
        ));
    }
    if s.author.len() > MAX_AUTHOR_BYTES {
        return Some(Reject::new(
            ErrorCode::LimitExceeded,
            "author is longer than 256 bytes",
        ));
    }
    if s.message.len() > MAX_MESSAGE_BYTES {
        return Some(Reject::new(
            ErrorCode::LimitExceeded,
            "message is longer than 65,536 bytes",
        ));
    }
    if entries.is_empty() {
        return Some(Reject::new(
            ErrorCode::EmptySubmission,
            "the change set has no entries and no merge parent or cherry-pick source",
        ));
    }
    for w in entries.windows(2) {
        if w[0].path.as_bytes() >= w[1].path.as_bytes() {
            return Some(Reject::with_paths(
                ErrorCode::Malformed,
                "entries are not strictly ascending by path",
                vec![w[1].path.clone()],
            ));
        }
    }
    let mut bad_paths = Vec::new();
    for e in entries {
        let r = if e.state.is_some() {
            path::validate_file_path(&e.path)
        } else {
            path::validate(&e.path)
        };
        if r.is_err() {
            bad_paths.push(e.path.clone());
        }
    }
    if !bad_paths.is_empty() {
        return Some(Reject::with_paths(
            ErrorCode::InvalidPath,
            "paths are not canonical",
            bad_paths,
        ));
    }
    let malformed = |why: &str, p: &str| {
        Some(Reject::with_paths(
            ErrorCode::Malformed,
            why.to_owned(),
            vec![p.to_owned()],
        ))
    };
    for e in entries {
        let ok = match e.action {
            Action::Add => e.expected_base == 0 && e.state.is_some(),
            Action::Edit => e.expected_base != 0 && e.state.is_some() && e.moved_from.is_none(),
            Action::Delete => e.expected_base != 0 && e.state.is_none() && e.moved_from.is_none(),
            Action::Keep => return malformed(
                "a keep is legal only in a submission with a merge parent or cherry-pick source",
                &e.path,
            ),
        };
        if !ok {
            return malformed(
                "entry does not follow its action's rules (base, file state, move)",
                &e.path,
            );
        }
    }
    // Explicit moves: each destination pairs with exactly one deletion of
    // its source at the same revision; each source feeds one destination.
    let mut sources = HashSet::new();
    for e in entries {
        if let Some(m) = &e.moved_from {
            if m.change == 0 || m.path == e.path {
                return malformed(
                    "a move source names a nonzero change and another path",
                    &e.path,
                );
            }
            let paired = find(entries, &m.path)
                .is_some_and(|d| d.action == Action::Delete && d.expected_base == m.change);
            if !paired {
                return malformed(
                    "a move destination needs the deletion of its source at the source revision",
                    &e.path,
                );
            }
            if !sources.insert(m.path.as_str()) {
                return malformed("a move source feeds more than one destination", &m.path);
            }
        }
    }
    None
}

fn find<'a>(entries: &'a [Entry], p: &str) -> Option<&'a Entry> {
    entries
        .binary_search_by(|e| e.path.as_bytes().cmp(p.as_bytes()))
        .ok()
        .map(|i| &entries[i])
}

/// The tables one acceptance transaction writes, each opened once.
pub(crate) struct Tx<'t> {
    pub meta: Table<'t, &'static str, &'static [u8]>,
    pub commits: Table<'t, u64, &'static [u8]>,
    pub nodes: Table<'t, u64, &'static [u8]>,
    pub roots: Table<'t, &'static [u8], &'static [u8]>,
    pub history: Table<'t, &'static [u8], &'static [u8]>,
    pub moves: Table<'t, &'static [u8], &'static [u8]>,
    pub lineage: Table<'t, &'static [u8], &'static [u8]>,
    pub change_paths: Table<'t, &'static [u8], &'static [u8]>,
    pub manifests: Table<'t, &'static [u8], &'static [u8]>,
    pub locks: Table<'t, &'static str, &'static [u8]>,
    pub ws_state: Table<'t, &'static [u8], &'static [u8]>,
    pub operations: Table<'t, [u8; 16], &'static [u8]>,
    pub heads: Table<'t, [u8; 16], u64>,
}

impl<'t> Tx<'t> {
    pub fn open(tx: &'t WriteTransaction) -> Result<Self> {
        Ok(Tx {
            meta: tx.open_table(tables::META)?,
            commits: tx.open_table(tables::COMMITS)?,
            nodes: tx.open_table(tables::SNAPSHOT_NODES)?,
            roots: tx.open_table(tables::SNAPSHOT_ROOTS)?,
            history: tx.open_table(tables::HISTORY)?,
            moves: tx.open_table(tables::MOVES)?,
            lineage: tx.open_table(tables::FILE_LINEAGE)?,
            change_paths: tx.open_table(tables::CHANGE_PATHS)?,
            manifests: tx.open_table(tables::ACCEPTED_MANIFESTS)?,
            locks: tx.open_table(tables::LOCKS)?,
            ws_state: tx.open_table(tables::WORKSPACE_STATE)?,
            operations: tx.open_table(tables::OPERATIONS)?,
            heads: tx.open_table(tables::BRANCH_HEADS)?,
        })
    }

    pub fn repo_meta(&self) -> Result<RepoMeta> {
        let b = self
            .meta
            .get(meta::REPO_META)?
            .ok_or_else(|| MetadataError::corrupt("no repo-meta"))?;
        Ok(RepoMeta::decode(b.value())?)
    }

    pub fn meta_u64(&self, k: &str) -> Result<u64> {
        let b = self
            .meta
            .get(k)?
            .ok_or_else(|| MetadataError::corrupt(format!("meta.{k} is missing")))?;
        Ok(decode_u64(b.value(), "meta counter")?)
    }
}

/// Where the rows of an acceptance go: straight into the acceptance
/// transaction (buffered) or into bounded staging transactions (streamed).
pub(crate) trait Sink {
    /// Insert a data row of undo class `tag`; a previous value is corruption.
    fn row(&mut self, tag: u8, key: &[u8], value: &[u8]) -> Result<()>;
    /// Insert a manifest witness unless one exists.
    fn witness(&mut self, manifest: &ManifestId, value: &[u8]) -> Result<()>;
    /// Store prepared pages.
    fn pages(&mut self, overlay: &mut Overlay) -> Result<()>;
    /// Read a page for the tree builder.
    fn load(&mut self, link: &Link) -> Result<std::sync::Arc<Node>>;
}

/// Buffered sink: rows go into the open acceptance transaction.
pub(crate) struct TxSink<'a, 't> {
    pub tx: &'a mut Tx<'t>,
}

impl Sink for TxSink<'_, '_> {
    fn row(&mut self, tag: u8, key: &[u8], value: &[u8]) -> Result<()> {
        let t = match tag {
            stage_tag::HISTORY => &mut self.tx.history,
            stage_tag::MOVES => &mut self.tx.moves,
            stage_tag::CHANGE_PATHS => &mut self.tx.change_paths,
            stage_tag::FILE_LINEAGE => &mut self.tx.lineage,
            _ => return Err(MetadataError::Gate(format!("row tag {tag}"))),
        };
        if t.insert(key, value)?.is_some() {
            return Err(MetadataError::Gate(format!(
                "a staged row (tag {tag}) collides with an existing row"
            )));
        }
        Ok(())
    }

    fn witness(&mut self, manifest: &ManifestId, value: &[u8]) -> Result<()> {
        if self.tx.manifests.get(manifest.0.as_slice())?.is_none() {
            self.tx.manifests.insert(manifest.0.as_slice(), value)?;
        }
        Ok(())
    }

    fn pages(&mut self, overlay: &mut Overlay) -> Result<()> {
        for (id, (_, page)) in std::mem::take(&mut overlay.pages) {
            if self.tx.nodes.insert(id, page.as_slice())?.is_some() {
                return Err(MetadataError::Gate(format!("page {id} allocated twice")));
            }
        }
        Ok(())
    }

    fn load(&mut self, link: &Link) -> Result<std::sync::Arc<Node>> {
        use crate::tree::PageSource;
        TablePages {
            table: &self.tx.nodes,
        }
        .load(link)
    }
}

/// Stage 3 checks against the branch head. Reads only.
pub(crate) fn validate_state<N, L, W, C>(
    s: &Submission,
    nodes: &N,
    locks: &L,
    ws_state: &W,
    commits: &C,
    root: RootRow,
) -> Result<std::result::Result<Vec<(String, LockRecord)>, Reject>>
where
    N: ReadableTable<u64, &'static [u8]>,
    L: ReadableTable<&'static str, &'static [u8]>,
    W: ReadableTable<&'static [u8], &'static [u8]>,
    C: ReadableTable<u64, &'static [u8]>,
{
    let _ = commits;
    if ws_state
        .get(keys::ws_retired(&s.workspace.0).as_slice())?
        .is_some()
    {
        return Ok(Err(Reject::new(
            ErrorCode::WorkspaceRetired,
            format!("workspace {} is retired", s.workspace),
        )));
    }
    let entries = &s.change_set.entries;
    let mut pages = crate::tree::CachedPages {
        table: nodes,
        cache: &mut crate::tree::PageCache::default(),
    };
    // Bases.
    let mut mismatch = Vec::new();
    let mut absent = Vec::new();
    for e in entries {
        let v = lookup(&mut pages, &root.exact, e.path.as_bytes())?;
        let live = v.as_ref().filter(|v| v.state.is_some());
        match e.action {
            Action::Add => {
                if live.is_some() {
                    mismatch.push(e.path.clone());
                }
            }
            Action::Edit | Action::Delete => match live {
                None => absent.push(e.path.clone()),
                Some(v) if v.last_change != e.expected_base => mismatch.push(e.path.clone()),
                Some(_) => {}
            },
            Action::Keep => {}
        }
    }
    if !mismatch.is_empty() {
        return Ok(Err(Reject::with_paths(
            ErrorCode::BaseMismatch,
            "expected base changes differ from the branch head",
            mismatch,
        )));
    }
    if !absent.is_empty() {
        return Ok(Err(Reject::with_paths(
            ErrorCode::NotPresent,
            "paths are absent at the branch head",
            absent,
        )));
    }
    // Collision keys: deletions apply first, so a case-only rename is fine.
    let deleted: HashSet<&str> = entries
        .iter()
        .filter(|e| e.action == Action::Delete)
        .map(|e| e.path.as_str())
        .collect();
    let mut added: HashMap<Vec<u8>, &str> = HashMap::new();
    let mut collide = Vec::new();
    for e in entries.iter().filter(|e| e.action == Action::Add) {
        let key = path::collision_key(&e.path);
        if let Some(other) = added.insert(key.clone(), &e.path) {
            collide.push(other.to_owned());
            collide.push(e.path.clone());
            continue;
        }
        if let Some(v) = lookup(&mut pages, &root.collision, &key)? {
            if v.state.is_some() && v.path != e.path && !deleted.contains(v.path.as_str()) {
                collide.push(e.path.clone());
                collide.push(v.path.clone());
            }
        }
    }
    if !collide.is_empty() {
        return Ok(Err(Reject::with_paths(
            ErrorCode::PathCollision,
            "paths collide with live paths under the collision fold",
            collide,
        )));
    }
    // No file under a file (issue #14 item 5): an added path (a move
    // destination is an add) may have no live file as an ancestor and no
    // live file below it, after this change's deletions, within the change
    // set or at the head. Compared under the collision fold, which keeps
    // the component structure, so `Docs` and `docs/readme` conflict too
    // (no case-insensitive file system could hold both).
    let mut conflict = Vec::new();
    for e in entries.iter().filter(|e| e.action == Action::Add) {
        for (i, _) in e.path.match_indices('/') {
            let ancestor = &e.path[..i];
            let key = path::collision_key(ancestor);
            if let Some(other) = added.get(&key) {
                conflict.push(other.to_string());
                conflict.push(e.path.clone());
                continue;
            }
            if let Some(v) = lookup(&mut pages, &root.collision, &key)? {
                if v.state.is_some() && !deleted.contains(v.path.as_str()) {
                    conflict.push(v.path.clone());
                    conflict.push(e.path.clone());
                }
            }
        }
        let mut below = path::collision_key(&e.path);
        below.push(b'/');
        let mut walk = crate::tree::Walk::seek(
            &mut pages,
            &root.collision,
            &below,
            &below,
            crate::tree::Filter {
                live_only: true,
                newer_than: 0,
            },
        )?;
        while let Some((_, v)) = walk.next(&mut pages)? {
            if v.state.is_some() && !deleted.contains(v.path.as_str()) {
                conflict.push(e.path.clone());
                conflict.push(v.path.clone());
                break;
            }
        }
    }
    if !conflict.is_empty() {
        conflict.dedup();
        return Ok(Err(Reject::with_paths(
            ErrorCode::PathConflict,
            "a file would lie under another file (a path is both a file and a directory)",
            conflict,
        )));
    }
    // Locks.
    let mut held_by_other = Vec::new();
    let mut releases = Vec::new();
    for e in entries.iter().filter(|e| e.action != Action::Keep) {
        if let Some(row) = locks.get(e.path.as_str())? {
            let rec = LockRecord::decode(row.value())?;
            if rec.workspace != s.workspace {
                held_by_other.push(e.path.clone());
            } else if !s.keep_locks {
                releases.push((e.path.clone(), rec));
            }
        }
    }
    if !held_by_other.is_empty() {
        return Ok(Err(Reject::with_paths(
            ErrorCode::LockedByOther,
            "paths are locked by another workspace",
            held_by_other,
        )));
    }
    let mut missing_locks = Vec::new();
    for p in &s.required_locks {
        let held = match locks.get(p.as_str())? {
            Some(row) => LockRecord::decode(row.value())?.workspace == s.workspace,
            None => false,
        };
        if !held {
            missing_locks.push(p.clone());
        }
    }
    if !missing_locks.is_empty() {
        return Ok(Err(Reject::with_paths(
            ErrorCode::LockRequired,
            "the repository lock policy requires locks the submitter does not hold",
            missing_locks,
        )));
    }
    Ok(Ok(releases))
}

fn file_record(e: &Entry, change: u64) -> Option<FileRecord> {
    e.state.as_ref().map(|s| FileRecord {
        manifest: s.manifest,
        content: s.content,
        size: s.size,
        mode: s.mode as u8,
        change,
    })
}

/// Produce history, moves, change paths, lineage, witnesses and both trees.
/// Returns the new root row.
pub(crate) fn produce<K: Sink>(
    s: &Submission,
    change: u64,
    base_root: RootRow,
    next_page: u64,
    ids: PageIds,
    sink: &mut K,
    flush_pages_above: usize,
) -> Result<(RootRow, u64)> {
    let branch = s.branch;
    let entries = &s.change_set.entries;
    let witness = encode_accepted_manifest(&branch, change);
    let mut seen_manifests = HashSet::new();
    for e in entries.iter().filter(|e| e.action != Action::Keep) {
        let state = file_record(e, change);
        let moved = e.moved_from.as_ref().map(|m| (m.path.clone(), m.change));
        let h = HistoryRecord {
            action: e.action as u8,
            change,
            state,
            moved_from: moved,
        };
        let hk = keys::history(&branch, &e.path, change);
        sink.row(stage_tag::HISTORY, &hk, &h.encode())?;
        if let Some(m) = &e.moved_from {
            sink.row(stage_tag::MOVES, &hk, &encode_move(&m.path, m.change))?;
            sink.row(
                stage_tag::FILE_LINEAGE,
                &keys::lineage(change, &e.path, m.change, &m.path),
                &[],
            )?;
            sink.row(
                stage_tag::FILE_LINEAGE,
                &keys::lineage(m.change, &m.path, change, &e.path),
                &[],
            )?;
        }
        sink.row(
            stage_tag::CHANGE_PATHS,
            &keys::change_path(&branch, change, &e.path),
            &[],
        )?;
        if matches!(e.action, Action::Edit | Action::Delete) {
            sink.row(
                stage_tag::FILE_LINEAGE,
                &keys::lineage(change, &e.path, e.expected_base, &e.path),
                &[],
            )?;
            sink.row(
                stage_tag::FILE_LINEAGE,
                &keys::lineage(e.expected_base, &e.path, change, &e.path),
                &[],
            )?;
        }
        if let Some(st) = &e.state {
            seen_manifests.insert(st.manifest);
        }
    }
    // Witnesses in key order: staged transactions then touch contiguous
    // leaves of `accepted_manifests` instead of random ones.
    let mut manifests: Vec<ManifestId> = seen_manifests.into_iter().collect();
    manifests.sort_unstable();
    for m in &manifests {
        sink.witness(m, &witness)?;
    }
    drop(manifests);

    let mut overlay = Overlay {
        droppable_above: next_page,
        pages: Default::default(),
    };
    let mut next_id = next_page;

    // Exact tree: entries are already sorted by path bytes.
    let counted: Vec<&Entry> = entries
        .iter()
        .filter(|e| e.action != Action::Keep)
        .collect();
    let exact = apply_in_batches(
        base_root.exact,
        counted.iter().map(|e| (e.path.as_bytes().to_vec(), *e)),
        change,
        &mut overlay,
        (&mut next_id, ids),
        sink,
        flush_pages_above,
    )?;

    // Collision tree: deletions before additions at one key; last wins.
    let mut fold: Vec<(Vec<u8>, bool, usize)> = counted
        .iter()
        .enumerate()
        .map(|(i, e)| (path::collision_key(&e.path), e.action != Action::Delete, i))
        .collect();
    fold.sort();
    let mut deduped: Vec<(Vec<u8>, usize)> = Vec::with_capacity(fold.len());
    for (k, _, i) in fold {
        match deduped.last_mut() {
            Some((lk, li)) if *lk == k => *li = i,
            _ => deduped.push((k, i)),
        }
    }
    let collision = apply_in_batches(
        base_root.collision,
        deduped.into_iter().map(|(k, i)| (k, counted[i])),
        change,
        &mut overlay,
        (&mut next_id, ids),
        sink,
        flush_pages_above,
    )?;
    sink.pages(&mut overlay)?;
    if exact.live != collision.live {
        return Err(MetadataError::Gate(format!(
            "live counts differ: exact {} collision {}",
            exact.live, collision.live
        )));
    }
    Ok((RootRow { exact, collision }, next_id))
}

/// Apply `(key, entry)` edits, sorted by key and unique, to the tree at
/// `root` in preparation batches of at most [`BATCH`], staging pages through
/// `sink` whenever the overlay holds more than `flush_pages_above`.
#[allow(clippy::too_many_arguments)]
fn apply_in_batches<'e, K: Sink>(
    mut root: Link,
    items: impl Iterator<Item = (Vec<u8>, &'e Entry)>,
    change: u64,
    overlay: &mut Overlay,
    (next_id, ids): (&mut u64, PageIds),
    sink: &mut K,
    flush_pages_above: usize,
) -> Result<Link> {
    let mut items = items.peekable();
    let mut edits: Vec<(Vec<u8>, NodeValue)> = Vec::with_capacity(BATCH);
    while items.peek().is_some() {
        edits.clear();
        edits.extend(items.by_ref().take(BATCH).map(|(key, e)| {
            (
                key,
                NodeValue {
                    path: e.path.clone(),
                    last_change: change,
                    state: file_record(e, change),
                },
            )
        }));
        let mut b = Builder::new(*next_id, overlay);
        b.ids = ids;
        let mut src = SinkPages { sink };
        root = b.apply(&mut src, root, &edits)?;
        *next_id = b.next_id;
        if overlay.pages.len() > flush_pages_above {
            sink.pages(overlay)?;
        }
    }
    Ok(root)
}

struct SinkPages<'a, K> {
    sink: &'a mut K,
}

impl<K: Sink> crate::tree::PageSource for SinkPages<'_, K> {
    fn load(&mut self, link: &Link) -> Result<std::sync::Arc<Node>> {
        self.sink.load(link)
    }
}

/// Ledger inputs of one accepted member.
pub(crate) struct Ledger<'a> {
    pub s: &'a Submission,
    pub fingerprint: [u8; 32],
    pub change: u64,
    pub branch_head: u64,
    pub old_root: RootRow,
    pub root: RootRow,
    pub commit_id: CommitId,
    pub releases: &'a [(String, LockRecord)],
}

/// Build the v5 envelope of an accepted change.
pub(crate) fn envelope(
    repo: &Repository,
    s: &Submission,
    change: u64,
    branch_head: u64,
    parent_commit: Option<CommitId>,
    root: &RootRow,
) -> Result<(Vec<u8>, CommitId)> {
    let env = CommitEnvelopeV5 {
        payload: CommitPayload {
            repository: repo.id,
            branch: s.branch,
            change,
            parent_change: branch_head,
            branched_from: None,
            change_set: s.change_set_id,
            operation: s.operation,
            workspace: s.workspace,
            timestamp_ms: s.timestamp_ms,
            author: s.author.clone(),
            message: s.message.clone(),
        },
        actor: s.actor,
        parent_commit,
        origin: Origin::None,
        content_root: root.exact.content,
        revision_root: root.exact.revision,
    };
    let bytes = env.encode()?;
    let id = scribe_format::commit::commit_id(&bytes)?;
    Ok((bytes, id))
}

/// Write the commit ledger, roots, head, lock releases and outcome.
pub(crate) fn write_ledger(tx: &mut Tx<'_>, l: &Ledger<'_>) -> Result<()> {
    let s = l.s;
    let record = CommitRecord {
        commit_id: l.commit_id,
        branch: s.branch,
        parent: l.branch_head,
        change_set: s.change_set_id,
        operation: s.operation,
        workspace: s.workspace,
        timestamp_ms: s.timestamp_ms,
        entry_count: s
            .change_set
            .entries
            .iter()
            .filter(|e| e.action != Action::Keep)
            .count() as u32,
        author: s.author.clone(),
        message: s.message.clone(),
        cherry_pick: None,
    };
    if tx
        .commits
        .insert(l.change, record.encode().as_slice())?
        .is_some()
    {
        return Err(MetadataError::Gate(format!("change {} exists", l.change)));
    }
    tx.roots.insert(
        keys::root(&s.branch, l.change).as_slice(),
        l.root.encode()?.as_slice(),
    )?;
    tx.heads.insert(s.branch.0, l.change)?;
    let mut rm = tx.repo_meta()?;
    rm.head = l.change;
    tx.meta.insert(meta::REPO_META, rm.encode().as_slice())?;
    let live = tx.meta_u64(meta::SNAPSHOT_LIVE)?;
    let live = live
        .checked_sub(l.old_root.exact.live)
        .ok_or_else(|| MetadataError::corrupt("snapshot-live is below a branch's live count"))?
        + l.root.exact.live;
    tx.meta
        .insert(meta::SNAPSHOT_LIVE, live.to_le_bytes().as_slice())?;
    if !l.releases.is_empty() {
        for (p, rec) in l.releases {
            tx.locks.remove(p.as_str())?;
            tx.ws_state
                .remove(keys::ws_lock_index(&rec.workspace.0, p).as_slice())?;
        }
        let epoch = tx.meta_u64(meta::LOCK_EPOCH)? + 1;
        tx.meta
            .insert(meta::LOCK_EPOCH, epoch.to_le_bytes().as_slice())?;
    }
    let op = OperationRecord {
        fingerprint: l.fingerprint,
        accepted_change: l.change,
        error_code: 0,
        detail: String::new(),
        recorded_ms: now_ms(),
    };
    tx.operations
        .insert(s.operation.0, op.encode().as_slice())?;
    crate::pins::finish_intent(&mut tx.meta, &s.operation)?;
    Ok(())
}

pub(crate) fn record_rejection(
    tx: &mut Tx<'_>,
    op: &OperationId,
    fingerprint: [u8; 32],
    r: &Reject,
) -> Result<()> {
    let rec = OperationRecord {
        fingerprint,
        accepted_change: 0,
        error_code: r.code.number(),
        detail: r.recorded_detail(),
        recorded_ms: now_ms(),
    };
    tx.operations.insert(op.0, rec.encode().as_slice())?;
    crate::pins::finish_intent(&mut tx.meta, op)?;
    Ok(())
}

/// Most buffered members in one acceptance transaction. Under many
/// concurrent small submissions a group's size follows the queue that
/// forms during the previous group's transaction; 32 rather than 8 let
/// the 32-client load settle into fewer, larger transactions (issue 19:
/// about 10 % more acknowledged submits and a lower p99 on 2 cores).
pub const GROUP_MEMBERS: usize = 32;

/// Submissions estimated above this many data rows use streamed preparation.
pub const BUFFERED_ROW_LIMIT: usize = 512;

/// Estimated data rows of a buffered plan (history, change path, two
/// lineage edges, witness, and about two pages per tree per entry).
pub(crate) fn estimated_rows(s: &Submission) -> usize {
    s.change_set.entries.len().saturating_mul(8)
}

impl Repository {
    /// Benchmarks only: commit buffered acceptances without fsync so that
    /// per-operation cost can be reported apart from the device's flush
    /// latency. Never enabled by the service.
    pub fn set_benchmark_skip_fsync(&self, skip: bool) {
        self.skip_fsync
            .store(skip, std::sync::atomic::Ordering::Relaxed);
    }

    fn acceptance_durability(&self) -> redb::Durability {
        if self.skip_fsync.load(std::sync::atomic::Ordering::Relaxed) {
            redb::Durability::None
        } else {
            redb::Durability::Immediate
        }
    }

    pub(crate) fn fingerprint(&self, s: &Submission) -> [u8; 32] {
        operation_fingerprint(
            self.id,
            self.incarnation,
            s.branch,
            s.workspace,
            s.change_set_id,
            &s.message,
            s.keep_locks,
        )
    }

    /// The recorded outcome of `op`, if any, checked against `fingerprint`.
    pub(crate) fn replay(
        &self,
        op: &OperationId,
        fingerprint: &[u8; 32],
    ) -> Result<Option<Outcome>> {
        let tx = self.db.begin_read()?;
        let ops = tx.open_table(tables::OPERATIONS)?;
        let Some(row) = ops.get(op.0)? else {
            return Ok(None);
        };
        let rec = OperationRecord::decode(row.value())?;
        if &rec.fingerprint != fingerprint {
            return Ok(Some(Outcome::Rejected {
                code: ErrorCode::OperationIntentMismatch,
                detail: format!("operation {op} was used before with another intent"),
                paths: Vec::new(),
            }));
        }
        let commits = tx.open_table(tables::COMMITS)?;
        outcome_of_record(&rec, |c| {
            let row = commits.get(c)?.ok_or_else(|| {
                MetadataError::corrupt(format!("operation names absent change {c}"))
            })?;
            Ok(CommitRecord::decode(row.value())?.commit_id)
        })
        .map(Some)
    }

    /// The recorded outcome of operation `op`, whatever its intent (for a
    /// client that lost the reply and asks by operation id alone).
    pub fn recorded_outcome(&self, op: &OperationId) -> Result<Option<Outcome>> {
        let tx = self.db.begin_read()?;
        let ops = tx.open_table(tables::OPERATIONS)?;
        let Some(row) = ops.get(op.0)? else {
            return Ok(None);
        };
        let rec = OperationRecord::decode(row.value())?;
        let commits = tx.open_table(tables::COMMITS)?;
        outcome_of_record(&rec, |c| {
            let row = commits.get(c)?.ok_or_else(|| {
                MetadataError::corrupt(format!("operation names absent change {c}"))
            })?;
            Ok(CommitRecord::decode(row.value())?.commit_id)
        })
        .map(Some)
    }

    /// Whether `s` is accepted by a streamed preparation, and its
    /// manifests' deep check (which reads every new multi-chunk file's
    /// chunks again: 1.5 s of a 52,000-file import with 780 MB of large
    /// files) therefore runs beside the staging instead of before it. The
    /// outcome is the same: a refusal found there discards the staged rows
    /// before the publication gate and is recorded as before (issue 19,
    /// docs/metadata.md "Streamed preparation").
    pub(crate) fn defers_manifest_check(&self, s: &Submission) -> bool {
        estimated_rows(s) > BUFFERED_ROW_LIMIT && self.objects.checks_manifests()
    }

    /// Stages 1 and 2 (no repository state), the manifests' deep check
    /// only if `manifests` says so. `None` when the submission may proceed.
    pub(crate) fn precheck(&self, s: &Submission, manifests: bool) -> Result<Option<Reject>> {
        if let Some(r) = check_shape(s) {
            return Ok(Some(r));
        }
        // The envelope binds the change set id: it must be the identity of
        // exactly these entries.
        match s.change_set.id() {
            Ok(id) if id == s.change_set_id => {}
            Ok(id) => {
                return Ok(Some(Reject::new(
                    ErrorCode::Malformed,
                    format!(
                        "change set id {} is not the identity of its entries ({id})",
                        s.change_set_id
                    ),
                )))
            }
            Err(e) => {
                return Ok(Some(Reject::new(
                    ErrorCode::Malformed,
                    format!("change set: {e}"),
                )))
            }
        }
        let mut ids = vec![ObjectId::change_set(s.change_set_id)];
        let mut seen = HashSet::new();
        for e in &s.change_set.entries {
            if let Some(st) = &e.state {
                if seen.insert(st.manifest) {
                    ids.push(ObjectId::manifest(st.manifest));
                }
            }
        }
        let objects = WithInline {
            inline: &s.inline,
            store: &*self.objects,
        };
        let missing = crate::ObjectPresence::missing(&objects, &ids)?;
        if !missing.is_empty() {
            let named: Vec<String> = missing
                .iter()
                .take(MAX_REJECT_PATHS)
                .map(|m| m.to_string())
                .collect();
            return Ok(Some(Reject::new(
                ErrorCode::MissingObjects,
                format!("{} objects are missing: {}", missing.len(), named.join(" ")),
            )));
        }
        if manifests && self.objects.checks_manifests() {
            return self.check_manifests(s);
        }
        Ok(None)
    }

    /// Check manifest `id` ahead of the submission that will name it (a
    /// large file's manifest, sent as soon as its chunks were): see
    /// [`crate::manifest_check::precheck`]. A manifest that passes is not
    /// read again when a submission names it; one that does not is judged
    /// (and its fault named) by that acceptance.
    pub fn precheck_manifest(&self, id: &ManifestId) -> Result<crate::Precheck> {
        crate::manifest_check::precheck(&*self.objects, id, &self.verified)
    }

    /// Every manifest the submission names, against section 4.1 and the
    /// entries naming it; manifests not yet witnessed in
    /// `accepted_manifests` also have their chunks read (presence, lengths,
    /// profile cuts, content id). See [`crate::manifest_check`].
    pub(crate) fn check_manifests(&self, s: &Submission) -> Result<Option<Reject>> {
        use crate::manifest_check::{check_many, Claim, Depth, Fault};
        let mut claims: std::collections::BTreeMap<ManifestId, Vec<Claim<'_>>> = Default::default();
        for e in &s.change_set.entries {
            if let Some(st) = &e.state {
                claims.entry(st.manifest).or_default().push(Claim {
                    path: &e.path,
                    content: st.content,
                    size: st.size,
                });
            }
        }
        let witnessed: HashSet<ManifestId> = {
            let tx = self.db.begin_read()?;
            let t = tx.open_table(tables::ACCEPTED_MANIFESTS)?;
            let mut w = HashSet::new();
            for m in claims.keys() {
                if t.get(m.0.as_slice())?.is_some() {
                    w.insert(*m);
                }
            }
            w
        };
        let objects = WithInline {
            inline: &s.inline,
            store: &*self.objects,
        };
        let items: Vec<(ManifestId, &[Claim<'_>], Depth)> = claims
            .iter()
            .map(|(m, cl)| {
                let depth = if witnessed.contains(m) {
                    Depth::Shallow
                } else {
                    Depth::Accept
                };
                (*m, cl.as_slice(), depth)
            })
            .collect();
        let faults = check_many(&objects, &items, Some(&self.verified))?;
        let mut missing = Vec::new();
        for ((_, cl), fault) in claims.iter().zip(faults) {
            match fault {
                None => {}
                Some(Fault::Missing(ids)) => missing.extend(ids),
                Some(Fault::Invalid(why)) => {
                    return Ok(Some(Reject::with_paths(
                        ErrorCode::InvalidManifest,
                        why,
                        cl.iter().map(|c| c.path.to_owned()).collect(),
                    )))
                }
            }
        }
        if !missing.is_empty() {
            let named: Vec<String> = missing
                .iter()
                .take(MAX_REJECT_PATHS)
                .map(|m| m.to_string())
                .collect();
            return Ok(Some(Reject::new(
                ErrorCode::MissingObjects,
                format!(
                    "{} objects the manifests list are missing: {}",
                    missing.len(),
                    named.join(" ")
                ),
            )));
        }
        Ok(None)
    }

    /// Accept or reject one submission atomically.
    pub fn submit(&self, s: Submission) -> Result<Outcome> {
        let fingerprint = self.fingerprint(&s);
        if let Some(o) = self.replay(&s.operation, &fingerprint)? {
            // A retry crosses the archive barrier too: its original may
            // still be publishing.
            self.archive.publish()?;
            return Ok(o);
        }
        let deferred = self.defers_manifest_check(&s);
        let pre = self.precheck(&s, !deferred)?;
        if pre.is_none() && estimated_rows(&s) > BUFFERED_ROW_LIMIT {
            self.publish_inline(&s)?;
            let outcome = self.submit_streamed(s, fingerprint, deferred)?;
            self.cleanup_finished_pins()?;
            return Ok(outcome);
        }
        // Published after the turn and gate are released (the next group
        // need not wait for this one's archive flush), before returning.
        let mut outcomes = crate::journal::coalesce_publication(&self.archive, || {
            let outcomes = {
                let _turn = self
                    .turn
                    .lock()
                    .map_err(|_| MetadataError::Gate("submit turn poisoned".into()))?;
                self.accept_group(&[(&s, fingerprint, pre)])?
            };
            // Outside the turn and the gate (see `accept_group`).
            self.cleanup_finished_pins()?;
            Ok(outcomes)
        })?;
        outcomes
            .pop()
            .ok_or_else(|| MetadataError::Gate("no outcome".into()))
    }

    /// Publish the objects `s` carries before a streamed preparation
    /// (which reads them from the store); unreferenced if it is refused.
    fn publish_inline(&self, s: &Submission) -> Result<()> {
        if s.inline.is_empty() {
            return Ok(());
        }
        self.objects.publish_with(&s.inline.pieces(), &[])
    }

    /// Accept buffered submissions, up to [`GROUP_MEMBERS`] sharing one
    /// transaction.
    /// Each keeps its own change number, envelope, roots and outcome.
    pub fn submit_group(&self, subs: Vec<Submission>) -> Result<Vec<Outcome>> {
        // Published once, after the turn and gate are released, before
        // any outcome (a replayed one included) is returned.
        crate::journal::coalesce_publication(&self.archive, || {
            let mut prepared = Vec::with_capacity(subs.len());
            for s in subs {
                let p = self.prepare(&s)?;
                prepared.push((s, p));
            }
            let out = self.submit_prepared(&prepared)?;
            // Outside the turn and the gate (see `accept_group`).
            self.cleanup_finished_pins()?;
            Ok(out)
        })
    }

    /// What acceptance checks of `s` before it needs the submit turn: its
    /// fingerprint, a recorded outcome to replay, and the checks that do
    /// not depend on the repository's state (shape, change set identity,
    /// objects present and sound; for a streamed submission the
    /// manifests' deep check runs later, beside its staging). The
    /// submitting thread computes it, so
    /// concurrent submissions check in parallel instead of one after the
    /// other under a group's lead.
    pub fn prepare(&self, s: &Submission) -> Result<Prepared> {
        let fingerprint = self.fingerprint(s);
        if let Some(o) = self.replay(&s.operation, &fingerprint)? {
            return Ok(Prepared {
                fingerprint,
                replay: Some(o),
                pre: None,
                manifests_deferred: false,
            });
        }
        let deferred = self.defers_manifest_check(s);
        Ok(Prepared {
            fingerprint,
            replay: None,
            pre: self.precheck(s, !deferred)?,
            manifests_deferred: deferred,
        })
    }

    /// Accept prepared submissions (each prepared by [`Repository::prepare`]
    /// for exactly that submission): buffered ones in groups of up to
    /// [`GROUP_MEMBERS`] sharing one transaction, large ones streamed. Returns before
    /// the finished intents' pins are cleaned up: the caller runs
    /// [`Repository::cleanup_finished_pins`] (a group's lead may first hand
    /// over) and, as with every write, publishes the archive before
    /// returning any outcome.
    pub fn submit_prepared(&self, subs: &[(Submission, Prepared)]) -> Result<Vec<Outcome>> {
        let mut out = Vec::with_capacity(subs.len());
        let mut pending: Vec<(&Submission, [u8; 32], Option<Reject>)> = Vec::new();
        let mut rows = 0usize;
        let flush = |pending: &mut Vec<(&Submission, [u8; 32], Option<Reject>)>,
                     out: &mut Vec<Outcome>|
         -> Result<()> {
            if pending.is_empty() {
                return Ok(());
            }
            let _turn = self
                .turn
                .lock()
                .map_err(|_| MetadataError::Gate("submit turn poisoned".into()))?;
            out.extend(self.accept_group(pending)?);
            pending.clear();
            Ok(())
        };
        for (s, p) in subs {
            let fp = p.fingerprint;
            if let Some(o) = &p.replay {
                flush(&mut pending, &mut out)?;
                out.push(o.clone());
                continue;
            }
            let pre = p.pre.clone();
            let est = estimated_rows(s);
            if pre.is_none() && est > BUFFERED_ROW_LIMIT {
                flush(&mut pending, &mut out)?;
                self.publish_inline(s)?;
                out.push(self.submit_streamed(s.clone(), fp, p.manifests_deferred)?);
                continue;
            }
            if pending.len() == GROUP_MEMBERS || rows + est > BUFFERED_ROW_LIMIT {
                flush(&mut pending, &mut out)?;
                rows = 0;
            }
            rows += est;
            pending.push((s, fp, pre));
        }
        flush(&mut pending, &mut out)?;
        Ok(out)
    }

    /// One Immediate transaction for `members`, under the publication gate.
    pub(crate) fn accept_group(
        &self,
        members: &[(&Submission, [u8; 32], Option<Reject>)],
    ) -> Result<Vec<Outcome>> {
        // The caller holds the submit turn. A preparation that failed
        // part-way (an I/O error, not a crash) still holds its reserved
        // change and staged rows: remove them before taking that change.
        self.recover_submissions_locked()?;
        let _gate = self
            .gate
            .lock()
            .map_err(|_| MetadataError::Gate("publication gate poisoned".into()))?;
        let mut wtx = self.write()?;
        wtx.set_durability(self.acceptance_durability())?;
        let mut outcomes = Vec::with_capacity(members.len());
        let mut envelopes = Vec::new();
        // Objects accepted members carried: published with the envelopes.
        let mut carried: Vec<(ObjectId, &[u8])> = Vec::new();
        let mut seen_ops = HashSet::new();
        {
            let mut tx = Tx::open(&wtx)?;
            for (s, fp, pre) in members {
                // A retry racing its original, or a repeat inside the group.
                if let Some(row) = tx.operations.get(s.operation.0)? {
                    let rec = OperationRecord::decode(row.value())?;
                    drop(row);
                    if &rec.fingerprint != fp {
                        outcomes.push(Outcome::Rejected {
                            code: ErrorCode::OperationIntentMismatch,
                            detail: format!(
                                "operation {} was used before with another intent",
                                s.operation
                            ),
                            paths: Vec::new(),
                        });
                    } else {
                        let commits = &tx.commits;
                        outcomes.push(outcome_of_record(&rec, |c| {
                            let row = commits.get(c)?.ok_or_else(|| {
                                MetadataError::corrupt(format!("operation names absent change {c}"))
                            })?;
                            Ok(CommitRecord::decode(row.value())?.commit_id)
                        })?);
                    }
                    continue;
                }
                if !seen_ops.insert(s.operation) {
                    return Err(MetadataError::Gate("operation repeated in a group".into()));
                }
                if let Some(r) = pre {
                    record_rejection(&mut tx, &s.operation, *fp, r)?;
                    outcomes.push(r.outcome());
                    continue;
                }
                match self.accept_member(&mut tx, s, *fp)? {
                    Ok((change, commit_id, bytes)) => {
                        carried.extend(s.inline.pieces());
                        envelopes.push((commit_id, bytes));
                        outcomes.push(Outcome::Accepted { change, commit_id });
                    }
                    Err(r) => {
                        record_rejection(&mut tx, &s.operation, *fp, &r)?;
                        outcomes.push(r.outcome());
                    }
                }
            }
        }
        // Envelopes (and the objects accepted members carried) are durable
        // before the metadata transaction commits: one store batch.
        let envelopes: Vec<(ObjectId, &[u8])> = envelopes
            .iter()
            .map(|(id, bytes)| (ObjectId::commit(*id), bytes.as_slice()))
            .collect();
        // (one pack flush and one locator commit for the whole group, not
        // one per member).
        self.objects.publish_with(&carried, &envelopes)?;
        // The caller cleans up the finished intents' pins after releasing
        // the turn and this gate (finalized intents acquire no new pins,
        // so cleanup is safe beside other writers), and the acceptance and
        // that cleanup share one archive publication (the caller's).
        wtx.commit()?;
        Ok(outcomes)
    }

    /// Validate and produce one member inside the open transaction.
    #[allow(clippy::type_complexity)]
    fn accept_member(
        &self,
        tx: &mut Tx<'_>,
        s: &Submission,
        fingerprint: [u8; 32],
    ) -> Result<std::result::Result<(u64, CommitId, Vec<u8>), Reject>> {
        let Some(branch_head) = tx.heads.get(s.branch.0)?.map(|g| g.value()) else {
            return Ok(Err(Reject::new(
                ErrorCode::NotFound,
                format!("no branch {}", s.branch),
            )));
        };
        let rm = tx.repo_meta()?;
        let change = rm.head + 1;
        let base_root = crate::repo::root_in(&tx.roots, &tx.commits, &s.branch, branch_head)?;
        let releases = match validate_state(
            s,
            &tx.nodes,
            &tx.locks,
            &tx.ws_state,
            &tx.commits,
            base_root,
        )? {
            Ok(r) => r,
            Err(r) => return Ok(Err(r)),
        };
        let parent_commit = if branch_head == 0 {
            None
        } else {
            let row = tx.commits.get(branch_head)?.ok_or_else(|| {
                MetadataError::corrupt(format!("no commit at head {branch_head}"))
            })?;
            Some(CommitRecord::decode(row.value())?.commit_id)
        };
        let next_page = tx.nodes.last()?.map(|(k, _)| k.value()).unwrap_or(0);
        let (root, _) = {
            let mut sink = TxSink { tx };
            produce(
                s,
                change,
                base_root,
                next_page,
                PageIds::Dense,
                &mut sink,
                usize::MAX,
            )?
        };
        let (bytes, commit_id) = envelope(self, s, change, branch_head, parent_commit, &root)?;
        write_ledger(
            tx,
            &Ledger {
                s,
                fingerprint,
                change,
                branch_head,
                old_root: base_root,
                root,
                commit_id,
                releases: &releases,
            },
        )?;
        Ok(Ok((change, commit_id, bytes)))
    }
}

//! `doctor` / `verify`: read-only checks of a repository's metadata.
//!
//! Every problem has a stable dotted name (`docs/metadata.md` lists them):
//!
//! | name | what is wrong |
//! |---|---|
//! | `meta.snapshot-live` | `snapshot-live` differs from the live counts of the branch heads |
//! | `commit.missing` | no `commits` row for a change in `1..=head` |
//! | `commit.record` | a `commits` row does not decode |
//! | `commit.envelope-missing` | the object store lacks a commit's envelope |
//! | `commit.envelope-identity` | envelope bytes do not hash to the identity in the index row |
//! | `commit.envelope-fields` | envelope payload disagrees with the index row |
//! | `commit.parent-link` | an envelope's parent link is not the identity accepted at its parent change |
//! | `snapshot.root-missing` | no root row at an accepted change |
//! | `snapshot.root-row` | a root row does not decode (size, version, empty-link rules, live counts) |
//! | `snapshot.root-provenance` | an envelope's portable roots differ from the stored root row |
//! | `snapshot.page` | a page is missing, does not decode, or disagrees with its link |
//! | `snapshot.structure` | a node breaks a structural rule (child prefix, id order, valueless fan-out, value key) |
//! | `snapshot.collision-state` | the collision tree's live values are not the fold of the exact tree's |
//! | `history.change-paths` | `change_paths` and `history` disagree for a change |
//! | `history.entry-count` | a change's path count differs from its commit record |
//! | `history.tree` | a history row differs from the tree value at its change |
//! | `history.coverage` | a tree value at a branch head has no history row |
//! | `commit.unchained` | (warning) a legacy v1–v3 envelope carries no links |
//! | `history.record` | a history row does not decode or has a malformed key |
//! | `history.moves` | a `moves` row without a matching history move, or the reverse |
//! | `lineage.missing`, `lineage.extra`, `lineage.value` | `file_lineage` edges against accepted history |
//! | `manifests.missing`, `manifests.witness` | `accepted_manifests` against history and commits |
//! | `manifests.objects-missing` | an accepted file's manifest or a chunk it lists is not in the store |
//! | `manifests.invalid` | an accepted file's manifest does not decode, breaks a profile rule, or disagrees with the file's size, content id or chunk bytes |
//! | `locks.record`, `locks.index` | lock rows and the ownership index |
//! | `workspaces.record`, `workspaces.owner-count` | registrations and owner counts |
//! | `operations.record`, `operations.accepted` | operation outcomes against commits |
//! | `submit.pending`, `submit.stage-orphan` | an unrecovered streamed preparation |
//! | `metadata.change-notes` | a change note that does not decode, names no accepted change, or skips a revision |

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use redb::{ReadableDatabase, ReadableTable};
use scribe_format::{path, BranchId, ManifestId, ObjectId};

use crate::error::Result;
use crate::records::{
    decode_accepted_manifest, decode_move, decode_u64, keys, CommitRecord, HistoryRecord,
    LockRecord, OperationRecord, WorkspaceRecord,
};
use crate::repo::{read_repo_meta, Repository};
use crate::tables::{self, meta};
use crate::tree::{lookup, verify_page, CachedPages, PageCache};
use scribe_format::commit::{commit_id, StoredCommit};
use scribe_format::snapshot::{Link, Node, RootRow};

/// One problem found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub name: &'static str,
    pub detail: String,
}

/// Everything `doctor` found; empty means clean.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DoctorReport {
    pub problems: Vec<Problem>,
    /// Changes whose envelopes were re-hashed.
    pub commits_checked: u64,
    /// Distinct pages verified.
    pub pages_checked: u64,
}

impl DoctorReport {
    fn add(&mut self, name: &'static str, detail: impl Into<String>) {
        if self.problems.len() < 10_000 {
            self.problems.push(Problem {
                name,
                detail: detail.into(),
            });
        }
    }

    /// Whether a problem with this name was found.
    pub fn has(&self, name: &str) -> bool {
        self.problems.iter().any(|p| p.name == name)
    }

    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

impl Repository {
    /// `verify`: the same read-only checks as [`Repository::doctor`].
    pub fn verify(&self) -> Result<DoctorReport> {
        self.doctor()
    }

    /// Read-only verification of every metadata invariant.
    pub fn doctor(&self) -> Result<DoctorReport> {
        let mut rep = DoctorReport::default();
        let tx = self.db.begin_read()?;
        let head = read_repo_meta(&tx)?.head;
        let m = tx.open_table(tables::META)?;
        let commits = tx.open_table(tables::COMMITS)?;
        let roots = tx.open_table(tables::SNAPSHOT_ROOTS)?;
        let nodes = tx.open_table(tables::SNAPSHOT_NODES)?;
        let history = tx.open_table(tables::HISTORY)?;
        let moves = tx.open_table(tables::MOVES)?;
        let lineage = tx.open_table(tables::FILE_LINEAGE)?;
        let change_paths = tx.open_table(tables::CHANGE_PATHS)?;
        let manifests = tx.open_table(tables::ACCEPTED_MANIFESTS)?;
        let heads = tx.open_table(tables::BRANCH_HEADS)?;

        // ---- commits and envelopes, 1..=head in order.
        let mut records: BTreeMap<u64, CommitRecord> = BTreeMap::new();
        for change in 1..=head {
            let Some(row) = commits.get(change)? else {
                rep.add("commit.missing", format!("change {change}"));
                continue;
            };
            match CommitRecord::decode(row.value()) {
                Ok(r) => {
                    records.insert(change, r);
                }
                Err(e) => rep.add("commit.record", format!("change {change}: {e}")),
            }
        }
        for (&change, rec) in &records {
            rep.commits_checked += 1;
            let bytes = match self.objects.read_commit(&ObjectId::commit(rec.commit_id)) {
                Ok(Some(b)) => b,
                Ok(None) => {
                    rep.add(
                        "commit.envelope-missing",
                        format!("change {change} {}", rec.commit_id),
                    );
                    continue;
                }
                // A verifying store refuses damaged bytes itself.
                Err(e) => {
                    rep.add(
                        "commit.envelope-identity",
                        format!("change {change}: the store refuses {}: {e}", rec.commit_id),
                    );
                    continue;
                }
            };
            if commit_id(&bytes).ok() != Some(rec.commit_id) {
                rep.add(
                    "commit.envelope-identity",
                    format!(
                        "change {change}: envelope does not hash to {}",
                        rec.commit_id
                    ),
                );
            }
            let links = match StoredCommit::decode(&bytes) {
                Ok(StoredCommit::V5(env)) => env,
                Ok(_) => {
                    rep.add(
                        "commit.unchained",
                        format!("change {change}: a legacy envelope carries no links"),
                    );
                    continue;
                }
                Err(e) => {
                    rep.add(
                        "commit.envelope-fields",
                        format!("change {change}: envelope does not decode: {e}"),
                    );
                    continue;
                }
            };
            if links.payload.change != change
                || links.payload.parent_change != rec.parent
                || links.payload.branch != rec.branch
                || links.payload.change_set != rec.change_set
                || links.payload.repository != self.id
            {
                rep.add(
                    "commit.envelope-fields",
                    format!("change {change}: envelope disagrees with its index row"),
                );
            }
            let want_parent = if rec.parent == 0 {
                None
            } else {
                records.get(&rec.parent).map(|p| p.commit_id)
            };
            if links.parent_commit != want_parent {
                rep.add(
                    "commit.parent-link",
                    format!("change {change}: parent link does not name the commit accepted at change {}", rec.parent),
                );
            }
            match roots.get(keys::root(&rec.branch, change).as_slice())? {
                None => rep.add("snapshot.root-missing", format!("change {change}")),
                Some(v) => match RootRow::decode(v.value()) {
                    Err(e) => rep.add("snapshot.root-row", format!("change {change}: {e}")),
                    Ok(r) => {
                        if r.exact.content != links.content_root
                            || r.exact.revision != links.revision_root
                        {
                            rep.add(
                                "snapshot.root-provenance",
                                format!("change {change}: envelope roots differ from the stored root row"),
                            );
                        }
                    }
                },
            }
        }

        // ---- every root row and every reachable page once.
        let mut branch_roots: Vec<(BranchId, u64, RootRow)> = Vec::new();
        for row in roots.range::<&[u8]>(..)? {
            let (k, v) = row?;
            let k = k.value();
            if k.len() != 24 {
                rep.add("snapshot.root-row", "root key is not 24 bytes");
                continue;
            }
            let mut b = [0u8; 16];
            b.copy_from_slice(&k[..16]);
            let c = u64::from_be_bytes(k[16..].try_into().unwrap_or_default());
            match RootRow::decode(v.value()) {
                Ok(r) => branch_roots.push((BranchId(b), c, r)),
                Err(e) => rep.add("snapshot.root-row", format!("change {c}: {e}")),
            }
        }
        let root_map: HashMap<(BranchId, u64), RootRow> = branch_roots
            .iter()
            .map(|(b, c, r)| ((*b, *c), *r))
            .collect();
        let mut visited: HashSet<u64> = HashSet::new();
        for (_, c, r) in &branch_roots {
            for (link, exact) in [(&r.exact, true), (&r.collision, false)] {
                check_tree(&nodes, link, exact, *c, &mut visited, &mut rep)?;
            }
        }
        rep.pages_checked = visited.len() as u64;

        // ---- live total and collision state at every branch head.
        let mut total_live = 0u64;
        let mut cache = PageCache::default();
        for row in heads.range::<[u8; 16]>(..)? {
            let (b, h) = row?;
            let branch = BranchId(b.value());
            let h = h.value();
            let Some((_, _, r)) = branch_roots
                .iter()
                .filter(|(rb, c, _)| *rb == branch && *c <= h)
                .max_by_key(|(_, c, _)| *c)
            else {
                rep.add("snapshot.root-missing", format!("branch {branch} head {h}"));
                continue;
            };
            total_live += r.exact.live;
            let mut src = CachedPages {
                table: &nodes,
                cache: &mut cache,
            };
            let exact = crate::tree::collect_all(&mut src, &r.exact);
            let fold = crate::tree::collect_all(&mut src, &r.collision);
            if let (Ok(exact), Ok(fold)) = (exact, fold) {
                // Every tree value at the head is an accepted revision.
                for (_, v) in &exact {
                    if history
                        .get(keys::history(&branch, &v.path, v.last_change).as_slice())?
                        .is_none()
                    {
                        rep.add(
                            "history.coverage",
                            format!(
                                "{}@{} is in the tree but not in history",
                                v.path, v.last_change
                            ),
                        );
                    }
                }
                let want: BTreeMap<Vec<u8>, String> = exact
                    .iter()
                    .filter(|(_, v)| v.state.is_some())
                    .map(|(_, v)| (path::collision_key(&v.path), v.path.clone()))
                    .collect();
                let have: BTreeMap<Vec<u8>, String> = fold
                    .iter()
                    .filter(|(_, v)| v.state.is_some())
                    .map(|(k, v)| (k.clone(), v.path.clone()))
                    .collect();
                if want != have || want.len() as u64 != r.exact.live {
                    rep.add(
                        "snapshot.collision-state",
                        format!(
                            "branch {branch}: {} live collision keys, {} expected",
                            have.len(),
                            want.len()
                        ),
                    );
                }
            }
        }
        let stored_live = match m.get(meta::SNAPSHOT_LIVE)? {
            Some(v) => decode_u64(v.value(), "snapshot-live").unwrap_or(u64::MAX),
            None => u64::MAX,
        };
        if stored_live != total_live {
            rep.add(
                "meta.snapshot-live",
                format!("stored {stored_live}, branch heads hold {total_live}"),
            );
        }

        // ---- history, change paths, trees, moves, lineage, witnesses.
        let mut expected_edges: BTreeSet<Vec<u8>> = BTreeSet::new();
        let mut used_manifests: HashMap<ManifestId, Vec<(BranchId, u64)>> = HashMap::new();
        let mut history_rows = 0u64;
        // Per path, revisions in key order give each edit/delete its base.
        let mut last: Option<(BranchId, String, u64)> = None;
        for row in history.range::<&[u8]>(..)? {
            let (k, v) = row?;
            let Some((branch, p, change)) = keys::split_history(k.value()) else {
                rep.add("history.record", "malformed history key");
                continue;
            };
            if change > head {
                continue;
            }
            history_rows += 1;
            let rec = match HistoryRecord::decode(v.value()) {
                Ok(r) if r.change == change => r,
                Ok(_) => {
                    rep.add(
                        "history.record",
                        format!("{p}@{change}: change field differs from key"),
                    );
                    continue;
                }
                Err(e) => {
                    rep.add("history.record", format!("{p}@{change}: {e}"));
                    continue;
                }
            };
            let prev = match &last {
                Some((b, lp, lc)) if *b == branch && lp == p => Some(*lc),
                _ => None,
            };
            last = Some((branch, p.to_owned(), change));
            if rec.action != 1 {
                match prev {
                    Some(base) => {
                        expected_edges.insert(keys::lineage(change, p, base, p));
                        expected_edges.insert(keys::lineage(base, p, change, p));
                    }
                    None => rep.add(
                        "history.record",
                        format!("{p}@{change}: edit or delete without a prior revision"),
                    ),
                }
            }
            let mk = keys::history(&branch, p, change);
            let mv = moves.get(mk.as_slice())?.map(|g| decode_move(g.value()));
            match (&rec.moved_from, mv) {
                (None, None) => {}
                (Some((sp, sc)), Some(Ok((mp, mc)))) if sp == &mp && *sc == mc => {
                    expected_edges.insert(keys::lineage(change, p, *sc, sp));
                    expected_edges.insert(keys::lineage(*sc, sp, change, p));
                    if history
                        .get(keys::history(&branch, sp, *sc).as_slice())?
                        .is_none()
                    {
                        rep.add(
                            "history.moves",
                            format!("{p}@{change}: move source {sp}@{sc} has no history"),
                        );
                    }
                }
                _ => rep.add(
                    "history.moves",
                    format!("{p}@{change}: moves row and history disagree"),
                ),
            }
            if change_paths
                .get(keys::change_path(&branch, change, p).as_slice())?
                .is_none()
            {
                rep.add(
                    "history.change-paths",
                    format!("{p}@{change} has no change_paths row"),
                );
            }
            if let Some(st) = &rec.state {
                used_manifests
                    .entry(st.manifest)
                    .or_default()
                    .push((branch, change));
            }
            // The tree at that change holds exactly this revision.
            if let Some(r) = root_map.get(&(branch, change)) {
                let mut src = CachedPages {
                    table: &nodes,
                    cache: &mut cache,
                };
                match lookup(&mut src, &r.exact, p.as_bytes()) {
                    Ok(Some(v)) if v.last_change == change && v.state == rec.state => {}
                    Ok(_) => rep.add("history.tree", format!("{p}@{change}: tree value differs")),
                    Err(_) => {}
                }
            }
        }
        for row in moves.range::<&[u8]>(..)? {
            let (k, _) = row?;
            if history.get(k.value())?.is_none() {
                rep.add("history.moves", "a moves row has no history row");
            }
        }
        let mut cp_count: BTreeMap<u64, u32> = BTreeMap::new();
        for row in change_paths.range::<&[u8]>(..)? {
            let (k, _) = row?;
            let k = k.value();
            if k.len() < 24 {
                rep.add("history.change-paths", "malformed change_paths key");
                continue;
            }
            let mut b = [0u8; 16];
            b.copy_from_slice(&k[..16]);
            let c = u64::from_be_bytes(k[16..24].try_into().unwrap_or_default());
            if c > head {
                continue;
            }
            let p = String::from_utf8_lossy(&k[24..]).into_owned();
            if history
                .get(keys::history(&BranchId(b), &p, c).as_slice())?
                .is_none()
            {
                rep.add(
                    "history.change-paths",
                    format!("{p}@{c} has no history row"),
                );
            }
            *cp_count.entry(c).or_default() += 1;
        }
        for (c, rec) in &records {
            let n = cp_count.get(c).copied().unwrap_or(0);
            if n != rec.entry_count {
                rep.add(
                    "history.entry-count",
                    format!("change {c}: {n} paths, record says {}", rec.entry_count),
                );
            }
        }
        let _ = history_rows;
        let mut actual_edges = BTreeSet::new();
        for row in lineage.range::<&[u8]>(..)? {
            let (k, v) = row?;
            if !v.value().is_empty() {
                rep.add("lineage.value", "a lineage edge has a nonempty value");
            }
            let k = k.value().to_vec();
            let within = keys::split_lineage(&k).is_some_and(|(a, _, b, _)| a <= head && b <= head);
            if within {
                actual_edges.insert(k);
            }
        }
        for e in expected_edges.difference(&actual_edges) {
            rep.add("lineage.missing", describe_edge(e));
        }
        for e in actual_edges.difference(&expected_edges) {
            rep.add("lineage.extra", describe_edge(e));
        }
        for (mid, uses) in &used_manifests {
            match manifests.get(mid.0.as_slice())? {
                None => rep.add(
                    "manifests.missing",
                    format!("manifest {mid} has no witness"),
                ),
                Some(v) => match decode_accepted_manifest(v.value()) {
                    Ok(w) if uses.contains(&w) => {}
                    _ => rep.add(
                        "manifests.witness",
                        format!("manifest {mid}: witness names no accepted use"),
                    ),
                },
            }
        }
        for row in manifests.range::<&[u8]>(..)? {
            let (k, _) = row?;
            let k = k.value();
            let Ok(arr) = <[u8; 32]>::try_from(k) else {
                rep.add("manifests.witness", "a witness key is not 32 bytes");
                continue;
            };
            if !used_manifests.contains_key(&ManifestId(arr)) {
                rep.add(
                    "manifests.witness",
                    format!("manifest {} is witnessed but unused", hex::encode(k)),
                );
            }
        }

        self.doctor_locks_and_records(&tx, head, &records, &mut rep)?;
        drop(tx);
        rep.problems.extend(self.check_accepted_manifests()?);
        Ok(rep)
    }

    /// Every manifest an accepted file revision names, read from the object
    /// store and held to section 4.1 and to the revision (issue #14 item
    /// 4): what acceptance checks today, for stores poisoned before it did
    /// or behind its back. Each problem names `path@change`. Reads every
    /// accepted chunk once; empty for a store that holds no bytes.
    pub fn check_accepted_manifests(&self) -> Result<Vec<Problem>> {
        use crate::manifest_check::{check, Claim, Depth, Fault};
        let mut out = Vec::new();
        if !self.objects.checks_manifests() {
            return Ok(out);
        }
        type Uses = Vec<(String, u64, scribe_format::FileContentId, u64)>;
        let mut uses: BTreeMap<ManifestId, Uses> = BTreeMap::new();
        {
            let tx = self.db.begin_read()?;
            let head = read_repo_meta(&tx)?.head;
            let history = tx.open_table(tables::HISTORY)?;
            for row in history.range::<&[u8]>(..)? {
                let (k, v) = row?;
                let Some((_, p, change)) = keys::split_history(k.value()) else {
                    continue;
                };
                if change > head {
                    continue;
                }
                if let Ok(HistoryRecord {
                    state: Some(st), ..
                }) = HistoryRecord::decode(v.value())
                {
                    uses.entry(st.manifest).or_default().push((
                        p.to_owned(),
                        change,
                        st.content,
                        st.size,
                    ));
                }
            }
        }
        let mut add = |name: &'static str, detail: String| {
            if out.len() < 10_000 {
                out.push(Problem { name, detail });
            }
        };
        for (m, revs) in &uses {
            let fault = check(&*self.objects, m, &[], Depth::Audit)?;
            let fault = match fault {
                None => {
                    for (p, c, content, size) in revs {
                        let claim = [Claim {
                            path: p,
                            content: *content,
                            size: *size,
                        }];
                        if let Some(Fault::Invalid(why)) =
                            check(&*self.objects, m, &claim, Depth::Shallow)?
                        {
                            add("manifests.invalid", format!("{p}@{c}: {why}"));
                        }
                    }
                    continue;
                }
                Some(f) => f,
            };
            for (p, c, _, _) in revs {
                match &fault {
                    Fault::Missing(ids) => add(
                        "manifests.objects-missing",
                        format!(
                            "{p}@{c}: manifest {m}: {} objects are missing: {}",
                            ids.len(),
                            ids.iter()
                                .take(8)
                                .map(|i| i.to_string())
                                .collect::<Vec<_>>()
                                .join(" ")
                        ),
                    ),
                    Fault::Invalid(why) => add("manifests.invalid", format!("{p}@{c}: {why}")),
                }
            }
        }
        Ok(out)
    }

    fn doctor_locks_and_records(
        &self,
        tx: &redb::ReadTransaction,
        head: u64,
        records: &BTreeMap<u64, CommitRecord>,
        rep: &mut DoctorReport,
    ) -> Result<()> {
        let locks = tx.open_table(tables::LOCKS)?;
        let st = tx.open_table(tables::WORKSPACE_STATE)?;
        let mut lock_owners: HashMap<String, [u8; 16]> = HashMap::new();
        for row in locks.range::<&str>(..)? {
            let (k, v) = row?;
            match LockRecord::decode(v.value()) {
                Ok(r) => {
                    if st
                        .get(keys::ws_lock_index(&r.workspace.0, k.value()).as_slice())?
                        .is_none()
                    {
                        rep.add(
                            "locks.index",
                            format!("lock {} has no ownership index row", k.value()),
                        );
                    }
                    lock_owners.insert(k.value().to_owned(), r.workspace.0);
                }
                Err(e) => rep.add("locks.record", format!("{}: {e}", k.value())),
            }
        }
        let mut index_counts: HashMap<[u8; 16], u64> = HashMap::new();
        let mut stored_counts: HashMap<[u8; 16], u64> = HashMap::new();
        for row in st.range::<&[u8]>(..)? {
            let (k, v) = row?;
            let k = k.value();
            match k.first() {
                Some(5) if k.len() >= 17 => {
                    let mut ws = [0u8; 16];
                    ws.copy_from_slice(&k[1..17]);
                    let p = String::from_utf8_lossy(&k[17..]).into_owned();
                    if lock_owners.get(&p) != Some(&ws) {
                        rep.add(
                            "locks.index",
                            format!("index row for {p} names no matching lock"),
                        );
                    }
                }
                Some(1) if k.len() == 33 => {
                    let mut o = [0u8; 16];
                    o.copy_from_slice(&k[1..17]);
                    *index_counts.entry(o).or_default() += 1;
                }
                Some(2) if k.len() == 17 => {
                    let mut o = [0u8; 16];
                    o.copy_from_slice(&k[1..17]);
                    stored_counts
                        .insert(o, decode_u64(v.value(), "owner count").unwrap_or(u64::MAX));
                }
                _ => {}
            }
        }
        if index_counts != stored_counts {
            rep.add(
                "workspaces.owner-count",
                "active owner counts differ from the owner index",
            );
        }
        let ws = tx.open_table(tables::WORKSPACES)?;
        for row in ws.range::<[u8; 16]>(..)? {
            let (k, v) = row?;
            if let Err(e) = WorkspaceRecord::decode(v.value()) {
                rep.add(
                    "workspaces.record",
                    format!("{}: {e}", hex::encode(k.value())),
                );
            }
        }
        let ops = tx.open_table(tables::OPERATIONS)?;
        for row in ops.range::<[u8; 16]>(..)? {
            let (k, v) = row?;
            match OperationRecord::decode(v.value()) {
                Ok(r) if r.accepted_change != 0 => {
                    let ok = r.accepted_change <= head
                        && records
                            .get(&r.accepted_change)
                            .is_some_and(|c| c.operation.0 == k.value());
                    if !ok {
                        rep.add(
                            "operations.accepted",
                            format!(
                                "operation {} names change {}",
                                hex::encode(k.value()),
                                r.accepted_change
                            ),
                        );
                    }
                }
                Ok(_) => {}
                Err(e) => rep.add(
                    "operations.record",
                    format!("{}: {e}", hex::encode(k.value())),
                ),
            }
        }
        let notes = tx.open_table(tables::CHANGE_NOTES)?;
        let mut expect: Option<(u64, u32)> = None;
        for row in notes.range::<&[u8]>(..)? {
            let (k, v) = row?;
            match crate::notes::decode_note(k.value(), v.value()) {
                Ok((change, note)) => {
                    let next = match expect {
                        Some((c, r)) if c == change => r + 1,
                        _ => 1,
                    };
                    if note.revision != next || !records.contains_key(&change) {
                        rep.add(
                            "metadata.change-notes",
                            format!("change {change} revision {}: not the next revision of an accepted change", note.revision),
                        );
                    }
                    expect = Some((change, note.revision));
                }
                Err(e) => rep.add("metadata.change-notes", format!("{e}")),
            }
        }
        let m = tx.open_table(tables::META)?;
        let pending = m.get(meta::PENDING_SUBMIT)?.is_some();
        if pending {
            rep.add(
                "submit.pending",
                "a streamed preparation awaits recover-submissions",
            );
        }
        let stage = tx.open_table(tables::SUBMIT_STAGE)?;
        if !pending && stage.first()?.is_some() {
            rep.add(
                "submit.stage-orphan",
                "undo inventory rows without a pending preparation",
            );
        }
        Ok(())
    }
}

fn describe_edge(k: &[u8]) -> String {
    match keys::split_lineage(k) {
        Some((a, p, b, q)) => format!("{p}@{a} -> {q}@{b}"),
        None => "malformed lineage key".into(),
    }
}

/// Verify every page reachable from `root` not yet visited.
fn check_tree<T: ReadableTable<u64, &'static [u8]>>(
    nodes: &T,
    root: &Link,
    exact: bool,
    change: u64,
    visited: &mut HashSet<u64>,
    rep: &mut DoctorReport,
) -> Result<()> {
    if root.is_empty() {
        return Ok(());
    }
    // (link, parent prefix, edge, parent page id)
    type Pending = (Link, Option<(Vec<u8>, u8, u64)>);
    let mut stack: Vec<Pending> = vec![(*root, None)];
    while let Some((link, parent)) = stack.pop() {
        if let Some((pp, edge, pid)) = &parent {
            if link.node >= *pid {
                rep.add(
                    "snapshot.structure",
                    format!("page {} is not below its parent {pid}", link.node),
                );
            }
            let _ = (pp, edge);
        }
        if !visited.insert(link.node) {
            continue;
        }
        let node: Node = match nodes.get(link.node)? {
            None => {
                rep.add(
                    "snapshot.page",
                    format!("page {} (root at change {change}) is missing", link.node),
                );
                continue;
            }
            Some(page) => match verify_page(&link, page.value()) {
                Ok(n) => n,
                Err(e) => {
                    rep.add("snapshot.page", format!("{e}"));
                    continue;
                }
            },
        };
        if let Some((pp, edge, _)) = &parent {
            let ok = node.prefix.len() > pp.len()
                && node.prefix.starts_with(pp)
                && node.prefix[pp.len()] == *edge;
            if !ok {
                rep.add(
                    "snapshot.structure",
                    format!(
                        "page {}: prefix does not extend its parent's by its edge",
                        link.node
                    ),
                );
            }
        }
        match &node.value {
            None if node.children.len() < 2 => {
                rep.add(
                    "snapshot.structure",
                    format!(
                        "page {}: valueless node with fewer than two children",
                        link.node
                    ),
                );
            }
            Some(v) => {
                let key_ok = if exact {
                    node.prefix == v.path.as_bytes()
                } else {
                    node.prefix == path::collision_key(&v.path)
                };
                let state_ok = v.last_change != 0
                    && v.state.as_ref().is_none_or(|s| s.change == v.last_change);
                if !key_ok || !state_ok {
                    rep.add(
                        "snapshot.structure",
                        format!("page {}: value disagrees with its key or change", link.node),
                    );
                }
            }
            None => {}
        }
        for (e, l) in &node.children {
            stack.push((*l, Some((node.prefix.clone(), *e, link.node))));
        }
    }
    Ok(())
}

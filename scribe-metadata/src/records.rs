//! Row encodings of `catalog.redb` and `metadata.redb` (sections 7.1, 8, 12).
//!
//! Every layout is written beside its type. Integers are little endian
//! except the *ordered* (big-endian) segments of index keys. Decoders refuse
//! unknown versions, bad flags, truncation and trailing bytes.

use scribe_format::bytes::{Put, Reader};
use scribe_format::limits::{MAX_AUTHOR_BYTES, MAX_MESSAGE_BYTES, MAX_PATH_BYTES};
use scribe_format::{BranchId, ChangeSetId, CommitId, FormatError, OperationId, WorkspaceId};

use scribe_format::snapshot::FileRecord;

fn version(r: &mut Reader<'_>, what: &'static str, want: u8) -> Result<(), FormatError> {
    let v = r.u8(what)?;
    if v != want {
        return Err(FormatError::UnsupportedVersion {
            what,
            version: v.into(),
        });
    }
    Ok(())
}

fn id16(r: &mut Reader<'_>, what: &'static str) -> Result<[u8; 16], FormatError> {
    r.array::<16>(what)
}

fn id32(r: &mut Reader<'_>, what: &'static str) -> Result<[u8; 32], FormatError> {
    r.array::<32>(what)
}

/// `u32 LE`.
pub fn u32_bytes(v: u32) -> [u8; 4] {
    v.to_le_bytes()
}

/// `u64 LE`.
pub fn u64_bytes(v: u64) -> [u8; 8] {
    v.to_le_bytes()
}

/// Decode exactly four bytes as `u32 LE`.
pub fn decode_u32(b: &[u8], what: &'static str) -> Result<u32, FormatError> {
    let mut r = Reader::new(b);
    let v = r.u32(what)?;
    r.finish(what)?;
    Ok(v)
}

/// Decode exactly eight bytes as `u64 LE`.
pub fn decode_u64(b: &[u8], what: &'static str) -> Result<u64, FormatError> {
    let mut r = Reader::new(b);
    let v = r.u64(what)?;
    r.finish(what)?;
    Ok(v)
}

// ------------------------------------------------------------------ catalog

/// Catalog repository state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RepoState {
    Creating = 1,
    Ready = 2,
}

/// `repos` value: `u8 1 ‖ str16 name ‖ u8 state ‖ u64 created ms ‖ [16] main branch id`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogRecord {
    pub name: String,
    pub state: RepoState,
    pub created_ms: u64,
    pub main_branch: BranchId,
}

impl CatalogRecord {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.put_u8(1);
        out.put_bytes16(self.name.as_bytes());
        out.put_u8(self.state as u8);
        out.put_u64(self.created_ms);
        out.put_bytes(&self.main_branch.0);
        out
    }

    pub fn decode(b: &[u8]) -> Result<Self, FormatError> {
        let mut r = Reader::new(b);
        version(&mut r, "catalog record", 1)?;
        let name = r.str16("catalog record.name", 128)?.to_owned();
        let state = match r.u8("catalog record.state")? {
            1 => RepoState::Creating,
            2 => RepoState::Ready,
            v => {
                return Err(FormatError::InvalidValue {
                    what: "catalog record.state",
                    value: v.into(),
                    reason: "states are 1 creating and 2 ready",
                })
            }
        };
        let created_ms = r.u64("catalog record.created ms")?;
        let main_branch = BranchId(id16(&mut r, "catalog record.main branch")?);
        r.finish("catalog record")?;
        Ok(CatalogRecord {
            name,
            state,
            created_ms,
            main_branch,
        })
    }
}

// --------------------------------------------------------------- repo meta

/// `meta["repo-meta"]`: `u8 1 ‖ u64 head change ‖ u64 lock generation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RepoMeta {
    pub head: u64,
    pub lock_generation: u64,
}

impl RepoMeta {
    pub fn encode(&self) -> [u8; 17] {
        let mut out = [0u8; 17];
        out[0] = 1;
        out[1..9].copy_from_slice(&self.head.to_le_bytes());
        out[9..17].copy_from_slice(&self.lock_generation.to_le_bytes());
        out
    }

    pub fn decode(b: &[u8]) -> Result<Self, FormatError> {
        let mut r = Reader::new(b);
        version(&mut r, "repo-meta", 1)?;
        let head = r.u64("repo-meta.head")?;
        let lock_generation = r.u64("repo-meta.lock generation")?;
        r.finish("repo-meta")?;
        Ok(RepoMeta {
            head,
            lock_generation,
        })
    }
}

/// `branches` value: `u8 1 ‖ str16 name ‖ u64 created change ‖ u8
/// branched-from present (‖ [16] branch ‖ u64 change) ‖ u8 state (1 active)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BranchRecord {
    pub name: String,
    pub created_change: u64,
    pub branched_from: Option<(BranchId, u64)>,
    pub state: u8,
}

impl BranchRecord {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.put_u8(1);
        out.put_bytes16(self.name.as_bytes());
        out.put_u64(self.created_change);
        match &self.branched_from {
            None => out.put_u8(0),
            Some((b, c)) => {
                out.put_u8(1);
                out.put_bytes(&b.0);
                out.put_u64(*c);
            }
        }
        out.put_u8(self.state);
        out
    }

    pub fn decode(b: &[u8]) -> Result<Self, FormatError> {
        let mut r = Reader::new(b);
        version(&mut r, "branch record", 1)?;
        let name = r.str16("branch record.name", 256)?.to_owned();
        let created_change = r.u64("branch record.created change")?;
        let branched_from = if r.flag("branch record.branched-from present")? {
            let b = BranchId(id16(&mut r, "branch record.source branch")?);
            Some((b, r.u64("branch record.source change")?))
        } else {
            None
        };
        let state = r.u8("branch record.state")?;
        if state != 1 && state != 2 {
            return Err(FormatError::InvalidValue {
                what: "branch record.state",
                value: state.into(),
                reason: "states are 1 active and 2 unpublished",
            });
        }
        r.finish("branch record")?;
        Ok(BranchRecord {
            name,
            created_change,
            branched_from,
            state,
        })
    }
}

/// `commits` value (version 1): `u8 1 ‖ [32] commit id ‖ [16] branch ‖ u64
/// parent ‖ [32] change set id ‖ [16] operation ‖ [16] workspace ‖ u64
/// timestamp ms ‖ u32 entry count ‖ str16 author ‖ str32 message`.
/// Version 2 (cherry-picks) appends `[16] source branch ‖ u64 source change`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitRecord {
    pub commit_id: CommitId,
    pub branch: BranchId,
    pub parent: u64,
    pub change_set: ChangeSetId,
    pub operation: OperationId,
    pub workspace: WorkspaceId,
    pub timestamp_ms: u64,
    pub entry_count: u32,
    pub author: String,
    pub message: String,
    pub cherry_pick: Option<(BranchId, u64)>,
}

impl CommitRecord {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(160 + self.author.len() + self.message.len());
        out.put_u8(if self.cherry_pick.is_some() { 2 } else { 1 });
        out.put_bytes(&self.commit_id.0);
        out.put_bytes(&self.branch.0);
        out.put_u64(self.parent);
        out.put_bytes(&self.change_set.0);
        out.put_bytes(&self.operation.0);
        out.put_bytes(&self.workspace.0);
        out.put_u64(self.timestamp_ms);
        out.put_u32(self.entry_count);
        out.put_bytes16(self.author.as_bytes());
        out.put_bytes32(self.message.as_bytes());
        if let Some((b, c)) = &self.cherry_pick {
            out.put_bytes(&b.0);
            out.put_u64(*c);
        }
        out
    }

    pub fn decode(b: &[u8]) -> Result<Self, FormatError> {
        let mut r = Reader::new(b);
        let v = r.u8("commit record version")?;
        if v != 1 && v != 2 {
            return Err(FormatError::UnsupportedVersion {
                what: "commit record",
                version: v.into(),
            });
        }
        let commit_id = CommitId(id32(&mut r, "commit record.commit id")?);
        let branch = BranchId(id16(&mut r, "commit record.branch")?);
        let parent = r.u64("commit record.parent")?;
        let change_set = ChangeSetId(id32(&mut r, "commit record.change set")?);
        let operation = OperationId(id16(&mut r, "commit record.operation")?);
        let workspace = WorkspaceId(id16(&mut r, "commit record.workspace")?);
        let timestamp_ms = r.u64("commit record.timestamp")?;
        let entry_count = r.u32("commit record.entry count")?;
        let author = r
            .str16("commit record.author", MAX_AUTHOR_BYTES)?
            .to_owned();
        let message = r
            .str32("commit record.message", MAX_MESSAGE_BYTES)?
            .to_owned();
        let cherry_pick = if v == 2 {
            let b = BranchId(id16(&mut r, "commit record.source branch")?);
            Some((b, r.u64("commit record.source change")?))
        } else {
            None
        };
        r.finish("commit record")?;
        Ok(CommitRecord {
            commit_id,
            branch,
            parent,
            change_set,
            operation,
            workspace,
            timestamp_ms,
            entry_count,
            author,
            message,
            cherry_pick,
        })
    }
}

/// Change-set action bytes.
pub mod action {
    pub const ADD: u8 = 1;
    pub const EDIT: u8 = 2;
    pub const DELETE: u8 = 3;
    pub const KEEP: u8 = 4;
}

/// `history` value: `u8 1 ‖ u8 action ‖ u64 change ‖ u8 state present (‖
/// FileRecord body without its version byte) ‖ u8 move present (‖ str16
/// source path ‖ u64 source change)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryRecord {
    pub action: u8,
    pub change: u64,
    pub state: Option<FileRecord>,
    pub moved_from: Option<(String, u64)>,
}

impl HistoryRecord {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(96);
        out.put_u8(1);
        out.put_u8(self.action);
        out.put_u64(self.change);
        match &self.state {
            None => out.put_u8(0),
            Some(s) => {
                out.put_u8(1);
                s.write_body_to(&mut out);
            }
        }
        put_move(&mut out, &self.moved_from);
        out
    }

    pub fn decode(b: &[u8]) -> Result<Self, FormatError> {
        let mut r = Reader::new(b);
        version(&mut r, "history record", 1)?;
        let action = r.u8("history record.action")?;
        if !(1..=3).contains(&action) {
            return Err(FormatError::InvalidValue {
                what: "history record.action",
                value: action.into(),
                reason: "history holds adds, edits and deletes",
            });
        }
        let change = r.u64("history record.change")?;
        let state = if r.flag("history record.state present")? {
            Some(FileRecord::read_body(&mut r)?)
        } else {
            None
        };
        let moved_from = read_move(&mut r, "history record")?;
        r.finish("history record")?;
        Ok(HistoryRecord {
            action,
            change,
            state,
            moved_from,
        })
    }
}

fn put_move(out: &mut Vec<u8>, m: &Option<(String, u64)>) {
    match m {
        None => out.put_u8(0),
        Some((p, c)) => {
            out.put_u8(1);
            out.put_bytes16(p.as_bytes());
            out.put_u64(*c);
        }
    }
}

fn read_move(r: &mut Reader<'_>, what: &'static str) -> Result<Option<(String, u64)>, FormatError> {
    if r.flag(what)? {
        let p = r.str16(what, MAX_PATH_BYTES)?.to_owned();
        Ok(Some((p, r.u64(what)?)))
    } else {
        Ok(None)
    }
}

/// `moves` value: `u8 1 ‖ str16 source path ‖ u64 source change`.
pub fn encode_move(source: &str, change: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(11 + source.len());
    out.put_u8(1);
    out.put_bytes16(source.as_bytes());
    out.put_u64(change);
    out
}

/// Decode a `moves` value.
pub fn decode_move(b: &[u8]) -> Result<(String, u64), FormatError> {
    let mut r = Reader::new(b);
    version(&mut r, "move record", 1)?;
    let p = r.str16("move record.source", MAX_PATH_BYTES)?.to_owned();
    let c = r.u64("move record.source change")?;
    r.finish("move record")?;
    Ok((p, c))
}

/// `locks` value: `u8 1 ‖ u64 generation ‖ [16] workspace ‖ [16] branch ‖
/// str16 author ‖ u64 acquired ms`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockRecord {
    pub generation: u64,
    pub workspace: WorkspaceId,
    pub branch: BranchId,
    pub author: String,
    pub acquired_ms: u64,
}

impl LockRecord {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(51 + self.author.len());
        out.put_u8(1);
        out.put_u64(self.generation);
        out.put_bytes(&self.workspace.0);
        out.put_bytes(&self.branch.0);
        out.put_bytes16(self.author.as_bytes());
        out.put_u64(self.acquired_ms);
        out
    }

    pub fn decode(b: &[u8]) -> Result<Self, FormatError> {
        let mut r = Reader::new(b);
        version(&mut r, "lock record", 1)?;
        let generation = r.u64("lock record.generation")?;
        let workspace = WorkspaceId(id16(&mut r, "lock record.workspace")?);
        let branch = BranchId(id16(&mut r, "lock record.branch")?);
        let author = r.str16("lock record.author", MAX_AUTHOR_BYTES)?.to_owned();
        let acquired_ms = r.u64("lock record.acquired ms")?;
        r.finish("lock record")?;
        Ok(LockRecord {
            generation,
            workspace,
            branch,
            author,
            acquired_ms,
        })
    }
}

/// `operations` value: `u8 1 ‖ [32] fingerprint ‖ u64 accepted change (0 =
/// rejected) ‖ u16 error code ‖ str16 detail ‖ u64 recorded ms`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperationRecord {
    pub fingerprint: [u8; 32],
    pub accepted_change: u64,
    pub error_code: u16,
    pub detail: String,
    pub recorded_ms: u64,
}

/// Longest rejection detail we record.
pub const MAX_DETAIL_BYTES: usize = 4096;

impl OperationRecord {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(53 + self.detail.len());
        out.put_u8(1);
        out.put_bytes(&self.fingerprint);
        out.put_u64(self.accepted_change);
        out.put_u16(self.error_code);
        out.put_bytes16(self.detail.as_bytes());
        out.put_u64(self.recorded_ms);
        out
    }

    pub fn decode(b: &[u8]) -> Result<Self, FormatError> {
        let mut r = Reader::new(b);
        version(&mut r, "operation record", 1)?;
        let fingerprint = id32(&mut r, "operation record.fingerprint")?;
        let accepted_change = r.u64("operation record.accepted change")?;
        let error_code = r.u16("operation record.error code")?;
        let detail = r
            .str16("operation record.detail", usize::from(u16::MAX))?
            .to_owned();
        let recorded_ms = r.u64("operation record.recorded ms")?;
        r.finish("operation record")?;
        Ok(OperationRecord {
            fingerprint,
            accepted_change,
            error_code,
            detail,
            recorded_ms,
        })
    }
}

/// `workspaces` value, version 2: `u8 2 ‖ u8 owner-present ‖ [16] owner? ‖
/// [16] branch ‖ u16 view count ‖ (str16 prefix)* ‖ u64 created ms ‖ str16
/// label ‖ u8 tag count (≤ 16) ‖ (str16 tag ≤ 64 bytes)*`. Version 1 ends
/// at the label and decodes with no tags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkspaceRecord {
    pub owner: Option<[u8; 16]>,
    pub branch: BranchId,
    pub view: Vec<String>,
    pub created_ms: u64,
    pub label: String,
    pub tags: Vec<String>,
}

/// Most tags of one workspace.
pub const MAX_TAGS: usize = 16;
/// Longest tag in bytes.
pub const MAX_TAG_BYTES: usize = 64;
/// Longest workspace label in bytes.
pub const MAX_LABEL_BYTES: usize = 256;

impl WorkspaceRecord {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.put_u8(2);
        match &self.owner {
            None => out.put_u8(0),
            Some(o) => {
                out.put_u8(1);
                out.put_bytes(o);
            }
        }
        out.put_bytes(&self.branch.0);
        out.put_u16(self.view.len() as u16);
        for p in &self.view {
            out.put_bytes16(p.as_bytes());
        }
        out.put_u64(self.created_ms);
        out.put_bytes16(self.label.as_bytes());
        out.put_u8(self.tags.len() as u8);
        for t in &self.tags {
            out.put_bytes16(t.as_bytes());
        }
        out
    }

    pub fn decode(b: &[u8]) -> Result<Self, FormatError> {
        let mut r = Reader::new(b);
        let v = r.u8("workspace record version")?;
        if v != 1 && v != 2 {
            return Err(FormatError::UnsupportedVersion {
                what: "workspace record",
                version: v.into(),
            });
        }
        let owner = if r.flag("workspace record.owner present")? {
            Some(id16(&mut r, "workspace record.owner")?)
        } else {
            None
        };
        let branch = BranchId(id16(&mut r, "workspace record.branch")?);
        let n = usize::from(r.u16("workspace record.view count")?);
        if n > scribe_format::limits::MAX_VIEW_PREFIXES {
            return Err(FormatError::LimitExceeded {
                what: "workspace record.view count",
                limit: scribe_format::limits::MAX_VIEW_PREFIXES as u64,
                actual: n as u64,
            });
        }
        let mut view = Vec::with_capacity(n);
        for _ in 0..n {
            view.push(
                r.str16("workspace record.view prefix", MAX_PATH_BYTES)?
                    .to_owned(),
            );
        }
        let created_ms = r.u64("workspace record.created ms")?;
        let label = r
            .str16("workspace record.label", MAX_LABEL_BYTES)?
            .to_owned();
        let mut tags = Vec::new();
        if v == 2 {
            let n = usize::from(r.u8("workspace record.tag count")?);
            if n > MAX_TAGS {
                return Err(FormatError::LimitExceeded {
                    what: "workspace record.tag count",
                    limit: MAX_TAGS as u64,
                    actual: n as u64,
                });
            }
            for _ in 0..n {
                tags.push(r.str16("workspace record.tag", MAX_TAG_BYTES)?.to_owned());
            }
        }
        r.finish("workspace record")?;
        Ok(WorkspaceRecord {
            owner,
            branch,
            view,
            created_ms,
            label,
            tags,
        })
    }
}

/// `accepted_manifests` value: `u8 1 ‖ [16] branch ‖ u64 change` (nonzero).
pub fn encode_accepted_manifest(branch: &BranchId, change: u64) -> [u8; 25] {
    let mut out = [0u8; 25];
    out[0] = 1;
    out[1..17].copy_from_slice(&branch.0);
    out[17..25].copy_from_slice(&change.to_le_bytes());
    out
}

/// Decode an `accepted_manifests` value.
pub fn decode_accepted_manifest(b: &[u8]) -> Result<(BranchId, u64), FormatError> {
    let mut r = Reader::new(b);
    version(&mut r, "accepted manifest record", 1)?;
    let br = BranchId(id16(&mut r, "accepted manifest record.branch")?);
    let c = r.u64("accepted manifest record.change")?;
    r.finish("accepted manifest record")?;
    if c == 0 {
        return Err(FormatError::InvalidValue {
            what: "accepted manifest record.change",
            value: 0,
            reason: "the accepting change is nonzero",
        });
    }
    Ok((br, c))
}

/// `meta["pending-submit"]`: `u64 change ‖ [16] operation`.
pub fn encode_pending(change: u64, op: &OperationId) -> [u8; 24] {
    let mut out = [0u8; 24];
    out[..8].copy_from_slice(&change.to_le_bytes());
    out[8..].copy_from_slice(&op.0);
    out
}

/// Decode `meta["pending-submit"]`.
pub fn decode_pending(b: &[u8]) -> Result<(u64, OperationId), FormatError> {
    let mut r = Reader::new(b);
    let c = r.u64("pending-submit.change")?;
    let op = OperationId(id16(&mut r, "pending-submit.operation")?);
    r.finish("pending-submit")?;
    Ok((c, op))
}

// -------------------------------------------------------------------- keys

/// Index key constructors.
pub mod keys {
    use scribe_format::bytes::Put;
    use scribe_format::BranchId;

    /// `branch[16] ‖ ordered u64 change`.
    pub fn root(branch: &BranchId, change: u64) -> [u8; 24] {
        let mut k = [0u8; 24];
        k[..16].copy_from_slice(&branch.0);
        k[16..].copy_from_slice(&change.to_be_bytes());
        k
    }

    /// `branch[16] ‖ path ‖ 0x00 ‖ ordered u64 change` (`history`, `moves`).
    pub fn history(branch: &BranchId, path: &str, change: u64) -> Vec<u8> {
        let mut k = Vec::with_capacity(25 + path.len());
        k.put_bytes(&branch.0);
        k.put_bytes(path.as_bytes());
        k.put_u8(0);
        k.put_ordered_u64(change);
        k
    }

    /// `branch[16] ‖ path ‖ 0x00`, the prefix of one path's revisions.
    pub fn history_prefix(branch: &BranchId, path: &str) -> Vec<u8> {
        let mut k = Vec::with_capacity(17 + path.len());
        k.put_bytes(&branch.0);
        k.put_bytes(path.as_bytes());
        k.put_u8(0);
        k
    }

    /// Split a history key into path and change.
    pub fn split_history(k: &[u8]) -> Option<(BranchId, &str, u64)> {
        if k.len() < 25 || k[k.len() - 9] != 0 {
            return None;
        }
        let mut b = [0u8; 16];
        b.copy_from_slice(&k[..16]);
        let path = std::str::from_utf8(&k[16..k.len() - 9]).ok()?;
        let mut c = [0u8; 8];
        c.copy_from_slice(&k[k.len() - 8..]);
        Some((BranchId(b), path, u64::from_be_bytes(c)))
    }

    /// `branch[16] ‖ ordered u64 change ‖ path`.
    pub fn change_path(branch: &BranchId, change: u64, path: &str) -> Vec<u8> {
        let mut k = Vec::with_capacity(24 + path.len());
        k.put_bytes(&branch.0);
        k.put_ordered_u64(change);
        k.put_bytes(path.as_bytes());
        k
    }

    /// `ordered u64 change ‖ path ‖ 0x00 ‖ ordered u64 neighbor ‖ neighbor path`.
    pub fn lineage(change: u64, path: &str, neighbor: u64, neighbor_path: &str) -> Vec<u8> {
        let mut k = Vec::with_capacity(17 + path.len() + neighbor_path.len());
        k.put_ordered_u64(change);
        k.put_bytes(path.as_bytes());
        k.put_u8(0);
        k.put_ordered_u64(neighbor);
        k.put_bytes(neighbor_path.as_bytes());
        k
    }

    /// Split a lineage key.
    pub fn split_lineage(k: &[u8]) -> Option<(u64, &str, u64, &str)> {
        if k.len() < 17 {
            return None;
        }
        let c = u64::from_be_bytes(k[..8].try_into().ok()?);
        let rest = &k[8..];
        let nul = rest.iter().position(|&b| b == 0)?;
        let p = std::str::from_utf8(&rest[..nul]).ok()?;
        let rest = &rest[nul + 1..];
        if rest.len() < 8 {
            return None;
        }
        let n = u64::from_be_bytes(rest[..8].try_into().ok()?);
        let np = std::str::from_utf8(&rest[8..]).ok()?;
        Some((c, p, n, np))
    }

    /// `workspace_state` kind 1: `u8 1 ‖ [16] owner ‖ [16] workspace`.
    pub fn ws_owner_index(owner: &[u8; 16], ws: &[u8; 16]) -> Vec<u8> {
        let mut k = vec![super::super::tables::ws_kind::OWNER_INDEX];
        k.extend_from_slice(owner);
        k.extend_from_slice(ws);
        k
    }

    /// `workspace_state` kind 2: `u8 2 ‖ [16] owner`.
    pub fn ws_owner_count(owner: &[u8; 16]) -> Vec<u8> {
        let mut k = vec![super::super::tables::ws_kind::OWNER_COUNT];
        k.extend_from_slice(owner);
        k
    }

    /// `workspace_state` kind 3: `u8 3 ‖ [16] workspace`.
    pub fn ws_retired(ws: &[u8; 16]) -> Vec<u8> {
        let mut k = vec![super::super::tables::ws_kind::RETIRED];
        k.extend_from_slice(ws);
        k
    }

    /// `workspace_state` kind 4: `u8 4 ‖ [16] operation`.
    pub fn ws_retire_outcome(op: &[u8; 16]) -> Vec<u8> {
        let mut k = vec![super::super::tables::ws_kind::RETIRE_OUTCOME];
        k.extend_from_slice(op);
        k
    }

    /// `workspace_state` kind 5: `u8 5 ‖ [16] workspace ‖ path bytes`.
    pub fn ws_lock_index(ws: &[u8; 16], path: &str) -> Vec<u8> {
        let mut k = vec![super::super::tables::ws_kind::LOCK_INDEX];
        k.extend_from_slice(ws);
        k.extend_from_slice(path.as_bytes());
        k
    }

    /// `submit_stage` key: `u8 tag ‖ destination key`.
    pub fn stage(tag: u8, dest: &[u8]) -> Vec<u8> {
        let mut k = Vec::with_capacity(1 + dest.len());
        k.push(tag);
        k.extend_from_slice(dest);
        k
    }

    /// The smallest key greater than every key starting with `prefix`, or
    /// `None` when no such key exists (all 0xff).
    pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
        let mut end = prefix.to_vec();
        while let Some(last) = end.pop() {
            if last != 0xff {
                end.push(last + 1);
                return Some(end);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scribe_format::{FileContentId, ManifestId};

    #[test]
    fn records_round_trip_and_refuse_trailing() {
        let c = CatalogRecord {
            name: "game".into(),
            state: RepoState::Ready,
            created_ms: 7,
            main_branch: BranchId([3; 16]),
        };
        let b = c.encode();
        assert_eq!(b.len(), 1 + 2 + 4 + 1 + 8 + 16);
        assert_eq!(CatalogRecord::decode(&b).unwrap(), c);
        let mut t = b.clone();
        t.push(0);
        assert!(CatalogRecord::decode(&t).is_err());

        let h = HistoryRecord {
            action: action::ADD,
            change: 5,
            state: Some(FileRecord {
                manifest: ManifestId([1; 32]),
                content: FileContentId([2; 32]),
                size: 9,
                mode: 0,
                change: 5,
            }),
            moved_from: Some(("a/b".into(), 3)),
        };
        let b = h.encode();
        assert_eq!(b.len(), 1 + 1 + 8 + 1 + 81 + 1 + 2 + 3 + 8);
        assert_eq!(HistoryRecord::decode(&b).unwrap(), h);

        let o = OperationRecord {
            fingerprint: [9; 32],
            accepted_change: 0,
            error_code: 200,
            detail: "x".into(),
            recorded_ms: 1,
        };
        assert_eq!(o.encode().len(), 53 + 1);
        assert_eq!(OperationRecord::decode(&o.encode()).unwrap(), o);

        let w = WorkspaceRecord {
            owner: Some([1; 16]),
            branch: BranchId([2; 16]),
            view: vec!["art".into()],
            created_ms: 4,
            label: "desk".into(),
            tags: vec!["ci".into()],
        };
        assert_eq!(WorkspaceRecord::decode(&w.encode()).unwrap(), w);
        // Version 1 ends at the label and has no tags.
        let mut v1 = w.encode();
        v1[0] = 1;
        v1.truncate(v1.len() - 5);
        let d = WorkspaceRecord::decode(&v1).unwrap();
        assert!(d.tags.is_empty());
    }

    #[test]
    fn keys_order_one_paths_revisions_before_children() {
        let b = BranchId([0; 16]);
        let a1 = keys::history(&b, "a", 1);
        let a9 = keys::history(&b, "a", 9);
        let child = keys::history(&b, "a/b", 1);
        assert!(a1 < a9 && a9 < child);
        assert_eq!(keys::split_history(&a9), Some((b, "a", 9)));
        let l = keys::lineage(5, "x/y", 3, "z");
        assert_eq!(keys::split_lineage(&l), Some((5, "x/y", 3, "z")));
    }

    proptest::proptest! {
        /// Hostile bytes never panic a decoder, and whatever decodes
        /// re-encodes to the same bytes.
        #[test]
        fn decoders_refuse_or_round_trip(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            if let Ok(r) = CatalogRecord::decode(&bytes) { proptest::prop_assert_eq!(r.encode(), bytes.clone()); }
            if let Ok(r) = HistoryRecord::decode(&bytes) { proptest::prop_assert_eq!(r.encode(), bytes.clone()); }
            if let Ok(r) = CommitRecord::decode(&bytes) { proptest::prop_assert_eq!(r.encode(), bytes.clone()); }
            if let Ok(r) = LockRecord::decode(&bytes) { proptest::prop_assert_eq!(r.encode(), bytes.clone()); }
            if let Ok(r) = OperationRecord::decode(&bytes) { proptest::prop_assert_eq!(r.encode(), bytes.clone()); }
            if let Ok(r) = BranchRecord::decode(&bytes) { proptest::prop_assert_eq!(r.encode(), bytes.clone()); }
            if let Ok(r) = RepoMeta::decode(&bytes) { proptest::prop_assert_eq!(r.encode().to_vec(), bytes.clone()); }
            if let Ok(r) = WorkspaceRecord::decode(&bytes) {
                if bytes.first() == Some(&2) { proptest::prop_assert_eq!(r.encode(), bytes.clone()); }
            }
            let _ = decode_move(&bytes);
            let _ = decode_accepted_manifest(&bytes);
            let _ = decode_pending(&bytes);
            let _ = keys::split_history(&bytes);
            let _ = keys::split_lineage(&bytes);
        }

        /// Every metadata row decoder (records, counters, moves, witnesses,
        /// pending rows, change notes, key splitters) over arbitrary bytes,
        /// longer ones and ones that start like a real row (a version byte
        /// of 1 or 2 and then anything): never a panic, and what decodes
        /// re-encodes to itself where the encoding is canonical (issue #14;
        /// `scribe-metadata/fuzz` runs the same under cargo-fuzz).
        #[test]
        fn every_row_decoder_takes_arbitrary_bytes(
            version in 0u8..4,
            rest in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..1200),
            key in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
        ) {
            let mut bytes = vec![version];
            bytes.extend_from_slice(&rest);
            for b in [&bytes[..], &rest[..]] {
                crate::fuzz_row_decoders(&key, b);
            }
        }
    }
}

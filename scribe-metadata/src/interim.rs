//! INTERIM stand-ins for `scribe_format::changeset`, `scribe_format::commit`
//! and `scribe_format::operation`, which had not landed on `main` when
//! acceptance needed them. The types mirror the format crate's public shapes
//! (field for field) so that switching is a change of `use` lines; the
//! envelope and fingerprint follow sections 4.3 and 8 to the byte.

use scribe_format::bytes::Put;
use scribe_format::id::{commit_domain, hash_with_domain, OPERATION_FINGERPRINT_DOMAIN};
use scribe_format::{
    BranchId, ChangeSetId, CommitId, FileContentId, ManifestId, OperationId, RepositoryId,
    WorkspaceId,
};

/// Change-set action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Action {
    Add = 1,
    Edit = 2,
    Delete = 3,
    Keep = 4,
}

/// File mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Mode {
    Regular = 0,
    Executable = 1,
}

/// File state of an add or edit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileState {
    pub manifest: ManifestId,
    pub content: FileContentId,
    pub size: u64,
    pub mode: Mode,
}

/// Source of an explicit move.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MoveSource {
    pub path: String,
    pub change: u64,
}

/// One change-set entry.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
    pub path: String,
    pub action: Action,
    pub expected_base: u64,
    pub state: Option<FileState>,
    pub moved_from: Option<MoveSource>,
}

impl Entry {
    pub fn add(path: impl Into<String>, state: FileState) -> Entry {
        Entry {
            path: path.into(),
            action: Action::Add,
            expected_base: 0,
            state: Some(state),
            moved_from: None,
        }
    }

    pub fn edit(path: impl Into<String>, base: u64, state: FileState) -> Entry {
        Entry {
            path: path.into(),
            action: Action::Edit,
            expected_base: base,
            state: Some(state),
            moved_from: None,
        }
    }

    pub fn delete(path: impl Into<String>, base: u64) -> Entry {
        Entry {
            path: path.into(),
            action: Action::Delete,
            expected_base: base,
            state: None,
            moved_from: None,
        }
    }

    pub fn keep(path: impl Into<String>, base: u64) -> Entry {
        Entry {
            path: path.into(),
            action: Action::Keep,
            expected_base: base,
            state: None,
            moved_from: None,
        }
    }

    pub fn moved_from(mut self, source: impl Into<String>, change: u64) -> Entry {
        self.moved_from = Some(MoveSource {
            path: source.into(),
            change,
        });
        self
    }
}

/// A change set: entries strictly ascending by path bytes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct ChangeSet {
    pub entries: Vec<Entry>,
}

impl ChangeSet {
    pub fn new(entries: Vec<Entry>) -> ChangeSet {
        ChangeSet { entries }
    }

    /// Section 4.2 payload bytes (used only to derive test identities).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.put_u16(1);
        out.put_u32(self.entries.len() as u32);
        for e in &self.entries {
            out.put_bytes16(e.path.as_bytes());
            out.put_u8(e.action as u8);
            out.put_u64(e.expected_base);
            if let Some(s) = &e.state {
                out.put_bytes(&s.manifest.0);
                out.put_bytes(&s.content.0);
                out.put_u64(s.size);
                out.put_u8(s.mode as u8);
            }
            match &e.moved_from {
                None => out.put_u8(0),
                Some(m) => {
                    out.put_u8(1);
                    out.put_bytes16(m.path.as_bytes());
                    out.put_u64(m.change);
                }
            }
        }
        out
    }

    /// The change set identity.
    pub fn id(&self) -> ChangeSetId {
        ChangeSetId::of_payload(&self.encode())
    }
}

/// The v1 commit payload fields (section 4.3.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitPayload {
    pub repository: RepositoryId,
    pub branch: BranchId,
    pub change: u64,
    pub parent_change: u64,
    pub change_set: ChangeSetId,
    pub operation: OperationId,
    pub workspace: WorkspaceId,
    pub timestamp_ms: u64,
    pub author: String,
    pub message: String,
}

impl CommitPayload {
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(1);
        out.put_bytes(&self.repository.0);
        out.put_bytes(&self.branch.0);
        out.put_u64(self.change);
        out.put_u64(self.parent_change);
        out.put_u8(0);
        out.put_bytes(&self.change_set.0);
        out.put_bytes(&self.operation.0);
        out.put_bytes(&self.workspace.0);
        out.put_u64(self.timestamp_ms);
        out.put_bytes16(self.author.as_bytes());
        out.put_bytes32(self.message.as_bytes());
    }
}

/// A v5 envelope without origin (section 4.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitEnvelopeV5 {
    pub payload: CommitPayload,
    pub actor: Option<[u8; 16]>,
    pub parent_commit: Option<CommitId>,
    pub content_root: [u8; 32],
    pub revision_root: [u8; 32],
}

impl CommitEnvelopeV5 {
    pub fn encode(&self) -> Vec<u8> {
        let mut payload = Vec::with_capacity(200 + self.payload.message.len());
        self.payload.encode(&mut payload);
        let mut out = Vec::with_capacity(payload.len() + 128);
        out.put_u16(5);
        out.put_u32(payload.len() as u32);
        out.put_bytes(&payload);
        match &self.actor {
            None => out.put_u8(0),
            Some(a) => {
                out.put_u8(1);
                out.put_bytes(a);
            }
        }
        match &self.parent_commit {
            None => out.put_u8(0),
            Some(c) => {
                out.put_u8(1);
                out.put_bytes(&c.0);
            }
        }
        out.put_u8(0);
        out.put_bytes(&self.content_root);
        out.put_bytes(&self.revision_root);
        out
    }
}

/// `CommitId` of envelope bytes (by their leading version word).
pub fn commit_id(bytes: &[u8]) -> Option<CommitId> {
    if bytes.len() < 2 {
        return None;
    }
    let v = u16::from_le_bytes([bytes[0], bytes[1]]);
    commit_domain(v).map(|d| CommitId(hash_with_domain(d, bytes)))
}

/// The parts of a stored v5 envelope `doctor` compares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvelopeLinks {
    pub change: u64,
    pub parent_change: u64,
    pub branch: BranchId,
    pub change_set: ChangeSetId,
    pub parent_commit: Option<CommitId>,
    pub content_root: [u8; 32],
    pub revision_root: [u8; 32],
}

/// Decode the fields `doctor` needs from v5 envelope bytes.
pub fn envelope_links(bytes: &[u8]) -> Option<EnvelopeLinks> {
    use scribe_format::bytes::Reader;
    let mut r = Reader::new(bytes);
    if r.u16("v").ok()? != 5 {
        return None;
    }
    let len = r.u32("len").ok()? as usize;
    let payload = r.take(len, "payload").ok()?;
    let mut p = Reader::new(payload);
    if p.u16("pv").ok()? != 1 {
        return None;
    }
    let _repo: [u8; 16] = p.array("repo").ok()?;
    let branch = BranchId(p.array("branch").ok()?);
    let change = p.u64("change").ok()?;
    let parent_change = p.u64("parent").ok()?;
    if p.flag("bf").ok()? {
        let _: [u8; 16] = p.array("bfb").ok()?;
        p.u64("bfc").ok()?;
    }
    let change_set = ChangeSetId(p.array("cs").ok()?);
    if r.flag("actor").ok()? {
        let _: [u8; 16] = r.array("actor").ok()?;
    }
    let parent_commit = if r.flag("parent").ok()? {
        Some(CommitId(r.array("pc").ok()?))
    } else {
        None
    };
    match r.u8("origin").ok()? {
        0 => {}
        1 => {
            let _: [u8; 16] = r.array("ob").ok()?;
            r.u64("oc").ok()?;
            let _: [u8; 32] = r.array("oi").ok()?;
        }
        2 => {
            let _: [u8; 16] = r.array("ob").ok()?;
            r.u64("oc").ok()?;
        }
        _ => return None,
    }
    let content_root = r.array("content").ok()?;
    let revision_root = r.array("revision").ok()?;
    r.finish("envelope").ok()?;
    Some(EnvelopeLinks {
        change,
        parent_change,
        branch,
        change_set,
        parent_commit,
        content_root,
        revision_root,
    })
}

/// Operation fingerprint v3 (section 8).
pub fn operation_fingerprint(
    repository: RepositoryId,
    incarnation: [u8; 16],
    branch: BranchId,
    workspace: WorkspaceId,
    change_set: ChangeSetId,
    message: &str,
    keep_locks: bool,
) -> [u8; 32] {
    let mut bytes = Vec::with_capacity(16 * 4 + 32 + 8 + message.len() + 1);
    bytes.put_bytes(&repository.0);
    bytes.put_bytes(&incarnation);
    bytes.put_bytes(&branch.0);
    bytes.put_bytes(&workspace.0);
    bytes.put_bytes(&change_set.0);
    bytes.put_u64(message.len() as u64);
    bytes.put_bytes(message.as_bytes());
    bytes.put_u8(u8::from(keep_locks));
    hash_with_domain(OPERATION_FINGERPRINT_DOMAIN, &bytes)
}

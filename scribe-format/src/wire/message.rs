//! Requests and replies of operation schema `scribe.rpc.v1`.
//!
//! Every message is a struct whose encoding is its fields in order (see
//! [`super::codec`]). A request travels under its opcode; its reply under
//! `opcode | 0x8000`; a refusal or failure under `0xffff` as
//! [`ErrorReply`]. Branch arguments of `BranchId` all-zero mean the
//! repository's main branch; change arguments of 0 mean the branch head.

use super::codec::{wire_struct, Bytes, Text, Wire};
use crate::bytes::Reader;
use crate::error::{ErrorCode, FormatError};
use crate::id::{
    BranchId, ChangeSetId, CommitId, FileContentId, ManifestId, ObjectId, OperationId,
    RepositoryId, WorkspaceId,
};

/// Largest number of ids in one [`ObjectsMissing`] request.
pub const MAX_IDS_PER_REQUEST: usize = 65_536;
/// Largest object data carried by one [`ObjectPut`] or [`ObjectData`].
pub const MAX_OBJECT_DATA_PER_FRAME: u32 = 4 << 20;

/// Largest payload of an object other than a chunk (manifests, change sets)
/// that an upload may declare.
pub const MAX_STRUCTURED_OBJECT_BYTES: u64 = 64 << 20;

/// The largest payload an upload of `kind` may declare (a chunk: the
/// format's largest chunk).
pub fn max_object_bytes(kind: crate::id::ObjectKind) -> u64 {
    match kind {
        crate::id::ObjectKind::Chunk => u64::from(crate::limits::MAX_CHUNK_BYTES),
        _ => MAX_STRUCTURED_OBJECT_BYTES,
    }
}
/// Largest number of ids in one [`ObjectGetMany`] request.
pub const MAX_IDS_PER_GET_MANY: usize = 4_096;
/// Largest page of any paged listing.
pub const MAX_PAGE_ITEMS: u32 = 4_096;

wire_struct! {
    /// The state of a file at a change (a tombstone has none).
    pub struct FileState {
        pub manifest: ManifestId,
        pub content: FileContentId,
        pub size: u64,
        /// 0 regular, 1 executable.
        pub mode: u8,
    }
}

wire_struct! {
    /// One path of a tree or delta: the change that last touched it and
    /// its state there (`None` = deleted at that change).
    pub struct TreeEntry {
        pub path: String,
        pub change: u64,
        pub state: Option<FileState>,
    }
}

wire_struct! {
    /// Where an explicitly moved add came from.
    pub struct MoveFrom {
        pub path: String,
        pub change: u64,
    }
}

wire_struct! { pub struct StatusRequest {} }
wire_struct! {
    pub struct StatusReply {
        pub server_version: String,
        pub schema: String,
        pub uptime_ms: u64,
        pub repositories: u32,
        pub connections: u32,
    }
}

wire_struct! { pub struct RepoCreate { pub name: String } }
wire_struct! { pub struct RepoListRequest {} }
wire_struct! {
    pub struct RepoInfo {
        pub id: RepositoryId,
        pub name: String,
        pub main_branch: BranchId,
        pub incarnation: [u8; 16],
        pub head: u64,
        pub created_ms: u64,
    }
}
wire_struct! { pub struct RepoList { pub repositories: Vec<RepoInfo> } }

wire_struct! {
    /// Register a workspace; the client chooses the id, so a retry after a
    /// lost reply registers nothing twice.
    pub struct WorkspaceRegister {
        pub repo: String,
        pub workspace: WorkspaceId,
        /// Empty for the main branch.
        pub branch: String,
        pub view: Vec<String>,
        pub label: String,
        pub tags: Vec<String>,
    }
}
wire_struct! {
    pub struct WorkspaceInfo {
        pub workspace: WorkspaceId,
        pub branch: BranchId,
        pub branch_name: String,
        pub view: Vec<String>,
        pub label: String,
        pub tags: Vec<String>,
        pub created_ms: u64,
        pub retired: bool,
        pub repository: RepositoryId,
        pub incarnation: [u8; 16],
        pub head: u64,
    }
}
wire_struct! { pub struct WorkspaceRetire { pub repo: String, pub workspace: WorkspaceId } }
wire_struct! { pub struct WorkspaceListRequest { pub repo: String } }
wire_struct! { pub struct WorkspaceList { pub workspaces: Vec<WorkspaceInfo> } }
wire_struct! { pub struct Ack {} }

wire_struct! {
    /// "Which of these do you lack?"
    pub struct ObjectsMissing { pub repo: String, pub ids: Vec<ObjectId> }
}
wire_struct! { pub struct ObjectsMissingReply { pub missing: Vec<ObjectId> } }
wire_struct! {
    /// One piece of an object's original payload. Pieces arrive in order;
    /// the server verifies the identity when `offset + data == total_len`
    /// and publishes it under the upload pin of `operation`, owned by
    /// `workspace`.
    pub struct ObjectPut {
        pub repo: String,
        pub operation: OperationId,
        pub workspace: WorkspaceId,
        pub id: ObjectId,
        pub total_len: u64,
        pub offset: u64,
        pub data: Bytes,
    }
}
wire_struct! { pub struct ObjectPutReply { pub received: u64, pub complete: bool } }
wire_struct! {
    /// One whole small object of an [`ObjectPutMany`].
    pub struct ObjectPiece { pub id: ObjectId, pub data: Bytes }
}
wire_struct! {
    /// Many whole small objects in one frame (their data at most 4 MiB in
    /// all): one upload pin transaction and one durable publication for
    /// the lot, so thousands of small files do not cost a flush each.
    pub struct ObjectPutMany {
        pub repo: String,
        pub operation: OperationId,
        pub workspace: WorkspaceId,
        pub objects: Vec<ObjectPiece>,
    }
}
wire_struct! { pub struct ObjectPutManyReply { pub stored: u32 } }
wire_struct! {
    /// "Pin these for my upload intent, then tell me which you lack": one
    /// Immediate pin transaction for the lot (upload pins are persisted
    /// before the client transmits or reuses an identity). Objects staged
    /// by this connection and not yet published count as held.
    pub struct ObjectsPinMissing {
        pub repo: String,
        pub operation: OperationId,
        pub workspace: WorkspaceId,
        pub ids: Vec<ObjectId>,
    }
}
wire_struct! {
    /// Publish every object this connection staged ([`ObjectPut`] pieces
    /// sent as `ObjectPutStaged`) in one durable batch.
    pub struct ObjectsPublish { pub repo: String }
}
wire_struct! { pub struct ObjectsPublishReply { pub published: u32 } }
wire_struct! {
    pub struct ObjectGet { pub repo: String, pub id: ObjectId, pub offset: u64, pub max_len: u32 }
}
wire_struct! { pub struct ObjectData { pub total_len: u64, pub offset: u64, pub data: Bytes } }
wire_struct! {
    /// Many whole objects in one round trip (sync of many small files).
    /// At most [`MAX_IDS_PER_GET_MANY`] ids; the reply holds the first
    /// objects of `ids`, in order, whole, as many as fit in
    /// [`MAX_OBJECT_DATA_PER_FRAME`] bytes of data in all (at least none:
    /// an object larger than that is fetched with [`ObjectGet`] ranges).
    pub struct ObjectGetMany { pub repo: String, pub ids: Vec<ObjectId> }
}
wire_struct! {
    /// The leading objects of an [`ObjectGetMany`], whole and in request order.
    pub struct ObjectGetManyReply { pub objects: Vec<ObjectPiece> }
}

wire_struct! {
    /// Submit an uploaded change set. A retry with the same operation id
    /// returns the recorded outcome.
    pub struct Submit {
        pub repo: String,
        pub operation: OperationId,
        pub workspace: WorkspaceId,
        pub branch: BranchId,
        pub change_set: ChangeSetId,
        pub author: String,
        pub message: Text,
        pub keep_locks: bool,
        pub timestamp_ms: u64,
    }
}
wire_struct! {
    /// The outcome of a submission: accepted at `change` (nonzero) with
    /// `commit`, or refused with `code` (0 when accepted), a detail and the
    /// paths concerned.
    pub struct Outcome {
        pub change: u64,
        pub commit: Option<CommitId>,
        pub code: u16,
        pub detail: String,
        pub paths: Vec<String>,
    }
}
wire_struct! {
    /// A [`Submit`] that carries the objects the server lacks with it
    /// (whole, their data at most [`MAX_OBJECT_DATA_PER_FRAME`] bytes in
    /// all; the change set object among them unless the server holds it).
    /// No upload pin: the objects and the submission are one request. The
    /// server verifies every identity, and only an accepted change
    /// publishes them, in the store batch that makes its commit envelope
    /// durable. Retries and outcomes are exactly those of [`Submit`].
    pub struct SubmitInline {
        pub repo: String,
        pub operation: OperationId,
        pub workspace: WorkspaceId,
        pub branch: BranchId,
        pub change_set: ChangeSetId,
        pub author: String,
        pub message: Text,
        pub keep_locks: bool,
        pub timestamp_ms: u64,
        pub objects: Vec<ObjectPiece>,
    }
}
wire_struct! { pub struct OperationOutcome { pub repo: String, pub operation: OperationId } }
wire_struct! { pub struct OperationOutcomeReply { pub outcome: Option<Outcome> } }

wire_struct! {
    /// Paths changed between two changes of a branch, each once with its
    /// final state. `after` is the cursor (the last path of the previous
    /// page; empty to start).
    pub struct Delta {
        pub repo: String,
        pub branch: BranchId,
        pub from: u64,
        pub to: u64,
        pub after: String,
        pub limit: u32,
    }
}
wire_struct! {
    pub struct DeltaPage {
        /// The resolved target change.
        pub to: u64,
        pub entries: Vec<TreeEntry>,
        pub next: Option<String>,
    }
}
wire_struct! {
    pub struct List {
        pub repo: String,
        pub branch: BranchId,
        pub change: u64,
        pub prefix: String,
        pub recursive: bool,
        pub after: String,
        pub limit: u32,
    }
}
wire_struct! {
    pub struct ListPage {
        pub change: u64,
        /// Live files.
        pub entries: Vec<TreeEntry>,
        /// Direct child directories (non-recursive listings).
        pub directories: Vec<String>,
        pub next: Option<String>,
    }
}
wire_struct! {
    pub struct Stat { pub repo: String, pub branch: BranchId, pub change: u64, pub path: String }
}
wire_struct! { pub struct StatReply { pub change: u64, pub entry: Option<TreeEntry> } }
wire_struct! {
    pub struct History {
        pub repo: String,
        pub branch: BranchId,
        pub path: String,
        /// Only changes below this one (0 = from the newest).
        pub before: u64,
        pub limit: u32,
    }
}
wire_struct! {
    pub struct HistoryEntry {
        pub change: u64,
        /// Change-set action: 1 add, 2 edit, 3 delete.
        pub action: u8,
        pub state: Option<FileState>,
        pub moved_from: Option<MoveFrom>,
    }
}
wire_struct! { pub struct HistoryPage { pub entries: Vec<HistoryEntry>, pub next: u64 } }
wire_struct! {
    pub struct Log { pub repo: String, pub branch: BranchId, pub before: u64, pub limit: u32 }
}
wire_struct! {
    pub struct CommitSummary {
        pub change: u64,
        pub commit: CommitId,
        pub branch: BranchId,
        pub parent: u64,
        pub workspace: WorkspaceId,
        pub operation: OperationId,
        pub author: String,
        pub message: Text,
        pub timestamp_ms: u64,
        pub entry_count: u32,
    }
}
wire_struct! { pub struct LogPage { pub commits: Vec<CommitSummary>, pub next: u64 } }
wire_struct! {
    pub struct Describe { pub repo: String, pub change: u64, pub after: String, pub limit: u32 }
}
wire_struct! {
    pub struct DescribedEntry {
        pub path: String,
        pub action: u8,
        pub state: Option<FileState>,
        pub moved_from: Option<MoveFrom>,
    }
}
wire_struct! {
    pub struct DescribeReply {
        pub commit: CommitSummary,
        pub entries: Vec<DescribedEntry>,
        pub next: Option<String>,
    }
}

wire_struct! {
    pub struct LockInfo {
        pub path: String,
        pub generation: u64,
        pub workspace: WorkspaceId,
        pub branch: BranchId,
        pub author: String,
        pub acquired_ms: u64,
    }
}
wire_struct! {
    pub struct LockAcquire {
        pub repo: String,
        pub workspace: WorkspaceId,
        pub branch: BranchId,
        pub author: String,
        pub paths: Vec<String>,
    }
}
wire_struct! {
    pub struct LockRelease { pub repo: String, pub workspace: WorkspaceId, pub paths: Vec<String> }
}
wire_struct! { pub struct LocksReply { pub locks: Vec<LockInfo> } }
wire_struct! {
    pub struct LockList { pub repo: String, pub prefix: String, pub after: String, pub limit: u32 }
}
wire_struct! { pub struct LockListPage { pub locks: Vec<LockInfo>, pub next: Option<String> } }

wire_struct! {
    /// A refusal or failure: a registry code, a readable message, and the
    /// paths it concerns.
    pub struct ErrorReply { pub code: u16, pub message: String, pub paths: Vec<String> }
}

impl ErrorReply {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorReply {
            code: code.number(),
            message: message.into(),
            paths: Vec::new(),
        }
    }

    /// The registry code, or `internal` for a number this build does not know.
    pub fn error_code(&self) -> ErrorCode {
        ErrorCode::from_number(self.code).unwrap_or(ErrorCode::Internal)
    }

    /// The message to show people: the server's own; for a code this
    /// build does not know (a newer server's, as `repository_retired` 216
    /// was to builds before it), preceded by its number and that it is
    /// unknown here, so it never reads as this build's `internal` alone.
    pub fn shown_message(&self) -> String {
        shown_message(self.code, &self.message)
    }
}

/// The message of a server's error `code` to show people
/// ([`ErrorReply::shown_message`]; also a submission outcome's).
pub fn shown_message(code: u16, message: &str) -> String {
    if ErrorCode::from_number(code).is_some() {
        return message.to_owned();
    }
    format!(
        "the server answered error code {code}, which this scribe does not know (a newer \
         server's code: update scribe to see its name and what to do): {message}"
    )
}

macro_rules! messages {
    ($( $opcode:literal $name:ident($req:ty) -> $reply:ident($rep:ty); )*) => {
        /// A request of schema `scribe.rpc.v1`.
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub enum Request { $( $name($req), )* }

        /// A reply of schema `scribe.rpc.v1`.
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub enum Response { $( $reply($rep), )* Error(ErrorReply) }

        impl Request {
            /// Every opcode with its request name.
            pub const OPCODES: &'static [(u16, &'static str)] = &[$( ($opcode, stringify!($name)), )*];

            pub fn opcode(&self) -> u16 {
                match self { $( Request::$name(_) => $opcode, )* }
            }

            pub fn name(&self) -> &'static str {
                match self { $( Request::$name(_) => stringify!($name), )* }
            }

            pub fn encode_payload(&self) -> Vec<u8> {
                let mut out = Vec::new();
                match self { $( Request::$name(m) => m.put(&mut out), )* }
                out
            }

            /// Whether every field fits its encoding ([`Wire::check`]):
            /// a sender refuses a request that does not, by field.
            pub fn check(&self) -> Result<(), FormatError> {
                match self { $( Request::$name(m) => m.check(), )* }
            }

            pub fn decode(opcode: u16, payload: &[u8]) -> Result<Self, FormatError> {
                let mut r = Reader::new(payload);
                let req = match opcode {
                    $( $opcode => Request::$name(<$req>::get(&mut r)?), )*
                    other => return Err(FormatError::InvalidValue {
                        what: "request opcode",
                        value: other.into(),
                        reason: "unknown request",
                    }),
                };
                r.finish("request")?;
                Ok(req)
            }
        }

        impl Response {
            pub fn opcode(&self) -> u16 {
                match self {
                    $( Response::$reply(_) => $opcode | super::frame::REPLY_BIT, )*
                    Response::Error(_) => super::frame::ERROR_OPCODE,
                }
            }

            pub fn encode_payload(&self) -> Vec<u8> {
                let mut out = Vec::new();
                match self {
                    $( Response::$reply(m) => m.put(&mut out), )*
                    Response::Error(e) => e.put(&mut out),
                }
                out
            }

            /// Whether every field fits its encoding ([`Wire::check`]).
            pub fn check(&self) -> Result<(), FormatError> {
                match self {
                    $( Response::$reply(m) => m.check(), )*
                    Response::Error(e) => e.check(),
                }
            }

            pub fn decode(opcode: u16, payload: &[u8]) -> Result<Self, FormatError> {
                let mut r = Reader::new(payload);
                let rep = match opcode {
                    $( x if x == $opcode | super::frame::REPLY_BIT => Response::$reply(<$rep>::get(&mut r)?), )*
                    super::frame::ERROR_OPCODE => Response::Error(ErrorReply::get(&mut r)?),
                    other => return Err(FormatError::InvalidValue {
                        what: "reply opcode",
                        value: other.into(),
                        reason: "unknown reply",
                    }),
                };
                r.finish("reply")?;
                Ok(rep)
            }

            /// Whether this reply answers `request` (an error answers any).
            pub fn answers(&self, request: &Request) -> bool {
                matches!(self, Response::Error(_)) || self.opcode() == (request.opcode() | super::frame::REPLY_BIT)
            }
        }
    };
}

messages! {
    0x0001 Status(StatusRequest) -> Status(StatusReply);
    0x0010 RepoCreate(RepoCreate) -> RepoCreated(RepoInfo);
    0x0011 RepoList(RepoListRequest) -> RepoList(RepoList);
    0x0020 WorkspaceRegister(WorkspaceRegister) -> WorkspaceRegistered(WorkspaceInfo);
    0x0021 WorkspaceRetire(WorkspaceRetire) -> WorkspaceRetired(Ack);
    0x0022 WorkspaceList(WorkspaceListRequest) -> WorkspaceList(WorkspaceList);
    0x0030 ObjectsMissing(ObjectsMissing) -> ObjectsMissing(ObjectsMissingReply);
    0x0031 ObjectPut(ObjectPut) -> ObjectPut(ObjectPutReply);
    0x0032 ObjectGet(ObjectGet) -> ObjectData(ObjectData);
    0x0033 ObjectPutMany(ObjectPutMany) -> ObjectPutMany(ObjectPutManyReply);
    0x0034 ObjectGetMany(ObjectGetMany) -> ObjectGetMany(ObjectGetManyReply);
    0x0035 ObjectsPinMissing(ObjectsPinMissing) -> ObjectsPinMissing(ObjectsMissingReply);
    0x0036 ObjectPutStaged(ObjectPut) -> ObjectPutStaged(ObjectPutReply);
    0x0037 ObjectsPublish(ObjectsPublish) -> ObjectsPublished(ObjectsPublishReply);
    0x0040 Submit(Submit) -> Submitted(Outcome);
    0x0041 OperationOutcome(OperationOutcome) -> OperationOutcome(OperationOutcomeReply);
    0x0042 SubmitInline(SubmitInline) -> SubmittedInline(Outcome);
    0x0050 Delta(Delta) -> Delta(DeltaPage);
    0x0051 List(List) -> List(ListPage);
    0x0052 Stat(Stat) -> Stat(StatReply);
    0x0053 History(History) -> History(HistoryPage);
    0x0054 Log(Log) -> Log(LogPage);
    0x0055 Describe(Describe) -> Describe(DescribeReply);
    0x0060 LockAcquire(LockAcquire) -> LocksAcquired(LocksReply);
    0x0061 LockRelease(LockRelease) -> LocksReleased(LocksReply);
    0x0062 LockList(LockList) -> LockList(LockListPage);
}

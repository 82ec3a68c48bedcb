//! Files and change sets built from bytes, with every object they need,
//! and the requests that register a workspace and submit a change, over
//! any [`Connection`].

use scribe_format::changeset::{ChangeSet, Entry, FileState, Mode};
use scribe_format::manifest::ChunkRef;
use scribe_format::wire::message as m;
use scribe_format::wire::{Bytes, Connection, Request, Response, Text};
use scribe_format::{
    BranchId, ChangeSetId, ChunkId, FileContentId, ManifestId, ObjectId, OperationId, WorkspaceId,
};

use crate::env::REPO;

/// The branch every repository starts with.
pub fn main_branch() -> BranchId {
    BranchId([0; 16])
}

/// A file's objects: one chunk (files here are at most 16 MiB) and its
/// manifest.
pub struct File {
    pub state: FileState,
    pub objects: Vec<(ObjectId, Vec<u8>)>,
}

/// The file holding `content`.
pub fn file(content: &[u8]) -> File {
    let chunk = ChunkId::of(content);
    let chunks = if content.is_empty() {
        vec![]
    } else {
        vec![ChunkRef {
            id: chunk,
            length: content.len() as u32,
        }]
    };
    let content_id = FileContentId::of(content);
    let manifest = scribe_objects::encode_manifest(content.len() as u64, &content_id, &chunks)
        .expect("manifest");
    let manifest_id = ManifestId::of_payload(&manifest);
    let mut objects = Vec::new();
    if !content.is_empty() {
        objects.push((ObjectId::chunk(chunk), content.to_vec()));
    }
    objects.push((ObjectId::manifest(manifest_id), manifest));
    File {
        state: FileState {
            manifest: manifest_id,
            content: content_id,
            size: content.len() as u64,
            mode: Mode::Regular,
        },
        objects,
    }
}

/// A change set and every object it needs.
pub struct Change {
    pub id: ChangeSetId,
    pub objects: Vec<(ObjectId, Vec<u8>)>,
}

/// Build a change set: `(path, Some(content), base)` adds (base 0) or
/// edits; `(path, None, base)` deletes.
pub fn change(entries: &[(&str, Option<&[u8]>, u64)]) -> Change {
    let mut objects = Vec::new();
    let mut list = Vec::new();
    let mut sorted: Vec<_> = entries.to_vec();
    sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    for (path, content, base) in sorted {
        list.push(match content {
            Some(c) => {
                let f = file(c);
                objects.extend(f.objects);
                if base == 0 {
                    Entry::add(path, f.state)
                } else {
                    Entry::edit(path, base, f.state)
                }
            }
            None => Entry::delete(path, base),
        });
    }
    let set = ChangeSet::new(list);
    let payload = set.encode().expect("change set encodes");
    let id = ChangeSetId::of_payload(&payload);
    objects.push((ObjectId::change_set(id), payload));
    Change { id, objects }
}

/// A submit of change set `cs` to the main branch of [`REPO`] by `ada`.
pub fn submit_req(ws: WorkspaceId, op: OperationId, cs: ChangeSetId, message: &str) -> m::Submit {
    m::Submit {
        repo: REPO.into(),
        operation: op,
        workspace: ws,
        branch: main_branch(),
        change_set: cs,
        author: "ada".into(),
        message: Text(message.into()),
        keep_locks: false,
        timestamp_ms: 1_700_000_000_000,
    }
}

/// Register workspace `ws` (label `desk`) in `repo` on the main branch.
pub fn register_req(repo: &str, ws: WorkspaceId) -> m::WorkspaceRegister {
    m::WorkspaceRegister {
        repo: repo.into(),
        workspace: ws,
        branch: String::new(),
        view: vec![],
        label: "desk".into(),
        tags: vec![],
    }
}

/// Store `objects` in [`REPO`] in one `ObjectPutMany`.
pub fn put_many_req(
    ws: WorkspaceId,
    op: OperationId,
    objects: &[(ObjectId, Vec<u8>)],
) -> m::ObjectPutMany {
    m::ObjectPutMany {
        repo: REPO.into(),
        operation: op,
        workspace: ws,
        objects: objects
            .iter()
            .map(|(id, b)| m::ObjectPiece {
                id: *id,
                data: Bytes(b.clone()),
            })
            .collect(),
    }
}

/// The accepted change's number; fails the test if it was refused.
pub fn accepted(o: &m::Outcome) -> u64 {
    assert_eq!(o.code, 0, "refused: {} {:?}", o.detail, o.paths);
    assert!(o.change > 0);
    o.change
}

/// The expected reply variant or a test failure naming what came instead.
macro_rules! expect {
    ($reply:expr, $variant:ident) => {
        match $reply {
            Response::$variant(r) => r,
            other => panic!("expected {}, got {other:?}", stringify!($variant)),
        }
    };
}

/// Requests a test makes over any [`Connection`] (the raw [`Wire`] or
/// `scribe_server::InProcessConnection`), failing the test on a transport
/// failure or an unexpected reply.
///
/// [`Wire`]: crate::wire::Wire
pub trait Requests: Connection {
    /// The reply to `request`, which may be an error reply.
    fn ask(&mut self, request: Request) -> Response {
        let name = request.name();
        self.call(request).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    fn status(&mut self) -> m::StatusReply {
        expect!(self.ask(Request::Status(m::StatusRequest {})), Status)
    }

    fn repo_create(&mut self, name: &str) -> m::RepoInfo {
        let req = Request::RepoCreate(m::RepoCreate { name: name.into() });
        expect!(self.ask(req), RepoCreated)
    }

    fn repo_list(&mut self) -> Vec<m::RepoInfo> {
        expect!(self.ask(Request::RepoList(m::RepoListRequest {})), RepoList).repositories
    }

    /// Register `ws` in [`REPO`].
    fn register(&mut self, ws: WorkspaceId) -> m::WorkspaceInfo {
        let req = Request::WorkspaceRegister(register_req(REPO, ws));
        expect!(self.ask(req), WorkspaceRegistered)
    }

    /// Upload a change's objects in one `ObjectPutMany` and submit it;
    /// returns the outcome.
    fn upload_and_submit(
        &mut self,
        ws: WorkspaceId,
        op: OperationId,
        ch: &Change,
        message: &str,
    ) -> m::Outcome {
        let put = Request::ObjectPutMany(put_many_req(ws, op, &ch.objects));
        expect!(self.ask(put), ObjectPutMany);
        let submit = Request::Submit(submit_req(ws, op, ch.id, message));
        expect!(self.ask(submit), Submitted)
    }

    /// Submit a change carrying all its objects (`SubmitInline`);
    /// returns the outcome.
    fn submit_carrying(
        &mut self,
        ws: WorkspaceId,
        op: OperationId,
        ch: &Change,
        message: &str,
    ) -> m::Outcome {
        let s = submit_req(ws, op, ch.id, message);
        let req = Request::SubmitInline(m::SubmitInline {
            repo: s.repo,
            operation: s.operation,
            workspace: s.workspace,
            branch: s.branch,
            change_set: s.change_set,
            author: s.author,
            message: s.message,
            keep_locks: s.keep_locks,
            timestamp_ms: s.timestamp_ms,
            objects: ch
                .objects
                .iter()
                .map(|(id, data)| m::ObjectPiece {
                    id: *id,
                    data: scribe_format::wire::Bytes(data.clone()),
                })
                .collect(),
        });
        expect!(self.ask(req), SubmittedInline)
    }

    /// The whole object `id` of `repo` (at most one reply's worth).
    fn object(&mut self, repo: &str, id: ObjectId) -> Vec<u8> {
        let req = Request::ObjectGet(m::ObjectGet {
            repo: repo.into(),
            id,
            offset: 0,
            max_len: 4 << 20,
        });
        let data = expect!(self.ask(req), ObjectData);
        assert_eq!(data.total_len, data.data.0.len() as u64, "one reply");
        data.data.0
    }
}

impl<C: Connection + ?Sized> Requests for C {}

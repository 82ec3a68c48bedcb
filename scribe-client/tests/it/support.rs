//! Shared fixtures: data roots, both transports, change sets built from bytes.

use std::sync::Arc;

use scribe_client::{Client, ClientOptions};
use scribe_format::changeset::{ChangeSet, Entry, FileState, Mode};
use scribe_format::manifest::ChunkRef;
use scribe_format::wire::message as m;
use scribe_format::wire::Text;
use scribe_format::{
    BranchId, ChangeSetId, ChunkId, FileContentId, ManifestId, ObjectId, OperationId, WorkspaceId,
};
use scribe_server::{ListenOptions, ServerHandle, Service};
use tempfile::TempDir;

pub const REPO: &str = "game";

/// Which transport a test runs over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Tcp,
    InProcess,
}

/// A data root with repository `game`, served over one transport.
pub struct Env {
    /// Keeps the data root alive for the test.
    pub _dir: TempDir,
    pub service: Arc<Service>,
    pub server: Option<ServerHandle>,
}

impl Env {
    pub fn new(transport: Transport) -> Env {
        Self::with_options(transport, ListenOptions::default())
    }

    pub fn with_options(transport: Transport, options: ListenOptions) -> Env {
        let dir = tempfile::tempdir().expect("temp dir");
        let service = Service::create(dir.path().join("data")).expect("create data root");
        scribe_server::service::dispatch::repo_create(&service, REPO).expect("create repo");
        let server = match transport {
            Transport::Tcp => {
                Some(ServerHandle::start(service.clone(), "127.0.0.1:0", options).expect("listen"))
            }
            Transport::InProcess => None,
        };
        Env {
            _dir: dir,
            service,
            server,
        }
    }

    pub fn client(&self) -> Client {
        self.client_with(&ClientOptions::default())
    }

    pub fn client_with(&self, opts: &ClientOptions) -> Client {
        match &self.server {
            Some(s) => scribe_client::connect(&s.url(), opts).expect("connect"),
            None => Client::in_process(self.service.clone()),
        }
    }
}

/// Run `f` against a fresh environment over each transport.
pub fn both(f: impl Fn(&Env)) {
    for t in [Transport::Tcp, Transport::InProcess] {
        let env = Env::new(t);
        f(&env);
    }
}

pub fn main_branch() -> BranchId {
    BranchId([0; 16])
}

/// A file's objects: one chunk (files here are at most 16 MiB) and its manifest.
pub struct File {
    pub state: FileState,
    pub objects: Vec<(ObjectId, Vec<u8>)>,
}

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

pub fn register(c: &mut Client, ws: WorkspaceId) -> m::WorkspaceInfo {
    c.workspace_register(m::WorkspaceRegister {
        repo: REPO.into(),
        workspace: ws,
        branch: String::new(),
        view: vec![],
        label: "desk".into(),
        tags: vec![],
    })
    .expect("register")
}

/// Upload a change's objects and submit it; returns the outcome.
pub fn upload_and_submit(
    c: &mut Client,
    ws: WorkspaceId,
    op: OperationId,
    ch: &Change,
    message: &str,
) -> m::Outcome {
    c.upload_missing(
        REPO,
        ws,
        op,
        ch.objects.iter().map(|(id, b)| (*id, b.as_slice())),
    )
    .expect("upload");
    c.submit(submit_req(ws, op, ch.id, message))
        .expect("submit")
}

pub fn accepted(o: &m::Outcome) -> u64 {
    assert_eq!(o.code, 0, "refused: {} {:?}", o.detail, o.paths);
    assert!(o.change > 0);
    o.change
}

//! Poisoned stores: a change accepted without acceptance's manifest
//! checks, written straight into a data root that no server holds, as a
//! store from before those checks (or one edited behind the server's back)
//! would hold it. Tests use it to show that `doctor` / `verify` name such
//! a change and that workspaces get past it.

use std::path::Path;
use std::sync::Arc;

use scribe_format::changeset::{ChangeSet, Entry};
use scribe_format::{ChangeSetId, ObjectId, OperationId, WorkspaceId};
use scribe_metadata::accept::{Outcome, Submission};
use scribe_metadata::{CommitSink, DataRoot, ObjectPresence, Objects, StoreObjects};

/// Store hooks that hold real bytes but tell acceptance not to read
/// manifests (what the benchmark store says).
struct Unchecked(StoreObjects);

impl ObjectPresence for Unchecked {
    fn contains(&self, id: &ObjectId) -> scribe_metadata::Result<bool> {
        self.0.contains(id)
    }
    fn missing(&self, ids: &[ObjectId]) -> scribe_metadata::Result<Vec<ObjectId>> {
        self.0.missing(ids)
    }
    fn read(&self, id: &ObjectId) -> scribe_metadata::Result<Option<Vec<u8>>> {
        self.0.read(id)
    }
    fn checks_manifests(&self) -> bool {
        false
    }
}

impl CommitSink for Unchecked {
    fn publish_commit(&self, id: &ObjectId, envelope: &[u8]) -> scribe_metadata::Result<()> {
        self.0.publish_commit(id, envelope)
    }
    fn read_commit(&self, id: &ObjectId) -> scribe_metadata::Result<Option<Vec<u8>>> {
        self.0.read_commit(id)
    }
}

/// Store `objects` in repository `repo` of the data root at `data` (not
/// served) and accept `entries` on its main branch without the manifest
/// checks. Returns the accepted change; panics if it is refused.
pub fn accept_unchecked(
    data: &Path,
    repo: &str,
    objects: &[(ObjectId, Vec<u8>)],
    entries: Vec<Entry>,
) -> u64 {
    let mut root = DataRoot::open(data).expect("open the data root");
    let info = root
        .list_repositories()
        .expect("list")
        .into_iter()
        .find(|r| r.name == repo)
        .expect("the repository");
    let dir = data.join("repos").join(info.id.to_hex()).join("objects");
    let store = Arc::new(
        scribe_server::service::stores::open_or_create(&dir).expect("open the object store"),
    );
    let shared = store.clone();
    root.set_objects_factory(Box::new(move |_: &Path, _| {
        let o: Objects = Arc::new(Unchecked(StoreObjects(shared.clone())));
        Ok(o)
    }));
    let r = root.open_repository(info.id).expect("open the repository");
    let mut entries = entries;
    entries.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
    let cs = ChangeSet::new(entries);
    let payload = cs.encode().expect("the change set encodes");
    let cs_id = ChangeSetId::of_payload(&payload);
    let batch = store.batch();
    for (id, bytes) in objects {
        assert_eq!(batch.put(id.kind, bytes).expect("put"), *id, "object id");
    }
    batch
        .put(scribe_format::ObjectKind::ChangeSet, &payload)
        .expect("put the change set");
    batch.commit().expect("publish");
    let outcome = r
        .submit(Submission {
            operation: OperationId::random(),
            branch: r.main_branch(),
            workspace: WorkspaceId([0xee; 16]),
            change_set: cs,
            change_set_id: cs_id,
            author: "mallory".into(),
            message: "poison".into(),
            timestamp_ms: 1_700_000_000_000,
            keep_locks: false,
            required_locks: Vec::new(),
            actor: None,
            inline: Default::default(),
        })
        .expect("submit");
    match outcome {
        Outcome::Accepted { change, .. } => change,
        other => panic!("the poisoned change was refused: {other:?}"),
    }
}

//! Shared helpers: a data root in a tempdir, uploads, submissions.

use std::sync::Arc;

use redb::ReadableDatabase;
use scribe_format::changeset::{ChangeSet, Entry, FileState, Mode};
use scribe_format::{
    BranchId, ErrorCode, FileContentId, ManifestId, ObjectId, OperationId, WorkspaceId,
};
use scribe_metadata::accept::{Outcome, Submission};
use scribe_metadata::{tables, DataRoot, DirObjects, Repository};

pub struct Env {
    #[allow(dead_code)]
    pub dir: tempfile::TempDir,
    pub root: DataRoot,
    pub repo: Arc<Repository>,
    pub objects: Arc<DirObjects>,
    pub main: BranchId,
    pub ws: WorkspaceId,
}

/// Hooks over `objects/interim/` (one file per object) so tests can
/// upload, rewrite and remove objects directly.
pub fn dir_objects_factory() -> Box<scribe_metadata::root::ObjectsFactory> {
    Box::new(|dir, _| {
        let o: scribe_metadata::Objects = DirObjects::open(&dir.join("interim"))?;
        Ok(o)
    })
}

/// Reopen a data root with the test hooks.
pub fn reopen(dir: &std::path::Path) -> DataRoot {
    let mut root = DataRoot::open(dir).expect("reopen data root");
    root.set_objects_factory(dir_objects_factory());
    root
}

/// Close `env`'s data root and open it again (startup's recovery and
/// archive drain run), with its one repository.
pub fn restart(env: Env) -> (tempfile::TempDir, DataRoot, Arc<Repository>) {
    let Env {
        root, repo, dir, ..
    } = env;
    drop(repo);
    drop(root);
    let root = reopen(&dir.path().join("data"));
    let id = root.list_repositories().unwrap()[0].id;
    let repo = root.open_repository(id).unwrap();
    (dir, root, repo)
}

pub fn env() -> Env {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut root = DataRoot::create(dir.path().join("data")).expect("create data root");
    root.set_objects_factory(dir_objects_factory());
    let id = root.create_repository("game").expect("create repository");
    let repo = root.open_repository(id).expect("open repository");
    let objects = DirObjects::open(&repo.dir().join("objects/interim")).expect("objects");
    let main = repo.main_branch();
    Env {
        dir,
        root,
        repo,
        objects,
        main,
        ws: WorkspaceId::random(),
    }
}

/// The state of an `n`-byte file (bytes derived from `n`) whose chunk and
/// manifest are uploaded: a real manifest, as acceptance reads it.
pub fn state(env: &Env, n: u64) -> FileState {
    upload_file(&env.objects, &content_of(n))
}

/// `n` bytes that differ for every `n`.
pub fn content_of(n: u64) -> Vec<u8> {
    (0..n).map(|i| (i.wrapping_mul(31) ^ n) as u8).collect()
}

/// Upload `content`'s chunk and manifest; its file state.
pub fn upload_file(objects: &DirObjects, content: &[u8]) -> FileState {
    let (state, objs) = file_objects(content);
    for (id, bytes) in &objs {
        objects.put(id, bytes).expect("upload file objects");
    }
    state
}

/// A file of at most 1 MiB: its state, and its chunk (none when empty)
/// and manifest objects.
pub fn file_objects(content: &[u8]) -> (FileState, Vec<(ObjectId, Vec<u8>)>) {
    use scribe_format::manifest::ChunkRef;
    let chunk = scribe_format::ChunkId::of(content);
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
    let state = FileState {
        manifest: manifest_id,
        content: content_id,
        size: content.len() as u64,
        mode: Mode::Regular,
    };
    (state, objects)
}

/// A state whose manifest is not uploaded.
pub fn absent_state(n: u64) -> FileState {
    FileState {
        manifest: ManifestId(*blake3::hash(&(n ^ 0xdead).to_le_bytes()).as_bytes()),
        content: FileContentId([7; 32]),
        size: n,
        mode: Mode::Executable,
    }
}

pub fn submission(env: &Env, entries: Vec<Entry>) -> Submission {
    submission_as(env, env.ws, entries)
}

pub fn submission_as(env: &Env, ws: WorkspaceId, entries: Vec<Entry>) -> Submission {
    let cs = ChangeSet::new(entries);
    // A change set the format refuses still needs an identity to submit
    // (acceptance re-checks its shape).
    let (id, bytes) = match cs.encode() {
        Ok(bytes) => (scribe_format::ChangeSetId::of_payload(&bytes), bytes),
        Err(_) => {
            let bytes = format!("{:?}", cs.entries).into_bytes();
            (scribe_format::ChangeSetId::of_payload(&bytes), bytes)
        }
    };
    env.objects
        .put(&ObjectId::change_set(id), &bytes)
        .expect("upload change set");
    Submission {
        operation: OperationId::random(),
        branch: env.main,
        workspace: ws,
        change_set: cs,
        change_set_id: id,
        author: "ada".into(),
        message: "work".into(),
        timestamp_ms: 1_700_000_000_000,
        keep_locks: false,
        required_locks: Vec::new(),
        actor: None,
        inline: Default::default(),
    }
}

pub fn accepted(o: &Outcome) -> u64 {
    match o {
        Outcome::Accepted { change, .. } => *change,
        other => panic!("expected acceptance, got {other:?}"),
    }
}

pub fn rejected(o: &Outcome) -> ErrorCode {
    match o {
        Outcome::Rejected { code, .. } => *code,
        other => panic!("expected rejection, got {other:?}"),
    }
}

pub fn add(env: &Env, path: &str, n: u64) -> Entry {
    Entry::add(path, state(env, n))
}

/// Accept `entries` or panic; returns the change.
pub fn commit(env: &Env, entries: Vec<Entry>) -> u64 {
    let o = env.repo.submit(submission(env, entries)).expect("submit");
    accepted(&o)
}

pub fn assert_doctor_clean(repo: &Repository) {
    let report = repo.doctor().expect("doctor");
    assert!(
        report.problems.is_empty(),
        "doctor found {:?}",
        report.problems
    );
}

pub type Dump = Vec<(&'static str, Vec<u8>, Vec<u8>)>;

/// Every row of the tables acceptance writes (operations when asked).
pub fn dump(repo: &Repository, with_operations: bool) -> Dump {
    let tx = repo.database().begin_read().unwrap();
    let mut out = Vec::new();
    for (name, t) in [
        ("history", tables::HISTORY),
        ("moves", tables::MOVES),
        ("file_lineage", tables::FILE_LINEAGE),
        ("change_paths", tables::CHANGE_PATHS),
        ("accepted_manifests", tables::ACCEPTED_MANIFESTS),
        ("snapshot_roots", tables::SNAPSHOT_ROOTS),
        ("submit_stage", tables::SUBMIT_STAGE),
    ] {
        let t = tx.open_table(t).unwrap();
        for row in t.range::<&[u8]>(..).unwrap() {
            let (k, v) = row.unwrap();
            out.push((name, k.value().to_vec(), v.value().to_vec()));
        }
    }
    for (name, t) in [
        ("commits", tables::COMMITS),
        ("snapshot_nodes", tables::SNAPSHOT_NODES),
    ] {
        let t = tx.open_table(t).unwrap();
        for row in t.range::<u64>(..).unwrap() {
            let (k, v) = row.unwrap();
            out.push((name, k.value().to_le_bytes().to_vec(), v.value().to_vec()));
        }
    }
    let t = tx.open_table(tables::META).unwrap();
    for row in t.range::<&str>(..).unwrap() {
        let (k, v) = row.unwrap();
        out.push(("meta", k.value().as_bytes().to_vec(), v.value().to_vec()));
    }
    if with_operations {
        let t = tx.open_table(tables::OPERATIONS).unwrap();
        for row in t.range::<[u8; 16]>(..).unwrap() {
            let (k, v) = row.unwrap();
            out.push(("operations", k.value().to_vec(), v.value().to_vec()));
        }
    }
    let t = tx.open_table(tables::LOCKS).unwrap();
    for row in t.range::<&str>(..).unwrap() {
        let (k, v) = row.unwrap();
        out.push(("locks", k.value().as_bytes().to_vec(), v.value().to_vec()));
    }
    out
}

/// Inside a child test process: write `marker`, then wait for the parent's
/// SIGKILL.
pub fn park(marker: &std::path::Path) -> ! {
    std::fs::write(marker, b"parked").unwrap();
    loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

/// Run the test `child` (a test of the calling module, named without the
/// module: pass `module_path!()`) in a new process of this test binary
/// with `env` set, wait until it writes `marker`, then SIGKILL it. `what`
/// names the scenario in failures.
pub fn kill_when_parked(
    module: &str,
    child: &str,
    env: (&str, &str),
    marker: &std::path::Path,
    what: &str,
) {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    // The test's full name: the module's path without the crate's name.
    let (_, module) = module.split_once("::").unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &format!("{module}::{child}"),
            "--nocapture",
            "--test-threads=1",
        ])
        .env(env.0, env.1)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !marker.exists() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("{what}: child exited before parking: {status}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "{what}: never parked"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
}

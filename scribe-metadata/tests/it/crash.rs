//! kill -9 during streamed preparation, and streamed acceptance itself.

use std::path::{Path, PathBuf};
use std::time::Duration;

use redb::ReadableDatabase;
use scribe_format::changeset::{ChangeSet, Entry};
use scribe_format::{BranchId, ObjectId, OperationId, WorkspaceId};
use scribe_metadata::accept::Submission;
use scribe_metadata::{tables, DirObjects, Repository};

use super::support::*;

const CHILD_ENV: &str = "SCRIBE_METADATA_CRASH_CHILD";
/// Enough for more than 18 staging transactions.
const ENTRIES: u64 = 2000;
/// The child parks after this staging transaction: two after the first
/// flushed one (one in sixteen is flushed; docs/metadata.md, "Staging
/// flushes").
const PARK_AFTER: u64 = 18;

/// A deterministic large submission (same operation id every time).
fn big(objects: &DirObjects, main: BranchId) -> Submission {
    big_n(objects, main, ENTRIES)
}

/// `n` new files under 37 directories (`n` > 64 makes it streamed).
pub(super) fn big_n(objects: &DirObjects, main: BranchId, n: u64) -> Submission {
    let mut entries = Vec::new();
    for i in 0..n {
        // Eight distinct real files (acceptance reads every manifest).
        let content = vec![(i % 8) as u8; (i % 8) as usize + 1];
        entries.push(Entry::add(
            format!("assets/{:02}/file{i:05}.bin", i % 37),
            upload_file(objects, &content),
        ));
    }
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    let cs = ChangeSet::new(entries);
    let id = cs.id().unwrap();
    objects
        .put(&ObjectId::change_set(id), &cs.encode().unwrap())
        .unwrap();
    Submission {
        operation: OperationId([7; 16]),
        branch: main,
        workspace: WorkspaceId([8; 16]),
        change_set: cs,
        change_set_id: id,
        author: "bulk".into(),
        message: "import".into(),
        timestamp_ms: 1,
        keep_locks: false,
        required_locks: Vec::new(),
        actor: None,
        inline: Default::default(),
    }
}

fn objects_of(repo: &Repository) -> std::sync::Arc<DirObjects> {
    DirObjects::open(&repo.dir().join("objects/interim")).unwrap()
}

/// Runs only inside the child process `kill_during_streamed_preparation…`
/// spawns (it returns at once otherwise): a streamed submit that parks
/// forever after its eighteenth staging transaction.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let root = reopen(std::path::Path::new(&dir));
    let repo = root.open_repository_by_name("game").unwrap();
    let marker = PathBuf::from(&dir).join("staging-marker");
    repo.set_stage_hook(Some(Box::new(move |n| {
        if n == PARK_AFTER {
            std::fs::write(&marker, b"staged").unwrap();
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    })));
    let s = big(&objects_of(&repo), repo.main_branch());
    let _ = repo.submit(s);
    unreachable!("the parent kills this process while it stages");
}

fn pending_rows(repo_dir: &Path) -> (bool, u64) {
    let db = redb::Database::open(repo_dir.join("metadata.redb")).unwrap();
    let tx = db.begin_read().unwrap();
    let m = tx.open_table(tables::META).unwrap();
    let pending = m.get("pending-submit").unwrap().is_some();
    let stage = tx.open_table(tables::SUBMIT_STAGE).unwrap();
    (pending, redb::ReadableTableMetadata::len(&stage).unwrap())
}

#[test]
fn kill_during_streamed_preparation_leaves_the_repository_as_before() {
    let e = env();
    commit(&e, vec![add(&e, "readme", 1)]);
    let before = dump(&e.repo, true);
    let dir = e.root.dir().to_owned();
    let repo_dir = e.repo.dir().to_owned();
    let Env {
        dir: _keep,
        root,
        repo,
        ..
    } = e;
    drop(repo);
    drop(root);

    kill_when_parked(
        module_path!(),
        "crash_child",
        (CHILD_ENV, dir.to_str().unwrap()),
        &dir.join("staging-marker"),
        "staging",
    );

    // The kill left a reservation and staged rows behind: at least the
    // flushed sixteen transactions' (each at least 256 undo rows), at most
    // all eighteen's (512 each).
    let (pending, staged) = pending_rows(&repo_dir);
    assert!(pending, "pending-submit survives the kill");
    assert!(
        (16 * 256..=PARK_AFTER * 512).contains(&staged),
        "staged undo rows after the kill: {staged}"
    );

    // Startup recovery removes them; the repository is exactly as before.
    let root = reopen(&dir);
    let repo = root.open_repository_by_name("game").unwrap();
    assert!(
        before == dump(&repo, true),
        "recovered repository differs from before"
    );
    assert_doctor_clean(&repo);
    repo.recover_submissions().unwrap();

    // The same operation, retried, is accepted in full.
    let o = repo
        .submit(big(&objects_of(&repo), repo.main_branch()))
        .unwrap();
    assert_eq!(accepted(&o), 2);
    assert_eq!(
        repo.stat(repo.main_branch(), 2, "assets/00/file00000.bin")
            .unwrap()
            .unwrap()
            .change,
        2
    );
    assert_eq!(
        repo.list(repo.main_branch(), 2, "", true, None, 10_000)
            .unwrap()
            .entries
            .len() as u64,
        ENTRIES + 1
    );
    assert_doctor_clean(&repo);
    assert_eq!(pending_rows_open(&repo), (false, 0));
}

fn pending_rows_open(repo: &Repository) -> (bool, u64) {
    let tx = repo.database().begin_read().unwrap();
    let m = tx.open_table(tables::META).unwrap();
    let pending = m.get("pending-submit").unwrap().is_some();
    let stage = tx.open_table(tables::SUBMIT_STAGE).unwrap();
    (pending, redb::ReadableTableMetadata::len(&stage).unwrap())
}

#[test]
fn streamed_acceptance_matches_buffered_semantics() {
    let e = env();
    let s = big(&e.objects, e.main);
    let o = e.repo.submit(s.clone()).unwrap();
    assert_eq!(accepted(&o), 1);
    assert_eq!(
        e.repo.submit(s).unwrap(),
        o,
        "retry answers the recorded outcome"
    );
    // A streamed rejection records its outcome and stages nothing.
    let mut again = big(&e.objects, e.main);
    again.operation = OperationId::random();
    let r = e.repo.submit(again).unwrap();
    assert_eq!(rejected(&r), scribe_format::ErrorCode::BaseMismatch);
    assert_eq!(pending_rows_open(&e.repo), (false, 0));
    assert_eq!(e.repo.describe(1).unwrap().paths.len() as u64, ENTRIES);
    assert_doctor_clean(&e.repo);
}

/// A crash after the final acceptance but before the undo inventory was
/// discarded: recovery keeps every accepted row and drops only the inventory.
#[test]
fn recovery_of_an_accepted_preparation_discards_only_its_inventory() {
    let e = env();
    let o = e.repo.submit(big_n(&e.objects, e.main, 100)).unwrap();
    assert_eq!(accepted(&o), 1);
    let accepted_rows = dump(&e.repo, true);
    // Re-create what the interrupted cleanup would have left behind.
    {
        let tx = e.repo.database().begin_write().unwrap();
        {
            let mut m = tx.open_table(tables::META).unwrap();
            let pending = scribe_metadata::records::encode_pending(1, &OperationId([7; 16]));
            m.insert("pending-submit", pending.as_slice()).unwrap();
            let mut stage = tx.open_table(tables::SUBMIT_STAGE).unwrap();
            let h = scribe_metadata::records::keys::history(&e.main, "assets/00/file00000.bin", 1);
            stage
                .insert(
                    scribe_metadata::records::keys::stage(1, &h).as_slice(),
                    [].as_slice(),
                )
                .unwrap();
        }
        tx.commit().unwrap();
    }
    assert!(e.repo.doctor().unwrap().has("submit.pending"));
    e.repo.recover_submissions().unwrap();
    assert!(
        accepted_rows == dump(&e.repo, true),
        "accepted rows survive recovery"
    );
    assert_eq!(pending_rows_open(&e.repo), (false, 0));
    assert_doctor_clean(&e.repo);
}

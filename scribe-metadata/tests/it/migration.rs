//! The repository migration journal on real files and real processes: a
//! repository taken back to the pre-framework revision 0 (pre-owner
//! workspace records, no `workspace_state`, no `change_notes`, no
//! `migration-version`) is converted batch by batch to revision 3; owners
//! come from the auth claims; SIGKILL after any batch resumes from the
//! cursor to the same result; malformed cursors and records are refused.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use scribe_format::{BranchId, WorkspaceId};
use scribe_metadata::archive::Archive;
use scribe_metadata::migration::{self, Applied};
use scribe_metadata::records::{LockRecord, WorkspaceRecord};
use scribe_metadata::tables::{self, meta};
use scribe_metadata::workspaces::Registration;
use scribe_metadata::{journal, MetadataError};

use super::support::*;

const SYNTHETIC: u8 = 40; // 40 * 64 = 2,560 workspaces: three batches
const OWNED: [u8; 16] = [0xAA; 16];

fn pre_owner(branch: &BranchId, view: &[&str], created: u64, label: &str) -> Vec<u8> {
    let mut out = vec![1u8];
    out.extend_from_slice(&branch.0);
    out.extend_from_slice(&(view.len() as u16).to_le_bytes());
    for p in view {
        out.extend_from_slice(&(p.len() as u16).to_le_bytes());
        out.extend_from_slice(p.as_bytes());
    }
    out.extend_from_slice(&created.to_le_bytes());
    out.extend_from_slice(&(label.len() as u16).to_le_bytes());
    out.extend_from_slice(label.as_bytes());
    out
}

fn synthetic_ws(i: u32) -> [u8; 16] {
    let mut id = [0u8; 16];
    id[..4].copy_from_slice(&i.to_be_bytes());
    id[15] = 0x5c;
    id
}

/// Odd synthetic workspaces were claimed by `OWNED`.
fn owner_of(ws: &[u8; 16]) -> Result<Option<[u8; 16]>, MetadataError> {
    Ok((ws[15] == 0x5c && ws[3] % 2 == 1).then_some(OWNED))
}

fn open(dir: &Path) -> (Arc<redb::Database>, Arc<Archive>, PathBuf) {
    let path = dir.join("metadata.redb");
    let db = migration::open(&path).unwrap();
    let archive = Arc::new(Archive::open(&path, db.clone()).unwrap());
    (db, archive, path)
}

/// A repository with notes, locks and registered workspaces, taken back to
/// revision 0 through journaled (archived) writes, plus 2,560 synthetic
/// pre-owner workspaces holding 1,200 locks. Returns the data root, the
/// repository directory and the main branch.
fn revision_zero() -> (tempfile::TempDir, PathBuf, BranchId) {
    let e = env();
    let c = commit(&e, vec![add(&e, "art/a.psd", 1)]);
    e.repo.add_change_note(c, "ada", "first").unwrap();
    let ws = WorkspaceId::random();
    e.repo
        .register_workspace(&Registration {
            workspace: ws,
            owner: Some([0xBB; 16]),
            branch: e.main,
            view: vec!["art".into()],
            label: "desk".into(),
            tags: vec!["ci".into()],
        })
        .unwrap();
    e.repo
        .lock(&["art/a.psd".into()], ws, e.main, "ada")
        .unwrap();
    let main = e.main;
    let Env {
        dir, root, repo, ..
    } = e;
    let repo_dir = repo.dir().to_owned();
    drop(repo);
    drop(root);
    let (db, archive, _) = open(&repo_dir);
    let tx = journal::begin_archived(&db, &archive).unwrap();
    {
        tx.open_table(tables::META)
            .unwrap()
            .remove(meta::MIGRATION_VERSION)
            .unwrap();
        let mut w = tx.open_table(tables::WORKSPACES).unwrap();
        w.insert(ws.0, pre_owner(&main, &["art"], 5, "desk").as_slice())
            .unwrap();
        let mut locks = tx.open_table(tables::LOCKS).unwrap();
        for i in 0..SYNTHETIC as u32 * 64 {
            let id = synthetic_ws(i);
            w.insert(
                id,
                pre_owner(&main, &[], 1_000 + i as u64, &format!("ws{i}")).as_slice(),
            )
            .unwrap();
            if i < 1_200 {
                let rec = LockRecord {
                    generation: 1,
                    workspace: WorkspaceId(id),
                    branch: main,
                    author: "bot".into(),
                    acquired_ms: 7,
                };
                locks
                    .insert(format!("gen/{i:05}.bin").as_str(), rec.encode().as_slice())
                    .unwrap();
            }
        }
    }
    tx.delete_table(tables::WORKSPACE_STATE).unwrap();
    tx.delete_table(tables::CHANGE_NOTES).unwrap();
    tx.commit().unwrap();
    (dir, repo_dir, main)
}

fn assert_migrated(tmp: &tempfile::TempDir, repo_dir: &Path) {
    let root = reopen(&tmp.path().join("data"));
    let repo = root.open_repository_by_name("game").unwrap();
    assert_doctor_clean(&repo);
    let tx = redb::ReadableDatabase::begin_read(repo.database()).unwrap();
    let w = tx.open_table(tables::WORKSPACES).unwrap();
    let odd = WorkspaceRecord::decode(w.get(synthetic_ws(3)).unwrap().unwrap().value()).unwrap();
    assert_eq!(odd.owner, Some(OWNED));
    assert_eq!(odd.label, "ws3");
    assert_eq!(odd.created_ms, 1_003);
    let even = WorkspaceRecord::decode(w.get(synthetic_ws(4)).unwrap().unwrap().value()).unwrap();
    assert_eq!(even.owner, None);
    drop(w);
    drop(tx);
    // The migrated workspaces serve: a lock of a migrated workspace is held
    // by it (the lock index answers), and it can register again.
    assert_eq!(repo.locks("").unwrap().len(), 1_201);
    repo.unlock(&["gen/00003.bin".into()], WorkspaceId(synthetic_ws(3)))
        .unwrap();
    assert_eq!(repo.locks("gen/").unwrap().len(), 1_199);
    assert_doctor_clean(&repo);
    scribe_metadata::archive::verify(&repo_dir.join("metadata.recovery")).unwrap();
    // The archive alone rebuilds the migrated database.
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("m.redb");
    scribe_metadata::archive::recover(&repo_dir.join("metadata.recovery"), &target).unwrap();
    assert_eq!(
        journal::dump_rows(&redb::Database::open(&target).unwrap()).unwrap(),
        journal::dump_rows(repo.database()).unwrap()
    );
}

#[test]
fn revision_zero_is_converted_batch_by_batch_to_the_current_revision() {
    let (tmp, repo_dir, _) = revision_zero();
    // The regular open refuses revision 0.
    {
        let root = reopen(&tmp.path().join("data"));
        let err = root.open_repository_by_name("game").err().unwrap();
        assert!(err.to_string().contains("migration revision"), "{err}");
    }
    let (db, archive, path) = open(&repo_dir);
    let ins = migration::inspect(&db, &path).unwrap();
    assert_eq!(ins.revision, 0);
    assert_eq!(ins.active, None);
    assert_eq!(ins.pending().len(), 3);
    let done: Applied = migration::apply(&db, &archive, &path, &owner_of, None).unwrap();
    assert_eq!((done.from, done.to), (0, 3));
    assert_eq!(done.workspaces_converted, SYNTHETIC as u64 * 64 + 1);
    assert_eq!(done.locks_indexed, 1_201);
    assert!(done.batches >= 3 + 2 + 3, "{done:?}");
    assert!(migration::inspect(&db, &path).unwrap().is_current());
    // A second run has nothing to do.
    let again = migration::apply(&db, &archive, &path, &owner_of, None).unwrap();
    assert_eq!(again.batches, 0);
    drop(archive);
    drop(db);
    assert_migrated(&tmp, &repo_dir);
}

#[test]
fn malformed_progress_and_records_are_refused_by_name() {
    let (_tmp, repo_dir, _) = revision_zero();
    let (db, archive, path) = open(&repo_dir);
    type Meta<'a> = journal::JTable<'a, &'static str, &'static [u8]>;
    let set = |f: &dyn Fn(&mut Meta<'_>)| {
        let tx = journal::begin_archived(&db, &archive).unwrap();
        f(&mut tx.open_table(tables::META).unwrap());
        tx.commit().unwrap();
    };
    // A lone progress key.
    set(&|m| {
        m.insert(meta::MIGRATION_ACTIVE, 1u32.to_le_bytes().as_slice())
            .unwrap();
    });
    let err = migration::inspect(&db, &path).unwrap_err().to_string();
    assert!(err.contains("present together"), "{err}");
    // An active revision that is not the next one.
    set(&|m| {
        m.insert(meta::MIGRATION_ACTIVE, 3u32.to_le_bytes().as_slice())
            .unwrap();
        m.insert(meta::MIGRATION_CURSOR, [1u8].as_slice()).unwrap();
    });
    let err = migration::inspect(&db, &path).unwrap_err().to_string();
    assert!(err.contains("migration-active 3"), "{err}");
    // A cursor that is no cursor of its revision.
    set(&|m| {
        m.insert(meta::MIGRATION_ACTIVE, 1u32.to_le_bytes().as_slice())
            .unwrap();
        m.insert(meta::MIGRATION_CURSOR, [9u8].as_slice()).unwrap();
    });
    let err = migration::apply(&db, &archive, &path, &owner_of, None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("not a cursor of revision 1"), "{err}");
    // A future revision.
    set(&|m| {
        m.remove(meta::MIGRATION_ACTIVE).unwrap();
        m.remove(meta::MIGRATION_CURSOR).unwrap();
        m.insert(meta::MIGRATION_VERSION, 4u32.to_le_bytes().as_slice())
            .unwrap();
    });
    let err = migration::inspect(&db, &path).unwrap_err().to_string();
    assert!(err.contains("migration revision"), "{err}");
    // A workspace record in neither layout stops the conversion; nothing
    // of its batch is written.
    set(&|m| {
        m.remove(meta::MIGRATION_VERSION).unwrap();
    });
    {
        let tx = journal::begin_archived(&db, &archive).unwrap();
        tx.open_table(tables::WORKSPACES)
            .unwrap()
            .insert(synthetic_ws(0), [7u8, 1, 2].as_slice())
            .unwrap();
        tx.commit().unwrap();
    }
    let err = migration::apply(&db, &archive, &path, &owner_of, None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("not a pre-owner record"), "{err}");
    let ins = migration::inspect(&db, &path).unwrap();
    assert_eq!(ins.active, Some((1, vec![0])), "the cursor did not move");
}

#[test]
fn an_interrupted_change_notes_table_is_adopted_only_when_it_continues_history() {
    let e = env();
    let c = commit(&e, vec![add(&e, "a", 1)]);
    e.repo.add_change_note(c, "ada", "one").unwrap();
    e.repo.add_change_note(c, "ada", "two").unwrap();
    let Env {
        dir: tmp,
        root,
        repo,
        ..
    } = e;
    let repo_dir = repo.dir().to_owned();
    drop(repo);
    drop(root);
    let (db, archive, path) = open(&repo_dir);
    // Revision 2 completed, revision 3 in progress with its table left.
    let tx = journal::begin_archived(&db, &archive).unwrap();
    {
        let mut m = tx.open_table(tables::META).unwrap();
        m.insert(meta::MIGRATION_VERSION, 2u32.to_le_bytes().as_slice())
            .unwrap();
        m.insert(meta::MIGRATION_ACTIVE, 3u32.to_le_bytes().as_slice())
            .unwrap();
        m.insert(meta::MIGRATION_CURSOR, [1u8].as_slice()).unwrap();
    }
    tx.commit().unwrap();
    let done = migration::apply(&db, &archive, &path, &owner_of, None).unwrap();
    assert_eq!(done.notes_adopted, 2);
    assert_eq!(done.to, 3);
    // A gap in a change's revisions refuses instead of rebuilding.
    let tx = journal::begin_archived(&db, &archive).unwrap();
    {
        let mut m = tx.open_table(tables::META).unwrap();
        m.insert(meta::MIGRATION_VERSION, 2u32.to_le_bytes().as_slice())
            .unwrap();
        m.insert(meta::MIGRATION_ACTIVE, 3u32.to_le_bytes().as_slice())
            .unwrap();
        m.insert(meta::MIGRATION_CURSOR, [1u8].as_slice()).unwrap();
        tx.open_table(tables::CHANGE_NOTES)
            .unwrap()
            .remove(scribe_metadata::notes::note_key(c, 1).as_slice())
            .unwrap();
    }
    tx.commit().unwrap();
    let err = migration::apply(&db, &archive, &path, &owner_of, None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("not the next revision"), "{err}");
    assert_eq!(migration::inspect(&db, &path).unwrap().revision, 2);
    drop(tmp);
}

const CHILD_ENV: &str = "SCRIBE_MIGRATION_KILL_CHILD";

/// Runs only inside the child process the SIGKILL test spawns: a migration
/// that parks after the N-th committed transaction.
#[test]
fn migration_kill_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (dir, n) = spec.split_once('|').unwrap();
    let dir = PathBuf::from(dir);
    let n: usize = n.parse().unwrap();
    let (db, archive, path) = open(&dir);
    let marker = dir.join("parked");
    let seen = std::sync::atomic::AtomicUsize::new(0);
    let hook = move |_: &'static str| -> std::io::Result<()> {
        if seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == n {
            park(&marker);
        }
        Ok(())
    };
    let _ = migration::apply(&db, &archive, &path, &owner_of, Some(&hook));
    unreachable!("the parent kills this process while it migrates");
}

#[test]
fn sigkill_after_any_batch_resumes_from_the_cursor_to_the_same_result() {
    // After: the step start, a workspace batch, the last workspace batch,
    // a lock batch, revision 1's completion, revision 3's start.
    for n in [1usize, 2, 4, 5, 7, 10] {
        let (tmp, repo_dir, _) = revision_zero();
        kill_when_parked(
            module_path!(),
            "migration_kill_child",
            (CHILD_ENV, &format!("{}|{n}", repo_dir.display())),
            &repo_dir.join("parked"),
            &format!("after {n}"),
        );
        let (db, archive, path) = open(&repo_dir);
        let ins = migration::inspect(&db, &path).unwrap();
        assert!(!ins.is_current(), "after {n}: {ins:?}");
        let done = migration::apply(&db, &archive, &path, &owner_of, None).unwrap();
        assert_eq!(done.to, 3, "after {n}");
        drop(archive);
        drop(db);
        assert_migrated(&tmp, &repo_dir);
    }
}

//! Offline snapshot-page reclamation (#16 item 2, seed 004): unreachable
//! preparation pages are removed through the journal (the archive rebuilds
//! exactly the swept database), every accepted snapshot reads identically,
//! a missing root is refused before anything is swept, and a run killed
//! mid-sweep is finished by the next.

use std::path::PathBuf;

use redb::{ReadableDatabase, ReadableTableMetadata};
use scribe_metadata::reclaim::{marks_path, reclaim_snapshot_pages, SWEEP_BATCH};
use scribe_metadata::{archive, journal, tables, Repository};

use super::crash::big_n;
use super::support::*;

const CHILD_ENV: &str = "SCRIBE_RECLAIM_KILL_CHILD";

fn pages(repo: &Repository) -> u64 {
    let tx = repo.database().begin_read().unwrap();
    tx.open_table(tables::SNAPSHOT_NODES)
        .unwrap()
        .len()
        .unwrap()
}

/// Every accepted snapshot's recursive listing.
fn listings(e: &Env) -> Vec<String> {
    let head = e.repo.head().unwrap();
    (0..=head)
        .map(|c| {
            format!(
                "{:?}",
                e.repo.list(e.main, c, "", true, None, 1 << 20).unwrap()
            )
        })
        .collect()
}

/// A history with a streamed acceptance between small ones.
fn workload(e: &Env) {
    commit(e, vec![add(e, "a.txt", 1), add(e, "b/c.txt", 2)]);
    assert_eq!(
        accepted(&e.repo.submit(big_n(&e.objects, e.main, 300)).unwrap()),
        2
    );
    commit(e, vec![add(e, "d.txt", 3)]);
}

/// Pages an abandoned preparation left: copies of a real page under new
/// (higher) ids, written through the journal and archived, as staging is.
fn abandoned_pages(repo: &Repository, n: u64) {
    let (last, bytes) = {
        let tx = repo.database().begin_read().unwrap();
        let t = tx.open_table(tables::SNAPSHOT_NODES).unwrap();
        let (k, v) = redb::ReadableTable::last(&t).unwrap().unwrap();
        (k.value(), v.value().to_vec())
    };
    let mut tx = journal::begin(repo.database()).unwrap();
    tx.set_durability(redb::Durability::Immediate).unwrap();
    {
        let mut t = tx.open_table(tables::SNAPSHOT_NODES).unwrap();
        for id in last + 1..=last + n {
            t.insert(id, bytes.as_slice()).unwrap();
        }
    }
    tx.commit().unwrap();
    repo.archive().publish().unwrap();
}

/// The rows the archive alone rebuilds equal the database's.
fn assert_archive_rebuilds(repo: &Repository) {
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("m.redb");
    archive::recover(repo.archive().dir(), &target).unwrap();
    let rebuilt = journal::dump_rows(&redb::Database::open(&target).unwrap()).unwrap();
    assert_eq!(rebuilt, journal::dump_rows(repo.database()).unwrap());
}

#[test]
fn unreachable_preparation_pages_are_removed_and_every_snapshot_reads_identically() {
    let e = env();
    workload(&e);
    let natural = pages(&e.repo);
    abandoned_pages(&e.repo, 40);
    let before = listings(&e);
    let r = reclaim_snapshot_pages(&e.repo, &|_| {}).unwrap();
    assert!(r.removed >= 40, "{r:?}");
    assert_eq!(r.pages, natural + 40);
    assert_eq!(pages(&e.repo), r.reachable);
    assert_eq!(r.reachable + r.removed, r.pages);
    assert_eq!(listings(&e), before);
    assert_doctor_clean(&e.repo);
    archive::verify(e.repo.archive().dir()).unwrap();
    assert_archive_rebuilds(&e.repo);
    assert!(!marks_path(&e.repo.dir().join("metadata.redb")).exists());
    // Nothing left to reclaim; history and outcomes stay.
    let again = reclaim_snapshot_pages(&e.repo, &|_| {}).unwrap();
    assert_eq!(again.removed, 0);
    assert_eq!(e.repo.head().unwrap(), 3);
    assert_eq!(e.repo.describe(2).unwrap().paths.len(), 300);
    // Writes continue on the reclaimed tree.
    commit(&e, vec![add(&e, "e.txt", 4)]);
    assert_doctor_clean(&e.repo);
}

#[test]
fn a_missing_root_is_refused_before_anything_is_swept() {
    let e = env();
    workload(&e);
    abandoned_pages(&e.repo, 10);
    let n = pages(&e.repo);
    {
        let tx = e.repo.database().begin_write().unwrap();
        tx.open_table(tables::SNAPSHOT_ROOTS)
            .unwrap()
            .remove(scribe_metadata::records::keys::root(&e.main, 2).as_slice())
            .unwrap();
        tx.commit().unwrap();
    }
    let err = reclaim_snapshot_pages(&e.repo, &|_| {})
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("root of accepted change 2") && err.contains("nothing was swept"),
        "{err}"
    );
    assert_eq!(pages(&e.repo), n);
}

/// Runs only inside the child process of the kill test: a reclamation that
/// parks after its first sweep batch.
#[test]
fn reclaim_kill_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let root = reopen(&dir);
    let repo = root.open_repository_by_name("game").unwrap();
    let marker = dir.join("parked");
    let _ = reclaim_snapshot_pages(&repo, &|at| {
        if at == "batch" {
            park(&marker);
        }
    });
    unreachable!("the parent kills this process while it sweeps");
}

#[test]
fn sigkill_mid_sweep_then_the_next_run_finishes() {
    let e = env();
    workload(&e);
    let stale = 2 * SWEEP_BATCH as u64 + 100;
    abandoned_pages(&e.repo, stale);
    let before = listings(&e);
    let total = pages(&e.repo);
    let data = e.root.dir().to_owned();
    let db = e.repo.dir().join("metadata.redb");
    let Env {
        dir: _keep,
        root,
        repo,
        ..
    } = e;
    drop(repo);
    drop(root);
    let marker = data.join("parked");
    kill_when_parked(
        module_path!(),
        "reclaim_kill_child",
        (CHILD_ENV, &data.display().to_string()),
        &marker,
        "batch",
    );
    assert!(marks_path(&db).exists(), "the mark set of the killed run");
    let root = reopen(&data);
    let repo = root.open_repository_by_name("game").unwrap();
    let left = pages(&repo);
    assert!(left < total && left > total - stale, "{left} of {total}");
    archive::verify(repo.archive().dir()).unwrap();
    assert_doctor_clean(&repo);
    let r = reclaim_snapshot_pages(&repo, &|_| {}).unwrap();
    assert!(r.removed >= stale - SWEEP_BATCH as u64, "{r:?}");
    assert!(!marks_path(&db).exists());
    assert_doctor_clean(&repo);
    assert_archive_rebuilds(&repo);
    let head = repo.head().unwrap();
    let main = repo.main_branch();
    let after: Vec<String> = (0..=head)
        .map(|c| format!("{:?}", repo.list(main, c, "", true, None, 1 << 20).unwrap()))
        .collect();
    assert_eq!(after, before);
}

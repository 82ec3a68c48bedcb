//! Offline consolidation of a recovery archive into a logical base, and
//! relocation of an archive, on real files and real processes: the base
//! plus later frames rebuild exactly the database; covered outbox rows,
//! segments and bases are pruned; SIGKILL at every step leaves an archive
//! that verifies and recovers and a next run that finishes; a damaged base
//! or `BASE` is refused with the file and byte offset.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use redb::{Database, ReadableDatabase, ReadableTableMetadata};
use scribe_format::recovery as rj;
use scribe_format::recovery_base as rb;
use scribe_format::ErrorCode;
use scribe_metadata::consolidate::{consolidate, relocate};
use scribe_metadata::{archive, journal, Repository};

use super::journal::workload;
use super::support::*;

fn archive_dir(repo: &Repository) -> PathBuf {
    repo.dir().join("metadata.recovery")
}

fn profile(repo: &Repository) -> journal::Profile {
    let tx = repo.database().begin_read().unwrap();
    journal::check_profile(&tx, Path::new("m")).unwrap()
}

fn outbox_rows(repo: &Repository) -> u64 {
    let tx = repo.database().begin_read().unwrap();
    tx.open_table(journal::RECORDS).unwrap().len().unwrap()
}

/// Rebuild from the archive alone into a fresh file and compare every
/// journaled row with the live database.
fn assert_recovers_exactly(repo: &Repository) -> journal::Replayed {
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("metadata.redb");
    let done = archive::recover(&archive_dir(repo), &target).unwrap();
    let rebuilt = journal::dump_rows(&Database::open(&target).unwrap()).unwrap();
    assert_eq!(rebuilt, journal::dump_rows(repo.database()).unwrap());
    done
}

#[test]
fn a_base_plus_later_frames_rebuild_the_database_and_the_outbox_is_released() {
    let e = env();
    workload(&e);
    let dir = archive_dir(&e.repo);
    let before = profile(&e.repo);
    assert!(outbox_rows(&e.repo) > 50);
    let c = consolidate(e.repo.archive()).unwrap();
    assert!(c.wrote_base);
    assert_eq!(c.end, before.end);
    assert!(c.tables >= 5 && c.rows >= 80, "{c:?}");
    let after = profile(&e.repo);
    assert_eq!((after.floor, after.end), (before.end, before.end));
    assert_eq!(outbox_rows(&e.repo), 0);
    assert_eq!(c.outbox_removed, before.end - before.floor);
    assert!(dir.join(rb::base_file_name(before.end)).is_file());
    let v = archive::verify(&dir).unwrap();
    assert_eq!(v.base, Some(before.end));
    assert_recovers_exactly(&e.repo);

    // Nothing new: the second run writes no base.
    let again = consolidate(e.repo.archive()).unwrap();
    assert!(!again.wrote_base);
    assert_eq!(again.outbox_removed, 0);

    // Writes go on after the base; recovery = base + the later frames.
    let c2 = commit(&e, vec![add(&e, "after/base.txt", 7)]);
    e.repo.add_change_note(c2, "ada", "later").unwrap();
    assert!(outbox_rows(&e.repo) > 0);
    let done = assert_recovers_exactly(&e.repo);
    assert_eq!(done.end, profile(&e.repo).end);

    // The metadata volume is lost: the rebuilt file serves, doctor clean.
    let Env {
        root,
        repo,
        dir: tmp,
        ..
    } = e;
    let repo_dir = repo.dir().to_owned();
    let head = repo.head().unwrap();
    drop(repo);
    drop(root);
    std::fs::remove_file(repo_dir.join("metadata.redb")).unwrap();
    archive::recover(
        &repo_dir.join("metadata.recovery"),
        &repo_dir.join("metadata.redb"),
    )
    .unwrap();
    let root = reopen(&tmp.path().join("data"));
    let repo = root.open_repository_by_name("game").unwrap();
    assert_eq!(repo.head().unwrap(), head);
    assert_doctor_clean(&repo);
    repo.add_change_note(c2, "bob", "after recovery").unwrap();
    archive::verify(&repo_dir.join("metadata.recovery")).unwrap();
}

#[test]
fn consolidation_prunes_covered_segments_and_older_bases() {
    let e = env();
    let dir = archive_dir(&e.repo);
    let c = commit(&e, vec![add(&e, "a", 1)]);
    let first = consolidate(e.repo.archive()).unwrap();
    // Notes of 60,000 bytes until the archive rolls to segment 2.
    let text = "x".repeat(60_000);
    let start = Instant::now();
    while archive::read_head(&dir).unwrap().segment == 1 {
        e.repo.add_change_note(c, "ada", &text).unwrap();
        assert!(start.elapsed() < Duration::from_secs(600));
    }
    e.repo.add_change_note(c, "ada", "in segment 2").unwrap();
    let second = consolidate(e.repo.archive()).unwrap();
    assert!(second.wrote_base);
    assert_eq!(second.segments_pruned, 1, "{second:?}");
    assert_eq!(second.bases_pruned, 1, "{second:?}");
    assert!(!dir.join(rj::segment_file_name(1)).exists());
    assert!(!dir.join(rb::base_file_name(first.end)).exists());
    assert!(dir.join(rj::segment_file_name(2)).exists());
    let v = archive::verify(&dir).unwrap();
    assert_eq!(v.base, Some(second.end));
    assert_eq!(v.segments, 1);
    // The active segment's prefix is kept; recovery skips what it covers.
    e.repo
        .add_change_note(c, "bob", "after the second base")
        .unwrap();
    assert_recovers_exactly(&e.repo);
}

#[test]
fn a_damaged_base_or_pointer_is_refused_with_file_and_offset() {
    let e = env();
    workload(&e);
    let dir = archive_dir(&e.repo);
    let c = consolidate(e.repo.archive()).unwrap();
    let base = dir.join(rb::base_file_name(c.end));
    let good = std::fs::read(&base).unwrap();
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("m.redb");

    // A flipped byte inside a row.
    let mut bad = good.clone();
    bad[good.len() / 2] ^= 0x02;
    std::fs::write(&base, &bad).unwrap();
    let err = archive::verify(&dir).unwrap_err().to_string();
    assert!(err.contains(&rb::base_file_name(c.end)), "{err}");
    assert!(err.contains("at byte"), "{err}");
    assert!(archive::recover(&dir, &target).is_err());
    assert!(!target.exists() && !journal::quarantine_path(&target).exists());

    // Truncated.
    std::fs::write(&base, &good[..good.len() - 40]).unwrap();
    let err = archive::verify(&dir).unwrap_err().to_string();
    assert!(err.contains(&rb::base_file_name(c.end)), "{err}");

    // A well-formed base of the same database and end but other rows:
    // the digest BASE records refuses it.
    let forged = rb::encode_base(
        rb::BaseHeader {
            identity: archive::read_head(&dir).unwrap().identity,
            end: c.end,
        },
        &[],
    )
    .unwrap();
    std::fs::write(&base, &forged).unwrap();
    let err = archive::verify(&dir).unwrap_err().to_string();
    assert!(err.contains("digest BASE records"), "{err}");
    assert!(archive::recover(&dir, &target).is_err());
    std::fs::write(&base, &good).unwrap();
    archive::verify(&dir).unwrap();
    // A flipped byte in BASE.
    let pointer = std::fs::read(dir.join("BASE")).unwrap();
    let mut p = pointer.clone();
    p[120] ^= 1;
    std::fs::write(dir.join("BASE"), &p).unwrap();
    let err = archive::verify(&dir).unwrap_err().to_string();
    assert!(err.contains("BASE"), "{err}");
    assert!(err.contains("checksum"), "{err}");
    // A missing base file.
    std::fs::write(dir.join("BASE"), &pointer).unwrap();
    std::fs::remove_file(&base).unwrap();
    let err = archive::recover(&dir, &target).unwrap_err().to_string();
    assert!(err.contains(&rb::base_file_name(c.end)), "{err}");
    std::fs::write(&base, &good).unwrap();
    assert_recovers_exactly(&e.repo);
}

#[test]
fn relocation_copies_verifies_and_selects_a_new_directory() {
    let e = env();
    workload(&e);
    consolidate(e.repo.archive()).unwrap();
    let c = commit(&e, vec![add(&e, "x", 9)]);
    let old = archive_dir(&e.repo);
    let db_path = e.repo.dir().join("metadata.redb");
    let Env {
        root,
        repo,
        dir: tmp,
        ..
    } = e;
    drop(repo);
    drop(root);
    // Refusals: relative, non-empty.
    let err = relocate(&db_path, Path::new("relative/dir")).unwrap_err();
    assert_eq!(err.code(), ErrorCode::Usage, "{err}");
    let busy = tmp.path().join("busy");
    std::fs::create_dir(&busy).unwrap();
    std::fs::write(busy.join("x"), b"x").unwrap();
    let err = relocate(&db_path, &busy).unwrap_err();
    assert_eq!(err.code(), ErrorCode::AlreadyExists, "{err}");

    let to = tmp.path().join("second-volume/archive");
    let r = relocate(&db_path, &to).unwrap();
    assert_eq!(r.from, old);
    assert!(r.files >= 3, "{r:?}");
    assert_eq!(
        std::fs::read_to_string(db_path.with_extension("recovery-location")).unwrap(),
        to.to_str().unwrap()
    );
    let old_head = archive::read_head(&old).unwrap();
    let root = reopen(&tmp.path().join("data"));
    let repo = root.open_repository_by_name("game").unwrap();
    assert_eq!(repo.archive().dir(), to);
    repo.add_change_note(c, "ada", "into the new directory")
        .unwrap();
    assert_eq!(
        archive::read_head(&old).unwrap(),
        old_head,
        "old kept as is"
    );
    assert!(archive::read_head(&to).unwrap().end > old_head.end);
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("m.redb");
    archive::recover(&to, &target).unwrap();
    assert_eq!(
        journal::dump_rows(&Database::open(&target).unwrap()).unwrap(),
        journal::dump_rows(repo.database()).unwrap()
    );
}

const CHILD_ENV: &str = "SCRIBE_CONSOLIDATE_KILL_CHILD";

/// Runs only inside the child process the SIGKILL test spawns: a
/// consolidation that parks at the step named by the environment.
#[test]
fn consolidate_kill_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (dir, step) = spec.split_once('|').unwrap();
    let dir = PathBuf::from(dir);
    let root = reopen(&dir);
    let repo = root.open_repository_by_name("game").unwrap();
    let marker = dir.join("parked");
    let step: &'static str = Box::leak(step.to_owned().into_boxed_str());
    repo.archive().set_hook(Some(Box::new(move |at| {
        if at == step {
            park(&marker);
        }
        Ok(())
    })));
    let _ = consolidate(repo.archive());
    unreachable!("the parent kills this process while it consolidates");
}

#[test]
fn sigkill_at_each_step_of_consolidation_leaves_a_recoverable_archive() {
    for step in ["base", "pointer", "floor", "pruned"] {
        let e = env();
        workload(&e);
        // A first base, so that the killed run also has one to replace.
        consolidate(e.repo.archive()).unwrap();
        let c = commit(&e, vec![add(&e, "second.txt", 3)]);
        e.repo.add_change_note(c, "ada", "before the kill").unwrap();
        let data = e.root.dir().to_owned();
        let repo_dir = e.repo.dir().to_owned();
        let want = journal::dump_rows(e.repo.database()).unwrap();
        let Env { root, repo, .. } = e;
        drop(repo);
        drop(root);
        let marker = data.join("parked");
        kill_when_parked(
            module_path!(),
            "consolidate_kill_child",
            (CHILD_ENV, &format!("{}|{step}", data.display())),
            &marker,
            step,
        );
        std::fs::remove_file(&marker).unwrap();
        let dir = repo_dir.join("metadata.recovery");
        archive::verify(&dir).unwrap_or_else(|e| panic!("{step}: {e}"));
        // The archive alone rebuilds exactly what was committed.
        let out = tempfile::tempdir().unwrap();
        let target = out.path().join("m.redb");
        archive::recover(&dir, &target).unwrap_or_else(|e| panic!("{step}: {e}"));
        assert_eq!(
            journal::dump_rows(&Database::open(&target).unwrap()).unwrap(),
            want,
            "{step}"
        );
        // The next run finishes: one base, floor at the end, empty outbox.
        let root = reopen(&data);
        let repo = root.open_repository_by_name("game").unwrap();
        consolidate(repo.archive()).unwrap();
        let p = profile(&repo);
        assert_eq!(p.floor, p.end, "{step}");
        assert_eq!(outbox_rows(&repo), 0, "{step}");
        let bases = std::fs::read_dir(&dir)
            .unwrap()
            .filter(|e| {
                let n = e.as_ref().unwrap().file_name();
                // HEAD.tmp is the reused cursor file (Linux), not a
                // leftover of an interrupted run.
                n.to_str().is_some_and(|n| {
                    n.ends_with(".scrb") || (n.ends_with(".tmp") && n != "HEAD.tmp")
                })
            })
            .count();
        assert_eq!(bases, 1, "{step}");
        assert_doctor_clean(&repo);
        assert_recovers_exactly(&repo);
    }
}

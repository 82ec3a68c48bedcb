//! The independent recovery archive on real files and real processes:
//! every acknowledged write is in `metadata.recovery` before the call
//! returns; the archive alone rebuilds a deleted `metadata.redb`; an
//! unwritable archive fences writes while reads keep working; SIGKILL at
//! each step of publication loses nothing acknowledged; torn tails are
//! replaced and corruption is refused with the file and byte offset.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use redb::Database;
use scribe_format::recovery::{self as rj, ArchiveHead};
use scribe_format::ErrorCode;
use scribe_metadata::archive;
use scribe_metadata::journal;
use scribe_metadata::{MetadataError, Repository};

use super::journal::workload;
use super::support::*;

fn archive_dir(repo: &Repository) -> PathBuf {
    repo.dir().join("metadata.recovery")
}

fn db_end(repo: &Repository) -> u64 {
    let tx = redb::ReadableDatabase::begin_read(repo.database()).unwrap();
    journal::check_profile(&tx, Path::new("m")).unwrap().end
}

#[test]
fn every_acknowledged_write_is_archived_and_the_archive_alone_rebuilds_the_database() {
    let e = env();
    let dir = archive_dir(&e.repo);
    // Creation published the zero position then the creation transaction.
    let head = archive::read_head(&dir).unwrap();
    assert_eq!(head.segment, 1);
    assert_eq!(head.end, db_end(&e.repo));
    workload(&e);
    // Each call returned after its publication: HEAD is at the database end.
    let head = archive::read_head(&dir).unwrap();
    assert_eq!(head.end, db_end(&e.repo));
    assert_eq!(e.repo.archive().head(), head);
    let v = archive::verify(&dir).unwrap();
    assert!(v.frames >= 10, "{v:?}");
    assert!(dir.join("00000000000000000001.journal").is_file());

    let original = journal::dump_rows(e.repo.database()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("metadata.redb");
    let done = archive::recover(&dir, &target).unwrap();
    assert_eq!(done.end, head.end);
    // The streamed acceptance's stage rows were checked, not applied: its
    // stage table is dropped later in the journal.
    assert!(done.skipped > 0 && done.skipped < done.records, "{done:?}");
    let rebuilt = journal::dump_rows(&Database::open(&target).unwrap()).unwrap();
    assert_eq!(rebuilt, original);

    // Delete metadata.redb outright; rebuild it from the archive; serve.
    let Env {
        root,
        repo,
        dir: tmp,
        ..
    } = e;
    let repo_dir = repo.dir().to_owned();
    let head_change = repo.head().unwrap();
    drop(repo);
    drop(root);
    std::fs::remove_file(repo_dir.join("metadata.redb")).unwrap();
    archive::recover(
        &repo_dir.join("metadata.recovery"),
        &repo_dir.join("metadata.redb"),
    )
    .unwrap();
    let root = reopen(&tmp.path().join("data"));
    let id = root.list_repositories().unwrap()[0].id;
    let repo = root.open_repository(id).unwrap();
    assert_eq!(repo.head().unwrap(), head_change);
    assert_doctor_clean(&repo);
    // Writes continue the same archive chain.
    repo.add_change_note(1, "ada", "after recovery").unwrap();
    archive::verify(&repo_dir.join("metadata.recovery")).unwrap();
    assert_eq!(
        archive::read_head(&repo_dir.join("metadata.recovery"))
            .unwrap()
            .end,
        db_end(&repo)
    );
}

#[test]
fn concurrent_writers_return_only_once_their_own_records_are_archived() {
    let e = env();
    workload(&e);
    let dir = archive_dir(&e.repo);
    let repo = e.repo.clone();
    std::thread::scope(|s| {
        for t in 0..6 {
            let repo = repo.clone();
            let dir = dir.clone();
            s.spawn(move || {
                for i in 0..15 {
                    let before = db_end(&repo);
                    repo.add_change_note(1, "ada", &format!("note {t}/{i}"))
                        .unwrap();
                    // This write's records lie beyond `before`; HEAD on disk
                    // covers them before the call returns, however the
                    // publications of the six writers interleaved.
                    let head = archive::read_head(&dir).unwrap();
                    assert!(
                        head.end > before,
                        "writer {t} returned at HEAD {} with records beyond {before}",
                        head.end
                    );
                }
            });
        }
    });
    let head = archive::read_head(&dir).unwrap();
    assert_eq!(head.end, db_end(&e.repo));
    assert_eq!(e.repo.archive().head(), head);
    let v = archive::verify(&dir).unwrap();
    assert_eq!(v.head, head);
    assert_doctor_clean(&e.repo);
}

#[test]
fn head_is_replaced_whatever_head_tmp_holds() {
    let e = env();
    let dir = archive_dir(&e.repo);
    let tmp = dir.join("HEAD.tmp");
    // A leftover cursor of another length (a crash while it was created),
    // then a directory in its place: neither is read as HEAD; the first is
    // replaced, the second fences writes by name and reads keep working.
    std::fs::write(&tmp, b"torn").unwrap();
    workload(&e);
    let head = archive::read_head(&dir).unwrap();
    assert_eq!(head.end, db_end(&e.repo));
    // The leftover was replaced: renamed over HEAD, or (Linux) reused
    // and exchanged with HEAD, after which it holds an older cursor.
    if let Ok(left) = std::fs::read(&tmp) {
        let older = scribe_format::recovery::ArchiveHead::decode(&left).unwrap();
        assert!(older.end < head.end, "{older:?} {head:?}");
    }
    std::fs::remove_file(&tmp).ok();
    std::fs::create_dir(&tmp).unwrap();
    let err = e.repo.add_change_note(1, "ada", "two").unwrap_err();
    assert_eq!(err.code(), ErrorCode::ArchiveUnavailable, "{err}");
    assert!(err.to_string().contains("metadata.recovery"), "{err}");
    assert_eq!(archive::read_head(&dir).unwrap(), head);
    archive::verify(&dir).unwrap();
}

#[test]
fn an_unwritable_archive_fences_writes_and_reads_keep_working() {
    let e = env();
    let c1 = commit(&e, vec![add(&e, "a.txt", 1)]);
    let dir = archive_dir(&e.repo);
    let before = archive::read_head(&dir).unwrap();
    // The archive directory becomes unwritable: replaced by a plain file
    // (this holds even for root, which ignores permission bits).
    let moved = e.dir.path().join("moved-archive");
    std::fs::rename(&dir, &moved).unwrap();
    std::fs::write(&dir, b"not a directory").unwrap();
    let b = submission(&e, vec![add(&e, "b.txt", 2)]);
    let err = e.repo.submit(b.clone()).unwrap_err();
    assert_eq!(err.code(), ErrorCode::ArchiveUnavailable, "{err}");
    assert!(err.to_string().contains("metadata.recovery"), "{err}");
    // The acceptance committed but was never archived: its retry finds the
    // outcome and must not acknowledge it either (retries cross the
    // barrier too).
    for retry in [
        e.repo.submit(b.clone()).map(|_| ()),
        e.repo.submit_group(vec![b.clone()]).map(|_| ()),
    ] {
        let err = retry.unwrap_err();
        assert_eq!(err.code(), ErrorCode::ArchiveUnavailable, "{err}");
    }
    // Every later write is fenced, before touching the database.
    let end = db_end(&e.repo);
    let err = e.repo.add_change_note(c1, "ada", "note").unwrap_err();
    assert_eq!(err.code(), ErrorCode::ArchiveUnavailable, "{err}");
    let err = e
        .repo
        .lock(&["a.txt".into()], e.ws, e.main, "ada")
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::ArchiveUnavailable, "{err}");
    assert_eq!(db_end(&e.repo), end, "fenced writes record nothing");
    // Reads keep working.
    assert!(e.repo.head().unwrap() >= c1);
    assert_doctor_clean(&e.repo);
    // Restart with the archive back: startup drains the surviving outbox
    // (the unacknowledged acceptance included) into the archive.
    std::fs::remove_file(&dir).unwrap();
    std::fs::rename(&moved, &dir).unwrap();
    let Env {
        root,
        repo,
        dir: tmp,
        ..
    } = e;
    drop(repo);
    drop(root);
    let root = reopen(&tmp.path().join("data"));
    let repo = root.open_repository_by_name("game").unwrap();
    let after = archive::read_head(&dir).unwrap();
    assert!(after.end > before.end);
    assert_eq!(after.end, db_end(&repo));
    archive::verify(&dir).unwrap();
    repo.add_change_note(c1, "ada", "writes again").unwrap();
}

#[test]
fn startup_requires_a_matching_archive() {
    let e = env();
    let other = env();
    let dir = archive_dir(&e.repo);
    let Env {
        root,
        repo,
        dir: tmp,
        ..
    } = e;
    let repo_dir = repo.dir().to_owned();
    drop(repo);
    drop(root);
    // Missing: refused, never initialised.
    let aside = tmp.path().join("aside");
    std::fs::rename(&dir, &aside).unwrap();
    let objects = || -> scribe_metadata::Objects {
        scribe_metadata::DirObjects::open(&repo_dir.join("objects/interim")).unwrap()
    };
    let err = Repository::open_dir(&repo_dir, objects()).err().unwrap();
    assert!(
        matches!(err, MetadataError::RecoveryProfileMissing { .. }),
        "{err}"
    );
    assert!(!dir.exists(), "startup created no archive");
    // Another database's archive: refused.
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy(archive_dir(&other.repo).join("HEAD"), dir.join("HEAD")).unwrap();
    let err = Repository::open_dir(&repo_dir, objects()).err().unwrap();
    assert_eq!(err.code(), ErrorCode::Corrupt, "{err}");
    // A flipped HEAD: refused naming the file.
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::rename(&aside, &dir).unwrap();
    let mut head = std::fs::read(dir.join("HEAD")).unwrap();
    head[30] ^= 1;
    std::fs::write(dir.join("HEAD"), &head).unwrap();
    let err = Repository::open_dir(&repo_dir, objects()).err().unwrap();
    assert!(err.to_string().contains("HEAD"), "{err}");
    assert!(err.to_string().contains("checksum"), "{err}");
    // A `.recovery-location` selects another (absolute) directory.
    head[30] ^= 1;
    std::fs::write(dir.join("HEAD"), &head).unwrap();
    let elsewhere = tmp.path().join("second-volume");
    std::fs::rename(&dir, &elsewhere).unwrap();
    std::fs::write(
        repo_dir.join("metadata.recovery-location"),
        elsewhere.to_str().unwrap(),
    )
    .unwrap();
    let repo = Repository::open_dir(&repo_dir, objects()).unwrap();
    assert_eq!(repo.archive().dir(), elsewhere);
    drop(repo);
    std::fs::write(repo_dir.join("metadata.recovery-location"), "relative/dir").unwrap();
    let err = Repository::open_dir(&repo_dir, objects()).err().unwrap();
    assert!(err.to_string().contains("not absolute"), "{err}");
}

#[test]
fn torn_tails_are_replaced_and_corruption_is_refused_with_file_and_offset() {
    let e = env();
    commit(&e, vec![add(&e, "a", 1)]);
    let dir = archive_dir(&e.repo);
    let head = archive::read_head(&dir).unwrap();
    let seg = dir.join(rj::segment_file_name(head.segment));
    // An unpublished tail (a crash after a partial frame write).
    let mut f = std::fs::OpenOptions::new().append(true).open(&seg).unwrap();
    std::io::Write::write_all(&mut f, &[0xAB; 300]).unwrap();
    drop(f);
    archive::verify(&dir).unwrap(); // bytes beyond HEAD are not read
    commit(&e, vec![add(&e, "b", 2)]);
    let v = archive::verify(&dir).unwrap();
    let len = std::fs::metadata(&seg).unwrap().len();
    assert_eq!(
        len, v.head.offset,
        "the tail was replaced by the next frame"
    );

    // A flipped bit inside a published frame.
    let good = std::fs::read(&seg).unwrap();
    let mut bad = good.clone();
    let at = head.offset as usize + 100;
    bad[at] ^= 0x04;
    std::fs::write(&seg, &bad).unwrap();
    let err = archive::verify(&dir).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("00000000000000000001.journal: at byte"),
        "{text}"
    );
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("m.redb");
    assert!(archive::recover(&dir, &target).is_err());
    assert!(!target.exists() && !journal::quarantine_path(&target).exists());
    // A truncated published segment.
    std::fs::write(&seg, &good[..good.len() - 10]).unwrap();
    let err = archive::verify(&dir).unwrap_err();
    assert!(err.to_string().contains("journal"), "{err}");
    std::fs::write(&seg, &good).unwrap();
    archive::verify(&dir).unwrap();
}

#[test]
fn segments_roll_after_the_target_size() {
    let e = env();
    let dir = archive_dir(&e.repo);
    let head = archive::read_head(&dir).unwrap();
    assert!(head.offset < rj::SEGMENT_ROLL_BYTES);
    // Notes of 60,000 bytes, one frame each, until the archive rolls.
    let c = commit(&e, vec![add(&e, "a", 1)]);
    let text = "x".repeat(60_000);
    let start = Instant::now();
    let mut n = 0;
    while archive::read_head(&dir).unwrap().segment == 1 {
        e.repo.add_change_note(c, "ada", &text).unwrap();
        n += 1;
        assert!(n < 2_000 && start.elapsed() < Duration::from_secs(600));
    }
    let first = std::fs::metadata(dir.join(rj::segment_file_name(1)))
        .unwrap()
        .len();
    assert!(first >= rj::SEGMENT_ROLL_BYTES, "rolled at {first}");
    assert!(
        first < rj::SEGMENT_ROLL_BYTES + 200_000,
        "rolled late at {first}"
    );
    let v = archive::verify(&dir).unwrap();
    assert_eq!(v.segments, 2);
    let out = tempfile::tempdir().unwrap();
    archive::recover(&dir, &out.path().join("m.redb")).unwrap();
}

const CHILD_ENV: &str = "SCRIBE_ARCHIVE_KILL_CHILD";

/// Runs only inside the child process the SIGKILL test spawns: one
/// acknowledged submit (then the file `acked`), then a second submit whose
/// archive publication parks at the step named by the environment.
#[test]
fn an_unpublished_tail_is_cut_off_when_its_segment_is_left_behind() {
    let e = env();
    let dir = archive_dir(&e.repo);
    let c = commit(&e, vec![add(&e, "a", 1)]);
    let text = "x".repeat(60_000);
    // Fill segment 1 until the next publication rolls.
    while archive::read_head(&dir).unwrap().offset < rj::SEGMENT_ROLL_BYTES {
        e.repo.add_change_note(c, "ada", &text).unwrap();
    }
    let head = archive::read_head(&dir).unwrap();
    assert_eq!(head.segment, 1);
    // A crash after a frame flush, before HEAD. This build puts that frame
    // in segment 2; a writer that appended it to the full segment (or a
    // copy that kept it there) leaves it as a tail of segment 1 beyond
    // HEAD: a complete frame chained from HEAD, which readers of a
    // left-behind segment would take as published.
    e.repo.archive().set_hook(Some(Box::new(|at| match at {
        "frame" => Err(std::io::Error::other("crash after the frame")),
        _ => Ok(()),
    })));
    e.repo.add_change_note(c, "ada", "lost").unwrap_err();
    let seg1 = dir.join(rj::segment_file_name(1));
    let seg2 = dir.join(rj::segment_file_name(2));
    let frame = std::fs::read(&seg2).unwrap();
    std::fs::remove_file(&seg2).unwrap();
    let mut bytes = std::fs::read(&seg1).unwrap();
    bytes.extend_from_slice(&frame);
    std::fs::write(&seg1, &bytes).unwrap();
    let tail = bytes.len() as u64;
    // Restart: startup drains the outbox into segment 2.
    let (_tmp, _root, repo) = restart(e);
    let now = archive::read_head(&dir).unwrap();
    assert_eq!(now.segment, 2);
    assert!(tail > head.offset, "the failed publication left a tail");
    assert_eq!(std::fs::metadata(&seg1).unwrap().len(), head.offset);
    repo.add_change_note(c, "ada", "after").unwrap();
    let v = archive::verify(&dir).unwrap();
    assert_eq!(v.head.end, db_end(&repo));
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("m.redb");
    archive::recover(&dir, &target).unwrap();
    let rebuilt = journal::dump_rows(&Database::open(&target).unwrap()).unwrap();
    assert_eq!(rebuilt, journal::dump_rows(repo.database()).unwrap());
}

#[test]
fn archive_kill_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (dir, step) = spec.split_once('|').unwrap();
    let dir = PathBuf::from(dir);
    let root = reopen(&dir);
    let repo = root.open_repository_by_name("game").unwrap();
    let objects = scribe_metadata::DirObjects::open(&repo.dir().join("objects/interim")).unwrap();
    let main = repo.main_branch();
    let e = Env {
        dir: tempfile::tempdir().unwrap(),
        root,
        repo,
        objects,
        main,
        ws: scribe_format::WorkspaceId::random(),
    };
    let first = commit(&e, vec![add(&e, "acked.txt", 5)]);
    std::fs::write(dir.join("acked"), first.to_string()).unwrap();
    let marker = dir.join("parked");
    let step: &'static str = Box::leak(step.to_owned().into_boxed_str());
    e.repo.archive().set_hook(Some(Box::new(move |at| {
        if at == step {
            park(&marker);
        }
        Ok(())
    })));
    let _ = e
        .repo
        .submit(submission(&e, vec![add(&e, "unacked.txt", 6)]));
    unreachable!("the parent kills this process while it publishes");
}

#[test]
fn sigkill_at_each_step_of_publication_loses_nothing_acknowledged() {
    for step in ["committed", "frame", "head"] {
        let e = env();
        let data = e.root.dir().to_owned();
        let repo_dir = e.repo.dir().to_owned();
        let Env {
            dir: tmp,
            root,
            repo,
            ..
        } = e;
        drop(repo);
        drop(root);
        kill_when_parked(
            module_path!(),
            "archive_kill_child",
            (CHILD_ENV, &format!("{}|{step}", data.display())),
            &data.join("parked"),
            step,
        );
        let acked: u64 = std::fs::read_to_string(data.join("acked"))
            .unwrap()
            .parse()
            .unwrap();
        let dir = repo_dir.join("metadata.recovery");
        let head = archive::read_head(&dir).unwrap();
        archive::verify(&dir).unwrap();

        // Keep the state the kill left, for the second scenario.
        let saved = tmp.path().join("saved");
        std::fs::create_dir(&saved).unwrap();
        std::fs::copy(repo_dir.join("metadata.redb"), saved.join("metadata.redb")).unwrap();
        copy_dir(&dir, &saved.join("metadata.recovery"));

        // The metadata volume is lost: the archive alone brings back every
        // acknowledged change.
        std::fs::remove_file(repo_dir.join("metadata.redb")).unwrap();
        let done = archive::recover(&dir, &repo_dir.join("metadata.redb")).unwrap();
        assert_eq!(done.end, head.end);
        {
            let root = reopen(&data);
            let repo = root.open_repository_by_name("game").unwrap();
            assert_doctor_clean(&repo);
            // The unacknowledged submit is in the archive only once HEAD
            // was renamed.
            let want = if step == "head" { acked + 1 } else { acked };
            assert_eq!(repo.head().unwrap(), want, "{step}");
        }

        // The database survives instead: startup drains its outbox, so the
        // committed (unacknowledged) acceptance reaches the archive too.
        std::fs::remove_file(repo_dir.join("metadata.redb")).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::copy(saved.join("metadata.redb"), repo_dir.join("metadata.redb")).unwrap();
        copy_dir(&saved.join("metadata.recovery"), &dir);
        let root = reopen(&data);
        let repo = root.open_repository_by_name("game").unwrap();
        assert_eq!(
            repo.head().unwrap(),
            acked + 1,
            "{step}: the database kept it"
        );
        let after: ArchiveHead = archive::read_head(&dir).unwrap();
        assert_eq!(after.end, db_end(&repo));
        archive::verify(&dir).unwrap();
        assert_doctor_clean(&repo);
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

#[test]
fn a_deleted_catalog_is_rebuilt_from_its_archive() {
    let e = env();
    e.root.create_repository("second").unwrap();
    let data = e.root.dir().to_owned();
    let before = e.root.list_repositories().unwrap();
    let Env {
        root,
        repo,
        dir: _keep,
        ..
    } = e;
    drop(repo);
    drop(root);
    archive::verify(&data.join("catalog.recovery")).unwrap();
    std::fs::remove_file(data.join("catalog.redb")).unwrap();
    let done = scribe_metadata::root::recover_catalog(&data).unwrap();
    assert!(done.transactions >= 5, "{done:?}");
    let root = reopen(&data);
    assert_eq!(root.list_repositories().unwrap(), before);
    root.open_repository_by_name("second").unwrap();
    // A second recovery refuses to replace the rebuilt catalog.
    drop(root);
    let err = scribe_metadata::root::recover_catalog(&data).unwrap_err();
    assert_eq!(err.code(), ErrorCode::AlreadyExists);
}

/// Commit one journaled row with `durability`, outside the archive (its
/// records wait beyond `HEAD` for the next publication).
fn test_row(repo: &Repository, key: &str, durability: redb::Durability) {
    let mut tx = journal::begin(repo.database()).unwrap();
    tx.set_durability(durability).unwrap();
    tx.open_table(redb::TableDefinition::<&str, &[u8]>::new("test_rows"))
        .unwrap()
        .insert(key, b"v".as_slice())
        .unwrap();
    tx.commit().unwrap();
}

/// Records of an unflushed commit (`Durability::None`, as a streamed
/// preparation's staging transactions between two flushed ones) are not
/// archived until a flush covers them: publishing what is flushed leaves
/// `HEAD` at the durable end, and `publish` first commits an empty flushed
/// transaction, then archives them. A flushed commit after an unflushed one
/// makes both durable (redb's flush carries every earlier commit).
#[test]
fn records_of_an_unflushed_commit_are_archived_only_once_flushed() {
    let e = env();
    let a = e.repo.archive();
    let before = db_end(&e.repo);
    assert_eq!((a.head().end, a.durable_end()), (before, before));

    let unflushed = |key: &str| test_row(&e.repo, key, redb::Durability::None);
    unflushed("a");
    let end = db_end(&e.repo);
    assert!(end > before);
    assert_eq!(
        a.durable_end(),
        before,
        "an unflushed commit counted as durable"
    );
    a.publish_flushed().unwrap();
    assert_eq!(a.head().end, before, "an unflushed record was archived");
    a.publish().unwrap();
    assert_eq!((a.head().end, a.durable_end()), (end, end));
    assert_eq!(archive::read_head(&archive_dir(&e.repo)).unwrap().end, end);

    // An ordinary (flushed, archived) write after an unflushed one.
    unflushed("b");
    commit(&e, vec![add(&e, "after.txt", 3)]);
    let end = db_end(&e.repo);
    assert_eq!((a.head().end, a.durable_end()), (end, end));
    assert_doctor_clean(&e.repo);
}

/// A write begins and commits while a publication holds the archive's
/// state (its segment and `HEAD` flushes): only its own publication waits
/// for that one. Before, `begin_archived` read the fence and `HEAD`
/// under the state lock, so a streamed import's staging writer waited for
/// the publisher beside it (issue 19).
#[test]
fn a_write_commits_while_a_publication_is_in_progress() {
    use std::sync::mpsc;
    let e = env();
    // Records beyond HEAD for the publication to carry.
    test_row(&e.repo, "k", redb::Durability::Immediate);
    let (parked_tx, parked) = mpsc::channel::<()>();
    let (release_tx, release) = mpsc::channel::<()>();
    let release = std::sync::Mutex::new(release);
    let parked_tx = std::sync::Mutex::new(parked_tx);
    let once = std::sync::atomic::AtomicBool::new(false);
    e.repo.archive().set_hook(Some(Box::new(move |step| {
        // The first publication parks; the write's own passes.
        if step == "committed" && !once.swap(true, std::sync::atomic::Ordering::SeqCst) {
            let _ = parked_tx.lock().unwrap().send(());
            let _ = release
                .lock()
                .unwrap()
                .recv_timeout(Duration::from_secs(30));
        }
        Ok(())
    })));
    std::thread::scope(|scope| {
        let publication = scope.spawn(|| e.repo.archive().publish());
        parked
            .recv_timeout(Duration::from_secs(10))
            .expect("the publication never reached its hook");
        let before = db_end(&e.repo);
        let write = scope.spawn(|| commit(&e, vec![add(&e, "during.txt", 5)]));
        let start = Instant::now();
        while db_end(&e.repo) == before {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the write did not commit while the publication held the archive"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        release_tx.send(()).unwrap();
        publication.join().unwrap().unwrap();
        assert_eq!(write.join().unwrap(), 1);
    });
    e.repo.archive().set_hook(None);
    assert_eq!(e.repo.archive().head().end, db_end(&e.repo));
    assert_doctor_clean(&e.repo);
}

/// Unflushed records that cannot be made durable cannot be archived: the
/// flush's failure fences writes like a failed publication (reads keep
/// working), and a restart archives what the database holds.
#[test]
fn a_failed_flush_before_a_publication_fences_writes() {
    let e = env();
    test_row(&e.repo, "k", redb::Durability::None);
    let head = e.repo.archive().head();
    e.repo.archive().set_hook(Some(Box::new(|at| match at {
        "flush" => Err(std::io::Error::other("the disk is full")),
        _ => Ok(()),
    })));
    let err = e.repo.archive().publish().unwrap_err();
    assert_eq!(err.code(), ErrorCode::ArchiveUnavailable, "{err}");
    assert_eq!(e.repo.archive().head(), head, "published without a flush");
    e.repo.archive().set_hook(None);
    // Fenced until restart: a write is refused, a read is not.
    let refused = e
        .repo
        .submit(submission(&e, vec![add(&e, "refused.txt", 4)]))
        .unwrap_err();
    assert_eq!(refused.code(), ErrorCode::ArchiveUnavailable, "{refused}");
    assert_eq!(e.repo.head().unwrap(), 0);
    let (_tmp, _root, repo) = restart(e);
    assert_eq!(repo.archive().head().end, db_end(&repo));
    assert_doctor_clean(&repo);
}

//! `scribe-server checkpoint` and `recover --from-checkpoint` with real
//! processes (#16, seed 004 "Online checkpoints use manifest version 2"):
//! a chain of three checkpoints taken while serving restores exactly the
//! state at the last one; a checkpoint after consolidation raised the floor
//! above the previous cursor is full; a broken predecessor link, a flipped
//! byte and a missing file are refused by name and offset; a SIGKILLed
//! checkpoint leaves the earlier chain intact and the next run works.

use std::path::{Path, PathBuf};

use scribe_format::checkpoint::CheckpointManifest;
use scribe_metadata::checkpoint as ck;

use super::backup::{
    failed, head, kill_at, ok, run, s, serve, served_with_changes, stop, submit_one,
};

/// Every journaled table's rows.
type Tables = std::collections::BTreeMap<String, Vec<(Vec<u8>, Vec<u8>)>>;

fn repo_key(repo_dir: &Path) -> String {
    format!("repo-{}", repo_dir.file_name().unwrap().to_str().unwrap())
}

fn checkpoint(data: &Path, to: &Path) -> String {
    ok(&run(&["checkpoint", "--data", s(data), "--to", s(to)]))
}

/// The line `checkpoint` printed for `key`: `<key> full|incremental a..b n byte(s)`.
fn line<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(&format!("{key} ")))
        .unwrap_or_else(|| panic!("no line for {key} in {out}"))
}

fn manifest(to: &Path, n: u64, key: &str) -> CheckpointManifest {
    let bytes = std::fs::read(to.join(format!("{n:020}")).join(format!("{key}.ckpt"))).unwrap();
    CheckpointManifest::decode(&bytes).unwrap()
}

/// The rows of the database the archive of `db` rebuilds now.
fn archived_rows(db: &Path, scratch: &Path) -> Tables {
    let dir = scribe_metadata::archive::archive_dir(db).unwrap();
    scribe_metadata::archive::recover(&dir, scratch).unwrap();
    let rows =
        scribe_metadata::journal::dump_rows(&redb::Database::open(scratch).unwrap()).unwrap();
    std::fs::remove_file(scratch).unwrap();
    rows
}

fn rows_of(path: &Path) -> Tables {
    scribe_metadata::journal::dump_rows(&redb::Database::open(path).unwrap()).unwrap()
}

fn listen(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("run/listen"))
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn a_chain_of_three_checkpoints_taken_while_serving_restores_the_state_at_the_last() {
    let dir = tempfile::tempdir().unwrap();
    let (data, child, repo_dir, last) = served_with_changes(dir.path());
    let key = repo_key(&repo_dir);
    let to = dir.path().join("ckpt");
    let out = checkpoint(&data, &to);
    assert!(line(&out, &key).contains(" full 0.."), "{out}");
    assert!(line(&out, "catalog").contains(" full "), "{out}");
    let addr = listen(dir.path());
    assert_eq!(submit_one(&addr, 40, "two.bin"), last + 1);
    let out = checkpoint(&data, &to);
    assert!(line(&out, &key).contains(" incremental "), "{out}");
    // Nothing changed in the catalog: an empty incremental.
    assert!(line(&out, "catalog").contains(" 0 byte(s)"), "{out}");
    assert_eq!(submit_one(&addr, 41, "three.bin"), last + 2);
    let out = checkpoint(&data, &to);
    assert!(line(&out, &key).contains(" incremental "), "{out}");
    let m3 = manifest(&to, 3, &key);
    assert!(!m3.full);
    assert_eq!(m3.start, manifest(&to, 2, &key).end);
    // The state the archive holds at the third checkpoint.
    let db = repo_dir.join("metadata.redb");
    let at_third = archived_rows(&db, &dir.path().join("scratch.redb"));
    // Acknowledged after the last checkpoint: not in it.
    assert_eq!(submit_one(&addr, 42, "after.bin"), last + 3);
    stop(child, &dir.path().join("run"));

    let out = ok(&run(&[
        "checkpoint",
        "--data",
        s(&data),
        "--to",
        s(&to),
        "--verify",
    ]));
    assert!(out.contains(&format!("{key}: 3 manifest(s)")), "{out}");
    // The library restore is row for row the archive's state then.
    let rebuilt = dir.path().join("rebuilt.redb");
    let r = ck::restore_database(&to, 3, &key, &rebuilt).unwrap();
    assert_eq!(r.manifests, 3);
    assert_eq!(rows_of(&rebuilt), at_third);
    assert!(!dir.path().join("rebuilt.redb.replay").exists());

    // The data root loses its metadata volume's files and the archives.
    let catalog_rows = archived_rows(&data.join("catalog.redb"), &dir.path().join("c.redb"));
    for p in [
        db.clone(),
        data.join("catalog.redb"),
        data.join("auth-state.redb"),
    ] {
        let _ = std::fs::remove_file(&p);
        let _ = std::fs::remove_dir_all(scribe_metadata::archive::default_dir(&p));
    }
    // A surviving archive is refused first (it holds more): none here.
    let out = ok(&run(&[
        "recover",
        "--data",
        s(&data),
        "--from-checkpoint",
        s(&to),
    ]));
    assert!(out.contains(&format!("{key}: rebuilt")), "{out}");
    assert_eq!(rows_of(&data.join("catalog.redb")), catalog_rows);
    ok(&run(&["doctor", "--data", s(&data)]));
    ok(&run(&["archive", "verify", "--data", s(&data)]));
    assert_eq!(head(&data), last + 2);
    // Served again: writes continue after the checkpoint's head, and the
    // next checkpoint is full (a new journal identity).
    let (child, addr) = serve(&data, &dir.path().join("run2"));
    assert_eq!(submit_one(&addr, 43, "again.bin"), last + 3);
    let out = checkpoint(&data, &to);
    assert!(line(&out, &key).contains(" full "), "{out}");
    stop(child, &dir.path().join("run2"));
    ok(&run(&["doctor", "--data", s(&data)]));
}

#[test]
fn a_checkpoint_after_consolidation_raised_the_floor_is_full() {
    let dir = tempfile::tempdir().unwrap();
    let (data, child, repo_dir, last) = served_with_changes(dir.path());
    let key = repo_key(&repo_dir);
    let to = dir.path().join("ckpt");
    checkpoint(&data, &to);
    let first = manifest(&to, 1, &key).end.end;
    let addr = listen(dir.path());
    submit_one(&addr, 40, "two.bin");
    stop(child, &dir.path().join("run"));
    // Consolidation moves the retained floor beyond the first cursor.
    ok(&run(&["consolidate", "--data", s(&data)]));
    let pointer =
        scribe_metadata::archive::read_pointer(&repo_dir.join("metadata.recovery")).unwrap();
    assert!(pointer.unwrap().cursor.end > first);
    let out = checkpoint(&data, &to);
    assert!(line(&out, &key).contains(" full "), "{out}");
    let m = manifest(&to, 2, &key);
    assert!(m.full);
    // The link to the previous manifest stays.
    let prev = std::fs::read(to.join(format!("{:020}", 1)).join(format!("{key}.ckpt"))).unwrap();
    assert_eq!(&m.previous, blake3::hash(&prev).as_bytes());
    // Restore stops at the full manifest: checkpoint 1 is not needed.
    std::fs::remove_dir_all(to.join(format!("{:020}", 1))).unwrap();
    let rebuilt = dir.path().join("rebuilt.redb");
    let r = ck::restore_database(&to, 2, &key, &rebuilt).unwrap();
    assert_eq!(r.manifests, 1);
    assert_eq!(
        rows_of(&rebuilt),
        archived_rows(&repo_dir.join("metadata.redb"), &dir.path().join("s.redb"))
    );
    assert_eq!(head(&data), last + 1);
}

fn verify_err(data: &Path, to: &Path) -> String {
    failed(&run(&[
        "checkpoint",
        "--data",
        s(data),
        "--to",
        s(to),
        "--verify",
    ]))
}

#[test]
fn broken_links_flipped_bytes_and_missing_files_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let (data, child, repo_dir, _) = served_with_changes(dir.path());
    let key = repo_key(&repo_dir);
    let to = dir.path().join("ckpt");
    let addr = listen(dir.path());
    checkpoint(&data, &to);
    submit_one(&addr, 40, "two.bin");
    checkpoint(&data, &to);
    submit_one(&addr, 41, "three.bin");
    checkpoint(&data, &to);
    stop(child, &dir.path().join("run"));
    let c2 = to.join(format!("{:020}", 2));
    let frames = c2.join(format!("{key}.scrf"));
    let original = std::fs::read(&frames).unwrap();

    // One flipped byte inside a frame's payload: the file and its offset.
    let mut bytes = original.clone();
    bytes[100] ^= 0x10;
    std::fs::write(&frames, &bytes).unwrap();
    let err = verify_err(&data, &to);
    assert!(err.contains(s(&frames)) && err.contains("at byte"), "{err}");
    // recover refuses it too and publishes nothing.
    let db = repo_dir.join("metadata.redb");
    std::fs::rename(&db, dir.path().join("aside.redb")).unwrap();
    let archive = repo_dir.join("metadata.recovery");
    std::fs::rename(&archive, dir.path().join("aside.recovery")).unwrap();
    let err = failed(&run(&[
        "recover",
        "--data",
        s(&data),
        "--from-checkpoint",
        s(&to),
    ]));
    assert!(err.contains(s(&frames)), "{err}");
    assert!(!db.exists() && !repo_dir.join("metadata.redb.replay").exists());

    // Truncated: where it ends.
    std::fs::write(&frames, &original[..original.len() - 9]).unwrap();
    let err = verify_err(&data, &to);
    assert!(
        err.contains(s(&frames)) && err.contains(&format!("at byte {}", original.len() - 9)),
        "{err}"
    );
    // Missing.
    std::fs::remove_file(&frames).unwrap();
    let err = verify_err(&data, &to);
    assert!(err.contains(s(&frames)) && err.contains("missing"), "{err}");
    std::fs::write(&frames, &original).unwrap();
    ok(&run(&[
        "checkpoint",
        "--data",
        s(&data),
        "--to",
        s(&to),
        "--verify",
    ]));

    // A predecessor link that names other bytes (a well-formed manifest).
    let m3_path = to.join(format!("{:020}", 3)).join(format!("{key}.ckpt"));
    let m3_bytes = std::fs::read(&m3_path).unwrap();
    let mut m3 = CheckpointManifest::decode(&m3_bytes).unwrap();
    m3.previous[0] ^= 1;
    std::fs::write(&m3_path, m3.encode().unwrap()).unwrap();
    let err = verify_err(&data, &to);
    assert!(
        err.contains(s(&m3_path))
            && err.contains(&format!(
                "at byte {}",
                scribe_format::checkpoint::PREVIOUS_OFFSET
            ))
            && err.contains("previous manifest link"),
        "{err}"
    );
    // A flipped byte in a manifest: its checksum.
    let mut bad = m3_bytes.clone();
    bad[40] ^= 1;
    std::fs::write(&m3_path, &bad).unwrap();
    let err = verify_err(&data, &to);
    assert!(
        err.contains(s(&m3_path)) && err.contains("checksum"),
        "{err}"
    );
    std::fs::write(&m3_path, &m3_bytes).unwrap();
    // A missing predecessor (checkpoint 2's manifest).
    let m2_path = c2.join(format!("{key}.ckpt"));
    let m2 = std::fs::read(&m2_path).unwrap();
    std::fs::remove_file(&m2_path).unwrap();
    let err = verify_err(&data, &to);
    assert!(
        err.contains(s(&m3_path)) && err.contains("previous manifest link"),
        "{err}"
    );
    std::fs::write(&m2_path, &m2).unwrap();
    std::fs::remove_dir_all(to.join(format!("{:020}", 1))).unwrap();
    let err = verify_err(&data, &to);
    assert!(
        err.contains(s(&c2))
            && err.contains(".ckpt: at byte 259")
            && err.contains("is missing from"),
        "{err}"
    );
}

#[test]
fn a_killed_checkpoint_leaves_the_chain_intact_and_the_next_run_works() {
    let dir = tempfile::tempdir().unwrap();
    let (data, child, repo_dir, last) = served_with_changes(dir.path());
    let key = repo_key(&repo_dir);
    let to = dir.path().join("ckpt");
    checkpoint(&data, &to);
    let addr = listen(dir.path());
    submit_one(&addr, 40, "two.bin");
    // Killed after the catalog and the repository were written.
    kill_at(
        "database:2",
        &["checkpoint", "--data", s(&data), "--to", s(&to)],
    );
    let partial: PathBuf = to.join(format!(".{:020}.partial", 2));
    assert!(partial.join(format!("{key}.scrf")).exists());
    assert!(!to.join(format!("{:020}", 2)).exists());
    ok(&run(&[
        "checkpoint",
        "--data",
        s(&data),
        "--to",
        s(&to),
        "--verify",
    ]));
    // Killed just before publication.
    kill_at(
        "publish",
        &["checkpoint", "--data", s(&data), "--to", s(&to)],
    );
    assert!(!to.join(format!("{:020}", 2)).exists());
    let out = checkpoint(&data, &to);
    assert!(line(&out, &key).contains(" incremental "), "{out}");
    assert!(!partial.exists());
    assert_eq!(manifest(&to, 2, &key).start, manifest(&to, 1, &key).end);
    stop(child, &dir.path().join("run"));
    let rebuilt = dir.path().join("rebuilt.redb");
    ck::restore_database(&to, 2, &key, &rebuilt).unwrap();
    assert_eq!(
        rows_of(&rebuilt),
        archived_rows(&repo_dir.join("metadata.redb"), &dir.path().join("s.redb"))
    );
    assert_eq!(head(&data), last + 1);
}

/// `scribe-server reclaim` (#16 item 2) as a process: offline, clean on a
/// data root without unreachable pages, and doctor stays clean.
#[test]
fn reclaim_runs_offline_and_refuses_a_served_root() {
    let dir = tempfile::tempdir().unwrap();
    let (data, child, _repo_dir, _) = served_with_changes(dir.path());
    let err = failed(&run(&["reclaim", "--data", s(&data)]));
    assert!(err.contains("in use"), "{err}");
    stop(child, &dir.path().join("run"));
    let out = ok(&run(&["reclaim", "--data", s(&data)]));
    assert!(out.contains("unreachable removed"), "{out}");
    ok(&run(&["doctor", "--data", s(&data)]));
    ok(&run(&["archive", "verify", "--data", s(&data)]));
}

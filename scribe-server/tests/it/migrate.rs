//! `scribe-server migrate`: a current data root has nothing to migrate; a
//! version this build cannot convert (in a descriptor or inside a
//! database) is refused with the file and both versions, and left as it was.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use scribe_testkit::REPO;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scribe-server"))
        .args(args)
        .output()
        .expect("run scribe-server")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn migrate(data: &Path) -> Output {
    run(&["migrate", "--data", data.to_str().unwrap()])
}

/// A data root holding one repository; returns the data root and the
/// repository's directory.
fn data_root(dir: &Path) -> (PathBuf, PathBuf) {
    let data = dir.join("data");
    let d = data.to_str().unwrap();
    let out = run(&["init", "--data", d]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run(&["repo", "create", "--data", d, REPO]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let id = text(&out.stdout).trim().to_string();
    let repo = data.join("repos").join(id);
    assert!(repo.join("SCRIBE_FORMAT").is_file(), "{}", repo.display());
    (data, repo)
}

/// Replace `from` by `to` in the text file at `path` (which must hold it).
fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{}: {text}", path.display());
    std::fs::write(path, text.replace(from, to)).unwrap();
}

#[test]
fn a_current_data_root_has_nothing_to_migrate() {
    let dir = tempfile::tempdir().unwrap();
    let (data, repo) = data_root(dir.path());
    for _ in 0..2 {
        let out = migrate(&data);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
        assert!(stderr.contains("nothing to migrate"), "{stderr}");
        // Each database's and store's versions and features, and that they
        // are current.
        for want in [
            "data root (",
            "catalog-schema 1, repository-schema 3, object-store 1, envelope 1, engine redb-4",
            &format!("repository {REPO} ("),
            "schema 3, engine redb-4, object-store 1",
            &format!("objects of {REPO} ("),
            "layout 1, envelope 1",
            "required features atomic-publication-v2",
        ] {
            assert!(stdout.contains(want), "{want:?} in {stdout}");
        }
        assert_eq!(stdout.lines().count(), 3, "{stdout}");
        assert!(stdout.lines().all(|l| l.ends_with(": current")), "{stdout}");
    }
    // Nothing was converted: the descriptors are those `init` and `repo
    // create` wrote, and the data root still serves.
    assert!(std::fs::read_to_string(repo.join("SCRIBE_FORMAT"))
        .unwrap()
        .contains("schema = 3\n"));
    let out = run(&["doctor", "--data", data.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn descriptor_versions_this_build_cannot_convert_are_refused() {
    // (file relative to the data root or the repository, edit, message)
    let cases: [(&str, bool, &str, &str, &str); 7] = [
        (
            "SCRIBE_FORMAT",
            false,
            "repository-schema = 3",
            "repository-schema = 4",
            "repository-schema is 4, this build reads 3",
        ),
        (
            "SCRIBE_FORMAT",
            false,
            "atomic-publication-v2",
            "atomic-publication-v2,warp-drive",
            "requires feature \"warp-drive\"",
        ),
        (
            "SCRIBE_FORMAT",
            true,
            "schema = 3",
            "schema = 2",
            "schema is 2, this build reads 3",
        ),
        (
            "SCRIBE_FORMAT",
            true,
            "engine = redb-4",
            "engine = redb-5",
            "engine is redb-5, this build reads redb-4",
        ),
        // Stores of builds before the recovery journal: no converter.
        (
            "SCRIBE_FORMAT",
            false,
            ",recovery-journal-v2",
            "",
            "predates metadata recovery journal profile 2",
        ),
        (
            "SCRIBE_FORMAT",
            true,
            ",recovery-journal-v2",
            "",
            "predates metadata recovery journal profile 2",
        ),
        (
            "objects/SCRIBE_FORMAT",
            true,
            "layout = 1",
            "layout = 7",
            "layout is 7, this build reads 1",
        ),
    ];
    for (file, in_repo, from, to, message) in cases {
        let dir = tempfile::tempdir().unwrap();
        let (data, repo) = data_root(dir.path());
        let path = if in_repo { &repo } else { &data }.join(file);
        edit(&path, from, to);
        let edited = std::fs::read(&path).unwrap();
        let out = migrate(&data);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{file}: {stdout}{stderr}");
        let first = stderr.lines().next().unwrap_or_default();
        assert!(first.starts_with("Error: cannot migrate "), "{stderr}");
        assert!(first.contains(&path.display().to_string()), "{stderr}");
        assert!(first.contains(message), "{message:?} in {stderr}");
        assert!(stderr.contains("Hint: nothing was changed"), "{stderr}");
        assert!(
            stdout.contains(&format!("problem: {}: {message}", path.display())),
            "{stdout}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), edited, "{file} unchanged");
    }
}

#[test]
fn a_database_marker_this_build_cannot_convert_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (data, repo) = data_root(dir.path());
    let db_path = repo.join("metadata.redb");
    {
        let db = redb::Database::open(&db_path).unwrap();
        let tx = db.begin_write().unwrap();
        tx.open_table(scribe_metadata::tables::META)
            .unwrap()
            .insert("snapshot-profile", 4u32.to_le_bytes().as_slice())
            .unwrap();
        tx.commit().unwrap();
    }
    let out = migrate(&data);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    // The descriptors are current; the marker inside the database is not.
    assert!(stdout.contains(": current"), "{stdout}");
    assert!(
        stderr.contains(&format!(
            "{}: snapshot profile is 4, this build reads 3",
            db_path.display()
        )),
        "{stderr}"
    );
}

#[test]
fn a_missing_data_root_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = migrate(&dir.path().join("none"));
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.starts_with("Error: "), "{stderr}");
    assert!(stderr.contains("SCRIBE_FORMAT"), "{stderr}");
}

#[test]
fn an_older_migration_revision_is_inspected_then_converted() {
    let dir = tempfile::tempdir().unwrap();
    let (data, repo) = data_root(dir.path());
    let db_path = repo.join("metadata.redb");
    {
        // Back to the pre-framework revision 0, through journaled writes so
        // the archive stays the database's.
        use scribe_metadata::{archive::Archive, journal, migration, tables};
        let db = migration::open(&db_path).unwrap();
        let archive = std::sync::Arc::new(Archive::open(&db_path, db.clone()).unwrap());
        let tx = journal::begin_archived(&db, &archive).unwrap();
        tx.open_table(tables::META)
            .unwrap()
            .remove(tables::meta::MIGRATION_VERSION)
            .unwrap();
        tx.delete_table(tables::WORKSPACE_STATE).unwrap();
        tx.delete_table(tables::CHANGE_NOTES).unwrap();
        tx.commit().unwrap();
    }
    let d = data.to_str().unwrap();
    let out = run(&["migrate", "--data", d, "--inspect"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!(
            "{REPO}: migration revision 0; to apply: 1 workspace-state-v1, 2 path-fold-v1, 3 change-notes-v1"
        )),
        "{stdout}"
    );
    // Inspection converts nothing: a second one reports the same.
    let again = run(&["migrate", "--data", d, "--inspect"]);
    assert!(
        text(&again.stdout) == stdout,
        "inspect changed the repository"
    );
    let out = migrate(&data);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!("{REPO}: migrated from revision 0 to 3")),
        "{stdout}"
    );
    let out = migrate(&data);
    assert!(text(&out.stderr).contains("nothing to migrate"));
    let out = run(&["doctor", "--data", d]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    let out = run(&["archive", "verify", "--data", d]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    let out = run(&["doctor", "--data", d]);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

#[test]
fn an_atomic_publication_v1_store_is_converted_to_v2() {
    use scribe_metadata::records::LockRecord;
    use scribe_metadata::{archive::Archive, journal, migration, tables};
    let dir = tempfile::tempdir().unwrap();
    let (data, repo) = data_root(dir.path());
    let db_path = repo.join("metadata.redb");
    let transfers: redb::TableDefinition<&str, &[u8]> =
        redb::TableDefinition::new("submit_lock_transfers");
    let ws = scribe_format::WorkspaceId([7; 16]);
    let rec = |g| LockRecord {
        generation: g,
        workspace: ws,
        branch: scribe_format::BranchId([1; 16]),
        author: "ada".into(),
        acquired_ms: 5,
    };
    {
        // The v1 layout: staged acquisitions in submit_lock_transfers with
        // transfer-count / transfer-owner, none of v2's tables or counters.
        let db = migration::open(&db_path).unwrap();
        let archive = std::sync::Arc::new(Archive::open(&db_path, db.clone()).unwrap());
        let tx = journal::begin_archived(&db, &archive).unwrap();
        {
            let mut t = tx.open_table(transfers).unwrap();
            t.insert("art/a.psd", rec(1).encode().as_slice()).unwrap();
            t.insert("art/b.psd", rec(2).encode().as_slice()).unwrap();
            let mut m = tx.open_table(tables::META).unwrap();
            m.insert("transfer-count", 2u64.to_le_bytes().as_slice())
                .unwrap();
            m.insert("transfer-owner", ws.0.as_slice()).unwrap();
            for k in [
                tables::meta::LOCK_UPDATE_COUNT,
                tables::meta::LOCK_RELEASE_COUNT,
            ] {
                m.remove(k).unwrap();
            }
        }
        tx.delete_table(tables::SUBMIT_LOCK_UPDATES).unwrap();
        tx.delete_table(tables::UPLOAD_PINS).unwrap();
        tx.commit().unwrap();
    }
    edit(
        &data.join("SCRIBE_FORMAT"),
        "atomic-publication-v2",
        "atomic-publication-v1",
    );
    edit(
        &repo.join("SCRIBE_FORMAT"),
        "atomic-publication-v2",
        "atomic-publication-v1",
    );
    let d = data.to_str().unwrap();
    // Serving tools refuse the v1 store.
    let out = run(&["doctor", "--data", d]);
    assert!(!out.status.success());
    let out = run(&["migrate", "--data", d, "--inspect"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("data root: requires atomic-publication-v1"),
        "{stdout}"
    );
    let out = migrate(&data);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!(
            "{REPO}: atomic-publication-v1 -> v2: 2 staged lock transfer(s) converted"
        )),
        "{stdout}"
    );
    for d in [&data, &repo] {
        let t = std::fs::read_to_string(d.join("SCRIBE_FORMAT")).unwrap();
        assert!(
            t.contains("atomic-publication-v2") && !t.contains("-v1"),
            "{t}"
        );
    }
    {
        let db = redb::Database::open(&db_path).unwrap();
        let tx = redb::ReadableDatabase::begin_read(&db).unwrap();
        let u = tx.open_table(tables::SUBMIT_LOCK_UPDATES).unwrap();
        let v = u
            .get("art/b.psd".as_bytes())
            .unwrap()
            .unwrap()
            .value()
            .to_vec();
        assert_eq!(&v[..2], &[1, 0], "an acquire record");
        assert_eq!(LockRecord::decode(&v[4..]).unwrap(), rec(2));
        let m = tx.open_table(tables::META).unwrap();
        let count = m.get(tables::meta::LOCK_UPDATE_COUNT).unwrap().unwrap();
        assert_eq!(count.value(), 2u64.to_le_bytes());
        assert!(m.get("transfer-count").unwrap().is_none());
        assert!(tx.open_table(transfers).is_err(), "the v1 table is gone");
    }
    let out = migrate(&data);
    assert!(
        text(&out.stderr).contains("nothing to migrate"),
        "{}",
        text(&out.stderr)
    );
    let out = run(&["archive", "verify", "--data", d]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    let out = run(&["doctor", "--data", d]);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

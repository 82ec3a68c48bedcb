//! Data root, catalog, LOCK and the refusals of opening.

use redb::{ReadableDatabase, ReadableTable};
use scribe_format::ErrorCode;
use scribe_metadata::{DataRoot, MetadataError};

use super::support::*;

#[test]
fn a_second_owner_is_refused_naming_the_holder() {
    let e = env();
    let err = DataRoot::open(e.root.dir()).expect_err("second owner refused");
    match &err {
        MetadataError::DataRootLocked { pid, .. } => assert_eq!(*pid, Some(std::process::id())),
        other => panic!("unexpected {other:?}"),
    }
    assert!(err
        .to_string()
        .contains(&format!("pid {}", std::process::id())));
    assert_eq!(err.code(), ErrorCode::Busy);
}

#[test]
fn repositories_survive_reopen_and_names_are_unique() {
    let e = env();
    let dir = e.root.dir().to_owned();
    let id = e.repo.id();
    let c = commit(&e, vec![add(&e, "a.txt", 1)]);
    assert_eq!(c, 1);
    let dup = e
        .root
        .create_repository("game")
        .expect_err("duplicate name");
    assert_eq!(dup.code(), ErrorCode::AlreadyExists);
    assert_eq!(
        e.root.create_repository("a/b").err().map(|e| e.code()),
        Some(ErrorCode::Malformed)
    );
    drop(e.repo);
    drop(e.root);
    let root = reopen(&dir);
    let list = root.list_repositories().expect("list");
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].name, "game");
    let repo = root.open_repository_by_name("game").expect("open by name");
    assert_eq!(repo.id(), id);
    assert_eq!(repo.head().unwrap(), 1);
    assert_doctor_clean(&repo);
}

#[test]
fn creating_leftovers_are_removed_at_startup() {
    let e = env();
    let dir = e.root.dir().to_owned();
    // Simulate a creation interrupted after the catalog row: flip the row back to creating.
    let id = e.repo.id();
    drop(e.repo);
    drop(e.root);
    {
        let db = redb::Database::open(dir.join("catalog.redb")).unwrap();
        let tx = db.begin_write().unwrap();
        {
            let mut t = tx
                .open_table(scribe_metadata::tables::CATALOG_REPOS)
                .unwrap();
            let mut rec = {
                let g = t.get(id.0).unwrap().unwrap();
                scribe_metadata::records::CatalogRecord::decode(g.value()).unwrap()
            };
            rec.state = scribe_metadata::records::RepoState::Creating;
            t.insert(id.0, rec.encode().as_slice()).unwrap();
        }
        tx.commit().unwrap();
    }
    let repo_dir = dir.join("repos").join(id.to_hex());
    assert!(repo_dir.exists());
    let root = reopen(&dir);
    assert!(!repo_dir.exists(), "leftover directory removed");
    assert!(root.list_repositories().unwrap().is_empty());
    assert_eq!(
        root.repository_id("game").err().map(|e| e.code()),
        Some(ErrorCode::NotFound)
    );
    // The name is free again.
    root.create_repository("game").expect("name reusable");
}

fn set_meta(dir: &std::path::Path, key: &str, value: Option<&[u8]>) {
    let db = redb::Database::open(dir.join("metadata.redb")).unwrap();
    let tx = db.begin_write().unwrap();
    {
        let mut t = tx.open_table(scribe_metadata::tables::META).unwrap();
        match value {
            Some(v) => {
                t.insert(key, v).unwrap();
            }
            None => {
                t.remove(key).unwrap();
            }
        }
    }
    tx.commit().unwrap();
}

/// Every row of every table, to show that a refused open wrote nothing.
fn logical_rows(dir: &std::path::Path) -> Vec<(String, Vec<u8>, Vec<u8>)> {
    use redb::TableHandle;
    let db = redb::Database::open(dir.join("metadata.redb")).unwrap();
    let tx = db.begin_read().unwrap();
    let mut out = Vec::new();
    let names: Vec<String> = tx
        .list_tables()
        .unwrap()
        .map(|t| t.name().to_owned())
        .collect();
    for name in names {
        if name == "meta" || name == "locks" {
            let def: redb::TableDefinition<&str, &[u8]> = redb::TableDefinition::new(&name);
            let t = tx.open_table(def).unwrap();
            for row in t.range::<&str>(..).unwrap() {
                let (k, v) = row.unwrap();
                out.push((
                    name.clone(),
                    k.value().as_bytes().to_vec(),
                    v.value().to_vec(),
                ));
            }
        }
    }
    out
}

#[test]
fn openers_refuse_other_schema_profile_and_migration_values_before_writing() {
    let cases: Vec<(&str, Option<Vec<u8>>)> = vec![
        ("schema", Some(2u32.to_le_bytes().to_vec())),
        ("snapshot-profile", Some(2u32.to_le_bytes().to_vec())),
        ("snapshot-profile", None),
        ("migration-version", Some(4u32.to_le_bytes().to_vec())),
        ("migration-version", None),
        ("migration-active", Some(3u32.to_le_bytes().to_vec())),
        ("path-fold-profile", Some(2u32.to_le_bytes().to_vec())),
    ];
    for (key, value) in cases {
        let e = env();
        let dir = e.root.dir().to_owned();
        let id = e.repo.id();
        let repo_dir = e.repo.dir().to_owned();
        drop(e.repo);
        drop(e.root);
        set_meta(&repo_dir, key, value.as_deref());
        let before = logical_rows(&repo_dir);
        let root = reopen(&dir);
        let err = root
            .open_repository(id)
            .err()
            .unwrap_or_else(|| panic!("{key} accepted"));
        assert!(
            matches!(err, MetadataError::VersionMismatch { .. }),
            "{key}: {err:?}"
        );
        assert!(err.to_string().contains("scribe-server migrate"), "{err}");
        drop(root);
        assert!(before == logical_rows(&repo_dir), "{key}: rows unchanged");
    }
}

#[test]
fn a_missing_required_table_is_refused() {
    let e = env();
    let dir = e.root.dir().to_owned();
    let id = e.repo.id();
    let repo_dir = e.repo.dir().to_owned();
    drop(e.repo);
    drop(e.root);
    {
        let db = redb::Database::open(repo_dir.join("metadata.redb")).unwrap();
        let tx = db.begin_write().unwrap();
        tx.delete_table(scribe_metadata::tables::ACCEPTED_MANIFESTS)
            .unwrap();
        tx.commit().unwrap();
        let r = db.begin_read().unwrap();
        drop(r);
    }
    let root = reopen(&dir);
    let err = root.open_repository(id).expect_err("refused");
    assert_eq!(err.code(), ErrorCode::Corrupt, "{err}");
    assert!(err.to_string().contains("accepted_manifests"));
}

#[test]
fn descriptors_with_other_versions_or_unknown_features_are_refused() {
    let e = env();
    let dir = e.root.dir().to_owned();
    drop(e.repo);
    drop(e.root);
    let path = dir.join("SCRIBE_FORMAT");
    let original = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        original.replace("repository-schema = 3", "repository-schema = 2"),
    )
    .unwrap();
    let err = DataRoot::open(&dir).expect_err("refused");
    assert!(err.to_string().contains("scribe-server migrate"), "{err}");
    std::fs::write(
        &path,
        original.replace("atomic-publication-v2", "atomic-publication-v2,warp-drive"),
    )
    .unwrap();
    let err = DataRoot::open(&dir).expect_err("refused");
    assert_eq!(err.code(), ErrorCode::UnsupportedFeature);
    std::fs::write(&path, original).unwrap();
    DataRoot::open(&dir).expect("original opens");
}

#[test]
fn repositories_get_a_real_object_store_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let root = DataRoot::create(dir.path().join("data")).unwrap();
    let id = root.create_repository("assets").unwrap();
    let repo = root.open_repository(id).unwrap();
    assert!(repo.dir().join("objects/SCRIBE_FORMAT").exists());
    assert!(repo.dir().join("objects/locator.redb").exists());
    let probe = scribe_format::ObjectId::manifest(scribe_format::ManifestId([1; 32]));
    assert!(!scribe_metadata::ObjectPresence::contains(&**repo.objects(), &probe).unwrap());
    assert_doctor_clean(&repo);
}

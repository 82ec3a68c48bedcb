//! #14 item 13: a damaged `state.redb` (truncated, bytes flipped, a row
//! that does not decode written through redb itself) is reported as
//! [`WorkspaceError::StateDamaged`] naming the file, never as a panic or a
//! misread row, and nothing in the working copy is touched.

use std::path::{Path, PathBuf};

use redb::TableDefinition;
use scribe_format::{FileContentId, ManifestId};

use super::*;
use crate::records::{Fingerprint, OpenedAction, OpenedRecord};

const FILES: usize = 200;

/// A closed workspace with tracked files on disk, one opened edit and one
/// recovery entry. Returns the directory.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::create(dir.path(), &tests_meta()).unwrap();
    let tx = ws.write().unwrap();
    for i in 0..FILES {
        let path = format!("d{}/f{i}.bin", i % 7);
        let bytes = format!("file {i}");
        let full = dir.path().join(&path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(&full, &bytes).unwrap();
        tx.put_baseline(
            &path,
            &BaselineRecord {
                incarnation: [4; 16],
                manifest: ManifestId::of_payload(bytes.as_bytes()),
                content: FileContentId::of(bytes.as_bytes()),
                size: bytes.len() as u64,
                mode: 0,
                change: 1,
                fingerprint: Fingerprint::default(),
            },
        )
        .unwrap();
    }
    tx.put_opened(
        "d1/f1.bin",
        &OpenedRecord {
            action: OpenedAction::Edit,
            opened_ms: 1,
            needs_reconcile: false,
            moved_from: None,
        },
    )
    .unwrap();
    tx.commit().unwrap();
    crate::recovery::displace(
        dir.path(),
        "d2/f2.bin",
        crate::records::RecoveryReason::Delete,
    )
    .unwrap();
    drop(ws);
    dir
}

fn db(dir: &Path) -> PathBuf {
    dir.join(STATE_DIR).join("state.redb")
}

/// Every file outside `.scribe/_state` (path → bytes) and every recovery
/// entry.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            if rel == STATE_DIR || rel == ".scribe/_state/tmp" {
                continue;
            }
            if p.is_dir() {
                if !rel.starts_with(STATE_DIR) || rel.starts_with(".scribe/_state/recovery") {
                    stack.push(p);
                }
            } else if !rel.starts_with(STATE_DIR) || rel.starts_with(".scribe/_state/recovery") {
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
        if d == dir {
            stack.push(dir.join(".scribe/_state/recovery"));
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Open (writable or for reading) and read everything `status` and `sync`
/// read.
fn read_all(dir: &Path, for_reading: bool) -> Result<usize> {
    let ws = if for_reading {
        Workspace::open_for_reading(dir)?
    } else {
        Workspace::open(dir)?
    };
    let r = ws.read()?;
    r.meta()?;
    let n = r.baselines()?.len();
    r.visit_baselines(|_, _| {})?;
    r.opened_all()?;
    r.deferred_all()?;
    r.journal_all()?;
    r.pending_all()?;
    r.local_locks()?;
    r.workflows_with_prefix("")?;
    Ok(n)
}

fn assert_damage_names_the_file(dir: &Path, e: &WorkspaceError) {
    match e {
        WorkspaceError::StateDamaged { path, .. } => assert_eq!(path, &db(dir)),
        other => panic!("expected StateDamaged, got {other:?}"),
    }
    assert!(e.to_string().contains("state.redb"), "{e}");
}

#[test]
fn a_truncated_state_is_named_damage_and_the_working_copy_is_kept() {
    let dir = workspace();
    let before = snapshot(dir.path());
    let orig = std::fs::read(db(dir.path())).unwrap();
    for cut in [0, 1, 100, 4096, orig.len() / 2, orig.len() - 1] {
        for for_reading in [true, false] {
            std::fs::write(db(dir.path()), &orig[..cut]).unwrap();
            let e = read_all(dir.path(), for_reading).unwrap_err();
            assert_damage_names_the_file(dir.path(), &e);
            assert_eq!(snapshot(dir.path()), before, "cut {cut}");
        }
    }
    // A missing file is damage too, and is not silently recreated empty.
    std::fs::remove_file(db(dir.path())).unwrap();
    let e = read_all(dir.path(), false).unwrap_err();
    assert_damage_names_the_file(dir.path(), &e);
    assert!(!db(dir.path()).exists());
    std::fs::write(db(dir.path()), &orig).unwrap();
    assert_eq!(read_all(dir.path(), false).unwrap(), FILES);
}

#[test]
fn flipped_bytes_never_panic_and_damage_is_named() {
    let dir = workspace();
    let before = snapshot(dir.path());
    let orig = std::fs::read(db(dir.path())).unwrap();
    let mut damaged = 0;
    let mut at = 0;
    while at < orig.len() {
        let mut bytes = orig.clone();
        for b in bytes.iter_mut().skip(at).take(8) {
            *b ^= 0x5a;
        }
        std::fs::write(db(dir.path()), &bytes).unwrap();
        // A panic inside redb would fail this test: `read_all` returns.
        match read_all(dir.path(), at % 2 == 0) {
            Ok(_) => {}
            Err(e) => {
                assert_damage_names_the_file(dir.path(), &e);
                damaged += 1;
            }
        }
        assert_eq!(snapshot(dir.path()), before, "flip at {at}");
        at += 499;
    }
    assert!(damaged > 0, "no flip was noticed");
    std::fs::write(db(dir.path()), &orig).unwrap();
    assert_eq!(read_all(dir.path(), false).unwrap(), FILES);
}

#[test]
fn garbage_rows_written_through_redb_are_named_not_misread() {
    type Table = TableDefinition<'static, &'static str, &'static [u8]>;
    let cases: [(&str, &str, Vec<u8>, &str); 5] = [
        (
            "baseline",
            "d0/f0.bin",
            b"\x01garbage".to_vec(),
            "row baseline/d0/f0.bin",
        ),
        ("opened", "d1/f1.bin", vec![9, 9], "row opened/d1/f1.bin"),
        ("deferred", "d3/f3.bin", vec![], "row deferred/d3/f3.bin"),
        // A well-formed record under a key that is not a canonical path:
        // sync or status must never act on `../outside`.
        (
            "baseline",
            "../outside",
            Vec::new(),
            "row baseline/../outside",
        ),
        ("meta", "readonly-mode", vec![7], "row meta/readonly-mode"),
    ];
    for (table, key, value, named) in cases {
        let dir = workspace();
        let before = snapshot(dir.path());
        let value = if value.is_empty() && table == "baseline" {
            // A valid record, to show the key alone is refused.
            let ws = Workspace::open(dir.path()).unwrap();
            let v = ws
                .read()
                .unwrap()
                .baseline("d0/f0.bin")
                .unwrap()
                .unwrap()
                .encode();
            drop(ws);
            v
        } else {
            value
        };
        {
            let rdb = redb::Database::create(db(dir.path())).unwrap();
            let tx = rdb.begin_write().unwrap();
            tx.open_table(Table::new(table))
                .unwrap()
                .insert(key, value.as_slice())
                .unwrap();
            tx.commit().unwrap();
        }
        let e = read_all(dir.path(), false).unwrap_err();
        assert_damage_names_the_file(dir.path(), &e);
        assert!(e.to_string().contains(named), "{table}/{key}: {e}");
        assert_eq!(snapshot(dir.path()), before);
    }
}

#[test]
fn a_table_of_another_type_is_named_damage() {
    let dir = workspace();
    {
        let rdb = redb::Database::create(db(dir.path())).unwrap();
        let tx = rdb.begin_write().unwrap();
        tx.delete_table(TableDefinition::<&str, u64>::new("local_locks"))
            .unwrap();
        tx.open_table(TableDefinition::<u64, u64>::new("local_locks"))
            .unwrap()
            .insert(1, 2)
            .unwrap();
        tx.commit().unwrap();
    }
    let e = read_all(dir.path(), true).unwrap_err();
    assert_damage_names_the_file(dir.path(), &e);
}

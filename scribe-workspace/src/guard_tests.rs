//! #14 item 2: no workspace operation reads, writes or deletes beneath a
//! directory that is a symbolic link. Each test links a tracked directory
//! to a directory outside the workspace whose files equal the baselines
//! (so an operation that followed the link would take them for the
//! tracked files), runs one operation, and checks that the outside files
//! are untouched and the refusal names the path.

use std::collections::HashMap;

use scribe_format::{ErrorCode, FileContentId, ManifestId};

use crate::open;
use crate::records::{BaselineRecord, Fingerprint, JournalEntry, OpenedAction, OpenedRecord};
use crate::recovery;
use crate::resolve::{resolve, Resolution};
use crate::state::Workspace;
use crate::sync::{self, DeferReason, Materializer};

struct Memory(HashMap<FileContentId, Vec<u8>>);

impl Materializer for Memory {
    fn write_to(
        &self,
        _path: &str,
        t: &BaselineRecord,
        out: &mut std::fs::File,
    ) -> std::result::Result<(), crate::sync::WriteError> {
        let bytes = self.0.get(&t.content).ok_or_else(|| {
            crate::sync::WriteError::new(scribe_format::ErrorCode::NotFound, "unknown content")
        })?;
        std::io::Write::write_all(out, bytes)
            .map_err(|e| crate::sync::WriteError::io("writing", &e))
    }
}

fn memory(all: &[&[u8]]) -> Memory {
    Memory(
        all.iter()
            .map(|b| (FileContentId::of(b), b.to_vec()))
            .collect(),
    )
}

fn record(bytes: &[u8], change: u64) -> BaselineRecord {
    BaselineRecord {
        incarnation: [4; 16],
        manifest: ManifestId::of_payload(bytes),
        content: FileContentId::of(bytes),
        size: bytes.len() as u64,
        mode: 0,
        change,
        fingerprint: Fingerprint::default(),
    }
}

/// A workspace tracking `art/a.psd` and `art/b.psd` (change 1), whose
/// `art` is then replaced by a link to `outside`, which holds files with
/// the very same bytes. Returns (workspace dir, outside dir, workspace).
fn linked() -> (tempfile::TempDir, tempfile::TempDir, Workspace) {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let mut meta = crate::state::tests_meta();
    meta.readonly = false;
    let ws = Workspace::create(dir.path(), &meta).unwrap();
    let tx = ws.write().unwrap();
    for (p, b) in [("art/a.psd", b"alpha"), ("art/b.psd", b"bravo")] {
        let full = ws.root().join(p);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(&full, b).unwrap();
        let meta = std::fs::symlink_metadata(&full).unwrap();
        tx.put_baseline(
            p,
            &BaselineRecord {
                fingerprint: crate::records::fingerprint_of(&meta, 0),
                ..record(b, 1)
            },
        )
        .unwrap();
    }
    tx.commit().unwrap();
    std::fs::write(outside.path().join("a.psd"), b"alpha").unwrap();
    std::fs::write(outside.path().join("b.psd"), b"bravo").unwrap();
    std::fs::write(outside.path().join("secret.txt"), b"not yours").unwrap();
    std::fs::remove_dir_all(ws.root().join("art")).unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.root().join("art")).unwrap();
    (dir, outside, ws)
}

/// The outside directory is exactly as [`linked`] made it.
fn untouched(outside: &tempfile::TempDir) {
    let mut names: Vec<String> = std::fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["a.psd", "b.psd", "secret.txt"]);
    let read = |n: &str| std::fs::read(outside.path().join(n)).unwrap();
    assert_eq!(read("a.psd"), b"alpha");
    assert_eq!(read("b.psd"), b"bravo");
    assert_eq!(read("secret.txt"), b"not yours");
}

fn no_recovery(ws: &Workspace) {
    assert!(recovery::list(ws.root()).unwrap().is_empty());
}

#[test]
fn sync_defers_paths_beyond_a_link_and_writes_or_deletes_nothing_there() {
    let (_d, outside, ws) = linked();
    let mem = memory(&[b"alpha v2", b"new"]);
    let plan = vec![
        ("art/a.psd".to_string(), Some(record(b"alpha v2", 2))),
        ("art/b.psd".to_string(), None),
        ("art/new.psd".to_string(), Some(record(b"new", 2))),
        ("other.txt".to_string(), Some(record(b"new", 2))),
    ];
    sync::begin(&ws, 2, &plan).unwrap();
    let r = sync::apply(&ws, &mem).unwrap();
    assert_eq!(sync::finish(&ws).unwrap(), 2);
    untouched(&outside);
    no_recovery(&ws);
    assert_eq!(r.written, ["other.txt"]);
    assert!(r.removed.is_empty());
    assert_eq!(
        r.deferred,
        [
            ("art/a.psd".to_string(), DeferReason::BeyondSymlink),
            ("art/b.psd".to_string(), DeferReason::BeyondSymlink),
            ("art/new.psd".to_string(), DeferReason::BeyondSymlink),
        ]
    );
    assert!(DeferReason::BeyondSymlink
        .describe()
        .contains("symbolic link"));
    // They wait, with their targets, for `resolve` once the link is gone.
    let deferred: Vec<String> = ws
        .read()
        .unwrap()
        .deferred_all()
        .unwrap()
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    assert_eq!(deferred, ["art/a.psd", "art/b.psd", "art/new.psd"]);
    // The baselines stay what they were.
    assert_eq!(
        ws.read()
            .unwrap()
            .baseline("art/b.psd")
            .unwrap()
            .unwrap()
            .change,
        1
    );
}

#[test]
fn resolve_refuses_beyond_a_link_until_the_link_is_gone() {
    let (_d, outside, ws) = linked();
    let mem = memory(&[b"alpha v2"]);
    let tx = ws.write().unwrap();
    tx.put_deferred(
        "art/a.psd",
        &JournalEntry {
            target: Some(record(b"alpha v2", 2)),
            done: false,
            recovery: None,
        },
    )
    .unwrap();
    tx.commit().unwrap();
    for how in [
        Resolution::Theirs,
        Resolution::Ours,
        Resolution::Merged(outside.path().join("secret.txt")),
    ] {
        let err = resolve(&ws, "art/a.psd", &how, &mem).unwrap_err();
        assert!(
            matches!(&err, crate::WorkspaceError::Refused { code: ErrorCode::BeyondSymlink, path, .. } if path == "art/a.psd"),
            "{how:?}: {err:?}"
        );
        untouched(&outside);
        no_recovery(&ws);
    }
    assert_eq!(ws.read().unwrap().deferred_all().unwrap().len(), 1);
    // With a real directory in its place, theirs is written there.
    std::fs::remove_file(ws.root().join("art")).unwrap();
    std::fs::create_dir(ws.root().join("art")).unwrap();
    resolve(&ws, "art/a.psd", &Resolution::Theirs, &mem).unwrap();
    assert_eq!(
        std::fs::read(ws.root().join("art/a.psd")).unwrap(),
        b"alpha v2"
    );
    untouched(&outside);
}

#[test]
fn add_refuses_a_file_beyond_a_link() {
    let (_d, outside, ws) = linked();
    let r = open::add(&ws, &["art/secret.txt".into()]).unwrap();
    assert!(r.opened.is_empty(), "{r:?}");
    assert_eq!(r.refused.len(), 1, "{r:?}");
    assert_eq!(r.refused[0].path, "art/secret.txt");
    assert_eq!(r.refused[0].code, ErrorCode::BeyondSymlink);
    assert!(r.refused[0].detail.contains("`art` is a link"), "{r:?}");
    // The link itself is not followed by a whole-tree add either.
    let r = open::add(&ws, &["".into()]).unwrap();
    assert!(r.opened.is_empty(), "{r:?}");
    assert!(ws.read().unwrap().opened_all().unwrap().is_empty());
    untouched(&outside);
}

#[test]
fn delete_edit_and_revert_refuse_beyond_a_link() {
    let (_d, outside, ws) = linked();
    for args in [vec!["art/a.psd".to_string()], vec!["art".to_string()]] {
        let r = open::delete(&ws, &args).unwrap();
        assert!(r.opened.is_empty(), "{r:?}");
        assert!(
            r.refused.iter().all(|x| x.code == ErrorCode::BeyondSymlink),
            "{r:?}"
        );
        assert!(r.refused.iter().any(|x| x.path == "art/a.psd"), "{r:?}");
        untouched(&outside);
        no_recovery(&ws);
    }
    let r = open::edit(&ws, &["art/a.psd".into()]).unwrap();
    assert!(r.opened.is_empty(), "{r:?}");
    assert_eq!(r.refused[0].code, ErrorCode::BeyondSymlink);
    assert!(ws.read().unwrap().opened_all().unwrap().is_empty());
    // An edit opened before the directory became a link is not restored
    // through it.
    let tx = ws.write().unwrap();
    tx.put_opened(
        "art/a.psd",
        &OpenedRecord {
            action: OpenedAction::Edit,
            opened_ms: 1,
            needs_reconcile: false,
            moved_from: None,
        },
    )
    .unwrap();
    tx.commit().unwrap();
    std::fs::write(outside.path().join("a.psd"), b"changed outside").unwrap();
    let r = open::revert(&ws, &["art/a.psd".into()], &memory(&[b"alpha"])).unwrap();
    assert_eq!(r.refused[0].code, ErrorCode::BeyondSymlink, "{r:?}");
    assert_eq!(
        std::fs::read(outside.path().join("a.psd")).unwrap(),
        b"changed outside"
    );
    no_recovery(&ws);
}

#[test]
fn status_names_tracked_paths_beyond_a_link_and_reconcile_leaves_them() {
    let (_d, outside, ws) = linked();
    let s = open::status(&ws).unwrap();
    let problems: Vec<(&str, &str)> = s
        .problems
        .iter()
        .map(|p| (p.path.as_str(), p.code.as_str()))
        .collect();
    assert_eq!(
        problems,
        [
            ("art", "symlink"),
            ("art/a.psd", "beyond_symlink"),
            ("art/b.psd", "beyond_symlink"),
        ]
    );
    assert!(s.problems[1].detail.contains("beyond a symbolic link"));
    assert!(s.unopened.is_empty(), "{:?}", s.unopened);
    let r = open::reconcile(&ws, &[]).unwrap();
    assert!(r.opened.is_empty(), "{r:?}");
    // A status limited to a path beyond the link does not walk it.
    let (d, problems) = open::detect_changes(&ws, &["art/secret.txt".into()]).unwrap();
    assert!(d.changes.is_empty(), "{:?}", d.changes);
    assert_eq!(problems[0].code, "beyond_symlink");
    untouched(&outside);
}

#[test]
fn moves_refuse_beyond_a_link() {
    let (_d, outside, ws) = linked();
    let err = crate::moves::move_path(&ws, "art/a.psd", "moved.psd").unwrap_err();
    assert!(
        matches!(
            &err,
            crate::WorkspaceError::Refused {
                code: ErrorCode::BeyondSymlink,
                ..
            }
        ),
        "{err:?}"
    );
    let err = crate::moves::move_path(&ws, "art", "elsewhere").unwrap_err();
    assert!(
        matches!(
            &err,
            crate::WorkspaceError::Refused {
                code: ErrorCode::BeyondSymlink,
                ..
            }
        ),
        "{err:?}"
    );
    untouched(&outside);
    assert!(!ws.root().join("moved.psd").exists());
}

#[test]
fn recovery_never_takes_a_file_from_beyond_a_link() {
    let (_d, outside, ws) = linked();
    let err = recovery::displace(
        ws.root(),
        "art/a.psd",
        crate::records::RecoveryReason::Delete,
    )
    .unwrap_err();
    assert!(
        matches!(
            &err,
            crate::WorkspaceError::Refused {
                code: ErrorCode::BeyondSymlink,
                ..
            }
        ),
        "{err:?}"
    );
    untouched(&outside);
    no_recovery(&ws);
}

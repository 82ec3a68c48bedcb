//! Write combining on a real repository: concurrent lock mutations and
//! upload pins of many workspaces share transactions, and each refusal
//! stays its own member's.

use scribe_format::{ErrorCode, ObjectId, OperationId, WorkspaceId};
use scribe_metadata::archive;
use scribe_metadata::workspaces::Registration;

use super::support::*;

fn db_end(repo: &scribe_metadata::Repository) -> u64 {
    let tx = redb::ReadableDatabase::begin_read(repo.database()).unwrap();
    scribe_metadata::journal::check_profile(&tx, std::path::Path::new("m"))
        .unwrap()
        .end
}

#[test]
fn concurrent_lock_mutations_and_pins_share_transactions_and_each_refusal_stays_its_own() {
    let e = env();
    let workspaces: Vec<WorkspaceId> = (0..8).map(|_| WorkspaceId::random()).collect();
    for ws in &workspaces {
        e.repo
            .register_workspace(&Registration {
                workspace: *ws,
                owner: None,
                branch: e.main,
                view: vec![],
                label: "desk".into(),
                tags: vec![],
            })
            .unwrap();
    }
    let (pins_before, locks_before) = e.repo.write_combining();
    let repo = &e.repo;
    let main = e.main;
    let held: Vec<usize> = std::thread::scope(|s| {
        let handles: Vec<_> = workspaces
            .iter()
            .enumerate()
            .map(|(t, ws)| {
                let ws = *ws;
                s.spawn(move || {
                    let op = OperationId([t as u8 + 1; 16]);
                    let mut won = 0;
                    for i in 0..12u8 {
                        let path = vec!["shared/hero.psd".to_string()];
                        match repo.lock(&path, ws, main, "load") {
                            Ok(locks) => {
                                assert_eq!(locks.len(), 1);
                                assert_eq!(locks[0].record.workspace, ws);
                                won += 1;
                                assert_eq!(repo.unlock(&path, ws).unwrap(), 1);
                            }
                            Err(err) => assert_eq!(err.code(), ErrorCode::LockedByOther),
                        }
                        let ids: Vec<ObjectId> = (0..3u8)
                            .map(|k| {
                                let mut b = [0u8; 32];
                                b[..3].copy_from_slice(&[t as u8, i, k]);
                                ObjectId::manifest(scribe_format::ManifestId(b))
                            })
                            .collect();
                        // Workspace 7 is held to one pin: each of its pins
                        // is refused, without touching the others'.
                        let max = if t == 7 { 1 } else { 1 << 20 };
                        let before = db_end(repo);
                        match repo.pin_uploads_limited(ws, op, &ids, max) {
                            Ok(()) => {
                                assert_ne!(t, 7);
                                // Returned archived: HEAD on disk covers
                                // this pin's records (beyond `before`).
                                let head = archive::read_head(repo.archive().dir()).unwrap();
                                assert!(head.end > before, "{} <= {before}", head.end);
                            }
                            Err(err) => {
                                assert_eq!(t, 7, "{err}");
                                assert_eq!(err.code(), ErrorCode::LimitExceeded);
                            }
                        }
                    }
                    won
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(held.iter().sum::<usize>() > 0);
    assert!(
        e.repo.locks("").unwrap().is_empty(),
        "every lock taken was released"
    );
    for (t, ws) in workspaces.iter().enumerate() {
        let pins = e.repo.upload_pins(*ws).unwrap();
        assert_eq!(pins.len(), if t == 7 { 0 } else { 36 }, "workspace {t}");
    }
    let (pins_after, locks_after) = e.repo.write_combining();
    let lock_members = locks_after.members - locks_before.members;
    let pin_members = pins_after.members - pins_before.members;
    assert_eq!(pin_members, 8 * 12);
    assert!(lock_members >= 8 * 12);
    // Eight writers at once: transactions were shared.
    assert!(
        locks_after.transactions - locks_before.transactions < lock_members,
        "{locks_after:?}"
    );
    assert!(
        pins_after.transactions - pins_before.transactions < pin_members,
        "{pins_after:?}"
    );
    archive::verify(e.repo.archive().dir()).unwrap();
    assert_doctor_clean(&e.repo);
}

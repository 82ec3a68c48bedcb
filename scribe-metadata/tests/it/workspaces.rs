//! Workspace registry, lifecycle index, retirement fences; MVCC reads.

use scribe_format::{ErrorCode, OperationId, WorkspaceId};
use scribe_metadata::workspaces::{Registration, RetireOutcome};

use super::support::*;

fn reg(e: &Env, ws: WorkspaceId, owner: Option<[u8; 16]>) -> Registration {
    Registration {
        workspace: ws,
        owner,
        branch: e.main,
        view: vec!["art".into(), "code/engine".into()],
        label: "desk-01".into(),
        tags: vec!["ci".into()],
    }
}

#[test]
fn registration_counts_owners_and_retirement_fences() {
    let e = env();
    let owner = [5u8; 16];
    let a = WorkspaceId::random();
    let b = WorkspaceId::random();
    e.repo.register_workspace(&reg(&e, a, Some(owner))).unwrap();
    e.repo.register_workspace(&reg(&e, b, Some(owner))).unwrap();
    // Re-registration replaces the view and keeps the count.
    let mut again = reg(&e, a, Some(owner));
    again.view = vec!["sound".into()];
    let rec = e.repo.register_workspace(&again).unwrap();
    assert_eq!(rec.view, vec!["sound".to_owned()]);
    assert_eq!(e.repo.active_workspace_count(&owner).unwrap(), 2);
    // Another owner may not take it over.
    let err = e
        .repo
        .register_workspace(&reg(&e, a, Some([6; 16])))
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::Forbidden);
    let mut bad = reg(&e, WorkspaceId::random(), None);
    bad.tags = (0..17).map(|i| format!("t{i}")).collect();
    assert_eq!(
        e.repo.register_workspace(&bad).unwrap_err().code(),
        ErrorCode::LimitExceeded
    );

    // A workspace holding locks is not retired.
    e.repo.lock(&["art/x".into()], a, e.main, "ada").unwrap();
    let op = OperationId::random();
    let refused = e.repo.retire_workspace(a, op).unwrap();
    assert!(
        matches!(
            refused,
            RetireOutcome::Refused {
                code: ErrorCode::Busy,
                ..
            }
        ),
        "{refused:?}"
    );
    assert_eq!(
        e.repo.retire_workspace(a, op).unwrap(),
        refused,
        "the outcome is recorded"
    );
    e.repo.unlock(&["art/x".into()], a).unwrap();

    let op = OperationId::random();
    let done = e.repo.retire_workspace(a, op).unwrap();
    assert!(matches!(done, RetireOutcome::Retired { .. }));
    assert_eq!(e.repo.retire_workspace(a, op).unwrap(), done, "idempotent");
    let other = e.repo.retire_workspace(b, op).unwrap();
    assert!(matches!(
        other,
        RetireOutcome::Refused {
            code: ErrorCode::OperationIntentMismatch,
            ..
        }
    ));
    assert_eq!(e.repo.active_workspace_count(&owner).unwrap(), 1);
    assert!(e.repo.workspace(a).unwrap().is_none());

    // The fence refuses registration, locks and submissions.
    assert_eq!(
        e.repo
            .register_workspace(&reg(&e, a, Some(owner)))
            .unwrap_err()
            .code(),
        ErrorCode::WorkspaceRetired
    );
    assert_eq!(
        e.repo
            .lock(&["y".into()], a, e.main, "ada")
            .unwrap_err()
            .code(),
        ErrorCode::WorkspaceRetired
    );
    let o = e
        .repo
        .submit(submission_as(&e, a, vec![add(&e, "z", 1)]))
        .unwrap();
    assert_eq!(rejected(&o), ErrorCode::WorkspaceRetired);
    assert_doctor_clean(&e.repo);
}

#[test]
fn a_pinned_view_keeps_its_snapshot_while_acceptance_proceeds() {
    let e = env();
    let c1 = commit(&e, vec![add(&e, "a", 1)]);
    let mut view = e.repo.view().unwrap();
    // Acceptance from another thread while the view is open.
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..20u64 {
                commit(&e, vec![add(&e, &format!("f{i}"), i)]);
            }
        });
        for _ in 0..50 {
            assert!(view.stat(e.main, c1, "a").unwrap().is_some());
            assert_eq!(view.head(), c1);
        }
    });
    assert_eq!(
        view.list(e.main, c1, "", true, None, 100)
            .unwrap()
            .entries
            .len(),
        1
    );
    assert_eq!(e.repo.head().unwrap(), 21);
    let err = view.stat(e.main, 21, "a").unwrap_err();
    assert_eq!(
        err.code(),
        ErrorCode::NotFound,
        "the view does not see later changes"
    );
}

#[test]
fn concurrent_submitters_and_readers_serialise_through_the_gate() {
    let e = env();
    let c1 = commit(&e, vec![add(&e, "shared", 1)]);
    let outcomes = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let e = &e;
            let outcomes = &outcomes;
            s.spawn(move || {
                let ws = WorkspaceId::random();
                for i in 0..10u64 {
                    let p = format!("t{t}/f{i}");
                    let o = e
                        .repo
                        .submit(submission_as(e, ws, vec![add(e, &p, t * 100 + i)]))
                        .unwrap();
                    outcomes.lock().unwrap().push(accepted(&o));
                }
            });
        }
        // Two racing edits of one path from the same base: exactly one wins.
        let racers: Vec<_> = (0..2u64)
            .map(|k| {
                let e = &e;
                s.spawn(move || {
                    let o = e
                        .repo
                        .submit(submission(
                            e,
                            vec![scribe_format::changeset::Entry::edit(
                                "shared",
                                c1,
                                state(e, 1000 + k),
                            )],
                        ))
                        .unwrap();
                    matches!(o, scribe_metadata::accept::Outcome::Accepted { .. })
                })
            })
            .collect();
        for _ in 0..100 {
            assert!(e.repo.stat(e.main, c1, "shared").unwrap().is_some());
        }
        let wins = racers
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|w| *w)
            .count();
        assert_eq!(wins, 1);
    });
    let mut changes = outcomes.into_inner().unwrap();
    changes.sort();
    changes.dedup();
    assert_eq!(changes.len(), 40, "every acceptance has its own change");
    assert_eq!(e.repo.head().unwrap(), 42);
    assert_doctor_clean(&e.repo);
}

#[test]
fn upload_pins_are_owned_deactivated_by_the_outcome_and_cleaned_up() {
    use scribe_format::ObjectId;
    let e = env();
    let st = state(&e, 1);
    let s = submission(&e, vec![scribe_format::changeset::Entry::add("a", st)]);
    let ids = vec![
        ObjectId::manifest(st.manifest),
        ObjectId::change_set(s.change_set_id),
    ];
    // Only registered workspaces pin.
    let err = e.repo.pin_uploads(e.ws, s.operation, &ids).unwrap_err();
    assert_eq!(err.code(), ErrorCode::WorkspaceUnregistered);
    e.repo.register_workspace(&reg(&e, e.ws, None)).unwrap();
    e.repo.pin_uploads(e.ws, s.operation, &ids).unwrap();
    e.repo.pin_uploads(e.ws, s.operation, &ids).unwrap(); // idempotent
    assert_eq!(e.repo.upload_pins(e.ws).unwrap().len(), 2);
    let other = WorkspaceId::random();
    e.repo.register_workspace(&reg(&e, other, None)).unwrap();
    let err = e.repo.pin_uploads(other, s.operation, &ids).unwrap_err();
    assert_eq!(err.code(), ErrorCode::Forbidden);
    accepted(&e.repo.submit(s.clone()).unwrap());
    assert!(
        e.repo.upload_pins(e.ws).unwrap().is_empty(),
        "the outcome releases the intent's pins"
    );
    let err = e.repo.pin_uploads(e.ws, s.operation, &ids).unwrap_err();
    assert_eq!(
        err.code(),
        ErrorCode::AlreadyExists,
        "a finished intent cannot pin again"
    );
    // Cleanup removed the rows and markers.
    use redb::ReadableDatabase;
    let tx = e.repo.database().begin_read().unwrap();
    let pins = tx.open_table(scribe_metadata::tables::UPLOAD_PINS).unwrap();
    assert_eq!(redb::ReadableTableMetadata::len(&pins).unwrap(), 0);
    let meta = tx.open_table(scribe_metadata::tables::META).unwrap();
    assert!(redb::ReadableTable::get(
        &meta,
        scribe_metadata::pins::owner_key(&s.operation).as_str()
    )
    .unwrap()
    .is_none());
    assert_doctor_clean(&e.repo);
}

#[test]
fn listing_outcomes_and_retained_roots() {
    use scribe_format::ObjectId;
    let e = env();
    e.repo.register_workspace(&reg(&e, e.ws, None)).unwrap();
    assert_eq!(e.repo.workspaces().unwrap().len(), 1);
    let st = state(&e, 1);
    let s = submission(&e, vec![scribe_format::changeset::Entry::add("a", st)]);
    assert_eq!(e.repo.recorded_outcome(&s.operation).unwrap(), None);
    let o = e.repo.submit(s.clone()).unwrap();
    assert_eq!(
        e.repo.recorded_outcome(&s.operation).unwrap(),
        Some(o.clone())
    );
    let pending = OperationId::random();
    let extra = ObjectId::manifest(scribe_format::ManifestId([4; 32]));
    e.repo.pin_uploads(e.ws, pending, &[extra]).unwrap();
    let roots = e.repo.retained_roots().unwrap();
    let scribe_metadata::accept::Outcome::Accepted { commit_id, .. } = o else {
        panic!()
    };
    for id in [
        ObjectId::commit(commit_id),
        ObjectId::change_set(s.change_set_id),
        ObjectId::manifest(st.manifest),
        extra,
    ] {
        assert!(roots.contains(&id), "{id} retained");
    }
}

#[test]
fn pins_are_bounded_per_workspace_listed_and_abandoned() {
    use scribe_format::{ManifestId, ObjectId};
    use scribe_metadata::pins::PinOwnerState;
    let e = env();
    e.repo.register_workspace(&reg(&e, e.ws, None)).unwrap();
    let ids = |from: u8, n: u8| -> Vec<ObjectId> {
        (from..from + n)
            .map(|i| ObjectId::manifest(ManifestId([i; 32])))
            .collect()
    };
    let (op1, op2) = (OperationId::random(), OperationId::random());
    e.repo
        .pin_uploads_limited(e.ws, op1, &ids(0, 4), 6)
        .unwrap();
    e.repo
        .pin_uploads_limited(e.ws, op1, &ids(0, 4), 6)
        .unwrap();
    let err = e
        .repo
        .pin_uploads_limited(e.ws, op2, &ids(4, 3), 6)
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::LimitExceeded);
    e.repo
        .pin_uploads_limited(e.ws, op2, &ids(4, 2), 6)
        .unwrap();
    let summary = e.repo.pin_summary().unwrap();
    assert_eq!(summary.len(), 1);
    assert_eq!(summary[0].pins, 6);
    assert!(matches!(summary[0].state, PinOwnerState::Registered { .. }));
    let mut intents: Vec<(OperationId, u64, bool)> = summary[0].intents.clone();
    intents.sort();
    let mut want = vec![(op1, 4, false), (op2, 2, false)];
    want.sort();
    assert_eq!(intents, want);
    // Abandonment releases every unfinished pin and the intents' owners,
    // and the room comes back.
    assert_eq!(e.repo.abandon_pins(e.ws).unwrap(), 6);
    assert!(e.repo.pin_summary().unwrap().is_empty());
    use redb::ReadableDatabase;
    {
        let tx = e.repo.database().begin_read().unwrap();
        let meta = tx.open_table(scribe_metadata::tables::META).unwrap();
        assert!(
            redb::ReadableTable::get(&meta, scribe_metadata::pins::owner_key(&op1).as_str())
                .unwrap()
                .is_none()
        );
    }
    e.repo
        .pin_uploads_limited(e.ws, op1, &ids(10, 6), 6)
        .unwrap();
    assert_doctor_clean(&e.repo);
}

/// Transactions (journal commit boundaries) recorded in the outbox after
/// sequence `after`; with it, the outbox end.
fn transactions_after(e: &Env, after: u64) -> (u64, u64) {
    use redb::ReadableDatabase;
    use scribe_metadata::journal;
    let tx = e.repo.database().begin_read().unwrap();
    let end = journal::check_profile(&tx, std::path::Path::new("m"))
        .unwrap()
        .end;
    let records = tx.open_table(journal::RECORDS).unwrap();
    let mut boundaries = 0;
    for row in records.range(after + 1..).unwrap() {
        let (_, v) = row.unwrap();
        // `u8 version = 1`, then the opcode; 5 is the commit boundary.
        if v.value()[..2] == [1, 5] {
            boundaries += 1;
        }
    }
    (boundaries, end)
}

/// A group of accepted submissions that each pinned their uploads is
/// followed by one cleanup transaction for all of them (their pins, owners
/// and markers together, at most 512 pins), not one per member: before,
/// a group of four cost five transactions.
#[test]
fn a_group_of_finished_intents_is_cleaned_up_in_one_transaction() {
    use scribe_format::ObjectId;
    let e = env();
    e.repo.register_workspace(&reg(&e, e.ws, None)).unwrap();
    let mut subs = Vec::new();
    for i in 0..4 {
        let st = state(&e, 10 + i);
        let s = submission(
            &e,
            vec![scribe_format::changeset::Entry::add(format!("f{i}"), st)],
        );
        let ids = vec![
            ObjectId::manifest(st.manifest),
            ObjectId::change_set(s.change_set_id),
        ];
        e.repo.pin_uploads(e.ws, s.operation, &ids).unwrap();
        subs.push(s);
    }
    assert_eq!(e.repo.upload_pins(e.ws).unwrap().len(), 8);
    let (_, before) = transactions_after(&e, 0);
    let out = e.repo.submit_group(subs).unwrap();
    assert_eq!(
        out.iter().map(accepted).collect::<Vec<_>>(),
        vec![1, 2, 3, 4]
    );
    let (transactions, _) = transactions_after(&e, before);
    assert_eq!(
        transactions, 2,
        "the acceptance and one cleanup for the four intents"
    );
    assert!(e.repo.upload_pins(e.ws).unwrap().is_empty());
    use redb::ReadableDatabase;
    let tx = e.repo.database().begin_read().unwrap();
    let meta = tx.open_table(scribe_metadata::tables::META).unwrap();
    for row in redb::ReadableTable::iter(&meta).unwrap() {
        let (k, _) = row.unwrap();
        assert!(
            !k.value().starts_with("upload-"),
            "{} left behind",
            k.value()
        );
    }
    assert_doctor_clean(&e.repo);
}

/// An intent with more than 512 pins is still cleaned in batches of at
/// most 512, and an intent finished beside it is cleaned too.
#[test]
fn a_large_finished_intent_is_cleaned_in_batches_beside_a_small_one() {
    use scribe_format::{ManifestId, ObjectId};
    let e = env();
    e.repo.register_workspace(&reg(&e, e.ws, None)).unwrap();
    let mut subs = Vec::new();
    for i in 0..2 {
        let st = state(&e, 20 + i);
        let s = submission(
            &e,
            vec![scribe_format::changeset::Entry::add(format!("g{i}"), st)],
        );
        let mut ids = vec![
            ObjectId::manifest(st.manifest),
            ObjectId::change_set(s.change_set_id),
        ];
        if i == 0 {
            // Pins may name absent objects.
            for k in 0..1100u32 {
                let mut d = [9u8; 32];
                d[..4].copy_from_slice(&k.to_le_bytes());
                ids.push(ObjectId::manifest(ManifestId(d)));
            }
        }
        e.repo.pin_uploads(e.ws, s.operation, &ids).unwrap();
        subs.push(s);
    }
    assert_eq!(e.repo.upload_pins(e.ws).unwrap().len(), 1104);
    let (_, before) = transactions_after(&e, 0);
    e.repo.submit_group(subs).unwrap();
    let (transactions, _) = transactions_after(&e, before);
    // The acceptance, three batches (512 + 512 + 78) for the large intent
    // and one for the small one.
    assert_eq!(transactions, 5);
    assert!(e.repo.upload_pins(e.ws).unwrap().is_empty());
    assert_doctor_clean(&e.repo);
}

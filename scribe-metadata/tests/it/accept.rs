//! Acceptance: every validation, envelopes, idempotency.

use scribe_format::changeset::Entry;
use scribe_format::{ErrorCode, ObjectId, WorkspaceId};
use scribe_metadata::accept::Outcome;
use scribe_metadata::ObjectPresence;

use super::support::*;

#[test]
fn accept_edit_delete_and_read_back() {
    let e = env();
    let c1 = commit(
        &e,
        vec![
            add(&e, "art/a.png", 1),
            add(&e, "art/b.png", 2),
            add(&e, "readme", 3),
        ],
    );
    let c2 = commit(
        &e,
        vec![
            Entry::edit("art/a.png", c1, state(&e, 4)),
            Entry::delete("readme", c1),
        ],
    );
    assert_eq!((c1, c2), (1, 2));
    let s = e.repo.stat(e.main, c2, "art/a.png").unwrap().expect("live");
    assert_eq!(s.change, 2);
    assert_eq!(s.record.size, 4);
    assert!(e.repo.stat(e.main, c2, "readme").unwrap().is_none());
    assert!(e.repo.stat(e.main, c1, "readme").unwrap().is_some());
    let d = e.repo.describe(c2).unwrap();
    assert_eq!(d.paths.len(), 2);
    assert_eq!(d.record.entry_count, 2);
    assert_eq!(d.record.parent, 1);
    let log = e.repo.log(e.main, None, 10).unwrap();
    assert_eq!(log.iter().map(|l| l.change).collect::<Vec<_>>(), vec![2, 1]);
    let h = e.repo.history(e.main, "art/a.png").unwrap();
    assert_eq!(h.iter().map(|r| r.change).collect::<Vec<_>>(), vec![1, 2]);
    assert_doctor_clean(&e.repo);
}

#[test]
fn envelopes_chain_and_are_durable_in_the_store() {
    let e = env();
    let o1 = e
        .repo
        .submit(submission(&e, vec![add(&e, "a", 1)]))
        .unwrap();
    let o2 = e
        .repo
        .submit(submission(&e, vec![Entry::edit("a", 1, state(&e, 2))]))
        .unwrap();
    let (Outcome::Accepted { commit_id: id1, .. }, Outcome::Accepted { commit_id: id2, .. }) =
        (&o1, &o2)
    else {
        panic!("accepted")
    };
    assert!(e.objects.contains(&ObjectId::commit(*id1)).unwrap());
    let bytes = scribe_metadata::CommitSink::read_commit(&*e.objects, &ObjectId::commit(*id2))
        .unwrap()
        .unwrap();
    let scribe_format::commit::StoredCommit::V5(env) =
        scribe_format::commit::StoredCommit::decode(&bytes).unwrap()
    else {
        panic!("v5")
    };
    assert_eq!(env.parent_commit, Some(*id1));
    assert_eq!(env.payload.parent_change, 1);
    assert_eq!(scribe_format::commit::commit_id(&bytes).unwrap(), *id2);
    let root = e.repo.view().unwrap();
    drop(root);
}

#[test]
fn stale_bases_and_absent_paths_are_refused_and_write_nothing_else() {
    let e = env();
    let c1 = commit(&e, vec![add(&e, "a", 1)]);
    commit(&e, vec![Entry::edit("a", c1, state(&e, 2))]);
    let stale = e
        .repo
        .submit(submission(&e, vec![Entry::edit("a", c1, state(&e, 3))]))
        .unwrap();
    assert_eq!(rejected(&stale), ErrorCode::BaseMismatch);
    if let Outcome::Rejected { paths, .. } = &stale {
        assert_eq!(paths, &vec!["a".to_owned()]);
    }
    let exists = e
        .repo
        .submit(submission(&e, vec![add(&e, "a", 4)]))
        .unwrap();
    assert_eq!(rejected(&exists), ErrorCode::BaseMismatch);
    let absent = e
        .repo
        .submit(submission(&e, vec![Entry::delete("nope", 1)]))
        .unwrap();
    assert_eq!(rejected(&absent), ErrorCode::NotPresent);
    assert_eq!(e.repo.head().unwrap(), 2);
    assert_doctor_clean(&e.repo);
}

#[test]
fn malformed_change_sets_are_refused_by_name() {
    let e = env();
    let c1 = commit(&e, vec![add(&e, "a", 1)]);
    let cases: Vec<(Vec<Entry>, ErrorCode)> = vec![
        (vec![], ErrorCode::EmptySubmission),
        (
            vec![add(&e, "b", 1), add(&e, "a2", 2)],
            ErrorCode::Malformed,
        ),
        (vec![add(&e, "../x", 1)], ErrorCode::InvalidPath),
        (vec![add(&e, "x/.scribe", 1)], ErrorCode::InvalidPath),
        (vec![Entry::keep("a", c1)], ErrorCode::Malformed),
        (vec![Entry::delete("a", 0)], ErrorCode::Malformed),
        (
            vec![add(&e, "b", 1).moved_from("a", c1)],
            ErrorCode::Malformed,
        ),
        (
            vec![
                Entry::delete("a", c1),
                add(&e, "b", 1).moved_from("a", c1 + 1),
            ],
            ErrorCode::Malformed,
        ),
        (
            vec![
                Entry::delete("a", c1),
                add(&e, "b", 1).moved_from("a", c1),
                add(&e, "c", 2).moved_from("a", c1),
            ],
            ErrorCode::Malformed,
        ),
    ];
    for (i, (entries, code)) in cases.into_iter().enumerate() {
        let o = e.repo.submit(submission(&e, entries)).unwrap();
        assert_eq!(rejected(&o), code, "case {i}");
    }
    let mut long = submission(&e, vec![add(&e, "z", 1)]);
    long.author = "x".repeat(300);
    assert_eq!(
        rejected(&e.repo.submit(long).unwrap()),
        ErrorCode::LimitExceeded
    );
    assert_eq!(e.repo.head().unwrap(), 1);
    assert_doctor_clean(&e.repo);
}

#[test]
fn paths_colliding_under_folding_are_refused_but_case_only_renames_apply() {
    let e = env();
    let c1 = commit(&e, vec![add(&e, "Art/Hero.png", 1)]);
    let o = e
        .repo
        .submit(submission(&e, vec![add(&e, "art/hero.png", 2)]))
        .unwrap();
    assert_eq!(rejected(&o), ErrorCode::PathCollision);
    let o = e
        .repo
        .submit(submission(
            &e,
            vec![add(&e, "Straße", 2), add(&e, "strasse", 3)],
        ))
        .unwrap();
    assert_eq!(rejected(&o), ErrorCode::PathCollision);
    // A case-only rename: the deletion applies first.
    let c2 = commit(
        &e,
        vec![
            Entry::delete("Art/Hero.png", c1),
            add(&e, "Art/hero.png", 4).moved_from("Art/Hero.png", c1),
        ],
    );
    assert!(e.repo.stat(e.main, c2, "Art/hero.png").unwrap().is_some());
    assert!(e.repo.stat(e.main, c2, "Art/Hero.png").unwrap().is_none());
    // And the collision tree now names the live spelling.
    let o = e
        .repo
        .submit(submission(&e, vec![add(&e, "ART/HERO.PNG", 5)]))
        .unwrap();
    assert_eq!(rejected(&o), ErrorCode::PathCollision);
    assert_doctor_clean(&e.repo);
}

#[test]
fn submissions_naming_absent_objects_are_refused() {
    let e = env();
    let o = e
        .repo
        .submit(submission(&e, vec![Entry::add("a", absent_state(1))]))
        .unwrap();
    assert_eq!(rejected(&o), ErrorCode::MissingObjects);
    // The change set object itself must be present.
    let s = submission(&e, vec![add(&e, "b", 1)]);
    let cs_file = e
        .repo
        .dir()
        .join("objects/interim")
        .join(format!("03{}", s.change_set_id));
    std::fs::remove_file(cs_file).unwrap();
    assert_eq!(
        rejected(&e.repo.submit(s).unwrap()),
        ErrorCode::MissingObjects
    );
    // A change set id that is not the identity of the entries is malformed.
    let mut s = submission(&e, vec![add(&e, "c", 1)]);
    s.change_set_id = scribe_format::ChangeSetId([9; 32]);
    assert_eq!(rejected(&e.repo.submit(s).unwrap()), ErrorCode::Malformed);
    assert_eq!(e.repo.head().unwrap(), 0);
    assert_doctor_clean(&e.repo);
}

#[test]
fn retries_return_the_recorded_outcome_forever_and_other_intent_mismatches() {
    let e = env();
    let s = submission(&e, vec![add(&e, "a", 1)]);
    let first = e.repo.submit(s.clone()).unwrap();
    // Another submission moves the head; the retry still answers change 1.
    commit(&e, vec![add(&e, "b", 2)]);
    assert_eq!(e.repo.submit(s.clone()).unwrap(), first);
    // The author is not intent.
    let mut renamed = s.clone();
    renamed.author = "someone else".into();
    assert_eq!(e.repo.submit(renamed).unwrap(), first);
    let mut other = s.clone();
    other.message = "different".into();
    assert_eq!(
        rejected(&e.repo.submit(other).unwrap()),
        ErrorCode::OperationIntentMismatch
    );
    // A rejection is recorded too.
    let bad = submission(&e, vec![Entry::delete("zzz", 5)]);
    let r1 = e.repo.submit(bad.clone()).unwrap();
    commit(&e, vec![add(&e, "zzz", 3)]);
    assert_eq!(e.repo.submit(bad).unwrap(), r1);
    assert_eq!(e.repo.head().unwrap(), 3);
    assert_doctor_clean(&e.repo);
}

#[test]
fn locks_of_other_workspaces_refuse_and_submit_releases_own_locks() {
    let e = env();
    let other = WorkspaceId::random();
    let c1 = commit(&e, vec![add(&e, "a", 1), add(&e, "b", 2)]);
    e.repo.lock(&["a".into()], other, e.main, "bob").unwrap();
    let o = e
        .repo
        .submit(submission(&e, vec![Entry::edit("a", c1, state(&e, 3))]))
        .unwrap();
    assert_eq!(rejected(&o), ErrorCode::LockedByOther);
    let err = e
        .repo
        .lock(&["a".into()], e.ws, e.main, "ada")
        .err()
        .unwrap();
    assert_eq!(err.code(), ErrorCode::LockedByOther);
    let epoch = e.repo.lock_epoch().unwrap();
    let got = e.repo.lock(&["b".into()], e.ws, e.main, "ada").unwrap();
    assert_eq!(got.len(), 1);
    assert!(e.repo.lock_epoch().unwrap() > epoch);
    assert_eq!(e.repo.workspace_locks(e.ws).unwrap(), vec!["b".to_owned()]);
    // keep-locks retains, the default releases.
    let mut keep = submission(&e, vec![Entry::edit("b", c1, state(&e, 4))]);
    keep.keep_locks = true;
    let c2 = accepted(&e.repo.submit(keep).unwrap());
    assert_eq!(e.repo.locks("").unwrap().len(), 2);
    commit(&e, vec![Entry::edit("b", c2, state(&e, 5))]);
    let left = e.repo.locks("").unwrap();
    assert_eq!(
        left.iter().map(|l| l.path.as_str()).collect::<Vec<_>>(),
        vec!["a"]
    );
    assert!(e.repo.workspace_locks(e.ws).unwrap().is_empty());
    // Required locks.
    let mut req = submission(&e, vec![add(&e, "c", 6)]);
    req.required_locks = vec!["c".into()];
    assert_eq!(
        rejected(&e.repo.submit(req).unwrap()),
        ErrorCode::LockRequired
    );
    assert_eq!(e.repo.unlock(&["a".into()], other).unwrap(), 1);
    assert_doctor_clean(&e.repo);
}

#[test]
fn buffered_groups_share_one_transaction_with_their_own_changes() {
    let e = env();
    let subs: Vec<_> = (0..10)
        .map(|i| submission(&e, vec![add(&e, &format!("f{i}"), i)]))
        .collect();
    let out = e.repo.submit_group(subs.clone()).unwrap();
    let changes: Vec<u64> = out.iter().map(accepted).collect();
    assert_eq!(changes, (1..=10).collect::<Vec<_>>());
    assert_eq!(e.repo.submit_group(subs).unwrap(), out);
    assert_doctor_clean(&e.repo);
}

#[test]
fn every_refusal_leaves_the_repository_as_before_across_reopen() {
    let e = env();
    let c1 = commit(
        &e,
        vec![
            add(&e, "Art/Hero.png", 1),
            add(&e, "b", 2),
            add(&e, "locked", 3),
        ],
    );
    commit(&e, vec![Entry::edit("b", c1, state(&e, 4))]);
    e.repo
        .lock(&["locked".into()], WorkspaceId::random(), e.main, "bob")
        .unwrap();
    let before = dump(&e.repo, false);
    let refusals: Vec<(Vec<Entry>, ErrorCode)> = vec![
        (vec![add(&e, "z", 5), add(&e, "a", 6)], ErrorCode::Malformed),
        (vec![add(&e, "art/hero.png", 5)], ErrorCode::PathCollision),
        (
            vec![Entry::edit("b", c1, state(&e, 5))],
            ErrorCode::BaseMismatch,
        ),
        (vec![Entry::delete("nope", c1)], ErrorCode::NotPresent),
        (
            vec![Entry::add("new", absent_state(9))],
            ErrorCode::MissingObjects,
        ),
        (
            vec![Entry::edit("locked", c1, state(&e, 5))],
            ErrorCode::LockedByOther,
        ),
    ];
    let mut first = None;
    for (entries, code) in refusals {
        let s = submission(&e, entries);
        assert_eq!(rejected(&e.repo.submit(s.clone()).unwrap()), code);
        first.get_or_insert(s);
    }
    let mut other = first.unwrap();
    other.message = "other intent".into();
    assert_eq!(
        rejected(&e.repo.submit(other).unwrap()),
        ErrorCode::OperationIntentMismatch
    );
    assert!(
        before == dump(&e.repo, false),
        "a refusal wrote more than its outcome"
    );
    let dir = e.root.dir().to_owned();
    let Env {
        dir: _keep,
        root,
        repo,
        ..
    } = e;
    drop(repo);
    drop(root);
    let root = reopen(&dir);
    let repo = root.open_repository_by_name("game").unwrap();
    assert!(
        before == dump(&repo, false),
        "reopen changed the repository"
    );
    assert_doctor_clean(&repo);
}

#[test]
fn change_notes_append_revisions_and_doctor_checks_them() {
    let e = env();
    let c1 = commit(&e, vec![add(&e, "a", 1)]);
    assert_eq!(
        e.repo.add_change_note(c1, "ada", "better words").unwrap(),
        1
    );
    assert_eq!(e.repo.add_change_note(c1, "bob", "best words").unwrap(), 2);
    let notes = e.repo.change_notes(c1).unwrap();
    assert_eq!(
        notes.iter().map(|n| n.text.as_str()).collect::<Vec<_>>(),
        vec!["better words", "best words"]
    );
    assert_eq!(
        e.repo.describe(c1).unwrap().record.message,
        "work",
        "the commit record is untouched"
    );
    assert_eq!(
        e.repo.add_change_note(9, "ada", "x").unwrap_err().code(),
        ErrorCode::NotFound
    );
    assert_doctor_clean(&e.repo);
    // A gap in the revisions is reported.
    let w = e.repo.database().begin_write().unwrap();
    {
        let mut t = w.open_table(scribe_metadata::tables::CHANGE_NOTES).unwrap();
        let v = t
            .remove(scribe_metadata::notes::note_key(c1, 2).as_slice())
            .unwrap()
            .unwrap()
            .value()
            .to_vec();
        t.insert(
            scribe_metadata::notes::note_key(c1, 3).as_slice(),
            v.as_slice(),
        )
        .unwrap();
    }
    w.commit().unwrap();
    assert!(e.repo.doctor().unwrap().has("metadata.change-notes"));
}

/// A streamed submission's manifests are checked beside its staging
/// (issue 19: the check no longer holds the staging up). A refusal found
/// there, here an entry whose size is not its manifest's, still wins:
/// the staged rows and the reservation are discarded, the refusal is
/// recorded (a retry replays it), nothing of the change is visible, and
/// the repository accepts the next submission as change 1.
#[test]
fn a_streamed_submission_with_an_invalid_manifest_is_refused_after_its_staging() {
    use redb::{ReadableDatabase, ReadableTableMetadata};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    let e = env();
    let staged = Arc::new(AtomicU64::new(0));
    {
        let staged = staged.clone();
        e.repo.set_stage_hook(Some(Box::new(move |n| {
            staged.fetch_max(n, Ordering::SeqCst);
        })));
    }
    let mut entries: Vec<Entry> = (0..600)
        .map(|i| add(&e, &format!("tree/d{:02}/f{i:04}.txt", i % 17), 50 + i))
        .collect();
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    let liar = entries[300].path.clone();
    entries[300].state.as_mut().unwrap().size += 1;
    let s = submission(&e, entries);
    let o = e.repo.submit(s.clone()).unwrap();
    assert_eq!(rejected(&o), ErrorCode::InvalidManifest, "{o:?}");
    if let Outcome::Rejected { paths, .. } = &o {
        assert_eq!(paths, &vec![liar.clone()]);
    }
    assert!(
        staged.load(Ordering::SeqCst) > 0,
        "the submission was refused before any staging transaction: the check did not run beside it"
    );
    e.repo.set_stage_hook(None);
    {
        let tx = e.repo.database().begin_read().unwrap();
        let stage = tx
            .open_table(scribe_metadata::tables::SUBMIT_STAGE)
            .unwrap();
        assert_eq!(stage.len().unwrap(), 0, "staged rows left behind");
        let m = tx.open_table(scribe_metadata::tables::META).unwrap();
        assert!(m.get("pending-submit").unwrap().is_none());
    }
    assert_eq!(e.repo.head().unwrap(), 0);
    assert!(e.repo.history(e.main, &liar).unwrap().is_empty());
    assert_doctor_clean(&e.repo);
    // Recorded: the same operation replays its refusal.
    assert_eq!(e.repo.submit(s).unwrap(), o);
    assert_eq!(commit(&e, vec![add(&e, "after.txt", 7)]), 1);
    assert_doctor_clean(&e.repo);
}

/// A streamed preparation flushes one staging transaction in sixteen; the
/// flush carries the unflushed ones before it (docs/metadata.md, "Staging
/// flushes"). The archive never names a record a power loss could take
/// back: after every staging transaction `HEAD` is at most the durable
/// end, which equals the outbox's end exactly after each sixteenth one and
/// lies below it after the others. Once accepted, all three are equal.
#[test]
fn a_streamed_preparation_flushes_one_staging_transaction_in_sixteen() {
    use std::sync::{Arc, Mutex};
    let e = env();
    // (staging transaction, archive HEAD, durable end, outbox end)
    let seen = Arc::new(Mutex::new(Vec::<(u64, u64, u64, u64)>::new()));
    {
        let seen = seen.clone();
        let repo = e.repo.clone();
        e.repo.set_stage_hook(Some(Box::new(move |n| {
            let end = {
                let tx = redb::ReadableDatabase::begin_read(repo.database()).unwrap();
                scribe_metadata::journal::check_profile(&tx, std::path::Path::new("m"))
                    .unwrap()
                    .end
            };
            let a = repo.archive();
            seen.lock()
                .unwrap()
                .push((n, a.head().end, a.durable_end(), end));
        })));
    }
    let mut entries: Vec<Entry> = (0..1_600)
        .map(|i| add(&e, &format!("bulk/d{:02}/f{i:05}.txt", i % 23), 10 + i))
        .collect();
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    let flushes = e.repo.archive().flushes();
    let o = e.repo.submit(submission(&e, entries)).unwrap();
    assert_eq!(accepted(&o), 1, "{o:?}");
    let flushes = e.repo.archive().flushes() - flushes;
    e.repo.set_stage_hook(None);
    let seen = seen.lock().unwrap().clone();
    assert!(seen.len() > 16, "only {} staging transactions", seen.len());
    // The reservation, one staging transaction in sixteen, the flush before
    // the gate, the acceptance and the inventory's discard.
    assert!(
        flushes <= seen.len() as u64 / 16 + 4,
        "{flushes} flushed commits for {} staging transactions",
        seen.len()
    );
    for &(n, head, durable, end) in &seen {
        assert!(
            head <= durable,
            "transaction {n}: HEAD {head} beyond the durable end {durable}"
        );
        if n % 16 == 0 {
            assert_eq!(durable, end, "transaction {n} was not flushed");
        } else {
            assert!(
                durable < end,
                "transaction {n} was flushed ({durable} = {end})"
            );
        }
    }
    let a = e.repo.archive();
    let end = {
        let tx = redb::ReadableDatabase::begin_read(e.repo.database()).unwrap();
        scribe_metadata::journal::check_profile(&tx, std::path::Path::new("m"))
            .unwrap()
            .end
    };
    assert_eq!((a.head().end, a.durable_end()), (end, end));
    assert_doctor_clean(&e.repo);
}

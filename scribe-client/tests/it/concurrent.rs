//! Many clients at once: reads never wait for a submission, submissions
//! to one repository are serialised, shutdown lets an acceptance finish.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use scribe_format::wire::message as m;
use scribe_format::{OperationId, WorkspaceId};

use super::support::*;

/// A change large enough for streamed preparation (its staging
/// transactions call the repository's stage hook).
fn large_change(prefix: &str) -> Change {
    let names: Vec<String> = (0..100).map(|i| format!("{prefix}/f{i:03}")).collect();
    let entries: Vec<(&str, Option<&[u8]>, u64)> = names
        .iter()
        .map(|n| (n.as_str(), Some(n.as_bytes()), 0))
        .collect();
    change(&entries)
}

/// Block the first staging transaction until `release` receives.
fn hold_first_stage(env: &Env) -> (mpsc::Receiver<()>, mpsc::Sender<()>) {
    let (entered_tx, entered) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    let once = AtomicBool::new(false);
    let entered_tx = Mutex::new(entered_tx);
    let release_rx = Mutex::new(release_rx);
    let repo = env.service().root().open_repository_by_name(REPO).unwrap();
    repo.set_stage_hook(Some(Box::new(move |_| {
        if !once.swap(true, Ordering::SeqCst) {
            let _ = entered_tx.lock().unwrap().send(());
            let _ = release_rx.lock().unwrap().recv();
        }
    })));
    (entered, release)
}

#[test]
fn reads_do_not_wait_for_a_submission_in_progress() {
    let env = Env::new(Transport::Tcp);
    let mut c = env.client();
    let ws = WorkspaceId([1; 16]);
    register(&mut c, ws);
    let first = accepted(&upload_and_submit(
        &mut c,
        ws,
        OperationId([1; 16]),
        &change(&[("a", Some(b"a"), 0)]),
        "one",
    ));
    let big = large_change("big");
    c.upload_missing(
        REPO,
        ws,
        OperationId([2; 16]),
        big.objects.iter().map(|(id, b)| (*id, b.as_slice())),
    )
    .unwrap();
    let (entered, release) = hold_first_stage(&env);
    let url = env.url().to_string();
    let submitter = std::thread::spawn(move || {
        let mut c = scribe_client::connect(&url, &Default::default()).unwrap();
        c.submit(submit_req(ws, OperationId([2; 16]), big.id, "big"))
            .unwrap()
    });
    entered.recv().unwrap();
    // The submission is mid-preparation; every read answers now.
    let mut r = env.client();
    let log = r
        .log(m::Log {
            repo: REPO.into(),
            branch: main_branch(),
            before: 0,
            limit: 0,
        })
        .unwrap();
    assert_eq!(log.commits.len(), 1);
    let st = r
        .stat(m::Stat {
            repo: REPO.into(),
            branch: main_branch(),
            change: 0,
            path: "a".into(),
        })
        .unwrap();
    assert_eq!(st.change, first);
    assert_eq!(r.status().unwrap().repositories, 1);
    assert!(r.objects_missing(REPO, &[big_first_object()]).is_ok());
    release.send(()).unwrap();
    let o = submitter.join().unwrap();
    let n = accepted(&o);
    assert_eq!(n, first + 1);
    let listed = r
        .list(m::List {
            repo: REPO.into(),
            branch: main_branch(),
            change: 0,
            prefix: "big".into(),
            recursive: true,
            after: String::new(),
            limit: 0,
        })
        .unwrap();
    assert_eq!(listed.entries.len(), 100);
}

fn big_first_object() -> scribe_format::ObjectId {
    file(b"big/f000").objects[0].0
}

#[test]
fn shutdown_lets_an_acceptance_in_progress_finish() {
    let mut env = Env::new(Transport::Tcp);
    let mut c = env.client();
    let ws = WorkspaceId([1; 16]);
    register(&mut c, ws);
    let big = large_change("big");
    let op = OperationId([3; 16]);
    c.upload_missing(
        REPO,
        ws,
        op,
        big.objects.iter().map(|(id, b)| (*id, b.as_slice())),
    )
    .unwrap();
    drop(c);
    let (entered, release) = hold_first_stage(&env);
    let url = env.url().to_string();
    let id = big.id;
    let submitter = std::thread::spawn(move || {
        let mut c = scribe_client::connect(&url, &Default::default()).unwrap();
        c.submit(submit_req(ws, op, id, "big"))
    });
    entered.recv().unwrap();
    let server = env.take_listener();
    let addr = server.addr();
    let stopper = std::thread::spawn(move || server.shutdown());
    // Wait until the listener has stopped accepting: shutdown has begun
    // while the submission is still held mid-preparation.
    while std::net::TcpStream::connect(addr).is_ok() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    release.send(()).unwrap();
    // The in-flight submission was answered before the server stopped.
    let o = submitter.join().unwrap().expect("answered during shutdown");
    accepted(&o);
    stopper.join().unwrap();
    let mut local = scribe_client::Client::in_process(env.service().clone());
    assert_eq!(local.operation_outcome(REPO, op).unwrap(), Some(o));
}

#[test]
fn many_clients_submit_and_lock_concurrently() {
    let env = Env::new(Transport::Tcp);
    // Every group's pin cleanup follows its answers (the cleanup thread),
    // even a lone submission's: none may be left behind below.
    env.service().cleaner().set_always(true);
    let url = env.url().to_string();
    let results = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..8u8)
        .map(|t| {
            let url = url.clone();
            let results = results.clone();
            std::thread::spawn(move || {
                let mut c = scribe_client::connect(&url, &Default::default()).unwrap();
                let ws = WorkspaceId([t + 1; 16]);
                register(&mut c, ws);
                for i in 0..4u8 {
                    let path = format!("t{t}/file{i}");
                    let content = format!("{t}-{i}");
                    let op = OperationId([t * 16 + i + 1; 16]);
                    let o = upload_and_submit(
                        &mut c,
                        ws,
                        op,
                        &change(&[(path.as_str(), Some(content.as_bytes()), 0)]),
                        "concurrent",
                    );
                    let lock = format!("locks/{t}");
                    c.lock_acquire(m::LockAcquire {
                        repo: REPO.into(),
                        workspace: ws,
                        branch: main_branch(),
                        author: "a".into(),
                        paths: vec![lock.clone()],
                    })
                    .unwrap();
                    c.lock_release(m::LockRelease {
                        repo: REPO.into(),
                        workspace: ws,
                        paths: vec![lock],
                    })
                    .unwrap();
                    results.lock().unwrap().push(accepted(&o));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut changes = results.lock().unwrap().clone();
    changes.sort();
    assert_eq!(
        changes,
        (1..=32).collect::<Vec<u64>>(),
        "each acceptance got its own change"
    );
    let report = scribe_server::admin::live_objects(
        &env.service().root().open_repository_by_name(REPO).unwrap(),
        &env.service()
            .stores()
            .get(&env.service().root().repository_id(REPO).unwrap())
            .unwrap(),
    )
    .unwrap();
    assert!(report.len() >= 32 * 3);
    // The finished intents' pins are cleaned up after the answers (the
    // service's cleanup thread), none left behind and no run failed.
    assert_eq!(env.service().cleaner().settle(), 0);
    let held = env
        .service()
        .root()
        .open_repository_by_name(REPO)
        .unwrap()
        .pin_summary()
        .unwrap();
    assert!(held.is_empty(), "{held:?}");
    let doctor = env
        .service()
        .root()
        .open_repository_by_name(REPO)
        .unwrap()
        .doctor()
        .unwrap();
    assert!(doctor.is_clean(), "{:?}", doctor.problems);
}

#[test]
fn a_retry_racing_its_original_gets_the_same_outcome() {
    let env = Env::new(Transport::Tcp);
    let url = env.url().to_string();
    let ws = WorkspaceId([1; 16]);
    let mut c = env.client();
    register(&mut c, ws);
    let op = OperationId([8; 16]);
    let ch = change(&[("race.txt", Some(b"race"), 0)]);
    c.upload_missing(
        REPO,
        ws,
        op,
        ch.objects.iter().map(|(id, b)| (*id, b.as_slice())),
    )
    .unwrap();
    // Several connections send the same submission at once.
    let threads: Vec<_> = (0..6)
        .map(|_| {
            let url = url.clone();
            let id = ch.id;
            std::thread::spawn(move || {
                let mut c = scribe_client::connect(&url, &Default::default()).unwrap();
                c.submit(submit_req(ws, op, id, "race")).unwrap()
            })
        })
        .collect();
    let outcomes: Vec<m::Outcome> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let n = accepted(&outcomes[0]);
    assert!(outcomes.iter().all(|o| *o == outcomes[0]), "{outcomes:?}");
    assert_eq!(c.repo_list().unwrap()[0].head, n);
    assert_eq!(n, 1);
}

/// A streamed submission is answered before its pins (one per uploaded
/// object) are deleted: the service's cleanup thread deletes them after
/// the answer, and none is left behind.
#[test]
fn a_streamed_submissions_pins_are_cleaned_up_after_its_answer() {
    let env = Env::new(Transport::Tcp);
    let mut c = env.client();
    let ws = WorkspaceId([1; 16]);
    register(&mut c, ws);
    let big = large_change("big");
    let op = OperationId([2; 16]);
    let o = upload_and_submit(&mut c, ws, op, &big, "big");
    accepted(&o);
    assert_eq!(env.service().cleaner().settle(), 0, "no cleanup run failed");
    let repo = env.service().root().open_repository_by_name(REPO).unwrap();
    let held = repo.pin_summary().unwrap();
    assert!(held.is_empty(), "{held:?}");
    let doctor = repo.doctor().unwrap();
    assert!(doctor.is_clean(), "{:?}", doctor.problems);
}

//! People and agents on one store: a person's submit is what the agent
//! reads; a person's lock refuses the agent's write.

use scribe_format::wire::message as m;
use scribe_format::wire::Request;
use scribe_format::{OperationId, WorkspaceId};
use scribe_testkit::change::{change, main_branch, Requests};
use scribe_testkit::env::{Env, Transport, REPO};
use serde_json::json;

use super::support::{err, ok, workbench};

#[test]
fn a_persons_submit_is_read_and_their_lock_is_honoured() {
    let env = Env::new(Transport::Tcp);
    let mut wb = workbench(&env);
    ok(&mut wb, "workbench_create", json!({"id": "job"}));
    let put = ok(
        &mut wb,
        "workbench_put_file",
        json!({"id": "job", "section": "input", "path": "cfg.txt", "text": "agent"}),
    );
    let mut person = env.connect();
    let ws = WorkspaceId::random();
    person.register(ws);
    let base = put["generation"].as_u64().unwrap();
    let out = person.upload_and_submit(
        ws,
        OperationId::random(),
        &change(&[("job/input/cfg.txt", Some(b"person".as_slice()), base)]),
        "tweak",
    );
    assert_eq!(out.code, 0, "{}", out.detail);
    let r = ok(
        &mut wb,
        "workbench_read",
        json!({"id": "job", "section": "input", "path": "cfg.txt"}),
    );
    assert_eq!(r["lines"], json!(["person"]));
    assert_eq!(r["generation"], out.change);
    assert_eq!(r["content_type"], "text/plain");
    // The person locks the file; the agent's replace is refused by name.
    let locked = person.ask(Request::LockAcquire(m::LockAcquire {
        repo: REPO.into(),
        workspace: ws,
        branch: main_branch(),
        author: "ada".into(),
        paths: vec!["job/input/cfg.txt".into()],
    }));
    assert!(
        matches!(locked, scribe_format::wire::Response::LocksAcquired(_)),
        "{locked:?}"
    );
    let e = err(
        &mut wb,
        "workbench_put_file",
        json!({"id": "job", "section": "input", "path": "cfg.txt", "text": "agent2", "replace": true}),
    );
    assert_eq!((e.code, e.retryable), ("locked", true));
}

#[test]
fn a_person_with_a_view_of_the_workbench_gets_the_agents_outputs() {
    let env = Env::new(Transport::Tcp);
    let mut wb = workbench(&env);
    ok(&mut wb, "workbench_create", json!({"id": "job"}));
    ok(
        &mut wb,
        "workbench_put_file",
        json!({"id": "job", "section": "outputs", "path": "model/w.bin", "base64": "AAEC"}),
    );
    ok(&mut wb, "workbench_create", json!({"id": "other"}));
    ok(
        &mut wb,
        "workbench_put_file",
        json!({"id": "other", "section": "outputs", "path": "x", "text": "x"}),
    );
    let dir = tempfile::tempdir().unwrap();
    let ctx = scribe_client::Context::default();
    let created = scribe_client::workflow::workspace::create(
        &ctx,
        scribe_client::workflow::workspace::CreateArgs {
            dir: dir.path().join("desk"),
            server: env.url().into(),
            repo: REPO.into(),
            view: vec!["job/".into()],
            author: "ada".into(),
            ..Default::default()
        },
    )
    .expect("scribe workspace create --view job/");
    assert_eq!(
        std::fs::read(created.root.join("job/outputs/model/w.bin")).unwrap(),
        [0, 1, 2]
    );
    assert!(!created.root.join("other").exists());
    assert!(!created.root.join(".nokv").exists());
}

#[test]
fn a_write_refused_by_a_lock_succeeds_when_retried_after_the_lock_is_released() {
    let env = Env::new(Transport::InProcess);
    let mut wb = workbench(&env);
    ok(&mut wb, "workbench_create", json!({"id": "job"}));
    ok(
        &mut wb,
        "workbench_put_file",
        json!({"id": "job", "section": "input", "path": "cfg.txt", "text": "v1"}),
    );
    let mut person = env.connect();
    let ws = WorkspaceId::random();
    person.register(ws);
    let lock = |paths: Vec<String>| m::LockAcquire {
        repo: REPO.into(),
        workspace: ws,
        branch: main_branch(),
        author: "ada".into(),
        paths,
    };
    person.ask(Request::LockAcquire(lock(vec!["job/input/cfg.txt".into()])));
    let put =
        json!({"id": "job", "section": "input", "path": "cfg.txt", "text": "v2", "replace": true});
    let e = err(&mut wb, "workbench_put_file", put.clone());
    assert_eq!((e.code, e.retryable), ("locked", true));
    person.ask(Request::LockRelease(m::LockRelease {
        repo: REPO.into(),
        workspace: ws,
        paths: vec!["job/input/cfg.txt".into()],
    }));
    // The same request, the same observed generation: it must now publish
    // (Scribe records the refusal under its operation id forever).
    let done = ok(&mut wb, "workbench_put_file", put.clone());
    assert_eq!(done["idempotent_replay"], false);
    let r = ok(
        &mut wb,
        "workbench_read",
        json!({"id": "job", "section": "input", "path": "cfg.txt"}),
    );
    assert_eq!(r["lines"], json!(["v2"]));
    assert_eq!(
        ok(&mut wb, "workbench_put_file", put)["idempotent_replay"],
        true
    );
}

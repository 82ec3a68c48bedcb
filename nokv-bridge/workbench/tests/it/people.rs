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

/// Every item of a root listing, paged by `limit`.
fn list_root_paged(
    wb: &mut nokv_workbench::Workbench<nokv_workbench::scribe::ScribeStore>,
    extra: serde_json::Value,
    limit: u64,
) -> Vec<serde_json::Value> {
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..64 {
        let mut q = json!({"id": "job", "limit": limit});
        for (k, v) in extra.as_object().unwrap() {
            q[k] = v.clone();
        }
        if let Some(c) = &cursor {
            q["cursor"] = json!(c);
        }
        let page = ok(wb, "workbench_list", q);
        let got = page["items"].as_array().unwrap();
        assert!(got.len() as u64 <= limit, "{page}");
        items.extend(got.iter().cloned());
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return items,
        }
    }
    panic!("the root listing did not end");
}

#[test]
fn the_workbench_root_lists_the_sections_and_a_persons_entries_outside_them() {
    let env = Env::new(Transport::Tcp);
    let mut wb = workbench(&env);
    ok(&mut wb, "workbench_create", json!({"id": "job"}));
    ok(
        &mut wb,
        "workbench_put_file",
        json!({"id": "job", "section": "outputs", "path": "r.txt", "text": "agent"}),
    );
    let mut person = env.connect();
    let ws = WorkspaceId::random();
    person.register(ws);
    let out = person.upload_and_submit(
        ws,
        OperationId::random(),
        &change(&[
            ("job/README.md", Some(b"read me".as_slice()), 0),
            ("job/docs/notes.txt", Some(b"notes".as_slice()), 0),
            ("job/notes/a.txt", Some(b"a".as_slice()), 0),
            ("job/zz.txt", Some(b"zz".as_slice()), 0),
        ]),
        "a person's files outside the sections",
    );
    assert_eq!(out.code, 0, "{}", out.detail);
    let names = |items: &[serde_json::Value]| -> Vec<String> {
        items
            .iter()
            .map(|i| format!("{} {} {}", i["kind"], i["name"], i["section"]))
            .collect()
    };
    let want = vec![
        r#""file" "README.md" null"#,
        r#""directory" "docs" null"#,
        r#""section" "input" "input""#,
        r#""section" "logs" "logs""#,
        r#""section" "metadata" "metadata""#,
        r#""directory" "notes" null"#,
        r#""section" "outputs" "outputs""#,
        r#""section" "scripts" "scripts""#,
        r#""file" "zz.txt" null"#,
    ];
    // The same items in the same order whatever the page size.
    for limit in 1..=10 {
        let items = list_root_paged(&mut wb, json!({}), limit);
        assert_eq!(names(&items), want, "limit {limit}");
    }
    let whole = ok(&mut wb, "workbench_list", json!({"id": "job"}));
    let readme = &whole["items"][0];
    assert_eq!(readme["path"], "README.md");
    assert_eq!(readme["size"], 7);
    assert_eq!(readme["generation"], out.change);
    // What the root lists, stat and grep agree on.
    let g = ok(
        &mut wb,
        "workbench_grep",
        json!({"id": "job", "pattern": "read me", "recursive": true}),
    );
    assert_eq!(g["matches"][0]["path"], "README.md", "{g}");
    assert_eq!(g["matches"][0]["section"], serde_json::Value::Null);
    // At a snapshot the root is frozen: a later file is not listed there.
    ok(
        &mut wb,
        "workbench_commit",
        json!({"id": "job", "manifest": {}, "content_digest_uri": format!("sha256:{}", "a".repeat(64))}),
    );
    ok(
        &mut wb,
        "workbench_snapshot",
        json!({"id": "job", "name": "s"}),
    );
    let base = 0;
    let later = person.upload_and_submit(
        ws,
        OperationId::random(),
        &change(&[("job/later.txt", Some(b"later".as_slice()), base)]),
        "later",
    );
    assert_eq!(later.code, 0, "{}", later.detail);
    for limit in [1, 3, 100] {
        let frozen = list_root_paged(&mut wb, json!({"at_snapshot": "s"}), limit);
        assert_eq!(names(&frozen), want, "limit {limit}");
    }
    let live = names(&list_root_paged(&mut wb, json!({}), 100));
    assert!(
        live.contains(&r#""file" "later.txt" null"#.to_string()),
        "{live:?}"
    );
    // A live root cursor fails closed once the workbench moved.
    let first = ok(&mut wb, "workbench_list", json!({"id": "job", "limit": 2}));
    person.upload_and_submit(
        ws,
        OperationId::random(),
        &change(&[("job/more.txt", Some(b"more".as_slice()), 0)]),
        "more",
    );
    let e = err(
        &mut wb,
        "workbench_list",
        json!({"id": "job", "limit": 2, "cursor": first["next_cursor"]}),
    );
    assert_eq!(e.code, "cursor_stale");
}

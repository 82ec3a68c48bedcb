//! Tool calls end to end over a real data root (in-process and over TCP).

use base64::Engine as _;
use nokv_workbench::ConflictClass;
use scribe_testkit::env::{Env, Transport};
use serde_json::json;
use sha2::Digest;

use super::support::{err, ok, workbench};

#[test]
fn create_converges_and_ids_are_checked() {
    let env = Env::new(Transport::InProcess);
    let mut wb = workbench(&env);
    let a = ok(&mut wb, "workbench_create", json!({"id": "run1"}));
    assert_eq!(a["created"], true);
    let b = ok(&mut wb, "workbench_create", json!({"id": "run1"}));
    assert_eq!(b["created"], false);
    assert_eq!(b["idempotent_replay"], true);
    assert_eq!(a["incarnation"], b["incarnation"]);
    assert_eq!(
        err(&mut wb, "workbench_create", json!({"id": "-x"})).code,
        "invalid_id"
    );
    let e = err(&mut wb, "workbench_stat", json!({"id": "nope"}));
    assert_eq!(e.code, "workbench_not_found");
    let st = ok(&mut wb, "workbench_stat", json!({"id": "run1"}));
    assert_eq!(st["kind"], "workbench");
}

#[test]
fn put_is_create_only_or_replace_only_with_exact_replay() {
    for transport in [Transport::InProcess, Transport::Tcp] {
        let env = Env::new(transport);
        let mut wb = workbench(&env);
        ok(&mut wb, "workbench_create", json!({"id": "w"}));
        let put = json!({"id": "w", "section": "outputs", "path": "r/a.txt", "text": "one"});
        let first = ok(&mut wb, "workbench_put_file", put.clone());
        assert_eq!(first["idempotent_replay"], false);
        assert_eq!(first["size"], 3);
        assert_eq!(first["content_type"], "text/plain");
        // The exact retry returns the stored result and publishes nothing.
        let again = ok(&mut wb, "workbench_put_file", put.clone());
        assert_eq!(again["idempotent_replay"], true);
        assert_eq!(again["generation"], first["generation"]);
        // A different create of the same path conflicts (never upsert).
        let e = err(
            &mut wb,
            "workbench_put_file",
            json!({"id": "w", "section": "outputs", "path": "r/a.txt", "text": "two"}),
        );
        assert_eq!(
            (e.code, e.conflict),
            ("already_exists", ConflictClass::Exists)
        );
        // Replace-only: absent paths are refused.
        let e = err(
            &mut wb,
            "workbench_put_file",
            json!({"id": "w", "section": "outputs", "path": "r/b.txt", "text": "x", "replace": true}),
        );
        assert_eq!(e.code, "not_found");
        let rep = json!({"id": "w", "section": "outputs", "path": "r/a.txt", "base64": base64::engine::general_purpose::STANDARD.encode(b"\x00\xff"), "replace": true, "content_type": "application/x-raw"});
        let replaced = ok(&mut wb, "workbench_put_file", rep.clone());
        assert!(replaced["generation"].as_u64() > first["generation"].as_u64());
        assert_eq!(replaced["content_type"], "application/x-raw");
        let replay = ok(&mut wb, "workbench_put_file", rep);
        assert_eq!(replay["idempotent_replay"], true);
        assert_eq!(replay["generation"], replaced["generation"]);
        let r = ok(
            &mut wb,
            "workbench_read",
            json!({"id": "w", "section": "outputs", "path": "r/a.txt", "format": "bytes"}),
        );
        assert_eq!(r["base64"], "AP8=");
        // Reserved and jailed paths.
        let e = err(
            &mut wb,
            "workbench_put_file",
            json!({"id": "w", "section": "metadata", "path": "run_manifest.json", "text": "{}"}),
        );
        assert_eq!(e.code, "reserved_path");
        for p in ["../x", "/x", "a\\b", "a\u{0}b", "outputs/x", "a//b", "./a"] {
            let e = err(
                &mut wb,
                "workbench_put_file",
                json!({"id": "w", "section": "outputs", "path": p, "text": "x"}),
            );
            assert_eq!(e.code, "invalid_path", "{p:?}");
        }
        let e = err(
            &mut wb,
            "workbench_put_file",
            json!({"id": "w", "section": "outputs", "path": "a?b", "text": "x"}),
        );
        assert_eq!(e.code, "path_not_representable");
        let e = err(
            &mut wb,
            "workbench_put_file",
            json!({"id": "w", "section": "outputs", "path": "c", "text": "x", "base64": "eA=="}),
        );
        assert_eq!(e.code, "invalid_input");
    }
}

#[test]
fn append_reports_the_delta_digest_and_edit_needs_one_match() {
    let env = Env::new(Transport::InProcess);
    let mut wb = workbench(&env);
    ok(&mut wb, "workbench_create", json!({"id": "w"}));
    let a1 = ok(
        &mut wb,
        "workbench_append",
        json!({"id": "w", "section": "logs", "path": "run.log", "text": "a\n"}),
    );
    let a2 = ok(
        &mut wb,
        "workbench_append",
        json!({"id": "w", "section": "logs", "path": "run.log", "text": "bb\n"}),
    );
    assert_eq!(a2["size"], 5);
    assert_eq!(
        a2["digest"],
        format!("sha256:{}", hex::encode(sha2::Sha256::digest(b"bb\n")))
    );
    assert!(a2["generation"].as_u64() > a1["generation"].as_u64());
    // The same append again, its answer delivered, is a deliberate
    // repeat: it appends (a retry is told apart by the attempt left
    // pending: crash.rs `an_append_whose_answer_was_lost_is_retried_once`).
    let again = ok(
        &mut wb,
        "workbench_append",
        json!({"id": "w", "section": "logs", "path": "run.log", "text": "bb\n"}),
    );
    assert_eq!(again["idempotent_replay"], false);
    assert_eq!(again["size"], 8);
    assert!(again["generation"].as_u64() > a2["generation"].as_u64());
    let r = ok(
        &mut wb,
        "workbench_read",
        json!({"id": "w", "section": "logs", "path": "run.log"}),
    );
    assert_eq!(r["lines"], json!(["a", "bb", "bb"]));

    ok(
        &mut wb,
        "workbench_put_file",
        json!({"id": "w", "section": "scripts", "path": "s.py", "text": "x = 1\nx = 1\ny = 2\n"}),
    );
    let e = err(
        &mut wb,
        "workbench_edit",
        json!({"id": "w", "section": "scripts", "path": "s.py", "old_string": "x = 1", "new_string": "x = 3"}),
    );
    assert_eq!(e.code, "edit_ambiguous");
    let e = err(
        &mut wb,
        "workbench_edit",
        json!({"id": "w", "section": "scripts", "path": "s.py", "old_string": "z", "new_string": "q"}),
    );
    assert_eq!(e.code, "edit_no_match");
    let before = ok(
        &mut wb,
        "workbench_stat",
        json!({"id": "w", "section": "scripts", "path": "s.py"}),
    );
    let same = ok(
        &mut wb,
        "workbench_edit",
        json!({"id": "w", "section": "scripts", "path": "s.py", "old_string": "y = 2", "new_string": "y = 2"}),
    );
    assert_eq!(same["changed"], false);
    assert_eq!(same["generation"], before["generation"]);
    let all = ok(
        &mut wb,
        "workbench_edit",
        json!({"id": "w", "section": "scripts", "path": "s.py", "old_string": "x = 1", "new_string": "x = 3", "replace_all": true}),
    );
    assert_eq!(all["changed"], true);
    let r = ok(
        &mut wb,
        "workbench_read",
        json!({"id": "w", "section": "scripts", "path": "s.py"}),
    );
    assert_eq!(r["lines"], json!(["x = 3", "x = 3", "y = 2"]));
    // An unchanged generation skips the body.
    let nm = ok(
        &mut wb,
        "workbench_read",
        json!({"id": "w", "section": "scripts", "path": "s.py", "if_none_match": all["generation"]}),
    );
    assert_eq!(nm["not_modified"], true);
    assert!(nm.get("lines").is_none());
    // The same edit again, its answer delivered, is a deliberate repeat:
    // it edits again while old_string still matches (`x` -> `xx`
    // everywhere doubles them again), and fails with the contract's
    // no-match error once it does not; it is never answered as a replay
    // (a retry is told apart by the attempt left pending: crash.rs
    // `an_edit_whose_answer_was_lost_is_retried_once`).
    let double = json!({"id": "w", "section": "scripts", "path": "s.py", "old_string": "x", "new_string": "xx", "replace_all": true});
    let d1 = ok(&mut wb, "workbench_edit", double.clone());
    assert_eq!(d1["idempotent_replay"], false, "{d1}");
    let d2 = ok(&mut wb, "workbench_edit", double.clone());
    assert_eq!(d2["idempotent_replay"], false, "{d2}");
    assert_eq!(d2["replacements"], 4, "{d2}");
    assert!(d2["generation"].as_u64() > d1["generation"].as_u64());
    let r = ok(
        &mut wb,
        "workbench_read",
        json!({"id": "w", "section": "scripts", "path": "s.py"}),
    );
    assert_eq!(r["lines"], json!(["xxxx = 3", "xxxx = 3", "y = 2"]));
    let once = json!({"id": "w", "section": "scripts", "path": "s.py", "old_string": "y = 2", "new_string": "y = 4"});
    let o1 = ok(&mut wb, "workbench_edit", once.clone());
    assert_eq!(o1["changed"], true);
    let e = err(&mut wb, "workbench_edit", once);
    assert_eq!(e.code, "edit_no_match", "{e:?}");
    let after = ok(
        &mut wb,
        "workbench_stat",
        json!({"id": "w", "section": "scripts", "path": "s.py"}),
    );
    assert_eq!(after["generation"], o1["generation"], "nothing published");
}

#[test]
fn stale_generation_is_a_retryable_conflict() {
    let env = Env::new(Transport::InProcess);
    let mut wb = workbench(&env);
    let mut other = workbench(&env);
    ok(&mut wb, "workbench_create", json!({"id": "w"}));
    ok(
        &mut wb,
        "workbench_put_file",
        json!({"id": "w", "section": "input", "path": "d.json", "text": "{\"k\":1}"}),
    );
    let r = ok(
        &mut wb,
        "workbench_read",
        json!({"id": "w", "section": "input", "path": "d.json"}),
    );
    assert_eq!(r["json"], json!({"k": 1}));
    // A publication that observed an older generation is refused by the store.
    let store = wb.store_mut();
    use nokv_workbench::store::{Edit, NewBody, Publish, Published, Refusal, Store};
    let row = store.stat(0, "w/input/d.json").unwrap().unwrap();
    ok(
        &mut other,
        "workbench_put_file",
        json!({"id": "w", "section": "input", "path": "d.json", "text": "{}", "replace": true}),
    );
    let out = wb
        .store_mut()
        .publish(Publish {
            operation: [7; 16],
            message: "stale".into(),
            edits: vec![Edit::Put {
                path: "w/input/d.json".into(),
                base: row.generation,
                body: NewBody::Bytes(b"x".to_vec()),
            }],
            timestamp_ms: 1,
        })
        .unwrap();
    assert!(
        matches!(out, Published::Refused(Refusal::Stale(_))),
        "{out:?}"
    );
}

/// One order whatever the page size: names that sort before `/` after a
/// shared prefix (`a b`, `a-b`, `a.txt` beside the directory `a`) come
/// out of one page of 100 as out of pages of 1.
#[test]
fn list_order_does_not_depend_on_the_page_size() {
    let env = Env::new(Transport::InProcess);
    let mut wb = workbench(&env);
    ok(&mut wb, "workbench_create", json!({"id": "w"}));
    for path in ["a/inner", "a.txt", "a b", "A+", "a-b", "a0", "a/z/deep"] {
        ok(
            &mut wb,
            "workbench_put_file",
            json!({"id": "w", "section": "outputs", "path": path, "text": path}),
        );
    }
    let names = |v: &serde_json::Value| -> Vec<String> {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["name"].as_str().unwrap().to_string())
            .collect()
    };
    let whole = names(&ok(
        &mut wb,
        "workbench_list",
        json!({"id": "w", "section": "outputs", "limit": 100}),
    ));
    for limit in [1, 2, 3] {
        let mut paged = Vec::new();
        let mut cursor = serde_json::Value::Null;
        loop {
            let mut q = json!({"id": "w", "section": "outputs", "limit": limit});
            if !cursor.is_null() {
                q["cursor"] = cursor.clone();
            }
            let page = ok(&mut wb, "workbench_list", q);
            paged.extend(names(&page));
            cursor = page["next_cursor"].clone();
            if cursor.is_null() {
                break;
            }
        }
        assert_eq!(paged, whole, "pages of {limit}");
    }
    assert_eq!(whole.len(), 6, "{whole:?}");
    // A path that is nothing, or a file, is not an empty directory.
    for path in ["nothing/here", "a.txt"] {
        let e = err(
            &mut wb,
            "workbench_list",
            json!({"id": "w", "section": "outputs", "path": path}),
        );
        assert_eq!(e.code, "not_found", "{path}: {}", e.message);
    }
    let empty = ok(
        &mut wb,
        "workbench_list",
        json!({"id": "w", "section": "logs"}),
    );
    assert_eq!(empty["items"], json!([]));
}

#[test]
fn list_pages_in_key_order_and_live_cursors_fail_closed() {
    let env = Env::new(Transport::InProcess);
    let mut wb = workbench(&env);
    ok(&mut wb, "workbench_create", json!({"id": "w"}));
    for p in ["b.txt", "a", "a0", "d/x", "c.txt"] {
        let path = if p == "a" {
            "a/inner".to_string()
        } else {
            p.to_string()
        };
        ok(
            &mut wb,
            "workbench_put_file",
            json!({"id": "w", "section": "outputs", "path": path, "text": p}),
        );
    }
    let page1 = ok(
        &mut wb,
        "workbench_list",
        json!({"id": "w", "section": "outputs", "limit": 2}),
    );
    let names: Vec<&str> = page1["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "a0"]);
    assert_eq!(page1["items"][0]["kind"], "directory");
    let cursor = page1["next_cursor"].as_str().unwrap().to_string();
    let page2 = ok(
        &mut wb,
        "workbench_list",
        json!({"id": "w", "section": "outputs", "limit": 2, "cursor": cursor}),
    );
    let names: Vec<&str> = page2["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["b.txt", "c.txt"]);
    // A cursor of another listing is refused; a write to the workbench makes a live cursor stale.
    let e = err(
        &mut wb,
        "workbench_list",
        json!({"id": "w", "section": "input", "cursor": cursor}),
    );
    assert_eq!(e.code, "invalid_cursor");
    ok(
        &mut wb,
        "workbench_put_file",
        json!({"id": "w", "section": "logs", "path": "l", "text": "x"}),
    );
    let e = err(
        &mut wb,
        "workbench_list",
        json!({"id": "w", "section": "outputs", "limit": 2, "cursor": cursor}),
    );
    assert_eq!(
        (e.code, e.conflict),
        ("cursor_stale", ConflictClass::Revision)
    );
    let roots = ok(&mut wb, "workbench_list", json!({"id": "w"}));
    assert_eq!(roots["items"].as_array().unwrap().len(), 5);
    let st = ok(
        &mut wb,
        "workbench_stat",
        json!({"id": "w", "section": "outputs", "path": "d"}),
    );
    assert_eq!(st["kind"], "directory");
    assert_eq!(
        err(
            &mut wb,
            "workbench_stat",
            json!({"id": "w", "section": "outputs", "path": "zz"})
        )
        .code,
        "not_found"
    );
}

#[test]
fn a_content_type_cannot_inject_message_lines() {
    let env = Env::new(Transport::InProcess);
    let mut wb = workbench(&env);
    ok(&mut wb, "workbench_create", json!({"id": "w"}));
    for ct in [
        "text/plain\nnokv-request: 00",
        "text plain",
        "plain",
        "a/b c",
        "",
    ] {
        let e = err(
            &mut wb,
            "workbench_put_file",
            json!({"id": "w", "section": "outputs", "path": "c", "text": "x", "content_type": ct}),
        );
        assert_eq!(e.code, "invalid_input", "{ct:?}");
    }
    let r = ok(
        &mut wb,
        "workbench_append",
        json!({"id": "w", "section": "outputs", "path": "c", "text": "x", "content_type": "text/x-ok+v1"}),
    );
    assert_eq!(r["size"], 1);
    let st = ok(
        &mut wb,
        "workbench_stat",
        json!({"id": "w", "section": "outputs", "path": "c"}),
    );
    assert_eq!(st["content_type"], "text/x-ok+v1");
}

#[test]
fn a_case_fold_collision_is_not_representable_in_scribe() {
    let env = Env::new(Transport::InProcess);
    let mut wb = workbench(&env);
    ok(&mut wb, "workbench_create", json!({"id": "w"}));
    ok(
        &mut wb,
        "workbench_put_file",
        json!({"id": "w", "section": "outputs", "path": "Report.txt", "text": "a"}),
    );
    let e = err(
        &mut wb,
        "workbench_put_file",
        json!({"id": "w", "section": "outputs", "path": "report.txt", "text": "b"}),
    );
    assert_eq!(
        (e.code, e.retryable),
        ("path_not_representable", false),
        "{}",
        e.message
    );
    // A file where a directory is (and the reverse) is refused the same way.
    let e = err(
        &mut wb,
        "workbench_put_file",
        json!({"id": "w", "section": "outputs", "path": "Report.txt/x", "text": "b"}),
    );
    assert_eq!(e.code, "path_not_representable", "{}", e.message);
}

#[test]
fn the_card_a_put_returns_is_the_card_stat_reads_back() {
    let env = Env::new(Transport::InProcess);
    let mut wb = workbench(&env);
    ok(&mut wb, "workbench_create", json!({"id": "w"}));
    for (path, ct) in [("a.json", None), ("b.bin", Some("application/x-b"))] {
        let mut input = json!({"id": "w", "section": "outputs", "path": path, "text": "{}"});
        if let Some(ct) = ct {
            input["content_type"] = json!(ct);
        }
        let mut put = ok(&mut wb, "workbench_put_file", input);
        put.as_object_mut().unwrap().remove("idempotent_replay");
        let stat = ok(
            &mut wb,
            "workbench_stat",
            json!({"id": "w", "section": "outputs", "path": path}),
        );
        assert_eq!(put, stat);
    }
}

/// A read cursor continues only the read that issued it: the same file
/// and format. Files published together share a generation, and a byte
/// offset is not a line number, so neither may stand for the other.
#[test]
fn a_read_cursor_continues_only_its_own_file_and_format() {
    let env = Env::new(Transport::InProcess);
    let mut wb = workbench(&env);
    ok(&mut wb, "workbench_create", json!({"id": "w"}));
    let text: String = (0..40).map(|i| format!("line {i}\n")).collect();
    for path in ["one.log", "two.log"] {
        ok(
            &mut wb,
            "workbench_put_file",
            json!({"id": "w", "section": "logs", "path": path, "text": text}),
        );
    }
    let lines = ok(
        &mut wb,
        "workbench_read",
        json!({"id": "w", "section": "logs", "path": "one.log", "limit": 10}),
    );
    let line_cursor = lines["next_cursor"].as_str().unwrap().to_string();
    let next = ok(
        &mut wb,
        "workbench_read",
        json!({"id": "w", "section": "logs", "path": "one.log", "limit": 10, "cursor": line_cursor}),
    );
    assert_eq!(next["lines"][0], "line 10");
    let bytes = ok(
        &mut wb,
        "workbench_read",
        json!({"id": "w", "section": "logs", "path": "one.log", "format": "bytes", "limit": 1}),
    );
    assert!(bytes["next_cursor"].is_null(), "a small file in one page");
    // Another file, even of the same generation, refuses it.
    let e = err(
        &mut wb,
        "workbench_read",
        json!({"id": "w", "section": "logs", "path": "two.log", "cursor": line_cursor}),
    );
    assert_eq!(e.code, "invalid_cursor", "{}", e.message);
    // The other format refuses it.
    let e = err(
        &mut wb,
        "workbench_read",
        json!({"id": "w", "section": "logs", "path": "one.log", "format": "bytes", "cursor": line_cursor}),
    );
    assert_eq!(e.code, "invalid_cursor", "{}", e.message);
}

/// A case (or normalization) variant of a reserved name is the same path
/// to Scribe: a generic write of it is refused as reserved, so commit and
/// restore are never blocked by it.
#[test]
fn a_variant_of_a_reserved_name_is_refused_and_commit_still_works() {
    let env = Env::new(Transport::InProcess);
    let mut wb = workbench(&env);
    ok(&mut wb, "workbench_create", json!({"id": "rv"}));
    for (tool, path) in [
        ("workbench_put_file", "RUN_MANIFEST.json"),
        ("workbench_append", "Restore_Manifest.json"),
    ] {
        let e = err(
            &mut wb,
            tool,
            json!({"id": "rv", "section": "metadata", "path": path, "text": "{}"}),
        );
        assert_eq!(e.code, "reserved_path", "{tool} {path}: {e}");
        assert!(e.message.contains(path), "{e}");
    }
    let zero = format!("sha256:{}", "0".repeat(64));
    ok(
        &mut wb,
        "workbench_commit",
        json!({"id": "rv", "manifest": {}, "content_digest_uri": zero}),
    );
    let r = ok(
        &mut wb,
        "workbench_restore",
        json!({"id": "rv", "destination_id": "rv2"}),
    );
    assert_eq!(r["idempotent_replay"], false, "{r}");
}

/// An edit or append that names no content type keeps the one the file
/// was published with (it fell back to the extension's).
#[test]
fn edit_and_append_keep_the_recorded_content_type() {
    let env = Env::new(Transport::InProcess);
    let mut wb = workbench(&env);
    ok(&mut wb, "workbench_create", json!({"id": "w"}));
    ok(
        &mut wb,
        "workbench_put_file",
        json!({"id": "w", "section": "outputs", "path": "notes.txt", "text": "draft", "content_type": "text/markdown"}),
    );
    ok(
        &mut wb,
        "workbench_edit",
        json!({"id": "w", "section": "outputs", "path": "notes.txt", "old_string": "draft", "new_string": "final"}),
    );
    ok(
        &mut wb,
        "workbench_put_file",
        json!({"id": "w", "section": "logs", "path": "rec.bin", "text": "{\"a\":1}", "content_type": "application/json"}),
    );
    ok(
        &mut wb,
        "workbench_append",
        json!({"id": "w", "section": "logs", "path": "rec.bin", "text": " "}),
    );
    for (section, path, ct) in [
        ("outputs", "notes.txt", "text/markdown"),
        ("logs", "rec.bin", "application/json"),
    ] {
        let st = ok(
            &mut wb,
            "workbench_stat",
            json!({"id": "w", "section": section, "path": path}),
        );
        assert_eq!(st["content_type"], ct, "{st}");
    }
    // A type the call names wins.
    ok(
        &mut wb,
        "workbench_append",
        json!({"id": "w", "section": "logs", "path": "rec.bin", "text": "\n", "content_type": "text/plain"}),
    );
    let st = ok(
        &mut wb,
        "workbench_stat",
        json!({"id": "w", "section": "logs", "path": "rec.bin"}),
    );
    assert_eq!(st["content_type"], "text/plain");
}

/// Ids that differ only in case are one name to Scribe: creating or
/// restoring into such a twin is refused by name, never answered with
/// the bridge's internal paths.
#[test]
fn a_case_twin_of_a_workbench_is_refused_by_name() {
    let env = Env::new(Transport::InProcess);
    let mut wb = workbench(&env);
    ok(&mut wb, "workbench_create", json!({"id": "e1"}));
    let e = err(&mut wb, "workbench_create", json!({"id": "E1"}));
    assert_eq!(e.code, "already_exists", "{}", e.message);
    assert!(
        e.message.contains("\"e1\"") && !e.message.contains(".nokv"),
        "{}",
        e.message
    );
    let zero = format!("sha256:{}", "0".repeat(64));
    ok(
        &mut wb,
        "workbench_commit",
        json!({"id": "e1", "manifest": {}, "content_digest_uri": zero}),
    );
    ok(&mut wb, "workbench_create", json!({"id": "v1r"}));
    let e = err(
        &mut wb,
        "workbench_restore",
        json!({"id": "e1", "destination_id": "V1R"}),
    );
    assert_eq!(e.code, "destination_exists", "{}", e.message);
    assert!(!e.message.contains(".nokv"), "{}", e.message);
}

/// Two writers appending the same line at the same time (the same
/// request identity): each call appends, none takes the other's
/// publication for its own.
#[test]
fn concurrent_identical_appends_all_land() {
    let env = Env::new(Transport::InProcess);
    let mut wb = workbench(&env);
    ok(&mut wb, "workbench_create", json!({"id": "w"}));
    let env = &env;
    let replays = std::sync::atomic::AtomicU64::new(0);
    let replays = &replays;
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(move || {
                let mut mine = workbench(env);
                for _ in 0..12 {
                    let a = ok(
                        &mut mine,
                        "workbench_append",
                        json!({"id": "w", "section": "logs", "path": "beat.log", "text": "beat\n"}),
                    );
                    if a["idempotent_replay"] == true {
                        replays.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                }
            });
        }
    });
    let r = ok(
        &mut wb,
        "workbench_read",
        json!({"id": "w", "section": "logs", "path": "beat.log"}),
    );
    assert_eq!(r["total_lines"], 24, "{r}");
    assert_eq!(replays.load(std::sync::atomic::Ordering::SeqCst), 0);
}

/// Two agents appending to one log at once: each append that lost the
/// generation race reads again and appends to the winner's result, so
/// every line arrives and no call fails (the contract's "retry
/// conflicts").
#[test]
fn concurrent_appends_retry_their_conflicts_and_lose_nothing() {
    let env = Env::new(Transport::InProcess);
    let mut wb = workbench(&env);
    ok(&mut wb, "workbench_create", json!({"id": "w"}));
    let env = &env;
    std::thread::scope(|s| {
        for who in ["a", "b"] {
            s.spawn(move || {
                let mut mine = workbench(env);
                for i in 0..12 {
                    ok(
                        &mut mine,
                        "workbench_append",
                        json!({"id": "w", "section": "logs", "path": "run.log", "text": format!("{who}{i}\n")}),
                    );
                }
            });
        }
    });
    let r = ok(
        &mut wb,
        "workbench_read",
        json!({"id": "w", "section": "logs", "path": "run.log"}),
    );
    let mut lines: Vec<String> = r["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap().to_string())
        .collect();
    lines.sort();
    let mut want: Vec<String> = ["a", "b"]
        .iter()
        .flat_map(|w| (0..12).map(move |i| format!("{w}{i}")))
        .collect();
    want.sort();
    assert_eq!(lines, want);
}

/// Forwards everything and counts the change messages asked for (one
/// `Describe` round trip each over the network).
struct CountsDescribes(
    nokv_workbench::scribe::ScribeStore,
    std::rc::Rc<std::cell::Cell<usize>>,
);

impl nokv_workbench::store::Store for CountsDescribes {
    fn root_name(&self) -> String {
        self.0.root_name()
    }
    fn head(&mut self) -> Result<u64, nokv_workbench::WbError> {
        self.0.head()
    }
    fn stat(
        &mut self,
        at: u64,
        path: &str,
    ) -> Result<Option<nokv_workbench::store::Row>, nokv_workbench::WbError> {
        self.0.stat(at, path)
    }
    fn list_dir(
        &mut self,
        at: u64,
        dir: &str,
        token: &str,
        limit: u32,
    ) -> Result<nokv_workbench::store::DirPage, nokv_workbench::WbError> {
        self.0.list_dir(at, dir, token, limit)
    }
    fn list_files(
        &mut self,
        at: u64,
        dir: &str,
        token: &str,
        limit: u32,
    ) -> Result<nokv_workbench::store::DirPage, nokv_workbench::WbError> {
        self.0.list_files(at, dir, token, limit)
    }
    fn read(
        &mut self,
        body: &nokv_workbench::store::BodyRef,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>, nokv_workbench::WbError> {
        self.0.read(body, offset, len)
    }
    fn publish(
        &mut self,
        p: nokv_workbench::store::Publish,
    ) -> Result<nokv_workbench::store::Published, nokv_workbench::WbError> {
        self.0.publish(p)
    }
    fn version_info(
        &mut self,
        version: u64,
    ) -> Result<nokv_workbench::store::VersionInfo, nokv_workbench::WbError> {
        self.1.set(self.1.get() + 1);
        self.0.version_info(version)
    }
    fn changed_under(
        &mut self,
        dir: &str,
        from: u64,
        to: u64,
    ) -> Result<bool, nokv_workbench::WbError> {
        self.0.changed_under(dir, from, to)
    }
}

/// An append or edit of an existing file asks for the message of the
/// generation it observed once (whether its own request published it, and
/// the content type the new body keeps), not once for each question; the
/// kept type is still kept.
#[test]
fn append_and_edit_ask_for_the_observed_generations_message_once() {
    let env = Env::new(Transport::InProcess);
    let store = nokv_workbench::scribe::ScribeStore::over(
        super::support::client(&env),
        scribe_testkit::env::REPO,
        "bot",
    )
    .unwrap();
    let asked = std::rc::Rc::new(std::cell::Cell::new(0));
    let mut wb = nokv_workbench::Workbench::new(CountsDescribes(store, asked.clone()), "bot");
    let call = |wb: &mut nokv_workbench::Workbench<CountsDescribes>, tool: &str, v| {
        wb.call(tool, &v).unwrap_or_else(|e| panic!("{tool}: {e}"))
    };
    call(&mut wb, "workbench_create", json!({"id": "w"}));
    call(
        &mut wb,
        "workbench_put_file",
        json!({"id": "w", "section": "logs", "path": "run.out", "text": "a\n", "content_type": "text/x-run"}),
    );
    asked.set(0);
    call(
        &mut wb,
        "workbench_append",
        json!({"id": "w", "section": "logs", "path": "run.out", "text": "b\n"}),
    );
    assert_eq!(asked.get(), 1, "append");
    asked.set(0);
    call(
        &mut wb,
        "workbench_edit",
        json!({"id": "w", "section": "logs", "path": "run.out", "old_string": "b", "new_string": "c"}),
    );
    assert_eq!(asked.get(), 1, "edit");
    let r = call(
        &mut wb,
        "workbench_read",
        json!({"id": "w", "section": "logs", "path": "run.out"}),
    );
    assert_eq!(r["content_type"], "text/x-run");
    assert_eq!(r["lines"], json!(["a", "c"]));
}

/// `n` bytes that chunk as real data does (content-defined cuts, not the
/// 16 MiB maximum every run of one byte gets).
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(n);
    out
}

/// Appending a line to a large file holds the chunk being hashed and the
/// file's last chunks, not the file: a `nokv` process appending to 192 MiB
/// peaks far below it. The body it publishes is the one a put of the
/// whole bytes makes (the same manifest: the unchanged chunks reused, the
/// whole-body BLAKE3 right), and reads back.
#[test]
fn appending_to_a_large_file_does_not_hold_it_and_publishes_the_same_body() {
    let env = Env::new(Transport::Tcp);
    let mut wb = workbench(&env);
    ok(&mut wb, "workbench_create", json!({"id": "w"}));
    let old = noise(192 << 20, 7);
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    ok(
        &mut wb,
        "workbench_put_file",
        json!({"id": "w", "section": "logs", "path": "big.log", "base64": b64(&old)}),
    );
    let delta = "one more line\n";
    // The peak resident memory of the append, from python's getrusage of
    // its child (this process's children would mix in other tests').
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import resource, subprocess, sys\n\
             p = subprocess.run(sys.argv[1:])\n\
             print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n\
             sys.exit(p.returncode)",
            env!("CARGO_BIN_EXE_nokv"),
            "--server",
            env.url(),
            "--repo",
            scribe_testkit::env::REPO,
            "--agent-root",
            "bot",
            "workbench",
            "workbench_append",
            &json!({"id": "w", "section": "logs", "path": "big.log", "text": delta}).to_string(),
        ])
        .env("NOKV_STATE_DIR", env.path("nokv-state"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(v["size"], (192u64 << 20) + delta.len() as u64, "{v}");
    let peak_kib: u64 = String::from_utf8_lossy(&out.stderr)
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .expect("the peak on stderr");
    assert!(peak_kib < 96 << 10, "append peaked at {peak_kib} KiB");
    // The same body as a put of the whole bytes.
    let mut whole = old.clone();
    whole.extend_from_slice(delta.as_bytes());
    ok(
        &mut wb,
        "workbench_put_file",
        json!({"id": "w", "section": "logs", "path": "whole.log", "base64": b64(&whole)}),
    );
    use nokv_workbench::store::Store as _;
    let appended = wb.store_mut().stat(0, "w/logs/big.log").unwrap().unwrap();
    let put = wb.store_mut().stat(0, "w/logs/whole.log").unwrap().unwrap();
    assert_eq!(appended.body, put.body);
    let r = ok(
        &mut wb,
        "workbench_read",
        json!({"id": "w", "section": "logs", "path": "big.log", "format": "bytes", "offset": (192u64 << 20) - 2, "limit": 1}),
    );
    let tail = base64::engine::general_purpose::STANDARD
        .decode(r["base64"].as_str().unwrap())
        .unwrap();
    assert_eq!(tail[..2], old[old.len() - 2..]);
    assert_eq!(&tail[2..], delta.as_bytes());
}

/// An edit needs the whole text (string replacement), so a file above
/// 64 MiB is refused by name, and nothing is published.
#[test]
fn an_edit_of_a_file_above_the_edit_bound_is_refused_by_name() {
    let env = Env::new(Transport::InProcess);
    let mut wb = workbench(&env);
    ok(&mut wb, "workbench_create", json!({"id": "w"}));
    let mut text = "a line of text\n".repeat(((64 << 20) / 15) + 2);
    text.push_str("needle\n");
    let put = ok(
        &mut wb,
        "workbench_put_file",
        json!({"id": "w", "section": "logs", "path": "big.log", "text": text}),
    );
    let e = err(
        &mut wb,
        "workbench_edit",
        json!({"id": "w", "section": "logs", "path": "big.log", "old_string": "needle", "new_string": "pin"}),
    );
    assert_eq!(e.code, "invalid_input", "{e}");
    assert!(e.message.contains("64 MiB"), "{e}");
    let s = ok(
        &mut wb,
        "workbench_stat",
        json!({"id": "w", "section": "logs", "path": "big.log"}),
    );
    assert_eq!(s["generation"], put["generation"]);
}

/// An append that reuses a large body's chunks publishes the body a put
/// of the whole bytes makes at the chunking's edges too: a body ending one
/// or two bytes past a content-defined cut (a cut is decided from the two
/// bytes after it, which the append may add), one ending exactly at a
/// cut, an empty delta and a delta larger than the largest chunk.
#[test]
fn an_append_reusing_chunks_matches_a_whole_put_at_the_chunkings_edges() {
    use nokv_workbench::store::Store as _;
    let env = Env::new(Transport::InProcess);
    let mut wb = workbench(&env);
    ok(&mut wb, "workbench_create", json!({"id": "w"}));
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let data = noise(40 << 20, 11);
    let cuts: Vec<usize> = scribe_objects::chunk_boundaries(&data)
        .iter()
        .scan(0, |end, n| {
            *end += n;
            Some(*end)
        })
        .collect();
    // A cut past 8 MiB (appends below that re-read the body whole).
    let cut = *cuts.iter().find(|c| **c > 9 << 20).unwrap();
    let cases: [(&str, usize, Vec<u8>); 5] = [
        ("one-byte-past-a-cut", cut + 1, b"tail\n".to_vec()),
        ("two-bytes-past-a-cut", cut + 2, b"tail\n".to_vec()),
        ("at-a-cut", cut, b"tail\n".to_vec()),
        ("empty-delta", cut + 12345, Vec::new()),
        ("large-delta", cut + 777, noise(20 << 20, 5)),
    ];
    for (name, len, delta) in cases {
        let old = &data[..len];
        ok(
            &mut wb,
            "workbench_put_file",
            json!({"id": "w", "section": "outputs", "path": format!("{name}.bin"), "base64": b64(old)}),
        );
        let a = ok(
            &mut wb,
            "workbench_append",
            json!({"id": "w", "section": "outputs", "path": format!("{name}.bin"), "base64": b64(&delta)}),
        );
        assert_eq!(a["size"], (len + delta.len()) as u64, "{name}");
        let mut whole = old.to_vec();
        whole.extend_from_slice(&delta);
        ok(
            &mut wb,
            "workbench_put_file",
            json!({"id": "w", "section": "outputs", "path": format!("{name}.whole"), "base64": b64(&whole)}),
        );
        let appended = wb
            .store_mut()
            .stat(0, &format!("w/outputs/{name}.bin"))
            .unwrap()
            .unwrap();
        let put = wb
            .store_mut()
            .stat(0, &format!("w/outputs/{name}.whole"))
            .unwrap()
            .unwrap();
        assert_eq!(appended.body, put.body, "{name}");
    }
}

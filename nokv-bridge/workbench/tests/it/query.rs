//! grep, search, aggregate, catalog and find.

use scribe_testkit::env::{Env, Transport};
use serde_json::json;

use super::support::{err, ok, workbench};

fn seeded() -> (
    Env,
    nokv_workbench::Workbench<nokv_workbench::scribe::ScribeStore>,
) {
    let env = Env::new(Transport::InProcess);
    let mut wb = workbench(&env);
    for id in ["a1", "b2"] {
        ok(&mut wb, "workbench_create", json!({"id": id}));
    }
    ok(
        &mut wb,
        "workbench_put_file",
        json!({"id": "a1", "section": "logs", "path": "train.log", "text": "epoch 1\nERROR disk\nok\n"}),
    );
    ok(
        &mut wb,
        "workbench_put_file",
        json!({"id": "a1", "section": "logs", "path": "sub/eval.log", "text": "Warning: slow\nerror again\n"}),
    );
    ok(
        &mut wb,
        "workbench_put_file",
        json!({"id": "a1", "section": "outputs", "path": "m.json", "text": "{\"acc\": 0.9}"}),
    );
    ok(
        &mut wb,
        "workbench_put_file",
        json!({"id": "b2", "section": "outputs", "path": "big.bin", "base64": "AAAAAAAAAAAAAAAA", "content_type": "application/x-model"}),
    );
    ok(
        &mut wb,
        "workbench_commit",
        json!({"id": "a1", "manifest": {"model": "resnet", "note": "needle-42"}, "content_digest_uri": format!("sha256:{}", "e".repeat(64))}),
    );
    (env, wb)
}

#[test]
fn grep_is_case_insensitive_literal_or_with_glob_recursion_and_cursors() {
    let (_env, mut wb) = seeded();
    let r = ok(
        &mut wb,
        "workbench_grep",
        json!({"id": "a1", "pattern": "error", "recursive": true, "section": "logs"}),
    );
    let hits: Vec<(String, u64)> = r["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["path"].as_str().unwrap().to_string(),
                m["line"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        hits,
        [
            ("sub/eval.log".to_string(), 2),
            ("train.log".to_string(), 2)
        ]
    );
    // Not recursive: only the section's direct files.
    let r = ok(
        &mut wb,
        "workbench_grep",
        json!({"id": "a1", "pattern": "error", "recursive": false, "section": "logs"}),
    );
    assert_eq!(r["matches"].as_array().unwrap().len(), 1);
    // OR of patterns, glob on the basename; "." is literal, not a regex.
    let r = ok(
        &mut wb,
        "workbench_grep",
        json!({"id": "a1", "pattern": "WARNING", "patterns": ["epoch"], "recursive": true, "glob": "*.log"}),
    );
    assert_eq!(r["matches"].as_array().unwrap().len(), 2);
    let r = ok(
        &mut wb,
        "workbench_grep",
        json!({"id": "a1", "pattern": "e.ror", "recursive": true}),
    );
    assert_eq!(r["matches"].as_array().unwrap().len(), 0);
    // Paging: a cursor is bound to the pattern set and fails closed on drift.
    let q = json!({"id": "a1", "pattern": "error", "recursive": true, "limit": 1});
    let p1 = ok(&mut wb, "workbench_grep", q.clone());
    let cur = p1["next_cursor"].as_str().unwrap().to_string();
    let mut q2 = q.clone();
    q2["cursor"] = json!(cur);
    let p2 = ok(&mut wb, "workbench_grep", q2.clone());
    assert_eq!(p2["matches"][0]["path"], "train.log");
    let other =
        json!({"id": "a1", "pattern": "warning", "recursive": true, "limit": 1, "cursor": cur});
    assert_eq!(err(&mut wb, "workbench_grep", other).code, "invalid_cursor");
    ok(
        &mut wb,
        "workbench_put_file",
        json!({"id": "a1", "section": "logs", "path": "x.log", "text": "error"}),
    );
    assert_eq!(err(&mut wb, "workbench_grep", q2).code, "cursor_stale");
}

#[test]
fn search_aggregate_catalog_and_find() {
    let (_env, mut wb) = seeded();
    let r = ok(
        &mut wb,
        "workbench_search",
        json!({
        "predicates": [{"field": "size", "op": "gt", "value": 10}, {"field": "section", "op": "in", "value": ["logs", "outputs"]}],
        "sort": [{"field": "size", "direction": "desc"}], "fields": ["workbench_id", "path", "size"], "facets": ["workbench_id"], "limit": 2}),
    );
    assert_eq!(r["total"], 4);
    assert_eq!(
        r["rows"][0],
        json!({"workbench_id": "a1", "path": "sub/eval.log", "size": 26})
    );
    assert_eq!(r["facets"]["workbench_id"], json!({"a1": 3, "b2": 1}));
    let cur = r["next_cursor"].as_str().unwrap().to_string();
    let r2 = ok(
        &mut wb,
        "workbench_search",
        json!({
        "predicates": [{"field": "size", "op": "gt", "value": 10}, {"field": "section", "op": "in", "value": ["logs", "outputs"]}],
        "sort": [{"field": "size", "direction": "desc"}], "fields": ["workbench_id", "path", "size"], "facets": ["workbench_id"], "limit": 2, "cursor": cur}),
    );
    assert_eq!(r2["rows"].as_array().unwrap().len(), 2);
    assert_eq!(r2["read_version"], r["read_version"]);
    let r = ok(
        &mut wb,
        "workbench_search",
        json!({"id": "b2", "predicates": [{"field": "content_type", "op": "eq", "value": "application/x-model"}]}),
    );
    assert_eq!(r["rows"][0]["committed"], false);
    let e = err(
        &mut wb,
        "workbench_search",
        json!({"predicates": [{"field": "inode", "op": "exists"}]}),
    );
    assert_eq!(e.code, "invalid_input");
    let e = err(
        &mut wb,
        "workbench_search",
        json!({"predicates": [{"field": "size", "op": "prefix", "value": "1"}]}),
    );
    assert_eq!(e.code, "invalid_input");
    // A value of another type than its field's is refused by name, not an
    // empty answer that reads as "nothing matches".
    for (field, op, value) in [
        ("size", "eq", json!("1")),
        ("path", "gt", json!(5)),
        ("committed", "eq", json!("false")),
        ("section", "in", json!(["logs", 3])),
    ] {
        let e = err(
            &mut wb,
            "workbench_search",
            json!({"predicates": [{"field": field, "op": op, "value": value}]}),
        );
        assert_eq!(e.code, "invalid_input", "{field} {op} {value}");
        assert!(e.message.contains(field), "{}", e.message);
    }
    let r = ok(
        &mut wb,
        "workbench_search",
        json!({"predicates": [{"field": "committed", "op": "eq", "value": false}, {"field": "size", "op": "gt", "value": -1}]}),
    );
    assert!(r["total"].as_u64().unwrap() > 0, "{r}");

    let a = ok(
        &mut wb,
        "workbench_aggregate",
        json!({"measures": [{"name": "n", "op": "count"}, {"name": "bytes", "op": "sum", "field": "size"}], "group_by": ["workbench_id"], "sort": [{"field": "n", "direction": "desc"}]}),
    );
    assert_eq!(a["groups"][0]["workbench_id"], "a1");
    assert_eq!(a["groups"][0]["n"], 4);
    assert_eq!(
        a["groups"][1],
        json!({"workbench_id": "b2", "n": 1, "bytes": 12})
    );

    let c = ok(
        &mut wb,
        "workbench_catalog",
        json!({"field_prefix": "s", "include_facets": true}),
    );
    let names: Vec<&str> = c["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["section", "size"]);
    assert_eq!(
        c["facets"]["section"],
        json!({"logs": 2, "metadata": 1, "outputs": 2})
    );

    let f = ok(
        &mut wb,
        "workbench_find",
        json!({"committed": true, "manifest_pattern": "needle-42", "include_manifest": true}),
    );
    assert_eq!(f["workbenches"].as_array().unwrap().len(), 1);
    assert_eq!(
        f["workbenches"][0]["manifest"]["manifest"]["model"],
        "resnet"
    );
    let f = ok(&mut wb, "workbench_find", json!({"committed": false}));
    assert_eq!(f["workbenches"][0]["id"], "b2");
    let f = ok(
        &mut wb,
        "workbench_find",
        json!({"manifest_pattern": "absent"}),
    );
    assert_eq!(f["total"], 0);
    // The pattern is matched in the caller's manifest as canonical compact
    // JSON, not in the stored file's layout or the bridge's own fields.
    let f = ok(
        &mut wb,
        "workbench_find",
        json!({"manifest_pattern": "\"model\":\"resnet\""}),
    );
    assert_eq!(f["total"], 1, "{f}");
    for not_the_callers in ["nokv.workbench.run_manifest.v1", "\"model\": \"resnet\""] {
        let f = ok(
            &mut wb,
            "workbench_find",
            json!({"manifest_pattern": not_the_callers}),
        );
        assert_eq!(f["total"], 0, "{not_the_callers}: {f}");
    }
}

#[test]
fn search_pages_stay_at_one_read_version_under_concurrent_writes() {
    let (env, mut wb) = seeded();
    let mut writer = workbench(&env);
    let q = json!({"id": "a1", "sort": [{"field": "path"}], "fields": ["path"], "limit": 2});
    let p1 = ok(&mut wb, "workbench_search", q.clone());
    assert_eq!(p1["total"], 4);
    // Another agent writes between the pages.
    ok(
        &mut writer,
        "workbench_put_file",
        json!({"id": "a1", "section": "logs", "path": "aaa.log", "text": "new"}),
    );
    let mut q2 = q.clone();
    q2["cursor"] = p1["next_cursor"].clone();
    let p2 = ok(&mut wb, "workbench_search", q2);
    assert_eq!(
        (p2["total"].clone(), p2["read_version"].clone()),
        (json!(4), p1["read_version"].clone())
    );
    let mut all: Vec<String> = p1["rows"]
        .as_array()
        .unwrap()
        .iter()
        .chain(p2["rows"].as_array().unwrap())
        .map(|r| r["path"].as_str().unwrap().to_string())
        .collect();
    assert!(!all.contains(&"aaa.log".to_string()));
    all.dedup();
    assert_eq!(all.len(), 4, "no row twice, none lost: {all:?}");
    assert_eq!(ok(&mut wb, "workbench_search", q)["total"], 5);
}

/// Forwards everything, but answers one change message fewer than asked
/// (a broken or hostile backend).
struct AnswersShort(nokv_workbench::scribe::ScribeStore);

impl nokv_workbench::store::Store for AnswersShort {
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
        self.0.version_info(version)
    }
    fn version_infos(
        &mut self,
        versions: &[u64],
    ) -> Result<Vec<nokv_workbench::store::VersionInfo>, nokv_workbench::WbError> {
        let mut out = self.0.version_infos(versions)?;
        out.pop();
        Ok(out)
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

#[test]
fn a_store_answering_fewer_change_messages_than_asked_is_refused_not_indexed() {
    let (env, mut wb) = seeded();
    let store = nokv_workbench::scribe::ScribeStore::over(
        super::support::client(&env),
        scribe_testkit::env::REPO,
        "bot",
    )
    .unwrap();
    let mut bad = nokv_workbench::Workbench::new(AnswersShort(store), "bot");
    for (tool, input) in [
        (
            "workbench_search",
            json!({"predicates": [{"field": "size", "op": "gt", "value": 0}], "limit": 10}),
        ),
        (
            "workbench_restore",
            json!({"id": "a1", "destination_id": "a1-copy"}),
        ),
    ] {
        let e = bad.call(tool, &input).unwrap_err();
        assert_eq!(e.code, "storage", "{tool}: {e}");
        assert!(e.message.contains("the store answered"), "{tool}: {e}");
    }
    // The refused restore published nothing.
    let e = err(
        &mut wb,
        "workbench_stat",
        json!({"id": "a1-copy", "section": "outputs", "path": "m.json"}),
    );
    assert_eq!(e.code, "workbench_not_found");
}

/// A find that returns manifests is bounded by bytes, not only by rows:
/// a page stops before the manifests it inlines pass 4 MiB (`truncated`,
/// the cursor continues after the last row returned), and a manifest
/// larger than that alone is named, not inlined. Every workbench is
/// returned once, in order, across the pages.
#[test]
fn find_with_manifests_is_bounded_by_bytes_and_its_pages_lose_nothing() {
    let env = Env::new(Transport::InProcess);
    let mut wb = workbench(&env);
    let digest = format!("sha256:{}", "e".repeat(64));
    let mut ids = Vec::new();
    for i in 0..7u64 {
        let id = format!("w{i}");
        ok(&mut wb, "workbench_create", json!({"id": id}));
        // w3's manifest alone is larger than a page may inline.
        let blob = "m".repeat(if i == 3 { 5 << 20 } else { 1 << 20 });
        ok(
            &mut wb,
            "workbench_commit",
            json!({"id": id, "manifest": {"i": i, "blob": blob}, "content_digest_uri": digest}),
        );
        ids.push(id);
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut truncated_pages = 0;
    loop {
        let mut q = json!({"include_manifest": true});
        if let Some(c) = &cursor {
            q["cursor"] = json!(c);
        }
        let f = ok(&mut wb, "workbench_find", q);
        let bytes = f.to_string().len();
        assert!(
            bytes <= (4 << 20) + (64 << 10),
            "a find page of {bytes} bytes"
        );
        assert_eq!(f["total"], 7);
        for w in f["workbenches"].as_array().unwrap() {
            let id = w["id"].as_str().unwrap().to_string();
            if id == "w3" {
                assert_eq!(w["manifest"], serde_json::Value::Null, "{id}");
                assert_eq!(w["manifest_omitted"], true, "{id}");
                assert!(w["manifest_size"].as_u64().unwrap() > 5 << 20);
            } else {
                assert_eq!(w["manifest"]["manifest"]["i"], json!(seen.len()), "{id}");
                assert_eq!(
                    w["manifest"]["manifest"]["blob"].as_str().unwrap().len(),
                    1 << 20
                );
            }
            seen.push(id);
        }
        if f["truncated"] == true {
            truncated_pages += 1;
        }
        match f["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    assert_eq!(seen, ids);
    assert!(truncated_pages >= 1);
    // Without manifests, one page holds them all.
    let f = ok(&mut wb, "workbench_find", json!({}));
    assert_eq!(f["workbenches"].as_array().unwrap().len(), 7);
    assert_eq!(f["truncated"], false);
}

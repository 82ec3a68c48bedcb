//! The `nokv` binary against a data root (path URL).

use std::io::Write;
use std::process::{Command, Stdio};

use scribe_testkit::env::{Env, Transport, REPO};
use serde_json::{json, Value};

fn nokv(env: &Env, args: &[&str], stdin: Option<&str>) -> (i32, Value) {
    nokv_with(env, args, stdin, None)
}

/// `nokv workbench TOOL INPUT`, which must succeed: its result.
fn ok_call(env: &Env, tool: &str, input: Value) -> Value {
    let (code, v) = nokv(env, &["workbench", tool, &input.to_string()], None);
    assert_eq!(code, 0, "{tool}: {v}");
    v
}

/// As [`nokv`], trusting the CA `ca` (`SCRIBE_CA_FILE`) when given.
fn nokv_with(
    env: &Env,
    args: &[&str],
    stdin: Option<&str>,
    ca: Option<&std::path::Path>,
) -> (i32, Value) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nokv"));
    cmd.args(["--server", env.url(), "--repo", REPO]).args(args);
    cmd.env_remove("SCRIBE_CA_FILE");
    cmd.env("NOKV_STATE_DIR", env.path("nokv-state"));
    if let Some(ca) = ca {
        cmd.env("SCRIBE_CA_FILE", ca);
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run nokv");
    let mut input = child.stdin.take().unwrap();
    if let Some(s) = stdin {
        input.write_all(s.as_bytes()).unwrap();
    }
    drop(input);
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let v = serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("{e}: {text:?} {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap(), v)
}

#[test]
fn cli_runs_tools_prints_json_and_fails_with_json() {
    let env = Env::new(Transport::Path);
    let (code, v) = nokv(
        &env,
        &["workbench", "workbench_create", r#"{"id":"cli"}"#],
        None,
    );
    assert_eq!((code, &v["created"]), (0, &json!(true)));
    let (code, v) = nokv(
        &env,
        &["workbench", "workbench_put_file"],
        Some(r#"{"id":"cli","section":"input","path":"a.txt","text":"hi"}"#),
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["size"], 2);
    let (code, v) = nokv(
        &env,
        &[
            "workbench",
            "workbench_read",
            r#"{"id":"cli","section":"input","path":"a.txt"}"#,
        ],
        None,
    );
    assert_eq!((code, &v["lines"]), (0, &json!(["hi"])));
    let (code, v) = nokv(
        &env,
        &[
            "workbench",
            "workbench_put_file",
            r#"{"id":"cli","section":"input","path":"../x","text":"hi"}"#,
        ],
        None,
    );
    assert_eq!(code, 1);
    assert_eq!(v["error"]["code"], "invalid_path");
    assert_eq!(v["error"]["retryable"], false);
    let (code, v) = nokv(
        &env,
        &["workbench", "workbench_stat", r#"{"id":"cli","bogus":1}"#],
        None,
    );
    assert_eq!((code, &v["error"]["code"]), (1, &json!("invalid_input")));
    let (code, v) = nokv(&env, &["schema"], None);
    assert_eq!(code, 0);
    assert_eq!(v.as_array().unwrap().len(), 18);
}

#[test]
fn materialize_then_collect_round_trips_with_content_types_in_one_change() {
    let env = Env::new(Transport::Path);
    nokv(
        &env,
        &["workbench", "workbench_create", r#"{"id":"sb"}"#],
        None,
    );
    nokv(
        &env,
        &[
            "workbench",
            "workbench_put_file",
            r#"{"id":"sb","section":"input","path":"d/data.bin","text":"abc","content_type":"application/x-data"}"#,
        ],
        None,
    );
    nokv(
        &env,
        &[
            "workbench",
            "workbench_put_file",
            r#"{"id":"sb","section":"scripts","path":"run.sh","text":"echo hi"}"#,
        ],
        None,
    );
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let (code, v) = nokv(&env, &["materialize", "sb", d], None);
    assert_eq!((code, &v["files"]), (0, &json!(2)), "{v}");
    assert_eq!(
        std::fs::read(dir.path().join("input/d/data.bin")).unwrap(),
        b"abc"
    );
    let types: Value = serde_json::from_slice(
        &std::fs::read(dir.path().join(".nokv/content-types.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(types["input/d/data.bin"], "application/x-data");
    // A program edits one file and adds two; collect publishes them in one change.
    std::fs::write(dir.path().join("scripts/run.sh"), "echo bye").unwrap();
    std::fs::create_dir_all(dir.path().join("outputs/r")).unwrap();
    std::fs::write(dir.path().join("outputs/r/a.txt"), "A").unwrap();
    std::fs::write(dir.path().join("outputs/b.json"), "{}").unwrap();
    let (code, v) = nokv(&env, &["collect", d, "sb"], None);
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        (
            v["created"].clone(),
            v["replaced"].clone(),
            v["unchanged"].clone()
        ),
        (json!(2), json!(1), json!(1))
    );
    let change = v["change"].clone();
    for (section, path) in [
        ("scripts", "run.sh"),
        ("outputs", "r/a.txt"),
        ("outputs", "b.json"),
    ] {
        let input = json!({"id": "sb", "section": section, "path": path}).to_string();
        let (_, st) = nokv(&env, &["workbench", "workbench_stat", &input], None);
        assert_eq!(st["generation"], change, "{section}/{path}");
    }
    let (_, st) = nokv(
        &env,
        &[
            "workbench",
            "workbench_stat",
            r#"{"id":"sb","section":"input","path":"d/data.bin"}"#,
        ],
        None,
    );
    assert_eq!(st["content_type"], "application/x-data");
    // Collecting the same directory again publishes nothing.
    let (_, v) = nokv(&env, &["collect", d, "sb"], None);
    assert_eq!(
        (v["change"].clone(), v["unchanged"].clone()),
        (Value::Null, json!(4))
    );
    // A file outside the five sections is refused.
    std::fs::write(dir.path().join("stray.txt"), "x").unwrap();
    let (code, v) = nokv(&env, &["collect", d, "sb"], None);
    assert_eq!((code, &v["error"]["code"]), (1, &json!("invalid_input")));
}

/// Agent A materializes; another writer then replaces two of its files.
/// A's collect publishes only what changed in A's directory since
/// materialize: the other writer's versions stay; a file A changed or
/// removed whose live copy also moved is refused by name (nothing
/// published); a removal whose live copy did not move is a deletion; the
/// record follows each collect.
#[test]
fn collect_publishes_only_what_changed_since_materialize_and_refuses_conflicts() {
    let env = Env::new(Transport::Path);
    let call = |tool: &str, input: Value| -> (i32, Value) {
        nokv(&env, &["workbench", tool, &input.to_string()], None)
    };
    let read = |name: &str| {
        let (code, v) = call(
            "workbench_read",
            json!({"id": "lu", "section": "outputs", "path": name}),
        );
        if code == 0 {
            v["lines"].clone()
        } else {
            v["error"]["code"].clone()
        }
    };
    call("workbench_create", json!({"id": "lu"}));
    for name in ["shared.txt", "mine.txt", "gone.txt", "theirs.txt"] {
        let (code, v) = call(
            "workbench_put_file",
            json!({"id": "lu", "section": "outputs", "path": name, "text": format!("v1 {name}\n")}),
        );
        assert_eq!(code, 0, "{v}");
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let out = |name: &str| dir.path().join("outputs").join(name);
    let (code, v) = nokv(&env, &["materialize", "lu", d], None);
    assert_eq!(code, 0, "{v}");
    for name in ["shared.txt", "theirs.txt"] {
        let (code, v) = call(
            "workbench_put_file",
            json!({"id": "lu", "section": "outputs", "path": name, "text": "v2 by B\n", "replace": true}),
        );
        assert_eq!(code, 0, "{v}");
    }
    // A's program writes only new.txt.
    std::fs::write(out("new.txt"), "new\n").unwrap();
    let (code, v) = nokv(&env, &["collect", d, "lu"], None);
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        (
            &v["created"],
            &v["replaced"],
            &v["deleted"],
            &v["unchanged"]
        ),
        (&json!(1), &json!(0), &json!(0), &json!(4)),
        "{v}"
    );
    assert_eq!(read("shared.txt"), json!(["v2 by B"]));
    // Changed here and there (shared), removed here and changed there
    // (theirs): refused by name; mine (changed here only) is not published.
    std::fs::write(out("shared.txt"), "A's edit\n").unwrap();
    std::fs::write(out("mine.txt"), "A's edit\n").unwrap();
    std::fs::remove_file(out("theirs.txt")).unwrap();
    std::fs::remove_file(out("gone.txt")).unwrap();
    let (code, v) = nokv(&env, &["collect", d, "lu"], None);
    assert_eq!(
        (code, &v["error"]["code"]),
        (1, &json!("collect_conflict")),
        "{v}"
    );
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("outputs/shared.txt") && msg.contains("outputs/theirs.txt"),
        "{msg}"
    );
    assert!(
        !msg.contains("mine.txt") && !msg.contains("gone.txt"),
        "{msg}"
    );
    assert_eq!(read("mine.txt"), json!(["v1 mine.txt"]));
    assert_eq!(read("gone.txt"), json!(["v1 gone.txt"]));
    // With the two put back as materialized, the rest publishes: mine is
    // replaced, gone is deleted, the other writer's versions stay.
    std::fs::write(out("shared.txt"), "v1 shared.txt\n").unwrap();
    std::fs::write(out("theirs.txt"), "v1 theirs.txt\n").unwrap();
    let (code, v) = nokv(&env, &["collect", d, "lu"], None);
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        (&v["replaced"], &v["deleted"]),
        (&json!(1), &json!(1)),
        "{v}"
    );
    assert_eq!(read("mine.txt"), json!(["A's edit"]));
    assert_eq!(read("gone.txt"), json!("not_found"));
    assert_eq!(read("shared.txt"), json!(["v2 by B"]));
    assert_eq!(read("theirs.txt"), json!(["v2 by B"]));
    // The record follows the collect: A's next change of mine publishes.
    std::fs::write(out("mine.txt"), "again\n").unwrap();
    let (code, v) = nokv(&env, &["collect", d, "lu"], None);
    assert_eq!((code, &v["replaced"]), (0, &json!(1)), "{v}");
    assert_eq!(read("mine.txt"), json!(["again"]));
}

/// A program run in a materialized directory leaves a symbolic link (or a
/// hard link) where a file was, or replaces a section directory by a
/// link: the next materialize refuses the link by name and writes nothing
/// outside the directory; a hard link is replaced, its target untouched.
#[cfg(unix)]
#[test]
fn materialize_never_writes_through_a_link_left_in_the_directory() {
    let env = Env::new(Transport::Path);
    let call = |tool: &str, input: Value| ok_call(&env, tool, input);
    call("workbench_create", json!({"id": "ln"}));
    for (section, path) in [("outputs", "report.txt"), ("input", "data.txt")] {
        call(
            "workbench_put_file",
            json!({"id": "ln", "section": section, "path": path, "text": "agent output\n"}),
        );
    }
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim.txt");
    std::fs::write(&victim, "precious\n").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let (code, v) = nokv(&env, &["materialize", "ln", d], None);
    assert_eq!(code, 0, "{v}");
    let report = dir.path().join("outputs/report.txt");
    std::fs::remove_file(&report).unwrap();
    std::os::unix::fs::symlink(&victim, &report).unwrap();
    let (code, v) = nokv(&env, &["materialize", "ln", d], None);
    assert_eq!(
        (code, &v["error"]["code"]),
        (1, &json!("invalid_input")),
        "{v}"
    );
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("outputs/report.txt") && msg.contains("symbolic link"),
        "{msg}"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    // A section directory replaced by a link to a directory elsewhere.
    std::fs::remove_file(&report).unwrap();
    let outputs = dir.path().join("outputs");
    std::fs::remove_dir(&outputs).unwrap();
    std::os::unix::fs::symlink(outside.path(), &outputs).unwrap();
    let (code, v) = nokv(&env, &["materialize", "ln", d], None);
    assert_eq!(
        (code, &v["error"]["code"]),
        (1, &json!("invalid_input")),
        "{v}"
    );
    let mut there: Vec<_> = std::fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    there.sort();
    assert_eq!(there, vec![std::ffi::OsString::from("victim.txt")]);
    // A hard link (to other bytes: local work, refused without --force)
    // is replaced by the file, its target left as it was.
    std::fs::remove_file(&outputs).unwrap();
    std::fs::create_dir(&outputs).unwrap();
    std::fs::hard_link(&victim, &report).unwrap();
    let (code, v) = nokv(&env, &["materialize", "ln", d], None);
    assert_eq!(
        (code, &v["error"]["code"]),
        (1, &json!("materialize_conflict")),
        "{v}"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    let (code, v) = nokv(&env, &["materialize", "--force", "ln", d], None);
    assert_eq!(code, 0, "{v}");
    assert_eq!(std::fs::read_to_string(&report).unwrap(), "agent output\n");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    // Nothing but the record files is left under .nokv.
    let mut meta: Vec<_> = std::fs::read_dir(dir.path().join(".nokv"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    meta.sort();
    assert_eq!(meta, ["content-types.json", "materialized.json"]);
}

/// Materialize then collect of a committed and of a restored workbench:
/// the unchanged reserved files (run and restore manifests) are left
/// alone; a changed one is refused by name.
#[test]
fn collect_leaves_unchanged_reserved_files_alone_and_refuses_changed_ones() {
    let env = Env::new(Transport::Path);
    let call = |tool: &str, input: Value| ok_call(&env, tool, input);
    call("workbench_create", json!({"id": "rt"}));
    call(
        "workbench_put_file",
        json!({"id": "rt", "section": "input", "path": "data.txt", "text": "v1\n"}),
    );
    call(
        "workbench_commit",
        json!({"id": "rt", "manifest": {"step": 1}, "content_digest_uri": format!("sha256:{}", "0".repeat(64))}),
    );
    call(
        "workbench_restore",
        json!({"id": "rt", "destination_id": "rt2"}),
    );
    for (id, reserved) in [
        ("rt", "run_manifest.json"),
        ("rt2", "restore_manifest.json"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap();
        let (code, v) = nokv(&env, &["materialize", id, d], None);
        assert_eq!(code, 0, "{v}");
        let manifest = dir.path().join("metadata").join(reserved);
        assert!(manifest.is_file(), "{id}: {reserved} materialized");
        std::fs::create_dir_all(dir.path().join("outputs")).unwrap();
        std::fs::write(dir.path().join("outputs/result.txt"), "result\n").unwrap();
        let (code, v) = nokv(&env, &["collect", d, id], None);
        assert_eq!((code, &v["created"]), (0, &json!(1)), "{id}: {v}");
        // Without the record too (a directory compared with the live rows).
        std::fs::remove_file(dir.path().join(".nokv/materialized.json")).unwrap();
        std::fs::write(dir.path().join("outputs/result.txt"), "result 2\n").unwrap();
        let (code, v) = nokv(&env, &["collect", d, id], None);
        assert_eq!((code, &v["replaced"]), (0, &json!(1)), "{id}: {v}");
        std::fs::write(&manifest, "{}").unwrap();
        let (code, v) = nokv(&env, &["collect", d, id], None);
        assert_eq!(
            (code, &v["error"]["code"]),
            (1, &json!("reserved_path")),
            "{id}: {v}"
        );
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.contains(&format!("metadata/{reserved}")), "{msg}");
    }
}

/// The CLI against a `scribes://` server (the test CA trusted through
/// `SCRIBE_CA_FILE`): tools, materialize and collect over TLS; without the
/// CA the connection is refused with a JSON error before any tool runs.
#[test]
fn cli_over_tls_runs_tools_and_the_sandbox_adapters() {
    let env = Env::new(Transport::Tls);
    assert!(env.url().starts_with("scribes://"), "{}", env.url());
    let ca = env.ca_file();
    let run = |args: &[&str]| nokv_with(&env, args, None, Some(&ca));
    let (code, v) = run(&["workbench", "workbench_create", r#"{"id":"t"}"#]);
    assert_eq!((code, &v["created"]), (0, &json!(true)), "{v}");
    let (code, v) = run(&[
        "workbench",
        "workbench_put_file",
        r#"{"id":"t","section":"outputs","path":"o/r.txt","text":"over tls"}"#,
    ]);
    assert_eq!(code, 0, "{v}");
    let change = v["generation"].clone();
    let (code, v) = run(&[
        "workbench",
        "workbench_read",
        r#"{"id":"t","section":"outputs","path":"o/r.txt"}"#,
    ]);
    assert_eq!((code, &v["lines"]), (0, &json!(["over tls"])), "{v}");
    // Three more files of other sizes: materialize over the network
    // downloads on two lanes (two connections).
    for (name, size) in [
        ("big.bin", 300_000usize),
        ("mid.bin", 70_000),
        ("small.bin", 10),
    ] {
        let body = scribe_testkit::noise(size, size as u64);
        let input = json!({"id": "t", "section": "outputs", "path": name,
                           "base64": base64_encode(&body)})
        .to_string();
        // Large input goes through stdin (an argument is at most 128 KiB).
        let (code, v) = nokv_with(
            &env,
            &["workbench", "workbench_put_file"],
            Some(&input),
            Some(&ca),
        );
        assert_eq!(code, 0, "{v}");
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let (code, v) = run(&["materialize", "t", d]);
    assert_eq!((code, &v["files"]), (0, &json!(4)), "{v}");
    assert_eq!(v["bytes"], json!(8 + 300_000 + 70_000 + 10), "{v}");
    for (name, size) in [
        ("big.bin", 300_000usize),
        ("mid.bin", 70_000),
        ("small.bin", 10),
    ] {
        let got = std::fs::read(dir.path().join("outputs").join(name)).unwrap();
        assert!(got == scribe_testkit::noise(size, size as u64), "{name}");
    }
    std::fs::write(dir.path().join("outputs/o/r.txt"), "changed").unwrap();
    let (code, v) = run(&["collect", d, "t"]);
    assert_eq!((code, &v["replaced"]), (0, &json!(1)), "{v}");
    assert_eq!(v["unchanged"], json!(3), "{v}");
    assert!(v["change"].as_u64().unwrap() > change.as_u64().unwrap());
    // Without the CA the server's certificate is not trusted.
    let (code, v) = nokv_with(
        &env,
        &["workbench", "workbench_stat", r#"{"id":"t"}"#],
        None,
        None,
    );
    assert_eq!(code, 1, "{v}");
    assert!(v["error"]["code"].is_string(), "{v}");
    let (code, v) = run(&["workbench", "workbench_stat", r#"{"id":"t"}"#]);
    assert_eq!(code, 0, "{v}");
}

fn base64_encode(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// `nokv --server SERVER --repo REPO workbench workbench_find '{}'`.
fn find_at(server: &str, repo: &str) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_nokv"))
        .args(["--server", server, "--repo", repo])
        .args(["workbench", "workbench_find", "{}"])
        .env_remove("SCRIBE_CA_FILE")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_missing_data_root_or_repository_is_agent_root_not_found() {
    let env = Env::new(Transport::Path);
    let missing = env.path("nowhere");
    let v = find_at(missing.to_str().unwrap(), REPO);
    assert_eq!(v["error"]["code"], "agent_root_not_found", "{v}");
    assert_eq!(v["error"]["retryable"], false, "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        !message.contains("nowhere") && !message.contains("LOCK"),
        "{v}"
    );
    let v = find_at(env.url(), "no-such-repo");
    assert_eq!(v["error"]["code"], "agent_root_not_found", "{v}");
}

#[test]
fn an_agent_root_that_is_not_one_path_component_is_refused_by_name() {
    let env = Env::new(Transport::Path);
    for bad in ["", "../../etc", "a/b", "a\nb", "."] {
        let out = Command::new(env!("CARGO_BIN_EXE_nokv"))
            .args(["--server", env.url(), "--repo", REPO, "--agent-root", bad])
            .args(["workbench", "workbench_find", "{}"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {stderr}");
        assert!(stderr.contains("--agent-root"), "{bad:?}: {stderr}");
        assert!(stderr.contains("an agent root is"), "{bad:?}: {stderr}");
    }
}

/// The materialize record is read back from a directory a program used:
/// a damaged one, or one of another workbench, is refused by name and
/// nothing is published.
#[test]
fn a_damaged_or_foreign_materialize_record_is_refused_and_publishes_nothing() {
    let env = Env::new(Transport::Path);
    for id in ["mine", "other"] {
        let (code, v) = nokv(
            &env,
            &[
                "workbench",
                "workbench_create",
                &format!(r#"{{"id":"{id}"}}"#),
            ],
            None,
        );
        assert_eq!(code, 0, "{v}");
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let (code, v) = nokv(&env, &["materialize", "mine", d], None);
    assert_eq!(code, 0, "{v}");
    std::fs::create_dir_all(dir.path().join("outputs")).unwrap();
    std::fs::write(dir.path().join("outputs/new.txt"), "new\n").unwrap();
    let record = dir.path().join(".nokv/materialized.json");
    let good = std::fs::read(&record).unwrap();
    for damaged in [&b"\xff{ not json"[..], br#"{"schema":"x"}"#] {
        std::fs::write(&record, damaged).unwrap();
        let (code, v) = nokv(&env, &["collect", d, "mine"], None);
        assert_eq!(
            (code, &v["error"]["code"]),
            (1, &json!("invalid_input")),
            "{v}"
        );
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("materialize record"),
            "{v}"
        );
    }
    std::fs::write(&record, good).unwrap();
    let (code, v) = nokv(&env, &["collect", d, "other"], None);
    assert_eq!(
        (code, &v["error"]["code"]),
        (1, &json!("invalid_input")),
        "{v}"
    );
    let (_, v) = nokv(
        &env,
        &[
            "workbench",
            "workbench_list",
            r#"{"id":"other","section":"outputs"}"#,
        ],
        None,
    );
    assert_eq!(v["items"], json!([]), "nothing published: {v}");
}

/// The files of a directory below `root` (relative, `/`-separated, sorted),
/// `.nokv/` left out.
fn tree(root: &std::path::Path) -> Vec<String> {
    fn walk(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().to_str().unwrap().to_string();
            if rel == ".nokv" {
                continue;
            }
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.push(rel);
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

/// Materialize again over a directory an agent worked in: a file changed
/// (or removed) there since the last materialize whose workbench version
/// is not what is there is refused by name, and nothing at all is
/// written; a file changed there to exactly the workbench's new version,
/// or untouched there and moved in the workbench, is fine; a local new
/// file is left alone; `--force` discards the local changes, naming them.
/// A first materialize into a directory that already holds a different
/// file at a destination refuses it the same way.
#[test]
fn materialize_refuses_to_overwrite_local_work_and_force_discards_it() {
    let env = Env::new(Transport::Path);
    let call = |tool: &str, input: Value| ok_call(&env, tool, input);
    let put = |section: &str, path: &str, text: &str, replace: bool| {
        call(
            "workbench_put_file",
            json!({"id": "mw", "section": section, "path": path, "text": text, "replace": replace}),
        )
    };
    call("workbench_create", json!({"id": "mw"}));
    for name in ["a.txt", "b.txt", "c.txt"] {
        put("outputs", name, &format!("v1 {name}\n"), false);
    }
    put("input", "d.txt", "v1 d.txt\n", false);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let file = |rel: &str| dir.path().join(rel);
    let text = |rel: &str| std::fs::read_to_string(file(rel)).unwrap();
    let (code, v) = nokv(&env, &["materialize", "mw", d], None);
    assert_eq!((code, &v["files"]), (0, &json!(4)), "{v}");
    let first = v;
    // No conflict: b moved in the workbench only, c changed here to the
    // workbench's new version, mine.txt is the agent's new file.
    put("outputs", "b.txt", "v2 b.txt\n", true);
    put("outputs", "c.txt", "v2 c.txt\n", true);
    std::fs::write(file("outputs/c.txt"), "v2 c.txt\n").unwrap();
    std::fs::write(file("outputs/mine.txt"), "mine\n").unwrap();
    let (code, quiet) = nokv(&env, &["materialize", "mw", d], None);
    assert_eq!(code, 0, "{quiet}");
    assert_eq!(text("outputs/b.txt"), "v2 b.txt\n");
    assert_eq!(text("outputs/c.txt"), "v2 c.txt\n");
    assert_eq!(text("outputs/mine.txt"), "mine\n");
    // The agent edits a (which also moves in the workbench) and removes d;
    // a local new.txt meets another writer's new.txt; b moves again.
    std::fs::write(file("outputs/a.txt"), "A's work\n").unwrap();
    put("outputs", "a.txt", "v2 a.txt\n", true);
    std::fs::remove_file(file("input/d.txt")).unwrap();
    std::fs::write(file("outputs/new.txt"), "A's new\n").unwrap();
    put("outputs", "new.txt", "B's new\n", false);
    put("outputs", "b.txt", "v3 b.txt\n", true);
    let record = std::fs::read(file(".nokv/materialized.json")).unwrap();
    let before = tree(dir.path());
    let (code, v) = nokv(&env, &["materialize", "mw", d], None);
    assert_eq!(
        (code, &v["error"]["code"]),
        (1, &json!("materialize_conflict")),
        "{v}"
    );
    let msg = v["error"]["message"].as_str().unwrap();
    for name in ["outputs/a.txt", "input/d.txt", "outputs/new.txt"] {
        assert!(msg.contains(name), "{name}: {msg}");
    }
    for name in ["b.txt", "c.txt", "mine.txt"] {
        assert!(!msg.contains(name), "{name}: {msg}");
    }
    // Nothing was written: not even b, which had no conflict.
    assert_eq!(tree(dir.path()), before);
    assert_eq!(text("outputs/a.txt"), "A's work\n");
    assert_eq!(text("outputs/new.txt"), "A's new\n");
    assert_eq!(text("outputs/b.txt"), "v2 b.txt\n");
    assert_eq!(
        std::fs::read(file(".nokv/materialized.json")).unwrap(),
        record
    );
    // --force discards the local changes, naming each; the agent's own
    // new file stays.
    let (code, v) = nokv(&env, &["materialize", "--force", "mw", d], None);
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        v["discarded"],
        json!(["input/d.txt", "outputs/a.txt", "outputs/new.txt"]),
        "{v}"
    );
    // What each materialize reported: all written, then only b.
    assert_eq!(
        (&first["written"], &first["unchanged"]),
        (&json!(4), &json!(0)),
        "{first}"
    );
    assert_eq!(
        (
            &quiet["files"],
            &quiet["written"],
            &quiet["unchanged"],
            &quiet["discarded"]
        ),
        (&json!(4), &json!(1), &json!(3), &json!([])),
        "{quiet}"
    );
    assert_eq!(text("outputs/a.txt"), "v2 a.txt\n");
    assert_eq!(text("input/d.txt"), "v1 d.txt\n");
    assert_eq!(text("outputs/new.txt"), "B's new\n");
    assert_eq!(text("outputs/b.txt"), "v3 b.txt\n");
    assert_eq!(text("outputs/mine.txt"), "mine\n");
    // A first materialize into a directory holding other files: a
    // different file at a destination is refused, an identical one is fine.
    let fresh = tempfile::tempdir().unwrap();
    let f = fresh.path().to_str().unwrap();
    std::fs::create_dir_all(fresh.path().join("outputs")).unwrap();
    std::fs::write(fresh.path().join("outputs/a.txt"), "someone's a\n").unwrap();
    std::fs::write(fresh.path().join("outputs/b.txt"), "v3 b.txt\n").unwrap();
    std::fs::write(fresh.path().join("outputs/other.txt"), "other\n").unwrap();
    let (code, v) = nokv(&env, &["materialize", "mw", f], None);
    assert_eq!(
        (code, &v["error"]["code"]),
        (1, &json!("materialize_conflict")),
        "{v}"
    );
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("outputs/a.txt") && !msg.contains("b.txt"),
        "{msg}"
    );
    assert_eq!(
        tree(fresh.path()),
        ["outputs/a.txt", "outputs/b.txt", "outputs/other.txt"]
    );
    assert!(!fresh.path().join(".nokv").exists());
    std::fs::remove_file(fresh.path().join("outputs/a.txt")).unwrap();
    let (code, v) = nokv(&env, &["materialize", "mw", f], None);
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        (&v["written"], &v["unchanged"]),
        (&json!(4), &json!(1)),
        "{v}"
    );
    assert_eq!(
        std::fs::read_to_string(fresh.path().join("outputs/other.txt")).unwrap(),
        "other\n"
    );
}

/// Files materialize wrote that the workbench has since deleted: removed
/// from the directory (and the record) when unchanged there, with the
/// directories they leave empty; kept and named when changed there (collect
/// then names the conflict); `--force` removes them too.
#[test]
fn materialize_removes_files_the_workbench_deleted_and_keeps_changed_ones() {
    let env = Env::new(Transport::Path);
    let call = |tool: &str, input: Value| ok_call(&env, tool, input);
    call("workbench_create", json!({"id": "st"}));
    for path in ["stay.txt", "run/old.txt", "run/edited.txt", "gone/x.txt"] {
        call(
            "workbench_put_file",
            json!({"id": "st", "section": "outputs", "path": path, "text": format!("v1 {path}\n")}),
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let (code, v) = nokv(&env, &["materialize", "st", d], None);
    assert_eq!(code, 0, "{v}");
    // Another agent deletes three files (a collect of its removals).
    let other = tempfile::tempdir().unwrap();
    let o = other.path().to_str().unwrap();
    let (code, v) = nokv(&env, &["materialize", "st", o], None);
    assert_eq!(code, 0, "{v}");
    for path in ["run/old.txt", "run/edited.txt", "gone/x.txt"] {
        std::fs::remove_file(other.path().join("outputs").join(path)).unwrap();
    }
    let (code, v) = nokv(&env, &["collect", o, "st"], None);
    assert_eq!((code, &v["deleted"]), (0, &json!(3)), "{v}");
    // Here the agent edited one of them and added a file of its own.
    let file = |rel: &str| dir.path().join(rel);
    std::fs::write(file("outputs/run/edited.txt"), "A's work\n").unwrap();
    std::fs::write(file("outputs/run/local.txt"), "A's new\n").unwrap();
    let (code, v) = nokv(&env, &["materialize", "st", d], None);
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        tree(dir.path()),
        [
            "outputs/run/edited.txt",
            "outputs/run/local.txt",
            "outputs/stay.txt"
        ]
    );
    assert_eq!(
        std::fs::read_to_string(file("outputs/run/edited.txt")).unwrap(),
        "A's work\n"
    );
    assert!(!file("outputs/gone").exists());
    assert_eq!(
        (&v["files"], &v["removed"], &v["kept"]),
        (
            &json!(1),
            &json!(["outputs/gone/x.txt", "outputs/run/old.txt"]),
            &json!(["outputs/run/edited.txt"])
        ),
        "{v}"
    );
    let record: Value =
        serde_json::from_slice(&std::fs::read(file(".nokv/materialized.json")).unwrap()).unwrap();
    let mut keys: Vec<&String> = record["files"].as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["outputs/run/edited.txt", "outputs/stay.txt"]);
    // Changed here, deleted there: collect names it.
    let (code, v) = nokv(&env, &["collect", d, "st"], None);
    assert_eq!(
        (code, &v["error"]["code"]),
        (1, &json!("collect_conflict")),
        "{v}"
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("outputs/run/edited.txt"),
        "{v}"
    );
    // --force discards it; the agent's own new file stays.
    let (code, v) = nokv(&env, &["materialize", "--force", "st", d], None);
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        (&v["removed"], &v["kept"], &v["discarded"]),
        (
            &json!(["outputs/run/edited.txt"]),
            &json!([]),
            &json!(["outputs/run/edited.txt"])
        ),
        "{v}"
    );
    assert_eq!(
        tree(dir.path()),
        ["outputs/run/local.txt", "outputs/stay.txt"]
    );
}

/// A person submits files outside the five section directories of a
/// workbench (`job/README.md`, `job/docs/notes.txt`): materialize writes
/// them at their path under the directory, grep and search show that path
/// (no section), and collect leaves them alone when unchanged and refuses
/// a changed one by name; removing one locally deletes nothing. A
/// person's file under `job/.nokv/` cannot be written there (materialize's
/// own records): it is skipped and named.
#[test]
fn a_persons_files_outside_the_sections_are_materialized_grepped_and_never_collected() {
    use scribe_format::{OperationId, WorkspaceId};
    use scribe_testkit::change::{change, Requests};
    let env = Env::new(Transport::Tcp);
    let call = |tool: &str, input: Value| ok_call(&env, tool, input);
    call("workbench_create", json!({"id": "job"}));
    call(
        "workbench_put_file",
        json!({"id": "job", "section": "outputs", "path": "r.txt", "text": "agent result\n"}),
    );
    let mut person = env.connect();
    let ws = WorkspaceId::random();
    person.register(ws);
    let out = person.upload_and_submit(
        ws,
        OperationId::random(),
        &change(&[
            ("job/README.md", Some(b"hello from ada\n".as_slice()), 0),
            ("job/docs/notes.txt", Some(b"notes by ada\n".as_slice()), 0),
            ("job/.nokv/x", Some(b"odd\n".as_slice()), 0),
        ]),
        "a person's files",
    );
    assert_eq!(out.code, 0, "{}", out.detail);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let (code, v) = nokv(&env, &["materialize", "job", d], None);
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        tree(dir.path()),
        ["README.md", "docs/notes.txt", "outputs/r.txt"]
    );
    assert_eq!(
        (&v["files"], &v["skipped"]),
        (&json!(3), &json!([".nokv/x"])),
        "{v}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("docs/notes.txt")).unwrap(),
        "notes by ada\n"
    );
    assert!(!dir.path().join(".nokv/x").exists());
    // grep and search name them by their path, without a section.
    let v = call(
        "workbench_grep",
        json!({"id": "job", "pattern": "ada", "recursive": true}),
    );
    let mut found: Vec<(Value, Value)> = v["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["section"].clone(), m["path"].clone()))
        .collect();
    found.sort_by_key(|p| p.1.to_string());
    assert_eq!(
        found,
        [
            (Value::Null, json!("README.md")),
            (Value::Null, json!("docs/notes.txt"))
        ],
        "{v}"
    );
    let v = call(
        "workbench_search",
        json!({"id": "job", "predicates": [{"field": "section", "op": "not_exists"}],
               "fields": ["path", "name", "content_type"]}),
    );
    let paths: Vec<&Value> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["path"])
        .collect();
    assert_eq!(paths, [".nokv/x", "README.md", "docs/notes.txt"], "{v}");
    // Collect leaves them alone while they are as materialize wrote them.
    std::fs::write(dir.path().join("outputs/r.txt"), "agent result 2\n").unwrap();
    let (code, v) = nokv(&env, &["collect", d, "job"], None);
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        (&v["replaced"], &v["unchanged"]),
        (&json!(1), &json!(2)),
        "{v}"
    );
    // A changed one is refused by name, nothing published.
    std::fs::write(dir.path().join("docs/notes.txt"), "A's edit\n").unwrap();
    std::fs::write(dir.path().join("outputs/r.txt"), "agent result 3\n").unwrap();
    let (code, v) = nokv(&env, &["collect", d, "job"], None);
    assert_eq!(
        (code, &v["error"]["code"]),
        (1, &json!("invalid_input")),
        "{v}"
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("docs/notes.txt"),
        "{v}"
    );
    let v = call(
        "workbench_read",
        json!({"id": "job", "section": "outputs", "path": "r.txt"}),
    );
    assert_eq!(v["lines"], json!(["agent result 2"]));
    // Removed here: never deleted there.
    std::fs::remove_file(dir.path().join("docs/notes.txt")).unwrap();
    std::fs::remove_file(dir.path().join("README.md")).unwrap();
    let (code, v) = nokv(&env, &["collect", d, "job"], None);
    assert_eq!(
        (code, &v["replaced"], &v["deleted"]),
        (0, &json!(1), &json!(0)),
        "{v}"
    );
    let again = tempfile::tempdir().unwrap();
    let (code, v) = nokv(
        &env,
        &["materialize", "job", again.path().to_str().unwrap()],
        None,
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        tree(again.path()),
        ["README.md", "docs/notes.txt", "outputs/r.txt"]
    );
}

/// A directory holding another workbench's materialize record (or a
/// damaged one) is not materialized over: refused by name, nothing
/// written; `--force` replaces the record, and the files the old one named
/// stay as files materialize did not write.
#[test]
fn materialize_over_another_workbenchs_directory_is_refused_unless_forced() {
    let env = Env::new(Transport::Path);
    let call = |tool: &str, input: Value| ok_call(&env, tool, input);
    for (id, name) in [("one", "a.txt"), ("two", "b.txt")] {
        call("workbench_create", json!({"id": id}));
        call(
            "workbench_put_file",
            json!({"id": id, "section": "outputs", "path": name, "text": format!("{id}\n")}),
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let record = dir.path().join(".nokv/materialized.json");
    let (code, v) = nokv(&env, &["materialize", "one", d], None);
    assert_eq!(code, 0, "{v}");
    let one = std::fs::read(&record).unwrap();
    let (code, v) = nokv(&env, &["materialize", "two", d], None);
    assert_eq!(
        (code, &v["error"]["code"]),
        (1, &json!("invalid_input")),
        "{v}"
    );
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("\"one\"") && msg.contains("--force"), "{msg}");
    assert_eq!(tree(dir.path()), ["outputs/a.txt"]);
    assert_eq!(std::fs::read(&record).unwrap(), one);
    // A damaged record likewise.
    std::fs::write(&record, b"\xff{ not json").unwrap();
    let (code, v) = nokv(&env, &["materialize", "one", d], None);
    assert_eq!(
        (code, &v["error"]["code"]),
        (1, &json!("invalid_input")),
        "{v}"
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not a materialize record"),
        "{v}"
    );
    std::fs::write(&record, &one).unwrap();
    // --force: the record is two's; one's file is left as it is.
    let (code, v) = nokv(&env, &["materialize", "--force", "two", d], None);
    assert_eq!(code, 0, "{v}");
    assert_eq!(tree(dir.path()), ["outputs/a.txt", "outputs/b.txt"]);
    let r: Value = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    assert_eq!(r["id"], "two", "{r}");
    assert_eq!(
        r["files"].as_object().unwrap().keys().collect::<Vec<_>>(),
        ["outputs/b.txt"]
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("outputs/a.txt")).unwrap(),
        "one\n"
    );
}

/// A file of the workbench that became a directory (and a directory that
/// became a file): the unchanged old copies materialize wrote give way to
/// the new layout instead of blocking it.
#[test]
fn materialize_follows_a_file_that_became_a_directory_and_back() {
    let env = Env::new(Transport::Path);
    let call = |tool: &str, input: Value| ok_call(&env, tool, input);
    call("workbench_create", json!({"id": "sw"}));
    for path in ["model", "run/a.txt", "run/deep/b.txt"] {
        call(
            "workbench_put_file",
            json!({"id": "sw", "section": "outputs", "path": path, "text": format!("v1 {path}\n")}),
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let (code, v) = nokv(&env, &["materialize", "sw", d], None);
    assert_eq!(code, 0, "{v}");
    // Another agent swaps them: outputs/model becomes a directory,
    // outputs/run a file (a collect of the removals, then one of the new).
    let other = tempfile::tempdir().unwrap();
    let o = other.path().to_str().unwrap();
    let (code, v) = nokv(&env, &["materialize", "sw", o], None);
    assert_eq!(code, 0, "{v}");
    let out = other.path().join("outputs");
    std::fs::remove_file(out.join("model")).unwrap();
    std::fs::remove_dir_all(out.join("run")).unwrap();
    let (code, v) = nokv(&env, &["collect", o, "sw"], None);
    assert_eq!((code, &v["deleted"]), (0, &json!(3)), "{v}");
    std::fs::create_dir(out.join("model")).unwrap();
    std::fs::write(out.join("model/w.bin"), "weights\n").unwrap();
    std::fs::write(out.join("run"), "run as a file\n").unwrap();
    let (code, v) = nokv(&env, &["collect", o, "sw"], None);
    assert_eq!((code, &v["created"]), (0, &json!(2)), "{v}");
    let (code, v) = nokv(&env, &["materialize", "sw", d], None);
    assert_eq!(code, 0, "{v}");
    assert_eq!(tree(dir.path()), ["outputs/model/w.bin", "outputs/run"]);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("outputs/run")).unwrap(),
        "run as a file\n"
    );
    assert_eq!(
        v["removed"],
        json!([
            "outputs/model",
            "outputs/run/a.txt",
            "outputs/run/deep/b.txt"
        ]),
        "{v}"
    );
}

#[test]
fn cli_input_on_stdin_is_bounded_as_an_mcp_line() {
    use nokv_workbench::mcp::{read_input, MAX_INPUT_BYTES};
    // The reader: exactly the bound is read; one byte more is refused by
    // name; bytes that are not UTF-8 are refused by name.
    assert_eq!(read_input(&b"0123456789"[..], 10).unwrap(), "0123456789");
    let e = read_input(&b"0123456789x"[..], 10).unwrap_err();
    assert_eq!(e.code, "invalid_input");
    assert!(e.message.contains("MAX_INPUT_BYTES"), "{}", e.message);
    let e = read_input(&b"{\"a\":\"\xff\"}"[..], 10).unwrap_err();
    assert!(e.message.contains("not UTF-8"), "{}", e.message);
    assert_eq!(MAX_INPUT_BYTES, nokv_workbench::mcp::MAX_LINE_BYTES);

    // The binary: a put whose input is four times the bound is refused
    // after reading little more than the bound (the writer is cut off),
    // and nothing is published.
    let env = Env::new(Transport::Path);
    ok_call(&env, "workbench_create", json!({"id": "big"}));
    let head = ok_call(&env, "workbench_stat", json!({"id": "big"}));
    let mut child = Command::new(env!("CARGO_BIN_EXE_nokv"))
        .args(["--server", env.url(), "--repo", REPO])
        .args(["workbench", "workbench_put_file"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let mut written = 0u64;
        let start = br#"{"id":"big","section":"outputs","path":"big.txt","text":""#;
        if stdin.write_all(start).is_err() {
            return written;
        }
        written += start.len() as u64;
        let piece = vec![b'x'; 1 << 20];
        for _ in 0..256 {
            if stdin.write_all(&piece).is_err() {
                return written;
            }
            written += piece.len() as u64;
        }
        let _ = stdin.write_all(b"\"}");
        written
    });
    let out = child.wait_with_output().unwrap();
    let written = writer.join().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{v}");
    assert_eq!(v["error"]["code"], "invalid_input", "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("64 MiB"), "{message}");
    assert!(
        written < 128 << 20,
        "nokv read {written} bytes of a refused input"
    );
    let (code, v) = nokv(
        &env,
        &[
            "workbench",
            "workbench_stat",
            r#"{"id":"big","section":"outputs","path":"big.txt"}"#,
        ],
        None,
    );
    assert_eq!((code, &v["error"]["code"]), (1, &json!("not_found")), "{v}");
    let after = ok_call(&env, "workbench_stat", json!({"id": "big"}));
    assert_eq!(head, after);
}

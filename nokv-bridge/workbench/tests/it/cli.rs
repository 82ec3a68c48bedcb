//! The `nokv` binary against a data root (path URL).

use std::io::Write;
use std::process::{Command, Stdio};

use scribe_testkit::env::{Env, Transport, REPO};
use serde_json::{json, Value};

fn nokv(env: &Env, args: &[&str], stdin: Option<&str>) -> (i32, Value) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nokv"));
    cmd.args(["--server", env.url(), "--repo", REPO]).args(args);
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

//! `nokv mcp`: hand-written JSON-RPC lines, and a session driven by the
//! Python `mcp` client library (installed by .ci/run).

use std::io::Write;
use std::process::{Command, Stdio};

use scribe_testkit::env::{Env, Transport, REPO};
use serde_json::{json, Value};

#[test]
fn mcp_session_with_the_python_client_library() {
    let env = Env::new(Transport::Path);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/mcp_client.py");
    let out = Command::new("python3")
        .args([script, env!("CARGO_BIN_EXE_nokv"), env.url(), REPO])
        .output()
        .expect("python3 runs (the mcp package is installed by .ci/run)");
    assert!(
        out.status.success(),
        "the MCP client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["server"], "nokv");
    assert_eq!(v["tools"].as_array().unwrap().len(), 18);
    assert_eq!(v["closed_schemas"], true);
    assert_eq!(v["create"]["created"], true);
    assert_eq!(v["put_error"], false);
    assert_eq!(v["read"]["lines"], json!(["from mcp"]));
    assert_eq!(v["escape"]["isError"], true);
    assert_eq!(v["escape"]["error"]["error"]["code"], "invalid_path");
}

#[test]
fn mcp_raw_lines_errors_and_notifications() {
    let env = Env::new(Transport::Path);
    let mut child = Command::new(env!("CARGO_BIN_EXE_nokv"))
        .args(["--server", env.url(), "--repo", REPO, "mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"1999-01-01","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"nope"}"#,
        r#"not json"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"workbench_stat","arguments":{"id":"w","extra":1}}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"rm_rf"}}"#,
    ];
    let mut stdin = child.stdin.take().unwrap();
    for l in lines {
        writeln!(stdin, "{l}").unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let replies: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(replies.len(), 5, "{replies:?}"); // the notification has no answer
    assert_eq!(replies[0]["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(replies[1]["error"]["code"], -32601);
    assert_eq!(replies[2]["error"]["code"], -32700);
    assert_eq!(replies[3]["result"]["isError"], true);
    assert_eq!(
        replies[3]["result"]["structuredContent"]["error"]["code"],
        "invalid_input"
    );
    assert_eq!(replies[4]["error"]["code"], -32602);
}

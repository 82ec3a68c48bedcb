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
        .arg(env.path("nokv-state"))
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
    // Two identical appends, each answered, append twice.
    assert_eq!(v["appends"][0]["idempotent_replay"], false, "{v}");
    assert_eq!(v["appends"][1]["idempotent_replay"], false, "{v}");
    assert_eq!(v["appends"][1]["size"], 10, "{v}");
    assert_eq!(v["log"], json!(["step", "step"]));
    // Nothing is left pending once the answers were written.
    let pending: Vec<_> = walk(&env.path("nokv-state"));
    assert!(pending.is_empty(), "{pending:?}");
    assert_eq!(v["escape"]["isError"], true);
    assert_eq!(v["escape"]["error"]["error"]["code"], "invalid_path");
}

/// Every file below `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
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

/// `nokv mcp` fed `input` (raw bytes) until it ends: its exit status and
/// its answers.
fn raw_session(env: &Env, input: &[u8]) -> (bool, Vec<Value>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nokv"))
        .args([
            "--server",
            env.url(),
            "--repo",
            REPO,
            "mcp",
            "--reap-every-secs",
            "0",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let replies = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (out.status.success(), replies)
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;

#[test]
fn mcp_answers_every_bad_line_by_json_rpc_and_keeps_serving() {
    let env = Env::new(Transport::Path);
    let mut input = format!("{INIT}\n").into_bytes();
    input.extend_from_slice(b"\xff\xfe not utf8\n");
    input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\",\"x\":\"\xff\"}\n");
    for l in [
        r#"{"jsonrpc":"2.0","id":10,"method":"ping""#,
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{"id":"w"}},"id":11"#,
        "5",
        r#""x""#,
        "[]",
        r#"{"id":3,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":[1]}"#,
        r#"{"jsonrpc":"2.0","id":6,"method":7}"#,
        r#"{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"workbench_commit","arguments":{"id":"w","manifest":{"n":123456789012345678901234567890},"content_digest_uri":"sha256:00"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/whatever","params":5}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#,
    ] {
        input.extend_from_slice(format!("{l}\n").as_bytes());
    }
    let (ok, r) = raw_session(&env, &input);
    assert!(ok);
    let got: Vec<(Value, Value)> = r
        .iter()
        .map(|a| (a["id"].clone(), a["error"]["code"].clone()))
        .collect();
    assert_eq!(
        got,
        [
            (json!(0), Value::Null),
            (Value::Null, json!(-32700)),
            (json!(9), json!(-32700)),
            (json!(10), json!(-32700)),
            (json!(11), json!(-32700)),
            (Value::Null, json!(-32600)),
            (Value::Null, json!(-32600)),
            (Value::Null, json!(-32600)),
            (json!(3), json!(-32600)),
            (Value::Null, json!(-32600)),
            (json!(5), json!(-32602)),
            (json!(6), json!(-32600)),
            (json!(12), json!(-32602)),
            (json!(2), Value::Null),
        ],
        "{r:?}"
    );
    assert_eq!(r.last().unwrap()["result"], json!({}));
}

#[test]
fn mcp_serves_nothing_but_ping_before_initialize() {
    let env = Env::new(Transport::Path);
    let call = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"workbench_find","arguments":{}}}"#;
    let list = r#"{"jsonrpc":"2.0","id":8,"method":"tools/list"}"#;
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let input = format!("{call}\n{list}\n{ping}\n{INIT}\n{call}\n");
    let (ok, r) = raw_session(&env, input.as_bytes());
    assert!(ok);
    assert_eq!(r.len(), 5, "{r:?}");
    assert_eq!(
        (&r[0]["id"], &r[0]["error"]["code"]),
        (&json!(7), &json!(-32600))
    );
    assert_eq!(
        (&r[1]["id"], &r[1]["error"]["code"]),
        (&json!(8), &json!(-32600))
    );
    assert_eq!(r[2]["result"], json!({}));
    assert_eq!(r[4]["result"]["isError"], false, "{r:?}");
}

/// The peak resident memory of a live process (`VmHWM`), in KiB.
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/PID/status")
}

#[test]
fn mcp_refuses_an_over_long_line_by_name_without_holding_it_and_keeps_serving() {
    use std::io::BufRead;
    let env = Env::new(Transport::Path);
    let mut child = Command::new(env!("CARGO_BIN_EXE_nokv"))
        .args([
            "--server",
            env.url(),
            "--repo",
            REPO,
            "mcp",
            "--reap-every-secs",
            "0",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // A put whose line is four times the documented 64 MiB bound (a
    // well-formed request: only its size is wrong), then a ping.
    let writer = std::thread::spawn(move || {
        writeln!(stdin, "{INIT}").unwrap();
        let start = r#"{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{"name":"workbench_put_file","arguments":{"id":"w","section":"outputs","path":"big.txt","text":""#;
        stdin.write_all(start.as_bytes()).unwrap();
        let piece = vec![b'x'; 1 << 20];
        for _ in 0..256 {
            stdin.write_all(&piece).unwrap();
        }
        stdin.write_all(b"\"}}}\n").unwrap();
        writeln!(stdin, r#"{{"jsonrpc":"2.0","id":78,"method":"ping"}}"#).unwrap();
        stdin
    });
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut replies = Vec::new();
    for _ in 0..3 {
        let mut l = String::new();
        out.read_line(&mut l).unwrap();
        replies.push(serde_json::from_str::<Value>(&l).unwrap_or_else(|e| panic!("{e}: {l}")));
    }
    let stdin = writer.join().unwrap();
    assert_eq!(replies[0]["id"], 0);
    assert_eq!(replies[1]["id"], 77, "{:?}", replies[1]);
    assert_eq!(replies[1]["error"]["code"], -32600, "{:?}", replies[1]);
    let message = replies[1]["error"]["message"].as_str().unwrap();
    assert!(message.contains("64 MiB"), "{message}");
    assert_eq!(replies[2]["id"], 78);
    assert_eq!(replies[2]["result"], json!({}));
    // The 256 MiB line was never held: the peak stays near the bound.
    let peak = peak_kib(child.id());
    assert!(peak < 160 << 10, "peak resident {peak} KiB");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

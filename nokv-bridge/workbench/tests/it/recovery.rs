//! A long-lived session recovers: a connection the server dropped is
//! replaced at the next call, and an agent root that could not be opened
//! (the server down, the data root held by another process) is opened
//! again at the next call.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout, Command, Stdio};

use nokv_workbench::scribe::ScribeStore;
use nokv_workbench::Workbench;
use scribe_client::ClientOptions;
use scribe_server::{ListenOptions, ServerHandle, Service};
use scribe_testkit::env::{Env, Transport, REPO};
use serde_json::{json, Value};

#[test]
fn a_connection_the_server_dropped_is_replaced_at_the_next_call() {
    let mut env = Env::new(Transport::Tcp);
    let store = ScribeStore::open(env.url(), REPO, "bot", &ClientOptions::default()).unwrap();
    let mut wb = Workbench::new(store, "bot");
    wb.call("workbench_create", &json!({"id": "w1"})).unwrap();
    // The server goes away: the call fails, retryable.
    let addr = env.addr();
    env.take_listener().shutdown();
    let stat = json!({"id": "w1"});
    let e = wb.call("workbench_stat", &stat).unwrap_err();
    assert_eq!((e.code, e.retryable), ("unavailable", true), "{e}");
    // Still down: the next call tries to connect again, and says so.
    let e = wb.call("workbench_stat", &stat).unwrap_err();
    assert_eq!((e.code, e.retryable), ("unavailable", true), "{e}");
    // Back on the same address: the next call connects again and works.
    let _server = ServerHandle::start(
        env.service().clone(),
        &addr.to_string(),
        ListenOptions::default(),
    )
    .unwrap();
    let v = wb.call("workbench_stat", &stat).unwrap();
    assert_eq!(v["id"], "w1", "{v}");
    let put = json!({"id": "w1", "section": "outputs", "path": "a.txt", "text": "after"});
    wb.call("workbench_put_file", &put).unwrap();
}

/// `nokv mcp` over `url`, initialized, with its stdout as lines.
fn mcp(url: &str) -> (Child, BufReader<ChildStdout>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nokv"))
        .args([
            "--server",
            url,
            "--repo",
            REPO,
            "mcp",
            "--reap-every-secs",
            "0",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let mut s = (child, out);
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    assert!(ask(&mut s, &init.to_string())["result"].is_object());
    s
}

/// Send one line, read one answer.
fn ask(s: &mut (Child, BufReader<ChildStdout>), line: &str) -> Value {
    let stdin = s.0.stdin.as_mut().unwrap();
    writeln!(stdin, "{line}").unwrap();
    stdin.flush().unwrap();
    let mut answer = String::new();
    s.1.read_line(&mut answer).unwrap();
    serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{e}: {answer:?}"))
}

fn call(s: &mut (Child, BufReader<ChildStdout>), id: u64, tool: &str, args: Value) -> Value {
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": args}});
    ask(s, &msg.to_string())["result"].clone()
}

#[test]
fn nokv_mcp_opens_a_data_root_again_once_another_process_lets_it_go() {
    let env = Env::new(Transport::Path);
    // Another process holds the data root while `nokv mcp` starts.
    let holder = Service::open(env.data()).unwrap();
    let mut s = mcp(env.url());
    let r = call(&mut s, 1, "workbench_create", json!({"id": "w1"}));
    assert_eq!(r["isError"], true, "{r}");
    let e = &r["structuredContent"]["error"];
    assert_eq!(
        (&e["code"], &e["retryable"]),
        (&json!("unavailable"), &json!(true)),
        "{r}"
    );
    drop(holder);
    // Free now: the next call opens it.
    let r = call(&mut s, 2, "workbench_create", json!({"id": "w1"}));
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["created"], true, "{r}");
    drop(s.0.stdin.take());
    assert!(s.0.wait().unwrap().success());
}

#[test]
fn nokv_mcp_started_while_the_server_is_down_connects_once_it_is_up() {
    let mut env = Env::new(Transport::Tcp);
    let addr = env.addr();
    let url = env.url().to_string();
    env.take_listener().shutdown();
    let mut s = mcp(&url);
    let r = call(&mut s, 1, "workbench_stat", json!({"id": "w1"}));
    assert_eq!(
        r["structuredContent"]["error"]["code"], "unavailable",
        "{r}"
    );
    let server = ServerHandle::start(
        env.service().clone(),
        &addr.to_string(),
        ListenOptions::default(),
    )
    .unwrap();
    let r = call(&mut s, 2, "workbench_create", json!({"id": "w1"}));
    assert_eq!(r["structuredContent"]["created"], true, "{r}");
    // The server restarts under the session: one call fails (retryable),
    // the next connects again.
    server.shutdown();
    let r = call(&mut s, 3, "workbench_stat", json!({"id": "w1"}));
    let e = &r["structuredContent"]["error"];
    assert_eq!(
        (&e["code"], &e["retryable"]),
        (&json!("unavailable"), &json!(true)),
        "{r}"
    );
    let _server = ServerHandle::start(
        env.service().clone(),
        &addr.to_string(),
        ListenOptions::default(),
    )
    .unwrap();
    let r = call(&mut s, 4, "workbench_stat", json!({"id": "w1"}));
    assert_eq!(r["isError"], false, "{r}");
    drop(s.0.stdin.take());
    assert!(s.0.wait().unwrap().success());
}

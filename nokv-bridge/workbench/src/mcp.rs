//! The Model Context Protocol over a line-delimited JSON-RPC 2.0 stream
//! (stdio for `nokv mcp`): `initialize`, `ping`, `tools/list` (each tool
//! with its `inputSchema`) and `tools/call` (the result as text content and
//! `structuredContent`; a tool failure is a result with `isError: true`
//! carrying the typed error). Transport-free: any reader and writer.

use std::io::{BufRead, Write};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::store::Store;
use crate::tools::{schema, TOOLS};
use crate::Workbench;

/// The protocol versions this server speaks (newest first); a client
/// asking for one of them gets it, any other gets the newest.
pub const PROTOCOL_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

fn description(tool: &str) -> &'static str {
    match tool {
        "workbench_create" => "Create a workbench (an exact retry converges).",
        "workbench_put_file" => "Write a file: replace=false creates only, replace=true replaces only.",
        "workbench_append" => "Append to a file (created when missing); returns the new size, generation and the SHA-256 of the appended bytes.",
        "workbench_edit" => "Replace an exact string (one match unless replace_all).",
        "workbench_list" => "List a directory's direct children, cursor-paged, live or at a snapshot.",
        "workbench_stat" => "Metadata card of a workbench, section, directory or file.",
        "workbench_read" => "Read a file: structured (JSON, text lines) or base64 byte ranges.",
        "workbench_grep" => "Case-insensitive literal search of file contents.",
        "workbench_search" => "Metadata search with predicates, sort, projection and facets.",
        "workbench_aggregate" => "Bounded aggregates over metadata.",
        "workbench_catalog" => "Which fields and operators queries accept.",
        "workbench_find" => "Find workbenches by commit state and run-manifest text.",
        "workbench_commit" => "Publish metadata/run_manifest.json with a deterministic commit identity.",
        "workbench_snapshot" => "Take a leased snapshot of a committed workbench.",
        "workbench_snapshot_renew" => "Extend a snapshot's lease (never shortens).",
        "workbench_snapshot_retire" => "Retire a snapshot.",
        "workbench_snapshot_list" => "List snapshots with their lifecycle state.",
        "workbench_restore" => "Restore a workbench (live, a snapshot or a commit) into a new one.",
        _ => "",
    }
}

fn reply(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn rpc_error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// Answer one message; `None` for a notification.
pub fn handle<S: Store>(
    wb: &mut Option<Workbench<S>>,
    open_error: &Option<String>,
    msg: &Value,
) -> Option<Value> {
    let id = msg.get("id").cloned();
    let method = msg.get("method").and_then(Value::as_str);
    // A response from the client, or a notification: no answer.
    let (Some(id), Some(method)) = (id, method) else {
        return None;
    };
    let params = msg.get("params").cloned().unwrap_or(json!({}));
    Some(match method {
        "initialize" => {
            let asked = params
                .get("protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or("");
            let version = PROTOCOL_VERSIONS
                .iter()
                .find(|v| **v == asked)
                .copied()
                .unwrap_or(PROTOCOL_VERSIONS[0]);
            reply(
                &id,
                json!({
                    "protocolVersion": version,
                    "capabilities": {"tools": {"listChanged": false}},
                    "serverInfo": {"name": "nokv", "version": env!("CARGO_PKG_VERSION")},
                    "instructions": "NoKV Workbench tools over a Scribe repository; see docs/workbench.md."
                }),
            )
        }
        "ping" => reply(&id, json!({})),
        "tools/list" => reply(
            &id,
            json!({"tools": TOOLS.iter().map(|t| json!({
            "name": t, "description": description(t), "inputSchema": schema(t).expect("schema")
        })).collect::<Vec<_>>()}),
        ),
        "tools/call" => {
            let Some(name) = params.get("name").and_then(Value::as_str) else {
                return Some(rpc_error(&id, -32602, "tools/call needs params.name"));
            };
            if !TOOLS.contains(&name) {
                return Some(rpc_error(&id, -32602, &format!("unknown tool {name:?}")));
            }
            let args = params.get("arguments").cloned().unwrap_or(json!({}));
            let outcome = match (wb.as_mut(), open_error) {
                (Some(wb), _) => wb.call(name, &args).map_err(|e| e.to_json()),
                (None, e) => {
                    Err(crate::WbError::new("unavailable", e.clone().unwrap_or_default()).to_json())
                }
            };
            let (value, is_error) = match outcome {
                Ok(v) => (v, false),
                Err(e) => (e, true),
            };
            reply(
                &id,
                json!({
                    "content": [{"type": "text", "text": value.to_string()}],
                    "structuredContent": value,
                    "isError": is_error
                }),
            )
        }
        other => rpc_error(&id, -32601, &format!("method not found: {other}")),
    })
}

/// The reaper's schedule in a long-running server.
#[derive(Clone, Copy, Debug)]
pub struct ReapSchedule {
    /// A sweep ([`Workbench::reap_all`]) runs when the facade's clock has
    /// moved this far since the last one (the first runs at start).
    pub every_ms: u64,
    /// How often an idle server looks at its clock.
    pub tick: Duration,
}

fn answer_line<S: Store>(
    wb: &mut Option<Workbench<S>>,
    open_error: &Option<String>,
    line: &str,
) -> Option<Value> {
    if line.trim().is_empty() {
        return None;
    }
    match serde_json::from_str::<Value>(line) {
        Ok(Value::Array(batch)) => {
            let out: Vec<Value> = batch
                .iter()
                .filter_map(|m| handle(wb, open_error, m))
                .collect();
            (!out.is_empty()).then_some(Value::Array(out))
        }
        Ok(msg) => handle(wb, open_error, &msg),
        Err(e) => Some(rpc_error(
            &Value::Null,
            -32700,
            &format!("parse error: {e}"),
        )),
    }
}

/// Serve `input` until it ends, as [`serve`], and reap expired snapshots
/// of every workbench on `schedule`, also while no message arrives (a
/// reader thread feeds the lines). A failed sweep is reported on stderr
/// and tried again at the next due time.
pub fn serve_scheduled<S: Store>(
    mut wb: Option<Workbench<S>>,
    open_error: Option<String>,
    input: impl BufRead + Send + 'static,
    mut output: impl Write,
    schedule: ReapSchedule,
) -> std::io::Result<()> {
    let (tx, rx) = mpsc::channel::<std::io::Result<String>>();
    std::thread::spawn(move || {
        for line in input.lines() {
            let end = line.is_err();
            if tx.send(line).is_err() || end {
                break;
            }
        }
    });
    let mut last: Option<u64> = None;
    loop {
        if let Some(wb) = wb.as_mut() {
            let now = wb.now();
            if last.is_none_or(|l| now.saturating_sub(l) >= schedule.every_ms) {
                last = Some(now);
                if let Err(e) = wb.reap_all() {
                    eprintln!("nokv mcp: the snapshot reaper failed (retried later): {e}");
                }
            }
        }
        match rx.recv_timeout(schedule.tick) {
            Ok(line) => {
                if let Some(a) = answer_line(&mut wb, &open_error, &line?) {
                    writeln!(output, "{a}")?;
                    output.flush()?;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
        }
    }
}

/// Serve `input` until it ends: one JSON-RPC message per line.
pub fn serve<S: Store>(
    mut wb: Option<Workbench<S>>,
    open_error: Option<String>,
    input: impl BufRead,
    mut output: impl Write,
) -> std::io::Result<()> {
    for line in input.lines() {
        if let Some(a) = answer_line(&mut wb, &open_error, &line?) {
            writeln!(output, "{a}")?;
            output.flush()?;
        }
    }
    Ok(())
}

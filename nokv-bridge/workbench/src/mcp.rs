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

/// JSON-RPC 2.0's error codes.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;

/// What a server session answers over: its Workbench, opened on demand.
/// An agent root that cannot be opened (the server down, the data root
/// held by another process) is tried again at the next tool call, so a
/// long-lived session recovers once the cause goes away.
pub struct Session<S: Store> {
    wb: Option<Workbench<S>>,
    open: Box<dyn FnMut() -> Result<Workbench<S>, crate::WbError>>,
    /// `initialize` (or `notifications/initialized`) arrived: tool calls
    /// are served.
    initialized: bool,
}

impl<S: Store> Session<S> {
    /// A session over `open`'s Workbench: opened now, and again at each
    /// tool call while it fails (the call answers with the failure).
    pub fn opening(
        mut open: impl FnMut() -> Result<Workbench<S>, crate::WbError> + 'static,
    ) -> Session<S> {
        let wb = match open() {
            Ok(wb) => Some(wb),
            Err(e) => {
                eprintln!(
                    "nokv: the agent root cannot be opened yet (tried again at the next call): {e}"
                );
                None
            }
        };
        Session {
            wb,
            open: Box::new(open),
            initialized: false,
        }
    }

    /// A session over an open Workbench.
    pub fn over(wb: Workbench<S>) -> Session<S> {
        Session {
            wb: Some(wb),
            open: Box::new(|| {
                Err(crate::WbError::new(
                    "unavailable",
                    "the agent root is closed",
                ))
            }),
            initialized: false,
        }
    }

    /// The answers written so far reached the client (see
    /// [`Workbench::delivered`]).
    pub fn delivered(&mut self) {
        if let Some(wb) = self.wb.as_mut() {
            wb.delivered();
        }
    }

    /// The Workbench, opened first when it is not (once per call).
    fn workbench(&mut self) -> Result<&mut Workbench<S>, crate::WbError> {
        if self.wb.is_none() {
            self.wb = Some((self.open)()?);
        }
        Ok(self.wb.as_mut().expect("opened just above"))
    }
}

/// The id of a request when it is one JSON-RPC allows (a string or a
/// number).
fn valid_id(id: &Value) -> bool {
    id.is_string() || id.is_number()
}

/// Answer one message; `None` for a notification or a response.
pub fn handle<S: Store>(session: &mut Session<S>, msg: &Value) -> Option<Value> {
    let Some(obj) = msg.as_object() else {
        return Some(rpc_error(
            &Value::Null,
            INVALID_REQUEST,
            "invalid request: a message must be a JSON object",
        ));
    };
    let id = obj.get("id");
    let method = obj.get("method");
    if method.is_none() && (obj.contains_key("result") || obj.contains_key("error")) {
        // A response from the client: nothing to answer.
        return None;
    }
    // A notification (no id) is never answered, not even when malformed.
    let id = match id {
        None => {
            if method.and_then(Value::as_str) == Some("notifications/initialized") {
                session.initialized = true;
            }
            return None;
        }
        Some(id) if valid_id(id) => id.clone(),
        Some(_) => {
            return Some(rpc_error(
                &Value::Null,
                INVALID_REQUEST,
                "invalid request: id must be a string or a number",
            ))
        }
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Some(rpc_error(
            &id,
            INVALID_REQUEST,
            "invalid request: jsonrpc must be \"2.0\"",
        ));
    }
    let Some(method) = method.and_then(Value::as_str) else {
        return Some(rpc_error(
            &id,
            INVALID_REQUEST,
            "invalid request: method must be a string",
        ));
    };
    let params = match obj.get("params") {
        None => json!({}),
        Some(p @ Value::Object(_)) => p.clone(),
        Some(_) => return Some(rpc_error(&id, INVALID_PARAMS, "params must be an object")),
    };
    let served = matches!(method, "initialize" | "ping" | "tools/list" | "tools/call");
    if served && !session.initialized && !matches!(method, "initialize" | "ping") {
        // The MCP lifecycle: nothing but ping before initialize.
        return Some(rpc_error(
            &id,
            INVALID_REQUEST,
            &format!("{method} before initialize: the session starts with initialize"),
        ));
    }
    Some(match method {
        "initialize" => {
            session.initialized = true;
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
                return Some(rpc_error(
                    &id,
                    INVALID_PARAMS,
                    "tools/call needs params.name",
                ));
            };
            if !TOOLS.contains(&name) {
                return Some(rpc_error(
                    &id,
                    INVALID_PARAMS,
                    &format!("unknown tool {name:?}"),
                ));
            }
            let args = params.get("arguments").cloned().unwrap_or(json!({}));
            let outcome = session
                .workbench()
                .and_then(|wb| wb.call(name, &args))
                .map_err(|e| e.to_json());
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
        other => rpc_error(&id, METHOD_NOT_FOUND, &format!("method not found: {other}")),
    })
}

/// The top-level `"id"` member of a line that is not valid JSON (or not
/// UTF-8), when it can be read: a string or a number right after the key.
/// Members of nested objects are not looked at.
fn readable_id(line: &str) -> Value {
    let b = line.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    // Whether the next string at depth 1 is a key.
    let mut key_next = false;
    while i < b.len() {
        match b[i] {
            b'"' => {
                let start = i;
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                if depth == 1 && key_next && &line[start..(i + 1).min(b.len())] == "\"id\"" {
                    let rest = line[i + 1..].trim_start();
                    if let Some(rest) = rest.strip_prefix(':') {
                        let mut values = serde_json::Deserializer::from_str(rest.trim_start())
                            .into_iter::<Value>();
                        if let Some(Ok(v)) = values.next() {
                            if valid_id(&v) {
                                return v;
                            }
                        }
                    }
                    return Value::Null;
                }
                key_next = false;
            }
            b'{' => {
                depth += 1;
                key_next = depth == 1;
            }
            b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b',' => key_next = depth == 1,
            _ => {}
        }
        i += 1;
    }
    Value::Null
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

/// The answer to one line: a message or a batch (an array of them).
/// Bytes that are not UTF-8 or not JSON are a parse error (-32700), with
/// the request's id when it can be read; the server keeps serving.
fn answer_line<S: Store>(session: &mut Session<S>, line: &[u8]) -> Option<Value> {
    let text = match std::str::from_utf8(line) {
        Ok(t) => t,
        Err(_) => {
            let lossy = String::from_utf8_lossy(line);
            return Some(rpc_error(
                &readable_id(&lossy),
                PARSE_ERROR,
                "parse error: the line is not UTF-8",
            ));
        }
    };
    if text.trim().is_empty() {
        return None;
    }
    if let Some(lit) = crate::identity::lossy_number(text) {
        return Some(rpc_error(
            &readable_id(text),
            INVALID_PARAMS,
            &lossy_message(lit),
        ));
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Array(batch)) if batch.is_empty() => Some(rpc_error(
            &Value::Null,
            INVALID_REQUEST,
            "invalid request: an empty batch",
        )),
        Ok(Value::Array(batch)) => {
            let out: Vec<Value> = batch.iter().filter_map(|m| handle(session, m)).collect();
            (!out.is_empty()).then_some(Value::Array(out))
        }
        Ok(msg) => handle(session, &msg),
        Err(e) => Some(rpc_error(
            &readable_id(text),
            PARSE_ERROR,
            &format!("parse error: {e}"),
        )),
    }
}

/// The refusal of a number JSON parsing would not keep exactly.
pub fn lossy_message(lit: &str) -> String {
    let shown: String = lit.chars().take(40).collect();
    format!(
        "the number {shown}{} cannot be kept exactly (integers must fit in 64 bits, other \
         numbers in a double's precision): the stored manifest and its digest would differ \
         from what was sent; send it as a string",
        if shown.len() < lit.len() { "…" } else { "" }
    )
}

/// The longest line (one JSON-RPC message or batch, without its newline)
/// `nokv mcp` reads: 64 MiB, room for a put of about 48 MiB of base64
/// content (64 MiB of text). A longer line is answered with -32600 naming
/// the bound and discarded as it streams in (never held whole); larger
/// files go through `nokv collect`.
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// The most JSON input `nokv workbench TOOL` reads from stdin: the same
/// bound as a `nokv mcp` line ([`MAX_LINE_BYTES`]), so a call the CLI
/// takes is one MCP would take too.
pub const MAX_INPUT_BYTES: usize = MAX_LINE_BYTES;

/// The input of `nokv workbench TOOL` read from `input`, at most `max`
/// bytes: a longer input is refused (`invalid_input` naming the bound)
/// after reading `max + 1` bytes, never held whole; input that is not
/// UTF-8 is refused by name too.
pub fn read_input<R: std::io::Read>(input: R, max: usize) -> Result<String, crate::WbError> {
    use std::io::Read;
    let mut buf = Vec::new();
    input
        .take(max as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|e| crate::WbError::invalid_input(format!("stdin: {e}")))?;
    if buf.len() > max {
        return Err(crate::WbError::invalid_input(format!(
            "the input on stdin is more than {} bytes ({} MiB, MAX_INPUT_BYTES, as a nokv mcp \
             line); nothing was run. Send large files with nokv collect",
            max,
            max >> 20
        )));
    }
    String::from_utf8(buf).map_err(|e| {
        crate::WbError::invalid_input(format!(
            "the input on stdin is not UTF-8 (byte {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// How much of an over-long line is kept to read its id from.
const TOO_LONG_HEAD: usize = 4 << 10;

/// One line of the input.
#[derive(Debug)]
enum Line {
    /// A line within the bound (without its `\n` or `\r\n`).
    Whole(Vec<u8>),
    /// A line over the bound: its first bytes and its length.
    TooLong { head: Vec<u8>, len: u64 },
}

/// The lines of `input` as bytes (UTF-8 is checked per line, so one bad
/// byte costs only its line), each held up to `max` bytes: the rest of a
/// longer line is read and dropped, and the next line is served.
struct BoundedLines<R> {
    input: R,
    max: usize,
    done: bool,
}

impl<R: BufRead> Iterator for BoundedLines<R> {
    type Item = std::io::Result<Line>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let mut line = Vec::new();
        // The length so far of a line over the bound.
        let mut over: Option<u64> = None;
        loop {
            let (used, ended) = {
                let buf = match self.input.fill_buf() {
                    Ok(b) => b,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        self.done = true;
                        return Some(Err(e));
                    }
                };
                if buf.is_empty() {
                    self.done = true;
                    if line.is_empty() && over.is_none() {
                        return None;
                    }
                    break;
                }
                let end = buf.iter().position(|b| *b == b'\n');
                let piece = &buf[..end.unwrap_or(buf.len())];
                match &mut over {
                    Some(n) => {
                        *n += piece.len() as u64;
                        let keep = TOO_LONG_HEAD.saturating_sub(line.len()).min(piece.len());
                        line.extend_from_slice(&piece[..keep]);
                    }
                    None if line.len() + piece.len() > self.max => {
                        let total = (line.len() + piece.len()) as u64;
                        let keep = TOO_LONG_HEAD.saturating_sub(line.len()).min(piece.len());
                        line.extend_from_slice(&piece[..keep]);
                        line.truncate(TOO_LONG_HEAD);
                        line.shrink_to_fit();
                        over = Some(total);
                    }
                    None => line.extend_from_slice(piece),
                }
                (piece.len() + usize::from(end.is_some()), end.is_some())
            };
            self.input.consume(used);
            if ended {
                break;
            }
        }
        Some(Ok(match over {
            Some(len) => Line::TooLong { head: line, len },
            None => {
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                Line::Whole(line)
            }
        }))
    }
}

fn bounded_lines<R: BufRead>(input: R) -> BoundedLines<R> {
    BoundedLines {
        input,
        max: MAX_LINE_BYTES,
        done: false,
    }
}

/// The answer to one line of the input.
fn answer<S: Store>(session: &mut Session<S>, line: &Line) -> Option<Value> {
    match line {
        Line::Whole(l) => answer_line(session, l),
        Line::TooLong { head, len } => Some(rpc_error(
            &readable_id(&String::from_utf8_lossy(head)),
            INVALID_REQUEST,
            &format!(
                "invalid request: the line is {len} bytes, above the {} MiB a message may \
                 hold (MAX_LINE_BYTES); it was discarded. Send large files with nokv collect",
                MAX_LINE_BYTES >> 20
            ),
        )),
    }
}

/// Serve `input` until it ends, as [`serve`], and reap expired snapshots
/// of every workbench on `schedule`, also while no message arrives (a
/// reader thread feeds the lines). A failed sweep is reported on stderr
/// and tried again at the next due time.
pub fn serve_scheduled<S: Store>(
    mut session: Session<S>,
    input: impl BufRead + Send + 'static,
    mut output: impl Write,
    schedule: ReapSchedule,
) -> std::io::Result<()> {
    // One line read ahead at most (a rendezvous: the reader hands its
    // line over before reading the next): a client writing faster than
    // the tools answer waits on the pipe, not on this process's memory.
    let (tx, rx) = mpsc::sync_channel::<std::io::Result<Line>>(0);
    std::thread::spawn(move || {
        for line in bounded_lines(input) {
            let end = line.is_err();
            if tx.send(line).is_err() || end {
                break;
            }
        }
    });
    let mut last: Option<u64> = None;
    loop {
        if let Some(wb) = session.wb.as_mut() {
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
                if let Some(a) = answer(&mut session, &line?) {
                    writeln!(output, "{a}")?;
                    output.flush()?;
                }
                session.delivered();
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
        }
    }
}

/// Serve `input` until it ends: one JSON-RPC message per line.
pub fn serve<S: Store>(
    mut session: Session<S>,
    input: impl BufRead,
    mut output: impl Write,
) -> std::io::Result<()> {
    for line in bounded_lines(input) {
        if let Some(a) = answer(&mut session, &line?) {
            writeln!(output, "{a}")?;
            output.flush()?;
        }
        session.delivered();
    }
    Ok(())
}

#[cfg(test)]
mod bounded_lines_tests {
    use super::{BoundedLines, Line};
    use proptest::prelude::*;

    fn lines(data: &[u8], max: usize, cap: usize) -> Vec<Line> {
        let input = std::io::BufReader::with_capacity(cap, data);
        BoundedLines {
            input,
            max,
            done: false,
        }
        .map(Result::unwrap)
        .collect()
    }

    proptest! {
        /// Read through any buffer size, lines within the bound are what
        /// splitting at `\n` gives (a trailing `\r` dropped); longer ones
        /// are cut to their head with their exact length.
        #[test]
        fn lines_split_as_split_does_and_long_ones_are_cut(
            text in "[ab\r\n]{0,80}",
            max in 1usize..12,
            cap in 1usize..9,
        ) {
            let got = lines(text.as_bytes(), max, cap);
            let mut want: Vec<&[u8]> = text.as_bytes().split(|b| *b == b'\n').collect();
            if want.last() == Some(&&b""[..]) {
                want.pop();
            }
            prop_assert_eq!(got.len(), want.len());
            for (g, w) in got.iter().zip(want) {
                match g {
                    Line::Whole(l) => {
                        prop_assert!(w.len() <= max);
                        prop_assert_eq!(l.as_slice(), w.strip_suffix(b"\r").unwrap_or(w));
                    }
                    Line::TooLong { head, len } => {
                        prop_assert!(w.len() > max);
                        prop_assert_eq!(*len, w.len() as u64);
                        prop_assert_eq!(head.as_slice(), w);
                    }
                }
            }
        }
    }
}

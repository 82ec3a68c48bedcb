//! Output: data on stdout through one writer that treats a closed pipe as
//! success, status lines on stderr (silenced by `--quiet`), progress bars
//! only when stderr is a terminal, and a small JSON writer.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use scribe_client::{Note, Progress, Task};

use crate::error::{CliError, CliResult};

/// How a command reports.
#[derive(Clone, Copy, Debug)]
pub struct Out {
    pub quiet: bool,
    pub json: bool,
}

impl Out {
    /// One line of data on stdout. A closed pipe (`scribe log | head -1`)
    /// ends the command quietly with success.
    /// Terminal control characters in it (authors, messages and paths
    /// come from other people) are shown escaped, see [`printable`].
    pub fn line(&self, line: impl std::fmt::Display) -> CliResult {
        let line = line.to_string();
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{}", printable(&line)).map_err(CliError::from_stdout)
    }

    /// Many lines of data on stdout, as [`Out::line`] writes each, through
    /// one buffer: a listing of 13,000 opened files is a few writes, not
    /// one per line.
    pub fn lines<L: AsRef<str>>(&self, lines: impl IntoIterator<Item = L>) -> CliResult {
        let mut stdout = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
        for l in lines {
            writeln!(stdout, "{}", printable(l.as_ref())).map_err(CliError::from_stdout)?;
        }
        stdout.flush().map_err(CliError::from_stdout)
    }

    /// Bytes on stdout as they are (completions, the man page).
    pub fn raw(&self, bytes: &[u8]) -> CliResult {
        let mut stdout = std::io::stdout().lock();
        stdout
            .write_all(bytes)
            .and_then(|_| stdout.flush())
            .map_err(CliError::from_stdout)
    }

    /// A JSON value on stdout.
    pub fn json(&self, value: &Json) -> CliResult {
        self.line(value)
    }

    /// A status line on stderr.
    pub fn status(&self, line: impl AsRef<str>) {
        if !self.quiet {
            let _ = writeln!(std::io::stderr(), "{}", printable(line.as_ref()));
        }
    }
}

/// `text` with every character that could steer a terminal escaped as
/// `\u{..}`: C0 controls but newline and tab (ESC starts colour, cursor
/// and title sequences; BEL rings), DEL, C1 controls, and the bidi
/// embedding, override and isolate characters that reorder what a line
/// seems to say. Authors, messages and paths come from other people; what
/// `scribe log` prints must be what was submitted, visibly.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    fn unsafe_char(c: char) -> bool {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
    }
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_char(c) {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Progress on the terminal: notes as status lines, tasks as bars.
pub struct TermProgress {
    out: Out,
    bars: Mutex<HashMap<Task, ProgressBar>>,
    /// Bytes actually sent so far (`Task::Sent`).
    sent: std::sync::atomic::AtomicU64,
}

impl TermProgress {
    pub fn new(out: Out) -> TermProgress {
        TermProgress {
            out,
            bars: Mutex::new(HashMap::new()),
            sent: std::sync::atomic::AtomicU64::new(0),
        }
    }
}

impl Progress for TermProgress {
    fn note(&self, note: Note) {
        let line = match note {
            Note::ResumingSync { target } => {
                format!("resuming the interrupted sync to change {target}")
            }
            Note::SkippingSync { target, newer, why } => format!(
                "the interrupted sync to change {target} cannot complete ({why}); syncing to change {newer} instead"
            ),
            Note::FullSync { target } => {
                format!("the server was restored (new incarnation): full sync to change {target}")
            }
            Note::CompletingSubmit { operation, message } => format!(
                "completing the interrupted submission {} ({message:?})",
                operation.to_hex()
            ),
            Note::Froze {
                files,
                secs,
                streamed_bytes,
            } => format!(
                "froze {files} file(s) in {secs:.2} s ({} streamed to the server)",
                size(streamed_bytes)
            ),
            Note::FinishingViewChange => "finishing the interrupted view change".into(),
            Note::ResumingMove => "resuming the interrupted move".into(),
            Note::WorkspaceCreated {
                workspace,
                repository,
                root,
            } => format!(
                "created workspace {} for {repository} at {}",
                workspace.to_hex(),
                root.display()
            ),
            Note::LockedByOther {
                path,
                owner,
                workspace,
            } => format!(
                "warning: {path} is locked by {owner} (workspace {}); your submit of it will be refused until they unlock",
                &workspace.to_hex()[..8]
            ),
            Note::CacheCopyUnreadable { id, why } => format!(
                "warning: the workspace cache's copy of {id} is unreadable ({why}); it was read \
                 from the server (`scribe workspace prune-cache` drops such copies)"
            ),
            Note::LocksMoved { pairs } => pairs
                .iter()
                .map(|(from, to)| {
                    format!(
                        "locked {to}: your lock on {from} follows the move (both stay locked \
                         until the move is submitted or aborted)"
                    )
                })
                .collect::<Vec<_>>()
                .join("\n"),
            Note::LocksNotMoved { pairs, why } => pairs
                .iter()
                .map(|(from, to)| {
                    format!(
                        "warning: your lock on {from} did not follow the move to {to} ({why}); \
                         `scribe lock {to}` takes it"
                    )
                })
                .collect::<Vec<_>>()
                .join("\n"),
            Note::LocksLeftBehind { paths, why } => format!(
                "warning: your lock(s) on {} (where the move left nothing) could not be \
                 released ({why}); `scribe unlock` them",
                paths.join(", ")
            ),
            other => format!("{other:?}"),
        };
        self.out.status(line);
    }

    fn start(&self, task: Task, total: u64) {
        if self.out.quiet || !std::io::stderr().is_terminal() {
            return;
        }
        // One unit per bar (#18 item 15): `freeze` counts the bytes of the
        // large files read, `upload` the objects the server lacked, `sync`
        // the bytes written; the bytes actually sent (`Task::Sent`) follow
        // the freeze and upload bars' label.
        let (template, label) = match task {
            Task::Upload => ("{msg:16} [{bar:30}] {pos}/{len} objects {eta}", "upload"),
            Task::Stream => (
                "{msg:16} [{bar:30}] {bytes}/{total_bytes} read {bytes_per_sec} {eta}",
                "freeze",
            ),
            Task::Sync => (
                "{msg:10} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {eta}",
                "sync",
            ),
            Task::Sent => return,
        };
        let bar = ProgressBar::new(total);
        bar.set_style(
            ProgressStyle::with_template(template)
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar.set_message(label);
        if let Ok(mut bars) = self.bars.lock() {
            bars.insert(task, bar);
        }
    }

    fn advance(&self, task: Task, n: u64) {
        if task == Task::Sent {
            let sent = self.sent.fetch_add(n, std::sync::atomic::Ordering::Relaxed) + n;
            if let Ok(bars) = self.bars.lock() {
                for (t, b) in bars.iter() {
                    let label = match t {
                        Task::Stream => "freeze",
                        Task::Upload => "upload",
                        _ => continue,
                    };
                    b.set_message(format!("{label}, {} sent", size(sent)));
                }
            }
            return;
        }
        if let Ok(bars) = self.bars.lock() {
            if let Some(b) = bars.get(&task) {
                b.inc(n);
            }
        }
    }

    fn finish(&self, task: Task) {
        if let Ok(mut bars) = self.bars.lock() {
            if let Some(b) = bars.remove(&task) {
                b.finish_and_clear();
            }
        }
    }
}

/// A stopwatch for "done in 1.2 s" lines.
pub struct Timer(Instant);

impl Timer {
    pub fn start() -> Timer {
        Timer(Instant::now())
    }

    pub fn secs(&self) -> f64 {
        self.0.elapsed().as_secs_f64()
    }
}

/// A JSON value written by hand (the CLI has no serde).
#[derive(Clone, Debug)]
pub enum Json {
    Null,
    Bool(bool),
    Num(u64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(&'static str, Json)>),
}

impl Json {
    pub fn str(s: impl Into<String>) -> Json {
        Json::Str(s.into())
    }

    pub fn obj(fields: Vec<(&'static str, Json)>) -> Json {
        Json::Obj(fields)
    }

    fn write(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Num(n) => {
                let _ = write!(out, "{n}");
            }
            Json::Str(s) => escape(s, out),
            Json::Arr(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    v.write(out);
                }
                out.push(']');
            }
            Json::Obj(fields) => {
                out.push('{');
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    escape(k, out);
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
        }
    }
}

impl std::fmt::Display for Json {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut s = String::new();
        self.write(&mut s);
        f.write_str(&s)
    }
}

fn escape(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `2026-12-02 15:04:05Z` from Unix milliseconds.
pub fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // civil-from-days (Howard Hinnant)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// `12.3 MiB`.
pub fn size(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escapes_and_dates() {
        let j = Json::obj(vec![
            ("a", Json::str("q\"\n\u{1}é")),
            (
                "b",
                Json::Arr(vec![Json::Num(1), Json::Null, Json::Bool(true)]),
            ),
        ]);
        assert_eq!(j.to_string(), r#"{"a":"q\"\n\u0001é","b":[1,null,true]}"#);
        assert_eq!(utc(0), "1970-01-01 00:00:00Z");
        assert_eq!(utc(1_700_000_000_000), "2023-11-14 22:13:20Z");
        assert_eq!(size(1536), "1.5 KiB");
        // Terminal controls and bidi overrides are shown, not obeyed.
        assert_eq!(printable("plain\tné\nline"), "plain\tné\nline");
        assert_eq!(
            printable("a\u{1b}[31mred\u{7}\u{9b}2J\u{202e}txt.exe\u{7f}"),
            "a\\u{1b}[31mred\\u{7}\\u{9b}2J\\u{202e}txt.exe\\u{7f}"
        );
    }
}

//! `scribe print|diff` and `resolve --show`: looking at content (#18).

use std::io::Write;
use std::path::{Path, PathBuf};

use scribe_client::workflow::content::{self, Rev, Revision};
use scribe_client::workflow::{files, Opened};
use scribe_client::ServerLink;
use scribe_format::ErrorCode;
use scribe_workspace::detect::LocalChange;
use scribe_workspace::records::OpenedAction;

use crate::ctx::{self, Ctx};
use crate::error::{CliError, CliResult};
use crate::ui::{size, Json};

/// Files up to this size are compared as text (when both sides are text).
pub const TEXT_LIMIT: u64 = 8 << 20;

/// stdout that remembers whether its reader went away.
struct Stdout {
    out: std::io::BufWriter<std::io::StdoutLock<'static>>,
    closed: bool,
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.out.write(buf).inspect_err(|e| {
            self.closed |= e.kind() == std::io::ErrorKind::BrokenPipe;
        })
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush().inspect_err(|e| {
            self.closed |= e.kind() == std::io::ErrorKind::BrokenPipe;
        })
    }
}

/// Stream `r`'s bytes to stdout; a closed pipe ends quietly.
fn to_stdout(link: &ServerLink, r: &Revision) -> CliResult {
    let mut out = Stdout {
        out: std::io::BufWriter::with_capacity(1 << 20, std::io::stdout().lock()),
        closed: false,
    };
    let res = content::write(link, r, &mut out).and_then(|()| Ok(out.flush()?));
    match res {
        Err(_) if out.closed => Err(CliError::from_stdout(std::io::Error::from(
            std::io::ErrorKind::BrokenPipe,
        ))),
        Err(e) => Err(e.into()),
        Ok(()) => Ok(()),
    }
}

/// `scribe print PATH[@CHANGE]`.
pub fn print(ctx: &Ctx, arg: String) -> CliResult {
    let o = ctx::open(ctx)?;
    let (p, rev) = content::split_rev(&arg).map_err(|m| CliError::new(ErrorCode::Usage, m))?;
    let path = ctx::paths(ctx, &o.ws, &[p.to_string()])?.remove(0);
    let link = o.link(&ctx.lib)?;
    let r = content::revision(&o, &link, &path, rev).map_err(|e| {
        let code = e.code();
        let err = CliError::from(e);
        match (code, rev) {
            // A change the branch does not have: the hint of its concern.
            _ if err.concern.is_some() => err,
            (ErrorCode::NotFound, Rev::Have) => err.hint(format!(
                "`scribe print {p}@head` prints the server's newest revision; `scribe history {p}` lists them"
            )),
            (ErrorCode::NotFound, _) => err.hint(format!("`scribe history {p}` lists its changes")),
            _ => err,
        }
    })?;
    to_stdout(&link, &r)
}

/// `scribe resolve PATH --show base|theirs`.
pub fn resolve_show(ctx: &Ctx, args: Vec<String>, theirs: bool) -> CliResult {
    let o = ctx::open(ctx)?;
    let paths = ctx::paths(ctx, &o.ws, &args)?;
    let [path] = paths.as_slice() else {
        return Err(CliError::new(
            ErrorCode::Usage,
            "--show prints one file: name one path",
        ));
    };
    let link = o.link(&ctx.lib)?;
    let (base, target) = content::resolve_sides(&o, path)?;
    let (side, name) = if theirs {
        (target, "theirs")
    } else {
        (base, "base")
    };
    let Some(r) = side else {
        let (what, hint) = if theirs {
            (
                format!("{path:?} is deleted on the server (theirs has no content)"),
                format!(
                    "settle it with `scribe resolve {path} --theirs` (delete it) or `--ours` \
                     (keep yours)"
                ),
            )
        } else {
            (
                format!("{path:?} has no base here (it is new on both sides)"),
                format!("`scribe resolve {path} --show theirs` prints the server's file"),
            )
        };
        return Err(CliError::new(ErrorCode::NotFound, what)
            .paths(vec![path.clone()])
            .hint(hint));
    };
    ctx.out.status(format!(
        "{name} of {path}: change {}, {}",
        r.change,
        size(r.size)
    ));
    to_stdout(&link, &r)
}

/// One side of a comparison.
enum Side {
    None,
    Server(Revision),
    Local(PathBuf),
}

struct Pair {
    path: String,
    old: Side,
    new: Side,
    /// `old` is what the working file started from (label `a/PATH@N`).
    label: String,
}

/// `scribe diff [PATH...] [--tool CMD]`.
pub fn diff(ctx: &Ctx, args: Vec<String>, tool: Option<String>) -> CliResult {
    let o = ctx::open(ctx)?;
    let prefixes = ctx::paths(ctx, &o.ws, &args)?;
    let under = |p: &str| {
        prefixes.is_empty()
            || prefixes
                .iter()
                .any(|x| scribe_format::path::is_under_prefix(p, x))
    };
    let report = files::status(&o)?;
    let read = o.ws.read()?;
    let have = |p: &str| -> CliResult<Option<Revision>> {
        Ok(read.baseline(p)?.map(|b| Revision {
            change: b.change,
            manifest: b.manifest,
            content: b.content,
            size: b.size,
            mode: b.mode,
        }))
    };
    let root = o.ws.root().to_path_buf();
    let mut pairs = Vec::new();
    for (p, rec) in &report.files.opened {
        if !under(p) {
            continue;
        }
        let base = match (&rec.moved_from, rec.action) {
            (Some((src, _)), _) => have(src)?,
            (None, OpenedAction::Add) => None,
            (None, _) => have(p)?,
        };
        let old = base.map_or(Side::None, Side::Server);
        let new = if rec.action == OpenedAction::Delete || !root.join(p).is_file() {
            Side::None
        } else {
            Side::Local(root.join(p))
        };
        pairs.push(Pair {
            path: p.clone(),
            old,
            new,
            label: rec.action.name().to_string(),
        });
    }
    for c in &report.files.unopened {
        let p = c.path();
        if !under(p) {
            continue;
        }
        match c {
            LocalChange::Modified { .. } => pairs.push(Pair {
                path: p.to_string(),
                old: have(p)?.map_or(Side::None, Side::Server),
                new: Side::Local(root.join(p)),
                label: "modified, not opened".into(),
            }),
            LocalChange::Missing { .. } => pairs.push(Pair {
                path: p.to_string(),
                old: have(p)?.map_or(Side::None, Side::Server),
                new: Side::None,
                label: "missing, not opened".into(),
            }),
            LocalChange::New(_) => {}
        }
    }
    drop(read);
    pairs.sort_by(|a, b| a.path.cmp(&b.path));
    if pairs.is_empty() {
        if !ctx.out.json {
            ctx.out
                .status("No differences: nothing opened or changed there");
        } else {
            ctx.out.json(&Json::Arr(Vec::new()))?;
        }
        return Ok(());
    }
    let link = o.link(&ctx.lib)?;
    if let Some(tool) = tool {
        return run_tool(&o, &link, &tool, &pairs);
    }
    let mut json = Vec::new();
    for pair in &pairs {
        let d = compare(&link, pair)?;
        if ctx.out.json {
            json.push(d.json(&pair.path, &pair.label));
        } else {
            ctx.out.line(d.text(&pair.path, &pair.label).trim_end())?;
        }
    }
    if ctx.out.json {
        ctx.out.json(&Json::Arr(json))?;
    }
    Ok(())
}

/// What one comparison found.
pub struct Compared {
    /// (size, content id) of each side, `None` when absent.
    pub old: Option<(u64, scribe_format::FileContentId)>,
    pub new: Option<(u64, scribe_format::FileContentId)>,
    /// The unified diff, when both sides are text.
    pub text: Option<String>,
}

impl Compared {
    pub fn text(&self, path: &str, label: &str) -> String {
        if let Some(t) = &self.text {
            return if t.is_empty() {
                format!("{path} ({label}): no difference in content")
            } else {
                t.clone()
            };
        }
        let side = |s: &Option<(u64, scribe_format::FileContentId)>| match s {
            None => "(none)".to_string(),
            Some((n, c)) => format!("{} (content {})", size(*n), &c.to_hex()[..16]),
        };
        let same = match (&self.old, &self.new) {
            (Some(a), Some(b)) if a.1 == b.1 => ", identical content",
            _ => "",
        };
        format!(
            "binary {path} ({label}): {} -> {}{same}",
            side(&self.old),
            side(&self.new)
        )
    }

    pub fn json(&self, path: &str, label: &str) -> Json {
        let side = |s: &Option<(u64, scribe_format::FileContentId)>| match s {
            None => Json::Null,
            Some((n, c)) => Json::obj(vec![
                ("size", Json::Num(*n)),
                ("content", Json::str(c.to_hex())),
            ]),
        };
        Json::obj(vec![
            ("path", Json::str(path)),
            ("what", Json::str(label)),
            ("old", side(&self.old)),
            ("new", side(&self.new)),
            ("binary", Json::Bool(self.text.is_none())),
            ("diff", self.text.as_ref().map_or(Json::Null, Json::str)),
        ])
    }
}

fn is_text(b: &[u8]) -> bool {
    !b[..b.len().min(8192)].contains(&0) && std::str::from_utf8(b).is_ok()
}

fn compare(link: &ServerLink, pair: &Pair) -> CliResult<Compared> {
    let old_rev = match &pair.old {
        Side::Server(r) => Some(*r),
        _ => None,
    };
    let old_meta = old_rev.map(|r| (r.size, r.content));
    let new_meta = match &pair.new {
        Side::Local(f) => Some(content::file_content_id(f).map(|(c, n)| (n, c))?),
        Side::Server(r) => Some((r.size, r.content)),
        Side::None => None,
    };
    let small =
        |m: &Option<(u64, scribe_format::FileContentId)>| m.is_none_or(|(n, _)| n <= TEXT_LIMIT);
    let mut text = None;
    if small(&old_meta) && small(&new_meta) {
        let old = match old_rev {
            Some(r) => content::bytes(link, &r)?,
            None => Vec::new(),
        };
        let new = match &pair.new {
            Side::Local(f) => std::fs::read(f)?,
            Side::Server(r) => content::bytes(link, r)?,
            Side::None => Vec::new(),
        };
        if is_text(&old) && is_text(&new) {
            text = Some(unified(
                &pair.path,
                old_rev.map(|r| r.change),
                &pair.new,
                &old,
                &new,
            ));
        }
    }
    Ok(Compared {
        old: old_meta,
        new: new_meta,
        text,
    })
}

fn unified(path: &str, old_change: Option<u64>, new: &Side, old: &[u8], new_b: &[u8]) -> String {
    let (a, b) = (
        std::str::from_utf8(old).unwrap_or(""),
        std::str::from_utf8(new_b).unwrap_or(""),
    );
    if a == b {
        return String::new();
    }
    let a_name = match old_change {
        Some(c) => format!("a/{path}@{c}"),
        None => "/dev/null".to_string(),
    };
    let b_name = match new {
        Side::None => "/dev/null".to_string(),
        Side::Server(r) => format!("b/{path}@{}", r.change),
        Side::Local(_) => format!("b/{path}"),
    };
    similar::TextDiff::from_lines(a, b)
        .unified_diff()
        .context_radius(3)
        .header(&a_name, &b_name)
        .to_string()
}

/// The comparison of a change's entry with the revision before it
/// (`describe --diff`).
pub fn compare_revisions(
    link: &ServerLink,
    path: &str,
    old: Option<Revision>,
    new: Option<Revision>,
) -> CliResult<Compared> {
    compare(
        link,
        &Pair {
            path: path.to_string(),
            old: old.map_or(Side::None, Side::Server),
            new: new.map_or(Side::None, Side::Server),
            label: String::new(),
        },
    )
}

/// Hand each pair to `tool OLD NEW` (the server's side in a temporary
/// file, an absent side as an empty file), one after the other.
fn run_tool(o: &Opened, link: &ServerLink, tool: &str, pairs: &[Pair]) -> CliResult {
    let mut words = tool.split_whitespace();
    let Some(program) = words.next() else {
        return Err(CliError::new(ErrorCode::Usage, "--tool names no program"));
    };
    let fixed: Vec<&str> = words.collect();
    let tmp = o.ws.state_dir().join("tmp");
    std::fs::create_dir_all(&tmp)?;
    for (i, pair) in pairs.iter().enumerate() {
        let name = Path::new(&pair.path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut temps = Vec::new();
        let mut side = |s: &Side, which: &str| -> CliResult<PathBuf> {
            match s {
                Side::Local(f) => Ok(f.clone()),
                other => {
                    let f = tmp.join(format!("diff-{}-{i}-{which}-{name}", std::process::id()));
                    let mut file = std::fs::File::create(&f)?;
                    if let Side::Server(r) = other {
                        content::write(link, r, &mut file)?;
                    }
                    temps.push(f.clone());
                    Ok(f)
                }
            }
        };
        let old = side(&pair.old, "old")?;
        let new = side(&pair.new, "new")?;
        let status = std::process::Command::new(program)
            .args(&fixed)
            .arg(&old)
            .arg(&new)
            .status();
        for t in &temps {
            let _ = std::fs::remove_file(t);
        }
        let status = status.map_err(|e| {
            CliError::new(ErrorCode::Io, format!("running {program:?}: {e}"))
                .hint("--tool takes a program (and fixed arguments) that accepts two files")
        })?;
        // Diff tools exit 1 when the files differ: only a signal or a
        // status above 1 is a failure.
        if status.code().is_none_or(|c| c > 1) {
            return Err(CliError::new(
                ErrorCode::Refused,
                format!("{program} failed on {} ({status})", pair.path),
            ));
        }
    }
    Ok(())
}

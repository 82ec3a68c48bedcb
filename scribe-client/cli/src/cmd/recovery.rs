//! `scribe recovery list|prune|restore`: the displaced-contents area.

use scribe_workspace::recovery::{self, RecoveryEntry};

use crate::ctx::{self, Ctx};
use crate::error::CliResult;
use crate::ui::{size, utc, Json};

fn line(e: &RecoveryEntry) -> (String, Json) {
    match e {
        RecoveryEntry::Displaced {
            name,
            index,
            present,
            size: n,
        } => (
            format!(
                "{name}  {}  {}  {}{}",
                index.path,
                index.reason.as_str(),
                utc(index.retained_ms),
                if *present {
                    format!("  {}", size(*n))
                } else {
                    "  (index only)".into()
                }
            ),
            Json::obj(vec![
                ("name", Json::str(name)),
                ("path", Json::str(&index.path)),
                ("reason", Json::str(index.reason.as_str())),
                ("retained_ms", Json::Num(index.retained_ms)),
                ("present", Json::Bool(*present)),
                ("size", Json::Num(*n)),
            ]),
        ),
        RecoveryEntry::Malformed { name, problem } => (
            format!("{name}  malformed index: {problem} (never pruned)"),
            Json::obj(vec![
                ("name", Json::str(name)),
                ("malformed", Json::str(problem)),
            ]),
        ),
        RecoveryEntry::Archive { name, size: n } => (
            format!("{name}  intent archive  {} (never pruned)", size(*n)),
            Json::obj(vec![
                ("name", Json::str(name)),
                ("archive", Json::Bool(true)),
                ("size", Json::Num(*n)),
            ]),
        ),
    }
}

pub fn list(ctx: &Ctx) -> CliResult {
    let o = ctx::open(ctx)?;
    let entries = recovery::list(o.ws.root())?;
    if ctx.out.json {
        return ctx
            .out
            .json(&Json::Arr(entries.iter().map(|e| line(e).1).collect()));
    }
    if entries.is_empty() {
        ctx.out.line("The recovery area is empty")?;
    }
    for e in &entries {
        ctx.out.line(line(e).0)?;
    }
    if !entries.is_empty() {
        ctx.out.status(format!(
            "contents are in {}",
            recovery::recovery_dir(o.ws.root()).display()
        ));
    }
    Ok(())
}

pub fn prune(ctx: &Ctx, older_than_days: u64) -> CliResult {
    let o = ctx::open(ctx)?;
    let cutoff = scribe_workspace::scan::now_ms().saturating_sub(older_than_days * 86_400_000);
    let removed = recovery::prune(o.ws.root(), cutoff)?;
    for e in &removed {
        ctx.out.line(format_args!("pruned {}", e.name()))?;
    }
    ctx.out.status(format!(
        "pruned {} {}",
        removed.len(),
        if removed.len() == 1 {
            "entry"
        } else {
            "entries"
        }
    ));
    Ok(())
}

/// `scribe recovery restore NAME [--to PATH]`.
pub fn restore(ctx: &Ctx, name: String, to: Option<String>) -> CliResult {
    let o = ctx::open(ctx)?;
    let to = match to {
        Some(t) => Some(ctx::paths(ctx, &o.ws, std::slice::from_ref(&t))?.remove(0)),
        None => None,
    };
    let dest = recovery::restore(o.ws.root(), &name, to.as_deref())?;
    ctx.out.line(format_args!("restored {name} to {dest}"))?;
    ctx.out.status(format!(
        "{dest} is not opened: `scribe status` shows it; the entry stays in the recovery area"
    ));
    Ok(())
}

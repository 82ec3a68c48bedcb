//! `scribe debug ...`: show how Scribe interprets its inputs.

use crate::args::DebugCmd;
use crate::ctx::Ctx;
use crate::error::CliResult;

pub fn run(ctx: &Ctx, debug: DebugCmd) -> CliResult {
    match debug {
        DebugCmd::Path { paths } => {
            for p in &paths {
                let name = if p.is_empty() { "(empty)" } else { p };
                ctx.out.line(format_args!("{name}: {}", describe_path(p)))?;
            }
            for (a, b) in collisions(&paths) {
                ctx.out.line(format_args!(
                    "collision: {a} and {b} differ only in case or normalization \
                     (same key): one workspace cannot hold both"
                ))?;
            }
            Ok(())
        }
    }
}

/// Each two different valid arguments with the same collision key, in
/// argument order.
pub fn collisions(paths: &[String]) -> Vec<(&str, &str)> {
    let valid: Vec<(&str, Vec<u8>)> = paths
        .iter()
        .filter(|p| scribe_format::path::validate(p).is_ok())
        .map(|p| (p.as_str(), scribe_format::path::collision_key(p)))
        .collect();
    let mut out = Vec::new();
    for (i, (a, ka)) in valid.iter().enumerate() {
        for (b, kb) in &valid[i + 1..] {
            if ka == kb && a != b && !out.contains(&(*a, *b)) && !out.contains(&(*b, *a)) {
                out.push((*a, *b));
            }
        }
    }
    out
}

/// The `scribe debug path` verdict for one argument.
pub fn describe_path(path: &str) -> String {
    match scribe_format::path::validate(path) {
        Ok(()) => {
            let key = hex::encode(scribe_format::path::collision_key(path));
            match scribe_format::path::check_windows_name(path) {
                Ok(()) => format!("ok {key}"),
                // Valid everywhere, but a Windows workspace holds it for
                // resolve instead of writing it.
                Err(e) => format!("ok {key} (not on Windows: {})", e.code()),
            }
        }
        Err(e) => format!("invalid {} ({e})", e.code()),
    }
}

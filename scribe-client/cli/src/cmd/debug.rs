//! `scribe debug ...`: show how Scribe interprets its inputs.

use crate::args::DebugCmd;
use crate::ctx::Ctx;
use crate::error::CliResult;

pub fn run(ctx: &Ctx, debug: DebugCmd) -> CliResult {
    match debug {
        DebugCmd::Path { paths } => {
            for p in &paths {
                ctx.out.line(describe_path(p))?;
            }
            Ok(())
        }
    }
}

/// The `scribe debug path` line for one argument.
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
        Err(e) => format!("invalid {}", e.code()),
    }
}

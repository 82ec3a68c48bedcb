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
        Ok(()) => format!(
            "ok {}",
            hex::encode(scribe_format::path::collision_key(path))
        ),
        Err(e) => format!("invalid {}", e.code()),
    }
}

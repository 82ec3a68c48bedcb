//! `scribe debug ...`: show how Scribe interprets its inputs.

use std::io::Write;
use std::process::ExitCode;

use clap::Subcommand;

#[derive(Subcommand)]
pub enum Debug {
    /// Check canonical paths and print their collision keys
    ///
    /// Prints one line per argument: `ok <collision-key-hex>` for a valid
    /// canonical path (section 5 of the format specification), or
    /// `invalid <error-code>` naming the rule it breaks. Exits 0 either way.
    Path {
        /// Repository-relative paths with `/` separators
        #[arg(required = true)]
        paths: Vec<String>,
    },
}

pub fn run(debug: Debug) -> anyhow::Result<ExitCode> {
    match debug {
        Debug::Path { paths } => {
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            for line in paths.iter().map(|p| describe_path(p)) {
                writeln!(out, "{line}")?;
            }
            out.flush()?;
            Ok(ExitCode::SUCCESS)
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

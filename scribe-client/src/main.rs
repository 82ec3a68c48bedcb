//! The `scribe` binary.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;

/// Scribe: version control for large binary assets
#[derive(Parser)]
#[command(name = "scribe", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Inspect how Scribe sees its inputs
    #[command(subcommand)]
    Debug(cmd::debug::Debug),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Debug(debug) => cmd::debug::run(debug),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            if is_broken_pipe(&err) {
                return ExitCode::SUCCESS;
            }
            eprintln!("Error: {err}");
            for cause in err.chain().skip(1) {
                eprintln!("Caused by: {cause}");
            }
            ExitCode::from(1)
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

//! The `scribe-auth` binary.

use clap::Parser;

/// scribe-auth: nothing is served yet; see the crate documentation for what this binary will own.
#[derive(Parser)]
#[command(name = "scribe-auth", version, about)]
struct Cli {}

fn main() {
    let _cli = Cli::parse();
    eprintln!(
        "scribe-auth {}: no commands are available in this build yet",
        env!("CARGO_PKG_VERSION")
    );
    std::process::exit(2);
}

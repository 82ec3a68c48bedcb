//! The `scribe-server` binary.

use clap::Parser;

/// scribe-server: nothing is served yet; see the crate documentation for what this binary will own.
#[derive(Parser)]
#[command(name = "scribe-server", version, about)]
struct Cli {}

fn main() {
    let _cli = Cli::parse();
    eprintln!(
        "scribe-server {}: no commands are available in this build yet",
        env!("CARGO_PKG_VERSION")
    );
    std::process::exit(2);
}

//! The `nokv` binary.

use clap::Parser;

/// nokv: nothing is served yet; see the crate documentation for what this binary will own.
#[derive(Parser)]
#[command(name = "nokv", version, about)]
struct Cli {}

fn main() {
    let _cli = Cli::parse();
    eprintln!(
        "nokv {}: no commands are available in this build yet",
        env!("CARGO_PKG_VERSION")
    );
    std::process::exit(2);
}

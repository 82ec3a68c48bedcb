//! The `nokv` binary: `nokv --server URL --repo NAME [--agent-root ROOT]
//! workbench <tool> ['<json>']` prints the tool's JSON result on stdout
//! (exit 0) or a JSON error on stdout (exit 1; 2 for usage); the JSON
//! input comes from stdin when no argument is given. `nokv schema` prints
//! the 18 tools' input schemas.

use std::io::{Read, Write};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use nokv_workbench::scribe::ScribeStore;
use nokv_workbench::{tools, WbError, Workbench};

#[derive(Parser)]
#[command(
    name = "nokv",
    version,
    about = "NoKV's Workbench over a Scribe repository"
)]
struct Cli {
    /// The Scribe server: scribe://HOST:PORT, scribes://HOST:PORT or a data-root path.
    #[arg(long, global = true)]
    server: Option<String>,
    /// The repository that is the agent root.
    #[arg(long, global = true)]
    repo: Option<String>,
    /// The agent id (presentation paths /agents/{ROOT}/wb/...; the author of changes).
    #[arg(long, global = true, default_value = "agent")]
    agent_root: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one tool: `nokv workbench workbench_put_file '{"id":..}'`.
    Workbench {
        /// The tool name (for example workbench_create).
        tool: String,
        /// The JSON input (read from stdin when absent).
        json: Option<String>,
    },
    /// Print every tool's name and JSON input schema.
    Schema,
    /// Serve the tools over the Model Context Protocol on stdin/stdout.
    Mcp,
}

fn emit(v: &serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
}

fn fail(e: WbError) -> ExitCode {
    emit(&e.to_json());
    ExitCode::from(1)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Mcp => {
            let (Some(server), Some(repo)) = (cli.server, cli.repo) else {
                eprintln!("nokv mcp: --server and --repo are required");
                return ExitCode::from(2);
            };
            let opts = scribe_client::ClientOptions {
                ca_file: std::env::var_os("SCRIBE_CA_FILE").map(Into::into),
                ..Default::default()
            };
            // A store that cannot be opened answers every call with the error.
            let (wb, open_error) = match ScribeStore::open(&server, &repo, &cli.agent_root, &opts) {
                Ok(s) => (Some(Workbench::new(s, &cli.agent_root)), None),
                Err(e) => (None, Some(e.to_string())),
            };
            let stdin = std::io::stdin().lock();
            let stdout = std::io::stdout().lock();
            match nokv_workbench::mcp::serve(wb, open_error, stdin, stdout) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("nokv mcp: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Command::Schema => {
            emit(&tools::all_schemas());
            ExitCode::SUCCESS
        }
        Command::Workbench { tool, json } => {
            let text = match json {
                Some(t) => t,
                None => {
                    let mut s = String::new();
                    if let Err(e) = std::io::stdin().read_to_string(&mut s) {
                        return fail(WbError::invalid_input(format!("stdin: {e}")));
                    }
                    s
                }
            };
            let input: serde_json::Value = match serde_json::from_str(&text) {
                Ok(v) => v,
                Err(e) => {
                    return fail(WbError::invalid_input(format!(
                        "the input is not JSON: {e}"
                    )))
                }
            };
            // Refuse a malformed call before connecting.
            if let Err(e) = tools::parse(&tool, &input) {
                return fail(e);
            }
            let (Some(server), Some(repo)) = (cli.server, cli.repo) else {
                emit(&WbError::invalid_input("--server and --repo are required").to_json());
                return ExitCode::from(2);
            };
            let opts = scribe_client::ClientOptions {
                ca_file: std::env::var_os("SCRIBE_CA_FILE").map(Into::into),
                ..Default::default()
            };
            let store = match ScribeStore::open(&server, &repo, &cli.agent_root, &opts) {
                Ok(s) => s,
                Err(e) => return fail(e),
            };
            let mut wb = Workbench::new(store, &cli.agent_root);
            match wb.call(&tool, &input) {
                Ok(v) => {
                    emit(&v);
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
    }
}

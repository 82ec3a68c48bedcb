//! NoKV's Workbench contract over a Scribe repository: the transport-free
//! facade ([`Workbench`]) over a small storage trait ([`store::Store`]),
//! its implementation over Scribe's client library ([`scribe::ScribeStore`]),
//! and (in `src/main.rs`) the `nokv` binary. docs/workbench.md is the design.
//!
//! | module | what |
//! |---|---|
//! | [`path`] | workbench ids, sections, the path jail, seed 002's physical key codec |
//! | [`tools`] | the 18 tool names, strict input types and JSON input schemas |
//! | [`identity`] | canonical JSON, manifest digest, commit identity, request identity |
//! | [`error`] | typed errors: code, retryable, conflict class |
//! | [`journal`] | appends and edits whose answers were not delivered (a repeat of one is a retry) |
//! | [`store`] | the storage trait |
//! | [`scribe`] | the storage trait over `scribe-client` |
//! | [`workbench`] | the facade: tool calls become reads and atomic publications |
//! | [`mcp`] | the Model Context Protocol (JSON-RPC 2.0 lines) over any reader and writer |

pub mod error;
pub mod identity;
pub mod journal;
pub mod mcp;
pub mod path;
pub mod scribe;
pub mod store;
pub mod tools;
pub mod workbench;

pub use error::{ConflictClass, WbError};
pub use workbench::Workbench;

#[doc(hidden)]
/// Phase timings on stderr when `NOKV_PHASES` is set (measurement aid for
/// docs/performance.md; nothing else reads it).
pub fn phase(label: &str, since: &mut std::time::Instant) {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if *ON.get_or_init(|| std::env::var_os("NOKV_PHASES").is_some()) {
        eprintln!("nokv phase {label:<28} {:>10.1?}", since.elapsed());
    }
    *since = std::time::Instant::now();
}

//! Test support shared by the Scribe crates' tests. Dev-only: no product
//! crate depends on it outside `[dev-dependencies]`, and it is never
//! published.
//!
//! | module | feature | what it holds |
//! |---|---|---|
//! | [`data`] | (none) | deterministic incompressible bytes: [`noise`], [`fill`], [`XorShift64`] |
//! | [`docs`] | (none) | the command lines a document shows: [`docs::command_lines`] |
//! | [`files`] | (none) | files of a tree: [`files::write`], [`files::read`], [`files::copy_tree`] |
//! | `change` | `service` | files and change sets built from bytes, with every object they need |
//! | `env` | `service` | a data root with a repository served over any `Transport` |
//! | `pki` | `service` | a test CA and a certificate for `localhost` and 127.0.0.1 |
//! | `process` | `service` | a real, separate server process (the test binary run again); `server_process_entry!` |
//! | `team` | `team` | a team server: a real auth service with users and grants, a data root bound to it, served over TLS |
//! | `wire` | `service` | a raw protocol client over TCP or TLS (`wire::Wire`) |
//! | `workspace` | `workspace` | workspaces created through `scribe-workspace`, with baselines |
//!
//! Without features this crate depends on no Scribe crate, so the lowest
//! crates (`scribe-format`, `scribe-objects`, `scribe-metadata`) take their
//! test data from it without a cycle. A crate's own unit tests
//! (`#[cfg(test)]` in `src/`) that use a feature which depends on that
//! crate see two copies of it; only plain types (`Vec<u8>`, paths) may
//! cross that boundary.

pub mod data;
pub mod docs;
pub mod files;
pub mod rgw;

#[cfg(feature = "service")]
pub mod change;
#[cfg(feature = "service")]
pub mod env;
#[cfg(feature = "service")]
pub mod pki;
#[cfg(feature = "service")]
pub mod poison;
#[cfg(feature = "service")]
pub mod process;
#[cfg(feature = "team")]
pub mod team;
#[cfg(feature = "service")]
pub mod wire;
#[cfg(feature = "workspace")]
pub mod workspace;

pub use data::{fill, noise, XorShift64};
#[cfg(feature = "service")]
pub use env::{both, Env, Transport, REPO};

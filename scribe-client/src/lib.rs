//! The Scribe client library: everything the `scribe` command does, with
//! no terminal, no environment and no process exit in it (the binary, in
//! `scribe-client/cli`, is a thin layer of arguments and output over this
//! crate, as `jj-cli` sits over `jj-lib`).
//!
//! | module | what |
//! |---|---|
//! | [`auth`], [`auth_admin`] | the auth service: login, whoami, logout; the administrative verbs and automation credentials |
//! | [`url`] | [`ServerUrl`]: `scribe://`, `scribes://`, data-root paths |
//! | [`client`] | [`Client`]: one typed method per request, over any [`Connection`] |
//! | [`tcp`], [`tls`] | the TCP/TLS [`Connection`] (the in-process one is `scribe_server::InProcessConnection`) |
//! | [`transfer`] | upload and download strategies: groups, 4 MiB pieces, verified ranges |
//! | [`link`] | [`ServerLink`]: a workspace's connections, cache, prefetch and materializer |
//! | [`workflow`] | submit (with its recovery protocol), sync, views, workspace create, moves, resolve, locks, history |
//! | [`progress`] | the [`Progress`] trait workflows report through, and its typed [`Note`]s |
//! | [`failpoints`] | crash-test points, only with the `failpoints` feature |
//! | [`error`] | [`Error`]: a registered code, the message, the paths, the cause |
//!
//! `docs/architecture.md` draws how a submit and a sync travel through it.
//!
//! [`Connection`]: scribe_format::wire::Connection

use std::sync::Arc;

pub mod auth;
pub mod auth_admin;
pub mod client;
pub mod error;
pub mod failpoints;
pub mod link;
pub mod progress;
pub mod tcp;
pub mod tls;
pub mod transfer;
pub mod url;
pub mod workflow;

pub use client::{connect, Client, ClientError, ClientOptions, ClientResult};
pub use error::{Error, Result};
pub use failpoints::Failpoints;
pub use link::ServerLink;
pub use progress::{Note, Progress, Silent, Task};
pub use url::ServerUrl;

/// What every workflow runs with: how to connect, where to report, and
/// the failpoints of a test build.
#[derive(Clone)]
pub struct Context {
    /// How connections are opened (timeouts, the CA for `scribes://`).
    pub options: ClientOptions,
    /// Where workflows report.
    pub progress: Arc<dyn Progress>,
    /// Crash-test points (empty unless built with `failpoints`).
    pub failpoints: Arc<Failpoints>,
}

impl Default for Context {
    fn default() -> Self {
        Context {
            options: ClientOptions::default(),
            progress: Arc::new(Silent),
            failpoints: Arc::new(Failpoints::default()),
        }
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

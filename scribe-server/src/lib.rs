//! The Scribe service: a library over `scribe-metadata` and
//! `scribe-objects`, served over TCP/TLS by the `scribe-server` binary and
//! in-process for path URLs. The client side (the `Client`, the TCP/TLS
//! connection) is the `scribe-client` library; this crate never imports it.
//!
//! | module | what |
//! |---|---|
//! | [`service`] | [`Service`] (one per data root) and the request dispatch |
//! | [`transport`] | handshake, frames, timeouts and error frames over any byte stream |
//! | [`listener`] | the TCP/TLS listener with graceful shutdown; [`ServerHandle`] |
//! | [`in_process`] | [`InProcessConnection`]: the in-process transport for path URLs |
//! | [`team`] | a data root bound to scribe-auth: `auth-init`, the team TLS configuration, [`team::TeamAuthorizer`] |
//! | [`tls`] | rustls configuration from PEM files |
//! | [`admin`] | offline administration: doctor, verify, rebuild-locator, compaction, recovery, pins |
//! | [`runtime`] | `serve --runtime-dir`: the pid and `listen` files, and those a killed server left |
//! | [`repos`] | offline `repo rename` and `repo delete`, with the auth service's grants and visibility |
//!
//! `docs/server.md` describes the behaviour and its decisions.

pub mod admin;
pub mod in_process;
pub mod listener;
pub mod repos;
pub mod runtime;
pub mod service;
pub mod team;
#[cfg(feature = "tier")]
pub mod tier;
pub mod tls;
pub mod transport;

pub use in_process::InProcessConnection;
pub use listener::{ListenOptions, Listener, ServerHandle};
pub use service::{
    AcceptedHook, Authorizer, OpenAuthorizer, OpenError, Principal, Service, Session,
};
pub use transport::Timeouts;

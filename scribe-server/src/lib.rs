//! The Scribe service: a library over `scribe-metadata` and
//! `scribe-objects`, served over TCP/TLS by the `scribe-server` binary and
//! in-process for path URLs.
//!
//! | module | what |
//! |---|---|
//! | [`service`] | [`Service`] (one per data root) and the request dispatch |
//! | [`transport`] | handshake, frames, timeouts and error frames over any byte stream |
//! | [`listener`] | the TCP/TLS listener with graceful shutdown; [`ServerHandle`] |
//! | [`client`] | the synchronous [`Client`] for both transports |
//! | [`tls`] | rustls configuration from PEM files |
//! | [`admin`] | offline administration: doctor, verify, rebuild-locator, compaction, recovery |
//!
//! `docs/server.md` describes the behaviour and its decisions.

pub mod admin;
pub mod client;
pub mod listener;
pub mod service;
pub mod tls;
pub mod transport;

pub use client::{connect, Client, ClientError, ClientOptions};
pub use listener::{ListenOptions, Listener, ServerHandle};
pub use service::{OpenError, Service, Session};
pub use transport::Timeouts;

//! The Scribe service.
//!
//! This crate will own: the service library over `scribe-metadata` and
//! `scribe-objects`, its TCP/TLS transport and in-process transport for
//! path URLs, and the offline administration commands of `scribe-server`.

//! The NoKV bridge.
//!
//! This crate owns the S3-compatible remote durable tier ([`tier`]:
//! revision-owned blocks, references, GC; issue #20) and, later, NoKV's
//! Workbench contract over Scribe storage (issue #17). See
//! `docs/nokv-bridge.md` and seeds 002 and 003. The `nokv` binary.

pub mod tier;

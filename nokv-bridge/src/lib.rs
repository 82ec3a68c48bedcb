//! The NoKV bridge.
//!
//! This crate will own: the S3-compatible remote durable tier (revision-owned
//! blocks, references, GC) and NoKV's Workbench contract over Scribe storage
//! (see `seeds/002_44e3d4145a7d5a3a.txt` and `seeds/003_d0dd29e5c289cebd.txt`).

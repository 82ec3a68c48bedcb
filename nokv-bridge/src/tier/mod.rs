//! The S3-compatible durable tier (issue #20; `docs/nokv-bridge.md`).
//!
//! | module | what |
//! |---|---|
//! | `key` | permanent block keys (seed 003) |
//! | `provider` | the provider boundary: create-if-absent put, ranged get, head, delete with an ambiguous outcome |
//! | `s3` | that boundary on any S3-compatible store, through object_store |

mod key;
mod provider;
mod s3;

pub use key::{BlockKey, ROOT as KEY_ROOT};
pub use provider::{Deleted, Head, Provider, ProviderError, Put};
pub use s3::{S3Config, S3Provider};

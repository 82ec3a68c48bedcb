//! Scribe repository metadata (specification sections 7, 8 and 12).
//!
//! | module | what |
//! |---|---|
//! | [`root`] | the data root: `SCRIBE_FORMAT`, `LOCK`, `catalog.redb`, `repos/<id>/` |
//! | [`database_descriptor`] | reading, flushed writing and opening checks of the data root's and each repository's `SCRIBE_FORMAT` |
//! | [`repo`] | `metadata.redb` at schema 3 / snapshot profile 3: creation and open refusals |
//! | [`tables`], [`records`] | table definitions and row encodings |
//! | [`tree`] | immutable compressed radix snapshots (exact-path and collision-key trees) |
//! | [`accept`] | atomic acceptance of submissions, idempotency, buffered groups |
//! | [`stream`] | streamed preparation of large submissions and its recovery |
//! | [`locks`], [`workspaces`] | repository locks and the workspace registry |
//! | [`read`] | stat, list, delta, history, log, describe at a pinned change |
//! | [`doctor`] | read-only verification |
//! | `manifest_check` | manifests a change names, held to section 4.1 and their entries |
//! | [`pins`] | upload pins and their cleanup after a final outcome |
//! | [`objects`] | the object-store hooks (presence, commit envelopes) |
//! | [`clock`] | the wall clock in Unix milliseconds |
//!
//! Snapshot pages, links, root rows and file records are
//! `scribe_format::snapshot`'s types, used as they are.
//!
//! `docs/metadata.md` describes every table and the decisions taken here.

pub mod accept;
pub mod clock;
pub mod database_descriptor;
pub mod doctor;
pub mod error;
pub mod locks;
mod manifest_check;
pub mod notes;
pub mod objects;
pub mod pins;
pub mod read;
pub mod records;
pub mod repo;
pub mod restore;
pub mod root;
pub mod stream;
pub mod tables;
pub mod tree;
pub mod workspaces;

pub use error::{MetadataError, Result};
pub use objects::{
    CommitSink, DirObjects, MemoryObjects, ObjectHooks, ObjectPresence, Objects, StoreObjects,
};
pub use repo::Repository;
pub use root::{DataRoot, RepositoryInfo};

//! The S3-compatible durable tier (issue #20; `docs/nokv-bridge.md`).
//!
//! | module | what |
//! |---|---|
//! | `key` | permanent block keys (seed 003) |
//! | `provider` | the provider boundary: create-if-absent put, ranged get, head, delete with an ambiguous outcome |
//! | `s3` | that boundary on any S3-compatible store, through object_store |
//! | `state` | `tier.redb`: revisions, manifest rows, references, cursors |
//! | `tier` | [`Tier`]: publish a change as a revision, read objects back, verify |
//! | `index` | the index record of each publication in the bucket (what rebuilds `tier.redb`) |
//! | `recovery` | shipping a metadata recovery archive to the bucket and fetching it back |
//! | `stage` | uploading an operation's chunks before it is submitted; publication adopts them |
//! | `gc` | releasing references, claiming zero-count revisions, deleting their blocks |
//! | `root_delete` | giving a whole root up (a repository deleted): its references, revisions, index records and journal |

mod gc;
mod index;
mod key;
mod pool;
mod provider;
mod recovery;
mod root_delete;
mod s3;
mod stage;
mod state;
#[allow(clippy::module_inception)]
mod tier;

use std::path::Path;

pub use gc::Collected;
pub use key::{BlockKey, ROOT as KEY_ROOT};
pub use provider::{Deleted, Head, Provider, ProviderError, Put};
pub use recovery::{
    archive_shipped, fetch_archive, fetch_root_file, fetch_sealed_root_file, journal_shards,
    Shipped,
};
pub use root_delete::{deletion_key, root_deleted_in_bucket, RootDeletion};
pub use s3::{S3Config, S3Provider};
pub use stage::Prestaged;
pub use state::{Lifecycle, ObjectRow, RevisionRow};
pub use tier::{FileVersion, Location, Published, ReadLocal, Tier, TierOptions};

/// Why a tier operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TierError {
    #[error(transparent)]
    Provider(ProviderError),
    /// The tier's record (`tier.redb`) could not be read or written.
    #[error("tier record {path}: {detail}")]
    State { path: String, detail: String },
    /// The tier's record holds something this build does not accept.
    #[error("tier record {path} is damaged: {detail}")]
    Corrupt { path: String, detail: String },
    /// Bytes in the bucket are not what the record says.
    #[error("{key} at byte {offset}: {detail}")]
    Damaged {
        key: String,
        offset: u64,
        detail: String,
    },
    /// A local object could not be read for upload.
    #[error("object {id} cannot be read from the local store: {detail}")]
    Local { id: String, detail: String },
    /// Changes are published in order.
    #[error("change {change} cannot be published before change {next}")]
    OutOfOrder { change: u64, next: u64 },
    /// A revision being deleted takes no new references.
    #[error("revision {revision} is not available (being deleted); it takes no new references")]
    NotAvailable { revision: String },
}

impl TierError {
    pub(crate) fn state(path: &Path, detail: impl std::fmt::Display) -> TierError {
        TierError::State {
            path: path.display().to_string(),
            detail: detail.to_string(),
        }
    }

    pub(crate) fn corrupt(path: &Path, detail: impl std::fmt::Display) -> TierError {
        TierError::Corrupt {
            path: path.display().to_string(),
            detail: detail.to_string(),
        }
    }
}

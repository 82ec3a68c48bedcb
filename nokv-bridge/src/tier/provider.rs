//! The provider boundary (seed 003, "Provider Boundary"): the four things
//! the tier asks of any S3-compatible store, and nothing else.
//!
//! * [`Provider::put_if_absent`]: immutable create. A key that already
//!   holds the same bytes is [`Put::AlreadyPresent`] (a retried upload whose
//!   first answer was lost); a key holding other bytes is
//!   [`ProviderError::Conflict`] and nothing is overwritten.
//! * [`Provider::get_range`]: exactly the bytes asked for, or an error (a
//!   short or long answer is [`ProviderError::ShortRead`], never returned).
//! * [`Provider::head`]: presence and length, the integrity evidence the
//!   tier checks after an upload and during `tier verify`.
//! * [`Provider::delete`]: idempotent (an absent key is deleted); when the
//!   store cannot say what happened the outcome is [`Deleted::Ambiguous`],
//!   which the caller quarantines and reconciles later (seed 003,
//!   "References And Deletion"), never treats as done.
//!   [`Provider::delete_many`] is the same for many keys in few requests,
//!   one outcome per key.
//!
//! The trait is synchronous: the storage server's request handlers are
//! blocking threads. [`super::S3Provider`] drives object_store on a runtime
//! of its own.

use std::ops::Range;

use bytes::Bytes;

/// What [`Provider::put_if_absent`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Put {
    /// The key did not exist; it holds these bytes now.
    Created,
    /// The key already held exactly these bytes (checked by reading them
    /// back): nothing was written.
    AlreadyPresent,
}

/// What [`Provider::delete`] did.
#[derive(Debug)]
pub enum Deleted {
    /// The key is gone (or never existed).
    Gone,
    /// The store did not say: the key may or may not exist.
    Ambiguous(ProviderError),
}

/// A key's presence and length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    pub len: u64,
    /// The store's entity tag, as the store gives it (opaque).
    pub etag: Option<String>,
}

/// Why a provider call failed. Every variant names the key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// The key holds other bytes than an upload offered: keys are never
    /// reused, so this is a bug or an attack, and nothing was overwritten.
    #[error("{key} already holds other bytes; block keys are never reused")]
    Conflict { key: String },
    #[error("{key} is not in the bucket")]
    NotFound { key: String },
    /// The store answered a ranged read with the wrong number of bytes.
    #[error("{key}: asked for bytes {start}..{end}, the store answered {got} bytes")]
    ShortRead {
        key: String,
        start: u64,
        end: u64,
        got: u64,
    },
    /// The store could not be reached or failed (timeouts, resets, 5xx after
    /// retries): try again later.
    #[error("{op} {key}: the object store is unavailable: {detail}")]
    Unavailable {
        op: &'static str,
        key: String,
        detail: String,
    },
    /// The store refused the request (credentials, permissions, a missing
    /// bucket, an unsupported precondition): retrying will not help.
    #[error("{op} {key}: the object store refused: {detail}")]
    Refused {
        op: &'static str,
        key: String,
        detail: String,
    },
}

impl ProviderError {
    /// Whether the same call may succeed later.
    pub fn is_retryable(&self) -> bool {
        matches!(self, ProviderError::Unavailable { .. })
    }
}

/// The tier's view of an object store.
pub trait Provider: Send + Sync {
    /// Store `bytes` under `key` unless `key` exists (see the module docs).
    fn put_if_absent(&self, key: &str, bytes: Bytes) -> Result<Put, ProviderError>;

    /// Bytes `range` of `key`, exactly.
    fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes, ProviderError>;

    /// The whole object.
    fn get(&self, key: &str) -> Result<Bytes, ProviderError>;

    /// `None` when `key` does not exist.
    fn head(&self, key: &str) -> Result<Option<Head>, ProviderError>;

    /// Remove `key`; idempotent, with an explicit ambiguous outcome.
    fn delete(&self, key: &str) -> Deleted;

    /// Remove every key of `keys` in as few requests as the store allows
    /// (S3: `DeleteObjects`, up to 1,000 keys a request): one outcome per
    /// key, in `keys`' order, each meaning what [`Provider::delete`]'s
    /// does. A key the store did not confirm (a request that failed or
    /// whose answer was lost, an error for that key) is
    /// [`Deleted::Ambiguous`], never [`Deleted::Gone`]. The default
    /// deletes one key at a time.
    fn delete_many(&self, keys: &[String]) -> Vec<Deleted> {
        keys.iter().map(|k| self.delete(k)).collect()
    }

    /// The names of the "directories" directly below `prefix` (keys
    /// `prefix/NAME/...`). Used only to find which data roots shipped
    /// journals to a bucket (`restore --from-tier`); never reachability
    /// truth. Stores that cannot list refuse.
    fn list_dirs(&self, prefix: &str) -> Result<Vec<String>, ProviderError> {
        Err(ProviderError::Refused {
            op: "list",
            key: prefix.to_string(),
            detail: "this store cannot list".into(),
        })
    }

    /// The names of the objects directly below `prefix` (keys
    /// `prefix/NAME`). Used only by `restore --from-tier` to tell whether
    /// another data root published changes the chosen one does not hold;
    /// never reachability truth. Stores that cannot list refuse.
    fn list_names(&self, prefix: &str) -> Result<Vec<String>, ProviderError> {
        Err(ProviderError::Refused {
            op: "list",
            key: prefix.to_string(),
            detail: "this store cannot list".into(),
        })
    }

    /// Every key below `prefix` (keys `prefix/...`, at any depth), as
    /// the tier names them (without the deployment prefix). Used only to
    /// find the index records and recovery journals of a root given up
    /// whole (`Tier::finish_root_deletion`), whose keys the record does
    /// not list; never reachability truth (blocks go through the GC).
    /// Stores that cannot list refuse.
    fn list_keys(&self, prefix: &str) -> Result<Vec<String>, ProviderError> {
        Err(ProviderError::Refused {
            op: "list",
            key: prefix.to_string(),
            detail: "this store cannot list".into(),
        })
    }
}

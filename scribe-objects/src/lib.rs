//! The Scribe object store (specification section 6).
//!
//! ```text
//! <store>/SCRIBE_FORMAT          kind = object-store, policy fixed at creation
//! <store>/locator.redb           object key -> location; open-pack checkpoint
//! <store>/loose/<hh>/<kk><hex>   envelopes above small-object-threshold
//! <store>/packs/<8 hex>.pack     append-only packs, one open
//! <store>/staging/               quarantine temporaries
//! ```
//!
//! * [`ObjectStore::create`] / [`ObjectStore::open`] (open-time recovery);
//! * [`ObjectStore::batch`] -> [`Batch::put`] / [`Batch::put_encoded`] ->
//!   [`Batch::commit`]: one durable publication in the order of section 6.3;
//! * reads: [`ObjectStore::get`], [`ObjectStore::open_reader`],
//!   [`ObjectStore::read_to`], [`ObjectStore::read_chunk_range`], all
//!   verifying identity; [`ObjectStore::contains`], [`ObjectStore::missing`];
//! * chunked import: [`ObjectStore::import_file`], [`ObjectStore::import_files`],
//!   [`ObjectStore::import_reader`]; [`ObjectStore::reconstruct`];
//! * [`ObjectStore::verify`] and [`verify_dir`] (read-only);
//!   [`rebuild_locator`]; [`compact`] (full and incremental).
//!
//! ```
//! use scribe_format::ObjectKind;
//! use scribe_objects::{ObjectStore, StoreOptions};
//!
//! let tmp = tempfile::tempdir()?;
//! let store = ObjectStore::create(tmp.path().join("objects"), StoreOptions::default())?;
//! let batch = store.batch();
//! let id = batch.put(ObjectKind::Chunk, b"bytes")?;
//! batch.commit()?; // one durable publication
//! assert_eq!(store.get(&id)?, b"bytes"); // identity verified
//!
//! std::fs::write(tmp.path().join("asset.bin"), vec![7u8; 3 << 20])?;
//! let imported = store.import_file(tmp.path().join("asset.bin"))?;
//! store.reconstruct(&imported.manifest_id, tmp.path().join("copy.bin"))?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! See `docs/objects.md` for the layout and the decisions behind it.

mod batch;
mod compact;
mod content_index;
mod error;
mod gear;
mod import;
mod layout;
mod locator;
mod manifest_bytes;
mod pack;
mod platform;
mod reader;
mod rebuild;
mod store;
mod store_descriptor;
mod verify;

pub use batch::{worth_a_pool, Batch, BatchReceipt, PublishFailpoint, PutOutcome, POOL_MIN_BYTES};
pub use compact::{
    compact, CompactContext, CompactFailpoint, CompactOptions, CompactReport, LINK_CACHE_LIMIT,
};
pub use error::{Result, StoreError};
pub use import::{
    chunk_boundaries, is_profile_cut, ChunkBytes, ChunkSink, ImportedFile, ReadStamp,
};
pub use locator::Location;
pub use reader::ObjectReader;
pub use rebuild::{rebuild_locator, RebuildReport};
pub use store::{
    ObjectStore, RecoveryReport, StoreOptions, DEFAULT_PACK_SEAL_BYTES,
    DEFAULT_SMALL_OBJECT_THRESHOLD, FIRST_PACK_ID,
};
/// What this build reads in an object store's `SCRIBE_FORMAT`: the versions
/// (`layout`, `envelope`) and the required features it knows
/// (`scribe-server migrate` compares a store with them without opening it).
pub use store_descriptor::{KNOWN_FEATURES as KNOWN_STORE_FEATURES, VERSIONS as STORE_VERSIONS};
pub use verify::{verify_dir, Problem, VerifyReport};

/// Decode and check a manifest payload (section 4.1) into the format's
/// owned [`Manifest`](scribe_format::manifest::Manifest).
pub fn decode_manifest(
    payload: &[u8],
) -> std::result::Result<scribe_format::manifest::Manifest, scribe_format::FormatError> {
    scribe_format::manifest::Manifest::decode(payload)
}

/// Encode a manifest payload (section 4.1) of chunking profile 1.
pub fn encode_manifest(
    total_size: u64,
    content_id: &scribe_format::FileContentId,
    chunks: &[scribe_format::manifest::ChunkRef],
) -> std::result::Result<Vec<u8>, scribe_format::FormatError> {
    manifest_bytes::encode(total_size, content_id, chunks)
}

#[cfg(test)]
mod tests {
    /// The store is shared across threads as `Arc<ObjectStore>`; batches
    /// are filled from many threads.
    #[test]
    fn store_and_batch_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<crate::ObjectStore>();
        check::<crate::Batch<'static>>();
        check::<crate::ObjectReader>();
    }
}

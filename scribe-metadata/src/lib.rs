//! Scribe repository metadata (specification sections 7, 8 and 12).
//!
//! | module | what |
//! |---|---|
//! | [`journal`], [`archive`] | metadata recovery journal profile 2: recording, export, replay; the independent `.recovery` archive |
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
//! | [`footprint`] | disk use of a data root: bytes per file, redb storage per table |
//! | `manifest_check` | manifests a change names, held to section 4.1 and their entries |
//! | [`pins`] | upload pins and their cleanup after a final outcome |
//! | [`objects`] | the object-store hooks (presence, commit envelopes) |
//! | [`clock`] | the wall clock in Unix milliseconds |
//! | [`auth_state`] | `auth-state.redb` (section 7.2): workspace and operation claims, the auth revision seen |
//!
//! Snapshot pages, links, root rows and file records are
//! `scribe_format::snapshot`'s types, used as they are.
//!
//! `docs/metadata.md` describes every table and the decisions taken here.

pub mod accept;
pub mod archive;
pub mod auth_state;
pub mod backup;
pub mod checkpoint;
pub mod clock;
pub mod combine;
pub mod consolidate;
mod content_tree;
pub mod database_descriptor;
pub mod doctor;
pub mod error;
pub mod export;
pub mod footprint;
pub mod former_names;
mod id_lines;
pub mod journal;
pub mod locks;
mod manifest_check;
pub mod migration;
pub mod notes;
pub mod objects;
pub mod pins;
pub mod read;
pub mod reclaim;
pub mod records;
pub mod repo;
pub mod restore;
pub mod retired;
pub mod root;
pub mod stream;
pub mod tables;
pub mod tree;
pub mod workspaces;

pub use error::{MetadataError, Result};
pub use manifest_check::Precheck;
pub use objects::{
    CommitSink, DirObjects, MemoryObjects, ObjectHooks, ObjectPresence, Objects, StoreObjects,
};
pub use repo::Repository;
pub use root::{DataRoot, RepositoryInfo, SetAside};

/// Feed `key` and `value` to every metadata row decoder; panics only if a
/// decoder panics or a decoded row does not re-encode to its bytes. The
/// entry point of the `records` fuzz target (`scribe-metadata/fuzz`) and
/// of the property test beside the records.
#[doc(hidden)]
pub fn fuzz_row_decoders(key: &[u8], value: &[u8]) {
    use records::*;
    if let Ok(r) = CatalogRecord::decode(value) {
        assert_eq!(r.encode(), value);
    }
    if let Ok(r) = HistoryRecord::decode(value) {
        assert_eq!(r.encode(), value);
    }
    if let Ok(r) = CommitRecord::decode(value) {
        assert_eq!(r.encode(), value);
    }
    if let Ok(r) = LockRecord::decode(value) {
        assert_eq!(r.encode(), value);
    }
    if let Ok(r) = OperationRecord::decode(value) {
        assert_eq!(r.encode(), value);
    }
    if let Ok(r) = BranchRecord::decode(value) {
        assert_eq!(r.encode(), value);
    }
    if let Ok(r) = RepoMeta::decode(value) {
        assert_eq!(r.encode().to_vec(), value);
    }
    if let Ok(r) = WorkspaceRecord::decode(value) {
        if value.first() == Some(&2) {
            assert_eq!(r.encode(), value);
        }
    }
    let _ = decode_u32(value, "fuzz");
    let _ = decode_u64(value, "fuzz");
    let _ = decode_move(value);
    let _ = decode_accepted_manifest(value);
    let _ = decode_pending(value);
    let _ = notes::decode_note(key, value);
    let _ = scribe_format::snapshot::RootRow::decode(value);
    for k in [key, value] {
        let _ = keys::split_history(k);
        let _ = keys::split_lineage(k);
    }
}

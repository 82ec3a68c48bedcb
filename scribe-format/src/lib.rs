//! Scribe's byte formats: the project's contract with every later build.
//!
//! Everything Scribe stores or sends is encoded here, following
//! `seeds/004_f6d681dc1b1dc5df.txt` to the byte. This crate has no
//! file-system policy and no async: it turns values into bytes and bytes into
//! values, refusing malformed input with a named [`FormatError`] before
//! allocating beyond the limits of section 11.
//!
//! | module | specification |
//! |---|---|
//! | [`id`] | section 1, identifiers and hashing |
//! | [`descriptor`] | section 2, `SCRIBE_FORMAT` |
//! | [`block`], [`envelope`] | section 3, object envelope v1 and its LZ4 blocks |
//! | [`manifest`] | section 4.1 |
//! | [`changeset`] | section 4.2 |
//! | [`commit`] | section 4.3 |
//! | [`operation`] | section 8, operation fingerprint |
//! | [`path`] | section 5, canonical paths and collision profile 1 |
//! | [`operation`] | section 8, the operation fingerprint |
//! | [`snapshot`] | section 12 schema 3: links, root rows, radix pages, file records |
//! | [`portable`] | portable tree commitments |
//! | [`recovery`] | metadata recovery journal profile 2: records, `.scrj` segments, the archive's `HEAD` and frames |
//! | [`scmx`] | section 10, the `.scmx` metadata export container |
//! | [`wire`] | the client-server protocol (`docs/wire-format.md`) |
//! | [`sau2`] | section 7.3 rows of `auth.redb` and the auth protocol's results |
//! | [`limits`] | section 11 |
//! | [`error`] | the one registry of error codes |
//!
//! Two modules are files rather than bytes, shared by both services so
//! neither copies them: [`lock`] (section 7's `LOCK`) and [`runtime`] (a
//! service's `--runtime-dir`: pid file and `listen`, outside the spec).

pub mod block;
pub mod bytes;
pub mod changeset;
pub mod checkpoint;
pub mod commit;
pub mod concern;
pub mod descriptor;
pub mod echo;
pub mod envelope;
pub mod error;
pub mod id;
pub mod limits;
pub mod lock;
pub mod manifest;
pub mod operation;
pub mod path;
pub mod portable;
pub mod recovery;
pub mod recovery_base;
pub mod runtime;
pub mod sau2;
pub mod scmx;
pub mod snapshot;
pub mod wire;

pub use concern::Concern;
pub use error::{ErrorCode, ErrorKind, FormatError};
pub use id::{
    BranchId, ChangeSetId, ChunkId, CommitId, FileContentId, ManifestId, ObjectId, ObjectKind,
    OperationId, RepositoryId, WorkspaceId,
};

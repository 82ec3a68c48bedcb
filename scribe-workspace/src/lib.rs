//! Scribe workspace state (specification section 9 and 9a).
//!
//! This crate owns `.scribe/_state/`: its descriptor and `state.redb`,
//! baselines and fingerprints, opened records, the durable pending
//! submission, sync journals, the recovery area, move intents and views.
//!
//! [`records`] holds the byte encodings of every `state.redb` value and the
//! recovery index text; the store and workflows that use them build on it.

pub mod baseline_index;
pub mod detect;
pub mod error;
pub mod found_moves;
pub mod guard;
pub mod platform;
pub mod records;
pub mod scan;
pub mod state;

pub use error::WorkspaceError;
pub use state::{Workspace, WorkspaceMeta};
pub mod moves;
pub mod open;
pub mod recovery;
pub mod resolve;
pub mod submit;
pub mod sync;
pub mod their_moves;

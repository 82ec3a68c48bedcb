//! The one integration test binary of scribe-objects.

#[path = "it/support.rs"]
mod support;

#[path = "it/store.rs"]
mod store;

#[path = "it/recovery.rs"]
mod recovery;

#[path = "it/corruption.rs"]
mod corruption;

#[path = "it/import.rs"]
mod import;

#[path = "it/rebuild.rs"]
mod rebuild;

#[path = "it/crash.rs"]
mod crash;

#[path = "it/compact.rs"]
mod compact;

#[path = "it/content_index.rs"]
mod content_index;

#[path = "it/sink.rs"]
mod sink;

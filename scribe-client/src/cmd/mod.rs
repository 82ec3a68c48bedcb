//! One module per `scribe` command group.

pub mod debug;
pub mod files;
pub mod info;
pub mod locks;
pub mod quickstart;
pub mod recovery;
pub mod repo;
pub mod stream;
pub mod submit;
pub mod sync;
pub mod workspace;

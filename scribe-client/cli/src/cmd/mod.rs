//! One module per `scribe` command group: each turns arguments into a
//! library call and its report into output.

pub mod admin;
pub mod auth;
pub mod content;
pub mod debug;
pub mod files;
pub mod info;
pub mod locks;
pub mod quickstart;
pub mod quickstart_team;
pub mod recovery;
pub mod repo;
pub mod submit;
pub mod sync;
pub mod workspace;

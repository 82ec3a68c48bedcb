//! One module per `scribe` command group.

pub mod debug;

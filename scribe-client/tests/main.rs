//! End-to-end tests of the `scribe` binary.

mod debug_path;

//! The `scribe` command line client.

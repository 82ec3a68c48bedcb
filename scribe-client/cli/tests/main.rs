//! End-to-end tests of the `scribe` binary (one test binary, modules
//! under `it/`).

mod it;

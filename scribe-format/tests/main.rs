//! scribe-format integration tests: golden fixtures, properties, and the
//! rules of each section. One test binary for the crate keeps link times
//! down; the modules are under `it/`.

mod it;

//! scribe-format integration tests: golden fixtures, properties, and the
//! rules of each section. One test binary for the crate keeps link times down.

mod support;

mod changeset;
mod commit;
mod descriptor;
mod envelope;
mod manifest;
mod path;
mod portable;
mod snapshot;
mod wire;

//! The scribe-server integration tests of the binary.

mod it;

//! The scribe-server integration tests (one binary, one module per concern).

mod it;

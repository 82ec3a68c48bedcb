//! nokv-bridge integration tests.

mod it;

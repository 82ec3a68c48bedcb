//! Tests for `scribe_format::commit`.

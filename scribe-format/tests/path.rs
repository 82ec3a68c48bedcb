//! Tests for `scribe_format::path`.

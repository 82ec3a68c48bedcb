//! Tests for `scribe_format::descriptor`.

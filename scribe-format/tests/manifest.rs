//! Tests for `scribe_format::manifest`.

//! Tests for `scribe_format::envelope`.

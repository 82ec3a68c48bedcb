//! Tests for `scribe_format::portable`.

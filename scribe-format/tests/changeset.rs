//! Tests for `scribe_format::changeset`.

//! Canonical paths (section 5).

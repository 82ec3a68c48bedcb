//! Canonical paths (specification section 5) and collision profile 1.
//!
//! The contract other modules rely on: [`validate`] checks every rule of a
//! canonical path, and [`collision_key`] returns the collision key bytes of
//! a valid path.

use crate::error::FormatError;
use crate::limits::{MAX_COMPONENT_BYTES, MAX_PATH_BYTES};

/// Why a path is not canonical.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    #[error("path is empty")]
    Empty,
    #[error("path is longer than {MAX_PATH_BYTES} bytes")]
    TooLong,
    #[error("a component is longer than {MAX_COMPONENT_BYTES} bytes")]
    ComponentTooLong,
    #[error("path has an empty, `.` or `..` component")]
    BadComponent,
}

impl PathError {
    /// The stable code printed by `scribe debug path`.
    pub fn code(&self) -> &'static str {
        match self {
            PathError::Empty => "empty",
            PathError::TooLong => "too_long",
            PathError::ComponentTooLong => "component_too_long",
            PathError::BadComponent => "bad_component",
        }
    }
}

impl From<PathError> for FormatError {
    fn from(e: PathError) -> Self {
        FormatError::invalid("canonical path", e.to_string())
    }
}

/// Check that `path` is canonical.
pub fn validate(path: &str) -> Result<(), PathError> {
    if path.is_empty() {
        return Err(PathError::Empty);
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(PathError::TooLong);
    }
    for component in path.split('/') {
        if component.is_empty() || component == "." || component == ".." {
            return Err(PathError::BadComponent);
        }
        if component.len() > MAX_COMPONENT_BYTES {
            return Err(PathError::ComponentTooLong);
        }
    }
    Ok(())
}

/// The collision key of a valid canonical path under profile 1.
pub fn collision_key(path: &str) -> Vec<u8> {
    path.as_bytes().to_vec()
}

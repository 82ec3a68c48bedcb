//! The few facts about files that differ between operating systems.
//!
//! Unix has an executable bit; Windows does not, so a Windows working copy
//! reports every file as regular and the client keeps the recorded mode.

use std::fs::Metadata;

/// Whether the file's mode marks it executable (mode 1 of a change set).
#[cfg(unix)]
pub fn is_executable(meta: &Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

/// Whether the file's mode marks it executable (mode 1 of a change set).
#[cfg(not(unix))]
pub fn is_executable(_meta: &Metadata) -> bool {
    false
}

/// Whether this platform records executable bits at all.
pub const HAS_EXECUTABLE_BIT: bool = cfg!(unix);

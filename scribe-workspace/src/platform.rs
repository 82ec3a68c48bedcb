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

/// Give a freshly written file its mode and, in read-only workspaces, make
/// it read-only until `edit` opens it.
pub fn set_file_mode(
    path: &std::path::Path,
    executable: bool,
    readonly: bool,
) -> std::io::Result<()> {
    let meta = std::fs::metadata(path)?;
    let mut perms = meta.permissions();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mut mode = perms.mode() & 0o777;
        mode = if executable {
            mode | 0o111
        } else {
            mode & !0o111
        };
        mode = if readonly {
            mode & !0o222
        } else {
            mode | 0o200
        };
        perms.set_mode(mode);
    }
    #[cfg(not(unix))]
    {
        let _ = executable;
        perms.set_readonly(readonly);
    }
    std::fs::set_permissions(path, perms)
}

/// Make a file writable again (an `edit` in a read-only workspace).
pub fn make_writable(path: &std::path::Path) -> std::io::Result<()> {
    let meta = std::fs::metadata(path)?;
    let mut perms = meta.permissions();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        perms.set_mode(perms.mode() | 0o200);
    }
    #[cfg(not(unix))]
    perms.set_readonly(false);
    std::fs::set_permissions(path, perms)
}

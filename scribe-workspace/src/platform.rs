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

/// Whether `meta` (from `symlink_metadata`) is a symbolic link: on Windows
/// also a junction or any other name-surrogate reparse point, which std
/// reports as a link, and any directory reparse point besides.
pub fn is_link(meta: &Metadata) -> bool {
    if meta.file_type().is_symlink() {
        return true;
    }
    #[cfg(windows)]
    {
        use std::os::windows::fs::MetadataExt;
        const FILE_ATTRIBUTE_REPARSE_POINT: u32 = 0x400;
        if meta.is_dir() && meta.file_attributes() & FILE_ATTRIBUTE_REPARSE_POINT != 0 {
            return true;
        }
    }
    false
}

/// Whether this platform's file system can hold the canonical path
/// `path` as written. Section 5 allows `\\` in a name; a Windows working
/// copy reads it as a separator, so there such a path is refused where it
/// would be written (`docs/format-notes-path.md`, "Backslash").
#[cfg(windows)]
pub fn check_materializable(path: &str) -> Result<(), scribe_format::path::PathError> {
    scribe_format::path::check_windows_name(path)
}

/// Whether this platform's file system can hold the canonical path
/// `path` as written: everywhere but Windows, every canonical path.
#[cfg(not(windows))]
pub fn check_materializable(_path: &str) -> Result<(), scribe_format::path::PathError> {
    Ok(())
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

/// Create the new file `path` for a synced target with its final mode
/// from the start (issue 19: no `chmod` per file). Unix: created `0o777`
/// when executable, else `0o666`, less every write bit in a read-only
/// workspace; the umask applies as for any new file (a file created
/// without write permission can still be written through this handle).
/// Elsewhere: an ordinary new file ([`finish_target_mode`] then makes it
/// read-only, after its flush).
pub fn create_target_file(
    path: &std::path::Path,
    executable: bool,
    readonly: bool,
) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut mode = if executable { 0o777 } else { 0o666 };
        if readonly {
            mode &= !0o222;
        }
        options.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = (executable, readonly);
    options.open(path)
}

/// Open the kept partial download of a large target, creating it if
/// absent, never truncating it: writable whatever the workspace's mode
/// ([`set_partial_mode`] gives the final mode after the last write). A
/// partial file an earlier run already made read-only is made writable.
pub fn open_partial_target(
    path: &std::path::Path,
    executable: bool,
) -> std::io::Result<std::fs::File> {
    let open = || {
        let mut options = std::fs::OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(if executable { 0o777 } else { 0o666 });
        }
        #[cfg(not(unix))]
        let _ = executable;
        options.open(path)
    };
    match open() {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied && path.exists() => {
            make_writable(path)?;
            open()
        }
        other => other,
    }
}

/// Give a completed partial download its final mode by handle (Unix: the
/// executable bits exactly as the target says, the write bits taken away
/// in a read-only workspace), and return its metadata. Elsewhere the
/// metadata as it is; [`finish_target_mode`] sets read-only after the
/// flush.
pub fn set_partial_mode(
    file: &std::fs::File,
    executable: bool,
    readonly: bool,
) -> std::io::Result<Metadata> {
    mode_by_handle(file, |mode| {
        let mut want = if executable {
            mode | ((mode & 0o444) >> 2) | 0o100
        } else {
            mode & !0o111
        };
        if readonly {
            want &= !0o222;
        } else {
            want |= 0o200;
        }
        want
    })
}

/// The metadata of a target file written through [`create_target_file`]
/// (one `fstat`), after correcting its mode by handle in the rare case
/// the umask took what [`set_file_mode`] would give: the executable bits
/// of an executable file, or the owner's write bit of a writable one.
/// Unix only; elsewhere the metadata as it is.
pub fn settle_target_mode(
    file: &std::fs::File,
    executable: bool,
    readonly: bool,
) -> std::io::Result<Metadata> {
    mode_by_handle(file, |mode| {
        let mut want = mode;
        if executable && want & 0o111 == 0 {
            want |= 0o111;
        }
        if !readonly {
            want |= 0o200;
        }
        want
    })
}

/// Unix: give `file` the permission bits `want` computes from its current
/// ones (by handle, only when they differ) and return its metadata.
/// Elsewhere the metadata as it is.
fn mode_by_handle(
    file: &std::fs::File,
    want: impl FnOnce(u32) -> u32,
) -> std::io::Result<Metadata> {
    let meta = file.metadata()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        let want = want(mode);
        if want != mode {
            file.set_permissions(std::fs::Permissions::from_mode(want))?;
            return file.metadata();
        }
    }
    #[cfg(not(unix))]
    let _ = want;
    Ok(meta)
}

/// Where the platform cannot create a file with its final mode (Windows,
/// whose read-only bit forbids the flush): give it that mode after the
/// flush. A no-op on Unix.
pub fn finish_target_mode(
    path: &std::path::Path,
    executable: bool,
    readonly: bool,
) -> std::io::Result<()> {
    if cfg!(unix) || !readonly {
        return Ok(());
    }
    set_file_mode(path, executable, readonly)
}

/// Flush everything written to the file system that holds `fd` (Linux
/// `syncfs(2)`: every file's data and metadata and every directory entry
/// of that file system, then the device's cache), and report any write
/// error since the last one. `None` where the platform has no such call
/// (the caller flushes file by file).
#[cfg(target_os = "linux")]
pub fn sync_file_system(fd: &std::fs::File) -> Option<std::io::Result<()>> {
    Some(rustix::fs::syncfs(fd).map_err(std::io::Error::from))
}

/// See the Linux version: no whole-file-system flush here.
#[cfg(not(target_os = "linux"))]
pub fn sync_file_system(_fd: &std::fs::File) -> Option<std::io::Result<()>> {
    None
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

/// Whether a written file is given its mode before it is flushed (Unix:
/// the flush then covers the mode too). On Windows a read-only file cannot
/// be opened for the flush, so it is flushed first.
pub const FLUSH_AFTER_MODE: bool = cfg!(unix);

/// Flush a written file's data and metadata to stable storage.
#[cfg(unix)]
pub fn flush_file(path: &std::path::Path) -> std::io::Result<()> {
    std::fs::File::open(path)?.sync_all()
}

/// Flush a written file's data and metadata to stable storage.
#[cfg(not(unix))]
pub fn flush_file(path: &std::path::Path) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)?
        .sync_all()
}

/// Flush a directory's entries (renames into it, new subdirectories).
#[cfg(unix)]
pub fn flush_dir(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Flush a directory's entries: Windows has no directory flush (NTFS
/// journals the rename itself).
#[cfg(not(unix))]
pub fn flush_dir(_dir: &std::path::Path) -> std::io::Result<()> {
    Ok(())
}

/// The walk's directory readers: [`walk::Portable`] everywhere, and on
/// Linux a reader built on `openat`, `getdents64` and a narrow `statx`.
pub(crate) mod walk;

#[cfg(target_os = "linux")]
mod linux;

/// The reader the walk uses on this platform.
#[cfg(target_os = "linux")]
pub(crate) type NativeReader = linux::Linux;

/// The reader the walk uses on this platform.
#[cfg(not(target_os = "linux"))]
pub(crate) type NativeReader = walk::Portable;

/// An instance of [`NativeReader`].
#[cfg(target_os = "linux")]
pub(crate) const NATIVE: NativeReader = linux::Linux;

/// An instance of [`NativeReader`].
#[cfg(not(target_os = "linux"))]
pub(crate) const NATIVE: NativeReader = walk::Portable;

//! How the working-copy walk lists a directory and stats its entries.
//!
//! [`Portable`] uses `std::fs` (every OS). Linux has its own reader
//! (`platform/linux.rs`): directories opened relative to their parent,
//! `getdents64` into one reused buffer, and `statx` asking only for what a
//! fingerprint needs. Both must give the walk the same answers; the tests
//! in `scan.rs` walk the same trees with both.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};

/// What a directory entry is, as far as the walk cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Dir,
    Symlink,
    /// A FIFO, socket or device (#18 item 11): never versioned.
    Special,
    /// Anything else (regular files, and what the walk treats like them).
    File,
}

/// What a special file is, in words (`None` for anything else).
pub fn special_kind(t: &std::fs::FileType) -> Option<&'static str> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return Some("a FIFO (named pipe)");
        }
        if t.is_socket() {
            return Some("a socket");
        }
        if t.is_char_device() || t.is_block_device() {
            return Some("a device");
        }
    }
    let _ = t;
    None
}

/// The facts of a stat that a fingerprint and a mode need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stat {
    pub size: u64,
    /// Whole seconds since the Unix epoch (0 with `mtime_ns` 0 for an
    /// mtime before it, as [`crate::records::fingerprint_of`] records).
    pub mtime_s: u64,
    pub mtime_ns: u32,
    /// The status-change time (ctime), where the reader has one.
    pub changed: Option<(u64, u32)>,
    pub executable: bool,
}

#[cfg_attr(target_os = "linux", allow(dead_code))]
impl Stat {
    /// From a `std` metadata (the portable reader and single paths).
    pub fn of(meta: &std::fs::Metadata) -> Stat {
        let fp = crate::records::fingerprint_of(meta, 0);
        Stat {
            size: fp.size,
            mtime_s: fp.mtime_s,
            mtime_ns: fp.mtime_ns,
            changed: fp.changed,
            executable: super::is_executable(meta),
        }
    }
}

/// Lists directories and stats their entries for the walk.
pub(crate) trait DirReader: Sync {
    /// An open directory.
    type Dir: Send + Sync;
    /// One directory's entries (without `.` and `..`).
    type Listing: Sync;
    /// Open the directory at `full`.
    fn open(&self, full: &Path) -> io::Result<Self::Dir>;
    /// The entries of `dir`, and the errors met while listing it.
    fn list(&self, dir: &Self::Dir) -> (Self::Listing, Vec<io::Error>);
    fn count(listing: &Self::Listing) -> usize;
    fn name(listing: &Self::Listing, i: usize) -> &OsStr;
    /// `None` when the entry's type cannot be learned (it is skipped).
    fn kind(listing: &Self::Listing, i: usize) -> Option<Kind>;
    /// Stat entry `i` of `dir` without following a symbolic link.
    fn stat(&self, dir: &Self::Dir, listing: &Self::Listing, i: usize) -> io::Result<Stat>;
}

/// The `std::fs` reader (on Linux only the tests use it, as the reference
/// the native reader is compared with).
#[cfg_attr(target_os = "linux", allow(dead_code))]
pub(crate) struct Portable;

impl DirReader for Portable {
    type Dir = PathBuf;
    type Listing = Vec<(std::fs::DirEntry, OsString, Option<Kind>)>;

    fn open(&self, full: &Path) -> io::Result<PathBuf> {
        Ok(full.to_path_buf())
    }

    fn list(&self, dir: &PathBuf) -> (Self::Listing, Vec<io::Error>) {
        let mut out = Vec::new();
        let mut errors = Vec::new();
        match std::fs::read_dir(dir) {
            Err(e) => errors.push(e),
            Ok(rd) => {
                for e in rd {
                    match e {
                        Err(e) => errors.push(e),
                        Ok(e) => {
                            let kind = e.file_type().ok().map(|t| {
                                if t.is_dir() {
                                    Kind::Dir
                                } else if t.is_symlink() {
                                    Kind::Symlink
                                } else if special_kind(&t).is_some() {
                                    Kind::Special
                                } else {
                                    Kind::File
                                }
                            });
                            let name = e.file_name();
                            out.push((e, name, kind));
                        }
                    }
                }
            }
        }
        (out, errors)
    }

    fn count(listing: &Self::Listing) -> usize {
        listing.len()
    }

    fn name(listing: &Self::Listing, i: usize) -> &OsStr {
        &listing[i].1
    }

    fn kind(listing: &Self::Listing, i: usize) -> Option<Kind> {
        listing[i].2
    }

    fn stat(&self, _dir: &PathBuf, listing: &Self::Listing, i: usize) -> io::Result<Stat> {
        listing[i].0.metadata().map(|m| Stat::of(&m))
    }
}

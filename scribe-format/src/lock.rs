//! `LOCK` files (section 7: the data root's and the auth directory's): an
//! exclusive OS lock (flock / LockFileEx, through std) on the file, which
//! holds `pid N\n` of its holder so a refused opener can name it.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::Path;

/// Why a `LOCK` could not be taken.
#[derive(Debug)]
pub enum LockError {
    /// Another process holds it; its pid when the file names one.
    Held { pid: Option<u32> },
    /// Opening, locking or writing the file failed.
    Io(std::io::Error),
}

/// Take the exclusive lock on `path` (created when absent) and record this
/// process's pid in it. The lock lasts as long as the returned file.
pub fn take(path: &Path) -> Result<File, LockError> {
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(LockError::Io)?;
    match f.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut s = String::new();
            let _ = f.read_to_string(&mut s);
            let pid = s
                .trim()
                .strip_prefix("pid ")
                .and_then(|p| p.parse::<u32>().ok());
            return Err(LockError::Held { pid });
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(LockError::Io(e)),
    }
    f.set_len(0)
        .and_then(|_| f.rewind())
        .and_then(|_| f.write_all(format!("pid {}\n", std::process::id()).as_bytes()))
        .and_then(|_| f.sync_all())
        .map_err(LockError::Io)?;
    Ok(f)
}

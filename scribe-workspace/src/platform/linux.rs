//! The Linux directory reader of the walk: each directory is opened, listed
//! with `getdents64` into one buffer per thread (names copied once into one
//! vector per directory, nothing allocated per entry), and each file is
//! `statx`'ed relative to its directory asking only for type, mode, size,
//! mtime and ctime (ext4 fills less than for std's `STATX_BASIC_STATS |
//! STATX_BTIME`). Where `statx` is not available (old kernels, some
//! sandboxes) `fstatat` answers the same fields.

use std::cell::RefCell;
use std::ffi::{CStr, OsStr};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RawDir, StatxFlags};

use super::walk::{DirReader, Kind, Stat};

/// The Linux reader.
pub(crate) struct Linux;

/// One directory's names, each followed by its NUL, and per entry where
/// its name starts, its length and its kind (`None`: unknown).
pub(crate) struct Listing {
    names: Vec<u8>,
    entries: Vec<(u32, u16, Option<Kind>)>,
}

impl Listing {
    fn c_name(&self, i: usize) -> &CStr {
        let (start, len, _) = self.entries[i];
        let start = start as usize;
        CStr::from_bytes_with_nul(&self.names[start..=start + usize::from(len)]).unwrap_or(c"")
    }
}

/// The getdents buffer size (glibc's `readdir` uses 32 KiB too).
const BUFFER: usize = 32 * 1024;

/// Set when `statx` answered `ENOSYS` / `EPERM` once: use `fstatat`.
static NO_STATX: AtomicBool = AtomicBool::new(false);

const MASK: StatxFlags = StatxFlags::TYPE
    .union(StatxFlags::MODE)
    .union(StatxFlags::SIZE)
    .union(StatxFlags::MTIME)
    .union(StatxFlags::CTIME);

fn kind_of_mode(mode: u32) -> Kind {
    match FileType::from_raw_mode(mode) {
        FileType::Directory => Kind::Dir,
        FileType::Symlink => Kind::Symlink,
        FileType::Fifo | FileType::Socket | FileType::CharacterDevice | FileType::BlockDevice => {
            Kind::Special
        }
        _ => Kind::File,
    }
}

fn time(sec: i64, nsec: u32) -> (u64, u32) {
    // As `fingerprint_of`: an mtime before the epoch records (0, 0).
    match u64::try_from(sec) {
        Ok(s) if nsec < 1_000_000_000 => (s, nsec),
        _ => (0, 0),
    }
}

/// Stat `name` in `dir` (not following a symbolic link): its kind and facts.
pub(crate) fn stat_at(dir: &OwnedFd, name: &CStr) -> io::Result<(Kind, Stat)> {
    if !NO_STATX.load(Ordering::Relaxed) {
        match rustix::fs::statx(dir, name, AtFlags::SYMLINK_NOFOLLOW, MASK) {
            Ok(st) => {
                let mode = u32::from(st.stx_mode);
                let (mtime_s, mtime_ns) = time(st.stx_mtime.tv_sec, st.stx_mtime.tv_nsec);
                let changed = (st.stx_mask & StatxFlags::CTIME.bits() != 0)
                    .then(|| time(st.stx_ctime.tv_sec, st.stx_ctime.tv_nsec))
                    .filter(|t| *t != (0, 0));
                return Ok((
                    kind_of_mode(mode),
                    Stat {
                        size: st.stx_size,
                        mtime_s,
                        mtime_ns,
                        changed,
                        executable: mode & 0o111 != 0,
                    },
                ));
            }
            Err(rustix::io::Errno::NOSYS) | Err(rustix::io::Errno::PERM) => {
                NO_STATX.store(true, Ordering::Relaxed);
            }
            Err(e) => return Err(e.into()),
        }
    }
    fstatat(dir, name)
}

/// [`stat_at`] through `fstatat` (no `statx`).
fn fstatat(dir: &OwnedFd, name: &CStr) -> io::Result<(Kind, Stat)> {
    let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    // The field types of `struct stat` differ between architectures.
    #[allow(clippy::useless_conversion)]
    let mode = u32::from(st.st_mode);
    #[allow(clippy::useless_conversion)]
    let (sec, nsec) = (
        i64::from(st.st_mtime),
        u32::try_from(st.st_mtime_nsec).unwrap_or(u32::MAX),
    );
    let (mtime_s, mtime_ns) = time(sec, nsec);
    #[allow(clippy::useless_conversion)]
    let changed = Some(time(
        i64::from(st.st_ctime),
        u32::try_from(st.st_ctime_nsec).unwrap_or(u32::MAX),
    ))
    .filter(|t| *t != (0, 0));
    #[allow(clippy::useless_conversion)]
    let size = u64::try_from(i64::from(st.st_size)).unwrap_or(0);
    Ok((
        kind_of_mode(mode),
        Stat {
            size,
            mtime_s,
            mtime_ns,
            changed,
            executable: mode & 0o111 != 0,
        },
    ))
}

thread_local! {
    static BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

impl DirReader for Linux {
    type Dir = OwnedFd;
    type Listing = Listing;

    fn open(&self, full: &Path) -> io::Result<OwnedFd> {
        Ok(rustix::fs::open(
            full,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?)
    }

    fn list(&self, dir: &OwnedFd) -> (Listing, Vec<io::Error>) {
        let mut out = Listing {
            names: Vec::with_capacity(2048),
            entries: Vec::with_capacity(64),
        };
        let mut errors = Vec::new();
        BUF.with(|cell| {
            let mut owned;
            let mut borrowed = cell.try_borrow_mut().ok();
            let buf: &mut Vec<u8> = match borrowed.as_deref_mut() {
                Some(b) => b,
                None => {
                    owned = Vec::new();
                    &mut owned
                }
            };
            if buf.capacity() < BUFFER {
                buf.reserve(BUFFER);
            }
            let mut iter = RawDir::new(dir, buf.spare_capacity_mut());
            while let Some(entry) = iter.next() {
                let entry = match entry {
                    Ok(e) => e,
                    Err(e) => {
                        errors.push(e.into());
                        break;
                    }
                };
                let name = entry.file_name().to_bytes();
                if name == b"." || name == b".." {
                    continue;
                }
                let (Ok(start), Ok(len)) =
                    (u32::try_from(out.names.len()), u16::try_from(name.len()))
                else {
                    errors.push(io::Error::other("directory listing too large"));
                    break;
                };
                let kind = match entry.file_type() {
                    FileType::Directory => Some(Kind::Dir),
                    FileType::Symlink => Some(Kind::Symlink),
                    FileType::Fifo
                    | FileType::Socket
                    | FileType::CharacterDevice
                    | FileType::BlockDevice => Some(Kind::Special),
                    FileType::Unknown => stat_at(dir, entry.file_name()).ok().map(|(k, _)| k),
                    _ => Some(Kind::File),
                };
                out.names.extend_from_slice(name);
                out.names.push(0);
                out.entries.push((start, len, kind));
            }
        });
        (out, errors)
    }

    fn count(listing: &Listing) -> usize {
        listing.entries.len()
    }

    fn name(listing: &Listing, i: usize) -> &OsStr {
        let (start, len, _) = listing.entries[i];
        let start = start as usize;
        OsStr::from_bytes(&listing.names[start..start + usize::from(len)])
    }

    fn kind(listing: &Listing, i: usize) -> Option<Kind> {
        listing.entries[i].2
    }

    fn stat(&self, dir: &OwnedFd, listing: &Listing, i: usize) -> io::Result<Stat> {
        stat_at(dir, listing.c_name(i)).map(|(_, s)| s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn statx_and_fstatat_agree_with_std() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::write(root.join("plain"), b"12345").unwrap();
        std::fs::write(root.join("tool"), b"#!").unwrap();
        std::fs::set_permissions(root.join("tool"), std::fs::Permissions::from_mode(0o750))
            .unwrap();
        std::fs::write(root.join("old"), b"").unwrap();
        let f = std::fs::File::options()
            .write(true)
            .open(root.join("old"))
            .unwrap();
        f.set_modified(UNIX_EPOCH + Duration::new(12, 345)).unwrap();
        std::fs::write(root.join("ancient"), b"a").unwrap();
        let f = std::fs::File::options()
            .write(true)
            .open(root.join("ancient"))
            .unwrap();
        f.set_modified(UNIX_EPOCH - Duration::from_secs(86_400))
            .ok();
        std::fs::create_dir(root.join("dir")).unwrap();
        std::os::unix::fs::symlink("plain", root.join("link")).unwrap();
        let fd = Linux.open(root).unwrap();
        for (name, kind) in [
            (c"plain", Kind::File),
            (c"tool", Kind::File),
            (c"old", Kind::File),
            (c"ancient", Kind::File),
            (c"dir", Kind::Dir),
            (c"link", Kind::Symlink),
        ] {
            let a = stat_at(&fd, name).unwrap();
            let b = fstatat(&fd, name).unwrap();
            assert_eq!(a, b, "{name:?}");
            assert_eq!(a.0, kind, "{name:?}");
            let meta = std::fs::symlink_metadata(root.join(name.to_str().unwrap())).unwrap();
            assert_eq!(a.1, Stat::of(&meta), "{name:?}");
        }
        assert_eq!(stat_at(&fd, c"old").unwrap().1.mtime_ns, 345);
        assert!(stat_at(&fd, c"tool").unwrap().1.executable);
        assert_eq!(stat_at(&fd, c"plain").unwrap().1.size, 5);
        assert!(stat_at(&fd, c"missing").is_err());
        assert!(fstatat(&fd, c"missing").is_err());
    }
}

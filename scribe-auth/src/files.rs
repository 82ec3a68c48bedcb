//! The files of an auth directory besides `auth.redb`: the `SCRIBE_AUTH`
//! marker, the `LOCK`, and — outside the directory — the pepper and the
//! revision witness.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::AuthError;
use crate::ids::Id;

/// The exact bytes of `SCRIBE_AUTH` at schema 4.
pub const MARKER: &str = "scribe-auth\nschema=4\nprotocol=2\npassword=argon2id-pepper-v1\n";
/// The marker file name.
pub const MARKER_FILE: &str = "SCRIBE_AUTH";
/// The lock file name.
pub const LOCK_FILE: &str = "LOCK";
/// The database file name.
pub const DATABASE_FILE: &str = "auth.redb";
/// Shortest pepper, in bytes.
pub const MIN_PEPPER_BYTES: usize = 32;
/// Longest pepper, in bytes.
pub const MAX_PEPPER_BYTES: usize = 1024;

/// Write `bytes` to `path` through a flushed `<path>.next` renamed over it,
/// then flush the parent directory.
pub fn replace_durably(path: &Path, bytes: &[u8]) -> Result<(), AuthError> {
    let next = next_path(path);
    write_flushed(&next, bytes)?;
    std::fs::rename(&next, path).map_err(|e| AuthError::io(path, e))?;
    sync_parent(path)
}

/// Like [`replace_durably`], but refuses when `path` exists (the final step
/// is a hard link, which never replaces a file).
pub fn create_durably(path: &Path, bytes: &[u8]) -> Result<(), AuthError> {
    let next = next_path(path);
    write_flushed(&next, bytes)?;
    let linked = std::fs::hard_link(&next, path);
    let _ = std::fs::remove_file(&next);
    match linked {
        Ok(()) => sync_parent(path),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(AuthError::WitnessExists {
            path: path.to_owned(),
        }),
        Err(e) => Err(AuthError::io(path, e)),
    }
}

fn next_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(".next");
    path.with_file_name(name)
}

fn write_flushed(path: &Path, bytes: &[u8]) -> Result<(), AuthError> {
    let mut f = File::create(path).map_err(|e| AuthError::io(path, e))?;
    f.write_all(bytes)
        .and_then(|_| f.sync_all())
        .map_err(|e| AuthError::io(path, e))
}

/// Flush the directory holding `path` (so a rename or creation survives a crash).
pub fn sync_parent(path: &Path) -> Result<(), AuthError> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    sync_dir(parent)
}

/// Flush a directory.
pub fn sync_dir(dir: &Path) -> Result<(), AuthError> {
    #[cfg(unix)]
    {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| AuthError::io(dir, e))?;
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Write the marker last, through a flushed `SCRIBE_AUTH.next`.
pub fn write_marker(dir: &Path) -> Result<(), AuthError> {
    replace_durably(&dir.join(MARKER_FILE), MARKER.as_bytes())
}

/// Check the marker: exactly schema 4; schema 3 asks for `migrate`.
pub fn check_marker(dir: &Path) -> Result<(), AuthError> {
    let path = dir.join(MARKER_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(AuthError::NotAnAuthDirectory {
                path: dir.to_owned(),
            })
        }
        Err(e) => return Err(AuthError::io(&path, e)),
    };
    if bytes == MARKER.as_bytes() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(256)]).into_owned();
    if text.starts_with("scribe-auth\n") && text.lines().any(|l| l.trim_end() == "schema=3") {
        return Err(AuthError::NeedsMigration {
            path: dir.to_owned(),
        });
    }
    Err(AuthError::UnsupportedMarker {
        path: path.clone(),
        found: text,
    })
}

/// The exclusive OS lock on `<dir>/LOCK` (flock on Unix, LockFileEx on
/// Windows, through `std::fs::File::try_lock`), held while this value
/// lives. The file records the holder's pid for the error message.
pub struct DirLock {
    _file: File,
}

impl DirLock {
    pub fn take(dir: &Path) -> Result<DirLock, AuthError> {
        let path = dir.join(LOCK_FILE);
        let f = scribe_format::lock::take(&path).map_err(|e| match e {
            scribe_format::lock::LockError::Held { pid } => AuthError::Locked {
                path: dir.to_owned(),
                pid,
            },
            scribe_format::lock::LockError::Io(e) => AuthError::io(&path, e),
        })?;
        Ok(DirLock { _file: f })
    }
}

/// The password pepper: the exact bytes of the pepper file (32 to 1,024).
pub struct Pepper(Vec<u8>);

impl std::fmt::Debug for Pepper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pepper(<redacted>)")
    }
}

impl Drop for Pepper {
    fn drop(&mut self) {
        self.0.fill(0);
    }
}

/// Refuse a secret file other users may read or write (mode `o+r` or
/// `o+w`); owner and group permissions are the operator's choice.
#[cfg(unix)]
pub fn check_private(path: &Path, meta: &std::fs::Metadata) -> Result<(), AuthError> {
    use std::os::unix::fs::PermissionsExt;
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o006 != 0 {
        return Err(AuthError::PepperExposed {
            path: path.to_owned(),
            mode,
        });
    }
    Ok(())
}

impl Pepper {
    /// Read an existing pepper file.
    /// On Unix a file other users may read or write is refused
    /// ([`AuthError::PepperExposed`]; its group may read it).
    pub fn read(path: &Path) -> Result<Pepper, AuthError> {
        let mut f = std::fs::File::open(path).map_err(|e| AuthError::io(path, e))?;
        #[cfg(unix)]
        {
            let meta = f.metadata().map_err(|e| AuthError::io(path, e))?;
            check_private(path, &meta)?;
        }
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut bytes).map_err(|e| AuthError::io(path, e))?;
        if bytes.len() < MIN_PEPPER_BYTES || bytes.len() > MAX_PEPPER_BYTES {
            return Err(AuthError::PepperInvalid {
                path: path.to_owned(),
                reason: format!(
                    "{} bytes; a pepper is {MIN_PEPPER_BYTES} to {MAX_PEPPER_BYTES} bytes",
                    bytes.len()
                ),
            });
        }
        Ok(Pepper(bytes))
    }

    /// Read the pepper file, or create it (64 lowercase hex digits of 32
    /// random bytes and a newline, readable only by the owner) if absent.
    pub fn read_or_create(path: &Path) -> Result<Pepper, AuthError> {
        if path.exists() {
            return Pepper::read(path);
        }
        let mut raw = [0u8; 32];
        getrandom::fill(&mut raw).expect("the OS random source is available");
        let text = format!("{}\n", hex::encode(raw));
        raw.fill(0);
        let mut opts = OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
        let mut f = opts.open(path).map_err(|e| AuthError::io(path, e))?;
        f.write_all(text.as_bytes())
            .and_then(|_| f.sync_all())
            .map_err(|e| AuthError::io(path, e))?;
        sync_parent(path)?;
        Ok(Pepper(text.into_bytes()))
    }

    /// `meta/pepper-id`: BLAKE3 of the pepper bytes.
    pub fn id(&self) -> [u8; 32] {
        *blake3::hash(&self.0).as_bytes()
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
    }
}

/// The revision witness: `<incarnation as 32 lowercase hex> <revision in decimal>\n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Witness {
    pub incarnation: Id,
    pub revision: u64,
}

impl Witness {
    /// The exact text.
    pub fn text(&self) -> String {
        format!("{} {}\n", self.incarnation.hex(), self.revision)
    }

    /// Parse the exact text, refusing anything else.
    pub fn parse(bytes: &[u8]) -> Result<Witness, String> {
        let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_owned())?;
        let body = text
            .strip_suffix('\n')
            .ok_or_else(|| "does not end with a newline".to_owned())?;
        let (inc, rev) = body
            .split_once(' ')
            .ok_or_else(|| "expected `<32 hex> <decimal>`".to_owned())?;
        let incarnation = Id::parse(inc).map_err(|e| e.to_string())?;
        let revision =
            crate::rows::parse_u64("witness revision", rev).map_err(|e| e.to_string())?;
        Ok(Witness {
            incarnation,
            revision,
        })
    }

    /// Read a witness file; `None` when it does not exist.
    pub fn read(path: &Path) -> Result<Option<Witness>, AuthError> {
        match std::fs::read(path) {
            Ok(bytes) => {
                Witness::parse(&bytes)
                    .map(Some)
                    .map_err(|reason| AuthError::WitnessMalformed {
                        path: path.to_owned(),
                        reason,
                    })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(AuthError::io(path, e)),
        }
    }

    /// Rewrite through a flushed `<witness>.next` renamed over it.
    pub fn write(&self, path: &Path) -> Result<(), AuthError> {
        replace_durably(path, self.text().as_bytes())
    }

    /// Create, refusing an existing file.
    pub fn create(&self, path: &Path) -> Result<(), AuthError> {
        create_durably(path, self.text().as_bytes())
    }
}

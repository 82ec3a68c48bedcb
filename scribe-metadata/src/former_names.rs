//! `<data>/former-names`: the names repositories had before a rename
//! (`scribe-server repo rename`), so that an old name is not given to
//! another repository by mistake while workspaces made before the rename
//! still ask for it (docs/deploy.md "Renaming and deleting a
//! repository").
//!
//! Not a specified byte: the catalog (section 7.1) has no place for it, so
//! it is a small text file of the data root beside `deleted/`, written
//! whole through a flushed temporary renamed into place:
//!
//! ```text
//! scribe-former-names 1
//! <repository id, 32 hex> <unix ms of the rename> <former name>
//! ```
//!
//! A name is the rest of its line (repository names hold no control
//! characters). A file that does not read so is refused by name, with the
//! line, never guessed at. A tiered server ships these bytes ([`encode`])
//! to its bucket and `restore --from-tier` reads them back ([`decode`]).

use std::path::Path;

use scribe_format::RepositoryId;

use crate::database_descriptor::sync_dir;
use crate::error::{MetadataError, Result};

/// The file's name in the data root.
pub const FILE: &str = "former-names";

/// Its first line.
const HEADER: &str = "scribe-former-names 1";

/// The most bytes read of the file (a line is at most ~180 bytes; this
/// is ample for thousands of renames).
const MAX_BYTES: u64 = 16 << 20;

/// A name repository `id` had until `renamed_ms`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormerName {
    pub id: RepositoryId,
    pub renamed_ms: u64,
    pub name: String,
}

/// The former names recorded in data root `data` (none when the file is
/// absent).
pub fn read(data: &Path) -> Result<Vec<FormerName>> {
    let path = data.join(FILE);
    let bytes = match std::fs::File::open(&path) {
        Ok(f) => {
            use std::io::Read;
            let mut bytes = Vec::new();
            f.take(MAX_BYTES + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| MetadataError::io(&path, e))?;
            bytes
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(MetadataError::io(&path, e)),
    };
    decode(&bytes, &path.display().to_string())
}

/// The former names `bytes` (the file's bytes, from wherever: the data
/// root or a copy in the bucket) hold; `what` names them in a refusal.
pub fn decode(bytes: &[u8], what: &str) -> Result<Vec<FormerName>> {
    if bytes.len() as u64 > MAX_BYTES {
        return Err(MetadataError::corrupt(format!(
            "{what} is over {MAX_BYTES} bytes: not one scribe-server wrote"
        )));
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|_| MetadataError::corrupt(format!("{what} is not UTF-8")))?;
    let bad = |n: usize, why: &str| {
        MetadataError::corrupt(format!(
            "{what} line {n}: {why} (expected `{HEADER}`, then `<id hex> <unix ms> <name>` lines; \
             fix or remove the line: it only guards old names against reuse)"
        ))
    };
    let mut lines = text.lines();
    if lines.next() != Some(HEADER) {
        return Err(bad(1, "not a former-names file of this version"));
    }
    let mut out = Vec::new();
    for (i, line) in lines.enumerate() {
        let n = i + 2;
        if line.is_empty() {
            continue;
        }
        let mut parts = line.splitn(3, ' ');
        let (Some(id), Some(ms), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(bad(n, "fewer than three fields"));
        };
        let id = RepositoryId::from_hex(id).map_err(|_| bad(n, "not a repository id"))?;
        let renamed_ms = ms
            .parse::<u64>()
            .map_err(|_| bad(n, "not a time in unix ms"))?;
        if !scribe_format::limits::is_repository_name(name) {
            return Err(bad(n, "not a repository name"));
        }
        out.push(FormerName {
            id,
            renamed_ms,
            name: name.to_owned(),
        });
    }
    Ok(out)
}

/// The file's bytes for `names` (the header alone for none: what an
/// absent file means).
pub fn encode(names: &[FormerName]) -> Vec<u8> {
    let mut text = format!("{HEADER}\n");
    for f in names {
        text.push_str(&format!("{} {} {}\n", f.id.to_hex(), f.renamed_ms, f.name));
    }
    text.into_bytes()
}

/// Replace the file with `names` (removing it when there are none).
pub fn write(data: &Path, names: &[FormerName]) -> Result<()> {
    let path = data.join(FILE);
    if names.is_empty() {
        return match std::fs::remove_file(&path) {
            Ok(()) => sync_dir(data),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(MetadataError::io(&path, e)),
        };
    }
    crate::backup::write_atomically(&path, &encode(names))
}

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

use crate::error::{MetadataError, Result};
use crate::id_lines;

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
    match id_lines::read(data, FILE, MAX_BYTES)? {
        Some(bytes) => decode(&bytes, &data.join(FILE).display().to_string()),
        None => Ok(Vec::new()),
    }
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
    let lines = id_lines::parse(
        text,
        HEADER,
        "not a former-names file of this version",
        true,
        &bad,
    )?;
    let mut out = Vec::with_capacity(lines.len());
    for l in lines {
        let name = l.rest.unwrap_or_default();
        if !scribe_format::limits::is_repository_name(name) {
            return Err(bad(l.n, "not a repository name"));
        }
        out.push(FormerName {
            id: l.id,
            renamed_ms: l.ms,
            name: name.to_owned(),
        });
    }
    Ok(out)
}

/// The file's bytes for `names` (the header alone for none: what an
/// absent file means).
pub fn encode(names: &[FormerName]) -> Vec<u8> {
    id_lines::encode(
        HEADER,
        names.iter().map(|f| (f.id, f.renamed_ms, f.name.as_str())),
    )
}

/// Replace the file with `names` (removing it when there are none).
pub fn write(data: &Path, names: &[FormerName]) -> Result<()> {
    id_lines::write(
        data,
        FILE,
        (!names.is_empty()).then(|| encode(names)).as_deref(),
    )
}

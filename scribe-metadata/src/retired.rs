//! `<data>/retired-repositories`: repositories kept but read-only
//! (`scribe-server repo retire NAME`): syncs, reads and history work;
//! submits, locks and every other write are refused with
//! `repository_retired`, naming whom to ask (docs/deploy.md "Retiring a
//! repository").
//!
//! Not a specified byte: the catalog's `repos` row (section 7.1) has a
//! state of `creating` or `ready` only, so a retirement is a small text
//! file of the data root, keyed by repository id (a rename keeps it),
//! written whole through a flushed temporary renamed into place:
//!
//! ```text
//! scribe-retired-repositories 1
//! <repository id, 32 hex> <unix ms retired> <whom to ask, may be empty>
//! ```
//!
//! A file that does not read so stops the data root's opening, named with
//! its line: a retirement is never silently dropped (that would let
//! writes in). A tiered server ships these bytes ([`encode`]) to its
//! bucket and `restore --from-tier` reads them back ([`decode`]); a
//! repository deleted takes its line with it
//! (`DataRoot::delete_repository`).

use std::io::Read;
use std::path::Path;

use scribe_format::RepositoryId;

use crate::database_descriptor::sync_dir;
use crate::error::{MetadataError, Result};

/// The file's name in the data root.
pub const FILE: &str = "retired-repositories";

const HEADER: &str = "scribe-retired-repositories 1";

/// The most bytes whom-to-ask may hold.
pub const MAX_CONTACT_BYTES: usize = 200;

const MAX_BYTES: u64 = 16 << 20;

/// A retired repository.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Retired {
    pub id: RepositoryId,
    pub retired_ms: u64,
    /// Whom to ask to bring it back (empty: the server's operator).
    pub contact: String,
}

/// Whether `contact` may be stored: at most [`MAX_CONTACT_BYTES`], no
/// control characters (it is one line, shown to users).
pub fn valid_contact(contact: &str) -> bool {
    contact.len() <= MAX_CONTACT_BYTES && !contact.chars().any(char::is_control)
}

/// The retirements recorded in `data` (none when the file is absent).
pub fn read(data: &Path) -> Result<Vec<Retired>> {
    let path = data.join(FILE);
    let f = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(MetadataError::io(&path, e)),
    };
    let mut bytes = Vec::new();
    f.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| MetadataError::io(&path, e))?;
    decode(&bytes, &path.display().to_string())
}

/// The retirements `bytes` (the file's bytes, from wherever: the data
/// root or a copy in the bucket) hold; `what` names them in a refusal.
pub fn decode(bytes: &[u8], what: &str) -> Result<Vec<Retired>> {
    let bad = |n: usize, why: &str| {
        MetadataError::corrupt(format!(
            "{what} line {n}: {why} (expected `{HEADER}`, then `<id hex> <unix ms> <whom to ask>` \
             lines; fix the line, or `scribe-server repo unretire` once it reads)"
        ))
    };
    if bytes.len() as u64 > MAX_BYTES {
        return Err(bad(
            1,
            "the file is too large to be one scribe-server wrote",
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| bad(1, "not UTF-8"))?;
    let mut lines = text.lines();
    if lines.next() != Some(HEADER) {
        return Err(bad(1, "not a retired-repositories file of this version"));
    }
    let mut out = Vec::new();
    for (i, line) in lines.enumerate() {
        let n = i + 2;
        if line.is_empty() {
            continue;
        }
        let mut parts = line.splitn(3, ' ');
        let (Some(id), Some(ms)) = (parts.next(), parts.next()) else {
            return Err(bad(n, "fewer than two fields"));
        };
        let contact = parts.next().unwrap_or("");
        let id = RepositoryId::from_hex(id).map_err(|_| bad(n, "not a repository id"))?;
        let retired_ms = ms
            .parse::<u64>()
            .map_err(|_| bad(n, "not a time in unix ms"))?;
        if !valid_contact(contact) {
            return Err(bad(
                n,
                "whom to ask is too long or holds control characters",
            ));
        }
        out.push(Retired {
            id,
            retired_ms,
            contact: contact.to_owned(),
        });
    }
    Ok(out)
}

/// The file's bytes for `all` (the header alone for none: what an absent
/// file means).
pub fn encode(all: &[Retired]) -> Vec<u8> {
    let mut text = format!("{HEADER}\n");
    for r in all {
        text.push_str(&format!(
            "{} {} {}\n",
            r.id.to_hex(),
            r.retired_ms,
            r.contact
        ));
    }
    text.into_bytes()
}

/// Replace the file with `all` (removing it when there are none).
pub fn write(data: &Path, all: &[Retired]) -> Result<()> {
    let path = data.join(FILE);
    if all.is_empty() {
        return match std::fs::remove_file(&path) {
            Ok(()) => sync_dir(data),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(MetadataError::io(&path, e)),
        };
    }
    crate::backup::write_atomically(&path, &encode(all))
}

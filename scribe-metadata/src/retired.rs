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

use std::path::Path;

use scribe_format::RepositoryId;

use crate::error::{MetadataError, Result};
use crate::id_lines;

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
    match id_lines::read(data, FILE, MAX_BYTES)? {
        Some(bytes) => decode(&bytes, &data.join(FILE).display().to_string()),
        None => Ok(Vec::new()),
    }
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
    let lines = id_lines::parse(
        text,
        HEADER,
        "not a retired-repositories file of this version",
        false,
        &bad,
    )?;
    let mut out = Vec::with_capacity(lines.len());
    for l in lines {
        let contact = l.rest.unwrap_or("");
        if !valid_contact(contact) {
            return Err(bad(
                l.n,
                "whom to ask is too long or holds control characters",
            ));
        }
        out.push(Retired {
            id: l.id,
            retired_ms: l.ms,
            contact: contact.to_owned(),
        });
    }
    Ok(out)
}

/// The file's bytes for `all` (the header alone for none: what an absent
/// file means).
pub fn encode(all: &[Retired]) -> Vec<u8> {
    id_lines::encode(
        HEADER,
        all.iter().map(|r| (r.id, r.retired_ms, r.contact.as_str())),
    )
}

/// Replace the file with `all` (removing it when there are none).
pub fn write(data: &Path, all: &[Retired]) -> Result<()> {
    id_lines::write(
        data,
        FILE,
        (!all.is_empty()).then(|| encode(all)).as_deref(),
    )
}

//! The frame shared by the data root's small text files keyed by
//! repository id (`former-names`, `retired-repositories`): a version
//! header line, then `<repository id, 32 hex> <unix ms> <rest>` lines,
//! read with a size bound, written whole through a flushed temporary
//! renamed into place, removed when it holds no line.

use std::io::Read;
use std::path::Path;

use scribe_format::RepositoryId;

use crate::database_descriptor::sync_dir;
use crate::error::{MetadataError, Result};

/// One line after the header: its line number (the header is line 1),
/// id, time and the rest (`None` when the line has only two fields).
pub(crate) struct Line<'a> {
    pub n: usize,
    pub id: RepositoryId,
    pub ms: u64,
    pub rest: Option<&'a str>,
}

/// The bytes of `data/file`, at most `max + 1` of them (the caller's
/// decoder refuses more); `None` when the file is absent.
pub(crate) fn read(data: &Path, file: &str, max: u64) -> Result<Option<Vec<u8>>> {
    let path = data.join(file);
    let f = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(MetadataError::io(&path, e)),
    };
    let mut bytes = Vec::new();
    f.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| MetadataError::io(&path, e))?;
    Ok(Some(bytes))
}

/// The lines of `text` after `header` (empty lines skipped); `bad(n,
/// why)` names a refusal of line `n`. `header_why` is said of a first
/// line that is not `header`; with `rest_required` a line of two fields
/// is refused.
pub(crate) fn parse<'a>(
    text: &'a str,
    header: &str,
    header_why: &str,
    rest_required: bool,
    bad: &dyn Fn(usize, &str) -> MetadataError,
) -> Result<Vec<Line<'a>>> {
    let mut lines = text.lines();
    if lines.next() != Some(header) {
        return Err(bad(1, header_why));
    }
    let mut out = Vec::new();
    for (i, line) in lines.enumerate() {
        let n = i + 2;
        if line.is_empty() {
            continue;
        }
        let mut parts = line.splitn(3, ' ');
        let (Some(id), Some(ms), rest) = (parts.next(), parts.next(), parts.next()) else {
            return Err(bad(n, "fewer than two fields"));
        };
        if rest_required && rest.is_none() {
            return Err(bad(n, "fewer than three fields"));
        }
        let id = RepositoryId::from_hex(id).map_err(|_| bad(n, "not a repository id"))?;
        let ms = ms
            .parse::<u64>()
            .map_err(|_| bad(n, "not a time in unix ms"))?;
        out.push(Line { n, id, ms, rest });
    }
    Ok(out)
}

/// The file's bytes: `header`, then one `<id hex> <ms> <rest>` line per
/// entry (the header alone for none: what an absent file means).
pub(crate) fn encode<'a>(
    header: &str,
    lines: impl IntoIterator<Item = (RepositoryId, u64, &'a str)>,
) -> Vec<u8> {
    let mut text = format!("{header}\n");
    for (id, ms, rest) in lines {
        text.push_str(&format!("{} {ms} {rest}\n", id.to_hex()));
    }
    text.into_bytes()
}

/// Replace `data/file` with `bytes`, or remove it when `bytes` is `None`
/// (an absent file is the same as one without lines).
pub(crate) fn write(data: &Path, file: &str, bytes: Option<&[u8]>) -> Result<()> {
    let path = data.join(file);
    match bytes {
        Some(b) => crate::backup::write_atomically(&path, b),
        None => match std::fs::remove_file(&path) {
            Ok(()) => sync_dir(data),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(MetadataError::io(&path, e)),
        },
    }
}

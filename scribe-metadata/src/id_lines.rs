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

#[cfg(test)]
mod tests {
    use crate::former_names::{self, FormerName};
    use crate::retired::{self, Retired};
    use scribe_format::RepositoryId;

    fn refusal<T: std::fmt::Debug>(r: crate::error::Result<T>) -> String {
        r.expect_err("refused").to_string()
    }

    #[test]
    fn both_files_round_trip_and_refuse_each_bad_line_by_number() {
        let id = RepositoryId([7; 16]);
        let names = vec![FormerName {
            id,
            renamed_ms: 5,
            name: "old-game".into(),
        }];
        let bytes = former_names::encode(&names);
        assert_eq!(former_names::decode(&bytes, "f").unwrap(), names);
        let all = vec![Retired {
            id,
            retired_ms: 9,
            contact: String::new(),
        }];
        assert_eq!(retired::decode(&retired::encode(&all), "r").unwrap(), all);
        let hex = id.to_hex();
        for (text, said) in [
            (
                "scribe-former-names 2\n".to_string(),
                "f line 1: not a former-names file",
            ),
            (
                format!("scribe-former-names 1\n{hex} 5\n"),
                "f line 2: fewer than three fields",
            ),
            (
                "scribe-former-names 1\n\nzz 5 a\n".to_string(),
                "f line 3: not a repository id",
            ),
            (
                format!("scribe-former-names 1\n{hex} x a\n"),
                "f line 2: not a time",
            ),
            (
                format!("scribe-former-names 1\n{hex} 5 \n"),
                "f line 2: not a repository name",
            ),
        ] {
            let got = refusal(former_names::decode(text.as_bytes(), "f"));
            assert!(got.contains(said), "{text:?}: {got}");
        }
        for (text, said) in [
            (
                format!("scribe-retired-repositories 1\n{hex}\n"),
                "r line 2: fewer than two fields",
            ),
            (
                format!("scribe-retired-repositories 1\n{hex} 1 a\u{7}\n"),
                "r line 2: whom to ask",
            ),
        ] {
            let got = refusal(retired::decode(text.as_bytes(), "r"));
            assert!(got.contains(said), "{text:?}: {got}");
        }
        assert!(refusal(former_names::decode(&[0xff], "f")).contains("f is not UTF-8"));
        assert!(
            refusal(retired::decode(b"scribe-retired-repositories 1\n\xff", "r"))
                .contains("r line 1: not UTF-8")
        );
    }

    #[test]
    fn a_file_without_lines_is_removed_and_reads_as_none() {
        let dir = tempfile::tempdir().unwrap();
        let id = RepositoryId([3; 16]);
        let all = vec![Retired {
            id,
            retired_ms: 1,
            contact: "ops".into(),
        }];
        retired::write(dir.path(), &all).unwrap();
        assert_eq!(retired::read(dir.path()).unwrap(), all);
        retired::write(dir.path(), &[]).unwrap();
        assert!(!dir.path().join(retired::FILE).exists());
        assert!(retired::read(dir.path()).unwrap().is_empty());
        assert!(former_names::read(dir.path()).unwrap().is_empty());
    }
}

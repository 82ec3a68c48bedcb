//! What the server did with a path whose sync was deferred because the
//! server removed it: removed it, or *moved* it (its removing change adds
//! the file elsewhere with this path as its move source).
//!
//! `sync` learns it from the removing change (the delta's tombstone names
//! it; one `Describe` of that change names the destination) and records it
//! here, in `meta["their-move:<path>"]` (an extension of the section 9
//! `meta` keys, like `last-submit`):
//!
//! ```text
//! u8 1
//! u64 removing change
//! u8 moved (0 removed, 1 moved)
//! (str16 destination path)      only when moved
//! ```
//!
//! so that `resolve --ours` can follow the move (or know there is none)
//! without asking the server again: the record describes the very change
//! the sync applied, whose `Describe` never changes. A record is only a
//! shortcut: it is used while its path is still deferred as a removal
//! with a base older than the removing change ([`recorded`]); it goes when
//! the deferred row goes or gets a target (`StateWrite::remove_deferred`,
//! `put_deferred`); one that does not decode is ignored, and without one
//! `resolve --ours` asks the server as before.

use scribe_format::bytes::{Put, Reader};
use scribe_format::FormatError;

use crate::error::Result;
use crate::state::Workspace;

/// Prefix of `meta["their-move:<path>"]`.
pub const KEY_PREFIX: &str = "their-move:";

/// The `meta` key of `path`'s record.
pub fn key(path: &str) -> String {
    format!("{KEY_PREFIX}{path}")
}

/// How the server removed a deferred path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TheirRemoval {
    /// The change that removed the path.
    pub change: u64,
    /// Where that change moved the file, if it moved it.
    pub moved_to: Option<String>,
}

impl TheirRemoval {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.put_u8(1);
        out.put_u64(self.change);
        match &self.moved_to {
            None => out.put_u8(0),
            Some(to) => {
                out.put_u8(1);
                out.put_bytes16(to.as_bytes());
            }
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> std::result::Result<Self, FormatError> {
        let mut r = Reader::new(bytes);
        let v = r.u8("their-move version")?;
        if v != 1 {
            return Err(FormatError::UnsupportedVersion {
                what: "their-move record",
                version: v.into(),
            });
        }
        let change = r.u64("their-move change")?;
        let moved_to = if r.flag("their-move moved")? {
            let to = r.str16(
                "their-move destination",
                scribe_format::limits::MAX_PATH_BYTES,
            )?;
            scribe_format::path::validate_file_path(to).map_err(|e| FormatError::Invalid {
                what: "their-move destination",
                reason: e.to_string(),
            })?;
            Some(to.to_string())
        } else {
            None
        };
        r.finish("their-move record")?;
        Ok(TheirRemoval { change, moved_to })
    }
}

/// Record, in one transaction, how the server removed each of `rows`'
/// paths. A path no longer deferred as a removal is skipped (nothing
/// would ever clear its record).
pub fn record(ws: &Workspace, rows: &[(String, TheirRemoval)]) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let tx = ws.write()?;
    let deferred: std::collections::HashMap<String, bool> = tx
        .deferred_all()?
        .into_iter()
        .map(|(p, e)| (p, e.target.is_none()))
        .collect();
    for (path, how) in rows {
        if deferred.get(path) == Some(&true) {
            tx.put_meta_bytes(&key(path), &how.encode())?;
        }
    }
    tx.commit()
}

/// The recorded removal of `path`, when it still describes it: the path
/// is deferred as a removal and its base is older than the removing
/// change. `None` otherwise (or when the record does not decode).
pub fn recorded(ws: &Workspace, path: &str) -> Result<Option<TheirRemoval>> {
    let read = ws.read()?;
    let Some(bytes) = read.meta_bytes(&key(path))? else {
        return Ok(None);
    };
    let Ok(how) = TheirRemoval::decode(&bytes) else {
        return Ok(None);
    };
    let removal = read
        .deferred_all()?
        .into_iter()
        .any(|(p, e)| p == path && e.target.is_none());
    let older = read.baseline(path)?.is_some_and(|b| b.change < how.change);
    Ok((removal && older).then_some(how))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_rejects_damage() {
        for how in [
            TheirRemoval {
                change: 7,
                moved_to: None,
            },
            TheirRemoval {
                change: u64::MAX,
                moved_to: Some("world/tree.fbx".into()),
            },
        ] {
            let bytes = how.encode();
            assert_eq!(TheirRemoval::decode(&bytes).unwrap(), how);
            for n in 0..bytes.len() {
                assert!(TheirRemoval::decode(&bytes[..n]).is_err(), "{n}");
            }
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(TheirRemoval::decode(&longer).is_err());
        }
        let mut bad = TheirRemoval {
            change: 1,
            moved_to: Some("../x".into()),
        }
        .encode();
        assert!(TheirRemoval::decode(&bad).is_err());
        bad[0] = 2;
        assert!(TheirRemoval::decode(&bad).is_err());
    }
}

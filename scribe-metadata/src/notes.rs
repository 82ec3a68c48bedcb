//! Change notes (section 8 `change_notes`): an append-only journal of
//! edited descriptions overlaying commit messages.
//!
//! Key `ordered u64 change ‖ ordered u32 revision`; value `u8 1 ‖ str16
//! author ‖ u64 edited ms ‖ str32 text`. A change's revisions are numbered
//! from 1 without gaps; the highest is the current description; at most
//! [`MAX_CHANGE_NOTE_REVISIONS`]. Commit records and identities are never
//! touched.

use redb::{ReadableDatabase, ReadableTable};
use scribe_format::bytes::{Put, Reader};
use scribe_format::limits::{MAX_AUTHOR_BYTES, MAX_MESSAGE_BYTES};
use scribe_format::{ErrorCode, FormatError};

use crate::clock::now_ms;
use crate::error::{MetadataError, Result};
use crate::records::RepoMeta;
use crate::repo::Repository;
use crate::tables::{self, meta};

/// Most revisions of one change's description.
pub const MAX_CHANGE_NOTE_REVISIONS: u32 = 1024;

/// One revision of a change's description.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangeNote {
    pub revision: u32,
    pub author: String,
    pub edited_ms: u64,
    pub text: String,
}

/// `ordered u64 change ‖ ordered u32 revision`.
pub fn note_key(change: u64, revision: u32) -> [u8; 12] {
    let mut k = [0u8; 12];
    k[..8].copy_from_slice(&change.to_be_bytes());
    k[8..].copy_from_slice(&revision.to_be_bytes());
    k
}

fn encode(author: &str, edited_ms: u64, text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(15 + author.len() + text.len());
    out.put_u8(1);
    out.put_bytes16(author.as_bytes());
    out.put_u64(edited_ms);
    out.put_bytes32(text.as_bytes());
    out
}

/// Decode a `change_notes` row.
pub fn decode_note(key: &[u8], value: &[u8]) -> Result<(u64, ChangeNote), FormatError> {
    if key.len() != 12 {
        return Err(FormatError::invalid("change note key", "a key is 12 bytes"));
    }
    let change = u64::from_be_bytes(key[..8].try_into().unwrap_or_default());
    let revision = u32::from_be_bytes(key[8..].try_into().unwrap_or_default());
    let mut r = Reader::new(value);
    let v = r.u8("change note version")?;
    if v != 1 {
        return Err(FormatError::UnsupportedVersion {
            what: "change note",
            version: v.into(),
        });
    }
    let author = r.str16("change note.author", MAX_AUTHOR_BYTES)?.to_owned();
    let edited_ms = r.u64("change note.edited ms")?;
    let text = r.str32("change note.text", MAX_MESSAGE_BYTES)?.to_owned();
    r.finish("change note")?;
    Ok((
        change,
        ChangeNote {
            revision,
            author,
            edited_ms,
            text,
        },
    ))
}

impl Repository {
    /// Append a new description of accepted `change`; returns its revision.
    pub fn add_change_note(&self, change: u64, author: &str, text: &str) -> Result<u32> {
        if author.len() > MAX_AUTHOR_BYTES || text.len() > MAX_MESSAGE_BYTES {
            return Err(MetadataError::refused(
                ErrorCode::LimitExceeded,
                "author ≤ 256 bytes, text ≤ 65,536 bytes",
            ));
        }
        let _gate = self
            .gate
            .lock()
            .map_err(|_| MetadataError::Gate("publication gate poisoned".into()))?;
        let wtx = self.write()?;
        let revision = {
            let m = wtx.open_table(tables::META)?;
            let head = RepoMeta::decode(
                m.get(meta::REPO_META)?
                    .ok_or_else(|| MetadataError::corrupt("no repo-meta"))?
                    .value(),
            )?
            .head;
            let commits = wtx.open_table(tables::COMMITS)?;
            if change == 0 || change > head || commits.get(change)?.is_none() {
                return Err(MetadataError::refused(
                    ErrorCode::NotFound,
                    format!("no change {change}"),
                ));
            }
            let mut notes = wtx.open_table(tables::CHANGE_NOTES)?;
            let lo = note_key(change, 0);
            let hi = note_key(change, u32::MAX);
            let last = match notes.range(lo.as_slice()..=hi.as_slice())?.next_back() {
                Some(row) => {
                    let (k, v) = row?;
                    decode_note(k.value(), v.value())?.1.revision
                }
                None => 0,
            };
            let revision = last + 1;
            if revision > MAX_CHANGE_NOTE_REVISIONS {
                return Err(MetadataError::refused(
                    ErrorCode::LimitExceeded,
                    format!(
                        "change {change} has {MAX_CHANGE_NOTE_REVISIONS} description revisions"
                    ),
                ));
            }
            notes.insert(
                note_key(change, revision).as_slice(),
                encode(author, now_ms(), text).as_slice(),
            )?;
            revision
        };
        wtx.commit()?;
        Ok(revision)
    }

    /// Every description revision of `change`, oldest first.
    pub fn change_notes(&self, change: u64) -> Result<Vec<ChangeNote>> {
        let tx = self.db.begin_read()?;
        let notes = tx.open_table(tables::CHANGE_NOTES)?;
        let lo = note_key(change, 0);
        let hi = note_key(change, u32::MAX);
        let mut out = Vec::new();
        for row in notes.range(lo.as_slice()..=hi.as_slice())? {
            let (k, v) = row?;
            out.push(decode_note(k.value(), v.value())?.1);
        }
        Ok(out)
    }
}

//! Looking at content (#18 "looking at content"): a file's bytes at a
//! change or as this workspace has it (`print`, `resolve --show`), and the
//! two sides a `diff` compares.

use std::io::Write;

use scribe_format::wire::message as m;
use scribe_format::{ErrorCode, FileContentId, ManifestId};

use crate::error::{Error, Result};
use crate::link::ServerLink;
use crate::workflow::Opened;

/// Which revision of a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rev {
    /// The revision this workspace has (its baseline).
    Have,
    /// The path as of this change of the branch (0: the head).
    Change(u64),
}

/// One revision of a file: what identifies and sizes its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Revision {
    /// The change that produced it.
    pub change: u64,
    pub manifest: ManifestId,
    pub content: FileContentId,
    pub size: u64,
    pub mode: u8,
}

/// Split `PATH@CHANGE` (a trailing `@` and digits); `@head` is the head.
pub fn split_rev(arg: &str) -> std::result::Result<(&str, Rev), String> {
    match arg.rsplit_once('@') {
        Some((p, "head")) => Ok((p, Rev::Change(0))),
        Some((p, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            let c: u64 = n
                .parse()
                .map_err(|_| format!("{n:?} is not a change number"))?;
            if c == 0 {
                return Err("changes are numbered from 1 (@head names the newest)".into());
            }
            Ok((p, Rev::Change(c)))
        }
        _ => Ok((arg, Rev::Have)),
    }
}

/// `path` at `rev`, or `not_found` naming what is missing.
pub fn revision(o: &Opened, link: &ServerLink, path: &str, rev: Rev) -> Result<Revision> {
    match rev {
        Rev::Have => {
            let b = o.ws.read()?.baseline(path)?.ok_or_else(|| {
                Error::new(
                    ErrorCode::NotFound,
                    format!("{path:?} is not synced in this workspace"),
                )
                .with_paths(vec![path.to_string()])
            })?;
            Ok(Revision {
                change: b.change,
                manifest: b.manifest,
                content: b.content,
                size: b.size,
                mode: b.mode,
            })
        }
        Rev::Change(change) => {
            let repo = link.repo().to_string();
            let branch = o.meta.branch_id;
            // A change the branch does not have is said with its head.
            let reply = link.with(|c| {
                Ok(c.stat(m::Stat {
                    repo: repo.clone(),
                    branch,
                    change,
                    path: path.to_string(),
                })
                .map_err(|e| super::history::explain_not_found(c, &repo, change, e)))
            })??;
            let at = if change == 0 {
                "the head".to_string()
            } else {
                format!("change {change}")
            };
            match reply.entry {
                Some(m::TreeEntry {
                    change: c,
                    state: Some(s),
                    ..
                }) => Ok(Revision {
                    change: c,
                    manifest: s.manifest,
                    content: s.content,
                    size: s.size,
                    mode: s.mode,
                }),
                _ => Err(Error::new(
                    ErrorCode::NotFound,
                    format!("{path:?} does not exist at {at}"),
                )
                .with_paths(vec![path.to_string()])),
            }
        }
    }
}

/// Stream `r`'s bytes into `out` (verified at the end).
pub fn write(link: &ServerLink, r: &Revision, out: &mut dyn Write) -> Result<()> {
    link.write_content(r.manifest, r.content, r.size, out)
}

/// `r`'s bytes in memory (for a text diff; callers bound the size).
pub fn bytes(link: &ServerLink, r: &Revision) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(r.size as usize);
    write(link, r, &mut out)?;
    Ok(out)
}

/// The deferred target of `path` (the server's side, "theirs") and the
/// workspace's baseline of it (the base your work started from), as
/// `resolve --show` needs them.
pub fn resolve_sides(o: &Opened, path: &str) -> Result<(Option<Revision>, Option<Revision>)> {
    let read = o.ws.read()?;
    let deferred = read.deferred_all()?;
    let Some((_, entry)) = deferred.into_iter().find(|(p, _)| p == path) else {
        return Err(Error::new(
            ErrorCode::NotPresent,
            format!("{path:?} does not need resolving"),
        )
        .with_paths(vec![path.to_string()])
        .concerning(scribe_format::Concern::NothingToResolve));
    };
    let of = |b: &scribe_workspace::records::BaselineRecord| Revision {
        change: b.change,
        manifest: b.manifest,
        content: b.content,
        size: b.size,
        mode: b.mode,
    };
    let base = read.baseline(path)?.as_ref().map(of);
    let theirs = entry.target.as_ref().map(of);
    Ok((base, theirs))
}

/// The content id of `bytes` (BLAKE3 of the whole file, as recorded).
pub fn content_id(bytes: &[u8]) -> FileContentId {
    FileContentId(*blake3::hash(bytes).as_bytes())
}

/// The content id and size of the file at `path`, read in pieces.
pub fn file_content_id(path: &std::path::Path) -> Result<(FileContentId, u64)> {
    let mut f = std::fs::File::open(path)?;
    let mut h = blake3::Hasher::new();
    let n = std::io::copy(&mut f, &mut h)?;
    Ok((FileContentId(*h.finalize().as_bytes()), n))
}

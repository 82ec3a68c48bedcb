//! Reading the repository's past: log, a path's history, one change.

use scribe_format::wire::message as m;
use scribe_format::{Concern, ErrorCode};

use crate::client::{Client, ClientError};
use crate::error::{Error, Result};
use crate::workflow::Opened;
use crate::Context;

/// The newest `n` changes of `o`'s branch, newest first.
pub fn log(ctx: &Context, o: &Opened, n: u32) -> Result<Vec<m::CommitSummary>> {
    let mut c = o.connect(ctx)?;
    let mut out = Vec::new();
    let mut before = 0;
    while out.len() < n as usize {
        let page = c.log(m::Log {
            repo: o.meta.repository_name.clone(),
            branch: o.meta.branch_id,
            before,
            limit: (n as usize - out.len()).min(m::MAX_PAGE_ITEMS as usize) as u32,
        })?;
        let empty = page.commits.is_empty();
        out.extend(page.commits);
        if page.next == 0 || empty {
            break;
        }
        before = page.next;
    }
    out.truncate(n as usize);
    Ok(out)
}

/// Every change of `path` on `o`'s branch, newest first.
pub fn history(ctx: &Context, o: &Opened, path: &str) -> Result<Vec<m::HistoryEntry>> {
    let mut c = o.connect(ctx)?;
    let mut all = Vec::new();
    let mut before = 0;
    loop {
        let page = c.history(m::History {
            repo: o.meta.repository_name.clone(),
            branch: o.meta.branch_id,
            path: path.to_string(),
            before,
            limit: m::MAX_PAGE_ITEMS,
        })?;
        let empty = page.entries.is_empty();
        all.extend(page.entries);
        if page.next == 0 || empty {
            break;
        }
        before = page.next;
    }
    Ok(all)
}

/// One change and every file it touched.
pub fn describe(
    ctx: &Context,
    o: &Opened,
    change: u64,
) -> Result<(m::CommitSummary, Vec<m::DescribedEntry>)> {
    let mut c = o.connect(ctx)?;
    let mut after = String::new();
    let mut entries = Vec::new();
    let commit = loop {
        let page = c
            .describe(m::Describe {
                repo: o.meta.repository_name.clone(),
                change,
                after: after.clone(),
                limit: m::MAX_PAGE_ITEMS,
            })
            .map_err(|e| explain_not_found(&mut c, &o.meta.repository_name, change, e))?;
        entries.extend(page.entries);
        match page.next {
            Some(n) => after = n,
            None => break page.commit,
        }
    };
    Ok((commit, entries))
}

/// One change of a path's history with who made it, when and why
/// (#18 item 7).
#[derive(Clone, Debug)]
pub struct HistoryItem {
    /// The path the file had in this change (its history follows moves).
    pub path: String,
    pub entry: m::HistoryEntry,
    pub commit: m::CommitSummary,
}

/// Every change of `path` on `o`'s branch, newest first, following the
/// file back through explicit moves (each source's history up to the
/// change it was moved from), each with its change's author, time and
/// message (one `Describe` per change, at most one entry read).
pub fn history_following(ctx: &Context, o: &Opened, path: &str) -> Result<Vec<HistoryItem>> {
    let mut c = o.connect(ctx)?;
    let mut out = Vec::new();
    let mut commits: std::collections::HashMap<u64, m::CommitSummary> = Default::default();
    let mut current = path.to_string();
    let mut below = 0u64;
    // A move chain is finite; this bound only stops a malformed one.
    for _ in 0..1000 {
        let mut entries = Vec::new();
        let mut before = below;
        loop {
            let page = c.history(m::History {
                repo: o.meta.repository_name.clone(),
                branch: o.meta.branch_id,
                path: current.clone(),
                before,
                limit: m::MAX_PAGE_ITEMS,
            })?;
            let empty = page.entries.is_empty();
            entries.extend(page.entries);
            if page.next == 0 || empty {
                break;
            }
            before = page.next;
        }
        let mut next = None;
        for e in entries {
            let commit = match commits.get(&e.change) {
                Some(s) => s.clone(),
                None => {
                    let d = c.describe(m::Describe {
                        repo: o.meta.repository_name.clone(),
                        change: e.change,
                        after: String::new(),
                        limit: 1,
                    })?;
                    commits.insert(e.change, d.commit.clone());
                    d.commit
                }
            };
            let moved = e.moved_from.clone();
            out.push(HistoryItem {
                path: current.clone(),
                entry: e,
                commit,
            });
            if let Some(mv) = moved {
                // The file's life before this change is the source's.
                next = Some((mv.path, mv.change + 1));
                break;
            }
        }
        match next {
            Some((p, b)) => {
                current = p;
                below = b;
            }
            None => break,
        }
    }
    Ok(out)
}

/// `not_found` for `change` of `repo`, naming the head when it is known:
/// the command line points at `scribe log` ([`Concern::Change`]).
pub fn missing_change(repo: &str, change: u64, head: Option<u64>) -> Error {
    let message = match head {
        Some(0) => format!("no change {change}: {repo} has no changes yet"),
        Some(h) if change > h => format!("no change {change}: the head of {repo} is change {h}"),
        _ => format!("no change {change} in {repo}"),
    };
    Error::new(ErrorCode::NotFound, message).concerning(Concern::Change { change, head })
}

/// A `not_found` answer to a request about `change` of `repo` says what is
/// missing: one more question (the repository list, which carries the
/// head) tells a change the branch does not have from a repository the
/// server does not have. Any other failure is returned as it is.
pub(crate) fn explain_not_found(c: &mut Client, repo: &str, change: u64, e: ClientError) -> Error {
    if e.code() != ErrorCode::NotFound {
        return e.into();
    }
    match c.repo_list() {
        Ok(list) => match list.iter().find(|r| r.name == repo) {
            Some(info) => missing_change(repo, change, Some(info.head)),
            None => Error::from(e).concerning(Concern::Repository),
        },
        Err(_) => missing_change(repo, change, None),
    }
}

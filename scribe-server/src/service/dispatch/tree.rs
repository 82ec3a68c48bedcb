//! Delta, List, Stat, History, Log, Describe: reading trees and history.

use scribe_format::wire::message as m;
use scribe_format::wire::Text;
use scribe_format::{BranchId, ErrorCode};
use scribe_metadata::read::ListEntry;
use scribe_metadata::records::{CommitRecord, HistoryRecord};
use scribe_metadata::Repository;

use super::{branch_of, file_state, open, page_limit, page_next, DispatchResult, Failure, Service};

fn resolve(repo: &Repository, branch: BranchId, change: u64) -> DispatchResult<u64> {
    if change == 0 {
        Ok(repo.branch_head(branch)?)
    } else {
        Ok(change)
    }
}

/// Paging cursors are the metadata layer's continuation tokens, which are
/// path bytes (plus a separator byte) and so valid UTF-8.
fn token_string(t: Vec<u8>) -> DispatchResult<String> {
    String::from_utf8(t).map_err(|_| Failure::new(ErrorCode::Internal, "cursor is not UTF-8"))
}

fn token(after: &str) -> Option<&[u8]> {
    if after.is_empty() {
        None
    } else {
        Some(after.as_bytes())
    }
}

pub(super) fn delta(svc: &Service, r: m::Delta) -> DispatchResult<m::DeltaPage> {
    let (repo, _) = open(svc, &r.repo)?;
    let branch = branch_of(&repo, r.branch);
    let to = resolve(&repo, branch, r.to)?;
    let page = repo.delta(branch, r.from, to, token(&r.after), page_limit(r.limit))?;
    Ok(m::DeltaPage {
        to,
        entries: page
            .entries
            .into_iter()
            .map(|e| m::TreeEntry {
                path: e.path,
                change: e.change,
                state: e.state.as_ref().map(file_state),
            })
            .collect(),
        next: page.next.map(token_string).transpose()?,
    })
}

pub(super) fn list(svc: &Service, r: m::List) -> DispatchResult<m::ListPage> {
    let (repo, _) = open(svc, &r.repo)?;
    let branch = branch_of(&repo, r.branch);
    let change = resolve(&repo, branch, r.change)?;
    let page = repo.list(
        branch,
        change,
        &r.prefix,
        r.recursive,
        token(&r.after),
        page_limit(r.limit),
    )?;
    let mut entries = Vec::new();
    let mut directories = Vec::new();
    for e in page.entries {
        match e {
            ListEntry::File(s) => entries.push(m::TreeEntry {
                path: s.path,
                change: s.change,
                state: Some(file_state(&s.record)),
            }),
            ListEntry::Dir(d) => directories.push(d),
        }
    }
    Ok(m::ListPage {
        change,
        entries,
        directories,
        next: page.next.map(token_string).transpose()?,
    })
}

pub(super) fn stat(svc: &Service, r: m::Stat) -> DispatchResult<m::StatReply> {
    let (repo, _) = open(svc, &r.repo)?;
    let branch = branch_of(&repo, r.branch);
    let change = resolve(&repo, branch, r.change)?;
    let st = repo.stat(branch, change, &r.path)?;
    Ok(m::StatReply {
        change,
        entry: st.map(|s| m::TreeEntry {
            path: s.path,
            change: s.change,
            state: Some(file_state(&s.record)),
        }),
    })
}

fn history_entry(change: u64, h: &HistoryRecord) -> m::HistoryEntry {
    m::HistoryEntry {
        change,
        action: h.action,
        state: h.state.as_ref().map(file_state),
        moved_from: h.moved_from.as_ref().map(|(p, c)| m::MoveFrom {
            path: p.clone(),
            change: *c,
        }),
    }
}

pub(super) fn history(svc: &Service, r: m::History) -> DispatchResult<m::HistoryPage> {
    let (repo, _) = open(svc, &r.repo)?;
    let branch = branch_of(&repo, r.branch);
    let limit = page_limit(r.limit);
    // Newest first, below `before`.
    let mut entries: Vec<m::HistoryEntry> = repo
        .history(branch, &r.path)?
        .iter()
        .rev()
        .filter(|v| r.before == 0 || v.change < r.before)
        .take(limit + 1)
        .map(|v| history_entry(v.change, &v.record))
        .collect();
    let next = page_next(&mut entries, limit, |e| e.change).unwrap_or(0);
    Ok(m::HistoryPage { entries, next })
}

fn summary(change: u64, c: &CommitRecord) -> m::CommitSummary {
    m::CommitSummary {
        change,
        commit: c.commit_id,
        branch: c.branch,
        parent: c.parent,
        workspace: c.workspace,
        operation: c.operation,
        author: c.author.clone(),
        message: Text(c.message.clone()),
        timestamp_ms: c.timestamp_ms,
        entry_count: c.entry_count,
    }
}

pub(super) fn log(svc: &Service, r: m::Log) -> DispatchResult<m::LogPage> {
    let (repo, _) = open(svc, &r.repo)?;
    let branch = branch_of(&repo, r.branch);
    let limit = page_limit(r.limit);
    let before = if r.before == 0 { None } else { Some(r.before) };
    let mut commits: Vec<m::CommitSummary> = repo
        .log(branch, before, limit + 1)?
        .iter()
        .map(|e| summary(e.change, &e.record))
        .collect();
    let next = page_next(&mut commits, limit, |c| c.change).unwrap_or(0);
    Ok(m::LogPage { commits, next })
}

pub(super) fn describe(svc: &Service, r: m::Describe) -> DispatchResult<m::DescribeReply> {
    let (repo, _) = open(svc, &r.repo)?;
    let change = if r.change == 0 {
        repo.head()?
    } else {
        r.change
    };
    let d = repo.describe(change)?;
    let limit = page_limit(r.limit);
    let mut entries: Vec<m::DescribedEntry> = d
        .paths
        .iter()
        .filter(|(p, _)| r.after.is_empty() || p.as_str() > r.after.as_str())
        .take(limit + 1)
        .map(|(p, h)| {
            let e = history_entry(change, h);
            m::DescribedEntry {
                path: p.clone(),
                action: e.action,
                state: e.state,
                moved_from: e.moved_from,
            }
        })
        .collect();
    let next = page_next(&mut entries, limit, |e| e.path.clone());
    Ok(m::DescribeReply {
        commit: summary(change, &d.record),
        entries,
        next,
    })
}

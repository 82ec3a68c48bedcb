//! Reading the repository's past: log, a path's history, one change.

use scribe_format::wire::message as m;

use crate::error::Result;
use crate::link::connect;
use crate::workflow::Opened;
use crate::Context;

/// The newest `n` changes of `o`'s branch, newest first.
pub fn log(ctx: &Context, o: &Opened, n: u32) -> Result<Vec<m::CommitSummary>> {
    let mut c = connect(&o.meta.server, false, ctx)?;
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
    let mut c = connect(&o.meta.server, false, ctx)?;
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
    let mut c = connect(&o.meta.server, false, ctx)?;
    let mut after = String::new();
    let mut entries = Vec::new();
    let commit = loop {
        let page = c.describe(m::Describe {
            repo: o.meta.repository_name.clone(),
            change,
            after: after.clone(),
            limit: m::MAX_PAGE_ITEMS,
        })?;
        entries.extend(page.entries);
        match page.next {
            Some(n) => after = n,
            None => break page.commit,
        }
    };
    Ok((commit, entries))
}

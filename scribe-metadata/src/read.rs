//! The read side, at a pinned change, through one MVCC read transaction:
//! stat, paged listing, delta between two changes, path history, commit
//! log and describe. Nothing here scans unrelated history: trees are
//! entered by a reverse root seek, deltas are pruned by newest-change
//! summaries, history and describe are key-prefix scans, and the log
//! follows parent links.

use redb::{ReadOnlyTable, ReadTransaction, ReadableDatabase};
use scribe_format::{BranchId, ErrorCode};

use crate::error::{MetadataError, Result};
use crate::records::{keys, CommitRecord, HistoryRecord};
use crate::repo::{branch_head, read_repo_meta, root_at, Repository};
use crate::tables;
use crate::tree::{lookup, CachedPages, Filter, PageCache, Walk};
use scribe_format::snapshot::{FileRecord, RootRow};

/// A live path at a pinned change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stat {
    pub path: String,
    /// The change that produced this state.
    pub change: u64,
    pub record: FileRecord,
}

/// One listing entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListEntry {
    File(Stat),
    /// A directory with at least one live path below it (its full path).
    Dir(String),
}

/// One page of a listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListPage {
    pub entries: Vec<ListEntry>,
    /// Pass back to continue; `None` at the end.
    pub next: Option<Vec<u8>>,
}

/// One changed path of a delta: its final state or a tombstone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeltaEntry {
    pub path: String,
    pub change: u64,
    pub state: Option<FileRecord>,
}

/// One page of a delta.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeltaPage {
    pub entries: Vec<DeltaEntry>,
    pub next: Option<Vec<u8>>,
}

/// One revision of a path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Revision {
    pub change: u64,
    pub record: HistoryRecord,
}

/// A commit of the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogEntry {
    pub change: u64,
    pub record: CommitRecord,
}

/// A described change: its commit record and every changed path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Described {
    pub change: u64,
    pub record: CommitRecord,
    pub paths: Vec<(String, HistoryRecord)>,
}

/// A pinned read view with its FIFO page cache.
pub struct ReadView {
    tx: ReadTransaction,
    nodes: ReadOnlyTable<u64, &'static [u8]>,
    cache: PageCache,
    head: u64,
}

fn dir_prefix(prefix: &str) -> Vec<u8> {
    if prefix.is_empty() {
        Vec::new()
    } else {
        let mut p = prefix.as_bytes().to_vec();
        p.push(b'/');
        p
    }
}

impl Repository {
    /// A read view pinned at the current state.
    pub fn view(&self) -> Result<ReadView> {
        let tx = self.db.begin_read()?;
        let nodes = tx.open_table(tables::SNAPSHOT_NODES)?;
        let head = read_repo_meta(&tx)?.head;
        Ok(ReadView {
            tx,
            nodes,
            cache: PageCache::default(),
            head,
        })
    }

    /// [`ReadView::stat`] in a fresh view.
    pub fn stat(&self, branch: BranchId, change: u64, path: &str) -> Result<Option<Stat>> {
        self.view()?.stat(branch, change, path)
    }

    /// [`ReadView::list`] in a fresh view.
    pub fn list(
        &self,
        branch: BranchId,
        change: u64,
        prefix: &str,
        recursive: bool,
        token: Option<&[u8]>,
        limit: usize,
    ) -> Result<ListPage> {
        self.view()?
            .list(branch, change, prefix, recursive, token, limit)
    }

    /// [`ReadView::delta`] in a fresh view.
    pub fn delta(
        &self,
        branch: BranchId,
        from: u64,
        to: u64,
        token: Option<&[u8]>,
        limit: usize,
    ) -> Result<DeltaPage> {
        self.view()?.delta(branch, from, to, token, limit)
    }

    /// [`ReadView::history`] in a fresh view.
    pub fn history(&self, branch: BranchId, path: &str) -> Result<Vec<Revision>> {
        self.view()?.history(branch, path)
    }

    /// [`ReadView::log`] in a fresh view.
    pub fn log(
        &self,
        branch: BranchId,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Vec<LogEntry>> {
        self.view()?.log(branch, before, limit)
    }

    /// [`ReadView::describe`] in a fresh view.
    pub fn describe(&self, change: u64) -> Result<Described> {
        self.view()?.describe(change)
    }
}

impl ReadView {
    /// The repository head this view sees.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// Pages held by the view's cache.
    pub fn cached_pages(&self) -> usize {
        self.cache.len()
    }

    fn pinned(&self, branch: &BranchId, change: u64) -> Result<RootRow> {
        let head = branch_head(&self.tx, branch)?;
        if change > head {
            return Err(MetadataError::refused(
                ErrorCode::NotFound,
                format!("change {change} is above the head {head} of branch {branch}"),
            ));
        }
        root_at(&self.tx, branch, change)
    }

    /// The live state of `path` on `branch` at `change`.
    pub fn stat(&mut self, branch: BranchId, change: u64, path: &str) -> Result<Option<Stat>> {
        let root = self.pinned(&branch, change)?;
        let mut src = CachedPages {
            table: &self.nodes,
            cache: &mut self.cache,
        };
        Ok(
            lookup(&mut src, &root.exact, path.as_bytes())?.and_then(|v| {
                v.state.map(|record| Stat {
                    path: v.path,
                    change: v.last_change,
                    record,
                })
            }),
        )
    }

    /// Live paths below directory `prefix` (`""` for the root): direct
    /// children (files and directories) or, when `recursive`, every file.
    pub fn list(
        &mut self,
        branch: BranchId,
        change: u64,
        prefix: &str,
        recursive: bool,
        token: Option<&[u8]>,
        limit: usize,
    ) -> Result<ListPage> {
        let root = self.pinned(&branch, change)?;
        let within = dir_prefix(prefix);
        let mut lower = token.map(<[u8]>::to_vec).unwrap_or_else(|| within.clone());
        if lower < within {
            lower = within.clone();
        }
        let filter = Filter {
            live_only: true,
            newer_than: 0,
        };
        let limit = limit.max(1);
        let mut src = CachedPages {
            table: &self.nodes,
            cache: &mut self.cache,
        };
        let mut entries = Vec::new();
        let mut walk = Walk::seek(&mut src, &root.exact, &lower, &within, filter)?;
        loop {
            if entries.len() == limit {
                // Is there anything after?
                return Ok(ListPage {
                    next: walk.next(&mut src)?.map(|_| lower.clone()),
                    entries,
                });
            }
            let Some((key, v)) = walk.next(&mut src)? else {
                return Ok(ListPage {
                    entries,
                    next: None,
                });
            };
            let rest = &key[within.len()..];
            match rest.iter().position(|&b| b == b'/') {
                Some(slash) if !recursive => {
                    let dir = &key[..within.len() + slash];
                    entries.push(ListEntry::Dir(String::from_utf8_lossy(dir).into_owned()));
                    // Skip everything below this directory: '0' follows '/'.
                    let mut next = dir.to_vec();
                    next.push(b'0');
                    lower = next;
                    walk = Walk::seek(&mut src, &root.exact, &lower, &within, filter)?;
                }
                _ => {
                    if let Some(record) = v.state {
                        entries.push(ListEntry::File(Stat {
                            path: v.path,
                            change: v.last_change,
                            record,
                        }));
                    }
                    let mut next = key;
                    next.push(0);
                    lower = next;
                }
            }
        }
    }

    /// Every path of `branch` changed after `from` up to `to`, once, with
    /// its final state at `to` or a tombstone.
    pub fn delta(
        &mut self,
        branch: BranchId,
        from: u64,
        to: u64,
        token: Option<&[u8]>,
        limit: usize,
    ) -> Result<DeltaPage> {
        if from > to {
            return Err(MetadataError::refused(
                ErrorCode::Malformed,
                "delta from a later change",
            ));
        }
        let root = self.pinned(&branch, to)?;
        let lower = token.map(<[u8]>::to_vec).unwrap_or_default();
        let filter = Filter {
            live_only: false,
            newer_than: from,
        };
        let limit = limit.max(1);
        let mut src = CachedPages {
            table: &self.nodes,
            cache: &mut self.cache,
        };
        let mut walk = Walk::seek(&mut src, &root.exact, &lower, b"", filter)?;
        let mut entries = Vec::new();
        while let Some((key, v)) = walk.next(&mut src)? {
            if entries.len() == limit {
                return Ok(DeltaPage {
                    entries,
                    next: Some(key),
                });
            }
            entries.push(DeltaEntry {
                path: v.path,
                change: v.last_change,
                state: v.state,
            });
        }
        Ok(DeltaPage {
            entries,
            next: None,
        })
    }

    /// Accepted revisions of `path` on `branch`, oldest first.
    pub fn history(&mut self, branch: BranchId, path: &str) -> Result<Vec<Revision>> {
        let t = self.tx.open_table(tables::HISTORY)?;
        let lo = keys::history_prefix(&branch, path);
        let hi = keys::history(&branch, path, self.head);
        let mut out = Vec::new();
        for row in t.range(lo.as_slice()..=hi.as_slice())? {
            let (k, v) = row?;
            let Some((_, _, change)) = keys::split_history(k.value()) else {
                return Err(MetadataError::corrupt("malformed history key"));
            };
            out.push(Revision {
                change,
                record: HistoryRecord::decode(v.value())?,
            });
        }
        Ok(out)
    }

    /// Commits of `branch`, newest first, starting below `before` (or at the head).
    pub fn log(
        &mut self,
        branch: BranchId,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Vec<LogEntry>> {
        let head = branch_head(&self.tx, &branch)?;
        let commits = self.tx.open_table(tables::COMMITS)?;
        let mut change = match before {
            Some(b) => {
                // The newest commit of the branch below `b`: follow links from the head.
                let mut c = head;
                while c >= b && c != 0 {
                    c = commit(&commits, c)?.parent;
                }
                c
            }
            None => head,
        };
        let mut out = Vec::new();
        while change != 0 && out.len() < limit {
            let record = commit(&commits, change)?;
            let parent = record.parent;
            out.push(LogEntry { change, record });
            change = parent;
        }
        Ok(out)
    }

    /// The commit record and changed paths of `change`.
    pub fn describe(&mut self, change: u64) -> Result<Described> {
        if change == 0 || change > self.head {
            return Err(MetadataError::refused(
                ErrorCode::NotFound,
                format!("no change {change}"),
            ));
        }
        let commits = self.tx.open_table(tables::COMMITS)?;
        let record = commit(&commits, change)?;
        let cp = self.tx.open_table(tables::CHANGE_PATHS)?;
        let hist = self.tx.open_table(tables::HISTORY)?;
        let prefix = keys::change_path(&record.branch, change, "");
        let mut paths = Vec::new();
        for row in cp.range(prefix.as_slice()..)? {
            let (k, _) = row?;
            let k = k.value();
            if !k.starts_with(&prefix) {
                break;
            }
            let p = std::str::from_utf8(&k[prefix.len()..])
                .map_err(|_| MetadataError::corrupt("change path is not UTF-8"))?;
            let h = hist
                .get(keys::history(&record.branch, p, change).as_slice())?
                .ok_or_else(|| {
                    MetadataError::corrupt(format!("change {change} path {p} has no history"))
                })?;
            paths.push((p.to_owned(), HistoryRecord::decode(h.value())?));
        }
        Ok(Described {
            change,
            record,
            paths,
        })
    }
}

fn commit(t: &ReadOnlyTable<u64, &'static [u8]>, change: u64) -> Result<CommitRecord> {
    let row = t.get(change)?.ok_or_else(|| {
        MetadataError::refused(ErrorCode::NotFound, format!("no change {change}"))
    })?;
    Ok(CommitRecord::decode(row.value())?)
}

//! Server-enforced file locks: take, release, list.

use scribe_format::wire::message as m;

use crate::client::{Client, ClientError};
use crate::error::{Error, Result};
use crate::progress::Note;
use crate::workflow::Opened;
use crate::Context;
use scribe_format::{Concern, ErrorCode};
use scribe_workspace::moves::MoveIntent;

/// Lock `paths` for `o` and remember their generations locally.
pub fn lock(ctx: &Context, o: &Opened, paths: Vec<String>) -> Result<Vec<m::LockInfo>> {
    let mut c = o.connect(ctx)?;
    let locks = c.lock_acquire(m::LockAcquire {
        repo: o.meta.repository_name.clone(),
        workspace: o.meta.workspace_id,
        branch: o.meta.branch_id,
        author: o.meta.author.clone(),
        paths,
    })?;
    let tx = o.ws.write()?;
    for l in &locks {
        tx.put_local_lock(&l.path, l.generation)?;
    }
    tx.commit()?;
    Ok(locks)
}

/// What `unlock` did.
#[derive(Debug, Default)]
pub struct Unlocked {
    /// Locks of this workspace the server released.
    pub released: Vec<m::LockInfo>,
    /// Locks this workspace took that another broke (released, or held by
    /// another workspace now): only this workspace's record of them was
    /// forgotten; the server's lock, if any, was not touched.
    pub forgotten: Vec<BrokenLock>,
}

/// Release the locks `o` holds on `paths`. A path whose lock this
/// workspace took but another broke (and perhaps holds now) is not sent
/// to the server: its local record is forgotten (the holder acknowledges
/// the break), and another workspace's lock is never released. Paths on
/// which this workspace held no lock are listed in a `not_found` refusal
/// ([`Concern::NotLocked`]) after the others were released: nothing is
/// said to be unlocked that was not locked.
pub fn unlock(ctx: &Context, o: &Opened, paths: Vec<String>) -> Result<Unlocked> {
    let mut c = o.connect(ctx)?;
    let recorded: Vec<(String, u64)> =
        o.ws.read()?
            .local_locks()?
            .into_iter()
            .filter(|(p, _)| paths.contains(p))
            .collect();
    let mut listed = Vec::new();
    for (p, _) in &recorded {
        let page = c.lock_list(m::LockList {
            repo: o.meta.repository_name.clone(),
            prefix: p.clone(),
            after: String::new(),
            limit: 1,
        })?;
        listed.extend(page.locks.into_iter().filter(|l| l.path == *p));
    }
    let me = o.meta.workspace_id;
    let forgotten: Vec<BrokenLock> = broken_among(&recorded, &listed, me, None)
        .0
        .into_iter()
        .filter(|b| {
            // Taken again by this very workspace (another generation):
            // its own lock, released below.
            !listed.iter().any(|l| l.path == b.path && l.workspace == me)
        })
        .collect();
    let send: Vec<String> = paths
        .iter()
        .filter(|p| !forgotten.iter().any(|b| b.path == **p))
        .cloned()
        .collect();
    let released = if send.is_empty() {
        Vec::new()
    } else {
        c.lock_release(m::LockRelease {
            repo: o.meta.repository_name.clone(),
            workspace: o.meta.workspace_id,
            paths: send,
        })?
    };
    let tx = o.ws.write()?;
    for p in &paths {
        tx.remove_local_lock(p)?;
    }
    tx.commit()?;
    Ok(Unlocked {
        released,
        forgotten,
    })
}

/// The paths of `asked` that none of `released` is at or under (a folder
/// releases the locks beneath it).
pub fn not_released(asked: &[String], released: &[m::LockInfo]) -> Vec<String> {
    asked
        .iter()
        .filter(|p| {
            !released
                .iter()
                .any(|l| p.is_empty() || scribe_format::path::is_under_prefix(&l.path, p))
        })
        .cloned()
        .collect()
}

/// `not_found` for `paths` that hold no lock to release.
pub fn not_locked(paths: Vec<String>) -> Error {
    Error::new(
        ErrorCode::NotFound,
        format!("{} path(s) hold no lock to release", paths.len()),
    )
    .with_paths(paths)
    .concerning(Concern::NotLocked)
}

/// Every lock of `o`'s repository.
pub fn list(ctx: &Context, o: &Opened) -> Result<Vec<m::LockInfo>> {
    let mut c = o.connect(ctx)?;
    let mut all = Vec::new();
    let mut after = String::new();
    loop {
        let page = c.lock_list(m::LockList {
            repo: o.meta.repository_name.clone(),
            prefix: String::new(),
            after: after.clone(),
            limit: m::MAX_PAGE_ITEMS,
        })?;
        all.extend(page.locks);
        match page.next {
            Some(n) => after = n,
            None => break,
        }
    }
    Ok(all)
}

/// At most this many paths are looked up one request each by
/// [`locks_on`]; more are found in a listing of their common prefix.
const EXACT_LOOKUPS: usize = 16;

/// The longest common (character) prefix of `paths`: the `LockList`
/// prefix that lists every lock on them (the server matches a prefix of
/// the path string).
pub(crate) fn common_prefix<'a>(paths: impl IntoIterator<Item = &'a str>) -> &'a str {
    let mut it = paths.into_iter();
    let Some(mut prefix) = it.next() else {
        return "";
    };
    for p in it {
        let common = prefix
            .char_indices()
            .zip(p.chars())
            .find(|((_, a), b)| a != b)
            .map_or(prefix.len().min(p.len()), |((i, _), _)| i);
        prefix = &prefix[..common];
    }
    prefix
}

/// The server's locks on exactly `paths`, whoever holds them: each of up
/// to [`EXACT_LOOKUPS`] paths by its own listing (prefix = the path; the
/// path itself sorts first), more by every page of the listing under
/// their common prefix. Every lock on them is seen, however many locks
/// the repository holds (a single page missed the ones beyond it).
pub(crate) fn locks_on(
    c: &mut Client,
    repo: &str,
    paths: &[&str],
) -> std::result::Result<Vec<m::LockInfo>, ClientError> {
    let wanted: std::collections::HashSet<&str> = paths.iter().copied().collect();
    let mut out = Vec::new();
    if wanted.len() <= EXACT_LOOKUPS {
        for p in &wanted {
            let page = c.lock_list(m::LockList {
                repo: repo.to_string(),
                prefix: p.to_string(),
                after: String::new(),
                limit: 1,
            })?;
            out.extend(page.locks.into_iter().filter(|l| l.path == *p));
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        return Ok(out);
    }
    let prefix = common_prefix(wanted.iter().copied());
    let mut after = String::new();
    loop {
        let page = c.lock_list(m::LockList {
            repo: repo.to_string(),
            prefix: prefix.to_string(),
            after: after.clone(),
            limit: m::MAX_PAGE_ITEMS,
        })?;
        out.extend(
            page.locks
                .into_iter()
                .filter(|l| wanted.contains(l.path.as_str())),
        );
        match page.next {
            // A cursor that does not move on would loop for ever.
            Some(n) if n > after => after = n,
            Some(_) => {
                return Err(ClientError::Protocol(
                    "the server's lock listing did not move past its cursor".into(),
                ))
            }
            None => break,
        }
    }
    Ok(out)
}

/// Break the locks on `paths` (files, or every lock under a folder)
/// whoever holds them (#18 item 1): one `LockRelease` per holding
/// workspace, in that workspace's name. A team server allows it to a
/// maintainer or administrator of the repository only, and records it in
/// the auth service's audit trail; an open server (no auth) allows anyone.
/// Returns the released locks; a path without a lock is `not_found`.
pub fn unlock_force(ctx: &Context, o: &Opened, paths: Vec<String>) -> Result<Vec<m::LockInfo>> {
    let mut c = o.connect(ctx)?;
    let mut held: Vec<m::LockInfo> = Vec::new();
    let mut none = Vec::new();
    for p in &paths {
        let mut found = false;
        let mut after = String::new();
        loop {
            let page = c.lock_list(m::LockList {
                repo: o.meta.repository_name.clone(),
                prefix: p.clone(),
                after: after.clone(),
                limit: m::MAX_PAGE_ITEMS,
            })?;
            for l in page.locks {
                if p.is_empty() || scribe_format::path::is_under_prefix(&l.path, p) {
                    found = true;
                    if !held.iter().any(|h| h.path == l.path) {
                        held.push(l);
                    }
                }
            }
            match page.next {
                Some(n) => after = n,
                None => break,
            }
        }
        if !found {
            none.push(p.clone());
        }
    }
    if !none.is_empty() {
        return Err(not_locked(none));
    }
    let mut by_ws: std::collections::BTreeMap<[u8; 16], Vec<String>> = Default::default();
    for l in &held {
        by_ws.entry(l.workspace.0).or_default().push(l.path.clone());
    }
    let mut released = Vec::new();
    for (ws, paths) in by_ws {
        for chunk in paths.chunks(m::MAX_PAGE_ITEMS as usize) {
            let got = c.lock_release(m::LockRelease {
                repo: o.meta.repository_name.clone(),
                workspace: scribe_format::WorkspaceId(ws),
                paths: chunk.to_vec(),
            })?;
            released.extend(got);
        }
    }
    let tx = o.ws.write()?;
    for l in &released {
        if l.workspace == o.meta.workspace_id {
            tx.remove_local_lock(&l.path)?;
        }
    }
    tx.commit()?;
    Ok(released)
}

/// Locks follow a move (as Perforce locks both halves of a moved file):
/// each file of `intent` whose source this workspace holds a lock on gets
/// its destination locked for this workspace too. A tracked source keeps
/// its lock until the submit (its delete is part of the change, and the
/// submit releases both, or with `--keep-locks` keeps the destination's:
/// [`release_moved_sources`]); a source that is no file on the server (a
/// new file, or the middle of a chain of moves) gives its lock up.
/// Best effort after the move, which stands whatever the server says:
/// [`Note::LocksMoved`] or [`Note::LocksNotMoved`] (offline, or another
/// workspace holds a destination's lock).
pub fn follow_move(ctx: &Context, o: &Opened, intent: &MoveIntent) -> Result<()> {
    let read = o.ws.read()?;
    let recorded: std::collections::HashMap<String, u64> =
        read.local_locks()?.into_iter().collect();
    let mut pairs = Vec::new();
    let mut give_up = Vec::new();
    for f in &intent.files {
        if recorded.contains_key(&f.physical_source) {
            pairs.push((f.physical_source.clone(), f.destination.clone()));
            if read.baseline(&f.physical_source)?.is_none() {
                give_up.push(f.physical_source.clone());
            }
        }
    }
    drop(read);
    if pairs.is_empty() {
        return Ok(());
    }
    let destinations: Vec<String> = pairs.iter().map(|(_, d)| d.clone()).collect();
    // A source gives its lock up only once every destination is locked.
    let (taken, failed) = take_then_release(ctx, o, &destinations, &give_up);
    let released = if failed.is_none() { &give_up[..] } else { &[] };
    record(o, &taken, released)?;
    match failed {
        None => ctx.progress.note(Note::LocksMoved { pairs }),
        Some(why) => {
            let taken: std::collections::HashSet<&str> =
                taken.iter().map(|l| l.path.as_str()).collect();
            ctx.progress.note(Note::LocksNotMoved {
                pairs: pairs
                    .into_iter()
                    .filter(|(_, d)| !taken.contains(d.as_str()))
                    .collect(),
                why,
            })
        }
    }
    Ok(())
}

/// After `intent` was aborted: the locks its destinations took from their
/// sources ([`follow_move`]) go back. A destination now holding nothing
/// tracked or opened gives its lock up; a source that gave its lock up (a
/// new file, opened for add again) takes it back first. Best effort, as
/// [`follow_move`].
pub fn follow_abort(ctx: &Context, o: &Opened, intent: &MoveIntent) -> Result<()> {
    let read = o.ws.read()?;
    let recorded: std::collections::HashMap<String, u64> =
        read.local_locks()?.into_iter().collect();
    let mut release = Vec::new();
    let mut retake = Vec::new();
    for f in &intent.files {
        if !recorded.contains_key(&f.destination)
            || read.baseline(&f.destination)?.is_some()
            || read.opened(&f.destination)?.is_some()
        {
            continue;
        }
        release.push(f.destination.clone());
        if !recorded.contains_key(&f.physical_source) && read.opened(&f.physical_source)?.is_some()
        {
            retake.push(f.physical_source.clone());
        }
    }
    drop(read);
    if release.is_empty() {
        return Ok(());
    }
    let (taken, failed) = take_then_release(ctx, o, &retake, &release);
    let released = if failed.is_none() { &release[..] } else { &[] };
    record(o, &taken, released)?;
    if let Some(why) = failed {
        ctx.progress.note(Note::LocksLeftBehind {
            paths: release,
            why,
        });
    }
    Ok(())
}

/// Lock `take` for `o`, then, once all of them are held, release
/// `release`, a page at a time. What was taken, and why it stopped (any
/// failure, offline included), if it did: nothing is released then.
fn take_then_release(
    ctx: &Context,
    o: &Opened,
    take: &[String],
    release: &[String],
) -> (Vec<m::LockInfo>, Option<String>) {
    let mut taken = Vec::new();
    let mut c = match o.connect(ctx) {
        Ok(c) => c,
        Err(e) => return (taken, Some(e.to_string())),
    };
    for chunk in take.chunks(m::MAX_PAGE_ITEMS as usize) {
        match c.lock_acquire(m::LockAcquire {
            repo: o.meta.repository_name.clone(),
            workspace: o.meta.workspace_id,
            branch: o.meta.branch_id,
            author: o.meta.author.clone(),
            paths: chunk.to_vec(),
        }) {
            Ok(got) => taken.extend(got),
            Err(e) => return (taken, Some(e.to_string())),
        }
    }
    for chunk in release.chunks(m::MAX_PAGE_ITEMS as usize) {
        if let Err(e) = c.lock_release(m::LockRelease {
            repo: o.meta.repository_name.clone(),
            workspace: o.meta.workspace_id,
            paths: chunk.to_vec(),
        }) {
            return (taken, Some(e.to_string()));
        }
    }
    (taken, None)
}

/// Record `taken` and forget `released` in this workspace's `local_locks`.
fn record(o: &Opened, taken: &[m::LockInfo], released: &[String]) -> Result<()> {
    if taken.is_empty() && released.is_empty() {
        return Ok(());
    }
    let tx = o.ws.write()?;
    for l in taken {
        tx.put_local_lock(&l.path, l.generation)?;
    }
    for p in released {
        tx.remove_local_lock(p)?;
    }
    tx.commit()?;
    Ok(())
}

/// A submit accepted with `--keep-locks` keeps every lock of its files,
/// the sources of its moves too, whose files are gone: their locks are
/// released (the lock stays with the file, at its destination). Best
/// effort: the change is accepted; a lock that could not be released is
/// named ([`Note::LocksLeftBehind`]) and `scribe unlock` releases it.
pub(crate) fn release_moved_sources(
    o: &Opened,
    remote: &crate::link::ServerLink,
    set: &scribe_format::changeset::ChangeSet,
    locked: &[String],
) -> Result<()> {
    let locked: std::collections::HashSet<&str> = locked.iter().map(String::as_str).collect();
    let deleted: std::collections::HashSet<&str> = set
        .entries
        .iter()
        .filter(|e| e.action == scribe_format::changeset::Action::Delete)
        .map(|e| e.path.as_str())
        .collect();
    let mut paths: Vec<String> = set
        .entries
        .iter()
        .filter_map(|e| e.moved_from.as_ref().map(|m| m.path.as_str()))
        .filter(|src| locked.contains(src) && deleted.contains(src))
        .map(str::to_string)
        .collect();
    paths.sort();
    paths.dedup();
    if paths.is_empty() {
        return Ok(());
    }
    let repo = o.meta.repository_name.clone();
    let ws = o.meta.workspace_id;
    let released = remote.with(|c| {
        for chunk in paths.chunks(m::MAX_PAGE_ITEMS as usize) {
            c.lock_release(m::LockRelease {
                repo: repo.clone(),
                workspace: ws,
                paths: chunk.to_vec(),
            })?;
        }
        Ok(())
    });
    match released {
        Ok(()) => {
            let tx = o.ws.write()?;
            for p in &paths {
                tx.remove_local_lock(p)?;
            }
            tx.commit()?;
        }
        Err(why) => remote.context().progress.note(Note::LocksLeftBehind {
            paths,
            why: why.to_string(),
        }),
    }
    Ok(())
}

/// A lock this workspace took (recorded in its `local_locks`) that the
/// server no longer holds for it: someone broke it (`scribe unlock
/// --force`, `scribe-server lock release`), and perhaps took it since.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokenLock {
    pub path: String,
    /// The generation this workspace recorded when it took the lock.
    pub generation: u64,
    /// Who holds the path's lock now (author), if anyone.
    pub held_by: Option<String>,
}

/// What the server says of the locks this workspace recorded.
#[derive(Debug)]
pub enum HeldLocks {
    /// This workspace records no lock: the server was not asked.
    NoneRecorded,
    /// Asked in one request: these are broken; `unchecked` recorded
    /// locks lay beyond that request's page and were not checked.
    Checked {
        broken: Vec<BrokenLock>,
        unchecked: usize,
    },
    /// The server could not be asked (offline, signed out, ...): the
    /// lock state is unknown. `recorded` locks were not checked.
    Unknown { recorded: usize, why: Error },
}

/// The recorded locks of `o` that `listed` (the server's locks at and
/// after the start of the listing, up to `through` inclusive, or all of
/// them with `None`) shows broken: absent, held by another workspace, or
/// held under another generation. Recorded paths after `through` are
/// returned apart, unchecked.
pub fn broken_among(
    recorded: &[(String, u64)],
    listed: &[m::LockInfo],
    me: scribe_format::WorkspaceId,
    through: Option<&str>,
) -> (Vec<BrokenLock>, usize) {
    let by_path: std::collections::HashMap<&str, &m::LockInfo> =
        listed.iter().map(|l| (l.path.as_str(), l)).collect();
    let mut broken = Vec::new();
    let mut unchecked = 0;
    for (path, generation) in recorded {
        match by_path.get(path.as_str()) {
            Some(l) if l.workspace == me && l.generation == *generation => {}
            Some(l) => broken.push(BrokenLock {
                path: path.clone(),
                generation: *generation,
                held_by: Some(l.author.clone()),
            }),
            None if through.is_some_and(|t| path.as_str() > t) => unchecked += 1,
            None => broken.push(BrokenLock {
                path: path.clone(),
                generation: *generation,
                held_by: None,
            }),
        }
    }
    (broken, unchecked)
}

/// Check the locks `o` recorded against the server in at most one request
/// (none when it records no lock): one page of the locks under the
/// recorded paths' common prefix. Never fails for the server's sake: a
/// server that cannot be asked gives [`HeldLocks::Unknown`].
pub fn check_held(ctx: &Context, o: &Opened) -> Result<HeldLocks> {
    let recorded = o.ws.read()?.local_locks()?;
    if recorded.is_empty() {
        return Ok(HeldLocks::NoneRecorded);
    }
    let prefix = common_prefix(recorded.iter().map(|(p, _)| p.as_str()));
    let asked = o.connect(ctx).and_then(|mut c| {
        Ok(c.lock_list(m::LockList {
            repo: o.meta.repository_name.clone(),
            prefix: prefix.to_string(),
            after: String::new(),
            limit: m::MAX_PAGE_ITEMS,
        })?)
    });
    let page = match asked {
        Ok(page) => page,
        Err(why) => {
            return Ok(HeldLocks::Unknown {
                recorded: recorded.len(),
                why,
            })
        }
    };
    let through = page
        .next
        .as_ref()
        .map(|_| page.locks.last().map_or("", |l| l.path.as_str()));
    let (broken, unchecked) = broken_among(&recorded, &page.locks, o.meta.workspace_id, through);
    Ok(HeldLocks::Checked { broken, unchecked })
}

/// The recorded locks of `o` that the complete listing `all` shows broken.
pub fn broken(o: &Opened, all: &[m::LockInfo]) -> Result<Vec<BrokenLock>> {
    let recorded = o.ws.read()?.local_locks()?;
    Ok(broken_among(&recorded, all, o.meta.workspace_id, None).0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use scribe_format::{BranchId, WorkspaceId};

    fn lock(path: &str, generation: u64, ws: u8, author: &str) -> m::LockInfo {
        m::LockInfo {
            path: path.into(),
            generation,
            workspace: WorkspaceId([ws; 16]),
            branch: BranchId([0; 16]),
            author: author.into(),
            acquired_ms: 1,
        }
    }

    /// Held (same workspace and generation), released, taken by another
    /// workspace, taken again under another generation; and a recorded
    /// path after the end of a partial page is counted, not called broken.
    #[test]
    fn recorded_locks_are_held_broken_or_unchecked() {
        let me = WorkspaceId([1; 16]);
        let recorded: Vec<(String, u64)> = [("a", 5), ("b", 6), ("c", 7), ("d", 8), ("z", 9)]
            .iter()
            .map(|(p, g)| (p.to_string(), *g))
            .collect();
        let listed = vec![
            lock("a", 5, 1, "me"),
            lock("c", 10, 2, "bob"),
            lock("d", 11, 1, "me"),
            lock("e", 12, 2, "bob"),
        ];
        let (broken, unchecked) = broken_among(&recorded, &listed, me, Some("e"));
        let got: Vec<(&str, Option<&str>)> = broken
            .iter()
            .map(|b| (b.path.as_str(), b.held_by.as_deref()))
            .collect();
        assert_eq!(
            got,
            vec![("b", None), ("c", Some("bob")), ("d", Some("me"))]
        );
        assert_eq!(unchecked, 1, "z lies beyond the page");
        let (broken, unchecked) = broken_among(&recorded, &listed, me, None);
        assert_eq!(broken.len(), 4, "a complete listing decides z too");
        assert_eq!(unchecked, 0);
    }
}

//! Moves made outside Scribe (a file manager, a tool, `mv`), found by
//! `reconcile` ([`crate::open::reconcile`]), as Perforce's `p4 reconcile`
//! pairs a deleted and an added file into a move.
//!
//! A tracked file that is gone and a new file holding exactly its recorded
//! content (the same size first, then the same BLAKE3 content id, read
//! streaming in 1 MiB reads: a large file is never held in memory) become
//! the move `scribe move` would have recorded: a complete `move/<op>`
//! intent (specification "Explicit local move intent"; nothing is renamed:
//! the files are already where the user put them), the source opened for
//! delete and the destination for add with its move source
//! ([`crate::moves::open_moved`]). Submit then sends an explicit move and
//! the history follows the file; `revert` of either half undoes the move
//! like any other (the file goes back to its old name).
//!
//! Pairing is only where it is unambiguous. Of the files with one content,
//! one missing and one new pair; several pair first by an equal path up to
//! case and normalization (a case-only rename), then by an equal file name
//! in another directory, each only when that key names one file on each
//! side; the rest stay a delete and an add and are reported
//! ([`Unpaired`]). Empty files never pair (every empty file has the same
//! content). A file moved and then edited stays a delete and an add:
//! content similarity is out of scope.
//!
//! When every tracked file under a directory moved to the same relative
//! names under another (a directory renamed or moved), the files are one
//! intent of the two directories, as `scribe move DIR NEW` records, so a
//! renamed directory of thousands of files is one pending move, not one
//! per file (the journal holds at most 1,024).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;

use rayon::prelude::*;
use scribe_format::path::is_under_prefix;
use scribe_format::OperationId;

use crate::error::Result;
use crate::moves::{self, MoveIntent, MovedFile};
use crate::records::BaselineRecord;
use crate::scan::ScannedFile;
use crate::state::Workspace;

/// A missing file `reconcile` found a file of its content for, left a
/// delete (and the new file an add), with the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unpaired {
    /// The missing tracked path (opened for delete).
    pub path: String,
    pub detail: String,
}

/// What [`find`] found: the intents to record (complete, in sequence
/// order) and the files it could not pair.
#[derive(Clone, Debug, Default)]
pub struct FoundMoves {
    pub intents: Vec<MoveIntent>,
    pub unpaired: Vec<Unpaired>,
}

/// An old path and its new path.
type Pair = (String, String);

/// The missing and the new files of one content (and size).
#[derive(Default)]
struct Group {
    gone: Vec<String>,
    new: Vec<String>,
}

/// One intent to record: its roots and its files.
struct Planned {
    source: String,
    destination: String,
    files: Vec<Pair>,
}

/// Whether nothing is at `p` (not following a final link): a file that
/// cannot be looked up for another reason (permissions) is not absent.
fn absent(p: &Path) -> bool {
    match std::fs::symlink_metadata(p) {
        Ok(_) => false,
        Err(e) => matches!(
            e.kind(),
            std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
        ),
    }
}

fn file_name(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// Pair the missing files of one content with its new files: one with
/// one, else by a key naming one file on each side (the whole path's
/// collision key, then the file name). Returns the pairs and the missing
/// files left.
fn pair_group(mut gone: Vec<String>, mut new: Vec<String>) -> (Vec<Pair>, Vec<String>) {
    if gone.len() == 1 && new.len() == 1 {
        return (vec![(gone.remove(0), new.remove(0))], Vec::new());
    }
    let mut pairs = Vec::new();
    let keys: [fn(&str) -> Vec<u8>; 2] = [
        |p| scribe_format::path::collision_key(p),
        |p| file_name(p).as_bytes().to_vec(),
    ];
    for key in keys {
        let mut count: HashMap<Vec<u8>, (usize, usize)> = HashMap::new();
        for p in &gone {
            count.entry(key(p)).or_default().0 += 1;
        }
        for p in &new {
            count.entry(key(p)).or_default().1 += 1;
        }
        let unique = |p: &str| count.get(&key(p)) == Some(&(1, 1));
        let mut left = Vec::new();
        for g in gone {
            if unique(&g) {
                if let Some(i) = new.iter().position(|n| key(n) == key(&g)) {
                    pairs.push((g, new.remove(i)));
                    continue;
                }
            }
            left.push(g);
        }
        gone = left;
    }
    (pairs, gone)
}

/// The candidate roots of a pair: the two paths with an equal trailing
/// run of whole components removed (`a/x/f.psd -> b/x/f.psd` gives
/// `a/x -> b/x` and `a -> b`); never the workspace root.
fn roots(old: &str, new: &str) -> Vec<(String, String)> {
    let o: Vec<&str> = old.split('/').collect();
    let n: Vec<&str> = new.split('/').collect();
    let mut out = Vec::new();
    let mut j = 1;
    while j < o.len() && j < n.len() && o[o.len() - j] == n[n.len() - j] {
        out.push((o[..o.len() - j].join("/"), n[..n.len() - j].join("/")));
        j += 1;
    }
    out
}

/// Find the moves among `gone` (tracked files `reconcile` would open for
/// delete: missing, not opened, not refused) and `new` (files it would
/// open for add: not opened, not refused). Reads only; the caller records
/// [`FoundMoves::intents`] with [`moves::open_moved`] in its transaction.
pub fn find(ws: &Workspace, gone: &[String], new: &[&ScannedFile]) -> Result<FoundMoves> {
    let mut out = FoundMoves::default();
    if gone.is_empty() || new.is_empty() {
        return Ok(out);
    }
    let read = ws.read()?;
    let existing = moves::load(&read)?;
    // An interrupted move blocks every workflow (the client refuses
    // reconcile first): nothing is paired against it.
    if existing.iter().any(|i| i.interrupted()) {
        return Ok(out);
    }
    let root = ws.root();
    let mut sources: Vec<(String, BaselineRecord)> = Vec::new();
    for p in gone {
        if let Some(b) = read.baseline(p)? {
            if b.size > 0 && b.change != 0 {
                sources.push((p.clone(), b));
            }
        }
    }
    let sizes: HashSet<u64> = sources.iter().map(|(_, b)| b.size).collect();
    let candidates: Vec<&ScannedFile> = new
        .iter()
        .copied()
        .filter(|f| sizes.contains(&f.fingerprint.size))
        .collect();
    if candidates.is_empty() {
        return Ok(out);
    }
    // Only files of a missing file's size are read, streaming; one that
    // cannot be read, or changed size while read, pairs with nothing.
    let hashed: Vec<(&ScannedFile, [u8; 32])> = candidates
        .par_iter()
        .filter_map(|f| match crate::detect::hash_file(&root.join(&f.path)) {
            Ok((id, n)) if n == f.fingerprint.size => Some((*f, id.0)),
            _ => None,
        })
        .collect();
    let mut groups: BTreeMap<([u8; 32], u64), Group> = BTreeMap::new();
    for (f, id) in &hashed {
        groups
            .entry((*id, f.fingerprint.size))
            .or_default()
            .new
            .push(f.path.clone());
    }
    let base_of: HashMap<&str, &BaselineRecord> =
        sources.iter().map(|(p, b)| (p.as_str(), b)).collect();
    for (p, b) in &sources {
        if let Some(g) = groups.get_mut(&(b.content.0, b.size)) {
            // Something still at the old path (on a case-insensitive file
            // system, the file renamed by case only, under its old name):
            // the move's undo renames the destination back there and would
            // find both sides present, and the old path would be reserved
            // while in use. Such a file stays a delete and an add.
            if !absent(&root.join(p)) {
                out.unpaired.push(Unpaired {
                    path: p.clone(),
                    detail: format!(
                        "not paired as a move with {}: something is still at the old path \
                         (on a case-insensitive file system, the renamed file itself); opened \
                         as delete and add",
                        g.new.join(", ")
                    ),
                });
                continue;
            }
            g.gone.push(p.clone());
        }
    }
    let mut pairs: Vec<Pair> = Vec::new();
    for (_, Group { gone: g, new: n }) in groups {
        if g.is_empty() {
            continue;
        }
        let (found, left) = pair_group(g.clone(), n.clone());
        for p in left {
            out.unpaired.push(Unpaired {
                path: p,
                detail: format!(
                    "not paired as a move: {} missing and {} new files have its content and \
                     neither path nor file name tells which went where (new: {}); opened as \
                     delete and add",
                    g.len(),
                    n.len(),
                    n.join(", ")
                ),
            });
        }
        pairs.extend(found);
    }
    if pairs.is_empty() {
        out.unpaired.sort_by(|a, b| a.path.cmp(&b.path));
        return Ok(out);
    }
    pairs.sort();
    let target: HashMap<&str, &str> = pairs
        .iter()
        .map(|(o, n)| (o.as_str(), n.as_str()))
        .collect();
    let opened: Vec<String> = read.opened_all()?.into_iter().map(|(p, _)| p).collect();
    let touches_opened = |root: &str| opened.iter().any(|p| is_under_prefix(p, root));
    // Directories first, shallowest first: a root pair is one intent when
    // every tracked file under the old root moved to the same relative
    // name under the new, the old root is gone, nothing tracked or opened
    // is under either, and the bounds of `scribe move` hold.
    let mut dirs: BTreeSet<(usize, String, String)> = BTreeSet::new();
    for (o, n) in &pairs {
        for (p, q) in roots(o, n) {
            dirs.insert((p.matches('/').count(), p, q));
        }
    }
    let mut taken: HashSet<String> = HashSet::new();
    let mut planned: Vec<Planned> = Vec::new();
    for (_, p, q) in dirs {
        if moves::overlaps(&p, &q) || !absent(&root.join(&p)) {
            continue;
        }
        let under = read.baseline_paths_under(&p)?;
        let whole = !under.is_empty()
            && under.len() <= moves::MAX_TRACKED
            && under.iter().all(|b| {
                !taken.contains(b)
                    && target.get(b.as_str()).copied() == Some(&*moves::substitute(b, &p, &q))
            });
        if !whole
            || touches_opened(&p)
            || touches_opened(&q)
            || !read.baseline_paths_under(&q)?.is_empty()
            || moves::count_entries(&root.join(&q), moves::MAX_DISCOVERED)
                .map_or(true, |n| n > moves::MAX_DISCOVERED)
        {
            continue;
        }
        let files = under
            .into_iter()
            .map(|b| {
                let d = moves::substitute(&b, &p, &q);
                (b, d)
            })
            .collect::<Vec<_>>();
        taken.extend(files.iter().map(|(b, _)| b.clone()));
        planned.push(Planned {
            source: p,
            destination: q,
            files,
        });
    }
    for (o, n) in &pairs {
        if taken.contains(o) {
            continue;
        }
        if moves::overlaps(o, n) {
            // `a/a` became the file `a` in place of its directory: a move
            // may not overlap itself.
            out.unpaired.push(Unpaired {
                path: o.clone(),
                detail: format!(
                    "not paired as a move with {n}: one path lies under the other; opened as \
                     delete and add"
                ),
            });
            continue;
        }
        planned.push(Planned {
            source: o.clone(),
            destination: n.clone(),
            files: vec![(o.clone(), n.clone())],
        });
    }
    // Record them as `scribe move` would, in order: a destination may not
    // overlap a pending (or just planned) move's source; each depends on
    // the older moves it overlaps; the journal bounds hold.
    let mut all = existing;
    let mut journal: usize = read
        .workflows_with_prefix("move/")?
        .iter()
        .map(|(k, v)| k.len() + v.len())
        .sum();
    drop(read);
    planned.sort_by(|a, b| a.source.cmp(&b.source));
    for Planned {
        source: src,
        destination: dst,
        files,
    } in planned
    {
        let why = if all.iter().any(|i| moves::overlaps(&dst, &i.source)) {
            Some("its new place overlaps a path vacated by a pending move".to_string())
        } else if all.len() >= moves::MAX_OPERATIONS {
            Some(format!(
                "{} moves are pending, the most the journal holds",
                moves::MAX_OPERATIONS
            ))
        } else {
            None
        };
        let mut intent = MoveIntent {
            operation: OperationId::random(),
            sequence: all.iter().map(|i| i.sequence).max().unwrap_or(0) + 1,
            source: src.clone(),
            destination: dst.clone(),
            staged: true,
            complete: true,
            aborting: false,
            dependencies: all
                .iter()
                .filter(|i| {
                    moves::overlaps(&i.source, &src)
                        || moves::overlaps(&i.source, &dst)
                        || moves::overlaps(&i.destination, &src)
                        || moves::overlaps(&i.destination, &dst)
                })
                .map(|i| i.operation)
                .collect(),
            files: files
                .iter()
                .map(|(o, n)| MovedFile {
                    physical_source: o.clone(),
                    destination: n.clone(),
                    original_source: o.clone(),
                    original_change: base_of.get(o.as_str()).map_or(0, |b| b.change),
                    prior: None,
                })
                .collect(),
        };
        intent
            .files
            .sort_by(|a, b| a.destination.cmp(&b.destination));
        let size = intent.key().len() + intent.encode().len();
        let why = why.or_else(|| {
            (journal + size > moves::MAX_JOURNAL_BYTES)
                .then(|| "the move journal would exceed 32 MiB".to_string())
        });
        // Never record what the journal's reader would refuse.
        let why = why.or_else(|| {
            let bad = intent.files.iter().any(|f| f.original_change == 0);
            intent
                .check()
                .err()
                .map(|e| e.to_string())
                .or(bad.then(|| "no recorded change to move from".to_string()))
        });
        match why {
            Some(why) => {
                for (o, n) in files {
                    out.unpaired.push(Unpaired {
                        path: o,
                        detail: format!(
                            "not paired as a move with {n}: {why}; opened as delete and add"
                        ),
                    });
                }
            }
            None => {
                journal += size;
                all.push(intent.clone());
                out.intents.push(intent);
            }
        }
    }
    out.unpaired.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

#[cfg(test)]
#[path = "found_moves_tests.rs"]
mod tests;

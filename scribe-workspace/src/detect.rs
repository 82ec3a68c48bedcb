//! Change detection: a walk compared with the recorded baselines.
//!
//! A file whose fresh stat equals a *settled* recorded fingerprint is
//! unchanged without reading it (section 9's settled-observation rule). Every
//! other candidate is hashed, on all cores, streaming; equal content with a
//! newer fingerprint is reported as a refresh so the next walk need not hash
//! it again.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;
use scribe_format::FileContentId;

use crate::baseline_index::BaselineIndex;
use crate::records::{BaselineRecord, Fingerprint};
use crate::scan::{walk_with, Scan, ScanOptions, ScanProblem, ScannedFile, Visit};

/// What changed at one path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LocalChange {
    /// A file with no baseline.
    New(ScannedFile),
    /// A file whose bytes or executable bit differ from its baseline.
    Modified {
        file: ScannedFile,
        content: FileContentId,
    },
    /// A baseline whose file is gone.
    Missing { path: String },
}

impl LocalChange {
    pub fn path(&self) -> &str {
        match self {
            LocalChange::New(f) => &f.path,
            LocalChange::Modified { file, .. } => &file.path,
            LocalChange::Missing { path } => path,
        }
    }
}

/// The outcome of comparing a walk with the baselines.
#[derive(Clone, Debug, Default)]
pub struct Detection {
    /// Changes in path order.
    pub changes: Vec<LocalChange>,
    /// Unchanged files whose fingerprint should be re-recorded (the old one
    /// was unsettled or stale), so later walks skip the hash.
    pub refreshed: Vec<(String, Fingerprint)>,
    /// Files that could not be read while hashing, with the error.
    pub unreadable: Vec<(String, String)>,
    /// How many files were hashed (for `--verbose` and benchmarks).
    pub hashed: usize,
}

/// BLAKE3 of a whole file, streaming in reads of up to 1 MiB through one
/// buffer per thread (hashing 100,000 small files allocates nothing per
/// file).
pub fn hash_file(path: &Path) -> std::io::Result<(FileContentId, u64)> {
    thread_local! {
        static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let mut file = File::open(path)?;
    BUF.with(|cell| {
        let mut owned;
        let mut borrowed = cell.try_borrow_mut().ok();
        let buf: &mut Vec<u8> = match borrowed.as_deref_mut() {
            Some(b) => b,
            None => {
                owned = Vec::new();
                &mut owned
            }
        };
        if buf.len() < 1 << 20 {
            buf.resize(1 << 20, 0);
        }
        let mut hasher = blake3::Hasher::new();
        let mut total = 0u64;
        loop {
            let n = match file.read(buf) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            total += n as u64;
        }
        Ok((FileContentId(*hasher.finalize().as_bytes()), total))
    })
}

/// Compare `scan` with `baselines` (sorted by path, unique).
///
/// `root` is the workspace root the scan was taken from.
pub fn detect(root: &Path, scan: &Scan, baselines: &[(String, BaselineRecord)]) -> Detection {
    let mut out = Detection::default();
    let mut candidates = Vec::new();
    let (mut i, mut j) = (0, 0);
    let files = &scan.files;
    while i < files.len() || j < baselines.len() {
        let order = match (files.get(i), baselines.get(j)) {
            (Some(f), Some((p, _))) => f.path.as_str().cmp(p.as_str()),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, _) => std::cmp::Ordering::Greater,
        };
        match order {
            std::cmp::Ordering::Less => {
                out.changes.push(LocalChange::New(files[i].clone()));
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.changes.push(LocalChange::Missing {
                    path: baselines[j].0.clone(),
                });
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                let (f, (_, base)) = (&files[i], &baselines[j]);
                let mode_same =
                    base.mode == u8::from(f.executable) || !crate::platform::HAS_EXECUTABLE_BIT;
                if !(mode_same && base.fingerprint.proves_unchanged(&f.fingerprint)) {
                    candidates.push((f, base));
                }
                i += 1;
                j += 1;
            }
        }
    }
    out.hashed = candidates.len();
    let hashed: Vec<_> = candidates
        .par_iter()
        .map(|&(f, base)| (f, base, hash_file(&root.join(&f.path))))
        .collect();
    for (f, base, result) in hashed {
        match result {
            Err(e) => out.unreadable.push((f.path.clone(), e.to_string())),
            Ok((content, _)) => {
                let mode_same =
                    base.mode == u8::from(f.executable) || !crate::platform::HAS_EXECUTABLE_BIT;
                if content == base.content && mode_same {
                    out.refreshed.push((f.path.clone(), f.fingerprint));
                } else {
                    out.changes.push(LocalChange::Modified {
                        file: f.clone(),
                        content,
                    });
                }
            }
        }
    }
    out.changes.sort_by(|a, b| a.path().cmp(b.path()));
    out
}

/// Files of one directory walk compared against the index in place.
#[derive(Default)]
struct Found {
    /// Files without a baseline.
    new: Vec<ScannedFile>,
    /// Files whose stat does not prove them unchanged, with their entry.
    candidates: Vec<(ScannedFile, usize)>,
}

struct Compare<'a> {
    index: &'a BaselineIndex,
    seen: Vec<AtomicBool>,
}

/// One directory's slice of the index: the entries `[lo, hi)` under it,
/// the length of `dir/`, and for a directory whose range is mostly its own
/// files a hash table of those (entry + 1, 0 = empty; `mask` = size - 1),
/// so each file costs one hash and one compare instead of a binary search.
struct DirSlice {
    lo: usize,
    hi: usize,
    skip: usize,
    table: Vec<u32>,
    mask: usize,
}

/// FNV-1a of a name (a handful of bytes; no need for more).
fn name_hash(name: &[u8]) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in name {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h ^ (h >> 29)) as usize
}

impl DirSlice {
    fn find(&self, index: &BaselineIndex, name: &str) -> Option<usize> {
        if self.table.is_empty() {
            return index.find_in(self.lo, self.hi, self.skip, name);
        }
        let mut at = name_hash(name.as_bytes()) & self.mask;
        loop {
            let slot = self.table[at] as usize;
            if slot == 0 {
                return None;
            }
            let i = slot - 1;
            if index.path_tail(i, self.skip) == name.as_bytes() {
                return Some(i);
            }
            at = (at + 1) & self.mask;
        }
    }
}

impl Visit for Compare<'_> {
    type Dir = DirSlice;
    type Acc = Found;

    fn dir(&self, rel: &str, entries: usize) -> DirSlice {
        let (lo, hi) = self.index.range_under(rel);
        let skip = if rel.is_empty() { 0 } else { rel.len() + 1 };
        let mut slice = DirSlice {
            lo,
            hi,
            skip,
            table: Vec::new(),
            mask: 0,
        };
        // Worth a table when there are files to look up and the range is
        // not mostly deeper entries (the root of a big tree is not).
        let span = hi - lo;
        if entries >= 8 && span <= 4 * entries + 64 && u32::try_from(hi).is_ok() {
            let size = (2 * span).next_power_of_two().max(16);
            let mut table = vec![0u32; size];
            let mask = size - 1;
            for i in lo..hi {
                let tail = self.index.path_tail(i, skip);
                if tail.contains(&b'/') {
                    continue; // in a subdirectory
                }
                let mut at = name_hash(tail) & mask;
                while table[at] != 0 {
                    at = (at + 1) & mask;
                }
                table[at] = (i + 1) as u32;
            }
            slice.table = table;
            slice.mask = mask;
        }
        slice
    }

    fn file(
        &self,
        dir: &DirSlice,
        acc: &mut Found,
        path: &str,
        name: &str,
        fingerprint: Fingerprint,
        executable: bool,
    ) {
        let file = || ScannedFile {
            path: path.to_string(),
            fingerprint,
            executable,
        };
        debug_assert_eq!(path.len(), dir.skip + name.len());
        let Some(i) = dir.find(self.index, name) else {
            acc.new.push(file());
            return;
        };
        if let Some(seen) = self.seen.get(i) {
            seen.store(true, Ordering::Relaxed);
        }
        let mode_same =
            self.index.mode(i) == u8::from(executable) || !crate::platform::HAS_EXECUTABLE_BIT;
        if !(mode_same && self.index.fingerprint(i).proves_unchanged(&fingerprint)) {
            acc.candidates.push((file(), i));
        }
    }

    fn tracked(&self, dir: &DirSlice, _path: &str, name: &str) -> bool {
        dir.find(self.index, name).is_some()
    }

    fn tracks_under(&self, rel: &str) -> bool {
        let (lo, hi) = self.index.range_under(rel);
        lo < hi
    }

    fn join(into: &mut Found, mut part: Found) {
        into.new.append(&mut part.new);
        into.candidates.append(&mut part.candidates);
    }
}

/// Walk `root` (limited to `options.prefixes`) and compare each file with
/// `index` as it is stat'ed: a file whose settled fingerprint matches costs
/// one stat and a lookup, nothing is allocated for it. Candidates are
/// hashed and compared with their full record from `record` (the
/// `state.redb` row: the content id is not in the index).
///
/// Returns the detection (with `refreshed` naming index entries through
/// their paths) and the walk's problems. Equal to `detect(scan(...),
/// baselines under the prefixes)`.
pub fn detect_indexed(
    root: &Path,
    options: &ScanOptions,
    index: &BaselineIndex,
    record: impl Fn(&str) -> crate::error::Result<Option<BaselineRecord>> + Sync,
) -> crate::error::Result<(Detection, Vec<ScanProblem>)> {
    let compare = Compare {
        index,
        seen: (0..index.len()).map(|_| AtomicBool::new(false)).collect(),
    };
    let (mut found, problems) = walk_with(root, options, &compare);
    let mut out = Detection::default();
    // Overlapping prefixes may visit a file twice.
    found.new.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    found.new.dedup_by(|a, b| a.path == b.path);
    found.candidates.sort_unstable_by_key(|(_, i)| *i);
    found.candidates.dedup_by_key(|(_, i)| *i);
    let prefixes: Vec<&String> = options.prefixes.iter().collect();
    let in_scope = |p: &str| {
        prefixes.is_empty()
            || prefixes.iter().any(|x| x.is_empty())
            || prefixes
                .iter()
                .any(|x| scribe_format::path::is_under_prefix(p, x))
    };
    for (i, seen) in compare.seen.iter().enumerate() {
        if !seen.load(Ordering::Relaxed) {
            let path = index.path(i);
            if in_scope(path) {
                out.changes.push(LocalChange::Missing {
                    path: path.to_string(),
                });
            }
        }
    }
    out.changes
        .extend(found.new.into_iter().map(LocalChange::New));
    // Each candidate's row and its hash, in parallel.
    let looked: Vec<_> = found
        .candidates
        .into_par_iter()
        .map(|(f, _)| match record(&f.path) {
            Err(e) => Err(e),
            Ok(None) => Ok((f, None)),
            Ok(Some(base)) => {
                let hashed = hash_file(&root.join(&f.path));
                Ok((f, Some((base, hashed))))
            }
        })
        .collect();
    let mut hashed = Vec::with_capacity(looked.len());
    for item in looked {
        match item? {
            // The index named it, the state does not: treat as new (the
            // index is only a cache; state.redb decides).
            (f, None) => out.changes.push(LocalChange::New(f)),
            (f, Some((base, result))) => hashed.push((f, base, result)),
        }
    }
    out.hashed = hashed.len();
    for (f, base, result) in hashed {
        match result {
            Err(e) => out.unreadable.push((f.path.clone(), e.to_string())),
            Ok((content, _)) => {
                let mode_same =
                    base.mode == u8::from(f.executable) || !crate::platform::HAS_EXECUTABLE_BIT;
                if content == base.content && mode_same {
                    out.refreshed.push((f.path.clone(), f.fingerprint));
                } else {
                    out.changes.push(LocalChange::Modified { file: f, content });
                }
            }
        }
    }
    out.changes.sort_by(|a, b| a.path().cmp(b.path()));
    out.refreshed.sort_by(|a, b| a.0.cmp(&b.0));
    out.unreadable.sort();
    Ok((out, problems))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::{scan, ScanOptions};
    use std::fs;

    fn baseline_for(root: &Path, path: &str, recorded_ms: u64) -> (String, BaselineRecord) {
        let meta = fs::metadata(root.join(path)).unwrap();
        let (content, size) = hash_file(&root.join(path)).unwrap();
        (
            path.to_string(),
            BaselineRecord {
                incarnation: [0; 16],
                manifest: scribe_format::ManifestId([0; 32]),
                content,
                size,
                mode: u8::from(crate::platform::is_executable(&meta)),
                change: 1,
                fingerprint: crate::records::fingerprint_of(&meta, recorded_ms),
            },
        )
    }

    #[test]
    fn settled_fingerprints_skip_hashing_and_changes_are_found() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for name in ["a", "b", "c", "d"] {
            fs::write(root.join(name), name.repeat(10)).unwrap();
        }
        let far_future = crate::scan::now_ms() + 10_000_000;
        let mut baselines: Vec<_> = ["a", "b", "c", "d"]
            .iter()
            .map(|p| baseline_for(root, p, far_future))
            .collect();
        // "d" was observed too soon after its write: unsettled.
        baselines[3].1.fingerprint.recorded_ms = 0;
        fs::write(root.join("b"), "changed!").unwrap();
        fs::remove_file(root.join("c")).unwrap();
        fs::write(root.join("e"), "new").unwrap();
        let s = scan(root, &ScanOptions::default());
        let d = detect(root, &s, &baselines);
        let summary: Vec<(String, &str)> = d
            .changes
            .iter()
            .map(|c| {
                let kind = match c {
                    LocalChange::New(_) => "new",
                    LocalChange::Modified { .. } => "modified",
                    LocalChange::Missing { .. } => "missing",
                };
                (c.path().to_string(), kind)
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                ("b".to_string(), "modified"),
                ("c".to_string(), "missing"),
                ("e".to_string(), "new")
            ]
        );
        // Only b (different stat) and d (unsettled) were hashed; a was proven by stat.
        assert_eq!(d.hashed, 2);
        assert_eq!(d.refreshed.len(), 1);
        assert_eq!(d.refreshed[0].0, "d");
    }

    #[test]
    fn touched_mtime_with_same_content_is_a_refresh_not_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("f"), "same").unwrap();
        let base = vec![baseline_for(root, "f", crate::scan::now_ms() + 10_000_000)];
        let f = File::options().write(true).open(root.join("f")).unwrap();
        f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5))
            .unwrap();
        drop(f);
        let d = detect(root, &scan(root, &ScanOptions::default()), &base);
        assert!(d.changes.is_empty(), "{:?}", d.changes);
        assert_eq!(d.hashed, 1);
        assert_eq!(d.refreshed.len(), 1);
    }
}

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

use rayon::prelude::*;
use scribe_format::FileContentId;

use crate::records::{BaselineRecord, Fingerprint};
use crate::scan::{Scan, ScannedFile};

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

/// BLAKE3 of a whole file, streaming in 1 MiB reads.
pub fn hash_file(path: &Path) -> std::io::Result<(FileContentId, u64)> {
    let mut file = File::open(path)?;
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        total += n as u64;
    }
    Ok((FileContentId(*hasher.finalize().as_bytes()), total))
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
                fingerprint: crate::scan::fingerprint_of(&meta, recorded_ms),
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

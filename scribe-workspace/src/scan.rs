//! The parallel walk of a working copy.
//!
//! [`scan`] visits every file under the workspace root on all cores and
//! returns its canonical path and a fresh [`Fingerprint`] (one stat, no
//! reads). Ignore rules come from versioned `.scribeignore` files (gitignore
//! syntax, in any directory) and the local `.scribe/_state/ignore`. The
//! workspace's own `.scribe/_state` and nested workspaces (any directory
//! holding `.scribe/_state`) are never entered. Git's ignore files are not
//! consulted: what Scribe versions is Scribe's decision.
//!
//! Names that are not canonical paths (a `:` in a name, a reserved device
//! name, non-UTF-8 bytes, ...) are reported as [`ScanProblem`]s, never
//! silently dropped, so `status` can show them.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{SystemTime, UNIX_EPOCH};

use ignore::{WalkBuilder, WalkState};

use crate::platform;
use crate::records::Fingerprint;

/// The versioned ignore file name.
pub const IGNORE_FILE: &str = ".scribeignore";
/// The workspace state directory, relative to the root.
pub const STATE_DIR: &str = ".scribe/_state";

/// One file found by the walk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScannedFile {
    /// Canonical workspace path (`/`-separated).
    pub path: String,
    pub fingerprint: Fingerprint,
    pub executable: bool,
}

/// Something the walk found but cannot version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanProblem {
    /// The path relative to the root, lossily rendered.
    pub path: String,
    /// A stable code (a path rule code, `symlink`, `not_utf8`, `io`).
    pub code: String,
    pub detail: String,
}

/// The result of a walk, sorted by path.
#[derive(Clone, Debug, Default)]
pub struct Scan {
    pub files: Vec<ScannedFile>,
    pub problems: Vec<ScanProblem>,
}

/// Options of a walk.
#[derive(Clone, Debug, Default)]
pub struct ScanOptions {
    /// Only walk these canonical path prefixes (empty = everything).
    pub prefixes: Vec<String>,
    /// Worker threads (0 = one per core).
    pub threads: usize,
}

enum Found {
    File(ScannedFile),
    Problem(ScanProblem),
}

/// Current Unix time in milliseconds.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The fingerprint of a file's metadata observed at `recorded_ms`.
pub fn fingerprint_of(meta: &std::fs::Metadata, recorded_ms: u64) -> Fingerprint {
    let (mtime_s, mtime_ns) = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| (d.as_secs(), d.subsec_nanos()))
        .unwrap_or((0, 0));
    Fingerprint {
        size: meta.len(),
        mtime_s,
        mtime_ns,
        recorded_ms,
    }
}

/// Walk the working copy under `root`.
pub fn scan(root: &Path, options: &ScanOptions) -> Scan {
    let starts: Vec<PathBuf> = if options.prefixes.is_empty() {
        vec![root.to_path_buf()]
    } else {
        options
            .prefixes
            .iter()
            .map(|p| root.join(p))
            .filter(|p| p.exists())
            .collect()
    };
    let Some((first, rest)) = starts.split_first() else {
        return Scan::default();
    };
    let mut builder = WalkBuilder::new(first);
    for s in rest {
        builder.add(s);
    }
    builder
        .standard_filters(false)
        .follow_links(false)
        .threads(options.threads)
        .current_dir(root)
        .add_custom_ignore_filename(IGNORE_FILE);
    let local_ignore = root.join(STATE_DIR).join("ignore");
    if local_ignore.is_file() {
        // A malformed line is skipped by the ignore crate; the rest apply.
        let _ = builder.add_ignore(&local_ignore);
    }
    let state_dir = root.join(STATE_DIR);
    let root_owned = root.to_path_buf();
    builder.filter_entry(move |entry| {
        let path = entry.path();
        if path == state_dir {
            return false;
        }
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        // A nested workspace belongs to itself.
        !(is_dir && path != root_owned && path.join(STATE_DIR).is_dir())
    });

    let recorded_ms = now_ms();
    let (tx, rx) = mpsc::channel::<Found>();
    builder.build_parallel().run(|| {
        let tx = tx.clone();
        let root = root.to_path_buf();
        Box::new(move |entry| {
            let found = match entry {
                Ok(entry) => visit(&root, &entry, recorded_ms),
                Err(err) => Some(Found::Problem(ScanProblem {
                    path: String::new(),
                    code: "io".into(),
                    detail: err.to_string(),
                })),
            };
            if let Some(found) = found {
                let _ = tx.send(found);
            }
            WalkState::Continue
        })
    });
    drop(tx);
    let mut out = Scan::default();
    for found in rx {
        match found {
            Found::File(f) => out.files.push(f),
            Found::Problem(p) => out.problems.push(p),
        }
    }
    out.files.sort_by(|a, b| a.path.cmp(&b.path));
    out.files.dedup_by(|a, b| a.path == b.path);
    out.problems.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

fn visit(root: &Path, entry: &ignore::DirEntry, recorded_ms: u64) -> Option<Found> {
    let file_type = entry.file_type()?;
    if file_type.is_dir() {
        return None;
    }
    let rel = entry.path().strip_prefix(root).ok()?;
    let lossy = rel.to_string_lossy().replace('\\', "/");
    if file_type.is_symlink() {
        return Some(Found::Problem(ScanProblem {
            path: lossy,
            code: "symlink".into(),
            detail: "symbolic links are not versioned".into(),
        }));
    }
    let Some(path) = canonical_relative(rel) else {
        return Some(Found::Problem(ScanProblem {
            path: lossy,
            code: "not_utf8".into(),
            detail: "the name is not valid UTF-8".into(),
        }));
    };
    if let Err(e) = scribe_format::path::validate_file_path(&path) {
        return Some(Found::Problem(ScanProblem {
            path,
            code: e.code().into(),
            detail: e.to_string(),
        }));
    }
    match std::fs::symlink_metadata(entry.path()) {
        Ok(meta) => Some(Found::File(ScannedFile {
            path,
            fingerprint: fingerprint_of(&meta, recorded_ms),
            executable: platform::is_executable(&meta),
        })),
        Err(err) => Some(Found::Problem(ScanProblem {
            path,
            code: "io".into(),
            detail: err.to_string(),
        })),
    }
}

/// A relative OS path as a `/`-separated string, if every component is UTF-8.
pub fn canonical_relative(rel: &Path) -> Option<String> {
    let mut out = String::new();
    for component in rel.components() {
        let std::path::Component::Normal(name) = component else {
            return None;
        };
        if !out.is_empty() {
            out.push('/');
        }
        out.push_str(name.to_str()?);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn write(root: &Path, rel: &str, bytes: &[u8]) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, bytes).unwrap();
    }

    fn paths(scan: &Scan) -> Vec<&str> {
        scan.files.iter().map(|f| f.path.as_str()).collect()
    }

    #[test]
    fn walks_respecting_ignores_state_and_nested_workspaces() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "art/hero.psd", b"psd");
        write(root, "art/tmp/cache.bin", b"x");
        write(root, "art/.scribeignore", b"tmp/\n*.log\n");
        write(root, "art/build.log", b"log");
        write(root, "levels/ünïcode.map", b"map");
        write(root, ".scribe/_state/state.redb", b"state");
        write(root, ".scribe/flows/build.yml", b"flow");
        write(root, "nested/.scribe/_state/SCRIBE_FORMAT", b"x");
        write(root, "nested/file", b"x");
        write(root, "local.tmp", b"x");
        write(root, ".scribe/_state/ignore", b"*.tmp\n");
        let scan = scan(root, &ScanOptions::default());
        assert_eq!(
            paths(&scan),
            vec![
                ".scribe/flows/build.yml",
                "art/.scribeignore",
                "art/hero.psd",
                "levels/ünïcode.map"
            ]
        );
        assert!(scan.problems.is_empty(), "{:?}", scan.problems);
        let hero = &scan.files[2];
        assert_eq!(hero.fingerprint.size, 3);
        assert!(hero.fingerprint.recorded_ms > 0);
    }

    #[test]
    fn reports_names_that_cannot_be_versioned() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "ok.txt", b"x");
        write(root, "bad:name.txt", b"x");
        write(root, "CON.txt", b"x");
        let scan = scan(root, &ScanOptions::default());
        assert_eq!(paths(&scan), vec!["ok.txt"]);
        let codes: Vec<&str> = scan.problems.iter().map(|p| p.code.as_str()).collect();
        assert_eq!(codes, vec!["reserved_device_name", "forbidden_character"]);
    }

    #[cfg(unix)]
    #[test]
    fn executable_bit_and_symlinks() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "tool.sh", b"#!/bin/sh\n");
        fs::set_permissions(root.join("tool.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        write(root, "plain", b"x");
        std::os::unix::fs::symlink("plain", root.join("link")).unwrap();
        let scan = scan(root, &ScanOptions::default());
        assert_eq!(paths(&scan), vec!["plain", "tool.sh"]);
        assert!(!scan.files[0].executable);
        assert!(scan.files[1].executable);
        assert_eq!(scan.problems[0].code, "symlink");
    }

    #[test]
    fn prefixes_limit_the_walk() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "a/1", b"x");
        write(root, "b/2", b"x");
        write(root, "c/3", b"x");
        let scan = scan(
            root,
            &ScanOptions {
                prefixes: vec!["a".into(), "c".into(), "missing".into()],
                threads: 2,
            },
        );
        assert_eq!(paths(&scan), vec!["a/1", "c/3"]);
    }
}

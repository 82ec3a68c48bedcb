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
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;
use rayon::prelude::*;

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
    if options.threads == 0 {
        return scan_here(root, options);
    }
    match rayon::ThreadPoolBuilder::new()
        .num_threads(options.threads)
        .build()
    {
        Ok(pool) => pool.install(|| scan_here(root, options)),
        Err(_) => scan_here(root, options),
    }
}

/// Ignore matchers from the root down to the directory being walked.
type Stack = Vec<Arc<Gitignore>>;

/// Whether `path` is ignored: the deepest matcher with an opinion wins
/// (gitignore precedence); the local ignore file is consulted last.
fn ignored(stack: &Stack, local: Option<&Gitignore>, path: &Path, is_dir: bool) -> bool {
    for g in stack.iter().rev() {
        match g.matched(path, is_dir) {
            Match::Ignore(_) => return true,
            Match::Whitelist(_) => return false,
            Match::None => {}
        }
    }
    matches!(
        local.map(|g| g.matched(path, is_dir)),
        Some(Match::Ignore(_))
    )
}

/// The stack with `dir`'s own `.scribeignore` pushed, if it has one.
fn push_ignore(stack: &Arc<Stack>, dir: &Path) -> Arc<Stack> {
    let file = dir.join(IGNORE_FILE);
    if !file.is_file() {
        return stack.clone();
    }
    push_ignore_file(stack, dir, &file)
}

fn push_ignore_file(stack: &Arc<Stack>, dir: &Path, file: &Path) -> Arc<Stack> {
    let mut b = GitignoreBuilder::new(dir);
    // A malformed line is skipped; the rest apply.
    let _ = b.add(file);
    match b.build() {
        Ok(g) => {
            let mut next = (**stack).clone();
            next.push(Arc::new(g));
            Arc::new(next)
        }
        Err(_) => stack.clone(),
    }
}

struct Walk<'a> {
    root: &'a Path,
    state_dir: PathBuf,
    local: Option<Gitignore>,
    recorded_ms: u64,
}

#[derive(Default)]
struct Part {
    files: Vec<ScannedFile>,
    problems: Vec<ScanProblem>,
}

impl Part {
    fn concat(parts: Vec<Part>) -> Part {
        let n = parts.iter().map(|p| p.files.len()).sum();
        let mut out = Part {
            files: Vec::with_capacity(n),
            problems: Vec::new(),
        };
        for p in parts {
            out.files.extend(p.files);
            out.problems.extend(p.problems);
        }
        out
    }

    fn merge(mut self, other: Part) -> Part {
        self.files.extend(other.files);
        self.problems.extend(other.problems);
        self
    }
}

impl Walk<'_> {
    /// Walk `dir` (absolute) whose canonical path is `rel` ("" = root).
    /// Entries are stat'ed through their directory handle (`fstatat`), not
    /// by full path; subdirectories are walked in parallel.
    fn dir(&self, dir: &Path, rel: &str, stack: &Arc<Stack>, out: &mut Vec<Part>) {
        let mut part = Part::default();
        let rd = match std::fs::read_dir(dir) {
            Ok(rd) => rd,
            Err(err) => {
                part.problems.push(ScanProblem {
                    path: rel.to_string(),
                    code: "io".into(),
                    detail: err.to_string(),
                });
                out.push(part);
                return;
            }
        };
        // One listing answers both "has a .scribeignore" and "is a nested
        // workspace" without extra lookups per directory.
        let entries: Vec<std::io::Result<std::fs::DirEntry>> = rd.collect();
        let mut has_ignore = false;
        let mut has_scribe = false;
        for e in entries.iter().flatten() {
            let n = e.file_name();
            has_ignore |= n == IGNORE_FILE;
            has_scribe |= n == scribe_format::path::SCRIBE_DIR;
        }
        if has_scribe && !rel.is_empty() && dir.join(STATE_DIR).is_dir() {
            // A nested workspace belongs to itself.
            return;
        }
        let stack = if has_ignore {
            push_ignore_file(stack, dir, &dir.join(IGNORE_FILE))
        } else {
            stack.clone()
        };
        // Validate the directory once; each file then checks only its name
        // (a full check runs when that fails, for the exact error, and for
        // anything under a `.scribe` directory).
        let dir_ok = rel.is_empty() || scribe_format::path::validate(rel).is_ok();
        let under_scribe = !rel.is_empty()
            && scribe_format::path::collision_key(scribe_format::path::file_name(rel))
                == scribe_format::path::collision_key(scribe_format::path::SCRIBE_DIR);
        let quick = dir_ok && !under_scribe;
        let mut subdirs = Vec::new();
        for entry in entries {
            let entry = match entry {
                Ok(e) => e,
                Err(err) => {
                    part.problems.push(ScanProblem {
                        path: rel.to_string(),
                        code: "io".into(),
                        detail: err.to_string(),
                    });
                    continue;
                }
            };
            let Ok(file_type) = entry.file_type() else {
                continue;
            };
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                let lossy = name.to_string_lossy();
                part.problems.push(ScanProblem {
                    path: if rel.is_empty() {
                        lossy.into_owned()
                    } else {
                        format!("{rel}/{lossy}")
                    },
                    code: "not_utf8".into(),
                    detail: "the name is not valid UTF-8".into(),
                });
                continue;
            };
            let path = if rel.is_empty() {
                name.to_string()
            } else {
                format!("{rel}/{name}")
            };
            if file_type.is_dir() {
                let full = entry.path();
                if full == self.state_dir || ignored(&stack, self.local.as_ref(), &full, true) {
                    continue;
                }
                subdirs.push((full, path));
                continue;
            }
            let is_ignored = if stack.is_empty() {
                // The local rules are rooted at the workspace root, so the
                // relative path is enough (no allocation per file).
                matches!(
                    self.local
                        .as_ref()
                        .map(|g| g.matched(Path::new(&path), false)),
                    Some(Match::Ignore(_))
                )
            } else {
                ignored(&stack, self.local.as_ref(), &entry.path(), false)
            };
            if is_ignored {
                continue;
            }
            if file_type.is_symlink() {
                part.problems.push(ScanProblem {
                    path,
                    code: "symlink".into(),
                    detail: "symbolic links are not versioned".into(),
                });
                continue;
            }
            let valid = quick
                && path.len() <= scribe_format::limits::MAX_PATH_BYTES
                && scribe_format::path::validate_file_path(name).is_ok();
            if !valid {
                if let Err(e) = scribe_format::path::validate_file_path(&path) {
                    part.problems.push(ScanProblem {
                        path,
                        code: e.code().into(),
                        detail: e.to_string(),
                    });
                    continue;
                }
            }
            match entry.metadata() {
                Ok(meta) => part.files.push(ScannedFile {
                    path,
                    fingerprint: fingerprint_of(&meta, self.recorded_ms),
                    executable: platform::is_executable(&meta),
                }),
                Err(err) => part.problems.push(ScanProblem {
                    path,
                    code: "io".into(),
                    detail: err.to_string(),
                }),
            }
        }
        out.push(part);
        let below: Vec<Vec<Part>> = subdirs
            .par_iter()
            .map(|(full, path)| {
                let mut parts = Vec::new();
                self.dir(full, path, &stack, &mut parts);
                parts
            })
            .collect();
        for mut b in below {
            out.append(&mut b);
        }
    }

    /// The ignore stack in effect inside `rel` (from the root's
    /// `.scribeignore` down to `rel`'s parent), and whether `rel` itself or
    /// one of its ancestors is excluded.
    fn stack_for(&self, rel: &str) -> (Arc<Stack>, bool) {
        let mut stack = Arc::new(Stack::new());
        let mut dir = self.root.to_path_buf();
        let comps: Vec<&str> = rel.split('/').filter(|c| !c.is_empty()).collect();
        for (i, c) in comps.iter().enumerate() {
            stack = push_ignore(&stack, &dir);
            dir.push(c);
            let is_dir = i + 1 < comps.len() || dir.is_dir();
            if dir == self.state_dir
                || (is_dir && dir.join(STATE_DIR).is_dir())
                || ignored(&stack, self.local.as_ref(), &dir, is_dir)
            {
                return (stack, true);
            }
        }
        (stack, false)
    }
}

fn scan_here(root: &Path, options: &ScanOptions) -> Scan {
    let local_path = root.join(STATE_DIR).join("ignore");
    let local = if local_path.is_file() {
        let mut b = GitignoreBuilder::new(root);
        let _ = b.add(&local_path);
        b.build().ok()
    } else {
        None
    };
    let walk = Walk {
        root,
        state_dir: root.join(STATE_DIR),
        local,
        recorded_ms: now_ms(),
    };
    let prefixes: Vec<String> = if options.prefixes.iter().any(|p| p.is_empty()) {
        Vec::new()
    } else {
        options.prefixes.clone()
    };
    let part = if prefixes.is_empty() {
        let mut parts = Vec::new();
        walk.dir(root, "", &Arc::new(Stack::new()), &mut parts);
        Part::concat(parts)
    } else {
        prefixes
            .par_iter()
            .map(|prefix| {
                let full = root.join(prefix);
                let Ok(meta) = std::fs::symlink_metadata(&full) else {
                    return Part::default();
                };
                let (stack, excluded) = walk.stack_for(prefix);
                if excluded {
                    return Part::default();
                }
                if meta.is_dir() {
                    let mut parts = Vec::new();
                    walk.dir(&full, prefix, &stack, &mut parts);
                    return Part::concat(parts);
                }
                let mut part = Part::default();
                if meta.file_type().is_symlink() {
                    part.problems.push(ScanProblem {
                        path: prefix.clone(),
                        code: "symlink".into(),
                        detail: "symbolic links are not versioned".into(),
                    });
                } else if let Err(e) = scribe_format::path::validate_file_path(prefix) {
                    part.problems.push(ScanProblem {
                        path: prefix.clone(),
                        code: e.code().into(),
                        detail: e.to_string(),
                    });
                } else {
                    part.files.push(ScannedFile {
                        path: prefix.clone(),
                        fingerprint: fingerprint_of(&meta, walk.recorded_ms),
                        executable: platform::is_executable(&meta),
                    });
                }
                part
            })
            .reduce(Part::default, Part::merge)
    };
    let mut out = Scan {
        files: part.files,
        problems: part.problems,
    };
    out.files.par_sort_unstable_by(|a, b| a.path.cmp(&b.path));
    out.files.dedup_by(|a, b| a.path == b.path);
    out.problems.sort_by(|a, b| a.path.cmp(&b.path));
    out
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

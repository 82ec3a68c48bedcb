//! The parallel walk of a working copy.
//!
//! [`scan`] visits every file under the workspace root on all cores and
//! returns its canonical path and a fresh [`Fingerprint`] (one stat, no
//! reads). Ignore rules come from versioned `.scribeignore` files (gitignore
//! syntax, in any directory) and the local `.scribe/_state/ignore`. As
//! git's, they apply to untracked files only: a visitor that knows the
//! tracked paths ([`Visit::tracked`], [`Visit::tracks_under`]) has every
//! tracked file visited whatever the rules say (an ignored directory is
//! still entered for the tracked files in it, and only for those). The
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
use crate::platform::walk::{DirReader, Kind};
use crate::records::Fingerprint;

use crate::records::fingerprint_of;

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
    /// A stable code (a path rule code, `symlink`, `beyond_symlink`,
    /// `not_utf8`, `io`).
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
/// The problem code of a FIFO, socket or device found by a walk.
pub const SPECIAL_CODE: &str = "special_file";
const SPECIAL_DETAIL: &str =
    "a FIFO, socket or device is not a regular file: Scribe versions regular files only";

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Walk the working copy under `root`; every file the ignore rules match
/// is left out.
pub fn scan(root: &Path, options: &ScanOptions) -> Scan {
    scan_tracking(root, options, None)
}

/// [`scan`] with the ignore rules applied to untracked files only: the
/// files named in `tracked` (canonical paths) are found even where a rule
/// matches them or their directory.
pub fn scan_tracking(
    root: &Path,
    options: &ScanOptions,
    tracked: Option<&std::collections::BTreeSet<String>>,
) -> Scan {
    let (files, problems) = walk_with(root, options, &Collect { tracked });
    let mut out = Scan { files, problems };
    out.files.par_sort_unstable_by(|a, b| a.path.cmp(&b.path));
    out.files.dedup_by(|a, b| a.path == b.path);
    out
}

/// What the walk does with each file it accepts (not ignored, not a
/// symlink, a valid canonical path, stat'ed). One implementation collects
/// [`ScannedFile`]s ([`scan`]); change detection compares in place instead,
/// so unchanged files cost no allocation.
pub(crate) trait Visit: Sync {
    /// Per-directory context, made once before the directory's files.
    type Dir;
    /// What one directory's files produce; parts are joined in any order.
    type Acc: Default + Send;
    /// Enter directory `rel` (canonical, "" = root) listing `entries`
    /// names.
    fn dir(&self, rel: &str, entries: usize) -> Self::Dir;
    /// One file: its canonical `path`, whose last component is `name`.
    fn file(
        &self,
        dir: &Self::Dir,
        acc: &mut Self::Acc,
        path: &str,
        name: &str,
        fingerprint: Fingerprint,
        executable: bool,
    );
    fn join(into: &mut Self::Acc, part: Self::Acc);
    /// Whether the file `path` (last component `name`, in the directory
    /// `dir` was made for) is tracked: ignore rules do not apply to it.
    fn tracked(&self, _dir: &Self::Dir, _path: &str, _name: &str) -> bool {
        false
    }
    /// Whether any tracked file lies under directory `rel`: an ignored
    /// directory is still entered for them.
    fn tracks_under(&self, _rel: &str) -> bool {
        false
    }
}

struct Collect<'a> {
    tracked: Option<&'a std::collections::BTreeSet<String>>,
}

impl Visit for Collect<'_> {
    type Dir = ();
    type Acc = Vec<ScannedFile>;
    fn dir(&self, _rel: &str, _entries: usize) {}
    fn tracked(&self, _dir: &(), path: &str, _name: &str) -> bool {
        self.tracked.is_some_and(|t| t.contains(path))
    }
    fn tracks_under(&self, rel: &str) -> bool {
        let Some(t) = self.tracked else {
            return false;
        };
        let under = format!("{rel}/");
        t.range(under.clone()..)
            .next()
            .is_some_and(|p| p.starts_with(&under))
    }
    fn file(
        &self,
        _dir: &(),
        acc: &mut Vec<ScannedFile>,
        path: &str,
        _name: &str,
        fingerprint: Fingerprint,
        executable: bool,
    ) {
        acc.push(ScannedFile {
            path: path.to_string(),
            fingerprint,
            executable,
        });
    }
    fn join(into: &mut Vec<ScannedFile>, mut part: Vec<ScannedFile>) {
        if into.is_empty() {
            *into = part;
        } else {
            into.append(&mut part);
        }
    }
}

/// Walk with `visit` on `options.threads` threads; problems sorted by path.
pub(crate) fn walk_with<V: Visit>(
    root: &Path,
    options: &ScanOptions,
    visit: &V,
) -> (V::Acc, Vec<ScanProblem>) {
    walk_with_reader(root, options, visit, &platform::NATIVE)
}

/// [`walk_with`] through a given directory reader.
pub(crate) fn walk_with_reader<V: Visit, R: DirReader>(
    root: &Path,
    options: &ScanOptions,
    visit: &V,
    reader: &R,
) -> (V::Acc, Vec<ScanProblem>) {
    if options.threads == 0 {
        return walk_here(root, options, visit, reader);
    }
    match rayon::ThreadPoolBuilder::new()
        .num_threads(options.threads)
        .build()
    {
        Ok(pool) => pool.install(|| walk_here(root, options, visit, reader)),
        Err(_) => walk_here(root, options, visit, reader),
    }
}

/// One ignore file's rules.
struct Rules {
    matcher: Gitignore,
    /// Whether any rule can match a file (is not directory-only); when no
    /// rule in effect can, files skip matching entirely.
    files: bool,
}

/// Ignore matchers from the root down to the directory being walked.
type Stack = Vec<Arc<Rules>>;

/// Whether a rule of the ignore file at `file` can match a file, not only
/// directories: any rule not ending in `/`. Unreadable text counts as yes.
fn can_match_files(file: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(file) else {
        return true;
    };
    text.lines().any(|line| {
        let line = line.trim_start_matches('\u{feff}');
        if line.starts_with('#') {
            return false;
        }
        let line = line.trim_end_matches(' ');
        !line.is_empty() && !line.ends_with('/')
    })
}

/// The rules of the ignore file at `file`, rooted at `dir`.
fn rules(dir: &Path, file: &Path) -> Option<Rules> {
    let mut b = GitignoreBuilder::new(dir);
    // A malformed line is skipped; the rest apply.
    let _ = b.add(file);
    let matcher = b.build().ok()?;
    Some(Rules {
        files: !matcher.is_empty() && can_match_files(file),
        matcher,
    })
}

/// Whether `path` is ignored: the deepest matcher with an opinion wins
/// (gitignore precedence); the local ignore file is consulted last.
fn ignored(stack: &Stack, local: Option<&Rules>, path: &Path, is_dir: bool) -> bool {
    for g in stack.iter().rev() {
        match g.matcher.matched(path, is_dir) {
            Match::Ignore(_) => return true,
            Match::Whitelist(_) => return false,
            Match::None => {}
        }
    }
    matches!(
        local.map(|g| g.matcher.matched(path, is_dir)),
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
    match rules(dir, file) {
        Some(r) => {
            let mut next = (**stack).clone();
            next.push(Arc::new(r));
            Arc::new(next)
        }
        None => stack.clone(),
    }
}

struct Walk<'a, R> {
    reader: &'a R,
    root: &'a Path,
    state_dir: PathBuf,
    local: Option<Rules>,
    recorded_ms: u64,
}

struct Part<A> {
    acc: A,
    problems: Vec<ScanProblem>,
}

impl<A: Default> Default for Part<A> {
    fn default() -> Self {
        Part {
            acc: A::default(),
            problems: Vec::new(),
        }
    }
}

fn concat<V: Visit>(parts: Vec<Part<V::Acc>>) -> Part<V::Acc> {
    let mut out = Part::<V::Acc>::default();
    for p in parts {
        V::join(&mut out.acc, p.acc);
        out.problems.extend(p.problems);
    }
    out
}

fn io_problem(path: &str, err: &std::io::Error) -> ScanProblem {
    ScanProblem {
        path: path.to_string(),
        code: "io".into(),
        detail: err.to_string(),
    }
}

impl<R: DirReader> Walk<'_, R> {
    /// Walk the open directory `handle` at `dir` (absolute) whose canonical
    /// path is `rel` ("" = root). Entries are stat'ed through the directory
    /// handle, not by full path; subdirectories are walked in parallel. A file's path is built in one buffer reused
    /// across the directory: nothing is allocated per accepted file unless
    /// the visitor keeps it. `excluded`: the directory itself is ignored
    /// (entered only for its tracked files), so every untracked entry is.
    #[allow(clippy::too_many_arguments)]
    fn dir<V: Visit>(
        &self,
        visit: &V,
        handle: R::Dir,
        dir: &Path,
        rel: &str,
        stack: &Arc<Stack>,
        excluded: bool,
        out: &mut Vec<Part<V::Acc>>,
    ) {
        let mut part = Part::<V::Acc>::default();
        let (listing, errors) = self.reader.list(&handle);
        for err in &errors {
            part.problems.push(io_problem(rel, err));
        }
        let count = R::count(&listing);
        // One listing answers both "has a .scribeignore" and "is a nested
        // workspace" without extra lookups per directory.
        let mut has_ignore = false;
        let mut has_scribe = false;
        for i in 0..count {
            let n = R::name(&listing, i);
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
        // Whether any rule in effect can match a file at all.
        let files_may_be_ignored =
            stack.iter().any(|r| r.files) || self.local.as_ref().is_some_and(|r| r.files);
        // Validate the directory once; each file then checks only its name
        // (a full check runs when that fails, for the exact error, and for
        // anything under a `.scribe` directory).
        let dir_ok = rel.is_empty() || scribe_format::path::validate(rel).is_ok();
        let under_scribe = !rel.is_empty()
            && scribe_format::path::collision_key(scribe_format::path::file_name(rel))
                == scribe_format::path::collision_key(scribe_format::path::SCRIBE_DIR);
        let quick = dir_ok && !under_scribe;
        let ctx = visit.dir(rel, count);
        let base_len = if rel.is_empty() { 0 } else { rel.len() + 1 };
        let mut path = String::with_capacity(base_len + 64);
        path.push_str(rel);
        if !rel.is_empty() {
            path.push('/');
        }
        let mut subdirs = Vec::new();
        for i in 0..count {
            let Some(kind) = R::kind(&listing, i) else {
                continue;
            };
            let os_name = R::name(&listing, i);
            let Some(name) = os_name.to_str() else {
                let lossy = os_name.to_string_lossy();
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
            path.truncate(base_len);
            path.push_str(name);
            if kind == Kind::Dir {
                let full = dir.join(os_name);
                if full == self.state_dir {
                    continue;
                }
                // An ignored directory is entered only for the tracked
                // files under it.
                let ignored_dir = excluded || ignored(&stack, self.local.as_ref(), &full, true);
                if ignored_dir && !visit.tracks_under(&path) {
                    continue;
                }
                subdirs.push((full, path.clone(), ignored_dir));
                continue;
            }
            let is_ignored = if excluded {
                true
            } else if !files_may_be_ignored {
                false
            } else if stack.is_empty() {
                // The local rules are rooted at the workspace root, so the
                // relative path is enough.
                matches!(
                    self.local
                        .as_ref()
                        .map(|g| g.matcher.matched(Path::new(&path), false)),
                    Some(Match::Ignore(_))
                )
            } else {
                ignored(&stack, self.local.as_ref(), &dir.join(os_name), false)
            };
            // Ignore rules apply to untracked files only.
            if is_ignored && !visit.tracked(&ctx, &path, name) {
                continue;
            }
            if kind == Kind::Symlink {
                part.problems.push(ScanProblem {
                    path: path.clone(),
                    code: "symlink".into(),
                    detail: "symbolic links are not versioned".into(),
                });
                continue;
            }
            if kind == Kind::Special {
                part.problems.push(ScanProblem {
                    path: path.clone(),
                    code: SPECIAL_CODE.into(),
                    detail: SPECIAL_DETAIL.into(),
                });
                continue;
            }
            let valid = quick
                && path.len() <= scribe_format::limits::MAX_PATH_BYTES
                && (plainly_valid_name(name)
                    || scribe_format::path::validate_file_path(name).is_ok());
            if !valid {
                if let Err(e) = scribe_format::path::validate_file_path(&path) {
                    part.problems.push(ScanProblem {
                        path: path.clone(),
                        code: e.code().into(),
                        detail: e.to_string(),
                    });
                    continue;
                }
            }
            match self.reader.stat(&handle, &listing, i) {
                Ok(st) => visit.file(
                    &ctx,
                    &mut part.acc,
                    &path,
                    name,
                    Fingerprint {
                        size: st.size,
                        mtime_s: st.mtime_s,
                        mtime_ns: st.mtime_ns,
                        recorded_ms: self.recorded_ms,
                        changed: st.changed,
                    },
                    st.executable,
                ),
                Err(err) => part.problems.push(io_problem(&path, &err)),
            }
        }
        drop(ctx);
        out.push(part);
        // The directory is closed before its subdirectories are walked, so
        // a deep tree holds one open directory per walking thread, not one
        // per level.
        drop(listing);
        drop(handle);
        let below: Vec<Vec<Part<V::Acc>>> = subdirs
            .par_iter()
            .map(|(full, path, ignored_dir)| {
                let mut parts = Vec::new();
                self.dir_at(visit, full, path, &stack, *ignored_dir, &mut parts);
                parts
            })
            .collect();
        for mut b in below {
            out.append(&mut b);
        }
    }

    /// Open `dir` and walk it ([`Walk::dir`]); a failure to open it is a
    /// problem at `rel`.
    fn dir_at<V: Visit>(
        &self,
        visit: &V,
        dir: &Path,
        rel: &str,
        stack: &Arc<Stack>,
        excluded: bool,
        out: &mut Vec<Part<V::Acc>>,
    ) {
        match self.reader.open(dir) {
            Ok(handle) => self.dir(visit, handle, dir, rel, stack, excluded, out),
            Err(err) => out.push(Part {
                acc: V::Acc::default(),
                problems: vec![io_problem(rel, &err)],
            }),
        }
    }

    /// The ignore stack in effect inside `rel` (from the root's
    /// `.scribeignore` down to `rel`'s parent), and whether `rel` itself or
    /// one of its ancestors is excluded: never walked (the state directory,
    /// a nested workspace) or ignored (walked for tracked files only).
    fn stack_for(&self, rel: &str) -> (Arc<Stack>, Exclusion) {
        let mut stack = Arc::new(Stack::new());
        let mut dir = self.root.to_path_buf();
        let comps: Vec<&str> = rel.split('/').filter(|c| !c.is_empty()).collect();
        let mut exclusion = Exclusion::None;
        for (i, c) in comps.iter().enumerate() {
            stack = push_ignore(&stack, &dir);
            dir.push(c);
            let is_dir = i + 1 < comps.len() || dir.is_dir();
            if dir == self.state_dir || (is_dir && dir.join(STATE_DIR).is_dir()) {
                return (stack, Exclusion::Never);
            }
            if exclusion == Exclusion::None && ignored(&stack, self.local.as_ref(), &dir, is_dir) {
                exclusion = Exclusion::Ignored;
            }
        }
        (stack, exclusion)
    }
}

/// How a walked prefix is excluded ([`Walk::stack_for`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Exclusion {
    None,
    /// An ignore rule matches it or a directory above it: only tracked
    /// files are visited.
    Ignored,
    /// The state directory or a nested workspace: never walked.
    Never,
}

fn walk_here<V: Visit, R: DirReader>(
    root: &Path,
    options: &ScanOptions,
    visit: &V,
    reader: &R,
) -> (V::Acc, Vec<ScanProblem>) {
    let local_path = root.join(STATE_DIR).join("ignore");
    let local = if local_path.is_file() {
        rules(root, &local_path)
    } else {
        None
    };
    let walk = Walk {
        reader,
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
        walk.dir_at(visit, root, "", &Arc::new(Stack::new()), false, &mut parts);
        concat::<V>(parts)
    } else {
        let parts: Vec<Part<V::Acc>> = prefixes
            .par_iter()
            .map(|prefix| {
                // A prefix beneath a linked directory is never walked: the
                // link would lead the walk outside the working copy.
                let beyond = match crate::guard::link_above(root, prefix) {
                    Ok(None) => None,
                    Ok(Some(link)) => Some((
                        crate::guard::PROBLEM_CODE.to_string(),
                        crate::guard::describe(&link),
                    )),
                    Err(e) => Some(("io".to_string(), e.to_string())),
                };
                if let Some((code, detail)) = beyond {
                    return Part {
                        acc: V::Acc::default(),
                        problems: vec![ScanProblem {
                            path: prefix.clone(),
                            code,
                            detail,
                        }],
                    };
                }
                let full = root.join(prefix);
                let Ok(meta) = std::fs::symlink_metadata(&full) else {
                    return Part::default();
                };
                let (stack, exclusion) = walk.stack_for(prefix);
                let ignored_prefix = match exclusion {
                    Exclusion::Never => return Part::default(),
                    Exclusion::Ignored => true,
                    Exclusion::None => false,
                };
                if meta.is_dir() {
                    if ignored_prefix && !visit.tracks_under(prefix) {
                        return Part::default();
                    }
                    let mut parts = Vec::new();
                    walk.dir_at(visit, &full, prefix, &stack, ignored_prefix, &mut parts);
                    return concat::<V>(parts);
                }
                let (parent, name) = prefix.rsplit_once('/').unwrap_or(("", prefix));
                let ctx = visit.dir(parent, 1);
                // An ignored file is walked only when it is tracked.
                if ignored_prefix && !visit.tracked(&ctx, prefix, name) {
                    return Part::default();
                }
                let mut part = Part::<V::Acc>::default();
                if meta.file_type().is_symlink() {
                    part.problems.push(ScanProblem {
                        path: prefix.clone(),
                        code: "symlink".into(),
                        detail: "symbolic links are not versioned".into(),
                    });
                } else if let Some(what) = crate::platform::walk::special_kind(&meta.file_type()) {
                    part.problems.push(ScanProblem {
                        path: prefix.clone(),
                        code: SPECIAL_CODE.into(),
                        detail: format!(
                            "{what} is not a regular file: Scribe versions regular files only"
                        ),
                    });
                } else if let Err(e) = scribe_format::path::validate_file_path(prefix) {
                    part.problems.push(ScanProblem {
                        path: prefix.clone(),
                        code: e.code().into(),
                        detail: e.to_string(),
                    });
                } else {
                    visit.file(
                        &ctx,
                        &mut part.acc,
                        prefix,
                        name,
                        fingerprint_of(&meta, walk.recorded_ms),
                        platform::is_executable(&meta),
                    );
                }
                part
            })
            .collect();
        concat::<V>(parts)
    };
    let mut problems = part.problems;
    problems.sort_by(|a, b| a.path.cmp(&b.path));
    (part.acc, problems)
}

/// Whether `name` is certainly a valid file name (what
/// `validate_file_path(name)` accepts), by a cheap check that answers yes
/// only for plain ASCII names: letters, digits, `.`, `_` and `-`, not
/// ending in `.`, no reserved device stem, not `.scribe`. Anything else
/// (and every "no") goes through the full validation.
pub(crate) fn plainly_valid_name(name: &str) -> bool {
    let b = name.as_bytes();
    let (Some(&last), true) = (
        b.last(),
        b.len() <= scribe_format::limits::MAX_COMPONENT_BYTES,
    ) else {
        return false;
    };
    if last == b'.'
        || !b
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || c == b'.' || c == b'_' || c == b'-')
    {
        return false;
    }
    let stem = b
        .iter()
        .position(|&c| c == b'.')
        .map_or(name, |at| &name[..at]);
    !scribe_format::path::is_reserved_device_stem(stem)
        && !name.eq_ignore_ascii_case(scribe_format::path::SCRIBE_DIR)
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

    /// The walk of `root` through `reader`, collected and sorted like [`scan`].
    fn scan_with<R: DirReader>(root: &Path, options: &ScanOptions, reader: &R) -> Scan {
        let (files, problems) = walk_with_reader(root, options, &Collect { tracked: None }, reader);
        let mut out = Scan { files, problems };
        out.files.sort_by(|a, b| a.path.cmp(&b.path));
        out.files.dedup_by(|a, b| a.path == b.path);
        // The observation time is the walk's own: not compared.
        for f in &mut out.files {
            assert!(f.fingerprint.recorded_ms > 0);
            f.fingerprint.recorded_ms = 0;
        }
        out
    }

    /// A tree with every kind of entry the walk treats specially.
    fn varied_tree(root: &Path) {
        for i in 0..40 {
            write(root, &format!("many/f{i}.bin"), &vec![b'x'; i]);
        }
        write(root, "many/sub/deep/x", b"x");
        write(root, "art/hero.psd", b"psd");
        write(root, "art/tmp/cache.bin", b"x");
        write(root, "art/.scribeignore", b"tmp/\n*.log\n!keep.log\n");
        write(root, "art/build.log", b"log");
        write(root, "art/keep.log", b"log");
        write(root, "levels/\u{fc}n\u{ef}code.map", b"map");
        write(root, ".scribe/_state/state.redb", b"state");
        write(root, ".scribe/_state/ignore", b"*.tmp\n");
        write(root, ".scribe/flows/build.yml", b"flow");
        write(root, "nested/.scribe/_state/SCRIBE_FORMAT", b"x");
        write(root, "nested/file", b"x");
        write(root, "local.tmp", b"x");
        write(root, "bad:name.txt", b"x");
        write(root, "CON.txt", b"x");
        write(root, "trailing.", b"x");
        fs::create_dir_all(root.join("empty/dir")).unwrap();
        let old = std::time::SystemTime::UNIX_EPOCH
            + std::time::Duration::new(1_000_000_000, 123_456_789);
        fs::File::options()
            .write(true)
            .open(root.join("many/f3.bin"))
            .unwrap()
            .set_modified(old)
            .unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            use std::os::unix::fs::PermissionsExt;
            write(root, "tool.sh", b"#!/bin/sh\n");
            fs::set_permissions(root.join("tool.sh"), fs::Permissions::from_mode(0o755)).unwrap();
            std::os::unix::fs::symlink("tool.sh", root.join("link")).unwrap();
            std::os::unix::fs::symlink("art", root.join("dirlink")).unwrap();
            let bad = std::ffi::OsStr::from_bytes(b"bad\xffname");
            fs::write(root.join("many").join(bad), b"x").unwrap();
            // A FIFO is listed and stat'ed like a file by both readers.
            let fifo = root.join("many/pipe");
            let _ = std::process::Command::new("mkfifo").arg(&fifo).status();
        }
    }

    #[test]
    fn native_reader_walks_like_the_portable_one() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        varied_tree(root);
        for prefixes in [
            vec![],
            vec!["many".to_string()],
            vec![
                "art".to_string(),
                "many/f3.bin".to_string(),
                "missing".to_string(),
            ],
            vec!["nested".to_string(), "empty".to_string()],
        ] {
            let options = ScanOptions {
                prefixes,
                threads: 2,
            };
            let native = scan_with(root, &options, &platform::NATIVE);
            let portable = scan_with(root, &options, &platform::walk::Portable);
            assert_eq!(native.files, portable.files, "{:?}", options.prefixes);
            assert_eq!(native.problems, portable.problems, "{:?}", options.prefixes);
        }
        let all = scan_with(root, &ScanOptions::default(), &platform::NATIVE);
        let f3 = all.files.iter().find(|f| f.path == "many/f3.bin").unwrap();
        assert_eq!(
            (f3.fingerprint.mtime_s, f3.fingerprint.mtime_ns),
            (1_000_000_000, 123_456_789)
        );
        assert_eq!(f3.fingerprint.size, 3);
        let paths = paths(&all);
        assert!(paths.contains(&"art/keep.log") && !paths.contains(&"art/build.log"));
        assert!(!paths
            .iter()
            .any(|p| p.starts_with("nested/") || p.ends_with(".tmp")));
        let codes: Vec<&str> = all.problems.iter().map(|p| p.code.as_str()).collect();
        for code in [
            "forbidden_character",
            "reserved_device_name",
            "trailing_dot",
        ] {
            assert!(codes.contains(&code), "{code} in {codes:?}");
        }
        #[cfg(unix)]
        {
            assert!(
                codes.contains(&"symlink") && codes.contains(&"not_utf8"),
                "{codes:?}"
            );
            assert!(all
                .files
                .iter()
                .any(|f| f.path == "tool.sh" && f.executable));
        }
    }

    #[cfg(unix)]
    #[test]
    fn unreadable_directories_are_problems_for_both_readers() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "ok/a", b"x");
        write(root, "locked/b", b"x");
        fs::set_permissions(root.join("locked"), fs::Permissions::from_mode(0o000)).unwrap();
        let native = scan_with(root, &ScanOptions::default(), &platform::NATIVE);
        let portable = scan_with(root, &ScanOptions::default(), &platform::walk::Portable);
        fs::set_permissions(root.join("locked"), fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(native.files, portable.files);
        let codes = |s: &Scan| {
            s.problems
                .iter()
                .map(|p| (p.path.clone(), p.code.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(codes(&native), codes(&portable));
        // root can read anything: then both simply list it
        if !native.problems.is_empty() {
            assert_eq!(
                codes(&native),
                vec![("locked".to_string(), "io".to_string())]
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn plainly_valid_names_are_valid(name in "[a-zA-Z0-9._ :<|~\u{e9}\u{212a}-]{0,12}") {
            if plainly_valid_name(&name) {
                proptest::prop_assert!(scribe_format::path::validate_file_path(&name).is_ok(), "{}", name);
            }
        }
    }

    #[test]
    fn plain_name_check_defers_the_special_cases() {
        for name in [
            "f1.bin",
            "a",
            "README.md",
            "x-y_z.tar.gz",
            ".hidden",
            "com10",
        ] {
            assert!(plainly_valid_name(name), "{name}");
        }
        for name in [
            "", ".", "..", "a.", "con", "CON.txt", "lpt1.x", ".scribe", ".SCRIBE", "a b", "a:b",
            "\u{e9}",
        ] {
            assert!(!plainly_valid_name(name), "{name}");
        }
        assert!(!plainly_valid_name(&"a".repeat(256)));
    }
}

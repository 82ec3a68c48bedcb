//! Never read, write or delete beneath a symbolic link.
//!
//! A workspace path names a file under the workspace root. If any directory
//! component between the root and the file is a symbolic link (or, on
//! Windows, a junction or another name-surrogate reparse point), the path
//! leads outside the working copy, or to another place inside it, and
//! following it would let `sync` write or delete there, `add` read from
//! there, `delete` move a file from there into the recovery area. Like Git
//! ("beyond a symbolic link"), every workspace operation that touches a file
//! asks [`checked`] (or [`link_above`]) first and refuses such a path with
//! [`ErrorCode::BeyondSymlink`], naming it. The root itself may be reached
//! through links; only components below it are checked. A symbolic link as
//! the *file* itself is a separate matter: the walk reports it (`symlink`),
//! and sync moves the link (never its target) into the recovery area.
//!
//! The check is a `symlink_metadata` per ancestor, made just before the
//! operation; it does not close the window against a process that swaps a
//! directory for a link in between.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use scribe_format::ErrorCode;

use crate::error::{Result, WorkspaceError};

/// The stable scan problem code of a path beneath a link.
pub const PROBLEM_CODE: &str = "beyond_symlink";

/// The first ancestor component of `path` (workspace-relative, canonical,
/// `/`-separated) that is a symbolic link, as a workspace path, if any.
/// Components that do not exist end the check (nothing lies beyond them);
/// the last component, the file itself, is not an ancestor.
pub fn link_above(root: &Path, path: &str) -> Result<Option<String>> {
    LinkCheck::new(root).link_above(path)
}

/// [`link_above`] for many paths: each directory is looked at once. The
/// answers are a snapshot; make a new `LinkCheck` after changing the tree.
pub struct LinkCheck<'a> {
    root: &'a Path,
    /// Directory (workspace path) → the link at or above it, if any.
    known: HashMap<String, Option<String>>,
}

impl<'a> LinkCheck<'a> {
    pub fn new(root: &'a Path) -> LinkCheck<'a> {
        LinkCheck {
            root,
            known: HashMap::new(),
        }
    }

    /// [`link_above`], remembering every directory it looked at.
    pub fn link_above(&mut self, path: &str) -> Result<Option<String>> {
        match scribe_format::path::parent(path) {
            Some(dir) => self.link_at_or_above(dir),
            None => Ok(None),
        }
    }

    /// The link at `dir` or above it.
    fn link_at_or_above(&mut self, dir: &str) -> Result<Option<String>> {
        if let Some(known) = self.known.get(dir) {
            return Ok(known.clone());
        }
        let above = match scribe_format::path::parent(dir) {
            Some(up) => self.link_at_or_above(up)?,
            None => None,
        };
        let answer = match above {
            Some(link) => Some(link),
            None => {
                let full = self.root.join(dir);
                match std::fs::symlink_metadata(&full) {
                    Ok(meta) if crate::platform::is_link(&meta) => Some(dir.to_string()),
                    // A directory, a file where a directory would be, or
                    // nothing: no link lies on the way (the operation fails,
                    // or creates real directories, on its own).
                    Ok(_) => None,
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                        ) =>
                    {
                        None
                    }
                    Err(e) => return Err(WorkspaceError::io(&full)(e)),
                }
            }
        };
        self.known.insert(dir.to_string(), answer.clone());
        Ok(answer)
    }

    /// [`checked`], through this cache.
    pub fn checked(&mut self, path: &str) -> Result<PathBuf> {
        match self.link_above(path)? {
            Some(link) => Err(refusal(path, &link)),
            None => Ok(self.root.join(path)),
        }
    }
}

/// The refusal for `path`, beneath the link `link`.
pub fn refusal(path: &str, link: &str) -> WorkspaceError {
    WorkspaceError::refused(ErrorCode::BeyondSymlink, path, describe(link))
}

/// Why a path beneath `link` is left alone.
pub fn describe(link: &str) -> String {
    format!(
        "beyond a symbolic link: `{link}` is a link, and Scribe never reads, writes or deletes through one"
    )
}

/// `root.join(path)`, after checking that no ancestor of `path` is a
/// symbolic link ([`link_above`]); refused with `beyond_symlink` otherwise.
pub fn checked(root: &Path, path: &str) -> Result<PathBuf> {
    match link_above(root, path)? {
        Some(link) => Err(refusal(path, &link)),
        None => Ok(root.join(path)),
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn finds_the_first_linked_ancestor_only() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("real/sub")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("real/link")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("top")).unwrap();
        std::fs::write(root.join("file"), b"x").unwrap();
        assert_eq!(link_above(root, "real/sub/a").unwrap(), None);
        assert_eq!(link_above(root, "missing/a/b").unwrap(), None);
        assert_eq!(link_above(root, "file/a").unwrap(), None);
        // The link itself as the last component is not "beyond" it.
        assert_eq!(link_above(root, "real/link").unwrap(), None);
        assert_eq!(
            link_above(root, "real/link/a/b").unwrap().as_deref(),
            Some("real/link")
        );
        assert_eq!(link_above(root, "top/x").unwrap().as_deref(), Some("top"));
        let err = checked(root, "top/x").unwrap_err();
        assert!(
            matches!(&err, WorkspaceError::Refused { code: ErrorCode::BeyondSymlink, path, .. } if path == "top/x"),
            "{err:?}"
        );
        assert!(err.to_string().contains("`top` is a link"), "{err}");
        assert_eq!(
            checked(root, "real/sub/a").unwrap(),
            root.join("real/sub/a")
        );
    }
}

#[cfg(all(test, unix))]
#[path = "guard_tests.rs"]
mod operation_tests;

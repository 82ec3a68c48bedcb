//! The recovery area (section 9a): where displaced working-copy contents go.
//!
//! A displacement writes `<name>.origin` (the index) durably first, then
//! renames the file to `<name>`, so a crash leaves an index without content,
//! never content without an index. Entries are removed only by explicit
//! pruning; entries whose index is malformed are listed and never pruned.

use std::path::{Path, PathBuf};

use scribe_format::OperationId;

use crate::error::{Result, WorkspaceError};
use crate::records::{RecoveryIndex, RecoveryReason};
use crate::state::{sync_dir, write_durably};

/// The recovery directory of a workspace root.
pub fn recovery_dir(root: &Path) -> PathBuf {
    root.join(crate::state::STATE_DIR).join("recovery")
}

/// A new index for `path`, named with the current time and fresh randomness.
pub fn new_index(path: &str, reason: RecoveryReason) -> RecoveryIndex {
    RecoveryIndex {
        path: path.to_string(),
        reason,
        operation: OperationId::random().0,
        retained_ms: crate::scan::now_ms(),
    }
}

/// Write the index of a displacement durably (step 1).
pub fn write_index(root: &Path, index: &RecoveryIndex) -> Result<()> {
    let dir = recovery_dir(root);
    std::fs::create_dir_all(&dir).map_err(WorkspaceError::io(&dir))?;
    let path = dir.join(format!("{}.origin", index.entry_name()));
    write_durably(&path, index.encode().as_bytes())
}

/// Move the working file of `index.path` into the area (step 2). A file
/// already gone (a rerun after a crash between rename and bookkeeping) is
/// not an error.
pub fn move_in(root: &Path, index: &RecoveryIndex) -> Result<()> {
    // Never take a file from beneath a linked directory (`crate::guard`).
    let from = crate::guard::checked(root, &index.path)?;
    let to = recovery_dir(root).join(index.entry_name());
    match std::fs::rename(&from, &to) {
        Ok(()) => sync_dir(&recovery_dir(root)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(WorkspaceError::io(&from)(e)),
    }
}

/// Delete the displaced file of `index` and its index when `keep_not`
/// says it may go (given the moved file and its metadata); returns whether
/// it was deleted. A file already gone counts as deleted; a directory or
/// link standing there is kept.
pub fn discard_if(
    root: &Path,
    index: &RecoveryIndex,
    keep_not: impl FnOnce(&Path, &std::fs::Metadata) -> Result<bool>,
) -> Result<bool> {
    let dir = recovery_dir(root);
    let moved = dir.join(index.entry_name());
    let origin = dir.join(format!("{}.origin", index.entry_name()));
    let meta = match std::fs::symlink_metadata(&moved) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(WorkspaceError::io(&moved)(e)),
    };
    if let Some(m) = &meta {
        if !m.is_file() || !keep_not(&moved, m)? {
            return Ok(false);
        }
        std::fs::remove_file(&moved).map_err(WorkspaceError::io(&moved))?;
    }
    match std::fs::remove_file(&origin) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
        Err(e) => Err(WorkspaceError::io(&origin)(e)),
    }
}

/// Displace the working file at `path` (both steps).
pub fn displace(root: &Path, path: &str, reason: RecoveryReason) -> Result<RecoveryIndex> {
    crate::guard::checked(root, path)?;
    let index = new_index(path, reason);
    write_index(root, &index)?;
    move_in(root, &index)?;
    Ok(index)
}

/// One entry of the recovery area.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecoveryEntry {
    /// A displaced file (or a crash left only its index: `present` false).
    Displaced {
        name: String,
        index: RecoveryIndex,
        present: bool,
        size: u64,
    },
    /// An index that does not parse; never pruned.
    Malformed { name: String, problem: String },
    /// An intent archive (`submit-<op>.pending`, workflow archives).
    Archive { name: String, size: u64 },
}

impl RecoveryEntry {
    pub fn name(&self) -> &str {
        match self {
            RecoveryEntry::Displaced { name, .. }
            | RecoveryEntry::Malformed { name, .. }
            | RecoveryEntry::Archive { name, .. } => name,
        }
    }
}

/// Every entry, oldest first.
pub fn list(root: &Path) -> Result<Vec<RecoveryEntry>> {
    let dir = recovery_dir(root);
    let mut names: Vec<String> = match std::fs::read_dir(&dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(WorkspaceError::io(&dir)(e)),
    };
    names.sort();
    let mut out = Vec::new();
    for name in &names {
        if let Some(entry) = name.strip_suffix(".origin") {
            let text = std::fs::read(dir.join(name)).map_err(WorkspaceError::io(dir.join(name)))?;
            let parsed = std::str::from_utf8(&text)
                .map_err(|_| "not UTF-8".to_string())
                .and_then(|t| RecoveryIndex::decode(t).map_err(|e| e.to_string()))
                .and_then(|ix| {
                    if ix.entry_name() == entry {
                        Ok(ix)
                    } else {
                        Err("index does not match its entry name".to_string())
                    }
                });
            match parsed {
                Ok(index) => {
                    let meta = std::fs::symlink_metadata(dir.join(entry)).ok();
                    out.push(RecoveryEntry::Displaced {
                        name: entry.to_string(),
                        index,
                        present: meta.is_some(),
                        size: meta.map(|m| m.len()).unwrap_or(0),
                    });
                }
                Err(problem) => out.push(RecoveryEntry::Malformed {
                    name: entry.to_string(),
                    problem,
                }),
            }
        } else if !names.contains(&format!("{name}.origin")) {
            let size = std::fs::symlink_metadata(dir.join(name))
                .map(|m| m.len())
                .unwrap_or(0);
            out.push(RecoveryEntry::Archive {
                name: name.clone(),
                size,
            });
        }
    }
    Ok(out)
}

/// Remove displaced entries retained before `cutoff_ms`; malformed entries
/// and archives are kept. Returns the removed entries.
/// Copy the displaced contents of entry `name` to the workspace path
/// `to` (its old path when `None`), never replacing anything: anything
/// already there, tracked or not, refuses with `already_exists`. The entry
/// stays (prune decides when it goes). Returns the path written.
pub fn restore(root: &Path, name: &str, to: Option<&str>) -> Result<String> {
    let found = list(root)?.into_iter().find_map(|e| match e {
        RecoveryEntry::Displaced {
            name: n,
            index,
            present: true,
            ..
        } if n == name => Some(index),
        _ => None,
    });
    let Some(index) = found else {
        return Err(WorkspaceError::refused(
            scribe_format::ErrorCode::NotFound,
            name,
            "no displaced contents have this name: `scribe recovery list` names them",
        ));
    };
    let dest = to.unwrap_or(&index.path).to_string();
    // Never written beneath a linked directory (`crate::guard`).
    let full = crate::guard::checked(root, &dest)?;
    let taken = || {
        WorkspaceError::refused(
            scribe_format::ErrorCode::AlreadyExists,
            &dest,
            format!(
                "something is already there, and nothing was replaced: restore it elsewhere \
                 with `scribe recovery restore {name} --to PATH`"
            ),
        )
    };
    if std::fs::symlink_metadata(&full).is_ok() {
        return Err(taken());
    }
    let tmp_dir = root.join(crate::state::STATE_DIR).join("tmp");
    std::fs::create_dir_all(&tmp_dir).map_err(WorkspaceError::io(&tmp_dir))?;
    let tmp = tmp_dir.join(format!("restore-{name}.part"));
    let from = recovery_dir(root).join(index.entry_name());
    if let Err(e) = std::fs::copy(&from, &tmp) {
        let _ = std::fs::remove_file(&tmp);
        return Err(WorkspaceError::io(&from)(e));
    }
    if let Some(parent) = full.parent() {
        std::fs::create_dir_all(parent).map_err(WorkspaceError::io(parent))?;
    }
    // Checked again just before the rename (the workspace LOCK keeps
    // other scribe processes out; see `moves` on exclusive renames).
    if std::fs::symlink_metadata(&full).is_ok() {
        let _ = std::fs::remove_file(&tmp);
        return Err(taken());
    }
    std::fs::rename(&tmp, &full).map_err(WorkspaceError::io(&full))?;
    Ok(dest)
}

pub fn prune(root: &Path, cutoff_ms: u64) -> Result<Vec<RecoveryEntry>> {
    let dir = recovery_dir(root);
    let mut removed = Vec::new();
    for entry in list(root)? {
        if let RecoveryEntry::Displaced { name, index, .. } = &entry {
            if index.retained_ms < cutoff_ms {
                let content = dir.join(name);
                match std::fs::remove_file(&content) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(WorkspaceError::io(&content)(e)),
                }
                let origin = dir.join(format!("{name}.origin"));
                std::fs::remove_file(&origin).map_err(WorkspaceError::io(&origin))?;
                removed.push(entry);
            }
        }
    }
    if !removed.is_empty() {
        sync_dir(&dir)?;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displace_list_and_prune() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("art")).unwrap();
        std::fs::write(root.join("art/hero.psd"), b"local work").unwrap();
        let ix = displace(root, "art/hero.psd", RecoveryReason::SyncUpdate).unwrap();
        assert!(!root.join("art/hero.psd").exists());
        let kept = recovery_dir(root).join(ix.entry_name());
        assert_eq!(std::fs::read(&kept).unwrap(), b"local work");
        // an index without content (crash between the steps) and a broken index
        let orphan = new_index("gone.bin", RecoveryReason::Delete);
        write_index(root, &orphan).unwrap();
        std::fs::write(recovery_dir(root).join("1-00.origin"), b"junk").unwrap();
        std::fs::write(recovery_dir(root).join("submit-ab.pending"), b"intent").unwrap();
        let entries = list(root).unwrap();
        assert_eq!(entries.len(), 4, "{entries:?}");
        assert!(entries
            .iter()
            .any(|e| matches!(e, RecoveryEntry::Malformed { .. })));
        assert!(entries.iter().any(
            |e| matches!(e, RecoveryEntry::Archive { name, .. } if name == "submit-ab.pending")
        ));
        assert!(entries
            .iter()
            .any(|e| matches!(e, RecoveryEntry::Displaced { present: false, .. })));
        // nothing is older than a cutoff in the past
        assert!(prune(root, 1).unwrap().is_empty());
        let removed = prune(root, u64::MAX).unwrap();
        assert_eq!(removed.len(), 2);
        let left = list(root).unwrap();
        assert_eq!(left.len(), 2, "malformed and archive stay: {left:?}");
    }
}

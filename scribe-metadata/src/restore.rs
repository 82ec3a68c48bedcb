//! `scribe-server restore`: bring back a data root from a copy taken while
//! it was stopped, as a new incarnation.
//!
//! The specification gives every restore a new incarnation: the data-root
//! descriptor's `incarnation` is replaced and `restored-from-incarnation` /
//! `restored-ms` record where it came from (section 2), and each
//! repository's `meta["incarnation"]` is replaced (section 8), so clients
//! can tell that outcomes recorded after the copy may be gone (section 9:
//! an absent outcome in a changed incarnation retires the pending
//! submission instead of replaying it).
//!
//! This is the smallest honest restore: a directory copy, not the backup
//! container of section 10 (not built yet). Order: the copy is written and
//! flushed file by file, each repository gets its new incarnation in one
//! immediate transaction, and the data-root descriptor is written last, so
//! an interrupted restore leaves a target that `open` refuses (its
//! descriptor is absent) and that can be removed and restored again.

use std::path::{Path, PathBuf};

use redb::Database;
use scribe_format::descriptor::{DataRoot, Descriptor, Restored};
use scribe_format::{ErrorCode, RepositoryId};

use crate::clock::now_ms;
use crate::database_descriptor::{self, sync_dir};
use crate::error::{MetadataError, Result};
use crate::root::take_lock;
use crate::tables::{meta, META};

/// What a restore did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestoreReport {
    pub from_incarnation: [u8; 16],
    pub incarnation: [u8; 16],
    /// Each repository directory with its new incarnation.
    pub repositories: Vec<(PathBuf, [u8; 16])>,
    pub files: u64,
}

fn copy_tree(from: &Path, to: &Path, files: &mut u64) -> Result<()> {
    std::fs::create_dir(to).map_err(|e| MetadataError::io(to, e))?;
    for entry in std::fs::read_dir(from).map_err(|e| MetadataError::io(from, e))? {
        let entry = entry.map_err(|e| MetadataError::io(from, e))?;
        let name = entry.file_name();
        let src = entry.path();
        let dst = to.join(&name);
        let ty = entry.file_type().map_err(|e| MetadataError::io(&src, e))?;
        // The copy's own LOCK (and a descriptor left mid-write) are not state.
        if from.join("SCRIBE_FORMAT.tmp") == src || name == "LOCK" {
            continue;
        }
        if ty.is_dir() {
            copy_tree(&src, &dst, files)?;
        } else if ty.is_file() {
            std::fs::copy(&src, &dst).map_err(|e| MetadataError::io(&src, e))?;
            std::fs::File::open(&dst)
                .and_then(|f| f.sync_all())
                .map_err(|e| MetadataError::io(&dst, e))?;
            *files += 1;
        } else {
            return Err(MetadataError::refused(
                ErrorCode::Malformed,
                format!("{} is neither a file nor a directory", src.display()),
            ));
        }
    }
    sync_dir(to)
}

/// Restore the stopped data root copy `from` into `to` (absent or empty)
/// with new incarnations. `from` is locked for the duration, so a copy
/// that is being served is refused.
pub fn restore(from: &Path, to: &Path) -> Result<RestoreReport> {
    let _held = take_lock(from)?;
    let old = database_descriptor::read(from)?;
    let fields = old
        .data_root()
        .map_err(|e| MetadataError::corrupt(format!("{}: {e}", from.display())))?;
    if let Ok(mut it) = std::fs::read_dir(to) {
        if it.next().is_some() {
            return Err(MetadataError::refused(
                ErrorCode::AlreadyExists,
                format!("{} is not empty", to.display()),
            ));
        }
        std::fs::remove_dir(to).map_err(|e| MetadataError::io(to, e))?;
    }
    let mut files = 0;
    // The descriptor is published last, below.
    copy_tree(from, to, &mut files)?;
    let desc = to.join(database_descriptor::FILE);
    std::fs::remove_file(&desc).map_err(|e| MetadataError::io(&desc, e))?;
    sync_dir(to)?;
    if let Some(parent) = to.parent() {
        sync_dir(parent)?;
    }
    let mut repositories = Vec::new();
    let repos = to.join("repos");
    if repos.is_dir() {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(&repos)
            .map_err(|e| MetadataError::io(&repos, e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join(crate::repo::METADATA_FILE).is_file())
            .collect();
        dirs.sort();
        for dir in dirs {
            let inc = RepositoryId::random().0;
            let db = Database::open(dir.join(crate::repo::METADATA_FILE))?;
            let tx = crate::journal::begin(&db)?;
            tx.open_table(META)?
                .insert(meta::INCARNATION, inc.as_slice())?;
            tx.commit()?;
            repositories.push((dir, inc));
        }
    }
    let incarnation = RepositoryId::random().0;
    let mut next = Descriptor::new_data_root(&DataRoot {
        incarnation,
        restored: Some(Restored {
            from_incarnation: fields.incarnation,
            ms: now_ms(),
        }),
        ..fields
    })
    .map_err(|e| MetadataError::corrupt(e.to_string()))?;
    const OWN: &[&str] = &[
        "catalog-schema",
        "repository-schema",
        "object-store",
        "envelope",
        "engine",
        "incarnation",
        "created-ms",
        "restored-from-incarnation",
        "restored-ms",
    ];
    for (k, v) in old.entries() {
        if k == "required-features" {
            for f in old.required_features() {
                next.add_required_feature(f)
                    .map_err(|e| MetadataError::corrupt(e.to_string()))?;
            }
        } else if !OWN.contains(&k) && next.get(k).is_none() {
            next.set(k, v)
                .map_err(|e| MetadataError::corrupt(e.to_string()))?;
        }
    }
    database_descriptor::write(&next, to)?;
    Ok(RestoreReport {
        from_incarnation: fields.incarnation,
        incarnation,
        repositories,
        files,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DataRoot as Root;

    #[test]
    fn restore_copies_and_reincarnates() {
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join("live");
        let (id, old_repo_inc, old_root_inc) = {
            let root = Root::create(&live).unwrap();
            let id = root.create_repository("game").unwrap();
            let repo = root.open_repository(id).unwrap();
            (id, repo.incarnation(), root.incarnation().to_string())
        };
        // a served root is refused
        {
            let _served = Root::open(&live).unwrap();
            assert!(restore(&live, &dir.path().join("busy")).is_err());
        }
        let back = dir.path().join("back");
        let report = restore(&live, &back).unwrap();
        assert_eq!(hex::encode(report.from_incarnation), old_root_inc);
        assert_ne!(report.incarnation, report.from_incarnation);
        assert_eq!(report.repositories.len(), 1);
        let root = Root::open(&back).unwrap();
        assert_eq!(root.incarnation(), hex::encode(report.incarnation));
        let d = database_descriptor::read(&back)
            .unwrap()
            .data_root()
            .unwrap();
        assert_eq!(
            d.restored.map(|r| r.from_incarnation),
            Some(report.from_incarnation)
        );
        let repo = root.open_repository(id).unwrap();
        assert_ne!(repo.incarnation(), old_repo_inc);
        assert_eq!(repo.incarnation(), report.repositories[0].1);
        assert_eq!(
            database_descriptor::read(&back)
                .unwrap()
                .get("required-features"),
            database_descriptor::read(&live)
                .unwrap()
                .get("required-features")
        );
        // a non-empty target is refused
        drop(root);
        drop(repo);
        assert!(restore(&live, &back).is_err());
    }
}

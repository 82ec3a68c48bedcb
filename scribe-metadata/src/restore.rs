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
//! This is the restore of a stopped data-root *copy* (the library entry
//! point tests use); `scribe-server restore` restores a backup directory
//! (`crate::backup::restore_backup`, seed 004 section 10). Both end in the
//! same step (`backup::reincarnate`): new incarnations, and every database
//! gets a new journal identity and a fresh archive, so the restored root
//! never chains onto the source's archive. The copy leaves out `LOCK`, the
//! `.recovery` archives and any `.recovery-location` selection; the
//! data-root descriptor is written last, so an interrupted restore leaves a
//! target that `open` refuses (its descriptor is absent) and that can be
//! removed and restored again.

use std::path::{Path, PathBuf};

use scribe_format::ErrorCode;

use crate::database_descriptor::{self, sync_dir};
use crate::error::{MetadataError, Result};
use crate::root::take_lock;

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
        let n = name.to_string_lossy();
        if from.join("SCRIBE_FORMAT.tmp") == src
            || name == "LOCK"
            || n.ends_with(".recovery")
            || n.ends_with(".recovery-location")
        {
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
    copy_tree(from, to, &mut files)?;
    let (repositories, incarnation, from_incarnation) = crate::backup::reincarnate(to)?;
    debug_assert_eq!(from_incarnation, fields.incarnation);
    Ok(RestoreReport {
        from_incarnation,
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

    /// Regression (#16): restore kept the source's journal identity and its
    /// `.recovery-location`, so the restored root's archive chained onto
    /// (and wrote into) the source's archive.
    #[test]
    fn restored_databases_get_their_own_identity_and_a_fresh_archive() {
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join("live");
        let elsewhere = dir.path().join("elsewhere");
        let id = {
            let root = Root::create(&live).unwrap();
            root.create_repository("game").unwrap()
        };
        // The source's repository archive lives on another volume.
        let db = live.join("repos").join(id.to_hex()).join("metadata.redb");
        std::fs::rename(crate::archive::default_dir(&db), &elsewhere).unwrap();
        std::fs::write(
            crate::archive::location_file(&db),
            elsewhere.to_str().unwrap(),
        )
        .unwrap();
        let source_head = crate::archive::read_head(&elsewhere).unwrap();
        let source_catalog = crate::archive::read_head(&live.join("catalog.recovery")).unwrap();
        let back = dir.path().join("back");
        restore(&live, &back).unwrap();
        let rdb = back.join("repos").join(id.to_hex()).join("metadata.redb");
        assert!(!crate::archive::location_file(&rdb).exists());
        let head = crate::archive::read_head(&crate::archive::default_dir(&rdb)).unwrap();
        assert_ne!(head.identity, source_head.identity);
        let cat = crate::archive::read_head(&back.join("catalog.recovery")).unwrap();
        assert_ne!(cat.identity, source_catalog.identity);
        // The fresh archive alone rebuilds the restored database.
        let rebuilt = dir.path().join("rebuilt.redb");
        crate::archive::recover(&crate::archive::default_dir(&rdb), &rebuilt).unwrap();
        let rows = crate::journal::dump_rows(&redb::Database::open(&rebuilt).unwrap()).unwrap();
        assert_eq!(
            rows,
            crate::journal::dump_rows(&redb::Database::open(&rdb).unwrap()).unwrap()
        );
        std::fs::remove_file(&rebuilt).unwrap();
        // Writes of the restored root go to its own archive only.
        {
            let root = Root::open(&back).unwrap();
            root.create_repository("second").unwrap();
            let repo = root.open_repository(id).unwrap();
            assert_eq!(repo.archive().dir(), crate::archive::default_dir(&rdb));
        }
        assert_eq!(crate::archive::read_head(&elsewhere).unwrap(), source_head);
        assert_eq!(
            crate::archive::read_head(&live.join("catalog.recovery")).unwrap(),
            source_catalog
        );
        crate::archive::verify(&back.join("catalog.recovery")).unwrap();
        crate::root::recover_catalog(&{
            std::fs::remove_file(back.join("catalog.redb")).unwrap();
            back.clone()
        })
        .unwrap();
        let root = Root::open(&back).unwrap();
        assert_eq!(root.list_repositories().unwrap().len(), 2);
    }
}

//! `SCRIBE_FORMAT` files of the data root and of each repository (section
//! 2), through `scribe_format::descriptor`: reading, flushed writing, and
//! the checks openers run before touching any database.

use std::io::Write;
use std::path::Path;

use scribe_format::descriptor::{Descriptor, Kind};

use crate::error::{MetadataError, Result};

/// File name of a descriptor.
pub const FILE: &str = "SCRIBE_FORMAT";

/// Atomic publication and upload lifecycle profile 1.
pub const FEATURE_ATOMIC_PUBLICATION: &str = "atomic-publication-v2";

/// Metadata recovery journal profile 2.
pub const FEATURE_RECOVERY_JOURNAL: &str = "recovery-journal-v2";

/// Features this build knows.
pub const KNOWN_FEATURES: &[&str] = &[
    FEATURE_ATOMIC_PUBLICATION,
    FEATURE_RECOVERY_JOURNAL,
    crate::auth_state::FEATURE,
];

/// Features every root and repository descriptor this build writes
/// declares, and that openers require.
pub const REQUIRED_FEATURES: &[&str] = &[FEATURE_ATOMIC_PUBLICATION, FEATURE_RECOVERY_JOURNAL];

/// Read and parse `dir/SCRIBE_FORMAT`.
pub fn read(dir: &Path) -> Result<Descriptor> {
    let path = dir.join(FILE);
    let bytes = std::fs::read(&path).map_err(|e| MetadataError::io(&path, e))?;
    Descriptor::parse(&bytes)
        .map_err(|e| MetadataError::corrupt(format!("{}: {e}", path.display())))
}

/// Write `dir/SCRIBE_FORMAT` through a flushed temporary renamed into place.
pub fn write(d: &Descriptor, dir: &Path) -> Result<()> {
    let path = dir.join(FILE);
    let tmp = dir.join(format!("{FILE}.tmp"));
    let mut f = std::fs::File::create(&tmp).map_err(|e| MetadataError::io(&tmp, e))?;
    f.write_all(&d.encode())
        .and_then(|_| f.sync_all())
        .map_err(|e| MetadataError::io(&tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| MetadataError::io(&path, e))?;
    sync_dir(dir)
}

/// Refuse a kind other than `kind`, a value other than each expected one
/// (naming `scribe-server migrate`), and unknown required features.
pub fn check(
    d: &Descriptor,
    dir: &Path,
    kind: Kind,
    expect: &[(&'static str, &str)],
) -> Result<()> {
    let path = dir.join(FILE);
    if d.kind() != kind {
        return Err(MetadataError::VersionMismatch {
            path,
            what: "kind",
            found: d.kind().as_str().into(),
            expected: kind.as_str().into(),
        });
    }
    for (k, want) in expect {
        if let Err(m) = d.version_check(k, want) {
            return Err(MetadataError::VersionMismatch {
                path,
                what: k,
                found: m.found.unwrap_or_else(|| "absent".into()),
                expected: m.expected,
            });
        }
    }
    d.check_mutation(KNOWN_FEATURES).map_err(|e| match e {
        scribe_format::FormatError::UnsupportedFeature { feature } => {
            MetadataError::UnsupportedFeature {
                path: path.clone(),
                feature,
            }
        }
        other => MetadataError::Format(other),
    })?;
    // A store without the journal profile predates it: refused, never
    // converted or initialised (seed 004, recovery journal profile 2).
    if !d.required_features().contains(&FEATURE_RECOVERY_JOURNAL) {
        return Err(MetadataError::RecoveryProfileMissing {
            path,
            what: format!("required-features lacks {FEATURE_RECOVERY_JOURNAL}"),
        });
    }
    Ok(())
}

/// Declare every feature of [`REQUIRED_FEATURES`] in `d`.
pub fn add_required_features(d: &mut Descriptor) -> Result<()> {
    for f in REQUIRED_FEATURES {
        d.add_required_feature(f)?;
    }
    Ok(())
}

/// Flush a directory so a rename or creation inside it is durable.
///
/// A no-op where directories cannot be flushed as files (Windows, where
/// NTFS journals metadata).
pub fn sync_dir(dir: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        let f = std::fs::File::open(dir).map_err(|e| MetadataError::io(dir, e))?;
        f.sync_all().map_err(|e| MetadataError::io(dir, e))
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

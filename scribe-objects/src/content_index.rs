//! The content index: a non-normative cache table in `locator.redb` that
//! maps a whole file's `(size, FileContentId)` to the `ManifestId` an
//! import produced for it, so that re-importing identical content can skip
//! FastCDC and the per-chunk hashes (see `docs/objects.md`, "Content index").
//!
//! The table and its rows are defined with the other tables of
//! `locator.redb` in [`crate::locator`]; this module holds the lookups.
//!
//! It is a pure cache. Rows are written in the same Immediate transaction
//! as the manifest they name, but are never trusted: a hit is used only
//! after the manifest object is read (identity verified), decodes as
//! chunking profile 1 with the same size and `FileContentId`, and every
//! chunk it lists is in the locator. Anything else falls back to the full
//! import, which rewrites the row. Readers of the normative tables
//! (`locator`, `meta`) never look at it; `rebuild-locator` regenerates it
//! from the manifests it indexes; compaction leaves the replacement's
//! index empty (it refills on import), so a dropped manifest keeps no row.

use redb::{ReadableDatabase, TableError};
use scribe_format::{FileContentId, ManifestId};

use crate::error::{db_err, Result};
use crate::locator::{content_key as key, CONTENT_TABLE};
use crate::store::ObjectStore;

impl ObjectStore {
    /// Whether any indexed content has exactly `size` bytes (a cheap test
    /// before hashing a whole file in search of a hit).
    pub(crate) fn content_size_indexed(&self, size: u64) -> Result<bool> {
        let p = &self.db_path;
        let txn = self.db.begin_read().map_err(db_err(p))?;
        let table = match txn.open_table(CONTENT_TABLE) {
            Ok(t) => t,
            Err(TableError::TableDoesNotExist(_)) => return Ok(false),
            Err(e) => return Err(db_err(p)(e)),
        };
        let lo = key(size, &FileContentId([0; 32]));
        let hi = key(size, &FileContentId([0xff; 32]));
        let mut range = table.range::<&[u8; 40]>(&lo..=&hi).map_err(db_err(p))?;
        Ok(range.next().transpose().map_err(db_err(p))?.is_some())
    }

    /// The manifest recorded for this content, if any (unverified).
    pub(crate) fn content_manifest(
        &self,
        size: u64,
        content: &FileContentId,
    ) -> Result<Option<ManifestId>> {
        let p = &self.db_path;
        let txn = self.db.begin_read().map_err(db_err(p))?;
        let table = match txn.open_table(CONTENT_TABLE) {
            Ok(t) => t,
            Err(TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(db_err(p)(e)),
        };
        Ok(table
            .get(&key(size, content))
            .map_err(db_err(p))?
            .map(|v| ManifestId(*v.value())))
    }

    /// Turn the content index lookup on imports on (the default) or off,
    /// to measure the full import pipeline (benchmarks). Rows are written
    /// either way.
    #[doc(hidden)]
    pub fn set_content_index_lookups(&self, on: bool) {
        self.content_index
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether imports consult the content index.
    pub(crate) fn content_index_lookups(&self) -> bool {
        self.content_index
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Number of content index rows (tests and diagnostics).
    #[doc(hidden)]
    pub fn content_index_len(&self) -> Result<u64> {
        use redb::ReadableTableMetadata;
        let p = &self.db_path;
        let txn = self.db.begin_read().map_err(db_err(p))?;
        match txn.open_table(CONTENT_TABLE) {
            Ok(t) => t.len().map_err(db_err(p)),
            Err(TableError::TableDoesNotExist(_)) => Ok(0),
            Err(e) => Err(db_err(p)(e)),
        }
    }
}

//! The Scribe object store (specification section 6).
//!
//! This crate will own: the `SCRIBE_FORMAT` object-store descriptor, packs
//! (`packs/<id>.pack`) and loose objects (`loose/<hh>/<kk><hex>`), the
//! `locator.redb` index, batched publication in the order of section 6.3,
//! open-time recovery, `verify`, `rebuild-locator`, full and incremental
//! compaction, and streaming chunked import (FastCDC-2020) with file
//! reconstruction.

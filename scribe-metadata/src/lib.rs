//! Scribe repository metadata (specification sections 7, 8 and 12).
//!
//! This crate will own: the data root (`SCRIBE_FORMAT`, `LOCK`,
//! `catalog.redb`), repository `metadata.redb` at schema 3 with snapshot
//! profile 3, radix snapshots, the atomic acceptance of submissions,
//! operation idempotency, locks, the workspace registry, the read side
//! (stat, list, delta, history, log, describe) and `doctor`/`verify`.

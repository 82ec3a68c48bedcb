//! Scribe workspace state (specification section 9 and 9a).
//!
//! This crate will own: `.scribe/_state/` with its descriptor and
//! `state.redb`, baselines and fingerprints, opened records, the durable
//! pending submission, sync journals, the recovery area, move intents and
//! views.

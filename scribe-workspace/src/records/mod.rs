//! Byte encodings of workspace records (section 9, 9a, "Local offline
//! intent", "Explicit local move intent").
//!
//! Every decoder refuses unknown versions, flags other than 0/1, truncation
//! and trailing bytes, and checks declared counts against the remaining input
//! before allocating.

mod baseline;
mod fingerprint;
mod journal;
mod opened;
mod pending;
mod recovery;
mod view;

pub use baseline::BaselineRecord;
pub use fingerprint::{fingerprint_of, Fingerprint};
pub use journal::JournalEntry;
pub use opened::{OpenedAction, OpenedRecord};
pub use pending::{Integration, PendingLock, PendingSubmit};
pub use recovery::{RecoveryIndex, RecoveryReason};
pub use view::{decode_str16_list, encode_str16_list, normalize_view, ViewChange};

use scribe_format::FormatError;

/// Encoding of a `str16` list count check shared by list decoders: a count
/// that could not fit in the remaining bytes (each item needs at least
/// `min_item` bytes) is refused before allocating.
pub(crate) fn check_count(
    what: &'static str,
    count: u64,
    remaining: usize,
    min_item: usize,
) -> Result<(), FormatError> {
    if count.saturating_mul(min_item as u64) > remaining as u64 {
        return Err(FormatError::Truncated {
            what,
            needed: count.saturating_mul(min_item as u64),
            available: remaining as u64,
        });
    }
    Ok(())
}

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
pub use fingerprint::{fingerprint_of, mtime_parts, Fingerprint};
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

/// Feed `bytes` to every decoder of a `state.redb` value, of the recovery
/// index text and of the status cache; each either refuses with a named
/// [`FormatError`] or returns a value that survives its own encoding.
/// Panics only if a decoder breaks that rule: the body of the
/// `workspace_rows` fuzz target (`scribe-workspace/fuzz`) and of the
/// property test that runs it in CI.
#[doc(hidden)]
pub fn check_row_decoders(bytes: &[u8]) {
    fn round_trip<T: PartialEq + std::fmt::Debug, B: AsRef<[u8]>>(
        decoded: Result<T, FormatError>,
        encode: impl Fn(&T) -> B,
        decode: impl Fn(&[u8]) -> Result<T, FormatError>,
    ) {
        if let Ok(value) = decoded {
            let again = decode(encode(&value).as_ref())
                .unwrap_or_else(|e| panic!("{value:?} does not decode from its encoding: {e}"));
            assert_eq!(again, value);
        }
    }
    round_trip(
        BaselineRecord::decode(bytes),
        |v| v.encode(),
        BaselineRecord::decode,
    );
    round_trip(
        OpenedRecord::decode(bytes),
        |v| v.encode(),
        OpenedRecord::decode,
    );
    round_trip(
        JournalEntry::decode(bytes),
        |v| v.encode(),
        JournalEntry::decode,
    );
    round_trip(
        PendingSubmit::decode(bytes),
        |v| v.encode(),
        PendingSubmit::decode,
    );
    round_trip(
        ViewChange::decode(bytes),
        |v| v.encode(),
        ViewChange::decode,
    );
    round_trip(
        crate::moves::MoveIntent::decode(bytes),
        |v| v.encode(),
        crate::moves::MoveIntent::decode,
    );
    round_trip(
        crate::submit::LastSubmit::decode(bytes),
        |v| v.encode(),
        crate::submit::LastSubmit::decode,
    );
    round_trip(
        decode_str16_list(bytes, 1024, 8192),
        |v| encode_str16_list(v),
        |b| decode_str16_list(b, 1024, 8192),
    );
    round_trip(
        crate::baseline_index::BaselineIndex::decode(bytes),
        |v| v.encode(),
        crate::baseline_index::BaselineIndex::decode,
    );
    if let Ok(text) = std::str::from_utf8(bytes) {
        round_trip(
            RecoveryIndex::decode(text),
            |v| v.encode().into_bytes(),
            |b| {
                RecoveryIndex::decode(std::str::from_utf8(b).map_err(|_| FormatError::NotUtf8 {
                    what: "recovery index",
                })?)
            },
        );
    }
}

#[cfg(test)]
mod decoder_tests {
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// Arbitrary bytes never panic a row decoder (CI's stand-in for
        /// the `workspace_rows` fuzz target).
        #[test]
        fn row_decoders_never_panic_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            super::check_row_decoders(&bytes);
        }

        /// Nor on bytes that start like a real row: a valid version byte,
        /// then arbitrary fields.
        #[test]
        fn row_decoders_never_panic_on_versioned_bytes(version in 0u8..4, rest in proptest::collection::vec(any::<u8>(), 0..256)) {
            let mut bytes = vec![version];
            bytes.extend_from_slice(&rest);
            super::check_row_decoders(&bytes);
        }
    }

    /// Every real encoding passes too (the round trip is exercised, not
    /// only the refusals).
    #[test]
    fn real_rows_round_trip() {
        let base = super::BaselineRecord {
            incarnation: [1; 16],
            manifest: scribe_format::ManifestId([2; 32]),
            content: scribe_format::FileContentId([3; 32]),
            size: 4,
            mode: 1,
            change: 5,
            fingerprint: super::Fingerprint::default(),
        };
        super::check_row_decoders(&base.encode());
        let journal = super::JournalEntry {
            target: Some(base),
            done: true,
            recovery: None,
        };
        super::check_row_decoders(&journal.encode());
        assert_eq!(super::BaselineRecord::decode(&base.encode()).unwrap(), base);
    }
}

//! One observation of a working file, and the settled-observation rule.

use std::time::UNIX_EPOCH;

use scribe_format::bytes::{Put, Reader};
use scribe_format::FormatError;

/// Size, modification time and the Unix millisecond at which they were
/// observed (`recorded_ms` 0 = unknown, never trusted). 28 bytes encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Fingerprint {
    pub size: u64,
    pub mtime_s: u64,
    pub mtime_ns: u32,
    pub recorded_ms: u64,
}

impl Fingerprint {
    /// Encoded length.
    pub const LEN: usize = 28;

    pub fn write(&self, out: &mut Vec<u8>) {
        out.put_u64(self.size);
        out.put_u64(self.mtime_s);
        out.put_u32(self.mtime_ns);
        out.put_u64(self.recorded_ms);
    }

    pub fn read(r: &mut Reader<'_>) -> Result<Self, FormatError> {
        let fp = Fingerprint {
            size: r.u64("fingerprint size")?,
            mtime_s: r.u64("fingerprint mtime s")?,
            mtime_ns: r.u32("fingerprint mtime ns")?,
            recorded_ms: r.u64("fingerprint recorded ms")?,
        };
        if fp.mtime_ns >= 1_000_000_000 {
            return Err(FormatError::InvalidValue {
                what: "fingerprint mtime ns",
                value: fp.mtime_ns.into(),
                reason: "nanoseconds must be below one second",
            });
        }
        Ok(fp)
    }

    /// The separation, in milliseconds, that `recorded_ms` must keep ahead
    /// of the mtime for the observation to be settled. The filesystem's
    /// granularity is read from the mtime itself: sub-millisecond digits need
    /// none, sub-second digits 1 s, a whole second 2 s (FAT), each plus 1 ms
    /// for truncation to whole milliseconds.
    pub fn required_separation_ms(&self) -> u64 {
        let granularity = if !self.mtime_ns.is_multiple_of(1_000_000) {
            0
        } else if self.mtime_ns != 0 {
            1_000
        } else {
            2_000
        };
        granularity + 1
    }

    /// The mtime in whole Unix milliseconds (truncated).
    pub fn mtime_ms(&self) -> u64 {
        self.mtime_s
            .saturating_mul(1000)
            .saturating_add(u64::from(self.mtime_ns / 1_000_000))
    }

    /// Whether equality of size and mtime with this observation proves the
    /// bytes unchanged.
    pub fn is_settled(&self) -> bool {
        self.recorded_ms != 0
            && self.recorded_ms
                >= self
                    .mtime_ms()
                    .saturating_add(self.required_separation_ms())
    }

    /// Whether `now` (a fresh stat) proves the bytes are those this
    /// fingerprint observed, without hashing.
    pub fn proves_unchanged(&self, now: &Fingerprint) -> bool {
        self.is_settled()
            && self.size == now.size
            && self.mtime_s == now.mtime_s
            && self.mtime_ns == now.mtime_ns
    }
}

/// The fingerprint of a file's metadata observed at `recorded_ms`.
pub fn fingerprint_of(meta: &std::fs::Metadata, recorded_ms: u64) -> Fingerprint {
    let (mtime_s, mtime_ns) = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| (d.as_secs(), d.subsec_nanos()))
        .unwrap_or((0, 0));
    Fingerprint {
        size: meta.len(),
        mtime_s,
        mtime_ns,
        recorded_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(mtime_s: u64, mtime_ns: u32, recorded_ms: u64) -> Fingerprint {
        Fingerprint {
            size: 10,
            mtime_s,
            mtime_ns,
            recorded_ms,
        }
    }

    #[test]
    fn separation_follows_mtime_granularity() {
        assert_eq!(fp(100, 123_456_789, 0).required_separation_ms(), 1);
        assert_eq!(fp(100, 123_000_000, 0).required_separation_ms(), 1001);
        assert_eq!(fp(100, 0, 0).required_separation_ms(), 2001);
    }

    #[test]
    fn settled_needs_the_separation() {
        // nanosecond mtime: 1 ms after the mtime millisecond is enough
        assert!(!fp(100, 123_456_789, 100_123).is_settled());
        assert!(fp(100, 123_456_789, 100_124).is_settled());
        // whole seconds (FAT): 2 s + 1 ms
        assert!(!fp(100, 0, 102_000).is_settled());
        assert!(fp(100, 0, 102_001).is_settled());
        // millisecond mtimes: 1 s + 1 ms
        assert!(!fp(100, 5_000_000, 101_005).is_settled());
        assert!(fp(100, 5_000_000, 101_006).is_settled());
        // unknown observation time is never trusted
        assert!(!fp(0, 0, 0).is_settled());
    }

    #[test]
    fn proves_unchanged_only_when_settled_and_equal() {
        let old = fp(100, 1, 200_000);
        assert!(old.proves_unchanged(&fp(100, 1, 999)));
        assert!(!old.proves_unchanged(&fp(100, 2, 999)));
        let unsettled = fp(100, 1, 100_000);
        assert!(!unsettled.proves_unchanged(&fp(100, 1, 999)));
    }

    #[test]
    fn round_trip_and_refusals() {
        let f = fp(7, 8, 9);
        let mut b = Vec::new();
        f.write(&mut b);
        assert_eq!(b.len(), Fingerprint::LEN);
        let mut r = Reader::new(&b);
        assert_eq!(Fingerprint::read(&mut r).unwrap(), f);
        let bad = fp(1, 1_000_000_000, 1);
        let mut b = Vec::new();
        bad.write(&mut b);
        assert!(Fingerprint::read(&mut Reader::new(&b)).is_err());
    }
}

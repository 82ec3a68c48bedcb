//! One observation of a working file, and the settled-observation rule.

use std::time::UNIX_EPOCH;

use scribe_format::bytes::{Put, Reader};
use scribe_format::FormatError;

/// Size, modification time and the Unix millisecond at which they were
/// observed (`recorded_ms` 0 = unknown, never trusted). 28 bytes encoded.
///
/// A fresh stat also carries the file's status-change time (`ctime`,
/// Unix only; never encoded, not part of equality): see
/// [`Fingerprint::proves_unchanged`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Fingerprint {
    pub size: u64,
    pub mtime_s: u64,
    pub mtime_ns: u32,
    pub recorded_ms: u64,
    /// The status-change time of a fresh stat (seconds, nanoseconds):
    /// moved by every write, chmod, rename or link, and settable by no
    /// program. `None` for recorded fingerprints and where the platform
    /// has none (Windows).
    pub changed: Option<(u64, u32)>,
}

impl PartialEq for Fingerprint {
    fn eq(&self, other: &Self) -> bool {
        (self.size, self.mtime_s, self.mtime_ns, self.recorded_ms)
            == (other.size, other.mtime_s, other.mtime_ns, other.recorded_ms)
    }
}

impl Eq for Fingerprint {}

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
            changed: None,
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
        separation_ms(self.mtime_ns)
    }

    /// The mtime in whole Unix milliseconds (truncated).
    pub fn mtime_ms(&self) -> u64 {
        whole_ms(self.mtime_s, self.mtime_ns)
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
    /// fingerprint observed, without hashing: the specification's rule
    /// (a settled observation, the same size and mtime) and, where the
    /// fresh stat has a status-change time, that the file's status did not
    /// change after this observation was taken (the same settling rule,
    /// read on the ctime). A program that writes the same number of bytes
    /// and puts the mtime back (`touch -r`, a tagger keeping the file
    /// time) cannot put the ctime back: its edit is hashed, found and
    /// kept instead of trusted as unchanged and overwritten by a sync.
    pub fn proves_unchanged(&self, now: &Fingerprint) -> bool {
        self.is_settled()
            && self.size == now.size
            && self.mtime_s == now.mtime_s
            && self.mtime_ns == now.mtime_ns
            && now.changed.is_none_or(|(s, ns)| {
                self.recorded_ms >= whole_ms(s, ns).saturating_add(separation_ms(ns))
            })
    }
}

/// A time in whole Unix milliseconds (truncated).
fn whole_ms(s: u64, ns: u32) -> u64 {
    s.saturating_mul(1000)
        .saturating_add(u64::from(ns / 1_000_000))
}

/// The separation an observation must keep ahead of a file time with
/// these nanoseconds ([`Fingerprint::required_separation_ms`]).
fn separation_ms(ns: u32) -> u64 {
    let granularity = if !ns.is_multiple_of(1_000_000) {
        0
    } else if ns != 0 {
        1_000
    } else {
        2_000
    };
    granularity + 1
}

/// The status-change time (ctime) of `meta`, where the platform has one.
#[cfg(unix)]
pub fn status_changed(meta: &std::fs::Metadata) -> Option<(u64, u32)> {
    use std::os::unix::fs::MetadataExt;
    let s = u64::try_from(meta.ctime()).ok()?;
    let ns = u32::try_from(meta.ctime_nsec()).ok()?;
    (ns < 1_000_000_000).then_some((s, ns))
}

/// The status-change time (ctime) of `meta`, where the platform has one
/// (Windows: none through std; the specification's rule alone applies).
#[cfg(not(unix))]
pub fn status_changed(_meta: &std::fs::Metadata) -> Option<(u64, u32)> {
    None
}

/// A modification time as a fingerprint holds it: seconds and nanoseconds
/// since the Unix epoch, `(0, 0)` when unknown or before the epoch.
pub fn mtime_parts(modified: Option<std::time::SystemTime>) -> (u64, u32) {
    modified
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| (d.as_secs(), d.subsec_nanos()))
        .unwrap_or((0, 0))
}

/// The fingerprint of a file's metadata observed at `recorded_ms`.
pub fn fingerprint_of(meta: &std::fs::Metadata, recorded_ms: u64) -> Fingerprint {
    let (mtime_s, mtime_ns) = mtime_parts(meta.modified().ok());
    Fingerprint {
        size: meta.len(),
        mtime_s,
        mtime_ns,
        recorded_ms,
        changed: status_changed(meta),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(mtime_s: u64, mtime_ns: u32, recorded_ms: u64) -> Fingerprint {
        Fingerprint {
            changed: None,
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
    fn a_status_change_after_the_observation_proves_nothing() {
        let old = fp(100, 1, 200_000);
        let now = |changed| Fingerprint {
            changed,
            ..fp(100, 1, 0)
        };
        // Before the observation, by the settling separation: trusted.
        assert!(old.proves_unchanged(&now(Some((199, 998_999_999)))));
        assert!(old.proves_unchanged(&now(None)));
        // In the millisecond before the observation's: trusted; in its
        // own or after it: hashed.
        assert!(old.proves_unchanged(&now(Some((199, 999_000_001)))));
        assert!(!old.proves_unchanged(&now(Some((200, 1)))));
        assert!(!old.proves_unchanged(&now(Some((200, 0)))));
        assert!(!old.proves_unchanged(&now(Some((86_400, 5)))));
        // A whole-second ctime needs 2 s + 1 ms, as an mtime does.
        assert!(!old.proves_unchanged(&now(Some((198, 0)))));
        assert!(old.proves_unchanged(&now(Some((197, 0)))));
        // Never encoded, never part of equality.
        let mut bytes = Vec::new();
        now(Some((300, 1))).write(&mut bytes);
        let back = Fingerprint::read(&mut Reader::new(&bytes)).unwrap();
        assert_eq!(back.changed, None);
        assert_eq!(back, now(Some((300, 1))));
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

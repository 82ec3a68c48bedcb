//! `baseline` rows: what the workspace last synced or submitted for a path.

use scribe_format::bytes::{Put, Reader};
use scribe_format::{FileContentId, FormatError, ManifestId};

use super::Fingerprint;

/// `u8 1 ‖ [16] incarnation ‖ [32] manifest ‖ [32] content ‖ u64 size ‖
/// u8 mode ‖ u64 change ‖ fingerprint (28)`: 126 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BaselineRecord {
    pub incarnation: [u8; 16],
    pub manifest: ManifestId,
    pub content: FileContentId,
    pub size: u64,
    /// 0 regular, 1 executable.
    pub mode: u8,
    /// The change that produced this state (nonzero).
    pub change: u64,
    pub fingerprint: Fingerprint,
}

impl BaselineRecord {
    pub const LEN: usize = 1 + 16 + 32 + 32 + 8 + 1 + 8 + Fingerprint::LEN;

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::LEN);
        out.put_u8(1);
        out.put_bytes(&self.incarnation);
        out.put_bytes(&self.manifest.0);
        out.put_bytes(&self.content.0);
        out.put_u64(self.size);
        out.put_u8(self.mode);
        out.put_u64(self.change);
        self.fingerprint.write(&mut out);
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let mut r = Reader::new(bytes);
        let version = r.u8("baseline version")?;
        if version != 1 {
            return Err(FormatError::UnsupportedVersion {
                what: "baseline record",
                version: version.into(),
            });
        }
        let rec = BaselineRecord {
            incarnation: r.array("baseline incarnation")?,
            manifest: ManifestId(r.array("baseline manifest")?),
            content: FileContentId(r.array("baseline content")?),
            size: r.u64("baseline size")?,
            mode: r.u8("baseline mode")?,
            change: r.u64("baseline change")?,
            fingerprint: Fingerprint::read(&mut r)?,
        };
        r.finish("baseline record")?;
        if rec.mode > 1 {
            return Err(FormatError::InvalidValue {
                what: "baseline mode",
                value: rec.mode.into(),
                reason: "modes are 0 regular and 1 executable",
            });
        }
        if rec.change == 0 {
            return Err(FormatError::InvalidValue {
                what: "baseline change",
                value: 0,
                reason: "a baseline names the nonzero change that produced it",
            });
        }
        Ok(rec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn sample() -> BaselineRecord {
        BaselineRecord {
            incarnation: [1; 16],
            manifest: ManifestId([2; 32]),
            content: FileContentId([3; 32]),
            size: 4,
            mode: 1,
            change: 5,
            fingerprint: Fingerprint {
                size: 4,
                mtime_s: 6,
                mtime_ns: 7,
                recorded_ms: 8,
                changed: None,
            },
        }
    }

    #[test]
    fn layout_is_exact() {
        let b = sample().encode();
        assert_eq!(b.len(), 126);
        assert_eq!(b[0], 1);
        assert_eq!(&b[1..17], &[1; 16]);
        assert_eq!(&b[17..49], &[2; 32]);
        assert_eq!(&b[49..81], &[3; 32]);
        assert_eq!(&b[81..89], &4u64.to_le_bytes());
        assert_eq!(b[89], 1);
        assert_eq!(&b[90..98], &5u64.to_le_bytes());
        assert_eq!(&b[98..106], &4u64.to_le_bytes());
        assert_eq!(&b[106..114], &6u64.to_le_bytes());
        assert_eq!(&b[114..118], &7u32.to_le_bytes());
        assert_eq!(&b[118..126], &8u64.to_le_bytes());
        assert_eq!(BaselineRecord::decode(&b).unwrap(), sample());
    }

    #[test]
    fn refusals() {
        let b = sample().encode();
        for cut in 0..b.len() {
            assert!(BaselineRecord::decode(&b[..cut]).is_err());
        }
        let mut long = b.clone();
        long.push(0);
        assert!(BaselineRecord::decode(&long).is_err());
        let mut v2 = b.clone();
        v2[0] = 2;
        assert!(BaselineRecord::decode(&v2).is_err());
        let mut mode = b.clone();
        mode[89] = 2;
        assert!(BaselineRecord::decode(&mode).is_err());
        let mut change = b;
        change[90..98].copy_from_slice(&0u64.to_le_bytes());
        assert!(BaselineRecord::decode(&change).is_err());
    }
}

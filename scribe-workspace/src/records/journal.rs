//! `journal` and `deferred` rows: one planned sync step per path.

use scribe_format::bytes::{Put, Reader};
use scribe_format::FormatError;

use super::BaselineRecord;

/// Longest recovery entry name we accept (`<unix ms>-<32 hex>` is 46 bytes).
const MAX_RECOVERY_NAME: usize = 255;

/// `u8 1 ‖ u8 target present (‖ bytes16 BaselineRecord) ‖ u8 done ‖
/// u8 recovery name present (‖ str16)`.
///
/// A target is the state the path must have once applied; none means the
/// path is removed. `recovery` names the entry that received displaced
/// local bytes, recorded before they are moved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalEntry {
    pub target: Option<BaselineRecord>,
    pub done: bool,
    pub recovery: Option<String>,
}

impl JournalEntry {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + BaselineRecord::LEN + 2);
        out.put_u8(1);
        match &self.target {
            None => out.put_u8(0),
            Some(t) => {
                out.put_u8(1);
                out.put_bytes16(&t.encode());
            }
        }
        out.put_u8(self.done.into());
        match &self.recovery {
            None => out.put_u8(0),
            Some(name) => {
                out.put_u8(1);
                out.put_bytes16(name.as_bytes());
            }
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let mut r = Reader::new(bytes);
        let version = r.u8("journal version")?;
        if version != 1 {
            return Err(FormatError::UnsupportedVersion {
                what: "journal entry",
                version: version.into(),
            });
        }
        let target = if r.flag("journal target present")? {
            Some(BaselineRecord::decode(
                r.bytes16("journal target", BaselineRecord::LEN)?,
            )?)
        } else {
            None
        };
        let done = r.flag("journal done")?;
        let recovery = if r.flag("journal recovery present")? {
            let name = r.str16("journal recovery name", MAX_RECOVERY_NAME)?;
            if name.is_empty() || name.contains(['/', '\\', '\0']) || name.starts_with('.') {
                return Err(FormatError::invalid(
                    "journal recovery name",
                    "must be a plain file name",
                ));
            }
            Some(name.to_string())
        } else {
            None
        };
        r.finish("journal entry")?;
        Ok(JournalEntry {
            target,
            done,
            recovery,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Fingerprint;

    fn baseline() -> BaselineRecord {
        BaselineRecord {
            incarnation: [9; 16],
            manifest: scribe_format::ManifestId([1; 32]),
            content: scribe_format::FileContentId([2; 32]),
            size: 3,
            mode: 0,
            change: 4,
            fingerprint: Fingerprint::default(),
        }
    }

    #[test]
    fn round_trips() {
        for entry in [
            JournalEntry {
                target: None,
                done: false,
                recovery: None,
            },
            JournalEntry {
                target: Some(baseline()),
                done: true,
                recovery: Some("1700000000000-0123456789abcdef0123456789abcdef".into()),
            },
        ] {
            let b = entry.encode();
            assert_eq!(JournalEntry::decode(&b).unwrap(), entry);
            for cut in 0..b.len() {
                assert!(JournalEntry::decode(&b[..cut]).is_err());
            }
            let mut long = b.clone();
            long.push(1);
            assert!(JournalEntry::decode(&long).is_err());
        }
    }

    #[test]
    fn hand_built_removal() {
        assert_eq!(
            JournalEntry {
                target: None,
                done: true,
                recovery: None
            }
            .encode(),
            vec![1, 0, 1, 0]
        );
        assert!(JournalEntry::decode(&[1, 0, 2, 0]).is_err());
        assert!(JournalEntry::decode(&[1, 0, 0, 1, 3, 0, b'a', b'/', b'b']).is_err());
    }
}

//! `opened` rows: files the user has opened for the next submission.

use scribe_format::bytes::{Put, Reader};
use scribe_format::limits::MAX_PATH_BYTES;
use scribe_format::FormatError;

/// The action of an opened file (the change-set action numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenedAction {
    Add = 1,
    Edit = 2,
    Delete = 3,
    Keep = 4,
}

impl OpenedAction {
    pub fn from_byte(b: u8) -> Result<Self, FormatError> {
        Ok(match b {
            1 => OpenedAction::Add,
            2 => OpenedAction::Edit,
            3 => OpenedAction::Delete,
            4 => OpenedAction::Keep,
            v => {
                return Err(FormatError::InvalidValue {
                    what: "opened action",
                    value: v.into(),
                    reason: "actions are 1 add, 2 edit, 3 delete, 4 keep",
                })
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            OpenedAction::Add => "add",
            OpenedAction::Edit => "edit",
            OpenedAction::Delete => "delete",
            OpenedAction::Keep => "keep",
        }
    }
}

/// `u8 1 ‖ u8 action ‖ u64 opened ms ‖ u8 needs reconcile ‖ u8 move present
/// (‖ str16 source path ‖ u64 source change)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenedRecord {
    pub action: OpenedAction,
    pub opened_ms: u64,
    /// Advisory "Local offline intent" flag, strictly 0 or 1.
    pub needs_reconcile: bool,
    /// An explicit move: the source path and its accepted change.
    pub moved_from: Option<(String, u64)>,
}

impl OpenedRecord {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16);
        out.put_u8(1);
        out.put_u8(self.action as u8);
        out.put_u64(self.opened_ms);
        out.put_u8(self.needs_reconcile.into());
        match &self.moved_from {
            None => out.put_u8(0),
            Some((path, change)) => {
                out.put_u8(1);
                out.put_bytes16(path.as_bytes());
                out.put_u64(*change);
            }
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let mut r = Reader::new(bytes);
        let version = r.u8("opened version")?;
        if version != 1 {
            return Err(FormatError::UnsupportedVersion {
                what: "opened record",
                version: version.into(),
            });
        }
        let action = OpenedAction::from_byte(r.u8("opened action")?)?;
        let opened_ms = r.u64("opened ms")?;
        let needs_reconcile = r.flag("opened needs reconcile")?;
        let moved_from = if r.flag("opened move present")? {
            let path = r.str16("opened move source", MAX_PATH_BYTES)?;
            scribe_format::path::validate(path)?;
            let change = r.u64("opened move source change")?;
            if action != OpenedAction::Add {
                return Err(FormatError::invalid(
                    "opened record",
                    "only an add carries a move source",
                ));
            }
            if change == 0 {
                return Err(FormatError::InvalidValue {
                    what: "opened move source change",
                    value: 0,
                    reason: "a move source names a nonzero change",
                });
            }
            Some((path.to_string(), change))
        } else {
            None
        };
        r.finish("opened record")?;
        Ok(OpenedRecord {
            action,
            opened_ms,
            needs_reconcile,
            moved_from,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_built_bytes() {
        let rec = OpenedRecord {
            action: OpenedAction::Add,
            opened_ms: 0x0102,
            needs_reconcile: true,
            moved_from: Some(("a/b".into(), 9)),
        };
        let mut want = vec![1, 1];
        want.extend_from_slice(&0x0102u64.to_le_bytes());
        want.push(1);
        want.push(1);
        want.extend_from_slice(&3u16.to_le_bytes());
        want.extend_from_slice(b"a/b");
        want.extend_from_slice(&9u64.to_le_bytes());
        assert_eq!(rec.encode(), want);
        assert_eq!(OpenedRecord::decode(&want).unwrap(), rec);
        for cut in 0..want.len() {
            assert!(OpenedRecord::decode(&want[..cut]).is_err());
        }
    }

    #[test]
    fn refusals() {
        let plain = OpenedRecord {
            action: OpenedAction::Edit,
            opened_ms: 1,
            needs_reconcile: false,
            moved_from: None,
        }
        .encode();
        let mut flag = plain.clone();
        flag[10] = 2;
        assert!(OpenedRecord::decode(&flag).is_err());
        let mut action = plain.clone();
        action[1] = 5;
        assert!(OpenedRecord::decode(&action).is_err());
        let mut trailing = plain;
        trailing.push(0);
        assert!(OpenedRecord::decode(&trailing).is_err());
        // a move source on an edit
        let edit_move = OpenedRecord {
            action: OpenedAction::Edit,
            opened_ms: 1,
            needs_reconcile: false,
            moved_from: Some(("x".into(), 1)),
        }
        .encode();
        assert!(OpenedRecord::decode(&edit_move).is_err());
    }
}

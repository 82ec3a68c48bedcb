//! Recovery index entries (section 9a): the text file written beside every
//! displaced working-copy entry, before the rename that displaces it.
//!
//! ```text
//! scribe-recovery 1
//! path=<canonical workspace path>
//! reason=sync-update | sync-remove | delete | revert | resolve | project
//! operation=<32 hex, the random half of the entry name>
//! retained_ms=<unix milliseconds, the timestamp half of the entry name>
//! ```
//!
//! Every key appears exactly once and nothing else is accepted. The file
//! ends with a newline after the last line; we accept LF line endings only,
//! since we are the only writer.

use std::fmt;

use scribe_format::FormatError;

/// Why a file was displaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryReason {
    SyncUpdate,
    SyncRemove,
    Delete,
    Revert,
    Resolve,
    Project,
}

impl RecoveryReason {
    pub fn as_str(self) -> &'static str {
        match self {
            RecoveryReason::SyncUpdate => "sync-update",
            RecoveryReason::SyncRemove => "sync-remove",
            RecoveryReason::Delete => "delete",
            RecoveryReason::Revert => "revert",
            RecoveryReason::Resolve => "resolve",
            RecoveryReason::Project => "project",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "sync-update" => RecoveryReason::SyncUpdate,
            "sync-remove" => RecoveryReason::SyncRemove,
            "delete" => RecoveryReason::Delete,
            "revert" => RecoveryReason::Revert,
            "resolve" => RecoveryReason::Resolve,
            "project" => RecoveryReason::Project,
            _ => return None,
        })
    }
}

impl fmt::Display for RecoveryReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One recovery index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveryIndex {
    pub path: String,
    pub reason: RecoveryReason,
    /// The random half of the entry name.
    pub operation: [u8; 16],
    /// The timestamp half of the entry name.
    pub retained_ms: u64,
}

impl RecoveryIndex {
    /// The entry name `<unix ms>-<32 hex random>`; its index is
    /// `<name>.origin`.
    pub fn entry_name(&self) -> String {
        format!("{}-{}", self.retained_ms, hex::encode(self.operation))
    }

    pub fn encode(&self) -> String {
        format!(
            "scribe-recovery 1\npath={}\nreason={}\noperation={}\nretained_ms={}\n",
            self.path,
            self.reason,
            hex::encode(self.operation),
            self.retained_ms
        )
    }

    pub fn decode(text: &str) -> Result<Self, FormatError> {
        const WHAT: &str = "recovery index";
        let body = text
            .strip_suffix('\n')
            .ok_or_else(|| FormatError::invalid(WHAT, "must end with a newline"))?;
        let mut lines = body.split('\n');
        if lines.next() != Some("scribe-recovery 1") {
            return Err(FormatError::invalid(
                WHAT,
                "first line must be `scribe-recovery 1`",
            ));
        }
        let (mut path, mut reason, mut operation, mut retained) = (None, None, None, None);
        for line in lines {
            let (key, value) = line.split_once('=').ok_or_else(|| {
                FormatError::invalid(WHAT, format!("line {line:?} is not key=value"))
            })?;
            let slot = match key {
                "path" => &mut path,
                "reason" => &mut reason,
                "operation" => &mut operation,
                "retained_ms" => &mut retained,
                other => return Err(FormatError::invalid(WHAT, format!("unknown key {other:?}"))),
            };
            if slot.replace(value).is_some() {
                return Err(FormatError::invalid(
                    WHAT,
                    format!("key {key:?} appears twice"),
                ));
            }
        }
        let missing = |k: &str| FormatError::invalid(WHAT, format!("key {k:?} is missing"));
        let path = path.ok_or_else(|| missing("path"))?;
        scribe_format::path::validate(path)?;
        let reason = reason.ok_or_else(|| missing("reason"))?;
        let reason = RecoveryReason::parse(reason)
            .ok_or_else(|| FormatError::invalid(WHAT, format!("unknown reason {reason:?}")))?;
        let operation_hex = operation.ok_or_else(|| missing("operation"))?;
        let operation = scribe_format::OperationId::from_hex(operation_hex)?.0;
        let retained_text = retained.ok_or_else(|| missing("retained_ms"))?;
        if retained_text.is_empty()
            || !retained_text.bytes().all(|b| b.is_ascii_digit())
            || (retained_text.len() > 1 && retained_text.starts_with('0'))
        {
            return Err(FormatError::invalid(
                WHAT,
                "retained_ms must be a decimal number",
            ));
        }
        let retained_ms = retained_text
            .parse()
            .map_err(|_| FormatError::invalid(WHAT, "retained_ms is out of range"))?;
        Ok(RecoveryIndex {
            path: path.to_string(),
            reason,
            operation,
            retained_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RecoveryIndex {
        RecoveryIndex {
            path: "art/hero.psd".into(),
            reason: RecoveryReason::SyncUpdate,
            operation: [0xab; 16],
            retained_ms: 1_700_000_000_123,
        }
    }

    #[test]
    fn exact_text() {
        assert_eq!(
            sample().encode(),
            "scribe-recovery 1\npath=art/hero.psd\nreason=sync-update\noperation=abababababababababababababababab\nretained_ms=1700000000123\n"
        );
        assert_eq!(RecoveryIndex::decode(&sample().encode()).unwrap(), sample());
        assert_eq!(
            sample().entry_name(),
            "1700000000123-abababababababababababababababab"
        );
    }

    #[test]
    fn refuses_anything_else() {
        let good = sample().encode();
        let cases = [
            good.replace("scribe-recovery 1", "scribe-recovery 2"),
            good.replace("reason=sync-update", "reason=other"),
            good.trim_end().to_string(),
            format!("{good}extra=1\n"),
            format!("{good}path=x\n"),
            good.replace("retained_ms=1700000000123\n", ""),
            good.replace("operation=abab", "operation=ABAB"),
            good.replace("retained_ms=1", "retained_ms=x"),
            good.replace("path=art/hero.psd", "path=../x"),
            good.replace('\n', "\r\n"),
        ];
        for bad in cases {
            assert!(RecoveryIndex::decode(&bad).is_err(), "{bad:?}");
        }
    }
}

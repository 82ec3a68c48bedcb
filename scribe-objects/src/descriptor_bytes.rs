//! A minimal private reader/writer of the object-store `SCRIBE_FORMAT`
//! descriptor (specification section 2).
//!
//! Temporary: `scribe_format::descriptor` is being written in parallel; once
//! it lands, [`read`] and [`StoreDescriptor::to_text`] are replaced by it.
//! Nothing outside this module depends on the parsing details.
//!
//! ```text
//! scribe-descriptor = 1
//! kind = object-store
//! layout = 1
//! envelope = 1
//! small-object-threshold = 16777236
//! pack-seal-bytes = 268435456
//! compression = lz4
//! required-features = lz4
//! ```

use std::path::Path;

use scribe_format::envelope::Compression;

use crate::error::{Result, StoreError};

/// Layout version of section 6 written and read.
pub const LAYOUT_VERSION: u32 = 1;
/// Envelope version written and read.
pub const ENVELOPE_VERSION: u32 = 1;
/// Features this build recognizes.
const KNOWN_FEATURES: &[&str] = &["lz4"];

/// The fields of an object-store descriptor, plus unknown keys kept in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreDescriptor {
    pub small_object_threshold: u64,
    pub pack_seal_bytes: u64,
    pub compression: Compression,
    /// Unknown `key = value` lines, preserved when rewritten.
    pub extra: Vec<(String, String)>,
}

impl StoreDescriptor {
    /// The descriptor text, LF line endings.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        s.push_str("scribe-descriptor = 1\n");
        s.push_str("kind = object-store\n");
        s.push_str(&format!("layout = {LAYOUT_VERSION}\n"));
        s.push_str(&format!("envelope = {ENVELOPE_VERSION}\n"));
        s.push_str(&format!(
            "small-object-threshold = {}\n",
            self.small_object_threshold
        ));
        s.push_str(&format!("pack-seal-bytes = {}\n", self.pack_seal_bytes));
        s.push_str(&format!("compression = {}\n", self.compression.as_str()));
        if self.compression == Compression::Lz4 {
            s.push_str("required-features = lz4\n");
        }
        for (k, v) in &self.extra {
            s.push_str(&format!("{k} = {v}\n"));
        }
        s
    }
}

fn bad(path: &Path, reason: impl Into<String>) -> StoreError {
    StoreError::Descriptor {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Parse descriptor text read from `path`.
pub fn parse(path: &Path, text: &str) -> Result<StoreDescriptor> {
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    match lines.next() {
        Some("scribe-descriptor = 1") => {}
        Some(first) if first.starts_with("scribe-descriptor") => {
            return Err(StoreError::UnexpectedVersion {
                path: path.to_path_buf(),
                what: "descriptor",
                found: first.to_string(),
                supported: "scribe-descriptor = 1".into(),
            })
        }
        _ => return Err(bad(path, "first line is not `scribe-descriptor = 1`")),
    }
    let mut kind = None;
    let mut layout = None;
    let mut envelope = None;
    let mut threshold = None;
    let mut seal = None;
    let mut compression = None;
    let mut features: Vec<String> = Vec::new();
    let mut extra = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (n, line) in lines.enumerate() {
        if line.is_empty() {
            continue;
        }
        let (key, value) = line
            .split_once(" = ")
            .ok_or_else(|| bad(path, format!("line {} is not `key = value`", n + 2)))?;
        if key.is_empty()
            || !key
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return Err(bad(path, format!("line {}: invalid key {key:?}", n + 2)));
        }
        if !seen.insert(key.to_string()) {
            return Err(bad(path, format!("duplicate key {key:?}")));
        }
        let num = |v: &str| -> Result<u64> {
            v.parse::<u64>()
                .map_err(|_| bad(path, format!("{key} = {v:?} is not a number")))
        };
        match key {
            "kind" => kind = Some(value.to_string()),
            "layout" => layout = Some(num(value)?),
            "envelope" => envelope = Some(num(value)?),
            "small-object-threshold" => threshold = Some(num(value)?),
            "pack-seal-bytes" => seal = Some(num(value)?),
            "compression" => {
                compression = Some(
                    Compression::parse(value)
                        .map_err(|_| bad(path, format!("unknown compression {value:?}")))?,
                )
            }
            "required-features" => {
                features = value.split(',').map(|f| f.trim().to_string()).collect()
            }
            _ => extra.push((key.to_string(), value.to_string())),
        }
    }
    match kind.as_deref() {
        Some("object-store") => {}
        Some(other) => return Err(bad(path, format!("kind is {other:?}, not object-store"))),
        None => return Err(bad(path, "missing `kind`")),
    }
    for f in &features {
        if !KNOWN_FEATURES.contains(&f.as_str()) {
            return Err(StoreError::UnsupportedFeature {
                path: path.to_path_buf(),
                feature: f.clone(),
            });
        }
    }
    let check = |what: &'static str, v: Option<u64>, want: u32| -> Result<()> {
        match v {
            Some(v) if v == u64::from(want) => Ok(()),
            Some(v) => Err(StoreError::UnexpectedVersion {
                path: path.to_path_buf(),
                what,
                found: v.to_string(),
                supported: want.to_string(),
            }),
            None => Err(bad(path, format!("missing `{what}`"))),
        }
    };
    check("layout", layout, LAYOUT_VERSION)?;
    check("envelope", envelope, ENVELOPE_VERSION)?;
    let compression = compression.ok_or_else(|| bad(path, "missing `compression`"))?;
    if compression == Compression::Lz4 && !features.iter().any(|f| f == "lz4") {
        return Err(bad(path, "an lz4 store must require feature `lz4`"));
    }
    let small_object_threshold =
        threshold.ok_or_else(|| bad(path, "missing `small-object-threshold`"))?;
    let pack_seal_bytes = seal.ok_or_else(|| bad(path, "missing `pack-seal-bytes`"))?;
    if pack_seal_bytes < 16 {
        return Err(bad(path, "pack-seal-bytes is smaller than a pack header"));
    }
    Ok(StoreDescriptor {
        small_object_threshold,
        pack_seal_bytes,
        compression,
        extra,
    })
}

/// Read and parse the descriptor file at `path`.
pub fn read(path: &Path) -> Result<StoreDescriptor> {
    let text = std::fs::read(path).map_err(crate::error::io_err(path))?;
    let text = String::from_utf8(text).map_err(|_| bad(path, "not UTF-8"))?;
    parse(path, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_unknown_keys() {
        let d = StoreDescriptor {
            small_object_threshold: 16_777_236,
            pack_seal_bytes: 1 << 28,
            compression: Compression::Lz4,
            extra: vec![("future-key".into(), "x".into())],
        };
        let text = d.to_text();
        assert!(text.starts_with("scribe-descriptor = 1\nkind = object-store\n"));
        assert!(text.contains("required-features = lz4\n"));
        assert_eq!(parse(Path::new("t"), &text).unwrap(), d);
        let crlf = text.replace('\n', "\r\n");
        assert_eq!(parse(Path::new("t"), &crlf).unwrap(), d);
    }

    #[test]
    fn refusals() {
        let p = Path::new("t");
        assert!(parse(p, "kind = object-store\n").is_err());
        assert!(parse(p, "scribe-descriptor = 1\nkind = workspace\n").is_err());
        let base = StoreDescriptor {
            small_object_threshold: 1,
            pack_seal_bytes: 100,
            compression: Compression::None,
            extra: vec![],
        }
        .to_text();
        assert!(parse(p, &base).is_ok());
        let unknown = format!("{base}required-features = teleport\n");
        assert!(matches!(
            parse(p, &unknown),
            Err(StoreError::UnsupportedFeature { .. })
        ));
        let v2 = base.replace("layout = 1", "layout = 2");
        assert!(matches!(
            parse(p, &v2),
            Err(StoreError::UnexpectedVersion { .. })
        ));
        let lz = base.replace("compression = none", "compression = lz4");
        assert!(parse(p, &lz).is_err(), "lz4 without required feature");
    }
}

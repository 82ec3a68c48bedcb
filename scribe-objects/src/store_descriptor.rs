//! The object-store `SCRIBE_FORMAT` descriptor (specification section 2),
//! read and written by `scribe_format::descriptor` (the one descriptor codec).
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

use scribe_format::descriptor::{self, Descriptor, FEATURE_LZ4};
use scribe_format::envelope::Compression;
use scribe_format::FormatError;

use crate::error::{Result, StoreError};

/// Layout version of section 6 written and read.
pub const LAYOUT_VERSION: u32 = 1;
/// Envelope version written and read.
pub const ENVELOPE_VERSION: u32 = 1;
/// Features this build recognizes.
pub const KNOWN_FEATURES: &[&str] = &[FEATURE_LZ4];
/// The versions this build reads, as descriptor keys and values.
pub const VERSIONS: [(&str, u32); 2] = [("layout", LAYOUT_VERSION), ("envelope", ENVELOPE_VERSION)];
/// Keys the store interprets; every other key is kept as it was.
const KNOWN_KEYS: &[&str] = &[
    "kind",
    "layout",
    "envelope",
    "small-object-threshold",
    "pack-seal-bytes",
    "compression",
    "required-features",
];

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
        let mut d = Descriptor::new_object_store(&descriptor::ObjectStore {
            layout: LAYOUT_VERSION,
            envelope: ENVELOPE_VERSION,
            small_object_threshold: self.small_object_threshold,
            pack_seal_bytes: self.pack_seal_bytes,
            compression: self.compression,
        })
        .expect(
            "the store's own fields are valid descriptor values because StoreOptions checks them",
        );
        for (k, v) in &self.extra {
            // Unknown keys came from a descriptor that parsed, so they are valid.
            let _ = d.set(k, v);
        }
        String::from_utf8(d.encode()).expect("descriptors are UTF-8")
    }
}

fn bad(path: &Path, e: FormatError) -> StoreError {
    match e {
        FormatError::UnsupportedFeature { feature } => StoreError::UnsupportedFeature {
            path: path.to_path_buf(),
            feature,
        },
        other => StoreError::Descriptor {
            path: path.to_path_buf(),
            reason: other.to_string(),
        },
    }
}

/// Parse descriptor text read from `path`.
pub fn parse(path: &Path, text: &str) -> Result<StoreDescriptor> {
    let d = Descriptor::parse(text.as_bytes()).map_err(|e| bad(path, e))?;
    for (key, supported) in VERSIONS {
        if let Err(m) = d.version_check(key, &supported.to_string()) {
            if d.kind() == descriptor::Kind::ObjectStore {
                return Err(StoreError::UnexpectedVersion {
                    path: path.to_path_buf(),
                    what: key,
                    found: m.found.unwrap_or_else(|| "(missing)".into()),
                    supported: supported.to_string(),
                });
            }
        }
    }
    let fields = d.object_store().map_err(|e| bad(path, e))?;
    d.check_mutation(KNOWN_FEATURES).map_err(|e| bad(path, e))?;
    Ok(StoreDescriptor {
        small_object_threshold: fields.small_object_threshold,
        pack_seal_bytes: fields.pack_seal_bytes,
        compression: fields.compression,
        extra: d
            .entries()
            .filter(|(k, _)| !KNOWN_KEYS.contains(k))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    })
}

/// Read and parse the descriptor file at `path`.
pub fn read(path: &Path) -> Result<StoreDescriptor> {
    let text = std::fs::read(path).map_err(crate::error::io_err(path))?;
    let text = String::from_utf8(text).map_err(|_| StoreError::Descriptor {
        path: path.to_path_buf(),
        reason: "not UTF-8".into(),
    })?;
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

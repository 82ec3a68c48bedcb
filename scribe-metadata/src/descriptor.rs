//! `SCRIBE_FORMAT` files of the data root and of each repository (section 2).
//!
//! INTERIM: parsing and writing belong to `scribe_format::descriptor`, which
//! had not landed when this crate needed it. This module keeps the rules
//! the openers rely on (first line, `kind`, `key = value`, unknown keys
//! kept, `required-features`) and is replaced by calls into the format crate
//! when it lands.

use std::io::Write;
use std::path::Path;

use crate::error::{MetadataError, Result};

/// File name of a descriptor.
pub const FILE: &str = "SCRIBE_FORMAT";

/// Features this build knows.
pub const KNOWN_FEATURES: &[&str] = &["atomic-publication-v2"];

/// A parsed descriptor: ordered `key = value` pairs after the first line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Descriptor {
    pub pairs: Vec<(String, String)>,
}

impl Descriptor {
    pub fn new(kind: &str) -> Self {
        Descriptor {
            pairs: vec![("kind".into(), kind.into())],
        }
    }

    pub fn with(mut self, k: &str, v: impl Into<String>) -> Self {
        self.pairs.push((k.into(), v.into()));
        self
    }

    pub fn get(&self, k: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    }

    pub fn render(&self) -> String {
        let mut s = String::from("scribe-descriptor = 1\n");
        for (k, v) in &self.pairs {
            s.push_str(k);
            s.push_str(" = ");
            s.push_str(v);
            s.push('\n');
        }
        s
    }

    pub fn parse(text: &str) -> std::result::Result<Self, String> {
        let mut lines = text.lines().map(|l| l.strip_suffix('\r').unwrap_or(l));
        if lines.next() != Some("scribe-descriptor = 1") {
            return Err("the first line is not `scribe-descriptor = 1`".into());
        }
        let mut pairs = Vec::new();
        for line in lines {
            if line.is_empty() {
                continue;
            }
            let (k, v) = line
                .split_once(" = ")
                .ok_or_else(|| format!("line {line:?} is not `key = value`"))?;
            if k.is_empty()
                || !k
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            {
                return Err(format!("bad key {k:?}"));
            }
            pairs.push((k.to_owned(), v.to_owned()));
        }
        let d = Descriptor { pairs };
        if d.get("kind").is_none() {
            return Err("no `kind` line".into());
        }
        Ok(d)
    }

    /// Read and parse `dir/SCRIBE_FORMAT`.
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join(FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| MetadataError::io(&path, e))?;
        Descriptor::parse(&text)
            .map_err(|e| MetadataError::corrupt(format!("{}: {e}", path.display())))
    }

    /// Write `dir/SCRIBE_FORMAT` through a flushed temporary renamed into place.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let path = dir.join(FILE);
        let tmp = dir.join(format!("{FILE}.tmp"));
        let mut f = std::fs::File::create(&tmp).map_err(|e| MetadataError::io(&tmp, e))?;
        f.write_all(self.render().as_bytes())
            .and_then(|_| f.sync_all())
            .map_err(|e| MetadataError::io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| MetadataError::io(&path, e))?;
        sync_dir(dir)
    }

    /// Refuse a kind other than `kind`, a value other than each expected
    /// one, and unknown required features.
    pub fn check(&self, dir: &Path, kind: &str, expect: &[(&'static str, &str)]) -> Result<()> {
        let path = dir.join(FILE);
        if self.get("kind") != Some(kind) {
            return Err(MetadataError::VersionMismatch {
                path,
                what: "kind",
                found: self.get("kind").unwrap_or("").into(),
                expected: kind.into(),
            });
        }
        for (k, want) in expect {
            let found = self.get(k).unwrap_or("<absent>");
            if found != *want {
                return Err(MetadataError::VersionMismatch {
                    path,
                    what: k,
                    found: found.into(),
                    expected: (*want).into(),
                });
            }
        }
        if let Some(list) = self.get("required-features") {
            for feature in list.split(',').map(str::trim).filter(|f| !f.is_empty()) {
                if !KNOWN_FEATURES.contains(&feature) {
                    return Err(MetadataError::UnsupportedFeature {
                        path,
                        feature: feature.into(),
                    });
                }
            }
        }
        Ok(())
    }
}

/// Flush a directory so a rename or creation inside it is durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    let f = std::fs::File::open(dir).map_err(|e| MetadataError::io(dir, e))?;
    f.sync_all().map_err(|e| MetadataError::io(dir, e))
}

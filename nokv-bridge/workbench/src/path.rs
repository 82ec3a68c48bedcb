//! Workbench ids, the five sections, tool-path rules (the jail) and seed
//! 002's physical key codec.
//!
//! A tool path is relative to a section. [`ToolPath::parse`] refuses an
//! absolute path, an empty component (`a//b`, a trailing `/`), `.`, `..`,
//! a backslash, NUL, and a path whose first component repeats the section
//! name; what it accepts can never name anything outside
//! `<workbench id>/<section>/`. [`key`] is the physical key codec: one is
//! added to each UTF-8 byte, components are separated by NUL and an exact
//! key ends with 0x01 (a UTF-8 byte is at most 0xF4, so the shifted bytes
//! are 0x01..=0xF5 and a refused NUL is the only byte that would shift to
//! 0x01).

use std::fmt;

use crate::error::WbError;

/// The most bytes of a workbench id.
pub const MAX_ID_BYTES: usize = 128;

/// Check a workbench id: an ASCII letter or digit, then ASCII letters,
/// digits, `_` and `-`; at most 128 bytes.
pub fn check_id(id: &str) -> Result<(), WbError> {
    let bytes = id.as_bytes();
    let ok = !bytes.is_empty()
        && bytes.len() <= MAX_ID_BYTES
        && bytes[0].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-');
    if ok {
        Ok(())
    } else {
        Err(WbError::invalid_id(id))
    }
}

/// The five standard sections (virtual prefixes of a workbench).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Deserialize, serde::Serialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Section {
    Input,
    Scripts,
    Outputs,
    Logs,
    Metadata,
}

impl Section {
    /// Every section, in the order a workbench root lists them (the order
    /// of their physical keys).
    pub const ALL: [Section; 5] = [
        Section::Input,
        Section::Logs,
        Section::Metadata,
        Section::Outputs,
        Section::Scripts,
    ];

    /// The section's name.
    pub fn name(self) -> &'static str {
        match self {
            Section::Input => "input",
            Section::Scripts => "scripts",
            Section::Outputs => "outputs",
            Section::Logs => "logs",
            Section::Metadata => "metadata",
        }
    }

    /// The section named `name`.
    pub fn from_name(name: &str) -> Option<Section> {
        Section::ALL.into_iter().find(|s| s.name() == name)
    }
}

impl fmt::Display for Section {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which jail rule a tool path breaks (the `rule` of an `invalid_path`
/// error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathRule {
    Empty,
    Absolute,
    EmptyComponent,
    Dot,
    DotDot,
    Backslash,
    Nul,
    SectionRepeated,
    TooLong,
}

impl PathRule {
    /// The stable name of the rule.
    pub fn name(self) -> &'static str {
        match self {
            PathRule::Empty => "empty",
            PathRule::Absolute => "absolute",
            PathRule::EmptyComponent => "empty_component",
            PathRule::Dot => "dot_component",
            PathRule::DotDot => "dot_dot_component",
            PathRule::Backslash => "backslash",
            PathRule::Nul => "nul",
            PathRule::SectionRepeated => "section_repeated",
            PathRule::TooLong => "too_long",
        }
    }
}

/// The most bytes of a tool path (the rest of Scribe's 8192-byte path
/// bound after `<id>/<section>/`).
pub const MAX_TOOL_PATH_BYTES: usize = 8192 - MAX_ID_BYTES - 1 - 8 - 1;

/// A checked path relative to a section; the empty path is the section
/// itself (only where a tool allows it).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ToolPath(String);

impl ToolPath {
    /// The section itself.
    pub fn root() -> ToolPath {
        ToolPath(String::new())
    }

    /// Check `path` against the jail rules of `section`. `allow_empty`:
    /// the empty path names the section (list, stat).
    pub fn parse(section: Section, path: &str, allow_empty: bool) -> Result<ToolPath, WbError> {
        if let Some(rule) = broken_rule(section, path, allow_empty) {
            return Err(WbError::invalid_path(path, rule));
        }
        Ok(ToolPath(path.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The components (none for the section itself).
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.0.split('/').filter(|c| !c.is_empty())
    }

    /// The last component (empty for the section itself).
    pub fn file_name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or("")
    }
}

/// The first jail rule `path` breaks, if any.
pub fn broken_rule(section: Section, path: &str, allow_empty: bool) -> Option<PathRule> {
    if path.is_empty() {
        return (!allow_empty).then_some(PathRule::Empty);
    }
    if path.len() > MAX_TOOL_PATH_BYTES {
        return Some(PathRule::TooLong);
    }
    if path.as_bytes().contains(&0) {
        return Some(PathRule::Nul);
    }
    if path.contains('\\') {
        return Some(PathRule::Backslash);
    }
    if path.starts_with('/') {
        return Some(PathRule::Absolute);
    }
    for (index, component) in path.split('/').enumerate() {
        match component {
            "" => return Some(PathRule::EmptyComponent),
            "." => return Some(PathRule::Dot),
            ".." => return Some(PathRule::DotDot),
            c if index == 0 && c == section.name() => return Some(PathRule::SectionRepeated),
            _ => {}
        }
    }
    None
}

/// The physical key of the exact path with `components`: each UTF-8
/// byte plus one, NUL between components, 0x01 at the end.
pub fn key<'a>(components: impl IntoIterator<Item = &'a str>) -> Vec<u8> {
    let mut out = prefix_key(components);
    match out.last_mut() {
        // Replace the trailing separator of the prefix form by the marker.
        Some(last) if *last == 0 => *last = 1,
        _ => out.push(1),
    }
    out
}

/// The key prefix every descendant of the directory with `components`
/// starts with (its components, each followed by NUL; empty for the
/// root). A child's key is this prefix plus its own encoded name.
pub fn prefix_key<'a>(components: impl IntoIterator<Item = &'a str>) -> Vec<u8> {
    let mut out = Vec::new();
    for c in components {
        out.extend(c.as_bytes().iter().map(|b| b.wrapping_add(1)));
        out.push(0);
    }
    out
}

/// Why bytes are not an exact physical key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("a key ends with 0x01")]
    NoEndMarker,
    #[error("empty component at byte {0}")]
    EmptyComponent(usize),
    #[error("byte {0} is a marker inside a component")]
    Marker(usize),
    #[error("the decoded component is not UTF-8")]
    NotUtf8,
}

/// The components of an exact key (never panics).
pub fn decode_key(key: &[u8]) -> Result<Vec<String>, KeyError> {
    let Some((&1, body)) = key.split_last() else {
        return Err(KeyError::NoEndMarker);
    };
    let mut out = Vec::new();
    let mut start = 0;
    for (i, part) in body.split(|b| *b == 0).enumerate() {
        if part.is_empty() {
            return Err(KeyError::EmptyComponent(start));
        }
        if let Some(p) = part.iter().position(|b| *b == 1) {
            return Err(KeyError::Marker(start + p));
        }
        let bytes: Vec<u8> = part.iter().map(|b| b - 1).collect();
        out.push(String::from_utf8(bytes).map_err(|_| KeyError::NotUtf8)?);
        start += part.len() + 1;
        let _ = i;
    }
    Ok(out)
}

/// The repository path of `path` in `section` of workbench `id`
/// (`<id>/<section>/<path>`, or `<id>/<section>` for the section itself).
pub fn repo_path(id: &str, section: Section, path: &ToolPath) -> String {
    if path.is_root() {
        format!("{id}/{section}")
    } else {
        format!("{id}/{section}/{}", path.as_str())
    }
}

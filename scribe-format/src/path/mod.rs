//! Canonical paths (specification section 5) and collision profile 1.
//!
//! The contract other modules rely on: [`validate`] checks every rule of a
//! canonical path, [`validate_file_path`] adds the rule for change set entries
//! carrying file state, and [`collision_key`] returns the collision key bytes
//! of a valid path. [`CanonicalPath`] is a validated, byte-ordered path.
//!
//! A canonical path is UTF-8, `/`-separated and relative:
//!
//! ```text
//! path       = component *( "/" component )        ; 1..=8192 bytes
//! component  = 1..=255 bytes, not "." or "..",
//!              no control character (Cc: U+0000..U+001F, U+007F..U+009F),
//!              none of < > : " | ? * (a `\` is allowed; see
//!              [`check_windows_name`]),
//!              not ending in "." or " ",
//!              stem (text before the first ".") not a reserved device name
//! and no component folding to ".scribe" directly followed by one folding to "_state"
//! ```
//!
//! Rules are checked in a fixed order and the first broken one is reported:
//! whole-path rules (empty, too long, absolute, trailing slash), then each
//! component from the left (empty, `.`, `..`, too long, characters from the
//! left, trailing dot or space, device name stem), and the `.scribe/_state`
//! pair as soon as its second component is reached. `docs/format-notes-path.md`
//! records the decisions behind the rules.

pub mod case_folding;
pub mod fold;

use std::borrow::Borrow;
use std::fmt;
use std::str::FromStr;

use crate::error::{ErrorCode, FormatError};
use crate::limits::{MAX_COMPONENT_BYTES, MAX_PATH_BYTES};

/// Why a path is not canonical.
///
/// `index` fields count components from 0 (the messages count from 1, as
/// a person does); `offset` fields are byte offsets into the whole path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    /// The bytes are not UTF-8 (only from [`validate_bytes`]).
    #[error("path is not UTF-8 (valid up to byte {valid_up_to})")]
    NotUtf8 { valid_up_to: usize },
    /// The path is the empty string.
    #[error("path is empty")]
    Empty,
    /// The path is longer than [`MAX_PATH_BYTES`] bytes.
    #[error("path is {len} bytes, longer than {MAX_PATH_BYTES}")]
    TooLong { len: usize },
    /// The path starts with `/`.
    #[error("path starts with `/`; canonical paths are relative")]
    Absolute,
    /// The path ends with `/`.
    #[error("path ends with `/`")]
    TrailingSlash,
    /// Two `/` in a row.
    #[error("component {} is empty (`//`)", index + 1)]
    EmptyComponent { index: usize },
    /// A component is `.`.
    #[error("component {} is `.`", index + 1)]
    DotComponent { index: usize },
    /// A component is `..`.
    #[error("component {} is `..`", index + 1)]
    DotDotComponent { index: usize },
    /// A component is longer than [`MAX_COMPONENT_BYTES`] bytes.
    #[error("component {} is {len} bytes, longer than {MAX_COMPONENT_BYTES}", index + 1)]
    ComponentTooLong { index: usize, len: usize },
    /// A control character (general category Cc).
    #[error("control character U+{:04X} at byte {offset}", u32::from(*ch))]
    ControlCharacter { ch: char, offset: usize },
    /// A backslash. Section 5 allows it in a canonical path; only
    /// [`check_windows_name`] reports it, because a Windows working copy
    /// reads `\\` as a separator and cannot hold such a name.
    #[error("backslash at byte {offset}: a Windows working copy reads `\\` as a separator and cannot hold this name")]
    Backslash { offset: usize },
    /// One of `< > : " | ? *`.
    #[error("forbidden character {ch:?} at byte {offset}")]
    ForbiddenCharacter { ch: char, offset: usize },
    /// A component ends with `.`.
    #[error("component {} ends with `.`", index + 1)]
    TrailingDot { index: usize },
    /// A component ends with a space (U+0020).
    #[error("component {} ends with a space", index + 1)]
    TrailingSpace { index: usize },
    /// A component whose stem is a reserved device name (`CON`, `com1.txt`, …).
    #[error("component {} has a reserved device name stem", index + 1)]
    ReservedDeviceName { index: usize },
    /// Component `index` folds to `.scribe` and the next one to `_state`.
    #[error("components {} and {} are Scribe's reserved `.scribe/_state`", index + 1, index + 2)]
    ReservedStateDirectory { index: usize },
    /// A change set entry with file state whose last component folds to `.scribe`.
    #[error("`.scribe` is always a directory and cannot carry file state")]
    ScribeDirectoryAsFile,
}

impl PathError {
    /// Every code [`PathError::code`] can return.
    pub const CODES: &'static [&'static str] = &[
        "not_utf8",
        "empty",
        "too_long",
        "absolute",
        "trailing_slash",
        "empty_component",
        "dot_component",
        "dot_dot_component",
        "component_too_long",
        "control_character",
        "backslash",
        "forbidden_character",
        "trailing_dot",
        "trailing_space",
        "reserved_device_name",
        "reserved_state_directory",
        "reserved_scribe_file",
    ];

    /// The stable code printed by `scribe debug path` (`invalid <code>`).
    pub fn code(&self) -> &'static str {
        match self {
            PathError::NotUtf8 { .. } => "not_utf8",
            PathError::Empty => "empty",
            PathError::TooLong { .. } => "too_long",
            PathError::Absolute => "absolute",
            PathError::TrailingSlash => "trailing_slash",
            PathError::EmptyComponent { .. } => "empty_component",
            PathError::DotComponent { .. } => "dot_component",
            PathError::DotDotComponent { .. } => "dot_dot_component",
            PathError::ComponentTooLong { .. } => "component_too_long",
            PathError::ControlCharacter { .. } => "control_character",
            PathError::Backslash { .. } => "backslash",
            PathError::ForbiddenCharacter { .. } => "forbidden_character",
            PathError::TrailingDot { .. } => "trailing_dot",
            PathError::TrailingSpace { .. } => "trailing_space",
            PathError::ReservedDeviceName { .. } => "reserved_device_name",
            PathError::ReservedStateDirectory { .. } => "reserved_state_directory",
            PathError::ScribeDirectoryAsFile => "reserved_scribe_file",
        }
    }

    /// The registry code a server reports for any non-canonical path.
    pub fn error_code(&self) -> ErrorCode {
        ErrorCode::InvalidPath
    }
}

impl From<PathError> for FormatError {
    fn from(e: PathError) -> Self {
        FormatError::InvalidPath {
            what: "canonical path",
            rule: e.code(),
            reason: e.to_string(),
        }
    }
}

/// The characters of `< > : " | ? *`, refused anywhere in a path.
pub const FORBIDDEN_CHARACTERS: [char; 7] = ['<', '>', ':', '"', '|', '?', '*'];

/// Scribe's namespace directory inside a repository.
pub const SCRIBE_DIR: &str = ".scribe";

/// The workspace state directory under [`SCRIBE_DIR`], reserved in paths.
pub const STATE_DIR: &str = "_state";

/// Check that `path` is canonical.
pub fn validate(path: &str) -> Result<(), PathError> {
    if path.is_empty() {
        return Err(PathError::Empty);
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(PathError::TooLong { len: path.len() });
    }
    if path.starts_with('/') {
        return Err(PathError::Absolute);
    }
    if path.ends_with('/') {
        return Err(PathError::TrailingSlash);
    }
    let mut offset = 0;
    let mut previous_is_scribe_dir = false;
    for (index, component) in path.split('/').enumerate() {
        validate_component(component, index, offset)?;
        if previous_is_scribe_dir && folds_to(component, STATE_DIR) {
            return Err(PathError::ReservedStateDirectory { index: index - 1 });
        }
        previous_is_scribe_dir = folds_to(component, SCRIBE_DIR);
        offset += component.len() + 1;
    }
    Ok(())
}

/// Check that `path` is canonical and may carry file state in a change set
/// entry (add or edit): its last component must not fold to `.scribe`.
pub fn validate_file_path(path: &str) -> Result<(), PathError> {
    validate(path)?;
    if folds_to(file_name(path), SCRIBE_DIR) {
        return Err(PathError::ScribeDirectoryAsFile);
    }
    Ok(())
}

/// [`validate`] for raw bytes (for example a decoded `str16`), refusing
/// bytes that are not UTF-8 with [`PathError::NotUtf8`].
pub fn validate_bytes(path: &[u8]) -> Result<&str, PathError> {
    let path = std::str::from_utf8(path).map_err(|e| PathError::NotUtf8 {
        valid_up_to: e.valid_up_to(),
    })?;
    validate(path)?;
    Ok(path)
}

/// The collision key of a valid canonical path under profile 1: the UTF-8
/// bytes of `NFC(casefold(NFD(path)))` ([`fold`]).
///
/// Keys keep the component structure: the key of `a/b` is the key of `a`,
/// `/`, and the key of `b`. Any string is accepted; for a string that is not
/// a canonical path the key has no meaning.
pub fn collision_key(path: &str) -> Vec<u8> {
    fold::fold(path).into_bytes()
}

/// The components of `path`, split at `/`.
pub fn components(path: &str) -> std::str::Split<'_, char> {
    path.split('/')
}

/// The path without its last component, or `None` for a one-component path.
pub fn parent(path: &str) -> Option<&str> {
    path.rsplit_once('/').map(|(parent, _)| parent)
}

/// The last component of `path`.
pub fn file_name(path: &str) -> &str {
    path.rsplit_once('/').map_or(path, |(_, name)| name)
}

/// Whether a Windows working copy can hold `path`, a canonical path.
///
/// Section 5 does not forbid `\\`, so [`validate`] accepts it and every
/// decoder reads such paths; the collision profile decides which live paths
/// may coexist, and Windows reads `\\` as a separator, so a workspace on
/// Windows refuses such a path when it would write it
/// (`docs/format-notes-path.md`). Every other Windows restriction (`< > : "
/// | ? *`, device names, trailing dot and space) is already part of
/// [`validate`].
pub fn check_windows_name(path: &str) -> Result<(), PathError> {
    match path.find('\\') {
        Some(offset) => Err(PathError::Backslash { offset }),
        None => Ok(()),
    }
}

/// Whether `path` is `prefix` or lies under it, component-wise and byte-exact:
/// `a/b` is under `a` and under `a/b`, but `a/bc` is not under `a/b` and `a`
/// is not under `a/b`.
///
/// `prefix` is a canonical path, or empty for the root (everything is under
/// it). For a match under the collision fold compare keys with
/// [`key_is_under_prefix`].
pub fn is_under_prefix(path: &str, prefix: &str) -> bool {
    bytes_under_prefix(path.as_bytes(), prefix.as_bytes())
}

/// [`is_under_prefix`] on collision keys (see [`collision_key`]).
pub fn key_is_under_prefix(key: &[u8], prefix_key: &[u8]) -> bool {
    bytes_under_prefix(key, prefix_key)
}

fn bytes_under_prefix(path: &[u8], prefix: &[u8]) -> bool {
    prefix.is_empty()
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest[0] == b'/')
}

fn validate_component(component: &str, index: usize, offset: usize) -> Result<(), PathError> {
    match component {
        "" => return Err(PathError::EmptyComponent { index }),
        "." => return Err(PathError::DotComponent { index }),
        ".." => return Err(PathError::DotDotComponent { index }),
        _ => {}
    }
    if component.len() > MAX_COMPONENT_BYTES {
        return Err(PathError::ComponentTooLong {
            index,
            len: component.len(),
        });
    }
    for (at, ch) in component.char_indices() {
        let offset = offset + at;
        if is_control(ch) {
            return Err(PathError::ControlCharacter { ch, offset });
        }
        if FORBIDDEN_CHARACTERS.contains(&ch) {
            return Err(PathError::ForbiddenCharacter { ch, offset });
        }
    }
    if component.ends_with('.') {
        return Err(PathError::TrailingDot { index });
    }
    if component.ends_with(' ') {
        return Err(PathError::TrailingSpace { index });
    }
    if is_reserved_device_stem(device_stem(component)) {
        return Err(PathError::ReservedDeviceName { index });
    }
    Ok(())
}

/// Whether `ch` is a control character: general category Cc, which is
/// exactly C0 (U+0000..=U+001F), DEL (U+007F) and C1 (U+0080..=U+009F) in
/// every Unicode version (Cc is immutable).
pub fn is_control(ch: char) -> bool {
    matches!(ch, '\u{0}'..='\u{1F}' | '\u{7F}'..='\u{9F}')
}

/// The part of a component before its first `.` (the whole component when
/// it has none): `com1.tar.gz` has stem `com1`, `.con` has the empty stem.
pub fn device_stem(component: &str) -> &str {
    component
        .split_once('.')
        .map_or(component, |(stem, _)| stem)
}

/// Whether `stem` is one of `CON PRN AUX NUL COM1`..`COM9` `LPT1`..`LPT9`
/// `COM¹ COM² COM³ LPT¹ LPT² LPT³` in any case.
///
/// ASCII case-insensitive comparison equals comparison under the collision
/// fold here: no other code point folds or decomposes into one of these
/// letters, and the superscript digits fold to themselves.
pub fn is_reserved_device_stem(stem: &str) -> bool {
    let bytes = stem.as_bytes();
    match bytes.len() {
        3 => ["con", "prn", "aux", "nul"]
            .iter()
            .any(|name| bytes.eq_ignore_ascii_case(name.as_bytes())),
        4 | 5 => {
            let (head, digit) = bytes.split_at(3);
            let numbered = head.eq_ignore_ascii_case(b"com") || head.eq_ignore_ascii_case(b"lpt");
            numbered
                && match digit {
                    [b'1'..=b'9'] => true,
                    _ => ["¹", "²", "³"].iter().any(|s| digit == s.as_bytes()),
                }
        }
        _ => false,
    }
}

/// Whether `component` folds (profile 1) to the ASCII string `target`, which
/// must already be folded.
fn folds_to(component: &str, target: &str) -> bool {
    if component.is_ascii() {
        return component.eq_ignore_ascii_case(target);
    }
    // Only `.` and `_` themselves fold to `.` and `_`.
    if let Some(first) = target.bytes().next().filter(|b| !b.is_ascii_alphabetic()) {
        if component.as_bytes().first() != Some(&first) {
            return false;
        }
    }
    // A non-ASCII code point folds to at most three ASCII letters from at
    // least as many bytes as letters, or to one letter from at most three
    // bytes (KELVIN SIGN); longer components cannot fold to `target`.
    component.len() <= 3 * target.len() && fold::fold(component) == target
}

/// A validated canonical path. Ordered, compared and hashed by its bytes,
/// like the change set's path order.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CanonicalPath(String);

impl CanonicalPath {
    /// Validate `path` ([`validate`]) and wrap it.
    pub fn new(path: impl Into<String>) -> Result<CanonicalPath, PathError> {
        let path = path.into();
        validate(&path)?;
        Ok(CanonicalPath(path))
    }

    /// The path text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The path's bytes, as encoded in a `str16`.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }

    /// The path text, unwrapped.
    pub fn into_string(self) -> String {
        self.0
    }

    /// The collision key under profile 1 ([`collision_key`]).
    pub fn collision_key(&self) -> Vec<u8> {
        collision_key(&self.0)
    }

    /// The components, split at `/`.
    pub fn components(&self) -> std::str::Split<'_, char> {
        components(&self.0)
    }

    /// The last component.
    pub fn file_name(&self) -> &str {
        file_name(&self.0)
    }

    /// The parent directory, or `None` for a top-level path. The parent of a
    /// canonical path is canonical.
    pub fn parent(&self) -> Option<CanonicalPath> {
        parent(&self.0).map(|p| CanonicalPath(p.to_owned()))
    }

    /// This path followed by `/` and `rest` (one or more components),
    /// validated as a whole.
    pub fn join(&self, rest: &str) -> Result<CanonicalPath, PathError> {
        let mut joined = String::with_capacity(self.0.len() + 1 + rest.len());
        joined.push_str(&self.0);
        joined.push('/');
        joined.push_str(rest);
        CanonicalPath::new(joined)
    }

    /// Whether this path is `prefix` or lies under it ([`is_under_prefix`]).
    pub fn is_under_prefix(&self, prefix: &str) -> bool {
        is_under_prefix(&self.0, prefix)
    }

    /// Whether the path may carry file state ([`validate_file_path`]).
    pub fn check_file_path(&self) -> Result<(), PathError> {
        validate_file_path(&self.0)
    }
}

impl fmt::Debug for CanonicalPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for CanonicalPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for CanonicalPath {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for CanonicalPath {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl FromStr for CanonicalPath {
    type Err = PathError;

    fn from_str(s: &str) -> Result<CanonicalPath, PathError> {
        CanonicalPath::new(s)
    }
}

impl TryFrom<String> for CanonicalPath {
    type Error = PathError;

    fn try_from(s: String) -> Result<CanonicalPath, PathError> {
        CanonicalPath::new(s)
    }
}

impl TryFrom<&str> for CanonicalPath {
    type Error = PathError;

    fn try_from(s: &str) -> Result<CanonicalPath, PathError> {
        CanonicalPath::new(s)
    }
}

impl From<CanonicalPath> for String {
    fn from(p: CanonicalPath) -> String {
        p.0
    }
}

impl PartialEq<str> for CanonicalPath {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for CanonicalPath {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_listed_once() {
        let set: std::collections::BTreeSet<_> = PathError::CODES.iter().collect();
        assert_eq!(set.len(), PathError::CODES.len());
    }

    #[test]
    fn folds_to_length_bound_admits_kelvin_and_long_s() {
        // U+212A KELVIN SIGN is 3 bytes folding to 1; ſ is 2 bytes folding to 1.
        assert!(folds_to(".ſcribe", SCRIBE_DIR));
        assert!(folds_to("_ſtate", STATE_DIR));
        assert!(folds_to(".ſcrıbe", SCRIBE_DIR));
        assert!(!folds_to(".scribe ", SCRIBE_DIR));
    }

    #[test]
    fn device_stem_examples() {
        assert_eq!(device_stem("com1.tar.gz"), "com1");
        assert_eq!(device_stem(".con"), "");
        assert_eq!(device_stem("nul"), "nul");
    }
}

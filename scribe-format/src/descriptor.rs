//! Format descriptor files `SCRIBE_FORMAT` (specification section 2).
//!
//! ```text
//! scribe-descriptor = 1        first line, exactly
//! kind = repository            mandatory, any position after the first line
//! <key> = <value>              keys [a-z0-9-]+, one per line, each at most once
//! ```
//!
//! This build's reading is strict (`docs/format-notes-tree.md`):
//!
//! - UTF-8, at most [`MAX_DESCRIPTOR_BYTES`]; no byte-order mark.
//! - Every line, the last included, ends with the same terminator: all LF or
//!   all CRLF. A bare CR, mixed terminators, a missing final terminator, and
//!   blank lines are refused. There are no comments.
//! - A line is exactly `key`, one space, `=`, one space, `value`. The value
//!   is nonempty, has no control characters, and neither starts nor ends
//!   with a space.
//! - Unknown keys are kept with their values and their positions; writing
//!   reproduces the original order and terminator, so decode then encode is
//!   byte-identical. New descriptors use LF; [`Descriptor::set`] replaces a
//!   value in place and appends a new key at the end.
//! - Keys of the descriptor's kind are checked when read and when set:
//!   mandatory keys are present; numbers are canonical decimal (no sign, no
//!   leading zeros); identifiers and incarnations are 32 lowercase hex
//!   digits; optional pairs (`restored-*`, `migrated-*`) appear together; an
//!   `lz4` object store lists the `lz4` feature.
//! - `required-features` is a comma-separated list without spaces of unique
//!   nonempty `[a-z0-9-]+` names; any kind may carry it.

use std::collections::BTreeSet;

use crate::envelope::Compression;
use crate::error::{ErrorCode, FormatError};
use crate::id::{RepositoryId, WorkspaceId};
use crate::limits::MAX_REPOSITORY_NAME_BYTES;

/// The first line's key.
pub const HEADER_KEY: &str = "scribe-descriptor";
/// The descriptor format version this build reads and writes.
pub const DESCRIPTOR_VERSION: &str = "1";
/// Largest descriptor file accepted.
pub const MAX_DESCRIPTOR_BYTES: usize = 65_536;
/// The storage engine of this build.
pub const ENGINE_REDB_4: &str = "redb-4";
/// Required by object stores whose compression is `lz4`.
pub const FEATURE_LZ4: &str = "lz4";
/// Required by data roots after `auth-init`.
pub const FEATURE_AUTH_OWNERSHIP_V1: &str = "auth-ownership-v1";
/// The command a version refusal names.
pub const MIGRATE_COMMAND: &str = "scribe-server migrate";

/// Key `kind`.
pub const KEY_KIND: &str = "kind";
/// Key `required-features`.
pub const KEY_REQUIRED_FEATURES: &str = "required-features";

const WHAT: &str = "descriptor";

/// What a descriptor describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    DataRoot,
    Repository,
    ObjectStore,
    Workspace,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 4] = [
        Kind::DataRoot,
        Kind::Repository,
        Kind::ObjectStore,
        Kind::Workspace,
    ];

    /// The `kind` value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Kind::DataRoot => "data-root",
            Kind::Repository => "repository",
            Kind::ObjectStore => "object-store",
            Kind::Workspace => "workspace",
        }
    }

    /// The kind with this `kind` value.
    pub fn parse(s: &str) -> Result<Kind, FormatError> {
        Kind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == s)
            .ok_or_else(|| FormatError::invalid(WHAT, format!("unknown kind {s:?}")))
    }

    fn keys(self) -> &'static [KeySpec] {
        match self {
            Kind::DataRoot => DATA_ROOT_KEYS,
            Kind::Repository => REPOSITORY_KEYS,
            Kind::ObjectStore => OBJECT_STORE_KEYS,
            Kind::Workspace => WORKSPACE_KEYS,
        }
    }
}

/// The line terminator of a descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum LineEnding {
    #[default]
    Lf,
    CrLf,
}

impl LineEnding {
    pub const fn as_str(self) -> &'static str {
        match self {
            LineEnding::Lf => "\n",
            LineEnding::CrLf => "\r\n",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    U32,
    U64,
    Hex16,
    Token,
    Name,
    Compression,
}

struct KeySpec {
    key: &'static str,
    ty: Ty,
    required: bool,
}

const fn req(key: &'static str, ty: Ty) -> KeySpec {
    KeySpec {
        key,
        ty,
        required: true,
    }
}

const fn opt(key: &'static str, ty: Ty) -> KeySpec {
    KeySpec {
        key,
        ty,
        required: false,
    }
}

const DATA_ROOT_KEYS: &[KeySpec] = &[
    req("catalog-schema", Ty::U32),
    req("repository-schema", Ty::U32),
    req("object-store", Ty::U32),
    req("envelope", Ty::U32),
    req("engine", Ty::Token),
    req("incarnation", Ty::Hex16),
    req("created-ms", Ty::U64),
    opt("restored-from-incarnation", Ty::Hex16),
    opt("restored-ms", Ty::U64),
];

const REPOSITORY_KEYS: &[KeySpec] = &[
    req("repository-id", Ty::Hex16),
    req("name", Ty::Name),
    req("schema", Ty::U32),
    req("engine", Ty::Token),
    req("object-store", Ty::U32),
    req("created-ms", Ty::U64),
    opt("migrated-from-schema", Ty::U32),
    opt("migrated-ms", Ty::U64),
];

const OBJECT_STORE_KEYS: &[KeySpec] = &[
    req("layout", Ty::U32),
    req("envelope", Ty::U32),
    req("small-object-threshold", Ty::U64),
    req("pack-seal-bytes", Ty::U64),
    req("compression", Ty::Compression),
];

const WORKSPACE_KEYS: &[KeySpec] = &[
    req("schema", Ty::U32),
    req("engine", Ty::Token),
    req("workspace-id", Ty::Hex16),
];

/// Optional keys that appear together or not at all.
const PAIRS: &[(&str, &str)] = &[
    ("restored-from-incarnation", "restored-ms"),
    ("migrated-from-schema", "migrated-ms"),
];

/// A version recorded in a descriptor differs from the one this build
/// opens. Opening must stop before any database is touched.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{kind} descriptor: {key} is {}, this build opens {expected}; run `scribe-server migrate`",
    found.as_deref().map_or_else(|| "missing".to_owned(), |f| format!("{f:?}"))
)]
pub struct VersionMismatch {
    pub kind: &'static str,
    pub key: String,
    pub expected: String,
    /// The recorded value, `None` when the key is missing.
    pub found: Option<String>,
}

impl VersionMismatch {
    /// Always [`ErrorCode::UnsupportedVersion`].
    pub fn code(&self) -> ErrorCode {
        ErrorCode::UnsupportedVersion
    }
}

/// A parsed `SCRIBE_FORMAT` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Descriptor {
    kind: Kind,
    /// Every line after the first, in file order (`kind` included).
    entries: Vec<(String, String)>,
    line_ending: LineEnding,
}

/// The fields of a `data-root` descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataRoot {
    pub catalog_schema: u32,
    pub repository_schema: u32,
    pub object_store: u32,
    pub envelope: u32,
    pub engine: String,
    pub incarnation: [u8; 16],
    pub created_ms: u64,
    pub restored: Option<Restored>,
}

/// `restored-from-incarnation` and `restored-ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Restored {
    pub from_incarnation: [u8; 16],
    pub ms: u64,
}

/// The fields of a `repository` descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Repository {
    pub repository_id: RepositoryId,
    pub name: String,
    pub schema: u32,
    pub engine: String,
    pub object_store: u32,
    pub created_ms: u64,
    pub migrated: Option<Migrated>,
}

/// `migrated-from-schema` and `migrated-ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Migrated {
    pub from_schema: u32,
    pub ms: u64,
}

/// The fields of an `object-store` descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectStore {
    pub layout: u32,
    pub envelope: u32,
    pub small_object_threshold: u64,
    pub pack_seal_bytes: u64,
    pub compression: Compression,
}

/// The fields of a `workspace` descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workspace {
    pub schema: u32,
    pub engine: String,
    pub workspace_id: WorkspaceId,
}

fn line_error(line: usize, reason: impl std::fmt::Display) -> FormatError {
    FormatError::invalid(WHAT, format!("line {line}: {reason}"))
}

fn check_key(key: &str) -> Result<(), String> {
    if key.is_empty() {
        return Err("empty key".into());
    }
    if !key
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(format!("key {key:?} is not [a-z0-9-]+"));
    }
    Ok(())
}

fn check_value_text(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err("empty value".into());
    }
    if value.chars().any(|c| c.is_control()) {
        return Err("value contains a control character".into());
    }
    if value.starts_with(' ') || value.ends_with(' ') {
        return Err("value starts or ends with a space".into());
    }
    Ok(())
}

fn parse_decimal(value: &str) -> Result<u64, String> {
    let canonical = !value.is_empty()
        && value.bytes().all(|b| b.is_ascii_digit())
        && (value == "0" || !value.starts_with('0'));
    if !canonical {
        return Err(format!("{value:?} is not a canonical decimal number"));
    }
    value
        .parse::<u64>()
        .map_err(|_| format!("{value:?} does not fit in 64 bits"))
}

fn parse_u32(value: &str) -> Result<u32, String> {
    u32::try_from(parse_decimal(value)?).map_err(|_| format!("{value:?} does not fit in 32 bits"))
}

fn parse_hex16(value: &str) -> Result<[u8; 16], String> {
    if value.len() != 32
        || !value
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(format!("{value:?} is not 32 lowercase hex digits"));
    }
    let mut out = [0u8; 16];
    hex::decode_to_slice(value, &mut out).map_err(|_| format!("{value:?} is not hex"))?;
    Ok(out)
}

fn check_typed(ty: Ty, value: &str) -> Result<(), String> {
    match ty {
        Ty::U32 => parse_u32(value).map(drop),
        Ty::U64 => parse_decimal(value).map(drop),
        Ty::Hex16 => parse_hex16(value).map(drop),
        Ty::Token => check_key(value).map_err(|_| format!("{value:?} is not [a-z0-9-]+")),
        Ty::Name => {
            if value.len() > MAX_REPOSITORY_NAME_BYTES {
                Err(format!(
                    "name is longer than {MAX_REPOSITORY_NAME_BYTES} bytes"
                ))
            } else {
                Ok(())
            }
        }
        Ty::Compression => Compression::parse(value)
            .map(drop)
            .map_err(|_| format!("compression {value:?} is neither none nor lz4")),
    }
}

fn parse_features(value: &str) -> Result<Vec<&str>, String> {
    let features: Vec<&str> = value.split(',').collect();
    let mut seen = BTreeSet::new();
    for feature in &features {
        check_key(feature).map_err(|_| format!("feature {feature:?} is not [a-z0-9-]+"))?;
        if !seen.insert(*feature) {
            return Err(format!("feature {feature:?} is listed twice"));
        }
    }
    Ok(features)
}

/// Check one `key = value` pair for `kind`: key and value syntax, and the
/// key's type when `kind` defines it.
fn check_entry(kind: Kind, key: &str, value: &str) -> Result<(), String> {
    check_key(key)?;
    check_value_text(value)?;
    if key == KEY_KIND {
        return match Kind::parse(value) {
            Ok(k) if k == kind => Ok(()),
            _ => Err(format!("kind {value:?} is not {}", kind.as_str())),
        };
    }
    if key == KEY_REQUIRED_FEATURES {
        return parse_features(value).map(drop);
    }
    if let Some(spec) = kind.keys().iter().find(|s| s.key == key) {
        return check_typed(spec.ty, value).map_err(|e| format!("{key}: {e}"));
    }
    Ok(())
}

impl Descriptor {
    /// Parse a descriptor file (the rules are in the module documentation).
    pub fn parse(bytes: &[u8]) -> Result<Descriptor, FormatError> {
        if bytes.len() > MAX_DESCRIPTOR_BYTES {
            return Err(FormatError::LimitExceeded {
                what: WHAT,
                limit: MAX_DESCRIPTOR_BYTES as u64,
                actual: bytes.len() as u64,
            });
        }
        let text = std::str::from_utf8(bytes).map_err(|_| FormatError::NotUtf8 { what: WHAT })?;
        let first_lf = text
            .find('\n')
            .ok_or_else(|| FormatError::invalid(WHAT, "no line terminator"))?;
        let line_ending = if text[..first_lf].ends_with('\r') {
            LineEnding::CrLf
        } else {
            LineEnding::Lf
        };
        let terminator = line_ending.as_str();
        let body = text
            .strip_suffix(terminator)
            .ok_or_else(|| FormatError::invalid(WHAT, "the last line has no terminator"))?;

        let mut lines = body.split(terminator).enumerate().map(|(i, l)| (i + 1, l));
        let (_, header) = lines
            .next()
            .ok_or_else(|| FormatError::invalid(WHAT, "empty"))?;
        check_header(header)?;

        let mut entries: Vec<(String, String)> = Vec::new();
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        let mut kind = None;
        for (number, line) in lines {
            if line.contains('\r') || line.contains('\n') {
                return Err(line_error(
                    number,
                    "a stray CR or LF: every line ends with the first line's terminator",
                ));
            }
            if line.is_empty() {
                return Err(line_error(number, "blank line"));
            }
            let (key, value) = line
                .split_once(" = ")
                .ok_or_else(|| line_error(number, "not `key = value`"))?;
            check_key(key).map_err(|e| line_error(number, e))?;
            check_value_text(value).map_err(|e| line_error(number, e))?;
            if key == HEADER_KEY || !seen.insert(key) {
                return Err(line_error(number, format!("duplicate key {key:?}")));
            }
            if key == KEY_KIND {
                kind = Some(Kind::parse(value).map_err(|e| line_error(number, e))?);
            }
            entries.push((key.to_owned(), value.to_owned()));
        }
        let kind = kind.ok_or_else(|| FormatError::invalid(WHAT, "no `kind` line"))?;
        let descriptor = Descriptor {
            kind,
            entries,
            line_ending,
        };
        descriptor.validate()?;
        Ok(descriptor)
    }

    /// A new descriptor of `kind` with only the header and `kind` lines;
    /// callers add keys with [`Descriptor::set`]. It does not validate until
    /// the kind's mandatory keys are present; prefer the typed constructors.
    fn bare(kind: Kind) -> Descriptor {
        Descriptor {
            kind,
            entries: vec![(KEY_KIND.to_owned(), kind.as_str().to_owned())],
            line_ending: LineEnding::Lf,
        }
    }

    fn push(&mut self, key: &str, value: String) {
        self.entries.push((key.to_owned(), value));
    }

    /// Check every rule of the descriptor's kind (run by `parse` and after
    /// every change).
    pub fn validate(&self) -> Result<(), FormatError> {
        for (key, value) in &self.entries {
            check_entry(self.kind, key, value).map_err(|e| FormatError::invalid(WHAT, e))?;
        }
        for spec in self.kind.keys().iter().filter(|s| s.required) {
            if self.get(spec.key).is_none() {
                return Err(FormatError::invalid(
                    WHAT,
                    format!("{} descriptor without `{}`", self.kind.as_str(), spec.key),
                ));
            }
        }
        for (a, b) in PAIRS {
            let defined = self.kind.keys().iter().any(|s| s.key == *a);
            if defined && self.get(a).is_some() != self.get(b).is_some() {
                return Err(FormatError::invalid(
                    WHAT,
                    format!("`{a}` and `{b}` appear together or not at all"),
                ));
            }
        }
        if self.kind == Kind::ObjectStore
            && self.get("compression") == Some(Compression::Lz4.as_str())
            && !self.required_features().contains(&FEATURE_LZ4)
        {
            return Err(FormatError::invalid(
                WHAT,
                "an lz4 object store requires the `lz4` feature",
            ));
        }
        Ok(())
    }

    /// The file bytes: the header, then every entry in order, each ending
    /// with the descriptor's terminator.
    pub fn encode(&self) -> Vec<u8> {
        let terminator = self.line_ending.as_str();
        let mut out = String::new();
        out.push_str(HEADER_KEY);
        out.push_str(" = ");
        out.push_str(DESCRIPTOR_VERSION);
        out.push_str(terminator);
        for (key, value) in &self.entries {
            out.push_str(key);
            out.push_str(" = ");
            out.push_str(value);
            out.push_str(terminator);
        }
        out.into_bytes()
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    pub fn line_ending(&self) -> LineEnding {
        self.line_ending
    }

    /// Change the terminator used by [`Descriptor::encode`].
    pub fn set_line_ending(&mut self, line_ending: LineEnding) {
        self.line_ending = line_ending;
    }

    /// The value of `key` (`kind` included; the header line is not an
    /// entry).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Every entry after the header, in file order.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Set `key` to `value`: in place when present, appended otherwise. The
    /// pair is checked like a parsed line, the result like a parsed file;
    /// on refusal nothing changes. The header, `kind` and an object store's
    /// `compression` (immutable) cannot be changed.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), FormatError> {
        if key == HEADER_KEY {
            return Err(FormatError::invalid(WHAT, "the header line cannot be set"));
        }
        let current = self.get(key);
        if current == Some(value) {
            return Ok(());
        }
        if key == KEY_KIND {
            return Err(FormatError::invalid(WHAT, "the kind cannot be changed"));
        }
        if self.kind == Kind::ObjectStore && key == "compression" {
            return Err(FormatError::invalid(
                WHAT,
                "an object store's compression is immutable",
            ));
        }
        check_entry(self.kind, key, value).map_err(|e| FormatError::invalid(WHAT, e))?;
        let mut next = self.clone();
        match next.entries.iter_mut().find(|(k, _)| k == key) {
            Some(entry) => entry.1 = value.to_owned(),
            None => next.push(key, value.to_owned()),
        }
        next.validate()?;
        *self = next;
        Ok(())
    }

    /// Remove `key`, returning its value. Mandatory keys, the header and
    /// `kind` cannot be removed; on refusal nothing changes.
    pub fn remove(&mut self, key: &str) -> Result<Option<String>, FormatError> {
        if key == HEADER_KEY || key == KEY_KIND {
            return Err(FormatError::invalid(
                WHAT,
                format!("`{key}` cannot be removed"),
            ));
        }
        let Some(index) = self.entries.iter().position(|(k, _)| k == key) else {
            return Ok(None);
        };
        let mut next = self.clone();
        let (_, value) = next.entries.remove(index);
        next.validate()?;
        *self = next;
        Ok(Some(value))
    }

    /// The `required-features` list, in order (empty when absent).
    pub fn required_features(&self) -> Vec<&str> {
        self.get(KEY_REQUIRED_FEATURES)
            .and_then(|v| parse_features(v).ok())
            .unwrap_or_default()
    }

    /// Add `feature` to `required-features` unless it is listed already.
    pub fn add_required_feature(&mut self, feature: &str) -> Result<(), FormatError> {
        let mut features = self.required_features();
        if features.contains(&feature) {
            return Ok(());
        }
        features.push(feature);
        let value = features.join(",");
        self.set(KEY_REQUIRED_FEATURES, &value)
    }

    /// Refuse to open for mutation unless every required feature is in
    /// `known_features`.
    pub fn check_mutation(&self, known_features: &[&str]) -> Result<(), FormatError> {
        match self
            .required_features()
            .into_iter()
            .find(|f| !known_features.contains(f))
        {
            Some(feature) => Err(FormatError::UnsupportedFeature {
                feature: feature.to_owned(),
            }),
            None => Ok(()),
        }
    }

    /// Compare the recorded `key` with the version this build opens; a
    /// missing key or another value is a refusal that names
    /// `scribe-server migrate`.
    pub fn version_check(&self, key: &str, expected: &str) -> Result<(), VersionMismatch> {
        let found = self.get(key);
        if found == Some(expected) {
            return Ok(());
        }
        Err(VersionMismatch {
            kind: self.kind.as_str(),
            key: key.to_owned(),
            expected: expected.to_owned(),
            found: found.map(str::to_owned),
        })
    }

    fn require_kind(&self, kind: Kind) -> Result<(), FormatError> {
        if self.kind != kind {
            return Err(FormatError::invalid(
                WHAT,
                format!("a {} descriptor, not {}", self.kind.as_str(), kind.as_str()),
            ));
        }
        Ok(())
    }

    fn typed<T>(
        &self,
        key: &str,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Result<T, FormatError> {
        let value = self
            .get(key)
            .ok_or_else(|| FormatError::invalid(WHAT, format!("no `{key}`")))?;
        parse(value).map_err(|e| FormatError::invalid(WHAT, format!("{key}: {e}")))
    }

    fn typed_opt<T>(
        &self,
        key: &str,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Result<Option<T>, FormatError> {
        if self.get(key).is_none() {
            return Ok(None);
        }
        self.typed(key, parse).map(Some)
    }

    /// A new `data-root` descriptor (LF, table key order).
    pub fn new_data_root(fields: &DataRoot) -> Result<Descriptor, FormatError> {
        let mut d = Descriptor::bare(Kind::DataRoot);
        d.push("catalog-schema", fields.catalog_schema.to_string());
        d.push("repository-schema", fields.repository_schema.to_string());
        d.push("object-store", fields.object_store.to_string());
        d.push("envelope", fields.envelope.to_string());
        d.push("engine", fields.engine.clone());
        d.push("incarnation", hex::encode(fields.incarnation));
        d.push("created-ms", fields.created_ms.to_string());
        if let Some(restored) = fields.restored {
            d.push(
                "restored-from-incarnation",
                hex::encode(restored.from_incarnation),
            );
            d.push("restored-ms", restored.ms.to_string());
        }
        d.validate()?;
        Ok(d)
    }

    /// The fields of a `data-root` descriptor.
    pub fn data_root(&self) -> Result<DataRoot, FormatError> {
        self.require_kind(Kind::DataRoot)?;
        let from = self.typed_opt("restored-from-incarnation", parse_hex16)?;
        let ms = self.typed_opt("restored-ms", parse_decimal)?;
        Ok(DataRoot {
            catalog_schema: self.typed("catalog-schema", parse_u32)?,
            repository_schema: self.typed("repository-schema", parse_u32)?,
            object_store: self.typed("object-store", parse_u32)?,
            envelope: self.typed("envelope", parse_u32)?,
            engine: self.typed("engine", |v| Ok(v.to_owned()))?,
            incarnation: self.typed("incarnation", parse_hex16)?,
            created_ms: self.typed("created-ms", parse_decimal)?,
            restored: from.zip(ms).map(|(from_incarnation, ms)| Restored {
                from_incarnation,
                ms,
            }),
        })
    }

    /// A new `repository` descriptor (LF, table key order).
    pub fn new_repository(fields: &Repository) -> Result<Descriptor, FormatError> {
        let mut d = Descriptor::bare(Kind::Repository);
        d.push("repository-id", fields.repository_id.to_hex());
        d.push("name", fields.name.clone());
        d.push("schema", fields.schema.to_string());
        d.push("engine", fields.engine.clone());
        d.push("object-store", fields.object_store.to_string());
        d.push("created-ms", fields.created_ms.to_string());
        if let Some(migrated) = fields.migrated {
            d.push("migrated-from-schema", migrated.from_schema.to_string());
            d.push("migrated-ms", migrated.ms.to_string());
        }
        d.validate()?;
        Ok(d)
    }

    /// The fields of a `repository` descriptor.
    pub fn repository(&self) -> Result<Repository, FormatError> {
        self.require_kind(Kind::Repository)?;
        let from = self.typed_opt("migrated-from-schema", parse_u32)?;
        let ms = self.typed_opt("migrated-ms", parse_decimal)?;
        Ok(Repository {
            repository_id: RepositoryId(self.typed("repository-id", parse_hex16)?),
            name: self.typed("name", |v| Ok(v.to_owned()))?,
            schema: self.typed("schema", parse_u32)?,
            engine: self.typed("engine", |v| Ok(v.to_owned()))?,
            object_store: self.typed("object-store", parse_u32)?,
            created_ms: self.typed("created-ms", parse_decimal)?,
            migrated: from
                .zip(ms)
                .map(|(from_schema, ms)| Migrated { from_schema, ms }),
        })
    }

    /// A new `object-store` descriptor (LF, table key order); an `lz4`
    /// store gets `required-features = lz4`.
    pub fn new_object_store(fields: &ObjectStore) -> Result<Descriptor, FormatError> {
        let mut d = Descriptor::bare(Kind::ObjectStore);
        d.push("layout", fields.layout.to_string());
        d.push("envelope", fields.envelope.to_string());
        d.push(
            "small-object-threshold",
            fields.small_object_threshold.to_string(),
        );
        d.push("pack-seal-bytes", fields.pack_seal_bytes.to_string());
        d.push("compression", fields.compression.as_str().to_owned());
        if fields.compression == Compression::Lz4 {
            d.push(KEY_REQUIRED_FEATURES, FEATURE_LZ4.to_owned());
        }
        d.validate()?;
        Ok(d)
    }

    /// The fields of an `object-store` descriptor.
    pub fn object_store(&self) -> Result<ObjectStore, FormatError> {
        self.require_kind(Kind::ObjectStore)?;
        Ok(ObjectStore {
            layout: self.typed("layout", parse_u32)?,
            envelope: self.typed("envelope", parse_u32)?,
            small_object_threshold: self.typed("small-object-threshold", parse_decimal)?,
            pack_seal_bytes: self.typed("pack-seal-bytes", parse_decimal)?,
            compression: self.typed("compression", |v| {
                Compression::parse(v).map_err(|e| e.to_string())
            })?,
        })
    }

    /// A new `workspace` descriptor (LF, table key order).
    pub fn new_workspace(fields: &Workspace) -> Result<Descriptor, FormatError> {
        let mut d = Descriptor::bare(Kind::Workspace);
        d.push("schema", fields.schema.to_string());
        d.push("engine", fields.engine.clone());
        d.push("workspace-id", fields.workspace_id.to_hex());
        d.validate()?;
        Ok(d)
    }

    /// The fields of a `workspace` descriptor.
    pub fn workspace(&self) -> Result<Workspace, FormatError> {
        self.require_kind(Kind::Workspace)?;
        Ok(Workspace {
            schema: self.typed("schema", parse_u32)?,
            engine: self.typed("engine", |v| Ok(v.to_owned()))?,
            workspace_id: WorkspaceId(self.typed("workspace-id", parse_hex16)?),
        })
    }
}

fn check_header(line: &str) -> Result<(), FormatError> {
    if line == "scribe-descriptor = 1" {
        return Ok(());
    }
    if let Some(version) = line.strip_prefix("scribe-descriptor = ") {
        if let Ok(version) = parse_decimal(version) {
            return Err(FormatError::UnsupportedVersion {
                what: WHAT,
                version,
            });
        }
    }
    Err(line_error(
        1,
        "the first line is not exactly `scribe-descriptor = 1`",
    ))
}

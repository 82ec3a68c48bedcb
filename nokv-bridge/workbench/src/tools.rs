//! The 18 tools: their exact names, their input types (strict: unknown
//! fields, wrong types and out-of-range values are refused with a named
//! error) and their JSON input schemas (`additionalProperties: false`).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::{json, Map, Value};

use crate::error::WbError;
use crate::path::Section;

/// The tool names, in the contract's order.
pub const TOOLS: [&str; 18] = [
    "workbench_create",
    "workbench_put_file",
    "workbench_append",
    "workbench_edit",
    "workbench_list",
    "workbench_stat",
    "workbench_read",
    "workbench_grep",
    "workbench_search",
    "workbench_aggregate",
    "workbench_catalog",
    "workbench_find",
    "workbench_commit",
    "workbench_snapshot",
    "workbench_snapshot_renew",
    "workbench_snapshot_retire",
    "workbench_snapshot_list",
    "workbench_restore",
];

/// An optional input that may be absent but not `null`.
fn non_null<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// A snapshot selector: numeric id or name.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum SnapRef {
    Id(u64),
    Name(String),
}

impl std::fmt::Display for SnapRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SnapRef::Id(n) => write!(f, "{n}"),
            SnapRef::Name(s) => write!(f, "named {s:?}"),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PredOp {
    Eq,
    Ne,
    In,
    Prefix,
    Suffix,
    Contains,
    Gt,
    Gte,
    Lt,
    Lte,
    Exists,
    NotExists,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Predicate {
    pub field: String,
    pub op: PredOp,
    #[serde(default)]
    pub value: Option<Value>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Asc,
    Desc,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SortKey {
    pub field: String,
    #[serde(default, deserialize_with = "non_null")]
    pub direction: Option<Direction>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MeasureOp {
    Count,
    Sum,
    Avg,
    Min,
    Max,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Measure {
    pub name: String,
    pub op: MeasureOp,
    #[serde(default, deserialize_with = "non_null")]
    pub field: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadFormat {
    Structured,
    Bytes,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Create {
    pub id: String,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PutFile {
    pub id: String,
    pub section: Section,
    pub path: String,
    #[serde(default, deserialize_with = "non_null")]
    pub text: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    pub base64: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    pub content_type: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    pub replace: Option<bool>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Append {
    pub id: String,
    pub section: Section,
    pub path: String,
    #[serde(default, deserialize_with = "non_null")]
    pub text: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    pub base64: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    pub content_type: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Edit {
    pub id: String,
    pub section: Section,
    pub path: String,
    pub old_string: String,
    pub new_string: String,
    #[serde(default, deserialize_with = "non_null")]
    pub replace_all: Option<bool>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct List {
    pub id: String,
    #[serde(default)]
    pub section: Option<Section>,
    #[serde(default, deserialize_with = "non_null")]
    pub path: Option<String>,
    #[serde(default)]
    pub at_snapshot: Option<SnapRef>,
    #[serde(default, deserialize_with = "non_null")]
    pub cursor: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    pub limit: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stat {
    pub id: String,
    #[serde(default)]
    pub section: Option<Section>,
    #[serde(default, deserialize_with = "non_null")]
    pub path: Option<String>,
    #[serde(default)]
    pub at_snapshot: Option<SnapRef>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Read {
    pub id: String,
    pub section: Section,
    pub path: String,
    #[serde(default, deserialize_with = "non_null")]
    pub format: Option<ReadFormat>,
    #[serde(default, deserialize_with = "non_null")]
    pub offset: Option<u64>,
    #[serde(default, deserialize_with = "non_null")]
    pub limit: Option<u32>,
    #[serde(default, deserialize_with = "non_null")]
    pub cursor: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    pub if_none_match: Option<u64>,
    #[serde(default)]
    pub at_snapshot: Option<SnapRef>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grep {
    pub id: String,
    pub pattern: String,
    pub recursive: bool,
    #[serde(default, deserialize_with = "non_null")]
    pub patterns: Option<Vec<String>>,
    #[serde(default, deserialize_with = "non_null")]
    pub glob: Option<String>,
    #[serde(default)]
    pub section: Option<Section>,
    #[serde(default, deserialize_with = "non_null")]
    pub path: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    pub cursor: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    pub limit: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Search {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub section: Option<Section>,
    #[serde(default, deserialize_with = "non_null")]
    pub path: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    pub predicates: Option<Vec<Predicate>>,
    #[serde(default, deserialize_with = "non_null")]
    pub sort: Option<Vec<SortKey>>,
    #[serde(default, deserialize_with = "non_null")]
    pub fields: Option<Vec<String>>,
    #[serde(default, deserialize_with = "non_null")]
    pub facets: Option<Vec<String>>,
    #[serde(default, deserialize_with = "non_null")]
    pub cursor: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    pub limit: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Aggregate {
    pub measures: Vec<Measure>,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub section: Option<Section>,
    #[serde(default, deserialize_with = "non_null")]
    pub path: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    pub predicates: Option<Vec<Predicate>>,
    #[serde(default, deserialize_with = "non_null")]
    pub group_by: Option<Vec<String>>,
    #[serde(default, deserialize_with = "non_null")]
    pub sort: Option<Vec<SortKey>>,
    #[serde(default, deserialize_with = "non_null")]
    pub limit: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Catalog {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub section: Option<Section>,
    #[serde(default, deserialize_with = "non_null")]
    pub path: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    pub field_prefix: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    pub include_facets: Option<bool>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Find {
    #[serde(default)]
    pub committed: Option<bool>,
    #[serde(default, deserialize_with = "non_null")]
    pub manifest_pattern: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    pub include_manifest: Option<bool>,
    #[serde(default, deserialize_with = "non_null")]
    pub cursor: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    pub limit: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Commit {
    pub id: String,
    pub manifest: Map<String, Value>,
    pub content_digest_uri: String,
    #[serde(default, deserialize_with = "non_null")]
    pub replace: Option<bool>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    pub id: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
    #[serde(default, deserialize_with = "non_null")]
    pub ttl_days: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotRenew {
    pub id: String,
    #[serde(default)]
    pub snapshot_id: Option<u64>,
    #[serde(default, deserialize_with = "non_null")]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    pub ttl_days: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotRetire {
    pub id: String,
    #[serde(default, deserialize_with = "non_null")]
    pub snapshot_id: Option<u64>,
    #[serde(default, deserialize_with = "non_null")]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    pub reason: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotList {
    pub id: String,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Restore {
    pub id: String,
    pub destination_id: String,
    #[serde(default, deserialize_with = "non_null")]
    pub at_snapshot: Option<SnapRef>,
    #[serde(default, deserialize_with = "non_null")]
    pub at_commit: Option<String>,
}

/// A parsed, bounds-checked tool call.
#[derive(Clone, Debug, PartialEq)]
pub enum Call {
    Create(Create),
    PutFile(PutFile),
    Append(Append),
    Edit(Edit),
    List(List),
    Stat(Stat),
    Read(Read),
    Grep(Grep),
    Search(Search),
    Aggregate(Aggregate),
    Catalog(Catalog),
    Find(Find),
    Commit(Commit),
    Snapshot(Snapshot),
    SnapshotRenew(SnapshotRenew),
    SnapshotRetire(SnapshotRetire),
    SnapshotList(SnapshotList),
    Restore(Restore),
}

fn strict<T: DeserializeOwned>(tool: &str, input: &Value) -> Result<T, WbError> {
    if !input.is_object() {
        return Err(WbError::invalid_input(format!(
            "{tool}: the input must be a JSON object"
        )));
    }
    serde_json::from_value(input.clone()).map_err(|e| {
        // serde's words for the selector type are the bridge's internals.
        let e = e.to_string().replace(
            "data did not match any variant of untagged enum SnapRef",
            "a snapshot is an id (an integer >= 0) or a name (a string)",
        );
        WbError::invalid_input(format!("{tool}: {e}"))
    })
}

fn range(tool: &str, field: &str, v: Option<u64>, lo: u64, hi: u64) -> Result<(), WbError> {
    match v {
        Some(x) if x < lo || x > hi => Err(WbError::invalid_input(format!(
            "{tool}: {field} is {x}, outside {lo} to {hi}"
        ))),
        _ => Ok(()),
    }
}

fn len_range(
    tool: &str,
    field: &str,
    v: Option<&str>,
    lo: usize,
    hi: usize,
) -> Result<(), WbError> {
    match v {
        Some(s) if s.chars().count() < lo || s.chars().count() > hi => {
            Err(WbError::invalid_input(if hi == usize::MAX {
                format!("{tool}: {field} must be at least {lo} characters")
            } else {
                format!("{tool}: {field} must be {lo} to {hi} characters")
            }))
        }
        _ => Ok(()),
    }
}

fn check_value(tool: &str, v: &Value, nested: bool) -> Result<(), WbError> {
    match v {
        Value::Object(_) => Err(WbError::invalid_input(format!(
            "{tool}: a predicate value cannot be an object"
        ))),
        Value::Array(items) if nested => Err(WbError::invalid_input(format!(
            "{tool}: a predicate value array cannot hold arrays ({} items)",
            items.len()
        ))),
        Value::Array(items) => items.iter().try_for_each(|i| check_value(tool, i, true)),
        _ => Ok(()),
    }
}

fn check_preds(tool: &str, preds: &Option<Vec<Predicate>>) -> Result<(), WbError> {
    for p in preds.iter().flatten() {
        if let Some(v) = &p.value {
            check_value(tool, v, false)?;
        }
    }
    Ok(())
}

fn check_snap(tool: &str, s: &Option<SnapRef>) -> Result<(), WbError> {
    match s {
        Some(SnapRef::Name(n)) if n.is_empty() => Err(WbError::invalid_input(format!(
            "{tool}: at_snapshot names must not be empty"
        ))),
        _ => Ok(()),
    }
}

/// Is `s` `sha256:` and 64 lowercase hex digits?
pub fn is_sha256_uri(s: &str) -> bool {
    s.strip_prefix("sha256:")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// Parse and bounds-check the input of `tool`.
pub fn parse(tool: &str, input: &Value) -> Result<Call, WbError> {
    let t = tool;
    Ok(match tool {
        "workbench_create" => Call::Create(strict(t, input)?),
        "workbench_put_file" => Call::PutFile(strict(t, input)?),
        "workbench_append" => Call::Append(strict(t, input)?),
        "workbench_edit" => Call::Edit(strict(t, input)?),
        "workbench_list" => {
            let c: List = strict(t, input)?;
            range(t, "limit", c.limit.map(u64::from), 1, 100)?;
            check_snap(t, &c.at_snapshot)?;
            Call::List(c)
        }
        "workbench_stat" => {
            let c: Stat = strict(t, input)?;
            check_snap(t, &c.at_snapshot)?;
            Call::Stat(c)
        }
        "workbench_read" => {
            let c: Read = strict(t, input)?;
            range(t, "limit", c.limit.map(u64::from), 1, 300)?;
            check_snap(t, &c.at_snapshot)?;
            Call::Read(c)
        }
        "workbench_grep" => {
            let c: Grep = strict(t, input)?;
            range(t, "limit", c.limit.map(u64::from), 1, 300)?;
            range(
                t,
                "patterns",
                c.patterns.as_ref().map(|p| p.len() as u64),
                0,
                16,
            )?;
            Call::Grep(c)
        }
        "workbench_search" => {
            let c: Search = strict(t, input)?;
            range(t, "limit", c.limit.map(u64::from), 1, 10)?;
            check_preds(t, &c.predicates)?;
            Call::Search(c)
        }
        "workbench_aggregate" => {
            let c: Aggregate = strict(t, input)?;
            range(t, "limit", c.limit.map(u64::from), 1, 100)?;
            check_preds(t, &c.predicates)?;
            Call::Aggregate(c)
        }
        "workbench_catalog" => Call::Catalog(strict(t, input)?),
        "workbench_find" => {
            let c: Find = strict(t, input)?;
            range(t, "limit", c.limit.map(u64::from), 1, 100)?;
            Call::Find(c)
        }
        "workbench_commit" => {
            let c: Commit = strict(t, input)?;
            if !is_sha256_uri(&c.content_digest_uri) {
                return Err(WbError::invalid_input(format!(
                    "{t}: content_digest_uri must match ^sha256:[0-9a-f]{{64}}$"
                )));
            }
            Call::Commit(c)
        }
        "workbench_snapshot" => {
            let c: Snapshot = strict(t, input)?;
            len_range(t, "reason", c.reason.as_deref(), 1, 256)?;
            range(
                t,
                "metadata",
                c.metadata.as_ref().map(|m| m.len() as u64),
                0,
                64,
            )?;
            range(t, "ttl_days", c.ttl_days.map(u64::from), 1, 90)?;
            Call::Snapshot(c)
        }
        "workbench_snapshot_renew" => {
            let c: SnapshotRenew = strict(t, input)?;
            range(t, "ttl_days", c.ttl_days.map(u64::from), 1, 90)?;
            Call::SnapshotRenew(c)
        }
        "workbench_snapshot_retire" => {
            let c: SnapshotRetire = strict(t, input)?;
            len_range(t, "name", c.name.as_deref(), 1, usize::MAX)?;
            if c.snapshot_id.is_some() == c.name.is_some() {
                return Err(WbError::invalid_input(format!(
                    "{t}: give exactly one of snapshot_id or name"
                )));
            }
            Call::SnapshotRetire(c)
        }
        "workbench_snapshot_list" => Call::SnapshotList(strict(t, input)?),
        "workbench_restore" => {
            let c: Restore = strict(t, input)?;
            len_range(t, "id", Some(&c.id), 1, usize::MAX)?;
            len_range(t, "destination_id", Some(&c.destination_id), 1, usize::MAX)?;
            check_snap(t, &c.at_snapshot)?;
            if let Some(h) = &c.at_commit {
                if h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(WbError::invalid_input(format!(
                        "{t}: at_commit must be 64 hex digits"
                    )));
                }
            }
            Call::Restore(c)
        }
        other => {
            return Err(WbError::new(
                "unknown_tool",
                format!("no tool named {other:?}"),
            ))
        }
    })
}

// ---- schemas ----

fn section() -> Value {
    json!({"type": "string", "enum": ["input", "scripts", "outputs", "logs", "metadata"]})
}

fn section_or_null() -> Value {
    json!({"type": ["string", "null"], "enum": ["input", "scripts", "outputs", "logs", "metadata", null]})
}

fn snap() -> Value {
    json!({"oneOf": [
        {"type": "integer", "minimum": 0},
        {"type": "string", "minLength": 1},
        {"type": "null"}
    ]})
}

fn s() -> Value {
    json!({"type": "string"})
}

fn b() -> Value {
    json!({"type": "boolean"})
}

fn lim(max: u64) -> Value {
    json!({"type": "integer", "minimum": 1, "maximum": max})
}

fn scalar() -> Value {
    json!({"oneOf": [
        {"type": "string"}, {"type": "integer", "minimum": 0}, {"type": "number"}, {"type": "boolean"}
    ]})
}

fn preds() -> Value {
    json!({"type": "array", "items": {
        "type": "object", "additionalProperties": false, "required": ["field", "op"],
        "properties": {
            "field": {"type": "string"},
            "op": {"type": "string", "enum": ["eq", "ne", "in", "prefix", "suffix", "contains", "gt", "gte", "lt", "lte", "exists", "not_exists"]},
            "value": {"oneOf": [
                {"type": "string"}, {"type": "integer", "minimum": 0}, {"type": "number"}, {"type": "boolean"},
                {"type": "array", "items": scalar()}, {"type": "null"}
            ]}
        }
    }})
}

fn sort() -> Value {
    json!({"type": "array", "items": {
        "type": "object", "additionalProperties": false, "required": ["field"],
        "properties": {"field": {"type": "string"}, "direction": {"type": "string", "enum": ["asc", "desc"]}}
    }})
}

fn strings() -> Value {
    json!({"type": "array", "items": {"type": "string"}})
}

fn object(required: &[&str], props: Value) -> Value {
    json!({"type": "object", "additionalProperties": false, "required": required, "properties": props})
}

/// The JSON input schema of `tool`.
pub fn schema(tool: &str) -> Option<Value> {
    Some(match tool {
        "workbench_create" => object(&["id"], json!({"id": s()})),
        "workbench_put_file" => object(
            &["id", "section", "path"],
            json!({"id": s(), "section": section(), "path": s(), "text": s(), "base64": s(),
                   "content_type": s(), "replace": b()}),
        ),
        "workbench_append" => object(
            &["id", "section", "path"],
            json!({"id": s(), "section": section(), "path": s(), "text": s(), "base64": s(),
                   "content_type": s()}),
        ),
        "workbench_edit" => object(
            &["id", "section", "path", "old_string", "new_string"],
            json!({"id": s(), "section": section(), "path": s(), "old_string": s(),
                   "new_string": s(), "replace_all": b()}),
        ),
        "workbench_list" => object(
            &["id"],
            json!({"id": s(), "section": section_or_null(), "path": s(), "at_snapshot": snap(),
                   "cursor": s(), "limit": lim(100)}),
        ),
        "workbench_stat" => object(
            &["id"],
            json!({"id": s(), "section": section_or_null(), "path": s(), "at_snapshot": snap()}),
        ),
        "workbench_read" => object(
            &["id", "section", "path"],
            json!({"id": s(), "section": section(), "path": s(),
                   "format": {"type": "string", "enum": ["structured", "bytes"]},
                   "offset": {"type": "integer", "minimum": 0}, "limit": lim(300), "cursor": s(),
                   "if_none_match": {"type": "integer", "minimum": 0}, "at_snapshot": snap()}),
        ),
        "workbench_grep" => object(
            &["id", "pattern", "recursive"],
            json!({"id": s(), "pattern": s(), "recursive": b(),
                   "patterns": {"type": "array", "items": {"type": "string"}, "maxItems": 16},
                   "glob": s(), "section": section_or_null(), "path": s(), "cursor": s(),
                   "limit": lim(300)}),
        ),
        "workbench_search" => object(
            &[],
            json!({"id": {"type": ["string", "null"]}, "section": section_or_null(), "path": s(),
                   "predicates": preds(), "sort": sort(), "fields": strings(), "facets": strings(),
                   "cursor": s(), "limit": lim(10)}),
        ),
        "workbench_aggregate" => object(
            &["measures"],
            json!({"measures": {"type": "array", "items": {
                        "type": "object", "additionalProperties": false, "required": ["name", "op"],
                        "properties": {"name": s(),
                            "op": {"type": "string", "enum": ["count", "sum", "avg", "min", "max"]},
                            "field": s()}}},
                   "id": {"type": ["string", "null"]}, "section": section_or_null(), "path": s(),
                   "predicates": preds(), "group_by": strings(), "sort": sort(), "limit": lim(100)}),
        ),
        "workbench_catalog" => object(
            &[],
            json!({"id": {"type": ["string", "null"]}, "section": section_or_null(), "path": s(),
                   "field_prefix": s(), "include_facets": b()}),
        ),
        "workbench_find" => object(
            &[],
            json!({"committed": {"type": ["boolean", "null"]}, "manifest_pattern": s(),
                   "include_manifest": b(), "cursor": s(), "limit": lim(100)}),
        ),
        "workbench_commit" => object(
            &["id", "manifest", "content_digest_uri"],
            json!({"id": s(), "manifest": {"type": "object"},
                   "content_digest_uri": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"},
                   "replace": b()}),
        ),
        "workbench_snapshot" => object(
            &["id"],
            json!({"id": s(), "name": {"type": ["string", "null"]},
                   "reason": {"oneOf": [{"type": "string", "minLength": 1, "maxLength": 256}, {"type": "null"}]},
                   "metadata": {"oneOf": [{"type": "object", "maxProperties": 64}, {"type": "null"}]},
                   "ttl_days": {"type": "integer", "minimum": 1, "maximum": 90}}),
        ),
        "workbench_snapshot_renew" => object(
            &["id"],
            json!({"id": s(), "snapshot_id": {"oneOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]},
                   "name": s(), "ttl_days": {"type": "integer", "minimum": 1, "maximum": 90}}),
        ),
        "workbench_snapshot_retire" => object(
            &["id"],
            json!({"id": s(), "snapshot_id": {"type": "integer", "minimum": 0},
                   "name": {"type": "string", "minLength": 1}, "reason": s()}),
        ),
        "workbench_snapshot_list" => object(&["id"], json!({"id": s()})),
        "workbench_restore" => object(
            &["id", "destination_id"],
            json!({"id": {"type": "string", "minLength": 1},
                   "destination_id": {"type": "string", "minLength": 1},
                   "at_snapshot": {"oneOf": [{"type": "integer", "minimum": 0}, {"type": "string", "minLength": 1}]},
                   "at_commit": {"type": "string", "pattern": "^[0-9a-fA-F]{64}$"}}),
        ),
        _ => return None,
    })
}

/// Every tool with its input schema, as `nokv schema` prints them.
pub fn all_schemas() -> Value {
    Value::Array(
        TOOLS
            .iter()
            .map(|t| json!({"name": t, "inputSchema": schema(t).expect("every tool has a schema")}))
            .collect(),
    )
}

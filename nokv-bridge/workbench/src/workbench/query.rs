//! grep, search, aggregate, catalog and find: metadata queries at one read
//! version over a documented field catalog (docs/workbench.md).

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::{content_type_of, message_content_type, record_path, Workbench, RECORD_DIR};
use crate::error::WbError;
use crate::identity::canonical_json;
use crate::path::{self, check_id, Section, ToolPath};
use crate::store::{Row, Store};
use crate::tools::{self, Direction, MeasureOp, PredOp, Predicate};

/// The most rows one query examines.
pub const MAX_SCAN_ROWS: usize = 100_000;
/// The most bytes of one body grep reads.
pub const MAX_GREP_BODY: u64 = 8 << 20;
/// The run-manifest bytes one `workbench_find` page inlines at most
/// (`include_manifest`): the page stops before the manifest that would
/// pass it (`truncated: true`, its cursor continues there); a manifest
/// larger than this alone is returned as `manifest_omitted` with its size.
pub const FIND_MANIFEST_BYTES: u64 = 4 << 20;

/// The field catalog: name, type, operators.
pub const FIELDS: &[(&str, &str, &str)] = &[
    ("workbench_id", "string", "Identity of the workbench"),
    (
        "section",
        "string",
        "One of the five sections (null for a file outside them)",
    ),
    (
        "path",
        "string",
        "Path relative to the section (to the workbench root without one)",
    ),
    ("name", "string", "Last component of the path"),
    ("size", "integer", "Body size in bytes"),
    (
        "content_type",
        "string",
        "Media type (recorded at publication or from the extension)",
    ),
    (
        "generation",
        "integer",
        "Generation of the body (the change that published it)",
    ),
    (
        "change",
        "integer",
        "Scribe change number that published the body",
    ),
    (
        "modified_ms",
        "integer",
        "Time of that change (ms since the epoch)",
    ),
    (
        "committed",
        "boolean",
        "Whether the workbench has a run manifest at the read version",
    ),
];

fn ops_for(ty: &str) -> &'static [&'static str] {
    match ty {
        "string" => &[
            "eq",
            "ne",
            "in",
            "prefix",
            "suffix",
            "contains",
            "gt",
            "gte",
            "lt",
            "lte",
            "exists",
            "not_exists",
        ],
        "integer" => &[
            "eq",
            "ne",
            "in",
            "gt",
            "gte",
            "lt",
            "lte",
            "exists",
            "not_exists",
        ],
        _ => &["eq", "ne", "in", "exists", "not_exists"],
    }
}

fn field_type(name: &str) -> Option<&'static str> {
    FIELDS.iter().find(|f| f.0 == name).map(|f| f.1)
}

fn check_field(name: &str) -> Result<&'static str, WbError> {
    field_type(name).ok_or_else(|| {
        WbError::invalid_input(format!(
            "unknown field {name:?}; workbench_catalog lists them"
        ))
    })
}

fn cmp_values(a: &Value, b: &Value) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (Value::String(x), Value::String(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
        (Value::Number(x), Value::Number(y)) => x.as_f64()?.partial_cmp(&y.as_f64()?),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        (Value::Null, Value::Null) => Some(std::cmp::Ordering::Equal),
        (Value::Null, _) => Some(std::cmp::Ordering::Less),
        (_, Value::Null) => Some(std::cmp::Ordering::Greater),
        _ => None,
    }
}

fn check_pred(p: &Predicate) -> Result<(), WbError> {
    let ty = check_field(&p.field)?;
    let op = serde_json::to_value(op_name(p.op)).unwrap_or_default();
    if !ops_for(ty).contains(&op_name(p.op)) {
        return Err(WbError::invalid_input(format!(
            "field {:?} does not accept operator {op}",
            p.field
        )));
    }
    let needs_value = !matches!(p.op, PredOp::Exists | PredOp::NotExists);
    if needs_value && p.value.is_none() {
        return Err(WbError::invalid_input(format!(
            "operator {op} needs a value"
        )));
    }
    if p.op == PredOp::In && !p.value.as_ref().is_some_and(Value::is_array) {
        return Err(WbError::invalid_input("operator in needs an array value"));
    }
    // A value of another type than the field's compares with nothing: say
    // so rather than answer an empty result that looks like "none match".
    let values: Vec<&Value> = match &p.value {
        Some(Value::Array(a)) if p.op == PredOp::In => a.iter().collect(),
        Some(v) => vec![v],
        None => Vec::new(),
    };
    for v in values {
        let fits = matches!(
            (ty, v),
            (_, Value::Null)
                | ("string", Value::String(_))
                | ("integer", Value::Number(_))
                | ("boolean", Value::Bool(_))
        );
        if !fits {
            return Err(WbError::invalid_input(format!(
                "field {:?} holds {}s; the value {v} is not one",
                p.field,
                if ty == "integer" { "number" } else { ty }
            )));
        }
    }
    Ok(())
}

fn op_name(op: PredOp) -> &'static str {
    match op {
        PredOp::Eq => "eq",
        PredOp::Ne => "ne",
        PredOp::In => "in",
        PredOp::Prefix => "prefix",
        PredOp::Suffix => "suffix",
        PredOp::Contains => "contains",
        PredOp::Gt => "gt",
        PredOp::Gte => "gte",
        PredOp::Lt => "lt",
        PredOp::Lte => "lte",
        PredOp::Exists => "exists",
        PredOp::NotExists => "not_exists",
    }
}

fn matches(row: &Map<String, Value>, p: &Predicate) -> bool {
    let v = row.get(&p.field).unwrap_or(&Value::Null);
    let want = p.value.as_ref().unwrap_or(&Value::Null);
    let ord = || cmp_values(v, want);
    let s = |f: fn(&str, &str) -> bool| matches!((v, want), (Value::String(a), Value::String(b)) if f(a, b));
    match p.op {
        PredOp::Exists => !v.is_null(),
        PredOp::NotExists => v.is_null(),
        PredOp::Eq => ord() == Some(std::cmp::Ordering::Equal),
        PredOp::Ne => ord() != Some(std::cmp::Ordering::Equal),
        PredOp::In => want.as_array().is_some_and(|a| {
            a.iter()
                .any(|w| cmp_values(v, w) == Some(std::cmp::Ordering::Equal))
        }),
        PredOp::Prefix => s(|a, b| a.starts_with(b)),
        PredOp::Suffix => s(|a, b| a.ends_with(b)),
        PredOp::Contains => s(|a, b| a.contains(b)),
        PredOp::Gt => ord() == Some(std::cmp::Ordering::Greater),
        PredOp::Gte => matches!(
            ord(),
            Some(std::cmp::Ordering::Greater | std::cmp::Ordering::Equal)
        ),
        PredOp::Lt => ord() == Some(std::cmp::Ordering::Less),
        PredOp::Lte => matches!(
            ord(),
            Some(std::cmp::Ordering::Less | std::cmp::Ordering::Equal)
        ),
    }
}

/// The text `workbench_find`'s `manifest_pattern` is matched in: the
/// caller's manifest as canonical compact JSON (keys sorted, no spaces:
/// the bytes `manifest_digest_uri` hashes), never the stored file's
/// layout or the bridge's own fields around it (its schema name matched
/// every committed workbench). A file that does not parse is matched as
/// it is.
fn manifest_text(stored: &[u8]) -> String {
    match serde_json::from_slice::<Value>(stored) {
        Ok(Value::Object(mut o)) if o.contains_key("manifest") => {
            canonical_json(&o.remove("manifest").unwrap_or_default())
        }
        _ => String::from_utf8_lossy(stored).into_owned(),
    }
}

/// `*` and `?` over a basename.
pub fn glob_match(glob: &str, name: &str) -> bool {
    let g: Vec<char> = glob.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut gi, mut ni, mut star, mut mark) = (0, 0, None, 0);
    while ni < n.len() {
        if gi < g.len() && (g[gi] == '?' || g[gi] == n[ni]) {
            gi += 1;
            ni += 1;
        } else if gi < g.len() && g[gi] == '*' {
            star = Some(gi);
            mark = ni;
            gi += 1;
        } else if let Some(s) = star {
            gi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    g[gi..].iter().all(|c| *c == '*')
}

/// A query cursor: the read version, the query's digest and an offset.
fn cursor(at: u64, digest: &str, offset: usize) -> String {
    format!("q1.{at}.{digest}.{offset}")
}

fn decode_cursor(s: &str, digest: &str) -> Result<(u64, usize), WbError> {
    let bad = || WbError::new("invalid_cursor", "not a cursor of this query");
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() != 4 || parts[0] != "q1" || parts[2] != digest {
        return Err(bad());
    }
    Ok((
        parts[1].parse().map_err(|_| bad())?,
        parts[3].parse().map_err(|_| bad())?,
    ))
}

fn query_digest(input: &Value) -> String {
    let mut v = input.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("cursor");
    }
    blake3::hash(canonical_json(&v).as_bytes()).to_hex()[..32].to_string()
}

/// One file as query fields, with its store row.
struct Item {
    fields: Map<String, Value>,
    row: Row,
}

impl<S: Store> Workbench<S> {
    /// Workbench ids with their incarnations, at `at`.
    pub(super) fn workbenches(&mut self, at: u64) -> Result<Vec<(String, u64)>, WbError> {
        let mut out = Vec::new();
        let mut token = String::new();
        loop {
            let page = self.store.list_files(at, RECORD_DIR, &token, 1000)?;
            for r in page.files {
                let id = r.path[RECORD_DIR.len() + 1..].to_string();
                if !id.contains('/') {
                    out.push((id, r.generation));
                }
            }
            match page.next {
                Some(t) => token = t,
                None => break,
            }
        }
        Ok(out)
    }

    /// Every file of the scope at `at`, as fields.
    fn scan(
        &mut self,
        id: Option<&str>,
        section: Option<Section>,
        p: Option<&str>,
        at: u64,
        recursive: bool,
    ) -> Result<Vec<Item>, WbError> {
        let wbs = match id {
            Some(id) => {
                check_id(id)?;
                let rec = self.store.stat(at, &record_path(id))?.ok_or_else(|| {
                    WbError::new("workbench_not_found", format!("no workbench {id:?}"))
                })?;
                vec![(id.to_string(), rec.generation)]
            }
            None => self.workbenches(at)?,
        };
        // Rows first; then every generation's message and time at once.
        let mut raw: Vec<(String, bool, Row)> = Vec::new();
        for (wid, inc) in wbs {
            let dir = match (section, p) {
                (None, Some(x)) if !x.is_empty() => {
                    return Err(WbError::invalid_input("a path needs a section"))
                }
                (None, _) => wid.clone(),
                (Some(s), p) => {
                    path::repo_path(&wid, s, &ToolPath::parse(s, p.unwrap_or(""), true)?)
                }
            };
            let committed = self
                .store
                .stat(at, &format!("{wid}/metadata/run_manifest.json"))?
                .is_some_and(|r| r.generation >= inc);
            let mut token = String::new();
            loop {
                let page = if recursive {
                    self.store.list_files(at, &dir, &token, 1000)?
                } else {
                    self.store.list_dir(at, &dir, &token, 1000)?
                };
                for row in page.files {
                    if row.generation < inc {
                        continue;
                    }
                    if raw.len() >= MAX_SCAN_ROWS {
                        return Err(WbError::invalid_input(format!(
                            "the query examines more than {MAX_SCAN_ROWS} files; narrow it"
                        )));
                    }
                    raw.push((wid.clone(), committed, row));
                }
                match page.next {
                    Some(t) => token = t,
                    None => break,
                }
            }
        }
        let infos = self.generation_infos(raw.iter().map(|(_, _, r)| r.generation))?;
        let mut out = Vec::with_capacity(raw.len());
        for (wid, committed, row) in raw {
            let rest = row.path.get(wid.len() + 1..).unwrap_or_default();
            // A file outside the five sections (a person's submit): no
            // section, its path relative to the workbench root.
            let (sec, rel) = match crate::workbench::sandbox::split_section(rest) {
                Some((s, rel)) => (json!(s), rel),
                None => (Value::Null, rest),
            };
            let (message, modified) = &infos[&row.generation];
            let modified = *modified;
            let ct = message_content_type(message, &row.path).map(str::to_string);
            let mut f = Map::new();
            f.insert("workbench_id".into(), json!(wid));
            f.insert("section".into(), sec);
            f.insert("path".into(), json!(rel));
            f.insert("name".into(), json!(rel.rsplit('/').next().unwrap_or(rel)));
            f.insert("size".into(), json!(row.body.size));
            f.insert(
                "content_type".into(),
                json!(ct.unwrap_or_else(|| content_type_of(rel).to_string())),
            );
            f.insert("generation".into(), json!(row.generation));
            f.insert("change".into(), json!(row.generation));
            f.insert("modified_ms".into(), json!(modified));
            f.insert("committed".into(), json!(committed));
            out.push(Item { fields: f, row });
        }
        Ok(out)
    }

    fn sort_items(items: &mut [Item], sort: &[tools::SortKey]) -> Result<(), WbError> {
        for k in sort {
            check_field(&k.field)?;
        }
        items.sort_by(|a, b| {
            for k in sort {
                let o = cmp_values(
                    a.fields.get(&k.field).unwrap_or(&Value::Null),
                    b.fields.get(&k.field).unwrap_or(&Value::Null),
                )
                .unwrap_or(std::cmp::Ordering::Equal);
                let o = if k.direction == Some(Direction::Desc) {
                    o.reverse()
                } else {
                    o
                };
                if o != std::cmp::Ordering::Equal {
                    return o;
                }
            }
            // Ties: workbench, then the physical key of section/path.
            let key = |i: &Item| {
                (
                    i.fields["workbench_id"].as_str().unwrap_or("").to_string(),
                    path::key(i.row.path.split('/')),
                )
            };
            key(a).cmp(&key(b))
        });
        Ok(())
    }

    fn facets(items: &[Item], names: &[String]) -> Result<Value, WbError> {
        let mut out = Map::new();
        for f in names {
            check_field(f)?;
            let mut counts: BTreeMap<String, u64> = BTreeMap::new();
            for i in items {
                let v = i.fields.get(f).cloned().unwrap_or(Value::Null);
                *counts
                    .entry(match v {
                        Value::String(s) => s,
                        other => other.to_string(),
                    })
                    .or_default() += 1;
            }
            out.insert(f.clone(), json!(counts));
        }
        Ok(Value::Object(out))
    }

    pub(super) fn search(&mut self, input: &Value, c: tools::Search) -> Result<Value, WbError> {
        let preds = c.predicates.unwrap_or_default();
        preds.iter().try_for_each(check_pred)?;
        let digest = query_digest(input);
        let (at, offset) = match &c.cursor {
            Some(cur) => decode_cursor(cur, &digest)?,
            None => (self.store.head()?, 0),
        };
        let mut items = self.scan(c.id.as_deref(), c.section, c.path.as_deref(), at, true)?;
        items.retain(|i| preds.iter().all(|p| matches(&i.fields, p)));
        Self::sort_items(&mut items, &c.sort.unwrap_or_default())?;
        let total = items.len();
        let facets = Self::facets(&items, &c.facets.unwrap_or_default())?;
        let fields = c.fields.unwrap_or_default();
        fields.iter().try_for_each(|f| check_field(f).map(|_| ()))?;
        let limit = c.limit.unwrap_or(10) as usize;
        let page: Vec<Value> = items
            .iter()
            .skip(offset)
            .take(limit)
            .map(|i| {
                if fields.is_empty() {
                    Value::Object(i.fields.clone())
                } else {
                    Value::Object(
                        fields
                            .iter()
                            .map(|f| (f.clone(), i.fields.get(f).cloned().unwrap_or(Value::Null)))
                            .collect(),
                    )
                }
            })
            .collect();
        let next = (offset + limit < total).then(|| cursor(at, &digest, offset + limit));
        Ok(
            json!({"read_version": at, "total": total, "rows": page, "facets": facets, "next_cursor": next}),
        )
    }

    pub(super) fn aggregate(&mut self, c: tools::Aggregate) -> Result<Value, WbError> {
        let preds = c.predicates.unwrap_or_default();
        preds.iter().try_for_each(check_pred)?;
        for m in &c.measures {
            match (&m.op, &m.field) {
                (MeasureOp::Count, None) => {}
                (_, Some(f)) if field_type(f) == Some("integer") => {}
                (MeasureOp::Count, Some(f)) => {
                    check_field(f)?;
                }
                _ => {
                    return Err(WbError::invalid_input(format!(
                        "measure {:?} needs an integer field",
                        m.name
                    )))
                }
            }
        }
        let group_by = c.group_by.unwrap_or_default();
        group_by
            .iter()
            .try_for_each(|f| check_field(f).map(|_| ()))?;
        let at = self.store.head()?;
        let mut items = self.scan(c.id.as_deref(), c.section, c.path.as_deref(), at, true)?;
        items.retain(|i| preds.iter().all(|p| matches(&i.fields, p)));
        let mut groups: BTreeMap<String, (Map<String, Value>, Vec<&Item>)> = BTreeMap::new();
        for i in &items {
            let key: Map<String, Value> = group_by
                .iter()
                .map(|g| (g.clone(), i.fields.get(g).cloned().unwrap_or(Value::Null)))
                .collect();
            groups
                .entry(canonical_json(&Value::Object(key.clone())))
                .or_insert_with(|| (key, Vec::new()))
                .1
                .push(i);
        }
        let mut rows: Vec<Map<String, Value>> = groups
            .into_values()
            .map(|(mut key, members)| {
                for m in &c.measures {
                    let nums: Vec<f64> = match &m.field {
                        Some(f) => members
                            .iter()
                            .filter_map(|i| i.fields.get(f).and_then(Value::as_f64))
                            .collect(),
                        None => vec![],
                    };
                    let v = match m.op {
                        MeasureOp::Count => json!(if m.field.is_some() {
                            nums.len()
                        } else {
                            members.len()
                        }),
                        MeasureOp::Sum => json!(nums.iter().sum::<f64>() as u64),
                        MeasureOp::Avg if nums.is_empty() => Value::Null,
                        MeasureOp::Avg => json!(nums.iter().sum::<f64>() / nums.len() as f64),
                        MeasureOp::Min => nums
                            .iter()
                            .cloned()
                            .reduce(f64::min)
                            .map_or(Value::Null, |x| json!(x as u64)),
                        MeasureOp::Max => nums
                            .iter()
                            .cloned()
                            .reduce(f64::max)
                            .map_or(Value::Null, |x| json!(x as u64)),
                    };
                    key.insert(m.name.clone(), v);
                }
                key
            })
            .collect();
        let sort = c.sort.unwrap_or_default();
        rows.sort_by(|a, b| {
            for k in &sort {
                let o = cmp_values(
                    a.get(&k.field).unwrap_or(&Value::Null),
                    b.get(&k.field).unwrap_or(&Value::Null),
                )
                .unwrap_or(std::cmp::Ordering::Equal);
                let o = if k.direction == Some(Direction::Desc) {
                    o.reverse()
                } else {
                    o
                };
                if o != std::cmp::Ordering::Equal {
                    return o;
                }
            }
            std::cmp::Ordering::Equal
        });
        let total_groups = rows.len();
        rows.truncate(c.limit.unwrap_or(100) as usize);
        Ok(
            json!({"read_version": at, "matched": items.len(), "total_groups": total_groups, "groups": rows}),
        )
    }

    pub(super) fn catalog(&mut self, c: tools::Catalog) -> Result<Value, WbError> {
        let prefix = c.field_prefix.unwrap_or_default();
        let fields: Vec<Value> = FIELDS
            .iter()
            .filter(|f| f.0.starts_with(&prefix))
            .map(|(n, t, d)| json!({"name": n, "type": t, "operators": ops_for(t), "sortable": true, "facetable": true, "description": d}))
            .collect();
        let mut out = json!({"fields": fields, "measures": ["count", "sum", "avg", "min", "max"]});
        if c.include_facets.unwrap_or(false) {
            let at = self.store.head()?;
            let items = self.scan(c.id.as_deref(), c.section, c.path.as_deref(), at, true)?;
            let names: Vec<String> = ["section", "content_type", "committed"]
                .iter()
                .filter(|n| n.starts_with(&prefix))
                .map(|s| s.to_string())
                .collect();
            out["facets"] = Self::facets(&items, &names)?;
            out["read_version"] = json!(at);
            out["total"] = json!(items.len());
        }
        Ok(out)
    }

    pub(super) fn grep(&mut self, input: &Value, c: tools::Grep) -> Result<Value, WbError> {
        let mut pats: Vec<String> = vec![c.pattern.clone()];
        pats.extend(c.patterns.clone().unwrap_or_default());
        if pats.iter().any(String::is_empty) {
            return Err(WbError::invalid_input(
                "workbench_grep: patterns must not be empty",
            ));
        }
        let lowered: Vec<String> = pats.iter().map(|p| p.to_lowercase()).collect();
        let inc = self.incarnation(&c.id)?;
        let digest = query_digest(input);
        let (at, offset) = match &c.cursor {
            Some(cur) => {
                let (at, off) = decode_cursor(cur, &digest)?;
                let head = self.store.head()?;
                if self.store.changed_under(&c.id, at, head)? {
                    return Err(WbError::new(
                        "cursor_stale",
                        "the workbench changed since this cursor was issued; grep again",
                    ));
                }
                (at, off)
            }
            None => (self.store.head()?, 0),
        };
        let recursive = c.recursive || c.section.is_none() && c.path.is_none();
        let mut items = self.scan(Some(&c.id), c.section, c.path.as_deref(), at, recursive)?;
        let _ = inc;
        Self::sort_items(&mut items, &[])?;
        let limit = c.limit.unwrap_or(100) as usize;
        let mut found = 0usize;
        let mut out = Vec::new();
        let mut skipped = Vec::new();
        let mut more = false;
        'files: for i in &items {
            let name = i.fields["name"].as_str().unwrap_or("");
            if c.glob.as_deref().is_some_and(|g| !glob_match(g, name)) {
                continue;
            }
            if i.row.body.size > MAX_GREP_BODY {
                skipped.push(json!({"section": i.fields["section"], "path": i.fields["path"], "why": "too_large"}));
                continue;
            }
            let bytes = self.store.read(&i.row.body, 0, i.row.body.size)?;
            let Ok(text) = String::from_utf8(bytes) else {
                skipped.push(json!({"section": i.fields["section"], "path": i.fields["path"], "why": "not_utf8"}));
                continue;
            };
            for (n, line) in text.lines().enumerate() {
                let l = line.to_lowercase();
                if lowered.iter().any(|p| l.contains(p.as_str())) {
                    if found >= offset {
                        if out.len() == limit {
                            more = true;
                            break 'files;
                        }
                        out.push(json!({"section": i.fields["section"], "path": i.fields["path"], "line": n + 1, "text": line, "generation": i.row.generation}));
                    }
                    found += 1;
                }
            }
        }
        let next = more.then(|| cursor(at, &digest, offset + limit));
        Ok(
            json!({"id": c.id, "read_version": at, "matches": out, "skipped": skipped, "next_cursor": next}),
        )
    }

    pub(super) fn find(&mut self, input: &Value, c: tools::Find) -> Result<Value, WbError> {
        let digest = query_digest(input);
        let (at, offset) = match &c.cursor {
            Some(cur) => decode_cursor(cur, &digest)?,
            None => (self.store.head()?, 0),
        };
        // The matching rows, without their manifests: a manifest is read
        // to match the pattern and dropped, and read again only for the
        // rows of the page (at most FIND_MANIFEST_BYTES of them).
        let mut rows = Vec::new();
        // Run manifests above RUN_MANIFEST_MAX_BYTES (only a person's
        // submit writes one) are not read to match the pattern: named here.
        let mut unsearched = Vec::new();
        for (id, inc) in self.workbenches(at)? {
            let rm = self
                .store
                .stat(at, &format!("{id}/metadata/run_manifest.json"))?
                .filter(|r| r.generation >= inc);
            let committed = rm.is_some();
            if c.committed.is_some_and(|want| want != committed) {
                continue;
            }
            if let Some(pat) = &c.manifest_pattern {
                let matched = match &rm {
                    Some(r) if r.body.size > super::lifecycle::RUN_MANIFEST_MAX_BYTES => {
                        unsearched.push(json!({"id": id, "manifest_size": r.body.size}));
                        false
                    }
                    Some(r) => {
                        let m = self.store.read(&r.body, 0, r.body.size)?;
                        manifest_text(&m).contains(pat.as_str())
                    }
                    None => false,
                };
                if !matched {
                    continue;
                }
            }
            rows.push((path::key([id.as_str()]), id, inc, rm));
        }
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        let limit = c.limit.unwrap_or(100) as usize;
        let total = rows.len();
        let mut page = Vec::new();
        let mut inlined = 0u64;
        let mut truncated = false;
        for (_, id, inc, rm) in rows.into_iter().skip(offset).take(limit) {
            let mut v = json!({"id": id, "incarnation": inc, "committed": rm.is_some(),
                               "commit_change": rm.as_ref().map(|r| r.generation)});
            if c.include_manifest == Some(true) {
                match &rm {
                    Some(r) if r.body.size > FIND_MANIFEST_BYTES => {
                        // Too large for any page: named, read it with
                        // workbench_read (format bytes).
                        v["manifest"] = Value::Null;
                        v["manifest_omitted"] = json!(true);
                        v["manifest_size"] = json!(r.body.size);
                    }
                    Some(r) => {
                        if inlined + r.body.size > FIND_MANIFEST_BYTES {
                            truncated = true;
                            break;
                        }
                        inlined += r.body.size;
                        let m = self.store.read(&r.body, 0, r.body.size)?;
                        v["manifest"] = serde_json::from_slice(&m).unwrap_or(Value::Null);
                    }
                    None => v["manifest"] = Value::Null,
                }
            }
            page.push(v);
        }
        let end = offset + page.len();
        let next = (end < total).then(|| cursor(at, &digest, end));
        Ok(
            json!({"read_version": at, "total": total, "workbenches": page, "next_cursor": next,
                  "truncated": truncated, "unsearched": unsearched}),
        )
    }
}

//! Typed Workbench errors: a stable code, a retryable flag and a conflict
//! class (docs/workbench.md lists every code).

use serde::Serialize;

/// What kind of conflict an error is, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConflictClass {
    /// Not a conflict: the request itself is wrong or the target absent.
    None,
    /// The target already exists (create-only put, restore destination).
    Exists,
    /// The generation (or head) the call observed moved before it published.
    Generation,
    /// A person's lock on the path refuses the write.
    Lock,
    /// The request differs from what an earlier call with the same
    /// identity stored (a commit with another identity, a restore with
    /// another source).
    Identity,
    /// A cursor's workbench revision moved (a live cursor fails closed).
    Revision,
}

/// A failed tool call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct WbError {
    /// The stable code (see [`CODES`]).
    pub code: &'static str,
    pub message: String,
    /// Whether the same call may succeed when retried unchanged.
    pub retryable: bool,
    pub conflict: ConflictClass,
    /// The jail rule an `invalid_path` breaks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<&'static str>,
}

/// Every code, with its retryable flag and conflict class.
pub const CODES: &[(&str, bool, ConflictClass)] = &[
    ("invalid_input", false, ConflictClass::None),
    ("unknown_tool", false, ConflictClass::None),
    ("invalid_id", false, ConflictClass::None),
    ("invalid_path", false, ConflictClass::None),
    ("path_not_representable", false, ConflictClass::None),
    ("reserved_path", false, ConflictClass::None),
    ("workbench_not_found", false, ConflictClass::None),
    ("workbench_dir_not_empty", false, ConflictClass::Exists),
    ("not_found", false, ConflictClass::None),
    ("is_directory", false, ConflictClass::None),
    ("already_exists", false, ConflictClass::Exists),
    ("generation_conflict", true, ConflictClass::Generation),
    ("collect_conflict", false, ConflictClass::Generation),
    ("materialize_conflict", false, ConflictClass::Generation),
    ("locked", true, ConflictClass::Lock),
    ("edit_no_match", false, ConflictClass::None),
    ("edit_ambiguous", false, ConflictClass::None),
    ("invalid_cursor", false, ConflictClass::None),
    ("cursor_stale", false, ConflictClass::Revision),
    ("snapshot_not_found", false, ConflictClass::None),
    ("commit_conflict", false, ConflictClass::Identity),
    ("not_committed", false, ConflictClass::None),
    ("snapshot_expired", false, ConflictClass::None),
    ("snapshot_retired", false, ConflictClass::None),
    ("snapshot_reaped", false, ConflictClass::None),
    ("destination_exists", false, ConflictClass::Exists),
    ("not_implemented", false, ConflictClass::None),
    ("unavailable", true, ConflictClass::None),
    ("unauthenticated", false, ConflictClass::None),
    ("forbidden", false, ConflictClass::None),
    ("not_configured", false, ConflictClass::None),
    ("agent_root_not_found", false, ConflictClass::None),
    ("storage", false, ConflictClass::None),
];

impl WbError {
    /// An error with `code` (its flags from [`CODES`]).
    pub fn new(code: &'static str, message: impl Into<String>) -> WbError {
        let (_, retryable, conflict) = CODES
            .iter()
            .find(|(c, _, _)| *c == code)
            .copied()
            .unwrap_or(("storage", false, ConflictClass::None));
        WbError {
            code,
            message: message.into(),
            retryable,
            conflict,
            rule: None,
        }
    }

    pub fn invalid_input(message: impl Into<String>) -> WbError {
        WbError::new("invalid_input", message)
    }

    pub fn invalid_id(id: &str) -> WbError {
        WbError::new(
            "invalid_id",
            format!(
                "workbench id {id:?}: an ASCII letter or digit, then letters, digits, `_` or `-`, at most 128 bytes"
            ),
        )
    }

    pub fn invalid_path(path: &str, rule: crate::path::PathRule) -> WbError {
        let mut e = WbError::new(
            "invalid_path",
            format!("path {path:?} breaks the rule {}", rule.name()),
        );
        e.rule = Some(rule.name());
        e
    }

    pub fn not_implemented(tool: &str) -> WbError {
        WbError::new(
            "not_implemented",
            format!("{tool} is not implemented by this bridge yet"),
        )
    }

    /// The error as the JSON object the CLI prints.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({ "error": self })
    }
}

//! The command-line error: a named code, one line of what happened, the
//! paths it concerns, and a hint. Printed as
//!
//! ```text
//! Error[base_mismatch]: 1 path changed on the server since you synced it
//!   art/hero.psd
//! Hint: run `scribe sync`, then `scribe resolve`, then submit again
//! ```
//!
//! Exit status 1; usage errors (clap) exit 2.

use scribe_format::ErrorCode;
use scribe_server::ClientError;
use scribe_workspace::WorkspaceError;

#[derive(Debug)]
pub struct CliError {
    pub code: String,
    pub message: String,
    pub paths: Vec<String>,
    pub hint: Option<String>,
}

pub type CliResult<T = ()> = Result<T, CliError>;

impl CliError {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> CliError {
        CliError {
            code: code.into(),
            message: message.into(),
            paths: Vec::new(),
            hint: None,
        }
    }

    pub fn hint(mut self, hint: impl Into<String>) -> CliError {
        self.hint = Some(hint.into());
        self
    }

    pub fn paths(mut self, paths: Vec<String>) -> CliError {
        self.paths = paths;
        self
    }

    pub fn print(&self) {
        eprintln!("Error[{}]: {}", self.code, self.message);
        for p in self.paths.iter().take(50) {
            eprintln!("  {p}");
        }
        if self.paths.len() > 50 {
            eprintln!("  ... and {} more", self.paths.len() - 50);
        }
        if let Some(h) = &self.hint {
            eprintln!("Hint: {h}");
        }
    }
}

/// The hint for a server refusal code.
pub fn hint_for(code: ErrorCode) -> Option<&'static str> {
    Some(match code {
        ErrorCode::BaseMismatch | ErrorCode::NotPresent => {
            "run `scribe sync`, settle the listed paths with `scribe resolve`, then submit again"
        }
        ErrorCode::LockedByOther => {
            "`scribe locks` shows who holds the lock; ask them to submit or unlock"
        }
        ErrorCode::PathCollision => {
            "two paths may not differ only in case or normalization; rename one with `scribe move`"
        }
        ErrorCode::EmptySubmission => {
            "open files with `scribe add`, `scribe edit` or `scribe delete` first"
        }
        ErrorCode::NotFound => "check the name with `scribe repo list --server URL`",
        ErrorCode::AlreadyExists => "pick another name",
        ErrorCode::Busy => "another scribe process is using it; wait for it to finish",
        ErrorCode::InvalidPath => "`scribe debug path PATH` explains which rule a path breaks",
        ErrorCode::WorkspaceRetired => "create a new workspace with `scribe workspace create`",
        _ => return None,
    })
}

impl From<ClientError> for CliError {
    fn from(e: ClientError) -> CliError {
        let code = e.code();
        let mut err = CliError::new(code.name(), e.to_string()).paths(e.paths().to_vec());
        if let ClientError::Io { .. } = e {
            err = err.hint("is the server running and reachable at the workspace's URL?");
        } else if let Some(h) = hint_for(code) {
            err = err.hint(h);
        }
        err
    }
}

impl From<WorkspaceError> for CliError {
    fn from(e: WorkspaceError) -> CliError {
        if let WorkspaceError::Refused { code, hint, .. } = &e {
            return CliError::new(*code, e.to_string()).hint(*hint);
        }
        let (code, hint) = match &e {
            WorkspaceError::NotAWorkspace { .. } => (
                "not_a_workspace",
                Some("run this inside a workspace, or create one with `scribe workspace create DIR --server URL --repo NAME`"),
            ),
            WorkspaceError::AlreadyAWorkspace { .. } => ("already_exists", Some("choose an empty or new directory")),
            WorkspaceError::Busy { .. } => ("busy", Some("wait for the other scribe command to finish")),
            WorkspaceError::JournalInProgress { .. } | WorkspaceError::JournalUnfinished { .. } => {
                ("sync_unfinished", Some("run `scribe sync` to complete it"))
            }
            WorkspaceError::UnsupportedSchema { .. } => ("unsupported_version", None),
            WorkspaceError::Corrupt { .. } => ("corrupt", None),
            WorkspaceError::Materialize { .. } => ("refused", None),
            _ => ("internal", None),
        };
        let mut err = CliError::new(code, e.to_string());
        if let Some(h) = hint {
            err = err.hint(h);
        }
        err
    }
}

impl From<scribe_objects::StoreError> for CliError {
    fn from(e: scribe_objects::StoreError) -> CliError {
        CliError::new("internal", format!("workspace cache: {e}"))
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> CliError {
        CliError::new("io", e.to_string())
    }
}

impl From<scribe_format::FormatError> for CliError {
    fn from(e: scribe_format::FormatError) -> CliError {
        CliError::new(e.code().name(), e.to_string())
    }
}

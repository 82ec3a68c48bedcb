//! The command-line error: a registered code, one line of what happened,
//! the paths it concerns, the causes, and a hint. Printed as
//!
//! ```text
//! Error[base_mismatch]: 1 path changed on the server since you synced it
//!   art/hero.psd
//! Caused by: ...
//! Hint: run `scribe sync`, then `scribe resolve`, then submit again
//! ```
//!
//! With `--json` the same error is one JSON object on stdout. The exit
//! status comes from the code's kind: 2 for usage, 1 for everything else.
//! Hints live here: chosen from what the error concerns (a missing change,
//! a missing repository, a path this workspace does not have: the
//! [`Concern`] its raiser set), else from its code. A command that knows
//! better sets its own.

use scribe_format::{Concern, ErrorCode, ErrorKind};

use crate::ui::Json;

#[derive(Debug)]
pub struct CliError {
    pub code: ErrorCode,
    pub message: String,
    pub paths: Vec<String>,
    pub causes: Vec<String>,
    pub hint: Option<String>,
    /// What the error is about, where its raiser knew (boxed: an error
    /// travels in every `Result` of the binary).
    pub concern: Option<Box<Concern>>,
    /// stdout was closed by its reader: not a failure.
    pub closed_pipe: bool,
}

pub type CliResult<T = ()> = Result<T, CliError>;

impl CliError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> CliError {
        CliError {
            code,
            message: message.into(),
            paths: Vec::new(),
            causes: Vec::new(),
            hint: hint_for(code).map(str::to_string),
            concern: None,
            closed_pipe: false,
        }
    }

    /// The same error about `concern`, with the hint that fits it.
    pub fn concerning(mut self, concern: Concern) -> CliError {
        if let Some(h) = hint_about(&concern) {
            self.hint = Some(h);
        }
        self.concern = Some(Box::new(concern));
        self
    }

    pub fn hint(mut self, hint: impl Into<String>) -> CliError {
        self.hint = Some(hint.into());
        self
    }

    pub fn paths(mut self, paths: Vec<String>) -> CliError {
        self.paths = paths;
        self
    }

    /// A failed write of data to stdout.
    pub fn from_stdout(e: std::io::Error) -> CliError {
        let mut err = CliError::new(ErrorCode::Io, format!("writing to stdout: {e}"));
        err.closed_pipe = e.kind() == std::io::ErrorKind::BrokenPipe;
        err
    }

    /// The exit status of this error.
    pub fn exit_status(&self) -> u8 {
        if self.closed_pipe {
            return 0;
        }
        match self.code.kind() {
            ErrorKind::Usage => 2,
            ErrorKind::Refused | ErrorKind::Failed => 1,
        }
    }

    /// Print on stderr (text) or stdout (`json`).
    pub fn print(&self, json: bool) {
        use std::io::Write;
        if self.closed_pipe {
            return;
        }
        if json {
            let v = Json::obj(vec![(
                "error",
                Json::obj(vec![
                    ("code", Json::str(self.code.name())),
                    ("message", Json::str(&self.message)),
                    (
                        "paths",
                        Json::Arr(self.paths.iter().map(Json::str).collect()),
                    ),
                    (
                        "causes",
                        Json::Arr(self.causes.iter().map(Json::str).collect()),
                    ),
                    ("hint", self.hint.as_ref().map_or(Json::Null, Json::str)),
                ]),
            )]);
            let _ = writeln!(std::io::stdout(), "{v}");
            return;
        }
        use crate::ui::printable;
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "Error[{}]: {}", self.code, printable(&self.message));
        for p in self.paths.iter().take(50) {
            let _ = writeln!(err, "  {}", printable(p));
        }
        if self.paths.len() > 50 {
            let _ = writeln!(err, "  ... and {} more", self.paths.len() - 50);
        }
        for c in &self.causes {
            let _ = writeln!(err, "Caused by: {}", printable(c));
        }
        if let Some(h) = &self.hint {
            let _ = writeln!(err, "Hint: {h}");
        }
    }
}

/// What to do next after a failure about `concern` (before the code's
/// general advice).
pub fn hint_about(concern: &Concern) -> Option<String> {
    Some(match concern {
        Concern::Change { head: Some(0), .. } => {
            "nothing is submitted yet: the first submit makes change 1".into()
        }
        Concern::Change {
            head: Some(head), ..
        } => format!("the head is change {head}; `scribe log` lists the changes"),
        Concern::Change { head: None, .. } => "`scribe log` lists the changes".into(),
        Concern::Repository => "`scribe repo list --server URL` lists the repositories; `scribe repo create NAME --server URL` makes one"
            .into(),
        Concern::RepositoryRenamed { url, .. } => format!(
            "run `scribe workspace set-server {url}` once in this workspace: it follows the \
             rename (same repository: its history, your opened files and this workspace's \
             registration stay)"
        ),
        Concern::RepositoryReplaced => "nothing was asked of that other repository and this \
                                        workspace's files are as they were: `scribe info` shows \
                                        this workspace's server and repository id; ask the \
                                        server's operator where that repository went (a \
                                        deleted one is under the data root's deleted/)"
            .into(),
        Concern::DataRoot => "`scribe repo create NAME --server PATH` makes a data root there, with its first repository"
            .into(),
        Concern::Branch => "this server serves the main branch: leave out `--branch`".into(),
        Concern::NotInWorkspace => "`scribe status` lists the files this workspace tracks and \
                                    has opened; `scribe add` opens a new file"
            .into(),
        Concern::MissingFromDisk => "the file is not on disk: put it back, or open its deletion \
                                     with `scribe delete` (`scribe status` lists what is missing)"
            .into(),
        Concern::NotOpened => "the path is not opened: `scribe status` lists what is".into(),
        Concern::NothingToResolve => "`scribe status` lists the files needing resolve".into(),
        Concern::NotLocked => "`scribe locks` lists the locks and who holds them".into(),
        Concern::NoPendingMove => "`scribe status` lists the pending moves".into(),
        Concern::DiskFull => {
            "this machine's disk is full: free space on it, then run the command again".into()
        }
        Concern::RequestRefused => "the server could not read what this client sent; nothing \
                                    was changed. Use a scribe build that matches the server \
                                    (`scribe --version` here; `scribe info` in a workspace shows \
                                    the server's); if they match, report it"
            .into(),
        _ => return None,
    })
}

/// What to do next after a failure with `code`.
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
        ErrorCode::AlreadyExists => "pick another name, or another directory",
        ErrorCode::Busy => "another scribe process is using it; wait for it to finish",
        ErrorCode::ServerBusy => "the server is at its limit for connections or upload memory right now; retry shortly (an interrupted submission continues where it stopped)",
        ErrorCode::WorkspaceUnregistered => "the server holds no registration for this workspace (was it restored from an older copy?); create a new workspace with `scribe workspace create`",
        ErrorCode::InvalidPath => "`scribe debug path PATH` explains which rule a path breaks",
        ErrorCode::NotInView => "`scribe view show` lists this workspace's view; `scribe view set PREFIX...` widens it",
        ErrorCode::RepositoryRetired => "this repository is kept read-only: `scribe sync`, \
                                          `log` and `print` still work and your opened files \
                                          stay as they are here; ask whom the message names to \
                                          make it writable again",
        ErrorCode::WorkspaceRetired => "this workspace was retired: `scribe workspace recreate` in its directory makes a new one in place, keeping your local edits and the recovery area",
        ErrorCode::NotAWorkspace => "run this inside a workspace, or create one with `scribe workspace create DIR --server URL --repo NAME`",
        ErrorCode::Unreachable => "is the server running and reachable at the workspace's URL?",
        ErrorCode::SyncUnfinished => "run `scribe sync` to complete it",
        ErrorCode::SubmitPending => {
            "run `scribe submit` to complete it (it replays the same operation)"
        }
        ErrorCode::NeedsResolve | ErrorCode::StaleBase => {
            "settle them with `scribe resolve PATH --ours|--theirs|--merged FILE`, or `scribe revert` them"
        }
        ErrorCode::IncarnationChanged => "run `scribe sync` first (your opened files are kept)",
        ErrorCode::ChangedWhileSubmitting => {
            "wait until they are saved, then run `scribe submit` again"
        }
        ErrorCode::SubmitWithdrawn => "your files are untouched and still opened: run `scribe submit` again to submit their current contents (the withdrawn record is kept in the recovery area)",
        ErrorCode::SubmitRetired => "your opened files are untouched: run `scribe sync`, settle what it lists with `scribe resolve`, then submit again",
        ErrorCode::ViewChangeBlocked => {
            "submit or revert those paths, or keep them in the view (`scribe view set PREFIX... PATH`), then run `scribe view set` again (a view change already under way is also finished by `scribe sync`)"
        }
        ErrorCode::MoveUnfinished => {
            "run `scribe move --resume` to finish it or `scribe move --abort` to undo it"
        }
        ErrorCode::MoveDependent => "abort the later move first (`scribe status` lists pending moves)",
        ErrorCode::MoveReserved => "abort that move (`scribe move --abort`) or submit it first",
        ErrorCode::WorkspaceStateDamaged => "your working files were not changed. Move the workspace's `.scribe/_state` out of the workspace (keep its `recovery/`: files Scribe set aside), then in the workspace root run `scribe workspace create . --server URL --repo NAME` (files that differ from the server are kept and listed for resolve) and reopen your work with `scribe reconcile`",
        ErrorCode::BeyondSymlink => "Scribe never reads, writes or deletes through a symbolic link; replace the link with a real directory (`scribe status` lists the paths beyond it)",
        ErrorCode::MoveRefused => "`scribe status` shows pending moves; `scribe move --help` the rules",
        ErrorCode::MissingObjects | ErrorCode::Internal => {
            "rerun the command; an interrupted submission is retried with the same id"
        }
        ErrorCode::PathConflict => "a file cannot sit where a folder of files is, or under another file: rename one of the listed paths with `scribe move`, or delete the file in the same submit",
        ErrorCode::InvalidManifest => "the server refused what this client sent for the listed files; nothing was recorded. Run `scribe submit` again; if it repeats, report it with `scribe --version`",
        ErrorCode::Unauthenticated => "sign in with `scribe login` (CI and agents: point SCRIBE_CREDENTIAL at a credential file)",
        ErrorCode::LoginThrottled => "too many failed sign-ins for this user or address: wait the time given, then try again",
        ErrorCode::StorageFull => "the server's disk is full: tell its administrator; your work is safe here, and running the same command again once there is room goes on where it stopped",
        ErrorCode::UnsupportedVersion => "use a scribe build that matches the server or workspace",
        ErrorCode::Malformed => "the server, or something between it and you, sent what this client refuses; nothing was changed (use scribes:// across untrusted networks)",
        _ => return None,
    })
}

fn causes(mut e: Option<&(dyn std::error::Error + 'static)>) -> Vec<String> {
    let mut out = Vec::new();
    while let Some(c) = e {
        out.push(c.to_string());
        e = c.source();
    }
    out
}

impl From<scribe_client::Error> for CliError {
    fn from(e: scribe_client::Error) -> CliError {
        let mut err = CliError::new(e.code(), e.message()).paths(e.paths().to_vec());
        err.causes = causes(std::error::Error::source(&e));
        match e.concern() {
            Some(c) => err.concerning(c.clone()),
            None => err,
        }
    }
}

impl From<scribe_client::ClientError> for CliError {
    fn from(e: scribe_client::ClientError) -> CliError {
        scribe_client::Error::from(e).into()
    }
}

impl From<scribe_workspace::WorkspaceError> for CliError {
    fn from(e: scribe_workspace::WorkspaceError) -> CliError {
        scribe_client::Error::from(e).into()
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> CliError {
        scribe_client::Error::from(e).into()
    }
}

impl From<scribe_format::FormatError> for CliError {
    fn from(e: scribe_format::FormatError) -> CliError {
        scribe_client::Error::from(e).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `malformed` from the server (it could not read this client's
    /// request) and `malformed` found here (the server's reply refused)
    /// point opposite ways.
    #[test]
    fn a_malformed_refusal_by_the_server_is_not_blamed_on_the_server() {
        let refused: CliError = scribe_client::ClientError::Server {
            code: ErrorCode::Malformed,
            message: "request: cannot decode".into(),
            paths: vec![],
        }
        .into();
        let hint = refused.hint.unwrap();
        assert!(
            hint.contains("could not read what this client sent"),
            "{hint}"
        );
        let found: CliError =
            scribe_client::ClientError::Protocol("a reply that does not decode".into()).into();
        assert_eq!(found.code, ErrorCode::Malformed);
        let hint = found.hint.unwrap();
        assert!(hint.contains("sent what this client refuses"), "{hint}");
    }
}

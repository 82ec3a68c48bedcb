//! Fixtures: a temporary auth directory with its pepper and witness beside it.

use std::path::PathBuf;

use scribe_auth::audit::AuditArg;
use scribe_auth::{AdminRequest, AuthDir, Id, InitOptions, InitReport, Password};

pub const ADMIN_PASSWORD: &str = "correct horse battery staple";
pub const NOW: u64 = 1_800_000_000_000;

pub struct Fixture {
    pub tmp: tempfile::TempDir,
    pub data: PathBuf,
    pub pepper: PathBuf,
    pub witness: PathBuf,
}

impl Fixture {
    pub fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_owned();
        Fixture {
            data: root.join("auth"),
            pepper: root.join("pepper"),
            witness: root.join("witness"),
            tmp,
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    pub fn init(&self) -> (AuthDir, InitReport) {
        AuthDir::init(InitOptions {
            data: self.data.clone(),
            pepper_file: self.pepper.clone(),
            witness_file: self.witness.clone(),
            trust_domain: "studio.example".into(),
            admin_username: "admin".into(),
            admin_password: Some(Password::new(ADMIN_PASSWORD.into()).unwrap()),
            now_ms: NOW,
        })
        .unwrap()
    }

    pub fn open(&self) -> Result<AuthDir, scribe_auth::AuthError> {
        AuthDir::open(&self.data, &self.pepper, &self.witness)
    }
}

/// A request by `actor` with a fresh operation id.
pub fn request<'a>(actor: Id, command: &'a str, arguments: &'a [AuditArg]) -> AdminRequest<'a> {
    AdminRequest {
        actor,
        operation: Id::random(),
        intent: [7; 32],
        command,
        arguments,
        now_ms: NOW,
    }
}

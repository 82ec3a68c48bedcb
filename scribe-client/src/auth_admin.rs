//! The administrative verbs of the auth service (`docs/auth.md#administration`):
//! one generic call for every verb, and the automation credentials whose key
//! is made here and never leaves this machine.

use std::path::Path;

use p256::pkcs8::{EncodePrivateKey, EncodePublicKey, LineEnding};
use scribe_format::sau2::{Sau2Request, Sau2Result};

use crate::auth::{
    generate_key, random_id, write_private, AuthClientError, AuthService, Credential,
};

type Result<T> = std::result::Result<T, AuthClientError>;

/// A credential made by `automation-create` or `automation-derive`.
#[derive(Clone, Debug)]
pub struct AutomationOutcome {
    pub credential_id: String,
    pub username: String,
    pub kind: String,
    pub expires_ms: u64,
    pub credential: Credential,
}

/// The alphabet of generated passwords (32 letters: 5 bits each).
const PASSWORD_ALPHABET: &[u8; 32] = b"abcdefghjkmnpqrstuvwxyz23456789-";

/// A generated password: 24 characters of a 32-letter alphabet (120 bits),
/// from the OS random source.
pub fn generate_password() -> Result<String> {
    let mut raw = [0u8; 24];
    getrandom::fill(&mut raw).map_err(|e| AuthClientError::Invalid(e.to_string()))?;
    let pw = raw
        .iter()
        .map(|b| char::from(PASSWORD_ALPHABET[usize::from(b & 31)]))
        .collect();
    raw.fill(0);
    Ok(pw)
}

/// Write a credential file (certificate then PKCS#8 key, the format of
/// `credential.pem`), mode 0600 on Unix.
pub fn write_credential(path: &Path, credential: &Credential) -> Result<()> {
    write_private(
        path,
        &format!(
            "{}{}",
            credential.certificate_pem, credential.private_key_pem
        ),
    )
}

fn hex_lower(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl AuthService {
    /// One administrative verb with `operation` as its id (a retry with the
    /// same id and arguments returns the recorded outcome): the rows of the
    /// answer, or the refusal.
    pub fn admin_with_operation(
        &self,
        credential: &Credential,
        operation: [u8; 16],
        verb: &str,
        arguments: Vec<String>,
    ) -> Result<Vec<Vec<String>>> {
        let req = Sau2Request {
            operation,
            verb: verb.to_owned(),
            arguments,
        };
        match self.call(Some(credential), &req)? {
            Sau2Result::Rows(rows) => Ok(rows),
            Sau2Result::Error { code, message } => Err(AuthClientError::Refused { code, message }),
        }
    }

    /// One administrative verb with a new operation id.
    pub fn admin(
        &self,
        credential: &Credential,
        verb: &str,
        arguments: &[&str],
    ) -> Result<Vec<Vec<String>>> {
        self.admin_with_operation(
            credential,
            random_id()?,
            verb,
            arguments.iter().map(|a| (*a).to_owned()).collect(),
        )
    }

    fn automation(
        &self,
        credential: &Credential,
        verb: &str,
        subject: &str,
        kind: &str,
        expires_ms: u64,
        label: &str,
    ) -> Result<AutomationOutcome> {
        let key = generate_key()?;
        let spki = key
            .public_key()
            .to_public_key_der()
            .map_err(|e| AuthClientError::Invalid(e.to_string()))?;
        let private_key_pem = key
            .to_pkcs8_pem(LineEnding::LF)
            .map_err(|e| AuthClientError::Invalid(e.to_string()))?
            .to_string();
        let rows = self.admin_with_operation(
            credential,
            random_id()?,
            verb,
            vec![
                subject.to_owned(),
                kind.to_owned(),
                expires_ms.to_string(),
                label.to_owned(),
                hex_lower(spki.as_bytes()),
            ],
        )?;
        let bad = || AuthClientError::Invalid(format!("{verb} answer"));
        let [credential_id, username, kind, expires, certificate_pem] =
            <[String; 5]>::try_from(rows.into_iter().next().ok_or_else(bad)?).map_err(|_| bad())?;
        Ok(AutomationOutcome {
            credential_id,
            username,
            kind,
            expires_ms: expires.parse().map_err(|_| bad())?,
            credential: Credential {
                certificate_pem,
                private_key_pem,
            },
        })
    }

    /// `automation-create`: a new automation credential of `kind` for
    /// `username`, its P-256 key made here.
    pub fn automation_create(
        &self,
        credential: &Credential,
        username: &str,
        kind: &str,
        expires_ms: u64,
        label: &str,
    ) -> Result<AutomationOutcome> {
        self.automation(
            credential,
            "automation-create",
            username,
            kind,
            expires_ms,
            label,
        )
    }

    /// `automation-derive`: a credential from the automation credential
    /// `parent`, of a kind at most the parent's and an expiry no later.
    pub fn automation_derive(
        &self,
        credential: &Credential,
        parent: &str,
        kind: &str,
        expires_ms: u64,
        label: &str,
    ) -> Result<AutomationOutcome> {
        self.automation(
            credential,
            "automation-derive",
            parent,
            kind,
            expires_ms,
            label,
        )
    }
}

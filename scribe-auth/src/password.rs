//! Passwords: argon2id with the pepper as the argon2 secret.
//!
//! Parameters (`docs/auth.md#passwords`): argon2id version 0x13, memory
//! 19,456 KiB, 2 passes, 1 lane, a 16-byte random salt, a 32-byte tag,
//! stored as a PHC string (`$argon2id$v=19$m=19456,t=2,p=1$salt$tag`).
//! The pepper never appears in the PHC string. Verification recomputes the
//! tag with the parameters of the stored string and compares in constant
//! time (the argon2 crate's `verify_password`).

use std::fmt;
use std::path::Path;

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};

use crate::error::AuthError;

/// argon2 memory cost in KiB.
pub const MEMORY_KIB: u32 = 19_456;
/// argon2 passes.
pub const PASSES: u32 = 2;
/// argon2 lanes.
pub const LANES: u32 = 1;
/// Tag length in bytes.
pub const TAG_BYTES: usize = 32;
/// Salt length in bytes.
pub const SALT_BYTES: usize = 16;
/// Shortest accepted password, in bytes.
pub const MIN_PASSWORD_BYTES: usize = 8;
/// Longest accepted password, in bytes.
pub const MAX_PASSWORD_BYTES: usize = 1024;
/// Length of a generated password (characters of a 32-letter alphabet: 120 bits).
pub const GENERATED_LEN: usize = 24;

/// A plaintext password. It has no `Display`, `AsRef<str>` or `Deref`, its
/// `Debug` is redacted, and it is wiped when dropped; an audit argument
/// ([`crate::audit::AuditArg`]) cannot be made from it.
pub struct Password(String);

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(<redacted>)")
    }
}

impl Drop for Password {
    fn drop(&mut self) {
        let mut bytes = std::mem::take(&mut self.0).into_bytes();
        bytes.fill(0);
        std::hint::black_box(&bytes);
    }
}

impl Password {
    /// A password given by a person: 8 to 1,024 bytes, no control characters.
    pub fn new(text: String) -> Result<Password, AuthError> {
        let p = Password(text);
        if p.0.len() < MIN_PASSWORD_BYTES || p.0.len() > MAX_PASSWORD_BYTES {
            return Err(AuthError::InvalidPassword(format!(
                "must be {MIN_PASSWORD_BYTES} to {MAX_PASSWORD_BYTES} bytes"
            )));
        }
        if p.0.chars().any(char::is_control) {
            return Err(AuthError::InvalidPassword(
                "must not contain control characters".into(),
            ));
        }
        Ok(p)
    }

    /// Read a password file: its UTF-8 text without one final newline.
    pub fn from_file(path: &Path) -> Result<Password, AuthError> {
        let bytes = std::fs::read(path).map_err(|e| AuthError::io(path, e))?;
        let mut text = String::from_utf8(bytes)
            .map_err(|_| AuthError::InvalidPassword(format!("{} is not UTF-8", path.display())))?;
        if text.ends_with('\n') {
            text.pop();
            if text.ends_with('\r') {
                text.pop();
            }
        }
        Password::new(text)
    }

    /// A fresh random password of [`GENERATED_LEN`] characters.
    pub fn generate() -> Password {
        const ALPHABET: &[u8; 32] = b"abcdefghjkmnpqrstuvwxyz23456789-";
        let mut raw = [0u8; GENERATED_LEN];
        getrandom::fill(&mut raw).expect("the OS random source is available");
        let text = raw
            .iter()
            .map(|b| ALPHABET[usize::from(b & 31)] as char)
            .collect();
        raw.fill(0);
        Password(text)
    }

    /// The plaintext, to show a generated password once to the person who
    /// ran `init`. Never pass it anywhere else.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

fn hasher(pepper: &[u8]) -> Result<Argon2<'_>, AuthError> {
    let params = Params::new(MEMORY_KIB, PASSES, LANES, Some(TAG_BYTES))
        .map_err(|e| AuthError::Hashing(e.to_string()))?;
    Argon2::new_with_secret(pepper, Algorithm::Argon2id, Version::V0x13, params)
        .map_err(|e| AuthError::Hashing(e.to_string()))
}

/// The PHC string of `password` with a fresh salt.
pub fn hash(pepper: &[u8], password: &Password) -> Result<String, AuthError> {
    let mut salt = [0u8; SALT_BYTES];
    getrandom::fill(&mut salt).map_err(|e| AuthError::Hashing(e.to_string()))?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| AuthError::Hashing(e.to_string()))?;
    Ok(hasher(pepper)?
        .hash_password(password.bytes(), &salt)
        .map_err(|e| AuthError::Hashing(e.to_string()))?
        .to_string())
}

/// Whether `password` matches the stored PHC string (constant-time compare).
pub fn verify(pepper: &[u8], password: &Password, phc: &str) -> Result<bool, AuthError> {
    let parsed = PasswordHash::new(phc).map_err(|e| AuthError::Hashing(e.to_string()))?;
    if parsed.algorithm.as_str() != "argon2id" {
        return Err(AuthError::Hashing(format!(
            "stored hash uses {}, not argon2id",
            parsed.algorithm
        )));
    }
    match hasher(pepper)?.verify_password(password.bytes(), &parsed) {
        Ok(()) => Ok(true),
        Err(argon2::password_hash::Error::Password) => Ok(false),
        Err(e) => Err(AuthError::Hashing(e.to_string())),
    }
}

/// Spend the same work as [`verify`] for a user that does not exist, so
/// that timing does not tell unknown users from wrong passwords. Always false.
pub fn verify_unknown_user(pepper: &[u8], password: &Password) -> bool {
    let _ = hash(pepper, password);
    false
}

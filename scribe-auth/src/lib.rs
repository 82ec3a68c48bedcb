//! The Scribe auth service's data: the auth data directory of
//! specification section 7.3 (schema 4), to the byte.
//!
//! This is the foundation the network service, TLS login, the server
//! integration and the CLI build on (`docs/auth.md`):
//!
//! | module | what |
//! |---|---|
//! | [`dir`] | [`AuthDir`]: `init`, startup checks, administrative transactions, expiry sweep, `backup`, `restore`, `ca-cert` |
//! | [`files`] | `SCRIBE_AUTH` marker, `LOCK`, pepper file, revision witness |
//! | [`rows`] | every key family of `auth_v1` with a strict typed row |
//! | [`ids`] | 128-bit ids, key ids (BLAKE3 of SubjectPublicKeyInfo DER) |
//! | [`password`] | argon2id with the pepper |
//! | [`ca`] | the p256 certificate authorities (`ca/credential`, `ca/access`) |
//! | [`admin`] | the administrative verbs of the service (users, grants, namespaces, visibility, credentials, automation, audit) and the expiry sweeper |
//! | [`servers`] | storage servers: `server-register`, `resolve`, `revision` |
//! | [`audit`] | audit arguments that can never hold a password |
//! | [`error`] | [`AuthError`], each mapped to a registry code |

pub mod admin;
pub mod audit;
pub mod ca;
pub mod dir;
pub mod error;
pub mod files;
pub mod ids;
pub mod password;
pub mod rows;
pub mod servers;
pub mod service;

pub use dir::{AdminError, AdminRequest, AdminTxn, AuthDir, InitOptions, InitReport, Refusal};
pub use error::AuthError;
pub use ids::{Id, KeyId};
pub use password::Password;

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

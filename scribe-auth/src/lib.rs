//! The Scribe auth service.
//!
//! This crate will own: users, passwords (argon2id with pepper), the
//! certificate authority, credentials (p256), grants and the audit log of
//! the auth data directory (specification section 7.3).

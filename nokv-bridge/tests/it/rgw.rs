//! Configurations for the real S3 server of the testkit's `rgw.rs`
//! (included here by path), each under a fresh random key prefix.

use std::time::Duration;

use nokv_bridge::tier::S3Config;

#[path = "../../../scribe-client/testkit/src/rgw.rs"]
mod server;

pub use server::rgw;

/// A configuration for `endpoint` (the server itself or a proxy in front
/// of it) under a fresh random prefix.
pub fn config_via(endpoint: &str) -> S3Config {
    let r = rgw();
    let mut salt = [0u8; 8];
    getrandom::fill(&mut salt).expect("random prefix");
    S3Config {
        bucket: r.bucket.clone(),
        prefix: format!("tests/{}", hex::encode(salt)),
        endpoint: Some(endpoint.to_string()),
        region: "us-east-1".into(),
        access_key: Some(r.access_key.clone()),
        secret_key: Some(r.secret_key.clone()),
        timeout: Duration::from_secs(10),
        connect_timeout: Duration::from_secs(2),
        retries: 3,
    }
}

/// A configuration for the real server under a fresh random prefix.
pub fn config() -> S3Config {
    config_via(&rgw().endpoint)
}

/// `cfg` (its prefix) against the real server instead of a proxy.
pub fn config_like(cfg: &S3Config) -> S3Config {
    S3Config {
        endpoint: Some(rgw().endpoint.clone()),
        ..cfg.clone()
    }
}

//! A real S3-compatible server for the tests: Ceph's radosgw. Shared by
//! the tests of scribe-server (through the testkit) and of nokv-bridge
//! (which includes this file: it depends on nothing of the testkit).
//!
//! `SCRIBE_TEST_S3_ENDPOINT` (with `SCRIBE_TEST_S3_BUCKET`,
//! `SCRIBE_TEST_S3_ACCESS_KEY`, `SCRIBE_TEST_S3_SECRET_KEY`; defaults
//! `test`, `AKEXAMPLE`, `SKEXAMPLE`) names a running one (`.ci/run` starts
//! it). Without it, the tests start radosgw themselves with
//! `.ci/start-rgw.sh` when the Debian packages are installed (once per
//! machine, under a lock; it keeps running: `CEPH_DIR=<dir>
//! .ci/stop-rgw.sh` stops it), and fail with what to install otherwise.
//! Every test works under a fresh random prefix, so tests and runs never
//! see each other's keys.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

pub struct Rgw {
    pub endpoint: String,
    pub bucket: String,
    pub access_key: String,
    pub secret_key: String,
}

fn env(k: &str, default: &str) -> String {
    std::env::var(k)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_string())
}

fn answers(addr: &str) -> bool {
    addr.parse()
        .ok()
        .and_then(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_millis(300)).ok())
        .is_some()
}

fn start_local() -> String {
    const ADDR: &str = "127.0.0.1:7480";
    if answers(ADDR) {
        return format!("http://{ADDR}");
    }
    let script = repo_root().join(".ci/start-rgw.sh");
    let have = std::process::Command::new("sh")
        .args([
            "-c",
            "command -v radosgw && command -v ceph-mon && command -v ceph-osd",
        ])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        have,
        "the S3 tier tests need a real S3-compatible server: install radosgw, ceph-mon and \
         ceph-osd (apt-get install -y --no-install-recommends radosgw ceph-mon ceph-osd curl \
         python3; `.ci/run` does) or set SCRIBE_TEST_S3_ENDPOINT to a running one"
    );
    // One starter per machine: the others wait on the lock, then find it up.
    let lock_path = std::env::temp_dir().join("scribe-test-rgw.lock");
    let lock = std::fs::File::create(&lock_path).expect("rgw lock file");
    lock.lock().expect("rgw lock");
    if !answers(ADDR) {
        let dir = std::env::temp_dir().join("scribe-test-rgw");
        let out = std::process::Command::new("bash")
            .arg(&script)
            .env("CEPH_DIR", &dir)
            .output()
            .expect("run .ci/start-rgw.sh");
        assert!(
            out.status.success() && answers(ADDR),
            "radosgw did not start: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    drop(lock);
    format!("http://{ADDR}")
}

pub fn rgw() -> &'static Rgw {
    static RGW: OnceLock<Rgw> = OnceLock::new();
    RGW.get_or_init(|| {
        let endpoint = match std::env::var("SCRIBE_TEST_S3_ENDPOINT") {
            Ok(e) if !e.is_empty() => e,
            _ => start_local(),
        };
        Rgw {
            endpoint,
            bucket: env("SCRIBE_TEST_S3_BUCKET", "test"),
            access_key: env("SCRIBE_TEST_S3_ACCESS_KEY", "AKEXAMPLE"),
            secret_key: env("SCRIBE_TEST_S3_SECRET_KEY", "SKEXAMPLE"),
        }
    })
}

/// The repository's top directory (where `.ci/` is).
fn repo_root() -> PathBuf {
    let mut d: &Path = Path::new(env!("CARGO_MANIFEST_DIR"));
    while !d.join(".ci/start-rgw.sh").exists() {
        d = d
            .parent()
            .expect("a directory holding .ci/start-rgw.sh above this crate");
    }
    d.to_owned()
}

//! A hermetic environment: a data root served either by an in-process
//! `scribe_server` listener on 127.0.0.1 (TCP transport) or opened by each
//! `scribe` process itself (path transport), a temporary HOME, and helpers
//! to drive the `scribe` binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use scribe_server::{ListenOptions, ServerHandle, Service};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// An in-process `scribe_server` listener on 127.0.0.1.
    Tcp,
    /// A data root path: each `scribe` process serves it in-process.
    Path,
    /// The real `scribe-server serve` binary on 127.0.0.1.
    Binary,
    /// The in-process listener over TLS (`scribes://localhost:PORT`),
    /// trusted through `SCRIBE_CA_FILE`.
    Tls,
}

/// A CA and a server certificate for localhost/127.0.0.1 in `dir`.
fn make_pki(dir: &Path) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, SanType};
    let ca_key = KeyPair::generate().expect("key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "scribe client test CA");
    let ca_cert = ca.self_signed(&ca_key).expect("CA");
    let key = KeyPair::generate().expect("key");
    let mut leaf = CertificateParams::new(vec!["localhost".to_string()]).expect("params");
    leaf.subject_alt_names
        .push(SanType::IpAddress(std::net::IpAddr::from([127, 0, 0, 1])));
    let cert = leaf.signed_by(&key, &ca_cert, &ca_key).expect("leaf");
    std::fs::write(dir.join("ca.pem"), ca_cert.pem()).expect("write");
    std::fs::write(dir.join("server.pem"), cert.pem()).expect("write");
    std::fs::write(dir.join("server.key"), key.serialize_pem()).expect("write");
}

/// A spawned `scribe-server` process, killed on drop.
struct ServerProcess(std::process::Child);

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `target/debug/scribe-server`, brought up to date once per test run
/// (`CARGO_BIN_EXE_*` exists only for the crate's own binaries, and a
/// dev-dependency builds only the library).
pub fn server_binary() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("test binary path");
        // target/debug/deps/main-xxxx -> target/debug/scribe-server
        let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
        let bin = dir.join(format!("scribe-server{}", std::env::consts::EXE_SUFFIX));
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let built = Command::new(cargo)
            .args([
                "build",
                "-q",
                "-p",
                "scribe-server",
                "--bin",
                "scribe-server",
            ])
            .status()
            .is_ok_and(|s| s.success());
        assert!(built || bin.exists(), "building scribe-server failed");
        assert!(bin.exists(), "{} is missing", bin.display());
        bin
    })
    .clone()
}

fn spawn_server(root: &Path, runtime: &Path) -> (ServerProcess, String) {
    let bin = server_binary();
    let st = Command::new(&bin)
        .args(["init", "--data"])
        .arg(root)
        .output()
        .expect("scribe-server init");
    assert!(
        st.status.success(),
        "init: {}",
        String::from_utf8_lossy(&st.stderr)
    );
    let child = Command::new(&bin)
        .args(["serve", "--listen", "127.0.0.1:0", "--data"])
        .arg(root)
        .arg("--runtime-dir")
        .arg(runtime)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("scribe-server serve");
    let proc = ServerProcess(child);
    let listen = runtime.join("listen");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if let Ok(s) = std::fs::read_to_string(&listen) {
            if s.ends_with('\n') {
                return (proc, format!("scribe://{}", s.trim()));
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "scribe-server did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

pub struct Env {
    pub tmp: tempfile::TempDir,
    pub url: String,
    _server: Option<ServerHandle>,
    _process: Option<ServerProcess>,
}

/// What one `scribe` run printed.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub killed: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn ok(&self) -> &Self {
        assert_eq!(
            self.code,
            Some(0),
            "scribe failed:\n{}\n{}",
            self.stdout,
            self.stderr
        );
        self
    }
}

fn to_run(out: Output) -> Run {
    #[cfg(unix)]
    let killed = {
        use std::os::unix::process::ExitStatusExt;
        out.status.signal().is_some()
    };
    #[cfg(not(unix))]
    let killed = out.status.code().is_none();
    Run {
        code: out.status.code(),
        killed,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

impl Env {
    /// An in-process listener on 127.0.0.1 serving at most
    /// `max_connections` at once (one more is answered `busy`), with
    /// repository `demo`; the service is returned to watch its
    /// connections.
    pub fn tcp_limited(max_connections: usize) -> (Env, std::sync::Arc<Service>) {
        let tmp = tempfile::tempdir().expect("temp dir");
        let svc = Service::create(tmp.path().join("server")).expect("data root");
        let opts = ListenOptions {
            max_connections,
            ..Default::default()
        };
        let h = ServerHandle::start(svc.clone(), "127.0.0.1:0", opts).expect("listener");
        let env = Env {
            url: h.url(),
            tmp,
            _server: Some(h),
            _process: None,
        };
        env.scribe(
            env.tmp.path(),
            &["repo", "create", "demo", "--server", &env.url.clone()],
        )
        .ok();
        (env, svc)
    }

    /// A fresh data root with repository `demo`.
    pub fn new(t: Transport) -> Env {
        let tmp = tempfile::tempdir().expect("temp dir");
        let root = tmp.path().join("server");
        let (server, process, url) = match t {
            Transport::Tcp => {
                let svc = Service::create(&root).expect("data root");
                let h = ServerHandle::start(svc, "127.0.0.1:0", ListenOptions::default())
                    .expect("listener");
                let url = h.url();
                (Some(h), None, url)
            }
            Transport::Path => {
                drop(Service::create(&root).expect("data root"));
                (None, None, root.display().to_string())
            }
            Transport::Tls => {
                let pki = tmp.path().join("pki");
                std::fs::create_dir_all(&pki).expect("pki dir");
                make_pki(&pki);
                let cfg = scribe_server::tls::server_config(
                    &pki.join("server.pem"),
                    &pki.join("server.key"),
                )
                .expect("tls config");
                let svc = Service::create(&root).expect("data root");
                let opts = ListenOptions {
                    tls: Some(cfg),
                    ..Default::default()
                };
                let h = ServerHandle::start(svc, "127.0.0.1:0", opts).expect("listener");
                let url = format!("scribes://localhost:{}", h.addr().port());
                (Some(h), None, url)
            }
            Transport::Binary => {
                let runtime = tmp.path().join("run");
                std::fs::create_dir_all(&runtime).expect("runtime dir");
                let (p, url) = spawn_server(&root, &runtime);
                (None, Some(p), url)
            }
        };
        let env = Env {
            tmp,
            url,
            _server: server,
            _process: process,
        };
        env.scribe(
            env.tmp.path(),
            &["repo", "create", "demo", "--server", &env.url.clone()],
        )
        .ok();
        env
    }

    pub fn path(&self, p: &str) -> PathBuf {
        self.tmp.path().join(p)
    }

    /// `scribe ARGS` in `dir`; the author is the directory's name (the
    /// workspace's owner in these tests).
    pub fn command(&self, dir: &Path, args: &[&str]) -> Command {
        self.command_as(
            dir.file_name().and_then(|n| n.to_str()).unwrap_or("tester"),
            dir,
            args,
        )
    }

    pub fn command_as(&self, author: &str, dir: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_scribe"));
        c.args(args)
            .current_dir(dir)
            .env("HOME", self.tmp.path())
            .env("SCRIBE_AUTHOR", author)
            .env("SCRIBE_CA_FILE", self.tmp.path().join("pki/ca.pem"))
            .env_remove("SCRIBE_TEST_CRASH_AT")
            .env_remove("SCRIBE_TEST_SLOW_MS");
        c
    }

    pub fn scribe(&self, dir: &Path, args: &[&str]) -> Run {
        to_run(self.command(dir, args).output().expect("scribe runs"))
    }

    /// Run with `SCRIBE_TEST_CRASH_AT=point`.
    pub fn crash(&self, dir: &Path, point: &str, args: &[&str]) -> Run {
        to_run(
            self.command(dir, args)
                .env("SCRIBE_TEST_CRASH_AT", point)
                .output()
                .expect("scribe runs"),
        )
    }

    /// Create workspace `name` (in the temp dir) and return its root.
    pub fn workspace(&self, name: &str, extra: &[&str]) -> PathBuf {
        let dir = self.path(name);
        let mut args = vec![
            "workspace",
            "create",
            name,
            "--server",
            &self.url,
            "--repo",
            "demo",
        ];
        args.extend_from_slice(extra);
        to_run(
            self.command_as(name, self.tmp.path(), &args)
                .output()
                .expect("scribe runs"),
        )
        .ok();
        dir
    }
}

/// Write `bytes` at `root/path`, creating parents.
pub fn write(root: &Path, path: &str, bytes: &[u8]) {
    let full = root.join(path);
    std::fs::create_dir_all(full.parent().expect("has a parent")).expect("mkdir");
    std::fs::write(full, bytes).expect("write");
}

pub fn read(root: &Path, path: &str) -> Vec<u8> {
    std::fs::read(root.join(path)).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

/// Deterministic incompressible bytes.
pub fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(n);
    out
}

/// Both transports for one scenario.
macro_rules! both {
    ($name:ident) => {
        mod $name {
            use super::*;
            #[test]
            fn tcp() {
                $name(crate::support::Transport::Tcp)
            }
            #[test]
            fn path() {
                $name(crate::support::Transport::Path)
            }
        }
    };
}
pub(crate) use both;

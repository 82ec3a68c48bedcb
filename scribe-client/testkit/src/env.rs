//! The all-transports environment: a fresh data root with a repository in
//! a temporary directory, served over one [`Transport`].
//!
//! The temporary directory holds `data/` (the data root), `pki/` (TLS),
//! `run/` (a server process's address file and log); the rest is free for
//! the test (workspaces, a HOME).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use scribe_format::wire::Connection;
use scribe_server::{InProcessConnection, ListenOptions, ServerHandle, Service};
use tempfile::TempDir;

use crate::pki::Pki;
use crate::process::ServerProcess;

/// The repository [`Env::new`] creates.
pub const REPO: &str = "game";

/// How the service is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// The service open in this process, no listener: connections are
    /// `scribe_server::InProcessConnection`s (what a path URL gives a
    /// client in this process).
    InProcess,
    /// The data root closed in this process, its path as the URL: each
    /// client process opens it itself (the `scribe` binary with a path
    /// `--server`).
    Path,
    /// The service in this process behind a TCP listener on 127.0.0.1.
    Tcp,
    /// The same over TLS (`scribes://localhost:PORT`), with a certificate
    /// from a test CA ([`Env::ca_file`]).
    Tls,
    /// A separate server process on 127.0.0.1 (see [`crate::process`]):
    /// the test crate must invoke `scribe_testkit::server_process_entry!()`.
    Process,
}

impl Transport {
    /// Every transport.
    pub const ALL: [Transport; 5] = [
        Transport::InProcess,
        Transport::Path,
        Transport::Tcp,
        Transport::Tls,
        Transport::Process,
    ];
}

/// How to build an [`Env`].
pub struct Builder {
    transport: Transport,
    listen: ListenOptions,
    repo: Option<String>,
    volume: Option<u64>,
}

impl Builder {
    /// Listener options for [`Transport::Tcp`] and [`Transport::Tls`]
    /// (TLS sets its own configuration). A server process uses the
    /// defaults.
    pub fn listen(mut self, options: ListenOptions) -> Builder {
        self.listen = options;
        self
    }

    /// Put the data root on a volume of its own of `bytes` (a tmpfs
    /// mounted for the test and unmounted when the `Env` drops), so a
    /// test can fill it for real: the server then meets ENOSPC. Mounting
    /// needs root (or CAP_SYS_ADMIN); without it the test fails, saying so.
    pub fn volume(mut self, bytes: u64) -> Builder {
        self.volume = Some(bytes);
        self
    }

    /// Create repository `name` instead of [`REPO`]; `None` creates none.
    pub fn repo(mut self, name: Option<&str>) -> Builder {
        self.repo = name.map(str::to_string);
        self
    }

    /// Create the data root and start serving it.
    pub fn start(self) -> Env {
        let tmp = tempfile::tempdir().expect("temp dir");
        let volume = self
            .volume
            .map(|bytes| Volume::mount(&tmp.path().join("volume"), bytes));
        let data = match &volume {
            Some(v) => v.path.join("data"),
            None => tmp.path().join("data"),
        };
        let service = Service::create(&data).expect("create the data root");
        if let Some(name) = &self.repo {
            scribe_server::service::dispatch::repo_create(&service, name)
                .expect("create the repository");
        }
        let mut env = Env {
            process: None,
            listener: None,
            service: None,
            pki: None,
            url: String::new(),
            data,
            transport: self.transport,
            volume,
            tmp,
        };
        match self.transport {
            Transport::InProcess => {
                env.url = env.data.display().to_string();
                env.service = Some(service);
            }
            Transport::Path => {
                drop(service);
                env.url = env.data.display().to_string();
            }
            Transport::Tcp => {
                let h = ServerHandle::start(service.clone(), "127.0.0.1:0", self.listen)
                    .expect("listen");
                env.url = h.url();
                env.listener = Some(h);
                env.service = Some(service);
            }
            Transport::Tls => {
                let pki = Pki::create(&env.tmp.path().join("pki"));
                let options = ListenOptions {
                    tls: Some(pki.server_config()),
                    ..self.listen
                };
                let h =
                    ServerHandle::start(service.clone(), "127.0.0.1:0", options).expect("listen");
                env.url = format!("scribes://localhost:{}", h.addr().port());
                env.listener = Some(h);
                env.service = Some(service);
                env.pki = Some(pki);
            }
            Transport::Process => {
                drop(service);
                let p = ServerProcess::start(&env.data, &env.tmp.path().join("run"));
                env.url = p.url();
                env.process = Some(p);
            }
        }
        env
    }
}

/// A data root served over one transport. Dropping it stops the server
/// (a server process is killed) and removes the directory.
pub struct Env {
    // Dropped in this order: the servers before the data root's files.
    process: Option<ServerProcess>,
    listener: Option<ServerHandle>,
    service: Option<Arc<Service>>,
    pki: Option<Pki>,
    url: String,
    data: PathBuf,
    transport: Transport,
    volume: Option<Volume>,
    tmp: TempDir,
}

/// A tmpfs of a fixed size mounted for one test.
pub struct Volume {
    path: PathBuf,
}

impl Volume {
    /// A `bytes`-byte tmpfs at `path` (made if absent), unmounted when
    /// dropped; panics naming why it cannot be mounted.
    pub fn mount(path: &Path, bytes: u64) -> Volume {
        match Volume::try_mount(path, bytes) {
            Ok(v) => v,
            Err(why) => panic!(
                "mounting a {bytes}-byte tmpfs at {} failed: this full-disk test needs root \
                 (or CAP_SYS_ADMIN) to make a small volume: {why}",
                path.display()
            ),
        }
    }

    fn try_mount(path: &Path, bytes: u64) -> Result<Volume, String> {
        std::fs::create_dir_all(path).map_err(|e| e.to_string())?;
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(path)
            .output()
            .map_err(|e| format!("mount(8) does not run: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        Ok(Volume {
            path: path.to_path_buf(),
        })
    }

    /// Whether this machine lets a test mount a volume. Only a machine
    /// that cannot, and says so with `SCRIBE_TEST_NO_MOUNT=1` (set by
    /// `.ci/run` after its own probe failed), may skip full-disk tests;
    /// everywhere else a failed mount fails the test.
    pub fn available() -> bool {
        std::env::var_os("SCRIBE_TEST_NO_MOUNT").is_none()
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Volume {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.path)
            .status();
    }
}

impl Env {
    /// A fresh data root with repository [`REPO`] over `transport`.
    pub fn new(transport: Transport) -> Env {
        Env::builder(transport).start()
    }

    /// Options before starting.
    pub fn builder(transport: Transport) -> Builder {
        Builder {
            transport,
            listen: ListenOptions::default(),
            repo: Some(REPO.to_string()),
            volume: None,
        }
    }

    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// The temporary directory holding everything.
    pub fn dir(&self) -> &Path {
        self.tmp.path()
    }

    /// `name` inside the temporary directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    /// The data root's own volume ([`Builder::volume`]).
    pub fn volume(&self) -> Option<&Volume> {
        self.volume.as_ref()
    }

    /// The data root.
    pub fn data(&self) -> &Path {
        &self.data
    }

    /// What a client is given: `scribe://`, `scribes://` or the data
    /// root's path.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The service running in this process (in-process, TCP, TLS).
    pub fn service(&self) -> &Arc<Service> {
        self.service
            .as_ref()
            .unwrap_or_else(|| panic!("{:?}: the service is not in this process", self.transport))
    }

    /// The listener in this process (TCP, TLS).
    pub fn listener(&self) -> &ServerHandle {
        self.listener
            .as_ref()
            .unwrap_or_else(|| panic!("{:?}: no listener in this process", self.transport))
    }

    /// Take the listener out of the environment, to shut it down while
    /// the service stays open.
    pub fn take_listener(&mut self) -> ServerHandle {
        let t = self.transport;
        self.listener
            .take()
            .unwrap_or_else(|| panic!("{t:?}: no listener in this process"))
    }

    /// The address a TCP or TLS client connects to.
    pub fn addr(&self) -> SocketAddr {
        match (&self.listener, &self.process) {
            (Some(h), _) => h.addr(),
            (_, Some(p)) => p.addr(),
            _ => panic!("{:?}: nothing listens", self.transport),
        }
    }

    /// The separate server process.
    pub fn process(&mut self) -> &mut ServerProcess {
        let t = self.transport;
        self.process
            .as_mut()
            .unwrap_or_else(|| panic!("{t:?}: no server process"))
    }

    /// Kill the server process (SIGKILL) if it still runs and start a
    /// new one over the same data root on the same address.
    pub fn restart_process(&mut self) {
        let addr = self.addr();
        self.process().kill();
        self.process = Some(ServerProcess::start_at(
            &self.data,
            &self.tmp.path().join("run"),
            &addr.to_string(),
        ));
    }

    /// The test PKI (TLS).
    pub fn pki(&self) -> &Pki {
        self.pki
            .as_ref()
            .unwrap_or_else(|| panic!("{:?}: no TLS", self.transport))
    }

    /// Where the CA a TLS client trusts is (`pki/ca.pem`; the file exists
    /// only with [`Transport::Tls`]).
    pub fn ca_file(&self) -> PathBuf {
        self.path("pki").join("ca.pem")
    }

    /// A new connection that speaks the protocol without the client
    /// library: an `InProcessConnection` (in-process; a path opens the
    /// data root for as long as the connection lives) or the raw
    /// [`Wire`](crate::wire::Wire) (TCP, TLS, process).
    pub fn connect(&self) -> Box<dyn Connection> {
        match self.transport {
            Transport::InProcess => Box::new(InProcessConnection::new(self.service().clone())),
            Transport::Path => Box::new(InProcessConnection::new(
                Service::open(&self.data).expect("open the data root"),
            )),
            Transport::Tcp | Transport::Process => Box::new(crate::wire::tcp(self.addr())),
            Transport::Tls => Box::new(crate::wire::tls(
                self.addr(),
                self.pki().client_config(),
                "localhost",
            )),
        }
    }
}

/// Run `f` against a fresh environment over TCP, then in-process: the two
/// transports of a library-level test.
pub fn both(f: impl Fn(&Env)) {
    for t in [Transport::Tcp, Transport::InProcess] {
        f(&Env::new(t));
    }
}

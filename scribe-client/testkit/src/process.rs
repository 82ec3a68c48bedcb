//! A real server in a separate OS process, without building anything: the
//! test binary runs itself again with a filter naming one test, the entry
//! that [`server_process_entry!`](crate::server_process_entry) defines,
//! and environment variables that turn that test into a server. The child
//! serves a data root with `scribe_server::ServerHandle` on 127.0.0.1
//! (an ephemeral port), writes the address to a file, and serves until it
//! is killed or its parent goes away. A test can SIGKILL it
//! ([`ServerProcess::kill`]) like any server.
//!
//! A test crate that uses [`Transport::Process`](crate::Transport::Process)
//! invokes the macro once, at any module level:
//!
//! ```text
//! scribe_testkit::server_process_entry!();
//! ```
//!
//! Run normally, the entry is a test of this helper: it starts a server
//! process, talks to it, kills it and checks that it died of the signal.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use scribe_server::{ListenOptions, ServerHandle, Service};

/// The name of the test [`server_process_entry!`](crate::server_process_entry)
/// defines (the child's test filter).
pub const ENTRY: &str = "scribe_testkit_server_process";

/// The data root the child serves.
const DATA_VAR: &str = "SCRIBE_TESTKIT_SERVE_DATA";
/// Where the child writes `ADDRESS\n` once it listens.
const ADDRESS_VAR: &str = "SCRIBE_TESTKIT_SERVE_ADDRESS_FILE";
/// The parent's PID: the child exits when its parent is gone.
const PARENT_VAR: &str = "SCRIBE_TESTKIT_SERVE_PARENT";
/// The address to listen on (`127.0.0.1:0` unless a restart reuses one).
const LISTEN_VAR: &str = "SCRIBE_TESTKIT_SERVE_LISTEN";

/// How long the child may take to start listening before the test fails.
const START_DEADLINE: Duration = Duration::from_secs(120);

/// Define the entry test the server process runs (see the module docs).
#[macro_export]
macro_rules! server_process_entry {
    () => {
        /// In a child started by `scribe_testkit::process::ServerProcess`:
        /// serve until killed. Run normally: start one and kill it.
        #[test]
        fn scribe_testkit_server_process() {
            $crate::process::entry()
        }
    };
}

/// The body of the entry test: serve when started as a server process,
/// otherwise check that a server process starts, answers and dies of
/// SIGKILL.
pub fn entry() {
    match std::env::var_os(DATA_VAR) {
        Some(data) => serve(Path::new(&data)),
        None => self_check(),
    }
}

fn serve(data: &Path) -> ! {
    let address_file = PathBuf::from(std::env::var_os(ADDRESS_VAR).expect(ADDRESS_VAR));
    let parent: u32 = std::env::var(PARENT_VAR)
        .expect(PARENT_VAR)
        .parse()
        .expect("a PID");
    let listen = std::env::var(LISTEN_VAR).expect(LISTEN_VAR);
    let service = Service::open(data).unwrap_or_else(|e| panic!("{}: {e}", data.display()));
    let handle = ServerHandle::start(service, &listen, ListenOptions::default())
        .unwrap_or_else(|e| panic!("listen on {listen}: {e}"));
    // Written whole, then renamed: the parent never reads half an address.
    let partial = address_file.with_extension("partial");
    std::fs::write(&partial, format!("{}\n", handle.addr())).expect("write the address");
    std::fs::rename(&partial, &address_file).expect("publish the address");
    loop {
        std::thread::sleep(Duration::from_millis(200));
        if parent_gone(parent) {
            std::process::exit(0);
        }
    }
}

#[cfg(unix)]
fn parent_gone(parent: u32) -> bool {
    std::os::unix::process::parent_id() != parent
}

#[cfg(not(unix))]
fn parent_gone(_parent: u32) -> bool {
    false
}

fn self_check() {
    use crate::change::Requests;
    let mut env = crate::Env::new(crate::Transport::Process);
    let pid = env.process().pid();
    assert_ne!(pid, std::process::id(), "a separate process");
    let mut w = crate::wire::tcp(env.addr());
    let repos = w.repo_list();
    assert_eq!(repos.len(), 1);
    assert_eq!(repos[0].name, crate::REPO);
    let status = env.process().kill();
    assert!(!status.success(), "{status}");
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(9), "{status}");
    }
    assert!(crate::wire::closed(&mut w.stream), "the server is gone");
}

/// A server process serving a data root on 127.0.0.1; killed (SIGKILL)
/// and reaped when dropped.
pub struct ServerProcess {
    child: Child,
    addr: SocketAddr,
    log: PathBuf,
    status: Option<ExitStatus>,
}

impl ServerProcess {
    /// Serve the (closed) data root `data` from a child of this test
    /// binary; `runtime` receives the address file and the child's log.
    /// The test crate must have invoked
    /// [`server_process_entry!`](crate::server_process_entry).
    pub fn start(data: &Path, runtime: &Path) -> ServerProcess {
        ServerProcess::start_at(data, runtime, "127.0.0.1:0")
    }

    /// [`start`](ServerProcess::start) listening on `listen` (for example
    /// the address of a server process that was killed, so that the
    /// workspaces pointing at it reach the new one).
    pub fn start_at(data: &Path, runtime: &Path, listen: &str) -> ServerProcess {
        std::fs::create_dir_all(runtime).expect("runtime dir");
        let address_file = runtime.join("listen");
        let log = runtime.join("server.log");
        let _ = std::fs::remove_file(&address_file);
        let out = std::fs::File::create(&log).expect("server log");
        let err = out.try_clone().expect("server log");
        let exe = std::env::current_exe().expect("the test binary");
        let child = Command::new(exe)
            .args([ENTRY, "--nocapture", "--test-threads=1"])
            .env(DATA_VAR, data)
            .env(ADDRESS_VAR, &address_file)
            .env(PARENT_VAR, std::process::id().to_string())
            .env(LISTEN_VAR, listen)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("start the server process");
        let mut p = ServerProcess {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            log,
            status: None,
        };
        // Waiting for a file is not a timing assertion: it fails only if
        // the child exits (or hangs) without listening.
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            if let Ok(s) = std::fs::read_to_string(&address_file) {
                p.addr = s.trim().parse().expect("the written address");
                return p;
            }
            if let Some(status) = p.child.try_wait().expect("wait") {
                panic!(
                    "the server process exited with {status} before listening \
                     (does the test crate invoke scribe_testkit::server_process_entry!()?):\n{}",
                    p.log_text()
                );
            }
            assert!(
                Instant::now() < deadline,
                "the server process did not listen:\n{}",
                p.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `scribe://ADDRESS`.
    pub fn url(&self) -> String {
        format!("scribe://{}", self.addr)
    }

    /// The child's PID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the child printed (its test harness's output and any panic).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL the process and reap it; its exit status.
    pub fn kill(&mut self) -> ExitStatus {
        if let Some(s) = self.status {
            return s;
        }
        // An error means it already exited; `wait` reports how.
        let _ = self.child.kill();
        let s = self.child.wait().expect("reap the server process");
        self.status = Some(s);
        s
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if self.status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

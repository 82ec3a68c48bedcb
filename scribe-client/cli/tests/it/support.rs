//! A hermetic environment for the `scribe` binary: a data root served
//! over one of the testkit's transports (an in-process listener on
//! 127.0.0.1, TLS, a separate server process, or a path each `scribe`
//! process opens itself), a temporary HOME, and helpers to drive the
//! binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use scribe_server::{ListenOptions, Service};
pub use scribe_testkit::files::{read, write};
pub use scribe_testkit::{noise, Transport};

/// The repository every environment creates (with `scribe repo create`).
pub const REPO: &str = "demo";

pub struct Env {
    served: scribe_testkit::Env,
    pub url: String,
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

/// Run a prepared `scribe` command.
pub fn to_run_with(c: &mut Command) -> Run {
    to_run(c.output().expect("scribe runs"))
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
    pub fn tcp_limited(max_connections: usize) -> (Env, Arc<Service>) {
        let served = scribe_testkit::Env::builder(Transport::Tcp)
            .listen(ListenOptions {
                max_connections,
                ..Default::default()
            })
            .repo(None)
            .start();
        let svc = served.service().clone();
        (Env::over(served), svc)
    }

    /// A fresh data root with repository `demo`.
    pub fn new(t: Transport) -> Env {
        Env::over(scribe_testkit::Env::builder(t).repo(None).start())
    }

    /// A fresh data root with repository `demo` on a volume of its own
    /// of `bytes` (a tmpfs; see `scribe_testkit::env::Builder::volume`).
    pub fn on_volume(t: Transport, bytes: u64) -> Env {
        Env::over(
            scribe_testkit::Env::builder(t)
                .volume(bytes)
                .repo(None)
                .start(),
        )
    }

    /// The data root's own volume.
    pub fn volume(&self) -> PathBuf {
        self.served
            .volume()
            .expect("an Env::on_volume")
            .path()
            .to_path_buf()
    }

    fn over(served: scribe_testkit::Env) -> Env {
        let env = Env {
            url: served.url().to_string(),
            served,
        };
        env.scribe(
            env.dir(),
            &["repo", "create", REPO, "--server", &env.url.clone()],
        )
        .ok();
        env
    }

    /// The temporary directory: HOME, the workspaces, the data root.
    pub fn dir(&self) -> &Path {
        self.served.dir()
    }

    pub fn path(&self, p: &str) -> PathBuf {
        self.served.path(p)
    }

    /// The data root.
    pub fn data(&self) -> PathBuf {
        self.served.data().to_path_buf()
    }

    /// The server of [`Transport::Process`].
    pub fn server_process(&mut self) -> &mut scribe_testkit::process::ServerProcess {
        self.served.process()
    }

    /// Kill the server process if it runs and start a new one on the same
    /// address ([`Transport::Process`]).
    pub fn restart_server_process(&mut self) {
        self.served.restart_process();
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
            .env("HOME", self.dir())
            .env("SCRIBE_AUTHOR", author)
            .env("SCRIBE_CA_FILE", self.served.ca_file())
            .env_remove("SCRIBE_TEST_CRASH_AT")
            .env_remove("SCRIBE_TEST_SLOW_MS");
        c
    }

    /// `WRAPPER... scribe ARGS` in `dir` with [`Env::command`]'s
    /// environment (the wrapper execs the binary, e.g. `setpriv ...`).
    pub fn scribe_via(&self, wrapper: &[&str], dir: &Path, args: &[&str]) -> Run {
        let author = dir.file_name().and_then(|n| n.to_str()).unwrap_or("tester");
        let mut c = Command::new(wrapper[0]);
        c.args(&wrapper[1..])
            .arg(env!("CARGO_BIN_EXE_scribe"))
            .args(args)
            .current_dir(dir)
            .env("HOME", self.dir())
            .env("SCRIBE_AUTHOR", author)
            .env("SCRIBE_CA_FILE", self.served.ca_file())
            .env_remove("SCRIBE_TEST_CRASH_AT")
            .env_remove("SCRIBE_TEST_SLOW_MS");
        to_run(c.output().expect("the wrapper runs"))
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
            REPO,
        ];
        args.extend_from_slice(extra);
        to_run(
            self.command_as(name, self.dir(), &args)
                .output()
                .expect("scribe runs"),
        )
        .ok();
        dir
    }
}

/// Both transports for one scenario.
macro_rules! both {
    ($name:ident) => {
        mod $name {
            use super::*;
            #[test]
            fn tcp() {
                $name(crate::it::support::Transport::Tcp)
            }
            #[test]
            fn path() {
                $name(crate::it::support::Transport::Path)
            }
        }
    };
}
pub(crate) use both;

/// What Alice does on the server to the file Bob moved away, in
/// [`Env::theirs_while_moved`].
pub enum Theirs<'a> {
    /// She edits it to these bytes and submits.
    Edit(&'a [u8]),
    /// She deletes it and submits.
    Delete,
}

impl Env {
    /// Workspaces `alice` and `bob` sharing `path`: Alice adds it (bytes
    /// `v1`) and submits change 1; Bob syncs it. Returns (alice, bob).
    pub fn two_sharing(&self, path: &str) -> (PathBuf, PathBuf) {
        let a = self.workspace("alice", &[]);
        let b = self.workspace("bob", &[]);
        write(&a, path, b"v1");
        self.scribe(&a, &["add", path]).ok();
        self.scribe(&a, &["submit", "-m", "v1"]).ok();
        self.scribe(&b, &["sync"]).ok();
        assert_eq!(read(&b, path), b"v1");
        (a, b)
    }

    /// [`Env::two_sharing`] `path`, then Bob moves it to `to` (pending,
    /// not submitted), Alice changes it on the server (`theirs`) and Bob
    /// syncs: his move's source now needs resolve. Returns (alice, bob).
    pub fn theirs_while_moved(&self, path: &str, to: &str, theirs: Theirs) -> (PathBuf, PathBuf) {
        let (a, b) = self.two_sharing(path);
        self.scribe(&b, &["move", path, to]).ok();
        match theirs {
            Theirs::Edit(bytes) => {
                self.scribe(&a, &["edit", path]).ok();
                write(&a, path, bytes);
                self.scribe(&a, &["submit", "-m", "theirs"]).ok();
            }
            Theirs::Delete => {
                self.scribe(&a, &["delete", path]).ok();
                self.scribe(&a, &["submit", "-m", "gone"]).ok();
            }
        }
        self.scribe(&b, &["sync"]).ok();
        let st = self.scribe(&b, &["status", "--json"]);
        assert!(
            st.stdout
                .contains(&format!("\"needs_resolve\":[\"{path}\"]")),
            "{}",
            st.stdout
        );
        (a, b)
    }
}

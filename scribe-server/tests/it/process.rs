//! The real `scribe-server` binary: init, repo create, serve with runtime
//! files, LOCK refusal of a second process, SIGTERM shutdown, admin exits.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use scribe_format::{OperationId, WorkspaceId};
use scribe_server::{InProcessConnection, Service};
use scribe_testkit::change::{accepted, change, file, Requests};
use scribe_testkit::pki::Pki;
use scribe_testkit::{wire, REPO};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_scribe-server"))
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run scribe-server")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

struct Served {
    child: Child,
    runtime: PathBuf,
    addr: String,
}

impl Drop for Served {
    /// A test that fails part-way does not leave its server running (one
    /// that stopped it already has reaped it: both calls then fail).
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `serve` and wait until it has written its runtime files.
fn serve(data: &Path, runtime: &Path) -> Served {
    serve_with(data, runtime, &[])
}

fn serve_with(data: &Path, runtime: &Path, extra: &[&str]) -> Served {
    let child = bin()
        .args([
            "serve",
            "--data",
            data.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--runtime-dir",
        ])
        .arg(runtime)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn serve");
    let listen = runtime.join("listen");
    let mut child = child;
    // Waiting for a file is not a timing assertion: it fails only if the
    // server exits without listening.
    loop {
        if let Ok(s) = std::fs::read_to_string(&listen) {
            if s.ends_with('\n') {
                return Served {
                    child,
                    runtime: runtime.to_owned(),
                    addr: s.trim().to_string(),
                };
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("serve exited early with {status}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: kill(2) with a pid we spawned and have not yet waited for.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, sig) };
    assert_eq!(rc, 0);
}

fn sigterm(child: &Child) {
    signal(child, libc::SIGTERM)
}

#[test]
fn serve_writes_runtime_files_refuses_a_second_owner_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = data.to_str().unwrap();
    let out = run(&["init", "--data", d]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run(&["repo", "create", "--data", d, REPO]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout).trim().len(),
        32,
        "prints the repository id"
    );

    let mut s = serve(&data, &dir.path().join("run"));
    let pid: u32 = std::fs::read_to_string(s.runtime.join("scribe-server.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(pid, s.child.id());
    assert!(
        !s.addr.ends_with(":0"),
        "the real port is written: {}",
        s.addr
    );

    let mut c = wire::tcp(s.addr.parse().unwrap());
    let ws = WorkspaceId([1; 16]);
    c.register(ws);
    let n = accepted(&c.upload_and_submit(
        ws,
        OperationId([1; 16]),
        &change(&[("a.txt", Some(b"a".as_slice()), 0)]),
        "m",
    ));

    // A second process cannot own the data root.
    let out = run(&["doctor", "--data", d]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("Error:") && err.contains(&format!("in use by PID {pid}")),
        "{err}"
    );
    assert!(err.contains("Hint:"), "{err}");
    let out = run(&["serve", "--data", d, "--listen", "127.0.0.1:0"]);
    assert_eq!(out.status.code(), Some(1));
    // Nor can a service in this process (what a path URL opens).
    let e = Service::open(&data).err().unwrap();
    assert!(e.to_string().contains(&format!("PID {pid}")), "{e}");

    drop(c);
    sigterm(&s.child);
    let status = s.child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(!s.runtime.join("listen").exists());
    assert!(!s.runtime.join("scribe-server.pid").exists());

    // Offline administration now owns it, and the data is whole.
    for cmd in ["doctor", "verify", "recover-submissions", "rebuild-locator"] {
        let out = run(&[cmd, "--data", d]);
        assert!(
            out.status.success(),
            "{cmd}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }
    let out = run(&["compact-objects", "--data", d, "--repo", REPO]);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let out = run(&["doctor", "--data", d, "--repo", REPO]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut c = InProcessConnection::new(Service::open(&data).unwrap());
    assert_eq!(c.repo_list()[0].head, n);
    let f = file(b"a");
    assert_eq!(c.object(REPO, f.objects[0].0), b"a");
}

#[test]
fn usage_errors_exit_2_and_failures_exit_1() {
    let out = run(&["serve"]);
    assert_eq!(out.status.code(), Some(2));
    let out = run(&["frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none");
    let out = run(&["doctor", "--data", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).starts_with("Error: "),
        "{}",
        text(&out.stderr)
    );
    let out = run(&[
        "doctor",
        "--data",
        dir.path().to_str().unwrap(),
        "--repo",
        "x",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let data = dir.path().join("d");
    assert!(run(&["init", "--data", data.to_str().unwrap()])
        .status
        .success());
    // init refuses a data root that exists.
    let out = run(&["init", "--data", data.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let out = run(&["repo", "create", "--data", data.to_str().unwrap(), "a/b"]);
    assert_eq!(out.status.code(), Some(1));
    let out = run(&["doctor", "--data", data.to_str().unwrap(), "--repo", "x"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no repository"),
        "{}",
        text(&out.stderr)
    );
    // A port in use is a failure, not a usage error, and leaves no runtime files.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let runtime = dir.path().join("run");
    let out = bin()
        .args([
            "serve",
            "--data",
            data.to_str().unwrap(),
            "--listen",
            &addr,
            "--runtime-dir",
        ])
        .arg(&runtime)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("cannot listen"),
        "{}",
        text(&out.stderr)
    );
    assert!(!runtime.join("listen").exists());
}

#[test]
fn serve_speaks_tls_with_cert_and_key_and_stops_on_sigint() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::create(&dir.path().join("pki"));
    let data = dir.path().join("data");
    assert!(run(&["init", "--data", data.to_str().unwrap()])
        .status
        .success());
    let cert = pki.path("server.pem");
    let key = pki.path("server.key");
    let mut s = serve_with(
        &data,
        &dir.path().join("run"),
        &[
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    );
    let mut c = wire::tls(s.addr.parse().unwrap(), pki.client_config(), "127.0.0.1");
    c.repo_create(REPO);
    assert_eq!(c.repo_list().len(), 1);
    drop(c);
    signal(&s.child, libc::SIGINT);
    assert!(s.child.wait().unwrap().success());
    assert!(!s.runtime.join("listen").exists());
    // --tls-cert without --tls-key is a usage error.
    let out = run(&[
        "serve",
        "--data",
        data.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--tls-cert",
        "x",
    ]);
    assert_eq!(out.status.code(), Some(2));
}

/// `pins list` and `pins abandon` (offline): by workspace, and by age,
/// which always takes workspaces without an active registration.
#[test]
fn pins_are_listed_and_abandoned_offline() {
    use scribe_format::wire::message as m;
    use scribe_format::wire::{Connection, Request, Response};
    use scribe_format::{ManifestId, ObjectId};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = data.to_str().unwrap();
    let (a, b) = (WorkspaceId([0xa1; 16]), WorkspaceId([0xb2; 16]));
    {
        let svc = Service::create(&data).unwrap();
        scribe_server::service::dispatch::repo_create(&svc, REPO).unwrap();
        let mut c = InProcessConnection::new(svc);
        let pin = |c: &mut InProcessConnection, ws: WorkspaceId, op: u8, n: u8| {
            let ids = (0..n)
                .map(|i| ObjectId::manifest(ManifestId([op ^ i; 32])))
                .collect();
            let req = Request::ObjectsPinMissing(m::ObjectsPinMissing {
                repo: REPO.into(),
                operation: OperationId([op; 16]),
                workspace: ws,
                ids,
            });
            assert!(matches!(
                c.call(req).unwrap(),
                Response::ObjectsPinMissing(_)
            ));
        };
        c.register(a);
        c.register(b);
        pin(&mut c, a, 1, 3);
        pin(&mut c, b, 2, 2);
        let req = Request::WorkspaceRetire(m::WorkspaceRetire {
            repo: REPO.into(),
            workspace: b,
        });
        assert!(matches!(
            c.call(req).unwrap(),
            Response::WorkspaceRetired(_)
        ));
    }
    let list = |expect: &[&str]| {
        let out = run(&["pins", "list", "--data", d]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let lines: Vec<String> = text(&out.stdout).lines().map(str::to_string).collect();
        assert_eq!(lines.len(), expect.len(), "{lines:?}");
        for (line, want) in lines.iter().zip(expect) {
            assert!(line.contains(want), "{line:?} lacks {want:?}");
        }
    };
    list(&[
        &format!("workspace {} registered", a.to_hex()),
        &format!("workspace {} retired", b.to_hex()),
    ]);
    let out = run(&["pins", "abandon", "--data", d, "--workspace", &a.to_hex()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("abandoned 3 pins"),
        "{}",
        text(&out.stdout)
    );
    list(&[&format!("workspace {} retired ", b.to_hex())]);
    // The registered workspace is younger than a day; the retired one goes.
    let out = run(&["pins", "abandon", "--data", d, "--older-than", "1d"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("abandoned 2 pins"),
        "{}",
        text(&out.stdout)
    );
    list(&[]);
    // One of the two selectors is required.
    assert_eq!(
        run(&["pins", "abandon", "--data", d]).status.code(),
        Some(2)
    );
}

/// `serve --max-connections-per-address` refuses one more connection from
/// the same address with `server_busy`.
#[test]
fn serve_limits_connections_per_address() {
    use scribe_format::wire::{decode_response, Hello, Response};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    Service::create(&data).unwrap();
    let mut s = serve_with(
        &data,
        &dir.path().join("run"),
        &[
            "--max-connections-per-address",
            "1",
            "--first-request-timeout",
            "30s",
        ],
    );
    let addr = s.addr.parse().unwrap();
    let mut first = wire::tcp(addr);
    assert_eq!(first.repo_list().len(), 0);
    let (mut second, _) = wire::Wire::hello(wire::socket(addr), &Hello::new(false));
    let r = decode_response(&wire::read_frame_body(&mut second.stream), false).unwrap();
    match r {
        Response::Error(e) => assert_eq!(e.error_code(), scribe_format::ErrorCode::ServerBusy),
        other => panic!("{other:?}"),
    }
    sigterm(&s.child);
    s.child.wait().unwrap();
}

/// A connection limit out of range is a usage error when the flag is
/// read, not a panic once serving (tokio's semaphore holds at most 2^61 - 1).
#[test]
fn serve_refuses_connection_limits_out_of_range() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    Service::create(&data).unwrap();
    for (flag, n) in [
        ("--max-connections", "0"),
        ("--max-connections", "2305843009213693952"),
        ("--max-connections-per-address", "18446744073709551615"),
    ] {
        // Spawned, not run: a build that accepted the flag would serve
        // until killed.
        let mut child = bin()
            .args(["serve", "--data", data.to_str().unwrap()])
            .args(["--listen", "127.0.0.1:0", flag, n])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while child.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {n}: {err}");
        assert!(err.contains("is not a number of connections"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// A peer that announces a large request frame and stalls after a few
/// bytes holds only the memory its bytes fill, not the announced length
/// (64 such connections announcing 8 MiB each were 512 MiB of zeroed
/// buffers), and everyone else is still served.
#[test]
fn stalled_large_frames_hold_only_the_memory_their_bytes_fill() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    Service::create(&data).unwrap();
    let s = serve(&data, &dir.path().join("run"));
    let addr = s.addr.parse().unwrap();
    let rss_kib = || -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", s.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS")
    };
    let mut c = wire::tcp(addr);
    assert_eq!(c.repo_list().len(), 0);
    let before = rss_kib();
    // A real request's header with its length raised to 8 MiB, then 4 KiB.
    let mut head = scribe_format::wire::request_frame(
        &scribe_format::wire::Request::RepoList(scribe_format::wire::message::RepoListRequest {}),
        false,
    );
    head.truncate(7);
    head[..4].copy_from_slice(&(8u32 << 20).to_le_bytes());
    let stalled: Vec<_> = (0..64)
        .map(|_| {
            let mut w = wire::tcp(addr);
            w.stream.write_all(&head).unwrap();
            w.stream.write_all(&[0u8; 4096]).unwrap();
            w
        })
        .collect();
    // Served meanwhile; by then the stalled frames' first bytes were read.
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(c.repo_list().len(), 0);
    let grown_mib = rss_kib().saturating_sub(before) / 1024;
    assert!(
        grown_mib < 128,
        "64 stalled frames of 4 KiB grew the server by {grown_mib} MiB"
    );
    drop(stalled);
}

/// #18 item 1: `lock release` (offline) breaks a lock whatever workspace
/// holds it (one left by a deleted workspace), names its holder, and says
/// when a path holds no lock; the workspace can then be retired.
#[test]
fn lock_release_breaks_another_workspaces_lock_offline() {
    use scribe_format::wire::message as m;
    use scribe_format::wire::{Connection, Request, Response};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = data.to_str().unwrap();
    let gone = WorkspaceId([0xc3; 16]);
    let retire = |c: &mut InProcessConnection| {
        c.call(Request::WorkspaceRetire(m::WorkspaceRetire {
            repo: REPO.into(),
            workspace: gone,
        }))
        .unwrap()
    };
    {
        let svc = Service::create(&data).unwrap();
        scribe_server::service::dispatch::repo_create(&svc, REPO).unwrap();
        let mut c = InProcessConnection::new(svc);
        c.register(gone);
        let req = Request::LockAcquire(m::LockAcquire {
            repo: REPO.into(),
            workspace: gone,
            branch: scribe_format::BranchId([0; 16]),
            author: "ghost".into(),
            paths: vec!["art/a.psd".into(), "art/sub/b.psd".into()],
        });
        assert!(matches!(c.call(req).unwrap(), Response::LocksAcquired(_)));
        // Retiring a workspace that holds locks is refused, and says why.
        match retire(&mut c) {
            Response::Error(e) => assert!(e.message.contains("holds locks"), "{e:?}"),
            other => panic!("{other:?}"),
        }
    }
    let out = run(&["lock", "release", "--data", d, "--repo", REPO, "art"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("released the lock on art/a.psd held by ghost")
            && stdout.contains("art/sub/b.psd"),
        "{stdout}"
    );
    let out = run(&["lock", "release", "--data", d, "--repo", REPO, "art/a.psd"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains("is not locked"),
        "{}",
        text(&out.stdout)
    );
    // The earlier refusal is not replayed: the workspace retires now.
    let svc = Service::open(&data).unwrap();
    let mut c = InProcessConnection::new(svc);
    assert!(matches!(retire(&mut c), Response::WorkspaceRetired(_)));
}

/// A served repository gives the free pages of a streamed import back
/// once it has been unused for a few seconds, without a restart: the
/// compaction hint goes, `metadata.redb` shrinks, and the server serves on.
#[test]
fn serve_compacts_an_idle_repository_after_a_streamed_import() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = data.to_str().unwrap();
    assert!(run(&["init", "--data", d]).status.success());
    let out = run(&["repo", "create", "--data", d, REPO]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let repo_dir = data.join("repos").join(text(&out.stdout).trim());
    let mut s = serve(&data, &dir.path().join("run"));
    let mut c = wire::tcp(s.addr.parse().unwrap());
    let ws = WorkspaceId([4; 16]);
    c.register(ws);
    let contents: Vec<(String, Vec<u8>)> = (0..2_000u32)
        .map(|i| {
            (
                format!("tree/d{:02}/file_{i:05}.txt", i % 23),
                i.to_le_bytes().repeat(9),
            )
        })
        .collect();
    let entries: Vec<(&str, Option<&[u8]>, u64)> = contents
        .iter()
        .map(|(p, b)| (p.as_str(), Some(b.as_slice()), 0))
        .collect();
    accepted(&c.upload_and_submit(ws, OperationId([4; 16]), &change(&entries), "import"));
    let marker = repo_dir.join(scribe_metadata::repo::COMPACT_MARKER);
    let len = || {
        std::fs::metadata(repo_dir.join("metadata.redb"))
            .unwrap()
            .len()
    };
    assert!(
        marker.exists(),
        "a streamed import leaves the compaction hint"
    );
    let before = len();
    // Polling the files is not a timing assertion: it fails only if the
    // compaction never comes (5 s of quiet, checked every 2 s).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while marker.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert!(!marker.exists(), "the idle repository was not compacted");
    let after = len();
    assert!(after < before, "metadata.redb {before} -> {after} bytes");
    accepted(&c.upload_and_submit(
        ws,
        OperationId([5; 16]),
        &change(&[("after.txt", Some(b"after".as_slice()), 0)]),
        "after",
    ));
    sigterm(&s.child);
    assert!(s.child.wait().unwrap().success());
}

/// Spawn `serve` on `data` with runtime directory `runtime`, its stderr
/// into `log`; wait until `runtime`'s pid file names it and `listen` is
/// written.
fn serve_logged(data: &Path, runtime: &Path, log: &Path) -> Served {
    let mut child = bin()
        .args([
            "serve",
            "--data",
            data.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ])
        .arg("--runtime-dir")
        .arg(runtime)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("spawn serve");
    loop {
        let ours = std::fs::read_to_string(runtime.join("scribe-server.pid"))
            .is_ok_and(|p| p.trim() == child.id().to_string());
        if ours {
            if let Ok(s) = std::fs::read_to_string(runtime.join("listen")) {
                if s.ends_with('\n') {
                    return Served {
                        child,
                        runtime: runtime.to_owned(),
                        addr: s.trim().to_string(),
                    };
                }
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "serve exited early with {status}: {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// After SIGKILL the runtime files stay; they are not trusted
/// (`runtime::live_listen`), and the next start says what it found,
/// removes them before opening the data root and writes its own. A pid
/// file naming a running process that does not serve the data root (a
/// pid reused after a reboot) is replaced once the data root is ours.
#[test]
fn a_start_after_sigkill_replaces_the_stale_runtime_files_and_says_so() {
    use scribe_server::runtime::{leftover, live_listen, Holder};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = data.to_str().unwrap();
    assert!(run(&["init", "--data", d]).status.success());
    let run_dir = dir.path().join("run");
    let mut s = serve(&data, &run_dir);
    let (old_pid, old_addr) = (s.child.id(), s.addr.clone());
    assert_eq!(live_listen(&run_dir).as_deref(), Some(old_addr.as_str()));
    signal(&s.child, libc::SIGKILL);
    s.child.wait().unwrap();
    let l = leftover(&run_dir).unwrap();
    assert_eq!(
        (l.holder, l.listen),
        (Holder::Gone(old_pid), Some(old_addr.clone()))
    );
    assert_eq!(live_listen(&run_dir), None, "a dead server's address");

    let log = dir.path().join("serve.log");
    let mut s = serve_logged(&data, &run_dir, &log);
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(
        said.contains(&format!(
            "removed stale runtime files in {} (pid {old_pid} (gone), listen {old_addr})",
            run_dir.display()
        )),
        "{said}"
    );
    assert_eq!(live_listen(&run_dir).as_deref(), Some(s.addr.as_str()));
    signal(&s.child, libc::SIGKILL);
    s.child.wait().unwrap();

    // A running pid of another program (this test process: a pid reused
    // after a reboot) is not trusted and its files go before the opening.
    std::fs::write(
        run_dir.join("scribe-server.pid"),
        format!("{}\n", std::process::id()),
    )
    .unwrap();
    std::fs::write(run_dir.join("listen"), "127.0.0.1:1\n").unwrap();
    assert!(!leftover(&run_dir).unwrap().alive());
    assert_eq!(live_listen(&run_dir), None, "a reused pid");
    let log = dir.path().join("serve2.log");
    let mut s = serve_logged(&data, &run_dir, &log);
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(
        said.contains(&format!(
            "removed stale runtime files in {} (pid {} (running as ",
            run_dir.display(),
            std::process::id()
        )) && said.contains("not scribe-server: a reused pid), listen 127.0.0.1:1)"),
        "{said}"
    );
    sigterm(&s.child);
    assert!(s.child.wait().unwrap().success());

    // A running scribe-server that serves another data root: its files
    // are replaced once this data root's LOCK is held.
    let other = dir.path().join("other");
    assert!(run(&["init", "--data", other.to_str().unwrap()])
        .status
        .success());
    let o = serve(&other, &dir.path().join("other-run"));
    std::fs::write(
        run_dir.join("scribe-server.pid"),
        format!("{}\n", o.child.id()),
    )
    .unwrap();
    std::fs::write(run_dir.join("listen"), "127.0.0.1:1\n").unwrap();
    assert!(leftover(&run_dir).unwrap().alive());
    let log = dir.path().join("serve3.log");
    let mut s = serve_logged(&data, &run_dir, &log);
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(
        said.contains(&format!(
            "replacing runtime files in {} (pid {} (running), listen 127.0.0.1:1)",
            run_dir.display(),
            o.child.id()
        )),
        "{said}"
    );
    sigterm(&s.child);
    assert!(s.child.wait().unwrap().success());
    assert_eq!(leftover(&run_dir), None, "a clean stop removes both");
}

/// A second server started on a served data root with the same runtime
/// directory is refused and leaves the first one's files alone.
#[test]
fn a_refused_second_start_keeps_the_running_servers_runtime_files() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = data.to_str().unwrap();
    assert!(run(&["init", "--data", d]).status.success());
    let run_dir = dir.path().join("run");
    let s = serve(&data, &run_dir);
    let out = bin()
        .args([
            "serve",
            "--data",
            d,
            "--listen",
            "127.0.0.1:0",
            "--runtime-dir",
        ])
        .arg(&run_dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("in use by PID"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        scribe_server::runtime::live_listen(&run_dir).as_deref(),
        Some(s.addr.as_str())
    );
    assert_eq!(
        std::fs::read_to_string(run_dir.join("scribe-server.pid"))
            .unwrap()
            .trim(),
        s.child.id().to_string()
    );
}

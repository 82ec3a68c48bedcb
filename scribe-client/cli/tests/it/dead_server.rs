//! A server that dies, freezes or never answers in the middle of a
//! command (issue 14, item 3): the command ends, names the server's URL
//! and says what to run next, leaves the workspace usable, and running
//! that next command finishes the work. The server is a separate process
//! (killed with SIGKILL, or held silent by a relay in front of it).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::support::*;

/// A relay in front of `upstream` that passes bytes both ways until the
/// clients have sent `hold_at` bytes in all (with `down`: the server has
/// sent them), then stops relaying (holding every connection open and
/// silent) until released. After release it relays again; a connection
/// whose upstream is gone is closed.
struct Relay {
    url: String,
    held: Arc<AtomicBool>,
    release: Arc<AtomicBool>,
}

/// Copy `from` to `to`, counting into `sent`; once `sent` reaches
/// `hold_at`, hold (set `held`) until `release`.
fn relay_one_way(
    mut from: TcpStream,
    mut to: TcpStream,
    sent: &AtomicU64,
    hold_at: u64,
    held: &AtomicBool,
    release: &AtomicBool,
) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if sent.fetch_add(n as u64, Ordering::SeqCst) + n as u64 >= hold_at {
            held.store(true, Ordering::SeqCst);
            while !release.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(std::net::Shutdown::Both);
    let _ = to.shutdown(std::net::Shutdown::Both);
}

impl Relay {
    /// Holds once the clients sent `hold_at` bytes (an upload).
    fn start(upstream: SocketAddr, hold_at: u64) -> Relay {
        Relay::start_holding(upstream, hold_at, false)
    }

    /// Holds once the server sent `hold_at` bytes (a download).
    fn start_down(upstream: SocketAddr, hold_at: u64) -> Relay {
        Relay::start_holding(upstream, hold_at, true)
    }

    fn start_holding(upstream: SocketAddr, hold_at: u64, down: bool) -> Relay {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let sent = Arc::new(AtomicU64::new(0));
        let held = Arc::new(AtomicBool::new(false));
        let release = Arc::new(AtomicBool::new(false));
        let (h, r) = (held.clone(), release.clone());
        std::thread::spawn(move || {
            for client in l.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(upstream) else {
                    continue; // the server is gone: the client sees the close
                };
                let (sent, held, release) = (sent.clone(), h.clone(), r.clone());
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                // The held direction counts; the other passes freely.
                let (held_from, held_to, free_from, mut free_to) = if down {
                    (s2, c2, client, server)
                } else {
                    (client, server, s2, c2)
                };
                std::thread::spawn(move || {
                    let mut free_from = free_from;
                    let _ = std::io::copy(&mut free_from, &mut free_to);
                    let _ = free_to.shutdown(std::net::Shutdown::Both);
                });
                std::thread::spawn(move || {
                    relay_one_way(held_from, held_to, &sent, hold_at, &held, &release)
                });
            }
        });
        Relay {
            url: format!("scribe://{addr}"),
            held,
            release,
        }
    }

    /// Wait (at most a minute) until the relay holds the clients' bytes.
    fn wait_held(&self) {
        let t = Instant::now();
        while !self.held.load(Ordering::SeqCst) {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "the upload never reached the relay's hold point"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn release(&self) {
        self.release.store(true, Ordering::SeqCst);
    }
}

/// Wait for `child` at most `limit`; a child still running then is killed
/// and the test fails: the command hung.
fn finish(mut child: Child, limit: Duration) -> (Option<i32>, String) {
    let t = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return (status.code(), err);
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the command still ran after {limit:?}: it hangs");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A workspace created through `relay_url` with 3 x 8 MiB of opened new
/// files.
fn opened_upload(env: &Env, name: &str, relay_url: &str) -> std::path::PathBuf {
    let ws = env.path(name);
    env.scribe(
        env.dir(),
        &[
            "workspace",
            "create",
            name,
            "--server",
            relay_url,
            "--repo",
            REPO,
        ],
    )
    .ok();
    for i in 0..3u64 {
        write(&ws, &format!("art/big{i}.bin"), &noise(8 << 20, 40 + i));
    }
    env.scribe(&ws, &["add", "."]).ok();
    ws
}

fn spawn_submit(env: &Env, ws: &std::path::Path, extra_env: &[(&str, &str)]) -> Child {
    let mut c = env.command(ws, &["submit", "-m", "big assets"]);
    for (k, v) in extra_env {
        c.env(k, v);
    }
    c.stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// SIGKILL of the server process while a submit streams to it.
#[test]
fn a_server_killed_mid_upload_ends_the_submit_with_the_url_and_the_next_step() {
    let mut env = Env::new(Transport::Process);
    let relay = Relay::start(env.server_process().addr(), 6 << 20);
    let ws = opened_upload(&env, "alice", &relay.url);
    let child = spawn_submit(&env, &ws, &[]);
    relay.wait_held();
    let status = env.server_process().kill();
    assert!(!status.success());
    relay.release();
    let (code, err) = finish(child, Duration::from_secs(120));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("Error[unreachable]"), "{err}");
    assert!(
        err.contains(&relay.url),
        "the message names the server: {err}"
    );
    assert!(
        err.contains("run `scribe submit` again"),
        "the hint says what to run next: {err}"
    );
    // The workspace is not left locked: status runs and shows the files
    // still opened.
    let st = env.scribe(&ws, &["status"]);
    st.ok();
    assert!(st.stdout.contains("art/big1.bin"), "{}", st.stdout);
    // What the hint says works once the server is back.
    env.restart_server_process();
    env.scribe(&ws, &["submit", "-m", "big assets"]).ok();
    let bob = env.workspace("bob", &[]);
    assert_eq!(read(&bob, "art/big2.bin"), noise(8 << 20, 42));
}

/// SIGKILL of the server process while a sync downloads from it (#23):
/// the connection it dropped is `unreachable` (not a refusal of the
/// file), with the hint to sync again, and that sync completes once the
/// server is back.
#[test]
fn a_server_killed_mid_sync_is_unreachable_and_the_next_sync_completes() {
    let mut env = Env::new(Transport::Process);
    let relay = Relay::start_down(env.server_process().addr(), 6 << 20);
    // Bob's workspace through the relay while the repository is empty
    // (far below the hold point), then Alice submits 24 MiB directly.
    let bob = env.path("bob");
    env.scribe(
        env.dir(),
        &[
            "workspace",
            "create",
            "bob",
            "--server",
            &relay.url,
            "--repo",
            REPO,
        ],
    )
    .ok();
    let alice = env.workspace("alice", &[]);
    for i in 0..3u64 {
        write(&alice, &format!("art/big{i}.bin"), &noise(8 << 20, 60 + i));
    }
    env.scribe(&alice, &["add", "."]).ok();
    env.scribe(&alice, &["submit", "-m", "big assets"]).ok();

    let child = env
        .command(&bob, &["sync"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    relay.wait_held();
    let status = env.server_process().kill();
    assert!(!status.success());
    relay.release();
    let (code, err) = finish(child, Duration::from_secs(120));
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("Error[unreachable]"),
        "a dropped connection is unreachable, not refused: {err}"
    );
    assert!(err.contains("run `scribe sync` again"), "{err}");
    env.restart_server_process();
    env.scribe(&bob, &["sync"]).ok();
    for i in 0..3u64 {
        assert_eq!(
            read(&bob, &format!("art/big{i}.bin")),
            noise(8 << 20, 60 + i),
            "art/big{i}.bin"
        );
    }
}

/// A server that stops answering mid-upload (the relay holds every byte):
/// the submit gives up after `SCRIBE_TIMEOUT` and says so; once the
/// server answers again the same submit completes.
#[test]
fn a_silent_server_times_out_and_the_submit_resumes_later() {
    let mut env = Env::new(Transport::Process);
    let relay = Relay::start(env.server_process().addr(), 6 << 20);
    let ws = opened_upload(&env, "alice", &relay.url);
    let child = spawn_submit(&env, &ws, &[("SCRIBE_TIMEOUT", "2")]);
    relay.wait_held();
    let (code, err) = finish(child, Duration::from_secs(120));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("Error[unreachable]"), "{err}");
    assert!(
        err.contains(&format!("no answer from {} within 2 s", relay.url)),
        "{err}"
    );
    assert!(err.contains("run `scribe submit` again"), "{err}");
    relay.release();
    let r = env.scribe(&ws, &["submit", "-m", "big assets"]);
    r.ok();
    assert!(r.stdout.trim().starts_with("change "), "{r:?}");
    let bob = env.workspace("bob", &[]);
    assert_eq!(read(&bob, "art/big0.bin"), noise(8 << 20, 40));
}

/// A listener that accepts and never answers, and a service that answers
/// but is not Scribe: both end in seconds, naming the URL.
#[test]
fn a_listener_that_never_answers_or_is_not_scribe_is_named() {
    let env = Env::new(Transport::Path);
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("scribe://{}", silent.local_addr().unwrap());
    let r = to_run_with(
        env.command(env.dir(), &["repo", "list", "--server", &silent_url])
            .env("SCRIBE_CONNECT_TIMEOUT", "1"),
    );
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("Error[unreachable]"), "{}", r.stderr);
    assert!(
        r.stderr
            .contains(&format!("no answer from {silent_url} within 1 s")),
        "{}",
        r.stderr
    );

    let http = TcpListener::bind("127.0.0.1:0").unwrap();
    let http_url = format!("scribe://{}", http.local_addr().unwrap());
    std::thread::spawn(move || {
        for s in http.incoming() {
            let Ok(mut s) = s else { return };
            let _ = s.write_all(
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    let r = env.scribe(env.dir(), &["repo", "list", "--server", &http_url]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("Error[malformed]"), "{}", r.stderr);
    assert!(
        r.stderr.contains("is this a Scribe server?"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains(&http_url), "{}", r.stderr);
    drop(silent);
}

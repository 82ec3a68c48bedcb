//! A small fault-injecting TCP proxy in front of the real S3 server.
//! Each new connection takes the next planned [`Fault`]; when the plan is
//! empty, connections pass through untouched.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone, Copy, Debug)]
pub enum Fault {
    /// Forward this many request bytes, then cut both sides.
    ResetAfter(usize),
    /// Read the request head (and its body), answer 503 and close.
    ServiceUnavailable,
    /// Accept and never answer.
    Silent,
    /// Forward requests until one deletes (`DELETE /…`, or a multi-object
    /// `POST …?delete`), then hold that one
    /// unanswered (counted in `faulted` only then). Used by
    /// scribe-server's tier tests, which include this file.
    #[allow(dead_code)]
    SilentAtDelete,
    /// Forward requests until one whose bytes contain this text (e.g. a
    /// key prefix in the request line), then hold it unanswered (counted
    /// in `faulted` only then).
    #[allow(dead_code)]
    SilentAt(&'static str),
    /// Forward requests, holding each whose bytes contain this text for
    /// [`SLOW`] before forwarding it.
    #[allow(dead_code)]
    SlowAt(&'static str),
}

/// How long [`Fault::SlowAt`] holds a request.
#[allow(dead_code)]
pub const SLOW: Duration = Duration::from_secs(8);

pub struct Proxy {
    pub endpoint: String,
    plan: Arc<Mutex<VecDeque<Fault>>>,
    /// Connections that met a fault.
    pub faulted: Arc<AtomicUsize>,
    /// While set, the store is "stopped": every connection is cut at
    /// once, new ones are closed as soon as they are accepted.
    down: Arc<AtomicBool>,
    /// Connections passing through, cut by [`Proxy::stop`].
    live: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    pub fn start(upstream: &str) -> Proxy {
        let upstream = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        let listener = TcpListener::bind("127.0.0.1:0").expect("proxy bind");
        let endpoint = format!("http://{}", listener.local_addr().expect("proxy addr"));
        let plan: Arc<Mutex<VecDeque<Fault>>> = Arc::default();
        let faulted = Arc::new(AtomicUsize::new(0));
        let (p, f) = (plan.clone(), faulted.clone());
        let down = Arc::new(AtomicBool::new(false));
        let live: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (d, l) = (down.clone(), live.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if d.load(Ordering::SeqCst) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                if let Ok(c) = client.try_clone() {
                    let mut live = l.lock().expect("live");
                    live.retain(|s| s.peer_addr().is_ok());
                    live.push(c);
                }
                let fault = p.lock().expect("plan").pop_front();
                if fault.is_some()
                    && !matches!(fault, Some(Fault::SilentAtDelete | Fault::SilentAt(_)))
                {
                    f.fetch_add(1, Ordering::SeqCst);
                }
                let up = upstream.clone();
                let f = f.clone();
                std::thread::spawn(move || serve(client, &up, fault, f));
            }
        });
        Proxy {
            endpoint,
            plan,
            faulted,
            down,
            live,
        }
    }

    /// The store goes away: every connection is cut (mid-request or
    /// not), new ones are closed at once, until [`Proxy::restart`].
    #[allow(dead_code)]
    pub fn stop(&self) {
        self.down.store(true, Ordering::SeqCst);
        for s in self.live.lock().expect("live").drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// The store is back.
    #[allow(dead_code)]
    pub fn restart(&self) {
        self.down.store(false, Ordering::SeqCst);
    }

    pub fn plan(&self, faults: &[Fault]) {
        self.plan
            .lock()
            .expect("plan")
            .extend(faults.iter().copied());
    }
}

fn serve(mut client: TcpStream, upstream: &str, fault: Option<Fault>, faulted: Arc<AtomicUsize>) {
    match fault {
        Some(f @ (Fault::SilentAtDelete | Fault::SilentAt(_) | Fault::SlowAt(_))) => {
            let Ok(server) = TcpStream::connect(upstream) else {
                return;
            };
            let (Ok(mut s_read), Ok(mut c_write)) = (server.try_clone(), client.try_clone()) else {
                return;
            };
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut s_read, &mut c_write);
            });
            let mut server = server;
            let mut buf = vec![0u8; 64 << 10];
            loop {
                match client.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(k) => {
                        let hit = match f {
                            Fault::SilentAt(text) | Fault::SlowAt(text) => {
                                buf[..k].windows(text.len()).any(|w| w == text.as_bytes())
                            }
                            _ => buf[..k]
                                .windows(8)
                                .any(|w| w == b"DELETE /" || w == b"?delete "),
                        };
                        if hit && matches!(f, Fault::SlowAt(_)) {
                            faulted.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(SLOW);
                        } else if hit {
                            faulted.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(Duration::from_secs(60));
                            return;
                        }
                        if server.write_all(&buf[..k]).is_err() {
                            return;
                        }
                    }
                }
            }
        }
        Some(Fault::Silent) => {
            // Hold the connection open, answering nothing.
            std::thread::sleep(Duration::from_secs(60));
        }
        Some(Fault::ServiceUnavailable) => {
            let _ = read_request(&mut client);
            let _ = client.write_all(
                b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
            let _ = client.shutdown(Shutdown::Both);
        }
        Some(Fault::ResetAfter(n)) => {
            let Ok(mut server) = TcpStream::connect(upstream) else {
                return;
            };
            let mut buf = vec![0u8; n.max(1)];
            let mut sent = 0;
            while sent < n {
                match client.read(&mut buf[..n - sent]) {
                    Ok(0) | Err(_) => break,
                    Ok(k) => {
                        if server.write_all(&buf[..k]).is_err() {
                            break;
                        }
                        sent += k;
                    }
                }
            }
            let _ = server.shutdown(Shutdown::Both);
            let _ = client.shutdown(Shutdown::Both);
        }
        None => {
            let Ok(server) = TcpStream::connect(upstream) else {
                return;
            };
            pipe(client, server);
        }
    }
}

/// The request head, then as many body bytes as content-length says.
fn read_request(c: &mut TcpStream) -> std::io::Result<()> {
    c.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if c.read(&mut b)? == 0 {
            return Ok(());
        }
        head.push(b[0]);
    }
    let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let len: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    std::io::copy(&mut c.take(len), &mut std::io::sink())?;
    Ok(())
}

fn pipe(client: TcpStream, server: TcpStream) {
    let (mut c1, mut s1) = match (client.try_clone(), server.try_clone()) {
        (Ok(c), Ok(s)) => (c, s),
        _ => return,
    };
    let (mut c2, mut s2) = (client, server);
    let t = std::thread::spawn(move || {
        let _ = std::io::copy(&mut c1, &mut s1);
        let _ = s1.shutdown(Shutdown::Write);
    });
    let _ = std::io::copy(&mut s2, &mut c2);
    let _ = c2.shutdown(Shutdown::Write);
    let _ = t.join();
}

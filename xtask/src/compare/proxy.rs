//! A counting TCP proxy on 127.0.0.1: every client talks to its server
//! through one, so the bytes each tool sends (client to server) and
//! receives (server to client) are counted the same way for all of them.
//!
//! Each connection gets one thread per direction. The bytes move through a
//! 1 MiB user-space buffer (`read` + `write_all`, no flushes: a TcpStream
//! has no user-space buffer to flush); on Linux `splice(2)` through a pipe
//! is the alternative [`cost`] measures beside it. Both legs have
//! TCP_NODELAY so the proxy adds no Nagle delay to small messages. [`cost`]
//! measures what the proxy costs against a direct loopback connection
//! (`--only PROXY`).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// How a proxy moves bytes from one socket to the other.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Relay {
    /// `read` into a 1 MiB buffer, `write_all` it out.
    Buffer,
    /// `splice(2)` socket to pipe to socket (Linux); elsewhere [`Relay::Buffer`].
    Splice,
}

impl Relay {
    /// The relay the harness's proxies use. splice(2) measured no faster
    /// than the buffer on loopback here (`--only PROXY` lists both), so the
    /// one portable path serves every tool.
    pub fn best() -> Relay {
        Relay::Buffer
    }
    pub fn name(self) -> &'static str {
        match self {
            Relay::Buffer => "read/write, 1 MiB buffer",
            Relay::Splice if super::platform::HAS_SPLICE => "splice(2) through a pipe",
            Relay::Splice => "read/write, 1 MiB buffer (no splice here)",
        }
    }
}

pub struct Proxy {
    pub addr: SocketAddr,
    up: Arc<AtomicU64>,
    down: Arc<AtomicU64>,
}

impl Proxy {
    /// Listen on a free loopback port and forward every connection to `target`.
    pub fn start(target: SocketAddr) -> std::io::Result<Proxy> {
        Self::start_with(target, Relay::best())
    }

    pub fn start_with(target: SocketAddr, relay: Relay) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let up = Arc::new(AtomicU64::new(0));
        let down = Arc::new(AtomicU64::new(0));
        let (u, d) = (up.clone(), down.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(client) = conn else { continue };
                let Ok(server) = TcpStream::connect(target) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
                    continue;
                };
                pump(client, server, u.clone(), relay);
                pump(s2, c2, d.clone(), relay);
            }
        });
        Ok(Proxy { addr, up, down })
    }

    /// (bytes client to server, bytes server to client) so far.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.up.load(Ordering::SeqCst),
            self.down.load(Ordering::SeqCst),
        )
    }
}

fn pump(from: TcpStream, to: TcpStream, n: Arc<AtomicU64>, relay: Relay) {
    std::thread::spawn(move || {
        // An error ends this direction either way (the peer reset or
        // closed); what was moved until then is counted.
        let _ = match relay {
            Relay::Splice if super::platform::HAS_SPLICE => {
                super::platform::splice_all(&from, &to, &n)
            }
            _ => copy_buffered(&from, &to, &n),
        };
        let _ = to.shutdown(Shutdown::Write);
    });
}

/// Copy until end of stream through one 1 MiB buffer, counting as it goes.
pub fn copy_buffered(
    mut from: &TcpStream,
    mut to: &TcpStream,
    n: &AtomicU64,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let k = match from.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(k) => k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..k])?;
        n.fetch_add(k as u64, Ordering::Relaxed);
    }
}

// ------------------------------------------------------------ the proxy's cost

/// One line of the proxy-cost table: a test, its figure straight to the
/// server and through each relay (medians over alternated runs).
pub struct CostRow {
    pub test: String,
    pub unit: &'static str,
    /// Higher is better (MB/s) or lower is better (µs).
    pub higher_is_better: bool,
    pub direct: Vec<f64>,
    pub via: Vec<(Relay, Vec<f64>)>,
    /// CPU seconds per GiB moved (the whole process: test client, test
    /// server and, through a proxy, the proxy), streams only.
    pub cpu_direct: Vec<f64>,
    pub cpu_via: Vec<(Relay, Vec<f64>)>,
}

/// The test server: every connection starts with a mode byte and a u64.
/// `U`: read to end of stream, answer the count (8 bytes). `D`: send the
/// u64 bytes, then close. `R`: answer each 8-byte request `k` with `k`
/// bytes until `k` is 0.
fn test_server() -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(s) = conn else { continue };
            std::thread::spawn(move || {
                let _ = serve_one(s);
            });
        }
    });
    Ok(addr)
}

fn serve_one(mut s: TcpStream) -> std::io::Result<()> {
    s.set_nodelay(true)?;
    let mut head = [0u8; 9];
    s.read_exact(&mut head)?;
    let arg = u64::from_le_bytes(head[1..].try_into().expect("8 bytes"));
    let buf = vec![0x5au8; 1 << 20];
    match head[0] {
        b'U' => {
            let mut got = 0u64;
            let mut b = vec![0u8; 1 << 20];
            loop {
                match s.read(&mut b)? {
                    0 => break,
                    k => got += k as u64,
                }
            }
            s.write_all(&got.to_le_bytes())?;
        }
        b'D' => {
            send(&mut s, &buf, arg)?;
            s.shutdown(Shutdown::Write)?;
        }
        b'R' => loop {
            let mut req = [0u8; 8];
            s.read_exact(&mut req)?;
            let k = u64::from_le_bytes(req);
            if k == 0 {
                break;
            }
            send(&mut s, &buf, k)?;
        },
        _ => {}
    }
    Ok(())
}

fn send(s: &mut TcpStream, buf: &[u8], mut left: u64) -> std::io::Result<()> {
    while left > 0 {
        let k = left.min(buf.len() as u64) as usize;
        s.write_all(&buf[..k])?;
        left -= k as u64;
    }
    Ok(())
}

fn recv_exact(s: &mut TcpStream, buf: &mut [u8], mut left: u64) -> std::io::Result<()> {
    while left > 0 {
        let k = left.min(buf.len() as u64) as usize;
        s.read_exact(&mut buf[..k])?;
        left -= k as u64;
    }
    Ok(())
}

fn open(addr: SocketAddr, mode: u8, arg: u64) -> std::io::Result<TcpStream> {
    let mut s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    let mut head = [mode; 9];
    head[1..].copy_from_slice(&arg.to_le_bytes());
    s.write_all(&head)?;
    Ok(s)
}

fn bad(what: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what)
}

/// Client to server: `bytes` streamed, then the server's count awaited. MB/s.
fn upload(addr: SocketAddr, bytes: u64) -> std::io::Result<f64> {
    let buf = vec![0xa5u8; 1 << 20];
    let t = Instant::now();
    let mut s = open(addr, b'U', 0)?;
    send(&mut s, &buf, bytes)?;
    s.shutdown(Shutdown::Write)?;
    let mut got = [0u8; 8];
    s.read_exact(&mut got)?;
    let secs = t.elapsed().as_secs_f64();
    let got = u64::from_le_bytes(got);
    if got != bytes {
        return Err(bad(format!("upload: server got {got} of {bytes} bytes")));
    }
    Ok(bytes as f64 / secs / 1e6)
}

/// Server to client: `bytes` streamed to end of stream. MB/s.
fn download(addr: SocketAddr, bytes: u64) -> std::io::Result<f64> {
    let mut buf = vec![0u8; 1 << 20];
    let t = Instant::now();
    let mut s = open(addr, b'D', bytes)?;
    let mut got = 0u64;
    loop {
        match s.read(&mut buf)? {
            0 => break,
            k => got += k as u64,
        }
    }
    let secs = t.elapsed().as_secs_f64();
    if got != bytes {
        return Err(bad(format!("download: got {got} of {bytes} bytes")));
    }
    Ok(bytes as f64 / secs / 1e6)
}

/// `n` request/response exchanges of `size`-byte answers, one at a time
/// (how a client fetching chunk after chunk waits). Returns MB/s and the
/// mean µs per exchange.
fn exchanges(addr: SocketAddr, n: u64, size: u64) -> std::io::Result<(f64, f64)> {
    let mut buf = vec![0u8; 1 << 20];
    let mut s = open(addr, b'R', 0)?;
    let t = Instant::now();
    for _ in 0..n {
        s.write_all(&size.to_le_bytes())?;
        recv_exact(&mut s, &mut buf, size)?;
    }
    let secs = t.elapsed().as_secs_f64();
    s.write_all(&0u64.to_le_bytes())?;
    Ok(((n * size) as f64 / secs / 1e6, secs / n as f64 * 1e6))
}

/// Measure the proxy against a direct loopback connection: streams of
/// `bytes` each way, `bytes` fetched as 4 MiB answers one request at a
/// time, and 2,000 exchanges of 64-byte answers. `runs` alternations of
/// direct, then each relay in turn.
pub fn cost(bytes: u64, runs: usize) -> std::io::Result<Vec<CostRow>> {
    let server = test_server()?;
    let relays: Vec<Relay> = if super::platform::HAS_SPLICE {
        vec![Relay::Buffer, Relay::Splice]
    } else {
        vec![Relay::Buffer]
    };
    let proxies: Vec<(Relay, Proxy)> = relays
        .iter()
        .map(|&r| Proxy::start_with(server, r).map(|p| (r, p)))
        .collect::<std::io::Result<_>>()?;
    let chunk = 4u64 << 20;
    let fetches = (bytes / chunk).max(1);
    let tests: Vec<(String, &'static str, bool)> = vec![
        (
            format!("stream client to server, {} MiB", bytes >> 20),
            "MB/s",
            true,
        ),
        (
            format!("stream server to client, {} MiB", bytes >> 20),
            "MB/s",
            true,
        ),
        (
            format!("{fetches} requests of a 4 MiB answer, one at a time"),
            "MB/s",
            true,
        ),
        (
            "2,000 requests of a 64-byte answer, one at a time".into(),
            "µs per exchange",
            false,
        ),
    ];
    let one = |addr: SocketAddr, test: usize| -> std::io::Result<f64> {
        match test {
            0 => upload(addr, bytes),
            1 => download(addr, bytes),
            2 => exchanges(addr, fetches, chunk).map(|r| r.0),
            _ => exchanges(addr, 2000, 64).map(|r| r.1),
        }
    };
    let gib = |test: usize| match test {
        0 | 1 => bytes as f64 / (1u64 << 30) as f64,
        2 => (fetches * chunk) as f64 / (1u64 << 30) as f64,
        _ => f64::NAN,
    };
    // One transfer and the CPU seconds per GiB it took.
    let timed = |addr: SocketAddr, test: usize| -> std::io::Result<(f64, f64)> {
        let c0 = super::platform::cpu_secs();
        let v = one(addr, test)?;
        Ok((v, (super::platform::cpu_secs() - c0) / gib(test)))
    };
    let mut rows = Vec::new();
    for (i, (test, unit, higher)) in tests.into_iter().enumerate() {
        let mut direct = Vec::new();
        let mut cpu_direct = Vec::new();
        let mut via: Vec<(Relay, Vec<f64>)> = relays.iter().map(|&r| (r, Vec::new())).collect();
        let mut cpu_via = via.clone();
        for _ in 0..runs {
            let (v, c) = timed(server, i)?;
            direct.push(v);
            cpu_direct.push(c);
            for (k, (_, p)) in proxies.iter().enumerate() {
                let (v, c) = timed(p.addr, i)?;
                via[k].1.push(v);
                cpu_via[k].1.push(c);
            }
        }
        rows.push(CostRow {
            test,
            unit,
            higher_is_better: higher,
            direct,
            via,
            cpu_direct,
            cpu_via,
        });
    }
    // The counts must match what went through (the last few bytes of a
    // connection may be counted just after the peer has them: poll).
    let runs = runs as u64;
    let want_up = runs * (4 * 9 + bytes + 8 * (fetches + 1) + 8 * 2001);
    let want_down = runs * (8 + bytes + fetches * chunk + 2000 * 64);
    for (r, p) in &proxies {
        let t = Instant::now();
        while p.counts() != (want_up, want_down) && t.elapsed().as_secs() < 5 {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let (up, down) = p.counts();
        if (up, down) != (want_up, want_down) {
            return Err(bad(format!(
                "proxy ({}) counted {up} up / {down} down, expected {want_up} / {want_down}",
                r.name()
            )));
        }
    }
    Ok(rows)
}

//! A counting TCP proxy on 127.0.0.1: every client talks to its server
//! through one, so the bytes each tool sends (client to server) and
//! receives (server to client) are counted the same way for all of them.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub struct Proxy {
    pub addr: SocketAddr,
    up: Arc<AtomicU64>,
    down: Arc<AtomicU64>,
}

impl Proxy {
    /// Listen on a free loopback port and forward every connection to `target`.
    pub fn start(target: SocketAddr) -> std::io::Result<Proxy> {
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
                pump(client, server, u.clone());
                pump(s2, c2, d.clone());
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

fn pump(mut from: TcpStream, mut to: TcpStream, n: Arc<AtomicU64>) {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 256 << 10];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(k) => {
                    if to.write_all(&buf[..k]).is_err() {
                        break;
                    }
                    n.fetch_add(k as u64, Ordering::SeqCst);
                }
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}

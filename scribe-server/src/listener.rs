//! The TCP (optionally TLS) listener.
//!
//! [`Listener::run`] accepts until its shutdown future resolves, then stops
//! accepting, tells every connection to close between requests, and waits
//! for them: a submission being accepted finishes and is answered first.
//! [`ServerHandle`] runs a listener on its own thread and runtime, for
//! tests and for embedding a team server in a synchronous program.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use crate::service::auth::CHANNEL_BINDING_LABEL;
use crate::service::{PeerInfo, Service};
use crate::transport::{serve_connection, Ended, Timeouts};

/// How the listener serves.
#[derive(Clone)]
pub struct ListenOptions {
    pub timeouts: Timeouts,
    /// Serve TLS with this configuration (`scribes://`).
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Log each connection's end to stderr.
    pub log: bool,
    /// Connections served at once; one more completes its handshake, gets a
    /// `server_busy` error frame and is closed.
    pub max_connections: usize,
    /// Connections served at once from one peer address (an IPv4 address,
    /// or the /64 prefix of an IPv6 one); one more is refused like one over
    /// [`ListenOptions::max_connections`], so one address cannot take
    /// every slot.
    pub max_connections_per_address: usize,
}

/// Default [`ListenOptions::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// Default [`ListenOptions::max_connections_per_address`]: a client uses
/// up to 4 connections at once, so 32 busy clients behind one address
/// (an office behind NAT) still fit, and 8 addresses are needed to fill
/// the default 1,024 slots.
pub const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS: usize = 128;

impl Default for ListenOptions {
    fn default() -> Self {
        ListenOptions {
            timeouts: Timeouts::default(),
            tls: None,
            log: false,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_address: DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
        }
    }
}

/// A bound listener.
pub struct Listener {
    listener: TcpListener,
    service: Arc<Service>,
    options: ListenOptions,
}

impl Listener {
    /// Bind `addr` (`HOST:PORT`; port 0 picks a free port).
    pub async fn bind(
        addr: &str,
        service: Arc<Service>,
        options: ListenOptions,
    ) -> std::io::Result<Listener> {
        // A data root bound to scribe-auth (`auth-ownership-v1`) is never
        // served to the network by an authorizer that admits anyone, nor
        // without TLS.
        let bound = crate::team::requires_auth(service.root().dir())
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        if bound && (service.authorizer().admits_anyone() || options.tls.is_none()) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "{} requires auth (auth-ownership-v1): it is served only over TLS with \
                     the team authorizer (scribe-server serve)",
                    service.root().dir().display()
                ),
            ));
        }
        let listener = TcpListener::bind(addr).await?;
        Ok(Listener {
            listener,
            service,
            options,
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serve until `shutdown` resolves, then drain connections.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let (tx, rx) = watch::channel(false);
        let mut conns = JoinSet::new();
        let acceptor = self.options.tls.clone().map(TlsAcceptor::from);
        // At least one, and no more than a semaphore can count.
        let max_connections = self
            .options
            .max_connections
            .clamp(1, tokio::sync::Semaphore::MAX_PERMITS);
        let slots = Arc::new(tokio::sync::Semaphore::new(max_connections));
        let per_address = PerAddress::new(self.options.max_connections_per_address.max(1));
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                accepted = self.listener.accept() => {
                    let (sock, peer) = match accepted {
                        Ok(a) => a,
                        Err(e) => {
                            if self.options.log {
                                eprintln!("scribe-server: accept failed: {e}");
                            }
                            // Out of descriptors and the like: back off briefly.
                            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                            continue;
                        }
                    };
                    let _ = sock.set_nodelay(true);
                    let svc = self.service.clone();
                    let rx = rx.clone();
                    let t = self.options.timeouts;
                    let log = self.options.log;
                    let acceptor = acceptor.clone();
                    // Over a limit: still answer, with a `server_busy` error
                    // frame. The address's own limit is taken first, so a
                    // connection refused for its address holds no slot of
                    // the server's while it waits to be told (one address
                    // cannot fill the server with refused connections).
                    let address_slot = per_address.admit(peer.ip());
                    let permit = match address_slot {
                        Some(_) => slots.clone().try_acquire_owned().ok(),
                        None => None,
                    };
                    let admit = match (&address_slot, &permit) {
                        (None, _) => Err(format!(
                            "the server is serving as many connections from {} as it may ({}); \
                             retry shortly",
                            peer.ip(),
                            self.options.max_connections_per_address.max(1)
                        )),
                        (Some(_), None) => Err(format!(
                            "the server is serving as many connections as it may ({}); retry shortly",
                            max_connections
                        )),
                        (Some(_), Some(_)) => Ok(()),
                    };
                    conns.spawn(async move {
                        let mut stop = rx.clone();
                        let ended = match acceptor {
                            None => {
                                let info = PeerInfo::tcp(peer);
                                serve_connection(sock, svc, t, rx, admit, info).await
                            }
                            Some(a) => tokio::select! {
                                _ = stop.changed() => Ended::Shutdown,
                                r = tokio::time::timeout(t.handshake, a.accept(sock)) => match r {
                                    Ok(Ok(tls)) => {
                                        let info = tls_peer(peer, tls.get_ref().1);
                                        serve_connection(tls, svc, t, rx, admit, info).await
                                    }
                                    Ok(Err(e)) => Ended::Io(format!("TLS handshake: {e}")),
                                    Err(_) => Ended::Io("TLS handshake timed out".into()),
                                },
                            },
                        };
                        if log && !matches!(ended, Ended::Closed | Ended::Shutdown) {
                            eprintln!("scribe-server: connection from {peer} ended: {ended:?}");
                        }
                        drop(address_slot);
                        drop(permit);
                    });
                }
                // Reap finished connections so the set stays small.
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            }
        }
        drop(self.listener);
        let _ = tx.send(true);
        while conns.join_next().await.is_some() {}
    }
}

/// Connections open per peer address (IPv4 address or IPv6 /64 prefix).
#[derive(Clone)]
struct PerAddress {
    limit: usize,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// One connection counted against its address; uncounted on drop.
struct AddressSlot {
    key: IpAddr,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl PerAddress {
    fn new(limit: usize) -> PerAddress {
        PerAddress {
            limit,
            open: Arc::default(),
        }
    }

    /// A slot for a connection from `ip`, or `None` at the limit.
    fn admit(&self, ip: IpAddr) -> Option<AddressSlot> {
        let key = address_key(ip);
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(key).or_insert(0);
        if *n >= self.limit {
            return None;
        }
        *n += 1;
        Some(AddressSlot {
            key,
            open: self.open.clone(),
        })
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.key);
            }
        }
    }
}

/// What connections from `ip` are counted under: the IPv4 address
/// (IPv4-mapped IPv6 included), or the /64 prefix of an IPv6 address (one
/// host usually holds a whole /64).
fn address_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let bits = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(Ipv6Addr::from(bits))
            }
        },
    }
}

/// What a TLS connection tells about its client: the certificate chain it
/// presented (none while the server asks for none) and the channel binding.
fn tls_peer(address: SocketAddr, conn: &rustls::ServerConnection) -> PeerInfo {
    let certificates = conn
        .peer_certificates()
        .map(|chain| chain.iter().map(|c| c.as_ref().to_vec()).collect())
        .unwrap_or_default();
    let binding = conn
        .export_keying_material([0u8; 32], CHANNEL_BINDING_LABEL, None)
        .ok();
    PeerInfo::tls(address, certificates, binding)
}

/// A listener on its own thread.
pub struct ServerHandle {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ServerHandle {
    /// Bind `addr` and serve on a new thread with a small runtime.
    pub fn start(
        service: Arc<Service>,
        addr: &str,
        options: ListenOptions,
    ) -> std::io::Result<ServerHandle> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let listener = rt.block_on(Listener::bind(addr, service, options))?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("scribe-server".into())
            .spawn(move || {
                rt.block_on(listener.run(async {
                    let _ = stopped.await;
                }));
            })?;
        Ok(ServerHandle {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `scribe://HOST:PORT` of this server.
    pub fn url(&self) -> String {
        format!("scribe://{}", self.addr)
    }

    /// Stop accepting, drain connections, and wait.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

//! The TCP (optionally TLS) listener.
//!
//! [`Listener::run`] accepts until its shutdown future resolves, then stops
//! accepting, tells every connection to close between requests, and waits
//! for them: a submission being accepted finishes and is answered first.
//! [`ServerHandle`] runs a listener on its own thread and runtime, for
//! tests and for embedding a team server in a synchronous program.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

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
    /// `busy` error frame and is closed.
    pub max_connections: usize,
}

/// Default [`ListenOptions::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

impl Default for ListenOptions {
    fn default() -> Self {
        ListenOptions {
            timeouts: Timeouts::default(),
            tls: None,
            log: false,
            max_connections: DEFAULT_MAX_CONNECTIONS,
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
        let slots = Arc::new(tokio::sync::Semaphore::new(
            self.options.max_connections.max(1),
        ));
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
                    // Over the limit: still answer, with a `busy` error frame.
                    let permit = slots.clone().try_acquire_owned().ok();
                    conns.spawn(async move {
                        let mut stop = rx.clone();
                        let admit = permit.is_some();
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

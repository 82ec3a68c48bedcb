//! A small SAU2 client (`docs/wire-format.md#auth-protocol-sau2`) for the
//! storage server's calls to scribe-auth: TLS trusting the access CA, the
//! server's (or, for `auth-init`, the operator's) credential as client
//! certificate, one connection kept open and opened again after a failure.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use scribe_format::sau2::{self, Sau2Request, Sau2Result, MAX_RESULT_BYTES};
use scribe_format::ErrorCode;

use crate::service::Failure;

/// The I/O timeout of one call.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A client of one auth service.
pub struct Sau2Client {
    /// `host:port`.
    address: String,
    config: Arc<rustls::ClientConfig>,
    conn: Mutex<Option<Tls>>,
}

/// Why an auth call failed before an answer: the service is unreachable
/// or the exchange broke (`auth_unavailable` to clients).
#[derive(Debug, Clone)]
pub struct Unreachable(pub String);

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<Unreachable> for Failure {
    fn from(e: Unreachable) -> Failure {
        Failure::auth_unavailable(format!("the auth service cannot be asked now: {}", e.0))
    }
}

fn bad(what: &str, e: impl std::fmt::Display) -> Unreachable {
    Unreachable(format!("{what}: {e}"))
}

impl Sau2Client {
    /// `url` is `sau2://HOST:PORT` or `HOST:PORT`; `access_ca_pem` the CA(s)
    /// of the service's TLS certificate; `identity` the client certificate
    /// chain and PKCS#8 key, PEM.
    pub fn new(
        url: &str,
        access_ca_pem: &str,
        identity: (&str, &str),
    ) -> Result<Sau2Client, Unreachable> {
        let address = url
            .strip_prefix("sau2://")
            .unwrap_or(url)
            .trim_end_matches('/')
            .to_owned();
        if address
            .rsplit_once(':')
            .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
        {
            return Err(Unreachable(format!(
                "{url:?} is not an auth service address (sau2://HOST:PORT)"
            )));
        }
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(access_ca_pem.as_bytes()) {
            roots
                .add(c.map_err(|e| bad("auth CA", e))?)
                .map_err(|e| bad("auth CA", e))?;
        }
        if roots.is_empty() {
            return Err(Unreachable("the auth CA file holds no certificate".into()));
        }
        let chain = CertificateDer::pem_slice_iter(identity.0.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad("credential certificate", e))?;
        let key = PrivateKeyDer::from_pem_slice(identity.1.as_bytes())
            .map_err(|e| bad("credential key", e))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| bad("TLS", e))?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(|e| bad("credential", e))?;
        cfg.alpn_protocols = vec![b"sau2".to_vec()];
        Ok(Sau2Client {
            address,
            config: Arc::new(cfg),
            conn: Mutex::new(None),
        })
    }

    /// The service's `host:port`.
    pub fn address(&self) -> &str {
        &self.address
    }

    fn connect(&self) -> Result<Tls, Unreachable> {
        let host = self.address.rsplit_once(':').map_or("", |(h, _)| h);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(host.to_owned()).map_err(|e| bad(&self.address, e))?;
        let conn = rustls::ClientConnection::new(self.config.clone(), name)
            .map_err(|e| bad(&self.address, e))?;
        let tcp = TcpStream::connect(&self.address).map_err(|e| bad(&self.address, e))?;
        let _ = tcp.set_read_timeout(Some(CALL_TIMEOUT));
        let _ = tcp.set_write_timeout(Some(CALL_TIMEOUT));
        let _ = tcp.set_nodelay(true);
        Ok(rustls::StreamOwned::new(conn, tcp))
    }

    fn exchange(tls: &mut Tls, encoded: &[u8]) -> std::io::Result<Vec<u8>> {
        let mut frame = (encoded.len() as u32).to_le_bytes().to_vec();
        frame.extend_from_slice(encoded);
        tls.write_all(&frame)?;
        tls.flush()?;
        let mut header = [0u8; 4];
        tls.read_exact(&mut header)?;
        let len = sau2::frame_length(header, MAX_RESULT_BYTES)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
        let mut body = vec![0u8; len];
        tls.read_exact(&mut body)?;
        Ok(body)
    }

    /// Send `req` and read its result, over the kept connection (opened
    /// again once if it broke).
    pub fn call(&self, req: &Sau2Request) -> Result<Sau2Result, Unreachable> {
        let encoded = req.encode().map_err(|e| bad("request", e))?;
        let mut slot = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        for attempt in 0..2 {
            let fresh = slot.is_none();
            if fresh {
                *slot = Some(self.connect()?);
            }
            let Some(tls) = slot.as_mut() else { continue };
            match Self::exchange(tls, &encoded) {
                Ok(body) => {
                    return Sau2Result::decode(&body).map_err(|e| bad("the auth answer", e));
                }
                Err(e) => {
                    *slot = None;
                    // A kept connection the service closed: one new try.
                    if fresh || attempt == 1 {
                        return Err(bad(&self.address, e));
                    }
                }
            }
        }
        Err(Unreachable(format!("{}: no answer", self.address)))
    }

    /// `verb ARGS` with a fresh operation id; the rows, or the refusal as a
    /// [`Failure`] with the service's code.
    pub fn rows(&self, verb: &str, arguments: Vec<String>) -> Result<Vec<Vec<String>>, Failure> {
        let req = Sau2Request {
            operation: random_id(),
            verb: verb.to_owned(),
            arguments,
        };
        match self.call(&req)? {
            Sau2Result::Rows(rows) => Ok(rows),
            Sau2Result::Error { code, message } => Err(Failure::new(
                ErrorCode::from_number(code).unwrap_or(ErrorCode::Refused),
                format!("the auth service refused {verb}: {message}"),
            )),
        }
    }
}

/// 16 random bytes (an operation id).
pub fn random_id() -> [u8; 16] {
    scribe_auth::Id::random().0
}

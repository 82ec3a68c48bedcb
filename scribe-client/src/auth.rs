//! The client side of the auth service (`docs/auth.md#the-service`): SAU2
//! requests over TLS, `login` with a locally generated P-256 key, `whoami`
//! and `logout` with the credential certificate as TLS client certificate,
//! and the stored credential in the user's configuration directory.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use p256::pkcs8::{EncodePrivateKey, EncodePublicKey, LineEnding};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use scribe_format::sau2::{self, Sau2Request, Sau2Result, MAX_RESULT_BYTES};
use scribe_format::ErrorCode;

/// Why an auth request failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthClientError {
    /// The service refused the request with a registry code.
    #[error("{}: {message}", code_name(*code))]
    Refused { code: u16, message: String },
    /// The TLS session was refused (for example an unknown client certificate).
    #[error("the auth service refused the TLS session: {0}")]
    TlsRefused(String),
    /// The service could not be reached or the connection failed.
    #[error("cannot reach the auth service {address}: {detail}")]
    Unreachable { address: String, detail: String },
    /// A local file, key or answer that is not usable.
    #[error("{0}")]
    Invalid(String),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn code_name(code: u16) -> String {
    ErrorCode::from_number(code)
        .map(|c| c.to_string())
        .unwrap_or_else(|| format!("error {code}"))
}

impl AuthClientError {
    /// The registry code (a refusal's own; `unauthenticated` for a refused
    /// TLS session).
    pub fn code(&self) -> ErrorCode {
        match self {
            AuthClientError::Refused { code, .. } => {
                ErrorCode::from_number(*code).unwrap_or(ErrorCode::Refused)
            }
            AuthClientError::TlsRefused(_) => ErrorCode::Unauthenticated,
            AuthClientError::Unreachable { .. } => ErrorCode::Unreachable,
            AuthClientError::Invalid(_) => ErrorCode::Usage,
            AuthClientError::Io { .. } => ErrorCode::Io,
        }
    }
}

type Result<T> = std::result::Result<T, AuthClientError>;

/// A credential: the certificate and its PKCS#8 private key, PEM.
#[derive(Clone)]
pub struct Credential {
    pub certificate_pem: String,
    pub private_key_pem: String,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Credential(<certificate and key>)")
    }
}

/// What a login returned.
#[derive(Clone, Debug)]
pub struct LoginOutcome {
    pub credential_id: String,
    pub user_id: String,
    pub username: String,
    pub expires_ms: u64,
    pub credential: Credential,
}

/// Who `whoami` says the credential belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub username: String,
    pub user_id: String,
    pub credential_id: String,
    pub kind: String,
    pub expires_ms: u64,
}

/// Where the auth service is and whom to trust for it.
#[derive(Clone, Debug)]
pub struct AuthService {
    /// `host:port`.
    pub address: String,
    /// The access CA certificate(s), PEM (`scribe-auth ca-cert --access`).
    pub ca_pem: String,
}

impl AuthService {
    /// `sau2://host:port` or `host:port`.
    pub fn new(url: &str, ca_pem: String) -> Result<AuthService> {
        let address = url
            .strip_prefix("sau2://")
            .unwrap_or(url)
            .trim_end_matches('/');
        if address
            .rsplit_once(':')
            .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
        {
            return Err(AuthClientError::Invalid(format!(
                "{} is not an auth service address (sau2://HOST:PORT)",
                scribe_format::echo::echo(url)
            )));
        }
        Ok(AuthService {
            address: address.to_owned(),
            ca_pem,
        })
    }

    fn host(&self) -> &str {
        let host = self.address.rsplit_once(':').map_or("", |(h, _)| h);
        host.trim_start_matches('[').trim_end_matches(']')
    }

    fn config(&self, credential: Option<&Credential>) -> Result<Arc<rustls::ClientConfig>> {
        let invalid = |what: &str, e: String| AuthClientError::Invalid(format!("{what}: {e}"));
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(self.ca_pem.as_bytes()) {
            let c = c.map_err(|e| invalid("auth CA", e.to_string()))?;
            roots
                .add(c)
                .map_err(|e| invalid("auth CA", e.to_string()))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid("TLS", e.to_string()))?
            .with_root_certificates(roots);
        let mut cfg = match credential {
            None => builder.with_no_client_auth(),
            Some(c) => {
                let chain = CertificateDer::pem_slice_iter(c.certificate_pem.as_bytes())
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .map_err(|e| invalid("credential certificate", e.to_string()))?;
                let key = PrivateKeyDer::from_pem_slice(c.private_key_pem.as_bytes())
                    .map_err(|e| invalid("credential key", e.to_string()))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| invalid("credential", e.to_string()))?
            }
        };
        cfg.alpn_protocols = vec![b"sau2".to_vec()];
        Ok(Arc::new(cfg))
    }

    /// Send one request and read its result.
    pub fn call(&self, credential: Option<&Credential>, req: &Sau2Request) -> Result<Sau2Result> {
        let encoded = req
            .encode()
            .map_err(|e| AuthClientError::Invalid(e.to_string()))?;
        let cfg = self.config(credential)?;
        let name = ServerName::try_from(self.host().to_owned())
            .map_err(|e| AuthClientError::Invalid(format!("{}: {e}", self.address)))?;
        let conn = rustls::ClientConnection::new(cfg, name)
            .map_err(|e| AuthClientError::Invalid(e.to_string()))?;
        let unreachable = |e: std::io::Error| AuthClientError::Unreachable {
            address: self.address.clone(),
            detail: e.to_string(),
        };
        let tcp = TcpStream::connect(&self.address).map_err(unreachable)?;
        let _ = tcp.set_read_timeout(Some(Duration::from_secs(60)));
        let _ = tcp.set_write_timeout(Some(Duration::from_secs(60)));
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        let tls_err = |e: std::io::Error| {
            let refused = e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                .map(|r| r.to_string());
            match refused {
                Some(r) => AuthClientError::TlsRefused(r),
                None => unreachable(e),
            }
        };
        let mut frame = (encoded.len() as u32).to_le_bytes().to_vec();
        frame.extend_from_slice(&encoded);
        tls.write_all(&frame)
            .and_then(|_| tls.flush())
            .map_err(tls_err)?;
        let mut header = [0u8; 4];
        tls.read_exact(&mut header).map_err(tls_err)?;
        let len = sau2::frame_length(header, MAX_RESULT_BYTES)
            .map_err(|e| AuthClientError::Invalid(format!("answer: {e}")))?;
        let mut body = vec![0u8; len];
        tls.read_exact(&mut body).map_err(tls_err)?;
        Sau2Result::decode(&body).map_err(|e| AuthClientError::Invalid(format!("answer: {e}")))
    }

    fn rows(
        &self,
        credential: Option<&Credential>,
        req: &Sau2Request,
        width: usize,
    ) -> Result<Vec<String>> {
        match self.call(credential, req)? {
            Sau2Result::Error { code, message } => Err(AuthClientError::Refused { code, message }),
            Sau2Result::Rows(mut rows) if rows.len() == 1 && rows[0].len() == width => {
                Ok(rows.pop().unwrap_or_default())
            }
            Sau2Result::Rows(_) => Err(AuthClientError::Invalid(format!(
                "{}: an answer of one row of {width} fields expected",
                req.verb
            ))),
        }
    }

    /// `login` with a fresh P-256 key made here; `operation` makes the
    /// request replayable (the same id and arguments give the same outcome).
    pub fn login_with_key(
        &self,
        operation: [u8; 16],
        username: &str,
        password: &str,
        key: &p256::SecretKey,
    ) -> Result<LoginOutcome> {
        self.sign_in("login", operation, username, password, key)
    }

    /// `admin-login`: like [`AuthService::login`], for an administrator; the
    /// answer is a short-lived `user` credential that carries the
    /// administrator's powers (`docs/auth.md#admin-login`).
    pub fn admin_login(&self, username: &str, password: &str) -> Result<LoginOutcome> {
        self.sign_in(
            "admin-login",
            random_id()?,
            username,
            password,
            &generate_key()?,
        )
    }

    fn sign_in(
        &self,
        verb: &str,
        operation: [u8; 16],
        username: &str,
        password: &str,
        key: &p256::SecretKey,
    ) -> Result<LoginOutcome> {
        let spki = key
            .public_key()
            .to_public_key_der()
            .map_err(|e| AuthClientError::Invalid(e.to_string()))?;
        let private_key_pem = key
            .to_pkcs8_pem(LineEnding::LF)
            .map_err(|e| AuthClientError::Invalid(e.to_string()))?
            .to_string();
        let req = Sau2Request {
            operation,
            verb: verb.into(),
            arguments: vec![
                username.to_owned(),
                password.to_owned(),
                hex_lower(spki.as_bytes()),
            ],
        };
        let [credential_id, user_id, username, expires, certificate_pem] =
            <[String; 5]>::try_from(self.rows(None, &req, 5)?)
                .map_err(|_| AuthClientError::Invalid("login answer".into()))?;
        Ok(LoginOutcome {
            credential_id,
            user_id,
            username,
            expires_ms: expires
                .parse()
                .map_err(|_| AuthClientError::Invalid("login answer: expiry".into()))?,
            credential: Credential {
                certificate_pem,
                private_key_pem,
            },
        })
    }

    /// `login` with a new key and a new operation id.
    pub fn login(&self, username: &str, password: &str) -> Result<LoginOutcome> {
        self.login_with_key(random_id()?, username, password, &generate_key()?)
    }

    /// `whoami` with `credential`.
    pub fn whoami(&self, credential: &Credential) -> Result<Identity> {
        let req = Sau2Request {
            operation: random_id()?,
            verb: "whoami".into(),
            arguments: vec![],
        };
        let [username, user_id, credential_id, kind, expires] =
            <[String; 5]>::try_from(self.rows(Some(credential), &req, 5)?)
                .map_err(|_| AuthClientError::Invalid("whoami answer".into()))?;
        Ok(Identity {
            username,
            user_id,
            credential_id,
            kind,
            expires_ms: expires
                .parse()
                .map_err(|_| AuthClientError::Invalid("whoami answer: expiry".into()))?,
        })
    }

    /// `logout`: the service disables `credential`.
    pub fn logout(&self, credential: &Credential) -> Result<()> {
        let req = Sau2Request {
            operation: random_id()?,
            verb: "logout".into(),
            arguments: vec![],
        };
        self.rows(Some(credential), &req, 1).map(|_| ())
    }
}

fn hex_lower(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// 16 random bytes for an operation id.
pub fn random_id() -> Result<[u8; 16]> {
    let mut id = [0u8; 16];
    getrandom::fill(&mut id).map_err(|e| AuthClientError::Invalid(e.to_string()))?;
    Ok(id)
}

/// A fresh P-256 private key from the OS random source.
pub fn generate_key() -> Result<p256::SecretKey> {
    loop {
        let mut raw = [0u8; 32];
        getrandom::fill(&mut raw).map_err(|e| AuthClientError::Invalid(e.to_string()))?;
        let key = p256::SecretKey::from_slice(&raw);
        raw.fill(0);
        if let Ok(k) = key {
            return Ok(k);
        }
    }
}

/// The stored login: `<config>/credential.pem` (certificate then key),
/// `<config>/auth-ca.pem`, `<config>/auth-service` (the address), all 0600
/// on Unix. `SCRIBE_CONFIG_DIR` overrides the directory; otherwise
/// `$XDG_CONFIG_HOME/scribe` or `~/.config/scribe`.
pub fn config_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("SCRIBE_CONFIG_DIR") {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d).join("scribe"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config").join("scribe"))
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> AuthClientError + '_ {
    move |source| AuthClientError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Write `text` to `path` with mode 0600 (Unix), replacing it atomically.
pub fn write_private(path: &Path, text: &str) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let mut f = opts.open(&tmp).map_err(io(&tmp))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600)).map_err(io(&tmp))?;
    }
    f.write_all(text.as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io(path))
}

/// Split a credential file (certificate PEM then PKCS#8 key PEM).
pub fn parse_credential(text: &str) -> Result<Credential> {
    let at = text.find("-----BEGIN PRIVATE KEY-----").ok_or_else(|| {
        AuthClientError::Invalid("the credential file holds no private key".into())
    })?;
    let (cert, key) = text.split_at(at);
    if !cert.contains("-----BEGIN CERTIFICATE-----") {
        return Err(AuthClientError::Invalid(
            "the credential file holds no certificate".into(),
        ));
    }
    Ok(Credential {
        certificate_pem: cert.to_owned(),
        private_key_pem: key.to_owned(),
    })
}

/// Store a login in `dir` (created 0700 on Unix).
pub fn store_login(dir: &Path, service: &AuthService, outcome: &LoginOutcome) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io(dir))?;
    }
    let c = &outcome.credential;
    write_private(
        &dir.join("credential.pem"),
        &format!("{}{}", c.certificate_pem, c.private_key_pem),
    )?;
    write_private(&dir.join("auth-ca.pem"), &service.ca_pem)?;
    write_private(&dir.join("auth-service"), &format!("{}\n", service.address))
}

/// The stored credential: `SCRIBE_CREDENTIAL` (a file path) if set, else
/// `<dir>/credential.pem`.
pub fn load_credential(dir: &Path) -> Result<Credential> {
    let path = std::env::var_os("SCRIBE_CREDENTIAL")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.join("credential.pem"));
    let text = std::fs::read_to_string(&path).map_err(io(&path))?;
    parse_credential(&text)
}

/// The stored auth service (address and CA) of `dir`.
pub fn load_service(dir: &Path) -> Result<AuthService> {
    let p = dir.join("auth-service");
    let address = std::fs::read_to_string(&p).map_err(io(&p))?;
    let c = dir.join("auth-ca.pem");
    let ca = std::fs::read_to_string(&c).map_err(io(&c))?;
    AuthService::new(address.trim(), ca)
}

//! A team server: a data root bound to scribe-auth (`docs/server.md#team-servers`,
//! `docs/auth.md#storage-servers`).
//!
//! `auth-init` ([`auth_init`]) adds `auth-ownership-v1` to the data
//! root's `required-features`, creates `auth-state.redb`, makes the
//! server's P-256 key, registers the server with scribe-auth
//! (`server-register`, as a signed-in administrator) and stores what
//! serving needs under `<data>/auth/` ([`AuthFiles`]). `serve` on such a
//! data root then serves TLS with the issued certificate, requires a
//! client certificate chained to the credential CA, and judges every
//! request with the [`TeamAuthorizer`].
//!
//! | module | what |
//! |---|---|
//! | [`sau2`] | the SAU2 client the server calls scribe-auth with |
//! | [`authorizer`] | [`TeamAuthorizer`]: `resolve` answers, the cache, roles, claims |

pub mod authorizer;
pub mod sau2;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use scribe_format::ErrorCode;
use scribe_metadata::auth_state::{self, AuthState};
use scribe_metadata::{database_descriptor, DataRoot};

pub use authorizer::TeamAuthorizer;

use crate::service::Failure;

/// The directory inside the data root that holds the server's auth files.
pub const AUTH_DIR: &str = "auth";
/// `service`: the settings (written last by `auth-init`).
pub const SERVICE_FILE: &str = "service";
/// The server's certificate (PEM).
pub const CERT_FILE: &str = "server.pem";
/// The server's PKCS#8 private key (PEM, mode 0600).
pub const KEY_FILE: &str = "server.key";
/// Trust anchors for client certificates (the credential CAs).
pub const CREDENTIAL_CA_FILE: &str = "credential-ca.pem";
/// Trust anchors for scribe-auth's TLS certificate (the access CAs).
pub const ACCESS_CA_FILE: &str = "access-ca.pem";

/// Why a team setup failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TeamError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(String),
    #[error("{}: {}", .0.code, .0.message)]
    Refused(Failure),
    #[error(transparent)]
    Metadata(#[from] scribe_metadata::MetadataError),
}

impl TeamError {
    pub fn code(&self) -> ErrorCode {
        match self {
            TeamError::Io { .. } => ErrorCode::Io,
            TeamError::Invalid(_) => ErrorCode::Usage,
            TeamError::Refused(f) => f.code,
            TeamError::Metadata(e) => e.code(),
        }
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TeamError + '_ {
    move |source| TeamError::Io {
        path: path.to_owned(),
        source,
    }
}

/// `<data>/auth/service`: one `key=value` per line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceSettings {
    /// `auth`: the service's `host:port`.
    pub auth: String,
    /// `namespace`: the auth namespace this server serves.
    pub namespace: String,
    /// `name`: the registered server name.
    pub name: String,
    /// `trust-domain`: the auth service's trust domain.
    pub trust_domain: String,
    /// `server-id`, `credential`: 32 lowercase hex each.
    pub server_id: String,
    pub credential: String,
}

impl ServiceSettings {
    pub fn encode(&self) -> String {
        format!(
            "auth={}\nnamespace={}\nname={}\ntrust-domain={}\nserver-id={}\ncredential={}\n",
            self.auth,
            self.namespace,
            self.name,
            self.trust_domain,
            self.server_id,
            self.credential
        )
    }

    pub fn parse(text: &str) -> Result<ServiceSettings, String> {
        let get = |key: &str| -> Result<String, String> {
            text.lines()
                .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
                .map(str::to_owned)
                .filter(|v| !v.is_empty())
                .ok_or_else(|| format!("no {key}= line"))
        };
        Ok(ServiceSettings {
            auth: get("auth")?,
            namespace: get("namespace")?,
            name: get("name")?,
            trust_domain: get("trust-domain")?,
            server_id: get("server-id")?,
            credential: get("credential")?,
        })
    }
}

/// The files `auth-init` writes under `<data>/auth/` (the directory 0700).
#[derive(Clone, Debug)]
pub struct AuthFiles {
    pub settings: ServiceSettings,
    pub certificate_pem: String,
    pub key_pem: String,
    pub credential_ca_pem: String,
    pub access_ca_pem: String,
}

/// Whether the data root at `data` requires auth (`auth-ownership-v1`).
pub fn requires_auth(data: &Path) -> Result<bool, TeamError> {
    let d = database_descriptor::read(data)?;
    Ok(d.required_features().contains(&auth_state::FEATURE))
}

fn write_file(path: &Path, text: &str, private: bool) -> Result<(), TeamError> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, if private { 0o600 } else { 0o644 });
    let mut f = opts.open(&tmp).map_err(io(&tmp))?;
    f.write_all(text.as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io(path))
}

impl AuthFiles {
    /// Read `<data>/auth/`; a missing or partial set is refused (serving
    /// an `auth-ownership-v1` data root needs all of it).
    pub fn load(data: &Path) -> Result<AuthFiles, TeamError> {
        let dir = data.join(AUTH_DIR);
        let read = |name: &str| {
            let p = dir.join(name);
            std::fs::read_to_string(&p).map_err(|source| TeamError::Io { path: p, source })
        };
        let settings = ServiceSettings::parse(&read(SERVICE_FILE)?).map_err(|e| {
            TeamError::Invalid(format!("{}: {e}", dir.join(SERVICE_FILE).display()))
        })?;
        Ok(AuthFiles {
            settings,
            certificate_pem: read(CERT_FILE)?,
            key_pem: read(KEY_FILE)?,
            credential_ca_pem: read(CREDENTIAL_CA_FILE)?,
            access_ca_pem: read(ACCESS_CA_FILE)?,
        })
    }

    /// Write every file, `service` last (its presence marks a finished
    /// `auth-init`).
    pub fn store(&self, data: &Path) -> Result<(), TeamError> {
        let dir = data.join(AUTH_DIR);
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
                .map_err(io(&dir))?;
        }
        write_file(&dir.join(KEY_FILE), &self.key_pem, true)?;
        write_file(&dir.join(CERT_FILE), &self.certificate_pem, false)?;
        write_file(
            &dir.join(CREDENTIAL_CA_FILE),
            &self.credential_ca_pem,
            false,
        )?;
        write_file(&dir.join(ACCESS_CA_FILE), &self.access_ca_pem, false)?;
        write_file(&dir.join(SERVICE_FILE), &self.settings.encode(), false)?;
        database_descriptor::sync_dir(&dir)?;
        Ok(())
    }

    /// The SAU2 client with the server's own credential.
    pub fn client(&self) -> Result<sau2::Sau2Client, TeamError> {
        sau2::Sau2Client::new(
            &self.settings.auth,
            &self.access_ca_pem,
            (&self.certificate_pem, &self.key_pem),
        )
        .map_err(|e| TeamError::Invalid(e.0))
    }

    /// The TLS configuration of a team server: the issued certificate, and
    /// a client certificate chained to a credential CA required of every
    /// connection (rustls `WebPkiClientVerifier`).
    pub fn server_tls(&self) -> Result<Arc<rustls::ServerConfig>, TeamError> {
        let bad = |what: &str, e: String| TeamError::Invalid(format!("{what}: {e}"));
        let chain = CertificateDer::pem_slice_iter(self.certificate_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad("server certificate", e.to_string()))?;
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes())
            .map_err(|e| bad("server key", e.to_string()))?;
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(self.credential_ca_pem.as_bytes()) {
            roots
                .add(c.map_err(|e| bad("credential CA", e.to_string()))?)
                .map_err(|e| bad("credential CA", e.to_string()))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()
        .map_err(|e| bad("client verifier", e.to_string()))?;
        let cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| bad("TLS", e.to_string()))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .map_err(|e| bad("TLS", e.to_string()))?;
        Ok(Arc::new(cfg))
    }
}

/// What `auth-init` needs.
pub struct AuthInitOptions {
    pub data: PathBuf,
    /// `sau2://HOST:PORT`.
    pub auth: String,
    pub namespace: String,
    pub name: String,
    /// Host names and addresses the certificate names (clients connect by one
    /// of them); `localhost`, `127.0.0.1` and `::1` are always added.
    pub hosts: Vec<String>,
    /// The access CA(s) trusted for the auth service (PEM).
    pub access_ca_pem: String,
    /// The administrator's credential: certificate and PKCS#8 key, PEM.
    pub credential: (String, String),
}

/// `scribe-server auth-init` (the data root must not be served meanwhile:
/// its LOCK is held throughout). Order: refuse a finished auth-init; add
/// `auth-ownership-v1` to `required-features`; create (or reopen, after an
/// interrupted run, with the same namespace) `auth-state.redb`; make the
/// key; `server-register`; write `<data>/auth/`, `service` last.
pub fn auth_init(opts: &AuthInitOptions) -> Result<AuthFiles, TeamError> {
    let root = DataRoot::open(&opts.data)?;
    if opts.data.join(AUTH_DIR).join(SERVICE_FILE).exists() {
        return Err(TeamError::Refused(Failure::new(
            ErrorCode::AlreadyExists,
            format!(
                "{} is bound to an auth service already ({})",
                opts.data.display(),
                opts.data.join(AUTH_DIR).join(SERVICE_FILE).display()
            ),
        )));
    }
    scribe_auth::rows::check_name("namespace", &opts.namespace)
        .and_then(|_| scribe_auth::rows::check_name("server name", &opts.name))
        .map_err(|e| TeamError::Invalid(e.to_string()))?;
    let client = sau2::Sau2Client::new(
        &opts.auth,
        &opts.access_ca_pem,
        (&opts.credential.0, &opts.credential.1),
    )
    .map_err(|e| TeamError::Invalid(e.0))?;
    // 1. required-features, before anything depends on it.
    let mut d = database_descriptor::read(&opts.data)?;
    if !d.required_features().contains(&auth_state::FEATURE) {
        d.add_required_feature(auth_state::FEATURE)
            .map_err(|e| TeamError::Invalid(e.to_string()))?;
        database_descriptor::write(&d, &opts.data)?;
    }
    // 2. auth-state.redb.
    if opts.data.join(auth_state::AUTH_STATE_FILE).exists() {
        AuthState::open(&opts.data, &opts.namespace)?;
    } else {
        AuthState::create(&opts.data, &opts.namespace)?;
    }
    // 3. the key and the registration.
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
        .map_err(|e| TeamError::Invalid(e.to_string()))?;
    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    for h in &opts.hosts {
        if !hosts.contains(h) {
            hosts.push(h.clone());
        }
    }
    let mut args = vec![
        opts.name.clone(),
        opts.namespace.clone(),
        hex::encode(key.public_key_der()),
    ];
    args.extend(hosts);
    let rows = client
        .rows("server-register", args)
        .map_err(TeamError::Refused)?;
    let [row] = <[Vec<String>; 1]>::try_from(rows)
        .map_err(|_| TeamError::Invalid("server-register: one row expected".into()))?;
    let [server_id, credential, cert, credential_ca, access_ca, trust_domain, _incarnation, _revision] =
        <[String; 8]>::try_from(row)
            .map_err(|_| TeamError::Invalid("server-register: 8 fields expected".into()))?;
    let files = AuthFiles {
        settings: ServiceSettings {
            auth: client.address().to_owned(),
            namespace: opts.namespace.clone(),
            name: opts.name.clone(),
            trust_domain,
            server_id,
            credential,
        },
        certificate_pem: cert,
        key_pem: key.serialize_pem(),
        credential_ca_pem: credential_ca,
        access_ca_pem: access_ca,
    };
    files.store(&opts.data)?;
    drop(root);
    Ok(files)
}

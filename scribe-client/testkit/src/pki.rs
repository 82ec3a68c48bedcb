//! A test PKI: a CA, a server certificate for `localhost` and 127.0.0.1
//! signed by it, and an unrelated CA, as PEM files in one directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, SanType};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

/// The PEM files of a test PKI in `dir`: `ca.pem`, `server.pem`,
/// `server.key` and `other-ca.pem` (a CA that signed nothing here).
pub struct Pki {
    dir: PathBuf,
}

impl Pki {
    /// Generate the files in `dir` (created if missing).
    pub fn create(dir: &Path) -> Pki {
        std::fs::create_dir_all(dir).expect("pki dir");
        let ca_key = KeyPair::generate().expect("key");
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "scribe test CA");
        let ca_cert = ca.self_signed(&ca_key).expect("CA");
        let key = KeyPair::generate().expect("key");
        let mut leaf = CertificateParams::new(vec!["localhost".to_string()]).expect("params");
        leaf.subject_alt_names
            .push(SanType::IpAddress(std::net::IpAddr::from([127, 0, 0, 1])));
        let cert = leaf.signed_by(&key, &ca_cert, &ca_key).expect("leaf");
        let other_key = KeyPair::generate().expect("key");
        let mut other = CertificateParams::new(Vec::<String>::new()).expect("params");
        other.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let other = other.self_signed(&other_key).expect("other CA");
        let pki = Pki {
            dir: dir.to_owned(),
        };
        for (name, pem) in [
            ("ca.pem", ca_cert.pem()),
            ("server.pem", cert.pem()),
            ("server.key", key.serialize_pem()),
            ("other-ca.pem", other.pem()),
        ] {
            std::fs::write(pki.path(name), pem).expect("write PEM");
        }
        pki
    }

    /// One of the PEM files.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The CA every client of the test server trusts.
    pub fn ca_file(&self) -> PathBuf {
        self.path("ca.pem")
    }

    /// The server's configuration, built as `scribe-server serve
    /// --tls-cert --tls-key` builds it.
    pub fn server_config(&self) -> Arc<rustls::ServerConfig> {
        scribe_server::tls::server_config(&self.path("server.pem"), &self.path("server.key"))
            .expect("server TLS configuration")
    }

    /// A client configuration trusting `ca.pem`.
    pub fn client_config(&self) -> Arc<rustls::ClientConfig> {
        client_config_trusting(&self.ca_file())
    }
}

/// A client configuration (ring provider) trusting the CA certificates of
/// the PEM file `ca`.
pub fn client_config_trusting(ca: &Path) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).expect("CA PEM") {
        roots.add(cert.expect("CA certificate")).expect("trusted");
    }
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("protocol versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    Arc::new(cfg)
}

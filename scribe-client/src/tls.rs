//! The client's TLS configuration (rustls with the ring provider).

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

/// Why a TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    #[error("cannot read PEM {}: {detail}", path.display())]
    Pem {
        path: std::path::PathBuf,
        detail: String,
    },
    #[error("{} holds no certificate", path.display())]
    NoCertificate { path: std::path::PathBuf },
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

/// A client configuration trusting the certificates of `ca_file`.
pub fn client_config(ca_file: &Path) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let pem_err = |e: rustls::pki_types::pem::Error| TlsError::Pem {
        path: ca_file.to_owned(),
        detail: e.to_string(),
    };
    let certs = CertificateDer::pem_file_iter(ca_file)
        .map_err(pem_err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem_err)?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            path: ca_file.to_owned(),
        });
    }
    let mut roots = rustls::RootCertStore::empty();
    for c in certs {
        roots.add(c)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(cfg))
}

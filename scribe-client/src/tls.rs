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
    client_config_with(ca_file, None)
}

/// A client configuration trusting the certificates of `ca_file` and
/// presenting `credential` (certificate and PKCS#8 key) as the TLS client
/// certificate when the server asks for one.
pub fn client_config_with(
    ca_file: &Path,
    credential: Option<&crate::auth::Credential>,
) -> Result<Arc<rustls::ClientConfig>, TlsError> {
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
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots);
    let cfg = match credential {
        None => builder.with_no_client_auth(),
        Some(c) => {
            let bad = |what: &str, detail: String| TlsError::Pem {
                path: std::path::PathBuf::from(what),
                detail,
            };
            let chain = CertificateDer::pem_slice_iter(c.certificate_pem.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| bad("the credential certificate", e.to_string()))?;
            let key =
                rustls::pki_types::PrivateKeyDer::from_pem_slice(c.private_key_pem.as_bytes())
                    .map_err(|e| bad("the credential key", e.to_string()))?;
            builder.with_client_auth_cert(chain, key)?
        }
    };
    Ok(Arc::new(cfg))
}

//! TLS on the listener and in the client (`scribes://`).

use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, SanType};
use scribe_client::{connect, ClientOptions};
use scribe_server::{ListenOptions, ServerHandle, Service};

pub struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    pub fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(name)
    }
}

pub fn ca_and_server() -> Pki {
    let dir = tempfile::tempdir().unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "scribe test CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut leaf = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    leaf.subject_alt_names
        .push(SanType::IpAddress(std::net::IpAddr::from([127, 0, 0, 1])));
    let cert = leaf.signed_by(&key, &ca_cert, &ca_key).unwrap();
    std::fs::write(dir.path().join("ca.pem"), ca_cert.pem()).unwrap();
    std::fs::write(dir.path().join("server.pem"), cert.pem()).unwrap();
    std::fs::write(dir.path().join("server.key"), key.serialize_pem()).unwrap();
    // An unrelated CA.
    let other_key = KeyPair::generate().unwrap();
    let mut other = CertificateParams::new(Vec::<String>::new()).unwrap();
    other.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let other = other.self_signed(&other_key).unwrap();
    std::fs::write(dir.path().join("other-ca.pem"), other.pem()).unwrap();
    Pki { dir }
}

fn tls_server(pki: &Pki) -> (tempfile::TempDir, Arc<Service>, ServerHandle) {
    let dir = tempfile::tempdir().unwrap();
    let service = Service::create(dir.path().join("data")).unwrap();
    let cfg = scribe_server::tls::server_config(&pki.path("server.pem"), &pki.path("server.key"))
        .unwrap();
    let opts = ListenOptions {
        tls: Some(cfg),
        ..Default::default()
    };
    let server = ServerHandle::start(service.clone(), "127.0.0.1:0", opts).unwrap();
    (dir, service, server)
}

#[test]
fn scribes_urls_speak_tls_to_a_trusted_server() {
    let pki = ca_and_server();
    let (_dir, _svc, server) = tls_server(&pki);
    let port = server.addr().port();
    let opts = ClientOptions {
        ca_file: Some(pki.path("ca.pem")),
        lz4: true,
        ..Default::default()
    };
    for host in ["127.0.0.1", "localhost"] {
        let mut c = connect(&format!("scribes://{host}:{port}"), &opts).unwrap();
        c.repo_create(&format!("r-{host}")).unwrap();
        assert!(c.status().unwrap().repositories >= 1);
    }
    // Without a CA file, scribes:// is refused before connecting.
    let e = connect(
        &format!("scribes://127.0.0.1:{port}"),
        &ClientOptions::default(),
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("CA"), "{e}");
    // An untrusted CA fails the TLS handshake.
    let other = ClientOptions {
        ca_file: Some(pki.path("other-ca.pem")),
        ..Default::default()
    };
    assert!(connect(&format!("scribes://127.0.0.1:{port}"), &other).is_err());
    // A plain-TCP client cannot talk to the TLS listener, and the server stays up.
    assert!(connect(
        &format!("scribe://127.0.0.1:{port}"),
        &ClientOptions {
            timeout: std::time::Duration::from_secs(5),
            ..Default::default()
        }
    )
    .is_err());
    let mut c = connect(&format!("scribes://127.0.0.1:{port}"), &opts).unwrap();
    assert_eq!(c.repo_list().unwrap().len(), 2);
}

#[test]
fn bad_pem_files_are_readable_errors() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("empty.pem"), "").unwrap();
    let e = scribe_server::tls::server_config(
        &dir.path().join("empty.pem"),
        &dir.path().join("empty.pem"),
    )
    .unwrap_err();
    assert!(e.to_string().contains("no certificate"), "{e}");
    let e = scribe_client::tls::client_config(&dir.path().join("absent.pem")).unwrap_err();
    assert!(e.to_string().contains("absent.pem"), "{e}");
}

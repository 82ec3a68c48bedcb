//! TLS on the listener, seen by a raw protocol client (`scribes://` from
//! the client library is tested in scribe-client's tests).

use std::time::Duration;

use scribe_format::wire::Hello;
use scribe_testkit::change::Requests;
use scribe_testkit::pki::{client_config_trusting, Pki};
use scribe_testkit::wire;
use scribe_testkit::{Env, Transport};

#[test]
fn the_listener_speaks_tls_to_clients_that_trust_its_ca() {
    let env = Env::builder(Transport::Tls).repo(None).start();
    let addr = env.addr();
    // By name and by address: the certificate names both.
    for host in ["127.0.0.1", "localhost"] {
        let mut w = wire::tls(addr, env.pki().client_config(), host);
        w.repo_create(&format!("r-{host}"));
        assert!(w.status().repositories >= 1);
    }
    // A client trusting another CA fails the TLS handshake.
    let other = client_config_trusting(&env.pki().path("other-ca.pem"));
    let mut s = wire::tls_stream(wire::socket(addr), other, "localhost");
    let e = std::io::Write::write_all(&mut s, &Hello::new(false).encode())
        .and_then(|_| std::io::Write::flush(&mut s))
        .and_then(|_| std::io::Read::read_exact(&mut s, &mut [0u8; 32]))
        .unwrap_err();
    assert!(e.to_string().contains("certificate"), "{e}");
    // A plain-TCP client gets no answer it can read, and the server stays up.
    let mut plain = wire::socket(addr);
    plain
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    std::io::Write::write_all(&mut plain, &Hello::new(false).encode()).unwrap();
    let mut answer = [0u8; 32];
    let read = std::io::Read::read_exact(&mut plain, &mut answer);
    assert!(
        read.is_err() || scribe_format::wire::Answer::decode(&answer).is_err(),
        "a plain hello was answered: {answer:?}"
    );
    let mut w = wire::tls(addr, env.pki().client_config(), "localhost");
    assert_eq!(w.repo_list().len(), 2);
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
    let e = scribe_server::tls::server_config(
        &dir.path().join("absent.pem"),
        &dir.path().join("absent.key"),
    )
    .unwrap_err();
    assert!(e.to_string().contains("absent.pem"), "{e}");
    // A certificate with a missing key names the key file.
    let pki = Pki::create(&dir.path().join("pki"));
    let e = scribe_server::tls::server_config(&pki.path("server.pem"), &dir.path().join("no.key"))
        .unwrap_err();
    assert!(e.to_string().contains("no.key"), "{e}");
}

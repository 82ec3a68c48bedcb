//! The client's side of the handshake's credential slot: a credential in
//! `ClientOptions` is presented once per connection and the server's
//! acknowledgement names the principal; a refused credential is a named
//! error; without one, nothing changes.

use std::sync::Arc;

use scribe_client::tcp::TcpConnection;
use scribe_client::{connect, ClientError, ClientOptions};
use scribe_format::wire::handshake::PrincipalKind;
use scribe_format::ErrorCode;
use scribe_server::service::{Action, Authorizer, Credential, Failure, PeerInfo, Principal};

use super::support::{Env, Transport};

/// Serves a credential `user:NAME` as user NAME, refuses anything else,
/// and refuses mutations of anonymous connections.
struct Names;

impl Authorizer for Names {
    fn authenticate(&self, c: &Credential, _: &PeerInfo) -> Result<Principal, Failure> {
        match c {
            Credential::None => Ok(Principal::anonymous()),
            Credential::Presented(b) => match std::str::from_utf8(b)
                .ok()
                .and_then(|s| s.strip_prefix("user:"))
            {
                Some(name) => Ok(Principal::new(PrincipalKind::User, Some([7; 16]), name)),
                None => Err(Failure::forbidden("unknown credential")),
            },
        }
    }

    fn authorize(&self, p: &Principal, a: &Action<'_>) -> Result<(), Failure> {
        if a.mutates && p.kind == PrincipalKind::Anonymous {
            return Err(Failure::forbidden("sign in to change anything"));
        }
        Ok(())
    }
}

#[test]
fn a_presented_credential_names_the_connection_and_a_refused_one_is_forbidden() {
    let env = Env::new(Transport::Tcp);
    env.service().set_authorizer(Arc::new(Names));
    let url = env.url().to_string();
    let addr = env.addr();
    let opts = |c: Option<&str>| ClientOptions {
        credential: c.map(|c| c.as_bytes().to_vec()),
        ..ClientOptions::default()
    };

    // Anonymous: reads pass, mutations are refused by the authorizer.
    let mut anon = connect(&url, &opts(None)).unwrap();
    assert!(!anon.repo_list().unwrap().is_empty());
    let e = anon.repo_create("other").unwrap_err();
    assert_eq!(e.code(), ErrorCode::Forbidden, "{e}");

    // Signed in: the acknowledgement names the principal, and it may
    // mutate.
    let conn = TcpConnection::open(
        &url,
        &addr.ip().to_string(),
        addr.port(),
        false,
        &opts(Some("user:ada")),
    )
    .unwrap();
    let who = conn.principal().expect("acknowledged");
    assert_eq!(who.kind, PrincipalKind::User);
    assert_eq!(who.name, "ada");
    assert_eq!(who.id, Some([7; 16]));
    let mut ada = scribe_client::Client::over(Box::new(conn));
    ada.repo_create("other").unwrap();

    // A credential the server refuses ends the connection with its code.
    match connect(&url, &opts(Some("bogus"))) {
        Err(ClientError::Server { code, message, .. }) => {
            assert_eq!(code, ErrorCode::Forbidden);
            assert!(message.contains("unknown credential"), "{message}");
        }
        Err(other) => panic!("expected forbidden, got {other}"),
        Ok(_) => panic!("a refused credential connected"),
    }
    // An empty credential cannot even be framed (1..=64 KiB).
    assert!(matches!(
        connect(&url, &opts(Some(""))),
        Err(ClientError::Protocol(_))
    ));
}

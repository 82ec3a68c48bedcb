//! The authorization seam over real connections: one authentication per
//! connection (with or without the handshake's credential frame), one
//! authorization per request before anything of it runs.
//!
//! These tests speak the wire directly (the client library has no way to
//! present a credential yet) and use the in-process transport through
//! `Service::handle` with `Session::new()`, as the path-URL client does.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use scribe_format::wire::handshake::{self as hs, Authenticated, HANDSHAKE_LEN};
use scribe_format::wire::message as m;
use scribe_format::wire::{decode_response, request_frame, Bytes, Hello, Request, Response};
use scribe_format::{ChunkId, ErrorCode, ObjectId, OperationId, WorkspaceId};
use scribe_server::service::auth::CHANNEL_BINDING_LABEL;
use scribe_server::service::{
    pins, Action, Authorizer, Credential, Failure, PeerInfo, Principal, PrincipalKind, Session,
};
use scribe_server::{ListenOptions, Service};
use scribe_testkit::change::{
    accepted, change, main_branch, put_many_req, register_req, submit_req,
};
use scribe_testkit::wire::{self, closed, read_frame_body, Wire};
use scribe_testkit::{Env, Transport, REPO};

/// One `authorize` call: (principal, request name, repository, mutates).
type Authorized = (Principal, &'static str, Option<String>, bool);

/// Names each connection after its credential, refuses the credentials
/// `mallory` (forbidden) and `later` (auth_unavailable), optionally
/// refuses connections without one, optionally denies every mutation of
/// one repository, and records every call.
#[derive(Default)]
struct TestAuthorizer {
    deny_mutations_of: Option<String>,
    require_credential: bool,
    authenticated: Mutex<Vec<(Credential, PeerInfo)>>,
    authorized: Mutex<Vec<Authorized>>,
}

/// The id the test authorizer gives the principal named by `credential`.
fn id_of(credential: &[u8]) -> [u8; 16] {
    blake3::hash(credential).as_bytes()[..16]
        .try_into()
        .unwrap()
}

impl Authorizer for TestAuthorizer {
    fn authenticate(&self, credential: &Credential, peer: &PeerInfo) -> Result<Principal, Failure> {
        self.authenticated
            .lock()
            .unwrap()
            .push((credential.clone(), peer.clone()));
        match credential {
            Credential::None if self.require_credential => {
                Err(Failure::forbidden("this server needs a credential"))
            }
            Credential::None => Ok(Principal::anonymous()),
            Credential::Presented(b) if b == b"mallory" => {
                Err(Failure::forbidden("credential revoked"))
            }
            Credential::Presented(b) if b == b"later" => Err(Failure::auth_unavailable(
                "the auth service does not answer",
            )),
            Credential::Presented(b) => Ok(Principal::new(
                PrincipalKind::User,
                Some(id_of(b)),
                String::from_utf8_lossy(&b[..b.len().min(32)]),
            )),
        }
    }

    fn authorize(&self, principal: &Principal, action: &Action<'_>) -> Result<(), Failure> {
        self.authorized.lock().unwrap().push((
            principal.clone(),
            action.request,
            action.repository.map(str::to_string),
            action.mutates,
        ));
        if action.mutates && action.repository == self.deny_mutations_of.as_deref() {
            return Err(Failure::forbidden(format!(
                "{} may not change {:?}",
                principal.name, action.repository
            )));
        }
        Ok(())
    }
}

impl TestAuthorizer {
    fn install(self, service: &Service) -> Arc<TestAuthorizer> {
        let auth = Arc::new(self);
        service.set_authorizer(auth.clone());
        auth
    }

    fn authorized_count(&self) -> usize {
        self.authorized.lock().unwrap().len()
    }

    fn authenticated_count(&self) -> usize {
        self.authenticated.lock().unwrap().len()
    }
}

fn tcp(env: &Env) -> TcpStream {
    wire::socket(env.addr())
}

/// A plain connection that presented `credential` and was accepted.
fn signed_in(env: &Env, credential: &[u8]) -> (Wire<TcpStream>, Authenticated) {
    let (mut w, answer) = Wire::hello(tcp(env), &Hello::new(false).with_credential());
    assert_eq!(answer.flags, hs::FLAG_CREDENTIAL);
    let ack = w.present(credential).expect("credential accepted");
    (w, ack)
}

/// A plain connection without a credential (as every client today).
fn plain(env: &Env) -> Wire<TcpStream> {
    Wire::hello(tcp(env), &Hello::new(false)).0
}

fn code(r: &Response) -> Option<ErrorCode> {
    match r {
        Response::Error(e) => Some(e.error_code()),
        _ => None,
    }
}

fn status() -> Request {
    Request::Status(m::StatusRequest {})
}

fn register(repo: &str, ws: WorkspaceId) -> Request {
    Request::WorkspaceRegister(register_req(repo, ws))
}

fn put_many(ws: WorkspaceId, op: OperationId, objects: &[(ObjectId, Vec<u8>)]) -> Request {
    Request::ObjectPutMany(put_many_req(ws, op, objects))
}

fn lock_req(ws: WorkspaceId, path: &str) -> Request {
    Request::LockAcquire(m::LockAcquire {
        repo: REPO.into(),
        workspace: ws,
        branch: main_branch(),
        author: "ada".into(),
        paths: vec![path.into()],
    })
}

#[test]
fn denied_mutations_of_one_repository_run_nothing_while_reads_pass() {
    let env = Env::new(Transport::Tcp);
    scribe_server::service::dispatch::repo_create(env.service(), "other").unwrap();
    let ws = WorkspaceId([1; 16]);
    let (op1, op2) = (OperationId([11; 16]), OperationId([12; 16]));
    // Before the authorizer: one accepted change, one lock, and the
    // objects of a second change uploaded but not submitted.
    let first = change(&[("a.txt", Some(b"one".as_slice()), 0)]);
    let second = change(&[("a.txt", Some(b"two".as_slice()), 1)]);
    let mut w = plain(&env);
    assert_eq!(code(&w.call(register(REPO, ws))), None);
    assert_eq!(code(&w.call(put_many(ws, op1, &first.objects))), None);
    match w.call(Request::Submit(submit_req(ws, op1, first.id, "first"))) {
        Response::Submitted(o) => assert_eq!(accepted(&o), 1),
        other => panic!("{other:?}"),
    }
    assert_eq!(code(&w.call(lock_req(ws, "a.txt"))), None);
    assert_eq!(code(&w.call(put_many(ws, op2, &second.objects))), None);
    drop(w);

    let auth = TestAuthorizer {
        deny_mutations_of: Some(REPO.into()),
        ..Default::default()
    }
    .install(env.service());
    let mut w = plain(&env);
    let fresh = b"never stored".to_vec();
    let fresh_id = ObjectId::chunk(ChunkId::of(&fresh));
    let op3 = OperationId([13; 16]);
    let put = m::ObjectPut {
        repo: REPO.into(),
        operation: op3,
        workspace: ws,
        id: fresh_id,
        total_len: fresh.len() as u64,
        offset: 0,
        data: Bytes(fresh.clone()),
    };
    let mutations = vec![
        Request::RepoCreate(m::RepoCreate { name: REPO.into() }),
        register(REPO, WorkspaceId([2; 16])),
        Request::WorkspaceRetire(m::WorkspaceRetire {
            repo: REPO.into(),
            workspace: ws,
        }),
        Request::ObjectPut(put.clone()),
        Request::ObjectPutStaged(put),
        put_many(ws, op3, &[(fresh_id, fresh.clone())]),
        Request::ObjectsPinMissing(m::ObjectsPinMissing {
            repo: REPO.into(),
            operation: op3,
            workspace: ws,
            ids: vec![fresh_id],
        }),
        Request::ObjectsPublish(m::ObjectsPublish { repo: REPO.into() }),
        Request::Submit(submit_req(ws, op2, second.id, "second")),
        lock_req(ws, "b.txt"),
        Request::LockRelease(m::LockRelease {
            repo: REPO.into(),
            workspace: ws,
            paths: vec!["a.txt".into()],
        }),
    ];
    for req in mutations {
        let name = req.name();
        let reply = w.call(req);
        assert_eq!(
            code(&reply),
            Some(ErrorCode::Forbidden),
            "{name}: {reply:?}"
        );
        if let Response::Error(e) = &reply {
            assert!(
                e.message.contains("may not change"),
                "{name}: {}",
                e.message
            );
        }
    }
    // Nothing of them ran.
    let repo = env.service().root().open_repository_by_name(REPO).unwrap();
    let store = env.service().stores().get(&repo.id()).unwrap();
    assert_eq!(repo.head().unwrap(), 1, "the submission was not accepted");
    assert_eq!(repo.recorded_outcome(&op2).unwrap(), None);
    let workspaces: Vec<WorkspaceId> = repo
        .workspaces()
        .unwrap()
        .into_iter()
        .map(|w| w.0)
        .collect();
    assert_eq!(workspaces, vec![ws], "no registration");
    assert!(!store.contains(&fresh_id).unwrap(), "no object stored");
    assert_eq!(pins::count(&repo, ws, op3).unwrap(), 0, "no pin");
    let locks: Vec<String> = repo
        .locks("")
        .unwrap()
        .into_iter()
        .map(|l| l.path)
        .collect();
    assert_eq!(
        locks,
        vec!["a.txt".to_string()],
        "no lock taken or released"
    );

    // Every read of the denied repository passes.
    let b = main_branch();
    let reads = vec![
        status(),
        Request::RepoList(m::RepoListRequest {}),
        Request::WorkspaceList(m::WorkspaceListRequest { repo: REPO.into() }),
        Request::ObjectsMissing(m::ObjectsMissing {
            repo: REPO.into(),
            ids: vec![fresh_id],
        }),
        Request::ObjectGet(m::ObjectGet {
            repo: REPO.into(),
            id: first.objects[0].0,
            offset: 0,
            max_len: 0,
        }),
        Request::ObjectGetMany(m::ObjectGetMany {
            repo: REPO.into(),
            ids: vec![first.objects[0].0],
        }),
        Request::OperationOutcome(m::OperationOutcome {
            repo: REPO.into(),
            operation: op1,
        }),
        Request::Delta(m::Delta {
            repo: REPO.into(),
            branch: b,
            from: 0,
            to: 0,
            after: String::new(),
            limit: 0,
        }),
        Request::List(m::List {
            repo: REPO.into(),
            branch: b,
            change: 0,
            prefix: String::new(),
            recursive: true,
            after: String::new(),
            limit: 0,
        }),
        Request::Stat(m::Stat {
            repo: REPO.into(),
            branch: b,
            change: 0,
            path: "a.txt".into(),
        }),
        Request::History(m::History {
            repo: REPO.into(),
            branch: b,
            path: "a.txt".into(),
            before: 0,
            limit: 0,
        }),
        Request::Log(m::Log {
            repo: REPO.into(),
            branch: b,
            before: 0,
            limit: 0,
        }),
        Request::Describe(m::Describe {
            repo: REPO.into(),
            change: 1,
            after: String::new(),
            limit: 0,
        }),
        Request::LockList(m::LockList {
            repo: REPO.into(),
            prefix: String::new(),
            after: String::new(),
            limit: 0,
        }),
    ];
    for req in reads {
        let name = req.name();
        let reply = w.call(req);
        assert_eq!(code(&reply), None, "{name}: {reply:?}");
        assert!(reply.opcode() & 0x8000 != 0);
    }
    // Mutations of another repository pass.
    assert_eq!(code(&w.call(register("other", WorkspaceId([3; 16])))), None);
    match w.call(Request::RepoCreate(m::RepoCreate {
        name: "third".into(),
    })) {
        Response::RepoCreated(info) => assert_eq!(info.name, "third"),
        other => panic!("{other:?}"),
    }
    // One authorization per request, each as the connection's principal.
    let authorized = auth.authorized.lock().unwrap().clone();
    assert_eq!(authorized.len(), 11 + 14 + 2);
    assert!(authorized
        .iter()
        .all(|(p, ..)| *p == Principal::anonymous()));
    assert_eq!(auth.authenticated_count(), 1);

    // The in-process transport is judged the same way, as its local principal.
    let mut session = Session::new();
    let reply = env.service().handle(
        &mut session,
        Request::Submit(submit_req(ws, op2, second.id, "second")),
    );
    assert_eq!(code(&reply), Some(ErrorCode::Forbidden));
    assert_eq!(code(&env.service().handle(&mut session, status())), None);
    let last = auth.authorized.lock().unwrap().last().unwrap().clone();
    assert_eq!(last.0, Principal::local());
    assert_eq!(repo.head().unwrap(), 1);

    // With the open authorizer back, the workspace was never retired: it
    // may still lock.
    env.service()
        .set_authorizer(Arc::new(scribe_server::service::OpenAuthorizer));
    assert_eq!(code(&w.call(lock_req(ws, "b.txt"))), None);
}

#[test]
fn the_principal_authenticate_returns_is_the_one_authorize_sees() {
    let env = Env::new(Transport::Tcp);
    let auth = TestAuthorizer::default().install(env.service());
    let (mut alice, ack) = signed_in(&env, b"alice");
    assert_eq!(
        ack,
        Authenticated {
            kind: PrincipalKind::User,
            id: Some(id_of(b"alice")),
            name: "alice".into(),
        }
    );
    let (mut bob, _) = signed_in(&env, b"bob");
    let mut nobody = plain(&env);
    let alice_ws = WorkspaceId([0xa1; 16]);
    // Interleaved requests of three connections.
    assert_eq!(code(&alice.call(register(REPO, alice_ws))), None);
    assert_eq!(code(&bob.call(status())), None);
    assert_eq!(code(&nobody.call(status())), None);
    assert_eq!(code(&alice.call(status())), None);
    assert_eq!(
        code(&bob.call(register(REPO, WorkspaceId([0xb0; 16])))),
        None
    );

    let seen: Vec<(String, &str)> = auth
        .authorized
        .lock()
        .unwrap()
        .iter()
        .map(|(p, r, ..)| (p.name.clone(), *r))
        .collect();
    assert_eq!(
        seen,
        vec![
            ("alice".to_string(), "WorkspaceRegister"),
            ("bob".to_string(), "Status"),
            ("anonymous".to_string(), "Status"),
            ("alice".to_string(), "Status"),
            ("bob".to_string(), "WorkspaceRegister"),
        ]
    );
    let kinds: Vec<PrincipalKind> = auth
        .authorized
        .lock()
        .unwrap()
        .iter()
        .map(|(p, ..)| p.kind)
        .collect();
    assert_eq!(kinds[2], PrincipalKind::Anonymous);
    assert_eq!(kinds[0], PrincipalKind::User);
    // Authenticated once per connection.
    assert_eq!(auth.authenticated_count(), 3);
    // The principal's id owns the workspaces it registers.
    let repo = env.service().root().open_repository_by_name(REPO).unwrap();
    let owners: Vec<(WorkspaceId, Option<[u8; 16]>)> = repo
        .workspaces()
        .unwrap()
        .into_iter()
        .map(|(id, rec)| (id, rec.owner))
        .collect();
    assert_eq!(
        owners,
        vec![
            (alice_ws, Some(id_of(b"alice"))),
            (WorkspaceId([0xb0; 16]), Some(id_of(b"bob"))),
        ]
    );
}

#[test]
fn a_credential_frame_reaches_authenticate_byte_for_byte() {
    let env = Env::new(Transport::Tcp);
    let auth = TestAuthorizer::default().install(env.service());
    let largest: Vec<u8> = (0..hs::MAX_CREDENTIAL_BYTES)
        .map(|i| (i % 251) as u8)
        .collect();
    for credential in [
        b"x".to_vec(),
        b"a longer opaque credential".to_vec(),
        largest,
    ] {
        let before = auth.authenticated_count();
        let (mut w, ack) = signed_in(&env, &credential);
        assert_eq!(ack.id, Some(id_of(&credential)));
        let (got, peer) = auth.authenticated.lock().unwrap()[before].clone();
        assert_eq!(got, Credential::Presented(credential.clone()));
        assert_eq!(peer.address, Some(w.stream.local_addr().unwrap()));
        assert!(!peer.tls);
        assert!(peer.certificates.is_empty());
        assert_eq!(peer.channel_binding, None);
        // Then requests are served as usual.
        assert!(matches!(w.call(status()), Response::Status(_)));
    }
    // Without the flag, authenticate still runs, once, with no credential.
    let before = auth.authenticated_count();
    let mut w = plain(&env);
    assert!(matches!(w.call(status()), Response::Status(_)));
    assert_eq!(auth.authenticated_count(), before + 1);
    assert_eq!(
        auth.authenticated.lock().unwrap()[before].0,
        Credential::None
    );
}

#[test]
fn the_open_authorizer_accepts_a_credential_and_serves_anonymously() {
    let env = Env::new(Transport::Tcp);
    let (mut w, ack) = signed_in(&env, b"some credential");
    assert_eq!(
        ack,
        Authenticated {
            kind: PrincipalKind::Anonymous,
            id: None,
            name: "anonymous".into(),
        }
    );
    assert!(matches!(w.call(status()), Response::Status(_)));
}

#[test]
fn refused_credentials_get_the_authorizers_code_then_the_close() {
    let env = Env::new(Transport::Tcp);
    let auth = TestAuthorizer::default().install(env.service());
    for (credential, want) in [
        (b"mallory".as_slice(), ErrorCode::Forbidden),
        (b"later".as_slice(), ErrorCode::AuthUnavailable),
    ] {
        let (mut w, _) = Wire::hello(tcp(&env), &Hello::new(false).with_credential());
        let e = w.present(credential).unwrap_err();
        assert_eq!(e.error_code(), want);
        assert!(closed(&mut w.stream));
    }
    assert_eq!(auth.authenticated_count(), 2);
    assert_eq!(auth.authorized_count(), 0, "no request was served");

    // A server that needs a credential refuses a client without one: the
    // error frame comes in place of its first reply.
    let env = Env::new(Transport::Tcp);
    let auth = TestAuthorizer {
        require_credential: true,
        ..Default::default()
    }
    .install(env.service());
    let mut w = plain(&env);
    let reply = w.call(status());
    assert_eq!(code(&reply), Some(ErrorCode::Forbidden), "{reply:?}");
    assert!(closed(&mut w.stream));
    assert_eq!(auth.authorized_count(), 0);
    let (mut w, _) = signed_in(&env, b"carol");
    assert!(matches!(w.call(status()), Response::Status(_)));
}

#[test]
fn oversized_or_malformed_credential_frames_are_refused_and_closed() {
    let env = Env::new(Transport::Tcp);
    let auth = TestAuthorizer::default().install(env.service());
    let good = hs::credential_frame(b"abc").unwrap();
    let mut cases: Vec<(&str, Vec<u8>, ErrorCode)> = Vec::new();
    // A length word beyond the credential limit (but within a request
    // frame's): refused before the body is read.
    cases.push((
        "oversized",
        (hs::MAX_CREDENTIAL_FRAME_BYTES + 1).to_le_bytes().to_vec(),
        ErrorCode::LimitExceeded,
    ));
    cases.push((
        "huge",
        u32::MAX.to_le_bytes().to_vec(),
        ErrorCode::LimitExceeded,
    ));
    cases.push((
        "too short",
        3u32.to_le_bytes().to_vec(),
        ErrorCode::Malformed,
    ));
    // A request in the credential's place.
    let create = Request::RepoCreate(m::RepoCreate {
        name: "long enough".into(),
    });
    cases.push((
        "a request",
        request_frame(&create, false),
        ErrorCode::Malformed,
    ));
    let mut compressed = good.clone();
    compressed[6] = 1;
    cases.push(("compressed", compressed, ErrorCode::Malformed));
    let mut wrong_len = good.clone();
    wrong_len[7] = 2;
    cases.push(("inner length", wrong_len, ErrorCode::Malformed));
    let mut empty = 7u32.to_le_bytes().to_vec();
    empty.extend_from_slice(&[0x02, 0x00, 0, 0, 0, 0, 0]);
    cases.push(("empty", empty, ErrorCode::Malformed));
    for (what, bytes, want) in cases {
        let (mut w, _) = Wire::hello(tcp(&env), &Hello::new(false).with_credential());
        w.stream.write_all(&bytes).unwrap();
        let e = w.credential_reply().unwrap_err();
        assert_eq!(e.error_code(), want, "{what}: {}", e.message);
        assert!(closed(&mut w.stream), "{what}");
    }
    assert_eq!(auth.authenticated_count(), 0, "never authenticated");

    // A credential frame without the flag is no request.
    let mut w = plain(&env);
    w.stream.write_all(&good).unwrap();
    let reply = decode_response(&read_frame_body(&mut w.stream), false).unwrap();
    assert_eq!(code(&reply), Some(ErrorCode::Malformed));
    assert!(closed(&mut w.stream));
    // The server still serves everyone else.
    let (mut w, _) = signed_in(&env, b"dave");
    assert!(matches!(w.call(status()), Response::Status(_)));
}

#[test]
fn a_missing_credential_frame_times_out_with_the_handshake() {
    let opts = ListenOptions {
        timeouts: scribe_server::Timeouts {
            handshake: Duration::from_millis(300),
            ..Default::default()
        },
        ..Default::default()
    };
    let env = Env::builder(Transport::Tcp).listen(opts).start();
    let auth = TestAuthorizer::default().install(env.service());
    let (mut w, _) = Wire::hello(tcp(&env), &Hello::new(false).with_credential());
    let started = std::time::Instant::now();
    assert!(closed(&mut w.stream));
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(auth.authenticated_count(), 0);
}

#[test]
fn a_client_without_the_flag_sees_exactly_todays_bytes() {
    let env = Env::new(Transport::Tcp);
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/wire");
    let hello = std::fs::read(fixtures.join("hello.bin")).unwrap();
    let answer = std::fs::read(fixtures.join("answer-accepted.bin")).unwrap();
    let mut s = tcp(&env);
    s.write_all(&hello).unwrap();
    let mut got = [0u8; HANDSHAKE_LEN];
    s.read_exact(&mut got).unwrap();
    assert_eq!(got.as_slice(), answer.as_slice(), "the committed answer");
    // The next frame is the reply to the first request: no acknowledgement.
    let status_frame = std::fs::read(fixtures.join("request-0001.bin")).unwrap();
    s.write_all(&status_frame).unwrap();
    let reply = decode_response(&read_frame_body(&mut s), true).unwrap();
    assert!(matches!(reply, Response::Status(_)), "{reply:?}");
}

#[test]
fn over_the_limit_a_credential_gets_busy_instead_of_its_acknowledgement() {
    let opts = ListenOptions {
        max_connections: 1,
        ..Default::default()
    };
    let env = Env::builder(Transport::Tcp).listen(opts).start();
    let auth = TestAuthorizer::default().install(env.service());
    let mut first = plain(&env);
    assert!(matches!(first.call(status()), Response::Status(_)));
    let (mut second, _) = Wire::hello(tcp(&env), &Hello::new(false).with_credential());
    let e = second.present(b"erin").unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::ServerBusy);
    assert!(closed(&mut second.stream));
    assert_eq!(
        auth.authenticated_count(),
        1,
        "only the admitted connection"
    );
}

#[test]
fn tls_peers_carry_the_channel_binding_the_client_computes() {
    let env = Env::new(Transport::Tls);
    let auth = TestAuthorizer::default().install(env.service());
    let sock = wire::socket(env.addr());
    let local = sock.local_addr().unwrap();
    let (mut w, _) = Wire::hello(
        wire::tls_stream(sock, env.pki().client_config(), "localhost"),
        &Hello::new(false).with_credential(),
    );
    // The TLS handshake is complete once the answer has arrived.
    let binding = w
        .stream
        .conn
        .export_keying_material([0u8; 32], CHANNEL_BINDING_LABEL, None)
        .unwrap();
    let ack = w.present(b"frank").unwrap();
    assert_eq!(ack.name, "frank");
    assert!(matches!(w.call(status()), Response::Status(_)));
    let (credential, peer) = auth.authenticated.lock().unwrap()[0].clone();
    assert_eq!(credential, Credential::Presented(b"frank".to_vec()));
    assert!(peer.tls);
    assert_eq!(peer.address, Some(local));
    assert!(peer.certificates.is_empty(), "the server asks for none");
    assert_eq!(peer.channel_binding, Some(binding));
    assert_ne!(binding, [0u8; 32]);
}

//! A team server: the real `scribe-server` binary bound to a real auth
//! service (the `scribe-auth` library's `serve` over TLS on 127.0.0.1 in
//! this test process) with `auth-init`, then served to raw protocol
//! clients over TLS with credential certificates. Users, grants and
//! credentials are made through the auth library before it serves.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use scribe_auth::rows::{
    CaFamily, CredentialKind, CredentialRow, GrantRow, Key, Role, UserKind, NEVER_EXPIRES,
};
use scribe_auth::service::{serve, ServeOptions};
use scribe_auth::{AdminRequest, AuthDir, Id, InitOptions, KeyId, Password};
use scribe_format::wire::message as m;
use scribe_format::wire::{Hello, Request, Response};
use scribe_format::{ErrorCode, OperationId, WorkspaceId};
use scribe_server::team::sau2::Sau2Client;
use scribe_testkit::change::{accepted, change, main_branch, put_many_req, submit_req, Requests};
use scribe_testkit::wire::{self, TlsStream, Wire};
use scribe_testkit::REPO;

const NAMESPACE: &str = "studio";
const OTHER: &str = "other";

/// A certificate and its key, PEM.
#[derive(Clone)]
struct Cred {
    cert: String,
    key: String,
}

struct Team {
    tmp: tempfile::TempDir,
    data: PathBuf,
    access_ca: String,
    auth_url: String,
    creds: HashMap<&'static str, Cred>,
    users: HashMap<&'static str, Id>,
    server: Option<Child>,
    addr: String,
}

impl Drop for Team {
    fn drop(&mut self) {
        self.stop();
    }
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_scribe-server"))
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run scribe-server")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn wait_for(path: &Path, what: &str, child: Option<&mut Child>) -> String {
    let start = Instant::now();
    let mut child = child;
    loop {
        if let Ok(t) = std::fs::read_to_string(path) {
            if t.ends_with('\n') {
                return t.trim().to_owned();
            }
        }
        if let Some(c) = child.as_mut() {
            if let Some(status) = c.try_wait().unwrap() {
                panic!("{what} exited with {status} before listening");
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{what} did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn admin_request(actor: Id, command: &'static str) -> AdminRequest<'static> {
    AdminRequest {
        actor,
        operation: Id::random(),
        intent: *blake3::hash(&Id::random().0).as_bytes(),
        command,
        arguments: &[],
        now_ms: scribe_auth::now_ms(),
    }
}

/// A `user` credential for `username`, issued by the credential CA and
/// (when `store`) registered; expiring at `expires_ms`.
fn issue(dir: &mut AuthDir, actor: Id, username: &str, expires_ms: u64, store: bool) -> Cred {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let credential = Id::random();
    let now = scribe_auth::now_ms();
    let created = now.saturating_sub(3_600_000);
    let cert = dir
        .signer(CaFamily::Credential)
        .unwrap()
        .issue(
            &key,
            credential,
            CredentialKind::User,
            username,
            created,
            expires_ms,
        )
        .unwrap();
    if store {
        let row = CredentialRow {
            kind: CredentialKind::User,
            subject: username.to_owned(),
            expires_ms,
            enabled: true,
            label: "test".into(),
            key_id: KeyId::of_spki_der(&key.public_key_der()),
            created_ms: created,
            parent: None,
            generation: None,
        };
        let r = dir
            .administer(&admin_request(actor, "credential-add"), |tx| {
                tx.insert_credential(credential, &row, &cert)?;
                Ok(vec![])
            })
            .unwrap();
        assert!(
            matches!(r, scribe_format::sau2::Sau2Result::Rows(_)),
            "{r:?}"
        );
    }
    Cred {
        cert,
        key: key.serialize_pem(),
    }
}

fn add_user(dir: &mut AuthDir, actor: Id, name: &str, grant: Option<Role>) -> Id {
    let r = dir
        .add_user(
            &admin_request(actor, "user-add"),
            name,
            false,
            UserKind::Person,
            None,
        )
        .unwrap();
    let scribe_format::sau2::Sau2Result::Rows(rows) = r else {
        panic!("{r:?}")
    };
    let id = Id::parse(&rows[0][0]).unwrap();
    if let Some(role) = grant {
        dir.administer(&admin_request(actor, "grant"), |tx| {
            tx.put(
                &Key::Grant {
                    namespace: NAMESPACE.into(),
                    repository: REPO.into(),
                    user: id,
                },
                &GrantRow { role },
            )?;
            Ok(vec![])
        })
        .unwrap();
    }
    id
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_name() != "LOCK" {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// Serve an auth directory from a thread; its `sau2://localhost:PORT`.
fn serve_auth(dir: AuthDir, runtime: &Path) -> String {
    let opts = ServeOptions {
        listen: "127.0.0.1:0".into(),
        runtime_dir: Some(runtime.to_owned()),
        hosts: Vec::new(),
        max_connections: 32,
        session_ms: 3_600_000,
    };
    std::thread::spawn(move || serve(dir, opts));
    let listen = wait_for(&runtime.join("listen"), "the auth service", None);
    format!("sau2://localhost:{}", listen.rsplit_once(':').unwrap().1)
}

impl Team {
    /// An auth service with users `alice` and `bob` (writers of the
    /// repository), `carol` (maintainer), `erin` (reader) and `dave` (no
    /// grant); a copy of its state from before it serves under `old/`; a
    /// data root with repositories `demo` and `other` bound to it with
    /// `auth-init`, served by the real binary.
    fn start() -> Team {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_owned();
        let (mut dir, report) = AuthDir::init(InitOptions {
            data: root.join("auth"),
            pepper_file: root.join("pepper"),
            witness_file: root.join("witness"),
            trust_domain: "studio.example".into(),
            admin_username: "admin".into(),
            admin_password: Some(Password::new("correct horse battery".into()).unwrap()),
            now_ms: scribe_auth::now_ms(),
        })
        .unwrap();
        let admin = report.admin_id;
        let mut creds = HashMap::new();
        let mut users = HashMap::new();
        creds.insert(
            "admin",
            Cred {
                cert: report.admin_certificate_pem.clone(),
                key: report.admin_private_key_pem.clone(),
            },
        );
        for (name, role) in [
            ("alice", Some(Role::Writer)),
            ("bob", Some(Role::Writer)),
            ("carol", Some(Role::Maintainer)),
            ("erin", Some(Role::Reader)),
            ("dave", None),
        ] {
            users.insert(name, add_user(&mut dir, admin, name, role));
            creds.insert(name, issue(&mut dir, admin, name, NEVER_EXPIRES, true));
        }
        let past = scribe_auth::now_ms() - 60_000;
        creds.insert("expired", issue(&mut dir, admin, "alice", past, true));
        creds.insert(
            "forged",
            issue(&mut dir, admin, "alice", NEVER_EXPIRES, false),
        );
        let access_ca = dir.trust_anchor_pem(CaFamily::Access).unwrap();
        let auth_url = serve_auth(dir, &root.join("auth-run"));

        let data = root.join("data");
        let d = data.to_str().unwrap();
        for args in [
            vec!["init", "--data", d],
            vec!["repo", "create", "--data", d, REPO],
            vec!["repo", "create", "--data", d, OTHER],
        ] {
            let out = run(&args);
            assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        }
        let admin_file = root.join("admin.pem");
        std::fs::write(
            &admin_file,
            format!("{}{}", creds["admin"].cert, creds["admin"].key),
        )
        .unwrap();
        let ca_file = root.join("access-ca.pem");
        std::fs::write(&ca_file, &access_ca).unwrap();
        // The operator is signed in as the administrator: the login is
        // stored as `scribe login` stores it, and auth-init uses it.
        let login = root.join("login");
        std::fs::create_dir_all(&login).unwrap();
        std::fs::copy(&admin_file, login.join("credential.pem")).unwrap();
        std::fs::copy(&ca_file, login.join("auth-ca.pem")).unwrap();
        std::fs::write(
            login.join("auth-service"),
            format!("{}\n", auth_url.strip_prefix("sau2://").unwrap()),
        )
        .unwrap();
        let out = bin()
            .args(["auth-init", "--data", d, "--namespace", NAMESPACE])
            .args(["--name", "depot-1", "--host", "depot.example"])
            .env("SCRIBE_CONFIG_DIR", &login)
            .env_remove("SCRIBE_CREDENTIAL")
            .output()
            .unwrap();
        assert!(out.status.success(), "auth-init: {}", text(&out.stderr));
        // The auth state as it is now (the service is idle: every change
        // committed durably), as a backup put back later would be.
        copy_dir(&root.join("auth"), &root.join("old/auth"));
        std::fs::copy(root.join("witness"), root.join("old/witness")).unwrap();
        let mut team = Team {
            tmp,
            data,
            access_ca,
            auth_url,
            creds,
            users,
            server: None,
            addr: String::new(),
        };
        team.serve();
        team
    }

    fn serve(&mut self) {
        let runtime = self.tmp.path().join("server-run");
        let _ = std::fs::remove_file(runtime.join("listen"));
        let mut child = bin()
            .args(["serve", "--data", self.data.to_str().unwrap()])
            .args(["--listen", "127.0.0.1:0", "--auth-recheck", "0s"])
            .arg("--runtime-dir")
            .arg(&runtime)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.addr = wait_for(&runtime.join("listen"), "scribe-server", Some(&mut child));
        self.server = Some(child);
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.server.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// A TLS client configuration trusting the access CA, presenting `cred`.
    fn config(&self, cred: Option<&Cred>) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(self.access_ca.as_bytes()) {
            roots.add(c.unwrap()).unwrap();
        }
        let b = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
        Arc::new(match cred {
            None => b.with_no_client_auth(),
            Some(c) => b
                .with_client_auth_cert(
                    CertificateDer::pem_slice_iter(c.cert.as_bytes())
                        .collect::<Result<Vec<_>, _>>()
                        .unwrap(),
                    PrivateKeyDer::from_pem_slice(c.key.as_bytes()).unwrap(),
                )
                .unwrap(),
        })
    }

    fn sock(&self) -> std::net::SocketAddr {
        self.addr.parse().unwrap()
    }

    /// A connection as `user` (accepted handshake).
    fn connect(&self, user: &str) -> Wire<TlsStream> {
        wire::tls(
            self.sock(),
            self.config(Some(&self.creds[user])),
            "localhost",
        )
    }

    /// The hello exchange with `cred`: the TLS or handshake error, if any.
    fn hello_with(&self, cred: Option<&Cred>) -> Result<TlsStream, std::io::Error> {
        use std::io::{Read, Write};
        let mut s = wire::tls_stream(wire::socket(self.sock()), self.config(cred), "localhost");
        s.write_all(&Hello::new(false).encode())?;
        s.flush()?;
        let mut answer = [0u8; 32];
        s.read_exact(&mut answer)?;
        Ok(s)
    }

    /// `user`'s own SAU2 client of the auth service.
    fn auth_client(&self, user: &str) -> Sau2Client {
        let c = &self.creds[user];
        Sau2Client::new(&self.auth_url, &self.access_ca, (&c.cert, &c.key)).unwrap()
    }
}

/// The server refused the TLS session over the client's certificate (a
/// fatal alert naming it), not some other I/O failure.
fn tls_refusal(e: &std::io::Error) -> bool {
    let t = e.to_string();
    t.contains("fatal alert") && (t.contains("Certificate") || t.contains("UnknownCA"))
}

fn code_of(r: &Response) -> Option<ErrorCode> {
    match r {
        Response::Error(e) => ErrorCode::from_number(e.code),
        _ => None,
    }
}

fn refused(r: Response, code: ErrorCode) -> String {
    match &r {
        Response::Error(e) if e.code == code.number() => e.message.clone(),
        other => panic!("expected {code}, got {other:?}"),
    }
}

fn ok(r: Response) -> Response {
    assert!(code_of(&r).is_none(), "{r:?}");
    assert!(!matches!(r, Response::Error(_)), "{r:?}");
    r
}

fn register(repo: &str, ws: WorkspaceId) -> Request {
    Request::WorkspaceRegister(scribe_testkit::change::register_req(repo, ws))
}

fn lock(ws: WorkspaceId, path: &str) -> Request {
    Request::LockAcquire(m::LockAcquire {
        repo: REPO.into(),
        workspace: ws,
        branch: main_branch(),
        author: "someone".into(),
        paths: vec![path.into()],
    })
}

fn unlock(ws: WorkspaceId, path: &str) -> Request {
    Request::LockRelease(m::LockRelease {
        repo: REPO.into(),
        workspace: ws,
        paths: vec![path.into()],
    })
}

fn retire(ws: WorkspaceId) -> Request {
    Request::WorkspaceRetire(m::WorkspaceRetire {
        repo: REPO.into(),
        workspace: ws,
    })
}

fn list_workspaces(repo: &str) -> Request {
    Request::WorkspaceList(m::WorkspaceListRequest { repo: repo.into() })
}

#[test]
fn a_team_server_admits_only_valid_credentials_of_its_auth_service() {
    let team = Team::start();
    // A stored, enabled credential: served as its user.
    let mut alice = team.connect("alice");
    assert!(alice.status().repositories >= 2);
    // No client certificate: the TLS handshake is refused.
    let e = team.hello_with(None).unwrap_err();
    assert!(tls_refusal(&e), "{e}");
    // A certificate of another CA (same subject, same kind of key).
    let stranger = {
        let ca_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = p.self_signed(&ca_key).unwrap();
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let cert = p.signed_by(&key, &ca, &ca_key).unwrap();
        Cred {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    };
    let e = team.hello_with(Some(&stranger)).unwrap_err();
    assert!(tls_refusal(&e), "{e}");
    // An expired credential: its certificate is out of date.
    let e = team.hello_with(Some(&team.creds["expired"])).unwrap_err();
    assert!(tls_refusal(&e), "{e}");
    // Signed by the real CA but never issued (not stored): the auth
    // service does not know it.
    let mut w = Wire::hello(
        wire::tls_stream(
            wire::socket(team.sock()),
            team.config(Some(&team.creds["forged"])),
            "localhost",
        ),
        &Hello::new(false),
    )
    .0;
    let r = w.try_call(Request::Status(m::StatusRequest {})).unwrap();
    let why = refused(r, ErrorCode::Unauthenticated);
    assert!(why.contains("not known"), "{why}");
    // The server's own certificate names the hosts given to auth-init.
    let dave = Some(&team.creds["dave"]);
    let mut w = wire::tls(team.sock(), team.config(dave), "depot.example");
    ok(w.ask(Request::Status(m::StatusRequest {})));
    let mut s = wire::tls_stream(
        wire::socket(team.sock()),
        team.config(dave),
        "elsewhere.example",
    );
    let e = std::io::Write::write_all(&mut s, &Hello::new(false).encode())
        .and_then(|_| std::io::Read::read_exact(&mut s, &mut [0u8; 32]))
        .unwrap_err();
    assert!(e.to_string().contains("not valid for name"), "{e}");
    // The server verbs of the auth service: registering needs an
    // administrator; resolve and revision need a server credential.
    let bob = team.auth_client("bob");
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let e = bob
        .rows(
            "server-register",
            vec![
                "rogue".into(),
                NAMESPACE.into(),
                hex::encode(key.public_key_der()),
            ],
        )
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Forbidden, "{e:?}");
    for verb in ["resolve", "revision"] {
        let args = if verb == "resolve" {
            vec!["00".into()]
        } else {
            vec![]
        };
        let e = bob.rows(verb, args).unwrap_err();
        assert_eq!(e.code, ErrorCode::Forbidden, "{verb}: {e:?}");
    }
}

#[test]
fn a_revoked_credential_stops_working_once_the_revision_changes() {
    let team = Team::start();
    let mut open = team.connect("alice");
    ok(open.ask(list_workspaces(REPO)));
    // alice signs out: the auth service disables the credential and
    // advances its revision.
    team.auth_client("alice")
        .rows("logout", vec![])
        .expect("logout");
    // The open connection's next request: the server sees the new
    // revision, asks again, and is told the credential is disabled.
    let why = refused(open.ask(list_workspaces(REPO)), ErrorCode::Unauthenticated);
    assert!(why.contains("disabled"), "{why}");
    // A new connection with it is refused as well.
    let mut again = Wire::hello(
        wire::tls_stream(
            wire::socket(team.sock()),
            team.config(Some(&team.creds["alice"])),
            "localhost",
        ),
        &Hello::new(false),
    )
    .0;
    let r = again
        .try_call(Request::Status(m::StatusRequest {}))
        .unwrap();
    refused(r, ErrorCode::Unauthenticated);
    // Others are unaffected.
    ok(team.connect("bob").ask(list_workspaces(REPO)));
}

#[test]
fn grants_and_workspace_ownership_decide_every_request() {
    let team = Team::start();
    let (mut alice, mut bob, mut carol) = (
        team.connect("alice"),
        team.connect("bob"),
        team.connect("carol"),
    );
    let (mut erin, mut dave) = (team.connect("erin"), team.connect("dave"));
    // No grant: nothing of the repository, not even its name.
    refused(dave.ask(list_workspaces(REPO)), ErrorCode::Forbidden);
    assert!(dave.repo_list().is_empty());
    let names: Vec<String> = alice.repo_list().into_iter().map(|r| r.name).collect();
    assert_eq!(
        names,
        vec![REPO.to_string()],
        "alice sees her repository only"
    );
    // A reader reads and registers a workspace of its own (to sync), but
    // submits nothing through it.
    ok(erin.ask(list_workspaces(REPO)));
    ok(erin.ask(register(REPO, WorkspaceId([5; 16]))));
    // Cross-repository: a writer of one repository has nothing in another.
    refused(alice.ask(list_workspaces(OTHER)), ErrorCode::Forbidden);
    refused(
        alice.ask(register(OTHER, WorkspaceId([6; 16]))),
        ErrorCode::Forbidden,
    );
    // Creating repositories needs admin.
    refused(
        alice.ask(Request::RepoCreate(m::RepoCreate {
            name: "mine".into(),
        })),
        ErrorCode::Forbidden,
    );
    // alice registers her workspace and submits through it; the change's
    // author is her username, whatever the request said.
    let wa = WorkspaceId([1; 16]);
    ok(alice.ask(register(REPO, wa)));
    let ch = change(&[("art/hero.psd", Some(b"hero v1"), 0)]);
    let o = alice.upload_and_submit(wa, OperationId([10; 16]), &ch, "first");
    accepted(&o);
    let log = match ok(alice.ask(Request::Log(m::Log {
        repo: REPO.into(),
        branch: main_branch(),
        before: 0,
        limit: 10,
    }))) {
        Response::Log(l) => l,
        other => panic!("{other:?}"),
    };
    assert_eq!(log.commits[0].author, "alice");
    // The commit envelope names her user id as the authenticated actor.
    let envelope = alice.object(REPO, scribe_format::ObjectId::commit(log.commits[0].commit));
    let envelope = scribe_format::commit::CommitEnvelopeV5::decode(&envelope).unwrap();
    assert_eq!(envelope.actor, Some(team.users["alice"].0));
    assert_eq!(envelope.payload.author, "alice");
    // bob may not register alice's workspace id, nor act through it.
    refused(bob.ask(register(REPO, wa)), ErrorCode::Forbidden);
    let ch2 = change(&[("art/villain.psd", Some(b"villain"), 0)]);
    refused(
        bob.ask(Request::ObjectPutMany(put_many_req(
            wa,
            OperationId([11; 16]),
            &ch2.objects,
        ))),
        ErrorCode::Forbidden,
    );
    refused(
        bob.ask(Request::Submit(submit_req(
            wa,
            OperationId([11; 16]),
            ch.id,
            "as alice",
        ))),
        ErrorCode::Forbidden,
    );
    refused(bob.ask(lock(wa, "art/hero.psd")), ErrorCode::Forbidden);
    // alice locks; bob (writer) cannot release her lock, carol
    // (maintainer) can.
    ok(alice.ask(lock(wa, "art/hero.psd")));
    let wb = WorkspaceId([2; 16]);
    ok(bob.ask(register(REPO, wb)));
    let why = refused(bob.ask(unlock(wa, "art/hero.psd")), ErrorCode::Forbidden);
    assert!(why.contains("maintainer"), "{why}");
    let released = match ok(carol.ask(unlock(wa, "art/hero.psd"))) {
        Response::LocksReleased(r) => r,
        other => panic!("{other:?}"),
    };
    assert_eq!(released.locks.len(), 1);
    // Retiring another user's workspace: refused to a writer, allowed to
    // a maintainer; the owner may retire their own.
    refused(bob.ask(retire(wa)), ErrorCode::Forbidden);
    ok(bob.ask(retire(wb)));
    ok(carol.ask(retire(wa)));
}

#[test]
fn operation_ids_are_claimed_by_intent_and_owner() {
    let team = Team::start();
    let (mut alice, mut bob) = (team.connect("alice"), team.connect("bob"));
    let (wa, wb) = (WorkspaceId([1; 16]), WorkspaceId([2; 16]));
    ok(alice.ask(register(REPO, wa)));
    ok(bob.ask(register(REPO, wb)));
    let op = OperationId([42; 16]);
    let ch = change(&[("a.txt", Some(b"one"), 0)]);
    accepted(&alice.upload_and_submit(wa, op, &ch, "one"));
    // The same operation id with another intent (another message).
    let why = refused(
        alice.ask(Request::Submit(submit_req(wa, op, ch.id, "another"))),
        ErrorCode::OperationIntentMismatch,
    );
    assert!(why.contains("intent"), "{why}");
    // The same intent again is a retry: the recorded outcome.
    match ok(alice.ask(Request::Submit(submit_req(wa, op, ch.id, "one")))) {
        Response::Submitted(o) => assert_eq!(accepted(&o), 1),
        other => panic!("{other:?}"),
    }
    // Another user with alice's operation id: refused, in their own
    // workspace, for submits and uploads alike.
    let ch2 = change(&[("b.txt", Some(b"two"), 0)]);
    refused(
        bob.ask(Request::ObjectPutMany(put_many_req(wb, op, &ch2.objects))),
        ErrorCode::Forbidden,
    );
    refused(
        bob.ask(Request::Submit(submit_req(wb, op, ch2.id, "two"))),
        ErrorCode::Forbidden,
    );
}

#[test]
fn a_server_that_saw_a_newer_auth_revision_refuses_an_older_auth_state() {
    let mut team = Team::start();
    ok(team.connect("alice").ask(list_workspaces(REPO)));
    // Any administrative change advances the revision; the server sees it.
    team.auth_client("bob").rows("logout", vec![]).unwrap();
    refused(
        team.connect("bob").ask(list_workspaces(REPO)),
        ErrorCode::Unauthenticated,
    );
    // The auth service's database is put back to the copy from before
    // (with its witness, so the service itself starts) and the server is
    // pointed at it.
    team.stop();
    let root = team.tmp.path().to_owned();
    let old = AuthDir::open(
        &root.join("old/auth"),
        &root.join("pepper"),
        &root.join("old/witness"),
    )
    .unwrap();
    let old_url = serve_auth(old, &root.join("old-run"));
    let service = team.data.join("auth/service");
    let settings = std::fs::read_to_string(&service).unwrap();
    let new_addr = team.auth_url.strip_prefix("sau2://").unwrap();
    let old_addr = old_url.strip_prefix("sau2://").unwrap();
    std::fs::write(&service, settings.replace(new_addr, old_addr)).unwrap();
    team.serve();
    // The old state would let bob in again: the server refuses to act on it.
    let mut w = Wire::hello(
        wire::tls_stream(
            wire::socket(team.sock()),
            team.config(Some(&team.creds["bob"])),
            "localhost",
        ),
        &Hello::new(false),
    )
    .0;
    let why = refused(
        w.try_call(Request::Status(m::StatusRequest {})).unwrap(),
        ErrorCode::AuthUnavailable,
    );
    assert!(why.contains("older"), "{why}");
}

#[test]
fn serving_an_auth_data_root_needs_its_auth_files_and_no_other_tls() {
    let mut team = Team::start();
    team.stop();
    let d = team.data.to_str().unwrap().to_owned();
    let cert = team.data.join("auth/server.pem");
    let out = run(&[
        "serve",
        "--data",
        &d,
        "--listen",
        "127.0.0.1:0",
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        team.data.join("auth/server.key").to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("--tls-cert"),
        "{}",
        text(&out.stderr)
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &str| {
            std::fs::metadata(team.data.join(p))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!(mode("auth/server.key"), 0o600);
        assert_eq!(mode("auth"), 0o700);
    }
    // The library refuses to put it on the network without the team
    // authorizer and TLS.
    {
        let svc = scribe_server::Service::open(&team.data).unwrap();
        let e = scribe_server::ServerHandle::start(
            svc,
            "127.0.0.1:0",
            scribe_server::ListenOptions::default(),
        )
        .err()
        .expect("refused");
        assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{e}");
    }
    std::fs::remove_file(team.data.join("auth/service")).unwrap();
    let out = run(&["serve", "--data", &d, "--listen", "127.0.0.1:0"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("auth-init"),
        "{}",
        text(&out.stderr)
    );
    // A second auth-init of a bound data root is refused.
    std::fs::write(team.data.join("auth/service"), "x").unwrap();
    let out = run(&[
        "auth-init",
        "--data",
        &d,
        "--auth",
        &team.auth_url,
        "--namespace",
        NAMESPACE,
        "--name",
        "again",
        "--credential",
        team.tmp.path().join("admin.pem").to_str().unwrap(),
        "--auth-ca",
        team.tmp.path().join("access-ca.pem").to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("already_exists"),
        "{}",
        text(&out.stderr)
    );
}

/// The backup of a bound data root holds the server's TLS private key: it
/// is copied, and restored, as private as `auth-init` made it (the `auth`
/// directory 0700, `server.key` 0600), not with the umask's 0755/0644 under
/// a shared `/backup` (docs/deploy.md "Backups"); the restored root serves.
#[cfg(unix)]
#[test]
fn backup_and_restore_keep_the_server_key_private() {
    use std::os::unix::fs::PermissionsExt;
    let mut team = Team::start();
    let root = team.tmp.path().to_owned();
    let d = team.data.to_str().unwrap().to_owned();
    let full = root.join("backup-full");
    let out = run(&["backup", "--data", &d, "--to", full.to_str().unwrap()]);
    assert!(out.status.success(), "backup: {}", text(&out.stderr));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        mode(&full.join("auth")),
        0o700,
        "the backup's auth directory"
    );
    assert_eq!(
        mode(&full.join("auth/server.key")),
        0o600,
        "the backup's server.key"
    );
    team.stop();
    let drill = root.join("drill");
    let out = run(&[
        "restore",
        "--data",
        drill.to_str().unwrap(),
        "--from",
        full.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "restore: {}", text(&out.stderr));
    assert_eq!(
        mode(&drill.join("auth")),
        0o700,
        "the restored auth directory"
    );
    assert_eq!(
        mode(&drill.join("auth/server.key")),
        0o600,
        "the restored server.key"
    );
    // The restored root serves, with its key.
    team.data = drill;
    team.serve();
    drop(team.connect("alice"));
}

/// `repo rename` on a team server moves the repository's grants (keyed by
/// name on the auth service) with it, through the administrator's stored
/// login; `repo delete` removes them, so a new repository given the name
/// starts with none.
#[test]
fn a_renamed_repository_keeps_its_grants_and_a_deleted_one_leaves_none_behind() {
    let mut team = Team::start();
    let d = team.data.to_str().unwrap().to_owned();
    let login = team.tmp.path().join("login");
    let nobody = team.tmp.path().join("no-login");
    std::fs::create_dir_all(&nobody).unwrap();
    let admin_run = |config: &Path, args: &[&str]| {
        bin()
            .args(args)
            .env("SCRIBE_CONFIG_DIR", config)
            .env_remove("SCRIBE_CREDENTIAL")
            .output()
            .unwrap()
    };
    let wa = WorkspaceId([1; 16]);
    ok(team.connect("alice").ask(register(REPO, wa)));
    team.stop();
    // Without an administrator's credential: refused, naming it; nothing
    // changes on either side.
    let out = admin_run(&nobody, &["repo", "rename", "--data", &d, REPO, "renamed"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("administrator's credential"),
        "{}",
        text(&out.stderr)
    );
    let out = admin_run(&login, &["repo", "rename", "--data", &d, REPO, "renamed"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("4 grant(s)"),
        "alice, bob, carol and erin: {}",
        text(&out.stdout)
    );
    team.serve();
    let mut alice = team.connect("alice");
    let names: Vec<String> = alice.repo_list().into_iter().map(|r| r.name).collect();
    assert_eq!(names, ["renamed"]);
    match ok(alice.ask(list_workspaces("renamed"))) {
        Response::WorkspaceList(l) => assert!(l.workspaces.iter().any(|w| w.workspace == wa)),
        other => panic!("{other:?}"),
    }
    assert!(code_of(&alice.ask(list_workspaces(REPO))).is_some());
    assert!(team.connect("dave").repo_list().is_empty());
    drop(alice);
    team.stop();
    let out = admin_run(
        &login,
        &[
            "repo",
            "delete",
            "--data",
            &d,
            "renamed",
            "--yes",
            "--confirm",
            "renamed",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("4 grant(s)"),
        "{}",
        text(&out.stdout)
    );
    let out = run(&["repo", "create", "--data", &d, "renamed"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    team.serve();
    let mut alice = team.connect("alice");
    assert!(
        alice.repo_list().is_empty(),
        "the new repository of that name is not hers"
    );
    refused(alice.ask(list_workspaces("renamed")), ErrorCode::Forbidden);
}

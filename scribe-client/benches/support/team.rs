//! A team server for the benchmarks (`docs/performance.md` "Auth"): an auth
//! service in a separate process (this bench binary run again: it opens
//! the auth directory with `AuthDir::open` and calls
//! `scribe_auth::service::serve`, exactly what `scribe-auth serve` does),
//! and a data root bound to it with `auth-init` (`server-register` over
//! SAU2/TLS), served on 127.0.0.1 in this process over TLS with the
//! `TeamAuthorizer`, as `scribe-server serve` does for an auth-init data
//! root. Clients are users with a writer grant and a `user` credential
//! each (certificate and key, issued by the credential CA).

// Each bench uses part of this module.
#![allow(dead_code, unused_imports)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use scribe_auth::rows::{
    CaFamily, CredentialKind, CredentialRow, GrantRow, Key, Role, UserKind, NEVER_EXPIRES,
};
use scribe_auth::service::{serve, ServeOptions};
use scribe_auth::{AdminRequest, AuthDir, Id, InitOptions, KeyId, Password};
use scribe_client::auth::Credential;
use scribe_client::ClientOptions;
use scribe_server::team::{self, AuthFiles, AuthInitOptions, TeamAuthorizer};
use scribe_server::{ListenOptions, ServerHandle, Service};

pub use scribe_server::team::authorizer::DEFAULT_RECHECK;

/// The namespace the server serves.
pub const NAMESPACE: &str = "studio";

const DATA_VAR: &str = "SCRIBE_BENCH_AUTH_DATA";
const RUNTIME_VAR: &str = "SCRIBE_BENCH_AUTH_RUNTIME";

/// Call first in `main`: in the auth-service child, serve (never returns).
pub fn auth_child() {
    let (Some(data), Some(runtime)) = (std::env::var_os(DATA_VAR), std::env::var_os(RUNTIME_VAR))
    else {
        return;
    };
    let root = PathBuf::from(data);
    let dir = AuthDir::open(
        &root.join("auth"),
        &root.join("pepper"),
        &root.join("witness"),
    )
    .expect("open the auth directory");
    let r = serve(
        dir,
        ServeOptions {
            listen: "127.0.0.1:0".into(),
            runtime_dir: Some(PathBuf::from(runtime)),
            hosts: Vec::new(),
            max_connections: scribe_auth::service::DEFAULT_MAX_CONNECTIONS,
            session_ms: scribe_auth::service::DEFAULT_SESSION_MS,
        },
    );
    eprintln!("auth service: {r:?}");
    std::process::exit(1);
}

fn wait_for(path: &Path, child: &mut Child) -> String {
    let start = Instant::now();
    loop {
        if let Ok(t) = std::fs::read_to_string(path) {
            if t.ends_with('\n') {
                return t.trim().to_owned();
            }
        }
        if let Some(status) = child.try_wait().expect("wait") {
            panic!("the auth service exited with {status} before listening");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the auth service did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn request(actor: Id, command: &'static str) -> AdminRequest<'static> {
    AdminRequest {
        actor,
        operation: Id::random(),
        intent: *blake3::hash(&Id::random().0).as_bytes(),
        command,
        arguments: &[],
        now_ms: scribe_auth::now_ms(),
    }
}

/// Issue (and store, in one administrative change) a `user` credential of
/// `username` per entry.
fn issue(dir: &mut AuthDir, actor: Id, usernames: &[String]) -> Vec<Credential> {
    let signer = dir.signer(CaFamily::Credential).expect("signer");
    let now = scribe_auth::now_ms();
    let mut made = Vec::new();
    for name in usernames {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
        let id = Id::random();
        let cert = signer
            .issue(
                &key,
                id,
                CredentialKind::User,
                name,
                now - 60_000,
                NEVER_EXPIRES,
            )
            .expect("issue");
        let row = CredentialRow {
            kind: CredentialKind::User,
            subject: name.clone(),
            expires_ms: NEVER_EXPIRES,
            enabled: true,
            label: "bench".into(),
            key_id: KeyId::of_spki_der(&key.public_key_der()),
            created_ms: now - 60_000,
            parent: None,
            generation: None,
        };
        made.push((id, row, cert, key.serialize_pem()));
    }
    dir.administer(&request(actor, "credential-add"), |tx| {
        for (id, row, cert, _) in &made {
            tx.insert_credential(*id, row, cert)?;
        }
        Ok(vec![])
    })
    .expect("store the credentials");
    made.into_iter()
        .map(|(_, _, cert, key)| Credential {
            certificate_pem: cert,
            private_key_pem: key,
        })
        .collect()
}

/// A running team: the auth service process and the team server.
pub struct Team {
    // Dropped first: the listener, then the service, then the auth child.
    pub server: Option<ServerHandle>,
    pub service: Arc<Service>,
    pub authorizer: Arc<TeamAuthorizer>,
    /// `scribes://localhost:PORT`.
    pub url: String,
    /// The access CA (PEM file): what clients trust for the server.
    pub ca_file: PathBuf,
    /// One credential per user `user00`, `user01`, ... (writers of `repo`).
    pub users: Vec<Credential>,
    /// More credentials of `user00`, never presented before (a connection
    /// with one is a cache miss: the server asks scribe-auth `resolve`).
    pub fresh: Vec<Credential>,
    auth: Child,
    pub tmp: tempfile::TempDir,
}

impl Drop for Team {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown();
        }
        let _ = self.auth.kill();
        let _ = self.auth.wait();
    }
}

impl Team {
    /// `users` writers of repository `repo` and `fresh` spare credentials;
    /// the server re-checks the auth revision every `recheck`
    /// (`scribe-server serve --auth-recheck`, default 1 s).
    pub fn start(repo: &str, users: usize, fresh: usize, recheck: Duration) -> Team {
        let tmp = tempfile::tempdir().expect("temp dir");
        let root = tmp.path().to_owned();
        let (mut dir, report) = AuthDir::init(InitOptions {
            data: root.join("auth"),
            pepper_file: root.join("pepper"),
            witness_file: root.join("witness"),
            trust_domain: "studio.example".into(),
            admin_username: "admin".into(),
            admin_password: Some(Password::new("correct horse battery".into()).expect("pw")),
            now_ms: scribe_auth::now_ms(),
        })
        .expect("auth init");
        let admin = report.admin_id;
        let names: Vec<String> = (0..users.max(1)).map(|i| format!("user{i:02}")).collect();
        for name in &names {
            let r = dir
                .add_user(
                    &request(admin, "user-add"),
                    name,
                    false,
                    UserKind::Person,
                    None,
                )
                .expect("user-add");
            let scribe_format::sau2::Sau2Result::Rows(rows) = r else {
                panic!("user-add: {r:?}")
            };
            let id = Id::parse(&rows[0][0]).expect("user id");
            dir.administer(&request(admin, "grant-set"), |tx| {
                tx.put(
                    &Key::Grant {
                        namespace: NAMESPACE.into(),
                        repository: repo.into(),
                        user: id,
                    },
                    &GrantRow { role: Role::Writer },
                )?;
                Ok(vec![])
            })
            .expect("grant");
        }
        let user_creds = issue(&mut dir, admin, &names);
        let fresh_creds = issue(&mut dir, admin, &vec![names[0].clone(); fresh]);
        let access_ca = dir.trust_anchor_pem(CaFamily::Access).expect("access CA");
        let ca_file = root.join("access-ca.pem");
        std::fs::write(&ca_file, &access_ca).expect("write the CA");
        drop(dir);

        let runtime = root.join("auth-run");
        let mut auth = Command::new(std::env::current_exe().expect("this bench"))
            .env(DATA_VAR, &root)
            .env(RUNTIME_VAR, &runtime)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("start the auth service");
        let listen = wait_for(&runtime.join("listen"), &mut auth);
        let auth_url = format!(
            "sau2://localhost:{}",
            listen.rsplit_once(':').expect("port").1
        );

        let data = root.join("data");
        {
            let svc = Service::create(&data).expect("create the data root");
            scribe_server::service::dispatch::repo_create(&svc, repo).expect("repo create");
        }
        let files: AuthFiles = team::auth_init(&AuthInitOptions {
            data: data.clone(),
            auth: auth_url,
            namespace: NAMESPACE.into(),
            name: "depot".into(),
            hosts: Vec::new(),
            access_ca_pem: access_ca,
            credential: (report.admin_certificate_pem, report.admin_private_key_pem),
        })
        .expect("auth-init");
        let service = Service::open(&data).expect("open the data root");
        let authorizer =
            Arc::new(TeamAuthorizer::new(&data, &files, recheck).expect("the team authorizer"));
        authorizer
            .check_revision()
            .expect("the auth service answers");
        service.set_authorizer(authorizer.clone());
        let server = ServerHandle::start(
            service.clone(),
            "127.0.0.1:0",
            ListenOptions {
                tls: Some(files.server_tls().expect("server TLS")),
                ..ListenOptions::default()
            },
        )
        .expect("listen");
        let url = format!("scribes://localhost:{}", server.addr().port());
        Team {
            server: Some(server),
            service,
            authorizer,
            url,
            ca_file,
            users: user_creds,
            fresh: fresh_creds,
            auth,
            tmp,
        }
    }

    /// Client options presenting `cred`.
    pub fn options(&self, cred: &Credential) -> ClientOptions {
        ClientOptions {
            ca_file: Some(self.ca_file.clone()),
            tls_credential: Some(cred.clone()),
            ..ClientOptions::default()
        }
    }
}

//! A team server on 127.0.0.1 for tests: a real auth service (the
//! `scribe-auth` library's `serve` over TLS) with users and grants, and a
//! data root bound to it with `auth-init`, served over TLS with the team
//! authorizer. Shared by the `scribe` and `nokv` binaries' tests.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use scribe_auth::rows::{CaFamily, GrantRow, Key, Role, UserKind};
use scribe_auth::service::{serve, ServeOptions};
use scribe_auth::{AdminRequest, AuthDir, Id, InitOptions, Password};
use scribe_server::team::{self, AuthInitOptions, TeamAuthorizer};
use scribe_server::{ListenOptions, ServerHandle, Service};

/// Every test user's password.
pub const PASSWORD: &str = "correct horse battery staple";

/// The first line of `path` once a server has written it.
pub fn wait_for(path: &Path) -> String {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if text.ends_with('\n') {
                return text.trim().to_owned();
            }
        }
        assert!(start.elapsed() < Duration::from_secs(30), "not started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An administrative request by `actor`.
pub fn request(actor: Id, command: &'static str) -> AdminRequest<'static> {
    AdminRequest {
        actor,
        operation: Id::random(),
        intent: [7; 32],
        command,
        arguments: &[],
        now_ms: scribe_auth::now_ms(),
    }
}

/// The auth service (its thread runs until the process ends) and the
/// team server of repository `demo` in namespace `studio`, server name
/// `depot`; the data root is `tmp/data`.
pub struct Team {
    pub tmp: tempfile::TempDir,
    /// `sau2://localhost:PORT`.
    pub auth_url: String,
    /// The access CA (PEM file): it signs the team server's certificate.
    pub ca_file: PathBuf,
    /// `scribes://localhost:PORT`.
    pub url: String,
    /// `None` once a test stopped it (offline administration).
    pub server: Option<ServerHandle>,
}

/// alice (writer of `demo`) and bob (no grant).
pub fn team() -> Team {
    team_with(&[("alice", Some(Role::Writer)), ("bob", None)])
}

/// The team with `users`, each with the role on `demo` given, if any.
pub fn team_with(users: &[(&str, Option<Role>)]) -> Team {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let (mut dir, report) = AuthDir::init(InitOptions {
        data: root.join("auth"),
        pepper_file: root.join("pepper"),
        witness_file: root.join("witness"),
        trust_domain: "studio.example".into(),
        admin_username: "admin".into(),
        admin_password: Some(Password::new(PASSWORD.into()).unwrap()),
        now_ms: scribe_auth::now_ms(),
    })
    .unwrap();
    let pw = Password::new(PASSWORD.into()).unwrap();
    for &(name, grant) in users {
        let r = dir
            .add_user(
                &request(report.admin_id, "user-add"),
                name,
                false,
                UserKind::Person,
                Some(&pw),
            )
            .unwrap();
        let scribe_format::sau2::Sau2Result::Rows(rows) = r else {
            panic!("{r:?}")
        };
        let id = Id::parse(&rows[0][0]).unwrap();
        if let Some(role) = grant {
            dir.administer(&request(report.admin_id, "grant"), |tx| {
                tx.put(
                    &Key::Grant {
                        namespace: "studio".into(),
                        repository: "demo".into(),
                        user: id,
                    },
                    &GrantRow { role },
                )?;
                Ok(vec![])
            })
            .unwrap();
        }
    }
    let access_ca = dir.trust_anchor_pem(CaFamily::Access).unwrap();
    let ca_file = root.join("access-ca.pem");
    std::fs::write(&ca_file, &access_ca).unwrap();
    let runtime = root.join("auth-run");
    std::thread::spawn({
        let runtime = runtime.clone();
        move || {
            serve(
                dir,
                ServeOptions {
                    listen: "127.0.0.1:0".into(),
                    runtime_dir: Some(runtime),
                    hosts: Vec::new(),
                    max_connections: 32,
                    session_ms: 3_600_000,
                },
            )
        }
    });
    let port = wait_for(&runtime.join("listen"))
        .rsplit_once(':')
        .unwrap()
        .1
        .to_owned();
    let auth_url = format!("sau2://localhost:{port}");

    let data = root.join("data");
    {
        let svc = Service::create(&data).unwrap();
        scribe_server::service::dispatch::repo_create(&svc, "demo").unwrap();
    }
    let files = when_free(|| {
        team::auth_init(&AuthInitOptions {
            data: data.clone(),
            auth: auth_url.clone(),
            namespace: "studio".into(),
            name: "depot".into(),
            hosts: Vec::new(),
            access_ca_pem: access_ca.clone(),
            credential: (
                report.admin_certificate_pem.clone(),
                report.admin_private_key_pem.clone(),
            ),
        })
    });
    let svc = when_free(|| Service::open(&data));
    svc.set_authorizer(Arc::new(
        TeamAuthorizer::new(&data, &files, Duration::ZERO).unwrap(),
    ));
    let server = ServerHandle::start(
        svc,
        "127.0.0.1:0",
        ListenOptions {
            tls: Some(files.server_tls().unwrap()),
            ..ListenOptions::default()
        },
    )
    .unwrap();
    let url = format!("scribes://localhost:{}", server.addr().port());
    Team {
        tmp,
        auth_url,
        ca_file,
        url,
        server: Some(server),
    }
}

/// `open()`'s value, asked again while the data root is in use. A data
/// root's `LOCK` is an `flock`, held by its open file description: a
/// child another test thread forks in the instant before this one drops
/// its handle shares that description until the child's `exec` closes it
/// (close-on-exec), so the next opening can find the lock held for those
/// few milliseconds on a loaded machine. Any other error, or a lock held
/// for 30 s, fails the test.
fn when_free<T, E: std::fmt::Display>(open: impl Fn() -> Result<T, E>) -> T {
    let start = Instant::now();
    loop {
        match open() {
            Ok(v) => return v,
            Err(e)
                if e.to_string().contains("in use")
                    && start.elapsed() < Duration::from_secs(30) =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("{e}"),
        }
    }
}

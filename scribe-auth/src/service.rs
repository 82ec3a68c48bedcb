//! The network service: SAU2 over TLS (`docs/auth.md#the-service`).
//!
//! One thread per connection, at most `max_connections` at once (more are
//! closed at once). A connection carries any number of requests in turn,
//! each `u32 LE length ‖ SAU2 request` answered by `u32 LE length ‖ SAU2
//! result`. The TLS server certificate is made at startup by the `ca/access`
//! CA; a client may present a credential certificate (TLS client
//! authentication, trust anchor: every `ca/credential` CA), which `whoami`
//! and `logout` require and `login` does not.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use scribe_format::sau2::{self, Sau2Request, Sau2Result, MAX_REQUEST_BYTES, MAX_RESULT_BYTES};
use scribe_format::ErrorCode;

use crate::audit::AuditArg;
use crate::ca::P256PublicKey;
use crate::dir::{AdminError, AdminRequest, AuthDir, Refusal};
use crate::error::AuthError;
use crate::ids::{Id, KeyId};
use crate::password::Password;
use crate::rows::*;

/// Default session lifetime: 12 hours.
pub const DEFAULT_SESSION_MS: u64 = 12 * 3_600_000;
/// Default bound on simultaneous connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;
/// Idle and I/O timeout of a connection.
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);
/// The TLS ALPN protocol name.
pub const ALPN: &[u8] = b"sau2";

/// Failed logins a user may make before attempts are slowed.
pub const FREE_FAILURES_PER_USER: u32 = 5;
/// Failed logins an address may make before attempts are slowed.
pub const FREE_FAILURES_PER_ADDRESS: u32 = 20;
/// The first wait after the free failures; it doubles with each further failure.
pub const THROTTLE_BASE: Duration = Duration::from_secs(5);
/// The longest wait.
pub const THROTTLE_MAX: Duration = Duration::from_secs(300);
/// Failures are forgotten this long after the last one.
pub const THROTTLE_FORGET: Duration = Duration::from_secs(900);
/// Most remembered keys (users and addresses); beyond, forgotten ones are pruned first.
const THROTTLE_ENTRIES: usize = 100_000;

#[derive(Clone, Copy)]
struct Failures {
    count: u32,
    last: Instant,
}

/// Failed-login slowing per user and per address (in memory).
#[derive(Default)]
pub struct Throttle {
    map: HashMap<String, Failures>,
}

impl Throttle {
    fn wait(f: &Failures, free: u32, now: Instant) -> Option<Duration> {
        if f.count < free || now.duration_since(f.last) >= THROTTLE_FORGET {
            return None;
        }
        let doublings = (f.count - free).min(16);
        let delay = THROTTLE_BASE
            .saturating_mul(1u32 << doublings)
            .min(THROTTLE_MAX);
        let ready = f.last + delay;
        (now < ready).then(|| ready - now)
    }

    /// How long this attempt must wait, if it must.
    pub fn check(&self, user: &str, addr: IpAddr, now: Instant) -> Option<Duration> {
        let u = self
            .map
            .get(&format!("user:{user}"))
            .and_then(|f| Self::wait(f, FREE_FAILURES_PER_USER, now));
        let a = self
            .map
            .get(&format!("addr:{addr}"))
            .and_then(|f| Self::wait(f, FREE_FAILURES_PER_ADDRESS, now));
        u.max(a)
    }

    fn failed(&mut self, user: &str, addr: IpAddr, now: Instant) {
        if self.map.len() >= THROTTLE_ENTRIES {
            self.map
                .retain(|_, f| now.duration_since(f.last) < THROTTLE_FORGET);
        }
        if self.map.len() >= THROTTLE_ENTRIES {
            return;
        }
        for key in [format!("user:{user}"), format!("addr:{addr}")] {
            let e = self.map.entry(key).or_insert(Failures {
                count: 0,
                last: now,
            });
            if now.duration_since(e.last) >= THROTTLE_FORGET {
                e.count = 0;
            }
            e.count = e.count.saturating_add(1);
            e.last = now;
        }
    }

    fn succeeded(&mut self, user: &str) {
        self.map.remove(&format!("user:{user}"));
    }
}

/// The service state shared by the connections.
pub struct Service {
    dir: RwLock<AuthDir>,
    throttle: Mutex<Throttle>,
    session_ms: u64,
}

pub(crate) fn refusal(code: ErrorCode, message: impl Into<String>) -> Sau2Result {
    Sau2Result::error(code, message)
}

pub(crate) fn internal(e: AuthError) -> Sau2Result {
    refusal(e.code(), e.to_string())
}

const BAD_LOGIN: &str = "invalid username or password";

/// The credential id a certificate names (its serial number), from DER.
/// `None` for anything that is not a certificate with a serial of at most
/// 16 significant bytes.
pub fn certificate_serial(der: &[u8]) -> Option<Id> {
    fn tlv(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
        let (&tag, rest) = b.split_first()?;
        let (&first, rest) = rest.split_first()?;
        let (len, rest) = if first < 0x80 {
            (usize::from(first), rest)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 || rest.len() < n {
                return None;
            }
            let len = rest[..n]
                .iter()
                .fold(0usize, |acc, &x| (acc << 8) | usize::from(x));
            (len, &rest[n..])
        };
        if rest.len() < len {
            return None;
        }
        Some((tag, &rest[..len], &rest[len..]))
    }
    let (0x30, cert, _) = tlv(der)? else {
        return None;
    };
    let (0x30, tbs, _) = tlv(cert)? else {
        return None;
    };
    let (mut tag, mut content, mut rest) = tlv(tbs)?;
    if tag == 0xa0 {
        (tag, content, rest) = tlv(rest)?;
    }
    let _ = rest;
    if tag != 0x02 {
        return None;
    }
    let start = content
        .iter()
        .position(|&b| b != 0)
        .unwrap_or(content.len());
    let digits = &content[start..];
    if digits.len() > 16 {
        return None;
    }
    let mut id = [0u8; 16];
    id[16 - digits.len()..].copy_from_slice(digits);
    Some(Id(id))
}

/// Who a verified client certificate belongs to.
pub(crate) struct Caller {
    pub(crate) user: UserRow,
    pub(crate) credential: Id,
    pub(crate) row: CredentialRow,
}

impl Service {
    pub fn new(dir: AuthDir, session_ms: u64) -> Service {
        Service {
            dir: RwLock::new(dir),
            throttle: Mutex::new(Throttle::default()),
            session_ms,
        }
    }

    pub(crate) fn read_dir(&self) -> std::sync::RwLockReadGuard<'_, AuthDir> {
        self.dir.read().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn write_dir(&self) -> std::sync::RwLockWriteGuard<'_, AuthDir> {
        self.dir.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Answer one encoded request from `addr`, with the client certificate
    /// TLS verified (if any).
    pub fn handle(&self, encoded: &[u8], addr: IpAddr, client_cert: Option<&[u8]>) -> Sau2Result {
        let req = match Sau2Request::decode(encoded) {
            Ok(r) => r,
            Err(e) => return refusal(ErrorCode::Malformed, e.to_string()),
        };
        let body = Sau2Request::body(encoded);
        match req.verb.as_str() {
            "login" => self.login(&req, body, addr, false),
            "admin-login" => self.login(&req, body, addr, true),
            "whoami" => match self.caller(client_cert) {
                Ok(c) => Sau2Result::Rows(vec![vec![
                    c.user.name.clone(),
                    c.user.id.hex(),
                    c.credential.hex(),
                    c.row.kind.as_str().to_owned(),
                    c.row.expires_ms.to_string(),
                ]]),
                Err(r) => r,
            },
            "logout" => self.logout(&req, body, client_cert),
            "server-register" => crate::servers::register(self, &req, body, client_cert),
            "resolve" => crate::servers::resolve(self, &req, client_cert),
            "revision" => crate::servers::revision(self, client_cert),
            "server-audit" => crate::servers::server_audit(self, &req, client_cert),
            v if crate::admin::is_admin_verb(v) => self.admin(&req, body, client_cert),
            other => refusal(
                ErrorCode::Usage,
                format!(
                    "unknown verb {} (login, whoami, logout, server-register, resolve, revision, server-audit, or an administrative verb)",
                    scribe_format::echo::echo(other)
                ),
            ),
        }
    }

    pub(crate) fn caller(&self, client_cert: Option<&[u8]>) -> Result<Caller, Sau2Result> {
        let Some(der) = client_cert else {
            return Err(refusal(
                ErrorCode::Unauthenticated,
                "this verb needs a credential: present a credential certificate (scribe login)",
            ));
        };
        let unknown = || refusal(ErrorCode::Unauthenticated, "the credential is not known");
        let credential = certificate_serial(der).ok_or_else(unknown)?;
        let dir = self.read_dir();
        let row = dir
            .get::<CredentialRow>(&Key::Credential(credential))
            .map_err(internal)?
            .ok_or_else(unknown)?;
        let stored = dir
            .get::<CredentialCertRow>(&Key::CredentialCert(credential))
            .map_err(internal)?
            .ok_or_else(unknown)?;
        let same = CertificateDer::from_pem_slice(stored.pem.as_bytes())
            .map(|c| c.as_ref() == der)
            .unwrap_or(false);
        if !same {
            return Err(unknown());
        }
        if !row.enabled {
            return Err(refusal(
                ErrorCode::Unauthenticated,
                "the credential is disabled (logged out or revoked)",
            ));
        }
        if row.expires_ms != NEVER_EXPIRES && row.expires_ms <= crate::now_ms() {
            return Err(refusal(
                ErrorCode::Unauthenticated,
                "the credential expired",
            ));
        }
        if row.kind == CredentialKind::Server {
            return Err(refusal(
                ErrorCode::Forbidden,
                "a server credential cannot use this verb",
            ));
        }
        let user = dir
            .get::<UserRow>(&Key::User(row.subject.clone()))
            .map_err(internal)?
            .filter(|u| u.enabled)
            .ok_or_else(|| {
                refusal(
                    ErrorCode::Unauthenticated,
                    "the credential's user is disabled or removed",
                )
            })?;
        Ok(Caller {
            user,
            credential,
            row,
        })
    }

    fn login_rows(&self, credential: Id, username: &str) -> Result<Sau2Result, AuthError> {
        let dir = self.read_dir();
        let (Some(row), Some(cert)) = (
            dir.get::<CredentialRow>(&Key::Credential(credential))?,
            dir.get::<CredentialCertRow>(&Key::CredentialCert(credential))?,
        ) else {
            return Ok(refusal(
                ErrorCode::Unauthenticated,
                "the session of this login no longer exists",
            ));
        };
        let user = dir.get::<UserRow>(&Key::User(row.subject.clone()))?;
        Ok(Sau2Result::Rows(vec![vec![
            credential.hex(),
            user.map(|u| u.id.hex()).unwrap_or_default(),
            if username.is_empty() {
                row.subject.clone()
            } else {
                username.to_owned()
            },
            row.expires_ms.to_string(),
            cert.pem,
        ]]))
    }

    /// `login USERNAME PASSWORD SPKI_HEX` → `[[credential id, user id,
    /// username, expires ms, certificate PEM]]`.
    ///
    /// `admin-login` (the same arguments and answer) signs in an
    /// administrator: the credential is of kind `user` with the password
    /// generation, for at most [`crate::admin::ADMIN_LOGIN_MS`]; only such a
    /// credential carries the administrator's global powers
    /// (`docs/auth.md#admin-login`).
    fn login(&self, req: &Sau2Request, body: &[u8], addr: IpAddr, admin: bool) -> Sau2Result {
        let verb = if admin { "admin-login" } else { "login" };
        let [username, password, spki_hex] = match <[String; 3]>::try_from(req.arguments.clone()) {
            Ok(a) => a,
            Err(_) => {
                return refusal(
                    ErrorCode::Usage,
                    "login takes USERNAME PASSWORD PUBLIC_KEY (SubjectPublicKeyInfo DER, hex)",
                )
            }
        };
        let op = Id(req.operation);
        let intent = self.read_dir().intent_digest(body);
        match self.replay_login(op, intent, &username) {
            Ok(Some(r)) => return r,
            Ok(None) => {}
            Err(e) => return internal(e),
        }
        let now = Instant::now();
        if let Some(wait) = self
            .throttle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .check(&username, addr, now)
        {
            return refusal(
                ErrorCode::LoginThrottled,
                format!(
                    "too many failed logins for this user or address; retry in {} s",
                    wait.as_secs().max(1)
                ),
            );
        }
        let Ok(spki) = hex::decode(&spki_hex) else {
            return refusal(ErrorCode::Usage, "the public key is not hex");
        };
        let key_id = match KeyId::of_p256_spki_der(&spki) {
            Ok(k) => k,
            Err(e) => return refusal(ErrorCode::Usage, e.to_string()),
        };
        let public = match P256PublicKey::from_spki_der(&spki) {
            Ok(p) => p,
            Err(e) => return internal(e),
        };
        // One argon2 hash for every case: unknown user, wrong password,
        // disabled user, right password.
        let verified = match Password::new(password) {
            Ok(p) => self.read_dir().verify_login(&username, &p),
            Err(_) => {
                // Not a password this service would accept: spend the same work.
                let dummy = Password::generate();
                self.read_dir()
                    .verify_login("", &dummy)
                    .map(|_| (None, false))
            }
        };
        let (user, matched) = match verified {
            Ok(v) => v,
            Err(e) => return internal(e),
        };
        let now_ms = crate::now_ms();
        let accepted = match &user {
            Some(u) if matched && u.enabled && (u.administrator || !admin) => Some(u.clone()),
            _ => None,
        };
        let Some(user) = accepted else {
            self.throttle
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .failed(&username, addr, now);
            let reason = match &user {
                None => "unknown user",
                Some(_) if !matched => "wrong password",
                Some(u) if !u.enabled => "disabled user",
                Some(_) => "not an administrator",
            };
            let message = if user.as_ref().is_some_and(|u| matched && !u.enabled) {
                format!("user {username} is disabled")
            } else if user.as_ref().is_some_and(|u| matched && !u.administrator) {
                format!("user {username} is not an administrator: use login")
            } else {
                BAD_LOGIN.to_owned()
            };
            let user_id = user.as_ref().map(|u| u.id);
            let r = self.write_dir().transact(|tx| {
                if tx.contains(&Key::Session(op))? {
                    return Ok(());
                }
                tx.put(
                    &Key::Session(op),
                    &SessionOutcomeRow {
                        user: user_id,
                        intent,
                        issued: None,
                    },
                )?;
                tx.audit(
                    now_ms,
                    user_id,
                    verb,
                    op,
                    false,
                    &[AuditArg::word(&username), AuditArg::word(reason)],
                )?;
                Ok(())
            });
            return match r {
                Err(e) => internal(e),
                Ok(_) => refusal(ErrorCode::Unauthenticated, message),
            };
        };
        self.throttle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .succeeded(&username);
        let credential = Id::random();
        let (kind, lifetime) = if admin {
            (
                CredentialKind::User,
                self.session_ms.min(crate::admin::ADMIN_LOGIN_MS),
            )
        } else {
            (CredentialKind::Session, self.session_ms)
        };
        let expires_ms = now_ms.saturating_add(lifetime);
        let mut dir = self.write_dir();
        let generation = match dir.get::<PasswordRow>(&Key::Password(username.clone())) {
            Ok(p) => p.map_or(1, |p| p.generation),
            Err(e) => return internal(e),
        };
        let cert = match dir
            .signer(CaFamily::Credential)
            .and_then(|s| s.issue_credential(&public, credential, kind, now_ms, expires_ms))
        {
            Ok(c) => c,
            Err(e) => return internal(e),
        };
        let row = CredentialRow {
            kind,
            subject: username.clone(),
            expires_ms,
            enabled: true,
            label: verb.into(),
            key_id,
            created_ms: now_ms,
            parent: None,
            generation: Some(generation),
        };
        let r = dir.transact(|tx| {
            if tx.contains(&Key::Session(op))? {
                return Err(Refusal::new(
                    ErrorCode::Busy,
                    "a login with this operation id is running",
                )
                .into());
            }
            tx.insert_credential(credential, &row, &cert)?;
            tx.put(
                &Key::Session(op),
                &SessionOutcomeRow {
                    user: Some(user.id),
                    intent,
                    issued: Some((expires_ms, credential)),
                },
            )?;
            tx.audit(
                now_ms,
                Some(user.id),
                verb,
                op,
                true,
                &[AuditArg::word(&username), AuditArg::key(key_id)],
            )?;
            Ok(())
        });
        drop(dir);
        match r {
            Err(e) => internal(e),
            Ok(Err(r)) => refusal(r.code, r.message),
            Ok(Ok(())) => Sau2Result::Rows(vec![vec![
                credential.hex(),
                user.id.hex(),
                username,
                expires_ms.to_string(),
                cert,
            ]]),
        }
    }

    fn replay_login(
        &self,
        op: Id,
        intent: [u8; 32],
        username: &str,
    ) -> Result<Option<Sau2Result>, AuthError> {
        let recorded = self
            .read_dir()
            .get::<SessionOutcomeRow>(&Key::Session(op))?;
        let Some(recorded) = recorded else {
            return Ok(None);
        };
        if recorded.intent != intent {
            return Ok(Some(refusal(
                ErrorCode::OperationIntentMismatch,
                "the operation id was used before with another intent",
            )));
        }
        Ok(Some(match recorded.issued {
            None => refusal(ErrorCode::Unauthenticated, BAD_LOGIN),
            Some((_, credential)) => self.login_rows(credential, username)?,
        }))
    }

    /// `logout`: disables the caller's credential; an audited administrative
    /// change (advances the revision; the operation id replays).
    fn logout(&self, req: &Sau2Request, body: &[u8], client_cert: Option<&[u8]>) -> Sau2Result {
        if !req.arguments.is_empty() {
            return refusal(ErrorCode::Usage, "logout takes no arguments");
        }
        let caller = match self.caller(client_cert) {
            Ok(c) => c,
            Err(r) => return r,
        };
        let mut dir = self.write_dir();
        let intent = dir.intent_digest(body);
        let args = [AuditArg::word(&caller.credential.hex())];
        let admin = AdminRequest {
            actor: caller.user.id,
            operation: Id(req.operation),
            intent,
            command: "logout",
            arguments: &args,
            now_ms: crate::now_ms(),
        };
        let credential = caller.credential;
        let r = dir.administer(&admin, |tx| {
            let key = Key::Credential(credential);
            let Some(mut row) = tx.get::<CredentialRow>(&key)? else {
                return Err(AdminError::Refused(Refusal::new(
                    ErrorCode::NotFound,
                    "no such credential",
                )));
            };
            row.enabled = false;
            tx.put(&key, &row)?;
            Ok(vec![vec![credential.hex()]])
        });
        r.unwrap_or_else(internal)
    }
}

/// What `serve` needs.
pub struct ServeOptions {
    pub listen: String,
    pub runtime_dir: Option<PathBuf>,
    /// Extra host names or addresses for the TLS certificate.
    pub hosts: Vec<String>,
    pub max_connections: usize,
    pub session_ms: u64,
}

fn tls_config(dir: &AuthDir, hosts: &[String]) -> Result<Arc<rustls::ServerConfig>, AuthError> {
    let bad = |e: String| AuthError::Certificate(e);
    let (cert_pem, key_pem) = dir
        .signer(CaFamily::Access)?
        .issue_tls_server(hosts, crate::now_ms())?;
    let chain =
        vec![CertificateDer::from_pem_slice(cert_pem.as_bytes()).map_err(|e| bad(e.to_string()))?];
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| bad(e.to_string()))?;
    let mut roots = rustls::RootCertStore::empty();
    // Credential certificates chain to a credential CA; a storage server's
    // (`server-register`) to an access CA. Either way only a certificate
    // stored under `credential-certs/` is accepted past the handshake.
    let anchors =
        dir.trust_anchor_pem(CaFamily::Credential)? + &dir.trust_anchor_pem(CaFamily::Access)?;
    for c in CertificateDer::pem_slice_iter(anchors.as_bytes()) {
        roots
            .add(c.map_err(|e| bad(e.to_string()))?)
            .map_err(|e| bad(e.to_string()))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .allow_unauthenticated()
    .build()
    .map_err(|e| bad(e.to_string()))?;
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| bad(e.to_string()))?;
    cfg.alpn_protocols = vec![ALPN.to_vec()];
    Ok(Arc::new(cfg))
}

fn write_runtime(dir: &std::path::Path, name: &str, contents: &str) -> Result<(), AuthError> {
    scribe_format::runtime::write(dir, name, contents).map_err(|e| AuthError::io(dir.join(name), e))
}

/// `scribe-auth serve`: listen, write `listen` and `scribe-auth.pid` to the
/// runtime directory, and answer until the process ends.
pub fn serve(dir: AuthDir, opts: ServeOptions) -> Result<(), AuthError> {
    let listener = TcpListener::bind(&opts.listen).map_err(|e| AuthError::io(&opts.listen, e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| AuthError::io(&opts.listen, e))?;
    let mut hosts = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    if !addr.ip().is_unspecified() && !hosts.contains(&addr.ip().to_string()) {
        hosts.push(addr.ip().to_string());
    }
    if let Some((host, _)) = opts.listen.rsplit_once(':') {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let unspecified = host.parse::<IpAddr>().is_ok_and(|ip| ip.is_unspecified());
        if !host.is_empty() && !unspecified && !hosts.iter().any(|h| h == host) {
            hosts.push(host.to_owned());
        }
    }
    for h in &opts.hosts {
        if !hosts.contains(h) {
            hosts.push(h.clone());
        }
    }
    let cfg = tls_config(&dir, &hosts)?;
    let service = Arc::new(Service::new(dir, opts.session_ms));
    crate::admin::start_sweeper(&service);
    if let Some(rt) = &opts.runtime_dir {
        std::fs::create_dir_all(rt).map_err(|e| AuthError::io(rt, e))?;
        write_runtime(
            rt,
            &scribe_format::runtime::pid_file("scribe-auth"),
            &format!("{}\n", std::process::id()),
        )?;
        write_runtime(
            rt,
            scribe_format::runtime::LISTEN_FILE,
            &format!("{addr}\n"),
        )?;
    }
    let live = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let Ok(tcp) = stream else { continue };
        if live.load(Ordering::SeqCst) >= opts.max_connections {
            drop(tcp);
            continue;
        }
        let Ok(peer) = tcp.peer_addr() else { continue };
        live.fetch_add(1, Ordering::SeqCst);
        let (svc, cfg, live2) = (service.clone(), cfg.clone(), live.clone());
        let spawned = std::thread::Builder::new()
            .name("sau2".into())
            .spawn(move || {
                connection(&svc, cfg, tcp, peer);
                live2.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            live.fetch_sub(1, Ordering::SeqCst);
        }
    }
    Ok(())
}

fn write_frame(tls: &mut impl Write, result: &Sau2Result) -> std::io::Result<()> {
    let bytes = result
        .encode()
        .or_else(|e| Sau2Result::error(ErrorCode::Internal, e.to_string()).encode())
        .map_err(std::io::Error::other)?;
    debug_assert!(bytes.len() <= MAX_RESULT_BYTES);
    let mut frame = (bytes.len() as u32).to_le_bytes().to_vec();
    frame.extend_from_slice(&bytes);
    tls.write_all(&frame)?;
    tls.flush()
}

fn connection(svc: &Service, cfg: Arc<rustls::ServerConfig>, tcp: TcpStream, peer: SocketAddr) {
    let _ = tcp.set_read_timeout(Some(IO_TIMEOUT));
    let _ = tcp.set_write_timeout(Some(IO_TIMEOUT));
    let _ = tcp.set_nodelay(true);
    let Ok(conn) = rustls::ServerConnection::new(cfg) else {
        return;
    };
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    loop {
        let mut header = [0u8; 4];
        if tls.read_exact(&mut header).is_err() {
            return;
        }
        let len = match sau2::frame_length(header, MAX_REQUEST_BYTES) {
            Ok(n) => n,
            Err(e) => {
                let _ = write_frame(&mut tls, &refusal(ErrorCode::Malformed, e.to_string()));
                return;
            }
        };
        let mut body = vec![0u8; len];
        if tls.read_exact(&mut body).is_err() {
            return;
        }
        let cert = tls
            .conn
            .peer_certificates()
            .and_then(|c| c.first())
            .map(|c| c.as_ref().to_vec());
        let result = svc.handle(&body, peer.ip(), cert.as_deref());
        if write_frame(&mut tls, &result).is_err() {
            return;
        }
    }
}

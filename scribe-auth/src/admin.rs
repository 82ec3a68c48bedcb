//! Administration through the running service (`docs/auth.md#administration`).
//!
//! Every verb here is answered for an authenticated caller (the TLS client
//! certificate, checked by [`Service::caller`]). Changes go through
//! [`AuthDir::administer`]: authorization is decided inside its
//! transaction, so a refusal (`forbidden`, `not_found`, `usage`, ...) is
//! recorded as a `rejected` audit row and as the operation's outcome; an
//! applied change advances the revision, writes its audit row and outcome,
//! and rewrites the witness. Listings (`user-list`, `grant-list`,
//! `namespace-list`, `visibility-get`, `credential-list`, `audit`) change
//! nothing and record nothing when answered; a refused listing writes a
//! `rejected` audit row.
//!
//! Who may do what (the caller's credential kind matters):
//!
//! - a *person credential* is kind `user` or `session`;
//! - a *global administrator* is a user with `administrator` true signed in
//!   with a `user` credential (`admin-login`, or the bootstrap credential):
//!   an administrator's `session` has only the powers of its grants;
//! - repository administration (grants, visibility) is allowed to a global
//!   administrator, a namespace admin of the namespace, or a user holding
//!   the `admin` role on the repository, signed in with a person credential
//!   or an `automation-admin` credential;
//! - automation credentials of other kinds may only list and revoke their
//!   own credential (and those derived from it), derive from themselves,
//!   and read visibility.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use scribe_format::sau2::{Sau2Request, Sau2Result};
use scribe_format::ErrorCode;

use crate::audit::AuditArg;
use crate::ca::{P256PublicKey, Signer};
use crate::dir::{AdminError, AdminRequest, AdminTxn, AuthDir, Refusal};
use crate::error::AuthError;
use crate::ids::{Id, KeyId};
use crate::password::Password;
use crate::rows::*;
use crate::service::{internal, refusal, Caller, Service};

/// Longest lifetime of an `admin-login` credential: one hour.
pub const ADMIN_LOGIN_MS: u64 = 3_600_000;
/// Longest lifetime of an automation credential: 366 days.
pub const MAX_AUTOMATION_MS: u64 = 366 * 86_400_000;
/// Default number of audit rows answered.
pub const DEFAULT_AUDIT_LIMIT: usize = 100;
/// Most audit rows answered at once.
pub const MAX_AUDIT_LIMIT: usize = 10_000;
/// An audit answer stops after the row that passes this size (the frame
/// bound is 4 MiB); page on with `before=`.
pub const MAX_AUDIT_ANSWER_BYTES: usize = 3 * 1024 * 1024;
/// How often `serve` runs the expiry sweep (and once at start).
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(3600);

/// The administrative verbs.
pub const ADMIN_VERBS: &[&str] = &[
    "user-add",
    "user-disable",
    "user-enable",
    "user-set-password",
    "user-list",
    "grant-set",
    "grant-revoke",
    "grant-list",
    "namespace-add",
    "namespace-remove",
    "namespace-list",
    "visibility-set",
    "visibility-get",
    "repository-rename",
    "repository-forget",
    "credential-list",
    "credential-revoke",
    "automation-create",
    "automation-derive",
    "audit",
];

/// Whether `verb` is one of [`ADMIN_VERBS`].
pub fn is_admin_verb(verb: &str) -> bool {
    ADMIN_VERBS.contains(&verb)
}

/// Run the expiry sweep now, then every [`SWEEP_INTERVAL`] in a thread.
pub fn start_sweeper(service: &Arc<Service>) {
    service.sweep();
    let weak = Arc::downgrade(service);
    let _ = std::thread::Builder::new()
        .name("sweep".into())
        .spawn(move || loop {
            std::thread::sleep(SWEEP_INTERVAL);
            match weak.upgrade() {
                Some(s) => s.sweep(),
                None => return,
            }
        });
}

/// Reads shared by an administrative transaction and the directory.
trait View {
    fn row<R: Row>(&self, key: &Key) -> Result<Option<R>, AuthError>;
    fn prefix(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, AuthError>;
}

impl View for AdminTxn<'_> {
    fn row<R: Row>(&self, key: &Key) -> Result<Option<R>, AuthError> {
        self.get(key)
    }
    fn prefix(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, AuthError> {
        self.scan_prefix(prefix)
    }
}

impl View for AuthDir {
    fn row<R: Row>(&self, key: &Key) -> Result<Option<R>, AuthError> {
        self.get(key)
    }
    fn prefix(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, AuthError> {
        self.scan_prefix(prefix)
    }
}

fn forbidden(message: impl Into<String>) -> Refusal {
    Refusal::new(ErrorCode::Forbidden, message)
}

fn usage(message: impl Into<String>) -> Refusal {
    Refusal::new(ErrorCode::Usage, message)
}

fn person(c: &Caller) -> bool {
    matches!(c.row.kind, CredentialKind::User | CredentialKind::Session)
}

/// An administrator signed in for administration: a `user` credential
/// (`admin-login`, or the bootstrap credential of `init`). An
/// administrator's everyday `session` does not carry these powers.
fn global(c: &Caller) -> bool {
    c.user.administrator && c.row.kind == CredentialKind::User
}

pub(crate) fn require_global(c: &Caller, verb: &str) -> Result<(), Refusal> {
    if global(c) {
        Ok(())
    } else if c.user.administrator {
        Err(forbidden(format!(
            "{verb} needs an administrator sign-in (a user credential: scribe login --admin), not a {} credential",
            c.row.kind.as_str()
        )))
    } else {
        Err(forbidden(format!(
            "{verb} is for administrators; {} is not one",
            c.user.name
        )))
    }
}

/// A repository's rows on this service: its grants (by user id) and its
/// visibility.
type RepositoryRows = (Vec<(Id, GrantRow)>, Option<VisibilityRow>);

/// The grants and the visibility of `namespace/repository`.
fn repository_rows(
    v: &impl View,
    namespace: &str,
    repository: &str,
) -> Result<RepositoryRows, AuthError> {
    let mut grants = Vec::new();
    for (key, bytes) in v.prefix(&format!("grants/{namespace}/{repository}/"))? {
        if let Ok(Key::Grant { user, .. }) = Key::parse(&key) {
            let row = GrantRow::decode(&bytes).map_err(|e| AuthError::corrupt(&key, e))?;
            grants.push((user, row));
        }
    }
    let visibility = v.row::<VisibilityRow>(&Key::Visibility {
        namespace: namespace.to_owned(),
        repository: repository.to_owned(),
    })?;
    Ok((grants, visibility))
}

fn bool_word(b: bool) -> &'static str {
    if b {
        "true"
    } else {
        "false"
    }
}

fn check(what: &'static str, name: &str) -> Result<(), Refusal> {
    check_name(what, name).map_err(|e| usage(e.to_string()))
}

fn user_named(v: &impl View, name: &str) -> Result<UserRow, AdminError> {
    check("username", name)?;
    v.row::<UserRow>(&Key::User(name.to_owned()))?
        .ok_or_else(|| Refusal::new(ErrorCode::NotFound, format!("no user {name}")).into())
}

fn username_of(v: &impl View, id: Id) -> Result<String, AuthError> {
    Ok(v.row::<UserIdRow>(&Key::UserId(id))?
        .map(|r| r.username)
        .unwrap_or_default())
}

fn is_namespace_admin(v: &impl View, namespace: &str, user: Id) -> Result<bool, AuthError> {
    Ok(v.row::<NamespaceMemberRow>(&Key::NamespaceAdmin {
        namespace: namespace.to_owned(),
        user,
    })?
    .is_some())
}

/// Grants and visibility of `namespace/repository`: a global administrator,
/// a namespace admin, or a repository `admin`, with a person credential or
/// an `automation-admin` one.
fn require_repo_admin(
    v: &impl View,
    c: &Caller,
    namespace: &str,
    repository: Option<&str>,
    verb: &str,
) -> Result<(), AdminError> {
    if !(person(c) || c.row.kind == CredentialKind::AutomationAdmin) {
        return Err(forbidden(format!(
            "{verb} needs a person credential or automation-admin, not {}",
            c.row.kind.as_str()
        ))
        .into());
    }
    if global(c) || is_namespace_admin(v, namespace, c.user.id)? {
        return Ok(());
    }
    if let Some(repository) = repository {
        let role = v.row::<GrantRow>(&Key::Grant {
            namespace: namespace.to_owned(),
            repository: repository.to_owned(),
            user: c.user.id,
        })?;
        if role.is_some_and(|r| r.role == Role::Admin) {
            return Ok(());
        }
    }
    Err(forbidden(format!(
        "{} does not administer {namespace}{}",
        c.user.name,
        repository.map(|r| format!("/{r}")).unwrap_or_default()
    ))
    .into())
}

/// The namespaces a user appears in: grants, namespace admins, readers and
/// delegates (for the delegate rule), and whether the user holds a grant.
fn namespaces_of(v: &impl View, user: Id) -> Result<(BTreeSet<String>, bool), AuthError> {
    let mut out = BTreeSet::new();
    let mut granted = false;
    for family in [
        "grants/",
        "namespace-admins/",
        "namespace-readers/",
        "delegates/",
    ] {
        for (k, _) in v.prefix(family)? {
            let namespace = match Key::parse(&k) {
                Ok(Key::Grant {
                    namespace, user: u, ..
                }) if u == user => {
                    granted = true;
                    namespace
                }
                Ok(
                    Key::NamespaceAdmin { namespace, user: u }
                    | Key::NamespaceReader { namespace, user: u }
                    | Key::Delegate { namespace, user: u },
                ) if u == user => namespace,
                _ => continue,
            };
            out.insert(namespace);
        }
    }
    Ok((out, granted))
}

/// Whether `c` may manage the credentials of `target`: the user itself
/// (person credential), a global administrator, or a delegate of every
/// namespace a non-administrator `service` user appears in (it must hold a
/// grant in at least one).
fn may_manage_credentials_of(
    v: &impl View,
    c: &Caller,
    target: &UserRow,
) -> Result<bool, AuthError> {
    if !person(c) {
        return Ok(false);
    }
    if global(c) || target.id == c.user.id {
        return Ok(true);
    }
    if target.kind != UserKind::Service || target.administrator {
        return Ok(false);
    }
    let (namespaces, granted) = namespaces_of(v, target.id)?;
    if !granted {
        return Ok(false);
    }
    for ns in &namespaces {
        let delegate = v.row::<NamespaceMemberRow>(&Key::Delegate {
            namespace: ns.clone(),
            user: c.user.id,
        })?;
        if delegate.is_none() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The kinds in order of power: a derived credential's kind is at most its
/// parent's.
fn automation_rank(kind: CredentialKind) -> Option<u8> {
    match kind {
        CredentialKind::Automation => Some(1),
        CredentialKind::AutomationWrite => Some(2),
        CredentialKind::AutomationMaintain => Some(3),
        CredentialKind::AutomationAdmin => Some(4),
        _ => None,
    }
}

fn parse_bool_arg(what: &str, s: &str) -> Result<bool, Refusal> {
    match s {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(usage(format!(
            "{what} is true or false, not {}",
            scribe_format::echo::echo(s)
        ))),
    }
}

fn parse_ms(what: &str, s: &str) -> Result<u64, Refusal> {
    parse_u64("expires ms", s).map_err(|_| {
        usage(format!(
            "{what}: not a decimal u64: {}",
            scribe_format::echo::echo(s)
        ))
    })
}

/// The standing of credential `r` if it were presented now, decided as
/// `Service::caller` decides: `revoked` (disabled: logged out or
/// revoked), `expired`, `user-disabled` (its user is disabled or gone),
/// else `enabled`.
fn credential_state(
    v: &impl View,
    r: &CredentialRow,
    now_ms: u64,
) -> Result<&'static str, AuthError> {
    if !r.enabled {
        return Ok("revoked");
    }
    if r.expires_ms != NEVER_EXPIRES && r.expires_ms <= now_ms {
        return Ok("expired");
    }
    if r.kind != CredentialKind::Server {
        let user = v.row::<UserRow>(&Key::User(r.subject.clone()))?;
        if !user.is_some_and(|u| u.enabled) {
            return Ok("user-disabled");
        }
    }
    Ok("enabled")
}

/// A `credential-list` row: the ten stored fields, then the state
/// ([`credential_state`]).
fn credential_fields(id: Id, r: &CredentialRow, state: &str) -> Vec<String> {
    vec![
        id.hex(),
        r.kind.as_str().to_owned(),
        r.subject.clone(),
        r.expires_ms.to_string(),
        if r.enabled { "true" } else { "false" }.to_owned(),
        r.label.clone(),
        r.created_ms.to_string(),
        r.parent.map(|p| p.hex()).unwrap_or_default(),
        r.generation.map(|g| g.to_string()).unwrap_or_default(),
        r.key_id.hex(),
        state.to_owned(),
    ]
}

/// A public key argument: SubjectPublicKeyInfo DER of a P-256 key, hex.
fn public_key(spki_hex: &str) -> Result<(KeyId, P256PublicKey), Refusal> {
    let spki = hex::decode(spki_hex).map_err(|_| usage("the public key is not hex"))?;
    let key_id = KeyId::of_p256_spki_der(&spki).map_err(|e| usage(e.to_string()))?;
    let public = P256PublicKey::from_spki_der(&spki).map_err(|e| usage(e.to_string()))?;
    Ok((key_id, public))
}

/// The credential ids derived (directly or not) from `root`.
fn descendants(v: &impl View, root: Id) -> Result<Vec<Id>, AuthError> {
    let all: Vec<(Id, Option<Id>)> = v
        .prefix("credentials/")?
        .into_iter()
        .filter_map(|(k, bytes)| match Key::parse(&k) {
            Ok(Key::Credential(id)) => CredentialRow::decode(&bytes).ok().map(|r| (id, r.parent)),
            _ => None,
        })
        .collect();
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for (id, parent) in &all {
            if *parent == Some(p) && !out.contains(id) {
                out.push(*id);
                frontier.push(*id);
            }
        }
    }
    Ok(out)
}

fn words(args: &[&str]) -> Vec<AuditArg> {
    args.iter().map(|a| AuditArg::word(a)).collect()
}

fn arity<const N: usize>(req: &Sau2Request, usage_text: &str) -> Result<[String; N], Sau2Result> {
    <[String; N]>::try_from(req.arguments.clone())
        .map_err(|_| refusal(ErrorCode::Usage, format!("{} takes {usage_text}", req.verb)))
}

type Rows = Vec<Vec<String>>;

impl Service {
    /// One administrative verb for the caller named by `client_cert`.
    pub(crate) fn admin(
        &self,
        req: &Sau2Request,
        body: &[u8],
        client_cert: Option<&[u8]>,
    ) -> Sau2Result {
        let caller = match self.caller(client_cert) {
            Ok(c) => c,
            Err(r) => return r,
        };
        let c = &caller;
        let r = match req.verb.as_str() {
            "user-add" => self.user_add(c, req, body),
            "user-disable" => self.user_enabled(c, req, body, false),
            "user-enable" => self.user_enabled(c, req, body, true),
            "user-set-password" => self.user_set_password(c, req, body),
            "user-list" => self.user_list(c, req),
            "grant-set" => self.grant_set(c, req, body),
            "grant-revoke" => self.grant_revoke(c, req, body),
            "grant-list" => self.grant_list(c, req),
            "namespace-add" => self.namespace_change(c, req, body, true),
            "namespace-remove" => self.namespace_change(c, req, body, false),
            "namespace-list" => self.namespace_list(c, req),
            "visibility-set" => self.visibility_set(c, req, body),
            "visibility-get" => self.visibility_get(c, req),
            "repository-rename" => self.repository_rename(c, req, body),
            "repository-forget" => self.repository_forget(c, req, body),
            "credential-list" => self.credential_list(c, req),
            "credential-revoke" => self.credential_revoke(c, req, body),
            "automation-create" => self.automation_create(c, req, body),
            "automation-derive" => self.automation_derive(c, req, body),
            "audit" => self.audit_list(c, req),
            other => Err(refusal(
                ErrorCode::Usage,
                format!("unknown verb {}", scribe_format::echo::echo(other)),
            )),
        };
        r.unwrap_or_else(|e| e)
    }

    /// Run `change` through [`AuthDir::administer`] for the caller.
    fn change(
        &self,
        c: &Caller,
        req: &Sau2Request,
        body: &[u8],
        arguments: &[AuditArg],
        change: impl FnOnce(&mut AdminTxn<'_>) -> Result<Rows, AdminError>,
    ) -> Result<Sau2Result, Sau2Result> {
        let mut dir = self.write_dir();
        let intent = dir.intent_digest(body);
        let admin = AdminRequest {
            actor: c.user.id,
            operation: Id(req.operation),
            intent,
            command: &req.verb,
            arguments,
            now_ms: crate::now_ms(),
        };
        Ok(dir.administer(&admin, change).unwrap_or_else(internal))
    }

    /// Answer a listing; a refusal writes a `rejected` audit row.
    fn listing(
        &self,
        c: &Caller,
        req: &Sau2Request,
        arguments: &[AuditArg],
        read: impl FnOnce(&AuthDir) -> Result<Rows, AdminError>,
    ) -> Result<Sau2Result, Sau2Result> {
        let r = {
            let dir = self.read_dir();
            read(&dir)
        };
        match r {
            Ok(rows) => Ok(Sau2Result::Rows(rows)),
            Err(AdminError::Failed(e)) => Err(internal(e)),
            Err(AdminError::Refused(refused)) => {
                let now = crate::now_ms();
                let op = Id(req.operation);
                let written = self.write_dir().transact(|tx| {
                    tx.audit(now, Some(c.user.id), &req.verb, op, false, arguments)?;
                    Ok(())
                });
                match written {
                    Err(e) => Err(internal(e)),
                    Ok(_) => Err(refusal(refused.code, refused.message)),
                }
            }
        }
    }

    /// The expiry sweep (errors are reported on standard error; the next
    /// sweep tries again).
    pub fn sweep(&self) {
        let r = self.write_dir().sweep_expired(crate::now_ms());
        match r {
            Ok(removed) if !removed.is_empty() => {
                eprintln!(
                    "scribe-auth: expiry sweep removed {} credential(s)",
                    removed.len()
                )
            }
            Ok(_) => {}
            Err(e) => eprintln!("scribe-auth: expiry sweep failed: {e}"),
        }
    }

    // ---- users ----

    /// `user-add USERNAME PASSWORD ADMIN KIND` → `[[user id]]`. An empty
    /// password leaves the user without one (it cannot sign in until
    /// `user-set-password`).
    fn user_add(
        &self,
        c: &Caller,
        req: &Sau2Request,
        body: &[u8],
    ) -> Result<Sau2Result, Sau2Result> {
        let [username, password, admin, kind] = arity::<4>(
            req,
            "USERNAME PASSWORD ADMIN(true|false) KIND(person|service)",
        )?;
        // An unacceptable password is refused inside the change, after the
        // authorization (so a non-administrator is told `forbidden` and audited).
        let password = if password.is_empty() {
            Ok(None)
        } else {
            Password::new(password).map(Some)
        };
        let mut args = vec![AuditArg::word(&username)];
        if admin == "true" {
            args.push(AuditArg::word("--admin"));
        }
        if kind == "service" {
            args.push(AuditArg::word("--service"));
        }
        if matches!(password, Ok(None)) {
            args.push(AuditArg::word("--no-password"));
        }
        self.change(c, req, body, &args, |tx| {
            require_global(c, "user-add")?;
            check("username", &username)?;
            let password = password.map_err(|e| usage(e.to_string()))?;
            let administrator = parse_bool_arg("ADMIN", &admin)?;
            let kind = match kind.as_str() {
                "person" => UserKind::Person,
                "service" => UserKind::Service,
                _ => {
                    return Err(usage(format!(
                        "KIND is person or service, not {}",
                        scribe_format::echo::echo(&kind)
                    ))
                    .into())
                }
            };
            if tx.contains(&Key::User(username.clone()))? {
                return Err(Refusal::new(
                    ErrorCode::AlreadyExists,
                    format!("user {username} exists"),
                )
                .into());
            }
            let id = Id::random();
            tx.put(
                &Key::User(username.clone()),
                &UserRow {
                    id,
                    name: username.clone(),
                    enabled: true,
                    administrator,
                    kind,
                },
            )?;
            tx.put(
                &Key::UserId(id),
                &UserIdRow {
                    username: username.clone(),
                },
            )?;
            if let Some(p) = &password {
                tx.set_password(&username, p)?;
            }
            Ok(vec![vec![id.hex()]])
        })
    }

    /// `user-disable USERNAME` / `user-enable USERNAME` → `[[username, enabled]]`.
    fn user_enabled(
        &self,
        c: &Caller,
        req: &Sau2Request,
        body: &[u8],
        enabled: bool,
    ) -> Result<Sau2Result, Sau2Result> {
        let [username] = arity::<1>(req, "USERNAME")?;
        let args = words(&[&username]);
        self.change(c, req, body, &args, |tx| {
            require_global(c, &req.verb)?;
            let mut user = user_named(tx, &username)?;
            if !enabled && user.id == c.user.id {
                return Err(usage("an administrator cannot disable itself").into());
            }
            if user.enabled != enabled {
                user.enabled = enabled;
                tx.put(&Key::User(username.clone()), &user)?;
            }
            Ok(vec![vec![username.clone(), enabled.to_string()]])
        })
    }

    /// `user-set-password USERNAME PASSWORD` → `[[generation, sessions
    /// ended]]`: the new password generation; the user's session
    /// credentials of older generations are disabled.
    fn user_set_password(
        &self,
        c: &Caller,
        req: &Sau2Request,
        body: &[u8],
    ) -> Result<Sau2Result, Sau2Result> {
        let [username, password] = arity::<2>(req, "USERNAME PASSWORD")?;
        let password = Password::new(password);
        let args = words(&[&username]);
        self.change(c, req, body, &args, |tx| {
            require_global(c, "user-set-password")?;
            let password = password.map_err(|e| usage(e.to_string()))?;
            user_named(tx, &username)?;
            let generation = tx.set_password(&username, &password)?;
            let mut ended = 0u64;
            for (k, _) in tx.scan_prefix(&format!("user-credentials/{username}/"))? {
                let Ok(Key::UserCredential { credential, .. }) = Key::parse(&k) else {
                    continue;
                };
                let key = Key::Credential(credential);
                if let Some(mut row) = tx.get::<CredentialRow>(&key)? {
                    let stale = row.generation.is_some_and(|g| g < generation);
                    let login = matches!(row.kind, CredentialKind::Session | CredentialKind::User);
                    if row.enabled && login && stale {
                        row.enabled = false;
                        tx.put(&key, &row)?;
                        ended += 1;
                    }
                }
            }
            Ok(vec![vec![generation.to_string(), ended.to_string()]])
        })
    }

    /// `user-list` → rows `[username, user id, enabled, administrator,
    /// person or service, password generation or empty]`.
    fn user_list(&self, c: &Caller, req: &Sau2Request) -> Result<Sau2Result, Sau2Result> {
        arity::<0>(req, "no arguments")?;
        self.listing(c, req, &[], |dir| {
            require_global(c, "user-list")?;
            let mut rows = Vec::new();
            for (k, v) in dir.scan_prefix("users/")? {
                let u = UserRow::decode(&v).map_err(|e| AuthError::corrupt(&k, e))?;
                let generation = dir
                    .get::<PasswordRow>(&Key::Password(u.name.clone()))?
                    .map(|p| p.generation.to_string())
                    .unwrap_or_default();
                rows.push(vec![
                    u.name.clone(),
                    u.id.hex(),
                    u.enabled.to_string(),
                    u.administrator.to_string(),
                    match u.kind {
                        UserKind::Person => "person",
                        UserKind::Service => "service",
                    }
                    .to_owned(),
                    generation,
                ]);
            }
            Ok(rows)
        })
    }

    // ---- grants ----

    /// `grant-set NAMESPACE REPOSITORY USERNAME ROLE` → `[[namespace,
    /// repository, username, role]]`.
    fn grant_set(
        &self,
        c: &Caller,
        req: &Sau2Request,
        body: &[u8],
    ) -> Result<Sau2Result, Sau2Result> {
        let [namespace, repository, username, role] =
            arity::<4>(req, "NAMESPACE REPOSITORY USERNAME ROLE")?;
        let args = words(&[&namespace, &repository, &username, &role]);
        self.change(c, req, body, &args, |tx| {
            check("namespace", &namespace)?;
            check("repository", &repository)?;
            require_repo_admin(tx, c, &namespace, Some(&repository), "grant-set")?;
            let role = Role::parse(&role).map_err(|_| {
                usage(format!(
                    "ROLE is reader, writer, maintainer or admin, not {role:?}"
                ))
            })?;
            let user = user_named(tx, &username)?;
            let key = Key::Grant {
                namespace: namespace.clone(),
                repository: repository.clone(),
                user: user.id,
            };
            if tx.get::<GrantRow>(&key)?.map(|g| g.role) != Some(role) {
                tx.put(&key, &GrantRow { role })?;
            }
            Ok(vec![vec![
                namespace.clone(),
                repository.clone(),
                username.clone(),
                role.as_str().to_owned(),
            ]])
        })
    }

    /// `grant-revoke NAMESPACE REPOSITORY USERNAME` → `[[namespace,
    /// repository, username, former role]]`; `not_found` without a grant.
    fn grant_revoke(
        &self,
        c: &Caller,
        req: &Sau2Request,
        body: &[u8],
    ) -> Result<Sau2Result, Sau2Result> {
        let [namespace, repository, username] = arity::<3>(req, "NAMESPACE REPOSITORY USERNAME")?;
        let args = words(&[&namespace, &repository, &username]);
        self.change(c, req, body, &args, |tx| {
            check("namespace", &namespace)?;
            check("repository", &repository)?;
            require_repo_admin(tx, c, &namespace, Some(&repository), "grant-revoke")?;
            let user = user_named(tx, &username)?;
            let key = Key::Grant {
                namespace: namespace.clone(),
                repository: repository.clone(),
                user: user.id,
            };
            let Some(old) = tx.get::<GrantRow>(&key)? else {
                return Err(Refusal::new(
                    ErrorCode::NotFound,
                    format!("{username} has no grant on {namespace}/{repository}"),
                )
                .into());
            };
            tx.delete(&key)?;
            Ok(vec![vec![
                namespace.clone(),
                repository.clone(),
                username.clone(),
                old.role.as_str().to_owned(),
            ]])
        })
    }

    /// `grant-list NAMESPACE [REPOSITORY]` → rows `[namespace, repository,
    /// username, user id, role]`.
    fn grant_list(&self, c: &Caller, req: &Sau2Request) -> Result<Sau2Result, Sau2Result> {
        let (namespace, repository) = match req.arguments.as_slice() {
            [ns] => (ns.clone(), None),
            [ns, repo] => (ns.clone(), Some(repo.clone())),
            _ => {
                return Err(refusal(
                    ErrorCode::Usage,
                    "grant-list takes NAMESPACE [REPOSITORY]",
                ))
            }
        };
        let args = words(&req.arguments.iter().map(String::as_str).collect::<Vec<_>>());
        self.listing(c, req, &args, |dir| {
            check("namespace", &namespace)?;
            if let Some(r) = &repository {
                check("repository", r)?;
            }
            require_repo_admin(dir, c, &namespace, repository.as_deref(), "grant-list")?;
            let prefix = match &repository {
                Some(r) => format!("grants/{namespace}/{r}/"),
                None => format!("grants/{namespace}/"),
            };
            let mut rows = Vec::new();
            for (k, v) in dir.scan_prefix(&prefix)? {
                let Ok(Key::Grant {
                    namespace,
                    repository,
                    user,
                }) = Key::parse(&k)
                else {
                    continue;
                };
                let g = GrantRow::decode(&v).map_err(|e| AuthError::corrupt(&k, e))?;
                rows.push(vec![
                    namespace,
                    repository,
                    username_of(dir, user)?,
                    user.hex(),
                    g.role.as_str().to_owned(),
                ]);
            }
            Ok(rows)
        })
    }

    // ---- namespaces ----

    /// `namespace-add NAMESPACE ROLE USERNAME` / `namespace-remove ...`
    /// (ROLE: admin, reader, delegate) → `[[namespace, role, username]]`.
    /// Namespace admins are managed by global administrators; readers and
    /// delegates also by the namespace's admins.
    fn namespace_change(
        &self,
        c: &Caller,
        req: &Sau2Request,
        body: &[u8],
        add: bool,
    ) -> Result<Sau2Result, Sau2Result> {
        let [namespace, role, username] =
            arity::<3>(req, "NAMESPACE ROLE(admin|reader|delegate) USERNAME")?;
        let args = words(&[&namespace, &role, &username]);
        self.change(c, req, body, &args, |tx| {
            check("namespace", &namespace)?;
            let user = user_named(tx, &username)?;
            let key = match role.as_str() {
                "admin" => Key::NamespaceAdmin {
                    namespace: namespace.clone(),
                    user: user.id,
                },
                "reader" => Key::NamespaceReader {
                    namespace: namespace.clone(),
                    user: user.id,
                },
                "delegate" => Key::Delegate {
                    namespace: namespace.clone(),
                    user: user.id,
                },
                _ => {
                    return Err(
                        usage(format!("ROLE is admin, reader or delegate, not {role:?}")).into(),
                    )
                }
            };
            let allowed = global(c)
                || (role != "admin" && person(c) && is_namespace_admin(tx, &namespace, c.user.id)?);
            if !allowed {
                return Err(forbidden(format!(
                    "{} may not change the {role}s of namespace {namespace}",
                    c.user.name
                ))
                .into());
            }
            if add {
                if !tx.contains(&key)? {
                    tx.put(
                        &key,
                        &NamespaceMemberRow {
                            username: username.clone(),
                        },
                    )?;
                }
            } else if !tx.delete(&key)? {
                return Err(Refusal::new(
                    ErrorCode::NotFound,
                    format!("{username} is not a {role} of namespace {namespace}"),
                )
                .into());
            }
            Ok(vec![vec![
                namespace.clone(),
                role.clone(),
                username.clone(),
            ]])
        })
    }

    /// `namespace-list [NAMESPACE]` → rows `[namespace, role, username, user
    /// id]`. All namespaces: global administrators; one: also its admins.
    fn namespace_list(&self, c: &Caller, req: &Sau2Request) -> Result<Sau2Result, Sau2Result> {
        let namespace = match req.arguments.as_slice() {
            [] => None,
            [ns] => Some(ns.clone()),
            _ => {
                return Err(refusal(
                    ErrorCode::Usage,
                    "namespace-list takes [NAMESPACE]",
                ))
            }
        };
        let args = words(&req.arguments.iter().map(String::as_str).collect::<Vec<_>>());
        self.listing(c, req, &args, |dir| {
            match &namespace {
                None => require_global(c, "namespace-list")?,
                Some(ns) => {
                    check("namespace", ns)?;
                    if !(global(c) || (person(c) && is_namespace_admin(dir, ns, c.user.id)?)) {
                        return Err(forbidden(format!(
                            "{} does not administer namespace {ns}",
                            c.user.name
                        ))
                        .into());
                    }
                }
            }
            let mut rows = Vec::new();
            for (family, role) in [
                ("namespace-admins/", "admin"),
                ("namespace-readers/", "reader"),
                ("delegates/", "delegate"),
            ] {
                let prefix = match &namespace {
                    Some(ns) => format!("{family}{ns}/"),
                    None => family.to_owned(),
                };
                for (k, v) in dir.scan_prefix(&prefix)? {
                    let Ok(
                        Key::NamespaceAdmin { namespace, user }
                        | Key::NamespaceReader { namespace, user }
                        | Key::Delegate { namespace, user },
                    ) = Key::parse(&k)
                    else {
                        continue;
                    };
                    let m =
                        NamespaceMemberRow::decode(&v).map_err(|e| AuthError::corrupt(&k, e))?;
                    rows.push(vec![namespace, role.to_owned(), m.username, user.hex()]);
                }
            }
            Ok(rows)
        })
    }

    // ---- visibility ----

    /// `visibility-set NAMESPACE REPOSITORY public|private` →
    /// `[[visibility, visibility revision]]`; the revision advances on each
    /// change (setting the current value changes nothing).
    fn visibility_set(
        &self,
        c: &Caller,
        req: &Sau2Request,
        body: &[u8],
    ) -> Result<Sau2Result, Sau2Result> {
        let [namespace, repository, visibility] =
            arity::<3>(req, "NAMESPACE REPOSITORY public|private")?;
        let args = words(&[&namespace, &repository, &visibility]);
        self.change(c, req, body, &args, |tx| {
            check("namespace", &namespace)?;
            check("repository", &repository)?;
            require_repo_admin(tx, c, &namespace, Some(&repository), "visibility-set")?;
            let public = match visibility.as_str() {
                "public" => true,
                "private" => false,
                _ => {
                    return Err(usage(format!(
                        "visibility is public or private, not {visibility:?}"
                    ))
                    .into())
                }
            };
            let key = Key::Visibility {
                namespace: namespace.clone(),
                repository: repository.clone(),
            };
            let current = tx.get::<VisibilityRow>(&key)?;
            let row = match current {
                Some(r) if r.public == public => r,
                other => {
                    let revision = other.map_or(0, |r| r.revision).saturating_add(1);
                    let row = VisibilityRow { public, revision };
                    tx.put(&key, &row)?;
                    row
                }
            };
            Ok(vec![vec![visibility.clone(), row.revision.to_string()]])
        })
    }

    /// `visibility-get NAMESPACE REPOSITORY` → `[[visibility, revision]]`
    /// (`private 0` when never set); any authenticated caller.
    fn visibility_get(&self, c: &Caller, req: &Sau2Request) -> Result<Sau2Result, Sau2Result> {
        let [namespace, repository] = arity::<2>(req, "NAMESPACE REPOSITORY")?;
        let args = words(&[&namespace, &repository]);
        self.listing(c, req, &args, |dir| {
            check("namespace", &namespace)?;
            check("repository", &repository)?;
            let row = dir.get::<VisibilityRow>(&Key::Visibility {
                namespace: namespace.clone(),
                repository: repository.clone(),
            })?;
            let (public, revision) = row.map_or((false, 0), |r| (r.public, r.revision));
            Ok(vec![vec![
                if public { "public" } else { "private" }.to_owned(),
                revision.to_string(),
            ]])
        })
    }

    // ---- repositories (`scribe-server repo rename` / `repo delete`) ----

    /// `repository-rename NAMESPACE OLD NEW` → `[[namespace, old, new,
    /// grants moved, visibility moved (true or false)]]`: every
    /// `grants/NAMESPACE/OLD/USER` row becomes `grants/NAMESPACE/NEW/USER`
    /// and `visibility/NAMESPACE/OLD` becomes `visibility/NAMESPACE/NEW`
    /// (values unchanged), in one transaction. A global administrator or a
    /// namespace admin. Refused with `already_exists` when both names hold
    /// rows (NEW's would be merged into another repository's); nothing
    /// under OLD moves nothing, so a rename interrupted after this step
    /// runs again.
    fn repository_rename(
        &self,
        c: &Caller,
        req: &Sau2Request,
        body: &[u8],
    ) -> Result<Sau2Result, Sau2Result> {
        let [namespace, old, new] = arity::<3>(req, "NAMESPACE OLD NEW")?;
        let args = words(&[&namespace, &old, &new]);
        self.change(c, req, body, &args, |tx| {
            check("namespace", &namespace)?;
            check("repository", &old)?;
            check("repository", &new)?;
            require_repo_admin(tx, c, &namespace, None, "repository-rename")?;
            if old == new {
                return Err(usage("OLD and NEW are the same name").into());
            }
            let (old_grants, old_visibility) = repository_rows(tx, &namespace, &old)?;
            let (new_grants, new_visibility) = repository_rows(tx, &namespace, &new)?;
            let old_any = !old_grants.is_empty() || old_visibility.is_some();
            let new_any = !new_grants.is_empty() || new_visibility.is_some();
            if old_any && new_any {
                return Err(Refusal::new(
                    ErrorCode::AlreadyExists,
                    format!(
                        "{namespace}/{new} holds grants or a visibility already (left by an \
                         earlier repository of that name?); revoke them first"
                    ),
                )
                .into());
            }
            for (user, row) in &old_grants {
                tx.put(
                    &Key::Grant {
                        namespace: namespace.clone(),
                        repository: new.clone(),
                        user: *user,
                    },
                    row,
                )?;
                tx.delete(&Key::Grant {
                    namespace: namespace.clone(),
                    repository: old.clone(),
                    user: *user,
                })?;
            }
            if let Some(row) = &old_visibility {
                tx.put(
                    &Key::Visibility {
                        namespace: namespace.clone(),
                        repository: new.clone(),
                    },
                    row,
                )?;
                tx.delete(&Key::Visibility {
                    namespace: namespace.clone(),
                    repository: old.clone(),
                })?;
            }
            Ok(vec![vec![
                namespace.clone(),
                old.clone(),
                new.clone(),
                old_grants.len().to_string(),
                bool_word(old_visibility.is_some()).to_owned(),
            ]])
        })
    }

    /// `repository-forget NAMESPACE REPOSITORY` → `[[namespace, repository,
    /// grants removed, visibility removed (true or false)]]`: removes every
    /// grant and the visibility of a deleted repository, so that a later
    /// repository given its name starts with none. A global administrator
    /// or a namespace admin; a name without rows removes nothing.
    fn repository_forget(
        &self,
        c: &Caller,
        req: &Sau2Request,
        body: &[u8],
    ) -> Result<Sau2Result, Sau2Result> {
        let [namespace, repository] = arity::<2>(req, "NAMESPACE REPOSITORY")?;
        let args = words(&[&namespace, &repository]);
        self.change(c, req, body, &args, |tx| {
            check("namespace", &namespace)?;
            check("repository", &repository)?;
            require_repo_admin(tx, c, &namespace, None, "repository-forget")?;
            let (grants, visibility) = repository_rows(tx, &namespace, &repository)?;
            for (user, _) in &grants {
                tx.delete(&Key::Grant {
                    namespace: namespace.clone(),
                    repository: repository.clone(),
                    user: *user,
                })?;
            }
            if visibility.is_some() {
                tx.delete(&Key::Visibility {
                    namespace: namespace.clone(),
                    repository: repository.clone(),
                })?;
            }
            Ok(vec![vec![
                namespace.clone(),
                repository.clone(),
                grants.len().to_string(),
                bool_word(visibility.is_some()).to_owned(),
            ]])
        })
    }

    // ---- credentials ----

    /// `credential-list [USERNAME]` → rows `[credential id, kind, subject,
    /// expires ms, enabled, label, created ms, parent, generation, key
    /// id, state]` (state: [`credential_state`]). Without a name: the
    /// caller's own (an automation credential sees itself and its
    /// descendants).
    fn credential_list(&self, c: &Caller, req: &Sau2Request) -> Result<Sau2Result, Sau2Result> {
        let target = match req.arguments.as_slice() {
            [] => None,
            [u] => Some(u.clone()),
            _ => {
                return Err(refusal(
                    ErrorCode::Usage,
                    "credential-list takes [USERNAME]",
                ))
            }
        };
        let args = words(&req.arguments.iter().map(String::as_str).collect::<Vec<_>>());
        self.listing(c, req, &args, |dir| {
            let username = target.clone().unwrap_or_else(|| c.user.name.clone());
            let user = user_named(dir, &username)?;
            let ids: Vec<Id> = if person(c) {
                if !may_manage_credentials_of(dir, c, &user)? {
                    return Err(forbidden(format!(
                        "{} may not list the credentials of {username}",
                        c.user.name
                    ))
                    .into());
                }
                dir.scan_prefix(&format!("user-credentials/{username}/"))?
                    .into_iter()
                    .filter_map(|(k, _)| match Key::parse(&k) {
                        Ok(Key::UserCredential { credential, .. }) => Some(credential),
                        _ => None,
                    })
                    .collect()
            } else {
                if user.id != c.user.id {
                    return Err(forbidden(
                        "an automation credential lists only itself and its descendants",
                    )
                    .into());
                }
                let mut ids = vec![c.credential];
                ids.extend(descendants(dir, c.credential)?);
                ids
            };
            let mut rows = Vec::new();
            let now = crate::now_ms();
            for id in ids {
                if let Some(r) = dir.get::<CredentialRow>(&Key::Credential(id))? {
                    let state = credential_state(dir, &r, now)?;
                    rows.push(credential_fields(id, &r, state));
                }
            }
            Ok(rows)
        })
    }

    /// `credential-revoke CREDENTIAL` → one row `[credential id]` per
    /// credential disabled: the credential and every credential derived from
    /// it.
    fn credential_revoke(
        &self,
        c: &Caller,
        req: &Sau2Request,
        body: &[u8],
    ) -> Result<Sau2Result, Sau2Result> {
        let [credential] = arity::<1>(req, "CREDENTIAL (32 hex digits)")?;
        let args = words(&[&credential]);
        self.change(c, req, body, &args, |tx| {
            let id = Id::parse(&credential)
                .map_err(|_| usage("CREDENTIAL is 32 lowercase hex digits"))?;
            let Some(row) = tx.get::<CredentialRow>(&Key::Credential(id))? else {
                return Err(Refusal::new(
                    ErrorCode::NotFound,
                    format!("no credential {credential}"),
                )
                .into());
            };
            let allowed = if row.kind == CredentialKind::Server {
                global(c)
            } else if person(c) {
                match tx.get::<UserRow>(&Key::User(row.subject.clone()))? {
                    Some(owner) => may_manage_credentials_of(tx, c, &owner)?,
                    None => global(c),
                }
            } else {
                id == c.credential || descendants(tx, c.credential)?.contains(&id)
            };
            if !allowed {
                return Err(forbidden(format!(
                    "{} may not revoke credential {credential}",
                    c.user.name
                ))
                .into());
            }
            let mut out = Vec::new();
            let mut all = vec![id];
            all.extend(descendants(tx, id)?);
            for cid in all {
                let key = Key::Credential(cid);
                if let Some(mut r) = tx.get::<CredentialRow>(&key)? {
                    if r.enabled {
                        r.enabled = false;
                        tx.put(&key, &r)?;
                    }
                    out.push(vec![cid.hex()]);
                }
            }
            Ok(out)
        })
    }

    // ---- automation ----

    fn signer(&self) -> Result<Signer, Sau2Result> {
        self.read_dir()
            .signer(CaFamily::Credential)
            .map_err(internal)
    }

    /// `automation-create USERNAME KIND EXPIRES_MS LABEL SPKI_HEX` →
    /// `[[credential id, username, kind, expires ms, certificate PEM]]`.
    fn automation_create(
        &self,
        c: &Caller,
        req: &Sau2Request,
        body: &[u8],
    ) -> Result<Sau2Result, Sau2Result> {
        let [username, kind, expires, label, spki_hex] =
            arity::<5>(req, "USERNAME KIND EXPIRES_MS LABEL PUBLIC_KEY")?;
        let key_arg = hex::decode(&spki_hex)
            .ok()
            .and_then(|d| KeyId::of_p256_spki_der(&d).ok());
        let mut args = words(&[&username, &kind, &expires, &label]);
        args.push(match key_arg {
            Some(k) => AuditArg::key(k),
            None => AuditArg::word("key:invalid"),
        });
        let signer = self.signer()?;
        let op = Id(req.operation);
        let intent = self.read_dir().intent_digest(body);
        self.change(c, req, body, &args, |tx| {
            let now = crate::now_ms();
            let user = user_named(tx, &username)?;
            if !may_manage_credentials_of(tx, c, &user)? {
                return Err(forbidden(format!(
                    "{} may not create credentials for {username}",
                    c.user.name
                ))
                .into());
            }
            if !user.enabled {
                return Err(usage(format!("user {username} is disabled")).into());
            }
            let kind = CredentialKind::parse(&kind)
                .ok()
                .filter(|k| k.is_automation())
                .ok_or_else(|| {
                    usage(format!(
                        "KIND is automation, automation-write, automation-maintain or automation-admin, not {kind:?}"
                    ))
                })?;
            let expires_ms = parse_ms("EXPIRES_MS", &expires)?;
            if expires_ms <= now || expires_ms - now > MAX_AUTOMATION_MS {
                return Err(usage(format!(
                    "the expiry must be in the future and at most {} days away",
                    MAX_AUTOMATION_MS / 86_400_000
                ))
                .into());
            }
            let (key_id, public) = public_key(&spki_hex)?;
            let generation = tx
                .get::<PasswordRow>(&Key::Password(username.clone()))?
                .map_or(0, |p| p.generation);
            let credential = Id::random();
            let row = CredentialRow {
                kind,
                subject: username.clone(),
                expires_ms,
                enabled: true,
                label: label.clone(),
                key_id,
                created_ms: now,
                parent: None,
                generation: Some(generation),
            };
            let cert = signer.issue_credential(&public, credential, kind, now, expires_ms)?;
            tx.insert_credential(credential, &row, &cert)?;
            tx.put(
                &Key::Automation(op),
                &AutomationOutcomeRow {
                    user: user.id,
                    intent,
                    expires_ms,
                    credential,
                },
            )?;
            Ok(vec![vec![
                credential.hex(),
                username.clone(),
                kind.as_str().to_owned(),
                expires_ms.to_string(),
                cert,
            ]])
        })
    }

    /// `automation-derive PARENT KIND EXPIRES_MS LABEL SPKI_HEX` → `[[credential
    /// id, username, kind, expires ms, certificate PEM]]`: a kind at most the
    /// parent's, an expiry no later than the parent's. Callers: the parent
    /// credential itself, its owner (person credential), an administrator.
    fn automation_derive(
        &self,
        c: &Caller,
        req: &Sau2Request,
        body: &[u8],
    ) -> Result<Sau2Result, Sau2Result> {
        let [parent, kind, expires, label, spki_hex] =
            arity::<5>(req, "PARENT KIND EXPIRES_MS LABEL PUBLIC_KEY")?;
        let key_arg = hex::decode(&spki_hex)
            .ok()
            .and_then(|d| KeyId::of_p256_spki_der(&d).ok());
        let mut args = words(&[&parent, &kind, &expires, &label]);
        args.push(match key_arg {
            Some(k) => AuditArg::key(k),
            None => AuditArg::word("key:invalid"),
        });
        let signer = self.signer()?;
        let op = Id(req.operation);
        let intent = self.read_dir().intent_digest(body);
        self.change(c, req, body, &args, |tx| {
            let now = crate::now_ms();
            let parent_id =
                Id::parse(&parent).map_err(|_| usage("PARENT is 32 lowercase hex digits"))?;
            let Some(p) = tx.get::<CredentialRow>(&Key::Credential(parent_id))? else {
                return Err(
                    Refusal::new(ErrorCode::NotFound, format!("no credential {parent}")).into(),
                );
            };
            let allowed =
                parent_id == c.credential || global(c) || (person(c) && p.subject == c.user.name);
            if !allowed {
                return Err(forbidden(format!(
                    "{} may not derive from credential {parent}",
                    c.user.name
                ))
                .into());
            }
            let Some(parent_rank) = automation_rank(p.kind) else {
                return Err(usage(format!(
                    "only automation credentials are derived from; {parent} is {}",
                    p.kind.as_str()
                ))
                .into());
            };
            if !p.enabled || (p.expires_ms != NEVER_EXPIRES && p.expires_ms <= now) {
                return Err(forbidden(format!("credential {parent} is revoked or expired")).into());
            }
            let kind = CredentialKind::parse(&kind)
                .ok()
                .filter(|k| k.is_automation())
                .ok_or_else(|| usage(format!("KIND is an automation kind, not {kind:?}")))?;
            if automation_rank(kind).unwrap_or(u8::MAX) > parent_rank {
                return Err(forbidden(format!(
                    "a derived credential cannot be wider than its parent: {} > {}",
                    kind.as_str(),
                    p.kind.as_str()
                ))
                .into());
            }
            let expires_ms = parse_ms("EXPIRES_MS", &expires)?;
            if expires_ms > p.expires_ms {
                return Err(forbidden("a derived credential cannot outlive its parent").into());
            }
            if expires_ms <= now {
                return Err(usage("the expiry must be in the future").into());
            }
            let (key_id, public) = public_key(&spki_hex)?;
            let credential = Id::random();
            let row = CredentialRow {
                kind,
                subject: p.subject.clone(),
                expires_ms,
                enabled: true,
                label: label.clone(),
                key_id,
                created_ms: now,
                parent: Some(parent_id),
                generation: p.generation.or(Some(0)),
            };
            let cert = signer.issue_credential(&public, credential, kind, now, expires_ms)?;
            tx.insert_credential(credential, &row, &cert)?;
            tx.put(
                &Key::Derive(op),
                &DeriveOutcomeRow {
                    parent: parent_id,
                    intent,
                    credential,
                },
            )?;
            Ok(vec![vec![
                credential.hex(),
                p.subject.clone(),
                kind.as_str().to_owned(),
                expires_ms.to_string(),
                cert,
            ]])
        })
    }

    // ---- audit ----

    /// `audit [limit=N] [before=SEQ] [command=VERB] [user=USERNAME]
    /// [outcome=ok|rejected]` → rows `[sequence, unix ms, actor user id,
    /// actor username, command, operation id, ok or rejected, arguments]`,
    /// newest first.
    fn audit_list(&self, c: &Caller, req: &Sau2Request) -> Result<Sau2Result, Sau2Result> {
        let args = words(&req.arguments.iter().map(String::as_str).collect::<Vec<_>>());
        self.listing(c, req, &args, |dir| {
            require_global(c, "audit")?;
            let mut limit = DEFAULT_AUDIT_LIMIT;
            let mut before = None;
            let mut command = None;
            let mut user = None;
            let mut outcome = None;
            for a in &req.arguments {
                let Some((name, value)) = a.split_once('=') else {
                    return Err(usage(format!("audit filters are NAME=VALUE, not {a:?}")).into());
                };
                match name {
                    "limit" => {
                        limit = value
                            .parse::<usize>()
                            .ok()
                            .filter(|n| (1..=MAX_AUDIT_LIMIT).contains(n))
                            .ok_or_else(|| usage(format!("limit is 1 to {MAX_AUDIT_LIMIT}")))?
                    }
                    "before" => {
                        before = Some(
                            parse_u64("before", value)
                                .map_err(|_| usage("before is a sequence number"))?,
                        )
                    }
                    "command" => command = Some(value.to_owned()),
                    "user" => {
                        let u = user_named(dir, value)?;
                        user = Some(u.id)
                    }
                    "outcome" => {
                        outcome = Some(match value {
                            "ok" => true,
                            "rejected" => false,
                            _ => return Err(usage("outcome is ok or rejected").into()),
                        })
                    }
                    _ => {
                        return Err(usage(format!(
                            "unknown audit filter {name:?} (limit, before, command, user, outcome)"
                        ))
                        .into())
                    }
                }
            }
            let before_key = before.map(|b| Key::Audit(b).to_string());
            let mut rows = Vec::new();
            let mut names = std::collections::HashMap::new();
            let mut bytes = 0usize;
            dir.scan_prefix_rev("audit/", before_key.as_deref(), |k, v| {
                let Ok(Key::Audit(seq)) = Key::parse(k) else {
                    return Ok(true);
                };
                let r = AuditRow::decode(v).map_err(|e| AuthError::corrupt(k, e))?;
                if command.as_ref().is_some_and(|c| *c != r.command)
                    || user.is_some_and(|u| r.actor != Some(u))
                    || outcome.is_some_and(|o| o != r.ok)
                {
                    return Ok(true);
                }
                let actor_name = match r.actor {
                    None => String::new(),
                    Some(id) => match names.get(&id) {
                        Some(n) => String::clone(n),
                        None => {
                            let n = username_of(dir, id)?;
                            names.insert(id, n.clone());
                            n
                        }
                    },
                };
                rows.push(vec![
                    seq.to_string(),
                    r.unix_ms.to_string(),
                    r.actor.map(|a| a.hex()).unwrap_or_default(),
                    actor_name,
                    r.command,
                    r.operation.hex(),
                    if r.ok { "ok" } else { "rejected" }.to_owned(),
                    r.arguments,
                ]);
                bytes += rows
                    .last()
                    .map_or(0, |r| r.iter().map(|f| f.len() + 2).sum::<usize>() + 2);
                Ok(rows.len() < limit && bytes < MAX_AUDIT_ANSWER_BYTES)
            })?;
            Ok(rows)
        })
    }
}

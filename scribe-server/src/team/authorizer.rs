//! [`TeamAuthorizer`]: the [`Authorizer`] of a team server
//! (`docs/auth.md#storage-servers`).
//!
//! - **Authenticate** (once per connection): the TLS handshake already
//!   checked the client certificate's chain to a credential CA, its time
//!   and clientAuth; the server asks scribe-auth to `resolve` the
//!   certificate (cached per certificate) and accepts an enabled,
//!   unexpired credential of an enabled user.
//! - **Authorize** (every request): the cached answer is checked again
//!   (so a revocation reaches open connections), then the request's
//!   repository role, workspace ownership (`auth-state.redb` claims) and
//!   operation claims.
//! - **Revisions**: every answer carries scribe-auth's incarnation and
//!   revision. A newer one is persisted (`AuthState::observe`, its own
//!   Immediate transaction) before it is acted on and empties the cache;
//!   an older one of the same incarnation is `auth_unavailable`. The
//!   server asks for the revision (`revision`) at most once per
//!   `recheck` interval before using a cached answer.

use scribe_format::echo::echo;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use scribe_format::wire::Request;
use scribe_format::{ErrorCode, OperationId, WorkspaceId};
use scribe_metadata::auth_state::{AuthRevision, AuthState};
use scribe_metadata::Repository;

use super::sau2::Sau2Client;
use super::{AuthFiles, TeamError};
use crate::service::auth::{Action, Authorizer, Credential, PeerInfo, Principal, PrincipalKind};
use crate::service::{Failure, Service};

/// Default interval between revision checks.
pub const DEFAULT_RECHECK: Duration = Duration::from_secs(1);
/// Most cached answers; beyond, the cache is emptied.
const MAX_CACHED: usize = 10_000;

/// A repository role, weakest first (`docs/auth.md#roles-on-a-storage-server`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    Reader,
    Writer,
    Maintainer,
    Admin,
}

impl Role {
    pub fn parse(s: &str) -> Option<Role> {
        Some(match s {
            "reader" => Role::Reader,
            "writer" => Role::Writer,
            "maintainer" => Role::Maintainer,
            "admin" => Role::Admin,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Reader => "reader",
            Role::Writer => "writer",
            Role::Maintainer => "maintainer",
            Role::Admin => "admin",
        }
    }
}

/// The strongest role a credential kind may use, whatever its user holds
/// (`None`: no cap).
fn kind_cap(kind: &str) -> Option<Role> {
    match kind {
        "automation" | "service-reader" => Some(Role::Reader),
        "automation-write" | "service-writer" => Some(Role::Writer),
        "automation-maintain" => Some(Role::Maintainer),
        _ => None,
    }
}

/// A user of a `resolve` answer: `(id, username, enabled, administrator)`.
pub type UserInfo = ([u8; 16], String, bool, bool);

/// One `resolve` answer, parsed.
#[derive(Clone, Debug, Default)]
pub struct Resolved {
    pub revision: Option<AuthRevision>,
    /// `(id, kind, enabled, expires ms)` when the certificate is a stored credential's.
    pub credential: Option<(String, String, bool, u64)>,
    pub user: Option<UserInfo>,
    pub namespace_admin: bool,
    pub namespace_reader: bool,
    pub grants: HashMap<String, Role>,
    pub public: HashSet<String>,
}

fn malformed(what: &str) -> Failure {
    Failure::auth_unavailable(format!("the auth service's answer is malformed: {what}"))
}

fn id16(hex_text: &str) -> Option<[u8; 16]> {
    let b = hex::decode(hex_text).ok()?;
    <[u8; 16]>::try_from(b.as_slice()).ok()
}

fn parse_revision(incarnation: &str, revision: &str) -> Result<AuthRevision, Failure> {
    Ok(AuthRevision {
        incarnation: id16(incarnation).ok_or_else(|| malformed("incarnation"))?,
        revision: revision.parse().map_err(|_| malformed("revision"))?,
    })
}

impl Resolved {
    fn parse(rows: Vec<Vec<String>>) -> Result<Resolved, Failure> {
        let mut r = Resolved::default();
        for row in rows {
            let fields: Vec<&str> = row.iter().map(String::as_str).collect();
            match fields.as_slice() {
                ["revision", inc, rev] => r.revision = Some(parse_revision(inc, rev)?),
                ["credential", id, kind, enabled, expires] => {
                    r.credential = Some((
                        (*id).to_owned(),
                        (*kind).to_owned(),
                        *enabled == "true",
                        expires.parse().map_err(|_| malformed("expiry"))?,
                    ))
                }
                ["user", id, name, enabled, admin] => {
                    r.user = Some((
                        id16(id).ok_or_else(|| malformed("user id"))?,
                        (*name).to_owned(),
                        *enabled == "true",
                        *admin == "true",
                    ))
                }
                ["namespace-admin"] => r.namespace_admin = true,
                ["namespace-reader"] => r.namespace_reader = true,
                ["grant", repo, role] => {
                    let role = Role::parse(role).ok_or_else(|| malformed("role"))?;
                    r.grants.insert((*repo).to_owned(), role);
                }
                ["visibility", repo, "public"] => {
                    r.public.insert((*repo).to_owned());
                }
                // Rows a newer service adds are ignored.
                _ => {}
            }
        }
        if r.revision.is_none() {
            return Err(malformed("no revision row"));
        }
        Ok(r)
    }

    /// The user an answer lets in, with the credential kind; otherwise why not.
    fn admitted(&self, now_ms: u64) -> Result<(&UserInfo, &str), Failure> {
        let refuse = |m: &str| Failure::new(ErrorCode::Unauthenticated, m);
        let Some((_, kind, enabled, expires)) = &self.credential else {
            return Err(refuse(
                "the credential is not known to the auth service (removed, or not one it issued)",
            ));
        };
        if !enabled {
            return Err(refuse("the credential is disabled (revoked or logged out)"));
        }
        if *expires != u64::MAX && *expires <= now_ms {
            return Err(refuse(
                "the credential expired: sign in again (scribe login)",
            ));
        }
        if kind == "server" {
            return Err(refuse("a server credential cannot act as a client"));
        }
        match &self.user {
            Some(u) if u.2 => Ok((u, kind.as_str())),
            _ => Err(refuse("the credential's user is disabled or removed")),
        }
    }

    /// The role this answer gives in `repository` (`None`: no access).
    pub fn role(&self, repository: Option<&str>) -> Option<Role> {
        let (_, kind, ..) = self.credential.as_ref()?;
        let user = self.user.as_ref()?;
        let mut role = if user.3 || self.namespace_admin {
            Some(Role::Admin)
        } else {
            repository.and_then(|r| self.grants.get(r).copied())
        };
        let reads = self.namespace_reader || repository.is_some_and(|r| self.public.contains(r));
        if reads {
            role = role.max(Some(Role::Reader));
        }
        match (role, kind_cap(kind)) {
            (Some(r), Some(cap)) => Some(r.min(cap)),
            (r, _) => r,
        }
    }
}

struct Cache {
    seen: Option<AuthRevision>,
    checked: Option<Instant>,
    answers: HashMap<[u8; 32], Arc<Resolved>>,
}

/// The authorizer of a team server.
pub struct TeamAuthorizer {
    client: Sau2Client,
    state: AuthState,
    recheck: Duration,
    cache: Mutex<Cache>,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl TeamAuthorizer {
    /// Open `auth-state.redb` of `data` (with the namespace of `files`) and
    /// make the client; `recheck` bounds how long a cached answer is used
    /// without asking for the revision (zero: before every request).
    pub fn new(
        data: &std::path::Path,
        files: &AuthFiles,
        recheck: Duration,
    ) -> Result<TeamAuthorizer, TeamError> {
        let state = AuthState::open(data, &files.settings.namespace)?;
        let seen = state.revision()?;
        Ok(TeamAuthorizer {
            client: files.client()?,
            state,
            recheck,
            cache: Mutex::new(Cache {
                seen,
                checked: None,
                answers: HashMap::new(),
            }),
        })
    }

    /// A call of this server to the auth service. Any refusal of it (this
    /// server unknown to the service, disabled, ...) is `auth_unavailable`
    /// to the client: it says nothing about the client's credential.
    fn ask(&self, verb: &str, arguments: Vec<String>) -> Result<Vec<Vec<String>>, Failure> {
        self.client.rows(verb, arguments).map_err(|f| {
            if f.code == ErrorCode::AuthUnavailable {
                f
            } else {
                Failure::auth_unavailable(format!("{} ({})", f.message, f.code))
            }
        })
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Act on an answer from `seen`: refuse an older revision of the
    /// recorded incarnation (`auth_unavailable`); persist a newer one (or
    /// another incarnation) first and forget every cached answer.
    fn observe(&self, seen: AuthRevision) -> Result<(), Failure> {
        if self.cache().seen == Some(seen) {
            return Ok(());
        }
        self.state.observe(seen)?;
        let mut c = self.cache();
        let newer = match c.seen {
            None => true,
            Some(old) => old.incarnation != seen.incarnation || old.revision < seen.revision,
        };
        if newer {
            c.seen = Some(seen);
            c.answers.clear();
        }
        Ok(())
    }

    /// Ask for the revision when the last check is older than `recheck`.
    pub fn check_revision(&self) -> Result<(), Failure> {
        // Marked before asking, so concurrent requests do not all ask;
        // put back when the check fails, so the next request asks again.
        let previous = {
            let mut c = self.cache();
            if c.checked.is_some_and(|t| t.elapsed() < self.recheck) {
                return Ok(());
            }
            c.checked.replace(Instant::now())
        };
        let checked = self.ask("revision", Vec::new()).and_then(|rows| {
            let [inc, rev] = rows
                .first()
                .and_then(|r| <[String; 2]>::try_from(r.clone()).ok())
                .ok_or_else(|| malformed("revision"))?;
            self.observe(parse_revision(&inc, &rev)?)
        });
        if checked.is_err() {
            self.cache().checked = previous;
        }
        checked
    }

    /// The (cached) answer for the client certificate `der`.
    pub fn resolve(&self, der: &[u8]) -> Result<Arc<Resolved>, Failure> {
        let key = *blake3::hash(der).as_bytes();
        if let Some(a) = self.cache().answers.get(&key) {
            return Ok(a.clone());
        }
        let mut attempt = 0;
        let (answer, revision) = loop {
            let rows = self.ask("resolve", vec![hex::encode(der)])?;
            let answer = Resolved::parse(rows)?;
            let revision = answer
                .revision
                .ok_or_else(|| malformed("no revision row"))?;
            match self.observe(revision) {
                Ok(()) => break (answer, revision),
                // Another request may have recorded a newer revision while
                // this answer was on its way: ask once more. A service that
                // was rolled back answers from the older state again.
                Err(f) if f.code == ErrorCode::AuthUnavailable && attempt == 0 => attempt += 1,
                Err(f) => return Err(f),
            }
        };
        let answer = Arc::new(answer);
        let mut c = self.cache();
        if c.seen == Some(revision) {
            if c.answers.len() >= MAX_CACHED {
                c.answers.clear();
            }
            c.answers.insert(key, answer.clone());
        }
        Ok(answer)
    }

    fn answer_for(&self, principal: &Principal) -> Result<Arc<Resolved>, Failure> {
        let Some(der) = &principal.certificate else {
            return Err(Failure::new(
                ErrorCode::Unauthenticated,
                "this server serves signed-in users only",
            ));
        };
        self.check_revision()?;
        self.resolve(der)
    }
}

fn repository(svc: &Service, name: &str) -> Result<Arc<Repository>, Failure> {
    Ok(svc.root().open_repository_by_name(name)?)
}

impl TeamAuthorizer {
    fn workspace_owner(
        &self,
        repo: &Repository,
        workspace: WorkspaceId,
    ) -> Result<Option<[u8; 16]>, Failure> {
        Ok(self.state.workspace_owner(&repo.id().0, &workspace.0)?)
    }

    /// A submission's checks: the workspace is the user's, and the
    /// operation id is claimed for the user with the submission's
    /// fingerprint (its own Immediate transaction, before the submission).
    fn claim_submission(
        &self,
        svc: &Service,
        user: [u8; 16],
        repo: &str,
        (workspace, branch, operation, change_set): (
            WorkspaceId,
            scribe_format::BranchId,
            OperationId,
            scribe_format::ChangeSetId,
        ),
        (message, keep_locks): (&str, bool),
    ) -> Result<(), Failure> {
        let repo = repository(svc, repo)?;
        self.own_workspace(&repo, workspace, user)?;
        let branch = if branch.0 == [0; 16] {
            repo.main_branch()
        } else {
            branch
        };
        let fingerprint = scribe_format::operation::operation_fingerprint(
            repo.id(),
            repo.incarnation(),
            branch,
            workspace,
            change_set,
            message,
            keep_locks,
        );
        self.state
            .claim_operation(&repo.id().0, &operation.0, &user, &fingerprint)?;
        Ok(())
    }

    /// Only the workspace's owner acts through it.
    fn own_workspace(
        &self,
        repo: &Repository,
        workspace: WorkspaceId,
        user: [u8; 16],
    ) -> Result<(), Failure> {
        match self.workspace_owner(repo, workspace)? {
            Some(o) if o == user => Ok(()),
            Some(_) => Err(Failure::forbidden(
                "the workspace belongs to another user: only its owner submits, locks or \
                 uploads through it",
            )),
            None => Err(Failure::forbidden(
                "the workspace was not registered by a signed-in user on this server: register \
                 a workspace first",
            )),
        }
    }

    /// The owner, or a maintainer for someone else's workspace.
    fn own_or_maintain(
        &self,
        repo: &Repository,
        workspace: WorkspaceId,
        user: [u8; 16],
        role: Role,
        what: &str,
    ) -> Result<(), Failure> {
        match self.workspace_owner(repo, workspace)? {
            Some(o) if o == user => Ok(()),
            _ if role >= Role::Maintainer => Ok(()),
            _ => Err(Failure::forbidden(format!(
                "{what} of another user's workspace needs the maintainer role"
            ))),
        }
    }

    /// An operation id another user claimed is not this user's to use.
    fn operation_not_foreign(
        &self,
        repo: &Repository,
        operation: OperationId,
        user: [u8; 16],
    ) -> Result<(), Failure> {
        match self.state.operation_owner(&repo.id().0, &operation.0)? {
            Some(o) if o != user => Err(Failure::forbidden(
                "the operation id belongs to another user",
            )),
            _ => Ok(()),
        }
    }
}

/// The admitted user's id and role for `action`, or the refusal.
fn role_for(answer: &Resolved, action: &Action<'_>) -> Result<([u8; 16], Role), Failure> {
    let ((user, name, ..), _) = answer.admitted(now_ms())?;
    let role = answer.role(action.repository);
    use crate::service::ActionFamily as F;
    let want = match action.family {
        F::ServerStatus => None,
        F::RepositoryAdmin if action.mutates => Some(Role::Admin),
        F::RepositoryAdmin => None,
        F::ObjectRead | F::TreeRead => Some(Role::Reader),
        // A reader syncs, so it registers (and retires) workspaces of its
        // own; submitting, locking and uploading through them need writer.
        F::Workspace => Some(Role::Reader),
        F::Lock | F::Submit if !action.mutates => Some(Role::Reader),
        F::Lock | F::Submit | F::ObjectWrite => Some(Role::Writer),
    };
    let role = match want {
        None => role.unwrap_or(Role::Reader),
        Some(w) => need(role, w, action.repository, name)?,
    };
    Ok((*user, role))
}

fn need(role: Option<Role>, want: Role, repo: Option<&str>, user: &str) -> Result<Role, Failure> {
    match role {
        Some(r) if r >= want => Ok(r),
        Some(r) => Err(Failure::forbidden(format!(
            "{user} is {} of repository {}; this needs {}",
            r.as_str(),
            echo(repo.unwrap_or("")),
            want.as_str()
        ))),
        None => Err(Failure::forbidden(format!(
            "{user} has no access to repository {}",
            echo(repo.unwrap_or(""))
        ))),
    }
}

impl Authorizer for TeamAuthorizer {
    fn authenticate(&self, _: &Credential, peer: &PeerInfo) -> Result<Principal, Failure> {
        let Some(der) = peer.certificates.first().filter(|_| peer.tls) else {
            return Err(Failure::new(
                ErrorCode::Unauthenticated,
                "this server needs a client certificate: sign in with `scribe login`",
            ));
        };
        let answer = self.resolve(der)?;
        let ((id, name, ..), kind) = answer.admitted(now_ms())?;
        let kind = if kind.starts_with("automation") {
            PrincipalKind::Automation
        } else {
            PrincipalKind::User
        };
        Ok(Principal::new(kind, Some(*id), name.clone()).with_certificate(der))
    }

    /// Role checks only (no claims): what [`Authorizer::authorize_request`]
    /// does first.
    fn authorize(&self, principal: &Principal, action: &Action<'_>) -> Result<(), Failure> {
        if principal.kind == PrincipalKind::Local {
            return Ok(());
        }
        let answer = self.answer_for(principal)?;
        role_for(&answer, action).map(|_| ())
    }

    /// `RepoList` names only the repositories the user holds a role in.
    fn filter_response(&self, principal: &Principal, response: &mut scribe_format::wire::Response) {
        let scribe_format::wire::Response::RepoList(list) = response else {
            return;
        };
        if principal.kind == PrincipalKind::Local {
            return;
        }
        // The answer the request was just authorized with (cached).
        let answer = principal
            .certificate
            .as_ref()
            .and_then(|der| self.resolve(der).ok());
        match answer {
            Some(a) => list
                .repositories
                .retain(|r| a.role(Some(r.name.as_str())).is_some()),
            None => list.repositories.clear(),
        }
    }

    fn authorize_request(
        &self,
        svc: &Service,
        principal: &Principal,
        request: &Request,
    ) -> Result<(), Failure> {
        if principal.kind == PrincipalKind::Local {
            return Ok(());
        }
        let action = Action::of(request);
        // One revision check and one answer per request.
        let answer = self.answer_for(principal)?;
        let (user, role) = role_for(&answer, &action)?;
        match request {
            Request::WorkspaceRegister(r) => {
                let repo = repository(svc, &r.repo)?;
                // The permanent claim, its own Immediate transaction, before
                // the registration.
                self.state
                    .claim_workspace(&repo.id().0, &r.workspace.0, &user)?;
                Ok(())
            }
            Request::WorkspaceRetire(r) => {
                let repo = repository(svc, &r.repo)?;
                self.own_or_maintain(&repo, r.workspace, user, role, "retirement")
            }
            Request::LockRelease(r) => {
                let repo = repository(svc, &r.repo)?;
                self.own_or_maintain(&repo, r.workspace, user, role, "releasing the locks")?;
                // Breaking another user's locks (`scribe unlock --force`,
                // #18 item 1) is recorded in the auth service's audit trail
                // before it happens; no row, no release.
                if self.workspace_owner(&repo, r.workspace)? != Some(user) {
                    let mut args = vec![
                        hex::encode(user),
                        "lock-force-release".to_string(),
                        r.repo.clone(),
                        format!("workspace:{}", r.workspace.to_hex()),
                    ];
                    args.extend(r.paths.iter().cloned());
                    self.ask("server-audit", args)?;
                }
                Ok(())
            }
            Request::LockAcquire(r) => {
                let repo = repository(svc, &r.repo)?;
                self.own_workspace(&repo, r.workspace, user)
            }
            Request::ObjectPut(r) | Request::ObjectPutStaged(r) => {
                let repo = repository(svc, &r.repo)?;
                self.own_workspace(&repo, r.workspace, user)?;
                self.operation_not_foreign(&repo, r.operation, user)
            }
            Request::ObjectPutMany(r) => {
                let repo = repository(svc, &r.repo)?;
                self.own_workspace(&repo, r.workspace, user)?;
                self.operation_not_foreign(&repo, r.operation, user)
            }
            Request::ObjectsPinMissing(r) => {
                let repo = repository(svc, &r.repo)?;
                self.own_workspace(&repo, r.workspace, user)?;
                self.operation_not_foreign(&repo, r.operation, user)
            }
            Request::Submit(r) => self.claim_submission(
                svc,
                user,
                &r.repo,
                (r.workspace, r.branch, r.operation, r.change_set),
                (&r.message.0, r.keep_locks),
            ),
            // The same claim: it carries its objects, under its operation.
            Request::SubmitInline(r) => self.claim_submission(
                svc,
                user,
                &r.repo,
                (r.workspace, r.branch, r.operation, r.change_set),
                (&r.message.0, r.keep_locks),
            ),
            Request::OperationOutcome(r) if role < Role::Maintainer => {
                let repo = repository(svc, &r.repo)?;
                self.operation_not_foreign(&repo, r.operation, user)
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(kind: &str, admin: bool, rows: &[&[&str]]) -> Resolved {
        let mut all: Vec<Vec<String>> = vec![
            vec!["revision".into(), "11".repeat(16), "3".into()],
            vec![
                "credential".into(),
                "22".repeat(16),
                kind.into(),
                "true".into(),
                u64::MAX.to_string(),
            ],
            vec![
                "user".into(),
                "33".repeat(16),
                "ann".into(),
                "true".into(),
                admin.to_string(),
            ],
        ];
        all.extend(
            rows.iter()
                .map(|r| r.iter().map(|s| s.to_string()).collect()),
        );
        Resolved::parse(all).unwrap()
    }

    #[test]
    fn the_role_is_the_strongest_grant_capped_by_the_credential_kind() {
        let a = answer("session", false, &[&["grant", "game", "writer"]]);
        assert_eq!(a.role(Some("game")), Some(Role::Writer));
        assert_eq!(a.role(Some("film")), None);
        assert_eq!(a.role(None), None);
        // Public visibility and namespace readers read; a grant above stays.
        let a = answer(
            "session",
            false,
            &[
                &["visibility", "pub", "public"],
                &["visibility", "priv", "private"],
                &["grant", "pub", "maintainer"],
            ],
        );
        assert_eq!(a.role(Some("pub")), Some(Role::Maintainer));
        assert_eq!(a.role(Some("priv")), None);
        let a = answer("session", false, &[&["namespace-reader"]]);
        assert_eq!(a.role(Some("any")), Some(Role::Reader));
        // Administrators and namespace admins administer every repository.
        assert_eq!(answer("user", true, &[]).role(Some("x")), Some(Role::Admin));
        assert_eq!(
            answer("session", false, &[&["namespace-admin"]]).role(Some("x")),
            Some(Role::Admin)
        );
        // Automation kinds cap what their user holds.
        for (kind, cap) in [
            ("automation", Role::Reader),
            ("service-reader", Role::Reader),
            ("automation-write", Role::Writer),
            ("service-writer", Role::Writer),
            ("automation-maintain", Role::Maintainer),
            ("automation-admin", Role::Admin),
        ] {
            assert_eq!(answer(kind, true, &[]).role(Some("x")), Some(cap), "{kind}");
        }
    }

    #[test]
    fn only_an_enabled_unexpired_user_credential_is_admitted() {
        let now = 1_000;
        assert!(answer("session", false, &[]).admitted(now).is_ok());
        let mut a = answer("session", false, &[]);
        a.credential.as_mut().unwrap().2 = false;
        assert_eq!(
            a.admitted(now).unwrap_err().code,
            ErrorCode::Unauthenticated
        );
        let mut a = answer("session", false, &[]);
        a.credential.as_mut().unwrap().3 = now;
        assert!(a.admitted(now).is_err(), "expired at now");
        let mut a = answer("session", false, &[]);
        a.user.as_mut().unwrap().2 = false;
        assert!(a.admitted(now).is_err(), "disabled user");
        assert!(answer("server", false, &[]).admitted(now).is_err());
        let mut a = answer("session", false, &[]);
        a.credential = None;
        assert!(a.admitted(now).is_err(), "unknown credential");
        // An answer without its revision row is refused whole.
        assert!(Resolved::parse(vec![vec!["namespace-admin".into()]]).is_err());
    }
}

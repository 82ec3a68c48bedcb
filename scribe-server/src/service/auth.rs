//! The authorization seam: who is asking ([`Principal`]), what they
//! presented ([`Credential`], [`PeerInfo`]), what a request would do
//! ([`Action`]), and the [`Authorizer`] that judges both.
//!
//! ```text
//! connection opens ─► handshake (+ credential frame) ─► Authorizer::authenticate ─► Principal
//!                                                                                      │ kept in the Session
//! each request ─► Action::of(&request) ─► Authorizer::authorize(principal, action) ─► dispatch
//!                                                        └─ refusal: error reply, nothing runs
//! ```
//!
//! A TCP/TLS connection is authenticated once, right after the handshake,
//! with or without a credential frame; its principal never changes. An
//! in-process connection (path URL) is [`Principal::local`] without
//! authentication: its user already owns the data root's files. Every
//! request of every transport is authorized exactly once, in
//! [`Service::handle`](super::Service::handle), before anything of it
//! runs. [`OpenAuthorizer`] (the default) names every network peer
//! anonymous and allows everything: the behaviour before this seam.

use std::net::SocketAddr;

use scribe_format::wire::Request;
use scribe_format::{ErrorCode, OperationId, WorkspaceId};

use scribe_format::wire::handshake::Authenticated;
pub use scribe_format::wire::handshake::PrincipalKind;

use super::Failure;

/// Who a session acts as.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Principal {
    pub kind: PrincipalKind,
    /// The auth service's 128-bit id (user or server id); `None` for
    /// anonymous and local principals. It becomes the workspace owner of
    /// registrations and the actor of submissions.
    pub id: Option<[u8; 16]>,
    /// For messages and logs; never used to decide anything (an
    /// authenticated server also records it as a submission's author).
    pub name: String,
    /// The client certificate (DER) the principal was authenticated with,
    /// for an authorizer that checks it again later (`None` otherwise).
    pub certificate: Option<std::sync::Arc<[u8]>>,
}

impl Principal {
    pub fn new(kind: PrincipalKind, id: Option<[u8; 16]>, name: impl Into<String>) -> Self {
        Principal {
            kind,
            id,
            name: name.into(),
            certificate: None,
        }
    }

    /// The same principal, remembering the client certificate it presented.
    pub fn with_certificate(mut self, der: &[u8]) -> Self {
        self.certificate = Some(der.into());
        self
    }

    /// Nobody in particular.
    pub fn anonymous() -> Self {
        Principal::new(PrincipalKind::Anonymous, None, "anonymous")
    }

    /// The operating-system user of an in-process connection.
    pub fn local() -> Self {
        Principal::new(PrincipalKind::Local, None, "local")
    }

    /// The acknowledgement of a credential frame naming this principal.
    pub fn to_wire(&self) -> Authenticated {
        Authenticated {
            kind: self.kind,
            id: self.id,
            name: self.name.clone(),
        }
    }
}

/// What the client presented in the handshake's credential slot.
#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    /// The hello did not set the credential flag.
    None,
    /// The credential frame's bytes (1 to 64 KiB), opaque to the server:
    /// the authorizer defines and checks them.
    Presented(Vec<u8>),
}

impl std::fmt::Debug for Credential {
    // Never print a secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credential::None => write!(f, "Credential::None"),
            Credential::Presented(b) => write!(f, "Credential::Presented({} bytes)", b.len()),
        }
    }
}

/// What the transport knows about the peer, for authentication.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PeerInfo {
    /// The peer's socket address (`None` for a stream without one).
    pub address: Option<SocketAddr>,
    /// Whether the connection is TLS.
    pub tls: bool,
    /// The client's TLS certificate chain, DER, leaf first; empty when the
    /// client presented none (the listener does not ask for one today).
    pub certificates: Vec<Vec<u8>>,
    /// TLS channel binding: 32 bytes of the TLS exporter with label
    /// `EXPORTER-Channel-Binding` and no context (RFC 9266
    /// `tls-exporter`). A credential that signs it cannot be replayed on
    /// another connection. `None` without TLS.
    pub channel_binding: Option<[u8; 32]>,
}

/// The TLS exporter label of [`PeerInfo::channel_binding`] (RFC 9266).
pub const CHANNEL_BINDING_LABEL: &[u8] = b"EXPORTER-Channel-Binding";

impl PeerInfo {
    /// A plain TCP peer.
    pub fn tcp(address: SocketAddr) -> Self {
        PeerInfo {
            address: Some(address),
            ..PeerInfo::default()
        }
    }

    /// A TLS peer with its certificate chain (DER, leaf first) and the
    /// connection's channel binding.
    pub fn tls(
        address: SocketAddr,
        certificates: Vec<Vec<u8>>,
        channel_binding: Option<[u8; 32]>,
    ) -> Self {
        PeerInfo {
            address: Some(address),
            tls: true,
            certificates,
            channel_binding,
        }
    }
}

/// The kinds of thing a request does. Deliberately exhaustive: a new
/// family breaks every authorizer's `match` instead of slipping through a
/// wildcard arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ActionFamily {
    /// `Status`: version, uptime, counts.
    ServerStatus,
    /// `RepoCreate`, `RepoList`.
    RepositoryAdmin,
    /// `WorkspaceRegister`, `WorkspaceRetire`, `WorkspaceList`.
    Workspace,
    /// `ObjectsMissing`, `ObjectGet`, `ObjectGetMany`.
    ObjectRead,
    /// `ObjectPut`, `ObjectPutStaged`, `ObjectPutMany`,
    /// `ObjectsPinMissing`, `ObjectsPublish`.
    ObjectWrite,
    /// `Submit`, `SubmitInline` (which carries objects as well: whoever
    /// may submit may write objects), `OperationOutcome`.
    Submit,
    /// `Delta`, `List`, `Stat`, `History`, `Log`, `Describe`.
    TreeRead,
    /// `LockAcquire`, `LockRelease`, `LockList`.
    Lock,
}

/// What one request would do, for [`Authorizer::authorize`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Action<'a> {
    /// The request's name (`"Submit"`, ...), for messages and audit.
    pub request: &'static str,
    pub family: ActionFamily,
    /// The repository it concerns by name (for `RepoCreate`, the one it
    /// would create); `None` for `Status` and `RepoList`.
    pub repository: Option<&'a str>,
    /// The workspace it acts for, when the request names one.
    pub workspace: Option<WorkspaceId>,
    /// The operation (submission or upload intent) it belongs to, when
    /// the request names one.
    pub operation: Option<OperationId>,
    /// Whether it may change anything durable: metadata, objects, pins,
    /// locks, repositories.
    pub mutates: bool,
}

impl<'a> Action<'a> {
    /// The action of `request`: one exhaustive match over every request.
    pub fn of(request: &'a Request) -> Action<'a> {
        use ActionFamily as F;
        let a = |family, repository: Option<&'a str>, mutates| Action {
            request: request.name(),
            family,
            repository,
            workspace: None,
            operation: None,
            mutates,
        };
        match request {
            Request::Status(_) => a(F::ServerStatus, None, false),
            Request::RepoCreate(r) => a(F::RepositoryAdmin, Some(&r.name), true),
            Request::RepoList(_) => a(F::RepositoryAdmin, None, false),
            Request::WorkspaceRegister(r) => Action {
                workspace: Some(r.workspace),
                ..a(F::Workspace, Some(&r.repo), true)
            },
            Request::WorkspaceRetire(r) => Action {
                workspace: Some(r.workspace),
                ..a(F::Workspace, Some(&r.repo), true)
            },
            Request::WorkspaceList(r) => a(F::Workspace, Some(&r.repo), false),
            Request::ObjectsMissing(r) => a(F::ObjectRead, Some(&r.repo), false),
            Request::ObjectPut(r) | Request::ObjectPutStaged(r) => Action {
                workspace: Some(r.workspace),
                operation: Some(r.operation),
                ..a(F::ObjectWrite, Some(&r.repo), true)
            },
            Request::ObjectGet(r) => a(F::ObjectRead, Some(&r.repo), false),
            Request::ObjectPutMany(r) => Action {
                workspace: Some(r.workspace),
                operation: Some(r.operation),
                ..a(F::ObjectWrite, Some(&r.repo), true)
            },
            Request::ObjectGetMany(r) => a(F::ObjectRead, Some(&r.repo), false),
            Request::ObjectsPinMissing(r) => Action {
                workspace: Some(r.workspace),
                operation: Some(r.operation),
                ..a(F::ObjectWrite, Some(&r.repo), true)
            },
            Request::ObjectsPublish(r) => a(F::ObjectWrite, Some(&r.repo), true),
            Request::Submit(r) => Action {
                workspace: Some(r.workspace),
                operation: Some(r.operation),
                ..a(F::Submit, Some(&r.repo), true)
            },
            // Carries objects too; every role that may submit may write
            // objects (`team::authorizer`).
            Request::SubmitInline(r) => Action {
                workspace: Some(r.workspace),
                operation: Some(r.operation),
                ..a(F::Submit, Some(&r.repo), true)
            },
            Request::OperationOutcome(r) => Action {
                operation: Some(r.operation),
                ..a(F::Submit, Some(&r.repo), false)
            },
            Request::Delta(r) => a(F::TreeRead, Some(&r.repo), false),
            Request::List(r) => a(F::TreeRead, Some(&r.repo), false),
            Request::Stat(r) => a(F::TreeRead, Some(&r.repo), false),
            Request::History(r) => a(F::TreeRead, Some(&r.repo), false),
            Request::Log(r) => a(F::TreeRead, Some(&r.repo), false),
            Request::Describe(r) => a(F::TreeRead, Some(&r.repo), false),
            Request::LockAcquire(r) => Action {
                workspace: Some(r.workspace),
                ..a(F::Lock, Some(&r.repo), true)
            },
            Request::LockRelease(r) => Action {
                workspace: Some(r.workspace),
                ..a(F::Lock, Some(&r.repo), true)
            },
            Request::LockList(r) => a(F::Lock, Some(&r.repo), false),
        }
    }
}

/// Decides who a connection is and what it may do. The auth service's
/// implementation verifies credentials and consults grants and claims;
/// [`OpenAuthorizer`] allows everything.
///
/// Both methods run on a blocking thread and may block (on the auth
/// service, say); a refusal is a [`Failure`] whose code the client sees:
/// `forbidden` (300) when the answer is no, `auth_unavailable` (301) when
/// it cannot be known now, `malformed` for credential bytes that do not
/// decode.
pub trait Authorizer: Send + Sync {
    /// Once per TCP/TLS connection, after the handshake and before any
    /// request: the principal the connection is served as.
    /// `credential` is [`Credential::None`] when the client presented none.
    fn authenticate(&self, credential: &Credential, peer: &PeerInfo) -> Result<Principal, Failure>;

    /// Before every request, of every transport: may `principal` do
    /// `action`? A refusal is the request's error reply; nothing of the
    /// request runs.
    fn authorize(&self, principal: &Principal, action: &Action<'_>) -> Result<(), Failure>;

    /// What [`Service::handle`](super::Service::handle) calls before every
    /// request: by default [`Authorizer::authorize`] of the request's
    /// [`Action`]. An authorizer that needs the whole request or the data
    /// root (repository ids, the operation fingerprint, claims in
    /// `auth-state.redb`) overrides it.
    /// After an allowed request ran: remove from `response` what
    /// `principal` may not see (a team server lists only the repositories
    /// the user holds a role in). By default nothing is removed.
    fn filter_response(&self, principal: &Principal, response: &mut scribe_format::wire::Response) {
        let _ = (principal, response);
    }

    /// Whether this authorizer lets any peer do anything
    /// ([`OpenAuthorizer`]): a data root bound to scribe-auth is never
    /// served to the network by one.
    fn admits_anyone(&self) -> bool {
        false
    }

    fn authorize_request(
        &self,
        service: &super::Service,
        principal: &Principal,
        request: &Request,
    ) -> Result<(), Failure> {
        let _ = service;
        self.authorize(principal, &Action::of(request))
    }
}

/// Checks nothing: every network peer is [`Principal::anonymous`] (a
/// presented credential is accepted and ignored, and the acknowledgement
/// says `anonymous`, so the client can tell), and every principal may do
/// everything.
#[derive(Clone, Copy, Debug, Default)]
pub struct OpenAuthorizer;

impl Authorizer for OpenAuthorizer {
    fn authenticate(&self, _: &Credential, _: &PeerInfo) -> Result<Principal, Failure> {
        Ok(Principal::anonymous())
    }

    fn authorize(&self, _: &Principal, _: &Action<'_>) -> Result<(), Failure> {
        Ok(())
    }

    fn admits_anyone(&self) -> bool {
        true
    }
}

impl Failure {
    /// A refusal: the principal may not do this (`forbidden`).
    pub fn forbidden(message: impl Into<String>) -> Self {
        Failure::new(ErrorCode::Forbidden, message)
    }

    /// The answer cannot be known now (`auth_unavailable`).
    pub fn auth_unavailable(message: impl Into<String>) -> Self {
        Failure::new(ErrorCode::AuthUnavailable, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scribe_format::wire::message::*;
    use scribe_format::wire::{Bytes, Text};
    use scribe_format::{BranchId, ChangeSetId, ObjectId};

    const WS: WorkspaceId = WorkspaceId([7; 16]);
    const OP: OperationId = OperationId([9; 16]);

    fn put() -> ObjectPut {
        ObjectPut {
            repo: "r".into(),
            operation: OP,
            workspace: WS,
            id: ObjectId::chunk(scribe_format::ChunkId::of(b"x")),
            total_len: 1,
            offset: 0,
            data: Bytes(b"x".to_vec()),
        }
    }

    /// One request of every opcode with the action it must map to:
    /// (request, family, repository, workspace, operation, mutates).
    #[allow(clippy::type_complexity)]
    fn every() -> Vec<(
        Request,
        ActionFamily,
        Option<&'static str>,
        Option<WorkspaceId>,
        Option<OperationId>,
        bool,
    )> {
        use ActionFamily as F;
        let r = || "r".to_string();
        let b = BranchId([0; 16]);
        vec![
            (
                Request::Status(StatusRequest {}),
                F::ServerStatus,
                None,
                None,
                None,
                false,
            ),
            (
                Request::RepoCreate(RepoCreate { name: "new".into() }),
                F::RepositoryAdmin,
                Some("new"),
                None,
                None,
                true,
            ),
            (
                Request::RepoList(RepoListRequest {}),
                F::RepositoryAdmin,
                None,
                None,
                None,
                false,
            ),
            (
                Request::WorkspaceRegister(WorkspaceRegister {
                    repo: r(),
                    workspace: WS,
                    branch: String::new(),
                    view: vec![],
                    label: String::new(),
                    tags: vec![],
                }),
                F::Workspace,
                Some("r"),
                Some(WS),
                None,
                true,
            ),
            (
                Request::WorkspaceRetire(WorkspaceRetire {
                    repo: r(),
                    workspace: WS,
                }),
                F::Workspace,
                Some("r"),
                Some(WS),
                None,
                true,
            ),
            (
                Request::WorkspaceList(WorkspaceListRequest { repo: r() }),
                F::Workspace,
                Some("r"),
                None,
                None,
                false,
            ),
            (
                Request::ObjectsMissing(ObjectsMissing {
                    repo: r(),
                    ids: vec![],
                }),
                F::ObjectRead,
                Some("r"),
                None,
                None,
                false,
            ),
            (
                Request::ObjectPut(put()),
                F::ObjectWrite,
                Some("r"),
                Some(WS),
                Some(OP),
                true,
            ),
            (
                Request::ObjectGet(ObjectGet {
                    repo: r(),
                    id: put().id,
                    offset: 0,
                    max_len: 0,
                }),
                F::ObjectRead,
                Some("r"),
                None,
                None,
                false,
            ),
            (
                Request::ObjectPutMany(ObjectPutMany {
                    repo: r(),
                    operation: OP,
                    workspace: WS,
                    objects: vec![],
                }),
                F::ObjectWrite,
                Some("r"),
                Some(WS),
                Some(OP),
                true,
            ),
            (
                Request::ObjectGetMany(ObjectGetMany {
                    repo: r(),
                    ids: vec![],
                }),
                F::ObjectRead,
                Some("r"),
                None,
                None,
                false,
            ),
            (
                Request::ObjectsPinMissing(ObjectsPinMissing {
                    repo: r(),
                    operation: OP,
                    workspace: WS,
                    ids: vec![],
                }),
                F::ObjectWrite,
                Some("r"),
                Some(WS),
                Some(OP),
                true,
            ),
            (
                Request::ObjectPutStaged(put()),
                F::ObjectWrite,
                Some("r"),
                Some(WS),
                Some(OP),
                true,
            ),
            (
                Request::ObjectsPublish(ObjectsPublish { repo: r() }),
                F::ObjectWrite,
                Some("r"),
                None,
                None,
                true,
            ),
            (
                Request::Submit(Submit {
                    repo: r(),
                    operation: OP,
                    workspace: WS,
                    branch: b,
                    change_set: ChangeSetId([1; 32]),
                    author: String::new(),
                    message: Text(String::new()),
                    keep_locks: false,
                    timestamp_ms: 0,
                }),
                F::Submit,
                Some("r"),
                Some(WS),
                Some(OP),
                true,
            ),
            (
                Request::SubmitInline(SubmitInline {
                    repo: r(),
                    operation: OP,
                    workspace: WS,
                    branch: b,
                    change_set: ChangeSetId([1; 32]),
                    author: String::new(),
                    message: Text(String::new()),
                    keep_locks: false,
                    timestamp_ms: 0,
                    objects: Vec::new(),
                }),
                F::Submit,
                Some("r"),
                Some(WS),
                Some(OP),
                true,
            ),
            (
                Request::OperationOutcome(OperationOutcome {
                    repo: r(),
                    operation: OP,
                }),
                F::Submit,
                Some("r"),
                None,
                Some(OP),
                false,
            ),
            (
                Request::Delta(Delta {
                    repo: r(),
                    branch: b,
                    from: 0,
                    to: 0,
                    after: String::new(),
                    limit: 0,
                }),
                F::TreeRead,
                Some("r"),
                None,
                None,
                false,
            ),
            (
                Request::List(List {
                    repo: r(),
                    branch: b,
                    change: 0,
                    prefix: String::new(),
                    recursive: true,
                    after: String::new(),
                    limit: 0,
                }),
                F::TreeRead,
                Some("r"),
                None,
                None,
                false,
            ),
            (
                Request::Stat(Stat {
                    repo: r(),
                    branch: b,
                    change: 0,
                    path: "a".into(),
                }),
                F::TreeRead,
                Some("r"),
                None,
                None,
                false,
            ),
            (
                Request::History(History {
                    repo: r(),
                    branch: b,
                    path: "a".into(),
                    before: 0,
                    limit: 0,
                }),
                F::TreeRead,
                Some("r"),
                None,
                None,
                false,
            ),
            (
                Request::Log(Log {
                    repo: r(),
                    branch: b,
                    before: 0,
                    limit: 0,
                }),
                F::TreeRead,
                Some("r"),
                None,
                None,
                false,
            ),
            (
                Request::Describe(Describe {
                    repo: r(),
                    change: 0,
                    after: String::new(),
                    limit: 0,
                }),
                F::TreeRead,
                Some("r"),
                None,
                None,
                false,
            ),
            (
                Request::LockAcquire(LockAcquire {
                    repo: r(),
                    workspace: WS,
                    branch: b,
                    author: String::new(),
                    paths: vec![],
                }),
                F::Lock,
                Some("r"),
                Some(WS),
                None,
                true,
            ),
            (
                Request::LockRelease(LockRelease {
                    repo: r(),
                    workspace: WS,
                    paths: vec![],
                }),
                F::Lock,
                Some("r"),
                Some(WS),
                None,
                true,
            ),
            (
                Request::LockList(LockList {
                    repo: r(),
                    prefix: String::new(),
                    after: String::new(),
                    limit: 0,
                }),
                F::Lock,
                Some("r"),
                None,
                None,
                false,
            ),
        ]
    }

    #[test]
    fn every_request_maps_to_its_action() {
        let cases = every();
        // One case per opcode: a request added to the wire set without a
        // case here fails this count.
        let mut opcodes: Vec<u16> = cases.iter().map(|c| c.0.opcode()).collect();
        opcodes.sort_unstable();
        opcodes.dedup();
        assert_eq!(opcodes.len(), Request::OPCODES.len());
        assert_eq!(cases.len(), Request::OPCODES.len());
        for (req, family, repo, ws, op, mutates) in &cases {
            let a = Action::of(req);
            assert_eq!(a.request, req.name());
            assert_eq!(a.family, *family, "{}", req.name());
            assert_eq!(a.repository, *repo, "{}", req.name());
            assert_eq!(a.workspace, *ws, "{}", req.name());
            assert_eq!(a.operation, *op, "{}", req.name());
            assert_eq!(a.mutates, *mutates, "{}", req.name());
        }
    }

    #[test]
    fn only_status_and_repo_list_concern_no_repository() {
        for (req, ..) in every() {
            let a = Action::of(&req);
            let global = matches!(req, Request::Status(_) | Request::RepoList(_));
            assert_eq!(a.repository.is_none(), global, "{}", req.name());
        }
    }

    #[test]
    fn the_open_authorizer_names_anonymous_and_allows_all() {
        let open = OpenAuthorizer;
        let peer = PeerInfo::tcp("127.0.0.1:1".parse().unwrap());
        for c in [Credential::None, Credential::Presented(vec![1, 2, 3])] {
            assert_eq!(
                open.authenticate(&c, &peer).unwrap(),
                Principal::anonymous()
            );
        }
        for (req, ..) in every() {
            assert!(open
                .authorize(&Principal::anonymous(), &Action::of(&req))
                .is_ok());
        }
    }

    #[test]
    fn credentials_never_print_their_bytes() {
        let c = Credential::Presented(b"secret-token".to_vec());
        let shown = format!("{c:?}");
        assert!(!shown.contains("secret"), "{shown}");
        assert!(shown.contains("12 bytes"), "{shown}");
    }
}

//! The service: one [`Service`] per data root, shared by every transport.
//!
//! A transport authenticates the connection once ([`Service::authenticate`],
//! giving the [`Session`]'s [`Principal`]), then decodes each [`Request`]
//! and hands it with the session to [`Service::handle`] on a blocking
//! thread (never on the async reactor: every call may touch redb or the
//! file system) and sends back the [`Response`]. `handle` authorizes the
//! request once, then dispatches it. The in-process transport calls the
//! same function directly, so both transports answer exactly alike.
//!
//! | module | what |
//! |---|---|
//! | [`auth`] | the authorization seam: [`Principal`], [`Credential`], [`PeerInfo`], [`Action`], [`Authorizer`] |
//! | [`session`] | [`Session`]: one connection's principal and transfer state |
//! | [`dispatch`] | the one mapping from wire messages to `scribe-metadata` / `scribe-objects`, by request family |
//! | [`group`] | group acceptance of concurrent submissions to one repository |
//! | [`stores`] | the object-store hooks metadata uses, backed by `scribe_objects::ObjectStore` |
//! | [`pins`] | upload pins (atomic publication and upload lifecycle profile 1) |
//! | [`upload`] | per-connection state of object uploads and downloads |

pub mod auth;
pub mod cleanup;
pub mod dispatch;
pub mod faults;
pub mod group;
pub mod pins;
pub mod precheck;
pub mod session;
pub mod stores;
pub mod upload;

use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use scribe_format::wire::{ErrorReply, Request, Response};
use scribe_format::{ErrorCode, RepositoryId};
use scribe_metadata::{DataRoot, MetadataError};

pub use auth::{
    Action, ActionFamily, Authorizer, Credential, OpenAuthorizer, PeerInfo, Principal,
    PrincipalKind,
};
pub use session::Session;
pub use stores::StoreRegistry;

/// Why a data root could not be served.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// Another process holds the data root's `LOCK`.
    #[error("data root {} is in use by {}", path.display(), match pid { Some(p) => format!("PID {p}"), None => "another process".to_string() })]
    InUse {
        path: std::path::PathBuf,
        pid: Option<u32>,
    },
    /// Any other refusal of the metadata layer.
    #[error(transparent)]
    Metadata(MetadataError),
}

impl OpenError {
    pub fn code(&self) -> ErrorCode {
        match self {
            OpenError::InUse { .. } => ErrorCode::Busy,
            OpenError::Metadata(e) => e.code(),
        }
    }
}

impl From<MetadataError> for OpenError {
    fn from(e: MetadataError) -> Self {
        match e {
            MetadataError::DataRootLocked { path, pid } => OpenError::InUse { path, pid },
            other => OpenError::Metadata(other),
        }
    }
}

/// Told of each accepted outcome (a new acceptance or a replayed one)
/// before the client hears of it.
pub trait AcceptedHook: Send + Sync {
    /// `Err` answers the client that error instead of the outcome.
    fn accepted(&self, repo: RepositoryId, change: u64) -> Result<(), Failure>;

    /// Objects `ids` of `repo` (`bytes` in all) were durably stored for
    /// `operation` (before it is submitted). Must not block for long.
    fn stored(
        &self,
        _repo: RepositoryId,
        _operation: scribe_format::OperationId,
        _store: &Arc<scribe_objects::ObjectStore>,
        _ids: &[scribe_format::ObjectId],
        _bytes: u64,
    ) {
    }
}

/// The Scribe service over one owned data root.
///
/// Holding a `Service` holds the data root's `LOCK`; dropping the last
/// `Arc<Service>` releases it.
pub struct Service {
    /// First, so it is dropped first: its thread lets go of the
    /// repositories before the data root closes.
    prechecks: precheck::Prechecker,
    /// Likewise first: the pin cleanup thread.
    cleaner: cleanup::Cleaner,
    root: DataRoot,
    stores: StoreRegistry,
    started: Instant,
    connections: AtomicU32,
    upload_budget: Arc<AtomicU64>,
    max_pins_per_workspace: AtomicU64,
    downloads: Arc<AtomicU64>,
    groups: group::Groups,
    group_acceptance: std::sync::atomic::AtomicBool,
    authorizer: RwLock<Arc<dyn Authorizer>>,
    /// Told of every accepted outcome before it is answered (the S3 tier's
    /// acknowledgement profile, `crate::tier`).
    accepted_hook: RwLock<Option<Arc<dyn AcceptedHook>>>,
    /// The data root's location as given and as resolved, never shown in
    /// a reply ([`faults::redact`]).
    hidden: Vec<String>,
}

impl Service {
    /// Open (and own) the data root at `dir`, serving repositories through
    /// `scribe_objects::ObjectStore`.
    pub fn open(dir: impl AsRef<Path>) -> Result<Arc<Service>, OpenError> {
        let mut root = DataRoot::open(dir)?;
        let stores = Self::over(&mut root)?;
        Ok(Arc::new(Service::new(root, stores)))
    }

    /// Create a new data root at `dir` and serve it.
    pub fn create(dir: impl AsRef<Path>) -> Result<Arc<Service>, OpenError> {
        let mut root = DataRoot::create(dir)?;
        let stores = Self::over(&mut root)?;
        Ok(Arc::new(Service::new(root, stores)))
    }

    fn new(root: DataRoot, stores: StoreRegistry) -> Service {
        let mut hidden = vec![root.dir().display().to_string()];
        if let Ok(real) = root.dir().canonicalize() {
            hidden.push(real.display().to_string());
        }
        if let Ok(abs) = std::path::absolute(root.dir()) {
            hidden.push(abs.display().to_string());
        }
        // Longest first, so a prefix never leaves part of a longer form.
        hidden.sort_by_key(|h| std::cmp::Reverse(h.len()));
        hidden.dedup();
        Service {
            prechecks: precheck::Prechecker::default(),
            cleaner: cleanup::Cleaner::default(),
            hidden,
            root,
            stores,
            started: Instant::now(),
            connections: AtomicU32::new(0),
            upload_budget: Arc::new(AtomicU64::new(upload::DEFAULT_UPLOAD_BUDGET)),
            max_pins_per_workspace: AtomicU64::new(
                scribe_metadata::pins::DEFAULT_MAX_PINS_PER_WORKSPACE,
            ),
            downloads: Arc::default(),
            groups: group::Groups::default(),
            group_acceptance: std::sync::atomic::AtomicBool::new(true),
            authorizer: RwLock::new(Arc::new(OpenAuthorizer)),
            accepted_hook: RwLock::new(None),
        }
    }

    /// Judge connections and requests with `authorizer` from now on (the
    /// default is [`OpenAuthorizer`]). Set it before serving: a connection
    /// keeps the principal it was authenticated as, and only its later
    /// requests are authorized by the new one.
    pub fn set_authorizer(&self, authorizer: Arc<dyn Authorizer>) {
        *self.authorizer.write().unwrap_or_else(|e| e.into_inner()) = authorizer;
    }

    /// Tell `hook` of every accepted outcome before it is answered.
    pub fn set_accepted_hook(&self, hook: Arc<dyn AcceptedHook>) {
        *self
            .accepted_hook
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(hook);
    }

    /// Run the accepted hook for change `change` of `repo` (nothing without
    /// a hook). An error replaces the accepted answer; the change stays
    /// accepted.
    pub(crate) fn accepted(&self, repo: RepositoryId, change: u64) -> Result<(), Failure> {
        let hook = self
            .accepted_hook
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        match hook {
            Some(h) => h.accepted(repo, change),
            None => Ok(()),
        }
    }

    /// The pin cleanup that follows grouped acceptances ([`cleanup`]).
    pub fn cleaner(&self) -> &cleanup::Cleaner {
        &self.cleaner
    }

    /// The manifests checked while uploads go on ([`precheck`]).
    pub(crate) fn prechecks(&self) -> &precheck::Prechecker {
        &self.prechecks
    }

    /// How many prechecks ran: (verified, any other outcome). For tests
    /// and diagnostics.
    pub fn precheck_counts(&self) -> (u64, u64) {
        self.prechecks.counts()
    }

    /// The hook [`Service::stored`] tells, for a thread that outlives the
    /// request (a background publication).
    pub(crate) fn stored_hook(&self) -> Option<Arc<dyn AcceptedHook>> {
        self.accepted_hook
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(crate) fn stored(
        &self,
        repo: RepositoryId,
        operation: scribe_format::OperationId,
        store: &Arc<scribe_objects::ObjectStore>,
        ids: &[scribe_format::ObjectId],
        bytes: u64,
    ) {
        let hook = self
            .accepted_hook
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(h) = hook {
            h.stored(repo, operation, store, ids, bytes);
        }
    }

    /// The authorizer in force.
    pub fn authorizer(&self) -> Arc<dyn Authorizer> {
        self.authorizer
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Who a network connection is, from what it presented. Blocking:
    /// call it from a blocking thread. Transports call it once per
    /// connection, before any request.
    pub fn authenticate(
        &self,
        credential: &Credential,
        peer: &PeerInfo,
    ) -> Result<Principal, Failure> {
        self.authorizer().authenticate(credential, peer)
    }

    /// Bound the bytes all connections together buffer for uploads.
    pub fn set_upload_budget(&self, bytes: u64) {
        self.upload_budget.store(bytes, Ordering::Release);
    }

    /// Bound the upload pins one workspace may hold in a repository
    /// (default [`scribe_metadata::pins::DEFAULT_MAX_PINS_PER_WORKSPACE`]).
    pub fn set_max_pins_per_workspace(&self, pins: u64) {
        self.max_pins_per_workspace.store(pins, Ordering::Release);
    }

    pub(crate) fn max_pins_per_workspace(&self) -> u64 {
        self.max_pins_per_workspace.load(Ordering::Acquire)
    }

    /// Bytes all connections hold between requests for the downloads they
    /// are serving (`ObjectGet` ranges): each keeps a streaming reader of
    /// bounded size, never the object (see `docs/server.md`).
    pub fn download_buffered_bytes(&self) -> u64 {
        self.downloads.load(Ordering::Acquire)
    }

    pub(crate) fn downloads(&self) -> &Arc<AtomicU64> {
        &self.downloads
    }

    /// The submission queues (group acceptance).
    pub fn groups(&self) -> &group::Groups {
        &self.groups
    }

    /// Accept concurrent submissions in groups (the default) or one by one.
    pub fn set_group_acceptance(&self, on: bool) {
        self.group_acceptance.store(on, Ordering::Relaxed);
    }

    pub fn group_acceptance(&self) -> bool {
        self.group_acceptance.load(Ordering::Relaxed)
    }

    pub(crate) fn upload_budget(&self) -> &Arc<AtomicU64> {
        &self.upload_budget
    }

    fn over(root: &mut DataRoot) -> Result<StoreRegistry, MetadataError> {
        let stores = StoreRegistry::default();
        root.set_objects_factory(stores.factory());
        // Open every repository now: open-time recovery of its store and
        // metadata (including queued pin cleanups) runs before serving. One
        // that cannot be opened is set aside (`DataRoot::set_aside`) and
        // refused by name; the others serve.
        root.open_every_repository()?;
        Ok(stores)
    }

    /// Every `every`, for as long as the service lives, give back the free
    /// pages streamed imports left in repositories that went unused for
    /// `quiet` (`DataRoot::compact_idle_repositories`); `serve` starts it.
    pub fn start_idle_compaction(self: &Arc<Self>, every: Duration, quiet: Duration) {
        let weak = Arc::downgrade(self);
        let started = std::thread::Builder::new()
            .name("scribe-compact".into())
            .spawn(move || loop {
                std::thread::sleep(every);
                let Some(svc) = weak.upgrade() else {
                    return;
                };
                if let Err(e) = svc.root().compact_idle_repositories(quiet) {
                    eprintln!("scribe-server: compacting idle repositories: {e}");
                }
            });
        if let Err(e) = started {
            eprintln!("scribe-server: idle compaction not started: {e}");
        }
    }

    /// The owned data root.
    pub fn root(&self) -> &DataRoot {
        &self.root
    }

    /// The object stores of opened repositories.
    pub fn stores(&self) -> &StoreRegistry {
        &self.stores
    }

    /// Time since the service opened.
    pub fn uptime_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Connections currently served by transports.
    pub fn connections(&self) -> u32 {
        self.connections.load(Ordering::Relaxed)
    }

    /// Count a connection for as long as the guard lives.
    pub fn connection_guard(self: &Arc<Self>) -> ConnectionGuard {
        self.connections.fetch_add(1, Ordering::Relaxed);
        ConnectionGuard(self.clone())
    }

    /// Answer one request. Blocking: call it from a blocking thread.
    /// The authorizer judges it first (exactly once): a refusal is the
    /// error reply and nothing of the request runs. Failures become an
    /// error reply; nothing here panics on input.
    pub fn handle(&self, session: &mut Session, request: Request) -> Response {
        self.handle_with(session, request, None)
    }

    /// Answer an `ObjectPutMany` decoded in place from a frame
    /// (`scribe_format::wire::object_put_many_view`): authorized and served
    /// exactly as [`Service::handle`] serves the decoded request, its
    /// objects' data read where the frame holds them.
    pub fn handle_put_many(
        &self,
        session: &mut Session,
        view: scribe_format::wire::ObjectPutManyView<'_>,
    ) -> Response {
        debug_assert!(view.put.objects.is_empty());
        self.handle_with(
            session,
            Request::ObjectPutMany(view.put),
            Some(&view.pieces),
        )
    }

    fn handle_with(
        &self,
        session: &mut Session,
        request: Request,
        pieces: Option<&[(scribe_format::ObjectId, &[u8])]>,
    ) -> Response {
        let authorizer = self.authorizer();
        let allowed = authorizer.authorize_request(self, session.principal(), &request);
        if let Err(refusal) = allowed {
            return Response::Error(refusal.into_reply());
        }
        if let Err(refusal) = self.refuse_retired(&request) {
            return Response::Error(refusal.into_reply());
        }
        match dispatch::dispatch_with(self, session, request, pieces) {
            Ok(mut r) => {
                authorizer.filter_response(session.principal(), &mut r);
                r
            }
            Err(e) => Response::Error(self.answer_failure(e).into_reply()),
        }
    }

    /// Refuse a write to a retired repository (`scribe-server repo
    /// retire`): anything that may change it durably (objects, pins,
    /// submits, locks) is `repository_retired`, naming whom to ask; reads,
    /// syncs, history and workspace registration (so that a new workspace
    /// can read it) go on.
    fn refuse_retired(&self, request: &Request) -> Result<(), Failure> {
        if !self.root().has_retired() {
            return Ok(());
        }
        let action = auth::Action::of(request);
        if !action.mutates
            || matches!(
                action.family,
                auth::ActionFamily::Workspace | auth::ActionFamily::RepositoryAdmin
            )
        {
            return Ok(());
        }
        let Some(name) = action.repository else {
            return Ok(());
        };
        let Ok(id) = self.root().repository_id(name) else {
            return Ok(());
        };
        let Some(r) = self.root().retired(id) else {
            return Ok(());
        };
        let ask = if r.contact.is_empty() {
            "the server's operator".to_owned()
        } else {
            r.contact.clone()
        };
        Err(Failure::new(
            ErrorCode::RepositoryRetired,
            format!(
                "repository {} is retired (kept read-only): {} is refused; syncs, reads and \
                 history still work. To write to it again, ask {ask} (`scribe-server repo \
                 unretire`)",
                scribe_format::echo::echo(name),
                action.request
            ),
        ))
    }

    /// The reply to a failure: a storage fault is logged in full, makes
    /// the service reopen its repositories (see [`faults`]) and is
    /// answered in words that name no server path.
    fn answer_failure(&self, mut f: Failure) -> Failure {
        if let Some(fault) = f.fault {
            eprintln!(
                "scribe-server: storage failure ({fault:?}): {}: {}",
                f.code, f.message
            );
            if fault != faults::Fault::StillHeld {
                self.forget_open_repositories();
            }
            f.message = match fault {
                faults::Fault::Full => "the server's storage is full: nothing of this request \
                    was recorded; the server goes on by itself once its administrator frees \
                    space (retry then)"
                    .into(),
                faults::Fault::Broken => "a write on the server failed; the server is reopening \
                    its files: retry in a moment"
                    .into(),
                faults::Fault::StillHeld => "the server is reopening its files after a storage \
                    failure, and a request that started before still holds them: retry in a \
                    moment"
                    .into(),
            };
        }
        f.message = faults::redact(&f.message, &self.hidden);
        f
    }

    /// Drop every open repository handle (metadata and object store); the
    /// next request opens them again, with open-time recovery.
    pub fn forget_open_repositories(&self) {
        self.root.forget_open_repositories(|| self.stores.clear());
    }
}

/// Keeps [`Service::connections`] counted while a connection is open.
pub struct ConnectionGuard(Arc<Service>);

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A refusal or failure of one request, as the client will see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub code: ErrorCode,
    pub message: String,
    pub paths: Vec<String>,
    /// The failure is one of the server's storage, not of the request.
    pub fault: Option<faults::Fault>,
}

impl Failure {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
            paths: Vec::new(),
            fault: None,
        }
    }

    /// The same failure marked with the storage fault `e` shows, if any;
    /// a full volume is `storage_full`, a reopen still held is `busy`.
    fn with_fault_of(mut self, e: &(dyn std::error::Error + 'static)) -> Self {
        self.fault = faults::classify(e);
        match self.fault {
            Some(faults::Fault::Full) => self.code = ErrorCode::StorageFull,
            Some(faults::Fault::StillHeld) => self.code = ErrorCode::ServerBusy,
            _ => {}
        }
        self
    }

    pub fn into_reply(self) -> ErrorReply {
        ErrorReply {
            code: self.code.number(),
            message: self.message,
            paths: self.paths,
        }
    }
}

impl From<MetadataError> for Failure {
    fn from(e: MetadataError) -> Self {
        let message = match &e {
            MetadataError::Refused { detail, .. } => detail.clone(),
            other => other.to_string(),
        };
        Failure::new(e.code(), message).with_fault_of(&e)
    }
}

impl From<scribe_objects::StoreError> for Failure {
    fn from(e: scribe_objects::StoreError) -> Self {
        Failure::new(stores::store_code(&e), e.to_string()).with_fault_of(&e)
    }
}

impl From<scribe_format::FormatError> for Failure {
    fn from(e: scribe_format::FormatError) -> Self {
        Failure::new(e.code(), e.to_string())
    }
}

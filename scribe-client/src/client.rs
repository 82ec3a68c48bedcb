//! [`Client`]: one typed method per request of the protocol, over any
//! [`Connection`].
//!
//! [`connect`] takes a server URL ([`ServerUrl`]): over TCP or TLS it opens
//! a [`TcpConnection`]; for a data root it runs the service in this process
//! ([`InProcessConnection`]) and holds the data root's `LOCK` until the
//! client is dropped (a second process gets [`ClientError::Open`] naming
//! the PID that holds it). Every reply is checked: an error reply becomes
//! [`ClientError::Server`], a reply to another request a protocol error.

use std::path::PathBuf;
use std::time::Duration;

use scribe_format::wire::frame::REPLY_BIT;
use scribe_format::wire::handshake::HandshakeStatus;
use scribe_format::wire::message::{self as m, MAX_IDS_PER_REQUEST};
use scribe_format::wire::{Connection, ConnectionKind, Request, Response, TransportError, Wire};
use scribe_format::{ErrorCode, ObjectId, OperationId, WorkspaceId};
use scribe_server::{InProcessConnection, OpenError, Service};

use crate::tcp::TcpConnection;
use crate::tls::TlsError;
use crate::url::ServerUrl;

/// How to connect.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// Ask for LZ4-compressed frames.
    pub lz4: bool,
    /// CA certificates (PEM) trusted for `scribes://`.
    pub ca_file: Option<PathBuf>,
    /// Timeout of every read and write on the socket.
    pub timeout: Duration,
    /// Timeout of the TCP connect.
    pub connect_timeout: Duration,
    /// A credential to present in the handshake's credential slot
    /// (`docs/wire-format.md` 1.1); none: the connection is anonymous.
    pub credential: Option<Vec<u8>>,
    /// A credential certificate and key presented as the TLS client
    /// certificate on `scribes://` (a team server requires one: the stored
    /// `scribe login` or `SCRIBE_CREDENTIAL`).
    pub tls_credential: Option<crate::auth::Credential>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            lz4: false,
            ca_file: None,
            timeout: Duration::from_secs(300),
            connect_timeout: Duration::from_secs(10),
            credential: None,
            tls_credential: None,
        }
    }
}

impl ClientOptions {
    /// The options of a command-line process, from its environment: the
    /// CA trusted for `scribes://` (`SCRIBE_CA_FILE`, else the auth
    /// service's CA stored by `scribe login`), the TLS client credential
    /// (`SCRIBE_CREDENTIAL`, else the stored login), and the timeouts
    /// (`SCRIBE_TIMEOUT`, `SCRIBE_CONNECT_TIMEOUT`, in seconds). Shared by
    /// `scribe` and `nokv`, so an agent reaches a team server as its user
    /// does. An unreadable credential is not an error here (`scribe login`
    /// must still work to replace it): a team server then refuses the
    /// connection as `unauthenticated`, with the sign-in hint. The error
    /// names a malformed timeout.
    pub fn from_env() -> Result<ClientOptions, String> {
        let defaults = ClientOptions::default();
        let login = crate::auth::config_dir();
        let stored_ca = login
            .as_ref()
            .map(|d| d.join("auth-ca.pem"))
            .filter(|p| p.is_file());
        let tls_credential = match &login {
            Some(d)
                if std::env::var_os("SCRIBE_CREDENTIAL").is_some()
                    || d.join("credential.pem").is_file() =>
            {
                crate::auth::load_credential(d).ok()
            }
            _ => None,
        };
        Ok(ClientOptions {
            ca_file: std::env::var_os("SCRIBE_CA_FILE")
                .map(PathBuf::from)
                .or(stored_ca),
            tls_credential,
            timeout: env_seconds("SCRIBE_TIMEOUT")?.unwrap_or(defaults.timeout),
            connect_timeout: env_seconds("SCRIBE_CONNECT_TIMEOUT")?
                .unwrap_or(defaults.connect_timeout),
            ..defaults
        })
    }
}

/// A positive number of seconds from the environment variable `name`.
fn env_seconds(name: &str) -> Result<Option<Duration>, String> {
    let Some(v) = std::env::var_os(name) else {
        return Ok(None);
    };
    let v = v.to_string_lossy();
    match v.trim().parse::<f64>() {
        Ok(s) if s > 0.0 && s.is_finite() && s < 1e9 => Ok(Some(Duration::from_secs_f64(s))),
        _ => Err(format!(
            "{name}={v:?} is not a number of seconds greater than zero"
        )),
    }
}

/// A failed client call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The server refused or failed the request.
    #[error("{message}")]
    Server {
        code: ErrorCode,
        message: String,
        paths: Vec<String>,
    },
    /// The server did not accept the handshake.
    #[error("the server refused the connection: {} (it speaks {server_schema})", status.describe())]
    Handshake {
        status: HandshakeStatus,
        server_schema: String,
    },
    /// The connection failed.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// Received bytes could not be written where they go on this machine
    /// (a full disk): the connection is fine, the local file is not.
    #[error("{context}: {source}")]
    Local {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// The peer sent something this client cannot read.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The URL is not one this client understands.
    #[error("invalid server URL {}: {reason}", scribe_format::echo::echo(url))]
    Url { url: String, reason: String },
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The data root of a path URL could not be opened.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// Downloaded bytes do not match their identity.
    #[error("downloaded object {id} is corrupt: {detail}")]
    Corrupt { id: ObjectId, detail: String },
    /// A request this client does not send: a field longer than the wire
    /// carries (a `str16` name over 65,535 bytes, a text over 1 MiB).
    /// Nothing was sent.
    #[error("{request} was not sent: {}", unsendable(source))]
    Unsendable {
        request: &'static str,
        #[source]
        source: scribe_format::FormatError,
    },
}

/// Why a request was not sent, in words.
fn unsendable(e: &scribe_format::FormatError) -> String {
    match e {
        scribe_format::FormatError::LimitExceeded {
            what,
            limit,
            actual,
        } => format!("its field {what} is {actual} bytes, over the wire's limit of {limit}"),
        other => other.to_string(),
    }
}

impl ClientError {
    /// The registry code of this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            ClientError::Server { code, .. } => *code,
            ClientError::Handshake { .. } => ErrorCode::UnsupportedVersion,
            ClientError::Io { .. } | ClientError::Tls(_) => ErrorCode::Unreachable,
            ClientError::Local { .. } => ErrorCode::Io,
            ClientError::Protocol(_) => ErrorCode::Malformed,
            ClientError::Url { .. } => ErrorCode::Usage,
            ClientError::Open(e) => e.code(),
            ClientError::Corrupt { .. } => ErrorCode::Corrupt,
            ClientError::Unsendable { source, .. } => source.code(),
        }
    }

    /// The paths a refusal names.
    pub fn paths(&self) -> &[String] {
        match self {
            ClientError::Server { paths, .. } => paths,
            _ => &[],
        }
    }

    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> ClientError {
        let context = context.into();
        move |source| ClientError::Io { context, source }
    }

    /// A failure to write received bytes on this machine.
    pub(crate) fn local(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> ClientError {
        let context = context.into();
        move |source| ClientError::Local { context, source }
    }
}

impl From<TransportError> for ClientError {
    fn from(e: TransportError) -> Self {
        match e {
            TransportError::Io { context, source } => ClientError::Io { context, source },
            TransportError::Protocol(p) => ClientError::Protocol(p),
            // The failure that broke the connection was a transport one
            // (reported where it happened); what is left is a connection
            // that cannot carry anything: unreachable, not a refusal.
            TransportError::Broken => ClientError::Io {
                context: TransportError::Broken.to_string(),
                source: std::io::ErrorKind::NotConnected.into(),
            },
            other => ClientError::Protocol(other.to_string()),
        }
    }
}

/// The result of a client call.
pub type ClientResult<T> = Result<T, ClientError>;

/// A connection to a Scribe service with one method per request.
pub struct Client {
    conn: Box<dyn Connection>,
}

/// Connect to `url`.
pub fn connect(url: &str, opts: &ClientOptions) -> ClientResult<Client> {
    match ServerUrl::parse(url)? {
        ServerUrl::Path(p) => Ok(Client::in_process(Service::open(&p)?)),
        ServerUrl::Tcp { host, port, tls } => Ok(Client::over(Box::new(TcpConnection::open(
            url, &host, port, tls, opts,
        )?))),
    }
}

impl Client {
    /// A client over any connection.
    pub fn over(conn: Box<dyn Connection>) -> Client {
        Client { conn }
    }

    /// A client of `service` in this process (the path transport).
    pub fn in_process(service: std::sync::Arc<Service>) -> Client {
        Client::over(Box::new(InProcessConnection::new(service)))
    }

    /// Whether this client talks to an in-process service.
    pub fn is_in_process(&self) -> bool {
        self.conn.kind() == ConnectionKind::InProcess
    }

    /// Whether LZ4 frames were granted (always false in-process).
    pub fn lz4(&self) -> bool {
        matches!(self.conn.kind(), ConnectionKind::Stream { lz4: true, .. })
    }

    /// Whether an exchange on this connection failed half way: nothing
    /// more can be sent on it, so its owner connects again.
    pub fn is_broken(&self) -> bool {
        self.conn.broken()
    }

    /// Send one request and return its checked reply.
    pub fn call(&mut self, request: Request) -> ClientResult<Response> {
        let opcode = request.opcode();
        let name = request.name();
        request.check().map_err(|source| ClientError::Unsendable {
            request: name,
            source,
        })?;
        let reply = self.conn.call(request)?;
        checked(reply, opcode, name)
    }

    /// One object piece whose data is `data` (`put.data` is not sent).
    pub(crate) fn put_piece(
        &mut self,
        put: &m::ObjectPut,
        staged: bool,
        data: &[u8],
    ) -> ClientResult<Response> {
        let (opcode, name) = if staged {
            (scribe_format::wire::OP_OBJECT_PUT_STAGED, "ObjectPutStaged")
        } else {
            (scribe_format::wire::OP_OBJECT_PUT, "ObjectPut")
        };
        put.check().map_err(|source| ClientError::Unsendable {
            request: name,
            source,
        })?;
        let reply = self.conn.put_piece(put, staged, data)?;
        checked(reply, opcode, name)
    }
}

/// An error reply as [`ClientError::Server`]; a reply to another request
/// as a protocol error.
fn checked(reply: Response, opcode: u16, name: &str) -> ClientResult<Response> {
    match reply {
        Response::Error(e) => Err(ClientError::Server {
            code: e.error_code(),
            message: e.shown_message(),
            paths: e.paths,
        }),
        other if other.opcode() == opcode | REPLY_BIT => Ok(other),
        other => Err(ClientError::Protocol(format!(
            "reply {:#06x} does not answer {name}",
            other.opcode(),
        ))),
    }
}

/// The reply's payload when it is the expected variant.
macro_rules! expect_reply {
    ($reply:expr, $variant:ident) => {
        match $reply {
            Response::$variant(x) => Ok(x),
            other => Err(ClientError::Protocol(format!(
                "unexpected reply {:#06x}",
                other.opcode()
            ))),
        }
    };
}
pub(crate) use expect_reply;

impl Client {
    pub fn status(&mut self) -> ClientResult<m::StatusReply> {
        expect_reply!(self.call(Request::Status(m::StatusRequest {}))?, Status)
    }

    pub fn repo_create(&mut self, name: &str) -> ClientResult<m::RepoInfo> {
        let req = Request::RepoCreate(m::RepoCreate { name: name.into() });
        expect_reply!(self.call(req)?, RepoCreated)
    }

    pub fn repo_list(&mut self) -> ClientResult<Vec<m::RepoInfo>> {
        let r = expect_reply!(
            self.call(Request::RepoList(m::RepoListRequest {}))?,
            RepoList
        )?;
        Ok(r.repositories)
    }

    /// Register a workspace (idempotent for the same id).
    pub fn workspace_register(
        &mut self,
        r: m::WorkspaceRegister,
    ) -> ClientResult<m::WorkspaceInfo> {
        expect_reply!(
            self.call(Request::WorkspaceRegister(r))?,
            WorkspaceRegistered
        )
    }

    pub fn workspace_retire(&mut self, repo: &str, workspace: WorkspaceId) -> ClientResult<()> {
        let req = Request::WorkspaceRetire(m::WorkspaceRetire {
            repo: repo.into(),
            workspace,
        });
        expect_reply!(self.call(req)?, WorkspaceRetired).map(|_| ())
    }

    pub fn workspace_list(&mut self, repo: &str) -> ClientResult<Vec<m::WorkspaceInfo>> {
        let req = Request::WorkspaceList(m::WorkspaceListRequest { repo: repo.into() });
        Ok(expect_reply!(self.call(req)?, WorkspaceList)?.workspaces)
    }

    /// The subset of `ids` the server lacks (any number; sent in batches).
    pub fn objects_missing(&mut self, repo: &str, ids: &[ObjectId]) -> ClientResult<Vec<ObjectId>> {
        let mut out = Vec::new();
        for batch in ids.chunks(MAX_IDS_PER_REQUEST) {
            let req = Request::ObjectsMissing(m::ObjectsMissing {
                repo: repo.into(),
                ids: batch.to_vec(),
            });
            out.extend(expect_reply!(self.call(req)?, ObjectsMissing)?.missing);
        }
        Ok(out)
    }

    pub fn object_put(&mut self, r: m::ObjectPut) -> ClientResult<m::ObjectPutReply> {
        expect_reply!(self.call(Request::ObjectPut(r))?, ObjectPut)
    }

    /// One piece of an object to stage (published by the connection's
    /// next publication, see [`Client::objects_publish`]).
    pub fn object_put_staged(&mut self, r: m::ObjectPut) -> ClientResult<m::ObjectPutReply> {
        expect_reply!(self.call(Request::ObjectPutStaged(r))?, ObjectPutStaged)
    }

    /// Pin `ids` for the upload intent `operation` of `workspace` (one
    /// transaction per 65,536 ids) and return the ones the server lacks.
    pub fn objects_pin_missing(
        &mut self,
        repo: &str,
        workspace: WorkspaceId,
        operation: OperationId,
        ids: &[ObjectId],
    ) -> ClientResult<Vec<ObjectId>> {
        let mut out = Vec::new();
        for batch in ids.chunks(MAX_IDS_PER_REQUEST) {
            let req = Request::ObjectsPinMissing(m::ObjectsPinMissing {
                repo: repo.into(),
                operation,
                workspace,
                ids: batch.to_vec(),
            });
            out.extend(expect_reply!(self.call(req)?, ObjectsPinMissing)?.missing);
        }
        Ok(out)
    }

    /// Publish every object this connection staged, durably; returns how
    /// many were staged since the last publication.
    pub fn objects_publish(&mut self, repo: &str) -> ClientResult<u32> {
        let req = Request::ObjectsPublish(m::ObjectsPublish { repo: repo.into() });
        Ok(expect_reply!(self.call(req)?, ObjectsPublished)?.published)
    }

    /// Small whole objects in one request; over a plain stream their data
    /// are written from their own buffers ([`Connection::put_many`]).
    pub fn object_put_many(&mut self, r: m::ObjectPutMany) -> ClientResult<m::ObjectPutManyReply> {
        const NAME: &str = "ObjectPutMany";
        r.check().map_err(|source| ClientError::Unsendable {
            request: NAME,
            source,
        })?;
        let reply = self.conn.put_many(r)?;
        expect_reply!(
            checked(reply, scribe_format::wire::OP_OBJECT_PUT_MANY, NAME)?,
            ObjectPutMany
        )
    }

    pub fn object_get(&mut self, r: m::ObjectGet) -> ClientResult<m::ObjectData> {
        expect_reply!(self.call(Request::ObjectGet(r))?, ObjectData)
    }

    /// Submit; the outcome (accepted or refused) is a successful reply.
    pub fn submit(&mut self, r: m::Submit) -> ClientResult<m::Outcome> {
        expect_reply!(self.call(Request::Submit(r))?, Submitted)
    }

    /// Submit with the objects the server lacks carried in the request
    /// (at most 4 MiB of data in all); the outcome is a successful reply.
    pub fn submit_inline(&mut self, r: m::SubmitInline) -> ClientResult<m::Outcome> {
        expect_reply!(self.call(Request::SubmitInline(r))?, SubmittedInline)
    }

    pub fn operation_outcome(
        &mut self,
        repo: &str,
        operation: OperationId,
    ) -> ClientResult<Option<m::Outcome>> {
        let req = Request::OperationOutcome(m::OperationOutcome {
            repo: repo.into(),
            operation,
        });
        Ok(expect_reply!(self.call(req)?, OperationOutcome)?.outcome)
    }

    pub fn delta(&mut self, r: m::Delta) -> ClientResult<m::DeltaPage> {
        expect_reply!(self.call(Request::Delta(r))?, Delta)
    }

    pub fn list(&mut self, r: m::List) -> ClientResult<m::ListPage> {
        expect_reply!(self.call(Request::List(r))?, List)
    }

    pub fn stat(&mut self, r: m::Stat) -> ClientResult<m::StatReply> {
        expect_reply!(self.call(Request::Stat(r))?, Stat)
    }

    pub fn history(&mut self, r: m::History) -> ClientResult<m::HistoryPage> {
        expect_reply!(self.call(Request::History(r))?, History)
    }

    pub fn log(&mut self, r: m::Log) -> ClientResult<m::LogPage> {
        expect_reply!(self.call(Request::Log(r))?, Log)
    }

    pub fn describe(&mut self, r: m::Describe) -> ClientResult<m::DescribeReply> {
        expect_reply!(self.call(Request::Describe(r))?, Describe)
    }

    pub fn lock_acquire(&mut self, r: m::LockAcquire) -> ClientResult<Vec<m::LockInfo>> {
        Ok(expect_reply!(self.call(Request::LockAcquire(r))?, LocksAcquired)?.locks)
    }

    pub fn lock_release(&mut self, r: m::LockRelease) -> ClientResult<Vec<m::LockInfo>> {
        Ok(expect_reply!(self.call(Request::LockRelease(r))?, LocksReleased)?.locks)
    }

    pub fn lock_list(&mut self, r: m::LockList) -> ClientResult<m::LockListPage> {
        expect_reply!(self.call(Request::LockList(r))?, LockList)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What is left of a connection a transport failure broke is out of
    /// reach (`unreachable`, sync or submit again), never a refusal by
    /// the server (`malformed`).
    #[test]
    fn a_broken_connection_is_unreachable_not_a_refusal() {
        let e = ClientError::from(TransportError::Broken);
        assert_eq!(e.code(), ErrorCode::Unreachable, "{e}");
        let e = ClientError::from(TransportError::Protocol("bad frame".into()));
        assert_eq!(e.code(), ErrorCode::Malformed, "{e}");
    }
}

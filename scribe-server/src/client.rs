//! The synchronous client the `scribe` CLI uses.
//!
//! [`connect`] takes a server URL: `scribe://HOST:PORT` (plain TCP),
//! `scribes://HOST:PORT` (TLS, trusting [`ClientOptions::ca_file`]), or a
//! data root path (`file:///abs/path` or a plain path). For a path the
//! client runs the service in-process and holds the data root's `LOCK`
//! until the [`Client`] is dropped; a second process gets
//! [`ClientError::Open`] naming the PID that holds it. Both transports are
//! behind the one [`Client`] type, with one method per operation.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use scribe_format::wire::frame::{check_frame_len, REPLY_BIT};
use scribe_format::wire::handshake::{HandshakeStatus, FLAG_LZ4, HANDSHAKE_LEN};
use scribe_format::wire::message::{self as m, MAX_IDS_PER_REQUEST, MAX_OBJECT_DATA_PER_FRAME};
use scribe_format::wire::{
    decode_response, object_data_head, object_put_frame_head, request_frame, Answer, Bytes, Hello,
    Request, Response, OBJECT_DATA_HEAD_LEN, OP_OBJECT_PUT, OP_OBJECT_PUT_STAGED,
};
use scribe_format::{ErrorCode, ObjectId, OperationId, WorkspaceId};

use crate::service::upload::max_object_bytes;
use crate::service::{OpenError, Service, Session};
use crate::tls::TlsError;

/// Objects no larger than this are uploaded in groups (`ObjectPutMany`).
pub const SMALL_OBJECT_BYTES: usize = 1 << 20;
/// Most objects in one `ObjectPutMany`.
const MAX_GROUP_OBJECTS: usize = 4096;

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
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            lz4: false,
            ca_file: None,
            timeout: Duration::from_secs(300),
            connect_timeout: Duration::from_secs(10),
        }
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
    /// The peer sent something this client cannot read.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The URL is not one this client understands.
    #[error("invalid server URL {url:?}: {reason}")]
    Url { url: String, reason: String },
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The data root of a path URL could not be opened.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// Downloaded bytes do not match their identity.
    #[error("downloaded object {id} is corrupt: {detail}")]
    Corrupt { id: ObjectId, detail: String },
}

impl ClientError {
    /// The registry code of this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            ClientError::Server { code, .. } => *code,
            ClientError::Handshake { .. } => ErrorCode::UnsupportedVersion,
            ClientError::Io { .. } | ClientError::Tls(_) => ErrorCode::Internal,
            ClientError::Protocol(_) | ClientError::Url { .. } => ErrorCode::Malformed,
            ClientError::Open(e) => e.code(),
            ClientError::Corrupt { .. } => ErrorCode::Corrupt,
        }
    }

    /// The paths a refusal names.
    pub fn paths(&self) -> &[String] {
        match self {
            ClientError::Server { paths, .. } => paths,
            _ => &[],
        }
    }

    fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> ClientError {
        let context = context.into();
        move |source| ClientError::Io { context, source }
    }
}

type R<T> = Result<T, ClientError>;

/// Where a URL points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Tcp { host: String, port: u16, tls: bool },
    Path(PathBuf),
}

/// Parse a server URL.
pub fn parse_url(url: &str) -> R<Target> {
    let bad = |reason: &str| ClientError::Url {
        url: url.to_string(),
        reason: reason.to_string(),
    };
    let (tls, rest) = if let Some(r) = url.strip_prefix("scribe://") {
        (false, r)
    } else if let Some(r) = url.strip_prefix("scribes://") {
        (true, r)
    } else if let Some(p) = url.strip_prefix("file://") {
        if !p.starts_with('/') {
            return Err(bad("a file URL needs an absolute path (file:///...)"));
        }
        return Ok(Target::Path(PathBuf::from(p)));
    } else if url.contains("://") {
        return Err(bad("use scribe://, scribes://, file:// or a path"));
    } else if url.is_empty() {
        return Err(bad("empty"));
    } else {
        return Ok(Target::Path(PathBuf::from(url)));
    };
    let rest = rest.trim_end_matches('/');
    let (host, port) = rest
        .rsplit_once(':')
        .ok_or_else(|| bad("expected HOST:PORT"))?;
    let port: u16 = port.parse().map_err(|_| bad("the port is not a number"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(bad("no host"));
    }
    Ok(Target::Tcp {
        host: host.to_string(),
        port,
        tls,
    })
}

trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

struct Remote {
    stream: Box<dyn Stream>,
    lz4: bool,
    broken: bool,
}

struct Local {
    service: Arc<Service>,
    session: Session,
}

enum Conn {
    Remote(Remote),
    Local(Box<Local>),
}

/// A connection to a Scribe service, over TCP/TLS or in-process.
pub struct Client {
    conn: Conn,
}

/// Connect to `url`.
pub fn connect(url: &str, opts: &ClientOptions) -> R<Client> {
    match parse_url(url)? {
        Target::Path(p) => Ok(Client::in_process(Service::open(&p)?)),
        Target::Tcp { host, port, tls } => {
            let addrs: Vec<_> = (host.as_str(), port)
                .to_socket_addrs()
                .map_err(ClientError::io(format!("cannot resolve {host}")))?
                .collect();
            let mut last = None;
            let mut sock = None;
            for a in addrs {
                match TcpStream::connect_timeout(&a, opts.connect_timeout) {
                    Ok(s) => {
                        sock = Some(s);
                        break;
                    }
                    Err(e) => last = Some(e),
                }
            }
            let sock = match (sock, last) {
                (Some(s), _) => s,
                (None, Some(e)) => {
                    return Err(ClientError::Io {
                        context: format!("cannot connect to {host}:{port}"),
                        source: e,
                    })
                }
                (None, None) => {
                    return Err(ClientError::Url {
                        url: url.to_string(),
                        reason: "the host has no address".into(),
                    })
                }
            };
            let ctx = || format!("connection to {host}:{port}");
            sock.set_read_timeout(Some(opts.timeout))
                .map_err(ClientError::io(ctx()))?;
            sock.set_write_timeout(Some(opts.timeout))
                .map_err(ClientError::io(ctx()))?;
            let _ = sock.set_nodelay(true);
            let stream: Box<dyn Stream> = if tls {
                let ca = opts.ca_file.as_ref().ok_or_else(|| ClientError::Url {
                    url: url.to_string(),
                    reason: "scribes:// needs a trusted CA file".into(),
                })?;
                let cfg = crate::tls::client_config(ca)?;
                let name = rustls::pki_types::ServerName::try_from(host.clone()).map_err(|_| {
                    ClientError::Url {
                        url: url.to_string(),
                        reason: "the host is not a valid TLS server name".into(),
                    }
                })?;
                let conn = rustls::ClientConnection::new(cfg, name).map_err(TlsError::from)?;
                Box::new(rustls::StreamOwned::new(conn, sock))
            } else {
                Box::new(sock)
            };
            Client::handshake(stream, opts.lz4, &ctx())
        }
    }
}

impl Client {
    /// A client of `service` in this process (the path transport).
    pub fn in_process(service: Arc<Service>) -> Client {
        Client {
            conn: Conn::Local(Box::new(Local {
                service,
                session: Session::new(),
            })),
        }
    }

    fn handshake(mut stream: Box<dyn Stream>, lz4: bool, ctx: &str) -> R<Client> {
        stream
            .write_all(&Hello::new(lz4).encode())
            .and_then(|_| stream.flush())
            .map_err(ClientError::io(format!("{ctx}: sending the hello")))?;
        let mut buf = [0u8; HANDSHAKE_LEN];
        stream
            .read_exact(&mut buf)
            .map_err(ClientError::io(format!(
                "{ctx}: reading the handshake answer"
            )))?;
        let answer = Answer::decode(&buf)
            .map_err(|e| ClientError::Protocol(format!("handshake answer: {e}")))?;
        if answer.status != HandshakeStatus::Accepted {
            return Err(ClientError::Handshake {
                status: answer.status,
                server_schema: answer.schema,
            });
        }
        Ok(Client {
            conn: Conn::Remote(Remote {
                stream,
                lz4: lz4 && answer.flags & FLAG_LZ4 != 0,
                broken: false,
            }),
        })
    }

    /// Whether this client talks to an in-process service.
    pub fn is_in_process(&self) -> bool {
        matches!(self.conn, Conn::Local(_))
    }

    /// Whether LZ4 frames were granted (always false in-process).
    pub fn lz4(&self) -> bool {
        matches!(&self.conn, Conn::Remote(r) if r.lz4)
    }

    /// Send one request and return its reply; an error reply becomes
    /// [`ClientError::Server`].
    pub fn call(&mut self, request: Request) -> R<Response> {
        let opcode = request.opcode();
        let name = request.name();
        let reply = match &mut self.conn {
            Conn::Local(l) => l.service.handle(&mut l.session, request),
            // An object piece over a plain connection goes out from its
            // own buffer: no copy into a frame.
            Conn::Remote(r) if !r.lz4 => match &request {
                Request::ObjectPut(p) | Request::ObjectPutStaged(p) => {
                    let staged = opcode == OP_OBJECT_PUT_STAGED;
                    let head = object_put_frame_head(p, staged, p.data.0.len());
                    r.send(&head, &p.data.0, name)?
                }
                _ => r.send(&request_frame(&request, false), &[], name)?,
            },
            Conn::Remote(r) => r.send(&request_frame(&request, true), &[], name)?,
        };
        Self::checked(reply, opcode, name)
    }

    /// One object piece whose data is `data` (`put.data` is not sent):
    /// over a plain TCP or TLS connection without LZ4 frames the frame's
    /// head and `data` are written as they are, without building a frame.
    fn put_piece(&mut self, put: &m::ObjectPut, staged: bool, data: &[u8]) -> R<Response> {
        let (opcode, name) = if staged {
            (OP_OBJECT_PUT_STAGED, "ObjectPutStaged")
        } else {
            (OP_OBJECT_PUT, "ObjectPut")
        };
        match &mut self.conn {
            Conn::Remote(r) if !r.lz4 => {
                let head = object_put_frame_head(put, staged, data.len());
                let reply = r.send(&head, data, name)?;
                Self::checked(reply, opcode, name)
            }
            _ => {
                let put = m::ObjectPut {
                    data: Bytes(data.to_vec()),
                    repo: put.repo.clone(),
                    ..*put
                };
                self.call(if staged {
                    Request::ObjectPutStaged(put)
                } else {
                    Request::ObjectPut(put)
                })
            }
        }
    }

    /// An error reply as [`ClientError::Server`]; a reply to another
    /// request as a protocol error.
    fn checked(reply: Response, opcode: u16, name: &str) -> R<Response> {
        match reply {
            Response::Error(e) => Err(ClientError::Server {
                code: e.error_code(),
                message: e.message,
                paths: e.paths,
            }),
            other if other.opcode() == opcode | REPLY_BIT => Ok(other),
            other => Err(ClientError::Protocol(format!(
                "reply {:#06x} does not answer {name}",
                other.opcode(),
            ))),
        }
    }
}

impl Remote {
    /// Send one request frame given as two consecutive parts and read its
    /// reply. A failure marks the connection broken: the exchange may be
    /// half done, so nothing more is sent on it.
    fn send(&mut self, head: &[u8], tail: &[u8], name: &str) -> R<Response> {
        if self.broken {
            return Err(ClientError::Protocol(
                "the connection failed earlier; reconnect".into(),
            ));
        }
        let r = self.exchange_parts(head, tail, name);
        self.broken = r.is_err();
        r
    }

    fn exchange_parts(&mut self, head: &[u8], tail: &[u8], name: &str) -> R<Response> {
        write_both(&mut *self.stream, head, tail)
            .and_then(|_| self.stream.flush())
            .map_err(ClientError::io(format!("sending {name}")))?;
        let mut len = [0u8; 4];
        self.stream
            .read_exact(&mut len)
            .map_err(ClientError::io(format!("reading the reply to {name}")))?;
        let n = check_frame_len(len).map_err(|e| ClientError::Protocol(e.to_string()))?;
        let reading = || ClientError::io(format!("reading the reply to {name}"));
        // Object bytes are read straight into their own buffer.
        let k = n.min(OBJECT_DATA_HEAD_LEN);
        let mut body = vec![0u8; k];
        self.stream.read_exact(&mut body).map_err(reading())?;
        if let Some(mut reply) = object_data_head(&body, n) {
            let want = n - k;
            let mut data = Vec::new();
            data.try_reserve_exact(want).map_err(|_| {
                ClientError::Protocol(format!("cannot buffer a reply of {n} bytes"))
            })?;
            (&mut *self.stream)
                .take(want as u64)
                .read_to_end(&mut data)
                .map_err(reading())?;
            if data.len() != want {
                return Err(reading()(std::io::ErrorKind::UnexpectedEof.into()));
            }
            reply.data = Bytes(data);
            return Ok(Response::ObjectData(reply));
        }
        body.resize(n, 0);
        self.stream.read_exact(&mut body[k..]).map_err(reading())?;
        decode_response(&body, self.lz4).map_err(|e| ClientError::Protocol(e.to_string()))
    }
}

/// Write `head` then `tail` with as few system calls as the stream takes.
fn write_both(w: &mut dyn Write, head: &[u8], tail: &[u8]) -> std::io::Result<()> {
    use std::io::{ErrorKind, IoSlice};
    let mut bufs = [IoSlice::new(head), IoSlice::new(tail)];
    let mut bufs = &mut bufs[..];
    // Drop leading empty parts: a write of nothing but empty slices
    // returns 0, which would read as WriteZero.
    IoSlice::advance_slices(&mut bufs, 0);
    while !bufs.is_empty() {
        match w.write_vectored(bufs) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut bufs, n),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

macro_rules! expect {
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

/// What [`Client::upload_missing`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UploadReport {
    /// Objects offered.
    pub offered: usize,
    /// Objects the server lacked and that were sent.
    pub sent: usize,
    /// Payload bytes sent.
    pub bytes: u64,
}

impl Client {
    pub fn status(&mut self) -> R<m::StatusReply> {
        expect!(self.call(Request::Status(m::StatusRequest {}))?, Status)
    }

    pub fn repo_create(&mut self, name: &str) -> R<m::RepoInfo> {
        let req = Request::RepoCreate(m::RepoCreate { name: name.into() });
        expect!(self.call(req)?, RepoCreated)
    }

    pub fn repo_list(&mut self) -> R<Vec<m::RepoInfo>> {
        let r = expect!(
            self.call(Request::RepoList(m::RepoListRequest {}))?,
            RepoList
        )?;
        Ok(r.repositories)
    }

    /// Register a workspace (idempotent for the same id).
    pub fn workspace_register(&mut self, r: m::WorkspaceRegister) -> R<m::WorkspaceInfo> {
        expect!(
            self.call(Request::WorkspaceRegister(r))?,
            WorkspaceRegistered
        )
    }

    pub fn workspace_retire(&mut self, repo: &str, workspace: WorkspaceId) -> R<()> {
        let req = Request::WorkspaceRetire(m::WorkspaceRetire {
            repo: repo.into(),
            workspace,
        });
        expect!(self.call(req)?, WorkspaceRetired).map(|_| ())
    }

    pub fn workspace_list(&mut self, repo: &str) -> R<Vec<m::WorkspaceInfo>> {
        let req = Request::WorkspaceList(m::WorkspaceListRequest { repo: repo.into() });
        Ok(expect!(self.call(req)?, WorkspaceList)?.workspaces)
    }

    /// The subset of `ids` the server lacks (any number; sent in batches).
    pub fn objects_missing(&mut self, repo: &str, ids: &[ObjectId]) -> R<Vec<ObjectId>> {
        let mut out = Vec::new();
        for batch in ids.chunks(MAX_IDS_PER_REQUEST) {
            let req = Request::ObjectsMissing(m::ObjectsMissing {
                repo: repo.into(),
                ids: batch.to_vec(),
            });
            out.extend(expect!(self.call(req)?, ObjectsMissing)?.missing);
        }
        Ok(out)
    }

    pub fn object_put(&mut self, r: m::ObjectPut) -> R<m::ObjectPutReply> {
        expect!(self.call(Request::ObjectPut(r))?, ObjectPut)
    }

    /// One piece of an object to stage (published by the connection's
    /// next publication, see [`Client::objects_publish`]).
    pub fn object_put_staged(&mut self, r: m::ObjectPut) -> R<m::ObjectPutReply> {
        expect!(self.call(Request::ObjectPutStaged(r))?, ObjectPutStaged)
    }

    /// Pin `ids` for the upload intent `operation` of `workspace` (one
    /// transaction per 65,536 ids) and return the ones the server lacks.
    pub fn objects_pin_missing(
        &mut self,
        repo: &str,
        workspace: WorkspaceId,
        operation: OperationId,
        ids: &[ObjectId],
    ) -> R<Vec<ObjectId>> {
        let mut out = Vec::new();
        for batch in ids.chunks(MAX_IDS_PER_REQUEST) {
            let req = Request::ObjectsPinMissing(m::ObjectsPinMissing {
                repo: repo.into(),
                operation,
                workspace,
                ids: batch.to_vec(),
            });
            out.extend(expect!(self.call(req)?, ObjectsPinMissing)?.missing);
        }
        Ok(out)
    }

    /// Publish every object this connection staged, durably; returns how
    /// many were staged since the last publication.
    pub fn objects_publish(&mut self, repo: &str) -> R<u32> {
        let req = Request::ObjectsPublish(m::ObjectsPublish { repo: repo.into() });
        Ok(expect!(self.call(req)?, ObjectsPublished)?.published)
    }

    pub fn object_put_many(&mut self, r: m::ObjectPutMany) -> R<m::ObjectPutManyReply> {
        expect!(self.call(Request::ObjectPutMany(r))?, ObjectPutMany)
    }

    pub fn object_get(&mut self, r: m::ObjectGet) -> R<m::ObjectData> {
        expect!(self.call(Request::ObjectGet(r))?, ObjectData)
    }

    /// Submit; the outcome (accepted or refused) is a successful reply.
    pub fn submit(&mut self, r: m::Submit) -> R<m::Outcome> {
        expect!(self.call(Request::Submit(r))?, Submitted)
    }

    pub fn operation_outcome(
        &mut self,
        repo: &str,
        operation: OperationId,
    ) -> R<Option<m::Outcome>> {
        let req = Request::OperationOutcome(m::OperationOutcome {
            repo: repo.into(),
            operation,
        });
        Ok(expect!(self.call(req)?, OperationOutcome)?.outcome)
    }

    pub fn delta(&mut self, r: m::Delta) -> R<m::DeltaPage> {
        expect!(self.call(Request::Delta(r))?, Delta)
    }

    pub fn list(&mut self, r: m::List) -> R<m::ListPage> {
        expect!(self.call(Request::List(r))?, List)
    }

    pub fn stat(&mut self, r: m::Stat) -> R<m::StatReply> {
        expect!(self.call(Request::Stat(r))?, Stat)
    }

    pub fn history(&mut self, r: m::History) -> R<m::HistoryPage> {
        expect!(self.call(Request::History(r))?, History)
    }

    pub fn log(&mut self, r: m::Log) -> R<m::LogPage> {
        expect!(self.call(Request::Log(r))?, Log)
    }

    pub fn describe(&mut self, r: m::Describe) -> R<m::DescribeReply> {
        expect!(self.call(Request::Describe(r))?, Describe)
    }

    pub fn lock_acquire(&mut self, r: m::LockAcquire) -> R<Vec<m::LockInfo>> {
        Ok(expect!(self.call(Request::LockAcquire(r))?, LocksAcquired)?.locks)
    }

    pub fn lock_release(&mut self, r: m::LockRelease) -> R<Vec<m::LockInfo>> {
        Ok(expect!(self.call(Request::LockRelease(r))?, LocksReleased)?.locks)
    }

    pub fn lock_list(&mut self, r: m::LockList) -> R<m::LockListPage> {
        expect!(self.call(Request::LockList(r))?, LockList)
    }

    /// Offer `objects`, then send each one the server lacks in pieces of at
    /// most 4 MiB under `operation`'s upload pin. A reader is read only when
    /// its object is missing; an object is held in memory while sent (at
    /// most 16 MiB for a chunk).
    pub fn upload_missing<Rd: Read>(
        &mut self,
        repo: &str,
        workspace: WorkspaceId,
        operation: OperationId,
        objects: impl IntoIterator<Item = (ObjectId, Rd)>,
    ) -> R<UploadReport> {
        let objects: Vec<(ObjectId, Rd)> = objects.into_iter().collect();
        let ids: Vec<ObjectId> = objects.iter().map(|(id, _)| *id).collect();
        let missing: std::collections::HashSet<ObjectId> =
            self.objects_missing(repo, &ids)?.into_iter().collect();
        let mut report = UploadReport {
            offered: objects.len(),
            ..UploadReport::default()
        };
        let mut sent = std::collections::HashSet::new();
        let mut group: Vec<m::ObjectPiece> = Vec::new();
        let mut group_bytes = 0usize;
        for (id, reader) in objects {
            if !missing.contains(&id) || !sent.insert(id) {
                continue;
            }
            let limit = max_object_bytes(id.kind);
            let mut data = Vec::new();
            reader
                .take(limit + 1)
                .read_to_end(&mut data)
                .map_err(ClientError::io(format!("reading object {id}")))?;
            if data.len() as u64 > limit {
                return Err(ClientError::Server {
                    code: ErrorCode::LimitExceeded,
                    message: format!("object {id} is larger than {limit} bytes"),
                    paths: Vec::new(),
                });
            }
            report.sent += 1;
            report.bytes += data.len() as u64;
            if data.len() > SMALL_OBJECT_BYTES {
                self.put_object(repo, workspace, operation, id, &data)?;
                continue;
            }
            // Small objects travel together: one pin transaction and one
            // durable publication per group instead of per object.
            if group_bytes + data.len() > MAX_OBJECT_DATA_PER_FRAME as usize
                || group.len() >= MAX_GROUP_OBJECTS
            {
                self.flush_group(repo, workspace, operation, &mut group)?;
                group_bytes = 0;
            }
            group_bytes += data.len();
            group.push(m::ObjectPiece {
                id,
                data: Bytes(data),
            });
        }
        self.flush_group(repo, workspace, operation, &mut group)?;
        Ok(report)
    }

    fn flush_group(
        &mut self,
        repo: &str,
        workspace: WorkspaceId,
        operation: OperationId,
        group: &mut Vec<m::ObjectPiece>,
    ) -> R<()> {
        if group.is_empty() {
            return Ok(());
        }
        self.object_put_many(m::ObjectPutMany {
            repo: repo.into(),
            operation,
            workspace,
            objects: std::mem::take(group),
        })?;
        Ok(())
    }

    /// Send one whole object in pieces of at most 4 MiB.
    pub fn put_object(
        &mut self,
        repo: &str,
        workspace: WorkspaceId,
        operation: OperationId,
        id: ObjectId,
        data: &[u8],
    ) -> R<()> {
        self.put_pieces(repo, workspace, operation, id, data, false)
    }

    /// [`Client::put_object`], staged: the object is verified when complete
    /// and published with the connection's next publication (an explicit
    /// [`Client::objects_publish`], a full stage, or any request other
    /// than staging). Pin it first with [`Client::objects_pin_missing`].
    pub fn put_object_staged(
        &mut self,
        repo: &str,
        workspace: WorkspaceId,
        operation: OperationId,
        id: ObjectId,
        data: &[u8],
    ) -> R<()> {
        self.put_pieces(repo, workspace, operation, id, data, true)
    }

    fn put_pieces(
        &mut self,
        repo: &str,
        workspace: WorkspaceId,
        operation: OperationId,
        id: ObjectId,
        data: &[u8],
        staged: bool,
    ) -> R<()> {
        let total_len = data.len() as u64;
        let mut offset = 0usize;
        loop {
            let end = (offset + MAX_OBJECT_DATA_PER_FRAME as usize).min(data.len());
            let piece = m::ObjectPut {
                repo: repo.into(),
                operation,
                workspace,
                id,
                total_len,
                offset: offset as u64,
                data: Bytes(Vec::new()),
            };
            let reply = self.put_piece(&piece, staged, &data[offset..end])?;
            let reply = if staged {
                expect!(reply, ObjectPutStaged)?
            } else {
                expect!(reply, ObjectPut)?
            };
            if reply.complete {
                return Ok(());
            }
            if reply.received != end as u64 || end == data.len() {
                return Err(ClientError::Protocol(format!(
                    "upload of {id}: the server reports {} bytes received after {end}",
                    reply.received
                )));
            }
            offset = end;
        }
    }

    /// Whole objects in one round trip per 4 MiB of data (`ObjectGetMany`),
    /// each verified against its id. Objects larger than one frame's data
    /// budget are fetched with [`Client::download`]. Results are in the
    /// order of `ids`.
    pub fn download_many(&mut self, repo: &str, ids: &[ObjectId]) -> R<Vec<(ObjectId, Vec<u8>)>> {
        let mut out = Vec::with_capacity(ids.len());
        let mut rest = ids;
        while !rest.is_empty() {
            let ask = &rest[..rest.len().min(m::MAX_IDS_PER_GET_MANY)];
            let reply = expect!(
                self.call(Request::ObjectGetMany(m::ObjectGetMany {
                    repo: repo.into(),
                    ids: ask.to_vec(),
                }))?,
                ObjectGetMany
            )?;
            if reply.objects.len() > ask.len() {
                return Err(ClientError::Protocol(format!(
                    "ObjectGetMany answered {} objects for {} ids",
                    reply.objects.len(),
                    ask.len()
                )));
            }
            let got = reply.objects.len();
            for (piece, want) in reply.objects.into_iter().zip(ask) {
                if piece.id != *want {
                    return Err(ClientError::Protocol(format!(
                        "ObjectGetMany answered {} where {want} was asked",
                        piece.id
                    )));
                }
                let actual =
                    scribe_format::id::object_identity(want.kind, &piece.data.0).map_err(|e| {
                        ClientError::Corrupt {
                            id: *want,
                            detail: e.to_string(),
                        }
                    })?;
                if actual != *want {
                    return Err(ClientError::Corrupt {
                        id: *want,
                        detail: format!("the bytes hash to {actual}"),
                    });
                }
                out.push((*want, piece.data.0));
            }
            rest = &rest[got..];
            if got == 0 {
                // The next object is larger than one reply: ranges.
                let id = rest[0];
                out.push((id, self.download(repo, id)?));
                rest = &rest[1..];
            }
        }
        Ok(out)
    }

    /// Download an object's payload, verifying its identity.
    pub fn download(&mut self, repo: &str, id: ObjectId) -> R<Vec<u8>> {
        let mut out = Vec::new();
        self.download_to(repo, id, &mut out)?;
        Ok(out)
    }

    /// Stream an object's payload into `out` in 4 MiB ranges, verifying
    /// its identity at the end. On [`ClientError::Corrupt`] the bytes
    /// already written must be discarded.
    pub fn download_to(&mut self, repo: &str, id: ObjectId, out: &mut impl Write) -> R<u64> {
        let mut hasher = scribe_format::id::IdentityHasher::new(id.kind);
        let mut offset = 0u64;
        let mut total = None;
        loop {
            let piece = self.object_get(m::ObjectGet {
                repo: repo.into(),
                id,
                offset,
                max_len: MAX_OBJECT_DATA_PER_FRAME,
            })?;
            let t = *total.get_or_insert(piece.total_len);
            if piece.total_len != t || piece.offset != offset {
                return Err(ClientError::Protocol(format!(
                    "download of {id}: inconsistent ranges"
                )));
            }
            if t > max_object_bytes(id.kind).max(1 << 40) {
                return Err(ClientError::Protocol(format!(
                    "object {id} claims {t} bytes"
                )));
            }
            hasher
                .update(&piece.data.0)
                .map_err(|e| ClientError::Corrupt {
                    id,
                    detail: e.to_string(),
                })?;
            out.write_all(&piece.data.0)
                .map_err(ClientError::io(format!("writing object {id}")))?;
            offset += piece.data.0.len() as u64;
            if offset >= t {
                break;
            }
            if piece.data.0.is_empty() {
                return Err(ClientError::Protocol(format!(
                    "download of {id}: empty range before the end"
                )));
            }
        }
        let got = hasher.finish().map_err(|e| ClientError::Corrupt {
            id,
            detail: e.to_string(),
        })?;
        if got != id {
            return Err(ClientError::Corrupt {
                id,
                detail: format!("the bytes hash to {got}"),
            });
        }
        Ok(offset)
    }
}

//! The byte-stream transport: plain TCP or TLS, the 32-byte handshake,
//! then one request frame and one reply frame at a time.
//!
//! Object pieces go out from the caller's buffer (the frame's head, then
//! the data) and object data comes back straight into its own buffer, so
//! a 4 MiB piece is never copied into or out of a frame on a connection
//! without LZ4 frames.

use std::io::{IoSlice, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};

use scribe_format::wire::frame::check_frame_len;
use scribe_format::wire::handshake::{
    self as hs, Authenticated, HandshakeStatus, FLAG_CREDENTIAL, FLAG_LZ4, HANDSHAKE_LEN,
};
use scribe_format::wire::message as m;
use scribe_format::wire::{
    connection::put_request, decode_response, object_data_head, object_put_frame_head,
    object_put_many_frame_parts, read_object_get_many, request_frame, Answer, Bytes, Connection,
    ConnectionKind, FramePart, Hello, Request, Response, StreamedReplyError, TransportError,
    MAX_FRAME_BYTES, OBJECT_DATA_HEAD_LEN,
};

use crate::client::{ClientError, ClientOptions};
use crate::tls::TlsError;

trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// A client TLS stream whose vectored writes reach rustls whole: its
/// `StreamOwned` writes only the first part of each vectored write, so a
/// frame written in parts (an object piece's head and data, the thousands
/// of parts of an `ObjectPutMany`) became a TLS record per part. Through
/// `rustls::Stream` the parts are one plaintext payload, cut into records
/// as rustls's buffer takes them. The bytes sent are the same.
struct TlsStream(rustls::StreamOwned<rustls::ClientConnection, TcpStream>);

impl Read for TlsStream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}

impl Write for TlsStream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize> {
        let s = &mut self.0;
        rustls::Stream::new(&mut s.conn, &mut s.sock).write_vectored(bufs)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// A connection over TCP or TLS.
pub struct TcpConnection {
    stream: Box<dyn Stream>,
    tls: bool,
    lz4: bool,
    broken: bool,
    /// The server's URL, named in every failure.
    url: String,
    /// The timeout of each read and write after the handshake.
    timeout: std::time::Duration,
    /// Who the server serves this connection as, when a credential was
    /// presented.
    principal: Option<Authenticated>,
}

/// The failure of `what` (e.g. "reading the reply to SubmitChange") on
/// the connection to `url`, said as a user needs it: which server, what
/// happened in plain words (closed, cut, silent for `timeout`); the
/// system's own words stay the cause.
fn describe(url: &str, what: &str, timeout: std::time::Duration, e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::UnexpectedEof => {
            format!("lost the connection to {url} while {what}: the server closed it")
        }
        K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe => {
            format!("lost the connection to {url} while {what}: the connection was cut")
        }
        K::TimedOut | K::WouldBlock => {
            format!("no answer from {url} within {} while {what}", secs(timeout))
        }
        K::ConnectionRefused => {
            format!("nothing answers at {url} (connection refused) while {what}")
        }
        _ => format!("{url}: {what}"),
    }
}

fn failed(
    url: &str,
    what: &str,
    timeout: std::time::Duration,
) -> impl FnOnce(std::io::Error) -> TransportError {
    let (url, what) = (url.to_string(), what.to_string());
    move |source| TransportError::Io {
        context: describe(&url, &what, timeout, &source),
        source,
    }
}

fn client_failed(
    url: &str,
    what: &str,
    timeout: std::time::Duration,
) -> impl FnOnce(std::io::Error) -> ClientError {
    let f = failed(url, what, timeout);
    move |e| ClientError::from(f(e))
}

/// A TLS session the server ended over the client certificate (none
/// presented, or one it does not accept): `unauthenticated`, with what to do.
fn credential_refused(url: &str, e: &std::io::Error) -> Option<ClientError> {
    use rustls::AlertDescription as A;
    let alert = match e.get_ref()?.downcast_ref::<rustls::Error>()? {
        rustls::Error::AlertReceived(a) => *a,
        _ => return None,
    };
    let why = match alert {
        A::CertificateRequired => "it requires a credential and none was presented",
        A::BadCertificate | A::UnsupportedCertificate | A::UnknownCA | A::AccessDenied => {
            "it does not accept the credential presented"
        }
        A::CertificateExpired => "the credential presented has expired",
        A::CertificateRevoked => "the credential presented is revoked",
        _ => return None,
    };
    Some(ClientError::Server {
        code: scribe_format::ErrorCode::Unauthenticated,
        message: format!("{url} refused the connection: {why} ({alert:?})"),
        paths: Vec::new(),
    })
}

fn secs(d: std::time::Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

impl TcpConnection {
    /// Connect to `host:port`, with TLS when `tls`, and shake hands.
    pub fn open(
        url: &str,
        host: &str,
        port: u16,
        tls: bool,
        opts: &ClientOptions,
    ) -> Result<TcpConnection, ClientError> {
        let addrs: Vec<_> = (host, port)
            .to_socket_addrs()
            .map_err(ClientError::io(format!("{url}: cannot resolve {host}")))?
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
                return Err(client_failed(url, "connecting", opts.connect_timeout)(e));
            }
            (None, None) => {
                return Err(ClientError::Url {
                    url: url.to_string(),
                    reason: "the host has no address".into(),
                })
            }
        };
        // The handshake gets the connect timeout: a listener that accepts
        // and never answers (or a service that is not Scribe) fails fast.
        let setup = || client_failed(url, "setting up the connection", opts.connect_timeout);
        sock.set_read_timeout(Some(opts.connect_timeout))
            .map_err(setup())?;
        sock.set_write_timeout(Some(opts.connect_timeout))
            .map_err(setup())?;
        let timeouts = sock.try_clone().map_err(setup())?;
        let _ = sock.set_nodelay(true);
        let stream: Box<dyn Stream> = if tls {
            let ca = opts.ca_file.as_ref().ok_or_else(|| ClientError::Url {
                url: url.to_string(),
                reason: "scribes:// needs the CA certificate that signed the server's: set \
                         SCRIBE_CA_FILE to its PEM file (on a team server, `scribe login` \
                         stores the auth service's CA, which signs it)"
                    .into(),
            })?;
            let cfg = crate::tls::client_config_with(ca, opts.tls_credential.as_ref())?;
            let name = rustls::pki_types::ServerName::try_from(host.to_string()).map_err(|_| {
                ClientError::Url {
                    url: url.to_string(),
                    reason: "the host is not a valid TLS server name".into(),
                }
            })?;
            let conn = rustls::ClientConnection::new(cfg, name).map_err(TlsError::from)?;
            Box::new(TlsStream(rustls::StreamOwned::new(conn, sock)))
        } else {
            Box::new(sock)
        };
        let mut conn = Self::handshake(stream, tls, opts, url)?;
        timeouts
            .set_read_timeout(Some(opts.timeout))
            .and_then(|_| timeouts.set_write_timeout(Some(opts.timeout)))
            .map_err(setup())?;
        conn.timeout = opts.timeout;
        Ok(conn)
    }

    fn handshake(
        mut stream: Box<dyn Stream>,
        tls: bool,
        opts: &ClientOptions,
        url: &str,
    ) -> Result<TcpConnection, ClientError> {
        let (lz4, credential) = (opts.lz4, opts.credential.as_deref());
        let failed = |what: &str| client_failed(url, what, opts.connect_timeout);
        let hello = match credential {
            Some(_) => Hello::new(lz4).with_credential(),
            None => Hello::new(lz4),
        };
        stream
            .write_all(&hello.encode())
            .and_then(|_| stream.flush())
            .map_err(failed("sending the hello"))?;
        let mut buf = [0u8; HANDSHAKE_LEN];
        stream.read_exact(&mut buf).map_err(|e| {
            credential_refused(url, &e)
                .unwrap_or_else(|| failed("waiting for the answer to the hello")(e))
        })?;
        let answer = Answer::decode(&buf).map_err(|e| {
            ClientError::Protocol(format!(
                "{url}: the answer to the hello is not Scribe's (is this a Scribe server?): {e}"
            ))
        })?;
        if answer.status != HandshakeStatus::Accepted {
            return Err(ClientError::Handshake {
                status: answer.status,
                server_schema: answer.schema,
            });
        }
        let lz4 = lz4 && answer.flags & FLAG_LZ4 != 0;
        let principal = match credential {
            None => None,
            Some(c) => {
                if answer.flags & FLAG_CREDENTIAL == 0 {
                    return Err(ClientError::Protocol(
                        "the server accepted the hello without granting the credential slot".into(),
                    ));
                }
                Some(Self::present(&mut *stream, c, lz4, &failed)?)
            }
        };
        Ok(TcpConnection {
            stream,
            tls,
            lz4,
            broken: false,
            url: url.to_string(),
            timeout: opts.connect_timeout,
            principal,
        })
    }

    /// Send the credential frame and read the server's acknowledgement
    /// (or the error it closes with).
    fn present<F: FnOnce(std::io::Error) -> ClientError>(
        stream: &mut dyn Stream,
        credential: &[u8],
        lz4: bool,
        failed: &dyn Fn(&str) -> F,
    ) -> Result<Authenticated, ClientError> {
        let frame = hs::credential_frame(credential)
            .map_err(|e| ClientError::Protocol(format!("credential: {e}")))?;
        stream
            .write_all(&frame)
            .and_then(|_| stream.flush())
            .map_err(failed("sending the credential"))?;
        let reading = || failed("reading the credential reply");
        let mut len = [0u8; 4];
        stream.read_exact(&mut len).map_err(reading())?;
        let n = check_frame_len(len).map_err(|e| ClientError::Protocol(e.to_string()))?;
        let mut body = vec![0u8; n];
        stream.read_exact(&mut body).map_err(reading())?;
        match hs::decode_credential_reply(&body, lz4)
            .map_err(|e| ClientError::Protocol(format!("credential reply: {e}")))?
        {
            Ok(who) => Ok(who),
            Err(e) => Err(ClientError::Server {
                code: e.error_code(),
                message: e.shown_message(),
                paths: e.paths,
            }),
        }
    }

    /// Who the server serves this connection as (after a credential).
    pub fn principal(&self) -> Option<&Authenticated> {
        self.principal.as_ref()
    }

    /// Send one request frame given as two consecutive parts and read its
    /// reply. A failure marks the connection broken: the exchange may be
    /// half done, so nothing more is sent on it.
    fn send(&mut self, head: &[u8], tail: &[u8], name: &str) -> Result<Response, TransportError> {
        self.send_parts(&mut [IoSlice::new(head), IoSlice::new(tail)], name)
    }

    /// Write a frame given as `parts` (in order) and read its reply.
    fn send_parts(
        &mut self,
        parts: &mut [IoSlice<'_>],
        name: &str,
    ) -> Result<Response, TransportError> {
        if self.broken {
            return Err(TransportError::Broken);
        }
        let r = self.exchange_parts(parts, name);
        self.broken = r.is_err();
        r
    }

    fn exchange_parts(
        &mut self,
        parts: &mut [IoSlice<'_>],
        name: &str,
    ) -> Result<Response, TransportError> {
        write_parts(&mut *self.stream, parts)
            .and_then(|_| self.stream.flush())
            .map_err(failed(&self.url, &format!("sending {name}"), self.timeout))?;
        let (url, timeout) = (self.url.clone(), self.timeout);
        let reading = || failed(&url, &format!("reading the reply to {name}"), timeout);
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).map_err(reading())?;
        let n = check_frame_len(len).map_err(|e| TransportError::Protocol(e.to_string()))?;
        // Object bytes are read straight into their own buffer.
        let k = n.min(OBJECT_DATA_HEAD_LEN);
        let mut body = vec![0u8; k];
        self.stream.read_exact(&mut body).map_err(reading())?;
        if let Some(mut reply) = object_data_head(&body, n) {
            let want = n - k;
            let mut data = Vec::new();
            data.try_reserve_exact(want).map_err(|_| {
                TransportError::Protocol(format!("cannot buffer a reply of {n} bytes"))
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
        // Whole objects, each read straight into its own buffer.
        if let Some(got) = read_object_get_many(&body, n, &mut *self.stream) {
            return match got {
                Ok(reply) => Ok(Response::ObjectGetMany(reply)),
                Err(StreamedReplyError::Io(e)) => Err(reading()(e)),
                Err(StreamedReplyError::Format(e)) => Err(TransportError::Protocol(e.to_string())),
            };
        }
        body.resize(n, 0);
        self.stream.read_exact(&mut body[k..]).map_err(reading())?;
        decode_response(&body, self.lz4).map_err(|e| TransportError::Protocol(e.to_string()))
    }
}

impl Connection for TcpConnection {
    fn call(&mut self, request: Request) -> Result<Response, TransportError> {
        let name = request.name();
        match &request {
            // An object piece over a plain connection goes out from its
            // own buffer: no copy into a frame.
            Request::ObjectPut(p) | Request::ObjectPutStaged(p) if !self.lz4 => {
                let staged = matches!(request, Request::ObjectPutStaged(_));
                let head = object_put_frame_head(p, staged, p.data.0.len());
                self.send(&head, &p.data.0, name)
            }
            _ => self.send(&request_frame(&request, self.lz4), &[], name),
        }
    }

    fn put_piece(
        &mut self,
        head: &m::ObjectPut,
        staged: bool,
        data: &[u8],
    ) -> Result<Response, TransportError> {
        if self.lz4 {
            // An LZ4 frame compresses the whole payload: build it.
            return self.call(put_request(head, staged, data));
        }
        let name = if staged {
            "ObjectPutStaged"
        } else {
            "ObjectPut"
        };
        let frame_head = object_put_frame_head(head, staged, data.len());
        self.send(&frame_head, data, name)
    }

    fn put_many(&mut self, put: m::ObjectPutMany) -> Result<Response, TransportError> {
        // The objects' data go out from their own buffers: no copy into
        // a payload and then into a frame.
        let data: usize = put.objects.iter().map(|o| o.data.0.len()).sum();
        if self.lz4 || data > MAX_FRAME_BYTES as usize {
            return self.call(Request::ObjectPutMany(put));
        }
        // Only empty data is "inlined": every object's bytes are its own part.
        let parts = object_put_many_frame_parts(&put, 1);
        let mut slices: Vec<IoSlice<'_>> = parts
            .iter()
            .map(|p| match p {
                FramePart::Head(h) => IoSlice::new(h),
                FramePart::Data(n) => IoSlice::new(&put.objects[*n].data.0),
            })
            .collect();
        self.send_parts(&mut slices, "ObjectPutMany")
    }

    fn broken(&self) -> bool {
        self.broken
    }

    fn kind(&self) -> ConnectionKind {
        ConnectionKind::Stream {
            tls: self.tls,
            lz4: self.lz4,
        }
    }
}

/// Write `parts` in order with as few system calls as the stream takes.
fn write_parts(w: &mut dyn Write, parts: &mut [IoSlice<'_>]) -> std::io::Result<()> {
    use std::io::ErrorKind;
    let mut bufs = parts;
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

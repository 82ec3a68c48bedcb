//! A raw protocol client: the handshake and one frame each way, written
//! with `scribe_format::wire` and nothing of the client library, so that
//! the server's tests can speak the protocol without depending on
//! `scribe-client` (and can send what no well-behaved client would).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use scribe_format::wire::frame::check_frame_len;
use scribe_format::wire::handshake::{
    self as hs, Authenticated, HandshakeStatus, FLAG_LZ4, HANDSHAKE_LEN,
};
use scribe_format::wire::{
    decode_response, request_frame, Answer, Connection, ConnectionKind, ErrorReply, Hello, Request,
    Response, TransportError,
};

/// A TLS stream of a [`Wire`].
pub type TlsStream = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// How long a read or write may block before the test fails instead of
/// hanging.
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// A connection that has shaken hands, over plain TCP or TLS. The stream
/// is public so a test can write bytes of its own or watch it close.
pub struct Wire<S> {
    pub stream: S,
    lz4: bool,
    tls: bool,
}

/// A TCP socket to `addr` with the test timeouts.
pub fn socket(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    s.set_write_timeout(Some(IO_TIMEOUT)).expect("timeout");
    s
}

/// A TLS client stream over `sock` to server name `host`, trusting
/// `config`'s roots; the TLS handshake runs with the first exchange.
pub fn tls_stream(
    sock: TcpStream,
    config: std::sync::Arc<rustls::ClientConfig>,
    host: &str,
) -> TlsStream {
    let name = rustls::pki_types::ServerName::try_from(host.to_string()).expect("server name");
    let conn = rustls::ClientConnection::new(config, name).expect("TLS client");
    rustls::StreamOwned::new(conn, sock)
}

/// A plain connection to `addr` without LZ4 or a credential.
pub fn tcp(addr: SocketAddr) -> Wire<TcpStream> {
    Wire::hello(socket(addr), &Hello::new(false)).0
}

/// A TLS connection to `addr` as server name `host` (`localhost` or
/// `127.0.0.1` for the test PKI), trusting `config`.
pub fn tls(
    addr: SocketAddr,
    config: std::sync::Arc<rustls::ClientConfig>,
    host: &str,
) -> Wire<TlsStream> {
    let mut w = Wire::hello(tls_stream(socket(addr), config, host), &Hello::new(false)).0;
    w.tls = true;
    w
}

/// The body of the next frame on `s` (after its length word).
pub fn read_frame_body(s: &mut impl Read) -> Vec<u8> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("frame length");
    let n = check_frame_len(len).expect("frame length within the limit");
    let mut body = vec![0u8; n];
    s.read_exact(&mut body).expect("frame body");
    body
}

/// The peer closed: the next read returns end of file (or a reset).
pub fn closed(s: &mut impl Read) -> bool {
    let mut b = [0u8; 1];
    !matches!(s.read(&mut b), Ok(n) if n > 0)
}

impl<S: Read + Write> Wire<S> {
    /// Send `hello` on `stream`; the answer must accept it.
    pub fn hello(mut stream: S, hello: &Hello) -> (Wire<S>, Answer) {
        stream.write_all(&hello.encode()).expect("send the hello");
        stream.flush().expect("flush");
        let mut buf = [0u8; HANDSHAKE_LEN];
        stream.read_exact(&mut buf).expect("the handshake answer");
        let answer = Answer::decode(&buf).expect("a well-formed answer");
        assert_eq!(answer.status, HandshakeStatus::Accepted, "{answer:?}");
        let lz4 = hello.flags & answer.flags & FLAG_LZ4 != 0;
        (
            Wire {
                stream,
                lz4,
                tls: false,
            },
            answer,
        )
    }

    /// Send a credential frame built from `credential`; the server's answer.
    pub fn present(&mut self, credential: &[u8]) -> Result<Authenticated, ErrorReply> {
        self.stream
            .write_all(&hs::credential_frame(credential).expect("credential frame"))
            .and_then(|_| self.stream.flush())
            .expect("send the credential");
        self.credential_reply()
    }

    /// The server's reply to a credential frame.
    pub fn credential_reply(&mut self) -> Result<Authenticated, ErrorReply> {
        let body = read_frame_body(&mut self.stream);
        hs::decode_credential_reply(&body, self.lz4).expect("a well-formed credential reply")
    }

    /// Send `request` and return its reply (which may be an error reply);
    /// a transport failure fails the test.
    pub fn call(&mut self, request: Request) -> Response {
        let name = request.name();
        self.try_call(request)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    /// Send `request` and return its reply or the transport's failure.
    pub fn try_call(&mut self, request: Request) -> Result<Response, TransportError> {
        let io = |context: &str| {
            let context = format!("{context} {}", request.name());
            move |source| TransportError::Io { context, source }
        };
        self.stream
            .write_all(&request_frame(&request, self.lz4))
            .and_then(|_| self.stream.flush())
            .map_err(io("sending"))?;
        let mut len = [0u8; 4];
        self.stream
            .read_exact(&mut len)
            .map_err(io("reading the reply to"))?;
        let n = check_frame_len(len).map_err(|e| TransportError::Protocol(e.to_string()))?;
        let mut body = vec![0u8; n];
        self.stream
            .read_exact(&mut body)
            .map_err(io("reading the reply to"))?;
        decode_response(&body, self.lz4).map_err(|e| TransportError::Protocol(e.to_string()))
    }
}

impl<S: Read + Write + Send> Connection for Wire<S> {
    fn call(&mut self, request: Request) -> Result<Response, TransportError> {
        self.try_call(request)
    }

    fn kind(&self) -> ConnectionKind {
        ConnectionKind::Stream {
            tls: self.tls,
            lz4: self.lz4,
        }
    }
}

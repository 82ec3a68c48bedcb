//! The connection protocol over any byte stream (TCP or TLS): the 32-byte
//! handshake, the credential frame when the hello announced one, one
//! authentication of the connection, then one request frame and one reply
//! frame at a time.
//!
//! Fail closed: a hello that is not one is answered with status 3, an
//! unknown handshake version or schema with status 1 or 2, and the
//! connection closes. A credential frame that is too long
//! (`limit_exceeded`), does not decode (`malformed`) or does not arrive
//! within the handshake timeout, and an authentication the authorizer
//! refuses (its code: `forbidden`, `auth_unavailable`), end the connection
//! (after an error frame, except for the timeout) before any request is
//! read. After that a frame whose length word is
//! beyond [`MAX_FRAME_BYTES`] is refused before any of its body is read
//! (`limit_exceeded`); a body that does not decode, an unknown opcode or
//! trailing bytes get `malformed`; either error reply is followed by the
//! close. Every read and write has a timeout, so a slow or dead peer only
//! holds its own connection; each connection buffers at most one frame
//! each way plus its session's one object.

use std::sync::Arc;
use std::time::Duration;

use scribe_format::wire::frame::check_frame_len;
use scribe_format::wire::handshake::{
    authenticated_frame, check_credential_frame_len, decode_credential_frame, HandshakeStatus,
    FLAG_CREDENTIAL, FLAG_LZ4, HANDSHAKE_LEN,
};
use scribe_format::wire::{
    decode_request, object_data_frame_head, object_get_many_frame_parts, object_put_head,
    object_put_many_view, response_frame, Answer, ErrorReply, FramePart, Hello, ObjectPutManyView,
    Request, Response, MAX_FRAME_BYTES,
};
use scribe_format::ErrorCode;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;
use tokio::time::timeout;

use crate::service::{Credential, PeerInfo, Principal, Service, Session};

/// Frame buffers up to this size are kept for the connection's next frame.
const REUSED_FRAME_BUFFER: usize = 16 << 20;
/// Bytes read first from each frame: enough for an object piece's head
/// (a longer head, with a very long repository name, takes the whole-frame
/// path).
const HEAD_PEEK: usize = 4096;

/// Timeouts of one connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// For the 32-byte hello (the wire format fixes 10 s).
    pub handshake: Duration,
    /// Between requests; an idle connection is closed after this.
    pub idle: Duration,
    /// From the end of the handshake (and authentication) to the first
    /// request: a connection that has asked nothing yet is closed after
    /// this, much sooner than [`Timeouts::idle`], so idle handshaken
    /// connections cannot hold the connection slots.
    pub first_request: Duration,
    /// Between requests while the connection holds upload memory (an
    /// unfinished object or unpublished staged objects): closed after
    /// this, releasing its share of the upload budget.
    pub upload_idle: Duration,
    /// For the rest of a frame once its length word has arrived.
    pub frame: Duration,
    /// For writing one reply.
    pub write: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            handshake: Duration::from_secs(10),
            idle: Duration::from_secs(600),
            first_request: Duration::from_secs(10),
            upload_idle: Duration::from_secs(60),
            frame: Duration::from_secs(60),
            write: Duration::from_secs(60),
        }
    }
}

/// How a connection ended (logged by the listener).
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// The peer closed between requests.
    Closed,
    /// The server is shutting down.
    Shutdown,
    /// The handshake was refused with this status.
    Refused(HandshakeStatus),
    /// A frame was refused; an error reply was sent.
    BadFrame(String),
    /// The authorizer refused the connection; an error reply was sent.
    Unauthenticated(String),
    /// A read or write timed out or failed.
    Io(String),
}

async fn write_all<S: AsyncWrite + Unpin>(
    s: &mut S,
    bytes: &[u8],
    t: Duration,
) -> Result<(), Ended> {
    write_parts(s, bytes, &[], t).await
}

async fn refuse<S: AsyncWrite + Unpin>(
    s: &mut S,
    code: ErrorCode,
    message: String,
    lz4: bool,
    t: Duration,
) -> Ended {
    send_error_and_close(s, code, &message, lz4, t).await;
    Ended::BadFrame(message)
}

async fn send_error_and_close<S: AsyncWrite + Unpin>(
    s: &mut S,
    code: ErrorCode,
    message: &str,
    lz4: bool,
    t: Duration,
) {
    let frame = response_frame(&Response::Error(ErrorReply::new(code, message)), lz4);
    let _ = write_all(s, &frame, t).await;
    let _ = s.shutdown().await;
}

/// Why the credential frame was not read.
enum CredentialRead {
    /// Refuse with this code and message (an error frame, then close).
    Refuse(ErrorCode, String),
    /// The connection ended without a frame to answer.
    Ended(Ended),
}

/// Read the one credential frame that follows a granted
/// [`FLAG_CREDENTIAL`], within the handshake timeout: the length word is
/// checked before the body is read.
async fn read_credential<S: AsyncRead + Unpin>(
    stream: &mut S,
    t: Duration,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<Vec<u8>, CredentialRead> {
    let read = async {
        let mut len_word = [0u8; 4];
        stream.read_exact(&mut len_word).await?;
        let len = match check_credential_frame_len(len_word) {
            Ok(len) => len,
            Err(e) => return Ok(Err((e.code(), format!("credential frame refused: {e}")))),
        };
        let mut body = vec![0u8; len];
        stream.read_exact(&mut body).await?;
        Ok::<_, std::io::Error>(
            decode_credential_frame(&body)
                .map_err(|e| (e.code(), format!("malformed credential frame: {e}"))),
        )
    };
    let ended = |why: String| Err(CredentialRead::Ended(Ended::Io(why)));
    tokio::select! {
        _ = shutdown.changed() => Err(CredentialRead::Ended(Ended::Shutdown)),
        r = timeout(t, read) => match r {
            Ok(Ok(Ok(credential))) => Ok(credential),
            Ok(Ok(Err((code, message)))) => Err(CredentialRead::Refuse(code, message)),
            Ok(Err(e)) => ended(format!("reading the credential frame: {e}")),
            Err(_) => ended("no credential frame within the handshake timeout".into()),
        },
    }
}

/// Serve one connection from `peer` until it ends. `shutdown` turning true
/// closes it between requests; a request already being handled finishes
/// first. A connection that is not admitted (`admit` is the reason: the
/// server is at its connection limit, or at its limit for the peer's
/// address) completes the handshake (and sends its credential frame, if
/// any), gets a `server_busy` error frame with that reason, and closes.
/// Otherwise the service authenticates it once ([`Service::authenticate`])
/// and every request is served as that principal.
pub async fn serve_connection<S>(
    mut stream: S,
    service: Arc<Service>,
    timeouts: Timeouts,
    mut shutdown: watch::Receiver<bool>,
    admit: Result<(), String>,
    peer: PeerInfo,
) -> Ended
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    let _guard = service.connection_guard();
    let mut hello = [0u8; HANDSHAKE_LEN];
    tokio::select! {
        _ = shutdown.changed() => return Ended::Shutdown,
        r = timeout(timeouts.handshake, stream.read_exact(&mut hello)) => match r {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Ended::Io(format!("reading the hello: {e}")),
            Err(_) => return Ended::Io("no hello within the handshake timeout".into()),
        },
    }
    let answer = match Hello::decode(&hello) {
        Ok(h) => h.answer(),
        Err(_) => Answer::malformed(),
    };
    if let Err(e) = write_all(&mut stream, &answer.encode(), timeouts.write).await {
        return e;
    }
    if answer.status != HandshakeStatus::Accepted {
        let _ = stream.shutdown().await;
        return Ended::Refused(answer.status);
    }
    let lz4 = answer.flags & FLAG_LZ4 != 0;
    // The credential frame is read even from a connection about to be
    // refused, so the refusal is not lost to a reset over unread bytes.
    let credential = if answer.flags & FLAG_CREDENTIAL != 0 {
        match read_credential(&mut stream, timeouts.handshake, &mut shutdown).await {
            Ok(c) => Credential::Presented(c),
            Err(CredentialRead::Refuse(code, message)) => {
                return refuse(&mut stream, code, message, lz4, timeouts.write).await
            }
            Err(CredentialRead::Ended(e)) => return e,
        }
    } else {
        Credential::None
    };
    if let Err(why) = admit {
        return refuse(&mut stream, ErrorCode::ServerBusy, why, lz4, timeouts.write).await;
    }
    let presented = credential != Credential::None;
    let principal = match authenticate(&service, credential, peer).await {
        Ok(p) => p,
        Err((code, message)) => {
            send_error_and_close(&mut stream, code, &message, lz4, timeouts.write).await;
            return Ended::Unauthenticated(message);
        }
    };
    if presented {
        let ack = authenticated_frame(&principal.to_wire(), lz4);
        if let Err(e) = write_all(&mut stream, &ack, timeouts.write).await {
            return e;
        }
    }
    let mut session = Some(Session::for_principal(principal.clone()));
    // One frame buffer per connection, reused (a fresh 4 MiB buffer per
    // upload piece costs a page fault per 4 KiB).
    let mut body: Vec<u8> = Vec::new();
    let mut first = true;
    loop {
        if *shutdown.borrow() {
            return Ended::Shutdown;
        }
        let (wait, why) = if first {
            (
                timeouts.first_request,
                "no request within the first-request timeout",
            )
        } else if session.as_ref().is_some_and(Session::holds_upload) {
            (timeouts.upload_idle, "upload idle timeout")
        } else {
            (timeouts.idle, "idle timeout")
        };
        first = false;
        let mut len_word = [0u8; 4];
        tokio::select! {
            _ = shutdown.changed() => return Ended::Shutdown,
            r = timeout(wait, stream.read_exact(&mut len_word)) => match r {
                Ok(Ok(_)) => {}
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ended::Closed,
                Ok(Err(e)) => return Ended::Io(e.to_string()),
                Err(_) => return Ended::Io(why.into()),
            },
        }
        let len = match check_frame_len(len_word) {
            Ok(len) => len,
            Err(e) => {
                let code = if u32::from_le_bytes(len_word) > MAX_FRAME_BYTES {
                    ErrorCode::LimitExceeded
                } else {
                    ErrorCode::Malformed
                };
                return refuse(
                    &mut stream,
                    code,
                    format!("frame refused: {e}"),
                    lz4,
                    timeouts.write,
                )
                .await;
            }
        };
        // The first bytes tell an object piece, whose data is then read
        // straight into the object's own buffer (not copied out of the
        // frame); any other frame is read whole and decoded.
        let peek = len.min(HEAD_PEEK);
        body.resize(peek, 0);
        let read = timeout(timeouts.frame, async {
            stream.read_exact(&mut body[..peek]).await?;
            if let Some(head) = object_put_head(&body[..peek], len) {
                let want = len - head.data_offset;
                let mut data = Vec::new();
                data.try_reserve_exact(want)
                    .map_err(|_| std::io::Error::other("cannot buffer the piece now"))?;
                data.extend_from_slice(&body[head.data_offset..peek]);
                let mut rest = (&mut stream).take((want - data.len()) as u64);
                while data.len() < want {
                    if rest.read_buf(&mut data).await? == 0 {
                        return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
                    }
                }
                return Ok(Some(head.into_request(data)));
            }
            // Reserved, not zero-filled: a peer that announces a large
            // frame and stalls holds only the memory its bytes fill.
            body.truncate(peek);
            body.reserve(len - peek);
            let mut rest = (&mut stream).take((len - peek) as u64);
            while body.len() < len {
                if rest.read_buf(&mut body).await? == 0 {
                    return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
                }
            }
            Ok::<_, std::io::Error>(None)
        })
        .await;
        // A frame of small objects is served where it lies: each object's
        // data a range of `body`, not a copy in a fresh allocation.
        let decoded = match read {
            Ok(Ok(Some(request))) => Ok(Incoming::Request(request)),
            Ok(Ok(None)) => match object_put_many_view(&body[..len]) {
                Some(view) => view.map(Incoming::PutMany),
                None => decode_request(&body[..len], lz4).map(Incoming::Request),
            },
            Ok(Err(e)) => return Ended::Io(format!("frame of {len} bytes cut short: {e}")),
            Err(_) => return Ended::Io("frame body timed out".into()),
        };
        let incoming = match decoded {
            Ok(r) => r,
            Err(e) => {
                return refuse(
                    &mut stream,
                    ErrorCode::Malformed,
                    format!("malformed request: {e}"),
                    lz4,
                    timeouts.write,
                )
                .await
            }
        };
        let svc = service.clone();
        let mut s = session
            .take()
            .unwrap_or_else(|| Session::for_principal(principal.clone()));
        s.zero_copy = !lz4;
        // Handled on this worker thread, which the runtime replaces for the
        // other connections meanwhile (`block_in_place`): no hand-off to a
        // blocking thread and back on the way of every reply.
        let joined = tokio::task::block_in_place(move || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let reply = match incoming {
                    Incoming::Request(request) => svc.handle(&mut s, request),
                    Incoming::PutMany(view) => svc.handle_put_many(&mut s, view),
                };
                let outgoing = s.outgoing.take();
                let pieces = std::mem::take(&mut s.outgoing_pieces);
                (s, reply, outgoing, pieces)
            }))
        });
        let (reply, outgoing, pieces) = match joined {
            Ok((s, reply, outgoing, pieces)) => {
                session = Some(s);
                (reply, outgoing, pieces)
            }
            Err(e) => {
                let e = e
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| e.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".into());
                session = Some(Session::for_principal(principal.clone()));
                (
                    Response::Error(ErrorReply::new(
                        ErrorCode::Internal,
                        format!("request failed: {e}"),
                    )),
                    None,
                    Vec::new(),
                )
            }
        };
        if body.capacity() > REUSED_FRAME_BUFFER {
            body = Vec::new();
        }
        // A reply with a field longer than the wire carries is never cut
        // short on the way: the client gets an error naming the field.
        let reply = match reply.check() {
            Ok(()) => reply,
            Err(e) => Response::Error(ErrorReply::new(
                ErrorCode::Internal,
                format!("the reply cannot be sent: {e}"),
            )),
        };
        // Object bytes go out from the reply's own buffer, not copied
        // into a frame.
        let sent = match (&reply, outgoing) {
            // Verified bytes from the tier, by reference.
            (Response::ObjectData(d), Some(bytes)) if !lz4 && d.data.0.is_empty() => {
                let head = object_data_frame_head(d, bytes.len());
                write_parts(&mut stream, &head, &bytes, timeouts.write).await
            }
            (Response::ObjectData(d), _) if !lz4 => {
                let head = object_data_frame_head(d, d.data.0.len());
                write_parts(&mut stream, &head, &d.data.0, timeouts.write).await
            }
            // Whole objects by reference (the reply's own list is empty).
            (Response::ObjectGetMany(r), _)
                if !lz4 && r.objects.is_empty() && !pieces.is_empty() =>
            {
                write_pieces(&mut stream, &pieces, timeouts.write).await
            }
            _ => write_all(&mut stream, &response_frame(&reply, lz4), timeouts.write).await,
        };
        if let Err(e) = sent {
            return e;
        }
    }
}

/// A request as read from its frame.
enum Incoming<'a> {
    Request(Request),
    /// An uncompressed `ObjectPutMany`, its objects' data in the frame.
    PutMany(ObjectPutManyView<'a>),
}

/// The principal of a connection, from the authorizer on a blocking thread
/// (it may wait on an auth service); a refusal is its code and message.
async fn authenticate(
    service: &Arc<Service>,
    credential: Credential,
    peer: PeerInfo,
) -> Result<Principal, (ErrorCode, String)> {
    let svc = service.clone();
    match tokio::task::spawn_blocking(move || svc.authenticate(&credential, &peer)).await {
        Ok(Ok(p)) => Ok(p),
        Ok(Err(f)) => Err((f.code, f.message)),
        Err(e) => Err((ErrorCode::Internal, format!("authentication failed: {e}"))),
    }
}

/// Objects smaller than this go into an `ObjectGetMany` reply's head
/// buffer (one write for many small files); larger ones are written
/// from their own buffers.
const INLINE_PIECE_BELOW: usize = 64 << 10;

/// Write the `ObjectGetMany` reply frame holding `pieces` and flush,
/// within `t`.
async fn write_pieces<S: AsyncWrite + Unpin>(
    s: &mut S,
    pieces: &[(scribe_format::ObjectId, bytes::Bytes)],
    t: Duration,
) -> Result<(), Ended> {
    let refs: Vec<(scribe_format::ObjectId, &[u8])> =
        pieces.iter().map(|(id, b)| (*id, b.as_ref())).collect();
    let parts = object_get_many_frame_parts(&refs, INLINE_PIECE_BELOW);
    match timeout(t, async {
        for p in &parts {
            match p {
                FramePart::Head(h) => s.write_all(h).await?,
                FramePart::Data(n) => s.write_all(refs[*n].1).await?,
            }
        }
        s.flush().await
    })
    .await
    {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(Ended::Io(e.to_string())),
        Err(_) => Err(Ended::Io("write timed out".into())),
    }
}

/// Write `head` then `tail` and flush, within `t`.
async fn write_parts<S: AsyncWrite + Unpin>(
    s: &mut S,
    head: &[u8],
    tail: &[u8],
    t: Duration,
) -> Result<(), Ended> {
    match timeout(t, async {
        s.write_all(head).await?;
        s.write_all(tail).await?;
        s.flush().await
    })
    .await
    {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(Ended::Io(e.to_string())),
        Err(_) => Err(Ended::Io("write timed out".into())),
    }
}

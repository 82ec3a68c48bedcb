//! The one seam between a client and any transport: [`Connection`].
//!
//! A connection carries one request and then its one reply, in order. It
//! knows nothing of what the messages mean: an error reply is a reply like
//! any other (the client library turns it into its error), and only a
//! failure of the transport itself is a [`TransportError`]. Object pieces
//! have their own entry point so a byte-stream transport can write an
//! object's bytes from the caller's buffer instead of copying them into a
//! frame.
//!
//! Two implementations exist: the TCP/TLS one in `scribe-client` and the
//! in-process one in `scribe-server` (for path URLs). Living here, below
//! both, neither crate has to import the other's upper layer.

use super::codec::Bytes;
use super::message::{ObjectPut, ObjectPutMany, Request, Response};

/// How a [`Connection`] reaches its service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectionKind {
    /// The service runs in this process (a data-root path URL).
    InProcess,
    /// A byte stream: plain TCP or TLS, with or without LZ4 frames.
    Stream { tls: bool, lz4: bool },
}

/// A transport failure: the request may or may not have been handled, and
/// nothing more may be sent on the connection.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// Reading or writing the stream failed (including timeouts).
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// The peer sent bytes that are not a frame of this protocol.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// An earlier exchange on this connection failed half way.
    #[error("the connection failed earlier; reconnect")]
    Broken,
}

/// One connection to a Scribe service.
pub trait Connection: Send {
    /// Send `request` and return the reply, which may be an error reply.
    fn call(&mut self, request: Request) -> Result<Response, TransportError>;

    /// Send one piece of an object (`ObjectPutStaged` when `staged`) whose
    /// data is `data`; `head.data` is ignored. The default builds the
    /// request with a copy of `data`.
    fn put_piece(
        &mut self,
        head: &ObjectPut,
        staged: bool,
        data: &[u8],
    ) -> Result<Response, TransportError> {
        self.call(put_request(head, staged, data))
    }

    /// Send the small objects of `put` in one `ObjectPutMany`. The
    /// default makes it a request; a stream transport writes the objects'
    /// data from where it lies ([`super::object_put_many_frame_parts`]).
    fn put_many(&mut self, put: ObjectPutMany) -> Result<Response, TransportError> {
        self.call(Request::ObjectPutMany(put))
    }

    /// What kind of transport this is.
    fn kind(&self) -> ConnectionKind;

    /// Whether an exchange failed half way, so that nothing more can be
    /// sent on this connection (every call answers
    /// [`TransportError::Broken`]): its owner connects again instead.
    fn broken(&self) -> bool {
        false
    }
}

/// The `ObjectPut` (or `ObjectPutStaged`) request for one piece: `head`
/// with `data` copied in (`head.data` is ignored).
pub fn put_request(head: &ObjectPut, staged: bool, data: &[u8]) -> Request {
    let put = ObjectPut {
        repo: head.repo.clone(),
        data: Bytes(data.to_vec()),
        ..*head
    };
    if staged {
        Request::ObjectPutStaged(put)
    } else {
        Request::ObjectPut(put)
    }
}

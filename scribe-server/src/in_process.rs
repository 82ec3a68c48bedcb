//! The in-process transport: a [`Connection`] that hands each request to
//! [`Service::handle`] in this process (path URLs). It answers exactly as
//! a TCP connection to the same service would, because both call the same
//! function with a [`Session`] of their own.

use std::sync::Arc;

use scribe_format::wire::{Connection, ConnectionKind, Request, Response, TransportError};

use crate::service::{Service, Session};

/// A connection to a service running in this process.
pub struct InProcessConnection {
    service: Arc<Service>,
    session: Session,
}

impl InProcessConnection {
    /// A new session of `service`.
    pub fn new(service: Arc<Service>) -> InProcessConnection {
        InProcessConnection {
            service,
            session: Session::new(),
        }
    }

    /// The service this connection talks to.
    pub fn service(&self) -> &Arc<Service> {
        &self.service
    }
}

impl Connection for InProcessConnection {
    fn call(&mut self, request: Request) -> Result<Response, TransportError> {
        Ok(self.service.handle(&mut self.session, request))
    }

    fn kind(&self) -> ConnectionKind {
        ConnectionKind::InProcess
    }
}

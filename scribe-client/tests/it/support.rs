//! The testkit's environment with a client library `Client` on each
//! transport, and the requests the tests repeat, made through the client.

use std::time::{Duration, Instant};

use scribe_client::{Client, ClientOptions};
use scribe_format::wire::message as m;
use scribe_format::{OperationId, WorkspaceId};
pub use scribe_testkit::change::{accepted, change, file, main_branch, register_req, submit_req};
pub use scribe_testkit::change::{Change, File};
pub use scribe_testkit::{both, noise, Env, Transport, REPO};

/// A client library connection to an environment.
pub trait Clients {
    fn client(&self) -> Client {
        self.client_with(&ClientOptions::default())
    }

    fn client_with(&self, opts: &ClientOptions) -> Client;
}

impl Clients for Env {
    fn client_with(&self, opts: &ClientOptions) -> Client {
        match self.transport() {
            Transport::InProcess => Client::in_process(self.service().clone()),
            Transport::Tls => {
                let opts = ClientOptions {
                    ca_file: Some(self.ca_file()),
                    ..opts.clone()
                };
                scribe_client::connect(self.url(), &opts).expect("connect")
            }
            _ => scribe_client::connect(self.url(), opts).expect("connect"),
        }
    }
}

pub fn register(c: &mut Client, ws: WorkspaceId) -> m::WorkspaceInfo {
    c.workspace_register(register_req(REPO, ws))
        .expect("register")
}

/// Upload a change's objects and submit it; returns the outcome.
pub fn upload_and_submit(
    c: &mut Client,
    ws: WorkspaceId,
    op: OperationId,
    ch: &Change,
    message: &str,
) -> m::Outcome {
    c.upload_missing(
        REPO,
        ws,
        op,
        ch.objects.iter().map(|(id, b)| (*id, b.as_slice())),
    )
    .expect("upload");
    c.submit(submit_req(ws, op, ch.id, message))
        .expect("submit")
}

/// Generous bound for "eventually": far above the configured timeouts.
pub const EVENTUALLY: Duration = Duration::from_secs(60);

/// Retry `f` until it returns `Some`, failing after [`EVENTUALLY`].
pub fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + EVENTUALLY;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {EVENTUALLY:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

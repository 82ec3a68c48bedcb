//! The cost of auth (issue #15, `docs/performance.md` "Auth"), beside the
//! machine's own figures on the same loopback:
//!
//! 1. **A new connection** (connect, hello, the first request answered):
//!    plain TCP; TLS with a server certificate only (no client identity:
//!    the machine's TLS handshake); a team server (`support/team.rs`: TLS
//!    with a client certificate, `authenticate` and the first request
//!    authorized) with a credential it saw before (its `resolve` answer is
//!    cached) and with one it never saw (a `resolve` round trip to the
//!    auth service process). Rounds alternate the kinds.
//! 2. **Authorization of a request, warm**: `TeamAuthorizer::authorize_request`
//!    called directly for requests of each kind (the cache holds the
//!    answer; the revision is re-checked every `--auth-recheck`, 1 s, as
//!    served), beside the open authorizer of an unauthenticated server;
//!    the operation claim a submit writes first (its own durable
//!    transaction in `auth-state.redb`, spec 7.2); and one request's round
//!    trip over a kept TLS connection with and without the team server.
//!
//! ```sh
//! cargo bench -p scribe-client --bench auth -- --connections 200 --calls 20000
//! ```
//!
//! The 32-client load with auth is `--bench load -- --auth team`.

#[path = "support/team.rs"]
mod team;

use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use scribe_client::{connect, Client, ClientOptions};
use scribe_format::wire::message as m;
use scribe_format::wire::{Request, Text};
use scribe_format::{BranchId, ChangeSetId, ManifestId, ObjectId, OperationId, WorkspaceId};
use scribe_server::service::auth::{
    Authorizer, Credential as Presented, OpenAuthorizer, PeerInfo, Principal,
};
use scribe_testkit::{Env, Transport, REPO};

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Sorted samples.
struct Samples(Vec<Duration>);

impl Samples {
    fn of(mut v: Vec<Duration>) -> Samples {
        v.sort();
        Samples(v)
    }
    fn pct(&self, p: f64) -> Duration {
        if self.0.is_empty() {
            return Duration::ZERO;
        }
        self.0[((self.0.len() as f64 - 1.0) * p).round() as usize]
    }
    fn mean(&self) -> Duration {
        if self.0.is_empty() {
            return Duration::ZERO;
        }
        self.0.iter().sum::<Duration>() / self.0.len() as u32
    }
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

fn us(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e6)
}

fn log_req() -> m::Log {
    m::Log {
        repo: REPO.into(),
        branch: BranchId([0; 16]),
        before: 0,
        limit: 1,
    }
}

/// Connect, then the first request answered: the time of both.
fn one_connection(url: &str, opts: &ClientOptions) -> Duration {
    let start = Instant::now();
    let mut c: Client = connect(url, opts).expect("connect");
    c.log(log_req()).expect("the first request");
    let d = start.elapsed();
    drop(c);
    d
}

fn connections(rounds: usize) {
    let plain = Env::builder(Transport::Tcp).start();
    let tls = Env::builder(Transport::Tls).start();
    let t = team::Team::start(REPO, 1, rounds, team::DEFAULT_RECHECK);
    let tls_opts = ClientOptions {
        ca_file: Some(tls.ca_file()),
        ..ClientOptions::default()
    };
    let warm_opts = t.options(&t.users[0]);
    let cold_opts: Vec<ClientOptions> = t.fresh.iter().map(|c| t.options(c)).collect();
    // Warm every path once (and the user's answer into the cache).
    one_connection(plain.url(), &ClientOptions::default());
    one_connection(tls.url(), &tls_opts);
    one_connection(&t.url, &warm_opts);
    let mut s: [Vec<Duration>; 4] = Default::default();
    for (i, cold) in cold_opts.iter().enumerate().take(rounds) {
        // Alternate the kinds so that the machine's drift hits each alike.
        let order = [0usize, 1, 2, 3];
        for k in order.iter().cycle().skip(i % 4).take(4) {
            let d = match k {
                0 => one_connection(plain.url(), &ClientOptions::default()),
                1 => one_connection(tls.url(), &tls_opts),
                2 => one_connection(&t.url, &warm_opts),
                _ => one_connection(&t.url, cold),
            };
            s[*k].push(d);
        }
    }
    let s = s.map(Samples::of);
    let tls_p50 = s[1].pct(0.5);
    println!("\n## New connection: connect, hello and the first request answered ({rounds} rounds, kinds alternated)\n");
    println!("| connection | p50 ms | mean ms | p90 ms | p99 ms | p50 minus TLS ms |");
    println!("|---|---|---|---|---|---|");
    for (name, v) in [
        ("plain TCP (`scribe://`, no auth)", &s[0]),
        (
            "TLS, server certificate only (no auth): the machine's handshake",
            &s[1],
        ),
        (
            "team server, client certificate seen before (resolve cached)",
            &s[2],
        ),
        (
            "team server, a new client certificate (resolve asked of scribe-auth)",
            &s[3],
        ),
    ] {
        let p50 = v.pct(0.5);
        let delta = p50.as_secs_f64() - tls_p50.as_secs_f64();
        println!(
            "| {name} | {} | {} | {} | {} | {:+.3} |",
            ms(p50),
            ms(v.mean()),
            ms(v.pct(0.9)),
            ms(v.pct(0.99)),
            delta * 1e3
        );
    }
}

/// `calls` timed calls of `f` after `calls / 10` untimed ones.
fn time(calls: usize, mut f: impl FnMut(usize)) -> Samples {
    for i in 0..calls / 10 {
        f(i);
    }
    let mut v = Vec::with_capacity(calls);
    for i in 0..calls {
        let start = Instant::now();
        f(calls + i);
        v.push(start.elapsed());
    }
    Samples::of(v)
}

/// A request of one kind, the `i`th call.
type MakeRequest = Box<dyn Fn(usize) -> Request>;

fn op(i: usize) -> OperationId {
    let mut o = [0u8; 16];
    o[..8].copy_from_slice(&(i as u64).to_le_bytes());
    o[15] = 0xb1;
    OperationId(o)
}

fn authorization(calls: usize) {
    let t = team::Team::start(REPO, 1, 0, team::DEFAULT_RECHECK);
    let cred = &t.users[0];
    let der = CertificateDer::from_pem_slice(cred.certificate_pem.as_bytes())
        .expect("certificate")
        .as_ref()
        .to_vec();
    // The workspace, registered through the server as the user (its claim
    // is written then), and one change with one lock path.
    let ws = WorkspaceId([0x5a; 16]);
    let mut c = connect(&t.url, &t.options(cred)).expect("connect");
    c.workspace_register(m::WorkspaceRegister {
        repo: REPO.into(),
        workspace: ws,
        branch: String::new(),
        view: vec![],
        label: "bench".into(),
        tags: vec![],
    })
    .expect("register");
    let peer = PeerInfo::tls("127.0.0.1:40000".parse().expect("address"), vec![der], None);
    let principal: Principal = t
        .authorizer
        .authenticate(&Presented::None, &peer)
        .expect("authenticate");
    let open_principal = OpenAuthorizer
        .authenticate(
            &Presented::None,
            &PeerInfo::tcp(peer.address.expect("address")),
        )
        .expect("open");
    let main = BranchId([0; 16]);
    let kinds: Vec<(&str, MakeRequest)> = vec![
        ("Log (read: role)", Box::new(|_| Request::Log(log_req()))),
        (
            "Delta (read: role)",
            Box::new(move |_| {
                Request::Delta(m::Delta {
                    repo: REPO.into(),
                    branch: main,
                    from: 0,
                    to: 0,
                    after: String::new(),
                    limit: 512,
                })
            }),
        ),
        (
            "LockAcquire (role, workspace owner from auth-state.redb)",
            Box::new(move |_| {
                Request::LockAcquire(m::LockAcquire {
                    repo: REPO.into(),
                    workspace: ws,
                    branch: main,
                    author: "bench".into(),
                    paths: vec!["shared/a.psd".into()],
                })
            }),
        ),
        (
            "ObjectsPinMissing (role, workspace owner, operation owner)",
            Box::new(move |i| {
                Request::ObjectsPinMissing(m::ObjectsPinMissing {
                    repo: REPO.into(),
                    operation: op(i),
                    workspace: ws,
                    ids: vec![ObjectId::manifest(ManifestId([1; 32]))],
                })
            }),
        ),
    ];
    println!(
        "\n## Authorization of one request, warm cache ({calls} calls each, after {} untimed; revision re-checked every {:?})\n",
        calls / 10,
        team::DEFAULT_RECHECK
    );
    println!("| request | team p50 µs | team mean µs | team p99 µs | team max µs | open (no auth) p50 µs |");
    println!("|---|---|---|---|---|---|");
    let svc = &*t.service;
    for (name, make) in &kinds {
        let team = time(calls, |i| {
            t.authorizer
                .authorize_request(svc, &principal, &make(i))
                .expect("allowed");
        });
        let open = time(calls, |i| {
            OpenAuthorizer
                .authorize_request(svc, &open_principal, &make(i))
                .expect("allowed");
        });
        println!(
            "| {name} | {} | {} | {} | {} | {} |",
            us(team.pct(0.5)),
            us(team.mean()),
            us(team.pct(0.99)),
            us(*team.0.last().unwrap_or(&Duration::ZERO)),
            us(open.pct(0.5)),
        );
    }
    // A submit's authorization writes its operation claim first: a new
    // operation id each call, so each is a durable write.
    let claims = (calls / 20).clamp(50, 1000);
    let submit = time(claims, |i| {
        t.authorizer
            .authorize_request(
                svc,
                &principal,
                &Request::Submit(m::Submit {
                    repo: REPO.into(),
                    operation: op(1_000_000 + i),
                    workspace: ws,
                    branch: main,
                    change_set: ChangeSetId([7; 32]),
                    author: "bench".into(),
                    message: Text("bench".into()),
                    keep_locks: false,
                    timestamp_ms: 0,
                }),
            )
            .expect("allowed");
    });
    println!(
        "| Submit (role, workspace owner, the operation claim written: its own durable redb transaction), {claims} calls | {} | {} | {} | {} | — |",
        us(submit.pct(0.5)),
        us(submit.mean()),
        us(submit.pct(0.99)),
        us(*submit.0.last().unwrap_or(&Duration::ZERO)),
    );

    // The revision check itself: a server run with `--auth-recheck 0s`
    // asks scribe-auth before every request (the served default asks at
    // most once a second, inside one request).
    let zero = team::Team::start(REPO, 1, 0, Duration::ZERO);
    let zero_der = CertificateDer::from_pem_slice(zero.users[0].certificate_pem.as_bytes())
        .expect("certificate")
        .as_ref()
        .to_vec();
    let zero_principal = zero
        .authorizer
        .authenticate(
            &Presented::None,
            &PeerInfo::tls(peer.address.expect("address"), vec![zero_der], None),
        )
        .expect("authenticate");
    let asks = (calls / 10).clamp(100, 2000);
    let recheck = time(asks, |_| {
        zero.authorizer
            .authorize_request(&zero.service, &zero_principal, &Request::Log(log_req()))
            .expect("allowed");
    });
    println!(
        "| Log with `--auth-recheck 0s` (the revision asked of scribe-auth before the request), {asks} calls | {} | {} | {} | {} | — |",
        us(recheck.pct(0.5)),
        us(recheck.mean()),
        us(recheck.pct(0.99)),
        us(*recheck.0.last().unwrap_or(&Duration::ZERO)),
    );
    drop(zero);

    // One request's round trip on a kept connection, alternated.
    let tls = Env::builder(Transport::Tls).start();
    let tls_opts = ClientOptions {
        ca_file: Some(tls.ca_file()),
        ..ClientOptions::default()
    };
    let mut plain_c = connect(tls.url(), &tls_opts).expect("connect");
    let trips = calls.min(5000);
    let mut a = Vec::with_capacity(trips);
    let mut b = Vec::with_capacity(trips);
    for i in 0..trips + trips / 10 {
        let s = Instant::now();
        plain_c.log(log_req()).expect("log");
        let x = s.elapsed();
        let s = Instant::now();
        c.log(log_req()).expect("log");
        let y = s.elapsed();
        if i >= trips / 10 {
            a.push(x);
            b.push(y);
        }
    }
    let (a, b) = (Samples::of(a), Samples::of(b));
    println!("\n## One request's round trip on a kept TLS connection ({trips} alternated)\n");
    println!("| server | p50 µs | mean µs | p99 µs |");
    println!("|---|---|---|---|");
    println!(
        "| TLS, no auth (the machine's round trip) | {} | {} | {} |",
        us(a.pct(0.5)),
        us(a.mean()),
        us(a.pct(0.99))
    );
    println!(
        "| team server (authorized, warm) | {} | {} | {} |",
        us(b.pct(0.5)),
        us(b.mean()),
        us(b.pct(0.99))
    );
    println!(
        "| difference of the medians | {:+.2} | | |",
        (b.pct(0.5).as_secs_f64() - a.pct(0.5).as_secs_f64()) * 1e6
    );
}

fn main() {
    team::auth_child();
    let rounds = arg("--connections", 200) as usize;
    let calls = arg("--calls", 20_000) as usize;
    println!(
        "auth bench: {rounds} connection rounds, {calls} authorization calls, {} CPUs",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    connections(rounds);
    authorization(calls);
}

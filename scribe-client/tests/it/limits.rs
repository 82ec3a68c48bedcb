//! Server-side resource limits under hostile clients over real TCP: the
//! upload budget is charged for bytes received, idle uploads and
//! connections that never ask anything are closed, and one address cannot
//! take every connection slot (issue #14, items 7 and 8).

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use scribe_format::wire::message as m;
use scribe_format::wire::{decode_response, request_frame, Bytes, Hello, Request, Response};
use scribe_format::{ErrorCode, ManifestId, ObjectId, OperationId, WorkspaceId};
use scribe_server::{ListenOptions, Timeouts};
use scribe_testkit::wire::{self, closed, Wire};

use super::support::*;

const WS: WorkspaceId = WorkspaceId([0x77; 16]);

fn error_code(r: &Response) -> ErrorCode {
    match r {
        Response::Error(e) => e.error_code(),
        other => panic!("expected an error reply, got {other:?}"),
    }
}

/// A handshaken raw connection.
fn opened(addr: SocketAddr) -> TcpStream {
    wire::tcp(addr).stream
}

/// Send `req` on a raw connection and read its reply.
fn ask(s: &mut TcpStream, req: &Request) -> Response {
    s.write_all(&request_frame(req, false)).unwrap();
    decode_response(&wire::read_frame_body(s), false).unwrap()
}

/// The first piece of a `total_len`-byte manifest that will never come.
fn declare(total_len: u64, seed: u8, data: Vec<u8>) -> Request {
    Request::ObjectPutStaged(m::ObjectPut {
        repo: REPO.into(),
        operation: OperationId([seed; 16]),
        workspace: WS,
        id: ObjectId::manifest(ManifestId([seed; 32])),
        total_len,
        offset: 0,
        data: Bytes(data),
    })
}

#[test]
fn declared_sizes_do_not_hold_the_upload_budget() {
    // The default budget (1 GiB) is exactly 16 declared 64 MiB objects.
    let env = Env::new(Transport::Tcp);
    let mut c = env.client();
    register(&mut c, WS);
    let mut attackers = Vec::new();
    for i in 0..16u8 {
        let mut s = opened(env.addr());
        match ask(&mut s, &declare(64 << 20, i + 1, vec![i])) {
            Response::ObjectPutStaged(r) => assert_eq!((r.received, r.complete), (1, false)),
            other => panic!("{other:?}"),
        }
        attackers.push(s);
    }
    // An honest large upload (two 16 MiB chunks in 4 MiB pieces) goes
    // through while the attackers hold their connections.
    let a = noise(16 << 20, 1);
    let b = noise(16 << 20, 2);
    let f = [file(&a), file(&b)];
    c.upload_missing(
        REPO,
        WS,
        OperationId([0xaa; 16]),
        f.iter()
            .flat_map(|f| f.objects.iter().map(|(id, b)| (*id, b.as_slice()))),
    )
    .unwrap();
    assert_eq!(c.download(REPO, f[1].objects[0].0).unwrap(), b);
    drop(attackers);
}

#[test]
fn an_exhausted_budget_is_server_busy_and_idle_uploads_give_it_back() {
    let opts = ListenOptions {
        timeouts: Timeouts {
            upload_idle: Duration::from_millis(300),
            ..Timeouts::default()
        },
        ..ListenOptions::default()
    };
    let env = Env::builder(Transport::Tcp).listen(opts).start();
    env.service().set_upload_budget(6 << 20);
    let mut c = env.client();
    register(&mut c, WS);
    // Received bytes are charged: 4 MiB of a declared 8 MiB, then silence.
    let mut idle = opened(env.addr());
    match ask(&mut idle, &declare(8 << 20, 1, vec![7; 4 << 20])) {
        Response::ObjectPutStaged(r) => assert_eq!(r.received, 4 << 20),
        other => panic!("{other:?}"),
    }
    let big = noise(4 << 20, 3);
    let f = file(&big);
    let upload = |c: &mut scribe_client::Client| {
        c.upload_missing(
            REPO,
            WS,
            OperationId([0xbb; 16]),
            f.objects.iter().map(|(id, b)| (*id, b.as_slice())),
        )
    };
    // Until the idle upload is dropped, the budget is short: `server_busy`,
    // a server-side limit (never `busy`, the data root's lock).
    let refused = upload(&mut c).unwrap_err();
    assert_eq!(refused.code(), ErrorCode::ServerBusy, "{refused}");
    // The idle upload's connection is closed, and its bytes come back.
    assert!(closed(&mut idle));
    eventually("the upload after the idle one was dropped", || {
        let mut c = env.client();
        match upload(&mut c) {
            Ok(_) => Some(()),
            Err(e) if e.code() == ErrorCode::ServerBusy => None,
            Err(e) => panic!("{e}"),
        }
    });
    assert_eq!(c.download(REPO, f.objects[0].0).unwrap(), big);
}

fn per_address(limit: usize, first_request: Duration) -> Env {
    let opts = ListenOptions {
        max_connections_per_address: limit,
        timeouts: Timeouts {
            first_request,
            ..Timeouts::default()
        },
        ..ListenOptions::default()
    };
    Env::builder(Transport::Tcp).listen(opts).start()
}

/// A raw connection from `source` (a loopback address) to `addr`.
fn from(source: [u8; 4], addr: SocketAddr) -> TcpStream {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.bind(&SocketAddr::from((source, 0)).into()).unwrap();
    sock.connect(&addr.into()).unwrap();
    let s: TcpStream = sock.into();
    s.set_read_timeout(Some(wire::IO_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(wire::IO_TIMEOUT)).unwrap();
    s
}

/// The error frame a refused connection gets right after its handshake.
fn refusal(s: TcpStream) {
    let (mut w, _) = Wire::hello(s, &Hello::new(false));
    let r = decode_response(&wire::read_frame_body(&mut w.stream), false).unwrap();
    assert_eq!(error_code(&r), ErrorCode::ServerBusy, "{r:?}");
    let Response::Error(e) = &r else {
        unreachable!()
    };
    assert!(e.message.contains("from 127.0.0.1"), "{}", e.message);
    assert!(closed(&mut w.stream));
}

fn status(s: &mut TcpStream) -> Response {
    ask(s, &Request::Status(m::StatusRequest {}))
}

#[test]
fn one_address_cannot_take_every_connection() {
    let env = per_address(3, Duration::from_secs(10));
    let mut held: Vec<TcpStream> = (0..3).map(|_| opened(env.addr())).collect();
    for s in &mut held {
        assert!(matches!(status(s), Response::Status(_)));
    }
    // A fourth from the same address is refused with a named error...
    refusal(from([127, 0, 0, 1], env.addr()));
    // ...while another address is served, and so is everyone it holds.
    let mut other = Wire::hello(from([127, 0, 0, 2], env.addr()), &Hello::new(false)).0;
    assert!(matches!(status(&mut other.stream), Response::Status(_)));
    for s in &mut held {
        assert!(matches!(status(s), Response::Status(_)));
    }
    // One leaves: the address gets a slot back.
    drop(held.pop());
    let mut back = eventually("a slot after one connection left", || {
        let (mut w, _) = Wire::hello(opened_raw(env.addr()), &Hello::new(false));
        match status(&mut w.stream) {
            Response::Status(_) => Some(w),
            Response::Error(e) if e.error_code() == ErrorCode::ServerBusy => None,
            other => panic!("{other:?}"),
        }
    });
    assert!(matches!(status(&mut back.stream), Response::Status(_)));
}

/// A connection refused for its address holds no slot of the server's
/// while it waits to be told: one address's silent extra connections
/// cannot fill the server's limit for everyone else.
#[test]
fn connections_refused_for_their_address_hold_no_server_slot() {
    let opts = ListenOptions {
        max_connections: 4,
        max_connections_per_address: 2,
        ..ListenOptions::default()
    };
    let env = Env::builder(Transport::Tcp).listen(opts).start();
    let mut held: Vec<TcpStream> = (0..2).map(|_| opened(env.addr())).collect();
    for s in &mut held {
        assert!(matches!(status(s), Response::Status(_)));
    }
    // Three more from the same address that never say hello: each is
    // refused for its address and waits for its handshake to be told so.
    let silent: Vec<TcpStream> = (0..3).map(|_| from([127, 0, 0, 1], env.addr())).collect();
    // Another address still gets the server's two remaining slots.
    let mut others: Vec<TcpStream> = (0..2)
        .map(|_| {
            Wire::hello(from([127, 0, 0, 2], env.addr()), &Hello::new(false))
                .0
                .stream
        })
        .collect();
    for s in &mut others {
        match status(s) {
            Response::Status(_) => {}
            other => panic!("another address was refused: {other:?}"),
        }
    }
    // The silent ones are told why when they speak.
    for s in silent {
        refusal(s);
    }
}

fn opened_raw(addr: SocketAddr) -> TcpStream {
    wire::socket(addr)
}

#[test]
fn connections_that_ask_nothing_are_closed_before_the_idle_timeout() {
    let env = per_address(2, Duration::from_millis(300));
    // Two handshaken connections that never ask anything fill the
    // address's slots; a third is refused.
    let mut mute: Vec<TcpStream> = (0..2).map(|_| opened(env.addr())).collect();
    refusal(opened_raw(env.addr()));
    // They are closed after the first-request timeout (much shorter than
    // the 600 s idle timeout), and a new client gets in.
    for s in &mut mute {
        assert!(closed(s));
    }
    let mut c = eventually("a client after the mute connections closed", || {
        let mut c = env.client();
        match c.status() {
            Ok(_) => Some(c),
            Err(e) if e.code() == ErrorCode::ServerBusy => None,
            Err(e) => panic!("{e}"),
        }
    });
    // A connection that has asked something keeps the normal idle timeout.
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(c.status().unwrap().repositories, 1);
}

/// One `ObjectGet` range on a raw connection.
fn range(s: &mut TcpStream, id: ObjectId, offset: u64) -> m::ObjectData {
    let req = Request::ObjectGet(m::ObjectGet {
        repo: REPO.into(),
        id,
        offset,
        max_len: 4 << 20,
    });
    match ask(s, &req) {
        Response::ObjectData(d) => d,
        other => panic!("{other:?}"),
    }
}

#[test]
fn ranged_readers_do_not_each_hold_the_object() {
    let env = Env::new(Transport::Tcp);
    let mut c = env.client();
    register(&mut c, WS);
    // 16 MiB chunks (the largest): one incompressible, one that the store
    // keeps compressed in blocks.
    let noisy = noise(16 << 20, 9);
    let plain: Vec<u8> = (0..16u32 << 20).map(|i| (i / 4096 % 7) as u8).collect();
    let files = [file(&noisy), file(&plain)];
    for f in &files {
        c.upload_missing(
            REPO,
            WS,
            OperationId([0xcc; 16]),
            f.objects.iter().map(|(id, b)| (*id, b.as_slice())),
        )
        .unwrap();
    }
    let objects = [
        (files[0].objects[0].0, &noisy),
        (files[1].objects[0].0, &plain),
    ];
    // 20 readers each read the first range of one of them, and stop there.
    let readers = 20;
    let mut conns: Vec<(TcpStream, usize)> =
        (0..readers).map(|i| (opened(env.addr()), i % 2)).collect();
    for (s, which) in &mut conns {
        let (id, bytes) = objects[*which];
        let d = range(s, id, 0);
        assert_eq!(d.total_len, 16 << 20);
        assert_eq!(d.data.0, bytes[..4 << 20]);
    }
    // Between requests the readers hold bounded buffers, not 20 objects
    // (320 MiB): at most 1 MiB each.
    let held = env.service().download_buffered_bytes();
    assert!(held <= readers as u64 * (1 << 20), "{held} bytes held");
    // All read on to the end at once, and get the right bytes.
    std::thread::scope(|scope| {
        for (mut s, which) in conns {
            let (id, bytes) = objects[which];
            scope.spawn(move || {
                let mut offset = 4u64 << 20;
                while offset < 16 << 20 {
                    let d = range(&mut s, id, offset);
                    let end = offset as usize + d.data.0.len();
                    assert_eq!(d.data.0, bytes[offset as usize..end]);
                    offset = end as u64;
                }
            });
        }
    });
    assert_eq!(env.service().download_buffered_bytes(), 0);
    // A range out of order is served too.
    let mut s = opened(env.addr());
    let d = range(&mut s, objects[1].0, 9_000_000);
    assert_eq!(d.data.0, plain[9_000_000..9_000_000 + (4 << 20)]);
    assert_eq!(c.download(REPO, objects[1].0).unwrap(), plain);
}

#[test]
fn unregistered_workspaces_can_neither_pin_nor_submit() {
    both(|env| {
        let mut c = env.client();
        let stranger = WorkspaceId([0x55; 16]);
        let op = OperationId([0x56; 16]);
        let ch = change(&[("a.txt", Some(b"a"), 0)]);
        let ids: Vec<ObjectId> = ch.objects.iter().map(|(id, _)| *id).collect();
        let pinned = c.objects_pin_missing(REPO, stranger, op, &ids).unwrap_err();
        assert_eq!(pinned.code(), ErrorCode::WorkspaceUnregistered, "{pinned}");
        let put = c
            .upload_missing(
                REPO,
                stranger,
                op,
                ch.objects.iter().map(|(id, b)| (*id, b.as_slice())),
            )
            .unwrap_err();
        assert_eq!(put.code(), ErrorCode::WorkspaceUnregistered, "{put}");
        // Nor lock: a lock names its workspace to everyone who lists it.
        let locked = c
            .lock_acquire(m::LockAcquire {
                repo: REPO.into(),
                workspace: stranger,
                branch: scribe_format::BranchId([0; 16]),
                author: "stranger".into(),
                paths: vec!["a.txt".into()],
            })
            .unwrap_err();
        assert_eq!(locked.code(), ErrorCode::WorkspaceUnregistered, "{locked}");
        // The objects reach the store through a registered workspace; the
        // stranger still cannot submit them, and nothing is recorded.
        register(&mut c, WS);
        c.upload_missing(
            REPO,
            WS,
            OperationId([0x57; 16]),
            ch.objects.iter().map(|(id, b)| (*id, b.as_slice())),
        )
        .unwrap();
        let submitted = c
            .submit(submit_req(stranger, op, ch.id, "who?"))
            .unwrap_err();
        assert_eq!(submitted.code(), ErrorCode::WorkspaceUnregistered);
        assert_eq!(c.operation_outcome(REPO, op).unwrap(), None);
        let repo = env.service().root().open_repository_by_name(REPO).unwrap();
        assert!(repo
            .pin_summary()
            .unwrap()
            .iter()
            .all(|w| w.workspace != stranger));
        // Retired: refused as retired.
        c.workspace_retire(REPO, WS).unwrap();
        let retired = c
            .objects_pin_missing(REPO, WS, OperationId([0x58; 16]), &ids)
            .unwrap_err();
        assert_eq!(retired.code(), ErrorCode::WorkspaceRetired);
        // (acceptance records the refusal as the operation's outcome)
        let late = OperationId([0x59; 16]);
        let retired = c.submit(submit_req(WS, late, ch.id, "late")).unwrap();
        assert_eq!(retired.code, ErrorCode::WorkspaceRetired.number());
    });
}

#[test]
fn pins_per_workspace_are_bounded() {
    both(|env| {
        env.service().set_max_pins_per_workspace(12);
        // The submission below leaves its cleanup to the service's cleanup
        // thread (as a grouped one under load does): the pin at the bound
        // after it must still find the room it freed.
        env.service().cleaner().set_always(true);
        let mut c = env.client();
        register(&mut c, WS);
        let ids = |from: u8, n: u8| -> Vec<ObjectId> {
            (from..from + n)
                .map(|i| ObjectId::manifest(ManifestId([i; 32])))
                .collect()
        };
        let op = OperationId([0x61; 16]);
        c.objects_pin_missing(REPO, WS, op, &ids(0, 8)).unwrap();
        // Pinning again is idempotent and costs nothing.
        c.objects_pin_missing(REPO, WS, op, &ids(0, 8)).unwrap();
        // Five more would make 13: refused whole, nothing pinned.
        let e = c
            .objects_pin_missing(REPO, WS, OperationId([0x62; 16]), &ids(8, 5))
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::LimitExceeded, "{e}");
        let repo = env.service().root().open_repository_by_name(REPO).unwrap();
        let held = repo.pin_summary().unwrap();
        assert_eq!(held.len(), 1);
        assert_eq!(held[0].pins, 8);
        // Another workspace has its own bound.
        let other = WorkspaceId([0x63; 16]);
        register(&mut c, other);
        c.objects_pin_missing(REPO, other, OperationId([0x66; 16]), &ids(20, 12))
            .unwrap();
        // The intent's submission (three more pins: 11) finishes, its pins
        // are cleaned up, and the room comes back.
        let ch = change(&[("b.txt", Some(b"b"), 0)]);
        accepted(&upload_and_submit(&mut c, WS, op, &ch, "fits"));
        c.objects_pin_missing(REPO, WS, OperationId([0x65; 16]), &ids(40, 12))
            .unwrap();
    });
}

//! A server (or anything between it and the client on a plaintext
//! connection) must not be able to harm a workspace: a proxy rewrites the
//! paths in the real server's replies, and the client refuses the whole
//! sync before planning anything (issue 14, item 1).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};

use scribe_client::workflow::submit::{self, SubmitArgs};
use scribe_client::workflow::workspace::{self, CreateArgs};
use scribe_client::workflow::{files, Opened};
use scribe_client::Context;
use scribe_format::wire::handshake::HANDSHAKE_LEN;
use scribe_format::wire::{decode_response, response_frame, Response};
use scribe_format::ErrorCode;

use super::support::{Env, Transport, REPO};

fn frame(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let mut body = vec![0u8; u32::from_le_bytes(len) as usize];
    s.read_exact(&mut body).ok()?;
    Some(body)
}

/// A proxy to `upstream` that passes requests through and writes, for
/// each reply body, the frame `edit` makes of it (plain TCP, no LZ4).
fn frame_proxy(
    upstream: SocketAddr,
    edit: impl Fn(Vec<u8>) -> Vec<u8> + Copy + Send + 'static,
) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for client in l.incoming() {
            let Ok(mut client) = client else { return };
            std::thread::spawn(move || {
                let mut server = TcpStream::connect(upstream).unwrap();
                let mut hello = [0u8; HANDSHAKE_LEN];
                if client.read_exact(&mut hello).is_err() {
                    return;
                }
                server.write_all(&hello).unwrap();
                let mut answer = [0u8; HANDSHAKE_LEN];
                server.read_exact(&mut answer).unwrap();
                client.write_all(&answer).unwrap();
                while let Some(request) = frame(&mut client) {
                    let len = (request.len() as u32).to_le_bytes();
                    if server
                        .write_all(&len)
                        .and_then(|_| server.write_all(&request))
                        .is_err()
                    {
                        return;
                    }
                    let Some(reply) = frame(&mut server) else {
                        return;
                    };
                    if client.write_all(&edit(reply)).is_err() {
                        return;
                    }
                }
            });
        }
    });
    format!("scribe://{addr}")
}

/// The frame of a reply body as it is.
fn framed(body: &[u8]) -> Vec<u8> {
    [&(body.len() as u32).to_le_bytes()[..], body].concat()
}

/// A proxy to `upstream` that passes everything through but hands every
/// reply it can decode to `rewrite` first (plain TCP, no LZ4).
fn proxy(upstream: SocketAddr, rewrite: fn(&mut Response)) -> String {
    frame_proxy(upstream, move |reply| {
        match decode_response(&reply, false) {
            Ok(mut r) => {
                rewrite(&mut r);
                response_frame(&r, false)
            }
            Err(_) => framed(&reply),
        }
    })
}

fn escape_delta(r: &mut Response) {
    match r {
        Response::Delta(p) => p
            .entries
            .iter_mut()
            .for_each(|e| e.path = "../outside/x".into()),
        Response::List(p) => p
            .entries
            .iter_mut()
            .for_each(|e| e.path = "../outside/x".into()),
        _ => {}
    }
}

/// An absolute path no other process uses (a shared name such as `/tmp/x`
/// may exist for unrelated reasons and would fail the check below).
const ABSOLUTE: &str = "/tmp/scribe-hostile-server-absolute-path-test";

fn absolute_paths(r: &mut Response) {
    match r {
        Response::Delta(p) => p.entries.iter_mut().for_each(|e| e.path = ABSOLUTE.into()),
        Response::List(p) => p.entries.iter_mut().for_each(|e| e.path = ABSOLUTE.into()),
        _ => {}
    }
}

fn reserved_paths(r: &mut Response) {
    if let Response::Delta(p) = r {
        p.entries
            .iter_mut()
            .for_each(|e| e.path = ".scribe/_state/state.redb".into());
    }
}

#[test]
fn rewritten_paths_in_replies_refuse_the_sync_and_write_nothing() {
    let env = Env::new(Transport::Tcp);
    let ctx = Context::default();
    let args = |name: &str, url: &str| CreateArgs {
        dir: env.dir().join("ws").join(name),
        server: url.to_string(),
        repo: REPO.into(),
        author: name.into(),
        ..CreateArgs::default()
    };
    let a = workspace::create(&ctx, args("alice", env.url())).unwrap();
    std::fs::write(a.root.join("a.txt"), b"mine").unwrap();
    let o = Opened::find(&a.root).unwrap();
    files::add(&o, &["a.txt".into()]).unwrap();
    let link = o.link(&ctx).unwrap();
    submit::submit(
        &o,
        &link,
        SubmitArgs {
            message: "one".into(),
            ..SubmitArgs::default()
        },
    )
    .unwrap();

    for (name, rewrite) in [
        ("dotdot", escape_delta as fn(&mut Response)),
        ("absolute", absolute_paths),
        ("reserved", reserved_paths),
    ] {
        let url = proxy(env.addr(), rewrite);
        let e = workspace::create(&ctx, args(name, &url)).unwrap_err();
        assert_eq!(e.code(), ErrorCode::Malformed, "{name}: {e}");
        assert!(e.message().contains(&url), "{name}: names the server: {e}");
        assert!(e.message().contains("nothing was changed"), "{name}: {e}");
        // Nothing was written anywhere: not outside, not inside.
        assert!(!env.dir().join("ws/outside").exists(), "{name}");
        assert!(!std::path::Path::new(ABSOLUTE).exists(), "{name}");
        let root = env.dir().join("ws").join(name);
        let names: Vec<_> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from(".scribe")], "{name}");
    }
    // The same server without the proxy serves the workspace.
    let b = workspace::create(&ctx, args("bob", env.url())).unwrap();
    assert_eq!(std::fs::read(b.root.join("a.txt")).unwrap(), b"mine");
}

/// A listener that accepts and never answers, and a service that is not
/// Scribe, end the connect with a named error instead of hanging for the
/// request timeout (issue 14, item 3, in part).
#[test]
fn a_silent_listener_or_a_foreign_service_fails_the_connect_quickly() {
    use scribe_client::{connect, ClientError, ClientOptions};
    let opts = ClientOptions {
        connect_timeout: std::time::Duration::from_millis(500),
        ..ClientOptions::default()
    };
    // Silent: accepts, reads nothing, says nothing.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    let held = std::thread::spawn(move || {
        let (s, _) = silent.accept().unwrap();
        std::thread::sleep(std::time::Duration::from_secs(20));
        drop(s);
    });
    let t = std::time::Instant::now();
    match connect(&format!("scribe://{addr}"), &opts) {
        Err(ClientError::Io { context, .. }) => {
            assert!(context.contains(&addr.to_string()), "{context}")
        }
        Err(e) => panic!("expected an I/O timeout, got {e}"),
        Ok(_) => panic!("connected to a silent listener"),
    }
    // Far below the 300 s request timeout it would have waited before.
    assert!(
        t.elapsed() < std::time::Duration::from_secs(15),
        "{:?}",
        t.elapsed()
    );
    drop(held);

    // Foreign: an HTTP server's answer.
    let http = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = http.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut s, _) = http.accept().unwrap();
        let mut hello = [0u8; HANDSHAKE_LEN];
        let _ = s.read_exact(&mut hello);
        let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
    });
    match connect(&format!("scribe://{addr}"), &opts) {
        Err(ClientError::Protocol(p)) => {
            assert!(p.contains("is this a Scribe server?"), "{p}");
            assert!(p.contains(&addr.to_string()), "{p}");
        }
        Err(e) => panic!("expected a protocol error, got {e}"),
        Ok(_) => panic!("connected to an HTTP server"),
    }
}

/// A proxy to `upstream` that relays bytes both ways until the clients
/// have sent `cut` bytes in all, then cuts every connection and refuses
/// new ones, as a server that dies mid-upload.
fn dying_proxy(upstream: SocketAddr, cut: u64) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let sent = Arc::new(AtomicU64::new(0));
    std::thread::spawn(move || {
        for client in l.incoming() {
            let Ok(mut client) = client else { return };
            if sent.load(Ordering::SeqCst) >= cut {
                continue; // dropped: the server is gone
            }
            let sent = sent.clone();
            std::thread::spawn(move || {
                let mut server = TcpStream::connect(upstream).unwrap();
                let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut s2, &mut c2);
                });
                let mut buf = vec![0u8; 64 << 10];
                loop {
                    let n = match client.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    if sent.fetch_add(n as u64, Ordering::SeqCst) + n as u64 >= cut
                        || server.write_all(&buf[..n]).is_err()
                    {
                        break;
                    }
                }
                let _ = client.shutdown(std::net::Shutdown::Both);
                let _ = server.shutdown(std::net::Shutdown::Both);
            });
        }
    });
    format!("scribe://{addr}")
}

/// The server dies while a large file streams to it: `submit` ends with an
/// `unreachable` error instead of hanging, and the workspace is not left
/// locked (issue 14, item 3). On this machine the run reaches the final
/// publication before failing, so it does not by itself reproduce the
/// chunkers blocked on a full queue that `stream::drain` guards against.
#[test]
fn a_server_dying_mid_upload_ends_the_submit_instead_of_hanging() {
    let env = Env::new(Transport::Tcp);
    let ctx = Context::default();
    let url = dying_proxy(env.addr(), 12 << 20);
    let a = workspace::create(
        &ctx,
        CreateArgs {
            dir: env.dir().join("ws/alice"),
            server: url,
            repo: REPO.into(),
            author: "alice".into(),
            ..CreateArgs::default()
        },
    )
    .unwrap();
    std::fs::write(a.root.join("big.bin"), scribe_testkit::noise(96 << 20, 5)).unwrap();
    let root = a.root.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let ctx = Context::default();
        let o = Opened::find(&root).unwrap();
        files::add(&o, &["big.bin".into()]).unwrap();
        let link = o.link(&ctx).unwrap();
        let r = submit::submit(
            &o,
            &link,
            SubmitArgs {
                message: "big".into(),
                ..SubmitArgs::default()
            },
        );
        drop(link);
        drop(o);
        let _ = tx.send(r.map(|s| s.change).map_err(|e| (e.code(), e.to_string())));
    });
    let r = rx
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("submit hung after the server died");
    let (code, msg) = r.expect_err("the submit cannot succeed through a dead server");
    assert!(
        matches!(code, ErrorCode::Unreachable | ErrorCode::Malformed),
        "{code}: {msg}"
    );
    // The workspace is not left locked: it opens again at once.
    Opened::find(&a.root).expect("the workspace is usable");
}

/// Changes the body of a reply frame in place.
type Tamper = fn(&mut Vec<u8>);

/// A proxy to `upstream` that passes everything through but hands the
/// body of every uncompressed `ObjectGetMany` reply to `tamper` first.
fn byte_proxy(upstream: SocketAddr, tamper: Tamper) -> String {
    frame_proxy(upstream, move |mut reply| {
        if reply.len() > 7 && reply[..3] == [0x34, 0x80, 0] {
            tamper(&mut reply);
        }
        framed(&reply)
    })
}

/// `ObjectGetMany` replies are read object by object straight into their
/// own buffers: tampered bytes, a length running past the frame, a
/// count the frame cannot hold or bytes after the last object are each
/// refused with a named error, never a panic or a wrong object.
#[test]
fn tampered_object_get_many_replies_are_refused() {
    use scribe_client::{ClientError, ClientOptions};
    use scribe_format::{ObjectId, OperationId, WorkspaceId};
    let env = Env::new(Transport::Tcp);
    let mut c = scribe_client::connect(env.url(), &ClientOptions::default()).unwrap();
    let ws = WorkspaceId([5; 16]);
    super::support::register(&mut c, ws);
    let bodies: Vec<Vec<u8>> = (0..3)
        .map(|i| super::support::noise(100_000 + i, i as u64))
        .collect();
    let mut objects = Vec::new();
    for b in &bodies {
        objects.extend(super::support::file(b).objects);
    }
    c.upload_missing(
        REPO,
        ws,
        OperationId([6; 16]),
        objects.iter().map(|(id, b)| (*id, b.as_slice())),
    )
    .unwrap();
    let ids: Vec<ObjectId> = objects.iter().map(|(id, _)| *id).collect();
    // Untouched, through the proxy: the objects come back whole.
    let url = byte_proxy(env.addr(), |_| {});
    let mut through = scribe_client::connect(&url, &ClientOptions::default()).unwrap();
    let got = through.download_many(REPO, &ids).unwrap();
    assert_eq!(got.len(), ids.len());
    for ((id, b), (gid, gb)) in objects.iter().zip(&got) {
        assert_eq!((id, b), (gid, gb));
    }
    // Header: opcode u16, flags u8, count u32; then per object its 33-byte
    // id, u32 length, data.
    const FIRST_LEN: usize = 3 + 4 + 33;
    let cases: [(&str, Tamper); 4] = [
        ("a data byte flipped", |b| {
            let n = b.len();
            b[n - 1] ^= 0x55;
        }),
        ("a length past the frame", |b| {
            let l = u32::from_le_bytes(b[FIRST_LEN..FIRST_LEN + 4].try_into().unwrap());
            b[FIRST_LEN..FIRST_LEN + 4].copy_from_slice(&(l + 1).to_le_bytes());
        }),
        ("a count the frame cannot hold", |b| {
            b[3..7].copy_from_slice(&u32::MAX.to_le_bytes());
        }),
        ("a byte after the last object", |b| b.push(0)),
    ];
    for (what, tamper) in cases {
        let url = byte_proxy(env.addr(), tamper);
        let mut c = scribe_client::connect(&url, &ClientOptions::default()).unwrap();
        match c.download_many(REPO, &ids) {
            Err(ClientError::Corrupt { .. }) if what == "a data byte flipped" => {}
            Err(ClientError::Protocol(m)) if what != "a data byte flipped" => {
                assert!(!m.is_empty(), "{what}");
            }
            Ok(got) => panic!("{what}: accepted, {} objects", got.len()),
            Err(e) => panic!("{what}: {e:?}"),
        }
    }
}

/// A proxy to `upstream` that passes everything through, except that it
/// closes the first connection that sends a request `cut` picks, before
/// answering it (plain TCP, no LZ4). Later connections pass untouched.
fn cut_once_proxy(upstream: SocketAddr, cut: fn(&scribe_format::wire::Request) -> bool) -> String {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let done = Arc::new(AtomicBool::new(false));
    std::thread::spawn(move || {
        for client in l.incoming() {
            let Ok(mut client) = client else { return };
            let done = done.clone();
            std::thread::spawn(move || {
                let mut server = TcpStream::connect(upstream).unwrap();
                let mut hello = [0u8; HANDSHAKE_LEN];
                if client.read_exact(&mut hello).is_err() {
                    return;
                }
                server.write_all(&hello).unwrap();
                let mut answer = [0u8; HANDSHAKE_LEN];
                server.read_exact(&mut answer).unwrap();
                client.write_all(&answer).unwrap();
                while let Some(request) = frame(&mut client) {
                    let picked =
                        scribe_format::wire::decode_request(&request, false).is_ok_and(|r| cut(&r));
                    if picked && !done.swap(true, Ordering::SeqCst) {
                        let _ = client.shutdown(std::net::Shutdown::Both);
                        return;
                    }
                    if server.write_all(&framed(&request)).is_err() {
                        return;
                    }
                    let Some(reply) = frame(&mut server) else {
                        return;
                    };
                    if client.write_all(&framed(&reply)).is_err() {
                        return;
                    }
                }
            });
        }
    });
    format!("scribe://{addr}")
}

/// A connection cut while a sync prefetches (a speed-up whose failure the
/// sync sets aside) is not reused: the files are fetched on a new
/// connection and the workspace is complete. It used to fail every later
/// request with "the connection failed earlier", reported as `malformed`
/// (the server refused), where the server was only out of reach.
#[test]
fn a_connection_cut_during_a_prefetch_is_replaced_and_the_sync_completes() {
    let env = Env::new(Transport::Tcp);
    let ctx = Context::default();
    let args = |name: &str, url: &str| CreateArgs {
        dir: env.dir().join("ws").join(name),
        server: url.to_string(),
        repo: REPO.into(),
        author: name.into(),
        ..CreateArgs::default()
    };
    let a = workspace::create(&ctx, args("alice", env.url())).unwrap();
    for i in 0..5 {
        std::fs::write(a.root.join(format!("f{i}.txt")), format!("file {i}")).unwrap();
    }
    let o = Opened::find(&a.root).unwrap();
    files::add(
        &o,
        &[
            "f0.txt".into(),
            "f1.txt".into(),
            "f2.txt".into(),
            "f3.txt".into(),
            "f4.txt".into(),
        ],
    )
    .unwrap();
    let link = o.link(&ctx).unwrap();
    submit::submit(
        &o,
        &link,
        SubmitArgs {
            message: "five".into(),
            ..SubmitArgs::default()
        },
    )
    .unwrap();
    let url = cut_once_proxy(env.addr(), |r| {
        matches!(r, scribe_format::wire::Request::ObjectGetMany(_))
    });
    let b = workspace::create(&ctx, args("bob", &url)).unwrap();
    for i in 0..5 {
        assert_eq!(
            std::fs::read_to_string(b.root.join(format!("f{i}.txt"))).unwrap(),
            format!("file {i}")
        );
    }
}

/// The first 2xx number the registry does not hold: what
/// `repository_retired` (216) was to every build before it.
fn unknown_refusal_code() -> u16 {
    (200..300)
        .find(|n| ErrorCode::from_number(*n).is_none())
        .expect("a free 2xx number")
}

fn renumber_retired(r: &mut Response) {
    if let Response::Error(e) = r {
        if e.code == ErrorCode::RepositoryRetired.number() {
            e.code = unknown_refusal_code();
        }
    }
}

/// What a client older than an error code sees of it: the real server
/// refuses a submit to a retired repository with `repository_retired`
/// (216); a proxy renumbers the refusal to a code this build does not
/// know, as 216 is to builds before it. The error names the number, says
/// this scribe does not know it, and keeps the server's message (whom to
/// ask); it read as this build's `internal` with only the message.
#[test]
fn an_error_code_this_build_does_not_know_is_named_with_the_servers_message() {
    let mut env = Env::new(Transport::Process);
    env.process().kill();
    scribe_metadata::DataRoot::open(env.data())
        .unwrap()
        .set_retired(REPO, true, "ops@studio")
        .unwrap();
    env.restart_process();
    let url = proxy(env.addr(), renumber_retired);
    let ctx = Context::default();
    let a = workspace::create(
        &ctx,
        CreateArgs {
            dir: env.dir().join("ws").join("ann"),
            server: url,
            repo: REPO.into(),
            author: "ann".into(),
            ..CreateArgs::default()
        },
    )
    .expect("a retired repository still takes a workspace");
    std::fs::write(a.root.join("a.txt"), b"mine").unwrap();
    let o = Opened::find(&a.root).unwrap();
    files::add(&o, &["a.txt".into()]).unwrap();
    let link = o.link(&ctx).unwrap();
    let e = submit::submit(
        &o,
        &link,
        SubmitArgs {
            message: "one".into(),
            ..SubmitArgs::default()
        },
    )
    .unwrap_err();
    let said = e.message().to_string();
    assert!(
        said.contains(&format!("error code {}", unknown_refusal_code()))
            && said.contains("does not know"),
        "the unknown code is not named: {e}"
    );
    assert!(
        said.contains("retired") && said.contains("ops@studio"),
        "the server's message is lost: {e}"
    );
}

/// Every lock page answers "more after ''": a cursor that does not move.
fn stuck_lock_cursor(r: &mut Response) {
    if let Response::LockList(p) = r {
        p.next = Some(String::new());
    }
}

/// A server whose lock listing never moves past its cursor cannot keep a
/// submit's lock check (every page under the opened paths' common prefix,
/// for more than 16 paths) asking for ever: the submit stops with a
/// protocol error naming the cursor, before anything is uploaded.
#[test]
fn a_lock_listing_whose_cursor_does_not_move_stops_the_submit() {
    let env = Env::new(Transport::Tcp);
    let ctx = Context::default();
    let a = workspace::create(
        &ctx,
        CreateArgs {
            dir: env.dir().join("ws").join("ann"),
            server: proxy(env.addr(), stuck_lock_cursor),
            repo: REPO.into(),
            author: "ann".into(),
            ..CreateArgs::default()
        },
    )
    .unwrap();
    let names: Vec<String> = (0..20).map(|i| format!("f{i:02}.txt")).collect();
    for n in &names {
        std::fs::write(a.root.join(n), n.as_bytes()).unwrap();
    }
    let o = Opened::find(&a.root).unwrap();
    files::add(&o, &names).unwrap();
    let link = o.link(&ctx).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = submit::submit(
            &o,
            &link,
            SubmitArgs {
                message: "twenty".into(),
                ..SubmitArgs::default()
            },
        );
        let _ = tx.send(r.map(|_| ()).map_err(|e| e.to_string()));
    });
    let r = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the submit kept asking for lock pages");
    let e = r.expect_err("a stuck lock listing is refused");
    assert!(e.contains("did not move past its cursor"), "{e}");
}

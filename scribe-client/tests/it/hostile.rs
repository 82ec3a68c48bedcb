//! Hostile input and lost connections: the server answers what it can,
//! closes what it must, and stays up for everyone else.

use std::io::{Read, Write};
use std::net::TcpStream;

use scribe_format::wire::handshake::{HandshakeStatus, HANDSHAKE_LEN};
use scribe_format::wire::message as m;
use scribe_format::wire::{
    decode_response, encode_frame, request_frame, Answer, Bytes, Hello, Request, Response,
};
use scribe_format::{ErrorCode, ObjectId, OperationId, WorkspaceId};

use scribe_testkit::wire::{self, closed};

use super::support::*;

fn raw(env: &Env) -> TcpStream {
    wire::socket(env.addr())
}

fn hello(s: &mut TcpStream, h: &Hello) -> Answer {
    s.write_all(&h.encode()).unwrap();
    let mut buf = [0u8; HANDSHAKE_LEN];
    s.read_exact(&mut buf).unwrap();
    Answer::decode(&buf).unwrap()
}

fn opened(env: &Env) -> TcpStream {
    let mut s = raw(env);
    assert_eq!(
        hello(&mut s, &Hello::new(false)).status,
        HandshakeStatus::Accepted
    );
    s
}

fn read_reply(s: &mut TcpStream) -> Response {
    decode_response(&wire::read_frame_body(s), false).unwrap()
}

fn error_code(r: &Response) -> ErrorCode {
    match r {
        Response::Error(e) => e.error_code(),
        other => panic!("expected an error reply, got {other:?}"),
    }
}

/// After each hostile connection the server still serves a fresh client.
fn still_serving(env: &Env) {
    let mut c = env.client();
    assert_eq!(c.status().unwrap().repositories, 1);
}

#[test]
fn wrong_handshake_version_schema_and_garbage_fail_closed() {
    let env = Env::new(Transport::Tcp);
    let mut s = raw(&env);
    let a = hello(
        &mut s,
        &Hello {
            version: 2,
            flags: 0,
            schema: "scribe.rpc.v1".into(),
        },
    );
    assert_eq!(a.status, HandshakeStatus::UnsupportedHandshake);
    assert_eq!(a.schema, "scribe.rpc.v1");
    assert!(closed(&mut s));

    let mut s = raw(&env);
    let a = hello(
        &mut s,
        &Hello {
            version: 1,
            flags: 0,
            schema: "scribe.rpc.v0".into(),
        },
    );
    assert_eq!(a.status, HandshakeStatus::UnsupportedSchema);
    assert!(closed(&mut s));

    let mut s = raw(&env);
    s.write_all(&[0xAB; HANDSHAKE_LEN]).unwrap();
    let mut buf = [0u8; HANDSHAKE_LEN];
    s.read_exact(&mut buf).unwrap();
    assert_eq!(
        Answer::decode(&buf).unwrap().status,
        HandshakeStatus::Malformed
    );
    assert!(closed(&mut s));

    // An HTTP request is not a hello either.
    let mut s = raw(&env);
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n\0\0\0\0\0")
        .unwrap();
    s.read_exact(&mut buf).unwrap();
    assert_eq!(
        Answer::decode(&buf).unwrap().status,
        HandshakeStatus::Malformed
    );
    still_serving(&env);
}

#[test]
fn oversized_length_is_refused_before_buffering() {
    let env = Env::new(Transport::Tcp);
    let mut s = opened(&env);
    // Claim 4 GiB and send nothing more: the reply comes without the body.
    s.write_all(&u32::MAX.to_le_bytes()).unwrap();
    let r = read_reply(&mut s);
    assert_eq!(error_code(&r), ErrorCode::LimitExceeded);
    assert!(closed(&mut s));
    // A length too short for a frame header.
    let mut s = opened(&env);
    s.write_all(&1u32.to_le_bytes()).unwrap();
    assert_eq!(error_code(&read_reply(&mut s)), ErrorCode::Malformed);
    assert!(closed(&mut s));
    still_serving(&env);
}

#[test]
fn truncated_frames_and_unknown_opcodes() {
    let env = Env::new(Transport::Tcp);
    // A frame cut short, then the peer leaves.
    let mut s = opened(&env);
    let frame = request_frame(&Request::Status(m::StatusRequest {}), false);
    s.write_all(&frame[..frame.len() - 1]).unwrap();
    s.write_all(&100u32.to_le_bytes()[..2]).unwrap();
    drop(s);
    // A frame whose payload is truncated inside a field.
    let mut s = opened(&env);
    let mut frame = request_frame(
        &Request::RepoCreate(m::RepoCreate { name: "abc".into() }),
        false,
    );
    frame.truncate(frame.len() - 2);
    let body_len = (frame.len() - 4) as u32;
    frame[..4].copy_from_slice(&body_len.to_le_bytes());
    s.write_all(&frame).unwrap();
    assert_eq!(error_code(&read_reply(&mut s)), ErrorCode::Malformed);
    assert!(closed(&mut s));
    // An unknown opcode.
    let mut s = opened(&env);
    s.write_all(&encode_frame(0x7abc, b"", false)).unwrap();
    assert_eq!(error_code(&read_reply(&mut s)), ErrorCode::Malformed);
    assert!(closed(&mut s));
    // A compressed frame when LZ4 was not negotiated.
    let mut s = opened(&env);
    let mut f = encode_frame(0x0001, b"", false);
    f[6] = 1;
    s.write_all(&f).unwrap();
    assert_eq!(error_code(&read_reply(&mut s)), ErrorCode::Malformed);
    assert!(closed(&mut s));
    still_serving(&env);
}

#[test]
fn garbage_after_a_valid_frame_gets_the_reply_then_an_error() {
    let env = Env::new(Transport::Tcp);
    let mut s = opened(&env);
    let mut bytes = request_frame(&Request::Status(m::StatusRequest {}), false);
    bytes.extend_from_slice(&[0xff; 64]);
    s.write_all(&bytes).unwrap();
    assert!(matches!(read_reply(&mut s), Response::Status(_)));
    let r = read_reply(&mut s);
    assert_eq!(error_code(&r), ErrorCode::LimitExceeded);
    assert!(closed(&mut s));
    // Trailing bytes inside a frame's payload.
    let mut s = opened(&env);
    s.write_all(&encode_frame(0x0001, b"extra", false)).unwrap();
    assert_eq!(error_code(&read_reply(&mut s)), ErrorCode::Malformed);
    still_serving(&env);
}

#[test]
fn a_silent_client_blocks_nobody() {
    let env = Env::new(Transport::Tcp);
    // One client connects and says nothing; another sends half a frame.
    let _silent = raw(&env);
    let mut half = opened(&env);
    half.write_all(&50u32.to_le_bytes()).unwrap();
    half.write_all(&[0, 0]).unwrap();
    let mut c = env.client();
    let ws = WorkspaceId([1; 16]);
    register(&mut c, ws);
    let ch = change(&[("a.txt", Some(b"a"), 0)]);
    accepted(&upload_and_submit(
        &mut c,
        ws,
        OperationId([1; 16]),
        &ch,
        "while others stall",
    ));
}

#[test]
fn disconnect_mid_upload_leaves_nothing_half_stored() {
    let env = Env::new(Transport::Tcp);
    let ws = WorkspaceId([1; 16]);
    register(&mut env.client(), ws);
    let op = OperationId([5; 16]);
    let big: Vec<u8> = (0..6 * 1024 * 1024u32)
        .map(|i| (i * 7 % 253) as u8)
        .collect();
    let f = file(&big);
    let (id, bytes) = f.objects[0].clone();
    {
        let mut s = opened(&env);
        let piece = Request::ObjectPut(m::ObjectPut {
            repo: REPO.into(),
            operation: op,
            workspace: ws,
            id,
            total_len: bytes.len() as u64,
            offset: 0,
            data: Bytes(bytes[..4 << 20].to_vec()),
        });
        s.write_all(&request_frame(&piece, false)).unwrap();
        match read_reply(&mut s) {
            Response::ObjectPut(r) => assert!(!r.complete),
            other => panic!("{other:?}"),
        }
        // Half of the second piece, then the connection dies.
        let second = request_frame(
            &Request::ObjectPut(m::ObjectPut {
                repo: REPO.into(),
                operation: op,
                workspace: ws,
                id,
                total_len: bytes.len() as u64,
                offset: 4 << 20,
                data: Bytes(bytes[4 << 20..].to_vec()),
            }),
            false,
        );
        s.write_all(&second[..second.len() / 2]).unwrap();
    }
    let mut c = env.client();
    assert_eq!(c.objects_missing(REPO, &[id]).unwrap(), vec![id]);
    // Another client uploads the same object from the start.
    c.upload_missing(REPO, ws, op, std::iter::once((id, bytes.as_slice())))
        .unwrap();
    assert_eq!(c.download(REPO, id).unwrap(), bytes);
}

#[test]
fn disconnect_mid_submit_then_retry_gets_the_recorded_outcome() {
    let env = Env::new(Transport::Tcp);
    let ws = WorkspaceId([1; 16]);
    let op = OperationId([6; 16]);
    let mut c = env.client();
    register(&mut c, ws);
    let ch = change(&[("level.map", Some(b"map"), 0)]);
    c.upload_missing(
        REPO,
        ws,
        op,
        ch.objects.iter().map(|(id, b)| (*id, b.as_slice())),
    )
    .unwrap();
    {
        // Send the submission and vanish before the reply.
        let mut s = opened(&env);
        let req = Request::Submit(submit_req(ws, op, ch.id, "lost reply"));
        s.write_all(&request_frame(&req, false)).unwrap();
        let _ = s.shutdown(std::net::Shutdown::Both);
    }
    // The retry (same operation id) answers the outcome the first one
    // recorded, or performs it if the first never arrived; either way
    // exactly one change exists.
    let o = c.submit(submit_req(ws, op, ch.id, "lost reply")).unwrap();
    let n = accepted(&o);
    assert_eq!(
        c.submit(submit_req(ws, op, ch.id, "lost reply")).unwrap(),
        o
    );
    let log = c
        .log(m::Log {
            repo: REPO.into(),
            branch: main_branch(),
            before: 0,
            limit: 0,
        })
        .unwrap();
    assert_eq!(log.commits.len(), 1);
    assert_eq!(log.commits[0].change, n);
    assert_eq!(c.operation_outcome(REPO, op).unwrap(), Some(o));
}

#[test]
fn idle_connections_are_closed_after_the_idle_timeout() {
    let opts = scribe_server::ListenOptions {
        timeouts: scribe_server::Timeouts {
            idle: std::time::Duration::from_millis(300),
            handshake: std::time::Duration::from_secs(2),
            ..Default::default()
        },
        ..Default::default()
    };
    let env = Env::builder(Transport::Tcp).listen(opts).start();
    let mut idle = opened(&env);
    // Past its first request, a connection has the (here short) idle timeout.
    idle.write_all(&request_frame(&Request::Status(m::StatusRequest {}), false))
        .unwrap();
    assert!(matches!(read_reply(&mut idle), Response::Status(_)));
    assert!(closed(&mut idle));
    let mut mute = raw(&env);
    assert!(closed(&mut mute));
    still_serving(&env);
}

#[test]
fn request_ids_over_the_limit_are_refused() {
    let env = Env::new(Transport::Tcp);
    let mut c = env.client();
    let ids = vec![ObjectId::chunk(scribe_format::ChunkId([1; 32])); 65_537];
    let r = c.call(Request::ObjectsMissing(m::ObjectsMissing {
        repo: REPO.into(),
        ids,
    }));
    assert_eq!(r.unwrap_err().code(), ErrorCode::LimitExceeded);
    assert_eq!(c.status().unwrap().repositories, 1);
}

#[test]
fn connections_over_the_limit_get_busy_and_others_continue() {
    let opts = scribe_server::ListenOptions {
        max_connections: 1,
        ..Default::default()
    };
    let env = Env::builder(Transport::Tcp).listen(opts).start();
    let mut first = env.client();
    assert_eq!(first.status().unwrap().connections, 1);
    let mut second = env.client();
    assert_eq!(second.status().unwrap_err().code(), ErrorCode::ServerBusy);
    // The admitted client is unaffected; after it leaves, a slot frees up.
    assert_eq!(first.repo_list().unwrap().len(), 1);
    drop(first);
    let mut third = loop {
        let mut c = env.client();
        match c.status() {
            Ok(_) => break c,
            // The first connection's slot is released when its task ends.
            Err(e) if e.code() == ErrorCode::ServerBusy => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(third.repo_list().unwrap().len(), 1);
}

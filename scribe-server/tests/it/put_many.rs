//! `ObjectPutMany` (many small objects in one frame): every piece is
//! verified before anything is pinned or stored, and every stored piece is
//! pinned for its intent, whether or not this connection's
//! `ObjectsPinMissing` pinned some of them first.

use scribe_format::wire::message as m;
use scribe_format::wire::{Request, Response};
use scribe_format::{ErrorCode, ObjectId, ObjectKind, OperationId, WorkspaceId};
use scribe_server::service::pins;
use scribe_server::{InProcessConnection, Service};
use scribe_testkit::change::{put_many_req, Requests};
use scribe_testkit::REPO;

fn chunk(body: &[u8]) -> (ObjectId, Vec<u8>) {
    (
        scribe_format::id::object_identity(ObjectKind::Chunk, body).unwrap(),
        body.to_vec(),
    )
}

#[test]
fn put_many_pins_what_the_connection_did_not_and_refuses_a_lying_piece() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let svc = Service::create(&data).unwrap();
    scribe_server::service::dispatch::repo_create(&svc, REPO).unwrap();
    let mut c = InProcessConnection::new(svc);
    let ws = WorkspaceId::random();
    c.register(ws);
    let repo = c.service().root().open_repository_by_name(REPO).unwrap();
    let store = c.service().stores().get(&repo.id()).unwrap();
    let objects: Vec<_> = (0..40u32)
        .map(|i| chunk(format!("small file {i}").as_bytes()))
        .collect();

    // Without a pin request first: every piece pinned, every piece stored.
    let op1 = OperationId::random();
    match c.ask(Request::ObjectPutMany(put_many_req(
        ws,
        op1,
        &objects[..10],
    ))) {
        Response::ObjectPutMany(r) => assert_eq!(r.stored, 10),
        other => panic!("{other:?}"),
    }
    assert_eq!(pins::count(&repo, ws, op1).unwrap(), 10);

    // The connection pinned half of the next frame's ids: the other half
    // is pinned by the put itself.
    let op2 = OperationId::random();
    let half: Vec<ObjectId> = objects[10..20].iter().map(|(id, _)| *id).collect();
    match c.ask(Request::ObjectsPinMissing(m::ObjectsPinMissing {
        repo: REPO.into(),
        operation: op2,
        workspace: ws,
        ids: half,
    })) {
        Response::ObjectsPinMissing(r) => assert_eq!(r.missing.len(), 10),
        other => panic!("{other:?}"),
    }
    match c.ask(Request::ObjectPutMany(put_many_req(
        ws,
        op2,
        &objects[10..30],
    ))) {
        Response::ObjectPutMany(r) => assert_eq!(r.stored, 20),
        other => panic!("{other:?}"),
    }
    assert_eq!(pins::count(&repo, ws, op2).unwrap(), 20);
    for (id, body) in &objects[..30] {
        assert_eq!(&store.get(id).unwrap(), body);
    }

    // One piece whose bytes are not its id, anywhere in the frame: the
    // frame is refused, nothing of it pinned or stored.
    let op3 = OperationId::random();
    let mut lying = objects[30..].to_vec();
    lying[7].1 = b"other bytes".to_vec();
    match c.ask(Request::ObjectPutMany(put_many_req(ws, op3, &lying))) {
        Response::Error(e) => assert_eq!(e.code, ErrorCode::Corrupt.number(), "{e:?}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(pins::count(&repo, ws, op3).unwrap(), 0);
    for (id, _) in &objects[30..] {
        assert!(!store.contains(id).unwrap(), "{id} stored");
    }
}

/// Over a real TCP connection an `ObjectPutMany` is served where its frame
/// lies (each object a range of the connection's frame buffer, which the
/// next frame overwrites): every object stored as sent, a lying piece
/// refuses its frame and leaves nothing, and a frame with a byte after its
/// last object is refused as malformed, by name, with nothing stored.
#[test]
fn put_many_over_tcp_is_served_from_its_frame_and_refuses_what_decoding_refuses() {
    use scribe_testkit::wire::{self, read_frame_body};
    use scribe_testkit::{Env, Transport};
    use std::io::Write;
    let env = Env::new(Transport::Tcp);
    let repo = env.service().root().open_repository_by_name(REPO).unwrap();
    let store = env.service().stores().get(&repo.id()).unwrap();
    let ws = WorkspaceId::random();
    let mut w = wire::tcp(env.addr());
    match w.call(Request::WorkspaceRegister(
        scribe_testkit::change::register_req(REPO, ws),
    )) {
        Response::WorkspaceRegistered(_) => {}
        other => panic!("{other:?}"),
    }
    // Three frames one after the other on one connection, each a few
    // hundred objects of different sizes (the later frames reuse the
    // buffer the earlier ones were served from).
    let frames: Vec<Vec<(ObjectId, Vec<u8>)>> = (0..3u32)
        .map(|f| {
            (0..300u32)
                .map(|i| {
                    chunk(&vec![
                        (f * 7 + i) as u8;
                        ((i * 97 + f * 13) % 9_000) as usize
                    ])
                })
                .collect()
        })
        .collect();
    for (f, objects) in frames.iter().enumerate() {
        let op = OperationId::random();
        match w.call(Request::ObjectPutMany(put_many_req(ws, op, objects))) {
            Response::ObjectPutMany(r) => assert_eq!(r.stored as usize, objects.len(), "frame {f}"),
            other => panic!("frame {f}: {other:?}"),
        }
        let distinct: std::collections::BTreeSet<_> = objects.iter().map(|(id, _)| *id).collect();
        assert_eq!(pins::count(&repo, ws, op).unwrap(), distinct.len());
    }
    for (id, body) in frames.iter().flatten() {
        assert_eq!(&store.get(id).unwrap(), body, "{id}");
    }

    // A lying piece anywhere in the frame: refused, nothing pinned or stored.
    let op = OperationId::random();
    let mut lying: Vec<_> = (0..50u32)
        .map(|i| chunk(format!("lying frame {i}").as_bytes()))
        .collect();
    lying[31].1 = b"other bytes".to_vec();
    match w.call(Request::ObjectPutMany(put_many_req(ws, op, &lying))) {
        Response::Error(e) => assert_eq!(e.code, ErrorCode::Corrupt.number(), "{e:?}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(pins::count(&repo, ws, op).unwrap(), 0);
    for (id, _) in &lying {
        assert!(!store.contains(id).unwrap(), "{id} stored");
    }

    // One byte after the last object: malformed, named, nothing stored.
    let op = OperationId::random();
    let fresh: Vec<_> = (0..20u32)
        .map(|i| chunk(format!("never stored {i}").as_bytes()))
        .collect();
    let mut frame = scribe_format::wire::request_frame(
        &Request::ObjectPutMany(put_many_req(ws, op, &fresh)),
        false,
    );
    frame.push(0);
    let len = u32::from_le_bytes(frame[..4].try_into().unwrap()) + 1;
    frame[..4].copy_from_slice(&len.to_le_bytes());
    w.stream.write_all(&frame).unwrap();
    let body = read_frame_body(&mut w.stream);
    match scribe_format::wire::decode_response(&body, false).unwrap() {
        Response::Error(e) => {
            assert_eq!(e.code, ErrorCode::Malformed.number(), "{e:?}");
            assert!(e.message.contains("trailing"), "{e:?}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(pins::count(&repo, ws, op).unwrap(), 0);
    for (id, _) in &fresh {
        assert!(!store.contains(id).unwrap(), "{id} stored");
    }
}

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

//! `ObjectGetMany`: many whole objects per round trip, bounded replies,
//! larger objects through ranges, unknown ids and over-long requests refused.

use scribe_format::wire::message as m;
use scribe_format::wire::Request;
use scribe_format::{ErrorCode, ObjectId, OperationId, WorkspaceId};

use super::support::{both, file, noise, register, Clients, REPO};

fn code(e: scribe_client::ClientError) -> ErrorCode {
    e.code()
}

#[test]
fn many_objects_come_back_whole_in_order_within_the_frame_budget() {
    both(|env| {
        let mut c = env.client();
        let ws = WorkspaceId([1; 16]);
        register(&mut c, ws);
        let op = OperationId([2; 16]);
        // 300 small files, two 3 MiB ones and one of 6 MiB (larger than a reply).
        let mut contents: Vec<Vec<u8>> = (0..300).map(|i| noise(100 + i * 7, i as u64)).collect();
        contents.insert(10, noise(3 << 20, 1000));
        contents.insert(11, noise(3 << 20, 1001));
        contents.insert(200, noise(6 << 20, 1002));
        let mut objects = Vec::new();
        for b in &contents {
            objects.extend(file(b).objects);
        }
        c.upload_missing(
            REPO,
            ws,
            op,
            objects.iter().map(|(id, b)| (*id, b.as_slice())),
        )
        .unwrap();
        let ids: Vec<ObjectId> = objects.iter().map(|(id, _)| *id).collect();
        let got = c.download_many(REPO, &ids).unwrap();
        assert_eq!(got.len(), objects.len());
        for ((id, bytes), (gid, gbytes)) in objects.iter().zip(&got) {
            assert_eq!(id, gid);
            assert_eq!(bytes, gbytes, "{id}");
        }
        // One reply stops before the object that would overflow 4 MiB.
        let big = ObjectId::chunk(scribe_format::ChunkId::of(&contents[10]));
        let big2 = ObjectId::chunk(scribe_format::ChunkId::of(&contents[11]));
        let small = ids[0];
        let r = c
            .call(Request::ObjectGetMany(m::ObjectGetMany {
                repo: REPO.into(),
                ids: vec![small, big, big2],
            }))
            .unwrap();
        let scribe_format::wire::Response::ObjectGetMany(r) = r else {
            panic!("unexpected reply")
        };
        let answered: Vec<ObjectId> = r.objects.iter().map(|o| o.id).collect();
        assert_eq!(answered, vec![small, big]);
        let total: usize = r.objects.iter().map(|o| o.data.0.len()).sum();
        assert!(total <= m::MAX_OBJECT_DATA_PER_FRAME as usize);
        // An unknown id fails the request by name.
        let absent = ObjectId::chunk(scribe_format::ChunkId::of(b"absent"));
        assert_eq!(
            code(c.download_many(REPO, &[small, absent]).unwrap_err()),
            ErrorCode::NotFound
        );
        // Too many ids in one request.
        let r = c.call(Request::ObjectGetMany(m::ObjectGetMany {
            repo: REPO.into(),
            ids: vec![small; m::MAX_IDS_PER_GET_MANY + 1],
        }));
        assert_eq!(code(r.unwrap_err()), ErrorCode::LimitExceeded);
        // The connection is still usable after refusals.
        assert_eq!(c.download_many(REPO, &[small]).unwrap()[0].1, objects[0].1);
    });
}

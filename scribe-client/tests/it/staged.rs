//! Staged uploads: `ObjectsPinMissing`, `ObjectPutStaged`, `ObjectsPublish`
//! and the implicit publications (full stage, any other request).

use scribe_format::{ChunkId, ErrorCode, ObjectId, OperationId, WorkspaceId};
use scribe_server::service::pins;
use scribe_server::service::upload::STAGE_PUBLISH_OBJECTS;

use super::support::*;

const WS: WorkspaceId = WorkspaceId([1; 16]);
const OP: OperationId = OperationId([2; 16]);

fn chunk(data: &[u8]) -> ObjectId {
    ObjectId::chunk(ChunkId::of(data))
}

#[test]
fn pin_missing_pins_every_id_and_names_only_the_absent() {
    both(|env| {
        let mut c = env.client();
        register(&mut c, WS);
        let present = b"already here".to_vec();
        c.put_object(REPO, WS, OperationId([9; 16]), chunk(&present), &present)
            .unwrap();
        let absent = chunk(b"not yet");
        let ids = [chunk(&present), absent];
        assert_eq!(
            c.objects_pin_missing(REPO, WS, OP, &ids).unwrap(),
            vec![absent]
        );
        let repo = env.service().root().open_repository_by_name(REPO).unwrap();
        // Both are pinned, the present one too (its reuse is protected).
        assert_eq!(pins::count(&repo, WS, OP).unwrap(), 2);
        let err = c.objects_pin_missing("nope", WS, OP, &ids).unwrap_err();
        assert_eq!(err.code(), ErrorCode::NotFound);
    });
}

#[test]
fn staged_objects_are_published_together_and_visible_after() {
    both(|env| {
        let mut c = env.client();
        register(&mut c, WS);
        let mut other = env.client();
        // One object of several pieces (6 MiB) and two small ones.
        let objects = [noise(6 << 20, 1), noise(1000, 2), noise(70_000, 3)];
        let ids: Vec<ObjectId> = objects.iter().map(|o| chunk(o)).collect();
        assert_eq!(c.objects_pin_missing(REPO, WS, OP, &ids).unwrap(), ids);
        for (id, o) in ids.iter().zip(&objects) {
            c.put_object_staged(REPO, WS, OP, *id, o).unwrap();
        }
        // Staged: held for this connection, not yet stored for others.
        assert!(c
            .objects_pin_missing(REPO, WS, OP, &ids)
            .unwrap()
            .is_empty());
        assert_eq!(other.objects_missing(REPO, &ids).unwrap(), ids);
        assert_eq!(c.objects_publish(REPO).unwrap(), 3);
        assert!(other.objects_missing(REPO, &ids).unwrap().is_empty());
        assert_eq!(other.download(REPO, ids[0]).unwrap(), objects[0]);
        assert_eq!(other.download(REPO, ids[2]).unwrap(), objects[2]);
        // Nothing left to publish; the pins stayed as they were.
        assert_eq!(c.objects_publish(REPO).unwrap(), 0);
        let repo = env.service().root().open_repository_by_name(REPO).unwrap();
        assert_eq!(pins::count(&repo, WS, OP).unwrap(), 3);
        assert_eq!(
            c.objects_publish("nope").unwrap_err().code(),
            ErrorCode::NotFound
        );
    });
}

#[test]
fn any_other_request_publishes_the_stage_first() {
    both(|env| {
        let mut c = env.client();
        register(&mut c, WS);
        let data = noise(5000, 4);
        let id = chunk(&data);
        // Not pinned beforehand: the staged put pins it itself.
        c.put_object_staged(REPO, WS, OP, id, &data).unwrap();
        let repo = env.service().root().open_repository_by_name(REPO).unwrap();
        assert_eq!(pins::count(&repo, WS, OP).unwrap(), 1);
        assert!(c.objects_missing(REPO, &[id]).unwrap().is_empty());
        assert_eq!(env.client().download(REPO, id).unwrap(), data);
    });
}

#[test]
fn a_full_stage_publishes_itself() {
    both(|env| {
        let mut c = env.client();
        register(&mut c, WS);
        let objects = noises(STAGE_PUBLISH_OBJECTS + 1, 100, 0);
        let ids = stage_all(&mut c, &objects);
        // The first STAGE_PUBLISH_OBJECTS are published by the put that
        // filled the stage, in the background (no further request of this
        // connection needed); the last one waits.
        let mut other = env.client();
        eventually("the full stage published by itself", || {
            let missing = other.objects_missing(REPO, &ids).unwrap();
            assert!(missing.contains(&ids[STAGE_PUBLISH_OBJECTS]), "{missing:?}");
            (missing.len() == 1).then_some(())
        });
        assert_eq!(c.objects_publish(REPO).unwrap(), 1);
        assert!(other.objects_missing(REPO, &ids).unwrap().is_empty());
    });
}

/// A full stage is published in the background while the connection goes
/// on; when that publication fails (here a full volume), the connection's
/// next request says so, and `ObjectsPublish` never reports objects as
/// published that are not stored. Once there is room, the same
/// connection uploads them again.
#[test]
fn a_failed_background_publication_is_reported_by_the_next_request() {
    if !scribe_testkit::env::Volume::available() {
        eprintln!("SKIPPED: SCRIBE_TEST_NO_MOUNT is set, this machine cannot mount a volume");
        return;
    }
    let env = Env::builder(Transport::Tcp).volume(24 << 20).start();
    let mut c = env.client();
    register(&mut c, WS);
    let objects = noises(STAGE_PUBLISH_OBJECTS, 64 << 10, 100);
    let ids: Vec<ObjectId> = objects.iter().map(|o| chunk(o)).collect();
    c.objects_pin_missing(REPO, WS, OP, &ids).unwrap();
    let filler = env.volume().unwrap().path().join("filler");
    fill(&filler);
    // Every put is answered (the last starts the publication) ...
    for (id, o) in ids.iter().zip(&objects) {
        c.put_object_staged(REPO, WS, OP, *id, o).unwrap();
    }
    // ... and the publication's failure is the next request's.
    let err = c.objects_publish(REPO).unwrap_err();
    assert_eq!(err.code(), ErrorCode::StorageFull, "{err}");
    std::fs::remove_file(&filler).unwrap();
    let missing = eventually("the store usable again", || {
        let mut fresh = env.client();
        match fresh.objects_missing(REPO, &ids) {
            Ok(m) => Some(m),
            Err(e) if e.code() == ErrorCode::ServerBusy => None,
            Err(e) => panic!("{e}"),
        }
    });
    assert_eq!(
        missing.len(),
        ids.len(),
        "nothing of the failed stage is stored"
    );
    for (id, o) in ids.iter().zip(&objects) {
        c.put_object_staged(REPO, WS, OP, *id, o).unwrap();
    }
    c.objects_publish(REPO).unwrap();
    let mut other = env.client();
    assert!(other.objects_missing(REPO, &ids).unwrap().is_empty());
    assert_eq!(other.download(REPO, ids[7]).unwrap(), objects[7]);
}

/// A connection whose full stage was published in the background holds
/// no upload memory once that publication ended: it is under the ordinary
/// idle timeout, not the much shorter one of a connection in the middle
/// of an upload, and its next request gets the publication's outcome.
#[test]
fn a_finished_background_publication_is_not_an_idle_upload() {
    let opts = scribe_server::ListenOptions {
        timeouts: scribe_server::Timeouts {
            upload_idle: std::time::Duration::from_millis(300),
            ..scribe_server::Timeouts::default()
        },
        ..scribe_server::ListenOptions::default()
    };
    let env = Env::builder(Transport::Tcp).listen(opts).start();
    let mut c = env.client();
    register(&mut c, WS);
    let objects = noises(STAGE_PUBLISH_OBJECTS, 100, 300);
    let ids = stage_all(&mut c, &objects);
    let mut other = env.client();
    eventually("the full stage published", || {
        other
            .objects_missing(REPO, &ids)
            .unwrap()
            .is_empty()
            .then_some(())
    });
    std::thread::sleep(std::time::Duration::from_millis(900));
    assert_eq!(c.objects_publish(REPO).unwrap(), 0, "still connected");
}

/// `n` objects of `len` bytes of noise, seeds from `seed`.
fn noises(n: usize, len: usize, seed: u64) -> Vec<Vec<u8>> {
    (0..n).map(|i| noise(len, seed + i as u64)).collect()
}

/// Pin `objects` for `OP` and stage each with its own put; their ids.
fn stage_all(c: &mut scribe_client::Client, objects: &[Vec<u8>]) -> Vec<ObjectId> {
    let ids: Vec<ObjectId> = objects.iter().map(|o| chunk(o)).collect();
    c.objects_pin_missing(REPO, WS, OP, &ids).unwrap();
    for (id, o) in ids.iter().zip(objects) {
        c.put_object_staged(REPO, WS, OP, *id, o).unwrap();
    }
    ids
}

/// Fill the volume holding `filler` until a write fails.
fn fill(filler: &std::path::Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(filler).unwrap();
    let block = vec![0xA5u8; 256 << 10];
    loop {
        match f.write(&block) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(28), "filling stopped by {e}");
                break;
            }
        }
    }
    f.sync_all().unwrap();
}

#[test]
fn staged_bytes_are_verified_and_a_dropped_connection_stores_nothing() {
    both(|env| {
        let mut c = env.client();
        register(&mut c, WS);
        let data = noise(3000, 5);
        let wrong = chunk(b"something else");
        let err = c.put_object_staged(REPO, WS, OP, wrong, &data).unwrap_err();
        assert_eq!(err.code(), ErrorCode::Corrupt);
        assert_eq!(c.objects_publish(REPO).unwrap(), 0);
        // Staged but never published: gone with the connection.
        let id = chunk(&data);
        c.put_object_staged(REPO, WS, OP, id, &data).unwrap();
        drop(c);
        let mut fresh = env.client();
        assert_eq!(fresh.objects_missing(REPO, &[id]).unwrap(), vec![id]);
    });
}

#[test]
fn staged_bytes_hold_the_upload_budget_until_published() {
    both(|env| {
        env.service().set_upload_budget(10 << 20);
        let mut c = env.client();
        register(&mut c, WS);
        let a = noise(6 << 20, 6);
        let b = noise(6 << 20, 7);
        c.put_object_staged(REPO, WS, OP, chunk(&a), &a).unwrap();
        // The first object's 6 MiB stay reserved while staged.
        let err = c
            .put_object_staged(REPO, WS, OP, chunk(&b), &b)
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::ServerBusy);
        assert_eq!(c.objects_publish(REPO).unwrap(), 1);
        // Published: the budget is free again.
        c.put_object_staged(REPO, WS, OP, chunk(&b), &b).unwrap();
        assert_eq!(c.objects_publish(REPO).unwrap(), 1);
        assert!(c
            .objects_missing(REPO, &[chunk(&a), chunk(&b)])
            .unwrap()
            .is_empty());
    });
}

/// A slow upload becomes durable at least every `STAGE_PUBLISH_AGE`, not
/// only when its stage fills: a staged put made once the stage's oldest
/// object is that old publishes the stage (what a re-run of a killed
/// upload resumes from).
#[test]
fn a_stage_older_than_its_age_limit_is_published_by_the_next_staged_put() {
    both(|env| {
        let mut c = env.client();
        register(&mut c, WS);
        let mut other = env.client();
        let objects = [noise(3000, 7), noise(4000, 8), noise(5000, 9)];
        let ids: Vec<ObjectId> = objects.iter().map(|o| chunk(o)).collect();
        c.objects_pin_missing(REPO, WS, OP, &ids).unwrap();
        c.put_object_staged(REPO, WS, OP, ids[0], &objects[0])
            .unwrap();
        c.put_object_staged(REPO, WS, OP, ids[1], &objects[1])
            .unwrap();
        // Young: still held by this connection only.
        assert_eq!(other.objects_missing(REPO, &ids[..2]).unwrap(), &ids[..2]);
        std::thread::sleep(
            scribe_server::service::upload::STAGE_PUBLISH_AGE
                + std::time::Duration::from_millis(50),
        );
        c.put_object_staged(REPO, WS, OP, ids[2], &objects[2])
            .unwrap();
        // The third put found the stage old enough: all three are stored
        // (by the publication it started in the background).
        eventually("the old stage published", || {
            other
                .objects_missing(REPO, &ids)
                .unwrap()
                .is_empty()
                .then_some(())
        });
        assert_eq!(c.objects_publish(REPO).unwrap(), 0);
        assert_eq!(other.download(REPO, ids[1]).unwrap(), objects[1]);
    });
}

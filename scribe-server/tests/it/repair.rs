//! Issue #14 item 12 with the real binary: a flipped byte in a pack is
//! named by `verify` (object and `path@change`); `verify --repair` drops
//! the damaged copy so the store asks uploads for it and names the lost
//! file; an honest client's next upload of those bytes heals it; and
//! `compact-objects` completes over accepted manifests it cannot follow.

use std::path::Path;
use std::process::{Command, Output};

use scribe_format::changeset::Entry;
use scribe_format::wire::message as m;
use scribe_format::wire::{Request, Response};
use scribe_format::{ManifestId, ObjectId, ObjectKind, OperationId, WorkspaceId};
use scribe_server::{InProcessConnection, Service};
use scribe_testkit::change::{accepted, change, file, put_many_req, submit_req, Requests};
use scribe_testkit::data::noise;
use scribe_testkit::poison::accept_unchecked;
use scribe_testkit::REPO;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scribe-server"))
        .args(args)
        .output()
        .expect("run scribe-server")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A `--data` that holds no data root (mistyped, never initialised) is
/// named with the way on, by the commands an operator starts with.
#[test]
fn a_missing_data_root_points_at_init() {
    let dir = tempfile::tempdir().unwrap();
    let nope = dir.path().join("nope");
    let nope = nope.to_str().unwrap();
    for args in [
        &["serve", "--data", nope, "--listen", "127.0.0.1:0"][..],
        &["doctor", "--data", nope],
    ] {
        let o = run(args);
        assert!(!o.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("Hint: there is no data root at --data")
                && err.contains("scribe-server init --data DIR"),
            "{args:?}: {err}"
        );
    }
    assert!(!dir.path().join("nope").exists(), "nothing made");
}

/// Flip one byte in the middle of `needle` in the pack that holds it.
fn flip_in_pack(data: &Path, needle: &[u8]) {
    for repo in std::fs::read_dir(data.join("repos")).unwrap() {
        let Ok(list) = std::fs::read_dir(repo.unwrap().path().join("objects/packs")) else {
            continue;
        };
        for pack in list {
            let path = pack.unwrap().path();
            let mut bytes = std::fs::read(&path).unwrap();
            if let Some(at) = bytes.windows(needle.len()).position(|w| w == needle) {
                bytes[at + needle.len() / 2] ^= 0x40;
                std::fs::write(&path, bytes).unwrap();
                return;
            }
        }
    }
    panic!("no pack holds the bytes");
}

fn new_root(dir: &Path) -> std::path::PathBuf {
    let data = dir.join("data");
    let svc = Service::create(&data).unwrap();
    scribe_server::service::dispatch::repo_create(&svc, REPO).unwrap();
    data
}

/// What an honest client does on its next submit of a file holding the
/// chunk: pin every id of the candidate and send those the server lacks.
fn honest_upload(data: &Path, ws: WorkspaceId, objects: &[(ObjectId, Vec<u8>)]) -> Vec<ObjectId> {
    let mut c = InProcessConnection::new(Service::open(data).unwrap());
    let op = OperationId::random();
    let ids: Vec<ObjectId> = objects.iter().map(|(id, _)| *id).collect();
    let missing = match c.ask(Request::ObjectsPinMissing(m::ObjectsPinMissing {
        repo: REPO.into(),
        operation: op,
        workspace: ws,
        ids,
    })) {
        Response::ObjectsPinMissing(r) => r.missing,
        other => panic!("{other:?}"),
    };
    let send: Vec<_> = objects
        .iter()
        .filter(|(id, _)| missing.contains(id))
        .cloned()
        .collect();
    if !send.is_empty() {
        match c.ask(Request::ObjectPutMany(put_many_req(ws, op, &send))) {
            Response::ObjectPutMany(_) => {}
            other => panic!("{other:?}"),
        }
    }
    missing
}

#[test]
fn verify_repair_drops_a_damaged_copy_names_the_lost_file_and_an_upload_heals_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = new_root(dir.path());
    let d = data.to_str().unwrap();
    let body = noise(64 << 10, 7);
    let f = file(&body);
    let chunk = f.objects[0].0;
    assert_eq!(chunk.kind, ObjectKind::Chunk);
    let ws = WorkspaceId::random();
    {
        let mut c = InProcessConnection::new(Service::open(&data).unwrap());
        c.register(ws);
        let ch = change(&[("art.bin", Some(&body), 0), ("other.txt", Some(b"fine"), 0)]);
        assert_eq!(
            accepted(&c.upload_and_submit(ws, OperationId::random(), &ch, "seed")),
            1
        );
    }
    flip_in_pack(&data, &body);

    // verify: the object, where it lies, and the accepted file it breaks.
    let out = run(&["verify", "--data", d]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains(&format!("{chunk} at ")) && !l.contains("CorruptObject")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("art.bin@1") && l.contains(&chunk.to_string())),
        "{text}"
    );
    assert!(!text.contains("other.txt@"), "{text}");
    // Before the repair the server says it holds the chunk: an honest
    // client would never send it again.
    assert!(honest_upload(&data, ws, &f.objects).is_empty());

    // verify --repair: the row is dropped, the lost file is named.
    let out = run(&["verify", "--repair", "--data", d]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("dropped damaged") && l.contains(&chunk.to_string())),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.contains("manifests.objects-missing")
            && l.contains("art.bin@1")
            && l.contains(&chunk.to_string())),
        "{text}"
    );
    assert!(!text.contains("other.txt@"), "{text}");
    // verify (read-only) now says exactly the same about the file, and no
    // longer finds a damaged object.
    let out = run(&["verify", "--data", d]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(!text.contains(&format!("{chunk} at ")), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("manifests.objects-missing") && l.contains("art.bin@1")),
        "{text}"
    );

    // The next honest upload of the file's objects sends the chunk (and
    // only it), and the store holds it again.
    assert_eq!(honest_upload(&data, ws, &f.objects), vec![chunk]);
    for cmd in ["verify", "doctor"] {
        let out = run(&[cmd, "--data", d]);
        assert!(out.status.success(), "{cmd}: {}", stdout(&out));
    }
    let mut c = InProcessConnection::new(Service::open(&data).unwrap());
    assert_eq!(c.object(REPO, chunk), body);
}

#[test]
fn compact_objects_completes_past_accepted_manifests_it_cannot_follow() {
    let dir = tempfile::tempdir().unwrap();
    let data = new_root(dir.path());
    let d = data.to_str().unwrap();
    let good = file(b"good bytes");
    // Bytes that are not a manifest, and a manifest whose chunk was never
    // stored.
    let junk = b"not a manifest at all".to_vec();
    let mut junk_state = file(b"junk").state;
    junk_state.manifest = ManifestId::of_payload(&junk);
    let absent = file(b"absent");
    let mut objects = good.objects.clone();
    objects.push((ObjectId::manifest(junk_state.manifest), junk.clone()));
    objects.push(absent.objects[1].clone());
    let absent_chunk = absent.objects[0].0;
    assert_eq!(absent_chunk.kind, ObjectKind::Chunk);
    let change = accept_unchecked(
        &data,
        REPO,
        &objects,
        vec![
            Entry::add("good.txt", good.state),
            Entry::add("junk.txt", junk_state),
            Entry::add("absent.txt", absent.state),
        ],
    );
    assert_eq!(change, 1);

    let out = run(&["compact-objects", "--data", d]);
    let text = stdout(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{text}{err}");
    assert!(!err.contains("Error:"), "compaction failed: {err}");
    assert!(text.lines().any(|l| l.contains("objects kept")), "{text}");
    let junk_manifest = ObjectId::manifest(junk_state.manifest);
    for (id, why) in [
        (absent_chunk, "missing"),
        (junk_manifest, "does not decode"),
    ] {
        assert!(
            text.lines()
                .any(|l| l.contains("not kept") && l.contains(&id.to_string()) && l.contains(why)),
            "{id} ({why}):\n{text}"
        );
    }
    // Everything still referenced is kept: the good file reads back, and
    // the undecodable manifest's bytes are still there for doctor to name.
    let mut c = InProcessConnection::new(Service::open(&data).unwrap());
    for (id, bytes) in &good.objects {
        assert_eq!(&c.object(REPO, *id), bytes);
    }
    assert_eq!(c.object(REPO, junk_manifest), junk);
    drop(c);
    let out = run(&["doctor", "--data", d]);
    let text = stdout(&out);
    assert!(
        text.contains("junk.txt@1") && text.contains("absent.txt@1"),
        "{text}"
    );
}

/// ObjectGetMany reads only what fits in its answer (4 MiB): the object
/// after one of over 2 MiB is left for the next request unread (reading
/// it only to drop it cost a fresh workspace a second read of every such
/// object), so a damaged copy of it fails only a request that asks for
/// it first.
#[test]
fn get_many_leaves_an_object_it_has_no_room_for_unread() {
    let dir = tempfile::tempdir().unwrap();
    let data = new_root(dir.path());
    // 3 MiB files that profile 1 keeps in one chunk (the test client
    // sends each file as one chunk).
    let bodies: Vec<Vec<u8>> = (40..200)
        .map(|seed| noise(3 << 20, seed))
        .filter(|b| scribe_objects::chunk_boundaries(b).len() == 1)
        .take(4)
        .collect();
    let big: Vec<(ObjectId, Vec<u8>)> = bodies
        .iter()
        .flat_map(|b| file(b).objects)
        .filter(|(id, bytes)| id.kind == ObjectKind::Chunk && bytes.len() > 2 << 20)
        .collect();
    assert!(big.len() >= 2, "{} chunks over 2 MiB", big.len());
    let ws = WorkspaceId::random();
    {
        let mut c = InProcessConnection::new(Service::open(&data).unwrap());
        c.register(ws);
        let names: Vec<String> = (0..bodies.len()).map(|i| format!("f{i}.bin")).collect();
        let entries: Vec<(&str, Option<&[u8]>, u64)> = names
            .iter()
            .zip(&bodies)
            .map(|(n, b)| (n.as_str(), Some(b.as_slice()), 0))
            .collect();
        let ch = change(&entries);
        // One object per request (a request carries at most 4 MiB).
        let op = OperationId::random();
        for o in &ch.objects {
            match c.ask(Request::ObjectPutMany(put_many_req(
                ws,
                op,
                std::slice::from_ref(o),
            ))) {
                Response::ObjectPutMany(_) => {}
                other => panic!("{other:?}"),
            }
        }
        match c.ask(Request::Submit(submit_req(ws, op, ch.id, "seed"))) {
            Response::Submitted(o) => assert_eq!(accepted(&o), 1),
            other => panic!("{other:?}"),
        }
    }
    let (a, b) = (&big[0], &big[1]);
    flip_in_pack(&data, &b.1);
    let mut c = InProcessConnection::new(Service::open(&data).unwrap());
    let mut ask = |ids: Vec<ObjectId>| {
        c.ask(Request::ObjectGetMany(m::ObjectGetMany {
            repo: REPO.into(),
            ids,
        }))
    };
    match ask(vec![a.0, b.0]) {
        Response::ObjectGetMany(r) => {
            assert_eq!(r.objects.len(), 1);
            assert_eq!(r.objects[0].id, a.0);
            assert!(r.objects[0].data.0 == a.1, "a's bytes");
        }
        other => panic!("{other:?}"),
    }
    // Asked first, the damaged copy is named.
    match ask(vec![b.0, a.0]) {
        Response::Error(e) => {
            assert_eq!(e.error_code(), scribe_format::ErrorCode::Corrupt, "{e:?}")
        }
        other => panic!("{other:?}"),
    }
}

/// A pack cut short (its last committed entry torn) stops the store from
/// opening: the commands that open it say where to go (`verify`, then
/// `rebuild-locator`), `verify` names the damage in sentences, and
/// `rebuild-locator` names the entry it could not index.
#[test]
fn a_pack_cut_short_is_named_with_the_way_out() {
    let dir = tempfile::tempdir().unwrap();
    let data = new_root(dir.path());
    let d = data.to_str().unwrap();
    {
        let mut c = InProcessConnection::new(Service::open(&data).unwrap());
        let ws = WorkspaceId([4; 16]);
        c.register(ws);
        let body = noise(7, 200_000);
        let ch = change(&[("art.bin", Some(&body[..]), 0)]);
        assert_eq!(
            accepted(&c.upload_and_submit(ws, OperationId::random(), &ch, "seed")),
            1
        );
    }
    let pack = std::fs::read_dir(data.join("repos"))
        .unwrap()
        .map(|r| r.unwrap().path().join("objects/packs/00000001.pack"))
        .find(|p| p.exists())
        .unwrap();
    let len = std::fs::metadata(&pack).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&pack)
        .unwrap()
        .set_len(len - 1)
        .unwrap();

    // Its only repository cannot open: the data root is not served.
    let e = Service::open(&data).err().expect("nothing to serve");
    assert!(
        e.to_string().contains("shorter than its committed length"),
        "{e}"
    );
    let out = run(&["doctor", "--data", d]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!("problem: {REPO}: cannot be opened:")),
        "{text}"
    );
    assert!(text.contains("shorter than its committed length"), "{text}");
    assert!(
        text.contains("rebuild-locator --data DIR --repo NAME"),
        "{text}"
    );

    let out = run(&["verify", "--data", d]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!("rebuild-locator --repo {REPO}")),
        "{text}"
    );
    assert!(text.contains("pack 1 is "), "{text}");
    assert!(!text.contains("PackShorterThanCommitted"), "{text}");

    let out = run(&["rebuild-locator", "--data", d]);
    let text = stdout(&out);
    assert!(text.contains("entries not indexed"), "{text}");
    assert!(text.contains("torn entry"), "{text}");
    assert!(!text.contains("RebuildReport"), "{text}");
    // The store opens again; doctor names what the torn entry held.
    let out = run(&["doctor", "--data", d]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("shorter than its committed length"), "{err}");
}

/// One repository whose database is damaged no longer stops the data
/// root: it is set aside and refused by name while the others serve,
/// `doctor` names it and still checks the others, and `repo create` works.
#[test]
fn a_damaged_repository_is_set_aside_while_the_others_serve() {
    let dir = tempfile::tempdir().unwrap();
    let data = new_root(dir.path());
    let d = data.to_str().unwrap();
    let other = {
        let svc = Service::open(&data).unwrap();
        scribe_server::service::dispatch::repo_create(&svc, "other")
            .unwrap()
            .id
    };
    std::fs::write(
        data.join("repos")
            .join(other.to_hex())
            .join(scribe_metadata::repo::METADATA_FILE),
        b"not a database at all",
    )
    .unwrap();

    let svc = Service::open(&data).expect("the healthy repository serves");
    let aside = svc.root().set_aside();
    assert_eq!(
        aside.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(),
        ["other"]
    );
    let mut c = InProcessConnection::new(svc);
    let ws = WorkspaceId([6; 16]);
    c.register(ws);
    let ch = change(&[("a.txt", Some(&b"served"[..]), 0)]);
    assert_eq!(
        accepted(&c.upload_and_submit(ws, OperationId::random(), &ch, "still serving")),
        1
    );
    let reply = c.ask(Request::WorkspaceRegister(
        scribe_testkit::change::register_req("other", ws),
    ));
    let Response::Error(e) = reply else {
        panic!("the damaged repository answered {reply:?}");
    };
    assert!(
        e.message.contains("\"other\" is unavailable") && e.message.contains("doctor --repo other"),
        "{}",
        e.message
    );
    assert!(
        !e.message.contains(d),
        "the data root is not shown: {}",
        e.message
    );
    drop(c);

    let out = run(&["doctor", "--data", d]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("problem: other: cannot be opened:"), "{text}");
    assert!(
        text.contains(&format!("{REPO}: 1 commits")),
        "the healthy repository is still checked: {text}"
    );
    let out = run(&["repo", "create", "--data", d, "third"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

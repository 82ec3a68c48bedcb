//! The S3 tier behind the real `scribe-server` binary, against a real
//! radosgw: `--ack durable` acknowledges only what is in the bucket,
//! `--ack local` catches up in the background and after SIGKILL, an
//! unreachable bucket answers `tier_unavailable` and loses nothing.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nokv_bridge::tier::{S3Config, S3Provider, Tier, TierOptions};
use scribe_format::wire::message as m;
use scribe_format::wire::{Request, Response};
use scribe_format::{ErrorCode, ObjectId, OperationId, RepositoryId, WorkspaceId};
use scribe_testkit::change::{accepted, change, put_many_req, submit_req, Requests};
use scribe_testkit::rgw::rgw;
use scribe_testkit::{wire, REPO};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_scribe-server"))
}

/// Whether a command succeeded, and what it printed (stdout, then stderr).
fn said(out: &std::process::Output) -> (bool, String) {
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

struct Bucket {
    url: String,
    prefix: String,
}

fn bucket() -> Bucket {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let prefix = format!("server-tests/{}-{nanos}", std::process::id());
    Bucket {
        url: format!("s3://{}/{prefix}", rgw().bucket),
        prefix,
    }
}

fn provider(b: &Bucket) -> Arc<S3Provider> {
    let r = rgw();
    Arc::new(
        S3Provider::new(&S3Config {
            bucket: r.bucket.clone(),
            prefix: b.prefix.clone(),
            endpoint: Some(r.endpoint.clone()),
            region: "us-east-1".into(),
            access_key: Some(r.access_key.clone()),
            secret_key: Some(r.secret_key.clone()),
            timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(2),
            retries: 2,
        })
        .unwrap(),
    )
}

struct Served {
    child: Child,
    addr: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn init(dir: &Path) -> PathBuf {
    let data = dir.join("data");
    let d = data.to_str().unwrap();
    assert!(bin()
        .args(["init", "--data", d])
        .status()
        .unwrap()
        .success());
    assert!(bin()
        .args(["repo", "create", "--data", d, REPO])
        .stdout(Stdio::null())
        .status()
        .unwrap()
        .success());
    data
}

fn serve(data: &Path, b: &Bucket, endpoint: &str, extra: &[&str]) -> Served {
    serve_env(data, b, endpoint, extra, &[])
}

fn serve_env(
    data: &Path,
    b: &Bucket,
    endpoint: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Served {
    let runtime = data.with_extension("run");
    let _ = std::fs::remove_file(runtime.join("listen"));
    let r = rgw();
    let mut child = bin()
        .args([
            "serve",
            "--data",
            data.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ])
        .arg("--runtime-dir")
        .arg(&runtime)
        .args(["--tier", &b.url, "--tier-endpoint", endpoint])
        .args(extra)
        .env("AWS_ACCESS_KEY_ID", &r.access_key)
        .env("AWS_SECRET_ACCESS_KEY", &r.secret_key)
        .env_remove("AWS_ENDPOINT_URL")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Waiting for a file is not a timing assertion: it fails only if the
    // server exits without listening.
    loop {
        if let Ok(s) = std::fs::read_to_string(runtime.join("listen")) {
            if s.ends_with('\n') {
                return Served {
                    child,
                    addr: s.trim().to_string(),
                };
            }
        }
        if let Some(st) = child.try_wait().unwrap() {
            panic!("serve exited with {st} before listening");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn kill(mut s: Served) {
    s.child.kill().unwrap();
    s.child.wait().unwrap();
}

/// The tier record of a stopped data root.
fn record(data: &Path, b: &Bucket) -> Tier {
    Tier::open(
        &data.join("tier/tier.redb"),
        0,
        provider(b),
        TierOptions::default(),
    )
    .unwrap()
}

fn repo_id(c: &mut impl Requests) -> RepositoryId {
    c.repo_list()[0].id
}

fn submit(c: &mut impl Requests, n: u8, files: &[(&str, &[u8])]) -> m::Outcome {
    let entries: Vec<(&str, Option<&[u8]>, u64)> =
        files.iter().map(|(p, b)| (*p, Some(*b), 0)).collect();
    c.upload_and_submit(
        WorkspaceId([9; 16]),
        OperationId([n; 16]),
        &change(&entries),
        "m",
    )
}

fn big(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(seed) ^ (i >> 9) as u8)
        .collect()
}

fn tier_verify(data: &Path, b: &Bucket) -> (bool, String) {
    let r = rgw();
    let out = bin()
        .args(["tier", "verify", "--data", data.to_str().unwrap()])
        .args(["--tier", &b.url, "--tier-endpoint", &r.endpoint])
        .env("AWS_ACCESS_KEY_ID", &r.access_key)
        .env("AWS_SECRET_ACCESS_KEY", &r.secret_key)
        .output()
        .unwrap();
    said(&out)
}

#[test]
fn a_durable_acknowledgement_means_the_change_is_in_the_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    let s = serve(&data, &b, &rgw().endpoint, &["--ack", "durable"]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    let repo = repo_id(&mut c);
    c.register(WorkspaceId([9; 16]));
    let a = big(3, 3 << 20);
    let n1 = accepted(&submit(&mut c, 1, &[("a.bin", &a), ("b.txt", b"bee")]));
    // The second change keeps a.bin and adds c.txt: a.bin's chunks are
    // not uploaded again.
    let n2 = accepted(&submit(&mut c, 2, &[("c.txt", b"sea")]));
    // A change whose objects travel in its submission (`SubmitInline`).
    let n3 = accepted(&c.submit_carrying(
        WorkspaceId([9; 16]),
        OperationId([3; 16]),
        &change(&[("d.txt", Some(b"dee".as_slice()), 0)]),
        "m",
    ));
    // SIGKILL right after the acknowledgement: what was acknowledged must
    // already be in the bucket.
    kill(s);
    let t = record(&data, &b);
    assert_eq!(t.uploaded_through(&repo.0).unwrap(), n3);
    for (content, _) in [
        (&a[..], n1),
        (b"bee".as_slice(), n1),
        (b"sea".as_slice(), n2),
        (b"dee".as_slice(), n3),
    ] {
        let f = scribe_testkit::change::file(content);
        for (id, bytes) in &f.objects {
            let id: ObjectId = *id;
            assert_eq!(
                &t.read_object(&repo.0, &id).unwrap().expect("in the bucket"),
                bytes,
                "{id}"
            );
        }
    }
    let revs = t.revisions().unwrap();
    assert_eq!(
        revs.len(),
        6,
        "per change: a commit revision and a content revision (new chunks)"
    );
    drop(t);
    let (ok, out) = tier_verify(&data, &b);
    assert!(ok, "{out}");
}

#[test]
fn local_acknowledgement_catches_up_in_the_background_and_after_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    let s = serve(&data, &b, &rgw().endpoint, &[]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    let repo = repo_id(&mut c);
    c.register(WorkspaceId([9; 16]));
    let mut last = 0;
    for i in 1..=4u8 {
        let body = big(i + 10, 600_000);
        last = accepted(&submit(&mut c, i, &[(&format!("f{i}.bin"), &body)]));
    }
    // Killed at once: whatever was not uploaded yet is the backlog.
    drop(c);
    kill(s);
    let s = serve(&data, &b, &rgw().endpoint, &[]);
    // The restarted uploader finishes the backlog; `tier status` says so.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = bin()
            .args(["tier", "status", "--data", data.to_str().unwrap()])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if text.contains(&format!("uploaded-through {last} head {last} backlog 0")) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the backlog did not drain: {text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    kill(s);
    let (ok, out) = tier_verify(&data, &b);
    assert!(ok, "{out}");
    let t = record(&data, &b);
    assert_eq!(t.uploaded_through(&repo.0).unwrap(), last);
    // Early uploads the kill cut were given up at the restart (their
    // revisions Deleted); the changes hold one commit and one content
    // revision each.
    assert_eq!(
        t.revisions()
            .unwrap()
            .values()
            .filter(|r| r.state == nokv_bridge::tier::Lifecycle::Available)
            .count(),
        8,
        "commit + content per change"
    );
    assert!(t.staging().unwrap().is_empty());
}

#[test]
fn an_unreachable_bucket_answers_tier_unavailable_and_the_change_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let s = serve(
        &data,
        &b,
        &dead,
        &["--ack", "durable", "--tier-ack-timeout", "2s"],
    );
    let mut c = wire::tcp(s.addr.parse().unwrap());
    c.register(WorkspaceId([9; 16]));
    let ws = WorkspaceId([9; 16]);
    let op = OperationId([7; 16]);
    let ch = change(&[("x.txt", Some(b"ex".as_slice()), 0)]);
    let put = Request::ObjectPutMany(put_many_req(ws, op, &ch.objects));
    assert!(matches!(c.ask(put), Response::ObjectPutMany(_)));
    // Accepted locally, but the bucket cannot confirm it in time: the
    // submit and a later question about its outcome are both answered
    // tier_unavailable.
    let outcome_req = || {
        Request::OperationOutcome(m::OperationOutcome {
            repo: REPO.into(),
            operation: op,
        })
    };
    for req in [
        Request::Submit(submit_req(ws, op, ch.id, "m")),
        outcome_req(),
    ] {
        match c.ask(req) {
            Response::Error(e) => {
                assert_eq!(e.code, ErrorCode::TierUnavailable.number(), "{e:?}")
            }
            other => panic!("an outcome not in the bucket was answered: {other:?}"),
        }
    }
    drop(c);
    kill(s);
    // The bucket is back: the same question gets the accepted outcome.
    let s = serve(&data, &b, &rgw().endpoint, &["--ack", "durable"]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    match c.ask(outcome_req()) {
        Response::OperationOutcome(o) => {
            let o = o.outcome.expect("recorded");
            assert_eq!((o.code, o.change), (0, 1), "{o:?}");
        }
        other => panic!("{other:?}"),
    }
    kill(s);
    let (ok, out) = tier_verify(&data, &b);
    assert!(ok, "{out}");
}

/// Whether the local store of the (stopped) data root holds `id`.
/// The one repository of the data root at `data`.
fn only_repo(data: &Path) -> RepositoryId {
    scribe_metadata::DataRoot::open(data)
        .unwrap()
        .list_repositories()
        .unwrap()[0]
        .id
}

fn held_locally(data: &Path, id: &ObjectId) -> bool {
    let repos = data.join("repos");
    let dir = std::fs::read_dir(&repos)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let store = scribe_objects::ObjectStore::open(dir.join("objects")).unwrap();
    store.contains(id).unwrap()
}

#[test]
fn an_evicted_store_serves_its_chunks_from_the_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    let s = serve(&data, &b, &rgw().endpoint, &["--ack", "durable"]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    c.register(WorkspaceId([9; 16]));
    let a = big(5, 3 << 20);
    accepted(&submit(&mut c, 1, &[("a.bin", &a)]));
    drop(c);
    kill(s);
    let f = scribe_testkit::change::file(&a);
    let chunks: Vec<ObjectId> = f
        .objects
        .iter()
        .map(|(id, _)| *id)
        .filter(|id| id.kind == scribe_format::ObjectKind::Chunk)
        .collect();
    assert!(!chunks.is_empty());
    assert!(chunks.iter().all(|id| held_locally(&data, id)));
    let r = rgw();
    let out = bin()
        .args(["tier", "evict", "--data", data.to_str().unwrap()])
        .args(["--tier", &b.url, "--tier-endpoint", &r.endpoint])
        .env("AWS_ACCESS_KEY_ID", &r.access_key)
        .env("AWS_SECRET_ACCESS_KEY", &r.secret_key)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        chunks.iter().all(|id| !held_locally(&data, id)),
        "the chunks the bucket holds left the local store: {}",
        String::from_utf8_lossy(&out.stdout)
    );

    let s = serve(&data, &b, &rgw().endpoint, &["--ack", "durable"]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    let ids: Vec<ObjectId> = f.objects.iter().map(|(id, _)| *id).collect();
    // Not missing (the bucket has them), and read back exactly.
    match c.ask(Request::ObjectsMissing(m::ObjectsMissing {
        repo: REPO.into(),
        ids: ids.clone(),
    })) {
        Response::ObjectsMissing(r) => assert!(r.missing.is_empty(), "{:?}", r.missing),
        other => panic!("{other:?}"),
    }
    for (id, bytes) in &f.objects {
        assert_eq!(&c.object(REPO, *id), bytes, "{id}");
    }
    // A change naming the same content is accepted.
    accepted(&submit(&mut c, 2, &[("copy.bin", &a)]));
    // The reads put the chunks back into the local store (in the
    // background: wait for it).
    reads_line(&data, |r| r[2] >= chunks.len() as u64 && r[3] == 0);
    kill(s);
    assert!(chunks.iter().all(|id| held_locally(&data, id)));
}

#[path = "../../../nokv-bridge/tests/it/proxy.rs"]
#[allow(dead_code)]
mod proxy;

fn tier_cmd(data: &Path, b: &Bucket, endpoint: &str, args: &[&str]) -> (bool, String) {
    let r = rgw();
    let out = bin()
        .args(args)
        .args(["--data", data.to_str().unwrap()])
        .args(["--tier", &b.url, "--tier-endpoint", endpoint])
        .env("AWS_ACCESS_KEY_ID", &r.access_key)
        .env("AWS_SECRET_ACCESS_KEY", &r.secret_key)
        .output()
        .unwrap();
    said(&out)
}

fn chunks_of(content: &[u8]) -> Vec<ObjectId> {
    scribe_testkit::change::file(content)
        .objects
        .iter()
        .map(|(id, _)| *id)
        .filter(|id| id.kind == scribe_format::ObjectKind::Chunk)
        .collect()
}

/// Change 1: a.bin (v1); change 2: a.bin (v2) and c.txt; change 3: d.txt.
/// Submitted under `durable`; the server is stopped afterwards.
struct History {
    repo: RepositoryId,
    a1: Vec<u8>,
    a2: Vec<u8>,
    /// The bucket keys of a.bin@1's chunks.
    a1_keys: Vec<String>,
}

fn history(data: &Path, b: &Bucket) -> History {
    let s = serve(data, b, &rgw().endpoint, &["--ack", "durable"]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    let repo = repo_id(&mut c);
    c.register(WorkspaceId([9; 16]));
    let (a1, a2) = (big(7, 3 << 20), big(9, 3 << 20));
    accepted(&submit(&mut c, 1, &[("a.bin", &a1)]));
    let entries: Vec<(&str, Option<&[u8]>, u64)> =
        vec![("a.bin", Some(&a2[..]), 1), ("c.txt", Some(b"sea"), 0)];
    accepted(&c.upload_and_submit(
        WorkspaceId([9; 16]),
        OperationId([2; 16]),
        &change(&entries),
        "m",
    ));
    accepted(&submit(&mut c, 3, &[("d.txt", b"dee")]));
    drop(c);
    kill(s);
    let t = record(data, b);
    let a1_keys = chunks_of(&a1)
        .iter()
        .map(|id| t.locate(&repo.0, id).unwrap().unwrap().key.to_key())
        .collect();
    History {
        repo,
        a1,
        a2,
        a1_keys,
    }
}

fn in_bucket(b: &Bucket, key: &str) -> bool {
    use nokv_bridge::tier::Provider;
    provider(b).head(key).unwrap().is_some()
}

#[test]
fn obliterate_gives_up_old_content_in_the_bucket_and_the_store_and_the_head_still_syncs() {
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    let h = history(&data, &b);
    let ep = rgw().endpoint.clone();
    assert!(h.a1_keys.iter().all(|k| in_bucket(&b, k)));

    // A preview changes nothing.
    let (ok, out) = tier_cmd(&data, &b, &ep, &["obliterate", "--repo", REPO, "a.bin"]);
    assert!(ok, "{out}");
    assert!(out.contains("a.bin@1 would be given up"), "{out}");
    assert!(
        out.contains("a.bin@2 kept"),
        "the head revision stays: {out}"
    );
    assert!(h.a1_keys.iter().all(|k| in_bucket(&b, k)), "{out}");
    assert!(chunks_of(&h.a1).iter().all(|id| held_locally(&data, id)));

    let (ok, out) = tier_cmd(
        &data,
        &b,
        &ep,
        &["obliterate", "--repo", REPO, "-y", "a.bin"],
    );
    assert!(ok, "{out}");
    assert!(out.contains("a.bin@1 given up"), "{out}");
    // a.bin@1's content revision is collected: its blocks left the bucket
    // and its chunks the local store.
    assert!(h.a1_keys.iter().all(|k| !in_bucket(&b, k)), "{out}");
    assert!(chunks_of(&h.a1).iter().all(|id| !held_locally(&data, id)));
    let t = record(&data, &b);
    let deleted = t
        .revisions()
        .unwrap()
        .values()
        .filter(|r| r.state == nokv_bridge::tier::Lifecycle::Deleted)
        .count();
    assert_eq!(deleted, 1, "only a.bin@1's content revision");
    assert_eq!(t.purged(&h.repo.0).unwrap(), vec![(1, "a.bin".to_string())]);
    drop(t);
    let (ok, out) = tier_verify(&data, &b);
    assert!(ok, "{out}");

    // An empty local cache: everything still referenced comes from the
    // bucket; what was given up is missing.
    let (ok, out) = tier_cmd(&data, &b, &ep, &["tier", "evict"]);
    assert!(ok, "{out}");
    assert!(chunks_of(&h.a2).iter().all(|id| !held_locally(&data, id)));
    let s = serve(&data, &b, &ep, &["--ack", "durable"]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    for content in [&h.a2[..], b"sea", b"dee"] {
        for (id, bytes) in &scribe_testkit::change::file(content).objects {
            assert_eq!(&c.object(REPO, *id), bytes, "{id}");
        }
    }
    let a1_chunks = chunks_of(&h.a1);
    match c.ask(Request::ObjectsMissing(m::ObjectsMissing {
        repo: REPO.into(),
        ids: a1_chunks.clone(),
    })) {
        Response::ObjectsMissing(r) => assert_eq!(r.missing, a1_chunks),
        other => panic!("{other:?}"),
    }
    // The given-up content can come back as new content.
    accepted(&submit(&mut c, 4, &[("again.bin", &h.a1)]));
    drop(c);
    kill(s);
    let (ok, out) = tier_verify(&data, &b);
    assert!(ok, "{out}");

    // The disk is lost after the obliteration: the record rebuilt from the
    // bucket gives the same content up (its release record) and is the
    // record that was lost.
    let t = record(&data, &b);
    let before = t.revisions().unwrap();
    drop(t);
    std::fs::remove_dir_all(&data).unwrap();
    let (ok, out) = restore_from_tier(&data, &b);
    assert!(ok, "{out}");
    let t = record(&data, &b);
    assert_eq!(t.revisions().unwrap(), before);
    assert_eq!(t.purged(&h.repo.0).unwrap(), vec![(1, "a.bin".to_string())]);
    drop(t);
    let (ok, out) = tier_verify(&data, &b);
    assert!(ok, "{out}");
}

#[test]
fn obliterate_killed_mid_collection_is_finished_by_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    let h = history(&data, &b);
    // The first block delete of the collection is never answered (the
    // release record goes into the bucket before it): the revision is
    // claimed (Deleting) and the process is SIGKILLed while it waits.
    let p = proxy::Proxy::start(&rgw().endpoint);
    p.plan(&[proxy::Fault::SilentAtDelete; 64]);
    let r = rgw();
    let mut child = bin()
        .args(["obliterate", "--data", data.to_str().unwrap()])
        .args(["--tier", &b.url, "--tier-endpoint", &p.endpoint])
        .args(["--repo", REPO, "-y", "a.bin"])
        .env("AWS_ACCESS_KEY_ID", &r.access_key)
        .env("AWS_SECRET_ACCESS_KEY", &r.secret_key)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    while p.faulted.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        if let Some(st) = child.try_wait().unwrap() {
            panic!("obliterate exited with {st} before deleting anything");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    {
        let t = record(&data, &b);
        let states: Vec<_> = t.revisions().unwrap().values().map(|r| r.state).collect();
        assert_eq!(
            states
                .iter()
                .filter(|s| **s == nokv_bridge::tier::Lifecycle::Deleting)
                .count(),
            1,
            "killed mid-collection: {states:?}"
        );
        assert!(h.a1_keys.iter().all(|k| in_bucket(&b, k)));
    }
    // verify names the unfinished deletion (a Deleting revision's rows).
    let (ok, out) = tier_verify(&data, &b);
    assert!(!ok, "{out}");
    // The next run selects nothing new and finishes the collection.
    let (ok, out) = tier_cmd(
        &data,
        &b,
        &rgw().endpoint,
        &["obliterate", "--repo", REPO, "-y", "a.bin"],
    );
    assert!(ok, "{out}");
    assert!(h.a1_keys.iter().all(|k| !in_bucket(&b, k)), "{out}");
    assert!(chunks_of(&h.a1).iter().all(|id| !held_locally(&data, id)));
    let (ok, out) = tier_verify(&data, &b);
    assert!(ok, "{out}");
    let s = serve(&data, &b, &rgw().endpoint, &[]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    for (id, bytes) in &scribe_testkit::change::file(&h.a2).objects {
        assert_eq!(&c.object(REPO, *id), bytes, "{id}");
    }
    kill(s);
}

/// Incompressible bytes (the store compresses with lz4).
fn noise(seed: u32, len: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state as u8
        })
        .collect()
}

fn line_now(data: &Path) -> String {
    wait_for_cache_line(data, |_| true)
}

/// Wait (liveness only: fails if it never happens) until `tier status`
/// shows a line for the repository's cache that satisfies `ok`.
fn wait_for_cache_line(data: &Path, ok: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let text = std::fs::read_to_string(data.join("tier/status")).unwrap_or_default();
        if let Some(l) = text.lines().find(|l| l.starts_with("game cache") && ok(l)) {
            return l.to_string();
        }
        assert!(Instant::now() < deadline, "no such cache line: {text}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn cache_bytes_keeps_the_local_store_under_its_limit_and_reads_fault_in_from_the_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    let limit: u64 = 5 << 20;
    let s = serve(
        &data,
        &b,
        &rgw().endpoint,
        &["--ack", "durable", "--cache-bytes", &limit.to_string()],
    );
    let mut c = wire::tcp(s.addr.parse().unwrap());
    c.register(WorkspaceId([9; 16]));
    // Files of 1 MiB (the chunking minimum: one chunk each), two per
    // change: 8 MiB in all.
    let files: Vec<Vec<u8>> = (0..8u32).map(|i| noise(21 + i, 1 << 20)).collect();
    for (i, pair) in files.chunks(2).enumerate() {
        let (a, b) = (format!("f{i}a.bin"), format!("f{i}b.bin"));
        accepted(&submit(
            &mut c,
            i as u8 + 1,
            &[(&a, &pair[0]), (&b, &pair[1])],
        ));
    }
    let num = |l: &str, field: &str| -> u64 {
        l.split(&format!("{field} "))
            .nth(1)
            .and_then(|t| t.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {field} in {l}"))
    };
    // 8 MiB submitted: a trim (a status line written after it) brings the
    // store back under the limit.
    let line = wait_for_cache_line(&data, |l| num(l, "trims") >= 1 && num(l, "cache") <= limit);
    let mut trims = num(&line, "trims");
    // Every file reads back exactly (most from the bucket: faulted in,
    // which grows the store again past the limit, and it is trimmed
    // again), twice.
    for round in 0..2 {
        for f in &files {
            for (id, bytes) in &scribe_testkit::change::file(f).objects {
                assert_eq!(&c.object(REPO, *id), bytes, "round {round}: {id}");
            }
        }
        let line = wait_for_cache_line(&data, |l| {
            num(l, "trims") > trims && num(l, "cache") <= limit
        });
        trims = num(&line, "trims");
    }
    // What the bucket does not hold was kept: manifests, change sets,
    // commit envelopes (no chunk: every change is in the bucket).
    assert!(num(&line_now(&data), "kept-not-in-bucket") < 1 << 20);
    drop(c);
    kill(s);
    let (ok, out) = tier_verify(&data, &b);
    assert!(ok, "{out}");
}

#[test]
fn cache_bytes_never_evicts_what_the_bucket_does_not_hold() {
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let limit: u64 = 1 << 20;
    let s = serve(&data, &b, &dead, &["--cache-bytes", &limit.to_string()]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    c.register(WorkspaceId([9; 16]));
    let files: Vec<Vec<u8>> = (0..2u32).map(|i| noise(41 + i, 1 << 20)).collect();
    for (i, f) in files.iter().enumerate() {
        let name = format!("g{i}.bin");
        accepted(&submit(&mut c, i as u8 + 1, &[(&name, f)]));
    }
    // A trim ran over the limit and kept everything: nothing is in the
    // bucket.
    let line = wait_for_cache_line(&data, |l| !l.contains("trims 0 "));
    let kept: u64 = line
        .split("kept-not-in-bucket ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(kept > 2 << 20, "{line}");
    drop(c);
    kill(s);
    for f in &files {
        assert!(chunks_of(f).iter().all(|id| held_locally(&data, id)));
    }
}

#[test]
fn serve_finishes_a_cache_trim_killed_during_its_store_swap() {
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    let s = serve(&data, &b, &rgw().endpoint, &["--ack", "durable"]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    let repo = repo_id(&mut c);
    c.register(WorkspaceId([9; 16]));
    let f = noise(77, 1 << 20);
    accepted(&submit(&mut c, 1, &[("t.bin", &f)]));
    drop(c);
    kill(s);
    // A trim evicting t.bin's chunk, stopped right after the old store was
    // renamed away (what a SIGKILL there leaves: the durable marker, no
    // `objects/`).
    let objects = data.join("repos").join(repo.to_hex()).join("objects");
    let chunk = chunks_of(&f)[0];
    let live: Vec<ObjectId> = {
        let store = scribe_objects::ObjectStore::open(&objects).unwrap();
        let ids = store.list().unwrap().into_iter().map(|(id, _)| id);
        ids.filter(|id| *id != chunk).collect()
    };
    let stopped = scribe_objects::compact(
        &objects,
        live,
        scribe_objects::CompactContext {
            repository: repo.0,
            journal_end: 0,
        },
        &scribe_objects::CompactOptions {
            failpoint: Some(scribe_objects::CompactFailpoint::AfterRenameToPrevious),
            ..Default::default()
        },
    );
    assert!(stopped.is_err());
    assert!(!objects.exists());
    // serve --tier completes the swap and serves; the chunk comes from the
    // bucket.
    let s = serve(
        &data,
        &b,
        &rgw().endpoint,
        &["--ack", "durable", "--cache-bytes", "100000000"],
    );
    let mut c = wire::tcp(s.addr.parse().unwrap());
    for (id, bytes) in &scribe_testkit::change::file(&f).objects {
        assert_eq!(&c.object(REPO, *id), bytes, "{id}");
    }
    drop(c);
    kill(s);
    let (ok, out) = tier_verify(&data, &b);
    assert!(ok, "{out}");
}

#[test]
fn the_recovery_journals_are_shipped_to_the_bucket_and_fetched_back_verified() {
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    let s = serve(&data, &b, &rgw().endpoint, &["--ack", "durable"]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    let repo = repo_id(&mut c);
    c.register(WorkspaceId([9; 16]));
    accepted(&submit(&mut c, 1, &[("j1.txt", b"one")]));
    accepted(&submit(&mut c, 2, &[("j2.txt", b"two")]));
    drop(c);
    let archives = [
        ("catalog".to_string(), data.join("catalog.recovery")),
        (
            repo.to_hex(),
            data.join("repos")
                .join(repo.to_hex())
                .join("metadata.recovery"),
        ),
    ];
    // Wait (liveness) until `tier status` says each archive's HEAD is
    // shipped.
    for (name, local) in &archives {
        let head = scribe_metadata::archive::read_head(local).unwrap();
        let want = format!(
            "journal {name} step {{}} segment {} offset {}",
            head.segment, head.offset
        );
        let tail = want.split("{}").nth(1).unwrap().to_string();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let text = std::fs::read_to_string(data.join("tier/status")).unwrap_or_default();
            if text
                .lines()
                .any(|l| l.starts_with(&format!("journal {name} step ")) && l.ends_with(&tail))
            {
                break;
            }
            assert!(Instant::now() < deadline, "{name} not shipped: {text}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    kill(s);
    let t = record(&data, &b);
    for (name, local) in &archives {
        let fetched = dir.path().join(format!("fetched-{name}"));
        let step = t.fetch_archive(name, &fetched).unwrap();
        assert!(step >= 1, "{name}");
        let mine = scribe_metadata::archive::verify(local).unwrap();
        let theirs = scribe_metadata::archive::verify(&fetched).unwrap();
        assert_eq!(
            (theirs.head, theirs.frames),
            (mine.head, mine.frames),
            "{name}: the bucket's archive is the local one"
        );
        // The metadata rebuilds from the bucket's copy alone.
        let a =
            scribe_metadata::archive::recover(&fetched, &dir.path().join(format!("{name}-a.redb")))
                .unwrap();
        let b2 =
            scribe_metadata::archive::recover(local, &dir.path().join(format!("{name}-b.redb")))
                .unwrap();
        assert_eq!(
            (a.end, a.records, a.transactions),
            (b2.end, b2.records, b2.transactions),
            "{name}"
        );
    }
}

fn log(c: &mut impl Requests, branch: scribe_format::BranchId) -> Vec<m::CommitSummary> {
    match c.ask(Request::Log(m::Log {
        repo: REPO.into(),
        branch,
        before: 0,
        limit: 0,
    })) {
        Response::Log(p) => p.commits,
        other => panic!("{other:?}"),
    }
}

/// `scribe-server restore --from-tier` into `data` (absent): success and
/// the output.
fn restore_from_tier(data: &Path, b: &Bucket) -> (bool, String) {
    restore_from_tier_with(data, b, &[])
}

fn restore_from_tier_with(data: &Path, b: &Bucket, extra: &[&str]) -> (bool, String) {
    let r = rgw();
    let out = bin()
        .args(["restore", "--data", data.to_str().unwrap()])
        .args(["--from-tier", &b.url, "--tier-endpoint", &r.endpoint])
        .args(extra)
        .env("AWS_ACCESS_KEY_ID", &r.access_key)
        .env("AWS_SECRET_ACCESS_KEY", &r.secret_key)
        .output()
        .unwrap();
    said(&out)
}

/// Three changes acknowledged under `durable`, the server SIGKILLed right
/// after the last acknowledgement: (workspace info, log, every file's
/// objects).
#[allow(clippy::type_complexity)]
fn durable_history(
    data: &Path,
    b: &Bucket,
) -> (
    m::WorkspaceInfo,
    Vec<m::CommitSummary>,
    Vec<(ObjectId, Vec<u8>)>,
) {
    let s = serve(data, b, &rgw().endpoint, &["--ack", "durable"]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    let ws = c.register(WorkspaceId([9; 16]));
    let (a1, a2) = (big(21, 3 << 20), big(23, 3 << 20));
    accepted(&submit(&mut c, 1, &[("a.bin", &a1), ("b.txt", b"bee")]));
    let entries: Vec<(&str, Option<&[u8]>, u64)> =
        vec![("a.bin", Some(&a2[..]), 1), ("c.txt", Some(b"sea"), 0)];
    accepted(&c.upload_and_submit(
        WorkspaceId([9; 16]),
        OperationId([2; 16]),
        &change(&entries),
        "m",
    ));
    accepted(&submit(&mut c, 3, &[("d.txt", b"dee")]));
    let commits = log(&mut c, ws.branch);
    assert_eq!(commits.len(), 3);
    drop(c);
    // SIGKILL right after the last acknowledgement: everything
    // acknowledged must already be in the bucket, metadata included.
    kill(s);
    let mut objects = Vec::new();
    for content in [&a1[..], &a2[..], b"bee", b"sea", b"dee"] {
        objects.extend(scribe_testkit::change::file(content).objects);
    }
    (ws, commits, objects)
}

#[test]
fn restore_from_tier_rebuilds_every_durable_change_on_an_empty_disk() {
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    let (ws, commits, objects) = durable_history(&data, &b);
    let old_incarnation = ws.incarnation;
    // The disk is lost.
    std::fs::remove_dir_all(&data).unwrap();
    std::fs::remove_dir_all(data.with_extension("run")).unwrap();

    let (ok, out) = restore_from_tier(&data, &b);
    assert!(ok, "{out}");
    // The local store holds no chunk (every chunk comes from the bucket)
    // but every commit, change set and manifest, where they always stay:
    // evict and obliterate, which read them there, work on the restored
    // root as on the original.
    for (id, _) in &objects {
        let chunk = id.kind == scribe_format::ObjectKind::Chunk;
        assert_eq!(held_locally(&data, id), !chunk, "{id} after the restore");
    }
    let endpoint = &rgw().endpoint;
    let (ok, out) = tier_cmd(&data, &b, endpoint, &["tier", "evict"]);
    assert!(ok, "tier evict on the restored root: {out}");
    let (ok, out) = tier_cmd(
        &data,
        &b,
        endpoint,
        &["obliterate", "--repo", REPO, "a.bin@1"],
    );
    assert!(ok, "obliterate's plan on the restored root: {out}");
    let s = serve(&data, &b, &rgw().endpoint, &["--ack", "durable"]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    // The old workspace goes on: its registration answers with a new
    // incarnation (as after `scribe-server restore`), the history is the
    // one acknowledged, every object reads back byte-identical.
    let again = c.register(WorkspaceId([9; 16]));
    assert_eq!(again.branch, ws.branch);
    assert_ne!(
        again.incarnation, old_incarnation,
        "a restore is a new incarnation"
    );
    assert_eq!(log(&mut c, ws.branch), commits);
    for (id, bytes) in &objects {
        assert_eq!(&c.object(REPO, *id), bytes, "{id}");
    }
    // A new submit from the old workspace is accepted (durable: its blocks
    // and journal go into the bucket under the restored root).
    let n4 = accepted(&submit(&mut c, 4, &[("e.txt", b"after the restore")]));
    assert_eq!(n4, 4);
    drop(c);
    kill(s);
    let (ok, out) = tier_verify(&data, &b);
    assert!(ok, "{out}");

    // And the restored root is itself restorable: its new journals ship
    // under its own shard, the restore picks the newest root.
    let again_dir = dir.path().join("second");
    let (ok, out) = restore_from_tier(&again_dir, &b);
    assert!(ok, "{out}");
    let s = serve(&again_dir, &b, &rgw().endpoint, &[]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    let ws2 = c.register(WorkspaceId([9; 16]));
    let l = log(&mut c, ws2.branch);
    assert_eq!(l.len(), 4);
    assert_eq!(&l[1..], &commits[..], "newest first");
    drop(c);
    kill(s);
}

/// A restore drill served against the production bucket ships a root of
/// its own; production then takes another durable change. A later
/// restore must not pick the drill (the newest restore) and drop that
/// change: it is refused, naming the shards, and `--shard` chooses.
#[test]
fn a_restore_drill_beside_production_does_not_hide_productions_later_changes() {
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    let (ws, _, _) = durable_history(&data, &b);
    let production = {
        let root = scribe_metadata::DataRoot::open(&data).unwrap();
        scribe_server::tier::shard_of(root.incarnation())
    };
    // `tier status` names it, as the operator finds it.
    let status = std::fs::read_to_string(data.join("tier/status")).unwrap();
    assert!(
        status.contains(&format!("shards journal {production:08x} block ")),
        "{status}"
    );
    // The drill: restored from the bucket and served against it until
    // its own descriptor has shipped.
    let drill = dir.path().join("drill");
    let (ok, out) = restore_from_tier(&drill, &b);
    assert!(ok, "{out}");
    let drill_shard = {
        let root = scribe_metadata::DataRoot::open(&drill).unwrap();
        scribe_server::tier::shard_of(root.incarnation())
    };
    let s = serve(&drill, &b, &rgw().endpoint, &[]);
    // Its descriptor and its catalog's first journal step (a root that
    // shipped only its descriptor is passed over: see the end).
    let drill_catalog_step = format!("nokv/recovery/{drill_shard:08x}/catalog/head/{:016x}", 1);
    for key in [
        format!("nokv/recovery/{drill_shard:08x}/SCRIBE_FORMAT"),
        drill_catalog_step.clone(),
    ] {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !in_bucket(&b, &key) {
            assert!(Instant::now() < deadline, "the drill never shipped {key}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    // And its repository's first journal step (shipped after the
    // catalog's: a drill killed in between is whole enough to be chosen
    // but cannot be rebuilt; see below).
    let drill_repo_steps = format!(
        "nokv/recovery/{drill_shard:08x}/{}/head",
        ws.repository.to_hex()
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while drill_steps(&b, &drill_repo_steps).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the drill never shipped {drill_repo_steps}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    kill(s);
    // Production goes on.
    let s = serve(&data, &b, &rgw().endpoint, &["--ack", "durable"]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    c.register(WorkspaceId([9; 16]));
    assert_eq!(
        accepted(&submit(&mut c, 4, &[("e.txt", b"after the drill")])),
        4
    );
    drop(c);
    kill(s);
    // Production's disk is lost: the drill is the newest restore, but it
    // lacks change 4.
    let lost = dir.path().join("lost");
    let (ok, out) = restore_from_tier(&lost, &b);
    assert!(!ok, "{out}");
    assert!(out.contains("choose one with --shard"), "{out}");
    assert!(out.contains(&format!("{production:08x}")), "{out}");
    assert!(
        out.contains("up to change 3") && out.contains("up to 4"),
        "{out}"
    );
    assert!(!lost.exists(), "a refused restore leaves nothing");
    let shard = format!("{production:08x}");
    let (ok, out) = restore_from_tier_with(&lost, &b, &["--shard", &shard]);
    assert!(ok, "{out}");
    assert!(out.contains("changes 1..=4 rebuilt"), "{out}");
    // A drill killed after its catalog shipped but before its repository
    // did is chosen and cannot be rebuilt: the refusal names the other
    // shards and `--shard`, not only the missing journal.
    let drill_repo_step_keys = drill_steps(&b, &drill_repo_steps);
    {
        use nokv_bridge::tier::{Deleted, Provider};
        let p = provider(&b);
        for key in &drill_repo_step_keys {
            assert!(matches!(p.delete(key), Deleted::Gone), "{key}");
        }
    }
    let torn = dir.path().join("torn");
    let (ok, out) = restore_from_tier(&torn, &b);
    assert!(!ok, "{out}");
    assert!(out.contains("no shipped journal step"), "{out}");
    assert!(out.contains("choose one with --shard"), "{out}");
    assert!(out.contains(&format!("{production:08x}")), "{out}");
    assert!(!torn.exists(), "a refused restore leaves nothing");
    // A drill killed before its catalog's first journal step shipped
    // holds nothing to rebuild: it is passed over, by name, and the root
    // it was restored from is chosen.
    {
        use nokv_bridge::tier::{Deleted, Provider};
        let p = provider(&b);
        let steps = p
            .list_names(&format!("nokv/recovery/{drill_shard:08x}/catalog/head"))
            .unwrap();
        assert!(!steps.is_empty());
        for n in steps {
            let key = format!("nokv/recovery/{drill_shard:08x}/catalog/head/{n}");
            assert!(matches!(p.delete(&key), Deleted::Gone), "{key}");
        }
        assert!(!in_bucket(&b, &drill_catalog_step));
    }
    let again = dir.path().join("again");
    let (ok, out) = restore_from_tier(&again, &b);
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!("passed over journal shard {drill_shard:08x}")),
        "{out}"
    );
    assert!(out.contains("changes 1..=4 rebuilt"), "{out}");
}

/// The keys of the journal steps under `prefix` (`.../head`).
fn drill_steps(b: &Bucket, prefix: &str) -> Vec<String> {
    use nokv_bridge::tier::Provider;
    provider(b)
        .list_names(prefix)
        .unwrap()
        .into_iter()
        .map(|n| format!("{prefix}/{n}"))
        .collect()
}

/// Replace `key` in the bucket by `bytes` (test only: the tier never
/// overwrites).
fn forge(b: &Bucket, key: &str, bytes: Vec<u8>) {
    use nokv_bridge::tier::{Deleted, Provider};
    let p = provider(b);
    assert!(matches!(p.delete(key), Deleted::Gone));
    p.put_if_absent(key, bytes.into()).unwrap();
}

#[test]
fn restore_from_tier_refuses_a_damaged_index_record_or_journal_by_name() {
    use nokv_bridge::tier::Provider;
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    let (ws, _, _) = durable_history(&data, &b);
    let repo = ws.repository;
    // The keys to damage: change 2's index record and the repository's
    // first journal piece.
    let (index_key, piece_key) = {
        let t = record(&data, &b);
        let root = scribe_metadata::DataRoot::open(&data).unwrap();
        let r = root.open_repository(repo).unwrap();
        let commit = scribe_server::tier::commit_objects(&r, 2).unwrap();
        let prefix = format!("nokv/recovery/{:08x}/{}", t.journal_shard(), repo.to_hex());
        let step = provider(&b)
            .get(&format!("{prefix}/head/{:016x}", 1))
            .unwrap();
        let at = scribe_format::recovery::HEAD_LEN + 4;
        let u = |k: usize| u64::from_le_bytes(step[at + k..at + k + 8].try_into().unwrap());
        let (seg, start, len) = (u(0), u(8), u(16));
        (
            t.index_key(&repo.0, 2, &commit),
            format!("{prefix}/{seg:020}/{start:016x}-{:016x}", start + len),
        )
    };
    std::fs::remove_dir_all(&data).unwrap();
    let p = provider(&b);
    for (key, what) in [(&index_key, "digest"), (&piece_key, "")] {
        let good = p.get(key).unwrap().to_vec();
        let mut bad = good.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 1;
        forge(&b, key, bad);
        let target = dir.path().join("restored");
        let (ok, out) = restore_from_tier(&target, &b);
        assert!(!ok, "a damaged {key} is refused: {out}");
        let named = if key == &piece_key {
            // The journal names its archive in the bucket.
            key.rsplitn(3, '/').nth(2).unwrap().to_string()
        } else {
            key.clone()
        };
        assert!(out.contains(&named), "{named} is named: {out}");
        assert!(out.contains(what), "{out}");
        assert!(!target.exists(), "a refused restore leaves nothing");
        forge(&b, key, good);
    }
    let (ok, out) = restore_from_tier(&dir.path().join("restored"), &b);
    assert!(ok, "{out}");
}

#[test]
fn a_descriptor_the_bucket_holds_in_another_version_does_not_hold_durable_acks_back() {
    use nokv_bridge::tier::Provider;
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    // The repository's descriptor is in the bucket in another version
    // (as after a change of the descriptor since it shipped).
    let (shard, repo) = {
        let root = scribe_metadata::DataRoot::open(&data).unwrap();
        let repo = root.list_repositories().unwrap()[0].id;
        (scribe_server::tier::shard_of(root.incarnation()), repo)
    };
    provider(&b)
        .put_if_absent(
            &format!("nokv/recovery/{shard:08x}/{}/SCRIBE_FORMAT", repo.to_hex()),
            b"an older descriptor".to_vec().into(),
        )
        .unwrap();
    let s = serve(
        &data,
        &b,
        &rgw().endpoint,
        &["--ack", "durable", "--tier-ack-timeout", "20s"],
    );
    let mut c = wire::tcp(s.addr.parse().unwrap());
    c.register(WorkspaceId([9; 16]));
    // Acknowledged: the journals still ship.
    accepted(&submit(&mut c, 1, &[("a.txt", b"ay")]));
    drop(c);
    kill(s);
    // The bucket's newest version is the local descriptor (shipped again
    // under a new key; the old one is kept, never overwritten).
    let local =
        std::fs::read(data.join("repos").join(repo.to_hex()).join("SCRIBE_FORMAT")).unwrap();
    let newest = nokv_bridge::tier::fetch_root_file(
        &*provider(&b),
        shard,
        &format!("{}/SCRIBE_FORMAT", repo.to_hex()),
    )
    .unwrap()
    .unwrap();
    assert_eq!(newest.as_ref(), local.as_slice());
}

/// Wait (liveness only) until `tier status` has a line starting with
/// `prefix`.
fn wait_for_status_line(data: &Path, prefix: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let text = std::fs::read_to_string(data.join("tier/status")).unwrap_or_default();
        if let Some(l) = text.lines().find(|l| l.starts_with(prefix)) {
            return l.to_string();
        }
        assert!(Instant::now() < deadline, "no line {prefix:?}: {text}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn chunks_go_to_the_bucket_while_the_client_is_still_uploading_and_the_change_adopts_them() {
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    let s = serve(&data, &b, &rgw().endpoint, &["--ack", "durable"]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    let repo = repo_id(&mut c);
    let ws = WorkspaceId([9; 16]);
    c.register(ws);
    let a = noise(41, 3 << 20);
    let ch = change(&[("a.bin", Some(&a[..]), 0), ("b.txt", Some(b"bee"), 0)]);
    let op = OperationId([7; 16]);
    // The objects are uploaded; the change is not submitted yet.
    expect_put_many(&mut c, put_many_req(ws, op, &ch.objects));
    let line = wait_for_status_line(&data, &format!("early {}", repo.to_hex()));
    let words: Vec<&str> = line.split(' ').collect();
    assert_eq!(words[3], hex::encode([7u8; 16]), "{line}");
    let staged = words[5].to_string();
    assert!(words[7].parse::<u64>().unwrap() >= 1, "{line}");
    let out = c.ask(Request::Submit(submit_req(ws, op, ch.id, "m")));
    let n = match out {
        Response::Submitted(o) => accepted(&o),
        other => panic!("{other:?}"),
    };
    kill(s);
    let t = record(&data, &b);
    assert_eq!(t.uploaded_through(&repo.0).unwrap(), n);
    assert!(t.staging().unwrap().is_empty(), "adopted");
    for id in chunks_of(&a) {
        let loc = t.locate(&repo.0, &id).unwrap().expect("in the bucket");
        assert_eq!(hex::encode(loc.key.revision), staged, "{id}");
        assert_eq!(
            t.read_object(&repo.0, &id).unwrap().unwrap().len() as u64,
            loc.len
        );
    }
    drop(t);
    let (ok, out) = tier_verify(&data, &b);
    assert!(ok, "{out}");
}

fn expect_put_many(c: &mut impl Requests, r: m::ObjectPutMany) {
    match c.ask(Request::ObjectPutMany(r)) {
        Response::ObjectPutMany(_) => {}
        other => panic!("{other:?}"),
    }
}

/// Wait (liveness only) until `tier status`'s `reads` line satisfies `ok`
/// ([bucket-gets, from-memory, written-back, write-back-pending,
/// write-back-deferred]).
fn reads_line(data: &Path, ok: impl Fn([u64; 5]) -> bool) -> [u64; 5] {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let text = std::fs::read_to_string(data.join("tier/status")).unwrap_or_default();
        if let Some(l) = text.lines().find(|l| l.starts_with("reads ")) {
            let w: Vec<&str> = l.split(' ').collect();
            let n = |i: usize| w.get(i).map_or(u64::MAX, |v| v.parse::<u64>().unwrap());
            let r = [n(2), n(4), n(6), n(8), n(10)];
            if ok(r) {
                return r;
            }
        }
        assert!(Instant::now() < deadline, "no such reads line: {text}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Serve under `durable` with early uploads gathered for `gather_ms`
/// (0: each request's chunks a block of their own).
fn serve_gathering(data: &Path, b: &Bucket, gather_ms: &str, extra: &[&str]) -> Served {
    let args: Vec<&str> = ["--ack", "durable"].iter().chain(extra).copied().collect();
    serve_env(
        data,
        b,
        &rgw().endpoint,
        &args,
        &[("SCRIBE_TIER_EARLY_GATHER_MS", gather_ms)],
    )
}

/// Upload `ch`'s objects three per `ObjectPutMany` for `op`, then submit
/// it (accepted).
fn submit_in_threes(
    c: &mut impl Requests,
    ws: WorkspaceId,
    op: OperationId,
    ch: &scribe_testkit::change::Change,
) {
    for part in ch.objects.chunks(3) {
        expect_put_many(c, put_many_req(ws, op, part));
    }
    match c.ask(Request::Submit(submit_req(ws, op, ch.id, "m"))) {
        Response::Submitted(o) => accepted(&o),
        other => panic!("{other:?}"),
    };
}

/// `n` files of 1 MiB of noise (seeds from `seed`), named `PREFIXnn.bin`,
/// as one change.
fn mib_files(prefix: &str, seed: u32, n: u32) -> (Vec<Vec<u8>>, scribe_testkit::change::Change) {
    let contents: Vec<Vec<u8>> = (0..n).map(|i| noise(seed + i, 1 << 20)).collect();
    let names: Vec<String> = (0..n).map(|i| format!("{prefix}{i:02}.bin")).collect();
    let entries: Vec<(&str, Option<&[u8]>, u64)> = names
        .iter()
        .zip(&contents)
        .map(|(n, c)| (n.as_str(), Some(c.as_slice()), 0))
        .collect();
    let ch = change(&entries);
    (contents, ch)
}

#[test]
fn a_cold_read_fetches_whole_blocks_reads_ahead_and_writes_back_in_the_background() {
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    // No gathering of early uploads: each request's chunks a block.
    let s = serve_gathering(&data, &b, "0", &[]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    let ws = WorkspaceId([9; 16]);
    c.register(ws);
    // Twelve 1 MiB files, uploaded three per request (so staged as
    // several bundled blocks), submitted as one change.
    let (contents, ch) = mib_files("f", 500, 12);
    let op = OperationId([5; 16]);
    submit_in_threes(&mut c, ws, op, &ch);
    drop(c);
    kill(s);
    let chunks: Vec<ObjectId> = contents.iter().flat_map(|c| chunks_of(c)).collect();
    let blocks: std::collections::BTreeSet<String> = {
        let t = record(&data, &b);
        let repo = only_repo(&data);
        chunks
            .iter()
            .map(|id| t.locate(&repo.0, id).unwrap().unwrap().key.to_key())
            .collect()
    };
    assert!(
        blocks.len() > 1 && blocks.len() < chunks.len(),
        "{blocks:?}"
    );
    let (ok, out) = tier_cmd(&data, &b, &rgw().endpoint, &["tier", "evict"]);
    assert!(ok, "{out}");
    assert!(chunks.iter().all(|id| !held_locally(&data, id)));

    let s = serve(&data, &b, &rgw().endpoint, &["--ack", "durable"]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    for (id, bytes) in chunks.iter().zip(&contents) {
        assert_eq!(&c.object(REPO, *id), bytes, "{id}");
    }
    let r = reads_line(&data, |r| r[2] >= 12 && r[3] == 0);
    // One GET per block (each brings every chunk bundled in it; the
    // blocks after a read are fetched ahead), never one per chunk.
    assert_eq!(r[0], blocks.len() as u64, "{r:?}");
    assert!(
        r[1] >= (chunks.len() - blocks.len()) as u64,
        "the other reads were answered from memory: {r:?}"
    );
    kill(s);
    assert!(chunks.iter().all(|id| held_locally(&data, id)));
    let (ok, out) = tier_verify(&data, &b);
    assert!(ok, "{out}");
}

#[test]
fn early_uploads_of_one_operation_are_gathered_into_full_blocks_until_the_submit() {
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    // Gathering waits ten minutes for the next request: only a batch
    // that does not fit and the submit's publication end it, so the test
    // depends on no timing (were the publication not to end it, the
    // durable submit would time out).
    let s = serve_gathering(&data, &b, "600000", &["--tier-ack-timeout", "30s"]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    let repo = repo_id(&mut c);
    let ws = WorkspaceId([9; 16]);
    c.register(ws);
    // 24 MiB in 1 MiB files, three objects per request: 8 requests or
    // more, each of them a block of its own without gathering.
    let (contents, ch) = mib_files("h", 900, 24);
    let op = OperationId([8; 16]);
    let requests = ch.objects.chunks(3).count();
    submit_in_threes(&mut c, ws, op, &ch);
    drop(c);
    kill(s);
    let chunks: Vec<ObjectId> = contents.iter().flat_map(|c| chunks_of(c)).collect();
    let t = record(&data, &b);
    let mut blocks: std::collections::BTreeMap<String, u64> = Default::default();
    let mut revisions = std::collections::BTreeSet::new();
    for id in &chunks {
        let loc = t.locate(&repo.0, id).unwrap().expect("in the bucket");
        let end = blocks.entry(loc.key.to_key()).or_default();
        *end = (*end).max(loc.offset + loc.len);
        revisions.insert(loc.key.revision);
    }
    // Every chunk went early (the staged revision, adopted by the change).
    assert_eq!(revisions.len(), 1, "{revisions:?}");
    assert!(t.staging().unwrap().is_empty(), "adopted");
    // 24 MiB in blocks of at most 16 MiB: two, three when the cut falls
    // between requests; not one per request.
    assert!(requests >= 8, "{requests}");
    assert!((2..=3).contains(&blocks.len()), "{blocks:?}");
    let limit = TierOptions::default().block_bytes;
    assert!(blocks.values().all(|&end| end <= limit), "{blocks:?}");
    drop(t);
    let (ok, out) = tier_verify(&data, &b);
    assert!(ok, "{out}");
}

#[test]
fn gathering_gives_way_to_other_operations_waiting_for_an_uploader() {
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    // A gathering uploader would wait ten minutes for more of its own
    // operation; four operations' batches arrive one after the other, and
    // never is a fifth submitted.
    let s = serve_gathering(&data, &b, "600000", &[]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    let repo = repo_id(&mut c);
    let ws = WorkspaceId([9; 16]);
    c.register(ws);
    let ops: Vec<OperationId> = (1..=4u8).map(|i| OperationId([0x40 + i; 16])).collect();
    for (i, op) in ops.iter().enumerate() {
        let body = noise(1200 + i as u32, 64 << 10);
        let ch = change(&[("s.bin", Some(&body[..]), 0)]);
        expect_put_many(&mut c, put_many_req(ws, *op, &ch.objects));
    }
    // Two uploaders: at most two operations are held gathering at the
    // end; every other one gave way when the next operation's batch
    // waited, and is staged. (Without giving way, the first two would
    // hold both uploaders for ten minutes and none would be staged.)
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let text = std::fs::read_to_string(data.join("tier/status")).unwrap_or_default();
        let staged = ops
            .iter()
            .filter(|op| {
                let prefix = format!("early {} operation {}", repo.to_hex(), hex::encode(op.0));
                text.lines().any(|l| l.starts_with(&prefix))
            })
            .count();
        if staged >= 2 {
            break;
        }
        assert!(Instant::now() < deadline, "{staged} of 4 staged: {text}");
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(c);
    kill(s);
}

/// Twelve 1 MiB files of one change, submitted under `durable`, then
/// evicted from the local store (their chunks).
fn evicted_twelve(dir: &Path, b: &Bucket) -> (PathBuf, Vec<ObjectId>, Vec<Vec<u8>>) {
    let (data, contents, _) = evicted_twelve_change(dir, b);
    let chunks: Vec<ObjectId> = contents.iter().flat_map(|c| chunks_of(c)).collect();
    (data, chunks, contents)
}

/// [`evicted_twelve`]'s data root, contents and change (every object).
fn evicted_twelve_change(
    dir: &Path,
    b: &Bucket,
) -> (PathBuf, Vec<Vec<u8>>, scribe_testkit::change::Change) {
    let data = init(dir);
    // No gathering: several blocks (one per request of three objects).
    let s = serve_gathering(&data, b, "0", &[]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    let ws = WorkspaceId([9; 16]);
    c.register(ws);
    let (contents, ch) = mib_files("g", 700, 12);
    let op = OperationId([6; 16]);
    submit_in_threes(&mut c, ws, op, &ch);
    drop(c);
    kill(s);
    let (ok, out) = tier_cmd(&data, b, &rgw().endpoint, &["tier", "evict"]);
    assert!(ok, "{out}");
    assert!(contents
        .iter()
        .flat_map(|c| chunks_of(c))
        .all(|id| !held_locally(&data, &id)));
    (data, contents, ch)
}

/// A fresh workspace's readers take the objects in turn, and each read
/// queues the objects after it for read-ahead, some of which other
/// readers already had. Here one reader takes every object backwards
/// through a read cache of one block, so after each of its reads every
/// object after it has been answered and evicted (answered objects go
/// first): read-ahead must not fetch their blocks again. One GET per
/// block for the reads, one per block for the write-back (every one
/// deferred), no more.
#[test]
fn read_ahead_does_not_fetch_again_what_reads_already_had() {
    let dir = tempfile::tempdir().unwrap();
    let b = bucket();
    let (data, _, ch) = evicted_twelve_change(dir.path(), &b);
    let repo = only_repo(&data);
    // What the cache trim left behind (manifests, the change set) is
    // read locally.
    let objects: Vec<&(ObjectId, Vec<u8>)> = ch
        .objects
        .iter()
        .filter(|(id, _)| !held_locally(&data, id))
        .collect();
    let (blocks, largest) = {
        let t = record(&data, &b);
        let mut sizes = std::collections::HashMap::<String, u64>::new();
        for (id, _) in &ch.objects {
            let loc = t.locate(&repo.0, id).unwrap().unwrap();
            *sizes.entry(loc.key.to_key()).or_default() += loc.len;
        }
        let read: std::collections::HashSet<String> = objects
            .iter()
            .map(|(id, _)| t.locate(&repo.0, id).unwrap().unwrap().key.to_key())
            .collect();
        (read.len() as u64, *sizes.values().max().unwrap())
    };
    assert!(blocks >= 4, "{blocks} blocks");
    let s = serve_env(
        &data,
        &b,
        &rgw().endpoint,
        &["--ack", "durable"],
        &[
            ("SCRIBE_TIER_READ_CACHE_BYTES", &largest.to_string()),
            ("SCRIBE_TIER_WRITE_BACK_BYTES", "1"),
            // The write-back (its GETs counted too) starts only after
            // the last read, however the machine pauses between reads.
            ("SCRIBE_TIER_READS_QUIET_MS", "3000"),
        ],
    );
    let mut c = wire::tcp(s.addr.parse().unwrap());
    for (id, bytes) in objects.iter().rev() {
        assert_eq!(&c.object(REPO, *id), bytes, "{id}");
    }
    let n = objects.len() as u64;
    let r = reads_line(&data, |r| r[2] >= n && r[3] == 0);
    assert_eq!(r[4], n, "every write-back deferred: {r:?}");
    assert_eq!(r[0], 2 * blocks, "bucket GETs for {blocks} blocks: {r:?}");
    kill(s);
    let (ok, out) = tier_verify(&data, &b);
    assert!(ok, "{out}");
}

#[test]
fn a_cold_read_beyond_the_write_back_bound_defers_the_write_back_and_fetches_again_later() {
    let dir = tempfile::tempdir().unwrap();
    let b = bucket();
    let (data, chunks, contents) = evicted_twelve(dir.path(), &b);
    // A write-back queue of one byte: no object fits, so every read's
    // write-back is deferred (the reader never writes it itself), and the
    // objects are fetched (and checked) again and written back once the
    // reads are over.
    let s = serve_env(
        &data,
        &b,
        &rgw().endpoint,
        &["--ack", "durable"],
        &[("SCRIBE_TIER_WRITE_BACK_BYTES", "1")],
    );
    let mut c = wire::tcp(s.addr.parse().unwrap());
    for (id, bytes) in chunks.iter().zip(&contents) {
        assert_eq!(&c.object(REPO, *id), bytes, "{id}");
    }
    let r = reads_line(&data, |r| r[2] >= 12 && r[3] == 0);
    assert_eq!(r[4], 12, "every write-back deferred: {r:?}");
    kill(s);
    assert!(chunks.iter().all(|id| held_locally(&data, id)));
    let (ok, out) = tier_verify(&data, &b);
    assert!(ok, "{out}");
}

#[test]
fn a_read_waiting_for_its_block_holds_the_write_back_back() {
    read_beside_a_waiting_read(false);
}

#[test]
fn where_cores_are_to_spare_the_write_back_runs_beside_a_waiting_read() {
    read_beside_a_waiting_read(true);
}

/// The number after `name` in `tier status`'s `reads` line.
fn reads_field(data: &Path, name: &str) -> u64 {
    let text = std::fs::read_to_string(data.join("tier/status")).unwrap();
    let line = text.lines().find(|l| l.starts_with("reads ")).unwrap();
    let w: Vec<&str> = line.split(' ').collect();
    let i = w.iter().position(|x| *x == name).expect(name);
    w[i + 1].parse().unwrap()
}

/// What was read ahead while reads paused (the far room) stays only until
/// reads have been idle for a while: then the read cache goes back to
/// its near room.
#[test]
fn an_idle_read_cache_gives_back_what_it_read_ahead_beyond_its_near_room() {
    let dir = tempfile::tempdir().unwrap();
    let b = bucket();
    let (data, chunks, contents) = evicted_twelve(dir.path(), &b);
    let keys = block_keys(&data, &b, &chunks);
    let blocks = keys.iter().collect::<std::collections::HashSet<_>>().len() as u64;
    assert!(blocks >= 3, "{blocks} blocks");
    let near = 1u64 << 20;
    let s = serve_env(
        &data,
        &b,
        &rgw().endpoint,
        &["--ack", "durable"],
        &[
            ("SCRIBE_TIER_READ_CACHE_BYTES", &near.to_string()),
            (
                "SCRIBE_TIER_READ_CACHE_FAR_BYTES",
                &(64u64 << 20).to_string(),
            ),
            // Long enough for the read-ahead to finish and a status pass
            // to show the far room on a loaded machine: idle reads drop
            // the queued read-ahead (a CI run under load stopped at 5 of
            // its block GETs with 10 s), and the status is written after
            // the pass settled the cache.
            ("SCRIBE_TIER_READ_CACHE_IDLE_MS", "30000"),
        ],
    );
    // One read; reads then pause, and read-ahead fetches every other
    // block into the far room.
    let mut c = wire::tcp(s.addr.parse().unwrap());
    assert_eq!(c.object(REPO, chunks[0]), contents[0]);
    let r = reads_line(&data, |r| r[0] >= blocks);
    assert_eq!(r[0], blocks, "{r:?}");
    let cached = reads_field(&data, "cached-bytes");
    assert!(
        cached > 4 * near,
        "read ahead beyond the near room: {cached}"
    );
    // Idle: back to the near room.
    let deadline = Instant::now() + Duration::from_secs(120);
    while reads_field(&data, "cached-bytes") > near {
        assert!(
            Instant::now() < deadline,
            "the idle read cache kept its far room"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The objects are still served (from the bucket or the store).
    for (id, bytes) in chunks.iter().zip(&contents) {
        assert_eq!(&c.object(REPO, *id), bytes, "{id}");
    }
    drop(c);
    kill(s);
    let (ok, out) = tier_verify(&data, &b);
    assert!(ok, "{out}");
}

/// The block key of each of `chunks`.
fn block_keys(data: &Path, b: &Bucket, chunks: &[ObjectId]) -> Vec<String> {
    let repo = only_repo(data);
    let t = record(data, b);
    chunks
        .iter()
        .map(|id| t.locate(&repo.0, id).unwrap().unwrap().key.to_key())
        .collect()
}

/// Read `id` on a connection of its own; returns once `p` holds the GET
/// of its block.
fn read_held(p: &proxy::Proxy, addr: &str, id: ObjectId) -> std::thread::JoinHandle<Vec<u8>> {
    let addr = addr.to_string();
    let reader = std::thread::spawn(move || wire::tcp(addr.parse().unwrap()).object(REPO, id));
    let deadline = Instant::now() + Duration::from_secs(60);
    while p.faulted.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(
            Instant::now() < deadline,
            "the held block was never asked for"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    reader
}

/// Read A, then B of another block, whose GET the proxy holds for
/// `proxy::SLOW` (longer than the 1 s after which reads count as
/// quiet): while B waits, A's write-back waits too, unless the write-back
/// runs beside reads (`during`, the default on 4 cores or more).
fn read_beside_a_waiting_read(during: bool) {
    let dir = tempfile::tempdir().unwrap();
    let b = bucket();
    let (data, chunks, contents) = evicted_twelve(dir.path(), &b);
    let keys = block_keys(&data, &b, &chunks);
    let b_at = (1..chunks.len())
        .find(|&i| keys[i] != keys[0])
        .expect("two blocks");
    let slow_key: &'static str = Box::leak(keys[b_at].clone().into_boxed_str());
    let p = proxy::Proxy::start(&rgw().endpoint);
    p.plan(&[proxy::Fault::SlowAt(slow_key); 64]);
    let s = serve_env(
        &data,
        &b,
        &p.endpoint,
        &["--ack", "durable"],
        &[(
            "SCRIBE_TIER_WRITE_BACK_DURING_READS",
            if during { "1" } else { "0" },
        )],
    );
    let mut c = wire::tcp(s.addr.parse().unwrap());
    assert_eq!(c.object(REPO, chunks[0]), contents[0]);
    let reader = read_held(&p, &s.addr, chunks[b_at]);
    if during {
        // A is written back while B still waits.
        let r = reads_line(&data, |r| r[2] >= 1);
        assert!(
            !reader.is_finished(),
            "B answered before A's write-back: {r:?}"
        );
    } else {
        // The status file, rewritten every second, shows the state of at
        // least 1.5 s into the wait.
        std::thread::sleep(Duration::from_millis(2500));
        let r = reads_line(&data, |_| true);
        assert_eq!(r[2], 0, "written back while a read waited: {r:?}");
    }
    assert_eq!(reader.join().unwrap(), contents[b_at]);
    // Once reads are quiet, both are.
    let r = reads_line(&data, |r| r[2] >= 2 && r[3] == 0);
    assert!(r[0] >= 2, "{r:?}");
    drop(c);
    kill(s);
    let (ok, out) = tier_verify(&data, &b);
    assert!(ok, "{out}");
}

/// While a read waits for its block's GET, read-ahead starts no GET of
/// its own (the waiting read's block shares the bucket with fewer
/// others); once that read is answered, read-ahead goes on.
#[test]
fn a_read_waiting_for_its_block_holds_read_ahead_back() {
    let dir = tempfile::tempdir().unwrap();
    let b = bucket();
    let (data, chunks, contents) = evicted_twelve(dir.path(), &b);
    let keys = block_keys(&data, &b, &chunks);
    let b_at = (1..chunks.len())
        .rev()
        .find(|&i| keys[i] != keys[0])
        .expect("two blocks");
    let blocks = keys.iter().collect::<std::collections::HashSet<_>>().len() as u64;
    assert!(blocks >= 3, "{blocks} blocks");
    let slow_key: &'static str = Box::leak(keys[b_at].clone().into_boxed_str());
    let p = proxy::Proxy::start(&rgw().endpoint);
    p.plan(&[proxy::Fault::SlowAt(slow_key); 64]);
    let s = serve_env(&data, &b, &p.endpoint, &["--ack", "durable"], &[]);
    // B's read waits for its held GET.
    let reader = read_held(&p, &s.addr, chunks[b_at]);
    // A's read is answered (its own GET), and queues the read-ahead of
    // every other chunk: none of it is fetched while B waits. The status
    // file, rewritten every second, shows the state of at least 1.5 s
    // into the wait.
    let mut c = wire::tcp(s.addr.parse().unwrap());
    assert_eq!(c.object(REPO, chunks[0]), contents[0]);
    std::thread::sleep(Duration::from_millis(2500));
    assert!(
        !reader.is_finished(),
        "B answered before its GET was let go"
    );
    let r = reads_line(&data, |_| true);
    assert_eq!(r[0], 2, "read-ahead fetched while a read waited: {r:?}");
    assert_eq!(reader.join().unwrap(), contents[b_at]);
    // Then read-ahead fetches the other blocks: every other chunk is
    // answered from memory.
    let r = reads_line(&data, |r| r[0] >= blocks);
    assert_eq!(r[0], blocks, "one GET per block: {r:?}");
    for (id, bytes) in chunks.iter().zip(&contents) {
        assert_eq!(&c.object(REPO, *id), bytes, "{id}");
    }
    let r = reads_line(&data, |_| true);
    assert_eq!(r[0], blocks, "one GET per block: {r:?}");
    // `tier status` counts the reads that waited for the bucket and how
    // long: A's and B's at least, B's for the proxy's whole hold.
    assert!(reads_field(&data, "waited") >= 2);
    assert!(reads_field(&data, "waited-ms") >= proxy::SLOW.as_millis() as u64 - 500);
    drop(c);
    kill(s);
    let (ok, out) = tier_verify(&data, &b);
    assert!(ok, "{out}");
}

#[test]
fn restore_from_tier_refuses_a_block_replaced_by_other_bytes_of_the_same_length() {
    use nokv_bridge::tier::Provider;
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    let (ws, _, objects) = durable_history(&data, &b);
    let repo = ws.repository;
    // A chunk of change 2 (a.bin's second version) and its block.
    let (id, _) = objects
        .iter()
        .filter(|(id, _)| id.kind == scribe_format::ObjectKind::Chunk)
        .nth(1)
        .unwrap()
        .clone();
    let loc = record(&data, &b).locate(&repo.0, &id).unwrap().unwrap();
    let key = loc.key.to_key();
    std::fs::remove_dir_all(&data).unwrap();
    let good = provider(&b).get(&key).unwrap().to_vec();
    let mut bad = good.clone();
    bad[(loc.offset + loc.len / 2) as usize] ^= 0x40;
    assert_eq!(bad.len(), good.len());
    forge(&b, &key, bad);
    let target = dir.path().join("restored");
    let (ok, out) = restore_from_tier(&target, &b);
    assert!(!ok, "a replaced block is refused: {out}");
    assert!(
        out.contains(&format!("{key} at byte {}", loc.offset)),
        "named by key and offset: {out}"
    );
    assert!(!target.exists(), "a refused restore leaves nothing");
    forge(&b, &key, good);
    let (ok, out) = restore_from_tier(&target, &b);
    assert!(ok, "{out}");
}

/// Changes a client saw acknowledged: (change, path, content).
type Acked = Arc<std::sync::Mutex<Vec<(u64, String, Vec<u8>)>>>;

/// One client's submits, each retried with its operation id while the
/// answer is `tier_unavailable` (the documented resume): the changes it
/// saw acknowledged, with each file's content.
fn submitting_client(addr: String, client: u8, submits: u8, acked: Acked) {
    let mut c = wire::tcp(addr.parse().unwrap());
    let ws = WorkspaceId([100 + client; 16]);
    c.register(ws);
    for n in 0..submits {
        let path = format!("c{client}/f{n}.bin");
        let content = noise(u32::from(client) * 1000 + u32::from(n), 1 << 20);
        let ch = change(&[(path.as_str(), Some(&content[..]), 0)]);
        let mut op = [client; 16];
        op[15] = n;
        let op = OperationId(op);
        let deadline = Instant::now() + Duration::from_secs(120);
        let put = Request::ObjectPutMany(put_many_req(ws, op, &ch.objects));
        match c.ask(put) {
            Response::ObjectPutMany(_) => {}
            other => panic!("{other:?}"),
        }
        let mut req = Request::Submit(submit_req(ws, op, ch.id, "m"));
        let change_no = loop {
            assert!(
                Instant::now() < deadline,
                "client {client} submit {n} never acknowledged"
            );
            match c.ask(req) {
                Response::Submitted(o) => break accepted(&o),
                Response::OperationOutcome(o) => break accepted(&o.outcome.expect("recorded")),
                Response::Error(e) if e.code == ErrorCode::TierUnavailable.number() => {
                    std::thread::sleep(Duration::from_millis(300));
                }
                other => panic!("client {client}: {other:?}"),
            }
            // Accepted and kept, not yet in the bucket: ask for the
            // operation's outcome until it is.
            req = Request::OperationOutcome(m::OperationOutcome {
                repo: REPO.into(),
                operation: op,
            });
        };
        acked.lock().unwrap().push((change_no, path, content));
    }
}

#[test]
fn the_bucket_stopped_and_restarted_mid_submit_under_load_loses_nothing_acknowledged() {
    let p = proxy::Proxy::start(&rgw().endpoint);
    let dir = tempfile::tempdir().unwrap();
    let mut roots = Vec::new();
    for ack in ["durable", "local"] {
        let sub = dir.path().join(ack);
        std::fs::create_dir_all(&sub).unwrap();
        let data = init(&sub);
        let b = bucket();
        let s = serve(
            &data,
            &b,
            &p.endpoint,
            &["--ack", ack, "--tier-ack-timeout", "3s"],
        );
        roots.push((data, b, s));
    }
    // Three clients per server, four 1 MiB submits each.
    let acked: Vec<Acked> = (0..2).map(|_| Arc::default()).collect();
    let mut clients = Vec::new();
    for (i, (_, _, s)) in roots.iter().enumerate() {
        for client in 0..3u8 {
            let (addr, a) = (s.addr.clone(), acked[i].clone());
            clients.push(std::thread::spawn(move || {
                submitting_client(addr, client, 4, a)
            }));
        }
    }
    // Once both servers acknowledged something, the store goes away with
    // requests in flight, and comes back.
    while acked.iter().any(|a| a.lock().unwrap().is_empty()) {
        std::thread::sleep(Duration::from_millis(20));
    }
    p.stop();
    std::thread::sleep(Duration::from_secs(4));
    p.restart();
    for c in clients {
        c.join().unwrap();
    }
    for (i, (data, b, s)) in roots.into_iter().enumerate() {
        // The outbox drains: backlog 0 with every change uploaded.
        wait_for_status_line(&data, &format!("{REPO} "));
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let text = std::fs::read_to_string(data.join("tier/status")).unwrap_or_default();
            if text.contains(" uploaded-through 12 head 12 backlog 0") && !text.contains("\nearly ")
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the outbox did not drain: {text}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        kill(s);
        let t = record(&data, &b);
        let repo = only_repo(&data);
        assert_eq!(t.uploaded_through(&repo.0).unwrap(), 12);
        assert!(
            t.staging().unwrap().is_empty(),
            "every early upload adopted"
        );
        let acked = acked[i].lock().unwrap().clone();
        assert_eq!(acked.len(), 12);
        for (change_no, path, content) in &acked {
            for id in chunks_of(content) {
                let got = t.read_object(&repo.0, &id).unwrap();
                assert_eq!(got.as_deref(), Some(&content[..]), "{path}@{change_no}");
            }
        }
        assert_every_revision_in_the_bucket_is_available(&t, &b, &repo.0);
        drop(t);
        let (ok, out) = tier_verify(&data, &b);
        assert!(ok, "{out}");
    }
}

/// No revision directory in the bucket under `repo` that the record does
/// not hold `Available` (a block no revision holds would be a leak).
fn assert_every_revision_in_the_bucket_is_available(t: &Tier, b: &Bucket, repo: &[u8; 16]) {
    use nokv_bridge::tier::Provider;
    let revs = t.revisions().unwrap();
    let prefix = format!("nokv/artifacts/{:08x}/{}", t.shard(), hex::encode(repo));
    for dir in provider(b).list_dirs(&prefix).unwrap() {
        let rev: [u8; 16] = hex::decode(&dir).unwrap().try_into().unwrap();
        assert_eq!(
            revs.get(&rev).map(|r| r.state),
            Some(nokv_bridge::tier::Lifecycle::Available),
            "{prefix}/{dir}: a block no revision holds"
        );
    }
}

/// Serve under `--ack local` through a proxy that holds the first request
/// containing `held`; submit one change; SIGKILL the server while that
/// request is held; serve again against the store itself: the change
/// reaches the bucket, every revision in the bucket is one the record
/// holds `Available`, `tier verify` is clean.
fn killed_while_holding(held: &'static str) {
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    let p = proxy::Proxy::start(&rgw().endpoint);
    p.plan(&[proxy::Fault::SilentAt(held); 64]);
    let s = serve(&data, &b, &p.endpoint, &["--ack", "local"]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    let repo = repo_id(&mut c);
    c.register(WorkspaceId([9; 16]));
    let a = noise(91, 1 << 20);
    let n = accepted(&submit(&mut c, 1, &[("a.bin", &a)]));
    drop(c);
    // Liveness only: the held request arrives.
    let deadline = Instant::now() + Duration::from_secs(60);
    while p.faulted.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "no request held at {held}");
        std::thread::sleep(Duration::from_millis(10));
    }
    kill(s);
    assert_eq!(record(&data, &b).uploaded_through(&repo.0).unwrap(), 0);
    let s = serve(&data, &b, &rgw().endpoint, &["--ack", "local"]);
    wait_for_status_line(
        &data,
        &format!("{REPO} {} uploaded-through {n} ", repo.to_hex()),
    );
    // The pass that wrote this line also deleted the blocks of an early
    // upload the kill cut (given up when the server started).
    kill(s);
    let t = record(&data, &b);
    assert_eq!(t.uploaded_through(&repo.0).unwrap(), n);
    assert!(t.staging().unwrap().is_empty());
    for id in chunks_of(&a) {
        assert_eq!(
            t.read_object(&repo.0, &id).unwrap().as_deref(),
            Some(&a[..])
        );
    }
    assert_every_revision_in_the_bucket_is_available(&t, &b, &repo.0);
    drop(t);
    let (ok, out) = tier_verify(&data, &b);
    assert!(ok, "{out}");
}

#[test]
fn sigkill_between_block_upload_and_the_tier_commit_is_finished_under_the_same_keys() {
    // The index record goes after every block and before the commit.
    killed_while_holding("/nokv/index/");
}

#[test]
fn sigkill_between_the_local_commit_and_the_outbox_upload_loses_nothing() {
    // The first block upload (the early upload of the change's chunk).
    killed_while_holding("/nokv/artifacts/");
}

/// Four 3 MiB files that profile 1 keeps in one chunk each (noise from
/// `seeds`), submitted under `durable` one object per request (each a
/// block of its own), then evicted from the local store.
fn one_chunk_files_evicted(
    data: &Path,
    b: &Bucket,
    seeds: std::ops::Range<u32>,
    prefix: &str,
) -> scribe_testkit::change::Change {
    let bodies: Vec<Vec<u8>> = seeds
        .map(|seed| noise(seed, 3 << 20))
        .filter(|b| scribe_objects::chunk_boundaries(b).len() == 1)
        .take(4)
        .collect();
    let names: Vec<String> = (0..bodies.len())
        .map(|i| format!("{prefix}{i}.bin"))
        .collect();
    let entries: Vec<(&str, Option<&[u8]>, u64)> = names
        .iter()
        .zip(&bodies)
        .map(|(n, c)| (n.as_str(), Some(c.as_slice()), 0))
        .collect();
    let ch = change(&entries);
    {
        // Not gathered, one object per request: each a block of its own.
        let s = serve_gathering(data, b, "0", &[]);
        let mut c = wire::tcp(s.addr.parse().unwrap());
        let ws = WorkspaceId([9; 16]);
        c.register(ws);
        let op = OperationId([7; 16]);
        for o in &ch.objects {
            expect_put_many(&mut c, put_many_req(ws, op, std::slice::from_ref(o)));
        }
        match c.ask(Request::Submit(submit_req(ws, op, ch.id, "m"))) {
            Response::Submitted(o) => accepted(&o),
            other => panic!("{other:?}"),
        };
        drop(c);
        kill(s);
    }
    let (ok, out) = tier_cmd(data, b, &rgw().endpoint, &["tier", "evict"]);
    assert!(ok, "{out}");
    ch
}

/// ObjectGetMany leaves an object it has no room for unread: asked for
/// two evicted chunks of over 2 MiB in different blocks, it answers with
/// the first after one bucket GET, not two (read-ahead off, so every GET
/// is the request's own); the second comes with the next request.
#[test]
fn get_many_fetches_no_block_for_an_object_it_has_no_room_for() {
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    let ch = one_chunk_files_evicted(&data, &b, 900..1060, "big");
    let big: Vec<&(ObjectId, Vec<u8>)> = ch
        .objects
        .iter()
        .filter(|(id, bytes)| id.kind == scribe_format::ObjectKind::Chunk && bytes.len() > 2 << 20)
        .collect();
    let ids: Vec<ObjectId> = big.iter().map(|(id, _)| *id).collect();
    let keys = block_keys(&data, &b, &ids);
    let second = (1..big.len())
        .find(|&i| keys[i] != keys[0])
        .expect("two chunks over 2 MiB in different blocks");
    let (x, y) = (big[0], big[second]);
    assert!(!held_locally(&data, &x.0) && !held_locally(&data, &y.0));
    let s = serve_env(
        &data,
        &b,
        &rgw().endpoint,
        &["--ack", "durable"],
        &[("SCRIBE_TIER_READ_AHEAD_OBJECTS", "0")],
    );
    let mut c = wire::tcp(s.addr.parse().unwrap());
    let mut ask = |ids: Vec<ObjectId>| match c.ask(Request::ObjectGetMany(m::ObjectGetMany {
        repo: REPO.into(),
        ids,
    })) {
        Response::ObjectGetMany(r) => r.objects,
        other => panic!("{other:?}"),
    };
    let got = ask(vec![x.0, y.0]);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].id, x.0);
    assert!(got[0].data.0 == x.1, "x's bytes");
    // The status file is rewritten every second: this one was written
    // after the answer.
    std::thread::sleep(Duration::from_millis(2200));
    let r = reads_line(&data, |_| true);
    assert_eq!(r[0], 1, "bucket GETs for one answered object: {r:?}");
    let got = ask(vec![y.0]);
    assert_eq!(got.len(), 1);
    assert!(got[0].data.0 == y.1, "y's bytes");
    let r = reads_line(&data, |r| r[0] >= 2);
    assert_eq!(r[0], 2, "{r:?}");
    kill(s);
    let (ok, out) = tier_verify(&data, &b);
    assert!(ok, "{out}");
}

/// A client that asks for manifests reads their chunks next: from a cold
/// cache the tier fetches those chunks' blocks before any of them is
/// asked for, and the reads that follow are answered from memory.
#[test]
fn manifests_asked_for_bring_their_chunks_before_they_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    let ch = one_chunk_files_evicted(&data, &b, 2000..2160, "f");
    let of_kind = |k: scribe_format::ObjectKind| -> Vec<ObjectId> {
        ch.objects
            .iter()
            .filter(|(id, _)| id.kind == k)
            .map(|(id, _)| *id)
            .collect()
    };
    let manifests = of_kind(scribe_format::ObjectKind::Manifest);
    let chunks = of_kind(scribe_format::ObjectKind::Chunk);
    assert_eq!(chunks.len(), 4);
    let blocks = |ids: &[ObjectId]| -> u64 {
        block_keys(&data, &b, ids)
            .into_iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len() as u64
    };
    // The manifests stay in the local store (commit objects are never
    // evicted); the chunks are only in the bucket.
    assert!(manifests.iter().all(|id| held_locally(&data, id)));
    assert!(!chunks.iter().any(|id| held_locally(&data, id)));
    let all_blocks = blocks(&chunks);
    assert!(all_blocks >= 2, "the chunks are in one block");
    let s = serve_env(&data, &b, &rgw().endpoint, &["--ack", "durable"], &[]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    match c.ask(Request::ObjectGetMany(m::ObjectGetMany {
        repo: REPO.into(),
        ids: manifests.clone(),
    })) {
        Response::ObjectGetMany(r) => assert_eq!(r.objects.len(), manifests.len()),
        other => panic!("{other:?}"),
    }
    // Every chunk's block is fetched without a chunk being asked for.
    let deadline = Instant::now() + Duration::from_secs(20);
    let gets = loop {
        let text = std::fs::read_to_string(data.join("tier/status")).unwrap_or_default();
        let gets = text
            .lines()
            .find_map(|l| l.strip_prefix("reads bucket-gets "))
            .and_then(|l| l.split(' ').next()?.parse::<u64>().ok())
            .unwrap_or(0);
        if gets >= all_blocks {
            break gets;
        }
        assert!(
            Instant::now() < deadline,
            "{gets} bucket GETs after the manifests were read; their chunks are in {all_blocks} blocks"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    for (id, bytes) in ch.objects.iter().filter(|(id, _)| chunks.contains(id)) {
        match c.ask(Request::ObjectGet(m::ObjectGet {
            repo: REPO.into(),
            id: *id,
            offset: 0,
            max_len: 0,
        })) {
            Response::ObjectData(d) => assert!(d.data.0 == *bytes, "{id}'s bytes"),
            other => panic!("{other:?}"),
        }
    }
    let r = reads_line(&data, |r| r[1] >= 4);
    assert_eq!(r[0], gets, "no chunk read went to the bucket: {r:?}");
    kill(s);
    let (ok, out) = tier_verify(&data, &b);
    assert!(ok, "{out}");
}

/// The repository `repo delete` gives up in the tests below: created
/// beside [`REPO`], which keeps the same content.
const DOOMED: &str = "doomed";

fn create_repo(data: &Path, name: &str) {
    assert!(bin()
        .args(["repo", "create", "--data", data.to_str().unwrap(), name])
        .stdout(Stdio::null())
        .status()
        .unwrap()
        .success());
}

/// Submit `files` as a new change of `repo` from workspace `ws`.
fn submit_in(
    c: &mut impl Requests,
    repo: &str,
    ws: WorkspaceId,
    n: u8,
    files: &[(&str, &[u8])],
) -> m::Outcome {
    let entries: Vec<(&str, Option<&[u8]>, u64)> =
        files.iter().map(|(p, b)| (*p, Some(*b), 0)).collect();
    let ch = change(&entries);
    let op = OperationId([n; 16]);
    let mut put = put_many_req(ws, op, &ch.objects);
    put.repo = repo.into();
    match c.ask(Request::ObjectPutMany(put)) {
        Response::ObjectPutMany(_) => {}
        other => panic!("{other:?}"),
    }
    let mut s = submit_req(ws, op, ch.id, "m");
    s.repo = repo.into();
    match c.ask(Request::Submit(s)) {
        Response::Submitted(o) => o,
        other => panic!("{other:?}"),
    }
}

fn register_in(c: &mut impl Requests, repo: &str, ws: WorkspaceId) {
    match c.ask(Request::WorkspaceRegister(
        scribe_testkit::change::register_req(repo, ws),
    )) {
        Response::WorkspaceRegistered(_) => {}
        other => panic!("{other:?}"),
    }
}

fn id_of(c: &mut impl Requests, name: &str) -> RepositoryId {
    c.repo_list()
        .into_iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no repository {name}"))
        .id
}

/// Every key the bucket holds below `prefix` (a listing: what is there,
/// not what is reachable).
fn keys_below(b: &Bucket, prefix: &str) -> Vec<String> {
    use nokv_bridge::tier::Provider;
    let mut k = provider(b).list_keys(prefix).unwrap();
    k.sort();
    k
}

/// Where a repository's things are in the bucket: its blocks, its index
/// and release records, its recovery journal.
struct Prefixes {
    artifacts: String,
    index: String,
    journal: String,
    deletion: String,
}

fn prefixes(data: &Path, b: &Bucket, repo: RepositoryId) -> Prefixes {
    let t = record(data, b);
    Prefixes {
        artifacts: format!("nokv/artifacts/{:08x}/{}", t.shard(), repo.to_hex()),
        index: format!("nokv/index/{:08x}/{}", t.shard(), repo.to_hex()),
        journal: format!("nokv/recovery/{:08x}/{}", t.journal_shard(), repo.to_hex()),
        deletion: nokv_bridge::tier::deletion_key(t.shard(), &repo.0),
    }
}

/// Nothing of the deleted repository is left in the bucket but its
/// deletion record.
fn assert_gone_from_the_bucket(b: &Bucket, p: &Prefixes) {
    assert_eq!(
        keys_below(b, &p.artifacts),
        Vec::<String>::new(),
        "no block left"
    );
    assert_eq!(keys_below(b, &p.index), vec![p.deletion.clone()]);
    assert_eq!(
        keys_below(b, &p.journal),
        Vec::<String>::new(),
        "no journal left"
    );
}

/// [`REPO`] with a.bin and b.txt, [`DOOMED`] with the same a.bin (its own
/// copy in the bucket) and two more changes; all under `durable`, the
/// server stopped afterwards. Returns (REPO's id, DOOMED's id, a.bin).
fn two_repositories(data: &Path, b: &Bucket) -> (RepositoryId, RepositoryId, Vec<u8>) {
    create_repo(data, DOOMED);
    let s = serve(data, b, &rgw().endpoint, &["--ack", "durable"]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    let (keep, doomed) = (id_of(&mut c, REPO), id_of(&mut c, DOOMED));
    c.register(WorkspaceId([9; 16]));
    let ws = WorkspaceId([8; 16]);
    register_in(&mut c, DOOMED, ws);
    let a = big(31, 3 << 20);
    accepted(&submit(&mut c, 1, &[("a.bin", &a), ("b.txt", b"bee")]));
    accepted(&submit_in(
        &mut c,
        DOOMED,
        ws,
        1,
        &[("a.bin", &a), ("d.txt", b"dee")],
    ));
    accepted(&submit_in(
        &mut c,
        DOOMED,
        ws,
        2,
        &[("e.bin", &big(33, 3 << 20))],
    ));
    accepted(&submit_in(&mut c, DOOMED, ws, 3, &[("f.txt", b"eff")]));
    drop(c);
    kill(s);
    (keep, doomed, a)
}

/// Every object of `content` reads back from [`REPO`]'s revisions in the
/// bucket.
fn assert_in_the_bucket(data: &Path, b: &Bucket, repo: RepositoryId, content: &[u8]) {
    let t = record(data, b);
    for (id, bytes) in &scribe_testkit::change::file(content).objects {
        assert_eq!(
            t.read_object(&repo.0, id).unwrap().as_ref(),
            Some(bytes),
            "{id}"
        );
    }
}

/// Deleting a repository of a tiered data root (the tier's part used to
/// be refused) gives its whole history up through the GC: no block, index
/// record or journal of it is left in the bucket, only its deletion
/// record; the other repository holding the same content keeps its own
/// copy; `tier verify` is clean; and a restore from the bucket, whose
/// shipped catalog still names the repository, leaves it deleted.
#[test]
fn a_repository_deleted_on_a_tiered_root_gives_its_history_in_the_bucket_up() {
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    let ep = rgw().endpoint.clone();
    let (keep, doomed, a) = two_repositories(&data, &b);
    let p = prefixes(&data, &b, doomed);
    assert!(!keys_below(&b, &p.artifacts).is_empty());
    assert_eq!(keys_below(&b, &p.index).len(), 3, "three index records");
    assert!(!keys_below(&b, &p.journal).is_empty());

    // Without the bucket named: refused, nothing changes.
    let out = bin()
        .args(["repo", "delete", "--data", data.to_str().unwrap(), DOOMED])
        .args(["--yes", "--confirm", DOOMED])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("--tier s3://BUCKET"), "{said}");
    assert!(data.join("repos").join(doomed.to_hex()).is_dir());
    // A preview says what the bucket's part would be, and changes nothing.
    let (ok, out) = tier_cmd(&data, &b, &ep, &["repo", "delete", DOOMED]);
    assert!(ok, "{out}");
    assert!(
        out.contains("6 revision(s)") && out.contains("would be collected"),
        "{out}"
    );
    assert_eq!(keys_below(&b, &p.index).len(), 3);

    let (ok, out) = tier_cmd(
        &data,
        &b,
        &ep,
        &["repo", "delete", DOOMED, "--yes", "--confirm", DOOMED],
    );
    assert!(ok, "{out}");
    assert!(out.contains("deleted repository \"doomed\""), "{out}");
    assert!(!data.join("repos").join(doomed.to_hex()).exists());
    assert_eq!(std::fs::read_dir(data.join("deleted")).unwrap().count(), 1);
    assert_gone_from_the_bucket(&b, &p);
    let t = record(&data, &b);
    assert!(t
        .revisions()
        .unwrap()
        .values()
        .filter(|r| r.root == doomed.0)
        .all(|r| r.state == nokv_bridge::tier::Lifecycle::Deleted));
    assert_every_revision_in_the_bucket_is_available(&t, &b, &keep.0);
    drop(t);
    assert_in_the_bucket(&data, &b, keep, &a);
    let (ok, out) = tier_verify(&data, &b);
    assert!(ok, "{out}");

    // The disk is lost before the server ever served again: the catalog
    // journal in the bucket still names the repository. The restore
    // leaves it deleted and rebuilds the other.
    std::fs::remove_dir_all(&data).unwrap();
    let (ok, out) = restore_from_tier(&data, &b);
    assert!(ok, "{out}");
    assert!(out.contains("doomed: deleted"), "{out}");
    let s = serve(&data, &b, &ep, &[]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    let names: Vec<String> = c.repo_list().into_iter().map(|r| r.name).collect();
    assert_eq!(names, vec![REPO.to_string()]);
    for (id, bytes) in &scribe_testkit::change::file(&a).objects {
        assert_eq!(&c.object(REPO, *id), bytes, "{id}");
    }
    drop(c);
    kill(s);
    let (ok, out) = tier_verify(&data, &b);
    assert!(ok, "{out}");
}

/// `repo delete` SIGKILLed between the local move and the bucket's part,
/// then again while its collection waits for a block delete: each run
/// after finishes what is left (found by name, then by id, though the
/// catalog no longer names it); `tier verify` names the unfinished
/// deletion until then and is clean after. A restore taken mid-deletion
/// leaves the repository out; a new repository given the name is not
/// deleted in its place.
#[test]
fn repo_delete_killed_after_the_local_move_and_mid_collection_is_finished_by_running_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    let ep = rgw().endpoint.clone();
    let (keep, doomed, a) = two_repositories(&data, &b);
    let p = prefixes(&data, &b, doomed);
    let r = rgw();
    let delete = |endpoint: &str, name: &str, pause: Option<&str>| {
        let mut cmd = bin();
        cmd.args(["repo", "delete", "--data", data.to_str().unwrap(), name])
            .args(["--yes", "--confirm", name])
            .args(["--tier", &b.url, "--tier-endpoint", endpoint])
            .env("AWS_ACCESS_KEY_ID", &r.access_key)
            .env("AWS_SECRET_ACCESS_KEY", &r.secret_key)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(step) = pause {
            cmd.env("SCRIBE_SERVER_PAUSE_AT", step);
        }
        cmd.spawn().unwrap()
    };

    // 1. Killed right after the local move.
    let mut child = delete(&ep, DOOMED, Some("repo-delete-moved"));
    {
        use std::io::BufRead;
        let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut said = String::new();
        for line in stderr.lines() {
            let line = line.unwrap();
            said.push_str(&line);
            if line.contains("paused at repo-delete-moved") {
                break;
            }
        }
        assert!(said.contains("paused at repo-delete-moved"), "{said}");
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!data.join("repos").join(doomed.to_hex()).exists());
    assert!(
        !keys_below(&b, &p.artifacts).is_empty(),
        "the bucket's part has not begun"
    );
    let (ok, out) = tier_verify(&data, &b);
    assert!(!ok && out.contains("repository doomed"), "{out}");

    // 2. Killed while the collection waits for its first block delete
    // (the deletion record and the claims are done).
    let proxy = proxy::Proxy::start(&ep);
    proxy.plan(&[proxy::Fault::SilentAtDelete; 64]);
    let mut child = delete(&proxy.endpoint, DOOMED, None);
    while proxy.faulted.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        if let Some(st) = child.try_wait().unwrap() {
            panic!("repo delete exited with {st} before deleting anything");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    {
        let t = record(&data, &b);
        let deleting = t
            .revisions()
            .unwrap()
            .values()
            .filter(|r| r.root == doomed.0 && r.state == nokv_bridge::tier::Lifecycle::Deleting)
            .count();
        assert!(deleting > 0, "killed mid-collection");
    }
    assert!(in_bucket(&b, &p.deletion));
    let (ok, out) = tier_verify(&data, &b);
    assert!(!ok, "{out}");

    // A restore from the bucket as the deletion left it (the deletion
    // record written, blocks and records half gone) leaves the
    // repository out: never brought back half-way.
    let drill = dir.path().join("drill");
    let (ok, out) = restore_from_tier(&drill, &b);
    assert!(ok && out.contains("doomed: deleted"), "{out}");
    assert!(!out.contains("doomed: changes"), "{out}");

    // A new repository takes the name: deleting it by that name is
    // refused while the old one's deletion is unfinished, naming the id.
    create_repo(&data, DOOMED);
    let out = delete(&ep, DOOMED, None).wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("has not finished") && said.contains(&doomed.to_hex()),
        "{said}"
    );
    assert_eq!(
        std::fs::read_dir(data.join("repos")).unwrap().count(),
        2,
        "nothing moved"
    );

    // 3. Run again, by id: finished.
    let id = doomed.to_hex();
    let out = delete(&ep, &id, None).wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert_gone_from_the_bucket(&b, &p);
    assert_in_the_bucket(&data, &b, keep, &a);
    let t = record(&data, &b);
    assert!(t.roots_being_deleted().unwrap().is_empty());
    assert_every_revision_in_the_bucket_is_available(&t, &b, &keep.0);
    drop(t);
    let (ok, out) = tier_verify(&data, &b);
    assert!(ok, "{out}");
    // The new repository of that name is deleted by name now, then the
    // name is unknown.
    let out = delete(&ep, DOOMED, None).wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert_eq!(std::fs::read_dir(data.join("repos")).unwrap().count(), 1);
    let out = delete(&ep, DOOMED, None).wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let (ok, out) = tier_verify(&data, &b);
    assert!(ok, "{out}");
}

/// A repository deleted while its outbox is not empty: the publication
/// that had started (blocks in the bucket, its index record held by the
/// proxy when the server was killed) is finished and collected with the
/// rest, the early upload of a change never published is given up, the
/// changes never uploaded are dropped; no block of it is left.
#[test]
fn a_repository_deleted_with_uploads_pending_leaves_no_block_of_them() {
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    let ep = rgw().endpoint.clone();
    create_repo(&data, DOOMED);
    let shard = {
        let root = scribe_metadata::DataRoot::open(&data).unwrap();
        scribe_server::tier::shard_of(root.incarnation())
    };
    let proxy = proxy::Proxy::start(&ep);
    proxy.plan(&[proxy::Fault::SilentAt("/nokv/index/"); 64]);
    let s = serve(&data, &b, &proxy.endpoint, &["--ack", "local"]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    let doomed = id_of(&mut c, DOOMED);
    let ws = WorkspaceId([8; 16]);
    register_in(&mut c, DOOMED, ws);
    accepted(&submit_in(
        &mut c,
        DOOMED,
        ws,
        1,
        &[("a.bin", &noise(71, 1 << 20))],
    ));
    // Liveness only: change 1's index record PUT arrives and is held.
    let deadline = Instant::now() + Duration::from_secs(60);
    while proxy.faulted.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "no index record held");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Change 2's objects: staged early (before its submit: an early
    // upload of an operation whose outcome is recorded stages nothing).
    let b2 = noise(72, 1 << 20);
    let ch = change(&[("b.bin", Some(&b2[..]), 0)]);
    let mut put = put_many_req(ws, OperationId([2; 16]), &ch.objects);
    put.repo = DOOMED.into();
    match c.ask(Request::ObjectPutMany(put)) {
        Response::ObjectPutMany(_) => {}
        other => panic!("{other:?}"),
    }
    // Liveness only: change 2's chunk reaches the bucket early (a third
    // revision directory: change 1's content and commit revisions, and
    // change 2's staged one).
    let artifacts = {
        use nokv_bridge::tier::Provider;
        let p = provider(&b);
        let prefix = format!("nokv/artifacts/{shard:08x}/{}", doomed.to_hex());
        while p.list_dirs(&prefix).unwrap().len() < 3 {
            assert!(Instant::now() < deadline, "change 2 never staged");
            std::thread::sleep(Duration::from_millis(20));
        }
        prefix
    };
    let mut sub = submit_req(ws, OperationId([2; 16]), ch.id, "m");
    sub.repo = DOOMED.into();
    match c.ask(Request::Submit(sub)) {
        Response::Submitted(o) => assert_eq!(accepted(&o), 2),
        other => panic!("{other:?}"),
    }
    drop(c);
    kill(s);
    {
        let t = record(&data, &b);
        assert_eq!(t.uploaded_through(&doomed.0).unwrap(), 0);
        assert_eq!(t.publication_started(&doomed.0).unwrap(), Some(1));
        assert_eq!(t.staging().unwrap().len(), 1, "change 2's early upload");
    }
    let p = prefixes(&data, &b, doomed);
    assert_eq!(p.artifacts, artifacts);
    let (ok, out) = tier_cmd(
        &data,
        &b,
        &ep,
        &["repo", "delete", DOOMED, "--yes", "--confirm", DOOMED],
    );
    assert!(ok, "{out}");
    assert!(
        out.contains("finished the started publication of change 1"),
        "{out}"
    );
    assert_gone_from_the_bucket(&b, &p);
    let t = record(&data, &b);
    assert!(t.staging().unwrap().is_empty());
    assert_eq!(t.publication_started(&doomed.0).unwrap(), None);
    drop(t);
    let (ok, out) = tier_verify(&data, &b);
    assert!(ok, "{out}");
}

/// The bucket unreachable once the repository has moved aside: the
/// command fails saying the repository is deleted here, that its history
/// in the bucket is not given up yet, and how to finish; run again with
/// the bucket back, it finishes.
#[test]
fn a_deletion_whose_bucket_fails_after_the_move_says_so_and_finishes_when_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    let ep = rgw().endpoint.clone();
    let (_keep, doomed, _a) = two_repositories(&data, &b);
    let p = prefixes(&data, &b, doomed);
    // Nothing listens there.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let (ok, out) = tier_cmd(
        &data,
        &b,
        &dead,
        &["repo", "delete", DOOMED, "--yes", "--confirm", DOOMED],
    );
    assert!(!ok, "{out}");
    assert!(!data.join("repos").join(doomed.to_hex()).exists());
    assert!(
        out.contains("deleted here")
            && out.contains("not given up yet")
            && out.contains(&format!(
                "{} --yes --confirm {}",
                doomed.to_hex(),
                doomed.to_hex()
            )),
        "{out}"
    );
    assert!(!keys_below(&b, &p.artifacts).is_empty());
    let (ok, out) = tier_cmd(
        &data,
        &b,
        &ep,
        &["repo", "delete", DOOMED, "--yes", "--confirm", DOOMED],
    );
    assert!(ok, "{out}");
    assert_gone_from_the_bucket(&b, &p);
    let (ok, out) = tier_verify(&data, &b);
    assert!(ok, "{out}");
}

/// Killed between the directory's move and the catalog's transaction
/// (`DataRoot::delete_repository`; simulated by moving the directory
/// aside as that step does): the catalog still names the repository but
/// its directory is gone. Run again, the deletion finishes, the bucket's
/// part included.
#[test]
fn a_tiered_deletion_killed_between_the_move_and_the_catalog_finishes_when_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    let ep = rgw().endpoint.clone();
    let (_keep, doomed, _a) = two_repositories(&data, &b);
    let p = prefixes(&data, &b, doomed);
    record(&data, &b)
        .mark_root_deleted(&doomed.0, DOOMED)
        .unwrap();
    std::fs::create_dir_all(data.join("deleted")).unwrap();
    std::fs::rename(
        data.join("repos").join(doomed.to_hex()),
        data.join("deleted").join(format!("{}-1", doomed.to_hex())),
    )
    .unwrap();
    let (ok, out) = tier_cmd(
        &data,
        &b,
        &ep,
        &["repo", "delete", DOOMED, "--yes", "--confirm", DOOMED],
    );
    assert!(ok, "{out}");
    assert!(out.contains("moved by an earlier run"), "{out}");
    assert_gone_from_the_bucket(&b, &p);
    let (ok, out) = tier_verify(&data, &b);
    assert!(ok, "{out}");
}

/// `scribe-server` offline (rename, retire, delete), without a bucket
/// named: success and the output.
fn offline(data: &Path, args: &[&str]) -> (bool, String) {
    let out = bin()
        .args(args)
        .args(["--data", data.to_str().unwrap()])
        .output()
        .unwrap();
    said(&out)
}

/// A lock request on `repo`: the error code it is refused with, and the
/// message (or `None` when granted).
fn lock_refusal(
    c: &mut impl Requests,
    repo: &str,
    ws: WorkspaceId,
    path: &str,
) -> Option<(u16, String)> {
    let branch = c
        .repo_list()
        .into_iter()
        .find(|r| r.name == repo)
        .unwrap()
        .main_branch;
    match c.ask(Request::LockAcquire(m::LockAcquire {
        repo: repo.into(),
        workspace: ws,
        branch,
        author: "ann".into(),
        paths: vec![path.into()],
    })) {
        Response::Error(e) => Some((e.code, e.message)),
        _ => None,
    }
}

/// The data root's notes outside the catalog (`former-names`,
/// `retired-repositories`) come back from the bucket: a rename's old name
/// and a retirement made offline on a tiered root are shipped (sealed) by
/// the next `serve --tier` before the catalog's journal, and a root
/// restored from the bucket alone honours them: the old name is not given
/// to a new repository, the retired repository's workspace reads and is
/// refused a write with `repository_retired` naming whom to ask. A
/// repository retired and then deleted takes its retirement with it,
/// locally and in the restore. (`restore --from-tier` started without
/// both files: the old name was free and the retired repository
/// writable.)
#[test]
fn restore_from_tier_brings_back_former_names_and_retirements() {
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    let ep = rgw().endpoint.clone();
    create_repo(&data, "old-name");
    create_repo(&data, DOOMED);
    let s = serve(&data, &b, &ep, &["--ack", "durable"]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    let ws = WorkspaceId([9; 16]);
    c.register(ws);
    accepted(&submit(&mut c, 1, &[("a.txt", b"ay")]));
    let doomed = id_of(&mut c, DOOMED);
    drop(c);
    kill(s);

    // Offline: a rename, two retirements, the deletion of one retired.
    let (ok, out) = offline(&data, &["repo", "rename", "old-name", "new-name"]);
    assert!(ok, "{out}");
    let (ok, out) = offline(&data, &["repo", "retire", REPO, "--contact", "ops@studio"]);
    assert!(ok, "{out}");
    let (ok, out) = offline(&data, &["repo", "retire", DOOMED]);
    assert!(ok, "{out}");
    let (ok, out) = tier_cmd(
        &data,
        &b,
        &ep,
        &["repo", "delete", DOOMED, "--yes", "--confirm", DOOMED],
    );
    assert!(ok, "{out}");
    let retired_here = std::fs::read_to_string(data.join("retired-repositories")).unwrap();

    // Served again: a durable submit to the renamed repository waits for
    // the catalog's journal step holding the rename, which the notes
    // precede.
    let s = serve(&data, &b, &ep, &["--ack", "durable"]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    let ws2 = WorkspaceId([8; 16]);
    register_in(&mut c, "new-name", ws2);
    accepted(&submit_in(&mut c, "new-name", ws2, 1, &[("n.txt", b"en")]));
    drop(c);
    kill(s);

    // The disk is lost.
    std::fs::remove_dir_all(&data).unwrap();
    let (ok, out) = restore_from_tier(&data, &b);
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!("{REPO}: retired")) && out.contains("1 former name(s)"),
        "{out}"
    );
    let retired = std::fs::read_to_string(data.join("retired-repositories")).unwrap();
    assert!(!retired.contains(&doomed.to_hex()), "{retired}");

    // The old name is still kept from reuse.
    let (ok, out) = offline(&data, &["repo", "create", "old-name"]);
    assert!(!ok, "the old name was given to a new repository: {out}");
    assert!(out.contains("--reuse-name"), "{out}");
    // The retired repository reads and refuses writes, naming whom to ask;
    // the renamed one takes them.
    let s = serve(&data, &b, &ep, &[]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    let info = c.register(ws);
    let (code, message) =
        lock_refusal(&mut c, REPO, ws, "a.txt").expect("a lock on a retired repository");
    assert_eq!(code, ErrorCode::RepositoryRetired.number(), "{message}");
    assert!(message.contains("ops@studio"), "{message}");
    assert_eq!(log(&mut c, info.branch).len(), 1);
    register_in(&mut c, "new-name", ws2);
    assert_eq!(lock_refusal(&mut c, "new-name", ws2, "n.txt"), None);
    drop(c);
    kill(s);
    assert!(
        !retired_here.contains(&doomed.to_hex()),
        "a deleted repository's retirement goes with it: {retired_here}"
    );
}

/// `scribe-server backup` of a tiered data root whose local store gave
/// its chunks back to the bucket (`tier evict`) fetches them back through
/// the tier's read path (each checked against its id) into the backup: a
/// data root restored from that backup, served without any bucket, reads
/// every object back. (The backup copied the store's files alone and
/// succeeded without the chunks: the restored root could not read them.)
/// Without the bucket named, or with the server running, the backup of a
/// tiered root is refused by name and writes nothing.
#[test]
fn a_backup_of_an_evicted_tiered_store_fetches_its_chunks_from_the_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    let ep = rgw().endpoint.clone();
    let s = serve(&data, &b, &ep, &["--ack", "durable"]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    c.register(WorkspaceId([9; 16]));
    let a = big(41, 3 << 20);
    accepted(&submit(&mut c, 1, &[("a.bin", &a), ("b.txt", b"bee")]));
    drop(c);
    kill(s);
    let f = scribe_testkit::change::file(&a);
    let (ok, out) = tier_cmd(&data, &b, &ep, &["tier", "evict"]);
    assert!(ok, "{out}");
    assert!(
        f.objects
            .iter()
            .filter(|(id, _)| id.kind == scribe_format::ObjectKind::Chunk)
            .all(|(id, _)| !held_locally(&data, id)),
        "the chunks left the local store: {out}"
    );

    // Refused without the bucket named: nothing written.
    let refused = dir.path().join("refused");
    let (ok, out) = offline(&data, &["backup", "--to", refused.to_str().unwrap()]);
    assert!(
        !ok && out.contains("S3 tier state") && out.contains("--tier"),
        "{out}"
    );
    assert!(!refused.join("BACKUP_MANIFEST").exists());
    // Refused while served (the tier record is the server's).
    let s = serve(&data, &b, &ep, &[]);
    let (ok, out) = tier_cmd(
        &data,
        &b,
        &ep,
        &["backup", "--to", refused.to_str().unwrap()],
    );
    assert!(!ok && out.contains("server stopped"), "{out}");
    kill(s);
    assert!(!refused.join("BACKUP_MANIFEST").exists());

    let backup = dir.path().join("backup");
    let (ok, out) = tier_cmd(
        &data,
        &b,
        &ep,
        &["backup", "--to", backup.to_str().unwrap()],
    );
    assert!(ok, "{out}");
    let backed_up = out;
    let restored = dir.path().join("restored");
    let (ok, out) = offline(&restored, &["restore", "--from", backup.to_str().unwrap()]);
    assert!(ok, "{out}");
    // Served in-process, without the tier: every object from the backup.
    let mut c =
        scribe_server::InProcessConnection::new(scribe_server::Service::open(&restored).unwrap());
    for content in [&a[..], b"bee"] {
        for (id, bytes) in &scribe_testkit::change::file(content).objects {
            assert_eq!(&c.object(REPO, *id), bytes, "{id} from the backup");
        }
    }
    assert!(backed_up.contains("fetched from it"), "{backed_up}");

    // `export` is metadata only: an import taking its objects from the
    // evicted store is refused (its doctor names what is missing) and
    // publishes nothing; from the backup's copy of the store it is whole.
    let scmx = dir.path().join("game.scmx");
    let (ok, out) = offline(&data, &["export", REPO, "--to", scmx.to_str().unwrap()]);
    assert!(ok, "{out}");
    let other = dir.path().join("other");
    assert!(bin()
        .args(["init", "--data", other.to_str().unwrap()])
        .status()
        .unwrap()
        .success());
    let id = only_repo(&data).to_hex();
    let evicted = data.join("repos").join(&id).join("objects");
    let (ok, out) = offline(
        &other,
        &[
            "import",
            scmx.to_str().unwrap(),
            "--objects",
            evicted.to_str().unwrap(),
        ],
    );
    assert!(!ok && out.contains("missing"), "{out}");
    let copied = backup.join("repos").join(&id).join("objects");
    let (ok, out) = offline(
        &other,
        &[
            "import",
            scmx.to_str().unwrap(),
            "--objects",
            copied.to_str().unwrap(),
        ],
    );
    assert!(ok, "{out}");
}

/// A repository of a data root restored from the bucket shipped its
/// journal under the original root's journal shard too; `repo delete` on
/// the restored root gives that one up with its own (it was left behind,
/// named only by listing).
#[test]
fn a_repository_deleted_after_a_restore_leaves_no_journal_under_the_shard_it_was_restored_from() {
    let dir = tempfile::tempdir().unwrap();
    let data = init(dir.path());
    let b = bucket();
    let ep = rgw().endpoint.clone();
    let (ws, _, _) = durable_history(&data, &b);
    let repo = ws.repository;
    let before = record(&data, &b).journal_shard();
    let old = format!("nokv/recovery/{before:08x}/{}", repo.to_hex());
    assert!(!keys_below(&b, &old).is_empty());
    std::fs::remove_dir_all(&data).unwrap();
    let (ok, out) = restore_from_tier(&data, &b);
    assert!(ok, "{out}");
    // The restored root ships its own journal, under its own shard.
    let s = serve(&data, &b, &ep, &["--ack", "durable"]);
    let mut c = wire::tcp(s.addr.parse().unwrap());
    c.register(WorkspaceId([9; 16]));
    accepted(&submit(&mut c, 4, &[("e.txt", b"after the restore")]));
    drop(c);
    kill(s);
    let p = prefixes(&data, &b, repo);
    assert_ne!(p.journal, old);
    assert!(!keys_below(&b, &p.journal).is_empty());

    let (ok, out) = tier_cmd(
        &data,
        &b,
        &ep,
        &["repo", "delete", REPO, "--yes", "--confirm", REPO],
    );
    assert!(ok, "{out}");
    assert_gone_from_the_bucket(&b, &p);
    assert_eq!(
        keys_below(&b, &old),
        Vec::<String>::new(),
        "the journal shipped before the restore is left"
    );
}

//! `scribe-server archive verify` and `recover --from-archive` with real
//! processes: a served data root SIGKILLed after acknowledged submissions,
//! its `metadata.redb` deleted outright, rebuilt from the archive alone,
//! and served again with every acknowledged change.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use scribe_format::{OperationId, WorkspaceId};
use scribe_server::{InProcessConnection, Service};
use scribe_testkit::change::{accepted, change, Requests};
use scribe_testkit::{wire, REPO};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_scribe-server"))
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run scribe-server")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(out: &Output) {
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// `serve` until it writes `listen`; returns the child and the address.
fn serve(data: &Path, runtime: &Path) -> (std::process::Child, String) {
    let mut child = bin()
        .args([
            "serve",
            "--data",
            data.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ])
        .arg("--runtime-dir")
        .arg(runtime)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn serve");
    let listen = runtime.join("listen");
    loop {
        if let Ok(s) = std::fs::read_to_string(&listen) {
            if s.ends_with('\n') {
                return (child, s.trim().to_string());
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("serve exited: {status}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `init` and `repo create` in `dir/data`; returns the data root and the
/// repository's directory.
fn data_root(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let data = dir.join("data");
    let d = data.to_str().unwrap();
    ok(&run(&["init", "--data", d]));
    let out = run(&["repo", "create", "--data", d, REPO]);
    ok(&out);
    let repo_dir = data.join("repos").join(text(&out.stdout).trim());
    (data, repo_dir)
}

#[test]
fn a_deleted_metadata_redb_is_rebuilt_from_the_archive_after_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let (data, repo_dir) = data_root(dir.path());
    let d = data.to_str().unwrap();

    let (mut child, addr) = serve(&data, &dir.path().join("run"));
    let mut c = wire::tcp(addr.parse().unwrap());
    let ws = WorkspaceId([1; 16]);
    c.register(ws);
    let mut last = 0;
    for i in 0..5u8 {
        let name = format!("f{i}.txt");
        let body = vec![b'a' + i; 10 + i as usize];
        last = accepted(&c.upload_and_submit(
            ws,
            OperationId([i + 1; 16]),
            &change(&[(name.as_str(), Some(body.as_slice()), 0)]),
            "m",
        ));
    }
    drop(c);
    child.kill().unwrap(); // SIGKILL: no shutdown path runs
    child.wait().unwrap();
    let _ = std::fs::remove_file(dir.path().join("run/listen"));

    ok(&run(&["archive", "verify", "--data", d]));
    // The metadata volume is lost.
    std::fs::remove_file(repo_dir.join("metadata.redb")).unwrap();
    // Without the flag: a usage error.
    let out = run(&["recover", "--data", d, "--repo", REPO]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let out = run(&["recover", "--data", d, "--repo", REPO, "--from-archive"]);
    ok(&out);
    assert!(
        text(&out.stdout).contains("rebuilt"),
        "{}",
        text(&out.stdout)
    );
    assert!(!repo_dir.join("metadata.redb.replay").exists());
    // A second recovery refuses to replace the rebuilt file.
    let out = run(&["recover", "--data", d, "--repo", REPO, "--from-archive"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("exists"),
        "{}",
        text(&out.stderr)
    );
    ok(&run(&["doctor", "--data", d]));
    ok(&run(&["archive", "verify", "--data", d, "--repo", REPO]));
    // The catalog is lost as well: rebuilt from catalog.recovery.
    std::fs::remove_file(data.join("catalog.redb")).unwrap();
    let out = run(&["recover", "--data", d, "--from-archive"]);
    ok(&out);
    assert!(
        text(&out.stdout).contains("catalog: rebuilt") && text(&out.stdout).contains("1 repositor"),
        "{}",
        text(&out.stdout)
    );
    let out = run(&["archive", "verify", "--data", d]);
    ok(&out);
    assert!(
        text(&out.stdout).contains("catalog ("),
        "{}",
        text(&out.stdout)
    );

    // Served again: every acknowledged change is there; writes continue.
    let (mut child, addr) = serve(&data, &dir.path().join("run2"));
    let mut c = wire::tcp(addr.parse().unwrap());
    c.register(ws);
    let next = accepted(&c.upload_and_submit(
        ws,
        OperationId([9; 16]),
        &change(&[("after.txt", Some(b"after".as_slice()), 0)]),
        "m",
    ));
    assert_eq!(next, last + 1);
    drop(c);
    child.kill().unwrap();
    child.wait().unwrap();
    let mut c = InProcessConnection::new(Service::open(&data).unwrap());
    assert_eq!(c.repo_list()[0].head, last + 1);
}

#[test]
fn archive_verify_names_the_file_and_offset_of_a_damaged_frame() {
    let dir = tempfile::tempdir().unwrap();
    let (data, repo_dir) = data_root(dir.path());
    let d = data.to_str().unwrap();
    let seg = repo_dir.join("metadata.recovery/00000000000000000001.journal");
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[60] ^= 0x01;
    std::fs::write(&seg, &bytes).unwrap();
    let out = run(&["archive", "verify", "--data", d]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("problem: ") && stdout.contains("00000000000000000001.journal: at byte"),
        "{stdout}"
    );
}

#[test]
fn consolidated_and_relocated_archives_rebuild_every_acknowledged_change() {
    let dir = tempfile::tempdir().unwrap();
    let (data, repo_dir) = data_root(dir.path());
    let d = data.to_str().unwrap();
    let ws = WorkspaceId([1; 16]);
    let submit = |addr: &str, i: u8| {
        let mut c = wire::tcp(addr.parse().unwrap());
        c.register(ws);
        let name = format!("f{i}.txt");
        accepted(&c.upload_and_submit(
            ws,
            OperationId([i + 1; 16]),
            &change(&[(name.as_str(), Some(vec![i; 8].as_slice()), 0)]),
            "m",
        ))
    };

    let (mut child, addr) = serve(&data, &dir.path().join("run"));
    for i in 0..3 {
        submit(&addr, i);
    }
    // Consolidation is offline: refused while the server holds the root.
    let out = run(&["consolidate", "--data", d]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(!repo_dir.join("metadata.recovery/BASE").exists());
    child.kill().unwrap();
    child.wait().unwrap();

    let out = run(&["consolidate", "--data", d]);
    ok(&out);
    let report = text(&out.stdout);
    assert!(report.contains("catalog: base at journal end"), "{report}");
    assert!(
        report.contains(&format!("{REPO}: base at journal end")),
        "{report}"
    );
    assert!(repo_dir.join("metadata.recovery/BASE").is_file());
    let out = run(&["archive", "verify", "--data", d]);
    ok(&out);
    assert!(text(&out.stdout).contains("after the base at journal end"));

    // More acknowledged changes after the base, then a move of every
    // archive to a second volume (a relative --to is resolved).
    let (mut child, addr) = serve(&data, &dir.path().join("run2"));
    let mut last = 0;
    for i in 3..6 {
        last = submit(&addr, i);
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let out = bin()
        .current_dir(dir.path())
        .args(["archive", "relocate", "--data", d, "--to", "volume2"])
        .output()
        .unwrap();
    ok(&out);
    let moved = dir.path().join("volume2");
    assert!(moved.join("catalog.recovery/HEAD").is_file());
    assert!(
        repo_dir.join("metadata.recovery/HEAD").is_file(),
        "old kept"
    );
    let (mut child, addr) = serve(&data, &dir.path().join("run3"));
    last = last.max(submit(&addr, 6));
    child.kill().unwrap();
    child.wait().unwrap();

    // Both metadata files are lost: rebuilt from base + frames alone.
    std::fs::remove_file(repo_dir.join("metadata.redb")).unwrap();
    std::fs::remove_file(data.join("catalog.redb")).unwrap();
    ok(&run(&["recover", "--data", d, "--from-archive"]));
    ok(&run(&[
        "recover",
        "--data",
        d,
        "--repo",
        REPO,
        "--from-archive",
    ]));
    ok(&run(&["doctor", "--data", d]));
    ok(&run(&["archive", "verify", "--data", d]));
    let mut c = InProcessConnection::new(Service::open(&data).unwrap());
    assert_eq!(c.repo_list()[0].head, last);
}

/// What one writer had acknowledged when the server was killed.
#[derive(Default)]
struct Acked {
    /// (change, path) of every acknowledged submission.
    changes: Vec<(u64, String)>,
    /// The writer's lock as the last acknowledged request left it; `None`
    /// when a lock request was in flight (either state may survive).
    lock_held: Option<bool>,
}

#[test]
fn concurrent_writers_killed_mid_load_lose_nothing_acknowledged_when_rebuilt_from_the_archive() {
    use scribe_format::wire::message::{self as m, Request, Response};
    use scribe_testkit::change::{main_branch, put_many_req, register_req, submit_req};

    let dir = tempfile::tempdir().unwrap();
    let (data, repo_dir) = data_root(dir.path());
    let d = data.to_str().unwrap();
    let (mut child, addr) = serve(&data, &dir.path().join("run"));
    let acked: Vec<std::sync::Arc<std::sync::Mutex<Acked>>> = (0..8)
        .map(|_| std::sync::Arc::new(std::sync::Mutex::new(Acked::default())))
        .collect();
    let writers: Vec<_> = acked
        .iter()
        .enumerate()
        .map(|(t, acked)| {
            let (acked, addr) = (acked.clone(), addr.clone());
            std::thread::spawn(move || {
                let mut c = wire::tcp(addr.parse().unwrap());
                let ws = WorkspaceId([t as u8 + 1; 16]);
                c.call(Request::WorkspaceRegister(register_req(REPO, ws)));
                let lock = vec![format!("locks/{t}.psd")];
                acked.lock().unwrap().lock_held = Some(false);
                // Until the server dies: upload (pins), submit (group
                // acceptance), take or give back the writer's lock.
                for i in 0u32.. {
                    let path = format!("w{t}/f{i}.bin");
                    let body = format!("{t}/{i}").into_bytes();
                    let ch = change(&[(path.as_str(), Some(body.as_slice()), 0)]);
                    let mut op = [0u8; 16];
                    op[0] = t as u8 + 1;
                    op[4..8].copy_from_slice(&i.to_le_bytes());
                    let op = OperationId(op);
                    let put = Request::ObjectPutMany(put_many_req(ws, op, &ch.objects));
                    if !matches!(c.try_call(put), Ok(Response::ObjectPutMany(_))) {
                        return;
                    }
                    let submit = Request::Submit(submit_req(ws, op, ch.id, "load"));
                    match c.try_call(submit) {
                        Ok(Response::Submitted(o)) => {
                            acked.lock().unwrap().changes.push((accepted(&o), path));
                        }
                        _ => return,
                    }
                    let take = i % 2 == 0;
                    let req = if take {
                        Request::LockAcquire(m::LockAcquire {
                            repo: REPO.into(),
                            workspace: ws,
                            branch: main_branch(),
                            author: "ada".into(),
                            paths: lock.clone(),
                        })
                    } else {
                        Request::LockRelease(m::LockRelease {
                            repo: REPO.into(),
                            workspace: ws,
                            paths: lock.clone(),
                        })
                    };
                    acked.lock().unwrap().lock_held = None;
                    match c.try_call(req) {
                        Ok(Response::LocksAcquired(_)) | Ok(Response::LocksReleased(_)) => {
                            acked.lock().unwrap().lock_held = Some(take);
                        }
                        _ => return,
                    }
                }
            })
        })
        .collect();
    // Kill the server while every writer is mid-stream.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while acked.iter().any(|a| a.lock().unwrap().changes.len() < 6) {
        assert!(
            std::time::Instant::now() < deadline,
            "writers made no progress"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    for w in writers {
        w.join().unwrap();
    }
    let _ = std::fs::remove_file(dir.path().join("run/listen"));

    // The metadata volume is lost; the archive alone rebuilds it.
    std::fs::remove_file(repo_dir.join("metadata.redb")).unwrap();
    ok(&run(&[
        "recover",
        "--data",
        d,
        "--repo",
        REPO,
        "--from-archive",
    ]));
    ok(&run(&["doctor", "--data", d]));
    let service = Service::open(&data).unwrap();
    let repo = service.root().open_repository_by_name(REPO).unwrap();
    let head = repo.head().unwrap();
    let locks: Vec<String> = repo
        .locks("")
        .unwrap()
        .into_iter()
        .map(|l| l.path)
        .collect();
    let main = repo.main_branch();
    for (t, a) in acked.iter().enumerate() {
        let a = a.lock().unwrap();
        for (n, path) in &a.changes {
            assert!(*n <= head, "writer {t}: change {n} beyond head {head}");
            let stat = repo.view().unwrap().stat(main, *n, path).unwrap();
            assert!(
                stat.is_some(),
                "writer {t}: acknowledged {path} of change {n} is lost"
            );
        }
        if let Some(held) = a.lock_held {
            let lock = format!("locks/{t}.psd");
            assert_eq!(
                locks.contains(&lock),
                held,
                "writer {t}: acknowledged lock state of {lock}"
            );
        }
    }
}

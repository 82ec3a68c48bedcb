//! The workflows as a library: what the `scribe` binary does, called
//! directly, with typed reports and progress recorded by the caller.

use std::sync::{Arc, Mutex};

use scribe_client::workflow::submit::{self, SubmitArgs};
use scribe_client::workflow::workspace::{self, CreateArgs};
use scribe_client::workflow::{files, repo, sync, Opened};
use scribe_client::{Context, Note, Progress, Task};
use scribe_format::ErrorCode;

/// Records everything a workflow reports.
#[derive(Default)]
struct Recorder(Mutex<Vec<String>>);

impl Progress for Recorder {
    fn note(&self, note: Note) {
        self.0.lock().unwrap().push(format!("note {note:?}"));
    }
    fn start(&self, task: Task, total: u64) {
        self.0
            .lock()
            .unwrap()
            .push(format!("start {task:?} {total}"));
    }
    fn advance(&self, task: Task, n: u64) {
        self.0.lock().unwrap().push(format!("advance {task:?} {n}"));
    }
    fn finish(&self, task: Task) {
        self.0.lock().unwrap().push(format!("finish {task:?}"));
    }
}

fn events(r: &Recorder, prefix: &str) -> Vec<String> {
    r.0.lock()
        .unwrap()
        .iter()
        .filter(|e| e.starts_with(prefix))
        .cloned()
        .collect()
}

#[test]
fn submit_and_sync_run_as_library_calls_and_report_progress() {
    let tmp = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder::default());
    let ctx = Context {
        progress: recorder.clone(),
        ..Context::default()
    };
    let server = tmp.path().join("server").display().to_string();
    // A path server that holds no data root is refused unless created.
    let e = repo::list(&ctx, &server).unwrap_err();
    assert_eq!(e.code(), ErrorCode::NotFound);
    repo::create(&ctx, &server, "demo").unwrap();
    let args = |name: &str| CreateArgs {
        dir: tmp.path().join(name),
        server: server.clone(),
        repo: "demo".into(),
        author: name.into(),
        ..CreateArgs::default()
    };
    let a = workspace::create(&ctx, args("alice")).unwrap();
    assert_eq!(a.synced.change, 0);
    assert_eq!(events(&recorder, "note WorkspaceCreated").len(), 1);
    // A second create in the same directory is refused, and nothing breaks.
    let again = workspace::create(&ctx, args("alice")).unwrap_err();
    assert_eq!(again.code(), ErrorCode::AlreadyExists);

    let body = scribe_testkit::noise(3 << 20, 1);
    std::fs::write(a.root.join("big.bin"), &body).unwrap();
    std::fs::write(a.root.join("small.txt"), b"hello").unwrap();
    let o = Opened::find(&a.root).unwrap();
    let added = files::add(&o, &[String::new()]).unwrap();
    assert_eq!(added.opened.len(), 2, "{added:?}");
    let link = o.link(&ctx).unwrap();
    // A new submission needs a message.
    let e = submit::submit(&o, &link, SubmitArgs::default()).unwrap_err();
    assert_eq!(e.code(), ErrorCode::Usage);
    let s = submit::submit(
        &o,
        &link,
        SubmitArgs {
            message: "first".into(),
            ..SubmitArgs::default()
        },
    )
    .unwrap();
    assert_eq!((s.change, s.files), (1, 2));
    assert!(s.uploaded_bytes >= body.len() as u64, "{s:?}");
    // Both files streamed (the small one too): their bytes were reported
    // as they went.
    let streamed: u64 = events(&recorder, "advance Stream ")
        .iter()
        .map(|e| e.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(streamed, body.len() as u64 + 5);
    assert_eq!(events(&recorder, "finish Stream").len(), 1);
    drop(link);
    drop(o);

    let b = workspace::create(&ctx, args("bob")).unwrap();
    assert_eq!(b.synced.change, 1);
    assert_eq!(std::fs::read(b.root.join("big.bin")).unwrap(), body);
    let synced: u64 = events(&recorder, "advance Sync ")
        .iter()
        .map(|e| e.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(synced, body.len() as u64 + 5);

    // Nothing new: a sync is a no-op that says so.
    let ob = Opened::find(&b.root).unwrap();
    let link = ob.link(&ctx).unwrap();
    let s = sync::sync(&ob, &link, None).unwrap();
    assert_eq!(s.change, 1);
    assert!(s.report.written.is_empty() && s.report.removed.is_empty());
}

/// #18 item 15: progress reports the bytes actually sent (`Task::Sent`)
/// apart from the bytes read (`Task::Stream`): after a 1 MiB edit in the
/// middle of a 32 MiB file, all of it is read but only the chunks around
/// the edit are sent (chunks average 4 MiB).
#[test]
fn progress_reports_the_bytes_actually_sent() {
    let tmp = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder::default());
    let ctx = Context {
        progress: recorder.clone(),
        ..Context::default()
    };
    let server = tmp.path().join("server").display().to_string();
    repo::create(&ctx, &server, "demo").unwrap();
    let a = workspace::create(
        &ctx,
        CreateArgs {
            dir: tmp.path().join("alice"),
            server: server.clone(),
            repo: "demo".into(),
            author: "alice".into(),
            ..CreateArgs::default()
        },
    )
    .unwrap();
    let sum = |prefix: &str| -> u64 {
        events(&recorder, prefix)
            .iter()
            .map(|e| e.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum()
    };
    let mut body = scribe_testkit::noise(32 << 20, 7);
    std::fs::write(a.root.join("big.bin"), &body).unwrap();
    let o = Opened::find(&a.root).unwrap();
    files::add(&o, &["big.bin".to_string()]).unwrap();
    let link = o.link(&ctx).unwrap();
    let submit_with = |m: &str| {
        submit::submit(
            &o,
            &link,
            SubmitArgs {
                message: m.into(),
                ..SubmitArgs::default()
            },
        )
        .unwrap()
    };
    submit_with("first");
    let first_sent = sum("advance Sent ");
    assert!(first_sent >= body.len() as u64, "sent {first_sent}");
    recorder.0.lock().unwrap().clear();

    files::edit(&ctx, &o, &["big.bin".to_string()]).unwrap();
    let patch = scribe_testkit::noise(1 << 20, 8);
    body[(16 << 20)..(17 << 20)].copy_from_slice(&patch);
    std::fs::write(a.root.join("big.bin"), &body).unwrap();
    submit_with("a 1 MiB edit");
    assert_eq!(
        sum("advance Stream "),
        body.len() as u64,
        "all of it is read"
    );
    let sent = sum("advance Sent ");
    assert!(
        sent > 0 && sent < (16 << 20),
        "the chunks around the edit are sent, not {sent} of {first_sent}"
    );
    assert!(events(&recorder, "start Sent").is_empty());
}

/// Issue 19: a submit of a few edited files reads the baseline rows of
/// the files it submits, not every tracked file's (a per-tree cost that
/// made a 10-file submit in a 52,000-file workspace slow). Proven by a
/// row no read can decode, planted under an unrelated tracked path: the
/// edit submits, while a reader of every row (an add's collision check)
/// is refused naming it.
#[test]
fn a_submit_of_edits_reads_only_the_baselines_it_submits() {
    let tmp = tempfile::tempdir().unwrap();
    let ctx = Context::default();
    let server = tmp.path().join("server").display().to_string();
    repo::create(&ctx, &server, "demo").unwrap();
    let a = workspace::create(
        &ctx,
        CreateArgs {
            dir: tmp.path().join("ws"),
            server: server.clone(),
            repo: "demo".into(),
            author: "alice".into(),
            ..CreateArgs::default()
        },
    )
    .unwrap();
    for name in ["a.txt", "b.txt", "zz.txt"] {
        std::fs::write(a.root.join(name), name.as_bytes()).unwrap();
    }
    let submit_all = |message: &str| {
        let o = Opened::find(&a.root).unwrap();
        let link = o.link(&ctx).unwrap();
        submit::submit(
            &o,
            &link,
            SubmitArgs {
                message: message.into(),
                ..SubmitArgs::default()
            },
        )
    };
    {
        let o = Opened::find(&a.root).unwrap();
        files::add(&o, &[String::new()]).unwrap();
    }
    assert_eq!(submit_all("first").unwrap().change, 1);
    {
        let o = Opened::find(&a.root).unwrap();
        let ctx = Context::default();
        files::edit(&ctx, &o, &["a.txt".to_string()]).unwrap();
    }
    std::fs::write(a.root.join("a.txt"), b"a, edited").unwrap();
    // Damage the baseline row of `zz.txt`, which the next submit does not name.
    {
        let db = a.root.join(".scribe/_state/state.redb");
        let rdb = redb::Database::create(db).unwrap();
        let tx = rdb.begin_write().unwrap();
        tx.open_table(redb::TableDefinition::<&str, &[u8]>::new("baseline"))
            .unwrap()
            .insert("zz.txt", b"\x01garbage".as_slice())
            .unwrap();
        tx.commit().unwrap();
    }
    let s = submit_all("edit a").unwrap();
    assert_eq!((s.change, s.files), (2, 1));
    // The planted row is damage to any reader of every baseline: an add
    // (checking collisions against every tracked path) is refused naming it.
    std::fs::write(a.root.join("new.txt"), b"new").unwrap();
    {
        let o = Opened::find(&a.root).unwrap();
        let e = files::add(&o, &["new.txt".to_string()]).unwrap_err();
        assert!(e.to_string().contains("zz.txt"), "{e}");
    }
}

/// Write `files` into the workspace at `root` and open them all for add.
fn write_and_add(root: &std::path::Path, files: &[(String, Vec<u8>)]) -> Opened {
    for (path, body) in files {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }
    let o = Opened::find(root).unwrap();
    files::add(&o, &[String::new()]).unwrap();
    o
}

/// A workspace `dir` under `tmp` of `env`'s repository, authored by alice.
fn create_in(
    ctx: &Context,
    env: &scribe_testkit::Env,
    tmp: &std::path::Path,
    dir: &str,
) -> scribe_client::workflow::workspace::Created {
    workspace::create(
        ctx,
        CreateArgs {
            dir: tmp.join(dir),
            server: env.url().to_string(),
            repo: scribe_testkit::REPO.into(),
            author: "alice".into(),
            ..CreateArgs::default()
        },
    )
    .unwrap()
}

/// Over TCP an import whose small-file manifests fill several
/// `ObjectPutMany` groups (4,096 each; sent from memory on two connections
/// since issue 19) delivers each once: 9,000 small files count each
/// manifest once in the upload (and the change set), and a fresh workspace
/// of the result holds every file. (It checks the delivery, not which
/// connection carried what: the path before the change passes it too.)
#[test]
fn an_import_of_many_small_files_over_tcp_sends_each_manifest_once() {
    use scribe_testkit::{Env, Transport};
    let env = Env::new(Transport::Tcp);
    let tmp = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder::default());
    let ctx = Context {
        progress: recorder.clone(),
        ..Context::default()
    };
    let create = |dir: &str| create_in(&ctx, &env, tmp.path(), dir);
    let a = create("alice");
    let files: Vec<(String, Vec<u8>)> = (0..9_000)
        .map(|i| {
            (
                format!("d{:02}/f{i:05}.txt", i % 37),
                format!("small file {i}\n").repeat(1 + i % 5).into_bytes(),
            )
        })
        .collect();
    let o = write_and_add(&a.root, &files);
    let link = o.link(&ctx).unwrap();
    recorder.0.lock().unwrap().clear();
    let done = submit::submit(
        &o,
        &link,
        SubmitArgs {
            message: "import".into(),
            ..SubmitArgs::default()
        },
    )
    .unwrap();
    assert_eq!(done.files, files.len());
    let count = |prefix: &str| -> u64 {
        events(&recorder, prefix)
            .iter()
            .map(|e| e.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum()
    };
    // Every manifest and the change set, each once.
    assert_eq!(count("start Upload "), files.len() as u64 + 1);
    assert_eq!(count("advance Upload "), files.len() as u64 + 1);

    let b = create("bob");
    for (path, body) in &files {
        assert_eq!(&std::fs::read(b.root.join(path)).unwrap(), body, "{path}");
    }
}

/// An import whose freeze outruns an in-process server (a path URL, the
/// embedded default) finishes. The chunkers block on the upload queue
/// when it is full; on the process's shared rayon pool, which the
/// in-process server's storing of each group also needs, every worker
/// waited for the queue and the uploader for a worker: every embedded
/// import of the 12,980-file registry tree hung (found 2026-12-07). Here
/// 512 files of 256 KiB (each one small object, 128 MiB: twice the
/// queue's bytes) hung in three runs of three before the chunkers got a
/// pool of their own; the import must finish within a minute and a fresh
/// workspace hold every file.
#[test]
fn an_embedded_import_that_outruns_the_server_finishes() {
    use scribe_testkit::{Env, Transport};
    let env = Env::new(Transport::Path);
    let tmp = tempfile::tempdir().unwrap();
    let ctx = Context::default();
    let create = |dir: &str| create_in(&ctx, &env, tmp.path(), dir);
    let a = create("alice");
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let files: Vec<(String, Vec<u8>)> = (0..512)
        .map(|i| {
            let body = (0..256 << 10)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            (format!("d{:02}/f{i:03}.bin", i % 7), body)
        })
        .collect();
    let o = write_and_add(&a.root, &files);
    drop(o);
    let (tx, rx) = std::sync::mpsc::channel();
    let root = a.root.clone();
    std::thread::spawn(move || {
        let ctx = Context::default();
        let r = {
            let o = Opened::find(&root).unwrap();
            let link = o.link(&ctx).unwrap();
            submit::submit(
                &o,
                &link,
                SubmitArgs {
                    message: "import".into(),
                    ..SubmitArgs::default()
                },
            )
            .map(|d| d.files)
        };
        let _ = tx.send(r);
    });
    let done = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the embedded import of 512 files did not finish within 60 s (deadlocked)");
    assert_eq!(done.unwrap(), files.len());
    let b = create("bob");
    for (path, body) in &files {
        assert_eq!(&std::fs::read(b.root.join(path)).unwrap(), body, "{path}");
    }
}

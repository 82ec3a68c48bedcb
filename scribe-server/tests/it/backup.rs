//! `scribe-server backup`, `restore`, `export` and `import` with real
//! processes (#16, seed 004 section 10): a backup taken while the data
//! root is served holds every acknowledged change and restores to a clean
//! data root with new incarnations and its own archives; a SIGKILLed
//! backup is refused by restore (`backup_incomplete`); a bit-flipped or
//! truncated backup file is refused by name; an export taken while serving
//! imports into another data root; a SIGKILLed import publishes nothing
//! and the next import succeeds; a truncated `.scmx` is refused with the
//! byte offset.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use scribe_format::{OperationId, WorkspaceId};
use scribe_server::{InProcessConnection, Service};
use scribe_testkit::change::{accepted, change, Requests};
use scribe_testkit::{wire, REPO};

pub(super) fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_scribe-server"))
}

pub(super) fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run scribe-server")
}

pub(super) fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub(super) fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

pub(super) fn failed(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stderr)
}

pub(super) fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `serve` until it writes `listen`; returns the child and the address.
pub(super) fn serve(data: &Path, runtime: &Path) -> (Child, String) {
    let mut child = bin()
        .args(["serve", "--data", s(data), "--listen", "127.0.0.1:0"])
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

pub(super) fn stop(mut child: Child, runtime: &Path) {
    child.kill().unwrap(); // SIGKILL: no shutdown path runs
    child.wait().unwrap();
    let _ = std::fs::remove_file(runtime.join("listen"));
}

/// Run a command with `SCRIBE_SERVER_PAUSE_AT=step`, wait until it says
/// it paused there, and SIGKILL it.
pub(super) fn kill_at(step: &str, args: &[&str]) {
    let mut child = bin()
        .args(args)
        .env("SCRIBE_SERVER_PAUSE_AT", step)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut said = String::new();
    for line in BufReader::new(stderr).lines() {
        let line = line.unwrap();
        said.push_str(&line);
        said.push('\n');
        if line.contains(&format!("paused at {}", step.split(':').next().unwrap())) {
            child.kill().unwrap();
            child.wait().unwrap();
            return;
        }
    }
    let status = child.wait().unwrap();
    panic!("{args:?} never paused at {step} ({status}): {said}");
}

fn argv(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

pub(super) fn head(data: &Path) -> u64 {
    let mut c = InProcessConnection::new(Service::open(data).unwrap());
    c.repo_list()[0].head
}

/// A served data root with five acknowledged submissions; returns the
/// server, the repository directory and the last change.
pub(super) fn served_with_changes(dir: &Path) -> (PathBuf, Child, PathBuf, u64) {
    let data = dir.join("data");
    ok(&run(&["init", "--data", s(&data)]));
    let id = ok(&run(&["repo", "create", "--data", s(&data), REPO]));
    let repo_dir = data.join("repos").join(id.trim());
    let (child, addr) = serve(&data, &dir.join("run"));
    let mut c = wire::tcp(addr.parse().unwrap());
    c.register(WorkspaceId([1; 16]));
    let mut last = 0;
    for i in 0..5u8 {
        let name = format!("f{i}.bin");
        let body = vec![b'a' + i; 1000 + i as usize];
        last = accepted(&c.upload_and_submit(
            WorkspaceId([1; 16]),
            OperationId([i + 1; 16]),
            &change(&[(name.as_str(), Some(body.as_slice()), 0)]),
            "m",
        ));
    }
    (data, child, repo_dir, last)
}

pub(super) fn submit_one(addr: &str, op: u8, name: &str) -> u64 {
    let mut c = wire::tcp(addr.parse().unwrap());
    c.register(WorkspaceId([1; 16]));
    accepted(&c.upload_and_submit(
        WorkspaceId([1; 16]),
        OperationId([op; 16]),
        &change(&[(name, Some(b"later".as_slice()), 0)]),
        "m",
    ))
}

#[test]
fn a_backup_taken_while_serving_restores_every_acknowledged_change() {
    let dir = tempfile::tempdir().unwrap();
    let (data, child, repo_dir, last) = served_with_changes(dir.path());
    let backup = dir.path().join("backup");
    // The server keeps serving (and holds every file open) meanwhile.
    let out = run(&["backup", "--data", s(&data), "--to", s(&backup)]);
    ok(&out);
    assert!(
        text(&out.stderr).contains("(served)"),
        "{}",
        text(&out.stderr)
    );
    let manifest = std::fs::read_to_string(backup.join("BACKUP_MANIFEST")).unwrap();
    let mut lines = manifest.lines();
    assert_eq!(lines.next(), Some("scribe-backup-manifest = 1"));
    assert!(lines.next().unwrap().starts_with("created-ms = "));
    let desc = std::fs::read_to_string(data.join("SCRIBE_FORMAT")).unwrap();
    let source_inc = desc
        .lines()
        .find_map(|l| l.strip_prefix("incarnation = "))
        .unwrap()
        .to_string();
    assert!(manifest.contains(&format!("source-incarnation = {source_inc}\n")));
    let id = repo_dir.file_name().unwrap().to_str().unwrap();
    assert!(
        manifest.contains(&format!("repository-{id} = {REPO} head={last} commit=")),
        "{manifest}"
    );
    for l in manifest.lines().filter(|l| l.starts_with("file = ")) {
        let parts: Vec<&str> = l["file = ".len()..].splitn(3, ' ').collect();
        let bytes = std::fs::read(backup.join(parts[2])).unwrap();
        assert_eq!(parts[0], blake3::hash(&bytes).to_hex().as_str(), "{l}");
        assert_eq!(parts[1], bytes.len().to_string(), "{l}");
    }
    assert!(
        manifest.contains(&format!("repos/{id}/objects/packs/")),
        "{manifest}"
    );
    assert!(!manifest.contains("locator.redb") && !manifest.contains(".recovery"));
    // A change acknowledged after the backup is not in it.
    let addr = std::fs::read_to_string(dir.path().join("run/listen")).unwrap();
    assert_eq!(submit_one(addr.trim(), 50, "after.bin"), last + 1);
    stop(child, &dir.path().join("run"));

    let restored = dir.path().join("restored");
    let out = run(&["restore", "--data", s(&restored), "--from", s(&backup)]);
    let new_inc = ok(&out);
    assert_ne!(new_inc.trim(), source_inc);
    assert!(!dir.path().join(".restored.restoring").exists());
    ok(&run(&["doctor", "--data", s(&restored)]));
    ok(&run(&["archive", "verify", "--data", s(&restored)]));
    assert_eq!(head(&restored), last);
    // Its archives are its own: another identity than the source's.
    let rdb = restored.join("repos").join(id).join("metadata.redb");
    let a = scribe_metadata::archive::read_head(&repo_dir.join("metadata.recovery")).unwrap();
    let b =
        scribe_metadata::archive::read_head(&scribe_metadata::archive::default_dir(&rdb)).unwrap();
    assert_ne!(a.identity, b.identity);
    // Served: writes continue after the restored head.
    let (child, addr) = serve(&restored, &dir.path().join("run2"));
    assert_eq!(submit_one(&addr, 60, "again.bin"), last + 1);
    stop(child, &dir.path().join("run2"));
    ok(&run(&["doctor", "--data", s(&restored)]));
    // A non-empty target is refused.
    failed(&run(&[
        "restore",
        "--data",
        s(&restored),
        "--from",
        s(&backup),
    ]));
}

#[test]
fn a_killed_backup_is_refused_by_restore_and_damaged_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let (data, child, _repo_dir, _) = served_with_changes(dir.path());
    let partial = dir.path().join("partial");
    kill_at(
        "file:4",
        &["backup", "--data", s(&data), "--to", s(&partial)],
    );
    assert!(partial.join("catalog.redb").exists());
    assert!(!partial.join("BACKUP_MANIFEST").exists());
    let restored = dir.path().join("restored");
    let err = failed(&run(&[
        "restore",
        "--data",
        s(&restored),
        "--from",
        s(&partial),
    ]));
    assert!(err.contains("backup_incomplete"), "{err}");
    assert!(err.contains("BACKUP_MANIFEST"), "{err}");
    assert!(!restored.exists());

    let backup = dir.path().join("backup");
    ok(&run(&["backup", "--data", s(&data), "--to", s(&backup)]));
    stop(child, &dir.path().join("run"));
    let manifest = std::fs::read_to_string(backup.join("BACKUP_MANIFEST")).unwrap();
    let pack = manifest
        .lines()
        .filter_map(|l| l.strip_prefix("file = "))
        .map(|l| l.splitn(3, ' ').nth(2).unwrap().to_string())
        .find(|p| p.ends_with(".pack"))
        .unwrap();
    let file = backup.join(&pack);
    let original = std::fs::read(&file).unwrap();
    // One flipped bit.
    let mut bytes = original.clone();
    let at = bytes.len() - 10;
    bytes[at] ^= 0x04;
    std::fs::write(&file, &bytes).unwrap();
    let err = failed(&run(&[
        "restore",
        "--data",
        s(&restored),
        "--from",
        s(&backup),
    ]));
    assert!(err.contains(&pack) && err.contains("BLAKE3"), "{err}");
    assert!(err.contains("corrupt"), "{err}");
    assert!(!restored.exists());
    assert!(!dir.path().join(".restored.restoring").exists());
    // Truncated: the offset where it ends.
    std::fs::write(&file, &original[..original.len() - 7]).unwrap();
    let err = failed(&run(&[
        "restore",
        "--data",
        s(&restored),
        "--from",
        s(&backup),
    ]));
    assert!(
        err.contains(&pack) && err.contains(&format!("ends at byte {}", original.len() - 7)),
        "{err}"
    );
    assert!(!restored.exists());
    // Put back: the restore succeeds and is clean.
    std::fs::write(&file, &original).unwrap();
    ok(&run(&[
        "restore",
        "--data",
        s(&restored),
        "--from",
        s(&backup),
    ]));
    ok(&run(&["doctor", "--data", s(&restored)]));
}

#[test]
fn an_export_taken_while_serving_imports_and_a_killed_import_publishes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (data, child, repo_dir, last) = served_with_changes(dir.path());
    let file = dir.path().join("game.scmx");
    let out = run(&["export", REPO, "--data", s(&data), "--to", s(&file)]);
    ok(&out);
    let bytes = std::fs::read(&file).unwrap();
    assert_eq!(&bytes[..4], b"SCMX");
    let id = repo_dir.file_name().unwrap().to_str().unwrap();
    assert_eq!(hex::encode(&bytes[6..22]), id);
    stop(child, &dir.path().join("run"));

    let target = dir.path().join("target");
    ok(&run(&["init", "--data", s(&target)]));
    let objects = repo_dir.join("objects");
    let args = |extra: &[&str]| {
        let mut a = vec!["import", "--data", s(&target), s(&file), "--as", "copy"];
        a.extend_from_slice(extra);
        a.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    // Metadata only, without the objects it names: refused, nothing published.
    let err = failed(&run(&argv(&args(&[]))));
    assert!(
        err.contains("missing_objects") && err.contains("--objects"),
        "{err}"
    );
    assert!(!target.join("repos").join(id).exists());
    // Killed after the digest verified, before publication.
    let with_objects = args(&["--objects", s(&objects)]);
    kill_at("verified", &argv(&with_objects));
    {
        let mut c = InProcessConnection::new(Service::open(&target).unwrap());
        assert!(c.repo_list().is_empty());
    }
    assert!(!target.join("repos").join(id).exists());
    // A truncated export: refused with the byte offset; nothing published.
    let cut = dir.path().join("cut.scmx");
    std::fs::write(&cut, &bytes[..bytes.len() - 50]).unwrap();
    let err = failed(&run(&[
        "import",
        "--data",
        s(&target),
        s(&cut),
        "--objects",
        s(&objects),
    ]));
    assert!(
        err.contains(&format!("at byte {}", bytes.len() - 50)) && err.contains("cut.scmx"),
        "{err}"
    );
    // The next import succeeds.
    let out = run(&argv(&with_objects));
    assert_eq!(ok(&out).trim(), id);
    ok(&run(&["doctor", "--data", s(&target)]));
    ok(&run(&["archive", "verify", "--data", s(&target)]));
    assert_eq!(head(&target), last);
    // A second import of the same repository is refused.
    let err = failed(&run(&argv(&with_objects)));
    assert!(err.contains("already_exists"), "{err}");
    // Served: writes continue.
    let (child, addr) = serve(&target, &dir.path().join("run3"));
    let mut c = wire::tcp(addr.parse().unwrap());
    let list = c.repo_list();
    assert_eq!(list[0].name, "copy");
    drop(c);
    stop(child, &dir.path().join("run3"));
}

/// #16 item 4: a restore never points at the source's archive volume (a
/// `.recovery-location` is not carried over: on a new machine that path is
/// another volume or nothing); `--archive DIR` places the fresh archives on
/// a separate volume, selected by `.recovery-location`, and the served
/// root archives there.
#[test]
fn restore_places_fresh_archives_beside_the_databases_or_in_archive_dir() {
    let dir = tempfile::tempdir().unwrap();
    let (data, child, repo_dir, last) = served_with_changes(dir.path());
    stop(child, &dir.path().join("run"));
    let id = repo_dir.file_name().unwrap().to_str().unwrap().to_string();
    let vol1 = dir.path().join("vol1");
    ok(&run(&[
        "archive",
        "relocate",
        "--data",
        s(&data),
        "--to",
        s(&vol1),
    ]));
    assert!(repo_dir.join("metadata.recovery-location").exists());
    let backup = dir.path().join("backup");
    ok(&run(&["backup", "--data", s(&data), "--to", s(&backup)]));
    let vol1_head =
        std::fs::read(vol1.join("repos").join(&id).join("metadata.recovery/HEAD")).unwrap();

    // Without --archive: beside each database, nothing names vol1.
    let r1 = dir.path().join("r1");
    ok(&run(&["restore", "--data", s(&r1), "--from", s(&backup)]));
    let r1_repo = r1.join("repos").join(&id);
    assert!(!r1_repo.join("metadata.recovery-location").exists());
    assert!(!r1.join("catalog.recovery-location").exists());
    assert!(r1_repo.join("metadata.recovery/HEAD").is_file());
    ok(&run(&["archive", "verify", "--data", s(&r1)]));

    // An archive directory inside the restored root is refused.
    let r3 = dir.path().join("r3");
    let err = failed(&run(&[
        "restore",
        "--data",
        s(&r3),
        "--from",
        s(&backup),
        "--archive",
        s(&r3.join("arch")),
    ]));
    assert!(err.contains("inside the restored data root"), "{err}");
    assert!(!r3.exists());

    // With --archive: on the other volume, selected by .recovery-location.
    let r2 = dir.path().join("r2");
    let vol2 = dir.path().join("vol2");
    ok(&run(&[
        "restore",
        "--data",
        s(&r2),
        "--from",
        s(&backup),
        "--archive",
        s(&vol2),
    ]));
    let r2_repo = r2.join("repos").join(&id);
    let repo_archive = vol2.join("repos").join(&id).join("metadata.recovery");
    assert_eq!(
        std::fs::read_to_string(r2_repo.join("metadata.recovery-location")).unwrap(),
        s(&repo_archive)
    );
    assert_eq!(
        std::fs::read_to_string(r2.join("catalog.recovery-location")).unwrap(),
        s(&vol2.join("catalog.recovery"))
    );
    assert!(!r2_repo.join("metadata.recovery").exists());
    assert!(!r2.join("catalog.recovery").exists());
    ok(&run(&["doctor", "--data", s(&r2)]));
    let before = scribe_metadata::archive::read_head(&repo_archive).unwrap();
    let (child, addr) = serve(&r2, &dir.path().join("run2"));
    assert_eq!(submit_one(&addr, 60, "again.bin"), last + 1);
    stop(child, &dir.path().join("run2"));
    let after = scribe_metadata::archive::read_head(&repo_archive).unwrap();
    assert!(after.end > before.end);
    ok(&run(&["archive", "verify", "--data", s(&r2)]));
    ok(&run(&["doctor", "--data", s(&r2)]));
    // The source's relocated archive was never written.
    assert_eq!(
        std::fs::read(vol1.join("repos").join(&id).join("metadata.recovery/HEAD")).unwrap(),
        vol1_head
    );
}

/// A backup keeps what the server notes outside the catalog: a
/// repository's retirement (a restore that forgot it would let writes into
/// an archived project) and a renamed repository's old name. Both were
/// left behind.
#[test]
fn a_backup_keeps_retirements_and_former_names() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    ok(&run(&["init", "--data", s(&data)]));
    ok(&run(&["repo", "create", "--data", s(&data), REPO]));
    ok(&run(&[
        "repo",
        "rename",
        "--data",
        s(&data),
        REPO,
        "archive",
    ]));
    ok(&run(&[
        "repo",
        "retire",
        "--data",
        s(&data),
        "archive",
        "--contact",
        "ops",
    ]));
    let backup = dir.path().join("backup");
    ok(&run(&["backup", "--data", s(&data), "--to", s(&backup)]));
    let restored = dir.path().join("restored");
    ok(&run(&[
        "restore",
        "--data",
        s(&restored),
        "--from",
        s(&backup),
    ]));
    let out = run(&["repo", "create", "--data", s(&restored), REPO]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("until a rename"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let root = scribe_metadata::DataRoot::open(&restored).unwrap();
    let id = root.repository_id("archive").unwrap();
    assert_eq!(root.retired(id).map(|r| r.contact.as_str()), Some("ops"));
}

//! `collect` of large local files: streamed through scribe-client's
//! submit pipeline under the publication's own operation, identical files
//! left alone, and a collect that loses to an earlier attempt of the same
//! request answers that attempt's change.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nokv_workbench::path::Section;
use nokv_workbench::scribe::ScribeStore;
use nokv_workbench::store::{
    BodyRef, DirPage, Publish, Published, Row, Store, UploadedFile, VersionInfo,
};
use nokv_workbench::workbench::sandbox::{LocalFile, LocalSource};
use nokv_workbench::{WbError, Workbench};
use scribe_client::ClientOptions;
use scribe_testkit::env::{Env, Transport, REPO};
use scribe_testkit::noise;
use serde_json::{json, Value};

use super::support::ok;

/// Forwards everything; its first publication first lets `rival` run
/// (another attempt of the same request, which publishes before it).
struct RacedBy {
    inner: ScribeStore,
    rival: Option<Box<dyn FnOnce()>>,
}

impl Store for RacedBy {
    fn root_name(&self) -> String {
        self.inner.root_name()
    }
    fn head(&mut self) -> Result<u64, WbError> {
        self.inner.head()
    }
    fn stat(&mut self, at: u64, path: &str) -> Result<Option<Row>, WbError> {
        self.inner.stat(at, path)
    }
    fn list_dir(
        &mut self,
        at: u64,
        dir: &str,
        token: &str,
        limit: u32,
    ) -> Result<DirPage, WbError> {
        self.inner.list_dir(at, dir, token, limit)
    }
    fn list_files(
        &mut self,
        at: u64,
        dir: &str,
        token: &str,
        limit: u32,
    ) -> Result<DirPage, WbError> {
        self.inner.list_files(at, dir, token, limit)
    }
    fn read(&mut self, body: &BodyRef, offset: u64, len: u64) -> Result<Vec<u8>, WbError> {
        self.inner.read(body, offset, len)
    }
    fn publish(&mut self, p: Publish) -> Result<Published, WbError> {
        if let Some(rival) = self.rival.take() {
            rival();
        }
        self.inner.publish(p)
    }
    fn version_info(&mut self, version: u64) -> Result<VersionInfo, WbError> {
        self.inner.version_info(version)
    }
    fn changed_under(&mut self, dir: &str, from: u64, to: u64) -> Result<bool, WbError> {
        self.inner.changed_under(dir, from, to)
    }
    fn upload_files(
        &mut self,
        operation: [u8; 16],
        files: &[PathBuf],
    ) -> Result<Vec<UploadedFile>, WbError> {
        self.inner.upload_files(operation, files)
    }
}

/// The files of `dir/outputs` as collect's input (sizes as walked).
fn local_files(dir: &Path) -> Vec<LocalFile> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir.join("outputs")).unwrap() {
        let e = e.unwrap();
        out.push(LocalFile {
            section: Section::Outputs,
            path: e.file_name().to_str().unwrap().to_string(),
            source: LocalSource::File {
                path: e.path(),
                size: e.metadata().unwrap().len(),
            },
            content_type: None,
        });
    }
    out
}

fn store(env: &Env) -> ScribeStore {
    ScribeStore::open(env.url(), REPO, "bot", &ClientOptions::default()).unwrap()
}

/// Two attempts of one collect (same files, same bases: one request)
/// race; the one whose submit is refused because the other published
/// first answers the other's change (`idempotent_replay`), not an error,
/// and the head moved once.
#[test]
fn a_collect_refused_because_its_earlier_attempt_published_answers_that_change() {
    let env = Env::new(Transport::Process);
    let mut setup = Workbench::new(store(&env), "bot");
    ok(&mut setup, "workbench_create", json!({"id": "c"}));
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("outputs")).unwrap();
    // One streamed file (above one chunk) and one small one.
    std::fs::write(dir.path().join("outputs/big.bin"), noise(3 << 20, 17)).unwrap();
    std::fs::write(dir.path().join("outputs/small.txt"), "small").unwrap();
    let before = setup.store_mut().head().unwrap();
    let rival_result = std::rc::Rc::new(std::cell::RefCell::new(Value::Null));
    let (slot, rival_dir, url) = (
        rival_result.clone(),
        dir.path().to_path_buf(),
        env.url().to_string(),
    );
    let rival = Box::new(move || {
        let s = ScribeStore::open(&url, REPO, "bot", &ClientOptions::default()).unwrap();
        let mut wb = Workbench::new(s, "bot");
        *slot.borrow_mut() = wb.collect("c", local_files(&rival_dir)).unwrap();
    });
    let mut raced = Workbench::new(
        RacedBy {
            inner: store(&env),
            rival: Some(rival),
        },
        "bot",
    );
    let r = raced.collect("c", local_files(dir.path())).unwrap();
    let first = rival_result.borrow().clone();
    assert_eq!(first["idempotent_replay"], json!(false), "{first}");
    assert_eq!(first["created"], json!(2), "{first}");
    assert_eq!(r["idempotent_replay"], json!(true), "{r}");
    assert_eq!(r["change"], first["change"], "{r} {first}");
    assert_eq!(
        (r["created"].clone(), r["replaced"].clone()),
        (json!(2), json!(0))
    );
    assert_eq!(setup.store_mut().head().unwrap(), before + 1);
    // A further collect finds everything in place.
    let again = setup.collect("c", local_files(dir.path())).unwrap();
    assert_eq!(
        (again["change"].clone(), again["unchanged"].clone()),
        (Value::Null, json!(2))
    );
}

fn nokv(env: &Env, args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_nokv"))
        .args(["--server", env.url(), "--repo", REPO, "--agent-root", "bot"])
        .args(args)
        .env_remove("NOKV_TEST_CRASH_AT")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "nokv {args:?}: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(text.trim()).unwrap()
}

/// `nokv collect` over TCP of files larger than one chunk: streamed (two
/// upload lanes, pinned under the publication's operation), published in
/// one change that materializes byte for byte; a file of the live size
/// with other bytes is replaced, an identical one left alone; after the
/// server stops, every upload intent of the repository is finished (no
/// pin left behind by a stream under another operation) and doctor is
/// clean.
#[test]
fn collect_streams_large_files_under_its_publications_operation() {
    let mut env = Env::new(Transport::Process);
    nokv(&env, &["workbench", "workbench_create", r#"{"id":"s"}"#]);
    let dir = tempfile::tempdir().unwrap();
    let sb = dir.path().join("sb");
    std::fs::create_dir_all(sb.join("outputs/deep")).unwrap();
    std::fs::create_dir_all(sb.join("logs")).unwrap();
    let files = [
        ("outputs/a.bin", noise(9 << 20, 1)),
        ("outputs/deep/b.bin", noise((3 << 20) + 5, 2)),
        ("outputs/c.bin", noise(2 << 20, 3)),
        ("logs/run.log", b"line\n".to_vec()),
    ];
    for (p, bytes) in &files {
        std::fs::write(sb.join(p), bytes).unwrap();
    }
    let d = sb.to_str().unwrap();
    let v = nokv(&env, &["collect", d, "s"]);
    assert_eq!(
        (
            v["created"].clone(),
            v["replaced"].clone(),
            v["unchanged"].clone()
        ),
        (json!(4), json!(0), json!(0)),
        "{v}"
    );
    let first = v["change"].as_u64().unwrap();
    // c.bin rewritten with other bytes of the same size; the rest as is.
    let c2 = noise(2 << 20, 4);
    std::fs::write(sb.join("outputs/c.bin"), &c2).unwrap();
    let v = nokv(&env, &["collect", d, "s"]);
    assert_eq!(
        (
            v["created"].clone(),
            v["replaced"].clone(),
            v["unchanged"].clone()
        ),
        (json!(0), json!(1), json!(3)),
        "{v}"
    );
    assert_eq!(v["change"], json!(first + 1));
    let st = nokv(
        &env,
        &[
            "workbench",
            "workbench_stat",
            r#"{"id":"s","section":"outputs","path":"a.bin"}"#,
        ],
    );
    assert_eq!(st["generation"], json!(first), "{st}");
    // Byte for byte.
    let out = dir.path().join("out");
    nokv(&env, &["materialize", "s", out.to_str().unwrap()]);
    for (p, bytes) in &files {
        let want = if *p == "outputs/c.bin" { &c2 } else { bytes };
        assert!(std::fs::read(out.join(p)).unwrap() == *want, "{p}");
    }
    // Nothing new: nothing published.
    let v = nokv(&env, &["collect", d, "s"]);
    assert_eq!(
        (v["change"].clone(), v["unchanged"].clone()),
        (Value::Null, json!(4))
    );
    env.process().kill();
    let pins = scribe_server::admin::pins_list(env.data(), None).unwrap();
    for line in &pins.notes {
        assert_eq!(
            line.matches(" (").count(),
            line.matches(", finished)").count(),
            "an upload intent without an outcome: {line}"
        );
    }
    let report = scribe_server::admin::doctor(env.data(), None).unwrap();
    assert!(report.is_clean(), "doctor: {:?}", report.problems);
}

/// Collect of thousands of files whose listed content types are the ones
/// their extensions give (what materialize writes for every file) fits the
/// change message's 64 KiB: only types the extension does not give are
/// recorded, and each file reads back with its type.
#[test]
fn a_collect_of_thousands_of_files_with_listed_types_fits_one_message() {
    let env = Env::new(Transport::InProcess);
    let mut wb = super::support::workbench(&env);
    ok(&mut wb, "workbench_create", json!({"id": "t"}));
    let mut files: Vec<LocalFile> = (0..2000)
        .map(|i| LocalFile {
            section: Section::Outputs,
            path: format!("d{}/f{i}.txt", i % 10),
            source: LocalSource::Bytes(format!("{i}").into_bytes()),
            content_type: Some("text/plain".into()),
        })
        .collect();
    // Images an agent typed itself: their extensions give the same types
    // (in any case), so they cost no line either; 1,700 lines would not
    // fit in the message's 64 KiB.
    files.extend((0..1700).map(|i| {
        LocalFile {
            section: Section::Outputs,
            path: if i % 8 == 0 {
                format!("renders/shot{i:05}.JPG")
            } else {
                format!("renders/frame{i:05}.png")
            },
            source: LocalSource::Bytes(format!("image {i}").into_bytes()),
            content_type: Some(
                if i % 8 == 0 {
                    "image/jpeg"
                } else {
                    "image/png"
                }
                .into(),
            ),
        }
    }));
    files.push(LocalFile {
        section: Section::Outputs,
        path: "odd.txt".into(),
        source: LocalSource::Bytes(b"odd".to_vec()),
        content_type: Some("application/x-odd".into()),
    });
    let r = wb.collect("t", files).unwrap();
    assert_eq!(r["created"], json!(3701), "{r}");
    for (path, ct) in [
        ("d3/f1233.txt", "text/plain"),
        ("renders/frame00001.png", "image/png"),
        ("renders/shot00008.JPG", "image/jpeg"),
        ("odd.txt", "application/x-odd"),
    ] {
        let st = ok(
            &mut wb,
            "workbench_stat",
            json!({"id": "t", "section": "outputs", "path": path}),
        );
        assert_eq!(st["content_type"], json!(ct), "{path}");
    }
    // The extension is the file name's, in any case.
    use nokv_workbench::workbench::content_type_of;
    assert_eq!(content_type_of("a/B.JPEG"), "image/jpeg");
    assert_eq!(content_type_of("v1.2/README"), "application/octet-stream");
    assert_eq!(content_type_of(".png"), "image/png");
    assert_eq!(content_type_of("notes"), "application/octet-stream");
}

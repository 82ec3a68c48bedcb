//! A restore interrupted between its upload and its publication is
//! invisible, and its retry converges: with a store that stops right after
//! staging, and with the `nokv` process SIGKILLed at an arbitrary point.
//! Every other mutating tool killed at a named point before and after its
//! submit retries to exactly one publication.

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus, Stdio};

use nokv_workbench::path::Section;
use nokv_workbench::scribe::ScribeStore;
use nokv_workbench::store::{BodyRef, DirPage, Publish, Published, Store, VersionInfo};
use nokv_workbench::workbench::sandbox::{LocalFile, LocalSource};
use nokv_workbench::{WbError, Workbench};
use scribe_testkit::env::{Env, Transport, REPO};
use serde_json::{json, Value};

use super::support::{client, err, ok, workbench};

/// Forwards everything to `store`, with two hooks for the tests below:
/// `stop_after_staging` makes a publication only upload, then "crash";
/// `original` (a workbench and a request) runs once, at the first listing
/// of directory `dest`, before that listing is answered (an earlier
/// attempt of a request landing in the middle of its retry).
struct Hooked {
    store: ScribeStore,
    stop_after_staging: bool,
    /// The next publication lands, and its answer is lost.
    lose_answer: bool,
    original: Option<(Workbench<ScribeStore>, Value)>,
    /// Runs once, at the next publication, before it is forwarded (an
    /// identical call by another writer winning the race).
    concurrent: Option<(Workbench<ScribeStore>, &'static str, Value)>,
    dest: &'static str,
    landed: Option<Value>,
}

impl Hooked {
    fn over(env: &Env) -> Hooked {
        Hooked {
            store: ScribeStore::over(client(env), REPO, "bot").unwrap(),
            stop_after_staging: false,
            lose_answer: false,
            original: None,
            concurrent: None,
            dest: "",
            landed: None,
        }
    }
}

impl Store for Hooked {
    fn root_name(&self) -> String {
        self.store.root_name()
    }
    fn head(&mut self) -> Result<u64, WbError> {
        self.store.head()
    }
    fn stat(&mut self, at: u64, path: &str) -> Result<Option<nokv_workbench::store::Row>, WbError> {
        self.store.stat(at, path)
    }
    fn list_dir(
        &mut self,
        at: u64,
        dir: &str,
        token: &str,
        limit: u32,
    ) -> Result<DirPage, WbError> {
        if dir == self.dest {
            if let Some((mut wb, req)) = self.original.take() {
                self.landed = Some(wb.call("workbench_restore", &req)?);
            }
        }
        self.store.list_dir(at, dir, token, limit)
    }
    fn list_files(
        &mut self,
        at: u64,
        dir: &str,
        token: &str,
        limit: u32,
    ) -> Result<DirPage, WbError> {
        self.store.list_files(at, dir, token, limit)
    }
    fn read(&mut self, body: &BodyRef, offset: u64, len: u64) -> Result<Vec<u8>, WbError> {
        self.store.read(body, offset, len)
    }
    fn publish(&mut self, p: Publish) -> Result<Published, WbError> {
        if let Some((mut wb, tool, input)) = self.concurrent.take() {
            self.landed = Some(wb.call(tool, &input)?);
        }
        if std::mem::take(&mut self.lose_answer) {
            self.store.publish(p)?;
            return Err(WbError::new("unavailable", "the answer was lost"));
        }
        if !self.stop_after_staging {
            return self.store.publish(p);
        }
        self.store.stage(&p)?;
        Err(WbError::new("unavailable", "crashed after staging"))
    }
    fn version_info(&mut self, version: u64) -> Result<VersionInfo, WbError> {
        self.store.version_info(version)
    }
    fn changed_under(&mut self, dir: &str, from: u64, to: u64) -> Result<bool, WbError> {
        self.store.changed_under(dir, from, to)
    }
}

/// The retry of a restore whose earlier attempt is published after the
/// retry found no destination record but before it checked that the
/// destination directory is empty replays that attempt's result (it was
/// refused `workbench_dir_not_empty`, the one failure seen of the SIGKILL
/// test below).
#[test]
fn a_restore_retry_overtaken_by_its_own_earlier_attempt_replays_it() {
    let env = Env::new(Transport::InProcess);
    let mut wb = workbench(&env);
    seed(&mut wb, "src", 20);
    let req = json!({"id": "src", "destination_id": "dst"});
    let store = Hooked {
        original: Some((workbench(&env), req.clone())),
        dest: "dst",
        ..Hooked::over(&env)
    };
    let mut retry = Workbench::new(store, "bot");
    let r = retry.call("workbench_restore", &req).unwrap();
    let landed = retry.store_mut().landed.take().expect("the original ran");
    assert_eq!(landed["idempotent_replay"], json!(false));
    assert_eq!(
        (
            r["change"].clone(),
            r["member_count"].clone(),
            r["idempotent_replay"].clone()
        ),
        (landed["change"].clone(), json!(20), json!(true))
    );
    // Another request for the same destination is still refused.
    seed(&mut wb, "src2", 3);
    let other = json!({"id": "src2", "destination_id": "dst"});
    let e = err(&mut wb, "workbench_restore", other);
    assert_eq!(e.code, "destination_exists");
}

fn seed(wb: &mut Workbench<ScribeStore>, id: &str, n: usize) {
    ok(wb, "workbench_create", json!({"id": id}));
    let files = (0..n)
        .map(|i| LocalFile {
            section: Section::Outputs,
            path: format!("d{}/f{i}.txt", i % 7),
            source: LocalSource::Bytes(format!("file {i}").into_bytes()),
            content_type: None,
        })
        .collect();
    wb.collect(id, files).unwrap();
}

#[test]
fn a_restore_stopped_after_staging_is_invisible_and_its_retry_converges() {
    let env = Env::new(Transport::InProcess);
    let mut wb = workbench(&env);
    seed(&mut wb, "src", 50);
    let req = json!({"id": "src", "destination_id": "dst"});
    let store = Hooked {
        stop_after_staging: true,
        ..Hooked::over(&env)
    };
    let mut crashing = Workbench::new(store, "bot");
    let e = crashing.call("workbench_restore", &req).unwrap_err();
    assert_eq!((e.code, e.retryable), ("unavailable", true));
    // Nothing of the destination is visible: no workbench, no path under dst/.
    assert_eq!(
        err(&mut wb, "workbench_stat", json!({"id": "dst"})).code,
        "workbench_not_found"
    );
    let page = wb.store_mut().list_dir(0, "dst", "", 10).unwrap();
    assert!(page.files.is_empty() && page.dirs.is_empty());
    let s = ok(
        &mut wb,
        "workbench_search",
        json!({"predicates": [{"field": "workbench_id", "op": "eq", "value": "dst"}]}),
    );
    assert_eq!(s["total"], 0);
    // The retry publishes once; a second retry replays.
    let r = ok(&mut wb, "workbench_restore", req.clone());
    assert_eq!(
        (r["member_count"].clone(), r["idempotent_replay"].clone()),
        (json!(50), json!(false))
    );
    let again = ok(&mut wb, "workbench_restore", req);
    assert_eq!(
        (again["change"].clone(), again["idempotent_replay"].clone()),
        (r["change"].clone(), json!(true))
    );
}

#[test]
fn a_restore_killed_at_any_point_is_all_or_nothing_and_the_retry_converges() {
    let env = Env::new(Transport::Process);
    let mut wb = workbench(&env);
    seed(&mut wb, "big", 2000);
    let req = json!({"id": "big", "destination_id": "copy"}).to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_nokv"))
        .args([
            "--server",
            env.url(),
            "--repo",
            REPO,
            "--agent-root",
            "bot",
            "workbench",
            "workbench_restore",
            &req,
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // Kill it wherever it is (before, during or after its submit).
    std::thread::sleep(std::time::Duration::from_millis(150));
    child.kill().unwrap();
    child.wait().unwrap();
    // All or nothing: either the destination is complete or absent.
    let visible = wb
        .store_mut()
        .list_files(0, "copy", "", 5000)
        .unwrap()
        .files
        .len();
    assert!(
        visible == 0 || visible == 2001,
        "{visible} paths of the destination are visible"
    );
    let r = ok(
        &mut wb,
        "workbench_restore",
        serde_json::from_str(&req).unwrap(),
    );
    assert_eq!(r["member_count"], 2000);
    assert_eq!(
        wb.store_mut()
            .list_files(0, "copy", "", 5000)
            .unwrap()
            .files
            .len(),
        2001
    );
}

/// An append whose publication landed but whose answer was lost (the
/// call failed `unavailable`) is retried by the same request: the retry
/// answers that publication (`idempotent_replay`) and appends nothing;
/// once that answer is delivered, the same append again is a new one.
#[test]
fn an_append_whose_answer_was_lost_is_retried_once() {
    let env = Env::new(Transport::InProcess);
    let mut wb = Workbench::new(Hooked::over(&env), "bot");
    wb.call("workbench_create", &json!({"id": "w"})).unwrap();
    let input = json!({"id": "w", "section": "logs", "path": "run.log", "text": "step\n"});
    let first = wb.call("workbench_append", &input).unwrap();
    let before = wb.store_mut().head().unwrap();
    wb.store_mut().lose_answer = true;
    let e = wb.call("workbench_append", &input).unwrap_err();
    assert_eq!(e.code, "unavailable");
    assert_eq!(wb.store_mut().head().unwrap(), before + 1, "it landed");
    let retry = wb.call("workbench_append", &input).unwrap();
    assert_eq!(retry["idempotent_replay"], json!(true), "{retry}");
    assert_eq!(retry["size"], 10);
    assert_eq!(wb.store_mut().head().unwrap(), before + 1);
    let repeat = wb.call("workbench_append", &input).unwrap();
    assert_eq!(repeat["idempotent_replay"], json!(false), "{repeat}");
    assert_eq!(repeat["size"], 15);
    assert_eq!(first["size"], 5);
    let r = wb
        .call(
            "workbench_read",
            &json!({"id": "w", "section": "logs", "path": "run.log"}),
        )
        .unwrap();
    assert_eq!(r["lines"], json!(["step", "step", "step"]));
    // An identical append that fails before its submit (nothing landed),
    // retried while an earlier, answered identical append is the path's
    // last publication: the retry appends; it does not take that earlier
    // publication for its own.
    wb.store_mut().stop_after_staging = true;
    let e = wb.call("workbench_append", &input).unwrap_err();
    assert_eq!(e.code, "unavailable");
    wb.store_mut().stop_after_staging = false;
    let retry = wb.call("workbench_append", &input).unwrap();
    assert_eq!(retry["idempotent_replay"], json!(false), "{retry}");
    assert_eq!(retry["size"], 20);
}

/// An edit whose publication landed but whose answer was lost is
/// retried by the same request: the retry answers that publication and
/// edits nothing more, although its old_string still matches; once that
/// answer is delivered, the same edit again is a new edit. A retry of an
/// edit that failed before its submit edits once, although an answered
/// identical edit is the path's current generation.
#[test]
fn an_edit_whose_answer_was_lost_is_retried_once() {
    let env = Env::new(Transport::InProcess);
    let mut wb = Workbench::new(Hooked::over(&env), "bot");
    wb.call("workbench_create", &json!({"id": "w"})).unwrap();
    wb.call(
        "workbench_put_file",
        &json!({"id": "w", "section": "outputs", "path": "e.txt", "text": "x-x"}),
    )
    .unwrap();
    let input = json!({"id": "w", "section": "outputs", "path": "e.txt",
                       "old_string": "x", "new_string": "xx", "replace_all": true});
    let text = |wb: &mut Workbench<Hooked>| {
        wb.call(
            "workbench_read",
            &json!({"id": "w", "section": "outputs", "path": "e.txt"}),
        )
        .unwrap()["lines"][0]
            .as_str()
            .unwrap()
            .to_string()
    };
    let before = wb.store_mut().head().unwrap();
    wb.store_mut().lose_answer = true;
    let e = wb.call("workbench_edit", &input).unwrap_err();
    assert_eq!(e.code, "unavailable");
    assert_eq!(wb.store_mut().head().unwrap(), before + 1, "it landed");
    let retry = wb.call("workbench_edit", &input).unwrap();
    assert_eq!(retry["idempotent_replay"], json!(true), "{retry}");
    assert_eq!(retry["replacements"], 2, "{retry}");
    assert_eq!(wb.store_mut().head().unwrap(), before + 1);
    assert_eq!(text(&mut wb), "xx-xx");
    let repeat = wb.call("workbench_edit", &input).unwrap();
    assert_eq!(repeat["idempotent_replay"], json!(false), "{repeat}");
    assert_eq!(wb.store_mut().head().unwrap(), before + 2);
    assert_eq!(text(&mut wb), "xxxx-xxxx");
    // Failed before its submit (nothing landed), retried while the
    // answered repeat above is current: the retry edits, once.
    wb.store_mut().stop_after_staging = true;
    let e = wb.call("workbench_edit", &input).unwrap_err();
    assert_eq!(e.code, "unavailable");
    wb.store_mut().stop_after_staging = false;
    let retry = wb.call("workbench_edit", &input).unwrap();
    assert_eq!(retry["idempotent_replay"], json!(false), "{retry}");
    assert_eq!(wb.store_mut().head().unwrap(), before + 3);
    assert_eq!(text(&mut wb), "xxxxxxxx-xxxxxxxx");
}

/// Two identical edits at once by two writers: the one that loses the
/// generation race does not take the winner's publication for its own
/// (it carries the same request, not an earlier attempt of this call);
/// it answers the conflict, and its retry edits the winner's result.
#[test]
fn concurrent_identical_edits_both_apply() {
    let env = Env::new(Transport::InProcess);
    let mut wb = Workbench::new(Hooked::over(&env), "bot");
    wb.call("workbench_create", &json!({"id": "w"})).unwrap();
    wb.call(
        "workbench_put_file",
        &json!({"id": "w", "section": "outputs", "path": "e.txt", "text": "x-x"}),
    )
    .unwrap();
    let input = json!({"id": "w", "section": "outputs", "path": "e.txt",
                       "old_string": "x", "new_string": "xx", "replace_all": true});
    wb.store_mut().concurrent = Some((workbench(&env), "workbench_edit", input.clone()));
    let before = wb.store_mut().head().unwrap();
    let e = wb.call("workbench_edit", &input).unwrap_err();
    assert_eq!(e.code, "generation_conflict", "{e:?}");
    let other = wb.store_mut().landed.take().unwrap();
    assert_eq!(other["idempotent_replay"], json!(false), "{other}");
    assert_eq!(wb.store_mut().head().unwrap(), before + 1);
    let retry = wb.call("workbench_edit", &input).unwrap();
    assert_eq!(retry["idempotent_replay"], json!(false), "{retry}");
    assert_eq!(wb.store_mut().head().unwrap(), before + 2);
    let r = wb
        .call(
            "workbench_read",
            &json!({"id": "w", "section": "outputs", "path": "e.txt"}),
        )
        .unwrap();
    assert_eq!(r["lines"], json!(["xxxx-xxxx"]));
}

/// The journal of pending appends as files: an attempt held by a live
/// facade is not a retry for another (two identical appends at once both
/// land); once let go without delivery it is, and is taken over; a
/// delivered one leaves nothing behind.
#[test]
fn pending_appends_as_files_tell_a_retry_from_a_concurrent_repeat() {
    use nokv_workbench::journal::Pending;
    let dir = tempfile::tempdir().unwrap();
    let files = || std::fs::read_dir(dir.path()).unwrap().count();
    let (r, other) = ([1u8; 32], [2u8; 32]);
    let mut a = Pending::dir(dir.path());
    let mut b = Pending::dir(dir.path());
    let first = a.begin(&r).unwrap();
    assert!(first.earlier.is_empty(), "nothing pending yet");
    let concurrent = b.begin(&r).unwrap();
    assert!(concurrent.earlier.is_empty(), "a's attempt is live");
    assert_ne!(concurrent.id, first.id);
    assert!(
        b.begin(&other).unwrap().earlier.is_empty(),
        "another request"
    );
    assert_eq!(files(), 3);
    // a's call failed (outcome unknown): its attempt stays, unlocked.
    a.abandon_since(0);
    let mut c = Pending::dir(dir.path());
    let retry = c.begin(&r).unwrap();
    assert_eq!(
        retry.earlier,
        vec![first.id.clone()],
        "a's abandoned attempt"
    );
    // c took a's entry over: delivering c removes both of c's files.
    c.delivered();
    assert_eq!(files(), 2);
    b.delivered();
    assert_eq!(files(), 0);
    let mut d = Pending::dir(dir.path());
    assert!(d.begin(&r).unwrap().earlier.is_empty(), "all delivered");
    // In memory: the same, within one facade.
    let mut m = Pending::memory();
    let one = m.begin(&r).unwrap();
    m.abandon_since(0);
    let two = m.begin(&r).unwrap();
    assert_eq!(two.earlier, vec![one.id]);
    m.delivered();
    assert!(m.begin(&r).unwrap().earlier.is_empty());
}

/// Run one tool through a `nokv` process; with `crash_at`, a build with
/// failpoints SIGKILLs itself there. The exit status and stdout's JSON.
fn nokv(env: &Env, crash_at: Option<&str>, tool: &str, input: &Value) -> (ExitStatus, Value) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nokv"));
    cmd.args(["--server", env.url(), "--repo", REPO, "--agent-root", "bot"])
        .args(["workbench", tool, &input.to_string()])
        .env_remove("NOKV_TEST_CRASH_AT")
        .env("NOKV_STATE_DIR", env.path("nokv-state"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(at) = crash_at {
        cmd.env("NOKV_TEST_CRASH_AT", at);
    }
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let v = serde_json::from_str(text.trim()).unwrap_or(Value::Null);
    (out.status, v)
}

fn head(wb: &mut Workbench<ScribeStore>) -> u64 {
    wb.store_mut().head().unwrap()
}

/// A result without its replay flag.
fn outcome(mut v: Value) -> Value {
    v.as_object_mut().unwrap().remove("idempotent_replay");
    v
}

/// Every mutating tool but restore (tested above), killed by SIGKILL
/// after uploading and before submitting (`nokv-after-stage`: nothing is
/// published) or after the server accepted and before the answer
/// (`nokv-after-submit`: published once, unanswered): the retry of the
/// same request publishes at most the one missing change and answers the
/// result a further retry replays (an append or edit, whose answer was then
/// delivered, applies again when repeated); the offline doctor finds the
/// data root clean.
#[test]
fn mutating_tools_killed_before_and_after_their_submit_retry_to_one_publication() {
    // (The test build has failpoints: this crate's dev-dependency on
    // scribe-client enables them; without, the kills below never happen.)
    let mut env = Env::new(Transport::Process);
    let mut wb = workbench(&env);
    let digest = |c: char| format!("sha256:{}", c.to_string().repeat(64));
    for (round, at) in ["nokv-after-stage", "nokv-after-submit"].iter().enumerate() {
        let id = format!("w{round}");
        ok(&mut wb, "workbench_create", json!({"id": id}));
        for (path, text) in [("r.txt", "old"), ("log.txt", "one\n"), ("e.txt", "a foo b")] {
            ok(
                &mut wb,
                "workbench_put_file",
                json!({"id": id, "section": "outputs", "path": path, "text": text}),
            );
        }
        let cases = [
            (
                "workbench_put_file",
                json!({"id": id, "section": "outputs", "path": "new.txt", "text": "fresh"}),
            ),
            (
                "workbench_put_file",
                json!({"id": id, "section": "outputs", "path": "r.txt", "text": "new", "replace": true}),
            ),
            (
                "workbench_append",
                json!({"id": id, "section": "outputs", "path": "log.txt", "text": "two\n"}),
            ),
            (
                "workbench_edit",
                json!({"id": id, "section": "outputs", "path": "e.txt", "old_string": "o", "new_string": "oo", "replace_all": true}),
            ),
            (
                "workbench_commit",
                json!({"id": id, "manifest": {"run": round}, "content_digest_uri": digest('d')}),
            ),
            (
                "workbench_snapshot",
                json!({"id": id, "name": "s", "ttl_days": 3}),
            ),
        ];
        for (tool, input) in cases {
            let before = head(&mut wb);
            let (status, printed) = nokv(&env, Some(at), tool, &input);
            assert_eq!(
                status.signal(),
                Some(9),
                "{tool} at {at}: {status} {printed}"
            );
            assert_eq!(printed, Value::Null, "{tool} at {at} answered before dying");
            let published = u64::from(*at == "nokv-after-submit");
            assert_eq!(head(&mut wb), before + published, "{tool} at {at}");
            // The retry publishes what is missing, exactly once.
            let (status, first) = nokv(&env, None, tool, &input);
            assert!(status.success(), "{tool} at {at}: {first}");
            assert_eq!(head(&mut wb), before + 1, "{tool} at {at}: {first}");
            assert_eq!(
                first["idempotent_replay"],
                json!(published == 1),
                "{tool} at {at}: {first}"
            );
            if tool == "workbench_append" || tool == "workbench_edit" {
                // Its answer was delivered: the same append or edit again,
                // by another client or process, is a new one, not a retry
                // (docs/workbench.md, "A repeated append or edit").
                let again = ok(&mut wb, tool, input.clone());
                assert_eq!(again["idempotent_replay"], json!(false), "{again}");
                assert_eq!(head(&mut wb), before + 2, "{tool} at {at}");
                let (status, third) = nokv(&env, None, tool, &input);
                assert!(status.success(), "{third}");
                assert_eq!(third["idempotent_replay"], json!(false), "{third}");
                assert_eq!(head(&mut wb), before + 3, "{tool} at {at}");
                continue;
            }
            // A further retry (in-process, another client) replays it.
            let again = ok(&mut wb, tool, input.clone());
            assert_eq!(again["idempotent_replay"], json!(true), "{tool}: {again}");
            assert_eq!(outcome(again), outcome(first), "{tool} at {at}");
            assert_eq!(head(&mut wb), before + 1, "{tool} at {at}");
        }
        // What the retries left is what one clean run of each would have.
        let read = |wb: &mut Workbench<ScribeStore>, path: &str| {
            ok(
                wb,
                "workbench_read",
                json!({"id": id, "section": "outputs", "path": path}),
            )["lines"]
                .clone()
        };
        assert_eq!(read(&mut wb, "new.txt"), json!(["fresh"]));
        assert_eq!(read(&mut wb, "r.txt"), json!(["new"]));
        // The killed append once, then two deliberate repeats.
        assert_eq!(
            read(&mut wb, "log.txt"),
            json!(["one", "two", "two", "two"])
        );
        // The killed edit once (`foo` -> `foooo`), then two deliberate
        // repeats, each doubling the o's again.
        assert_eq!(
            read(&mut wb, "e.txt"),
            json!([format!("a f{} b", "o".repeat(16))])
        );
        let snaps = ok(&mut wb, "workbench_snapshot_list", json!({"id": id}));
        assert_eq!(snaps["snapshots"].as_array().unwrap().len(), 1);
    }
    drop(wb);
    env.process().kill();
    let report = scribe_server::admin::doctor(env.data(), None).unwrap();
    assert!(report.is_clean(), "doctor: {:?}", report.problems);
}

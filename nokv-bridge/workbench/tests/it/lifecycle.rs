//! Commit identity and exact replay, the snapshot lifecycle under an
//! injected clock, frozen reads, and restore.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use nokv_workbench::identity::{commit_identity, manifest_digest_uri};
use nokv_workbench::scribe::ScribeStore;
use nokv_workbench::store::Store;
use nokv_workbench::{ConflictClass, Workbench};
use scribe_testkit::env::{Env, Transport, REPO};
use serde_json::json;

use super::support::{client, err, ok};

const DAY: u64 = 24 * 60 * 60 * 1000;

fn clocked(env: &Env, clock: Arc<AtomicU64>) -> Workbench<ScribeStore> {
    let store = ScribeStore::over(client(env), REPO, "bot").unwrap();
    Workbench::new(store, "bot").with_clock(move || clock.load(Ordering::SeqCst))
}

fn digest(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

#[test]
fn commit_identity_exact_replay_and_conflicts() {
    let env = Env::new(Transport::InProcess);
    let clock = Arc::new(AtomicU64::new(1_000));
    let mut wb = clocked(&env, clock.clone());
    ok(&mut wb, "workbench_create", json!({"id": "w"}));
    let manifest = json!({"model": "m1", "metrics": {"loss": 0.25}});
    let commit = json!({"id": "w", "manifest": manifest, "content_digest_uri": digest('a')});
    let first = ok(&mut wb, "workbench_commit", commit.clone());
    let mdu = manifest_digest_uri(manifest.as_object().unwrap());
    assert_eq!(first["manifest_digest_uri"], mdu);
    assert_eq!(
        first["commit_identity"],
        commit_identity("w", &digest('a'), &mdu)
    );
    assert_eq!(first["idempotent_replay"], false);
    // Server time is no part of the identity: a later exact retry replays.
    clock.store(9_000, Ordering::SeqCst);
    let again = ok(&mut wb, "workbench_commit", commit.clone());
    assert_eq!(again["idempotent_replay"], true);
    assert_eq!(again["change"], first["change"]);
    assert_eq!(again["committed_ms"], 1_000);
    // Another identity conflicts unless replace=true.
    let other = json!({"id": "w", "manifest": {"model": "m2"}, "content_digest_uri": digest('b')});
    let e = err(&mut wb, "workbench_commit", other.clone());
    assert_eq!(
        (e.code, e.conflict),
        ("commit_conflict", ConflictClass::Identity)
    );
    let mut replace = other.clone();
    replace["replace"] = json!(true);
    let second = ok(&mut wb, "workbench_commit", replace);
    assert!(second["change"].as_u64() > first["change"].as_u64());
    // Retrying the older exact commit still returns its stored result.
    let old = ok(&mut wb, "workbench_commit", commit.clone());
    assert_eq!(
        (old["idempotent_replay"].clone(), old["change"].clone()),
        (json!(true), first["change"].clone())
    );
    // The run manifest is readable, and generic put cannot write it.
    let r = ok(
        &mut wb,
        "workbench_read",
        json!({"id": "w", "section": "metadata", "path": "run_manifest.json"}),
    );
    assert_eq!(r["json"]["schema"], "nokv.workbench.run_manifest.v1");
    assert_eq!(r["json"]["manifest"], json!({"model": "m2"}));
    // The older identity with replace=true is published again: it is live.
    let mut back = commit;
    back["replace"] = json!(true);
    let third = ok(&mut wb, "workbench_commit", back.clone());
    assert_eq!(third["idempotent_replay"], false, "{third}");
    assert!(third["change"].as_u64() > second["change"].as_u64());
    assert_eq!(third["commit_identity"], first["commit_identity"]);
    let r = ok(
        &mut wb,
        "workbench_read",
        json!({"id": "w", "section": "metadata", "path": "run_manifest.json"}),
    );
    assert_eq!(r["json"]["manifest"]["model"], "m1", "{r}");
    // Now it is the live identity, so its exact retry replays.
    let again = ok(&mut wb, "workbench_commit", back);
    assert_eq!(again["idempotent_replay"], true, "{again}");
}

#[test]
fn snapshot_lifecycle_with_an_injected_clock_and_frozen_reads() {
    let env = Env::new(Transport::InProcess);
    let clock = Arc::new(AtomicU64::new(10 * DAY));
    let mut wb = clocked(&env, clock.clone());
    ok(&mut wb, "workbench_create", json!({"id": "w"}));
    ok(
        &mut wb,
        "workbench_put_file",
        json!({"id": "w", "section": "outputs", "path": "o.txt", "text": "v1"}),
    );
    let e = err(&mut wb, "workbench_snapshot", json!({"id": "w"}));
    assert_eq!(e.code, "not_committed");
    ok(
        &mut wb,
        "workbench_commit",
        json!({"id": "w", "manifest": {}, "content_digest_uri": digest('c')}),
    );
    let s0 = ok(
        &mut wb,
        "workbench_snapshot",
        json!({"id": "w", "name": "best", "reason": "eval", "ttl_days": 2}),
    );
    assert_eq!(
        (s0["snapshot_id"].clone(), s0["state"].clone()),
        (json!(0), json!("alive"))
    );
    assert_eq!(s0["expires_ms"], 12 * DAY);
    // Later writes do not change what the snapshot shows.
    let gen_before = ok(
        &mut wb,
        "workbench_stat",
        json!({"id": "w", "section": "outputs", "path": "o.txt"}),
    )["generation"]
        .clone();
    ok(
        &mut wb,
        "workbench_put_file",
        json!({"id": "w", "section": "outputs", "path": "o.txt", "text": "v2", "replace": true}),
    );
    ok(
        &mut wb,
        "workbench_put_file",
        json!({"id": "w", "section": "outputs", "path": "new.txt", "text": "n"}),
    );
    let frozen = ok(
        &mut wb,
        "workbench_read",
        json!({"id": "w", "section": "outputs", "path": "o.txt", "at_snapshot": "best"}),
    );
    assert_eq!(frozen["lines"], json!(["v1"]));
    assert_eq!(frozen["generation"], gen_before);
    let listed = ok(
        &mut wb,
        "workbench_list",
        json!({"id": "w", "section": "outputs", "at_snapshot": 0}),
    );
    assert_eq!(listed["items"].as_array().unwrap().len(), 1);
    assert_eq!(
        err(
            &mut wb,
            "workbench_stat",
            json!({"id": "w", "section": "outputs", "path": "new.txt", "at_snapshot": 0})
        )
        .code,
        "not_found"
    );
    // A newer snapshot with the same name wins the name; the old stays addressable by id.
    let s1 = ok(
        &mut wb,
        "workbench_snapshot",
        json!({"id": "w", "name": "best", "ttl_days": 1}),
    );
    assert_eq!(s1["snapshot_id"], 1);
    let by_name = ok(
        &mut wb,
        "workbench_read",
        json!({"id": "w", "section": "outputs", "path": "o.txt", "at_snapshot": "best"}),
    );
    assert_eq!(by_name["lines"], json!(["v2"]));
    // Renew extends, never shortens.
    let r = ok(
        &mut wb,
        "workbench_snapshot_renew",
        json!({"id": "w", "snapshot_id": 0, "ttl_days": 1}),
    );
    assert_eq!(
        (r["renewed"].clone(), r["expires_ms"].clone()),
        (json!(false), json!(12 * DAY))
    );
    let r = ok(
        &mut wb,
        "workbench_snapshot_renew",
        json!({"id": "w", "snapshot_id": 0, "ttl_days": 5}),
    );
    assert_eq!(
        (r["renewed"].clone(), r["expires_ms"].clone()),
        (json!(true), json!(15 * DAY))
    );
    // The reply is the record as now stored: the lease just granted and
    // the generation of the rewritten record.
    assert_eq!(r["ttl_days"], 5);
    let listed = ok(&mut wb, "workbench_snapshot_list", json!({"id": "w"}));
    assert_eq!(
        r["record_generation"],
        listed["snapshots"][0]["record_generation"]
    );
    // Retire: first success true, exact retry false; reads then refuse.
    let t = ok(
        &mut wb,
        "workbench_snapshot_retire",
        json!({"id": "w", "snapshot_id": 0, "reason": "done"}),
    );
    assert_eq!(t["retired"], true);
    let listed = ok(&mut wb, "workbench_snapshot_list", json!({"id": "w"}));
    assert_eq!(
        t["record_generation"],
        listed["snapshots"][0]["record_generation"]
    );
    let t = ok(
        &mut wb,
        "workbench_snapshot_retire",
        json!({"id": "w", "snapshot_id": 0, "reason": "done"}),
    );
    assert_eq!(t["retired"], false);
    assert_eq!(
        err(
            &mut wb,
            "workbench_read",
            json!({"id": "w", "section": "outputs", "path": "o.txt", "at_snapshot": 0})
        )
        .code,
        "snapshot_retired"
    );
    assert_eq!(
        err(
            &mut wb,
            "workbench_snapshot_retire",
            json!({"id": "w", "snapshot_id": 9})
        )
        .code,
        "snapshot_not_found"
    );
    // Expiry, then reaping; renew fails after reap.
    clock.store(11 * DAY + 1, Ordering::SeqCst);
    assert_eq!(
        err(
            &mut wb,
            "workbench_read",
            json!({"id": "w", "section": "outputs", "path": "o.txt", "at_snapshot": 1})
        )
        .code,
        "snapshot_expired"
    );
    let list = ok(&mut wb, "workbench_snapshot_list", json!({"id": "w"}));
    let states: Vec<&str> = list["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["retired", "expired"]);
    // Expired is over even before the reaper runs: renew does not bring
    // it back.
    assert_eq!(
        err(
            &mut wb,
            "workbench_snapshot_renew",
            json!({"id": "w", "snapshot_id": 1, "ttl_days": 90})
        )
        .code,
        "snapshot_expired"
    );
    assert_eq!(wb.reap("w").unwrap(), vec![1]);
    assert_eq!(
        err(
            &mut wb,
            "workbench_snapshot_renew",
            json!({"id": "w", "snapshot_id": 1, "ttl_days": 90})
        )
        .code,
        "snapshot_reaped"
    );
    let list = ok(&mut wb, "workbench_snapshot_list", json!({"id": "w"}));
    assert_eq!(list["snapshots"][1]["state"], "reaped");
    assert_eq!(list["snapshots"][1]["reaped_ms"], 11 * DAY + 1);
}

#[test]
fn restore_publishes_one_change_reusing_bodies_and_replays() {
    let env = Env::new(Transport::InProcess);
    let clock = Arc::new(AtomicU64::new(DAY));
    let mut wb = clocked(&env, clock);
    ok(&mut wb, "workbench_create", json!({"id": "src"}));
    ok(
        &mut wb,
        "workbench_put_file",
        json!({"id": "src", "section": "outputs", "path": "a/b.bin", "text": "payload", "content_type": "application/x-w"}),
    );
    ok(
        &mut wb,
        "workbench_put_file",
        json!({"id": "src", "section": "logs", "path": "l.log", "text": "log"}),
    );
    let c = ok(
        &mut wb,
        "workbench_commit",
        json!({"id": "src", "manifest": {"k": 1}, "content_digest_uri": digest('d')}),
    );
    ok(
        &mut wb,
        "workbench_put_file",
        json!({"id": "src", "section": "outputs", "path": "late.txt", "text": "after the commit"}),
    );
    let head_before = env.service().clone();
    drop(head_before);
    let req = json!({"id": "src", "destination_id": "dst", "at_commit": c["commit_identity"]});
    let r = ok(&mut wb, "workbench_restore", req.clone());
    assert_eq!(r["member_count"], 3); // b.bin, l.log, run_manifest.json
    assert_eq!(r["idempotent_replay"], false);
    // The destination reads what the source had at the commit; the source is unchanged.
    let b = ok(
        &mut wb,
        "workbench_read",
        json!({"id": "dst", "section": "outputs", "path": "a/b.bin"}),
    );
    assert_eq!(b["lines"], json!(["payload"]));
    assert_eq!(
        err(
            &mut wb,
            "workbench_stat",
            json!({"id": "dst", "section": "outputs", "path": "late.txt"})
        )
        .code,
        "not_found"
    );
    ok(
        &mut wb,
        "workbench_stat",
        json!({"id": "src", "section": "outputs", "path": "late.txt"}),
    );
    let m = ok(
        &mut wb,
        "workbench_read",
        json!({"id": "dst", "section": "metadata", "path": "restore_manifest.json"}),
    );
    assert_eq!(m["json"]["schema"], "nokv.workbench.restore_manifest.v1");
    let text = m["json"].to_string();
    assert!(
        !text.contains("source_root")
            && !text.contains("destination_root")
            && !text.contains("inode")
    );
    let st = ok(
        &mut wb,
        "workbench_stat",
        json!({"id": "dst", "section": "outputs", "path": "a/b.bin"}),
    );
    assert_eq!(st["content_type"], "application/x-w");
    // Every member is published by the one restore change (its incarnation).
    let st = ok(
        &mut wb,
        "workbench_stat",
        json!({"id": "dst", "section": "logs", "path": "l.log"}),
    );
    assert_eq!(st["generation"], r["incarnation"]);
    // Zero object bytes copied: the restored body is the source's manifest.
    use nokv_workbench::store::Store;
    let s = wb
        .store_mut()
        .stat(0, "src/outputs/a/b.bin")
        .unwrap()
        .unwrap();
    let d = wb
        .store_mut()
        .stat(0, "dst/outputs/a/b.bin")
        .unwrap()
        .unwrap();
    assert_eq!(s.body, d.body);
    // Exact retry converges; another request to the same destination conflicts.
    let again = ok(&mut wb, "workbench_restore", req);
    assert_eq!(
        (again["idempotent_replay"].clone(), again["change"].clone()),
        (json!(true), r["change"].clone())
    );
    let e = err(
        &mut wb,
        "workbench_restore",
        json!({"id": "src", "destination_id": "dst"}),
    );
    assert_eq!(
        (e.code, e.conflict),
        ("destination_exists", ConflictClass::Exists)
    );
}

/// Lines fed to `serve_scheduled` by the test, one `String` per message.
struct Feed(std::sync::mpsc::Receiver<String>, Vec<u8>);

impl std::io::Read for Feed {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.1.is_empty() {
            match self.0.recv() {
                Ok(line) => self.1 = format!("{line}\n").into_bytes(),
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.1.len());
        buf[..n].copy_from_slice(&self.1[..n]);
        self.1.drain(..n);
        Ok(n)
    }
}

/// Answers written by the server, one line each.
#[derive(Clone, Default)]
struct Answers(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Answers {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Poll (bounded) until `f` holds; panics with `what` if it never does.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..3000 {
        if f() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("never: {what}");
}

#[test]
fn the_mcp_server_reaps_expired_snapshots_on_its_schedule_even_when_idle() {
    use nokv_workbench::mcp::{serve_scheduled, ReapSchedule, Session};
    let env = Env::new(Transport::InProcess);
    let clock = Arc::new(AtomicU64::new(10 * DAY));
    let mut setup = clocked(&env, clock.clone());
    for id in ["a", "b"] {
        ok(&mut setup, "workbench_create", json!({"id": id}));
        ok(
            &mut setup,
            "workbench_commit",
            json!({"id": id, "manifest": {}, "content_digest_uri": digest('c')}),
        );
    }
    // a: one snapshot of 1 day and one of 5; b: one of 2 days.
    ok(
        &mut setup,
        "workbench_snapshot",
        json!({"id": "a", "ttl_days": 1}),
    );
    ok(
        &mut setup,
        "workbench_snapshot",
        json!({"id": "a", "ttl_days": 5}),
    );
    ok(
        &mut setup,
        "workbench_snapshot",
        json!({"id": "b", "ttl_days": 2}),
    );
    let states = |wb: &mut Workbench<ScribeStore>, id: &str| -> Vec<String> {
        ok(wb, "workbench_snapshot_list", json!({"id": id}))["snapshots"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["state"].as_str().unwrap().to_string())
            .collect()
    };
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let answers = Answers::default();
    let server = {
        let wb = clocked(&env, clock.clone());
        let out = answers.clone();
        std::thread::spawn(move || {
            let input = std::io::BufReader::new(Feed(rx, Vec::new()));
            let schedule = ReapSchedule {
                every_ms: DAY,
                tick: std::time::Duration::from_millis(5),
            };
            serve_scheduled(Session::over(wb), input, out, schedule)
        })
    };
    let head = |wb: &mut Workbench<ScribeStore>| {
        use nokv_workbench::store::Store;
        wb.store_mut().head().unwrap()
    };
    // The server answers; its sweep at start reaped nothing (all alive).
    tx.send(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string())
        .unwrap();
    eventually("the ping is answered", || {
        !answers.0.lock().unwrap().is_empty()
    });
    let quiet = head(&mut setup);
    assert_eq!(states(&mut setup, "a"), ["alive", "alive"]);
    // 1.5 days later, with no message at all: the idle server reaps the
    // expired snapshot of a (one change) and nothing else.
    clock.store(11 * DAY + DAY / 2, Ordering::SeqCst);
    eventually("a's first snapshot is reaped", || {
        states(&mut setup, "a") == ["reaped", "alive"]
    });
    assert_eq!(states(&mut setup, "b"), ["alive"]);
    assert_eq!(head(&mut setup), quiet + 1);
    // Half a day later b has expired, but the next sweep is not due yet.
    clock.store(12 * DAY + 1, Ordering::SeqCst);
    tx.send(json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}).to_string())
        .unwrap();
    eventually("the second ping is answered", || {
        String::from_utf8_lossy(&answers.0.lock().unwrap()).contains("\"id\":2")
    });
    assert_eq!(states(&mut setup, "b"), ["expired"]);
    // A day after the last sweep it is reaped too.
    clock.store(12 * DAY + DAY / 2, Ordering::SeqCst);
    eventually("b's snapshot is reaped", || {
        states(&mut setup, "b") == ["reaped"]
    });
    assert_eq!(states(&mut setup, "a"), ["reaped", "alive"]);
    assert_eq!(head(&mut setup), quiet + 2);
    let e = err(
        &mut setup,
        "workbench_snapshot_renew",
        json!({"id": "b", "snapshot_id": 0}),
    );
    assert_eq!(e.code, "snapshot_reaped");
    drop(tx);
    server.join().unwrap().unwrap();
}

#[test]
fn a_snapshot_retry_replays_while_the_workbench_is_unchanged_whatever_was_taken_since() {
    let env = Env::new(Transport::InProcess);
    let clock = Arc::new(AtomicU64::new(10 * DAY));
    let mut wb = clocked(&env, clock.clone());
    ok(&mut wb, "workbench_create", json!({"id": "w"}));
    let put = |wb: &mut Workbench<ScribeStore>, text: &str, replace: bool| {
        ok(
            wb,
            "workbench_put_file",
            json!({"id": "w", "section": "outputs", "path": "o.txt", "text": text, "replace": replace}),
        );
    };
    put(&mut wb, "v1", false);
    ok(
        &mut wb,
        "workbench_commit",
        json!({"id": "w", "manifest": {}, "content_digest_uri": digest('d')}),
    );
    let a = json!({"id": "w", "name": "a"});
    let first = ok(&mut wb, "workbench_snapshot", a.clone());
    assert_eq!(first["idempotent_replay"], false);
    let b = ok(
        &mut wb,
        "workbench_snapshot",
        json!({"id": "w", "name": "b"}),
    );
    assert_eq!(b["snapshot_id"], 1);
    // The answer to `a` was lost; its retry comes after `b`: the same
    // snapshot, not a second one.
    let again = ok(&mut wb, "workbench_snapshot", a.clone());
    assert_eq!(
        (
            again["idempotent_replay"].clone(),
            again["snapshot_id"].clone()
        ),
        (json!(true), first["snapshot_id"].clone())
    );
    // Once the workbench moved, the same request freezes the new state.
    put(&mut wb, "v2", true);
    let later = ok(&mut wb, "workbench_snapshot", a.clone());
    assert_eq!(
        (
            later["idempotent_replay"].clone(),
            later["snapshot_id"].clone()
        ),
        (json!(false), json!(2))
    );
    let frozen = ok(
        &mut wb,
        "workbench_read",
        json!({"id": "w", "section": "outputs", "path": "o.txt", "at_snapshot": 2}),
    );
    assert_eq!(frozen["lines"], json!(["v2"]));
    let replay = ok(&mut wb, "workbench_snapshot", a);
    assert_eq!(
        (
            replay["idempotent_replay"].clone(),
            replay["snapshot_id"].clone()
        ),
        (json!(true), json!(2))
    );
    let list = ok(&mut wb, "workbench_snapshot_list", json!({"id": "w"}));
    assert_eq!(
        list["snapshots"].as_array().map(Vec::len),
        Some(3),
        "{list}"
    );
}

/// A restore over TCP of files written by many changes (their messages are
/// asked for on several connections at once): every member's recorded
/// content type reaches the destination, each its own, in one change.
#[test]
fn a_restore_of_files_from_many_changes_keeps_each_content_type() {
    let env = Env::new(Transport::Process);
    let store = ScribeStore::open(
        env.url(),
        REPO,
        "bot",
        &scribe_client::ClientOptions::default(),
    )
    .unwrap();
    let mut wb = Workbench::new(store, "bot");
    ok(&mut wb, "workbench_create", json!({"id": "many"}));
    let n = 150;
    for i in 0..n {
        let mut input = json!({"id": "many", "section": "outputs", "path": format!("f{i}.bin"), "text": format!("{i}")});
        if i % 3 != 0 {
            input["content_type"] = json!(format!("application/x-kind{i}"));
        }
        ok(&mut wb, "workbench_put_file", input);
    }
    let head = wb.store_mut().head().unwrap();
    let r = ok(
        &mut wb,
        "workbench_restore",
        json!({"id": "many", "destination_id": "copy"}),
    );
    assert_eq!(r["member_count"], json!(n));
    assert_eq!(r["change"], json!(head + 1));
    for i in 0..n {
        let st = ok(
            &mut wb,
            "workbench_stat",
            json!({"id": "copy", "section": "outputs", "path": format!("f{i}.bin")}),
        );
        let want = if i % 3 != 0 {
            format!("application/x-kind{i}")
        } else {
            "application/octet-stream".to_string()
        };
        assert_eq!(st["content_type"], json!(want), "f{i}.bin");
    }
}

/// Error paths the other tests leave out (docs/workbench.md, conformance
/// coverage): restore at an alive snapshot reads what it froze, and is
/// refused at a retired or expired one, at an unknown commit, from an
/// absent source and into a directory a person already uses; append to a
/// reserved path or an absent workbench, edit of an absent path, and
/// snapshot_list, renew and list at an unknown snapshot or workbench.
#[test]
fn restore_at_a_snapshot_and_the_remaining_error_paths() {
    let env = Env::new(Transport::InProcess);
    let clock = Arc::new(AtomicU64::new(DAY));
    let mut wb = clocked(&env, clock.clone());
    ok(&mut wb, "workbench_create", json!({"id": "src"}));
    let put = |text: &str, replace: bool| json!({"id": "src", "section": "outputs", "path": "a.txt", "text": text, "replace": replace});
    ok(&mut wb, "workbench_put_file", put("v1", false));
    ok(
        &mut wb,
        "workbench_commit",
        json!({"id": "src", "manifest": {}, "content_digest_uri": digest('a')}),
    );
    ok(
        &mut wb,
        "workbench_snapshot",
        json!({"id": "src", "name": "kept", "ttl_days": 30}),
    );
    ok(
        &mut wb,
        "workbench_snapshot",
        json!({"id": "src", "name": "short", "ttl_days": 1}),
    );
    ok(
        &mut wb,
        "workbench_snapshot",
        json!({"id": "src", "name": "gone", "ttl_days": 30}),
    );
    ok(&mut wb, "workbench_put_file", put("v2", true));
    // At an alive snapshot: what it froze, named in the restore manifest.
    let r = ok(
        &mut wb,
        "workbench_restore",
        json!({"id": "src", "destination_id": "d1", "at_snapshot": "kept"}),
    );
    assert_eq!(r["member_count"], 2, "{r}"); // a.txt, run_manifest.json
    let a = ok(
        &mut wb,
        "workbench_read",
        json!({"id": "d1", "section": "outputs", "path": "a.txt"}),
    );
    assert_eq!(a["lines"], json!(["v1"]));
    let m = ok(
        &mut wb,
        "workbench_read",
        json!({"id": "d1", "section": "metadata", "path": "restore_manifest.json"}),
    );
    assert_eq!(m["json"]["at_snapshot"], "kept");
    let refused = |wb: &mut Workbench<ScribeStore>, tool: &str, input: serde_json::Value| {
        err(wb, tool, input).code
    };
    ok(
        &mut wb,
        "workbench_snapshot_retire",
        json!({"id": "src", "name": "gone"}),
    );
    assert_eq!(
        refused(
            &mut wb,
            "workbench_restore",
            json!({"id": "src", "destination_id": "d2", "at_snapshot": "gone"})
        ),
        "snapshot_retired"
    );
    clock.store(3 * DAY, Ordering::SeqCst);
    assert_eq!(
        refused(
            &mut wb,
            "workbench_restore",
            json!({"id": "src", "destination_id": "d2", "at_snapshot": "short"})
        ),
        "snapshot_expired"
    );
    assert_eq!(
        refused(
            &mut wb,
            "workbench_restore",
            json!({"id": "src", "destination_id": "d2", "at_commit": "0".repeat(64)})
        ),
        "not_found"
    );
    assert_eq!(
        refused(
            &mut wb,
            "workbench_restore",
            json!({"id": "nope", "destination_id": "d2"})
        ),
        "workbench_not_found"
    );
    // A person's file under the destination's directory.
    use nokv_workbench::store::{Edit, NewBody, Publish, Published};
    let p = wb
        .store_mut()
        .publish(Publish {
            operation: [7; 16],
            message: "a person's file".into(),
            edits: vec![Edit::Put {
                path: "d3/input/theirs.txt".into(),
                base: 0,
                body: NewBody::Bytes(b"theirs".to_vec()),
            }],
            timestamp_ms: DAY,
        })
        .unwrap();
    assert!(matches!(p, Published::Accepted { .. }), "{p:?}");
    assert_eq!(
        refused(
            &mut wb,
            "workbench_restore",
            json!({"id": "src", "destination_id": "d3"})
        ),
        "workbench_dir_not_empty"
    );
    // Nothing of the refused destinations exists.
    for d in ["d2", "d3"] {
        assert_eq!(
            refused(&mut wb, "workbench_stat", json!({"id": d})),
            "workbench_not_found"
        );
    }
    assert_eq!(
        refused(
            &mut wb,
            "workbench_append",
            json!({"id": "src", "section": "metadata", "path": "run_manifest.json", "text": "x"})
        ),
        "reserved_path"
    );
    assert_eq!(
        refused(
            &mut wb,
            "workbench_append",
            json!({"id": "nope", "section": "logs", "path": "l.log", "text": "x"})
        ),
        "workbench_not_found"
    );
    assert_eq!(
        refused(
            &mut wb,
            "workbench_edit",
            json!({"id": "src", "section": "outputs", "path": "absent.txt", "old_string": "a", "new_string": "b"})
        ),
        "not_found"
    );
    assert_eq!(
        refused(&mut wb, "workbench_snapshot_list", json!({"id": "nope"})),
        "workbench_not_found"
    );
    assert_eq!(
        refused(
            &mut wb,
            "workbench_snapshot_renew",
            json!({"id": "src", "snapshot_id": 99})
        ),
        "snapshot_not_found"
    );
    assert_eq!(
        refused(
            &mut wb,
            "workbench_list",
            json!({"id": "src", "section": "outputs", "at_snapshot": "never"})
        ),
        "snapshot_not_found"
    );
}

#[test]
fn a_run_manifest_is_bounded_on_write_and_on_read() {
    use nokv_workbench::store::{Edit, NewBody, Publish, Published};
    use nokv_workbench::workbench::RUN_MANIFEST_MAX_BYTES;
    assert_eq!(RUN_MANIFEST_MAX_BYTES, 16 << 20);
    let env = Env::new(Transport::Tcp);
    let mut wb = super::support::workbench(&env);
    ok(&mut wb, "workbench_create", json!({"id": "big"}));
    let head = wb.store_mut().head().unwrap();
    // On write: a manifest over the bound is refused by name, nothing
    // published; one whose canonical JSON is under the bound but whose
    // stored (indented) form is over it too.
    let blob = "m".repeat((16 << 20) + 1);
    let e = err(
        &mut wb,
        "workbench_commit",
        json!({"id": "big", "manifest": {"blob": blob}, "content_digest_uri": digest('a')}),
    );
    assert_eq!(e.code, "invalid_input");
    assert!(
        e.message.contains("RUN_MANIFEST_MAX_BYTES"),
        "{}",
        e.message
    );
    let zeros = vec![0u8; 2 << 20];
    let e = err(
        &mut wb,
        "workbench_commit",
        json!({"id": "big", "manifest": {"zeros": zeros}, "content_digest_uri": digest('a')}),
    );
    assert_eq!(e.code, "invalid_input", "{e}");
    assert_eq!(wb.store_mut().head().unwrap(), head);
    let f = ok(&mut wb, "workbench_find", json!({"committed": true}));
    assert_eq!(f["total"], 0, "{f}");
    // Just under the bound commits.
    let blob = "m".repeat((16 << 20) - 4096);
    ok(
        &mut wb,
        "workbench_commit",
        json!({"id": "big", "manifest": {"blob": blob}, "content_digest_uri": digest('a')}),
    );

    // On read: a person's oversized run manifest (which no commit writes)
    // is refused by name without being read, and find names it instead
    // of reading it to match a pattern.
    ok(&mut wb, "workbench_create", json!({"id": "p"}));
    ok(&mut wb, "workbench_create", json!({"id": "q"}));
    let first = ok(
        &mut wb,
        "workbench_commit",
        json!({"id": "p", "manifest": {"model": "resnet"}, "content_digest_uri": digest('b')}),
    );
    ok(
        &mut wb,
        "workbench_commit",
        json!({"id": "q", "manifest": {"model": "resnet"}, "content_digest_uri": digest('c')}),
    );
    let huge = format!(
        r#"{{"manifest": {{"model": "resnet", "pad": "{}"}}}}"#,
        "p".repeat(17 << 20)
    );
    // (Through the store, as a person's submit would: the bridge's own
    // tools refuse to write a run manifest.)
    let landed = wb
        .store_mut()
        .publish(Publish {
            operation: [7; 16],
            message: "a person's oversized run manifest\n".into(),
            edits: vec![Edit::Put {
                path: "p/metadata/run_manifest.json".into(),
                base: first["generation"].as_u64().unwrap(),
                body: NewBody::Bytes(huge.into_bytes()),
            }],
            timestamp_ms: 1,
        })
        .unwrap();
    assert!(matches!(landed, Published::Accepted { .. }), "{landed:?}");
    let f = ok(
        &mut wb,
        "workbench_find",
        json!({"manifest_pattern": "resnet"}),
    );
    let found: Vec<_> = f["workbenches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["id"].clone())
        .collect();
    assert_eq!(found, vec![json!("q")], "{f}");
    assert_eq!(f["unsearched"][0]["id"], "p", "{f}");
    assert!(f["unsearched"][0]["manifest_size"].as_u64().unwrap() > 17 << 20);
    // An exact retry of p's commit still replays its stored result (the
    // record's change); asking to replace it has to read the live file.
    let again = ok(
        &mut wb,
        "workbench_commit",
        json!({"id": "p", "manifest": {"model": "resnet"}, "content_digest_uri": digest('b')}),
    );
    assert_eq!(again["idempotent_replay"], true);
    assert_eq!(again["change"], first["change"]);
    let e = err(
        &mut wb,
        "workbench_commit",
        json!({"id": "p", "manifest": {"model": "resnet"}, "content_digest_uri": digest('b'),
               "replace": true}),
    );
    assert_eq!(e.code, "storage");
    assert!(
        e.message.contains("RUN_MANIFEST_MAX_BYTES"),
        "{}",
        e.message
    );
}

/// The same snapshot call again while the workbench is unchanged replays
/// the earlier snapshot only while that one is alive: once it was retired
/// or expired, a repeat is a deliberate request for a usable snapshot and
/// takes a new one (answering the retired one as a replay gave the caller
/// a snapshot it cannot read at).
#[test]
fn a_repeated_snapshot_replays_only_an_alive_one() {
    let env = Env::new(Transport::InProcess);
    let clock = Arc::new(AtomicU64::new(10 * DAY));
    let mut wb = clocked(&env, clock.clone());
    ok(&mut wb, "workbench_create", json!({"id": "w"}));
    ok(
        &mut wb,
        "workbench_commit",
        json!({"id": "w", "manifest": {}, "content_digest_uri": digest('c')}),
    );
    let input = json!({"id": "w", "name": "nightly", "ttl_days": 1});
    let s0 = ok(&mut wb, "workbench_snapshot", input.clone());
    let again = ok(&mut wb, "workbench_snapshot", input.clone());
    assert_eq!(again["idempotent_replay"], true, "{again}");
    assert_eq!(again["snapshot_id"], s0["snapshot_id"]);
    ok(
        &mut wb,
        "workbench_snapshot_retire",
        json!({"id": "w", "snapshot_id": s0["snapshot_id"]}),
    );
    let s1 = ok(&mut wb, "workbench_snapshot", input.clone());
    assert_eq!(s1["idempotent_replay"], false, "{s1}");
    assert_eq!(s1["state"], "alive", "{s1}");
    assert_ne!(s1["snapshot_id"], s0["snapshot_id"]);
    // Expired (not yet reaped): the same.
    clock.fetch_add(2 * DAY, Ordering::SeqCst);
    let s2 = ok(&mut wb, "workbench_snapshot", input.clone());
    assert_eq!(s2["idempotent_replay"], false, "{s2}");
    assert_eq!(s2["state"], "alive", "{s2}");
    assert_ne!(s2["snapshot_id"], s1["snapshot_id"]);
}

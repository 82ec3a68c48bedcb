//! A restore interrupted between its upload and its publication is
//! invisible, and its retry converges: with a store that stops right after
//! staging, and with the `nokv` process SIGKILLed at an arbitrary point.

use std::process::{Command, Stdio};

use nokv_workbench::path::Section;
use nokv_workbench::scribe::ScribeStore;
use nokv_workbench::store::{BodyRef, DirPage, Publish, Published, Store, VersionInfo};
use nokv_workbench::workbench::sandbox::LocalFile;
use nokv_workbench::{WbError, Workbench};
use scribe_testkit::env::{Env, Transport, REPO};
use serde_json::json;

use super::support::{client, err, ok, workbench};

/// Forwards everything, but a publication only uploads, then "crashes".
struct StopsAfterStaging(ScribeStore);

impl Store for StopsAfterStaging {
    fn root_name(&self) -> String {
        self.0.root_name()
    }
    fn head(&mut self) -> Result<u64, WbError> {
        self.0.head()
    }
    fn stat(&mut self, at: u64, path: &str) -> Result<Option<nokv_workbench::store::Row>, WbError> {
        self.0.stat(at, path)
    }
    fn list_dir(
        &mut self,
        at: u64,
        dir: &str,
        token: &str,
        limit: u32,
    ) -> Result<DirPage, WbError> {
        self.0.list_dir(at, dir, token, limit)
    }
    fn list_files(
        &mut self,
        at: u64,
        dir: &str,
        token: &str,
        limit: u32,
    ) -> Result<DirPage, WbError> {
        self.0.list_files(at, dir, token, limit)
    }
    fn read(&mut self, body: &BodyRef, offset: u64, len: u64) -> Result<Vec<u8>, WbError> {
        self.0.read(body, offset, len)
    }
    fn publish(&mut self, p: Publish) -> Result<Published, WbError> {
        self.0.stage(&p)?;
        Err(WbError::new("unavailable", "crashed after staging"))
    }
    fn version_info(&mut self, version: u64) -> Result<VersionInfo, WbError> {
        self.0.version_info(version)
    }
    fn changed_under(&mut self, dir: &str, from: u64, to: u64) -> Result<bool, WbError> {
        self.0.changed_under(dir, from, to)
    }
}

fn seed(wb: &mut Workbench<ScribeStore>, id: &str, n: usize) {
    ok(wb, "workbench_create", json!({"id": id}));
    let files = (0..n)
        .map(|i| LocalFile {
            section: Section::Outputs,
            path: format!("d{}/f{i}.txt", i % 7),
            bytes: format!("file {i}").into_bytes(),
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
    let store = ScribeStore::over(client(&env), REPO, "bot").unwrap();
    let mut crashing = Workbench::new(StopsAfterStaging(store), "bot");
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

//! SIGKILL during administration loses nothing acknowledged.
//!
//! The test runs its own binary again as a child (this test as the filter,
//! the directory in environment variables). The child adds users in a loop
//! and prints `ack <username> <id>` after each acknowledged change; the
//! parent kills it with SIGKILL, reopens the directory and finds every
//! acknowledged user.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use scribe_auth::audit::AuditArg;
use scribe_auth::rows::*;
use scribe_auth::{AuthDir, Id};
use scribe_format::sau2::Sau2Result;

use super::support::*;

const CHILD_ENV: &str = "SCRIBE_AUTH_TEST_CRASH_CHILD";
const TEST_NAME: &str = "it::crash::sigkill_during_administration_loses_nothing_acknowledged";

fn child(dir_env: &str) -> ! {
    let root = std::path::PathBuf::from(dir_env);
    let mut dir = AuthDir::open(
        &root.join("auth"),
        &root.join("pepper"),
        &root.join("witness"),
    )
    .expect("the child opens the directory");
    let admin: UserRow = dir.get(&Key::User("admin".into())).unwrap().unwrap();
    let mut out = std::io::stdout().lock();
    for i in 0u64.. {
        let name = format!("user{i}");
        let args = [AuditArg::word(&name)];
        let r = dir
            .add_user(
                &request(admin.id, "user-add", &args),
                &name,
                false,
                UserKind::Person,
                None,
            )
            .expect("add_user");
        let Sau2Result::Rows(rows) = r else {
            panic!("refused: {r:?}")
        };
        writeln!(out, "ack {name} {}", rows[0][0]).unwrap();
        out.flush().unwrap();
    }
    unreachable!()
}

#[test]
fn sigkill_during_administration_loses_nothing_acknowledged() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        child(&dir);
    }
    let fx = Fixture::new();
    let (dir, _) = fx.init();
    drop(dir);
    let mut proc = Command::new(std::env::current_exe().unwrap())
        .args([TEST_NAME, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, fx.tmp.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(proc.stdout.take().unwrap());
    let mut acked: Vec<(String, String)> = Vec::new();
    let mut line = String::new();
    while acked.len() < 25 {
        line.clear();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "the child ended early"
        );
        if let Some(rest) = line.trim_end().strip_prefix("ack ") {
            let (name, id) = rest.split_once(' ').unwrap();
            acked.push((name.to_owned(), id.to_owned()));
        }
    }
    proc.kill().unwrap(); // SIGKILL on Unix
    proc.wait().unwrap();
    // Whatever the child printed before it died was acknowledged too.
    for line in reader.lines() {
        if let Some(rest) = line.unwrap().strip_prefix("ack ") {
            let (name, id) = rest.split_once(' ').unwrap();
            acked.push((name.to_owned(), id.to_owned()));
        }
    }
    // Reopen: the lock died with the child; the witness is at or behind the database.
    let dir = fx.open().unwrap();
    assert!(dir.revision() > acked.len() as u64);
    for (name, id) in &acked {
        let user: UserRow = dir
            .get(&Key::User(name.clone()))
            .unwrap()
            .unwrap_or_else(|| panic!("acknowledged {name} is lost"));
        assert_eq!(user.id.hex(), *id);
        let by_id: UserIdRow = dir
            .get(&Key::UserId(Id::parse(id).unwrap()))
            .unwrap()
            .unwrap();
        assert_eq!(by_id.username, *name);
    }
    dir.verify().unwrap();
    // Audit rows and outcomes are there for each acknowledged change.
    assert!(dir.scan_prefix("audit/").unwrap().len() > acked.len());
    assert!(dir.scan_prefix("operations/").unwrap().len() >= acked.len());
}

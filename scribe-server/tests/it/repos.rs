//! `scribe-server repo rename` and `repo delete` (the real binary on real
//! data roots): what moves, what stays, what is refused and what is kept.

use std::path::Path;
use std::process::{Command, Output};

use scribe_format::wire::message as m;
use scribe_format::wire::{Connection, Request, Response};
use scribe_format::{OperationId, WorkspaceId};
use scribe_server::{InProcessConnection, Service};
use scribe_testkit::change::{accepted, change, Requests};
use scribe_testkit::REPO;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scribe-server"))
        .args(args)
        .env_remove("SCRIBE_CREDENTIAL")
        .output()
        .expect("run scribe-server")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A data root with [`REPO`] holding one change made through a
/// registered workspace; the repository's id.
fn root_with_history(data: &Path) -> (scribe_format::RepositoryId, WorkspaceId, u64) {
    let svc = Service::create(data).unwrap();
    let info = scribe_server::service::dispatch::repo_create(&svc, REPO).unwrap();
    let mut c = InProcessConnection::new(svc);
    let ws = WorkspaceId([7; 16]);
    c.register(ws);
    let n = accepted(&c.upload_and_submit(
        ws,
        OperationId([1; 16]),
        &change(&[("art/a.txt", Some(b"a".as_slice()), 0)]),
        "first",
    ));
    (info.id, ws, n)
}

fn workspaces(c: &mut InProcessConnection, repo: &str) -> Response {
    c.call(Request::WorkspaceList(m::WorkspaceListRequest {
        repo: repo.into(),
    }))
    .unwrap()
}

#[test]
fn a_renamed_repository_keeps_its_id_history_and_workspaces() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = data.to_str().unwrap();
    let (id, ws, head) = root_with_history(&data);
    // Refusals change nothing: an unknown repository, a taken name, a
    // malformed name.
    let out = run(&["repo", "create", "--data", d, "taken"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for (args, says) in [
        (["nope", "x"], "no repository"),
        ([REPO, "taken"], "exists"),
        ([REPO, "a/b"], "must be 1..=128 bytes"),
    ] {
        let out = run(&["repo", "rename", "--data", d, args[0], args[1]]);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            text(&out.stderr).contains(says),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    let out = run(&["repo", "rename", "--data", d, REPO, "game-2026"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).lines().next(), Some(id.to_hex().as_str()));
    assert!(
        text(&out.stdout).contains("scribe workspace set-server"),
        "{}",
        text(&out.stdout)
    );
    // The descriptor names it as the catalog does.
    let desc = std::fs::read_to_string(data.join("repos").join(id.to_hex()).join("SCRIBE_FORMAT"))
        .unwrap();
    assert!(
        desc.contains("name = game-2026\n") || desc.contains("name=game-2026\n"),
        "{desc}"
    );
    let out = run(&["doctor", "--data", d]);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );

    let mut c = InProcessConnection::new(Service::open(&data).unwrap());
    let list = c.repo_list();
    let renamed = list.iter().find(|r| r.id == id).unwrap();
    assert_eq!(renamed.name, "game-2026");
    assert_eq!(renamed.head, head);
    assert!(list.iter().all(|r| r.name != REPO));
    match workspaces(&mut c, "game-2026") {
        Response::WorkspaceList(l) => {
            assert!(l.workspaces.iter().any(|w| w.workspace == ws), "{l:?}")
        }
        other => panic!("{other:?}"),
    }
    match workspaces(&mut c, REPO) {
        Response::Error(e) => assert!(e.message.contains("no repository"), "{e:?}"),
        other => panic!("{other:?}"),
    }
    // The old name is given to a new repository (another id, no history)
    // only on purpose (`a_renamed_repositorys_old_name_is_not_reused_...`).
    drop(c);
    let out = run(&["repo", "create", "--data", d, REPO, "--reuse-name"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_ne!(text(&out.stdout).trim(), id.to_hex());
}

#[test]
fn a_deleted_repository_needs_confirmation_and_its_data_is_moved_aside() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = data.to_str().unwrap();
    let (id, _ws, _head) = root_with_history(&data);
    let repo_dir = data.join("repos").join(id.to_hex());
    // Without --yes: says what would happen, changes nothing.
    let out = run(&["repo", "delete", "--data", d, REPO]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.contains("nothing deleted") && said.contains(&id.to_hex()),
        "{said}"
    );
    // --yes without --confirm, and with a wrong one: refused.
    for extra in [&["--yes"][..], &["--yes", "--confirm", "other"]] {
        let mut args = vec!["repo", "delete", "--data", d, REPO];
        args.extend_from_slice(extra);
        let out = run(&args);
        assert_eq!(out.status.code(), Some(1), "{extra:?}");
        assert!(
            text(&out.stderr).contains("nothing deleted"),
            "{extra:?}: {}",
            text(&out.stderr)
        );
    }
    assert!(repo_dir.join("metadata.redb").is_file());
    let out = run(&[
        "repo",
        "delete",
        "--data",
        d,
        REPO,
        "--yes",
        "--confirm",
        &id.to_hex(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!repo_dir.exists());
    let kept: Vec<_> = std::fs::read_dir(data.join("deleted"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(kept.len(), 1);
    let name = kept[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with(&format!("{}-", id.to_hex())), "{name}");
    assert!(kept[0].join("metadata.redb").is_file() && kept[0].join("objects").is_dir());
    assert!(
        text(&out.stdout).contains(&kept[0].display().to_string()),
        "says where: {}",
        text(&out.stdout)
    );
    let out = run(&["doctor", "--data", d]);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let mut c = InProcessConnection::new(Service::open(&data).unwrap());
    assert!(c.repo_list().is_empty());
    drop(c);
    // The name is free again: a new repository, empty.
    let out = run(&["repo", "create", "--data", d, REPO]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut c = InProcessConnection::new(Service::open(&data).unwrap());
    let list = c.repo_list();
    assert_eq!(list.len(), 1);
    assert_ne!(list[0].id, id);
    assert_eq!(list[0].head, 0);
}

/// A deletion interrupted after its directory moved (the catalog still
/// names the repository) finishes when run again.
#[test]
fn an_interrupted_deletion_finishes_when_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = data.to_str().unwrap();
    let (id, _ws, _head) = root_with_history(&data);
    std::fs::create_dir_all(data.join("deleted")).unwrap();
    std::fs::rename(
        data.join("repos").join(id.to_hex()),
        data.join("deleted").join(format!("{}-1", id.to_hex())),
    )
    .unwrap();
    let out = run(&[
        "repo",
        "delete",
        "--data",
        d,
        REPO,
        "--yes",
        "--confirm",
        REPO,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("earlier run"),
        "{}",
        text(&out.stdout)
    );
    let mut c = InProcessConnection::new(Service::open(&data).unwrap());
    assert!(c.repo_list().is_empty());
    assert!(data
        .join("deleted")
        .join(format!("{}-1", id.to_hex()))
        .join("metadata.redb")
        .is_file());
}

/// A repository whose directory is missing with no copy aside is not
/// deleted (the catalog row is the only trace of where its data went).
#[test]
fn a_deletion_without_the_repository_directory_or_a_copy_aside_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = data.to_str().unwrap();
    let (id, _ws, _head) = root_with_history(&data);
    std::fs::rename(
        data.join("repos").join(id.to_hex()),
        dir.path().join("elsewhere"),
    )
    .unwrap();
    let out = run(&[
        "repo",
        "delete",
        "--data",
        d,
        REPO,
        "--yes",
        "--confirm",
        REPO,
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("holds no earlier copy"),
        "{}",
        text(&out.stderr)
    );
}

/// The S3 tier keeps the history of every repository in the bucket, and
/// a deletion gives it up there too (tests in `tier.rs`); without the
/// bucket named (`--tier`) it is refused, saying so, and nothing moves.
#[test]
fn a_deletion_on_a_data_root_with_tier_state_needs_the_bucket_named() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = data.to_str().unwrap();
    let (id, _ws, _head) = root_with_history(&data);
    std::fs::create_dir_all(data.join("tier")).unwrap();
    std::fs::write(data.join("tier").join("tier.redb"), b"").unwrap();
    let out = run(&[
        "repo",
        "delete",
        "--data",
        d,
        REPO,
        "--yes",
        "--confirm",
        REPO,
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("S3 tier state") && text(&out.stderr).contains("--tier s3://"),
        "{}",
        text(&out.stderr)
    );
    assert!(data
        .join("repos")
        .join(id.to_hex())
        .join("metadata.redb")
        .is_file());
}

/// While the data root is served, both refuse as every offline command
/// does (its LOCK), naming the process and the way on.
#[test]
fn rename_and_delete_refuse_while_the_data_root_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = data.to_str().unwrap();
    let (id, _ws, _head) = root_with_history(&data);
    let runtime = dir.path().join("run");
    let mut child = Command::new(env!("CARGO_BIN_EXE_scribe-server"))
        .args([
            "serve",
            "--data",
            d,
            "--listen",
            "127.0.0.1:0",
            "--runtime-dir",
        ])
        .arg(&runtime)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    while !std::fs::read_to_string(runtime.join("listen")).is_ok_and(|s| s.ends_with('\n')) {
        assert!(child.try_wait().unwrap().is_none(), "serve exited");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for args in [
        vec!["repo", "rename", "--data", d, REPO, "other"],
        vec![
            "repo",
            "delete",
            "--data",
            d,
            REPO,
            "--yes",
            "--confirm",
            REPO,
        ],
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = text(&out.stderr);
        assert!(
            err.contains("in use by PID") && err.contains("Hint: stop the server"),
            "{err}"
        );
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(data
        .join("repos")
        .join(id.to_hex())
        .join("metadata.redb")
        .is_file());
}

/// Put the name `name` back into repository `id`'s `SCRIBE_FORMAT`: what
/// a rename killed between its catalog transaction and its descriptor
/// rewrite leaves.
fn write_old_descriptor_name(data: &Path, id: scribe_format::RepositoryId, name: &str) {
    use scribe_metadata::database_descriptor as dd;
    let dir = data.join("repos").join(id.to_hex());
    let mut d = dd::read(&dir).unwrap();
    d.set("name", name).unwrap();
    dd::write(&d, &dir).unwrap();
}

fn descriptor_name(data: &Path, id: scribe_format::RepositoryId) -> String {
    let dir = data.join("repos").join(id.to_hex());
    let d = scribe_metadata::database_descriptor::read(&dir).unwrap();
    d.get("name").unwrap().to_owned()
}

/// A rename stopped after its catalog transaction leaves the old name in
/// the repository's descriptor: the next `repo` command (even one then
/// refused) and the next `serve` rewrite it to the catalog's name and say
/// so. It stayed until the next rename.
#[test]
fn a_rename_stopped_before_its_descriptor_rewrite_is_finished_at_the_next_open() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = data.to_str().unwrap();
    let (id, _ws, _head) = root_with_history(&data);
    let out = run(&["repo", "rename", "--data", d, REPO, "game-2026"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(descriptor_name(&data, id), "game-2026");

    // The next repo command, here one that is refused.
    write_old_descriptor_name(&data, id, REPO);
    let out = run(&["repo", "rename", "--data", d, "nope", "x"]);
    assert_eq!(out.status.code(), Some(1));
    let said = text(&out.stderr);
    assert!(
        said.contains(&format!("repository \"game-2026\" (id {id}): its ")),
        "{said}"
    );
    assert!(
        said.contains(&format!("still named it \"{REPO}\" (a rename stopped")),
        "{said}"
    );
    assert_eq!(descriptor_name(&data, id), "game-2026");
    // Once right, nothing more is said.
    let out = run(&["repo", "create", "--data", d, "other"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        !text(&out.stderr).contains("still named"),
        "{}",
        text(&out.stderr)
    );

    // The next serve.
    write_old_descriptor_name(&data, id, REPO);
    let log = dir.path().join("serve.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_scribe-server"))
        .args(["serve", "--data", d, "--listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    let said = loop {
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        if said.contains("serving") {
            break said;
        }
        assert!(child.try_wait().unwrap().is_none(), "serve stopped: {said}");
        assert!(start.elapsed().as_secs() < 60, "{said}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        said.contains(&format!("still named it \"{REPO}\"")),
        "{said}"
    );
    assert_eq!(descriptor_name(&data, id), "game-2026");
}

/// A renamed repository's old name is remembered (`<data>/former-names`):
/// `repo create OLD` and `repo rename X OLD` (and a client's create over
/// the wire) are refused by name, naming the repository that had it and
/// `--reuse-name`; the repository itself may take its old name back; with
/// `--reuse-name` the name is given back. Any create used to take it.
#[test]
fn a_renamed_repositorys_old_name_is_not_reused_without_reuse_name() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = data.to_str().unwrap();
    let (id, _ws, _head) = root_with_history(&data);
    let out = run(&["repo", "rename", "--data", d, REPO, "game-2026"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(run(&["repo", "create", "--data", d, "other"])
        .status
        .success());
    let says = format!(
        "repository name \"{REPO}\" was repository {id}'s until a rename (now named \"game-2026\")"
    );
    for args in [
        vec!["repo", "create", "--data", d, REPO],
        vec!["repo", "rename", "--data", d, "other", REPO],
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let said = text(&out.stderr);
        assert!(said.contains(&says), "{args:?}: {said}");
        assert!(said.contains("--reuse-name"), "{args:?}: {said}");
    }
    {
        let svc = Service::open(&data).unwrap();
        let e = scribe_server::service::dispatch::repo_create(&svc, REPO).unwrap_err();
        assert_eq!(e.code, scribe_format::ErrorCode::AlreadyExists);
        assert!(e.message.contains(&says), "{}", e.message);
    }
    // The repository takes its own old name back, and gives it up again.
    let out = run(&["repo", "rename", "--data", d, "game-2026", REPO]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run(&["repo", "rename", "--data", d, REPO, "game-2026"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!run(&["repo", "create", "--data", d, REPO]).status.success());
    // Given back on purpose.
    let out = run(&["repo", "create", "--data", d, REPO, "--reuse-name"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut c = InProcessConnection::new(Service::open(&data).unwrap());
    let list = c.repo_list();
    let new = list.iter().find(|r| r.name == REPO).unwrap();
    assert_ne!(new.id, id);
    assert_eq!(list.iter().find(|r| r.name == "game-2026").unwrap().id, id);
}

/// `repo retire` and `repo unretire` (offline) by the real binary: an
/// unknown repository and a whom-to-ask with control characters are
/// refused; the state is kept by id in `<data>/retired-repositories`
/// (a rename keeps it), and a damaged file stops the opening by name
/// rather than letting writes in.
#[test]
fn retire_and_unretire_keep_the_state_by_id_and_refuse_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = data.to_str().unwrap();
    let (id, ws, _head) = root_with_history(&data);
    let out = run(&["repo", "retire", "--data", d, "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no repository"),
        "{}",
        text(&out.stderr)
    );
    let out = run(&[
        "repo",
        "retire",
        "--data",
        d,
        REPO,
        "--contact",
        "a\u{1b}[2Jb",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("--contact must be one line"),
        "{}",
        text(&out.stderr)
    );
    let out = run(&[
        "repo",
        "retire",
        "--data",
        d,
        REPO,
        "--contact",
        "ops@studio",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("retired repository"),
        "{}",
        text(&out.stdout)
    );
    let out = run(&["repo", "rename", "--data", d, REPO, "archive-2025"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // Served in-process: a write is refused, a read answers.
    {
        let mut c = InProcessConnection::new(Service::open(&data).unwrap());
        let branch = c.repo_list()[0].main_branch;
        match c
            .call(Request::LockAcquire(m::LockAcquire {
                repo: "archive-2025".into(),
                workspace: ws,
                branch,
                author: "ann".into(),
                paths: vec!["art/a.txt".into()],
            }))
            .unwrap()
        {
            Response::Error(e) => {
                assert_eq!(e.code, scribe_format::ErrorCode::RepositoryRetired.number());
                assert!(e.message.contains("ask ops@studio"), "{}", e.message);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            workspaces(&mut c, "archive-2025"),
            Response::WorkspaceList(_)
        ));
    }
    let out = run(&["repo", "unretire", "--data", d, "archive-2025"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("writable again"),
        "{}",
        text(&out.stdout)
    );
    assert!(!data.join("retired-repositories").exists());
    // A damaged file is named, never read as "nothing retired".
    std::fs::write(
        data.join("retired-repositories"),
        format!("scribe-retired-repositories 1\n{} soon\n", id.to_hex()),
    )
    .unwrap();
    let out = run(&["repo", "create", "--data", d, "x"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("retired-repositories line 2: not a time"),
        "{}",
        text(&out.stderr)
    );
}

/// A retirement is the repository's state: `repo delete` takes it away
/// with the repository (it lingered in `<data>/retired-repositories`,
/// naming an id no catalog row holds, and went on into backups and the
/// bucket); another repository's retirement stays.
#[test]
fn a_deleted_repository_takes_its_retirement_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let d = data.to_str().unwrap();
    let (id, _ws, _head) = root_with_history(&data);
    let out = run(&["repo", "create", "--data", d, "kept"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for name in [REPO, "kept"] {
        let out = run(&["repo", "retire", "--data", d, name, "--contact", "ops"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let out = run(&[
        "repo",
        "delete",
        "--data",
        d,
        REPO,
        "--yes",
        "--confirm",
        REPO,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let retired = std::fs::read_to_string(data.join("retired-repositories")).unwrap();
    assert!(
        !retired.contains(&id.to_hex()),
        "the deleted repository's retirement lingers: {retired}"
    );
    assert_eq!(retired.lines().count(), 2, "the other one stays: {retired}");
}

//! A store poisoned before acceptance checked manifests (issue #14 item
//! 4): `doctor` and `verify` name every bad file revision as `path@change`.

use std::process::{Command, Output};

use scribe_format::changeset::Entry;
use scribe_format::{FileContentId, ObjectKind};
use scribe_server::Service;
use scribe_testkit::change::file;
use scribe_testkit::poison::accept_unchecked;
use scribe_testkit::REPO;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scribe-server"))
        .args(args)
        .output()
        .expect("run scribe-server")
}

#[test]
fn doctor_and_verify_name_accepted_files_whose_manifests_lie() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let svc = Service::create(&data).unwrap();
    scribe_server::service::dispatch::repo_create(&svc, REPO).unwrap();
    drop(svc);
    let d = data.to_str().unwrap();
    // A clean store first: both clean.
    let good = file(b"good");
    accept_unchecked(
        &data,
        REPO,
        &good.objects,
        vec![Entry::add("good.txt", good.state)],
    );
    for cmd in ["doctor", "verify"] {
        let out = run(&[cmd, "--data", d]);
        assert!(out.status.success(), "{cmd}: {out:?}");
    }

    // Change 2: a content id lie, a chunk never stored, bytes that are not
    // a manifest.
    let mut lie = file(b"lie");
    lie.state.content = FileContentId::of(b"something else");
    let absent = file(b"absent");
    let absent_manifest: Vec<_> = absent
        .objects
        .iter()
        .filter(|(id, _)| id.kind == ObjectKind::Manifest)
        .cloned()
        .collect();
    let junk = b"not a manifest at all".to_vec();
    let mut junk_state = file(b"junk").state;
    junk_state.manifest = scribe_format::ManifestId::of_payload(&junk);
    let mut objects = lie.objects.clone();
    objects.extend(absent_manifest);
    objects.push((scribe_format::ObjectId::manifest(junk_state.manifest), junk));
    let change = accept_unchecked(
        &data,
        REPO,
        &objects,
        vec![
            Entry::add("lie.txt", lie.state),
            Entry::add("absent.txt", absent.state),
            Entry::add("junk.txt", junk_state),
        ],
    );
    assert_eq!(change, 2);
    for cmd in ["doctor", "verify"] {
        let out = run(&[cmd, "--data", d]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{cmd}: {stdout}");
        for (name, rev) in [
            ("manifests.invalid", "lie.txt@2"),
            ("manifests.objects-missing", "absent.txt@2"),
            ("manifests.invalid", "junk.txt@2"),
        ] {
            assert!(
                stdout.lines().any(|l| l.contains(name) && l.contains(rev)),
                "{cmd} does not name {rev} ({name}):\n{stdout}"
            );
        }
        assert!(!stdout.contains("good.txt@"), "{stdout}");
    }
}

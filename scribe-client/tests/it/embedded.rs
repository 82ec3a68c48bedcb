//! The path transport: the service runs in-process over a data root and
//! holds its LOCK for the client's life.

use scribe_client::url::ServerUrl;
use scribe_client::{connect, ClientError, ClientOptions};
use scribe_format::{ErrorCode, OperationId, WorkspaceId};
use scribe_server::{OpenError, Service};

use super::support::*;

#[test]
fn urls_parse_to_their_transport() {
    assert_eq!(
        ServerUrl::parse("scribe://127.0.0.1:4000").unwrap(),
        ServerUrl::Tcp {
            host: "127.0.0.1".into(),
            port: 4000,
            tls: false
        }
    );
    assert_eq!(
        ServerUrl::parse("scribes://example.invalid:443/").unwrap(),
        ServerUrl::Tcp {
            host: "example.invalid".into(),
            port: 443,
            tls: true
        }
    );
    assert_eq!(
        ServerUrl::parse("scribe://[::1]:9").unwrap(),
        ServerUrl::Tcp {
            host: "::1".into(),
            port: 9,
            tls: false
        }
    );
    assert_eq!(
        ServerUrl::parse("file:///srv/data").unwrap(),
        ServerUrl::Path("/srv/data".into())
    );
    assert_eq!(
        ServerUrl::parse("relative/data").unwrap(),
        ServerUrl::Path("relative/data".into())
    );
    for bad in [
        "http://x:1",
        "scribe://x",
        "scribe://:80",
        "scribe://h:port",
        "file://rel",
        "",
    ] {
        assert!(ServerUrl::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn a_path_url_serves_in_process_and_holds_the_lock() {
    let env = Env::builder(Transport::Path).repo(None).start();
    let data = env.data();
    let url = format!("file://{}", data.display());
    let mut c = connect(&url, &ClientOptions::default()).unwrap();
    assert!(c.is_in_process());
    c.repo_create(REPO).unwrap();
    let ws = WorkspaceId([1; 16]);
    register(&mut c, ws);
    accepted(&upload_and_submit(
        &mut c,
        ws,
        OperationId([1; 16]),
        &change(&[("a", Some(b"a"), 0)]),
        "m",
    ));
    // A second owner is refused with the PID, never let in.
    match connect(data.to_str().unwrap(), &ClientOptions::default()) {
        Err(ClientError::Open(OpenError::InUse { pid, .. })) => {
            assert_eq!(pid, Some(std::process::id()))
        }
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("a second owner was let in"),
    }
    let e = connect(data.to_str().unwrap(), &ClientOptions::default())
        .err()
        .unwrap();
    assert_eq!(e.code(), ErrorCode::Busy);
    assert!(e.to_string().contains("in use by PID"), "{e}");
    drop(c);
    // Released with the client: the data is all there.
    let mut c = connect(data.to_str().unwrap(), &ClientOptions::default()).unwrap();
    assert_eq!(c.repo_list().unwrap()[0].head, 1);
}

#[test]
fn a_missing_data_root_is_a_readable_error() {
    let dir = tempfile::tempdir().unwrap();
    let e = connect(
        dir.path().join("nothing").to_str().unwrap(),
        &ClientOptions::default(),
    )
    .err()
    .unwrap();
    assert!(matches!(e, ClientError::Open(_)), "{e:?}");
}

#[test]
fn an_interrupted_object_store_creation_is_redone_at_open() {
    let env = Env::new(Transport::Path);
    let data = env.data();
    let id = Service::open(data)
        .unwrap()
        .root()
        .repository_id(REPO)
        .unwrap();
    // As if creation stopped before the store's descriptor was written.
    let objects = data.join("repos").join(id.to_hex()).join("objects");
    std::fs::remove_file(objects.join("SCRIBE_FORMAT")).unwrap();
    assert!(objects.join("locator.redb").exists());
    let mut c = connect(data.to_str().unwrap(), &ClientOptions::default()).unwrap();
    let ws = WorkspaceId([1; 16]);
    register(&mut c, ws);
    accepted(&upload_and_submit(
        &mut c,
        ws,
        OperationId([1; 16]),
        &change(&[("a", Some(b"a"), 0)]),
        "m",
    ));
    assert!(objects.join("SCRIBE_FORMAT").exists());
}

#[test]
fn compaction_keeps_accepted_and_actively_pinned_objects_only() {
    let env = Env::new(Transport::Path);
    let data = env.data();
    let accepted_ch = change(&[("kept.txt", Some(b"kept"), 0)]);
    let pinned = file(b"pinned upload in progress");
    let dropped = file(b"upload of a retired workspace");
    {
        let mut c = env.client();
        let (a, b, r) = (
            WorkspaceId([1; 16]),
            WorkspaceId([2; 16]),
            WorkspaceId([3; 16]),
        );
        for ws in [a, b, r] {
            register(&mut c, ws);
        }
        accepted(&upload_and_submit(
            &mut c,
            a,
            OperationId([1; 16]),
            &accepted_ch,
            "kept",
        ));
        let send = |c: &mut scribe_client::Client, ws, op, f: &File| {
            c.upload_missing(
                REPO,
                ws,
                op,
                f.objects.iter().map(|(id, b)| (*id, b.as_slice())),
            )
            .unwrap();
        };
        send(&mut c, b, OperationId([2; 16]), &pinned);
        send(&mut c, r, OperationId([3; 16]), &dropped);
        c.workspace_retire(REPO, r).unwrap();
    }
    let report = scribe_server::admin::compact_objects(data, None, &Default::default()).unwrap();
    assert!(report.is_clean());
    let mut c = connect(data.to_str().unwrap(), &ClientOptions::default()).unwrap();
    let ids = |objs: &[(scribe_format::ObjectId, Vec<u8>)]| {
        objs.iter().map(|(id, _)| *id).collect::<Vec<_>>()
    };
    assert!(c
        .objects_missing(REPO, &ids(&accepted_ch.objects))
        .unwrap()
        .is_empty());
    assert!(c
        .objects_missing(REPO, &ids(&pinned.objects))
        .unwrap()
        .is_empty());
    assert_eq!(
        c.objects_missing(REPO, &ids(&dropped.objects)).unwrap(),
        ids(&dropped.objects)
    );
    drop(c);
    assert!(scribe_server::admin::doctor(data, Some(REPO))
        .unwrap()
        .is_clean());
}

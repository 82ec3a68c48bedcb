//! The path transport: the service runs in-process over a data root and
//! holds its LOCK for the client's life.

use scribe_format::{ErrorCode, OperationId, WorkspaceId};
use scribe_server::client::{parse_url, Target};
use scribe_server::{connect, ClientError, ClientOptions, OpenError, Service};

use super::support::*;

#[test]
fn urls_parse_to_their_transport() {
    assert_eq!(
        parse_url("scribe://127.0.0.1:4000").unwrap(),
        Target::Tcp {
            host: "127.0.0.1".into(),
            port: 4000,
            tls: false
        }
    );
    assert_eq!(
        parse_url("scribes://example.invalid:443/").unwrap(),
        Target::Tcp {
            host: "example.invalid".into(),
            port: 443,
            tls: true
        }
    );
    assert_eq!(
        parse_url("scribe://[::1]:9").unwrap(),
        Target::Tcp {
            host: "::1".into(),
            port: 9,
            tls: false
        }
    );
    assert_eq!(
        parse_url("file:///srv/data").unwrap(),
        Target::Path("/srv/data".into())
    );
    assert_eq!(
        parse_url("relative/data").unwrap(),
        Target::Path("relative/data".into())
    );
    for bad in [
        "http://x:1",
        "scribe://x",
        "scribe://:80",
        "scribe://h:port",
        "file://rel",
        "",
    ] {
        assert!(parse_url(bad).is_err(), "{bad}");
    }
}

#[test]
fn a_path_url_serves_in_process_and_holds_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    drop(Service::create(&data).unwrap());
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

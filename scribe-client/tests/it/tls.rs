//! TLS on the listener and in the client (`scribes://`).

use scribe_client::{connect, ClientOptions};

use super::support::{Env, Transport};

#[test]
fn scribes_urls_speak_tls_to_a_trusted_server() {
    let env = Env::builder(Transport::Tls).repo(None).start();
    let port = env.addr().port();
    let opts = ClientOptions {
        ca_file: Some(env.ca_file()),
        lz4: true,
        ..Default::default()
    };
    for host in ["127.0.0.1", "localhost"] {
        let mut c = connect(&format!("scribes://{host}:{port}"), &opts).unwrap();
        c.repo_create(&format!("r-{host}")).unwrap();
        assert!(c.status().unwrap().repositories >= 1);
    }
    // Without a CA file, scribes:// is refused before connecting.
    let e = connect(
        &format!("scribes://127.0.0.1:{port}"),
        &ClientOptions::default(),
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("CA"), "{e}");
    // An untrusted CA fails the TLS handshake.
    let other = ClientOptions {
        ca_file: Some(env.pki().path("other-ca.pem")),
        ..Default::default()
    };
    assert!(connect(&format!("scribes://127.0.0.1:{port}"), &other).is_err());
    // A plain-TCP client cannot talk to the TLS listener, and the server stays up.
    assert!(connect(
        &format!("scribe://127.0.0.1:{port}"),
        &ClientOptions {
            timeout: std::time::Duration::from_secs(5),
            ..Default::default()
        }
    )
    .is_err());
    let mut c = connect(&format!("scribes://127.0.0.1:{port}"), &opts).unwrap();
    assert_eq!(c.repo_list().unwrap().len(), 2);
}

#[test]
fn bad_pem_files_are_readable_errors() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("empty.pem"), "").unwrap();
    let e = scribe_server::tls::server_config(
        &dir.path().join("empty.pem"),
        &dir.path().join("empty.pem"),
    )
    .unwrap_err();
    assert!(e.to_string().contains("no certificate"), "{e}");
    let e = scribe_client::tls::client_config(&dir.path().join("absent.pem")).unwrap_err();
    assert!(e.to_string().contains("absent.pem"), "{e}");
}

/// Small objects in one `ObjectPutMany` over TLS without LZ4 frames: the
/// client writes the frame in thousands of parts (each object's head,
/// then its data from its own buffer), which must reach the server as the
/// one request it is: every object stored with its bytes, and the
/// connection still in step for the next request.
#[test]
fn many_small_objects_in_one_frame_over_tls() {
    use super::support::{noise, register, Clients, REPO};
    use scribe_format::wire::{message as m, Bytes};
    use scribe_format::{ChunkId, ObjectId, OperationId, WorkspaceId};

    let env = Env::builder(Transport::Tls).start();
    let mut c = env.client_with(&ClientOptions {
        lz4: false,
        ..Default::default()
    });
    let ws = WorkspaceId([1; 16]);
    register(&mut c, ws);
    let objects: Vec<(ObjectId, Vec<u8>)> = (0..2_000u64)
        .map(|i| {
            let data = noise(1 + (i as usize * 37) % 1_500, i);
            (ObjectId::chunk(ChunkId::of(&data)), data)
        })
        .collect();
    c.object_put_many(m::ObjectPutMany {
        repo: REPO.into(),
        operation: OperationId([2; 16]),
        workspace: ws,
        objects: objects
            .iter()
            .map(|(id, d)| m::ObjectPiece {
                id: *id,
                data: Bytes(d.clone()),
            })
            .collect(),
    })
    .unwrap();
    let ids: Vec<ObjectId> = objects.iter().map(|(id, _)| *id).collect();
    assert!(c.objects_missing(REPO, &ids).unwrap().is_empty());
    for (id, data) in objects.iter().step_by(97) {
        assert_eq!(&c.download(REPO, *id).unwrap(), data);
    }
}

//! The provider boundary against a real S3 server (radosgw).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use nokv_bridge::tier::{BlockKey, Deleted, Provider, ProviderError, Put, S3Config, S3Provider};

use super::proxy::{Fault, Proxy};
use super::rgw::{config, config_via};

fn key(index: u64) -> String {
    BlockKey::new(7, [0x11; 16], [0x22; 16], index).to_key()
}

fn data(len: usize, seed: u8) -> Bytes {
    Bytes::from(
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect::<Vec<u8>>(),
    )
}

#[test]
fn a_block_is_created_once_read_by_range_and_headed() {
    let p = S3Provider::new(&config()).unwrap();
    let k = key(1);
    assert!(p.head(&k).unwrap().is_none());
    let body = data(300_000, 1);
    assert_eq!(p.put_if_absent(&k, body.clone()).unwrap(), Put::Created);
    let h = p.head(&k).unwrap().expect("present");
    assert_eq!(h.len, body.len() as u64);
    assert_eq!(p.get(&k).unwrap(), body);
    assert_eq!(
        p.get_range(&k, 1_000..70_000).unwrap(),
        body.slice(1_000..70_000)
    );
    assert_eq!(p.get_range(&k, 5..5).unwrap().len(), 0);
}

#[test]
fn the_same_bytes_again_are_already_present_and_other_bytes_are_refused() {
    let p = S3Provider::new(&config()).unwrap();
    let k = key(2);
    let body = data(10_000, 2);
    assert_eq!(p.put_if_absent(&k, body.clone()).unwrap(), Put::Created);
    assert_eq!(
        p.put_if_absent(&k, body.clone()).unwrap(),
        Put::AlreadyPresent
    );
    // Other bytes of the same length, and of another length.
    for other in [data(10_000, 3), data(9_999, 2)] {
        match p.put_if_absent(&k, other) {
            Err(ProviderError::Conflict { key }) => assert!(key.contains("blocks/")),
            r => panic!("a key holding other bytes was not refused: {r:?}"),
        }
    }
    assert_eq!(p.get(&k).unwrap(), body, "the first bytes are intact");
}

#[test]
fn concurrent_writers_of_one_key_leave_exactly_one_winner() {
    let p = Arc::new(S3Provider::new(&config()).unwrap());
    let k = key(3);
    let writers: Vec<_> = (0..12u8)
        .map(|i| {
            let (p, k) = (p.clone(), k.clone());
            std::thread::spawn(move || {
                let body = data(50_000, 100 + i);
                (body.clone(), p.put_if_absent(&k, body))
            })
        })
        .collect();
    let results: Vec<_> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    let created: Vec<&Bytes> = results
        .iter()
        .filter(|(_, r)| matches!(r, Ok(Put::Created)))
        .map(|(b, _)| b)
        .collect();
    assert_eq!(
        created.len(),
        1,
        "{:?}",
        results.iter().map(|r| &r.1).collect::<Vec<_>>()
    );
    for (_, r) in &results {
        assert!(
            matches!(r, Ok(Put::Created) | Err(ProviderError::Conflict { .. })),
            "{r:?}"
        );
    }
    assert_eq!(&p.get(&k).unwrap(), created[0]);
}

#[test]
fn delete_is_idempotent_and_a_deleted_key_is_not_found() {
    let p = S3Provider::new(&config()).unwrap();
    let k = key(4);
    p.put_if_absent(&k, data(100, 4)).unwrap();
    assert!(matches!(p.delete(&k), Deleted::Gone));
    assert!(p.head(&k).unwrap().is_none());
    assert!(matches!(p.delete(&k), Deleted::Gone));
    assert!(matches!(p.get(&k), Err(ProviderError::NotFound { .. })));
    assert!(matches!(
        p.get_range(&k, 0..10),
        Err(ProviderError::NotFound { .. })
    ));
}

#[test]
fn a_range_past_the_end_is_an_error_not_fewer_bytes() {
    let p = S3Provider::new(&config()).unwrap();
    let k = key(5);
    p.put_if_absent(&k, data(100, 5)).unwrap();
    match p.get_range(&k, 50..200) {
        Err(ProviderError::ShortRead { got, .. }) => assert_eq!(got, 50),
        Err(e) => assert!(!matches!(e, ProviderError::NotFound { .. }), "{e}"),
        Ok(b) => panic!("{} bytes returned for a range past the end", b.len()),
    }
}

#[test]
fn wrong_credentials_are_refused_not_retried_forever() {
    let mut cfg = config();
    cfg.secret_key = Some("not-the-secret".into());
    let p = S3Provider::new(&cfg).unwrap();
    let e = p.put_if_absent(&key(6), data(10, 6)).unwrap_err();
    assert!(matches!(e, ProviderError::Refused { .. }), "{e:?}");
    assert!(!e.is_retryable());
}

#[test]
fn an_unreachable_store_is_unavailable_and_a_delete_there_is_ambiguous() {
    // A port nothing listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut cfg = config_via(&format!("http://127.0.0.1:{port}"));
    cfg.retries = 1;
    let p = S3Provider::new(&cfg).unwrap();
    let e = p.put_if_absent(&key(7), data(10, 7)).unwrap_err();
    assert!(e.is_retryable(), "{e:?}");
    assert!(e.to_string().contains("unavailable"), "{e}");
    assert!(matches!(p.delete(&key(7)), Deleted::Ambiguous(_)));
}

#[test]
fn a_silent_store_times_out_as_unavailable() {
    let proxy = Proxy::start(&super::rgw::rgw().endpoint);
    proxy.plan(&[Fault::Silent, Fault::Silent]);
    let mut cfg = config_via(&proxy.endpoint);
    cfg.timeout = Duration::from_secs(1);
    cfg.retries = 1;
    let p = S3Provider::new(&cfg).unwrap();
    let e = p.head(&key(8)).unwrap_err();
    assert!(e.is_retryable(), "{e:?}");
    assert_eq!(proxy.faulted.load(std::sync::atomic::Ordering::SeqCst), 2);
}

#[test]
fn resets_and_503s_mid_upload_are_retried_to_one_stored_block() {
    let proxy = Proxy::start(&super::rgw::rgw().endpoint);
    let cfg = config_via(&proxy.endpoint);
    let p = S3Provider::new(&cfg).unwrap();
    let k = key(9);
    let body = data(2 << 20, 9);
    // The first connection is cut 64 KiB into the upload, the second is
    // answered 503; the third goes through.
    proxy.plan(&[Fault::ResetAfter(64 << 10), Fault::ServiceUnavailable]);
    let r = p.put_if_absent(&k, body.clone()).unwrap();
    assert!(matches!(r, Put::Created | Put::AlreadyPresent), "{r:?}");
    assert_eq!(proxy.faulted.load(std::sync::atomic::Ordering::SeqCst), 2);
    // Read through the real server: exactly the bytes, once.
    let direct = S3Provider::new(&super::rgw::config_like(&cfg)).unwrap();
    assert_eq!(direct.get(&k).unwrap(), body);
}

/// `delete_many` deletes many keys in one `DeleteObjects` request, absent
/// keys included, each `Gone`; a request the store never answers leaves
/// every key `Ambiguous` and in place (never `Gone`), and the same call
/// again finishes.
#[test]
fn delete_many_is_one_request_and_an_unanswered_one_leaves_every_key_ambiguous() {
    let cfg = config();
    let direct = S3Provider::new(&cfg).unwrap();
    let keys: Vec<String> = (100..140).map(key).collect();
    for (i, k) in keys.iter().enumerate().skip(2) {
        direct.put_if_absent(k, data(50, i as u8)).unwrap();
    }
    let proxy = Proxy::start(&super::rgw::rgw().endpoint);
    let held = S3Provider::new(&S3Config {
        endpoint: Some(proxy.endpoint.clone()),
        timeout: Duration::from_secs(2),
        retries: 0,
        ..cfg
    })
    .unwrap();
    // The first delete request is held unanswered: with the keys sent one
    // request each, the others would be deleted on new connections.
    proxy.plan(&[Fault::SilentAtDelete]);
    let r = held.delete_many(&keys);
    assert_eq!(r.len(), keys.len());
    assert!(
        r.iter().all(|d| matches!(d, Deleted::Ambiguous(_))),
        "{r:?}"
    );
    assert_eq!(proxy.faulted.load(std::sync::atomic::Ordering::SeqCst), 1);
    for k in &keys[2..] {
        assert!(direct.head(k).unwrap().is_some(), "{k} went");
    }
    let r = held.delete_many(&keys);
    assert!(r.iter().all(|d| matches!(d, Deleted::Gone)), "{r:?}");
    for k in &keys {
        assert!(direct.head(k).unwrap().is_none(), "{k} is left");
    }
}

//! The tier against the S3 server's own limits, measured in one run:
//!
//! 1. the server's PUT rate: 16 MiB objects, 8 requests in flight,
//!    straight through the provider (create-if-absent, as the tier puts);
//!    and of 4 MiB objects (the block size step 2 uploads);
//! 2. `Tier::publish_change` of the same number of bytes as 4 MiB chunks
//!    (8 blocks in flight; a `Created` answer is the verification, no
//!    `head`), then its index record;
//! 3. the server's GET rate (8 in flight) and `Tier::read_object` of every
//!    chunk (each checked against its id), 8 threads.
//!
//! ```sh
//! SCRIBE_TEST_S3_ENDPOINT=http://127.0.0.1:7480 \
//!   cargo bench -p nokv-bridge --bench tier [-- MIB]
//! ```
//!
//! MIB (default 1024) is the size of the change. The radosgw of
//! `.ci/start-rgw.sh` keeps objects in memory (4 GiB), so keep it under
//! about 1.5 GiB. Figures go to `docs/performance.md`.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use nokv_bridge::tier::{Provider, S3Config, S3Provider, Tier, TierOptions};
use scribe_format::{ChunkId, ObjectId};

#[path = "../../scribe-client/testkit/src/rgw.rs"]
mod server;

fn config(prefix: &str) -> S3Config {
    let r = server::rgw();
    S3Config {
        bucket: r.bucket.clone(),
        prefix: prefix.to_string(),
        endpoint: Some(r.endpoint.clone()),
        region: "us-east-1".into(),
        access_key: Some(r.access_key.clone()),
        secret_key: Some(r.secret_key.clone()),
        timeout: std::time::Duration::from_secs(60),
        connect_timeout: std::time::Duration::from_secs(5),
        retries: 3,
    }
}

fn random(len: usize, seed: u64) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ seed;
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    v
}

fn parallel<T: Send>(n: usize, items: Vec<T>, f: impl Fn(T) + Sync) {
    let queue = std::sync::Mutex::new(items);
    std::thread::scope(|s| {
        for _ in 0..n {
            s.spawn(|| loop {
                let Some(item) = queue.lock().unwrap().pop() else {
                    return;
                };
                f(item);
            });
        }
    });
}

fn rate(bytes: u64, secs: f64) -> String {
    format!(
        "{:.0} MiB/s ({secs:.2} s)",
        bytes as f64 / (1 << 20) as f64 / secs
    )
}

fn main() {
    let mib: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1024);
    let total = mib << 20;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    println!("tier bench: {mib} MiB, endpoint {}", server::rgw().endpoint);

    // 1. Raw PUT / GET of 16 MiB objects, 8 in flight.
    let raw = S3Provider::new(&config(&format!("bench/{stamp}/raw"))).unwrap();
    let block = Bytes::from(random(16 << 20, 1));
    let keys: Vec<String> = (0..total / (16 << 20))
        .map(|i| format!("raw/{i:08}"))
        .collect();
    let t = Instant::now();
    parallel(8, keys.clone(), |k| {
        raw.put_if_absent(&k, block.clone()).unwrap();
    });
    let put = t.elapsed().as_secs_f64();
    let t = Instant::now();
    parallel(8, keys.clone(), |k| {
        assert_eq!(raw.get(&k).unwrap().len(), 16 << 20);
    });
    let get = t.elapsed().as_secs_f64();
    println!("S3 PUT, 16 MiB x 8 in flight: {}", rate(total, put));
    println!("S3 GET, 16 MiB x 8 in flight: {}", rate(total, get));
    let small = Bytes::from(random(4 << 20, 2));
    let keys4: Vec<String> = (0..total / (4 << 20))
        .map(|i| format!("raw4/{i:08}"))
        .collect();
    let t = Instant::now();
    parallel(8, keys4.clone(), |k| {
        raw.put_if_absent(&k, small.clone()).unwrap();
    });
    let put4 = t.elapsed().as_secs_f64();
    println!("S3 PUT, 4 MiB x 8 in flight: {}", rate(total, put4));

    // 2. One change of 4 MiB chunks published as a revision.
    let dir = tempfile::tempdir().unwrap();
    let provider: Arc<dyn Provider> =
        Arc::new(S3Provider::new(&config(&format!("bench/{stamp}/tier"))).unwrap());
    let tier = Tier::open(
        &dir.path().join("tier.redb"),
        1,
        provider,
        TierOptions::default(),
    )
    .unwrap();
    let chunks: Vec<(ObjectId, Vec<u8>)> = (0..total / (4 << 20))
        .map(|i| {
            let d = random(4 << 20, 1000 + i);
            (ObjectId::chunk(ChunkId::of(&d)), d)
        })
        .collect();
    let ids: Vec<ObjectId> = chunks.iter().map(|c| c.0).collect();
    let map: std::collections::HashMap<ObjectId, &Vec<u8>> =
        chunks.iter().map(|(i, d)| (*i, d)).collect();
    let root = [7u8; 16];
    let t = Instant::now();
    let p = tier
        .publish_change(&root, 1, &ids, &|id| Ok(map[id].clone()))
        .unwrap();
    let publish = t.elapsed().as_secs_f64();
    println!(
        "Tier::publish_change, {} blocks: {} = {:.0} % of the 16 MiB PUT rate, {:.0} % of the 4 MiB PUT rate",
        p.blocks,
        rate(total, publish),
        100.0 * put / publish,
        100.0 * put4 / publish
    );
    let t = Instant::now();
    parallel(8, ids.clone(), |id| {
        assert_eq!(
            tier.read_object(&root, &id).unwrap().unwrap().len(),
            4 << 20
        );
    });
    let read = t.elapsed().as_secs_f64();
    println!(
        "Tier::read_object, 8 threads: {} = {:.0} % of the GET rate",
        rate(total, read),
        100.0 * get / read
    );
    // Leave the bucket as it was.
    parallel(8, keys.into_iter().chain(keys4).collect(), |k| {
        let _ = raw.delete(&k);
    });
    tier.release_change(&root, 1).unwrap();
    let c = tier.collect().unwrap();
    println!("cleanup: {} blocks deleted", c.blocks_deleted);
}

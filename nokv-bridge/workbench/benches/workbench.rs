//! Workbench latencies over a real data root, embedded (in-process) and
//! over TCP on 127.0.0.1: stat, 4 KiB read, 4 KiB put_file, a list page of
//! 100, and restore of a 10,000-file workbench. Prints p50/p99 per
//! operation; docs/performance.md records the figures.
//!
//! Run: `cargo bench -p nokv-workbench --bench workbench` (or with
//! `--profile test` to reuse the test build's optimized dependencies).

use std::time::{Duration, Instant};

use nokv_workbench::path::Section;
use nokv_workbench::scribe::ScribeStore;
use nokv_workbench::workbench::sandbox::{LocalFile, LocalSource};
use nokv_workbench::Workbench;
use scribe_client::{Client, ClientOptions};
use scribe_testkit::env::{Env, Transport, REPO};
use serde_json::json;

fn open(env: &Env) -> Workbench<ScribeStore> {
    let client = match env.transport() {
        Transport::InProcess => Client::in_process(env.service().clone()),
        _ => scribe_client::connect(env.url(), &ClientOptions::default()).unwrap(),
    };
    Workbench::new(ScribeStore::over(client, REPO, "bench").unwrap(), "bench")
}

fn pct(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    (v[v.len() / 2], v[(v.len() * 99 / 100).min(v.len() - 1)])
}

fn run(label: &str, n: usize, mut f: impl FnMut(usize)) {
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        f(i);
        times.push(t.elapsed());
    }
    let (p50, p99) = pct(times);
    println!("{label:<34} n={n:<5} p50={:>9.1?} p99={:>9.1?}", p50, p99);
}

fn main() {
    for transport in [Transport::InProcess, Transport::Tcp] {
        let env = Env::new(transport);
        let mut wb = open(&env);
        println!("== {transport:?}");
        wb.call("workbench_create", &json!({"id": "b"})).unwrap();
        let body = "x".repeat(4096);
        run("put_file 4 KiB (create)", 200, |i| {
            wb.call("workbench_put_file", &json!({"id": "b", "section": "outputs", "path": format!("p/f{i}.txt"), "text": body})).unwrap();
        });
        run("stat", 500, |i| {
            wb.call(
                "workbench_stat",
                &json!({"id": "b", "section": "outputs", "path": format!("p/f{}.txt", i % 200)}),
            )
            .unwrap();
        });
        run("read 4 KiB (bytes)", 500, |i| {
            wb.call("workbench_read", &json!({"id": "b", "section": "outputs", "path": format!("p/f{}.txt", i % 200), "format": "bytes", "limit": 4})).unwrap();
        });
        run("list page of 100", 100, |_| {
            let r = wb
                .call(
                    "workbench_list",
                    &json!({"id": "b", "section": "outputs", "path": "p", "limit": 100}),
                )
                .unwrap();
            assert_eq!(r["items"].as_array().unwrap().len(), 100);
        });
        let files = (0..10_000)
            .map(|i| LocalFile {
                section: Section::Outputs,
                path: format!("d{}/f{i}", i % 100),
                source: LocalSource::Bytes(format!("{i}").into_bytes()),
                content_type: None,
            })
            .collect();
        let t = Instant::now();
        wb.call("workbench_create", &json!({"id": "big"})).unwrap();
        wb.collect("big", files).unwrap();
        println!(
            "{:<34} {:>9.1?}",
            "collect 10,000 files (one change)",
            t.elapsed()
        );
        let t = Instant::now();
        let r = wb
            .call(
                "workbench_restore",
                &json!({"id": "big", "destination_id": "big2"}),
            )
            .unwrap();
        assert_eq!(r["member_count"], 10_000);
        println!("{:<34} {:>9.1?}", "restore 10,000 files", t.elapsed());
    }
}

//! Workbench latencies over a real data root, embedded (in-process) and
//! over TCP on 127.0.0.1: stat, 4 KiB read, 4 KiB put_file, a list page of
//! 100, and restore of a 10,000-file workbench. Prints p50/p99 per
//! operation; docs/performance.md records the figures.
//!
//! Run: `cargo bench -p nokv-workbench --bench workbench [-- --generations G]`
//! (or with `--profile test` to reuse the test build's optimized
//! dependencies). The second restore's 10,000 files come from G changes
//! (default 2,000).

use std::time::{Duration, Instant};

use nokv_workbench::path::Section;
use nokv_workbench::scribe::ScribeStore;
use nokv_workbench::workbench::sandbox::{LocalFile, LocalSource};
use nokv_workbench::Workbench;
use scribe_client::{Client, ClientOptions};
use scribe_testkit::env::{Env, Transport, REPO};
use serde_json::json;

/// Embedded: the in-process client; TCP: opened by URL, as `nokv` opens
/// it (so it may use more connections).
fn open(env: &Env) -> Workbench<ScribeStore> {
    let store = match env.transport() {
        Transport::InProcess => {
            ScribeStore::over(Client::in_process(env.service().clone()), REPO, "bench")
        }
        _ => ScribeStore::open(env.url(), REPO, "bench", &ClientOptions::default()),
    };
    Workbench::new(store.unwrap(), "bench")
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
    // `--generations G`: the changes the second restore's files come from.
    let mut generations = 2_000usize;
    // `--puts-only`: stop after the put_file, stat, read and list phases.
    let mut puts_only = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--puts-only" {
            puts_only = true;
        } else if a == "--generations" {
            generations = args
                .next()
                .and_then(|v| v.parse().ok())
                .expect("--generations G");
        }
    }
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
        if puts_only {
            continue;
        }
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
        // The same restore of files written by many changes (one message
        // per change to read for content types).
        wb.call("workbench_create", &json!({"id": "gen"})).unwrap();
        let per = 10_000 / generations;
        for g in 0..generations {
            let files = (0..per)
                .map(|i| LocalFile {
                    section: Section::Outputs,
                    path: format!("d{}/f{g}-{i}", g % 100),
                    source: LocalSource::Bytes(format!("{g}-{i}").into_bytes()),
                    content_type: None,
                })
                .collect();
            wb.collect("gen", files).unwrap();
        }
        let t = Instant::now();
        let r = wb
            .call(
                "workbench_restore",
                &json!({"id": "gen", "destination_id": "gen2"}),
            )
            .unwrap();
        assert_eq!(r["member_count"], per * generations);
        println!(
            "{:<34} {:>9.1?}",
            format!("restore 10,000 files of {generations} changes"),
            t.elapsed()
        );
    }
}

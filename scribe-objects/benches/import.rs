//! Import benchmark (not a test): measures large-file and small-file import
//! beside the machine's own limits in the same run.
//!
//! ```text
//! cargo bench -p scribe-objects --bench import -- [--size-mib 2048] [--files 16]
//!     [--small-files 20000] [--compression lz4|none] [--dir /work/tmp]
//!     [--reimports 3]
//! ```
//!
//! (a) `--size-mib` of incompressible data in `--files` files; (b)
//! `--small-files` files of 4-64 KiB. For each: first import, then
//! re-import of identical data (deduplicated, no writes); for (a) the
//! re-import runs `--reimports` times each without and with the content
//! index, alternating, and reports medians. Baselines:
//! BLAKE3 all-core (`update_rayon`) over the same bytes in memory, and a
//! plain sequential write + fsync of the same size.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use scribe_format::envelope::Compression;
use scribe_objects::{ObjectStore, StoreOptions};
use scribe_testkit::{fill, XorShift64};

struct Args {
    size_mib: u64,
    files: u64,
    small_files: u64,
    compression: Compression,
    dir: PathBuf,
    reimports: usize,
}

fn parse_args() -> Args {
    let mut a = Args {
        size_mib: 2048,
        files: 16,
        small_files: 20_000,
        compression: Compression::Lz4,
        dir: std::env::temp_dir(),
        reimports: 3,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| usage(&flag));
        match flag.as_str() {
            "--size-mib" | "--size" => {
                a.size_mib = val().parse().unwrap_or_else(|_| usage("--size-mib"))
            }
            "--files" => a.files = val().parse().unwrap_or_else(|_| usage("--files")),
            "--small-files" => {
                a.small_files = val().parse().unwrap_or_else(|_| usage("--small-files"))
            }
            "--compression" => {
                a.compression =
                    Compression::parse(&val()).unwrap_or_else(|_| usage("--compression"))
            }
            "--dir" => a.dir = PathBuf::from(val()),
            "--reimports" => {
                a.reimports = val()
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .unwrap_or_else(|| usage("--reimports"))
            }
            "--bench" => {}
            other => usage(other),
        }
    }
    a
}

fn usage(flag: &str) -> ! {
    eprintln!("bad argument {flag}; see the header of benches/import.rs");
    std::process::exit(2)
}

/// This process's user + system CPU seconds (Linux `/proc/self/stat`);
/// shows how much of a phase was computation when the machine is shared.
fn cpu_secs() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let Some(rest) = stat.rsplit(')').next() else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // Fields 14 and 15 (utime, stime) are at 11 and 12 after the command name.
    (ticks(11) + ticks(12)) / 100.0
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Median by wall time of `(wall, cpu)` samples.
fn median(v: &mut [(f64, f64)]) -> (f64, f64) {
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v[v.len() / 2]
}

fn mbps(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / secs / 1e6
}

fn write_fsync_baseline(path: &Path, total: u64) -> f64 {
    let mut buf = vec![0u8; 8 << 20];
    fill(&mut buf, 99);
    let start = Instant::now();
    let mut f = std::fs::File::create(path).expect("create baseline file");
    let mut left = total;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        f.write_all(&buf[..n]).expect("write baseline");
        left -= n as u64;
    }
    f.sync_all().expect("fsync baseline");
    let secs = start.elapsed().as_secs_f64();
    drop(f);
    std::fs::remove_file(path).expect("remove baseline file");
    secs
}

fn main() {
    let a = parse_args();
    let root = tempfile::Builder::new()
        .prefix("scribe-objects-bench-")
        .tempdir_in(&a.dir)
        .expect("bench directory");
    let src = root.path().join("src");
    std::fs::create_dir_all(&src).expect("mkdir");
    let total = a.size_mib << 20;
    let per_file = total / a.files;
    println!(
        "machine: {} cores; compression {}; data {} MiB in {} files; small files {}",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        a.compression.as_str(),
        a.size_mib,
        a.files,
        a.small_files
    );

    // Generate large files and measure BLAKE3 all-core over the same bytes.
    let mut paths = Vec::new();
    let mut hash_secs = 0.0;
    let mut buf = vec![0u8; per_file as usize];
    for i in 0..a.files {
        fill(&mut buf, i + 1);
        let p = src.join(format!("large-{i}"));
        std::fs::write(&p, &buf).expect("write source");
        let t = Instant::now();
        let mut h = blake3::Hasher::new();
        h.update_rayon(&buf);
        std::hint::black_box(h.finalize());
        hash_secs += t.elapsed().as_secs_f64();
        paths.push(p);
    }
    drop(buf);
    let hash_mbps = mbps(per_file * a.files, hash_secs);
    let write_secs = write_fsync_baseline(&root.path().join("baseline"), per_file * a.files);
    let write_mbps = mbps(per_file * a.files, write_secs);
    println!("baseline blake3 all-core: {hash_mbps:.0} MB/s");
    println!("baseline sequential write+fsync: {write_mbps:.0} MB/s");

    let opts = StoreOptions {
        compression: a.compression,
        ..StoreOptions::default()
    };
    let store_dir = root.path().join("store");
    let store = ObjectStore::create(&store_dir, opts).expect("create store");
    println!("load average before import: {}", load_average());
    let t = Instant::now();
    let c = cpu_secs();
    let imported = store.import_files(&paths).expect("import");
    let first = t.elapsed().as_secs_f64();
    let first_cpu = cpu_secs() - c;
    let chunks: usize = imported.iter().map(|f| f.chunks.len()).sum();
    let limit = hash_mbps.min(write_mbps);
    println!(
        "(a) large import: {:.0} MB/s ({:.2} s, cpu {first_cpu:.2} s, {chunks} chunks) = {:.0}% of min(hash, write) {:.0} MB/s",
        mbps(total, first),
        first,
        100.0 * mbps(total, first) / limit,
        limit
    );
    // Re-imports, alternating the content index off (the full pipeline:
    // read, FastCDC, BLAKE3 of every chunk and of the file, no writes) and
    // on (whole-file BLAKE3 on all cores, verified manifest hit); medians.
    let mut full_runs = Vec::new();
    let mut index_runs = Vec::new();
    for round in 0..a.reimports {
        for with_index in [false, true] {
            store.set_content_index_lookups(with_index);
            let t = Instant::now();
            let c = cpu_secs();
            let again = store.import_files(&paths).expect("re-import");
            let secs = t.elapsed().as_secs_f64();
            let cpu = cpu_secs() - c;
            assert!(again.iter().all(|f| f.new_bytes_stored == 0));
            assert!(again.iter().all(|f| f.via_content_index == with_index));
            let name = if with_index { "index" } else { "full pipeline" };
            println!(
                "    re-import {round} ({name}): {:.0} MB/s ({secs:.2} s, cpu {cpu:.2} s)",
                mbps(total, secs)
            );
            if with_index {
                index_runs.push((secs, cpu));
            } else {
                full_runs.push((secs, cpu));
            }
        }
    }
    let (full_secs, full_cpu) = median(&mut full_runs);
    let (second, second_cpu) = median(&mut index_runs);
    println!(
        "(a) large re-import without the content index (median of {}): {:.0} MB/s ({:.2} s, cpu {full_cpu:.2} s) = {:.1}x faster",
        a.reimports,
        mbps(total, full_secs),
        full_secs,
        first / full_secs
    );
    println!(
        "(a) large re-import (dedup, no writes; content index, median of {}): {:.0} MB/s ({:.2} s, cpu {second_cpu:.2} s) = {:.1}x faster than the import, {:.1}x faster than the full-pipeline re-import",
        a.reimports,
        mbps(total, second),
        second,
        first / second,
        full_secs / second
    );
    let dest = root.path().join("reconstructed");
    let t = Instant::now();
    store
        .reconstruct(&imported[0].manifest_id, &dest)
        .expect("reconstruct");
    let rsecs = t.elapsed().as_secs_f64();
    println!("reconstruct one file: {:.0} MB/s", mbps(per_file, rsecs));
    std::fs::remove_file(&dest).expect("rm");
    drop(store);
    std::fs::remove_dir_all(&store_dir).expect("rm store");
    for p in &paths {
        std::fs::remove_file(p).expect("rm source");
    }

    // (b) small files of 4-64 KiB.
    let small = root.path().join("small");
    std::fs::create_dir_all(&small).expect("mkdir");
    let mut small_paths = Vec::with_capacity(a.small_files as usize);
    let mut small_bytes = 0u64;
    let mut sizes = XorShift64::from_state(12345);
    let mut b = vec![0u8; 64 << 10];
    for i in 0..a.small_files {
        let x = sizes.next_u64();
        let len = 4096 + (x % (60 << 10)) as usize;
        fill(&mut b[..len], i + 1000);
        let p = small.join(format!("f{i:06}"));
        std::fs::write(&p, &b[..len]).expect("write small");
        small_bytes += len as u64;
        small_paths.push(p);
    }
    let store = ObjectStore::create(&store_dir, opts).expect("create store");
    let t = Instant::now();
    let c = cpu_secs();
    store.import_files(&small_paths).expect("import small");
    let s1 = t.elapsed().as_secs_f64();
    let s1_cpu = cpu_secs() - c;
    let t = Instant::now();
    let c = cpu_secs();
    store.import_files(&small_paths).expect("re-import small");
    let s2 = t.elapsed().as_secs_f64();
    let s2_cpu = cpu_secs() - c;
    println!("load average after: {}", load_average());
    println!(
        "(b) small import: {:.0} files/s ({:.0} MB/s, {:.2} s, cpu {s1_cpu:.2} s); re-import {:.0} files/s (cpu {s2_cpu:.2} s, {:.1}x faster)",
        a.small_files as f64 / s1,
        mbps(small_bytes, s1),
        s1,
        a.small_files as f64 / s2,
        s1 / s2
    );
    drop(store);
    drop(root);
}

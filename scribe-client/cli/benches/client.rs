//! Client benchmarks (measure, never assert timings):
//!
//! 1. `status` on an N-file workspace with nothing changed, side by side
//!    with `git status` on the same tree;
//! 2. fresh `workspace create` of M MiB against the machine's sequential
//!    write rate (a flushed file of the same size in the same filesystem);
//! 3. a 1 MiB edit inside a B MiB file in a workspace that only *synced*
//!    it: bytes `submit` uploads, and bytes the server's data root and the
//!    workspace cache grow by;
//! 4. (`--small N`) fresh `workspace create` of N small files (64 B–8 KiB)
//!    in files/s, beside the machine's small-file create+fsync rate (one
//!    flushed file at a time) and its batched rate (256 files written,
//!    then flushed 16 at a time) measured in the same run.
//!
//! ```text
//! cargo bench -p scribe-cli --bench client -- [--files N] [--create-mib M] [--big-mib B] [--small N]
//!     [--runs R] [--other-bin PATH] [--dir D] [--transport tcp|path] [--only status|create|edit|small] [--keep]
//! ```
//! Defaults: 100000 files, 2048 MiB, 1024 MiB, no small-file part, 3 runs, a
//! temp dir, tcp (an in-process `scribe_server` listener on 127.0.0.1).
//! `--files 0` skips part 1, `--create-mib 0` part 2, `--big-mib 0` part 3.
//! `--other-bin` also runs part 4 with another `scribe` binary (alternating
//! with this build's), for before/after figures, and adds that binary to
//! the alternation of part 1's clean, one-changed and settled-touched runs
//! (this build, the other binary, git: A B C A B C ...).
//! Part 1 also measures the two other `status` variants: one file changed,
//! and every mtime touched with no content change (the first status hashes
//! every file and settles the fingerprints, the next is stat-only again).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use scribe_server::{ListenOptions, ServerHandle, Service};
use scribe_testkit::noise;

struct Opts {
    files: usize,
    create_mib: u64,
    big_mib: u64,
    dir: Option<PathBuf>,
    tcp: bool,
    keep: bool,
    /// Run only this part (status, create, edit).
    only: Option<String>,
    /// Files of the small-file create (0 = skip).
    small: usize,
    /// Another `scribe` binary to run the small-file create with as well
    /// (alternating with this build's), e.g. a build of an older commit.
    other_bin: Option<PathBuf>,
    /// Alternating runs of the small-file create.
    runs: usize,
}

impl Opts {
    fn part(&self, name: &str) -> bool {
        self.only.as_deref().is_none_or(|o| o == name)
    }
}

fn opts() -> Opts {
    let mut o = Opts {
        files: 100_000,
        create_mib: 2048,
        big_mib: 1024,
        dir: None,
        tcp: true,
        keep: false,
        only: None,
        small: 0,
        other_bin: None,
        runs: 3,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let v = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--files" => o.files = v.parse().expect("--files N"),
            "--create-mib" => o.create_mib = v.parse().expect("--create-mib M"),
            "--big-mib" => o.big_mib = v.parse().expect("--big-mib B"),
            "--dir" => o.dir = Some(PathBuf::from(v)),
            "--transport" => o.tcp = v == "tcp",
            "--only" => o.only = Some(v),
            "--small" => o.small = v.parse().expect("--small N"),
            "--other-bin" => o.other_bin = Some(PathBuf::from(v)),
            "--runs" => o.runs = v.parse().expect("--runs N"),
            "--keep" => {
                o.keep = true;
                i += 1;
                continue;
            }
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    o
}

fn scribe(dir: &Path, args: &[&str]) -> (f64, String) {
    scribe_with(Path::new(env!("CARGO_BIN_EXE_scribe")), dir, args)
}

fn scribe_with(bin: &Path, dir: &Path, args: &[&str]) -> (f64, String) {
    let t = Instant::now();
    let out = Command::new(bin)
        .args(args)
        .arg("--quiet")
        .current_dir(dir)
        .env("SCRIBE_AUTHOR", "bench")
        .output()
        .expect("scribe runs");
    let secs = t.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "scribe {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (secs, String::from_utf8_lossy(&out.stdout).into_owned())
}

fn run(dir: &Path, prog: &str, args: &[&str]) -> f64 {
    let t = Instant::now();
    let st = Command::new(prog)
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("runs");
    assert!(st.success(), "{prog} {args:?}");
    t.elapsed().as_secs_f64()
}

fn du(p: &Path) -> u64 {
    let mut total = 0;
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let m = match e.metadata() {
                Ok(m) => m,
                Err(_) => continue,
            };
            total += if m.is_dir() { du(&e.path()) } else { m.len() };
        }
    }
    total
}

/// Make `dir` a workspace whose baselines are exactly its files.
fn record_baselines(dir: &Path) {
    scribe_testkit::workspace::with_baselines(dir, &scribe_testkit::workspace::meta("status"));
}

/// The machine's own floor for a status: one thread listing every
/// directory and stat'ing every entry (no comparison, no state), seconds.
fn raw_walk(dir: &Path) -> (f64, usize) {
    fn go(d: &Path, n: &mut usize) {
        if let Ok(rd) = std::fs::read_dir(d) {
            for e in rd.flatten() {
                if e.file_name() == ".git" || e.file_name() == ".scribe" {
                    continue;
                }
                if let Ok(m) = e.metadata() {
                    *n += 1;
                    if m.is_dir() {
                        go(&e.path(), n);
                    }
                }
            }
        }
    }
    let t = Instant::now();
    let mut n = 0;
    go(dir, &mut n);
    (t.elapsed().as_secs_f64(), n)
}

fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into());
    format!("{cores} cores, load average {load}")
}

fn best(xs: &[f64]) -> f64 {
    xs.iter().cloned().fold(f64::INFINITY, f64::min)
}

fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    xs[xs.len() / 2]
}

/// The `--other-bin` figures of a status variant, if it ran.
fn other_line(what: &str, o: &Opts, xs: &mut [f64]) {
    if let (Some(b), false) = (&o.other_bin, xs.is_empty()) {
        println!(
            "{what}: other binary {} best {:.3} s median {:.3} s",
            b.display(),
            best(xs),
            median(xs)
        );
    }
}

fn mib(n: u64) -> f64 {
    n as f64 / 1_048_576.0
}

fn main() {
    let o = opts();
    let tmp =
        tempfile::tempdir_in(o.dir.clone().unwrap_or_else(std::env::temp_dir)).expect("temp dir");
    let root = tmp.path();
    let data = root.join("server");
    let (_server, url) = if o.tcp {
        let svc = Service::create(&data).expect("data root");
        let h = ServerHandle::start(svc, "127.0.0.1:0", ListenOptions::default()).expect("listen");
        let url = h.url();
        (Some(h), url)
    } else {
        drop(Service::create(&data).expect("data root"));
        (None, data.display().to_string())
    };
    println!(
        "scribe client bench: {} files, create {} MiB, edit in {} MiB, transport {}, dir {}",
        o.files,
        o.create_mib,
        o.big_mib,
        if o.tcp { "tcp" } else { "path" },
        root.display()
    );
    scribe(root, &["repo", "create", "create", "--server", &url]);
    scribe(root, &["repo", "create", "edit", "--server", &url]);

    // 1. status on N files, side by side with git status. The tree's
    //    baselines are recorded through the workspace library (what a
    //    submit or sync records), because uploading 100,000 objects one
    //    durable `ObjectPut` at a time costs the server minutes; `status`
    //    itself is purely local.
    if o.files > 0 && o.part("status") {
        let ws = root.join("status-ws");
        let t = Instant::now();
        for i in 0..o.files {
            let d = ws.join(format!("d{:02}/e{:02}", i / 10_000, (i / 100) % 100));
            std::fs::create_dir_all(&d).expect("mkdir");
            std::fs::write(d.join(format!("f{i}.bin")), noise(64 + i % 512, i as u64))
                .expect("write");
        }
        let write_secs = t.elapsed().as_secs_f64();
        let t = Instant::now();
        record_baselines(&ws);
        std::fs::write(ws.join(".scribe/_state/ignore"), ".git/\n").expect("ignore");
        println!(
            "status-tree: {} files written in {:.2} s, baselines recorded in {:.2} s",
            o.files,
            write_secs,
            t.elapsed().as_secs_f64()
        );
        // Let fingerprints settle (2 s granularity rule), then one status
        // refreshes them; the measured runs are the steady state.
        std::thread::sleep(std::time::Duration::from_millis(2500));
        scribe(&ws, &["status"]);
        // Let writeback of the freshly written tree finish so neither tool
        // is measured against the kernel flushing it.
        let _ = Command::new("sync").status();
        std::thread::sleep(std::time::Duration::from_secs(10));
        let git = Command::new("git").arg("--version").output().is_ok();
        if git {
            run(&ws, "git", &["init", "-q"]);
            std::fs::write(ws.join(".git/info/exclude"), ".scribe/\n").expect("exclude");
            run(&ws, "git", &["add", "-A"]);
            run(
                &ws,
                "git",
                &[
                    "-c",
                    "user.name=b",
                    "-c",
                    "user.email=b@b",
                    "commit",
                    "-qm",
                    "x",
                ],
            );
            run(&ws, "git", &["status"]);
        }
        let mut s = Vec::new();
        let mut g = Vec::new();
        let mut raw = Vec::new();
        println!("status-machine: {}", machine());
        let mut other = Vec::new();
        for _ in 0..7 {
            raw.push(raw_walk(&ws).0);
            let (t, out) = scribe(&ws, &["status"]);
            assert!(out.contains("Nothing opened, no local changes"), "{out}");
            s.push(t);
            if let Some(b) = &o.other_bin {
                other.push(scribe_with(b, &ws, &["status"]).0);
            }
            if git {
                g.push(run(&ws, "git", &["status"]));
            }
        }
        println!(
            "status: scribe status best {:.3} s median {:.3} s; git status best {:.3} s median {:.3} s; raw walk (1 thread, readdir + stat, {} entries) best {:.3} s median {:.3} s; {}",
            best(&s),
            median(&mut s),
            if git { best(&g) } else { f64::NAN },
            if git { median(&mut g) } else { f64::NAN },
            raw_walk(&ws).1,
            best(&raw),
            median(&mut raw),
            machine(),
        );
        other_line("status", &o, &mut other);
        let hashed = |out: &str| -> u64 {
            out.split("\"hashed\":")
                .nth(1)
                .and_then(|r| r.trim_end_matches(['}', '\n']).parse().ok())
                .expect("hashed in the JSON")
        };
        // 1b. One file changed (same size, new bytes).
        let victim = ws.join(format!(
            "d{:02}/e{:02}/f{}.bin",
            (o.files / 2) / 10_000,
            ((o.files / 2) / 100) % 100,
            o.files / 2
        ));
        let original = std::fs::read(&victim).expect("victim");
        let mut changed = original.clone();
        for b in &mut changed {
            *b = !*b;
        }
        std::fs::write(&victim, &changed).expect("change one file");
        let (mut s, mut g, mut other) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..7 {
            let (t, out) = scribe(&ws, &["status", "--json"]);
            assert!(out.contains("\"kind\":\"modified\""), "{out}");
            s.push(t);
            if let Some(b) = &o.other_bin {
                other.push(scribe_with(b, &ws, &["status", "--json"]).0);
            }
            if git {
                g.push(run(&ws, "git", &["status"]));
            }
        }
        println!(
            "status-one-changed: scribe status best {:.3} s median {:.3} s; git status best {:.3} s median {:.3} s",
            best(&s),
            median(&mut s),
            if git { best(&g) } else { f64::NAN },
            if git { median(&mut g) } else { f64::NAN },
        );
        other_line("status-one-changed", &o, &mut other);
        std::fs::write(&victim, &original).expect("restore");
        std::fs::File::options()
            .write(true)
            .open(&victim)
            .and_then(|f| {
                f.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(60))
            })
            .expect("age");
        // 1c. Every mtime touched, no content change.
        let past = std::time::SystemTime::now() - std::time::Duration::from_secs(30);
        let found = scribe_workspace::scan::scan(&ws, &Default::default());
        for f in &found.files {
            std::fs::File::options()
                .write(true)
                .open(ws.join(&f.path))
                .and_then(|h| h.set_modified(past))
                .expect("touch");
        }
        let (first, out) = scribe(&ws, &["status", "--json"]);
        let first_hashed = hashed(&out);
        assert!(out.contains("\"unopened\":[]"), "{out}");
        let git_first = if git {
            run(&ws, "git", &["status"])
        } else {
            f64::NAN
        };
        let (mut s, mut g, mut other) = (Vec::new(), Vec::new(), Vec::new());
        let mut later_hashed = 0;
        for _ in 0..5 {
            let (t, out) = scribe(&ws, &["status", "--json"]);
            later_hashed = later_hashed.max(hashed(&out));
            s.push(t);
            if let Some(b) = &o.other_bin {
                other.push(scribe_with(b, &ws, &["status", "--json"]).0);
            }
            if git {
                g.push(run(&ws, "git", &["status"]));
            }
        }
        println!(
            "status-touched: first scribe status {:.3} s (hashed {}), git {:.3} s; then scribe best {:.3} s median {:.3} s (hashed at most {}), git best {:.3} s median {:.3} s",
            first,
            first_hashed,
            git_first,
            best(&s),
            median(&mut s),
            later_hashed,
            if git { best(&g) } else { f64::NAN },
            if git { median(&mut g) } else { f64::NAN },
        );
        other_line("status-touched (later)", &o, &mut other);
    }

    // 2. fresh workspace create of M MiB vs. sequential write rate.
    if o.create_mib > 0 && o.part("create") {
        let src = root.join("create-src");
        scribe(
            root,
            &[
                "workspace",
                "create",
                "create-src",
                "--server",
                &url,
                "--repo",
                "create",
            ],
        );
        let per = 64u64; // MiB per file
        let n = o.create_mib.div_ceil(per);
        for i in 0..n {
            let size = per.min(o.create_mib - i * per) << 20;
            std::fs::write(
                src.join(format!("asset{i:03}.bin")),
                noise(size as usize, 1000 + i),
            )
            .expect("write");
        }
        scribe(&src, &["add", "."]);
        scribe(&src, &["submit", "-m", "big"]);
        // Alternating runs: the sequential write rate (the same bytes, one
        // flushed file per asset), then `workspace create` with each binary.
        let ours = PathBuf::from(env!("CARGO_BIN_EXE_scribe"));
        let mut bins = vec![("this build", ours)];
        if let Some(b) = &o.other_bin {
            bins.push(("other binary", b.clone()));
        }
        let buf = noise(4 << 20, 5);
        for run in 0..o.runs {
            let wr = root.join("write-rate");
            std::fs::create_dir_all(&wr).expect("mkdir");
            let t = Instant::now();
            for i in 0..n {
                use std::io::Write;
                let mut f = std::fs::File::create(wr.join(format!("f{i}"))).expect("create");
                let size = per.min(o.create_mib - i * per) << 20;
                let mut left = size;
                while left > 0 {
                    let k = left.min(buf.len() as u64) as usize;
                    f.write_all(&buf[..k]).expect("write");
                    left -= k as u64;
                }
                f.sync_all().expect("fsync");
            }
            let write_secs = t.elapsed().as_secs_f64();
            std::fs::remove_dir_all(&wr).expect("cleanup");
            let base = o.create_mib as f64 / write_secs;
            // Alternate the order: whichever runs first pays for the
            // reference files' removal.
            let order: Vec<&(&str, PathBuf)> = if run % 2 == 0 {
                bins.iter().collect()
            } else {
                bins.iter().rev().collect()
            };
            for (label, bin) in order {
                let (t_create, _) = scribe_with(
                    bin,
                    root,
                    &[
                        "workspace",
                        "create",
                        "create-dst",
                        "--server",
                        &url,
                        "--repo",
                        "create",
                    ],
                );
                let rate = o.create_mib as f64 / t_create;
                println!(
                    "create run {run} ({label}): {} MiB workspace create {:.2} s = {:.0} MiB/s; sequential write {:.2} s = {:.0} MiB/s; ratio {:.0}%",
                    o.create_mib,
                    t_create,
                    rate,
                    write_secs,
                    base,
                    100.0 * rate / base
                );
                std::fs::remove_dir_all(root.join("create-dst")).ok();
            }
        }
        std::fs::remove_dir_all(&src).ok();
    }

    // 3. 1 MiB edit inside a big file, in a workspace that only synced it
    //    (its cache never held the file's chunks).
    if o.big_mib > 1 && o.part("edit") {
        let src = root.join("edit-src");
        scribe(
            root,
            &[
                "workspace",
                "create",
                "edit-src",
                "--server",
                &url,
                "--repo",
                "edit",
            ],
        );
        let size = (o.big_mib << 20) as usize;
        let mut bytes = noise(size, 77);
        std::fs::write(src.join("huge.bin"), &bytes).expect("write");
        scribe(&src, &["add", "huge.bin"]);
        let (t1, _) = scribe(&src, &["submit", "-m", "huge", "--json"]);
        std::fs::remove_dir_all(&src).ok();
        let ws = root.join("edit-ws");
        let (t_sync, _) = scribe(
            root,
            &[
                "workspace",
                "create",
                "edit-ws",
                "--server",
                &url,
                "--repo",
                "edit",
            ],
        );
        let server_before = du(&data);
        let cache_before = du(&ws.join(".scribe/_state/cache"));
        scribe(&ws, &["edit", "huge.bin"]);
        let at = size / 2;
        bytes[at..at + (1 << 20)].copy_from_slice(&noise(1 << 20, 78));
        std::fs::write(ws.join("huge.bin"), &bytes).expect("write");
        let (t2, out) = scribe(&ws, &["submit", "-m", "1 MiB edit", "--json"]);
        let uploaded: u64 = out
            .split("\"uploaded_bytes\":")
            .nth(1)
            .and_then(|r| r.trim_end_matches(['}', '\n']).parse().ok())
            .expect("uploaded_bytes in the JSON");
        let server_growth = du(&data).saturating_sub(server_before);
        let cache_growth = du(&ws.join(".scribe/_state/cache")).saturating_sub(cache_before);
        println!(
            "edit: first submit of {} MiB {:.2} s (other workspace); synced into a fresh workspace {:.2} s; 1 MiB edit submit there {:.2} s: uploaded {:.1} MiB, server grew {:.1} MiB, cache grew {:.1} MiB",
            o.big_mib,
            t1,
            t_sync,
            t2,
            mib(uploaded),
            mib(server_growth),
            mib(cache_growth)
        );
        std::fs::remove_dir_all(&ws).ok();
    }

    // 4. fresh create of N small files vs the machine's small-file rates.
    if o.small > 0 && o.part("small") {
        small_files(&o, root, &url);
    }
    if o.keep {
        println!("kept {}", tmp.keep().display());
    }
}

fn small_size(i: usize) -> usize {
    64 + (i * 977) % 8128
}

/// The machine's small-file rates in `dir`: one created, written and
/// flushed file at a time; and 256 written, then flushed 16 at a time.
fn small_file_rates(dir: &Path, n: usize) -> (f64, f64) {
    use std::io::Write;
    let one = dir.join("one");
    std::fs::create_dir_all(&one).expect("mkdir");
    let n1 = n.min(1000);
    let t = Instant::now();
    for i in 0..n1 {
        let mut f = std::fs::File::create(one.join(format!("f{i}"))).expect("create");
        f.write_all(&noise(small_size(i), i as u64)).expect("write");
        f.sync_all().expect("fsync");
    }
    let serial = n1 as f64 / t.elapsed().as_secs_f64();
    let many = dir.join("many");
    std::fs::create_dir_all(&many).expect("mkdir");
    let t = Instant::now();
    let mut i = 0;
    while i < n {
        let end = (i + 256).min(n);
        let files: Vec<std::fs::File> = (i..end)
            .map(|k| {
                let mut f = std::fs::File::create(many.join(format!("f{k}"))).expect("create");
                f.write_all(&noise(small_size(k), k as u64)).expect("write");
                f
            })
            .collect();
        let next = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..16 {
                s.spawn(|| loop {
                    let k = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some(f) = files.get(k) else { break };
                    f.sync_all().expect("fsync");
                });
            }
        });
        std::fs::File::open(&many)
            .and_then(|d| d.sync_all())
            .expect("dir fsync");
        i = end;
    }
    let batched = n as f64 / t.elapsed().as_secs_f64();
    std::fs::remove_dir_all(&one).ok();
    std::fs::remove_dir_all(&many).ok();
    (serial, batched)
}

fn small_files(o: &Opts, root: &Path, url: &str) {
    scribe(root, &["repo", "create", "small", "--server", url]);
    let src = root.join("small-src");
    scribe(
        root,
        &[
            "workspace",
            "create",
            "small-src",
            "--server",
            url,
            "--repo",
            "small",
        ],
    );
    let mut bytes = 0u64;
    for i in 0..o.small {
        let d = src.join(format!("d{:02}/e{:02}", i % 20, (i / 20) % 10));
        std::fs::create_dir_all(&d).expect("mkdir");
        let b = noise(small_size(i), 9000 + i as u64);
        bytes += b.len() as u64;
        std::fs::write(d.join(format!("f{i}.dat")), b).expect("write");
    }
    scribe(&src, &["add", "."]);
    let (t_submit, _) = scribe(&src, &["submit", "-m", "small files"]);
    std::fs::remove_dir_all(&src).ok();
    let _ = Command::new("sync").status();
    let ours = PathBuf::from(env!("CARGO_BIN_EXE_scribe"));
    let mut bins = vec![("this build", ours)];
    if let Some(b) = &o.other_bin {
        bins.push(("other binary", b.clone()));
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); bins.len()];
    let mut serial = Vec::new();
    let mut batched = Vec::new();
    for run in 0..o.runs {
        let rates = root.join("rates");
        let (s, b) = small_file_rates(&rates, o.small);
        serial.push(s);
        batched.push(b);
        let order: Vec<usize> = if run % 2 == 0 {
            (0..bins.len()).collect()
        } else {
            (0..bins.len()).rev().collect()
        };
        for k in order {
            let bin = &bins[k].1;
            let name = format!("small-dst-{run}-{k}");
            let (t, _) = scribe_with(
                bin,
                root,
                &[
                    "workspace",
                    "create",
                    &name,
                    "--server",
                    url,
                    "--repo",
                    "small",
                ],
            );
            let placed = (0..o.small).all(|i| {
                root.join(&name)
                    .join(format!("d{:02}/e{:02}/f{i}.dat", i % 20, (i / 20) % 10))
                    .exists()
            });
            assert!(placed, "every file was created");
            times[k].push(t);
            std::fs::remove_dir_all(root.join(&name)).ok();
        }
    }
    println!(
        "small: {} files ({:.1} MiB) submitted in {:.2} s; machine: create+fsync one at a time median {:.0} files/s, batched (256 written, 16 flushes in flight) median {:.0} files/s",
        o.small,
        mib(bytes),
        t_submit,
        median(&mut serial),
        median(&mut batched)
    );
    for (k, (label, bin)) in bins.iter().enumerate() {
        let m = median(&mut times[k]);
        println!(
            "small: workspace create ({label}, {}): median {:.2} s = {:.0} files/s over {} runs ({:?})",
            bin.display(),
            m,
            o.small as f64 / m,
            times[k].len(),
            times[k].iter().map(|t| (t * 100.0).round() / 100.0).collect::<Vec<_>>()
        );
    }
}

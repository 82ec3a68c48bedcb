//! The local sandbox adapters against Scribe's own client, side by side,
//! on the same bytes (docs/performance.md): `nokv collect` of N MiB into a
//! workbench against `scribe submit` of the same files from a workspace,
//! and `nokv materialize` of them against `scribe sync` into a workspace
//! created before the submit. One server: a data root served over TCP on
//! 127.0.0.1 in this process; each side has its own repository, so neither
//! finds the other's objects. Both binaries are real processes.
//!
//! ```text
//! cargo bench -p scribe-cli --no-run   # builds target/release/scribe
//! cargo bench -p nokv-workbench --bench sandbox -- [--mib N] [--file-mib F] [--runs R] [--scribe PATH] [--dir D]
//! ```
//! Defaults: 1024 MiB in files of 64 MiB, 1 run, the `scribe` next to this
//! bench's target directory (`target/release/scribe`), a temp dir.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use scribe_server::{ListenOptions, ServerHandle, Service};
use scribe_testkit::noise;

struct Opts {
    mib: u64,
    file_mib: u64,
    runs: usize,
    scribe: PathBuf,
    dir: Option<PathBuf>,
}

fn opts() -> Opts {
    let exe = std::env::current_exe().expect("exe");
    // target/release/deps/sandbox-* -> target/release/scribe
    let default_scribe = exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("scribe"))
        .unwrap_or_else(|| PathBuf::from("scribe"));
    let mut o = Opts {
        mib: 1024,
        file_mib: 64,
        runs: 1,
        scribe: default_scribe,
        dir: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--mib" => o.mib = val().parse().expect("--mib N"),
            "--file-mib" => o.file_mib = val().parse().expect("--file-mib N"),
            "--runs" => o.runs = val().parse().expect("--runs N"),
            "--scribe" => o.scribe = PathBuf::from(val()),
            "--dir" => o.dir = Some(PathBuf::from(val())),
            "--bench" => {}
            other => panic!("unknown argument {other}"),
        }
    }
    assert!(
        o.scribe.exists(),
        "no scribe binary at {} (build it: cargo bench -p scribe-cli --no-run, or pass --scribe)",
        o.scribe.display()
    );
    o
}

/// Run `bin args` in `dir`; the seconds it took and its stdout.
fn timed(bin: &Path, dir: &Path, args: &[&str]) -> (f64, String) {
    let t = Instant::now();
    let out = Command::new(bin)
        .args(args)
        .current_dir(dir)
        .env("SCRIBE_AUTHOR", "bench")
        .output()
        .expect("run");
    let secs = t.elapsed().as_secs_f64();
    if std::env::var_os("NOKV_PHASES").is_some() {
        eprint!("{}", String::from_utf8_lossy(&out.stderr));
    }
    assert!(
        out.status.success(),
        "{} {args:?} failed: {}{}",
        bin.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (secs, String::from_utf8_lossy(&out.stdout).into_owned())
}

fn main() {
    let o = opts();
    let nokv = PathBuf::from(env!("CARGO_BIN_EXE_nokv"));
    let tmp =
        tempfile::tempdir_in(o.dir.clone().unwrap_or_else(std::env::temp_dir)).expect("temp dir");
    let root = tmp.path();
    let n = o.mib.div_ceil(o.file_mib);
    println!(
        "sandbox bench: {} MiB in {n} files of <= {} MiB, {} run(s), dir {}",
        o.mib,
        o.file_mib,
        o.runs,
        root.display()
    );
    let mib = o.mib as f64;
    for run in 0..o.runs {
        // A fresh server per run (its data removed after the run: the
        // disk holds a few runs' worth at most).
        let data = root.join(format!("server{run}"));
        let svc = Service::create(&data).expect("data root");
        let server =
            ServerHandle::start(svc, "127.0.0.1:0", ListenOptions::default()).expect("listen");
        let url = server.url();
        let (s_repo, n_repo) = (format!("s{run}"), format!("n{run}"));
        let scribe = |dir: &Path, args: &[&str]| timed(&o.scribe, dir, args);
        scribe(root, &["repo", "create", &s_repo, "--server", &url]);
        scribe(root, &["repo", "create", &n_repo, "--server", &url]);
        // Scribe: a workspace that will sync, one that submits.
        let ws = |name: &str| {
            scribe(
                root,
                &[
                    "workspace",
                    "create",
                    name,
                    "--server",
                    &url,
                    "--repo",
                    &s_repo,
                ],
            );
            root.join(name)
        };
        let dst = ws("s-dst");
        let src = ws("s-src");
        // The workbench side's sandbox holds the same bytes.
        let sandbox = root.join("n-src");
        std::fs::create_dir_all(sandbox.join("outputs")).expect("mkdir");
        for i in 0..n {
            let size = (o.file_mib.min(o.mib - i * o.file_mib) << 20) as usize;
            let bytes = noise(size, 5000 + run as u64 * 100 + i);
            let name = format!("asset{i:03}.bin");
            std::fs::write(src.join(&name), &bytes).expect("write");
            std::fs::write(sandbox.join("outputs").join(&name), &bytes).expect("write");
        }
        let _ = Command::new("sync").status();
        let wb = |args: &[&str]| {
            let mut all = vec!["--server", url.as_str(), "--repo", n_repo.as_str()];
            all.extend_from_slice(args);
            timed(&nokv, root, &all)
        };
        wb(&["workbench", "workbench_create", r#"{"id":"bench"}"#]);
        let sb = sandbox.to_str().expect("utf-8");
        let mat = root.join("n-dst");
        // Each side goes first in every other run (the second one meets
        // the first one's writeback).
        let scribe_side = || {
            let (t_add, _) = scribe(&src, &["add", ".", "--quiet"]);
            let (t_submit, _) = scribe(&src, &["submit", "-m", "bench", "--quiet"]);
            let (t_sync, _) = scribe(&dst, &["sync", "--quiet"]);
            (t_add, t_submit, t_sync)
        };
        let nokv_side = || {
            let (t_collect, out) = wb(&["collect", sb, "bench"]);
            assert!(out.contains(&format!("\"created\":{n}")), "{out}");
            let (t_mat, out) = wb(&["materialize", "bench", mat.to_str().expect("utf-8")]);
            assert!(out.contains(&format!("\"files\":{n}")), "{out}");
            (t_collect, t_mat)
        };
        let (first, ((t_add, t_submit, t_sync), (t_collect, t_mat))) = if run % 2 == 0 {
            let s = scribe_side();
            ("scribe", (s, nokv_side()))
        } else {
            let w = nokv_side();
            ("nokv", (scribe_side(), w))
        };
        println!("run {run}: {first} first");
        let rate = |t: f64| mib / t;
        println!(
            "run {run}: upload   scribe add {t_add:5.2} s + submit {t_submit:6.2} s ({:6.1} MiB/s submit alone)   nokv collect     {t_collect:6.2} s ({:6.1} MiB/s)   collect/submit {:.2}, collect/(add+submit) {:.2}",
            rate(t_submit),
            rate(t_collect),
            t_collect / t_submit,
            t_collect / (t_add + t_submit)
        );
        println!(
            "run {run}: download scribe sync   {t_sync:6.2} s ({:6.1} MiB/s)   nokv materialize {t_mat:6.2} s ({:6.1} MiB/s)   materialize/sync {:.2}",
            rate(t_sync),
            rate(t_mat),
            t_mat / t_sync
        );
        drop(server);
        for d in [&src, &dst, &sandbox, &mat, &data] {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

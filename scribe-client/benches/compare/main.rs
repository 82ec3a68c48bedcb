//! Side by side: Scribe against Git, Git LFS and Subversion on the same
//! bytes, every client talking to its real server on 127.0.0.1 through a
//! counting proxy, runs alternated (A B C D A B C D) and reported as
//! medians, with the machine's own limits measured in the same run.
//!
//! ```text
//! cargo bench -p scribe-client --bench compare -- [--dir DIR] [--seed N] [--scale F]
//!     [--runs N] [--only W1,W1L,W1S,W2,W3,W4,W5,LOAD,PROXY] [--out FILE] [--no-install] [--keep]
//!     [--tools git,lfs,svn]   (peers measured beside Scribe; default all) [--cold]
//! ```
//!
//! A measurement, never a test: nothing in `cargo test` runs it and nothing
//! here asserts a time. It builds the release binaries it drives, installs
//! the peers it lacks (`git-lfs`, `subversion` from Debian, `rudolfs` from
//! crates.io) and writes a markdown report (default
//! `docs/performance-compare.md`; another file unless `--scale` is 1).
//! `docs/performance-compare.md` describes every workload and choice.

mod platform;
mod proxy;

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use proxy::Proxy;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

// ---------------------------------------------------------------- options

struct Opts {
    dir: PathBuf,
    seed: u64,
    scale: f64,
    runs: Option<usize>,
    only: Vec<String>,
    out: PathBuf,
    install: bool,
    keep: bool,
    svn_status: bool,
    /// `--tools`: the peers measured beside Scribe (default: all three).
    tools: Vec<Tool>,
    /// Touch memory before each large timed run (`--cold` turns it off).
    warm: bool,
    args: Vec<String>,
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn opts() -> Opts {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let mut o = Opts {
        dir: std::env::temp_dir().join("scribe-compare"),
        seed: 7,
        scale: 1.0,
        runs: None,
        only: Vec::new(),
        out: PathBuf::new(),
        install: true,
        keep: false,
        svn_status: false,
        tools: ALL.to_vec(),
        warm: true,
        args: args.clone(),
    };
    let mut out = None;
    let mut i = 0;
    while i < args.len() {
        let v = args.get(i + 1).cloned().unwrap_or_default();
        let mut took = true;
        match args[i].as_str() {
            "--dir" => o.dir = PathBuf::from(v),
            "--seed" => o.seed = v.parse().expect("--seed N"),
            "--scale" => o.scale = v.parse().expect("--scale F"),
            "--runs" => o.runs = Some(v.parse::<usize>().expect("--runs N").max(1)),
            "--only" => {
                o.only = v
                    .split(',')
                    .map(|s| s.trim().to_uppercase())
                    .filter(|s| !s.is_empty())
                    .collect()
            }
            "--out" => out = Some(PathBuf::from(v)),
            "--tools" => {
                let mut tools = vec![Tool::Scribe];
                for name in v.split(',').map(|s| s.trim().to_lowercase()) {
                    let t = match name.as_str() {
                        "scribe" => continue,
                        "git" => Tool::Git,
                        "lfs" | "git-lfs" => Tool::Lfs,
                        "svn" | "subversion" => Tool::Svn,
                        other => panic!("--tools: unknown tool {other} (scribe, git, lfs, svn)"),
                    };
                    if !tools.contains(&t) {
                        tools.push(t);
                    }
                }
                tools.sort();
                o.tools = tools;
            }
            "--no-install" => {
                o.install = false;
                took = false
            }
            "--keep" => {
                o.keep = true;
                took = false
            }
            "--estimate" => took = false,
            "--cold" => {
                o.warm = false;
                took = false
            }
            "--svn-status" => {
                o.svn_status = true;
                took = false
            }
            other => {
                eprintln!("compare: ignoring argument {other}");
                took = false
            }
        }
        i += if took { 2 } else { 1 };
    }
    assert!(o.scale > 0.0, "--scale must be positive");
    o.out = out.unwrap_or_else(|| {
        let docs = workspace_root().join("docs");
        if (o.scale - 1.0).abs() < 1e-9 {
            docs.join("performance-compare.md")
        } else {
            o.dir
                .join(format!("performance-compare-scale-{}.md", o.scale))
        }
    });
    o
}

impl Opts {
    /// The tools measured, in alternation order.
    fn tools(&self) -> Vec<Tool> {
        self.tools.clone()
    }
    fn measures(&self, t: Tool) -> bool {
        self.tools.contains(&t)
    }
    fn wants(&self, w: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|x| x == w)
    }
    /// Alternations for the workloads that move gigabytes.
    fn heavy_runs(&self) -> usize {
        self.runs.unwrap_or(2)
    }
    fn fast_runs(&self) -> usize {
        self.runs.unwrap_or(3)
    }
    fn bytes(&self, full: u64, min: u64) -> u64 {
        (((full as f64 * self.scale) as u64).max(min) + 4095) & !4095
    }
    fn count(&self, full: usize, min: usize) -> usize {
        ((full as f64 * self.scale) as usize).max(min)
    }
}

// ------------------------------------------------------------- workloads' bytes

/// One generated file: its path, size, and the id its bytes derive from.
#[derive(Clone)]
struct FileSpec {
    path: String,
    size: u64,
    id: u64,
}

fn mix(seed: u64, k: u64) -> u64 {
    let mut x = seed ^ k.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 30;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Incompressible, deterministic bytes: the BLAKE3 XOF keyed by (seed, id).
fn stream(seed: u64, id: u64) -> blake3::OutputReader {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..16].copy_from_slice(&id.to_le_bytes());
    key[16..].copy_from_slice(b"scribe-compare!!");
    blake3::Hasher::new_keyed(&key).finalize_xof()
}

fn bytes_of(seed: u64, id: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    stream(seed, id).fill(&mut v);
    v
}

fn write_spec(root: &Path, seed: u64, f: &FileSpec) {
    use std::io::Write;
    let p = root.join(&f.path);
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    let mut out =
        std::io::BufWriter::with_capacity(4 << 20, std::fs::File::create(&p).expect("create file"));
    let mut r = stream(seed, f.id);
    let mut buf = vec![0u8; (4 * MIB).min(f.size.max(1)) as usize];
    let mut left = f.size;
    while left > 0 {
        let k = left.min(buf.len() as u64) as usize;
        r.fill(&mut buf[..k]);
        out.write_all(&buf[..k]).expect("write");
        left -= k as u64;
    }
    out.flush().expect("flush");
}

fn materialize(root: &Path, seed: u64, files: &[FileSpec]) {
    std::fs::create_dir_all(root).expect("mkdir");
    for f in files {
        write_spec(root, seed, f);
    }
}

fn total(files: &[FileSpec]) -> u64 {
    files.iter().map(|f| f.size).sum()
}

/// W1 large and W4: 16 incompressible files in four folders.
fn tree_large(o: &Opts) -> Vec<FileSpec> {
    let size = o.bytes(128 * MIB, MIB);
    (0..16u64)
        .map(|i| FileSpec {
            path: format!("d{:02}/asset{i:02}.bin", i / 4),
            size,
            id: 1000 + i,
        })
        .collect()
}

/// W1 small: files of 4-64 KiB, 100 to a folder.
fn tree_small(o: &Opts) -> Vec<FileSpec> {
    let n = o.count(20_000, 100) as u64;
    (0..n)
        .map(|k| FileSpec {
            path: format!("s{:03}/f{k:05}.bin", k / 100),
            size: 4096 + mix(o.seed, k) % (60 * 1024 + 1),
            id: 100_000 + k,
        })
        .collect()
}

/// W2: many small files, 100 to a folder, 100 folders to a parent.
fn tree_status(o: &Opts) -> Vec<FileSpec> {
    let n = o.count(100_000, 1000) as u64;
    (0..n)
        .map(|k| FileSpec {
            path: format!("d{:02}/e{:02}/f{k:06}.bin", k / 10_000, (k / 100) % 100),
            size: 256 + mix(o.seed ^ 2, k) % 2048,
            id: 1_000_000 + k,
        })
        .collect()
}

// ---------------------------------------------------------------- helpers

fn du(p: &Path) -> u64 {
    let mut sum = 0;
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let Ok(m) = e.metadata() else { continue };
            sum += if m.is_dir() { du(&e.path()) } else { m.len() };
        }
    }
    sum
}

/// Bytes of the working files under `p`, leaving out each tool's metadata.
fn tree_bytes(p: &Path) -> (u64, usize) {
    let mut sum = (0, 0);
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name == ".git" || name == ".scribe" || name == ".svn" || name.starts_with(".git") {
                continue;
            }
            let Ok(m) = e.metadata() else { continue };
            if m.is_dir() {
                let (b, n) = tree_bytes(&e.path());
                sum.0 += b;
                sum.1 += n;
            } else if name != ".lfsconfig" {
                sum.0 += m.len();
                sum.1 += 1;
            }
        }
    }
    sum
}

fn rm(p: &Path) {
    if p.exists() {
        // Git makes its object files read-only; removal still works on Unix.
        let _ = std::fs::remove_dir_all(p);
    }
}

fn median(xs: &[f64]) -> f64 {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn median_u(xs: &[u64]) -> u64 {
    let v: Vec<f64> = xs.iter().map(|&x| x as f64).collect();
    let m = median(&v);
    if m.is_finite() {
        m.round() as u64
    } else {
        0
    }
}

fn human(n: u64) -> String {
    let f = n as f64;
    if n >= GIB {
        format!("{:.2} GiB", f / GIB as f64)
    } else if n >= MIB {
        format!("{:.1} MiB", f / MIB as f64)
    } else if n >= 1024 {
        format!("{:.1} KiB", f / 1024.0)
    } else {
        format!("{n} B")
    }
}

fn secs(s: f64) -> String {
    if !s.is_finite() {
        "—".into()
    } else if s < 1.0 {
        format!("{:.1} ms", s * 1000.0)
    } else {
        format!("{s:.2} s")
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

fn wait_port(addr: SocketAddr, what: &str) {
    let t = Instant::now();
    while TcpStream::connect(addr).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "{what} is not listening on {addr}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn shell_out(prog: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(prog).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn have(prog: &str) -> bool {
    Command::new(prog)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn set_mtime_all(root: &Path, files: &[FileSpec], t: std::time::SystemTime) {
    for f in files {
        let file = std::fs::File::options()
            .write(true)
            .open(root.join(&f.path))
            .expect("open for touch");
        file.set_modified(t).expect("set mtime");
    }
}

// ---------------------------------------------------------------- servers

/// A server process the harness started; stopped (and reaped) on drop.
struct Daemon {
    name: &'static str,
    child: Option<Child>,
    max_rss: u64,
}

impl Daemon {
    fn spawn(name: &'static str, cmd: &mut Command, log: &Path) -> Daemon {
        let out = std::fs::File::create(log).expect("server log");
        let err = out.try_clone().expect("log");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        Daemon {
            name,
            child: Some(child),
            max_rss: 0,
        }
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            platform::terminate(&mut c);
            let t = Instant::now();
            while !platform::exited(&c) {
                if t.elapsed() > Duration::from_secs(10) {
                    eprintln!("compare: {} ignores SIGTERM, killing it", self.name);
                    let _ = c.kill();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            if let Ok(e) = platform::wait(c) {
                self.max_rss = e.max_rss;
            }
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Tool {
    Scribe,
    Git,
    Lfs,
    Svn,
}

impl Tool {
    fn name(self) -> &'static str {
        match self {
            Tool::Scribe => "Scribe",
            Tool::Git => "Git",
            Tool::Lfs => "Git LFS",
            Tool::Svn => "Subversion",
        }
    }
}

const ALL: [Tool; 4] = [Tool::Scribe, Tool::Git, Tool::Lfs, Tool::Svn];

/// One command's outcome.
struct Step {
    secs: f64,
    ok: bool,
    max_rss: u64,
    read: Option<u64>,
    out: String,
    err: String,
}

/// One measured run of one tool on one workload.
#[derive(Default, Clone)]
struct Sample {
    secs: f64,
    max_rss: u64,
    up: u64,
    down: u64,
    stored: u64,
    read: Option<u64>,
}

/// The report's line: a tool's medians over its runs of one workload.
struct Row {
    workload: String,
    tool: Tool,
    samples: Vec<Sample>,
    stored: bool,
    note: String,
}

/// This harness's private copy, which launches every measured command.
static LAUNCHER: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

struct Bench {
    o: Opts,
    root: PathBuf,
    work: PathBuf,
    logs: PathBuf,
    home: PathBuf,
    scribe_bin: PathBuf,
    server_bin: PathBuf,
    rudolfs_bin: PathBuf,
    step: AtomicUsize,
    scribe_data: PathBuf,
    git_root: PathBuf,
    lfs_root: PathBuf,
    svn_root: PathBuf,
    scribe_proxy: Option<Proxy>,
    git_proxy: Option<Proxy>,
    lfs_proxy: Option<Proxy>,
    svn_proxy: Option<Proxy>,
    daemons: Vec<Daemon>,
    rows: Vec<Row>,
    notes: Vec<String>,
    /// The W1-large repository of each tool's last run, reused by W4.
    w1_large: BTreeMap<Tool, String>,
    /// `--only PROXY`: the counting proxy against a direct connection.
    proxy_cost: Vec<proxy::CostRow>,
    /// Memory warmed before timed runs: (bytes touched, seconds), each time.
    warmed: Vec<(u64, f64)>,
}

impl Bench {
    fn env(&self, cmd: &mut Command) {
        cmd.env("HOME", &self.home)
            .env("SCRIBE_AUTHOR", "bench")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
            .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
            .env("LC_ALL", "C");
    }

    /// Run one command (cwd `dir`), its output to files under logs/.
    fn exec(&self, dir: &Path, prog: &Path, args: &[&str], env: &[(&str, &str)]) -> Step {
        let n = self.step.fetch_add(1, Ordering::SeqCst);
        let stem = prog
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let out_p = self.logs.join(format!("{n:05}-{stem}.out"));
        let err_p = self.logs.join(format!("{n:05}-{stem}.err"));
        std::fs::write(
            self.logs.join(format!("{n:05}-{stem}.cmd")),
            format!(
                "cd {}\n{} {}\n",
                dir.display(),
                prog.display(),
                args.join(" ")
            ),
        )
        .expect("log");
        // Through the launcher (this binary, small): a child's peak RSS
        // counts the memory of the process it was spawned from, so the
        // harness (which holds large buffers at times) must not be it.
        let stat_p = self.logs.join(format!("{n:05}-{stem}.rusage"));
        let mut cmd = Command::new(LAUNCHER.get().expect("launcher copied at start"));
        cmd.arg("--launch")
            .arg(&stat_p)
            .arg(prog)
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out_p).expect("log"))
            .stderr(std::fs::File::create(&err_p).expect("log"));
        self.env(&mut cmd);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let t = Instant::now();
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", prog.display()));
        let exit = platform::wait(child).expect("wait");
        let outer = t.elapsed().as_secs_f64();
        let stat = std::fs::read_to_string(&stat_p).unwrap_or_default();
        let mut it = stat.split_whitespace();
        let secs = it.next().and_then(|v| v.parse().ok()).unwrap_or(outer);
        let max_rss = it.next().and_then(|v| v.parse().ok()).unwrap_or(0);
        let read_bytes = it.next().and_then(|v| v.parse().ok());
        let read = |p: &Path| {
            let s = std::fs::read(p).unwrap_or_default();
            String::from_utf8_lossy(&s[..s.len().min(1 << 20)]).into_owned()
        };
        Step {
            secs,
            ok: exit.ok,
            max_rss,
            read: read_bytes,
            out: read(&out_p),
            err: read(&err_p),
        }
    }

    fn run(&self, dir: &Path, prog: &Path, args: &[&str], env: &[(&str, &str)]) -> Step {
        let s = self.exec(dir, prog, args, env);
        assert!(
            s.ok,
            "{} {} failed in {}:\n{}{}",
            prog.display(),
            args.join(" "),
            dir.display(),
            s.out,
            s.err
        );
        s
    }

    fn git(&self, dir: &Path, args: &[&str]) -> Step {
        self.run(dir, Path::new("git"), args, &[])
    }

    fn scribe(&self, dir: &Path, args: &[&str]) -> Step {
        let mut a = args.to_vec();
        a.push("--quiet");
        self.run(dir, &self.scribe_bin.clone(), &a, &[])
    }

    fn svn_args<'a>(&'a self, user: &'a str, args: &[&'a str]) -> Vec<&'a str> {
        let mut a = args.to_vec();
        a.extend([
            "--non-interactive",
            "--no-auth-cache",
            "--username",
            user,
            "--password",
            user,
        ]);
        a
    }

    fn svn(&self, dir: &Path, user: &str, args: &[&str]) -> Step {
        let a = self.svn_args(user, args);
        self.run(dir, Path::new("svn"), &a, &[])
    }

    fn scribe_url(&self) -> String {
        format!(
            "scribe://{}",
            self.scribe_proxy.as_ref().expect("scribe").addr
        )
    }
    /// Git and Git LFS keep their bare repositories side by side on the
    /// one `git daemon`; LFS's carry an `lfs-` prefix.
    fn git_name(t: Tool, name: &str) -> String {
        if t == Tool::Lfs {
            format!("lfs-{name}")
        } else {
            name.to_string()
        }
    }
    fn bare(&self, t: Tool, name: &str) -> PathBuf {
        self.git_root
            .join(format!("{}.git", Self::git_name(t, name)))
    }
    fn git_url(&self, t: Tool, name: &str) -> String {
        format!(
            "git://{}/{}.git",
            self.git_proxy.as_ref().expect("git").addr,
            Self::git_name(t, name)
        )
    }
    fn lfs_url(&self, name: &str) -> String {
        format!(
            "http://{}/api/bench/{name}",
            self.lfs_proxy.as_ref().expect("lfs").addr
        )
    }
    fn svn_url(&self, name: &str) -> String {
        format!(
            "svn://{}/{name}",
            self.svn_proxy.as_ref().expect("svn").addr
        )
    }

    fn stored(&self, t: Tool) -> u64 {
        match t {
            Tool::Scribe => du(&self.scribe_data),
            Tool::Git => du(&self.git_root),
            Tool::Lfs => du(&self.git_root) + du(&self.lfs_root),
            Tool::Svn => du(&self.svn_root),
        }
    }

    fn wire(&self, t: Tool) -> (u64, u64) {
        let c = |p: &Option<Proxy>| p.as_ref().map(|p| p.counts()).unwrap_or((0, 0));
        match t {
            Tool::Scribe => c(&self.scribe_proxy),
            Tool::Git => c(&self.git_proxy),
            Tool::Lfs => {
                let (a, b) = c(&self.git_proxy);
                let (x, y) = c(&self.lfs_proxy);
                (a + x, b + y)
            }
            Tool::Svn => c(&self.svn_proxy),
        }
    }

    /// Touch `bytes` of fresh memory, then free it, so the next timed run
    /// finds the machine's memory backed. On this virtual machine a page
    /// the guest has not used recently is backed by the host on its first
    /// touch (measured: 340-380 MB/s, against 2.8-4.5 GB/s for a page the
    /// guest used a moment ago), and freed pages go cold again within
    /// about a minute: without this, each tool pays about 3 s per GiB of
    /// page cache and buffers it touches, which says more about the host
    /// than about the tool. Every tool gets the same treatment right
    /// before its run; `--cold` measures without it.
    fn warm_memory(&mut self, bytes: u64) {
        if !self.o.warm {
            return;
        }
        let avail = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find(|l| l.starts_with("MemAvailable:"))
                    .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            })
            .map_or(0, |kib| kib * 1024);
        let bytes = bytes.min(avail.saturating_sub(2 * GIB));
        if bytes == 0 {
            return;
        }
        let t = Instant::now();
        let piece = (256 * MIB) as usize;
        let mut held: Vec<Vec<u8>> = Vec::new();
        let mut left = bytes as usize;
        while left > 0 {
            let n = left.min(piece);
            held.push(std::hint::black_box(vec![1u8; n]));
            left -= n;
        }
        drop(held);
        self.warmed.push((bytes, t.elapsed().as_secs_f64()));
    }

    /// Measure a workflow: its time is the sum of its commands' times (work
    /// between them, like editing a file, is not counted), bytes on the wire
    /// and server storage are the deltas over the whole workflow.
    fn measure(&self, t: Tool, f: impl FnOnce(&mut Vec<Step>)) -> Sample {
        let stored0 = self.stored(t);
        let (u0, d0) = self.wire(t);
        let mut steps = Vec::new();
        f(&mut steps);
        let (u1, d1) = self.wire(t);
        let stored1 = self.stored(t);
        Sample {
            secs: steps.iter().map(|s| s.secs).sum(),
            max_rss: steps.iter().map(|s| s.max_rss).max().unwrap_or(0),
            up: u1 - u0,
            down: d1 - d0,
            stored: stored1.saturating_sub(stored0),
            read: steps.iter().filter_map(|s| s.read).reduce(|a, b| a + b),
        }
    }

    fn push_row(&mut self, workload: &str, tool: Tool, samples: Vec<Sample>, stored: bool) {
        self.rows.push(Row {
            workload: workload.into(),
            tool,
            samples,
            stored,
            note: String::new(),
        });
    }

    fn note_row(&mut self, workload: &str, tool: Tool, note: &str) {
        if let Some(r) = self
            .rows
            .iter_mut()
            .rev()
            .find(|r| r.workload == workload && r.tool == tool)
        {
            if !r.note.is_empty() {
                r.note.push_str("; ");
            }
            r.note.push_str(note);
        }
    }
}

// ---------------------------------------------------------------- setup

fn install_peers(o: &Opts, tools_dir: &Path, notes: &mut Vec<String>) -> PathBuf {
    let missing_deb: Vec<&str> = [
        ("git", "git"),
        ("git-lfs", "git-lfs"),
        ("svn", "subversion"),
    ]
    .iter()
    .filter(|(bin, _)| !have(bin))
    .map(|(_, pkg)| *pkg)
    .collect();
    if !missing_deb.is_empty() {
        assert!(
            o.install,
            "missing {missing_deb:?} and --no-install was given"
        );
        eprintln!("compare: installing {missing_deb:?} with apt-get");
        let ok = Command::new("apt-get")
            .args(["update", "-qq"])
            .status()
            .is_ok_and(|s| s.success())
            && Command::new("apt-get")
                .args(["install", "-y", "-qq"])
                .args(&missing_deb)
                .env("DEBIAN_FRONTEND", "noninteractive")
                .status()
                .is_ok_and(|s| s.success());
        assert!(ok, "apt-get install {missing_deb:?} failed (run as root?)");
        notes.push(format!("installed {missing_deb:?} with apt-get"));
    }
    let on_path = Command::new("rudolfs")
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if on_path {
        return PathBuf::from("rudolfs");
    }
    let local = tools_dir.join("bin").join("rudolfs");
    if !local.exists() {
        assert!(o.install, "rudolfs missing and --no-install was given");
        eprintln!(
            "compare: cargo install rudolfs --locked --root {} (a few minutes, once)",
            tools_dir.display()
        );
        let ok = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["install", "rudolfs", "--locked", "--root"])
            .arg(tools_dir)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "cargo install rudolfs failed");
        notes.push("installed rudolfs with cargo install".into());
    }
    local
}

/// A `cargo` command without the variables `cargo bench` set for this
/// process (package name, manifest dir, ...): build scripts that watch
/// them would otherwise see a change and rebuild on every run.
fn cargo_cmd() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        let injected = [
            "CARGO_PKG_",
            "CARGO_MANIFEST_",
            "CARGO_CRATE_",
            "CARGO_BIN_",
            "CARGO_PRIMARY_",
            "CARGO_TARGET_TMPDIR",
            "CARGO_RUSTC_CURRENT_DIR",
        ]
        .iter()
        .any(|p| k.starts_with(p));
        if injected || k == "OUT_DIR" || k == "CARGO" {
            cmd.env_remove(&*k);
        }
    }
    cmd.current_dir(workspace_root());
    cmd
}

fn build_binaries(o: &Opts) {
    let t = Instant::now();
    let ok = cargo_cmd()
        // The bench profile (release settings, same output directory): the
        // one `cargo bench` built `scribe` and this harness with, so the
        // shared crates are not rebuilt for a second profile.
        .args([
            "build",
            "--profile",
            "bench",
            "-p",
            "scribe-server",
            "--bin",
            "scribe-server",
        ])
        .current_dir(workspace_root())
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "cargo build --profile bench -p scribe-server failed");
    if o.wants("LOAD") {
        let ok = cargo_cmd()
            .args([
                "bench",
                "-p",
                "scribe-server",
                "--bench",
                "load",
                "--no-run",
            ])
            .current_dir(workspace_root())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "cargo bench --no-run (load) failed");
    }
    eprintln!(
        "compare: release binaries ready in {:.1} s",
        t.elapsed().as_secs_f64()
    );
}

impl Bench {
    fn start_servers(&mut self) {
        // Scribe: the real release server binary.
        std::fs::create_dir_all(&self.scribe_data).expect("mkdir");
        let init = self.exec(
            &self.root,
            &self.server_bin,
            &["init", "--data", &self.scribe_data.display().to_string()],
            &[],
        );
        assert!(init.ok, "scribe-server init: {}", init.err);
        let rt = self.root.join("servers/scribe-run");
        let d = Daemon::spawn(
            "scribe-server",
            Command::new(&self.server_bin)
                .arg("serve")
                .arg("--data")
                .arg(&self.scribe_data)
                .args(["--listen", "127.0.0.1:0", "--runtime-dir"])
                .arg(&rt),
            &self.logs.join("server-scribe.log"),
        );
        self.daemons.push(d);
        let t = Instant::now();
        let addr: SocketAddr = loop {
            if let Ok(s) = std::fs::read_to_string(rt.join("listen")) {
                if let Ok(a) = s.trim().parse() {
                    break a;
                }
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "scribe-server did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        self.scribe_proxy = Some(Proxy::start(addr).expect("proxy"));

        // Git: git daemon with receive-pack enabled.
        std::fs::create_dir_all(&self.git_root).expect("mkdir");
        let port = free_port();
        let mut cmd = Command::new("git");
        self.env(&mut cmd);
        cmd.arg("daemon")
            .args(["--reuseaddr", "--listen=127.0.0.1", "--export-all"])
            .args(["--enable=receive-pack", "--informative-errors"])
            .arg(format!("--port={port}"))
            .arg(format!("--base-path={}", self.git_root.display()))
            .arg(&self.git_root);
        let d = Daemon::spawn("git daemon", &mut cmd, &self.logs.join("server-git.log"));
        self.daemons.push(d);
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        wait_port(addr, "git daemon");
        self.git_proxy = Some(Proxy::start(addr).expect("proxy"));

        // Git LFS: rudolfs, local disk back end (no encryption key: the
        // cheapest configuration it offers).
        std::fs::create_dir_all(&self.lfs_root).expect("mkdir");
        let port = free_port();
        let mut cmd = Command::new(&self.rudolfs_bin);
        cmd.arg(format!("--host=127.0.0.1:{port}"))
            .arg("--log-level=warn")
            .arg("local")
            .arg(format!("--path={}", self.lfs_root.display()));
        let d = Daemon::spawn("rudolfs", &mut cmd, &self.logs.join("server-lfs.log"));
        self.daemons.push(d);
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        wait_port(addr, "rudolfs");
        self.lfs_proxy = Some(Proxy::start(addr).expect("proxy"));

        // Subversion: svnserve over svn://.
        std::fs::create_dir_all(&self.svn_root).expect("mkdir");
        let port = free_port();
        let mut cmd = Command::new("svnserve");
        cmd.args(["-d", "--foreground", "--listen-host", "127.0.0.1"])
            .arg(format!("--listen-port={port}"))
            .arg("-r")
            .arg(&self.svn_root);
        let d = Daemon::spawn("svnserve", &mut cmd, &self.logs.join("server-svn.log"));
        self.daemons.push(d);
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        wait_port(addr, "svnserve");
        self.svn_proxy = Some(Proxy::start(addr).expect("proxy"));
    }

    /// A new, empty repository on `t`'s server and a workspace for it at
    /// `ws` (for Subversion a plain directory: `svn import` reads it).
    fn prepare(&self, t: Tool, name: &str, ws: &Path) {
        rm(ws);
        match t {
            Tool::Scribe => {
                let url = self.scribe_url();
                self.scribe(&self.root, &["repo", "create", name, "--server", &url]);
                self.scribe(
                    &self.root,
                    &[
                        "workspace",
                        "create",
                        &ws.display().to_string(),
                        "--server",
                        &url,
                        "--repo",
                        name,
                    ],
                );
            }
            Tool::Git | Tool::Lfs => {
                let bare = self.bare(t, name);
                rm(&bare);
                self.git(
                    &self.root,
                    &["init", "-q", "--bare", &bare.display().to_string()],
                );
                self.git(&bare, &["config", "uploadpack.allowFilter", "true"]);
                self.git(&bare, &["config", "uploadpack.allowAnySHA1InWant", "true"]);
                std::fs::create_dir_all(ws).expect("mkdir");
                self.git(ws, &["init", "-q", "-b", "main"]);
                self.git(ws, &["remote", "add", "origin", &self.git_url(t, name)]);
                if t == Tool::Lfs {
                    self.git(ws, &["lfs", "install", "--local"]);
                    self.git(ws, &["lfs", "track", "*.bin"]);
                    std::fs::write(
                        ws.join(".lfsconfig"),
                        format!("[lfs]\n\turl = {}\n", self.lfs_url(name)),
                    )
                    .expect("lfsconfig");
                }
            }
            Tool::Svn => {
                let repo = self.svn_root.join(name);
                rm(&repo);
                self.run(
                    &self.root,
                    Path::new("svnadmin"),
                    &["create", &repo.display().to_string()],
                    &[],
                );
                std::fs::write(
                    repo.join("conf/svnserve.conf"),
                    "[general]\nanon-access = none\nauth-access = write\npassword-db = passwd\n",
                )
                .expect("svnserve.conf");
                std::fs::write(
                    repo.join("conf/passwd"),
                    "[users]\nalice = alice\nbob = bob\nbench = bench\n",
                )
                .expect("passwd");
                std::fs::create_dir_all(ws).expect("mkdir");
            }
        }
    }

    /// Make `ws` (prepared for `name`) a Subversion working copy of the
    /// still-empty repository, for the workloads that commit from one.
    fn svn_checkout_empty(&self, name: &str, ws: &Path, user: &str) {
        rm(ws);
        self.svn(
            &self.root,
            user,
            &[
                "checkout",
                "-q",
                &self.svn_url(name),
                &ws.display().to_string(),
            ],
        );
    }

    /// The first import of everything under `ws`: the measured commands.
    fn import(&self, t: Tool, name: &str, ws: &Path, steps: &mut Vec<Step>) {
        match t {
            Tool::Scribe => {
                steps.push(self.scribe(ws, &["add", "."]));
                steps.push(self.scribe(ws, &["submit", "-m", "import"]));
            }
            Tool::Git | Tool::Lfs => {
                steps.push(self.git(ws, &["add", "-A"]));
                steps.push(self.git(ws, &["commit", "-q", "-m", "import"]));
                steps.push(self.git(ws, &["push", "-q", "origin", "main"]));
            }
            Tool::Svn => {
                let url = self.svn_url(name);
                steps.push(self.svn(
                    &self.root,
                    "bench",
                    &[
                        "import",
                        "-q",
                        "-m",
                        "import",
                        &ws.display().to_string(),
                        &url,
                    ],
                ));
            }
        }
    }

    /// Commit what is opened/modified in a working copy (Subversion: a checkout).
    fn commit_all(&self, t: Tool, ws: &Path, msg: &str, steps: &mut Vec<Step>) {
        match t {
            Tool::Scribe => steps.push(self.scribe(ws, &["submit", "-m", msg])),
            Tool::Git | Tool::Lfs => {
                steps.push(self.git(ws, &["commit", "-q", "-a", "-m", msg]));
                steps.push(self.git(ws, &["push", "-q", "origin", "main"]));
            }
            Tool::Svn => steps.push(self.svn(ws, "bench", &["commit", "-q", "-m", msg])),
        }
    }
}

// ---------------------------------------------------------------- workloads

impl Bench {
    fn machine_limits(&mut self, files: &[FileSpec]) -> (f64, f64) {
        let dir = self.root.join("limits");
        rm(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        // BLAKE3 on every core over the W1 large bytes, in memory.
        let mut hash = Vec::new();
        for _ in 0..3 {
            let mut secs = 0.0;
            for f in files {
                let buf = bytes_of(self.o.seed, f.id, f.size as usize);
                let t = Instant::now();
                let mut h = blake3::Hasher::new();
                h.update_rayon(&buf);
                std::hint::black_box(h.finalize());
                secs += t.elapsed().as_secs_f64();
            }
            hash.push(total(files) as f64 / secs / 1e6);
        }
        // Sequential write + fsync of the same sizes, one file at a time.
        let mut write = Vec::new();
        let buf = bytes_of(self.o.seed, 5, (4 * MIB) as usize);
        for _ in 0..2 {
            platform::sync_all();
            self.warm_memory(2 * total(files));
            let t = Instant::now();
            for (i, f) in files.iter().enumerate() {
                use std::io::Write;
                let mut out = std::fs::File::create(dir.join(format!("w{i}"))).expect("create");
                let mut left = f.size;
                while left > 0 {
                    let k = left.min(buf.len() as u64) as usize;
                    out.write_all(&buf[..k]).expect("write");
                    left -= k as u64;
                }
                out.sync_all().expect("fsync");
            }
            write.push(total(files) as f64 / t.elapsed().as_secs_f64() / 1e6);
            rm(&dir);
            std::fs::create_dir_all(&dir).expect("mkdir");
        }
        rm(&dir);
        let (h, w) = (median(&hash), median(&write));
        eprintln!("compare: limits: BLAKE3 all-core {h:.0} MB/s, write+fsync {w:.0} MB/s");
        (h, w)
    }

    fn w1(&mut self, label: &str, files: &[FileSpec], runs: usize, keep_last: bool) {
        let key = if label.contains("large") {
            "w1l"
        } else {
            "w1s"
        };
        let mut samples: BTreeMap<Tool, Vec<Sample>> = BTreeMap::new();
        let mut maint: BTreeMap<Tool, Vec<f64>> = BTreeMap::new();
        for run in 0..runs {
            for t in self.o.tools() {
                let name = format!("{key}-{run}");
                let ws = self
                    .work
                    .join(format!("{}-{name}", t.name().replace(' ', "")));
                eprintln!("compare: {label} run {} {}", run + 1, t.name());
                self.prepare(t, &name, &ws);
                materialize(&ws, self.o.seed, files);
                platform::sync_all();
                self.warm_memory(3 * total(files));
                let s = self.measure(t, |steps| self.import(t, &name, &ws, steps));
                samples.entry(t).or_default().push(s);
                if matches!(t, Tool::Git | Tool::Lfs) {
                    // The automatic maintenance `git commit` would have
                    // started in the background on default settings (off
                    // while timed, see main): run to completion, untimed,
                    // and reported beside the row.
                    let m = self.run(
                        &ws,
                        Path::new("git"),
                        &["-c", "gc.auto=6700", "maintenance", "run", "--auto"],
                        &[],
                    );
                    maint.entry(t).or_default().push(m.secs);
                }
                rm(&ws);
                // Keep the disk in bounds: only the last run's server copy
                // stays (W4 clones it); Scribe's repositories stay (no
                // repository removal exists), as do rudolfs objects.
                if run + 1 < runs || !keep_last {
                    match t {
                        Tool::Git | Tool::Lfs => rm(&self.bare(t, &name)),
                        Tool::Svn => rm(&self.svn_root.join(&name)),
                        Tool::Scribe => {}
                    }
                } else {
                    self.w1_large.insert(t, name.clone());
                }
            }
        }
        let desc = format!("{label}: {} files, {}", files.len(), human(total(files)));
        for (t, s) in samples {
            self.push_row(&desc, t, s, true);
            if let Some(m) = maint.get(&t) {
                let list = m.iter().map(|x| format!("{x:.1}")).collect::<Vec<_>>();
                self.note_row(
                    &desc,
                    t,
                    &format!(
                        "not timed: the automatic maintenance the commit starts in the background on default settings, run afterwards to completion: {} s",
                        list.join(", ")
                    ),
                );
            }
        }
    }

    /// What the counting proxy costs: the same transfers straight to a
    /// loopback server and through a proxy with each relay.
    fn proxy_cost(&mut self) {
        let bytes = self.o.bytes(GIB, 64 * MIB);
        let runs = self.o.fast_runs();
        eprintln!(
            "compare: proxy cost, {} MiB per test, {runs} runs",
            bytes >> 20
        );
        self.proxy_cost = proxy::cost(bytes, runs).expect("proxy cost measurement");
    }

    fn w2(&mut self) {
        let files = tree_status(&self.o);
        let runs = self.o.fast_runs();
        let tools: Vec<Tool> = if self.o.svn_status {
            vec![Tool::Scribe, Tool::Git, Tool::Svn]
                .into_iter()
                .filter(|t| self.o.measures(*t))
                .collect()
        } else {
            self.notes.push("W2: Subversion left out (its add + commit of the tree cost 9-25 ms a file in the smoke runs, 15-40 min at 100,000 files); `--svn-status` adds it.".into());
            vec![Tool::Scribe, Tool::Git]
                .into_iter()
                .filter(|t| self.o.measures(*t))
                .collect()
        };
        let mut ws = BTreeMap::new();
        for &t in &tools {
            let w = self.work.join(format!("{}-w2", t.name().replace(' ', "")));
            eprintln!("compare: W2 setup {} ({} files)", t.name(), files.len());
            let t0 = Instant::now();
            match t {
                Tool::Scribe => {
                    self.prepare(t, "w2", &w);
                    materialize(&w, self.o.seed, &files);
                    self.scribe(&w, &["add", "."]);
                    self.scribe(&w, &["submit", "-m", "w2"]);
                }
                Tool::Git => {
                    rm(&w);
                    materialize(&w, self.o.seed, &files);
                    self.git(&w, &["init", "-q", "-b", "main"]);
                    self.git(&w, &["add", "-A"]);
                    self.git(&w, &["commit", "-q", "-m", "w2"]);
                }
                Tool::Svn => {
                    self.prepare(t, "w2", &w);
                    self.svn_checkout_empty("w2", &w, "bench");
                    materialize(&w, self.o.seed, &files);
                    self.run(&w, Path::new("svn"), &["add", "-q", "--force", "."], &[]);
                    self.svn(&w, "bench", &["commit", "-q", "-m", "w2"]);
                }
                Tool::Lfs => unreachable!(),
            }
            self.notes.push(format!(
                "W2 setup of {} (add + commit of {} files, not part of W2's figures): {:.1} s",
                t.name(),
                files.len(),
                t0.elapsed().as_secs_f64()
            ));
            ws.insert(t, w);
        }
        platform::sync_all();
        std::thread::sleep(Duration::from_secs(3));
        let status = |b: &Bench, t: Tool, w: &Path| -> Step {
            match t {
                Tool::Scribe => b.scribe(w, &["status"]),
                Tool::Git => b.git(w, &["status"]),
                _ => b.run(w, Path::new("svn"), &["status"], &[]),
            }
        };
        // Settle: one untimed status each (Scribe records settled fingerprints).
        for &t in &tools {
            status(self, t, &ws[&t]);
        }
        let desc_n = files.len();
        let variant = |b: &mut Bench, label: &str, expect: Option<&str>| {
            let mut samples: BTreeMap<Tool, Vec<Sample>> = BTreeMap::new();
            let mut missed = BTreeMap::new();
            for _ in 0..runs {
                for &t in &tools {
                    let w = &ws[&t];
                    let mut out = String::new();
                    let s = b.measure(t, |steps| {
                        let st = status(b, t, w);
                        out = st.out.clone();
                        steps.push(st);
                    });
                    if let Some(e) = expect {
                        if !out.contains(e) {
                            missed.insert(t, ());
                        }
                    }
                    samples.entry(t).or_default().push(s);
                }
            }
            let desc = format!("W2 status, {desc_n} files: {label}");
            for (t, s) in samples {
                b.push_row(&desc, t, s, false);
                if missed.contains_key(&t) {
                    b.note_row(&desc, t, "did NOT report the changed file");
                }
            }
        };
        variant(self, "clean", None);
        // One file changed: same size, new bytes.
        let victim = &files[files.len() / 2];
        let name = Path::new(&victim.path)
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        for &t in &tools {
            let p = ws[&t].join(&victim.path);
            std::fs::write(&p, bytes_of(self.o.seed, 9, victim.size as usize)).expect("edit");
        }
        std::thread::sleep(Duration::from_secs(3));
        variant(self, "one file changed", Some(&name));
        // Every mtime touched, no content change; the first status after
        // the touch and the ones after it are reported separately.
        let mut first: BTreeMap<Tool, Vec<Sample>> = BTreeMap::new();
        let mut later: BTreeMap<Tool, Vec<Sample>> = BTreeMap::new();
        for _ in 0..runs {
            for &t in &tools {
                let w = ws[&t].clone();
                set_mtime_all(&w, &files, std::time::SystemTime::now());
                std::thread::sleep(Duration::from_secs(3));
                let s = self.measure(t, |steps| steps.push(status(self, t, &w)));
                first.entry(t).or_default().push(s);
                for _ in 0..2 {
                    let s = self.measure(t, |steps| steps.push(status(self, t, &w)));
                    later.entry(t).or_default().push(s);
                }
            }
        }
        let d1 = format!("W2 status, {desc_n} files: every mtime touched, first status");
        let d2 = format!("W2 status, {desc_n} files: every mtime touched, 2nd and 3rd status");
        for (t, s) in first {
            self.push_row(&d1, t, s, false);
        }
        for (t, s) in later {
            self.push_row(&d2, t, s, false);
        }
        if !self.o.keep {
            for w in ws.values() {
                rm(w);
            }
        }
    }

    fn w3(&mut self) {
        let big = self.o.bytes(GIB, 8 * MIB);
        let edit = MIB.min(big / 16);
        let runs = self.o.heavy_runs();
        let spec = FileSpec {
            path: "huge.bin".into(),
            size: big,
            id: 3,
        };
        let mut ws = BTreeMap::new();
        for t in self.o.tools() {
            let w = self.work.join(format!("{}-w3", t.name().replace(' ', "")));
            eprintln!("compare: W3 setup {} ({})", t.name(), human(big));
            self.prepare(t, "w3", &w);
            if t == Tool::Svn {
                self.svn_checkout_empty("w3", &w, "bench");
            }
            materialize(&w, self.o.seed, std::slice::from_ref(&spec));
            let mut steps = Vec::new();
            match t {
                Tool::Svn => {
                    self.svn(&w, "bench", &["add", "-q", "huge.bin"]);
                    self.svn(&w, "bench", &["commit", "-q", "-m", "w3"]);
                }
                _ => self.import(t, "w3", &w, &mut steps),
            }
            ws.insert(t, w);
        }
        let cases = [
            "1 MiB overwritten in the middle",
            "1 MiB inserted in the middle",
            "1 MiB appended",
        ];
        let mut samples: BTreeMap<(usize, Tool), Vec<Sample>> = BTreeMap::new();
        for run in 0..runs {
            for (ci, case) in cases.iter().enumerate() {
                eprintln!("compare: W3 run {}: {case}", run + 1);
                let patch = bytes_of(self.o.seed, 10_000 + (run * 3 + ci) as u64, edit as usize);
                for t in self.o.tools() {
                    let w = ws[&t].clone();
                    let p = w.join("huge.bin");
                    self.warm_memory(3 * big);
                    let s = self.measure(t, |steps| {
                        if t == Tool::Scribe {
                            steps.push(self.scribe(&w, &["edit", "huge.bin"]));
                        }
                        apply_edit(&p, ci, &patch, run);
                        platform::sync_all();
                        self.commit_all(t, &w, "edit", steps);
                    });
                    samples.entry((ci, t)).or_default().push(s);
                }
            }
        }
        for ((ci, t), s) in samples {
            let d = format!(
                "W3 incremental, {} file: {}",
                human(big),
                cases[ci].replace("1 MiB", &human(edit))
            );
            self.push_row(&d, t, s, true);
        }
        if !self.o.keep {
            for w in ws.values() {
                rm(w);
            }
        }
    }

    fn w4(&mut self, files: &[FileSpec]) {
        let runs = self.o.heavy_runs();
        // Reuse W1's last large repository, or import the same tree now.
        for t in self.o.tools() {
            if self.w1_large.contains_key(&t) {
                continue;
            }
            let name = "w4src".to_string();
            let ws = self
                .work
                .join(format!("{}-w4src", t.name().replace(' ', "")));
            eprintln!("compare: W4 setup {}", t.name());
            self.prepare(t, &name, &ws);
            materialize(&ws, self.o.seed, files);
            let mut steps = Vec::new();
            self.import(t, &name, &ws, &mut steps);
            rm(&ws);
            self.w1_large.insert(t, name);
        }
        let want_all = (total(files), files.len());
        let view = "d00";
        let want_view = (
            files
                .iter()
                .filter(|f| f.path.starts_with("d00/"))
                .map(|f| f.size)
                .sum::<u64>(),
            files.iter().filter(|f| f.path.starts_with("d00/")).count(),
        );
        let mut fresh: BTreeMap<Tool, Vec<Sample>> = BTreeMap::new();
        let mut viewed: BTreeMap<Tool, Vec<Sample>> = BTreeMap::new();
        let mut wrong: Vec<(bool, Tool, String)> = Vec::new();
        for run in 0..runs {
            for is_view in [false, true] {
                for t in self.o.tools() {
                    let name = self.w1_large[&t].clone();
                    let ws = self
                        .work
                        .join(format!("{}-w4-{run}", t.name().replace(' ', "")));
                    rm(&ws);
                    platform::sync_all();
                    self.warm_memory(3 * if is_view { want_view.0 } else { want_all.0 });
                    let wss = ws.display().to_string();
                    let s = self.measure(t, |steps| match t {
                        Tool::Scribe => {
                            let url = self.scribe_url();
                            let mut a = vec![
                                "workspace",
                                "create",
                                &wss,
                                "--server",
                                &url,
                                "--repo",
                                &name,
                            ];
                            if is_view {
                                a.extend(["--view", view]);
                            }
                            steps.push(self.scribe(&self.root, &a));
                        }
                        Tool::Git => {
                            let url = self.git_url(t, &name);
                            if is_view {
                                steps.push(self.git(
                                    &self.root,
                                    &["clone", "-q", "--filter=blob:none", "--sparse", &url, &wss],
                                ));
                                steps.push(self.git(&ws, &["sparse-checkout", "set", view]));
                            } else {
                                steps.push(self.git(&self.root, &["clone", "-q", &url, &wss]));
                            }
                        }
                        Tool::Lfs => {
                            let url = self.git_url(t, &name);
                            let skip = [("GIT_LFS_SKIP_SMUDGE", "1")];
                            let g = Path::new("git");
                            if is_view {
                                steps.push(self.run(
                                    &self.root,
                                    g,
                                    &["clone", "-q", "--sparse", &url, &wss],
                                    &skip,
                                ));
                                steps.push(self.run(
                                    &ws,
                                    g,
                                    &["sparse-checkout", "set", view],
                                    &skip,
                                ));
                                steps.push(self.git(&ws, &["lfs", "pull", "--include", "d00/**"]));
                            } else {
                                steps.push(self.run(
                                    &self.root,
                                    g,
                                    &["clone", "-q", &url, &wss],
                                    &skip,
                                ));
                                steps.push(self.git(&ws, &["lfs", "pull"]));
                            }
                        }
                        Tool::Svn => {
                            let mut url = self.svn_url(&name);
                            if is_view {
                                url = format!("{url}/{view}");
                            }
                            steps.push(self.svn(
                                &self.root,
                                "bench",
                                &["checkout", "-q", &url, &wss],
                            ));
                        }
                    });
                    let got = tree_bytes(&ws);
                    let want = if is_view { want_view } else { want_all };
                    if got != want {
                        wrong.push((
                            is_view,
                            t,
                            format!(
                                "got {} files / {} (wanted {} / {})",
                                got.1,
                                human(got.0),
                                want.1,
                                human(want.0)
                            ),
                        ));
                    }
                    if is_view { &mut viewed } else { &mut fresh }
                        .entry(t)
                        .or_default()
                        .push(s);
                    rm(&ws);
                }
            }
        }
        let d1 = format!(
            "W4 fresh workspace, {} files, {}",
            want_all.1,
            human(want_all.0)
        );
        let d2 = format!(
            "W4 view of one folder ({view}/: {} files, {})",
            want_view.1,
            human(want_view.0)
        );
        for (t, s) in fresh {
            self.push_row(&d1, t, s, false);
        }
        for (t, s) in viewed {
            self.push_row(&d2, t, s, false);
        }
        for (v, t, msg) in wrong {
            self.note_row(if v { &d2 } else { &d1 }, t, &format!("WRONG TREE: {msg}"));
        }
    }

    fn w5(&mut self) {
        let n = self.o.count(100, 5);
        let f = "lock/target.bin";
        let spec = FileSpec {
            path: f.into(),
            size: 64 * 1024,
            id: 5,
        };
        let tools: Vec<Tool> = [Tool::Scribe, Tool::Lfs, Tool::Svn]
            .into_iter()
            .filter(|t| self.o.measures(*t))
            .collect();
        let mut a_ws = BTreeMap::new();
        let mut b_ws = BTreeMap::new();
        for t in tools.iter().copied() {
            let a = self.work.join(format!("{}-w5a", t.name().replace(' ', "")));
            let b = self.work.join(format!("{}-w5b", t.name().replace(' ', "")));
            rm(&b);
            self.prepare(t, "w5", &a);
            match t {
                Tool::Scribe => {
                    materialize(&a, self.o.seed, std::slice::from_ref(&spec));
                    self.scribe(&a, &["add", "."]);
                    self.scribe(&a, &["submit", "-m", "w5"]);
                    let url = self.scribe_url();
                    self.scribe(
                        &self.root,
                        &[
                            "workspace",
                            "create",
                            &b.display().to_string(),
                            "--server",
                            &url,
                            "--repo",
                            "w5",
                        ],
                    );
                }
                Tool::Lfs => {
                    materialize(&a, self.o.seed, std::slice::from_ref(&spec));
                    let mut steps = Vec::new();
                    self.import(t, "w5", &a, &mut steps);
                    self.git(
                        &self.root,
                        &[
                            "clone",
                            "-q",
                            &self.git_url(t, "w5"),
                            &b.display().to_string(),
                        ],
                    );
                    self.git(&b, &["lfs", "install", "--local"]);
                }
                Tool::Svn => {
                    self.svn_checkout_empty("w5", &a, "alice");
                    materialize(&a, self.o.seed, std::slice::from_ref(&spec));
                    self.svn(&a, "alice", &["add", "-q", "lock"]);
                    self.svn(&a, "alice", &["commit", "-q", "-m", "w5"]);
                    self.svn(
                        &self.root,
                        "bob",
                        &[
                            "checkout",
                            "-q",
                            &self.svn_url("w5"),
                            &b.display().to_string(),
                        ],
                    );
                }
                Tool::Git => unreachable!(),
            }
            a_ws.insert(t, a);
            b_ws.insert(t, b);
        }
        let lock = |b: &Bench, t: Tool, w: &Path, user: &str, on: bool| -> Step {
            let verb = if on { "lock" } else { "unlock" };
            match t {
                Tool::Scribe => b.exec(w, &b.scribe_bin, &[verb, f, "--quiet"], &[]),
                Tool::Lfs => b.exec(w, Path::new("git"), &["lfs", verb, f], &[]),
                _ => {
                    let a = b.svn_args(user, &[verb, "-q", f]);
                    b.exec(w, Path::new("svn"), &a, &[])
                }
            }
        };
        let mut lat: BTreeMap<Tool, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
        let mut samples: BTreeMap<Tool, Vec<Sample>> = BTreeMap::new();
        let mut unsupported: BTreeMap<Tool, String> = BTreeMap::new();
        for _ in 0..n {
            for t in tools.iter().copied() {
                if unsupported.contains_key(&t) {
                    continue;
                }
                let w = a_ws[&t].clone();
                let mut failed = None;
                let mut lu = (0.0, 0.0);
                let s = self.measure(t, |steps| {
                    let l = lock(self, t, &w, "alice", true);
                    if !l.ok {
                        failed = Some(l.err.lines().next().unwrap_or("").to_string());
                        return;
                    }
                    let u = lock(self, t, &w, "alice", false);
                    if !u.ok {
                        failed = Some(u.err.lines().next().unwrap_or("").to_string());
                    }
                    lu = (l.secs, u.secs);
                    steps.push(l);
                    steps.push(u);
                });
                if let Some(e) = failed {
                    unsupported.insert(t, e);
                    continue;
                }
                let e = lat.entry(t).or_default();
                e.0.push(lu.0);
                e.1.push(lu.1);
                samples.entry(t).or_default().push(s);
            }
        }
        // A conflicting submit: A holds the lock, B changes the file and submits.
        let mut refused = BTreeMap::new();
        for t in tools.iter().copied() {
            let (a, b) = (a_ws[&t].clone(), b_ws[&t].clone());
            let held = lock(self, t, &a, "alice", true).ok;
            let p = b.join(f);
            let outcome = match t {
                Tool::Scribe => {
                    self.scribe(&b, &["edit", f]);
                    std::fs::write(&p, bytes_of(self.o.seed, 55, 1000)).expect("edit");
                    self.exec(
                        &b,
                        &self.scribe_bin,
                        &["submit", "-m", "conflict", "--quiet"],
                        &[],
                    )
                }
                Tool::Lfs => {
                    std::fs::write(&p, bytes_of(self.o.seed, 55, 1000)).expect("edit");
                    self.git(&b, &["commit", "-q", "-a", "-m", "conflict"]);
                    self.exec(&b, Path::new("git"), &["push", "-q", "origin", "main"], &[])
                }
                _ => {
                    std::fs::write(&p, bytes_of(self.o.seed, 55, 1000)).expect("edit");
                    let a = self.svn_args("bob", &["commit", "-q", "-m", "conflict"]);
                    self.exec(&b, Path::new("svn"), &a, &[])
                }
            };
            let lines: Vec<&str> = outcome
                .err
                .lines()
                .filter(|l| !l.trim().is_empty())
                .collect();
            let why = lines
                .iter()
                .find(|l| l.to_lowercase().contains("lock"))
                .or(lines.first())
                .copied()
                .unwrap_or("")
                .to_string();
            refused.insert(
                t,
                if outcome.ok {
                    format!(
                        "conflicting submit ACCEPTED (lock held by A: {})",
                        if held { "yes" } else { "no, lock failed" }
                    )
                } else {
                    format!("conflicting submit refused: `{}`", why.trim())
                },
            );
            if held {
                lock(self, t, &a, "alice", false);
            }
        }
        let d = format!("W5 lock + unlock of one file, {n} times");
        for t in tools.iter().copied() {
            if let Some(s) = samples.remove(&t) {
                self.push_row(&d, t, s, false);
                let (l, u) = &lat[&t];
                let note = format!(
                    "lock median {}, unlock median {}",
                    secs(median(l)),
                    secs(median(u))
                );
                self.note_row(&d, t, &note);
            } else {
                self.push_row(&d, t, Vec::new(), false);
                let e = unsupported.get(&t).cloned().unwrap_or_default();
                self.note_row(
                    &d,
                    t,
                    &format!("lock NOT SUPPORTED by the server: `{}`", e.trim()),
                );
            }
            self.note_row(&d, t, &refused[&t]);
        }
        self.notes
            .push("W5: plain Git has no locks; it is left out.".into());
        if !self.o.keep {
            for w in a_ws.values().chain(b_ws.values()) {
                rm(w);
            }
        }
    }

    fn load(&mut self) -> String {
        let secs = ((60.0 * self.o.scale).round() as u64).max(5);
        let args = [
            "bench",
            "-p",
            "scribe-server",
            "--bench",
            "load",
            "--",
            "--seconds",
            &secs.to_string(),
            "--clients",
            "32",
        ];
        eprintln!("compare: cargo {}", args.join(" "));
        let out = cargo_cmd()
            .args(args)
            .current_dir(workspace_root())
            .stderr(Stdio::inherit())
            .output()
            .expect("cargo bench load");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        format!(
            "`cargo {}` ({}):\n\n{}\n",
            args.join(" "),
            if out.status.success() {
                "exit 0"
            } else {
                "FAILED"
            },
            text.trim()
        )
    }
}

/// Apply W3's edit `case` to the file at `p`: overwrite in the middle,
/// insert in the middle, or append.
fn apply_edit(p: &Path, case: usize, patch: &[u8], run: usize) {
    use std::io::{Seek, SeekFrom, Write};
    let len = std::fs::metadata(p).expect("stat").len();
    // A different, 4 KiB-aligned middle each run.
    let at = ((len / 2) + (run as u64) * 3 * patch.len() as u64) & !4095;
    match case {
        0 => {
            let mut f = std::fs::File::options().write(true).open(p).expect("open");
            f.seek(SeekFrom::Start(at)).expect("seek");
            f.write_all(patch).expect("write");
        }
        1 => {
            let mut v = std::fs::read(p).expect("read");
            let tail = v.split_off(at as usize);
            v.extend_from_slice(patch);
            v.extend_from_slice(&tail);
            std::fs::write(p, v).expect("write");
        }
        _ => {
            let mut f = std::fs::File::options().append(true).open(p).expect("open");
            f.write_all(patch).expect("append");
        }
    }
}

// ---------------------------------------------------------------- estimate

/// A rough estimate of the run's wall time (binaries already built, peers
/// installed), printed before anything runs. The rates are seconds on a
/// quiet 2-core machine, from the by-hand and smoke runs of this session,
/// extrapolated; each workload's real time is printed as it finishes and
/// recorded in the report's notes.
fn estimate(o: &Opts) -> f64 {
    let g = |full: u64| (full as f64 * o.scale) / GIB as f64;
    let runs = o.heavy_runs() as f64;
    let fixed = 20.0; // per workload: repositories, servers, sleeps
                      // limits: 3 x hash, 2 x write + fsync of the W1 large bytes
    let mut s = 30.0 + g(2 * GIB) * 15.0;
    // Only the tools measured count (`--tools`).
    let w = |t: Tool, secs: f64| if o.measures(t) { secs } else { 0.0 };
    // Warming memory before a large run: 3 x its bytes at ~0.5 GB/s.
    let warm = |bytes: f64| if o.warm { bytes * 3.0 / 0.5 } else { 0.0 };
    if o.wants("W1") || o.wants("W1L") {
        // seconds per GiB imported: Scribe 2 (2026-12-03), Git 455 (add
        // 27; push 430: delta search among the 128 MiB files, below Git's
        // 512 MiB bigFileThreshold; 12-02), Git LFS 11, Subversion 11
        // (12-03), writing + flushing each tool's copy 4, warming
        let per_tool = 4.0 + warm(1.0);
        s += fixed
            + runs
                * g(2 * GIB)
                * (2.0
                    + per_tool
                    + w(Tool::Git, 455.0 + per_tool)
                    + w(Tool::Lfs, 11.0 + per_tool)
                    + w(Tool::Svn, 11.0 + per_tool));
    }
    if o.wants("W1") || o.wants("W1S") {
        // per 20,000 small files: Scribe 10, Git 75 + its maintenance
        // afterwards 120 (untimed), Git LFS 40 + 50, Subversion 250
        // (~12 ms a file), writing 3 each
        s += fixed
            + runs
                * (o.scale
                    * (13.0 + w(Tool::Git, 198.0) + w(Tool::Lfs, 93.0) + w(Tool::Svn, 253.0))
                    + 4.0);
    }
    if o.wants("W2") {
        // setup per 100,000 files: Scribe 50, Git 20 (Subversion ~ 1 hour, opt-in)
        let svn = if o.svn_status { 3000.0 } else { 0.0 };
        // 4 variants x runs x tools, 3 s settle sleeps, touching 100,000 files ~ 2 s
        s += fixed + o.scale * (70.0 + svn) + o.fast_runs() as f64 * 2.0 * (8.0 + 6.0 * o.scale);
    }
    if o.wants("W3") {
        // setup per GiB: 8 + 90 + 20 + 40 + writing 16;
        // each of 3 edits per run: Git 90 (deflate on add, again on push,
        // again unpacking on the server), Git LFS 18, Subversion 20,
        // Scribe 3, applying 4 x 3
        s += fixed
            + g(GIB) * (24.0 + w(Tool::Git, 90.0) + w(Tool::Lfs, 20.0) + w(Tool::Svn, 40.0))
            + runs
                * 3.0
                * (g(GIB)
                    * (3.0
                        + w(Tool::Git, 90.0)
                        + w(Tool::Lfs, 18.0)
                        + w(Tool::Svn, 20.0)
                        + o.tools.len() as f64 * (3.0 + warm(1.0)))
                    + 1.0);
    }
    if o.wants("W4") {
        let setup = if o.wants("W1") || o.wants("W1L") {
            0.0
        } else {
            g(2 * GIB) * (6.0 + w(Tool::Git, 459.0) + w(Tool::Lfs, 15.0) + w(Tool::Svn, 15.0))
        };
        // per GiB fresh (12-02): Scribe 10, Git 393 (its clone packs the
        // objects on the server), Git LFS 11, Subversion 15; a view costs
        // about a quarter more; warming before each of the 2 x tools runs
        s += fixed
            + setup
            + runs
                * g(2 * GIB)
                * ((10.0 + w(Tool::Git, 393.0) + w(Tool::Lfs, 11.0) + w(Tool::Svn, 15.0)) * 1.25
                    + o.tools.len() as f64 * warm(1.25));
    }
    if o.wants("PROXY") {
        // 4 tests x 3 transfers x runs, about 1 s per GiB moved
        s += o.fast_runs() as f64 * 3.0 * 4.0 * g(GIB).max(1.0 / 16.0);
    }
    if o.wants("W5") {
        s += fixed + o.count(100, 5) as f64 * 0.15;
    }
    if o.wants("LOAD") {
        s += ((60.0 * o.scale).round()).max(5.0) + 30.0;
    }
    s
}

// ---------------------------------------------------------------- report

fn report(
    b: &Bench,
    limits: (f64, f64),
    load: &str,
    started: &str,
    wall: f64,
    est: f64,
    versions: &[String],
) -> String {
    use std::fmt::Write;
    let o = &b.o;
    let mut md = String::new();
    let smoke = (o.scale - 1.0).abs() > 1e-9;
    writeln!(md, "# Side by side: Scribe, Git, Git LFS, Subversion\n").ok();
    if smoke {
        writeln!(
            md,
            "> **SMOKE RUN at --scale {} ({}x the issue's sizes): checks that the harness works end to end; NOT the real figures.** \
             At this scale process start-up and fixed costs dominate; ratios say little about full-size behaviour.\n",
            o.scale, o.scale
        )
        .ok();
    }
    writeln!(md, "Produced by the harness in `scribe-client/benches/compare/` (see `docs/performance.md` for the full-run command):\n").ok();
    writeln!(
        md,
        "```sh\ncargo bench -p scribe-client --bench compare -- {}\n```\n",
        o.args.join(" ")
    )
    .ok();
    writeln!(
        md,
        "- started {started}; wall time {:.1} min (estimated beforehand: {:.1} min)",
        wall / 60.0,
        est / 60.0
    )
    .ok();
    writeln!(
        md,
        "- machine: {} cores, {} RAM, load average at start/end {}",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0),
        std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| m.lines().next().and_then(|l| l
                .trim_start_matches("MemTotal:")
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()))
            .map(|kib| human(kib * 1024))
            .unwrap_or_default(),
        b.notes
            .iter()
            .find(|n| n.starts_with("load "))
            .map(|n| n.trim_start_matches("load "))
            .unwrap_or("?")
    )
    .ok();
    for v in versions {
        writeln!(md, "- {v}").ok();
    }
    writeln!(
        md,
        "- seed {}, scale {}, runs: {} (W1, W3, W4) / {} (the others)\n",
        o.seed,
        o.scale,
        o.heavy_runs(),
        o.fast_runs()
    )
    .ok();
    writeln!(md, "## The machine's limits, measured in this run\n").ok();
    writeln!(md, "| limit | figure |\n|---|---|").ok();
    writeln!(
        md,
        "| BLAKE3 on all cores over the W1 large bytes (in memory, median of 3) | {:.0} MB/s |",
        limits.0
    )
    .ok();
    writeln!(
        md,
        "| sequential write + fsync of the same sizes (median of 2) | {:.0} MB/s |",
        limits.1
    )
    .ok();
    writeln!(
        md,
        "| min(hash, write) | {:.0} MB/s; 70% of it: {:.0} MB/s |\n",
        limits.0.min(limits.1),
        0.7 * limits.0.min(limits.1)
    )
    .ok();
    if !b.proxy_cost.is_empty() {
        proxy_section(&mut md, &b.proxy_cost);
    }
    writeln!(md, "## Results (medians over alternated runs)\n").ok();
    writeln!(md, "Time is the sum of the tool's own commands (nothing the harness does between them). Ratio = the tool's median time ÷ Scribe's (above 1: Scribe is faster). Bytes sent are counted by the harness's TCP proxy between client and server (up = client to server, down = server to client, payload bytes); bytes stored are the growth of the server's data directories (apparent file sizes). Peak RSS is the largest `ru_maxrss` of the measured client commands (each with its waited-for children, from `wait4`).\n").ok();
    writeln!(md, "| workload | tool | median time | ratio to Scribe | bytes stored | bytes sent (up / down) | peak RSS | runs (s) | notes |").ok();
    writeln!(md, "|---|---|---|---|---|---|---|---|---|").ok();
    let mut order: Vec<&str> = Vec::new();
    for r in &b.rows {
        if !order.contains(&r.workload.as_str()) {
            order.push(&r.workload);
        }
    }
    for w in order {
        let scribe = b
            .rows
            .iter()
            .find(|r| r.workload == w && r.tool == Tool::Scribe)
            .map(|r| median(&r.samples.iter().map(|s| s.secs).collect::<Vec<_>>()))
            .unwrap_or(f64::NAN);
        for r in b.rows.iter().filter(|r| r.workload == w) {
            let t: Vec<f64> = r.samples.iter().map(|s| s.secs).collect();
            let m = median(&t);
            let ratio = if r.samples.is_empty() || !scribe.is_finite() {
                "—".into()
            } else {
                format!("{:.2}", m / scribe)
            };
            let stored = if r.stored && !r.samples.is_empty() {
                human(median_u(
                    &r.samples.iter().map(|s| s.stored).collect::<Vec<_>>(),
                ))
            } else {
                "—".into()
            };
            let sent = if r.samples.is_empty() {
                "—".into()
            } else {
                format!(
                    "{} / {}",
                    human(median_u(
                        &r.samples.iter().map(|s| s.up).collect::<Vec<_>>()
                    )),
                    human(median_u(
                        &r.samples.iter().map(|s| s.down).collect::<Vec<_>>()
                    ))
                )
            };
            let rss = if r.samples.is_empty() {
                "—".into()
            } else {
                human(r.samples.iter().map(|s| s.max_rss).max().unwrap_or(0))
            };
            let mut note = r.note.clone();
            let reads: Vec<u64> = r.samples.iter().filter_map(|s| s.read).collect();
            if w.starts_with("W2") && !reads.is_empty() {
                if !note.is_empty() {
                    note.push_str("; ");
                }
                note.push_str(&format!("read(2) {}", human(median_u(&reads))));
            }
            let runs = t
                .iter()
                .map(|x| format!("{x:.3}"))
                .collect::<Vec<_>>()
                .join(", ");
            writeln!(
                md,
                "| {w} | {} | {} | {ratio} | {stored} | {sent} | {rss} | {runs} | {note} |",
                r.tool.name(),
                secs(m)
            )
            .ok();
        }
    }
    writeln!(md, "\n## Targets\n").ok();
    for line in targets(b, limits) {
        writeln!(md, "- {line}").ok();
    }
    writeln!(md, "\n{}", include_str!("method.md")).ok();
    if !load.is_empty() {
        writeln!(
            md,
            "\n## Server side: 32 concurrent clients (the existing load bench)\n\n{load}"
        )
        .ok();
    }
    writeln!(md, "\n## Notes from this run\n").ok();
    for n in b.notes.iter().filter(|n| !n.starts_with("load ")) {
        writeln!(md, "- {n}").ok();
    }
    for d in &b.daemons {
        writeln!(
            md,
            "- server {} peak RSS over the whole run: {}",
            d.name,
            human(d.max_rss)
        )
        .ok();
    }
    md
}

/// The proxy-cost table (`--only PROXY`).
fn proxy_section(md: &mut String, rows: &[proxy::CostRow]) {
    use std::fmt::Write;
    let best = proxy::Relay::best();
    writeln!(md, "## The counting proxy's cost, measured in this run\n").ok();
    writeln!(
        md,
        "The same transfers straight to a loopback test server and through a proxy (medians over alternated runs; \
         every tool's proxy in this run uses {}). Cost = how much the harness's proxy lowers the figure.\n",
        best.name()
    )
    .ok();
    let Some(first) = rows.first() else { return };
    write!(md, "| test | unit | direct |").ok();
    for (r, _) in &first.via {
        write!(md, " via proxy: {} |", r.name()).ok();
    }
    writeln!(md, " cost of the harness's proxy |").ok();
    writeln!(md, "|---|---|---|{}---|", "---|".repeat(first.via.len())).ok();
    for row in rows {
        let d = median(&row.direct);
        let fmt = |x: f64| {
            if row.higher_is_better {
                format!("{x:.0}")
            } else {
                format!("{x:.1}")
            }
        };
        write!(md, "| {} | {} | {} |", row.test, row.unit, fmt(d)).ok();
        let mut cost = String::new();
        for (r, xs) in &row.via {
            let m = median(xs);
            write!(md, " {} |", fmt(m)).ok();
            if *r == best {
                cost = if row.higher_is_better {
                    format!("{:.0} % slower", (1.0 - m / d) * 100.0)
                } else {
                    format!("+{:.1} µs per exchange", m - d)
                };
            }
        }
        writeln!(md, " {cost} |").ok();
    }
    writeln!(md).ok();
    writeln!(
        md,
        "CPU seconds per GiB moved (the whole harness process: test client, test server and, through a proxy, the proxy; \
         its difference to direct is the proxy's own CPU, which the tools' clients and servers compete with on this machine):\n"
    )
    .ok();
    write!(md, "| test | direct |").ok();
    for (r, _) in &first.via {
        write!(md, " via proxy: {} |", r.name()).ok();
    }
    writeln!(md).ok();
    writeln!(md, "|---|---|{}", "---|".repeat(first.via.len())).ok();
    for row in rows.iter().filter(|r| r.higher_is_better) {
        write!(md, "| {} | {:.2} s |", row.test, median(&row.cpu_direct)).ok();
        for (_, xs) in &row.cpu_via {
            write!(md, " {:.2} s |", median(xs)).ok();
        }
        writeln!(md).ok();
    }
    writeln!(md).ok();
    for row in rows {
        let list = |xs: &[f64]| {
            xs.iter()
                .map(|x| format!("{x:.1}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        write!(md, "- {}: direct {}", row.test, list(&row.direct)).ok();
        for (r, xs) in &row.via {
            write!(md, "; {} {}", r.name(), list(xs)).ok();
        }
        writeln!(md).ok();
    }
    writeln!(md).ok();
}

fn row_median(b: &Bench, prefix: &str, t: Tool, f: impl Fn(&Sample) -> f64) -> f64 {
    b.rows
        .iter()
        .find(|r| r.workload.starts_with(prefix) && r.tool == t && !r.samples.is_empty())
        .map(|r| median(&r.samples.iter().map(&f).collect::<Vec<_>>()))
        .unwrap_or(f64::NAN)
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "**met**"
    } else {
        "**not met**"
    }
}

fn targets(b: &Bench, limits: (f64, f64)) -> Vec<String> {
    let mut v = Vec::new();
    let t = |p: &str, tool| row_median(b, p, tool, |s| s.secs);
    let (s, g, l) = (
        t("W1 large", Tool::Scribe),
        t("W1 large", Tool::Git),
        t("W1 large", Tool::Lfs),
    );
    if s.is_finite() {
        let bytes = total(&tree_large(&b.o)) as f64;
        let rate = bytes / s / 1e6;
        let floor = 0.7 * limits.0.min(limits.1);
        for (peer, time, want) in [("Git", g, 5.0), ("Git LFS", l, 2.0)] {
            v.push(if time.is_finite() {
                format!(
                    "W1 large, Scribe ≥ {want}x faster than {peer}: {:.1}x, {}",
                    time / s,
                    verdict(time / s >= want)
                )
            } else {
                format!("W1 large, Scribe ≥ {want}x faster than {peer}: not measured in this run (`--tools`)")
            });
        }
        v.push(format!(
            "W1 large, Scribe ≥ 70% of min(BLAKE3 all-core, write): {rate:.0} MB/s = {:.0}% of {:.0} MB/s, {}",
            100.0 * rate / limits.0.min(limits.1),
            limits.0.min(limits.1),
            verdict(rate >= floor)
        ));
    }
    for r in b
        .rows
        .iter()
        .filter(|r| r.workload.starts_with("W2") && r.tool == Tool::Scribe)
    {
        let s = median(&r.samples.iter().map(|x| x.secs).collect::<Vec<_>>());
        let g = row_median(b, &r.workload, Tool::Git, |x| x.secs);
        v.push(format!(
            "{}: Scribe no slower than git status: {} vs {}, {}",
            r.workload,
            secs(s),
            secs(g),
            verdict(s <= g)
        ));
    }
    for case in ["overwritten", "inserted"] {
        let find = |tool| {
            b.rows
                .iter()
                .find(|r| {
                    r.workload.starts_with("W3") && r.workload.contains(case) && r.tool == tool
                })
                .map(|r| {
                    (
                        median_u(&r.samples.iter().map(|x| x.stored).collect::<Vec<_>>()) as f64,
                        median_u(&r.samples.iter().map(|x| x.up).collect::<Vec<_>>()) as f64,
                    )
                })
        };
        if let (Some(s), Some(l)) = (find(Tool::Scribe), find(Tool::Lfs)) {
            v.push(format!(
                "W3 {case}: Scribe stores and sends < 4% of Git LFS: stored {:.1}%, sent {:.1}%, {}",
                100.0 * s.0 / l.0,
                100.0 * s.1 / l.1,
                verdict(s.0 < 0.04 * l.0 && s.1 < 0.04 * l.1)
            ));
        }
    }
    if let Some(r) = b
        .rows
        .iter()
        .find(|r| r.workload.starts_with("W5") && r.tool == Tool::Scribe)
    {
        v.push(format!(
            "W5 lock/unlock median under 20 ms: {}",
            r.note.split(';').next().unwrap_or("")
        ));
        let ok = r.note.split(';').next().unwrap_or("").split(',').all(|p| {
            p.split_whitespace()
                .nth(2)
                .and_then(|x| x.parse::<f64>().ok())
                .is_some_and(|ms| ms < 20.0)
                && p.contains(" ms")
        });
        if let Some(last) = v.last_mut() {
            last.push_str(&format!(", {}", verdict(ok)));
        }
    }
    v
}

// ---------------------------------------------------------------- main

/// `--launch STATFILE PROG ARGS...`: run PROG and write its wall time,
/// peak RSS and bytes read to STATFILE; exit with its exit code.
fn launch(args: &[String]) -> ! {
    let (stat, prog) = (&args[0], &args[1]);
    let t = Instant::now();
    match Command::new(prog).args(&args[2..]).spawn() {
        Err(e) => {
            eprintln!("compare launcher: cannot run {prog}: {e}");
            std::process::exit(127)
        }
        Ok(c) => {
            let e = platform::wait(c).expect("wait");
            let secs = t.elapsed().as_secs_f64();
            let read = e.read_bytes.map_or("-".to_string(), |r| r.to_string());
            std::fs::write(stat, format!("{secs} {} {read}\n", e.max_rss)).expect("stat file");
            std::process::exit(e.code)
        }
    }
}

fn main() {
    let raw: Vec<String> = std::env::args().collect();
    if raw.len() >= 4 && raw[1] == "--launch" {
        launch(&raw[2..]);
    }
    let o = opts();
    let est = estimate(&o);
    println!(
        "compare: scale {}, estimated wall time {:.1} min (rough model, 2-core machine; see docs/performance-compare.md)",
        o.scale,
        est / 60.0
    );
    if o.args.iter().any(|a| a == "--estimate") {
        return;
    }
    let started_at = Instant::now();
    let started =
        shell_out("date", &["-u", "+%Y-%m-%d %H:%M UTC"]).unwrap_or_else(|| "unknown".into());
    std::fs::create_dir_all(&o.dir).expect("--dir");
    let root = o.dir.join(format!("run-{}", std::process::id()));
    rm(&root);
    let mut notes = vec![format!("load {}", loadavg())];
    let rudolfs_bin = install_peers(&o, &o.dir.join("tools"), &mut notes);
    build_binaries(&o);
    let built_scribe = PathBuf::from(env!("CARGO_BIN_EXE_scribe"));
    let built_server =
        built_scribe.with_file_name(format!("scribe-server{}", std::env::consts::EXE_SUFFIX));
    assert!(
        built_server.exists(),
        "{} was not built",
        built_server.display()
    );
    // Private copies of the measured binaries and of this harness (the
    // launcher of every measured command): a rebuild in the target
    // directory during a run must neither kill the run nor mix versions.
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    let copy = |from: &Path| -> PathBuf {
        let to = bin.join(from.file_name().expect("a file name"));
        std::fs::copy(from, &to).unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
        to
    };
    let scribe_bin = copy(&built_scribe);
    let server_bin = copy(&built_server);
    LAUNCHER
        .set(copy(&std::env::current_exe().expect("own path")))
        .expect("launcher set once");
    let home = root.join("home");
    std::fs::create_dir_all(&home).expect("home");
    let mut b = Bench {
        work: root.join("work"),
        logs: root.join("logs"),
        home: home.clone(),
        scribe_data: root.join("servers/scribe"),
        git_root: root.join("servers/git"),
        lfs_root: root.join("servers/lfs"),
        svn_root: root.join("servers/svn"),
        root: root.clone(),
        o,
        scribe_bin,
        server_bin,
        rudolfs_bin,
        step: AtomicUsize::new(0),
        scribe_proxy: None,
        git_proxy: None,
        lfs_proxy: None,
        svn_proxy: None,
        daemons: Vec::new(),
        rows: Vec::new(),
        notes,
        w1_large: BTreeMap::new(),
        proxy_cost: Vec::new(),
        warmed: Vec::new(),
    };
    std::fs::create_dir_all(&b.logs).expect("logs");
    std::fs::create_dir_all(&b.work).expect("work");
    // Git's automatic maintenance is off (`git commit` past gc.auto's 6,700
    // loose objects starts a detached repack): in the background it deletes
    // loose objects while the timed `git push` runs, and Git LFS's pre-push
    // scan, which reads loose objects itself, then fails with `missing
    // object` (the race of git-lfs issue 6309); it would also take CPU from
    // whichever tool is measured next. W1 runs it after each import,
    // untimed, to completion (in the foreground: autoDetach) and reports it.
    std::fs::write(
        home.join(".gitconfig"),
        "[user]\n\tname = bench\n\temail = bench@example.invalid\n[init]\n\tdefaultBranch = main\n[lfs]\n\tlocksverify = false\n[advice]\n\tdetachedHead = false\n[maintenance]\n\tauto = false\n\tautoDetach = false\n[gc]\n\tauto = 0\n\tautoDetach = false\n",
    )
    .expect("gitconfig");
    b.git(&home, &["lfs", "install", "--skip-repo"]);
    let versions = vec![
        format!(
            "git: {}",
            shell_out("git", &["--version"]).unwrap_or_default()
        ),
        format!(
            "git-lfs: {}",
            shell_out("git", &["lfs", "version"]).unwrap_or_default()
        ),
        format!(
            "subversion: {}",
            shell_out("svn", &["--version", "--quiet"]).unwrap_or_default()
        ),
        format!(
            "rudolfs: {}",
            shell_out(&b.rudolfs_bin.display().to_string(), &["--version"])
                .unwrap_or_else(|| "0.3.8".into())
        ),
        format!(
            "kernel: {}",
            shell_out("uname", &["-sr"]).unwrap_or_default()
        ),
    ];
    b.start_servers();
    let large = tree_large(&b.o);
    let limits = b.machine_limits(&large);
    let phase = |b: &mut Bench, name: &str, f: &dyn Fn(&mut Bench)| {
        if b.o.wants(name) {
            let t = Instant::now();
            f(b);
            let msg = format!(
                "{name} took {:.1} min of wall time",
                t.elapsed().as_secs_f64() / 60.0
            );
            eprintln!("compare: {msg}");
            b.notes.push(msg);
        }
    };
    // `W1` is both halves; `W1L` / `W1S` select one of them.
    if b.o.wants("W1") || b.o.wants("W1L") {
        let t = Instant::now();
        let large = tree_large(&b.o);
        b.w1("W1 large", &large, b.o.heavy_runs(), b.o.wants("W4"));
        let msg = format!(
            "W1 large took {:.1} min of wall time",
            t.elapsed().as_secs_f64() / 60.0
        );
        eprintln!("compare: {msg}");
        b.notes.push(msg);
    }
    if b.o.wants("W1") || b.o.wants("W1S") {
        let t = Instant::now();
        let small = tree_small(&b.o);
        b.w1("W1 small", &small, b.o.heavy_runs(), false);
        let msg = format!(
            "W1 small took {:.1} min of wall time",
            t.elapsed().as_secs_f64() / 60.0
        );
        eprintln!("compare: {msg}");
        b.notes.push(msg);
    }
    phase(&mut b, "PROXY", &|b| b.proxy_cost());
    phase(&mut b, "W2", &|b| b.w2());
    phase(&mut b, "W3", &|b| b.w3());
    phase(&mut b, "W4", &|b| b.w4(&tree_large(&b.o)));
    phase(&mut b, "W5", &|b| b.w5());
    let mut load = String::new();
    if b.o.wants("LOAD") {
        let t = Instant::now();
        load = b.load();
        b.notes.push(format!(
            "LOAD took {:.1} min of wall time",
            t.elapsed().as_secs_f64() / 60.0
        ));
    }
    if let Some(n) = b.notes.iter_mut().find(|n| n.starts_with("load ")) {
        *n = format!("{n} / {}", loadavg());
    }
    if b.o.warm {
        let bytes: u64 = b.warmed.iter().map(|w| w.0).sum();
        let secs: f64 = b.warmed.iter().map(|w| w.1).sum();
        let rates: Vec<f64> = b
            .warmed
            .iter()
            .filter(|w| w.1 > 0.0)
            .map(|w| w.0 as f64 / w.1 / 1e6)
            .collect();
        b.notes.push(format!(
            "memory warmed before each large timed run (the write limit, W1, W3, W4; every tool alike): {} times, {} touched in {:.0} s in all, first-touch rate median {:.0} MB/s (a page the guest used a moment ago: 2800-4500 MB/s); `--cold` turns it off",
            b.warmed.len(),
            human(bytes),
            secs,
            median(&rates)
        ));
    } else {
        b.notes.push("`--cold`: memory was not warmed before the timed runs (each tool pays the virtual machine's first touch of fresh pages)".into());
    }
    for d in &mut b.daemons {
        d.stop();
    }
    let wall = started_at.elapsed().as_secs_f64();
    let md = report(&b, limits, &load, &started, wall, est, &versions);
    if let Some(p) = b.o.out.parent() {
        std::fs::create_dir_all(p).expect("out dir");
    }
    std::fs::write(&b.o.out, &md).expect("write report");
    println!("{md}");
    println!(
        "compare: report written to {}; wall time {:.1} min",
        b.o.out.display(),
        wall / 60.0
    );
    if b.o.keep {
        println!("compare: kept {}", root.display());
    } else {
        rm(&root);
    }
}

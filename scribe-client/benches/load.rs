//! Load test: N concurrent TCP clients on loopback doing mixed
//! submit / sync / lock / read work for a bounded time, then checking that
//! `doctor` is clean and every acknowledged change is present.
//!
//! ```sh
//! cargo bench -p scribe-client --bench load -- --seconds 60 --clients 32
//! cargo bench -p scribe-client --bench load -- --seconds 60 --clients 32 --auth team
//! ```
//!
//! `--auth plain` (default): `scribe://` without TLS; `--auth tls`:
//! `scribes://` with a server certificate only (no client identity);
//! `--auth team`: a team server (`support/team.rs`: a real auth service
//! process, auth-init, TLS client certificates, the `TeamAuthorizer`
//! deciding every request), each client a user of its own with a writer
//! grant. `--auth-recheck MS` (team; default 1000) as `scribe-server serve
//! --auth-recheck`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[path = "support/team.rs"]
mod team;

use scribe_client::{connect, Client, ClientOptions};
use scribe_format::wire::message as m;
use scribe_format::wire::Text;
use scribe_format::{BranchId, ChangeSetId, ErrorCode, ObjectId, OperationId, WorkspaceId};
use scribe_testkit::change::change;
use scribe_testkit::{Env, Transport};

const REPO: &str = "load";

/// The server in this process allocates as the `scribe-server` binary
/// does (mimalloc, no transparent huge pages): under glibc's allocator a
/// sixth of the samples were in malloc and free, which the deployed
/// server does not pay.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
enum Kind {
    Submit,
    /// A submit's first part: `ObjectsMissing`, then `ObjectPutMany` (its
    /// pin and durable store batch).
    Upload,
    /// A submit's second part: the `Submit` request (group acceptance).
    Accept,
    Sync,
    Lock,
    Read,
}

#[derive(Default)]
struct Stats {
    latencies: HashMap<Kind, Vec<Duration>>,
    /// (change, path) of every acknowledged acceptance.
    acked: Vec<(u64, String)>,
    refused: u64,
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn objects_of(path: &str, content: &[u8]) -> (ChangeSetId, Vec<(ObjectId, Vec<u8>)>) {
    let c = change(&[(path, Some(content), 0)]);
    (c.id, c.objects)
}

fn text_arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_else(|| default.to_owned())
}

fn worker(url: String, opts: ClientOptions, t: u32, deadline: Instant, stats: Arc<Mutex<Stats>>) {
    let mut c: Client = connect(&url, &opts).expect("connect");
    let mut ws = [0u8; 16];
    ws[..4].copy_from_slice(&t.to_le_bytes());
    ws[15] = 1;
    let ws = WorkspaceId(ws);
    c.workspace_register(m::WorkspaceRegister {
        repo: REPO.into(),
        workspace: ws,
        branch: String::new(),
        view: vec![],
        label: format!("client {t}"),
        tags: vec![],
    })
    .expect("register");
    let mut local = Stats::default();
    let mut watermark = 0u64;
    let mut i = 0u32;
    let main = BranchId([0; 16]);
    while Instant::now() < deadline {
        i += 1;
        let kind = match i % 10 {
            0..=3 => Kind::Submit,
            4..=6 => Kind::Sync,
            7..=8 => Kind::Lock,
            _ => Kind::Read,
        };
        let start = Instant::now();
        match kind {
            Kind::Submit => {
                let path = format!("c{t:02}/asset{i:06}.bin");
                let content: Vec<u8> = (0..4096u32)
                    .map(|k| (k.wrapping_mul(t + 7) ^ i) as u8)
                    .collect();
                let (id, objects) = objects_of(&path, &content);
                let mut op = [0u8; 16];
                op[..4].copy_from_slice(&t.to_le_bytes());
                op[4..8].copy_from_slice(&i.to_le_bytes());
                let op = OperationId(op);
                c.upload_missing(
                    REPO,
                    ws,
                    op,
                    objects.iter().map(|(id, b)| (*id, b.as_slice())),
                )
                .expect("upload");
                let mid = Instant::now();
                local
                    .latencies
                    .entry(Kind::Upload)
                    .or_default()
                    .push(mid - start);
                let o = c
                    .submit(m::Submit {
                        repo: REPO.into(),
                        operation: op,
                        workspace: ws,
                        branch: main,
                        change_set: id,
                        author: format!("client{t}"),
                        message: Text(format!("asset {i}")),
                        keep_locks: false,
                        timestamp_ms: 0,
                    })
                    .expect("submit");
                local
                    .latencies
                    .entry(Kind::Accept)
                    .or_default()
                    .push(mid.elapsed());
                if o.code == 0 {
                    local.acked.push((o.change, path));
                } else {
                    local.refused += 1;
                }
            }
            Kind::Sync => {
                let mut after = String::new();
                loop {
                    let p = c
                        .delta(m::Delta {
                            repo: REPO.into(),
                            branch: main,
                            from: watermark,
                            to: 0,
                            after: after.clone(),
                            limit: 512,
                        })
                        .expect("delta");
                    if let Some(e) = p.entries.first() {
                        if let Some(st) = &e.state {
                            let _ = c
                                .download(REPO, ObjectId::manifest(st.manifest))
                                .expect("download");
                        }
                    }
                    match p.next {
                        Some(n) => after = n,
                        None => {
                            watermark = p.to;
                            break;
                        }
                    }
                }
            }
            Kind::Lock => {
                let paths = vec![format!("shared/lock{}.psd", i % 8)];
                match c.lock_acquire(m::LockAcquire {
                    repo: REPO.into(),
                    workspace: ws,
                    branch: main,
                    author: "load".into(),
                    paths: paths.clone(),
                }) {
                    Ok(_) => {
                        c.lock_release(m::LockRelease {
                            repo: REPO.into(),
                            workspace: ws,
                            paths,
                        })
                        .expect("release");
                    }
                    Err(e) if e.code() == ErrorCode::LockedByOther => {}
                    Err(e) => panic!("lock: {e}"),
                }
            }
            // Parts of a submit, never drawn.
            Kind::Upload | Kind::Accept => unreachable!(),
            Kind::Read => {
                c.log(m::Log {
                    repo: REPO.into(),
                    branch: main,
                    before: 0,
                    limit: 20,
                })
                .expect("log");
            }
        }
        local
            .latencies
            .entry(kind)
            .or_default()
            .push(start.elapsed());
    }
    let mut s = stats.lock().expect("stats");
    for (k, v) in local.latencies {
        s.latencies.entry(k).or_default().extend(v);
    }
    s.acked.extend(local.acked);
    s.refused += local.refused;
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

/// What serves the load: an [`Env`] (plain or TLS) or a team.
enum Setup {
    Env(Env),
    Team(team::Team),
}

fn main() {
    #[cfg(target_os = "linux")]
    let _ = rustix::thread::disable_transparent_huge_pages(true);
    team::auth_child();
    let seconds = arg("--seconds", 60);
    let clients = arg("--clients", 32) as u32;
    let auth = text_arg("--auth", "plain");
    let (mut setup, service, url, options): (Setup, _, String, Vec<ClientOptions>) =
        match auth.as_str() {
            "plain" | "tls" => {
                let transport = if auth == "tls" {
                    Transport::Tls
                } else {
                    Transport::Tcp
                };
                let env = Env::builder(transport).repo(Some(REPO)).start();
                let opts = ClientOptions {
                    ca_file: (auth == "tls").then(|| env.ca_file()),
                    ..ClientOptions::default()
                };
                let service = env.service().clone();
                let url = env.url().to_string();
                (Setup::Env(env), service, url, vec![opts; clients as usize])
            }
            "team" => {
                let recheck = Duration::from_millis(arg("--auth-recheck", 1000));
                let t = team::Team::start(REPO, clients as usize, 0, recheck);
                let opts = t.users.iter().map(|c| t.options(c)).collect();
                let (service, url) = (t.service.clone(), t.url.clone());
                (Setup::Team(t), service, url, opts)
            }
            other => panic!("--auth plain|tls|team, not {other:?}"),
        };
    let grouped = !std::env::args().any(|a| a == "--no-group");
    service.set_group_acceptance(grouped);
    let stats = Arc::new(Mutex::new(Stats::default()));
    let start = Instant::now();
    let deadline = start + Duration::from_secs(seconds);
    let threads: Vec<_> = options
        .into_iter()
        .enumerate()
        .map(|(t, opts)| {
            let (url, stats) = (url.clone(), stats.clone());
            std::thread::spawn(move || worker(url, opts, t as u32, deadline, stats))
        })
        .collect();
    for t in threads {
        t.join().expect("worker");
    }
    let elapsed = start.elapsed();
    match &mut setup {
        Setup::Env(env) => env.take_listener().shutdown(),
        Setup::Team(t) => {
            if let Some(s) = t.server.take() {
                s.shutdown();
            }
        }
    }

    let mut s = stats.lock().expect("stats");
    let total: usize = s.latencies.values().map(Vec::len).sum();
    println!(
        "auth {auth}, clients {clients}, group acceptance {grouped}, {:.1} s, {total} operations, {:.0} ops/s, {} submissions acknowledged, {} refused",
        elapsed.as_secs_f64(),
        total as f64 / elapsed.as_secs_f64(),
        s.acked.len(),
        s.refused
    );
    println!("| operation | count | ops/s | p50 ms | p90 ms | p99 ms | max ms |");
    println!("|---|---|---|---|---|---|---|");
    let mut kinds: Vec<_> = s.latencies.keys().copied().collect();
    kinds.sort();
    for k in kinds {
        let v = s.latencies.get_mut(&k).expect("kind");
        v.sort();
        println!(
            "| {k:?} | {} | {:.0} | {} | {} | {} | {} |",
            v.len(),
            v.len() as f64 / elapsed.as_secs_f64(),
            ms(pct(v, 0.5)),
            ms(pct(v, 0.9)),
            ms(pct(v, 0.99)),
            ms(*v.last().unwrap_or(&Duration::ZERO))
        );
    }

    // Every acknowledged change is present at the head, and doctor is clean.
    let repo = service.root().open_repository_by_name(REPO).expect("repo");
    let main = repo.main_branch();
    let head = repo.head().expect("head");
    let mut changes: Vec<u64> = s.acked.iter().map(|(c, _)| *c).collect();
    changes.sort();
    changes.dedup();
    assert_eq!(
        changes.len(),
        s.acked.len(),
        "two acknowledgements share a change"
    );
    assert_eq!(
        head,
        changes.len() as u64,
        "head {head} but {} acknowledged",
        changes.len()
    );
    for (change, path) in &s.acked {
        let st = repo
            .stat(main, head, path)
            .expect("stat")
            .unwrap_or_else(|| panic!("acknowledged {path} at {change} is missing"));
        assert_eq!(st.change, *change);
    }
    drop(s);
    let report = repo.doctor().expect("doctor");
    assert!(report.is_clean(), "doctor: {:?}", report.problems);
    let store = service.stores().get(&repo.id()).expect("store");
    let v = store.verify().expect("verify");
    assert!(v.is_clean(), "verify: {:?}", v.problems);
    println!("doctor clean; every acknowledged change present (head {head})");
}

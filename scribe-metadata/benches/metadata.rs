//! Acceptance and read benchmark of scribe-metadata.
//!
//! `cargo bench -p scribe-metadata --bench metadata` runs the standard
//! scenario (100,000-file acceptance, 1,000 single-file submits, stat, list,
//! delta); `-- --million` runs the 1,000,000-entry streamed acceptance and
//! reports its peak memory; `-- --rebuild` runs that acceptance and then
//! rebuilds the database from its recovery archive alone, first from the
//! journal frames, then (after `consolidate`) from the logical base, beside
//! the time to merely read and hash the same archive files. Figures go to
//! `docs/performance-metadata.md`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use scribe_format::changeset::{ChangeSet, Entry, FileState, Mode};
use scribe_format::{FileContentId, ManifestId, ObjectId, OperationId, WorkspaceId};
use scribe_metadata::accept::{Outcome, Submission};
use scribe_metadata::{DataRoot, MemoryObjects, Objects};

fn peak_rss_mib() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    for line in s.lines() {
        if let Some(v) = line.strip_prefix("VmHWM:") {
            let kb: f64 = v
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .unwrap_or(0.0);
            return kb / 1024.0;
        }
    }
    0.0
}

/// User + system CPU seconds of this process so far.
fn cpu_s() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = s
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn p95(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() * 95 / 100]
}

/// A real 8-byte file (acceptance reads every new manifest and its chunk).
fn state(objects: &MemoryObjects, i: u64) -> FileState {
    let content = i.to_le_bytes();
    let chunk = scribe_format::ChunkId::of(&content);
    let content_id = FileContentId::of(&content);
    let manifest = scribe_objects::encode_manifest(
        8,
        &content_id,
        &[scribe_format::manifest::ChunkRef {
            id: chunk,
            length: 8,
        }],
    )
    .expect("manifest");
    let id = ManifestId::of_payload(&manifest);
    objects.insert(ObjectId::chunk(chunk), content.to_vec());
    objects.insert(ObjectId::manifest(id), manifest);
    FileState {
        manifest: id,
        content: content_id,
        size: 8,
        mode: Mode::Regular,
    }
}

fn path(i: u64) -> String {
    format!(
        "assets/d{:03}/s{:02}/file{i:07}.bin",
        i % 100,
        (i / 100) % 10
    )
}

fn submission(
    objects: &MemoryObjects,
    main: scribe_format::BranchId,
    entries: Vec<Entry>,
) -> Submission {
    let cs = ChangeSet::new(entries);
    let id = cs.id().expect("valid change set");
    objects.insert(ObjectId::change_set(id), Vec::new());
    Submission {
        operation: OperationId::random(),
        branch: main,
        workspace: WorkspaceId([1; 16]),
        change_set: cs,
        change_set_id: id,
        author: "bench".into(),
        message: "bench".into(),
        timestamp_ms: 0,
        keep_locks: false,
        required_locks: Vec::new(),
        actor: None,
        inline: Default::default(),
    }
}

fn change(o: &Outcome) -> u64 {
    match o {
        Outcome::Accepted { change, .. } => *change,
        other => panic!("rejected: {other:?}"),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let after = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1).cloned())
    };
    if let Some(dir) = after("--replay") {
        // Replay a kept archive (`--rebuild --keep DIR`) without accepting again.
        let out = tempfile::tempdir().expect("tempdir");
        time_recover(
            std::path::Path::new(&dir),
            &out.path().join("m.redb"),
            "journal frames",
        );
        return;
    }
    let rebuild = std::env::args().any(|a| a == "--rebuild");
    let million = rebuild || std::env::args().any(|a| a == "--million");
    let n: u64 = if million { 1_000_000 } else { 100_000 };
    let dir = tempfile::tempdir().expect("tempdir");
    let objects = MemoryObjects::new();
    let mut root = DataRoot::create(dir.path().join("data")).expect("data root");
    let shared = objects.clone();
    root.set_objects_factory(Box::new(move |_, _| {
        let o: Objects = shared.clone();
        Ok(o)
    }));
    let id = root.create_repository("bench").expect("repo");
    let repo = root.open_repository(id).expect("open");
    let main = repo.main_branch();

    let mut entries: Vec<Entry> = (0..n)
        .map(|i| Entry::add(path(i), state(&objects, i)))
        .collect();
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    let s = submission(&objects, main, entries);
    println!(
        "built {n}-entry change set; peak RSS so far {:.0} MiB",
        peak_rss_mib()
    );
    if million {
        // The store's own bookkeeping is not metadata's: drop it.
        objects.clear();
    }
    // Reset the peak-RSS mark so it measures acceptance (plus the resident change set).
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    println!("resident before acceptance {:.0} MiB", peak_rss_mib());
    let t = Instant::now();
    let cpu0 = cpu_s();
    let c1 = change(&repo.submit(s).expect("submit"));
    let bulk = t.elapsed();
    println!(
        "accept {n} new files (streamed): {:.2} s wall, {:.2} s CPU; peak RSS {:.0} MiB",
        bulk.as_secs_f64(),
        cpu_s() - cpu0,
        peak_rss_mib()
    );
    if rebuild {
        if let Some(keep) = after("--keep") {
            let from = scribe_metadata::archive::archive_dir(&repo.dir().join("metadata.redb"))
                .expect("archive dir");
            std::fs::create_dir_all(&keep).expect("keep dir");
            for e in std::fs::read_dir(&from).expect("archive") {
                let e = e.expect("entry");
                std::fs::copy(e.path(), std::path::Path::new(&keep).join(e.file_name()))
                    .expect("copy");
            }
        }
        rebuild_from_archive(&repo);
        return;
    }
    if million || std::env::args().any(|a| a == "--bulk") {
        return;
    }

    // 1,000 sequential single-file submits, first without fsync, then with.
    let mut rng = scribe_testkit::XorShift64::from_state(0x9e3779b97f4a7c15);
    let mut next = || rng.next_u64();
    let mut bases: std::collections::HashMap<u64, u64> = (0..n).map(|i| (i, c1)).collect();
    let mut run = |skip: bool, count: usize, next: &mut dyn FnMut() -> u64| -> Vec<Duration> {
        repo.set_benchmark_skip_fsync(skip);
        let mut times = Vec::with_capacity(count);
        for k in 0..count {
            let i = next() % n;
            let base = bases[&i];
            let s = submission(
                &objects,
                main,
                vec![Entry::edit(
                    path(i),
                    base,
                    state(&objects, n + k as u64 + i),
                )],
            );
            let t = Instant::now();
            let c = change(&repo.submit(s).expect("submit"));
            times.push(t.elapsed());
            bases.insert(i, c);
        }
        times
    };
    let mut nosync = run(true, 1000, &mut next);
    let mut synced = run(false, 200, &mut next);
    println!(
        "single-file submit, no fsync: median {:.3} ms, p95 {:.3} ms (1,000 submits)",
        median(&mut nosync).as_secs_f64() * 1e3,
        p95(&mut nosync).as_secs_f64() * 1e3
    );
    println!(
        "single-file submit, Immediate: median {:.3} ms, p95 {:.3} ms (200 submits)",
        median(&mut synced).as_secs_f64() * 1e3,
        p95(&mut synced).as_secs_f64() * 1e3
    );
    let head = repo.head().expect("head");

    // stat: one long-lived view, and a fresh view per call.
    let mut view = repo.view().expect("view");
    let mut hot = Vec::new();
    for _ in 0..10_000 {
        let i = next() % n;
        let t = Instant::now();
        let s = view.stat(main, head, &path(i)).expect("stat");
        hot.push(t.elapsed());
        assert!(s.is_some());
    }
    let mut cold = Vec::new();
    for _ in 0..2_000 {
        let i = next() % n;
        let t = Instant::now();
        let s = repo.stat(main, head, &path(i)).expect("stat");
        cold.push(t.elapsed());
        assert!(s.is_some());
    }
    println!(
        "stat: median {:.1} us in a reused view, {:.1} us in a fresh view per call",
        median(&mut hot).as_secs_f64() * 1e6,
        median(&mut cold).as_secs_f64() * 1e6
    );

    // list: direct children of a directory (10 subdirectories), a 100-file directory, recursive 1,000.
    let mut l1 = Vec::new();
    let mut l2 = Vec::new();
    let mut l3 = Vec::new();
    for k in 0..200u64 {
        let d = format!("assets/d{:03}", k % 100);
        let t = Instant::now();
        let p = view.list(main, head, &d, false, None, 1000).expect("list");
        l1.push(t.elapsed());
        assert_eq!(p.entries.len(), 10);
        let t = Instant::now();
        let p = view
            .list(main, head, &format!("{d}/s03"), false, None, 1000)
            .expect("list");
        l2.push(t.elapsed());
        assert_eq!(p.entries.len(), 100);
        let t = Instant::now();
        let p = view.list(main, head, &d, true, None, 1000).expect("list");
        l3.push(t.elapsed());
        assert_eq!(p.entries.len(), 1000);
    }
    println!(
        "list: 10 subdirectories {:.3} ms, 100 files {:.3} ms, 1,000 files recursive {:.3} ms (medians)",
        median(&mut l1).as_secs_f64() * 1e3,
        median(&mut l2).as_secs_f64() * 1e3,
        median(&mut l3).as_secs_f64() * 1e3
    );

    // delta of the last 100 single-file changes out of 100,000 paths.
    let mut d = Vec::new();
    let mut count = 0;
    for _ in 0..100 {
        let mut v = repo.view().expect("view");
        let t = Instant::now();
        let p = v
            .delta(main, head - 100, head, None, 10_000)
            .expect("delta");
        d.push(t.elapsed());
        count = p.entries.len();
    }
    println!(
        "delta of the last 100 changes ({count} paths) over {n}: median {:.3} ms (fresh view)",
        median(&mut d).as_secs_f64() * 1e3
    );
    let t = Instant::now();
    let report = repo.doctor().expect("doctor");
    println!(
        "doctor: {} problems, {} commits, {} pages in {:.2} s",
        report.problems.len(),
        report.commits_checked,
        report.pages_checked,
        t.elapsed().as_secs_f64()
    );
    println!("peak RSS {:.0} MiB", peak_rss_mib());
    let _ = Arc::strong_count(&repo);
}

/// Bytes of the archive files in `dir` read and BLAKE3-hashed: the floor
/// under any rebuild (it must read and check them all).
fn read_and_hash(dir: &std::path::Path) -> (u64, Duration) {
    let t = Instant::now();
    let mut bytes = 0;
    for e in std::fs::read_dir(dir).expect("archive dir") {
        let data = std::fs::read(e.expect("entry").path()).expect("read");
        bytes += data.len() as u64;
        std::hint::black_box(blake3::hash(&data));
    }
    (bytes, t.elapsed())
}

fn rebuild_from_archive(repo: &scribe_metadata::Repository) {
    use scribe_metadata::{archive, consolidate};
    let db = repo.dir().join("metadata.redb");
    let dir = archive::archive_dir(&db).expect("archive dir");
    let out = tempfile::tempdir().expect("tempdir");
    time_recover(&dir, &out.path().join("frames.redb"), "journal frames");
    let t = Instant::now();
    let c = consolidate::consolidate(repo.archive()).expect("consolidate");
    println!(
        "consolidate: base of {} rows in {} tables, {:.0} MiB, {:.2} s",
        c.rows,
        c.tables,
        c.base_bytes as f64 / 1048576.0,
        t.elapsed().as_secs_f64()
    );
    time_recover(&dir, &out.path().join("base.redb"), "the logical base");
}

/// Rebuild `target` from the archive at `dir`, printing the time beside
/// reading and hashing the same files.
fn time_recover(dir: &std::path::Path, target: &std::path::Path, from: &str) {
    let (bytes, read) = read_and_hash(dir);
    let t = Instant::now();
    let done = scribe_metadata::archive::recover(dir, target).expect("recover");
    println!(
        "rebuild from {from}: {} records, {} transactions in {:.2} s \
         (reading and hashing the same {:.0} MiB of archive: {:.2} s)",
        done.records,
        done.transactions,
        t.elapsed().as_secs_f64(),
        bytes as f64 / 1048576.0,
        read.as_secs_f64()
    );
}

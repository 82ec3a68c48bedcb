//! Backup speed against the disk's copy speed (#16: "backup of a data root
//! runs at least at 50 % of the disk's copy speed").
//!
//! `cargo bench -p scribe-metadata --bench backup [-- MIB]` builds a data
//! root with one repository holding MIB (default 400) MiB of 4 MiB chunk
//! objects in packs, then, in the same directory on the same disk, times
//! `cp -r` of the data root (and `cp -r` followed by `sync`, since a backup
//! flushes every file it writes) and `scribe_metadata::backup::backup` of
//! it. `SCRIBE_BENCH_DIR` chooses the directory (default: the system
//! temporary directory). Figures go to `docs/performance.md`.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use scribe_format::ObjectKind;
use scribe_metadata::DataRoot;

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn du(p: &Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(p).unwrap() {
        let e = e.unwrap();
        let m = e.metadata().unwrap();
        n += if m.is_dir() { du(&e.path()) } else { m.len() };
    }
    n
}

fn sync() {
    let _ = Command::new("sync").status();
}

fn main() {
    let size_mib: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(400);
    let base = std::env::var_os("SCRIBE_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::tempdir_in(&base).unwrap();
    let data = dir.path().join("data");
    let id = {
        let root = DataRoot::create(&data).unwrap();
        root.create_repository("bench").unwrap()
    };
    let store_dir = data.join("repos").join(id.to_hex()).join("objects");
    {
        let store = scribe_objects::ObjectStore::open(&store_dir).unwrap();
        let chunk = 4u64 << 20;
        let mut xof = blake3::Hasher::new().update(b"bench").finalize_xof();
        let mut buf = vec![0u8; chunk as usize];
        let mut written = 0;
        while written < size_mib << 20 {
            let batch = store.batch();
            for _ in 0..8 {
                xof.fill(&mut buf);
                batch.put(ObjectKind::Chunk, &buf).unwrap();
                written += chunk;
            }
            batch.commit().unwrap();
        }
    }
    sync();
    let size = du(&data);
    println!(
        "data root: {:.0} MiB in {} (one repository, 4 MiB chunks in packs)",
        mib(size),
        base.display()
    );

    let t = Instant::now();
    let ok = Command::new("cp")
        .arg("-r")
        .arg(&data)
        .arg(dir.path().join("cp"))
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let cp = t.elapsed().as_secs_f64();
    sync();
    let cp_sync = t.elapsed().as_secs_f64();
    std::fs::remove_dir_all(dir.path().join("cp")).unwrap();
    sync();

    let t = Instant::now();
    let report =
        scribe_metadata::backup::backup(&data, &dir.path().join("backup"), &|_, _| {}, &|_| {})
            .unwrap();
    let backup = t.elapsed().as_secs_f64();
    let speed = |s: f64| mib(size) / s;
    println!("cp -r:          {cp:7.2} s  {:7.1} MiB/s", speed(cp));
    println!(
        "cp -r && sync:  {cp_sync:7.2} s  {:7.1} MiB/s",
        speed(cp_sync)
    );
    println!(
        "backup:         {backup:7.2} s  {:7.1} MiB/s  ({} files, {:.0} MiB)",
        speed(backup),
        report.manifest.files.len(),
        mib(report.bytes)
    );
    println!(
        "backup / cp -r: {:.0} %;  backup / (cp -r && sync): {:.0} %",
        100.0 * cp / backup,
        100.0 * cp_sync / backup
    );
}

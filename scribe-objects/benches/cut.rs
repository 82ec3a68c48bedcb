//! Cut-search benchmark (not a test): profile 1's chunk boundaries over
//! incompressible bytes in memory, the fastcdc crate's own search against
//! this crate's (`chunk_boundaries`, eight blocks at once), beside the
//! machine's one-core limits measured in the same run (a copy of the
//! same bytes, and BLAKE3 on one core). The two searches must cut alike;
//! the run stops if they do not.
//!
//! ```text
//! cargo bench -p scribe-objects --bench cut -- [--size-mib 512] [--runs 3]
//! ```

use std::time::Instant;

use fastcdc::v2020::{FastCDC, Normalization};
use scribe_format::limits::{CHUNK_AVG_BYTES, CHUNK_MAX_BYTES, CHUNK_MIN_BYTES};
use scribe_objects::chunk_boundaries;
use scribe_testkit::noise;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("a number"))
        .unwrap_or(default)
}

/// Median MB/s of `runs` timings of `f` over `bytes`.
fn rate(bytes: usize, runs: usize, mut f: impl FnMut()) -> f64 {
    let mut r: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            bytes as f64 / t.elapsed().as_secs_f64() / 1e6
        })
        .collect();
    r.sort_by(f64::total_cmp);
    r[r.len() / 2]
}

fn main() {
    let size = arg("--size-mib", 512) << 20;
    let runs = arg("--runs", 3).max(1);
    let data = noise(size, 31);
    let theirs = || -> Vec<usize> {
        FastCDC::with_level_and_seed(
            &data,
            CHUNK_MIN_BYTES as usize,
            CHUNK_AVG_BYTES as usize,
            CHUNK_MAX_BYTES as usize,
            Normalization::Level1,
            0,
        )
        .map(|c| c.length)
        .collect()
    };
    let expected = theirs();
    assert_eq!(
        chunk_boundaries(&data),
        expected,
        "the searches cut differently"
    );
    let mut copy = vec![0u8; size];
    let copy_rate = rate(size, runs, || copy.copy_from_slice(&data));
    let blake3_rate = rate(size, runs, || {
        std::hint::black_box(blake3::hash(&data));
    });
    let crate_rate = rate(size, runs, || {
        std::hint::black_box(theirs());
    });
    let ours_rate = rate(size, runs, || {
        std::hint::black_box(chunk_boundaries(&data));
    });
    println!(
        "{} MiB, {} chunks, median of {runs} runs (MB/s of input, one core)",
        size >> 20,
        expected.len()
    );
    println!("| search or limit | MB/s |\n|---|---|");
    println!("| fastcdc 5 `FastCDC` (crate's search) | {crate_rate:.0} |");
    println!("| `chunk_boundaries` (eight blocks at once) | {ours_rate:.0} |");
    println!("| limit: copy of the same bytes | {copy_rate:.0} |");
    println!("| limit: BLAKE3, one core | {blake3_rate:.0} |");
    println!("speed-up {:.2}x", ours_rate / crate_rate);
}

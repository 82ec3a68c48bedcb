//! The status cache: every baseline's path, mode and fingerprint in one
//! compact file, `.scribe/_state/status-cache`, read in one sequential read
//! instead of decoding 100,000 `state.redb` rows.
//!
//! It is a pure cache. It names the `baseline-generation` stamp (16 random
//! bytes in `meta`, replaced by every transaction that writes a baseline) and
//! the baseline count it was built from; a file that is missing, corrupt
//! (checksum, structure), of another version, or built from another stamp
//! or count is ignored and rebuilt from `state.redb`. Content ids are not in
//! it: a file whose stat does not prove it unchanged is compared against its
//! `state.redb` row, the truth.
//!
//! ```text
//! [8] "SCRBSTC1" ‖ u32 version 1 ‖ [16] generation ‖ u64 count ‖ u64 blob length
//! ‖ count × (u32 path offset ‖ u16 path length ‖ u8 mode ‖ u8 0 ‖ u64 fp size
//!            ‖ u64 fp mtime s ‖ u32 fp mtime ns ‖ u64 fp recorded ms)
//! ‖ blob (the paths, UTF-8, contiguous, strictly ascending)
//! ‖ [32] BLAKE3 of everything before it
//! ```
//! Integers are little-endian.
//!
//! In memory the index *is* the file's bytes (without the checksum): the
//! decoder checks them in one pass and keeps them; lookups read the fixed
//! 36-byte records in place. Loading 100,000 entries costs the read, the
//! checksum and that pass, no per-entry decoding into a second structure.

use std::path::{Path, PathBuf};

use scribe_format::bytes::Put;
use scribe_format::FormatError;

use crate::error::Result;
use crate::records::Fingerprint;
use crate::state::{StateRead, Workspace};

/// The cache file's name inside `.scribe/_state`.
pub const FILE: &str = "status-cache";
const MAGIC: &[u8; 8] = b"SCRBSTC1";
const VERSION: u32 = 1;
const HEADER: usize = 8 + 4 + 16 + 8 + 8;
const RECORD: usize = 4 + 2 + 1 + 1 + Fingerprint::LEN;
const CHECKSUM: usize = 32;
/// Where the generation lies in the header.
const GENERATION_AT: usize = 12;
/// Above this many bytes the checksum is computed on all cores.
const PARALLEL_CHECKSUM: usize = 1 << 20;

fn le_u16(b: &[u8], at: usize) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(&b[at..at + 2]);
    u16::from_le_bytes(a)
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

fn checksum(body: &[u8]) -> blake3::Hash {
    let mut h = blake3::Hasher::new();
    if body.len() >= PARALLEL_CHECKSUM {
        h.update_rayon(body);
    } else {
        h.update(body);
    }
    h.finalize()
}

/// Every baseline's path, mode and fingerprint, sorted by path: the cache
/// file's body (header, records, path blob), checked when it was made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BaselineIndex {
    body: Vec<u8>,
    count: usize,
    /// Where the path blob starts in `body`.
    blob: usize,
}

/// Collects baselines in path order into a [`BaselineIndex`].
#[derive(Debug, Default)]
struct Builder {
    records: Vec<u8>,
    blob: Vec<u8>,
    last: (usize, usize),
    count: usize,
}

impl Builder {
    /// Append a baseline; `path` must sort after the last one.
    fn push(&mut self, path: &str, mode: u8, fingerprint: Fingerprint) -> bool {
        let last = &self.blob[self.last.0..self.last.1];
        let ordered = self.count == 0 || last < path.as_bytes();
        let (Ok(off), Ok(len)) = (u32::try_from(self.blob.len()), u16::try_from(path.len())) else {
            return false;
        };
        if !ordered || path.is_empty() || mode > 1 {
            return false;
        }
        self.last = (self.blob.len(), self.blob.len() + path.len());
        self.blob.extend_from_slice(path.as_bytes());
        self.records.put_u32(off);
        self.records.put_u16(len);
        self.records.put_u8(mode);
        self.records.put_u8(0);
        fingerprint.write(&mut self.records);
        self.count += 1;
        true
    }

    fn finish(self, generation: [u8; 16]) -> BaselineIndex {
        let mut body = Vec::with_capacity(HEADER + self.records.len() + self.blob.len() + CHECKSUM);
        body.put_bytes(MAGIC);
        body.put_u32(VERSION);
        body.put_bytes(&generation);
        body.put_u64(self.count as u64);
        body.put_u64(self.blob.len() as u64);
        body.put_bytes(&self.records);
        let blob = body.len();
        body.put_bytes(&self.blob);
        BaselineIndex {
            body,
            count: self.count,
            blob,
        }
    }
}

/// Where [`load`] got the index from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheUse {
    /// The cache file was valid for the current stamp.
    Hit,
    /// No cache file: rebuilt.
    Missing,
    /// A cache file for another stamp or count: rebuilt.
    Stale,
    /// An unreadable or malformed cache file: rebuilt.
    Corrupt,
}

impl BaselineIndex {
    /// An empty index for `generation`.
    pub fn new(generation: [u8; 16]) -> BaselineIndex {
        Builder::default().finish(generation)
    }

    /// Build from the baseline table of `read`, for `generation`.
    pub fn from_state(read: &StateRead, generation: [u8; 16]) -> Result<BaselineIndex> {
        let mut out = Builder::default();
        let mut ok = true;
        read.visit_baselines(|path, rec| {
            ok &= out.push(path, rec.mode, rec.fingerprint);
        })?;
        if !ok {
            return Err(crate::WorkspaceError::Corrupt {
                table: "baseline",
                key: String::new(),
                source: FormatError::invalid(
                    "baseline table",
                    "keys must be nonempty, ordered and at most 65,535 bytes",
                ),
            });
        }
        Ok(out.finish(generation))
    }

    /// The stamp this index was built from.
    pub fn generation(&self) -> [u8; 16] {
        let mut g = [0u8; 16];
        g.copy_from_slice(&self.body[GENERATION_AT..GENERATION_AT + 16]);
        g
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The record of entry `i` (`None` when out of range).
    fn record(&self, i: usize) -> Option<&[u8]> {
        if i >= self.count {
            return None;
        }
        let at = HEADER + i * RECORD;
        self.body.get(at..at + RECORD)
    }

    /// The path bytes of entry `i` (empty when out of range).
    fn path_bytes(&self, i: usize) -> &[u8] {
        self.record(i)
            .and_then(|r| {
                let start = self.blob + le_u32(r, 0) as usize;
                self.body.get(start..start + usize::from(le_u16(r, 4)))
            })
            .unwrap_or(&[])
    }

    /// The path bytes of entry `i` after its first `skip` bytes (empty when
    /// out of range or shorter).
    pub fn path_tail(&self, i: usize, skip: usize) -> &[u8] {
        self.path_bytes(i).get(skip..).unwrap_or(&[])
    }

    /// The path of entry `i` ("" when out of range).
    pub fn path(&self, i: usize) -> &str {
        // Checked UTF-8 with char boundaries when the index was made.
        std::str::from_utf8(self.path_bytes(i)).unwrap_or("")
    }

    /// The recorded mode of entry `i` (0 regular, 1 executable).
    pub fn mode(&self, i: usize) -> u8 {
        self.record(i).map_or(0, |r| r[6])
    }

    /// The recorded fingerprint of entry `i`.
    pub fn fingerprint(&self, i: usize) -> Fingerprint {
        self.record(i)
            .map_or_else(Fingerprint::default, |r| Fingerprint {
                size: le_u64(r, 8),
                mtime_s: le_u64(r, 16),
                mtime_ns: le_u32(r, 24),
                recorded_ms: le_u64(r, 28),
                changed: None,
            })
    }

    /// Record a refreshed fingerprint for entry `i` (after `state.redb` got
    /// it under `generation`).
    pub fn refresh(&mut self, i: usize, fingerprint: Fingerprint) {
        if i >= self.count || fingerprint.mtime_ns >= 1_000_000_000 {
            return;
        }
        let at = HEADER + i * RECORD + 8;
        let mut fp = Vec::with_capacity(Fingerprint::LEN);
        fingerprint.write(&mut fp);
        if let Some(dst) = self.body.get_mut(at..at + Fingerprint::LEN) {
            dst.copy_from_slice(&fp);
        }
    }

    /// Re-stamp after a transaction that changed only what [`refresh`] put
    /// here.
    ///
    /// [`refresh`]: BaselineIndex::refresh
    pub fn set_generation(&mut self, generation: [u8; 16]) {
        self.body[GENERATION_AT..GENERATION_AT + 16].copy_from_slice(&generation);
    }

    /// The entry of `path`.
    pub fn position(&self, path: &str) -> Option<usize> {
        self.find_in(0, self.count, 0, path)
    }

    /// The entries `[lo, hi)` whose paths lie under directory `dir`
    /// (`dir/...`; everything for the root `""`).
    pub fn range_under(&self, dir: &str) -> (usize, usize) {
        if dir.is_empty() {
            return (0, self.count);
        }
        let db = dir.as_bytes();
        let below = |pb: &[u8]| -> bool {
            // p < "dir/": compare the first dir.len() bytes, then '/'.
            let n = db.len().min(pb.len());
            match pb[..n].cmp(&db[..n]) {
                std::cmp::Ordering::Less => true,
                std::cmp::Ordering::Greater => false,
                std::cmp::Ordering::Equal => pb.len() <= db.len() || pb[db.len()] < b'/',
            }
        };
        let above = |pb: &[u8]| -> bool {
            // p >= "dir0" ('/' + 1): past everything under "dir/".
            let n = db.len().min(pb.len());
            match pb[..n].cmp(&db[..n]) {
                std::cmp::Ordering::Less => false,
                std::cmp::Ordering::Greater => true,
                std::cmp::Ordering::Equal => pb.len() > db.len() && pb[db.len()] > b'/',
            }
        };
        let lo = partition(0, self.count, |i| below(self.path_bytes(i)));
        let hi = partition(lo, self.count, |i| !above(self.path_bytes(i)));
        (lo, hi)
    }

    /// The entry in `[lo, hi)` whose path, after its first `skip` bytes
    /// (a common prefix of the range), equals `rest`.
    pub fn find_in(&self, lo: usize, hi: usize, skip: usize, rest: &str) -> Option<usize> {
        let hi = hi.min(self.count);
        let rest = rest.as_bytes();
        let tail = |i: usize| self.path_bytes(i).get(skip..).unwrap_or(&[]);
        let at = partition(lo, hi, |i| tail(i) < rest);
        (at < hi && tail(at) == rest).then_some(at)
    }

    /// The file bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.body.len() + CHECKSUM);
        out.extend_from_slice(&self.body);
        let sum = checksum(&out);
        out.put_bytes(sum.as_bytes());
        out
    }

    /// Parse and check the file bytes; never panics.
    pub fn decode(bytes: &[u8]) -> std::result::Result<BaselineIndex, FormatError> {
        Self::decode_owned(bytes.to_vec())
    }

    /// [`decode`](BaselineIndex::decode) keeping `bytes` as the index (no
    /// copy); never panics.
    pub fn decode_owned(mut bytes: Vec<u8>) -> std::result::Result<BaselineIndex, FormatError> {
        let bad = |reason: &'static str| FormatError::invalid("status cache", reason);
        if bytes.len() < HEADER + CHECKSUM {
            return Err(bad("shorter than its header"));
        }
        let body_len = bytes.len() - CHECKSUM;
        if checksum(&bytes[..body_len]).as_bytes() != &bytes[body_len..] {
            return Err(bad("checksum mismatch"));
        }
        bytes.truncate(body_len);
        let body = bytes;
        if &body[..8] != MAGIC {
            return Err(bad("not a status cache"));
        }
        let version = le_u32(&body, 8);
        if version != VERSION {
            return Err(FormatError::UnsupportedVersion {
                what: "status cache",
                version: version.into(),
            });
        }
        let count = le_u64(&body, 28);
        let blob_len = le_u64(&body, 36);
        let expected = (count as u128) * (RECORD as u128) + u128::from(blob_len) + HEADER as u128;
        if expected != body.len() as u128 {
            return Err(bad("length does not match its counts"));
        }
        let count = count as usize;
        let blob = HEADER + count * RECORD;
        let paths = std::str::from_utf8(&body[blob..]).map_err(|_| FormatError::NotUtf8 {
            what: "status cache path",
        })?;
        let mut next = 0usize;
        let mut prev: &[u8] = &[];
        for r in body[HEADER..blob].chunks_exact(RECORD) {
            let (off, len, mode, pad) = (le_u32(r, 0), le_u16(r, 4), r[6], r[7]);
            if off as usize != next || len == 0 || mode > 1 || pad != 0 {
                return Err(bad("malformed record"));
            }
            if le_u32(r, 24) >= 1_000_000_000 {
                return Err(FormatError::InvalidValue {
                    what: "fingerprint mtime ns",
                    value: le_u32(r, 24).into(),
                    reason: "nanoseconds must be below one second",
                });
            }
            let end = next + usize::from(len);
            let path = paths
                .get(next..end)
                .ok_or_else(|| bad("path out of range"))?
                .as_bytes();
            if !prev.is_empty() && prev >= path {
                return Err(bad("paths out of order"));
            }
            prev = path;
            next = end;
        }
        if next != paths.len() {
            return Err(bad("unused path bytes"));
        }
        Ok(BaselineIndex { body, count, blob })
    }

    /// Write the cache file (temporary + rename; no flush: a torn file
    /// fails its checksum and is rebuilt).
    pub fn save(&self, ws: &Workspace) -> std::io::Result<()> {
        let path = cache_path(ws.root());
        let tmp = path.with_extension("next");
        std::fs::write(&tmp, self.encode())?;
        std::fs::rename(&tmp, &path)
    }
}

/// The first index in `[lo, hi)` where `pred` turns false (it must be true
/// then false over the range).
fn partition(mut lo: usize, mut hi: usize, pred: impl Fn(usize) -> bool) -> usize {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// `.scribe/_state/status-cache` of the workspace at `root`.
pub fn cache_path(root: &Path) -> PathBuf {
    root.join(crate::state::STATE_DIR).join(FILE)
}

/// The baseline index: from the cache file when it is valid for the
/// current stamp, else rebuilt from `state.redb` and the cache rewritten
/// (a failure to write it is not an error: the cache is optional).
pub fn load(ws: &Workspace) -> Result<(BaselineIndex, CacheUse)> {
    let read = ws.read()?;
    let mut generation = read.baseline_generation()?;
    let count = read.baseline_count()?;
    let how = match std::fs::read(cache_path(ws.root())) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => CacheUse::Missing,
        Err(_) => CacheUse::Corrupt,
        Ok(bytes) => match BaselineIndex::decode_owned(bytes) {
            Err(_) => CacheUse::Corrupt,
            Ok(index) => {
                if Some(index.generation()) == generation && index.len() as u64 == count {
                    return Ok((index, CacheUse::Hit));
                }
                CacheUse::Stale
            }
        },
    };
    let read = match generation {
        Some(_) => read,
        // Not stamped, and nothing can be written (#18 item 14): an index
        // for this run only.
        None if ws.read_only_fs() => read,
        None => {
            // State written before the stamp existed: stamp it once.
            drop(read);
            let tx = ws.write()?;
            generation = Some(tx.stamp_baseline_generation()?);
            tx.commit()?;
            ws.read()?
        }
    };
    let generation = generation.unwrap_or_default();
    let index = BaselineIndex::from_state(&read, generation)?;
    let _ = index.save(ws);
    Ok((index, how))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(n: u64) -> Fingerprint {
        Fingerprint {
            size: n,
            mtime_s: n + 1,
            mtime_ns: 7,
            recorded_ms: n * 1000,
            changed: None,
        }
    }

    fn sample_builder() -> Builder {
        let mut b = Builder::default();
        for (i, p) in ["a", "a.txt", "a/b", "a/b/c", "a/d", "ab", "b/é", "z"]
            .iter()
            .enumerate()
        {
            assert!(b.push(p, (i % 2) as u8, fp(i as u64)));
        }
        b
    }

    fn sample() -> BaselineIndex {
        sample_builder().finish([9; 16])
    }

    #[test]
    fn round_trip_and_lookups() {
        let ix = sample();
        let bytes = ix.encode();
        let back = BaselineIndex::decode(&bytes).unwrap();
        assert_eq!(back, ix);
        assert_eq!(back.position("a/b/c"), Some(3));
        assert_eq!(back.position("a/c"), None);
        assert_eq!(back.fingerprint(6), fp(6));
        assert_eq!(back.mode(1), 1);
        // "a/..." is entries 2..5; "a.txt" and "ab" are not under it
        assert_eq!(back.range_under("a"), (2, 5));
        assert_eq!(back.range_under("a/b"), (3, 4));
        assert_eq!(back.range_under("q"), (7, 7));
        assert_eq!(back.range_under(""), (0, 8));
        let (lo, hi) = back.range_under("a");
        assert_eq!(back.find_in(lo, hi, 2, "d"), Some(4));
        assert_eq!(back.find_in(lo, hi, 2, "b"), Some(2));
        assert_eq!(back.find_in(lo, hi, 2, "x"), None);
        assert_eq!(back.path(99), "");
    }

    #[test]
    fn refresh_and_restamp_in_place() {
        let mut ix = sample();
        ix.refresh(4, fp(40));
        ix.refresh(99, fp(41)); // out of range: ignored
        ix.set_generation([3; 16]);
        let back = BaselineIndex::decode(&ix.encode()).unwrap();
        assert_eq!(back, ix);
        assert_eq!(back.generation(), [3; 16]);
        assert_eq!(back.fingerprint(4), fp(40));
        assert_eq!(back.fingerprint(3), fp(3));
        assert_eq!(back.path(4), "a/d");
        assert_eq!(BaselineIndex::new([1; 16]).len(), 0);
        assert_eq!(
            BaselineIndex::decode(&BaselineIndex::new([1; 16]).encode())
                .unwrap()
                .len(),
            0
        );
    }

    #[test]
    fn push_refuses_disorder() {
        let mut ix = sample_builder();
        assert!(!ix.push("b", 0, fp(1)));
        assert!(!ix.push("z", 0, fp(1)));
        assert!(!ix.push("zz", 2, fp(1)));
        assert!(ix.push("zz", 1, fp(1)));
    }

    #[test]
    fn every_corruption_is_refused_without_panic() {
        let bytes = sample().encode();
        for cut in 0..bytes.len() {
            assert!(BaselineIndex::decode(&bytes[..cut]).is_err(), "cut {cut}");
        }
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x20;
            assert!(BaselineIndex::decode(&b).is_err(), "flip {i}");
        }
        // Structurally wrong bodies with a valid checksum are refused too.
        let reseal = |mut body: Vec<u8>| {
            body.truncate(body.len() - CHECKSUM);
            let sum = blake3::hash(&body);
            body.extend_from_slice(sum.as_bytes());
            body
        };
        let mut disorder = bytes.clone();
        let blob = HEADER + 8 * RECORD;
        disorder[blob] = b'z'; // "a" -> "z": out of order
        assert!(BaselineIndex::decode(&reseal(disorder)).is_err());
        let mut mode = bytes.clone();
        mode[HEADER + 6] = 2;
        assert!(BaselineIndex::decode(&reseal(mode)).is_err());
        let mut ns = bytes.clone();
        ns[HEADER + 24..HEADER + 28].copy_from_slice(&1_000_000_000u32.to_le_bytes());
        assert!(BaselineIndex::decode(&reseal(ns)).is_err());
        // A path length that splits a multi-byte character.
        let mut split = bytes.clone();
        let e = HEADER + 6 * RECORD; // "b/é": 4 bytes
        split[e + 4..e + 6].copy_from_slice(&3u16.to_le_bytes());
        let next = HEADER + 7 * RECORD;
        let off = u32::from_le_bytes(split[next..next + 4].try_into().unwrap());
        split[next..next + 4].copy_from_slice(&(off - 1).to_le_bytes());
        split[next + 4..next + 6].copy_from_slice(&2u16.to_le_bytes());
        assert!(BaselineIndex::decode(&reseal(split)).is_err());
        let mut count = bytes.clone();
        count[28..36].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(BaselineIndex::decode(&reseal(count)).is_err());
        let mut version = bytes;
        version[8] = 2;
        assert!(matches!(
            BaselineIndex::decode(&reseal(version)),
            Err(FormatError::UnsupportedVersion { .. })
        ));
    }

    mod workspace {
        use super::super::*;
        use crate::detect::{detect, detect_indexed, Detection, LocalChange};
        use crate::open;
        use crate::records::fingerprint_of;
        use crate::records::{BaselineRecord, OpenedAction, OpenedRecord};
        use crate::scan::{now_ms, scan_tracking, ScanOptions};
        use scribe_format::{FileContentId, ManifestId};
        use std::fs;
        use std::time::{Duration, SystemTime};

        fn ws() -> (tempfile::TempDir, Workspace) {
            let d = tempfile::tempdir().unwrap();
            let ws = Workspace::create(d.path(), &crate::state::tests_meta()).unwrap();
            (d, ws)
        }

        fn age(full: &Path) {
            let f = fs::File::options().write(true).open(full).unwrap();
            f.set_modified(SystemTime::now() - Duration::from_secs(100))
                .unwrap();
        }

        /// Write `path` with `bytes` 100 s in the past and record its
        /// baseline (settled, or observed at an unknown time).
        fn track(ws: &Workspace, path: &str, bytes: &[u8], settled: bool) {
            let full = ws.root().join(path);
            fs::create_dir_all(full.parent().unwrap()).unwrap();
            fs::write(&full, bytes).unwrap();
            age(&full);
            let meta = fs::metadata(&full).unwrap();
            if settled {
                // Observed in a later millisecond than the ctime the
                // writes left (`Fingerprint::proves_unchanged`).
                std::thread::sleep(Duration::from_millis(2));
            }
            let tx = ws.write().unwrap();
            tx.put_baseline(
                path,
                &BaselineRecord {
                    incarnation: [0; 16],
                    manifest: ManifestId::of_payload(bytes),
                    content: FileContentId::of(bytes),
                    size: bytes.len() as u64,
                    mode: u8::from(crate::platform::is_executable(&meta)),
                    change: 1,
                    fingerprint: fingerprint_of(&meta, if settled { now_ms() } else { 0 }),
                },
            )
            .unwrap();
            tx.commit().unwrap();
        }

        fn summary(d: &Detection) -> (Vec<String>, usize, Vec<String>, usize) {
            let changes = d
                .changes
                .iter()
                .map(|c| match c {
                    LocalChange::New(f) => format!("new {} {}", f.path, f.executable),
                    LocalChange::Modified { file, content } => {
                        format!("modified {} {}", file.path, content.to_hex())
                    }
                    LocalChange::Missing { path } => format!("missing {path}"),
                })
                .collect();
            let mut refreshed: Vec<String> = d.refreshed.iter().map(|(p, _)| p.clone()).collect();
            refreshed.sort();
            (changes, d.hashed, refreshed, d.unreadable.len())
        }

        /// Both detection paths on the current state, without writing.
        fn both(ws: &Workspace, prefixes: &[&str]) -> (String, String) {
            let options = ScanOptions {
                prefixes: prefixes.iter().map(|p| p.to_string()).collect(),
                threads: 0,
            };
            let read = ws.read().unwrap();
            let (index, _) = load(ws).unwrap();
            let (cached, problems) =
                detect_indexed(ws.root(), &options, &index, |p| read.baseline(p)).unwrap();
            let all = read.baselines().unwrap();
            let tracked: std::collections::BTreeSet<String> =
                all.iter().map(|(p, _)| p.clone()).collect();
            let found = scan_tracking(ws.root(), &options, Some(&tracked));
            let baselines: Vec<_> = all
                .into_iter()
                .filter(|(p, _)| {
                    prefixes.is_empty()
                        || prefixes
                            .iter()
                            .any(|x| scribe_format::path::is_under_prefix(p, x))
                })
                .collect();
            let plain = detect(ws.root(), &found, &baselines);
            (
                format!("{:?} {:?}", summary(&cached), problems),
                format!("{:?} {:?}", summary(&plain), found.problems),
            )
        }

        fn varied() -> (tempfile::TempDir, Workspace) {
            let (d, ws) = ws();
            for p in [
                "same", "a/b", "a.b", "a-b/c", "a/bb/c", "a/bc", "d/e/f/g", "zz",
            ] {
                track(&ws, p, p.as_bytes(), true);
            }
            track(&ws, "unsettled", b"u", false);
            track(&ws, "edited", b"v1", true);
            fs::write(ws.root().join("edited"), b"v2 offline").unwrap();
            track(&ws, "gone", b"g", true);
            fs::remove_file(ws.root().join("gone")).unwrap();
            track(&ws, "a/gone", b"g", true);
            fs::remove_file(ws.root().join("a/gone")).unwrap();
            fs::write(ws.root().join("new"), b"n").unwrap();
            fs::write(ws.root().join("a/new"), b"n").unwrap();
            track(&ws, "art/x.tmp", b"ignored now", true);
            track(&ws, "art/build/kept", b"tracked in an ignored dir", true);
            track(&ws, "art/build/edited", b"v1", true);
            fs::write(ws.root().join("art/.scribeignore"), b"*.tmp\nbuild/\n").unwrap();
            fs::write(ws.root().join("art/y.tmp"), b"y").unwrap();
            fs::write(ws.root().join("art/build/edited"), b"v2 offline").unwrap();
            fs::write(ws.root().join("art/build/new"), b"untracked, ignored").unwrap();
            track(&ws, "nested/f", b"nested", true);
            fs::create_dir_all(ws.root().join("nested/.scribe/_state")).unwrap();
            fs::write(ws.root().join("bad:name"), b"x").unwrap();
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                track(&ws, "tool.sh", b"#!/bin/sh\n", true);
                let full = ws.root().join("tool.sh");
                fs::set_permissions(&full, fs::Permissions::from_mode(0o755)).unwrap();
            }
            (d, ws)
        }

        #[test]
        fn cached_detection_equals_uncached() {
            let (_d, ws) = varied();
            for prefixes in [
                &[][..],
                &["a"][..],
                &["a", "art", "same"][..],
                &["a", "a/bb"][..],
            ] {
                let (cached, plain) = both(&ws, prefixes);
                assert_eq!(cached, plain, "prefixes {prefixes:?}");
            }
            let (cached, _) = both(&ws, &[]);
            for expected in [
                "modified edited",
                "missing gone",
                "missing a/gone",
                "modified art/build/edited",
                "missing nested/f",
                "new new",
                "new a/new",
                "forbidden_character",
            ] {
                assert!(cached.contains(expected), "{expected} in {cached}");
            }
            assert!(!cached.contains("y.tmp"), "{cached}");
            // Ignore rules apply to untracked files only: a tracked file
            // they match is not missing.
            assert!(!cached.contains("x.tmp"), "{cached}");
            assert!(!cached.contains("art/build/kept"), "{cached}");
            assert!(!cached.contains("art/build/new"), "{cached}");
        }

        #[test]
        fn big_directories_use_the_name_table_and_agree() {
            // Directories with enough entries get a hash table of their
            // files; lookups through it must equal the plain merge-join.
            let (_d, ws) = ws();
            for i in 0..60 {
                track(
                    &ws,
                    &format!("big/f{i}.bin"),
                    format!("{i}").as_bytes(),
                    true,
                );
            }
            for i in 0..30 {
                track(&ws, &format!("big/sub/g{i}"), b"g", true);
            }
            track(&ws, "big0/after", b"a", true);
            track(&ws, "big.txt", b"b", true);
            for i in (0..60).step_by(7) {
                fs::remove_file(ws.root().join(format!("big/f{i}.bin"))).unwrap();
            }
            for i in 0..5 {
                fs::write(ws.root().join(format!("big/new{i}")), b"n").unwrap();
                fs::write(ws.root().join(format!("big/sub/new{i}")), b"n").unwrap();
            }
            fs::write(ws.root().join("big/f3.bin"), b"edited!").unwrap();
            fs::write(ws.root().join("big/sub"), b"x").unwrap_err();
            for prefixes in [&[][..], &["big"][..], &["big/sub"][..]] {
                let (cached, plain) = both(&ws, prefixes);
                assert_eq!(cached, plain, "prefixes {prefixes:?}");
            }
            let (cached, _) = both(&ws, &[]);
            for expected in [
                "missing big/f0.bin",
                "missing big/f56.bin",
                "new big/new4",
                "new big/sub/new0",
                "modified big/f3.bin",
            ] {
                assert!(cached.contains(expected), "{expected} in {cached}");
            }
            assert!(
                !cached.contains("big0/after") && !cached.contains("big.txt"),
                "{cached}"
            );
        }

        #[test]
        fn baseline_writes_make_the_cache_stale() {
            let (_d, ws) = varied();
            assert_eq!(load(&ws).unwrap().1, CacheUse::Missing);
            assert_eq!(load(&ws).unwrap().1, CacheUse::Hit);
            // A sync or submit writes baselines: the cache is stale, the
            // rebuilt index is the state's.
            track(&ws, "synced", b"theirs", true);
            let (ix, how) = load(&ws).unwrap();
            assert_eq!(how, CacheUse::Stale);
            let read = ws.read().unwrap();
            let truth = BaselineIndex::from_state(&read, ix.generation()).unwrap();
            drop(read);
            assert_eq!(ix, truth);
            assert_eq!(load(&ws).unwrap().1, CacheUse::Hit);
            // A baseline rewritten in place (same count; what a sync that
            // deferred the file or a resolve records) is caught by the
            // stamp: a stale cache would still prove "same" by its stat.
            let tx = ws.write().unwrap();
            let mut b = tx.baseline("same").unwrap().unwrap();
            b.content = FileContentId([7; 32]);
            b.fingerprint.mtime_ns = (b.fingerprint.mtime_ns + 1) % 1_000_000_000;
            tx.put_baseline("same", &b).unwrap();
            tx.commit().unwrap();
            assert_eq!(load(&ws).unwrap().1, CacheUse::Stale);
            let (cached, plain) = both(&ws, &[]);
            assert_eq!(cached, plain);
            assert!(cached.contains("modified same"), "{cached}");
            // A removal.
            let tx = ws.write().unwrap();
            tx.remove_baseline("zz").unwrap();
            tx.commit().unwrap();
            assert_eq!(load(&ws).unwrap().1, CacheUse::Stale);
            let (cached, plain) = both(&ws, &[]);
            assert_eq!(cached, plain);
            assert!(cached.contains("new zz"), "{cached}");
        }

        #[test]
        fn revert_makes_the_cache_stale_and_status_follows() {
            let (_d, ws) = ws();
            track(&ws, "f", b"v1", true);
            let tx = ws.write().unwrap();
            tx.put_opened(
                "f",
                &OpenedRecord {
                    action: OpenedAction::Edit,
                    opened_ms: 1,
                    needs_reconcile: false,
                    moved_from: None,
                },
            )
            .unwrap();
            tx.commit().unwrap();
            fs::write(ws.root().join("f"), b"edited").unwrap();
            let s = open::status(&ws).unwrap();
            assert_eq!(s.opened.len(), 1);
            assert_eq!(load(&ws).unwrap().1, CacheUse::Hit);
            struct V1;
            impl crate::sync::Materializer for V1 {
                fn write_to(
                    &self,
                    _p: &str,
                    _t: &BaselineRecord,
                    out: &mut std::fs::File,
                ) -> std::result::Result<(), crate::sync::WriteError> {
                    std::io::Write::write_all(out, b"v1")
                        .map_err(|e| crate::sync::WriteError::io("writing", &e))
                }
            }
            open::revert(&ws, &["f".into()], &V1).unwrap();
            assert_eq!(load(&ws).unwrap().1, CacheUse::Stale);
            let s = open::status(&ws).unwrap();
            assert!(s.opened.is_empty() && s.unopened.is_empty(), "{s:?}");
        }

        #[test]
        fn corrupt_or_foreign_cache_falls_back() {
            let (_d, ws) = varied();
            let (_, plain) = both(&ws, &[]);
            let file = cache_path(ws.root());
            let good = fs::read(&file).unwrap();
            let mut flipped = good.clone();
            let mid = flipped.len() / 2;
            flipped[mid] ^= 1;
            let other = BaselineIndex::new([1; 16]).encode();
            for (bytes, want) in [
                (b"garbage".to_vec(), CacheUse::Corrupt),
                (good[..good.len() - 1].to_vec(), CacheUse::Corrupt),
                (flipped, CacheUse::Corrupt),
                (other, CacheUse::Stale),
            ] {
                fs::write(&file, &bytes).unwrap();
                assert_eq!(load(&ws).unwrap().1, want);
                // rebuilt and rewritten
                assert_eq!(load(&ws).unwrap().1, CacheUse::Hit);
                fs::write(&file, &bytes).unwrap();
                let (cached, _) = both(&ws, &[]);
                assert_eq!(cached, plain);
            }
            // A directory where the file should be: still works.
            fs::remove_file(&file).unwrap();
            fs::create_dir(&file).unwrap();
            assert_eq!(load(&ws).unwrap().1, CacheUse::Corrupt);
            let (cached, _) = both(&ws, &[]);
            assert_eq!(cached, plain);
        }

        #[test]
        fn state_without_a_stamp_is_stamped_once() {
            let (_d, ws) = varied();
            let tx = ws.write().unwrap();
            tx.remove_meta(crate::state::BASELINE_GENERATION).unwrap();
            tx.commit().unwrap();
            assert_eq!(ws.read().unwrap().baseline_generation().unwrap(), None);
            assert_eq!(load(&ws).unwrap().1, CacheUse::Missing);
            assert!(ws.read().unwrap().baseline_generation().unwrap().is_some());
            assert_eq!(load(&ws).unwrap().1, CacheUse::Hit);
        }

        #[test]
        fn touched_mtimes_are_hashed_once_then_settle() {
            let (_d, ws) = ws();
            for i in 0..50 {
                track(
                    &ws,
                    &format!("d{}/f{i}", i % 5),
                    format!("{i}").as_bytes(),
                    true,
                );
            }
            assert_eq!(open::status(&ws).unwrap().hashed, 0);
            // Every mtime touched, no content change (a checkout tool, a
            // copy): one status hashes them all and records the new
            // fingerprints, the next is stat-only again.
            let past = SystemTime::now() - Duration::from_secs(50);
            for i in 0..50 {
                let f = fs::File::options()
                    .write(true)
                    .open(ws.root().join(format!("d{}/f{i}", i % 5)))
                    .unwrap();
                f.set_modified(past).unwrap();
            }
            // The walk's observation in a later millisecond than the
            // ctime the touches left.
            std::thread::sleep(Duration::from_millis(2));
            let s = open::status(&ws).unwrap();
            assert_eq!(s.hashed, 50);
            assert!(s.unopened.is_empty(), "{:?}", s.unopened);
            assert_eq!(load(&ws).unwrap().1, CacheUse::Hit);
            let s = open::status(&ws).unwrap();
            assert_eq!(s.hashed, 0);
            // and the uncached path agrees that nothing needs hashing
            let (d, _) = open::detect_changes_uncached(&ws, &[]).unwrap();
            assert_eq!(d.hashed, 0);
            assert!(d.changes.is_empty());
        }

        #[test]
        fn status_opened_for_reading_writes_nothing_until_it_must() {
            let (d, ws) = ws();
            for i in 0..20 {
                track(&ws, &format!("f{i}"), b"x", true);
            }
            track(&ws, "unsettled", b"u", false);
            drop(ws);
            // The first status's observation in a later millisecond than
            // the file's times: one in the same millisecond rightly stays
            // unsettled, and the next status hashed it again (a CI run).
            std::thread::sleep(std::time::Duration::from_millis(2));
            let db = d.path().join(".scribe/_state/state.redb");
            // The first status settles "unsettled" (a write: the handle is
            // reopened writable) and builds the cache.
            let ws = Workspace::open_for_reading(d.path()).unwrap();
            let s = open::status(&ws).unwrap();
            assert_eq!(s.hashed, 1);
            drop(ws);
            let before = fs::read(&db).unwrap();
            // The next one is stat-only and leaves state.redb byte for byte.
            let ws = Workspace::open_for_reading(d.path()).unwrap();
            let s = open::status(&ws).unwrap();
            assert_eq!((s.hashed, s.unopened.len()), (0, 0));
            assert_eq!(load(&ws).unwrap().1, CacheUse::Hit);
            drop(ws);
            assert!(fs::read(&db).unwrap() == before, "state.redb changed");
            // A read-only handle still writes when asked.
            let ws = Workspace::open_for_reading(d.path()).unwrap();
            fs::write(ws.root().join("f3"), b"changed").unwrap();
            let tx = ws.write().unwrap();
            tx.remove_baseline("f4").unwrap();
            tx.commit().unwrap();
            let s = open::status(&ws).unwrap();
            let paths: Vec<&str> = s.unopened.iter().map(|c| c.path()).collect();
            assert_eq!(paths, vec!["f3", "f4"]);
            // A state.redb left by a killed writer (its "needs repair" flag
            // set while it was open) is opened writable and repaired.
            let dirty = fs::read(&db).unwrap();
            drop(ws);
            fs::write(&db, dirty).unwrap();
            assert!(redb::ReadOnlyDatabase::open(&db).is_err());
            let ws = Workspace::open_for_reading(d.path()).unwrap();
            let s = open::status(&ws).unwrap();
            let paths: Vec<&str> = s.unopened.iter().map(|c| c.path()).collect();
            assert_eq!(paths, vec!["f3", "f4"]);
        }
    }
}

//! Checks of the manifests a change names (issue #14 item 4).
//!
//! A manifest is only bytes a client uploaded under a manifest identity;
//! the store verifies that identity and nothing else. Before acceptance
//! (and in `doctor` for what is already accepted) each manifest is read
//! and held to section 4.1 and to the entries that name it:
//!
//! * it is present, hashes to its id and decodes as manifest v1 under a
//!   known chunking profile (lengths, sums, the empty-file rules and "a
//!   file no larger than the profile minimum is one chunk" are the
//!   decoder's);
//! * every entry naming it carries its total size and file content id;
//! * deep check (new manifests at acceptance, every manifest in `doctor`):
//!   every chunk is present, has the length the manifest gives, is the
//!   chunk profile 1 cuts at its place (`scribe_objects::is_profile_cut`),
//!   and the chunks together hash to the file content id.
//!
//! The deep check reads the new content once more (the server hashed it
//! on upload already); a manifest witnessed in `accepted_manifests` was
//! checked when it was first accepted and gets the shallow check only.
//! At acceptance a file that is one chunk of at most the profile minimum
//! is not read at all: see [`one_small_chunk`].

use std::collections::{HashMap, HashSet};

use blake3::hazmat::ChainingValue;
use rayon::prelude::*;
use scribe_format::limits::CHUNK_MIN_BYTES;
use scribe_format::manifest::{ChunkRef, ManifestRef};
use scribe_format::{ChunkId, FileContentId, ManifestId, ObjectId};

use crate::content_tree::{self, LEAF};

use crate::error::Result;
use crate::objects::ObjectHooks;

/// One entry's claim about a manifest.
pub(crate) struct Claim<'a> {
    pub path: &'a str,
    pub content: FileContentId,
    pub size: u64,
}

/// Why a manifest cannot be accepted.
#[derive(Debug)]
pub(crate) enum Fault {
    /// The manifest or chunks it lists are not in the store.
    Missing(Vec<ObjectId>),
    /// The manifest is not valid for the entries naming it.
    Invalid(String),
}

/// How far [`check`] reads.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Depth {
    /// The manifest and the entries naming it.
    Shallow,
    /// Also every chunk, hashed together into the file content id only
    /// (acceptance: the chunks were verified when they were uploaded).
    Accept,
    /// Also every chunk, each verified against its identity first, so a
    /// damaged stored chunk is named as such (doctor, verify).
    Audit,
}

/// Check manifest `id` against `claims`, as deep as `depth`.
pub(crate) fn check(
    objects: &dyn ObjectHooks,
    id: &ManifestId,
    claims: &[Claim<'_>],
    depth: Depth,
) -> Result<Option<Fault>> {
    match first_step(objects, id, claims, depth)? {
        Step::Done(f) => Ok(f),
        Step::Chunks(bytes) => read_chunks(objects, id, &bytes, depth == Depth::Audit, None),
    }
}

/// Check many manifests, each against its claims and as deep as its
/// depth; the faults in input order. Everything but reading the chunks of
/// a file that is more than one small chunk runs on every core (a
/// one-chunk file is most of a source tree); those reads, which hold up
/// to a window of chunks each, go [`CONCURRENT_FILES`] manifests at a time.
pub(crate) fn check_many(
    objects: &dyn ObjectHooks,
    items: &[(ManifestId, &[Claim<'_>], Depth)],
    verified: Option<&Verified>,
) -> Result<Vec<Option<Fault>>> {
    let first_of = |(id, claims, depth): &(ManifestId, &[Claim<'_>], Depth)| {
        first_step(objects, id, claims, *depth)
    };
    // A few manifests (a small submission's) are checked on this thread:
    // the pool's wake-up would cost more than the check.
    let first: Vec<Result<Step>> = if items.len() >= POOL_MIN_MANIFESTS {
        items.par_iter().map(first_of).collect()
    } else {
        items.iter().map(first_of).collect()
    };
    // The files whose chunks are read go [`CONCURRENT_FILES`] at a time:
    // one file's windows leave cores idle between their phases (read, cut,
    // hash), which another file's fill.
    //
    // A manifest checked ahead of this submission ([`precheck`], while the
    // upload went on) is not read again: the first step just checked the
    // manifest itself, its claims and its chunks' presence. Each manifest
    // read here is marked running (a precheck that comes meanwhile leaves
    // it, a concurrent acceptance waits for it); one whose precheck (or
    // another acceptance's read) is running is judged after this call's own
    // reads, once that one ended: no read waits while holding a mark.
    let mut out: Vec<Option<Option<Fault>>> = Vec::with_capacity(items.len());
    let mut reads: Vec<(usize, Vec<u8>, Option<Running<'_>>)> = Vec::new();
    let mut later: Vec<(usize, Vec<u8>)> = Vec::new();
    for (i, step) in first.into_iter().enumerate() {
        let (id, _, depth) = &items[i];
        match (step?, verified.filter(|_| *depth == Depth::Accept)) {
            (Step::Done(f), _) => out.push(Some(f)),
            (Step::Chunks(bytes), None) => {
                out.push(None);
                reads.push((i, bytes, None));
            }
            (Step::Chunks(_), Some(v)) if v.holds(id) => out.push(Some(None)),
            (Step::Chunks(bytes), Some(v)) => {
                out.push(None);
                match v.begin(*id) {
                    Some(running) => reads.push((i, bytes, Some(running))),
                    None => later.push((i, bytes)),
                }
            }
        }
    }
    let judge = |(i, bytes, _): &(usize, Vec<u8>, Option<Running<'_>>)| {
        let (id, _, depth) = &items[*i];
        read_chunks(objects, id, bytes, *depth == Depth::Audit, verified)
    };
    let mut reads = reads.into_iter().peekable();
    while reads.peek().is_some() {
        let group: Vec<_> = reads.by_ref().take(CONCURRENT_FILES).collect();
        let judged: Vec<Result<Option<Fault>>> = if group.len() > 1 {
            group.par_iter().map(judge).collect()
        } else {
            group.iter().map(judge).collect()
        };
        for ((i, _, _), j) in group.iter().zip(judged) {
            out[*i] = Some(j?);
        }
    }
    for (i, bytes) in later {
        let (id, _, _) = &items[i];
        out[i] = Some(match verified {
            Some(v) if v.settled(id) => None,
            _ => read_chunks(objects, id, &bytes, false, verified)?,
        });
    }
    // Every manifest has its verdict; a missing one refuses, never passes.
    out.into_iter()
        .map(|v| v.ok_or_else(|| crate::MetadataError::Gate("a manifest was not judged".into())))
        .collect()
}

/// What [`precheck`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precheck {
    /// Verified from the stored bytes (or already known so): the
    /// acceptance naming it reads none of its chunks again.
    Verified,
    /// Not all of it is stored yet (its chunks may still be on their way);
    /// worth trying again later.
    Incomplete,
    /// Nothing for a precheck to save: a file of one small chunk (its
    /// acceptance reads nothing), or a store that holds no bytes.
    Skipped,
    /// It would be refused; the acceptance naming it says why.
    Refused,
}

/// The deep check of manifest `id` ahead of the submission that will name
/// it (issue #19): a client sends each large file's manifest as soon as
/// the file's chunks are sent, and the server checks it while the rest of
/// the upload goes on. Everything [`Depth::Accept`] checks that does not
/// depend on the entries (there are none yet): the manifest's bytes, its
/// chunks' presence, lengths and cut points, and the content id. A pass is
/// remembered in `verified` (only ever from a check of the stored bytes),
/// so [`check_many`] at acceptance skips reading the chunks; the claims
/// are still checked there. An acceptance that comes while the precheck
/// runs waits for it rather than reading the same file twice.
pub(crate) fn precheck(
    objects: &dyn ObjectHooks,
    id: &ManifestId,
    verified: &Verified,
) -> Result<Precheck> {
    if !objects.checks_manifests() {
        return Ok(Precheck::Skipped);
    }
    if verified.holds(id) {
        return Ok(Precheck::Verified);
    }
    let Some(_running) = verified.begin(*id) else {
        // Another precheck of it is running: that one settles it.
        return Ok(Precheck::Skipped);
    };
    Ok(match first_step(objects, id, &[], Depth::Accept)? {
        Step::Done(None) => Precheck::Skipped,
        Step::Done(Some(Fault::Missing(_))) => Precheck::Incomplete,
        Step::Done(Some(Fault::Invalid(_))) => Precheck::Refused,
        Step::Chunks(bytes) => match read_chunks(objects, id, &bytes, false, Some(verified))? {
            None => Precheck::Verified,
            Some(Fault::Missing(_)) => Precheck::Incomplete,
            Some(Fault::Invalid(_)) => Precheck::Refused,
        },
    })
}

/// Files whose chunks [`check_many`] reads at once (each holds a window of
/// chunks in memory).
const CONCURRENT_FILES: usize = 2;

/// Fewest manifests [`check_many`] hands to the rayon pool.
const POOL_MIN_MANIFESTS: usize = 16;

/// What [`first_step`] leaves to do.
enum Step {
    /// The manifest is judged.
    Done(Option<Fault>),
    /// Its chunks are to be read (the manifest's bytes, already checked).
    Chunks(Vec<u8>),
}

/// The manifest itself, its claims, and a one-small-chunk file's chunk.
fn first_step(
    objects: &dyn ObjectHooks,
    id: &ManifestId,
    claims: &[Claim<'_>],
    depth: Depth,
) -> Result<Step> {
    let oid = ObjectId::manifest(*id);
    let bytes = match objects.read(&oid) {
        Ok(Some(b)) => b,
        Ok(None) => return Ok(Step::Done(Some(Fault::Missing(vec![oid])))),
        Err(crate::MetadataError::Objects(e)) => {
            return Ok(invalid(format!("manifest {id} cannot be read: {e}")))
        }
        Err(e) => return Err(e),
    };
    if ManifestId::of_payload(&bytes) != *id {
        return Ok(invalid(format!(
            "the stored bytes of manifest {id} do not hash to its id"
        )));
    }
    let m = match ManifestRef::decode(&bytes) {
        Ok(m) => m,
        Err(e) => {
            return Ok(invalid(format!(
                "manifest {id} is not a valid manifest: {e}"
            )))
        }
    };
    for c in claims {
        if c.size != m.total_size() {
            return Ok(invalid(format!(
                "{}: the entry says {} bytes, manifest {id} says {}",
                c.path,
                c.size,
                m.total_size()
            )));
        }
        if c.content != m.file_content_id() {
            return Ok(invalid(format!(
                "{}: the entry's content id {} is not manifest {id}'s {}",
                c.path,
                c.content,
                m.file_content_id()
            )));
        }
    }
    if depth == Depth::Shallow {
        return Ok(Step::Done(None));
    }
    if depth == Depth::Accept {
        if let Some(judged) = one_small_chunk(objects, id, &m) {
            return judged.map(Step::Done);
        }
    }
    let mut ids: Vec<ObjectId> = m.chunks().map(|c| ObjectId::chunk(c.id)).collect();
    ids.sort_unstable_by_key(|i| i.to_bytes());
    ids.dedup();
    let missing = objects.missing(&ids)?;
    if !missing.is_empty() {
        return Ok(Step::Done(Some(Fault::Missing(missing))));
    }
    Ok(Step::Chunks(bytes))
}

fn invalid(why: String) -> Step {
    Step::Done(Some(Fault::Invalid(why)))
}

/// Read the chunks of manifest `bytes` (decoded and checked by
/// [`first_step`]): lengths, cut points and the file content id; with
/// `audit`, each chunk against its own id first. Without `audit`, what
/// `verified` holds of an earlier verified version of the file is used:
/// a chunk followed by the same chunk there is not cut again, and a leaf
/// of the content tree it shares at the same offset is not read or hashed
/// again ([`crate::content_tree`]). A manifest that passes is remembered.
fn read_chunks(
    objects: &dyn ObjectHooks,
    id: &ManifestId,
    bytes: &[u8],
    audit: bool,
    verified: Option<&Verified>,
) -> Result<Option<Fault>> {
    let m = match ManifestRef::decode(bytes) {
        Ok(m) => m,
        Err(e) => {
            return Ok(Some(Fault::Invalid(format!(
                "manifest {id} is not a valid manifest: {e}"
            ))))
        }
    };
    let chunks: Vec<_> = m.chunks().collect();
    let ids: Vec<ChunkId> = chunks.iter().map(|c| c.id).collect();
    let len = m.total_size();
    let base = if audit {
        None
    } else {
        verified.and_then(|v| v.base_for(&ids))
    };
    let plan = Plan::new(&chunks, len, LEAF, base.as_deref());
    let mut hash = ContentHash::new(len, LEAF, plan.reused.clone());
    // Chunks in windows: each window's chunks (those the plan needs) are
    // read and held to their length and cut point in parallel (a cut
    // point needs the next chunk's first bytes, so a window's last chunk
    // is judged with the next window), then their bytes go to the content
    // hash, whose leaves are hashed in parallel. At most WINDOW chunks are
    // in memory.
    let window = (2 * rayon::current_num_threads()).max(2);
    let mut held: Option<(usize, Vec<u8>)> = None;
    for (w, group) in chunks.chunks(window).enumerate() {
        let base_index = w * window;
        let read: Vec<Result<Option<ChunkRead>>> = group
            .par_iter()
            .enumerate()
            .map(|(i, c)| {
                if plan.read[base_index + i] {
                    read_chunk(objects, &c.id, audit).map(Some)
                } else {
                    Ok(None)
                }
            })
            .collect();
        let mut data: Vec<Option<Vec<u8>>> = Vec::with_capacity(group.len());
        for (i, (r, c)) in read.into_iter().zip(group).enumerate() {
            let d = match r? {
                None => None,
                Some(Ok(d)) => Some(d),
                Some(Err(why)) => return Ok(Some(Fault::Invalid(format!("manifest {id}: {why}")))),
            };
            if let Some(d) = &d {
                if d.len() as u64 != u64::from(c.length) {
                    return Ok(Some(Fault::Invalid(format!(
                        "manifest {id}: chunk {} ({}) has {} bytes, the manifest says {}",
                        base_index + i,
                        c.id,
                        d.len(),
                        c.length
                    ))));
                }
            }
            data.push(d);
        }
        // The held chunk of the previous window, against this window's first.
        if let Some((i, prev)) = held.take() {
            let Some(next) = data[0].as_deref() else {
                return Ok(Some(cut_fault(id, i)));
            };
            if !scribe_objects::is_profile_cut(&prev, next) {
                return Ok(Some(cut_fault(id, i)));
            }
        }
        let last_window = base_index + group.len() == chunks.len();
        let judged = if last_window {
            data.len()
        } else {
            data.len() - 1
        };
        // The first two bytes of each chunk, for the cut of the one before.
        let heads: Vec<Option<([u8; 2], usize)>> = data
            .iter()
            .map(|d| {
                d.as_deref().map(|d| {
                    let k = d.len().min(2);
                    let mut h = [0u8; 2];
                    h[..k].copy_from_slice(&d[..k]);
                    (h, k)
                })
            })
            .collect();
        let bad = data[..judged]
            .par_iter_mut()
            .enumerate()
            .map(|(i, d)| {
                if !plan.cut[base_index + i] {
                    return false;
                }
                // The plan reads every chunk it cuts and the one after it;
                // a chunk missing here refuses rather than passes.
                let Some(d) = d.as_mut() else {
                    return true;
                };
                let next: &[u8] = match heads.get(i + 1) {
                    Some(Some((h, k))) => &h[..*k],
                    Some(None) => return true,
                    None => &[],
                };
                !scribe_objects::is_profile_cut(d, next)
            })
            .position_first(|bad| bad);
        if let Some(i) = bad {
            return Ok(Some(cut_fault(id, base_index + i)));
        }
        let pieces: Vec<(u64, &[u8])> = data
            .iter()
            .enumerate()
            .filter_map(|(i, d)| Some((plan.offsets[base_index + i], d.as_deref()?)))
            .collect();
        hash.feed(&pieces);
        if !last_window && plan.cut[base_index + judged] {
            if let Some(d) = data.pop().flatten() {
                held = Some((base_index + judged, d));
            }
        }
    }
    let Some((computed, leaves)) = hash.finish() else {
        return Err(crate::MetadataError::Gate(format!(
            "manifest {id}: the content hash missed bytes of its chunks"
        )));
    };
    if computed != m.file_content_id() {
        return Ok(Some(Fault::Invalid(format!(
            "manifest {id}: its chunks hash to content {computed}, the manifest says {}",
            m.file_content_id()
        ))));
    }
    if let Some(v) = verified {
        v.remember(*id, ids, &plan.offsets, len, leaves);
    }
    Ok(None)
}

/// A chunk's bytes, or what is wrong with them ([`read_chunk`]).
type ChunkRead = std::result::Result<Vec<u8>, String>;

/// What [`read_chunks`] must read, cut and hash, given an earlier
/// verified version of the file.
struct Plan {
    /// Offset of each chunk in the file.
    offsets: Vec<u64>,
    /// Whether chunk `i`'s cut point is to be checked.
    cut: Vec<bool>,
    /// Whether chunk `i` is read.
    read: Vec<bool>,
    /// The leaves taken from the earlier version (`None`: hashed here).
    reused: Vec<Option<ChainingValue>>,
}

impl Plan {
    fn new(chunks: &[ChunkRef], len: u64, leaf: u64, base: Option<&Tree>) -> Plan {
        let n = chunks.len();
        let mut offsets = Vec::with_capacity(n);
        let mut at = 0u64;
        for c in chunks {
            offsets.push(at);
            at += u64::from(c.length);
        }
        let leaves = if len > leaf {
            content_tree::leaf_count(len, leaf)
        } else {
            1
        };
        let Some(b) = base else {
            return Plan {
                offsets,
                cut: vec![true; n],
                read: vec![true; n],
                reused: vec![None; leaves],
            };
        };
        // A chunk followed by the same chunk in a verified manifest ends
        // where profile 1 cuts (the cut depends only on the chunk and the
        // first bytes after it); so does a last chunk that was last there.
        let pairs: HashSet<(ChunkId, ChunkId)> =
            b.chunks.windows(2).map(|w| (w[0], w[1])).collect();
        let cut: Vec<bool> = (0..n)
            .map(|i| match chunks.get(i + 1) {
                Some(next) => !pairs.contains(&(chunks[i].id, next.id)),
                None => b.chunks.last() != Some(&chunks[i].id),
            })
            .collect();
        // A chunk at the offset where the earlier version has the same
        // chunk holds the same bytes there; a full leaf covered only by
        // such chunks is the earlier version's leaf.
        let at_offset: HashMap<u64, ChunkId> = b
            .offsets
            .iter()
            .copied()
            .zip(b.chunks.iter().copied())
            .collect();
        let same: Vec<bool> = (0..n)
            .map(|i| at_offset.get(&offsets[i]) == Some(&chunks[i].id))
            .collect();
        // The leaves chunk `i` lies in (the decoder refuses empty chunks;
        // one would count as touching its leaf).
        let leaves_of = |i: usize| {
            let end = offsets[i] + u64::from(chunks[i].length).max(1);
            (offsets[i] / leaf) as usize..=((end - 1) / leaf) as usize
        };
        let mut reused = vec![None; leaves];
        if len > leaf && b.len > leaf {
            let mut covered = vec![true; leaves];
            for i in (0..n).filter(|&i| !same[i]) {
                for l in leaves_of(i) {
                    covered[l] = false;
                }
            }
            let full_here = (len / leaf) as usize;
            let full_there = (b.len / leaf) as usize;
            for (l, r) in reused.iter_mut().enumerate() {
                if l < full_here && l < full_there && covered[l] {
                    *r = b.leaves.get(l).copied();
                }
            }
        }
        // Read a chunk to cut it, to give the chunk before it its next
        // bytes, or to hash a leaf that is not reused.
        let read: Vec<bool> = (0..n)
            .map(|i| {
                if cut[i] || (i > 0 && cut[i - 1]) {
                    return true;
                }
                leaves_of(i).any(|l| reused.get(l).is_none_or(|r| r.is_none()))
            })
            .collect();
        Plan {
            offsets,
            cut,
            read,
            reused,
        }
    }
}

/// The file content id over the bytes read, in leaves (or whole, for a
/// file of at most one leaf).
struct ContentHash {
    len: u64,
    leaf: u64,
    /// Each leaf's value, known or hashed.
    leaves: Vec<Option<ChainingValue>>,
    /// The leaf being filled across windows: index, hasher, bytes given.
    open: Option<(usize, blake3::Hasher, u64)>,
    /// A file of at most one leaf: hashed the ordinary way.
    whole: Option<blake3::Hasher>,
}

impl ContentHash {
    fn new(len: u64, leaf: u64, reused: Vec<Option<ChainingValue>>) -> ContentHash {
        ContentHash {
            len,
            leaf,
            leaves: reused,
            open: None,
            whole: (len <= leaf).then(blake3::Hasher::new),
        }
    }

    fn leaf_len(&self, l: usize) -> u64 {
        (self.len - l as u64 * self.leaf).min(self.leaf)
    }

    /// Give the hash the bytes of some chunks, in file order, each with
    /// its offset; bytes of reused leaves are passed over.
    fn feed(&mut self, pieces: &[(u64, &[u8])]) {
        if let Some(h) = self.whole.as_mut() {
            for (_, d) in pieces {
                if d.len() >= 128 << 10 {
                    h.update_rayon(d);
                } else {
                    h.update(d);
                }
            }
            return;
        }
        // Split the pieces by leaf; each leaf's parts in order.
        let mut work: Vec<(usize, Vec<&[u8]>)> = Vec::new();
        for &(off, d) in pieces {
            let mut at = 0usize;
            while at < d.len() {
                let pos = off + at as u64;
                let l = (pos / self.leaf) as usize;
                let end_of_leaf = (l as u64 + 1) * self.leaf;
                let take = ((end_of_leaf - pos) as usize).min(d.len() - at);
                if self.leaves.get(l).is_some_and(|v| v.is_none()) {
                    match work.last_mut() {
                        Some((last, parts)) if *last == l => parts.push(&d[at..at + take]),
                        _ => work.push((l, vec![&d[at..at + take]])),
                    }
                }
                at += take;
            }
        }
        let mut jobs: Vec<(usize, blake3::Hasher, u64, Vec<&[u8]>)> = work
            .into_iter()
            .map(|(l, parts)| match self.open.take() {
                Some((o, h, given)) if o == l => (l, h, given, parts),
                other => {
                    self.open = other;
                    (l, content_tree::leaf_hasher(l, self.leaf), 0, parts)
                }
            })
            .collect();
        jobs.par_iter_mut().for_each(|(_, h, given, parts)| {
            for p in parts.iter() {
                h.update(p);
                *given += p.len() as u64;
            }
        });
        for (l, h, given, _) in jobs {
            if given == self.leaf_len(l) {
                if let Some(v) = self.leaves.get_mut(l) {
                    *v = Some(content_tree::leaf_value(&h));
                }
            } else {
                self.open = Some((l, h, given));
            }
        }
    }

    /// The content id and every leaf's value; `None` if a leaf was not
    /// given all its bytes (a plan that missed a chunk).
    fn finish(self) -> Option<(FileContentId, Vec<ChainingValue>)> {
        if let Some(h) = self.whole {
            return Some((FileContentId(*h.finalize().as_bytes()), Vec::new()));
        }
        if self.open.is_some() {
            return None;
        }
        let leaves: Vec<ChainingValue> = self.leaves.into_iter().collect::<Option<_>>()?;
        let root = content_tree::root(self.len, self.leaf, &leaves)?;
        Some((FileContentId(*root.as_bytes()), leaves))
    }
}

/// An earlier verified manifest: its chunks, their offsets, its length
/// and its leaves' values (none for a file of at most one leaf).
pub(crate) struct Tree {
    chunks: Vec<ChunkId>,
    offsets: Vec<u64>,
    len: u64,
    leaves: Vec<ChainingValue>,
}

impl Tree {
    fn cost(&self) -> usize {
        self.chunks.len() * 96 + self.leaves.len() * 32 + 64
    }
}

/// Manifests this server verified at acceptance, most recent last, found
/// by any of their chunks: in memory, bounded, lost at restart (then the
/// next version of a file is checked in full and remembered).
#[derive(Default)]
pub(crate) struct Verified {
    inner: std::sync::Mutex<VerifiedInner>,
    /// Manifests a [`precheck`] is reading now.
    running: std::sync::Mutex<std::collections::HashSet<ManifestId>>,
    /// Signalled when a precheck ends.
    ended: std::sync::Condvar,
}

/// A running precheck of one manifest; ends when dropped.
pub(crate) struct Running<'a> {
    verified: &'a Verified,
    id: ManifestId,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let mut r = self
            .verified
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        r.remove(&self.id);
        drop(r);
        self.verified.ended.notify_all();
    }
}

#[derive(Default)]
struct VerifiedInner {
    trees: HashMap<ManifestId, std::sync::Arc<Tree>>,
    order: std::collections::VecDeque<ManifestId>,
    by_chunk: HashMap<ChunkId, ManifestId>,
    cost: usize,
}

/// Most memory [`Verified`] holds per repository: about 87,000 chunks,
/// some 350 GB of recently verified content at the average chunk size.
const VERIFIED_BYTES: usize = 8 << 20;

impl Verified {
    /// Whether manifest `id` was verified (and is still remembered).
    pub(crate) fn holds(&self, id: &ManifestId) -> bool {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.trees.contains_key(id)
    }

    /// [`Verified::holds`], after waiting for a precheck of `id` that is
    /// running now, if any.
    fn settled(&self, id: &ManifestId) -> bool {
        let mut r = self.running.lock().unwrap_or_else(|p| p.into_inner());
        while r.contains(id) {
            r = self.ended.wait(r).unwrap_or_else(|p| p.into_inner());
        }
        drop(r);
        self.holds(id)
    }

    /// Mark a precheck of `id` as running; `None` when one already is.
    fn begin(&self, id: ManifestId) -> Option<Running<'_>> {
        let mut r = self.running.lock().unwrap_or_else(|p| p.into_inner());
        // Not `then_some`: a `Running` made for nothing would end (drop)
        // the precheck that is running.
        if r.insert(id) {
            Some(Running { verified: self, id })
        } else {
            None
        }
    }

    /// The most recently verified manifest sharing a chunk with `chunks`
    /// (the first chunk that any shares).
    fn base_for(&self, chunks: &[ChunkId]) -> Option<std::sync::Arc<Tree>> {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        chunks
            .iter()
            .find_map(|c| g.by_chunk.get(c).and_then(|m| g.trees.get(m)).cloned())
    }

    fn remember(
        &self,
        id: ManifestId,
        chunks: Vec<ChunkId>,
        offsets: &[u64],
        len: u64,
        leaves: Vec<ChainingValue>,
    ) {
        let tree = Tree {
            chunks,
            offsets: offsets.to_vec(),
            len,
            leaves,
        };
        let cost = tree.cost();
        if cost > VERIFIED_BYTES / 4 {
            return;
        }
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if g.trees.contains_key(&id) {
            return;
        }
        for c in &tree.chunks {
            g.by_chunk.insert(*c, id);
        }
        g.trees.insert(id, std::sync::Arc::new(tree));
        g.order.push_back(id);
        g.cost += cost;
        while g.cost > VERIFIED_BYTES {
            let Some(old) = g.order.pop_front() else {
                break;
            };
            if let Some(t) = g.trees.remove(&old) {
                g.cost -= t.cost();
                for c in &t.chunks {
                    if g.by_chunk.get(c) == Some(&old) {
                        g.by_chunk.remove(c);
                    }
                }
            }
        }
    }
}

/// The acceptance check of a file that is one chunk no longer than the
/// profile minimum, without reading the chunk: `None` when the manifest is
/// not of that shape (the caller reads the chunks).
///
/// Its chunk id and file content id are both BLAKE3 of the same bytes
/// (section 1), so equal ids are the content check; the store verified
/// the chunk's bytes against its id when they were uploaded (a carried
/// object was verified by the caller); profile 1 never cuts before its
/// minimum, so the file's end is the only cut. Presence and the stored
/// length are what is left to compare.
fn one_small_chunk(
    objects: &dyn ObjectHooks,
    id: &ManifestId,
    m: &ManifestRef<'_>,
) -> Option<Result<Option<Fault>>> {
    let mut chunks = m.chunks();
    let (Some(c), None) = (chunks.next(), chunks.next()) else {
        return None;
    };
    if c.id.0 != m.file_content_id().0 || c.length > CHUNK_MIN_BYTES {
        return None;
    }
    let oid = ObjectId::chunk(c.id);
    Some(match objects.payload_len(&oid) {
        Ok(None) => Ok(Some(Fault::Missing(vec![oid]))),
        Ok(Some(n)) if n != u64::from(c.length) => Ok(Some(Fault::Invalid(format!(
            "manifest {id}: chunk 0 ({}) has {n} bytes, the manifest says {}",
            c.id, c.length
        )))),
        Ok(Some(_)) => Ok(None),
        Err(crate::MetadataError::Objects(e)) => Ok(Some(Fault::Invalid(format!(
            "manifest {id}: chunk {}: {e}",
            c.id
        )))),
        Err(e) => Err(e),
    })
}

fn cut_fault(id: &ManifestId, index: usize) -> Fault {
    Fault::Invalid(format!(
        "manifest {id}: chunk {index} does not end where chunking profile 1 cuts"
    ))
}

/// A chunk's bytes; `Err` names what is wrong with it. Unless `verify`,
/// they are not hashed one by one: the caller hashes them all into the
/// file content id, which no wrong byte survives.
fn read_chunk(objects: &dyn ObjectHooks, id: &ChunkId, verify: bool) -> Result<ChunkRead> {
    let oid = ObjectId::chunk(*id);
    let read = if verify {
        objects.read(&oid)
    } else {
        objects.read_for_check(&oid)
    };
    match read {
        Ok(Some(d)) if verify && ChunkId::of(&d) != *id => {
            Ok(Err(format!("chunk {id} does not hash to its id")))
        }
        Ok(Some(d)) => Ok(Ok(d)),
        Ok(None) => Ok(Err(format!("chunk {id} is missing"))),
        Err(crate::MetadataError::Objects(e)) => Ok(Err(format!("chunk {id}: {e}"))),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::{CommitSink, ObjectPresence};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Mutex;

    /// Objects in memory that count the bytes read.
    #[derive(Default)]
    struct Counting {
        map: Mutex<HashMap<ObjectId, Vec<u8>>>,
        read: AtomicU64,
    }

    impl Counting {
        fn put(&self, id: ObjectId, bytes: Vec<u8>) {
            self.map.lock().unwrap().insert(id, bytes);
        }
        fn take_read(&self) -> u64 {
            self.read.swap(0, Ordering::SeqCst)
        }
    }

    impl ObjectPresence for Counting {
        fn contains(&self, id: &ObjectId) -> Result<bool> {
            Ok(self.map.lock().unwrap().contains_key(id))
        }
        fn read(&self, id: &ObjectId) -> Result<Option<Vec<u8>>> {
            let b = self.map.lock().unwrap().get(id).cloned();
            if id.kind == scribe_format::ObjectKind::Chunk {
                if let Some(b) = &b {
                    self.read.fetch_add(b.len() as u64, Ordering::SeqCst);
                }
            }
            Ok(b)
        }
    }

    impl CommitSink for Counting {
        fn publish_commit(&self, _: &ObjectId, _: &[u8]) -> Result<()> {
            Ok(())
        }
        fn read_commit(&self, _: &ObjectId) -> Result<Option<Vec<u8>>> {
            Ok(None)
        }
    }

    fn random(n: usize, seed: u8) -> Vec<u8> {
        let mut b = vec![0u8; n];
        blake3::Hasher::new()
            .update(&[seed])
            .finalize_xof()
            .fill(&mut b);
        b
    }

    /// Store `content` chunked by profile 1 (or by the `cuts` given) with
    /// its manifest, claiming `content_id`; the manifest's id.
    fn upload_as(
        o: &Counting,
        content: &[u8],
        cuts: &[usize],
        content_id: FileContentId,
    ) -> ManifestId {
        let mut refs = Vec::new();
        let mut at = 0;
        for &n in cuts {
            let bytes = content[at..at + n].to_vec();
            let id = ChunkId::of(&bytes);
            refs.push(ChunkRef {
                id,
                length: n as u32,
            });
            o.put(ObjectId::chunk(id), bytes);
            at += n;
        }
        let m = scribe_objects::encode_manifest(content.len() as u64, &content_id, &refs)
            .expect("manifest");
        let id = ManifestId::of_payload(&m);
        o.put(ObjectId::manifest(id), m);
        id
    }

    fn upload(o: &Counting, content: &[u8]) -> ManifestId {
        let cuts = scribe_objects::chunk_boundaries(content);
        upload_as(o, content, &cuts, FileContentId::of(content))
    }

    fn accept(o: &Counting, m: ManifestId, content: &[u8], v: Option<&Verified>) -> Option<Fault> {
        let claims = [Claim {
            path: "big.bin",
            content: FileContentId::of(content),
            size: content.len() as u64,
        }];
        check_many(o, &[(m, &claims[..], Depth::Accept)], v)
            .expect("check")
            .pop()
            .expect("one verdict")
    }

    const MIB: usize = 1 << 20;

    /// Bytes of the chunks of `b` (cut by profile 1) the check of `b` after
    /// `a` may read, and cannot avoid reading: those not in `a`, every chunk sharing a
    /// content-tree leaf with them, and the chunk before the first of them
    /// (its cut is judged against new bytes).
    fn unavoidable(a: &[u8], b: &[u8]) -> u64 {
        let old: HashSet<ChunkId> = {
            let mut at = 0;
            scribe_objects::chunk_boundaries(a)
                .into_iter()
                .map(|n| {
                    at += n;
                    ChunkId::of(&a[at - n..at])
                })
                .collect()
        };
        let mut spans = Vec::new();
        let mut at = 0u64;
        for n in scribe_objects::chunk_boundaries(b) {
            let id = ChunkId::of(&b[at as usize..at as usize + n]);
            spans.push((at, at + n as u64, !old.contains(&id)));
            at += n as u64;
        }
        let leaf = LEAF;
        let touched: HashSet<u64> = spans
            .iter()
            .filter(|s| s.2)
            .flat_map(|s| s.0 / leaf..=(s.1 - 1) / leaf)
            .collect();
        let first_new = spans.iter().position(|s| s.2);
        spans
            .iter()
            .enumerate()
            .filter(|(i, s)| {
                s.2 || (s.0 / leaf..=(s.1 - 1) / leaf).any(|l| touched.contains(&l))
                    || first_new.is_some_and(|f| f == i + 1)
            })
            .map(|(_, s)| s.1 - s.0)
            .sum()
    }

    /// An overwrite, an insert and an append of 1 MiB in a 96 MiB file,
    /// each checked after the version before it: accepted, and only the
    /// chunks around the edit are read (an insert also reads everything
    /// after it, which moved), where the check without the cache reads
    /// the whole file.
    #[test]
    fn the_next_version_of_a_verified_file_reads_only_what_changed() {
        let o = Counting::default();
        let v = Verified::default();
        let a = random(96 * MIB, 1);
        let ma = upload(&o, &a);
        assert!(accept(&o, ma, &a, Some(&v)).is_none());
        assert_eq!(
            o.take_read(),
            a.len() as u64,
            "the first version is read whole"
        );

        let patch = random(MIB, 2);
        let mut b = a.clone();
        b[50 * MIB..51 * MIB].copy_from_slice(&patch);
        let mb = upload(&o, &b);
        o.take_read();
        assert!(accept(&o, mb, &b, Some(&v)).is_none());
        let (read, least) = (o.take_read(), unavoidable(&a, &b));
        assert!(
            read <= least && read <= 32 * MIB as u64,
            "an overwrite of 1 MiB in 96 read {read} bytes (the chunks around it: {least})"
        );

        let mut c = b.clone();
        c.splice(80 * MIB..80 * MIB, patch.iter().copied());
        let mc = upload(&o, &c);
        o.take_read();
        assert!(accept(&o, mc, &c, Some(&v)).is_none());
        let read = o.take_read();
        assert!(
            read <= 40 * MIB as u64,
            "an insert at 80 MiB of 97 read {read} bytes (the rest moved)"
        );

        let mut d = c.clone();
        d.extend_from_slice(&random(MIB, 3));
        let md = upload(&o, &d);
        o.take_read();
        assert!(accept(&o, md, &d, Some(&v)).is_none());
        let (read, least) = (o.take_read(), unavoidable(&c, &d));
        assert!(
            read <= least && read <= 32 * MIB as u64,
            "an append of 1 MiB to 97 read {read} bytes (the chunks around it: {least})"
        );

        // Without the cache the same check reads everything.
        let fresh = Verified::default();
        assert!(accept(&o, md, &d, Some(&fresh)).is_none());
        assert_eq!(o.take_read(), d.len() as u64);
    }

    /// A manifest checked ahead of its submission (issue #19) is not read
    /// again at acceptance, which still holds the entries to it; a
    /// precheck that found it wrong or incomplete leaves the acceptance to
    /// read it all.
    #[test]
    fn a_prechecked_manifest_is_not_read_again_at_acceptance() {
        let o = Counting::default();
        let v = Verified::default();
        let a = random(24 * MIB, 11);
        let ma = upload(&o, &a);
        assert_eq!(precheck(&o, &ma, &v).unwrap(), Precheck::Verified);
        assert_eq!(o.take_read(), a.len() as u64, "the precheck reads the file");
        assert!(accept(&o, ma, &a, Some(&v)).is_none());
        assert_eq!(o.take_read(), 0, "the acceptance reads none of it again");
        // Its entries are still checked against it.
        let claims = [Claim {
            path: "big.bin",
            content: FileContentId::of(&a),
            size: a.len() as u64 - 1,
        }];
        let f = check_many(&o, &[(ma, &claims[..], Depth::Accept)], Some(&v)).unwrap();
        assert!(matches!(&f[0], Some(Fault::Invalid(_))), "{f:?}");
        // An audit reads everything whatever was prechecked.
        let f = check_many(&o, &[(ma, &claims[..1], Depth::Audit)], Some(&v)).unwrap();
        assert!(matches!(&f[0], Some(Fault::Invalid(_))));
        o.take_read();

        // A lie: refused by the precheck, then by the acceptance, which
        // reads it (nothing was remembered).
        let b = random(24 * MIB, 12);
        let cuts = scribe_objects::chunk_boundaries(&b);
        let liar = upload_as(&o, &b, &cuts, FileContentId::of(&a));
        assert_eq!(precheck(&o, &liar, &v).unwrap(), Precheck::Refused);
        o.take_read();
        let claims = [Claim {
            path: "big.bin",
            content: FileContentId::of(&a),
            size: b.len() as u64,
        }];
        let f = check_many(&o, &[(liar, &claims[..], Depth::Accept)], Some(&v)).unwrap();
        assert!(matches!(&f[0], Some(Fault::Invalid(_))), "{f:?}");
        assert!(o.take_read() > 0, "the acceptance read the lie itself");

        // A chunk not stored yet: incomplete, then checked in full once
        // it is.
        let c = random(24 * MIB, 13);
        let mc = upload(&o, &c);
        let cuts = scribe_objects::chunk_boundaries(&c);
        let last = ObjectId::chunk(ChunkId::of(&c[c.len() - cuts[cuts.len() - 1]..]));
        let held = o.map.lock().unwrap().remove(&last).unwrap();
        assert_eq!(precheck(&o, &mc, &v).unwrap(), Precheck::Incomplete);
        o.put(last, held);
        o.take_read();
        assert!(accept(&o, mc, &c, Some(&v)).is_none());
        assert_eq!(
            o.take_read(),
            c.len() as u64,
            "an incomplete precheck saves nothing"
        );
        // A small file's manifest needs no precheck.
        let d = random(1000, 14);
        let md = upload(&o, &d);
        assert_eq!(precheck(&o, &md, &v).unwrap(), Precheck::Skipped);
    }

    /// An acceptance that comes while a precheck of the same manifest is
    /// running waits for it and then reads nothing.
    #[test]
    fn an_acceptance_waits_for_a_running_precheck() {
        let o = Counting::default();
        let v = Verified::default();
        let a = random(24 * MIB, 15);
        let ma = upload(&o, &a);
        let running = v.begin(ma).expect("not running yet");
        assert!(
            v.begin(ma).is_none(),
            "one precheck of a manifest at a time"
        );
        std::thread::scope(|s| {
            let acceptance = s.spawn(|| accept(&o, ma, &a, Some(&v)));
            std::thread::sleep(std::time::Duration::from_millis(100));
            assert!(!acceptance.is_finished(), "the acceptance waits");
            // The precheck's work, as `precheck` does it once it runs.
            let Step::Chunks(bytes) = first_step(&o, &ma, &[], Depth::Accept).unwrap() else {
                panic!("a large file has chunks to read");
            };
            assert!(read_chunks(&o, &ma, &bytes, false, Some(&v))
                .unwrap()
                .is_none());
            let read = o.take_read();
            drop(running);
            assert!(acceptance.join().unwrap().is_none());
            assert_eq!(read, a.len() as u64);
            assert_eq!(o.take_read(), 0, "the acceptance read nothing");
        });
    }

    /// Lies in a version after a verified one are refused although most of
    /// its chunks are the verified file's: a wrong content id, a damaged
    /// chunk in a leaf the edit touches, and two chunks joined into one
    /// (right bytes and content id, a cut profile 1 would make inside).
    #[test]
    fn lies_in_a_next_version_are_refused() {
        let o = Counting::default();
        let v = Verified::default();
        let a = random(40 * MIB, 4);
        let ma = upload(&o, &a);
        assert!(accept(&o, ma, &a, Some(&v)).is_none());
        let mut b = a.clone();
        b[20 * MIB..21 * MIB].copy_from_slice(&random(MIB, 5));
        let cuts = scribe_objects::chunk_boundaries(&b);
        assert!(cuts.len() >= 4, "40 MiB makes several chunks: {cuts:?}");

        // The content id of the earlier version.
        let liar = upload_as(&o, &b, &cuts, FileContentId::of(&a));
        let claims = [Claim {
            path: "big.bin",
            content: FileContentId::of(&a),
            size: b.len() as u64,
        }];
        let f = check_many(&o, &[(liar, &claims[..], Depth::Accept)], Some(&v)).unwrap();
        assert!(
            matches!(&f[0], Some(Fault::Invalid(w)) if w.contains("hash to content")),
            "{:?}",
            f[0].as_ref().map(|_| ())
        );

        // Two chunks joined (the first neighbours that fit in one chunk).
        let i = (0..cuts.len() - 1)
            .find(|&i| cuts[i] + cuts[i + 1] <= 16 * MIB)
            .expect("two neighbours of at most 16 MiB");
        let mut joined = cuts[..i].to_vec();
        joined.push(cuts[i] + cuts[i + 1]);
        joined.extend_from_slice(&cuts[i + 2..]);
        let m = upload_as(&o, &b, &joined, FileContentId::of(&b));
        match accept(&o, m, &b, Some(&v)) {
            Some(Fault::Invalid(w)) => assert!(w.contains("does not end where"), "{w}"),
            _ => panic!("a joined chunk was accepted"),
        }

        // The edited chunk's bytes damaged in the store, same length.
        let mb = upload(&o, &b);
        let mut at = 0;
        let mut edited = None;
        for n in &cuts {
            if at + n > 20 * MIB {
                edited = Some(ChunkId::of(&b[at..at + n]));
                break;
            }
            at += n;
        }
        let edited = ObjectId::chunk(edited.expect("a chunk covers 20 MiB"));
        let mut bad = o.map.lock().unwrap().get(&edited).cloned().unwrap();
        bad[7] ^= 1;
        o.put(edited, bad);
        assert!(
            matches!(accept(&o, mb, &b, Some(&v)), Some(Fault::Invalid(_))),
            "a damaged chunk the edit touched was not noticed"
        );
    }

    /// Files checked together (two at a time) keep their verdicts in
    /// order: a liar between two honest files is the one refused.
    #[test]
    fn files_checked_together_keep_their_verdicts() {
        let o = Counting::default();
        let files: Vec<Vec<u8>> = (0..5)
            .map(|i| random(6 * MIB + i * 4096, 10 + i as u8))
            .collect();
        let mut ids: Vec<ManifestId> = files.iter().map(|f| upload(&o, f)).collect();
        let cuts = scribe_objects::chunk_boundaries(&files[2]);
        ids[2] = upload_as(&o, &files[2], &cuts, FileContentId::of(&files[0]));
        let claims: Vec<[Claim<'_>; 1]> = files
            .iter()
            .enumerate()
            .map(|(i, f)| {
                [Claim {
                    path: "f",
                    content: FileContentId::of(if i == 2 { &files[0] } else { f }),
                    size: f.len() as u64,
                }]
            })
            .collect();
        let items: Vec<(ManifestId, &[Claim<'_>], Depth)> = ids
            .iter()
            .zip(&claims)
            .map(|(m, c)| (*m, &c[..], Depth::Accept))
            .collect();
        let v = check_many(&o, &items, Some(&Verified::default())).unwrap();
        let refused: Vec<bool> = v.iter().map(|f| f.is_some()).collect();
        assert_eq!(refused, [false, false, true, false, false]);
    }

    /// `doctor`'s audit reads and verifies every chunk, cache or not.
    #[test]
    fn an_audit_reads_every_chunk() {
        let o = Counting::default();
        let v = Verified::default();
        let a = random(12 * MIB, 6);
        let ma = upload(&o, &a);
        assert!(accept(&o, ma, &a, Some(&v)).is_none());
        o.take_read();
        let claims = [Claim {
            path: "big.bin",
            content: FileContentId::of(&a),
            size: a.len() as u64,
        }];
        assert!(check(&o, &ma, &claims, Depth::Audit).unwrap().is_none());
        assert_eq!(o.take_read(), a.len() as u64);
    }

    /// The cache forgets its oldest manifests past its bound, and their
    /// chunks with them.
    #[test]
    fn the_cache_is_bounded() {
        let v = Verified::default();
        let per = VERIFIED_BYTES / 96 / 8;
        let mut first = Vec::new();
        for t in 0..12u32 {
            let chunks: Vec<ChunkId> = (0..per as u32)
                .map(|i| {
                    let mut d = [0u8; 32];
                    d[..4].copy_from_slice(&t.to_le_bytes());
                    d[4..8].copy_from_slice(&i.to_le_bytes());
                    ChunkId(d)
                })
                .collect();
            if t == 0 {
                first = chunks.clone();
            }
            let offsets: Vec<u64> = (0..per as u64).collect();
            v.remember(
                ManifestId([t as u8; 32]),
                chunks,
                &offsets,
                per as u64,
                vec![],
            );
        }
        let g = v.inner.lock().unwrap();
        assert!(g.cost <= VERIFIED_BYTES, "{} over the bound", g.cost);
        assert!(g.trees.len() < 12);
        assert!(!g.trees.contains_key(&ManifestId([0; 32])));
        assert!(
            !g.by_chunk.contains_key(&first[0]),
            "an evicted tree's chunks stay findable"
        );
        drop(g);
        assert!(v.base_for(&first).is_none());
    }
}

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

use rayon::prelude::*;
use scribe_format::limits::CHUNK_MIN_BYTES;
use scribe_format::manifest::ManifestRef;
use scribe_format::{ChunkId, FileContentId, ManifestId, ObjectId};

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
        Step::Chunks(bytes) => read_chunks(objects, id, &bytes, depth == Depth::Audit),
    }
}

/// Check many manifests, each against its claims and as deep as its
/// depth; the faults in input order. Everything but reading the chunks of
/// a file that is more than one small chunk runs on every core (a
/// one-chunk file is most of a source tree); those reads, which hold up
/// to a window of chunks each, go one manifest at a time.
pub(crate) fn check_many(
    objects: &dyn ObjectHooks,
    items: &[(ManifestId, &[Claim<'_>], Depth)],
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
    let mut out = Vec::with_capacity(items.len());
    for ((id, _, depth), step) in items.iter().zip(first) {
        out.push(match step? {
            Step::Done(f) => f,
            Step::Chunks(bytes) => read_chunks(objects, id, &bytes, *depth == Depth::Audit)?,
        });
    }
    Ok(out)
}

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
/// `audit`, each chunk against its own id first.
fn read_chunks(
    objects: &dyn ObjectHooks,
    id: &ManifestId,
    bytes: &[u8],
    audit: bool,
) -> Result<Option<Fault>> {
    let m = match ManifestRef::decode(bytes) {
        Ok(m) => m,
        Err(e) => {
            return Ok(Some(Fault::Invalid(format!(
                "manifest {id} is not a valid manifest: {e}"
            ))))
        }
    };
    // Chunks in windows: each window's chunks are read and held to their
    // length and cut point in parallel (a cut point needs the next chunk's
    // first bytes, so a window's last chunk is judged with the next
    // window), then hashed in order into the whole-file hash, which uses
    // both cores for large chunks. At most WINDOW chunks are in memory.
    let chunks: Vec<_> = m.chunks().collect();
    let window = (2 * rayon::current_num_threads()).max(2);
    let mut hasher = blake3::Hasher::new();
    let mut held: Option<(usize, Vec<u8>)> = None;
    for (w, group) in chunks.chunks(window).enumerate() {
        let base = w * window;
        let read: Vec<Result<std::result::Result<Vec<u8>, String>>> = group
            .par_iter()
            .map(|c| read_chunk(objects, &c.id, audit))
            .collect();
        let mut data = Vec::with_capacity(group.len());
        for (i, (r, c)) in read.into_iter().zip(group).enumerate() {
            let d = match r? {
                Ok(d) => d,
                Err(why) => return Ok(Some(Fault::Invalid(format!("manifest {id}: {why}")))),
            };
            if d.len() as u64 != u64::from(c.length) {
                return Ok(Some(Fault::Invalid(format!(
                    "manifest {id}: chunk {} ({}) has {} bytes, the manifest says {}",
                    base + i,
                    c.id,
                    d.len(),
                    c.length
                ))));
            }
            data.push(d);
        }
        // The held chunk of the previous window, against this window's first.
        if let Some((i, prev)) = held.take() {
            if !scribe_objects::is_profile_cut(&prev, &data[0]) {
                return Ok(Some(cut_fault(id, i)));
            }
        }
        let last_window = base + group.len() == chunks.len();
        let judged = if last_window {
            data.len()
        } else {
            data.len() - 1
        };
        let bad = (0..judged).into_par_iter().find_first(|&i| {
            let next: &[u8] = data.get(i + 1).map_or(&[], |n| n.as_slice());
            !scribe_objects::is_profile_cut(&data[i], next)
        });
        if let Some(i) = bad {
            return Ok(Some(cut_fault(id, base + i)));
        }
        for d in &data {
            if d.len() >= 128 << 10 {
                hasher.update_rayon(d);
            } else {
                hasher.update(d);
            }
        }
        if !last_window {
            held = data.pop().map(|d| (base + judged, d));
        }
    }
    let computed = FileContentId(*hasher.finalize().as_bytes());
    if computed != m.file_content_id() {
        return Ok(Some(Fault::Invalid(format!(
            "manifest {id}: its chunks hash to content {computed}, the manifest says {}",
            m.file_content_id()
        ))));
    }
    Ok(None)
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
fn read_chunk(
    objects: &dyn ObjectHooks,
    id: &ChunkId,
    verify: bool,
) -> Result<std::result::Result<Vec<u8>, String>> {
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

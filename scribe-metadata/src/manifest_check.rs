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

use rayon::prelude::*;
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
    let oid = ObjectId::manifest(*id);
    let bytes = match objects.read(&oid) {
        Ok(Some(b)) => b,
        Ok(None) => return Ok(Some(Fault::Missing(vec![oid]))),
        Err(crate::MetadataError::Objects(e)) => {
            return Ok(Some(Fault::Invalid(format!(
                "manifest {id} cannot be read: {e}"
            ))))
        }
        Err(e) => return Err(e),
    };
    if ManifestId::of_payload(&bytes) != *id {
        return Ok(Some(Fault::Invalid(format!(
            "the stored bytes of manifest {id} do not hash to its id"
        ))));
    }
    let m = match ManifestRef::decode(&bytes) {
        Ok(m) => m,
        Err(e) => {
            return Ok(Some(Fault::Invalid(format!(
                "manifest {id} is not a valid manifest: {e}"
            ))))
        }
    };
    for c in claims {
        if c.size != m.total_size() {
            return Ok(Some(Fault::Invalid(format!(
                "{}: the entry says {} bytes, manifest {id} says {}",
                c.path,
                c.size,
                m.total_size()
            ))));
        }
        if c.content != m.file_content_id() {
            return Ok(Some(Fault::Invalid(format!(
                "{}: the entry's content id {} is not manifest {id}'s {}",
                c.path,
                c.content,
                m.file_content_id()
            ))));
        }
    }
    if depth == Depth::Shallow {
        return Ok(None);
    }
    let audit = depth == Depth::Audit;
    let mut ids: Vec<ObjectId> = m.chunks().map(|c| ObjectId::chunk(c.id)).collect();
    ids.sort_unstable_by_key(|i| i.to_bytes());
    ids.dedup();
    let missing = objects.missing(&ids)?;
    if !missing.is_empty() {
        return Ok(Some(Fault::Missing(missing)));
    }
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

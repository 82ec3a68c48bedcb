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

/// Check manifest `id` against `claims`; `deep` also reads its chunks.
pub(crate) fn check(
    objects: &dyn ObjectHooks,
    id: &ManifestId,
    claims: &[Claim<'_>],
    deep: bool,
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
    if !deep {
        return Ok(None);
    }
    let mut ids: Vec<ObjectId> = m.chunks().map(|c| ObjectId::chunk(c.id)).collect();
    ids.sort_unstable_by_key(|i| i.to_bytes());
    ids.dedup();
    let missing = objects.missing(&ids)?;
    if !missing.is_empty() {
        return Ok(Some(Fault::Missing(missing)));
    }
    // Chunks in order: length, cut point (needs the next chunk's first
    // bytes), then the whole-file hash.
    let mut hasher = blake3::Hasher::new();
    let mut previous: Option<(usize, Vec<u8>)> = None;
    let count = m.chunk_count() as usize;
    for (index, chunk) in m.chunks().enumerate() {
        let data = match read_chunk(objects, &chunk.id)? {
            Ok(d) => d,
            Err(why) => return Ok(Some(Fault::Invalid(format!("manifest {id}: {why}")))),
        };
        if data.len() as u64 != u64::from(chunk.length) {
            return Ok(Some(Fault::Invalid(format!(
                "manifest {id}: chunk {index} ({}) has {} bytes, the manifest says {}",
                chunk.id,
                data.len(),
                chunk.length
            ))));
        }
        if let Some((i, prev)) = previous.take() {
            if !scribe_objects::is_profile_cut(&prev, &data) {
                return Ok(Some(cut_fault(id, i)));
            }
        }
        // The whole-file hash is the one pass over the content that cannot
        // be avoided; large chunks use both cores.
        if data.len() >= 128 << 10 {
            hasher.update_rayon(&data);
        } else {
            hasher.update(&data);
        }
        if index + 1 == count {
            if !scribe_objects::is_profile_cut(&data, &[]) {
                return Ok(Some(cut_fault(id, index)));
            }
        } else {
            previous = Some((index, data));
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

/// A chunk's bytes, re-hashed; `Err` names what is wrong with it.
fn read_chunk(
    objects: &dyn ObjectHooks,
    id: &ChunkId,
) -> Result<std::result::Result<Vec<u8>, String>> {
    match objects.read(&ObjectId::chunk(*id)) {
        // A store that verifies its reads has hashed the chunk already.
        Ok(Some(d)) if objects.verifies_reads() || ChunkId::of(&d) == *id => Ok(Ok(d)),
        Ok(Some(_)) => Ok(Err(format!("chunk {id} does not hash to its id"))),
        Ok(None) => Ok(Err(format!("chunk {id} is missing"))),
        Err(crate::MetadataError::Objects(e)) => Ok(Err(format!("chunk {id}: {e}"))),
        Err(e) => Err(e),
    }
}

//! `scribe submit`: freeze the opened files (streamed to the server, small
//! ones many to a request, large ones chunk by chunk, see [`super::stream`]),
//! build the change set, record it as the pending submission, upload what
//! the server still lacks, submit with the operation id, and finalize
//! locally.
//!
//! The operation id is also the upload intent: `meta["upload-intent:<op>"]`
//! is committed before the first pin, and a submit stopped before its
//! pending row leaves it for the next submit to reuse. The pending row is
//! committed before the `Submit` that carries the id, so a crash or a lost
//! reply at any later point is completed by rerunning `scribe submit`,
//! which replays the same id: the server answers the recorded outcome.

use std::collections::{HashMap, HashSet};

use scribe_format::changeset::{ChangeSet, Entry, FileState, Mode};
use scribe_format::wire::message as m;
use scribe_format::wire::Text;
use scribe_format::{ChunkId, ErrorCode, ManifestId, ObjectId, OperationId};
use scribe_workspace::records::fingerprint_of;
use scribe_workspace::records::{OpenedAction, PendingLock, PendingSubmit};
use scribe_workspace::scan::now_ms;
use scribe_workspace::submit::{
    abandon, archive_pending, begin_intent, finalize_planned, leftover_intent, opened_with_bases,
    plan_finalize, FinalizePlan, OpenedBases,
};

use crate::error::{Error, Result};
use crate::link::ServerLink;
use crate::progress::{Note, Task};
use crate::workflow::Opened;

/// What to submit.
#[derive(Clone, Debug, Default)]
pub struct SubmitArgs {
    /// The change description (required for a new submission).
    pub message: String,
    /// Keep the locks of submitted files.
    pub keep_locks: bool,
    /// Submit only opened files under these canonical paths (none: all).
    pub paths: Vec<String>,
}

/// What a submission did.
#[derive(Clone, Debug, PartialEq)]
pub struct Submitted {
    pub change: u64,
    pub files: usize,
    pub uploaded_objects: usize,
    pub uploaded_bytes: u64,
    pub secs: f64,
}

/// Submit the opened files of `o` (or complete an interrupted submission
/// first, with its own operation id) and return the accepted change.
pub fn submit(o: &Opened, remote: &ServerLink, a: SubmitArgs) -> Result<Submitted> {
    let t = std::time::Instant::now();
    // An interrupted candidate is completed first, with its own id.
    if let Some((op, pending)) = o.ws.read()?.pending_all()?.into_iter().next() {
        let current = server_incarnation(remote)?;
        if current != pending.incarnation {
            // A restore changed the incarnation: the outcome decides; an
            // absent one retires the candidate instead of replaying it.
            let repo = o.meta.repository_name.clone();
            if let Some(outcome) = remote.with(|c| c.operation_outcome(&repo, op))? {
                let plan = plan_finalize(&op, &pending);
                let change = settle(o, remote, &op, &pending, outcome, plan)?;
                return Ok(Submitted {
                    change,
                    files: ChangeSet::decode(&pending.change_set)?.entries.len(),
                    uploaded_objects: 0,
                    uploaded_bytes: 0,
                    secs: t.elapsed().as_secs_f64(),
                });
            }
            let path = archive_pending(&o.ws, &op)?;
            return Err(Error::new(ErrorCode::SubmitRetired,
                format!(
                    "the server was restored since submission {} was prepared and holds no outcome for it; it was not replayed",
                    op.to_hex()
                ),
            )
            .with_paths(vec![path.display().to_string()]));
        }
        remote.context().progress.note(Note::CompletingSubmit {
            operation: op,
            message: pending.message.clone(),
        });
        let (objects, bytes) = upload(o, remote, &op, &pending, &HashSet::new(), HashMap::new())?;
        let change = send(o, remote, &op, &pending)?;
        return Ok(Submitted {
            change,
            files: ChangeSet::decode(&pending.change_set)?.entries.len(),
            uploaded_objects: objects,
            uploaded_bytes: bytes,
            secs: t.elapsed().as_secs_f64(),
        });
    }
    if a.message.trim().is_empty() {
        return Err(Error::new(ErrorCode::Usage, "a submit needs a message"));
    }
    let read = o.ws.read()?;
    let deferred = read.deferred_all()?;
    if !deferred.is_empty() {
        return Err(Error::new(
            ErrorCode::NeedsResolve,
            format!(
                "{} path(s) need resolution before submitting",
                deferred.len()
            ),
        )
        .with_paths(deferred.into_iter().map(|(p, _)| p).collect()));
    }
    if scribe_workspace::sync::in_progress(&o.ws)?.is_some() {
        return Err(Error::new(
            ErrorCode::SyncUnfinished,
            "a sync is unfinished",
        ));
    }
    scribe_workspace::moves::refuse_if_interrupted(&o.ws)?;
    if server_incarnation(remote)? != o.meta.incarnation {
        return Err(Error::new(
            ErrorCode::IncarnationChanged,
            "the server was restored since this workspace last synced",
        ));
    }
    // Every opened path and its baseline row, read once: the stale-base
    // check covers all of them, the submission the selected ones.
    let OpenedBases {
        opened: all_opened,
        baselines,
        stale,
    } = opened_with_bases(&read, o.meta.incarnation)?;
    if !stale.is_empty() {
        return Err(Error::new(
            ErrorCode::StaleBase,
            format!(
                "{} opened path(s) are based on the server's state before a restore",
                stale.len()
            ),
        )
        .with_paths(stale));
    }
    let filter = &a.paths;
    let opened: Vec<_> = all_opened
        .into_iter()
        .filter(|(p, _)| {
            filter.is_empty()
                || filter
                    .iter()
                    .any(|f| scribe_format::path::is_under_prefix(p, f))
        })
        .collect();
    if opened.is_empty() {
        return Err(Error::new(ErrorCode::EmptySubmission, "nothing is opened"));
    }
    // A moved destination must travel with its source's delete.
    let selected: HashSet<&str> = opened.iter().map(|(p, _)| p.as_str()).collect();
    for (p, r) in &opened {
        if let Some((src, _)) = &r.moved_from {
            if !selected.contains(src.as_str()) {
                let message = if read.opened(src)?.is_some() {
                    format!("{p} was moved from {src}; submit both together")
                } else {
                    // The source's delete is gone (the server removed
                    // the file too and `resolve --ours` settled it): the
                    // move has nothing left to carry. The abort is named
                    // by the move's destination (a directory's, for a
                    // file moved with its directory).
                    let dst = scribe_workspace::moves::pending(&o.ws)?
                        .into_iter()
                        .find(|i| i.files.iter().any(|f| f.destination == *p))
                        .map_or_else(|| p.clone(), |i| i.destination);
                    format!(
                        "{p} was moved from {src}, which is no longer opened for delete \
                         (removed on the server too): `scribe move --abort {dst}` puts the \
                         file back at {src} as a new file, to add (or move) again"
                    )
                };
                return Err(Error::new(ErrorCode::Refused, message));
            }
        }
    }
    // Collisions among the paths that would be live: only an add can
    // collide (edits, deletes and keeps name tracked paths), so every
    // tracked path's key is computed only when something is added.
    let mut keys: HashMap<Vec<u8>, String> = HashMap::new();
    let deleted: HashSet<&str> = opened
        .iter()
        .filter(|(_, r)| r.action == OpenedAction::Delete)
        .map(|(p, _)| p.as_str())
        .collect();
    if opened.iter().any(|(_, r)| r.action == OpenedAction::Add) {
        for (p, _) in read.baselines()? {
            if !deleted.contains(p.as_str()) {
                keys.insert(scribe_format::path::collision_key(&p), p);
            }
        }
    }
    let mut collisions = Vec::new();
    for (p, r) in &opened {
        if r.action == OpenedAction::Add {
            let k = scribe_format::path::collision_key(p);
            if let Some(other) = keys.get(&k) {
                if other != p {
                    collisions.push(format!("{p} (and {other})"));
                }
            }
            keys.insert(k, p.clone());
        }
    }
    if !collisions.is_empty() {
        return Err(Error::new(
            ErrorCode::PathCollision,
            "paths differ only in case or normalization",
        )
        .with_paths(collisions));
    }
    let local_locks: HashMap<String, u64> = read.local_locks()?.into_iter().collect();
    drop(read);
    refuse_locked_by_others(o, remote, &opened, &local_locks)?;
    // Freeze the bytes.
    let mut to_import = Vec::new();
    let mut missing = Vec::new();
    let mut fingerprints = Vec::new();
    let recorded = now_ms();
    let mut links = scribe_workspace::guard::LinkCheck::new(o.ws.root());
    let mut beyond = Vec::new();
    let mut candidates = Vec::new();
    for (p, r) in &opened {
        if matches!(r.action, OpenedAction::Add | OpenedAction::Edit) {
            // Never upload a file from beneath a linked directory: its
            // bytes live outside the working copy (`scribe_workspace::guard`).
            if let Some(link) = links.link_above(p)? {
                beyond.push(format!("{p} (beneath the link {link})"));
                continue;
            }
            candidates.push(p);
        }
    }
    // Each file looked up on all cores (13,000 lookups of a small-file
    // import on one core were a serial step before the freeze).
    let looked: Vec<_> = {
        use rayon::prelude::*;
        candidates
            .par_iter()
            .map(|p| {
                let full = o.ws.root().join(p);
                let meta = std::fs::symlink_metadata(&full).ok();
                (full, meta)
            })
            .collect()
    };
    for (p, (full, meta)) in candidates.into_iter().zip(looked) {
        match meta {
            Some(meta) if meta.is_file() => {
                fingerprints.push((p.clone(), fingerprint_of(&meta, recorded)));
                to_import.push((
                    p.clone(),
                    full,
                    scribe_workspace::platform::is_executable(&meta),
                ));
            }
            _ => missing.push(p.clone()),
        }
    }
    if !beyond.is_empty() {
        return Err(Error::new(
            ErrorCode::BeyondSymlink,
            "opened files lie beyond a symbolic link; Scribe never reads through one",
        )
        .with_paths(beyond));
    }
    if !missing.is_empty() {
        return Err(Error::new(
            ErrorCode::NotFound,
            "opened files are missing from the working copy",
        )
        .with_paths(missing)
        .concerning(scribe_format::Concern::MissingFromDisk));
    }
    // The upload intent (reused when a stopped submit left one), recorded
    // before anything is pinned.
    let op = match leftover_intent(&o.ws)? {
        Some(op) => op,
        None => {
            let op = OperationId::random();
            begin_intent(&o.ws, &op)?;
            op
        }
    };
    let import_t = std::time::Instant::now();
    let frozen = freeze(o, remote, &op, &to_import, &fingerprints)?;
    let imported = frozen.files;
    remote.context().progress.note(Note::Froze {
        files: imported.len(),
        secs: import_t.elapsed().as_secs_f64(),
        streamed_bytes: frozen.streamed_bytes,
    });
    refuse_if_changed(&to_import, &fingerprints, &imported)?;
    let known = frozen_manifests(&imported, &frozen.pinned);
    let mut states = HashMap::new();
    for ((p, _, exec), imp) in to_import.iter().zip(&imported) {
        states.insert(
            p.as_str(),
            FileState {
                manifest: imp.manifest_id,
                content: imp.content_id,
                size: imp.size,
                mode: if *exec {
                    Mode::Executable
                } else {
                    Mode::Regular
                },
            },
        );
    }
    let mut entries = Vec::new();
    for (p, r) in &opened {
        let base = baselines.get(p).map(|b| b.change);
        let e = match r.action {
            OpenedAction::Add => {
                let e = Entry::add(p.clone(), states[p.as_str()]);
                match &r.moved_from {
                    Some((src, ch)) => e.moved_from(src.clone(), *ch),
                    None => e,
                }
            }
            OpenedAction::Edit => match base {
                Some(b) => Entry::edit(p.clone(), b, states[p.as_str()]),
                None => Entry::add(p.clone(), states[p.as_str()]),
            },
            OpenedAction::Delete => match base {
                Some(b) => Entry::delete(p.clone(), b),
                None => continue,
            },
            OpenedAction::Keep => match base {
                Some(b) => Entry::keep(p.clone(), b),
                None => continue,
            },
        };
        entries.push(e);
    }
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    let set = ChangeSet::new(entries);
    let cs_bytes = set.encode()?;
    // The id of the bytes just encoded (`ChangeSet::id` would validate and
    // encode all of it again: 52,000 entries).
    let cs_id = scribe_format::ChangeSetId::of_payload(&cs_bytes);
    let pending = PendingSubmit {
        incarnation: o.meta.incarnation,
        branch: o.meta.branch_id,
        integration: None,
        change_set_id: cs_id,
        change_set: cs_bytes,
        author: o.meta.author.clone(),
        message: a.message.clone(),
        keep_locks: a.keep_locks,
        locks: set
            .entries
            .iter()
            .filter_map(|e| {
                local_locks.get(&e.path).map(|g| PendingLock {
                    path: e.path.clone(),
                    generation: *g,
                })
            })
            .collect(),
        created_ms: now_ms(),
        fingerprints,
    };
    {
        let tx = o.ws.write()?;
        tx.put_pending(&op, &pending)?;
        tx.commit()?;
    }
    remote.context().failpoints.point("submit-after-pending");
    let (objects, bytes) = upload(o, remote, &op, &pending, &frozen.pinned, known)?;
    remote.context().failpoints.point("submit-after-upload");
    let change = send(o, remote, &op, &pending)?;
    Ok(Submitted {
        change,
        files: set.entries.len(),
        uploaded_objects: objects + frozen.streamed_objects,
        uploaded_bytes: bytes + frozen.streamed_bytes,
        secs: t.elapsed().as_secs_f64(),
    })
}

/// What the freeze produced.
struct Frozen {
    /// One per file of `to_import`, in order.
    files: Vec<scribe_objects::ImportedFile>,
    streamed_objects: usize,
    streamed_bytes: u64,
    /// What the stream pinned (and the server stores).
    pinned: HashSet<ObjectId>,
}

/// Freeze the files of `to_import` (their fingerprints, taken just before,
/// beside them): every file is chunked and streamed to the server under
/// the upload intent `op` ([`super::stream`]), small files (one chunk
/// each) many to a request, large ones chunk by chunk. Nothing but the
/// manifests is written locally, chunks the server already holds (an
/// edit's unchanged ranges, content submitted before) are not sent, and
/// every chunk is published before this returns.
fn freeze(
    o: &Opened,
    remote: &ServerLink,
    op: &OperationId,
    to_import: &[(String, std::path::PathBuf, bool)],
    fingerprints: &[(String, scribe_workspace::records::Fingerprint)],
) -> Result<Frozen> {
    let mut frozen = Frozen {
        files: Vec::new(),
        streamed_objects: 0,
        streamed_bytes: 0,
        pinned: HashSet::new(),
    };
    if !to_import.is_empty() {
        let sizes: Vec<u64> = fingerprints.iter().map(|(_, f)| f.size).collect();
        let progress = &remote.context().progress;
        progress.start(Task::Stream, sizes.iter().sum());
        let paths: Vec<std::path::PathBuf> = to_import.iter().map(|f| f.1.clone()).collect();
        let streamed =
            super::stream::freeze_and_upload(remote, o.meta.workspace_id, op, &paths, &sizes);
        progress.finish(Task::Stream);
        let streamed = streamed?;
        frozen.files = streamed.files;
        frozen.streamed_objects = streamed.objects;
        frozen.streamed_bytes = streamed.bytes;
        frozen.pinned = streamed.pinned;
    }
    remote.context().failpoints.point("submit-after-freeze");
    if frozen.files.len() != to_import.len() {
        return Err(Error::new(ErrorCode::Internal, "the freeze lost a file"));
    }
    Ok(frozen)
}

/// A file rewritten while the freeze read it (its size or mtime after the
/// read differ from the fingerprint taken before, or the bytes read do not
/// have that size) is not submitted: nothing has been recorded yet, and the
/// next `scribe submit` freezes the file as it is then. "After the read" is
/// the freeze's own look at the open file once its last byte was read
/// ([`scribe_objects::ReadStamp`]: no path is looked up again here; for a
/// 52,000-file import that was a tenth of a second on one core while the
/// server waited); a result without one is checked on its path.
fn refuse_if_changed(
    to_import: &[(String, std::path::PathBuf, bool)],
    fingerprints: &[(String, scribe_workspace::records::Fingerprint)],
    imported: &[scribe_objects::ImportedFile],
) -> Result<()> {
    let mut changed = Vec::new();
    for (((p, full, _), (_, before)), imp) in to_import.iter().zip(fingerprints).zip(imported) {
        let now = match imp.read_stamp {
            Some(stamp) => Some(stamp_fingerprint(&stamp)),
            None => std::fs::symlink_metadata(full)
                .ok()
                .map(|m| fingerprint_of(&m, before.recorded_ms))
                .map(|f| (f.size, f.mtime_s, f.mtime_ns)),
        };
        let same = now == Some((before.size, before.mtime_s, before.mtime_ns));
        if !same || imp.size != before.size {
            changed.push(p.clone());
        }
    }
    if changed.is_empty() {
        return Ok(());
    }
    Err(Error::new(ErrorCode::ChangedWhileSubmitting,
        format!(
            "{} file(s) changed while they were being read for this submission; nothing was submitted",
            changed.len()
        ),
    )
    .with_paths(changed))
}

/// A read stamp's size and modification time as a fingerprint holds them.
fn stamp_fingerprint(stamp: &scribe_objects::ReadStamp) -> (u64, u64, u32) {
    let (s, ns) = scribe_workspace::records::mtime_parts(stamp.modified);
    (stamp.size, s, ns)
}

/// A chunk the cache does not hold (a large file's chunks are streamed to
/// the server, never cached) but the server lacks: read it from the
/// working file, which still holds it unless rewritten since the freeze.
/// `None` when it does not (or the chunk is unknown).
fn chunk_from_working_file(
    o: &Opened,
    places: &HashMap<ObjectId, (String, u64, u32)>,
    id: &ObjectId,
) -> Option<Vec<u8>> {
    use std::io::{Read, Seek};
    let (path, offset, len) = places.get(id)?;
    let full = scribe_workspace::guard::checked(o.ws.root(), path).ok()?;
    let mut data = vec![0u8; *len as usize];
    let read = std::fs::File::open(&full).and_then(|mut f| {
        f.seek(std::io::SeekFrom::Start(*offset))?;
        f.read_exact(&mut data)
    });
    (read.is_ok() && ObjectId::chunk(ChunkId(*blake3::hash(&data).as_bytes())) == *id)
        .then_some(data)
}

/// The manifests of the files this freeze read that the stream did not
/// send (small files': one chunk each) while it stored every chunk they
/// name, by id, encoded again from the import's results: the upload then
/// neither reads them back from the cache nor asks the server about them.
/// Each is checked against the id the import gave (a mismatch leaves it
/// to the cache).
fn frozen_manifests(
    files: &[scribe_objects::ImportedFile],
    streamed: &HashSet<ObjectId>,
) -> HashMap<ObjectId, Vec<u8>> {
    files
        .iter()
        .filter(|f| !streamed.contains(&ObjectId::manifest(f.manifest_id)))
        .filter(|f| {
            f.chunks
                .iter()
                .all(|c| streamed.contains(&ObjectId::chunk(c.id)))
        })
        .filter_map(|f| {
            let payload = scribe_objects::encode_manifest(f.size, &f.content_id, &f.chunks).ok()?;
            (ManifestId::of_payload(&payload) == f.manifest_id)
                .then(|| (ObjectId::manifest(f.manifest_id), payload))
        })
        .collect()
}

/// Send every object of the candidate the server lacks: chunks, then
/// manifests, then the change set. What is in `streamed` (pinned under
/// `op` by this submission's stream and stored on the server) is not
/// pinned or checked again: a manifest there (a large file's, streamed
/// after every chunk of its file) is not even read, a chunk there is left
/// out of the one pin-and-check request (for a 52,000-file import half of
/// its 104,000 ids). A manifest in `known` (this freeze's small files',
/// [`frozen_manifests`]) is not read from the cache and not asked about:
/// it is sent in `ObjectPutMany` groups, which pin what they carry before
/// storing it (for a 52,000-file import, 51,000 ids fewer in the pin
/// request and 51,000 cache reads fewer; a manifest the server holds
/// already is a hundred bytes sent again).
fn upload(
    o: &Opened,
    remote: &ServerLink,
    op: &OperationId,
    p: &PendingSubmit,
    streamed: &HashSet<ObjectId>,
    mut known: HashMap<ObjectId, Vec<u8>>,
) -> Result<(usize, u64)> {
    // Borrowed: no string per entry (the paths are only read below).
    let set = scribe_format::changeset::ChangeSetRef::decode(&p.change_set)?;
    let mut chunks = Vec::new();
    let mut manifests = Vec::new();
    // Where each chunk lies in its working file (for chunks a freeze
    // against the base left on the server).
    let mut places: HashMap<ObjectId, (String, u64, u32)> = HashMap::new();
    // The manifests read here, sent below without reading them again.
    let mut read: HashMap<ObjectId, Vec<u8>> = HashMap::new();
    // This freeze's manifests in memory: sent without a pin request.
    let mut unasked: Vec<(ObjectId, Vec<u8>)> = Vec::new();
    for e in set.entries() {
        if let Some(s) = e.state {
            let mid = ObjectId::manifest(s.manifest);
            if streamed.contains(&mid) || read.contains_key(&mid) {
                continue;
            }
            // Its chunks were streamed (pinned and stored): only the
            // manifest itself goes.
            if let Some(b) = known.remove(&mid) {
                unasked.push((mid, b));
                continue;
            }
            let mbytes = remote.cache().get(&mid)?;
            let mref = scribe_format::manifest::ManifestRef::decode(&mbytes)?;
            let mut offset = 0u64;
            for c in mref.chunks() {
                let oid = ObjectId::chunk(c.id);
                if streamed.contains(&oid) {
                    offset += u64::from(c.length);
                    continue;
                }
                chunks.push(oid);
                places
                    .entry(oid)
                    .or_insert_with(|| (e.path.to_string(), offset, c.length));
                offset += u64::from(c.length);
            }
            manifests.push(mid);
            read.insert(mid, mbytes);
        }
    }
    let cs = ObjectId::change_set(p.change_set_id);
    let mut all: Vec<ObjectId> = Vec::new();
    let mut seen = HashSet::new();
    for id in chunks.into_iter().chain(manifests).chain([cs]) {
        if seen.insert(id) {
            all.push(id);
        }
    }
    let repo = o.meta.repository_name.clone();
    let ws_id = o.meta.workspace_id;
    // Pins every id (the present ones are reused) in one transaction. An
    // operation with a recorded outcome cannot pin: it was submitted (a
    // replay after a lost reply), and the `Submit` replay answers it.
    let missing: HashSet<ObjectId> =
        match remote.with(|c| c.objects_pin_missing(&repo, ws_id, *op, &all)) {
            Ok(missing) => missing.into_iter().collect(),
            Err(e) if e.code() == ErrorCode::AlreadyExists => return Ok((0, 0)),
            Err(e) => return Err(e),
        };
    let mut bytes = 0u64;
    let mut n = 0;
    // Paths whose chunks neither the cache, the server nor the file hold.
    let mut lost: Vec<String> = Vec::new();
    let progress = &remote.context().progress;
    progress.start(Task::Upload, (missing.len() + unasked.len()) as u64);
    // Small objects travel in groups (one pin transaction and one durable
    // publication on the server per group); large ones in pieces.
    let mut group: Vec<m::ObjectPiece> = Vec::new();
    let mut group_bytes = 0usize;
    let flush = |group: &mut Vec<m::ObjectPiece>| -> Result<()> {
        if group.is_empty() {
            return Ok(());
        }
        let objects = std::mem::take(group);
        remote.with(|c| put_group(c, &repo, ws_id, op, objects, progress.as_ref()))
    };
    // The manifests held in memory first (their chunks are stored), then
    // what the server lacks of the rest, the change set last.
    let mut groups: Vec<Vec<m::ObjectPiece>> = Vec::new();
    for (id, data) in unasked {
        bytes += data.len() as u64;
        n += 1;
        if group_bytes + data.len() > m::MAX_OBJECT_DATA_PER_FRAME as usize
            || group.len() >= crate::transfer::MAX_GROUP_OBJECTS
        {
            groups.push(std::mem::take(&mut group));
            group_bytes = 0;
        }
        group_bytes += data.len();
        group.push(m::ObjectPiece {
            id,
            data: scribe_format::wire::Bytes(data),
        });
    }
    groups.push(std::mem::take(&mut group));
    group_bytes = 0;
    send_groups(remote, &repo, ws_id, op, groups)?;
    for id in all.iter().filter(|id| missing.contains(id)) {
        let data = if *id == cs {
            p.change_set.clone()
        } else if let Some(d) = read.remove(id) {
            d
        } else {
            match remote.cache().get(id) {
                Ok(d) => d,
                Err(scribe_objects::StoreError::NotFound { .. }) => {
                    match chunk_from_working_file(o, &places, id) {
                        Some(d) => d,
                        None => {
                            let path = places
                                .get(id)
                                .map_or_else(|| id.to_string(), |p| p.0.clone());
                            if !lost.contains(&path) {
                                lost.push(path);
                            }
                            continue;
                        }
                    }
                }
                Err(e) => return Err(e.into()),
            }
        };
        bytes += data.len() as u64;
        n += 1;
        if data.len() > crate::transfer::SMALL_OBJECT_BYTES {
            remote.with(|c| c.put_object_staged(&repo, ws_id, *op, *id, &data))?;
            progress.advance(Task::Upload, 1);
            progress.advance(Task::Sent, data.len() as u64);
            continue;
        }
        if group_bytes + data.len() > m::MAX_OBJECT_DATA_PER_FRAME as usize
            || group.len() >= crate::transfer::MAX_GROUP_OBJECTS
        {
            flush(&mut group)?;
            group_bytes = 0;
        }
        group_bytes += data.len();
        group.push(m::ObjectPiece {
            id: *id,
            data: scribe_format::wire::Bytes(data),
        });
    }
    flush(&mut group)?;
    remote.with(|c| c.objects_publish(&repo))?;
    progress.finish(Task::Upload);
    if !lost.is_empty() {
        return withdraw(o, remote, op, lost);
    }
    Ok((n, bytes))
}

/// Send `objects` (small) in one `ObjectPutMany` on `c` and report them.
fn put_group(
    c: &mut crate::Client,
    repo: &str,
    workspace: scribe_format::WorkspaceId,
    op: &OperationId,
    objects: Vec<m::ObjectPiece>,
    progress: &dyn crate::Progress,
) -> Result<(), crate::ClientError> {
    let count = objects.len() as u64;
    let sent: u64 = objects.iter().map(|o| o.data.0.len() as u64).sum();
    c.object_put_many(m::ObjectPutMany {
        repo: repo.to_string(),
        operation: *op,
        workspace,
        objects,
    })?;
    progress.advance(Task::Upload, count);
    progress.advance(Task::Sent, sent);
    Ok(())
}

/// Send `groups` of small objects (each one `ObjectPutMany`) on the
/// workspace's connection and, when there are several, on a second
/// connection beside it: the server stores one group while it reads the
/// other (a 52,000-file import's manifests are 13 groups). Without a
/// usable second connection all go on the first.
fn send_groups(
    remote: &ServerLink,
    repo: &str,
    workspace: scribe_format::WorkspaceId,
    op: &OperationId,
    mut groups: Vec<Vec<m::ObjectPiece>>,
) -> Result<()> {
    groups.retain(|g| !g.is_empty());
    let progress = remote.context().progress.as_ref();
    let on_first = |groups: Vec<Vec<m::ObjectPiece>>| -> Result<()> {
        groups
            .into_iter()
            .try_for_each(|g| remote.with(|c| put_group(c, repo, workspace, op, g, progress)))
    };
    let extra = if groups.len() >= 2 {
        remote.usable_extra_connection()
    } else {
        None
    };
    let Some(mut other) = extra else {
        return on_first(groups);
    };
    let theirs: Vec<Vec<m::ObjectPiece>> = groups.split_off(groups.len() / 2);
    std::thread::scope(|s| {
        let lane = s.spawn(move || -> Result<()> {
            for g in theirs {
                put_group(&mut other, repo, workspace, op, g, progress)?;
            }
            Ok(())
        });
        let mine = on_first(groups);
        let theirs = lane
            .join()
            .unwrap_or_else(|_| Err(Error::new(ErrorCode::Internal, "an upload thread panicked")));
        mine.and(theirs)
    })
}

/// The server lacks chunks of the candidate that only the working files
/// held, and they were rewritten since the freeze (the server lost objects
/// it had published and pinned). Unless the server recorded an outcome for
/// the operation (then the `Submit` replay settles it), the candidate can
/// never complete: its exact row is archived as
/// `recovery/submit-<op>.pending` and removed, so the next `scribe submit`
/// freezes the files as they are now. Opened records and files are kept.
fn withdraw(
    o: &Opened,
    remote: &ServerLink,
    op: &OperationId,
    lost: Vec<String>,
) -> Result<(usize, u64)> {
    let repo = o.meta.repository_name.clone();
    if remote.with(|c| c.operation_outcome(&repo, *op))?.is_some() {
        return Ok((0, 0));
    }
    let archived = archive_pending(&o.ws, op)?;
    let mut paths = lost;
    paths.push(archived.display().to_string());
    Err(Error::new(ErrorCode::SubmitWithdrawn,
        format!(
            "the server no longer holds bytes of submission {} and the working files changed since it was prepared; it was withdrawn",
            op.to_hex()
        ),
    )
    .with_paths(paths))
}

/// Submit (or replay) the candidate and settle its outcome locally. The
/// local half's plan ([`plan_finalize`]: the change set decoded, every
/// baseline row) is worked out on a thread of its own while the server
/// prepares the change, not after its answer.
fn send(o: &Opened, remote: &ServerLink, op: &OperationId, p: &PendingSubmit) -> Result<u64> {
    let repo = o.meta.repository_name.clone();
    let req = m::Submit {
        repo: repo.clone(),
        operation: *op,
        workspace: o.meta.workspace_id,
        branch: p.branch,
        change_set: p.change_set_id,
        author: p.author.clone(),
        message: Text(p.message.clone()),
        keep_locks: p.keep_locks,
        timestamp_ms: p.created_ms,
    };
    std::thread::scope(|s| {
        let plan = s.spawn(|| plan_finalize(op, p));
        let mut outcome = remote.with(|c| c.submit(req.clone()))?;
        if outcome.code == ErrorCode::MissingObjects.number() {
            upload(o, remote, op, p, &HashSet::new(), HashMap::new())?;
            outcome = remote.with(|c| c.submit(req.clone()))?;
        }
        remote.context().failpoints.point("submit-after-reply");
        let plan = plan
            .join()
            .map_err(|_| Error::new(ErrorCode::Internal, "the finalization planner panicked"))?;
        settle(o, remote, op, p, outcome, plan)
    })
}

/// The repository's current incarnation on the server.
pub fn server_incarnation(remote: &ServerLink) -> Result<[u8; 16]> {
    Ok(super::sync::repo_info(remote)?.incarnation)
}

/// Settle a recorded outcome locally: accepted → finalize; refused →
/// forget the candidate; not final → keep it for a retry.
fn settle(
    o: &Opened,
    remote: &ServerLink,
    op: &OperationId,
    p: &PendingSubmit,
    outcome: m::Outcome,
    plan: std::result::Result<FinalizePlan<'_>, scribe_workspace::WorkspaceError>,
) -> Result<u64> {
    if outcome.code == 0 {
        let f = finalize_planned(&o.ws, op, plan?, outcome.change)?;
        if o.meta.readonly {
            for path in &f.updated {
                let Ok(full) = scribe_workspace::guard::checked(o.ws.root(), path) else {
                    continue;
                };
                let exec = std::fs::metadata(&full)
                    .map(|m| scribe_workspace::platform::is_executable(&m))
                    .unwrap_or(false);
                let _ = scribe_workspace::platform::set_file_mode(&full, exec, true);
            }
        }
        if p.keep_locks && !p.locks.is_empty() {
            // The kept locks of moved files stay at their destinations.
            let locked: Vec<String> = p.locks.iter().map(|l| l.path.clone()).collect();
            super::locks::release_moved_sources(
                o,
                remote,
                &ChangeSet::decode(&p.change_set)?,
                &locked,
            )?;
        }
        return Ok(outcome.change);
    }
    let code = ErrorCode::from_number(outcome.code).unwrap_or(ErrorCode::Internal);
    if code == ErrorCode::MissingObjects || code == ErrorCode::Internal || code == ErrorCode::Busy {
        // Not final: keep the candidate for a retry with the same id.
        return Err(Error::new(
            code,
            scribe_format::wire::message::shown_message(outcome.code, &outcome.detail),
        ));
    }
    abandon(&o.ws, op)?;
    // A lock this workspace took and someone broke: said by name (the
    // refusal alone reads as if it had never been taken).
    let broken: Vec<&str> = if matches!(code, ErrorCode::LockedByOther | ErrorCode::LockRequired) {
        p.locks
            .iter()
            .filter(|l| outcome.paths.contains(&l.path))
            .map(|l| l.path.as_str())
            .collect()
    } else {
        Vec::new()
    };
    let why = if broken.is_empty() {
        String::new()
    } else {
        format!(
            "; your lock on {} was broken by another workspace (`scribe unlock --force`){}",
            broken.join(", "),
            if code == ErrorCode::LockedByOther {
                ", which holds it now"
            } else {
                ": `scribe lock PATH` takes it again"
            }
        )
    };
    Err(Error::new(
        code,
        format!("the server refused the submission: {}{why}", outcome.detail),
    )
    .with_paths(outcome.paths))
}

/// Refuse, before anything is frozen or uploaded, a submission of files
/// another workspace holds locks on: the server would refuse it at
/// acceptance, after every opened file (a whole PSD, say) was uploaded.
/// Every lock on the opened paths is read (`locks::locks_on`: each path,
/// or every page under their common prefix); the server's check at
/// acceptance stays the authority (a lock taken meanwhile is refused
/// there as before).
fn refuse_locked_by_others(
    o: &Opened,
    remote: &ServerLink,
    opened: &[(String, scribe_workspace::records::OpenedRecord)],
    local_locks: &HashMap<String, u64>,
) -> Result<()> {
    if opened.is_empty() {
        return Ok(());
    }
    let paths: Vec<&str> = opened.iter().map(|(p, _)| p.as_str()).collect();
    let repo = o.meta.repository_name.clone();
    let locks = remote.with(|c| super::locks::locks_on(c, &repo, &paths))?;
    let held: Vec<String> = locks
        .iter()
        .filter(|l| l.workspace != o.meta.workspace_id)
        .map(|l| {
            let broken = if local_locks.contains_key(&l.path) {
                format!(
                    "; your lock on {} was broken by another workspace (`scribe unlock \
                     --force`), which holds it now",
                    l.path
                )
            } else {
                String::new()
            };
            format!(
                "{} (locked by {}, workspace {}{broken})",
                l.path,
                l.author,
                &l.workspace.to_hex()[..8]
            )
        })
        .collect();
    if held.is_empty() {
        return Ok(());
    }
    Err(Error::new(
        ErrorCode::LockedByOther,
        format!(
            "{} file(s) are locked by another workspace; nothing was uploaded, and your files \
             stay opened",
            held.len()
        ),
    )
    .with_paths(held))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn imported(size: u64) -> scribe_objects::ImportedFile {
        scribe_objects::ImportedFile {
            manifest_id: scribe_format::ManifestId([1; 32]),
            content_id: scribe_format::FileContentId([2; 32]),
            size,
            chunks: Vec::new(),
            new_bytes_stored: 0,
            via_content_index: false,
            read_stamp: None,
        }
    }

    type Fps = Vec<(String, scribe_workspace::records::Fingerprint)>;
    type ToImport = Vec<(String, std::path::PathBuf, bool)>;

    /// A ten-byte `a.bin`, its metadata, fingerprint and import entry.
    fn one_file() -> (
        tempfile::TempDir,
        std::path::PathBuf,
        std::fs::Metadata,
        Fps,
        ToImport,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.bin");
        std::fs::write(&path, b"0123456789").unwrap();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let fps = vec![("a.bin".to_string(), fingerprint_of(&meta, 1))];
        let files = vec![("a.bin".to_string(), path.clone(), false)];
        (dir, path, meta, fps, files)
    }

    #[test]
    fn a_file_rewritten_during_the_freeze_is_refused() {
        let (_dir, path, _meta, fps, files) = one_file();
        // Unchanged, and the bytes read had the recorded size.
        refuse_if_changed(&files, &fps, &[imported(10)]).unwrap();
        // The read saw another size (the file grew between stat and read).
        let err = refuse_if_changed(&files, &fps, &[imported(12)]).unwrap_err();
        assert_eq!(err.code(), ErrorCode::ChangedWhileSubmitting);
        // Rewritten with the same size but a new mtime.
        std::fs::write(&path, b"9876543210").unwrap();
        let f = std::fs::File::options().write(true).open(&path).unwrap();
        f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000))
            .unwrap();
        let err = refuse_if_changed(&files, &fps, &[imported(10)]).unwrap_err();
        assert_eq!(err.code(), ErrorCode::ChangedWhileSubmitting);
        assert_eq!(err.paths(), ["a.bin".to_string()]);
        // Deleted meanwhile.
        std::fs::remove_file(&path).unwrap();
        assert!(refuse_if_changed(&files, &fps, &[imported(10)]).is_err());
    }

    /// With the freeze's stamp of the open file after its read, the path is
    /// not looked at again: a stamp equal to the fingerprint passes (even
    /// when the path now holds another file: the bytes read are those the
    /// fingerprint describes), one with another modification time or size
    /// is refused.
    #[test]
    fn the_freezes_stamp_decides_without_the_path() {
        let (_dir, path, meta, fps, files) = one_file();
        let stamped = |size: u64, modified: std::time::SystemTime| {
            let mut f = imported(10);
            f.read_stamp = Some(scribe_objects::ReadStamp {
                size,
                modified: Some(modified),
            });
            f
        };
        let mtime = meta.modified().unwrap();
        // Replaced after the read (an editor's save): the bytes read stand.
        std::fs::remove_file(&path).unwrap();
        refuse_if_changed(&files, &fps, &[stamped(10, mtime)]).unwrap();
        // Written while it was read: the handle saw a new mtime or size.
        let later = mtime + std::time::Duration::from_millis(3);
        let err = refuse_if_changed(&files, &fps, &[stamped(10, later)]).unwrap_err();
        assert_eq!(err.code(), ErrorCode::ChangedWhileSubmitting);
        assert!(refuse_if_changed(&files, &fps, &[stamped(11, mtime)]).is_err());
    }

    /// The manifests a freeze hands to the upload are those the stream
    /// did not send while it stored their chunks, encoded again from the
    /// import's results and checked against the ids the import gave.
    #[test]
    fn frozen_manifests_are_the_unsent_ones_with_their_own_ids() {
        use scribe_format::manifest::ChunkRef;
        let file = |body: &[u8]| {
            let content = scribe_format::FileContentId(*blake3::hash(body).as_bytes());
            let chunks = if body.is_empty() {
                Vec::new()
            } else {
                vec![ChunkRef {
                    id: ChunkId(content.0),
                    length: body.len() as u32,
                }]
            };
            let payload =
                scribe_objects::encode_manifest(body.len() as u64, &content, &chunks).unwrap();
            scribe_objects::ImportedFile {
                manifest_id: ManifestId::of_payload(&payload),
                content_id: content,
                size: body.len() as u64,
                chunks,
                new_bytes_stored: 0,
                via_content_index: false,
                read_stamp: None,
            }
        };
        let small = file(b"a small file");
        let empty = file(b"");
        let streamed = file(b"a large file's manifest, sent by the stream");
        // An import result whose id is not its manifest's: left to the cache.
        let mut wrong = file(b"another");
        wrong.manifest_id = ManifestId([9; 32]);
        // A file whose chunk the stream did not store (the server lacks
        // it): left to the upload's checks.
        let unsent = file(b"a chunk the stream did not send");
        let mut sent: HashSet<ObjectId> = [ObjectId::manifest(streamed.manifest_id)].into();
        for f in [&small, &streamed, &wrong] {
            sent.extend(f.chunks.iter().map(|c| ObjectId::chunk(c.id)));
        }
        let known = frozen_manifests(
            &[small.clone(), empty.clone(), streamed, wrong, unsent],
            &sent,
        );
        let mut ids: Vec<ObjectId> = known.keys().copied().collect();
        ids.sort();
        let mut want = vec![
            ObjectId::manifest(small.manifest_id),
            ObjectId::manifest(empty.manifest_id),
        ];
        want.sort();
        assert_eq!(ids, want);
        for (id, payload) in &known {
            assert_eq!(ObjectId::manifest(ManifestId::of_payload(payload)), *id);
        }
    }
}

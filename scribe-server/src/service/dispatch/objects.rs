//! ObjectsMissing, ObjectPut, ObjectPutStaged, ObjectPutMany,
//! ObjectsPinMissing, ObjectsPublish, ObjectGet, ObjectGetMany: object
//! transfer with upload pins and the connection's stage (see
//! [`super::super::upload`]).

use std::io::Read;
use std::sync::Arc;

use scribe_format::wire::message::{self as m, MAX_IDS_PER_REQUEST, MAX_OBJECT_DATA_PER_FRAME};
use scribe_format::wire::Bytes;
use scribe_format::{ErrorCode, ObjectId, RepositoryId};

use super::super::pins;
use super::super::upload::{
    max_object_bytes, Download, DownloadReader, Held, Partial, Publishing, Reservation,
    StagedObject, MAX_REMEMBERED_PINS, STAGE_PUBLISH_AGE, STAGE_PUBLISH_BYTES,
    STAGE_PUBLISH_OBJECTS,
};
use super::{malformed, open, DispatchResult, Failure, Service, Session};

pub(super) fn missing(
    svc: &Service,
    r: m::ObjectsMissing,
) -> DispatchResult<m::ObjectsMissingReply> {
    check_id_count(r.ids.len())?;
    let (repo, store) = open(svc, &r.repo)?;
    let mut missing = store.missing(&r.ids)?;
    // Objects the tier holds are not missing: the client need not upload
    // them again (reading them puts them back into the local store).
    if let Some(fb) = svc.stores().fallback() {
        missing.retain(|id| !fb.has(repo.id(), id));
    }
    Ok(m::ObjectsMissingReply { missing })
}

/// Put `ids` the local store lacks back into it from the tier, if any.
/// `id`'s verified bytes from the tier when the local store lacks it
/// (`Fallback::read`); `None` to read the local store.
fn tier_read(
    svc: &Service,
    repo: scribe_format::RepositoryId,
    store: &Arc<scribe_objects::ObjectStore>,
    id: &ObjectId,
) -> DispatchResult<Option<bytes::Bytes>> {
    let Some(fb) = svc.stores().fallback() else {
        return Ok(None);
    };
    svc.stores().touch(repo, std::slice::from_ref(id));
    if store.contains(id)? {
        return Ok(None);
    }
    Ok(fb
        .read(repo, id, store)
        .map_err(|detail| scribe_objects::StoreError::Io {
            path: std::path::PathBuf::from(format!("tier:{id}")),
            source: std::io::Error::other(detail),
        })?)
}

/// Publish the stage of this connection; the repository must exist, even
/// with nothing staged.
pub(super) fn publish(
    svc: &Service,
    session: &mut Session,
    repo: &str,
) -> DispatchResult<m::ObjectsPublishReply> {
    open(svc, repo)?;
    Ok(m::ObjectsPublishReply {
        published: publish_staged(svc, session)?,
    })
}

/// At most [`MAX_IDS_PER_REQUEST`] ids per `ObjectsMissing` /
/// `ObjectsPinMissing`.
fn check_id_count(n: usize) -> DispatchResult<()> {
    if n > MAX_IDS_PER_REQUEST {
        return Err(Failure::new(
            ErrorCode::LimitExceeded,
            format!("{n} ids exceed {MAX_IDS_PER_REQUEST} per request"),
        ));
    }
    Ok(())
}

/// Pin every id for the intent in one transaction, then name the ones
/// neither the store nor this connection's stage holds.
pub(super) fn pin_missing(
    svc: &Service,
    session: &mut Session,
    r: m::ObjectsPinMissing,
) -> DispatchResult<m::ObjectsMissingReply> {
    check_id_count(r.ids.len())?;
    let (repo, store) = open(svc, &r.repo)?;
    pins::pin(
        &repo,
        r.workspace,
        r.operation,
        &r.ids,
        svc.max_pins_per_workspace(),
    )?;
    if session.pinned.len() + r.ids.len() > MAX_REMEMBERED_PINS {
        session.pinned.clear();
    }
    for id in &r.ids {
        session.pinned.insert((r.workspace, r.operation, *id));
    }
    let missing = store
        .missing(&r.ids)?
        .into_iter()
        .filter(|id| !session.has_staged(repo.id(), id))
        .collect();
    Ok(m::ObjectsMissingReply { missing })
}

fn o_repo(group: &[&StagedObject]) -> RepositoryId {
    group[0].repo
}

/// Publish this connection's staged objects (after the stage being
/// published in the background, if any): per repository one batch,
/// written in parallel, one durable locator commit. Returns how many were
/// staged. On failure the stage is dropped (the objects are simply not
/// stored; the client's next `ObjectsMissing` names them again).
pub(super) fn publish_staged(svc: &Service, session: &mut Session) -> DispatchResult<u32> {
    let earlier = session.finish_publishing();
    let staged = take_stage(session);
    earlier?;
    publish_objects(svc.stored_hook().as_deref(), staged)
}

/// Hand this connection's full stage to a thread that publishes it while
/// the connection goes on receiving (after the previous one is finished:
/// its failure is this call's). Its objects count as staged until the
/// next request that is not a staged put or `ObjectsPinMissing` finishes it.
fn start_publishing(svc: &Service, session: &mut Session) -> DispatchResult<()> {
    let earlier = session.finish_publishing();
    let staged = take_stage(session);
    earlier?;
    let ids = staged.iter().map(|o| (o.repo, o.id)).collect();
    let bytes = staged.iter().map(|o| o.data.len() as u64).sum();
    let hook = svc.stored_hook();
    let handle = std::thread::Builder::new()
        .name("scribe-publish".into())
        .spawn(move || publish_objects(hook.as_deref(), staged))
        .map_err(|e| {
            Failure::new(
                ErrorCode::ServerBusy,
                format!("cannot start publishing the staged objects now ({e}); retry shortly"),
            )
        })?;
    session.publishing = Some(Publishing { handle, ids, bytes });
    Ok(())
}

fn take_stage(session: &mut Session) -> Vec<StagedObject> {
    session.staged_bytes = 0;
    session.staged_since = None;
    std::mem::take(&mut session.staged)
}

/// Publish `staged`: per repository one batch, one durable locator commit;
/// `hook` is told what each operation now has stored.
fn publish_objects(
    hook: Option<&dyn crate::service::AcceptedHook>,
    staged: Vec<StagedObject>,
) -> DispatchResult<u32> {
    let count = staged.len() as u32;
    let mut groups: Vec<(RepositoryId, Vec<&StagedObject>)> = Vec::new();
    for o in &staged {
        match groups.iter_mut().find(|(r, _)| *r == o.repo) {
            Some((_, g)) => g.push(o),
            None => groups.push((o.repo, vec![o])),
        }
    }
    for (_, group) in groups {
        let store = &group[0].store;
        let batch = store.batch();
        let objects: Vec<(ObjectId, &[u8])> =
            group.iter().map(|o| (o.id, o.data.as_slice())).collect();
        batch.put_all_healing(&objects)?;
        batch.commit()?;
        let Some(hook) = hook else { continue };
        // Per operation, what is now stored (the tier uploads it early).
        let mut ops: Vec<(scribe_format::OperationId, Vec<ObjectId>, u64)> = Vec::new();
        for o in &group {
            let len = o.data.len() as u64;
            match ops.iter_mut().find(|(op, _, _)| *op == o.operation) {
                Some((_, ids, bytes)) => {
                    ids.push(o.id);
                    *bytes += len;
                }
                None => ops.push((o.operation, vec![o.id], len)),
            }
        }
        for (op, ids, bytes) in ops {
            hook.stored(o_repo(&group), op, store, &ids, bytes);
        }
    }
    Ok(count)
}

pub(super) fn put(
    svc: &Service,
    session: &mut Session,
    r: m::ObjectPut,
    staged: bool,
) -> DispatchResult<m::ObjectPutReply> {
    let (repo, store) = open(svc, &r.repo)?;
    if r.data.0.len() > MAX_OBJECT_DATA_PER_FRAME as usize {
        return Err(Failure::new(
            ErrorCode::LimitExceeded,
            format!(
                "a piece of {} bytes exceeds {MAX_OBJECT_DATA_PER_FRAME}",
                r.data.0.len()
            ),
        ));
    }
    let limit = max_object_bytes(r.id.kind);
    if r.total_len > limit {
        return Err(Failure::new(
            ErrorCode::LimitExceeded,
            format!(
                "object {} declares {} bytes; at most {limit} are accepted",
                r.id, r.total_len
            ),
        ));
    }
    let end = r.offset.checked_add(r.data.0.len() as u64);
    if end.is_none_or(|e| e > r.total_len) {
        session.upload = None;
        return Err(malformed(format!(
            "piece at {} of {} bytes runs past the declared length {}",
            r.offset,
            r.data.0.len(),
            r.total_len
        )));
    }
    if r.offset == 0 {
        // Pin before the first byte is accepted (unless this connection
        // pinned it with `ObjectsPinMissing`).
        if !(staged && session.pinned.contains(&(r.workspace, r.operation, r.id))) {
            pins::pin(
                &repo,
                r.workspace,
                r.operation,
                std::slice::from_ref(&r.id),
                svc.max_pins_per_workspace(),
            )?;
        }
        // An object the store holds is acknowledged at once, unless its
        // stored copy fails verification: then this upload replaces it
        // (issue #14 item 12; the check reads only already-present ids).
        if (staged && session.has_staged(repo.id(), &r.id))
            || (store.contains(&r.id)? && store.holds_sound(&r.id)?)
        {
            session.upload = None;
            return Ok(m::ObjectPutReply {
                received: r.total_len,
                complete: true,
            });
        }
        session.upload = None;
        // Nothing is charged yet: the budget pays for bytes as they arrive
        // (below), not for the declared length.
        let reservation = Reservation::take(svc.upload_budget(), 0)
            .ok_or_else(|| Failure::new(ErrorCode::Internal, "an empty reservation was refused"))?;
        session.upload = Some(Partial {
            reservation,
            repo: repo.id(),
            operation: r.operation,
            id: r.id,
            total_len: r.total_len,
            data: Vec::new(),
        });
    }
    let expected = match &session.upload {
        Some(p)
            if p.repo == repo.id()
                && p.id == r.id
                && p.operation == r.operation
                && p.total_len == r.total_len =>
        {
            p.data.len() as u64
        }
        _ => {
            session.upload = None;
            return Err(malformed(format!(
                "piece of {} at offset {} does not continue an upload; restart from 0",
                r.id, r.offset
            )));
        }
    };
    if r.offset != expected {
        session.upload = None;
        return Err(malformed(format!(
            "piece of {} at offset {}, expected {expected}; restart from 0",
            r.id, r.offset
        )));
    }
    let Some(p) = session.upload.as_mut() else {
        return Err(malformed("no upload in progress"));
    };
    let piece = r.data.0.len() as u64;
    // The first piece is kept as received (no copy: a whole object in one
    // piece needs nothing more); the buffer then grows to twice what has
    // arrived, never past the declared length, the budget charged for the
    // capacity first (issue #14 item 7: what was received, at most twice
    // over). So a chunk of two frames (most of a large file's: profile 1
    // averages 4 MiB, a frame carries 4 MiB) is copied once, into a buffer
    // of its exact length, where doubling from the first piece had copied
    // it into a buffer of that piece's size, then into one twice as big
    // (issue #19: the regrowth was about a fifth of the server's upload
    // time for large files).
    let first = p.data.is_empty();
    let needed = p.data.len() as u64 + piece;
    let capacity = if first {
        piece
    } else if needed <= p.data.capacity() as u64 {
        p.data.capacity() as u64
    } else {
        needed.saturating_mul(2).min(p.total_len)
    };
    let charged = p.reservation.bytes();
    if capacity > charged && !p.reservation.grow(capacity - charged) {
        session.upload = None;
        return Err(Failure::new(
            ErrorCode::ServerBusy,
            "the server is buffering as many upload bytes as it may; retry shortly",
        ));
    }
    if first {
        p.data = r.data.0;
    } else {
        if capacity > p.data.capacity() as u64 {
            let more = capacity as usize - p.data.len();
            if p.data.try_reserve_exact(more).is_err() {
                session.upload = None;
                return Err(Failure::new(
                    ErrorCode::ServerBusy,
                    "cannot buffer the object now; retry shortly",
                ));
            }
        }
        p.data.extend_from_slice(&r.data.0);
    }
    let received = p.data.len() as u64;
    if received < p.total_len {
        return Ok(m::ObjectPutReply {
            received,
            complete: false,
        });
    }
    let Some(p) = session.upload.take() else {
        return Err(malformed("no upload in progress"));
    };
    let computed = scribe_format::id::object_identity(p.id.kind, &p.data)?;
    if computed != p.id {
        return Err(Failure::new(
            ErrorCode::Corrupt,
            format!("uploaded bytes hash to {computed}, not {}", p.id),
        ));
    }
    if staged {
        session.staged_bytes += p.data.len() as u64;
        session.staged.push(StagedObject {
            _reservation: p.reservation,
            repo: p.repo,
            operation: p.operation,
            store,
            id: p.id,
            data: p.data,
        });
        let since = *session
            .staged_since
            .get_or_insert_with(std::time::Instant::now);
        if session.staged_bytes >= STAGE_PUBLISH_BYTES
            || session.staged.len() >= STAGE_PUBLISH_OBJECTS
            || since.elapsed() >= STAGE_PUBLISH_AGE
        {
            start_publishing(svc, session)?;
        }
    } else {
        let batch = store.batch();
        batch.put_healing(p.id, &p.data)?;
        batch.commit()?;
        svc.stored(p.repo, p.operation, &store, &[p.id], p.data.len() as u64);
        svc.prechecks().offer(&repo, [(&p.id, p.data.as_slice())]);
    }
    Ok(m::ObjectPutReply {
        received,
        complete: true,
    })
}

/// Many whole small objects: every id pinned in one transaction before any
/// byte is accepted, every identity verified, one durable publication.
/// `pieces` are the request's objects (its own list may be empty: decoded
/// in place, they are ranges of the frame).
pub(super) fn put_many(
    svc: &Service,
    session: &Session,
    r: &m::ObjectPutMany,
    pieces: &[(ObjectId, &[u8])],
) -> DispatchResult<m::ObjectPutManyReply> {
    use rayon::prelude::*;
    let (repo, store) = open(svc, &r.repo)?;
    let total: u64 = pieces.iter().map(|(_, d)| d.len() as u64).sum();
    if total > u64::from(MAX_OBJECT_DATA_PER_FRAME) {
        return Err(Failure::new(
            ErrorCode::LimitExceeded,
            format!("{total} bytes of objects exceed {MAX_OBJECT_DATA_PER_FRAME} in one request"),
        ));
    }
    // Every piece hashed (and below compressed) on all cores when the frame
    // is worth the pool (a frame of small files holds hundreds); a small
    // submission's few pieces on this thread.
    let identity =
        |(id, data): &(ObjectId, &[u8])| scribe_format::id::object_identity(id.kind, data);
    let computed = if scribe_objects::worth_a_pool(pieces) {
        pieces
            .par_iter()
            .map(identity)
            .collect::<Result<Vec<_>, _>>()?
    } else {
        pieces.iter().map(identity).collect::<Result<Vec<_>, _>>()?
    };
    let wrong = computed
        .into_iter()
        .zip(pieces)
        .find(|(computed, (id, _))| computed != id);
    if let Some((computed, (id, _))) = wrong {
        return Err(Failure::new(
            ErrorCode::Corrupt,
            format!("uploaded bytes hash to {computed}, not {id}"),
        ));
    }
    let ids: Vec<ObjectId> = pieces.iter().map(|(id, _)| *id).collect();
    // Pinned before any byte is stored, unless this connection's
    // `ObjectsPinMissing` pinned them for this intent already (a durable
    // transaction each time otherwise, per frame of a small-file import).
    let unpinned: Vec<ObjectId> = ids
        .iter()
        .filter(|id| !session.pinned.contains(&(r.workspace, r.operation, **id)))
        .copied()
        .collect();
    if !unpinned.is_empty() {
        pins::pin(
            &repo,
            r.workspace,
            r.operation,
            &unpinned,
            svc.max_pins_per_workspace(),
        )?;
    }
    let batch = store.batch();
    batch.put_all_healing(pieces)?;
    batch.commit()?;
    svc.stored(repo.id(), r.operation, &store, &ids, total);
    // A large file's manifest, sent right after its chunks: checked while
    // the rest of the upload goes on.
    svc.prechecks()
        .offer(&repo, pieces.iter().map(|(id, data)| (id, *data)));
    Ok(m::ObjectPutManyReply {
        stored: pieces.len() as u32,
    })
}

/// Whole objects in request order, as many as fit in one frame's data
/// budget; the first that would not fit ends the reply. On a connection
/// that sends by reference ([`Session::zero_copy`]) the objects go to
/// [`Session::outgoing_pieces`] and the reply's list stays empty.
pub(super) fn get_many(
    svc: &Service,
    session: &mut Session,
    r: m::ObjectGetMany,
) -> DispatchResult<m::ObjectGetManyReply> {
    if r.ids.len() > m::MAX_IDS_PER_GET_MANY {
        return Err(Failure::new(
            ErrorCode::LimitExceeded,
            format!(
                "{} ids exceed {} per request",
                r.ids.len(),
                m::MAX_IDS_PER_GET_MANY
            ),
        ));
    }
    let (repo, store) = open(svc, &r.repo)?;
    // The client reads the objects after the first next, in this order
    // (this answer, or its next requests): a tier fetches them meanwhile.
    if r.ids.len() > 1 {
        if let Some(fb) = svc.stores().fallback() {
            fb.hint(repo.id(), &r.ids[1..], &store);
        }
    }
    let mut objects = Vec::new();
    let mut total = 0usize;
    for id in &r.ids {
        // An object that cannot fit is not read: the client asks for it
        // again (first in its next request, or by ranges when it is
        // larger than a reply). Reading it only to drop it cost a second
        // read of every object over 2 MiB a fresh workspace prefetches,
        // and from a cold cache the wait for that object's block before
        // the answer went.
        if total as u64 + least_len(svc, repo.id(), &store, id)?
            > u64::from(MAX_OBJECT_DATA_PER_FRAME)
        {
            break;
        }
        // The tier's verified bytes are shared, the store's read is the
        // buffer it filled: neither is copied here.
        let data = match tier_read(svc, repo.id(), &store, id)? {
            Some(bytes) => bytes,
            None => bytes::Bytes::from(store.get(id)?),
        };
        if total + data.len() > MAX_OBJECT_DATA_PER_FRAME as usize {
            break;
        }
        total += data.len();
        objects.push((*id, data));
    }
    // A client that asks for manifests reads their chunks next, in the
    // order it asked for the manifests (a fresh workspace writes its
    // files in that order): a tier fetches them meanwhile.
    if let Some(fb) = svc.stores().fallback() {
        let chunks: Vec<ObjectId> = objects
            .iter()
            .filter(|(id, _)| id.kind == scribe_format::ObjectKind::Manifest)
            .filter_map(|(_, data)| scribe_format::manifest::ManifestRef::decode(data).ok())
            .flat_map(|m| {
                m.chunks()
                    .map(|c| ObjectId::chunk(c.id))
                    .collect::<Vec<_>>()
            })
            .collect();
        if !chunks.is_empty() {
            fb.hint(repo.id(), &chunks, &store);
        }
    }
    if session.zero_copy {
        session.outgoing_pieces = objects;
        return Ok(m::ObjectGetManyReply {
            objects: Vec::new(),
        });
    }
    Ok(m::ObjectGetManyReply {
        objects: objects
            .into_iter()
            .map(|(id, data)| m::ObjectPiece {
                id,
                // No copy when the bytes are the store's own read.
                data: Bytes(Vec::from(data)),
            })
            .collect(),
    })
}

/// At least how many payload bytes `id` has, known without reading it:
/// from the local store's locator, else the tier's manifest row; 0 when
/// neither knows (the read that follows finds out).
fn least_len(
    svc: &Service,
    repo: RepositoryId,
    store: &scribe_objects::ObjectStore,
    id: &ObjectId,
) -> DispatchResult<u64> {
    if let Some(n) = store.payload_len_at_least(id)? {
        return Ok(n);
    }
    Ok(svc
        .stores()
        .fallback()
        .and_then(|fb| fb.len(repo, id))
        .unwrap_or(0))
}

pub(super) fn get(
    svc: &Service,
    session: &mut Session,
    r: m::ObjectGet,
) -> DispatchResult<m::ObjectData> {
    let (repo, store) = open(svc, &r.repo)?;
    let max = if r.max_len == 0 {
        MAX_OBJECT_DATA_PER_FRAME
    } else {
        r.max_len.min(MAX_OBJECT_DATA_PER_FRAME)
    };
    // The connection's reader goes on where its last range ended; any
    // other range opens a new one (and reads up to the offset).
    let mut d = match session.download.take() {
        Some(d) if d.repo == repo.id() && d.id == r.id && d.next == r.offset => d,
        _ => {
            // An object the local store lacks is served from the tier's
            // verified bytes; its write-back does not hold the answer.
            let reader = match tier_read(svc, repo.id(), &store, &r.id)? {
                Some(bytes) => DownloadReader::Memory { bytes, pos: 0 },
                None => DownloadReader::Store(Box::new(store.open_reader(&r.id)?)),
            };
            let total = reader.len();
            if r.offset > total {
                return Err(malformed(format!(
                    "offset {} is past the end of {} ({total} bytes)",
                    r.offset, r.id
                )));
            }
            let mut d = Download {
                repo: repo.id(),
                id: r.id,
                total,
                next: 0,
                reader,
                held: Held::new(svc.downloads()),
            };
            let mut scratch = vec![0u8; (r.offset.min(1 << 20)) as usize];
            while d.next < r.offset {
                let n = (r.offset - d.next).min(scratch.len() as u64) as usize;
                d.reader
                    .read_exact(&mut scratch[..n])
                    .map_err(|e| read_failure(&r.id, e))?;
                d.next += n as u64;
            }
            d
        }
    };
    let total = d.total;
    let want = (d.total - d.next).min(u64::from(max)) as usize;
    let mut piece = Vec::new();
    match &mut d.reader {
        // Verified bytes in memory (from the bucket): sent from there by
        // reference when the transport can (`Session::outgoing`), else
        // one copy into the answer, no zeroing first.
        DownloadReader::Memory { bytes, pos } => {
            let part = bytes.slice(*pos..*pos + want);
            *pos += want;
            if session.zero_copy {
                session.outgoing = Some(part);
            } else {
                piece.try_reserve_exact(want).map_err(|_| {
                    Failure::new(ErrorCode::ServerBusy, "cannot buffer the range now")
                })?;
                piece.extend_from_slice(&part);
            }
        }
        DownloadReader::Store(_) => {
            piece
                .try_reserve_exact(want)
                .map_err(|_| Failure::new(ErrorCode::ServerBusy, "cannot buffer the range now"))?;
            piece.resize(want, 0);
            d.reader
                .read_exact(&mut piece)
                .map_err(|e| read_failure(&r.id, e))?;
        }
    }
    d.next += want as u64;
    if d.next == d.total {
        // The end: the reader checks the identity of everything it read.
        let mut probe = [0u8; 1];
        match d.reader.read(&mut probe) {
            Ok(0) => {}
            Ok(_) => {
                return Err(Failure::new(
                    ErrorCode::Corrupt,
                    format!("object {} is longer than it says", r.id),
                ))
            }
            Err(e) => return Err(read_failure(&r.id, e)),
        }
    } else {
        d.held.set(d.reader.buffered_bytes() as u64);
        session.download = Some(d);
    }
    Ok(m::ObjectData {
        total_len: total,
        offset: r.offset,
        data: Bytes(piece),
    })
}

/// A streaming read that failed: the store's error (a corrupt object is
/// `corrupt`, naming it), or an internal one.
fn read_failure(id: &ObjectId, e: std::io::Error) -> Failure {
    match e.downcast::<scribe_objects::StoreError>() {
        Ok(se) => Failure::from(se),
        Err(e) => Failure::new(ErrorCode::Internal, format!("reading {id}: {e}")),
    }
}

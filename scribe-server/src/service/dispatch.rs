//! The one mapping from wire requests to `scribe-metadata` and
//! `scribe-objects`. Keep every call into those crates here so a change of
//! their API is a change of this file.

use std::sync::Arc;

use scribe_format::changeset as cs;
use scribe_format::limits::MAX_MESSAGE_BYTES;
use scribe_format::snapshot::FileRecord;
use scribe_format::wire::message::{
    self as m, MAX_IDS_PER_REQUEST, MAX_OBJECT_DATA_PER_FRAME, MAX_PAGE_ITEMS,
};
use scribe_format::wire::{Bytes, Request, Response, Text};
use scribe_format::{BranchId, ErrorCode, ObjectId, OperationId, RepositoryId, WorkspaceId};
use scribe_metadata::accept::{Outcome, Submission};
use scribe_metadata::read::ListEntry;
use scribe_metadata::records::{CommitRecord, HistoryRecord, LockRecord};
use scribe_metadata::workspaces::{Registration, RetireOutcome};
use scribe_metadata::Repository;
use scribe_objects::ObjectStore;

use super::upload::{
    max_object_bytes, Cached, Partial, Reservation, Session, StagedObject, MAX_REMEMBERED_PINS,
    STAGE_PUBLISH_BYTES, STAGE_PUBLISH_OBJECTS,
};
use super::{pins, Failure, Service};

type R<T> = Result<T, Failure>;

fn malformed(msg: impl Into<String>) -> Failure {
    Failure::new(ErrorCode::Malformed, msg)
}

/// Answer one request.
pub fn dispatch(svc: &Service, session: &mut Session, req: Request) -> R<Response> {
    // Anything but staging publishes what this connection staged first, so
    // every later request of the connection sees its objects.
    if !session.staged.is_empty()
        && !matches!(
            req,
            Request::ObjectPutStaged(_)
                | Request::ObjectsPinMissing(_)
                | Request::ObjectsPublish(_)
        )
    {
        publish_staged(session)?;
    }
    Ok(match req {
        Request::Status(_) => Response::Status(m::StatusReply {
            server_version: env!("CARGO_PKG_VERSION").to_string(),
            schema: scribe_format::wire::handshake::SCHEMA.to_string(),
            uptime_ms: svc.uptime_ms(),
            repositories: svc.root().list_repositories()?.len() as u32,
            connections: svc.connections(),
        }),
        Request::RepoCreate(r) => Response::RepoCreated(repo_create(svc, &r.name)?),
        Request::RepoList(_) => Response::RepoList(m::RepoList {
            repositories: repo_list(svc)?,
        }),
        Request::WorkspaceRegister(r) => Response::WorkspaceRegistered(ws_register(svc, r)?),
        Request::WorkspaceRetire(r) => {
            ws_retire(svc, &r.repo, r.workspace)?;
            Response::WorkspaceRetired(m::Ack {})
        }
        Request::WorkspaceList(r) => Response::WorkspaceList(ws_list(svc, &r.repo)?),
        Request::ObjectsMissing(r) => {
            check_id_count(r.ids.len())?;
            let (_, store) = open(svc, &r.repo)?;
            Response::ObjectsMissing(m::ObjectsMissingReply {
                missing: store.missing(&r.ids)?,
            })
        }
        Request::ObjectPut(r) => Response::ObjectPut(object_put(svc, session, r, false)?),
        Request::ObjectPutStaged(r) => {
            Response::ObjectPutStaged(object_put(svc, session, r, true)?)
        }
        Request::ObjectsPinMissing(r) => {
            Response::ObjectsPinMissing(objects_pin_missing(svc, session, r)?)
        }
        Request::ObjectsPublish(r) => {
            // The repository must exist, even with nothing staged.
            open(svc, &r.repo)?;
            Response::ObjectsPublished(m::ObjectsPublishReply {
                published: publish_staged(session)?,
            })
        }
        Request::ObjectPutMany(r) => Response::ObjectPutMany(object_put_many(svc, r)?),
        Request::ObjectGet(r) => Response::ObjectData(object_get(svc, session, r)?),
        Request::ObjectGetMany(r) => Response::ObjectGetMany(object_get_many(svc, r)?),
        Request::Submit(r) => Response::Submitted(submit(svc, r)?),
        Request::OperationOutcome(r) => {
            let (repo, _) = open(svc, &r.repo)?;
            Response::OperationOutcome(m::OperationOutcomeReply {
                outcome: recorded_outcome(&repo, &r.operation)?,
            })
        }
        Request::Delta(r) => Response::Delta(delta(svc, r)?),
        Request::List(r) => Response::List(list(svc, r)?),
        Request::Stat(r) => {
            let (repo, _) = open(svc, &r.repo)?;
            let branch = branch_of(&repo, r.branch);
            let change = resolve(&repo, branch, r.change)?;
            let st = repo.stat(branch, change, &r.path)?;
            Response::Stat(m::StatReply {
                change,
                entry: st.map(|s| m::TreeEntry {
                    path: s.path,
                    change: s.change,
                    state: Some(file_state(&s.record)),
                }),
            })
        }
        Request::History(r) => Response::History(history(svc, r)?),
        Request::Log(r) => Response::Log(log(svc, r)?),
        Request::Describe(r) => Response::Describe(describe(svc, r)?),
        Request::LockAcquire(r) => {
            let (repo, _) = open(svc, &r.repo)?;
            let branch = branch_of(&repo, r.branch);
            check_paths(&r.paths)?;
            let locks = repo.lock(&r.paths, r.workspace, branch, &r.author)?;
            Response::LocksAcquired(m::LocksReply {
                locks: locks
                    .into_iter()
                    .map(|l| lock_info(l.path, &l.record))
                    .collect(),
            })
        }
        Request::LockRelease(r) => {
            let (repo, _) = open(svc, &r.repo)?;
            check_paths(&r.paths)?;
            let mut held = Vec::new();
            for p in &r.paths {
                if let Some(l) = repo.locks(p)?.into_iter().find(|l| &l.path == p) {
                    if l.record.workspace == r.workspace {
                        held.push(lock_info(l.path, &l.record));
                    }
                }
            }
            repo.unlock(&r.paths, r.workspace)?;
            Response::LocksReleased(m::LocksReply { locks: held })
        }
        Request::LockList(r) => {
            let (repo, _) = open(svc, &r.repo)?;
            let limit = page_limit(r.limit);
            let mut locks: Vec<m::LockInfo> = repo
                .locks(&r.prefix)?
                .into_iter()
                .filter(|l| r.after.is_empty() || l.path > r.after)
                .take(limit + 1)
                .map(|l| lock_info(l.path, &l.record))
                .collect();
            let next = page_next(&mut locks, limit, |l| l.path.clone());
            Response::LockList(m::LockListPage { locks, next })
        }
    })
}

fn check_paths(paths: &[String]) -> R<()> {
    if paths.len() > MAX_PAGE_ITEMS as usize {
        return Err(Failure::new(
            ErrorCode::LimitExceeded,
            format!("{} paths exceed {MAX_PAGE_ITEMS} per request", paths.len()),
        ));
    }
    Ok(())
}

fn page_limit(limit: u32) -> usize {
    if limit == 0 {
        MAX_PAGE_ITEMS as usize
    } else {
        limit.min(MAX_PAGE_ITEMS) as usize
    }
}

/// Trim a `limit + 1` probe to `limit` and name the cursor of the next page.
fn page_next<T, C>(items: &mut Vec<T>, limit: usize, cursor: impl Fn(&T) -> C) -> Option<C> {
    if items.len() > limit {
        items.truncate(limit);
        items.last().map(cursor)
    } else {
        None
    }
}

/// The repository named `name` with its object store.
fn open(svc: &Service, name: &str) -> R<(Arc<Repository>, Arc<ObjectStore>)> {
    let repo = svc.root().open_repository_by_name(name)?;
    let store = svc.stores().get(&repo.id()).ok_or_else(|| {
        Failure::new(
            ErrorCode::Internal,
            format!("repository {name:?} has no open object store"),
        )
    })?;
    Ok((repo, store))
}

fn branch_of(repo: &Repository, b: BranchId) -> BranchId {
    if b.0 == [0; 16] {
        repo.main_branch()
    } else {
        b
    }
}

fn resolve(repo: &Repository, branch: BranchId, change: u64) -> R<u64> {
    if change == 0 {
        Ok(repo.branch_head(branch)?)
    } else {
        Ok(change)
    }
}

fn repo_info(svc: &Service, id: RepositoryId) -> R<m::RepoInfo> {
    let info = svc
        .root()
        .list_repositories()?
        .into_iter()
        .find(|i| i.id == id)
        .ok_or_else(|| Failure::new(ErrorCode::NotFound, format!("no repository {id}")))?;
    let repo = svc.root().open_repository(id)?;
    Ok(m::RepoInfo {
        id,
        name: info.name,
        main_branch: info.main_branch,
        incarnation: repo.incarnation(),
        head: repo.head()?,
        created_ms: info.created_ms,
    })
}

/// Create a repository and its object store.
pub fn repo_create(svc: &Service, name: &str) -> R<m::RepoInfo> {
    let id = svc.root().create_repository(name)?;
    // Opening creates the object store (see `stores`).
    svc.root().open_repository(id)?;
    repo_info(svc, id)
}

fn repo_list(svc: &Service) -> R<Vec<m::RepoInfo>> {
    let mut out = Vec::new();
    for info in svc.root().list_repositories()? {
        let repo = svc.root().open_repository(info.id)?;
        out.push(m::RepoInfo {
            id: info.id,
            name: info.name,
            main_branch: info.main_branch,
            incarnation: repo.incarnation(),
            head: repo.head()?,
            created_ms: info.created_ms,
        });
    }
    Ok(out)
}

fn workspace_info(
    repo: &Repository,
    workspace: WorkspaceId,
    rec: &scribe_metadata::records::WorkspaceRecord,
) -> R<m::WorkspaceInfo> {
    Ok(m::WorkspaceInfo {
        workspace,
        branch: rec.branch,
        branch_name: if rec.branch == repo.main_branch() {
            "main".to_string()
        } else {
            String::new()
        },
        view: rec.view.clone(),
        label: rec.label.clone(),
        tags: rec.tags.clone(),
        created_ms: rec.created_ms,
        retired: false,
        repository: repo.id(),
        incarnation: repo.incarnation(),
        head: repo.branch_head(rec.branch)?,
    })
}

fn ws_register(svc: &Service, r: m::WorkspaceRegister) -> R<m::WorkspaceInfo> {
    let (repo, _) = open(svc, &r.repo)?;
    // INTERIM: scribe-metadata has no branch-by-name lookup yet; only the
    // main branch is addressable by name.
    let branch = match r.branch.as_str() {
        "" | "main" => repo.main_branch(),
        other => {
            return Err(Failure::new(
                ErrorCode::NotFound,
                format!("no branch {other:?} (only the main branch is served)"),
            ))
        }
    };
    let rec = repo.register_workspace(&Registration {
        workspace: r.workspace,
        owner: None,
        branch,
        view: r.view,
        label: r.label,
        tags: r.tags,
    })?;
    workspace_info(&repo, r.workspace, &rec)
}

/// The operation id of a retirement: the wire message carries none, and a
/// retirement's fingerprint is its workspace, so one id per workspace makes
/// a retry return the recorded outcome.
fn retire_operation(workspace: WorkspaceId) -> OperationId {
    let h = blake3::derive_key("scribe-server workspace retirement v1", &workspace.0);
    let mut op = [0u8; 16];
    op.copy_from_slice(&h[..16]);
    OperationId(op)
}

fn ws_retire(svc: &Service, name: &str, workspace: WorkspaceId) -> R<()> {
    let (repo, _) = open(svc, name)?;
    match repo.retire_workspace(workspace, retire_operation(workspace))? {
        RetireOutcome::Retired { .. } => Ok(()),
        RetireOutcome::Refused { code, detail } => Err(Failure::new(code, detail)),
    }
}

fn ws_list(svc: &Service, name: &str) -> R<m::WorkspaceList> {
    let (repo, _) = open(svc, name)?;
    let mut workspaces = Vec::new();
    for (id, rec) in repo.workspaces()? {
        workspaces.push(workspace_info(&repo, id, &rec)?);
    }
    Ok(m::WorkspaceList { workspaces })
}

/// At most [`MAX_IDS_PER_REQUEST`] ids per `ObjectsMissing` /
/// `ObjectsPinMissing`.
fn check_id_count(n: usize) -> R<()> {
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
fn objects_pin_missing(
    svc: &Service,
    session: &mut Session,
    r: m::ObjectsPinMissing,
) -> R<m::ObjectsMissingReply> {
    check_id_count(r.ids.len())?;
    let (repo, store) = open(svc, &r.repo)?;
    repo.pin_uploads(r.workspace, r.operation, &r.ids)?;
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

/// Publish this connection's staged objects: per repository one batch,
/// written in parallel, one durable locator commit. Returns how many were
/// staged. On failure the stage is dropped (the objects are simply not
/// stored; the client's next `ObjectsMissing` names them again).
fn publish_staged(session: &mut Session) -> R<u32> {
    let staged = std::mem::take(&mut session.staged);
    session.staged_bytes = 0;
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
        batch.put_all_with_ids(&objects)?;
        batch.commit()?;
    }
    Ok(count)
}

fn object_put(
    svc: &Service,
    session: &mut Session,
    r: m::ObjectPut,
    staged: bool,
) -> R<m::ObjectPutReply> {
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
            pins::pin(&repo, r.workspace, r.operation, &r.id)?;
        }
        if (staged && session.has_staged(repo.id(), &r.id)) || store.contains(&r.id)? {
            session.upload = None;
            return Ok(m::ObjectPutReply {
                received: r.total_len,
                complete: true,
            });
        }
        session.upload = None;
        let reservation = Reservation::take(svc.upload_budget(), r.total_len).ok_or_else(|| {
            Failure::new(
                ErrorCode::Busy,
                "the server is buffering as many uploads as it may; retry shortly",
            )
        })?;
        // A whole object in one piece is kept as received (no copy).
        let whole = r.data.0.len() as u64 == r.total_len;
        let mut data = Vec::new();
        if !whole {
            data.try_reserve_exact(r.total_len as usize)
                .map_err(|_| Failure::new(ErrorCode::Busy, "cannot buffer the object now"))?;
        }
        session.upload = Some(Partial {
            _reservation: reservation,
            repo: repo.id(),
            operation: r.operation,
            id: r.id,
            total_len: r.total_len,
            data,
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
    if p.data.is_empty() && r.data.0.len() as u64 == p.total_len {
        p.data = r.data.0;
    } else {
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
            _reservation: p._reservation,
            repo: p.repo,
            store,
            id: p.id,
            data: p.data,
        });
        if session.staged_bytes >= STAGE_PUBLISH_BYTES
            || session.staged.len() >= STAGE_PUBLISH_OBJECTS
        {
            publish_staged(session)?;
        }
    } else {
        let batch = store.batch();
        batch.put_with_id(p.id, &p.data)?;
        batch.commit()?;
    }
    Ok(m::ObjectPutReply {
        received,
        complete: true,
    })
}

/// Many whole small objects: every id pinned in one transaction before any
/// byte is accepted, every identity verified, one durable publication.
fn object_put_many(svc: &Service, r: m::ObjectPutMany) -> R<m::ObjectPutManyReply> {
    let (repo, store) = open(svc, &r.repo)?;
    let total: u64 = r.objects.iter().map(|o| o.data.0.len() as u64).sum();
    if total > u64::from(MAX_OBJECT_DATA_PER_FRAME) {
        return Err(Failure::new(
            ErrorCode::LimitExceeded,
            format!("{total} bytes of objects exceed {MAX_OBJECT_DATA_PER_FRAME} in one request"),
        ));
    }
    let ids: Vec<ObjectId> = r.objects.iter().map(|o| o.id).collect();
    for piece in &r.objects {
        let computed = scribe_format::id::object_identity(piece.id.kind, &piece.data.0)?;
        if computed != piece.id {
            return Err(Failure::new(
                ErrorCode::Corrupt,
                format!("uploaded bytes hash to {computed}, not {}", piece.id),
            ));
        }
    }
    repo.pin_uploads(r.workspace, r.operation, &ids)?;
    let batch = store.batch();
    for piece in &r.objects {
        batch.put_with_id(piece.id, &piece.data.0)?;
    }
    batch.commit()?;
    Ok(m::ObjectPutManyReply {
        stored: r.objects.len() as u32,
    })
}

/// Whole objects in request order, as many as fit in one frame's data
/// budget; the first that would not fit ends the reply.
fn object_get_many(svc: &Service, r: m::ObjectGetMany) -> R<m::ObjectGetManyReply> {
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
    let (_, store) = open(svc, &r.repo)?;
    let mut objects = Vec::new();
    let mut total = 0usize;
    for id in &r.ids {
        let data = store.get(id)?;
        if total + data.len() > MAX_OBJECT_DATA_PER_FRAME as usize {
            break;
        }
        total += data.len();
        objects.push(m::ObjectPiece {
            id: *id,
            data: Bytes(data),
        });
    }
    Ok(m::ObjectGetManyReply { objects })
}

fn object_get(svc: &Service, session: &mut Session, r: m::ObjectGet) -> R<m::ObjectData> {
    let (repo, store) = open(svc, &r.repo)?;
    let max = if r.max_len == 0 {
        MAX_OBJECT_DATA_PER_FRAME
    } else {
        r.max_len.min(MAX_OBJECT_DATA_PER_FRAME)
    };
    let data = match &session.download {
        Some(c) if c.repo == repo.id() && c.id == r.id => c.data.clone(),
        _ => {
            session.download = None;
            let bytes = Arc::new(store.get(&r.id)?);
            session.download = Some(Cached {
                repo: repo.id(),
                id: r.id,
                data: bytes.clone(),
            });
            bytes
        }
    };
    let total = data.len() as u64;
    if r.offset > total {
        return Err(malformed(format!(
            "offset {} is past the end of {} ({total} bytes)",
            r.offset, r.id
        )));
    }
    let start = r.offset as usize;
    let end = (start + max as usize).min(data.len());
    if end == data.len() {
        session.download = None;
    }
    // A whole object in one piece leaves as it was read (no copy).
    let piece = match (start, Arc::try_unwrap(data)) {
        (0, Ok(whole)) if end == whole.len() => whole,
        (_, Ok(v)) => v[start..end].to_vec(),
        (_, Err(shared)) => shared[start..end].to_vec(),
    };
    Ok(m::ObjectData {
        total_len: total,
        offset: r.offset,
        data: Bytes(piece),
    })
}

fn wire_outcome(o: &Outcome) -> m::Outcome {
    match o {
        Outcome::Accepted { change, commit_id } => m::Outcome {
            change: *change,
            commit: Some(*commit_id),
            code: 0,
            detail: String::new(),
            paths: Vec::new(),
        },
        Outcome::Rejected {
            code,
            detail,
            paths,
        } => m::Outcome {
            change: 0,
            commit: None,
            code: code.number(),
            detail: detail.clone(),
            paths: paths.clone(),
        },
    }
}

fn submit(svc: &Service, r: m::Submit) -> R<m::Outcome> {
    let (repo, store) = open(svc, &r.repo)?;
    let branch = branch_of(&repo, r.branch);
    if r.message.0.len() > MAX_MESSAGE_BYTES {
        return Err(Failure::new(
            ErrorCode::LimitExceeded,
            "message is longer than 65,536 bytes",
        ));
    }
    let cs_object = ObjectId::change_set(r.change_set);
    let change_set = match store.get(&cs_object) {
        Ok(bytes) => cs::ChangeSet::decode(&bytes)
            .map_err(|e| malformed(format!("change set {cs_object} does not decode: {e}")))?,
        Err(scribe_objects::StoreError::NotFound { .. }) => {
            // A retry of a recorded operation does not need the object:
            // metadata replays it (checking the intent) before reading any
            // entry, and records nothing new.
            if repo.recorded_outcome(&r.operation)?.is_some() {
                cs::ChangeSet::new(Vec::new())
            } else {
                // Not recorded: the client may upload it and resend.
                return Ok(m::Outcome {
                    change: 0,
                    commit: None,
                    code: ErrorCode::MissingObjects.number(),
                    detail: format!("change set {cs_object} has not been uploaded"),
                    paths: Vec::new(),
                });
            }
        }
        Err(e) => return Err(e.into()),
    };
    let submission = Submission {
        operation: r.operation,
        branch,
        workspace: r.workspace,
        change_set,
        change_set_id: r.change_set,
        author: r.author,
        message: r.message.0,
        timestamp_ms: r.timestamp_ms,
        keep_locks: r.keep_locks,
        required_locks: Vec::new(),
        actor: None,
    };
    let outcome = if svc.group_acceptance() {
        svc.groups().submit(&repo, submission)?
    } else {
        repo.submit(submission)?
    };
    Ok(wire_outcome(&outcome))
}

/// The recorded outcome of a submission's operation id.
pub fn recorded_outcome(repo: &Repository, op: &OperationId) -> R<Option<m::Outcome>> {
    Ok(repo.recorded_outcome(op)?.as_ref().map(wire_outcome))
}

fn file_state(r: &FileRecord) -> m::FileState {
    m::FileState {
        manifest: r.manifest,
        content: r.content,
        size: r.size,
        mode: r.mode,
    }
}

/// Paging cursors are the metadata layer's continuation tokens, which are
/// path bytes (plus a separator byte) and so valid UTF-8.
fn token_string(t: Vec<u8>) -> R<String> {
    String::from_utf8(t).map_err(|_| Failure::new(ErrorCode::Internal, "cursor is not UTF-8"))
}

fn token(after: &str) -> Option<&[u8]> {
    if after.is_empty() {
        None
    } else {
        Some(after.as_bytes())
    }
}

fn delta(svc: &Service, r: m::Delta) -> R<m::DeltaPage> {
    let (repo, _) = open(svc, &r.repo)?;
    let branch = branch_of(&repo, r.branch);
    let to = resolve(&repo, branch, r.to)?;
    let page = repo.delta(branch, r.from, to, token(&r.after), page_limit(r.limit))?;
    Ok(m::DeltaPage {
        to,
        entries: page
            .entries
            .into_iter()
            .map(|e| m::TreeEntry {
                path: e.path,
                change: e.change,
                state: e.state.as_ref().map(file_state),
            })
            .collect(),
        next: page.next.map(token_string).transpose()?,
    })
}

fn list(svc: &Service, r: m::List) -> R<m::ListPage> {
    let (repo, _) = open(svc, &r.repo)?;
    let branch = branch_of(&repo, r.branch);
    let change = resolve(&repo, branch, r.change)?;
    let page = repo.list(
        branch,
        change,
        &r.prefix,
        r.recursive,
        token(&r.after),
        page_limit(r.limit),
    )?;
    let mut entries = Vec::new();
    let mut directories = Vec::new();
    for e in page.entries {
        match e {
            ListEntry::File(s) => entries.push(m::TreeEntry {
                path: s.path,
                change: s.change,
                state: Some(file_state(&s.record)),
            }),
            ListEntry::Dir(d) => directories.push(d),
        }
    }
    Ok(m::ListPage {
        change,
        entries,
        directories,
        next: page.next.map(token_string).transpose()?,
    })
}

fn history_entry(change: u64, h: &HistoryRecord) -> m::HistoryEntry {
    m::HistoryEntry {
        change,
        action: h.action,
        state: h.state.as_ref().map(file_state),
        moved_from: h.moved_from.as_ref().map(|(p, c)| m::MoveFrom {
            path: p.clone(),
            change: *c,
        }),
    }
}

fn history(svc: &Service, r: m::History) -> R<m::HistoryPage> {
    let (repo, _) = open(svc, &r.repo)?;
    let branch = branch_of(&repo, r.branch);
    let limit = page_limit(r.limit);
    // Newest first, below `before`.
    let mut entries: Vec<m::HistoryEntry> = repo
        .history(branch, &r.path)?
        .iter()
        .rev()
        .filter(|v| r.before == 0 || v.change < r.before)
        .take(limit + 1)
        .map(|v| history_entry(v.change, &v.record))
        .collect();
    let next = page_next(&mut entries, limit, |e| e.change).unwrap_or(0);
    Ok(m::HistoryPage { entries, next })
}

fn summary(change: u64, c: &CommitRecord) -> m::CommitSummary {
    m::CommitSummary {
        change,
        commit: c.commit_id,
        branch: c.branch,
        parent: c.parent,
        workspace: c.workspace,
        operation: c.operation,
        author: c.author.clone(),
        message: Text(c.message.clone()),
        timestamp_ms: c.timestamp_ms,
        entry_count: c.entry_count,
    }
}

fn log(svc: &Service, r: m::Log) -> R<m::LogPage> {
    let (repo, _) = open(svc, &r.repo)?;
    let branch = branch_of(&repo, r.branch);
    let limit = page_limit(r.limit);
    let before = if r.before == 0 { None } else { Some(r.before) };
    let mut commits: Vec<m::CommitSummary> = repo
        .log(branch, before, limit + 1)?
        .iter()
        .map(|e| summary(e.change, &e.record))
        .collect();
    let next = page_next(&mut commits, limit, |c| c.change).unwrap_or(0);
    Ok(m::LogPage { commits, next })
}

fn describe(svc: &Service, r: m::Describe) -> R<m::DescribeReply> {
    let (repo, _) = open(svc, &r.repo)?;
    let change = if r.change == 0 {
        repo.head()?
    } else {
        r.change
    };
    let d = repo.describe(change)?;
    let limit = page_limit(r.limit);
    let mut entries: Vec<m::DescribedEntry> = d
        .paths
        .iter()
        .filter(|(p, _)| r.after.is_empty() || p.as_str() > r.after.as_str())
        .take(limit + 1)
        .map(|(p, h)| {
            let e = history_entry(change, h);
            m::DescribedEntry {
                path: p.clone(),
                action: e.action,
                state: e.state,
                moved_from: e.moved_from,
            }
        })
        .collect();
    let next = page_next(&mut entries, limit, |e| e.path.clone());
    Ok(m::DescribeReply {
        commit: summary(change, &d.record),
        entries,
        next,
    })
}

fn lock_info(path: String, r: &LockRecord) -> m::LockInfo {
    m::LockInfo {
        path,
        generation: r.generation,
        workspace: r.workspace,
        branch: r.branch,
        author: r.author.clone(),
        acquired_ms: r.acquired_ms,
    }
}

//! Submit, SubmitInline, OperationOutcome.

use scribe_format::changeset as cs;
use scribe_format::echo::echo;
use scribe_format::limits::MAX_MESSAGE_BYTES;
use scribe_format::wire::message as m;
use scribe_format::{ErrorCode, ObjectId, OperationId};
use std::collections::BTreeMap;

use scribe_format::wire::message::MAX_OBJECT_DATA_PER_FRAME;
use scribe_metadata::accept::{Inline, Outcome, Submission};
use scribe_metadata::Repository;

use super::{branch_of, malformed, open, DispatchResult, Failure, Service};

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

/// Submit as `actor` (the session principal's id).
pub(super) fn submit(
    svc: &Service,
    r: m::Submit,
    actor: Option<[u8; 16]>,
) -> DispatchResult<m::Outcome> {
    accept(svc, r, Inline::default(), actor)
}

/// Submit with the objects the server lacks carried in the request: each
/// identity is verified here; acceptance sees them as present and an
/// accepted change publishes them with its envelope (one store batch, no
/// upload pin). A refused or replayed submission stores none of them.
pub(super) fn submit_inline(
    svc: &Service,
    r: m::SubmitInline,
    actor: Option<[u8; 16]>,
) -> DispatchResult<m::Outcome> {
    let total: u64 = r.objects.iter().map(|o| o.data.0.len() as u64).sum();
    if total > u64::from(MAX_OBJECT_DATA_PER_FRAME) {
        return Err(Failure::new(
            ErrorCode::LimitExceeded,
            format!(
                "{total} bytes of objects exceed {MAX_OBJECT_DATA_PER_FRAME} in one submission"
            ),
        ));
    }
    let mut objects = BTreeMap::new();
    for piece in r.objects {
        let computed = scribe_format::id::object_identity(piece.id.kind, &piece.data.0)?;
        if computed != piece.id {
            return Err(Failure::new(
                ErrorCode::Corrupt,
                format!("carried bytes hash to {computed}, not {}", piece.id),
            ));
        }
        objects.insert(piece.id, piece.data.0);
    }
    let submit = m::Submit {
        repo: r.repo,
        operation: r.operation,
        workspace: r.workspace,
        branch: r.branch,
        change_set: r.change_set,
        author: r.author,
        message: r.message,
        keep_locks: r.keep_locks,
        timestamp_ms: r.timestamp_ms,
    };
    accept(svc, submit, Inline::new(objects), actor)
}

fn accept(
    svc: &Service,
    r: m::Submit,
    inline: Inline,
    actor: Option<[u8; 16]>,
) -> DispatchResult<m::Outcome> {
    let (repo, store) = open(svc, &r.repo)?;
    let branch = branch_of(&repo, r.branch);
    if r.message.0.len() > MAX_MESSAGE_BYTES {
        return Err(Failure::new(
            ErrorCode::LimitExceeded,
            "message is longer than 65,536 bytes",
        ));
    }
    // Only a registered workspace submits (a retired one is refused by
    // acceptance, which also replays a recorded outcome first).
    if repo.workspace(r.workspace)?.is_none()
        && !repo.is_retired(r.workspace)?
        && repo.recorded_outcome(&r.operation)?.is_none()
    {
        return Err(Failure::new(
            ErrorCode::WorkspaceUnregistered,
            format!(
                "workspace {} is not registered in {}; register it before submitting",
                r.workspace,
                echo(&r.repo)
            ),
        ));
    }
    let cs_object = ObjectId::change_set(r.change_set);
    let carried = inline.0.get(&cs_object).map(|b| Ok(b.clone()));
    let change_set = match carried.unwrap_or_else(|| store.get(&cs_object)) {
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
        actor,
        inline,
    };
    let outcome = if svc.group_acceptance() {
        svc.groups().submit(&repo, svc.cleaner(), submission)?
    } else {
        repo.submit(submission)?
    };
    if let Outcome::Accepted { change, .. } = &outcome {
        svc.accepted(repo.id(), *change)?;
    }
    Ok(wire_outcome(&outcome))
}

/// The recorded outcome of a submission's operation id.
pub fn recorded_outcome(repo: &Repository, op: &OperationId) -> DispatchResult<Option<m::Outcome>> {
    Ok(repo.recorded_outcome(op)?.as_ref().map(wire_outcome))
}

pub(super) fn operation_outcome(
    svc: &Service,
    r: m::OperationOutcome,
) -> DispatchResult<m::OperationOutcomeReply> {
    let (repo, _) = open(svc, &r.repo)?;
    let recorded = repo.recorded_outcome(&r.operation)?;
    if let Some(Outcome::Accepted { change, .. }) = &recorded {
        svc.accepted(repo.id(), *change)?;
    }
    Ok(m::OperationOutcomeReply {
        outcome: recorded.as_ref().map(wire_outcome),
    })
}

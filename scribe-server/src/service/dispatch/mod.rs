//! The one mapping from wire requests to `scribe-metadata` and
//! `scribe-objects`, one module per request family. Keep every call into
//! those crates under this directory so a change of their API is a change
//! here.
//!
//! | module | requests |
//! |---|---|
//! | `repos` | Status, RepoCreate, RepoList |
//! | `workspaces` | WorkspaceRegister, WorkspaceRetire, WorkspaceList |
//! | `objects` | ObjectsMissing, ObjectPut, ObjectPutStaged, ObjectPutMany, ObjectsPinMissing, ObjectsPublish, ObjectGet, ObjectGetMany |
//! | `submit` | Submit, SubmitInline, OperationOutcome |
//! | `tree` | Delta, List, Stat, History, Log, Describe |
//! | `locks` | LockAcquire, LockRelease, LockList |
//!
//! [`dispatch`] is the entry point; the request it gets has already been
//! authorized ([`Service::handle`]).

mod locks;
mod objects;
mod repos;
mod submit;
mod tree;
mod workspaces;

use scribe_format::echo::echo;
use std::sync::Arc;

use scribe_format::snapshot::FileRecord;
use scribe_format::wire::message::MAX_PAGE_ITEMS;
use scribe_format::wire::{Request, Response};
use scribe_format::{BranchId, ErrorCode, ObjectId};
use scribe_metadata::Repository;
use scribe_objects::ObjectStore;

use super::{Failure, PrincipalKind, Service, Session};

pub use repos::{repo_create, repo_create_with};
pub use submit::recorded_outcome;

/// The result of serving one request (or a step of it): a refusal or
/// failure is the [`Failure`] the client gets as its error reply.
pub type DispatchResult<T> = Result<T, Failure>;

/// Answer one authorized request.
pub fn dispatch(svc: &Service, session: &mut Session, req: Request) -> DispatchResult<Response> {
    dispatch_with(svc, session, req, None)
}

/// Answer one authorized request; for an `ObjectPutMany` decoded in place
/// (`scribe_format::wire::object_put_many_view`), `pieces` are its objects
/// (the request's own list is then empty).
pub fn dispatch_with(
    svc: &Service,
    session: &mut Session,
    req: Request,
    pieces: Option<&[(ObjectId, &[u8])]>,
) -> DispatchResult<Response> {
    // Anything but staging publishes what this connection staged first, so
    // every later request of the connection sees its objects.
    if (!session.staged.is_empty() || session.publishing.is_some())
        && !matches!(
            req,
            Request::ObjectPutStaged(_)
                | Request::ObjectsPinMissing(_)
                | Request::ObjectsPublish(_)
        )
    {
        objects::publish_staged(svc, session)?;
    }
    // The principal's id (None for anonymous and local principals) owns
    // the workspaces it registers and acts in the submissions it makes.
    let principal = session.principal().id;
    // A signed-in principal is the author of what it submits and locks
    // (specification 4.3: the server replaces the submitted author).
    let signed_in = matches!(
        session.principal().kind,
        PrincipalKind::User | PrincipalKind::Automation
    )
    .then(|| session.principal().name.clone());
    Ok(match req {
        Request::Status(_) => Response::Status(repos::status(svc)?),
        Request::RepoCreate(r) => Response::RepoCreated(repo_create(svc, &r.name)?),
        Request::RepoList(_) => Response::RepoList(repos::repo_list(svc)?),
        Request::WorkspaceRegister(r) => {
            Response::WorkspaceRegistered(workspaces::register(svc, r, principal)?)
        }
        Request::WorkspaceRetire(r) => Response::WorkspaceRetired(workspaces::retire(svc, r)?),
        Request::WorkspaceList(r) => Response::WorkspaceList(workspaces::list(svc, &r.repo)?),
        Request::ObjectsMissing(r) => Response::ObjectsMissing(objects::missing(svc, r)?),
        Request::ObjectPut(r) => Response::ObjectPut(objects::put(svc, session, r, false)?),
        Request::ObjectPutStaged(r) => {
            Response::ObjectPutStaged(objects::put(svc, session, r, true)?)
        }
        Request::ObjectsPinMissing(r) => {
            Response::ObjectsPinMissing(objects::pin_missing(svc, session, r)?)
        }
        Request::ObjectsPublish(r) => {
            Response::ObjectsPublished(objects::publish(svc, session, &r.repo)?)
        }
        Request::ObjectPutMany(r) => {
            let owned: Vec<(ObjectId, &[u8])>;
            let pieces = match pieces {
                Some(p) => p,
                None => {
                    owned = r
                        .objects
                        .iter()
                        .map(|o| (o.id, o.data.0.as_slice()))
                        .collect();
                    &owned
                }
            };
            Response::ObjectPutMany(objects::put_many(svc, session, &r, pieces)?)
        }
        Request::ObjectGet(r) => Response::ObjectData(objects::get(svc, session, r)?),
        Request::ObjectGetMany(r) => Response::ObjectGetMany(objects::get_many(svc, session, r)?),
        Request::Submit(mut r) => {
            if let Some(name) = &signed_in {
                r.author = name.clone();
            }
            Response::Submitted(submit::submit(svc, r, principal)?)
        }
        Request::SubmitInline(mut r) => {
            if let Some(name) = &signed_in {
                r.author = name.clone();
            }
            Response::SubmittedInline(submit::submit_inline(svc, r, principal)?)
        }
        Request::OperationOutcome(r) => {
            Response::OperationOutcome(submit::operation_outcome(svc, r)?)
        }
        Request::Delta(r) => Response::Delta(tree::delta(svc, r)?),
        Request::List(r) => Response::List(tree::list(svc, r)?),
        Request::Stat(r) => Response::Stat(tree::stat(svc, r)?),
        Request::History(r) => Response::History(tree::history(svc, r)?),
        Request::Log(r) => Response::Log(tree::log(svc, r)?),
        Request::Describe(r) => Response::Describe(tree::describe(svc, r)?),
        Request::LockAcquire(mut r) => {
            if let Some(name) = &signed_in {
                r.author = name.clone();
            }
            Response::LocksAcquired(locks::acquire(svc, r)?)
        }
        Request::LockRelease(r) => Response::LocksReleased(locks::release(svc, r)?),
        Request::LockList(r) => Response::LockList(locks::list(svc, r)?),
    })
}

fn malformed(msg: impl Into<String>) -> Failure {
    Failure::new(ErrorCode::Malformed, msg)
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
fn open(svc: &Service, name: &str) -> DispatchResult<(Arc<Repository>, Arc<ObjectStore>)> {
    let repo = svc.root().open_repository_by_name(name)?;
    let store = svc.stores().get(&repo.id()).ok_or_else(|| {
        Failure::new(
            ErrorCode::Internal,
            format!("repository {} has no open object store", echo(name)),
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

fn file_state(r: &FileRecord) -> scribe_format::wire::message::FileState {
    scribe_format::wire::message::FileState {
        manifest: r.manifest,
        content: r.content,
        size: r.size,
        mode: r.mode,
    }
}

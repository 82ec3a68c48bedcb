//! Group acceptance: concurrent submissions to one repository share
//! acceptance transactions.
//!
//! Each submission takes a ticket and joins the repository's queue. One
//! waiting thread at a time leads: it takes the oldest (at most
//! [`GROUP_MAX`]) queued submissions, each prepared by its own thread
//! before it queued (`Repository::prepare`), hands them to
//! `Repository::submit_prepared` (one Immediate transaction for up to 32
//! buffered members; large ones are streamed individually), hands the lead
//! over once the transaction is committed (the next group commits while
//! this one's archive flush runs), publishes the archive, hands the
//! finished intents' pin cleanup to the service's cleanup thread
//! (`cleanup.rs`), then posts each outcome under its ticket and wakes the
//! others. Every member keeps its own change number, envelope and recorded
//! outcome. A lone submission with nobody queued behind it is accepted at
//! once, exactly as `Repository::submit` would: it cleans up its own pins
//! before the publication it shares with the acceptance.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex};

use scribe_format::{ErrorCode, RepositoryId};
use scribe_metadata::accept::{Outcome, Prepared, Submission};
use scribe_metadata::Repository;

use super::cleanup::Cleaner;
use super::Failure;

/// Most submissions handed to one `submit_group` call (as many as one
/// acceptance transaction takes).
pub const GROUP_MAX: usize = scribe_metadata::accept::GROUP_MEMBERS;

#[derive(Default)]
struct State {
    next_ticket: u64,
    pending: VecDeque<(u64, (Submission, Prepared))>,
    results: HashMap<u64, Result<Outcome, Failure>>,
    leading: bool,
}

/// One repository's queue.
#[derive(Default)]
struct Queue {
    state: Mutex<State>,
    wake: Condvar,
}

/// The queues of every repository.
#[derive(Default)]
pub struct Groups {
    queues: Mutex<HashMap<RepositoryId, Arc<Queue>>>,
}

fn poisoned() -> Failure {
    Failure::new(ErrorCode::Internal, "submission queue poisoned")
}

impl Groups {
    /// Accept or refuse `s`, possibly together with concurrent submissions.
    /// `s` is prepared (`Repository::prepare`) by this thread before it
    /// queues, so concurrent submissions check in parallel and a lead only
    /// accepts.
    pub fn submit(
        &self,
        repo: &Arc<Repository>,
        cleaner: &Cleaner,
        s: Submission,
    ) -> Result<Outcome, Failure> {
        let prepared = repo.prepare(&s)?;
        let s = (s, prepared);
        let queue = {
            let mut q = self.queues.lock().map_err(|_| poisoned())?;
            q.entry(repo.id()).or_default().clone()
        };
        let mut st = queue.state.lock().map_err(|_| poisoned())?;
        let ticket = st.next_ticket;
        st.next_ticket += 1;
        st.pending.push_back((ticket, s));
        loop {
            if let Some(r) = st.results.remove(&ticket) {
                return r;
            }
            // Nothing queued: this member's group is being published by its
            // leader; wait for the outcome.
            if !st.leading && !st.pending.is_empty() {
                st.leading = true;
                // The oldest submissions, at most one per operation id (a
                // retry racing its original waits for the next group and
                // then gets the recorded outcome).
                let mut batch: Vec<(u64, (Submission, Prepared))> = Vec::new();
                let mut rest = VecDeque::new();
                while let Some((t, s)) = st.pending.pop_front() {
                    if batch.len() < GROUP_MAX
                        && !batch.iter().any(|(_, b)| b.0.operation == s.0.operation)
                    {
                        batch.push((t, s));
                    } else {
                        rest.push_back((t, s));
                    }
                }
                st.pending = rest;
                // A lone submission on an idle queue cleans up its pins
                // before it is answered, sharing the acceptance's archive
                // publication (an embedded client's submit pays one
                // publication, not two). Under load the cleanup follows
                // the answers (`cleanup.rs`).
                // A streamed submission finishes a pin per uploaded object
                // (100,000 pins took 0.4 s): its answer does not wait for
                // them either.
                let cleanup_now = batch.len() == 1
                    && st.pending.is_empty()
                    && !cleaner.always()
                    && !batch[0].1 .1.streams(&batch[0].1 .0);
                drop(st);
                let (tickets, subs): (Vec<u64>, Vec<(Submission, Prepared)>) =
                    batch.into_iter().unzip();
                let mut handed = false;

                // The group's archive publication runs after the lead is
                // handed over (the next group commits meanwhile) and before
                // any outcome is posted.
                let outcome =
                    scribe_metadata::journal::coalesce_publication(repo.archive(), || {
                        // A panic must not leave the queue without a leader.
                        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            repo.submit_prepared(&subs)
                        }))
                        .unwrap_or_else(|_| {
                            Err(scribe_metadata::MetadataError::Gate(
                                "acceptance panicked".into(),
                            ))
                        });
                        if let Ok(mut st) = queue.state.lock() {
                            st.leading = false;
                            handed = true;
                        }
                        queue.wake.notify_all();
                        let outcomes = r?;
                        if cleanup_now {
                            repo.cleanup_finished_pins()?;
                        }
                        Ok(outcomes)
                    });
                if !cleanup_now {
                    // The finished intents' pins are cleaned up after the
                    // answers (`cleanup.rs`), not in every member's wait.
                    cleaner.offer(repo);
                }
                st = queue.state.lock().map_err(|_| poisoned())?;
                match outcome {
                    Ok(outcomes) if outcomes.len() == tickets.len() => {
                        for (t, o) in tickets.into_iter().zip(outcomes) {
                            st.results.insert(t, Ok(o));
                        }
                    }
                    Ok(outcomes) => {
                        let f = Failure::new(
                            ErrorCode::Internal,
                            format!(
                                "a group of {} submissions returned {} outcomes",
                                tickets.len(),
                                outcomes.len()
                            ),
                        );
                        for t in tickets {
                            st.results.insert(t, Err(f.clone()));
                        }
                    }
                    Err(e) => {
                        let f = Failure::from(e);
                        for t in tickets {
                            st.results.insert(t, Err(f.clone()));
                        }
                    }
                }
                if !handed {
                    st.leading = false;
                }
                queue.wake.notify_all();
                continue;
            }
            st = queue.wake.wait(st).map_err(|_| poisoned())?;
        }
    }
}

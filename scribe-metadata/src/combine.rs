//! Write combining: concurrent small mutations of one repository (upload
//! pins, lock acquisition and release) share one Immediate transaction
//! and one archive publication.
//!
//! Each caller hands its mutation to the repository's [`Combiner`] and
//! waits. One waiting thread at a time leads: it takes every queued
//! mutation (at most [`COMBINE_MAX`]), runs them one after the other in one
//! journaled write transaction under the locks the combiner guards with,
//! commits, lets the next leader start, publishes the archive through the
//! commit's last record and only then hands each member its own result. A
//! member sees the writes of the members before it in the same group, so
//! the group is equivalent to running them one by one in that order.
//!
//! A member refused before it wrote anything (the common refusal: a path
//! locked by another workspace, a retired workspace) simply leaves no trace
//! in the transaction. A member that failed after writing would leave a
//! partial mutation behind, so the whole transaction is dropped and every
//! member is run again alone, in its own transaction. A failed commit or
//! publication is every member's failure: nothing is acknowledged that is
//! not archived.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use scribe_format::ErrorCode;

use crate::error::{MetadataError, Result};
use crate::journal::WriteTx;
use crate::repo::Repository;

/// Most mutations run in one combined transaction.
pub const COMBINE_MAX: usize = 64;

/// How a member's run went.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ran {
    /// Succeeded (its writes are part of the transaction).
    Ok,
    /// Refused without writing anything.
    Clean,
    /// Failed after writing: the transaction cannot be committed.
    Dirty,
}

/// A queued mutation: runs against a transaction, keeps its own result,
/// may run again (alone) after its group was dropped.
type Job = Box<dyn FnMut(&mut PinCounts, &WriteTx) -> Ran + Send>;

/// The repository's cached pin counts (see `pins.rs`), held by a pin
/// group's leader across its transaction; lock groups get an empty scratch.
pub(crate) type PinCounts = HashMap<[u8; 16], u64>;

/// Which repository locks a group holds while it runs.
#[derive(Clone, Copy)]
pub(crate) enum Guard {
    /// The publication gate, then the pin counts (upload pins).
    GateAndPinCounts,
    /// The submit turn, then the gate (lock mutations, which never
    /// interleave with a streamed preparation).
    TurnAndGate,
}

#[derive(Default)]
struct State {
    next_ticket: u64,
    pending: VecDeque<(u64, Job)>,
    /// Finished tickets: `None` when the member's own result stands, or the
    /// group's failure.
    done: HashMap<u64, Option<MetadataError>>,
    leading: bool,
}

/// One repository's queue for one kind of mutation.
pub(crate) struct Combiner {
    guard: Guard,
    state: Mutex<State>,
    wake: Condvar,
    /// Mutations run and transactions committed (observability).
    members: AtomicU64,
    transactions: AtomicU64,
    /// Patience is over for every patient member (shutdown).
    hurried: AtomicBool,
}

/// What a repository's write combining did since it was opened (see
/// [`Repository::write_combining`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Combined {
    /// Mutations handed to the combiner.
    pub members: u64,
    /// Transactions committed for them (fewer than `members` when
    /// concurrent mutations shared transactions).
    pub transactions: u64,
}

fn poisoned() -> MetadataError {
    MetadataError::Gate("write combiner poisoned".into())
}

/// The group's failure as each member reports it: the same code and text.
fn shared(e: &MetadataError) -> MetadataError {
    match e.code() {
        ErrorCode::Internal => MetadataError::Gate(format!("combined write: {e}")),
        code => MetadataError::Refused {
            code,
            detail: e.to_string(),
        },
    }
}

impl Combiner {
    pub(crate) fn new(guard: Guard) -> Self {
        Combiner {
            guard,
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            members: AtomicU64::new(0),
            transactions: AtomicU64::new(0),
            hurried: AtomicBool::new(false),
        }
    }

    /// End the patience of every patient member, now and from now on: each
    /// leads (or joins a group) at once. For a shutdown that must not wait
    /// out a cleanup's patience.
    pub(crate) fn hurry(&self) {
        self.hurried.store(true, Ordering::SeqCst);
        // Taken so a member between its check and its wait sees the flag.
        let _st = self.state.lock();
        self.wake.notify_all();
    }

    pub(crate) fn stats(&self) -> Combined {
        Combined {
            members: self.members.load(Ordering::Relaxed),
            transactions: self.transactions.load(Ordering::Relaxed),
        }
    }

    /// Run `f` in a transaction, possibly together with concurrent
    /// mutations; return once its writes are committed and archived (or it
    /// failed). `f` may run more than once (always in a fresh transaction
    /// the previous run's writes are not part of) and must not have effects
    /// outside the transaction beyond the pin counts, which are cleared
    /// when a transaction is dropped.
    pub(crate) fn run<T: Send + 'static>(
        &self,
        repo: &Repository,
        f: impl FnMut(&mut PinCounts, &WriteTx) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        self.run_within(repo, None, f)
    }

    /// Like [`Combiner::run`], but `f` only leads a transaction of its own
    /// once it waited `patience` without another member's leader taking
    /// it: work nobody waits for (pin cleanup after the answers) rides
    /// along in the next group when there is traffic, instead of adding a
    /// commit and an archive flush.
    pub(crate) fn run_patiently<T: Send + 'static>(
        &self,
        repo: &Repository,
        patience: Duration,
        f: impl FnMut(&mut PinCounts, &WriteTx) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        self.run_within(repo, Some(Instant::now() + patience), f)
    }

    fn run_within<T: Send + 'static>(
        &self,
        repo: &Repository,
        lead_after: Option<Instant>,
        mut f: impl FnMut(&mut PinCounts, &WriteTx) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let slot: Arc<Mutex<Option<Result<T>>>> = Arc::new(Mutex::new(None));
        let mine = slot.clone();
        let job: Job = Box::new(move |counts: &mut PinCounts, tx: &WriteTx| {
            let before = tx.recorded();
            let r = f(counts, tx);
            let ran = match &r {
                Ok(_) => Ran::Ok,
                Err(_) if tx.recorded() == before => Ran::Clean,
                Err(_) => Ran::Dirty,
            };
            if let Ok(mut s) = mine.lock() {
                *s = Some(r);
            }
            ran
        });
        self.members.fetch_add(1, Ordering::Relaxed);
        let mut st = self.state.lock().map_err(|_| poisoned())?;
        let ticket = st.next_ticket;
        st.next_ticket += 1;
        st.pending.push_back((ticket, job));
        loop {
            if let Some(done) = st.done.remove(&ticket) {
                drop(st);
                if let Some(e) = done {
                    return Err(e);
                }
                return slot
                    .lock()
                    .map_err(|_| poisoned())?
                    .take()
                    .unwrap_or_else(|| {
                        Err(MetadataError::Gate(
                            "a combined write left no result".into(),
                        ))
                    });
            }
            // Nothing queued: this member's group is being published by
            // its leader; wait for the result.
            let patient =
                lead_after.filter(|t| Instant::now() < *t && !self.hurried.load(Ordering::SeqCst));
            if let Some(until) = patient {
                // Someone else's leader may take it meanwhile.
                let wait = until.saturating_duration_since(Instant::now());
                st = self.wake.wait_timeout(st, wait).map_err(|_| poisoned())?.0;
                continue;
            }
            if !st.leading && !st.pending.is_empty() {
                st.leading = true;
                let n = st.pending.len().min(COMBINE_MAX);
                let mut batch: Vec<(u64, Job)> = st.pending.drain(..n).collect();
                drop(st);
                let mut handed = false;
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    self.lead(repo, &mut batch, &mut handed)
                }))
                .unwrap_or_else(|_| Err(MetadataError::Gate("a combined write panicked".into())));
                st = self.state.lock().map_err(|_| poisoned())?;
                if !handed {
                    // Failed before handing the lead over.
                    st.leading = false;
                }
                for (t, _) in &batch {
                    st.done.insert(*t, outcome.as_ref().err().map(shared));
                }
                self.wake.notify_all();
                continue;
            }
            st = self.wake.wait(st).map_err(|_| poisoned())?;
        }
    }

    /// Commit `batch` (one transaction, or each alone after a dirty
    /// failure), hand the lead over, then publish the archive.
    fn lead(&self, repo: &Repository, batch: &mut [(u64, Job)], handed: &mut bool) -> Result<()> {
        let end = {
            let _turn = match self.guard {
                Guard::TurnAndGate => Some(
                    repo.turn
                        .lock()
                        .map_err(|_| MetadataError::Gate("submit turn poisoned".into()))?,
                ),
                Guard::GateAndPinCounts => None,
            };
            let _gate = repo
                .gate
                .lock()
                .map_err(|_| MetadataError::Gate("publication gate poisoned".into()))?;
            let mut held = match self.guard {
                Guard::GateAndPinCounts => Some(
                    repo.pin_counts
                        .lock()
                        .map_err(|_| MetadataError::Gate("pin counts poisoned".into()))?,
                ),
                Guard::TurnAndGate => None,
            };
            let mut scratch = PinCounts::new();
            let counts = held.as_deref_mut().unwrap_or(&mut scratch);
            let committed = commit_together(repo, counts, batch, &self.transactions);
            if committed.is_err() {
                counts.clear();
            }
            committed?
        };
        // The next group may commit while this one's archive flush runs.
        if let Ok(mut st) = self.state.lock() {
            st.leading = false;
            *handed = true;
        }
        self.wake.notify_all();
        if let Some(end) = end {
            repo.archive.publish_through(end)?;
        }
        Ok(())
    }
}

/// Run every job in one transaction and commit it; after a dirty failure,
/// drop it and run each job alone. Returns the last sequence committed.
fn commit_together(
    repo: &Repository,
    counts: &mut PinCounts,
    batch: &mut [(u64, Job)],
    transactions: &AtomicU64,
) -> Result<Option<u64>> {
    let tx = repo.write()?;
    let mut dirty = false;
    for (_, job) in batch.iter_mut() {
        if job(counts, &tx) == Ran::Dirty {
            dirty = true;
            break;
        }
    }
    if !dirty {
        let end = tx.commit_unpublished()?;
        transactions.fetch_add(1, Ordering::Relaxed);
        return Ok(end);
    }
    drop(tx);
    counts.clear();
    let mut end = None;
    for (_, job) in batch.iter_mut() {
        let tx = repo.write()?;
        match job(counts, &tx) {
            Ran::Ok => {
                if let Some(e) = tx.commit_unpublished()? {
                    end = Some(e);
                }
                transactions.fetch_add(1, Ordering::Relaxed);
            }
            Ran::Clean => drop(tx),
            Ran::Dirty => {
                drop(tx);
                counts.clear();
            }
        }
    }
    Ok(end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables;

    fn repo() -> (tempfile::TempDir, crate::DataRoot, Arc<Repository>) {
        let dir = tempfile::tempdir().unwrap();
        let mut root = crate::DataRoot::create(dir.path().join("data")).unwrap();
        root.set_objects_factory(Box::new(|dir, _| {
            let o: crate::Objects = crate::DirObjects::open(&dir.join("interim"))?;
            Ok(o)
        }));
        let id = root.create_repository("game").unwrap();
        let repo = root.open_repository(id).unwrap();
        (dir, root, repo)
    }

    fn meta(repo: &Repository, key: &str) -> Option<Vec<u8>> {
        use redb::ReadableDatabase;
        let tx = repo.db.begin_read().unwrap();
        let t = tx.open_table(tables::META).unwrap();
        t.get(key).unwrap().map(|g| g.value().to_vec())
    }

    /// Run `n` mutations behind a held gate: member 0 leads alone (blocked
    /// on the gate), the others queue and then share one group; `dirty`
    /// names one that writes and then fails.
    fn queued_behind_the_gate(
        repo: &Repository,
        n: usize,
        dirty: Option<usize>,
    ) -> Vec<Result<()>> {
        let c = &repo.pin_writes;
        let gate = repo.gate.lock().unwrap();
        let wait_until = |ok: &dyn Fn(&State) -> bool| {
            while !ok(&c.state.lock().unwrap()) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        };
        std::thread::scope(|s| {
            let member = |i: usize| {
                s.spawn(move || {
                    c.run(repo, move |_, tx| {
                        let mut meta = tx.open_table(tables::META)?;
                        meta.insert(format!("test-combine:{i}").as_str(), [i as u8].as_slice())?;
                        if Some(i) == dirty {
                            return Err(MetadataError::refused(
                                ErrorCode::AlreadyExists,
                                format!("member {i} fails after writing"),
                            ));
                        }
                        Ok(())
                    })
                })
            };
            let mut handles = vec![member(0)];
            wait_until(&|st| st.leading);
            handles.extend((1..n).map(member));
            wait_until(&|st| st.pending.len() == n - 1);
            drop(gate);
            handles
                .into_iter()
                .map(|h| h.join().unwrap())
                .collect::<Vec<_>>()
        })
    }

    #[test]
    fn queued_mutations_share_one_transaction_and_one_publication() {
        let (_d, _root, repo) = repo();
        let before = repo.pin_writes.stats();
        let head_before = repo.archive.head();
        let r = queued_behind_the_gate(&repo, 12, None);
        assert!(r.iter().all(|r| r.is_ok()), "{r:?}");
        let after = repo.pin_writes.stats();
        assert_eq!(after.members - before.members, 12);
        // The first leader's own group, then the other eleven together.
        assert_eq!(after.transactions - before.transactions, 2, "{after:?}");
        for i in 0..12 {
            assert_eq!(
                meta(&repo, &format!("test-combine:{i}")),
                Some(vec![i as u8])
            );
        }
        // Every member returned archived: HEAD covers the database's end.
        let head = repo.archive.head();
        assert!(head.end > head_before.end);
        assert_eq!(head, crate::archive::read_head(repo.archive.dir()).unwrap());
    }

    #[test]
    fn a_member_failing_after_it_wrote_leaves_nothing_and_the_others_commit_alone() {
        let (_d, _root, repo) = repo();
        let before = repo.pin_writes.stats();
        let r = queued_behind_the_gate(&repo, 6, Some(4));
        for (i, r) in r.iter().enumerate() {
            if i == 4 {
                let e = r.as_ref().unwrap_err();
                assert_eq!(e.code(), ErrorCode::AlreadyExists);
                assert!(e.to_string().contains("member 4 fails"), "{e}");
            } else {
                assert!(r.is_ok(), "member {i}: {r:?}");
            }
        }
        for i in 0..6 {
            let want = (i != 4).then(|| vec![i as u8]);
            assert_eq!(
                meta(&repo, &format!("test-combine:{i}")),
                want,
                "member {i}"
            );
        }
        // The group of five was dropped; its other members committed one
        // by one.
        let after = repo.pin_writes.stats();
        assert_eq!(after.transactions - before.transactions, 1 + 4, "{after:?}");
    }

    fn put(i: usize) -> impl FnMut(&mut PinCounts, &WriteTx) -> Result<()> + Send + 'static {
        move |_, tx| {
            let mut meta = tx.open_table(tables::META)?;
            meta.insert(format!("test-combine:{i}").as_str(), [i as u8].as_slice())?;
            Ok(())
        }
    }

    #[test]
    fn a_patient_mutation_rides_in_the_next_group() {
        let (_d, _root, repo) = repo();
        let c = &repo.pin_writes;
        let before = c.stats();
        std::thread::scope(|s| {
            let patient =
                s.spawn(|| c.run_patiently(&repo, std::time::Duration::from_secs(30), put(0)));
            while c.state.lock().unwrap().pending.is_empty() {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            // Queued and waiting: it leads nothing of its own.
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert_eq!(c.stats().transactions, before.transactions);
            assert!(!c.state.lock().unwrap().leading);
            // An impatient member leads and takes it along.
            let started = std::time::Instant::now();
            c.run(&repo, put(1)).unwrap();
            patient.join().unwrap().unwrap();
            assert!(started.elapsed() < std::time::Duration::from_secs(10));
        });
        let after = c.stats();
        assert_eq!(after.members - before.members, 2);
        assert_eq!(after.transactions - before.transactions, 1, "{after:?}");
        assert_eq!(meta(&repo, "test-combine:0"), Some(vec![0]));
        assert_eq!(meta(&repo, "test-combine:1"), Some(vec![1]));
        // Archived before either returned.
        assert_eq!(
            repo.archive.head(),
            crate::archive::read_head(repo.archive.dir()).unwrap()
        );
    }

    #[test]
    fn a_patient_mutation_alone_commits_once_its_patience_ran_out() {
        let (_d, _root, repo) = repo();
        let c = &repo.pin_writes;
        let before = c.stats();
        let started = std::time::Instant::now();
        let patience = std::time::Duration::from_millis(80);
        c.run_patiently(&repo, patience, put(7)).unwrap();
        assert!(started.elapsed() >= patience);
        assert_eq!(c.stats().transactions - before.transactions, 1);
        assert_eq!(meta(&repo, "test-combine:7"), Some(vec![7]));
    }

    #[test]
    fn hurrying_ends_a_patient_wait() {
        let (_d, _root, repo) = repo();
        let c = &repo.pin_writes;
        let before = c.stats();
        let started = std::time::Instant::now();
        std::thread::scope(|s| {
            let patient =
                s.spawn(|| c.run_patiently(&repo, std::time::Duration::from_secs(60), put(3)));
            while c.state.lock().unwrap().pending.is_empty() {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            c.hurry();
            patient.join().unwrap().unwrap();
        });
        assert!(started.elapsed() < std::time::Duration::from_secs(30));
        assert_eq!(c.stats().transactions - before.transactions, 1);
        assert_eq!(meta(&repo, "test-combine:3"), Some(vec![3]));
        // And from now on: a later patient member does not wait either.
        let later = std::time::Instant::now();
        c.run_patiently(&repo, std::time::Duration::from_secs(60), put(4))
            .unwrap();
        assert!(later.elapsed() < std::time::Duration::from_secs(30));
    }
}

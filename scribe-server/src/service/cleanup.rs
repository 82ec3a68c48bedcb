//! Upload pins cleaned up after the acknowledgement (issue #19).
//!
//! An acceptance group's outcomes deactivate their intents' pins in the
//! acceptance transaction (the `upload-finished` marker); deleting the pin
//! rows is bounded cleanup the specification runs after the outcome and
//! resumes at startup ("Atomic publication and upload lifecycle profile
//! 1"). It used to run in the group's lead before any member was answered:
//! a metadata commit and an archive flush of its own in every submitter's
//! wait (3.8 ms of a 14 ms lead under the 32-client load). The lead now
//! hands the repository to this service's one cleanup thread and answers;
//! the thread runs [`Repository::cleanup_finished_pins_patiently`], whose
//! final batches go through the pin combiner and so usually share a
//! concurrent upload's pin transaction. A pin refused for the
//! per-workspace bound cleans up synchronously and is tried again
//! (`pins::pin`), so the deferral never refuses an upload the immediate
//! cleanup would have let through.
//!
//! The thread holds no repository while it waits (a rename, deletion or
//! idle compaction is never refused "in use" for it); a repository closed
//! before its turn is cleaned up when it is next opened. When the service
//! is dropped the queued cleanups run at once, without patience (a run
//! waiting for an upload is hurried), so an embedded client's exit neither
//! waits out the patience nor leaves its last submission's pins behind.

use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use scribe_metadata::Repository;

/// How long a cleanup waits for an upload's pin transaction to share
/// before it commits alone (only an idle server waits the whole time).
pub const PATIENCE: Duration = Duration::from_millis(100);

/// The service's cleanup thread and the repositories waiting for it.
#[derive(Default)]
pub struct Cleaner {
    shared: Arc<Shared>,
    worker: Mutex<Option<JoinHandle<()>>>,
    /// Defer even a lone submission's cleanup (tests of the deferral).
    always: std::sync::atomic::AtomicBool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Default)]
struct State {
    /// Each repository at most once: one run cleans every finished intent.
    ready: Vec<Weak<Repository>>,
    /// The repository of the run in progress (tests wait for the run to
    /// end; a shutdown ends its patience).
    current: Option<Weak<Repository>>,
    closed: bool,
    /// Runs that failed (reported on stderr; the next run, or the next
    /// opening, tries again).
    failed: u64,
}

impl Cleaner {
    /// Defer every grouped acceptance's cleanup to this thread, a lone
    /// submission's too (tests of what the deferral must keep true).
    pub fn set_always(&self, on: bool) {
        self.always.store(on, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether a lone submission's cleanup is deferred as well.
    pub fn always(&self) -> bool {
        self.always.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Clean up `repo`'s finished intents soon.
    pub fn offer(&self, repo: &Arc<Repository>) {
        let weak = Arc::downgrade(repo);
        {
            let mut st = self.shared.lock();
            if st.closed {
                return;
            }
            if !st.ready.iter().any(|w| w.ptr_eq(&weak)) {
                st.ready.push(weak);
            }
        }
        self.shared.wake.notify_all();
        self.start();
    }

    /// Block until nothing is queued or running (tests), and return how
    /// many runs failed so far.
    pub fn settle(&self) -> u64 {
        let started = self
            .worker
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some();
        let mut st = self.shared.lock();
        while started && (st.current.is_some() || !st.ready.is_empty()) {
            st = self.shared.wake.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        st.failed
    }

    fn start(&self) {
        let mut w = self.worker.lock().unwrap_or_else(|p| p.into_inner());
        if w.is_some() {
            return;
        }
        let shared = self.shared.clone();
        match std::thread::Builder::new()
            .name("scribe-pin-cleanup".into())
            .spawn(move || shared.run())
        {
            Ok(h) => *w = Some(h),
            // Without the thread the pins stay until the next opening, or
            // until a pin at the bound cleans up itself.
            Err(e) => eprintln!("scribe-server: pin cleanup thread not started: {e}"),
        }
    }
}

impl Drop for Cleaner {
    /// The cleanups still queued run at once, without patience (an embedded
    /// client's last submission leaves no pins behind), then the thread
    /// ends: a run waiting for an upload to share is hurried.
    fn drop(&mut self) {
        let current = {
            let mut st = self.shared.lock();
            st.closed = true;
            st.current.clone()
        };
        if let Some(repo) = current.and_then(|w| w.upgrade()) {
            repo.hurry_pin_cleanup();
        }
        self.shared.wake.notify_all();
        let w = self.worker.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(w) = w {
            let _ = w.join();
        }
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn run(&self) {
        let mut st = self.lock();
        loop {
            let Some(weak) = st.ready.pop() else {
                if st.closed {
                    return;
                }
                st = self.wake.wait(st).unwrap_or_else(|p| p.into_inner());
                continue;
            };
            // Read with `current` set, under the lock `Drop` sets `closed`
            // under: either this run sees the shutdown, or the shutdown
            // sees this run.
            let closing = st.closed;
            st.current = Some(weak.clone());
            drop(st);
            let failed = match weak.upgrade() {
                Some(repo) => {
                    if closing {
                        repo.hurry_pin_cleanup();
                    }
                    match repo.cleanup_finished_pins_patiently(PATIENCE) {
                        Ok(()) => false,
                        Err(e) => {
                            eprintln!(
                                "scribe-server: cleaning up the upload pins of repository {}: {e}",
                                repo.id()
                            );
                            true
                        }
                    }
                }
                // Closed meanwhile: its next opening cleans up.
                None => false,
            };
            st = self.lock();
            st.current = None;
            if failed {
                st.failed += 1;
            }
            self.wake.notify_all();
        }
    }
}

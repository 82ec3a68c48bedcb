//! Manifests checked while the upload goes on (issue #19).
//!
//! Acceptance checks every new manifest deeply: it reads the file's chunks
//! back, judges each cut and hashes the content id (issue #14 item 4). For
//! a large import that was a second pass over every byte after the upload
//! had ended, with the submitter waiting (2 GiB: 1.5 s of both cores). A
//! streaming client now sends each large file's manifest as soon as the
//! file's chunks were sent; the server hands it to this service's one
//! precheck thread, which checks it from the stored bytes while later
//! files upload ([`Repository::precheck_manifest`]). A manifest that
//! passes is remembered by its repository, and the acceptance naming it
//! reads none of its chunks again (it still checks the manifest, its
//! entries' claims and its chunks' presence); one that does not pass is
//! judged, and refused with its reason, by that acceptance as before.
//!
//! Bounds: one thread for the whole service, at most [`MAX_QUEUED`]
//! manifests waiting (more are simply not prechecked), only manifests of
//! files larger than the profile minimum (a smaller file's acceptance
//! reads nothing). A manifest whose chunks are not all stored yet (still
//! in another connection's stage) is tried again every [`RETRY`] for up
//! to [`GIVE_UP`]; a waiting manifest does not hold its repository open.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use scribe_format::manifest::ManifestRef;
use scribe_format::{ManifestId, ObjectId, ObjectKind};
use scribe_metadata::{Precheck, Repository};

/// Most manifests waiting for the precheck thread.
pub const MAX_QUEUED: usize = 256;
/// How soon a manifest whose chunks were not all stored is tried again.
pub const RETRY: Duration = Duration::from_millis(50);
/// How long a manifest whose chunks are not all stored is tried.
pub const GIVE_UP: Duration = Duration::from_secs(30);

/// The service's precheck thread and its queue.
#[derive(Default)]
pub(crate) struct Prechecker {
    shared: Arc<Shared>,
    worker: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Default)]
struct State {
    ready: VecDeque<Item>,
    /// Tried, not all chunks stored yet.
    waiting: Vec<Item>,
    closed: bool,
    /// Prechecks run, for tests and diagnostics: (verified, other).
    done: (u64, u64),
}

struct Item {
    /// Not held while it waits: a repository being renamed, deleted or
    /// compacted when idle must not find it in use because a manifest of
    /// an abandoned upload waits for chunks that never come.
    repo: Weak<Repository>,
    id: ManifestId,
    since: Instant,
    next: Instant,
}

impl Prechecker {
    /// Queue the manifests among `objects` (just stored in `repo`, each with
    /// its payload) that describe files larger than the profile minimum.
    pub fn offer<'a>(
        &self,
        repo: &Arc<Repository>,
        objects: impl IntoIterator<Item = (&'a ObjectId, &'a [u8])>,
    ) {
        let ids: Vec<ManifestId> = objects
            .into_iter()
            .filter(|(id, _)| id.kind == ObjectKind::Manifest)
            .filter(|(_, payload)| {
                ManifestRef::decode(payload).is_ok_and(|m| {
                    m.total_size() > u64::from(scribe_format::limits::CHUNK_MIN_BYTES)
                })
            })
            .map(|(id, _)| ManifestId(id.digest))
            .collect();
        if ids.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut st = self.shared.lock();
        if st.closed {
            return;
        }
        for id in ids {
            if st.ready.len() + st.waiting.len() >= MAX_QUEUED {
                break;
            }
            st.ready.push_back(Item {
                repo: Arc::downgrade(repo),
                id,
                since: now,
                next: now,
            });
        }
        drop(st);
        self.shared.wake.notify_one();
        self.start();
    }

    /// (verified, other outcomes) of the prechecks run so far.
    pub fn counts(&self) -> (u64, u64) {
        self.shared.lock().done
    }

    fn start(&self) {
        let mut w = self.worker.lock().unwrap_or_else(|p| p.into_inner());
        if w.is_some() {
            return;
        }
        let shared = self.shared.clone();
        // Without the thread nothing is prechecked: acceptance checks in full.
        *w = std::thread::Builder::new()
            .name("scribe-precheck".into())
            .spawn(move || shared.run())
            .ok();
    }
}

impl Drop for Prechecker {
    /// The thread ends after the precheck it is running (and lets go of
    /// every repository it was given).
    fn drop(&mut self) {
        {
            let mut st = self.shared.lock();
            st.closed = true;
            st.ready.clear();
            st.waiting.clear();
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
        // The check's parallel steps run in a pool of this one thread: on
        // the shared pool the precheck was slower than none or level in
        // six measured pairs (each window of a file wakes every worker,
        // which then spins on the cores the upload needs), in its own
        // pool faster in every pair (docs/performance.md).
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .thread_name(|_| "scribe-precheck".into())
            .build()
            .ok();
        let mut st = self.lock();
        loop {
            if st.closed {
                return;
            }
            let now = Instant::now();
            let mut i = 0;
            while i < st.waiting.len() {
                if st.waiting[i].next <= now {
                    let item = st.waiting.swap_remove(i);
                    st.ready.push_back(item);
                } else {
                    i += 1;
                }
            }
            let Some(mut item) = st.ready.pop_front() else {
                let wait = if st.waiting.is_empty() {
                    Duration::from_secs(3600)
                } else {
                    RETRY
                };
                st = self
                    .wake
                    .wait_timeout(st, wait)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
                continue;
            };
            drop(st);
            let Some(repo) = item.repo.upgrade() else {
                // The repository was closed meanwhile: nothing to check.
                st = self.lock();
                continue;
            };
            // A failure to read is the acceptance's to report.
            let check = || repo.precheck_manifest(&item.id).ok();
            let outcome = match &pool {
                Some(pool) => pool.install(check),
                None => check(),
            };
            drop(repo);
            st = self.lock();
            if outcome == Some(Precheck::Verified) {
                st.done.0 += 1;
            } else {
                st.done.1 += 1;
            }
            if outcome == Some(Precheck::Incomplete) && item.since.elapsed() < GIVE_UP && !st.closed
            {
                item.next = Instant::now() + RETRY;
                st.waiting.push(item);
            }
        }
    }
}

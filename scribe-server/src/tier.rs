//! The S3 durable tier behind a served data root (issue #20,
//! `docs/nokv-bridge.md`): a background uploader that publishes every
//! accepted change of every repository as a NoKV artifact revision, and
//! the acknowledgement profiles.
//!
//! * **local**: a submit is acknowledged after the local durable commit.
//!   The metadata's history is the durable outbox: the tier's per-root
//!   cursor says what is in the bucket, everything accepted above it is
//!   the backlog, so a SIGKILL loses nothing (the next start resumes at
//!   the cursor, reusing a recorded revision id).
//! * **durable**: the accepted outcome of a submit (and of an
//!   OperationOutcome query) is answered only once the change is in the
//!   bucket; if that does not happen within the ack timeout the answer is
//!   `tier_unavailable` (retryable: the client asks again with the same
//!   operation id and gets the accepted outcome once the upload is done).
//!
//! With a tier, the local object store is a cache: `scribe-server tier
//! evict` drops the chunks the bucket holds, and any read that misses
//! locally (transfers, acceptance's checks) fetches the object from the
//! bucket, checks it and puts it back (`stores::Fallback`).
//!
//! The record lives at `<data>/tier/tier.redb`; the uploader writes
//! `<data>/tier/status` (backlog per repository) after every pass so
//! `scribe-server tier status` can read it while the server runs.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use nokv_bridge::tier::{Provider, Tier, TierError, TierOptions};
use scribe_format::{ErrorCode, ObjectId, RepositoryId};

use crate::service::stores::Fallback;
use crate::service::{AcceptedHook, Failure, Service};

/// When a submit is acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ack {
    Local,
    Durable,
}

impl std::str::FromStr for Ack {
    type Err = String;
    fn from_str(s: &str) -> Result<Ack, String> {
        match s {
            "local" => Ok(Ack::Local),
            "durable" => Ok(Ack::Durable),
            other => Err(format!("{other:?}: the profiles are `local` and `durable`")),
        }
    }
}

/// The tier's directory inside a data root.
pub fn dir(data: &Path) -> PathBuf {
    data.join("tier")
}

/// The logical shard of a data root: the low 32 bits of its incarnation
/// (fixed in `tier.redb` when it is created, so a restored root keeps its
/// keys).
pub fn shard_of(incarnation_hex: &str) -> u32 {
    let tail = &incarnation_hex[incarnation_hex.len().saturating_sub(8)..];
    u32::from_str_radix(tail, 16).unwrap_or(0)
}

/// Open the tier record of the data root at `data`.
pub fn open_record(
    data: &Path,
    incarnation_hex: &str,
    provider: Arc<dyn Provider>,
) -> Result<Tier, TierError> {
    let d = dir(data);
    std::fs::create_dir_all(&d).map_err(|e| TierError::State {
        path: d.display().to_string(),
        detail: e.to_string(),
    })?;
    Tier::open(
        &d.join("tier.redb"),
        shard_of(incarnation_hex),
        provider,
        TierOptions::default(),
    )
}

/// The objects change `change` names: its commit envelope and change set,
/// the manifests of the files it touched and their chunks. Objects older
/// changes brought are in the list too; the tier skips what it owns.
pub fn change_objects(
    repo: &scribe_metadata::Repository,
    store: &scribe_objects::ObjectStore,
    change: u64,
) -> Result<Vec<ObjectId>, String> {
    let d = repo
        .view()
        .and_then(|mut v| v.describe(change))
        .map_err(|e| format!("change {change}: {e}"))?;
    let mut out = vec![
        ObjectId::commit(d.record.commit_id),
        ObjectId::change_set(d.record.change_set),
    ];
    for (path, h) in &d.paths {
        let Some(st) = &h.state else { continue };
        let mid = ObjectId::manifest(st.manifest);
        out.push(mid);
        let payload = store
            .get(&mid)
            .map_err(|e| format!("{path}@{change}: manifest {mid}: {e}"))?;
        let m = scribe_objects::decode_manifest(&payload)
            .map_err(|e| format!("{path}@{change}: manifest {mid}: {e}"))?;
        out.extend(m.chunks.iter().map(|c| ObjectId::chunk(c.id)));
    }
    Ok(out)
}

/// The uploader and the acknowledgement profile of a serving data root.
pub struct TierService {
    tier: Tier,
    service: Weak<Service>,
    ack: Ack,
    ack_timeout: Duration,
    /// Bumped by every accepted submit and every finished pass.
    wake: (Mutex<Wake>, Condvar),
    status_path: PathBuf,
}

#[derive(Default)]
struct Wake {
    requested: u64,
    passes: u64,
    stop: bool,
    last_error: Option<String>,
}

impl TierService {
    /// Start the uploader for `service` (one thread) and install the
    /// acknowledgement hook.
    pub fn start(
        service: &Arc<Service>,
        tier: Tier,
        ack: Ack,
        ack_timeout: Duration,
    ) -> Arc<TierService> {
        let status_path = dir(service.root().dir()).join("status");
        let t = Arc::new(TierService {
            tier,
            service: Arc::downgrade(service),
            ack,
            ack_timeout,
            wake: (Mutex::default(), Condvar::new()),
            status_path,
        });
        let worker = t.clone();
        std::thread::Builder::new()
            .name("scribe-tier".into())
            .spawn(move || worker.run())
            .expect("spawn the tier uploader");
        service.set_accepted_hook(t.clone());
        service.stores().set_fallback(t.clone());
        // Repositories opened before now get the fallback at their next open.
        service.forget_open_repositories();
        t
    }

    /// Stop the uploader after its current pass.
    pub fn stop(&self) {
        let (m, cv) = &self.wake;
        m.lock().unwrap_or_else(|e| e.into_inner()).stop = true;
        cv.notify_all();
    }

    pub fn tier(&self) -> &Tier {
        &self.tier
    }

    fn request_pass(&self) {
        let (m, cv) = &self.wake;
        m.lock().unwrap_or_else(|e| e.into_inner()).requested += 1;
        cv.notify_all();
    }

    fn run(self: Arc<Self>) {
        let mut done_for = 0u64;
        loop {
            {
                let (m, cv) = &self.wake;
                let mut w = m.lock().unwrap_or_else(|e| e.into_inner());
                // Sleep until asked (or a second passes: a failed pass is
                // retried, and changes accepted offline are found).
                if !w.stop && w.requested == done_for {
                    w = cv
                        .wait_timeout(w, Duration::from_secs(1))
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                if w.stop {
                    return;
                }
                done_for = w.requested;
            }
            let Some(service) = self.service.upgrade() else {
                return;
            };
            let result = self.pass(&service);
            drop(service);
            let (m, cv) = &self.wake;
            let mut w = m.lock().unwrap_or_else(|e| e.into_inner());
            w.passes += 1;
            w.last_error = result.err();
            if let Some(e) = &w.last_error {
                eprintln!("scribe-server: tier: {e}");
            }
            cv.notify_all();
        }
    }

    /// Publish everything accepted above each root's cursor, in order.
    fn pass(&self, service: &Service) -> Result<(), String> {
        let root = service.root();
        let repos = root.list_repositories().map_err(|e| e.to_string())?;
        let mut status = String::new();
        let mut first_err = None;
        for info in repos {
            let r = self.publish_repository(service, info.id);
            let (through, head) = match &r {
                Ok(v) => *v,
                Err((v, e)) => {
                    if first_err.is_none() {
                        first_err = Some(format!("{}: {e}", info.name));
                    }
                    *v
                }
            };
            status.push_str(&format!(
                "{} {} uploaded-through {through} head {head} backlog {}\n",
                info.name,
                info.id.to_hex(),
                head.saturating_sub(through)
            ));
        }
        let tmp = self.status_path.with_extension("tmp");
        if std::fs::write(&tmp, status).is_ok() {
            let _ = std::fs::rename(&tmp, &self.status_path);
        }
        first_err.map_or(Ok(()), Err)
    }

    #[allow(clippy::type_complexity)]
    fn publish_repository(
        &self,
        service: &Service,
        id: RepositoryId,
    ) -> Result<(u64, u64), ((u64, u64), String)> {
        let fail = |v: (u64, u64), e: String| Err((v, e));
        let repo = match service.root().open_repository(id) {
            Ok(r) => r,
            Err(e) => return fail((0, 0), e.to_string()),
        };
        let head = repo.head().unwrap_or(0);
        let mut through = match self.tier.uploaded_through(&id.0) {
            Ok(t) => t,
            Err(e) => return fail((0, head), e.to_string()),
        };
        if through >= head {
            return Ok((through, head));
        }
        let store = match service.stores().get(&id) {
            Some(s) => s,
            None => match crate::service::stores::open_or_create(&repo.dir().join("objects")) {
                Ok(s) => Arc::new(s),
                Err(e) => return fail((through, head), e.to_string()),
            },
        };
        while through < head {
            let change = through + 1;
            let objects = match change_objects(&repo, &store, change) {
                Ok(o) => o,
                Err(e) => return fail((through, head), e),
            };
            let read = |oid: &ObjectId| store.get(oid).map_err(|e| e.to_string());
            if let Err(e) = self.tier.publish_change(&id.0, change, &objects, &read) {
                return fail((through, head), format!("change {change}: {e}"));
            }
            through = change;
            // Wake durable submits waiting for this change.
            self.wake.1.notify_all();
        }
        Ok((through, head))
    }
}

impl Fallback for TierService {
    fn has(&self, repo: RepositoryId, id: &ObjectId) -> bool {
        self.tier.holds(&repo.0, id).unwrap_or(false)
    }

    fn fetch(&self, repo: RepositoryId, id: &ObjectId) -> Result<Option<Vec<u8>>, String> {
        if !self.has(repo, id) {
            return Ok(None);
        }
        self.tier
            .read_object(&repo.0, id)
            .map_err(|e| format!("reading {id} from the tier: {e}"))
    }
}

/// `scribe-server tier evict`: compact each repository's store without the
/// chunks the tier holds in an `Available` revision. Manifests, change
/// sets and commits stay local (small, and read by every acceptance).
pub fn evict(
    data: &Path,
    tier: &Tier,
    repo: Option<&str>,
) -> Result<crate::admin::Report, crate::admin::AdminError> {
    let keep = |r: RepositoryId, id: &ObjectId| {
        id.kind != scribe_format::ObjectKind::Chunk || !tier.holds(&r.0, id).unwrap_or(false)
    };
    crate::admin::compact_objects_keeping(
        data,
        repo,
        &scribe_objects::CompactOptions::default(),
        &keep,
    )
}

impl AcceptedHook for TierService {
    fn accepted(&self, repo: RepositoryId, change: u64) -> Result<(), Failure> {
        self.request_pass();
        if self.ack == Ack::Local {
            return Ok(());
        }
        let deadline = Instant::now() + self.ack_timeout;
        let (m, cv) = &self.wake;
        let mut w = m.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            match self.tier.uploaded_through(&repo.0) {
                Ok(t) if t >= change => return Ok(()),
                Ok(_) => {}
                Err(e) => {
                    return Err(Failure::new(
                        ErrorCode::TierUnavailable,
                        format!(
                            "change {change} was accepted, but the tier record cannot be read: {e}"
                        ),
                    ))
                }
            }
            let now = Instant::now();
            if now >= deadline {
                let why = w
                    .last_error
                    .clone()
                    .unwrap_or_else(|| "the upload has not finished".into());
                return Err(Failure::new(
                    ErrorCode::TierUnavailable,
                    format!(
                        "change {change} was accepted and is kept, but it is not yet in the \
                         durable tier ({why}); ask again with the same operation to get its \
                         outcome once it is"
                    ),
                ));
            }
            w = cv
                .wait_timeout(w, (deadline - now).min(Duration::from_millis(200)))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

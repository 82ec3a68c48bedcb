//! Commits, leased snapshots and restore (docs/workbench.md).

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::{operation_id, record_path, refusal_error, Workbench};
use crate::error::WbError;
use crate::identity::{commit_identity, manifest_digest_uri, request_identity};
use crate::path::{self, check_id};
use crate::store::{Edit, NewBody, Publish, Published, Refusal, Row, Store};
use crate::tools::{self, SnapRef};

const DAY_MS: u64 = 24 * 60 * 60 * 1000;
/// The default snapshot lease.
pub const DEFAULT_TTL_DAYS: u32 = 7;
/// The largest run manifest (`metadata/run_manifest.json` as stored: the
/// caller's manifest inside the bridge's envelope) a commit writes, and
/// the largest run manifest or bridge record (commit, snapshot, restore)
/// the bridge reads: 16 MiB. A run's parameters, metrics and a listing of
/// tens of thousands of outputs with their digests fit many times over; a
/// larger listing belongs in an output file the manifest names by digest.
/// A larger commit is refused (`invalid_input`, nothing published); a
/// larger file found where the bridge reads one (a person's submit) is
/// refused by name without being read (`storage`).
pub const RUN_MANIFEST_MAX_BYTES: u64 = 16 << 20;

fn run_manifest_path(id: &str) -> String {
    format!("{id}/metadata/run_manifest.json")
}

fn restore_manifest_path(id: &str) -> String {
    format!("{id}/metadata/restore_manifest.json")
}

fn commits_dir(id: &str) -> String {
    format!(".nokv/commits/{id}")
}

fn snapshots_dir(id: &str) -> String {
    format!(".nokv/snapshots/{id}")
}

fn snapshot_path(id: &str, n: u64) -> String {
    format!(".nokv/snapshots/{id}/{n:020}")
}

/// A snapshot record and where it is stored.
struct Snap {
    row: Row,
    rec: Map<String, Value>,
}

impl Snap {
    fn id(&self) -> u64 {
        self.rec["snapshot_id"].as_u64().unwrap_or(0)
    }

    fn field(&self, k: &str) -> Option<u64> {
        self.rec.get(k).and_then(Value::as_u64)
    }

    /// alive, expired, retired or reaped at `now`.
    fn state(&self, now: u64) -> &'static str {
        if self.field("reaped_ms").is_some() {
            "reaped"
        } else if self.field("retired_ms").is_some() {
            "retired"
        } else if now >= self.field("expires_ms").unwrap_or(0) {
            "expired"
        } else {
            "alive"
        }
    }

    fn card(&self, now: u64) -> Value {
        let mut v = Value::Object(self.rec.clone());
        v["state"] = json!(self.state(now));
        v["record_generation"] = json!(self.row.generation);
        v.as_object_mut().map(|o| o.remove("request"));
        v
    }
}

impl<S: Store> Workbench<S> {
    fn read_json(&mut self, row: &Row) -> Result<Map<String, Value>, WbError> {
        if row.body.size > RUN_MANIFEST_MAX_BYTES {
            return Err(WbError::new(
                "storage",
                format!(
                    "{} is {} bytes, above the {} MiB a run manifest or a workbench record may \
                     hold (RUN_MANIFEST_MAX_BYTES); it was not read",
                    row.path,
                    row.body.size,
                    RUN_MANIFEST_MAX_BYTES >> 20
                ),
            ));
        }
        let bytes = self.store.read(&row.body, 0, row.body.size)?;
        match serde_json::from_slice(&bytes) {
            Ok(Value::Object(m)) => Ok(m),
            _ => Err(WbError::new(
                "storage",
                format!("{} is not a JSON object", row.path),
            )),
        }
    }

    pub(super) fn publish_edits(
        &mut self,
        req: &[u8; 32],
        bases: &[u64],
        message: String,
        edits: Vec<Edit>,
    ) -> Result<Result<u64, Refusal>, WbError> {
        let p = Publish {
            operation: operation_id(req, bases),
            message,
            edits,
            timestamp_ms: (self.clock)(),
        };
        Ok(match self.store.publish(p)? {
            Published::Accepted { version } => Ok(version),
            Published::Refused(r) => Err(r),
        })
    }

    // ---- commit ----

    pub(super) fn commit(&mut self, input: &Value, c: tools::Commit) -> Result<Value, WbError> {
        let mdu = manifest_digest_uri(&c.manifest);
        let identity = commit_identity(&c.id, &c.content_digest_uri, &mdu);
        // The run manifest as it would be stored, bounded before anything
        // is read or published (a commit over the bound can never have
        // been made, so it cannot be a replay either).
        let body = serde_json::to_vec_pretty(&json!({
            "schema": "nokv.workbench.run_manifest.v1",
            "workbench_id": c.id,
            "commit_identity": identity,
            "content_digest_uri": c.content_digest_uri,
            "manifest_digest_uri": mdu,
            "manifest": c.manifest,
            "committed_ms": (self.clock)(),
        }))
        .expect("json");
        if body.len() as u64 > RUN_MANIFEST_MAX_BYTES {
            return Err(WbError::invalid_input(format!(
                "the run manifest would be {} bytes stored, above the {} MiB a commit may write \
                 (RUN_MANIFEST_MAX_BYTES); nothing was published. Put large listings in an output \
                 file and name its digest in the manifest",
                body.len(),
                RUN_MANIFEST_MAX_BYTES >> 20
            )));
        }
        let inc = self.incarnation(&c.id)?;
        let rec_path = format!("{}/{identity}", commits_dir(&c.id));
        let rm = run_manifest_path(&c.id);
        let current = self.store.stat(0, &rm)?.filter(|r| r.generation >= inc);
        let recorded = self
            .store
            .stat(0, &rec_path)?
            .filter(|r| r.generation >= inc);
        // An identity committed before is a replay (its stored result)
        // while it is the live one, or when the call does not ask to
        // replace: with replace=true over another identity it is
        // published again (commit A, replace with B, replace with A
        // makes A live).
        if let Some(rec) = &recorded {
            if !c.replace.unwrap_or(false) {
                return self.commit_result(&c.id, rec.generation, true);
            }
            let live_identity = match &current {
                Some(row) => self
                    .read_json(row)?
                    .get("commit_identity")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                None => None,
            };
            if live_identity.as_deref() == Some(identity.as_str()) {
                return self.commit_result(&c.id, rec.generation, true);
            }
        }
        if current.is_some() && !c.replace.unwrap_or(false) {
            return Err(WbError::new(
                "commit_conflict",
                "the workbench is committed with another identity; commit with replace=true to replace it",
            ));
        }
        let base = current.as_ref().map_or(0, |r| r.generation);
        let req = request_identity(&self.store.root_name(), inc, "workbench_commit", input);
        let mut edits = vec![Edit::Put {
            path: rm,
            base,
            body: NewBody::Bytes(body),
        }];
        // The identity's record is written once, at its first commit.
        if recorded.is_none() {
            edits.push(Edit::Put {
                path: rec_path.clone(),
                base: 0,
                body: NewBody::Bytes(
                    serde_json::to_vec(&json!({"commit_identity": identity, "workbench_id": c.id}))
                        .expect("json"),
                ),
            });
        }
        let message = format!(
            "nokv workbench_commit {}\nnokv-request: {}\nnokv-content-type: application/json\n",
            c.id,
            hex::encode(req)
        );
        match self.publish_edits(&req, &[base], message, edits)? {
            Ok(version) => self.commit_result(&c.id, version, false),
            Err(Refusal::Stale(_)) | Err(Refusal::Exists(_)) => {
                // A concurrent commit of the same identity converges; any
                // other head change wins over this one.
                if let Some(rec) = self.store.stat(0, &rec_path)? {
                    return self.commit_result(&c.id, rec.generation, true);
                }
                Err(WbError::new(
                    "generation_conflict",
                    "the run manifest changed while committing; read it and retry",
                ))
            }
            Err(r) => Err(refusal_error(r)),
        }
    }

    fn commit_result(&mut self, id: &str, change: u64, replay: bool) -> Result<Value, WbError> {
        let row = self
            .store
            .stat(change, &run_manifest_path(id))?
            .ok_or_else(|| WbError::new("storage", "a commit's run manifest is missing"))?;
        let m = self.read_json(&row)?;
        Ok(json!({
            "id": id,
            "commit_identity": m.get("commit_identity"),
            "content_digest_uri": m.get("content_digest_uri"),
            "manifest_digest_uri": m.get("manifest_digest_uri"),
            "change": change,
            "generation": row.generation,
            "committed_ms": m.get("committed_ms"),
            "path": "metadata/run_manifest.json",
            "idempotent_replay": replay,
        }))
    }

    // ---- snapshots ----

    fn snapshots(&mut self, id: &str, inc: u64) -> Result<Vec<Snap>, WbError> {
        let mut out = Vec::new();
        let mut token = String::new();
        loop {
            let page = self.store.list_files(0, &snapshots_dir(id), &token, 1000)?;
            for row in page.files {
                if row.generation < inc {
                    continue;
                }
                let rec = self.read_json(&row)?;
                out.push(Snap { row, rec });
            }
            match page.next {
                Some(t) => token = t,
                None => break,
            }
        }
        out.sort_by_key(Snap::id);
        Ok(out)
    }

    fn find_snapshot(&mut self, id: &str, inc: u64, sel: &SnapRef) -> Result<Snap, WbError> {
        let snaps = self.snapshots(id, inc)?;
        let found = match sel {
            SnapRef::Id(n) => snaps.into_iter().find(|s| s.id() == *n),
            // The newest snapshot minted with that name.
            SnapRef::Name(name) => snaps
                .into_iter()
                .rev()
                .find(|s| s.rec.get("name").and_then(Value::as_str) == Some(name)),
        };
        found.ok_or_else(|| {
            WbError::new("snapshot_not_found", format!("no snapshot {sel} of {id:?}"))
        })
    }

    /// The version a read runs at: 0 (live) or an alive snapshot's.
    pub(super) fn view_at(&mut self, id: &str, sel: Option<&SnapRef>) -> Result<u64, WbError> {
        let Some(sel) = sel else { return Ok(0) };
        let inc = self.incarnation(id)?;
        let snap = self.find_snapshot(id, inc, sel)?;
        match snap.state((self.clock)()) {
            "alive" => Ok(snap.field("read_version").unwrap_or(0).max(1)),
            state => Err(WbError::new(
                match state {
                    "expired" => "snapshot_expired",
                    "retired" => "snapshot_retired",
                    _ => "snapshot_reaped",
                },
                format!("snapshot {} of {id:?} is {state}", snap.id()),
            )),
        }
    }

    pub(super) fn snapshot(&mut self, input: &Value, c: tools::Snapshot) -> Result<Value, WbError> {
        let inc = self.incarnation(&c.id)?;
        if self
            .store
            .stat(0, &run_manifest_path(&c.id))?
            .filter(|r| r.generation >= inc)
            .is_none()
        {
            return Err(WbError::new(
                "not_committed",
                "snapshots are of committed workbenches; commit first",
            ));
        }
        let now = (self.clock)();
        let req = request_identity(&self.store.root_name(), inc, "workbench_snapshot", input);
        let snaps = self.snapshots(&c.id, inc)?;
        let read_version = self.store.head()?;
        // An exact retry (the newest snapshot this same request minted, even
        // with other snapshots taken since) returns that snapshot while the
        // workbench is unchanged since it; once the workbench moved, the
        // same request takes a new snapshot (a nightly job's identical
        // calls each freeze what is new), and so does a repeat once that
        // snapshot is no longer alive (retired, expired, reaped): the
        // caller asks for a snapshot it can read at.
        let hex_req = hex::encode(req);
        if let Some(prev) = snaps
            .iter()
            .rev()
            .find(|s| s.rec.get("request").and_then(Value::as_str) == Some(hex_req.as_str()))
        {
            let at = prev
                .rec
                .get("read_version")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            if prev.state(now) == "alive" && !self.store.changed_under(&c.id, at, read_version)? {
                let mut v = prev.card(now);
                v["idempotent_replay"] = json!(true);
                return Ok(v);
            }
        }
        let n = snaps.last().map_or(0, |s| s.id() + 1);
        let ttl = c.ttl_days.unwrap_or(DEFAULT_TTL_DAYS);
        let rec = json!({
            "snapshot_id": n, "workbench_id": c.id, "name": c.name, "reason": c.reason,
            "metadata": c.metadata, "read_version": read_version, "created_ms": now,
            "ttl_days": ttl, "expires_ms": now + u64::from(ttl) * DAY_MS,
            "retired_ms": null, "retire_reason": null, "reaped_ms": null,
            "renewals": 0, "request": hex::encode(req),
        });
        let edits = vec![Edit::Put {
            path: snapshot_path(&c.id, n),
            base: 0,
            body: NewBody::Bytes(serde_json::to_vec(&rec).expect("json")),
        }];
        let message = format!(
            "nokv workbench_snapshot {} {n}\nnokv-request: {}\n",
            c.id,
            hex::encode(req)
        );
        match self.publish_edits(&req, &[n, read_version], message, edits)? {
            Ok(_) => {
                let row = self
                    .store
                    .stat(0, &snapshot_path(&c.id, n))?
                    .ok_or_else(|| WbError::new("storage", "the snapshot record is missing"))?;
                let snap = Snap {
                    rec: rec.as_object().cloned().unwrap_or_default(),
                    row,
                };
                let mut v = snap.card(now);
                v["idempotent_replay"] = json!(false);
                Ok(v)
            }
            Err(Refusal::Exists(_) | Refusal::Stale(_)) => {
                // An earlier attempt of this same request may have won.
                let snaps = self.snapshots(&c.id, inc)?;
                match snaps.last() {
                    Some(last)
                        if last.rec.get("request").and_then(Value::as_str)
                            == Some(hex_req.as_str()) =>
                    {
                        let mut v = last.card(now);
                        v["idempotent_replay"] = json!(true);
                        Ok(v)
                    }
                    _ => Err(WbError::new(
                        "generation_conflict",
                        "another snapshot took this id; retry",
                    )),
                }
            }
            Err(r) => Err(refusal_error(r)),
        }
    }

    fn rewrite_snapshot(
        &mut self,
        id: &str,
        snap: &Snap,
        rec: &Map<String, Value>,
        what: &str,
    ) -> Result<Result<u64, Refusal>, WbError> {
        let req: [u8; 32] =
            *blake3::hash(serde_json::to_string(rec).expect("json").as_bytes()).as_bytes();
        let edits = vec![Edit::Put {
            path: snapshot_path(id, snap.id()),
            base: snap.row.generation,
            body: NewBody::Bytes(serde_json::to_vec(rec).expect("json")),
        }];
        let message = format!(
            "nokv {what} {id} {}\nnokv-request: {}\n",
            snap.id(),
            hex::encode(req)
        );
        self.publish_edits(&req, &[snap.row.generation], message, edits)
    }

    fn selector(snapshot_id: Option<u64>, name: Option<String>) -> Result<SnapRef, WbError> {
        match (snapshot_id, name) {
            (Some(n), None) => Ok(SnapRef::Id(n)),
            (None, Some(s)) if !s.is_empty() => Ok(SnapRef::Name(s)),
            _ => Err(WbError::invalid_input(
                "give exactly one of snapshot_id or name",
            )),
        }
    }

    pub(super) fn snapshot_renew(&mut self, c: tools::SnapshotRenew) -> Result<Value, WbError> {
        let inc = self.incarnation(&c.id)?;
        let sel = Self::selector(c.snapshot_id, c.name)?;
        let snap = self.find_snapshot(&c.id, inc, &sel)?;
        let now = (self.clock)();
        match snap.state(now) {
            "reaped" => {
                return Err(WbError::new(
                    "snapshot_reaped",
                    "the snapshot was reaped; its hold is gone",
                ))
            }
            "retired" => return Err(WbError::new("snapshot_retired", "the snapshot was retired")),
            // Whether or not the reaper has run yet: an expired lease is
            // over (docs/workbench.md), never brought back to life.
            "expired" => {
                return Err(WbError::new(
                    "snapshot_expired",
                    "the snapshot's lease ran out; take a new snapshot",
                ))
            }
            _ => {}
        }
        let ttl = c.ttl_days.unwrap_or(DEFAULT_TTL_DAYS);
        let old = snap.field("expires_ms").unwrap_or(0);
        // Extend only, never shorten.
        let new = old.max(now + u64::from(ttl) * DAY_MS);
        if new == old {
            let mut v = snap.card(now);
            v["renewed"] = json!(false);
            return Ok(v);
        }
        let mut rec = snap.rec.clone();
        rec.insert("expires_ms".into(), json!(new));
        rec.insert("ttl_days".into(), json!(ttl));
        rec.insert(
            "renewals".into(),
            json!(snap.field("renewals").unwrap_or(0) + 1),
        );
        match self.rewrite_snapshot(&c.id, &snap, &rec, "workbench_snapshot_renew")? {
            Ok(version) => {
                let mut v = Snap { rec, row: snap.row }.card(now);
                v["record_generation"] = json!(version);
                v["renewed"] = json!(true);
                Ok(v)
            }
            // The reaper (or a retire) won the lifecycle CAS.
            Err(Refusal::Stale(_)) => Err(WbError::new(
                "generation_conflict",
                "the snapshot's lifecycle moved; look at it again",
            )),
            Err(r) => Err(refusal_error(r)),
        }
    }

    pub(super) fn snapshot_retire(&mut self, c: tools::SnapshotRetire) -> Result<Value, WbError> {
        let inc = self.incarnation(&c.id)?;
        let sel = Self::selector(c.snapshot_id, c.name)?;
        let snap = self.find_snapshot(&c.id, inc, &sel)?;
        let now = (self.clock)();
        if matches!(snap.state(now), "retired" | "reaped") {
            let mut v = snap.card(now);
            v["retired"] = json!(false);
            return Ok(v);
        }
        let mut rec = snap.rec.clone();
        rec.insert("retired_ms".into(), json!(now));
        rec.insert("retire_reason".into(), json!(c.reason));
        match self.rewrite_snapshot(&c.id, &snap, &rec, "workbench_snapshot_retire")? {
            Ok(version) => {
                let mut v = Snap { rec, row: snap.row }.card(now);
                v["record_generation"] = json!(version);
                v["retired"] = json!(true);
                Ok(v)
            }
            Err(Refusal::Stale(_)) => Err(WbError::new(
                "generation_conflict",
                "the snapshot's lifecycle moved; retry",
            )),
            Err(r) => Err(refusal_error(r)),
        }
    }

    pub(super) fn snapshot_list(&mut self, id: &str) -> Result<Value, WbError> {
        let inc = self.incarnation(id)?;
        let now = (self.clock)();
        let snaps = self.snapshots(id, inc)?;
        Ok(json!({"id": id, "snapshots": snaps.iter().map(|s| s.card(now)).collect::<Vec<_>>()}))
    }

    /// The reaper (a maintenance call, not a tool): every expired snapshot
    /// of `id` becomes reaped, in one change per snapshot (a lifecycle CAS
    /// that a concurrent renew loses or wins). Returns the reaped ids.
    pub fn reap(&mut self, id: &str) -> Result<Vec<u64>, WbError> {
        let now = (self.clock)();
        self.reap_at(id, now)
    }

    fn reap_at(&mut self, id: &str, now: u64) -> Result<Vec<u64>, WbError> {
        check_id(id)?;
        let inc = self.incarnation(id)?;
        let mut out = Vec::new();
        for snap in self.snapshots(id, inc)? {
            if snap.state(now) != "expired" {
                continue;
            }
            let mut rec = snap.rec.clone();
            rec.insert("reaped_ms".into(), json!(now));
            if self.rewrite_snapshot(id, &snap, &rec, "reap")?.is_ok() {
                out.push(snap.id());
            }
        }
        Ok(out)
    }

    /// One sweep of the reaper over the whole agent root: [`Self::reap`]
    /// of every workbench at the head; the ids of the snapshots it reaped,
    /// per workbench (only workbenches with at least one), all judged at
    /// one instant (the clock read once at the start). The long-running
    /// surface (`nokv mcp`, [`crate::mcp::serve_scheduled`]) runs it on a
    /// schedule.
    pub fn reap_all(&mut self) -> Result<Vec<(String, Vec<u64>)>, WbError> {
        let now = (self.clock)();
        let head = self.store.head()?;
        let mut out = Vec::new();
        for (id, _) in self.workbenches(head)? {
            let reaped = self.reap_at(&id, now)?;
            if !reaped.is_empty() {
                out.push((id, reaped));
            }
        }
        Ok(out)
    }

    // ---- restore ----

    pub(super) fn restore(&mut self, input: &Value, c: tools::Restore) -> Result<Value, WbError> {
        let mut t = std::time::Instant::now();
        check_id(&c.id)?;
        check_id(&c.destination_id)?;
        if c.at_snapshot.is_some() && c.at_commit.is_some() {
            return Err(WbError::invalid_input(
                "give at most one of at_snapshot or at_commit",
            ));
        }
        let inc = self.incarnation(&c.id)?;
        let req = request_identity(&self.store.root_name(), inc, "workbench_restore", input);
        let dest_record = record_path(&c.destination_id);
        if let Some(twin) = self.case_twin(&c.destination_id)? {
            return Err(WbError::new(
                "destination_exists",
                format!(
                    "workbench {twin:?} exists, and {:?} differs from it only in case or \
                     normalization: the same name to Scribe",
                    c.destination_id
                ),
            ));
        }
        if let Some(row) = self.store.stat(0, &dest_record)? {
            if let Some(v) = self.restored_by(&c.destination_id, &row, &req)? {
                return Ok(v);
            }
            return Err(WbError::new(
                "destination_exists",
                format!(
                    "workbench {:?} exists; restore needs an absent destination",
                    c.destination_id
                ),
            ));
        }
        let at = match (&c.at_snapshot, &c.at_commit) {
            (Some(sel), _) => self.view_at(&c.id, Some(sel))?,
            (_, Some(h)) => {
                let rec = format!("{}/{}", commits_dir(&c.id), h.to_ascii_lowercase());
                self.store
                    .stat(0, &rec)?
                    .filter(|r| r.generation >= inc)
                    .ok_or_else(|| {
                        WbError::new("not_found", format!("no commit {h} of {:?}", c.id))
                    })?
                    .generation
            }
            _ => self.store.head()?,
        };
        let dest_dir = self.store.list_dir(0, &c.destination_id, "", 1)?;
        if !dest_dir.files.is_empty() || !dest_dir.dirs.is_empty() {
            // This same request's earlier attempt (its process killed
            // while the server accepted it) may have been published since
            // the check above: converge on it.
            if let Some(row) = self.store.stat(0, &dest_record)? {
                if let Some(v) = self.restored_by(&c.destination_id, &row, &req)? {
                    return Ok(v);
                }
            }
            return Err(WbError::new(
                "workbench_dir_not_empty",
                format!("the repository has paths under {}/", c.destination_id),
            ));
        }
        crate::phase("restore: checks", &mut t);
        // Members: every file of the source at `at`, bodies reused.
        let skip = restore_manifest_path(&c.id);
        let mut members: Vec<(Vec<u8>, String, Row)> = Vec::new();
        let mut token = String::new();
        loop {
            let page = self.store.list_files(at, &c.id, &token, 1000)?;
            for row in page.files {
                if row.generation < inc || row.path == skip {
                    continue;
                }
                let rel = row.path[c.id.len() + 1..].to_string();
                members.push((path::key(rel.split('/')), rel, row));
            }
            match page.next {
                Some(t) => token = t,
                None => break,
            }
        }
        crate::phase("restore: list", &mut t);
        members.sort_by(|a, b| a.0.cmp(&b.0));
        let mut seal = Sha256::new();
        seal.update(b"nokv.workbench.restore_members.v1\0");
        for (k, _, row) in &members {
            seal.update((k.len() as u64).to_be_bytes());
            seal.update(k);
            seal.update(row.body.content);
            seal.update(row.body.size.to_be_bytes());
        }
        let member_digest = format!("sha256:{}", hex::encode(seal.finalize()));
        let manifest = json!({
            "schema": "nokv.workbench.restore_manifest.v1",
            "source_id": c.id, "destination_id": c.destination_id,
            "source_read_version": at, "at_snapshot": match &c.at_snapshot { Some(SnapRef::Id(n)) => json!(n), Some(SnapRef::Name(s)) => json!(s), None => Value::Null },
            "at_commit": c.at_commit, "member_count": members.len(), "member_digest": member_digest,
        });
        let mut edits = vec![Edit::Put {
            path: dest_record.clone(),
            base: 0,
            body: NewBody::Bytes(
                serde_json::to_vec(&json!({
                    "schema": "nokv.scribe.workbench.v1", "id": c.destination_id,
                    "restored_from": c.id, "restore_request": hex::encode(req),
                }))
                .expect("json"),
            ),
        }];
        for (_, rel, row) in &members {
            edits.push(Edit::Put {
                path: format!("{}/{rel}", c.destination_id),
                base: 0,
                body: NewBody::Existing(row.body.clone()),
            });
        }
        edits.push(Edit::Put {
            path: restore_manifest_path(&c.destination_id),
            base: 0,
            body: NewBody::Bytes(serde_json::to_vec_pretty(&manifest).expect("json")),
        });
        let mut message = format!(
            "nokv workbench_restore {} -> {}\nnokv-request: {}\n",
            c.id,
            c.destination_id,
            hex::encode(req)
        );
        crate::phase("restore: seal+edits", &mut t);
        // Content types recorded for the source's members carry over (the
        // messages of their generations, asked for together).
        let infos = self.generation_messages(members.iter().map(|(_, _, r)| r.generation))?;
        for (_, rel, row) in &members {
            // (a type the extension gives anyway is not repeated)
            if let Some(ct) = super::message_content_type(&infos[&row.generation], &row.path)
                .filter(|ct| *ct != super::content_type_of(rel))
            {
                message.push_str(&format!(
                    "nokv-path-content-type: {ct} {}/{rel}\n",
                    c.destination_id
                ));
            }
        }
        crate::phase("restore: content types", &mut t);
        let published = self.publish_edits(&req, &[at], message, edits)?;
        crate::phase("restore: publish", &mut t);
        match published {
            Ok(version) => {
                let mut v = self.restore_result(&c.destination_id, version)?;
                crate::phase("restore: result", &mut t);
                v["idempotent_replay"] = json!(false);
                Ok(v)
            }
            Err(Refusal::Exists(_) | Refusal::Stale(_)) => {
                // An earlier attempt of this same request may have won.
                if let Some(row) = self.store.stat(0, &dest_record)? {
                    if let Some(v) = self.restored_by(&c.destination_id, &row, &req)? {
                        return Ok(v);
                    }
                }
                Err(WbError::new(
                    "destination_exists",
                    "the destination appeared while restoring",
                ))
            }
            Err(r) => Err(refusal_error(r)),
        }
    }

    /// The replayed result when the destination record `row` was written
    /// by restore request `req`.
    fn restored_by(
        &mut self,
        dest: &str,
        row: &Row,
        req: &[u8; 32],
    ) -> Result<Option<Value>, WbError> {
        let rec = self.read_json(row)?;
        if rec.get("restore_request").and_then(Value::as_str) != Some(hex::encode(req).as_str()) {
            return Ok(None);
        }
        let mut v = self.restore_result(dest, row.generation)?;
        v["idempotent_replay"] = json!(true);
        Ok(Some(v))
    }

    fn restore_result(&mut self, dest: &str, change: u64) -> Result<Value, WbError> {
        let row = self
            .store
            .stat(change, &restore_manifest_path(dest))?
            .ok_or_else(|| WbError::new("storage", "the restore manifest is missing"))?;
        let m = self.read_json(&row)?;
        Ok(json!({
            "id": m.get("source_id"), "destination_id": dest, "incarnation": change, "change": change,
            "source_read_version": m.get("source_read_version"), "member_count": m.get("member_count"),
            "member_digest": m.get("member_digest"), "path": "metadata/restore_manifest.json",
        }))
    }
}

//! `scribe submit`: freeze the opened files into the cache, build the
//! change set, record it as the pending submission, upload what the server
//! lacks, submit with the operation id, and finalize locally.
//!
//! The pending row is committed before the first request that carries its
//! operation id (`ObjectPut`), so a crash or a lost reply at any later
//! point is completed by rerunning `scribe submit`, which replays the same
//! id: the server answers the recorded outcome.

use std::collections::{HashMap, HashSet};

use scribe_format::changeset::{Action, ChangeSet, Entry, FileState, Mode};
use scribe_format::wire::message as m;
use scribe_format::wire::Text;
use scribe_format::{ChunkId, ErrorCode, ObjectId, OperationId};
use scribe_workspace::records::{BaselineRecord, OpenedAction, PendingLock, PendingSubmit};
use scribe_workspace::scan::{fingerprint_of, now_ms};
use scribe_workspace::submit::{abandon, archive_pending, finalize, stale_bases};

use crate::ctx::{self, Ctx, Open};
use crate::error::{hint_for, CliError, CliResult};
use crate::out::{size, Json, Timer};
use crate::remote::{crash_point, Remote};

pub struct SubmitArgs {
    pub message: String,
    pub keep_locks: bool,
    pub paths: Vec<String>,
}

/// What a submission did.
pub struct Submitted {
    pub change: u64,
    pub files: usize,
    pub uploaded_objects: usize,
    pub uploaded_bytes: u64,
    pub secs: f64,
}

pub fn submit_cmd(ctx: &Ctx, a: SubmitArgs) -> CliResult {
    let o = ctx::open(ctx)?;
    let remote = o.remote()?;
    let s = submit(ctx, &o, &remote, a)?;
    if ctx.out.json {
        println!(
            "{}",
            Json::obj(vec![
                ("change", Json::Num(s.change)),
                ("files", Json::Num(s.files as u64)),
                ("uploaded_objects", Json::Num(s.uploaded_objects as u64)),
                ("uploaded_bytes", Json::Num(s.uploaded_bytes)),
            ])
        );
    } else {
        println!("change {}", s.change);
    }
    ctx.out.status(format!(
        "submitted change {}: {} file(s), uploaded {} object(s) ({}) in {:.2} s",
        s.change,
        s.files,
        s.uploaded_objects,
        size(s.uploaded_bytes),
        s.secs
    ));
    Ok(())
}

pub fn submit(ctx: &Ctx, o: &Open, remote: &Remote, a: SubmitArgs) -> CliResult<Submitted> {
    let t = Timer::start();
    // An interrupted candidate is completed first, with its own id.
    if let Some((op, pending)) = o.ws.read()?.pending_all()?.into_iter().next() {
        let current = server_incarnation(remote)?;
        if current != pending.incarnation {
            // A restore changed the incarnation: the outcome decides; an
            // absent one retires the candidate instead of replaying it.
            let repo = o.meta.repository_name.clone();
            if let Some(outcome) = remote.with(|c| c.operation_outcome(&repo, op))? {
                let change = settle(o, &op, &pending, outcome)?;
                return Ok(Submitted {
                    change,
                    files: ChangeSet::decode(&pending.change_set)?.entries.len(),
                    uploaded_objects: 0,
                    uploaded_bytes: 0,
                    secs: t.secs(),
                });
            }
            let path = archive_pending(&o.ws, &op)?;
            return Err(CliError::new(
                "submit_retired",
                format!(
                    "the server was restored since submission {} was prepared and holds no outcome for it; it was not replayed",
                    op.to_hex()
                ),
            )
            .paths(vec![path.display().to_string()])
            .hint("your opened files are untouched: run `scribe sync`, settle what it lists with `scribe resolve`, then submit again"));
        }
        ctx.out.status(format!(
            "completing the interrupted submission {} ({:?})",
            op.to_hex(),
            pending.message
        ));
        let (objects, bytes) = upload(ctx, o, remote, &op, &pending)?;
        let change = send(ctx, o, remote, &op, &pending)?;
        return Ok(Submitted {
            change,
            files: ChangeSet::decode(&pending.change_set)?.entries.len(),
            uploaded_objects: objects,
            uploaded_bytes: bytes,
            secs: t.secs(),
        });
    }
    if a.message.trim().is_empty() {
        return Err(CliError::new("usage", "a submit needs a message")
            .hint("scribe submit -m \"what changed\""));
    }
    let read = o.ws.read()?;
    let deferred = read.deferred_all()?;
    if !deferred.is_empty() {
        return Err(CliError::new(
            "needs_resolve",
            format!(
                "{} path(s) need resolution before submitting",
                deferred.len()
            ),
        )
        .paths(deferred.into_iter().map(|(p, _)| p).collect())
        .hint("settle them with `scribe resolve PATH --ours|--theirs|--merged FILE`"));
    }
    if scribe_workspace::sync::in_progress(&o.ws)?.is_some() {
        return Err(CliError::new("sync_unfinished", "a sync is unfinished")
            .hint("run `scribe sync` first"));
    }
    scribe_workspace::moves::refuse_if_interrupted(&o.ws)?;
    if server_incarnation(remote)? != o.meta.incarnation {
        return Err(CliError::new(
            "incarnation_changed",
            "the server was restored since this workspace last synced",
        )
        .hint("run `scribe sync` first (your opened files are kept)"));
    }
    let stale = stale_bases(&o.ws, o.meta.incarnation)?;
    if !stale.is_empty() {
        return Err(CliError::new(
            "stale_base",
            format!(
                "{} opened path(s) are based on the server's state before a restore",
                stale.len()
            ),
        )
        .paths(stale)
        .hint("settle them with `scribe resolve PATH --ours|--theirs|--merged FILE`, or `scribe revert` them"));
    }
    let filter = ctx::paths(ctx, &o.ws, &a.paths)?;
    let opened: Vec<_> = read
        .opened_all()?
        .into_iter()
        .filter(|(p, _)| {
            filter.is_empty()
                || filter
                    .iter()
                    .any(|f| scribe_format::path::is_under_prefix(p, f))
        })
        .collect();
    if opened.is_empty() {
        return Err(CliError::new("empty_submission", "nothing is opened")
            .hint(hint_for(ErrorCode::EmptySubmission).unwrap_or_default()));
    }
    // A moved destination must travel with its source's delete.
    let selected: HashSet<&str> = opened.iter().map(|(p, _)| p.as_str()).collect();
    for (p, r) in &opened {
        if let Some((src, _)) = &r.moved_from {
            if !selected.contains(src.as_str()) {
                return Err(CliError::new(
                    "refused",
                    format!("{p} was moved from {src}; submit both together"),
                ));
            }
        }
    }
    // Collisions among the paths that would be live.
    let baselines: HashMap<String, _> = read.baselines()?.into_iter().collect();
    let mut keys: HashMap<Vec<u8>, String> = HashMap::new();
    let deleted: HashSet<&str> = opened
        .iter()
        .filter(|(_, r)| r.action == OpenedAction::Delete)
        .map(|(p, _)| p.as_str())
        .collect();
    for p in baselines.keys() {
        if !deleted.contains(p.as_str()) {
            keys.insert(scribe_format::path::collision_key(p), p.clone());
        }
    }
    let mut collisions = Vec::new();
    for (p, r) in &opened {
        if r.action == OpenedAction::Add {
            let k = scribe_format::path::collision_key(p);
            if let Some(other) = keys.get(&k) {
                if other != p {
                    collisions.push(format!("{p} (and {other})"));
                }
            }
            keys.insert(k, p.clone());
        }
    }
    if !collisions.is_empty() {
        return Err(CliError::new(
            "path_collision",
            "paths differ only in case or normalization",
        )
        .paths(collisions)
        .hint(hint_for(ErrorCode::PathCollision).unwrap_or_default()));
    }
    let local_locks: HashMap<String, u64> = read.local_locks()?.into_iter().collect();
    drop(read);
    // Freeze the bytes into the cache.
    let mut to_import = Vec::new();
    let mut missing = Vec::new();
    let mut fingerprints = Vec::new();
    let recorded = now_ms();
    for (p, r) in &opened {
        if matches!(r.action, OpenedAction::Add | OpenedAction::Edit) {
            let full = o.ws.root().join(p);
            match std::fs::symlink_metadata(&full) {
                Ok(meta) if meta.is_file() => {
                    fingerprints.push((p.clone(), fingerprint_of(&meta, recorded)));
                    to_import.push((
                        p.clone(),
                        full,
                        scribe_workspace::platform::is_executable(&meta),
                    ));
                }
                _ => missing.push(p.clone()),
            }
        }
    }
    if !missing.is_empty() {
        return Err(CliError::new(
            "not_found",
            "opened files are missing from the working copy",
        )
        .paths(missing)
        .hint("restore them, `scribe revert` them, or `scribe delete` them"));
    }
    let import_t = Timer::start();
    let imported = freeze(remote, &opened, &baselines, &to_import)?;
    ctx.out.status(format!(
        "froze {} file(s) into the cache in {:.2} s",
        imported.len(),
        import_t.secs()
    ));
    let mut states = HashMap::new();
    for ((p, _, exec), imp) in to_import.iter().zip(&imported) {
        states.insert(
            p.as_str(),
            FileState {
                manifest: imp.manifest_id,
                content: imp.content_id,
                size: imp.size,
                mode: if *exec {
                    Mode::Executable
                } else {
                    Mode::Regular
                },
            },
        );
    }
    let mut entries = Vec::new();
    for (p, r) in &opened {
        let base = baselines.get(p).map(|b| b.change);
        let e = match r.action {
            OpenedAction::Add => {
                let e = Entry::add(p.clone(), states[p.as_str()]);
                match &r.moved_from {
                    Some((src, ch)) => e.moved_from(src.clone(), *ch),
                    None => e,
                }
            }
            OpenedAction::Edit => match base {
                Some(b) => Entry::edit(p.clone(), b, states[p.as_str()]),
                None => Entry::add(p.clone(), states[p.as_str()]),
            },
            OpenedAction::Delete => match base {
                Some(b) => Entry::delete(p.clone(), b),
                None => continue,
            },
            OpenedAction::Keep => match base {
                Some(b) => Entry::keep(p.clone(), b),
                None => continue,
            },
        };
        entries.push(e);
    }
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    let set = ChangeSet::new(entries);
    let cs_bytes = set.encode()?;
    let cs_id = set.id()?;
    let op = OperationId::random();
    let pending = PendingSubmit {
        incarnation: o.meta.incarnation,
        branch: o.meta.branch_id,
        integration: None,
        change_set_id: cs_id,
        change_set: cs_bytes,
        author: o.meta.author.clone(),
        message: a.message.clone(),
        keep_locks: a.keep_locks,
        locks: set
            .entries
            .iter()
            .filter_map(|e| {
                local_locks.get(&e.path).map(|g| PendingLock {
                    path: e.path.clone(),
                    generation: *g,
                })
            })
            .collect(),
        created_ms: now_ms(),
        fingerprints,
    };
    {
        let tx = o.ws.write()?;
        tx.put_pending(&op, &pending)?;
        tx.commit()?;
    }
    crash_point("submit-after-pending");
    let (objects, bytes) = upload(ctx, o, remote, &op, &pending)?;
    crash_point("submit-after-upload");
    let change = send(ctx, o, remote, &op, &pending)?;
    Ok(Submitted {
        change,
        files: set.entries.len(),
        uploaded_objects: objects,
        uploaded_bytes: bytes,
        secs: t.secs(),
    })
}

/// The chunk ids of a baseline's manifest (its previous revision, on the
/// server), when the freeze can use them: from the cache, else downloaded.
/// `None` (plain freeze) when the manifest cannot be had.
fn base_chunks(remote: &Remote, b: &BaselineRecord) -> Option<HashSet<ChunkId>> {
    let bytes = remote.manifest(ObjectId::manifest(b.manifest)).ok()?;
    let m = scribe_format::manifest::ManifestRef::decode(&bytes).ok()?;
    if m.file_content_id() != b.content {
        return None;
    }
    Some(m.chunks().map(|c| c.id).collect())
}

/// Freeze the files of `to_import` into the cache (results in the same
/// order). An edit of a file larger than one chunk is frozen against its
/// baseline's manifest: chunks of the previous revision stay on the server
/// and only the new ones (and the manifest) are written to the cache, so a
/// 1 MiB edit of a synced 1 GiB file writes megabytes, not the file. Other
/// files are imported whole in one publication.
fn freeze(
    remote: &Remote,
    opened: &[(String, scribe_workspace::records::OpenedRecord)],
    baselines: &HashMap<String, BaselineRecord>,
    to_import: &[(String, std::path::PathBuf, bool)],
) -> CliResult<Vec<scribe_objects::ImportedFile>> {
    let actions: HashMap<&str, OpenedAction> =
        opened.iter().map(|(p, r)| (p.as_str(), r.action)).collect();
    let min = u64::from(scribe_format::limits::CHUNK_MIN_BYTES);
    let mut against = Vec::new();
    let mut whole = Vec::new();
    for (i, (p, full, _)) in to_import.iter().enumerate() {
        let big = std::fs::metadata(full).is_ok_and(|m| m.len() > min);
        let base = baselines
            .get(p)
            .filter(|b| b.size > min && big && actions.get(p.as_str()) == Some(&OpenedAction::Edit))
            .and_then(|b| base_chunks(remote, b));
        match base {
            Some(set) => against.push((i, set)),
            None => whole.push(i),
        }
    }
    let mut out: Vec<Option<scribe_objects::ImportedFile>> = vec![None; to_import.len()];
    let files: Vec<&std::path::Path> = whole.iter().map(|&i| to_import[i].1.as_path()).collect();
    for (&i, imp) in whole.iter().zip(remote.cache().import_files(&files)?) {
        out[i] = Some(imp);
    }
    for (i, set) in against {
        out[i] = Some(
            remote
                .cache()
                .import_file_against(&to_import[i].1, &set)?
                .file,
        );
    }
    crash_point("submit-after-freeze");
    Ok(out.into_iter().flatten().collect())
}

/// A chunk the cache does not hold (a freeze against the base left it on
/// the server) but the server now lacks: read it from the working file,
/// which still holds it unless edited since the freeze.
fn chunk_from_working_file(
    o: &Open,
    places: &HashMap<ObjectId, (String, u64, u32)>,
    id: &ObjectId,
) -> CliResult<Vec<u8>> {
    use std::io::{Read, Seek};
    let Some((path, offset, len)) = places.get(id) else {
        return Err(CliError::new(
            "missing_objects",
            format!("object {id} is neither in the cache nor on the server"),
        ));
    };
    let full = o.ws.root().join(path);
    let mut data = vec![0u8; *len as usize];
    let read = std::fs::File::open(&full).and_then(|mut f| {
        f.seek(std::io::SeekFrom::Start(*offset))?;
        f.read_exact(&mut data)
    });
    if read.is_ok() && ObjectId::chunk(ChunkId(*blake3::hash(&data).as_bytes())) == *id {
        return Ok(data);
    }
    Err(CliError::new(
        "missing_objects",
        format!(
            "the server lacks chunk {id} of {path}'s previous revision, and {path} changed \
             since it was frozen for this submission"
        ),
    )
    .paths(vec![path.clone()])
    .hint("the server lost objects it held: ask its administrator to run `scribe-server verify`"))
}

/// Send every object of the candidate the server lacks: chunks, then
/// manifests, then the change set.
fn upload(
    ctx: &Ctx,
    o: &Open,
    remote: &Remote,
    op: &OperationId,
    p: &PendingSubmit,
) -> CliResult<(usize, u64)> {
    let set = ChangeSet::decode(&p.change_set)?;
    let mut chunks = Vec::new();
    let mut manifests = Vec::new();
    // Where each chunk lies in its working file (for chunks a freeze
    // against the base left on the server).
    let mut places: HashMap<ObjectId, (String, u64, u32)> = HashMap::new();
    for e in &set.entries {
        if let Some(s) = e.state {
            let mid = ObjectId::manifest(s.manifest);
            let mbytes = remote.cache().get(&mid)?;
            let mref = scribe_format::manifest::ManifestRef::decode(&mbytes)?;
            let mut offset = 0u64;
            for c in mref.chunks() {
                let oid = ObjectId::chunk(c.id);
                chunks.push(oid);
                places
                    .entry(oid)
                    .or_insert_with(|| (e.path.clone(), offset, c.length));
                offset += u64::from(c.length);
            }
            manifests.push(mid);
        }
    }
    let cs = ObjectId::change_set(p.change_set_id);
    let mut all: Vec<ObjectId> = Vec::new();
    let mut seen = HashSet::new();
    for id in chunks.into_iter().chain(manifests).chain([cs]) {
        if seen.insert(id) {
            all.push(id);
        }
    }
    let repo = o.meta.repository_name.clone();
    let missing: HashSet<ObjectId> = remote
        .with(|c| c.objects_missing(&repo, &all))?
        .into_iter()
        .collect();
    let mut bytes = 0u64;
    let mut n = 0;
    let ws_id = o.meta.workspace_id;
    let bar = ctx.out.bytes_bar(missing.len() as u64, "upload");
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg:10} [{bar:30}] {pos}/{len} objects {eta}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    // Small objects travel in groups (one pin transaction and one durable
    // publication on the server per group); large ones in pieces.
    let mut group: Vec<m::ObjectPiece> = Vec::new();
    let mut group_bytes = 0usize;
    let flush = |group: &mut Vec<m::ObjectPiece>| -> CliResult<()> {
        if group.is_empty() {
            return Ok(());
        }
        let objects = std::mem::take(group);
        let count = objects.len() as u64;
        remote.with(|c| {
            c.object_put_many(m::ObjectPutMany {
                repo: repo.clone(),
                operation: *op,
                workspace: ws_id,
                objects,
            })
        })?;
        bar.inc(count);
        Ok(())
    };
    for id in all.iter().filter(|id| missing.contains(id)) {
        let data = if *id == cs {
            p.change_set.clone()
        } else {
            match remote.cache().get(id) {
                Ok(d) => d,
                Err(scribe_objects::StoreError::NotFound { .. }) => {
                    chunk_from_working_file(o, &places, id)?
                }
                Err(e) => return Err(e.into()),
            }
        };
        bytes += data.len() as u64;
        n += 1;
        if data.len() > scribe_server::client::SMALL_OBJECT_BYTES {
            remote.with(|c| c.put_object(&repo, ws_id, *op, *id, &data))?;
            bar.inc(1);
            continue;
        }
        if group_bytes + data.len() > m::MAX_OBJECT_DATA_PER_FRAME as usize || group.len() >= 4096 {
            flush(&mut group)?;
            group_bytes = 0;
        }
        group_bytes += data.len();
        group.push(m::ObjectPiece {
            id: *id,
            data: scribe_format::wire::Bytes(data),
        });
    }
    flush(&mut group)?;
    bar.finish_and_clear();
    Ok((n, bytes))
}

/// Submit (or replay) the candidate and settle its outcome locally.
fn send(
    ctx: &Ctx,
    o: &Open,
    remote: &Remote,
    op: &OperationId,
    p: &PendingSubmit,
) -> CliResult<u64> {
    let repo = o.meta.repository_name.clone();
    let req = m::Submit {
        repo: repo.clone(),
        operation: *op,
        workspace: o.meta.workspace_id,
        branch: p.branch,
        change_set: p.change_set_id,
        author: p.author.clone(),
        message: Text(p.message.clone()),
        keep_locks: p.keep_locks,
        timestamp_ms: p.created_ms,
    };
    let mut outcome = remote.with(|c| c.submit(req.clone()))?;
    if outcome.code == ErrorCode::MissingObjects.number() {
        upload(ctx, o, remote, op, p)?;
        outcome = remote.with(|c| c.submit(req.clone()))?;
    }
    crash_point("submit-after-reply");
    settle(o, op, p, outcome)
}

/// The repository's current incarnation on the server.
pub fn server_incarnation(remote: &Remote) -> CliResult<[u8; 16]> {
    Ok(super::sync::repo_info(remote)?.incarnation)
}

/// Settle a recorded outcome locally: accepted → finalize; refused →
/// forget the candidate; not final → keep it for a retry.
fn settle(o: &Open, op: &OperationId, p: &PendingSubmit, outcome: m::Outcome) -> CliResult<u64> {
    if outcome.code == 0 {
        let f = finalize(&o.ws, op, p, outcome.change)?;
        if o.meta.readonly {
            for path in &f.updated {
                let full = o.ws.root().join(path);
                let exec = std::fs::metadata(&full)
                    .map(|m| scribe_workspace::platform::is_executable(&m))
                    .unwrap_or(false);
                let _ = scribe_workspace::platform::set_file_mode(&full, exec, true);
            }
        }
        return Ok(outcome.change);
    }
    let code = ErrorCode::from_number(outcome.code).unwrap_or(ErrorCode::Internal);
    if code == ErrorCode::MissingObjects || code == ErrorCode::Internal || code == ErrorCode::Busy {
        // Not final: keep the candidate for a retry with the same id.
        return Err(CliError::new(code.name(), outcome.detail)
            .hint("rerun `scribe submit` to retry the same submission"));
    }
    abandon(&o.ws, op)?;
    let mut err = CliError::new(
        code.name(),
        format!("the server refused the submission: {}", outcome.detail),
    )
    .paths(outcome.paths);
    if let Some(h) = hint_for(code) {
        err = err.hint(h);
    }
    let _ = Action::Add;
    Err(err)
}

//! The `nokv` binary: `nokv --server URL --repo NAME [--agent-root ROOT]
//! workbench <tool> ['<json>']` prints the tool's JSON result on stdout
//! (exit 0) or a JSON error on stdout (exit 1; 2 for usage); the JSON
//! input comes from stdin when no argument is given. `nokv schema` prints
//! the 18 tools' input schemas.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use nokv_workbench::scribe::ScribeStore;
use nokv_workbench::workbench::sandbox::{
    hash_file, split_section, LocalFile, LocalSource, Materialized, MaterializedFile,
    MATERIALIZED_SCHEMA,
};
use nokv_workbench::{tools, WbError, Workbench};
use scribe_client::failpoints::Failpoints;

#[derive(Parser)]
#[command(
    name = "nokv",
    version,
    about = "NoKV's Workbench over a Scribe repository"
)]
struct Cli {
    /// The Scribe server: scribe://HOST:PORT, scribes://HOST:PORT or a data-root path.
    #[arg(long, global = true)]
    server: Option<String>,
    /// The repository that is the agent root.
    #[arg(long, global = true)]
    repo: Option<String>,
    /// The agent id (presentation paths /agents/{ROOT}/wb/...; the author of
    /// changes): the rule of a workbench id (one path component).
    #[arg(long, global = true, default_value = "agent", value_parser = agent_root)]
    agent_root: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one tool: `nokv workbench workbench_put_file '{"id":..}'`.
    Workbench {
        /// The tool name (for example workbench_create).
        tool: String,
        /// The JSON input (read from stdin when absent).
        json: Option<String>,
    },
    /// Print every tool's name and JSON input schema.
    Schema,
    /// Serve the tools over the Model Context Protocol on stdin/stdout
    /// (and reap expired snapshots on a schedule).
    Mcp {
        /// Seconds between sweeps of the snapshot reaper over every
        /// workbench (the first at start); 0 turns the reaper off.
        #[arg(long, default_value_t = 300)]
        reap_every_secs: u64,
    },
    /// Write every file of workbench ID into DIR/<section>/<path>
    /// (content types in DIR/.nokv/content-types.json). Refuses to
    /// overwrite local work (materialize_conflict) unless --force.
    Materialize {
        id: String,
        dir: PathBuf,
        /// Discard local changes: overwrite (or remove) files changed in
        /// DIR since the last materialize, and files materialize did not
        /// write.
        #[arg(long)]
        force: bool,
    },
    /// Publish DIR/<section>/<path> into workbench ID in one change.
    Collect { dir: PathBuf, id: String },
}

/// `--agent-root`: one component of the presentation paths, so the rule of
/// a workbench id (no empty name, `/`, `..` or control character).
fn agent_root(s: &str) -> Result<String, String> {
    nokv_workbench::path::check_id(s)
        .map(|()| s.to_string())
        .map_err(|_| {
            "an agent root is an ASCII letter or digit, then letters, digits, `_` or `-`, at most 128 bytes".to_string()
        })
}

fn emit(v: &serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
}

/// `v` on stdout; whether it was written (the caller got the answer).
fn emit_answer(v: &serde_json::Value) -> bool {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{v}").and_then(|()| out.flush()).is_ok()
}

/// The facade over `store`, keeping pending appends and edits in the
/// agent root's state directory (`nokv_workbench::journal::state_dir`;
/// created, and its failure reported by name, at the first append or
/// edit), so a process killed before its answer was printed leaves its
/// attempt to be found by the retry; in memory when no state directory
/// can be named.
fn facade(store: ScribeStore, server: &str, repo: &str, agent: &str) -> Workbench<ScribeStore> {
    use nokv_workbench::journal::{state_dir, Pending};
    let pending = match state_dir(server, repo, agent) {
        Some(dir) => Pending::dir(&dir),
        None => Pending::memory(),
    };
    Workbench::new(store, agent).with_pending(pending)
}

fn fail(e: WbError) -> ExitCode {
    emit(&e.to_json());
    ExitCode::from(1)
}

fn open(cli: &Cli) -> Result<Workbench<ScribeStore>, (WbError, u8)> {
    let (Some(server), Some(repo)) = (&cli.server, &cli.repo) else {
        return Err((
            WbError::invalid_input("--server and --repo are required"),
            2,
        ));
    };
    let store = open_store(server, repo, &cli.agent_root).map_err(|e| (e, 1))?;
    Ok(Workbench::new(store, &cli.agent_root))
}

/// The agent root `repo` at `server`, reached as `scribe` reaches it
/// (`ClientOptions::from_env`: `SCRIBE_CA_FILE` or the stored login's CA,
/// `SCRIBE_CREDENTIAL` or the stored login on a team server, the
/// timeouts); a test build kills itself at `NOKV_TEST_CRASH_AT` (crash
/// tests).
fn open_store(server: &str, repo: &str, agent: &str) -> Result<ScribeStore, WbError> {
    let opts =
        scribe_client::ClientOptions::from_env().map_err(|e| WbError::new("not_configured", e))?;
    let failpoints = if Failpoints::ENABLED {
        Failpoints::new(std::env::var("NOKV_TEST_CRASH_AT").ok(), None)
    } else {
        Failpoints::default()
    };
    // A data root on this machine serves one process at a time: a call
    // that finds it held by another `nokv` (or `scribe`) waits for it a
    // little, as two commands run one after the other by a script would.
    let local = !server.contains("://") || server.starts_with("file://");
    let deadline = std::time::Instant::now() + LOCAL_ROOT_WAIT;
    loop {
        match ScribeStore::open(server, repo, agent, &opts) {
            Err(e) if local && e.code == "unavailable" && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            other => return Ok(other?.with_failpoints(failpoints)),
        }
    }
}

/// How long a command waits for a data root (a path `--server`) that
/// another process holds.
const LOCAL_ROOT_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

fn io_error(what: &Path, e: std::io::Error) -> WbError {
    WbError::new("storage", format!("{}: {e}", what.display()))
}

/// Bytes read per request batch of a body (a window of its chunks).
const READ_WINDOW: u64 = 16 << 20;

/// `rel` (`/`-separated) under `dir`, its missing directories created
/// when `create` (else only checked: nothing is written). Refused by name
/// when a component below `dir` is a symbolic link or not a directory, or
/// the file itself is a link or not a regular file: materialize never
/// writes (or removes) through a link a program left in the directory,
/// and [`write_new`] replaces the path (a hard link too), never what it
/// points to. (`dir` itself is the caller's choice.)
fn checked_dest(dir: &Path, rel: &str, create: bool) -> Result<PathBuf, WbError> {
    let (p, meta) = checked_parent(dir, rel, create)?;
    let refuse = |what: &str| {
        Err(WbError::invalid_input(format!(
            "{}: {what}; materialize never writes through or over it (remove it and materialize again)",
            p.display()
        )))
    };
    match meta {
        Some(m) if m.file_type().is_symlink() => refuse("a symbolic link"),
        Some(m) if !m.is_file() => refuse("not a regular file"),
        _ => Ok(p),
    }
}

/// `rel` under `dir` and what is there now (`None`: nothing), its
/// directories checked as [`checked_dest`] does (and created when
/// `create`); the file itself is not judged.
fn checked_parent(
    dir: &Path,
    rel: &str,
    create: bool,
) -> Result<(PathBuf, Option<std::fs::Metadata>), WbError> {
    let parts: Vec<&str> = rel.split('/').collect();
    let mut p = dir.to_path_buf();
    for (i, c) in parts.iter().enumerate() {
        p.push(c);
        let last = i + 1 == parts.len();
        let refuse = |what: &str| {
            Err(WbError::invalid_input(format!(
                "{}: {what}; materialize never writes through or over it (remove it and materialize again)",
                p.display()
            )))
        };
        match std::fs::symlink_metadata(&p) {
            Ok(m) if last => return Ok((p, Some(m))),
            Ok(m) if m.file_type().is_symlink() => return refuse("a symbolic link"),
            Ok(m) if !m.is_dir() => return refuse("not a directory"),
            Ok(_) => {}
            // `create_dir` never follows a link (one made since fails).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !last => {
                if create {
                    match std::fs::create_dir(&p) {
                        Ok(()) => {}
                        // Made meanwhile (materialize's two download lanes
                        // both make `.nokv/` for their scratch files): judged
                        // again, as if it had been there.
                        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                            match std::fs::symlink_metadata(&p) {
                                Ok(m) if m.file_type().is_symlink() => {
                                    return refuse("a symbolic link")
                                }
                                Ok(m) if !m.is_dir() => return refuse("not a directory"),
                                Ok(_) => {}
                                Err(e) => return Err(io_error(&p, e)),
                            }
                        }
                        Err(e) => return Err(io_error(&p, e)),
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((p, None)),
            Err(e) => return Err(io_error(&p, e)),
        }
    }
    Ok((p, None))
}

/// As [`checked_dest`] (nothing created), judging `DIR/rel` as it will be
/// once the files `going` are removed (with the directories they leave
/// empty): a component that is one of them, or a directory holding only
/// them, counts as absent. Returns the path and the size of the regular
/// file there (`None`: nothing there, or nothing once they are gone).
fn checked_dest_after(
    dir: &Path,
    rel: &str,
    going: &std::collections::HashSet<PathBuf>,
) -> Result<(PathBuf, Option<u64>), WbError> {
    if !going.is_empty() {
        // (Every component above a file in `going` was checked when it was
        // chosen. A directory above the file that goes away is made again.)
        let parts: Vec<&str> = rel.split('/').collect();
        let mut p = dir.to_path_buf();
        for (i, c) in parts.iter().enumerate() {
            p.push(c);
            let last = i + 1 == parts.len();
            if going.contains(&p) || (last && goes_away(&p, going)?) {
                return Ok((dir.join(rel), None));
            }
        }
    }
    let dest = checked_dest(dir, rel, false)?;
    match std::fs::symlink_metadata(&dest) {
        Ok(m) => Ok((dest, Some(m.len()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((dest, None)),
        Err(e) => Err(io_error(&dest, e)),
    }
}

/// Whether `p` is a directory (not a link) that removing the files `going`
/// empties and removes: it holds only such files and directories that go
/// away likewise (an empty one stays, and so does its parent).
fn goes_away(p: &Path, going: &std::collections::HashSet<PathBuf>) -> Result<bool, WbError> {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Ok(false),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(io_error(p, e)),
    }
    let mut any = false;
    for e in std::fs::read_dir(p).map_err(|e| io_error(p, e))? {
        let e = e.map_err(|e| io_error(p, e))?.path();
        let m = std::fs::symlink_metadata(&e).map_err(|err| io_error(&e, err))?;
        let gone = if m.is_file() {
            going.contains(&e)
        } else {
            m.is_dir() && goes_away(&e, going)?
        };
        if !gone {
            return Ok(false);
        }
        any = true;
    }
    Ok(any)
}

/// Write `dest` (a [`checked_dest`] under `dir`) as a new file: the bytes
/// go to a fresh file under `DIR/.nokv/` (created exclusively, so never
/// through a link; collect never reads there), renamed over `dest` when
/// complete. Returns the bytes written.
fn write_new(
    dir: &Path,
    dest: &Path,
    size: u64,
    mut read: impl FnMut(u64) -> Result<Vec<u8>, WbError>,
) -> Result<u64, WbError> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let scratch = checked_dest(dir, ".nokv/partial", true)?;
    let (tmp, mut out) = loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let tmp = scratch.with_file_name(format!("partial-{}-{n}", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
        {
            Ok(f) => break (tmp, f),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io_error(&tmp, e)),
        }
    };
    let written = (|| {
        let mut offset = 0;
        while offset < size {
            let piece = read(offset)?;
            if piece.is_empty() {
                break;
            }
            out.write_all(&piece).map_err(|e| io_error(dest, e))?;
            offset += piece.len() as u64;
        }
        drop(out);
        std::fs::rename(&tmp, dest).map_err(|e| io_error(dest, e))?;
        Ok(offset)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Write `bytes` to `DIR/rel` as [`write_new`] does.
fn write_bytes(dir: &Path, rel: &str, bytes: &[u8]) -> Result<(), WbError> {
    let dest = checked_dest(dir, rel, true)?;
    write_new(dir, &dest, bytes.len() as u64, |o| {
        Ok(bytes[o as usize..].to_vec())
    })?;
    Ok(())
}

/// What materialize finds at one destination before it writes anything.
enum Found {
    /// Nothing there, or bytes that are not the workbench's: write it.
    Write,
    /// The workbench's bytes already: left as it is.
    Same,
}

/// A local file's BLAKE3, computed at most once, and only when asked
/// (stat first: a size that agrees with nothing needs no hash).
struct Local<'a> {
    path: &'a Path,
    size: u64,
    hash: Option<[u8; 32]>,
}

impl Local<'_> {
    /// Whether the file holds `content` (BLAKE3) of `want` bytes.
    fn holds(&mut self, content: &[u8; 32], want: u64) -> Result<bool, WbError> {
        if self.size != want {
            return Ok(false);
        }
        let hash = match self.hash {
            Some(h) => h,
            None => {
                let (h, n) = hash_file(self.path)?;
                if n != self.size {
                    // Changed while read: it matches nothing.
                    return Ok(false);
                }
                *self.hash.insert(h)
            }
        };
        Ok(hash == *content)
    }

    /// Whether the file is what materialize wrote there (`r`; a record
    /// whose hash is not hex matches nothing).
    fn holds_written(&mut self, r: &MaterializedFile) -> Result<bool, WbError> {
        let mut content = [0u8; 32];
        if hex::decode_to_slice(&r.blake3, &mut content).is_err() {
            return Ok(false);
        }
        self.holds(&content, r.size)
    }
}

/// Whether a workbench file's path falls under `DIR/.nokv/` (materialize's
/// own records), so that the directory cannot hold it.
fn under_local_records(key: &str) -> bool {
    key.split('/')
        .next()
        .is_some_and(|c| c.eq_ignore_ascii_case(".nokv"))
}

/// Materialize workbench `id` into `dir`; with `extra` (a second
/// connection, TCP or TLS) the files are downloaded on two lanes at once,
/// as `scribe sync` uses more than one connection.
///
/// Nothing local is lost: every destination is judged before anything is
/// written. With the record of an earlier materialize of this workbench
/// (`DIR/.nokv/materialized.json`), a file changed (or removed) here since
/// then whose workbench version is not what is here now is a conflict;
/// without one, a file here that is not the workbench's version is. Any
/// conflict refuses the whole materialize (`materialize_conflict` naming
/// each path), unless `force` (the local changes are discarded, each named
/// in `discarded`). A file the record names that the workbench no longer
/// has is removed when unchanged here, else kept (named in `kept`, still in
/// the record so that collect sees the conflict).
fn materialize(
    wb: &mut Workbench<ScribeStore>,
    extra: Option<ScribeStore>,
    id: &str,
    dir: &Path,
    force: bool,
) -> Result<serde_json::Value, WbError> {
    use nokv_workbench::store::Store;
    let (files, skipped): (Vec<_>, Vec<_>) = wb
        .files(id)?
        .into_iter()
        .partition(|f| !under_local_records(&f.key()));
    let mut record = wb.materialized(id, &files)?;
    std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
    let earlier = match read_record(
        dir,
        "remove it, or pass --force to materialize over it as if it were not there",
    ) {
        Ok(Some(r))
            if r.schema == MATERIALIZED_SCHEMA
                && r.id == record.id
                && r.incarnation == record.incarnation =>
        {
            Some(r)
        }
        Ok(Some(_)) if force => None,
        Err(e) if force && e.code == "invalid_input" => None,
        Ok(Some(r)) => {
            return Err(WbError::invalid_input(format!(
                "{}: the directory holds workbench {:?} (incarnation {}), not {id:?} (incarnation {}); materialize into another directory, or pass --force to replace the record (the files it names are then left as they are, as files materialize did not write)",
                dir.join(RECORD).display(),
                r.id,
                r.incarnation,
                record.incarnation
            )))
        }
        Err(e) => return Err(e),
        Ok(None) => None,
    };
    let was = |key: &str| earlier.as_ref().and_then(|m| m.files.get(key));
    let mut discarded: Vec<String> = Vec::new();
    // Files written earlier that the workbench no longer has.
    let mut removals: Vec<(String, PathBuf)> = Vec::new();
    let mut kept: Vec<String> = Vec::new();
    if let Some(m) = &earlier {
        for (key, r) in &m.files {
            if record.files.contains_key(key) || under_local_records(key) {
                continue;
            }
            if scribe_format::path::validate(key).is_err() {
                return Err(WbError::invalid_input(format!(
                    "{}: the materialize record names {key:?}, not a path; remove it, or pass --force",
                    dir.join(RECORD).display()
                )));
            }
            let (dest, meta) = checked_parent(dir, key, false)?;
            match meta {
                None => {}
                Some(meta) if meta.is_file() => {
                    let mut local = Local {
                        path: &dest,
                        size: meta.len(),
                        hash: None,
                    };
                    if local.holds_written(r)? {
                        removals.push((key.clone(), dest));
                    } else if force {
                        discarded.push(key.clone());
                        removals.push((key.clone(), dest));
                    } else {
                        kept.push(key.clone());
                        record.files.insert(key.clone(), r.clone());
                    }
                }
                // A link or a directory made since is not materialize's.
                Some(_) => {
                    kept.push(key.clone());
                    record.files.insert(key.clone(), r.clone());
                }
            }
        }
    }
    // What the removals take away: a workbench file may now be where one
    // of them is (a file that became a directory, or the reverse).
    let going: std::collections::HashSet<PathBuf> =
        removals.iter().map(|(_, p)| p.clone()).collect();
    // Every destination judged before anything is written.
    let mut found = Vec::with_capacity(files.len());
    let mut conflicts: Vec<String> = Vec::new();
    for f in &files {
        let key = f.key();
        let (dest, here) = checked_dest_after(dir, &key, &going)?;
        let recorded = was(&key);
        let verdict = match (here, recorded) {
            // Absent and never written here: new.
            (None, None) => Found::Write,
            // Written here and since removed: a deletion collect has not
            // published.
            (None, Some(_)) => {
                if force {
                    discarded.push(key);
                } else {
                    conflicts.push(format!("{key} (removed here)"));
                }
                Found::Write
            }
            (Some(size), recorded) => {
                let mut local = Local {
                    path: &dest,
                    size,
                    hash: None,
                };
                if local.holds(&f.body.content, f.body.size)? {
                    Found::Same
                } else if match recorded {
                    Some(r) => local.holds_written(r)?,
                    None => false,
                } {
                    // Unchanged here since materialize: the new version.
                    Found::Write
                } else {
                    if force {
                        discarded.push(key);
                    } else if recorded.is_some() {
                        conflicts.push(format!("{key} (changed here)"));
                    } else {
                        conflicts.push(format!("{key} (here, not written by materialize)"));
                    }
                    Found::Write
                }
            }
        };
        found.push((dest, verdict));
    }
    if !conflicts.is_empty() {
        conflicts.sort();
        return Err(WbError::new(
            "materialize_conflict",
            format!(
                "local work in {} that materialize of workbench {id:?} would overwrite, nothing was written: {}; collect it first, move it aside, or pass --force to discard it",
                dir.display(),
                conflicts.join(", ")
            ),
        ));
    }
    let mut types = BTreeMap::new();
    for f in &files {
        types.insert(f.key(), f.content_type.clone());
    }
    let mut dests = Vec::with_capacity(files.len());
    let mut write = Vec::new();
    for (i, (dest, verdict)) in found.into_iter().enumerate() {
        if matches!(verdict, Found::Write) {
            write.push(i);
        }
        dests.push(dest);
    }
    let unchanged = files.len() - write.len();
    // Largest first, each to the lane with fewer bytes so far.
    write.sort_by_key(|&i| std::cmp::Reverse(files[i].body.size));
    let (mut lanes, mut load): ([Vec<usize>; 2], [u64; 2]) = Default::default();
    for &i in &write {
        let l = usize::from(extra.is_some() && load[1] < load[0]);
        lanes[l].push(i);
        load[l] += files[i].body.size;
    }
    // Removals first: a file written next may take the place of one.
    let mut removed = Vec::with_capacity(removals.len());
    for (key, p) in removals {
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error(&p, e)),
        }
        // Directories left empty go too (never `dir` itself; a directory
        // that still holds anything stays).
        let mut parent = p.parent();
        while let Some(d) = parent.filter(|d| *d != dir && d.starts_with(dir)) {
            if std::fs::remove_dir(d).is_err() {
                break;
            }
            parent = d.parent();
        }
        removed.push(key);
    }
    // The directories, checked again as they are made.
    for &i in &write {
        checked_dest(dir, &files[i].key(), true)?;
    }
    let dest = |i: usize| &dests[i];
    let [first, second] = lanes;
    let bytes = std::thread::scope(|s| -> Result<u64, WbError> {
        let other = extra.map(|mut store| {
            let (files, dest) = (&files, &dest);
            s.spawn(move || -> Result<u64, WbError> {
                let mut n = 0;
                for i in second {
                    let b = &files[i].body;
                    n += write_new(dir, dest(i), b.size, |o| store.read(b, o, READ_WINDOW))?;
                }
                Ok(n)
            })
        });
        let mut n = 0;
        for i in first {
            let b = &files[i].body;
            n += write_new(dir, dest(i), b.size, |o| wb.read_body(b, o, READ_WINDOW))?;
        }
        if let Some(h) = other {
            n += h.join().expect("download lane")?;
        }
        Ok(n)
    })?;
    write_bytes(
        dir,
        ".nokv/content-types.json",
        &serde_json::to_vec_pretty(&types).expect("json"),
    )?;
    write_record(dir, &record)?;
    discarded.sort();
    kept.sort();
    let skipped: Vec<String> = skipped.iter().map(|f| f.key()).collect();
    Ok(serde_json::json!({
        "id": id, "dir": dir.display().to_string(), "files": files.len(),
        "written": write.len(), "unchanged": unchanged, "bytes": bytes,
        "removed": removed, "kept": kept, "discarded": discarded, "skipped": skipped,
    }))
}

/// Where materialize records what it wrote (collect reads it, never
/// collects it).
const RECORD: &str = ".nokv/materialized.json";

fn write_record(dir: &Path, record: &Materialized) -> Result<(), WbError> {
    write_bytes(
        dir,
        RECORD,
        &serde_json::to_vec_pretty(record).expect("json"),
    )
}

/// The materialize record of `dir`, if it has one; one that does not
/// parse is refused, the message ending with `remedy`.
fn read_record(dir: &Path, remedy: &str) -> Result<Option<Materialized>, WbError> {
    let p = dir.join(RECORD);
    match std::fs::read(&p) {
        Ok(b) => serde_json::from_slice(&b).map(Some).map_err(|e| {
            WbError::invalid_input(format!(
                "{}: not a materialize record ({e}); {remedy}",
                p.display()
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error(&p, e)),
    }
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), WbError> {
    for e in std::fs::read_dir(dir).map_err(|e| io_error(dir, e))? {
        let e = e.map_err(|e| io_error(dir, e))?;
        let p = e.path();
        let ty = e.file_type().map_err(|e| io_error(&p, e))?;
        if ty.is_dir() {
            if dir == root && e.file_name() == ".nokv" {
                continue;
            }
            walk(root, &p, out)?;
        } else if ty.is_file() {
            out.push(p);
        } else {
            return Err(WbError::invalid_input(format!(
                "{}: only regular files and directories can be collected",
                p.display()
            )));
        }
    }
    Ok(())
}

fn collect(
    wb: &mut Workbench<ScribeStore>,
    dir: &Path,
    id: &str,
) -> Result<serde_json::Value, WbError> {
    let ct_file = dir.join(".nokv/content-types.json");
    let types: BTreeMap<String, String> = match std::fs::read(&ct_file) {
        Ok(b) => serde_json::from_slice(&b)
            .map_err(|e| WbError::invalid_input(format!("{}: {e}", ct_file.display())))?,
        Err(_) => BTreeMap::new(),
    };
    let mut t = std::time::Instant::now();
    let mut paths = Vec::new();
    walk(dir, dir, &mut paths)?;
    let (mut files, mut outside) = (Vec::new(), Vec::new());
    for p in paths {
        let rel = p.strip_prefix(dir).expect("under dir");
        let rel = rel
            .to_str()
            .ok_or_else(|| WbError::invalid_input(format!("{}: not UTF-8", p.display())))?
            .replace(std::path::MAIN_SEPARATOR, "/");
        let Some((section, path)) = split_section(&rel) else {
            // Outside the five sections: a person's file materialize
            // wrote, never published (collect_since checks it is as it was).
            outside.push((rel, p));
            continue;
        };
        let size = std::fs::metadata(&p).map_err(|e| io_error(&p, e))?.len();
        files.push(LocalFile {
            section,
            path: path.to_string(),
            source: LocalSource::File { path: p, size },
            content_type: types.get(&rel).cloned(),
        });
    }
    nokv_workbench::phase("collect: walk", &mut t);
    let mut record = read_record(dir, "remove it to collect without it")?;
    let mut v = wb.collect_since(id, files, outside, record.as_mut())?;
    if let Some(r) = &record {
        // Published already: a record left behind only costs a later
        // collect a comparison with the live bodies (identical: unchanged).
        if let Err(e) = write_record(dir, r) {
            v["record_not_updated"] = serde_json::json!(e.to_string());
        }
    }
    Ok(v)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match &cli.command {
        Command::Materialize { id, dir, .. } | Command::Collect { dir, id } => {
            let mut wb = match open(&cli) {
                Ok(wb) => wb,
                Err((e, code)) => {
                    emit(&e.to_json());
                    return ExitCode::from(code);
                }
            };
            let r = if let Command::Materialize { force, .. } = cli.command {
                // A second lane over the network (a data-root path is
                // opened by one process only).
                let server = cli.server.as_deref().unwrap_or("");
                let extra = if server.starts_with("scribe://") || server.starts_with("scribes://") {
                    let repo = cli.repo.as_deref().unwrap_or("");
                    open_store(server, repo, &cli.agent_root).ok()
                } else {
                    None
                };
                materialize(&mut wb, extra, id, dir, force)
            } else {
                collect(&mut wb, dir, id)
            };
            match r {
                Ok(v) => {
                    emit(&v);
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
        _ => run(cli),
    }
}

fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Materialize { .. } | Command::Collect { .. } => unreachable!("handled in main"),
        Command::Mcp { reap_every_secs } => {
            let (Some(server), Some(repo)) = (cli.server, cli.repo) else {
                eprintln!("nokv mcp: --server and --repo are required");
                return ExitCode::from(2);
            };
            // A store that cannot be opened answers each call with the
            // error and is tried again at the next call.
            let agent = cli.agent_root.clone();
            let session = nokv_workbench::mcp::Session::opening(move || {
                Ok(facade(
                    open_store(&server, &repo, &agent)?,
                    &server,
                    &repo,
                    &agent,
                ))
            });
            let stdout = std::io::stdout().lock();
            let served = if reap_every_secs == 0 {
                nokv_workbench::mcp::serve(session, std::io::stdin().lock(), stdout)
            } else {
                let schedule = nokv_workbench::mcp::ReapSchedule {
                    every_ms: reap_every_secs.saturating_mul(1000),
                    tick: std::time::Duration::from_secs(1),
                };
                let stdin = std::io::BufReader::new(std::io::stdin());
                nokv_workbench::mcp::serve_scheduled(session, stdin, stdout, schedule)
            };
            match served {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("nokv mcp: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Command::Schema => {
            emit(&tools::all_schemas());
            ExitCode::SUCCESS
        }
        Command::Workbench { tool, json } => {
            let text = match json {
                Some(t) => t,
                // Bounded as a `nokv mcp` line: a longer input is refused
                // after MAX_INPUT_BYTES + 1 bytes, never read whole.
                None => match nokv_workbench::mcp::read_input(
                    std::io::stdin().lock(),
                    nokv_workbench::mcp::MAX_INPUT_BYTES,
                ) {
                    Ok(s) => s,
                    Err(e) => return fail(e),
                },
            };
            if let Some(lit) = nokv_workbench::identity::lossy_number(&text) {
                return fail(WbError::invalid_input(nokv_workbench::mcp::lossy_message(
                    lit,
                )));
            }
            let input: serde_json::Value = match serde_json::from_str(&text) {
                Ok(v) => v,
                Err(e) => {
                    return fail(WbError::invalid_input(format!(
                        "the input is not JSON: {e}"
                    )))
                }
            };
            // Refuse a malformed call before connecting.
            if let Err(e) = tools::parse(&tool, &input) {
                return fail(e);
            }
            let (Some(server), Some(repo)) = (cli.server, cli.repo) else {
                emit(&WbError::invalid_input("--server and --repo are required").to_json());
                return ExitCode::from(2);
            };
            let store = match open_store(&server, &repo, &cli.agent_root) {
                Ok(s) => s,
                Err(e) => return fail(e),
            };
            let mut wb = facade(store, &server, &repo, &cli.agent_root);
            match wb.call(&tool, &input) {
                Ok(v) => {
                    // Delivered only once printed: a process killed before
                    // leaves its append or edit pending for the retry.
                    if emit_answer(&v) {
                        wb.delivered();
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Materialize's download lanes make the same directories at once
    /// (`.nokv/` for their scratch files): each finds it made, none fails
    /// (one lane's "File exists" failed a whole materialize under load).
    #[test]
    fn directories_made_by_racing_writers_are_judged_not_refused() {
        for _ in 0..200 {
            let dir = tempfile::tempdir().unwrap();
            let go = std::sync::Barrier::new(4);
            std::thread::scope(|s| {
                let handles: Vec<_> = (0..4)
                    .map(|_| {
                        s.spawn(|| {
                            go.wait();
                            checked_dest(dir.path(), ".nokv/partial", true)
                        })
                    })
                    .collect();
                for h in handles {
                    let p = h.join().unwrap().unwrap();
                    assert_eq!(p, dir.path().join(".nokv/partial"));
                }
            });
            assert!(dir.path().join(".nokv").is_dir());
        }
        // A link made there instead is still refused.
        #[cfg(unix)]
        {
            let dir = tempfile::tempdir().unwrap();
            let elsewhere = tempfile::tempdir().unwrap();
            std::os::unix::fs::symlink(elsewhere.path(), dir.path().join(".nokv")).unwrap();
            let e = checked_dest(dir.path(), ".nokv/partial", true).unwrap_err();
            assert!(e.to_string().contains("symbolic link"), "{e}");
        }
    }
}

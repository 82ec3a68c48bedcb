//! Appends and edits whose answers were not delivered: what tells a
//! retry of one from a deliberate repeat of it (docs/workbench.md, "A
//! repeated append or edit").
//!
//! Both carry the same input, so the same request identity, and find the
//! same thing in the store (the path's last publication made by that
//! request). What differs is whether the caller got the earlier answer.
//! (An edit likewise: `x` -> `xx` with `replace_all` still matches after
//! it.) So each append or edit attempt gets an id, which its change message carries
//! (`nokv-attempt:`), and is recorded as pending before it publishes and
//! forgotten once its answer was delivered (the CLI printed it, `nokv mcp`
//! wrote its line); an append or edit answers a publication as its own (a retry)
//! only when that publication carries the id of an earlier attempt still
//! pending.
//!
//! [`Pending::memory`] keeps the attempts of this process (a library
//! caller: an answer returned is delivered). [`Pending::dir`] keeps them
//! as files, so a process killed after its publication leaves its
//! attempt behind for the next process: `<dir>/<hex R>.<nonce>`, each
//! held under an exclusive `flock` while its process lives (locked before
//! it is renamed to that name, so it is never seen unlocked). An entry
//! that can be locked belongs to a process that is gone (a retry); one
//! that cannot is a concurrent attempt of a live process (not a retry:
//! two identical appends at once both land).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use crate::error::WbError;

/// One call's hold on its pending attempt (and on the abandoned attempts
/// of the same request it took over).
struct Held {
    req: [u8; 32],
    /// This attempt's id and those of the attempts it took over.
    attempts: Vec<String>,
    files: Vec<(PathBuf, File)>,
}

enum Kind {
    /// Per request, the ids of its attempts not delivered.
    Memory(HashMap<[u8; 32], Vec<String>>),
    Dir(PathBuf),
}

/// An append or edit attempt just recorded.
pub struct Attempt {
    /// This attempt's id (16 random bytes, hex): its publication's change
    /// message carries it (`nokv-attempt:`).
    pub id: String,
    /// The ids of earlier attempts of the same request whose answers were
    /// never delivered: a publication carrying one of them is this
    /// call's result (a retry); none at all means a deliberate repeat.
    pub earlier: Vec<String>,
}

impl Attempt {
    /// The line this attempt's change message carries.
    pub fn note(&self) -> String {
        format!("nokv-attempt: {}\n", self.id)
    }

    /// Whether the change whose message is `message` was published by an
    /// earlier attempt of this call still pending: this call's result (a
    /// retry). The caller checks that the change carries the request.
    pub fn retries(&self, message: &str) -> bool {
        message_attempt(message).is_some_and(|a| self.earlier.iter().any(|e| e == a))
    }
}

/// The attempt a change message names (`nokv-attempt: <hex>`).
pub fn message_attempt(message: &str) -> Option<&str> {
    message
        .lines()
        .find_map(|l| l.strip_prefix("nokv-attempt: "))
}

/// Pending appends and edits (see the module docs).
pub struct Pending {
    kind: Kind,
    held: Vec<Held>,
}

impl Pending {
    /// Attempts kept in this process only.
    pub fn memory() -> Pending {
        Pending {
            kind: Kind::Memory(HashMap::new()),
            held: Vec::new(),
        }
    }

    /// Attempts kept as files under `dir` (created at the first append).
    pub fn dir(dir: &Path) -> Pending {
        Pending {
            kind: Kind::Dir(dir.to_path_buf()),
            held: Vec::new(),
        }
    }

    /// Record an attempt of request `req`: its id, and the earlier
    /// attempts of `req` still pending (their answers never delivered).
    pub fn begin(&mut self, req: &[u8; 32]) -> Result<Attempt, WbError> {
        let mut nonce = [0u8; 16];
        getrandom::fill(&mut nonce).map_err(|e| {
            WbError::new(
                "storage",
                format!("no randomness for an append or edit attempt: {e}"),
            )
        })?;
        let id = hex::encode(nonce);
        match &mut self.kind {
            Kind::Memory(map) => {
                let ids = map.entry(*req).or_default();
                let earlier = ids.clone();
                ids.push(id.clone());
                let mut attempts = earlier.clone();
                attempts.push(id.clone());
                self.held.push(Held {
                    req: *req,
                    attempts,
                    files: Vec::new(),
                });
                Ok(Attempt { id, earlier })
            }
            Kind::Dir(dir) => {
                let dir: &Path = dir;
                std::fs::create_dir_all(dir).map_err(|e| journal_error(dir, &e))?;
                let prefix = format!("{}.", hex::encode(req));
                let mut files = Vec::new();
                let mut earlier = Vec::new();
                let entries = std::fs::read_dir(dir).map_err(|e| journal_error(dir, &e))?;
                for entry in entries.flatten() {
                    let name = entry.file_name();
                    let Some(attempt) = name.to_str().and_then(|n| n.strip_prefix(&prefix)) else {
                        continue;
                    };
                    let attempt = attempt.to_string();
                    let path = entry.path();
                    let Ok(f) = OpenOptions::new().read(true).write(true).open(&path) else {
                        continue;
                    };
                    // Locked: a live process's attempt (concurrent, not ours
                    // to take). Lockable: its process is gone.
                    if f.try_lock().is_ok() {
                        files.push((path, f));
                        earlier.push(attempt);
                    }
                }
                // Locked under a name no attempt looks at, then renamed:
                // an entry never appears unlocked while its process lives.
                let staged = dir.join(format!(".new-{id}"));
                let own = dir.join(format!("{prefix}{id}"));
                let f = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .open(&staged)
                    .map_err(|e| journal_error(&staged, &e))?;
                f.lock().map_err(|e| journal_error(&staged, &e))?;
                std::fs::rename(&staged, &own).map_err(|e| journal_error(&own, &e))?;
                files.push((own, f));
                let mut attempts = earlier.clone();
                attempts.push(id.clone());
                self.held.push(Held {
                    req: *req,
                    attempts,
                    files,
                });
                Ok(Attempt { id, earlier })
            }
        }
    }

    /// How many attempts this facade holds (a mark for [`Pending::abandon_since`]).
    pub fn mark(&self) -> usize {
        self.held.len()
    }

    /// The answers of every held attempt were delivered: forget them.
    pub fn delivered(&mut self) {
        for h in self.held.drain(..) {
            match &mut self.kind {
                Kind::Memory(map) => {
                    if let Some(ids) = map.get_mut(&h.req) {
                        ids.retain(|a| !h.attempts.contains(a));
                        if ids.is_empty() {
                            map.remove(&h.req);
                        }
                    }
                }
                Kind::Dir(_) => {
                    for (path, f) in h.files {
                        let _ = std::fs::remove_file(&path);
                        drop(f);
                    }
                }
            }
        }
    }

    /// The attempts held since `mark` failed (their outcome may be
    /// unknown): they stay pending, and their files are let go so a later
    /// attempt of the same request (in this process or another) takes
    /// them as a retry.
    pub fn abandon_since(&mut self, mark: usize) {
        if mark < self.held.len() {
            self.held.truncate(mark);
        }
    }
}

fn journal_error(path: &Path, e: &std::io::Error) -> WbError {
    WbError::new(
        "not_configured",
        format!(
            "the journal of pending appends and edits at {} cannot be used ({e}); set NOKV_STATE_DIR to a \
             writable directory",
            path.display()
        ),
    )
}

/// The directory of pending appends and edits of the agent root `agent` of
/// repository `repo` on `server`: `$NOKV_STATE_DIR`, else
/// `$XDG_STATE_HOME/nokv`, else `$HOME/.local/state/nokv`, then
/// `pending/<32 hex digits of BLAKE3(server, repo, agent)>`. `None` when no
/// such directory can be named (no variable set).
pub fn state_dir(server: &str, repo: &str, agent: &str) -> Option<PathBuf> {
    let base = match std::env::var_os("NOKV_STATE_DIR").filter(|v| !v.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
            Some(d) => PathBuf::from(d).join("nokv"),
            None => PathBuf::from(std::env::var_os("HOME").filter(|v| !v.is_empty())?)
                .join(".local/state/nokv"),
        },
    };
    let mut h = blake3::Hasher::new_derive_key("nokv-workbench pending appends v1");
    for part in [server, repo, agent] {
        h.update(&(part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    Some(
        base.join("pending")
            .join(hex::encode(&h.finalize().as_bytes()[..16])),
    )
}

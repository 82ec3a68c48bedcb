//! The runtime directory of `serve --runtime-dir`: `scribe-server.pid`
//! (written first) and `listen` (`HOST:PORT`, written once listening),
//! both removed at a clean stop. A server killed (SIGKILL, power loss)
//! leaves them; the next `serve` finds them ([`leftover`]), says so, and
//! removes them before it writes its own ([`clear`]), so that nothing
//! reads a dead server's address meanwhile. A reader that cannot wait for
//! that trusts `listen` only with [`live_listen`].

use std::path::Path;

/// The pid file's name.
pub const PID_FILE: &str = "scribe-server.pid";
/// The listening address's file name.
pub const LISTEN_FILE: &str = "listen";

/// Runtime files an earlier server left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leftover {
    /// The pid file's pid (`None`: no pid file, or not a number).
    pub pid: Option<u32>,
    /// The `listen` file's address, when present.
    pub listen: Option<String>,
    /// Whether a process of that pid exists now ([`process_alive`]).
    pub alive: bool,
}

impl std::fmt::Display for Leftover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.pid {
            Some(pid) => write!(
                f,
                "pid {pid} ({})",
                if self.alive { "running" } else { "gone" }
            )?,
            None => f.write_str("no pid")?,
        }
        match &self.listen {
            Some(l) => write!(f, ", listen {l}"),
            None => f.write_str(", no listen"),
        }
    }
}

/// What `dir` holds of an earlier server's runtime files (`None`: neither
/// file).
pub fn leftover(dir: &Path) -> Option<Leftover> {
    let pid_text = std::fs::read_to_string(dir.join(PID_FILE)).ok();
    let listen = std::fs::read_to_string(dir.join(LISTEN_FILE))
        .ok()
        .map(|s| s.trim().to_owned());
    if pid_text.is_none() && listen.is_none() {
        return None;
    }
    let pid = pid_text.and_then(|t| t.trim().parse::<u32>().ok());
    Some(Leftover {
        pid,
        listen,
        alive: pid.is_some_and(process_alive),
    })
}

/// Remove both runtime files from `dir` (absent ones are fine).
pub fn clear(dir: &Path) -> std::io::Result<()> {
    for f in [LISTEN_FILE, PID_FILE] {
        match std::fs::remove_file(dir.join(f)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The address in `dir`'s `listen`, only when its pid file names a
/// running process: a server killed without cleaning up is not trusted.
pub fn live_listen(dir: &Path) -> Option<String> {
    let l = leftover(dir)?;
    if l.alive {
        l.listen.filter(|s| !s.is_empty())
    } else {
        None
    }
}

/// Whether a process `pid` exists (Unix: `kill(pid, 0)`; elsewhere it is
/// assumed to, so nothing is removed on that ground).
pub fn process_alive(pid: u32) -> bool {
    #[cfg(unix)]
    {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return false;
        };
        if pid <= 0 {
            return false;
        }
        // SAFETY: signal 0 checks that the process exists and sends nothing.
        let rc = unsafe { libc::kill(pid, 0) };
        rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        true
    }
}

//! The runtime directory of a service (`serve --runtime-dir`), shared by
//! `scribe-server` and `scribe-auth` (as [`lock`](crate::lock) is): a pid
//! file `<program>.pid` (written first) and `listen` (`HOST:PORT`, written
//! once listening), both removed at a clean stop. A service killed
//! (SIGKILL, power loss) leaves them; the next `serve` finds them
//! ([`leftover`]), says so, and removes a dead holder's before it opens
//! anything ([`clear`]), so that nothing reads a dead service's address
//! meanwhile; a live holder's are replaced only once the service holds its
//! directory's `LOCK`. A reader that cannot wait for that trusts `listen`
//! only with [`live_listen`] (or [`listen_of`] for a process it started).
//!
//! Nothing here is a specified byte: these files are outside the data root
//! and the auth directory.
//!
//! A pid file is hostile input like any other: it is read up to
//! [`MAX_FILE_BYTES`], and empty, non-numeric, zero or out-of-range text is
//! [`Holder::NotAPid`] (nothing is signalled for it). A pid whose process
//! runs another program (a pid reused after a reboot) is
//! [`Holder::Other`] on Linux, where `/proc/PID/comm` names it; elsewhere
//! a running pid counts as the program's.

use std::io::Read;
use std::path::Path;

/// The listening address's file name.
pub const LISTEN_FILE: &str = "listen";

/// The most bytes read of a runtime file: a pid or an address is far
/// shorter, and a larger file is not one this code wrote.
pub const MAX_FILE_BYTES: u64 = 256;

/// The pid file's name for `program` (`scribe-server.pid`).
pub fn pid_file(program: &str) -> String {
    format!("{program}.pid")
}

/// Who the pid file names.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Holder {
    /// There is no pid file.
    NoPidFile,
    /// The pid file holds no pid: its text (escaped, at most 40
    /// characters), empty when the file is.
    NotAPid(String),
    /// No process has that pid now.
    Gone(u32),
    /// A process of that pid runs, as this program (or as one whose name
    /// cannot be read).
    Running(u32),
    /// A process of that pid runs another program, named: the pid was
    /// reused, that process is not the one that wrote the file.
    Other { pid: u32, name: String },
}

/// Runtime files an earlier process left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leftover {
    /// The program whose pid file was read.
    pub program: String,
    /// Who the pid file names.
    pub holder: Holder,
    /// The `listen` file's address (trimmed), when present.
    pub listen: Option<String>,
}

impl Leftover {
    /// Whether the pid file names a running process of this program: its
    /// files are then replaced only once the directory's LOCK is held.
    pub fn alive(&self) -> bool {
        matches!(self.holder, Holder::Running(_))
    }

    /// The pid file's pid, when it holds one.
    pub fn pid(&self) -> Option<u32> {
        match self.holder {
            Holder::Gone(p) | Holder::Running(p) | Holder::Other { pid: p, .. } => Some(p),
            Holder::NoPidFile | Holder::NotAPid(_) => None,
        }
    }
}

impl std::fmt::Display for Leftover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.holder {
            Holder::NoPidFile => f.write_str("no pid file")?,
            Holder::NotAPid(t) => write!(f, "pid file holds no pid: \"{t}\"")?,
            Holder::Gone(p) => write!(f, "pid {p} (gone)")?,
            Holder::Running(p) => write!(f, "pid {p} (running)")?,
            Holder::Other { pid, name } => write!(
                f,
                "pid {pid} (running as {name}, not {}: a reused pid)",
                self.program
            )?,
        }
        match &self.listen {
            Some(l) => write!(f, ", listen {l}"),
            None => f.write_str(", no listen"),
        }
    }
}

/// Up to [`MAX_FILE_BYTES`] of `path` as text (`None`: no such file or
/// unreadable).
fn read_bounded(path: &Path) -> Option<String> {
    let f = std::fs::File::open(path).ok()?;
    let mut bytes = Vec::new();
    f.take(MAX_FILE_BYTES).read_to_end(&mut bytes).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// A pid file's text as a pid: decimal digits only (surrounding white
/// space allowed), from 1 to `i32::MAX` (the largest `pid_t`).
pub fn parse_pid(text: &str) -> Result<u32, String> {
    let t = text.trim();
    let shown = || t.chars().flat_map(char::escape_default).take(40).collect();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(shown());
    }
    match t.parse::<u32>() {
        Ok(p) if p >= 1 && p <= i32::MAX as u32 => Ok(p),
        _ => Err(shown()),
    }
}

/// What `dir` holds of an earlier `program`'s runtime files (`None`:
/// neither file).
pub fn leftover(dir: &Path, program: &str) -> Option<Leftover> {
    let pid_text = read_bounded(&dir.join(pid_file(program)));
    let listen = read_bounded(&dir.join(LISTEN_FILE)).map(|s| s.trim().to_owned());
    if pid_text.is_none() && listen.is_none() {
        return None;
    }
    let holder = match pid_text {
        None => Holder::NoPidFile,
        Some(t) => match parse_pid(&t) {
            Err(shown) => Holder::NotAPid(shown),
            Ok(pid) => holder(pid, program),
        },
    };
    Some(Leftover {
        program: program.to_owned(),
        holder,
        listen,
    })
}

/// Who runs as `pid` now, compared with `program`.
fn holder(pid: u32, program: &str) -> Holder {
    if !process::alive(pid) {
        return Holder::Gone(pid);
    }
    match process::name(pid) {
        Some(name) if !names_program(&name, program) => Holder::Other { pid, name },
        _ => Holder::Running(pid),
    }
}

/// Whether a process named `name` (Linux's `comm`: the executable's file
/// name, cut to 15 bytes) runs `program` (`scribe-server`, or a copy named
/// `scribe-server-1.4`).
fn names_program(name: &str, program: &str) -> bool {
    let cut: String = program.chars().take(15).collect();
    name.starts_with(&cut) || (name.len() >= 15 && program.starts_with(name))
}

/// Remove both runtime files of `program` from `dir` (absent ones are
/// fine).
pub fn clear(dir: &Path, program: &str) -> std::io::Result<()> {
    for f in [LISTEN_FILE.to_owned(), pid_file(program)] {
        match std::fs::remove_file(dir.join(f)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Write `contents` to `dir/name` atomically (a temporary file renamed
/// over it), so a reader sees the old text or the whole new one.
pub fn write(dir: &Path, name: &str, contents: &str) -> std::io::Result<()> {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, contents)?;
    std::fs::rename(&tmp, dir.join(name))
}

/// The address in `dir`'s `listen`, only when `program`'s pid file names a
/// running process of it: a service killed without cleaning up, a garbage
/// pid file or a reused pid is not trusted.
pub fn live_listen(dir: &Path, program: &str) -> Option<String> {
    let l = leftover(dir, program)?;
    if l.alive() {
        l.listen.filter(|s| !s.is_empty())
    } else {
        None
    }
}

/// The address in `dir`'s `listen`, only when `program`'s pid file names
/// `pid` (a process the caller started) and `listen` is whole: files an
/// earlier process left are not taken for the new one's.
pub fn listen_of(dir: &Path, program: &str, pid: u32) -> Option<String> {
    let text = read_bounded(&dir.join(pid_file(program)))?;
    if parse_pid(&text) != Ok(pid) {
        return None;
    }
    let listen = read_bounded(&dir.join(LISTEN_FILE))?;
    let addr = listen.strip_suffix('\n')?.trim();
    (!addr.is_empty()).then(|| addr.to_owned())
}

/// Whether a process exists, and its name.
#[cfg(unix)]
mod process {
    /// Whether a process `pid` exists (`kill(pid, 0)`; EPERM: it does,
    /// as another user).
    pub fn alive(pid: u32) -> bool {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return false;
        };
        if pid <= 0 {
            return false;
        }
        // SAFETY: signal 0 checks that the process exists and sends nothing;
        // pid > 0 names one process (never a group or every process).
        let rc = unsafe { libc::kill(pid, 0) };
        rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }

    /// The process's name (Linux: `/proc/PID/comm`); `None` when it
    /// cannot be read.
    pub fn name(pid: u32) -> Option<String> {
        #[cfg(target_os = "linux")]
        {
            let n = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            let n = n.trim_end_matches('\n');
            (!n.is_empty()).then(|| n.to_owned())
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = pid;
            None
        }
    }
}

/// Elsewhere a process is assumed to exist, so nothing is removed on that
/// ground.
#[cfg(not(unix))]
mod process {
    pub fn alive(_pid: u32) -> bool {
        true
    }

    pub fn name(_pid: u32) -> Option<String> {
        None
    }
}

/// Whether a process `pid` exists now (Unix; elsewhere assumed).
pub fn process_alive(pid: u32) -> bool {
    process::alive(pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pid file is hostile input: anything but one decimal pid in range
    /// is `NotAPid`, named, and nothing is signalled for it (`kill(-1, 0)`
    /// would ask about every process; `0` about our own group).
    #[test]
    fn a_garbage_pid_file_is_named_not_a_pid() {
        for bad in [
            "",
            "\n",
            "abc",
            "-1",
            "0",
            "+5",
            "12 34",
            "4294967295",
            "2147483648",
            "99999999999999999999999",
        ] {
            assert!(parse_pid(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_pid(" 42\n"), Ok(42));
        assert_eq!(parse_pid("2147483647"), Ok(2147483647));

        let dir = tempfile::tempdir().unwrap();
        let pidf = dir.path().join(pid_file("scribe-auth"));
        for (text, shown) in [
            ("", ""),
            ("not a pid\x1b[2J", "not a pid\\u{1b}[2J"),
            ("4294967296", "4294967296"),
        ] {
            std::fs::write(&pidf, text).unwrap();
            std::fs::write(dir.path().join(LISTEN_FILE), "127.0.0.1:9\n").unwrap();
            let l = leftover(dir.path(), "scribe-auth").unwrap();
            assert_eq!(l.holder, Holder::NotAPid(shown.into()), "{text:?}");
            assert!(!l.alive());
            assert_eq!(live_listen(dir.path(), "scribe-auth"), None);
            assert_eq!(
                l.to_string(),
                format!("pid file holds no pid: \"{shown}\", listen 127.0.0.1:9")
            );
        }
        // A huge file is read only up to the bound.
        std::fs::write(&pidf, "7".repeat(10 << 20)).unwrap();
        let l = leftover(dir.path(), "scribe-auth").unwrap();
        assert!(matches!(l.holder, Holder::NotAPid(ref t) if t.len() == 40));
        clear(dir.path(), "scribe-auth").unwrap();
        assert_eq!(leftover(dir.path(), "scribe-auth"), None);
    }

    /// A live process that is not the program (this test binary) is a
    /// reused pid on Linux: not trusted, named.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_live_pid_of_another_program_is_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let me = std::process::id();
        write(dir.path(), &pid_file("scribe-server"), &format!("{me}\n")).unwrap();
        write(dir.path(), LISTEN_FILE, "127.0.0.1:9\n").unwrap();
        let l = leftover(dir.path(), "scribe-server").unwrap();
        let Holder::Other { pid, name } = &l.holder else {
            panic!("{l:?}");
        };
        assert_eq!(*pid, me);
        assert!(!name.is_empty());
        assert!(!l.alive());
        assert_eq!(live_listen(dir.path(), "scribe-server"), None);
        assert!(l.to_string().contains(&format!(
            "(running as {name}, not scribe-server: a reused pid)"
        )));
        // The one that started it knows its pid.
        assert_eq!(
            listen_of(dir.path(), "scribe-server", me).as_deref(),
            Some("127.0.0.1:9")
        );
        assert_eq!(listen_of(dir.path(), "scribe-server", me + 1), None);
    }

    #[test]
    fn a_program_is_known_by_its_cut_name() {
        assert!(names_program("scribe-server", "scribe-server"));
        assert!(names_program("scribe-server-1", "scribe-server"));
        assert!(names_program("scribe-auth", "scribe-auth"));
        assert!(!names_program("bash", "scribe-server"));
        assert!(!names_program("scribe-auth", "scribe-server"));
        assert!(names_program("a-very-long-ser", "a-very-long-service-name"));
    }
}

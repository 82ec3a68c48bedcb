//! The OS-specific parts of the side-by-side harness: waiting for a child
//! with its resource usage (peak RSS through `wait4`, bytes read through
//! `/proc/PID/io` on Linux) and asking a server to stop.

use std::process::Child;

/// How a measured child ended.
pub struct Exit {
    pub ok: bool,
    /// The exit code (128 + the signal number when killed by one).
    pub code: i32,
    /// Peak resident set of the child and the descendants it waited for, in bytes.
    pub max_rss: u64,
    /// Bytes the child itself passed through read(2) (Linux: `rchar`), if known.
    pub read_bytes: Option<u64>,
}

#[cfg(unix)]
pub fn wait(child: Child) -> std::io::Result<Exit> {
    let pid = child.id() as libc::pid_t;
    // Let the child exit without reaping it, so `/proc/PID/io` still answers.
    #[cfg(target_os = "linux")]
    let read_bytes = {
        // SAFETY: a zeroed siginfo_t is a valid out-parameter for waitid.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: pid is our own unreaped child; info outlives the call.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if r == 0 {
            std::fs::read_to_string(format!("/proc/{pid}/io"))
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find_map(|l| l.strip_prefix("rchar:"))
                        .and_then(|v| v.trim().parse().ok())
                })
        } else {
            None
        }
    };
    #[cfg(not(target_os = "linux"))]
    let read_bytes = None;
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid out-parameter for wait4.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our own child; status and ru outlive the call.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // Dropping a Child never waits or kills; it is reaped above.
    drop(child);
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    };
    // Linux reports KiB, macOS bytes.
    let scale = if cfg!(target_os = "macos") { 1 } else { 1024 };
    Ok(Exit {
        ok,
        code,
        max_rss: (ru.ru_maxrss.max(0) as u64) * scale,
        read_bytes,
    })
}

#[cfg(not(unix))]
pub fn wait(mut child: Child) -> std::io::Result<Exit> {
    let st = child.wait()?;
    Ok(Exit {
        ok: st.success(),
        code: st.code().unwrap_or(1),
        max_rss: 0,
        read_bytes: None,
    })
}

/// Ask a server to stop (SIGTERM on Unix, kill elsewhere).
#[cfg(unix)]
pub fn terminate(child: &mut Child) {
    // SAFETY: sending a signal to our own child's pid.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
}

#[cfg(not(unix))]
pub fn terminate(child: &mut Child) {
    let _ = child.kill();
}

/// Flush every dirty page of the machine so no run pays for the
/// writeback of the previous one's files.
pub fn sync_all() {
    #[cfg(unix)]
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe {
        libc::sync();
    }
}

/// Whether the child has exited (without reaping it).
#[cfg(target_os = "linux")]
pub fn exited(child: &Child) -> bool {
    // SAFETY: a zeroed siginfo_t is a valid out-parameter for waitid.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: our own child's pid; info outlives the call.
    let r = unsafe {
        libc::waitid(
            libc::P_PID,
            child.id() as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOWAIT | libc::WNOHANG,
        )
    };
    // SAFETY: waitid filled info (si_pid is 0 while the child runs).
    r != 0 || unsafe { info.si_pid() } != 0
}

/// Elsewhere the caller simply waits for the exit.
#[cfg(not(target_os = "linux"))]
pub fn exited(child: &Child) -> bool {
    let _ = child;
    true
}

/// Whether [`splice_all`] moves bytes without copying them through the process.
#[cfg(target_os = "linux")]
pub const HAS_SPLICE: bool = true;
#[cfg(not(target_os = "linux"))]
pub const HAS_SPLICE: bool = false;

/// Move bytes from `from` to `to` until end of stream with `splice(2)`
/// through a pipe (socket to pipe, pipe to socket: the bytes never enter
/// this process), adding each batch to `n` once it is written out.
#[cfg(target_os = "linux")]
pub fn splice_all(
    from: &std::net::TcpStream,
    to: &std::net::TcpStream,
    n: &std::sync::atomic::AtomicU64,
) -> std::io::Result<()> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds is a valid out-array of two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: pipe2 just returned these two descriptors; each is owned once.
    let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // A 1 MiB pipe where allowed (pipe-max-size); the 64 KiB default otherwise.
    // SAFETY: F_SETPIPE_SZ on our own pipe; a failure leaves it as it was.
    let cap = unsafe { libc::fcntl(wr.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20) };
    let cap = if cap > 0 { cap as usize } else { 64 << 10 };
    let (src, dst) = (from.as_raw_fd(), to.as_raw_fd());
    let call = |r: isize| -> std::io::Result<Option<usize>> {
        if r >= 0 {
            return Ok(Some(r as usize));
        }
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::Interrupted {
            Ok(None)
        } else {
            Err(e)
        }
    };
    loop {
        // SAFETY: both descriptors are open for the whole call; null offsets
        // (sockets and pipes have none).
        let got = unsafe {
            libc::splice(
                src,
                std::ptr::null_mut(),
                wr.as_raw_fd(),
                std::ptr::null_mut(),
                cap,
                libc::SPLICE_F_MOVE,
            )
        };
        let mut left = match call(got)? {
            None => continue,
            Some(0) => return Ok(()),
            Some(k) => k,
        };
        let moved = left as u64;
        while left > 0 {
            // SAFETY: as above.
            let put = unsafe {
                libc::splice(
                    rd.as_raw_fd(),
                    std::ptr::null_mut(),
                    dst,
                    std::ptr::null_mut(),
                    left,
                    libc::SPLICE_F_MOVE,
                )
            };
            match call(put)? {
                None => {}
                Some(0) => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::WriteZero,
                        "splice wrote nothing",
                    ))
                }
                Some(k) => left -= k,
            }
        }
        n.fetch_add(moved, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Elsewhere the proxy copies through a buffer; this is never called.
#[cfg(not(target_os = "linux"))]
pub fn splice_all(
    from: &std::net::TcpStream,
    to: &std::net::TcpStream,
    n: &std::sync::atomic::AtomicU64,
) -> std::io::Result<()> {
    super::proxy::copy_buffered(from, to, n)
}

/// CPU time (user + system) this whole process has used so far, in seconds.
#[cfg(unix)]
pub fn cpu_secs() -> f64 {
    // SAFETY: a zeroed rusage is a valid out-parameter for getrusage.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

/// Unknown elsewhere.
#[cfg(not(unix))]
pub fn cpu_secs() -> f64 {
    f64::NAN
}

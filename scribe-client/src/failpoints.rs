//! Named points where a test build kills itself or pauses, so crash tests
//! can stop a real process at an exact step.
//!
//! Only a build with the `failpoints` feature has them: without it,
//! [`Failpoints`] holds nothing and every method is empty, so release
//! builds carry no failpoint. The binary configures them (from its
//! environment); this library never reads the environment.
//!
//! A point `NAME` fires when the configured crash point is `NAME`; a
//! counted point fires when it is `NAME-N` and the point is reached for
//! the N-th time.

#[cfg(feature = "failpoints")]
use std::collections::HashMap;
#[cfg(feature = "failpoints")]
use std::sync::Mutex;

/// The failpoints of one command.
#[derive(Debug, Default)]
pub struct Failpoints {
    #[cfg(feature = "failpoints")]
    crash_at: Option<String>,
    #[cfg(feature = "failpoints")]
    pause_ms: Option<u64>,
    #[cfg(feature = "failpoints")]
    counts: Mutex<HashMap<String, usize>>,
}

impl Failpoints {
    /// Whether this build has failpoints.
    pub const ENABLED: bool = cfg!(feature = "failpoints");

    /// Kill the process at `crash_at`; pause `pause_ms` after each file a
    /// sync places. Without the feature, no failpoint.
    #[allow(unused_variables)]
    pub fn new(crash_at: Option<String>, pause_ms: Option<u64>) -> Failpoints {
        Failpoints {
            #[cfg(feature = "failpoints")]
            crash_at,
            #[cfg(feature = "failpoints")]
            pause_ms,
            #[cfg(feature = "failpoints")]
            counts: Mutex::new(HashMap::new()),
        }
    }

    /// The point `name`.
    #[allow(unused_variables)]
    #[inline]
    pub fn point(&self, name: &str) {
        #[cfg(feature = "failpoints")]
        if self.crash_at.as_deref() == Some(name) {
            die();
        }
    }

    /// The `n`-th pass of the counted point `name` (fires at `name-n`).
    #[allow(unused_variables)]
    #[inline]
    pub fn nth(&self, name: &str, n: usize) {
        #[cfg(feature = "failpoints")]
        if let Some(v) = &self.crash_at {
            if v.strip_prefix(name)
                .and_then(|r| r.strip_prefix('-'))
                .and_then(|r| r.parse::<usize>().ok())
                == Some(n)
            {
                die();
            }
        }
    }

    /// Count a pass of `name`: fires at `name` on the first pass and at
    /// `name-n` on the n-th.
    #[allow(unused_variables)]
    #[inline]
    pub fn pass(&self, name: &str) {
        #[cfg(feature = "failpoints")]
        {
            if self.crash_at.is_none() {
                return;
            }
            let n = match self.counts.lock() {
                Ok(mut m) => {
                    let n = m.entry(name.to_string()).or_insert(0);
                    *n += 1;
                    *n
                }
                Err(_) => return,
            };
            if n == 1 {
                self.point(name);
            }
            self.nth(name, n);
        }
    }

    /// The configured pause (after each file a sync places).
    #[inline]
    pub fn pause(&self) {
        #[cfg(feature = "failpoints")]
        if let Some(ms) = self.pause_ms {
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
    }
}

#[cfg(feature = "failpoints")]
fn die() -> ! {
    use std::io::Write;
    let _ = std::io::stderr().flush();
    #[cfg(unix)]
    {
        // SIGKILL, as a crash or the OOM killer would end the process:
        // no destructor, no flush.
        let _ = std::process::Command::new("kill")
            .args(["-9", &std::process::id().to_string()])
            .status();
        std::thread::sleep(std::time::Duration::from_secs(5));
    }
    std::process::abort()
}

//! The runtime directory of `serve --runtime-dir`: `scribe-server.pid`
//! and `listen`, through the helper both services share
//! ([`scribe_format::runtime`]: a dead or reused pid's files removed
//! before the data root is opened, a live one's replaced once its `LOCK`
//! is held; [`live_listen`] trusts `listen` only while its pid runs as
//! `scribe-server`).

use std::path::Path;

pub use scribe_format::runtime::{process_alive, Holder, Leftover, LISTEN_FILE};

/// The program name the pid file is named after and checked against.
pub const PROGRAM: &str = "scribe-server";
/// The pid file's name.
pub const PID_FILE: &str = "scribe-server.pid";

/// What `dir` holds of an earlier server's runtime files (`None`: neither
/// file).
pub fn leftover(dir: &Path) -> Option<Leftover> {
    scribe_format::runtime::leftover(dir, PROGRAM)
}

/// Remove both runtime files from `dir` (absent ones are fine).
pub fn clear(dir: &Path) -> std::io::Result<()> {
    scribe_format::runtime::clear(dir, PROGRAM)
}

/// The address in `dir`'s `listen`, only when its pid file names a
/// running `scribe-server`: a server killed without cleaning up, a garbage
/// pid file or a reused pid is not trusted.
pub fn live_listen(dir: &Path) -> Option<String> {
    scribe_format::runtime::live_listen(dir, PROGRAM)
}

//! Failures of the server's own storage, as opposed to refusals of a
//! request: a full volume, and handles that an I/O failure left unusable
//! (redb's "previous I/O error" state, an object store whose pack writer
//! failed half way).
//!
//! Both are recovered the same way: the service forgets its open
//! repositories (metadata database and object store) and the next request
//! opens them again, which runs open-time recovery (the pack is truncated
//! to its committed length, redb repairs its file). Until every request
//! that still holds an old handle has finished, the reopen answers
//! `server_busy`
//! (redb's file lock keeps two handles off one file). A full volume is
//! reported as `storage_full`, and the service recovers by itself once
//! space is back. See `docs/server.md` ("Storage failures").

use std::error::Error;

/// What a storage failure needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The volume is full (or over quota): report `storage_full`, reopen.
    Full,
    /// A handle is unusable after an I/O failure: reopen.
    Broken,
    /// A reopen found the old handle still held by a running request.
    StillHeld,
}

/// The storage fault `e` shows, if any. Structural where the error keeps
/// its `std::io::Error`, by the words of our and redb's messages where a
/// layer kept only text.
pub fn classify(e: &(dyn Error + 'static)) -> Option<Fault> {
    let mut text = String::new();
    let mut cur = Some(e);
    while let Some(c) = cur {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            if io_is_full(io) {
                return Some(Fault::Full);
            }
        }
        text.push_str(&c.to_string());
        text.push('\n');
        cur = c.source();
    }
    classify_text(&text)
}

fn io_is_full(e: &std::io::Error) -> bool {
    use std::io::ErrorKind as K;
    matches!(e.kind(), K::StorageFull | K::QuotaExceeded)
        || e.raw_os_error()
            .is_some_and(|n| FULL_OS_ERRORS.contains(&n))
}

/// ENOSPC and EDQUOT (Unix); ERROR_HANDLE_DISK_FULL and ERROR_DISK_FULL
/// (Windows).
#[cfg(unix)]
const FULL_OS_ERRORS: &[i32] = &[28, 122];
#[cfg(windows)]
const FULL_OS_ERRORS: &[i32] = &[39, 112];
#[cfg(not(any(unix, windows)))]
const FULL_OS_ERRORS: &[i32] = &[];

fn classify_text(t: &str) -> Option<Fault> {
    #[cfg(unix)]
    const FULL: &[&str] = &[
        "No space left on device",
        "(os error 28)",
        "Disk quota exceeded",
        "(os error 122)",
    ];
    #[cfg(windows)]
    const FULL: &[&str] = &[
        "There is not enough space on the disk",
        "(os error 112)",
        "(os error 39)",
    ];
    #[cfg(not(any(unix, windows)))]
    const FULL: &[&str] = &[];
    if FULL.iter().any(|p| t.contains(p)) {
        Some(Fault::Full)
    } else if t.contains("Previous I/O error occurred") || t.contains("an earlier write failed") {
        Some(Fault::Broken)
    } else if t.contains("Database already open") {
        Some(Fault::StillHeld)
    } else {
        None
    }
}

/// `message` with the data root's location replaced by `<data root>`:
/// replies never reveal where (or as whom) the server stores its data.
pub fn redact(message: &str, roots: &[String]) -> String {
    let mut out = message.to_string();
    for r in roots {
        if !r.is_empty() && out.contains(r.as_str()) {
            out = out.replace(r.as_str(), "<data root>");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_volume_is_recognised_structurally_and_in_text() {
        let io = std::io::Error::from_raw_os_error(FULL_OS_ERRORS[0]);
        assert_eq!(classify(&io), Some(Fault::Full));
        let wrapped = std::io::Error::other(format!("object store: I/O error on x: {io}"));
        assert_eq!(classify(&wrapped), Some(Fault::Full));
        let other = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert_eq!(classify(&other), None);
    }

    #[test]
    fn unusable_and_held_handles_are_recognised() {
        let prev = redb::Error::PreviousIo;
        assert_eq!(classify(&prev), Some(Fault::Broken));
        let held = redb::Error::DatabaseAlreadyOpen;
        assert_eq!(classify(&held), Some(Fault::StillHeld));
    }

    #[test]
    fn the_data_root_is_redacted() {
        let roots = vec!["/srv/scribe".to_string(), "/real/srv/scribe".to_string()];
        assert_eq!(
            redact(
                "I/O error on /srv/scribe/repos/x/objects/packs/1.pack",
                &roots
            ),
            "I/O error on <data root>/repos/x/objects/packs/1.pack"
        );
        assert_eq!(redact("no path here", &roots), "no path here");
    }
}

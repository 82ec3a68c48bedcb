//! A string a user or a peer supplied comes back in an error bounded: its
//! first 64 characters, then "… (N bytes)" (#23). A repository name of
//! 64 KiB given on the command line, or sent over the wire by a client
//! that does not check it, used to be echoed whole (twice, for
//! `scribe-server repo create`).

use super::support::*;

/// The name of 64 KiB.
fn huge() -> String {
    "x".repeat(65_536)
}

/// The start of `text` (a failure message must not repeat 64 KiB).
fn head(text: &str) -> String {
    text.chars().take(300).collect()
}

/// `text` quotes at most the first 64 characters of the huge name and
/// says how long it is.
fn bounded(text: &str) {
    assert!(text.len() < 2048, "{} bytes: {}", text.len(), head(text));
    let shown = format!("\"{}\"… (", "x".repeat(64));
    assert!(
        text.contains(&format!("{shown}65536 bytes)"))
            || text.contains(&format!("{shown}65535 bytes)")),
        "{}",
        head(text)
    );
}

#[test]
fn a_huge_repository_name_is_echoed_bounded() {
    let env = Env::new(Transport::Tcp);
    let name = huge();
    // Refused by the client before anything is asked (`usage`).
    let r = env.scribe(env.dir(), &["repo", "create", &name, "--server", &env.url]);
    assert_eq!(r.code, Some(2), "{}", head(&r.stderr));
    bounded(&r.stderr);
    // Not among the server's repositories.
    let r = env.scribe(
        env.dir(),
        &[
            "workspace",
            "create",
            "w",
            "--server",
            &env.url,
            "--repo",
            &name,
        ],
    );
    assert_eq!(r.code, Some(1), "{}", head(&r.stderr));
    bounded(&r.stderr);
    // Longer than a wire string (65,535 bytes): not sent at all, the
    // field named (it used to be cut to 65,535 bytes on the way).
    let r = env.scribe(
        env.dir(),
        &["workspace", "list", "--server", &env.url, "--repo", &name],
    );
    assert_eq!(r.code, Some(1), "{}", head(&r.stderr));
    assert!(r.stderr.len() < 2048, "{}", head(&r.stderr));
    assert!(
        r.stderr.contains("limit_exceeded")
            && r.stderr.contains("WorkspaceList was not sent")
            && r.stderr
                .contains("WorkspaceListRequest.repo is 65536 bytes"),
        "{}",
        head(&r.stderr)
    );
    let mut c = scribe_client::connect(&env.url, &Default::default()).unwrap();
    let e = c.repo_create(&name).unwrap_err();
    assert!(
        matches!(e, scribe_client::ClientError::Unsendable { .. }),
        "{e}"
    );
    assert_eq!(e.code(), scribe_format::ErrorCode::LimitExceeded);
    // As long as a wire string takes, sent: the server's refusal quotes
    // it bounded.
    let name = "x".repeat(65_535);
    let r = env.scribe(
        env.dir(),
        &["workspace", "list", "--server", &env.url, "--repo", &name],
    );
    assert_eq!(r.code, Some(1), "{}", head(&r.stderr));
    bounded(&r.stderr);
    let e = c.repo_create(&name).unwrap_err();
    assert_eq!(
        e.code(),
        scribe_format::ErrorCode::Malformed,
        "{}",
        head(&e.to_string())
    );
    bounded(&e.to_string());
    // A branch name, the same.
    let r = env.scribe(
        env.dir(),
        &[
            "workspace",
            "create",
            "w",
            "--server",
            &env.url,
            "--repo",
            REPO,
            "--branch",
            &name,
        ],
    );
    assert_eq!(r.code, Some(1), "{}", head(&r.stderr));
    bounded(&r.stderr);
}

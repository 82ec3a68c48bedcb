//! Output discipline: a closed stdout is success, `--json` errors are JSON
//! on stdout, exit statuses come from the code's kind, and the generated
//! completions and man page are printed.

use std::process::Stdio;

use super::support::{write, Env, Transport, REPO};

/// `scribe log | head -1` used to panic with exit 101 when the reader
/// closed the pipe: every command's data goes through one writer that
/// treats a closed pipe as success.
#[test]
fn a_closed_stdout_ends_the_command_quietly_with_success() {
    let env = Env::new(Transport::Path);
    let a = env.workspace("alice", &[]);
    for i in 0..3 {
        write(&a, &format!("f{i}.txt"), b"x");
        env.scribe(&a, &["add", "."]).ok();
        env.scribe(&a, &["submit", "-m", &format!("change {i}")])
            .ok();
    }
    let many: Vec<String> = (0..2000).map(|i| format!("dir/file-{i}.bin")).collect();
    let mut debug = vec!["debug", "path"];
    debug.extend(many.iter().map(String::as_str));
    for args in [
        vec!["log"],
        vec!["status"],
        vec!["locks"],
        vec!["--json", "log"],
        debug,
    ] {
        // The read end is closed before the command starts: its first
        // write of data fails with EPIPE, deterministically.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = env
            .command(&a, &args)
            .stdout(Stdio::from(writer))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!stderr.contains("Error"), "{args:?}: {stderr}");
    }
}

#[test]
fn json_errors_are_json_on_stdout_with_the_exit_status_of_their_kind() {
    let env = Env::new(Transport::Path);
    let outside = env.path("nowhere");
    std::fs::create_dir_all(&outside).unwrap();
    let r = env.scribe(&outside, &["status", "--json"]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(
        r.stdout
            .starts_with(r#"{"error":{"code":"not_a_workspace","message":""#),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains(r#""hint":"run this inside a workspace"#),
        "{}",
        r.stdout
    );
    assert!(r.stderr.is_empty(), "{}", r.stderr);
    // A usage refusal of a workflow exits 2, as clap's own usage errors do.
    let a = env.workspace("alice", &[]);
    write(&a, "x.txt", b"x");
    env.scribe(&a, &["add", "x.txt"]).ok();
    let r = env.scribe(&a, &["--json", "submit"]);
    assert_eq!(r.code, Some(2), "{r:?}");
    assert!(r.stdout.contains(r#""code":"usage""#), "{}", r.stdout);
    // Without --json the same error is text on stderr.
    let r = env.scribe(&a, &["submit"]);
    assert_eq!(r.code, Some(2));
    assert!(r.stderr.starts_with("Error[usage]: "), "{}", r.stderr);
    assert!(r.stdout.is_empty());
}

/// A refused connection names the server and keeps the OS error as the
/// cause.
#[test]
fn an_unreachable_server_is_reported_with_its_cause() {
    let env = Env::new(Transport::Path);
    // A port nothing listens on: bind, learn the port, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("scribe://127.0.0.1:{port}");
    let r = env.scribe(env.dir(), &["repo", "list", "--server", &url]);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("Error[unreachable]"), "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!("127.0.0.1:{port}")),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("Caused by: "), "{}", r.stderr);
    assert!(r.stderr.contains("Hint: "), "{}", r.stderr);
}

#[test]
fn completions_and_the_man_page_are_printed() {
    let env = Env::new(Transport::Path);
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let r = env.scribe(env.dir(), &["completions", shell]);
        r.ok();
        assert!(r.stdout.contains("workspace"), "{shell}");
    }
    let r = env.scribe(env.dir(), &["man"]);
    r.ok();
    assert!(
        r.stdout.starts_with(".ie"),
        "{}",
        &r.stdout[..80.min(r.stdout.len())]
    );
    assert!(r.stdout.contains("submit"));
}

/// Authors and messages come from other people: `log` and `describe` show
/// terminal control sequences and bidi overrides escaped, never raw
/// (issue 14, item 11).
#[test]
fn control_sequences_in_authors_and_messages_are_printed_escaped() {
    let env = Env::new(Transport::Path);
    let author = "eve\u{1b}]0;owned\u{7}";
    let created = env
        .command_as(
            author,
            env.dir(),
            &[
                "workspace",
                "create",
                "eve",
                "--server",
                &env.url,
                "--repo",
                REPO,
            ],
        )
        .output()
        .unwrap();
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let a = env.path("eve");
    write(&a, "f.txt", b"x");
    env.scribe(&a, &["add", "f.txt"]).ok();
    env.scribe(
        &a,
        &["submit", "-m", "fix \u{1b}[2J\u{1b}[31mall\u{202e}txt.exe"],
    )
    .ok();
    for args in [&["log"][..], &["describe", "1"][..]] {
        let r = env.scribe(&a, args);
        r.ok();
        for raw in ['\u{1b}', '\u{7}', '\u{202e}'] {
            assert!(
                !r.stdout.contains(raw),
                "{args:?} printed {raw:?} raw: {:?}",
                r.stdout
            );
        }
        assert!(
            r.stdout.contains("\\u{1b}[31mall\\u{202e}txt.exe"),
            "{args:?}: {}",
            r.stdout
        );
        assert!(
            r.stdout.contains("eve\\u{1b}]0;owned\\u{7}"),
            "{args:?}: {}",
            r.stdout
        );
    }
    // JSON keeps the exact text, escaped the JSON way.
    let r = env.scribe(&a, &["--json", "log"]);
    assert!(r.stdout.contains("fix \\u001b[2J"), "{}", r.stdout);
}

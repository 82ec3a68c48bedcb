//! `scribe debug path`: one line per argument, exit 0.

use std::process::Command;

fn scribe(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_scribe"))
        .args(args)
        .output()
        .expect("the scribe binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).expect("stdout is UTF-8"),
    )
}

#[test]
fn prints_one_line_per_argument_and_exits_zero() {
    let (code, out) = scribe(&["debug", "path", "Art/Hero.psd", "a/../b", "", "CON.txt"]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert!(lines[0].starts_with("ok "), "{out}");
    assert!(lines[1].starts_with("invalid "), "{out}");
    assert_eq!(lines[2], "invalid empty");
    assert!(lines[3].starts_with("invalid "), "{out}");
}

#[test]
fn folded_spellings_print_the_same_key() {
    let (_, out) = scribe(&[
        "debug",
        "path",
        "STRASSE/ẞ",
        "strasse/ss",
        "Strasse/ß",
        "ſ",
        "s",
    ]);
    let keys: Vec<&str> = out.lines().collect();
    assert_eq!(keys[0], keys[1], "{out}");
    assert_eq!(keys[1], keys[2], "{out}");
    assert_eq!(keys[3], keys[4], "{out}");
    assert!(keys[0].starts_with("ok "));
}

#[test]
fn missing_argument_is_a_usage_error() {
    let (code, _) = scribe(&["debug", "path"]);
    assert_eq!(code, 2);
}

#[test]
fn a_backslash_is_valid_and_named_as_not_for_windows() {
    let (code, out) = scribe(&["debug", "path", "art\\new.psd", "art/new.psd"]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("ok "), "{out}");
    assert!(lines[0].ends_with("(not on Windows: backslash)"), "{out}");
    assert!(!lines[1].contains("Windows"), "{out}");
}

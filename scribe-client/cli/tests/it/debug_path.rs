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
    assert!(lines[0].starts_with("Art/Hero.psd: ok "), "{out}");
    // #18 item 15: the argument is named, components count from 1.
    assert_eq!(
        lines[1],
        "a/../b: invalid dot_dot_component (component 2 is `..`)"
    );
    assert!(lines[2].starts_with("(empty): invalid empty"), "{out}");
    assert!(lines[3].starts_with("CON.txt: invalid "), "{out}");
}

/// #18 item 16: `scribe debug path A B` says when two names collide.
#[test]
fn names_that_collide_are_named() {
    let (code, out) = scribe(&[
        "debug",
        "path",
        "Art/Hero.psd",
        "art/hero.PSD",
        "other",
        "Art/Hero.psd",
    ]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 5, "{out}");
    assert!(
        lines[4].starts_with("collision: Art/Hero.psd and art/hero.PSD differ only in case"),
        "{out}"
    );
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
    let keys: Vec<&str> = out
        .lines()
        .filter(|l| !l.starts_with("collision: "))
        .map(|l| l.rsplit(": ").next().unwrap())
        .collect();
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
    assert!(lines[0].starts_with("art\\new.psd: ok "), "{out}");
    assert!(lines[0].ends_with("(not on Windows: backslash)"), "{out}");
    assert!(!lines[1].contains("Windows"), "{out}");
}

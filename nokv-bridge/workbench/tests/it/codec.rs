//! The path jail and seed 002's physical key codec.

use std::cmp::Ordering;

use nokv_workbench::path::{
    broken_rule, check_id, decode_key, key, prefix_key, PathRule, Section, ToolPath,
};
use proptest::prelude::*;

#[test]
fn jail_refuses_every_escape() {
    let s = Section::Outputs;
    let cases: &[(&str, PathRule)] = &[
        ("", PathRule::Empty),
        ("/etc/passwd", PathRule::Absolute),
        ("a//b", PathRule::EmptyComponent),
        ("a/", PathRule::EmptyComponent),
        ("./a", PathRule::Dot),
        ("a/./b", PathRule::Dot),
        ("..", PathRule::DotDot),
        ("a/../../b", PathRule::DotDot),
        ("a\\b", PathRule::Backslash),
        ("..\\..\\x", PathRule::Backslash),
        ("a\0b", PathRule::Nul),
        ("outputs/x", PathRule::SectionRepeated),
        ("outputs", PathRule::SectionRepeated),
    ];
    for (p, rule) in cases {
        assert_eq!(broken_rule(s, p, false), Some(*rule), "{p:?}");
        let e = ToolPath::parse(s, p, false).unwrap_err();
        assert_eq!(e.code, "invalid_path");
        assert_eq!(e.rule, Some(rule.name()));
    }
    // The section name later in the path, or another section's name, is fine.
    assert_eq!(broken_rule(s, "x/outputs", false), None);
    assert_eq!(broken_rule(s, "input/x", false), None);
    assert_eq!(broken_rule(s, "", true), None);
    assert_eq!(broken_rule(s, "a/b.c/Ü ñ", false), None);
}

#[test]
fn workbench_ids() {
    for ok in ["a", "0", "run-1_b", &"x".repeat(128)] {
        assert!(check_id(ok).is_ok(), "{ok}");
    }
    for bad in ["", "-a", "_a", "a/b", "a.b", "é", &"x".repeat(129), "a b"] {
        assert_eq!(check_id(bad).unwrap_err().code, "invalid_id", "{bad:?}");
    }
}

#[test]
fn key_codec_bytes() {
    // "ab/c": each byte plus one, NUL between components, 0x01 at the end.
    assert_eq!(key(["ab", "c"]), vec![b'a' + 1, b'b' + 1, 0, b'c' + 1, 1]);
    assert_eq!(prefix_key(["ab"]), vec![b'a' + 1, b'b' + 1, 0]);
    // A child's rollup sorts before its exact key, both before longer siblings.
    let dir_rollup = prefix_key(["a"]);
    let exact = key(["a"]);
    let sibling = key(["a0"]);
    assert!(dir_rollup < exact && exact < sibling);
    assert_eq!(decode_key(&key(["ab", "c"])).unwrap(), vec!["ab", "c"]);
    // Malformed keys are refused, never a panic.
    for bad in [
        &b""[..],
        b"\x02",
        b"\x00\x01",
        b"\x02\x00\x00\x03\x01",
        b"\x02\x01\x02\x01",
        b"\xff\x01",
    ] {
        assert!(decode_key(bad).is_err(), "{bad:?}");
    }
}

fn component() -> impl Strategy<Value = String> {
    // Any UTF-8 except NUL and `/`, never empty.
    proptest::string::string_regex("[^\u{0}/]{1,6}").unwrap()
}

fn path() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(component(), 1..4)
}

/// The order the codec promises: component-wise bytes, and a path's
/// descendants before the path itself.
fn model_cmp(a: &[String], b: &[String]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        match x.as_bytes().cmp(y.as_bytes()) {
            Ordering::Equal => continue,
            o => return o,
        }
    }
    b.len().cmp(&a.len())
}

proptest! {
    #[test]
    fn key_round_trips(p in path()) {
        let k = key(p.iter().map(String::as_str));
        prop_assert_eq!(decode_key(&k).unwrap(), p);
    }

    #[test]
    fn key_order_and_prefix_freedom(a in path(), b in path()) {
        let ka = key(a.iter().map(String::as_str));
        let kb = key(b.iter().map(String::as_str));
        prop_assert_eq!(ka.cmp(&kb), model_cmp(&a, &b));
        if a != b {
            prop_assert!(!kb.starts_with(&ka), "an exact key is a strict prefix of another");
        }
        // Every descendant of `a` starts with a's prefix key and sorts before a.
        let mut child = a.clone();
        child.extend(b.iter().cloned());
        let kc = key(child.iter().map(String::as_str));
        prop_assert!(kc.starts_with(&prefix_key(a.iter().map(String::as_str))));
        prop_assert!(kc < ka);
    }

    #[test]
    fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..24)) {
        let _ = decode_key(&bytes);
    }
}

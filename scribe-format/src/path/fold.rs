//! Collision profile 1 (specification section 5).
//!
//! The fold of a string is `NFC(casefold(NFD(s)))` where `casefold` maps each
//! code point through the Unicode 17.0.0 default full case folding
//! (CaseFolding.txt statuses C + F, [`super::case_folding`]) and additionally
//! maps dotless i (U+0131) to ASCII `i`. Normalization uses the Unicode 17.0.0
//! data pinned in `unicode-normalization` 0.1.25.
//!
//! The folded output may not be in NFD (a few foldings produce precomposed
//! characters); that is harmless because NFC starts with a full canonical
//! decomposition and reordering of its input.
//!
//! Rust's built-in case mappings (`char::to_lowercase` and friends) follow the
//! Unicode version of the toolchain and are not case folding; they are never
//! used here.

use unicode_normalization::UnicodeNormalization;

use super::case_folding::CASE_FOLDING;

/// The collision profile this module implements, as stored in repository
/// `meta["path-fold-profile"]` (little-endian u32).
pub const PROFILE: u32 = 1;

/// Dotless i, which profile 1 maps to ASCII `i` on top of case folding
/// (NTFS upcase equivalence: `ı` upcases to `I`, which folds to `i`).
const DOTLESS_I: char = '\u{0131}';

/// The default full case folding of one code point (statuses C + F) under
/// profile 1, or `None` when the code point folds to itself.
///
/// Dotless i (U+0131), which has no C or F entry, yields `Some(&['i'])`.
pub fn fold_char(c: char) -> Option<&'static [char]> {
    if c == DOTLESS_I {
        return Some(&['i']);
    }
    CASE_FOLDING
        .binary_search_by_key(&u32::from(c), |&(cp, _, _)| cp)
        .ok()
        .map(|i| CASE_FOLDING[i].2)
}

/// Append the profile-1 fold of `s` to `out`.
///
/// `out` is the caller's buffer so that hot loops can reuse an allocation.
pub fn fold_into(s: &str, out: &mut String) {
    if s.is_ascii() {
        // NFD and NFC are the identity on ASCII, and the only foldings of
        // ASCII code points are `A`..=`Z` to `a`..=`z` (status C).
        out.extend(s.chars().map(|c| c.to_ascii_lowercase()));
        return;
    }
    let folded = s.nfd().flat_map(FoldChar::new);
    out.extend(folded.nfc());
}

/// The profile-1 fold of `s` as a string.
pub fn fold(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    fold_into(s, &mut out);
    out
}

/// The fold of one character as an iterator (its folding or itself).
enum FoldChar {
    Mapped(std::slice::Iter<'static, char>),
    Same(Option<char>),
}

impl FoldChar {
    fn new(c: char) -> FoldChar {
        match fold_char(c) {
            Some(mapped) => FoldChar::Mapped(mapped.iter()),
            None => FoldChar::Same(Some(c)),
        }
    }
}

impl Iterator for FoldChar {
    type Item = char;

    fn next(&mut self) -> Option<char> {
        match self {
            FoldChar::Mapped(iter) => iter.next().copied(),
            FoldChar::Same(c) => c.take(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_fast_path_agrees_with_the_table() {
        for b in 0u8..0x80 {
            let c = char::from(b);
            let via_table: String = FoldChar::new(c).collect();
            assert_eq!(fold(c.encode_utf8(&mut [0; 4])), via_table, "{b:#x}");
        }
    }

    #[test]
    fn table_is_strictly_ascending() {
        assert!(CASE_FOLDING.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn dotless_i_is_not_in_the_table() {
        // If a future table gained an entry, the extra rule would shadow it.
        assert!(CASE_FOLDING.iter().all(|&(cp, _, _)| cp != 0x131));
    }
}

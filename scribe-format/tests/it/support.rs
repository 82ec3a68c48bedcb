//! Golden fixture helpers shared by every test module.
//!
//! A fixture is `fixtures/<area>/<name>.bin` (exact bytes) listed in
//! `fixtures/<area>/IDENTITIES` as `<name>.bin <identity hex>` (or `-` when
//! the encoding has no identity). Tests build each fixture's value
//! deterministically, encode it, and compare with the committed bytes and
//! identity; then decode the committed bytes, re-encode, and compare again.
//! `SCRIBE_BLESS=1 cargo test -p scribe-format` rewrites the files from the
//! encoder (review the diff before committing: the bytes are the contract).

use std::collections::BTreeMap;
use std::path::PathBuf;

/// The repository's `fixtures/<area>` directory.
pub fn fixture_dir(area: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("fixtures")
        .join(area)
}

fn blessing() -> bool {
    std::env::var_os("SCRIBE_BLESS").is_some_and(|v| v == "1")
}

/// One golden fixture: its file name (without `.bin`), the encoder's bytes,
/// and the identity (lowercase hex) or `None`.
pub struct Golden {
    pub name: String,
    pub bytes: Vec<u8>,
    pub identity: Option<String>,
}

/// Compare (or with `SCRIBE_BLESS=1`, write) every fixture of an area.
/// Returns the committed bytes of each fixture by name for further checks.
pub fn check_area(area: &str, goldens: &[Golden]) -> BTreeMap<String, Vec<u8>> {
    let dir = fixture_dir(area);
    let index_path = dir.join("IDENTITIES");
    if blessing() {
        std::fs::create_dir_all(&dir).unwrap();
        let mut index = String::new();
        for g in goldens {
            std::fs::write(dir.join(format!("{}.bin", g.name)), &g.bytes).unwrap();
            index.push_str(&format!(
                "{}.bin {}\n",
                g.name,
                g.identity.as_deref().unwrap_or("-")
            ));
        }
        std::fs::write(&index_path, index).unwrap();
    }
    let index = std::fs::read_to_string(&index_path)
        .unwrap_or_else(|e| panic!("{}: {e}", index_path.display()));
    let mut listed = BTreeMap::new();
    for line in index.lines().filter(|l| !l.trim().is_empty()) {
        let (file, id) = line
            .split_once(' ')
            .expect("IDENTITIES line is `<file> <id>`");
        listed.insert(file.to_string(), id.to_string());
    }
    assert_eq!(
        listed.len(),
        goldens.len(),
        "{area}: IDENTITIES lists {} fixtures, the test builds {}",
        listed.len(),
        goldens.len()
    );
    let mut out = BTreeMap::new();
    for g in goldens {
        let file = format!("{}.bin", g.name);
        let committed =
            std::fs::read(dir.join(&file)).unwrap_or_else(|e| panic!("{area}/{file}: {e}"));
        assert!(
            committed == g.bytes,
            "{area}/{file}: encoder output differs from the committed fixture"
        );
        let want = listed
            .get(&file)
            .unwrap_or_else(|| panic!("{area}/{file} is not listed in IDENTITIES"));
        assert_eq!(
            want,
            g.identity.as_deref().unwrap_or("-"),
            "{area}/{file}: identity"
        );
        out.insert(g.name.clone(), committed);
    }
    out
}

/// Every strict prefix and a one-byte extension of `bytes` must be refused.
pub fn assert_refuses_truncation_and_trailing<T, E: std::fmt::Debug>(
    what: &str,
    bytes: &[u8],
    decode: impl Fn(&[u8]) -> Result<T, E>,
) {
    for cut in 0..bytes.len() {
        assert!(
            decode(&bytes[..cut]).is_err(),
            "{what}: a prefix of {cut} of {} bytes was accepted",
            bytes.len()
        );
    }
    for extra in [0u8, 1, 0xff] {
        let mut longer = bytes.to_vec();
        longer.push(extra);
        assert!(
            decode(&longer).is_err(),
            "{what}: a trailing byte {extra:#x} was accepted"
        );
    }
}

//! Tests for `scribe_format::descriptor`.

use super::support::{assert_refuses_truncation_and_trailing, check_area, Golden};
use proptest::prelude::*;
use scribe_format::descriptor::{
    DataRoot, Descriptor, Kind, LineEnding, Migrated, ObjectStore, Repository, Restored, Workspace,
    ENGINE_REDB_4, FEATURE_AUTH_OWNERSHIP_V1, FEATURE_LZ4,
};
use scribe_format::envelope::Compression;
use scribe_format::error::{ErrorCode, FormatError};
use scribe_format::id::{RepositoryId, WorkspaceId};

fn data_root_fields() -> DataRoot {
    DataRoot {
        catalog_schema: 1,
        repository_schema: 3,
        object_store: 1,
        envelope: 1,
        engine: ENGINE_REDB_4.to_owned(),
        incarnation: [0x3c; 16],
        created_ms: 1_764_633_600_000,
        restored: None,
    }
}

fn repository_fields() -> Repository {
    Repository {
        repository_id: RepositoryId([0xa5; 16]),
        name: "Game Assets".to_owned(),
        schema: 3,
        engine: ENGINE_REDB_4.to_owned(),
        object_store: 1,
        created_ms: 1_764_633_600_123,
        migrated: None,
    }
}

fn object_store_fields(compression: Compression) -> ObjectStore {
    ObjectStore {
        layout: 1,
        envelope: 1,
        small_object_threshold: 16_777_236,
        pack_seal_bytes: 268_435_456,
        compression,
    }
}

fn workspace_fields() -> Workspace {
    Workspace {
        schema: 2,
        engine: ENGINE_REDB_4.to_owned(),
        workspace_id: WorkspaceId([0x0f; 16]),
    }
}

fn golden(name: &str, d: &Descriptor) -> Golden {
    Golden {
        name: name.to_owned(),
        bytes: d.encode(),
        identity: None,
    }
}

fn goldens() -> Vec<Golden> {
    let data_root = Descriptor::new_data_root(&data_root_fields()).unwrap();
    let mut restored = Descriptor::new_data_root(&DataRoot {
        restored: Some(Restored {
            from_incarnation: [0x77; 16],
            ms: 1_764_700_000_000,
        }),
        ..data_root_fields()
    })
    .unwrap();
    restored
        .add_required_feature(FEATURE_AUTH_OWNERSHIP_V1)
        .unwrap();
    let repository = Descriptor::new_repository(&repository_fields()).unwrap();
    let migrated = Descriptor::new_repository(&Repository {
        migrated: Some(Migrated {
            from_schema: 2,
            ms: 1_764_800_000_000,
        }),
        ..repository_fields()
    })
    .unwrap();
    let store = Descriptor::new_object_store(&object_store_fields(Compression::None)).unwrap();
    let lz4 = Descriptor::new_object_store(&object_store_fields(Compression::Lz4)).unwrap();
    let workspace = Descriptor::new_workspace(&workspace_fields()).unwrap();
    let mut crlf = workspace.clone();
    crlf.set_line_ending(LineEnding::CrLf);
    let mut unknown = Descriptor::new_repository(&repository_fields()).unwrap();
    unknown.set("x-studio-region", "eu-west").unwrap();
    unknown.add_required_feature("recovery-journal-v2").unwrap();
    unknown
        .add_required_feature("atomic-publication-v2")
        .unwrap();
    unknown
        .set("x-note", "kept = verbatim, even with = signs")
        .unwrap();
    vec![
        golden("data-root", &data_root),
        golden("data-root-restored", &restored),
        golden("repository", &repository),
        golden("repository-migrated", &migrated),
        golden("object-store", &store),
        golden("object-store-lz4", &lz4),
        golden("workspace", &workspace),
        golden("workspace-crlf", &crlf),
        golden("unknown-keys", &unknown),
    ]
}

/// Descriptors are line records: a prefix ending exactly after a line can
/// be a valid, shorter descriptor. Every other prefix must be refused, and
/// a line-boundary prefix either is refused or holds exactly the first
/// lines. Appended bytes are always refused.
fn assert_line_prefixes_only(name: &str, bytes: &[u8]) {
    let full = Descriptor::parse(bytes).unwrap();
    let full_entries: Vec<(String, String)> = full
        .entries()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    for cut in 0..bytes.len() {
        let prefix = &bytes[..cut];
        match Descriptor::parse(prefix) {
            Err(_) => {}
            Ok(shorter) => {
                assert_eq!(
                    prefix.last(),
                    Some(&b'\n'),
                    "{name}: cut {cut} accepted mid-line"
                );
                let entries: Vec<(String, String)> = shorter
                    .entries()
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect();
                assert_eq!(
                    entries[..],
                    full_entries[..entries.len()],
                    "{name}: cut {cut}"
                );
                assert_eq!(shorter.encode(), prefix, "{name}: cut {cut}");
            }
        }
    }
    for extra in [0u8, 1, 0xff, b'a', b'\n', b'\r'] {
        let mut longer = bytes.to_vec();
        longer.push(extra);
        assert!(
            Descriptor::parse(&longer).is_err(),
            "{name}: trailing {extra:#x} accepted"
        );
    }
}

#[test]
fn golden_fixtures() {
    let committed = check_area("descriptor", &goldens());
    for (name, bytes) in &committed {
        let d = Descriptor::parse(bytes).unwrap();
        assert_eq!(&d.encode(), bytes, "{name}: re-encode");
        assert_line_prefixes_only(name, bytes);
    }
    // Fixtures whose every line is mandatory refuse every strict prefix.
    for name in [
        "data-root",
        "repository",
        "object-store",
        "workspace",
        "workspace-crlf",
    ] {
        assert_refuses_truncation_and_trailing(name, &committed[name], Descriptor::parse);
    }
    // Typed accessors give back the constructor's fields.
    let d = Descriptor::parse(&committed["data-root-restored"]).unwrap();
    let fields = d.data_root().unwrap();
    assert_eq!(fields.restored.unwrap().from_incarnation, [0x77; 16]);
    assert_eq!(d.required_features(), vec![FEATURE_AUTH_OWNERSHIP_V1]);
    let d = Descriptor::parse(&committed["repository-migrated"]).unwrap();
    assert_eq!(d.repository().unwrap().migrated.unwrap().from_schema, 2);
    let d = Descriptor::parse(&committed["object-store-lz4"]).unwrap();
    assert_eq!(d.object_store().unwrap().compression, Compression::Lz4);
    assert_eq!(d.required_features(), vec![FEATURE_LZ4]);
    let d = Descriptor::parse(&committed["workspace-crlf"]).unwrap();
    assert_eq!(d.line_ending(), LineEnding::CrLf);
    assert_eq!(d.workspace().unwrap(), workspace_fields());
    let d = Descriptor::parse(&committed["unknown-keys"]).unwrap();
    assert_eq!(d.get("x-studio-region"), Some("eu-west"));
    assert_eq!(
        d.required_features(),
        vec!["recovery-journal-v2", "atomic-publication-v2"]
    );
}

const WORKSPACE_TEXT: &str = "scribe-descriptor = 1\n\
kind = workspace\n\
schema = 2\n\
engine = redb-4\n\
workspace-id = 0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f\n";

#[test]
fn workspace_from_spec_text() {
    let built = Descriptor::new_workspace(&workspace_fields()).unwrap();
    assert_eq!(built.encode(), WORKSPACE_TEXT.as_bytes());
    let parsed = Descriptor::parse(WORKSPACE_TEXT.as_bytes()).unwrap();
    assert_eq!(parsed, built);
    assert_eq!(parsed.kind(), Kind::Workspace);
    assert_eq!(parsed.get("kind"), Some("workspace"));
    assert_eq!(parsed.get("schema"), Some("2"));
    assert_eq!(parsed.get("scribe-descriptor"), None);
    let crlf = WORKSPACE_TEXT.replace('\n', "\r\n");
    let parsed = Descriptor::parse(crlf.as_bytes()).unwrap();
    assert_eq!(parsed.line_ending(), LineEnding::CrLf);
    assert_eq!(parsed.encode(), crlf.as_bytes());
}

#[test]
fn unknown_keys_keep_their_positions() {
    let text = "scribe-descriptor = 1\r\n\
x-first = 1\r\n\
kind = object-store\r\n\
layout = 1\r\n\
zz-unknown = anything: goes, here\r\n\
envelope = 1\r\n\
required-features = lz4,future-thing\r\n\
small-object-threshold = 16777236\r\n\
pack-seal-bytes = 268435456\r\n\
compression = lz4\r\n";
    let mut d = Descriptor::parse(text.as_bytes()).unwrap();
    assert_eq!(d.encode(), text.as_bytes());
    // A rewrite keeps the order and the CRLF style; values change in place.
    d.set("pack-seal-bytes", "1048576").unwrap();
    d.set("x-first", "2").unwrap();
    d.set("x-added", "yes").unwrap();
    let expected = text
        .replace("pack-seal-bytes = 268435456", "pack-seal-bytes = 1048576")
        .replace("x-first = 1", "x-first = 2")
        + "x-added = yes\r\n";
    assert_eq!(String::from_utf8(d.encode()).unwrap(), expected);
    assert_eq!(d.remove("x-added").unwrap().as_deref(), Some("yes"));
    assert_eq!(d.remove("x-missing").unwrap(), None);
    // Unknown features refuse mutation; known ones do not.
    let err = d.check_mutation(&["lz4"]).unwrap_err();
    assert_eq!(
        err,
        FormatError::UnsupportedFeature {
            feature: "future-thing".to_owned()
        }
    );
    assert_eq!(err.code(), ErrorCode::UnsupportedFeature);
    d.check_mutation(&["future-thing", "lz4", "other"]).unwrap();
    Descriptor::new_workspace(&workspace_fields())
        .unwrap()
        .check_mutation(&[])
        .unwrap();
}

fn refuse(text: &str, why: &str) -> FormatError {
    match Descriptor::parse(text.as_bytes()) {
        Ok(_) => panic!("accepted: {why}"),
        Err(e) => e,
    }
}

#[test]
fn syntax_rules() {
    let ok = WORKSPACE_TEXT;
    assert!(Descriptor::parse(ok.as_bytes()).is_ok());
    refuse("", "empty");
    refuse("\n", "blank first line");
    refuse(ok.trim_end_matches('\n'), "no final terminator");
    refuse(&format!("\u{feff}{ok}"), "byte-order mark");
    refuse(
        &ok.replacen("scribe-descriptor = 1", "scribe-descriptor=1", 1),
        "header spacing",
    );
    refuse(&ok.replacen("scribe-descriptor = 1\n", "", 1), "no header");
    refuse(&format!("kind = workspace\n{ok}"), "header not first");
    let e = refuse(
        &ok.replacen("scribe-descriptor = 1", "scribe-descriptor = 2", 1),
        "version 2",
    );
    assert!(matches!(
        e,
        FormatError::UnsupportedVersion { version: 2, .. }
    ));
    refuse(&format!("{ok}scribe-descriptor = 1\n"), "header twice");
    refuse(&ok.replace("kind = workspace\n", ""), "no kind");
    refuse(
        &ok.replace("kind = workspace", "kind = workbench"),
        "unknown kind",
    );
    refuse(&format!("{ok}schema = 2\n"), "duplicate key");
    refuse(&format!("{ok}kind = workspace\n"), "duplicate kind");
    refuse(&format!("{ok}\n"), "trailing blank line");
    refuse(&ok.replace("schema = 2\n", "schema = 2\n\n"), "blank line");
    refuse(&ok.replace("schema = 2", "schema=2"), "no spaces");
    refuse(
        &ok.replace("schema = 2", "schema  = 2"),
        "two spaces before",
    );
    refuse(&ok.replace("schema = 2", "schema =  2"), "two spaces after");
    refuse(&ok.replace("schema = 2", " schema = 2"), "leading space");
    refuse(&ok.replace("schema = 2", "schema = 2 "), "trailing space");
    refuse(&ok.replace("schema = 2", "schema = "), "empty value");
    refuse(&ok.replace("schema = 2", "schema ="), "no value");
    refuse(&ok.replace("schema = 2", "Schema = 2"), "uppercase key");
    refuse(&ok.replace("schema = 2", "sch_ema = 2"), "underscore key");
    refuse(&ok.replace("schema = 2", "# comment"), "comment");
    refuse(&format!("{ok}x-tab = a\tb\n"), "control character");
    refuse(&ok.replacen('\n', "\r\n", 2), "mixed terminators");
    refuse(
        &ok.replace("schema = 2\n", "schema = 2\r\n"),
        "CRLF after LF",
    );
    refuse(&ok.replace("schema = 2", "schema = 2\rx"), "bare CR");
    let mut bytes = ok.as_bytes().to_vec();
    bytes.extend_from_slice(b"x-bin = \xff\n");
    assert!(matches!(
        Descriptor::parse(&bytes),
        Err(FormatError::NotUtf8 { .. })
    ));
    let big = format!("{ok}x-big = {}\n", "a".repeat(70_000));
    assert!(matches!(
        Descriptor::parse(big.as_bytes()),
        Err(FormatError::LimitExceeded { .. })
    ));
    // Values may contain ` = ` and non-ASCII text.
    let fine = format!("{ok}x-text = a = b, ünïcödé\n");
    assert_eq!(
        Descriptor::parse(fine.as_bytes()).unwrap().get("x-text"),
        Some("a = b, ünïcödé")
    );
}

#[test]
fn kind_rules() {
    let ok = WORKSPACE_TEXT;
    refuse(&ok.replace("schema = 2\n", ""), "missing mandatory key");
    refuse(&ok.replace("schema = 2", "schema = 02"), "leading zero");
    refuse(&ok.replace("schema = 2", "schema = +2"), "sign");
    refuse(
        &ok.replace("schema = 2", "schema = 4294967296"),
        "u32 overflow",
    );
    refuse(&ok.replace("schema = 2", "schema = two"), "not a number");
    refuse(
        &ok.replace(
            "0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f",
            "0F0F0F0F0F0F0F0F0F0F0F0F0F0F0F0F",
        ),
        "uppercase hex",
    );
    refuse(
        &ok.replace("0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f", "0f0f"),
        "short hex",
    );
    refuse(
        &ok.replace("engine = redb-4", "engine = redb 4"),
        "engine token",
    );
    refuse(
        &format!("{ok}required-features = a, b\n"),
        "feature spacing",
    );
    refuse(&format!("{ok}required-features = a,,b\n"), "empty feature");
    refuse(
        &format!("{ok}required-features = a,b,a\n"),
        "duplicate feature",
    );
    refuse(&format!("{ok}required-features = A\n"), "uppercase feature");
    assert!(Descriptor::parse(format!("{ok}required-features = a,b\n").as_bytes()).is_ok());

    let lz4 = String::from_utf8(
        Descriptor::new_object_store(&object_store_fields(Compression::Lz4))
            .unwrap()
            .encode(),
    )
    .unwrap();
    refuse(
        &lz4.replace("required-features = lz4\n", ""),
        "lz4 without the feature",
    );
    refuse(
        &lz4.replace("compression = lz4", "compression = zstd"),
        "unknown compression",
    );
    refuse(
        &lz4.replace(
            "small-object-threshold = 16777236",
            "small-object-threshold = 18446744073709551616",
        ),
        "u64 overflow",
    );

    let restored = Descriptor::new_data_root(&DataRoot {
        restored: Some(Restored {
            from_incarnation: [1; 16],
            ms: 5,
        }),
        ..data_root_fields()
    })
    .unwrap();
    let text = String::from_utf8(restored.encode()).unwrap();
    refuse(
        &text.replace("restored-ms = 5\n", ""),
        "half a restore pair",
    );

    let long_name = Repository {
        name: "n".repeat(129),
        ..repository_fields()
    };
    assert!(Descriptor::new_repository(&long_name).is_err());
    let bad_engine = Workspace {
        engine: "Redb".to_owned(),
        ..workspace_fields()
    };
    assert!(Descriptor::new_workspace(&bad_engine).is_err());

    // Typed accessors refuse another kind.
    let ws = Descriptor::parse(ok.as_bytes()).unwrap();
    assert!(ws.repository().is_err());
    assert!(ws.data_root().is_err());
    assert!(ws.object_store().is_err());
}

#[test]
fn set_and_remove_rules() {
    let mut d = Descriptor::new_object_store(&object_store_fields(Compression::None)).unwrap();
    let before = d.clone();
    assert!(d.set("layout", "x").is_err());
    assert!(d.set("kind", "workspace").is_err());
    assert!(d.set("scribe-descriptor", "2").is_err());
    assert!(
        d.set("compression", "lz4").is_err(),
        "compression is immutable"
    );
    assert!(d.set("Bad", "1").is_err());
    assert!(d.set("x-multi", "a\nb").is_err());
    assert!(d.set("x-empty", "").is_err());
    assert!(d.remove("layout").is_err());
    assert!(d.remove("kind").is_err());
    assert_eq!(d, before, "refused changes leave the descriptor unchanged");
    d.set("compression", "none").unwrap();
    d.set("kind", "object-store").unwrap();
    assert_eq!(d, before, "setting the current value is a no-op");

    let mut lz4 = Descriptor::new_object_store(&object_store_fields(Compression::Lz4)).unwrap();
    assert!(
        lz4.remove("required-features").is_err(),
        "lz4 stores keep the feature"
    );
    assert!(lz4.set("required-features", "other").is_err());
    lz4.add_required_feature("other").unwrap();
    lz4.add_required_feature("other").unwrap();
    assert_eq!(lz4.get("required-features"), Some("lz4,other"));

    let mut repo = Descriptor::new_repository(&repository_fields()).unwrap();
    assert!(
        repo.set("migrated-ms", "7").is_err(),
        "pair needs both keys"
    );
    assert!(repo.set("migrated-from-schema", "2").is_err());
    let mut repo = Descriptor::new_repository(&Repository {
        migrated: Some(Migrated {
            from_schema: 2,
            ms: 7,
        }),
        ..repository_fields()
    })
    .unwrap();
    assert!(repo.remove("migrated-ms").is_err());
    repo.set("schema", "4").unwrap();
    assert_eq!(repo.repository().unwrap().schema, 4);
}

#[test]
fn version_check_names_migrate() {
    let d = Descriptor::new_repository(&repository_fields()).unwrap();
    d.version_check("schema", "3").unwrap();
    d.version_check("engine", ENGINE_REDB_4).unwrap();
    let err = d.version_check("schema", "4").unwrap_err();
    assert_eq!(err.code(), ErrorCode::UnsupportedVersion);
    assert_eq!(err.found.as_deref(), Some("3"));
    let message = err.to_string();
    assert!(message.contains("scribe-server migrate"), "{message}");
    assert!(message.contains("schema"), "{message}");
    let missing = d.version_check("snapshot-profile", "3").unwrap_err();
    assert_eq!(missing.found, None);
    assert!(missing.to_string().contains("scribe-server migrate"));
}

proptest! {
    #[test]
    fn unknown_keys_round_trip(
        extra in proptest::collection::btree_map("x-[a-z0-9-]{1,12}", "[!-~]([ -~]{0,30}[!-~])?", 0..8),
        crlf in any::<bool>(),
    ) {
        let mut d = Descriptor::new_workspace(&workspace_fields()).unwrap();
        for (key, value) in &extra {
            d.set(key, value).unwrap();
        }
        if crlf {
            d.set_line_ending(LineEnding::CrLf);
        }
        let bytes = d.encode();
        let parsed = Descriptor::parse(&bytes).unwrap();
        prop_assert_eq!(&parsed, &d);
        prop_assert_eq!(parsed.encode(), bytes);
        for (key, value) in &extra {
            prop_assert_eq!(parsed.get(key), Some(value.as_str()));
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = Descriptor::parse(&bytes);
        let mut prefixed = WORKSPACE_TEXT.as_bytes().to_vec();
        prefixed.extend_from_slice(&bytes);
        let _ = Descriptor::parse(&prefixed);
    }

    #[test]
    fn arbitrary_lines_never_panic(lines in proptest::collection::vec("[ -~\r\u{e9}]{0,40}", 0..10)) {
        let mut text = WORKSPACE_TEXT.to_owned();
        for line in lines {
            text.push_str(&line);
            text.push('\n');
        }
        if let Ok(d) = Descriptor::parse(text.as_bytes()) {
            prop_assert_eq!(d.encode(), text.into_bytes());
        }
    }
}

/// Guards duplicate detection over the largest files accepted: a key
/// repeated thousands of lines later is still found.
#[test]
fn duplicates_are_found_among_many_lines() {
    let mut text = WORKSPACE_TEXT.to_owned();
    for i in 0..5000 {
        text.push_str(&format!("x-{i} = v\n"));
    }
    let d = Descriptor::parse(text.as_bytes()).unwrap();
    assert_eq!(d.get("x-4999"), Some("v"));
    text.push_str("x-17 = w\n");
    refuse(&text, "duplicate among many");
}

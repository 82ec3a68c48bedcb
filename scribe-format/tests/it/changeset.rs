//! Tests for `scribe_format::changeset` (specification section 4.2).

use proptest::prelude::*;
use scribe_format::changeset::{
    rule, Action, ChangeSet, ChangeSetRef, Entry, FileState, Mode, MoveSource, MIN_ENTRY_LEN,
};
use scribe_format::{ChangeSetId, FileContentId, FormatError, ManifestId};

use super::support::{assert_refuses_truncation_and_trailing, check_area, Golden};

fn state(seed: &str, size: u64, mode: Mode) -> FileState {
    FileState {
        manifest: ManifestId::of_payload(seed.as_bytes()),
        content: FileContentId::of(seed.as_bytes()),
        size,
        mode,
    }
}

fn goldens() -> Vec<(&'static str, ChangeSet)> {
    vec![
        ("empty", ChangeSet::default()),
        (
            "add-edit-delete",
            ChangeSet::new(vec![
                Entry::add("assets/hero.png", state("hero", 1_234_567, Mode::Regular)),
                Entry::edit("docs/readme.txt", 7, state("readme", 42, Mode::Regular)),
                Entry::delete("old/gone.bin", 3),
            ]),
        ),
        (
            "move-with-paired-delete",
            ChangeSet::new(vec![
                Entry::add("art/new.psd", state("psd", 99, Mode::Regular))
                    .moved_from("art/old.psd", 5),
                Entry::delete("art/old.psd", 5),
            ]),
        ),
        (
            "keeps",
            ChangeSet::new(vec![
                Entry::keep("levels/absent.map", 0),
                Entry::edit("levels/one.map", 11, state("one", 0, Mode::Regular)),
                Entry::keep("levels/two.map", 9),
            ]),
        ),
        (
            "executable",
            ChangeSet::new(vec![Entry::add(
                "tools/build.sh",
                state("build", 300, Mode::Executable),
            )]),
        ),
        (
            "non-ascii-path",
            ChangeSet::new(vec![Entry::add(
                "Ünïcödé/日本語/façade.txt",
                state("unicode", 5, Mode::Regular),
            )]),
        ),
    ]
}

#[test]
fn golden_fixtures() {
    let values = goldens();
    let list: Vec<Golden> = values
        .iter()
        .map(|(name, c)| Golden {
            name: name.to_string(),
            bytes: c.encode().unwrap(),
            identity: Some(c.id().unwrap().to_hex()),
        })
        .collect();
    let committed = check_area("changeset", &list);
    for (name, value) in &values {
        let bytes = &committed[*name];
        let decoded = ChangeSet::decode(bytes).unwrap();
        assert_eq!(&decoded, value, "{name}");
        assert_eq!(&decoded.encode().unwrap(), bytes, "{name}: re-encode");
        assert_eq!(decoded.id().unwrap(), ChangeSetId::of_payload(bytes));
        // The store's streaming identity (id.rs) agrees with this module's.
        let object =
            scribe_format::id::object_identity(scribe_format::ObjectKind::ChangeSet, bytes)
                .unwrap();
        assert_eq!(
            object.digest,
            value.id().unwrap().0,
            "{name}: object identity"
        );
        let view = ChangeSetRef::decode(bytes).unwrap();
        assert_eq!(view.to_change_set(), *value, "{name}: borrowed view");
        assert_eq!(view.id(), value.id().unwrap());
        assert_eq!(view.has_keeps(), value.has_keeps());
        assert_eq!(view.entries().len(), value.entries.len());
        assert_eq!(view.as_bytes().as_ptr(), bytes.as_ptr());
        for entry in &value.entries {
            assert_eq!(view.get(&entry.path), Some(&entry.to_ref()));
        }
        assert_refuses_truncation_and_trailing(name, bytes, ChangeSet::decode);
    }
}

/// The move fixture built from the specification's table, not the encoder.
#[test]
fn move_bytes_by_hand() {
    let s = state("psd", 99, Mode::Regular);
    let mut want: Vec<u8> = vec![0x01, 0x00, 0x02, 0x00, 0x00, 0x00]; // version 1, 2 entries
                                                                      // entry 0: add "art/new.psd" moved from "art/old.psd" at 5
    want.extend_from_slice(&[11, 0]);
    want.extend_from_slice(b"art/new.psd");
    want.push(1); // add
    want.extend_from_slice(&[0; 8]); // expected base 0
    want.extend_from_slice(&s.manifest.0);
    want.extend_from_slice(&s.content.0);
    want.extend_from_slice(&[99, 0, 0, 0, 0, 0, 0, 0]);
    want.push(0); // regular
    want.push(1); // move present
    want.extend_from_slice(&[11, 0]);
    want.extend_from_slice(b"art/old.psd");
    want.extend_from_slice(&[5, 0, 0, 0, 0, 0, 0, 0]);
    // entry 1: delete "art/old.psd" base 5
    want.extend_from_slice(&[11, 0]);
    want.extend_from_slice(b"art/old.psd");
    want.push(3);
    want.extend_from_slice(&[5, 0, 0, 0, 0, 0, 0, 0]);
    want.push(0); // no move
    let value = &goldens()[2].1;
    assert_eq!(value.encode().unwrap(), want);
    let mut hasher = blake3::Hasher::new();
    hasher.update(b"scribe:changeset:v1\0");
    hasher.update(&want);
    assert_eq!(value.id().unwrap().0, *hasher.finalize().as_bytes());
}

#[test]
fn keep_and_executable_bytes_by_hand() {
    let cs = ChangeSet::new(vec![Entry::keep("k", 0x0102)]);
    let want = vec![
        1, 0, 1, 0, 0, 0, // version, count
        1, 0, b'k', 4, 0x02, 0x01, 0, 0, 0, 0, 0, 0, 0,
    ];
    assert_eq!(cs.encode().unwrap(), want);
    assert_eq!(want.len(), 6 + MIN_ENTRY_LEN);

    let bytes = goldens()[4].1.encode().unwrap();
    // version 2 + count 4 + str16 "tools/build.sh" (2 + 14) + action + base + ids + size, then mode.
    let mode_at = 6 + 16 + 1 + 8 + 64 + 8;
    assert_eq!(bytes[mode_at], 1, "executable mode byte");
    assert_eq!(bytes[mode_at + 1], 0, "no move");
    assert_eq!(bytes.len(), mode_at + 2);
}

#[test]
fn keeps_are_reported_and_not_counted() {
    let keeps = &goldens()[3].1;
    assert!(keeps.has_keeps());
    assert_eq!(keeps.counted_entries(), 1);
    assert!(!goldens()[1].1.has_keeps());
    assert_eq!(goldens()[1].1.counted_entries(), 3);
    assert_eq!(keeps.get("levels/two.map").unwrap().action, Action::Keep);
    assert!(keeps.get("levels/three.map").is_none());
}

fn what(e: &FormatError) -> &'static str {
    match e {
        FormatError::Invalid { what, .. }
        | FormatError::InvalidValue { what, .. }
        | FormatError::LimitExceeded { what, .. }
        | FormatError::UnsupportedVersion { what, .. }
        | FormatError::Truncated { what, .. }
        | FormatError::TrailingBytes { what, .. } => what,
        other => panic!("unexpected error {other:?}"),
    }
}

/// Checks that both the encoder and (via hand-made bytes) the decoder
/// refuse `cs`, naming `rule`.
fn refused(cs: ChangeSet, expected: &str) {
    let err = cs.encode().unwrap_err();
    assert_eq!(what(&err), expected, "encode: {err}");
    let bytes = raw(&cs);
    let err = ChangeSet::decode(&bytes).unwrap_err();
    assert_eq!(what(&err), expected, "decode: {err}");
}

/// Encode without validation, as a hostile peer would.
fn raw(cs: &ChangeSet) -> Vec<u8> {
    let mut out = vec![1, 0];
    out.extend_from_slice(&(cs.entries.len() as u32).to_le_bytes());
    for e in &cs.entries {
        out.extend_from_slice(&(e.path.len() as u16).to_le_bytes());
        out.extend_from_slice(e.path.as_bytes());
        out.push(e.action as u8);
        out.extend_from_slice(&e.expected_base.to_le_bytes());
        if matches!(e.action, Action::Add | Action::Edit) {
            let s = e.state.unwrap_or(state("filler", 1, Mode::Regular));
            out.extend_from_slice(&s.manifest.0);
            out.extend_from_slice(&s.content.0);
            out.extend_from_slice(&s.size.to_le_bytes());
            out.push(s.mode as u8);
        }
        match &e.moved_from {
            None => out.push(0),
            Some(m) => {
                out.push(1);
                out.extend_from_slice(&(m.path.len() as u16).to_le_bytes());
                out.extend_from_slice(m.path.as_bytes());
                out.extend_from_slice(&m.change.to_le_bytes());
            }
        }
    }
    out
}

fn s() -> FileState {
    state("x", 1, Mode::Regular)
}

#[test]
fn refuses_unsorted_and_duplicate_paths() {
    refused(
        ChangeSet::new(vec![Entry::delete("b", 1), Entry::delete("a", 1)]),
        rule::ORDER,
    );
    refused(
        ChangeSet::new(vec![Entry::delete("a", 1), Entry::delete("a", 2)]),
        rule::ORDER,
    );
    // Byte order, not character order: "Z" (0x5a) sorts before "a".
    ChangeSet::new(vec![Entry::delete("Z", 1), Entry::delete("a", 1)])
        .encode()
        .unwrap();
    // "a/b" sorts after "a.b"? '.' is 0x2e, '/' is 0x2f.
    ChangeSet::new(vec![Entry::delete("a.b", 1), Entry::delete("a/b", 1)])
        .encode()
        .unwrap();
}

#[test]
fn refuses_non_canonical_paths() {
    for bad in ["", "/abs", "a//b", "a/./b", "../x", "a/"] {
        let err = ChangeSet::new(vec![Entry::delete(bad, 1)])
            .encode()
            .unwrap_err();
        assert_eq!(what(&err), rule::PATH, "{bad:?}");
    }
    refused(ChangeSet::new(vec![Entry::delete("a/../b", 1)]), rule::PATH);
    let long = "x".repeat(256);
    refused(ChangeSet::new(vec![Entry::delete(long, 1)]), rule::PATH);
}

#[test]
fn refuses_state_on_the_wrong_action() {
    let mut add = Entry::add("a", s());
    add.state = None;
    assert_eq!(
        what(&ChangeSet::new(vec![add]).encode().unwrap_err()),
        rule::STATE
    );
    let mut edit = Entry::edit("a", 1, s());
    edit.state = None;
    assert_eq!(
        what(&ChangeSet::new(vec![edit]).encode().unwrap_err()),
        rule::STATE
    );
    let mut delete = Entry::delete("a", 1);
    delete.state = Some(s());
    assert_eq!(
        what(&ChangeSet::new(vec![delete]).encode().unwrap_err()),
        rule::STATE
    );
    let mut keep = Entry::keep("a", 1);
    keep.state = Some(s());
    assert_eq!(
        what(&ChangeSet::new(vec![keep]).encode().unwrap_err()),
        rule::STATE
    );
}

#[test]
fn refuses_wrong_expected_base() {
    let mut add = Entry::add("a", s());
    add.expected_base = 3;
    refused(ChangeSet::new(vec![add]), rule::BASE);
    refused(ChangeSet::new(vec![Entry::edit("a", 0, s())]), rule::BASE);
    refused(ChangeSet::new(vec![Entry::delete("a", 0)]), rule::BASE);
    // A keep's base may be anything.
    for base in [0, 1, u64::MAX] {
        ChangeSet::new(vec![Entry::keep("a", base)])
            .encode()
            .unwrap();
    }
}

#[test]
fn refuses_file_state_named_dot_scribe() {
    refused(
        ChangeSet::new(vec![Entry::add(".scribe", s())]),
        rule::SCRIBE_NAME,
    );
    refused(
        ChangeSet::new(vec![Entry::edit("x/.scribe", 4, s())]),
        rule::SCRIBE_NAME,
    );
    refused(
        ChangeSet::new(vec![Entry::add("x/.SCRIBE", s())]),
        rule::SCRIBE_NAME,
    );
    // Deleting such a path, or files inside a `.scribe` directory, is fine.
    ChangeSet::new(vec![Entry::delete(".scribe", 2)])
        .encode()
        .unwrap();
    ChangeSet::new(vec![Entry::add(".scribe/config.toml", s())])
        .encode()
        .unwrap();
    ChangeSet::new(vec![Entry::add("x/.scribex", s())])
        .encode()
        .unwrap();
}

#[test]
fn refuses_size_beyond_one_pib() {
    let big = state("big", (1 << 50) + 1, Mode::Regular);
    refused(ChangeSet::new(vec![Entry::add("a", big)]), rule::SIZE);
    ChangeSet::new(vec![Entry::add("a", state("max", 1 << 50, Mode::Regular))])
        .encode()
        .unwrap();
}

#[test]
fn refuses_bad_action_mode_and_move_flag_bytes() {
    let good = ChangeSet::new(vec![Entry::add("a", s())]).encode().unwrap();
    // Layout: 6 header, 2+1 path, action at 9, base 10..18, state 18..91 (mode at 90), move at 91.
    let mut b = good.clone();
    b[9] = 5;
    assert_eq!(what(&ChangeSet::decode(&b).unwrap_err()), rule::ACTION);
    b[9] = 0;
    assert_eq!(what(&ChangeSet::decode(&b).unwrap_err()), rule::ACTION);
    let mut b = good.clone();
    b[90] = 2;
    assert_eq!(what(&ChangeSet::decode(&b).unwrap_err()), rule::MODE);
    let mut b = good.clone();
    b[91] = 2;
    assert_eq!(what(&ChangeSet::decode(&b).unwrap_err()), rule::MOVE_FLAG);
    let mut b = good;
    b[0] = 2;
    assert!(matches!(
        ChangeSet::decode(&b).unwrap_err(),
        FormatError::UnsupportedVersion { version: 2, .. }
    ));
}

/// A hostile entry count is refused from the header alone.
#[test]
fn refuses_entry_count_against_limit_and_remaining_bytes() {
    let mut b = vec![1, 0];
    b.extend_from_slice(&4_000_001u32.to_le_bytes());
    assert!(matches!(
        ChangeSet::decode(&b).unwrap_err(),
        FormatError::LimitExceeded {
            what: rule::ENTRY_COUNT,
            ..
        }
    ));
    let mut b = vec![1, 0];
    b.extend_from_slice(&4_000_000u32.to_le_bytes());
    b.extend_from_slice(&[0; 100]);
    assert!(matches!(
        ChangeSet::decode(&b).unwrap_err(),
        FormatError::Truncated {
            what: rule::ENTRY_COUNT,
            ..
        }
    ));
    // Two entries declared, exactly 2 * MIN_ENTRY_LEN - 1 bytes present.
    let mut b = vec![1, 0, 2, 0, 0, 0];
    b.extend_from_slice(&[0; 2 * MIN_ENTRY_LEN - 1]);
    assert_eq!(what(&ChangeSet::decode(&b).unwrap_err()), rule::ENTRY_COUNT);
}

#[test]
fn refuses_move_on_anything_but_an_add() {
    refused(
        ChangeSet::new(vec![
            Entry::delete("a", 5),
            Entry::edit("b", 2, s()).moved_from("a", 5),
        ]),
        rule::MOVE_ON_ADD,
    );
    // A keep is never a move destination...
    refused(
        ChangeSet::new(vec![
            Entry::delete("a", 5),
            Entry::keep("b", 0).moved_from("a", 5),
        ]),
        rule::MOVE_ON_ADD,
    );
    // ...nor a move source.
    refused(
        ChangeSet::new(vec![
            Entry::keep("a", 5),
            Entry::add("b", s()).moved_from("a", 5),
        ]),
        rule::MOVE_PAIRED_DELETE,
    );
    refused(
        ChangeSet::new(vec![
            Entry::delete("a", 5),
            Entry::delete("b", 5).moved_from("a", 5),
        ]),
        rule::MOVE_ON_ADD,
    );
}

#[test]
fn refuses_move_without_paired_delete() {
    refused(
        ChangeSet::new(vec![Entry::add("b", s()).moved_from("a", 5)]),
        rule::MOVE_PAIRED_DELETE,
    );
    refused(
        ChangeSet::new(vec![
            Entry::edit("a", 5, s()),
            Entry::add("b", s()).moved_from("a", 5),
        ]),
        rule::MOVE_PAIRED_DELETE,
    );
    refused(
        ChangeSet::new(vec![
            Entry::add("a", s()),
            Entry::add("b", s()).moved_from("a", 5),
        ]),
        rule::MOVE_PAIRED_DELETE,
    );
}

#[test]
fn refuses_move_source_change_mismatch_or_zero() {
    refused(
        ChangeSet::new(vec![
            Entry::delete("a", 5),
            Entry::add("b", s()).moved_from("a", 6),
        ]),
        rule::MOVE_SOURCE_CHANGE,
    );
    refused(
        ChangeSet::new(vec![
            Entry::delete("a", 5),
            Entry::add("b", s()).moved_from("a", 0),
        ]),
        rule::MOVE_SOURCE_CHANGE,
    );
}

#[test]
fn refuses_one_source_feeding_two_destinations() {
    refused(
        ChangeSet::new(vec![
            Entry::delete("a", 5),
            Entry::add("b", s()).moved_from("a", 5),
            Entry::add("c", s()).moved_from("a", 5),
        ]),
        rule::MOVE_ONE_DESTINATION,
    );
    // Two sources, two destinations: fine, and the source may sort after.
    ChangeSet::new(vec![
        Entry::add("a", s()).moved_from("y", 5),
        Entry::add("b", s()).moved_from("z", 6),
        Entry::delete("y", 5),
        Entry::delete("z", 6),
    ])
    .encode()
    .unwrap();
}

#[test]
fn refuses_move_from_itself_and_non_canonical_source() {
    refused(
        ChangeSet::new(vec![Entry::add("a", s()).moved_from("a", 5)]),
        rule::MOVE_SELF,
    );
    refused(
        ChangeSet::new(vec![
            Entry::delete("a", 5),
            Entry::add("b", s()).moved_from("a/", 5),
        ]),
        rule::MOVE_SOURCE_PATH,
    );
}

#[test]
fn error_messages_name_the_entry() {
    let err = ChangeSet::new(vec![Entry::delete("x/y", 1), Entry::delete("x/y", 1)])
        .encode()
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("entry 1"), "{text}");
    assert!(text.contains("duplicate path"), "{text}");
    assert!(text.contains("\"x/y\""), "{text}");
}

fn arb_component() -> impl Strategy<Value = String> {
    // The leading `x` avoids reserved device names; no trailing dot or space.
    "x[a-z0-9_é日-]{0,6}"
}

fn arb_path() -> impl Strategy<Value = String> {
    prop::collection::vec(arb_component(), 1..4).prop_map(|c| c.join("/"))
}

fn arb_state() -> impl Strategy<Value = FileState> {
    (
        any::<[u8; 32]>(),
        any::<[u8; 32]>(),
        0..=1u64 << 50,
        any::<bool>(),
    )
        .prop_map(|(m, c, size, exec)| FileState {
            manifest: ManifestId(m),
            content: FileContentId(c),
            size,
            mode: if exec {
                Mode::Executable
            } else {
                Mode::Regular
            },
        })
}

/// Arbitrary valid change sets: unique sorted paths, action-correct fields,
/// and some adds paired with deletes as moves.
fn arb_change_set() -> impl Strategy<Value = ChangeSet> {
    prop::collection::btree_map(
        arb_path(),
        (0..4u8, 1..u64::MAX, arb_state(), any::<bool>()),
        0..12,
    )
    .prop_map(|map| {
        let mut entries: Vec<Entry> = map
            .into_iter()
            .map(|(path, (action, base, st, _))| match action {
                0 => Entry::add(path, st),
                1 => Entry::edit(path, base, st),
                2 => Entry::delete(path, base),
                _ => Entry::keep(path, if base % 2 == 0 { 0 } else { base }),
            })
            .collect();
        let deletes: Vec<(String, u64)> = entries
            .iter()
            .filter(|e| e.action == Action::Delete)
            .map(|e| (e.path.clone(), e.expected_base))
            .collect();
        let mut deletes = deletes.into_iter();
        for e in entries.iter_mut().filter(|e| e.action == Action::Add) {
            if let Some((path, change)) = deletes.next() {
                e.moved_from = Some(MoveSource { path, change });
            }
        }
        ChangeSet::new(entries)
    })
}

proptest! {
    #[test]
    fn valid_change_sets_round_trip(cs in arb_change_set()) {
        let bytes = cs.encode().unwrap();
        let back = ChangeSet::decode(&bytes).unwrap();
        prop_assert_eq!(&back, &cs);
        prop_assert_eq!(back.encode().unwrap(), bytes);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        if let Ok(cs) = ChangeSet::decode(&bytes) {
            prop_assert_eq!(cs.encode().unwrap(), bytes);
        }
    }

    #[test]
    fn mutated_change_sets_never_panic(
        cs in arb_change_set(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut bytes = cs.encode().unwrap();
        for (at, value) in flips {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        if let Ok(back) = ChangeSet::decode(&bytes) {
            prop_assert_eq!(back.encode().unwrap(), bytes);
        }
    }
}

/// Section 5 does not forbid `\`: a change set naming `art\old.psd`, built
/// byte by byte from the section 4.2 table, decodes, keeps the name, and
/// re-encodes to the same bytes (#14 item 14).
#[test]
fn backslash_path_decodes_by_hand() {
    let s = state("psd", 7, Mode::Regular);
    let mut bytes: Vec<u8> = vec![0x01, 0x00, 0x02, 0x00, 0x00, 0x00]; // version 1, 2 entries
                                                                       // entry 0: add "art\new.psd"
    bytes.extend_from_slice(&[11, 0]);
    bytes.extend_from_slice(b"art\\new.psd");
    bytes.push(1);
    bytes.extend_from_slice(&[0; 8]);
    bytes.extend_from_slice(&s.manifest.0);
    bytes.extend_from_slice(&s.content.0);
    bytes.extend_from_slice(&[7, 0, 0, 0, 0, 0, 0, 0]);
    bytes.push(0);
    bytes.push(0);
    // entry 1: delete "art\old.psd" at 3
    bytes.extend_from_slice(&[11, 0]);
    bytes.extend_from_slice(b"art\\old.psd");
    bytes.push(3);
    bytes.extend_from_slice(&[3, 0, 0, 0, 0, 0, 0, 0]);
    bytes.push(0);
    let cs = ChangeSet::decode(&bytes).expect("a spec-valid change set decodes");
    assert_eq!(cs.entries[0].path, "art\\new.psd");
    assert_eq!(cs.entries[0].action, Action::Add);
    assert_eq!(cs.entries[1].path, "art\\old.psd");
    assert_eq!(cs.entries[1].action, Action::Delete);
    assert_eq!(cs.encode().unwrap(), bytes);
}

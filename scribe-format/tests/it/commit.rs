//! Tests for `scribe_format::commit` (specification sections 4.3, 4.3.1, 12,
//! "Cherry-pick provenance") and `scribe_format::operation` (section 8).

use proptest::prelude::*;
use scribe_format::commit::{
    commit_id, legacy, rule, BranchPoint, CommitEnvelopeV5, CommitPayload, Origin, StoredCommit,
    MAX_PAYLOAD_LEN, MIN_PAYLOAD_LEN,
};
use scribe_format::operation::operation_fingerprint;
use scribe_format::{
    BranchId, ChangeSetId, CommitId, FormatError, OperationId, RepositoryId, WorkspaceId,
};

use super::support::{assert_refuses_truncation_and_trailing, check_area, Golden};

const REPO: RepositoryId = RepositoryId([0x11; 16]);
const MAIN: BranchId = BranchId([0x22; 16]);
const FEATURE: BranchId = BranchId([0x33; 16]);

fn payload(change: u64, parent: u64) -> CommitPayload {
    CommitPayload {
        repository: REPO,
        branch: MAIN,
        change,
        parent_change: parent,
        branched_from: None,
        change_set: ChangeSetId([0x44; 32]),
        operation: OperationId([0x55; 16]),
        workspace: WorkspaceId([0x66; 16]),
        timestamp_ms: 1_767_225_600_000,
        author: "Ada Lovelace".into(),
        message: "Add the hero sprite\n\nWith a longer body.".into(),
    }
}

fn v5(payload: CommitPayload, parent: Option<CommitId>, origin: Origin) -> CommitEnvelopeV5 {
    CommitEnvelopeV5 {
        payload,
        actor: None,
        parent_commit: parent,
        origin,
        content_root: [0x77; 32],
        revision_root: [0x88; 32],
    }
}

fn goldens() -> Vec<(&'static str, StoredCommit)> {
    let root = v5(payload(1, 0), None, Origin::None);
    let mut with_parent = v5(payload(7, 4), Some(CommitId([0x99; 32])), Origin::None);
    with_parent.actor = Some([0xaa; 16]);
    let merge = v5(
        payload(9, 7),
        Some(CommitId([0x99; 32])),
        Origin::Merge {
            branch: FEATURE,
            change: 8,
            commit: CommitId([0xbb; 32]),
        },
    );
    let mut pick = v5(
        payload(10, 9),
        Some(CommitId([0xcc; 32])),
        Origin::CherryPick {
            branch: FEATURE,
            change: 6,
        },
    );
    pick.actor = Some([0xdd; 16]);
    let mut first_on_branch = payload(12, 0);
    first_on_branch.branch = FEATURE;
    first_on_branch.branched_from = Some(BranchPoint {
        branch: MAIN,
        change: 10,
    });
    first_on_branch.author = String::new();
    first_on_branch.message = "ünïcode ✓".into();
    vec![
        ("v5-root", StoredCommit::V5(root)),
        ("v5-parent-actor", StoredCommit::V5(with_parent)),
        ("v5-merge", StoredCommit::V5(merge)),
        ("v5-cherry-pick-actor", StoredCommit::V5(pick)),
        (
            "v5-branched-from",
            StoredCommit::V5(v5(first_on_branch, None, Origin::None)),
        ),
        ("v1-legacy", StoredCommit::V1(payload(2, 1))),
        (
            "v2-legacy-merge",
            StoredCommit::V2 {
                payload: payload(5, 2),
                merged_branch: FEATURE,
                merged_change: 3,
            },
        ),
        (
            "v3-legacy-cherry-pick",
            StoredCommit::V3 {
                payload: payload(6, 5),
                source_branch: FEATURE,
                source_change: 4,
            },
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
    let committed = check_area("commit", &list);
    for (name, value) in &values {
        let bytes = &committed[*name];
        let decoded = StoredCommit::decode(bytes).unwrap();
        assert_eq!(&decoded, value, "{name}");
        assert_eq!(&decoded.encode().unwrap(), bytes, "{name}: re-encode");
        assert_eq!(decoded.id().unwrap(), commit_id(bytes).unwrap());
        assert_eq!(
            u16::from_le_bytes([bytes[0], bytes[1]]),
            decoded.version(),
            "{name}"
        );
        let domain = format!("scribe:commit:v{}\0", decoded.version());
        let mut hasher = blake3::Hasher::new();
        hasher.update(domain.as_bytes());
        hasher.update(bytes);
        assert_eq!(
            decoded.id().unwrap().0,
            *hasher.finalize().as_bytes(),
            "{name}"
        );
        // The store's streaming identity (id.rs) agrees with this module's.
        let object =
            scribe_format::id::object_identity(scribe_format::ObjectKind::Commit, bytes).unwrap();
        assert_eq!(
            object.digest,
            value.id().unwrap().0,
            "{name}: object identity"
        );
        assert_refuses_truncation_and_trailing(name, bytes, StoredCommit::decode);
    }
}

/// The v1 payload and a v5 merge envelope, built from the specification's
/// tables rather than the encoder.
fn payload_by_hand(p: &CommitPayload) -> Vec<u8> {
    let mut b = vec![0x01, 0x00];
    b.extend_from_slice(&[0x11; 16]);
    b.extend_from_slice(&[0x22; 16]);
    b.extend_from_slice(&p.change.to_le_bytes());
    b.extend_from_slice(&p.parent_change.to_le_bytes());
    b.push(0x00); // no branch point
    b.extend_from_slice(&[0x44; 32]);
    b.extend_from_slice(&[0x55; 16]);
    b.extend_from_slice(&[0x66; 16]);
    b.extend_from_slice(&[0x00, 0xa8, 0xda, 0x76, 0x9b, 0x01, 0x00, 0x00]); // 1_767_225_600_000
    b.extend_from_slice(&[12, 0]);
    b.extend_from_slice(b"Ada Lovelace");
    b.extend_from_slice(&[40, 0, 0, 0]);
    b.extend_from_slice(b"Add the hero sprite\n\nWith a longer body.");
    b
}

#[test]
fn payload_and_v5_merge_bytes_by_hand() {
    assert_eq!(
        1_767_225_600_000u64.to_le_bytes(),
        [0x00, 0xa8, 0xda, 0x76, 0x9b, 0x01, 0x00, 0x00]
    );
    let p = payload(9, 7);
    let want_payload = payload_by_hand(&p);
    assert_eq!(p.encode().unwrap(), want_payload);
    assert_eq!(want_payload.len(), MIN_PAYLOAD_LEN + 12 + 40);

    let mut want = vec![0x05, 0x00];
    want.extend_from_slice(&(want_payload.len() as u32).to_le_bytes());
    want.extend_from_slice(&want_payload);
    want.push(0); // unauthenticated
    want.push(1); // parent present
    want.extend_from_slice(&[0x99; 32]);
    want.push(1); // merge parent
    want.extend_from_slice(&[0x33; 16]);
    want.extend_from_slice(&[8, 0, 0, 0, 0, 0, 0, 0]);
    want.extend_from_slice(&[0xbb; 32]);
    want.extend_from_slice(&[0x77; 32]);
    want.extend_from_slice(&[0x88; 32]);
    let committed =
        std::fs::read(super::support::fixture_dir("commit").join("v5-merge.bin")).unwrap();
    assert_eq!(committed, want, "fixtures/commit/v5-merge.bin");
    let StoredCommit::V5(env) = &goldens()[2].1 else {
        unreachable!()
    };
    assert_eq!(env.encode().unwrap(), want);
    let mut hasher = blake3::Hasher::new();
    hasher.update(b"scribe:commit:v5\0");
    hasher.update(&want);
    assert_eq!(env.id().unwrap().0, *hasher.finalize().as_bytes());
}

#[test]
fn cherry_pick_actor_and_legacy_bytes_by_hand() {
    let p = payload(10, 9);
    let body = payload_by_hand(&p);
    let mut want = vec![5, 0];
    want.extend_from_slice(&(body.len() as u32).to_le_bytes());
    want.extend_from_slice(&body);
    want.push(1);
    want.extend_from_slice(&[0xdd; 16]);
    want.push(1);
    want.extend_from_slice(&[0xcc; 32]);
    want.push(2);
    want.extend_from_slice(&[0x33; 16]);
    want.extend_from_slice(&[6, 0, 0, 0, 0, 0, 0, 0]);
    want.extend_from_slice(&[0x77; 32]);
    want.extend_from_slice(&[0x88; 32]);
    assert_eq!(goldens()[3].1.encode().unwrap(), want);

    // v3: u16(3), u32 length, payload, u8(1), source branch, u64 source change.
    let p = payload(6, 5);
    let body = payload_by_hand(&p);
    let mut want = vec![3, 0];
    want.extend_from_slice(&(body.len() as u32).to_le_bytes());
    want.extend_from_slice(&body);
    want.push(1);
    want.extend_from_slice(&[0x33; 16]);
    want.extend_from_slice(&[4, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(goldens()[7].1.encode().unwrap(), want);
    let mut v2 = want.clone();
    v2[0] = 2;
    assert!(matches!(
        StoredCommit::decode(&v2).unwrap(),
        StoredCommit::V2 {
            merged_change: 4,
            ..
        }
    ));
    // v1 is the bare payload.
    assert_eq!(
        goldens()[5].1.encode().unwrap(),
        payload_by_hand(&payload(2, 1))
    );
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

#[test]
fn refuses_version_four_and_unknown_versions() {
    let mut bytes = goldens()[0].1.encode().unwrap();
    for version in [0u16, 4, 6, 0xffff] {
        bytes[..2].copy_from_slice(&version.to_le_bytes());
        assert!(
            matches!(
                StoredCommit::decode(&bytes),
                Err(FormatError::UnsupportedVersion { version: v, .. }) if v == u64::from(version)
            ),
            "version {version}"
        );
    }
    // Version 4 has its own identity domain even though nothing reads it.
    bytes[..2].copy_from_slice(&4u16.to_le_bytes());
    let mut hasher = blake3::Hasher::new();
    hasher.update(b"scribe:commit:v4\0");
    hasher.update(&bytes);
    assert_eq!(commit_id(&bytes).unwrap().0, *hasher.finalize().as_bytes());
    bytes[..2].copy_from_slice(&6u16.to_le_bytes());
    assert!(commit_id(&bytes).is_err());
    assert!(StoredCommit::decode(&[5]).is_err());
}

#[test]
fn refuses_payload_rules() {
    let mut p = payload(1, 0);
    p.change = 0;
    assert_eq!(what(&p.encode().unwrap_err()), rule::CHANGE);
    let p = payload(5, 5);
    assert_eq!(what(&p.encode().unwrap_err()), rule::PARENT_CHANGE);
    let p = payload(5, 6);
    assert_eq!(what(&p.encode().unwrap_err()), rule::PARENT_CHANGE);
    let mut p = payload(1, 0);
    p.author = "a".repeat(256);
    p.encode().unwrap();
    p.author.push('a');
    assert_eq!(what(&p.encode().unwrap_err()), rule::AUTHOR);
    let mut p = payload(1, 0);
    p.message = "m".repeat(65_536);
    assert_eq!(p.encode().unwrap().len(), MAX_PAYLOAD_LEN - 24 - 256 + 12);
    p.message.push('m');
    assert_eq!(what(&p.encode().unwrap_err()), rule::MESSAGE);
}

#[test]
fn decoder_refuses_payload_rules_from_bytes() {
    let good = payload(3, 2).encode().unwrap();
    // change number at 34..42, parent at 42..50, branched-from flag at 50.
    let mut b = good.clone();
    b[34..42].copy_from_slice(&0u64.to_le_bytes());
    b[42..50].copy_from_slice(&0u64.to_le_bytes());
    assert_eq!(what(&CommitPayload::decode(&b).unwrap_err()), rule::CHANGE);
    let mut b = good.clone();
    b[42..50].copy_from_slice(&3u64.to_le_bytes());
    assert_eq!(
        what(&CommitPayload::decode(&b).unwrap_err()),
        rule::PARENT_CHANGE
    );
    let mut b = good.clone();
    b[50] = 2;
    assert!(CommitPayload::decode(&b).is_err());
    // Author length 257 declared.
    let author_at = 51 + 32 + 16 + 16 + 8;
    let mut b = good.clone();
    b[author_at..author_at + 2].copy_from_slice(&257u16.to_le_bytes());
    assert!(matches!(
        CommitPayload::decode(&b).unwrap_err(),
        FormatError::LimitExceeded {
            what: rule::AUTHOR,
            ..
        }
    ));
    // Message length beyond 64 KiB declared, with nothing behind it.
    let message_at = author_at + 2 + 12;
    let mut b = good[..message_at].to_vec();
    b.extend_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        CommitPayload::decode(&b).unwrap_err(),
        FormatError::LimitExceeded {
            what: rule::MESSAGE,
            ..
        }
    ));
    let mut b = good;
    b[0] = 2;
    assert!(matches!(
        CommitPayload::decode(&b).unwrap_err(),
        FormatError::UnsupportedVersion { .. }
    ));
}

#[test]
fn refuses_parent_commit_without_parent_change_and_vice_versa() {
    let env = v5(payload(1, 0), Some(CommitId([1; 32])), Origin::None);
    assert_eq!(what(&env.encode().unwrap_err()), rule::PARENT_COMMIT);
    let env = v5(payload(3, 2), None, Origin::None);
    assert_eq!(what(&env.encode().unwrap_err()), rule::PARENT_COMMIT);
    // From bytes: clear the parent-present flag of a valid envelope with a parent.
    let good = goldens()[1].1.encode().unwrap();
    let StoredCommit::V5(e) = &goldens()[1].1 else {
        unreachable!()
    };
    let flag_at = 2 + 4 + e.payload.encoded_len() + 1 + 16;
    assert_eq!(good[flag_at], 1);
    let mut b = good[..flag_at].to_vec();
    b.push(0);
    b.extend_from_slice(&good[flag_at + 33..]);
    assert_eq!(
        what(&StoredCommit::decode(&b).unwrap_err()),
        rule::PARENT_COMMIT
    );
}

#[test]
fn refuses_origin_on_same_branch_or_not_earlier() {
    let same = Origin::Merge {
        branch: MAIN,
        change: 3,
        commit: CommitId([1; 32]),
    };
    let env = v5(payload(9, 7), Some(CommitId([2; 32])), same);
    assert_eq!(what(&env.encode().unwrap_err()), rule::ORIGIN_BRANCH);
    for change in [0, 9, 10] {
        let pick = Origin::CherryPick {
            branch: FEATURE,
            change,
        };
        let env = v5(payload(9, 7), Some(CommitId([2; 32])), pick);
        assert_eq!(
            what(&env.encode().unwrap_err()),
            rule::ORIGIN_CHANGE,
            "{change}"
        );
        let merge = Origin::Merge {
            branch: FEATURE,
            change,
            commit: CommitId([1; 32]),
        };
        let env = v5(payload(9, 7), Some(CommitId([2; 32])), merge);
        assert_eq!(
            what(&env.encode().unwrap_err()),
            rule::ORIGIN_CHANGE,
            "{change}"
        );
    }
    assert_eq!(
        what(&legacy::encode_v2_v3(3, &payload(6, 5), MAIN, 4).unwrap_err()),
        rule::ORIGIN_BRANCH
    );
    assert_eq!(
        what(&legacy::encode_v2_v3(2, &payload(6, 5), FEATURE, 6).unwrap_err()),
        rule::ORIGIN_CHANGE
    );
    // From bytes: a v5 merge envelope whose source change is rewritten to 9.
    let mut b = goldens()[2].1.encode().unwrap();
    let at = b.len() - 64 - 32 - 8;
    b[at..at + 8].copy_from_slice(&9u64.to_le_bytes());
    assert_eq!(
        what(&StoredCommit::decode(&b).unwrap_err()),
        rule::ORIGIN_CHANGE
    );
    // A v3 envelope whose source branch is rewritten to the commit's own.
    let mut b = goldens()[7].1.encode().unwrap();
    let at = b.len() - 8 - 16;
    b[at..at + 16].copy_from_slice(&MAIN.0);
    assert_eq!(
        what(&StoredCommit::decode(&b).unwrap_err()),
        rule::ORIGIN_BRANCH
    );
}

#[test]
fn refuses_bad_origin_actor_and_legacy_marker_bytes() {
    let good = goldens()[0].1.encode().unwrap();
    let StoredCommit::V5(e) = &goldens()[0].1 else {
        unreachable!()
    };
    let actor_at = 2 + 4 + e.payload.encoded_len();
    let mut b = good.clone();
    b[actor_at] = 2;
    assert!(StoredCommit::decode(&b).is_err());
    let origin_at = actor_at + 2;
    let mut b = good.clone();
    b[origin_at] = 3;
    assert_eq!(what(&StoredCommit::decode(&b).unwrap_err()), rule::ORIGIN);
    let mut b = goldens()[6].1.encode().unwrap();
    let marker_at = b.len() - 25;
    assert_eq!(b[marker_at], 1);
    b[marker_at] = 0;
    assert_eq!(
        what(&StoredCommit::decode(&b).unwrap_err()),
        rule::LEGACY_MARKER
    );
}

/// The u32 payload length must match the payload's own length exactly.
#[test]
fn refuses_payload_length_mismatch() {
    let good = goldens()[0].1.encode().unwrap();
    let declared = u32::from_le_bytes(good[2..6].try_into().unwrap());
    for wrong in [declared - 1, declared + 1, declared + 64] {
        let mut b = good.clone();
        b[2..6].copy_from_slice(&wrong.to_le_bytes());
        assert_eq!(
            what(&StoredCommit::decode(&b).unwrap_err()),
            rule::PAYLOAD_LENGTH,
            "{wrong} for {declared}"
        );
    }
    let mut b = good.clone();
    b[2..6].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        StoredCommit::decode(&b).unwrap_err(),
        FormatError::LimitExceeded {
            what: rule::PAYLOAD_LENGTH,
            ..
        }
    ));
    // Same for the legacy wrappers.
    let mut b = goldens()[6].1.encode().unwrap();
    let declared = u32::from_le_bytes(b[2..6].try_into().unwrap());
    b[2..6].copy_from_slice(&(declared + 1).to_le_bytes());
    assert_eq!(
        what(&StoredCommit::decode(&b).unwrap_err()),
        rule::PAYLOAD_LENGTH
    );
}

#[test]
fn accessors_report_links_and_provenance() {
    let g = goldens();
    assert_eq!(g[2].1.merge_parent(), Some((FEATURE, 8)));
    assert_eq!(g[2].1.cherry_pick_source(), None);
    assert_eq!(g[3].1.cherry_pick_source(), Some((FEATURE, 6)));
    assert_eq!(g[6].1.merge_parent(), Some((FEATURE, 3)));
    assert_eq!(g[7].1.cherry_pick_source(), Some((FEATURE, 4)));
    assert!(g[0].1.is_chained());
    assert!(!g[5].1.is_chained() && !g[6].1.is_chained() && !g[7].1.is_chained());
    assert_eq!(g[5].1.payload().change, 2);
    // Identities of one payload differ between versions.
    let p = payload(6, 5);
    let v1 = StoredCommit::V1(p.clone()).id().unwrap();
    let v5 = StoredCommit::V5(v5(p, Some(CommitId([0; 32])), Origin::None))
        .id()
        .unwrap();
    assert_ne!(v1, v5);
}

#[test]
fn operation_fingerprint_by_hand() {
    let message = "Fix the door";
    let mut bytes = b"scribe:operation-fingerprint:v3\0".to_vec();
    bytes.extend_from_slice(&[0x11; 16]);
    bytes.extend_from_slice(&[0xee; 16]);
    bytes.extend_from_slice(&[0x22; 16]);
    bytes.extend_from_slice(&[0x66; 16]);
    bytes.extend_from_slice(&[0x44; 32]);
    bytes.extend_from_slice(&[12, 0, 0, 0, 0, 0, 0, 0]);
    bytes.extend_from_slice(message.as_bytes());
    bytes.push(1);
    let want = *blake3::hash(&bytes).as_bytes();
    let got = operation_fingerprint(
        REPO,
        [0xee; 16],
        MAIN,
        WorkspaceId([0x66; 16]),
        ChangeSetId([0x44; 32]),
        message,
        true,
    );
    assert_eq!(got, want);
    let other = operation_fingerprint(
        REPO,
        [0xee; 16],
        MAIN,
        WorkspaceId([0x66; 16]),
        ChangeSetId([0x44; 32]),
        message,
        false,
    );
    assert_ne!(got, other);
}

fn arb_text(max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(any::<char>(), 0..12).prop_map(move |c| {
        let mut s: String = c.into_iter().collect();
        while s.len() > max {
            s.pop();
        }
        s
    })
}

fn arb_payload() -> impl Strategy<Value = CommitPayload> {
    (
        (
            any::<[u8; 16]>(),
            any::<[u8; 16]>(),
            1..u64::MAX,
            any::<u64>(),
        ),
        prop::option::of((any::<[u8; 16]>(), any::<u64>())),
        (
            any::<[u8; 32]>(),
            any::<[u8; 16]>(),
            any::<[u8; 16]>(),
            any::<u64>(),
        ),
        (arb_text(256), arb_text(1000)),
    )
        .prop_map(
            |((r, b, change, parent), from, (cs, op, ws, ts), (author, message))| CommitPayload {
                repository: RepositoryId(r),
                branch: BranchId(b),
                change,
                parent_change: parent % change,
                branched_from: from.map(|(branch, change)| BranchPoint {
                    branch: BranchId(branch),
                    change,
                }),
                change_set: ChangeSetId(cs),
                operation: OperationId(op),
                workspace: WorkspaceId(ws),
                timestamp_ms: ts,
                author,
                message,
            },
        )
}

fn arb_stored() -> impl Strategy<Value = StoredCommit> {
    (
        arb_payload(),
        0..6u8,
        any::<[u8; 16]>(),
        any::<u64>(),
        any::<[u8; 32]>(),
        prop::option::of(any::<[u8; 16]>()),
        any::<([u8; 32], [u8; 32])>(),
    )
        .prop_filter_map(
            "origin needs an earlier change on another branch",
            |(p, kind, ob, oc, id, actor, (cr, rr))| {
                let branch = BranchId(ob);
                let legal = branch != p.branch && p.change > 1;
                let change = if p.change > 1 {
                    1 + oc % (p.change - 1)
                } else {
                    0
                };
                let parent_commit = (p.parent_change != 0).then_some(CommitId(id));
                let envelope = |origin| {
                    StoredCommit::V5(CommitEnvelopeV5 {
                        payload: p.clone(),
                        actor,
                        parent_commit,
                        origin,
                        content_root: cr,
                        revision_root: rr,
                    })
                };
                Some(match kind {
                    0 => StoredCommit::V1(p.clone()),
                    1 if legal => StoredCommit::V2 {
                        payload: p.clone(),
                        merged_branch: branch,
                        merged_change: change,
                    },
                    2 if legal => StoredCommit::V3 {
                        payload: p.clone(),
                        source_branch: branch,
                        source_change: change,
                    },
                    3 if legal => envelope(Origin::Merge {
                        branch,
                        change,
                        commit: CommitId(id),
                    }),
                    4 if legal => envelope(Origin::CherryPick { branch, change }),
                    5 => envelope(Origin::None),
                    _ => return None,
                })
            },
        )
}

proptest! {
    #[test]
    fn valid_commits_round_trip(c in arb_stored()) {
        let bytes = c.encode().unwrap();
        let back = StoredCommit::decode(&bytes).unwrap();
        prop_assert_eq!(&back, &c);
        prop_assert_eq!(back.encode().unwrap(), bytes.clone());
        prop_assert_eq!(back.id().unwrap(), commit_id(&bytes).unwrap());
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        if let Ok(c) = StoredCommit::decode(&bytes) {
            prop_assert_eq!(c.encode().unwrap(), bytes);
        }
    }

    #[test]
    fn mutated_commits_never_panic(
        c in arb_stored(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut bytes = c.encode().unwrap();
        for (at, value) in flips {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        if let Ok(back) = StoredCommit::decode(&bytes) {
            prop_assert_eq!(back.encode().unwrap(), bytes);
        }
    }
}

//! Tests for `scribe_format::envelope` (section 3): golden envelopes of each
//! kind and codec, hand-built bytes, every rejection, and properties.

use proptest::prelude::*;
use scribe_format::envelope::{self, Compression, EnvelopeHeader, HEADER_LEN};
use scribe_format::id::object_identity;
use scribe_format::{FormatError, ObjectKind};
use scribe_testkit::XorShift64;

use super::support::{assert_refuses_truncation_and_trailing, check_area, Golden};

/// Deterministic incompressible bytes: the testkit's xorshift64 from the
/// raw state `seed | 1`, one byte (bits 24..32) per step. The committed
/// envelope fixtures were generated this way; `scribe_testkit::noise`
/// (whole words) would give other bytes.
fn fixture_noise(n: usize, seed: u64) -> Vec<u8> {
    XorShift64::from_state(seed | 1)
        .take(n)
        .map(|x| (x >> 24) as u8)
        .collect()
}

/// A payload that compresses well and spans two codec-1 blocks.
fn two_block_payload() -> Vec<u8> {
    let mut v = Vec::new();
    while v.len() < 300_000 {
        v.extend_from_slice(b"scribe keeps large binary assets; ");
    }
    v
}

fn goldens() -> Vec<Golden> {
    // Payloads are opaque to the envelope; commit payloads start with a
    // version word because the commit identity domain follows it.
    let mut commit_payload = vec![5u8, 0];
    commit_payload.extend(std::iter::repeat_n(0xabu8, 200));
    let cases: Vec<(&str, ObjectKind, Vec<u8>, Compression)> = vec![
        (
            "chunk-identity",
            ObjectKind::Chunk,
            b"hello, scribe".to_vec(),
            Compression::None,
        ),
        (
            "chunk-empty",
            ObjectKind::Chunk,
            Vec::new(),
            Compression::Lz4,
        ),
        (
            "chunk-lz4-two-blocks",
            ObjectKind::Chunk,
            two_block_payload(),
            Compression::Lz4,
        ),
        (
            "chunk-lz4-policy-raw-fallback",
            ObjectKind::Chunk,
            fixture_noise(4096, 7),
            Compression::Lz4,
        ),
        (
            "manifest-identity",
            ObjectKind::Manifest,
            fixture_noise(120, 2),
            Compression::None,
        ),
        (
            "manifest-lz4",
            ObjectKind::Manifest,
            vec![0u8; 5000],
            Compression::Lz4,
        ),
        (
            "changeset-identity",
            ObjectKind::ChangeSet,
            fixture_noise(64, 3),
            Compression::None,
        ),
        (
            "changeset-lz4",
            ObjectKind::ChangeSet,
            b"a/b/c".repeat(400),
            Compression::Lz4,
        ),
        (
            "commit-identity",
            ObjectKind::Commit,
            commit_payload.clone(),
            Compression::None,
        ),
        (
            "commit-lz4",
            ObjectKind::Commit,
            commit_payload,
            Compression::Lz4,
        ),
    ];
    cases
        .into_iter()
        .map(|(name, kind, payload, compression)| Golden {
            name: name.to_string(),
            bytes: envelope::encode(kind, &payload, compression),
            identity: Some(object_identity(kind, &payload).unwrap().to_hex()),
        })
        .collect()
}

#[test]
fn golden_envelopes_round_trip_and_refuse_damage() {
    let goldens = goldens();
    let committed = check_area("envelope", &goldens);
    for g in &goldens {
        let bytes = &committed[&g.name];
        let decoded = envelope::decode(bytes, u64::MAX).unwrap();
        // Fixture names say the policy they were written under.
        let compression = if g.name.ends_with("-identity") {
            Compression::None
        } else {
            Compression::Lz4
        };
        assert_eq!(
            &envelope::encode(decoded.kind, &decoded.payload, compression),
            bytes,
            "{}: re-encode",
            g.name
        );
        let id = object_identity(decoded.kind, &decoded.payload).unwrap();
        assert_eq!(Some(id.to_hex()), g.identity, "{}", g.name);
        assert!(envelope::decode_verified(bytes, &id, u64::MAX).is_ok());
        assert_refuses_truncation_and_trailing(&g.name, bytes, |b| {
            envelope::decode(b, u64::MAX).map(|_| ())
        });
    }
    // The policy fallbacks really happened.
    assert_eq!(committed["chunk-lz4-policy-raw-fallback"][8], 0);
    assert_eq!(committed["chunk-empty"][8], 0);
    assert_eq!(committed["chunk-lz4-two-blocks"][8], 1);
}

#[test]
fn hand_built_identity_envelope() {
    let mut want = Vec::new();
    want.extend_from_slice(b"SCOB");
    want.extend_from_slice(&[1, 0]); // version
    want.push(1); // chunk
    want.push(1); // BLAKE3
    want.push(0); // codec
    want.push(0); // flags
    want.extend_from_slice(&[0, 0]); // reserved
    want.extend_from_slice(&3u64.to_le_bytes());
    want.extend_from_slice(b"abc");
    assert_eq!(
        envelope::encode(ObjectKind::Chunk, b"abc", Compression::None),
        want
    );
}

#[test]
fn hand_built_codec1_with_raw_and_lz4_blocks_decodes() {
    // Original: 10 raw bytes in a raw block, then 1000 zero bytes as an LZ4 block.
    let lz4 = lz4_block_of_zeros(1000);
    let mut body = Vec::new();
    body.extend_from_slice(&1010u64.to_le_bytes());
    body.push(0);
    body.extend_from_slice(&10u32.to_le_bytes());
    body.extend_from_slice(&10u32.to_le_bytes());
    body.extend_from_slice(b"0123456789");
    body.push(1);
    body.extend_from_slice(&1000u32.to_le_bytes());
    body.extend_from_slice(&(lz4.len() as u32).to_le_bytes());
    body.extend_from_slice(&lz4);
    let mut env = Vec::new();
    env.extend_from_slice(b"SCOB\x01\x00\x02\x01\x01\x00\x00\x00");
    env.extend_from_slice(&(body.len() as u64).to_le_bytes());
    env.extend_from_slice(&body);
    let d = envelope::decode(&env, u64::MAX).unwrap();
    assert_eq!(d.kind, ObjectKind::Manifest);
    assert_eq!(&d.payload[..10], b"0123456789");
    assert!(d.payload[10..].iter().all(|&b| b == 0));
    assert_eq!(d.payload.len(), 1010);
}

/// A standard LZ4 block of `n` zeros built by hand: one literal then a
/// match of offset 1, ending with the 5 literals the LZ4 block format
/// requires at the end.
fn lz4_block_of_zeros(n: usize) -> Vec<u8> {
    assert!(n > 20);
    let match_len = n - 1 - 5;
    let mut out = Vec::new();
    // token: 1 literal, match length (minus 4) nibble
    let ml = match_len - 4;
    out.push(0x10 | if ml >= 15 { 15 } else { ml as u8 });
    out.push(0); // the literal
    out.extend_from_slice(&1u16.to_le_bytes()); // offset 1
    if ml >= 15 {
        let mut rest = ml - 15;
        while rest >= 255 {
            out.push(255);
            rest -= 255;
        }
        out.push(rest as u8);
    }
    out.push(0x50); // last sequence: 5 literals
    out.extend_from_slice(&[0; 5]);
    out
}

#[test]
fn rejects_block_overrunning_original_length() {
    let mut body = Vec::new();
    body.extend_from_slice(&5u64.to_le_bytes());
    body.push(0);
    body.extend_from_slice(&6u32.to_le_bytes());
    body.extend_from_slice(&6u32.to_le_bytes());
    body.extend_from_slice(b"abcdef");
    let mut env = b"SCOB\x01\x00\x01\x01\x01\x00\x00\x00".to_vec();
    env.extend_from_slice(&(body.len() as u64).to_le_bytes());
    env.extend_from_slice(&body);
    assert!(envelope::decode(&env, u64::MAX).is_err());
}

#[test]
fn rejects_oversized_block() {
    let n = 262_145u32;
    let mut body = Vec::new();
    body.extend_from_slice(&u64::from(n).to_le_bytes());
    body.push(0);
    body.extend_from_slice(&n.to_le_bytes());
    body.extend_from_slice(&n.to_le_bytes());
    body.resize(body.len() + n as usize, 0);
    let mut env = b"SCOB\x01\x00\x01\x01\x01\x00\x00\x00".to_vec();
    env.extend_from_slice(&(body.len() as u64).to_le_bytes());
    env.extend_from_slice(&body);
    assert!(matches!(
        envelope::decode(&env, u64::MAX),
        Err(FormatError::InvalidValue {
            what: "block original length",
            ..
        })
    ));
}

#[test]
fn header_parse_names_each_field() {
    let good = envelope::encode(ObjectKind::Chunk, b"x", Compression::None);
    let h = EnvelopeHeader::parse(good[..HEADER_LEN].try_into().unwrap()).unwrap();
    assert_eq!(h.stored_len, 1);
    assert_eq!(h.envelope_len(), 21);
    let cases: [(usize, u8, &str); 6] = [
        (6, 0, "object kind"),
        (7, 0, "envelope hash algorithm"),
        (8, 9, "envelope codec"),
        (9, 0x80, "envelope flags"),
        (10, 1, "envelope reserved"),
        (11, 1, "envelope reserved"),
    ];
    for (offset, value, field) in cases {
        let mut bad = good.clone();
        bad[offset] = value;
        let err = EnvelopeHeader::parse(bad[..HEADER_LEN].try_into().unwrap()).unwrap_err();
        match err {
            FormatError::InvalidValue { what, .. } => assert_eq!(what, field),
            other => panic!("offset {offset}: {other:?}"),
        }
    }
}

/// Regression (found by fuzzing): a commit envelope whose payload is too
/// short for a version word decodes as an envelope but has no identity, so
/// the streaming decoder (which verifies identity) refuses it.
#[test]
fn short_commit_payload_has_no_identity() {
    let env = envelope::encode(ObjectKind::Commit, b"C", Compression::None);
    assert!(envelope::decode(&env, 100).is_ok());
    assert!(object_identity(ObjectKind::Commit, b"C").is_err());
    let header = EnvelopeHeader::parse(env[..HEADER_LEN].try_into().unwrap()).unwrap();
    let mut out = Vec::new();
    assert!(envelope::decode_stream(&header, &mut &env[HEADER_LEN..], &mut out, 100).is_err());
}

proptest! {
    #[test]
    fn any_payload_round_trips(payload in proptest::collection::vec(any::<u8>(), 0..5000), repeat in 0usize..4, lz4 in any::<bool>()) {
        let mut p = payload.clone();
        for _ in 0..repeat { p.extend_from_slice(&payload); }
        let compression = if lz4 { Compression::Lz4 } else { Compression::None };
        let env = envelope::encode(ObjectKind::Chunk, &p, compression);
        let d = envelope::decode(&env, u64::MAX).unwrap();
        prop_assert_eq!(&*d.payload, &p[..]);
        if lz4 { prop_assert!(env.len() <= HEADER_LEN + p.len()); }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = envelope::decode(&bytes, 1 << 20);
    }

    #[test]
    fn mutated_envelopes_never_panic(pos in 0usize..400, value in any::<u8>()) {
        let mut env = envelope::encode(ObjectKind::Chunk, &two_block_payload()[..2000], Compression::Lz4);
        let pos = pos % env.len();
        env[pos] = value;
        let _ = envelope::decode(&env, 1 << 20);
    }
}

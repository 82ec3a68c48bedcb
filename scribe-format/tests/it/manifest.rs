//! Tests for `scribe_format::manifest` (specification section 4.1).

use proptest::prelude::*;
use scribe_format::manifest::{
    encoded_len, rule, ChunkRef, Manifest, ManifestBuilder, ManifestRef, CHUNK_REF_LEN, HEADER_LEN,
    PROFILE_FASTCDC_2020,
};
use scribe_format::{ChunkId, FileContentId, FormatError, ManifestId};

use super::support::{assert_refuses_truncation_and_trailing, check_area, Golden};

const MIB: u32 = 1024 * 1024;

fn small_file() -> Manifest {
    let content = b"hello, scribe\n";
    Manifest {
        chunking_profile: PROFILE_FASTCDC_2020,
        total_size: content.len() as u64,
        file_content_id: FileContentId::of(content),
        chunks: vec![ChunkRef {
            id: ChunkId::of(content),
            length: content.len() as u32,
        }],
    }
}

fn multi_chunk() -> Manifest {
    let a = ChunkId::of(b"fixture chunk a");
    let b = ChunkId::of(b"fixture chunk b");
    let chunks = vec![
        ChunkRef {
            id: a,
            length: 4 * MIB,
        },
        ChunkRef {
            id: b,
            length: 2 * MIB + 17,
        },
        // A repeated chunk id is allowed.
        ChunkRef {
            id: a,
            length: 4 * MIB,
        },
        ChunkRef { id: b, length: 1 },
    ];
    Manifest {
        chunking_profile: PROFILE_FASTCDC_2020,
        total_size: chunks.iter().map(|c| u64::from(c.length)).sum(),
        file_content_id: FileContentId::of(b"fixture multi-chunk file"),
        chunks,
    }
}

fn goldens() -> Vec<(&'static str, Manifest)> {
    vec![
        ("empty", Manifest::empty(PROFILE_FASTCDC_2020)),
        ("one-small-chunk", small_file()),
        ("multi-chunk-repeated-id", multi_chunk()),
    ]
}

#[test]
fn golden_fixtures() {
    let values = goldens();
    let list: Vec<Golden> = values
        .iter()
        .map(|(name, m)| Golden {
            name: name.to_string(),
            bytes: m.encode().unwrap(),
            identity: Some(m.id().unwrap().to_hex()),
        })
        .collect();
    let committed = check_area("manifest", &list);
    for (name, value) in &values {
        let bytes = &committed[*name];
        let decoded = Manifest::decode(bytes).unwrap();
        assert_eq!(&decoded, value, "{name}");
        assert_eq!(&decoded.encode().unwrap(), bytes, "{name}: re-encode");
        assert_eq!(decoded.id().unwrap(), ManifestId::of_payload(bytes));
        let view = ManifestRef::decode(bytes).unwrap();
        assert_eq!(view.id(), value.id().unwrap());
        assert_eq!(view.to_manifest(), *value);
        // The store's streaming identity (id.rs) agrees with this module's.
        let object =
            scribe_format::id::object_identity(scribe_format::ObjectKind::Manifest, bytes).unwrap();
        assert_eq!(
            object.digest,
            value.id().unwrap().0,
            "{name}: object identity"
        );
        assert_refuses_truncation_and_trailing(name, bytes, Manifest::decode);
    }
}

/// Guards against an encoder that is self-consistent but wrong: the bytes
/// here come from the specification's table, not from the encoder.
#[test]
fn small_file_bytes_by_hand() {
    let content = b"hello, scribe\n";
    let digest = *blake3::hash(content).as_bytes();
    let mut want: Vec<u8> = vec![
        0x01, 0x00, // version 1
        0x00, 0x00, 0x00, 0x00, // flags
        0x00, // content codec 0
        0x01, 0x00, // profile 1
        0x0e, 0, 0, 0, 0, 0, 0, 0, // total size 14
    ];
    want.extend_from_slice(&digest); // file content id
    want.extend_from_slice(&[0x01, 0x00, 0x00, 0x00]); // chunk count 1
    want.extend_from_slice(&digest); // chunk id
    want.extend_from_slice(&[0x0e, 0x00, 0x00, 0x00]); // chunk length 14
    assert_eq!(want.len(), 53 + 36);
    assert_eq!(small_file().encode().unwrap(), want);

    let mut hasher = blake3::Hasher::new();
    hasher.update(b"scribe:manifest:v1\0");
    hasher.update(&want);
    assert_eq!(small_file().id().unwrap().0, *hasher.finalize().as_bytes());
}

#[test]
fn empty_file_bytes_by_hand() {
    let mut want = vec![1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    want.extend_from_slice(
        &hex::decode("af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262").unwrap(),
    );
    want.extend_from_slice(&[0, 0, 0, 0]);
    assert_eq!(want.len(), HEADER_LEN);
    assert_eq!(Manifest::empty(1).encode().unwrap(), want);
}

fn decode_err(bytes: &[u8]) -> FormatError {
    Manifest::decode(bytes).unwrap_err()
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

/// Encode a possibly invalid manifest by hand, to feed the decoder.
fn raw(profile: u16, total: u64, content: FileContentId, chunks: &[(ChunkId, u32)]) -> Vec<u8> {
    let mut out = vec![1, 0, 0, 0, 0, 0, 0];
    out.extend_from_slice(&profile.to_le_bytes());
    out.extend_from_slice(&total.to_le_bytes());
    out.extend_from_slice(&content.0);
    out.extend_from_slice(&(chunks.len() as u32).to_le_bytes());
    for (id, len) in chunks {
        out.extend_from_slice(&id.0);
        out.extend_from_slice(&len.to_le_bytes());
    }
    out
}

#[test]
fn refuses_unknown_version_flags_and_codec() {
    let good = small_file().encode().unwrap();
    let mut b = good.clone();
    b[0] = 2;
    assert!(matches!(
        decode_err(&b),
        FormatError::UnsupportedVersion { version: 2, .. }
    ));
    for bit in 0..32 {
        let mut b = good.clone();
        b[2..6].copy_from_slice(&(1u32 << bit).to_le_bytes());
        assert_eq!(what(&decode_err(&b)), rule::FLAGS, "flag bit {bit}");
    }
    let mut b = good.clone();
    b[6] = 1;
    assert_eq!(what(&decode_err(&b)), rule::CODEC);
}

#[test]
fn refuses_unknown_profile() {
    let c = b"x";
    let b = raw(2, 1, FileContentId::of(c), &[(ChunkId::of(c), 1)]);
    assert_eq!(what(&decode_err(&b)), rule::PROFILE);
    let b = raw(0, 1, FileContentId::of(c), &[(ChunkId::of(c), 1)]);
    assert_eq!(what(&decode_err(&b)), rule::PROFILE);
    let mut m = small_file();
    m.chunking_profile = 7;
    assert_eq!(what(&m.encode().unwrap_err()), rule::PROFILE);
}

#[test]
fn refuses_sum_mismatch() {
    let id = ChunkId::of(b"c");
    let content = FileContentId::of(b"f");
    let b = raw(1, 10, content, &[(id, 9)]);
    assert_eq!(what(&decode_err(&b)), rule::SUM);
    let b = raw(1, 2 * MIB as u64, content, &[(id, MIB), (id, MIB - 1)]);
    assert_eq!(what(&decode_err(&b)), rule::SUM);
}

#[test]
fn refuses_chunks_for_empty_and_none_for_nonempty() {
    let b = raw(1, 0, FileContentId::EMPTY, &[(ChunkId::of(b""), 1)]);
    assert_eq!(what(&decode_err(&b)), rule::EMPTY_IFF_NO_CHUNKS);
    let b = raw(1, 5, FileContentId::of(b"12345"), &[]);
    assert_eq!(what(&decode_err(&b)), rule::EMPTY_IFF_NO_CHUNKS);
}

#[test]
fn refuses_bad_chunk_lengths() {
    let id = ChunkId::of(b"c");
    let content = FileContentId::of(b"f");
    let b = raw(1, 2 * MIB as u64, content, &[(id, 2 * MIB), (id, 0)]);
    assert_eq!(what(&decode_err(&b)), rule::CHUNK_LENGTH);
    let too_long = 16 * MIB + 1;
    let b = raw(1, u64::from(too_long), content, &[(id, too_long)]);
    assert_eq!(what(&decode_err(&b)), rule::CHUNK_LENGTH);
    // The maximum itself is fine.
    let b = raw(1, u64::from(16 * MIB), content, &[(id, 16 * MIB)]);
    Manifest::decode(&b).unwrap();
}

#[test]
fn refuses_wrong_empty_content_id() {
    let b = raw(1, 0, FileContentId::of(b"not empty"), &[]);
    assert_eq!(what(&decode_err(&b)), rule::EMPTY_CONTENT_ID);
    // Decision: a nonempty file cannot claim blake3("").
    let b = raw(1, 1, FileContentId::EMPTY, &[(ChunkId::of(b"x"), 1)]);
    assert_eq!(what(&decode_err(&b)), rule::EMPTY_CONTENT_ID);
}

#[test]
fn refuses_small_file_in_several_chunks() {
    let id = ChunkId::of(b"c");
    let content = FileContentId::of(b"f");
    let b = raw(1, 2, content, &[(id, 1), (id, 1)]);
    assert_eq!(what(&decode_err(&b)), rule::SMALL_FILE_ONE_CHUNK);
    // Exactly the profile minimum is still a one-chunk file.
    let b = raw(1, u64::from(MIB), content, &[(id, MIB / 2), (id, MIB / 2)]);
    assert_eq!(what(&decode_err(&b)), rule::SMALL_FILE_ONE_CHUNK);
    // One byte more may be two chunks.
    let b = raw(1, u64::from(MIB) + 1, content, &[(id, MIB), (id, 1)]);
    Manifest::decode(&b).unwrap();
}

#[test]
fn refuses_total_beyond_one_pib() {
    let b = raw(1, (1 << 50) + 1, FileContentId::of(b"f"), &[]);
    assert!(matches!(
        decode_err(&b),
        FormatError::LimitExceeded {
            what: rule::TOTAL_SIZE,
            ..
        }
    ));
}

/// A hostile chunk count must be refused from the header alone, before
/// any allocation proportional to it.
#[test]
fn refuses_chunk_count_against_limit_and_remaining_bytes() {
    let mut b = raw(1, 1, FileContentId::of(b"f"), &[]);
    b[49..53].copy_from_slice(&((1u32 << 30) + 1).to_le_bytes());
    assert!(matches!(
        decode_err(&b),
        FormatError::LimitExceeded {
            what: rule::CHUNK_COUNT,
            ..
        }
    ));
    b[49..53].copy_from_slice(&(1u32 << 30).to_le_bytes());
    assert!(matches!(
        decode_err(&b),
        FormatError::Truncated {
            what: rule::CHUNKS,
            needed,
            available: 0,
        } if needed == (1u64 << 30) * 36
    ));
    let mut b = small_file().encode().unwrap();
    b.extend_from_slice(&[0; 36]);
    assert!(matches!(
        decode_err(&b),
        FormatError::TrailingBytes {
            what: rule::CHUNKS,
            count: 36
        }
    ));
}

#[test]
fn builder_matches_owned_encoder() {
    let m = multi_chunk();
    let mut builder = ManifestBuilder::new(PROFILE_FASTCDC_2020).unwrap();
    builder.reserve(m.chunks.len());
    for chunk in &m.chunks {
        builder.push(*chunk).unwrap();
    }
    assert_eq!(builder.total_size(), m.total_size);
    assert_eq!(builder.chunk_count(), 4);
    let bytes = builder.finish(m.file_content_id).unwrap();
    assert_eq!(bytes, m.encode().unwrap());
    assert_eq!(bytes.len(), encoded_len(4));
    assert_eq!(encoded_len(4), HEADER_LEN + 4 * CHUNK_REF_LEN);

    let empty = ManifestBuilder::new(1)
        .unwrap()
        .finish(FileContentId::EMPTY)
        .unwrap();
    assert_eq!(empty, Manifest::empty(1).encode().unwrap());
}

#[test]
fn builder_refuses_what_the_decoder_refuses() {
    assert_eq!(what(&ManifestBuilder::new(9).unwrap_err()), rule::PROFILE);
    let mut b = ManifestBuilder::new(1).unwrap();
    let id = ChunkId::of(b"c");
    assert_eq!(
        what(&b.push(ChunkRef { id, length: 0 }).unwrap_err()),
        rule::CHUNK_LENGTH
    );
    b.push(ChunkRef { id, length: 1 }).unwrap();
    b.push(ChunkRef { id, length: 1 }).unwrap();
    let err = b.clone().finish(FileContentId::of(b"ab")).unwrap_err();
    assert_eq!(what(&err), rule::SMALL_FILE_ONE_CHUNK);
    let mut b = ManifestBuilder::new(1).unwrap();
    b.push(ChunkRef { id, length: 1 }).unwrap();
    assert_eq!(
        what(&b.finish(FileContentId::EMPTY).unwrap_err()),
        rule::EMPTY_CONTENT_ID
    );
    let b = ManifestBuilder::new(1).unwrap();
    assert_eq!(
        what(&b.finish(FileContentId::of(b"z")).unwrap_err()),
        rule::EMPTY_CONTENT_ID
    );
}

#[test]
fn borrowed_view_iterates_without_copying() {
    let bytes = multi_chunk().encode().unwrap();
    let view = ManifestRef::decode(&bytes).unwrap();
    assert_eq!(view.chunk_count(), 4);
    assert_eq!(view.chunks().len(), 4);
    assert_eq!(view.total_size(), multi_chunk().total_size);
    assert_eq!(view.chunking_profile(), 1);
    assert_eq!(view.file_content_id(), multi_chunk().file_content_id);
    assert_eq!(view.as_bytes().as_ptr(), bytes.as_ptr());
    let chunks: Vec<_> = view.chunks().collect();
    assert_eq!(chunks, multi_chunk().chunks);
}

fn arb_manifest() -> impl Strategy<Value = Manifest> {
    prop_oneof![
        Just(Manifest::empty(1)),
        // Small files: one chunk of up to the profile minimum.
        (1u32..=MIB, any::<[u8; 32]>(), any::<[u8; 32]>()).prop_map(|(len, c, f)| Manifest {
            chunking_profile: 1,
            total_size: len.into(),
            file_content_id: FileContentId(f),
            chunks: vec![ChunkRef {
                id: ChunkId(c),
                length: len
            }],
        }),
        // Larger files: first chunk above the minimum so the total is too.
        (
            MIB + 1..=16 * MIB,
            prop::collection::vec((1u32..=16 * MIB, any::<[u8; 32]>()), 0..20),
            any::<[u8; 32]>(),
            any::<[u8; 32]>()
        )
            .prop_map(|(first, rest, c, f)| {
                let mut chunks = vec![ChunkRef {
                    id: ChunkId(c),
                    length: first,
                }];
                chunks.extend(rest.into_iter().map(|(length, id)| ChunkRef {
                    id: ChunkId(id),
                    length,
                }));
                Manifest {
                    chunking_profile: 1,
                    total_size: chunks.iter().map(|c| u64::from(c.length)).sum(),
                    file_content_id: FileContentId(f),
                    chunks,
                }
            }),
    ]
    .prop_filter("blake3(\"\") only for the empty file", |m| {
        m.total_size == 0 || m.file_content_id != FileContentId::EMPTY
    })
}

proptest! {
    #[test]
    fn valid_manifests_round_trip(m in arb_manifest()) {
        let bytes = m.encode().unwrap();
        prop_assert_eq!(bytes.len(), encoded_len(m.chunks.len()));
        let back = Manifest::decode(&bytes).unwrap();
        prop_assert_eq!(&back, &m);
        prop_assert_eq!(back.encode().unwrap(), bytes);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(m) = Manifest::decode(&bytes) {
            prop_assert_eq!(m.encode().unwrap(), bytes);
        }
    }

    #[test]
    fn mutated_manifests_never_panic(
        m in arb_manifest(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut bytes = m.encode().unwrap();
        for (at, value) in flips {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        if let Ok(back) = Manifest::decode(&bytes) {
            prop_assert_eq!(back.encode().unwrap(), bytes);
        }
    }
}

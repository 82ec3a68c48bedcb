//! Metadata recovery journal profile 2: records, `.scrj` segments, the
//! archive `HEAD` cursor and frames (seed 004), against golden bytes.

use proptest::prelude::*;
use scribe_format::error::FormatError;
use scribe_format::recovery::*;

use super::support::{assert_refuses_truncation_and_trailing, check_area, Golden};

const IDENTITY: [u8; 16] = [0x11; 16];

fn declare(name: &str, key: ColumnType, value: ColumnType) -> Record {
    Record::Declare {
        name: name.into(),
        key,
        value,
    }
}

fn put(name: &str, key: &[u8], value: &[u8]) -> Record {
    Record::Put {
        name: name.into(),
        key: key.to_vec(),
        value: value.to_vec(),
    }
}

/// One transaction of each opcode: `meta` (&str -> bytes) declared, put,
/// removed, dropped, committed.
fn sample_records() -> Vec<Record> {
    vec![
        declare("meta", ColumnType::Utf8, ColumnType::Bytes),
        put("meta", b"schema", &[3, 0, 0, 0]),
        Record::Remove {
            name: "meta".into(),
            key: b"old".to_vec(),
        },
        Record::Drop {
            name: "meta".into(),
        },
        Record::Commit,
    ]
}

fn sample_segment() -> Vec<u8> {
    let records: Vec<(u64, Vec<u8>)> = sample_records()
        .iter()
        .enumerate()
        .map(|(i, r)| (7 + i as u64, r.encode().unwrap()))
        .collect();
    encode_segment(
        SegmentHeader {
            identity: IDENTITY,
            after: 6,
            end: 11,
        },
        &records,
    )
    .unwrap()
}

fn sample_head() -> ArchiveHead {
    ArchiveHead {
        identity: IDENTITY,
        segment: 1,
        offset: 4242,
        end: 11,
        chain: [0xc7; 32],
    }
}

#[test]
fn golden_records_segment_head_and_frame() {
    let recs = sample_records();
    // The exact bytes of each opcode, written out by hand from the spec.
    assert_eq!(
        recs[0].encode().unwrap(),
        [1, 1, 4, 0, b'm', b'e', b't', b'a', 2, 1]
    );
    assert_eq!(
        recs[1].encode().unwrap(),
        [
            1, 2, 4, 0, b'm', b'e', b't', b'a', 6, 0, 0, 0, b's', b'c', b'h', b'e', b'm', b'a', 4,
            0, 0, 0, 3, 0, 0, 0
        ]
    );
    assert_eq!(
        recs[2].encode().unwrap(),
        [1, 3, 4, 0, b'm', b'e', b't', b'a', 3, 0, 0, 0, b'o', b'l', b'd']
    );
    assert_eq!(
        recs[3].encode().unwrap(),
        [1, 4, 4, 0, b'm', b'e', b't', b'a']
    );
    assert_eq!(recs[4].encode().unwrap(), [1, 5]);

    let segment = sample_segment();
    assert_eq!(&segment[..4], b"SCRJ");
    assert_eq!(&segment[4..6], &[1, 0]);
    assert_eq!(&segment[6..22], &IDENTITY);
    assert_eq!(&segment[22..30], &6u64.to_le_bytes());
    assert_eq!(&segment[30..38], &11u64.to_le_bytes());
    assert_eq!(&segment[38..46], &7u64.to_le_bytes());
    let n = segment.len();
    assert_eq!(
        &segment[n - 32..],
        blake3::hash(&segment[..n - 32]).as_bytes()
    );

    let head = sample_head().encode();
    assert_eq!(head.len(), 112);
    assert_eq!(&head[..8], b"SCRARC1\0");
    assert_eq!(&head[80..], blake3::hash(&head[..80]).as_bytes());
    let zero = ArchiveHead::zero(IDENTITY, 0).encode();

    let (frame, chain) = Frame::encode(&[0; 32], &segment).unwrap();
    let mut h = blake3::Hasher::new();
    h.update(b"scribe:recovery-frame:v1\0");
    h.update(&[0; 32]);
    h.update(&(segment.len() as u64).to_le_bytes());
    h.update(&segment[n - 32..]);
    assert_eq!(chain, *h.finalize().as_bytes());
    assert_eq!(&frame[..8], &(n as u64).to_le_bytes());
    assert_eq!(&frame[frame.len() - 32..], &chain);

    let empty = encode_segment(
        SegmentHeader {
            identity: IDENTITY,
            after: 11,
            end: 11,
        },
        &[],
    )
    .unwrap();

    let g = |name: &str, bytes: Vec<u8>| Golden {
        name: name.into(),
        bytes,
        identity: None,
    };
    let goldens = vec![
        g("record-declare", recs[0].encode().unwrap()),
        g("record-put", recs[1].encode().unwrap()),
        g("record-remove", recs[2].encode().unwrap()),
        g("record-drop", recs[3].encode().unwrap()),
        g("record-commit", recs[4].encode().unwrap()),
        g("segment", segment.clone()),
        g("segment-empty", empty),
        g("head", head.to_vec()),
        g("head-zero", zero.to_vec()),
        g("frame", frame),
    ];
    let committed = check_area("recovery", &goldens);
    // The committed bytes decode back to the same values.
    for (i, name) in ["declare", "put", "remove", "drop", "commit"]
        .iter()
        .enumerate()
    {
        let bytes = &committed[&format!("record-{name}")];
        assert_eq!(Record::decode(bytes).unwrap(), recs[i]);
    }
    let (header, decoded) = decode_segment(&committed["segment"]).unwrap();
    assert_eq!(header.after, 6);
    assert_eq!(header.end, 11);
    assert_eq!(
        decoded.into_iter().map(|(_, r)| r).collect::<Vec<_>>(),
        recs
    );
    assert!(decode_segment(&committed["segment-empty"])
        .unwrap()
        .1
        .is_empty());
    assert_eq!(
        ArchiveHead::decode(&committed["head"]).unwrap(),
        sample_head()
    );
    assert_eq!(
        ArchiveHead::decode(&committed["head-zero"]).unwrap(),
        ArchiveHead::zero(IDENTITY, 0)
    );
    let (f, used) = Frame::decode(&committed["frame"], &[0; 32]).unwrap();
    assert_eq!(used, committed["frame"].len());
    assert_eq!(f.payload, committed["segment"].as_slice());
    assert_eq!(segment_file_name(7), "00000000000000000007.journal");
    assert_eq!(
        parse_segment_file_name("00000000000000000007.journal"),
        Some(7)
    );
    assert_eq!(parse_segment_file_name("7.journal"), None);
}

#[test]
fn every_prefix_and_trailing_byte_is_refused() {
    for r in sample_records() {
        assert_refuses_truncation_and_trailing("record", &r.encode().unwrap(), Record::decode);
    }
    assert_refuses_truncation_and_trailing("segment", &sample_segment(), decode_segment);
    assert_refuses_truncation_and_trailing("head", &sample_head().encode(), ArchiveHead::decode);
}

#[test]
fn malformed_records_are_refused_by_name() {
    assert!(matches!(
        Record::decode(&[2, 5]),
        Err(RecoveryError::Format(
            FormatError::UnsupportedVersion { .. }
        ))
    ));
    assert_eq!(
        Record::decode(&[1, 6]),
        Err(RecoveryError::UnknownOpcode(6))
    );
    assert_eq!(
        Record::decode(&[1, 0]),
        Err(RecoveryError::UnknownOpcode(0))
    );
    assert_eq!(
        Record::decode(&[1, 1, 1, 0, b't', 5, 1]),
        Err(RecoveryError::UnknownType(5))
    );
    assert_eq!(
        Record::decode(&[1, 1, 1, 0, b't', 1, 0]),
        Err(RecoveryError::UnknownType(0))
    );
    // A table name that is not UTF-8.
    assert!(matches!(
        Record::decode(&[1, 4, 1, 0, 0xff]),
        Err(RecoveryError::Format(FormatError::NotUtf8 { .. }))
    ));
    assert_eq!(Record::decode(&[1, 4, 0, 0]), Err(RecoveryError::EmptyName));
    // A 257-byte name.
    let mut long = vec![1, 4];
    long.extend_from_slice(&257u16.to_le_bytes());
    long.extend(std::iter::repeat_n(b'a', 257));
    assert!(matches!(
        Record::decode(&long),
        Err(RecoveryError::Format(FormatError::LimitExceeded { .. }))
    ));
    // A key length beyond 1 MiB refuses before reading (or allocating) it.
    let mut big = vec![1, 3, 1, 0, b't'];
    big.extend_from_slice(&((MAX_KEY + 1) as u32).to_le_bytes());
    assert!(matches!(
        Record::decode(&big),
        Err(RecoveryError::Format(FormatError::LimitExceeded { .. }))
    ));
    let mut big = vec![1, 2, 1, 0, b't', 0, 0, 0, 0];
    big.extend_from_slice(&((MAX_VALUE + 1) as u32).to_le_bytes());
    assert!(matches!(
        Record::decode(&big),
        Err(RecoveryError::Format(FormatError::LimitExceeded { .. }))
    ));
    for reserved in RESERVED_TABLES {
        let rec = Record::Drop {
            name: reserved.into(),
        };
        assert!(matches!(rec.encode(), Err(RecoveryError::ReservedTable(_))));
        let mut bytes = vec![1, 4];
        bytes.extend_from_slice(&(reserved.len() as u16).to_le_bytes());
        bytes.extend_from_slice(reserved.as_bytes());
        assert_eq!(
            Record::decode(&bytes),
            Err(RecoveryError::ReservedTable(reserved.into()))
        );
    }
}

#[test]
fn declared_types_check_widths_and_strings() {
    let mut tc = TypeCheck::default();
    // Undeclared.
    assert!(matches!(
        tc.apply(&put("t", b"k", b"v")),
        Err(RecoveryError::UndeclaredTable(_))
    ));
    tc.apply(&declare("ids", ColumnType::Id16, ColumnType::U64))
        .unwrap();
    tc.apply(&declare("names", ColumnType::Utf8, ColumnType::Utf8))
        .unwrap();
    tc.apply(&put("ids", &[0; 16], &[0; 8])).unwrap();
    assert_eq!(tc.pending(), 3);
    assert!(matches!(
        tc.apply(&put("ids", &[0; 15], &[0; 8])),
        Err(RecoveryError::InvalidWidth {
            column: "key",
            expected: 16,
            actual: 15,
            ..
        })
    ));
    assert!(matches!(
        tc.apply(&put("ids", &[0; 16], &[0; 9])),
        Err(RecoveryError::InvalidWidth {
            column: "value",
            expected: 8,
            actual: 9,
            ..
        })
    ));
    assert!(matches!(
        tc.apply(&Record::Remove {
            name: "ids".into(),
            key: vec![1; 17]
        }),
        Err(RecoveryError::InvalidWidth { .. })
    ));
    assert!(matches!(
        tc.apply(&put("names", b"ok", &[0xc3])),
        Err(RecoveryError::MalformedString {
            column: "value",
            ..
        })
    ));
    assert!(matches!(
        tc.apply(&declare("ids", ColumnType::Bytes, ColumnType::U64)),
        Err(RecoveryError::TypeConflict { .. })
    ));
    // The same declaration again is fine; a drop forgets the types.
    tc.apply(&declare("ids", ColumnType::Id16, ColumnType::U64))
        .unwrap();
    tc.apply(&Record::Drop { name: "ids".into() }).unwrap();
    tc.apply(&Record::Commit).unwrap();
    assert_eq!(tc.pending(), 0);
    assert!(matches!(
        tc.apply(&put("ids", &[0; 16], &[0; 8])),
        Err(RecoveryError::UndeclaredTable(_))
    ));
}

fn segment_of(after: u64, records: &[Record]) -> Vec<u8> {
    let pairs: Vec<(u64, Vec<u8>)> = records
        .iter()
        .enumerate()
        .map(|(i, r)| (after + 1 + i as u64, r.encode().unwrap()))
        .collect();
    let mut out = SEGMENT_MAGIC.to_vec();
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&IDENTITY);
    out.extend_from_slice(&after.to_le_bytes());
    out.extend_from_slice(&(after + records.len() as u64).to_le_bytes());
    for (s, r) in pairs {
        out.extend_from_slice(&s.to_le_bytes());
        out.extend_from_slice(&(r.len() as u32).to_le_bytes());
        out.extend_from_slice(&r);
    }
    let d = blake3::hash(&out);
    out.extend_from_slice(d.as_bytes());
    out
}

#[test]
fn malformed_segments_are_refused_by_name() {
    let good = sample_segment();
    // Flip one bit in a record: the record may still decode, the digest not.
    let mut flipped = good.clone();
    let last = flipped.len() - 40;
    flipped[last] ^= 1;
    assert!(decode_segment(&flipped).is_err());
    let mut flipped = good.clone();
    flipped[50 + 5] ^= 0x01; // "meta" -> "mdta" in the first record
    assert!(matches!(
        decode_segment(&flipped),
        Err(RecoveryError::Checksum { .. })
    ));
    // Bad magic, version.
    let mut bad = good.clone();
    bad[0] = b'X';
    assert!(matches!(
        decode_segment(&bad),
        Err(RecoveryError::Format(FormatError::BadMagic { .. }))
    ));
    let mut bad = good.clone();
    bad[4] = 2;
    assert!(matches!(
        decode_segment(&bad),
        Err(RecoveryError::Format(
            FormatError::UnsupportedVersion { .. }
        ))
    ));
    // after > end.
    let mut bad = good.clone();
    bad[22..30].copy_from_slice(&12u64.to_le_bytes());
    assert_eq!(
        decode_segment(&bad).unwrap_err(),
        RecoveryError::CursorOrder { after: 12, end: 11 }
    );
    // A sequence out of order.
    let mut bad = good.clone();
    bad[38..46].copy_from_slice(&8u64.to_le_bytes());
    assert_eq!(
        decode_segment(&bad).unwrap_err(),
        RecoveryError::SequenceGap {
            expected: 7,
            found: 8
        }
    );
    // A segment whose end is not a commit boundary: an incomplete transaction.
    let open = segment_of(0, &[declare("t", ColumnType::Bytes, ColumnType::Bytes)]);
    assert_eq!(
        decode_segment(&open).unwrap_err(),
        RecoveryError::IncompleteTransaction { sequence: 1 }
    );
    // The writer refuses to produce one too.
    let mut w = SegmentWriter::new(
        Vec::new(),
        SegmentHeader {
            identity: IDENTITY,
            after: 0,
            end: 1,
        },
    )
    .unwrap();
    w.record(
        1,
        &declare("t", ColumnType::Bytes, ColumnType::Bytes)
            .encode()
            .unwrap(),
    )
    .unwrap();
    assert!(matches!(
        w.finish(),
        Err(RecoveryError::IncompleteTransaction { sequence: 1 })
    ));
    // A record length beyond the largest record refuses before allocating.
    let mut huge = good[..46].to_vec();
    huge.extend_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        decode_segment(&huge),
        Err(RecoveryError::Format(FormatError::LimitExceeded { .. }))
    ));
    // Trailing data after the digest.
    let mut trailing = good.clone();
    trailing.extend_from_slice(b"junk");
    assert!(matches!(
        decode_segment(&trailing),
        Err(RecoveryError::Format(FormatError::TrailingBytes { .. }))
    ));
}

#[test]
fn malformed_heads_and_frames_are_refused_by_name() {
    let head = sample_head().encode();
    let mut bad = head;
    bad[20] ^= 1;
    assert_eq!(
        ArchiveHead::decode(&bad),
        Err(RecoveryError::Checksum {
            what: "archive HEAD"
        })
    );
    let mut bad = head;
    bad[7] = 1;
    assert!(matches!(
        ArchiveHead::decode(&bad),
        Err(RecoveryError::Format(FormatError::BadMagic { .. }))
    ));
    // Segment 0 with an offset, or a position with a zero chain.
    for h in [
        ArchiveHead {
            segment: 0,
            ..sample_head()
        },
        ArchiveHead {
            chain: [0; 32],
            ..sample_head()
        },
        ArchiveHead {
            offset: 0,
            ..sample_head()
        },
    ] {
        assert!(matches!(
            ArchiveHead::decode(&h.encode()),
            Err(RecoveryError::InvalidHead(_))
        ));
    }
    let (frame, chain) = Frame::encode(&[0; 32], &sample_segment()).unwrap();
    assert_eq!(
        Frame::decode(&frame, &[1; 32]).unwrap_err(),
        RecoveryError::ChainMismatch
    );
    let mut bad = frame.clone();
    let n = bad.len();
    bad[n - 1] ^= 1;
    assert!(matches!(
        Frame::decode(&bad, &[0; 32]),
        Err(RecoveryError::Checksum { .. })
    ));
    // A length beyond the file.
    let mut bad = frame.clone();
    bad[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(matches!(
        Frame::decode(&bad, &[0; 32]),
        Err(RecoveryError::Format(FormatError::Truncated { .. }))
    ));
    // Two chained frames.
    let (second, chain2) = Frame::encode(&chain, &sample_segment()).unwrap();
    let mut both = frame.clone();
    both.extend_from_slice(&second);
    let (_, used) = Frame::decode(&both, &[0; 32]).unwrap();
    let (f2, _) = Frame::decode(&both[used..], &chain).unwrap();
    assert_eq!(f2.chain, chain2);
    for cut in 0..frame.len() {
        assert!(Frame::decode(&frame[..cut], &[0; 32]).is_err());
    }
}

fn column_type() -> impl Strategy<Value = ColumnType> {
    prop_oneof![
        Just(ColumnType::Bytes),
        Just(ColumnType::Utf8),
        Just(ColumnType::Id16),
        Just(ColumnType::U64)
    ]
}

fn record() -> impl Strategy<Value = Record> {
    let name =
        "[a-z_]{1,20}".prop_filter("not reserved", |n| !RESERVED_TABLES.contains(&n.as_str()));
    let bytes = proptest::collection::vec(any::<u8>(), 0..64);
    prop_oneof![
        (name.clone(), column_type(), column_type())
            .prop_map(|(name, key, value)| Record::Declare { name, key, value }),
        (name.clone(), bytes.clone(), bytes.clone()).prop_map(|(name, key, value)| Record::Put {
            name,
            key,
            value
        }),
        (name.clone(), bytes).prop_map(|(name, key)| Record::Remove { name, key }),
        name.prop_map(|name| Record::Drop { name }),
        Just(Record::Commit),
    ]
}

proptest! {
    #[test]
    fn records_and_segments_round_trip(
        mut records in proptest::collection::vec(record(), 0..24),
        after in 0u64..1_000_000,
        identity in any::<[u8; 16]>(),
    ) {
        if !records.is_empty() {
            records.push(Record::Commit);
        }
        let pairs: Vec<(u64, Vec<u8>)> = records
            .iter()
            .enumerate()
            .map(|(i, r)| (after + 1 + i as u64, r.encode().unwrap()))
            .collect();
        for ((_, bytes), r) in pairs.iter().zip(&records) {
            prop_assert_eq!(&Record::decode(bytes).unwrap(), r);
        }
        let header = SegmentHeader { identity, after, end: after + records.len() as u64 };
        let seg = encode_segment(header, &pairs).unwrap();
        let (h, back) = decode_segment(&seg).unwrap();
        prop_assert_eq!(h, header);
        prop_assert_eq!(back.into_iter().map(|(_, r)| r).collect::<Vec<_>>(), records);
        // A streamed read over a one-byte-at-a-time reader agrees.
        struct Slow<'a>(&'a [u8]);
        impl std::io::Read for Slow<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                if self.0.is_empty() || buf.is_empty() { return Ok(0); }
                buf[0] = self.0[0];
                self.0 = &self.0[1..];
                Ok(1)
            }
        }
        let (h2, _) = SegmentReader::new(Slow(&seg)).unwrap().read_all().unwrap();
        prop_assert_eq!(h2, header);
        scribe_format::recovery::fuzz_decoders(&seg);
    }

    #[test]
    fn heads_round_trip(identity in any::<[u8; 16]>(), segment in 1u64.., offset in 1u64.., end in any::<u64>(), chain in any::<[u8; 32]>()) {
        prop_assume!(chain != [0; 32]);
        let h = ArchiveHead { identity, segment, offset, end, chain };
        prop_assert_eq!(ArchiveHead::decode(&h.encode()).unwrap(), h);
    }

    /// `is_put_record` accepts exactly `encode_put`'s bytes for the same
    /// name, key and value, and refuses them for any other row, and any
    /// one byte changed, dropped or added.
    #[test]
    fn a_put_record_matches_only_its_own_row(
        name in "[a-z_]{1,20}".prop_filter("not reserved", |n| !RESERVED_TABLES.contains(&n.as_str())),
        key in proptest::collection::vec(any::<u8>(), 0..40),
        value in proptest::collection::vec(any::<u8>(), 0..40),
        other in proptest::collection::vec(any::<u8>(), 0..40),
        at in any::<prop::sample::Index>(),
        flip in 1u8..,
    ) {
        let mut rec = Vec::new();
        encode_put(&mut rec, &name, &key, &value).unwrap();
        prop_assert!(is_put_record(&rec, &name, &key, &value));
        if other != key {
            prop_assert!(!is_put_record(&rec, &name, &other, &value));
        }
        if other != value {
            prop_assert!(!is_put_record(&rec, &name, &key, &other));
        }
        let longer_name = format!("{name}x");
        prop_assert!(!is_put_record(&rec, &longer_name, &key, &value));
        let i = at.index(rec.len());
        let mut changed = rec.clone();
        changed[i] ^= flip;
        prop_assert!(!is_put_record(&changed, &name, &key, &value));
        prop_assert!(!is_put_record(&rec[..rec.len() - 1], &name, &key, &value));
        let mut longer = rec.clone();
        longer.push(0);
        prop_assert!(!is_put_record(&longer, &name, &key, &value));
        // A remove record of the same row is no put.
        let mut remove = Vec::new();
        encode_remove(&mut remove, &name, &key).unwrap();
        prop_assert!(!is_put_record(&remove, &name, &key, &[]));
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..256)) {
        scribe_format::recovery::fuzz_decoders(&data);
    }
}

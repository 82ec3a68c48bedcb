//! Consolidated recovery bases: the logical base (`.scrb`) and the archive
//! `BASE` pointer (seed 004), against golden bytes.

use proptest::prelude::*;
use scribe_format::recovery::{ArchiveHead, ColumnType, Record, RecoveryError};
use scribe_format::recovery_base::*;

use super::support::{assert_refuses_truncation_and_trailing, check_area, Golden};

const IDENTITY: [u8; 16] = [0x22; 16];

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

/// Two tables: `history` (u64 -> bytes; 2 sorts before 256 although its
/// first byte is larger) and `meta` (&str -> bytes).
fn sample_entries() -> Vec<Record> {
    vec![
        declare("history", ColumnType::U64, ColumnType::Bytes),
        put("history", &2u64.to_le_bytes(), b"two"),
        put("history", &256u64.to_le_bytes(), b"two hundred fifty-six"),
        declare("meta", ColumnType::Utf8, ColumnType::Bytes),
        put("meta", b"a", &[1]),
        put("meta", b"schema", &[3, 0, 0, 0]),
    ]
}

fn header() -> BaseHeader {
    BaseHeader {
        identity: IDENTITY,
        end: 42,
    }
}

fn sample_pointer(base: &[u8]) -> BasePointer {
    BasePointer {
        cursor: ArchiveHead {
            identity: IDENTITY,
            segment: 3,
            offset: 9000,
            end: 42,
            chain: [0x5a; 32],
        },
        file_digest: *blake3::hash(base).as_bytes(),
    }
}

#[test]
fn golden_base_and_pointer() {
    let entries = sample_entries();
    let base = encode_base(header(), &entries).unwrap();
    // The layout written out from the spec.
    assert_eq!(&base[..4], b"SCRB");
    assert_eq!(&base[4..6], &[1, 0]);
    assert_eq!(&base[6..22], &IDENTITY);
    assert_eq!(&base[22..30], &42u64.to_le_bytes());
    let first = entries[0].encode().unwrap();
    assert_eq!(&base[30..34], &(first.len() as u32).to_le_bytes());
    assert_eq!(&base[34..34 + first.len()], first.as_slice());
    let n = base.len();
    assert_eq!(&base[n - 36..n - 32], &[0, 0, 0, 0]);
    assert_eq!(&base[n - 32..], blake3::hash(&base[..n - 32]).as_bytes());
    // The writer's file digest is the whole file's.
    let mut w = BaseWriter::new(Vec::new(), header()).unwrap();
    for e in &entries {
        match e {
            Record::Declare { name, key, value } => w.declare(name, *key, *value).unwrap(),
            Record::Put { name, key, value } => w.put(name, key, value).unwrap(),
            _ => unreachable!(),
        }
    }
    let (bytes, digest, len) = w.finish().unwrap();
    assert_eq!(bytes, base);
    assert_eq!(len, base.len() as u64);
    assert_eq!(&digest, blake3::hash(&base).as_bytes());

    let pointer = sample_pointer(&base).encode();
    assert_eq!(pointer.len(), 176);
    assert_eq!(&pointer[..112], &sample_pointer(&base).cursor.encode());
    assert_eq!(&pointer[112..144], blake3::hash(&base).as_bytes());
    assert_eq!(&pointer[144..], blake3::hash(&pointer[..144]).as_bytes());

    let empty = encode_base(
        BaseHeader {
            identity: IDENTITY,
            end: 0,
        },
        &[],
    )
    .unwrap();
    assert_eq!(empty.len(), 30 + 4 + 32);

    let g = |name: &str, bytes: Vec<u8>| Golden {
        name: name.into(),
        bytes,
        identity: None,
    };
    let committed = check_area(
        "recovery-base",
        &[
            g("base", base.clone()),
            g("base-empty", empty),
            g("pointer", pointer.to_vec()),
        ],
    );
    let (h, back) = decode_base(&committed["base"]).unwrap();
    assert_eq!(h, header());
    assert_eq!(back, entries);
    assert!(decode_base(&committed["base-empty"]).unwrap().1.is_empty());
    assert_eq!(
        BasePointer::decode(&committed["pointer"]).unwrap(),
        sample_pointer(&base)
    );
    let mut r = BaseReader::new(committed["base"].as_slice()).unwrap();
    while r.next_record().unwrap().is_some() {}
    assert_eq!(&r.file_digest(), blake3::hash(&base).as_bytes());
    assert_eq!(r.offset(), base.len() as u64);
    assert_eq!(base_file_name(42), "base-00000000000000000042.scrb");
    assert_eq!(
        parse_base_file_name("base-00000000000000000042.scrb"),
        Some(42)
    );
    assert_eq!(parse_base_file_name("base-42.scrb"), None);
    assert_eq!(parse_base_file_name("00000000000000000042.journal"), None);
}

#[test]
fn every_prefix_and_trailing_byte_is_refused() {
    let base = encode_base(header(), &sample_entries()).unwrap();
    assert_refuses_truncation_and_trailing("base", &base, decode_base);
    assert_refuses_truncation_and_trailing(
        "pointer",
        &sample_pointer(&base).encode(),
        BasePointer::decode,
    );
}

fn refusal(entries: &[Record]) -> RecoveryError {
    // Written by hand (the writer refuses the same entries), then decoded.
    let mut out = Vec::new();
    out.extend_from_slice(b"SCRB");
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&IDENTITY);
    out.extend_from_slice(&7u64.to_le_bytes());
    for e in entries {
        let b = e.encode().unwrap();
        out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        out.extend_from_slice(&b);
    }
    out.extend_from_slice(&0u32.to_le_bytes());
    let sum = blake3::hash(&out);
    out.extend_from_slice(sum.as_bytes());
    assert!(encode_base(
        BaseHeader {
            identity: IDENTITY,
            end: 7
        },
        entries
    )
    .is_err());
    decode_base(&out).unwrap_err()
}

#[test]
fn misplaced_entries_are_refused_by_name() {
    let h = |t| declare(t, ColumnType::U64, ColumnType::Bytes);
    let k = |n: u64| n.to_le_bytes();
    let what = |e: RecoveryError| match e {
        RecoveryError::InvalidBase { what, .. } => what,
        other => panic!("not InvalidBase: {other:?}"),
    };
    assert_eq!(
        what(refusal(&[
            h("t"),
            put("t", &k(256), b""),
            put("t", &k(2), b"")
        ])),
        "rows out of key order"
    );
    assert_eq!(
        what(refusal(&[
            h("t"),
            put("t", &k(2), b""),
            put("t", &k(2), b"")
        ])),
        "rows out of key order"
    );
    assert_eq!(what(refusal(&[h("t"), h("t")])), "declared twice");
    assert_eq!(
        what(refusal(&[h("t"), h("u"), put("t", &k(1), b"")])),
        "a row after another table's declaration"
    );
    assert_eq!(
        what(refusal(&[h("t"), Record::Commit])),
        "only declarations and puts belong in a base"
    );
    assert_eq!(
        what(refusal(&[
            h("t"),
            Record::Remove {
                name: "t".into(),
                key: k(1).to_vec()
            }
        ])),
        "only declarations and puts belong in a base"
    );
    assert!(matches!(
        refusal(&[put("t", &k(1), b"")]),
        RecoveryError::UndeclaredTable(_)
    ));
    assert!(matches!(
        refusal(&[h("t"), put("t", b"short", b"")]),
        RecoveryError::InvalidWidth { .. }
    ));
    // Byte order for other key types: "b" after "ab" is fine, "a" after "b" not.
    let s = declare("s", ColumnType::Utf8, ColumnType::Bytes);
    assert!(encode_base(
        header(),
        &[s.clone(), put("s", b"ab", b""), put("s", b"b", b"")]
    )
    .is_ok());
    assert_eq!(
        what(refusal(&[s, put("s", b"b", b""), put("s", b"a", b"")])),
        "rows out of key order"
    );
}

#[test]
fn damaged_bases_and_pointers_are_refused_by_name() {
    let base = encode_base(header(), &sample_entries()).unwrap();
    // A flipped byte in any entry or the checksum: checksum mismatch (or a
    // decode refusal when it lands in a length or opcode), never success.
    for at in 30..base.len() {
        let mut b = base.clone();
        b[at] ^= 0x01;
        assert!(decode_base(&b).is_err(), "flip at {at} accepted");
    }
    let mut b = base.clone();
    let n = b.len();
    b[n - 1] ^= 0x80;
    assert_eq!(
        decode_base(&b).unwrap_err(),
        RecoveryError::Checksum {
            what: "logical base"
        }
    );
    let mut magic = base.clone();
    magic[0] = b'X';
    assert!(matches!(
        decode_base(&magic).unwrap_err(),
        RecoveryError::Format(_)
    ));
    let mut version = base.clone();
    version[4] = 2;
    assert!(matches!(
        decode_base(&version).unwrap_err(),
        RecoveryError::Format(_)
    ));
    let p = sample_pointer(&base).encode();
    for at in 0..p.len() {
        let mut q = p;
        q[at] ^= 0x10;
        assert!(BasePointer::decode(&q).is_err(), "flip at {at} accepted");
    }
    let mut q = p;
    q[150] ^= 1;
    assert_eq!(
        BasePointer::decode(&q).unwrap_err(),
        RecoveryError::Checksum {
            what: "archive BASE"
        }
    );
}

fn column_type() -> impl Strategy<Value = ColumnType> {
    prop_oneof![
        Just(ColumnType::Bytes),
        Just(ColumnType::Utf8),
        Just(ColumnType::Id16),
        Just(ColumnType::U64)
    ]
}

fn key_of(t: ColumnType, seed: u64) -> Vec<u8> {
    match t {
        ColumnType::U64 => seed.to_le_bytes().to_vec(),
        ColumnType::Id16 => {
            let mut k = [0u8; 16];
            k[..8].copy_from_slice(&seed.to_be_bytes());
            k.to_vec()
        }
        _ => format!("{seed:020}").into_bytes(),
    }
}

proptest! {
    #[test]
    fn bases_round_trip(
        tables in proptest::collection::btree_map("[a-z]{1,12}", (column_type(), proptest::collection::btree_set(any::<u64>(), 0..16)), 0..6),
        end in any::<u64>(),
        identity in any::<[u8; 16]>(),
    ) {
        let mut entries = Vec::new();
        for (name, (kt, keys)) in &tables {
            entries.push(declare(name, *kt, ColumnType::Bytes));
            for k in keys {
                entries.push(put(name, &key_of(*kt, *k), &k.to_be_bytes()));
            }
        }
        let header = BaseHeader { identity, end };
        let bytes = encode_base(header, &entries).unwrap();
        let (h, back) = decode_base(&bytes).unwrap();
        prop_assert_eq!(h, header);
        prop_assert_eq!(back, entries);
        fuzz_decoders(&bytes);
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..256)) {
        fuzz_decoders(&data);
    }
}

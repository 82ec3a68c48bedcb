//! `.scmx` metadata export (seed 004 section 10): golden bytes, the import
//! limits, truncation and digest refusals with their byte offsets, and
//! arbitrary bytes never panicking the streamed decoder.

use proptest::prelude::*;
use scribe_format::scmx::{
    Export, ScmxProblem, ScmxReader, ScmxWriter, MAX_KEY, MAX_NAME, MAX_TABLES, MAX_VALUE,
};
use scribe_format::ErrorCode;

use super::support::{assert_refuses_truncation_and_trailing, check_area, Golden};

const REPO: [u8; 16] = [0x5c; 16];

fn sample() -> Export {
    Export {
        repository: REPO,
        tables: vec![
            (
                "meta".into(),
                vec![(b"schema".to_vec(), 3u32.to_le_bytes().to_vec())],
            ),
            ("locks".into(), vec![]),
            (
                "commits".into(),
                vec![
                    (1u64.to_le_bytes().to_vec(), vec![1, 2, 3]),
                    (2u64.to_le_bytes().to_vec(), vec![]),
                ],
            ),
        ],
    }
}

#[test]
fn golden_export_bytes() {
    let bytes = sample().encode().unwrap();
    // Written out from the specification.
    let mut want = Vec::new();
    want.extend_from_slice(b"SCMX");
    want.extend_from_slice(&1u16.to_le_bytes());
    want.extend_from_slice(&REPO);
    want.extend_from_slice(&3u32.to_le_bytes());
    want.extend_from_slice(&4u16.to_le_bytes());
    want.extend_from_slice(b"meta");
    want.extend_from_slice(&1u64.to_le_bytes());
    want.extend_from_slice(&6u32.to_le_bytes());
    want.extend_from_slice(b"schema");
    want.extend_from_slice(&4u32.to_le_bytes());
    want.extend_from_slice(&3u32.to_le_bytes());
    want.extend_from_slice(&5u16.to_le_bytes());
    want.extend_from_slice(b"locks");
    want.extend_from_slice(&0u64.to_le_bytes());
    want.extend_from_slice(&7u16.to_le_bytes());
    want.extend_from_slice(b"commits");
    want.extend_from_slice(&2u64.to_le_bytes());
    want.extend_from_slice(&8u32.to_le_bytes());
    want.extend_from_slice(&1u64.to_le_bytes());
    want.extend_from_slice(&3u32.to_le_bytes());
    want.extend_from_slice(&[1, 2, 3]);
    want.extend_from_slice(&8u32.to_le_bytes());
    want.extend_from_slice(&2u64.to_le_bytes());
    want.extend_from_slice(&0u32.to_le_bytes());
    let digest = *blake3::hash(&want).as_bytes();
    want.extend_from_slice(&digest);
    assert_eq!(bytes, want);
    let committed = check_area(
        "scmx",
        &[Golden {
            name: "export".into(),
            bytes,
            identity: None,
        }],
    );
    assert_eq!(Export::decode(&committed["export"]).unwrap(), sample());
}

#[test]
fn every_prefix_and_trailing_byte_is_refused() {
    let bytes = sample().encode().unwrap();
    assert_refuses_truncation_and_trailing("scmx", &bytes, Export::decode);
    // A truncation names where the file ended.
    let cut = bytes.len() - 40;
    let e = Export::decode(&bytes[..cut]).unwrap_err();
    assert!(matches!(e.problem, ScmxProblem::Truncated { .. }), "{e}");
    assert_eq!(e.offset, cut as u64, "{e}");
    assert!(
        e.to_string().starts_with(&format!("at byte {cut}: ")),
        "{e}"
    );
    assert_eq!(e.code(), ErrorCode::Malformed);
}

#[test]
fn a_flipped_bit_is_refused_by_the_digest_or_a_field() {
    let bytes = sample().encode().unwrap();
    for i in 0..bytes.len() {
        let mut b = bytes.clone();
        b[i] ^= 0x10;
        assert!(Export::decode(&b).is_err(), "flip at {i} accepted");
    }
    // In a value: only the digest notices; it names the digest's offset.
    let mut b = bytes.clone();
    let n = b.len();
    b[n - 40] ^= 1;
    let e = Export::decode(&b).unwrap_err();
    assert_eq!(e.problem, ScmxProblem::DigestMismatch);
    assert_eq!(e.offset, (n - 32) as u64);
    assert_eq!(e.code(), ErrorCode::Corrupt);
}

fn header(tables: u32) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(b"SCMX");
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(&REPO);
    b.extend_from_slice(&tables.to_le_bytes());
    b
}

#[test]
fn import_limits_are_refused_before_allocating() {
    let e = ScmxReader::new(header(MAX_TABLES + 1).as_slice())
        .err()
        .unwrap();
    assert_eq!(e.problem, ScmxProblem::TooManyTables { count: 65 });
    assert_eq!((e.offset, e.code()), (22, ErrorCode::LimitExceeded));
    assert!(ScmxReader::new(header(MAX_TABLES).as_slice()).is_ok());

    let mut b = header(1);
    b.extend_from_slice(&((MAX_NAME + 1) as u16).to_le_bytes());
    b.extend_from_slice(&[b'a'; MAX_NAME + 1]);
    let e = Export::decode(&b).unwrap_err();
    assert_eq!(e.problem, ScmxProblem::NameTooLong { len: 65 });
    assert_eq!(e.offset, 26);

    let mut b = header(1);
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&[0xff, 0xfe]);
    b.extend_from_slice(&1u64.to_le_bytes());
    assert_eq!(
        Export::decode(&b).unwrap_err().problem,
        ScmxProblem::NameNotUtf8
    );

    let mut t = header(1);
    t.extend_from_slice(&1u16.to_le_bytes());
    t.push(b't');
    t.extend_from_slice(&u64::MAX.to_le_bytes());
    let mut b = t.clone();
    b.extend_from_slice(&((MAX_KEY + 1) as u32).to_le_bytes());
    let e = Export::decode(&b).unwrap_err();
    assert_eq!(e.problem, ScmxProblem::KeyTooLarge { len: 1 << 20 | 1 });
    assert_eq!(e.offset, t.len() as u64);
    let mut b = t.clone();
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&((MAX_VALUE + 1) as u32).to_le_bytes());
    let e = Export::decode(&b).unwrap_err();
    assert_eq!(e.problem, ScmxProblem::ValueTooLarge { len: 16 << 20 | 1 });
    assert_eq!(e.offset, t.len() as u64 + 4);
    // A huge row count allocates nothing: the input simply ends.
    let e = Export::decode(&t).unwrap_err();
    assert!(matches!(e.problem, ScmxProblem::Truncated { .. }), "{e}");

    let mut b = header(0);
    b[4] = 2;
    assert_eq!(
        ScmxReader::new(b.as_slice()).err().unwrap().problem,
        ScmxProblem::UnsupportedVersion(2)
    );
}

#[test]
fn the_writer_refuses_what_the_reader_would() {
    let mut w = ScmxWriter::new(Vec::new(), REPO, 1).unwrap();
    assert!(w.table(&"n".repeat(MAX_NAME + 1), 0).is_err());
    w.table("t", 1).unwrap();
    assert!(w.table("u", 0).is_err());
    w.row(b"k", b"v").unwrap();
    assert!(w.row(b"k", b"v").is_err());
    assert!(w.finish().is_ok());
    let w = ScmxWriter::new(Vec::new(), REPO, 1).unwrap();
    assert!(w.finish().is_err());
}

fn export() -> impl Strategy<Value = Export> {
    let row = (
        proptest::collection::vec(any::<u8>(), 0..12),
        proptest::collection::vec(any::<u8>(), 0..12),
    );
    let table = ("[a-z_]{1,12}", proptest::collection::vec(row, 0..4));
    (any::<[u8; 16]>(), proptest::collection::vec(table, 0..4))
        .prop_map(|(repository, tables)| Export { repository, tables })
}

proptest! {
    #[test]
    fn exports_round_trip(e in export()) {
        let bytes = e.encode().unwrap();
        prop_assert_eq!(Export::decode(&bytes).unwrap(), e);
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..256)) {
        scribe_format::scmx::fuzz_decoder(&data);
    }

    #[test]
    fn mutated_exports_never_panic(e in export(), at in any::<usize>(), byte in any::<u8>()) {
        let mut bytes = e.encode().unwrap();
        let i = at % bytes.len();
        bytes[i] = byte;
        scribe_format::scmx::fuzz_decoder(&bytes);
    }
}

//! Checkpoint manifests version 2 (seed 004 "Online checkpoints use
//! manifest version 2 with a `full` flag"; the bytes are Scribe's, in
//! docs/format-notes.md), against golden bytes.

use proptest::prelude::*;
use scribe_format::checkpoint::*;
use scribe_format::recovery::{ArchiveHead, RecoveryError};

use super::support::{assert_refuses_truncation_and_trailing, check_area, Golden};

const IDENTITY: [u8; 16] = [0x33; 16];

fn cursor(segment: u64, offset: u64, end: u64, chain: u8) -> ArchiveHead {
    ArchiveHead {
        identity: IDENTITY,
        segment,
        offset,
        end,
        chain: [chain; 32],
    }
}

fn full() -> CheckpointManifest {
    CheckpointManifest {
        full: true,
        sequence: 1,
        identity: IDENTITY,
        start: ArchiveHead::zero(IDENTITY, 0),
        end: cursor(1, 4096, 42, 0x5a),
        previous: [0; 32],
        files: vec![CheckpointFile {
            name: "repo-00112233445566778899aabbccddeeff.scrb".into(),
            size: 1234,
            digest: [0xab; 32],
        }],
    }
}

fn incremental(previous: [u8; 32]) -> CheckpointManifest {
    CheckpointManifest {
        full: false,
        sequence: 2,
        identity: IDENTITY,
        start: cursor(1, 4096, 42, 0x5a),
        end: cursor(2, 900, 57, 0x6b),
        previous,
        files: vec![CheckpointFile {
            name: "catalog.scrf".into(),
            size: 5000,
            digest: [0xcd; 32],
        }],
    }
}

fn empty(previous: [u8; 32]) -> CheckpointManifest {
    CheckpointManifest {
        full: false,
        sequence: 3,
        identity: IDENTITY,
        start: cursor(2, 900, 57, 0x6b),
        end: cursor(2, 900, 57, 0x6b),
        previous,
        files: Vec::new(),
    }
}

#[test]
fn golden_manifests() {
    let f = full().encode().unwrap();
    // The layout of docs/format-notes.md, field by field.
    assert_eq!(&f[..8], b"SCRCKPT\0");
    assert_eq!(&f[8..10], &[2, 0]);
    assert_eq!(f[10], 1);
    assert_eq!(&f[11..19], &1u64.to_le_bytes());
    assert_eq!(&f[19..35], &IDENTITY);
    assert_eq!(START_OFFSET, 35);
    assert_eq!(&f[35..147], &ArchiveHead::zero(IDENTITY, 0).encode());
    assert_eq!(&f[147..259], &cursor(1, 4096, 42, 0x5a).encode());
    assert_eq!(PREVIOUS_OFFSET, 259);
    assert_eq!(&f[259..291], &[0; 32]);
    assert_eq!(&f[291..293], &1u16.to_le_bytes());
    assert_eq!(FIXED_LEN, 293);
    let name = b"repo-00112233445566778899aabbccddeeff.scrb";
    assert_eq!(&f[293..295], &(name.len() as u16).to_le_bytes());
    assert_eq!(&f[295..295 + name.len()], name);
    let at = 295 + name.len();
    assert_eq!(&f[at..at + 8], &1234u64.to_le_bytes());
    assert_eq!(&f[at + 8..at + 40], &[0xab; 32]);
    assert_eq!(f.len(), at + 40 + 32);
    assert_eq!(&f[at + 40..], blake3::hash(&f[..at + 40]).as_bytes());

    let link = *blake3::hash(&f).as_bytes();
    let i = incremental(link).encode().unwrap();
    assert_eq!(i[10], 0);
    assert_eq!(&i[259..291], &link);
    let e = empty(*blake3::hash(&i).as_bytes()).encode().unwrap();
    assert_eq!(e.len(), FIXED_LEN + 32);

    let g = |name: &str, bytes: Vec<u8>| Golden {
        name: name.into(),
        bytes,
        identity: None,
    };
    let committed = check_area(
        "checkpoint",
        &[g("full", f), g("incremental", i), g("empty", e)],
    );
    assert_eq!(
        CheckpointManifest::decode(&committed["full"]).unwrap(),
        full()
    );
    assert_eq!(
        CheckpointManifest::decode(&committed["incremental"]).unwrap(),
        incremental(link)
    );
    assert!(CheckpointManifest::decode(&committed["empty"])
        .unwrap()
        .files
        .is_empty());
    assert_eq!(checkpoint_dir_name(7), "00000000000000000007");
    assert_eq!(parse_checkpoint_dir_name("00000000000000000007"), Some(7));
    assert_eq!(parse_checkpoint_dir_name("00000000000000000000"), None);
    assert_eq!(parse_checkpoint_dir_name("7"), None);
}

#[test]
fn every_prefix_and_trailing_byte_is_refused() {
    assert_refuses_truncation_and_trailing("full", &full().encode().unwrap(), |b| {
        CheckpointManifest::decode(b)
    });
}

/// Re-sign `m`'s bytes after `edit` so only the edited rule refuses them.
fn resigned(m: &CheckpointManifest, edit: impl Fn(&mut Vec<u8>)) -> Vec<u8> {
    let mut b = m.encode().unwrap();
    b.truncate(b.len() - 32);
    edit(&mut b);
    let sum = blake3::hash(&b);
    b.extend_from_slice(sum.as_bytes());
    b
}

#[test]
fn malformed_manifests_are_refused_by_rule() {
    let refuse = |b: &[u8]| CheckpointManifest::decode(b).unwrap_err().to_string();
    let mut flipped = full().encode().unwrap();
    flipped[100] ^= 1;
    assert!(matches!(
        CheckpointManifest::decode(&flipped),
        Err(RecoveryError::Checksum { .. })
    ));
    assert!(refuse(&resigned(&full(), |b| b[0] = b'X')).contains("bad magic"));
    assert!(refuse(&resigned(&full(), |b| b[8] = 3)).contains("unsupported version 3"));
    assert!(refuse(&resigned(&full(), |b| b[10] = 3)).contains("flags"));
    assert!(refuse(&resigned(&full(), |b| b[11..19].fill(0))).contains("sequence"));
    // A full manifest that does not start at the zero position.
    let mut m = full();
    m.start = cursor(1, 10, 3, 1);
    assert!(m.encode().is_err());
    let moved = resigned(&full(), |b| {
        b[START_OFFSET..START_OFFSET + 112].copy_from_slice(&cursor(1, 10, 3, 1).encode())
    });
    assert!(refuse(&moved).contains("zero position"));
    // Files: order, names, kinds.
    let mut m = incremental([1; 32]);
    m.files.push(CheckpointFile {
        name: "a.scrf".into(),
        size: 1,
        digest: [0; 32],
    });
    assert!(m.encode().is_err());
    for bad in [".hidden.scrf", "a/b.scrf", "", "x y.scrf"] {
        let mut m = incremental([1; 32]);
        m.files[0].name = bad.into();
        assert!(m.encode().is_err(), "{bad:?}");
    }
    let mut m = incremental([1; 32]);
    m.files[0].name = "catalog.scrb".into();
    assert!(m.encode().is_err());
    let mut m = empty([1; 32]);
    m.end = cursor(2, 901, 57, 0x6b);
    assert!(m.encode().is_err());
    // Another identity in a cursor; an end before the start.
    let mut m = incremental([1; 32]);
    m.end.identity = [9; 16];
    assert!(matches!(
        m.encode(),
        Err(RecoveryError::IdentityMismatch { .. })
    ));
    let mut m = incremental([1; 32]);
    m.end.end = 10;
    assert!(matches!(m.encode(), Err(RecoveryError::CursorOrder { .. })));
}

proptest! {
    #[test]
    fn manifests_round_trip(
        sequence in 1u64..,
        ends in (0u64..1 << 40, 0u64..1 << 40),
        previous in any::<[u8; 32]>(),
        size in any::<u64>(),
        full_flag in any::<bool>(),
    ) {
        let (a, b) = (ends.0.min(ends.1), ends.0.max(ends.1) + 1);
        let m = if full_flag {
            CheckpointManifest { sequence, previous, end: cursor(3, 77, b, 2), files: vec![CheckpointFile { name: "k.scrb".into(), size, digest: [1; 32] }], ..full() }
        } else {
            CheckpointManifest { sequence, previous, start: cursor(1, 9, a, 1), end: cursor(3, 77, b, 2), files: vec![CheckpointFile { name: "k.scrf".into(), size, digest: [1; 32] }], ..incremental([0; 32]) }
        };
        let bytes = m.encode().unwrap();
        prop_assert_eq!(CheckpointManifest::decode(&bytes).unwrap(), m);
        fuzz_decoders(&bytes);
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        fuzz_decoders(&data);
    }
}

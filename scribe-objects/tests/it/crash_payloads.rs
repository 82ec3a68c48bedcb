//! Deterministic batch contents of the crash test's child and parent.

use scribe_format::ObjectKind;

/// Deterministic payloads of batch `b`: (kind, bytes).
pub fn batch_payloads(b: u64) -> Vec<(ObjectKind, Vec<u8>)> {
    let mut x = b.wrapping_mul(0x9e3779b97f4a7c15) ^ 0x5bd1e995;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let count = 1 + next() % 12;
    (0..count)
        .map(|j| {
            let len = 16 + (next() % 6000) as usize;
            let kind = if j % 5 == 4 {
                ObjectKind::Manifest
            } else {
                ObjectKind::Chunk
            };
            let mut v = Vec::with_capacity(len + 16);
            v.extend_from_slice(&b.to_le_bytes());
            v.extend_from_slice(&j.to_le_bytes());
            while v.len() < len {
                v.extend_from_slice(&next().to_le_bytes());
            }
            v.truncate(len);
            (kind, v)
        })
        .collect()
}

/// Whether batch `b` is a file import.
pub fn is_import_batch(b: u64) -> bool {
    b % 3 == 2
}

/// Deterministic file contents of import batch `b`: small files and one
/// file above 1 MiB (which takes the pipelined import path).
pub fn import_files(b: u64) -> Vec<Vec<u8>> {
    let mut x = b.wrapping_mul(0xd1b54a32d192ed03) | 1;
    let mut bytes = move |n: usize| {
        let mut v = b.to_le_bytes().to_vec();
        while v.len() < n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.truncate(n);
        v
    };
    vec![
        bytes(10),
        bytes(70_000),
        bytes(1_300_000 + (b as usize % 1000)),
    ]
}

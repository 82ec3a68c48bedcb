//! Deterministic batch contents shared by the helper and the crash test.

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

//! A file content id (BLAKE3 of the whole file, section 1) assembled from
//! the chaining values of fixed, aligned leaves, so acceptance can reuse
//! the leaves an earlier verified version of the file shares byte for
//! byte at the same offsets (issue 19: an edit of 1 MiB in a 1 GiB file
//! hashed and cut the whole gigabyte again at every submit).
//!
//! BLAKE3 is a binary tree over 1 KiB chunks whose left subtrees are
//! powers of two. Every aligned block of [`LEAF`] bytes that lies wholly
//! inside a longer input is a node of that input's tree, whatever the
//! input's length, and so is the shorter last block (the recursion below
//! follows the same split as BLAKE3, `hazmat::left_subtree_len`, so it
//! only ever reaches those leaves). A leaf's chaining value depends only on
//! its bytes and offset; the root is merged from the leaves. Inputs of at
//! most one leaf are hashed the ordinary way. Tested against
//! `blake3::hash` for lengths around every boundary.

use blake3::hazmat::{
    left_subtree_len, merge_subtrees_non_root, merge_subtrees_root, ChainingValue, HasherExt, Mode,
};

/// Leaf size: a power of two of at least 1 KiB (BLAKE3's chunk).
pub(crate) const LEAF: u64 = 4 << 20;

/// Number of leaves of an input of `len` bytes (`len > leaf`).
pub(crate) fn leaf_count(len: u64, leaf: u64) -> usize {
    len.div_ceil(leaf) as usize
}

/// A hasher for leaf `index` (bytes from `index * leaf`).
pub(crate) fn leaf_hasher(index: usize, leaf: u64) -> blake3::Hasher {
    let mut h = blake3::Hasher::new();
    h.set_input_offset(index as u64 * leaf);
    h
}

/// The chaining value of a leaf whose bytes were all given to `h`
/// (non-empty: callers hash at least one byte into every leaf).
pub(crate) fn leaf_value(h: &blake3::Hasher) -> ChainingValue {
    h.finalize_non_root()
}

/// The BLAKE3 hash of `len` bytes (`len > leaf`) from the chaining values
/// of its [`leaf_count`] leaves; `None` if the count does not fit.
pub(crate) fn root(len: u64, leaf: u64, leaves: &[ChainingValue]) -> Option<blake3::Hash> {
    if !leaf.is_power_of_two()
        || leaf < blake3::CHUNK_LEN as u64
        || len <= leaf
        || leaves.len() != leaf_count(len, leaf)
    {
        return None;
    }
    let l = left_subtree_len(len);
    let a = node(0, l, leaf, leaves)?;
    let b = node(l, len - l, leaf, leaves)?;
    Some(merge_subtrees_root(&a, &b, Mode::Hash))
}

/// The chaining value of the subtree of `len` bytes at `start`.
fn node(start: u64, len: u64, leaf: u64, leaves: &[ChainingValue]) -> Option<ChainingValue> {
    if len <= leaf {
        return leaves.get((start / leaf) as usize).copied();
    }
    let l = left_subtree_len(len);
    let a = node(start, l, leaf, leaves)?;
    let b = node(start + l, len - l, leaf, leaves)?;
    Some(merge_subtrees_non_root(&a, &b, Mode::Hash))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(n: usize, seed: u8) -> Vec<u8> {
        (0..n)
            .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[1] ^ seed)
            .collect()
    }

    fn by_leaves(data: &[u8], leaf: u64) -> Option<blake3::Hash> {
        let leaves: Vec<ChainingValue> = data
            .chunks(leaf as usize)
            .enumerate()
            .map(|(i, part)| {
                let mut h = leaf_hasher(i, leaf);
                h.update(part);
                leaf_value(&h)
            })
            .collect();
        root(data.len() as u64, leaf, &leaves)
    }

    #[test]
    fn leaves_give_the_ordinary_hash_for_lengths_around_every_boundary() {
        for leaf in [1024u64, 4096, 16384] {
            let l = leaf as usize;
            let mut lens = vec![l + 1, 2 * l - 1, 2 * l, 2 * l + 1, 3 * l, 5 * l + 7];
            lens.extend([
                4 * l - 1,
                4 * l,
                4 * l + 1,
                8 * l + 1023,
                13 * l + 1,
                16 * l,
            ]);
            for n in lens {
                let data = bytes(n, n as u8);
                assert_eq!(
                    by_leaves(&data, leaf),
                    Some(blake3::hash(&data)),
                    "leaf {leaf}, length {n}"
                );
            }
        }
    }

    #[test]
    fn a_leaf_shared_at_the_same_offset_is_reused_and_a_changed_one_is_not() {
        let leaf = 4096u64;
        let old = bytes(10 * 4096 + 100, 1);
        let mut new = old.clone();
        new[5 * 4096 + 17] ^= 0xff;
        let value = |data: &[u8], i: usize| {
            let end = ((i + 1) * 4096).min(data.len());
            let mut h = leaf_hasher(i, leaf);
            h.update(&data[i * 4096..end]);
            leaf_value(&h)
        };
        let mut leaves: Vec<ChainingValue> = (0..11).map(|i| value(&old, i)).collect();
        assert_eq!(
            root(old.len() as u64, leaf, &leaves),
            Some(blake3::hash(&old))
        );
        // Only leaf 5 changed: the others are the old file's.
        leaves[5] = value(&new, 5);
        assert_eq!(
            root(new.len() as u64, leaf, &leaves),
            Some(blake3::hash(&new))
        );
        // A stale leaf does not give the new hash.
        leaves[5] = value(&old, 5);
        assert_ne!(
            root(new.len() as u64, leaf, &leaves),
            Some(blake3::hash(&new))
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Any length above one leaf, any leaf size, any bytes.
        #[test]
        fn leaves_give_the_ordinary_hash_for_any_length(
            shift in 10u32..14,
            extra in 1usize..40_000,
            seed in proptest::prelude::any::<u8>(),
        ) {
            let leaf = 1u64 << shift;
            let data = bytes(leaf as usize + extra, seed);
            proptest::prop_assert_eq!(by_leaves(&data, leaf), Some(blake3::hash(&data)));
        }
    }

    #[test]
    fn counts_and_sizes_that_do_not_fit_are_refused() {
        let cv = [0u8; 32];
        assert_eq!(
            root(4096, 4096, &[cv]),
            None,
            "one leaf is hashed the ordinary way"
        );
        assert_eq!(root(4097, 4096, &[cv]), None, "two leaves needed");
        assert_eq!(root(4097, 4096, &[cv, cv, cv]), None);
        assert_eq!(root(5000, 3000, &[cv, cv]), None, "not a power of two");
        assert_eq!(root(1000, 512, &[cv, cv]), None, "below BLAKE3's chunk");
    }
}

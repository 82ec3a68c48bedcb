//! FastCDC-2020's cut-point search, several positions of the stream at once.
//!
//! The search of `fastcdc::v2020::cut_gear` is one chain of dependent
//! steps (`h = (h << 1) + GEAR[byte]`, then a mask test) over every byte
//! from the minimum length on: about 1.7 GB/s on one core here, and every
//! byte of a large file is searched twice, by the client that cuts it and
//! by the server that checks the cuts (issue #14). The hash at a position
//! depends only on the 64 bytes before it (older bytes are shifted out of
//! the 64-bit word), so a stretch of the stream can be searched from a
//! warm-up of the 64 bytes before it, independently of what came earlier.
//! [`Gear::cut`] searches [`LANES`] consecutive blocks at once, one hash
//! per block, which keeps the core's pipelines full (3.7-4.0 GB/s measured on
//! the same core), and when any block finds a candidate it searches that
//! round again byte by byte, so the first cut is the one returned. The
//! result is the crate's, bit for bit (`tests` check it against
//! `cut_gear`, including inputs that cut in many blocks of one round).

use fastcdc::v2020::{get_gear_with_seed, select_masks, Normalization};

/// Blocks searched at once.
const LANES: usize = 8;
/// Bytes of one block (one round covers `LANES * BLOCK`).
const BLOCK: usize = 8192;
/// Bytes that determine a hash completely (the width of the hash word).
const WARM: usize = 64;

/// The parameters of one FastCDC-2020 profile (gear table seed 0).
pub(crate) struct Gear {
    min: usize,
    avg: usize,
    max: usize,
    mask_s: u64,
    mask_l: u64,
    gear: [u64; 256],
}

impl Gear {
    /// The profile with these lengths (all even, `min < avg <= max`) and
    /// level-1 normalization.
    pub(crate) fn new(min: usize, avg: usize, max: usize) -> Gear {
        debug_assert!([min, avg, max].iter().all(|n| n.is_multiple_of(2)));
        debug_assert!(min < avg && avg <= max);
        let (mask_s, mask_l) = select_masks(avg, Normalization::Level1);
        let (gear, _) = get_gear_with_seed(0);
        let mut table = [0u64; 256];
        table.copy_from_slice(&gear);
        Gear {
            min,
            avg,
            max,
            mask_s,
            mask_l,
            gear: table,
        }
    }

    /// Length of the chunk at the start of `data`, as
    /// `fastcdc::v2020::cut_gear` decides it with this profile's masks.
    /// `data` holds at least `max` bytes unless it is the end of the stream.
    ///
    /// The crate tests candidate ends in pairs: a chunk of length `p` is
    /// cut when the hash of bytes `min..=p` passes the mask, the strict
    /// mask below the (even) centre and the relaxed one from there, up to
    /// the last complete pair; with no candidate the chunk is everything
    /// up to `max`.
    pub(crate) fn cut(&self, data: &[u8]) -> usize {
        if data.len() <= self.min {
            return data.len();
        }
        let (remaining, strict_end, relaxed_end) = self.ranges(data.len());
        self.first(data, self.min, strict_end, self.mask_s)
            .or_else(|| self.first(data, strict_end, relaxed_end, self.mask_l))
            .unwrap_or(remaining)
    }

    /// Whether [`Gear::cut`] of `chunk` followed by (at most two bytes of)
    /// `next` is exactly `chunk.len()`, decided without joining them: no
    /// candidate before the chunk's end (those depend on its bytes only),
    /// then either a candidate at its end (the hash of its last bytes and
    /// `next[0]`) or a chunk that ends where the search stops anyway. The
    /// deep manifest check judges every new chunk so, where appending the
    /// two bytes to a chunk read without spare room copied the whole chunk.
    pub(crate) fn cuts_exactly(&self, chunk: &[u8], next: &[u8]) -> bool {
        let n = chunk.len();
        let len = n + next.len().min(2);
        if len <= self.min {
            // The search returns everything it was given.
            return len == n;
        }
        let (remaining, strict_end, relaxed_end) = self.ranges(len);
        let before = |from: usize, to: usize, mask: u64| {
            let to = to.min(n);
            from < to && self.first(chunk, from, to, mask).is_some()
        };
        if before(self.min, strict_end, self.mask_s) || before(strict_end, relaxed_end, self.mask_l)
        {
            return false;
        }
        if self.min <= n && n < relaxed_end {
            let mask = if n < strict_end {
                self.mask_s
            } else {
                self.mask_l
            };
            let h = (self.warm(chunk, n) << 1).wrapping_add(self.gear[next[0] as usize]);
            return h & mask == 0;
        }
        remaining == n
    }

    /// For a search over `len` (more than `min`) bytes: where it stops
    /// without a candidate (at most `max`), the end of the strict mask's
    /// positions (the even centre: the average, or less with fewer bytes)
    /// and the end of the relaxed mask's (the last complete pair).
    fn ranges(&self, len: usize) -> (usize, usize, usize) {
        let remaining = len.min(self.max);
        let center = remaining.min(self.avg);
        (remaining, center / 2 * 2, remaining / 2 * 2)
    }

    /// The hash just before `at`: zero at `min` (where the search starts),
    /// else the hash of the (at most 64) bytes before `at` that follow `min`.
    fn warm(&self, data: &[u8], at: usize) -> u64 {
        let from = at.saturating_sub(WARM).max(self.min);
        data[from..at]
            .iter()
            .fold(0, |h, &b| (h << 1).wrapping_add(self.gear[b as usize]))
    }

    /// The first position in `from..to` whose hash passes `mask`.
    fn first(&self, data: &[u8], from: usize, to: usize, mask: u64) -> Option<usize> {
        let gear = &self.gear;
        let mut round = from;
        while round + LANES * BLOCK <= to {
            let mut h: [u64; LANES] = std::array::from_fn(|i| self.warm(data, round + i * BLOCK));
            let blocks: [&[u8; BLOCK]; LANES] = std::array::from_fn(|i| {
                let start = round + i * BLOCK;
                data[start..start + BLOCK]
                    .try_into()
                    .expect("a block is BLOCK bytes")
            });
            let mut candidate = false;
            for j in 0..BLOCK {
                let mut hit = false;
                for i in 0..LANES {
                    h[i] = (h[i] << 1).wrapping_add(gear[blocks[i][j] as usize]);
                    hit |= h[i] & mask == 0;
                }
                if hit {
                    candidate = true;
                    break;
                }
            }
            if candidate {
                // Some block of this round passes: the first position that
                // does is found in order (a later block may have passed
                // before an earlier one's candidate further into it).
                return self.first_in_order(data, round, round + LANES * BLOCK, mask);
            }
            round += LANES * BLOCK;
        }
        self.first_in_order(data, round, to, mask)
    }

    /// [`Self::first`] one byte after another.
    fn first_in_order(&self, data: &[u8], from: usize, to: usize, mask: u64) -> Option<usize> {
        let mut h = self.warm(data, from);
        for (p, &b) in data[from..to].iter().enumerate() {
            h = (h << 1).wrapping_add(self.gear[b as usize]);
            if h & mask == 0 {
                return Some(from + p);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fastcdc::v2020::cut_gear;
    use proptest::prelude::*;

    fn theirs(g: &Gear, data: &[u8]) -> usize {
        let (gear, gear_ls) = get_gear_with_seed(0);
        let (_, n) = cut_gear(
            data,
            g.min,
            g.avg,
            g.max,
            g.mask_s,
            g.mask_l,
            g.mask_s << 1,
            g.mask_l << 1,
            &gear,
            &gear_ls,
        );
        n
    }

    /// Every chunk of `data` cut by both searches, chunk after chunk.
    fn cuts(g: &Gear, data: &[u8], ours: bool) -> Vec<usize> {
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < data.len() {
            let end = (pos + g.max).min(data.len());
            let n = if ours {
                g.cut(&data[pos..end])
            } else {
                theirs(g, &data[pos..end])
            };
            out.push(n);
            pos += n;
        }
        out
    }

    /// Bytes from a seed (xorshift), or from an alphabet of `symbols`
    /// values, which makes some hashes repeat and candidates common.
    fn bytes(len: usize, seed: u64, symbols: u16) -> Vec<u8> {
        let mut x = seed | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % u64::from(symbols)) as u8
            })
            .collect()
    }

    #[test]
    fn profile_one_cuts_as_the_crate_does() {
        let g = Gear::new(1 << 20, 4 << 20, 16 << 20);
        let data = bytes(48 << 20, 11, 256);
        let ours = cuts(&g, &data, true);
        assert_eq!(ours, cuts(&g, &data, false));
        assert!(ours.len() > 4, "{ours:?}");
        // All zeroes: no candidate anywhere, every chunk is `max` long.
        let zero = vec![0u8; 40 << 20];
        assert_eq!(cuts(&g, &zero, true), cuts(&g, &zero, false));
    }

    /// Small profiles make candidates common, so rounds where several
    /// blocks pass, cuts at a block's first or last byte, at the mask
    /// switch, and odd ends all occur; every one must agree with the crate.
    #[test]
    fn small_profiles_cut_as_the_crate_does() {
        for (min, avg, max) in [
            (64, 256, 1024),
            (2048, 8192, 65536),
            (8192, 32768, 262_144),
            (65536, 131_072, 1 << 20),
        ] {
            let g = Gear::new(min, avg, max);
            for seed in 1..6 {
                for symbols in [2u16, 7, 256] {
                    let data = bytes(3 * max + seed as usize * 7, seed, symbols);
                    assert_eq!(
                        cuts(&g, &data, true),
                        cuts(&g, &data, false),
                        "min {min} seed {seed} symbols {symbols}"
                    );
                }
            }
        }
    }

    /// `cuts_exactly` against the search over the joined bytes, for
    /// every chunk the search cuts and its neighbours one byte shorter and
    /// longer, with zero, one and two bytes following.
    #[test]
    fn cuts_exactly_agrees_with_the_joined_search() {
        for (min, avg, max) in [
            (64, 256, 1024),
            (8192, 32768, 262_144),
            (65536, 131_072, 1 << 20),
        ] {
            let g = Gear::new(min, avg, max);
            for (seed, symbols) in [(3u64, 256u16), (4, 7), (5, 2)] {
                let data = bytes(4 * max + 3, seed, symbols);
                let mut pos = 0;
                while pos < data.len() {
                    let n = g.cut(&data[pos..(pos + max).min(data.len())]);
                    for len in [n.saturating_sub(1), n, n + 1, min, min + 1, max] {
                        for extra in 0..3 {
                            let end = (pos + len).min(data.len());
                            let next = &data[end..(end + extra).min(data.len())];
                            let chunk = &data[pos..end];
                            let mut joined = chunk.to_vec();
                            joined.extend_from_slice(next);
                            let joined = &joined[..joined.len().min(max)];
                            assert_eq!(
                                g.cuts_exactly(chunk, next),
                                chunk.len() <= max && g.cut(joined) == chunk.len(),
                                "min {min} seed {seed} at {pos} len {len} next {extra}"
                            );
                        }
                    }
                    pos += n;
                }
            }
        }
        // Chunks ending exactly where the mask changes, from many starts:
        // with the small profile's masks about 1 start in 170 has a
        // candidate there for one mask and not the other.
        let (min, avg, max) = (64, 256, 1024);
        let g = Gear::new(min, avg, max);
        let data = bytes(6000, 9, 256);
        for pos in 0..4000 {
            for len in [avg - 1, avg, avg + 1] {
                let chunk = &data[pos..pos + len];
                let next = &data[pos + len..pos + len + 2];
                let joined = &data[pos..pos + len + 2];
                assert_eq!(
                    g.cuts_exactly(chunk, next),
                    g.cut(joined) == len,
                    "at {pos} len {len}"
                );
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn any_input_cuts_as_the_crate_does(
            data in proptest::collection::vec(any::<u8>(), 0..300_000),
            level in 0usize..3,
        ) {
            let (min, avg, max) = [(64, 256, 2048), (1024, 4096, 16384), (4096, 65536, 131_072)][level];
            let g = Gear::new(min, avg, max);
            for start in [0, data.len() / 3, data.len() / 2] {
                let d = &data[start..];
                let end = d.len().min(max);
                let n = g.cut(&d[..end]);
                prop_assert_eq!(n, theirs(&g, &d[..end]));
                prop_assert!(g.cuts_exactly(&d[..n], &d[n..(n + 2).min(d.len())]));
            }
        }
    }
}

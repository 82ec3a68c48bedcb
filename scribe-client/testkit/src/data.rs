//! Deterministic incompressible bytes: the one generator of every test's
//! "random" data, so that a failure reproduces byte for byte.
//!
//! The generator is xorshift64 (Marsaglia's 13/7/17 triple). It is not
//! cryptographic and need not be: LZ4 cannot shrink its output, and
//! content-defined chunking cuts it like real assets.

/// A xorshift64 stream of `u64` words.
#[derive(Clone, Debug)]
pub struct XorShift64 {
    state: u64,
}

impl XorShift64 {
    /// The stream of `seed`: any seed, including 0, gives a stream of its
    /// own (the seed is spread over the word and made odd).
    pub fn new(seed: u64) -> XorShift64 {
        XorShift64::from_state(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The stream starting after `state`, exactly as given (fixtures
    /// generated from a raw state keep their bytes). `state` must not be 0.
    pub fn from_state(state: u64) -> XorShift64 {
        assert_ne!(state, 0, "xorshift64 stays at 0 forever");
        XorShift64 { state }
    }

    /// The next word.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state = x;
        x
    }

    /// Fill `buf` with the next words, little-endian (the last word cut to
    /// what fits).
    pub fn fill(&mut self, buf: &mut [u8]) {
        for part in buf.chunks_mut(8) {
            let word = self.next_u64().to_le_bytes();
            part.copy_from_slice(&word[..part.len()]);
        }
    }
}

impl Iterator for XorShift64 {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        Some(self.next_u64())
    }
}

/// `n` deterministic incompressible bytes of stream `seed`.
pub fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut out = vec![0u8; n];
    fill(&mut out, seed);
    out
}

/// Fill `buf` with the bytes [`noise`] gives for `seed`.
pub fn fill(buf: &mut [u8], seed: u64) {
    XorShift64::new(seed).fill(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noise_is_reproducible_and_seeds_differ() {
        assert_eq!(noise(1000, 7), noise(1000, 7));
        assert_ne!(noise(1000, 7), noise(1000, 8));
        assert_ne!(noise(64, 0), vec![0u8; 64]);
    }

    #[test]
    fn a_shorter_noise_is_a_prefix_of_a_longer_one() {
        let long = noise(1003, 5);
        for n in [0, 1, 7, 8, 9, 1000] {
            assert_eq!(noise(n, 5), long[..n]);
        }
    }

    #[test]
    fn the_stream_is_the_one_the_old_copies_produced() {
        // The word-wise copies (seed * golden ratio | 1, little-endian words).
        let mut x = 3u64.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut want = Vec::new();
        while want.len() < 24 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            want.extend_from_slice(&x.to_le_bytes());
        }
        assert_eq!(noise(24, 3), want);
        // The byte-wise copies (raw state, one byte per step).
        let bytes: Vec<u8> = XorShift64::from_state(7)
            .take(3)
            .map(|x| (x >> 24) as u8)
            .collect();
        let mut x = 7u64;
        let mut old = Vec::new();
        for _ in 0..3 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            old.push((x >> 24) as u8);
        }
        assert_eq!(bytes, old);
    }

    #[test]
    fn noise_spreads_over_every_byte_value() {
        // Every byte value appears, none dominates.
        let data = noise(1 << 16, 1);
        let mut counts = [0u32; 256];
        for b in &data {
            counts[*b as usize] += 1;
        }
        assert!(counts.iter().all(|&c| c > 150 && c < 400), "{counts:?}");
    }
}

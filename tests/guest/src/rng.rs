//! Seeded xorshift64* generator: test data must be reproducible from the printed seed.

/// xorshift64* (Vigna). Not cryptographic; good enough to make every byte of a transfer differ from its
/// neighbours and from the previous run.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`; 0 (xorshift's fixed point) is mapped to a constant.
    pub fn new(seed: u64) -> Self {
        Rng(if seed == 0 {
            0x9e37_79b9_7f4a_7c15
        } else {
            seed
        })
    }

    /// A generator derived from `seed` and a test name, so running one test alone (`--filter`) sees the same
    /// data as in the full suite.
    pub fn for_test(seed: u64, name: &str) -> Self {
        // FNV-1a of the name, mixed into the seed.
        let h = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        Rng::new(seed ^ h)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        let mut chunks = buf.chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        let rest = chunks.into_remainder();
        let last = self.next_u64().to_le_bytes();
        rest.copy_from_slice(&last[..rest.len()]);
    }
}

/// A seed from the clock, for runs that do not pass `--seed`.
pub fn clock_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    t.as_secs() ^ u64::from(t.subsec_nanos()) << 20 ^ u64::from(std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_bytes() {
        let (mut a, mut b) = (vec![0u8; 37], vec![0u8; 37]);
        Rng::new(5).fill(&mut a);
        Rng::new(5).fill(&mut b);
        assert_eq!(a, b);
        Rng::new(6).fill(&mut b);
        assert_ne!(a, b);
    }

    #[test]
    fn zero_seed_is_not_stuck() {
        let mut r = Rng::new(0);
        assert_ne!(r.next_u64(), r.next_u64());
    }
}

//! The test pattern of NVIDIA's rdma-cuda sample, for a surface 1024 words wide: word `i` is
//! `(y << 16) | x` with `x = i % 1024`, `y = i / 1024`; the destination starts as its complement so that
//! a transfer that never happened cannot pass. The GPU kernels in `ptx/` compute the same values.

use super::Mismatch;

/// Width of the surface in words.
pub const WIDTH: usize = 1024;

/// Expected word at index `i`.
pub fn word(i: usize) -> u32 {
    (((i / WIDTH) as u32) << 16) | (i % WIDTH) as u32
}

/// Fills `src` with the pattern and `dst` with its complement.
pub fn fill(src: &mut [u32], dst: &mut [u32]) {
    for (i, w) in src.iter_mut().enumerate() {
        *w = word(i);
    }
    for (i, w) in dst.iter_mut().enumerate() {
        *w = !word(i);
    }
}

/// Counts wrong words of `dst` and returns the first one.
pub fn verify(dst: &[u32]) -> (u64, Option<Mismatch>) {
    let mut count = 0;
    let mut first = None;
    for (i, &got) in dst.iter().enumerate() {
        let expected = word(i);
        if got != expected {
            count += 1;
            first.get_or_insert(Mismatch {
                offset: (i * 4) as u64,
                expected,
                got,
            });
        }
    }
    (count, first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_round_trip_and_first_mismatch() {
        let mut src = vec![0; 2048];
        let mut dst = vec![0; 2048];
        fill(&mut src, &mut dst);
        assert_eq!(src[1025], 0x0001_0001);
        assert_eq!(verify(&dst).0, 2048, "the complement never passes");
        dst.copy_from_slice(&src);
        assert_eq!(verify(&dst), (0, None));
        dst[7] ^= 4;
        dst[9] = 0;
        let (n, first) = verify(&dst);
        assert_eq!(n, 2);
        assert_eq!(
            first,
            Some(Mismatch {
                offset: 28,
                expected: 7,
                got: 3
            })
        );
    }
}

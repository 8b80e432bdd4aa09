//! The one integer hash of the workspace: SplitMix64's finaliser. Cheap and
//! well distributed, it turns (seed, id) pairs into reproducible randomness
//! wherever results must not depend on order or thread count — the
//! generator's graph and features, synthetic feature rows, splits, and the
//! sampler's per-node draws.

/// SplitMix64 finaliser of `x`.
#[inline]
pub fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The inverse of [`splitmix64`]: `splitmix64_inverse(splitmix64(x)) == x`.
/// Every step of the finaliser is a bijection of u64 (an xor with a right
/// shift of itself, a multiplication by an odd constant), so sorting by
/// `splitmix64(x)` orders distinct keys randomly and reversibly: the link
/// split's random order of edge pairs is such a sort (`builder/linksplit.rs`).
#[inline]
pub fn splitmix64_inverse(mut x: u64) -> u64 {
    x ^= (x >> 31) ^ (x >> 62);
    x = x.wrapping_mul(inverse_odd(0x94D0_49BB_1331_11EB));
    x ^= (x >> 27) ^ (x >> 54);
    x = x.wrapping_mul(inverse_odd(0xBF58_476D_1CE4_E5B9));
    x ^= (x >> 30) ^ (x >> 60);
    x.wrapping_sub(0x9E37_79B9_7F4A_7C15)
}

/// The multiplicative inverse of odd `c` modulo 2^64 (Newton's iteration:
/// each step doubles the correct low bits, 3 → 6 → … → 96 ≥ 64).
const fn inverse_odd(c: u64) -> u64 {
    let mut inv = c; // correct to 3 bits for odd c
    let mut i = 0;
    while i < 5 {
        inv = inv.wrapping_mul(2u64.wrapping_sub(c.wrapping_mul(inv)));
        i += 1;
    }
    inv
}

#[cfg(test)]
mod tests {
    #[test]
    fn splitmix64_inverse_inverts() {
        let mut x = 1u64;
        for i in 0..10_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
            assert_eq!(super::splitmix64_inverse(super::splitmix64(x)), x);
        }
        for x in [0, 1, u64::MAX, 1 << 63] {
            assert_eq!(super::splitmix64_inverse(super::splitmix64(x)), x);
        }
    }
}

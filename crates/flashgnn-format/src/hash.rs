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

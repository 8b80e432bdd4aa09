//! Deterministic per-node sampling: uniform without replacement, keyed by
//! (batch seed, node), so every engine and every arrival order draws the same
//! neighbors.

use flashgnn_format::hash::splitmix64 as mix;

/// A tiny counter-based generator for one node's draws.
pub struct NodeRng(u64);

impl NodeRng {
    pub fn new(seed: u64, node: u64) -> Self {
        NodeRng(mix(seed ^ mix(node ^ 0x5A5A_0000_0000_0001)))
    }
    #[inline]
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }
    /// Uniform in [0, n) (Lemire's multiply-shift; bias < n / 2^64).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
}

/// Choose `k` distinct indices of `[0, n)` uniformly (Floyd's algorithm),
/// returned in draw order. `k >= n` (or k < 0) returns all of `0..n`.
pub fn sample_indices(seed: u64, node: u64, n: u32, k: i32, out: &mut Vec<u32>) {
    out.clear();
    if k < 0 || k as u32 >= n {
        out.extend(0..n);
        return;
    }
    let k = k as u32;
    let mut rng = NodeRng::new(seed, node);
    // Floyd: for j in n-k..n, pick t in [0, j]; take t unless taken, else j.
    // A small linear scan beats hashing for fanouts up to a few dozen.
    for j in (n - k)..n {
        let t = rng.below(j as u64 + 1) as u32;
        if out.contains(&t) {
            out.push(j);
        } else {
            out.push(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_and_in_range() {
        let mut v = Vec::new();
        for node in 0..200 {
            sample_indices(1, node, 50, 10, &mut v);
            let mut s = v.clone();
            s.sort();
            s.dedup();
            assert_eq!(s.len(), 10);
            assert!(v.iter().all(|&x| x < 50));
        }
        sample_indices(1, 3, 5, 10, &mut v);
        assert_eq!(v, vec![0, 1, 2, 3, 4]);
        sample_indices(1, 3, 5, -1, &mut v);
        assert_eq!(v.len(), 5);
    }

    #[test]
    fn uniform_inclusion_chi_square() {
        // Proves uniformity: over 40,000 draws of 5 of 20, each index is
        // included ~1/4 of the time; chi-square with 19 dof stays below the
        // 0.999 quantile (43.8).
        let (n, k, trials) = (20u32, 5i32, 40_000u64);
        let mut counts = vec![0u64; n as usize];
        let mut v = Vec::new();
        for t in 0..trials {
            sample_indices(99, t, n, k, &mut v);
            for &i in &v {
                counts[i as usize] += 1;
            }
        }
        let expect = trials as f64 * k as f64 / n as f64;
        let chi: f64 = counts.iter().map(|&c| (c as f64 - expect).powi(2) / expect).sum();
        assert!(chi < 43.8, "chi-square {chi}, counts {counts:?}");
    }
}

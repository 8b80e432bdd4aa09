//! The in-memory sort of one bucket ([`sort_bucket`]): an MSD radix sort on
//! the bits the bucket's keys differ in, 9 bits per scatter (512 parts),
//! the parts sorted in parallel by further scatters, and pdqsort for parts
//! under 2,048 keys (and for buckets under 64 Ki keys).
//!
//! Invariants: it needs one output buffer beside its input (counted in the
//! resident bound of three buckets) plus, per sorting thread, a scratch
//! vector of at most [`SEGMENT_SCATTER_MAX_KEYS`] keys; the output is the
//! input sorted, equal keys kept.

use rayon::slice::ParallelSliceMut;

use super::huge_zeroed;

/// Digit bits of each scatter pass of [`sort_bucket`]: 512 write streams,
/// few enough that each stays in cache while it fills.
const SCATTER_BITS: u32 = 9;
/// Below this many keys a bucket is sorted by pdqsort directly.
const BUCKET_COUNTING_MIN_KEYS: usize = 1 << 16;
/// Below this many keys a part of a bucket is sorted by pdqsort (in L1).
const SEGMENT_SCATTER_MIN_KEYS: usize = 2048;
/// Above this many keys (8 MiB) a part is sorted in place by pdqsort: the
/// scatter's scratch vector, one per sorting thread, stays within the fixed
/// allowance even when one hub's neighbors fill most of a bucket.
const SEGMENT_SCATTER_MAX_KEYS: usize = 1 << 20;

/// Sort one bucket (keys sharing every bit above the bucket's range): an
/// MSD radix sort on the bits that vary, [`SCATTER_BITS`] at a time. The
/// first pass scatters the bucket into the output buffer; then each of its
/// 512 parts (a few hundred KiB: in L2) is sorted on its own, in parallel,
/// by further passes through a per-thread scratch buffer, down to parts of
/// under [`SEGMENT_SCATTER_MIN_KEYS`] keys, which pdqsort finishes. For
/// graph keys `dst << 32 | src` two passes separate the destinations (each
/// part is then one node's neighbor list); only hubs take passes on the
/// sources. Needs one output buffer beside the input (counted in the
/// resident bound: three buckets).
///
/// Measured on an 8 GiB edge input (perf, 2026-11-28): the one-pass
/// counting sort on the destination used before scattered to 2^17 places
/// at once (a cache miss per key) on one thread, and the sort workers were
/// the layout pass's bottleneck; a whole-bucket LSD radix sort (four 11-bit
/// passes over 200 MB) was no faster, bound by memory traffic.
pub fn sort_bucket(keys: &[u64]) -> Vec<u64> {
    let mut out = huge_zeroed::<u64>(keys.len());
    sort_into(keys.len(), |j| keys[j], &mut out);
    out
}

/// [`sort_bucket`] of the `n` keys `key(0..n)` into `out` (`n` long): the
/// first pass reads them through `key` (a bucket file's packed bytes).
pub(super) fn sort_into(n: usize, key: impl Fn(usize) -> u64, out: &mut [u64]) {
    assert_eq!(out.len(), n, "sort_into: output of another length");
    let digit = if n < BUCKET_COUNTING_MIN_KEYS { None } else { next_digit(varying_bits(n, &key)) };
    let Some((low, bits)) = digit else {
        for (j, o) in out.iter_mut().enumerate() {
            *o = key(j);
        }
        if n < BUCKET_COUNTING_MIN_KEYS {
            out.par_sort_unstable();
        }
        return; // else every key is equal
    };
    let starts = scatter(n, &key, out, low, bits);
    if low > 0 {
        let mut parts: Vec<&mut [u64]> = Vec::new();
        let mut rest: &mut [u64] = out;
        for w in starts.windows(2) {
            let (part, tail) = std::mem::take(&mut rest).split_at_mut(w[1] - w[0]);
            if part.len() > 1 {
                parts.push(part);
            }
            rest = tail;
        }
        use rayon::prelude::*;
        parts.par_iter_mut().for_each_init(Vec::new, |scratch, p| sort_part(p, scratch));
    }
}

/// The bits in which the keys `key(0..n)` differ (0: all equal).
fn varying_bits(n: usize, key: impl Fn(usize) -> u64) -> u64 {
    let (or, and) = (0..n).fold((0u64, !0u64), |(o, x), j| {
        let k = key(j);
        (o | k, x & k)
    });
    or ^ and
}

/// The next MSD digit of keys that share every bit above their highest
/// varying one (`vary`): (its low bit, its width); None when none varies.
fn next_digit(vary: u64) -> Option<(u32, u32)> {
    if vary == 0 {
        return None;
    }
    let top = 64 - vary.leading_zeros();
    let low = top.saturating_sub(SCATTER_BITS);
    Some((low, top - low))
}

/// Stable counting scatter of the keys `key(0..n)` into `dst` on bits
/// `[low, low + bits)`; returns the start of each digit's range (2^bits + 1
/// offsets).
fn scatter(n: usize, key: impl Fn(usize) -> u64, dst: &mut [u64], low: u32, bits: u32) -> Vec<usize> {
    let mask = (1u64 << bits) - 1;
    let mut at = vec![0usize; (1usize << bits) + 1];
    for j in 0..n {
        at[((key(j) >> low) & mask) as usize + 1] += 1;
    }
    for d in 1..at.len() {
        at[d] += at[d - 1];
    }
    let starts = at.clone();
    for j in 0..n {
        let k = key(j);
        let d = ((k >> low) & mask) as usize;
        dst[at[d]] = k;
        at[d] += 1;
    }
    starts
}

/// Sort a part of a bucket in place (see [`sort_bucket`]).
fn sort_part(p: &mut [u64], scratch: &mut Vec<u64>) {
    if p.len() < SEGMENT_SCATTER_MIN_KEYS || p.len() > SEGMENT_SCATTER_MAX_KEYS {
        p.sort_unstable();
        return;
    }
    let Some((low, bits)) = next_digit(varying_bits(p.len(), |j| p[j])) else { return };
    scratch.clear();
    scratch.resize(p.len(), 0);
    let starts = scatter(p.len(), |j| p[j], scratch, low, bits);
    p.copy_from_slice(scratch);
    if low == 0 {
        return; // the digit was the last varying bits: each range is one key
    }
    for w in starts.windows(2) {
        if w[1] - w[0] > 1 {
            sort_part(&mut p[w[0]..w[1]], scratch);
        }
    }
}

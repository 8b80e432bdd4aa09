//! How a bucket file stores its keys ([`Pack`]): only the bits its keys can
//! differ in, little-endian, `ceil(bits / 8)` bytes per key.
//!
//! Invariant: `decode(encode(k), bucket) == k` for every key of the bucket
//! whose low half is below the sorter's low bound; a key beyond it is
//! refused where the bucket file is written (`buckets.rs`), never stored
//! truncated.

/// How a bucket file stores its keys: only the bits a bucket's keys can
/// differ in, `width` little-endian bytes per key. A bucket's keys share
/// every bit from `shift` up (the bucket index: stored once, as the file).
/// With a bound on the low 32-bit half ([`ExternalSorter::with_low_bound`]:
/// graph keys `dst << 32 | src` with `src` below the node count) the
/// constant top of that half is dropped too: an 8 GiB edge input's keys
/// take 5 bytes instead of 8 (39 of 64 bits vary), and the bucket files —
/// written once and read once, the largest I/O of the build after its
/// input — shrink by 3/8.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pack {
    /// bucket = key >> shift (at most 63: a bucketed sort has 2+ buckets).
    pub(super) shift: u32,
    /// Bits kept of the low half (32: the low half is not split off).
    pub(super) low_bits: u32,
    pub(super) width: usize,
}

impl Pack {
    pub(super) fn new(shift: u32, low_bits: u32) -> Pack {
        let split = shift > 32 && low_bits < 32;
        let bits = if split { shift - 32 + low_bits } else { shift };
        Pack { shift, low_bits: if split { low_bits } else { 32 }, width: (bits.div_ceil(8) as usize).clamp(1, 8) }
    }

    /// The stored form of `k` (bucket `k >> shift`).
    #[inline(always)]
    pub(super) fn encode(&self, k: u64) -> u64 {
        if self.low_bits < 32 {
            ((k >> 32) & ((1u64 << (self.shift - 32)) - 1)) << self.low_bits | (k & 0xffff_ffff)
        } else {
            k & ((1u64 << self.shift) - 1)
        }
    }

    /// The key stored as `p` in bucket `i`.
    #[inline(always)]
    pub(super) fn decode(&self, p: u64, i: usize) -> u64 {
        let base = (i as u64) << self.shift;
        if self.low_bits < 32 {
            base | (p >> self.low_bits) << 32 | (p & ((1u64 << self.low_bits) - 1))
        } else {
            base | p
        }
    }

    /// Key `j` of a bucket file's bytes.
    #[inline(always)]
    pub(super) fn load(&self, bytes: &[u8], j: usize, i: usize) -> u64 {
        let at = j * self.width;
        let p = match bytes.get(at..at + 8) {
            Some(b) => u64::from_le_bytes(b.try_into().expect("8 bytes")),
            None => {
                let mut b = [0u8; 8];
                b[..self.width].copy_from_slice(&bytes[at..at + self.width]);
                u64::from_le_bytes(b)
            }
        };
        let p = if self.width == 8 { p } else { p & ((1u64 << (8 * self.width)) - 1) };
        self.decode(p, i)
    }
}

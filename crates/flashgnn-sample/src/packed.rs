//! Overflow pages bit-packed for the static hot set.
//!
//! On a power-law graph the hubs' overflow pages are the densest extents a
//! static set can hold (every expansion of a hub draws from them), so the
//! loader takes them first: on `data/ooc` all of them, 211 MB of a 457 MiB
//! set. A page holds `per` ids, each below `num_nodes`, so of their 4 bytes
//! only [`width`]`(num_nodes)` bits carry anything (21 on a 2 M-node graph):
//! packed at that width a page takes 66 % of its bytes, and the bytes saved
//! hold ~120 k more slots.
//!
//! One width for the whole set, fixed by the node count, rather than a
//! narrower one per block of ids: a per-block width packs data/ooc's pages
//! to 58 %, but an entry's position then depends on the block's header, a
//! second dependent DRAM miss per sampled entry (perf: 93 % of the sampler's
//! then hottest function was those two loads). At one width an entry's
//! address is arithmetic, so it is prefetched while the request waits in the
//! ready queue, as a raw page's entry is, and decoded with one unaligned
//! 8-byte load, a shift and a mask.
//!
//! Packed only by the sampler's own loader (`hot.rs`), from pages it has just
//! checked (CRC32C, page number, ids `< num_nodes`), and only for 4-byte ids;
//! the set records the width it used. Readers keep bounds-checking every
//! decoded id.
//!
//! ```text
//! offset            size                   field
//! 0                 ceil(per * width / 8)  entry k at bits [k * width, (k + 1) * width), LSB first
//! then              8                      zero (every 8-byte load stays in bounds)
//! ```

const PAD: usize = 8;

/// Bits per id for ids below `num_nodes` (at least 1, at most 32).
pub(crate) fn width(num_nodes: u64) -> u32 {
    (64 - num_nodes.saturating_sub(1).leading_zeros()).clamp(1, 32)
}

/// Bytes a page of `per` ids packs to at `bits`.
pub(crate) fn packed_len(per: usize, bits: u32) -> usize {
    (per * bits as usize).div_ceil(8) + PAD
}

/// Append the packed form of `ids` (4-byte little-endian ids, `per` of them)
/// to `out`; None (and `out` as it was) when an id needs more than `bits`.
pub(crate) fn pack_into(ids: &[u8], per: usize, bits: u32, out: &mut Vec<u8>) -> Option<usize> {
    let start = out.len();
    out.resize(start + packed_len(per, bits), 0);
    let (mut acc, mut filled, mut w) = (0u64, 0u32, start);
    for k in 0..per {
        let id = u32::from_le_bytes(ids[k * 4..k * 4 + 4].try_into().unwrap()) as u64;
        if id >> bits != 0 {
            out.truncate(start);
            return None;
        }
        acc |= id << filled;
        filled += bits;
        while filled >= 8 {
            out[w] = acc as u8;
            acc >>= 8;
            filled -= 8;
            w += 1;
        }
    }
    if filled > 0 {
        out[w] = acc as u8;
    }
    Some(out.len() - start)
}

/// Byte offset of entry `k`'s bits (for a prefetch; no memory read).
#[inline]
pub(crate) fn entry_offset(k: usize, bits: u32) -> usize {
    k * bits as usize / 8
}

/// Entry `k` of a page packed at `bits` by [`pack_into`]. Panics (slice
/// bounds) on bytes that are not such a page; the loader is the only writer.
#[inline]
pub(crate) fn entry(page: &[u8], k: usize, bits: u32) -> u64 {
    let bit = k * bits as usize;
    let at = bit / 8;
    let w = u64::from_le_bytes(page[at..at + 8].try_into().unwrap());
    (w >> (bit % 8)) & ((1u64 << bits) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// splitmix64: test ids without a dependency.
    struct Ids(u64);
    impl Ids {
        fn next(&mut self) -> u32 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ((z ^ (z >> 31)) >> 32) as u32
        }
    }

    fn raw(ids: &[u32]) -> Vec<u8> {
        ids.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn width_covers_every_id_below_the_node_count() {
        assert_eq!([0, 1, 2, 3, 4, 5].map(width), [1, 1, 1, 2, 2, 3]);
        assert_eq!(width(2_097_152), 21); // data/ooc: ids 0 ..= 2^21 - 1
        assert_eq!(width(2_097_153), 22);
        assert_eq!(width(1 << 32), 32);
        assert_eq!(width(u64::MAX), 32); // clamped: ids are 4 bytes here
    }

    #[test]
    fn every_entry_decodes_to_the_id_packed() {
        let mut rng = Ids(7);
        for n in [1u64, 2, 1000, 2_097_152, 3_000_017, 1 << 32] {
            let bits = width(n);
            for per in [1022usize, 7, 1] {
                let ids: Vec<u32> =
                    (0..per).map(|i| if i == 0 { (n - 1) as u32 } else { (rng.next() as u64 % n) as u32 }).collect();
                let mut out = vec![0xAB; 3]; // appends after what is there
                let len = pack_into(&raw(&ids), per, bits, &mut out).expect("every id fits");
                assert_eq!((out.len(), len), (3 + packed_len(per, bits), packed_len(per, bits)));
                let page = &out[3..];
                for (k, &v) in ids.iter().enumerate() {
                    assert_eq!(entry(page, k, bits), v as u64, "n {n} per {per} entry {k}");
                    assert!(entry_offset(k, bits) + 8 <= page.len());
                }
            }
        }
    }

    #[test]
    fn an_id_wider_than_the_width_is_refused() {
        let mut out = vec![1, 2];
        assert_eq!(pack_into(&raw(&[3, 1 << 21, 4]), 3, 21, &mut out), None);
        assert_eq!(out, [1, 2], "nothing appended");
        // data/ooc's pages: 1022 ids at 21 bits, 2,691 of 4,096 bytes.
        assert_eq!(packed_len(1022, 21), 2_683 + 8);
    }
}

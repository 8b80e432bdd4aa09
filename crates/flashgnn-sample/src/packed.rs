//! Overflow pages bit-packed for the static hot set (issue 20).
//!
//! On a power-law graph the hubs' overflow pages are the densest extents a
//! static set can hold (every expansion of a hub draws from them), so the
//! loader takes all of them first: on `data/ooc` they were 211 MB of a
//! 457 MiB set. A 4 KiB page holds `per` ids, each below `num_nodes`, so
//! most of its 32 bits are zero: packed by frame of reference in blocks of
//! [`BLOCK`] entries (each block stores its minimum and the bits of its
//! largest difference), a page takes ~58 % of its bytes there, and the
//! bytes saved hold ~150 k more slots (3,731 -> ~2,400 disk reads a batch
//! measured by `cache_probe` at the equivalent budget). Any entry decodes in
//! O(1) — one unaligned 8-byte load, a shift and a mask — so a hit still
//! costs what a raw page's read costs.
//!
//! Packed only by the sampler's own loader (`hot.rs`), from pages it has just
//! checked (CRC32C, page number, ids `< num_nodes`), and only for 4-byte ids
//! (a 32-bit difference plus a 7-bit shift fits one 8-byte load); readers
//! keep bounds-checking every decoded id.
//!
//! ```text
//! offset        size        field
//! 0             2           n: u16, entries packed (= per)
//! 2             2           blocks: u16 = ceil(n / BLOCK)
//! 4 + 8b        4           block b: base u32 (its smallest id)
//! 8 + 8b        4           block b: byte offset of its bits (low 24) | bit width (high 8)
//! ...           ...         each block's (id - base) values, bit width each, LSB first
//! end           8           zero (every 8-byte load stays in bounds)
//! ```

/// Entries per block: one base and one width per 64 ids (1.6 % overhead).
pub(crate) const BLOCK: usize = 64;
const HEADER: usize = 4;
const BLOCK_HEADER: usize = 8;
const PAD: usize = 8;

/// Append the packed form of `ids` (4-byte little-endian ids, `per` of them)
/// to `out`; returns its length.
pub(crate) fn pack_into(ids: &[u8], per: usize, out: &mut Vec<u8>) -> usize {
    debug_assert!(ids.len() >= per * 4 && per <= u16::MAX as usize);
    let start = out.len();
    let id = |k: usize| u32::from_le_bytes(ids[k * 4..k * 4 + 4].try_into().unwrap());
    let blocks = per.div_ceil(BLOCK);
    out.extend_from_slice(&(per as u16).to_le_bytes());
    out.extend_from_slice(&(blocks as u16).to_le_bytes());
    let headers = out.len();
    out.resize(headers + blocks * BLOCK_HEADER, 0);
    for b in 0..blocks {
        let (lo, hi) = (b * BLOCK, ((b + 1) * BLOCK).min(per));
        let base = (lo..hi).map(id).min().unwrap_or(0);
        let span = (lo..hi).map(id).max().unwrap_or(0) - base;
        let bits = 32 - span.leading_zeros() as usize;
        let off = out.len() - start;
        debug_assert!(off < 1 << 24);
        let h = headers + b * BLOCK_HEADER;
        out[h..h + 4].copy_from_slice(&base.to_le_bytes());
        out[h + 4..h + 8].copy_from_slice(&(off as u32 | (bits as u32) << 24).to_le_bytes());
        let at = out.len();
        out.resize(at + ((hi - lo) * bits).div_ceil(8), 0);
        let mut acc = 0u64;
        let (mut filled, mut w) = (0usize, at);
        for k in lo..hi {
            acc |= ((id(k) - base) as u64) << filled;
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
    }
    out.resize(out.len() + PAD, 0);
    out.len() - start
}

/// Entry `k` of a page packed by [`pack_into`]. Panics (slice bounds) on
/// bytes that are not such a page; the loader is the only writer.
#[inline]
pub(crate) fn entry(page: &[u8], k: usize) -> u64 {
    let h = HEADER + (k / BLOCK) * BLOCK_HEADER;
    let base = u32::from_le_bytes(page[h..h + 4].try_into().unwrap());
    let ob = u32::from_le_bytes(page[h + 4..h + 8].try_into().unwrap());
    let bits = (ob >> 24) as usize;
    if bits == 0 {
        return base as u64;
    }
    let bit = (k % BLOCK) * bits;
    let at = (ob & 0xff_ffff) as usize + bit / 8;
    let w = u64::from_le_bytes(page[at..at + 8].try_into().unwrap());
    base as u64 + ((w >> (bit % 8)) & ((1u64 << bits) - 1))
}

/// Byte offset of entry `k`'s bits (for a prefetch).
#[inline]
pub(crate) fn entry_offset(page: &[u8], k: usize) -> usize {
    let h = HEADER + (k / BLOCK) * BLOCK_HEADER + 4;
    let ob = u32::from_le_bytes(page[h..h + 4].try_into().unwrap());
    (ob & 0xff_ffff) as usize + (k % BLOCK) * (ob >> 24) as usize / 8
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
    fn every_entry_decodes_to_the_id_packed() {
        let mut rng = Ids(7);
        let cases: Vec<Vec<u32>> = vec![
            vec![0; 1022],                                                    // zero tail of the last page
            vec![u32::MAX; 1022],                                             // width 0 at the top
            (0..1022).map(|_| rng.next()).collect(),                 // full 32-bit spread
            (0..1022).map(|_| rng.next() % 2_097_152).collect(),      // ids of data/ooc
            (0..1022).map(|i| 5_000_000 + i * 3).collect(),                   // a sorted hub list
            (0..1022).map(|i| if i % 64 == 63 { u32::MAX } else { 1 }).collect(), // one wide entry per block
            (0..7).map(|_| rng.next()).collect(),                    // fewer than a block
        ];
        for ids in cases {
            let mut out = vec![0xAB; 3]; // appends after what is there
            let len = pack_into(&raw(&ids), ids.len(), &mut out);
            assert_eq!(out.len(), 3 + len);
            let page = &out[3..];
            for (k, &v) in ids.iter().enumerate() {
                assert_eq!(entry(page, k), v as u64, "entry {k}");
                assert!(entry_offset(page, k) < page.len());
            }
        }
    }

    #[test]
    fn graph_sized_ids_take_well_under_a_page() {
        let mut rng = Ids(1);
        let ids: Vec<u32> = (0..1022).map(|_| rng.next() % 2_097_152).collect();
        let len = pack_into(&raw(&ids), 1022, &mut Vec::new());
        // 21 bits of 32 plus 8 B per 64 ids and the pad: 2,844 of 4,096.
        assert!(len <= 4 + 16 * 8 + 1022 * 21 / 8 + 1 + 16 + 8, "{len}");
    }
}

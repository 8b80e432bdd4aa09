//! Overflow pages packed for the static hot set.
//!
//! On a power-law graph the hubs' overflow pages are the densest extents a
//! static set can hold (every expansion of a hub draws from them). A page
//! holds `per` 4-byte ids; the loader packs it in blocks of [`BLOCK`] ids
//! (`pack_blocks_into`): a block whose ids do not decrease (a stretch of one
//! stored list: lists are stored sorted) is Elias-Fano coded above its
//! first id, `l = floor(log2(range / n))` low bits an id plus about two bits
//! of unary high part; any other block (where one list ends and the next
//! begins lower) takes a fixed width above its smallest id, whichever is
//! smaller. Entry `k` stays random access: its block's header gives the
//! block's base, width and body, then one load (fixed width) or a select
//! among at most 3 * 64 + 1 bits (Elias-Fano).
//!
//! On data/ooc (2 M nodes) a page averages 15.3 bits an id against 21 at one
//! width for the whole set (a hub's page ~2 k ids apart: ~14), so more
//! pages and slots fit: with a tenth of the data cached and int4 rows,
//! 6,914 -> 5,547 reads a batch and 9.5-10.0 -> 11.7-12.9 batches/s; with a
//! third cached and rows as stored, 2,450 -> 2,045 reads. The cost is the
//! header, a second dependent load per sampled entry: `fetch::run` reads it
//! a few requests ahead and prefetches the entry's lines, which leaves
//! +1-1.5 ms of CPU a batch (+5-7 %) where everything hits (a third cached,
//! int8 rows). One width for the whole set (21 bits here) was the format
//! before; per-block widths without Elias-Fano pack these pages to ~58 %
//! only, since a block of ids from one list spans nearly the whole id range.
//!
//! Packed only by the sampler's own loader (`hot.rs`), from pages it has just
//! checked (CRC32C, page number, ids `< num_nodes`), and only for 4-byte ids;
//! the set records that it packed (`StaticSet::overflow_packed`), so a
//! reader never takes a raw page for a packed one. Readers keep
//! bounds-checking every decoded id.

/// Zero bytes after a packed page: every 8-byte load stays in bounds.
const PAD: usize = 8;

/// Entries per block of a packed page.
const BLOCK: usize = 64;
/// Bytes of a block's header.
const HEADER: usize = 8;

/// Byte offset worth prefetching for entry `k` of a packed page (no memory
/// read): its block's header, which says where the entry's bits are.
#[inline]
pub(crate) fn header_offset(k: usize) -> usize {
    k / BLOCK * HEADER
}

/// `width` bits at bit `bit` of `b` (width <= 32; `b` padded by [`PAD`]).
#[inline]
fn bits_at(b: &[u8], bit: usize, width: u32) -> u64 {
    let at = bit / 8;
    let w = u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    (w >> (bit % 8)) & ((1u64 << width) - 1)
}

/// Set `width` bits (<= 32) at bit `bit` of `b` (zeroed there before, and
/// 8 bytes readable from `bit / 8`: the page's [`PAD`]) to `v`.
fn put_bits(b: &mut [u8], bit: usize, width: u32, v: u64) {
    let at = bit / 8;
    let w = u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) | (v & ((1u64 << width) - 1)) << (bit % 8);
    b[at..at + 8].copy_from_slice(&w.to_le_bytes());
}

/// Bits needed for `v` (0 for 0).
fn bits_for(v: u64) -> u32 {
    64 - v.leading_zeros()
}

/// One block's coding: (Elias-Fano?, low bits or width, base, body bits).
fn block_plan(ids: &[u32]) -> (bool, u32, u32, usize) {
    let n = ids.len();
    let (lo, hi) = ids.iter().fold((u32::MAX, 0), |(a, b), &v| (a.min(v), b.max(v)));
    let sorted = ids.windows(2).all(|w| w[0] <= w[1]);
    let w = bits_for((hi - lo) as u64);
    let for_bits = n * w as usize;
    if sorted {
        let u = (hi - lo) as u64;
        let l = if u > n as u64 { bits_for(u / n as u64) - 1 } else { 0 };
        // Lows at whole bytes, then the upper bits: n ones and u >> l zeros.
        let ef_bits = (n * l as usize).div_ceil(8) * 8 + n + (u >> l) as usize + 1;
        if ef_bits < for_bits {
            return (true, l, lo, ef_bits);
        }
    }
    (false, w, lo, for_bits)
}

/// Bytes [`pack_blocks_into`] packs `ids` (4-byte little-endian, `per` of
/// them) to.
pub(crate) fn blocks_len(ids: &[u8], per: usize) -> usize {
    let v = u32s(ids, per);
    v.chunks(BLOCK).map(|b| HEADER + block_plan(b).3.div_ceil(8)).sum::<usize>() + PAD
}

fn u32s(ids: &[u8], per: usize) -> Vec<u32> {
    ids[..per * 4].chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// Largest packed page a block header can address (16-bit body offsets).
const BLOCKS_MAX: usize = 1 << 16;

/// Append `ids` (4-byte little-endian, `per` of them) packed in blocks to
/// `out`; returns the bytes appended ([`blocks_len`]), or None (nothing
/// appended) when they would exceed what a header addresses (64 KiB).
///
/// ```text
/// offset   size          field
/// 0        8 * blocks    per block, a u64: base (32 bits) | bits (6) << 32 | elias-fano (1) << 38
///                        | body offset in the page (16) << 39 | bytes of the low parts (9) << 55
/// then     bodies        per block, byte-aligned: its ids at `bits` above base (fixed width); or
///                        (Elias-Fano) the low `bits` of each id above base, padded to a byte, then
///                        the upper part: id i sets bit ((id - base) >> bits) + i
/// then     8             zero (every 8-byte load stays in bounds)
/// ```
pub(crate) fn pack_blocks_into(ids: &[u8], per: usize, out: &mut Vec<u8>) -> Option<usize> {
    let v = u32s(ids, per);
    let plans: Vec<_> = v.chunks(BLOCK).map(block_plan).collect();
    let heads = plans.len() * HEADER;
    let total = heads + plans.iter().map(|p| p.3.div_ceil(8)).sum::<usize>() + PAD;
    if total > BLOCKS_MAX {
        return None;
    }
    let start = out.len();
    out.resize(start + total, 0);
    let page = &mut out[start..];
    let mut body = heads;
    for (b, (&(ef, bits, base, len), ids)) in plans.iter().zip(v.chunks(BLOCK)).enumerate() {
        let lows = if ef { (ids.len() * bits as usize).div_ceil(8) } else { 0 };
        let h = base as u64 | (bits as u64) << 32 | (ef as u64) << 38 | (body as u64) << 39 | (lows as u64) << 55;
        page[b * HEADER..(b + 1) * HEADER].copy_from_slice(&h.to_le_bytes());
        for (i, &id) in ids.iter().enumerate() {
            let u = (id - base) as u64;
            put_bits(&mut page[body..], i * bits as usize, bits, u & ((1u64 << bits) - 1));
            if ef {
                put_bits(&mut page[body + lows..], (u >> bits) as usize + i, 1, 1);
            }
        }
        body += len.div_ceil(8);
    }
    Some(total)
}

/// Byte offsets in a page packed by [`pack_blocks_into`] that decoding
/// entry `k` reads after its block's header: its low bits (or its bits)
/// and, for an Elias-Fano block, the start of the upper part. Reads the
/// header (prefetch it first); for a prefetch a few requests ahead.
#[inline]
pub(crate) fn block_lines(page: &[u8], k: usize) -> (usize, usize) {
    let b = k / BLOCK;
    let h = u64::from_le_bytes(page[b * HEADER..(b + 1) * HEADER].try_into().unwrap());
    let (bits, body) = (((h >> 32) & 63) as usize, ((h >> 39) & 0xffff) as usize);
    (body + (k % BLOCK) * bits / 8, body + (h >> 55) as usize)
}

/// Entry `k` of a page packed by [`pack_blocks_into`] (`k` below its id
/// count). Panics (slice bounds) on bytes that are not such a page; the
/// loader is the only writer.
#[inline]
pub(crate) fn entry(page: &[u8], k: usize) -> u64 {
    let (b, i) = (k / BLOCK, k % BLOCK);
    let h = u64::from_le_bytes(page[b * HEADER..(b + 1) * HEADER].try_into().unwrap());
    let (base, bits) = (h & 0xffff_ffff, ((h >> 32) & 63) as u32);
    let body = ((h >> 39) & 0xffff) as usize;
    let low = if bits == 0 { 0 } else { bits_at(&page[body..], i * bits as usize, bits) };
    if (h >> 38) & 1 == 0 {
        return base + low;
    }
    // The (i + 1)-th set bit of the upper part: its position less i is
    // the high part. A block's upper part spans at most 3 * BLOCK + 1 bits.
    let up = body + (h >> 55) as usize;
    let mut left = i as u32;
    let mut at = up;
    loop {
        let w = u64::from_le_bytes(page[at..at + 8].try_into().unwrap());
        let c = w.count_ones();
        if left < c {
            let mut w = w;
            for _ in 0..left {
                w &= w - 1;
            }
            let pos = (at - up) * 8 + w.trailing_zeros() as usize;
            return base + (((pos - i) as u64) << bits | low);
        }
        left -= c;
        at += 8;
    }
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
    fn every_entry_of_a_block_packed_page_decodes_to_its_id() {
        let mut rng = Ids(11);
        for per in [1022usize, 65, 64, 63, 7, 1] {
            for case in 0..6 {
                // Pages as overflow.fg holds them: sorted stretches of lists
                // of several lengths and densities, one page unsorted, one
                // all equal, and the id range's ends.
                let mut ids: Vec<u32> = Vec::with_capacity(per);
                while ids.len() < per {
                    let run = match case {
                        0 => per,
                        1 => 1 + rng.next() as usize % 40,
                        _ => 1 + rng.next() as usize % 300,
                    };
                    let span = [1u32 << 21, 5_000, u32::MAX, 1 << 21, 1, 64][case];
                    let mut r: Vec<u32> = (0..run.min(per - ids.len())).map(|_| rng.next() % span.max(1)).collect();
                    if case != 3 {
                        r.sort_unstable();
                    }
                    ids.extend(r);
                }
                if case == 2 {
                    ids[0] = u32::MAX;
                    ids[per - 1] = 0;
                }
                let mut out = vec![0xCD; 5];
                let len = pack_blocks_into(&raw(&ids), per, &mut out).expect("fits");
                assert_eq!((len, out.len()), (blocks_len(&raw(&ids), per), 5 + len), "per {per} case {case}");
                let page = &out[5..];
                for (k, &v) in ids.iter().enumerate() {
                    assert_eq!(entry(page, k), v as u64, "per {per} case {case} entry {k}");
                    assert!(header_offset(k) < page.len());
                }
            }
        }
    }

    #[test]
    fn sorted_stretches_pack_below_the_fixed_width() {
        // A hub's stretch: 1022 sorted ids ~2 k apart on a 2 M-node graph
        // take ~14 bits each against 21 at one width for the whole set.
        let ids: Vec<u32> = (0..1022u32).map(|i| i * 2_000 + i % 7).collect();
        let len = pack_blocks_into(&raw(&ids), 1022, &mut Vec::new()).unwrap();
        assert!(len * 8 < 1022 * 15, "{len} B");
        let fixed = (1022 * 21usize).div_ceil(8) + PAD; // one width for the set, the format before
        assert!(len < fixed * 7 / 10, "{len} B against {fixed}");
    }
}

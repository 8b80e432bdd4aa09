//! A checked slot as the cache's static hot set holds it in memory.
//!
//! A slot as stored spends 24 bytes on its header (CRC32C, degree, original
//! id, first overflow entry) and `id_bytes` on each inline id. A static hot
//! set is loaded, and every slot in it checked whole (CRC32C and bounds), by
//! the sampler itself; it never leaves that process's memory, and a hit skips
//! the CRC anyway. So it holds each homogeneous slot re-encoded, in what a
//! hit needs and no more:
//!
//! ```text
//! offset        size                    field
//! 0             row                     the inline row as held: as stored, or encoded by the set's
//!                                       row codec (0 bytes with separate rows)
//! row           4                       degree
//! row + 4       first_bytes             first overflow entry, little-endian, only when degree > inline_cap
//!                                       (first_bytes: the bytes `overflow_entries` needs)
//! then          ceil(n * id_bits / 8)   the n = min(degree, inline_cap) inline ids, id_bits each, packed
//!                                       from the lowest bit on (id_bits: the bits `num_nodes - 1` needs,
//!                                       at least 1; 64 past 56)
//! ```
//!
//! No CRC (checked when loaded), no original id (the loader keeps a slot
//! only when its original id is the one `node_order.npy` gives, and the
//! decoder hands that back), no padding, and the ids at the width the node
//! count needs: on data/ooc (2.1 M nodes: 21 bits; 128 int4 features) a hot
//! slot of 12 inline ids takes 108 bytes against 144 trimmed as stored.
//! Every field that addresses something is bound-checked again on every
//! decode, exactly as a stored slot's: the degree, the overflow range, the
//! entry's exact length, each id (on access, against `num_nodes`).
//!
//! Typed slots (relation counts, edge bases) are held as stored.

use super::{check_degree, slot_base, SlotView};
use crate::error::{FormatError, Result};
use crate::layout::Layout;

/// Bits needed for `v` (0 for 0).
fn bits_for(v: u64) -> u32 {
    64 - v.leading_zeros()
}

/// How a static hot set holds one dataset's slots (the module docs' layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldSlots {
    /// Bytes of the inline row as held.
    row: u32,
    /// Bits per inline id: those `num_nodes - 1` needs, 64 past 56 (one
    /// 8-byte load must hold an id and its bit offset).
    id_bits: u32,
    /// Bytes of the first overflow entry.
    first_bytes: u32,
}

impl HeldSlots {
    /// Slots of `layout` held with their inline row in `row` bytes (0 with
    /// separate rows); None for a typed layout (held as stored).
    pub fn new(layout: &Layout, row: usize) -> Option<HeldSlots> {
        if layout.rel_counts > 0 {
            return None;
        }
        let bits = bits_for(layout.num_nodes.saturating_sub(1)).max(1);
        let id_bits = if bits > 56 { 64 } else { bits };
        let first_bytes = bits_for(layout.overflow_entries).div_ceil(8).max(1);
        Some(HeldSlots { row: row as u32, id_bits, first_bytes })
    }

    /// Bytes of the inline row as held (the entry's first bytes).
    pub fn row_bytes(&self) -> usize {
        self.row as usize
    }

    /// Bytes a slot of `degree` is held in.
    pub fn len(&self, layout: &Layout, degree: u32) -> usize {
        let n = degree.min(layout.inline_cap) as usize;
        let first = if degree > layout.inline_cap { self.first_bytes as usize } else { 0 };
        self.row as usize + 4 + first + (n * self.id_bits as usize).div_ceil(8)
    }

    /// Append `slot` (decoded, and so checked, from its stored bytes) held
    /// with its inline row as `row`; returns whether it was: an inline id
    /// out of range (`>= num_nodes`, which the held width may not carry) or
    /// a row of another length leaves `out` as it was.
    pub fn encode(&self, layout: &Layout, slot: &SlotView, row: &[u8], out: &mut Vec<u8>) -> bool {
        let ids = (0..slot.inline_len()).map(|i| super::packed_id(slot.inline, i, slot.id_bits));
        if row.len() != self.row as usize || !slot.rel.is_empty() || ids.clone().any(|v| v >= layout.num_nodes) {
            return false;
        }
        let start = out.len();
        out.extend_from_slice(row);
        out.extend_from_slice(&slot.degree.to_le_bytes());
        if slot.degree > layout.inline_cap {
            out.extend_from_slice(&slot.overflow_first.to_le_bytes()[..self.first_bytes as usize]);
        }
        let (mut acc, mut have) = (0u128, 0u32);
        for v in ids {
            acc |= (v as u128) << have;
            have += self.id_bits;
            while have >= 8 {
                out.push(acc as u8);
                (acc, have) = (acc >> 8, have - 8);
            }
        }
        if have > 0 {
            out.push(acc as u8);
        }
        debug_assert_eq!(out.len() - start, self.len(layout, slot.degree));
        true
    }

    /// Node `node`'s slot from `bytes`, an entry [`HeldSlots::encode`]
    /// wrote, as [`super::decode_checked_slot`] would give it from the stored
    /// bytes (`original_id`: the node's original id, which the loader matched
    /// against the stored slot's). Every field is bound-checked: a node
    /// beyond the graph, an entry of another length than its degree gives,
    /// a degree or overflow range out of bounds are refused, naming the
    /// field's place in the slot as stored; the ids are checked on access.
    pub fn decode<'a>(
        &self,
        layout: &Layout,
        node: u64,
        original_id: u64,
        bytes: &'a [u8],
        file: &str,
    ) -> Result<SlotView<'a>> {
        let base = slot_base(layout, node, file)?;
        let truncated = |needed: usize| FormatError::Truncated {
            file: file.into(),
            offset: base,
            needed: needed as u64,
            available: bytes.len() as u64,
        };
        let row = self.row as usize;
        let degree = bytes.get(row..row + 4).ok_or_else(|| truncated(row + 4))?;
        let degree = u32::from_le_bytes(degree.try_into().unwrap());
        let len = self.len(layout, degree);
        if bytes.len() != len {
            return Err(truncated(len));
        }
        let mut at = row + 4;
        let mut overflow_first = 0;
        if degree > layout.inline_cap {
            let mut w = [0u8; 8];
            let fb = self.first_bytes as usize;
            w[..fb].copy_from_slice(&bytes[at..at + fb]);
            overflow_first = u64::from_le_bytes(w);
            at += fb;
        }
        check_degree(layout, base, file, degree, overflow_first)?;
        Ok(SlotView {
            node,
            degree,
            original_id,
            overflow_first,
            features: &bytes[..row],
            inline: &bytes[at..],
            inline_len: degree.min(layout.inline_cap),
            id_bits: self.id_bits,
            rel: &[],
            bases: &[],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{decode_checked_slot, encode_slot, used_slot_bytes};
    use super::*;
    use crate::dtype::Dtype;
    use crate::layout::FeaturePlacement;

    /// A layout of `nodes` nodes (`id_bytes` each), inline cap 12, 4
    /// float32 features placed `placement`, 10^6 overflow entries.
    fn layout(nodes: u64, id_bytes: u32, placement: FeaturePlacement) -> Layout {
        Layout::new("g", 4096, nodes, 1 << 40, id_bytes, 4, Dtype::Float32, placement, 12, 1_000_000).unwrap()
    }

    /// Node `node`'s slot as stored (original id `num_nodes - 1 - node`).
    fn stored(l: &Layout, node: u64, degree: u32, first: u64, ids: &[u64]) -> Vec<u8> {
        let mut buf = vec![0u8; l.slot_bytes as usize];
        let row: Vec<u8> = if l.placement == FeaturePlacement::Inline { (1..=16).collect() } else { vec![] };
        encode_slot(l, node, degree, l.num_nodes - 1 - node, first, &row, ids, &mut buf);
        buf
    }

    #[test]
    fn held_slots_decode_to_the_stored_slot_at_every_edge() {
        for (nodes, id_bytes, bits) in [(1u64 << 21, 4, 21), (100, 4, 7), (2, 4, 1), (1, 4, 1), (1 << 33, 8, 33)] {
            for placement in [FeaturePlacement::Inline, FeaturePlacement::Separate] {
                let l = layout(nodes, id_bytes, placement);
                let max = nodes - 1;
                let full: Vec<u64> = (0..12).map(|i| max - i % nodes).collect();
                // (degree, first overflow entry, inline ids): none, one, a
                // full inline capacity, spilled at the overflow range's end.
                for (degree, first, ids) in [
                    (0, 0, &[][..]),
                    (1, 0, &[max][..]),
                    (12, 0, &full[..]),
                    (13, 999_999, &full[..]),
                    (4000, 7, &full),
                ] {
                    let node = max / 2;
                    let buf = stored(&l, node, degree, first, ids);
                    let want = decode_checked_slot(&l, node, &buf, "g").unwrap();
                    let rows: [&[u8]; 2] = [want.features, &[9, 8, 7]]; // as stored, "encoded"
                    for row in rows {
                        let h = HeldSlots::new(&l, row.len()).unwrap();
                        assert_eq!(h.id_bits, bits);
                        let mut out = vec![0xAB];
                        assert!(h.encode(&l, &want, row, &mut out), "nodes {nodes} degree {degree}");
                        assert_eq!(out.len() - 1, h.len(&l, degree));
                        let got = h.decode(&l, node, want.original_id, &out[1..], "g").unwrap();
                        let key = |v: &SlotView| (v.node, v.degree, v.original_id, v.overflow_first, v.inline_len());
                        assert_eq!(key(&got), key(&want));
                        assert_eq!(got.inline_ids(&l, "g").unwrap(), ids, "nodes {nodes} degree {degree}");
                        assert_eq!(got.features, row);
                        assert!(out.len() - 1 <= used_slot_bytes(&l, degree) - 20 + row.len() - want.features.len());
                    }
                }
            }
        }
    }

    #[test]
    fn a_hot_slot_of_data_ooc_is_held_in_108_bytes() {
        // 2 M nodes, 12 inline ids, an int4 row of 128 features (72 B):
        // 144 B trimmed as stored (24 + 72 + 48).
        let l = Layout::new(
            "g",
            4096,
            1 << 21,
            60_481_255,
            4,
            128,
            Dtype::Float32,
            FeaturePlacement::Inline,
            12,
            52_696_705,
        )
        .unwrap();
        let h = HeldSlots::new(&l, 72).unwrap();
        assert_eq!((h.len(&l, 12), h.len(&l, 13), h.len(&l, 0)), (72 + 4 + 32, 72 + 4 + 4 + 32, 76));
        assert_eq!(used_slot_bytes(&l, 12) - 512 + 72, 144);
    }

    #[test]
    fn a_corrupt_held_slot_is_refused_never_misread() {
        let l = layout(1 << 21, 4, FeaturePlacement::Inline);
        let ids: Vec<u64> = (0..12).map(|i| i * 1000).collect();
        let buf = stored(&l, 5, 20, 100, &ids);
        let view = decode_checked_slot(&l, 5, &buf, "g").unwrap();
        let h = HeldSlots::new(&l, 16).unwrap();
        let mut good = Vec::new();
        assert!(h.encode(&l, &view, view.features, &mut good));
        let dec = |b: &[u8]| h.decode(&l, 5, 4, b, "g").map(|v| v.inline_ids(&l, "g")).and_then(|r| r);
        assert_eq!(dec(&good).unwrap(), ids);
        // Another length than the degree gives: one byte short or long,
        // shorter than the row and degree, empty.
        for b in [&good[..good.len() - 1], &[&good[..], &[0]].concat(), &good[..18], &[]] {
            assert!(matches!(h.decode(&l, 5, 4, b, "g"), Err(FormatError::Truncated { .. })), "{} B", b.len());
        }
        // A degree past num_edges; an overflow range past overflow_entries;
        // a degree that drops the overflow field (the length then differs).
        let mut bad = good.clone();
        bad[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(h.decode(&l, 5, 4, &bad, "g").is_err());
        let mut bad = good.clone();
        bad[20..23].copy_from_slice(&999_995u32.to_le_bytes()[..3]);
        let e = h.decode(&l, 5, 4, &bad, "g").unwrap_err().to_string();
        assert!(e.contains("overflow range end = 1000003") && e.contains(&(l.slot_offset(5) + 16).to_string()), "{e}");
        let mut bad = good.clone();
        bad[16..20].copy_from_slice(&12u32.to_le_bytes());
        assert!(h.decode(&l, 5, 4, &bad, "g").is_err());
        // An id whose bits say more than num_nodes (all ones: 2^21 - 1 is
        // in range, so the layout here has fewer nodes than the width).
        let small = layout(1 << 20 | 1, 4, FeaturePlacement::Inline);
        let hs = HeldSlots::new(&small, 16).unwrap();
        let (small_slot, mut bad) = (stored(&small, 5, 3, 0, &[1, 2, 3]), Vec::new());
        assert!(hs.encode(&small, &decode_checked_slot(&small, 5, &small_slot, "g").unwrap(), &[0; 16], &mut bad));
        let last = bad.len() - 1;
        bad[last] = 0xff;
        let v = hs.decode(&small, 5, 4, &bad, "g").unwrap();
        let e = v.inline_ids(&small, "g").unwrap_err().to_string();
        assert!(e.contains("neighbor id") && e.contains(&format!("< num_nodes {}", (1 << 20) + 1)), "{e}");
        // A node beyond the graph.
        assert!(h.decode(&l, 1 << 21, 4, &good, "g").is_err());
    }

    #[test]
    fn a_slot_the_held_width_cannot_carry_is_not_encoded() {
        // A stored id past num_nodes (the stored slot decodes; its ids are
        // checked on access) and a row of another length: nothing appended.
        let l = layout(100, 4, FeaturePlacement::Inline);
        let buf = stored(&l, 5, 2, 0, &[3, 100]);
        let view = decode_checked_slot(&l, 5, &buf, "g").unwrap();
        let h = HeldSlots::new(&l, 16).unwrap();
        let mut out = vec![1, 2];
        assert!(!h.encode(&l, &view, view.features, &mut out));
        let good = stored(&l, 5, 2, 0, &[3, 99]);
        let ok = decode_checked_slot(&l, 5, &good, "g").unwrap();
        assert!(!h.encode(&l, &ok, &[0; 15], &mut out));
        assert_eq!(out, [1, 2]);
        assert!(HeldSlots::new(&l.with_rel_counts("g", 2, false).unwrap(), 16).is_none(), "typed: held as stored");
    }
}

//! Encoding and checked decoding of one node slot.
//!
//! ```text
//! offset  size          field
//! 0       4             crc32c of bytes [4, slot_bytes), seeded with the dataset id (v2) and the node id
//! 4       4             degree (total neighbors, inline + overflow)
//! 8       8             original (user-facing) node id
//! 16      8             first overflow entry (0 when degree <= inline_cap)
//! 24      4R            typed graphs: R per-relation neighbor counts (u32)
//! ...     pad to 8, 8R  typed graphs of version 4: R per-relation edge bases (u64)
//! ...     row_bytes     feature row (inline placement only)
//! ...     cap*id_bytes  first min(degree, inline_cap) neighbor ids (internal), rest zero
//! ...     pad to 8      zero
//! ```
//!
//! Invariant checked on every decode: crc matches; `original_id < num_nodes`;
//! `degree <= num_edges`; a node with `degree > inline_cap` has its
//! `degree - inline_cap` overflow entries inside `[0, overflow_entries)`; a node
//! without overflow stores 0; relation counts sum to the degree; every
//! relation's edge base plus its count is at most `num_edges`. Neighbor ids
//! are checked by [`SlotView::inline_ids`].
//!
//! [`held`]: the same slot as the cache's static hot set holds it in memory
//! (no CRC, no original id, ids at the width the node count needs).

use crate::error::{FormatError, Result};
use crate::layout::{Layout, SLOT_HEADER_BYTES};

pub mod held;

/// A decoded, validated slot borrowing the page buffer (or a held slot,
/// [`held::HeldSlots::decode`]).
#[derive(Debug, Clone, Copy)]
pub struct SlotView<'a> {
    pub node: u64,
    pub degree: u32,
    pub original_id: u64,
    pub overflow_first: u64,
    /// The inline row as stored, or as a static hot set holds it (encoded
    /// by its row codec: see [`held`]); empty with separate rows.
    pub features: &'a [u8],
    /// `inline_len` ids of `id_bits` bits each, packed from the lowest bit
    /// ([`packed_id`]): 32 or 64 are the stored 4- or 8-byte ids.
    inline: &'a [u8],
    inline_len: u32,
    id_bits: u32,
    /// Typed graphs: the per-relation counts (`u32` each, the node type's
    /// incoming edge types in order); empty for a homogeneous graph.
    rel: &'a [u8],
    /// Typed graphs of version 4: the per-relation edge bases (`u64` each);
    /// empty otherwise.
    bases: &'a [u8],
}

impl<'a> SlotView<'a> {
    /// Number of neighbor ids stored inline.
    pub fn inline_len(&self) -> usize {
        self.inline_len as usize
    }
    /// Neighbors stored in overflow.
    pub fn overflow_len(&self) -> u64 {
        self.degree as u64 - self.inline_len() as u64
    }

    /// Neighbors along the node type's `j`-th incoming edge type (typed
    /// graphs; a homogeneous graph has one relation: the degree). The
    /// neighbor list holds the relations one after another, in order.
    pub fn rel_count(&self, j: usize) -> u32 {
        if self.rel.is_empty() {
            return if j == 0 { self.degree } else { 0 };
        }
        self.rel.get(4 * j..4 * j + 4).map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap()))
    }

    /// The edge base of the node type's `j`-th incoming edge type: the
    /// position of the node's first neighbor along it in that edge type's
    /// stored edge list (`e_id` = base + place in the relation's list).
    /// `None` when the slot has no bases (format version < 4).
    pub fn edge_base(&self, j: usize) -> Option<u64> {
        self.bases.get(8 * j..8 * j + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap()))
    }

    /// Decode inline neighbor `i`, checking it against `num_nodes`.
    /// Errors name the id's place in the slot as stored, however it is held.
    pub fn inline_id(&self, i: usize, layout: &Layout, file: &str) -> Result<u64> {
        debug_assert!(i < self.inline_len());
        let v = packed_id(self.inline, i, self.id_bits);
        if v >= layout.num_nodes {
            let w = layout.id_bytes as usize;
            let off = layout.slot_offset(self.node) + layout.inline_ids_offset() as u64 + (i * w) as u64;
            return Err(FormatError::oob(file, off, "neighbor id", v, format!("< num_nodes {}", layout.num_nodes)));
        }
        Ok(v)
    }

    /// All inline neighbors, checked.
    pub fn inline_ids(&self, layout: &Layout, file: &str) -> Result<Vec<u64>> {
        (0..self.inline_len()).map(|i| self.inline_id(i, layout, file)).collect()
    }
}

/// Id `i` of `b`, ids of `bits` bits each packed from the lowest bit of
/// `b[0]` on: 32 and 64 are the stored 4- and 8-byte little-endian ids, any
/// other width (at most 56, so one 8-byte load holds an id) a held slot's
/// ([`held`]). Panics (slice bounds) when `b` holds fewer than `i + 1` ids.
#[inline]
fn packed_id(b: &[u8], i: usize, bits: u32) -> u64 {
    match bits {
        32 => u32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap()) as u64,
        64 => u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().unwrap()),
        _ => {
            debug_assert!(bits <= 56, "{bits}-bit ids do not fit one 8-byte load with their offset");
            let bit = i * bits as usize;
            let at = bit / 8;
            let word = match b.get(at..at + 8) {
                Some(w) => u64::from_le_bytes(w.try_into().unwrap()),
                None => {
                    // The last ids: fewer than 8 bytes left.
                    let mut w = [0u8; 8];
                    let tail = &b[at..];
                    w[..tail.len()].copy_from_slice(tail);
                    u64::from_le_bytes(w)
                }
            };
            (word >> (bit % 8)) & ((1u64 << bits) - 1)
        }
    }
}

/// Little-endian id of 4 or 8 bytes.
pub fn read_id(b: &[u8]) -> u64 {
    match b.len() {
        4 => u32::from_le_bytes(b.try_into().unwrap()) as u64,
        8 => u64::from_le_bytes(b.try_into().unwrap()),
        n => unreachable!("id width {n} rejected by Layout::new"),
    }
}

pub fn write_id(v: u64, out: &mut [u8]) {
    match out.len() {
        4 => out.copy_from_slice(&(v as u32).to_le_bytes()),
        8 => out.copy_from_slice(&v.to_le_bytes()),
        n => unreachable!("id width {n} rejected by Layout::new"),
    }
}

/// Write node `node`'s slot into `out` (exactly `slot_bytes` long, zeroed by
/// the caller or not — every byte is written).
#[allow(clippy::too_many_arguments)]
pub fn encode_slot(
    layout: &Layout,
    node: u64,
    degree: u32,
    original_id: u64,
    overflow_first: u64,
    features: &[u8],
    inline_ids: &[u64],
    out: &mut [u8],
) {
    encode_typed_slot(layout, node, degree, original_id, overflow_first, &[], &[], features, inline_ids, out)
}

/// [`encode_slot`] with a typed graph's per-relation counts (at most
/// `layout.rel_counts` of them, summing to `degree`; the rest are zero) and,
/// with `layout.edge_bases`, as many edge bases (the rest zero).
#[allow(clippy::too_many_arguments)]
pub fn encode_typed_slot(
    layout: &Layout,
    node: u64,
    degree: u32,
    original_id: u64,
    overflow_first: u64,
    rel_counts: &[u32],
    edge_bases: &[u64],
    features: &[u8],
    inline_ids: &[u64],
    out: &mut [u8],
) {
    assert_eq!(out.len(), layout.slot_bytes as usize);
    assert!(rel_counts.len() <= layout.rel_counts as usize);
    assert_eq!(edge_bases.len(), if layout.edge_bases { rel_counts.len() } else { 0 });
    debug_assert!(layout.rel_counts == 0 || rel_counts.iter().map(|&c| c as u64).sum::<u64>() == degree as u64);
    assert!(inline_ids.len() <= layout.inline_cap as usize);
    assert!(inline_ids.len() <= degree as usize);
    out.fill(0);
    out[4..8].copy_from_slice(&degree.to_le_bytes());
    out[8..16].copy_from_slice(&original_id.to_le_bytes());
    out[16..24].copy_from_slice(&overflow_first.to_le_bytes());
    for (j, c) in rel_counts.iter().enumerate() {
        let at = SLOT_HEADER_BYTES as usize + 4 * j;
        out[at..at + 4].copy_from_slice(&c.to_le_bytes());
    }
    for (j, b) in edge_bases.iter().enumerate() {
        let at = layout.edge_bases_offset() as usize + 8 * j;
        out[at..at + 8].copy_from_slice(&b.to_le_bytes());
    }
    let fo = layout.inline_feature_offset() as usize;
    if layout.placement == crate::layout::FeaturePlacement::Inline {
        assert_eq!(features.len(), layout.row_bytes() as usize);
        out[fo..fo + features.len()].copy_from_slice(features);
    }
    let w = layout.id_bytes as usize;
    let io = layout.inline_ids_offset() as usize;
    for (i, &id) in inline_ids.iter().enumerate() {
        write_id(id, &mut out[io + i * w..io + (i + 1) * w]);
    }
    let c = layout.crc(node, &out[4..]);
    out[0..4].copy_from_slice(&c.to_le_bytes());
}

/// Decode and validate node `node`'s slot from `bytes` (exactly `slot_bytes`).
pub fn decode_slot<'a>(layout: &Layout, node: u64, bytes: &'a [u8], file: &str) -> Result<SlotView<'a>> {
    decode(layout, node, bytes, file, true)
}

/// [`decode_slot`] for bytes that already passed it and have not left this
/// process's memory since: the cache's static hot set, checked when it was
/// read off the disk. The slot's CRC32C (a sixth of a cached batch's CPU on
/// data/ooc) is not computed again; every field is still bound-checked, so
/// an address taken from these bytes is never trusted. The bytes may be the
/// whole slot or exactly its [`used_slot_bytes`] (the hot set holds slots
/// trimmed of their zero padding).
pub fn decode_checked_slot<'a>(layout: &Layout, node: u64, bytes: &'a [u8], file: &str) -> Result<SlotView<'a>> {
    decode(layout, node, bytes, file, false)
}

/// Bytes of a slot of `degree` that carry data: header, relation counts, an
/// inline row and the inline ids. The rest is zero padding (checked by
/// `verify`, [`check_slot_padding`]).
pub fn used_slot_bytes(layout: &Layout, degree: u32) -> usize {
    layout.inline_ids_offset() as usize + degree.min(layout.inline_cap) as usize * layout.id_bytes as usize
}

fn decode<'a>(layout: &Layout, node: u64, bytes: &'a [u8], file: &str, check_crc: bool) -> Result<SlotView<'a>> {
    let base = slot_base(layout, node, file)?;
    // A checked slot may come trimmed to its used bytes (at least the fixed
    // part and an inline row; its exact length is checked below).
    let trimmed = !check_crc && bytes.len() < layout.slot_bytes as usize;
    if bytes.len() != layout.slot_bytes as usize && !(trimmed && bytes.len() >= layout.inline_ids_offset() as usize) {
        return Err(FormatError::Truncated {
            file: file.into(),
            offset: base,
            needed: layout.slot_bytes as u64,
            available: bytes.len() as u64,
        });
    }
    let stored = u32::from_le_bytes(bytes[0..4].try_into().unwrap());
    let computed = if check_crc { layout.crc(node, &bytes[4..]) } else { stored };
    if stored != computed {
        return Err(FormatError::Checksum {
            file: file.into(),
            offset: base,
            what: format!("slot of node {node}"),
            stored,
            computed,
        });
    }
    let degree = u32::from_le_bytes(bytes[4..8].try_into().unwrap());
    let original_id = u64::from_le_bytes(bytes[8..16].try_into().unwrap());
    let overflow_first = u64::from_le_bytes(bytes[16..24].try_into().unwrap());
    check_degree(layout, base, file, degree, overflow_first)?;
    if original_id >= layout.num_nodes {
        return Err(FormatError::oob(
            file,
            base + 8,
            "original id",
            original_id,
            format!("< num_nodes {}", layout.num_nodes),
        ));
    }
    let h = SLOT_HEADER_BYTES as usize;
    let rel = &bytes[h..h + 4 * layout.rel_counts as usize];
    if !rel.is_empty() {
        let sum: u64 = rel.chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().unwrap()) as u64).sum();
        if sum != degree as u64 {
            return Err(FormatError::oob(
                file,
                base + h as u64,
                "sum of relation counts",
                sum,
                format!("== degree {degree}"),
            ));
        }
    }
    let bases: &[u8] = if layout.edge_bases {
        let at = layout.edge_bases_offset() as usize;
        &bytes[at..at + 8 * layout.rel_counts as usize]
    } else {
        &[]
    };
    for (j, b) in bases.chunks_exact(8).enumerate() {
        let first = u64::from_le_bytes(b.try_into().unwrap());
        let count = u32::from_le_bytes(rel[4 * j..4 * j + 4].try_into().unwrap()) as u64;
        if first.checked_add(count).is_none_or(|end| end > layout.num_edges) {
            return Err(FormatError::oob(
                file,
                base + (layout.edge_bases_offset() as usize + 8 * j) as u64,
                "edge base",
                first,
                format!("<= num_edges {} - relation count {count}", layout.num_edges),
            ));
        }
    }
    let fo = layout.inline_feature_offset() as usize;
    let features: &[u8] = if layout.placement == crate::layout::FeaturePlacement::Inline {
        &bytes[fo..fo + layout.row_bytes() as usize]
    } else {
        &[]
    };
    let io = layout.inline_ids_offset() as usize;
    let used = used_slot_bytes(layout, degree);
    if trimmed && bytes.len() != used {
        return Err(FormatError::Truncated {
            file: file.into(),
            offset: base,
            needed: used as u64,
            available: bytes.len() as u64,
        });
    }
    let inline = &bytes[io..used];
    let (inline_len, id_bits) = (degree.min(layout.inline_cap), 8 * layout.id_bytes);
    Ok(SlotView { node, degree, original_id, overflow_first, features, inline, inline_len, id_bits, rel, bases })
}

/// Byte offset of node `node`'s slot in `file`, refusing a node beyond the graph.
fn slot_base(layout: &Layout, node: u64, file: &str) -> Result<u64> {
    if node < layout.num_nodes {
        Ok(layout.slot_offset(node))
    } else {
        Err(FormatError::oob(file, 0, "node id", node, format!("< num_nodes {}", layout.num_nodes)))
    }
}

/// The checks on a slot's degree and overflow range (the slot at `base` of
/// `file`), shared by stored and held slots: `degree <= num_edges`; a node
/// with `degree > inline_cap` has its `degree - inline_cap` overflow entries
/// inside `[0, overflow_entries)`; a node without overflow stores 0.
fn check_degree(layout: &Layout, base: u64, file: &str, degree: u32, overflow_first: u64) -> Result<()> {
    if degree as u64 > layout.num_edges {
        return Err(FormatError::oob(
            file,
            base + 4,
            "degree",
            degree as u64,
            format!("<= num_edges {}", layout.num_edges),
        ));
    }
    let spill = degree as u64 - degree.min(layout.inline_cap) as u64;
    if spill > 0 {
        let end = overflow_first.checked_add(spill);
        if end.is_none_or(|e| e > layout.overflow_entries) {
            return Err(FormatError::oob(
                file,
                base + 16,
                "overflow range end",
                end.unwrap_or(u64::MAX),
                format!("<= overflow_entries {} (first {overflow_first}, count {spill})", layout.overflow_entries),
            ));
        }
    } else if overflow_first != 0 {
        return Err(FormatError::oob(
            file,
            base + 16,
            "overflow_first",
            overflow_first,
            "0 for a node without overflow",
        ));
    }
    Ok(())
}

/// Strict check used by `verify`: bytes after the inline ids, and those
/// between the relation counts and the edge bases, must be zero.
pub fn check_slot_padding(layout: &Layout, view: &SlotView, bytes: &[u8], file: &str) -> Result<()> {
    if layout.edge_bases {
        let gap = (SLOT_HEADER_BYTES + 4 * layout.rel_counts) as usize..layout.edge_bases_offset() as usize;
        if let Some(p) = bytes[gap.clone()].iter().position(|b| *b != 0) {
            let off = layout.slot_offset(view.node) + (gap.start + p) as u64;
            return Err(FormatError::oob(file, off, "slot padding byte", bytes[gap.start + p] as u64, "0"));
        }
    }
    let start = layout.inline_ids_offset() as usize + view.inline_len() * layout.id_bytes as usize;
    if let Some(p) = bytes[start..].iter().position(|b| *b != 0) {
        let off = layout.slot_offset(view.node) + (start + p) as u64;
        return Err(FormatError::oob(file, off, "slot padding byte", bytes[start + p] as u64, "0"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::Dtype;
    use crate::layout::FeaturePlacement;

    fn layout() -> Layout {
        Layout::new("g", 4096, 100, 1000, 4, 4, Dtype::Float32, FeaturePlacement::Inline, 3, 50).unwrap()
    }

    #[test]
    fn roundtrip() {
        let l = layout();
        let mut buf = vec![0u8; l.slot_bytes as usize];
        let feats: Vec<u8> = (0..16).collect();
        encode_slot(&l, 7, 5, 42, 10, &feats, &[1, 2, 99], &mut buf);
        let v = decode_slot(&l, 7, &buf, "g").unwrap();
        assert_eq!((v.degree, v.original_id, v.overflow_first), (5, 42, 10));
        assert_eq!(v.features, &feats[..]);
        assert_eq!(v.inline_ids(&l, "g").unwrap(), vec![1, 2, 99]);
        assert_eq!(v.overflow_len(), 2);
        check_slot_padding(&l, &v, &buf, "g").unwrap();
    }

    #[test]
    fn a_checked_slot_may_be_trimmed_to_its_used_bytes_and_no_shorter() {
        let l = layout();
        let mut buf = vec![0u8; l.slot_bytes as usize];
        encode_slot(&l, 7, 5, 42, 10, &(0..16).collect::<Vec<u8>>(), &[1, 2, 99], &mut buf);
        let used = used_slot_bytes(&l, 5);
        assert_eq!(used, l.inline_ids_offset() as usize + 3 * 4);
        let v = decode_checked_slot(&l, 7, &buf[..used], "g").unwrap();
        assert_eq!((v.degree, v.inline_ids(&l, "g").unwrap()), (5, vec![1, 2, 99]));
        for bad in [used - 1, used + 1, l.inline_ids_offset() as usize - 1] {
            assert!(
                matches!(decode_checked_slot(&l, 7, &buf[..bad], "g"), Err(FormatError::Truncated { .. })),
                "{bad}"
            );
        }
        // A slot read off the disk must be whole.
        assert!(matches!(decode_slot(&l, 7, &buf[..used], "g"), Err(FormatError::Truncated { .. })));
    }

    #[test]
    fn typed_slot_roundtrip_and_counts_checked() {
        let l = layout().with_rel_counts("g", 3, false).unwrap();
        assert_eq!((layout().slot_bytes, l.slot_bytes), (56, 64), "24 + 12 counts + 16 row + 12 ids, to 8");
        let mut buf = vec![0u8; l.slot_bytes as usize];
        let feats: Vec<u8> = (0..16).collect();
        encode_typed_slot(&l, 7, 5, 7, 10, &[2, 0, 3], &[], &feats, &[1, 2, 99], &mut buf);
        let v = decode_slot(&l, 7, &buf, "g").unwrap();
        assert_eq!((0..4).map(|j| v.rel_count(j)).collect::<Vec<_>>(), vec![2, 0, 3, 0]);
        assert_eq!(v.features, &feats[..]);
        assert_eq!(v.inline_ids(&l, "g").unwrap(), vec![1, 2, 99]);
        assert_eq!(v.edge_base(0), None, "version 3 slots have no edge bases");
        check_slot_padding(&l, &v, &buf, "g").unwrap();
        // Counts that do not add up to the degree are refused, CRC or not.
        let mut bad = buf.clone();
        bad[24..28].copy_from_slice(&9u32.to_le_bytes());
        let e = decode_checked_slot(&l, 7, &bad, "g").unwrap_err().to_string();
        assert!(e.contains("sum of relation counts = 12") && e.contains("== degree 5"), "{e}");
        // A homogeneous slot's one relation is its degree.
        let h = layout();
        encode_slot(&h, 7, 5, 42, 10, &feats, &[1, 2, 99], &mut vec![0u8; h.slot_bytes as usize]);
        let mut hb = vec![0u8; h.slot_bytes as usize];
        encode_slot(&h, 7, 5, 42, 10, &feats, &[1, 2, 99], &mut hb);
        let hv = decode_slot(&h, 7, &hb, "g").unwrap();
        assert_eq!((hv.rel_count(0), hv.rel_count(1)), (5, 0));
    }

    #[test]
    fn typed_slot_edge_bases_roundtrip_and_are_bound_checked() {
        let l = layout().with_rel_counts("g", 3, true).unwrap();
        assert_eq!(l.format_version(), 1, "no dataset id in this layout");
        assert_eq!(l.edge_bases_offset(), 40, "24 + 12 counts, to 8");
        assert_eq!(l.slot_fixed_bytes(), 64);
        assert_eq!(l.slot_bytes, 96, "64 + 16 row + 12 ids, to 8");
        let mut buf = vec![0u8; l.slot_bytes as usize];
        let feats: Vec<u8> = (0..16).collect();
        encode_typed_slot(&l, 7, 5, 7, 10, &[2, 0, 3], &[17, 0, 997], &feats, &[1, 2, 99], &mut buf);
        let v = decode_slot(&l, 7, &buf, "g").unwrap();
        assert_eq!((0..3).map(|j| v.edge_base(j)).collect::<Vec<_>>(), vec![Some(17), Some(0), Some(997)]);
        assert_eq!(v.features, &feats[..]);
        assert_eq!(v.inline_ids(&l, "g").unwrap(), vec![1, 2, 99]);
        check_slot_padding(&l, &v, &buf, "g").unwrap();
        // A base whose relation would end past num_edges (1000) is refused
        // by name and position, CRC or not.
        let mut bad = buf.clone();
        bad[56..64].copy_from_slice(&998u64.to_le_bytes());
        let e = decode_checked_slot(&l, 7, &bad, "g").unwrap_err().to_string();
        assert!(e.contains("edge base = 998") && e.contains("relation count 3"), "{e}");
        assert!(e.contains(&(l.slot_offset(7) + 56).to_string()), "{e}");
    }

    #[test]
    fn checked_slot_skips_only_the_crc() {
        // The decoder for bytes checked before (the cache's static set):
        // a stale CRC no longer refuses the slot, but every field that
        // addresses something is still bound-checked.
        let l = layout();
        let mut buf = vec![0u8; l.slot_bytes as usize];
        encode_slot(&l, 7, 5, 42, 10, &[0u8; 16], &[1, 2, 99], &mut buf);
        buf[0] ^= 1;
        assert!(matches!(decode_slot(&l, 7, &buf, "g"), Err(FormatError::Checksum { .. })));
        let v = decode_checked_slot(&l, 7, &buf, "g").unwrap();
        assert_eq!((v.degree, v.original_id, v.overflow_first), (5, 42, 10));
        for (at, value) in [(4usize, u64::from(u32::MAX)), (8, 100), (16, 49)] {
            let mut bad = buf.clone();
            let w = if at == 4 { 4 } else { 8 };
            bad[at..at + w].copy_from_slice(&value.to_le_bytes()[..w]);
            let e = decode_checked_slot(&l, 7, &bad, "g").unwrap_err().to_string();
            assert!(e.contains("g") && e.contains(&value.to_string()), "{e}");
        }
        assert!(decode_checked_slot(&l, 7, &buf[1..], "g").is_err(), "a short slot is refused");
        assert!(decode_checked_slot(&l, 100, &buf, "g").is_err(), "a node beyond the graph is refused");
    }

    #[test]
    fn every_single_bit_flip_is_caught() {
        // Proves that any one-bit corruption of a slot yields an error, never a
        // wrong answer: flip each bit in turn and decode.
        let l = layout();
        let mut buf = vec![0u8; l.slot_bytes as usize];
        encode_slot(&l, 3, 2, 9, 0, &[0u8; 16], &[4, 5], &mut buf);
        for bit in 0..buf.len() * 8 {
            let mut b = buf.clone();
            b[bit / 8] ^= 1 << (bit % 8);
            assert!(decode_slot(&l, 3, &b, "g").is_err(), "bit {bit} not caught");
        }
        // The same bytes at another node id (a swapped slot) are refused.
        assert!(matches!(decode_slot(&l, 4, &buf, "g"), Err(FormatError::Checksum { .. })));
    }

    #[test]
    fn slot_of_another_dataset_is_refused() {
        // Format v2: a slot written for dataset A, read at the same position of dataset B
        // (same layout, other id), fails its checksum with the file and the slot's offset.
        let a = layout().with_dataset_id(Some(11));
        let b = layout().with_dataset_id(Some(12));
        let mut buf = vec![0u8; a.slot_bytes as usize];
        encode_slot(&a, 5, 2, 5, 0, &[0u8; 16], &[1, 2], &mut buf);
        assert!(decode_slot(&a, 5, &buf, "g").is_ok());
        let e = decode_slot(&b, 5, &buf, "g").unwrap_err();
        assert!(matches!(e, FormatError::Checksum { offset, .. } if offset == b.slot_offset(5)), "{e}");
        // ... and so does a version-1 slot (no id) read as a version-2 dataset's.
        let v1 = layout();
        encode_slot(&v1, 5, 2, 5, 0, &[0u8; 16], &[1, 2], &mut buf);
        assert!(decode_slot(&v1, 5, &buf, "g").is_ok());
        assert!(decode_slot(&a, 5, &buf, "g").is_err());
    }

    #[test]
    fn bounds_checked_even_with_valid_crc() {
        // A hostile file can carry a correct checksum; bounds must still hold.
        let l = layout();
        let mut buf = vec![0u8; l.slot_bytes as usize];
        encode_slot(&l, 1, 3, 200, 0, &[0u8; 16], &[1, 2, 3], &mut buf);
        let e = decode_slot(&l, 1, &buf, "g").unwrap_err().to_string();
        assert!(e.contains("original id = 200") && e.contains("< num_nodes 100"), "{e}");
        encode_slot(&l, 1, 10, 0, 45, &[0u8; 16], &[1, 2, 3], &mut buf);
        let e = decode_slot(&l, 1, &buf, "g").unwrap_err().to_string();
        assert!(e.contains("overflow range end = 52"), "{e}");
        encode_slot(&l, 1, 2, 0, 0, &[0u8; 16], &[1, 500], &mut buf);
        let v = decode_slot(&l, 1, &buf, "g").unwrap();
        let e = v.inline_ids(&l, "g").unwrap_err().to_string();
        assert!(e.contains("neighbor id = 500"), "{e}");
    }
}

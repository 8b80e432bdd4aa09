//! Node slots of `graph.fg`: `decode_slot` (whole slot, CRC checked),
//! `decode_checked_slot` (CRC skipped; whole or trimmed to its used bytes),
//! typed slots (per-relation counts), then every inline id and the padding
//! check `verify` runs. The layout comes from the front of the input
//! ([`draw_layout`]); with the fix-up byte set the slot is resized to the
//! layout's slot size and its CRC recomputed, so the bound checks behind
//! the CRC are reached. An accepted slot must satisfy its invariants.
#![no_main]
use flashgnn_format::slot::{check_slot_padding, decode_checked_slot, decode_slot, used_slot_bytes};
use flashgnn_fuzz::{draw_layout, fix_crc, Draw};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut d = Draw::new(data);
    let Some(l) = draw_layout(&mut d) else { return };
    let fix = fix_crc(&mut d);
    let mode = d.u8();
    // Mostly a node inside the graph, sometimes one past it.
    let node = d.u32() as u64 % (l.num_nodes + 1);
    let mut bytes = d.rest.to_vec();
    if fix && node < l.num_nodes {
        bytes.resize(l.slot_bytes as usize, 0);
        let c = l.crc(node, &bytes[4..]);
        bytes[0..4].copy_from_slice(&c.to_le_bytes());
    }
    let view = match mode % 3 {
        0 => decode_slot(&l, node, &bytes, "graph.fg"),
        1 => decode_checked_slot(&l, node, &bytes, "graph.fg"),
        _ => {
            // The hot set's trimmed copy: cut to the used bytes its degree implies.
            let degree = bytes.get(4..8).map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap()));
            let used = used_slot_bytes(&l, degree).min(bytes.len());
            decode_checked_slot(&l, node, &bytes[..used], "graph.fg")
        }
    };
    let Ok(v) = view else { return };
    assert!(node < l.num_nodes && v.original_id < l.num_nodes && v.degree as u64 <= l.num_edges);
    assert!(v.inline_len() <= l.inline_cap as usize && v.inline_len() <= v.degree as usize);
    if v.overflow_len() > 0 {
        assert!(v.overflow_first + v.overflow_len() <= l.overflow_entries);
    }
    let rel: u64 = (0..=l.rel_counts as usize).map(|j| v.rel_count(j) as u64).sum();
    assert_eq!(rel, v.degree as u64, "relation counts add up to the degree");
    if let Ok(ids) = v.inline_ids(&l, "graph.fg") {
        assert!(ids.iter().all(|&i| i < l.num_nodes));
    }
    let _ = check_slot_padding(&l, &v, &bytes, "graph.fg");
});

//! Sequential base scan (used by compaction) and the read-only log check.
//!
//! - `flashgnn_store::scan` hands over, for every layout (inline/separate
//!   features x no relabelling/degree relabelling, with overflow pages) and
//!   for chunks from one page to the default, exactly what the point reads
//!   `Dataset::neighbors` / `feature_row` return for every node.
//! - Compaction of a relabelled base with separate features (rows placed by
//!   position) keeps every node's neighbors and embedding.
//! - `verify_log` counts frames and ops, reports a torn tail without cutting
//!   it, lists leftovers without removing them (no byte under `mut/`
//!   changes), and refuses a damaged frame in the middle, a bad free list
//!   and a log whose ops do not apply, naming file, byte offset and sequence.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use flashgnn_build::{FeatureLayout, Progress, Reorder};
use flashgnn_datagen::RmatOptions;
use flashgnn_mutate::wal::{self, WAL_HEADER_BYTES};
use flashgnn_mutate::{verify_log, MutError, MutableGraph};
use flashgnn_store::{scan, Dataset, Op, StoreError};
use flashgnn_testing::{assert_mentions, build_with, open_mutable, rmat_input, tempdir, tree_bytes};

/// R-MAT scale 8 (256 nodes), 32 edges per node, 8 float32 features; 512 B
/// pages so hubs spill into overflow pages.
fn dataset(dir: &Path, reorder: Reorder, layout: FeatureLayout) -> PathBuf {
    let raw = dir.join("raw");
    if !raw.exists() {
        let o = RmatOptions { scale: 8, edge_factor: 32, dim: 8, classes: 3, seed: 9, ..Default::default() };
        rmat_input(dir, "raw", &o);
    }
    build_with(&raw, &dir.join(format!("ds-{reorder:?}-{layout:?}")), |b| {
        b.symmetrize = true;
        b.dedup = true;
        b.reorder = reorder;
        b.feature_layout = layout;
        b.page_size = 512;
    })
}

#[test]
fn scan_equals_point_reads_for_every_layout() {
    let d = tempdir();
    for reorder in [Reorder::None, Reorder::Degree] {
        for layout in [FeatureLayout::Inline, FeatureLayout::Separate] {
            let ds = Dataset::open(dataset(d.path(), reorder, layout)).unwrap();
            assert!(ds.layout().overflow_entries > 0, "the fixture must spill into overflow pages");
            for chunk in [1, 3 * 512, flashgnn_store::SCAN_CHUNK_BYTES] {
                let mut seen = 0u64;
                scan(&ds, chunk, |n| -> Result<(), StoreError> {
                    assert_eq!(ds.internal_id(n.original as i64)?, n.internal);
                    assert_eq!(n.neighbors, ds.neighbors(n.original as i64)?.as_slice(), "neighbors of {}", n.original);
                    let mut row = Vec::new();
                    ds.feature_row(n.original as i64, &mut row)?;
                    assert_eq!(n.row, row.as_slice(), "row of {}", n.original);
                    assert_eq!(n.internal, seen, "internal order");
                    seen += 1;
                    Ok(())
                })
                .unwrap();
                assert_eq!(seen, ds.num_nodes(), "{reorder:?} {layout:?} chunk {chunk}");
            }
        }
    }
}

#[test]
fn scan_refuses_a_damaged_slot_and_overflow_page() {
    let d = tempdir();
    let p = dataset(d.path(), Reorder::None, FeatureLayout::Inline);
    let ds = Dataset::open(&p).unwrap();
    let (ps, of) = (ds.layout().page_size as u64, ds.layout().overflow_entries);
    drop(ds);
    for (file, at) in [("graph.fg", ps + 40), ("overflow.fg", ps + 4)] {
        let path = p.join(file);
        let orig = std::fs::read(&path).unwrap();
        let mut b = orig.clone();
        b[at as usize] ^= 0x10;
        std::fs::write(&path, &b).unwrap();
        let ds = Dataset::open(&p).unwrap();
        let e = scan(&ds, 4096, |_| Ok::<(), StoreError>(())).unwrap_err().to_string();
        assert!(e.contains(file), "{file} ({of} overflow entries): {e}");
        std::fs::write(&path, &orig).unwrap();
    }
}

/// Every node's (sorted neighbors, embedding bytes) or None when deleted.
fn state(g: &MutableGraph) -> BTreeMap<u64, Option<(BTreeSet<u64>, Vec<u8>)>> {
    (0..g.num_nodes())
        .map(|v| {
            let s = g.get_neighbors(v as i64).ok().map(|n| (n.into_iter().collect(), g.get_embed(v as i64).unwrap()));
            (v, s)
        })
        .collect()
}

fn mutate(g: &MutableGraph, seed: u64) {
    let dim = g.feature_dim() as usize;
    let e = |k: u64| (0..dim).map(|i| (k * 31 + i as u64) as f64 / 4.0).collect::<Vec<_>>();
    for i in 0..40u64 {
        let (a, b) = ((i * 37 + seed) % 256, (i * 101 + seed * 7) % 256);
        if i % 7 == 3 {
            let _ = g.delete_vertex(a);
        } else if i % 5 == 1 {
            g.add_vertex(&e(i)).unwrap();
        } else if i % 5 == 2 {
            let _ = g.update_embed(a, &e(i + 100));
        } else {
            let _ = g.add_edge(a, b);
        }
    }
}

#[test]
fn compaction_of_a_relabelled_separate_base_keeps_every_node() {
    let d = tempdir();
    for (reorder, layout) in [(Reorder::Degree, FeatureLayout::Separate), (Reorder::Degree, FeatureLayout::Inline)] {
        let p = dataset(d.path(), reorder, layout);
        let g = open_mutable(&p);
        mutate(&g, 1);
        let before = state(&g);
        let r = g.compact(&Progress::new()).unwrap();
        assert_eq!(r.folded_frames, g.seq());
        assert!(r.folded_ops >= r.folded_frames && r.bytes > 0);
        assert_eq!(state(&g), before, "{reorder:?} {layout:?}: after compaction");
        mutate(&g, 2);
        let before = state(&g);
        g.compact(&Progress::new()).unwrap();
        drop(g);
        assert_eq!(state(&open_mutable(&p)), before, "{reorder:?} {layout:?}: second compaction, reopened");
    }
}

#[test]
fn verify_log_reports_and_refuses_without_changing_anything() {
    let d = tempdir();
    let p = dataset(d.path(), Reorder::None, FeatureLayout::Inline);
    assert!(verify_log(&p).unwrap().is_none(), "no mut/: nothing to check");
    let g = open_mutable(&p);
    g.add_edge(1, 2).unwrap();
    g.apply(vec![Op::AddEdge { dst: 3, src: 4 }, Op::DeleteVertex { vid: 5 }]).unwrap();
    g.compact(&Progress::new()).unwrap();
    g.add_edge(6, 7).unwrap();
    g.add_edge(8, 9).unwrap();
    let seq = g.seq();
    drop(g);
    let r = verify_log(&p).unwrap().unwrap();
    assert_eq!((r.generation, r.base_seq, r.frames, r.ops, r.last_seq), (1, 2, 2, 2, seq));
    assert_eq!((r.torn_bytes, r.free_ids), (0, 1));
    assert!(r.leftovers.is_empty());

    // A torn tail and a leftover are reported, not repaired.
    let wpath = p.join("mut/wal-1.log");
    let good = std::fs::read(&wpath).unwrap();
    let mut torn = good.clone();
    torn.extend_from_slice(&[7u8; 11]);
    std::fs::write(&wpath, &torn).unwrap();
    std::fs::create_dir(p.join("mut/.compact-2.input")).unwrap();
    let before = tree_bytes(&p.join("mut"));
    let r = verify_log(&p).unwrap().unwrap();
    assert_eq!((r.frames, r.torn_bytes), (2, 11));
    assert_eq!(r.leftovers, vec![".compact-2.input".to_string()]);
    assert_eq!(tree_bytes(&p.join("mut")), before, "verify_log must not change any file");
    std::fs::remove_dir(p.join("mut/.compact-2.input")).unwrap();

    // A damaged first frame followed by a valid one: corruption in the middle.
    let mut mid = good.clone();
    mid[WAL_HEADER_BYTES as usize + 20] ^= 0xff;
    std::fs::write(&wpath, &mid).unwrap();
    let e = verify_log(&p).unwrap_err();
    let m = e.to_string();
    assert!(matches!(e, MutError::Corrupt(_)), "{m}");
    assert_mentions(&m, &["wal-1.log", &format!("byte offset {WAL_HEADER_BYTES}"), "seq 3"]);

    // A frame with a good CRC whose op does not apply (edge to a node beyond the graph).
    let mut bad = good[..WAL_HEADER_BYTES as usize].to_vec(); // generation 1, base_seq 2, bound to gen-1
    wal::encode_frame(3, &[Op::AddEdge { dst: 1, src: 1 << 30 }], &mut bad).unwrap();
    std::fs::write(&wpath, &bad).unwrap();
    let m = verify_log(&p).unwrap_err().to_string();
    assert_mentions(&m, &["wal-1.log", "seq 3", "does not apply"]);
    std::fs::write(&wpath, &good).unwrap();

    // A damaged free list.
    let fpath = p.join("mut/free-1.bin");
    let mut f = std::fs::read(&fpath).unwrap();
    f[16] ^= 1;
    std::fs::write(&fpath, &f).unwrap();
    let m = verify_log(&p).unwrap_err().to_string();
    assert_mentions(&m, &["free-1.bin", "crc32c"]);
}

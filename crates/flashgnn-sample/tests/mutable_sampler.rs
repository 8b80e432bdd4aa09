//! The sampler over a mutable-graph snapshot (base + delta).
//!
//! - With an empty delta, batches are identical to the base alone.
//! - After random mutations (new vertices, deleted vertices, added and
//!   deleted edges, new embeddings), on every layout and with and without
//!   `--reorder`: a full-neighborhood batch (fanout -1) over the snapshot has
//!   the same node set, the same edge set and the same feature row per node
//!   as one over the generation compacted from that snapshot (a dataset built
//!   from scratch with the final edges); with partial fanouts every sampled
//!   edge exists in the snapshot and every feature row equals `get_embed`;
//!   new vertices carry label -1; random walks stay on snapshot edges.

use std::collections::BTreeSet;
use std::path::Path;

use flashgnn_build::{FeatureLayout, Progress, Reorder};
use flashgnn_io::engine::{EngineConfig, EngineKind};
use flashgnn_mutate::MutableGraph;
use flashgnn_sample::{Batch, NeighborSampler, SamplerConfig};
use flashgnn_testing::{open_mutable, rmat_dataset, sampler, tempdir};

/// Edges of a batch as (neighbor, target) original-id pairs.
fn edges(b: &Batch) -> BTreeSet<(i64, i64)> {
    b.row().iter().zip(b.col()).map(|(&r, &c)| (b.n_id[r as usize], b.n_id[c as usize])).collect()
}

/// Feature row of each node of a batch, keyed by original id.
fn rows(b: &Batch, rb: usize) -> std::collections::BTreeMap<i64, Vec<u8>> {
    b.n_id.iter().enumerate().map(|(i, &v)| (v, b.x[i * rb..(i + 1) * rb].to_vec())).collect()
}

fn mutate(g: &MutableGraph) -> Vec<u64> {
    let n = g.num_nodes();
    let mut new = Vec::new();
    for i in 0..6u64 {
        let v = g.add_vertex(&[i as f64, 1.0, -2.0, 0.5]).unwrap();
        g.add_edge(v, (i * 17) % n).unwrap();
        g.add_edge((i * 29 + 3) % n, v).unwrap();
        new.push(v);
    }
    g.add_edge(new[0], new[1]).unwrap();
    for v in [11u64, 40, 77] {
        g.delete_vertex(v).unwrap();
    }
    for v in 0..30u64 {
        let nb = g.get_neighbors(v as i64).unwrap_or_default();
        if let Some(&u) = nb.first() {
            g.delete_edge(v, u).unwrap();
        }
        if v % 3 == 0 {
            g.update_embed(v, &[9.0, 8.0, 7.0, v as f64]).unwrap();
        }
    }
    new
}

#[test]
fn empty_delta_gives_identical_batches() {
    let d = tempdir();
    let p = rmat_dataset(d.path(), "ds", FeatureLayout::Auto, Reorder::Degree, 4);
    let g = open_mutable(&p);
    let mut a = sampler(&p, &[5, 3], EngineKind::Pread, EngineConfig::default(), true);
    let mut b = sampler(&p, &[5, 3], EngineKind::Pread, EngineConfig::default(), true);
    b.set_snapshot(Some(g.snapshot())).unwrap();
    for s in 0..5u64 {
        let seeds: Vec<i64> = (0..16).map(|i| (i * 37 + s as i64 * 5) % 2048).collect();
        assert_eq!(a.sample(&seeds, s).unwrap(), b.sample(&seeds, s).unwrap());
    }
}

#[test]
fn snapshot_batches_equal_the_compacted_generation() {
    for (name, layout, reorder) in [
        ("inline", FeatureLayout::Inline, Reorder::None),
        ("separate-reordered", FeatureLayout::Separate, Reorder::Degree),
    ] {
        let d = tempdir();
        let p = rmat_dataset(d.path(), name, layout, reorder, 4);
        let g = open_mutable(&p);
        let new = mutate(&g);
        let snap = g.snapshot();
        let mut live = sampler(&p, &[-1, -1], EngineKind::Pread, EngineConfig::default(), true);
        live.set_snapshot(Some(snap.clone())).unwrap();
        let seeds: Vec<i64> = vec![new[0] as i64, new[3] as i64, 0, 5, 12, 1000, 2047];
        let a = live.sample(&seeds, 7).unwrap();
        // Deleted vertices are never reached; new ones are, with label -1.
        assert!(a.n_id.iter().all(|&v| ![11, 40, 77].contains(&v)), "{name}");
        for (i, &v) in a.n_id.iter().enumerate() {
            if new.contains(&(v as u64)) {
                assert_eq!(a.y[i], -1, "{name}: label of new vertex {v}");
            }
        }
        let rb = 16;
        for (v, r) in rows(&a, rb) {
            assert_eq!(r, g.get_embed(v).unwrap(), "{name}: features of {v}");
        }
        for (u, v) in edges(&a) {
            assert!(g.get_neighbors(v).unwrap().contains(&(u as u64)), "{name}: edge {u}->{v} not in the graph");
        }
        // The same state built from scratch by compaction.
        g.compact(&Progress::new()).unwrap();
        let gen = g.snapshot();
        let mut rebuilt = sampler(gen.base.root(), &[-1, -1], EngineKind::Pread, EngineConfig::default(), true);
        let b = rebuilt.sample(&seeds, 7).unwrap();
        let set = |b: &Batch| b.n_id.iter().copied().collect::<BTreeSet<i64>>();
        assert_eq!(set(&a), set(&b), "{name}: node sets");
        assert_eq!(edges(&a), edges(&b), "{name}: edge sets");
        assert_eq!(rows(&a, rb), rows(&b, rb), "{name}: feature rows");
        let (ya, yb): (BTreeSet<_>, BTreeSet<_>) =
            (a.n_id.iter().zip(&a.y).collect(), b.n_id.iter().zip(&b.y).collect());
        assert_eq!(ya, yb, "{name}: labels");
        // The old snapshot still reads the old generation consistently.
        let c = live.sample(&seeds, 7).unwrap();
        assert_eq!(c, a, "{name}: an old snapshot is immutable");
    }
}

#[test]
fn partial_fanouts_and_walks_stay_on_snapshot_edges() {
    let d = tempdir();
    let p = rmat_dataset(d.path(), "ds", FeatureLayout::Auto, Reorder::None, 4);
    let g = open_mutable(&p);
    let new = mutate(&g);
    let mut s = sampler(&p, &[3, 2], EngineKind::Pread, EngineConfig::default(), true);
    s.set_snapshot(Some(g.snapshot())).unwrap();
    for seed in 0..10u64 {
        let seeds: Vec<i64> = vec![new[(seed % 6) as usize] as i64, (seed * 101 % 2048) as i64, 3];
        let b = s.sample(&seeds, seed).unwrap();
        for (u, v) in edges(&b) {
            assert!(g.get_neighbors(v).unwrap().contains(&(u as u64)), "edge {u}->{v}");
        }
        for (v, r) in rows(&b, 16) {
            assert_eq!(r, g.get_embed(v).unwrap(), "features of {v}");
        }
        let w = s.random_walk(&seeds, 4, seed).unwrap();
        for (u, v) in edges(&w) {
            assert!(g.get_neighbors(v).unwrap().contains(&(u as u64)), "walk edge {u}->{v}");
        }
    }
    let n = g.num_nodes() as i64;
    let e = s.sample(&[n], 0).unwrap_err().to_string();
    assert!(e.contains(&format!("seed node id {n} out of range [0, {n})")), "{e}");
    // A snapshot of another base is refused.
    let d2 = tempdir();
    let p2 = rmat_dataset(d2.path(), "other", FeatureLayout::Auto, Reorder::None, 4);
    let e = sampler(&p2, &[2], EngineKind::Pread, EngineConfig::default(), true)
        .set_snapshot(Some(g.snapshot()))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("open a sampler on the snapshot's base"), "{e}");
}

#[test]
fn a_cache_is_used_only_on_the_generation_it_was_built_for() {
    use flashgnn_sample::{DatasetId, PageCache, Policy};
    use std::sync::Arc;
    let d = tempdir();
    let p = rmat_dataset(d.path(), "ds", FeatureLayout::Inline, Reorder::None, 4);
    let g = open_mutable(&p);
    // A cache holding every page of generation 0.
    let cache_of = |root: &Path| {
        let statics =
            sampler(root, &[-1], EngineKind::Pread, EngineConfig::default(), true).hot_set_by_degree(64 << 20).unwrap();
        Arc::new(PageCache::new(DatasetId::of_path(root).unwrap(), 64 << 20, Policy::S3Fifo, statics))
    };
    let gen0 = cache_of(&p);
    g.update_embed(444, &[7.0; 4]).unwrap();
    g.compact(&Progress::new()).unwrap();
    let snap = g.snapshot();
    let root1 = snap.base.root().to_path_buf();
    assert!(root1.ends_with("mut/gen-1"), "{}", root1.display());
    let open = |cache| {
        let cfg = SamplerConfig { engine: EngineKind::Pread, cache, ..Default::default() };
        let mut s = NeighborSampler::open(&root1, &[-1], &cfg).unwrap();
        s.set_snapshot(Some(snap.clone())).unwrap();
        s
    };
    let want = open(None).sample(&[444, 5], 1).unwrap();
    assert_eq!(rows(&want, 16)[&444], g.get_embed(444).unwrap());
    // Generation 0's cache on generation 1: not used (its pages hold the old row).
    let mut stale = open(Some(gen0.clone()));
    assert!(!stale.has_cache());
    assert_eq!(stale.sample(&[444, 5], 1).unwrap(), want);
    // A cache built on generation 1 is used, and serves the updated row.
    let gen1 = cache_of(&root1);
    let mut cached = open(Some(gen1.clone()));
    assert!(cached.has_cache());
    assert_eq!(cached.sample(&[444, 5], 1).unwrap(), want);
    assert!(cached.telemetry.cache_static_hits > 0);
    // Generation 0 itself still takes generation 0's cache.
    let cfg = SamplerConfig { engine: EngineKind::Pread, cache: Some(gen0), ..Default::default() };
    assert!(NeighborSampler::open(&p, &[-1], &cfg).unwrap().has_cache());
}

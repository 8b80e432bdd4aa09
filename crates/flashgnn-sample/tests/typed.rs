//! Proves typed sampling on a small typed dataset written with the format
//! crate's encoders (3 node types, 4 edge types including one from a type to
//! itself, one type without features, 512-byte pages and 3 inline neighbors
//! so that lists overflow): with -1 fanouts a batch's per-type node sets and
//! per-edge-type edge sets equal a brute-force BFS over the input adjacency;
//! finite fanouts draw exactly min(fanout, count) per relation; rows and
//! labels are the written ones; batches are deterministic by seed and
//! identical on every engine and through the cross-batch cache.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use flashgnn_io::engine::EngineKind;
use flashgnn_sample::{Batch, DatasetId, NeighborSampler, PageCache, Policy, SamplerConfig};
use flashgnn_testing::{
    assert_mentions, tempdir, typed_feature, typed_label, write_typed_dataset, TypedEdges, TypedNodes, ENGINES,
};

const COUNTS: [u64; 3] = [40, 25, 8];
const TYPES: [&str; 3] = ["paper", "author", "fos"];
// (src, rel, dst) as type indices.
const EDGE_TYPES: [(usize, &str, usize); 4] =
    [(0, "cites", 0), (1, "writes", 0), (0, "rev_writes", 1), (2, "topic", 0)];

/// Deterministic edges: distinct per edge type, a few hubs that overflow.
fn edges() -> Vec<Vec<(u64, u64)>> {
    let mut x = 12345u64;
    let mut next = move |n: u64| {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (x >> 33) % n
    };
    EDGE_TYPES
        .iter()
        .enumerate()
        .map(|(e, &(s, _, d))| {
            let mut set = BTreeSet::new();
            for _ in 0..(COUNTS[d] * 2) {
                set.insert((next(COUNTS[s]), next(COUNTS[d])));
            }
            // Hubs: destination 0 and 1 of every type get many sources.
            for a in 0..COUNTS[s].min(9 + e as u64) {
                set.insert((a, e as u64 % 2));
            }
            set.into_iter().collect()
        })
        .collect()
}

fn write(dir: &Path) -> std::path::PathBuf {
    let nodes = vec![
        TypedNodes { name: "paper".into(), count: COUNTS[0], dim: Some(6), classes: Some(3) },
        TypedNodes { name: "author".into(), count: COUNTS[1], dim: Some(3), classes: None },
        TypedNodes { name: "fos".into(), count: COUNTS[2], dim: None, classes: None },
    ];
    let es = edges();
    let edges: Vec<TypedEdges> = EDGE_TYPES
        .iter()
        .zip(es)
        .map(|(&(s, r, d), edges)| TypedEdges { src: TYPES[s].into(), rel: r.into(), dst: TYPES[d].into(), edges })
        .collect();
    let out = dir.join("typed");
    write_typed_dataset(&out, &nodes, &edges, 512, 3).unwrap();
    out
}

fn open(path: &Path, fanouts: &[i32], rel: Option<Vec<Vec<i32>>>, kind: EngineKind) -> NeighborSampler {
    let cfg = SamplerConfig { engine: kind, rel_fanouts: rel, ..Default::default() };
    NeighborSampler::open(path, fanouts, &cfg).unwrap()
}

fn offsets() -> Vec<u64> {
    let mut o = vec![0];
    for c in COUNTS {
        o.push(o.last().unwrap() + c);
    }
    o
}

/// Per node type the set of local ids, per edge type the multiset of (src
/// local, dst local) of a batch.
type Sets = (Vec<BTreeSet<i64>>, Vec<Vec<(i64, i64)>>);

fn sets(b: &Batch) -> Sets {
    let t = b.typed.as_ref().expect("a typed batch");
    let nodes = t.node_types.iter().map(|n| n.n_id.iter().copied().collect()).collect();
    let edges = t
        .edge_types
        .iter()
        .enumerate()
        .map(|(e, et)| {
            let (s, d) = (EDGE_TYPES[e].0, EDGE_TYPES[e].2);
            let m = et.num_edges();
            let mut v: Vec<(i64, i64)> = (0..m)
                .map(|i| {
                    (
                        t.node_types[s].n_id[et.edge_index[i] as usize],
                        t.node_types[d].n_id[et.edge_index[m + i] as usize],
                    )
                })
                .collect();
            v.sort_unstable();
            v
        })
        .collect();
    (nodes, edges)
}

/// Brute force: BFS from `seeds` (paper local ids) over incoming edges, `k`
/// hops, every neighbor.
fn bfs(seeds: &[i64], k: usize) -> Sets {
    let es = edges();
    let mut level: BTreeMap<(usize, i64), usize> = seeds.iter().map(|&s| ((0, s), 0)).collect();
    let mut frontier: Vec<(usize, i64)> = level.keys().copied().collect();
    let mut out_edges = vec![Vec::new(); 4];
    for h in 0..k {
        let mut next = Vec::new();
        for &(t, v) in &frontier {
            for (e, &(s, _, d)) in EDGE_TYPES.iter().enumerate() {
                if d != t {
                    continue;
                }
                for &(a, b) in &es[e] {
                    if b as i64 == v {
                        out_edges[e].push((a as i64, v));
                        if let std::collections::btree_map::Entry::Vacant(x) = level.entry((s, a as i64)) {
                            x.insert(h + 1);
                            next.push((s, a as i64));
                        }
                    }
                }
            }
        }
        frontier = next;
    }
    let mut nodes = vec![BTreeSet::new(); 3];
    for &(t, v) in level.keys() {
        nodes[t].insert(v);
    }
    for e in out_edges.iter_mut() {
        e.sort_unstable();
    }
    (nodes, out_edges)
}

#[test]
fn all_neighbors_equal_brute_force_bfs_and_rows_labels_are_the_written_ones() {
    let tmp = tempdir();
    let path = write(tmp.path());
    let o = offsets();
    let seeds_local: Vec<i64> = vec![0, 1, 7, 13, 39];
    let seeds: Vec<i64> = seeds_local.iter().map(|&s| s + o[0] as i64).collect();
    for k in 1..=3 {
        let mut s = open(&path, &vec![-1; k], None, EngineKind::Pread);
        let b = s.sample(&seeds, 3).unwrap();
        assert_eq!(sets(&b), bfs(&seeds_local, k), "{k} hops");
        let t = b.typed.as_ref().unwrap();
        assert_eq!(t.input_type, 0);
        assert_eq!(&t.node_types[0].n_id[..seeds.len()], &seeds_local[..], "seeds first");
        assert_eq!(b.batch_size, seeds.len());
        for (ty, n) in t.node_types.iter().enumerate() {
            assert_eq!(n.num_sampled_nodes.len(), k + 1);
            assert_eq!(n.num_sampled_nodes.iter().sum::<i64>() as usize, n.n_id.len(), "type {ty}");
            let dim = [6u32, 3, 0][ty];
            assert_eq!(n.dim, dim);
            assert_eq!(n.x.len(), n.n_id.len() * dim as usize * 4, "type {ty}");
            for (r, &l) in n.n_id.iter().enumerate() {
                for kk in 0..dim {
                    let at = (r * dim as usize + kk as usize) * 4;
                    let got = f32::from_le_bytes(n.x[at..at + 4].try_into().unwrap());
                    assert_eq!(got, typed_feature(o[ty] + l as u64, kk), "type {ty} node {l}");
                }
            }
            if ty == 0 {
                let want: Vec<i64> = n.n_id.iter().map(|&l| typed_label(l as u64, 3)).collect();
                assert_eq!(n.y, want);
            } else {
                assert!(n.y.is_empty(), "type {ty} has no labels");
            }
        }
        for e in &t.edge_types {
            assert_eq!(e.num_sampled_edges.len(), k);
            assert_eq!(e.num_sampled_edges.iter().sum::<i64>() as usize, e.num_edges());
        }
        // Local ids of the batch are indices into n_id: every edge's ends exist.
        assert_eq!(s.telemetry.edges as usize, b.total_edges());
    }
}

#[test]
fn finite_fanouts_draw_min_of_fanout_and_count_per_relation() {
    let tmp = tempdir();
    let path = write(tmp.path());
    let es = edges();
    let rel = vec![vec![2, 1, 3, 0], vec![1, -1, 2, 4]];
    let mut s = open(&path, &[0, 0], Some(rel.clone()), EngineKind::Uring);
    let seeds: Vec<i64> = (0..40).collect();
    for seed in 0..5 {
        let b = s.sample(&seeds, seed).unwrap();
        let t = b.typed.as_ref().unwrap();
        // Level of every node from the batch (per type, by local position).
        let mut level: Vec<Vec<usize>> = t.node_types.iter().map(|n| vec![usize::MAX; n.n_id.len()]).collect();
        for (ty, n) in t.node_types.iter().enumerate() {
            let mut pos = 0;
            for (h, &c) in n.num_sampled_nodes.iter().enumerate() {
                for l in level[ty].iter_mut().skip(pos).take(c as usize) {
                    *l = h;
                }
                pos += c as usize;
            }
        }
        for (e, et) in t.edge_types.iter().enumerate() {
            let (sty, d) = (EDGE_TYPES[e].0, EDGE_TYPES[e].2);
            let m = et.num_edges();
            let mut per: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
            for i in 0..m {
                let src = t.node_types[sty].n_id[et.edge_index[i] as usize];
                per.entry(et.edge_index[m + i]).or_default().push(src);
            }
            for (pos, &l) in t.node_types[d].n_id.iter().enumerate() {
                let h = level[d][pos];
                if h >= 2 {
                    assert!(!per.contains_key(&(pos as i64)), "a last-hop node is not expanded");
                    continue;
                }
                let count = es[e].iter().filter(|&&(_, b)| b as i64 == l).count();
                let f = rel[h][e];
                let want = if f < 0 { count } else { count.min(f as usize) };
                let got = per.get(&(pos as i64)).map_or(Vec::new(), |v| v.clone());
                assert_eq!(got.len(), want, "edge type {e} node {l} hop {h} (count {count}, fanout {f})");
                let mut dedup = got.clone();
                dedup.sort_unstable();
                dedup.dedup();
                assert_eq!(dedup.len(), got.len(), "without replacement");
                for src in got {
                    assert!(es[e].contains(&(src as u64, l as u64)), "edge ({src}, {l}) of type {e} exists");
                }
            }
        }
        assert_eq!(b, s.sample(&seeds, seed).unwrap(), "deterministic by seed");
    }
    assert_ne!(s.sample(&seeds, 1).unwrap(), s.sample(&seeds, 2).unwrap(), "another seed draws otherwise");
}

#[test]
fn every_engine_and_the_cache_give_identical_batches() {
    let tmp = tempdir();
    let path = write(tmp.path());
    let rel = Some(vec![vec![2, 2, 2, 1], vec![3, 1, -1, 2]]);
    let plan: Vec<(Vec<i64>, u64)> =
        (0..4).map(|b| ((0..12).map(|i| (i * 7 + b * 5) % 40).collect(), b as u64)).collect();
    let want: Vec<Batch> = {
        let mut s = open(&path, &[2, 2], rel.clone(), EngineKind::Pread);
        plan.iter().map(|(ids, seed)| s.sample(ids, *seed).unwrap()).collect()
    };
    for kind in ENGINES {
        let mut s = open(&path, &[2, 2], rel.clone(), kind);
        for (j, (ids, seed)) in plan.iter().enumerate() {
            assert_eq!(s.sample(ids, *seed).unwrap(), want[j], "{kind:?} batch {j}");
        }
    }
    for hot in ["none", "degree"] {
        let statics = {
            let mut s = open(&path, &[2, 2], rel.clone(), EngineKind::Pread);
            if hot == "degree" {
                s.hot_set_by_degree(8 << 10).unwrap()
            } else {
                Default::default()
            }
        };
        let cache = Arc::new(PageCache::new(DatasetId::of_path(&path).unwrap(), 64 << 10, Policy::S3Fifo, statics));
        let cfg = SamplerConfig {
            engine: EngineKind::Uring,
            rel_fanouts: rel.clone(),
            cache: Some(cache),
            ..Default::default()
        };
        let mut s = NeighborSampler::open(&path, &[2, 2], &cfg).unwrap();
        for _epoch in 0..2 {
            for (j, (ids, seed)) in plan.iter().enumerate() {
                assert_eq!(s.sample(ids, *seed).unwrap(), want[j], "cache {hot} batch {j}");
            }
        }
        assert!(s.telemetry.cache_static_hits + s.telemetry.cache_dynamic_hits > 0, "cache {hot}: hits");
    }
}

#[test]
fn typed_requests_and_paths_not_taken_yet_are_refused_by_name() {
    let tmp = tempdir();
    let path = write(tmp.path());
    let mut s = open(&path, &[2], None, EngineKind::Pread);
    let e = s.sample(&[0, 45], 1).unwrap_err().to_string();
    assert_mentions(&e, &["seed node 45", "\"author\"", "\"paper\"", "one node type"]);
    let e = s.random_walk(&[0], 2, 1).unwrap_err().to_string();
    assert_mentions(&e, &["random walks", "typed"]);
    let e = s.gather_rows(&[0], flashgnn_sample::Gather { features: true, labels: false, degrees: true });
    assert_mentions(&e.unwrap_err().to_string(), &["gathering degrees", "typed"]);
    for (cfg, what) in [
        (SamplerConfig { free_features_only: true, ..Default::default() }, "free_features_only"),
        (SamplerConfig { degrees: true, ..Default::default() }, "degrees"),
        (SamplerConfig { rel_fanouts: Some(vec![vec![1, 2]]), ..Default::default() }, "4 edge types"),
        (SamplerConfig { rel_fanouts: Some(vec![vec![1; 4]; 2]), ..Default::default() }, "hop count"),
    ] {
        let e = NeighborSampler::open(&path, &[2], &cfg).err().expect(what).to_string();
        assert_mentions(&e, &[what]);
    }
}

#[test]
fn a_neighbor_outside_its_relations_source_type_is_refused_naming_where() {
    use flashgnn_format::slot::{decode_slot, encode_typed_slot};
    let tmp = tempdir();
    let path = write(tmp.path());
    let ds = flashgnn_store::Dataset::open(&path).unwrap();
    let l = ds.layout().clone();
    assert!(l.overflow_entries > 0, "some lists overflow");
    // Paper 0's first inline neighbor (relation cites: paper -> paper)
    // becomes author 5 (global 45), the slot re-sealed.
    let g = path.join("graph.fg");
    let mut bytes = std::fs::read(&g).unwrap();
    let at = l.slot_offset(0) as usize;
    let slot = bytes[at..at + l.slot_bytes as usize].to_vec();
    let v = decode_slot(&l, 0, &slot, "graph.fg").unwrap();
    assert!(v.rel_count(0) > 0);
    let mut ids = v.inline_ids(&l, "graph.fg").unwrap();
    ids[0] = 45;
    let counts: Vec<u32> = (0..l.rel_counts as usize).map(|j| v.rel_count(j)).collect();
    let bases: Vec<u64> = (0..l.rel_counts as usize).map(|j| v.edge_base(j).unwrap()).collect();
    let (deg, orig, first) = (v.degree, v.original_id, v.overflow_first);
    let out = &mut bytes[at..at + l.slot_bytes as usize];
    encode_typed_slot(&l, 0, deg, orig, first, &counts, &bases, &[], &ids, out);
    std::fs::write(&g, bytes).unwrap();
    let mut s = open(&path, &[-1], None, EngineKind::Pread);
    let e = s.sample(&[0], 1).unwrap_err().to_string();
    let off = (at + l.inline_ids_offset() as usize).to_string();
    assert_mentions(&e, &["graph.fg", &off, "neighbor id", "45", "[0, 40)", "(paper, cites, paper)"]);
}

#[test]
fn a_damaged_or_foreign_typed_row_is_refused_naming_file_and_offset() {
    let tmp = tempdir();
    let path = write(tmp.path());
    // Author 3's row (t1.features.fg): one flipped byte.
    let f = path.join("t1.features.fg");
    let mut bytes = std::fs::read(&f).unwrap();
    let ds = flashgnn_store::Dataset::open(&path).unwrap();
    let table = ds.manifest().types.clone().unwrap();
    let fl = table.feature_layout(1, 512, ds.layout().dataset_id).unwrap().unwrap();
    let (_, start, _) = fl.feature_range(3);
    bytes[start as usize + 1] ^= 0x40;
    std::fs::write(&f, &bytes).unwrap();
    // Read per batch: refused when the row is gathered.
    let mut s = open(&path, &[-1], None, EngineKind::Pread);
    let e = s.sample(&[40 + 3], 1).unwrap_err().to_string();
    assert_mentions(&e, &["t1.features.fg", &start.to_string(), "feature row 3", "\"author\""]);
    // The memory engine checks every row of its copy once, when the sampler opens.
    let cfg = SamplerConfig { engine: EngineKind::Memory, ..Default::default() };
    let e = NeighborSampler::open(&path, &[-1], &cfg).err().expect("a bad row").to_string();
    assert_mentions(&e, &["t1.features.fg", &start.to_string(), "feature row 3", "\"author\""]);
    // A header page of another layout is refused when the sampler opens.
    bytes[16] ^= 1;
    std::fs::write(&f, &bytes).unwrap();
    let cfg = SamplerConfig { engine: EngineKind::Pread, ..Default::default() };
    let e = NeighborSampler::open(&path, &[1], &cfg).err().expect("a bad header").to_string();
    assert_mentions(&e, &["t1.features.fg"]);
}

#[test]
fn gathering_rows_of_one_type_reads_that_types_rows_and_labels_alone() {
    let tmp = tempdir();
    let path = write(tmp.path());
    let o = offsets();
    for kind in ENGINES {
        let mut s = open(&path, &[2, 2], None, kind);
        let what = flashgnn_sample::Gather { features: true, labels: true, degrees: false };
        // Papers 7, 0, 39 (global = local), then authors 3, 24 (global 43, 64).
        for (ty, ids) in [(0usize, vec![7i64, 0, 39]), (1, vec![3, 24])] {
            let global: Vec<i64> = ids.iter().map(|&l| l + o[ty] as i64).collect();
            let r0 = s.io_counters().reads;
            let b = s.gather_rows(&global, what).unwrap();
            let t = b.typed.as_ref().expect("a typed batch");
            assert_eq!(t.input_type, ty);
            assert!(t.edge_types.iter().all(|e| e.edge_index.is_empty()), "no edges");
            for (u, n) in t.node_types.iter().enumerate() {
                if u != ty {
                    assert!(n.n_id.is_empty(), "{kind:?}: type {u} has no nodes");
                    continue;
                }
                assert_eq!(n.n_id, ids, "{kind:?}");
                assert_eq!(n.num_sampled_nodes, vec![ids.len() as i64]);
                let dim = n.dim as usize;
                let xs: Vec<f32> = n.x.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
                for (r, &l) in ids.iter().enumerate() {
                    for k in 0..dim {
                        assert_eq!(xs[r * dim + k], typed_feature(o[ty] + l as u64, k as u32), "{kind:?}");
                    }
                }
                let want: Vec<i64> =
                    if ty == 0 { ids.iter().map(|&l| typed_label(l as u64, 3)).collect() } else { vec![] };
                assert_eq!(n.y, want);
            }
            // One row read per id (no slot page): the rows of that type alone.
            if kind != EngineKind::Memory {
                assert_eq!(s.io_counters().reads - r0, ids.len() as u64, "{kind:?}");
            }
        }
        let e = s.gather_rows(&[0, 45], what).unwrap_err().to_string();
        assert_mentions(&e, &["seed node 45", "one node type"]);
    }
}

/// Paper 0's slot re-sealed with its first relation's edge base replaced.
fn reseal_base(path: &Path, base: u64) -> (u64, u64) {
    use flashgnn_format::slot::{decode_slot, encode_typed_slot};
    let ds = flashgnn_store::Dataset::open(path).unwrap();
    let l = ds.layout().clone();
    let g = path.join("graph.fg");
    let mut bytes = std::fs::read(&g).unwrap();
    let at = l.slot_offset(0) as usize;
    let slot = bytes[at..at + l.slot_bytes as usize].to_vec();
    let v = decode_slot(&l, 0, &slot, "graph.fg").unwrap();
    let ids = v.inline_ids(&l, "graph.fg").unwrap();
    let counts: Vec<u32> = (0..l.rel_counts as usize).map(|j| v.rel_count(j)).collect();
    let mut bases: Vec<u64> = (0..l.rel_counts as usize).map(|j| v.edge_base(j).unwrap()).collect();
    bases[0] = base;
    let (deg, orig, first) = (v.degree, v.original_id, v.overflow_first);
    let out = &mut bytes[at..at + l.slot_bytes as usize];
    encode_typed_slot(&l, 0, deg, orig, first, &counts, &bases, &[], &ids, out);
    std::fs::write(&g, bytes).unwrap();
    (at as u64 + l.edge_bases_offset() as u64, counts[0] as u64)
}

#[test]
fn an_edge_base_past_its_edge_type_is_refused_and_a_wrong_one_fails_verify() {
    let tmp = tempdir();
    let path = write(tmp.path());
    let cites = flashgnn_store::Dataset::open(&path).unwrap().manifest().types.as_ref().unwrap().edge_types[0].clone();
    assert_eq!((cites.src.as_str(), cites.rel.as_str()), ("paper", "cites"));
    // Within all edge types' entries (the decode's bound), past cites' own.
    let (off, count) = reseal_base(&path, cites.num_edges);
    for kind in [EngineKind::Pread, EngineKind::Memory] {
        let mut s = open(&path, &[-1], None, kind);
        let e = s.sample(&[0], 1).unwrap_err().to_string();
        let want = [off.to_string(), cites.num_edges.to_string(), format!("{} - {count}", cites.num_edges)];
        assert_mentions(&e, &["graph.fg", "edge base", &want[0], &want[1], &want[2], "(paper, cites, paper)"]);
    }
    // Within the edge type, but not the running count: only verify's
    // structure pass knows (its whole-file CRC, not resealed here, would
    // stop it first).
    reseal_base(&path, 1);
    let ds = flashgnn_store::Dataset::open(&path).unwrap();
    let e = flashgnn_store::verify::check_typed_relations(&ds).unwrap_err().to_string();
    assert_mentions(&e, &["graph.fg", "edge base", &off.to_string(), "== 0"]);
}

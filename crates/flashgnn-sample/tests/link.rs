//! Proves link batches (`flashgnn_sample::link`) on the tiny R-MAT dataset
//! (128 nodes, symmetric): exact negative counts and PyG's endpoint layout
//! (sorted distinct seeds, each endpoint's local id), determinism across
//! engines, the negative distributions (uniform and degree^0.75, by a
//! chi-square test at the 0.999 quantile that the wrong distribution
//! fails), that excluding true edges leaves no negative that is a stored
//! edge (and that without it some are), and that excluding seed edges
//! removes every positive and its reverse from the sampled edges.

use std::collections::HashSet;
use std::sync::Arc;

use flashgnn_io::engine::EngineKind;
use flashgnn_sample::link::{DegreeWeights, LinkSpec, NegDist, NegMode};
use flashgnn_sample::{Batch, NeighborSampler};
use flashgnn_store::Dataset;
use flashgnn_testing::{io, sampler, tempdir, tiny_dataset};

fn open(path: &std::path::Path, fanouts: &[i32], kind: EngineKind) -> NeighborSampler {
    sampler(path, fanouts, kind, io(32, 2), true)
}

/// Every stored edge `(u, v)` (u in v's list), by original id.
fn edges(ds: &Dataset) -> HashSet<(i64, i64)> {
    let mut e = HashSet::new();
    for v in 0..ds.num_nodes() as i64 {
        for u in ds.neighbors(v).unwrap() {
            e.insert((u as i64, v));
        }
    }
    e
}

/// The 0.999 quantile of chi-square with `k` degrees of freedom
/// (Wilson-Hilferty; within 0.5 % of the exact value for k >= 10).
fn chi2_999(k: f64) -> f64 {
    let z = 3.0902;
    let a = 2.0 / (9.0 * k);
    k * (1.0 - a + z * a.sqrt()).powi(3)
}

/// Chi-square of `counts` against probabilities `p` (cells with p = 0 must
/// have no count; they carry no degree of freedom).
fn chi_square(counts: &[u64], p: &[f64]) -> (f64, f64) {
    let total: u64 = counts.iter().sum();
    let (mut chi, mut cells) = (0.0, 0.0);
    for (&c, &q) in counts.iter().zip(p) {
        if q == 0.0 {
            assert_eq!(c, 0, "a node of probability 0 was drawn");
            continue;
        }
        let e = total as f64 * q;
        chi += (c as f64 - e).powi(2) / e;
        cells += 1.0;
    }
    (chi, cells - 1.0)
}

/// The endpoints in PyG's order for `spec`'s mode.
fn endpoints(b: &Batch, src: &[i64], dst: &[i64], mode: NegMode) -> Vec<i64> {
    let l = b.link.as_ref().unwrap();
    let mut all = src.to_vec();
    if mode == NegMode::Binary {
        all.extend_from_slice(&l.src_neg);
    }
    all.extend_from_slice(dst);
    all.extend_from_slice(&l.dst_neg);
    all
}

#[test]
fn counts_and_layout_match_pyg() {
    let dir = tempdir();
    let path = tiny_dataset(dir.path());
    let mut s = open(&path, &[3, 2], EngineKind::Pread);
    let (src, dst): (Vec<i64>, Vec<i64>) = ((0..10).collect(), (5..15).rev().collect());
    for (mode, amount, neg) in [(NegMode::None, 1.0, 0), (NegMode::Binary, 1.5, 15), (NegMode::Triplet, 3.0, 30)] {
        let spec = LinkSpec { mode, amount, ..Default::default() };
        let b = s.sample_link(&src, &dst, &spec, 7).unwrap();
        let l = b.link.as_ref().unwrap();
        assert_eq!(l.num_pos, 10);
        assert_eq!(l.dst_neg.len(), neg, "{mode:?}");
        assert_eq!(l.src_neg.len(), if mode == NegMode::Binary { neg } else { 0 }, "{mode:?}");
        let all = endpoints(&b, &src, &dst, mode);
        assert_eq!(l.index.len(), all.len());
        // Seeds: the sorted distinct endpoints, first in n_id.
        let mut seeds = all.clone();
        seeds.sort();
        seeds.dedup();
        assert_eq!(b.batch_size, seeds.len());
        assert_eq!(&b.n_id[..seeds.len()], &seeds[..]);
        assert_eq!(b.num_sampled_nodes[0], seeds.len() as i64);
        for (k, &v) in all.iter().enumerate() {
            assert_eq!(b.n_id[l.index[k] as usize], v, "endpoint {k} of {mode:?}");
        }
        // The neighbourhood is the node batch of those seeds, unchanged.
        let mut plain = b.clone();
        plain.link = None;
        assert_eq!(plain, s.sample(&seeds, 7).unwrap());
    }
    for (mode, amount, what) in [(NegMode::Binary, 0.0, "amount 0"), (NegMode::Triplet, 1.5, "integer")] {
        let e = s.sample_link(&src, &dst, &LinkSpec { mode, amount, ..Default::default() }, 7).unwrap_err();
        assert!(e.to_string().contains(what), "{e}");
    }
    let e = s.sample_link(&[0, 128], &[1, 2], &LinkSpec::default(), 0).unwrap_err().to_string();
    assert!(e.contains("source node id 128 (edge 1) out of range [0, 128)"), "{e}");
    let e = s.sample_link(&[0], &[1, 2], &LinkSpec::default(), 0).unwrap_err().to_string();
    assert!(e.contains("1 sources but 2 destinations"), "{e}");
}

#[test]
fn deterministic_across_engines_and_keyed_by_seed() {
    let dir = tempdir();
    let path = tiny_dataset(dir.path());
    let (src, dst): (Vec<i64>, Vec<i64>) = ((0..20).collect(), (20..40).collect());
    let spec = LinkSpec { mode: NegMode::Binary, amount: 2.0, exclude_true_edges: true, ..Default::default() };
    let a = open(&path, &[4, 3], EngineKind::Pread).sample_link(&src, &dst, &spec, 11).unwrap();
    let b = open(&path, &[4, 3], EngineKind::Memory).sample_link(&src, &dst, &spec, 11).unwrap();
    assert_eq!(a, b);
    let c = open(&path, &[4, 3], EngineKind::Pread).sample_link(&src, &dst, &spec, 12).unwrap();
    assert_ne!(a.link.as_ref().unwrap().dst_neg, c.link.as_ref().unwrap().dst_neg);
}

#[test]
fn negatives_follow_their_distribution() {
    let dir = tempdir();
    let path = tiny_dataset(dir.path());
    let ds = Dataset::open(&path).unwrap();
    let n = ds.num_nodes() as usize;
    let mut s = open(&path, &[0], EngineKind::Memory);
    let weights = Arc::new(s.degree_weights().unwrap());
    let deg: Vec<u32> = (0..n as i64).map(|v| ds.neighbors(v).unwrap().len() as u32).collect();
    assert_eq!(*weights, DegreeWeights::from_degrees(&deg));
    let uniform_p = vec![1.0 / n as f64; n];
    let degree_p: Vec<f64> = (0..n as u64).map(|v| weights.probability(v)).collect();
    // 2,000 positives x 5 negatives x 4 batches = 40,000 draws of each endpoint: ~312 per node uniform.
    let src: Vec<i64> = (0..2000).map(|i| i % n as i64).collect();
    let dst: Vec<i64> = (0..2000).map(|i| (i * 7) % n as i64).collect();
    for (dist, p, other) in
        [(NegDist::Uniform, &uniform_p, &degree_p), (NegDist::Degree(weights.clone()), &degree_p, &uniform_p)]
    {
        let spec = LinkSpec { mode: NegMode::Binary, amount: 5.0, dist: dist.clone(), ..Default::default() };
        let (mut cs, mut cd) = (vec![0u64; n], vec![0u64; n]);
        for seed in 0..4 {
            let b = s.sample_link(&src, &dst, &spec, seed).unwrap();
            let l = b.link.as_ref().unwrap();
            assert_eq!((l.src_neg.len(), l.dst_neg.len()), (10_000, 10_000));
            l.src_neg.iter().for_each(|&v| cs[v as usize] += 1);
            l.dst_neg.iter().for_each(|&v| cd[v as usize] += 1);
        }
        for counts in [&cs, &cd] {
            let (chi, dof) = chi_square(counts, p);
            assert!(chi < chi2_999(dof), "{dist:?}: chi-square {chi:.1} >= {:.1} ({dof} dof)", chi2_999(dof));
            // The test has power: the same draws fail against the other distribution.
            let wrong: Vec<f64> = other.iter().map(|&q| q.max(1e-12)).collect();
            let (chi_wrong, dof_wrong) = chi_square(counts, &wrong);
            assert!(
                chi_wrong > 4.0 * chi2_999(dof_wrong),
                "{dist:?}: the other distribution also fits ({chi_wrong:.1})"
            );
        }
    }
}

#[test]
fn excluded_negatives_are_never_stored_edges() {
    let dir = tempdir();
    let path = tiny_dataset(dir.path());
    let ds = Dataset::open(&path).unwrap();
    let stored = edges(&ds);
    let mut s = open(&path, &[2], EngineKind::Pread);
    let w = Arc::new(s.degree_weights().unwrap());
    let (src, dst): (Vec<i64>, Vec<i64>) = stored.iter().take(300).cloned().unzip();
    for (mode, amount) in [(NegMode::Binary, 3.0), (NegMode::Triplet, 3.0)] {
        let pairs = |b: &Batch| -> Vec<(i64, i64)> {
            let l = b.link.as_ref().unwrap();
            (0..l.dst_neg.len())
                .map(|j| (if mode == NegMode::Binary { l.src_neg[j] } else { src[j / 3] }, l.dst_neg[j]))
                .collect()
        };
        // Degree-weighted negatives hit hubs, hence true edges, often.
        let base = LinkSpec { mode, amount, dist: NegDist::Degree(w.clone()), ..Default::default() };
        let off = s.sample_link(&src, &dst, &base, 3).unwrap();
        let hits = pairs(&off).iter().filter(|p| stored.contains(p)).count();
        assert!(hits > 0, "{mode:?}: no negative was a stored edge: the exclusion test below proves nothing");
        let on = s.sample_link(&src, &dst, &LinkSpec { exclude_true_edges: true, ..base }, 3).unwrap();
        let l = on.link.as_ref().unwrap();
        assert_eq!(l.false_negatives, 0);
        assert!(l.redrawn >= hits as u64, "{mode:?}: redrew {} of {hits}", l.redrawn);
        assert!(pairs(&on).iter().all(|p| !stored.contains(p)), "{mode:?}: a stored edge was kept as a negative");
        // Redrawn negatives are still seeds at the places the index says.
        let all = endpoints(&on, &src, &dst, mode);
        assert!(all.iter().zip(&l.index).all(|(&v, &i)| on.n_id[i as usize] == v));
    }
}

#[test]
fn seed_edges_and_reverses_leave_the_subgraph() {
    let dir = tempdir();
    let path = tiny_dataset(dir.path());
    let ds = Dataset::open(&path).unwrap();
    let stored = edges(&ds);
    let mut s = open(&path, &[-1, 3], EngineKind::Pread);
    let (src, dst): (Vec<i64>, Vec<i64>) = stored.iter().take(40).cloned().unzip();
    let held: HashSet<(i64, i64)> = src.iter().zip(&dst).flat_map(|(&a, &b)| [(a, b), (b, a)]).collect();
    let sampled = |b: &Batch| -> Vec<(i64, i64)> {
        b.row().iter().zip(b.col()).map(|(&r, &c)| (b.n_id[r as usize], b.n_id[c as usize])).collect()
    };
    let spec = LinkSpec { mode: NegMode::Binary, ..Default::default() };
    let with = s.sample_link(&src, &dst, &spec, 5).unwrap();
    let leaked = sampled(&with).iter().filter(|e| held.contains(e)).count();
    assert!(leaked > 0, "with -1 fanouts every positive is sampled: the test below would prove nothing");
    let without = s.sample_link(&src, &dst, &LinkSpec { exclude_seed_edges: true, ..spec }, 5).unwrap();
    assert!(sampled(&without).iter().all(|e| !held.contains(e)));
    assert_eq!(without.link.as_ref().unwrap().seed_edges_removed, leaked as u64);
    assert_eq!(without.num_edges() + leaked, with.num_edges());
    assert_eq!(without.num_sampled_edges.iter().sum::<i64>(), without.num_edges() as i64);
    assert_eq!(without.n_id, with.n_id, "nodes stay");
}

#[test]
fn exclusion_reads_are_the_batch_reads() {
    // Proves the list reads of the exclusion and the sampling pass are one
    // request: pages read to check the negatives are not read again when the
    // batch expands the same nodes (the uncached pread engine counts reads).
    let dir = tempdir();
    let path = tiny_dataset(dir.path());
    let mut s = open(&path, &[2], EngineKind::Pread);
    let (src, dst): (Vec<i64>, Vec<i64>) = ((0..16).collect(), (40..56).collect());
    let spec = LinkSpec { mode: NegMode::Triplet, amount: 2.0, exclude_true_edges: true, ..Default::default() };
    let seed = (0..64).find(|&k| s.sample_link(&src, &dst, &spec, k).unwrap().link.unwrap().redrawn == 0).unwrap();
    let b = s.sample_link(&src, &dst, &spec, seed).unwrap();
    let together = s.last_batch.reads;
    let seeds: Vec<i64> = {
        let mut v = endpoints(&b, &src, &dst, NegMode::Triplet);
        v.sort();
        v.dedup();
        v
    };
    s.sample(&seeds, seed).unwrap();
    let sampling = s.last_batch.reads;
    let before = s.io_counters().reads;
    let mut negs: Vec<u32> = b.link.as_ref().unwrap().dst_neg.iter().map(|&v| v as u32).collect();
    negs.sort();
    negs.dedup();
    s.fetch_lists(&negs).unwrap();
    let listing = s.io_counters().reads - before;
    assert!(listing > 0 && together < sampling + listing, "{together} reads, apart {sampling} + {listing}");
    assert!(together >= sampling);
}

#[test]
fn exclusion_lists_come_from_memory_and_the_cache() {
    // Proves the true-edge check takes the negatives' lists from the memory
    // engine's copy and from the cross-batch cache without changing a batch:
    // degree-weighted negatives (many redraws) give the pread engine's batch
    // on the memory engine and through the cross-batch cache (a static set by
    // degree as large as the dataset, overflow pages bit-packed; then a warm
    // dynamic part alone), and the cached batch reads fewer extents than its
    // negatives' lists alone cost past the cache.
    use flashgnn_sample::{DatasetId, PageCache, Policy};
    let dir = tempdir();
    let path = tiny_dataset(dir.path());
    let (src, dst): (Vec<i64>, Vec<i64>) = ((0..20).collect(), (20..40).collect());
    let mut plain = open(&path, &[4, 3], EngineKind::Pread);
    let w = Arc::new(plain.degree_weights().unwrap());
    let spec = LinkSpec {
        mode: NegMode::Binary,
        amount: 3.0,
        dist: NegDist::Degree(w),
        exclude_true_edges: true,
        ..Default::default()
    };
    let want = plain.sample_link(&src, &dst, &spec, 7).unwrap();
    assert!(want.link.as_ref().unwrap().redrawn > 0, "no redraw: the test below would prove little");
    assert_eq!(open(&path, &[4, 3], EngineKind::Memory).sample_link(&src, &dst, &spec, 7).unwrap(), want);
    let total = std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum::<u64>() as usize;
    let id = DatasetId::of_path(&path).unwrap();
    for hot in [true, false] {
        let statics = if hot {
            open(&path, &[4, 3], EngineKind::Pread).hot_set_by_degree(total).unwrap()
        } else {
            Default::default()
        };
        let cache = Arc::new(PageCache::new(id.clone(), 4 * total, Policy::S3Fifo, statics));
        let mut s = open(&path, &[4, 3], EngineKind::Pread);
        s.set_cache(Some(cache.clone()));
        if !hot {
            // Warm the dynamic part with the same batch: every extent it needs is then held.
            assert_eq!(s.sample_link(&src, &dst, &spec, 7).unwrap(), want, "cold dynamic cache");
        }
        assert_eq!(s.sample_link(&src, &dst, &spec, 7).unwrap(), want, "hot set {hot}");
        let together = s.last_batch.reads;
        assert!(s.last_batch.cache_static_hits + s.last_batch.cache_dynamic_hits > 0);
        // The same seeds sampled alone: the exclusion read nothing more.
        let mut seeds = endpoints(&want, &src, &dst, NegMode::Binary);
        seeds.sort();
        seeds.dedup();
        s.sample(&seeds, 7).unwrap();
        let sampling = s.last_batch.reads;
        // What reading every negative destination's list past the cache costs.
        let before = s.io_counters().reads;
        let mut negs: Vec<u32> = want.link.as_ref().unwrap().dst_neg.iter().map(|&v| v as u32).collect();
        negs.sort();
        negs.dedup();
        s.fetch_lists(&negs).unwrap();
        let listing = s.io_counters().reads - before;
        // Past the cache the lists alone would cost `listing` reads; through it the batch reads only the
        // overflow pages the sampling pass did not need (which no hot set by degree holds whole).
        assert!(together < sampling + listing, "hot set {hot}: {together} reads; sampling {sampling}, lists {listing}");
    }
}

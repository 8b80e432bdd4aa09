//! The prefetch pipeline, generation-following and tier selection
//! (`flashgnn_sample::{pipeline, follow, tiers}`), as the bindings use them:
//!
//! - batches come out in order and are the same for 1 and N producers at
//!   the same seed (and equal to sampling batch i alone with seed + i);
//! - an error in a producer reaches the consumer in its batch's place and
//!   ends the epoch (no hang); an open error too;
//! - dropping a pipeline mid-epoch stops and joins its producers;
//! - a reader following a live graph sees a mutation at the next batch and
//!   moves to the new base after a compaction; a path with `mut/` reads its
//!   mutated state;
//! - the cache's hot set and the resident set are chosen on what the reader
//!   reads; bad options are `SampleError::Config`.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use flashgnn_build::{FeatureLayout, Progress, Reorder};
use flashgnn_io::engine::EngineKind;
use flashgnn_sample::follow::{Follow, View};
use flashgnn_sample::pipeline::{Pipeline, PipelineOptions};
use flashgnn_sample::tiers::{self, HotChoice};
use flashgnn_sample::{Batch, Policy, SampleError, SamplerConfig};
use flashgnn_store::SnapshotSource;
use flashgnn_testing::{io, open_mutable, rmat_dataset, tempdir};

fn cfg() -> SamplerConfig {
    SamplerConfig { engine: EngineKind::Pread, io: io(32, 4), ..Default::default() }
}

fn follow(p: &Path, fanouts: &[i32]) -> Follow {
    Follow::new(p, fanouts, cfg(), View::Dataset)
}

/// Seeds 0..n in a fixed shuffled order.
fn order(n: i64) -> Arc<Vec<i64>> {
    Arc::new((0..n).map(|i| (i * 977) % n).collect())
}

fn run(f: &Follow, order: Arc<Vec<i64>>, producers: usize, prefetch: usize) -> Vec<Batch> {
    let o = PipelineOptions { batch_size: 64, seed: 11, prefetch, drop_last: false, producers };
    Pipeline::start(f, order, &o).unwrap().map(|b| b.unwrap()).collect()
}

#[test]
fn batches_in_order_and_equal_for_any_producer_count() {
    let d = tempdir();
    let p = rmat_dataset(d.path(), "ds", FeatureLayout::Auto, Reorder::None, 4);
    let f = follow(&p, &[5, 3]);
    let ord = order(1000);
    let one = run(&f, ord.clone(), 1, 4);
    assert_eq!(one.len(), 1000usize.div_ceil(64));
    // Batch i is the i-th chunk of the order under seed 11 + i.
    let mut s = f.open().unwrap();
    for (i, b) in one.iter().enumerate() {
        let chunk = &ord[i * 64..((i + 1) * 64).min(ord.len())];
        assert_eq!(&b.n_id[..b.batch_size], chunk, "batch {i} seeds");
        assert_eq!(*b, s.sample(chunk, 11 + i as u64).unwrap(), "batch {i} alone");
    }
    for (producers, prefetch) in [(3, 2), (4, 9), (40, 1)] {
        assert_eq!(run(&f, ord.clone(), producers, prefetch), one, "{producers} producers, prefetch {prefetch}");
    }
    // drop_last drops the short tail only.
    let o = PipelineOptions { batch_size: 64, seed: 11, drop_last: true, producers: 2, ..Default::default() };
    let p2 = Pipeline::start(&f, ord.clone(), &o).unwrap();
    assert_eq!(p2.len(), 1000 / 64);
    assert_eq!(p2.map(|b| b.unwrap()).collect::<Vec<_>>(), one[..1000 / 64]);
}

#[test]
fn a_producer_error_reaches_the_consumer_and_ends_the_epoch() {
    let d = tempdir();
    let p = rmat_dataset(d.path(), "ds", FeatureLayout::Auto, Reorder::None, 4);
    let f = follow(&p, &[4]);
    for producers in [1, 3] {
        // Batch 5 (of 10) holds a seed out of range.
        let mut seeds: Vec<i64> = (0..320).collect();
        seeds[5 * 32 + 7] = 1 << 40;
        let o = PipelineOptions { batch_size: 32, seed: 1, prefetch: 4, drop_last: false, producers };
        let mut pl = Pipeline::start(&f, Arc::new(seeds), &o).unwrap();
        for i in 0..5 {
            assert!(pl.next().unwrap().is_ok(), "{producers} producers: batch {i}");
        }
        match pl.next() {
            Some(Err(SampleError::BadRequest(m))) => assert!(m.contains(&(1u64 << 40).to_string()), "{m}"),
            other => panic!("{producers} producers: expected the bad seed's error, got {:?}", other.map(|r| r.is_ok())),
        }
        assert!(pl.next().is_none(), "the epoch ends after an error");
        assert!(pl.telemetry().is_some(), "producers joined");
    }
    // A producer that cannot open its sampler: the first batch is the error.
    let gone = follow(&d.path().join("missing"), &[4]);
    let mut pl = Pipeline::start(&gone, order(100), &PipelineOptions { producers: 2, ..Default::default() }).unwrap();
    assert!(matches!(pl.next(), Some(Err(_))));
    assert!(pl.next().is_none());
    // A zero batch size is refused up front.
    let o = PipelineOptions { batch_size: 0, ..Default::default() };
    assert!(matches!(Pipeline::start(&f, order(10), &o), Err(SampleError::Config(_))));
}

#[test]
fn dropping_mid_epoch_joins_the_producers() {
    let d = tempdir();
    let p = rmat_dataset(d.path(), "ds", FeatureLayout::Auto, Reorder::None, 4);
    let f = follow(&p, &[5, 3]);
    let ord = order(2048);
    let o = PipelineOptions { batch_size: 16, seed: 3, prefetch: 2, drop_last: false, producers: 4 };
    let mut pl = Pipeline::start(&f, ord.clone(), &o).unwrap();
    assert!(pl.next().unwrap().is_ok());
    // Every producer holds a clone of the order until its thread ends.
    assert!(Arc::strong_count(&ord) > 1);
    drop(pl);
    assert_eq!(Arc::strong_count(&ord), 1, "a producer outlived the pipeline");
    // finish() mid-epoch likewise, and reports what was sampled.
    let mut pl = Pipeline::start(&f, ord.clone(), &o).unwrap();
    pl.next().unwrap().unwrap();
    assert!(pl.finish().batches >= 1);
    assert_eq!(Arc::strong_count(&ord), 1);
    assert!(pl.next().is_none());
}

#[test]
fn following_a_live_graph_sees_mutations_and_compactions() {
    let d = tempdir();
    let p = rmat_dataset(d.path(), "ds", FeatureLayout::Auto, Reorder::Degree, 4);
    let g = Arc::new(open_mutable(&p));
    let f = Follow::new(&p, &[-1], cfg(), View::Live(g.clone() as Arc<dyn SnapshotSource>));
    let mut s = f.open().unwrap();
    let v = 5u64;
    let before: BTreeSet<i64> = f.sample(&mut s, &[v as i64], 0).unwrap().n_id.into_iter().collect();
    let u = (0..g.num_nodes()).find(|&u| u != v && !before.contains(&(u as i64))).unwrap();
    g.add_edge(v, u).unwrap();
    let after: BTreeSet<i64> = f.sample(&mut s, &[v as i64], 0).unwrap().n_id.into_iter().collect();
    assert!(after.contains(&(u as i64)), "the next batch sees the new edge {u}->{v}");
    assert_eq!(s.root(), p.as_path());
    // A compaction switches generations: the reader moves to the new base
    // and still sees the edge.
    g.compact(&Progress::new()).unwrap();
    let b = f.sample(&mut s, &[v as i64], 0).unwrap();
    assert_ne!(s.root(), p.as_path(), "still on generation 0 after a compaction");
    assert_eq!(s.root(), g.snapshot().base.root());
    assert_eq!(b.n_id.iter().copied().collect::<BTreeSet<i64>>(), after);
    // A pipeline over the live graph reads the same.
    let o = PipelineOptions { batch_size: 1, producers: 2, ..Default::default() };
    let got: Vec<Batch> = Pipeline::start(&f, Arc::new(vec![v as i64]), &o).unwrap().map(|b| b.unwrap()).collect();
    assert_eq!(got[0].n_id.iter().copied().collect::<BTreeSet<i64>>(), after);
    // The path alone (no live graph) reads the mutated state mut/CURRENT names.
    g.delete_edge(v, u).unwrap();
    drop(s);
    let view = View::of_path(&p, flashgnn_mutate::published_snapshot).unwrap();
    assert!(matches!(view, View::Fixed(_)));
    let fixed = Follow::new(&p, &[-1], cfg(), view);
    let mut s = fixed.open().unwrap();
    let now: BTreeSet<i64> = fixed.sample(&mut s, &[v as i64], 0).unwrap().n_id.into_iter().collect();
    assert!(!now.contains(&(u as i64)), "the fixed view replays the log up to the deletion");
    // A dataset without mut/ is read alone.
    let plain = rmat_dataset(d.path(), "plain", FeatureLayout::Auto, Reorder::None, 4);
    assert!(matches!(View::of_path(&plain, flashgnn_mutate::published_snapshot).unwrap(), View::Dataset));
}

#[test]
fn tiers_are_chosen_on_what_the_reader_reads() {
    let d = tempdir();
    let p = rmat_dataset(d.path(), "ds", FeatureLayout::Auto, Reorder::None, 4);
    let f = follow(&p, &[5, 3]);
    let budget = 1 << 20;
    let none = tiers::build_cache(&f, budget, Policy::S3Fifo, &HotChoice::None, 0.9, None).unwrap();
    assert_eq!(none.static_bytes(), 0);
    let deg = tiers::build_cache(&f, budget, Policy::S3Fifo, &HotChoice::Degree, 0.9, None).unwrap();
    assert!(deg.static_bytes() > 0 && deg.static_bytes() <= budget * 9 / 10, "{}", deg.static_bytes());
    for seeds in [vec![], (0..512).collect()] {
        let t =
            tiers::build_cache(&f, budget, Policy::S3Fifo, &HotChoice::parse("touches", seeds, 64).unwrap(), 0.9, None);
        let t = t.unwrap();
        assert!(t.static_bytes() > 0 && t.static_bytes() <= budget * 9 / 10, "{}", t.static_bytes());
    }
    // A seed outside the graph is named, not indexed.
    let bad = HotChoice::parse("touches", vec![0, 1 << 40], 64).unwrap();
    assert!(matches!(
        tiers::build_cache(&f, budget, Policy::S3Fifo, &bad, 0.9, None),
        Err(SampleError::BadRequest(m)) if m.contains("1099511627776")
    ));
    let pre = HotChoice::parse("presample", (0..512).collect(), 64).unwrap();
    let acc = tiers::build_cache(&f, budget, Policy::Clock, &pre, 0.5, None).unwrap();
    assert!(acc.static_bytes() > 0 && acc.static_bytes() <= budget / 2);
    assert!(matches!(
        tiers::build_cache(&f, budget, Policy::Clock, &HotChoice::Degree, 1.5, None),
        Err(SampleError::Config(m)) if m.contains("hot_fraction")
    ));
    assert!(matches!(HotChoice::parse("presample", vec![], 64), Err(SampleError::Config(_))));
    assert!(matches!(HotChoice::parse("hottest", vec![1], 64), Err(SampleError::Config(m)) if m.contains("hottest")));
    // The resident set: highest degree first, original ids.
    let r = tiers::resident_by_degree(&f, 10).unwrap();
    assert_eq!(r.nodes.len(), 10);
    assert!(r.degrees.windows(2).all(|w| w[0] >= w[1]), "{:?}", r.degrees);
    let ds = flashgnn_store::Dataset::open(&p).unwrap();
    assert!(r.nodes.iter().all(|&v| (v as u64) < ds.num_nodes()));
}

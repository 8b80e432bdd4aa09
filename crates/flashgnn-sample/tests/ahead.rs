//! Reading the next batch's seed pages ahead (`sample_ahead`, what every
//! pipeline producer does) changes no batch, whatever `next` holds, on every
//! engine, with and without a cross-batch cache; it moves the seeds' reads
//! into the batch before (the last batch of a run reads fewer pages); reads
//! still in flight between batches are completed before a scan uses the
//! engine and before the sampler is dropped.

use std::sync::Arc;

use flashgnn_build::{FeatureLayout, Reorder};
use flashgnn_io::engine::EngineKind;
use flashgnn_sample::{DatasetId, NeighborSampler, PageCache, Policy, SamplerConfig};

mod common;
use common::{dataset, ENGINES};

fn plan(n: i64) -> Vec<Vec<i64>> {
    (0..6).map(|b| (0..150).map(|i| (i * 13 + b * 577) % n).collect()).collect()
}

fn open(path: &std::path::Path, engine: EngineKind, cache: Option<Arc<PageCache>>) -> NeighborSampler {
    let cfg = SamplerConfig { engine, cache, ..Default::default() };
    NeighborSampler::open(path, &[6, 3], &cfg).unwrap()
}

#[test]
fn batches_are_unchanged_and_seed_reads_move_ahead() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, layout) in [("inline", FeatureLayout::Inline), ("separate", FeatureLayout::Separate)] {
        let path = dataset(tmp.path(), name, layout, Reorder::None, 16);
        let n = flashgnn_store::Dataset::open(&path).unwrap().num_nodes() as i64;
        let batches = plan(n);
        let want: Vec<_> = {
            let mut s = open(&path, EngineKind::Uring, None);
            batches.iter().enumerate().map(|(i, b)| s.sample(b, i as u64).unwrap()).collect()
        };
        let statics = open(&path, EngineKind::Uring, None).hot_set_by_degree(64 << 10).unwrap();
        let cache = Arc::new(PageCache::new(DatasetId::of_path(&path).unwrap(), 64 << 10, Policy::S3Fifo, statics));
        for engine in ENGINES {
            for cache in [None, Some(cache.clone())] {
                let label = format!("{name}, {engine:?}, cache {}", cache.is_some());
                // Without reads ahead: each batch reads its own seeds' pages.
                let mut plain = open(&path, engine, cache.clone());
                let mut last_plain = 0;
                for (i, b) in batches.iter().enumerate() {
                    assert_eq!(plain.sample(b, i as u64).unwrap(), want[i], "{label}, batch {i}");
                    last_plain = plain.last_batch.reads;
                }
                let mut s = open(&path, engine, cache.clone());
                for (i, b) in batches.iter().enumerate() {
                    let next: &[i64] = batches.get(i + 1).map(|v| v.as_slice()).unwrap_or(&[]);
                    assert_eq!(s.sample_ahead(b, i as u64, next).unwrap(), want[i], "{label}, batch {i}");
                }
                if engine != EngineKind::Memory {
                    // The last batch found its seeds' slot pages already read.
                    assert!(
                        s.last_batch.reads < last_plain,
                        "{label}: last batch read {} pages with its seeds read ahead, {last_plain} without",
                        s.last_batch.reads
                    );
                    assert!(s.telemetry.reads <= plain.telemetry.reads + 1, "{label}: no page is read twice");
                }
                // A wrong guess — other nodes, repeats, ids out of range —
                // costs reads, never a different batch or an error.
                let mut g = open(&path, engine, cache.clone());
                let junk: Vec<i64> = vec![-1, n, n + 7, i64::MAX, 3, 3, 3, 0, n - 1];
                for (i, b) in batches.iter().enumerate() {
                    assert_eq!(g.sample_ahead(b, i as u64, &junk).unwrap(), want[i], "{label}, junk next, batch {i}");
                }
            }
        }
    }
}

#[test]
fn reads_left_in_flight_are_settled_before_a_scan_and_on_drop() {
    let tmp = tempfile::tempdir().unwrap();
    let path = dataset(tmp.path(), "d", FeatureLayout::Inline, Reorder::None, 16);
    let n = flashgnn_store::Dataset::open(&path).unwrap().num_nodes() as i64;
    let batches = plan(n);
    let mut plain = open(&path, EngineKind::Uring, None);
    let want_set = plain.hot_set_by_degree(256 << 10).unwrap();
    let want_walk = plain.random_walk(&batches[1], 4, 9).unwrap();
    let all: Vec<i64> = (0..n).collect();
    for _ in 0..3 {
        let mut s = open(&path, EngineKind::Uring, None);
        // An empty batch returns at once, with every slot page's read ahead
        // still in flight (none of them is this batch's).
        s.sample_ahead(&[], 0, &all).unwrap();
        assert!(s.io_counters().reads > 0, "reads ahead were issued");
        // A scan and a walk issue their own reads on the same engine: they
        // must not be handed a read ahead's completion, nor lose theirs.
        let got = s.hot_set_by_degree(256 << 10).unwrap();
        assert_eq!(got.len(), want_set.len());
        assert!(got.iter().zip(want_set.iter()).all(|(a, b)| a == b), "the hot set is unchanged");
        s.sample_ahead(&[], 0, &all).unwrap();
        assert_eq!(s.random_walk(&batches[1], 4, 9).unwrap(), want_walk);
        // Dropped with reads ahead in flight: waits for them (a buffer freed
        // under the kernel would be written after free).
        s.sample_ahead(&[], 0, &all).unwrap();
        drop(s);
    }
}

//! A/B probe (dev tool, not a test): one sampler with a static cache of BUDGET bytes,
//! train-split seeds in order, batches sampled with and without reading the next
//! batch's seed pages ahead; prints wall and CPU per batch.
//! `[DEPTH=256] cargo run --release -p flashgnn-sample --example ahead_probe -- DATASET BUDGET_BYTES [BATCHES]`
use flashgnn_sample::tiers::{build_cache, HotChoice};
use flashgnn_sample::{Follow, Policy, SamplerConfig, View};
use std::sync::Arc;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let path = std::path::PathBuf::from(&a[1]);
    let budget: usize = a[2].parse().unwrap();
    let batches: usize = a.get(3).map(|s| s.parse().unwrap()).unwrap_or(40);
    let fan = [25, 10];
    let ds = flashgnn_store::Dataset::open(&path).unwrap();
    let follow = Follow::new(&path, &fan, SamplerConfig::default(), View::Dataset);
    let train: Vec<i64> = ds.split("train").unwrap_or_default();
    let hc = HotChoice::parse("degree", train.clone(), 1024).unwrap();
    let cache = Arc::new(build_cache(&follow, budget, Policy::S3Fifo, &hc, 1.0).unwrap());
    let mut cfg = SamplerConfig { cache: Some(cache.clone()), ..Default::default() };
    if let Some(d) = std::env::var("DEPTH").ok().and_then(|d| d.parse().ok()) {
        cfg.io.depth = d;
    }
    let mut s = flashgnn_sample::NeighborSampler::open(&path, &fan, &cfg).unwrap();
    let chunk = |i: usize| &train[(i * 1024) % (train.len() - 1024)..][..1024];
    for round in 0..4 {
        for ahead in [false, true] {
            let t0 = std::time::Instant::now();
            let (mut cpu, mut reads, mut wait, mut waits) = (0.0, 0u64, 0.0, 0u64);
            for b in 0..batches {
                let i = round * 1000 + b + if ahead { 500 } else { 0 };
                let next: &[i64] = if ahead { chunk(i + 1) } else { &[] };
                s.sample_ahead(chunk(i), i as u64, next).unwrap();
                cpu += s.last_batch.cpu_seconds;
                reads += s.last_batch.reads;
                wait += s.last_batch.io_wait_seconds;
                waits += s.last_batch.io_waits;
            }
            let w = t0.elapsed().as_secs_f64();
            println!(
                "ahead={ahead:<5} {:.2} batches/s, wall {:.1} ms, CPU {:.1} ms per batch, {:.0} reads/batch, wait {:.1} ms in {:.0} waits",
                batches as f64 / w,
                w * 1e3 / batches as f64,
                cpu * 1e3 / batches as f64,
                reads as f64 / batches as f64,
                wait * 1e3 / batches as f64,
                waits as f64 / batches as f64
            );
        }
    }
}

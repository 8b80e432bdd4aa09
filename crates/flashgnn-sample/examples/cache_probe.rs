//! Deterministic cache metrics on a dataset (dev tool, not a test):
//! `cargo run --release -p flashgnn-sample --example cache_probe -- DATASET BUDGET_BYTES [HOT] [FRACTION] [BATCHES]`
//! prints per batch: reads by kind and hop, cache hits, thread CPU, wall time and the
//! time blocked on reads (`NO_TRACE=1` for timings without the trace's bookkeeping).
use flashgnn_format::trace::{KIND_FEATURE_ROW, KIND_OVERFLOW_PAGE, KIND_SLOT_PAGE};
use flashgnn_sample::tiers::{build_cache, HotChoice};
use flashgnn_sample::{Follow, Policy, SamplerConfig, View};
use std::sync::Arc;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let path = std::path::PathBuf::from(&a[1]);
    let budget: usize = a[2].parse().unwrap();
    let hot = a.get(3).map(|s| s.as_str()).unwrap_or("degree");
    let frac: f64 = a.get(4).map(|s| s.parse().unwrap()).unwrap_or(flashgnn_sample::tiers::DEFAULT_HOT_FRACTION);
    let batches: usize = a.get(5).map(|s| s.parse().unwrap()).unwrap_or(20);
    let fan = [25, 10];
    let ds = flashgnn_store::Dataset::open(&path).unwrap();
    let n = ds.num_nodes();
    let follow = Follow::new(&path, &fan, SamplerConfig::default(), View::Dataset);
    let t = std::time::Instant::now();
    // Seeds from the train split when there is one (checked as every split read is).
    let train: Vec<i64> = ds.split("train").unwrap_or_default();
    let hc = match hot {
        "touches-uniform" => HotChoice::parse("touches", vec![], 1024).unwrap(),
        "presample" => HotChoice::parse(hot, train.iter().take(8192).copied().collect(), 1024).unwrap(),
        _ => HotChoice::parse(hot, train.clone(), 1024).unwrap(),
    };
    let cache = Arc::new(build_cache(&follow, budget, Policy::S3Fifo, &hc, frac, None).unwrap());
    eprintln!("built in {:.1}s: {:?}", t.elapsed().as_secs_f64(), cache);
    let cfg = match std::env::var("ENGINE").ok().as_deref() {
        Some(e) if e != "uring" => {
            SamplerConfig { engine: flashgnn_sample::follow::engine_kind(e).unwrap(), ..Default::default() }
        }
        _ => SamplerConfig {
            cache: Some(cache.clone()),
            batch_page_cache_bytes: std::env::var("PAGE_CACHE")
                .ok()
                .map(|x| x.parse().unwrap())
                .unwrap_or(flashgnn_sample::BATCH_PAGE_CACHE_BYTES),
            ..Default::default()
        },
    };
    let mut s = flashgnn_sample::NeighborSampler::open(&path, &fan, &cfg).unwrap();
    let mut x = 0x1234_5678u64;
    let warm = 10;
    let mut by = std::collections::BTreeMap::new();
    let (mut hits, mut reads, mut cpu, mut wall, mut wait) = (0u64, 0u64, Vec::new(), 0.0, 0.0);
    for b in 0..warm + batches {
        let seeds: Vec<i64> = (0..1024)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                if train.is_empty() {
                    ((x >> 33) % n) as i64
                } else {
                    train[((x >> 33) % train.len() as u64) as usize]
                }
            })
            .collect();
        s.set_trace(b >= warm && std::env::var_os("NO_TRACE").is_none());
        s.sample(&seeds, b as u64).unwrap();
        let tr = s.take_trace();
        if b >= warm {
            let t = &s.last_batch;
            hits += t.cache_static_hits + t.cache_dynamic_hits;
            reads += t.reads;
            cpu.push(t.cpu_seconds);
            wall += t.seconds;
            wait += t.io_wait_seconds;
            for r in tr {
                let k = match r.kind {
                    KIND_SLOT_PAGE => "slot",
                    KIND_OVERFLOW_PAGE => "overflow",
                    KIND_FEATURE_ROW => "row",
                    _ => "other",
                };
                *by.entry((k, r.hop)).or_insert(0u64) += 1;
            }
        }
    }
    cpu.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let nb = batches as f64;
    for ((k, h), c) in &by {
        println!("  reads {k:<8} hop {h}: {:.0}/batch", *c as f64 / nb);
    }
    println!(
        "summary: {:.0} reads/batch, {:.0} hits/batch, hit rate {:.2} %, CPU median {:.0} us/batch, \
         wall {:.1} ms/batch of which {:.1} ms blocked on reads",
        reads as f64 / nb,
        hits as f64 / nb,
        100.0 * hits as f64 / (hits + reads) as f64,
        cpu[cpu.len() / 2] * 1e6,
        wall * 1e3 / nb,
        wait * 1e3 / nb
    );
}

//! I/O trace capture (`NeighborSampler::set_trace`, docs/trace.md): one
//! record per read the engine issued, dependencies pointing at earlier
//! reads, bytes used within each read, times ordered; capture off changes
//! neither the batch nor the reads.

use flashgnn_build::{FeatureLayout, Reorder};
use flashgnn_format::trace::*;
use flashgnn_io::engine::EngineKind;
use flashgnn_sample::{NeighborSampler, SamplerConfig};
use flashgnn_testing::{rmat_dataset, tempdir};

#[test]
fn every_read_is_recorded_with_a_valid_dependency() {
    let tmp = tempdir();
    for (name, layout) in [("inline", FeatureLayout::Inline), ("separate", FeatureLayout::Separate)] {
        let path = rmat_dataset(tmp.path(), name, layout, Reorder::None, 16);
        let n = flashgnn_store::Dataset::open(&path).unwrap().num_nodes() as i64;
        let cfg = SamplerConfig { engine: EngineKind::Uring, ..Default::default() };
        let mut on = NeighborSampler::open(&path, &[10, 5], &cfg).unwrap();
        let mut off = NeighborSampler::open(&path, &[10, 5], &cfg).unwrap();
        on.set_trace(true);
        for b in 0..3u64 {
            let seeds: Vec<i64> = (0..64).map(|i| (i * 17 + b as i64 * 7) % n).collect();
            let r0 = on.io_counters().reads;
            let got = on.sample(&seeds, b).unwrap();
            let reads = on.take_trace();
            assert_eq!(got, off.sample(&seeds, b).unwrap(), "{name}: capture changes no batch");
            assert_eq!(reads.len() as u64, on.io_counters().reads - r0, "{name}: one record per read issued");
            assert!(off.take_trace().is_empty());
            let mut seeds_reads = 0;
            let mut kinds = [0; 3];
            for (i, r) in reads.iter().enumerate() {
                assert_eq!(r.index as usize, i, "reads are numbered in issue order");
                assert!(
                    r.dep == NO_DEP || (r.dep as usize) < i,
                    "{name}: dependency {} of read {i} is not earlier",
                    r.dep
                );
                assert!(
                    r.bytes_used > 0 && r.bytes_used <= r.length,
                    "{name}: read {i} used {} of {}",
                    r.bytes_used,
                    r.length
                );
                assert!(
                    r.submit_ns > 0 && r.complete_ns >= r.submit_ns,
                    "{name}: read {i} times {} {}",
                    r.submit_ns,
                    r.complete_ns
                );
                if r.dep != NO_DEP {
                    assert!(
                        reads[r.dep as usize].complete_ns <= r.submit_ns,
                        "{name}: read {i} submitted before its cause completed"
                    );
                }
                seeds_reads += (r.dep == NO_DEP) as u32;
                kinds[r.kind as usize] += 1;
                let mut enc = Vec::new();
                r.encode(&mut enc);
                let mut r2 = *r;
                r2.index = i as u32;
                let mut enc2 = Vec::new();
                r2.encode(&mut enc2);
                assert_eq!(TraceRead::decode(&enc2, "t", 0).unwrap(), r2);
            }
            // Seeds issue their slot page and (separate layout) their feature row.
            assert!(
                seeds_reads > 0 && seeds_reads as usize <= 2 * seeds.len(),
                "{name}: {seeds_reads} reads without a cause"
            );
            assert!(kinds[KIND_SLOT_PAGE as usize] > 0);
            if layout == FeatureLayout::Separate {
                assert!(kinds[KIND_FEATURE_ROW as usize] > 0, "{name}: feature rows are traced");
            }
        }
    }
}

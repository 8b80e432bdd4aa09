//! The structure stage of lookahead (`SamplerConfig::free_features_only`):
//! the same batch as a full sample, with the rows that came with structure
//! reads and zeros where a row would have needed a read of its own, for both
//! layouts, and fewer reads than a full sample.

use flashgnn_build::{FeatureLayout, Reorder};
use flashgnn_io::engine::EngineKind;
use flashgnn_sample::{NeighborSampler, SamplerConfig};
use flashgnn_testing::{rmat_dataset, tempdir};

#[test]
fn free_rows_match_the_full_batch_and_the_rest_are_listed() {
    let tmp = tempdir();
    for (name, layout) in [("inline", FeatureLayout::Inline), ("separate", FeatureLayout::Separate)] {
        let path = rmat_dataset(tmp.path(), name, layout, Reorder::None, 16);
        let n = flashgnn_store::Dataset::open(&path).unwrap().num_nodes() as i64;
        let fan = [10, 5];
        let full_cfg = SamplerConfig { engine: EngineKind::Uring, ..Default::default() };
        let free_cfg = SamplerConfig { free_features_only: true, ..full_cfg.clone() };
        let mut full = NeighborSampler::open(&path, &fan, &full_cfg).unwrap();
        let mut free = NeighborSampler::open(&path, &fan, &free_cfg).unwrap();
        let rb = 16 * 4;
        for b in 0..4u64 {
            let seeds: Vec<i64> = (0..64).map(|i| (i * 13 + b as i64 * 101) % n).collect();
            let want = full.sample(&seeds, b).unwrap();
            let got = free.sample(&seeds, b).unwrap();
            assert_eq!(
                (&got.n_id, &got.edge_index, &got.y, &got.num_sampled_nodes),
                (&want.n_id, &want.edge_index, &want.y, &want.num_sampled_nodes),
                "{name} batch {b}: same structure"
            );
            assert!(want.missing.is_empty(), "a full sample misses nothing");
            // Packed: x holds only the rows of the positions not missing, in order.
            assert_eq!(got.x.len(), (want.n_id.len() - got.missing.len()) * rb, "{name}: x is packed");
            let mut missing = got.missing.iter().map(|&p| p as usize).peekable();
            let last_hop = (want.n_id.len() as i64 - want.num_sampled_nodes.last().unwrap()) as usize;
            let mut packed = 0;
            for pos in 0..want.n_id.len() {
                if missing.peek() == Some(&pos) {
                    missing.next();
                    if layout == FeatureLayout::Inline {
                        assert!(pos >= last_hop, "{name}: expanded node {pos} came with its slot");
                    }
                } else {
                    let got_row = &got.x[packed * rb..(packed + 1) * rb];
                    assert_eq!(got_row, &want.x[pos * rb..(pos + 1) * rb], "{name} batch {b}: row {pos}");
                    packed += 1;
                }
            }
            assert_eq!(packed * rb, got.x.len());
            assert!(missing.next().is_none(), "{name}: missing positions ascend and are in range");
            match layout {
                FeatureLayout::Separate => assert_eq!(got.missing.len(), got.n_id.len(), "no row is free"),
                _ => assert!(!got.missing.is_empty() && got.missing.len() < got.n_id.len(), "some free, some not"),
            }
        }
        assert!(
            free.telemetry.reads < full.telemetry.reads,
            "{name}: rows alone are not read ({} vs {})",
            free.telemetry.reads,
            full.telemetry.reads
        );
    }
}

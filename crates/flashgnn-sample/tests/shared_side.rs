//! Per-node side arrays are one copy per process: every `Dataset`
//! and sampler opened on the same files gets the same `Arc` (pointer
//! equality, and the bytes held stay 4 B/node per array however many
//! samplers are open); the copy goes with its last holder; and a side file
//! rewritten in place while a copy is held is loaded and checked afresh,
//! so corruption is still refused with the file named.

use std::sync::Arc;

use flashgnn_build::{FeatureLayout, Reorder};
use flashgnn_sample::{NeighborSampler, SamplerConfig};
use flashgnn_store::Dataset;
use flashgnn_testing::{rmat_dataset, tempdir};

#[test]
fn side_arrays_are_shared_once_per_process() {
    let dir = tempdir();
    let path = rmat_dataset(dir.path(), "ds", FeatureLayout::Separate, Reorder::Degree, 8);
    let (a, b) = (Dataset::open(&path).unwrap(), Dataset::open(&path).unwrap());
    let n = a.num_nodes();
    assert_eq!(a.side_bytes_held(), 0, "nothing is loaded by open");
    let (la, lb) = (a.labels_shared().unwrap(), b.labels_shared().unwrap());
    assert!(Arc::ptr_eq(&la, &lb), "two opens share one labels array");
    assert_eq!(la.len() as u64, n);
    let (ma, mb) = (a.maps().unwrap().unwrap().clone(), b.maps().unwrap().unwrap().clone());
    assert!(Arc::ptr_eq(&ma.0, &mb.0) && Arc::ptr_eq(&ma.1, &mb.1), "relabelling maps are shared");
    assert!(Arc::ptr_eq(a.feature_crcs().unwrap(), b.feature_crcs().unwrap()), "feature CRCs are shared");
    assert_eq!(a.side_bytes_held(), 16 * n, "labels + two maps + CRCs, 4 B/node each, once");
    // The labels are the stored ones, as i32.
    let ids: Vec<i64> = (0..n as i64).collect();
    let want = a.labels(&ids).unwrap();
    assert!(la.iter().zip(&want).all(|(&l, &w)| l as i64 == w));

    // Samplers (one per producer in a pipeline) add nothing per node.
    let cfg = SamplerConfig { labels: true, ..Default::default() };
    let samplers: Vec<NeighborSampler> = (0..3).map(|_| NeighborSampler::open(&path, &[5, 5], &cfg).unwrap()).collect();
    assert_eq!(b.side_bytes_held(), 16 * n, "three samplers still hold one copy");
    drop((a, b, la, lb, ma, mb));
    assert_eq!(samplers[0].num_nodes(), n);
    let c = Dataset::open(&path).unwrap();
    assert_eq!(c.side_bytes_held(), 16 * n, "the samplers keep the copy alive");
    drop(samplers);
    assert_eq!(c.side_bytes_held(), 0, "freed with its last holder");
}

#[test]
fn a_side_file_rewritten_while_held_is_checked_again() {
    let dir = tempdir();
    let path = rmat_dataset(dir.path(), "ds", FeatureLayout::Inline, Reorder::None, 8);
    let cfg = SamplerConfig { labels: true, ..Default::default() };
    let held = NeighborSampler::open(&path, &[5], &cfg).unwrap();
    // Flip a byte of the labels in place; the write's timestamp could fall in
    // the same clock tick as the load, so the test sets one that cannot.
    let f = path.join("labels.npy");
    let mut bytes = std::fs::read(&f).unwrap();
    let k = bytes.len() - 3;
    bytes[k] ^= 0x5a;
    std::fs::write(&f, &bytes).unwrap();
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
    std::fs::File::options().write(true).open(&f).unwrap().set_modified(t).unwrap();
    let e = NeighborSampler::open(&path, &[5], &cfg).err().expect("a damaged labels.npy is refused").to_string();
    assert!(e.contains("labels.npy") && e.to_lowercase().contains("checksum"), "{e}");
    drop(held);
}

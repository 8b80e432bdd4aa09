//! Shared test fixture: a small generated and built dataset.

use std::path::{Path, PathBuf};

use flashgnn_build::{build, BuildOptions, FeatureLayout, Progress, Reorder};
use flashgnn_datagen::{generate_rmat, RmatOptions};
use flashgnn_io::engine::{EngineConfig, EngineKind};
use flashgnn_sample::{NeighborSampler, SamplerConfig};

/// Every read engine, in the order the tests report them (the crate's own list).
#[allow(dead_code)]
pub const ENGINES: [EngineKind; EngineKind::ALL.len()] = EngineKind::ALL;

#[allow(dead_code)] // not every test binary uses every helper
pub fn dataset(dir: &Path, name: &str, layout: FeatureLayout, reorder: Reorder, dim: u32) -> PathBuf {
    let raw = dir.join(format!("{name}-raw"));
    let o = RmatOptions { scale: 11, edge_factor: 8, dim, classes: 4, seed: 9, ..Default::default() };
    generate_rmat(&raw, &o, &Progress::new()).unwrap();
    let out = dir.join(name);
    let mut b = BuildOptions::new(&raw, &out);
    b.symmetrize = true;
    b.feature_layout = layout;
    b.reorder = reorder;
    b.memory_budget = 80 << 20;
    build(&b, &Progress::new()).unwrap();
    out
}

/// A sampler over `path` on engine `kind` with I/O settings `io`.
#[allow(dead_code)] // not every test binary uses every helper
pub fn sampler(path: &Path, fanouts: &[i32], kind: EngineKind, io: EngineConfig, labels: bool) -> NeighborSampler {
    NeighborSampler::open(path, fanouts, &SamplerConfig { engine: kind, io, labels, ..Default::default() }).unwrap()
}

/// Engine settings with `depth` reads in flight and `threads` pool threads.
#[allow(dead_code)]
pub fn io(depth: usize, threads: usize) -> EngineConfig {
    EngineConfig { depth, pool_threads: threads, ..Default::default() }
}

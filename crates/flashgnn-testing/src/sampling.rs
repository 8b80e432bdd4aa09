//! Samplers for tests: every read engine, engine I/O settings, and a
//! `NeighborSampler` opened with them.

use std::path::Path;

use flashgnn_io::engine::{EngineConfig, EngineKind};
use flashgnn_sample::{NeighborSampler, SamplerConfig};

/// Every read engine, in the order the tests report them (the io crate's own list).
pub const ENGINES: [EngineKind; EngineKind::ALL.len()] = EngineKind::ALL;

/// Engine settings with `depth` reads in flight and `threads` pool threads.
pub fn io(depth: usize, threads: usize) -> EngineConfig {
    EngineConfig { depth, pool_threads: threads, ..Default::default() }
}

/// A sampler over `path` drawing `fanouts`, on engine `kind` with I/O
/// settings `io`, returning labels when `labels`.
pub fn sampler(path: &Path, fanouts: &[i32], kind: EngineKind, io: EngineConfig, labels: bool) -> NeighborSampler {
    let cfg = SamplerConfig { engine: kind, io, labels, ..Default::default() };
    NeighborSampler::open(path, fanouts, &cfg)
        .unwrap_or_else(|e| panic!("open a {kind:?} sampler on {}: {e}", path.display()))
}

//! The sampling engine: one call per mini-batch returns the sampled k-hop
//! subgraph in PyG order, the unique original node ids, the gathered feature
//! matrix and the labels.
//!
//! How a batch runs ([`neighbor::NeighborSampler::sample`]):
//!
//! - every seed's slot page is requested at once; up to `depth` reads are in
//!   flight in the [`flashgnn_io::engine::ReadEngine`];
//! - when a page arrives, *every* node waiting on it is served by that one
//!   read; a node that must be expanded samples its neighbors immediately
//!   (uniform without replacement, keyed by (batch seed, node) so the result
//!   does not depend on arrival order) and its new neighbors' reads are issued
//!   at once — hops proceed out of order, with no barrier per hop;
//! - spilled neighbor lists read only the overflow pages holding the sampled
//!   entries; separate feature rows are read sector-exact;
//! - when nothing is in flight, a canonical pass assigns local ids in PyG
//!   order (seeds first, then hop by hop, parents in order, samples in order).
//!
//! Architecture invariant: every byte from disk passes the checked decoders
//! of `flashgnn-format`; the in-memory state per batch is bounded by
//! `depth` page buffers plus the sampled subgraph itself.

pub mod belady;
pub mod budget;
pub mod cache;
pub mod follow;
pub mod hot;
pub mod link;
pub mod neighbor;
mod packed;
pub mod pipeline;
pub mod probe;
pub mod resident;
pub mod rng;
pub mod rowcodec;
pub mod telemetry;
pub mod tiers;
pub mod walk;

pub use cache::{DatasetId, PageCache, Policy, StaticSet};
pub use follow::{Follow, View};
pub use link::{DegreeWeights, LinkPart, LinkSpec, NegDist, NegMode};
pub use neighbor::{
    samplers_opened, Batch, EdgeTypeBatch, Gather, NeighborSampler, NodeTypeBatch, SamplerConfig, TypedBatch,
    BATCH_PAGE_CACHE_BYTES, BUF_POOL_BYTES, ENGINE_BYTES_PER_PRODUCER, MAX_HOPS,
};
pub use pipeline::{Pipeline, PipelineOptions, MAX_PRODUCERS};
pub use resident::Resident;
pub use telemetry::Telemetry;
pub use tiers::{HotChoice, DEFAULT_HOT_FRACTION};

#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    #[error(transparent)]
    Format(#[from] flashgnn_format::FormatError),
    #[error(transparent)]
    Io(#[from] flashgnn_io::IoError),
    #[error(transparent)]
    Store(#[from] flashgnn_store::StoreError),
    /// A request the dataset cannot serve (seed out of range, bad fanout).
    #[error("{0}")]
    BadRequest(String),
    /// A bad option of the caller (names the option, the value and what is
    /// accepted): an unknown engine or hot-set name, a zero batch size.
    #[error("{0}")]
    Config(String),
    /// A producer thread could not start or died without an error (a panic).
    #[error("{0}")]
    Internal(String),
}

pub type Result<T, E = SampleError> = std::result::Result<T, E>;

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

pub mod cache;
pub mod hot;
pub mod neighbor;
pub mod probe;
pub mod resident;
pub mod rng;
pub mod telemetry;
pub mod walk;

pub use cache::{DatasetId, PageCache, Policy, StaticSet};
pub use neighbor::{Batch, NeighborSampler, SamplerConfig};
pub use resident::Resident;
pub use telemetry::Telemetry;

#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    #[error(transparent)]
    Format(#[from] flashgnn_format::FormatError),
    #[error(transparent)]
    Io(#[from] flashgnn_io::IoError),
    #[error(transparent)]
    Store(#[from] flashgnn_store::StoreError),
    #[error("{0}")]
    BadRequest(String),
}

pub type Result<T, E = SampleError> = std::result::Result<T, E>;

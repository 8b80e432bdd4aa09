//! Reading a built dataset: [`Dataset::open`] validates the manifest against
//! the files and their header pages; `neighbors`, `features`, `labels` and
//! `split` are simple, correct, checked positional reads (the fast batched
//! sampler is a separate layer); [`scan`] streams every node in internal
//! order with large sequential reads; [`verify`] checks every checksum,
//! address and bound; [`scrub`] does the same page by page at a bounded,
//! resumable rate and reports every damaged page.
//!
//! Architecture invariant: every value read from disk goes through the
//! checked decoders of `flashgnn-format` before it is used as an offset,
//! length or id; a corrupt file yields a [`StoreError`], never a panic or a
//! read outside the dataset.
//!
//! In-memory index per node: **0 bytes** without relabelling (slot addresses
//! are arithmetic); with `--reorder`, `node_index.npy`/`node_order.npy` are
//! loaded on first use of an original id (8 B per node, u32 each).

pub mod dataset;
pub mod overlay;
pub mod scan;
pub mod scrub;
mod shared;
pub mod verify;

pub use dataset::{Dataset, LinkSplit, StoreError};
pub use overlay::{Delta, NodeRec, Op, OverlayError, Snapshot, SnapshotSource};
pub use scan::{scan, ScanNode, SCAN_CHUNK_BYTES};
pub use scrub::{scrub, Damage, ScrubOptions, ScrubReport};
pub use verify::{verify, verify_scope, Scope as VerifyScope, VerifyReport};

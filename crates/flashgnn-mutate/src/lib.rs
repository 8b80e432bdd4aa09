//! The mutable graph store (HolisticGNN-style unit operations over a built,
//! immutable dataset): [`MutableGraph`].
//!
//! ```text
//!  writers ──► validate on a clone of the head delta ──► frame ──► queue ─┐
//!                                                                          │ one leader: one write + one fdatasync
//!  readers ◄── Arc<Snapshot> (base + delta at seq S) ◄── publish ◄── durable ◄┘
//!  compact: snapshot at S ─► npy input ─► flashgnn-build ─► gen-N+1 ─► wal-(N+1) = frames > S ─► CURRENT ─► swap
//! ```
//!
//! - [`wal`]: the log format, replay (torn tail vs corruption in the
//!   middle) and the append side;
//! - [`current`]: `mut/CURRENT`, generation directories, free-id lists,
//!   leftover cleanup;
//! - [`graph`]: open (replay), the unit operations, group commit, snapshots;
//! - [`batch`]: a batch as the caller wrote it, checked into operations;
//! - [`compact`]: compaction and the bulk `update_graph`, both building a new
//!   generation with the importer and switching to it atomically;
//! - [`verify`]: the read-only check of `CURRENT`, the free list and the log
//!   (`flashgnn verify` on a mutated dataset).
//!
//! Architecture invariants:
//! - an operation is acknowledged only after its frame is written and
//!   fdatasync'ed; it becomes visible to readers (published) at the same
//!   moment, in sequence order;
//! - a batch is validated completely before anything is logged, so the log
//!   holds only batches that apply;
//! - the base dataset of a generation is never modified; generation 0 (the
//!   user's dataset directory) is never deleted;
//! - a crash at any point leaves `CURRENT` naming a generation whose base and
//!   log are complete; anything else under `mut/` is a leftover, removed on the
//!   next writable open.

pub mod batch;
pub mod compact;
pub mod current;
pub mod graph;
pub mod verify;
pub mod wal;

pub use compact::{CompactReport, UpdateGraphInput};
pub use graph::{
    check_batch_len, op_fields, published_snapshot, GraphOptions, GraphStats, MutableGraph, MAX_BATCH_OPS, OPS,
};
pub use verify::{verify_log, verify_log_frames, LogVerifyReport};
pub use wal::ReplayReport;

/// Errors of the mutable store.
#[derive(Debug, thiserror::Error)]
pub enum MutError {
    /// A bad argument (names the argument, the value and the bound).
    #[error("{0}")]
    Invalid(String),
    /// A log, `CURRENT` or free list failed a check (names file and offset).
    #[error("{0}")]
    Corrupt(String),
    /// The graph cannot take writes (read-only, closed, or failed earlier).
    #[error("{0}")]
    Unavailable(String),
    #[error(transparent)]
    Io(#[from] flashgnn_io::IoError),
    #[error(transparent)]
    Store(#[from] flashgnn_store::StoreError),
    #[error(transparent)]
    Build(#[from] flashgnn_build::BuildError),
}

impl From<flashgnn_store::OverlayError> for MutError {
    fn from(e: flashgnn_store::OverlayError) -> Self {
        match e {
            flashgnn_store::OverlayError::Invalid(m) => MutError::Invalid(m),
            flashgnn_store::OverlayError::Store(s) => MutError::Store(s),
        }
    }
}

pub type Result<T, E = MutError> = std::result::Result<T, E>;

/// A failed check of a log, `CURRENT` or free list at byte offset `offset`
/// of `file`: "`{file}: byte offset {offset}: {msg}`".
pub(crate) fn corrupt(file: &str, offset: u64, msg: impl std::fmt::Display) -> MutError {
    MutError::Corrupt(format!("{file}: byte offset {offset}: {msg}"))
}

//! Input readers. Each reader checks every value where it reads it and
//! reports positions in the input's own terms (line/column for text,
//! row and byte offset for binary arrays).
//!
//! - [`npy`]: `.npy` arrays and headerless raw arrays (npy directory, IGB).
//! - [`text`]: SNAP-style edge lists and OGB CSVs, plain or gzip.
//! - [`detect`]: turns an input path + options into an [`Inputs`] bundle.

pub mod detect;
pub mod npy;
pub mod ogb_typed;
pub mod text;
pub mod typed;

use flashgnn_format::Dtype;

use crate::Result;

/// Largest node count a build accepts: ids are packed in 32-bit halves of the
/// sort key (`dst << 32 | src`), and `u32::MAX` is kept free as a sentinel.
pub const NODES_MAX: u64 = u32::MAX as u64;

/// A stream of directed edges `(src, dst)`.
pub trait EdgeSource: Send {
    /// Append up to `max` edges to `out`; Ok(false) at the end. Every id is
    /// checked: not negative, representable, and `< num_nodes` when known.
    fn next_batch(&mut self, out: &mut Vec<(u64, u64)>, max: usize) -> Result<bool>;
    /// Progress in input bytes.
    fn bytes_total(&self) -> u64;
    fn bytes_done(&self) -> u64;
    /// Edges this source will yield, when known before reading (npy arrays):
    /// sizes the external sort's buckets. A hint, never a bound.
    fn edges_hint(&self) -> Option<u64> {
        None
    }
    /// Set the declared node count after construction.
    fn set_num_nodes(&mut self, n: Option<u64>);
    /// Lines skipped in skip mode, with the first few messages.
    fn skipped(&self) -> (u64, Vec<String>) {
        (0, Vec::new())
    }
}

/// A stream of fixed-width rows (feature tables).
pub trait RowSource: Send {
    fn file(&self) -> String;
    fn dim(&self) -> u32;
    fn dtype(&self) -> Dtype;
    /// Row count when known before reading (npy); None for text.
    fn rows(&self) -> Option<u64>;
    /// Append up to `n` rows as raw little-endian bytes of `dtype()`; returns rows appended (0 at end).
    fn next_rows(&mut self, n: usize, out: &mut Vec<u8>) -> Result<usize>;
    /// Human position of row `r` for error messages.
    fn position(&self, r: u64) -> String;
}

/// A stream of scalar values (labels, split ids) as f64 with positions.
// `len` is the count when known before reading, not a container's size.
#[allow(clippy::len_without_is_empty)]
pub trait ValueSource: Send {
    fn file(&self) -> String;
    fn len(&self) -> Option<u64>;
    fn next_values(&mut self, n: usize, out: &mut Vec<f64>) -> Result<usize>;
    fn position(&self, i: u64) -> String;
    /// The node count, once known (before the first `next_values`): a
    /// source keyed by node id (`node label` lines) checks its ids against
    /// it and then yields one value per node.
    fn set_num_nodes(&mut self, _n: u64) -> Result<()> {
        Ok(())
    }
}

/// What an input directory or file provides.
pub struct Inputs {
    pub format: String,
    pub edges: Box<dyn EdgeSource>,
    pub num_nodes: Option<u64>,
    pub features: Option<Box<dyn RowSource>>,
    pub labels: Option<Box<dyn ValueSource>>,
    pub splits: Vec<(String, Box<dyn ValueSource>)>,
    /// Parts of the input found but not imported, with the reason.
    pub notes: Vec<String>,
}

/// Check one edge endpoint read as a wide integer.
#[inline]
pub fn check_id(v: i128, num_nodes: Option<u64>, file: &str, pos: impl FnOnce() -> String) -> Result<u64> {
    if v < 0 {
        return Err(crate::BuildError::input(file, pos(), format!("negative node id {v} (ids must be >= 0)")));
    }
    if let Some(n) = num_nodes {
        if v >= n as i128 {
            return Err(crate::BuildError::input(file, pos(), format!("node id {v} >= declared node count {n}")));
        }
    } else if v >= NODES_MAX as i128 {
        return Err(crate::BuildError::input(
            file,
            pos(),
            format!("node id {v} overflows the supported id range (must be < {NODES_MAX})"),
        ));
    }
    Ok(v as u64)
}

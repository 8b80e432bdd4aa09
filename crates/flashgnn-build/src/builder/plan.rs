//! The plan made before any data is read: the node count the inputs
//! declare, where feature rows go (inline or a separate `features.fg`) and
//! in which dtype, and the sort chunk the memory budget leaves.
//!
//! Invariants: per-node arrays are charged against `--memory-budget` before
//! the sort chunk is sized, and a budget that leaves less than
//! [`SORT_CHUNK_MIN_BYTES`] is refused with the minimum it needs; options
//! that contradict the input are refused here, before any file is written.

use flashgnn_format::layout::{FeaturePlacement, SLOT_HEADER_BYTES};
use flashgnn_format::Dtype;

use super::{FIXED_OVERHEAD_BYTES, SORT_CHUNK_MIN_BYTES};
use crate::options::{BuildOptions, FeatureLayout, Reorder};
use crate::source::{Inputs, RowSource, NODES_MAX};
use crate::{BuildError, Result};

/// A row is stored inline when it takes at most this fraction of a page, so
/// that several slots (and their neighbor lists) share each page.
const INLINE_ROW_FRACTION: u32 = 4;

/// `--page-size` must be a power of two the format supports.
pub(super) fn check_page_size(opts: &BuildOptions) -> Result<()> {
    if !opts.page_size.is_power_of_two()
        || !(flashgnn_format::PAGE_SIZE_MIN..=flashgnn_format::PAGE_SIZE_MAX).contains(&opts.page_size)
    {
        return Err(BuildError::config(format!(
            "--page-size {} must be a power of two in [{}, {}]",
            opts.page_size,
            flashgnn_format::PAGE_SIZE_MIN,
            flashgnn_format::PAGE_SIZE_MAX
        )));
    }
    Ok(())
}

/// The node count known before the edges are read: declared, or the rows
/// of the feature table or label array (which must agree).
pub(super) fn declared_nodes(opts: &BuildOptions, inputs: &Inputs) -> Result<Option<u64>> {
    let mut n = inputs.num_nodes;
    let mut origin = if n.is_some() { "the declared node count".to_string() } else { String::new() };
    let mut check = |count: Option<u64>, what: String| -> Result<()> {
        if let Some(c) = count {
            match n {
                Some(prev) if prev != c => {
                    return Err(BuildError::config(format!(
                        "{what} has {c} rows but {origin} is {prev}: they must agree"
                    )));
                }
                None => {
                    n = Some(c);
                    origin = format!("{what} ({c} rows)");
                }
                _ => {}
            }
        }
        Ok(())
    };
    if let Some(f) = &inputs.features {
        check(f.rows(), f.file())?;
    }
    if let Some(l) = &inputs.labels {
        check(l.len(), l.file())?;
    }
    if let Some(n) = n {
        if n >= NODES_MAX {
            return Err(BuildError::config(format!("node count {n} exceeds the supported maximum {}", NODES_MAX - 1)));
        }
    }
    let _ = opts;
    Ok(n)
}

/// Where and how feature rows are stored.
pub(super) struct FeaturePlan {
    pub(super) dim: u32,
    pub(super) dtype: Dtype,
    pub(super) placement: FeaturePlacement,
    /// Separate placement without relabelling: the side thread writes the
    /// final `features.fg` (no stage).
    pub(super) direct_final: bool,
}

/// The feature plan: dimension and dtype (the input's, or
/// `--synthetic-features`, converted to `--feature-dtype`), and placement.
pub(super) fn plan_features(opts: &BuildOptions, features: Option<&dyn RowSource>) -> Result<FeaturePlan> {
    let (feat_dim, src_dtype) = match (features, opts.synthetic_features) {
        (Some(f), None) => (f.dim(), f.dtype()),
        (None, Some(d)) => (d, Dtype::Float32),
        (None, None) => (0, Dtype::Float32),
        (Some(f), Some(_)) => {
            return Err(BuildError::config(format!(
                "--synthetic-features given but the input has features ({})",
                f.file()
            )))
        }
    };
    let feat_dtype = opts.feature_dtype.unwrap_or(src_dtype);
    if !feat_dtype.is_float() {
        return Err(BuildError::config(format!(
            "--feature-dtype {} must be float16, float32 or float64",
            feat_dtype.name()
        )));
    }
    let row_bytes = feat_dim as u64 * feat_dtype.size() as u64;
    let fits_inline = SLOT_HEADER_BYTES as u64 + row_bytes + 4 <= opts.page_size as u64;
    let placement = match opts.feature_layout {
        FeatureLayout::Inline if !fits_inline => {
            return Err(BuildError::config(format!(
                "--feature-layout inline: a {row_bytes}-byte feature row does not fit a {}-byte page with its slot header; use --feature-layout separate or a larger --page-size",
                opts.page_size
            )))
        }
        FeatureLayout::Inline => FeaturePlacement::Inline,
        // No feature bytes: nothing to separate (and no features.fg to write).
        FeatureLayout::Separate if row_bytes == 0 => FeaturePlacement::Inline,
        FeatureLayout::Separate => FeaturePlacement::Separate,
        FeatureLayout::Auto if row_bytes * INLINE_ROW_FRACTION as u64 <= opts.page_size as u64 => FeaturePlacement::Inline,
        FeatureLayout::Auto => FeaturePlacement::Separate,
    };
    let direct_final = placement == FeaturePlacement::Separate && opts.reorder == Reorder::None;
    Ok(FeaturePlan { dim: feat_dim, dtype: feat_dtype, placement, direct_final })
}

/// The external-sort chunk: the budget less the fixed I/O allowance and the
/// per-node arrays of a declared node count.
pub(super) fn sort_chunk_bytes(opts: &BuildOptions, declared: Option<u64>) -> Result<u64> {
    let per_node = 4 + if opts.reorder != Reorder::None { 12 } else { 0 };
    let node_bytes = declared.unwrap_or(0) * per_node;
    let chunk_bytes = opts.memory_budget.saturating_sub(FIXED_OVERHEAD_BYTES + node_bytes);
    if chunk_bytes < SORT_CHUNK_MIN_BYTES {
        return Err(BuildError::config(format!(
            "--memory-budget {} bytes is too small: it must cover {} MiB of buffers, {per_node} B per node ({} nodes) and an {} MiB sort chunk, i.e. at least {} bytes",
            opts.memory_budget,
            FIXED_OVERHEAD_BYTES >> 20,
            declared.unwrap_or(0),
            SORT_CHUNK_MIN_BYTES >> 20,
            FIXED_OVERHEAD_BYTES + node_bytes + SORT_CHUNK_MIN_BYTES
        )));
    }
    Ok(chunk_bytes)
}

/// Declared class count: --num-classes, or IGB's label file (19 / 2K).
pub(super) fn num_classes(opts: &BuildOptions, format: &str) -> Option<u64> {
    opts.num_classes.or(match (format, opts.igb_classes.as_str()) {
        ("igb", "19") => Some(19),
        ("igb", "2K") => Some(2983),
        _ => None,
    })
}

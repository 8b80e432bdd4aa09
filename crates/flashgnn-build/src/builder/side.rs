//! The side thread: features, then labels, then splits, written while the
//! edge phase runs when the node count is known up front (after it
//! otherwise). What it wrote comes back as a [`Side`] for the manifest.
//!
//! Invariants: it writes only into the temporary directory; it stops at the
//! next `Progress::check` once the build is cancelled or the edge phase
//! failed; every value it reads is checked where it is read (see
//! `features.rs`, `labels.rs`).

use std::path::Path;
use std::time::Instant;

use flashgnn_format::manifest::{split_file, LabelInfo, FEATURES_FILE, FEATURE_CRC_FILE, LABELS_FILE};
use flashgnn_format::Dtype;

use super::features::write_features;
use super::labels::{make_splits, write_labels, write_split};
use crate::options::BuildOptions;
use crate::progress::Progress;
use crate::source::{RowSource, ValueSource};
use crate::Result;

/// What the side thread wrote, for the manifest and the layout pass.
pub(super) struct Side {
    pub(super) feature_seconds: f64,
    pub(super) files: Vec<(String, u64, u32)>,
    pub(super) labels: Option<LabelInfo>,
    pub(super) splits: Vec<(String, u64)>,
    pub(super) nan_replaced: u64,
    /// Rows staged in `features.stage` (None when written final or absent).
    pub(super) staged: bool,
    /// How `--make-splits` drew the splits: "stratified", "random" (no
    /// labels to stratify by) or "" (not made here).
    pub(super) splits_made: String,
}

/// The side thread's [`Side`]: finished, or still running (joined by
/// `finish_build` only once the layout pass is done).
pub(super) enum SideLater<'a> {
    Ready(Side),
    Running(Box<dyn FnOnce() -> Result<Side> + 'a>),
}

impl SideLater<'_> {
    pub(super) fn get(self) -> Result<Side> {
        match self {
            SideLater::Ready(s) => Ok(s),
            SideLater::Running(join) => join(),
        }
    }
}

pub(super) struct SideParams<'a> {
    pub(super) tmp: &'a Path,
    pub(super) opts: &'a BuildOptions,
    pub(super) feat_dtype: Dtype,
    pub(super) direct_final: bool,
    pub(super) page_size: u32,
    pub(super) progress: &'a Progress,
    pub(super) num_classes: Option<u64>,
    /// Typed builds: the node type's index and first global id; its files
    /// are `t<i>.*` and its feature rows' CRCs bound to global ids.
    pub(super) typed: Option<(usize, u64)>,
}

impl SideParams<'_> {
    pub(super) fn labels_file(&self) -> String {
        match self.typed {
            Some((t, _)) => flashgnn_format::types::labels_file(t),
            None => LABELS_FILE.into(),
        }
    }
    pub(super) fn split_file(&self, name: &str) -> String {
        match self.typed {
            Some((t, _)) => flashgnn_format::types::split_file(t, name),
            None => split_file(name),
        }
    }
    pub(super) fn features_files(&self) -> (String, String) {
        match self.typed {
            Some((t, _)) => (flashgnn_format::types::features_file(t), flashgnn_format::types::feature_crc_file(t)),
            None => (FEATURES_FILE.into(), FEATURE_CRC_FILE.into()),
        }
    }
}

/// Stream features (converted), labels and splits to their files.
pub(super) fn side_work(
    p: &SideParams,
    num_nodes: u64,
    features: Option<Box<dyn RowSource>>,
    labels: Option<Box<dyn ValueSource>>,
    splits: Vec<(String, Box<dyn ValueSource>)>,
) -> Result<Side> {
    let t = Instant::now();
    let mut side = Side {
        feature_seconds: 0.0,
        files: Vec::new(),
        labels: None,
        splits: Vec::new(),
        nan_replaced: 0,
        staged: false,
        splits_made: String::new(),
    };
    if let Some(mut f) = features {
        write_features(p, num_nodes, f.as_mut(), &mut side)?;
    }
    side.feature_seconds = t.elapsed().as_secs_f64();
    // Kept (4 B/node) only when --make-splits will stratify by them.
    let fractions =
        p.opts.make_splits.or(if p.opts.input.join("processed").is_dir() { Some((0.6, 0.2, 0.2)) } else { None });
    // A typed build draws splits for the labeled node types only.
    let fractions = fractions.filter(|_| p.typed.is_none() || labels.is_some());
    let stratify = splits.is_empty() && fractions.is_some();
    let mut label_values: Option<Vec<i32>> = None;
    if let Some(l) = labels {
        let (info, bytes, crc, values) = write_labels(p, num_nodes, l, stratify)?;
        side.labels = Some(info);
        side.files.push((p.labels_file(), bytes, crc));
        label_values = stratify.then_some(values);
    }
    let mut have_splits = false;
    for (name, s) in splits {
        let (count, bytes, crc) = write_split(p, num_nodes, &name, s)?;
        side.splits.push((name.clone(), count));
        side.files.push((p.split_file(&name), bytes, crc));
        have_splits = true;
    }
    if !have_splits {
        if let Some(fr) = fractions {
            side.splits_made = if label_values.is_some() { "stratified" } else { "random" }.into();
            for (name, count, bytes, crc) in make_splits(p, num_nodes, fr, label_values.as_deref())? {
                side.splits.push((name.clone(), count));
                side.files.push((p.split_file(&name), bytes, crc));
            }
        }
    }
    Ok(side)
}

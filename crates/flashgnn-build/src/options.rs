//! Build options (the `flashgnn build` flags).

use std::path::PathBuf;

pub use crate::source::detect::InputFormat;

use flashgnn_format::Dtype;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelfLoops {
    /// Keep self-loops found in the input (default: the input is the truth).
    Keep,
    /// Remove every self-loop.
    Drop,
    /// Ensure exactly one self-loop per node (existing ones are replaced).
    Add,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reorder {
    None,
    /// Highest in-degree first: hubs share pages, so a small cache of the
    /// first pages absorbs most accesses on power-law graphs.
    Degree,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeatureLayout {
    /// Inline when a row takes at most a quarter page (see `builder/plan.rs`).
    Auto,
    Inline,
    Separate,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NanPolicy {
    Error,
    /// Replace NaN/Inf with 0 and report how many were replaced.
    Zero,
}

/// What a build reads back and checks before it publishes (`--verify`):
/// the store's verify scopes, by the same names.
pub type BuildVerify = flashgnn_store::VerifyScope;

/// Every value of each option enum and its name (the `flashgnn build` flag
/// value): the one list the bindings parse and the CLI offers.
impl SelfLoops {
    pub const ALL: [SelfLoops; 3] = [SelfLoops::Keep, SelfLoops::Drop, SelfLoops::Add];

    pub fn name(self) -> &'static str {
        match self {
            SelfLoops::Keep => "keep",
            SelfLoops::Drop => "drop",
            SelfLoops::Add => "add",
        }
    }
}

impl Reorder {
    pub const ALL: [Reorder; 2] = [Reorder::None, Reorder::Degree];

    pub fn name(self) -> &'static str {
        match self {
            Reorder::None => "none",
            Reorder::Degree => "degree",
        }
    }
}

impl FeatureLayout {
    pub const ALL: [FeatureLayout; 3] = [FeatureLayout::Auto, FeatureLayout::Inline, FeatureLayout::Separate];

    pub fn name(self) -> &'static str {
        match self {
            FeatureLayout::Auto => "auto",
            FeatureLayout::Inline => "inline",
            FeatureLayout::Separate => "separate",
        }
    }
}

impl NanPolicy {
    pub const ALL: [NanPolicy; 2] = [NanPolicy::Error, NanPolicy::Zero];

    pub fn name(self) -> &'static str {
        match self {
            NanPolicy::Error => "error",
            NanPolicy::Zero => "zero",
        }
    }
}

#[derive(Debug, Clone)]
pub struct BuildOptions {
    pub input: PathBuf,
    pub output: PathBuf,
    pub format: InputFormat,
    pub symmetrize: bool,
    /// Typed inputs: PyG's `T.ToUndirected()` (docs/build.md): a relation
    /// whose source and destination types are one is made undirected in
    /// place (reverse copies added, duplicates coalesced); any other gets a
    /// new edge type `(dst, "rev_" + rel, src)` of its flipped edges,
    /// unless that type is already there.
    pub add_reverse: bool,
    /// Typed inputs: leave the per-relation edge bases out of the slots
    /// (format version 3 slots: 8 B less per relation per node, batches
    /// without `e_id`). Homogeneous datasets have none either way.
    pub no_edge_ids: bool,
    pub dedup: bool,
    pub self_loops: SelfLoops,
    pub feature_dtype: Option<Dtype>,
    pub feature_layout: FeatureLayout,
    pub reorder: Reorder,
    pub page_size: u32,
    pub memory_budget: u64,
    /// Declared node count (required for headerless inputs without a shape).
    pub num_nodes: Option<u64>,
    /// Shape and dtype of a headerless raw feature file.
    pub feat_shape: Option<(u64, u32)>,
    pub feat_dtype: Option<Dtype>,
    /// Generate D-dimensional features when the input has none.
    pub synthetic_features: Option<u32>,
    /// Edge-list inputs: a labels file, `node label` per line (SNAP's
    /// labelled sets; nodes not listed are unlabeled) or a `.npy` array [N].
    pub labels: Option<PathBuf>,
    /// Edge-list inputs: a feature table, `.npy` [N, D] or text with one row
    /// of D numbers per line, row = node id.
    pub features: Option<PathBuf>,
    /// Random train/val/test fractions when the input has no splits.
    pub make_splits: Option<(f64, f64, f64)>,
    pub igb_classes: String,
    pub ogb_split: Option<String>,
    pub skip_bad_lines: bool,
    pub nan: NanPolicy,
    /// What is read back before publishing (default: encoded).
    pub verify: BuildVerify,
    pub seed: u64,
    /// Replace an existing flashgnn dataset at `output` (never anything
    /// else: see `flashgnn_io::check_output`).
    pub force: bool,
    /// Declared class count: a label `>= num_classes` is refused with its
    /// file, row, value and bound, and the manifest records this count. IGB
    /// inputs declare theirs through `igb_classes` (19 or 2983).
    pub num_classes: Option<u64>,
    /// The dataset id (format version 2) every checksum is bound to. `None`
    /// (the default): a fresh random id per build, so two builds of the same
    /// input differ and a page copied between them is refused. Fix it only
    /// where byte-identical rebuilds are wanted (tests, reproducible builds);
    /// 0 is refused.
    pub dataset_id: Option<u64>,
    /// `--link-split VAL,TEST`: hold out these fractions of the input's
    /// distinct edge pairs as link-prediction validation and test positives
    /// (each with `neg_per_pos` fixed negatives), removed with their
    /// reverses from the message-passing graph (`builder/linksplit.rs`).
    pub link_split: Option<(f64, f64)>,
    /// `--disjoint-train-ratio R`: this fraction of the remaining pairs is
    /// supervision only (PyG's `disjoint_train_ratio`); `None` = 0.
    pub disjoint_train_ratio: Option<f64>,
    /// `--neg-per-pos K`: negative destinations per validation and test positive.
    pub neg_per_pos: u32,
    /// `--link-split-seed S` (default: `seed`).
    pub link_split_seed: Option<u64>,
    /// `--link-split-files DIR`: a given link split as `link_<split>_<part>.npy`
    /// int64 arrays (what the OGB `.pt` import stages), checked and copied.
    pub link_split_files: Option<PathBuf>,
    /// `--link-edge-type SRC__REL__DST`: the input edge type a typed input's
    /// `--link-split` draws from (default: its only one).
    pub link_edge_type: Option<String>,
    /// Where the published output is written: the tmp directory, every
    /// output file in it, their fsyncs and the publishing rename. The real
    /// file system by default; tests pass a simulated disk (flashgnn-io
    /// feature `sim-disk`) to check the crash states. Scratch files deleted
    /// before publishing (sort runs, buckets, stages) always go to the real
    /// file system.
    pub disk: flashgnn_io::Disk,
}

impl BuildOptions {
    pub fn new(input: impl Into<PathBuf>, output: impl Into<PathBuf>) -> Self {
        BuildOptions {
            input: input.into(),
            output: output.into(),
            format: InputFormat::Auto,
            symmetrize: false,
            add_reverse: false,
            no_edge_ids: false,
            dedup: false,
            self_loops: SelfLoops::Keep,
            feature_dtype: None,
            feature_layout: FeatureLayout::Auto,
            reorder: Reorder::None,
            page_size: flashgnn_format::DEFAULT_PAGE_SIZE,
            memory_budget: 2 << 30,
            num_nodes: None,
            feat_shape: None,
            feat_dtype: None,
            synthetic_features: None,
            labels: None,
            features: None,
            make_splits: None,
            igb_classes: "19".into(),
            ogb_split: None,
            skip_bad_lines: false,
            nan: NanPolicy::Error,
            verify: BuildVerify::Encoded,
            seed: 0,
            force: false,
            num_classes: None,
            dataset_id: None,
            link_split: None,
            disjoint_train_ratio: None,
            neg_per_pos: 1,
            link_split_seed: None,
            link_split_files: None,
            link_edge_type: None,
            disk: flashgnn_io::Disk::Real,
        }
    }
}

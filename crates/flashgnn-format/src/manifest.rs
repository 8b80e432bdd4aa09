//! `manifest.json`: the dataset's table of contents, written last during a
//! build (it is what makes a directory a dataset) and checked first on open.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::dtype::Dtype;
use crate::error::{FormatError, Result};
use crate::layout::{FeaturePlacement, Layout};
use crate::types::TypeTable;
use crate::{FORMAT_VERSION, FORMAT_VERSION_MIN};

pub const MANIFEST_FILE: &str = "manifest.json";
pub const MANIFEST_MAGIC: &str = "flashgnn-dataset";
/// Key of the manifest's own CRC32C (over its canonical JSON without it).
pub const MANIFEST_CHECKSUM_KEY: &str = "checksum";
/// Relabelling names a reader accepts.
pub const REORDERS: [&str; 2] = ["none", "degree"];
pub const GRAPH_FILE: &str = "graph.fg";
pub const OVERFLOW_FILE: &str = "overflow.fg";
pub const FEATURES_FILE: &str = "features.fg";
pub const FEATURE_CRC_FILE: &str = "feature_crc.npy";
pub const LABELS_FILE: &str = "labels.npy";
/// The most classes a dataset may declare: class ids are `i32` (labels are
/// in `[0, 2^31 - 1)`), so a count above `2^31 - 1` names classes no label can
/// hold (and a classifier of that width cannot be allocated).
pub const MAX_NUM_CLASSES: u64 = i32::MAX as u64;
pub const NODE_ORDER_FILE: &str = "node_order.npy";
pub const NODE_INDEX_FILE: &str = "node_index.npy";

pub fn split_file(name: &str) -> String {
    format!("split_{name}.npy")
}

/// The link-prediction splits a dataset may hold, in this order.
pub const LINK_SPLITS: [&str; 3] = ["train", "val", "test"];
/// The arrays of one link split (`link_<split>_<part>.npy`, all `<i8`
/// 1-D): positive sources and destinations, the negative destinations
/// per positive (`[n_pos · K]`, row-major `[n_pos, K]`), and free
/// negative pairs (sources and destinations) where a given split has them.
pub const LINK_PARTS: [&str; 5] = ["src", "dst", "neg", "neg_src", "neg_dst"];

/// `link_<split>_<part>.npy`.
pub fn link_file(split: &str, part: &str) -> String {
    format!("link_{split}_{part}.npy")
}

/// A dataset's link-prediction split (`manifest.link_split`; docs/format.md
/// § *Link splits*). Absent from every dataset built without one, so those
/// stay byte-identical.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkSplitInfo {
    /// `"random"` (`--link-split`, drawn by the build) or `"given"` (an
    /// input's own split, e.g. OGB's `split/<name>/*.pt`).
    pub origin: String,
    /// Held-out units were unordered pairs {u, v} whose every edge (both
    /// directions) left the message-passing graph, and each positive is
    /// listed once: true with `--symmetrize` or an input found symmetric.
    pub undirected: bool,
    /// `--link-split-seed` (random only).
    pub seed: u64,
    /// `--link-split VAL,TEST` and `--disjoint-train-ratio` (random only).
    pub val_fraction: f64,
    pub test_fraction: f64,
    pub disjoint_train_ratio: f64,
    /// Distinct non-loop unordered pairs of the input (random only): the
    /// population the fractions apply to.
    pub input_pairs: u64,
    /// Input edges (copies, either direction) removed from the
    /// message-passing graph.
    pub held_out_edges: u64,
    /// Split name (`train`, `val`, `test`) → its counts.
    pub splits: BTreeMap<String, LinkSplitPart>,
    /// Typed datasets: the stored edge type (`src__rel__dst`) the split is
    /// of; its files hold local ids (sources of `src`, destinations and
    /// negatives of `dst`). Absent for a homogeneous dataset, whose manifest
    /// so stays byte-identical; a manifest written before it parses as None.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge_type: Option<String>,
}

/// The counts of one link split: they size its files.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkSplitPart {
    /// Positive edges: `link_<s>_src.npy` and `link_<s>_dst.npy` hold this many.
    pub positives: u64,
    /// `K`: negative destinations per positive in `link_<s>_neg.npy`
    /// (`positives · K` values); 0 = no such file.
    pub neg_per_positive: u64,
    /// Free negative pairs in `link_<s>_neg_src.npy` / `_neg_dst.npy`; 0 = none.
    pub neg_pairs: u64,
}

/// `manifest.link_split.origin` values.
pub const LINK_ORIGINS: [&str; 2] = ["random", "given"];

impl LinkSplitInfo {
    /// The section's own fields: a known origin, fractions in [0, 1) that
    /// leave training edges (what `--link-split` accepts), a drawn split's
    /// three splits, a given split's zeros (docs/format.md § *Link splits*).
    pub fn check(&self, path: &str) -> Result<()> {
        let bad = |m: String| Err(FormatError::invalid(path, format!("link_split.{m}")));
        match self.origin.as_str() {
            "random" => {
                for (name, v) in [
                    ("val_fraction", self.val_fraction),
                    ("test_fraction", self.test_fraction),
                    ("disjoint_train_ratio", self.disjoint_train_ratio),
                ] {
                    if !(0.0..1.0).contains(&v) {
                        return bad(format!("{name} = {v} is out of bounds (must be in [0, 1))"));
                    }
                }
                let sum = self.val_fraction + self.test_fraction;
                if sum >= 1.0 {
                    return bad(format!("val_fraction + test_fraction = {sum} is out of bounds (must be < 1)"));
                }
                if let Some(s) = LINK_SPLITS.iter().find(|s| !self.splits.contains_key(**s)) {
                    return bad(format!("splits has no {s:?}: a drawn (\"random\") split has all of {LINK_SPLITS:?}"));
                }
            }
            "given" => {
                let fields = [
                    ("seed", self.seed as f64),
                    ("val_fraction", self.val_fraction),
                    ("test_fraction", self.test_fraction),
                    ("disjoint_train_ratio", self.disjoint_train_ratio),
                    ("input_pairs", self.input_pairs as f64),
                ];
                if let Some((name, v)) = fields.iter().find(|(_, v)| *v != 0.0) {
                    return bad(format!("{name} = {v} is out of bounds (must be 0 for a given split)"));
                }
            }
            o => return bad(format!("origin = {o:?} is not one of {LINK_ORIGINS:?}")),
        }
        Ok(())
    }
}

impl LinkSplitPart {
    /// Elements of part `part`'s file, or None when this split has no such file.
    pub fn len_of(&self, part: &str) -> Option<u64> {
        match part {
            "src" | "dst" => Some(self.positives),
            "neg" => (self.neg_per_positive > 0).then(|| self.positives.saturating_mul(self.neg_per_positive)),
            "neg_src" | "neg_dst" => (self.neg_pairs > 0).then_some(self.neg_pairs),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileEntry {
    pub bytes: u64,
    pub crc32c: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeatureInfo {
    pub dim: u32,
    pub dtype: Dtype,
    /// "inline" or "separate".
    pub placement: String,
    /// True when the rows were generated (`--synthetic-features`).
    #[serde(default)]
    pub synthetic: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GraphInfo {
    pub inline_cap: u32,
    pub slot_bytes: u32,
    pub slots_per_page: u32,
    pub overflow_entries: u64,
    /// Typed graphs (version 3): per-relation counts in every slot
    /// ([`Layout::rel_counts`]); absent (0) otherwise.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rel_counts: u32,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DegreeStats {
    pub min: u64,
    pub max: u64,
    pub mean: f64,
    pub median: u64,
    pub p99: u64,
    /// Nodes with no edge in either direction. (Manifests written before
    /// `no_neighbors` existed counted nodes with no stored neighbor here.)
    pub isolated: u64,
    /// Nodes with no stored neighbor (no in-edge; `None` in older manifests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_neighbors: Option<u64>,
    pub spilled_nodes: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LabelInfo {
    pub num_classes: u64,
    pub labeled: u64,
}

/// What the build did, for `info` and for reproducibility.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BuildInfo {
    pub source: String,
    pub source_format: String,
    pub symmetrize: bool,
    pub dedup: bool,
    pub self_loops: String,
    pub input_edges: u64,
    pub self_loops_dropped: u64,
    pub self_loops_added: u64,
    /// With `dedup`: repeated copies of the same input edge that were removed
    /// (never the reverse copies `symmetrize` added).
    pub duplicates_removed: u64,
    /// With `symmetrize` and `dedup`: added reverse copies removed because
    /// the entry was there already (the input held that edge too).
    #[serde(default)]
    pub reverse_duplicates_removed: u64,
    /// With `symmetrize`: distinct non-loop input edges `u -> v` ...
    #[serde(default)]
    pub input_edges_distinct: u64,
    /// ... and how many of them had their reverse `v -> u` in the input too
    /// (all of them: the input was already symmetric).
    #[serde(default)]
    pub input_edges_with_reverse: u64,
    /// How `--make-splits` drew the splits: "stratified" (by class), "random"
    /// (no labels) or "" (the input's own, or none).
    #[serde(default)]
    pub splits_made: String,
    pub preprocess_seconds: f64,
    pub feature_seconds: f64,
    pub layout_seconds: f64,
    pub total_seconds: f64,
    pub peak_rss_bytes: u64,
    pub memory_budget_bytes: u64,
    pub sort_runs: u64,
    /// Typed builds: `--add-reverse` (PyG's `T.ToUndirected()`) was applied.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub add_reverse: bool,
    /// Typed builds: what the build did per stored edge type, in
    /// `types.edge_types` order (empty for a homogeneous build).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub relations: Vec<RelationBuild>,
}

/// What a typed build did to one edge type (`BuildInfo::relations`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RelationBuild {
    /// `src__rel__dst`.
    pub edge_type: String,
    /// Edges read from its input file (0 for a type `--add-reverse` made).
    pub input_edges: u64,
    /// Entries `--add-reverse` added (reverse copies, or a new `rev_` type's edges).
    pub added_by_reverse: u64,
    pub self_loops_dropped: u64,
    pub self_loops_added: u64,
    /// Entries a dedup (`--dedup`, or `--add-reverse`'s coalescing) removed.
    pub duplicates_removed: u64,
    /// Entries stored (`types.edge_types[i].num_edges`).
    pub stored: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub magic: String,
    pub format_version: u32,
    pub created_by: String,
    pub page_size: u32,
    pub num_nodes: u64,
    /// Stored directed neighbor entries (after symmetrize/dedup/self-loops).
    pub num_edges: u64,
    pub id_bytes: u32,
    pub features: FeatureInfo,
    pub graph: GraphInfo,
    pub degree: DegreeStats,
    pub labels: Option<LabelInfo>,
    /// Split name -> number of seed ids.
    pub splits: BTreeMap<String, u64>,
    /// "none" or the relabelling used ("degree", ...).
    pub reorder: String,
    pub build: BuildInfo,
    pub files: BTreeMap<String, FileEntry>,
    /// Format version 2: the random 64-bit id every per-structure checksum
    /// of this dataset is bound to (also in each header page). Absent in
    /// version 1 (required in version 2, refused in version 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset_id: Option<u64>,
    /// Format version 3: node and edge types ([`crate::types`]). Absent for
    /// a homogeneous dataset (versions 1 and 2), which is the one-type case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub types: Option<TypeTable>,
    /// A link-prediction split (of one edge type in a typed dataset): absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_split: Option<LinkSplitInfo>,
}

/// Set the `checksum` of an arbitrary manifest-shaped JSON value and print it.
fn sealed(mut v: serde_json::Value) -> serde_json::Value {
    if let Some(o) = v.as_object_mut() {
        o.remove(MANIFEST_CHECKSUM_KEY);
    }
    let c = crate::checksum::crc(serde_json::to_string(&v).expect("value serialises").as_bytes());
    if let Some(o) = v.as_object_mut() {
        o.insert(MANIFEST_CHECKSUM_KEY.into(), c.into());
    }
    v
}

fn seal_value(v: serde_json::Value) -> String {
    serde_json::to_string_pretty(&sealed(v)).expect("value serialises")
}

/// Re-seal edited manifest text (tools and tests that edit manifests on
/// purpose). The result is *not* validated: a hostile but sealed manifest
/// must still be caught by the structural checks.
pub fn seal_json(path: &str, text: &str) -> Result<String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        FormatError::invalid(path, format!("line {} column {}: not valid JSON: {e}", e.line(), e.column()))
    })?;
    Ok(seal_value(v))
}

impl Manifest {
    /// Parse and validate. `path` names the file in errors.
    pub fn from_json(path: &str, text: &str) -> Result<Manifest> {
        let mut probe: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            FormatError::invalid(path, format!("line {} column {}: not valid JSON: {e}", e.line(), e.column()))
        })?;
        match probe.get("magic").and_then(|m| m.as_str()) {
            Some(MANIFEST_MAGIC) => {}
            other => {
                return Err(FormatError::BadMagic {
                    file: path.into(),
                    found: other.unwrap_or("<missing>").into(),
                    expected: MANIFEST_MAGIC.into(),
                })
            }
        }
        let version = probe.get("format_version").and_then(|v| v.as_u64()).unwrap_or(0);
        if !(FORMAT_VERSION_MIN as u64..=FORMAT_VERSION as u64).contains(&version) {
            return Err(FormatError::UnsupportedVersion {
                file: path.into(),
                found: version as u32,
                supported: FORMAT_VERSION,
            });
        }
        // The manifest's own checksum: CRC32C of its canonical form (compact
        // JSON, keys sorted, without the "checksum" key). A flipped bit in a
        // value that parses (a renamed key, a changed digit) is caught here.
        let stored = probe.as_object_mut().and_then(|o| o.remove(MANIFEST_CHECKSUM_KEY));
        let stored = stored.as_ref().and_then(|v| v.as_u64()).ok_or_else(|| {
            // Name where: the key with a damaged value, or the key missing
            // (its name damaged).
            let msg = match text.find(&format!("\"{MANIFEST_CHECKSUM_KEY}\"")) {
                Some(off) => format!("byte offset {off}: `{MANIFEST_CHECKSUM_KEY}` is not a non-negative integer"),
                None => {
                    format!("no `{MANIFEST_CHECKSUM_KEY}` field (a damaged key name?); expected a non-negative integer")
                }
            };
            FormatError::invalid(path, format!("manifest: {msg}"))
        })?;
        let computed = crate::checksum::crc(serde_json::to_string(&probe).expect("value serialises").as_bytes());
        if stored != computed as u64 {
            let offset = text.find(&format!("\"{MANIFEST_CHECKSUM_KEY}\"")).unwrap_or(0) as u64;
            return Err(FormatError::Checksum {
                file: path.into(),
                offset,
                what: "manifest (canonical JSON)".into(),
                stored: stored as u32,
                computed,
            });
        }
        let m: Manifest = serde_json::from_value(probe).map_err(|e| {
            FormatError::invalid(path, format!("manifest does not match format version {version}: {e}"))
        })?;
        match (version, m.dataset_id) {
            (1, Some(_)) => {
                return Err(FormatError::invalid(
                    path,
                    "`dataset_id` in a format version 1 manifest (version 1 has none)",
                ))
            }
            (v, None) if v >= 2 => {
                return Err(FormatError::invalid(path, format!("`dataset_id` missing: format version {v} requires it")))
            }
            (v, Some(0)) if v >= 2 => {
                return Err(FormatError::oob(path, 0, "dataset_id", 0, "!= 0 (0 is never written)"))
            }
            _ => {}
        }
        if (version >= 3) != m.types.is_some() {
            return Err(FormatError::invalid(
                path,
                format!(
                    "format version {version} with{} a `types` section: version 3 exactly has one",
                    if m.types.is_some() { "" } else { "out" }
                ),
            ));
        }
        m.layout(path)?;
        Ok(m)
    }

    /// Pretty JSON with the `checksum` field (see [`Manifest::from_json`]).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(&self.to_value()).expect("value serialises")
    }

    /// The manifest as [`Manifest::to_json`] writes it, `checksum` included,
    /// as a value (reports and the Python `Dataset.manifest` carry it).
    pub fn to_value(&self) -> serde_json::Value {
        sealed(serde_json::to_value(self).expect("manifest serialises"))
    }

    pub fn placement(&self) -> FeaturePlacement {
        if self.features.placement == "separate" {
            FeaturePlacement::Separate
        } else {
            FeaturePlacement::Inline
        }
    }

    /// The node and edge types: the `types` section, or the one-type view
    /// of a homogeneous dataset.
    pub fn type_table(&self) -> TypeTable {
        match &self.types {
            Some(t) => t.clone(),
            None => {
                let f = (self.features.dim > 0).then_some(crate::types::TypeFeatures {
                    dim: self.features.dim,
                    dtype: self.features.dtype,
                    synthetic: self.features.synthetic,
                });
                let mut t = TypeTable::homogeneous(self.num_nodes, self.num_edges, f);
                t.node_types[0].labels = self.labels.clone();
                t.node_types[0].splits = self.splits.clone();
                t
            }
        }
    }

    /// A typed manifest's own rules: rows, labels and splits live per type,
    /// so the top-level ones are empty; typed graphs are never relabelled.
    fn check_typed(&self, path: &str, t: &TypeTable, l: &Layout) -> Result<()> {
        if self.features.dim != 0 || self.labels.is_some() || !self.splits.is_empty() || self.reorder != "none" {
            return Err(FormatError::invalid(
                path,
                "a typed dataset keeps features, labels and splits per node type: top-level `features.dim` must be 0, \
                 `labels` null, `splits` empty and `reorder` \"none\"",
            ));
        }
        t.check(path, self.num_nodes, self.num_edges, l.rel_counts, self.page_size, self.dataset_id, &self.files)
    }

    /// Derive and check the layout; every stored derived value must agree.
    pub fn layout(&self, path: &str) -> Result<Layout> {
        if self.features.placement != "inline" && self.features.placement != "separate" {
            return Err(FormatError::invalid(
                path,
                format!("features.placement {:?} must be \"inline\" or \"separate\"", self.features.placement),
            ));
        }
        let l = Layout::new(
            path,
            self.page_size,
            self.num_nodes,
            self.num_edges,
            self.id_bytes,
            self.features.dim,
            self.features.dtype,
            self.placement(),
            self.graph.inline_cap,
            self.graph.overflow_entries,
        )?
        .with_dataset_id(self.dataset_id);
        let l = match (&self.types, self.graph.rel_counts) {
            (None, 0) => l,
            (None, r) => {
                return Err(FormatError::oob(path, 0, "graph.rel_counts", r as u64, "0 without a `types` section"))
            }
            (Some(_), r) => l.with_rel_counts(path, r, self.format_version >= 4)?,
        };
        if l.format_version() != self.format_version {
            return Err(FormatError::oob(
                path,
                0,
                "format_version",
                self.format_version as u64,
                format!(
                    "== {} for a {} graph {} a dataset id",
                    l.format_version(),
                    if self.types.is_some() { "typed" } else { "homogeneous" },
                    if self.dataset_id.is_some() { "with" } else { "without" }
                ),
            ));
        }
        if let Some(t) = &self.types {
            self.check_typed(path, t, &l)?;
        }
        if l.slot_bytes != self.graph.slot_bytes {
            return Err(FormatError::oob(
                path,
                0,
                "graph.slot_bytes",
                self.graph.slot_bytes as u64,
                format!("== {} derived from the layout", l.slot_bytes),
            ));
        }
        if l.slots_per_page != self.graph.slots_per_page {
            return Err(FormatError::oob(
                path,
                0,
                "graph.slots_per_page",
                self.graph.slots_per_page as u64,
                format!("== {}", l.slots_per_page),
            ));
        }
        let expect = [
            (crate::manifest::GRAPH_FILE, l.graph_file_bytes()),
            (crate::manifest::OVERFLOW_FILE, l.overflow_file_bytes()),
        ];
        for (name, bytes) in expect {
            match self.files.get(name) {
                Some(f) if f.bytes == bytes => {}
                Some(f) => {
                    return Err(FormatError::oob(
                        path,
                        0,
                        "file size in manifest",
                        f.bytes,
                        format!("== {bytes} for {name}"),
                    ))
                }
                None => return Err(FormatError::invalid(path, format!("manifest lists no entry for {name}"))),
            }
        }
        if !REORDERS.contains(&self.reorder.as_str()) {
            return Err(FormatError::invalid(path, format!("`reorder` {:?} is not one of {REORDERS:?}", self.reorder)));
        }
        for f in [NODE_ORDER_FILE, NODE_INDEX_FILE] {
            if self.reorder == "none" && self.files.contains_key(f) {
                return Err(FormatError::invalid(
                    path,
                    format!("`reorder` is \"none\" but `files` has an entry for {f}: inconsistent"),
                ));
            }
        }
        if self.reorder != "none" {
            for f in [NODE_ORDER_FILE, NODE_INDEX_FILE] {
                if !self.files.contains_key(f) {
                    return Err(FormatError::invalid(
                        path,
                        format!("`reorder` {:?} needs a `files` entry for {f}", self.reorder),
                    ));
                }
            }
        }
        if let Some(l) = self.labels.as_ref().filter(|l| l.num_classes > MAX_NUM_CLASSES) {
            return Err(FormatError::invalid(
                path,
                format!("labels.num_classes = {}: out of bounds (must be <= {MAX_NUM_CLASSES})", l.num_classes),
            ));
        }
        if self.labels.is_some() != self.files.contains_key(LABELS_FILE) {
            return Err(FormatError::invalid(
                path,
                format!("`labels` section and the `files` entry for {LABELS_FILE} disagree"),
            ));
        }
        if let Some(ls) = &self.link_split {
            // A typed dataset's split names one of its edge types; a
            // homogeneous one names none (its one edge type is implied).
            match (&self.types, &ls.edge_type) {
                (None, None) => {}
                (None, Some(e)) => {
                    return Err(FormatError::invalid(
                        path,
                        format!("link_split.edge_type = {e:?} in a homogeneous dataset (must be absent)"),
                    ))
                }
                (Some(_), None) => {
                    return Err(FormatError::invalid(
                        path,
                        "link_split.edge_type is missing: a typed dataset's split names its edge type",
                    ))
                }
                (Some(t), Some(e)) if !t.edge_types.iter().any(|x| x.key() == *e) => {
                    let have: Vec<String> = t.edge_types.iter().map(|x| x.key()).collect();
                    return Err(FormatError::invalid(
                        path,
                        format!("link_split.edge_type = {e:?} is not a stored edge type (types.edge_types: {have:?})"),
                    ));
                }
                (Some(_), Some(_)) => {}
            }
            ls.check(path)?;
            for (name, part) in &ls.splits {
                if !LINK_SPLITS.contains(&name.as_str()) {
                    return Err(FormatError::invalid(
                        path,
                        format!("link split {name:?}: expected one of {LINK_SPLITS:?}"),
                    ));
                }
                for p in LINK_PARTS {
                    let f = link_file(name, p);
                    if part.len_of(p).is_some() != self.files.contains_key(&f) {
                        let why = match part.len_of(p) {
                            Some(n) => format!("its counts need {n} values in {f}, which `files` does not list"),
                            None => format!("`files` lists {f}, which its counts (0) rule out"),
                        };
                        return Err(FormatError::invalid(path, format!("link split {name:?}: {why}")));
                    }
                }
            }
        }
        for name in self.splits.keys() {
            if !self.files.contains_key(&split_file(name)) {
                return Err(FormatError::invalid(
                    path,
                    format!("split {name:?} in `splits` has no `files` entry {}", split_file(name)),
                ));
            }
        }
        if l.placement == FeaturePlacement::Separate {
            match self.files.get(FEATURES_FILE) {
                Some(f) if f.bytes == l.features_file_bytes() => {}
                Some(f) => {
                    return Err(FormatError::oob(
                        path,
                        0,
                        "file size in manifest",
                        f.bytes,
                        format!("== {} for {FEATURES_FILE}", l.features_file_bytes()),
                    ))
                }
                None => return Err(FormatError::invalid(path, format!("manifest lists no entry for {FEATURES_FILE}"))),
            }
        }
        self.check_known_files(path, l.placement == FeaturePlacement::Separate)?;
        Ok(l)
    }

    /// Every `files` entry of a kind this reader knows (`features.fg`,
    /// `feature_crc.npy`, `labels.npy`, `split_*.npy`, `t<i>.*`,
    /// `link_<split>_<part>.npy`) must be one the rest of the manifest
    /// accounts for. Otherwise an edit that drops a type's features, a
    /// split or the `link_split` section (re-sealed) leaves a checksummed
    /// file nobody reads, and `verify` passes a dataset that no longer says
    /// what was built. Names of other kinds are left alone: a later additive
    /// section's files are checked by their whole-file CRC only
    /// (docs/format.md, version log, *Link splits*).
    fn check_known_files(&self, path: &str, separate: bool) -> Result<()> {
        let mut expected: std::collections::BTreeSet<String> =
            [GRAPH_FILE, OVERFLOW_FILE, NODE_ORDER_FILE, NODE_INDEX_FILE].iter().map(|s| s.to_string()).collect();
        if separate {
            expected.insert(FEATURES_FILE.into());
            expected.insert(FEATURE_CRC_FILE.into());
        }
        if self.labels.is_some() {
            expected.insert(LABELS_FILE.into());
        }
        expected.extend(self.splits.keys().map(|s| split_file(s)));
        if let Some(t) = &self.types {
            expected.extend(t.files());
        }
        if let Some(ls) = &self.link_split {
            for (name, part) in &ls.splits {
                expected.extend(LINK_PARTS.iter().filter(|p| part.len_of(p).is_some()).map(|p| link_file(name, p)));
            }
        }
        let typed_name = |f: &str| {
            f.strip_prefix('t')
                .and_then(|r| r.split_once('.'))
                .is_some_and(|(i, _)| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
        };
        let link_name = |f: &str| LINK_SPLITS.iter().any(|s| LINK_PARTS.iter().any(|p| f == link_file(s, p)));
        for f in self.files.keys() {
            let known = f == FEATURES_FILE
                || f == FEATURE_CRC_FILE
                || f == LABELS_FILE
                || (f.starts_with("split_") && f.ends_with(".npy"))
                || typed_name(f)
                || link_name(f);
            if known && !expected.contains(f) {
                return Err(FormatError::invalid(
                    path,
                    format!("`files` entry {f}: no section of the manifest accounts for it (a feature table, labels or split it does not declare)"),
                ));
            }
        }
        Ok(())
    }
}

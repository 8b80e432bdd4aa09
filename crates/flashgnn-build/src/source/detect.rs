//! Input layout detection: an input path plus options becomes [`Inputs`].
//!
//! | layout | recognised by | files |
//! |---|---|---|
//! | npy | `edge_index.npy` | `node_feat.npy`, `node_label.npy`, `{train,val,test}_idx.npy` |
//! | IGB | `processed/paper/` | `node_feat.npy`, `node_label_{19,2K}.npy`, `processed/paper__cites__paper/edge_index.npy` (large/full headerless) |
//! | OGB | `raw/edge.csv.gz` | `raw/node-feat.csv.gz`, `raw/node-label.csv.gz`, `raw/num-node-list.csv.gz`, `split/<name>/{train,valid,test}.csv.gz` |
//! | typed npy | `<src>__<rel>__<dst>/` folders (here or in `processed/`, but not IGB's homogeneous pair) | `source/typed.rs`; built by `builder/typed.rs` |
//! | OGB heterogeneous | `raw/relations/`, `raw/num-node-dict.csv.gz` | `raw/relations/<src>___<rel>___<dst>/edge.csv.gz`, `raw/node-feat/<type>/`, `raw/node-label/<type>/`, `split/<name>/<type>/`; `source/ogb_typed.rs` stages it as typed npy |
//! | SNAP | a regular file | text edge list, plain or `.gz` |
//!
//! This file is the importers' registry: a layout is its [`InputFormat`]
//! variant and name (below; the bindings and `flashgnn build --format` derive
//! from [`InputFormat::ALL`]), its rule in [`detect_format`] and its files in
//! [`open_inputs`]. A layout over existing readers (npy arrays, text, CSV) is a
//! change to this file alone; one that needs a new file reader adds that
//! reader's module under `source/` (declared in `source/mod.rs`).

use std::path::{Path, PathBuf};

use flashgnn_format::Dtype;

use super::npy::{NpyEdges, NpyRows, NpyValues};
use super::text::{CsvRows, PairLabels, TextEdges, TextValues};
use super::{Inputs, RowSource, ValueSource};
use crate::options::BuildOptions;
use crate::{BuildError, Result};

/// An input layout (`flashgnn build --format`); `Auto` detects it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputFormat {
    Auto,
    Npy,
    Igb,
    Ogb,
    Snap,
    /// Typed (heterogeneous) npy folders: `source/typed.rs`.
    TypedNpy,
    /// OGB's heterogeneous raw layout (ogbn-mag): `source/ogb_typed.rs`,
    /// staged into the typed npy layout.
    OgbTyped,
}

impl InputFormat {
    pub const ALL: [InputFormat; 7] = [
        InputFormat::Auto,
        InputFormat::Npy,
        InputFormat::Igb,
        InputFormat::Ogb,
        InputFormat::Snap,
        InputFormat::TypedNpy,
        InputFormat::OgbTyped,
    ];

    pub fn name(self) -> &'static str {
        match self {
            InputFormat::Auto => "auto",
            InputFormat::Npy => "npy",
            InputFormat::Igb => "igb",
            InputFormat::Ogb => "ogb",
            InputFormat::Snap => "snap",
            InputFormat::TypedNpy => "typed-npy",
            InputFormat::OgbTyped => "ogb-typed",
        }
    }
}

/// IGB's feature width (1024 x fp32 = 4 KiB per node).
const IGB_FEATURE_DIM: u32 = 1024;

/// Whether `path` starts with the npy magic (else: a headerless raw array).
pub(crate) fn is_npy(path: &Path) -> Result<bool> {
    use std::io::Read;
    let mut m = [0u8; 6];
    let mut f = flashgnn_io::open_regular(path)?;
    Ok(f.read_exact(&mut m).is_ok() && &m == b"\x93NUMPY")
}

/// Whether an input name is present: absent is `false`; a name that exists
/// but cannot be followed (dangling or looping link) is an error naming it,
/// never a silently skipped input.
fn present(path: &Path) -> Result<bool> {
    Ok(flashgnn_io::present(path)?)
}

pub fn detect_format(opts: &BuildOptions) -> Result<InputFormat> {
    let p = &opts.input;
    if !present(p)? {
        return Err(BuildError::config(format!("{}: input does not exist", p.display())));
    }
    if opts.format != InputFormat::Auto {
        return Ok(opts.format);
    }
    let meta = std::fs::metadata(p).map_err(|e| flashgnn_io::IoError::new("stat", p, None, e))?;
    if meta.is_file() {
        return Ok(InputFormat::Snap);
    }
    if !meta.is_dir() {
        return Err(BuildError::config(format!(
            "{}: input is {}: expected a text edge list file or an input directory",
            p.display(),
            flashgnn_io::regular::kind_of(&meta)
        )));
    }
    if present(&p.join("edge_index.npy"))? {
        return Ok(InputFormat::Npy);
    }
    // Edge folders `<src>__<rel>__<dst>/` (here or in processed/): typed,
    // but for IGB's homogeneous processed/ (paper/ and paper__cites__paper/ only).
    if super::typed::is_typed(p) {
        return Ok(InputFormat::TypedNpy);
    }
    if super::ogb_typed::is_ogb_typed(p) {
        return Ok(InputFormat::OgbTyped);
    }
    if p.join("processed").join("paper").is_dir() {
        return Ok(InputFormat::Igb);
    }
    if present(&p.join("raw").join("edge.csv.gz"))? || present(&p.join("raw").join("edge.csv"))? {
        return Ok(InputFormat::Ogb);
    }
    Err(BuildError::config(format!(
        "{}: unrecognised input layout: expected a text edge list file, a directory with edge_index.npy (npy), \
         processed/paper/ (IGB), <src>__<rel>__<dst>/ edge folders (typed-npy), raw/edge.csv.gz (OGB) or \
         raw/relations/ with raw/num-node-dict.csv.gz (OGB heterogeneous)",
        p.display()
    )))
}

fn required(path: PathBuf, what: &str) -> Result<PathBuf> {
    if present(&path)? {
        Ok(path)
    } else {
        Err(BuildError::config(format!("{}: missing file (expected the {what})", path.display())))
    }
}

/// `base` (a `.gz` name) if present, else the same name without `.gz`, else None.
pub(crate) fn gz_or_plain(base: PathBuf) -> Result<Option<PathBuf>> {
    if present(&base)? {
        return Ok(Some(base));
    }
    let plain = base.with_extension("");
    Ok(present(&plain)?.then_some(plain))
}

/// `--labels FILE` of an edge-list input: `.npy` [N] (row = node) or text
/// lines `node label`.
fn side_labels(path: &Path) -> Result<Box<dyn ValueSource>> {
    if !present(path)? {
        return Err(BuildError::config(format!("{}: --labels file does not exist", path.display())));
    }
    if is_npy(path)? {
        return Ok(Box::new(NpyValues::open(path, None, "label array [N] (--labels)")?));
    }
    Ok(Box::new(PairLabels::open(path)?))
}

/// `--features FILE` of an edge-list input: `.npy` [N, D] or text rows.
fn side_features(path: &Path) -> Result<Box<dyn RowSource>> {
    if !present(path)? {
        return Err(BuildError::config(format!("{}: --features file does not exist", path.display())));
    }
    if is_npy(path)? {
        return Ok(Box::new(NpyRows::open(path, None)?));
    }
    Ok(Box::new(CsvRows::open(path)?))
}

pub fn open_inputs(opts: &BuildOptions) -> Result<Inputs> {
    let fmt = detect_format(opts)?;
    let p = &opts.input;
    if fmt != InputFormat::Snap {
        for (flag, v) in [("--labels", &opts.labels), ("--features", &opts.features)] {
            if let Some(f) = v {
                return Err(BuildError::config(format!(
                    "{flag} {}: only for edge-list inputs; {} is a directory input, whose own files give labels and \
                     features (see docs/format.md)",
                    f.display(),
                    p.display()
                )));
            }
        }
    }
    match fmt {
        InputFormat::Snap => Ok(Inputs {
            format: "snap".into(),
            edges: Box::new(TextEdges::open(p, opts.skip_bad_lines)?),
            num_nodes: opts.num_nodes,
            features: opts.features.as_deref().map(side_features).transpose()?,
            labels: opts.labels.as_deref().map(side_labels).transpose()?,
            splits: Vec::new(),
            notes: Vec::new(),
        }),
        InputFormat::Npy => open_npy(opts, p),
        InputFormat::Igb => open_igb(opts, p),
        InputFormat::Ogb => open_ogb(opts, p),
        InputFormat::TypedNpy | InputFormat::OgbTyped => Err(BuildError::config(format!(
            "{}: a typed input is read by the typed build (flashgnn_build::build), not as homogeneous inputs",
            p.display()
        ))),
        InputFormat::Auto => unreachable!("detect_format resolves Auto"),
    }
}

/// The npy directory layout: `edge_index.npy`, optional `node_feat.npy`
/// (npy or headerless with `--feat-shape`), `node_label.npy` and
/// `{train,val,test}_idx.npy`.
fn open_npy(opts: &BuildOptions, p: &Path) -> Result<Inputs> {
    let notes = npy_layout_names(p)?;
    let edges =
        NpyEdges::open(&required(p.join("edge_index.npy"), "edge array [E, 2] or [2, E] of int32/int64")?, false)?;
    let feat_path = p.join("node_feat.npy");
    let features: Option<Box<dyn RowSource>> = if present(&feat_path)? {
        let raw = if is_npy(&feat_path)? {
            None
        } else {
            match (opts.feat_shape, opts.feat_dtype) {
                (Some((n, d)), t) => Some((n, d, t.unwrap_or(Dtype::Float32))),
                (None, _) => None, // open_array explains what is expected
            }
        };
        Some(Box::new(NpyRows::open(&feat_path, raw)?))
    } else {
        None
    };
    let labels = optional_values(&p.join("node_label.npy"), "node label array [N]")?;
    let mut splits = Vec::new();
    for name in ["train", "val", "test"] {
        if let Some(v) = optional_values(&p.join(format!("{name}_idx.npy")), "split index array [K]")? {
            splits.push((name.to_string(), v));
        }
    }
    Ok(Inputs {
        format: "npy".into(),
        edges: Box::new(edges),
        num_nodes: opts.num_nodes,
        features,
        labels,
        splits,
        notes,
    })
}

/// The IGB layout: `processed/paper__cites__paper/edge_index.npy` and
/// `processed/paper/` (features, labels of `--igb-classes`), headerless
/// for IGB large/full.
fn open_igb(opts: &BuildOptions, p: &Path) -> Result<Inputs> {
    let paper = p.join("processed").join("paper");
    let edge_path = required(p.join("processed").join("paper__cites__paper").join("edge_index.npy"), "IGB edge array")?;
    let headerless_edges = !is_npy(&edge_path)?;
    let edges = NpyEdges::open(&edge_path, headerless_edges)?;
    let feat_path = required(paper.join("node_feat.npy"), "IGB feature table")?;
    let n_declared = opts.num_nodes.or(opts.feat_shape.map(|s| s.0));
    let raw_feat = (!is_npy(&feat_path)?).then(|| {
        let (n, d) = opts.feat_shape.unwrap_or((n_declared.unwrap_or(0), IGB_FEATURE_DIM));
        (n, d, opts.feat_dtype.unwrap_or(Dtype::Float32))
    });
    if raw_feat.is_some() && n_declared.is_none() {
        return Err(BuildError::config(format!(
            "{}: headerless IGB feature file (IGB large/full): give the node count with --num-nodes N (e.g. 100000000 for large, 269346174 for full) or --feat-shape N,1024",
            feat_path.display()
        )));
    }
    let features = NpyRows::open(&feat_path, raw_feat)?;
    let label_path = paper.join(format!("node_label_{}.npy", opts.igb_classes));
    let labels: Option<Box<dyn ValueSource>> = if present(&label_path)? {
        let raw = (!is_npy(&label_path)?).then(|| (n_declared.unwrap_or(0), Dtype::Float32));
        Some(Box::new(NpyValues::open(&label_path, raw, "IGB label array")?))
    } else {
        None
    };
    Ok(Inputs {
        format: "igb".into(),
        edges: Box::new(edges),
        num_nodes: n_declared,
        features: Some(Box::new(features)),
        labels,
        splits: Vec::new(),
        notes: Vec::new(),
    })
}

/// The OGB layout: `raw/*.csv[.gz]` (edges, node count, features,
/// labels) and a node split under `split/`.
fn open_ogb(opts: &BuildOptions, p: &Path) -> Result<Inputs> {
    let raw = p.join("raw");
    let edge_path = gz_or_plain(raw.join("edge.csv.gz"))?.ok_or_else(|| {
        BuildError::config(format!("{}: missing file (expected the OGB edge list)", raw.join("edge.csv.gz").display()))
    })?;
    let edges = TextEdges::open(&edge_path, opts.skip_bad_lines)?;
    let mut num_nodes = opts.num_nodes;
    if num_nodes.is_none() {
        if let Some(nn) = gz_or_plain(raw.join("num-node-list.csv.gz"))? {
            let mut v = Vec::new();
            let mut t = TextValues::open(&nn)?;
            t.next_values(1, &mut v)?;
            let n = v.first().copied().unwrap_or(-1.0);
            if n < 0.0 || n.fract() != 0.0 || n >= super::NODES_MAX as f64 {
                return Err(BuildError::input(
                    nn.display(),
                    "line 1",
                    format!("node count {n} is not an integer in [0, {})", super::NODES_MAX),
                ));
            }
            num_nodes = Some(n as u64);
        }
    }
    let features: Option<Box<dyn RowSource>> = match gz_or_plain(raw.join("node-feat.csv.gz"))? {
        Some(f) => Some(Box::new(CsvRows::open(&f)?)),
        None => None,
    };
    let labels: Option<Box<dyn ValueSource>> = match gz_or_plain(raw.join("node-label.csv.gz"))? {
        Some(f) => Some(Box::new(TextValues::open(&f)?)),
        None => None,
    };
    let mut splits: Vec<(String, Box<dyn ValueSource>)> = Vec::new();
    let mut notes = Vec::new();
    let split_root = p.join("split");
    if split_root.is_dir() {
        let name = match &opts.ogb_split {
            Some(n) => n.clone(),
            None => {
                let mut names: Vec<String> = Vec::new();
                for e in std::fs::read_dir(&split_root)
                    .map_err(|e| BuildError::config(format!("{}: {e}", split_root.display())))?
                    .filter_map(|e| e.ok())
                {
                    // A split name that is a broken link is an error, not "no split".
                    if present(&e.path())? && e.path().is_dir() {
                        names.push(e.file_name().to_string_lossy().into_owned());
                    }
                }
                names.sort();
                match names.len() {
                    0 => String::new(),
                    1 => names.remove(0),
                    _ => {
                        return Err(BuildError::config(format!(
                            "{}: several splits {names:?}; choose one with --ogb-split",
                            split_root.display()
                        )))
                    }
                }
            }
        };
        if !name.is_empty() {
            for (file, ours) in [("train", "train"), ("valid", "val"), ("test", "test")] {
                let path = split_root.join(&name).join(format!("{file}.csv.gz"));
                if let Some(f) = gz_or_plain(path)? {
                    splits.push((ours.to_string(), Box::new(TextValues::open(&f)?) as Box<dyn ValueSource>));
                }
            }
            // A link split given as files (the `.pt` import's staging) is imported there.
            if splits.is_empty() && opts.link_split_files.is_none() {
                notes.push(unimported_split_note(&split_root.join(&name)));
            }
        }
    }
    Ok(Inputs { format: "ogb".into(), edges: Box::new(edges), num_nodes, features, labels, splits, notes })
}

/// Why an OGB split directory without `{train,valid,test}.csv[.gz]` node
/// lists was not imported. OGB's link-prediction splits (`ogbl-*`) hold
/// torch-pickled edge tensors (`*.pt`: positive and negative edges), which
/// are not node sets; the Rust side never unpickles them (a pickle runs
/// code): the Python build reads them with `torch.load(weights_only=True)`
/// and hands them over as `--link-split-files` (then no note is written).
fn unimported_split_note(dir: &Path) -> String {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.sort();
    let pt = names.iter().any(|n| n.ends_with(".pt"));
    let why = if pt {
        "it looks like an OGB link-prediction split (edge tensors in .pt files, not node lists); the core build \
         reads node lists only: `flashgnn build` reads .pt link splits (torch.load(weights_only=True)) and passes \
         them as --link-split-files"
    } else {
        "it has no train/valid/test.csv.gz node lists"
    };
    format!(
        "{}: split not imported ({} entries: {names:?}): {why}; the dataset has no splits",
        dir.display(),
        names.len()
    )
}

/// The `.npy` names the npy layout reads.
const NPY_LAYOUT_FILES: [&str; 6] =
    ["edge_index.npy", "node_feat.npy", "node_label.npy", "train_idx.npy", "val_idx.npy", "test_idx.npy"];

/// PyG `Data` attribute names saved as `.npy`, and what the npy layout calls
/// them. Refused rather than skipped: a build without the user's features,
/// labels or split would train on nothing and say nothing.
const PYG_NAMES: [(&str, &str); 7] = [
    ("x.npy", "node_feat.npy [N, D]"),
    ("y.npy", "node_label.npy [N] of integer class ids"),
    ("train_mask.npy", "train_idx.npy [K] of node ids (np.flatnonzero(train_mask))"),
    ("val_mask.npy", "val_idx.npy [K] of node ids (np.flatnonzero(val_mask))"),
    ("test_mask.npy", "test_idx.npy [K] of node ids (np.flatnonzero(test_mask))"),
    ("edge_attr.npy", "nothing: edge features are not stored; remove the file to build without them"),
    ("edge_weight.npy", "nothing: edge weights are not stored; remove the file to build without them"),
];

/// Check an npy-layout directory's file names: a PyG-style name is an error
/// naming the file and what to call it; any other `.npy` the layout does not
/// read becomes a build note (printed, and kept in the build report), so no
/// input file is dropped silently.
fn npy_layout_names(dir: &Path) -> Result<Vec<String>> {
    let entries = std::fs::read_dir(dir).map_err(|e| flashgnn_io::IoError::new("list", dir, None, e))?;
    let mut unread = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| flashgnn_io::IoError::new("list", dir, None, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some((_, ours)) = PYG_NAMES.iter().find(|(pyg, _)| *pyg == name) {
            return Err(BuildError::config(format!(
                "{}: a PyG-style name the npy layout does not read; it expects {ours} (rename the file, or build \
                 from the PyG Data object with flashgnn.from_pyg; docs/input.md)",
                dir.join(&name).display()
            )));
        }
        if name.ends_with(".npy") && !NPY_LAYOUT_FILES.contains(&name.as_str()) {
            unread.push(name);
        }
    }
    unread.sort();
    Ok(unread
        .into_iter()
        .map(|n| {
            format!(
                "{}: not read (the npy layout reads {}; docs/input.md)",
                dir.join(n).display(),
                NPY_LAYOUT_FILES.join(", ")
            )
        })
        .collect())
}

fn optional_values(path: &Path, what: &str) -> Result<Option<Box<dyn ValueSource>>> {
    if !present(path)? {
        return Ok(None);
    }
    Ok(Some(Box::new(NpyValues::open(path, None, what)?)))
}

//! The typed npy layout (`--format typed-npy`, docs/input.md): one folder
//! per node type and one per edge type, in `DIR/` or `DIR/processed/`
//! (IGB-heterogeneous's layout):
//!
//! ```text
//! <ntype>/node_feat.npy                  [N_t, D] float, optional
//! <ntype>/node_label.npy                 [N_t] int, -1 unlabeled, optional
//!        (else node_label_19.npy, or node_label_2K.npy with --igb-classes 2K)
//! <ntype>/{train,val,test}_idx.npy       local ids of that type, optional
//! <src>__<rel>__<dst>/edge_index.npy     [E, 2] or [2, E]: src local, dst local
//! num_nodes.json                         optional {"<ntype>": count}
//! ```
//!
//! Invariants: node types and edge types come in name order (folder names
//! sorted: the dataset's type order does not depend on the file system);
//! every type's count is known before any edge is read, from every source
//! that gives one (feature rows, `num_nodes.json`, label length), which
//! must agree; every name passes [`flashgnn_format::types::check_name`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use flashgnn_format::types::check_name;
use flashgnn_format::Dtype;

use super::detect::is_npy;
use super::npy::{open_array, NpyEdges, NpyRows, NpyValues};
use super::{RowSource, ValueSource};
use crate::options::BuildOptions;
use crate::{BuildError, Result};

/// One node type of a typed npy input.
pub struct TypedNodeInput {
    pub name: String,
    pub count: u64,
    pub features: Option<PathBuf>,
    /// IGBH large/full: the feature file has no npy header (raw rows of
    /// `IGB_FEATURE_DIM` float32, the count from its size).
    pub features_raw: Option<(u64, u32, Dtype)>,
    pub labels: Option<PathBuf>,
    /// A headerless label file (IGBH full): this many float32 class ids.
    pub labels_raw: Option<u64>,
    /// The class count the label file's name declares (IGBH's 19 / 2983).
    pub label_classes: Option<u64>,
    pub splits: Vec<(String, PathBuf)>,
}

/// One edge type (folder `src__rel__dst`) of a typed npy input.
pub struct TypedEdgeInput {
    pub src: String,
    pub rel: String,
    pub dst: String,
    pub path: PathBuf,
}

pub struct TypedInputs {
    /// `DIR` or `DIR/processed`.
    pub root: PathBuf,
    pub nodes: Vec<TypedNodeInput>,
    pub edges: Vec<TypedEdgeInput>,
}

impl TypedInputs {
    pub fn node_index(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }
    pub fn open_features(&self, t: usize) -> Result<Option<Box<dyn RowSource>>> {
        match &self.nodes[t].features {
            Some(p) => Ok(Some(Box::new(NpyRows::open(p, self.nodes[t].features_raw)?))),
            None => Ok(None),
        }
    }
    pub fn open_labels(&self, t: usize) -> Result<Option<Box<dyn ValueSource>>> {
        match &self.nodes[t].labels {
            Some(p) => Ok(Some(Box::new(NpyValues::open(
                p,
                self.nodes[t].labels_raw.map(|n| (n, Dtype::Float32)),
                "node label array [N_t]",
            )?))),
            None => Ok(None),
        }
    }
    pub fn open_splits(&self, t: usize) -> Result<Vec<(String, Box<dyn ValueSource>)>> {
        let mut out = Vec::new();
        for (name, p) in &self.nodes[t].splits {
            out.push((
                name.clone(),
                Box::new(NpyValues::open(p, None, "split index array [K]")?) as Box<dyn ValueSource>,
            ));
        }
        Ok(out)
    }
    /// Edge type `e`'s reader, each column checked against its type's count.
    pub fn open_edges(&self, e: usize) -> Result<NpyEdges> {
        let et = &self.edges[e];
        let count = |name: &str| self.nodes[self.node_index(name).expect("checked at open")].count;
        // IGBH large/full edge arrays are headerless int64 pairs.
        Ok(NpyEdges::open(&et.path, !is_npy(&et.path)?)?
            .with_column_bounds((count(&et.src), et.src.clone()), (count(&et.dst), et.dst.clone())))
    }
}

/// An edge folder's name split into `(src, rel, dst)`: exactly three
/// non-empty names between `__`.
pub fn split_edge_folder(name: &str) -> Option<(&str, &str, &str)> {
    let parts: Vec<&str> = name.split("__").collect();
    match parts.as_slice() {
        [s, r, d] if !s.is_empty() && !r.is_empty() && !d.is_empty() => Some((s, r, d)),
        _ => None,
    }
}

/// The folder holding the type folders (`DIR` or `DIR/processed`), and the
/// sorted names of its sub-folders: (node folders, edge folders).
pub fn typed_root(dir: &Path) -> Option<(PathBuf, Vec<String>, Vec<String>)> {
    for root in [dir.to_path_buf(), dir.join("processed")] {
        let Ok(rd) = std::fs::read_dir(&root) else { continue };
        let (mut nodes, mut edges) = (Vec::new(), Vec::new());
        for e in rd.filter_map(|e| e.ok()) {
            if !e.path().is_dir() {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            if split_edge_folder(&name).is_some() {
                edges.push(name);
            } else {
                nodes.push(name);
            }
        }
        if !edges.is_empty() {
            nodes.sort();
            edges.sort();
            return Some((root, nodes, edges));
        }
    }
    None
}

/// Whether `dir` is a typed npy input: edge folders, and not IGB's
/// homogeneous layout (`processed/` with exactly `paper/` and
/// `paper__cites__paper/`, which stays `--format igb`).
pub fn is_typed(dir: &Path) -> bool {
    match typed_root(dir) {
        Some((_, nodes, edges)) => !(nodes == ["paper"] && edges == ["paper__cites__paper"]),
        None => false,
    }
}

/// IGB's feature width: a headerless IGBH feature file is rows of this many float32.
const IGB_FEATURE_DIM: u32 = 1024;

fn file_len(path: &Path) -> Result<u64> {
    Ok(std::fs::metadata(path).map_err(|e| flashgnn_io::IoError::new("stat", path, None, e))?.len())
}

/// Rows of a headerless file of `row_bytes`-byte rows, refused by name when
/// its size is not a whole number of rows.
fn raw_rows(path: &Path, row_bytes: u64, what: &str) -> Result<u64> {
    let len = file_len(path)?;
    if len % row_bytes != 0 {
        return Err(BuildError::input(
            path.display(),
            "file size",
            format!("headerless {what}: {len} bytes is not a whole number of {row_bytes}-byte rows"),
        ));
    }
    Ok(len / row_bytes)
}

fn rows_of(path: &Path, what: &str) -> Result<u64> {
    let (_, h) = open_array(path, None, what)?;
    Ok(h.shape.first().copied().unwrap_or(0))
}

fn present(p: &Path) -> Result<bool> {
    Ok(flashgnn_io::present(p)?)
}

/// Read the typed layout's structure (no data yet: headers only) and every
/// node type's count.
pub fn open_typed(opts: &BuildOptions) -> Result<TypedInputs> {
    let dir = &opts.input;
    let (root, node_dirs, edge_dirs) = typed_root(dir).ok_or_else(|| {
        BuildError::config(format!(
            "{}: not a typed npy input: no <src>__<rel>__<dst>/ edge folder in it or in its processed/ (docs/input.md)",
            dir.display()
        ))
    })?;
    let bad = |e: flashgnn_format::FormatError| BuildError::config(e.to_string());
    let json_path = root.join("num_nodes.json");
    let mut declared: BTreeMap<String, u64> = BTreeMap::new();
    if present(&json_path)? {
        let text = flashgnn_io::read_regular(&json_path)?;
        let v: serde_json::Value = serde_json::from_slice(&text)
            .map_err(|e| BuildError::input(json_path.display(), format!("line {}", e.line()), e.to_string()))?;
        let obj = v.as_object().ok_or_else(|| {
            BuildError::input(json_path.display(), "top level", "expected an object {\"<node type>\": count}")
        })?;
        for (k, c) in obj {
            let c = c.as_u64().filter(|&c| c < super::NODES_MAX).ok_or_else(|| {
                BuildError::input(
                    json_path.display(),
                    format!("key {k:?}"),
                    format!("count {c} is not an integer in [0, {})", super::NODES_MAX),
                )
            })?;
            declared.insert(k.clone(), c);
        }
    }
    let mut names: Vec<String> = node_dirs.clone();
    for k in declared.keys() {
        if !names.contains(k) {
            names.push(k.clone());
        }
    }
    names.sort();
    let mut nodes = Vec::new();
    for name in names {
        check_name(&root.join(&name).display().to_string(), "node type", &name).map_err(bad)?;
        let tdir = root.join(&name);
        let feat = tdir.join("node_feat.npy");
        let features = present(&feat)?.then_some(feat);
        let features_raw = match &features {
            Some(f) if !is_npy(f)? => {
                let rows = raw_rows(f, IGB_FEATURE_DIM as u64 * 4, "IGBH feature file (rows of 1024 float32)")?;
                Some((rows, IGB_FEATURE_DIM, Dtype::Float32))
            }
            _ => None,
        };
        let label_names: Vec<(&str, Option<u64>)> = if opts.igb_classes == "2K" {
            vec![("node_label_2K.npy", Some(2983)), ("node_label.npy", None)]
        } else {
            vec![("node_label.npy", None), ("node_label_19.npy", Some(19))]
        };
        let mut labels = None;
        let mut label_classes = None;
        for (f, c) in label_names {
            if present(&tdir.join(f))? {
                labels = Some(tdir.join(f));
                label_classes = c;
                break;
            }
        }
        let mut splits = Vec::new();
        for s in ["train", "val", "test"] {
            let p = tdir.join(format!("{s}_idx.npy"));
            if present(&p)? {
                splits.push((s.to_string(), p));
            }
        }
        // The count from every source that gives one; all must agree.
        let mut count: Option<(u64, String)> = None;
        let mut agree = |c: u64, what: String| -> Result<()> {
            match &count {
                Some((prev, origin)) if *prev != c => Err(BuildError::config(format!(
                    "node type {name:?}: {what} gives {c} nodes but {origin} gives {prev}: they must agree"
                ))),
                Some(_) => Ok(()),
                None => {
                    count = Some((c, what));
                    Ok(())
                }
            }
        };
        if let Some(f) = &features {
            let rows = match features_raw {
                Some((rows, _, _)) => rows,
                None => rows_of(f, "feature table [N_t, D]")?,
            };
            agree(rows, f.display().to_string())?;
        }
        if let Some(&c) = declared.get(&name) {
            agree(c, format!("{} ({name:?})", json_path.display()))?;
        }
        let mut labels_raw = None;
        if let Some(l) = &labels {
            let rows = if is_npy(l)? {
                rows_of(l, "node label array [N_t]")?
            } else {
                let n = raw_rows(l, 4, "IGBH label file (float32 class ids)")?;
                labels_raw = Some(n);
                n
            };
            agree(rows, l.display().to_string())?;
        }
        let Some((count, _)) = count else {
            return Err(BuildError::config(format!(
                "{}: node type {name:?} has no count: give node_feat.npy, a label array, or an entry in {}",
                tdir.display(),
                json_path.display()
            )));
        };
        nodes.push(TypedNodeInput { name, count, features, features_raw, labels, labels_raw, label_classes, splits });
    }
    let mut edges: Vec<TypedEdgeInput> = Vec::new();
    for folder in &edge_dirs {
        let (s, r, d) = split_edge_folder(folder).expect("an edge folder");
        let fname = root.join(folder).display().to_string();
        for (what, n) in [("source type", s), ("relation", r), ("destination type", d)] {
            check_name(&fname, &format!("edge folder {folder:?}: {what}"), n).map_err(bad)?;
        }
        for end in [s, d] {
            if !nodes.iter().any(|n| n.name == end) {
                return Err(BuildError::config(format!(
                    "{fname}: edge folder {folder:?} names node type {end:?}, which has no folder {} and no entry in {}",
                    root.join(end).display(),
                    json_path.display()
                )));
            }
        }
        if edges.iter().any(|e| e.src == s && e.rel == r && e.dst == d) {
            return Err(BuildError::config(format!("{fname}: edge type ({s}, {r}, {d}) is given twice")));
        }
        let path = root.join(folder).join("edge_index.npy");
        if !present(&path)? {
            return Err(BuildError::config(format!(
                "{}: missing file (expected the edge array [E, 2] or [2, E] of edge type ({s}, {r}, {d}))",
                path.display()
            )));
        }
        edges.push(TypedEdgeInput { src: s.into(), rel: r.into(), dst: d.into(), path });
    }
    Ok(TypedInputs { root, nodes, edges })
}

//! Typed (heterogeneous) graphs, format version 3: node types and edge types
//! over the one slot array of `graph.fg`.
//!
//! Node types occupy consecutive ranges of one id space, in declaration
//! order: node `i` of type `t` is the dataset's node `offset(t) + i`, so its
//! slot's address is arithmetic on its type and id, as a homogeneous node's
//! is (no per-node index). A node's slot lists its incoming neighbors along
//! every edge type whose destination is its type, one relation after
//! another in edge-type order ([`TypeTable::in_relations`]), each relation's
//! neighbors as global ids; the slot's per-relation counts
//! ([`crate::slot::SlotView::rel_count`]) say where each relation ends.
//! Feature rows live per node type in `t<i>.features.fg` (each a
//! `features.fg` of that type's count, dim and dtype; row CRCs in
//! `t<i>.feature_crc.npy` are bound to the *global* id), labels and splits
//! in `t<i>.labels.npy` / `t<i>.split_<name>.npy` by local id.
//!
//! A homogeneous dataset is the one-type case: no `types` section, no
//! relation counts, and every reader treats it as one node type `node` and
//! one edge type `(node, to, node)` ([`TypeTable::homogeneous`]).
//!
//! Invariants checked on open ([`TypeTable::check`]): names are non-empty,
//! of `[A-Za-z0-9_.-]`, at most [`MAX_TYPE_NAME`] bytes; node type names are
//! unique; `(src, rel, dst)` triples are unique and name declared node types;
//! counts sum to `num_nodes`, edge counts to `num_edges`; the slot's
//! relation-count fields equal the most incoming edge types of any type.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::dtype::Dtype;
use crate::error::{FormatError, Result};
use crate::layout::{FeaturePlacement, Layout};
use crate::manifest::{FileEntry, LabelInfo};

/// Longest type or relation name, in bytes.
pub const MAX_TYPE_NAME: usize = 64;
/// Most node types (type indices fit the file names and a `u8` tag).
pub const MAX_NODE_TYPES: usize = 255;
/// Most edge types.
pub const MAX_EDGE_TYPES: usize = 255;
/// The names a homogeneous dataset's one node type and one edge type go by.
pub const HOMOGENEOUS_NODE_TYPE: &str = "node";
pub const HOMOGENEOUS_RELATION: &str = "to";

/// Feature table of one node type (`t<i>.features.fg`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TypeFeatures {
    pub dim: u32,
    pub dtype: Dtype,
    /// True when the rows were generated or derived, not read from input.
    #[serde(default)]
    pub synthetic: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeType {
    pub name: String,
    pub count: u64,
    /// `None`: this type has no feature rows.
    pub features: Option<TypeFeatures>,
    pub labels: Option<LabelInfo>,
    /// Split name -> number of seed ids (local ids of this type).
    #[serde(default)]
    pub splits: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgeType {
    pub src: String,
    pub rel: String,
    pub dst: String,
    /// Stored neighbor entries of this relation.
    pub num_edges: u64,
}

impl EdgeType {
    /// PyG's edge type tuple.
    pub fn triple(&self) -> (String, String, String) {
        (self.src.clone(), self.rel.clone(), self.dst.clone())
    }
    /// `src__rel__dst`, the folder name of the typed npy layout.
    pub fn key(&self) -> String {
        format!("{}__{}__{}", self.src, self.rel, self.dst)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TypeTable {
    pub node_types: Vec<NodeType>,
    pub edge_types: Vec<EdgeType>,
}

pub fn features_file(t: usize) -> String {
    format!("t{t}.features.fg")
}
pub fn feature_crc_file(t: usize) -> String {
    format!("t{t}.feature_crc.npy")
}
pub fn labels_file(t: usize) -> String {
    format!("t{t}.labels.npy")
}
pub fn split_file(t: usize, name: &str) -> String {
    format!("t{t}.split_{name}.npy")
}

/// A type or relation name a dataset may hold: non-empty, at most
/// [`MAX_TYPE_NAME`] bytes of `[A-Za-z0-9_.-]` (they end up in file and
/// folder names and in error messages).
pub fn check_name(file: &str, what: &str, name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_TYPE_NAME
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-')
        && !name.contains("__");
    if ok {
        Ok(())
    } else {
        Err(FormatError::invalid(
            file,
            format!(
                "{what} name {name:?}: must be 1 to {MAX_TYPE_NAME} bytes of letters, digits, '_', '.', '-', \
                 without '__' (the typed layout's separator)"
            ),
        ))
    }
}

impl TypeTable {
    /// The one-type view of a homogeneous dataset.
    pub fn homogeneous(num_nodes: u64, num_edges: u64, features: Option<TypeFeatures>) -> TypeTable {
        TypeTable {
            node_types: vec![NodeType {
                name: HOMOGENEOUS_NODE_TYPE.into(),
                count: num_nodes,
                features,
                labels: None,
                splits: BTreeMap::new(),
            }],
            edge_types: vec![EdgeType {
                src: HOMOGENEOUS_NODE_TYPE.into(),
                rel: HOMOGENEOUS_RELATION.into(),
                dst: HOMOGENEOUS_NODE_TYPE.into(),
                num_edges,
            }],
        }
    }

    pub fn node_type_index(&self, name: &str) -> Option<usize> {
        self.node_types.iter().position(|t| t.name == name)
    }

    pub fn edge_type_index(&self, src: &str, rel: &str, dst: &str) -> Option<usize> {
        self.edge_types.iter().position(|e| e.src == src && e.rel == rel && e.dst == dst)
    }

    /// First global id of node type `t`.
    pub fn offset(&self, t: usize) -> u64 {
        self.node_types[..t].iter().map(|n| n.count).sum()
    }

    /// First global id of every node type, and the total, in one pass.
    pub fn offsets(&self) -> Vec<u64> {
        let mut acc = 0;
        let mut out = Vec::with_capacity(self.node_types.len() + 1);
        for n in &self.node_types {
            out.push(acc);
            acc += n.count;
        }
        out.push(acc);
        out
    }

    /// The node type of global id `v` and its local id, or `None` beyond
    /// the last type.
    pub fn type_of(&self, v: u64) -> Option<(usize, u64)> {
        let mut lo = 0;
        for (t, n) in self.node_types.iter().enumerate() {
            if v < lo + n.count {
                return Some((t, v - lo));
            }
            lo += n.count;
        }
        None
    }

    /// Edge types whose destination is node type `t`, in edge-type order:
    /// the order of the relations in a slot of type `t`.
    pub fn in_relations(&self, t: usize) -> Vec<usize> {
        let name = &self.node_types[t].name;
        self.edge_types.iter().enumerate().filter(|(_, e)| &e.dst == name).map(|(i, _)| i).collect()
    }

    /// Relation-count fields per slot: the most incoming edge types of any
    /// node type (at least 1).
    pub fn rel_counts(&self) -> u32 {
        (0..self.node_types.len()).map(|t| self.in_relations(t).len()).max().unwrap_or(0).max(1) as u32
    }

    /// The layout of node type `t`'s feature file: a `features.fg` of
    /// `count` rows (`None` for a type without features).
    pub fn feature_layout(&self, t: usize, page_size: u32, dataset_id: Option<u64>) -> Result<Option<Layout>> {
        let n = &self.node_types[t];
        let Some(f) = &n.features else { return Ok(None) };
        let file = features_file(t);
        Ok(Some(
            Layout::new(&file, page_size, n.count, 0, 4, f.dim, f.dtype, FeaturePlacement::Separate, 0, 0)?
                .with_dataset_id(dataset_id)
                .with_packed_rows(),
        ))
    }

    /// Every file this table adds to a dataset, with why (for the manifest's
    /// `files` check).
    pub fn files(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (t, n) in self.node_types.iter().enumerate() {
            if n.features.is_some() {
                out.push(features_file(t));
                out.push(feature_crc_file(t));
            }
            if n.labels.is_some() {
                out.push(labels_file(t));
            }
            for s in n.splits.keys() {
                out.push(split_file(t, s));
            }
        }
        out
    }

    /// Structural checks against the manifest's totals and files (see the
    /// module docs). `path` names the manifest.
    #[allow(clippy::too_many_arguments)]
    pub fn check(
        &self,
        path: &str,
        num_nodes: u64,
        num_edges: u64,
        rel_counts: u32,
        page_size: u32,
        dataset_id: Option<u64>,
        files: &BTreeMap<String, FileEntry>,
    ) -> Result<()> {
        if self.node_types.is_empty() || self.node_types.len() > MAX_NODE_TYPES {
            return Err(FormatError::oob(
                path,
                0,
                "types.node_types count",
                self.node_types.len() as u64,
                format!("in [1, {MAX_NODE_TYPES}]"),
            ));
        }
        if self.edge_types.len() > MAX_EDGE_TYPES {
            return Err(FormatError::oob(
                path,
                0,
                "types.edge_types count",
                self.edge_types.len() as u64,
                format!("<= {MAX_EDGE_TYPES}"),
            ));
        }
        let mut total = 0u64;
        for (t, n) in self.node_types.iter().enumerate() {
            check_name(path, &format!("node type {t}"), &n.name)?;
            if self.node_types[..t].iter().any(|o| o.name == n.name) {
                return Err(FormatError::invalid(path, format!("node type {:?} is declared twice", n.name)));
            }
            total = total
                .checked_add(n.count)
                .ok_or_else(|| FormatError::invalid(path, "node type counts overflow 64 bits"))?;
            if let Some(f) = &n.features {
                if !f.dtype.is_float() {
                    return Err(FormatError::invalid(
                        path,
                        format!("node type {:?}: feature dtype {} is not a float type", n.name, f.dtype.name()),
                    ));
                }
            }
        }
        if total != num_nodes {
            return Err(FormatError::oob(
                path,
                0,
                "sum of node type counts",
                total,
                format!("== num_nodes {num_nodes}"),
            ));
        }
        let mut edges = 0u64;
        for (i, e) in self.edge_types.iter().enumerate() {
            for (what, name) in [("source type", &e.src), ("relation", &e.rel), ("destination type", &e.dst)] {
                check_name(path, &format!("edge type {i} {what}"), name)?;
            }
            for end in [&e.src, &e.dst] {
                if self.node_type_index(end).is_none() {
                    return Err(FormatError::invalid(
                        path,
                        format!("edge type {} names node type {end:?}, which is not declared", e.key()),
                    ));
                }
            }
            if self.edge_types[..i].iter().any(|o| o.src == e.src && o.rel == e.rel && o.dst == e.dst) {
                return Err(FormatError::invalid(path, format!("edge type {} is declared twice", e.key())));
            }
            edges = edges.saturating_add(e.num_edges);
        }
        if edges != num_edges {
            return Err(FormatError::oob(
                path,
                0,
                "sum of edge type counts",
                edges,
                format!("== num_edges {num_edges}"),
            ));
        }
        if rel_counts != self.rel_counts() {
            return Err(FormatError::oob(
                path,
                0,
                "graph.rel_counts",
                rel_counts as u64,
                format!("== {} (the most incoming edge types of a node type)", self.rel_counts()),
            ));
        }
        for (t, n) in self.node_types.iter().enumerate() {
            if let Some(fl) = self.feature_layout(t, page_size, dataset_id)? {
                let name = features_file(t);
                match files.get(&name) {
                    Some(f) if f.bytes == fl.features_file_bytes() => {}
                    Some(f) => {
                        return Err(FormatError::oob(
                            path,
                            0,
                            "file size in manifest",
                            f.bytes,
                            format!(
                                "== {} for {name}: node type {:?}, {} rows of {} x {}",
                                fl.features_file_bytes(),
                                n.name,
                                n.count,
                                n.features.as_ref().map_or(0, |f| f.dim),
                                n.features.as_ref().map_or("?", |f| f.dtype.name())
                            ),
                        ))
                    }
                    None => {
                        return Err(FormatError::invalid(
                            path,
                            format!("node type {:?} has features but `files` lists no entry for {name}", n.name),
                        ))
                    }
                }
            }
        }
        for name in self.files() {
            if !files.contains_key(&name) {
                return Err(FormatError::invalid(path, format!("manifest lists no entry for {name}")));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> TypeTable {
        let nt = |name: &str, count| NodeType {
            name: name.into(),
            count,
            features: None,
            labels: None,
            splits: BTreeMap::new(),
        };
        let et = |s: &str, r: &str, d: &str, n| EdgeType { src: s.into(), rel: r.into(), dst: d.into(), num_edges: n };
        TypeTable {
            node_types: vec![nt("paper", 10), nt("author", 5), nt("fos", 2)],
            edge_types: vec![
                et("paper", "cites", "paper", 30),
                et("author", "rev_writes", "paper", 12),
                et("paper", "writes_rev", "author", 12),
                et("fos", "rev_topic", "paper", 9),
            ],
        }
    }

    #[test]
    fn address_arithmetic_and_relation_order() {
        let t = table();
        assert_eq!(t.offsets(), vec![0, 10, 15, 17]);
        assert_eq!(t.type_of(0), Some((0, 0)));
        assert_eq!(t.type_of(12), Some((1, 2)));
        assert_eq!(t.type_of(16), Some((2, 1)));
        assert_eq!(t.type_of(17), None);
        assert_eq!(t.in_relations(0), vec![0, 1, 3]);
        assert_eq!(t.in_relations(1), vec![2]);
        assert_eq!(t.in_relations(2), Vec::<usize>::new());
        assert_eq!(t.rel_counts(), 3);
        t.check("m", 17, 63, 3, 4096, Some(1), &BTreeMap::new()).unwrap();
    }

    #[test]
    fn bad_tables_are_refused_by_name() {
        let files = BTreeMap::new();
        let mut t = table();
        t.node_types[1].name = "paper".into();
        let e = t.check("m", 17, 63, 3, 4096, Some(1), &files).unwrap_err().to_string();
        assert!(e.contains("\"paper\" is declared twice"), "{e}");
        let mut t = table();
        t.edge_types[1].src = "venue".into();
        let e = t.check("m", 17, 63, 3, 4096, Some(1), &files).unwrap_err().to_string();
        assert!(e.contains("\"venue\", which is not declared"), "{e}");
        let e = table().check("m", 18, 63, 3, 4096, Some(1), &files).unwrap_err().to_string();
        assert!(e.contains("sum of node type counts = 17") && e.contains("18"), "{e}");
        let mut t = table();
        t.node_types[0].name = "pa/per".into();
        assert!(t.check("m", 17, 63, 3, 4096, Some(1), &files).is_err());
        let mut t = table();
        t.node_types[0].features = Some(TypeFeatures { dim: 4, dtype: Dtype::Float32, synthetic: false });
        let e = t.check("m", 17, 63, 3, 4096, Some(1), &files).unwrap_err().to_string();
        assert!(e.contains("t0.features.fg"), "{e}");
    }
}

//! Typed (heterogeneous) sampling over a format-version-3 dataset
//! (docs/format.md § *Typed graphs*). The engine is the one of a
//! homogeneous graph: nodes are discovered by global id, slots and overflow
//! pages are read, cached and checked exactly as there. What a type adds:
//!
//! - **Draws per relation.** A node of type `t` expanded at hop `h` draws,
//!   for each incoming relation `j` of `t` (edge type `e =
//!   in_relations(t)[j]`), `fanouts[h][e]` of that relation's
//!   `rel_count(j)` list positions (offset by the earlier relations' counts),
//!   keyed by (batch seed, edge type, node): relations draw independently and
//!   a batch stays a pure function of (dataset, fanouts, seeds, seed). Every
//!   drawn id is checked to lie in the relation's source type.
//! - **Rows per type** from `t<i>.features.fg` (engine files after
//!   graph.fg and overflow.fg), the row of global node `v` of type `t` being
//!   local row `v - offset(t)`, checked against `t<i>.feature_crc.npy` at the
//!   global position. The cross-batch cache holds them under
//!   `F_TYPE_ROW` (global id): a static hot set by degree or access counts,
//!   optionally encoded (`crate::rowcodec`), and the dynamic part. Labels
//!   per type by local id.
//! - **The typed [`Batch`](super::Batch) parts** ([`TypedBatch`]), built by
//!   `canonical_typed` (output.rs).

use std::sync::Arc;

use flashgnn_format::hash::splitmix64;
use flashgnn_format::layout::header_mismatch;
use flashgnn_format::types::{feature_crc_file, features_file, labels_file, TypeTable};
use flashgnn_format::{Dtype, FeatureHeader, FormatError, Layout};
use flashgnn_store::Dataset;

use crate::{Result, SampleError};

/// Feature rows of one node type.
pub(super) struct TypeRows {
    /// The layout of `t<i>.features.fg` (its row width, dtype, stride).
    pub layout: Layout,
    /// `t<i>.feature_crc.npy`, by local id (CRCs bound to the global id).
    pub crcs: Arc<[u32]>,
    /// Engine file index of `t<i>.features.fg`.
    pub file: u16,
    /// Its path, for errors.
    pub name: String,
    /// The `memory` engine's copy of the file (None with every other
    /// engine, or while a trace is captured): rows are checked and copied
    /// once, straight into the batch's `x`, as for `features.fg`.
    pub mem: Option<Arc<Vec<u8>>>,
    /// Every row of `mem` was checked against its CRC when this process
    /// loaded it ([`TypeRows::check_resident`]): a row taken from it is not
    /// checked again (the bytes have not left this process's memory since).
    pub mem_checked: bool,
}

/// The `memory` engine's table copies whose every row this process has
/// checked (by address; a copy is shared by every sampler of the process
/// while one holds it, `flashgnn_io::mapped`).
static CHECKED: std::sync::Mutex<Vec<std::sync::Weak<Vec<u8>>>> = std::sync::Mutex::new(Vec::new());

impl TypeRows {
    /// Check every row of the `memory` engine's copy once per process (one
    /// pass over the table, as `verify` does) instead of one CRC per row per
    /// batch, which was a third of a typed batch's CPU on that engine. The
    /// first bad row is the error (file, offset, row, node).
    pub fn check_resident(&mut self, t: usize, offset: u64, table: &TypeTable) -> Result<()> {
        let Some(m) = self.mem.clone() else { return Ok(()) };
        let mut done = CHECKED.lock().unwrap_or_else(|e| e.into_inner());
        done.retain(|w| w.strong_count() > 0);
        if !done.iter().any(|w| w.upgrade().is_some_and(|a| Arc::ptr_eq(&a, &m))) {
            let rb = self.layout.row_bytes() as usize;
            for local in 0..self.layout.num_nodes {
                let (lo, _, at) = self.layout.feature_extent(local);
                let start = lo as usize + at;
                let row = m.get(start..start + rb).ok_or_else(|| FormatError::Truncated {
                    file: self.name.clone(),
                    offset: start as u64,
                    needed: rb as u64,
                    available: m.len().saturating_sub(start) as u64,
                })?;
                let (stored, computed) = (self.crcs[local as usize], self.layout.crc(offset + local, row));
                if stored != computed {
                    return Err(FormatError::Checksum {
                        file: self.name.clone(),
                        offset: start as u64,
                        what: format!(
                            "feature row {local} (node {} of type {:?})",
                            offset + local,
                            table.node_types[t].name
                        ),
                        stored,
                        computed,
                    }
                    .into());
                }
            }
            done.push(Arc::downgrade(&m));
        }
        self.mem_checked = true;
        Ok(())
    }
}

/// Where a typed dataset's feature rows lie and how each is checked (the
/// sampler's [`Typed`], shared).
#[derive(Clone)]
pub(crate) struct RowFinder(pub(super) Arc<Typed>);

/// Where one typed row lies ([`RowFinder::row`]).
pub(crate) struct RowAt {
    /// Engine file index of its type's table.
    pub file: u16,
    /// The sector-aligned extent read for it, and the row's place in it.
    pub lo: u64,
    pub len: u32,
    pub at: usize,
    /// Row bytes, values per row and their dtype.
    pub bytes: usize,
    pub dim: usize,
    pub dtype: flashgnn_format::Dtype,
}

impl RowFinder {
    /// Node `v`'s row; None for a type without rows.
    pub fn row(&self, v: u64) -> Option<RowAt> {
        let t = &self.0;
        let ty = t.type_of(v);
        let rows = t.rows[ty].as_ref()?;
        let (lo, len, at) = rows.layout.feature_extent(v - t.offsets[ty]);
        let (bytes, dim, dtype) =
            (rows.layout.row_bytes() as usize, rows.layout.feature_dim as usize, rows.layout.feature_dtype);
        Some(RowAt { file: rows.file, lo, len, at, bytes, dim, dtype })
    }
    /// Check node `v`'s row `bytes` (the row alone, found at `offset` of its
    /// type's file) against its CRC; the error names file, offset and node.
    pub fn check(&self, v: u64, bytes: &[u8], offset: u64) -> Result<()> {
        super::fetch::check_type_row(&self.0, self.0.type_of(v), v, bytes, offset, 0).map(|_| ())
    }
}

/// What a sampler knows about the types of its dataset.
pub(super) struct Typed {
    pub table: TypeTable,
    /// First global id of every node type, then the total.
    pub offsets: Vec<u64>,
    /// Per node type: its incoming edge types in slot order.
    pub in_rels: Vec<Vec<usize>>,
    /// Per edge type: the source and destination node type.
    pub src_of: Vec<usize>,
    pub dst_of: Vec<usize>,
    /// `[hop][edge type]` fanouts (-1 = all).
    pub fanouts: Vec<Vec<i32>>,
    pub rows: Vec<Option<TypeRows>>,
    /// Per node type: labels by local id (with labels on and the type labelled).
    pub labels: Vec<Option<Arc<[i32]>>>,
}

/// A typed batch's per-type parts (`Batch::typed`), types in the dataset's
/// declaration order; every array in the shape and dtype PyTorch takes.
#[derive(Debug, Clone, PartialEq)]
pub struct TypedBatch {
    /// The node type of the seeds.
    pub input_type: usize,
    pub node_types: Vec<NodeTypeBatch>,
    pub edge_types: Vec<EdgeTypeBatch>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NodeTypeBatch {
    /// Local ids (within the type) of the sampled nodes of this type, in
    /// PyG order: for the input type, the seeds first.
    pub n_id: Vec<i64>,
    /// Rows `[n_id.len(), dim]` in `x_dtype`; empty for a type without
    /// features (`dim` 0).
    pub x: Vec<u8>,
    pub x_dtype: Dtype,
    pub dim: u32,
    /// Labels of `n_id` (-1 unlabeled); empty when the type has none or
    /// labels are off.
    pub y: Vec<i64>,
    /// Nodes first reached per hop (`hops + 1` entries).
    pub num_sampled_nodes: Vec<i64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EdgeTypeBatch {
    /// `[2, E]` row-major: row = index into the source type's `n_id`, col =
    /// index into the destination type's.
    pub edge_index: Vec<i64>,
    /// Per edge: its position in the edge type's stored edge list (PyG's
    /// `e_id`: destinations ascending, sources ascending within one);
    /// empty for a dataset without edge bases (format version 3).
    pub e_id: Vec<i64>,
    /// Edges per hop (`hops` entries).
    pub num_sampled_edges: Vec<i64>,
}

impl EdgeTypeBatch {
    pub fn num_edges(&self) -> usize {
        self.edge_index.len() / 2
    }
}

impl TypedBatch {
    pub fn num_nodes(&self) -> usize {
        self.node_types.iter().map(|n| n.n_id.len()).sum()
    }
    pub fn num_edges(&self) -> usize {
        self.edge_types.iter().map(|e| e.num_edges()).sum()
    }
}

/// The key of relation `e`'s draws in a batch drawn with `seed`: each
/// relation's positions are drawn independently of the others'.
pub(super) fn rel_seed(seed: u64, e: usize) -> u64 {
    splitmix64(seed ^ splitmix64(0x7E1A_7104_0000_0000 ^ e as u64))
}

impl Typed {
    /// The typed view of `ds` (its manifest has `types`): per-type fanouts
    /// (`rel_fanouts`, else `fanouts[h]` for every edge type), row tables
    /// (engine files from `first_file` on, in type order; their names are
    /// returned to be opened) and labels.
    pub fn open(
        ds: &Dataset,
        table: &TypeTable,
        fanouts: &[i32],
        rel_fanouts: Option<&[Vec<i32>]>,
        labels: bool,
        first_file: u16,
    ) -> Result<(Typed, Vec<String>)> {
        let ne = table.edge_types.len();
        let fanouts: Vec<Vec<i32>> = match rel_fanouts {
            Some(r) => {
                if r.len() != fanouts.len() {
                    return Err(SampleError::Config(format!(
                        "rel_fanouts has {} hops, fanouts {}: the hop count must agree",
                        r.len(),
                        fanouts.len()
                    )));
                }
                if let Some((h, f)) = r.iter().enumerate().find(|(_, f)| f.len() != ne) {
                    return Err(SampleError::Config(format!(
                        "rel_fanouts hop {h} has {} entries; the dataset has {ne} edge types",
                        f.len()
                    )));
                }
                r.to_vec()
            }
            None => fanouts.iter().map(|&f| vec![f; ne]).collect(),
        };
        let idx = |name: &str| table.node_type_index(name).expect("checked on open");
        let offsets = table.offsets();
        let mut names = Vec::new();
        let mut rows = Vec::new();
        let mut labs = Vec::new();
        let l = ds.layout();
        for (t, n) in table.node_types.iter().enumerate() {
            rows.push(match table.feature_layout(t, l.page_size, l.dataset_id)? {
                Some(fl) => {
                    check_header(ds, &features_file(t), &fl)?;
                    let crc_name = feature_crc_file(t);
                    ds.check_side_file(&crc_name)?;
                    let a = ds.side_array(&crc_name)?;
                    check_npy(ds, &crc_name, &a.header, Dtype::Uint32, n.count)?;
                    let crcs = a.collect_shared(|_, c| Ok(c as u32))?;
                    let file = first_file + names.len() as u16;
                    names.push(features_file(t));
                    Some(TypeRows {
                        layout: fl,
                        crcs,
                        file,
                        name: ds.file(&features_file(t)),
                        mem: None,
                        mem_checked: false,
                    })
                }
                None => None,
            });
            labs.push(match (&n.labels, labels) {
                (Some(info), true) => {
                    let name = labels_file(t);
                    ds.check_side_file(&name)?;
                    let a = ds.side_array(&name)?;
                    check_npy(ds, &name, &a.header, Dtype::Int64, n.count)?;
                    let hi = info.num_classes as i64;
                    let off = a.header.data_offset;
                    Some(a.collect_shared(|i, y| {
                        if y < -1 || y >= hi {
                            return Err(FormatError::invalid(
                                ds.file(&name),
                                format!(
                                    "byte offset {}: label = {y} at index {i} is out of bounds (must be in [0, num_classes {hi}) or -1)",
                                    off + 8 * i
                                ),
                            )
                            .into());
                        }
                        Ok(y as i32)
                    })?)
                }
                _ => None,
            });
        }
        let typed = Typed {
            offsets,
            in_rels: (0..table.node_types.len()).map(|t| table.in_relations(t)).collect(),
            src_of: table.edge_types.iter().map(|e| idx(&e.src)).collect(),
            dst_of: table.edge_types.iter().map(|e| idx(&e.dst)).collect(),
            fanouts,
            rows,
            labels: labs,
            table: table.clone(),
        };
        Ok((typed, names))
    }

    /// The node type of global id `v` (`v < num_nodes`).
    #[inline]
    pub fn type_of(&self, v: u64) -> usize {
        // The last type starting at or before v (empty types are skipped).
        self.offsets[..self.offsets.len() - 1].partition_point(|&o| o <= v) - 1
    }

    /// Check that neighbor `id` along edge type `e` lies in its source
    /// type's range; `file`/`offset` name where it was stored.
    #[inline]
    pub fn check_src(&self, e: usize, id: u64, file: &str, offset: u64) -> Result<()> {
        let s = self.src_of[e];
        let (lo, hi) = (self.offsets[s], self.offsets[s + 1]);
        if id < lo || id >= hi {
            let et = &self.table.edge_types[e];
            return Err(FormatError::oob(
                file,
                offset,
                "neighbor id",
                id,
                format!(
                    "in [{lo}, {hi}): node type {:?}, the source of edge type ({}, {}, {})",
                    et.src, et.src, et.rel, et.dst
                ),
            )
            .into());
        }
        Ok(())
    }
}

/// The header page of a type's `t<i>.features.fg` against the layout the
/// manifest implies (magic, version, every field, the dataset id).
fn check_header(ds: &Dataset, name: &str, fl: &Layout) -> Result<()> {
    let r = flashgnn_io::stripe::open_reader(ds.root(), name)?;
    let mut page = vec![0u8; fl.page_size as usize];
    r.read_exact_at(&mut page, 0)?;
    let file = ds.file(name);
    let (h, want) = (FeatureHeader::decode(&file, &page)?, FeatureHeader::from_layout(fl));
    match header_mismatch(&file, (h.page_size, want.page_size), &h.compare(&want), (h.dataset_id, want.dataset_id)) {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

fn check_npy(ds: &Dataset, name: &str, h: &flashgnn_format::npy::NpyHeader, dtype: Dtype, len: u64) -> Result<()> {
    if h.dtype != dtype || h.shape.len() != 1 || h.shape[0] != len {
        return Err(FormatError::invalid(
            ds.file(name),
            format!(
                "byte offset 10: dtype {} shape {:?} is out of bounds (must be {} [{len}]: the node type's count)",
                h.dtype.name(),
                h.shape,
                dtype.name()
            ),
        )
        .into());
    }
    Ok(())
}

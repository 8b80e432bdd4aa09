//! The mutable graph's in-memory delta over an immutable base dataset, and
//! the immutable [`Snapshot`]s readers take of base + delta.
//!
//! A [`Delta`] holds a *fully materialised* record ([`NodeRec`]: the whole
//! current neighbor list and the feature row) for every node an operation
//! touched, copied from the base on first touch with the store's checked
//! point reads; the set of deleted ids (the free list); and the node count.
//! Nodes beyond the base's `N` live only in the delta. A node without a
//! record reads from the base unchanged.
//!
//! Persistence: the record map and the free list are `imbl` persistent
//! structures and each record sits behind an `Arc`, so cloning a delta is
//! O(1) and shares everything; a writer mutates its own clone (path copying,
//! one record copied on its first change) while readers keep theirs. That is
//! what makes a [`Snapshot`] O(1) to take and immutable once taken.
//!
//! Ids here are *original* (API) ids everywhere: map keys, neighbor lists and
//! the free list. Nodes added beyond `N` are identity-mapped (internal =
//! original), so a reader of a relabelled base converts with
//! `node_index` below `N` and the identity above.
//!
//! Semantics (undirected, as the mutable store requires a `--symmetrize`d
//! base): `AddEdge(dst, src)` puts `src` in `dst`'s list and `dst` in `src`'s
//! list unless already there (lists behave as sets; a self-loop is listed
//! once); `DeleteEdge` removes every occurrence from both lists and fails when
//! the edge does not exist; `DeleteVertex` removes the vertex from each
//! neighbor's list, empties its own list and puts the id on the free list;
//! `AddVertex` takes the lowest free id, else the next id `num_nodes`.
//!
//! Invariant: [`Delta::apply`] validates an operation completely before it
//! changes anything, so a failed operation leaves the delta as it was (the
//! caller applies a batch to a clone and drops the clone on failure).

use std::sync::Arc;

use flashgnn_format::dtype::{read_f64, write_float};
use flashgnn_format::Dtype;

use crate::{Dataset, StoreError};

/// Largest node count of a mutable graph: ids are `u32` in the sampler and the
/// importer keeps `u32::MAX` as a sentinel (`flashgnn_build::source::NODES_MAX`).
pub const NODES_MAX: u64 = u32::MAX as u64;

/// Why an operation was refused, or what failed while applying it.
#[derive(Debug, thiserror::Error)]
pub enum OverlayError {
    /// A bad argument: names the argument, its value and the bound.
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub type Result<T, E = OverlayError> = std::result::Result<T, E>;

fn invalid<T>(msg: String) -> Result<T> {
    Err(OverlayError::Invalid(msg))
}

/// One unit operation. `AddVertex::id` is `None` when a client submits it and
/// is filled in by [`Delta::apply`] with the id chosen, so the logged form is
/// deterministic on replay. Feature rows are in the stored dtype.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    AddVertex { id: Option<u64>, row: Vec<u8> },
    DeleteVertex { vid: u64 },
    AddEdge { dst: u64, src: u64 },
    DeleteEdge { dst: u64, src: u64 },
    UpdateEmbed { vid: u64, row: Vec<u8> },
}

/// A materialised node: its whole current state.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeRec {
    /// Neighbors (original ids), base order first, additions appended.
    pub neighbors: Vec<u64>,
    /// Feature row in the stored dtype (`feature_dim` values).
    pub row: Vec<u8>,
    /// Degree in the base (0 for a node beyond the base): the compactor
    /// derives the new edge count from the delta alone.
    pub base_degree: u64,
    /// Created by `AddVertex` (a new vertex, or a reused id): its label is -1.
    pub fresh: bool,
}

impl NodeRec {
    /// Heap bytes held, for statistics: what the two `Vec`s reserved (their
    /// capacity, not their length) plus a fixed 64 B per record for the
    /// `Arc`, the map node and the two `Vec` headers.
    pub fn heap_bytes(&self) -> u64 {
        self.neighbors.capacity() as u64 * 8 + self.row.capacity() as u64 + 64
    }

    /// A copy to edit, with room for one more neighbor and no more. A batch
    /// copies every record it edits that a snapshot still shares (all of
    /// them: the published snapshot holds the previous version), so spare
    /// room left in a copy is never used by a later batch, which copies
    /// again; a plain `clone` then `push` would double the list's capacity
    /// and keep every edited list at up to twice its length for as long as
    /// the delta lives (the soak's growth, docs/reliability.md, *Soak*).
    /// Within one batch, later pushes to the now-unshared copy grow it
    /// amortised as usual.
    fn copy_to_edit(&self) -> NodeRec {
        let mut neighbors = Vec::with_capacity(self.neighbors.len() + 1);
        neighbors.extend_from_slice(&self.neighbors);
        NodeRec { neighbors, row: self.row.clone(), base_degree: self.base_degree, fresh: self.fresh }
    }
}

/// A list gets a hash index for the rest of a batch once it has been probed
/// or edited this many times in the batch (and holds at least this many ids).
const INDEX_AFTER: u32 = 16;

/// A list's index within one batch: its current members, and tombstones of
/// deleted neighbors (value -> list length when deleted: every copy before
/// that position is gone; a later re-add is appended after it).
struct Indexed {
    live: std::collections::HashSet<u64>,
    dead: std::collections::HashMap<u64, usize>,
}

/// Per-batch state of [`Delta::apply_batch`]: how often each list was
/// probed, and the indexes of the busy ones. Dropped with the batch.
#[derive(Default)]
struct BatchIndex {
    tests: std::collections::HashMap<u64, u32>,
    hot: std::collections::HashMap<u64, Indexed>,
}

impl BatchIndex {
    /// Count a probe of `v`'s list; its index once it is busy enough (only
    /// lists with a record: the first edit materialises one).
    fn touch(&mut self, delta: &Delta, v: u64) -> Option<&mut Indexed> {
        if !self.hot.contains_key(&v) {
            let r = delta.nodes.get(&v)?;
            let c = self.tests.entry(v).or_insert(0);
            *c += 1;
            if *c < INDEX_AFTER || r.neighbors.len() < INDEX_AFTER as usize {
                return None;
            }
            let live = r.neighbors.iter().copied().collect();
            self.hot.insert(v, Indexed { live, dead: std::collections::HashMap::new() });
        }
        self.hot.get_mut(&v)
    }
}

/// The overlay: touched nodes, deleted ids, node count. Cloning is O(1).
#[derive(Debug, Clone)]
pub struct Delta {
    base_nodes: u64,
    num_nodes: u64,
    nodes: imbl::HashMap<u64, Arc<NodeRec>>,
    free: imbl::OrdSet<u64>,
    dim: u32,
    dtype: Dtype,
}

impl Delta {
    /// An empty delta over `base`, with `free` ids already deleted (from a
    /// compacted generation's free list: those nodes are isolated in the base).
    pub fn new(base: &Dataset, free: impl IntoIterator<Item = u64>) -> Result<Delta> {
        let n = base.num_nodes();
        let mut set = imbl::OrdSet::new();
        for v in free {
            if v >= n {
                return invalid(format!("free id {v} out of range [0, {n})"));
            }
            set.insert(v);
        }
        Ok(Delta {
            base_nodes: n,
            num_nodes: n,
            nodes: imbl::HashMap::new(),
            free: set,
            dim: base.feature_dim(),
            dtype: base.feature_dtype(),
        })
    }

    pub fn base_nodes(&self) -> u64 {
        self.base_nodes
    }
    pub fn num_nodes(&self) -> u64 {
        self.num_nodes
    }
    pub fn feature_dim(&self) -> u32 {
        self.dim
    }
    pub fn feature_dtype(&self) -> Dtype {
        self.dtype
    }
    /// The record of node `v` when the delta holds one.
    pub fn record(&self, v: u64) -> Option<&NodeRec> {
        self.nodes.get(&v).map(|r| r.as_ref())
    }
    pub fn is_deleted(&self, v: u64) -> bool {
        self.free.contains(&v)
    }
    /// Deleted ids (the free list), ascending.
    pub fn free_ids(&self) -> impl Iterator<Item = &u64> {
        self.free.iter()
    }
    pub fn free_len(&self) -> usize {
        self.free.len()
    }
    pub fn len(&self) -> usize {
        self.nodes.len()
    }
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty() && self.free.is_empty() && self.num_nodes == self.base_nodes
    }
    /// Heap bytes held by the records (O(records); for statistics).
    pub fn heap_bytes(&self) -> u64 {
        self.nodes.values().map(|r| r.heap_bytes()).sum::<u64>() + self.free.len() as u64 * 16
    }
    /// Stored directed neighbor entries of base + delta.
    pub fn num_edges(&self, base: &Dataset) -> u64 {
        let mut e = base.num_edges() as i128;
        for r in self.nodes.values() {
            e += r.neighbors.len() as i128 - r.base_degree as i128;
        }
        e.max(0) as u64
    }

    /// Check that `v` names a live vertex; `what` is the argument's name.
    pub fn check_vid(&self, what: &str, v: u64) -> Result<()> {
        if v >= self.num_nodes {
            return invalid(format!("{what} {v} out of range [0, {})", self.num_nodes));
        }
        if self.free.contains(&v) {
            return invalid(format!("{what} {v} is a deleted vertex"));
        }
        Ok(())
    }

    /// Encode `embed` as a feature row in the stored dtype, refusing a wrong
    /// length, NaN/Inf, and values the dtype cannot hold.
    pub fn encode_row(&self, embed: &[f64]) -> Result<Vec<u8>> {
        encode_row(self.dtype, self.dim, embed)
    }

    /// Check a row given in the stored dtype (from a log or a caller that
    /// encoded it itself): length and finite values.
    pub fn check_row(&self, what: &str, row: &[u8]) -> Result<()> {
        let want = self.dim as usize * self.dtype.size();
        if row.len() != want {
            return invalid(format!(
                "{what} has {} bytes; feature_dim {} of {} needs {want}",
                row.len(),
                self.dim,
                self.dtype.name()
            ));
        }
        for i in 0..self.dim as usize {
            let x = read_f64(self.dtype, row, i);
            if !x.is_finite() {
                return invalid(format!("{what}[{i}] = {x} is not finite"));
            }
        }
        Ok(())
    }

    /// The record of `v` for writing: materialised from the base on first
    /// touch (every read checked by the store), copied if shared.
    fn record_mut(&mut self, base: &Dataset, v: u64) -> Result<&mut NodeRec> {
        if !self.nodes.contains_key(&v) {
            if v >= self.base_nodes {
                // Nodes beyond the base are created with a record; none here
                // means the delta and the base do not belong together.
                return invalid(format!("internal: node {v} beyond the base ({}) has no record", self.base_nodes));
            }
            let mut neighbors = base.neighbors(v as i64)?;
            neighbors.reserve_exact(1); // room for the edge this touch usually adds (NodeRec::copy_to_edit)
            let mut row = Vec::with_capacity(self.dim as usize * self.dtype.size());
            base.feature_row(v as i64, &mut row)?;
            let base_degree = neighbors.len() as u64;
            self.nodes.insert(v, Arc::new(NodeRec { neighbors, row, base_degree, fresh: false }));
        }
        let rec = self.nodes.get_mut(&v).expect("inserted above");
        if Arc::get_mut(rec).is_none() {
            *rec = Arc::new(rec.copy_to_edit()); // shared with a snapshot: copy (not Arc::make_mut's clone)
        }
        Ok(Arc::get_mut(rec).expect("unshared after the copy"))
    }

    /// Current neighbor list of `v` (no validation of `v`).
    fn neighbors_of(&self, base: &Dataset, v: u64) -> Result<Vec<u64>> {
        match self.nodes.get(&v) {
            Some(r) => Ok(r.neighbors.clone()),
            None if v < self.base_nodes => Ok(base.neighbors(v as i64)?),
            None => Ok(Vec::new()),
        }
    }

    /// Whether `src` is in `dst`'s current list: a hash probe when `dst` is
    /// indexed in this batch, else a scan of its list (short lists, or lists
    /// edited fewer than [`INDEX_AFTER`] times in this batch).
    fn contains(&self, base: &Dataset, idx: &mut BatchIndex, dst: u64, src: u64) -> Result<bool> {
        if let Some(h) = idx.touch(self, dst) {
            return Ok(h.live.contains(&src));
        }
        Ok(match self.nodes.get(&dst) {
            Some(r) => r.neighbors.contains(&src),
            None => base.neighbors(dst as i64)?.contains(&src),
        })
    }

    /// Append `src` to `dst`'s list.
    fn push(&mut self, base: &Dataset, idx: &mut BatchIndex, dst: u64, src: u64) -> Result<()> {
        self.record_mut(base, dst)?.neighbors.push(src);
        if let Some(h) = idx.hot.get_mut(&dst) {
            h.live.insert(src);
        }
        Ok(())
    }

    /// Remove every copy of `src` from `dst`'s list: at once for a list not
    /// indexed, else by a tombstone applied when the batch ends.
    fn remove(&mut self, base: &Dataset, idx: &mut BatchIndex, dst: u64, src: u64) -> Result<()> {
        if let Some(h) = idx.touch(self, dst) {
            if h.live.remove(&src) {
                let len = self.nodes.get(&dst).expect("an indexed node has a record").neighbors.len();
                h.dead.insert(src, len);
            }
            return Ok(());
        }
        self.record_mut(base, dst)?.neighbors.retain(|&x| x != src);
        Ok(())
    }

    /// Apply `v`'s tombstones and drop its index (before its list is read or
    /// changed directly).
    fn flush(&mut self, base: &Dataset, idx: &mut BatchIndex, v: u64) -> Result<()> {
        if let Some(h) = idx.hot.remove(&v) {
            idx.tests.insert(v, 0);
            if !h.dead.is_empty() {
                let mut i = 0usize;
                self.record_mut(base, v)?.neighbors.retain(|x| {
                    // Copies of a deleted neighbor before the position it was
                    // deleted at are gone; a later re-add (appended) stays.
                    let keep = h.dead.get(x).is_none_or(|&l| i >= l);
                    i += 1;
                    keep
                });
            }
        }
        Ok(())
    }

    fn flush_all(&mut self, base: &Dataset, idx: &mut BatchIndex) -> Result<()> {
        let hot: Vec<u64> = idx.hot.keys().copied().collect();
        for v in hot {
            self.flush(base, idx, v)?;
        }
        Ok(())
    }

    /// Validate and apply one operation. Returns the new id for `AddVertex`
    /// (and fills `id` in). On error nothing has changed.
    pub fn apply(&mut self, base: &Dataset, op: &mut Op) -> Result<Option<u64>> {
        // A fresh index never indexes a list (one op edits a list at most
        // twice), so nothing is deferred and a failed op changes nothing.
        let mut idx = BatchIndex::default();
        let r = self.apply_op(base, op, &mut idx)?;
        self.flush_all(base, &mut idx)?;
        Ok(r)
    }

    /// Validate and apply a batch of operations in order, each against the
    /// state the earlier ones leave (as [`Delta::apply`] one by one would).
    /// Lists edited many times in the batch get a hash index for the batch,
    /// so K edge operations on one hub cost O(K + degree), not O(K x degree).
    /// On error returns the index of the failing op; the delta is then
    /// partly changed and must be dropped (callers apply batches to a clone).
    pub fn apply_batch(
        &mut self,
        base: &Dataset,
        ops: &mut [Op],
    ) -> std::result::Result<Vec<Option<u64>>, (usize, OverlayError)> {
        let mut idx = BatchIndex::default();
        let mut out = Vec::with_capacity(ops.len());
        for (i, op) in ops.iter_mut().enumerate() {
            out.push(self.apply_op(base, op, &mut idx).map_err(|e| (i, e))?);
        }
        self.flush_all(base, &mut idx).map_err(|e| (ops.len().saturating_sub(1), e))?;
        Ok(out)
    }

    fn apply_op(&mut self, base: &Dataset, op: &mut Op, idx: &mut BatchIndex) -> Result<Option<u64>> {
        match op {
            Op::AddVertex { id, row } => {
                self.check_row("embed", row)?;
                let v = match *id {
                    Some(v) => {
                        // Logged form: the id must be the one a live apply
                        // could have chosen (free, or the next new id).
                        if !(self.free.contains(&v) || v == self.num_nodes) {
                            return invalid(format!(
                                "add_vertex id {v} is neither a free id nor the next id {}",
                                self.num_nodes
                            ));
                        }
                        v
                    }
                    None => match self.free.get_min() {
                        Some(&v) => v,
                        None => self.num_nodes,
                    },
                };
                if v >= NODES_MAX {
                    return invalid(format!("add_vertex: node count would exceed the maximum {NODES_MAX}"));
                }
                let base_degree = if v < self.base_nodes {
                    // A reused base id: keep the base degree so edge counts
                    // stay exact (its record exists: deletion created it, or
                    // it came isolated from a compacted generation).
                    self.record(v).map(|r| r.base_degree).unwrap_or(0)
                } else {
                    0
                };
                let rec = NodeRec { neighbors: Vec::new(), row: row.clone(), base_degree, fresh: true };
                self.free.remove(&v);
                if v == self.num_nodes {
                    self.num_nodes += 1;
                }
                idx.hot.remove(&v);
                idx.tests.remove(&v);
                self.nodes.insert(v, Arc::new(rec));
                *id = Some(v);
                Ok(Some(v))
            }
            Op::DeleteVertex { vid } => {
                let v = *vid;
                self.check_vid("vid", v)?;
                self.flush(base, idx, v)?;
                let nbrs = self.neighbors_of(base, v)?;
                // Materialise every neighbor first: a failed base read then
                // leaves this (cloned) delta unpublished by the caller.
                for &u in &nbrs {
                    if u != v {
                        self.flush(base, idx, u)?;
                        self.record_mut(base, u)?.neighbors.retain(|&x| x != v);
                    }
                }
                let r = self.record_mut(base, v)?;
                r.neighbors.clear();
                r.fresh = false;
                self.free.insert(v);
                Ok(None)
            }
            Op::AddEdge { dst, src } => {
                let (d, s) = (*dst, *src);
                self.check_vid("dst", d)?;
                self.check_vid("src", s)?;
                if !self.contains(base, idx, d, s)? {
                    self.push(base, idx, d, s)?;
                }
                if d != s && !self.contains(base, idx, s, d)? {
                    self.push(base, idx, s, d)?;
                }
                Ok(None)
            }
            Op::DeleteEdge { dst, src } => {
                let (d, s) = (*dst, *src);
                self.check_vid("dst", d)?;
                self.check_vid("src", s)?;
                if !self.contains(base, idx, d, s)? && !self.contains(base, idx, s, d)? {
                    return invalid(format!("delete_edge: no edge between dst {d} and src {s}"));
                }
                self.remove(base, idx, d, s)?;
                self.remove(base, idx, s, d)?;
                Ok(None)
            }
            Op::UpdateEmbed { vid, row } => {
                let v = *vid;
                self.check_vid("vid", v)?;
                self.check_row("embed", row)?;
                self.record_mut(base, v)?.row.clone_from(row);
                Ok(None)
            }
        }
    }
}

/// Encode `embed` (f64 values) as a row of `dim` values of `dtype`.
pub fn encode_row(dtype: Dtype, dim: u32, embed: &[f64]) -> Result<Vec<u8>> {
    if embed.len() != dim as usize {
        return invalid(format!("embed has {} values; feature_dim is {dim}", embed.len()));
    }
    // Largest finite value of each stored dtype (float16: 65504).
    let max = match dtype {
        Dtype::Float16 => 65504.0,
        Dtype::Float32 => f32::MAX as f64,
        _ => f64::MAX,
    };
    let s = dtype.size();
    let mut out = vec![0u8; embed.len() * s];
    for (i, &x) in embed.iter().enumerate() {
        if !x.is_finite() {
            return invalid(format!("embed[{i}] = {x} is not finite"));
        }
        if x.abs() > max {
            return invalid(format!("embed[{i}] = {x} overflows {} (largest finite value {max})", dtype.name()));
        }
        write_float(dtype, x, &mut out[i * s..(i + 1) * s]);
    }
    Ok(out)
}

/// Something that hands out the current [`Snapshot`] of a graph that changes
/// while it is read: `flashgnn_mutate::MutableGraph` implements it (a fresh
/// snapshot per call, O(1)). Defined here, beside `Snapshot`, so that readers
/// (`flashgnn_sample::follow`) and the writer (`flashgnn-mutate`) meet on the
/// store layer without either depending on the other.
pub trait SnapshotSource: Send + Sync {
    /// The latest published snapshot; it never changes once handed out.
    fn snapshot(&self) -> Arc<Snapshot>;
}

/// An immutable view of base + delta at sequence number `seq` of generation
/// `generation`: what a reader (a request, a mini-batch) uses throughout.
#[derive(Clone)]
pub struct Snapshot {
    pub base: Arc<Dataset>,
    pub delta: Delta,
    pub generation: u64,
    /// Last operation batch (WAL frame) included.
    pub seq: u64,
}

impl Snapshot {
    pub fn num_nodes(&self) -> u64 {
        self.delta.num_nodes()
    }
    pub fn record(&self, v: u64) -> Option<&NodeRec> {
        self.delta.record(v)
    }
    pub fn is_deleted(&self, v: u64) -> bool {
        self.delta.is_deleted(v)
    }

    fn check(&self, what: &str, v: i64) -> Result<u64> {
        if v < 0 {
            return invalid(format!("{what} {v} out of range [0, {})", self.num_nodes()));
        }
        self.delta.check_vid(what, v as u64)?;
        Ok(v as u64)
    }

    /// Current neighbors of live vertex `vid` (original ids).
    pub fn neighbors(&self, vid: i64) -> Result<Vec<u64>> {
        let v = self.check("vid", vid)?;
        self.delta.neighbors_of(&self.base, v)
    }

    /// Current feature row of live vertex `vid`, in the stored dtype.
    pub fn embed(&self, vid: i64) -> Result<Vec<u8>> {
        let v = self.check("vid", vid)?;
        match self.delta.record(v) {
            Some(r) => Ok(r.row.clone()),
            None => {
                let mut out = Vec::new();
                self.base.feature_row(v as i64, &mut out)?;
                Ok(out)
            }
        }
    }

    /// Label override for node `v`: `Some(-1)` for vertices created by
    /// `AddVertex` and for deleted ones, `None` where the base's label holds.
    pub fn label_override(&self, v: u64) -> Option<i64> {
        if v >= self.delta.base_nodes() || self.delta.is_deleted(v) || self.record(v).is_some_and(|r| r.fresh) {
            Some(-1)
        } else {
            None
        }
    }
}

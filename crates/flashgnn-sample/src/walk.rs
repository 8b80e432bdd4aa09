//! GraphSAINT-style random-walk sampling and the batched full-neighbor-list
//! fetch it rests on.
//!
//! A batch starts `roots` walks of `walk_length` steps; each step of every
//! walk is uniform over the current node's neighbors, keyed by (batch seed,
//! walk, step) so engines and arrival orders agree. All walks advance
//! together: the lists of every current position are fetched with all reads
//! in flight at once. The batch is the subgraph *induced* by the visited
//! nodes (every stored edge between two of them).
//!
//! Output order: the distinct roots first (in order), then newly visited
//! nodes walk by walk, step by step; `row` = neighbor, `col` = target.

use rustc_hash::FxHashMap as HashMap;

use flashgnn_format::layout::{check_overflow_page, FeaturePlacement};
use flashgnn_format::slot::{decode_slot, read_id};
use flashgnn_format::FormatError;
use flashgnn_io::engine::{Done, ReadReq};

use crate::neighbor::{Batch, NeighborSampler, F_FEATURES};
use crate::rng::NodeRng;
use crate::{Result, SampleError};

/// What the fetch learns about one node.
#[derive(Debug, Clone, Default)]
pub struct NodeData {
    pub original: u64,
    pub neighbors: Vec<u32>,
    pub features: Vec<u8>,
    /// A typed slot's per-relation counts (the node type's incoming edge
    /// types in order: `neighbors` holds the relations one after another);
    /// empty for a homogeneous one.
    pub rel_counts: Vec<u32>,
}

impl NeighborSampler {
    /// Full neighbor lists (and original ids and feature rows) of `nodes`
    /// (internal ids). Through the snapshot, if any: nodes in its overlay
    /// are answered from memory, the rest read from the base.
    pub fn fetch_lists(&mut self, nodes: &[u32]) -> Result<Vec<NodeData>> {
        self.fetch_lists_keeping(nodes, false)
    }

    /// [`Self::fetch_lists`]; with `keep`, every page read (checked) is kept
    /// in the current batch's pages, so the batch that follows in the same
    /// request ([`Self::sample_started`]) is served from them instead of
    /// reading them again.
    pub(crate) fn fetch_lists_keeping(&mut self, nodes: &[u32], keep: bool) -> Result<Vec<NodeData>> {
        let Some(snap) = self.snapshot() else {
            return self.read_lists(nodes, keep);
        };
        let mut out = vec![NodeData::default(); nodes.len()];
        let (mut disk, mut at) = (Vec::new(), Vec::new());
        for (i, &v) in nodes.iter().enumerate() {
            let o = self.original_of(v);
            match snap.record(o) {
                Some(r) => {
                    out[i] = NodeData {
                        original: o,
                        neighbors: r.neighbors.iter().map(|&u| self.internal_of(u)).collect(),
                        features: r.row.clone(),
                        rel_counts: Vec::new(),
                    }
                }
                None => {
                    disk.push(v);
                    at.push(i);
                }
            }
        }
        for (i, d) in at.into_iter().zip(self.read_lists(&disk, keep)?) {
            out[i] = d;
        }
        Ok(out)
    }

    /// [`Self::fetch_lists`] from the base alone, with every read in flight
    /// at once and one read per page shared by all nodes on it.
    fn read_lists(&mut self, nodes: &[u32], keep: bool) -> Result<Vec<NodeData>> {
        let l = self.layout().clone();
        let p = l.page_size as u64;
        let mut out: Vec<NodeData> = vec![NodeData::default(); nodes.len()];
        let mut pending_ovf: Vec<u32> = vec![0; nodes.len()];
        let mut ovf_first: Vec<(u64, u64)> = vec![(0, 0); nodes.len()];
        // page key -> nodes waiting (slot pages: file 0, overflow: file 1).
        let mut waiting: HashMap<(u16, u64), Vec<usize>> = HashMap::default();
        let mut queue: Vec<ReadReq> = Vec::new();
        let files = self.file_names();
        for (i, &v) in nodes.iter().enumerate() {
            if v as u64 >= l.num_nodes {
                return Err(SampleError::BadRequest(format!("node {v} out of range")));
            }
            let page = l.slot_offset(v as u64) / p;
            push_wait(&mut waiting, &mut queue, (0, page), i, p);
            if l.placement == FeaturePlacement::Separate && l.row_bytes() > 0 {
                let (offset, len, _) = l.feature_extent(v as u64);
                queue.push(ReadReq { file: F_FEATURES, offset, len, tag: 1 << 56 | i as u64 });
            }
        }
        let mut done: Vec<Done> = Vec::new();
        let mut qi = 0;
        loop {
            while self.io_mut().in_flight() < self.io_depth() && qi < queue.len() {
                let r = queue[qi];
                qi += 1;
                let buf = self.pool_mut().get(r.len as usize);
                self.io_mut().submit(r, buf)?;
            }
            done.clear();
            let idle = self.io_mut().in_flight() == 0;
            self.io_mut().complete(if idle { 0 } else { 1 }, &mut done)?;
            if done.is_empty() && idle && qi == queue.len() {
                break;
            }
            for d in done.drain(..) {
                let r = (|| -> Result<()> {
                    let tag = d.req.tag;
                    let buf = d.buf.as_slice();
                    if tag >> 56 == 1 {
                        // Where the row sits in the extent, from the layout:
                        // a striped engine hands back the physical request.
                        let i = (tag & ((1 << 56) - 1)) as usize;
                        let (_, _, at) = l.feature_extent(nodes[i] as u64);
                        out[i].features = buf[at..at + l.row_bytes() as usize].to_vec();
                        return Ok(());
                    }
                    let (file, page) = ((tag >> 48 & 0xff) as u16, tag & ((1 << 48) - 1));
                    let who = waiting.remove(&(file, page)).unwrap_or_default();
                    if file == 1 {
                        check_overflow_page(&l, &files[1], page, buf)?;
                    }
                    for i in who {
                        let v = nodes[i] as u64;
                        if file == 0 {
                            let at = (l.slot_offset(v) - page * p) as usize;
                            let slot = decode_slot(&l, v, &buf[at..at + l.slot_bytes as usize], &files[0])?;
                            out[i].original = slot.original_id;
                            out[i].rel_counts = (0..l.rel_counts as usize).map(|j| slot.rel_count(j)).collect();
                            if l.placement == FeaturePlacement::Inline {
                                out[i].features = slot.features.to_vec();
                            }
                            out[i].neighbors = slot.inline_ids(&l, &files[0])?.into_iter().map(|x| x as u32).collect();
                            let spill = slot.overflow_len();
                            if spill > 0 {
                                let per = l.overflow_ids_per_page();
                                let (a, b) = (slot.overflow_first, slot.overflow_first + spill);
                                ovf_first[i] = (a, b);
                                let (p0, p1) = (1 + a / per, 1 + (b - 1) / per);
                                pending_ovf[i] = (p1 - p0 + 1) as u32;
                                out[i].neighbors.resize(slot.degree as usize, u32::MAX);
                                for pg in p0..=p1 {
                                    push_wait(&mut waiting, &mut queue, (1, pg), i, p);
                                }
                            }
                        } else {
                            let per = l.overflow_ids_per_page();
                            let (a, b) = ovf_first[i];
                            let (lo, hi) = ((page - 1) * per, page * per);
                            let w = l.id_bytes as usize;
                            let inline = out[i].neighbors.len() - (b - a) as usize;
                            for e in a.max(lo)..b.min(hi) {
                                let at = ((e - lo) as usize) * w;
                                let id = read_id(&buf[at..at + w]);
                                if id >= l.num_nodes {
                                    return Err(FormatError::oob(
                                        files[1].clone(),
                                        page * p + at as u64,
                                        "neighbor id",
                                        id,
                                        format!("< {}", l.num_nodes),
                                    )
                                    .into());
                                }
                                out[i].neighbors[inline + (e - a) as usize] = id as u32;
                            }
                            pending_ovf[i] -= 1;
                        }
                    }
                    Ok(())
                })();
                let tag = d.req.tag;
                if keep && r.is_ok() && tag >> 56 != 1 {
                    self.keep_batch_page((tag >> 48 & 0xff) as u16, tag & ((1 << 48) - 1), d.buf.as_slice());
                }
                self.pool_mut().put(d.buf);
                if let Err(e) = r {
                    self.drain_io();
                    return Err(e);
                }
            }
        }
        Ok(out)
    }

    /// GraphSAINT random-walk batch: `roots` (original ids) each start a walk
    /// of `walk_length` steps; returns the induced subgraph.
    pub fn random_walk(&mut self, roots: &[i64], walk_length: usize, seed: u64) -> Result<Batch> {
        self.refuse_typed("random walks")?;
        let n = self.num_nodes();
        let mut order: Vec<u32> = Vec::new();
        let mut local: HashMap<u32, usize> = HashMap::default();
        let mut add = |v: u32, order: &mut Vec<u32>| {
            local.entry(v).or_insert_with(|| {
                order.push(v);
                order.len() - 1
            });
        };
        let mut pos: Vec<u32> = Vec::with_capacity(roots.len());
        for &r in roots {
            if r < 0 || r as u64 >= n {
                return Err(SampleError::BadRequest(format!("root node id {r} out of range [0, {n})")));
            }
            let v = self.internal_of(r as u64);
            add(v, &mut order);
            pos.push(v);
        }
        let batch_size = order.len();
        let mut cache: HashMap<u32, NodeData> = HashMap::default();
        for step in 0..walk_length {
            let need: Vec<u32> = {
                let mut v: Vec<u32> = pos.iter().copied().filter(|v| !cache.contains_key(v)).collect();
                v.sort_unstable();
                v.dedup();
                v
            };
            let got = self.fetch_lists(&need)?;
            cache.extend(need.into_iter().zip(got));
            for (w, p) in pos.iter_mut().enumerate() {
                let nb = &cache[p].neighbors;
                if nb.is_empty() {
                    continue; // a walk stuck at a sink stays there
                }
                let mut rng = NodeRng::new(seed ^ (step as u64) << 40, w as u64);
                *p = nb[rng.below(nb.len() as u64) as usize];
                add(*p, &mut order);
            }
        }
        // Lists (and features) of every visited node, then the induced edges.
        let need: Vec<u32> = order.iter().copied().filter(|v| !cache.contains_key(v)).collect();
        let got = self.fetch_lists(&need)?;
        cache.extend(need.into_iter().zip(got));
        let mut b = Batch { batch_size, x_dtype: self.x_dtype(), ..Default::default() };
        let (mut row, mut col) = (Vec::new(), Vec::new());
        for (ci, &v) in order.iter().enumerate() {
            let d = &cache[&v];
            for &u in &d.neighbors {
                if let Some(&ri) = local.get(&u) {
                    row.push(ri as i64);
                    col.push(ci as i64);
                }
            }
        }
        b.num_sampled_nodes = vec![order.len() as i64];
        b.num_sampled_edges = vec![row.len() as i64];
        b.set_edges(row, col);
        b.n_id = order.iter().map(|v| cache[v].original as i64).collect();
        for v in &order {
            self.push_row(&cache[v].features, &mut b.x);
        }
        b.y = self.labels_of(&b.n_id);
        Ok(b)
    }
}

fn push_wait(
    waiting: &mut HashMap<(u16, u64), Vec<usize>>,
    queue: &mut Vec<ReadReq>,
    key: (u16, u64),
    i: usize,
    p: u64,
) {
    if let Some(w) = waiting.get_mut(&key) {
        w.push(i);
        return;
    }
    waiting.insert(key, vec![i]);
    queue.push(ReadReq { file: key.0, offset: key.1 * p, len: p as u32, tag: (key.0 as u64) << 48 | key.1 });
}

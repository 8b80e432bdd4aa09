//! The canonical pass: once nothing is in flight, local ids are assigned in
//! PyG order (seeds first, then hop by hop, parents in order, draws in order)
//! and each node's row, label and degree is copied into the [`Batch`]. The
//! order follows the draws alone, never when reads completed, so a batch is
//! a pure function of (dataset, fanouts, seeds, seed); a node whose draw is
//! not its level's is refused. Rows noted by a tagged offset into the
//! `memory` engine's copy or the cache's arena were checked when found and
//! are copied once, straight into `x`, which is reserved at exactly the rows
//! it will hold, converted to the requested dtype on the way. Every array is
//! written in the shape and dtype PyTorch takes (`edge_index` as one `[2, E]`
//! array), so the consumer converts nothing.

use super::{
    prefetch, reserve_rows, Batch, NeighborSampler, FEAT_ENCODED, FEAT_IN_ARENA, FEAT_IN_FEATURES, FEAT_IN_GRAPH,
    FEAT_OFFSET, F_FEATURES, F_GRAPH,
};
use crate::{Result, SampleError};
use flashgnn_format::dtype::{convert_floats, Dtype};

/// Rows prefetched ahead of the one `canonical` copies into `x`.
const GATHER_AHEAD: usize = 8;

impl NeighborSampler {
    /// Assign local ids in PyG order and gather the outputs.
    pub(super) fn canonical(&mut self, seed_idx: &[u32]) -> Result<Batch> {
        let mut b = Batch { batch_size: seed_idx.len(), x_dtype: self.x_dtype, ..Default::default() };
        let order = self.place(seed_idx, &mut b)?;
        b.n_id = order.iter().map(|&i| self.nodes[i as usize].original as i64).collect();
        self.copy_rows(&order, &mut b)?;
        b.y = self.labels_of(&b.n_id);
        if self.want_degrees {
            self.copy_degrees(&order, &mut b)?;
        }
        Ok(b)
    }

    /// Local ids in PyG order: the batch indices in local-id order, with the
    /// edges and the per-hop counts written into `b`.
    fn place(&self, seed_idx: &[u32], b: &mut Batch) -> Result<Vec<u32>> {
        let k = self.hops();
        // Rows are written into what becomes `edge_index` (reserved for both
        // halves), cols beside it and appended once at the end. The draws of
        // the expanded nodes size it; a seed given twice adds its edges twice.
        let drawn: usize = self.nodes.iter().filter(|n| n.expanded).map(|n| n.samples.len()).sum();
        let mut row: Vec<i64> = Vec::with_capacity(2 * drawn);
        let mut col: Vec<i64> = Vec::with_capacity(drawn);
        // Local id per batch index (-1: not placed yet).
        let mut local = vec![-1i64; self.nodes.len()];
        let mut order: Vec<u32> = Vec::with_capacity(self.nodes.len());
        for &i in seed_idx {
            if local[i as usize] < 0 {
                local[i as usize] = order.len() as i64;
            }
            order.push(i);
        }
        b.num_sampled_nodes.push(seed_idx.len() as i64);
        let mut frontier = 0..order.len();
        for hop in 0..k {
            let start = order.len();
            let edges0 = row.len();
            for f in frontier.clone() {
                let i = order[f];
                let node = &self.nodes[i as usize];
                if !node.expanded || node.drawn_hop as usize != hop {
                    return Err(SampleError::BadRequest(format!(
                        "internal: node {} at hop {hop} was not expanded at that hop",
                        node.v
                    )));
                }
                let target = local[i as usize];
                for &j in &node.samples {
                    let mut l = local[j as usize];
                    if l < 0 {
                        l = order.len() as i64;
                        local[j as usize] = l;
                        order.push(j);
                    }
                    row.push(l);
                    col.push(target);
                }
            }
            b.num_sampled_edges.push((row.len() - edges0) as i64);
            b.num_sampled_nodes.push((order.len() - start) as i64);
            frontier = start..order.len();
        }
        b.set_edges(row, col);
        Ok(order)
    }

    /// Copy the rows of the nodes in `order` into `b.x`, noting the resident
    /// and missing ones.
    fn copy_rows(&self, order: &[u32], b: &mut Batch) -> Result<()> {
        let rb = self.row_bytes();
        let (stored, out) = (self.layout.feature_dtype, self.x_dtype);
        // Bytes of one row as handed out (`x_dtype`).
        let ob = rb / stored.size() * out.size();
        // Exactly the rows `x` will hold (packed when free: see `Batch::x`), so a
        // batch waiting in the lookahead window keeps no unused capacity.
        let rows = if self.free_features_only {
            order.iter().filter(|&&i| self.nodes[i as usize].feature.is_some()).count()
        } else {
            order.len()
        };
        reserve_rows(&mut b.x, rows * ob);
        let mem_rows = |f: u16| self.mem[f as usize].as_deref().map_or(&[][..], |m| m.as_slice());
        let (in_graph, in_features) = (mem_rows(F_GRAPH), mem_rows(F_FEATURES));
        if rb > 0 {
            if self.resident.is_some() {
                b.resident.reserve(order.len());
            }
            // A row the static set holds encoded (`crate::rowcodec`): its
            // codec and held bytes.
            let held = self.held_rows(self.static_codec).map(|(_, h)| h);
            let codec = self.static_codec.filter(|_| held.is_some());
            // Where node `i`'s row is (None: not gathered here).
            let row_src = |i: u32| -> Option<&[u8]> {
                let off = self.nodes[i as usize].feature?;
                let at = off & FEAT_OFFSET;
                Some(match off & !FEAT_OFFSET {
                    0 => &self.features[at..at + rb],
                    FEAT_IN_GRAPH => &in_graph[at..at + rb],
                    FEAT_IN_FEATURES => &in_features[at..at + rb],
                    FEAT_IN_ARENA => self.cache.as_deref().expect("a static hit has a cache").static_at(at..at + rb),
                    _ => {
                        let h = held.expect("an encoded row has a codec");
                        self.cache.as_deref().expect("a static hit has a cache").static_at(at..at + h)
                    }
                })
            };
            // Scratch for an encoded row decoded to float32 before it is
            // converted to another `x_dtype`.
            let mut f32_row = Vec::new();
            for (pos, &i) in order.iter().enumerate() {
                // Rows a few places ahead: random places in the arena or a
                // file's copy, long evicted since their slot was decoded.
                if let Some(a) = order.get(pos + GATHER_AHEAD).and_then(|&j| row_src(j)) {
                    prefetch(a.as_ptr(), a.len());
                }
                let node = &self.nodes[i as usize];
                match (node.feature, node.resident) {
                    (Some(off), _) if off & FEAT_ENCODED != 0 => {
                        let (codec, row) = (codec.expect("an encoded row has a codec"), row_src(i).expect("a row"));
                        if out == Dtype::Float32 {
                            codec.decode(row, rb / 4, &mut b.x);
                        } else {
                            f32_row.clear();
                            codec.decode(row, rb / 4, &mut f32_row);
                            convert_floats(&f32_row, Dtype::Float32, out, &mut b.x);
                        }
                    }
                    (Some(_), _) if stored == out => b.x.extend_from_slice(row_src(i).expect("has a row")),
                    (Some(_), _) => convert_floats(row_src(i).expect("has a row"), stored, out, &mut b.x),
                    // Not gathered here: a zero row, named in `resident` (the
                    // device has it) or in `missing` (lookahead fills it).
                    (None, Some(_)) => b.x.resize(b.x.len() + ob, 0),
                    // Packed: no zero row is written for it, so a batch
                    // waiting in the lookahead window holds only the rows it
                    // has (the last hop's rows, most of `x`, come at fill).
                    (None, None) if self.free_features_only => b.missing.push(pos as i64),
                    (None, None) => {
                        return Err(SampleError::BadRequest(format!("internal: no features for node {}", node.v)))
                    }
                }
                if self.resident.is_some() {
                    b.resident.push(node.resident.filter(|_| node.feature.is_none()).map_or(-1, |r| r as i64));
                }
            }
        }
        Ok(())
    }

    /// Copy the degrees of the nodes in `order` into `b.deg`.
    fn copy_degrees(&self, order: &[u32], b: &mut Batch) -> Result<()> {
        b.deg.reserve(order.len());
        for &i in order {
            let node = &self.nodes[i as usize];
            if !node.slot_seen {
                return Err(SampleError::BadRequest(format!("internal: no degree for node {}", node.v)));
            }
            b.deg.push(node.degree as i64);
        }
        Ok(())
    }

    /// Append a row as stored to `x` in `x_dtype` (random walks' rows).
    pub(crate) fn push_row(&self, row: &[u8], x: &mut Vec<u8>) {
        convert_floats(row, self.layout.feature_dtype, self.x_dtype, x);
    }

    /// Labels of original ids `n_id` (`Batch::y`; empty when labels are off).
    pub(crate) fn labels_of(&self, n_id: &[i64]) -> Vec<i64> {
        match &self.labels {
            Some(lab) => n_id.iter().map(|&o| self.label_of(lab, o)).collect(),
            None => Vec::new(),
        }
    }
}

impl NeighborSampler {
    /// The canonical pass of a typed batch (see [`super::TypedBatch`]):
    /// local ids per node type in PyG's order — the seeds first within the
    /// input type, then hop by hop, within a hop edge type by edge type (in
    /// the dataset's order), destination nodes in local order, each one's
    /// draws along that edge type in draw order — and per edge type its
    /// edges (row: local id in the source type, col: in the destination
    /// type). Then every type's rows, in `x_dtype` (else as stored), and
    /// labels.
    pub(super) fn canonical_typed(&mut self, seed_idx: &[u32]) -> Result<Batch> {
        let t = self.typed.clone().expect("typed");
        let (nt, ne, k) = (t.table.node_types.len(), t.table.edge_types.len(), self.hops());
        let input = seed_idx.first().map_or(0, |&i| self.nodes[i as usize].ntype as usize);
        let mut local = vec![-1i64; self.nodes.len()];
        let mut order: Vec<Vec<u32>> = vec![Vec::new(); nt];
        let mut nsn = vec![vec![0i64; k + 1]; nt];
        let mut edges: Vec<(Vec<i64>, Vec<i64>)> = vec![(Vec::new(), Vec::new()); ne];
        let mut e_ids: Vec<Vec<i64>> = vec![Vec::new(); ne];
        let mut nse = vec![vec![0i64; k]; ne];
        // Each seed in its own type's order (one type but for a link batch
        // joining two: `crate::link`), the seeds first.
        for &i in seed_idx {
            let ty = self.nodes[i as usize].ntype as usize;
            if local[i as usize] < 0 {
                local[i as usize] = order[ty].len() as i64;
            }
            order[ty].push(i);
            nsn[ty][0] += 1;
        }
        let mut frontier: Vec<std::ops::Range<usize>> = order.iter().map(|o| 0..o.len()).collect();
        for hop in 0..k {
            for (ty, f) in frontier.iter().enumerate() {
                for &i in &order[ty][f.clone()] {
                    let node = &self.nodes[i as usize];
                    if !node.expanded || node.drawn_hop as usize != hop {
                        return Err(SampleError::BadRequest(format!(
                            "internal: node {} at hop {hop} was not expanded at that hop",
                            node.v
                        )));
                    }
                }
            }
            let starts: Vec<usize> = order.iter().map(|o| o.len()).collect();
            for e in 0..ne {
                let (s, d) = (t.src_of[e], t.dst_of[e]);
                let (mut row, mut col) = std::mem::take(&mut edges[e]);
                let e0 = row.len();
                for f in frontier[d].clone() {
                    let i = order[d][f];
                    let node = &self.nodes[i as usize];
                    let target = local[i as usize];
                    for (q, &j) in node.samples.iter().enumerate() {
                        if node.rels[q] as usize != e {
                            continue;
                        }
                        let mut l = local[j as usize];
                        if l < 0 {
                            l = order[s].len() as i64;
                            local[j as usize] = l;
                            order[s].push(j);
                        }
                        row.push(l);
                        col.push(target);
                        if let Some(&x) = node.eids.get(q) {
                            e_ids[e].push(x as i64);
                        }
                    }
                }
                nse[e][hop] = (row.len() - e0) as i64;
                edges[e] = (row, col);
            }
            for ty in 0..nt {
                nsn[ty][hop + 1] = (order[ty].len() - starts[ty]) as i64;
                frontier[ty] = starts[ty]..order[ty].len();
            }
        }
        let mut node_types = Vec::with_capacity(nt);
        for (ty, (ord, num_sampled_nodes)) in order.iter().zip(nsn).enumerate() {
            let off = t.offsets[ty] as i64;
            let n_id: Vec<i64> = ord.iter().map(|&i| self.nodes[i as usize].original as i64 - off).collect();
            let (mut x, mut x_dtype, mut dim) = (Vec::new(), self.x_dtype, 0);
            if let (Some(rows), true) = (t.rows[ty].as_ref(), self.gather_features) {
                let (stored, rb) = (rows.layout.feature_dtype, rows.layout.row_bytes() as usize);
                x_dtype = if self.x_dtype_set { self.x_dtype } else { stored };
                dim = rows.layout.feature_dim;
                reserve_rows(&mut x, ord.len() * dim as usize * x_dtype.size());
                let mem = rows.mem.as_deref().map_or(&[][..], |m| m.as_slice());
                // Bytes of a row the static set holds encoded (float32 rows only).
                let codec = self.static_codec.filter(|_| stored == Dtype::Float32);
                let held = codec.map_or(rb, |c| c.held(stored, dim as usize));
                // A row in the `memory` engine's copy of the type's table or
                // in the cache's static arena (checked when found; maybe
                // encoded), else in the batch's rows.
                let row_at = |off: usize| {
                    let at = off & FEAT_OFFSET;
                    match off & !FEAT_OFFSET {
                        FEAT_IN_FEATURES => &mem[at..at + rb],
                        0 => &self.features[at..at + rb],
                        FEAT_IN_ARENA => {
                            self.cache.as_deref().expect("a static hit has a cache").static_at(at..at + rb)
                        }
                        _ => self.cache.as_deref().expect("a static hit has a cache").static_at(at..at + held),
                    }
                };
                for (pos, &i) in ord.iter().enumerate() {
                    let node = &self.nodes[i as usize];
                    let off = node
                        .feature
                        .ok_or_else(|| SampleError::BadRequest(format!("internal: no features for node {}", node.v)))?;
                    let row = row_at(off);
                    // Rows a few places ahead: random places in a table or the arena.
                    if let Some(o) = ord.get(pos + GATHER_AHEAD).and_then(|&j| self.nodes[j as usize].feature) {
                        if o & !FEAT_OFFSET != 0 {
                            let a = row_at(o);
                            prefetch(a.as_ptr(), a.len());
                        }
                    }
                    if off & FEAT_ENCODED != 0 {
                        let codec = codec.expect("an encoded row has a codec");
                        if x_dtype == Dtype::Float32 {
                            codec.decode(row, dim as usize, &mut x);
                        } else {
                            let mut f = Vec::with_capacity(rb);
                            codec.decode(row, dim as usize, &mut f);
                            convert_floats(&f, stored, x_dtype, &mut x);
                        }
                    } else if stored == x_dtype {
                        x.extend_from_slice(row);
                    } else {
                        convert_floats(row, stored, x_dtype, &mut x);
                    }
                }
            }
            let y = match &t.labels[ty] {
                Some(lab) => n_id.iter().map(|&l| lab[l as usize] as i64).collect(),
                None => Vec::new(),
            };
            node_types.push(super::NodeTypeBatch { n_id, x, x_dtype, dim, y, num_sampled_nodes });
        }
        let edge_types = edges
            .into_iter()
            .zip(e_ids)
            .zip(nse)
            .map(|(((mut row, col), e_id), num_sampled_edges)| {
                row.extend_from_slice(&col);
                super::EdgeTypeBatch { edge_index: row, e_id, num_sampled_edges }
            })
            .collect();
        let typed = super::TypedBatch { input_type: input, node_types, edge_types };
        Ok(Batch {
            batch_size: seed_idx.len(),
            x_dtype: self.x_dtype,
            typed: Some(Box::new(typed)),
            ..Default::default()
        })
    }
}

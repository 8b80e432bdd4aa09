//! The device tier: feature rows kept resident outside the engine — in GPU
//! memory, by `flashgnn.DeviceCache` — so the engine neither reads nor copies
//! them.
//!
//! A sampler given a [`Resident`] set leaves a resident node's row in
//! `Batch::x` zeroed and names its row of the device table in
//! `Batch::resident`; the caller gathers those rows on the device. A resident
//! node that must be expanded still has its slot read (for its neighbors);
//! one that is only a last-hop node with its features inline, or any node
//! with separate features, costs no read for its row at all.
//!
//! The set is chosen by degree ([`NeighborSampler::top_nodes_by_degree`]):
//! under uniform neighbor sampling a node is reached about in proportion to
//! its degree, so the highest-degree rows are the ones most gathered (the
//! same ranking as the DRAM cache's static set, `crate::hot`).
//!
//! Like the DRAM cache, a set belongs to the dataset it was built for
//! ([`DatasetId`]); a sampler on any other dataset ignores it. Nodes in a
//! mutable graph's overlay always take their row from the overlay (their
//! embedding may have been updated since the table was loaded).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rustc_hash::FxHashMap as HashMap;

use flashgnn_format::slot::decode_slot;

use crate::cache::DatasetId;
use crate::neighbor::{NeighborSampler, F_GRAPH};
use crate::Result;

/// Internal node id -> row of the device table.
#[derive(Debug)]
pub struct Resident {
    id: DatasetId,
    rows: HashMap<u32, u32>,
}

impl Resident {
    /// `nodes[r]` (internal ids) is row `r` of the device table.
    pub fn new(id: DatasetId, nodes: &[u32]) -> Resident {
        let rows = nodes.iter().enumerate().map(|(r, &v)| (v, r as u32)).collect();
        Resident { id, rows }
    }
    pub fn dataset(&self) -> &DatasetId {
        &self.id
    }
    pub fn row(&self, v: u32) -> Option<u32> {
        self.rows.get(&v).copied()
    }
    pub fn len(&self) -> usize {
        self.rows.len()
    }
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

impl NeighborSampler {
    /// The `count` highest-degree nodes as (internal id, degree), highest
    /// first (ties by id): one sequential scan of `graph.fg`, memory in
    /// proportion to `count`.
    pub fn top_nodes_by_degree(&mut self, count: usize) -> Result<Vec<(u32, u32)>> {
        self.refuse_typed("a resident (device) feature tier")?;
        let l = self.layout().clone();
        let gname = self.file_names()[F_GRAPH as usize].clone();
        let mut heap: BinaryHeap<Reverse<(u32, Reverse<u32>)>> = BinaryHeap::with_capacity(count + 1);
        self.scan_slots(|v, bytes| {
            let d = decode_slot(&l, v, bytes, &gname)?.degree;
            let t = (d, Reverse(v as u32));
            if count > 0 && (heap.len() < count || heap.peek().is_some_and(|Reverse(min)| *min < t)) {
                heap.push(Reverse(t));
                if heap.len() > count {
                    heap.pop();
                }
            }
            Ok(())
        })?;
        let mut out: Vec<(u32, u32)> = heap.into_iter().map(|Reverse((d, Reverse(v)))| (v, d)).collect();
        out.sort_unstable_by_key(|&(v, d)| (Reverse(d), v));
        Ok(out)
    }
}

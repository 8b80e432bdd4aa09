//! Mutable-graph snapshots (docs/mutable.md). With
//! [`NeighborSampler::set_snapshot`], nodes in the snapshot's overlay (and
//! nodes beyond the base) are served from memory — degree, neighbor list and
//! feature row, no I/O — and drawn with the same keyed draw as from a slot,
//! so a node's draw does not depend on where its list lives; labels of
//! vertices added or deleted in the snapshot are -1. Without a snapshot a
//! batch is unchanged. The snapshot must be over this sampler's base, and
//! every overlay neighbor id is bound-checked against its node count.

use std::sync::Arc;

use flashgnn_store::{NodeRec, Snapshot};

use super::{NeighborSampler, Node};
use crate::rng::sample_indices;
use crate::{Result, SampleError};

impl NeighborSampler {
    /// Read base + delta of a mutable-graph snapshot from now on (None: the
    /// base alone). The snapshot must be over this sampler's dataset.
    pub fn set_snapshot(&mut self, snap: Option<Arc<Snapshot>>) -> Result<()> {
        if snap.is_some() {
            self.refuse_typed("a mutable-graph snapshot")?;
        }
        if let Some(s) = &snap {
            if s.base.root() != self.root || s.base.num_nodes() != self.layout.num_nodes {
                return Err(SampleError::BadRequest(format!(
                    "snapshot of generation {} is over {}, this sampler reads {}: open a sampler on the snapshot's base",
                    s.generation,
                    s.base.root().display(),
                    self.root.display()
                )));
            }
        }
        self.snapshot = snap;
        Ok(())
    }
    pub fn snapshot(&self) -> Option<&Arc<Snapshot>> {
        self.snapshot.as_ref()
    }
    /// Label of original id `o`: -1 for vertices added or deleted in the
    /// snapshot and beyond the stored labels.
    pub(super) fn label_of(&self, lab: &[i32], o: i64) -> i64 {
        if let Some(l) = self.snapshot.as_ref().and_then(|s| s.label_override(o as u64)) {
            return l;
        }
        lab.get(o as usize).map(|&l| l as i64).unwrap_or(-1)
    }

    /// Reach node `v` (internal id; original id `original`) at `hop` from the
    /// snapshot's overlay if it is there, as batch index `nodes.len()`;
    /// `rb` as [`Self::row_bytes`]. Returns whether it was.
    #[inline]
    pub(super) fn discover_overlay(&mut self, v: u32, hop: u8, original: u64, rb: usize, seed: u64) -> Result<bool> {
        // The overlay lookup borrows the `snapshot` field alone (the other
        // fields written below are disjoint from it).
        let Some(rec) = self.snapshot.as_deref().and_then(|s| s.record(original)) else {
            return Ok(false);
        };
        let k = self.hops() as u8;
        let i = self.nodes.len() as u32;
        // In the overlay: degree, neighbors and features from memory.
        let mut feature = None;
        if rb > 0 {
            feature = Some(self.features.len());
            self.features.extend_from_slice(&rec.row);
            self.bytes_used += rec.row.len() as u64;
        }
        self.nodes.push(Node {
            degree: rec.neighbors.len() as u32,
            slot_seen: true,
            overlay: true,
            feature,
            feature_requested: true,
            ..Node::new(v, hop, original)
        });
        self.index.insert(v, i);
        if hop < k {
            self.expand_overlay(i, seed)?;
        }
        Ok(true)
    }

    /// Expand an overlay node: draw from its in-memory list (the same draw
    /// as from a slot: keyed by (seed, internal id), `sample_indices`).
    pub(super) fn expand_overlay(&mut self, i: u32, seed: u64) -> Result<()> {
        let snap = self.snapshot.as_deref().expect("overlay nodes come from a snapshot");
        let rec = snap.record(self.nodes[i as usize].original).expect("overlay node has a record");
        let mut idx = std::mem::take(&mut self.scratch);
        let samples = self.draw_overlay(rec, i, seed, &mut idx);
        self.scratch = idx;
        let node = &mut self.nodes[i as usize];
        node.samples = samples?;
        node.drawn_hop = node.hop;
        self.finish_expansion(i, seed)
    }

    /// The sampled neighbors (internal ids) of overlay node `i`, whose record
    /// is `rec`, at its current hop; `idx` is scratch for the drawn indices.
    fn draw_overlay(&self, rec: &NodeRec, i: u32, seed: u64, idx: &mut Vec<u32>) -> Result<Vec<u32>> {
        let node = &self.nodes[i as usize];
        sample_indices(seed, node.v as u64, rec.neighbors.len() as u32, self.fanouts[node.hop as usize], idx);
        let n = self.snapshot.as_deref().expect("overlay nodes come from a snapshot").num_nodes();
        let mut samples = Vec::with_capacity(idx.len());
        for &x in idx.iter() {
            let u = rec.neighbors[x as usize];
            if u >= n {
                return Err(SampleError::BadRequest(format!(
                    "internal: overlay neighbor {u} of node {} out of range [0, {n})",
                    node.original
                )));
            }
            samples.push(self.internal_of(u));
        }
        Ok(samples)
    }
}

//! Expansion: reaching nodes and drawing their neighbors as slots and
//! overflow pages arrive. A node to expand draws its neighbor indices as soon
//! as its slot is decoded (`sample_indices`, uniform without replacement,
//! keyed by (batch seed, internal id)), resolves the inline ones at once and
//! asks only for the overflow pages holding the others; once its draw is
//! whole it reaches every drawn neighbor, whose reads are issued at once, so
//! hops run out of order with no barrier per hop. Every neighbor id is
//! bound-checked against the node count before it is reached.
//!
//! Invariant: the batch does not depend on the order reads complete. Each
//! node records the hop whose fanout drew its samples (`drawn_hop`); a draw
//! made at a deeper hop is redone when the node was reached at a smaller hop
//! while its overflow pages were in flight, and after any redraw `fix_levels`
//! re-derives every level from the seeds and redraws what is off.

use std::sync::Arc;

use flashgnn_format::layout::FeaturePlacement;
use flashgnn_format::slot::{decode_checked_slot, decode_slot, read_id, SlotView};
use flashgnn_format::FormatError;

use super::{NeighborSampler, Node, FEAT_ENCODED, FEAT_IN_ARENA, FEAT_IN_GRAPH, F_GRAPH, F_OVERFLOW, F_SLOT};
use crate::cache;
use crate::packed;
use crate::rng::sample_indices;
use crate::{Result, SampleError};

impl NeighborSampler {
    /// Reach internal node `v` at `hop`; returns its batch index.
    pub(super) fn discover(&mut self, v: u32, hop: u8, seed: u64) -> Result<u32> {
        let k = self.hops() as u8;
        if let Some(&i) = self.index.get(&v) {
            // Reached again at the deepest hop: that never lowers its hop, so
            // its record is not touched (on a full-neighbourhood batch that
            // load was a cache miss per repeated neighbour, half this
            // function's time).
            if hop >= k {
                return Ok(i);
            }
            let node = &mut self.nodes[i as usize];
            if hop < node.hop {
                node.hop = hop;
                // Already expanded at a deeper hop (an overlay node is expanded
                // the moment it is reached, possibly before a later seed
                // reaches it at hop 0): draw again with this hop's fanout, so
                // its children get the smaller hop too. Children of the old
                // draw stay in the batch with hops that may now be too small:
                // `sample` re-derives every level once the reads are done
                // (`fix_levels`). Not expanded and not expanding: reached
                // earlier than first thought, it must be expanded now. (One
                // still expanding is redrawn by `finish_expansion`.)
                if hop < k && (node.expanded || !node.expanding) {
                    self.redrawn |= node.expanded;
                    self.redraw(i, seed)?;
                }
            }
            return Ok(i);
        }
        let i = self.nodes.len() as u32;
        let original = self.original_of(v);
        let rb = self.row_bytes();
        if self.discover_overlay(v, hop, original, rb, seed)? {
            return Ok(i);
        }
        if v as u64 >= self.layout.num_nodes {
            return Err(SampleError::BadRequest(format!(
                "node {original} is beyond the base ({} nodes) but not in the snapshot's overlay",
                self.layout.num_nodes
            )));
        }
        // A resident row is gathered on the device: no read, no copy.
        let resident = self.resident.as_ref().filter(|_| rb > 0).and_then(|r| r.row(v));
        // Typed graphs: the node's type, and whether its type has rows.
        let (ntype, type_row) = match self.typed.as_deref() {
            Some(t) => {
                let ty = t.type_of(v as u64);
                (ty as u16, self.gather_features && t.rows[ty].is_some())
            }
            None => (0, false),
        };
        self.nodes.push(Node { resident, ntype, ..Node::new(v, hop, original) });
        self.index.insert(v, i);
        let wants_row = rb > 0 && resident.is_none() && !self.free_features_only;
        let needs_slot = hop < k || self.want_degrees || (self.placement == FeaturePlacement::Inline && wants_row);
        if needs_slot {
            self.request_slot(i)?;
        }
        if self.placement == FeaturePlacement::Separate && wants_row {
            self.request_feature(i)?;
        }
        if type_row {
            self.request_type_row(i)?;
        }
        Ok(i)
    }

    /// Node `i`'s slot bytes arrived; `offer`: from a page, so the slot is
    /// offered to the cross-batch cache the first time this batch sees it;
    /// `kept_at`: `bytes` are borrowed from memory that outlives the batch,
    /// at this tagged offset (`FEAT_IN_GRAPH` or `FEAT_IN_ARENA`): an inline
    /// row is then copied once, by `canonical`.
    pub(super) fn on_slot(
        &mut self,
        i: u32,
        bytes: &[u8],
        offer: bool,
        kept_at: Option<usize>,
        seed: u64,
    ) -> Result<()> {
        let l = &self.layout;
        let v = self.nodes[i as usize].v as u64;
        let gname = &self.files[F_GRAPH as usize];
        // A slot of the static set was checked whole when the set was loaded
        // and has stayed in the arena since: its CRC is not recomputed (its
        // fields still are bound-checked).
        let in_arena = kept_at.is_some_and(|a| a & FEAT_IN_ARENA == FEAT_IN_ARENA);
        // A static set holding slots re-encoded (only the sampler's own
        // loader, which checked each slot and its original id, makes one):
        // the entry starts with its row, encoded by the set's codec or not.
        let (slot, bytes, kept_at) = match kept_at {
            Some(at) if in_arena => {
                let slot = self.decode_static_slot(v, self.nodes[i as usize].original, bytes)?;
                match self.static_held_slots {
                    Some((_, true)) => (slot, slot.features, Some(at | FEAT_ENCODED)),
                    _ => (slot, bytes, kept_at),
                }
            }
            _ => (decode_slot(l, v, bytes, gname)?, bytes, kept_at),
        };
        let node = &mut self.nodes[i as usize];
        if node.node_mismatch(&slot) {
            return Err(FormatError::oob(
                gname.clone(),
                l.slot_offset(v) + 8,
                "original id",
                slot.original_id,
                format!("== {} from node_order.npy", node.original),
            )
            .into());
        }
        if !node.slot_seen {
            self.see_slot(i, &slot, bytes, offer, kept_at);
        }
        let node = &self.nodes[i as usize];
        let hop = node.hop as usize;
        if hop >= self.fanouts.len()
            || node.expanded
            || !node.expanding
            || !node.samples.is_empty()
            || node.pending_pages > 0
        {
            return Ok(());
        }
        self.draw_from_slot(i, &slot, hop, seed)
    }

    /// Node `v`'s slot (of original id `original`) from the bytes the
    /// static set holds for it: held re-encoded, or as stored and checked
    /// when the sampler loaded the set (its CRC skipped), or as stored by a
    /// set assembled otherwise (checked whole). Bound-checked either way.
    pub(super) fn decode_static_slot<'a>(&self, v: u64, original: u64, bytes: &'a [u8]) -> Result<SlotView<'a>> {
        let (l, gname) = (&self.layout, &self.files[F_GRAPH as usize]);
        Ok(match self.static_held_slots {
            Some((held, _)) => held.decode(l, v, original, bytes, gname)?,
            None if self.static_checked => decode_checked_slot(l, v, bytes, gname)?,
            None => decode_slot(l, v, bytes, gname)?,
        })
    }

    /// The first time this batch sees node `i`'s slot (arguments as in
    /// [`Self::on_slot`]): note its degree, offer the slot to the cross-batch
    /// cache and note where its inline row is.
    #[inline]
    fn see_slot(&mut self, i: u32, slot: &SlotView, bytes: &[u8], offer: bool, kept_at: Option<usize>) {
        let node = &mut self.nodes[i as usize];
        node.slot_seen = true;
        node.degree = slot.degree;
        self.bytes_used += 24;
        if let Some(c) = self.cache.as_ref().filter(|c| offer && c.accepts(bytes.len())) {
            c.insert(cache::key(F_SLOT, node.v as u64), Arc::from(bytes));
        }
        if self.placement == FeaturePlacement::Inline
            && self.gather_features
            && node.feature.is_none()
            && node.resident.is_none()
        {
            if let Some(at) = kept_at.filter(|a| a & FEAT_ENCODED != 0) {
                // Held encoded (`bytes` is the encoded row, at `at`): decoded
                // once, straight into `x`, by `canonical`.
                node.feature = Some(at);
                self.bytes_used += self.layout.row_bytes() as u64;
                return;
            }
            if slot.features.is_empty() {
                return;
            }
            node.feature = Some(match kept_at {
                // `slot.features` lies inside `bytes` (decode_slot's view).
                Some(at) => FEAT_IN_GRAPH | (at + (slot.features.as_ptr() as usize - bytes.as_ptr() as usize)),
                None => {
                    let off = self.features.len();
                    self.features.extend_from_slice(slot.features);
                    off
                }
            });
            self.bytes_used += slot.features.len() as u64;
        }
    }

    /// Expand node `i` from its decoded `slot` with hop `hop`'s fanout: draw
    /// indices, resolve the inline ones now, ask for the overflow pages
    /// holding the others.
    #[inline]
    fn draw_from_slot(&mut self, i: u32, slot: &SlotView, hop: usize, seed: u64) -> Result<()> {
        if self.typed.is_some() {
            return self.draw_typed(i, slot, hop, seed);
        }
        let l = &self.layout;
        let v = self.nodes[i as usize].v as u64;
        let gname = &self.files[F_GRAPH as usize];
        // Expand: choose indices, resolve inline ones now.
        let mut idx = std::mem::take(&mut self.scratch);
        sample_indices(seed, v, slot.degree, self.fanouts[hop], &mut idx);
        let cap = l.inline_cap;
        let mut samples = Vec::with_capacity(idx.len());
        let mut wanted = Vec::new();
        for (j, &x) in idx.iter().enumerate() {
            if x < cap {
                samples.push(slot.inline_id(x as usize, l, gname)? as u32);
            } else {
                samples.push(u32::MAX);
                wanted.push((j as u32, slot.overflow_first + (x - cap) as u64));
            }
        }
        self.scratch = idx;
        self.bytes_used += samples.len() as u64 * l.id_bytes as u64;
        let node = &mut self.nodes[i as usize];
        node.samples = samples;
        node.drawn_hop = hop as u8;
        self.request_wanted(i, wanted, seed)
    }

    /// Typed graphs: [`Self::draw_from_slot`] relation by relation. For
    /// each incoming edge type `e` of the node's type (the slot's `j`-th
    /// relation), draw `fanouts[hop][e]` of its `rel_count(j)` positions,
    /// keyed by (seed, e, node); each drawn id keeps `e`, and is checked to
    /// lie in `e`'s source type.
    fn draw_typed(&mut self, i: u32, slot: &SlotView, hop: usize, seed: u64) -> Result<()> {
        let t = self.typed.clone().expect("typed");
        let l = &self.layout;
        let v = self.nodes[i as usize].v as u64;
        let ty = self.nodes[i as usize].ntype as usize;
        let gname = &self.files[F_GRAPH as usize];
        let rels = &t.in_rels[ty];
        let listed: u64 = (0..rels.len()).map(|j| slot.rel_count(j) as u64).sum();
        if listed != slot.degree as u64 {
            // Counts beyond the type's incoming edge types must be 0.
            return Err(FormatError::oob(
                gname.clone(),
                l.slot_offset(v) + flashgnn_format::layout::SLOT_HEADER_BYTES as u64,
                "neighbors along the node type's incoming edge types",
                listed,
                format!("== degree {} (node type {:?})", slot.degree, t.table.node_types[ty].name),
            )
            .into());
        }
        let mut idx = std::mem::take(&mut self.scratch);
        let cap = l.inline_cap;
        let w = l.id_bytes as u64;
        let mut samples = Vec::new();
        let mut kinds = Vec::new();
        let mut wanted = Vec::new();
        let mut eids = Vec::new();
        let mut base = 0u32;
        for (j, &e) in rels.iter().enumerate() {
            let count = slot.rel_count(j);
            sample_indices(super::typed::rel_seed(seed, e), v, count, t.fanouts[hop][e], &mut idx);
            if let Some(first) = slot.edge_base(j) {
                // The decode bounded it by all edge types' entries; an
                // e_id must index its own edge type's list.
                let et = &t.table.edge_types[e];
                if first + count as u64 > et.num_edges {
                    return Err(FormatError::oob(
                        gname.clone(),
                        l.slot_offset(v) + l.edge_bases_offset() as u64 + 8 * j as u64,
                        "edge base",
                        first,
                        format!(
                            "<= {} - {count}: num_edges of edge type ({}, {}, {}) minus node {v}'s count",
                            et.num_edges, et.src, et.rel, et.dst
                        ),
                    )
                    .into());
                }
                eids.extend(idx.iter().map(|&x| first + x as u64));
            }
            for &x in idx.iter() {
                let p = base + x;
                if p < cap {
                    let id = slot.inline_id(p as usize, l, gname)?;
                    let at = l.slot_offset(v) + l.inline_ids_offset() as u64 + p as u64 * w;
                    t.check_src(e, id, gname, at)?;
                    samples.push(id as u32);
                } else {
                    wanted.push((samples.len() as u32, slot.overflow_first + (p - cap) as u64));
                    samples.push(u32::MAX);
                }
                kinds.push(e as u8);
            }
            base += count;
        }
        self.scratch = idx;
        self.bytes_used += samples.len() as u64 * w;
        let node = &mut self.nodes[i as usize];
        node.samples = samples;
        node.rels = kinds;
        node.eids = eids;
        node.drawn_hop = hop as u8;
        self.request_wanted(i, wanted, seed)
    }

    /// Node `i`'s draw is in `samples`, `wanted` the (index, overflow
    /// entry) of its entries in overflow: finish it now, or ask for the
    /// overflow pages holding them.
    fn request_wanted(&mut self, i: u32, wanted: Vec<(u32, u64)>, seed: u64) -> Result<()> {
        let l = &self.layout;
        let node = &mut self.nodes[i as usize];
        if wanted.is_empty() {
            return self.finish_expansion(i, seed);
        }
        let per = l.overflow_ids_per_page();
        let mut pages: Vec<u64> = wanted.iter().map(|&(_, e)| 1 + e / per).collect();
        pages.sort_unstable();
        pages.dedup();
        node.pending_pages = pages.len() as u32;
        node.wanted = wanted;
        for p in pages {
            self.request_overflow(i, p)?;
        }
        Ok(())
    }

    /// Node `i`'s wanted entries on overflow page `page`: `buf` is the raw
    /// page, or with `packed` a static set's packed copy (`crate::packed`).
    pub(super) fn on_overflow(&mut self, i: u32, page: u64, buf: &[u8], packed: bool, seed: u64) -> Result<()> {
        let l = &self.layout;
        let per = l.overflow_ids_per_page();
        let w = l.id_bytes as usize;
        let node = &mut self.nodes[i as usize];
        for &(j, e) in &node.wanted {
            if 1 + e / per == page {
                let at = (e % per) as usize * w;
                let id = if packed { packed::entry(buf, (e % per) as usize) } else { read_id(&buf[at..at + w]) };
                if id >= l.num_nodes {
                    return Err(FormatError::oob(
                        self.files[F_OVERFLOW as usize].clone(),
                        page * l.page_size as u64 + at as u64,
                        "neighbor id",
                        id,
                        format!("< num_nodes {}", l.num_nodes),
                    )
                    .into());
                }
                if let Some(t) = self.typed.as_deref() {
                    let fname = &self.files[F_OVERFLOW as usize];
                    t.check_src(node.rels[j as usize] as usize, id, fname, page * l.page_size as u64 + at as u64)?;
                }
                node.samples[j as usize] = id as u32;
            }
        }
        if let Some(t) = self.trace.as_mut() {
            let n = node.wanted.iter().filter(|&&(_, e)| 1 + e / per == page).count() as u32;
            t.page_used(F_OVERFLOW, page, n * w as u32, n);
        }
        node.pending_pages -= 1;
        if node.pending_pages == 0 {
            node.wanted.clear();
            return self.finish_expansion(i, seed);
        }
        Ok(())
    }

    /// Node `i`'s draw is whole: reach every drawn neighbor at the next hop
    /// (their batch indices replace the ids in `samples`).
    pub(super) fn finish_expansion(&mut self, i: u32, seed: u64) -> Result<()> {
        let node = &mut self.nodes[i as usize];
        if node.drawn_hop != node.hop {
            // Reached at a smaller hop while this draw (at a deeper hop's
            // fanout) waited for its overflow pages: draw again at the new
            // hop; the slot page is normally still in this batch's cache.
            return self.redraw(i, seed);
        }
        node.expanded = true;
        node.expanding = false;
        let hop = node.hop + 1;
        let mut samples = std::mem::take(&mut node.samples);
        if let Some(c) = self.cache.as_deref() {
            // Every sample's static-table entry at once: their DRAM misses
            // overlap instead of stalling `request_slot` one by one.
            let rows = self.typed.is_some() && self.gather_features;
            for &u in &samples {
                c.prefetch_slot_index(u as u64);
                if rows {
                    c.prefetch_row_index(u as u64);
                }
            }
        }
        for u in samples.iter_mut() {
            *u = self.discover(*u, hop, seed)?;
        }
        self.nodes[i as usize].samples = samples;
        Ok(())
    }

    /// Drop node `i`'s draw and expand it again at its current hop.
    fn redraw(&mut self, i: u32, seed: u64) -> Result<()> {
        let node = &mut self.nodes[i as usize];
        node.expanded = false;
        node.expanding = false;
        node.samples.clear();
        node.rels.clear();
        node.eids.clear();
        node.wanted.clear();
        node.pending_pages = 0;
        if node.overlay {
            self.expand_overlay(i, seed)
        } else {
            self.request_slot(i)
        }
    }

    /// After a redraw in this batch, hops noted while reading may be smaller
    /// than a node's true level: they may have come through a draw that was
    /// since replaced. Walk the batch from the seeds as `canonical` will, and
    /// redraw every node whose draw is not its level's; repeat until none is
    /// left. Levels are fixed from the seeds down, so each pass settles at
    /// least one more level and at most `hops + 1` passes are needed.
    pub(super) fn fix_levels(&mut self, seed_idx: &[u32], seed: u64) -> Result<()> {
        let k = self.hops();
        for _ in 0..=k + 1 {
            self.redrawn = false;
            // Level per batch index (UNSET: not reached yet).
            const UNSET: u8 = u8::MAX;
            let mut level = vec![UNSET; self.nodes.len()];
            let mut frontier: Vec<u32> = Vec::new();
            for &i in seed_idx {
                if level[i as usize] == UNSET {
                    level[i as usize] = 0;
                    frontier.push(i);
                }
            }
            let mut wrong = Vec::new();
            for hop in 0..k as u8 {
                let mut next = Vec::new();
                for &i in &frontier {
                    let node = &self.nodes[i as usize];
                    if !node.expanded || node.drawn_hop != hop {
                        wrong.push((i, hop));
                        continue; // its children are not known yet
                    }
                    for &j in &node.samples {
                        if level[j as usize] == UNSET {
                            level[j as usize] = hop + 1;
                            next.push(j);
                        }
                    }
                }
                frontier = next;
            }
            if wrong.is_empty() {
                return Ok(());
            }
            for (i, hop) in wrong {
                self.nodes[i as usize].hop = hop;
                self.redraw(i, seed)?;
            }
            self.run(seed)?;
        }
        Err(SampleError::BadRequest("internal: node levels did not settle".into()))
    }
}

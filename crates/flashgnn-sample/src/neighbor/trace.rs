//! I/O trace capture (docs/trace.md). With [`NeighborSampler::set_trace`]
//! on, every read a batch issues is recorded (file, offset, length, kind,
//! hop, the read whose completion caused it, bytes used, submit and complete
//! times); a page read once and then served again from the batch's own pages
//! is one record, and later nodes on it add to its bytes used. Off (the
//! default), every hook in the sampler is a single branch on
//! `NeighborSampler::trace`. While capturing, the `memory` engine's copies
//! are not read in place (a trace records reads); the batch is the same.

use std::time::Instant;

use flashgnn_format::trace::{TraceRead, KIND_FEATURE_ROW, KIND_OVERFLOW_PAGE, KIND_SLOT_PAGE, NO_DEP};
use rustc_hash::FxHashMap as HashMap;

use super::fetch::{Ready, Waiter, TAG_FEATURE, TAG_KEY};
use super::{NeighborSampler, F_GRAPH, F_OVERFLOW};

/// Reads captured for the current batch (see [`NeighborSampler::set_trace`]).
pub(super) struct TraceCap {
    t0: Instant,
    reads: Vec<TraceRead>,
    /// Record index of each page read in this batch.
    page_rec: HashMap<(u16, u64), u32>,
    /// Record index of each node's feature-row read.
    feature_rec: HashMap<u32, u32>,
    /// The read being handled now (its completion causes what is queued).
    cause: u32,
}

impl TraceCap {
    /// A batch starts: no reads, no cause.
    pub(super) fn reset(&mut self) {
        self.reads.clear();
        self.page_rec.clear();
        self.feature_rec.clear();
        self.cause = NO_DEP;
    }
    /// Page `page` of `file` (`page_size` bytes) is queued for node `v`, reached at `hop`.
    pub(super) fn page_read(&mut self, file: u16, page: u64, page_size: u64, hop: u8, v: u32) {
        let kind = if file == F_GRAPH { KIND_SLOT_PAGE } else { KIND_OVERFLOW_PAGE };
        let r = self.push(file, kind, hop, page * page_size, page_size as u32, v);
        self.page_rec.insert((file, page), r);
    }
    /// Batch node `i`'s feature row (`len` bytes at `lo` of engine file
    /// `file`: features.fg, or a typed dataset's `t<i>.features.fg`) is
    /// queued; `v` and `hop` as in [`Self::page_read`].
    pub(super) fn feature_read(&mut self, i: u32, file: u16, lo: u64, len: u32, hop: u8, v: u32) {
        let r = self.push(file, KIND_FEATURE_ROW, hop, lo, len, v);
        self.feature_rec.insert(i, r);
    }
    /// The engine took the request carrying `tag`.
    pub(super) fn submitted(&mut self, tag: u64) {
        if let Some(r) = self.rec_of_tag(tag) {
            self.reads[r as usize].submit_ns = (self.t0.elapsed().as_nanos() as u64).max(1);
        }
    }
    /// The request carrying `tag` completed: what its handling queues is caused by it.
    pub(super) fn completed(&mut self, tag: u64) {
        self.cause = self.rec_of_tag(tag).unwrap_or(NO_DEP);
        if let Some(r) = self.reads.get_mut(self.cause as usize) {
            r.complete_ns = (self.t0.elapsed().as_nanos() as u64).max(r.submit_ns);
        }
    }
    /// A request served from memory is handled: one served from this batch's
    /// pages is caused by that page's read, any other by none.
    pub(super) fn serving(&mut self, r: &Ready) {
        self.cause = match r {
            Ready::Page(page, Waiter::Slot(_), _) => self.page_rec.get(&(F_GRAPH, *page)).copied(),
            Ready::Page(page, Waiter::Overflow(_), _) => self.page_rec.get(&(F_OVERFLOW, *page)).copied(),
            Ready::StaticPage(page, _, _) => self.page_rec.get(&(F_OVERFLOW, *page)).copied(),
            Ready::Slot(..) | Ready::StaticSlot(..) | Ready::MemSlot(..) | Ready::MemOverflow(..) => None,
        }
        .unwrap_or(NO_DEP);
    }
    /// What is queued from now on has no cause (a redraw in `fix_levels`).
    pub(super) fn clear_cause(&mut self) {
        self.cause = NO_DEP;
    }
    /// `items` entries (`bytes` bytes) of page `page` of `file` were used.
    pub(super) fn page_used(&mut self, file: u16, page: u64, bytes: u32, items: u32) {
        let rec = self.page_rec.get(&(file, page)).copied();
        self.used(rec, bytes, items);
    }
    /// Batch node `i`'s feature row (`bytes` bytes) was used.
    pub(super) fn feature_used(&mut self, i: u32, bytes: u32) {
        let rec = self.feature_rec.get(&i).copied();
        self.used(rec, bytes, 1);
    }
    fn push(&mut self, file: u16, kind: u8, hop: u8, offset: u64, length: u32, node: u32) -> u32 {
        let index = self.reads.len() as u32;
        self.reads.push(TraceRead {
            batch: 0,
            index,
            file: file as u8,
            kind,
            hop,
            offset,
            length,
            dep: self.cause,
            node,
            ..Default::default()
        });
        index
    }
    /// The record of the request carrying `tag`.
    fn rec_of_tag(&self, tag: u64) -> Option<u32> {
        if tag & !TAG_KEY == TAG_FEATURE {
            self.feature_rec.get(&((tag & TAG_KEY) as u32)).copied()
        } else {
            self.page_rec.get(&(((tag >> 48) & 0xff) as u16, tag & ((1 << 48) - 1))).copied()
        }
    }
    fn used(&mut self, rec: Option<u32>, bytes: u32, items: u32) {
        if let Some(r) = rec.and_then(|r| self.reads.get_mut(r as usize)) {
            r.bytes_used = (r.bytes_used + bytes).min(r.length);
            r.items += items;
        }
    }
}

impl NeighborSampler {
    /// Turn I/O trace capture on or off. On, every read a batch issues is
    /// recorded (file, offset, length, kind, hop, dependency, bytes used,
    /// submit/complete times since this call); [`Self::take_trace`] hands
    /// over the last batch's reads.
    pub fn set_trace(&mut self, on: bool) {
        self.trace = on.then(|| {
            Box::new(TraceCap {
                t0: Instant::now(),
                reads: Vec::new(),
                page_rec: HashMap::default(),
                feature_rec: HashMap::default(),
                cause: NO_DEP,
            })
        });
    }

    /// The trace's file table: the dataset file name of each value a
    /// record's `file` takes (graph.fg, overflow.fg, then features.fg, or a
    /// typed dataset's `t<i>.features.fg` files in type order).
    pub fn trace_files(&self) -> &[String] {
        &self.trace_files
    }

    /// The reads of the most recent batch (empty when capture is off),
    /// in issue order (`index` = position); `batch` fields are 0 (the
    /// writer numbers batches).
    pub fn take_trace(&mut self) -> Vec<TraceRead> {
        self.trace.as_mut().map(|t| std::mem::take(&mut t.reads)).unwrap_or_default()
    }
}

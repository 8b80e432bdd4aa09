//! Where each extent a batch needs comes from, and the loop that fetches
//! them. A slot, overflow page or separate feature row is taken from the
//! first of: the `memory` engine's copy of its file (in place: no buffer, no
//! copy); this batch's pages (slots and overflow pages: read earlier, or
//! being read, so one read serves every node waiting on a page); the
//! cross-batch cache; a read queued to the engine. `run` submits reads up to
//! the engine's depth and hands every completion, and every request served
//! from memory, to its waiter (`expand`).
//!
//! Every byte is checked before it is used, wherever it came from: a slot on
//! every decode; an overflow page when read, on every hit in the cache's
//! dynamic part, and once per batch when taken from the `memory` engine's
//! copy or the static set (not again when the sampler checked that set as
//! it loaded it); a feature row against its stored CRC. A read is offered to
//! the cross-batch cache only after it passed its checks. Memory per batch is
//! bounded: an I/O buffer goes back to the pool as soon as its read is
//! handled, so only reads in flight hold one, and the batch's page copies
//! stop at `page_cache_max`.

use std::sync::Arc;
use std::time::Instant;

use flashgnn_format::layout::check_overflow_page;
use flashgnn_format::slot::{decode_slot, read_id};
use flashgnn_format::{FormatError, Layout};
use flashgnn_io::engine::{resident_at, Done, ReadReq};
use rustc_hash::FxHashMap as HashMap;

use super::{
    prefetch, NeighborSampler, FEAT_ENCODED, FEAT_IN_ARENA, FEAT_IN_FEATURES, FEAT_IN_GRAPH, F_FEATURES, F_GRAPH,
    F_OVERFLOW, F_SLOT, F_TYPE_ROW,
};
use crate::cache::{self, PageCache};
use crate::packed;
use crate::Result;

/// Tag kinds (top byte of a request tag).
pub(super) const TAG_PAGE: u64 = 1 << 56;
pub(super) const TAG_FEATURE: u64 = 2 << 56;
pub(super) const TAG_KEY: u64 = (1 << 56) - 1;

/// wait to be submitted (`run`): ~30 us of hits at ~0.5 us each, against
/// one `io_uring_enter` (~1-2 us) per visit.
const READY_ROUND: usize = 64;

/// How far ahead in the ready queue `run` prefetches a static slot's header
/// and neighbor lines (cache_probe on data/ooc: 31-32 -> 26-29 ms of CPU a
/// batch at 8; 16 was no better).
const PREFETCH_AHEAD: usize = 8;

/// Rows prefetched ahead of the one `canonical` copies into `x`.
/// In-flight samples kept per batch for the depth timeline (one per
/// completion round): 4096 rounds cover a 1024-seed, 25x10 batch at depth 256.
const TIMELINE_PER_BATCH_MAX: usize = 4096;

#[derive(Debug, Clone, Copy)]
pub(super) enum Waiter {
    Slot(u32),
    Overflow(u32),
}

/// A request served from memory, waiting to be handled.
pub(super) enum Ready {
    /// A whole page from this batch's pages (or an overflow page from the
    /// cross-batch cache): (page, waiter, bytes); the waiter names the file.
    Page(u64, Waiter, Arc<[u8]>),
    /// Node `i`'s slot alone, from the cross-batch cache's dynamic part.
    Slot(u32, Arc<[u8]>),
    /// Node `i`'s slot from the static hot set, by its place in the cache's
    /// arena: the bytes are borrowed from there when handled (no `Arc`, no
    /// copy, no second lookup).
    StaticSlot(u32, std::ops::Range<usize>),
    /// An overflow page from the static hot set (page, waiter, its place in
    /// the cache's arena, as for `StaticSlot`), already checked when
    /// requested.
    StaticPage(u64, Waiter, std::ops::Range<usize>),
    /// Node `i`'s slot, borrowed from the `memory` engine's copy of graph.fg
    /// (no read, no buffer, no copy; checked on decode like every slot).
    MemSlot(u32),
    /// Overflow page `page` for node `i`, borrowed from the `memory`
    /// engine's copy of overflow.fg (checked when first handled in a batch).
    MemOverflow(u64, u32),
}

impl NeighborSampler {
    /// Serve `w` from this batch if page `key` is already here: read earlier
    /// (kept, served without another read) or being read (one read serves
    /// every node waiting on the page). Returns whether it was.
    fn serve_from_batch(&mut self, key: (u16, u64), w: Waiter) -> bool {
        if let Some(data) = self.page_cache.get(&key) {
            self.page_hits += 1;
            self.ready.push_back(Ready::Page(key.1, w, data.clone()));
            return true;
        }
        if let Some(ws) = self.pages.get_mut(&key) {
            ws.push(w);
            return true;
        }
        false
    }

    /// Read page `page` of `file` for `w` (the first waiter on it).
    fn queue_page(&mut self, file: u16, page: u64, w: Waiter) {
        let p = self.layout.page_size as u64;
        if let Some(t) = self.trace.as_mut() {
            let (Waiter::Slot(i) | Waiter::Overflow(i)) = w;
            let node = &self.nodes[i as usize];
            t.page_read(file, page, p, node.hop, node.v);
        }
        self.pages.insert((file, page), vec![w]);
        self.queue.push_back(ReadReq {
            file,
            offset: page * p,
            len: p as u32,
            tag: TAG_PAGE | (file as u64) << 48 | page,
        });
    }

    /// Overflow page `page` for node `i`: this batch, then the cross-batch
    /// cache (whole overflow pages), then a read.
    pub(super) fn request_overflow(&mut self, i: u32, page: u64) -> Result<()> {
        let p = self.layout.page_size as u64;
        let key = cache::key(F_OVERFLOW, page * p);
        self.count_access(key, p as u32);
        if self.mem[F_OVERFLOW as usize].is_some() && self.trace.is_none() {
            self.direct.record(p as u32, 1);
            self.ready.push_back(Ready::MemOverflow(page, i));
            return Ok(());
        }
        if self.serve_from_batch((F_OVERFLOW, page), Waiter::Overflow(i)) {
            return Ok(());
        }
        if let Some(c) = self.cache.as_deref() {
            // A static page of a set the sampler loaded was checked then and
            // has stayed in the arena since; one of any other set is checked
            // once per batch (0.3 us; a hub's page is asked for by many nodes
            // of a batch), as a read one is. This batch's own pages were
            // checked when read (`on_done`).
            if let Some(at) = c.get_static_extent(key) {
                let data = c.static_at(at.clone());
                self.cache_hits[0] += 1;
                if !self.static_checked {
                    let fname = &self.files[F_OVERFLOW as usize];
                    check_overflow_once(&mut self.checked_overflow, &self.layout, fname, page, data)?;
                }
                // The entries `on_overflow` reads, fetched while it waits.
                let (per, w) = (self.layout.overflow_ids_per_page(), self.layout.id_bytes as usize);
                for &(_, e) in &self.nodes[i as usize].wanted {
                    if 1 + e / per == page {
                        let k = (e % per) as usize;
                        let at = if self.static_packed { packed::header_offset(k) } else { k * w };
                        prefetch(data.as_ptr().wrapping_add(at), w);
                    }
                }
                self.ready.push_back(Ready::StaticPage(page, Waiter::Overflow(i), at));
                return Ok(());
            }
            if let Some(data) = c.get_dynamic(key) {
                self.cache_hits[1] += 1;
                check_overflow_page(&self.layout, &self.files[F_OVERFLOW as usize], page, &data)?;
                self.ready.push_back(Ready::Page(page, Waiter::Overflow(i), data));
                return Ok(());
            }
            self.cache_misses += 1;
        }
        self.queue_page(F_OVERFLOW, page, Waiter::Overflow(i));
        Ok(())
    }

    /// Node `i`'s slot: its page from this batch (no lock), then the slot
    /// alone from the cross-batch cache (which holds single slots, checked on
    /// every decode), then a read of its page.
    pub(super) fn request_slot(&mut self, i: u32) -> Result<()> {
        let node = &mut self.nodes[i as usize];
        if node.hop < self.fanouts.len() as u8 {
            node.expanding = true;
        }
        let v = node.v;
        let page = self.layout.slot_offset(v as u64) / self.layout.page_size as u64;
        let key = cache::key(F_SLOT, v as u64);
        self.count_access(key, self.layout.slot_bytes);
        if let Some(g) = self.mem[F_GRAPH as usize].as_deref().filter(|_| self.trace.is_none()) {
            prefetch(
                g.as_ptr().wrapping_add(self.layout.slot_offset(v as u64) as usize),
                self.layout.slot_bytes as usize,
            );
            self.direct.record(self.layout.slot_bytes, 1);
            self.ready.push_back(Ready::MemSlot(i));
            return Ok(());
        }
        // A static set holding slots re-encoded serves them before this
        // batch's pages do: whether a page holding the slot was read earlier
        // in the batch depends on read order, and an encoded row's value
        // (decoded or as stored) must not.
        let static_first = self.static_held_slots.is_some();
        let held = self.cache.as_deref().filter(|_| static_first).and_then(|c| c.get_static_extent(key));
        if held.is_none() && self.serve_from_batch((F_GRAPH, page), Waiter::Slot(i)) {
            return Ok(());
        }
        if let Some(c) = self.cache.as_deref() {
            if let Some(r) = held.or_else(|| c.get_static_extent(key)) {
                self.cache_hits[0] += 1;
                // Decoded when the ready queue reaches it: fetch it meanwhile.
                let a = c.static_at(r.clone());
                prefetch(a.as_ptr(), a.len());
                self.ready.push_back(Ready::StaticSlot(i, r));
                return Ok(());
            }
            if let Some(data) = c.get_dynamic(key) {
                self.cache_hits[1] += 1;
                self.ready.push_back(Ready::Slot(i, data));
                return Ok(());
            }
            self.cache_misses += 1;
        }
        self.queue_page(F_GRAPH, page, Waiter::Slot(i));
        Ok(())
    }

    /// Node `i`'s separate feature row, once per batch: the `memory` engine's
    /// copy, then the cross-batch cache, then a read of its sector-aligned extent.
    pub(super) fn request_feature(&mut self, i: u32) -> Result<()> {
        let node = &mut self.nodes[i as usize];
        if node.feature_requested {
            return Ok(());
        }
        node.feature_requested = true;
        let (lo, len, at) = self.layout.feature_extent(node.v as u64);
        let key = cache::key(F_FEATURES, lo);
        self.count_access(key, len);
        if let Some(f) = self.mem[F_FEATURES as usize].as_deref().filter(|_| self.trace.is_none()) {
            // Checked here, copied once into `x` by `canonical`.
            let row = resident_at(f, self.io.path(F_FEATURES), lo, len)?;
            let v = self.nodes[i as usize].v as u64;
            let fname = &self.files[F_FEATURES as usize];
            check_row(&self.layout, self.feature_crcs.as_deref(), fname, v, row, lo, at)?;
            self.direct.record(len, 1);
            self.nodes[i as usize].feature = Some(FEAT_IN_FEATURES | (lo as usize + at));
            self.bytes_used += self.layout.row_bytes() as u64;
            return Ok(());
        }
        if let Some(c) = self.cache.as_deref() {
            if let Some(r) = c.get_static_extent(key).filter(|r| self.static_codec.is_some() && r.len() != len as usize)
            {
                // The row alone, held encoded (checked before it was, by the
                // sampler's own loader): decoded once, straight into `x`, by
                // `canonical`.
                self.cache_hits[0] += 1;
                let a = c.static_at(r.clone());
                prefetch(a.as_ptr(), a.len());
                self.nodes[i as usize].feature = Some(FEAT_IN_ARENA | FEAT_ENCODED | r.start);
                self.bytes_used += self.layout.row_bytes() as u64;
                return Ok(());
            }
            if let Some(data) = c.get_static(key) {
                // Gathered straight from the arena into the batch's rows.
                self.cache_hits[0] += 1;
                let v = self.nodes[i as usize].v as u64;
                let crcs = self.feature_crcs.as_deref();
                let fname = &self.files[F_FEATURES as usize];
                let off = gather_row(&self.layout, crcs, fname, &mut self.features, v, data, lo, at)?;
                self.nodes[i as usize].feature = Some(off);
                self.bytes_used += self.layout.row_bytes() as u64;
                return Ok(());
            }
            if let Some(data) = c.get_dynamic(key) {
                self.cache_hits[1] += 1;
                return self.on_feature(i as usize, &data, lo, at);
            }
            self.cache_misses += 1;
        }
        if let Some(t) = self.trace.as_mut() {
            let node = &self.nodes[i as usize];
            t.feature_read(i, F_FEATURES, lo, len, node.hop, node.v);
        }
        self.queue.push_back(ReadReq { file: F_FEATURES, offset: lo, len, tag: TAG_FEATURE | i as u64 });
        Ok(())
    }

    /// Typed graphs: node `i`'s row from its type's `t<i>.features.fg`
    /// (local row `v - offset(t)`), once per batch: the cross-batch cache's
    /// dynamic part (rows are offered to it as they are read, under
    /// [`F_TYPE_ROW`]), then a read of its sector-aligned extent. A cached
    /// row is checked against its CRC like a read one.
    pub(super) fn request_type_row(&mut self, i: u32) -> Result<()> {
        let node = &mut self.nodes[i as usize];
        if node.feature_requested {
            return Ok(());
        }
        node.feature_requested = true;
        let (v, hop) = (node.v, node.hop);
        let t = self.typed.as_deref().expect("typed");
        let ty = node.ntype as usize;
        let rows = t.rows[ty].as_ref().expect("a type with rows");
        let (lo, len, at) = rows.layout.feature_extent(v as u64 - t.offsets[ty]);
        let (file, rb) = (rows.file, rows.layout.row_bytes());
        let key = cache::key(F_TYPE_ROW, v as u64);
        if let Some(a) = &mut self.accesses {
            a.entry(key).or_insert((rb, 0)).1 += 1; // `count_access`, beside the borrow of `t`
        }
        if let Some(m) = rows.mem.as_deref().filter(|_| self.trace.is_none()) {
            // The `memory` engine's copy: checked here, copied once into
            // the type's `x` by `canonical_typed` (no read, no buffer).
            let extent = resident_at(m, self.io.path(file), lo, len)?;
            if !rows.mem_checked {
                check_type_row(t, ty, v as u64, extent, lo, at)?;
            }
            self.direct.record(len, 1);
            self.nodes[i as usize].feature = Some(FEAT_IN_FEATURES | (lo as usize + at));
            self.bytes_used += rows.layout.row_bytes() as u64;
            return Ok(());
        }
        if let Some(c) = self.cache.as_deref() {
            if let Some(r) = c.get_static_extent(key) {
                self.cache_hits[0] += 1;
                self.bytes_used += rb as u64;
                if r.len() != rb as usize {
                    // Held encoded (checked before it was): decoded once,
                    // straight into the type's `x`, by `canonical_typed`.
                    let a = c.static_at(r.clone());
                    prefetch(a.as_ptr(), a.len());
                    self.nodes[i as usize].feature = Some(FEAT_IN_ARENA | FEAT_ENCODED | r.start);
                    return Ok(());
                }
                // The row alone, copied once into the type's `x` by
                // `canonical_typed`; checked when the sampler loaded the set.
                if !self.static_checked {
                    check_type_row(t, ty, v as u64, c.static_at(r.clone()), lo + at as u64, 0)?;
                }
                let a = c.static_at(r.clone());
                prefetch(a.as_ptr(), a.len());
                self.nodes[i as usize].feature = Some(FEAT_IN_ARENA | r.start);
                return Ok(());
            }
            if let Some(data) = c.get_dynamic(key) {
                self.cache_hits[1] += 1;
                return self.on_type_row(i as usize, &data);
            }
            self.cache_misses += 1;
        }
        if let Some(tr) = self.trace.as_mut() {
            tr.feature_read(i, file, lo, len, hop, v);
        }
        self.queue.push_back(ReadReq { file, offset: lo, len, tag: TAG_FEATURE | i as u64 });
        Ok(())
    }

    /// A typed row's extent arrived: check it against its type's CRC (bound
    /// to the global id) and append it to the batch's rows.
    fn on_type_row(&mut self, i: usize, buf: &[u8]) -> Result<()> {
        let t = self.typed.as_deref().expect("typed");
        let (v, ty) = (self.nodes[i].v as u64, self.nodes[i].ntype as usize);
        let rows = t.rows[ty].as_ref().expect("a type with rows");
        let (lo, _, at) = rows.layout.feature_extent(v - t.offsets[ty]);
        let rb = rows.layout.row_bytes() as usize;
        let bytes = check_type_row(t, ty, v, buf, lo, at)?;
        if let Some(tr) = self.trace.as_mut() {
            tr.feature_used(i as u32, rb as u32);
        }
        self.nodes[i].feature = Some(self.features.len());
        self.features.extend_from_slice(bytes);
        self.bytes_used += rb as u64;
        Ok(())
    }

    /// Fetch until nothing is queued, in flight or ready: submit queued reads
    /// up to the engine's depth, hand each completion to its waiters, then
    /// serve the requests waiting in memory (whose expansions queue more).
    pub(super) fn run(&mut self, seed: u64) -> Result<()> {
        let mut done: Vec<Done> = Vec::new();
        loop {
            self.submit_queued()?;
            if self.io.in_flight() == 0 && self.queue.is_empty() {
                // Synchronous engines complete inside submit; collect those too.
                done.clear();
                self.io.complete(0, &mut done)?;
                if done.is_empty() && self.ready.is_empty() {
                    return Ok(());
                }
            } else {
                // Requests served from memory are handled without waiting
                // for a read: block for a completion only when none is ready
                // (their expansions queue more reads, which then overlap).
                done.clear();
                if self.ready.is_empty() {
                    let w = Instant::now();
                    self.io.complete(1, &mut done)?;
                    self.io_wait += w.elapsed().as_secs_f64();
                    self.io_waits += 1;
                } else {
                    self.io.complete(0, &mut done)?;
                }
            }
            if self.timeline.len() < TIMELINE_PER_BATCH_MAX {
                self.timeline.push((self.opened.elapsed().as_secs_f64(), self.io.in_flight() as u32));
            }
            for d in done.drain(..) {
                if let Some(t) = self.trace.as_mut() {
                    t.completed(d.req.tag);
                }
                let r = self.on_done(&d, seed);
                self.pool.put(d.buf);
                r?;
            }
            self.serve_ready(seed)?;
            if let Some(t) = self.trace.as_mut() {
                // Reads queued outside a completion (a redraw in `fix_levels`) have no cause.
                t.clear_cause();
            }
        }
    }

    /// Submit queued reads while the engine has room.
    fn submit_queued(&mut self) -> Result<()> {
        while self.io.in_flight() < self.io.depth() {
            let Some(req) = self.queue.pop_front() else { break };
            let buf = self.pool.get(req.len as usize);
            if let Some(t) = self.trace.as_mut() {
                t.submitted(req.tag);
            }
            self.io.submit(req, buf)?;
        }
        Ok(())
    }

    /// Handle the requests served from memory (`ready`), up to `READY_ROUND`
    /// of them while reads wait to be submitted.
    fn serve_ready(&mut self, seed: u64) -> Result<()> {
        // Pages from memory: overflow pages were checked when read or
        // taken from the cross-batch cache (`request_overflow`); slots are
        // checked on every decode (static ones once, when loaded: `on_slot`).
        // The cache stays alive while its arena is borrowed (one `Arc`
        // clone per round with static hits, not one per hit).
        let mut statics: Option<Arc<PageCache>> = None;
        let mut graph: Option<Arc<Vec<u8>>> = None;
        let mut overflow: Option<Arc<Vec<u8>>> = None;
        let mut handled = 0usize;
        while let Some(r) = self.ready.pop_front() {
            // The static slot PREFETCH_AHEAD places on: the lines its
            // decode reads (header, inline neighbors at the end). The
            // whole-slot prefetch when it was queued is often evicted by
            // the time a long queue reaches it.
            match (self.ready.get(PREFETCH_AHEAD), self.cache.as_deref()) {
                (Some(Ready::StaticSlot(_, a)), Some(c)) => {
                    let b = c.static_at(a.clone());
                    prefetch(b.as_ptr(), 64);
                    prefetch(b.as_ptr().wrapping_add(b.len().saturating_sub(64)), 64);
                }
                // A block-packed page's entries sit where their block's
                // header (prefetched when queued) says: fetch those lines now.
                (Some(Ready::StaticPage(page, Waiter::Overflow(i), a)), Some(c)) if self.static_packed => {
                    let data = c.static_at(a.clone());
                    let per = self.layout.overflow_ids_per_page();
                    for &(_, e) in &self.nodes[*i as usize].wanted {
                        if 1 + e / per == *page {
                            let (low, up) = packed::block_lines(data, (e % per) as usize);
                            prefetch(data.as_ptr().wrapping_add(low), 8);
                            prefetch(data.as_ptr().wrapping_add(up), 8);
                        }
                    }
                }
                _ => {}
            }
            // Misses found while serving hits go to the device every
            // READY_ROUND requests served, not once the whole ready queue
            // is empty: a hit expands into dozens more, so that queue can
            // hold milliseconds of work while the ring sits empty (or full
            // of reads long completed but not reaped).
            handled += 1;
            if handled.is_multiple_of(READY_ROUND) && !self.queue.is_empty() {
                self.ready.push_front(r);
                break;
            }
            if let Some(t) = self.trace.as_mut() {
                // Served from this batch's pages: caused by that page's read.
                t.serving(&r);
            }
            match r {
                Ready::Page(page, Waiter::Slot(i), data) => self.on_slot_page(i, page, &data, seed)?,
                Ready::Page(page, Waiter::Overflow(i), data) => self.on_overflow(i, page, &data, false, seed)?,
                Ready::Slot(i, data) => self.on_slot(i, &data, false, None, seed)?,
                Ready::MemSlot(i) => {
                    let g = graph.get_or_insert_with(|| self.mem[F_GRAPH as usize].clone().expect("memory engine"));
                    let at = self.layout.slot_offset(self.nodes[i as usize].v as u64);
                    let slot = resident_at(g, self.io.path(F_GRAPH), at, self.layout.slot_bytes)?;
                    self.on_slot(i, slot, false, Some(FEAT_IN_GRAPH | at as usize), seed)?
                }
                Ready::MemOverflow(page, i) => {
                    let o = overflow.get_or_insert_with(|| self.mem[F_OVERFLOW as usize].clone().expect("memory"));
                    let p = self.layout.page_size;
                    let data = resident_at(o, self.io.path(F_OVERFLOW), page.saturating_mul(p as u64), p)?;
                    let fname = &self.files[F_OVERFLOW as usize];
                    check_overflow_once(&mut self.checked_overflow, &self.layout, fname, page, data)?;
                    self.on_overflow(i, page, data, false, seed)?
                }
                Ready::StaticSlot(i, r) => {
                    let c = statics.get_or_insert_with(|| self.cache.clone().expect("a static hit has a cache"));
                    let at = FEAT_IN_ARENA | r.start;
                    self.on_slot(i, c.static_at(r), false, Some(at), seed)?
                }
                Ready::StaticPage(page, w, at) => {
                    let c = statics.get_or_insert_with(|| self.cache.clone().expect("a static hit has a cache"));
                    let data = c.static_at(at);
                    match w {
                        Waiter::Slot(i) => self.on_slot_page(i, page, data, seed)?,
                        Waiter::Overflow(i) => self.on_overflow(i, page, data, self.static_packed, seed)?,
                    }
                }
            }
        }
        Ok(())
    }

    /// A read passed its checks: keep a copy of a page for the rest of the
    /// batch (bounded) and offer the extent at logical (`file`, `offset`) to
    /// the cross-batch cache.
    /// Slot pages go to the batch's pages only: their slots are offered one
    /// by one (`on_slot`).
    fn keep(&mut self, file: u16, offset: u64, bytes: &[u8], is_page: bool) {
        let fits = is_page && self.page_cache_held + bytes.len() <= self.page_cache_max;
        let shared = if file == F_GRAPH { None } else { self.cache.as_ref().filter(|c| c.accepts(bytes.len())) };
        if !fits && shared.is_none() {
            return;
        }
        let data: Arc<[u8]> = Arc::from(bytes);
        if let Some(c) = shared {
            c.insert(cache::key(file, offset), data.clone());
        }
        if fits {
            self.page_cache_held += data.len();
            self.page_cache.insert((file, offset / self.layout.page_size as u64), data);
        }
    }

    /// Keep page `page` of `file`, read and checked outside the batch's own
    /// loop (a link batch's list reads, `crate::link`), for the rest of the
    /// batch, within the same bound as every batch page.
    pub(crate) fn keep_batch_page(&mut self, file: u16, page: u64, bytes: &[u8]) {
        let p = self.layout.page_size as u64;
        self.keep(file, page * p, bytes, true);
    }

    /// Drop this batch's pages (end of a batch).
    pub(super) fn clear_page_cache(&mut self) {
        self.page_cache.clear();
        self.page_cache_held = 0;
        self.ready.clear();
    }

    /// A read completed. Offsets come from the tag and the layout, never
    /// from `d.req`: a striped engine hands back the physical request.
    fn on_done(&mut self, d: &Done, seed: u64) -> Result<()> {
        let tag = d.req.tag;
        let buf = d.buf.as_slice();
        if tag & !TAG_KEY == TAG_FEATURE {
            let i = (tag & TAG_KEY) as usize;
            if self.typed.is_some() {
                self.on_type_row(i, buf)?;
                // Offered to the cross-batch cache only once checked.
                self.keep(F_TYPE_ROW, self.nodes[i].v as u64, buf, false);
                return Ok(());
            }
            let (lo, _, at) = self.layout.feature_extent(self.nodes[i].v as u64);
            if let Some(t) = self.trace.as_mut() {
                t.feature_used(i as u32, self.layout.row_bytes());
            }
            self.on_feature(i, buf, lo, at)?;
            self.keep(F_FEATURES, lo, buf, false);
            return Ok(());
        }
        let file = ((tag >> 48) & 0xff) as u16;
        let page = tag & ((1 << 48) - 1);
        let waiters = self.pages.remove(&(file, page)).unwrap_or_default();
        if file == F_OVERFLOW {
            check_overflow_page(&self.layout, &self.files[F_OVERFLOW as usize], page, buf)?;
        }
        // Kept *before* the waiters run: they may ask for this page again (a
        // node on it reached at a new hop), which must then hit instead of
        // issuing a second read. Slots are checked on every decode.
        self.keep(file, page * self.layout.page_size as u64, buf, true);
        for w in waiters {
            match w {
                Waiter::Slot(i) => self.on_slot_page(i, page, buf, seed)?,
                Waiter::Overflow(i) => self.on_overflow(i, page, buf, false, seed)?,
            }
        }
        Ok(())
    }

    /// A separate feature row arrived: `buf` holds its sector-aligned extent,
    /// which starts at byte `lo` of the file and has the row at `at`
    /// (`Layout::feature_extent`).
    fn on_feature(&mut self, i: usize, buf: &[u8], lo: u64, at: usize) -> Result<()> {
        let v = self.nodes[i].v as u64;
        let crcs = self.feature_crcs.as_deref();
        let fname = &self.files[F_FEATURES as usize];
        let off = gather_row(&self.layout, crcs, fname, &mut self.features, v, buf, lo, at)?;
        self.nodes[i].feature = Some(off);
        self.bytes_used += self.layout.row_bytes() as u64;
        Ok(())
    }

    /// Node `i`'s slot page `page` is in `buf` (read, or from this batch's pages).
    fn on_slot_page(&mut self, i: u32, page: u64, buf: &[u8], seed: u64) -> Result<()> {
        let l = &self.layout;
        let start = (l.slot_offset(self.nodes[i as usize].v as u64) - page * l.page_size as u64) as usize;
        if let Some(t) = self.trace.as_mut() {
            t.page_used(F_GRAPH, page, l.slot_bytes, 1);
        }
        self.on_slot(i, &buf[start..start + l.slot_bytes as usize], true, None, seed)
    }
}

/// Check feature row `v` (at `at` in `buf`, an extent that starts at byte
/// `lo` of `fname`) against its stored CRC, then append it to the batch's
/// rows; returns its offset there. Shared by reads and cache hits, so a
/// cached row is checked exactly like a read one and copied once.
#[allow(clippy::too_many_arguments)]
fn gather_row(
    layout: &Layout,
    crcs: Option<&[u32]>,
    fname: &str,
    features: &mut Vec<u8>,
    v: u64,
    buf: &[u8],
    lo: u64,
    at: usize,
) -> Result<usize> {
    let bytes = check_row(layout, crcs, fname, v, buf, lo, at)?;
    let off = features.len();
    features.extend_from_slice(bytes);
    Ok(off)
}

/// Feature row `v` of extent `buf` (see [`gather_row`]), checked against its
/// stored CRC.
fn check_row<'a>(
    layout: &Layout,
    crcs: Option<&[u32]>,
    fname: &str,
    v: u64,
    buf: &'a [u8],
    lo: u64,
    at: usize,
) -> Result<&'a [u8]> {
    let bytes = &buf[at..at + layout.row_bytes() as usize];
    if let Some(crcs) = crcs {
        let computed = layout.crc(v, bytes);
        if crcs[v as usize] != computed {
            return Err(FormatError::Checksum {
                file: fname.to_string(),
                offset: lo + at as u64,
                what: format!("feature row {v}"),
                stored: crcs[v as usize],
                computed,
            }
            .into());
        }
    }
    Ok(bytes)
}

impl NeighborSampler {
    /// Node `v`'s full stored list (internal ids, as stored), when every byte
    /// of it is already in memory: the `memory` engine's copy, else the
    /// cross-batch cache (static set, its slots as stored or held, or dynamic
    /// part). `None` when a
    /// slot or overflow page would have to be read: the caller reads those
    /// nodes (`fetch_lists_keeping`). The bytes are checked as the sampling
    /// pass checks them (`on_slot`, `request_overflow`); cache hits and
    /// misses count in the batch's figures. For the link batches' true-edge
    /// check, which without this read every negative destination's list
    /// past the cache.
    pub(crate) fn list_in_memory(&mut self, v: u32) -> Result<Option<Vec<u32>>> {
        if self.trace.is_some() || self.typed.is_some() {
            return Ok(None);
        }
        let l = self.layout.clone();
        let cache = self.cache.clone();
        let gname = &self.files[F_GRAPH as usize];
        let key = cache::key(F_SLOT, v as u64);
        let dynamic;
        let (bytes, in_arena): (&[u8], bool) = if let Some(g) = self.mem[F_GRAPH as usize].as_deref() {
            (resident_at(g, self.io.path(F_GRAPH), l.slot_offset(v as u64), l.slot_bytes)?, false)
        } else if let Some(c) = cache.as_deref() {
            if let Some(r) = c.get_static_extent(key) {
                self.cache_hits[0] += 1;
                (c.static_at(r), true)
            } else if let Some(d) = c.get_dynamic(key) {
                self.cache_hits[1] += 1;
                dynamic = d;
                (&dynamic[..], false)
            } else {
                self.cache_misses += 1;
                return Ok(None);
            }
        } else {
            return Ok(None);
        };
        let slot = match in_arena {
            true => self.decode_static_slot(v as u64, self.original_of(v), bytes)?,
            false => decode_slot(&l, v as u64, bytes, gname)?,
        };
        let mut list: Vec<u32> = slot.inline_ids(&l, gname)?.into_iter().map(|x| x as u32).collect();
        let spill = slot.overflow_len();
        if spill == 0 {
            return Ok(Some(list));
        }
        let (per, w, p) = (l.overflow_ids_per_page(), l.id_bytes as usize, l.page_size as u64);
        let (a, b) = (slot.overflow_first, slot.overflow_first + spill);
        let oname = self.files[F_OVERFLOW as usize].clone();
        list.reserve(spill as usize);
        for page in 1 + a / per..=1 + (b - 1) / per {
            let key = cache::key(F_OVERFLOW, page * p);
            let dynamic;
            let (data, packed): (&[u8], bool) = if let Some(o) = self.mem[F_OVERFLOW as usize].as_deref() {
                let data = resident_at(o, self.io.path(F_OVERFLOW), page.saturating_mul(p), p as u32)?;
                check_overflow_once(&mut self.checked_overflow, &l, &oname, page, data)?;
                (data, false)
            } else if let Some(c) = cache.as_deref() {
                if let Some(data) = c.get_static(key) {
                    self.cache_hits[0] += 1;
                    if !self.static_checked {
                        check_overflow_once(&mut self.checked_overflow, &l, &oname, page, data)?;
                    }
                    (data, self.static_packed)
                } else if let Some(d) = c.get_dynamic(key) {
                    self.cache_hits[1] += 1;
                    check_overflow_page(&l, &oname, page, &d)?;
                    dynamic = d;
                    (&dynamic[..], false)
                } else {
                    self.cache_misses += 1;
                    return Ok(None);
                }
            } else {
                return Ok(None);
            };
            let lo = (page - 1) * per;
            for e in a.max(lo)..b.min(lo + per) {
                let k = (e - lo) as usize;
                let id = if packed { packed::entry(data, k) } else { read_id(&data[k * w..k * w + w]) };
                if id >= l.num_nodes {
                    return Err(FormatError::oob(
                        oname.clone(),
                        page * p + (k * w) as u64,
                        "neighbor id",
                        id,
                        format!("< num_nodes {}", l.num_nodes),
                    )
                    .into());
                }
                list.push(id as u32);
            }
        }
        Ok(Some(list))
    }
}

/// Check overflow page `page` (from the cross-batch cache or the `memory`
/// engine's RAM) once per batch: `checked` is cleared when a batch starts.
/// A page that fails is not marked, so it is refused again if asked again.
/// This batch's read pages are checked when they arrive (`on_done`).
fn check_overflow_once(
    checked: &mut HashMap<u64, ()>,
    layout: &Layout,
    file: &str,
    page: u64,
    data: &[u8],
) -> Result<()> {
    if let std::collections::hash_map::Entry::Vacant(e) = checked.entry(page) {
        check_overflow_page(layout, file, page, data)?;
        e.insert(());
    }
    Ok(())
}

/// Node `v`'s row (of type `ty`) inside `extent`, its sector-aligned extent
/// at byte `lo` of the type's table (the row at `at` in it), checked against
/// the type's CRC bound to the global id.
pub(super) fn check_type_row<'a>(
    t: &super::typed::Typed,
    ty: usize,
    v: u64,
    extent: &'a [u8],
    lo: u64,
    at: usize,
) -> Result<&'a [u8]> {
    let rows = t.rows[ty].as_ref().expect("a type with rows");
    let local = v - t.offsets[ty];
    let rb = rows.layout.row_bytes() as usize;
    let bytes = extent.get(at..at + rb).ok_or_else(|| FormatError::Truncated {
        file: rows.name.clone(),
        offset: lo,
        needed: (at + rb) as u64,
        available: extent.len() as u64,
    })?;
    let computed = rows.layout.crc(v, bytes);
    let stored = rows.crcs[local as usize];
    if stored != computed {
        return Err(FormatError::Checksum {
            file: rows.name.clone(),
            offset: lo + at as u64,
            what: format!("feature row {local} (node {v} of type {:?})", t.table.node_types[ty].name),
            stored,
            computed,
        }
        .into());
    }
    Ok(bytes)
}

/// A homogeneous dataset's separate rows and their CRCs, detached from the
/// sampler: the hot-set loader checks each row before it encodes it
/// (`crate::rowcodec`), inside a callback that cannot borrow the sampler.
pub(crate) struct SeparateRows {
    layout: Layout,
    crcs: Option<Arc<[u32]>>,
    file: String,
}

impl SeparateRows {
    /// The row in `buf`, the extent read at `lo` of `features.fg` (as
    /// [`Layout::feature_extent`] gives it), checked against its CRC; an
    /// offset that is no row's extent is refused, naming it.
    pub(crate) fn row<'a>(&self, lo: u64, buf: &'a [u8]) -> Result<&'a [u8]> {
        let l = &self.layout;
        let v = lo.checked_sub(l.page_size as u64).map(|o| o / l.feature_stride());
        let Some(v) = v.filter(|&v| v < l.num_nodes && l.feature_extent(v).0 == lo) else {
            return Err(crate::SampleError::Config(format!("{}: offset {lo} is no feature row's extent", self.file)));
        };
        let at = l.feature_extent(v).2;
        if buf.len() < at + l.row_bytes() as usize {
            return Err(FormatError::Truncated {
                file: self.file.clone(),
                offset: lo,
                needed: (at + l.row_bytes() as usize) as u64,
                available: buf.len() as u64,
            }
            .into());
        }
        check_row(l, self.crcs.as_deref(), &self.file, v, buf, lo, at)
    }
}

impl NeighborSampler {
    /// [`SeparateRows`] of this dataset (rows in `features.fg`).
    pub(crate) fn separate_rows(&self) -> SeparateRows {
        SeparateRows {
            layout: self.layout.clone(),
            crcs: self.feature_crcs.clone(),
            file: self.files[F_FEATURES as usize].clone(),
        }
    }
}

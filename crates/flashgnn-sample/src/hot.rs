//! Choosing and loading the cache's static hot set.
//!
//! Three choices, measured in docs/benchmarks.md:
//!
//! - **degree** ([`NeighborSampler::hot_set_by_degree`]): one sequential
//!   O_DIRECT scan of `graph.fg`. Under uniform neighbor sampling a node is
//!   reached about in proportion to its in-degree (= degree on the symmetric
//!   graphs GNNs train on, and on typed graphs built with `--add-reverse`),
//!   so a slot scores its node's degree (slots are cached one by one, see
//!   `neighbor::F_SLOT`), a separate feature row or a typed node's row
//!   (`neighbor::F_TYPE_ROW`) its node's degree, and an overflow page
//!   `min(d, fanout * entries on the page)` per owner of degree `d` (the
//!   expected sampled entries it holds). Extents are ranked by score per byte.
//!   Costs one sequential pass (about 1 s per GB here) and no sampling.
//! - **touches** ([`NeighborSampler::hot_set_by_touches`]): the chance that
//!   a batch requests each extent, from expected arrivals per batch under
//!   the fanouts, propagated hop by hop over the stored lists
//!   (`r[h][v] = sum over neighbors u of r[h-1][u] * min(1, fanout[h-1] /
//!   deg u)`, `r[0]` = the batch's seeds spread over the seed pool: the
//!   given split, else every node). A batch asks for a node once however
//!   often it arrives, so a slot scores `1 - exp(-arrivals)` (arrivals at
//!   any hop for an inline row, at the expanded hops for a separate row's
//!   slot), and an overflow page `1 - prod(1 - t)` over the lists on it,
//!   `t` the chance a list's owner is expanded and draws an entry there.
//!   Without that saturation the hubs, which every batch requests once,
//!   scored their arrival counts and took the budget: on data/ooc with
//!   140 MiB (10 %) and int8 rows, a model of the request stream puts the
//!   reads a batch at ~7,700 against ~14,500 by degree (docs/benchmarks.md
//!   has the measured figures). `hops + 2` sequential scans, 4 B per node
//!   per hop while choosing.
//! - **presample** ([`NeighborSampler::hot_set_by_access`]): run the sampler
//!   on a few batches and rank extents by how often they were requested — the
//!   "access frequency over a short pre-sampling pass" GIDS compares against.
//!   Follows the real fanouts and seed distribution, costs those batches' I/O.
//!
//! Reverse PageRank (GIDS's constant CPU buffer) was not built: on symmetric
//! graphs it ranks nodes close to degree, at the price of several passes.
//!
//! Only the top extents are kept while scanning (a min-heap bounded by the
//! budget), so choosing the set costs memory in proportion to the budget,
//! never to the graph.

use rustc_hash::FxHashMap as HashMap;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use flashgnn_format::layout::{check_overflow_page, FeaturePlacement, Layout};
use flashgnn_format::slot::held::HeldSlots;
use flashgnn_format::slot::{decode_slot, used_slot_bytes};
use flashgnn_io::aligned::AlignedBuf;
use flashgnn_io::engine::{Done, ReadReq};

use crate::cache::{self, StaticSet};
use crate::neighbor::{NeighborSampler, RowAt, F_FEATURES, F_GRAPH, F_OVERFLOW, F_SLOT, F_TYPE_ROW};
use crate::packed;
use crate::Result;

/// Whether the loader packs overflow pages (`crate::packed`, in blocks):
/// 4-byte ids.
fn packs(l: &Layout) -> bool {
    l.id_bytes == 4
}

/// Slot pages per sequential scan read (1 MiB at 4 KiB pages).
const SCAN_PAGES: u64 = 256;
/// Scan reads in flight: 8 MiB of buffers keeps a sequential scan at the
/// device's streaming rate.
const SCAN_IN_FLIGHT: usize = 8;
/// Buffers up to this size go back to the engine's pool after a read.
const SMALL_BUF: usize = 64 << 10;
/// The hot set's extents are read in groups of neighbours: up to this many
/// bytes a read, across gaps of up to `GROUP_GAP` (read and dropped). A set
/// holding most of a table's rows is then a near-sequential scan rather
/// than one 512-B read per row (4.3 M rows: 47 s at open on this disk).
const GROUP_BYTES: u64 = 256 << 10;
const GROUP_GAP: u64 = 32 << 10;
/// Group reads in flight (at most 16 MiB of buffers).
const GROUP_IN_FLIGHT: usize = 64;

/// One sequential pass over pages `1..=pages` of `file` (page 0 is its
/// header), `SCAN_PAGES` a read.
fn scan_reads(file: u16, pages: u64, page_size: u64) -> Vec<ReadReq> {
    (0..pages)
        .step_by(SCAN_PAGES as usize)
        .map(|first| {
            let n = SCAN_PAGES.min(pages - first);
            ReadReq { file, offset: (1 + first) * page_size, len: (n * page_size) as u32, tag: 0 }
        })
        .collect()
}

/// Reads covering `reqs` (sorted by file and offset), each tagged with its
/// index, and the range of `reqs` each covers.
fn group_reads(reqs: &[ReadReq]) -> (Vec<ReadReq>, Vec<std::ops::Range<usize>>) {
    let mut groups: Vec<ReadReq> = Vec::new();
    let mut members: Vec<std::ops::Range<usize>> = Vec::new();
    for (i, r) in reqs.iter().enumerate() {
        let end = r.offset + r.len as u64;
        if let (Some(g), Some(m)) = (groups.last_mut(), members.last_mut()) {
            let g_end = g.offset + g.len as u64;
            if g.file == r.file && r.offset <= g_end + GROUP_GAP && end.max(g_end) - g.offset <= GROUP_BYTES {
                g.len = (end.max(g_end) - g.offset) as u32;
                m.end = i + 1;
                continue;
            }
        }
        groups.push(ReadReq { tag: groups.len() as u64, ..*r });
        members.push(i..i + 1);
    }
    (groups, members)
}

/// A candidate extent in cache-key terms: (file, offset, len), with `F_SLOT`
/// and a node id as offset for a slot. Ordered by density first.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Cand {
    density: u64,
    file: u16,
    offset: u64,
    len: u32,
    /// Bytes it is held in: `len`, or for an overflow page the size it
    /// packs to (`crate::packed`).
    cost: u32,
}

/// Extents ranked by score per byte; keeps the best `budget` bytes.
struct TopExtents {
    heap: BinaryHeap<Reverse<Cand>>,
    bytes: usize,
    budget: usize,
    /// Bytes each overflow page (index = page - 1) is held in
    /// ([`NeighborSampler::overflow_held`]); `page_size`: raw pages.
    overflow_held: Vec<u32>,
    page_size: u32,
    /// Index bytes charged per extent ([`cache::static_entry_overhead`]:
    /// slots come in at most `inline_cap + 2` lengths, one per degree up to
    /// the inline capacity and one when spilled).
    overhead: usize,
}

impl TopExtents {
    fn new(budget: usize, overflow_held: Vec<u32>, l: &Layout) -> Self {
        let overhead = cache::static_entry_overhead(budget, l.inline_cap as usize + 2);
        TopExtents { heap: BinaryHeap::new(), bytes: 0, budget, overflow_held, page_size: l.page_size, overhead }
    }
    /// An extent of `len` bytes on disk, ranked by the bytes it is held in.
    fn offer(&mut self, score: f64, file: u16, offset: u64, len: u32) {
        let held = match file {
            F_OVERFLOW => {
                let q = (offset / self.page_size as u64).saturating_sub(1) as usize;
                self.overflow_held.get(q).copied().unwrap_or(len)
            }
            _ => len,
        };
        self.offer_held(score, file, offset, len, held)
    }
    /// [`TopExtents::offer`] of an extent held in `held` bytes.
    fn offer_held(&mut self, score: f64, file: u16, offset: u64, len: u32, held: u32) {
        if score.is_nan() || score <= 0.0 {
            return;
        }
        let cost = held as usize + self.overhead;
        if cost > self.budget {
            return;
        }
        // Score per byte as the bits of a positive f64, which order as the
        // values do (touches' chances go down to ~1e-9 a byte: no fixed point).
        let density = (score / cost as f64).to_bits();
        if self.bytes + cost > self.budget {
            match self.heap.peek() {
                Some(Reverse(c)) if c.density >= density => return,
                _ => {}
            }
        }
        self.heap.push(Reverse(Cand { density, file, offset, len, cost: held }));
        self.bytes += cost;
        while self.bytes > self.budget {
            let Reverse(c) = self.heap.pop().expect("non-empty");
            self.bytes -= c.cost as usize + self.overhead;
        }
    }
    /// Hottest first.
    fn into_sorted(self) -> Vec<Cand> {
        let mut v: Vec<_> = self.heap.into_iter().map(|Reverse(x)| x).collect();
        v.sort_unstable_by(|a, b| b.cmp(a));
        v
    }
}

/// Bytes the static set holds a homogeneous dataset's slots and separate
/// rows in, under the codec it is loaded with: a slot's inline row and a
/// separate row take their encoded size (`crate::rowcodec`).
#[derive(Clone, Copy)]
struct HomoHeld {
    /// Whether inline rows are held encoded.
    inline_encoded: bool,
    /// Bytes a separate row is held in when held encoded (the row alone,
    /// not its sector extent).
    separate: Option<u32>,
    /// How slots are held (None: as stored, trimmed of their padding).
    slots: Option<HeldSlots>,
}

impl HomoHeld {
    /// Bytes a slot of `degree` is held in.
    fn slot(self, l: &Layout, degree: u32) -> u32 {
        self.slots.map_or(used_slot_bytes(l, degree), |h| h.len(l, degree)) as u32
    }
}

impl NeighborSampler {
    /// Bytes the static set holds a typed row in, under the codec it is
    /// loaded with ([`NeighborSampler::hold_rows_as`]).
    fn typed_row_held(&self) -> impl Fn(&RowAt) -> u32 {
        let codec = self.hot_row_codec();
        move |r: &RowAt| codec.map_or(r.bytes, |c| c.held(r.dtype, r.dim)) as u32
    }

    /// [`HomoHeld`] under the codec the set is loaded with.
    fn homo_held(&self) -> HomoHeld {
        let held = self.held_rows(self.hot_row_codec());
        let inline = self.layout().placement == FeaturePlacement::Inline;
        HomoHeld {
            inline_encoded: held.is_some() && inline,
            separate: held.filter(|_| !inline).map(|(_, h)| h as u32),
            slots: self.hot_held_slots(),
        }
    }

    /// Bytes each overflow page (index = page - 1) is held in by the static
    /// set: packed in blocks (`crate::packed`), sized by one sequential
    /// pass over `overflow.fg` (lost in the noise of choosing the set on
    /// data/ooc: 4.9-5.2 s with it, 5.8-6.4 s the run before); raw
    /// pages (8-byte ids) are held whole. A page the device cannot read is
    /// sized as a raw page (it is left out when the set is loaded).
    fn overflow_held(&mut self) -> Result<Vec<u32>> {
        let l = self.layout().clone();
        let pages = l.overflow_pages();
        if !packs(&l) || pages == 0 {
            return Ok(Vec::new());
        }
        let (p, per) = (l.page_size as u64, l.overflow_ids_per_page() as usize);
        let mut held = vec![l.page_size; pages as usize];
        self.read_extents_skipping(&scan_reads(F_OVERFLOW, pages, p), SCAN_IN_FLIGHT, p as u32, |req, buf| {
            for (j, page) in buf.chunks_exact(p as usize).enumerate() {
                held[(req.offset / p - 1) as usize + j] = packed::blocks_len(page, per) as u32;
            }
            Ok(())
        })?;
        Ok(held)
    }

    /// Run `reqs` through the engine (up to its depth in flight), handing
    /// each completed read to `f`; on error, waits for reads in flight.
    /// At most `max_in_flight` reads are outstanding (large scan reads must
    /// not multiply by the engine's depth: 256 x 1 MiB would be 256 MiB).
    pub(crate) fn read_extents(
        &mut self,
        reqs: &[ReadReq],
        max_in_flight: usize,
        mut f: impl FnMut(&ReadReq, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let mut done: Vec<Done> = Vec::new();
        // Large (scan) buffers are recycled here rather than freed: a freed
        // 1 MiB buffer gets carved up by the small allocations `f` makes (a
        // hot slot's copy), the next 1 MiB comes from fresh heap, and the
        // heap grows by the whole file scanned (1.45 GB peak RSS for a
        // 400 MiB hot set on data/ooc). `max_in_flight` bounds how many.
        let mut spare: Vec<AlignedBuf> = Vec::new();
        let mut next = 0;
        let depth = self.io_depth().min(max_in_flight.max(1));
        let r = (|| -> Result<()> {
            loop {
                while self.io_mut().in_flight() < depth && next < reqs.len() {
                    let len = reqs[next].len as usize;
                    let buf = match spare.iter().rposition(|b| b.capacity() >= len) {
                        Some(i) => {
                            let mut b = spare.swap_remove(i);
                            b.set_len(len);
                            b
                        }
                        None => self.pool_mut().get(len),
                    };
                    // Tagged by index: a striped engine hands back physical
                    // (file, offset); `f` gets the logical request.
                    self.io_mut().submit(ReadReq { tag: next as u64, ..reqs[next] }, buf)?;
                    next += 1;
                }
                done.clear();
                let idle = self.io_mut().in_flight() == 0;
                self.io_mut().complete(if idle { 0 } else { 1 }, &mut done)?;
                if done.is_empty() && idle && next == reqs.len() {
                    return Ok(());
                }
                for d in done.drain(..) {
                    let r = f(&reqs[d.req.tag as usize], d.buf.as_slice());
                    if d.buf.capacity() <= SMALL_BUF {
                        self.pool_mut().put(d.buf);
                    } else {
                        spare.push(d.buf);
                    }
                    r?;
                }
            }
        })();
        if r.is_err() {
            self.drain_io();
        }
        r
    }

    /// One sequential O_DIRECT pass over every slot page of `graph.fg`
    /// (`SCAN_PAGES` per read, `SCAN_IN_FLIGHT` reads in flight), handing
    /// each node's internal id and raw slot bytes to `f`. Reads may complete
    /// out of order, so `f` sees the nodes in no particular order.
    pub(crate) fn scan_slots(&mut self, f: impl FnMut(u64, &[u8]) -> Result<()>) -> Result<()> {
        self.scan_slots_with(false, f).map(|_| ())
    }

    /// [`scan_slots`](Self::scan_slots); with `skip_unreadable`, a page the
    /// device cannot read (EIO) is left out — its nodes are not handed to
    /// `f` — instead of failing the scan (see [`read_extents_skipping`]).
    /// Returns the bytes left out.
    ///
    /// [`read_extents_skipping`]: Self::read_extents_skipping
    pub(crate) fn scan_slots_with(
        &mut self,
        skip_unreadable: bool,
        mut f: impl FnMut(u64, &[u8]) -> Result<()>,
    ) -> Result<u64> {
        let l = self.layout().clone();
        let p = l.page_size as u64;
        let scan = scan_reads(F_GRAPH, l.slot_pages(), p);
        let k = l.slots_per_page as u64;
        let on_pages = |req: &ReadReq, buf: &[u8]| {
            for (j, page_bytes) in buf.chunks_exact(p as usize).enumerate() {
                let page_no = req.offset / p + j as u64;
                for v in ((page_no - 1) * k..page_no * k).take_while(|&v| v < l.num_nodes) {
                    let at = (l.slot_offset(v) - page_no * p) as usize;
                    f(v, &page_bytes[at..at + l.slot_bytes as usize])?;
                }
            }
            Ok(())
        };
        if skip_unreadable {
            self.read_extents_skipping(&scan, SCAN_IN_FLIGHT, p as u32, on_pages)
        } else {
            self.read_extents(&scan, SCAN_IN_FLIGHT, on_pages).map(|_| 0)
        }
    }

    /// [`read_extents`](Self::read_extents), but a request that fails with
    /// EIO — a media error, what a device reports for a sector it cannot
    /// read — is read again `unit` bytes at a time, and `f` gets the pieces
    /// that can be read (each as a request of its own); the rest are left
    /// out. For the static hot set, a selection that may do without some
    /// extents (they are read on demand, and fail there, alone): one bad
    /// page must not cost the whole cache. Returns the bytes left out.
    pub(crate) fn read_extents_skipping(
        &mut self,
        reqs: &[ReadReq],
        max_in_flight: usize,
        unit: u32,
        mut f: impl FnMut(&ReadReq, &[u8]) -> Result<()>,
    ) -> Result<u64> {
        let index: HashMap<(u16, u64), usize> = reqs.iter().enumerate().map(|(i, r)| ((r.file, r.offset), i)).collect();
        let mut done = vec![false; reqs.len()];
        let mut left_out = 0u64;
        let mut pending: Vec<ReadReq> = reqs.to_vec();
        loop {
            let r = self.read_extents(&pending, max_in_flight, |req, buf| {
                f(req, buf)?;
                done[index[&(req.file, req.offset)]] = true;
                Ok(())
            });
            let e = match r {
                Ok(()) => return Ok(left_out),
                Err(crate::SampleError::Io(e)) if e.source.raw_os_error() == Some(libc::EIO) => e,
                Err(e) => return Err(e),
            };
            // The failed request: the unfinished one whose bytes hold the error's offset.
            let hit = |r: &ReadReq| e.offset.is_some_and(|o| o >= r.offset && o < r.offset + r.len as u64);
            let Some(&bad) = pending.iter().find(|r| !done[index[&(r.file, r.offset)]] && hit(r)) else {
                return Err(e.into());
            };
            let unit = unit.max(512) as u64;
            let mut at = bad.offset;
            while at < bad.offset + bad.len as u64 {
                let len = unit.min(bad.offset + bad.len as u64 - at) as u32;
                let piece = ReadReq { offset: at, len, ..bad };
                match self.read_extents(&[piece], 1, &mut f) {
                    Ok(()) => {}
                    Err(crate::SampleError::Io(e)) if e.source.raw_os_error() == Some(libc::EIO) => {
                        left_out += len as u64;
                    }
                    Err(e) => return Err(e),
                }
                at += len as u64;
            }
            done[index[&(bad.file, bad.offset)]] = true;
            pending.retain(|r| !done[index[&(r.file, r.offset)]]);
        }
    }

    /// Read the chosen extents (hottest first) and check them like any read.
    /// Slots (`F_SLOT`) are copied out of one more sequential pass over the
    /// slot pages (~1 s per GB), decoded with the checked decoder; they are
    /// not kept while scoring: candidates come and go all through that scan,
    /// and their scattered survivors would pin freed heap pages (~90 MB more
    /// RSS for a 400 MiB set on data/ooc). Overflow pages are packed as they
    /// are read (`crate::packed`, 4-byte ids), into the place their packed
    /// size (`Cand::cost`, from [`NeighborSampler::overflow_held`]) was given.
    fn load_extents(&mut self, chosen: Vec<Cand>) -> Result<StaticSet> {
        let l = self.layout().clone();
        let page = l.page_size as u64;
        let per = l.overflow_ids_per_page() as usize;
        let packing = packs(&l);
        let mut reqs: Vec<ReadReq> = Vec::new();
        let mut slot_rank: HashMap<u64, usize> = HashMap::default();
        let rows = self.row_finder();
        let codec = self.hot_row_codec();
        let homo = self.homo_held();
        let separate_rows = homo.separate.map(|_| self.separate_rows());
        let no_row = |v: u64| crate::SampleError::Config(format!("hot set: node {v} has no typed feature row"));
        // Each extent's place in the arena, in rank order (hottest first):
        // bytes are written straight there as reads complete, in any order.
        let mut at = Vec::with_capacity(chosen.len());
        let mut total = 0usize;
        for (rank, c) in chosen.iter().enumerate() {
            at.push(total);
            total += c.cost as usize;
            if c.file == F_SLOT {
                slot_rank.insert(c.offset, rank);
            } else if c.file == F_TYPE_ROW {
                // The row's extent in its type's file; the row alone is kept.
                let r = rows.as_ref().and_then(|r| r.row(c.offset)).ok_or_else(|| no_row(c.offset))?;
                reqs.push(ReadReq { file: r.file, offset: r.lo, len: r.len, tag: rank as u64 });
            } else {
                reqs.push(ReadReq { file: c.file, offset: c.offset, len: c.len, tag: rank as u64 });
            }
        }
        reqs.sort_unstable_by_key(|r| (r.file, r.offset)); // device-friendly order
        let (groups, members) = group_reads(&reqs);
        let mut out = StaticSet::with_capacity(total);
        let files = self.file_names();
        let mut packed = Vec::with_capacity(page as usize);
        let mut left_out = self.read_extents_skipping(&groups, GROUP_IN_FLIGHT, page as u32, |g, group_buf| {
            for req in &reqs[members[g.tag as usize].clone()] {
                if req.offset < g.offset || req.offset + req.len as u64 > g.offset + g.len as u64 {
                    continue; // a piece of a group re-read after a media error: its members elsewhere
                }
                let at_in = (req.offset - g.offset) as usize;
                let buf = &group_buf[at_in..at_in + req.len as usize];
                let r = req.tag as usize;
                let c = &chosen[r];
                let mut bytes = &buf[..req.len as usize];
                if c.file == F_TYPE_ROW {
                    let finder = rows.as_ref().expect("typed rows were requested");
                    let r = finder.row(c.offset).ok_or_else(|| no_row(c.offset))?;
                    let row = &bytes[r.at.min(bytes.len())..];
                    finder.check(c.offset, row, r.lo + r.at as u64)?; // CRC; names the file if short
                    bytes = &row[..r.bytes];
                    if let Some(codec) = codec.filter(|_| c.cost as usize != r.bytes) {
                        packed.clear();
                        if !codec.encode(r.dtype, bytes, &mut packed) {
                            continue; // not carried by the codec: left out, read as usual
                        }
                        bytes = &packed;
                    }
                } else if let (F_FEATURES, Some(rows)) = (c.file, separate_rows.as_ref()) {
                    // A separate row held encoded: checked, then kept alone.
                    let row = rows.row(req.offset, bytes)?;
                    packed.clear();
                    if !codec.expect("rows held encoded have a codec").encode(l.feature_dtype, row, &mut packed) {
                        continue; // not carried by the codec: left out, read as usual
                    }
                    bytes = &packed;
                } else if req.file == F_OVERFLOW {
                    check_overflow_page(&l, &files[F_OVERFLOW as usize], req.offset / page, buf)?;
                    if packing {
                        packed.clear();
                        // Sized by the pass the set was chosen from: a page
                        // that packs larger now (rewritten since) is left
                        // out, read as usual.
                        match packed::pack_blocks_into(buf, per, &mut packed) {
                            Some(n) if n <= c.cost as usize => bytes = &packed,
                            _ => continue,
                        }
                    }
                }
                debug_assert!(bytes.len() <= c.cost as usize);
                out.put_at(cache::key(c.file, c.offset), at[r], bytes);
            }
            Ok(())
        })?;
        if !slot_rank.is_empty() {
            let (mut row, mut held_slot) = (Vec::new(), Vec::with_capacity(l.slot_bytes as usize));
            let original_of = self.originals();
            left_out += self.scan_slots_with(true, |v, bytes| {
                let Some(&r) = slot_rank.get(&v) else { return Ok(()) };
                let slot = decode_slot(&l, v, bytes, &files[F_GRAPH as usize])?;
                let held = homo.slot(&l, slot.degree) as usize;
                if held > chosen[r].cost as usize {
                    return Err(crate::SampleError::Config(format!(
                        "hot set: slot of node {v} holds {held} B, {} B were set aside",
                        chosen[r].cost
                    )));
                }
                let Some(h) = homo.slots else {
                    // Typed: held as stored, trimmed of its zero padding
                    // (`decode_checked_slot` takes it so).
                    out.put_at(cache::key(F_SLOT, v), at[r], &bytes[..held]);
                    return Ok(());
                };
                // A held slot has no original id: one that differs from
                // node_order.npy's is left out, and refused when read.
                if slot.original_id != original_of(v) {
                    return Ok(());
                }
                let row = if homo.inline_encoded {
                    row.clear();
                    if !codec.expect("a codec").encode(l.feature_dtype, slot.features, &mut row) {
                        return Ok(()); // not carried by the codec: left out, read as usual
                    }
                    &row[..]
                } else {
                    slot.features
                };
                held_slot.clear();
                // An id the held width cannot carry is left out (refused when read).
                if h.encode(&l, &slot, row, &mut held_slot) {
                    out.put_at(cache::key(F_SLOT, v), at[r], &held_slot);
                }
                Ok(())
            })?;
        }
        if left_out > 0 {
            eprintln!(
                "flashgnn: hot set: {left_out} bytes the device could not read (EIO) left out; they are read on \
                 demand (`flashgnn scrub` names the pages)"
            );
        }
        out.sort_by_offset(); // offsets were laid out hottest first

        // Every overflow page above went through `check_overflow_page`,
        // every typed row through its CRC and every slot through
        // `decode_slot` (CRC32C and bounds) right before `put_at`; the arena
        // is never written again.
        out.mark_checked();
        if packing {
            out.mark_overflow_packed();
        }
        out.mark_row_codec(codec);
        out.mark_slots_held(homo.slots);
        Ok(out)
    }

    /// The static hot set by degree (see the module docs): at most `budget`
    /// bytes of pages and feature rows, read and checked, hottest first.
    pub fn hot_set_by_degree(&mut self, budget: usize) -> Result<StaticSet> {
        let l = self.layout().clone();
        let p = l.page_size as u64;
        let files = self.file_names();
        let fanout = self.fanouts().first().copied().unwrap_or(-1);
        let per = l.overflow_ids_per_page();
        let mut top = TopExtents::new(budget, self.overflow_held()?, self.layout());
        // Expected sampled entries per overflow page (index = page - 1),
        // offered once the scan is over: scan reads complete in any order,
        // so a page's owners may be seen out of order. 4 B per page.
        let mut overflow: Vec<f32> = Vec::new();
        let separate = l.placement == FeaturePlacement::Separate && l.row_bytes() > 0;
        let rows = self.row_finder();
        let held = self.typed_row_held();
        let homo = self.homo_held();
        self.scan_slots_with(true, |v, bytes| {
            let slot = decode_slot(&l, v, bytes, &files[F_GRAPH as usize])?;
            let d = slot.degree as f64;
            top.offer_held(d, F_SLOT, v, l.slot_bytes, homo.slot(&l, slot.degree));
            if separate {
                let (lo, len, _) = l.feature_extent(v);
                top.offer_held(d, F_FEATURES, lo, len, homo.separate.unwrap_or(len));
            }
            // A typed node's row, held alone (not its type's whole extent).
            if let Some(r) = rows.as_ref().and_then(|r| r.row(v)) {
                top.offer_held(d, F_TYPE_ROW, v, r.bytes as u32, held(&r));
            }
            let spilled = slot.overflow_len();
            if spilled > 0 {
                let (e0, e1) = (slot.overflow_first, slot.overflow_first + spilled);
                let last = (e1 - 1) / per;
                if overflow.len() <= last as usize {
                    overflow.resize(last as usize + 1, 0.0);
                }
                for q in (e0 / per)..=last {
                    let lo = e0.max(q * per);
                    let hi = e1.min((q + 1) * per);
                    let m = (hi - lo) as f64;
                    let want = if fanout < 0 { m } else { (fanout as f64 * m / d).min(1.0) * d };
                    overflow[q as usize] += want as f32;
                }
            }
            Ok(())
        })?;
        for (q, &s) in overflow.iter().enumerate() {
            top.offer(s as f64, F_OVERFLOW, (q as u64 + 1) * p, p as u32);
        }
        self.load_extents(top.into_sorted())
    }

    /// The static hot set by the chance a batch of `batch_size` seeds
    /// requests each extent under fanout sampling (see the module docs):
    /// `k + 2` sequential scans of the slots for `k` hops (degrees, one
    /// propagation per hop, the load), `(k + 2) * 4` B per node while
    /// choosing. At most `budget` bytes, read and checked, hottest first.
    pub fn hot_set_by_touches(&mut self, budget: usize, seeds: &[i64], batch_size: usize) -> Result<StaticSet> {
        // Its propagation follows one fanout per hop over untyped lists.
        if self.is_typed() {
            return Err(crate::SampleError::Config(format!(
                "hot=\"touches\" is not built for typed (heterogeneous) datasets ({}): use \"degree\" or \"presample\"",
                self.root().display()
            )));
        }
        if batch_size == 0 {
            return Err(crate::SampleError::Config("hot=\"touches\" needs batch_size > 0".into()));
        }
        let l = self.layout().clone();
        let n = l.num_nodes as usize;
        let p = l.page_size as u64;
        let files = self.file_names();
        let fan = self.fanouts().to_vec();
        let k = fan.len();
        if k == 0 {
            // Seeds alone: nothing propagates, and degree ranks them as well as anything.
            return self.hot_set_by_degree(budget);
        }
        // Every scan leaves out a slot page the device cannot read (EIO): its
        // nodes score nothing and are read on demand (as by degree).
        let mut deg = vec![0u32; n];
        self.scan_slots_with(true, |v, bytes| {
            deg[v as usize] = decode_slot(&l, v, bytes, &files[F_GRAPH as usize])?.degree;
            Ok(())
        })?;
        // Chance that an expansion at hop h draws a given neighbor of a node
        // of degree d (uniform without replacement: min(1, f / d)).
        let keep =
            |h: usize, d: u32| if fan[h] < 0 || d as i64 <= fan[h] as i64 { 1.0 } else { fan[h] as f32 / d as f32 };
        // r[h][v]: expected arrivals of v at hop h per batch. r[h][v] = sum
        // over neighbors u of r[h-1][u] * keep(h-1, deg u). A spilled list's
        // overflow entries count as average edge ends (the marginal nodes of
        // a budget are low-degree, whose lists are all inline), so no pass
        // reads overflow.fg: on data/ooc's model this chooses a set reading
        // 2 % more than exact propagation. (Scaling the inline part up
        // instead undervalued hubs: their first neighbors are other hubs,
        // which rarely draw them.)
        let r0 = if seeds.is_empty() {
            vec![(batch_size as f64 / n.max(1) as f64) as f32; n]
        } else {
            // A batch's seeds drawn from `seeds` (a training split).
            let mut r0 = vec![0f32; n];
            let w = (batch_size as f64 / seeds.len() as f64) as f32;
            for &o in seeds {
                if o < 0 || o as u64 >= l.num_nodes {
                    return Err(crate::SampleError::BadRequest(format!(
                        "hot-set seed node id {o} out of range [0, {n})"
                    )));
                }
                r0[self.internal_of(o as u64) as usize] += w;
            }
            r0
        };
        // The chance of at least one arrival, for `x` expected ones.
        let once = |x: f64| 1.0 - (-x).exp();
        let mut r: Vec<Vec<f32>> = vec![r0];
        let mut top = TopExtents::new(budget, self.overflow_held()?, self.layout());
        let per = l.overflow_ids_per_page();
        let separate = l.placement == FeaturePlacement::Separate && l.row_bytes() > 0;
        let homo = self.homo_held();
        // Per overflow page (index = page - 1): sum of ln(1 - t) over the
        // lists on it, `t` the chance a batch draws from its part there.
        let mut overflow: Vec<f32> = Vec::new();
        for h in 1..=k {
            let mut cur = vec![0f32; n];
            let prev = &r[h - 1];
            let last = h == k;
            let (mut num, mut den) = (0f64, 0f64);
            for (u, &d) in deg.iter().enumerate() {
                num += prev[u] as f64 * keep(h - 1, d) as f64 * d as f64;
                den += d as f64;
            }
            let rho = if den > 0.0 { (num / den) as f32 } else { 0.0 };
            let (deg, r_all, keep) = (&deg, &r, &keep);
            self.scan_slots_with(true, |v, bytes| {
                let slot = decode_slot(&l, v, bytes, &files[F_GRAPH as usize])?;
                let m = slot.inline_len();
                let mut sum = 0f32;
                for j in 0..m {
                    let u = slot.inline_id(j, &l, &files[F_GRAPH as usize])? as usize;
                    sum += prev[u] * keep(h - 1, deg[u]);
                }
                // Spilled entries: each worth what an edge end is on average.
                sum += (slot.degree as usize - m) as f32 * rho;
                cur[v as usize] = sum;
                if !last {
                    return Ok(());
                }
                // Expanded at hops < k (its slot, its overflow pages); reached
                // at any hop (an inline or separate feature row).
                let vi = v as usize;
                let expanded: f64 = (0..k).map(|g| r_all[g][vi] as f64).sum();
                let reached = expanded + sum as f64;
                let held = homo.slot(&l, slot.degree);
                top.offer_held(once(if separate { expanded } else { reached }), F_SLOT, v, l.slot_bytes, held);
                if separate {
                    let (lo, len, _) = l.feature_extent(v);
                    top.offer_held(once(reached), F_FEATURES, lo, len, homo.separate.unwrap_or(len));
                }
                let spilled = slot.overflow_len();
                if spilled > 0 {
                    let d = slot.degree as f64;
                    let (e0, e1) = (slot.overflow_first, slot.overflow_first + spilled);
                    let lastq = (e1 - 1) / per;
                    if overflow.len() <= lastq as usize {
                        overflow.resize(lastq as usize + 1, 0.0);
                    }
                    for q in (e0 / per)..=lastq {
                        let mm = (e1.min((q + 1) * per) - e0.max(q * per)) as f64;
                        // Expanded at hop g, and then a draw lands among the
                        // mm entries here (f draws of d: 1 - e^(-f mm / d)).
                        let t: f64 = (0..k)
                            .map(|g| {
                                let lands = if fan[g] < 0 { 1.0 } else { once(fan[g] as f64 * mm / d) };
                                once(r_all[g][vi] as f64) * lands
                            })
                            .sum();
                        overflow[q as usize] += (-t.min(0.999_999)).ln_1p() as f32;
                    }
                }
                Ok(())
            })?;
            r.push(cur);
        }
        drop((r, deg));
        for (q, &s) in overflow.iter().enumerate() {
            top.offer(-(s as f64).exp_m1(), F_OVERFLOW, (q as u64 + 1) * p, p as u32);
        }
        drop(overflow);
        self.load_extents(top.into_sorted())
    }

    /// The static hot set by access counts: sample `batches` (seed lists
    /// with their batch seeds), count every page / feature-row request, keep
    /// the most requested `budget` bytes, read and check them.
    pub fn hot_set_by_access(&mut self, batches: &[(Vec<i64>, u64)], budget: usize) -> Result<StaticSet> {
        self.record_accesses(true);
        let mut r = Ok(());
        for (seeds, seed) in batches {
            if let Err(e) = self.sample(seeds, *seed) {
                r = Err(e);
                break;
            }
        }
        let counts = self.record_accesses(false);
        r?;
        let l = self.layout().clone();
        let mut top = TopExtents::new(budget, self.overflow_held()?, self.layout());
        let (rows, held, homo) = (self.row_finder(), self.typed_row_held(), self.homo_held());
        for (key, (len, n)) in counts {
            let (file, offset) = cache::unkey(key);
            match rows.as_ref().filter(|_| file == F_TYPE_ROW).and_then(|r| r.row(offset)) {
                Some(r) => top.offer_held(n as f64, file, offset, len, held(&r)),
                // A slot is charged as a spilled one (its degree is not known here).
                None if file == F_SLOT => top.offer_held(n as f64, file, offset, len, homo.slot(&l, l.inline_cap + 1)),
                None if file == F_FEATURES => top.offer_held(n as f64, file, offset, len, homo.separate.unwrap_or(len)),
                None => top.offer(n as f64, file, offset, len),
            }
        }
        self.load_extents(top.into_sorted())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouped_reads_cover_every_extent_within_their_bounds() {
        let req = |file: u16, offset: u64, len: u32| ReadReq { file, offset, len, tag: 0 };
        let reqs = vec![
            req(2, 0, 512),
            req(2, 0, 512), // a packed sector asked for twice
            req(2, 1024, 512),
            req(2, 1024 + GROUP_GAP + 2048, 512), // past the gap: a new read
            req(3, 1024 + GROUP_GAP + 2048, 512), // another file
        ];
        let mut many: Vec<ReadReq> = (0..1024u64).map(|i| req(5, i * 512, 512)).collect();
        many.extend(reqs);
        many.sort_unstable_by_key(|r| (r.file, r.offset));
        let (groups, members) = group_reads(&many);
        assert_eq!(members.iter().map(|m| m.len()).sum::<usize>(), many.len());
        for (g, m) in groups.iter().zip(&members) {
            assert!(g.len as u64 <= GROUP_BYTES && groups[g.tag as usize].offset == g.offset);
            for r in &many[m.clone()] {
                assert!(r.file == g.file && r.offset >= g.offset && r.offset + r.len as u64 <= g.offset + g.len as u64);
            }
        }
        // 1024 neighbouring 512-B rows (512 KiB) in two reads; the five others in three.
        assert_eq!(groups.iter().filter(|g| g.file == 5).count(), 2);
        assert_eq!(groups.len(), 5);
    }
}

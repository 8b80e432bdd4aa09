//! Out-of-order k-hop neighbor sampling with feature gathering (see the crate
//! docs for the walk through one batch). This module holds the sampler's
//! state, the output [`Batch`] and [`NeighborSampler::sample`], which reads
//! top to bottom: reset, reach the seeds, fetch and expand until nothing is in
//! flight, re-derive levels after a redraw, build the batch in PyG order,
//! record telemetry. The steps live in:
//!
//! - `config`: [`SamplerConfig`], the engine's fixed memory, `open`;
//! - `fetch`: where each slot, overflow page and feature row comes from and
//!   the loop that submits reads and hands on what arrives;
//! - `expand`: reaching nodes and drawing their neighbors as slots and
//!   overflow pages arrive;
//! - `overlay`: nodes served from a mutable-graph snapshot's overlay;
//! - `output`: the canonical pass that fills the [`Batch`];
//! - `trace`: I/O trace capture.
//!
//! Invariants: a batch is a pure function of (dataset, fanouts, seeds, seed),
//! whatever the engine, cache or read order (draws are keyed by `(seed,
//! node)`; levels and local ids are derived from the seeds, never from arrival
//! order). Every byte from disk or cache passes a checked decoder before it is
//! used. Memory per batch is bounded by `depth` buffers, a per-batch page
//! cache and the sampled subgraph.

use std::collections::VecDeque;

// Fx hashing: the keys are node ids and page numbers, not attacker-chosen
// strings, and SipHash costs several times more per lookup on this hot path.
use rustc_hash::FxHashMap as HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use flashgnn_format::dtype::Dtype;
use flashgnn_format::layout::FeaturePlacement;
use flashgnn_format::slot::held::HeldSlots;
use flashgnn_format::Layout;
use flashgnn_io::aligned::BufPool;
use flashgnn_io::engine::{IoCounters, ReadEngine, ReadReq};
use flashgnn_store::Snapshot;

use crate::cache::{self, PageCache};
use crate::telemetry::{thread_cpu_seconds, Telemetry};
use crate::{Result, SampleError};

mod config;
mod expand;
mod fetch;
mod output;
mod overlay;
mod trace;
mod typed;

pub use config::{
    samplers_opened, Gather, SamplerConfig, BATCH_PAGE_CACHE_BYTES, BUF_POOL_BYTES, ENGINE_BYTES_PER_PRODUCER, MAX_HOPS,
};
use fetch::{Ready, Waiter};
use trace::TraceCap;
pub(crate) use typed::RowAt;
use typed::Typed;
pub use typed::{EdgeTypeBatch, NodeTypeBatch, TypedBatch};

/// File indices in the engine's file table.
pub(crate) const F_GRAPH: u16 = 0;
pub(crate) const F_OVERFLOW: u16 = 1;
pub(crate) const F_FEATURES: u16 = 2;
/// Cross-batch cache keys of single slots: a pseudo file index (not in the
/// engine's table) with the internal node id in place of the offset. The
/// cross-batch cache holds `graph.fg` one slot at a time, not by page: a
/// page of an unreordered graph holds a hot node beside `slots_per_page - 1`
/// cold ones (7 per page on data/ooc), so whole pages would spend most of
/// the budget on nodes nobody asks for again (docs/benchmarks.md).
pub(crate) const F_SLOT: u16 = 3;
/// Cross-batch cache keys of a typed dataset's feature rows: a pseudo file
/// index with the row's global node id in place of the offset (the global
/// id names the type and the row; the types' own files have engine indices
/// from 2 up, so they are never keys). A static hot set holds the row alone
/// (`NeighborSampler::type_row_extent`), the dynamic part the extent read.
pub(crate) const F_TYPE_ROW: u16 = 4;

/// `Node::feature` offsets with one of these tags in their top two bits are
/// not in the batch's `features` but in the `memory` engine's copy of
/// graph.fg (a slot's inline row) or of features.fg (a separate row, CRC
/// already checked), or in the cross-batch cache's static arena (a cached
/// slot's inline row, checked with its slot): the row is copied once,
/// straight into the batch's `x`, by `canonical`. Offsets into files and the
/// arena are far below 2^61 (a file is at most 2^48 bytes: `TAG_KEY` bounds
/// page numbers to 48 bits; the arena is within the memory budget).
/// `FEAT_ENCODED` beside `FEAT_IN_ARENA`: a typed row the static set holds
/// encoded (`crate::rowcodec`), decoded once, straight into its type's `x`.
const FEAT_IN_GRAPH: usize = 1 << 63;
const FEAT_IN_FEATURES: usize = 1 << 62;
const FEAT_IN_ARENA: usize = FEAT_IN_GRAPH | FEAT_IN_FEATURES;
const FEAT_ENCODED: usize = 1 << 61;
const FEAT_OFFSET: usize = FEAT_ENCODED - 1;

/// Hint the CPU to fetch `len` bytes at `p` into its caches (x86-64; a
/// no-op elsewhere). Hits on the `memory` engine's copy and on the cache's
/// static arena are DRAM misses at random places (hundreds of MB): issued a
/// little ahead of the use, several overlap instead of stalling one by one.
/// Never faults, whatever the address.
#[inline(always)]
pub(crate) fn prefetch(p: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let mut o = 0;
        while o < len {
            // SAFETY: a prefetch is a hint; it never faults and reads nothing.
            unsafe { std::arch::x86_64::_mm_prefetch(p.wrapping_add(o) as *const i8, std::arch::x86_64::_MM_HINT_T0) };
            o += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, len);
}

/// Reserve `bytes` more in `v` (exactly) and, for a large reservation, ask
/// the kernel to back it with transparent huge pages (`MADV_HUGEPAGE`, a
/// hint; a no-op where THP is off). A batch's `x` is a fresh allocation the
/// consumer takes over (tens to hundreds of MB for a typed batch): faulted
/// in 4 KiB at a time it cost more than the rows' copy (a third of a typed
/// batch's CPU in the kernel's page zeroing, measured); 2 MiB pages take
/// 512x fewer faults.
pub(crate) fn reserve_rows(v: &mut Vec<u8>, bytes: usize) {
    v.reserve_exact(bytes);
    const HUGE: usize = 2 << 20;
    if bytes < 2 * HUGE {
        return;
    }
    let start = (v.as_mut_ptr() as usize + v.len()).next_multiple_of(HUGE);
    let end = (v.as_mut_ptr() as usize + v.capacity()) / HUGE * HUGE;
    if end > start {
        // SAFETY: [start, end) lies inside `v`'s allocation, not yet written;
        // madvise only changes how its pages will be backed.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
}

/// Requests served from memory between two visits to the ring while reads
/// One mini-batch in PyG order, each array in the shape and dtype PyTorch
/// takes as is: the bindings hand these vectors to numpy without a copy.
/// Node and edge *types* extend it per type (one `Batch` part per node type
/// and per edge type), not with another layer of conversion.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// Unique original node ids; the first `batch_size` are the seeds.
    pub n_id: Vec<i64>,
    /// PyG's `edge_index`, `[2, E]` row-major: `edge_index[..E]` is `row`
    /// (the neighbor, local id), `edge_index[E..]` is `col` (the target,
    /// toward the seeds). See [`Batch::row`], [`Batch::col`].
    pub edge_index: Vec<i64>,
    pub num_sampled_nodes: Vec<i64>,
    pub num_sampled_edges: Vec<i64>,
    /// Feature rows `[n_id.len(), dim]` in `x_dtype`, contiguous.
    /// With [`SamplerConfig::free_features_only`], packed: only the rows of
    /// the positions not in `missing`, in order (`[n_id.len() - missing.len(), dim]`).
    pub x: Vec<u8>,
    /// The dtype of `x`: [`SamplerConfig::x_dtype`], else the stored one.
    pub x_dtype: Dtype,
    /// Labels of `n_id` (-1 unlabeled); empty when labels are off.
    pub y: Vec<i64>,
    pub batch_size: usize,
    /// With a resident set: per `n_id`, the row of the device table holding
    /// its features (its row of `x` is then zeros), or -1 when `x` has it.
    /// Empty without a resident set.
    pub resident: Vec<i64>,
    /// With [`SamplerConfig::free_features_only`]: positions in `n_id` whose
    /// row was not gathered (zeros in `x`), ascending. Empty otherwise.
    pub missing: Vec<i64>,
    /// With [`SamplerConfig::degrees`]: per `n_id`, its degree in the whole
    /// graph (the stored neighbor count, or the overlay's for a mutated
    /// node). Empty otherwise.
    pub deg: Vec<i64>,
    /// A typed dataset's batch: its per-node-type and per-edge-type parts
    /// (the homogeneous fields above are then empty but `batch_size`).
    /// None for a homogeneous dataset, whose batch is the fields above.
    pub typed: Option<Box<TypedBatch>>,
    /// A link batch's supervision edges and negatives as local ids
    /// ([`crate::link`]); None for a node batch.
    pub link: Option<Box<crate::link::LinkPart>>,
}

impl Default for Batch {
    fn default() -> Self {
        Batch {
            n_id: Vec::new(),
            edge_index: Vec::new(),
            num_sampled_nodes: Vec::new(),
            num_sampled_edges: Vec::new(),
            x: Vec::new(),
            x_dtype: Dtype::Float32,
            y: Vec::new(),
            batch_size: 0,
            resident: Vec::new(),
            missing: Vec::new(),
            deg: Vec::new(),
            typed: None,
            link: None,
        }
    }
}

impl Batch {
    pub fn num_edges(&self) -> usize {
        self.edge_index.len() / 2
    }
    /// Sampled nodes, of every type.
    pub fn total_nodes(&self) -> usize {
        self.typed.as_ref().map_or(self.n_id.len(), |t| t.num_nodes())
    }
    /// Sampled edges, of every type.
    pub fn total_edges(&self) -> usize {
        self.typed.as_ref().map_or(self.num_edges(), |t| t.num_edges())
    }
    /// The neighbor end of every edge (local ids).
    pub fn row(&self) -> &[i64] {
        &self.edge_index[..self.num_edges()]
    }
    /// The target end of every edge (local ids).
    pub fn col(&self) -> &[i64] {
        &self.edge_index[self.num_edges()..]
    }
    /// `edge_index` from its two halves: `col` is appended to `row`'s
    /// vector (reserve `row` for both to keep it a single allocation).
    pub fn set_edges(&mut self, mut row: Vec<i64>, col: Vec<i64>) {
        debug_assert_eq!(row.len(), col.len());
        row.extend_from_slice(&col);
        self.edge_index = row;
    }
}

#[derive(Debug, Clone)]
struct Node {
    v: u32,
    /// Smallest hop at which this node has been reached so far.
    hop: u8,
    original: u64,
    degree: u32,
    /// Slot seen (original id, degree, inline features known).
    slot_seen: bool,
    /// Served from the snapshot's overlay (no slot or feature read).
    overlay: bool,
    /// Expansion finished: `samples` holds the sampled neighbors.
    expanded: bool,
    expanding: bool,
    /// The hop whose fanout drew `samples`. It can differ from `hop` for a
    /// while: a node drawn at a deep hop (its overflow pages in flight) may
    /// be reached at a smaller one before they arrive; `finish_expansion`
    /// then draws again instead of using the stale draw.
    drawn_hop: u8,
    /// The draw: internal node ids while it is resolved, the neighbors'
    /// batch indices once `expanded` (so levels and local ids need no
    /// lookup by id).
    samples: Vec<u32>,
    /// Typed graphs: the edge type of every entry of `samples` (empty
    /// for a homogeneous graph).
    rels: Vec<u8>,
    /// Typed graphs of format version 4: every entry's `e_id` (its edge
    /// type's edge base in the slot plus its place in the relation's list);
    /// empty otherwise.
    eids: Vec<u64>,
    /// Typed graphs: the node type (0 for a homogeneous graph).
    ntype: u16,
    /// Sampled indices that live in overflow: (index into samples, entry).
    wanted: Vec<(u32, u64)>,
    pending_pages: u32,
    feature: Option<usize>,
    feature_requested: bool,
    /// Row of the device table holding this node's features (resident set).
    resident: Option<u32>,
}

/// What a batch's telemetry is measured from, taken when it starts.
pub(crate) struct BatchStart {
    t0: Instant,
    cpu0: f64,
    io0: IoCounters,
    direct0: IoCounters,
}

pub struct NeighborSampler {
    layout: Layout,
    /// The dtype rows are handed out in (`Batch::x_dtype`).
    x_dtype: Dtype,
    /// `x_dtype` was asked for (else: as stored; per type on a typed dataset).
    x_dtype_set: bool,
    /// `SamplerConfig::batch_page_cache_bytes`, kept for [`Self::set_cache`].
    batch_page_cache_bytes: usize,
    placement: FeaturePlacement,
    fanouts: Vec<i32>,
    io: Box<dyn ReadEngine>,
    pool: BufPool,
    files: [String; 3],
    /// The trace's file table (docs/trace.md): dataset file names by the
    /// index a trace record's `file` holds — graph.fg, overflow.fg, then
    /// features.fg (homogeneous) or each typed `t<i>.features.fg` in engine
    /// order (the engine's own file indices).
    trace_files: Vec<String>,
    // Per-node arrays (4 B/node each), one copy per process shared by every
    // sampler of the same dataset files (flashgnn_store's shared module).
    node_index: Option<Arc<[u32]>>,
    node_order: Option<Arc<[u32]>>,
    feature_crcs: Option<Arc<[u32]>>,
    labels: Option<Arc<[i32]>>,
    /// Cumulative over every batch since open (or the last reset).
    pub telemetry: Telemetry,
    /// The most recent batch alone.
    pub last_batch: Telemetry,
    opened: Instant,
    // Per-batch state, kept to reuse allocations.
    nodes: Vec<Node>,
    index: HashMap<u32, u32>,
    pages: HashMap<(u16, u64), Vec<Waiter>>,
    queue: VecDeque<ReadReq>,
    features: Vec<u8>,
    scratch: Vec<u32>,
    bytes_used: u64,
    timeline: Vec<(f64, u32)>,
    /// Pages already read in this batch, kept (up to `page_cache_max` bytes)
    /// so a page needed again later in the batch costs no second read.
    /// Held as plain heap copies (`Arc<[u8]>`), not as the aligned I/O
    /// buffers: those go straight back to the pool, so only the reads in
    /// flight hold aligned memory (which glibc pads for alignment).
    page_cache: HashMap<(u16, u64), Arc<[u8]>>,
    page_cache_held: usize,
    page_cache_max: usize,
    /// Requests served from memory (this batch's pages or the cross-batch
    /// cache), waiting to be handled.
    ready: VecDeque<Ready>,
    /// This batch's blocked time in `complete` and its count (telemetry).
    io_wait: f64,
    io_waits: u64,
    page_hits: u64,
    /// Cross-batch cache hits (static, dynamic) and misses in this batch,
    /// added to the cache's shared counters once at its end.
    cache_hits: [u64; 2],
    cache_misses: u64,
    /// A node was drawn again after its children had been reached (see
    /// `fix_levels`).
    redrawn: bool,
    /// Typed graphs: the batch's seeds may be of several node types (a link
    /// batch whose edge type joins two: `crate::link`); each type's `n_id`
    /// then starts with its own seeds. Node batches have one input type.
    mixed_seed_types: bool,
    gather_features: bool,
    free_features_only: bool,
    want_degrees: bool,
    cache: Option<Arc<PageCache>>,
    /// The cache's static slots and overflow pages were checked when loaded
    /// ([`PageCache::static_checked`]): a static hit skips their CRC.
    static_checked: bool,
    /// The static set's overflow pages are packed
    /// ([`PageCache::static_overflow_packed`]): hits decode their entries.
    static_packed: bool,
    resident: Option<Arc<crate::Resident>>,
    /// Request counts per extent key (length, count) while a pre-sampling
    /// pass records them (see `hot_set_by_access`).
    accesses: Option<HashMap<u64, (u32, u64)>>,
    /// The dataset directory (a snapshot must be over this base).
    root: PathBuf,
    /// Its identity (what a cross-batch cache must have been built for).
    id: cache::DatasetId,
    /// Mutable-graph snapshot: nodes in its overlay (and nodes beyond the
    /// base) come from memory, with no I/O. None = the base alone.
    snapshot: Option<Arc<Snapshot>>,
    /// I/O trace capture (docs/trace.md); None = off, and every hook is a
    /// single branch on this field.
    trace: Option<Box<TraceCap>>,
    /// The `memory` engine's copies of graph.fg and features.fg, by file
    /// index ([`ReadEngine::resident`]; None with every other engine): slots
    /// and rows are taken straight from them instead of read into a buffer,
    /// copied into a page and copied again into the batch. Not used while a
    /// trace is captured (a trace records reads).
    mem: [Option<Arc<Vec<u8>>>; 3],
    /// Extents served from `mem`, counted as the engine counts its reads so
    /// telemetry (reads, bytes, CPU per read) covers them.
    direct: IoCounters,
    /// Overflow pages of `mem` or of the cache's static set checked in this
    /// batch: each is checked once per batch, as a read page is (a 4 KiB CRC
    /// costs 10x a lookup).
    checked_overflow: HashMap<u64, ()>,
    /// A typed dataset's node and edge types, per-type fanouts, row tables
    /// and labels (None: homogeneous).
    typed: Option<Arc<Typed>>,
    /// The codec a static hot set this sampler loads holds typed float32
    /// rows in ([`NeighborSampler::hold_rows_as`]; None: as stored).
    hot_codec: Option<crate::rowcodec::RowCodec>,
    /// The attached cache's [`PageCache::static_row_codec`]: static hits on
    /// typed rows of another length than the row are decoded by it.
    static_codec: Option<crate::rowcodec::RowCodec>,
    /// How the attached cache's static set holds this (homogeneous)
    /// dataset's slots ([`PageCache::static_held_slots`]: every static slot
    /// entry is decoded by it), and whether their inline rows are held
    /// encoded ([`NeighborSampler::held_rows`]: the entry's row is then
    /// decoded into `x` by `canonical`). None: static slots are held as stored.
    static_held_slots: Option<(HeldSlots, bool)>,
}

/// Original id of internal id `v` under `order` (node_order.npy; identity
/// without one, and beyond the base's `n` nodes).
fn original_in(order: Option<&[u32]>, n: u64, v: u64) -> u64 {
    match order {
        Some(o) if v < n => o[v as usize] as u64,
        _ => v,
    }
}

impl NeighborSampler {
    /// The dataset directory this sampler reads.
    pub fn root(&self) -> &Path {
        &self.root
    }
    /// The identity of the dataset this sampler reads (see [`cache::DatasetId`]).
    pub fn dataset_id(&self) -> &cache::DatasetId {
        &self.id
    }
    /// Whether this sampler uses a cross-batch cache (one was configured and
    /// it was built for this dataset).
    pub fn has_cache(&self) -> bool {
        self.cache.is_some()
    }
    /// Node count seen by this sampler: the snapshot's, else the base's.
    pub fn num_nodes(&self) -> u64 {
        self.snapshot.as_ref().map(|s| s.num_nodes()).unwrap_or(self.layout.num_nodes)
    }
    /// Original id of internal id `v` (identity beyond the base).
    pub fn original_of(&self, v: u32) -> u64 {
        original_in(self.node_order.as_deref(), self.layout.num_nodes, v as u64)
    }
    /// [`NeighborSampler::original_of`], detached from the sampler (for the
    /// hot-set loader's callbacks).
    pub(crate) fn originals(&self) -> impl Fn(u64) -> u64 {
        let (order, n) = (self.node_order.clone(), self.layout.num_nodes);
        move |v| original_in(order.as_deref(), n, v)
    }

    pub fn engine_name(&self) -> &'static str {
        self.io.name()
    }
    pub fn layout(&self) -> &Layout {
        &self.layout
    }
    pub fn fanouts(&self) -> &[i32] {
        &self.fanouts
    }
    pub fn io_counters(&self) -> &flashgnn_io::engine::IoCounters {
        self.io.counters()
    }

    pub(crate) fn io_mut(&mut self) -> &mut dyn ReadEngine {
        self.io.as_mut()
    }
    pub(crate) fn io_depth(&self) -> usize {
        self.io.depth()
    }
    pub(crate) fn pool_mut(&mut self) -> &mut BufPool {
        &mut self.pool
    }
    pub(crate) fn file_names(&self) -> [String; 3] {
        self.files.clone()
    }
    /// Start (`true`) or stop recording request counts; stopping returns them.
    pub(crate) fn record_accesses(&mut self, on: bool) -> HashMap<u64, (u32, u64)> {
        let old = self.accesses.take().unwrap_or_default();
        if on {
            self.accesses = Some(HashMap::default());
        }
        old
    }
    fn count_access(&mut self, k: u64, len: u32) {
        if let Some(a) = &mut self.accesses {
            a.entry(k).or_insert((len, 0)).1 += 1;
        }
    }
    pub(crate) fn drain_io(&mut self) {
        self.drain();
    }
    pub(crate) fn internal_of(&self, original: u64) -> u32 {
        match &self.node_index {
            Some(m) if original < self.layout.num_nodes => m[original as usize],
            _ => original as u32,
        }
    }

    fn hops(&self) -> usize {
        self.fanouts.len()
    }

    /// The dtype of the rows in `Batch::x`.
    pub fn x_dtype(&self) -> Dtype {
        self.x_dtype
    }

    /// Feature bytes gathered per node (0 when features are off), as stored.
    fn row_bytes(&self) -> usize {
        if self.gather_features {
            self.layout.row_bytes() as usize
        } else {
            0
        }
    }

    /// Sample one mini-batch around `seeds` (original ids) with `seed`.
    pub fn sample(&mut self, seeds: &[i64], seed: u64) -> Result<Batch> {
        let start = self.begin_batch();
        self.sample_started(start, seeds, seed)
    }

    /// [`Self::sample`] of a batch already begun: pages read since
    /// [`Self::begin_batch`] (a link batch's list reads, `crate::link`) are
    /// served from this batch's pages, not read again, and count in its
    /// telemetry.
    pub(crate) fn sample_started(&mut self, start: BatchStart, seeds: &[i64], seed: u64) -> Result<Batch> {
        let n = self.num_nodes();
        let mut seed_idx = Vec::with_capacity(seeds.len());
        for &s in seeds {
            if s < 0 || s as u64 >= n {
                return Err(SampleError::BadRequest(format!("seed node id {s} out of range [0, {n})")));
            }
            let v = self.internal_of(s as u64);
            if let Some(t) = self.typed.as_ref().filter(|_| !self.mixed_seed_types) {
                self.check_seed_type(t, seeds[0], s)?;
            }
            // No I/O is in flight yet (`discover` only queues requests; `run`
            // submits them), so an error here leaves nothing to drain: the
            // next batch clears the queue.
            seed_idx.push(self.discover(v, 0, seed)?);
        }
        self.redrawn = false;
        let mut r = self.run(seed);
        if r.is_ok() && self.redrawn {
            r = self.fix_levels(&seed_idx, seed);
        }
        if let Some(c) = self.cache.as_deref() {
            c.count(self.cache_hits[0], self.cache_hits[1], self.cache_misses);
        }
        if let Err(e) = r {
            self.drain();
            return Err(e);
        }
        self.clear_page_cache();
        let batch = if self.typed.is_some() { self.canonical_typed(&seed_idx)? } else { self.canonical(&seed_idx)? };
        self.record_batch(&batch, seeds.len(), start);
        Ok(batch)
    }

    /// Typed graphs: every seed of a batch is of one node type (the first
    /// seed's), the batch's input type.
    fn check_seed_type(&self, t: &Typed, first: i64, s: i64) -> Result<()> {
        let (a, b) = (t.type_of(first as u64), t.type_of(s as u64));
        if a != b {
            let names = &t.table.node_types;
            return Err(SampleError::BadRequest(format!(
                "seed node {s} is of node type {:?}, the batch's first seed {first} of {:?}: a batch's seeds are of one node type",
                names[b].name, names[a].name
            )));
        }
        Ok(())
    }

    /// Whether this sampler reads a typed dataset.
    pub fn is_typed(&self) -> bool {
        self.typed.is_some()
    }

    /// The node and edge types of the dataset (a homogeneous dataset's
    /// one-type view when it has none).
    pub fn type_table(&self) -> Option<&flashgnn_format::types::TypeTable> {
        self.typed.as_ref().map(|t| &t.table)
    }

    /// Hold typed float32 rows of the static hot sets this sampler loads
    /// from now on encoded by `codec` (`crate::rowcodec`; None: as stored).
    pub fn hold_rows_as(&mut self, codec: Option<crate::rowcodec::RowCodec>) {
        self.hot_codec = codec;
    }
    pub(crate) fn hot_row_codec(&self) -> Option<crate::rowcodec::RowCodec> {
        self.hot_codec
    }

    /// A homogeneous dataset's rows under `codec`: (bytes as stored, bytes
    /// held) when a static set holds them encoded, else None — no codec, a
    /// typed dataset (its rows are held per type, as `F_TYPE_ROW`), no
    /// rows, rows not float32, or a codec that would not make them smaller
    /// (int8 of a 1-value row: 5 B for 4).
    pub(crate) fn held_rows(&self, codec: Option<crate::rowcodec::RowCodec>) -> Option<(usize, usize)> {
        let (c, l) = (codec?, &self.layout);
        let rb = l.row_bytes() as usize;
        let held = c.held(l.feature_dtype, l.feature_dim as usize);
        (self.typed.is_none() && rb > 0 && l.feature_dtype == Dtype::Float32 && held < rb).then_some((rb, held))
    }

    /// How a static set this sampler loads holds its slots: re-encoded
    /// ([`HeldSlots`]) with their inline rows under the codec it is loaded
    /// with (`hot_codec`); None for a typed dataset (held as stored).
    pub(crate) fn hot_held_slots(&self) -> Option<HeldSlots> {
        let inline = self.layout.placement == FeaturePlacement::Inline;
        let stored = if inline { self.layout.row_bytes() as usize } else { 0 };
        let row = self.held_rows(self.hot_codec).filter(|_| inline).map_or(stored, |(_, held)| held);
        HeldSlots::new(&self.layout, row).filter(|_| self.typed.is_none())
    }

    /// `static_held_slots` for the attached `cache` (set after
    /// `static_codec`).
    fn held_slots_of(&self, cache: Option<&PageCache>) -> Option<(HeldSlots, bool)> {
        let encoded = self.layout.placement == FeaturePlacement::Inline && self.held_rows(self.static_codec).is_some();
        cache?.static_held_slots().filter(|_| self.typed.is_none()).map(|h| (h, encoded))
    }

    /// Where a typed dataset's rows lie, and their checks, detached from
    /// the sampler (for the hot-set loader's callbacks). None: homogeneous.
    pub(crate) fn row_finder(&self) -> Option<typed::RowFinder> {
        self.typed.clone().map(typed::RowFinder)
    }

    /// Refuse `what` on a typed dataset, by name.
    pub(crate) fn refuse_typed(&self, what: &str) -> Result<()> {
        if self.typed.is_some() {
            return Err(SampleError::Config(format!(
                "{what} is not supported on a typed (heterogeneous) dataset yet ({})",
                self.root.display()
            )));
        }
        Ok(())
    }

    /// Clear the per-batch state (its allocations are kept for the next
    /// batch); returns what the batch's telemetry is measured from.
    /// Typed graphs: the global id ranges `[lo, hi)` of edge type `e`'s
    /// source and destination node types, with their names (a link
    /// batch's endpoints and negatives, `crate::link`).
    pub(crate) fn edge_type_ranges(&self, e: usize) -> Result<[(u64, u64, String); 2]> {
        let t = self.typed.as_deref().ok_or_else(|| {
            SampleError::Config("an edge type was named for a link batch on a homogeneous dataset".into())
        })?;
        let ne = t.table.edge_types.len();
        if e >= ne {
            return Err(SampleError::BadRequest(format!("edge type {e} out of range [0, {ne})")));
        }
        let range = |ty: usize| (t.offsets[ty], t.offsets[ty + 1], t.table.node_types[ty].name.clone());
        Ok([range(t.src_of[e]), range(t.dst_of[e])])
    }

    /// `f` of a typed dataset's first global id per node type (then the
    /// total) and its type table; None for a homogeneous dataset.
    pub(crate) fn with_types<R>(&self, f: impl FnOnce(&[u64], &flashgnn_format::types::TypeTable) -> R) -> Option<R> {
        self.typed.as_deref().map(|t| f(&t.offsets, &t.table))
    }

    /// Let the next batches' seeds be of several node types (see the field).
    pub(crate) fn set_mixed_seed_types(&mut self, on: bool) {
        self.mixed_seed_types = on;
    }

    pub(crate) fn begin_batch(&mut self) -> BatchStart {
        let start = BatchStart {
            t0: Instant::now(),
            cpu0: thread_cpu_seconds(),
            io0: self.io.counters().clone(),
            direct0: self.direct.clone(),
        };
        self.nodes.clear();
        self.index.clear();
        self.pages.clear();
        self.queue.clear();
        self.features.clear();
        self.bytes_used = 0;
        self.checked_overflow.clear();
        self.timeline.clear();
        self.clear_page_cache();
        (self.io_wait, self.io_waits) = (0.0, 0);
        self.page_hits = 0;
        self.cache_hits = [0; 2];
        self.cache_misses = 0;
        if let Some(t) = self.trace.as_mut() {
            t.reset();
        }
        start
    }

    /// Add this batch's telemetry to the totals and keep it as `last_batch`.
    fn record_batch(&mut self, batch: &Batch, seeds: usize, start: BatchStart) {
        let BatchStart { t0, cpu0, io0, direct0 } = start;
        let mut t = Telemetry {
            batches: 1,
            seeds: seeds as u64,
            nodes: batch.total_nodes() as u64,
            edges: batch.total_edges() as u64,
            ..Default::default()
        };
        t.absorb_io(&io0, self.io.counters());
        t.absorb_io(&direct0, &self.direct);
        t.bytes_used = self.bytes_used;
        t.page_hits = self.page_hits;
        t.cache_static_hits = self.cache_hits[0];
        t.cache_dynamic_hits = self.cache_hits[1];
        t.seconds = t0.elapsed().as_secs_f64();
        t.cpu_seconds = thread_cpu_seconds() - cpu0;
        (t.io_wait_seconds, t.io_waits) = (self.io_wait, self.io_waits);
        t.timeline = std::mem::take(&mut self.timeline);
        self.telemetry.add(&t);
        self.last_batch = t;
    }

    /// After an error: wait for reads still in flight so no buffer is leaked
    /// and the next batch starts clean.
    fn drain(&mut self) {
        self.clear_page_cache();
        let mut done = Vec::new();
        while self.io.in_flight() > 0 {
            done.clear();
            if self.io.complete(1, &mut done).is_err() {
                continue;
            }
            for d in done.drain(..) {
                self.pool.put(d.buf);
            }
        }
        self.queue.clear();
    }
}

impl Drop for NeighborSampler {
    /// A batch never returns with reads in flight, but a panic unwinding out
    /// of one can: the kernel writes into their buffers until they complete,
    /// so wait for them before the buffers are freed.
    fn drop(&mut self) {
        if self.io.in_flight() > 0 {
            self.drain();
        }
    }
}

impl Node {
    /// A base node just reached at `hop`: nothing read yet.
    fn new(v: u32, hop: u8, original: u64) -> Node {
        Node {
            v,
            hop,
            original,
            degree: 0,
            slot_seen: false,
            overlay: false,
            expanded: false,
            expanding: false,
            drawn_hop: hop,
            samples: Vec::new(),
            rels: Vec::new(),
            eids: Vec::new(),
            ntype: 0,
            wanted: Vec::new(),
            pending_pages: 0,
            feature: None,
            feature_requested: false,
            resident: None,
        }
    }

    fn node_mismatch(&self, slot: &flashgnn_format::slot::SlotView) -> bool {
        slot.original_id != self.original
    }
}

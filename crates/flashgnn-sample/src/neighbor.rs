//! Out-of-order k-hop neighbor sampling with feature gathering (see the crate
//! docs for the walk through one batch).

use std::collections::VecDeque;

// Fx hashing: the keys are node ids and page numbers, not attacker-chosen
// strings, and SipHash costs several times more per lookup on this hot path.
use rustc_hash::FxHashMap as HashMap;
use std::path::Path;
use std::time::Instant;

use flashgnn_format::layout::{check_overflow_page, FeaturePlacement};
use flashgnn_format::manifest::{FEATURES_FILE, GRAPH_FILE, OVERFLOW_FILE};
use flashgnn_format::slot::{decode_checked_slot, decode_slot, read_id};
use flashgnn_format::trace::{TraceRead, KIND_FEATURE_ROW, KIND_OVERFLOW_PAGE, KIND_SLOT_PAGE, NO_DEP};
use flashgnn_format::{FormatError, Layout};
use flashgnn_io::aligned::BufPool;
use flashgnn_io::engine::{open_engine, resident_at, Done, EngineConfig, EngineKind, IoCounters, ReadEngine, ReadReq};
use flashgnn_store::{Dataset, NodeRec, Snapshot};
use std::path::PathBuf;
use std::sync::Arc;

use crate::cache::{self, PageCache};
use crate::packed;

use crate::rng::sample_indices;
use crate::telemetry::{thread_cpu_seconds, Telemetry};
use crate::{Result, SampleError};

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

/// Tag kinds (top byte of a request tag).
const TAG_PAGE: u64 = 1 << 56;
const TAG_FEATURE: u64 = 2 << 56;
const TAG_KEY: u64 = (1 << 56) - 1;

/// `Node::feature` offsets with one of these tags in their top two bits are
/// not in the batch's `features` but in the `memory` engine's copy of
/// graph.fg (a slot's inline row) or of features.fg (a separate row, CRC
/// already checked), or in the cross-batch cache's static arena (a cached
/// slot's inline row, checked with its slot): the row is copied once,
/// straight into the batch's `x`, by `canonical`. Offsets into files and the
/// arena are far below 2^62 (a file is at most 2^48 bytes: `TAG_KEY` bounds
/// page numbers to 48 bits; the arena is within the memory budget).
const FEAT_IN_GRAPH: usize = 1 << 63;
const FEAT_IN_FEATURES: usize = 1 << 62;
const FEAT_IN_ARENA: usize = FEAT_IN_GRAPH | FEAT_IN_FEATURES;
const FEAT_OFFSET: usize = FEAT_IN_FEATURES - 1;

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

/// Requests served from memory between two visits to the ring while reads
/// wait to be submitted (`run`): ~30 us of hits at ~0.5 us each, against
/// one `io_uring_enter` (~1-2 us) per visit.
const READY_ROUND: usize = 64;

/// How far ahead in the ready queue `run` prefetches a static slot's header
/// and neighbor lines (cache_probe on data/ooc: 31-32 -> 26-29 ms of CPU a
/// batch at 8; 16 was no better).
const PREFETCH_AHEAD: usize = 8;

/// Rows prefetched ahead of the one `canonical` copies into `x`.
const GATHER_AHEAD: usize = 8;

/// In-flight samples kept per batch for the depth timeline (one per
/// completion round): 4096 rounds cover a 1024-seed, 25x10 batch at depth 256.
const TIMELINE_PER_BATCH_MAX: usize = 4096;

/// Free-list cap for I/O buffers: 16 MiB (4 Ki pages, 16x the default
/// depth's worth) — beyond that, buffers go back to the allocator.
pub const BUF_POOL_BYTES: usize = 16 << 20;

/// Default [`SamplerConfig::batch_page_cache_bytes`]: 16 MiB = 4 Ki pages of 4 KiB.
pub const BATCH_PAGE_CACHE_BYTES: usize = 16 << 20;

/// A producer's fixed engine memory with the default settings: its buffer
/// pool plus its per-batch page cache (the batch it builds comes on top).
/// `flashgnn.budget` counts this per producer (`_core.ENGINE_BYTES_PER_PRODUCER`).
pub const ENGINE_BYTES_PER_PRODUCER: usize = BUF_POOL_BYTES + BATCH_PAGE_CACHE_BYTES;

/// Most hops (fanouts) a sampler takes (a request for more is refused).
pub const MAX_HOPS: usize = 16;

/// Per-batch page cache cap when a cross-batch cache is present: pages read in
/// this batch are offered to that cache too (the same `Arc`, no second copy
/// while both hold it), so the batch-local copy only bridges the gap until
/// the shared one evicts them.
const BATCH_CACHE_WITH_SHARED: usize = 16 << 20;

#[derive(Debug, Clone)]
pub struct SamplerConfig {
    pub engine: EngineKind,
    pub io: EngineConfig,
    /// Load labels (4 B/node in RAM) so each batch carries `y`.
    pub labels: bool,
    /// Pages kept per batch so one read serves every node on a page, even
    /// when they are reached at different times (default 16 MiB = 4 Ki
    /// pages of 4 KiB; 0 disables). Freed at the end of every batch.
    /// Measured on data/ooc (scale 21, fanout 25,10): 64 MiB instead of 16
    /// saves 1 % of reads (1.199 vs 1.212 per sampled node) for 48 MiB more.
    pub batch_page_cache_bytes: usize,
    /// Gather feature rows (`Batch::x`). Off, a batch carries structure and
    /// labels only and no read is issued for features — last-hop nodes then
    /// cost nothing (layer-wise inference reads embeddings elsewhere).
    pub features: bool,
    /// With `features`: gather only the rows that come with a read the
    /// structure needs anyway (an expanded node's inline slot, an overlay
    /// record) and issue no read for a row alone. Nodes left without a row
    /// get zeros in `x` and their positions in [`Batch::missing`]. This is
    /// the structure stage of lookahead (Ginex): the rows are then gathered
    /// later, through a cache that knows the next batches.
    pub free_features_only: bool,
    /// Carry every node's whole-graph degree (`Batch::deg`, the stored
    /// neighbor count of its slot). Nodes of the last hop are never
    /// expanded, so without this their slot is read only when it holds their
    /// features inline; with it, it is always read (one slot per last-hop
    /// node: GCN-style normalisation by the degrees of the whole graph
    /// needs them, see `flashgnn.nn`).
    pub degrees: bool,
    /// Cross-batch DRAM cache shared by every sampler holding this `Arc`
    /// (None = no cache: every page not already in this batch is read). Used
    /// only by a sampler opened on the dataset the cache was built for (its
    /// [`cache::DatasetId`]); on any other (another generation of a mutable
    /// store) the sampler runs uncached.
    pub cache: Option<Arc<PageCache>>,
    /// Feature rows resident in a device tier (see [`crate::resident`]):
    /// neither read nor copied; `Batch::resident` names their table rows.
    /// Used only on the dataset the set was built for.
    pub resident: Option<Arc<crate::Resident>>,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            engine: EngineKind::Uring,
            io: EngineConfig::default(),
            labels: true,
            batch_page_cache_bytes: BATCH_PAGE_CACHE_BYTES,
            features: true,
            free_features_only: false,
            degrees: false,
            cache: None,
            resident: None,
        }
    }
}

/// One mini-batch in PyG order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Batch {
    /// Unique original node ids; the first `batch_size` are the seeds.
    pub n_id: Vec<i64>,
    /// Local edge endpoints: `row` = neighbor, `col` = target (toward seeds).
    pub row: Vec<i64>,
    pub col: Vec<i64>,
    pub num_sampled_nodes: Vec<i64>,
    pub num_sampled_edges: Vec<i64>,
    /// Feature rows `[n_id.len(), dim]` in the stored dtype, contiguous.
    /// With [`SamplerConfig::free_features_only`], packed: only the rows of
    /// the positions not in `missing`, in order (`[n_id.len() - missing.len(), dim]`).
    pub x: Vec<u8>,
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
    /// Sampled indices that live in overflow: (index into samples, entry).
    wanted: Vec<(u32, u64)>,
    pending_pages: u32,
    feature: Option<usize>,
    feature_requested: bool,
    /// Row of the device table holding this node's features (resident set).
    resident: Option<u32>,
}

#[derive(Debug, Clone, Copy)]
enum Waiter {
    Slot(u32),
    Overflow(u32),
}

/// A request served from memory, waiting to be handled.
enum Ready {
    /// A whole page from this batch's pages (or an overflow page from the
    /// cross-batch cache): (page, waiter, bytes); the waiter names the file.
    Page(u64, Waiter, Arc<[u8]>),
    /// Node `i`'s slot alone, from the cross-batch cache's dynamic part.
    Slot(u32, Arc<[u8]>),
    /// Node `i`'s slot from the static hot set, by its place in the cache's
    /// arena: the bytes are borrowed from there when handled (no `Arc`, no
    /// copy, no second lookup).
    StaticSlot(u32, std::ops::Range<usize>),
    /// An overflow page from the static hot set (page, waiter, cache key),
    /// already checked when requested.
    StaticPage(u64, Waiter, u64),
    /// Node `i`'s slot, borrowed from the `memory` engine's copy of graph.fg
    /// (no read, no buffer, no copy; checked on decode like every slot).
    MemSlot(u32),
    /// Overflow page `page` for node `i`, borrowed from the `memory`
    /// engine's copy of overflow.fg (checked when first handled in a batch).
    MemOverflow(u64, u32),
}

pub struct NeighborSampler {
    layout: Layout,
    placement: FeaturePlacement,
    fanouts: Vec<i32>,
    io: Box<dyn ReadEngine>,
    pool: BufPool,
    files: [String; 3],
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
    gather_features: bool,
    free_features_only: bool,
    want_degrees: bool,
    cache: Option<Arc<PageCache>>,
    /// The cache's static slots and overflow pages were checked when loaded
    /// ([`PageCache::static_checked`]): a static hit skips their CRC.
    static_checked: bool,
    /// The static set's overflow pages are bit-packed
    /// ([`PageCache::static_overflow_packed`]): hits decode their entries.
    static_packed: Option<u32>,
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
}

/// Reads captured for the current batch (see [`NeighborSampler::set_trace`]).
struct TraceCap {
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

    /// The reads of the most recent batch (empty when capture is off),
    /// in issue order (`index` = position); `batch` fields are 0 (the
    /// writer numbers batches).
    pub fn take_trace(&mut self) -> Vec<TraceRead> {
        self.trace.as_mut().map(|t| std::mem::take(&mut t.reads)).unwrap_or_default()
    }

    /// Open a sampler over the dataset at `path` with per-hop `fanouts`
    /// (-1 = all neighbors).
    pub fn open(path: &Path, fanouts: &[i32], cfg: &SamplerConfig) -> Result<NeighborSampler> {
        Self::open_dataset(&Dataset::open(path)?, fanouts, cfg)
    }

    /// [`Self::open`] on a dataset already open (e.g. a snapshot's base).
    /// The per-node arrays (relabelling maps, feature CRCs, labels) are
    /// shared, not copied: every sampler and `Dataset` of the same files in
    /// this process holds the same `Arc`s, loaded once.
    pub fn open_dataset(ds: &Dataset, fanouts: &[i32], cfg: &SamplerConfig) -> Result<NeighborSampler> {
        if fanouts.len() > MAX_HOPS {
            return Err(SampleError::BadRequest(format!(
                "{} hops requested; at most {MAX_HOPS} are supported",
                fanouts.len()
            )));
        }
        let layout = ds.layout().clone();
        let id = cache::DatasetId::of(ds)?;
        // A cache built on another dataset (or generation) holds other bytes
        // under the same keys: run without it.
        let shared = cfg.cache.clone().filter(|c| *c.dataset() == id);
        let mut names = vec![GRAPH_FILE, OVERFLOW_FILE];
        if layout.placement == FeaturePlacement::Separate {
            names.push(FEATURES_FILE);
        }
        // Striped datasets (stripes.json) read their parts through a
        // translating engine; plain ones go straight to the device engine.
        let (physical, maps) = flashgnn_io::stripe::physical_files(ds.root(), &names)?;
        let io = open_engine(cfg.engine, &physical, &cfg.io)?;
        let io: Box<dyn ReadEngine> = if maps.iter().any(|m| m.is_some()) {
            let logical = names.iter().map(|n| ds.root().join(n)).collect();
            Box::new(flashgnn_io::stripe::StripeEngine::new(io, maps, logical))
        } else {
            io
        };
        let mem = [F_GRAPH, F_OVERFLOW, F_FEATURES].map(|f| io.resident(f));
        // Separate feature rows are checked against feature_crc.npy (4 B/node).
        let feature_crcs = if layout.placement == FeaturePlacement::Separate && layout.row_bytes() > 0 {
            Some(ds.feature_crcs()?.clone())
        } else {
            None
        };
        // The store loads and cross-checks the relabelling maps (4 B/node each).
        let (node_index, node_order) = match ds.maps()? {
            Some((index, order)) => (Some(index.clone()), Some(order.clone())),
            None => (None, None),
        };
        // Checked whole (CRC32C, every value in range) when first loaded.
        let labels = if cfg.labels && ds.has_labels() { Some(ds.labels_shared()?) } else { None };
        Ok(NeighborSampler {
            placement: layout.placement,
            layout,
            fanouts: fanouts.to_vec(),
            io,
            pool: BufPool::new(BUF_POOL_BYTES),
            files: [ds.file(GRAPH_FILE), ds.file(OVERFLOW_FILE), ds.file(FEATURES_FILE)],
            node_index,
            node_order,
            feature_crcs,
            labels,
            telemetry: Telemetry::default(),
            last_batch: Telemetry::default(),
            opened: Instant::now(),
            nodes: Vec::new(),
            index: HashMap::default(),
            pages: HashMap::default(),
            queue: VecDeque::new(),
            features: Vec::new(),
            scratch: Vec::new(),
            bytes_used: 0,
            timeline: Vec::new(),
            page_cache: HashMap::default(),
            page_cache_held: 0,
            page_cache_max: if shared.is_some() {
                cfg.batch_page_cache_bytes.min(BATCH_CACHE_WITH_SHARED)
            } else {
                cfg.batch_page_cache_bytes
            },
            ready: VecDeque::new(),
            io_wait: 0.0,
            io_waits: 0,
            page_hits: 0,
            cache_hits: [0; 2],
            cache_misses: 0,
            redrawn: false,
            gather_features: cfg.features,
            free_features_only: cfg.features && cfg.free_features_only,
            want_degrees: cfg.degrees,
            static_checked: shared.as_ref().is_some_and(|c| c.static_checked()),
            static_packed: shared.as_ref().and_then(|c| c.static_overflow_packed()),
            cache: shared,
            resident: cfg.resident.clone().filter(|r| *r.dataset() == id),
            accesses: None,
            root: ds.root().to_path_buf(),
            id,
            snapshot: None,
            trace: None,
            mem,
            direct: IoCounters::default(),
            checked_overflow: HashMap::default(),
        })
    }

    /// Read base + delta of a mutable-graph snapshot from now on (None: the
    /// base alone). The snapshot must be over this sampler's dataset.
    pub fn set_snapshot(&mut self, snap: Option<Arc<Snapshot>>) -> Result<()> {
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
    pub fn snapshot(&self) -> Option<&Arc<Snapshot>> {
        self.snapshot.as_ref()
    }
    /// Node count seen by this sampler: the snapshot's, else the base's.
    pub fn num_nodes(&self) -> u64 {
        self.snapshot.as_ref().map(|s| s.num_nodes()).unwrap_or(self.layout.num_nodes)
    }
    /// Original id of internal id `v` (identity beyond the base).
    pub fn original_of(&self, v: u32) -> u64 {
        match &self.node_order {
            Some(o) if (v as u64) < self.layout.num_nodes => o[v as usize] as u64,
            _ => v as u64,
        }
    }
    /// Label of original id `o`: -1 for vertices added or deleted in the
    /// snapshot and beyond the stored labels.
    fn label_of(&self, lab: &[i32], o: i64) -> i64 {
        if let Some(l) = self.snapshot.as_ref().and_then(|s| s.label_override(o as u64)) {
            return l;
        }
        lab.get(o as usize).map(|&l| l as i64).unwrap_or(-1)
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
    pub(crate) fn labels_of(&self, n_id: &[i64]) -> Vec<i64> {
        match &self.labels {
            Some(lab) => n_id.iter().map(|&o| self.label_of(lab, o)).collect(),
            None => Vec::new(),
        }
    }

    fn hops(&self) -> usize {
        self.fanouts.len()
    }

    /// Feature bytes gathered per node (0 when features are off).
    fn row_bytes(&self) -> usize {
        if self.gather_features {
            self.layout.row_bytes() as usize
        } else {
            0
        }
    }

    /// Sample one mini-batch around `seeds` (original ids) with `seed`.
    pub fn sample(&mut self, seeds: &[i64], seed: u64) -> Result<Batch> {
        let t0 = Instant::now();
        let cpu0 = thread_cpu_seconds();
        let io0 = self.io.counters().clone();
        let direct0 = self.direct.clone();
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
            t.reads.clear();
            t.page_rec.clear();
            t.feature_rec.clear();
            t.cause = NO_DEP;
        }
        let n = self.num_nodes();
        let mut seed_idx = Vec::with_capacity(seeds.len());
        for &s in seeds {
            if s < 0 || s as u64 >= n {
                return Err(SampleError::BadRequest(format!("seed node id {s} out of range [0, {n})")));
            }
            let v = self.internal_of(s as u64);
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
        let batch = self.canonical(&seed_idx)?;
        let mut t = Telemetry {
            batches: 1,
            seeds: seeds.len() as u64,
            nodes: batch.n_id.len() as u64,
            edges: batch.row.len() as u64,
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
        Ok(batch)
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

    /// Reach internal node `v` at `hop`; returns its batch index.
    fn discover(&mut self, v: u32, hop: u8, seed: u64) -> Result<u32> {
        let k = self.hops() as u8;
        if let Some(&i) = self.index.get(&v) {
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
        // The overlay lookup borrows the `snapshot` field alone (the other
        // fields written below are disjoint from it).
        if let Some(rec) = self.snapshot.as_deref().and_then(|s| s.record(original)) {
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
        self.nodes.push(Node { resident, ..Node::new(v, hop, original) });
        self.index.insert(v, i);
        let wants_row = rb > 0 && resident.is_none() && !self.free_features_only;
        let needs_slot = hop < k || self.want_degrees || (self.placement == FeaturePlacement::Inline && wants_row);
        if needs_slot {
            self.request_slot(i)?;
        }
        if self.placement == FeaturePlacement::Separate && wants_row {
            self.request_feature(i)?;
        }
        Ok(i)
    }

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
            let kind = if file == F_GRAPH { KIND_SLOT_PAGE } else { KIND_OVERFLOW_PAGE };
            let r = t.push(file, kind, node.hop, page * p, p as u32, node.v);
            t.page_rec.insert((file, page), r);
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
    fn request_overflow(&mut self, i: u32, page: u64) -> Result<()> {
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
            if let Some(data) = c.get_static(key) {
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
                        let at = self.static_packed.map_or(k * w, |bits| packed::entry_offset(k, bits));
                        prefetch(data.as_ptr().wrapping_add(at), w);
                    }
                }
                self.ready.push_back(Ready::StaticPage(page, Waiter::Overflow(i), key));
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
    fn request_slot(&mut self, i: u32) -> Result<()> {
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
        if self.serve_from_batch((F_GRAPH, page), Waiter::Slot(i)) {
            return Ok(());
        }
        if let Some(c) = self.cache.as_deref() {
            if let Some(r) = c.get_static_extent(key) {
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

    fn request_feature(&mut self, i: u32) -> Result<()> {
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
            let r = t.push(F_FEATURES, KIND_FEATURE_ROW, node.hop, lo, len, node.v);
            t.feature_rec.insert(i, r);
        }
        self.queue.push_back(ReadReq { file: F_FEATURES, offset: lo, len, tag: TAG_FEATURE | i as u64 });
        Ok(())
    }

    fn run(&mut self, seed: u64) -> Result<()> {
        let mut done: Vec<Done> = Vec::new();
        loop {
            while self.io.in_flight() < self.io.depth() {
                let Some(req) = self.queue.pop_front() else { break };
                let buf = self.pool.get(req.len as usize);
                if let Some(t) = self.trace.as_mut() {
                    if let Some(r) = t.rec_of_tag(req.tag) {
                        t.reads[r as usize].submit_ns = (t.t0.elapsed().as_nanos() as u64).max(1);
                    }
                }
                self.io.submit(req, buf)?;
            }
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
                    t.cause = t.rec_of_tag(d.req.tag).unwrap_or(NO_DEP);
                    if let Some(r) = t.reads.get_mut(t.cause as usize) {
                        r.complete_ns = (t.t0.elapsed().as_nanos() as u64).max(r.submit_ns);
                    }
                }
                let r = self.on_done(&d, seed);
                self.pool.put(d.buf);
                r?;
            }
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
                if let (Some(Ready::StaticSlot(_, a)), Some(c)) =
                    (self.ready.get(PREFETCH_AHEAD), self.cache.as_deref())
                {
                    let b = c.static_at(a.clone());
                    prefetch(b.as_ptr(), 64);
                    prefetch(b.as_ptr().wrapping_add(b.len().saturating_sub(64)), 64);
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
                    t.cause = match &r {
                        Ready::Page(page, Waiter::Slot(_), _) => t.page_rec.get(&(F_GRAPH, *page)).copied(),
                        Ready::Page(page, Waiter::Overflow(_), _) => t.page_rec.get(&(F_OVERFLOW, *page)).copied(),
                        Ready::StaticPage(page, _, _) => t.page_rec.get(&(F_OVERFLOW, *page)).copied(),
                        Ready::Slot(..) | Ready::StaticSlot(..) | Ready::MemSlot(..) | Ready::MemOverflow(..) => None,
                    }
                    .unwrap_or(NO_DEP);
                }
                match r {
                    Ready::Page(page, Waiter::Slot(i), data) => self.on_slot_page(i, page, &data, seed)?,
                    Ready::Page(page, Waiter::Overflow(i), data) => self.on_overflow(i, page, &data, None, seed)?,
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
                        self.on_overflow(i, page, data, None, seed)?
                    }
                    Ready::StaticSlot(i, r) => {
                        let c = statics.get_or_insert_with(|| self.cache.clone().expect("a static hit has a cache"));
                        let at = FEAT_IN_ARENA | r.start;
                        self.on_slot(i, c.static_at(r), false, Some(at), seed)?
                    }
                    Ready::StaticPage(page, w, key) => {
                        let c = statics.get_or_insert_with(|| self.cache.clone().expect("a static hit has a cache"));
                        let data = c.get_static(key).expect("static entries are never evicted");
                        match w {
                            Waiter::Slot(i) => self.on_slot_page(i, page, data, seed)?,
                            Waiter::Overflow(i) => self.on_overflow(i, page, data, self.static_packed, seed)?,
                        }
                    }
                }
            }
            if let Some(t) = self.trace.as_mut() {
                // Reads queued outside a completion (a redraw in `fix_levels`) have no cause.
                t.cause = NO_DEP;
            }
        }
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

    /// Drop this batch's pages (end of a batch).
    fn clear_page_cache(&mut self) {
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
            let (lo, _, at) = self.layout.feature_extent(self.nodes[i].v as u64);
            if let Some(t) = self.trace.as_mut() {
                let rec = t.feature_rec.get(&(i as u32)).copied();
                t.used(rec, self.layout.row_bytes(), 1);
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
                Waiter::Overflow(i) => self.on_overflow(i, page, buf, None, seed)?,
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
            let rec = t.page_rec.get(&(F_GRAPH, page)).copied();
            t.used(rec, l.slot_bytes, 1);
        }
        self.on_slot(i, &buf[start..start + l.slot_bytes as usize], true, None, seed)
    }

    /// Node `i`'s slot bytes arrived; `offer`: from a page, so the slot is
    /// offered to the cross-batch cache the first time this batch sees it;
    /// `kept_at`: `bytes` are borrowed from memory that outlives the batch,
    /// at this tagged offset (`FEAT_IN_GRAPH` or `FEAT_IN_ARENA`): an inline
    /// row is then copied once, by `canonical`.
    fn on_slot(&mut self, i: u32, bytes: &[u8], offer: bool, kept_at: Option<usize>, seed: u64) -> Result<()> {
        let l = &self.layout;
        let v = self.nodes[i as usize].v as u64;
        let gname = &self.files[F_GRAPH as usize];
        // A slot of the static set was checked whole when the set was loaded
        // and has stayed in the arena since: its CRC is not recomputed (its
        // fields still are bound-checked).
        let in_arena = kept_at.is_some_and(|a| a & FEAT_IN_ARENA == FEAT_IN_ARENA);
        let slot = if in_arena && self.static_checked {
            decode_checked_slot(l, v, bytes, gname)?
        } else {
            decode_slot(l, v, bytes, gname)?
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
            node.slot_seen = true;
            node.degree = slot.degree;
            self.bytes_used += 24;
            if let Some(c) = self.cache.as_ref().filter(|c| offer && c.accepts(bytes.len())) {
                c.insert(cache::key(F_SLOT, v), Arc::from(bytes));
            }
            if self.placement == FeaturePlacement::Inline
                && self.gather_features
                && !slot.features.is_empty()
                && node.feature.is_none()
                && node.resident.is_none()
            {
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
        let hop = node.hop as usize;
        if hop >= self.fanouts.len()
            || node.expanded
            || !node.expanding
            || !node.samples.is_empty()
            || node.pending_pages > 0
        {
            return Ok(());
        }
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
    /// page, or with `packed` (bits per id) a static set's packed copy (`crate::packed`).
    fn on_overflow(&mut self, i: u32, page: u64, buf: &[u8], packed: Option<u32>, seed: u64) -> Result<()> {
        let l = &self.layout;
        let per = l.overflow_ids_per_page();
        let w = l.id_bytes as usize;
        let node = &mut self.nodes[i as usize];
        for &(j, e) in &node.wanted {
            if 1 + e / per == page {
                let at = (e % per) as usize * w;
                let id = match packed {
                    Some(bits) => packed::entry(buf, (e % per) as usize, bits),
                    None => read_id(&buf[at..at + w]),
                };
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
                node.samples[j as usize] = id as u32;
            }
        }
        if let Some(t) = self.trace.as_mut() {
            let n = node.wanted.iter().filter(|&&(_, e)| 1 + e / per == page).count() as u32;
            let rec = t.page_rec.get(&(F_OVERFLOW, page)).copied();
            t.used(rec, n * w as u32, n);
        }
        node.pending_pages -= 1;
        if node.pending_pages == 0 {
            node.wanted.clear();
            return self.finish_expansion(i, seed);
        }
        Ok(())
    }

    /// Expand an overlay node: draw from its in-memory list (the same draw
    /// as from a slot: keyed by (seed, internal id), `sample_indices`).
    fn expand_overlay(&mut self, i: u32, seed: u64) -> Result<()> {
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

    fn finish_expansion(&mut self, i: u32, seed: u64) -> Result<()> {
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
            for &u in &samples {
                c.prefetch_slot_index(u as u64);
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
    fn fix_levels(&mut self, seed_idx: &[u32], seed: u64) -> Result<()> {
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

    /// Assign local ids in PyG order and gather the outputs.
    fn canonical(&mut self, seed_idx: &[u32]) -> Result<Batch> {
        let k = self.hops();
        let rb = self.row_bytes();
        // Local id per batch index (-1: not placed yet).
        let mut local = vec![-1i64; self.nodes.len()];
        let mut order: Vec<u32> = Vec::with_capacity(self.nodes.len());
        for &i in seed_idx {
            if local[i as usize] < 0 {
                local[i as usize] = order.len() as i64;
            }
            order.push(i);
        }
        let mut b = Batch { batch_size: seed_idx.len(), ..Default::default() };
        b.num_sampled_nodes.push(seed_idx.len() as i64);
        let mut frontier = 0..order.len();
        for hop in 0..k {
            let start = order.len();
            let edges0 = b.row.len();
            for f in frontier.clone() {
                let i = order[f];
                let node = &self.nodes[i as usize];
                if !node.expanded || node.drawn_hop as usize != hop {
                    return Err(SampleError::BadRequest(format!(
                        "internal: node {} at hop {hop} was not expanded at that hop",
                        node.v
                    )));
                }
                let col = local[i as usize];
                for &j in &node.samples {
                    let mut l = local[j as usize];
                    if l < 0 {
                        l = order.len() as i64;
                        local[j as usize] = l;
                        order.push(j);
                    }
                    b.row.push(l);
                    b.col.push(col);
                }
            }
            b.num_sampled_edges.push((b.row.len() - edges0) as i64);
            b.num_sampled_nodes.push((order.len() - start) as i64);
            frontier = start..order.len();
        }
        b.n_id = order.iter().map(|&i| self.nodes[i as usize].original as i64).collect();
        // Exactly the rows `x` will hold (packed when free: see `Batch::x`), so a
        // batch waiting in the lookahead window keeps no unused capacity.
        let rows = if self.free_features_only {
            order.iter().filter(|&&i| self.nodes[i as usize].feature.is_some()).count()
        } else {
            order.len()
        };
        b.x.reserve_exact(rows * rb);
        let mem_rows = |f: u16| self.mem[f as usize].as_deref().map_or(&[][..], |m| m.as_slice());
        let (in_graph, in_features) = (mem_rows(F_GRAPH), mem_rows(F_FEATURES));
        if rb > 0 {
            if self.resident.is_some() {
                b.resident.reserve(order.len());
            }
            // Where node `i`'s row is (None: not gathered here).
            let row_src = |i: u32| -> Option<&[u8]> {
                let off = self.nodes[i as usize].feature?;
                let at = off & FEAT_OFFSET;
                Some(match off & !FEAT_OFFSET {
                    0 => &self.features[at..at + rb],
                    FEAT_IN_GRAPH => &in_graph[at..at + rb],
                    FEAT_IN_FEATURES => &in_features[at..at + rb],
                    _ => self.cache.as_deref().expect("a static hit has a cache").static_at(at..at + rb),
                })
            };
            for (pos, &i) in order.iter().enumerate() {
                // Rows a few places ahead: random places in the arena or a
                // file's copy, long evicted since their slot was decoded.
                if let Some(a) = order.get(pos + GATHER_AHEAD).and_then(|&j| row_src(j)) {
                    prefetch(a.as_ptr(), a.len());
                }
                let node = &self.nodes[i as usize];
                match (node.feature, node.resident) {
                    (Some(_), _) => b.x.extend_from_slice(row_src(i).expect("has a row")),
                    // Not gathered here: a zero row, named in `resident` (the
                    // device has it) or in `missing` (lookahead fills it).
                    (None, Some(_)) => b.x.resize(b.x.len() + rb, 0),
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
        if let Some(lab) = &self.labels {
            b.y = b.n_id.iter().map(|&o| self.label_of(lab, o)).collect();
        }
        if self.want_degrees {
            b.deg.reserve(order.len());
            for &i in &order {
                let node = &self.nodes[i as usize];
                if !node.slot_seen {
                    return Err(SampleError::BadRequest(format!("internal: no degree for node {}", node.v)));
                }
                b.deg.push(node.degree as i64);
            }
        }
        Ok(b)
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
    if !checked.contains_key(&page) {
        check_overflow_page(layout, file, page, data)?;
        checked.insert(page, ());
    }
    Ok(())
}

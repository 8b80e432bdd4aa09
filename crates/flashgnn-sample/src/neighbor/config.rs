//! Sampler configuration and opening: [`SamplerConfig`], the fixed engine
//! memory of a producer (buffer pool and per-batch page cache caps, which
//! bound a batch's memory beside its `depth` buffers and the sampled
//! subgraph), and [`NeighborSampler::open`], which turns a config into a read
//! engine and loads the per-node arrays. A cross-batch cache or resident set
//! built for another dataset (or generation) holds other bytes under the same
//! keys: it is dropped here, and the sampler runs without it.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use flashgnn_format::layout::FeaturePlacement;
use flashgnn_format::manifest::{FEATURES_FILE, GRAPH_FILE, OVERFLOW_FILE};
use flashgnn_format::Dtype;
use flashgnn_io::aligned::BufPool;
use flashgnn_io::engine::{open_engine, EngineConfig, EngineKind, IoCounters, ReadEngine};
use flashgnn_store::Dataset;
use rustc_hash::FxHashMap as HashMap;

use super::{Batch, NeighborSampler, Typed, F_FEATURES, F_GRAPH, F_OVERFLOW};
use crate::cache::{self, PageCache};
use crate::telemetry::Telemetry;
use crate::{Result, SampleError};

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

/// `NeighborSampler`s opened in this process so far (each holds a buffer
/// pool, a per-batch page cache and an engine): what a loader's "one
/// sampler" is checked against.
static OPENED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many `NeighborSampler`s this process has opened.
pub fn samplers_opened() -> u64 {
    OPENED.load(std::sync::atomic::Ordering::Relaxed)
}

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
    /// get zeros in `x` and their positions in [`Batch::missing`](super::Batch::missing). This is
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
    /// The float dtype `Batch::x` is handed out in (None: as stored). Rows
    /// are converted as they are copied into the batch, on the producer
    /// thread, never by the consumer.
    pub x_dtype: Option<Dtype>,
    /// Typed datasets: fanouts per hop and edge type (`[hop][edge type]`,
    /// edge types in the dataset's order, -1 = all), as many hops as the
    /// fanouts given to `open`. None: `fanouts[h]` for every edge type. A
    /// homogeneous dataset takes one edge type per hop.
    pub rel_fanouts: Option<Vec<Vec<i32>>>,
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
            x_dtype: None,
            rel_fanouts: None,
        }
    }
}

impl NeighborSampler {
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
        let x_dtype = match cfg.x_dtype {
            Some(d) if !d.is_float() => {
                return Err(SampleError::Config(format!("x dtype {}: expected a float dtype", d.name())))
            }
            Some(d) => d,
            None => layout.feature_dtype,
        };
        let id = cache::DatasetId::of(ds)?;
        // A cache built on another dataset (or generation) holds other bytes
        // under the same keys: run without it.
        let shared = cfg.cache.clone().filter(|c| *c.dataset() == id);
        let mut names: Vec<String> = vec![GRAPH_FILE.into(), OVERFLOW_FILE.into()];
        let types = ds.manifest().types.as_ref();
        let mut fanouts = fanouts.to_vec();
        let mut typed = match types {
            Some(table) => {
                // Paths a typed batch does not take yet: refused by name.
                let refuse = |what: &str| {
                    Err(SampleError::Config(format!(
                        "{what} is not supported on a typed (heterogeneous) dataset yet ({})",
                        ds.root().display()
                    )))
                };
                if cfg.resident.is_some() {
                    return refuse("a resident (device) feature tier");
                }
                if cfg.features && cfg.free_features_only {
                    return refuse("free_features_only (the lookahead's structure stage)");
                }
                if cfg.degrees {
                    return refuse("degrees");
                }
                let (t, files) =
                    Typed::open(ds, table, &fanouts, cfg.rel_fanouts.as_deref(), cfg.labels, names.len() as u16)?;
                names.extend(files);
                Some(Arc::new(t))
            }
            None => {
                if let Some(r) = &cfg.rel_fanouts {
                    // The one-type case: one edge type per hop.
                    if r.len() != fanouts.len() || r.iter().any(|f| f.len() != 1) {
                        return Err(SampleError::Config(format!(
                            "rel_fanouts {r:?}: a homogeneous dataset has one edge type; expected {} hops of one fanout",
                            fanouts.len()
                        )));
                    }
                    fanouts = r.iter().map(|f| f[0]).collect();
                }
                if layout.placement == FeaturePlacement::Separate {
                    names.push(FEATURES_FILE.into());
                }
                None
            }
        };
        // Striped datasets (stripes.json) read their parts through a
        // translating engine; plain ones go straight to the device engine.
        let (physical, maps) =
            flashgnn_io::stripe::physical_files(ds.root(), &names.iter().map(String::as_str).collect::<Vec<_>>())?;
        let io = open_engine(cfg.engine, &physical, &cfg.io)?;
        let io: Box<dyn ReadEngine> = if maps.iter().any(|m| m.is_some()) {
            let logical = names.iter().map(|n| ds.root().join(n)).collect();
            Box::new(flashgnn_io::stripe::StripeEngine::new(io, maps, logical))
        } else {
            io
        };
        let mut mem = [F_GRAPH, F_OVERFLOW, F_FEATURES].map(|f| io.resident(f));
        if let Some(t) = typed.as_mut() {
            // File 2 is a type's row table, not features.fg; each type's
            // table is its own engine file.
            mem[F_FEATURES as usize] = None;
            let t = Arc::get_mut(t).expect("not shared yet");
            for (ty, r) in t.rows.iter_mut().enumerate() {
                if let Some(r) = r.as_mut() {
                    r.mem = io.resident(r.file);
                    r.check_resident(ty, t.offsets[ty], &t.table)?;
                }
            }
        }
        // Separate feature rows are checked against feature_crc.npy (4 B/node).
        let feature_crcs =
            if typed.is_none() && layout.placement == FeaturePlacement::Separate && layout.row_bytes() > 0 {
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
        OPENED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut s = NeighborSampler {
            x_dtype,
            x_dtype_set: cfg.x_dtype.is_some(),
            batch_page_cache_bytes: cfg.batch_page_cache_bytes,
            placement: layout.placement,
            layout,
            fanouts,
            io,
            pool: BufPool::new(BUF_POOL_BYTES),
            files: [ds.file(GRAPH_FILE), ds.file(OVERFLOW_FILE), ds.file(FEATURES_FILE)],
            trace_files: if typed.is_some() {
                names.clone()
            } else {
                vec![GRAPH_FILE.into(), OVERFLOW_FILE.into(), FEATURES_FILE.into()]
            },
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
            page_cache_max: page_cache_max(cfg.batch_page_cache_bytes, shared.is_some()),
            ready: VecDeque::new(),
            io_wait: 0.0,
            io_waits: 0,
            page_hits: 0,
            cache_hits: [0; 2],
            cache_misses: 0,
            redrawn: false,
            mixed_seed_types: false,
            gather_features: cfg.features,
            free_features_only: cfg.features && cfg.free_features_only,
            want_degrees: cfg.degrees,
            static_checked: shared.as_ref().is_some_and(|c| c.static_checked()),
            static_packed: shared.as_ref().is_some_and(|c| c.static_overflow_packed()),
            static_codec: shared.as_ref().and_then(|c| c.static_row_codec()),
            hot_codec: None,
            static_held_slots: None,
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
            typed,
        };
        s.static_held_slots = s.held_slots_of(s.cache.as_deref());
        Ok(s)
    }
}

/// The per-batch page cache's cap: smaller beside a shared cache, which
/// keeps the pages that are read again.
fn page_cache_max(configured: usize, shared: bool) -> usize {
    if shared {
        configured.min(BATCH_CACHE_WITH_SHARED)
    } else {
        configured
    }
}

/// What [`NeighborSampler::gather_rows`] carries besides the ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gather {
    /// Feature rows (`Batch::x`), when the sampler gathers features at all.
    pub features: bool,
    /// Labels (`Batch::y`), when the sampler loads them.
    pub labels: bool,
    /// Whole-graph degrees (`Batch::deg`).
    pub degrees: bool,
}

impl NeighborSampler {
    /// Attach the cross-batch cache after opening (None: detach): a loader
    /// measures its batches and chooses the cache's hot set with this same
    /// sampler before the cache exists. As at open, a cache of another
    /// dataset is not used.
    pub fn set_cache(&mut self, cache: Option<Arc<PageCache>>) {
        let shared = cache.filter(|c| c.dataset() == self.dataset_id());
        self.page_cache_max = page_cache_max(self.batch_page_cache_bytes, shared.is_some());
        self.static_checked = shared.as_ref().is_some_and(|c| c.static_checked());
        self.static_packed = shared.as_ref().is_some_and(|c| c.static_overflow_packed());
        self.static_codec = shared.as_ref().and_then(|c| c.static_row_codec());
        self.static_held_slots = self.held_slots_of(shared.as_deref());
        self.cache = shared;
    }

    /// The rows of `ids` (original ids, no repeats), in order, as a batch
    /// with no edges: what a fanout-`[0]` sampler returns, through this
    /// sampler's engine and cache, whatever its own fanouts and options —
    /// the lookahead's fill reads, a feature store's reads, a pre-sample's
    /// degrees. `what` says which of features, labels and degrees it carries.
    ///
    /// On a typed dataset the ids are of one node type and the batch is a
    /// zero-hop typed batch ([`Batch::typed`]): that type's rows from its
    /// `t<i>.features.fg` and its labels, no slot read (a feature store's
    /// per-type reads); whole-graph degrees are refused there.
    pub fn gather_rows(&mut self, ids: &[i64], what: Gather) -> Result<Batch> {
        if what.degrees {
            self.refuse_typed("gathering degrees by id (pre-sample degrees)")?;
        }
        // A typed sampler opens every type's row table whatever its own
        // `features` (a structure-only sampler is the typed lookahead's
        // structure stage, and its fill gathers rows through it).
        let features = what.features && (self.gather_features || self.typed.is_some());
        // Typed rows live in their own files: zero hops read no slot.
        let hops = if self.typed.is_some() { Vec::new() } else { vec![0] };
        let saved = (
            std::mem::replace(&mut self.fanouts, hops),
            if what.labels { self.labels.clone() } else { self.labels.take() },
            std::mem::replace(&mut self.free_features_only, false),
            std::mem::replace(&mut self.want_degrees, what.degrees),
            std::mem::replace(&mut self.gather_features, features),
        );
        let r = self.sample(ids, 0);
        (self.fanouts, self.labels, self.free_features_only, self.want_degrees, self.gather_features) = saved;
        r
    }
}

//! The cross-batch DRAM cache: pages (and separate feature rows) kept between
//! mini-batches under one byte budget, shared by every producer of a loader.
//!
//! Two parts, as GIDS and Ginex taught:
//!
//! - a **static hot set**, chosen before the first batch (by degree, or by
//!   access counts of a short pre-sampling pass — see [`crate::hot`]), read
//!   once and never evicted; lookups need no lock;
//! - a **dynamic part** under a scan-resistant policy ([`Policy`]): S3-FIFO
//!   (a small probationary FIFO, a main FIFO with reinsertion and a ghost
//!   list) or CLOCK (one FIFO with a reference bit). Both were measured on the
//!   out-of-core benchmark (docs/benchmarks.md); S3-FIFO is the default.
//!
//! The cache is an optimisation only: a budget of 0 stores nothing and every
//! request goes to the device, with identical batches. It never blocks on
//! I/O (entries are inserted after a read completes, lookups are a hash probe
//! under a short lock), so an undersized cache cannot deadlock — the failure
//! mode GraphBolt users hit (#7641).
//!
//! Entries hold bytes that already passed the format's checks when they were
//! first read; a hit is decoded by the same checked decoders as a read.
//!
//! Keys are (file, offset) within one dataset, so a cache belongs to the
//! dataset it was built for: its [`DatasetId`] (canonical directory, the
//! format-v2 dataset id — random per build — and the manifest's CRC32C of
//! `graph.fg`), fixed at construction. A sampler opened
//! on any other dataset — another generation of a mutable store
//! (`mut/gen-N`), or the same directory rebuilt — runs without it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap as HashMap;

/// Bookkeeping bytes charged per entry on top of its data (hash slot, queue
/// slot, `Arc` header, allocator rounding), so the budget bounds real memory.
pub const ENTRY_OVERHEAD: usize = 96;

/// Eviction policy of the dynamic part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// S3-FIFO (Yang et al., SOSP'23): new entries enter a small FIFO (10 %
    /// of the bytes); only those hit again there move to the main FIFO, so a
    /// one-time scan never displaces the working set.
    S3Fifo,
    /// CLOCK: one FIFO, a hit sets a reference bit, eviction gives referenced
    /// entries a second pass.
    Clock,
}

impl Policy {
    pub fn parse(s: &str) -> Option<Policy> {
        match s {
            "s3fifo" | "s3-fifo" => Some(Policy::S3Fifo),
            "clock" => Some(Policy::Clock),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Policy::S3Fifo => "s3fifo",
            Policy::Clock => "clock",
        }
    }
}

/// Which dataset a cache's keys refer to: the canonical dataset directory,
/// the manifest's `dataset_id` (format version 2: random per build, so a
/// rebuild of the same input into the same directory is another dataset;
/// None for version 1) and the manifest's CRC32C of `graph.fg` (None when
/// the manifest has no entry for it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatasetId {
    pub root: std::path::PathBuf,
    pub dataset_id: Option<u64>,
    pub graph_crc32c: Option<u32>,
}

impl DatasetId {
    /// The identity of an open dataset (its directory canonicalised).
    pub fn of(ds: &flashgnn_store::Dataset) -> crate::Result<DatasetId> {
        let root = std::fs::canonicalize(ds.root())
            .map_err(|e| flashgnn_io::IoError::new("resolving the dataset directory", ds.root(), None, e))?;
        let graph_crc32c = ds.manifest().files.get(flashgnn_format::manifest::GRAPH_FILE).map(|f| f.crc32c);
        Ok(DatasetId { root, dataset_id: ds.manifest().dataset_id, graph_crc32c })
    }
    /// The identity of the dataset at `path` (opens it to read the manifest).
    pub fn of_path(path: &std::path::Path) -> crate::Result<DatasetId> {
        DatasetId::of(&flashgnn_store::Dataset::open(path)?)
    }
}

/// Key of a cached extent: file index in the top byte, byte offset below.
pub fn key(file: u16, offset: u64) -> u64 {
    (file as u64) << 56 | offset
}

/// Cumulative counters (relaxed atomics: statistics only).
#[derive(Debug, Default)]
pub struct CacheStats {
    pub static_hits: AtomicU64,
    pub dynamic_hits: AtomicU64,
    pub misses: AtomicU64,
    pub inserts: AtomicU64,
    pub evictions: AtomicU64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    Static,
    Dynamic,
}

struct Entry {
    data: Arc<[u8]>,
    freq: u8,
}

struct Dynamic {
    policy: Policy,
    budget: usize,
    map: HashMap<u64, Entry>,
    small: VecDeque<u64>,
    main: VecDeque<u64>,
    small_bytes: usize,
    main_bytes: usize,
    /// S3-FIFO ghosts: keys evicted from `small` recently (no data), with a
    /// sequence number so a stale queue entry does not drop a newer ghost.
    ghost: HashMap<u64, u64>,
    ghost_queue: VecDeque<(u64, u64)>,
    ghost_seq: u64,
}

fn cost(len: usize) -> usize {
    len + ENTRY_OVERHEAD
}

impl Dynamic {
    fn held(&self) -> usize {
        self.small_bytes + self.main_bytes
    }

    fn get(&mut self, k: u64) -> Option<Arc<[u8]>> {
        let e = self.map.get_mut(&k)?;
        let cap = if self.policy == Policy::Clock { 1 } else { 3 };
        e.freq = (e.freq + 1).min(cap);
        Some(e.data.clone())
    }

    /// Insert `k` (kept if already there); returns the entries evicted.
    /// The caller has checked that the entry fits the budget at all.
    fn insert(&mut self, k: u64, data: Arc<[u8]>) -> u64 {
        let c = cost(data.len());
        if self.map.contains_key(&k) {
            return 0;
        }
        let mut evicted = 0;
        while self.held() + c > self.budget {
            let gone = match self.policy {
                Policy::Clock => self.evict_main(),
                Policy::S3Fifo => {
                    if self.small_bytes > self.budget / 10 || self.main.is_empty() {
                        self.evict_small()
                    } else {
                        self.evict_main()
                    }
                }
            };
            if !gone {
                break;
            }
            evicted += 1;
        }
        if self.held() + c > self.budget {
            return evicted;
        }
        let to_main = self.policy == Policy::Clock || self.ghost.remove(&k).is_some();
        self.map.insert(k, Entry { data, freq: 0 });
        if to_main {
            self.main.push_back(k);
            self.main_bytes += c;
        } else {
            self.small.push_back(k);
            self.small_bytes += c;
        }
        evicted
    }

    /// S3-FIFO small queue: an entry hit while probationary moves to main;
    /// the rest leave a ghost. Returns whether anything was evicted.
    fn evict_small(&mut self) -> bool {
        while let Some(k) = self.small.pop_front() {
            let e = self.map.get_mut(&k).expect("queued key is mapped");
            let c = cost(e.data.len());
            self.small_bytes -= c;
            if e.freq > 0 {
                e.freq = 0;
                self.main.push_back(k);
                self.main_bytes += c;
                if self.held() > self.budget && self.evict_main() {
                    return true;
                }
                continue;
            }
            self.map.remove(&k);
            self.ghost_seq += 1;
            self.ghost.insert(k, self.ghost_seq);
            self.ghost_queue.push_back((k, self.ghost_seq));
            // Ghosts are bounded by the entries in main (16 B each).
            while self.ghost_queue.len() > self.main.len().max(64) {
                let (g, seq) = self.ghost_queue.pop_front().expect("non-empty");
                if self.ghost.get(&g) == Some(&seq) {
                    self.ghost.remove(&g);
                }
            }
            return true;
        }
        self.evict_main()
    }

    /// Main FIFO with reinsertion (CLOCK's second chance, S3-FIFO's main).
    fn evict_main(&mut self) -> bool {
        while let Some(k) = self.main.pop_front() {
            let e = self.map.get_mut(&k).expect("queued key is mapped");
            if e.freq > 0 {
                e.freq -= 1;
                self.main.push_back(k);
                continue;
            }
            self.main_bytes -= cost(e.data.len());
            self.map.remove(&k);
            return true;
        }
        false
    }
}

/// The shared cache. Create once, wrap in an `Arc`, pass to every sampler
/// through [`crate::SamplerConfig::cache`].
pub struct PageCache {
    id: DatasetId,
    budget: usize,
    /// The dynamic part's policy (fixed at construction; `Dynamic` holds a
    /// copy for its own decisions), readable without the lock.
    policy: Policy,
    statics: HashMap<u64, Arc<[u8]>>,
    static_bytes: usize,
    dynamic: Mutex<Dynamic>,
    pub stats: CacheStats,
}

impl std::fmt::Debug for PageCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageCache")
            .field("dataset", &self.id)
            .field("budget", &self.budget)
            .field("static_entries", &self.statics.len())
            .field("static_bytes", &self.static_bytes)
            .finish()
    }
}

impl PageCache {
    /// A cache of `budget` bytes for the dataset `id`: `statics` (already
    /// read from that dataset; trimmed to the budget in the order given,
    /// hottest first) plus a dynamic part under `policy` with whatever the
    /// static set leaves.
    pub fn new(id: DatasetId, budget: usize, policy: Policy, statics: Vec<(u64, Arc<[u8]>)>) -> PageCache {
        let mut map = HashMap::default();
        let mut static_bytes = 0;
        for (k, d) in statics {
            let c = cost(d.len());
            if static_bytes + c > budget {
                break;
            }
            static_bytes += c;
            map.insert(k, d);
        }
        PageCache {
            id,
            budget,
            policy,
            statics: map,
            static_bytes,
            dynamic: Mutex::new(Dynamic {
                policy,
                budget: budget - static_bytes,
                map: HashMap::default(),
                small: VecDeque::new(),
                main: VecDeque::new(),
                small_bytes: 0,
                main_bytes: 0,
                ghost: HashMap::default(),
                ghost_queue: VecDeque::new(),
                ghost_seq: 0,
            }),
            stats: CacheStats::default(),
        }
    }

    /// The dataset this cache's keys refer to.
    pub fn dataset(&self) -> &DatasetId {
        &self.id
    }
    pub fn budget(&self) -> usize {
        self.budget
    }
    pub fn static_bytes(&self) -> usize {
        self.static_bytes
    }
    pub fn static_entries(&self) -> usize {
        self.statics.len()
    }
    pub fn dynamic_bytes(&self) -> usize {
        self.lock().held()
    }
    pub fn policy(&self) -> Policy {
        self.policy
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Dynamic> {
        // A panic while holding the lock cannot leave the queues inconsistent
        // in a way that matters for correctness (entries are immutable bytes),
        // so a poisoned lock is still usable.
        self.dynamic.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, k: u64) -> Option<(Arc<[u8]>, Tier)> {
        if let Some(d) = self.statics.get(&k) {
            self.stats.static_hits.fetch_add(1, Ordering::Relaxed);
            return Some((d.clone(), Tier::Static));
        }
        let got = self.lock().get(k);
        match got {
            Some(d) => {
                self.stats.dynamic_hits.fetch_add(1, Ordering::Relaxed);
                Some((d, Tier::Dynamic))
            }
            None => {
                self.stats.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Offer bytes just read (and checked) for `k`. An entry larger than the
    /// dynamic part (any entry, at budget 0) is refused without the lock.
    pub fn insert(&self, k: u64, data: Arc<[u8]>) {
        if self.statics.contains_key(&k) || cost(data.len()) > self.budget - self.static_bytes {
            return;
        }
        let evicted = self.lock().insert(k, data);
        self.stats.inserts.fetch_add(1, Ordering::Relaxed);
        self.stats.evictions.fetch_add(evicted, Ordering::Relaxed);
    }

    /// Bytes held (static + dynamic, with bookkeeping); never above the budget.
    pub fn held_bytes(&self) -> usize {
        self.static_bytes + self.dynamic_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> DatasetId {
        DatasetId { root: "/unit-test".into(), dataset_id: None, graph_crc32c: None }
    }

    fn page(b: u8) -> Arc<[u8]> {
        Arc::from(vec![b; 4096])
    }

    #[test]
    fn zero_budget_stores_nothing() {
        let c = PageCache::new(id(), 0, Policy::S3Fifo, vec![(1, page(1))]);
        c.insert(2, page(2));
        assert!(c.get(1).is_none() && c.get(2).is_none());
        assert_eq!(c.held_bytes(), 0);
    }

    #[test]
    fn budget_is_never_exceeded_and_hits_return_the_bytes() {
        for policy in [Policy::S3Fifo, Policy::Clock] {
            let budget = 10 * cost(4096);
            let c = PageCache::new(id(), budget, policy, vec![(u64::MAX, page(9))]);
            for i in 0..1000u64 {
                c.insert(i, page(i as u8));
                assert!(c.held_bytes() <= budget, "{policy:?} over budget at {i}");
                if let Some((d, _)) = c.get(i) {
                    assert_eq!(d[0], i as u8);
                }
            }
            let (d, tier) = c.get(u64::MAX).expect("static entry stays");
            assert_eq!((d[0], tier), (9, Tier::Static));
        }
    }

    #[test]
    fn s3fifo_resists_a_scan_that_clock_does_not() {
        // A hot set of 8 pages accessed repeatedly, interleaved with a long
        // one-time scan: S3-FIFO keeps the hot pages, CLOCK loses some.
        let hits = |policy| {
            let c = PageCache::new(id(), 16 * cost(4096), policy, Vec::new());
            let mut hot_hits = 0;
            let mut scan = 1000u64;
            for round in 0..200 {
                for h in 0..8u64 {
                    if c.get(h).is_some() {
                        hot_hits += 1;
                    } else {
                        c.insert(h, page(h as u8));
                    }
                }
                for _ in 0..(if round % 2 == 0 { 24 } else { 4 }) {
                    scan += 1;
                    if c.get(scan).is_none() {
                        c.insert(scan, page(0));
                    }
                }
            }
            hot_hits
        };
        let (s3, clock) = (hits(Policy::S3Fifo), hits(Policy::Clock));
        assert!(s3 > 1500, "S3-FIFO kept the hot set: {s3} hits of 1600");
        assert!(s3 > clock, "S3-FIFO {s3} vs CLOCK {clock}");
    }
}

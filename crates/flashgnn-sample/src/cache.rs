//! The cross-batch DRAM cache: pages (and separate feature rows) kept between
//! mini-batches under one byte budget, shared by every producer of a loader.
//!
//! Two parts, as GIDS and Ginex taught:
//!
//! - a **static hot set**, chosen before the first batch (by degree, or by
//!   access counts of a short pre-sampling pass — see [`crate::hot`]), read
//!   once and never evicted ([`StaticSet`]): one contiguous arena, addressed
//!   by a dense node id → extent table for slots (no hash on the hot path)
//!   and a hash map for the other extents. A hit is a borrow of the arena —
//!   no lock, no `Arc`, no shared counter touched (hits are counted by each
//!   sampler and added to [`CacheStats`] once per batch, see
//!   [`PageCache::count`]), so producers read it without touching a shared
//!   cache line;
//! - a **dynamic part** under a scan-resistant policy ([`Policy`]): S3-FIFO
//!   (a small probationary FIFO, a main FIFO with reinsertion and a ghost
//!   list) or CLOCK (one FIFO with a reference bit). Both were measured on the
//!   out-of-core benchmark (docs/benchmarks.md); S3-FIFO is the default.
//!
//! The cache is an optimisation only: a budget of 0 stores nothing and every
//! request goes to the device, with identical batches. It never blocks on
//! I/O (entries are inserted after a read completes, dynamic lookups are a
//! hash probe under a short lock), so an undersized cache cannot deadlock —
//! the failure mode GraphBolt users have reported.
//!
//! Why the dynamic part keeps its mutex on hits: a lock-free read path (a
//! fixed array of copy-on-write buckets loaded with `arc-swap`, frequency
//! bumps as relaxed atomics, the mutex for inserts and evictions only) was
//! built and measured against this one on 200 k random 600 B entries
//! (120 MB, well past the CPU caches): a hit cost 144 ns against 113 ns on
//! one thread and 335 against 219 ns per thread on two, an insert that
//! evicts 626 against 147 ns, and `flashgnn bench` on data/demo (all-dynamic
//! cache, same run) gave 2.5–2.7 µs per hit against 1.6–1.7. A hit is
//! dominated by its DRAM misses (hash control bytes, slot, data); the
//! uncontended lock costs less than the extra pointer hops a lock-free index
//! adds. So the lock stays, and is kept uncontended instead: a dynamic part
//! of 64 MiB or more is split into 16 shards by key, each with its own lock,
//! queues and share of the budget ([`dynamic_shards`]), and its insert and
//! eviction counts are kept under those locks, so producers share no lock
//! or counter on any path but by the chance of one key's shard.
//!
//! Entries hold bytes that already passed the format's checks when they were
//! first read; a hit is decoded by the same checked decoders as a read,
//! except one: a slot or overflow page of a static set the sampler loaded
//! itself skips its CRC32C, computed when that set was read and never
//! written since ([`StaticSet::checked`]); every id and address in it is
//! still bound-checked. Those CRCs were a fifth of a cached batch's CPU on
//! data/ooc (docs/benchmarks.md).
//!
//! Such a set holds a homogeneous dataset's slots re-encoded, too
//! ([`HeldSlots`]: no CRC, no original id, no padding, inline ids at the
//! bits the node count needs), decoded on a hit into the view the stored
//! slot gives; its dense slot table then takes a `u32` a node while the
//! arena fits the narrow form (`Dense`: 256 MiB at 14 lengths).
//! With a tenth of data/ooc cached (140 MiB, int4 rows, hot set by
//! touches) the batches are device-bound at ~75 K reads/s, so what counts is
//! the extents the budget buys: 5,547 reads a batch with slots as stored,
//! 4,299 held, 3,854 with the narrow table too, 3,634 once a set whose
//! index does not fit loses only the entries it must (`Statics::new`; same
//! run: 9.3-12.7 -> 16.9-17.0 batches/s), at no CPU cost where everything
//! hits (a third cached, int8 rows: 23.4-25.7 ms a batch as stored,
//! 23.1-25.4 held).
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

/// Bookkeeping bytes charged per dynamic entry on top of its data (hash
/// slot, queue slot, `Arc` header, allocator rounding), so the budget bounds
/// real memory. Static entries are charged their index instead
/// ([`STATIC_ENTRY_OVERHEAD`]).
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

/// The file index and byte offset a [`key`] was made from.
#[inline]
pub(crate) fn unkey(k: u64) -> (u16, u64) {
    ((k >> 56) as u16, k & ((1 << 56) - 1))
}

/// Cumulative counters (relaxed atomics: statistics only).
#[derive(Debug, Default)]
pub struct CacheStats {
    pub static_hits: AtomicU64,
    pub dynamic_hits: AtomicU64,
    pub misses: AtomicU64,
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
    /// Counted under this shard's lock, summed on demand ([`PageCache::inserts`]):
    /// no counter shared by producers on the miss path either.
    inserts: u64,
    evictions: u64,
}

fn cost(len: usize) -> usize {
    len + ENTRY_OVERHEAD
}

impl Dynamic {
    fn new(policy: Policy, budget: usize) -> Dynamic {
        Dynamic {
            policy,
            budget,
            map: HashMap::default(),
            small: VecDeque::new(),
            main: VecDeque::new(),
            small_bytes: 0,
            main_bytes: 0,
            ghost: HashMap::default(),
            ghost_queue: VecDeque::new(),
            ghost_seq: 0,
            inserts: 0,
            evictions: 0,
        }
    }

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

/// Packed location of a static extent in the arena: byte offset in the low
/// 40 bits (arenas up to 1 TiB), length in the high 24 (extents up to
/// 16 MiB: slots and pages are far smaller). 0 = absent (no extent is empty).
fn pack(off: usize, len: usize) -> u64 {
    debug_assert!(off < 1 << 40 && len > 0 && len < 1 << 24);
    (len as u64) << 40 | off as u64
}

fn unpack(p: u64) -> (usize, usize) {
    ((p & ((1 << 40) - 1)) as usize, (p >> 40) as usize)
}

/// A node-keyed dense table (slots, typed rows): node id → where its entry
/// lies in the arena, one memory access per hit.
///
/// Wide, a packed `u64` ([`pack`]) per node; or narrow, a `u32` per node
/// when the table's entries come in few lengths (held slots: one per degree
/// up to the inline capacity, and one for every spilled slot) and the arena
/// is small enough: `(offset + 1) << bits | class`, `class` an index into
/// the table's lengths. On data/ooc (2.1 M nodes) the slot table is 8 MiB
/// narrow against 16 wide: 6 % of a 140 MiB budget, which buys hot slots.
/// 0 = absent either way.
enum Dense {
    Wide(Vec<u64>),
    Narrow { table: Vec<u32>, lens: Vec<u32>, bits: u32 },
}

/// Distinct lengths a narrow table's class takes at most.
const NARROW_LENGTHS_MAX: usize = 64;

/// Class bits of a narrow table of entries in `lengths` distinct lengths
/// whose bytes end by `arena_end`; None when it must be wide.
fn narrow_bits(arena_end: usize, lengths: usize) -> Option<u32> {
    if lengths > NARROW_LENGTHS_MAX {
        return None;
    }
    let bits = usize::BITS - lengths.saturating_sub(1).leading_zeros();
    let fits = (arena_end as u64).saturating_add(1) <= u32::MAX as u64 >> bits;
    fits.then_some(bits)
}

/// The distinct values of `lengths`, ascending (a narrow table's classes).
fn distinct(lengths: impl Iterator<Item = u32>) -> Vec<u32> {
    let mut lens: Vec<u32> = lengths.collect();
    lens.sort_unstable();
    lens.dedup();
    lens
}

impl Dense {
    /// A table for node ids `< nodes` of entries of `lengths` whose bytes
    /// end by `arena_end`, zeroed (all absent); None (nothing allocated)
    /// when it would take more than `max_bytes` ([`Dense::bytes`]).
    fn new(nodes: usize, lengths: impl Iterator<Item = u32>, arena_end: usize, max_bytes: usize) -> Option<Dense> {
        let lens = distinct(lengths);
        let bits = narrow_bits(arena_end, lens.len());
        let bytes = nodes.saturating_mul(if bits.is_some() { 4 } else { 8 });
        if bytes.saturating_add(bits.map_or(0, |_| 4 * lens.len())) > max_bytes {
            return None;
        }
        Some(match bits {
            Some(bits) => {
                let mut table = vec![0u32; nodes];
                flashgnn_io::mapped::advise_huge(&mut table);
                Dense::Narrow { table, lens, bits }
            }
            None => {
                let mut table = vec![0u64; nodes];
                flashgnn_io::mapped::advise_huge(&mut table);
                Dense::Wide(table)
            }
        })
    }

    /// Bytes per node of a table over `lengths` distinct lengths, its
    /// entries ending by `arena_end`.
    fn bytes_per_node(arena_end: usize, lengths: usize) -> usize {
        if narrow_bits(arena_end, lengths).is_some() {
            4
        } else {
            8
        }
    }

    /// Bytes the table holds.
    fn bytes(&self) -> usize {
        match self {
            Dense::Wide(t) => t.len() * 8,
            Dense::Narrow { table, lens, .. } => table.len() * 4 + lens.len() * 4,
        }
    }

    /// Record `id`'s entry at `off..off + len` (`len` one of the lengths
    /// the table was made for).
    fn set(&mut self, id: usize, off: usize, len: u32) {
        match self {
            Dense::Wide(t) => t[id] = pack(off, len as usize),
            Dense::Narrow { table, lens, bits } => {
                let class = lens.binary_search(&len).expect("a length the table was made for");
                table[id] = ((off as u32 + 1) << *bits) | class as u32;
            }
        }
    }

    /// Where `id`'s entry lies (None: absent, or beyond the table).
    #[inline]
    fn get(&self, id: usize) -> Option<(usize, usize)> {
        match self {
            Dense::Wide(t) => Some(*t.get(id)?).filter(|&p| p != 0).map(unpack),
            Dense::Narrow { table, lens, bits } => {
                let e = *table.get(id)?;
                if e == 0 {
                    return None;
                }
                let len = *lens.get((e & ((1 << *bits) - 1)) as usize)?;
                Some((((e >> *bits) as usize).checked_sub(1)?, len as usize))
            }
        }
    }

    /// Hint the CPU to fetch `id`'s table entry.
    #[inline]
    fn prefetch(&self, id: usize) {
        let entry = match self {
            Dense::Wide(t) => t.get(id).map(|e| e as *const u64 as *const u8),
            Dense::Narrow { table, .. } => table.get(id).map(|e| e as *const u32 as *const u8),
        };
        if let Some(p) = entry {
            crate::neighbor::prefetch(p, 4);
        }
    }
}

/// Index bytes of a static hash map of `n` entries: hashbrown's
/// power-of-two bucket count at 7/8 load, 16 B (key, packed extent) plus a
/// control byte each.
fn hash_bytes(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        (n * 8 / 7 + 1).next_power_of_two() * 17
    }
}

/// What choosing a static hot set charges per entry on top of its bytes
/// ([`crate::hot`]), an estimate of the index: a wide dense table costs 8 B
/// per node up to the highest cached id — 24 B per entry when a third of the
/// nodes are hot. The index actually built is charged exactly when the cache
/// is made ([`PageCache::new`] trims the set until bytes + index fit), so the
/// budget stays a bound on memory either way. (Against [`ENTRY_OVERHEAD`]'s
/// 96 B for a dynamic entry — hash slot, queue slot, `Arc` header — this
/// fits ~12 % more 600 B slots in the same bytes.) A narrow table (`Dense`)
/// costs half: [`static_entry_overhead`].
pub const STATIC_ENTRY_OVERHEAD: usize = 24;

/// [`STATIC_ENTRY_OVERHEAD`] for a static set of at most `budget` bytes
/// whose slots come in at most `slot_lengths` lengths: 3 x the dense table's
/// bytes per node.
pub fn static_entry_overhead(budget: usize, slot_lengths: usize) -> usize {
    STATIC_ENTRY_OVERHEAD / 8 * Dense::bytes_per_node(budget, slot_lengths)
}

/// How the sampler's own loader (`hot.rs`) held a static set's entries;
/// the default (everything false or None) for a set assembled any other way
/// (`From<Vec<..>>`, a caller's `put_at`), whose entries are as stored and
/// checked as a read is. Kept by [`Statics`] as built from the set.
#[derive(Clone, Copy, Default)]
struct Holding {
    /// Every slot and overflow page entry passed its checked decoder
    /// (CRC32C included) after the last [`StaticSet::put_at`]: set only by
    /// the sampler's own loader (`hot.rs`). A hit on such a set skips that
    /// CRC (`decode_checked_slot`; no per-batch overflow page check); a set
    /// assembled any other way (`From<Vec<..>>`, a caller's `put_at`) is
    /// checked as a read is.
    checked: bool,
    /// Every overflow page entry is packed (`crate::packed`), not the raw
    /// page.
    packed_overflow: bool,
    /// Typed float32 rows are held encoded by this codec (an entry shorter
    /// or longer than its row is encoded, see `crate::rowcodec`); None: as
    /// stored.
    row_codec: Option<RowCodec>,
    /// Every slot entry is held re-encoded by this ([`HeldSlots`]: no CRC,
    /// no original id, ids at the node count's width); None: as stored.
    held_slots: Option<HeldSlots>,
}

/// The static hot set as built: extents hottest first, their bytes in one
/// arena (no per-entry allocation: 250 k slot entries as separate `Arc`s cost
/// a header, an allocator chunk and a cache miss each on every hit).
#[derive(Clone, Default)]
pub struct StaticSet {
    arena: Vec<u8>,
    /// (key, byte offset in `arena`, length), hottest first.
    entries: Vec<(u64, usize, u32)>,
    /// Set only by the sampler's own loader, cleared by `put_at`.
    holding: Holding,
}

impl StaticSet {
    /// An arena of `capacity` zeroed bytes (untouched pages cost no memory
    /// until written) to be filled with [`StaticSet::put`].
    pub fn with_capacity(capacity: usize) -> StaticSet {
        // Zeroed and untouched (calloc'd pages) until filled: the advice
        // applies before the first write. Served at random (`Statics::get`).
        let mut arena = vec![0; capacity];
        flashgnn_io::mapped::advise_huge(&mut arena);
        StaticSet { arena, entries: Vec::new(), holding: Holding::default() }
    }
    /// Record extent `key` at `off..off + data.len()` of the arena (each
    /// caller-chosen range used once; entries are kept in the order put).
    pub fn put_at(&mut self, key: u64, off: usize, data: &[u8]) {
        self.arena[off..off + data.len()].copy_from_slice(data);
        self.entries.push((key, off, data.len() as u32));
        self.holding = Holding::default();
    }
    /// Every slot and overflow page entry was just checked (see `Holding::checked`);
    /// a later `put_at` clears this again.
    pub(crate) fn mark_checked(&mut self) {
        self.holding.checked = true;
    }
    /// Whether hits on this set's slots and overflow pages may skip their CRC.
    pub fn checked(&self) -> bool {
        self.holding.checked
    }
    /// Every overflow page entry was packed by the loader (see
    /// `Holding::packed_overflow`).
    pub(crate) fn mark_overflow_packed(&mut self) {
        self.holding.packed_overflow = true;
    }
    /// Whether this set's overflow page entries are packed (else raw pages).
    pub fn overflow_packed(&self) -> bool {
        self.holding.packed_overflow
    }
    /// Typed rows were encoded by the loader with `codec` (see `Holding::row_codec`).
    pub(crate) fn mark_row_codec(&mut self, codec: Option<RowCodec>) {
        self.holding.row_codec = codec;
    }
    /// The codec this set's typed rows are held in; None: as stored.
    pub fn row_codec(&self) -> Option<RowCodec> {
        self.holding.row_codec
    }
    /// Every slot entry was held by the loader as `held` (see `Holding::held_slots`).
    pub(crate) fn mark_slots_held(&mut self, held: Option<HeldSlots>) {
        self.holding.held_slots = held;
    }
    /// How this set's slots are held; None: as stored.
    pub fn slots_held(&self) -> Option<HeldSlots> {
        self.holding.held_slots
    }
    /// Order entries by arena offset: when filled in any order at offsets
    /// laid out hottest first, this restores hottest first.
    pub fn sort_by_offset(&mut self) {
        self.entries.sort_unstable_by_key(|e| e.1);
    }
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// (key, bytes), hottest first.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &[u8])> + '_ {
        self.entries.iter().map(|&(k, off, len)| (k, &self.arena[off..off + len as usize]))
    }
    /// Entry `i` (hottest first).
    pub fn get(&self, i: usize) -> (u64, &[u8]) {
        let (k, off, len) = self.entries[i];
        (k, &self.arena[off..off + len as usize])
    }
}

impl From<Vec<(u64, Arc<[u8]>)>> for StaticSet {
    fn from(v: Vec<(u64, Arc<[u8]>)>) -> StaticSet {
        let mut s = StaticSet::with_capacity(v.iter().map(|(_, d)| d.len()).sum());
        let mut off = 0;
        for (k, d) in v {
            s.put_at(k, off, &d);
            off += d.len();
        }
        s
    }
}

/// The static part as served: the arena plus its two indexes.
struct Statics {
    arena: Vec<u8>,
    /// How the set this was built from holds its entries.
    holding: Holding,
    /// Slots (`file == neighbor::F_SLOT`, offset = node id) → where each
    /// lies, indexed by node id; used when it costs at most twice a hash map
    /// of the same slots (see `Statics::build`). Charged to the budget exactly.
    slot_dense: Option<Dense>,
    /// The same for typed rows (`file == neighbor::F_TYPE_ROW`, offset =
    /// global node id).
    row_dense: Option<Dense>,
    /// Everything not in a dense table: key → packed extent.
    other: HashMap<u64, u64>,
    entries: usize,
}

impl Statics {
    /// The longest prefix of `set` (hottest first) whose bytes plus the
    /// index built over it fit `budget`; returns it with the bytes charged.
    fn new(set: StaticSet, budget: usize, slot_file: u16) -> (Statics, usize) {
        // The chooser's estimate (`static_entry_overhead`), from the lengths
        // the set's slots come in.
        let lens = distinct(set.entries.iter().filter(|e| unkey(e.0).0 == slot_file).map(|e| e.2));
        let overhead = static_entry_overhead(set.arena.len().min(budget), lens.len());
        let mut keep = 0;
        let mut est = 0;
        for &(_, _, len) in &set.entries {
            if est + len as usize + overhead > budget {
                break;
            }
            est += len as usize + overhead;
            keep += 1;
        }
        loop {
            let (statics, bytes) = Statics::build(&set, keep, slot_file);
            if bytes <= budget || keep == 0 {
                let mut statics = statics;
                let mut arena = set.arena;
                if keep < set.entries.len() {
                    // Dropped entries' bytes stay in the arena's allocation;
                    // pages of a zeroed arena hold memory only once written,
                    // and the set is chosen under this budget, so this is rare.
                    arena.truncate(
                        set.entries[..keep].iter().map(|&(_, off, len)| off + len as usize).max().unwrap_or(0),
                    );
                }
                statics.arena = arena;
                statics.holding = set.holding;
                return (statics, if keep == 0 { 0 } else { bytes });
            }
            // Drop the coldest entries whose bytes cover the excess; the
            // next build usually fits (a hashed index can turn into a larger
            // dense one as the highest id falls: then the loop repeats). (Cutting
            // a 64th at a time left 3.6 MB of a 140 MiB budget unused on
            // data/ooc, a 24th of the set's slots.)
            let mut excess = bytes - budget;
            while keep > 0 && excess > 0 {
                keep -= 1;
                excess = excess.saturating_sub(set.entries[keep].2 as usize);
            }
        }
    }

    /// Indexes over the first `keep` entries (arena left empty); returns them
    /// with the bytes charged: extent bytes plus the index.
    fn build(set: &StaticSet, keep: usize, slot_file: u16) -> (Statics, usize) {
        let kept = &set.entries[..keep];
        let data: usize = kept.iter().map(|e| e.2 as usize).sum();
        // A dense table per node-keyed pseudo file when it costs at most
        // twice what hashing its entries would: one memory access per hit
        // instead of a probe (on a 1 M-node graph with ~200 k hot slots,
        // 8.4 MB against 4.5 MB — 2 % of a 192 MiB budget).
        let end = kept.iter().map(|&(_, off, len)| off + len as usize).max().unwrap_or(0);
        let dense_for = |file: u16| -> Option<Dense> {
            let of = |k: u64| unkey(k).0 == file;
            let n = kept.iter().filter(|e| of(e.0)).count();
            let len = kept.iter().filter(|e| of(e.0)).map(|e| unkey(e.0).1 as usize + 1).max().unwrap_or(0);
            let lengths = kept.iter().filter(|e| of(e.0)).map(|e| e.2);
            Dense::new(len, lengths, end, 2 * hash_bytes(n)).filter(|_| n > 0)
        };
        let (mut slot_dense, mut row_dense) = (dense_for(slot_file), dense_for(ROW_FILE));
        let mut other = HashMap::default();
        for &(k, off, len) in kept {
            let (file, id) = unkey(k);
            match (file, slot_dense.as_mut(), row_dense.as_mut()) {
                (f, Some(t), _) if f == slot_file => t.set(id as usize, off, len),
                (ROW_FILE, _, Some(t)) => t.set(id as usize, off, len),
                _ => {
                    other.insert(k, pack(off, len as usize));
                }
            }
        }
        let tables = [&slot_dense, &row_dense].iter().map(|t| t.as_ref().map_or(0, Dense::bytes)).sum::<usize>();
        let index = tables + hash_bytes(other.len());
        let statics =
            Statics { arena: Vec::new(), holding: Holding::default(), slot_dense, row_dense, other, entries: keep };
        (statics, data + index)
    }

    #[inline]
    fn get(&self, k: u64, slot_file: u16) -> Option<&[u8]> {
        self.extent(k, slot_file).map(|r| &self.arena[r])
    }

    /// Where `k`'s bytes lie in the arena.
    #[inline]
    fn extent(&self, k: u64, slot_file: u16) -> Option<std::ops::Range<usize>> {
        let (file, offset) = unkey(k);
        let (off, len) = match (file, &self.slot_dense, &self.row_dense) {
            (f, Some(t), _) if f == slot_file => t.get(offset as usize)?,
            (ROW_FILE, _, Some(t)) => t.get(offset as usize)?,
            _ => unpack(*self.other.get(&k)?),
        };
        // Within the arena (a narrow table's offset and length are not
        // packed together: never trust their sum).
        Some(off..off.checked_add(len)?).filter(|r| r.end <= self.arena.len())
    }
}

/// Bytes left to the dynamic part once the static set holds `static_bytes`
/// of `budget`: none when under 1/32 of the budget (the slack a static set
/// of the whole budget leaves). A part that small costs every miss a copy, a
/// locked insert and an eviction for next to no hits: on data/ooc, 2.6 MiB
/// beside a 455 MiB static set took 78 k inserts and 74 k evictions for 405
/// hits in 21 batches.
pub fn dynamic_part(budget: usize, static_bytes: usize) -> usize {
    let rest = budget - static_bytes;
    if rest < budget / 32 {
        0
    } else {
        rest
    }
}

/// A shard's lock. A panic while holding it cannot leave the queues
/// inconsistent in a way that matters for correctness (entries are
/// immutable bytes), so a poisoned lock is still usable.
fn lock(d: &Mutex<Dynamic>) -> std::sync::MutexGuard<'_, Dynamic> {
    d.lock().unwrap_or_else(|p| p.into_inner())
}

/// Cache file indices of single slots and of typed rows, the keys the dense tables serve.
use crate::neighbor::{F_SLOT as SLOT_FILE, F_TYPE_ROW as ROW_FILE};
use crate::rowcodec::RowCodec;
use flashgnn_format::slot::held::HeldSlots;

/// The shared cache. Create once, wrap in an `Arc`, pass to every sampler
/// through [`crate::SamplerConfig::cache`].
pub struct PageCache {
    id: DatasetId,
    budget: usize,
    /// The dynamic part's policy (fixed at construction; `Dynamic` holds a
    /// copy for its own decisions), readable without the lock.
    policy: Policy,
    statics: Statics,
    static_bytes: usize,
    /// Bytes of the dynamic part ([`dynamic_part`]); 0: none, no lock taken.
    dynamic_budget: usize,
    /// The dynamic part in shards by key, each under its own lock with an
    /// equal share of the budget ([`dynamic_shards`]): two producers meet on
    /// one lock only when their keys fall in the same shard.
    dynamic: Box<[Mutex<Dynamic>]>,
    /// The largest entry a shard takes (its budget).
    shard_budget: usize,
    pub stats: CacheStats,
}

/// Shards of a dynamic part of `budget` bytes: 16 once each gets at least
/// 4 MiB (a thousand 4 KiB pages, so the split costs the policy little),
/// else one. The policy runs per shard; keys spread evenly by hash, so each
/// shard sees a sample of the whole stream.
pub fn dynamic_shards(budget: usize) -> usize {
    const SHARDS: usize = 16;
    const MIN_SHARD: usize = 4 << 20;
    if budget >= SHARDS * MIN_SHARD {
        SHARDS
    } else {
        1
    }
}

impl std::fmt::Debug for PageCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageCache")
            .field("dataset", &self.id)
            .field("budget", &self.budget)
            .field("static_entries", &self.statics.entries)
            .field("static_dense", &self.statics.slot_dense.is_some())
            .field("static_bytes", &self.static_bytes)
            .finish()
    }
}

impl PageCache {
    /// A cache of `budget` bytes for the dataset `id`: `statics` (already
    /// read from that dataset; trimmed to the budget in the order given,
    /// hottest first) plus a dynamic part under `policy` with whatever the
    /// static set leaves.
    pub fn new(id: DatasetId, budget: usize, policy: Policy, statics: impl Into<StaticSet>) -> PageCache {
        let (statics, static_bytes) = Statics::new(statics.into(), budget, SLOT_FILE);
        let dynamic_budget = dynamic_part(budget, static_bytes);
        let shards = dynamic_shards(dynamic_budget);
        let shard_budget = dynamic_budget / shards;
        PageCache {
            id,
            budget,
            policy,
            statics,
            static_bytes,
            dynamic_budget,
            dynamic: (0..shards).map(|_| Mutex::new(Dynamic::new(policy, shard_budget))).collect(),
            shard_budget,
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
        self.statics.entries
    }
    /// Whether the static set's slots and overflow pages were checked when
    /// they were loaded (see [`StaticSet::checked`]).
    pub fn static_checked(&self) -> bool {
        self.statics.holding.checked
    }
    /// Whether the static set's overflow pages are packed (`crate::packed`;
    /// the sampler decodes their entries), else raw pages.
    pub fn static_overflow_packed(&self) -> bool {
        self.statics.holding.packed_overflow
    }
    /// The codec the static set's typed rows are held in (None: as stored).
    pub fn static_row_codec(&self) -> Option<RowCodec> {
        self.statics.holding.row_codec
    }
    /// How the static set holds its slots ([`HeldSlots`]; None: as stored).
    pub fn static_held_slots(&self) -> Option<HeldSlots> {
        self.statics.holding.held_slots
    }
    /// Whether slots of the static set are found through the dense table.
    pub fn static_dense(&self) -> bool {
        self.statics.slot_dense.is_some()
    }
    pub fn dynamic_bytes(&self) -> usize {
        self.dynamic.iter().map(|d| lock(d).held()).sum()
    }
    /// Entries the dynamic part has taken so far.
    pub fn inserts(&self) -> u64 {
        self.dynamic.iter().map(|d| lock(d).inserts).sum()
    }
    /// Entries the dynamic part has evicted so far.
    pub fn evictions(&self) -> u64 {
        self.dynamic.iter().map(|d| lock(d).evictions).sum()
    }
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// The shard holding key `k` (Fx's multiplier spreads the keys, whose
    /// low bits are page offsets or node ids; the top bits pick the shard).
    fn shard(&self, k: u64) -> std::sync::MutexGuard<'_, Dynamic> {
        let n = self.dynamic.len();
        let i = if n == 1 { 0 } else { (k.wrapping_mul(0x51_7c_c1_b7_27_22_0a_95) >> 32) as usize % n };
        lock(&self.dynamic[i])
    }

    /// The static hot set's bytes for `k`: a borrow of the arena, no lock,
    /// no shared write (the caller counts the hit, see [`PageCache::count`]).
    #[inline]
    pub fn get_static(&self, k: u64) -> Option<&[u8]> {
        self.statics.get(k, SLOT_FILE)
    }

    /// Where the static hot set holds `k` ([`PageCache::static_at`] of it
    /// are [`PageCache::get_static`]'s): a sampler that looks up when it
    /// requests and decodes later keeps this instead of looking up twice.
    /// The static part never changes, so the range stays valid.
    #[inline]
    pub fn get_static_extent(&self, k: u64) -> Option<std::ops::Range<usize>> {
        self.statics.extent(k, SLOT_FILE)
    }

    /// Hint the CPU to fetch the static table's entry for node `v`'s slot
    /// (see [`crate::neighbor::prefetch`]): issued for every sample of an
    /// expansion before any is looked up.
    #[inline]
    pub fn prefetch_slot_index(&self, v: u64) {
        if let Some(t) = &self.statics.slot_dense {
            t.prefetch(v as usize);
        }
    }

    /// The same for node `v`'s typed row (`F_TYPE_ROW`): a typed sample
    /// looks up its row besides (or, at the last hop, instead of) its slot.
    #[inline]
    pub fn prefetch_row_index(&self, v: u64) {
        if let Some(t) = &self.statics.row_dense {
            t.prefetch(v as usize);
        }
    }

    /// The static arena's bytes at `r` (from [`PageCache::get_static_extent`]).
    #[inline]
    pub fn static_at(&self, r: std::ops::Range<usize>) -> &[u8] {
        &self.statics.arena[r]
    }

    /// The dynamic part's bytes for `k` (its policy bookkeeping under the
    /// lock); not counted in [`CacheStats`] (see [`PageCache::count`]).
    pub fn get_dynamic(&self, k: u64) -> Option<Arc<[u8]>> {
        if self.dynamic_budget == 0 {
            return None; // no dynamic part: skip the lock
        }
        self.shard(k).get(k)
    }

    /// Add a sampler's per-batch counts to the shared statistics (one
    /// atomic add each per batch instead of one per request).
    pub fn count(&self, static_hits: u64, dynamic_hits: u64, misses: u64) {
        for (c, n) in [
            (&self.stats.static_hits, static_hits),
            (&self.stats.dynamic_hits, dynamic_hits),
            (&self.stats.misses, misses),
        ] {
            if n > 0 {
                c.fetch_add(n, Ordering::Relaxed);
            }
        }
    }

    /// Look `k` up (static, then dynamic) and count the outcome. The sampler
    /// uses [`PageCache::get_static`] / [`PageCache::get_dynamic`] instead.
    pub fn get(&self, k: u64) -> Option<(Arc<[u8]>, Tier)> {
        if let Some(d) = self.get_static(k) {
            self.count(1, 0, 0);
            return Some((Arc::from(d), Tier::Static));
        }
        match self.get_dynamic(k) {
            Some(d) => {
                self.count(0, 1, 0);
                Some((d, Tier::Dynamic))
            }
            None => {
                self.count(0, 0, 1);
                None
            }
        }
    }

    /// Offer bytes just read (and checked) for `k`. An entry larger than the
    /// dynamic part (any entry, at budget 0) is refused without the lock.
    pub fn insert(&self, k: u64, data: Arc<[u8]>) {
        if !self.accepts(data.len()) || self.get_static(k).is_some() {
            return;
        }
        let mut d = self.shard(k);
        let evicted = d.insert(k, data);
        d.inserts += 1;
        d.evictions += evicted;
    }

    /// Whether an offer of `len` bytes could be kept at all (there is a
    /// dynamic part it fits): lets a caller skip copying bytes for nothing.
    pub fn accepts(&self, len: usize) -> bool {
        self.dynamic_budget > 0 && cost(len) <= self.shard_budget
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
    fn dense_and_hashed_static_lookups_return_the_same_bytes() {
        // Slots of 1 in 2 nodes: dense table. Slots of 1 in 100: hash map.
        // Either way, every cached extent comes back byte for byte and every
        // other key misses (ids past the table's end included).
        for (stride, dense) in [(2u64, true), (100, false)] {
            let mut v: Vec<(u64, Arc<[u8]>)> = (0..500u64)
                .map(|i| (key(SLOT_FILE, i * stride), Arc::from(vec![(i % 251) as u8 + 1; 40 + (i % 7) as usize])))
                .collect();
            v.push((key(1, 8192), page(77)));
            let c = PageCache::new(id(), 1 << 30, Policy::S3Fifo, v.clone());
            assert_eq!(c.static_dense(), dense, "stride {stride}");
            assert_eq!(c.static_entries(), v.len());
            for (k, d) in &v {
                assert_eq!(c.get_static(*k), Some(&d[..]), "key {k:#x}");
            }
            for miss in
                [key(SLOT_FILE, 1), key(SLOT_FILE, 500 * stride + 1), key(SLOT_FILE, u32::MAX as u64), key(1, 0)]
            {
                assert!(c.get_static(miss).is_none(), "key {miss:#x}");
            }
        }
    }

    #[test]
    fn a_narrow_slot_table_gives_what_a_wide_one_does_at_half_the_bytes() {
        // Slots in 7 lengths (narrow: 4 B a node) or 100 (wide: 8 B), at
        // offsets past 2^24 (zeroed, untouched arena bytes before them):
        // every slot comes back byte for byte either way, every other id
        // misses, and the index charged is the table's bytes.
        for (lengths, narrow) in [(7u64, true), (100, false)] {
            let v: Vec<(u64, Arc<[u8]>)> = (0..500u64)
                .map(|i| (key(SLOT_FILE, 2 * i), Arc::from(vec![(i % 251) as u8 + 1; 40 + (i % lengths) as usize])))
                .collect();
            let data: usize = v.iter().map(|(_, d)| d.len()).sum();
            let mut set = StaticSet::with_capacity((1 << 24) + data);
            let mut off = 1 << 24;
            for (k, d) in &v {
                set.put_at(*k, off, d);
                off += d.len();
            }
            let c = PageCache::new(id(), 1 << 30, Policy::S3Fifo, set);
            assert_eq!(matches!(c.statics.slot_dense, Some(Dense::Narrow { .. })), narrow, "{lengths} lengths");
            let table = 999 * if narrow { 4 } else { 8 } + if narrow { 4 * lengths as usize } else { 0 };
            assert_eq!(c.static_bytes(), data + table);
            for (k, d) in &v {
                assert_eq!(c.get_static(*k), Some(&d[..]), "key {k:#x}");
            }
            for miss in [1, 999, 1000, u32::MAX as u64] {
                assert!(c.get_static(key(SLOT_FILE, miss)).is_none(), "node {miss}");
            }
        }
        // A slot of a node far beyond any table worth having is hashed,
        // its table never allocated (8 TiB wide, 4 narrow).
        let far = key(SLOT_FILE, 1 << 40);
        let c = PageCache::new(id(), 1 << 20, Policy::S3Fifo, vec![(far, Arc::from(vec![3u8; 50]))]);
        assert!(!c.static_dense() && c.get_static(far) == Some(&[3u8; 50][..]));
        // Narrow while (arena end + 1) << class bits fits a u32 and the
        // lengths are few.
        assert_eq!(narrow_bits((1 << 28) - 2, 14), Some(4));
        assert_eq!(narrow_bits((1 << 28) - 1, 14), None);
        assert_eq!(narrow_bits(u32::MAX as usize - 1, 1), Some(0));
        assert_eq!(narrow_bits(100, NARROW_LENGTHS_MAX + 1), None);
        assert_eq!(static_entry_overhead(140 << 20, 14), STATIC_ENTRY_OVERHEAD / 2);
        assert_eq!(static_entry_overhead(457 << 20, 14), STATIC_ENTRY_OVERHEAD);
    }

    #[test]
    fn a_narrow_entry_past_the_arena_is_a_miss_not_a_panic() {
        // A table entry whose offset and length (kept apart) would reach
        // past the arena: served as absent (the slot is read instead).
        let v: Vec<(u64, Arc<[u8]>)> = (0..4u64).map(|i| (key(SLOT_FILE, i), Arc::from(vec![7u8; 64]))).collect();
        let mut c = PageCache::new(id(), 1 << 20, Policy::S3Fifo, v);
        let Some(Dense::Narrow { table, bits, .. }) = c.statics.slot_dense.as_mut() else { panic!("narrow") };
        table[3] = (1000 << *bits) | (table[3] & ((1 << *bits) - 1));
        assert!(c.get_static(key(SLOT_FILE, 3)).is_none());
        assert_eq!(c.get_static(key(SLOT_FILE, 2)).map(|d| d.len()), Some(64));
    }

    #[test]
    fn a_set_whose_index_does_not_fit_loses_only_the_entries_it_must() {
        // 640 slots of 100 B, hashed (a node in 1000): the estimate (12 B
        // an entry) keeps them all, the hash map (17 KiB) does not fit
        // beside them. The coldest are dropped until it does, and no whole
        // entry more: under 100 B of the budget is left unused.
        let v: Vec<(u64, Arc<[u8]>)> =
            (0..640u64).map(|i| (key(SLOT_FILE, i * 1000), Arc::from(vec![i as u8; 100]))).collect();
        let budget = 640 * (100 + 12);
        let c = PageCache::new(id(), budget, Policy::S3Fifo, v);
        assert!(!c.static_dense() && c.static_entries() < 640);
        assert!(c.static_bytes() <= budget && budget - c.static_bytes() < 100, "{} of {budget}", c.static_bytes());
        let n = c.static_entries() as u64;
        assert!(
            c.get_static(key(SLOT_FILE, (n - 1) * 1000)).is_some() && c.get_static(key(SLOT_FILE, n * 1000)).is_none()
        );
    }

    #[test]
    fn slack_beside_a_full_static_set_is_no_dynamic_part() {
        // 40 static pages; the budget leaves under 1/32 beside them (no
        // dynamic part: nothing inserted, no lock) or a tenth (kept).
        let v: Vec<(u64, Arc<[u8]>)> = (0..40u64).map(|i| (key(SLOT_FILE, i), page(i as u8))).collect();
        let set = 40 * (4096 + STATIC_ENTRY_OVERHEAD) + 1024;
        for (budget, dynamic) in [(set + set / 64, false), (set + set / 9, true)] {
            let c = PageCache::new(id(), budget, Policy::S3Fifo, v.clone());
            assert_eq!(c.static_entries(), 40);
            assert_eq!(c.accepts(600), dynamic, "budget {budget}");
            c.insert(key(1, 4096), Arc::from(vec![7u8; 600]));
            assert_eq!(c.get_dynamic(key(1, 4096)).is_some(), dynamic, "budget {budget}");
            assert!(c.held_bytes() <= budget);
        }
    }

    #[test]
    fn static_set_keeps_the_hottest_entries_within_the_budget() {
        let v: Vec<(u64, Arc<[u8]>)> = (0..10u64).map(|i| (key(SLOT_FILE, i), page(i as u8))).collect();
        let c = PageCache::new(id(), 4 * (4096 + STATIC_ENTRY_OVERHEAD), Policy::S3Fifo, v);
        assert_eq!(c.static_entries(), 4);
        assert!(c.static_bytes() <= c.budget() && c.static_bytes() >= 4 * 4096, "{}", c.static_bytes());
        assert!((0..4).all(|i| c.get_static(key(SLOT_FILE, i)).map(|d| d[0]) == Some(i as u8)));
        assert!((4..10).all(|i| c.get_static(key(SLOT_FILE, i)).is_none()));
    }

    #[test]
    fn concurrent_readers_see_the_static_bytes_and_counts_add_up() {
        let v: Vec<(u64, Arc<[u8]>)> =
            (0..1000u64).map(|i| (key(SLOT_FILE, i), Arc::from(vec![i as u8; 64]))).collect();
        let c = Arc::new(PageCache::new(id(), 1 << 20, Policy::S3Fifo, v));
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let c = c.clone();
                std::thread::spawn(move || {
                    let mut hits = 0;
                    for r in 0..50u64 {
                        for i in 0..1200u64 {
                            let k = key(SLOT_FILE, (i * 7 + r + t) % 1200);
                            if let Some(d) = c.get_static(k) {
                                assert!(d.len() == 64 && d.iter().all(|&b| b == (k & 0xffff) as u8));
                                hits += 1;
                            }
                            if i % 97 == 0 {
                                c.insert(key(2, i), page(1)); // the dynamic part beside
                            }
                        }
                    }
                    c.count(hits, 0, 0);
                    hits
                })
            })
            .collect();
        let total: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(total, 4 * 50 * 1000);
        assert_eq!(c.stats.static_hits.load(Ordering::Relaxed), total);
    }

    impl PageCache {
        /// The invariant between the queues and the map: the same keys, each
        /// queued once, and the byte counts add up.
        fn check_consistent(&self) {
            for d in self.dynamic.iter() {
                let d = lock(d);
                let queued: Vec<u64> = d.small.iter().chain(d.main.iter()).copied().collect();
                let mut uniq = queued.clone();
                uniq.sort_unstable();
                uniq.dedup();
                assert_eq!(uniq.len(), queued.len(), "a key queued twice");
                assert_eq!(d.map.len(), queued.len(), "map and queues differ");
                assert!(queued.iter().all(|k| d.map.contains_key(k)));
                let bytes: usize = d.map.values().map(|e| cost(e.data.len())).sum();
                assert_eq!(bytes, d.held());
                assert!(d.held() <= d.budget);
            }
        }
    }

    #[test]
    fn concurrent_dynamic_hits_see_right_bytes_while_the_writer_evicts() {
        // Three readers hit keys while a writer inserts a stream that evicts
        // them: every hit returns the bytes of its own key (an evicted
        // entry's bytes stay valid for a reader holding them), and the queues
        // and the map agree at the end, within the budget.
        for policy in [Policy::S3Fifo, Policy::Clock] {
            let budget = 200 * cost(256);
            let c = Arc::new(PageCache::new(id(), budget, policy, Vec::new()));
            let val = |k: u64| Arc::<[u8]>::from(vec![(k % 251) as u8; 256]);
            let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let readers: Vec<_> = (0..3u64)
                .map(|t| {
                    let (c, stop) = (c.clone(), stop.clone());
                    std::thread::spawn(move || {
                        let mut hits = 0u64;
                        let mut i = t;
                        while !stop.load(Ordering::Relaxed) || hits == 0 {
                            let k = i % 2000;
                            if let Some(d) = c.get_dynamic(k) {
                                assert!(d.len() == 256 && d.iter().all(|&b| b == (k % 251) as u8), "key {k}");
                                hits += 1;
                            }
                            i += 7;
                        }
                        hits
                    })
                })
                .collect();
            for r in 0..20u64 {
                for k in 0..2000u64 {
                    if (k + r) % 3 == 0 || k < 50 {
                        c.insert(k, val(k));
                    }
                }
                assert!(c.held_bytes() <= budget, "{policy:?} over budget");
            }
            stop.store(true, Ordering::Relaxed);
            let hits: u64 = readers.into_iter().map(|t| t.join().unwrap()).sum();
            assert!(hits > 0);
            c.check_consistent();
            assert!(c.evictions() > 0, "the stream evicted");
        }
    }

    #[test]
    fn a_large_dynamic_part_is_sharded_and_two_writers_stay_within_each_share() {
        // 64 MiB and more: 16 shards, each a sixteenth of the budget; keys
        // (page offsets and node ids alike) spread over all of them; two
        // threads inserting and hitting concurrently leave every shard
        // consistent and within its share, hits return their own bytes, and
        // the insert and eviction counts add up across shards.
        assert_eq!(dynamic_shards((64 << 20) - 1), 1);
        assert_eq!(dynamic_shards(64 << 20), 16);
        let budget = 64 << 20;
        let c = Arc::new(PageCache::new(id(), budget, Policy::S3Fifo, Vec::new()));
        assert_eq!(c.dynamic.len(), 16);
        assert!(c.accepts(4096) && !c.accepts(budget / 16));
        let val = |k: u64| Arc::<[u8]>::from(vec![(k % 251) as u8; 4096]);
        let threads: Vec<_> = (0..2u64)
            .map(|t| {
                let c = c.clone();
                std::thread::spawn(move || {
                    let mut hits = 0u64;
                    for r in 0..3u64 {
                        // Per round and thread 6 K pages of 4 KiB seen every
                        // round (hits) and 6 K seen once (a stream that evicts):
                        // 96 MiB a round between the two threads.
                        for i in 0..12_000u64 {
                            let page = if i % 2 == 0 { i } else { 1_000_000 + r * 100_000 + i };
                            let k = key(crate::neighbor::F_OVERFLOW, (page * 2 + t) * 4096);
                            // A page seen every round is asked for twice (the
                            // second time while probationary, so it moves to main).
                            for _ in 0..if i % 2 == 0 { 2 } else { 1 } {
                                match c.get_dynamic(k) {
                                    Some(d) => {
                                        assert!(d.iter().all(|&b| b == (k % 251) as u8), "key {k} round {r}");
                                        hits += 1;
                                    }
                                    None => c.insert(k, val(k)),
                                }
                            }
                        }
                    }
                    hits
                })
            })
            .collect();
        let hits: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        c.check_consistent();
        assert!(c.held_bytes() <= budget);
        let per_shard: Vec<usize> = c.dynamic.iter().map(|d| lock(d).held()).collect();
        let (lo, hi) = (*per_shard.iter().min().unwrap(), *per_shard.iter().max().unwrap());
        assert!(lo > (budget / 16) * 8 / 10, "shards filled unevenly: {per_shard:?}");
        assert!(hi <= budget / 16);
        // Round 1: each second ask of a page seen every round hits (2 x 6 K);
        // rounds 2 and 3: those pages (49 MiB) are in main, both asks hit
        // (2 x 2 x 2 x 6 K) — at least 90 % of them; the stream was evicted.
        let want = 2 * 6_000 + 2 * 2 * 2 * 6_000 * 9 / 10;
        assert!(hits >= want && c.evictions() > 0, "hits {hits} < {want}, evictions {}", c.evictions());
        assert_eq!(c.inserts() - c.evictions(), c.dynamic.iter().map(|d| lock(d).map.len() as u64).sum::<u64>());
    }

    #[test]
    fn queues_and_map_agree_after_mixed_traffic() {
        // Inserts, repeated inserts of present keys, hits that raise
        // frequencies, ghost readmissions: the queues and the map hold
        // exactly the same keys.
        for policy in [Policy::S3Fifo, Policy::Clock] {
            let c = PageCache::new(id(), 30 * cost(4096), policy, Vec::new());
            let mut x = 12345u64;
            for _ in 0..5000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let k = (x >> 33) % 120;
                if c.get(k).is_none() {
                    c.insert(k, page(k as u8));
                }
            }
            c.check_consistent();
            assert!(c.held_bytes() <= c.budget());
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

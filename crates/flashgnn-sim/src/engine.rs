//! The discrete-event SSD model (docs/simulator.md, "Model").
//!
//! Time is integer picoseconds. Events sit in a `BinaryHeap` ordered by
//! (time, sequence number), so runs are deterministic. Every resource is a
//! FIFO queue in front of `servers` identical servers: the host CPU, the
//! NVMe queue-depth tokens, the PCIe link, the controller's cores, the SSD
//! DRAM, each channel and each die. Waiting times are what the queues give,
//! never assumed. A batch is replayed on its own (batches run one after
//! another) and its state is dropped after it, so memory is bounded by one
//! batch plus the SSD-DRAM page cache (an LRU of at most the configured
//! number of pages, kept across batches, for the designs that stage whole
//! pages in SSD DRAM). Multi-plane reads let a die serve up to `planes`
//! queued pages in one tR; the die is held until all of them have crossed
//! the channel.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};

use flashgnn_format::trace::{TraceRead, KIND_SLOT_PAGE, NO_DEP};
use serde::Serialize;

use crate::config::Config;
use crate::design::{Design, Firmware, Pcie, SampleAt};

/// Latency categories of the per-batch breakdown.
pub const CATS: [&str; 7] = ["host", "pcie", "controller", "wait_before_flash", "flash", "wait_after_flash", "barrier"];
const HOST: usize = 0;
const PCIE: usize = 1;
const CTRL: usize = 2;
const WBF: usize = 3;
const FLASH: usize = 4;
const WAF: usize = 5;
const BARRIER: usize = 6;

const PS: f64 = 1e3; // ps per ns

#[derive(Debug, Clone, Default)]
struct Res {
    servers: u32,
    busy: u32,
    queue: VecDeque<(u32, u32)>,
    occ: u64,
    last: u64,
    area: u128,
    busy_area: u128,
    arrivals: u64,
    sojourn: u128,
}

impl Res {
    fn new(servers: u32) -> Res {
        Res { servers, ..Default::default() }
    }
    fn tick(&mut self, now: u64) {
        let dt = (now - self.last) as u128;
        self.area += dt * self.occ as u128;
        self.busy_area += dt * self.busy as u128;
        self.last = now;
    }
    /// Arrive; true when a server is free now.
    fn acquire(&mut self, now: u64, who: (u32, u32)) -> bool {
        self.tick(now);
        self.occ += 1;
        self.arrivals += 1;
        if self.busy < self.servers {
            self.busy += 1;
            true
        } else {
            self.queue.push_back(who);
            false
        }
    }
    /// Take the first waiter into the service already under way (a
    /// multi-plane read joining the die's current tR): no server changes
    /// hands, the waiter stays counted as present until it [`Res::leave`]s.
    fn ride(&mut self) -> Option<(u32, u32)> {
        self.queue.pop_front()
    }
    /// A rider leaves (arrived at `arrived`); the server stays with the
    /// waiter that holds it.
    fn leave(&mut self, now: u64, arrived: u64) {
        self.tick(now);
        self.occ -= 1;
        self.sojourn += (now - arrived) as u128;
    }
    /// Leave (arrived at `arrived`); returns the waiter now granted.
    fn release(&mut self, now: u64, arrived: u64) -> Option<(u32, u32)> {
        self.tick(now);
        self.occ -= 1;
        self.sojourn += (now - arrived) as u128;
        match self.queue.pop_front() {
            Some(w) => Some(w),
            None => {
                self.busy -= 1;
                None
            }
        }
    }
}

/// The SSD-DRAM page cache: least recently used logical pages, at most
/// `cap` of them. A page enters when its flash read has reached SSD DRAM, so
/// two reads of one page in flight at once both go to flash.
struct Lru {
    cap: u64,
    stamp: u64,
    at: HashMap<u64, u64>,
    order: BTreeMap<u64, u64>,
}

impl Lru {
    fn new(cap: u64) -> Lru {
        Lru { cap, stamp: 0, at: HashMap::new(), order: BTreeMap::new() }
    }
    /// True (and the page becomes the most recent) when `lpn` is cached.
    fn hit(&mut self, lpn: u64) -> bool {
        match self.at.get_mut(&lpn) {
            Some(s) => {
                self.order.remove(s);
                self.stamp += 1;
                *s = self.stamp;
                self.order.insert(self.stamp, lpn);
                true
            }
            None => false,
        }
    }
    fn insert(&mut self, lpn: u64) {
        if self.cap == 0 || self.hit(lpn) {
            return;
        }
        if self.at.len() as u64 >= self.cap {
            if let Some((_, old)) = self.order.pop_first() {
                self.at.remove(&old);
            }
        }
        self.stamp += 1;
        self.at.insert(lpn, self.stamp);
        self.order.insert(self.stamp, lpn);
    }
}

/// Queue statistics for one resource class (summed over its instances).
#[derive(Debug, Clone, Default, Serialize)]
pub struct QueueStats {
    pub arrivals: u64,
    /// Time-average number present (waiting + in service).
    pub mean_occupancy: f64,
    /// Arrivals per second.
    pub arrival_rate: f64,
    /// Mean time from arrival to departure (s).
    pub mean_sojourn_s: f64,
    /// Time-average busy servers.
    pub mean_busy: f64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Energy {
    pub flash_reads_j: f64,
    pub channel_j: f64,
    pub ssd_dram_j: f64,
    pub controller_j: f64,
    pub pcie_j: f64,
    pub host_dram_j: f64,
    pub host_cpu_j: f64,
    pub die_sampler_j: f64,
}

impl Energy {
    pub fn total(&self) -> f64 {
        self.flash_reads_j
            + self.channel_j
            + self.ssd_dram_j
            + self.controller_j
            + self.pcie_j
            + self.host_dram_j
            + self.host_cpu_j
            + self.die_sampler_j
    }
    fn scale(&mut self, k: f64) {
        for x in [
            &mut self.flash_reads_j,
            &mut self.channel_j,
            &mut self.ssd_dram_j,
            &mut self.controller_j,
            &mut self.pcie_j,
            &mut self.host_dram_j,
            &mut self.host_cpu_j,
            &mut self.die_sampler_j,
        ] {
            *x *= k;
        }
    }
}

/// One design's result over a trace.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DesignResult {
    pub design: String,
    pub batches: u64,
    pub targets: u64,
    pub reads: u64,
    pub reads_served: u64,
    pub flash_commands: u64,
    /// Page reads served from the SSD-DRAM page cache (no flash read) and
    /// page reads that went to flash, for the designs that stage whole pages
    /// in SSD DRAM (smartsage, bg-1, bg-dg); both 0 for the others.
    pub dram_cache_hits: u64,
    pub dram_cache_misses: u64,
    /// Simulated seconds of I/O and sampling (batches back to back).
    pub io_seconds: f64,
    /// GNN compute per batch (s), overlapped with the next batch's I/O.
    pub compute_s_per_batch: f64,
    pub batches_per_s: f64,
    pub targets_per_s: f64,
    pub batch_latency_s: f64,
    /// The same batches' mean I/O time as the engine measured it (first
    /// submission to last completion, from the trace's timestamps); None
    /// when the trace has no times. Compare with `batch_latency_s`.
    pub traced_batch_latency_s: Option<f64>,
    /// Mean per-batch latency along each batch's critical path (s), by
    /// category ([`CATS`]); sums to `batch_latency_s`.
    pub breakdown_s: std::collections::BTreeMap<String, f64>,
    pub mean_reads_in_flight: f64,
    /// Time-average NVMe commands outstanding at the device (host designs:
    /// queue-depth tokens held; in-storage designs: reads in flight).
    pub mean_queue_depth: f64,
    pub mean_active_channels: f64,
    pub mean_active_dies: f64,
    pub bytes_pcie: u64,
    pub bytes_channel: u64,
    pub energy_per_batch_j: Energy,
    pub energy_per_batch_total_j: f64,
    pub queues: std::collections::BTreeMap<String, QueueStats>,
    /// Share of simulated time with N reads in flight, N in buckets 0, 1,
    /// 2-3, 4-7, ..., 2^15 and more (`queue_depth_hist_lo` gives each
    /// bucket's lower bound).
    pub queue_depth_hist: Vec<f64>,
    pub queue_depth_hist_lo: Vec<u64>,
    /// Samples over simulated time (at most [`TIMELINE_MAX`], evenly spaced
    /// after decimation): reads in flight, busy channels, busy dies.
    pub timeline: Timeline,
    /// Per-SSD statistics when the config has several (`array.devices` > 1;
    /// left out with one, so a one-device report is unchanged).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceStats>,
}

/// One SSD of an array (docs/simulator.md, "Several SSDs").
#[derive(Debug, Clone, Default, Serialize)]
pub struct DeviceStats {
    pub device: u32,
    /// Reads (parts of reads split at stripe-chunk boundaries) sent to it.
    pub reads: u64,
    pub flash_commands: u64,
    /// `nvme_queue` (commands outstanding at this device: host designs from
    /// the NVMe command to the data's arrival in host memory, in-storage
    /// designs from issue to completion), `pcie`, `controller_cores`,
    /// `ssd_dram`, `channels`, `dies`.
    pub queues: std::collections::BTreeMap<String, QueueStats>,
}

/// Points kept in a design's timeline.
pub const TIMELINE_MAX: usize = 1024;
/// Queue-depth histogram buckets: 0, 1, 2-3, 4-7, ..., 2^15 and more (log2),
/// shared by the simulator and the measured figures ([`crate::measured`]).
pub(crate) const QD_BUCKETS: usize = 17;

/// The bucket of `n` reads in flight.
pub(crate) fn qd_bucket(n: u64) -> usize {
    if n == 0 {
        0
    } else {
        (64 - n.leading_zeros() as usize).min(QD_BUCKETS - 1)
    }
}

/// Each bucket's lower bound, for the report.
pub(crate) fn qd_bucket_lows() -> Vec<u64> {
    (0..QD_BUCKETS).map(|b| if b == 0 { 0 } else { 1u64 << (b - 1) }).collect()
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Timeline {
    pub t_s: Vec<f64>,
    pub reads_in_flight: Vec<u32>,
    pub active_channels: Vec<u32>,
    pub active_dies: Vec<u32>,
}

#[derive(Clone, Copy, Debug)]
enum Op {
    TokenAcq,
    TokenRel,
    HalfStack,
    Nvme,
    Router,
    Fw,
    HostSample,
    CoreSample,
    PcieData,
    Flash,
}

#[derive(Clone, Default)]
struct ReadState {
    op: u8,
    t_mark: u64,
    /// When the read asked for a queue-depth token.
    t_token: u64,
    /// When the read's command reached its device (the per-device NVMe queue).
    t_dev: u64,
    ready_at: u64,
    done_at: u64,
    done: bool,
    pages_left: u32,
    page0: u32,
    cats: [u64; 7],
    pcats: [u64; 7],
    /// Unmet dependency count (0 or 1) — the gate is checked separately.
    waiting_dep: bool,
    hop: u8,
}

#[derive(Clone, Default)]
struct PageState {
    die: u32,
    ch: u32,
    phase: u8,
    t_die: u64,
    t_ch: u64,
    t_dram: u64,
    cats: [u64; 7],
    /// Bytes into SSD DRAM (or used, for die-level samplers) and bytes over
    /// the channel (a whole page also carries its spare area: ECC parity
    /// and metadata, stripped by the controller's ECC engine).
    bytes: u32,
    ch_bytes: u32,
    lpn: u64,
    /// Served from the SSD-DRAM page cache (no flash read).
    hit: bool,
}

// Resource layout: the host's (shared by every device) first, then per
// device PCIe link, controller cores, SSD DRAM and NVMe queue, then every
// device's channels, then every device's dies (see `Engine::r_*`).
const R_TOKEN: usize = 0;
const R_HOSTCPU: usize = 1;
const R_DEV: usize = 2;

const E_READY: u8 = 0;
const E_OPDONE: u8 = 1;
const E_GRANT: u8 = 2;
const E_TR: u8 = 3;
const E_XFER: u8 = 4;
const E_DRAM: u8 = 5;
const E_GATE: u8 = 6;
const NOPAGE: u32 = u32::MAX;

pub struct Engine<'a> {
    cfg: &'a Config,
    d: &'a Design,
    ops: Vec<Op>,
    res: Vec<Res>,
    /// Channels and dies per device.
    n_ch: u32,
    n_die: u32,
    /// SSDs in the array and the striping chunk (docs/simulator.md).
    n_dev: u32,
    stripe: u64,
    /// Reads of the batch as traced; parts of reads split at a chunk
    /// boundary are appended after them, `parent` naming the original.
    n_orig: usize,
    parent: Vec<u32>,
    /// Parts of each original read not yet complete.
    parts_left: Vec<u32>,
    dev_reads: Vec<u64>,
    dev_cmds: Vec<u64>,
    heap: BinaryHeap<Reverse<(u64, u64, u8, u32, u32)>>,
    seq: u64,
    now: u64,
    // Per batch.
    reads: Vec<TraceRead>,
    st: Vec<ReadState>,
    pages: Vec<PageState>,
    children: Vec<Vec<u32>>,
    hop_left: Vec<u64>,
    gate: u8,
    /// A hop boundary's host round trip is under way (E_GATE pending).
    gate_pending: bool,
    parked: Vec<Vec<u32>>,
    left: u64,
    // Totals.
    inflight: u64,
    inflight_area: u128,
    inflight_last: u64,
    qd_hist: [u128; QD_BUCKETS],
    timeline: Timeline,
    sample_every: u64,
    next_sample: u64,
    batches: u64,
    targets: u64,
    nreads: u64,
    served: u64,
    flash_cmds: u64,
    bytes_pcie: u64,
    bytes_channel: u64,
    bytes_dram: u64,
    bytes_host: u64,
    /// Bytes read once more from host DRAM (cc: to the discrete accelerator).
    bytes_host_read: u64,
    tr_ps: u128,
    xfer_ps: u128,
    sampler_ps: u128,
    core_ps: u128,
    hostcpu_ps: u128,
    breakdown: [u128; 7],
    compute_s: f64,
    // Precomputed service times (ps).
    half_stack: u64,
    nvme: u64,
    pcie_ps_per_byte: f64,
    ch_ps_per_byte: f64,
    dram_ps_per_byte: f64,
    /// Host round trip per hop boundary (designs with `hop_round_trip`).
    hop_rt: u64,
    seed: u64,
    // Multi-plane: the pages sharing each die's current tR (the first holds
    // the die) and how many of them still hold their page register.
    multi_plane: bool,
    die_group: Vec<Vec<u32>>,
    group_left: Vec<u32>,
    /// One SSD-DRAM page cache per device.
    cache: Vec<Lru>,
    cache_hits: u64,
    cache_misses: u64,
}

fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ceb9fe1a85ec53);
    x ^ (x >> 33)
}

impl<'a> Engine<'a> {
    pub fn new(cfg: &'a Config, d: &'a Design) -> Engine<'a> {
        use Op::*;
        let ops = match d.sample_at {
            SampleAt::Host => vec![TokenAcq, HalfStack, Nvme, Fw, Flash, PcieData, TokenRel, HalfStack, HostSample],
            _ => {
                let mut v = vec![if d.firmware == Firmware::Router { Router } else { Fw }, Flash];
                if d.sample_at == SampleAt::Controller {
                    v.push(CoreSample);
                }
                if d.pcie == Pcie::Used {
                    v.push(PcieData);
                }
                v
            }
        };
        let n_ch = cfg.flash.channels;
        let n_die = n_ch * cfg.dies_per_channel();
        let n_dev = cfg.array.devices;
        // One queue-depth pool for the whole array: the engine's one ring,
        // whose entries go to whichever device the next read addresses.
        let depth = if d.block_interface { cfg.host.block_queue_depth } else { cfg.host.queue_depth };
        let cache_pages = cfg.dram_cache_pages();
        let mut res = vec![Res::new(depth), Res::new(cfg.host.cpu_cores)];
        for servers in [1, cfg.controller.cores, 1, u32::MAX] {
            for _ in 0..n_dev {
                res.push(Res::new(servers));
            }
        }
        for _ in 0..n_dev * (n_ch + n_die) {
            res.push(Res::new(1));
        }
        Engine {
            cfg,
            d,
            ops,
            res,
            n_ch,
            n_die,
            n_dev,
            stripe: cfg.array.stripe_bytes,
            n_orig: 0,
            parent: Vec::new(),
            parts_left: Vec::new(),
            dev_reads: vec![0; n_dev as usize],
            dev_cmds: vec![0; n_dev as usize],
            heap: BinaryHeap::new(),
            seq: 0,
            now: 0,
            reads: Vec::new(),
            st: Vec::new(),
            pages: Vec::new(),
            children: Vec::new(),
            hop_left: Vec::new(),
            gate: 0,
            gate_pending: false,
            parked: Vec::new(),
            left: 0,
            inflight: 0,
            inflight_area: 0,
            inflight_last: 0,
            qd_hist: [0; QD_BUCKETS],
            timeline: Timeline::default(),
            sample_every: 1_000_000, // 1 us, doubled whenever the timeline fills
            next_sample: 0,
            batches: 0,
            targets: 0,
            nreads: 0,
            served: 0,
            flash_cmds: 0,
            bytes_pcie: 0,
            bytes_channel: 0,
            bytes_dram: 0,
            bytes_host: 0,
            bytes_host_read: 0,
            tr_ps: 0,
            xfer_ps: 0,
            sampler_ps: 0,
            core_ps: 0,
            hostcpu_ps: 0,
            breakdown: [0; 7],
            compute_s: 0.0,
            half_stack: (cfg.host.stack_ns * PS / 2.0) as u64,
            nvme: (cfg.host.nvme_command_ns * PS) as u64,
            pcie_ps_per_byte: 1e12 / cfg.pcie_bytes_per_s(),
            ch_ps_per_byte: 1e12 / cfg.channel_bytes_per_s(),
            dram_ps_per_byte: 1e12 / (cfg.controller.dram_gbps * 1e9),
            hop_rt: ((cfg.host.stack_ns + cfg.host.nvme_command_ns) * PS) as u64,
            seed: cfg.sim.seed,
            multi_plane: cfg.flash.multi_plane && cfg.flash.planes > 1,
            die_group: vec![Vec::new(); (n_dev * n_die) as usize],
            group_left: vec![0; (n_dev * n_die) as usize],
            cache: if d.uses_dram_cache() && cache_pages > 0 {
                (0..n_dev).map(|_| Lru::new(cache_pages)).collect()
            } else {
                Vec::new()
            },
            cache_hits: 0,
            cache_misses: 0,
        }
    }

    fn r_pcie(&self, dev: usize) -> usize {
        R_DEV + dev
    }
    fn r_cores(&self, dev: usize) -> usize {
        R_DEV + self.n_dev as usize + dev
    }
    fn r_dram(&self, dev: usize) -> usize {
        R_DEV + 2 * self.n_dev as usize + dev
    }
    fn r_nvq(&self, dev: usize) -> usize {
        R_DEV + 3 * self.n_dev as usize + dev
    }
    /// A global channel index (device × channels + channel).
    fn r_ch(&self, ch: u32) -> usize {
        R_DEV + 4 * self.n_dev as usize + ch as usize
    }
    /// A global die index (device × dies + die).
    fn r_die(&self, die: u32) -> usize {
        R_DEV + 4 * self.n_dev as usize + (self.n_dev * self.n_ch) as usize + die as usize
    }
    fn r_chs(&self) -> std::ops::Range<usize> {
        self.r_ch(0)..self.r_ch(self.n_dev * self.n_ch)
    }
    fn r_dies(&self) -> std::ops::Range<usize> {
        self.r_die(0)..self.res.len()
    }

    /// The device holding read `i`'s bytes: its stripe chunk round-robin,
    /// as `flashgnn stripe` writes them (a read never spans a chunk here:
    /// `run_batch` splits those).
    fn dev_of(&self, i: u32) -> usize {
        if self.n_dev == 1 {
            0
        } else {
            ((self.reads[i as usize].offset / self.stripe) % self.n_dev as u64) as usize
        }
    }

    /// Byte offset of `offset` within its device's part file: the chunks
    /// before it on the same device, then its place in its chunk.
    fn local_offset(&self, offset: u64) -> u64 {
        if self.n_dev == 1 {
            offset
        } else {
            let c = offset / self.stripe;
            (c / self.n_dev as u64) * self.stripe + offset % self.stripe
        }
    }

    fn push(&mut self, t: u64, kind: u8, read: u32, page: u32) {
        self.seq += 1;
        self.heap.push(Reverse((t, self.seq, kind, read, page)));
    }

    fn inflight_delta(&mut self, up: bool) {
        let dt = (self.now - self.inflight_last) as u128;
        self.qd_hist[qd_bucket(self.inflight)] += dt;
        self.inflight_area += dt * self.inflight as u128;
        self.inflight_last = self.now;
        if up {
            self.inflight += 1;
        } else {
            self.inflight -= 1;
        }
    }

    /// Logical page → (channel, die index global). Striping: consecutive
    /// logical pages go to consecutive channels, then to the next die of
    /// each channel (package-major), then planes (see docs/simulator.md).
    fn map(&self, lpn: u64) -> (u32, u32) {
        let x =
            if self.cfg.flash.mapping == "hash" { mix(lpn ^ self.seed.wrapping_mul(0x9e3779b97f4a7c15)) } else { lpn };
        let ch = (x % self.n_ch as u64) as u32;
        let die_in_ch = ((x / self.n_ch as u64) % self.cfg.dies_per_channel() as u64) as u32;
        (ch, ch * self.cfg.dies_per_channel() + die_in_ch)
    }

    /// Replay one batch (its reads in issue order) starting now.
    /// `targets`: seeds in the batch (from the trace header); None estimates
    /// them from the hop-0 slot reads.
    pub fn run_batch(&mut self, reads: Vec<TraceRead>, targets_hint: Option<u64>) {
        let n = reads.len();
        let start = self.now;
        self.reads = reads;
        self.n_orig = n;
        self.parent.clear();
        self.parts_left = vec![1; n];
        // Issue order: each read, then the extra parts it was split into.
        let order = self.split_at_chunks();
        let m = self.reads.len();
        self.st = vec![ReadState::default(); m];
        self.pages.clear();
        self.children = vec![Vec::new(); m];
        let max_hop = self.reads.iter().map(|r| r.hop).max().unwrap_or(0) as usize;
        self.hop_left = vec![0; max_hop + 2];
        self.parked = vec![Vec::new(); max_hop + 2];
        let mut targets = 0u64;
        let mut nodes = 0u64;
        for &i in &order {
            let i = i as usize;
            let r = self.reads[i];
            // Effective hop: never below the dependency's (no gate deadlock).
            let mut hop = r.hop;
            if r.dep != NO_DEP {
                hop = hop.max(self.st[r.dep as usize].hop);
                self.children[r.dep as usize].push(i as u32);
                self.st[i].waiting_dep = true;
            }
            self.st[i].hop = hop;
            if i >= n {
                continue; // a part: counted once, with its read
            }
            self.hop_left[hop as usize] += 1;
            if r.kind == KIND_SLOT_PAGE {
                nodes += r.items as u64;
                if r.hop == 0 {
                    targets += r.items as u64;
                }
            }
        }
        if let Some(t) = targets_hint {
            targets = t;
        }
        self.left = n as u64;
        self.gate = 0;
        self.gate_pending = false;
        self.advance_gate();
        // Prologue: in-storage designs take one NVMe command per batch.
        let pro = if self.d.sample_at == SampleAt::Host { 0 } else { self.half_stack + self.nvme };
        let t0 = start + pro;
        // The prologue is a pure delay: the first commands reach the device at t0.
        self.now = t0;
        for &i in &order {
            let i = i as usize;
            if !self.st[i].waiting_dep {
                self.st[i].ready_at = t0;
                self.maybe_start(i as u32, t0);
            }
        }
        while let Some(Reverse((t, _, kind, read, page))) = self.heap.pop() {
            if t >= self.next_sample {
                self.sample(t);
            }
            self.now = t;
            self.handle(kind, read, page);
        }
        // Epilogue.
        let mut end = self.now;
        let mut epi = [0u64; 7];
        epi[HOST] += pro.saturating_sub(self.nvme);
        epi[PCIE] += if pro > 0 { self.nvme } else { 0 };
        if self.d.accel_over_pcie {
            // The gathered subgraph (sampled ids, slots with their inline
            // features, feature rows) goes from host DRAM to the discrete
            // accelerator over PCIe before the GNN step.
            let bytes: u64 = self.reads.iter().map(|r| r.bytes_used as u64).sum();
            let t = (bytes as f64 * self.pcie_ps_per_byte) as u64;
            self.bytes_pcie += bytes;
            self.bytes_host_read += bytes;
            epi[PCIE] += t;
            end += t;
        }
        if self.d.pcie == Pcie::Output {
            let bytes = (targets as f64 * self.cfg.compute.output_bytes_per_target) as u64;
            let t = (bytes as f64 * self.pcie_ps_per_byte) as u64;
            self.bytes_pcie += bytes;
            self.bytes_host += bytes;
            epi[PCIE] += t;
            end += t;
        }
        if self.d.sample_at != SampleAt::Host {
            epi[HOST] += self.half_stack;
            end += self.half_stack;
        }
        // Critical path: from the last read to finish back through its dependencies.
        let mut path = epi;
        if let Some(last) = (0..n).max_by_key(|&i| (self.st[i].done_at, i)) {
            let mut i = last;
            loop {
                let s = &self.st[i];
                for k in 0..7 {
                    path[k] += s.cats[k] + s.pcats[k];
                }
                let dep = self.reads[i].dep;
                let prev_done = if dep == NO_DEP { start + pro } else { self.st[dep as usize].done_at };
                path[BARRIER] += s.ready_at - prev_done;
                if dep == NO_DEP {
                    break;
                }
                i = dep as usize;
            }
        }
        // The path's sum can differ from the batch span only by rounding of
        // per-stage times; put the difference where no stage was counted.
        let span = end - start;
        let sum: u64 = path.iter().sum();
        if span > sum {
            path[BARRIER] += span - sum;
        }
        for k in 0..7 {
            self.breakdown[k] += path[k] as u128;
        }
        self.now = end;
        self.batches += 1;
        self.targets += targets;
        self.nreads += n as u64;
        let flops = if self.d.compute_in_ssd { self.cfg.compute.ssd_flops } else { self.cfg.compute.host_flops };
        self.compute_s += nodes as f64 * self.cfg.compute.flops_per_node / flops;
    }

    /// With several devices, cut every read spanning stripe chunks into one
    /// part per chunk (each on its own device, as the engine would issue
    /// them): the read keeps the first, the others are appended with the
    /// same dependency and hop, and bytes used are shared by length.
    /// Returns the issue order (each read followed by its parts).
    fn split_at_chunks(&mut self) -> Vec<u32> {
        let n = self.n_orig;
        let mut order = Vec::with_capacity(n);
        let s = self.stripe;
        for i in 0..n {
            order.push(i as u32);
            let r = self.reads[i];
            if self.n_dev == 1 || r.length == 0 {
                continue;
            }
            let end = r.offset + r.length as u64;
            let (c0, c1) = (r.offset / s, (end - 1) / s);
            if c0 == c1 {
                continue;
            }
            let mut used_rest = 0u32;
            for c in c0 + 1..=c1 {
                let lo = c * s;
                let hi = end.min((c + 1) * s);
                let len = hi - lo;
                let used = (r.bytes_used as u64 * len / r.length as u64) as u32;
                used_rest += used;
                order.push(self.reads.len() as u32);
                self.reads.push(TraceRead { offset: lo, length: len as u32, bytes_used: used, ..r });
                self.parent.push(i as u32);
                self.parts_left[i] += 1;
            }
            self.reads[i].length = ((c0 + 1) * s - r.offset) as u32;
            self.reads[i].bytes_used = r.bytes_used - used_rest;
        }
        order
    }

    /// Record the state just before `t` (and every sample point up to it).
    fn sample(&mut self, t: u64) {
        let busy = |rs: &[Res]| rs.iter().map(|r| r.busy).sum::<u32>();
        let ch = busy(&self.res[self.r_chs()]);
        let dies = busy(&self.res[self.r_dies()]);
        while self.next_sample <= t {
            let tl = &mut self.timeline;
            tl.t_s.push(self.next_sample as f64 / 1e12);
            tl.reads_in_flight.push(self.inflight as u32);
            tl.active_channels.push(ch);
            tl.active_dies.push(dies);
            self.next_sample += self.sample_every;
            if tl.t_s.len() >= TIMELINE_MAX {
                // Keep every other point; sample half as often from now on.
                for v in [&mut tl.reads_in_flight, &mut tl.active_channels, &mut tl.active_dies] {
                    let kept: Vec<u32> = v.iter().step_by(2).copied().collect();
                    *v = kept;
                }
                tl.t_s = tl.t_s.iter().step_by(2).copied().collect();
                self.sample_every *= 2;
                // Points sit at k * sample_every from time 0.
                self.next_sample = tl.t_s.len() as u64 * self.sample_every;
            }
        }
    }

    fn advance_gate(&mut self) {
        while !self.gate_pending
            && (self.gate as usize) < self.hop_left.len() - 1
            && self.hop_left[self.gate as usize] == 0
        {
            if self.d.hop_round_trip && self.left > 0 && self.hop_rt > 0 {
                // The SSD returns the hop's samples; the host translates them
                // and commands the next hop (E_GATE opens the gate).
                self.gate_pending = true;
                self.push(self.now + self.hop_rt, E_GATE, 0, NOPAGE);
                return;
            }
            self.open_gate();
        }
    }

    fn open_gate(&mut self) {
        self.gate += 1;
        let parked = std::mem::take(&mut self.parked[self.gate as usize]);
        for i in parked {
            self.st[i as usize].ready_at = self.now;
            self.begin(i);
        }
    }

    /// Dependency met at `t`: start now or park behind the hop barrier.
    fn maybe_start(&mut self, i: u32, t: u64) {
        let s = &mut self.st[i as usize];
        s.waiting_dep = false;
        if self.d.barrier && s.hop > self.gate {
            self.parked[s.hop as usize].push(i);
            return;
        }
        s.ready_at = t;
        self.begin(i);
    }

    fn begin(&mut self, i: u32) {
        self.inflight_delta(true);
        if self.d.sample_at != SampleAt::Host {
            let nvq = self.r_nvq(self.dev_of(i));
            self.res[nvq].acquire(self.now, (i, NOPAGE));
            self.st[i as usize].t_dev = self.now;
        }
        self.run_ops(i);
    }

    /// Nodes sampled from read `i`'s bytes; the extra parts of a read split
    /// at a chunk boundary sample nothing (its first part carries them).
    fn items(&self, i: u32) -> u64 {
        if i as usize >= self.n_orig {
            0
        } else {
            self.reads[i as usize].items.max(1) as u64
        }
    }

    /// Service time (ps) of a queued op for read `i`.
    fn service(&mut self, op: Op, i: u32) -> u64 {
        let r = self.reads[i as usize];
        let c = &self.cfg;
        match op {
            Op::Fw => {
                let ns = if self.d.firmware == Firmware::DirectGraph {
                    c.controller.firmware_ns_directgraph
                } else {
                    c.controller.firmware_ns_per_command
                };
                (ns * PS) as u64
            }
            Op::HostSample => {
                if r.kind == KIND_SLOT_PAGE || r.kind == 1 {
                    (c.host.cpu_ns_per_node * PS) as u64 * self.items(i)
                } else {
                    0
                }
            }
            Op::CoreSample => {
                if r.kind == KIND_SLOT_PAGE || r.kind == 1 {
                    (c.controller.sample_ns_per_node * PS) as u64 * self.items(i)
                } else {
                    0
                }
            }
            Op::PcieData => {
                let bytes = if self.d.pcie == Pcie::Extent { r.length } else { r.bytes_used.max(1) } as u64;
                self.bytes_pcie += bytes;
                self.bytes_host += bytes;
                (bytes as f64 * self.pcie_ps_per_byte) as u64
            }
            _ => 0,
        }
    }

    /// The queue an op of read `i` waits in (its device's, but the host CPU).
    fn res_of(&self, op: Op, i: u32) -> usize {
        match op {
            Op::Fw | Op::CoreSample => self.r_cores(self.dev_of(i)),
            Op::HostSample => R_HOSTCPU,
            Op::PcieData => self.r_pcie(self.dev_of(i)),
            _ => usize::MAX,
        }
    }

    fn cat_of(op: Op) -> (usize, usize) {
        // (service category, wait category)
        match op {
            Op::Fw | Op::CoreSample => (CTRL, CTRL),
            Op::HostSample => (HOST, HOST),
            Op::PcieData => (PCIE, WAF),
            _ => (HOST, HOST),
        }
    }

    /// Run read `i`'s ops from its current one until one has to wait.
    fn run_ops(&mut self, i: u32) {
        loop {
            let k = self.st[i as usize].op as usize;
            if k == self.ops.len() {
                self.finish(i);
                return;
            }
            let op = self.ops[k];
            let now = self.now;
            match op {
                Op::TokenAcq => {
                    self.st[i as usize].t_token = now;
                    if !self.res[R_TOKEN].acquire(now, (i, NOPAGE)) {
                        return; // E_GRANT continues
                    }
                    self.st[i as usize].op += 1;
                }
                Op::TokenRel => {
                    let nvq = self.r_nvq(self.dev_of(i));
                    let arrived = self.st[i as usize].t_dev;
                    self.res[nvq].release(now, arrived);
                    let arrived = self.st[i as usize].t_token;
                    if let Some((w, p)) = self.res[R_TOKEN].release(now, arrived) {
                        self.push(now, E_GRANT, w, p);
                    }
                    self.st[i as usize].op += 1;
                }
                Op::HalfStack | Op::Nvme | Op::Router => {
                    let (t, cat) = match op {
                        Op::HalfStack => (self.half_stack, HOST),
                        Op::Nvme => (self.nvme, PCIE),
                        _ => ((self.cfg.controller.router_ns * PS) as u64, CTRL),
                    };
                    self.st[i as usize].cats[cat] += t;
                    if let Op::Nvme = op {
                        // The command is at its device until the data is home.
                        let nvq = self.r_nvq(self.dev_of(i));
                        self.res[nvq].acquire(now, (i, NOPAGE));
                        self.st[i as usize].t_dev = now;
                    }
                    self.push(now + t, E_OPDONE, i, NOPAGE);
                    return;
                }
                Op::Fw | Op::HostSample | Op::CoreSample | Op::PcieData => {
                    self.st[i as usize].t_mark = now;
                    let r = self.res_of(op, i);
                    if self.res[r].acquire(now, (i, NOPAGE)) {
                        self.granted_op(i, op);
                    }
                    return;
                }
                Op::Flash => {
                    self.start_flash(i);
                    return;
                }
            }
        }
    }

    fn granted_op(&mut self, i: u32, op: Op) {
        let now = self.now;
        let (sc, wc) = Self::cat_of(op);
        let s = self.service(op, i);
        let st = &mut self.st[i as usize];
        st.cats[wc] += now - st.t_mark;
        st.cats[sc] += s;
        match op {
            Op::Fw | Op::CoreSample => self.core_ps += s as u128,
            Op::HostSample => self.hostcpu_ps += s as u128,
            _ => {}
        }
        self.push(now + s, E_OPDONE, i, NOPAGE);
    }

    fn start_flash(&mut self, i: u32) {
        let r = self.reads[i as usize];
        let p = self.cfg.flash.page_bytes as u64;
        let dev = self.dev_of(i);
        self.dev_reads[dev] += 1;
        // Logical pages of the device's own part file (one device: the file).
        let base = ((r.file as u64) << 40) + self.local_offset(r.offset);
        let first = base / p;
        let last = (base + r.length as u64 - 1) / p;
        let np = (last - first + 1) as u32;
        let used_per_page = (r.bytes_used as u64).div_ceil(np as u64).max(1) as u32;
        let page0 = self.pages.len() as u32;
        for lpn in first..=last {
            let (ch, die) = self.map(lpn);
            let (ch, die) = (dev as u32 * self.n_ch + ch, dev as u32 * self.n_die + die);
            let bytes = if self.d.channel_used_only {
                used_per_page
            } else {
                // Whole flash pages cross the channel (ECC codewords), but
                // never more than the read needs beyond one page.
                p as u32
            };
            let hit = match self.cache.get_mut(dev) {
                Some(c) => c.hit(lpn),
                None => false,
            };
            if !self.cache.is_empty() {
                if hit {
                    self.cache_hits += 1;
                } else {
                    self.cache_misses += 1;
                }
            }
            let ch_bytes = if self.d.channel_used_only { bytes } else { bytes + self.cfg.flash.spare_bytes };
            self.pages.push(PageState { die, ch, bytes, ch_bytes, lpn, hit, ..Default::default() });
        }
        let st = &mut self.st[i as usize];
        st.page0 = page0;
        st.pages_left = np;
        for k in 0..np {
            let pg = page0 + k;
            let now = self.now;
            let ps = &mut self.pages[pg as usize];
            if ps.hit {
                // Already in SSD DRAM: read out once, no flash, no channel.
                ps.t_dram = now;
                ps.phase = 3;
                let r = self.r_dram(dev);
                if self.res[r].acquire(now, (i, pg)) {
                    self.dram_granted(i, pg);
                }
                continue;
            }
            ps.t_die = now;
            let die = ps.die;
            let die = self.r_die(die);
            if self.res[die].acquire(now, (i, pg)) {
                self.die_granted(i, pg);
            }
        }
    }

    fn die_granted(&mut self, i: u32, pg: u32) {
        self.start_tr(i, pg);
        if self.multi_plane {
            // Up to `planes` pages queued for this die share the tR (the
            // same-page-offset rule of real multi-plane reads is not
            // modelled); the die is held until every one of them has left
            // its page register over the channel.
            let d = self.pages[pg as usize].die as usize;
            let mut group = std::mem::take(&mut self.die_group[d]);
            group.clear();
            group.push(pg);
            let rd = self.r_die(d as u32);
            while group.len() < self.cfg.flash.planes as usize {
                match self.res[rd].ride() {
                    Some((w, p)) => {
                        group.push(p);
                        self.start_tr(w, p);
                    }
                    None => break,
                }
            }
            self.group_left[d] = group.len() as u32;
            self.die_group[d] = group;
        }
    }

    /// Page `pg` of read `i` starts its array read (tR + command, and the
    /// die-level sampler's time) now.
    fn start_tr(&mut self, i: u32, pg: u32) {
        let now = self.now;
        let mut t = ((self.cfg.flash.read_ns + self.cfg.flash.command_ns) * PS) as u64;
        self.tr_ps += (self.cfg.flash.read_ns * PS) as u128;
        if self.d.sample_at == SampleAt::Die {
            let r = self.reads[i as usize];
            if r.kind == KIND_SLOT_PAGE || r.kind == 1 {
                let s = (self.cfg.flash.sampler_ns_per_node * PS) as u64 * self.items(i);
                t += s;
                self.sampler_ps += s as u128;
            }
        }
        self.flash_cmds += 1;
        self.dev_cmds[(self.pages[pg as usize].die / self.n_die) as usize] += 1;
        let ps = &mut self.pages[pg as usize];
        ps.cats[WBF] += now - ps.t_die;
        ps.cats[FLASH] += t;
        ps.phase = 1;
        self.push(now + t, E_TR, i, pg);
    }

    fn ch_granted(&mut self, i: u32, pg: u32) {
        let now = self.now;
        let ps = &mut self.pages[pg as usize];
        let t = (ps.ch_bytes as f64 * self.ch_ps_per_byte) as u64;
        ps.cats[WAF] += now - ps.t_ch;
        ps.cats[FLASH] += t;
        ps.phase = 2;
        self.bytes_channel += ps.ch_bytes as u64;
        self.xfer_ps += t as u128;
        self.push(now + t, E_XFER, i, pg);
    }

    fn dram_granted(&mut self, i: u32, pg: u32) {
        let now = self.now;
        let ps = &mut self.pages[pg as usize];
        // Written into SSD DRAM by the channel, read out once by a core or
        // the DMA; a cache hit is only read out.
        let bytes = if ps.hit { ps.bytes as u64 } else { 2 * ps.bytes as u64 };
        let t = (bytes as f64 * self.dram_ps_per_byte) as u64;
        ps.cats[CTRL] += now - ps.t_dram + t;
        ps.phase = 4;
        self.bytes_dram += bytes;
        self.push(now + t, E_DRAM, i, pg);
    }

    fn page_done(&mut self, i: u32, pg: u32) {
        let cats = self.pages[pg as usize].cats;
        let st = &mut self.st[i as usize];
        st.pcats = cats; // the last page to finish is on the critical path
        st.pages_left -= 1;
        if st.pages_left == 0 {
            st.op += 1;
            self.run_ops(i);
        }
    }

    fn finish(&mut self, i: u32) {
        let now = self.now;
        if self.d.sample_at != SampleAt::Host {
            let nvq = self.r_nvq(self.dev_of(i));
            let arrived = self.st[i as usize].t_dev;
            self.res[nvq].release(now, arrived);
        }
        let st = &mut self.st[i as usize];
        assert!(!st.done, "read {i} served twice");
        st.done = true;
        self.inflight_delta(false);
        // A read split at chunk boundaries is served when its last part is.
        let i = if (i as usize) < self.n_orig { i } else { self.parent[i as usize - self.n_orig] };
        self.parts_left[i as usize] -= 1;
        if self.parts_left[i as usize] > 0 {
            return;
        }
        let st = &mut self.st[i as usize];
        st.done_at = now;
        self.served += 1;
        self.left -= 1;
        let hop = st.hop as usize;
        self.hop_left[hop] -= 1;
        let kids = std::mem::take(&mut self.children[i as usize]);
        for c in kids {
            self.maybe_start(c, now);
        }
        if self.d.barrier {
            self.advance_gate();
        }
    }

    fn handle(&mut self, kind: u8, i: u32, pg: u32) {
        match kind {
            E_READY => self.begin(i),
            E_GATE => {
                self.gate_pending = false;
                self.open_gate();
                self.advance_gate();
            }
            E_OPDONE => {
                let op = self.ops[self.st[i as usize].op as usize];
                let r = self.res_of(op, i);
                if r != usize::MAX {
                    let arrived = self.st[i as usize].t_mark;
                    if let Some((w, p)) = self.res[r].release(self.now, arrived) {
                        self.push(self.now, E_GRANT, w, p);
                    }
                }
                self.st[i as usize].op += 1;
                self.run_ops(i);
            }
            E_GRANT => {
                if pg == NOPAGE {
                    let op = self.ops[self.st[i as usize].op as usize];
                    if let Op::TokenAcq = op {
                        let st = &mut self.st[i as usize];
                        st.cats[HOST] += self.now - st.t_token;
                        st.op += 1;
                        self.run_ops(i);
                    } else {
                        self.granted_op(i, op);
                    }
                } else {
                    match self.pages[pg as usize].phase {
                        0 => self.die_granted(i, pg),
                        1 => self.ch_granted(i, pg),
                        _ => self.dram_granted(i, pg),
                    }
                }
            }
            E_TR => {
                let now = self.now;
                let ch = self.r_ch(self.pages[pg as usize].ch);
                let ps = &mut self.pages[pg as usize];
                ps.t_ch = now;
                if self.res[ch].acquire(now, (i, pg)) {
                    self.ch_granted(i, pg);
                }
            }
            E_XFER => {
                let now = self.now;
                let (ch, die, t_ch, t_die) = {
                    let ps = &self.pages[pg as usize];
                    (self.r_ch(ps.ch), self.r_die(ps.die), ps.t_ch, ps.t_die)
                };
                if let Some((w, p)) = self.res[ch].release(now, t_ch) {
                    self.push(now, E_GRANT, w, p);
                }
                if self.multi_plane {
                    let d = self.pages[pg as usize].die as usize;
                    self.group_left[d] -= 1;
                    if self.group_left[d] == 0 {
                        let group = std::mem::take(&mut self.die_group[d]);
                        for &m in &group[1..] {
                            let t = self.pages[m as usize].t_die;
                            self.res[die].leave(now, t);
                        }
                        let t0 = self.pages[group[0] as usize].t_die;
                        self.die_group[d] = group;
                        if let Some((w, p)) = self.res[die].release(now, t0) {
                            self.push(now, E_GRANT, w, p);
                        }
                    }
                } else if let Some((w, p)) = self.res[die].release(now, t_die) {
                    self.push(now, E_GRANT, w, p);
                }
                if !self.d.channel_used_only {
                    let r = self.r_dram(self.dev_of(i));
                    let ps = &mut self.pages[pg as usize];
                    ps.t_dram = now;
                    ps.phase = 3;
                    if self.res[r].acquire(now, (i, pg)) {
                        self.dram_granted(i, pg);
                    }
                } else {
                    self.page_done(i, pg);
                }
            }
            E_DRAM => {
                let now = self.now;
                let (t, lpn, hit) = {
                    let ps = &self.pages[pg as usize];
                    (ps.t_dram, ps.lpn, ps.hit)
                };
                let dev = self.dev_of(i);
                let r = self.r_dram(dev);
                if let Some((w, p)) = self.res[r].release(now, t) {
                    self.push(now, E_GRANT, w, p);
                }
                if !hit {
                    if let Some(c) = self.cache.get_mut(dev) {
                        c.insert(lpn);
                    }
                }
                self.page_done(i, pg);
            }
            _ => unreachable!(),
        }
    }

    /// Totals after the last batch.
    pub fn result(&mut self) -> DesignResult {
        let now = self.now;
        for r in self.res.iter_mut() {
            r.tick(now);
        }
        self.inflight_delta(true);
        self.inflight -= 1; // close the integrals at `now` without changing the count
        let secs = now as f64 / 1e12;
        let b = self.batches.max(1) as f64;
        let t = secs.max(1e-300);
        let q = |rs: &[Res]| {
            let arrivals: u64 = rs.iter().map(|r| r.arrivals).sum();
            let area: u128 = rs.iter().map(|r| r.area).sum();
            let busy: u128 = rs.iter().map(|r| r.busy_area).sum();
            let soj: u128 = rs.iter().map(|r| r.sojourn).sum();
            QueueStats {
                arrivals,
                mean_occupancy: area as f64 / now.max(1) as f64,
                arrival_rate: arrivals as f64 / t,
                mean_sojourn_s: if arrivals > 0 { soj as f64 / arrivals as f64 / 1e12 } else { 0.0 },
                mean_busy: busy as f64 / now.max(1) as f64,
            }
        };
        let mut queues = std::collections::BTreeMap::new();
        let nd = self.n_dev as usize;
        queues.insert("queue_depth_tokens".to_string(), q(&self.res[R_TOKEN..R_TOKEN + 1]));
        queues.insert("host_cpu".to_string(), q(&self.res[R_HOSTCPU..R_HOSTCPU + 1]));
        queues.insert("pcie".to_string(), q(&self.res[self.r_pcie(0)..self.r_pcie(nd)]));
        queues.insert("controller_cores".to_string(), q(&self.res[self.r_cores(0)..self.r_cores(nd)]));
        queues.insert("ssd_dram".to_string(), q(&self.res[self.r_dram(0)..self.r_dram(nd)]));
        queues.insert("channels".to_string(), q(&self.res[self.r_chs()]));
        queues.insert("dies".to_string(), q(&self.res[self.r_dies()]));
        let mut devices = Vec::new();
        if nd > 1 {
            let (c, di) = (self.n_ch, self.n_die);
            for k in 0..nd {
                let one = |r: usize| q(&self.res[r..r + 1]);
                let mut dq = std::collections::BTreeMap::new();
                dq.insert("nvme_queue".to_string(), one(self.r_nvq(k)));
                dq.insert("pcie".to_string(), one(self.r_pcie(k)));
                dq.insert("controller_cores".to_string(), one(self.r_cores(k)));
                dq.insert("ssd_dram".to_string(), one(self.r_dram(k)));
                let k32 = k as u32;
                dq.insert("channels".to_string(), q(&self.res[self.r_ch(k32 * c)..self.r_ch((k32 + 1) * c)]));
                dq.insert("dies".to_string(), q(&self.res[self.r_die(k32 * di)..self.r_die((k32 + 1) * di)]));
                devices.push(DeviceStats {
                    device: k32,
                    reads: self.dev_reads[k],
                    flash_commands: self.dev_cmds[k],
                    queues: dq,
                });
            }
        }
        let active_ch = queues["channels"].mean_busy;
        let active_die = queues["dies"].mean_busy;
        let c = self.cfg;
        let e = &c.energy;
        let mut en = Energy {
            flash_reads_j: e.voltage * e.read_current_ma * 1e-3 * self.tr_ps as f64 / 1e12,
            channel_j: e.voltage * e.bus_current_ma * 1e-3 * self.xfer_ps as f64 / 1e12,
            ssd_dram_j: self.bytes_dram as f64 * 8.0 * e.ssd_dram_pj_per_bit * 1e-12,
            controller_j: e.controller_core_mw * 1e-3 * self.core_ps as f64 / 1e12,
            pcie_j: self.bytes_pcie as f64 * 8.0 * e.pcie_pj_per_bit * 1e-12,
            // Written by the DMA and read once by the host.
            host_dram_j: (2 * self.bytes_host + self.bytes_host_read) as f64 * 8.0 * e.host_dram_pj_per_bit * 1e-12,
            host_cpu_j: e.host_core_mw * 1e-3 * self.hostcpu_ps as f64 / 1e12,
            die_sampler_j: e.sampler_mw * 1e-3 * self.sampler_ps as f64 / 1e12,
        };
        en.scale(1.0 / b);
        let io_per_batch = secs / b;
        let compute = self.compute_s / b;
        let per_batch = io_per_batch.max(compute);
        let mut breakdown = std::collections::BTreeMap::new();
        for k in 0..7 {
            breakdown.insert(CATS[k].to_string(), self.breakdown[k] as f64 / 1e12 / b);
        }
        DesignResult {
            design: self.d.name.to_string(),
            batches: self.batches,
            targets: self.targets,
            reads: self.nreads,
            reads_served: self.served,
            flash_commands: self.flash_cmds,
            dram_cache_hits: self.cache_hits,
            dram_cache_misses: self.cache_misses,
            io_seconds: secs,
            compute_s_per_batch: compute,
            batches_per_s: if per_batch > 0.0 { 1.0 / per_batch } else { 0.0 },
            targets_per_s: if per_batch > 0.0 { self.targets as f64 / b / per_batch } else { 0.0 },
            batch_latency_s: io_per_batch,
            traced_batch_latency_s: None,
            breakdown_s: breakdown,
            mean_reads_in_flight: self.inflight_area as f64 / now.max(1) as f64,
            mean_queue_depth: if self.d.sample_at == SampleAt::Host {
                queues["queue_depth_tokens"].mean_busy
            } else {
                self.inflight_area as f64 / now.max(1) as f64
            },
            mean_active_channels: active_ch,
            mean_active_dies: active_die,
            bytes_pcie: self.bytes_pcie,
            bytes_channel: self.bytes_channel,
            energy_per_batch_total_j: en.total(),
            energy_per_batch_j: en,
            queues,
            queue_depth_hist: self.qd_hist.iter().map(|&x| x as f64 / now.max(1) as f64).collect(),
            queue_depth_hist_lo: qd_bucket_lows(),
            timeline: self.timeline.clone(),
            devices,
        }
    }
}

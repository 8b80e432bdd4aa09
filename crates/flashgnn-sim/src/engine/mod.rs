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
//!
//! This file owns the [`Engine`]'s state, its construction from a config
//! and a design, the resource layout and the address mapping. The rest is
//! split by concern, each an `impl Engine` of its own:
//!
//! - `batch`: one batch from its reads to its critical path, the event loop
//!   and the hop gate;
//! - `ops`: a read's per-design op sequence on the host, the NVMe queue,
//!   PCIe and the controller's cores;
//! - `flash`: a read's pages on the dies, the channels and SSD DRAM,
//!   multi-plane groups and the SSD-DRAM page cache;
//! - `queue`: the FIFO resource and the LRU page cache;
//! - `report`: the public result types and the totals after the last batch.
//!
//! Invariants, for every part: the same trace, config and seed give the same
//! result, byte for byte (no wall clock, no hash-order iteration, ties in
//! time broken by the event sequence number); memory is bounded by one
//! trace block (the caller streams the trace with [`crate::trace`]) and one
//! batch, plus the page cache's configured size.

mod batch;
mod flash;
mod ops;
mod queue;
mod report;

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use flashgnn_format::trace::TraceRead;

use crate::config::Config;
use crate::design::{Design, Firmware, Pcie, SampleAt};
use queue::{Lru, Res};
pub(crate) use report::{qd_bucket, qd_bucket_lows, QD_BUCKETS};
pub use report::{DesignResult, DeviceStats, Energy, QueueStats, Timeline, TIMELINE_MAX};

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
}

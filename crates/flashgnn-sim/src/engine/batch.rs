//! One batch of the replay: its reads loaded and split at stripe-chunk
//! boundaries, their dependencies and hops linked, the event loop that runs
//! them to completion, the hop gate (designs with a barrier between hops),
//! the per-batch prologue and epilogue, the critical path that fills the
//! latency breakdown, and the timeline samples.
//!
//! Batches run one after another from the time the previous one ended;
//! everything per batch is rebuilt when the next one is loaded, so memory is
//! one batch's. Events are popped in (time, sequence number) order and
//! reads are issued in trace order, so a replay is deterministic.

use std::cmp::Reverse;

use flashgnn_format::trace::{TraceRead, KIND_SLOT_PAGE, NO_DEP};

use super::queue::Res;
use super::{
    Engine, ReadState, BARRIER, E_DRAM, E_GATE, E_GRANT, E_OPDONE, E_READY, E_TR, E_XFER, HOST, NOPAGE, PCIE,
    TIMELINE_MAX,
};
use crate::design::{Pcie, SampleAt};

impl<'a> Engine<'a> {
    /// Replay one batch (its reads in issue order) starting now.
    /// `targets`: seeds in the batch (from the trace header); None estimates
    /// them from the hop-0 slot reads.
    pub fn run_batch(&mut self, reads: Vec<TraceRead>, targets_hint: Option<u64>) {
        let n = reads.len();
        let start = self.now;
        let order = self.load_batch(reads);
        let (targets, nodes) = self.link_reads(&order);
        let targets = targets_hint.unwrap_or(targets);
        self.left = n as u64;
        self.gate = 0;
        self.gate_pending = false;
        self.advance_gate();
        // Prologue: in-storage designs take one NVMe command per batch.
        let pro = if self.d.sample_at == SampleAt::Host { 0 } else { self.half_stack + self.nvme };
        let t0 = start + pro;
        // The prologue is a pure delay: the first commands reach the device at t0.
        self.now = t0;
        self.issue_ready(&order, t0);
        self.run_events();
        let (end, epi) = self.epilogue(pro, targets);
        let path = self.critical_path(start, pro, end, epi);
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

    /// Make `reads` the batch under replay, every per-batch table sized for
    /// it. Returns the issue order (each read followed by its parts).
    fn load_batch(&mut self, reads: Vec<TraceRead>) -> Vec<u32> {
        let n = reads.len();
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
        order
    }

    /// Link every read to the read it depends on, give it its effective hop
    /// and count the reads left per hop. Returns (targets, nodes) as the
    /// hop-0 and all slot reads' items say.
    fn link_reads(&mut self, order: &[u32]) -> (u64, u64) {
        let n = self.n_orig;
        let mut targets = 0u64;
        let mut nodes = 0u64;
        for &i in order {
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
        (targets, nodes)
    }

    /// Start (or park behind the gate) every read without a dependency, in
    /// issue order, at `t0`.
    fn issue_ready(&mut self, order: &[u32], t0: u64) {
        for &i in order {
            let i = i as usize;
            if !self.st[i].waiting_dep {
                self.st[i].ready_at = t0;
                self.maybe_start(i as u32, t0);
            }
        }
    }

    /// The event loop: handle events in time order until none is left.
    fn run_events(&mut self) {
        while let Some(Reverse((t, _, kind, read, page))) = self.heap.pop() {
            if t >= self.next_sample {
                self.sample(t);
            }
            self.now = t;
            self.handle(kind, read, page);
        }
    }

    /// The batch's tail after its last read: the gathered subgraph or the
    /// output over PCIe, the in-storage designs' completion to the host.
    /// Returns the batch's end time and the prologue's and epilogue's time
    /// by category.
    fn epilogue(&mut self, pro: u64, targets: u64) -> (u64, [u64; 7]) {
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
        (end, epi)
    }

    /// The batch's time by category along its critical path: `epi`, then
    /// from the last read to finish back through its dependencies; sums to
    /// the batch's span `start..end`.
    fn critical_path(&self, start: u64, pro: u64, end: u64, epi: [u64; 7]) -> [u64; 7] {
        let n = self.n_orig;
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
        path
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

    pub(super) fn advance_gate(&mut self) {
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
    pub(super) fn maybe_start(&mut self, i: u32, t: u64) {
        let s = &mut self.st[i as usize];
        s.waiting_dep = false;
        if self.d.barrier && s.hop > self.gate {
            self.parked[s.hop as usize].push(i);
            return;
        }
        s.ready_at = t;
        self.begin(i);
    }

    fn handle(&mut self, kind: u8, i: u32, pg: u32) {
        match kind {
            E_READY => self.begin(i),
            E_GATE => {
                self.gate_pending = false;
                self.open_gate();
                self.advance_gate();
            }
            E_OPDONE => self.op_done(i),
            E_GRANT => {
                if pg == NOPAGE {
                    self.op_granted(i);
                } else {
                    self.page_granted(i, pg);
                }
            }
            E_TR => self.tr_done(i, pg),
            E_XFER => self.xfer_done(i, pg),
            E_DRAM => self.dram_done(i, pg),
            _ => unreachable!(),
        }
    }
}

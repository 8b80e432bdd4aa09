//! What a replay reports: the public result types ([`DesignResult`] and the
//! queue, energy, device and timeline figures in it), the queue-depth
//! histogram's buckets, and [`Engine::result`], which turns the engine's
//! running totals into one design's result after the last batch.
//!
//! Every figure is a function of the integer totals the engine kept (times
//! in picoseconds, bytes, counts), computed in a fixed order, so the same
//! replay gives the same bytes. The timeline keeps at most [`TIMELINE_MAX`]
//! points however long the trace.

use serde::Serialize;

use super::queue::Res;
use super::{Engine, CATS, R_HOSTCPU, R_TOKEN};
use crate::design::SampleAt;

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

impl<'a> Engine<'a> {
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

//! Engine telemetry: per batch and cumulative — reads, bytes read against
//! bytes used (read amplification), IOPS, MB/s, histograms of reads in flight
//! and of request sizes, a depth timeline, CPU time per read.

use flashgnn_io::engine::IoCounters;

/// Samples kept in the cumulative in-flight timeline: one per completion
/// round, the first 64 Ki (about 16 batches at full depth).
pub const TIMELINE_MAX: usize = 65536;

#[derive(Debug, Clone, Default)]
pub struct Telemetry {
    pub batches: u64,
    pub seeds: u64,
    pub nodes: u64,
    pub edges: u64,
    pub reads: u64,
    pub bytes_read: u64,
    pub bytes_used: u64,
    /// Page requests served from pages already read in the same batch.
    pub page_hits: u64,
    /// Requests served by the cross-batch cache's static hot set / dynamic
    /// part: reads saved.
    pub cache_static_hits: u64,
    pub cache_dynamic_hits: u64,
    pub seconds: f64,
    pub cpu_seconds: f64,
    /// Wall seconds the producer blocked waiting for a read with nothing
    /// else to do (no request served from memory pending), and how often.
    pub io_wait_seconds: f64,
    pub io_waits: u64,
    pub depth_hist: [u64; 16],
    pub size_hist: [u64; 15],
    /// (seconds since engine open, reads in flight) samples.
    pub timeline: Vec<(f64, u32)>,
}

impl Telemetry {
    pub fn absorb_io(&mut self, before: &IoCounters, after: &IoCounters) {
        self.reads += after.reads - before.reads;
        self.bytes_read += after.bytes - before.bytes;
        for i in 0..16 {
            self.depth_hist[i] += after.depth_hist[i] - before.depth_hist[i];
        }
        for i in 0..15 {
            self.size_hist[i] += after.size_hist[i] - before.size_hist[i];
        }
    }
    pub fn add(&mut self, o: &Telemetry) {
        self.batches += o.batches;
        self.seeds += o.seeds;
        self.nodes += o.nodes;
        self.edges += o.edges;
        self.reads += o.reads;
        self.bytes_read += o.bytes_read;
        self.bytes_used += o.bytes_used;
        self.page_hits += o.page_hits;
        self.cache_static_hits += o.cache_static_hits;
        self.cache_dynamic_hits += o.cache_dynamic_hits;
        self.seconds += o.seconds;
        self.cpu_seconds += o.cpu_seconds;
        self.io_wait_seconds += o.io_wait_seconds;
        self.io_waits += o.io_waits;
        for i in 0..16 {
            self.depth_hist[i] += o.depth_hist[i];
        }
        for i in 0..15 {
            self.size_hist[i] += o.size_hist[i];
        }
        for s in &o.timeline {
            if self.timeline.len() < TIMELINE_MAX {
                self.timeline.push(*s);
            }
        }
    }
    pub fn read_amplification(&self) -> f64 {
        if self.bytes_used == 0 {
            0.0
        } else {
            self.bytes_read as f64 / self.bytes_used as f64
        }
    }
    /// Share of extent requests the cross-batch cache served (hits / (hits + reads)).
    pub fn cache_hit_rate(&self) -> f64 {
        let h = self.cache_static_hits + self.cache_dynamic_hits;
        if h + self.reads > 0 {
            h as f64 / (h + self.reads) as f64
        } else {
            0.0
        }
    }
    pub fn iops(&self) -> f64 {
        if self.seconds > 0.0 {
            self.reads as f64 / self.seconds
        } else {
            0.0
        }
    }
    /// Device read bandwidth over the wall time, in MB/s (10^6 bytes).
    pub fn read_mb_per_s(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes_read as f64 / self.seconds / 1e6
        } else {
            0.0
        }
    }
    /// Sampler CPU time per read, in microseconds: what one read costs the host.
    pub fn cpu_us_per_read(&self) -> f64 {
        if self.reads > 0 {
            self.cpu_seconds * 1e6 / self.reads as f64
        } else {
            0.0
        }
    }
}

pub use flashgnn_io::rss::thread_cpu_seconds;

//! Reads in flight as the real engine measured them, from a trace's own
//! submit/complete timestamps (docs/trace.md): the measured counterpart of
//! the simulator's queue-depth timeline and histogram (docs/simulator.md,
//! "Against this machine").
//!
//! Time is *batch I/O time*: each batch's window runs from its first
//! submission to its last completion, and the windows are laid end to end
//! (the gaps between batches — Python, trace writing — are left out), the
//! same axis as the simulator's back-to-back batches. Memory is bounded by
//! one batch plus [`TIMELINE_MAX`] samples, whatever the trace's length.
//! Active channels and dies cannot be observed on a real device and are not
//! reported.

use std::path::Path;

use serde::Serialize;

use flashgnn_format::trace::{KIND_OVERFLOW_PAGE, KIND_SLOT_PAGE};

use crate::engine::{qd_bucket, qd_bucket_lows, QD_BUCKETS, TIMELINE_MAX};
use crate::trace::TraceReader;
use crate::Result;

#[derive(Debug, Clone, Default, Serialize)]
pub struct Measured {
    pub trace: String,
    /// Batches with recorded times (a batch without them is skipped).
    pub batches: u64,
    pub batches_total: u64,
    pub reads: u64,
    /// Nodes served by slot and overflow page reads (the `items` the
    /// simulator charges `host.cpu_ns_per_node` for).
    pub page_nodes: u64,
    /// Each timed batch's window (s), reads and page nodes, in order.
    pub batch_io_s: Vec<f64>,
    pub batch_reads: Vec<u64>,
    pub batch_page_nodes: Vec<u64>,
    /// Sum of the batches' windows (s) and its mean per batch.
    pub io_time_s: f64,
    pub batch_latency_s: f64,
    /// Time-average reads in flight over the windows.
    pub mean_reads_in_flight: f64,
    pub max_reads_in_flight: u32,
    /// Share of the windows' time with N reads in flight (buckets by lower bound).
    pub queue_depth_hist: Vec<f64>,
    pub queue_depth_hist_lo: Vec<u64>,
    /// Evenly spaced samples over batch I/O time (at most [`TIMELINE_MAX`]).
    pub t_s: Vec<f64>,
    pub reads_in_flight: Vec<u32>,
}

/// Stream `path` and measure reads in flight per batch.
pub fn measure(path: &Path) -> Result<Measured> {
    let mut r = TraceReader::open(path)?;
    let mut m = Measured { trace: path.display().to_string(), ..Default::default() };
    let mut hist_ns = [0u128; QD_BUCKETS];
    let mut area_ns: u128 = 0; // integral of reads in flight over time (read-ns)
    let mut base_ns: u64 = 0; // start of this batch's window on the I/O-time axis
    let (mut every_ns, mut next_ns) = (1_000u64, 0u64); // 1 us, doubled whenever the timeline fills
    let mut ev: Vec<(u64, i32)> = Vec::new();
    while let Some(b) = r.next_batch()? {
        m.batches_total += 1;
        ev.clear();
        let mut nodes = 0u64;
        for x in b.iter().filter(|x| x.submit_ns > 0 && x.complete_ns >= x.submit_ns) {
            ev.push((x.submit_ns, 1));
            ev.push((x.complete_ns, -1));
            if x.kind == KIND_SLOT_PAGE || x.kind == KIND_OVERFLOW_PAGE {
                nodes += x.items as u64;
            }
        }
        if ev.is_empty() {
            continue;
        }
        // Completions before submissions at the same instant: a zero-length read is never "in flight".
        ev.sort_unstable();
        let t0 = ev[0].0;
        let (mut cur, mut last) = (0i64, t0);
        for &(t, d) in &ev {
            if t > last {
                let n = cur.max(0) as u32;
                let dt = t - last;
                hist_ns[qd_bucket(n as u64)] += dt as u128;
                area_ns += n as u128 * dt as u128;
                // Samples falling in [last, t) on the I/O-time axis see n reads in flight.
                let (lo, hi) = (base_ns + (last - t0), base_ns + (t - t0));
                while next_ns < hi {
                    if next_ns >= lo {
                        m.t_s.push(next_ns as f64 / 1e9);
                        m.reads_in_flight.push(n);
                    }
                    next_ns += every_ns;
                    if m.t_s.len() >= TIMELINE_MAX {
                        m.t_s = m.t_s.iter().step_by(2).copied().collect();
                        m.reads_in_flight = m.reads_in_flight.iter().step_by(2).copied().collect();
                        every_ns *= 2;
                        next_ns = m.t_s.last().map_or(0, |&t| (t * 1e9).round() as u64) + every_ns;
                    }
                }
                last = t;
            }
            cur += d as i64;
            m.max_reads_in_flight = m.max_reads_in_flight.max(cur.max(0) as u32);
        }
        base_ns += last - t0;
        m.batch_io_s.push((last - t0) as f64 / 1e9);
        m.page_nodes += nodes;
        m.batch_reads.push((ev.len() / 2) as u64);
        m.batch_page_nodes.push(nodes);
        m.batches += 1;
        m.reads += (ev.len() / 2) as u64;
    }
    let total = base_ns.max(1) as f64;
    m.io_time_s = base_ns as f64 / 1e9;
    m.batch_latency_s = if m.batches > 0 { m.io_time_s / m.batches as f64 } else { 0.0 };
    m.mean_reads_in_flight = area_ns as f64 / total;
    m.queue_depth_hist = hist_ns.iter().map(|&x| x as f64 / total).collect();
    m.queue_depth_hist_lo = qd_bucket_lows();
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flashgnn_format::trace::{TraceHeader, TraceRead, NO_DEP, TRACE_VERSION};

    fn read(batch: u32, index: u32, s: u64, c: u64) -> TraceRead {
        TraceRead {
            batch,
            index,
            file: 0,
            kind: 0,
            hop: 0,
            offset: index as u64 * 4096,
            length: 4096,
            dep: NO_DEP,
            bytes_used: 64,
            items: 1,
            node: index,
            submit_ns: s,
            complete_ns: c,
        }
    }

    /// Two batches: reads [10,20) and [15,40) then one read [100,150). The
    /// windows are 30 ns and 50 ns; in flight: 1 for 5, 2 for 5, 1 for 20 in
    /// batch 0, and 1 for 50 in batch 1: mean (5 + 10 + 20 + 50) / 80.
    #[test]
    fn in_flight_from_timestamps() {
        let dir = std::env::temp_dir().join(format!("fg-measured-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("m.fgt");
        let h = TraceHeader { version: TRACE_VERSION, dataset_id: 1, page_size: 4096, params: "{}".into() };
        let mut w = crate::trace::TraceWriter::create(&p, &h).unwrap();
        w.write_batch(&[read(0, 0, 10, 20), read(0, 1, 15, 40)]).unwrap();
        w.write_batch(&[read(1, 0, 100, 150)]).unwrap();
        w.finish().unwrap();
        let m = measure(&p).unwrap();
        assert_eq!((m.batches, m.reads, m.max_reads_in_flight, m.page_nodes), (2, 3, 2, 3));
        assert_eq!(
            (m.batch_io_s.len(), &m.batch_reads[..], &m.batch_page_nodes[..]),
            (2, &[2u64, 1][..], &[2u64, 1][..])
        );
        assert!((m.io_time_s - 80e-9).abs() < 1e-15);
        assert!((m.mean_reads_in_flight - 85.0 / 80.0).abs() < 1e-12);
        assert!((m.queue_depth_hist[1] - 75.0 / 80.0).abs() < 1e-12); // exactly 1 in flight
        assert!((m.queue_depth_hist[2] - 5.0 / 80.0).abs() < 1e-12); // 2-3
        assert!((m.queue_depth_hist.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        std::fs::remove_dir_all(&dir).ok();
    }
}

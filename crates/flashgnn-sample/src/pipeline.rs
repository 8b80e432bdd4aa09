//! The multi-producer prefetch pipeline: an epoch's mini-batches sampled on
//! background threads, handed out in order.
//!
//! ```text
//!  order ─┬─► producer 0: batches 0, W, 2W, …  ─► channel 0 (⌈prefetch/W⌉) ─┐
//!         ├─► producer 1: batches 1, W+1, …    ─► channel 1                ─┼─► next(): batch i from channel i mod W
//!         └─► producer W-1 …                                               ─┘
//! ```
//!
//! - Each producer owns its own sampler (its own ring and buffers), opened
//!   through the [`Follow`] (so it follows a live graph's generations) and
//!   takes every W-th batch: one batch's tail overlaps the next one's head.
//! - Batch i is the seeds `order[i*B .. (i+1)*B]` under batch seed
//!   `seed + i`, so the batches — and their order — do not depend on the
//!   number of producers. A link epoch ([`Pipeline::start_links`]) cuts
//!   its supervision edges the same way: batch i is edges `i*B ..
//!   (i+1)*B` under `seed + i` (`crate::link`).
//! - At most `prefetch` finished batches wait in all (rounded up to a
//!   multiple of W): the memory bound `flashgnn.budget` counts.
//! - An error in a producer (opening its sampler, a batch) is handed out in
//!   that batch's place; the epoch then ends. A producer that dies without a
//!   word (a panic) is reported as [`SampleError::Internal`], never as the
//!   epoch's end.
//! - [`Pipeline::finish`] (or dropping the pipeline) closes the channels — a
//!   producer's next send fails and it stops after its current batch — and
//!   joins every producer; their telemetry is summed.
//!
//! Fork: the producer threads exist only in the process that started them.
//! A pipeline that crossed a fork must be leaked there (`std::mem::forget`),
//! not dropped — the bindings do that.

use std::ops::Range;
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::follow::Follow;
use crate::{Batch, LinkSpec, NeighborSampler, Result, SampleError, Telemetry};

/// Most producer threads one pipeline starts (more are clamped to it); each
/// holds its own ring and [`crate::ENGINE_BYTES_PER_PRODUCER`] of buffers.
pub const MAX_PRODUCERS: usize = 16;

/// How an epoch is cut and how far ahead it is sampled.
#[derive(Debug, Clone)]
pub struct PipelineOptions {
    /// Seeds per batch (> 0).
    pub batch_size: usize,
    /// Batch i uses batch seed `seed + i` (wrapping).
    pub seed: u64,
    /// Finished batches waiting at most, over all producers (at least 1).
    pub prefetch: usize,
    /// Drop the last batch when it is short.
    pub drop_last: bool,
    /// Producer threads, clamped to [1, [`MAX_PRODUCERS`]].
    pub producers: usize,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        PipelineOptions { batch_size: 1024, seed: 0, prefetch: 4, drop_last: false, producers: 1 }
    }
}

/// A running epoch. Iterate it (or call [`Pipeline::next_batch`]) for the
/// batches in order; it ends after the last batch or the first error.
pub struct Pipeline {
    rxs: Option<Vec<Receiver<Result<Batch>>>>,
    next: usize,
    total: usize,
    handles: Vec<JoinHandle<Telemetry>>,
    telemetry: Option<Telemetry>,
}

impl Pipeline {
    /// Start the producers over `order`. Refuses `batch_size == 0`.
    pub fn start(follow: &Follow, order: Arc<Vec<i64>>, opts: &PipelineOptions) -> Result<Pipeline> {
        let len = order.len();
        Self::spawn(follow, len, opts, move |follow, s, range, seed| follow.sample(s, &order[range], seed))
    }

    /// Start the producers over the supervision edges `src[i] -> dst[i]`
    /// (in epoch order), one link batch per `batch_size` edges drawn by
    /// `spec`. Refuses `batch_size == 0` and `src`, `dst` of different
    /// lengths.
    pub fn start_links(
        follow: &Follow,
        src: Arc<Vec<i64>>,
        dst: Arc<Vec<i64>>,
        spec: Arc<LinkSpec>,
        opts: &PipelineOptions,
    ) -> Result<Pipeline> {
        if src.len() != dst.len() {
            return Err(SampleError::BadRequest(format!(
                "link epoch: {} sources but {} destinations",
                src.len(),
                dst.len()
            )));
        }
        let len = src.len();
        Self::spawn(follow, len, opts, move |follow, s, range, seed| {
            follow.sample_link(s, &src[range.clone()], &dst[range], &spec, seed)
        })
    }

    /// Producers cutting `len` inputs into batches; `batch` samples the
    /// inputs in a range with a batch seed.
    fn spawn(
        follow: &Follow,
        len: usize,
        opts: &PipelineOptions,
        batch: impl Fn(&Follow, &mut NeighborSampler, Range<usize>, u64) -> Result<Batch> + Send + Sync + 'static,
    ) -> Result<Pipeline> {
        let bs = opts.batch_size;
        if bs == 0 {
            return Err(SampleError::Config("batch_size must be > 0".into()));
        }
        let batch = Arc::new(batch);
        let workers = opts.producers.clamp(1, MAX_PRODUCERS);
        let total = if opts.drop_last { len / bs } else { len.div_ceil(bs) };
        let per_worker = opts.prefetch.max(1).div_ceil(workers);
        let mut rxs = Vec::with_capacity(workers);
        let mut handles = Vec::with_capacity(workers);
        for w in 0..workers {
            let (tx, rx) = sync_channel(per_worker);
            let (follow, batch, seed) = (follow.clone(), batch.clone(), opts.seed);
            let spawned = std::thread::Builder::new().name(format!("flashgnn-producer-{w}")).spawn(move || {
                let mut s = match follow.open() {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return Telemetry::default();
                    }
                };
                for i in (w..total).step_by(workers) {
                    let r = batch(&follow, &mut s, i * bs..((i + 1) * bs).min(len), seed.wrapping_add(i as u64));
                    let stop = r.is_err();
                    if tx.send(r).is_err() || stop {
                        break;
                    }
                }
                s.telemetry.clone()
            });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    // Stop and join the producers already started before failing.
                    drop(rxs);
                    for h in handles {
                        let _ = h.join();
                    }
                    return Err(SampleError::Internal(format!("starting producer thread {w}: {e}")));
                }
            }
            rxs.push(rx);
        }
        Ok(Pipeline { rxs: Some(rxs), next: 0, total, handles, telemetry: None })
    }

    /// Batches in the epoch (the last one short unless `drop_last`).
    pub fn len(&self) -> usize {
        self.total
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The next batch in order (blocking until its producer has it), its
    /// producer's error, or None once the epoch is over or stopped.
    pub fn next_batch(&mut self) -> Option<Result<Batch>> {
        let i = self.next;
        let rxs = self.rxs.as_ref()?;
        if i >= self.total {
            self.finish();
            return None;
        }
        let w = i % rxs.len();
        let got = rxs[w].recv();
        match got {
            Ok(Ok(b)) => {
                self.next = i + 1;
                Some(Ok(b))
            }
            Ok(Err(e)) => {
                self.finish();
                Some(Err(e))
            }
            Err(_) => {
                self.finish();
                Some(Err(SampleError::Internal(format!(
                    "producer thread {w} stopped before batch {i} of {} without an error (it panicked)",
                    self.total
                ))))
            }
        }
    }

    /// Stop the producers (each stops after its current batch), join them
    /// and return their summed telemetry. Idempotent.
    pub fn finish(&mut self) -> &Telemetry {
        self.rxs.take(); // producers' sends fail -> they stop
        if self.telemetry.is_none() || !self.handles.is_empty() {
            let mut t = self.telemetry.take().unwrap_or_default();
            for h in self.handles.drain(..) {
                if let Ok(x) = h.join() {
                    t.add(&x);
                }
            }
            self.telemetry = Some(t);
        }
        self.telemetry.as_ref().expect("set above")
    }

    /// The producers' summed telemetry, once the epoch is over or stopped.
    pub fn telemetry(&self) -> Option<&Telemetry> {
        self.telemetry.as_ref()
    }
}

impl Iterator for Pipeline {
    type Item = Result<Batch>;
    fn next(&mut self) -> Option<Result<Batch>> {
        self.next_batch()
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        self.finish();
    }
}

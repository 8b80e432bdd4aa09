//! The sorted edge keys as the layout pass reads them: [`EdgeStream`]
//! merges the two sorters' outputs (the input's copies and `--symmetrize`'s
//! added reverse copies), keeps one copy per key under `--dedup` and counts
//! what both options found; [`PipedEdges`] drains it on its own thread;
//! [`KeyStream`] is whichever source the layout pass reads (that stream,
//! `edges.sorted`, or the relabelling sort's merge).
//!
//! Invariants: keys come out ascending (`dst << 32 | src`), one per stored
//! entry; between the merge thread and the layout at most [`PIPE_BLOCKS`]
//! blocks of [`PIPE_BLOCK_KEYS`] keys are in flight; the `--dedup` counts
//! come from the pushed totals, not from the merge (runs may hold one copy
//! per key already).

use crate::sort::{KeyFileReader, Merged};
use crate::{BuildError, Result};

/// What `--symmetrize` found and did (all 0 without it).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ReverseCounts {
    /// Distinct directed input edges `u -> v` (`u != v`).
    pub(super) distinct_input: u64,
    /// ... of which the input also holds `v -> u`.
    pub(super) present: u64,
    /// Added reverse copies that `--dedup` removed because the entry was
    /// there already (an input edge, or another added copy).
    pub(super) merged: u64,
}

impl ReverseCounts {
    /// Count one group of equal keys `k`: `a` input copies, `b` added reverse copies.
    #[inline]
    fn group(&mut self, k: u64, a: u64, b: u64) {
        if (k >> 32) != (k & 0xffff_ffff) && a > 0 {
            self.distinct_input += 1;
            self.present += (b > 0) as u64;
        }
    }
}

/// One sorted input of [`EdgeStream`], read a block at a time.
struct SortedSide {
    m: Merged,
    buf: Vec<u64>,
    at: usize,
    done: bool,
}

impl SortedSide {
    fn new(m: Merged) -> SortedSide {
        SortedSide { m, buf: Vec::new(), at: 0, done: false }
    }

    /// The keys read and not yet taken; empty only when the side is drained.
    fn avail(&mut self) -> Result<&[u64]> {
        if self.at == self.buf.len() && !self.done {
            self.buf.clear();
            self.at = 0;
            self.m.next_block(&mut self.buf, PIPE_BLOCK_KEYS)?;
            self.done = self.buf.is_empty();
        }
        Ok(&self.buf[self.at..])
    }
}

/// The merged edge keys of the two sorters (input copies, added reverse
/// copies), yielded one per stored entry, with `--symmetrize`'s statistics
/// counted as the groups of equal keys go by (no `--dedup`: every copy is
/// stored, so the counts of the deduplicating merge reduce to these).
///
/// It works on blocks of both inputs: a branch-free two-way merge over
/// slices, the group logic inlined (per-key calls through [`Merged`] cost
/// ~10 ns per key, a third of an 8 GiB edge input's layout CPU).
pub(super) struct EdgeStream {
    a: SortedSide,
    b: SortedSide,
    symmetrize: bool,
    /// `--dedup`: each distinct key once (the rest of its group skipped);
    /// the keys pushed from the input and as added reverse copies, from
    /// which [`EdgeStream::dedup_removed`] derives the report's counts.
    pub(super) dedup: Option<(u64, u64)>,
    /// Current group (when `open`): key, input copies, added copies.
    open: bool,
    g_key: u64,
    g_input: u64,
    g_added: u64,
    pub(super) rc: ReverseCounts,
    /// Distinct keys with an input copy, and those that are only added
    /// reverse copies.
    input_keys: u64,
    reverse_only: u64,
    /// Keys read from the two merges (progress of a `--dedup` merge).
    pub(super) read: u64,
}

impl EdgeStream {
    pub(super) fn new(a: Merged, b: Merged, symmetrize: bool, dedup: Option<(u64, u64)>) -> EdgeStream {
        EdgeStream {
            a: SortedSide::new(a),
            b: SortedSide::new(b),
            symmetrize,
            dedup,
            open: false,
            g_key: 0,
            g_input: 0,
            g_added: 0,
            rc: ReverseCounts::default(),
            input_keys: 0,
            reverse_only: 0,
            read: 0,
        }
    }

    /// A drained `--dedup` stream's (duplicates removed, reverse copies
    /// merged): every pushed input copy beyond one per key that has one, and
    /// every added reverse copy except the one that stores a key with no
    /// input copy. (Runs may hold one copy per key already, so these come
    /// from the pushed totals, not from the merge.)
    pub(super) fn dedup_removed(&self) -> Option<(u64, u64)> {
        self.dedup.map(|(input, reverse)| (input - self.input_keys, reverse - self.reverse_only))
    }

    fn close_group(&mut self) {
        if std::mem::take(&mut self.open) {
            let (k, a, b) = (self.g_key, self.g_input, self.g_added);
            if self.symmetrize {
                self.rc.group(k, a, b);
            }
            self.input_keys += (a > 0) as u64;
            self.reverse_only += (a == 0 && b > 0) as u64;
        }
    }

    /// Take key `k` (an added reverse copy when `added`): counted in its
    /// group, and appended to `out` unless `--dedup` stored its key already.
    #[inline(always)]
    fn take(&mut self, k: u64, added: bool, keep_all: bool, out: &mut Vec<u64>) {
        if !self.open || k != self.g_key {
            self.close_group();
            (self.open, self.g_key, self.g_input, self.g_added) = (true, k, 0, 0);
            out.push(k);
        } else if keep_all {
            out.push(k);
        }
        self.g_added += added as u64;
        self.g_input += !added as u64;
    }

    /// Append the next stored keys to `out`, up to `max` in all; fewer
    /// (none added) only when both inputs are drained.
    pub(super) fn fill(&mut self, out: &mut Vec<u64>, max: usize) -> Result<()> {
        let keep_all = self.dedup.is_none();
        if !self.symmetrize && keep_all {
            // No reverse copies and no statistics to count: the input's merge.
            let before = out.len();
            self.a.m.next_block(out, max - before.min(max))?;
            self.read += (out.len() - before) as u64;
            return Ok(());
        }
        while out.len() < max {
            let na = self.a.avail()?.len();
            let nb = if self.symmetrize { self.b.avail()?.len() } else { 0 };
            if na == 0 && nb == 0 {
                self.close_group();
                break;
            }
            // Move the blocks out while merging them (`take` borrows self).
            let (sa, sb) = (std::mem::take(&mut self.a.buf), std::mem::take(&mut self.b.buf));
            let (mut i, mut j) = (self.a.at, self.b.at);
            if na > 0 && nb > 0 {
                while i < sa.len() && j < sb.len() && out.len() < max {
                    let (x, y) = (sa[i], sb[j]);
                    let added = y < x; // ties: the input copy first
                    let k = if added { y } else { x };
                    i += !added as usize;
                    j += added as usize;
                    self.take(k, added, keep_all, out);
                }
            } else if na > 0 {
                while i < sa.len() && out.len() < max {
                    self.take(sa[i], false, keep_all, out);
                    i += 1;
                }
            } else {
                while j < sb.len() && out.len() < max {
                    self.take(sb[j], true, keep_all, out);
                    j += 1;
                }
            }
            self.read += ((i - self.a.at) + (j - self.b.at)) as u64;
            (self.a.buf, self.b.buf, self.a.at, self.b.at) = (sa, sb, i, j);
        }
        Ok(())
    }
}

/// Keys per block handed from [`PipedEdges`]' thread to the layout pass.
pub(super) const PIPE_BLOCK_KEYS: usize = 1 << 16;
/// Blocks in flight between the two (4 x 512 KiB).
const PIPE_BLOCKS: usize = 4;

/// An [`EdgeStream`] drained on its own thread and handed over in blocks.
///
/// Why: the merge of the input's and the reverse copies' sorted streams and
/// the `--dedup` grouping cost ~10 ns per key, and inside the layout pass's
/// per-node loop they made that thread the build's bottleneck on a 2-core
/// machine (perf of an 8 GiB edge input: the bucket sort workers blocked
/// on handing over sorted buckets while the layout thread ran). Here they
/// run beside the layout; the layout reads keys from a block.
pub(super) struct PipedEdges {
    rx: Option<std::sync::mpsc::Receiver<Result<Vec<u64>>>>,
    free: std::sync::mpsc::Sender<Vec<u64>>,
    block: Vec<u64>,
    at: usize,
    worker: Option<std::thread::JoinHandle<EdgeStream>>,
    /// The stream, back from the worker once it is drained (its counts).
    drained: Option<EdgeStream>,
}

impl PipedEdges {
    pub(super) fn start(mut stream: EdgeStream) -> Result<PipedEdges> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Result<Vec<u64>>>(PIPE_BLOCKS);
        let (free, free_rx) = std::sync::mpsc::channel::<Vec<u64>>();
        let worker = std::thread::Builder::new()
            .name("edges-merge".into())
            .spawn(move || {
                loop {
                    let mut b = free_rx.try_recv().unwrap_or_else(|_| Vec::with_capacity(PIPE_BLOCK_KEYS));
                    b.clear();
                    let r = stream.fill(&mut b, PIPE_BLOCK_KEYS);
                    // Only an empty block ends the stream (not a short one).
                    let last = r.is_err();
                    let msg = r.map(|_| b);
                    if matches!(&msg, Ok(b) if b.is_empty()) {
                        return stream; // drained: closing the channel says so
                    }
                    if tx.send(msg).is_err() || last {
                        return stream; // the layout stopped, or this was the end (or an error)
                    }
                }
            })
            .map_err(|e| BuildError::config(format!("cannot start the edge merge thread: {e}")))?;
        Ok(PipedEdges { rx: Some(rx), free, block: Vec::new(), at: 0, worker: Some(worker), drained: None })
    }

    #[inline]
    fn next_key(&mut self) -> Result<Option<u64>> {
        loop {
            if let Some(&k) = self.block.get(self.at) {
                self.at += 1;
                return Ok(Some(k));
            }
            let Some(rx) = self.rx.as_ref() else { return Ok(None) };
            match rx.recv() {
                Ok(Ok(b)) => {
                    let used = std::mem::replace(&mut self.block, b);
                    let _ = self.free.send(used);
                    self.at = 0;
                }
                Ok(Err(e)) => {
                    self.rx = None;
                    return Err(e);
                }
                Err(_) => {
                    // Every block delivered: take the drained stream back.
                    self.rx = None;
                    let w = self.worker.take().expect("joined once");
                    let s = w.join().map_err(|_| BuildError::config("internal: the edge merge thread panicked"))?;
                    self.drained = Some(s);
                    return Ok(None);
                }
            }
        }
    }
}

impl Drop for PipedEdges {
    fn drop(&mut self) {
        self.rx = None; // a worker blocked in send() sees the channel closed
        if let Some(w) = self.worker.take() {
            let _ = w.join(); // dropping its stream removes the bucket files
        }
    }
}

/// The keys the layout pass reads, sorted by destination.
pub(super) enum KeyStream {
    File(KeyFileReader),
    Merged(Merged),
    Direct(Box<PipedEdges>),
}
impl KeyStream {
    pub(super) fn next_key(&mut self) -> Result<Option<u64>> {
        match self {
            KeyStream::File(r) => r.next_key(),
            KeyStream::Merged(m) => m.next_key(),
            KeyStream::Direct(e) => e.next_key(),
        }
    }
    /// A drained direct `--dedup` stream's [`EdgeStream::dedup_removed`].
    pub(super) fn dedup_removed(&self) -> Option<(u64, u64)> {
        match self {
            KeyStream::Direct(e) => e.drained.as_ref()?.dedup_removed(),
            _ => None,
        }
    }
    /// `--symmetrize` counts of a direct stream, once it is drained.
    pub(super) fn reverse_counts(&self) -> Option<ReverseCounts> {
        match self {
            KeyStream::Direct(e) => e.drained.as_ref().map(|s| s.rc),
            _ => None,
        }
    }
}

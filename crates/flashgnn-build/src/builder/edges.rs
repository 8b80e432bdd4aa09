//! The edge phase: parse, check and normalise the input's edges, sort their
//! keys (`dst << 32 | src`) out of core, count degrees, and hand the layout
//! pass either the sorted stream itself or an `edges.sorted` file.
//!
//! Invariants: edges only live in sort chunks sized from `--memory-budget`
//! (half each for the input's and the reverse copies with `--symmetrize`);
//! the degree counters (4 B/node + 1 bit) are charged against the budget up
//! front when the node count is declared; every edge is checked where its
//! source reads it; with `--dedup` the inline cap comes from the copies
//! pushed per node, so the streamed and the merged paths give the same
//! bytes.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use flashgnn_format::layout::DegreeHistogram;
use flashgnn_io::OutFile;

use super::stream::{EdgeStream, ReverseCounts, PIPE_BLOCK_KEYS};
use super::SORT_CHUNK_MIN_BYTES;
use crate::options::{BuildOptions, Reorder, SelfLoops};
use crate::progress::{Progress, Task};
use crate::sort::{huge_zeroed, ExternalSorter, Merged};
use crate::source::{EdgeSource, NODES_MAX};
use crate::{BuildError, Result};

/// Edges read per batch from a source.
const EDGE_BATCH: usize = 1 << 16;
/// Parsed edge batches the reader thread may hold ready (1 MiB each).
const READ_AHEAD_BATCHES: usize = 2;

pub(super) struct EdgeResult {
    pub(super) num_nodes: u64,
    pub(super) sorted_path: PathBuf,
    /// Without `--dedup`: the merge itself, consumed by the layout pass
    /// (degrees were counted while the runs formed, so no `edges.sorted`
    /// is written and read back). `None`: read `sorted_path`.
    pub(super) direct: Option<EdgeStream>,
    /// Stored neighbors per node; with a `--dedup` stream in `direct`, the
    /// copies pushed per node instead, an upper bound the layout pass
    /// replaces with the stored count.
    pub(super) degrees: Vec<u32>,
    /// With `--dedup`: the histogram of the copies pushed per node (before
    /// the dedup), which chooses the inline cap whether the dedup is then
    /// streamed into the layout or merged through `edges.sorted` — so both
    /// paths (and every memory budget) give the same layout.
    pub(super) raw_hist: Option<DegreeHistogram>,
    /// Nodes with no edge in either direction (no stored neighbor and never
    /// anyone's neighbor); a node with only out-edges is not isolated.
    pub(super) isolated: u64,
    pub(super) num_entries: u64,
    pub(super) input_edges: u64,
    pub(super) self_loops_dropped: u64,
    pub(super) self_loops_added: u64,
    pub(super) duplicates_removed: u64,
    pub(super) reverse: ReverseCounts,
    pub(super) runs: u64,
    pub(super) seconds: f64,
}

/// Count one stored entry `dst <- src` while the runs form (no `--dedup`).
#[inline]
fn count_entry(degrees: &mut Vec<u32>, has_out: &mut Vec<u64>, d: u64, s: u64) -> Result<()> {
    let (d, s) = (d as usize, s as usize);
    let need = d.max(s) + 1;
    if degrees.len() < need {
        degrees.resize(need.max(degrees.len() * 2).min(NODES_MAX as usize + 1).max(need), 0);
    }
    if has_out.len() < need.div_ceil(64) {
        has_out.resize(degrees.len().div_ceil(64), 0);
    }
    degrees[d] = degrees[d]
        .checked_add(1)
        .ok_or_else(|| BuildError::config(format!("node {d} has more than {} neighbors", u32::MAX)))?;
    has_out[s / 64] |= 1u64 << (s % 64);
    Ok(())
}

/// [`count_entry`] for a batch of keys `dst << 32 | src`. When the arrays
/// already cover every id in the batch (a declared node count) the loop
/// has no resize check (a wrapped degree counter is still refused).
#[inline]
fn count_entries(degrees: &mut Vec<u32>, has_out: &mut Vec<u64>, keys: &[u64]) -> Result<()> {
    let (n, bits) = (degrees.len() as u64, has_out.len() as u64 * 64);
    let covered = keys.iter().fold(0u64, |m, &k| m.max(k >> 32).max(k & 0xffff_ffff)) < n.min(bits);
    if !covered {
        for &k in keys {
            count_entry(degrees, has_out, k >> 32, k & 0xffff_ffff)?;
        }
        return Ok(());
    }
    let mut wrapped = None;
    for (i, &k) in keys.iter().enumerate() {
        // The increments miss the L2 (a batch's counters span a bucket's
        // node range): ask for the line of the key PREFETCH_AHEAD on early.
        #[cfg(target_arch = "x86_64")]
        if let Some(&f) = keys.get(i + PREFETCH_AHEAD) {
            // SAFETY: a prefetch hint never faults; the address is in bounds (covered above).
            unsafe {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                _mm_prefetch::<_MM_HINT_T0>(degrees.as_ptr().add((f >> 32) as usize) as *const i8);
            }
        }
        let (d, s) = ((k >> 32) as usize, (k & 0xffff_ffff) as usize);
        let c = &mut degrees[d];
        *c = c.wrapping_add(1);
        if *c == 0 {
            wrapped = Some(d);
        }
        has_out[s / 64] |= 1u64 << (s % 64);
    }
    match wrapped {
        Some(d) => Err(BuildError::config(format!("node {d} has more than {} neighbors", u32::MAX))),
        None => Ok(()),
    }
}

/// Keys between a degree counter's prefetch and its increment.
const PREFETCH_AHEAD: usize = 16;

/// Degree counters shared by both sorters' observers: stored neighbors per
/// node, and one bit per node set when it is some entry's source.
type Counts = Arc<Mutex<(Vec<u32>, Vec<u64>)>>;

/// What the edge pass pushed into the sorters.
struct Pushed {
    input_edges: u64,
    loops_dropped: u64,
    max_id: Option<u64>,
}

/// Parse, check, normalise and sort the edges; write `edges.sorted` (keys
/// `dst << 32 | src`, ascending) and count degrees.
///
/// With `--symmetrize` the added reverse copies are sorted apart from the
/// input's own edges, and the two sorted streams are merged here, so each
/// stored entry knows how many copies came from the input and how many were
/// added: `--dedup`'s "duplicates removed" counts repeated input edges only,
/// and reverse copies that met an existing entry are counted on their own
/// (an already symmetric input is reported as such, not as duplicates).
pub(super) fn preprocess_edges(
    tmp: &Path,
    opts: &BuildOptions,
    edges: &mut dyn EdgeSource,
    declared: Option<u64>,
    chunk_bytes: u64,
    progress: &Progress,
) -> Result<EdgeResult> {
    let t = Instant::now();
    let (sorter, reverse, bucketed) = new_sorters(tmp, opts, edges.edges_hint(), declared, chunk_bytes);
    let mut task = progress.task("edges", "B", edges.bytes_total());
    // Without --dedup every pushed key is stored: count degrees now and let
    // the layout pass consume the merge (one write + read of every key less
    // than through `edges.sorted`).
    // The sorters show each key to their observer once, batched by key
    // range in bucketed mode (degree counters of one range stay in cache),
    // on a spill thread beside this one that also appends the bucket files.
    // Both sorters count into the same arrays: one lock per batch.
    // With --dedup too, when the sort is bucketed (every copy of a key in
    // one bucket, sorted when the layout reaches it): the layout then keeps
    // one copy of each key as it reads the merge, and the counts below are
    // the copies pushed, an upper bound of the stored degrees (the layout
    // pass counts the stored ones; docs/build.md). Run-and-merge
    // sorts and relabelling still go through `edges.sorted`.
    let direct = !opts.dedup || (bucketed && opts.reorder == Reorder::None);
    // Counted in every mode: with --dedup they choose the inline cap.
    let counts: Counts = Arc::new(Mutex::new(match declared {
        Some(n) => (huge_zeroed::<u32>(n as usize), huge_zeroed::<u64>((n as usize).div_ceil(64))),
        None => (Vec::new(), Vec::new()),
    }));
    let mut sorter = sorter.with_dedup(opts.dedup).with_spill_thread(observer(&counts))?;
    let mut reverse = reverse.with_dedup(opts.dedup).with_spill_thread(observer(&counts))?;
    let p = push_edges(opts, edges, progress, &mut task, &mut sorter, &mut reverse)?;
    task.finish();
    let num_nodes = declared.unwrap_or(p.max_id.map_or(0, |m| m + 1));
    let mut loops_added = 0;
    if opts.self_loops == SelfLoops::Add {
        for v in 0..num_nodes {
            sorter.push(v << 32 | v)?;
        }
        loops_added = num_nodes;
    }
    let runs = (sorter.runs() + reverse.runs()) as u64;
    let (pushed_input, pushed_reverse) = (sorter.len(), reverse.len());
    let pushed = pushed_input + pushed_reverse;
    // Degree array (4 B/node): after the chunk is released when the sort
    // spilled; otherwise beside the in-memory chunk, which the budget covers
    // when the node count was known up front.
    let merged = sorter.finish()?;
    let merged_rev = reverse.finish()?;
    // Both sorters are finished: their observers (and spill threads) are gone.
    let (mut degrees, mut has_out) = Arc::try_unwrap(counts)
        .map_err(|_| BuildError::config("internal: degree counters still shared after the sort"))?
        .into_inner()
        .unwrap_or_else(|e| e.into_inner());
    let sorted_path = tmp.join("edges.sorted");
    degrees.resize(num_nodes as usize, 0);
    has_out.resize((num_nodes as usize).div_ceil(64), 0);
    let raw_hist = opts.dedup.then(|| degree_histogram(&degrees));
    let dedup = opts.dedup.then_some((pushed_input, pushed_reverse));
    if direct {
        // A dedup keeps at least one copy of every key: who has a neighbor
        // or an out-edge is the same before and after it.
        let isolated = isolated_nodes(&degrees, &has_out);
        return Ok(EdgeResult {
            num_nodes,
            sorted_path,
            direct: Some(EdgeStream::new(merged, merged_rev, opts.symmetrize, dedup)),
            degrees,
            raw_hist,
            isolated,
            num_entries: pushed,
            input_edges: p.input_edges,
            self_loops_dropped: p.loops_dropped,
            self_loops_added: loops_added,
            duplicates_removed: 0,
            reverse: ReverseCounts::default(), // counted by the stream during the layout
            runs,
            seconds: t.elapsed().as_secs_f64(),
        });
    }
    drop((degrees, has_out)); // the raw counts: the merge counts the stored entries
    let m = merge_to_file(&sorted_path, progress, num_nodes, merged, merged_rev, opts.symmetrize, dedup)?;
    let isolated = isolated_nodes(&m.degrees, &m.has_out);
    Ok(EdgeResult {
        num_nodes,
        sorted_path,
        direct: None,
        degrees: m.degrees,
        raw_hist,
        isolated,
        num_entries: m.entries,
        input_edges: p.input_edges,
        self_loops_dropped: p.loops_dropped,
        self_loops_added: loops_added,
        duplicates_removed: m.duplicates_removed,
        reverse: m.reverse,
        runs,
        seconds: t.elapsed().as_secs_f64(),
    })
}

/// The sorters of the input's keys and of the added reverse copies, and
/// whether they are bucketed.
///
/// With --dedup each run keeps one copy of a key: the merge needs only
/// whether a key came from the input and/or as an added reverse copy; the
/// counts of removed copies follow from the pushed totals (below).
/// When the node count and the edge count are known up front (npy input
/// with features or a declared count), the sorts are bucketed by key
/// range instead of run-and-merge (`sort/`).
fn new_sorters(
    tmp: &Path,
    opts: &BuildOptions,
    edges_hint: Option<u64>,
    declared: Option<u64>,
    chunk_bytes: u64,
) -> (ExternalSorter, ExternalSorter, bool) {
    let half = if opts.symmetrize { (chunk_bytes / 2).max(SORT_CHUNK_MIN_BYTES / 2) } else { chunk_bytes };
    match (declared, edges_hint) {
        (Some(n), Some(e)) => {
            let bound = n << 32;
            let loops = if opts.self_loops == SelfLoops::Add { n } else { 0 };
            (
                // Sources are below n too: bucket files keep only their low bits.
                ExternalSorter::bucketed(tmp, "edges", half, bound, e + loops).with_low_bound(n),
                ExternalSorter::bucketed(tmp, "reverse", half, bound, if opts.symmetrize { e } else { 0 })
                    .with_low_bound(n),
                true,
            )
        }
        _ => (ExternalSorter::new(tmp, "edges", half), ExternalSorter::new(tmp, "reverse", half), false),
    }
}

/// A sorter's observer: counts each key batch it is shown into `counts`.
fn observer(counts: &Counts) -> crate::sort::Observer {
    let counts = counts.clone();
    Box::new(move |keys: &[u64]| -> Result<()> {
        let mut g = counts.lock().unwrap_or_else(|e| e.into_inner());
        let (degrees, has_out) = &mut *g;
        count_entries(degrees, has_out, keys)
    })
}

/// Read every edge of `edges` and push its key (and with `--symmetrize` its
/// reverse copy), dropping self-loops unless they are kept.
///
/// A reader thread reads and parses the next batches while this one
/// pushes the current one; batches go back to it for reuse (a fresh
/// allocation per batch costs page faults: measured worse).
fn push_edges(
    opts: &BuildOptions,
    edges: &mut dyn EdgeSource,
    progress: &Progress,
    task: &mut Task,
    sorter: &mut ExternalSorter,
    reverse: &mut ExternalSorter,
) -> Result<Pushed> {
    let mut p = Pushed { input_edges: 0, loops_dropped: 0, max_id: None };
    let mut last_bytes = 0;
    std::thread::scope(|scope| -> Result<()> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Result<(Vec<(u64, u64)>, u64)>>(READ_AHEAD_BATCHES);
        let (free_tx, free_rx) = std::sync::mpsc::channel::<Vec<(u64, u64)>>();
        let reader = std::thread::Builder::new()
            .name("edges-read".into())
            .spawn_scoped(scope, move || {
                loop {
                    let mut batch = free_rx.try_recv().unwrap_or_else(|_| Vec::with_capacity(EDGE_BATCH));
                    batch.clear();
                    let r = edges.next_batch(&mut batch, EDGE_BATCH).map(|more| (more, edges.bytes_done()));
                    let msg = match r {
                        Ok((false, _)) => return,
                        Ok((true, done)) => Ok((batch, done)),
                        Err(e) => Err(e),
                    };
                    let failed = msg.is_err();
                    if tx.send(msg).is_err() || failed {
                        return; // the pusher stopped (its error wins), or ours is delivered
                    }
                }
            })
            .map_err(|e| BuildError::config(format!("cannot start the edge reader thread: {e}")))?;
        let r = (|| -> Result<()> {
            for msg in &rx {
                progress.check()?;
                let (batch, done) = msg?;
                for &(s, d) in &batch {
                    p.input_edges += 1;
                    p.max_id = Some(p.max_id.map_or(s.max(d), |m| m.max(s).max(d)));
                    if s == d && opts.self_loops != SelfLoops::Keep {
                        p.loops_dropped += 1;
                        continue;
                    }
                    sorter.push(d << 32 | s)?;
                    if opts.symmetrize && s != d {
                        reverse.push(s << 32 | d)?;
                    }
                }
                let _ = free_tx.send(batch);
                task.add(done - last_bytes);
                last_bytes = done;
            }
            Ok(())
        })();
        drop(rx); // a reader blocked in send() sees the channel closed
        let _ = reader.join();
        r
    })?;
    Ok(p)
}

/// What [`merge_to_file`] stored.
struct MergedFile {
    degrees: Vec<u32>,
    has_out: Vec<u64>,
    entries: u64,
    duplicates_removed: u64,
    reverse: ReverseCounts,
}

/// `--dedup` through `edges.sorted`: merge the two sorted streams, one copy
/// per key, into the file the layout pass reads, counting the stored
/// degrees (and who has an out-edge) on the way.
fn merge_to_file(
    sorted_path: &Path,
    progress: &Progress,
    num_nodes: u64,
    merged: Merged,
    merged_rev: Merged,
    symmetrize: bool,
    dedup: Option<(u64, u64)>,
) -> Result<MergedFile> {
    let mut degrees = vec![0u32; num_nodes as usize];
    // One bit per node (N/8 B beside the 4 B/node degrees): set when the node
    // is some stored entry's source, i.e. has an out-edge.
    let mut has_out = vec![0u64; (num_nodes as usize).div_ceil(64)];
    // Buffered, as the feature stage: read back by the layout right after.
    // (O_DIRECT both ways, the read-back on a thread, measured slower on a
    // 2 GiB input: layout 2.5-2.7 s against 1.6-1.9 s from the page cache.)
    let mut out = OutFile::create(sorted_path)?; // scratch (deleted by the layout): real disk
    let mut task = progress.task("merge", "edges", merged.total_keys() + merged_rev.total_keys());
    // The same stream a bucketed --dedup build hands the layout: one copy
    // per key, the groups counted for the report.
    let mut stream = EdgeStream::new(merged, merged_rev, symmetrize, dedup);
    let (mut entries, mut shown) = (0u64, 0u64);
    let mut block: Vec<u64> = Vec::with_capacity(PIPE_BLOCK_KEYS);
    let mut buf: Vec<u8> = Vec::with_capacity(PIPE_BLOCK_KEYS * 8);
    loop {
        block.clear();
        stream.fill(&mut block, PIPE_BLOCK_KEYS)?;
        if block.is_empty() {
            break;
        }
        for &k in &block {
            count_entry(&mut degrees, &mut has_out, k >> 32, k & 0xffff_ffff)?;
            buf.extend_from_slice(&k.to_le_bytes());
        }
        entries += block.len() as u64;
        out.write(&buf)?;
        buf.clear();
        progress.check()?;
        task.add(stream.read - shown);
        shown = stream.read;
    }
    task.finish();
    out.finish()?;
    let (duplicates_removed, merged_copies) = stream.dedup_removed().expect("this path runs with --dedup only");
    let mut reverse = stream.rc;
    reverse.merged = merged_copies;
    drop(stream);
    Ok(MergedFile { degrees, has_out, entries, duplicates_removed, reverse })
}

pub(super) fn degree_histogram(degrees: &[u32]) -> DegreeHistogram {
    let mut h = DegreeHistogram::new();
    degrees.iter().for_each(|&d| h.add(d as u64));
    h
}

/// Nodes with neither a stored neighbor nor an out-edge.
fn isolated_nodes(degrees: &[u32], has_out: &[u64]) -> u64 {
    degrees.iter().enumerate().filter(|&(v, &deg)| deg == 0 && has_out[v / 64] & (1u64 << (v % 64)) == 0).count() as u64
}

#[cfg(test)]
mod tests {
    use super::{count_entries, count_entry};
    use crate::sort::huge_zeroed;

    #[test]
    fn batched_degree_counting_equals_per_key_counting() {
        // The batch path (no resize check, prefetch, wrap detection) gives
        // the per-key counts and out-edge bits, whether the arrays cover the
        // batch (declared node count) or must grow (undeclared), with hubs.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut keys = Vec::new();
        for i in 0..200_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (d, s) = if i % 5 == 0 { (3, x % 70_000) } else { (x % 70_000, (x >> 20) % 70_000) };
            keys.push(d << 32 | s);
        }
        let (mut want_d, mut want_h) = (Vec::new(), Vec::new());
        for &k in &keys {
            count_entry(&mut want_d, &mut want_h, k >> 32, k & 0xffff_ffff).unwrap();
        }
        want_d.resize(70_000, 0);
        want_h.resize(70_000usize.div_ceil(64), 0);
        for declared in [true, false] {
            let (mut d, mut h) = if declared {
                (huge_zeroed::<u32>(70_000), huge_zeroed::<u64>(70_000usize.div_ceil(64)))
            } else {
                (Vec::new(), Vec::new())
            };
            for batch in keys.chunks(4096) {
                count_entries(&mut d, &mut h, batch).unwrap();
            }
            d.resize(70_000, 0);
            h.resize(70_000usize.div_ceil(64), 0);
            assert_eq!(d, want_d, "declared {declared}");
            assert_eq!(h, want_h, "declared {declared}");
        }
        // A counter that would wrap is refused, naming the node.
        let (mut d, mut h) = (vec![0u32; 10], vec![0u64; 1]);
        d[7] = u32::MAX - 1;
        let e = count_entries(&mut d, &mut h, &[7 << 32 | 1, 7 << 32 | 2]).unwrap_err().to_string();
        assert!(e.contains("node 7 has more than"), "{e}");
    }
}

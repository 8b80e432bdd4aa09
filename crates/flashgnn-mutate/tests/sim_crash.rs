//! Power loss at every point of a mutable-store workload, on a simulated disk.
//!
//! The store runs on a `Disk::Sim` (flashgnn-io's `sim_disk`), which records
//! every create, write, truncation, fsync, rename and unlink under the
//! dataset directory. The workload: single-writer batches, a compaction
//! (the builder's output enters the model when published), more batches,
//! then concurrent writers whose batches form commit groups. Each batch
//! `b` is two operations — `update_embed(b, row(b))` and an edge not in the
//! base — so its presence in a recovered store can be read off directly.
//!
//! Then, for every crash point `k` (after each recorded operation) and
//! several seeds, the durable state a power loss at `k` could leave
//! (un-synced writes kept, dropped or torn at 512-byte sectors; un-synced
//! directory operations kept as a prefix) is written to a fresh directory
//! and opened writable. Checked:
//! - the store opens (any error fails the test, naming the point and seed);
//! - every batch acknowledged at or before `k` is present;
//! - no batch submitted after `k` is present, and no batch is half present;
//! - the batches present are exactly those with seq <= the recovered seq.
//!
//! First, the history replayed with everything kept must give exactly the
//! tree the run left (no operation under the root went unrecorded).
//!
//! A negative control runs the same checker with acknowledgements moved to
//! just after each batch's log write, before its fdatasync (a writer that
//! acknowledges early): the checker must find lost acknowledged batches.
//!
//! Replay: `FLASHGNN_SIM_SEEDS=N` (default 4; seeds 0..N, seed % 3 picks the
//! style: drop all un-synced, keep all, choose per operation) explores more
//! states: `FLASHGNN_SIM_SEEDS=60 cargo test --release -p flashgnn-mutate
//! --test sim_crash -- --nocapture`. The single-writer part of the history
//! is deterministic; the concurrent part depends on thread timing, so a
//! failure prints the crash point, seed and operation to rerun from.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use flashgnn_build::Progress;
use flashgnn_io::sim_disk::{materialise, CrashState, SimDisk, SimOp};
use flashgnn_io::Disk;
use flashgnn_mutate::{GraphOptions, MutableGraph};
use flashgnn_store::Op;
use flashgnn_testing::{tempdir, tiny_dataset, writable};

/// One batch of the workload.
#[derive(Debug, Clone)]
struct Batch {
    vid: u64,
    edge: (u64, u64),
    row: Vec<u8>,
    /// Crash points: operations recorded before it was submitted, and when
    /// `apply` returned (acknowledged).
    submitted: usize,
    acked: usize,
    /// Recorded operations when its log write was recorded (for the
    /// negative control: an acknowledgement before the fdatasync).
    written: usize,
    seq: u64,
}

fn row(g: &MutableGraph, b: u64) -> Vec<u8> {
    g.encode_embed(&vec![b as f64 + 0.5; g.feature_dim() as usize]).unwrap()
}

/// The index just past the first `Write` to a log recorded at or after `from`.
fn log_write_after(history: &[SimOp], from: usize) -> usize {
    history[from..]
        .iter()
        .position(|op| matches!(op, SimOp::Write(p, _, _) if p.to_string_lossy().contains("wal-")))
        .map_or(history.len(), |i| from + i + 1)
}

struct Run {
    _t: tempfile::TempDir,
    disk: Arc<SimDisk>,
    batches: Vec<Batch>,
    base_rows: BTreeMap<u64, Vec<u8>>,
}

/// Run the workload on a simulated disk; returns the history and batches.
fn workload() -> Run {
    let t = tempdir();
    let ds = tiny_dataset(t.path());
    let disk = Arc::new(SimDisk::new(&ds).unwrap());
    let opts = GraphOptions { disk: Disk::Sim(disk.clone()), group_commit_wait_us: 2000, ..Default::default() };
    let g = Arc::new(MutableGraph::open(&ds, &opts).unwrap());
    let n = g.num_nodes();
    let mut base_rows = BTreeMap::new();
    let mut next = 0u64;
    // Batch b: vertex b's embedding, and an edge (b, src) absent from the base.
    let mut make = |g: &MutableGraph| -> Batch {
        let b = next;
        next += 1;
        base_rows.insert(b, g.get_embed(b as i64).unwrap());
        let nb = g.get_neighbors(b as i64).unwrap();
        let src = (1..n).map(|d| (b + n / 2 + d) % n).find(|s| !nb.contains(s) && *s != b).unwrap();
        Batch { vid: b, edge: (b, src), row: row(g, b), submitted: 0, acked: 0, written: 0, seq: 0 }
    };
    let apply = |g: &MutableGraph, disk: &SimDisk, mut b: Batch| -> Batch {
        b.submitted = disk.ops();
        g.apply(vec![Op::UpdateEmbed { vid: b.vid, row: b.row.clone() }, Op::AddEdge { dst: b.edge.0, src: b.edge.1 }])
            .unwrap();
        b.acked = disk.ops();
        b
    };
    let mut batches = Vec::new();
    for _ in 0..8 {
        let b = make(&g);
        let mut b = apply(&g, &disk, b);
        b.seq = g.seq();
        batches.push(b);
    }
    g.compact(&Progress::new()).unwrap();
    for _ in 0..4 {
        let b = make(&g);
        let mut b = apply(&g, &disk, b);
        b.seq = g.seq();
        batches.push(b);
    }
    // Concurrent writers: group commits of several frames.
    let group: Vec<Batch> = (0..12).map(|_| make(&g)).collect();
    let done: Vec<Batch> = std::thread::scope(|s| {
        let hs: Vec<_> = group
            .chunks(3)
            .map(|c| {
                let (g, disk, c) = (g.clone(), disk.clone(), c.to_vec());
                s.spawn(move || c.into_iter().map(|b| apply(&g, &disk, b)).collect::<Vec<_>>())
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    // Their sequence numbers, from the live log (generation 1).
    let log = std::fs::read(ds.join("mut").join("wal-1.log")).unwrap();
    let mut seq_of = BTreeMap::new();
    flashgnn_mutate::wal::replay("wal-1.log", &log, |seq, _, ops| {
        if let Op::UpdateEmbed { vid, .. } = &ops[0] {
            seq_of.insert(*vid, seq);
        }
        Ok(())
    })
    .unwrap();
    for mut b in done {
        b.seq = seq_of[&b.vid];
        batches.push(b);
    }
    g.close().unwrap();
    let history = disk.history();
    for b in &mut batches {
        b.written = log_write_after(&history, b.submitted);
    }
    assert!(
        g.stats.frames.load(std::sync::atomic::Ordering::Relaxed)
            > g.stats.fsyncs.load(std::sync::atomic::Ordering::Relaxed),
        "no commit group of more than one frame formed"
    );
    Run { _t: t, disk, batches, base_rows }
}

/// Open the crash state `state` (taken after `k` operations) and check it
/// against the batches; Err describes the first violation.
fn check(state: &CrashState, k: usize, run: &Run, ack: impl Fn(&Batch) -> usize) -> Result<u64, String> {
    let t = tempdir();
    let root = t.path().join("ds");
    std::fs::create_dir(&root).unwrap();
    materialise(state, &root).unwrap();
    let g = MutableGraph::open(&root, &writable()).map_err(|e| format!("store does not open: {e}"))?;
    let s = g.seq();
    for b in &run.batches {
        let embed = g.get_embed(b.vid as i64).map_err(|e| e.to_string())?;
        let has_row = embed == b.row;
        if !has_row && embed != run.base_rows[&b.vid] {
            return Err(format!("batch {} (seq {}): embedding is neither old nor new", b.vid, b.seq));
        }
        let has_edge = g.get_neighbors(b.edge.0 as i64).map_err(|e| e.to_string())?.contains(&b.edge.1);
        if has_row != has_edge {
            return Err(format!("batch {} (seq {}) is half visible (row {has_row}, edge {has_edge})", b.vid, b.seq));
        }
        if ack(b) <= k && !has_row {
            return Err(format!("batch {} (seq {}) acknowledged at op {} is lost", b.vid, b.seq, ack(b)));
        }
        if b.submitted >= k && has_row {
            return Err(format!("batch {} submitted at op {} is visible", b.vid, b.submitted));
        }
        if has_row != (b.seq <= s) {
            return Err(format!("batch {} (seq {}) present = {has_row}, recovered seq {s}", b.vid, b.seq));
        }
    }
    g.close().map_err(|e| e.to_string())?;
    Ok(s)
}

fn seeds() -> u64 {
    std::env::var("FLASHGNN_SIM_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(4)
}

/// Every crash point of the history, `seeds()` seeds each, with `ack` as
/// the acknowledgement point; returns (states explored, violations).
fn explore(run: &Run, ack: impl Fn(&Batch) -> usize + Copy, stop_at_first: bool) -> (u64, Vec<String>) {
    let history = run.disk.history();
    let mut model = run.disk.initial();
    let (mut states, mut bad) = (0u64, Vec::new());
    for k in 0..=history.len() {
        for seed in 0..seeds() {
            let st = model.crash(seed);
            states += 1;
            if let Err(e) = check(&st, k, run, ack) {
                bad.push(format!("crash point {k} (after {:?}), seed {seed}: {e}", history.get(k.wrapping_sub(1))));
                if stop_at_first {
                    return (states, bad);
                }
            }
            if !model.unsynced() {
                break; // every seed gives the same state
            }
        }
        if k < history.len() {
            model.apply(&history[k]).unwrap();
        }
    }
    (states, bad)
}

fn short(op: &str) -> String {
    op.chars().take(160).collect()
}

#[test]
fn no_acknowledged_batch_is_lost_at_any_crash_point() {
    let run = workload();
    let ops = run.disk.ops();
    // Nothing was missed: the history replayed with everything kept (seed
    // style 1) gives exactly the tree the run left on the real disk.
    let kept = run.disk.crash(1);
    let real: CrashState = flashgnn_io::sim_disk::read_tree(run.disk.root()).unwrap().into_iter().collect();
    assert_eq!(kept.keys().collect::<Vec<_>>(), real.keys().collect::<Vec<_>>());
    assert!(kept == real, "file contents differ between the model and the disk");
    let (states, bad) = explore(&run, |b| b.acked, true);
    println!("sim crash: {ops} recorded operations, {states} crash states explored, {} seeds each", seeds());
    assert!(bad.is_empty(), "{}", short(&bad[0]));
    assert!(states as usize > ops, "too few states explored: {states}");
}

#[test]
fn a_writer_that_acknowledges_before_fdatasync_is_caught() {
    // Negative control: the same history, acknowledgements moved to right
    // after each batch's log write. Dropping that un-synced write (seed
    // style 0) loses an "acknowledged" batch, and the checker must say so.
    let run = workload();
    let (states, bad) = explore(&run, |b| b.written, true);
    assert!(!bad.is_empty(), "{states} states explored, no early acknowledgement caught");
    assert!(bad[0].contains("is lost"), "{}", short(&bad[0]));
}

#[test]
fn two_stores_on_two_simulated_disks_run_at_once() {
    // The disk is chosen per store: two stores on two simulated disks, in
    // two threads, each record only their own operations.
    let t = tempdir();
    let a = tiny_dataset(&t.path().join("a"));
    let b = tiny_dataset(&t.path().join("b"));
    let run = |p: &Path, k: u64| {
        let d = Arc::new(SimDisk::new(p).unwrap());
        let g = MutableGraph::open(p, &GraphOptions { disk: Disk::Sim(d.clone()), ..Default::default() }).unwrap();
        for i in 0..k {
            g.update_embed(i, &[1.0; 4]).unwrap();
        }
        g.close().unwrap();
        d.history()
    };
    let (ha, hb) = std::thread::scope(|s| {
        let ha = s.spawn(|| run(&a, 3));
        let hb = s.spawn(|| run(&b, 5));
        (ha.join().unwrap(), hb.join().unwrap())
    });
    let syncs = |h: &[SimOp]| h.iter().filter(|o| matches!(o, SimOp::Fsync(p) if p.ends_with("wal-0.log"))).count();
    // The open creates the log (one fsync of its temporary file, not of
    // `wal-0.log`), then one fdatasync per batch.
    assert_eq!((syncs(&ha), syncs(&hb)), (3, 5));
}

/// What [`failing_run`] returns.
type FailingRun = (tempfile::TempDir, Arc<SimDisk>, Vec<Batch>, BTreeMap<u64, Vec<u8>>, usize);

/// Six single-writer batches on a simulated disk whose operation `fail`
/// (if any, counted from the start) fails with EIO. Returns the disk, the
/// batches with `acked` set (usize::MAX: its `apply` failed), the base rows
/// and the operations the open recorded.
fn failing_run(fail: Option<usize>) -> FailingRun {
    failing_run_with(fail, libc::EIO)
}

fn failing_run_with(fail: Option<usize>, errno: i32) -> FailingRun {
    let t = tempdir();
    let ds = tiny_dataset(t.path());
    let disk = Arc::new(SimDisk::new(&ds).unwrap());
    let g = MutableGraph::open(&ds, &GraphOptions { disk: Disk::Sim(disk.clone()), ..Default::default() }).unwrap();
    let opened = disk.ops();
    if let Some(k) = fail {
        disk.fail_at(k, errno);
    }
    let n = g.num_nodes();
    let (mut batches, mut base_rows) = (Vec::new(), BTreeMap::new());
    for b in 0..6u64 {
        base_rows.insert(b, g.get_embed(b as i64).unwrap());
        let nb = g.get_neighbors(b as i64).unwrap();
        let src = (1..n).map(|d| (b + n / 2 + d) % n).find(|s| !nb.contains(s) && *s != b).unwrap();
        let mut batch =
            Batch { vid: b, edge: (b, src), row: row(&g, b), submitted: disk.ops(), acked: 0, written: 0, seq: 0 };
        let ops = vec![Op::UpdateEmbed { vid: b, row: batch.row.clone() }, Op::AddEdge { dst: b, src }];
        batch.acked = if g.apply(ops).is_ok() { disk.ops() } else { usize::MAX };
        batches.push(batch);
    }
    drop(g); // a store whose log failed may refuse to close cleanly: what is durable is the disk's business
    (t, disk, batches, base_rows, opened)
}

#[test]
fn a_failed_log_write_or_fdatasync_is_never_acknowledged_and_loses_no_acknowledged_batch() {
    // Every write and fdatasync of the log in a clean run is a point to fail.
    let (_t, clean, _, _, opened) = failing_run(None);
    let points: Vec<usize> = clean
        .history()
        .iter()
        .enumerate()
        .skip(opened)
        .filter(|(_, op)| matches!(op, SimOp::Write(p, ..) | SimOp::Fsync(p) if p.to_string_lossy().contains("wal-")))
        .map(|(i, _)| i)
        .collect();
    assert!(points.len() >= 12, "a write and an fdatasync per batch: {points:?}");
    let mut states = 0;
    for &k in &points {
        let (_t, disk, batches, base_rows, _) = failing_run(Some(k));
        // The batch whose log operation failed is not acknowledged, and the
        // store takes no write after it: the log's state past it is unknown.
        let first =
            batches.iter().position(|b| b.acked == usize::MAX).unwrap_or_else(|| panic!("point {k}: no apply failed"));
        assert!(
            batches[first..].iter().all(|b| b.acked == usize::MAX),
            "point {k}: a write was taken after the failure"
        );
        assert!(batches[..first].iter().all(|b| b.acked <= k), "point {k}");
        // Acknowledged: present. The failed one: either way, whole.
        // Refused after it (never written): absent.
        states += check_states(&disk, &batches, &base_rows, &format!("point {k}"), |i, has| {
            assert!(i >= first || has, "point {k}: acknowledged batch {i} lost");
            assert!(i <= first || !has, "point {k}: refused batch {i} visible");
        });
    }
    println!("sim faults: EIO at each of {} log operations, {states} crash states in all", points.len());
}

/// The crash states of `disk` (several seeds) opened writable: `check(i,
/// has)` for each batch `i`, `has` = whether the recovered store holds it
/// (whole: a half-present batch fails here).
fn check_states(
    disk: &SimDisk,
    batches: &[Batch],
    base_rows: &BTreeMap<u64, Vec<u8>>,
    what: &str,
    check: impl Fn(usize, bool),
) -> usize {
    let mut states = 0;
    for seed in 0..seeds().max(3) {
        let state = disk.crash(seed);
        states += 1;
        let t = tempdir();
        let root = t.path().join("ds");
        std::fs::create_dir(&root).unwrap();
        materialise(&state, &root).unwrap();
        let g = MutableGraph::open(&root, &writable())
            .unwrap_or_else(|e| panic!("{what} seed {seed}: the store does not open: {e}"));
        for (i, b) in batches.iter().enumerate() {
            let embed = g.get_embed(b.vid as i64).unwrap();
            let has_row = embed == b.row;
            assert!(has_row || embed == base_rows[&b.vid], "{what} seed {seed}: batch {i} neither old nor new");
            let has_edge = g.get_neighbors(b.edge.0 as i64).unwrap().contains(&b.edge.1);
            assert_eq!(has_row, has_edge, "{what} seed {seed}: batch {i} is half visible");
            check(i, has_row);
        }
        g.close().unwrap();
    }
    states
}

#[test]
fn a_log_write_refused_for_space_is_rolled_back_and_writes_go_on() {
    // ENOSPC at each log write: that batch is not acknowledged and never
    // durable; the log is cut back, and every later batch is acknowledged
    // and survives power loss. ENOSPC at an fdatasync is not a clean refusal
    // (what the page cache dropped is unknown): the store refuses writes, as
    // after EIO.
    let (_t, clean, _, _, opened) = failing_run(None);
    let is_log = |p: &Path| p.to_string_lossy().contains("wal-");
    let points = |write: bool| -> Vec<usize> {
        clean
            .history()
            .iter()
            .enumerate()
            .skip(opened)
            .filter(|(_, op)| match op {
                SimOp::Write(p, ..) => write && is_log(p),
                SimOp::Fsync(p) => !write && is_log(p),
                _ => false,
            })
            .map(|(i, _)| i)
            .collect()
    };
    let (writes, syncs) = (points(true), points(false));
    assert_eq!((writes.len(), syncs.len()), (6, 6), "a write and an fdatasync per batch");
    let mut states = 0;
    for &k in &writes {
        let (_t, disk, batches, base_rows, _) = failing_run_with(Some(k), libc::ENOSPC);
        let failed: Vec<usize> = (0..batches.len()).filter(|&i| batches[i].acked == usize::MAX).collect();
        assert_eq!(failed.len(), 1, "point {k}: exactly the batch whose write was refused fails: {failed:?}");
        let f = failed[0];
        states += check_states(&disk, &batches, &base_rows, &format!("ENOSPC write {k}"), |i, has| {
            assert_eq!(has, i != f, "ENOSPC write {k}: batch {i} (refused: {f})");
        });
    }
    for &k in &syncs {
        let (_t, disk, batches, base_rows, _) = failing_run_with(Some(k), libc::ENOSPC);
        let first = batches.iter().position(|b| b.acked == usize::MAX).expect("the batch of the failed sync");
        assert!(batches[first..].iter().all(|b| b.acked == usize::MAX), "ENOSPC fdatasync {k}: a later write taken");
        states += check_states(&disk, &batches, &base_rows, &format!("ENOSPC fdatasync {k}"), |i, has| {
            assert!(i >= first || has, "ENOSPC fdatasync {k}: acknowledged batch {i} lost");
            assert!(i <= first || !has, "ENOSPC fdatasync {k}: refused batch {i} visible");
        });
    }
    println!("sim faults: ENOSPC at {} log writes and {} fdatasyncs, {states} crash states", writes.len(), syncs.len());
}

#[test]
fn concurrent_writers_lose_only_unacknowledged_batches_when_space_runs_out() {
    // Four writers, each adding a vertex and then an edge from it, batch by
    // batch, while one log write is refused for space mid-run. Frames queued
    // behind the refused group were validated on its state (an edge may name
    // a vertex it added): they must fail too, and the store must go on from
    // the durable state, so that replay never meets a frame on a state that
    // was not logged. Checked after power loss: exactly the acknowledged
    // vertices and edges are there.
    let t = tempdir();
    let ds = tiny_dataset(t.path());
    let disk = Arc::new(SimDisk::new(&ds).unwrap());
    let g = MutableGraph::open(&ds, &GraphOptions { disk: Disk::Sim(disk.clone()), ..Default::default() }).unwrap();
    let base_nodes = g.num_nodes();
    let logged = |h: &[SimOp]| {
        h.iter().filter(|o| matches!(o, SimOp::Write(p, ..) if p.to_string_lossy().contains("wal-"))).count()
    };
    // The 8th log write from now is refused (ops are counted from the start).
    let start = disk.ops();
    let fail_after_writes = 8;
    let done = std::sync::Mutex::new(Vec::new()); // (vertex, Some(edge src) when acknowledged)
    let failures = std::sync::atomic::AtomicUsize::new(0);
    let armed = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for w in 0..4u64 {
            let (g, done, failures, disk, armed) = (&g, &done, &failures, &disk, &armed);
            s.spawn(move || {
                for i in 0..12u64 {
                    if w == 0
                        && !armed.load(std::sync::atomic::Ordering::SeqCst)
                        && logged(&disk.history()[start..]) >= fail_after_writes
                    {
                        // The next log write (whoever leads it) is refused.
                        disk.fail_next("writing", "wal-", libc::ENOSPC);
                        armed.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                    let v = match g.add_vertex(&[w as f64, i as f64, 0.0, 0.0]) {
                        Ok(v) => v,
                        Err(_) => {
                            failures.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            continue;
                        }
                    };
                    let src = (w * 7 + i) % base_nodes;
                    let edge = match g.add_edge(v, src) {
                        Ok(()) => Some(src),
                        Err(_) => {
                            failures.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            None
                        }
                    };
                    done.lock().unwrap().push((v, w, i, edge));
                }
            });
        }
    });
    let done = done.into_inner().unwrap();
    assert!(failures.load(std::sync::atomic::Ordering::SeqCst) >= 1, "the refused write failed a batch");
    assert!(done.len() >= 40, "writes went on after the refusal: {} vertices acknowledged", done.len());
    assert_eq!(g.num_nodes(), base_nodes + done.len() as u64, "only acknowledged vertices are in the live graph");
    // The stats say when the refused write began and when its rollback
    // ended (a write sent before that may have been refused with it).
    let st = g.stats_report();
    let (w, r) = (&st["last_space_refusal"]["write_at"], &st["last_space_refusal"]["rolled_back_at"]);
    let (w, r) = (w.as_f64().expect("write_at"), r.as_f64().expect("rolled_back_at"));
    assert!(w > 1e9 && w <= r, "the last refusal: write at {w}, rolled back at {r}");
    drop(g);
    for seed in 0..seeds().max(3) {
        let state = disk.crash(seed);
        let t2 = tempdir();
        let root = t2.path().join("ds");
        std::fs::create_dir(&root).unwrap();
        materialise(&state, &root).unwrap();
        let g = MutableGraph::open(&root, &writable()).unwrap_or_else(|e| panic!("seed {seed}: does not open: {e}"));
        assert_eq!(g.num_nodes(), base_nodes + done.len() as u64, "seed {seed}: vertices");
        for &(v, w, i, edge) in &done {
            let row = g.get_embed(v as i64).unwrap();
            assert_eq!(row, g.encode_embed(&[w as f64, i as f64, 0.0, 0.0]).unwrap(), "seed {seed}: vertex {v}");
            let nb = g.get_neighbors(v as i64).unwrap();
            assert_eq!(nb, edge.into_iter().collect::<Vec<_>>(), "seed {seed}: edges of vertex {v}");
        }
        g.close().unwrap();
    }
}

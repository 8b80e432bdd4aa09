//! The mutable store against its promises.
//!
//! - WAL: encode/replay round trip; a torn tail cut at every byte offset of
//!   the last frame is dropped (and truncated by a writable open) while every
//!   earlier frame survives; a damaged frame followed by a valid one is
//!   refused naming the file, byte offset and sequence number; thousands of
//!   random bit flips and truncations give a clean open or a clean error,
//!   never a panic.
//! - Group commit: 8 threads writing concurrently share fsyncs (ops per fsync
//!   > 1) and every acknowledged op is present after reopen.
//! - Model: random operation sequences applied to `MutableGraph` and to a
//!   plain `HashMap` model agree on `get_neighbors` / `get_embed` for every
//!   node, live, after reopen (replay), after compaction and after reopening
//!   the compacted generation; deleted ids are reused lowest first.
//! - Errors: every bad argument is refused before anything is logged, with the
//!   argument, value and bound in the message; a non-symmetrized base is
//!   refused with the rebuild command.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use flashgnn_build::Progress;
use flashgnn_format::dtype::read_f64;
use flashgnn_mutate::wal::{self, FRAME_HEADER_BYTES, WAL_HEADER_BYTES};
use flashgnn_mutate::{MutError, MutableGraph};
use flashgnn_store::{Dataset, Op};
use flashgnn_testing::{
    build_with, open_mutable, read_only, rmat_input, tempdir, tiny_dataset, tiny_rmat, writable, TINY_DIM,
};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// The feature width of the tests' dataset ([`tiny_dataset`]: R-MAT scale 7,
/// 128 nodes, built symmetric).
const DIM: u32 = TINY_DIM;

fn row_f64(g: &MutableGraph, bytes: &[u8]) -> Vec<f64> {
    let dt = g.feature_dtype();
    (0..g.feature_dim() as usize).map(|i| read_f64(dt, bytes, i)).collect()
}

// ---------------------------------------------------------------- WAL bytes

fn sample_ops(rng: &mut Xoshiro256PlusPlus) -> Vec<Op> {
    (0..rng.random_range(1..5))
        .map(|_| match rng.random_range(0..5) {
            0 => Op::AddVertex { id: Some(rng.random_range(0..1000)), row: vec![rng.random(); 16] },
            1 => Op::DeleteVertex { vid: rng.random_range(0..1000) },
            2 => Op::AddEdge { dst: rng.random_range(0..1000), src: rng.random_range(0..1000) },
            3 => Op::DeleteEdge { dst: rng.random_range(0..1000), src: rng.random_range(0..1000) },
            _ => Op::UpdateEmbed { vid: rng.random_range(0..1000), row: vec![rng.random(); 16] },
        })
        .collect()
}

/// A log of `frames` random frames; returns (bytes, frame end offsets, ops).
fn sample_log(seed: u64, frames: usize) -> (Vec<u8>, Vec<usize>, Vec<Vec<Op>>) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut b = wal::encode_header(3, 10, None);
    let (mut ends, mut all) = (Vec::new(), Vec::new());
    for i in 0..frames {
        let ops = sample_ops(&mut rng);
        wal::encode_frame(11 + i as u64, &ops, &mut b).unwrap();
        ends.push(b.len());
        all.push(ops);
    }
    (b, ends, all)
}

fn replay_ops(b: &[u8]) -> Result<(wal::ReplayReport, Vec<Vec<Op>>), MutError> {
    let mut got = Vec::new();
    let r = wal::replay("t.log", b, |_, _, ops| {
        got.push(ops);
        Ok(())
    })?;
    Ok((r, got))
}

#[test]
fn wal_round_trip() {
    let (b, ends, ops) = sample_log(1, 20);
    let (r, got) = replay_ops(&b).unwrap();
    assert_eq!(got, ops);
    assert_eq!((r.generation, r.base_seq, r.last_seq, r.frames), (3, 10, 30, 20));
    assert_eq!((r.valid_len, r.torn_bytes), (*ends.last().unwrap() as u64, 0));
}

#[test]
fn torn_tail_truncated_at_every_offset_of_the_last_frame() {
    let (b, ends, ops) = sample_log(2, 3);
    let d = tempdir();
    for cut in ends[1]..ends[2] {
        let (r, got) = replay_ops(&b[..cut]).unwrap();
        assert_eq!(got, ops[..2], "cut at {cut}");
        assert_eq!((r.valid_len, r.torn_bytes), (ends[1] as u64, (cut - ends[1]) as u64));
        // A writable open cuts the tail off durably; appends go after frame 2.
        let p = d.path().join("w.log");
        std::fs::write(&p, &b[..cut]).unwrap();
        let w = wal::WalFile::open(&flashgnn_io::Disk::Real, &p, r.valid_len).unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().len(), ends[1] as u64);
        drop(w);
    }
    // A torn last frame with a bad CRC (garbage where its bytes should be) too.
    let mut bad = b.clone();
    bad[ends[2] - 1] ^= 0x40;
    let (r, got) = replay_ops(&bad).unwrap();
    assert_eq!((got.len(), r.torn_bytes), (2, (ends[2] - ends[1]) as u64));
}

#[test]
fn corruption_in_the_middle_is_refused_with_offset_and_seq() {
    let (b, ends, _) = sample_log(3, 4);
    for at in [ends[0] + 2, ends[0] + FRAME_HEADER_BYTES + 1, ends[1] - 1] {
        let mut bad = b.clone();
        bad[at] ^= 0x01;
        let e = replay_ops(&bad).unwrap_err().to_string();
        assert!(e.contains(&format!("byte offset {}", ends[0])), "{e}");
        assert!(e.contains("frame seq 12") && e.contains("corruption in the middle"), "{e}");
    }
    // A valid CRC with a sequence number out of order is refused too.
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
    let mut gap = b[..ends[0]].to_vec();
    wal::encode_frame(13, &sample_ops(&mut rng), &mut gap).unwrap();
    let e = replay_ops(&gap).unwrap_err().to_string();
    assert!(e.contains("sequence number 13; expected 12"), "{e}");
}

#[test]
fn random_damage_never_panics() {
    let (b, _, _) = sample_log(4, 12);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(77);
    let (mut clean, mut errors) = (0, 0);
    for _ in 0..4000 {
        let mut x = b.clone();
        match rng.random_range(0..4) {
            0 => {
                for _ in 0..rng.random_range(1..4) {
                    let i = rng.random_range(0..x.len());
                    x[i] ^= 1 << rng.random_range(0..8);
                }
            }
            1 => x.truncate(rng.random_range(0..x.len())),
            2 => {
                let i = rng.random_range(WAL_HEADER_BYTES as usize..x.len());
                let n = rng.random_range(1..64).min(x.len() - i);
                rng.fill(&mut x[i..i + n]);
            }
            _ => {
                // Overwrite a length field with a huge value.
                let i = rng.random_range(WAL_HEADER_BYTES as usize..x.len() - 4);
                x[i..i + 4].copy_from_slice(&u32::MAX.to_le_bytes());
            }
        }
        match replay_ops(&x) {
            Ok(_) => clean += 1,
            Err(MutError::Corrupt(m)) => {
                assert!(m.contains("byte offset"), "{m}");
                errors += 1
            }
            Err(e) => panic!("unexpected error kind: {e}"),
        }
    }
    assert!(clean > 0 && errors > 0, "clean {clean}, errors {errors}");
}

// ---------------------------------------------------------------- the graph

#[test]
fn refuses_a_base_built_without_symmetrize() {
    let d = tempdir();
    let p = build_with(&rmat_input(d.path(), "raw", &tiny_rmat()), &d.path().join("ds"), |b| b.dedup = true);
    let e = MutableGraph::open(&p, &writable()).err().unwrap().to_string();
    assert!(e.contains("without --symmetrize") && e.contains("--symmetrize --dedup"), "{e}");
    assert!(!p.join("mut").exists(), "nothing written for a refused dataset");
}

#[test]
fn one_writer_at_a_time() {
    let d = tempdir();
    let p = tiny_dataset(d.path());
    let g = open_mutable(&p);
    g.add_edge(1, 2).unwrap();
    // A second writable open (same process, other file description) is refused
    // before it touches anything under mut/.
    match MutableGraph::open(&p, &writable()) {
        Err(MutError::Unavailable(m)) => {
            assert!(m.contains("mut/LOCK") && m.contains("open for writing by another process"), "{m}");
        }
        Err(e) => panic!("unexpected error kind: {e}"),
        Ok(_) => panic!("a second writer opened the store"),
    }
    // Readers take no lock.
    let ro = MutableGraph::open(&p, &read_only()).unwrap();
    assert!(ro.get_neighbors(1).unwrap().contains(&2));
    g.add_edge(3, 4).unwrap();
    g.close().unwrap();
    // Closed: the next writer gets in and sees every acknowledged write.
    let g2 = open_mutable(&p);
    assert!(g2.get_neighbors(1).unwrap().contains(&2) && g2.get_neighbors(3).unwrap().contains(&4));
    assert!(MutableGraph::open(&p, &writable()).is_err());
    drop(g2); // drop releases it too
    let g3 = open_mutable(&p);
    assert!(g3.open_report.removed.is_empty(), "LOCK is not a leftover: {:?}", g3.open_report.removed);
    assert!(p.join("mut").join("LOCK").exists());
}

#[test]
fn batch_size_is_bounded() {
    let d = tempdir();
    let p = tiny_dataset(d.path());
    let g = open_mutable(&p);
    let wal0 = g.wal_bytes();
    let max = flashgnn_mutate::MAX_BATCH_OPS;
    let ops = vec![Op::AddEdge { dst: 1, src: 2 }; max + 1];
    match g.apply(ops) {
        Err(MutError::Invalid(m)) => assert!(m.contains(&(max + 1).to_string()) && m.contains(&max.to_string()), "{m}"),
        r => panic!("a batch over the bound was not refused: {r:?}"),
    }
    assert_eq!(g.wal_bytes(), wal0, "nothing logged");
    g.apply(vec![Op::AddEdge { dst: 1, src: 2 }; max]).unwrap();
}

/// Random batches concentrated on a few hubs: `apply_batch` (indexed lists,
/// deferred deletions) leaves exactly the lists and ids that applying the ops
/// one by one does.
#[test]
fn batch_apply_equals_op_by_op_apply() {
    use flashgnn_store::{Delta, Snapshot};
    let d = tempdir();
    let p = tiny_dataset(d.path());
    let base = Arc::new(Dataset::open(&p).unwrap());
    let row =
        flashgnn_store::overlay::encode_row(base.feature_dtype(), base.feature_dim(), &[1.0; DIM as usize]).unwrap();
    for seed in 0..6u64 {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut one = Delta::new(&base, []).unwrap();
        let mut batch = one.clone();
        let mut ops = Vec::new();
        let mut want = Vec::new();
        for _ in 0..4000 {
            let n = one.num_nodes();
            let hub = rng.random_range(0..3u64);
            let any = rng.random_range(0..n);
            let k = rng.random_range(0..100);
            let op = if k < 50 {
                Op::AddEdge { dst: hub, src: any }
            } else if k < 60 {
                Op::AddEdge { dst: any, src: hub }
            } else if k < 85 {
                // Mostly an existing neighbor of the hub (so deletions succeed).
                let nb = Snapshot { base: base.clone(), delta: one.clone(), generation: 0, seq: 0 }
                    .neighbors(hub as i64)
                    .unwrap_or_default();
                let src = if nb.is_empty() || k == 84 { any } else { nb[rng.random_range(0..nb.len())] };
                if k % 2 == 0 {
                    Op::DeleteEdge { dst: hub, src }
                } else {
                    Op::DeleteEdge { dst: src, src: hub }
                }
            } else if k < 92 {
                Op::AddVertex { id: None, row: row.clone() }
            } else if k < 98 {
                Op::DeleteVertex { vid: if k == 97 { hub } else { any } }
            } else {
                Op::UpdateEmbed { vid: any, row: row.clone() }
            };
            let mut logged = op.clone();
            if let Ok(r) = one.apply(&base, &mut logged) {
                ops.push(op);
                want.push(r);
            }
        }
        let got = batch.apply_batch(&base, &mut ops).unwrap();
        assert_eq!(got, want, "seed {seed}: results");
        assert_eq!((batch.num_nodes(), batch.free_len()), (one.num_nodes(), one.free_len()), "seed {seed}");
        let (a, b) = (
            Snapshot { base: base.clone(), delta: one.clone(), generation: 0, seq: 0 },
            Snapshot { base: base.clone(), delta: batch.clone(), generation: 0, seq: 0 },
        );
        for v in 0..one.num_nodes() as i64 {
            assert_eq!(a.neighbors(v).ok(), b.neighbors(v).ok(), "seed {seed}: neighbors of {v}");
        }
        assert_eq!(one.num_edges(&base), batch.num_edges(&base), "seed {seed}");
    }
}

/// Every acknowledged write copies the records it edits (the published
/// snapshot shares the previous version), so a copy must not carry spare
/// room: a `clone` then `push` doubled every edited list's capacity, and the
/// soak's server memory grew about twice as fast as the delta it reported
/// (docs/reliability.md, *Soak*). After 3,000 single-edge writes through a
/// live graph, every record's list holds at most one spare slot, and the
/// reported `delta_bytes` (capacities) stays within that bound.
#[test]
fn copied_records_keep_no_spare_room_across_writes() {
    let d = tempdir();
    let p = tiny_dataset(d.path());
    let g = open_mutable(&p);
    let n = g.num_nodes();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    for _ in 0..3000 {
        let (dst, src) = (rng.random_range(0..n), rng.random_range(0..n));
        g.add_edge(dst, src).unwrap();
    }
    let snap = g.snapshot();
    let (mut records, mut exact) = (0u64, 0u64);
    for v in 0..n {
        let Some(r) = snap.delta.record(v) else { continue };
        records += 1;
        assert!(
            r.neighbors.capacity() <= r.neighbors.len() + 1,
            "node {v}: {} neighbors in a list of capacity {} (a doubled copy)",
            r.neighbors.len(),
            r.neighbors.capacity()
        );
        exact += (r.neighbors.len() as u64 + 1) * 8 + r.row.len() as u64 + 64;
    }
    assert!(records > n / 2, "the writes touched most nodes ({records} of {n})");
    assert!(snap.delta.heap_bytes() <= exact, "delta_bytes {} > {exact}", snap.delta.heap_bytes());
}

/// One batch of 60k edge operations on one hub completes (it used to be
/// quadratic under the writer lock) and leaves the right list.
#[test]
fn a_large_batch_on_one_hub() {
    let d = tempdir();
    let p = tiny_dataset(d.path());
    let g = open_mutable(&p);
    let n = g.num_nodes();
    let k = 60_000u64;
    let row = g.encode_embed(&[0.5; DIM as usize]).unwrap();
    g.apply((0..k).map(|_| Op::AddVertex { id: None, row: row.clone() }).collect()).unwrap();
    let hub = 3u64;
    let mut want = g.get_neighbors(hub as i64).unwrap();
    let t = std::time::Instant::now();
    let ops: Vec<Op> = (0..k).map(|i| Op::AddEdge { dst: hub, src: n + i }).collect();
    g.apply(ops).unwrap();
    eprintln!("60k add_edge on one hub in one batch: {:.3} s", t.elapsed().as_secs_f64());
    want.extend(n..n + k);
    assert_eq!(g.get_neighbors(hub as i64).unwrap(), want);
    // Duplicates are no-ops; deletions remove; a re-add goes to the end.
    let t = std::time::Instant::now();
    let mut ops: Vec<Op> = (0..20_000).map(|i| Op::AddEdge { dst: n + i, src: hub }).collect();
    ops.extend((0..20_000).map(|i| Op::DeleteEdge { dst: hub, src: n + 2 * i }));
    ops.extend((0..10).map(|i| Op::AddEdge { dst: hub, src: n + 2 * i }));
    g.apply(ops).unwrap();
    eprintln!("40k duplicate adds and deletes on one hub in one batch: {:.3} s", t.elapsed().as_secs_f64());
    let gone: BTreeSet<u64> = (0..20_000).map(|i| n + 2 * i).collect();
    want.retain(|v| !gone.contains(v));
    want.extend((0..10).map(|i| n + 2 * i));
    assert_eq!(g.get_neighbors(hub as i64).unwrap(), want);
    assert_eq!(g.get_neighbors((n + 2) as i64).unwrap(), vec![hub]);
    assert!(g.get_neighbors((n + 39_998) as i64).unwrap().is_empty());
    assert_eq!(g.get_neighbors((n + 40_002) as i64).unwrap(), vec![hub]);
    drop(g);
    let g = open_mutable(&p); // replay applies the same batches
    assert_eq!(g.get_neighbors(hub as i64).unwrap(), want);
}

#[test]
fn bad_arguments_are_refused_before_logging() {
    let d = tempdir();
    let p = tiny_dataset(d.path());
    let g = open_mutable(&p);
    let n = g.num_nodes();
    let wal0 = g.wal_bytes();
    let msg = |r: Result<(), MutError>| match r {
        Err(MutError::Invalid(m)) => m,
        other => panic!("expected Invalid, got {other:?}"),
    };
    assert!(msg(g.add_edge(n, 0)).contains(&format!("dst {n} out of range [0, {n})")));
    assert!(msg(g.add_edge(0, n + 5)).contains(&format!("src {} out of range", n + 5)));
    assert!(msg(g.add_vertex(&[1.0; 3]).map(|_| ())).contains("embed has 3 values; feature_dim is 4"));
    assert!(msg(g.update_embed(1, &[1.0, f64::NAN, 0.0, 0.0])).contains("embed[1] = NaN is not finite"));
    assert!(msg(g.update_embed(1, &[1e300, 0.0, 0.0, 0.0])).contains("overflows float32"));
    g.delete_vertex(7).unwrap();
    assert!(msg(g.delete_vertex(7)).contains("vid 7 is a deleted vertex"));
    let nb = g.get_neighbors(3).unwrap();
    let absent = (0..n).find(|v| !nb.contains(v) && *v != 7).unwrap();
    assert!(msg(g.delete_edge(3, absent)).contains(&format!("no edge between dst 3 and src {absent}")));
    // A batch is all or nothing: the good op before the bad one is not applied.
    let before = g.get_neighbors(absent as i64).unwrap();
    let e = g.apply(vec![Op::AddEdge { dst: absent, src: 3 }, Op::AddEdge { dst: 0, src: n + 1 }]).unwrap_err();
    assert!(e.to_string().contains("ops[1]: src"), "{e}");
    assert_eq!(g.get_neighbors(absent as i64).unwrap(), before);
    // Exactly one frame (the delete) was logged.
    assert_eq!(g.seq(), 1);
    assert!(g.wal_bytes() > wal0);
    let after_one = g.wal_bytes();
    drop(g);
    let g = open_mutable(&p);
    assert_eq!((g.seq(), g.wal_bytes()), (1, after_one));
}

#[test]
fn deleted_ids_are_reused_lowest_first() {
    let d = tempdir();
    let p = tiny_dataset(d.path());
    let g = open_mutable(&p);
    let n = g.num_nodes();
    assert_eq!(g.add_vertex(&[0.5; 4]).unwrap(), n);
    g.delete_vertex(9).unwrap();
    g.delete_vertex(4).unwrap();
    assert_eq!(g.add_vertex(&[1.0; 4]).unwrap(), 4);
    assert_eq!(g.add_vertex(&[2.0; 4]).unwrap(), 9);
    assert_eq!(g.add_vertex(&[3.0; 4]).unwrap(), n + 1);
    assert!(g.get_neighbors(4).unwrap().is_empty());
    assert_eq!(row_f64(&g, &g.get_embed(9).unwrap()), vec![2.0; 4]);
    // The free list survives compaction.
    g.delete_vertex(2).unwrap();
    g.compact(&Progress::new()).unwrap();
    drop(g);
    let g = open_mutable(&p);
    assert_eq!(g.generation(), 1);
    assert!(g.get_neighbors(2).is_err());
    assert_eq!(g.add_vertex(&[4.0; 4]).unwrap(), 2);
}

#[test]
fn group_commit_shares_fsyncs_and_loses_no_acknowledged_op() {
    let d = tempdir();
    let p = tiny_dataset(d.path());
    let g = Arc::new(open_mutable(&p));
    let n = g.num_nodes();
    let acked: Vec<Vec<(u64, u64)>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..8u64)
            .map(|t| {
                let g = g.clone();
                s.spawn(move || {
                    let mut done = Vec::new();
                    for i in 0..40u64 {
                        let (a, b) = ((t * 13 + i * 7) % n, (t * 31 + i * 11 + 1) % n);
                        g.add_edge(a, b).unwrap();
                        done.push((a, b));
                    }
                    done
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let st = &g.stats;
    let (ops, fsyncs) =
        (st.ops.load(std::sync::atomic::Ordering::Relaxed), st.fsyncs.load(std::sync::atomic::Ordering::Relaxed));
    assert_eq!(ops, 320);
    assert!(fsyncs < ops, "group commit: {ops} ops took {fsyncs} fsyncs");
    eprintln!("group commit, 8 threads: {ops} ops, {fsyncs} fsyncs, {:.2} ops/fsync", ops as f64 / fsyncs as f64);
    drop(g);
    let g = open_mutable(&p);
    assert_eq!(g.seq(), 320);
    for (a, b) in acked.into_iter().flatten() {
        assert!(g.get_neighbors(a as i64).unwrap().contains(&b), "edge ({a}, {b}) lost");
        assert!(g.get_neighbors(b as i64).unwrap().contains(&a), "edge ({b}, {a}) lost");
    }
}

// ---------------------------------------------------------------- model test

/// The plain model: neighbor sets, feature rows, deleted ids.
struct Model {
    adj: HashMap<u64, BTreeSet<u64>>,
    feat: HashMap<u64, Vec<f64>>,
    deleted: BTreeSet<u64>,
    n: u64,
}

impl Model {
    fn from(ds: &Dataset) -> Model {
        let mut m = Model { adj: HashMap::new(), feat: HashMap::new(), deleted: BTreeSet::new(), n: ds.num_nodes() };
        for v in 0..m.n {
            m.adj.insert(v, ds.neighbors(v as i64).unwrap().into_iter().collect());
            let mut r = Vec::new();
            ds.feature_row(v as i64, &mut r).unwrap();
            m.feat.insert(v, (0..DIM as usize).map(|i| read_f64(ds.feature_dtype(), &r, i)).collect());
        }
        m
    }
    fn live(&self, rng: &mut Xoshiro256PlusPlus) -> u64 {
        loop {
            let v = rng.random_range(0..self.n);
            if !self.deleted.contains(&v) {
                return v;
            }
        }
    }
}

fn check(g: &MutableGraph, m: &Model, when: &str) {
    assert_eq!(g.num_nodes(), m.n, "{when}: node count");
    for v in 0..m.n {
        if m.deleted.contains(&v) {
            assert!(g.get_neighbors(v as i64).is_err(), "{when}: deleted {v} readable");
            continue;
        }
        let got: BTreeSet<u64> = g.get_neighbors(v as i64).unwrap().into_iter().collect();
        assert_eq!(&got, &m.adj[&v], "{when}: neighbors of {v}");
        assert_eq!(row_f64(g, &g.get_embed(v as i64).unwrap()), m.feat[&v], "{when}: embed of {v}");
    }
}

#[test]
fn model_based_random_operations_with_replay_and_compaction() {
    let d = tempdir();
    let p = tiny_dataset(d.path());
    let mut m = Model::from(&Dataset::open(&p).unwrap());
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(2024);
    let mut g = open_mutable(&p);
    for round in 0..3 {
        for _ in 0..120 {
            let k = rng.random_range(0..100);
            let embed: Vec<f64> = (0..DIM).map(|_| (rng.random_range(-1000..1000) as f64) / 8.0).collect();
            if k < 10 {
                let v = g.add_vertex(&embed).unwrap();
                let want = m.deleted.iter().next().copied().unwrap_or(m.n);
                assert_eq!(v, want, "add_vertex id");
                m.deleted.remove(&v);
                m.n = m.n.max(v + 1);
                m.adj.insert(v, BTreeSet::new());
                m.feat.insert(v, embed);
            } else if k < 16 {
                let v = m.live(&mut rng);
                g.delete_vertex(v).unwrap();
                for u in m.adj.insert(v, BTreeSet::new()).unwrap() {
                    m.adj.get_mut(&u).unwrap().remove(&v);
                }
                m.deleted.insert(v);
            } else if k < 60 {
                let (a, b) = (m.live(&mut rng), m.live(&mut rng));
                g.add_edge(a, b).unwrap();
                m.adj.get_mut(&a).unwrap().insert(b);
                m.adj.get_mut(&b).unwrap().insert(a);
            } else if k < 80 {
                let a = m.live(&mut rng);
                let Some(&b) = m.adj[&a].iter().nth(rng.random_range(0..m.adj[&a].len().max(1))) else { continue };
                g.delete_edge(a, b).unwrap();
                m.adj.get_mut(&a).unwrap().remove(&b);
                m.adj.get_mut(&b).unwrap().remove(&a);
            } else if k < 90 {
                let v = m.live(&mut rng);
                g.update_embed(v, &embed).unwrap();
                m.feat.insert(v, embed);
            } else {
                // A multi-op batch: add a vertex and connect it.
                let (a, b) = (m.live(&mut rng), m.live(&mut rng));
                let row = g.encode_embed(&embed).unwrap();
                let r = g.apply(vec![Op::AddVertex { id: None, row }, Op::AddEdge { dst: a, src: b }]).unwrap();
                let v = r[0].unwrap();
                m.deleted.remove(&v);
                m.n = m.n.max(v + 1);
                m.adj.insert(v, BTreeSet::new());
                m.feat.insert(v, embed);
                m.adj.get_mut(&a).unwrap().insert(b);
                m.adj.get_mut(&b).unwrap().insert(a);
            }
        }
        check(&g, &m, &format!("round {round}, live"));
        drop(g);
        g = open_mutable(&p);
        check(&g, &m, &format!("round {round}, after replay"));
        if round < 2 {
            let r = g.compact(&Progress::new()).unwrap();
            assert_eq!(r.generation, round as u64 + 1);
            check(&g, &m, &format!("round {round}, after compaction"));
            drop(g);
            g = open_mutable(&p);
            check(&g, &m, &format!("round {round}, compacted and reopened"));
            // Only the current generation is left (gen 0 is the dataset itself).
            let mut names: Vec<String> = std::fs::read_dir(p.join("mut"))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            let gen = round + 1;
            assert_eq!(
                names,
                vec![
                    "CURRENT".to_string(),
                    "LOCK".to_string(),
                    format!("free-{gen}.bin"),
                    format!("gen-{gen}"),
                    format!("wal-{gen}.log")
                ]
            );
        }
    }
}

#[test]
fn writes_during_compaction_are_carried_to_the_new_generation() {
    let d = tempdir();
    let p = tiny_dataset(d.path());
    let g = Arc::new(open_mutable(&p));
    g.add_edge(1, 2).unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (g, stop) = (g.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut done = Vec::new();
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || done.len() < 5 {
                let (a, b) = (i % 100, (i * 7 + 3) % 100);
                g.add_edge(a, b).unwrap();
                done.push((a, b));
                i += 1;
            }
            done
        })
    };
    let r = g.compact(&Progress::new()).unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let done = writer.join().unwrap();
    eprintln!("compaction carried {} frames written during the build", r.tail_frames);
    let check = |g: &MutableGraph| {
        for &(a, b) in &done {
            assert!(g.get_neighbors(a as i64).unwrap().contains(&b));
        }
        assert!(g.get_neighbors(1).unwrap().contains(&2));
    };
    check(&g);
    drop(g);
    check(&open_mutable(&p));
}

#[test]
fn crash_leftovers_are_cleaned_and_the_old_generation_kept() {
    let d = tempdir();
    let p = tiny_dataset(d.path());
    let g = open_mutable(&p);
    g.add_edge(5, 6).unwrap();
    drop(g);
    // A compaction that died before switching CURRENT: a half-built input,
    // an importer temp dir, a complete but unswitched generation and log.
    let m = p.join("mut");
    std::fs::create_dir(m.join(".compact-1.input")).unwrap();
    std::fs::create_dir(m.join(".gen-1.tmp-1-2")).unwrap();
    std::fs::create_dir(m.join("gen-1")).unwrap();
    std::fs::write(m.join("wal-1.log"), wal::encode_header(1, 1, None)).unwrap();
    let ro = MutableGraph::open(&p, &read_only()).unwrap();
    assert!(ro.get_neighbors(5).unwrap().contains(&6));
    assert!(m.join("gen-1").exists(), "a read-only open changes nothing");
    drop(ro);
    let g = open_mutable(&p);
    assert_eq!(g.generation(), 0);
    assert!(g.get_neighbors(5).unwrap().contains(&6));
    assert!(!m.join("gen-1").exists() && !m.join("wal-1.log").exists() && !m.join(".compact-1.input").exists());
}

#[test]
fn update_graph_replaces_everything() {
    let d = tempdir();
    let p = tiny_dataset(d.path());
    let g = open_mutable(&p);
    g.add_edge(1, 2).unwrap();
    let n = 50u64;
    let src: Vec<i64> = (0..49).collect();
    let dst: Vec<i64> = (1..50).collect();
    let feats: Vec<u8> = (0..n * DIM as u64).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let labels: Vec<i64> = (0..n as i64).map(|i| i % 3).collect();
    let r = g
        .update_graph(
            &flashgnn_mutate::UpdateGraphInput {
                src: &src,
                dst: &dst,
                num_nodes: n,
                features: Some((&feats, flashgnn_format::Dtype::Float32, DIM)),
                labels: Some(&labels),
            },
            &Progress::new(),
        )
        .unwrap();
    assert_eq!((r.generation, r.num_nodes, r.num_edges), (1, 50, 98));
    let check = |g: &MutableGraph| {
        assert_eq!(g.num_nodes(), 50);
        let mut nb = g.get_neighbors(10).unwrap();
        nb.sort();
        assert_eq!(nb, vec![9, 11]);
        assert_eq!(row_f64(g, &g.get_embed(10).unwrap()), vec![40.0, 41.0, 42.0, 43.0]);
    };
    check(&g);
    g.add_edge(0, 49).unwrap();
    drop(g);
    let g = open_mutable(&p);
    check(&g);
    assert!(g.get_neighbors(49).unwrap().contains(&0));
    let e = g
        .update_graph(
            &flashgnn_mutate::UpdateGraphInput {
                src: &src,
                dst: &dst[..3],
                num_nodes: n,
                features: None,
                labels: None,
            },
            &Progress::new(),
        )
        .unwrap_err();
    assert!(e.to_string().contains("src has 49 entries but dst has 3"), "{e}");
}

#[test]
fn damaged_logs_open_cleanly_or_fail_cleanly() {
    // A real log (20 batches), then random flips and truncations of the file:
    // every open returns a graph or a `Corrupt` error naming the log, never a
    // panic; a graph that opens holds a prefix of the acknowledged batches.
    let d = tempdir();
    let p = tiny_dataset(d.path());
    let g = open_mutable(&p);
    for i in 0..20u64 {
        g.add_edge(i, i + 40).unwrap();
    }
    drop(g);
    let wal = p.join("mut").join("wal-0.log");
    let good = std::fs::read(&wal).unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    let (mut opened, mut refused) = (0, 0);
    for _ in 0..150 {
        let mut x = good.clone();
        if rng.random_range(0..2) == 0 {
            x.truncate(rng.random_range(0..x.len()));
        } else {
            let i = rng.random_range(0..x.len());
            x[i] ^= 1 << rng.random_range(0..8);
        }
        std::fs::write(&wal, &x).unwrap();
        match MutableGraph::open(&p, &read_only()) {
            Ok(g) => {
                let s = g.seq();
                for i in 0..s {
                    assert!(g.get_neighbors(i as i64).unwrap().contains(&(i + 40)), "batch {i} of a prefix of {s}");
                }
                opened += 1;
            }
            Err(MutError::Corrupt(m)) => {
                assert!(m.contains("wal-0.log"), "{m}");
                refused += 1;
            }
            Err(e) => panic!("unexpected error kind: {e}"),
        }
    }
    std::fs::write(&wal, &good).unwrap();
    assert_eq!(open_mutable(&p).seq(), 20);
    assert!(opened > 0 && refused > 0, "opened {opened}, refused {refused}");
}

#[test]
fn close_during_a_compaction_never_panics() {
    // `close` may land before, during or after the compaction's switch: the compaction either
    // finishes (and the graph then closes) or is refused as closed; the acknowledged write survives.
    for delay_ms in 0..12u64 {
        let d = tempdir();
        let p = tiny_dataset(d.path());
        let g = Arc::new(open_mutable(&p));
        g.add_edge(1, 100).unwrap();
        let g2 = g.clone();
        let job = std::thread::spawn(move || g2.compact(&Progress::new()));
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        g.close().unwrap();
        match job.join().expect("the compaction thread panicked") {
            Ok(_) | Err(MutError::Unavailable(_)) => {}
            Err(e) => panic!("compaction racing close: unexpected error {e}"),
        }
        drop(g);
        let g = open_mutable(&p);
        assert!(g.generation() <= 1);
        assert!(g.get_neighbors(1).unwrap().contains(&100));
    }
}

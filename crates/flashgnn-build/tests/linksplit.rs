//! Link splits at build time, against a plain in-memory model of the input:
//! the stored graph is the input minus every held-out pair in both
//! directions (nothing else lost: duplicates and one-way edges kept), the
//! counts are PyG's `⌊fraction · pairs⌋`, every negative is a non-edge in
//! both directions and distinct across validation and test, the same seed
//! gives the same bytes, and `verify` accepts the result. One build runs
//! under the smallest budget, so the pair sort spills runs and the
//! negatives take several chunks. Given splits (`--link-split-files`) are
//! copied and their bad ids refused by file, row and bound.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use flashgnn_build::{build, BuildOptions, Progress};
use flashgnn_format::npy::encode_header;
use flashgnn_format::Dtype;
use flashgnn_store::Dataset;
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn write_edges(dir: &Path, edges: &[(u64, u64)], n: u64) {
    std::fs::create_dir_all(dir).unwrap();
    let mut b = encode_header(Dtype::Int64, &[edges.len() as u64, 2]);
    for &(s, d) in edges {
        b.extend_from_slice(&(s as i64).to_le_bytes());
        b.extend_from_slice(&(d as i64).to_le_bytes());
    }
    std::fs::write(dir.join("edge_index.npy"), b).unwrap();
    // Features fix the node count (the largest id may be held out).
    let mut f = encode_header(Dtype::Float32, &[n, 1]);
    f.extend((0..n).flat_map(|v| (v as f32).to_le_bytes()));
    std::fs::write(dir.join("node_feat.npy"), f).unwrap();
}

/// A random graph: `pairs` random pairs, each stored in both directions
/// (`symmetric`) or one, some duplicated, plus self-loops.
fn graph(n: u64, pairs: usize, symmetric: bool, seed: u64) -> Vec<(u64, u64)> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut e = Vec::new();
    for i in 0..pairs {
        let (u, v) = (rng.random_range(0..n), rng.random_range(0..n));
        e.push((u, v));
        if symmetric && u != v {
            e.push((v, u));
        }
        if i % 50 == 0 {
            e.push((u, v)); // a duplicate
        }
    }
    e.push((3, 3));
    e
}

fn key(u: i64, v: i64) -> (i64, i64) {
    (u.min(v), u.max(v))
}

fn opts(raw: &Path, out: &Path, f: impl FnOnce(&mut BuildOptions)) -> BuildOptions {
    let mut o = BuildOptions::new(raw, out);
    o.link_split = Some((0.1, 0.2));
    o.neg_per_pos = 3;
    o.link_split_seed = Some(7);
    o.dataset_id = Some(99);
    f(&mut o);
    o
}

/// Check a built split against the input `edges`; returns the split's positives per split.
fn check(out: &Path, edges: &[(u64, u64)], val: f64, test: f64, ratio: f64) -> BTreeMap<&'static str, usize> {
    let ds = Dataset::open(out).unwrap();
    flashgnn_store::verify(&ds, &mut |_, _| {}).unwrap();
    let ls = ds.manifest().link_split.clone().unwrap();
    let pairs: BTreeSet<(i64, i64)> =
        edges.iter().filter(|e| e.0 != e.1).map(|&(s, d)| key(s as i64, d as i64)).collect();
    let m = pairs.len() as u64;
    assert_eq!(ls.input_pairs, m);
    let (nv, nt) = ((val * m as f64) as u64, (test * m as f64) as u64);
    let nd = (ratio * (m - nv - nt) as f64) as u64;
    let per = |name: &str| ds.link_split(name).unwrap();
    let (v, t, tr) = (per("val"), per("test"), per("train"));
    let units = |s: &flashgnn_store::LinkSplit| -> BTreeSet<(i64, i64)> {
        s.src.iter().zip(&s.dst).map(|(&a, &b)| key(a, b)).collect()
    };
    if ls.undirected {
        assert_eq!(v.src.len() as u64, nv);
        assert_eq!(t.src.len() as u64, nt);
        if ratio > 0.0 {
            assert_eq!(tr.src.len() as u64, nd);
        } else {
            assert_eq!(tr.src.len() as u64, m - nv - nt);
        }
    } else {
        assert_eq!(units(&v).len() as u64, nv);
        assert_eq!(units(&t).len() as u64, nt);
    }
    // The stored graph: the input minus the held-out pairs, both directions, copies kept.
    let mut held: BTreeSet<(i64, i64)> = units(&v).union(&units(&t)).copied().collect();
    if ratio > 0.0 {
        held.extend(units(&tr));
    }
    let mut want: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for &(s, d) in edges {
        if !held.contains(&key(s as i64, d as i64)) || s == d {
            want.entry(d).or_default().push(s);
        }
    }
    let n = ds.num_nodes();
    for x in 0..n {
        let mut got = ds.neighbors(x as i64).unwrap();
        got.sort_unstable();
        let mut w = want.remove(&x).unwrap_or_default();
        w.sort_unstable();
        assert_eq!(got, w, "neighbors of {x}");
    }
    // Negatives: K per positive, not a true pair either way, no self-loop, all distinct.
    let mut seen = BTreeSet::new();
    for s in [&v, &t] {
        let neg = s.neg.as_ref().unwrap();
        assert_eq!(neg.len(), s.src.len() * 3);
        for (j, &w) in neg.iter().enumerate() {
            let u = s.src[j / 3];
            assert_ne!(u, w);
            assert!(!pairs.contains(&key(u, w)), "negative ({u}, {w}) is an edge");
            assert!(seen.insert(key(u, w)), "negative ({u}, {w}) twice");
        }
    }
    assert!(tr.neg.is_none());
    [("train", tr.src.len()), ("val", v.src.len()), ("test", t.src.len())].into_iter().collect()
}

#[test]
fn random_split_is_leak_free_exact_and_reproducible() {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw");
    let n = 400;
    let edges = graph(n, 3000, true, 1);
    write_edges(&raw, &edges, n);
    let a = dir.path().join("a");
    let rep = build(&opts(&raw, &a, |_| {}), &Progress::new()).unwrap();
    assert!(rep.manifest.link_split.as_ref().unwrap().undirected, "a symmetric input is split as undirected");
    check(&a, &edges, 0.1, 0.2, 0.0);
    // Same seed, same bytes; another seed, other positives.
    let b = dir.path().join("b");
    build(&opts(&raw, &b, |_| {}), &Progress::new()).unwrap();
    for f in ["link_val_src.npy", "link_val_dst.npy", "link_test_neg.npy", "link_train_src.npy", "graph.fg"] {
        assert_eq!(std::fs::read(a.join(f)).unwrap(), std::fs::read(b.join(f)).unwrap(), "{f}");
    }
    let c = dir.path().join("c");
    build(&opts(&raw, &c, |o| o.link_split_seed = Some(8)), &Progress::new()).unwrap();
    assert_ne!(std::fs::read(a.join("link_val_src.npy")).unwrap(), std::fs::read(c.join("link_val_src.npy")).unwrap());
    // Disjoint training supervision leaves the graph too.
    let d = dir.path().join("d");
    build(&opts(&raw, &d, |o| o.disjoint_train_ratio = Some(0.3)), &Progress::new()).unwrap();
    check(&d, &edges, 0.1, 0.2, 0.3);
}

#[test]
fn one_way_edges_split_as_directed_or_symmetrized() {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw");
    let n = 300;
    let edges = graph(n, 2000, false, 2);
    write_edges(&raw, &edges, n);
    let a = dir.path().join("a");
    let rep = build(&opts(&raw, &a, |_| {}), &Progress::new()).unwrap();
    assert!(!rep.manifest.link_split.as_ref().unwrap().undirected);
    assert!(rep.notes.iter().any(|x| x.contains("split as directed")), "{:?}", rep.notes);
    check(&a, &edges, 0.1, 0.2, 0.0);
    // --symmetrize: the stored graph holds both directions of every kept pair, none of a held-out one.
    let s = dir.path().join("s");
    build(&opts(&raw, &s, |o| o.symmetrize = true), &Progress::new()).unwrap();
    let ds = Dataset::open(&s).unwrap();
    assert!(ds.manifest().link_split.as_ref().unwrap().undirected);
    flashgnn_store::verify(&ds, &mut |_, _| {}).unwrap();
    for name in ["val", "test"] {
        let sp = ds.link_split(name).unwrap();
        for (&u, &v) in sp.src.iter().zip(&sp.dst) {
            assert!(!ds.neighbors(v).unwrap().contains(&(u as u64)));
            assert!(!ds.neighbors(u).unwrap().contains(&(v as u64)));
        }
    }
}

#[test]
fn out_of_core_under_the_smallest_budget() {
    // 150 K input edges: the pair sorters (512 KiB = 64 Ki keys each) spill
    // several runs; 4 negatives for each of ~15 K positives take 3 chunks
    // of 26 Ki slots.
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw");
    let n = 20_000;
    let edges = graph(n, 75_000, true, 3);
    write_edges(&raw, &edges, n);
    let out = dir.path().join("o");
    let o = opts(&raw, &out, |o| {
        o.memory_budget = (65 << 20) + 4 * n; // buffers, 4 B per node, the 1 MiB minimum sort chunk
        o.neg_per_pos = 4;
        o.link_split = Some((0.1, 0.1));
    });
    build(&o, &Progress::new()).unwrap();
    let ds = Dataset::open(&out).unwrap();
    flashgnn_store::verify(&ds, &mut |_, _| {}).unwrap();
    let pairs: BTreeSet<(i64, i64)> =
        edges.iter().filter(|e| e.0 != e.1).map(|&(s, d)| key(s as i64, d as i64)).collect();
    let m = pairs.len() as f64;
    let mut seen = BTreeSet::new();
    for name in ["val", "test"] {
        let s = ds.link_split(name).unwrap();
        assert_eq!(s.src.len(), (0.1 * m) as usize);
        for (j, &w) in s.neg.as_ref().unwrap().iter().enumerate() {
            let u = s.src[j / 4];
            assert!(!pairs.contains(&key(u, w)) && u != w);
            assert!(seen.insert(key(u, w)));
        }
    }
    // Nothing of the split's intermediates is published.
    let names: Vec<String> =
        std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(names.iter().all(|f| ds.manifest().files.contains_key(f) || f == "manifest.json"), "{names:?}");
}

#[test]
fn bad_options_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw");
    write_edges(&raw, &graph(50, 100, true, 4), 50);
    let out = dir.path().join("o");
    for (f, want) in [
        (
            Box::new(|o: &mut BuildOptions| o.link_split = Some((0.6, 0.5))) as Box<dyn Fn(&mut BuildOptions)>,
            "VAL + TEST",
        ),
        (Box::new(|o: &mut BuildOptions| o.link_split = Some((-0.1, 0.2))), "--link-split VAL -0.1"),
        (Box::new(|o: &mut BuildOptions| o.disjoint_train_ratio = Some(1.0)), "--disjoint-train-ratio 1"),
        (
            Box::new(|o: &mut BuildOptions| {
                o.link_split = None;
                o.link_split_seed = None;
                o.disjoint_train_ratio = Some(0.2)
            }),
            "needs --link-split",
        ),
        (Box::new(|o: &mut BuildOptions| o.neg_per_pos = 2000), "non-adjacent pairs"),
    ] {
        let e = build(&opts(&raw, &out, |o| f(o)), &Progress::new()).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
        assert!(!out.exists());
    }
}

fn write_i64(path: &Path, shape: &[u64], v: &[i64]) {
    let mut b = encode_header(Dtype::Int64, shape);
    b.extend(v.iter().flat_map(|x| x.to_le_bytes()));
    std::fs::write(path, b).unwrap();
}

#[test]
fn given_split_is_copied_and_bad_ids_refused() {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw");
    write_edges(&raw, &[(0, 1), (1, 2), (2, 3)], 10);
    let sp = dir.path().join("split");
    std::fs::create_dir_all(&sp).unwrap();
    write_i64(&sp.join("link_train_src.npy"), &[3], &[0, 1, 2]);
    write_i64(&sp.join("link_train_dst.npy"), &[3], &[1, 2, 3]);
    write_i64(&sp.join("link_val_src.npy"), &[2], &[4, 5]);
    write_i64(&sp.join("link_val_dst.npy"), &[2], &[6, 7]);
    write_i64(&sp.join("link_val_neg.npy"), &[2, 3], &[1, 2, 3, 4, 5, 6]);
    write_i64(&sp.join("link_test_src.npy"), &[1], &[8]);
    write_i64(&sp.join("link_test_dst.npy"), &[1], &[9]);
    write_i64(&sp.join("link_test_neg_src.npy"), &[2], &[0, 1]);
    write_i64(&sp.join("link_test_neg_dst.npy"), &[2], &[5, 6]);
    let out = dir.path().join("o");
    let mut o = BuildOptions::new(&raw, &out);
    o.link_split_files = Some(sp.clone());
    build(&o, &Progress::new()).unwrap();
    let ds = Dataset::open(&out).unwrap();
    flashgnn_store::verify(&ds, &mut |_, _| {}).unwrap();
    assert_eq!(ds.manifest().link_split.as_ref().unwrap().origin, "given");
    let v = ds.link_split("val").unwrap();
    assert_eq!((v.src, v.dst, v.neg, v.k), (vec![4, 5], vec![6, 7], Some(vec![1, 2, 3, 4, 5, 6]), 3));
    let t = ds.link_split("test").unwrap();
    assert_eq!((t.neg, t.neg_pairs), (None, Some((vec![0, 1], vec![5, 6]))));
    // An id beyond the node count: file, row, column and bound.
    write_i64(&sp.join("link_val_neg.npy"), &[2, 3], &[1, 2, 3, 4, 10, 6]);
    o.output = dir.path().join("o2");
    let e = build(&o, &Progress::new()).unwrap_err().to_string();
    assert!(!o.output.exists());
    for part in ["link_val_neg.npy", "row 1, column 1", "node id 10 out of range [0, 10)"] {
        assert!(e.contains(part), "{e}");
    }
    // A dataset without a split says so, naming it.
    let plain = dir.path().join("plain");
    build(&BuildOptions::new(&raw, &plain), &Progress::new()).unwrap();
    let e = Dataset::open(&plain).unwrap().link_split("val").unwrap_err().to_string();
    assert!(e.contains("has no link split") && e.contains("plain"), "{e}");
}

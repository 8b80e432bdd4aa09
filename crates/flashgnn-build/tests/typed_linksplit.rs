//! `--link-split` on typed inputs (PyG's `RandomLinkSplit(edge_types=...,
//! rev_edge_types=...)`), against a plain in-memory model of the input:
//! a relation between two node types (user -> item, built with
//! `--add-reverse`) and one within a type (paper -> paper). The counts are
//! `⌊fraction · pairs⌋`; every positive is an input edge in local ids; no
//! held-out positive is stored in the relation nor in its `rev_` type,
//! and everything else is (copies kept); negatives are destination-type
//! ids, never an input edge, distinct across validation and test; verify
//! accepts the result and names the file of a planted leak. The refusals
//! (edge type missing or ambiguous, a reverse folder in the input, the
//! option on a homogeneous input, given splits) name what they refuse.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use flashgnn_build::{build, BuildOptions, Progress};
use flashgnn_format::npy::encode_header;
use flashgnn_format::Dtype;
use flashgnn_store::Dataset;
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn write_i64(path: &Path, shape: &[u64], v: &[i64]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut b = encode_header(Dtype::Int64, shape);
    b.extend(v.iter().flat_map(|x| x.to_le_bytes()));
    std::fs::write(path, b).unwrap();
}

/// Node type `name` with `n` nodes (a one-column feature table fixes the count).
fn write_type(root: &Path, name: &str, n: u64) {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let mut f = encode_header(Dtype::Float32, &[n, 1]);
    f.extend((0..n).flat_map(|v| (v as f32).to_le_bytes()));
    std::fs::write(dir.join("node_feat.npy"), f).unwrap();
}

fn write_rel(root: &Path, folder: &str, edges: &[(u64, u64)]) {
    let flat: Vec<i64> = edges.iter().flat_map(|&(s, d)| [s as i64, d as i64]).collect();
    write_i64(&root.join(folder).join("edge_index.npy"), &[edges.len() as u64, 2], &flat);
}

/// `pairs` random edges `[0, ns) -> [0, nd)`, some duplicated; within one
/// type (`symmetric`) each also reversed, plus a self-loop.
fn edges(ns: u64, nd: u64, pairs: usize, symmetric: bool, seed: u64) -> Vec<(u64, u64)> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut e = Vec::new();
    for i in 0..pairs {
        let (u, v) = (rng.random_range(0..ns), rng.random_range(0..nd));
        e.push((u, v));
        if symmetric && u != v {
            e.push((v, u));
        }
        if i % 40 == 0 {
            e.push((u, v));
        }
    }
    if symmetric {
        e.push((3, 3));
    }
    e
}

fn opts(raw: &Path, out: &Path, f: impl FnOnce(&mut BuildOptions)) -> BuildOptions {
    let mut o = BuildOptions::new(raw, out);
    o.link_split = Some((0.1, 0.2));
    o.neg_per_pos = 2;
    o.link_split_seed = Some(5);
    o.dataset_id = Some(77);
    o.add_reverse = true;
    f(&mut o);
    o
}

/// The stored neighbors of relation `key` at every destination-type node, as local source ids.
fn stored(ds: &Dataset, key: &str) -> BTreeMap<u64, Vec<u64>> {
    let t = ds.manifest().types.clone().unwrap();
    let r = t.edge_types.iter().position(|e| e.key() == key).unwrap();
    let e = &t.edge_types[r];
    let (s, d) = (t.node_type_index(&e.src).unwrap(), t.node_type_index(&e.dst).unwrap());
    let mut out = BTreeMap::new();
    for v in 0..t.node_types[d].count {
        let mut n: Vec<u64> =
            ds.relation_neighbors(t.offset(d) + v, r).unwrap().into_iter().map(|g| g - t.offset(s)).collect();
        n.sort_unstable();
        if !n.is_empty() {
            out.insert(v, n);
        }
    }
    out
}

fn units(s: &flashgnn_store::LinkSplit) -> BTreeSet<(i64, i64)> {
    s.src.iter().zip(&s.dst).map(|(&a, &b)| (a, b)).collect()
}

/// The user -> item input of the bipartite tests: (root, edges, users, items).
fn bipartite_input(dir: &Path) -> (std::path::PathBuf, Vec<(u64, u64)>, u64, u64) {
    let raw = dir.join("raw");
    let (nu, ni) = (60, 80);
    write_type(&raw, "user", nu);
    write_type(&raw, "item", ni);
    let e = edges(nu, ni, 700, false, 1);
    write_rel(&raw, "user__rates__item", &e);
    (raw, e, nu, ni)
}

#[test]
fn bipartite_split_is_leak_free_with_its_reverse_type() {
    let dir = tempfile::tempdir().unwrap();
    let (raw, input, nu, ni) = bipartite_input(dir.path());
    for ratio in [None, Some(0.3)] {
        let out = dir.path().join(format!("o{ratio:?}"));
        let rep = build(&opts(&raw, &out, |o| o.disjoint_train_ratio = ratio), &Progress::new())
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(rep.notes.iter().all(|n| !n.contains("one direction only")), "{:?}", rep.notes);
        let ds = Dataset::open(&out).unwrap();
        flashgnn_store::verify(&ds, &mut |_, _| {}).unwrap();
        let ls = ds.manifest().link_split.clone().unwrap();
        assert_eq!(ls.edge_type.as_deref(), Some("user__rates__item"));
        assert!(!ls.undirected);
        let t = ds.manifest().types.clone().unwrap();
        assert_eq!(t.edge_types[ds.link_edge_type().unwrap()].key(), "user__rates__item");
        assert!(t.edge_types.iter().any(|e| e.key() == "item__rev_rates__user"));
        // Counts: PyG's ⌊fraction · pairs⌋, one positive per pair (a bipartite pair has one direction).
        let pairs: BTreeSet<(i64, i64)> = input.iter().map(|&(s, d)| (s as i64, d as i64)).collect();
        let m = pairs.len() as u64;
        assert_eq!(ls.input_pairs, m);
        let (nv, nt) = ((0.1 * m as f64) as u64, (0.2 * m as f64) as u64);
        let (v, te, tr) =
            (ds.link_split("val").unwrap(), ds.link_split("test").unwrap(), ds.link_split("train").unwrap());
        assert_eq!((v.src.len() as u64, te.src.len() as u64), (nv, nt));
        let nd = ratio.map_or(0, |r| (r * (m - nv - nt) as f64) as u64);
        assert_eq!(tr.src.len() as u64, if nd > 0 { nd } else { m - nv - nt });
        // Every positive is an input edge, in local ids.
        for s in [&v, &te, &tr] {
            assert!(units(s).is_subset(&pairs));
            assert!(s.src.iter().all(|&u| u >= 0 && (u as u64) < nu) && s.dst.iter().all(|&x| (x as u64) < ni));
        }
        // The stored relation: the input minus every held-out pair (copies kept);
        // rev_rates: exactly its reverses.
        let mut held: BTreeSet<(i64, i64)> = units(&v).union(&units(&te)).copied().collect();
        if nd > 0 {
            held.extend(units(&tr));
        }
        let (mut want, mut want_rev): (BTreeMap<u64, Vec<u64>>, BTreeMap<u64, Vec<u64>>) = Default::default();
        for &(s, d) in &input {
            if !held.contains(&(s as i64, d as i64)) {
                want.entry(d).or_default().push(s);
                want_rev.entry(s).or_default().push(d);
            }
        }
        want.values_mut().chain(want_rev.values_mut()).for_each(|l| l.sort_unstable());
        assert_eq!(stored(&ds, "user__rates__item"), want);
        assert_eq!(stored(&ds, "item__rev_rates__user"), want_rev);
        // Negatives: item ids, never an input edge, distinct across val and test.
        let mut seen = BTreeSet::new();
        for s in [&v, &te] {
            let neg = s.neg.as_ref().unwrap();
            assert_eq!(neg.len(), s.src.len() * 2);
            for (j, &w) in neg.iter().enumerate() {
                let u = s.src[j / 2];
                assert!(w >= 0 && (w as u64) < ni, "negative {w} is not an item");
                assert!(!pairs.contains(&(u, w)), "negative ({u}, {w}) is an edge");
                assert!(seen.insert((u, w)), "negative ({u}, {w}) twice");
            }
        }
    }
}

#[test]
fn verify_names_a_planted_leak_and_bad_ids() {
    let dir = tempfile::tempdir().unwrap();
    let (raw, input, _, ni) = bipartite_input(dir.path());
    let out = dir.path().join("o");
    build(&opts(&raw, &out, |_| {}), &Progress::new()).unwrap();
    let ds = Dataset::open(&out).unwrap();
    let (v, tr) = (ds.link_split("val").unwrap(), ds.link_split("train").unwrap());
    drop(ds);
    let pairs: BTreeSet<(i64, i64)> = input.iter().map(|&(s, d)| (s as i64, d as i64)).collect();
    // Point validation positive 0 at a kept (stored) edge whose source's
    // pairs with the positive's negatives are no edges (so the leak is
    // what verify reports).
    let negs = &v.neg.as_ref().unwrap()[..2];
    let (u, x) = tr
        .src
        .iter()
        .zip(&tr.dst)
        .map(|(&a, &b)| (a, b))
        .find(|&(a, _)| negs.iter().all(|&w| !pairs.contains(&(a, w))))
        .unwrap();
    let plant = |src: &[i64], dst: &[i64], out: &Path| {
        for (part, vals) in [("src", src), ("dst", dst)] {
            let f = format!("link_val_{part}.npy");
            write_i64(&out.join(&f), &[vals.len() as u64], vals);
            let mpath = out.join("manifest.json");
            let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&mpath).unwrap()).unwrap();
            m["files"][&f]["crc32c"] = crc32c::crc32c(&std::fs::read(out.join(&f)).unwrap()).into();
            std::fs::write(&mpath, flashgnn_format::manifest::seal_json("m", &m.to_string()).unwrap()).unwrap();
        }
    };
    let (mut src, mut dst) = (v.src.clone(), v.dst.clone());
    src[0] = u;
    dst[0] = x;
    plant(&src, &dst, &out);
    let ds = Dataset::open(&out).unwrap();
    let e = flashgnn_store::verify(&ds, &mut |_, _| {}).unwrap_err().to_string();
    assert!(
        e.contains("link_val_src.npy") && e.contains("message-passing graph") && e.contains("user__rates__item"),
        "{e}"
    );
    drop(ds);
    // The manifest's edge type must be a stored one, and a typed split must name it.
    let mpath = out.join("manifest.json");
    let good = std::fs::read(&mpath).unwrap();
    for (edit, want) in [(Some("user__buys__item"), "is not a stored edge type"), (None, "edge_type is missing")] {
        let mut m: serde_json::Value = serde_json::from_slice(&good).unwrap();
        match edit {
            Some(e) => m["link_split"]["edge_type"] = e.into(),
            None => drop(m["link_split"].as_object_mut().unwrap().remove("edge_type")),
        }
        std::fs::write(&mpath, flashgnn_format::manifest::seal_json("m", &m.to_string()).unwrap()).unwrap();
        let e = Dataset::open(&out).err().unwrap().to_string();
        assert!(e.contains(want) && e.contains("manifest.json"), "{e}");
    }
    std::fs::write(&mpath, &good).unwrap();
    // A destination id beyond the item count: the file, the value, the bound.
    dst[0] = ni as i64;
    src[0] = v.src[0];
    plant(&src, &dst, &out);
    let e = Dataset::open(&out).and_then(|ds| flashgnn_store::verify(&ds, &mut |_, _| {})).unwrap_err().to_string();
    assert!(e.contains("link_val_dst.npy") && e.contains(&format!("{ni}")) && e.contains("\"item\""), "{e}");
}

#[test]
fn same_type_split_is_the_homogeneous_one() {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw");
    let n = 150;
    write_type(&raw, "paper", n);
    write_type(&raw, "author", 20);
    let input = edges(n, n, 900, true, 2);
    write_rel(&raw, "paper__cites__paper", &input);
    write_rel(&raw, "author__writes__paper", &[(0, 1), (1, 2), (2, 3)]);
    let out = dir.path().join("o");
    let rep = build(&opts(&raw, &out, |o| o.link_edge_type = Some("paper__cites__paper".into())), &Progress::new())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rep.manifest.link_split.as_ref().unwrap().edge_type.as_deref(), Some("paper__cites__paper"));
    let ds = Dataset::open(&out).unwrap();
    flashgnn_store::verify(&ds, &mut |_, _| {}).unwrap();
    let ls = ds.manifest().link_split.clone().unwrap();
    assert!(ls.undirected, "a symmetric relation is split as undirected");
    let key = |u: i64, v: i64| (u.min(v), u.max(v));
    let pairs: BTreeSet<(i64, i64)> =
        input.iter().filter(|e| e.0 != e.1).map(|&(s, d)| key(s as i64, d as i64)).collect();
    let m = pairs.len() as u64;
    let (v, t) = (ds.link_split("val").unwrap(), ds.link_split("test").unwrap());
    assert_eq!((v.src.len() as u64, t.src.len() as u64), ((0.1 * m as f64) as u64, (0.2 * m as f64) as u64));
    let held: BTreeSet<(i64, i64)> = units(&v).union(&units(&t)).map(|&(a, b)| key(a, b)).collect();
    assert!(held.is_subset(&pairs));
    // Held-out pairs leave in both directions; the rest stays, copies kept.
    let mut want: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for &(s, d) in &input {
        if s == d || !held.contains(&key(s as i64, d as i64)) {
            want.entry(d).or_default().push(s);
        }
    }
    want.values_mut().for_each(|l| l.sort_unstable());
    let got = stored(&ds, "paper__cites__paper");
    // --add-reverse coalesces a relation within one type into its undirected form.
    let mut want_und: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for (&d, l) in &want {
        for &s in l {
            want_und.entry(d).or_default().push(s);
            want_und.entry(s).or_default().push(d);
        }
    }
    want_und.values_mut().for_each(|l| {
        l.sort_unstable();
        l.dedup()
    });
    assert_eq!(got, want_und);
    let mut seen = BTreeSet::new();
    for s in [&v, &t] {
        for (j, &w) in s.neg.as_ref().unwrap().iter().enumerate() {
            let u = s.src[j / 2];
            assert!(u != w && (w as u64) < n && !pairs.contains(&key(u, w)) && seen.insert(key(u, w)));
        }
    }
    // The other relation is built as given.
    assert_eq!(stored(&ds, "author__writes__paper").values().map(|l| l.len()).sum::<usize>(), 3);
}

#[test]
fn typed_refusals_name_what_they_refuse() {
    let dir = tempfile::tempdir().unwrap();
    let (raw, _, _, _) = bipartite_input(dir.path());
    let out = dir.path().join("o");
    let refuse = |o: BuildOptions, want: &[&str]| {
        let e = build(&o, &Progress::new()).unwrap_err().to_string();
        for w in want {
            assert!(e.contains(w), "{e} (wanted {w:?})");
        }
        assert!(!o.output.exists());
    };
    refuse(
        opts(&raw, &out, |o| o.link_edge_type = Some("user__buys__item".into())),
        &["--link-edge-type user__buys__item", "user__rates__item"],
    );
    let given = |o: &mut BuildOptions| {
        o.link_split = None;
        o.link_split_seed = None;
        o.link_split_files = Some(std::path::PathBuf::from("split"));
    };
    refuse(opts(&raw, &out, given), &["--link-split-files", "typed"]);
    let no_split = |o: &mut BuildOptions| {
        o.link_split = None;
        o.link_split_seed = None;
        o.link_edge_type = Some("user__rates__item".into());
    };
    refuse(opts(&raw, &out, no_split), &["--link-edge-type needs --link-split"]);
    // An out-of-range id in the split relation: file, edge, value and bound.
    let bad = dir.path().join("bad");
    write_type(&bad, "user", 5);
    write_type(&bad, "item", 5);
    write_rel(&bad, "user__rates__item", &[(0, 1), (1, 2), (2, 3), (3, 5)]);
    refuse(
        opts(&bad, &out, |_| {}),
        &["user__rates__item/edge_index.npy", "edge 3, column 1", "node id 5 >= 5", "\"item\""],
    );
    // Two edge types: name one; and a folder back from item to user could hold the reverses.
    write_rel(&raw, "item__rated_by__user", &[(0, 1)]);
    refuse(opts(&raw, &out, |_| {}), &["--link-edge-type SRC__REL__DST", "item__rated_by__user", "user__rates__item"]);
    refuse(
        opts(&raw, &out, |o| o.link_edge_type = Some("user__rates__item".into())),
        &["item__rated_by__user", "drop the folder", "--add-reverse"],
    );
    // A homogeneous input has no edge type to name.
    let homo = dir.path().join("homo");
    write_i64(&homo.join("edge_index.npy"), &[2, 2], &[0, 1, 1, 2]);
    refuse(
        opts(&homo, &out, |o| o.link_edge_type = Some("a__b__c".into())),
        &["--link-edge-type a__b__c", "homogeneous"],
    );
}

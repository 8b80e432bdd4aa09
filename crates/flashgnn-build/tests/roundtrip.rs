//! Property test of the whole importer: random edge lists with duplicates,
//! self-loops, isolated nodes and hubs are built under every normalisation
//! option, and `neighbors`/`features`/`labels`/`split` read back equal to a
//! plain in-memory model of the same normalisation. The hub case's
//! million-entry input spills through several sort runs under a tiny budget.

use std::collections::BTreeMap;
use std::path::Path;

use flashgnn_build::{build, BuildOptions, BuildVerify, FeatureLayout, Progress, Reorder, SelfLoops};
use flashgnn_format::npy::encode_header;
use flashgnn_format::Dtype;
use flashgnn_store::{Dataset, VerifyScope};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// The tests of this file one at a time: one counts the process's reads.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Graph {
    n: u64,
    edges: Vec<(u64, u64)>,
    dim: usize,
    feats: Vec<f32>,
    labels: Vec<i64>,
    train: Vec<i64>,
}

fn write_npy(path: &Path, dtype: Dtype, shape: &[u64], data: &[u8]) {
    let mut b = encode_header(dtype, shape);
    b.extend_from_slice(data);
    std::fs::write(path, b).unwrap();
}

fn write_graph(dir: &Path, g: &Graph, transposed: bool) {
    write_edges(dir, g, transposed);
    let f: Vec<u8> = g.feats.iter().flat_map(|v| v.to_le_bytes()).collect();
    write_npy(&dir.join("node_feat.npy"), Dtype::Float32, &[g.n, g.dim as u64], &f);
    let l: Vec<u8> = g.labels.iter().flat_map(|v| v.to_le_bytes()).collect();
    write_npy(&dir.join("node_label.npy"), Dtype::Int64, &[g.n], &l);
    let t: Vec<u8> = g.train.iter().flat_map(|v| v.to_le_bytes()).collect();
    write_npy(&dir.join("train_idx.npy"), Dtype::Int64, &[g.train.len() as u64], &t);
}

/// `edge_index.npy` alone: `[E, 2]` int32, or `[2, E]` int64 when `transposed`.
fn write_edges(dir: &Path, g: &Graph, transposed: bool) {
    std::fs::create_dir_all(dir).unwrap();
    let e = g.edges.len() as u64;
    let data: Vec<u8> = if transposed {
        g.edges.iter().map(|x| x.0).chain(g.edges.iter().map(|x| x.1)).flat_map(|v| (v as i64).to_le_bytes()).collect()
    } else {
        g.edges.iter().flat_map(|&(s, d)| [(s as i32).to_le_bytes(), (d as i32).to_le_bytes()].concat()).collect()
    };
    if transposed {
        write_npy(&dir.join("edge_index.npy"), Dtype::Int64, &[2, e], &data);
    } else {
        write_npy(&dir.join("edge_index.npy"), Dtype::Int32, &[e, 2], &data);
    }
}

fn random_graph(rng: &mut Xoshiro256PlusPlus, hub_degree: usize) -> Graph {
    let n = rng.random_range(1..400u64);
    let m = rng.random_range(0..3000usize);
    // Skewed endpoints: a few nodes get most edges; some ids stay isolated.
    let mut edges: Vec<(u64, u64)> = (0..m)
        .map(|_| {
            let s = (rng.random::<f64>().powi(3) * n as f64) as u64;
            let d = (rng.random::<f64>().powi(2) * n as f64) as u64;
            (s.min(n - 1), d.min(n - 1))
        })
        .collect();
    for _ in 0..rng.random_range(0..20) {
        let v = rng.random_range(0..n);
        edges.push((v, v)); // self-loops
        if let Some(&e) = edges.first() {
            edges.push(e); // duplicates
        }
    }
    if hub_degree > 0 {
        let hub = rng.random_range(0..n);
        edges.extend((0..hub_degree).map(|i| ((i as u64 * 7919) % n, hub)));
    }
    let dim = [0usize, 3, 16, 130, 600][rng.random_range(0..5)];
    let feats = (0..n as usize * dim).map(|_| rng.random_range(-10.0..10.0f32)).collect();
    let labels = (0..n).map(|_| rng.random_range(-1..7i64)).collect();
    let train = (0..n as i64).filter(|_| rng.random_bool(0.3)).collect();
    Graph { n, edges, dim, feats, labels, train }
}

fn model(g: &Graph, sym: bool, dedup: bool, loops: SelfLoops) -> Vec<Vec<u64>> {
    let mut pairs: Vec<(u64, u64)> = Vec::new();
    for &(s, d) in &g.edges {
        if s == d && loops != SelfLoops::Keep {
            continue;
        }
        pairs.push((d, s));
        if sym && s != d {
            pairs.push((s, d));
        }
    }
    if loops == SelfLoops::Add {
        pairs.extend((0..g.n).map(|v| (v, v)));
    }
    pairs.sort();
    if dedup {
        pairs.dedup();
    }
    let mut adj = vec![Vec::new(); g.n as usize];
    for (d, s) in pairs {
        adj[d as usize].push(s);
    }
    adj
}

fn check(g: &Graph, dir: &Path, opts: &BuildOptions) {
    let rep = build(opts, &Progress::new()).unwrap_or_else(|e| panic!("build failed: {e}"));
    let ds = Dataset::open(&opts.output).unwrap();
    assert_eq!(ds.num_nodes(), g.n);
    let want = model(g, opts.symmetrize, opts.dedup, opts.self_loops);
    let total: usize = want.iter().map(|a| a.len()).sum();
    assert_eq!(ds.num_edges(), total as u64, "{opts:?}");
    for v in 0..g.n {
        let mut got = ds.neighbors(v as i64).unwrap();
        got.sort();
        assert_eq!(got, want[v as usize], "neighbors of {v} with {opts:?}");
        let mut row = Vec::new();
        ds.feature_row(v as i64, &mut row).unwrap();
        let f: Vec<f32> = row.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(&f[..], &g.feats[v as usize * g.dim..(v as usize + 1) * g.dim]);
    }
    let ids: Vec<i64> = (0..g.n as i64).collect();
    assert_eq!(ds.labels(&ids).unwrap(), g.labels);
    assert_eq!(ds.split("train").unwrap(), g.train);
    // Isolated: no edge either way (no stored neighbor, and nobody's neighbor).
    let mut is_source = vec![false; g.n as usize];
    want.iter().flatten().for_each(|&s| is_source[s as usize] = true);
    let no_neighbors = want.iter().filter(|a| a.is_empty()).count() as u64;
    let isolated = (0..g.n as usize).filter(|&v| want[v].is_empty() && !is_source[v]).count() as u64;
    assert_eq!(rep.manifest.degree.no_neighbors, Some(no_neighbors), "{opts:?}");
    assert_eq!(rep.manifest.degree.isolated, isolated, "{opts:?}");
    let _ = dir;
}

#[test]
fn random_graphs_roundtrip_under_every_option() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(2026);
    let tmp = tempfile::tempdir().unwrap();
    for case in 0..12 {
        let g = random_graph(&mut rng, if case % 4 == 3 { 5000 } else { 0 });
        let input = tmp.path().join(format!("in{case}"));
        write_graph(&input, &g, case % 2 == 1);
        for (i, (sym, dedup, loops, reorder, layout)) in [
            (false, false, SelfLoops::Keep, Reorder::None, FeatureLayout::Auto),
            (true, true, SelfLoops::Drop, Reorder::None, FeatureLayout::Separate),
            (true, false, SelfLoops::Add, Reorder::Degree, FeatureLayout::Auto),
            (false, true, SelfLoops::Keep, Reorder::Degree, FeatureLayout::Separate),
            (false, true, SelfLoops::Add, Reorder::None, FeatureLayout::Auto),
        ]
        .into_iter()
        .enumerate()
        {
            let mut o = BuildOptions::new(&input, tmp.path().join(format!("out{case}_{i}")));
            o.symmetrize = sym;
            o.dedup = dedup;
            o.self_loops = loops;
            o.reorder = reorder;
            o.feature_layout = if layout == FeatureLayout::Separate || g.dim * 4 > 4096 - 40 {
                FeatureLayout::Separate
            } else {
                layout
            };
            o.page_size = [4096, 512 * 16, 4096, 4096, 4096][i];
            // 66 MiB: 64 MiB fixed + a ~2 MiB sort chunk (the hub test spills ~4 runs).
            o.memory_budget = 66 << 20;
            check(&g, &input, &o);
        }
    }
}

#[test]
fn a_streamed_dedup_builds_what_the_merge_path_builds() {
    // npy edges with a declared node count sort in buckets, and `--dedup`
    // is then applied as the layout reads the merge; the same edges as a
    // SNAP text file sort in runs, and the dedup goes through edges.sorted.
    // Same cap (both choose it from the copies pushed), same bytes, same
    // counts in the report.
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(77);
    let tmp = tempfile::tempdir().unwrap();
    for case in 0..6 {
        let g = random_graph(&mut rng, if case % 3 == 2 { 3000 } else { 0 });
        let npy = tmp.path().join(format!("npy{case}"));
        write_edges(&npy, &g, false);
        let snap = tmp.path().join(format!("snap{case}.txt"));
        let text: String = g.edges.iter().map(|&(s, d)| format!("{s}\t{d}\n")).collect();
        std::fs::write(&snap, format!("# a SNAP edge list\n{text}")).unwrap();
        for sym in [false, true] {
            let mut got = Vec::new();
            for (name, input) in [("npy", &npy), ("snap", &snap)] {
                let out = tmp.path().join(format!("out{case}_{sym}_{name}"));
                let mut o = BuildOptions::new(input, &out);
                o.symmetrize = sym;
                o.dedup = true;
                o.num_nodes = Some(g.n);
                o.dataset_id = Some(7);
                o.memory_budget = 66 << 20;
                let rep = build(&o, &Progress::new()).unwrap_or_else(|e| panic!("{name}: {e}"));
                let b = rep.manifest.build;
                let counts = (
                    b.input_edges,
                    b.duplicates_removed,
                    b.reverse_duplicates_removed,
                    b.input_edges_distinct,
                    b.input_edges_with_reverse,
                    rep.manifest.num_edges,
                    rep.manifest.graph.overflow_entries,
                    rep.manifest.degree.max,
                    rep.manifest.degree.isolated,
                );
                let bytes = ["graph.fg", "overflow.fg"].map(|f| std::fs::read(out.join(f)).unwrap());
                got.push((counts, bytes));
            }
            assert_eq!(got[0].0, got[1].0, "case {case}, symmetrize {sym}: report counts (npy, snap)");
            assert!(got[0].1 == got[1].1, "case {case}, symmetrize {sym}: dataset bytes differ between the paths");
        }
    }
}

#[test]
fn hub_with_a_million_neighbors() {
    // One node with 10^6 in-neighbors spans hundreds of overflow pages; the
    // build must stay linear and read back exactly.
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let n = 2000u64;
    let mut edges: Vec<(u64, u64)> = (0..1_000_000u64).map(|i| (i % n, 5)).collect();
    edges.extend((0..n).map(|v| (v, (v * 13) % n)));
    let g = Graph {
        n,
        edges,
        dim: 8,
        feats: (0..n * 8).map(|x| x as f32).collect(),
        labels: vec![1; n as usize],
        train: vec![0, 5],
    };
    let input = tmp.path().join("in");
    write_graph(&input, &g, false);
    let mut o = BuildOptions::new(&input, tmp.path().join("out"));
    o.memory_budget = 66 << 20;
    check(&g, &input, &o);
    let ds = Dataset::open(tmp.path().join("out")).unwrap();
    assert!(ds.layout().overflow_pages() > 200);
    let _ = BTreeMap::<u8, u8>::new();

    // `verify` reads graph.fg and overflow.fg once, checksum and structure in
    // one pass (it used to read them twice, the second time 4 KiB at a time):
    // the process's read bytes (its reader thread's included; the other test
    // of this file waits on `SERIAL`) stay near the dataset's size.
    let process_read = || {
        let io = std::fs::read_to_string("/proc/self/io").unwrap();
        io.lines().find_map(|l| l.strip_prefix("rchar: ")).unwrap().trim().parse::<u64>().unwrap()
    };
    let bytes: u64 = ds.manifest().files.values().map(|f| f.bytes).sum();
    let structure: u64 = ["graph.fg", "overflow.fg"].iter().map(|f| ds.manifest().files[*f].bytes).sum();
    assert!(structure * 2 > bytes, "graph.fg and overflow.fg are most of the dataset");
    let before = process_read();
    let rep = flashgnn_store::verify(&ds, &mut |_, _| ()).unwrap();
    let read = process_read() - before;
    assert_eq!(rep.overflow_pages, ds.layout().overflow_pages());
    assert_eq!(rep.slots, n);
    assert!(read >= bytes && read < bytes + structure / 2, "verify read {read} B of a {bytes} B dataset");
}

/// Bytes this process has read (`rchar`: its threads' reads included).
fn process_read() -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").unwrap();
    io.lines().find_map(|l| l.strip_prefix("rchar: ")).unwrap().trim().parse::<u64>().unwrap()
}

#[test]
fn separate_features_are_read_once_and_encoded_scope_skips_them() {
    // An IGB-shaped dataset: 4 KiB feature rows, nearly all of its bytes.
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let (n, dim) = (3000u64, 1024usize);
    let g = Graph {
        n,
        edges: (0..n * 5).map(|i| (i % n, (i * 7919) % n)).collect(),
        dim,
        feats: (0..n * dim as u64).map(|x| (x % 1000) as f32 * 0.5).collect(),
        labels: vec![2; n as usize],
        train: vec![1, 2, 3],
    };
    let input = tmp.path().join("in");
    write_graph(&input, &g, false);
    let mut built = Vec::new();
    for verify in BuildVerify::ALL {
        let out = tmp.path().join(format!("out-{}", verify.name()));
        let mut o = BuildOptions::new(&input, &out);
        o.memory_budget = 66 << 20;
        o.dataset_id = Some(11);
        o.verify = verify;
        check(&g, &input, &o);
        built.push(out);
    }
    // Both modes publish the same bytes (they differ only in what they read back).
    for f in ["graph.fg", "overflow.fg", "features.fg", "feature_crc.npy"] {
        assert_eq!(std::fs::read(built[0].join(f)).unwrap(), std::fs::read(built[1].join(f)).unwrap(), "{f}");
    }
    let ds = Dataset::open(&built[0]).unwrap();
    assert_eq!(ds.layout().placement, flashgnn_format::layout::FeaturePlacement::Separate);
    let bytes: u64 = ds.manifest().files.values().map(|f| f.bytes).sum();
    let features = ds.manifest().files["features.fg"].bytes;
    assert!(features * 10 > bytes * 9, "features are most of the dataset");

    // `verify` reads features.fg once (row checks in the checksum pass; it
    // used to read it twice); the encoded scope does not read it at all.
    let before = process_read();
    let rep = flashgnn_store::verify(&ds, &mut |_, _| ()).unwrap();
    let read = process_read() - before;
    assert_eq!(rep.feature_rows, n);
    assert!(read >= bytes && read < bytes + features / 2, "verify read {read} B of a {bytes} B dataset");
    let before = process_read();
    let rep = flashgnn_store::verify_scope(&ds, VerifyScope::Encoded, &mut |_, _| ()).unwrap();
    let read = process_read() - before;
    assert_eq!((rep.feature_rows, rep.slots), (0, n));
    assert!(read < bytes - features / 2, "encoded verify read {read} B, features.fg is {features} B");
    drop(ds);

    // A flipped byte in row 1234 (past the first read chunk): `verify` names
    // the row's offset; the encoded scope trusts the rows and passes.
    let path = built[0].join("features.fg");
    let mut data = std::fs::read(&path).unwrap();
    let stride = 4096u64;
    let at = (4096 + 1234 * stride + 100) as usize;
    data[at] ^= 0x40;
    std::fs::write(&path, &data).unwrap();
    // Keep the whole-file CRC matching so the row check is what fails.
    let mpath = built[0].join("manifest.json");
    let mut m = flashgnn_format::manifest::Manifest::from_json("m", &std::fs::read_to_string(&mpath).unwrap()).unwrap();
    m.files.get_mut("features.fg").unwrap().crc32c = flashgnn_format::checksum::crc(&data);
    std::fs::write(&mpath, m.to_json()).unwrap();
    let ds = Dataset::open(&built[0]).unwrap();
    let err = flashgnn_store::verify(&ds, &mut |_, _| ()).unwrap_err().to_string();
    assert!(err.contains("features.fg") && err.contains(&(4096 + 1234 * stride).to_string()), "{err}");
    flashgnn_store::verify_scope(&ds, VerifyScope::Encoded, &mut |_, _| ()).unwrap();
}

#[test]
fn a_bad_separate_feature_row_fails_the_build_after_an_overlapped_layout() {
    // Separate rows are copied on the side thread while the layout pass
    // runs; a NaN found there still fails the build, names the row and
    // column, and publishes nothing.
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let (n, dim) = (4000u64, 1024usize);
    let mut feats: Vec<f32> = (0..n * dim as u64).map(|x| (x % 7) as f32).collect();
    feats[3001 * dim + 17] = f32::NAN;
    let g = Graph {
        n,
        edges: (0..n * 3).map(|i| (i % n, (i * 31) % n)).collect(),
        dim,
        feats,
        labels: vec![0; n as usize],
        train: vec![1],
    };
    let input = tmp.path().join("in");
    write_graph(&input, &g, false);
    let out = tmp.path().join("out");
    let mut o = BuildOptions::new(&input, &out);
    o.memory_budget = 66 << 20;
    let err = build(&o, &Progress::new()).unwrap_err().to_string();
    assert!(err.contains("node_feat.npy") && err.contains("row 3001") && err.contains("column 17"), "{err}");
    assert!(!out.exists(), "nothing published");
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), 1, "no temporary left beside the output: {left:?}");
}

//! Datasets written by format version 2 (tests/fixtures/format-v2, built
//! by the importer of commit f00c622, before the typed build) still open,
//! verify and read back what their input holds; and today's importer
//! still writes a homogeneous dataset as version 2 byte for byte: the same
//! input, options and dataset id rebuild every data file of the fixture
//! identically (and the manifest but for its timings and peak RSS).
//!
//! The fixture was made by `make_format_v2_fixture` below (ignored; run with
//! `FLASHGNN_FIXTURE_OUT=tests/fixtures/format-v2 cargo test -p
//! flashgnn-build --test format_v2 -- --ignored` on that commit). Do not
//! re-run it with newer code: the point of the files is who wrote them.

use std::path::{Path, PathBuf};

use flashgnn_build::{build, BuildOptions, FeatureLayout, Progress, Reorder};
use flashgnn_format::npy::encode_header;
use flashgnn_format::Dtype;
use flashgnn_store::Dataset;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/format-v2").join(name)
}

fn write_npy(path: &Path, dtype: Dtype, shape: &[u64], data: &[u8]) {
    let mut b = encode_header(dtype, shape);
    b.extend_from_slice(data);
    std::fs::write(path, b).unwrap();
}

fn lcg(x: &mut u64) -> u64 {
    *x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    *x >> 33
}

/// The two inputs: (name, nodes, edges, hub copies, dim, seed).
const CASES: [(&str, u64, u64, u64, u64, u64); 2] =
    [("inline", 60, 240, 300, 8, 1), ("separate", 40, 160, 200, 100, 2)];

struct Input {
    n: u64,
    edges: Vec<(u64, u64)>,
    dim: u64,
    feats: Vec<f32>,
    labels: Vec<i64>,
}

fn write_input(dir: &Path, case: usize) -> Input {
    let (_, n, e, hub, dim, seed) = CASES[case];
    std::fs::create_dir_all(dir).unwrap();
    let mut x = seed;
    let mut edges: Vec<(u64, u64)> = (0..e).map(|_| (lcg(&mut x) % n, lcg(&mut x) % n)).collect();
    edges.extend((0..hub).map(|_| (lcg(&mut x) % n, n / 3)));
    let data: Vec<u8> =
        edges.iter().flat_map(|&(s, d)| [(s as i64).to_le_bytes(), (d as i64).to_le_bytes()].concat()).collect();
    write_npy(&dir.join("edge_index.npy"), Dtype::Int64, &[edges.len() as u64, 2], &data);
    let feats: Vec<f32> = (0..n * dim).map(|_| (lcg(&mut x) % 2000) as f32 / 100.0 - 10.0).collect();
    write_npy(
        &dir.join("node_feat.npy"),
        Dtype::Float32,
        &[n, dim],
        &feats.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>(),
    );
    let labels: Vec<i64> = (0..n).map(|_| (lcg(&mut x) % 5) as i64).collect();
    write_npy(
        &dir.join("node_label.npy"),
        Dtype::Int64,
        &[n],
        &labels.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>(),
    );
    for (s, step, first) in [("train", 3, 0), ("val", 5, 1), ("test", 7, 2)] {
        let ids: Vec<u8> = (first..n).step_by(step).flat_map(|v| (v as i64).to_le_bytes()).collect();
        write_npy(&dir.join(format!("{s}_idx.npy")), Dtype::Int64, &[(ids.len() / 8) as u64], &ids);
    }
    Input { n, edges, dim, feats, labels }
}

fn options(input: &Path, out: &Path, case: usize) -> BuildOptions {
    let mut o = BuildOptions::new(input, out);
    o.page_size = 512;
    o.memory_budget = 80 << 20;
    o.dataset_id = Some(0xf1a5_0002 + case as u64);
    if case == 0 {
        o.reorder = Reorder::Degree;
        o.symmetrize = true;
        o.dedup = true;
    } else {
        o.feature_layout = FeatureLayout::Separate;
    }
    o
}

#[test]
#[ignore = "makes tests/fixtures/format-v2 (run once, on the version-2 code)"]
fn make_format_v2_fixture() {
    let out = PathBuf::from(std::env::var("FLASHGNN_FIXTURE_OUT").expect("FLASHGNN_FIXTURE_OUT"));
    let tmp = tempfile::tempdir().unwrap();
    for (i, (name, ..)) in CASES.iter().enumerate() {
        let input = tmp.path().join(name);
        write_input(&input, i);
        build(&options(&input, &out.join(name), i), &Progress::new()).unwrap();
    }
}

/// The manifest without what differs between two runs of one build.
fn stable_manifest(dir: &Path) -> serde_json::Value {
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let b = m["build"].as_object_mut().unwrap();
    for k in ["preprocess_seconds", "feature_seconds", "layout_seconds", "total_seconds", "peak_rss_bytes", "source"] {
        b.remove(k);
    }
    m.as_object_mut().unwrap().remove("checksum");
    m
}

#[test]
fn version_2_fixtures_open_verify_read_and_rebuild_byte_for_byte() {
    let tmp = tempfile::tempdir().unwrap();
    for (i, (name, ..)) in CASES.iter().enumerate() {
        let path = fixture(name);
        let ds = Dataset::open(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(ds.manifest().format_version, 2, "{name}");
        assert!(ds.manifest().types.is_none());
        assert_eq!(ds.layout().format_version(), 2);
        let rep = flashgnn_store::verify(&ds, &mut |_, _| {}).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(rep.slots, ds.num_nodes(), "{name}");
        // Reads: what the input holds (the inline case is symmetrized and deduplicated).
        let input = tmp.path().join(format!("{name}_in"));
        let inp = write_input(&input, i);
        let mut want = vec![Vec::new(); inp.n as usize];
        for &(s, d) in &inp.edges {
            want[d as usize].push(s);
            if i == 0 && s != d {
                want[s as usize].push(d);
            }
        }
        let mut row = Vec::new();
        for v in 0..inp.n {
            let w = &mut want[v as usize];
            w.sort();
            if i == 0 {
                w.dedup();
            }
            let mut got = ds.neighbors(v as i64).unwrap();
            got.sort();
            assert_eq!(&got, w, "{name}: node {v}");
            row.clear();
            ds.feature_row(v as i64, &mut row).unwrap();
            let f: Vec<f32> = row.chunks(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
            assert_eq!(f, inp.feats[(v * inp.dim) as usize..((v + 1) * inp.dim) as usize], "{name}: row {v}");
        }
        let ids: Vec<i64> = (0..inp.n as i64).collect();
        assert_eq!(ds.labels(&ids).unwrap(), inp.labels);
        assert_eq!(ds.split("val").unwrap(), (1..inp.n as i64).step_by(5).collect::<Vec<_>>());
        // Today's importer writes the same bytes.
        let out = tmp.path().join(format!("{name}_out"));
        build(&options(&input, &out, i), &Progress::new()).unwrap();
        for f in ds.manifest().files.keys() {
            let (a, b) = (std::fs::read(path.join(f)).unwrap(), std::fs::read(out.join(f)).unwrap());
            assert!(a == b, "{name}: {f} differs from the version-2 fixture");
        }
        assert_eq!(stable_manifest(&path), stable_manifest(&out), "{name}: manifest");
    }
}

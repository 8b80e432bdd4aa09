//! The typed npy input the typed-build tests share (3 node types, 4 edge
//! types of which one within a type, a type without features, lists that
//! spill on 512-byte pages, labels and splits on one type), the in-memory
//! model of what a build of it stores, and a reader of what one stored.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;

use flashgnn_build::{BuildOptions, BuildVerify, SelfLoops};
use flashgnn_format::npy::encode_header;
use flashgnn_format::slot::decode_slot;
use flashgnn_format::Dtype;
use flashgnn_store::Dataset;

pub fn write_npy(path: &Path, dtype: Dtype, shape: &[u64], data: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut b = encode_header(dtype, shape);
    b.extend_from_slice(data);
    std::fs::write(path, b).unwrap();
}

pub fn write_edges(dir: &Path, folder: &str, edges: &[(u64, u64)]) {
    let data: Vec<u8> =
        edges.iter().flat_map(|&(s, d)| [(s as i64).to_le_bytes(), (d as i64).to_le_bytes()].concat()).collect();
    write_npy(&dir.join(folder).join("edge_index.npy"), Dtype::Int64, &[edges.len() as u64, 2], &data);
}

pub fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
pub fn i64s(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Node types (sorted): author 7 (dim 3), paper 150 (dim 5, labels,
/// splits), venue 4 (no features: count from num_nodes.json).
pub const P: u64 = 150;
pub const COUNTS: [(&str, u64); 3] = [("author", 7), ("paper", P), ("venue", 4)];

pub struct Input {
    /// Folder name -> edges (local ids).
    pub edges: BTreeMap<String, Vec<(u64, u64)>>,
}

pub fn lcg(x: &mut u64) -> u64 {
    *x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    *x >> 33
}

pub fn write_input(dir: &Path) -> Input {
    let mut x = 7u64;
    let mut edges = BTreeMap::new();
    let mut writes: Vec<(u64, u64)> = (0..40).map(|_| (lcg(&mut x) % 7, lcg(&mut x) % P)).collect();
    writes.push(writes[0]); // a duplicate
                            // paper 3 is cited by every paper, several times: its list spills.
    let mut cites: Vec<(u64, u64)> = (0..300).map(|i| (i % P, 3)).collect();
    cites.extend((0..60).map(|_| (lcg(&mut x) % P, lcg(&mut x) % P)));
    cites.extend([(5, 5), (5, 5), (0, 0)]); // self-loops
    let in_venue: Vec<(u64, u64)> = (0..P).map(|p| (p, p % 4)).collect();
    let hosts: Vec<(u64, u64)> = (0..30).map(|_| (lcg(&mut x) % 4, lcg(&mut x) % P)).collect();
    edges.insert("author__writes__paper".to_string(), writes);
    edges.insert("paper__cites__paper".to_string(), cites);
    edges.insert("paper__in__venue".to_string(), in_venue);
    edges.insert("venue__hosts__paper".to_string(), hosts);
    for (f, e) in &edges {
        write_edges(dir, f, e);
    }
    let feats = |n: u64, d: u64, k: f32| -> Vec<f32> { (0..n * d).map(|i| i as f32 * 0.5 + k).collect() };
    write_npy(&dir.join("author/node_feat.npy"), Dtype::Float32, &[7, 3], &f32s(&feats(7, 3, 100.0)));
    write_npy(&dir.join("paper/node_feat.npy"), Dtype::Float32, &[P, 5], &f32s(&feats(P, 5, 200.0)));
    let labels: Vec<i64> = (0..P as i64).map(|i| if i % 5 == 4 { -1 } else { i % 3 }).collect();
    write_npy(&dir.join("paper/node_label.npy"), Dtype::Int64, &[P], &i64s(&labels));
    write_npy(&dir.join("paper/train_idx.npy"), Dtype::Int64, &[3], &i64s(&[0, 1, 2]));
    write_npy(&dir.join("paper/val_idx.npy"), Dtype::Int64, &[2], &i64s(&[5, 6]));
    std::fs::write(dir.join("num_nodes.json"), r#"{"venue": 4}"#).unwrap();
    Input { edges }
}

pub fn opts(input: &Path, out: &Path) -> BuildOptions {
    let mut o = BuildOptions::new(input, out);
    o.page_size = 512;
    o.memory_budget = 80 << 20;
    o.dataset_id = Some(0x5eed);
    o.verify = BuildVerify::All;
    o
}

pub fn offset_of(t: &str) -> u64 {
    let mut acc = 0;
    for (n, c) in COUNTS {
        if n == t {
            return acc;
        }
        acc += c;
    }
    panic!("{t}")
}

/// Per global node: per incoming relation (edge types in folder order),
/// the global sources, sorted (one copy each with `dedup`).
pub fn model(inp: &Input, dedup: bool, loops: SelfLoops) -> Vec<Vec<Vec<u64>>> {
    let n: u64 = COUNTS.iter().map(|c| c.1).sum();
    let mut out = vec![Vec::new(); n as usize];
    for (t, (tname, count)) in COUNTS.iter().enumerate() {
        let _ = t;
        for v in 0..*count {
            let g = offset_of(tname) + v;
            for (f, edges) in &inp.edges {
                let parts: Vec<&str> = f.split("__").collect();
                if parts[2] != *tname {
                    continue;
                }
                let same = parts[0] == parts[2];
                let mut l: Vec<u64> = edges
                    .iter()
                    .filter(|&&(s, d)| d == v && !(same && s == d && loops != SelfLoops::Keep))
                    .map(|&(s, _)| offset_of(parts[0]) + s)
                    .collect();
                if same && loops == SelfLoops::Add {
                    l.push(g);
                }
                l.sort();
                if dedup {
                    l.dedup();
                }
                out[g as usize].push(l);
            }
        }
    }
    out
}

/// The built dataset's lists, per node, per relation (by its slot's counts).
pub fn stored(ds: &Dataset) -> Vec<Vec<Vec<u64>>> {
    let l = ds.layout();
    let t = ds.type_table();
    (0..ds.num_nodes())
        .map(|v| {
            let (ty, _) = t.type_of(v).unwrap();
            let buf = ds.read_slot(v).unwrap();
            let slot = decode_slot(l, v, &buf, "g").unwrap();
            let ids = ds.neighbors_internal(v).unwrap();
            let mut at = 0usize;
            t.in_relations(ty)
                .iter()
                .enumerate()
                .map(|(j, _)| {
                    let c = slot.rel_count(j) as usize;
                    at += c;
                    ids[at - c..at].to_vec()
                })
                .collect()
        })
        .collect()
}

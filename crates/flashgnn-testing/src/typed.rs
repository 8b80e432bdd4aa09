//! A small typed (format version 3) dataset written directly with the
//! format crate's encoders, from edge lists in memory: what the typed
//! sampler's tests read before (and independently of) the typed builder.
//! Uses `flashgnn-format` and `std` only (the Python crate includes this
//! file for its test-only writer binding).
//!
//! Node `i` of type `t` is global node `offset(t) + i`; its slot lists, per
//! incoming edge type in declaration order, the global ids of the sources of
//! its edges of that type, ascending (repeats kept). Every type with a `dim`
//! gets float32 rows `row(v)[k] = v + k / 1000` (`v` global) in
//! `t<i>.features.fg`; every type with `classes` gets labels `local % classes`
//! (`-1` for every fifth node).

use std::collections::BTreeMap;
use std::path::Path;

use flashgnn_format::checksum::{crc, new_dataset_id};
use flashgnn_format::layout::{seal_overflow_page, FeatureHeader, FeaturePlacement, GraphHeader, OverflowHeader};
use flashgnn_format::manifest::{
    BuildInfo, DegreeStats, FeatureInfo, FileEntry, GraphInfo, LabelInfo, Manifest, GRAPH_FILE, MANIFEST_FILE,
    MANIFEST_MAGIC, OVERFLOW_FILE,
};
use flashgnn_format::slot::{encode_typed_slot, write_id};
use flashgnn_format::types::{
    feature_crc_file, features_file, labels_file, EdgeType, NodeType, TypeFeatures, TypeTable,
};
use flashgnn_format::{Dtype, Layout, FORMAT_VERSION};

/// One node type: name, count, feature width (None: no rows), classes
/// (None: no labels).
#[derive(Debug, Clone)]
pub struct TypedNodes {
    pub name: String,
    pub count: u64,
    pub dim: Option<u32>,
    pub classes: Option<u64>,
}

/// One edge type and its edges as (source local id, destination local id).
#[derive(Debug, Clone)]
pub struct TypedEdges {
    pub src: String,
    pub rel: String,
    pub dst: String,
    pub edges: Vec<(u64, u64)>,
}

/// Feature value `k` of global node `v` in the written datasets.
pub fn typed_feature(v: u64, k: u32) -> f32 {
    v as f32 + k as f32 / 1000.0
}

/// Label of local node `i` of a type with `classes` classes.
pub fn typed_label(i: u64, classes: u64) -> i64 {
    if i % 5 == 4 {
        -1
    } else {
        (i % classes) as i64
    }
}

fn npy(dtype: Dtype, values: &[u8], len: u64) -> Vec<u8> {
    let mut out = flashgnn_format::npy::encode_header(dtype, &[len]);
    out.extend_from_slice(values);
    out
}

/// Write the dataset at `out` (created) with `page_size` pages and
/// `inline_cap` inline neighbors per slot. Errors are strings naming what.
pub fn write_typed_dataset(
    out: &Path,
    nodes: &[TypedNodes],
    edges: &[TypedEdges],
    page_size: u32,
    inline_cap: u32,
) -> Result<(), String> {
    let table = TypeTable {
        node_types: nodes
            .iter()
            .map(|n| NodeType {
                name: n.name.clone(),
                count: n.count,
                features: n.dim.map(|dim| TypeFeatures { dim, dtype: Dtype::Float32, synthetic: true }),
                labels: n.classes.map(|c| LabelInfo {
                    num_classes: c,
                    labeled: (0..n.count).filter(|&i| typed_label(i, c) >= 0).count() as u64,
                }),
                splits: BTreeMap::new(),
            })
            .collect(),
        edge_types: edges
            .iter()
            .map(|e| EdgeType {
                src: e.src.clone(),
                rel: e.rel.clone(),
                dst: e.dst.clone(),
                num_edges: e.edges.len() as u64,
            })
            .collect(),
    };
    let offsets = table.offsets();
    let n = offsets[nodes.len()];
    let ty = |name: &str| table.node_type_index(name).ok_or_else(|| format!("node type {name:?} not declared"));
    // Per global node, per incoming relation (slot order), its sources.
    let mut lists: Vec<Vec<Vec<u64>>> = Vec::with_capacity(n as usize);
    for (t, nt) in nodes.iter().enumerate() {
        let r = table.in_relations(t).len();
        lists.extend((0..nt.count).map(|_| vec![Vec::new(); r]));
    }
    for (ei, e) in edges.iter().enumerate() {
        let (s, d) = (ty(&e.src)?, ty(&e.dst)?);
        let j = table.in_relations(d).iter().position(|&x| x == ei).expect("e is an incoming relation of d");
        for &(a, b) in &e.edges {
            if a >= nodes[s].count || b >= nodes[d].count {
                return Err(format!("edge ({a}, {b}) of {} out of range", e.rel));
            }
            lists[(offsets[d] + b) as usize][j].push(offsets[s] + a);
        }
    }
    for l in lists.iter_mut() {
        for r in l.iter_mut() {
            r.sort_unstable();
        }
    }
    let num_edges: u64 = edges.iter().map(|e| e.edges.len() as u64).sum();
    let cap = inline_cap as u64;
    let overflow_entries: u64 =
        lists.iter().map(|l| l.iter().map(|r| r.len() as u64).sum::<u64>().saturating_sub(cap)).sum();
    let id = new_dataset_id();
    let e = |e: flashgnn_format::FormatError| e.to_string();
    let layout = Layout::new(
        MANIFEST_FILE,
        page_size,
        n,
        num_edges,
        4,
        0,
        Dtype::Float32,
        FeaturePlacement::Inline,
        inline_cap,
        overflow_entries,
    )
    .map_err(e)?
    .with_dataset_id(Some(id))
    .with_rel_counts(MANIFEST_FILE, table.rel_counts(), true)
    .map_err(e)?;
    let p = page_size as usize;
    let mut graph = GraphHeader::from_layout(&layout).encode();
    graph.resize(layout.graph_file_bytes() as usize, 0);
    let mut overflow = OverflowHeader::from_layout(&layout).encode();
    overflow.resize(layout.overflow_file_bytes() as usize, 0);
    let mut next = 0u64;
    // Per edge type: its entries listed so far (the next node's edge base).
    let mut listed = vec![0u64; table.edge_types.len()];
    for (v, l) in lists.iter().enumerate() {
        let all: Vec<u64> = l.iter().flatten().copied().collect();
        let counts: Vec<u32> = l.iter().map(|r| r.len() as u32).collect();
        let rels = table.in_relations(table.type_of(v as u64).expect("v < num_nodes").0);
        let bases: Vec<u64> = rels.iter().map(|&r| listed[r]).collect();
        for (&r, c) in rels.iter().zip(&counts) {
            listed[r] += *c as u64;
        }
        let inline = &all[..all.len().min(cap as usize)];
        let first = if all.len() as u64 > cap { next } else { 0 };
        for &x in &all[inline.len()..] {
            let at = layout.overflow_entry_offset(next) as usize;
            write_id(x, &mut overflow[at..at + 4]);
            next += 1;
        }
        let at = layout.slot_offset(v as u64) as usize;
        let slot = &mut graph[at..at + layout.slot_bytes as usize];
        encode_typed_slot(&layout, v as u64, all.len() as u32, v as u64, first, &counts, &bases, &[], inline, slot);
    }
    for page in 1..=layout.overflow_pages() {
        let at = page as usize * p;
        seal_overflow_page(&layout, page, &mut overflow[at..at + p]);
    }
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    files.insert(GRAPH_FILE.into(), graph);
    files.insert(OVERFLOW_FILE.into(), overflow);
    for (t, nt) in nodes.iter().enumerate() {
        if let Some(fl) = table.feature_layout(t, page_size, Some(id)).map_err(e)? {
            let mut f = FeatureHeader::from_layout(&fl).encode();
            f.resize(fl.features_file_bytes() as usize, 0);
            let mut crcs = Vec::new();
            for i in 0..nt.count {
                let v = offsets[t] + i;
                let row: Vec<u8> = (0..fl.feature_dim).flat_map(|k| typed_feature(v, k).to_le_bytes()).collect();
                let (_, start, _) = fl.feature_range(i);
                f[start as usize..start as usize + row.len()].copy_from_slice(&row);
                crcs.extend_from_slice(&fl.crc(v, &row).to_le_bytes());
            }
            files.insert(features_file(t), f);
            files.insert(feature_crc_file(t), npy(Dtype::Uint32, &crcs, nt.count));
        }
        if let Some(c) = nt.classes {
            let y: Vec<u8> = (0..nt.count).flat_map(|i| typed_label(i, c).to_le_bytes()).collect();
            files.insert(labels_file(t), npy(Dtype::Int64, &y, nt.count));
        }
    }
    std::fs::create_dir_all(out).map_err(|err| format!("{}: {err}", out.display()))?;
    let mut entries = BTreeMap::new();
    for (name, bytes) in &files {
        std::fs::write(out.join(name), bytes).map_err(|err| format!("{name}: {err}"))?;
        entries.insert(name.clone(), FileEntry { bytes: bytes.len() as u64, crc32c: crc(bytes) });
    }
    let m = Manifest {
        magic: MANIFEST_MAGIC.into(),
        format_version: FORMAT_VERSION,
        created_by: "flashgnn-testing typed writer".into(),
        page_size,
        num_nodes: n,
        num_edges,
        id_bytes: 4,
        features: FeatureInfo { dim: 0, dtype: Dtype::Float32, placement: "inline".into(), synthetic: false },
        graph: GraphInfo {
            inline_cap,
            slot_bytes: layout.slot_bytes,
            slots_per_page: layout.slots_per_page,
            overflow_entries,
            rel_counts: layout.rel_counts,
        },
        degree: DegreeStats::default(),
        labels: None,
        splits: BTreeMap::new(),
        reorder: "none".into(),
        build: BuildInfo::default(),
        files: entries,
        dataset_id: Some(id),
        types: Some(table),
        link_split: None,
    };
    std::fs::write(out.join(MANIFEST_FILE), m.to_json()).map_err(|err| format!("manifest: {err}"))?;
    Ok(())
}
